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
mod rates;
pub use rates::*;
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
mod events;
pub(crate) use events::{events, EVENTS, FIREWALL, MAX_WEBHOOK_SECRET_BYTES, WEBHOOK};
pub use events::{EventKind, EventsConfig, FirewallExport, Webhook};
mod evidence;
pub use evidence::*;
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
    /// How a reload treats a changed value when it cannot apply it; `None`: a reload applies it.
    pub restart: Option<&'static RestartOnly>,
}

/// A setting applied once at start (listening sockets, the connection limit, the thread pool,
/// pingora's grace period, the store's connection): a reload that changes it keeps the running
/// value and says that a restart is required.
pub(crate) struct RestartOnly {
    pub differs: fn(&crate::config::Config, &crate::config::Config) -> bool,
    /// Copies the running value into a new config.
    pub keep: fn(&mut crate::config::Config, &crate::config::Config),
}

impl Key {
    /// Marks the key restart-only, with how to tell a change and keep the running value.
    pub(crate) const fn restart_only(self, how: &'static RestartOnly) -> Key {
        Key {
            restart: Some(how),
            ..self
        }
    }
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
        restart: None,
    }
}

pub(crate) const fn required(name: &'static str, ty: Ty, doc: &'static str) -> Key {
    Key {
        name,
        ty,
        default: "",
        required: true,
        doc,
        restart: None,
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

/// The paths (`defaults.block`, `origins[].block`) where each section appears, walking from
/// the top level.
pub(crate) fn section_paths() -> Vec<(&'static str, Vec<String>)> {
    let mut out: Vec<(&'static str, Vec<String>)> =
        ALL.iter().map(|s| (s.id, Vec::new())).collect();
    fn walk(out: &mut Vec<(&'static str, Vec<String>)>, section: &'static Section, path: &str) {
        if let Some((_, paths)) = out.iter_mut().find(|(id, _)| *id == section.id) {
            paths.push(path.to_owned());
        }
        for key in section.keys {
            let key_path = join_path(path, key.name);
            for (inner, suffix) in nested(&key.ty) {
                walk(out, inner, &format!("{key_path}{suffix}"));
            }
        }
    }
    walk(&mut out, &TOP, "");
    out
}

/// The sections a type holds, with the path suffix that reaches them (`[]` through a list).
pub(crate) fn nested(ty: &'static Ty) -> Vec<(&'static Section, &'static str)> {
    match ty {
        Ty::Section(s) => vec![(*s, "")],
        Ty::List(inner) | Ty::OneOrList(inner) => nested(inner)
            .into_iter()
            .map(|(s, suffix)| (s, if suffix.is_empty() { "[]" } else { suffix }))
            .collect(),
        Ty::AnyOf(options) => options.iter().flat_map(nested).collect(),
        // A mapping's value sits under each of its keys: `policy.purposes.*`.
        Ty::MapOf { value, .. } => nested(value)
            .into_iter()
            .map(|(s, suffix)| (s, if suffix.is_empty() { ".*" } else { suffix }))
            .collect(),
        _ => Vec::new(),
    }
}

/// `path.key`, or `key` at the top level.
pub(crate) fn join_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Every restart-only key with its path (`admin.address`), in the reference page's order: the
/// rows marked [`Key::restart_only`], wherever their section sits.
pub(crate) fn restart_only_keys() -> Vec<(String, &'static RestartOnly)> {
    let paths = section_paths();
    let mut out = Vec::new();
    for section in ALL {
        let Some((_, at)) = paths.iter().find(|(id, _)| *id == section.id) else {
            continue;
        };
        for key in section.keys {
            if let Some(how) = key.restart {
                for path in at {
                    out.push((join_path(path, key.name), how));
                }
            }
        }
    }
    out
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
    &RATE_RULE,
    &CRAWL_DELAY,
    &CONTENT_SIGNALS,
    &RESPONSE_SIGNALS,
    &OFFENDERS,
    &CLIENT_PREFIX,
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
    &EVENTS,
    &WEBHOOK,
    &FIREWALL,
    &EVIDENCE,
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
