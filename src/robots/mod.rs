//! The robots.txt engine: parses bytes exactly as Google's reference library does, compiles each
//! group into a prefix index, and answers "may this agent fetch this path?" with the deciding rule.
//!
//! Pure: no I/O, no async. The proxy compiles a robots.txt once per fetch and asks it per request.
//!
//! ```
//! use robotsguard::robots::Robots;
//!
//! let robots = Robots::parse(b"User-agent: *\nDisallow: /private\nAllow: /private/ok\n");
//! let verdict = robots.check_url("examplebot", b"https://example.com/private/x");
//! assert!(!verdict.allowed);
//! assert_eq!(verdict.line(), Some(2));
//! ```

pub mod canonical;
mod matcher;
mod parse;
mod pattern;
mod url;

pub use canonical::canonicalize;
pub use matcher::{DecidingRule, GlobalFallback, GroupMatch, MatchMode, Robots, Verdict};
pub use parse::{
    is_product_token_byte, product_token, reduce_agent_name, Agent, Diagnostic, DiagnosticKind,
    Directive, Group, RobotsTxt, Rule, Sitemap, DEFAULT_MAX_SIZE, MAX_LINE_BYTES,
};
pub use pattern::{escape_pattern, pattern_matches};
pub use url::path_params_query;
