//! Reads the per-origin settings (`origins[]` entries and the `block` and
//! `robots` sections they share with `defaults`), merging defaults key by
//! key.

use std::path::Path;
use std::time::Duration;

use super::address::{check_sni, parse_host, parse_upstream};
use super::error::Pos;
use super::error::{did_you_mean, one_of};
use super::error::{quote, Sink};
use super::reader::{self, Table};
use super::schema::{MAX_NAME_LEN, MAX_ROBOTS_MAX_SIZE, MIN_ROBOTS_MAX_SIZE};
use super::sections::{BLOCK, ORIGIN, PATHS, ROBOTS, UPSTREAM_TLS};
use super::sections::{
    CONTENT_SIGNALS, CRAWL_DELAY, HEALTH_CHECK, OFFENDERS, PASSIVE_HEALTH, POLICY, PURPOSE_POLICY,
    UPSTREAM_TIMEOUTS,
};
use super::template::check_body;
use super::tree::{Node, Value};
use super::{Action, HealthCheck, PolicyConfig, UpstreamHealth, UpstreamTimeouts};
use super::{
    BlockConfig, EscapedSlashes, Forward, Mode, OnUnreachable, OriginConfig, PathsConfig,
    RobotsConfig, RobotsSource, UpstreamTls,
};
use crate::crawlers::{Category, Purpose};

pub(crate) const MODES: [(&str, Mode); 3] = [
    ("enforce", Mode::Enforce),
    ("report", Mode::Report),
    ("off", Mode::Off),
];

pub(crate) const ON_UNREACHABLE: [(&str, OnUnreachable); 2] = [
    ("disallow", OnUnreachable::Disallow),
    ("allow", OnUnreachable::Allow),
];

/// The robots settings that `defaults.robots` may set for every origin.
#[derive(Clone, Debug)]
pub(crate) struct RobotsSettings {
    pub refresh: Duration,
    pub timeout: Duration,
    pub on_unreachable: OnUnreachable,
    pub max_size: usize,
}

/// `defaults`, resolved: what an origin gets for each key it leaves out.
#[derive(Clone, Debug)]
pub(crate) struct Defaults {
    pub mode: Mode,
    pub block: BlockConfig,
    pub robots: RobotsSettings,
    pub paths: PathsConfig,
    pub upstream_timeouts: UpstreamTimeouts,
    pub upstream_health: UpstreamHealth,
    pub policy: PolicyConfig,
    pub impostors: super::Impostors,
    pub crawl_delay: super::CrawlDelayConfig,
    pub offenders: super::OffendersConfig,
    pub web_bot_auth: Option<super::WebBotAuthMode>,
    pub traps: super::TrapsConfig,
    pub disguised: super::DisguisedConfig,
    pub content_signals: super::ContentSignalsConfig,
}

/// An origin plus what the cross-origin checks need: where its name and
/// each host are written. Name and hosts are recorded even when other parts
/// of the origin are wrong, so duplicates are still found.
pub(crate) struct Parsed {
    pub config: OriginConfig,
    pub name: Option<(String, Pos)>,
    pub hosts: Vec<(String, Pos)>,
}

/// Reads one entry of `origins`. Returns `None` (after reporting) only if
/// the entry is not a mapping.
pub(crate) fn parse_origin(
    sink: &mut Sink,
    node: &Node,
    defaults: &Defaults,
    known: &KnownCrawlers,
    base_dir: &Path,
) -> Option<Parsed> {
    let table = Table::read(sink, node, &ORIGIN, "each origin")?;

    let name = match table.get("name") {
        Some(n) => origin_name(sink, n).map(|name| (name, n.pos)),
        None => {
            sink.error_hint(table.pos, "origin is missing `name`", "e.g. name: shop");
            None
        }
    };

    let hosts = match table.get("hosts") {
        Some(n) => hosts(sink, n),
        None => {
            sink.error_hint(
                table.pos,
                "origin is missing `hosts`",
                "list the Host names it serves, e.g. hosts: [shop.example]",
            );
            Vec::new()
        }
    };

    let upstreams = match table.get("upstream") {
        Some(n) => {
            let items = reader::one_or_many(n);
            if items.is_empty() {
                sink.error(n.pos, "`upstream` must list at least one address");
            }
            items
                .iter()
                .filter_map(|item| {
                    let text = reader::nonempty_string(sink, item, "upstream")?;
                    parse_upstream(text)
                        .map_err(|p| sink.problem(item.pos, p))
                        .ok()
                })
                .collect()
        }
        None => {
            sink.error_hint(
                table.pos,
                "origin is missing `upstream`",
                "e.g. upstream: 127.0.0.1:8081",
            );
            Vec::new()
        }
    };

    let first_host = hosts.first().map(|(h, _)| h.clone()).unwrap_or_default();
    let upstream_tls = table
        .get("tls")
        .and_then(|n| upstream_tls(sink, n, &first_host, base_dir));

    let mode = table
        .get("mode")
        .and_then(|n| reader::choice(sink, n, "mode", &MODES))
        .unwrap_or(defaults.mode);
    let block = block(sink, table.get("block"), &defaults.block);
    let robots = robots(sink, table.get("robots"), &defaults.robots, base_dir);
    let paths = paths(sink, table.get("paths"), &defaults.paths);
    let timeouts = upstream_timeouts(
        sink,
        table.get("upstream_timeouts"),
        &defaults.upstream_timeouts,
    );
    let health = upstream_health(sink, &table, &defaults.upstream_health);
    let policy = policy(sink, table.get("policy"), &defaults.policy, known);
    let impostors = table
        .get("impostors")
        .and_then(|n| reader::choice(sink, n, "impostors", &IMPOSTORS))
        .unwrap_or(defaults.impostors);
    let crawl_delay = crawl_delay(sink, table.get("crawl_delay"), &defaults.crawl_delay, known);
    let offenders = offenders(sink, table.get("offenders"), &defaults.offenders);
    let web_bot_auth = web_bot_auth_mode(sink, table.get("web_bot_auth")).or(defaults.web_bot_auth);
    let traps = super::traps::traps(sink, table.get("traps"), &defaults.traps, base_dir);
    let disguised = super::traps::disguised(sink, table.get("disguised"), &defaults.disguised);
    let content_signals = content_signals(
        sink,
        table.get("content_signals"),
        &defaults.content_signals,
    );

    let config = OriginConfig {
        name: name.as_ref().map(|(n, _)| n.clone()).unwrap_or_default(),
        hosts: hosts.iter().map(|(h, _)| h.clone()).collect(),
        upstreams,
        upstream_tls,
        mode,
        block,
        robots,
        paths,
        upstream_timeouts: timeouts,
        upstream_health: health,
        policy,
        impostors,
        crawl_delay,
        offenders,
        web_bot_auth,
        traps,
        disguised,
        content_signals,
    };
    Some(Parsed {
        config,
        name,
        hosts,
    })
}

