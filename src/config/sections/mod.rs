//! The config file, section by section: each file here holds a section's key rows (name, type,
//! default, doc), from which the reader checks keys (unknown-key errors, did-you-mean) and the
//! reference page and JSON Schema are generated (`super::reference`).
//!
//! A new key: add its row to its section's file, read it in that section's reader, run
//! `scripts/gen-docs.sh` (CONTRIBUTING.md, "Adding a config key").

// What every section's reader uses; each section file starts with `use super::*;`.
#[allow(unused_imports)]
use std::collections::HashMap;
#[allow(unused_imports)]
use std::fmt;
#[allow(unused_imports)]
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
#[allow(unused_imports)]
use std::path::{Path, PathBuf};
#[allow(unused_imports)]
use std::time::Duration;

#[allow(unused_imports)]
use crate::crawlers::{builtin_defs, CatalogueError, Category, CrawlerDef, Purpose, VerifyData};

#[allow(unused_imports)]
use super::address::{check_sni, parse_bind, parse_host, parse_upstream};
#[allow(unused_imports)]
use super::error::{did_you_mean, one_of, quote, Pos, Sink};
#[allow(unused_imports)]
use super::reader::{self, positive_duration, Table};
#[allow(unused_imports)]
use super::template::check_body;
#[allow(unused_imports)]
use super::tree::{Node, Value};

mod top;
pub(crate) use top::*;
mod listen;
pub use listen::*;
mod admin;
pub use admin::*;
mod limits;
pub use limits::*;
mod access_log;
pub use access_log::*;
mod defaults;
pub(crate) use defaults::*;
mod block;
pub use block::*;
mod robots;
pub use robots::*;
mod paths;
pub use paths::*;
mod upstream;
pub use upstream::*;
mod policy;
pub use policy::*;
mod crawl_delay;
pub use crawl_delay::*;
mod offenders;
pub use offenders::*;
mod crawlers;
pub use crawlers::*;
mod origins;
pub use origins::*;
mod verify;
pub use verify::*;
mod traps;
pub use traps::*;
mod response_signals;
pub use response_signals::*;
mod state;
pub use state::*;
mod reports;
pub use reports::*;
mod preview;
pub use preview::*;
mod decision;
pub(crate) use decision::{check_clashes as check_decision_clashes, decision, DECISION};
pub(crate) use decision::{default_trusted_callers, DEFAULT_DECISION_TIMEOUT};
pub use decision::{DecisionConfig, OnDecisionError};

