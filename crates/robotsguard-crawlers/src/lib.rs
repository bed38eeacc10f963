//! Crawler catalogue and User-Agent identification: tells which crawler sent a request and which robots.txt tokens it answers to. Pure code: no I/O, no async.
//!
//! - [`Catalogue`]: the known crawlers (built in from `crates/robotsguard-crawlers/crawlers.yaml`, or supplied by
//!   config) with one Aho-Corasick automaton over their User-Agent patterns.
//! - [`RobotsTokenScanner`]: per origin, the product tokens its robots.txt names, so that a
//!   crawler missing from the catalogue still meets the group written for it.
//! - [`Identifier`]: runs the stages (catalogue, robots.txt names, generic rules) on one
//!   User-Agent and returns a borrowed [`Identity`] with its ordered [`TokenList`].
//! - [`describe`] and [`report`]: output for the CLI.
//! - [`feed`]: catalogue feeds read into entries and merged with the built-in ones.
//!
//! ```
//! use robotsguard_crawlers::{Category, Identifier};
//!
//! let identifier = Identifier::builtin(true)?;
//! let ua = b"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)";
//! let crawler = identifier.identify(ua, None).expect("GPTBot is in the catalogue");
//! assert_eq!(crawler.name, "GPTBot");
//! assert_eq!(crawler.category, Category::AiTraining);
//! assert_eq!(crawler.tokens.first(), Some("gptbot"));
//! // A browser is not a crawler.
//! assert!(identifier
//!     .identify(b"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0", None)
//!     .is_none());
//! # Ok::<(), robotsguard_crawlers::CatalogueError>(())
//! ```
//!
//! Whole-word rule (all stages): a match must not have an ASCII letter, digit, `_` or
//! non-ASCII byte immediately before or after it; `-`, `.`, `/`, spaces and other
//! punctuation are boundaries. Matching is ASCII case-insensitive.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

/// A typed error that is its one-line message: for functions whose callers only say what went
/// wrong, so that each kind of failure still has a type of its own.
macro_rules! message_error {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name(String);

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::error::Error for $name {}
    };
}

mod catalogue;
pub mod category;
mod describe;
pub mod feed;
mod feed_screen;
mod identify;
mod memo;
pub mod purpose;
mod robots_tokens;
mod verdicts;
mod words;

pub use words::MAX_NAMES_CONSIDERED;

pub use catalogue::{
    builtin_defs, check_format, compile_format_regex, parse_catalogue_yaml, Catalogue,
    CatalogueError, CrawlerDef, CrawlerInfo, FormatError, ListFormat, NamedEntry, VerifyData,
    BUILTIN_YAML, MAX_FORMAT_MATCHES, MIN_PATTERN_LEN, OTHER_LABEL,
};
pub use category::Category;
pub use describe::{describe, report, IdentityReport, OwnedIdentity};
pub use identify::{
    GenericRule, Identifier, Identity, IdentitySource, Named, TokenIter, TokenList, EMPTY_UA_NAME,
    UNNAMED_NAME,
};
pub use purpose::{Purpose, Purposes};
pub use robots_tokens::{RobotsTokenScanner, MIN_ROBOTS_TOKEN_LEN};

/// The README's examples run as doctests too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