fn origin_name(sink: &mut Sink, node: &Node) -> Option<String> {
    let name = reader::nonempty_string(sink, node, "name")?;
    let valid = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if !valid {
        sink.error_hint(
            node.pos,
            format!(
                "origin name {} has characters other than A-Z a-z 0-9 _ . -",
                quote(name)
            ),
            "the name is a metric label; e.g. name: shop-eu",
        );
        return None;
    }
    if name.len() > MAX_NAME_LEN {
        sink.error(
            node.pos,
            format!("origin name is longer than {MAX_NAME_LEN} characters"),
        );
        return None;
    }
    Some(name.to_owned())
}

/// The normalised hosts and their positions; duplicates within the origin
/// are reported here, duplicates across origins by the caller.
fn hosts(sink: &mut Sink, node: &Node) -> Vec<(String, Pos)> {
    let items = reader::one_or_many(node);
    if items.is_empty() {
        sink.error(node.pos, "`hosts` must list at least one host name");
    }
    let mut out: Vec<(String, Pos)> = Vec::with_capacity(items.len());
    for item in items {
        let Some(text) = reader::string(sink, item, "hosts") else {
            continue;
        };
        let host = match parse_host(text) {
            Ok(host) => host,
            Err(p) => {
                sink.problem(item.pos, p);
                continue;
            }
        };
        if let Some((_, first)) = out.iter().find(|(h, _)| *h == host) {
            sink.error(
                item.pos,
                format!(
                    "host {} is listed twice in this origin (first at line {}, column {})",
                    quote(&host),
                    first.line,
                    first.column
                ),
            );
            continue;
        }
        out.push((host, item.pos));
    }
    out
}

/// `tls: false`, `tls: true` or `tls: {sni, verify, ca, client_cert, client_key}` (paths
/// relative to `base_dir`).
fn upstream_tls(
    sink: &mut Sink,
    node: &Node,
    first_host: &str,
    base_dir: &std::path::Path,
) -> Option<UpstreamTls> {
    match &node.value {
        Value::Bool(false) => None,
        Value::Bool(true) => Some(UpstreamTls {
            sni: first_host.to_owned(),
            verify: true,
            ca: None,
            client_cert: None,
        }),
        Value::Map(_) => {
            let table = Table::read(sink, node, &UPSTREAM_TLS, "`tls`")?;
            let sni = match table.get("sni") {
                Some(n) => {
                    let sni = reader::string(sink, n, "sni")?;
                    if let Err(p) = check_sni(sni) {
                        sink.problem(n.pos, p);
                        return None;
                    }
                    sni.to_ascii_lowercase()
                }
                None => first_host.to_owned(),
            };
            let verify = match table.get("verify") {
                Some(n) => reader::boolean(sink, n, "verify")?,
                None => true,
            };
            let (ca, client_cert) = reader::tls_client_files(sink, &table, base_dir)?;
            Some(UpstreamTls {
                sni,
                verify,
                ca,
                client_cert,
            })
        }
        other => {
            sink.error_hint(
                node.pos,
                format!(
                    "`tls` must be true, false or a mapping, not {}",
                    other.kind()
                ),
                "e.g. tls: true, or tls: {sni: shop.example, verify: true}",
            );
            None
        }
    }
}

