//! A robots.txt engine: parses bytes exactly as Google's reference library does, compiles each
//! group into a prefix index, and answers "may this agent fetch this path?" with the deciding rule.
//!
//! Pure: no I/O, no async, no global state. Compile a robots.txt once ([`Robots`]), share it
//! behind an `Arc`, and ask it as often as needed; a check costs a binary search plus the rules
//! on the path's prefix chain. This is the engine of the robotsguard proxy, which enforces
//! robots.txt at the edge, and of its `robotsguard check` command.
//!
//! ```
//! use robotsguard_robots::Robots;
//!
//! let robots = Robots::parse(b"User-agent: *\nDisallow: /private\nAllow: /private/ok\n");
//! let verdict = robots.check_url("examplebot", b"https://example.com/private/x");
//! assert!(!verdict.allowed);
//! assert_eq!(verdict.line(), Some(2));
//! assert!(robots.check_url("examplebot", b"/private/ok/page").allowed);
//! ```
//!
//! # Google's verdicts, byte for byte
//!
//! In [`MatchMode::Exact`] (what [`Robots::parse`] compiles for) the verdict and the deciding
//! line are those of Google's open-source matcher (`AllowedByRobots` and `matching_line`): its
//! line splitting, accepted misspellings, user-agent reduction to the leading `[A-Za-z_-]` run,
//! merged groups, longest match with `Allow` winning ties, `*` and `$`, and the `index.html`
//! rule. A crawler with several product tokens (most specific first) is selected by the first one
//! that has a group of its own:
//!
//! ```
//! use robotsguard_robots::{GroupMatch, Robots};
//!
//! let robots = Robots::parse(
//!     b"User-agent: Googlebot\nDisallow: /search\n\nUser-agent: *\nDisallow: /\n",
//! );
//! let image_crawler = ["googlebot-image", "googlebot"];
//! let verdict = robots.verdict(&image_crawler, b"/photos/cat.jpg");
//! assert!(verdict.allowed);
//! assert_eq!(verdict.group, GroupMatch::Agent("googlebot"));
//! assert!(!robots.verdict(&["otherbot"], b"/photos/cat.jpg").allowed);
//! ```
//!
//! # Canonical paths, for enforcement
//!
//! A crawler's own matcher compares bytes; something that enforces robots.txt against clients
//! that may try to slip past it should not. [`MatchMode::Canonical`] puts every pattern and every
//! path in one form first ([`canonicalize`]: unreserved escapes decoded, dot segments and repeated
//! slashes removed), so evasive spellings of a disallowed path are still disallowed:
//!
//! ```
//! use robotsguard_robots::{MatchMode, Robots, RobotsTxt};
//!
//! let parsed = RobotsTxt::parse(b"User-agent: *\nDisallow: /private\n");
//! let exact = Robots::compile(&parsed, MatchMode::Exact);
//! let canonical = Robots::compile(&parsed, MatchMode::Canonical);
//! for path in ["/%70rivate", "/public/../private", "//private"] {
//!     assert!(exact.verdict(&["examplebot"], path.as_bytes()).allowed);
//!     assert!(!canonical.verdict(&["examplebot"], path.as_bytes()).allowed);
//! }
//! ```
//!
//! # What the parser ignored
//!
//! Parsing never fails. [`RobotsTxt`] holds the groups, rules and sitemaps with their line
//! numbers, and a [`Diagnostic`] for every line read differently from how it looks:
//!
//! ```
//! use robotsguard_robots::{DiagnosticKind, RobotsTxt};
//!
//! let parsed = RobotsTxt::parse(b"User-agent: FooBot/1.0\nDissallow: /tmp\n");
//! assert_eq!(parsed.groups[0].agents[0].name, "FooBot");
//! assert_eq!(parsed.groups[0].rules[0].pattern, "/tmp");
//! assert!(parsed
//!     .diagnostics
//!     .iter()
//!     .any(|d| matches!(&d.kind, DiagnosticKind::MisspelledKey { read_as: "Disallow", .. })));
//! assert_eq!(parsed.diagnostics[0].to_string(), "line 1: User-agent value read as `FooBot`");
//! ```
//!
//! # Checking URLs in bulk
//!
//! [`check`] turns verdicts into records for reports and, with the `json` feature, answers JSON
//! Lines batches ([`check::Batch`]).
//!
//! # Features
//!
//! - `json` (default): [`check::UrlVerdict`] serializes with serde, and [`check::Batch`] answers
//!   JSON Lines. Without it the crate depends on `memchr` alone.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod canonical;
pub mod check;
mod matcher;
mod parse;
mod pattern;
pub mod prefs;
mod url;

pub use canonical::canonicalize;
pub use matcher::{DecidingRule, GlobalFallback, GroupMatch, MatchMode, Robots, Verdict};
pub use parse::{
    is_product_token_byte, product_token, reduce_agent_name, Agent, Diagnostic, DiagnosticKind,
    Directive, Group, RobotsTxt, Rule, Sitemap, DEFAULT_MAX_SIZE, MAX_LINE_BYTES,
};
pub use pattern::{escape_pattern, pattern_matches};
pub use prefs::{
    content_usage_says, parse_content_usage_header, License, PreferenceEntry, PreferenceKind,
    PreferenceLine, PreferenceValue, Preferences, Statement, Use,
};
pub use url::path_params_query;

/// The README's examples run as doctests too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