/// The value a key takes.
pub(crate) enum Ty {
    /// Any text.
    Str,
    /// A file path, relative to the config file's directory.
    Path,
    /// An `http://` or `https://` URL.
    Url,
    Bool,
    /// An integer within bounds (inclusive).
    Int {
        min: i128,
        max: i128,
    },
    /// `250ms`, `30s`, `5m`, `24h`, `1d`, `1m30s`.
    Duration,
    /// Bytes, or `500KiB`, `1MiB`.
    Size,
    /// One of the reader's words (a YAML 1.1 boolean is read as the word it spells).
    Words(fn() -> Vec<&'static str>),
    /// `IP:PORT`.
    Address,
    /// `host:port` (a DNS name or an address).
    HostPort,
    /// A CIDR network or a single address.
    Network,
    /// A mapping documented as its own section.
    Section(&'static Section),
    /// A YAML list.
    List(&'static Ty),
    /// One value, or a list of them.
    OneOrList(&'static Ty),
    /// Any of these shapes.
    AnyOf(&'static [Ty]),
    /// A mapping of free keys (`keys` names the allowed ones when it is a closed set) to values.
    MapOf {
        keys: Option<fn() -> Vec<&'static str>>,
        value: &'static Ty,
    },
}

/// One key of a section.
pub(crate) struct Key {
    pub name: &'static str,
    pub ty: Ty,
    /// The default in words; a value in backticks alone (`` `10s` ``) is also the schema's
    /// `default`. Empty when the key is required.
    pub default: &'static str,
    pub required: bool,
    /// Markdown; the first sentence is what an editor shows.
    pub doc: &'static str,
}

/// A mapping of the config: the keys the reader accepts there, each documented.
pub(crate) struct Section {
    /// The JSON Schema `$defs` name and the reference page's anchor.
    pub id: &'static str,
    /// Completes "unknown key `x` ...", e.g. "in origin".
    pub place: &'static str,
    pub title: &'static str,
    pub doc: &'static str,
    pub keys: &'static [Key],
}

pub(crate) const fn key(
    name: &'static str,
    ty: Ty,
    default: &'static str,
    doc: &'static str,
) -> Key {
    Key {
        name,
        ty,
        default,
        required: false,
        doc,
    }
}

pub(crate) const fn required(name: &'static str, ty: Ty, doc: &'static str) -> Key {
    Key {
        name,
        ty,
        default: "",
        required: true,
        doc,
    }
}

pub(crate) fn names<T>(options: &[(&'static str, T)]) -> Vec<&'static str> {
    options.iter().map(|(name, _)| *name).collect()
}

pub(crate) fn purposes() -> Vec<&'static str> {
    crate::crawlers::Purpose::ALL
        .iter()
        .map(|p| p.as_str())
        .collect()
}

pub(crate) fn categories() -> Vec<&'static str> {
    crate::crawlers::Category::ALL
        .iter()
        .map(|c| c.as_str())
        .collect()
}

/// Every documented section, in the reference page's order.
pub(crate) static ALL: &[&Section] = &[
    &TOP,
    &LISTENER,
    &LISTENER_TLS,
    &LISTENER_CERT,
    &ADMIN,
    &SHUTDOWN,
    &LIMITS,
    &ACCESS_LOG,
    &DEFAULTS,
    &BLOCK,
    &DEFAULT_ROBOTS,
    &PATHS,
    &UPSTREAM_TIMEOUTS,
    &PASSIVE_HEALTH,
    &HEALTH_CHECK,
    &POLICY,
    &PURPOSE_POLICY,
    &CRAWL_DELAY,
    &CONTENT_SIGNALS,
    &RESPONSE_SIGNALS,
    &OFFENDERS,
    &CRAWLERS,
    &EXTRA_CRAWLER,
    &CRAWLER_VERIFY,
    &RANGE_LIST,
    &RANGE_LIST_FORMAT,
    &FEED,
    &ORIGIN,
    &UPSTREAM_TLS,
    &ROBOTS,
    &VERIFY,
    &VERIFY_RANGES,
    &VERIFY_DNS,
    &WEB_BOT_AUTH,
    &ORIGIN_WEB_BOT_AUTH,
    &TRAPS,
    &DISGUISED,
    &SIGNATURE_AGENT,
    &STATE,
    &STATE_REDIS,
    &STATE_REDIS_SENTINEL,
    &STATE_REDIS_CLUSTER,
    &STATE_REDIS_TLS,
    &REPORTS,
    &PREVIEW,
    &DECISION,
];

/// Keys that are valid somewhere, just not where they were written: a better
/// hint than an edit-distance guess. Typos are left to the edit-distance
/// suggestion. (section place, key, hint)
pub(crate) const MISPLACED: &[(&str, &str, &str)] = &[
    (
        "at the top level",
        "mode",
        "`mode` goes under `defaults:` or under an origin",
    ),
    (
        "at the top level",
        "block",
        "`block` goes under `defaults:` or under an origin",
    ),
    (
        "at the top level",
        "robots",
        "`robots` goes under `defaults:` or under an origin",
    ),
    (
        "at the top level",
        "grace",
        "write `shutdown: {grace: 10s}`",
    ),
    (
        "in `defaults.robots`",
        "source",
        "where robots.txt comes from is set per origin, under the origin's `robots:`",
    ),
    (
        "in `defaults.robots`",
        "path",
        "robots.txt files are set per origin, under the origin's `robots:`",
    ),
    (
        "in `defaults.robots`",
        "text",
        "inline robots.txt is set per origin, under the origin's `robots:`",
    ),
    (
        "in `defaults.robots`",
        "url",
        "the robots.txt URL is set per origin, under the origin's `robots:`",
    ),
    (
        "in origin",
        "listen",
        "`listen` is set once, at the top level",
    ),
    (
        "at the top level",
        "paths",
        "`paths` goes under `defaults:` or under an origin",
    ),
    (
        "in `defaults`",
        "limits",
        "`limits` is set once, at the top level",
    ),
    (
        "at the top level",
        "policy",
        "`policy` goes under `defaults:` or under an origin",
    ),
    (
        "in origin",
        "trusted_proxies",
        "`trusted_proxies` is set once, at the top level",
    ),
    (
        "at the top level",
        "upstream_timeouts",
        "`upstream_timeouts` goes under `defaults:` or under an origin",
    ),
];

impl Section {
    /// The names of the keys, in order.
    pub(crate) fn names(&self) -> Vec<&'static str> {
        self.keys.iter().map(|k| k.name).collect()
    }

    /// Whether `name` is one of the keys.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.keys.iter().any(|k| k.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misplaced_hints_name_real_sections_and_foreign_keys() {
        for (place, key, _) in MISPLACED {
            let section = ALL.iter().find(|s| s.place == *place);
            let section = section.unwrap_or_else(|| panic!("no section {place}"));
            assert!(!section.has(key), "{key} is valid {place}");
        }
    }

    #[test]
    fn section_ids_and_places_are_unique() {
        for (i, a) in ALL.iter().enumerate() {
            for b in &ALL[i + 1..] {
                assert_ne!(a.id, b.id);
                assert_ne!(a.place, b.place, "{} and {}", a.id, b.id);
            }
        }
    }
}