/// Reads a `block` section over `base`: each key given replaces the
/// inherited one, the others are kept.
pub(crate) fn block(sink: &mut Sink, node: Option<&Node>, base: &BlockConfig) -> BlockConfig {
    let mut out = base.clone();
    let Some(table) = node.and_then(|n| Table::read(sink, n, &BLOCK, "`block`")) else {
        return out;
    };
    if let Some(n) = table.get("status") {
        if let Some(status) = reader::integer(sink, n, "status", 400, 599) {
            // In range 400..=599, so it fits a u16.
            out.status = u16::try_from(status).unwrap_or(out.status);
        }
    }
    if let Some(n) = table.get("body") {
        if let Some(body) = reader::string(sink, n, "body") {
            match check_body(body) {
                Ok(()) => out.body = Some(body.to_owned()),
                Err(p) => sink.problem(n.pos, p),
            }
        }
    }
    if let Some(n) = table.get("license_url") {
        if let Some(url) = reader::nonempty_string(sink, n, "license_url") {
            let lower = url.to_ascii_lowercase();
            let absolute = (lower.starts_with("https://") || lower.starts_with("http://"))
                && !url
                    .bytes()
                    .any(|b| b.is_ascii_whitespace() || b.is_ascii_control() || b == b'>');
            if absolute {
                out.license_url = Some(url.to_owned());
            } else {
                sink.error_hint(
                    n.pos,
                    format!(
                        "`license_url` must be an absolute http(s) URL, not {}",
                        quote(url)
                    ),
                    "e.g. license_url: https://shop.example/license.xml",
                );
            }
        }
    }
    out
}

/// The spellings of `content_signals.action`.
pub(crate) const SIGNAL_ACTIONS: [(&str, super::SignalAction); 3] = [
    ("enforce", super::SignalAction::Enforce),
    ("report", super::SignalAction::Report),
    ("ignore", super::SignalAction::Ignore),
];

/// Reads a `content_signals` section over `base`, key by key.
pub(crate) fn content_signals(
    sink: &mut Sink,
    node: Option<&Node>,
    base: &super::ContentSignalsConfig,
) -> super::ContentSignalsConfig {
    let mut out = *base;
    let Some(table) =
        node.and_then(|n| Table::read(sink, n, &CONTENT_SIGNALS, "`content_signals`"))
    else {
        return out;
    };
    if let Some(action) = table
        .get("action")
        .and_then(|n| reader::choice(sink, n, "action", &SIGNAL_ACTIONS))
    {
        out.action = action;
    }
    if let Some(header) = table
        .get("header")
        .and_then(|n| reader::boolean(sink, n, "header"))
    {
        out.header = header;
    }
    if let Some(multi_purpose) = table
        .get("multi_purpose")
        .and_then(|n| reader::choice(sink, n, "multi_purpose", &MULTI_PURPOSE))
    {
        out.multi_purpose = multi_purpose;
    }
    out
}

/// A list of purposes (`[search, training]`), for `crawlers.extra` entries.
pub(crate) fn purpose_list(sink: &mut Sink, node: &Node) -> Vec<Purpose> {
    let choices: Vec<(&'static str, Purpose)> =
        Purpose::ALL.iter().map(|p| (p.as_str(), *p)).collect();
    let mut out = Vec::new();
    for item in reader::one_or_many(node) {
        if let Some(purpose) = reader::choice(sink, item, "purposes", &choices) {
            if !out.contains(&purpose) {
                out.push(purpose);
            }
        }
    }
    out
}

/// `controls` of a `crawlers.extra` entry: per purpose, the robots.txt token its operator names
/// for refusing that use without refusing the crawler (`{training: Example-Extended}`). Each
/// purpose must be one of the entry's `purposes`, each token a robots.txt group name other than
/// the entry's own tokens.
pub(crate) fn purpose_controls(
    sink: &mut Sink,
    node: &Node,
    purposes: crate::crawlers::Purposes,
    own_tokens: &[String],
) -> crate::crawlers::purpose::PurposeControls {
    let purpose_names: Vec<&str> = Purpose::ALL.iter().map(|p| p.as_str()).collect();
    let mut pairs: Vec<(Purpose, &str)> = Vec::new();
    for (key, key_pos, value) in map_entries(sink, Some(node), "controls") {
        let Some(purpose) = Purpose::ALL.iter().copied().find(|p| p.as_str() == key) else {
            sink.error_hint(
                key_pos,
                format!(
                    "unknown purpose {}{}",
                    quote(key),
                    did_you_mean(key, &purpose_names)
                ),
                one_of(&purpose_names),
            );
            continue;
        };
        if !purposes.contains(purpose) {
            sink.error_hint(
                key_pos,
                format!("`controls` names {purpose}, which is not one of this crawler's purposes"),
                "list it under `purposes`, or remove the control",
            );
            continue;
        }
        let Some(token) = reader::nonempty_string(sink, value, "controls") else {
            continue;
        };
        if !crate::crawlers::purpose::is_group_token(token) {
            sink.error_hint(
                value.pos,
                format!("control token {} is not a robots.txt group name", quote(token)),
                "letters, `-` and `_` only: robots.txt reads a User-agent name up to any other character",
            );
            continue;
        }
        if own_tokens.iter().any(|own| own.eq_ignore_ascii_case(token)) {
            sink.error_hint(
                value.pos,
                format!("control token {} is one of this crawler's own tokens", quote(token)),
                "a group for it would refuse the crawler itself; name the operator's separate token",
            );
            continue;
        }
        pairs.push((purpose, token));
    }
    crate::crawlers::purpose::PurposeControls::of(pairs)
}

pub(crate) const ESCAPED_SLASHES: [(&str, EscapedSlashes); 3] = [
    ("decode", EscapedSlashes::Decode),
    ("reject", EscapedSlashes::Reject),
    ("keep", EscapedSlashes::Keep),
];

pub(crate) const FORWARD: [(&str, Forward); 2] = [
    ("canonical", Forward::Canonical),
    ("original", Forward::Original),
];

/// Reads a `paths` section over `base`, key by key.
pub(crate) fn paths(sink: &mut Sink, node: Option<&Node>, base: &PathsConfig) -> PathsConfig {
    let mut out = *base;
    let Some(table) = node.and_then(|n| Table::read(sink, n, &PATHS, "`paths`")) else {
        return out;
    };
    if let Some(v) = table
        .get("escaped_slashes")
        .and_then(|n| reader::choice(sink, n, "escaped_slashes", &ESCAPED_SLASHES))
    {
        out.escaped_slashes = v;
    }
    if let Some(v) = table
        .get("forward")
        .and_then(|n| reader::choice(sink, n, "forward", &FORWARD))
    {
        out.forward = v;
    }
    out
}

/// The crawler names a `policy` may name: the catalogue the config asks for (built-in entries
/// unless `crawlers.builtin: false`, plus `crawlers.extra`), as the catalogue spells them.
#[derive(Debug, Clone, Default)]
pub(crate) struct KnownCrawlers {
    pub names: Vec<String>,
    /// Catalogue feeds are configured: a name outside `names` may come from one.
    pub open: bool,
}

impl KnownCrawlers {
    /// "; did you mean `X`?" for a misspelt crawler name, or nothing. Names are compared as the
    /// config keys are (lower case, `-` as `_`), and suggested as the catalogue spells them.
    pub(crate) fn suggest(&self, word: &str) -> String {
        let folded: Vec<String> = self
            .names
            .iter()
            .map(|n| n.to_ascii_lowercase().replace('-', "_"))
            .collect();
        let candidates: Vec<&str> = folded.iter().map(String::as_str).collect();
        super::error::closest(word, &candidates)
            .and_then(|found| candidates.iter().position(|c| *c == found))
            .map_or_else(String::new, |i| {
                format!("; did you mean `{}`?", self.names[i])
            })
    }

    /// The catalogue spelling of `name` (compared case-insensitively).
    pub(crate) fn find(&self, name: &str) -> Option<&str> {
        self.names
            .iter()
            .find(|known| known.eq_ignore_ascii_case(name))
            .map(String::as_str)
    }
}

pub(crate) const ACTIONS: [(&str, Action); 4] = [
    ("enforce", Action::Enforce),
    ("pass", Action::Pass),
    ("block", Action::Block),
    ("license", Action::License),
];

/// Reads a `policy` section over `base`: `categories` and `crawlers` entry by entry,
/// `allow_clients` and `exempt_paths` replacing the inherited lists when given.
pub(crate) fn policy(
    sink: &mut Sink,
    node: Option<&Node>,
    base: &PolicyConfig,
    known: &KnownCrawlers,
) -> PolicyConfig {
    let mut out = base.clone();
    let Some(table) = node.and_then(|n| Table::read(sink, n, &POLICY, "`policy`")) else {
        return out;
    };
    let category_names: Vec<&str> = Category::ALL.iter().map(|c| c.as_str()).collect();
    for (key, key_pos, value) in map_entries(sink, table.get("categories"), "categories") {
        let Some(category) = Category::ALL.iter().find(|c| c.as_str() == key) else {
            sink.error_hint(
                key_pos,
                format!(
                    "unknown category {}{}",
                    quote(key),
                    did_you_mean(key, &category_names)
                ),
                one_of(&category_names),
            );
            continue;
        };
        if let Some(action) = reader::choice(sink, value, key, &ACTIONS) {
            out.categories[category.index()] = action;
        }
    }
    for (key, key_pos, value) in map_entries(sink, table.get("crawlers"), "crawlers") {
        let Some(name) = known.find(key).or(known.open.then_some(key)) else {
            sink.error_hint(
                key_pos,
                format!("no crawler is named {}{}", quote(key), known.suggest(key)),
                "use a name from `robotsguard identify` or crates/robotsguard-crawlers/crawlers.yaml, or add it under `crawlers.extra`",
            );
            continue;
        };
        let Some(action) = reader::choice(sink, value, key, &ACTIONS) else {
            continue;
        };
        out.crawlers
            .retain(|(existing, _)| !existing.eq_ignore_ascii_case(name));
        out.crawlers.push((name.to_owned(), action));
    }
    let purpose_names: Vec<&str> = Purpose::ALL.iter().map(|p| p.as_str()).collect();
    for (key, key_pos, value) in map_entries(sink, table.get("purposes"), "purposes") {
        let Some(purpose) = Purpose::ALL.iter().find(|p| p.as_str() == key) else {
            sink.error_hint(
                key_pos,
                format!(
                    "unknown purpose {}{}",
                    quote(key),
                    did_you_mean(key, &purpose_names)
                ),
                one_of(&purpose_names),
            );
            continue;
        };
        if let Some(rule) = purpose_rule(sink, value, key) {
            out.purposes[purpose.index()] = Some(rule);
        }
    }
    if let Some(n) = table.get("allow_clients") {
        out.allow_clients = reader::networks(sink, n, "allow_clients");
    }
    if let Some(n) = table.get("exempt_paths") {
        let mut paths = Vec::new();
        for item in reader::one_or_many(n) {
            let Some(text) = reader::nonempty_string(sink, item, "exempt_paths") else {
                continue;
            };
            if !text.starts_with('/') {
                sink.error_hint(
                    item.pos,
                    format!("exempt path {} must start with `/`", quote(text)),
                    "e.g. /.well-known/",
                );
                continue;
            }
            // Compared with canonical request paths, so written in the same form.
            let canonical = crate::robots::canonicalize(text.as_bytes());
            paths.push(String::from_utf8_lossy(&canonical).into_owned());
        }
        out.exempt_paths = paths;
    }
    out
}

/// The spellings of `multi_purpose`.
pub(crate) const MULTI_PURPOSE: [(&str, super::MultiPurpose); 2] = [
    ("allow", super::MultiPurpose::Allow),
    ("block", super::MultiPurpose::Block),
];

/// One `policy.purposes` value: an action (`block`), or `{action: block, multi_purpose:
/// block}`.
fn purpose_rule(sink: &mut Sink, node: &Node, purpose: &str) -> Option<super::PurposeRule> {
    if !matches!(node.value, Value::Map(_)) {
        let action = reader::choice(sink, node, purpose, &ACTIONS)?;
        return Some(super::PurposeRule {
            action,
            multi_purpose: super::MultiPurpose::Allow,
        });
    }
    let table = Table::read(sink, node, &PURPOSE_POLICY, "a purpose's policy")?;
    let multi_purpose = table
        .get("multi_purpose")
        .and_then(|n| reader::choice(sink, n, "multi_purpose", &MULTI_PURPOSE))
        .unwrap_or_default();
    let Some(action_node) = table.get("action") else {
        sink.error_hint(
            node.pos,
            format!("`policy.purposes.{purpose}` needs `action`"),
            format!("e.g. {purpose}: {{action: block, multi_purpose: block}}"),
        );
        return None;
    };
    let action = reader::choice(sink, action_node, "action", &ACTIONS)?;
    Some(super::PurposeRule {
        action,
        multi_purpose,
    })
}

/// The entries of a mapping whose keys are names (not a fixed set): `(key, key position, value)`.
fn map_entries<'a>(
    sink: &mut Sink,
    node: Option<&'a Node>,
    what: &str,
) -> Vec<(&'a str, Pos, &'a Node)> {
    let Some(node) = node else {
        return Vec::new();
    };
    let Value::Map(entries) = &node.value else {
        sink.error_hint(
            node.pos,
            format!("`{what}` must be a mapping, not {}", node.value.kind()),
            format!("e.g. {what}: {{NAME: block}}"),
        );
        return Vec::new();
    };
    let mut out = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        match &key.value {
            Value::Str(name) => out.push((name.as_str(), key.pos, value)),
            other => sink.error(
                key.pos,
                format!("keys of `{what}` must be names, not {}", other.kind()),
            ),
        }
    }
    out
}

/// A duration that must be longer than zero.
fn positive_duration(sink: &mut Sink, node: &Node, what: &str) -> Option<Duration> {
    let d = reader::duration(sink, node, what)?;
    if d.is_zero() {
        sink.error(node.pos, format!("`{what}` must be longer than 0s"));
        return None;
    }
    Some(d)
}

/// The spellings of `web_bot_auth.mode`.
pub(crate) const WEB_BOT_AUTH_MODES: [(&str, super::WebBotAuthMode); 3] = [
    ("observe", super::WebBotAuthMode::Observe),
    ("optional", super::WebBotAuthMode::Optional),
    ("required", super::WebBotAuthMode::Required),
];

/// Reads an origin's (or `defaults`') `web_bot_auth` section: its `mode`, if set.
pub(crate) fn web_bot_auth_mode(
    sink: &mut Sink,
    node: Option<&Node>,
) -> Option<super::WebBotAuthMode> {
    let table = node.and_then(|n| {
        Table::read(
            sink,
            n,
            &super::sections::ORIGIN_WEB_BOT_AUTH,
            "`web_bot_auth`",
        )
    })?;
    table
        .get("mode")
        .and_then(|n| reader::choice(sink, n, "mode", &WEB_BOT_AUTH_MODES))
}

/// The spellings of `crawl_delay.action`.
pub(crate) const CRAWL_DELAY_ACTIONS: [(&str, super::CrawlDelayAction); 3] = [
    ("enforce", super::CrawlDelayAction::Enforce),
    ("report", super::CrawlDelayAction::Report),
    ("ignore", super::CrawlDelayAction::Ignore),
];

/// Reads a `crawl_delay` section over `base`, key by key.
pub(crate) fn crawl_delay(
    sink: &mut Sink,
    node: Option<&Node>,
    base: &super::CrawlDelayConfig,
    known: &KnownCrawlers,
) -> super::CrawlDelayConfig {
    let mut out = base.clone();
    let Some(table) = node.and_then(|n| Table::read(sink, n, &CRAWL_DELAY, "`crawl_delay`")) else {
        return out;
    };
    for (key, key_pos, value) in map_entries(sink, table.get("crawlers"), "crawlers") {
        // A typo would silently leave the crawler on the default: unknown names are errors.
        let Some(name) = known.find(key) else {
            sink.error_hint(
                key_pos,
                format!("no crawler is named {}{}", quote(key), known.suggest(key)),
                "use a name from `robotsguard identify` or crates/robotsguard-crawlers/crawlers.yaml, or add it under `crawlers.extra`",
            );
            continue;
        };
        if let Some(action) = reader::choice(sink, value, key, &CRAWL_DELAY_ACTIONS) {
            out.crawlers
                .retain(|(existing, _)| !existing.eq_ignore_ascii_case(name));
            out.crawlers.push((name.to_owned(), action));
        }
    }
    if let Some(action) = table
        .get("action")
        .and_then(|n| reader::choice(sink, n, "action", &CRAWL_DELAY_ACTIONS))
    {
        out.action = action;
    }
    if let Some(max) = table
        .get("max")
        .and_then(|n| positive_duration(sink, n, "max"))
    {
        out.max = max;
    }
    out
}

/// The spellings of `offenders.action`.
pub(crate) const OFFENDERS_ACTIONS: [(&str, super::OffendersAction); 3] = [
    ("ban", super::OffendersAction::Ban),
    ("report", super::OffendersAction::Report),
    ("off", super::OffendersAction::Off),
];

/// The spellings of `offenders.scope`.
pub(crate) const BAN_SCOPES: [(&str, super::BanScope); 2] = [
    ("crawlers", super::BanScope::Crawlers),
    ("address", super::BanScope::Address),
];

/// Reads an `offenders` section over `base`, key by key.
pub(crate) fn offenders(
    sink: &mut Sink,
    node: Option<&Node>,
    base: &super::OffendersConfig,
) -> super::OffendersConfig {
    let mut out = *base;
    let Some(table) = node.and_then(|n| Table::read(sink, n, &OFFENDERS, "`offenders`")) else {
        return out;
    };
    if let Some(action) = table
        .get("action")
        .and_then(|n| reader::choice(sink, n, "action", &OFFENDERS_ACTIONS))
    {
        out.action = action;
    }
    if let Some(scope) = table
        .get("scope")
        .and_then(|n| reader::choice(sink, n, "scope", &BAN_SCOPES))
    {
        out.scope = scope;
    }
    if let Some(strikes) = table
        .get("strikes")
        .and_then(|n| reader::integer(sink, n, "strikes", 1, 1_000_000))
    {
        out.strikes = u32::try_from(strikes).unwrap_or(u32::MAX);
    }
    for (key, slot) in [("window", &mut out.window), ("ban", &mut out.ban)] {
        if let Some(d) = table.get(key).and_then(|n| positive_duration(sink, n, key)) {
            *slot = d;
        }
    }
    out
}

/// Reads an `upstream_timeouts` section over `base`, key by key.
pub(crate) fn upstream_timeouts(
    sink: &mut Sink,
    node: Option<&Node>,
    base: &UpstreamTimeouts,
) -> UpstreamTimeouts {
    let mut out = *base;
    let Some(table) =
        node.and_then(|n| Table::read(sink, n, &UPSTREAM_TIMEOUTS, "`upstream_timeouts`"))
    else {
        return out;
    };
    for (key, slot) in [
        ("connect", &mut out.connect),
        ("read", &mut out.read),
        ("write", &mut out.write),
        ("idle", &mut out.idle),
    ] {
        if let Some(d) = table.get(key).and_then(|n| positive_duration(sink, n, key)) {
            *slot = d;
        }
    }
    out
}

/// Reads `passive_health`, `health_check` and `dns_refresh` of a `defaults` or origin table over
/// `base`.
pub(crate) fn upstream_health(
    sink: &mut Sink,
    table: &Table<'_>,
    base: &UpstreamHealth,
) -> UpstreamHealth {
    let mut out = base.clone();
    if let Some(passive) = table
        .get("passive_health")
        .and_then(|n| Table::read(sink, n, &PASSIVE_HEALTH, "`passive_health`"))
    {
        if let Some(n) = passive.get("failures") {
            if let Some(count) = reader::integer(sink, n, "failures", 1, 1000) {
                out.failures = u32::try_from(count).unwrap_or(out.failures);
            }
        }
        if let Some(d) = passive
            .get("cooloff")
            .and_then(|n| positive_duration(sink, n, "cooloff"))
        {
            out.cooloff = d;
        }
    }
    if let Some(check) = table
        .get("health_check")
        .and_then(|n| Table::read(sink, n, &HEALTH_CHECK, "`health_check`"))
    {
        let path = match check.get("path") {
            Some(p) => reader::nonempty_string(sink, p, "path").and_then(|text| {
                if text.starts_with('/') && !text.bytes().any(|b| b <= b' ' || b == 0x7f) {
                    Some(text.to_owned())
                } else {
                    sink.error_hint(
                        p.pos,
                        format!("health check path {} must start with `/`", quote(text)),
                        "e.g. path: /healthz",
                    );
                    None
                }
            }),
            None => {
                sink.error_hint(
                    check.pos,
                    "`health_check` is missing `path`",
                    "e.g. path: /healthz",
                );
                None
            }
        };
        let interval = match check.get("interval") {
            Some(i) => positive_duration(sink, i, "interval"),
            None => Some(Duration::from_secs(5)),
        };
        if let (Some(path), Some(interval)) = (path, interval) {
            out.check = Some(HealthCheck { path, interval });
        }
    }
    if let Some(d) = table
        .get("dns_refresh")
        .and_then(|n| positive_duration(sink, n, "dns_refresh"))
    {
        out.dns_refresh = d;
    }
    out
}

/// Reads `refresh`, `timeout`, `on_unreachable` and `max_size` over `base`.
/// Shared by `defaults.robots` and each origin's `robots`.
pub(crate) fn robots_settings(
    sink: &mut Sink,
    table: &Table<'_>,
    base: &RobotsSettings,
) -> RobotsSettings {
    let mut out = base.clone();
    if let Some(n) = table.get("refresh") {
        if let Some(d) = reader::duration(sink, n, "refresh") {
            // Refreshing more than once a second would hammer the origin
            // and buys nothing.
            if d < Duration::from_secs(1) {
                sink.error(n.pos, "`refresh` must be at least 1s");
            } else {
                out.refresh = d;
            }
        }
    }
    if let Some(n) = table.get("timeout") {
        if let Some(d) = reader::duration(sink, n, "timeout") {
            if d.is_zero() {
                sink.error(n.pos, "`timeout` must be longer than 0s");
            } else {
                out.timeout = d;
            }
        }
    }
    if let Some(n) = table.get("on_unreachable") {
        if let Some(v) = reader::choice(sink, n, "on_unreachable", &ON_UNREACHABLE) {
            out.on_unreachable = v;
        }
    }
    if let Some(n) = table.get("max_size") {
        if let Some(bytes) = reader::size(sink, n, "max_size") {
            match usize::try_from(bytes) {
                Ok(b) if b < MIN_ROBOTS_MAX_SIZE => sink.error_hint(
                    n.pos,
                    format!("`max_size` is {b} bytes; it must be at least 500KiB ({MIN_ROBOTS_MAX_SIZE} bytes)"),
                    "RFC 9309 requires parsing at least 500 KiB of robots.txt",
                ),
                Ok(b) if b <= MAX_ROBOTS_MAX_SIZE => out.max_size = b,
                _ => sink.error(
                    n.pos,
                    format!("`max_size` must be at most 64MiB ({MAX_ROBOTS_MAX_SIZE} bytes)"),
                ),
            }
        }
    }
    out
}

#[derive(Clone, Copy, PartialEq)]
enum SourceKind {
    Origin,
    File,
    Inline,
}

/// The words `robots.source` accepts (for the reference).
pub(crate) fn source_words() -> Vec<&'static str> {
    SOURCES.iter().map(|(name, _)| *name).collect()
}

const SOURCES: [(&str, SourceKind); 3] = [
    ("origin", SourceKind::Origin),
    ("file", SourceKind::File),
    ("inline", SourceKind::Inline),
];

/// Reads an origin's `robots` section over the defaults.
fn robots(
    sink: &mut Sink,
    node: Option<&Node>,
    base: &RobotsSettings,
    base_dir: &Path,
) -> RobotsConfig {
    let table = node.and_then(|n| Table::read(sink, n, &ROBOTS, "`robots`"));
    let settings = match &table {
        Some(t) => robots_settings(sink, t, base),
        None => base.clone(),
    };
    let source = match &table {
        Some(t) => robots_source(sink, t, &settings, base_dir),
        None => RobotsSource::Origin { url: None },
    };
    // A copy robotsguard holds itself (file, inline) is what crawlers must read, so it is served
    // by default; an origin's own robots.txt is proxied unless asked otherwise.
    let serve = table
        .as_ref()
        .and_then(|t| t.get("serve"))
        .and_then(|n| reader::boolean(sink, n, "serve"))
        .unwrap_or(!matches!(source, RobotsSource::Origin { .. }));
    RobotsConfig {
        source,
        refresh: settings.refresh,
        timeout: settings.timeout,
        on_unreachable: settings.on_unreachable,
        max_size: settings.max_size,
        serve,
    }
}

/// `source` and the key it needs (`path` for file, `text` for inline,
/// optionally `url` for origin). Keys that belong to another source are
/// errors rather than ignored: they show the operator meant something else.
fn robots_source(
    sink: &mut Sink,
    table: &Table<'_>,
    settings: &RobotsSettings,
    base_dir: &Path,
) -> RobotsSource {
    let source_node = table.get("source");
    let kind = source_node
        .map(|n| reader::choice(sink, n, "source", &SOURCES))
        .unwrap_or(Some(SourceKind::Origin));
    // An invalid `source` was reported; checking the other keys against a
    // guess would only add confusing errors.
    let Some(kind) = kind else {
        return RobotsSource::Origin { url: None };
    };
    let (kind_name, needs) = match kind {
        SourceKind::Origin => ("origin", None),
        SourceKind::File => ("file", Some("path")),
        SourceKind::Inline => ("inline", Some("text")),
    };
    for (key, used_by) in [("path", "file"), ("text", "inline"), ("url", "origin")] {
        if used_by == kind_name {
            continue;
        }
        if let Some(pos) = table.key_pos(key) {
            sink.error_hint(
                pos,
                format!("`{key}` is only used with `source: {used_by}`, but the source is `{kind_name}`"),
                if kind == SourceKind::Origin {
                    format!("add `source: {used_by}`, or remove `{key}`")
                } else {
                    format!("remove `{key}`")
                },
            );
        }
    }
    let needed = needs.and_then(|key| {
        let found = table.get(key);
        if found.is_none() {
            let pos = source_node.map_or(table.pos, |n| n.pos);
            sink.error_hint(
                pos,
                format!("`source: {kind_name}` needs `{key}`"),
                if key == "path" {
                    "e.g. path: robots/shop.txt (relative to the config file)"
                } else {
                    "add `text: |` followed by the robots.txt lines"
                },
            );
        }
        found
    });
    match kind {
        SourceKind::Origin => {
            let url = table.get("url").and_then(|n| {
                let url = reader::nonempty_string(sink, n, "url")?;
                match check_robots_url(url) {
                    Ok(()) => Some(url.to_owned()),
                    Err(message) => {
                        sink.error_hint(
                            n.pos,
                            message,
                            "e.g. /robots.txt or https://cdn.example/shop/robots.txt",
                        );
                        None
                    }
                }
            });
            RobotsSource::Origin { url }
        }
        SourceKind::File => {
            let path = needed
                .and_then(|n| reader::nonempty_string(sink, n, "path"))
                .map(|p| base_dir.join(p))
                .unwrap_or_default();
            RobotsSource::File { path }
        }
        SourceKind::Inline => {
            let text = needed
                .and_then(|n| {
                    let text = reader::string(sink, n, "text")?;
                    if text.len() > settings.max_size {
                        sink.error(
                            n.pos,
                            format!(
                                "inline robots.txt is {} bytes, more than `max_size` ({} bytes)",
                                text.len(),
                                settings.max_size
                            ),
                        );
                    }
                    Some(text.to_owned())
                })
                .unwrap_or_default();
            RobotsSource::Inline { text }
        }
    }
}

/// A robots.txt location: a path on the origin (`/robots.txt`) or an
/// absolute http(s) URL with a host.
fn check_robots_url(url: &str) -> Result<(), String> {
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "`url` {} contains spaces or control characters",
            quote(url)
        ));
    }
    if url.starts_with('/') {
        if url.starts_with("//") {
            return Err(format!(
                "`url` {} must be a path or an http(s) URL, not `//host`",
                quote(url)
            ));
        }
        return Ok(());
    }
    let lower = url.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"));
    match rest {
        Some(rest) if !rest.is_empty() && !rest.starts_with('/') => Ok(()),
        Some(_) => Err(format!("`url` {} has no host", quote(url))),
        None => Err(format!(
            "`url` {} must be a path starting with `/` or an http:// or https:// URL",
            quote(url)
        )),
    }
}

/// `off` is `ignore` (impostors are not looked for), the word an operator reaches for and the
/// one Helm turns into `false`.
pub(crate) const IMPOSTORS: [(&str, super::Impostors); 4] = [
    ("block", super::Impostors::Block),
    ("report", super::Impostors::Report),
    ("ignore", super::Impostors::Ignore),
    ("off", super::Impostors::Ignore),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn robots_urls() {
        assert!(check_robots_url("/robots.txt").is_ok());
        assert!(check_robots_url("/shop/robots.txt").is_ok());
        assert!(check_robots_url("https://cdn.example/robots.txt").is_ok());
        assert!(check_robots_url("HTTP://cdn.example").is_ok());
        assert!(check_robots_url("robots.txt").is_err());
        assert!(check_robots_url("ftp://x/robots.txt").is_err());
        assert!(check_robots_url("https://").is_err());
        assert!(check_robots_url("https:///x").is_err());
        assert!(check_robots_url("//cdn.example/robots.txt").is_err());
        assert!(check_robots_url("/a b").is_err());
    }
}
