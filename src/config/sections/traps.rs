//! The `traps` and `disguised` sections: crawlers that hide behind a browser's User-Agent, caught
//! by robots.txt itself (trap paths every group disallows; clients that read robots.txt and then
//! take what it disallows to everyone).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;

pub(crate) static TRAPS: Section = Section {
    id: "traps",
    place: "in `traps`",
    title: "Trap paths",
    doc: "With traps on, robotsguard serves the origin's robots.txt itself (whatever its source), with one `Disallow:` line per trap path in every group (and a `User-agent: *` group when the file has none). A request for a trap path or below it, from anyone but `policy.allow_clients` and the trusted proxies' own addresses, is a trap hit.",
    keys: &[
        key("enabled", Ty::Bool, "`false`", "Put trap paths in the robots.txt served and watch them."),
        key("paths", Ty::List(&Ty::Str), "one derived path", "The trap paths (plain paths, at most 16); none: one per origin, `/` and 16 letters and digits, an HMAC-SHA-256 of the origin's name under the secret (the same in every replica and across restarts)."),
        key("action", Ty::Words(|| names(&TRAP_ACTIONS)), "`report`", "`report` (counted and logged, answered by the origin), `block` (`404` without contacting the origin), `ban` (`404`, and the address banned at once for `offenders.ban`, with the exact User-Agent of a browser or app that took the trap, refused as `offenders.scope` says; a request another site's page caused is never banned). `mode: report` only reports."),
        key("secret_file", Ty::Str, "the generated secret", "A file holding the secret trap paths are derived from; without it, a secret generated at first start and kept in the shared store (`state.backend: redis`) or in `state.dir`."),
    ],
};

pub(crate) static DISGUISED: Section = Section {
    id: "disguised",
    place: "in `disguised`",
    title: "Disguised crawlers",
    doc: "A client without a crawler's User-Agent that read `/robots.txt` (GET or HEAD) and then, `strikes` times within `window`, asks for paths the robots.txt in force disallows to every group is the crawler `disguised` (bound by the `*` group) for that origin. Exempt paths, allowed clients and trusted proxies never count.",
    keys: &[
        key("action", Ty::Words(|| names(&DISGUISED_ACTIONS)), "`report`", "`report` (proxied, logged as would_block, decision `would_disguised`), `block` (`403` on the paths robots.txt disallows, with a body saying why), `ban` (banned with the origin's `offenders` settings, together with its exact User-Agent)."),
        key("strikes", Ty::Int { min: 1, max: 1_000_000 }, "`5`", "Requests for paths disallowed to every group that make the address a disguised crawler."),
        key("window", Ty::Duration, "`10m`", "Within how long (from the first; each later one extends it)."),
    ],
};

/// The largest `traps.secret_file` read.
const MAX_SECRET_FILE_BYTES: u64 = 4096;

/// The most trap paths an origin may list (each is a line in every group of its robots.txt).
const MAX_TRAP_PATHS: usize = 16;

/// `traps`: paths robots.txt disallows to every group, which only a client that ignores it
/// requests.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TrapsConfig {
    /// Whether the origin's robots.txt carries trap paths and requests for them are judged.
    pub enabled: bool,
    /// The trap paths (canonical, each starting with `/`); empty: one derived from the secret.
    pub paths: Vec<String>,
    /// What a trap hit does.
    pub action: TrapAction,
    /// The file the secret was read from, when given.
    pub secret_file: Option<PathBuf>,
    /// The secret read from `secret_file`; `None`: the generated one of the deployment.
    pub secret: Option<TrapSecret>,
}

/// A secret that trap paths are derived from. Never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct TrapSecret(pub Arc<[u8]>);

impl std::fmt::Debug for TrapSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TrapSecret(..)")
    }
}

/// `traps.action`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum TrapAction {
    /// Count and log the hit; answer what the origin answers.
    #[default]
    Report,
    /// Answer 404 without contacting the origin.
    Block,
    /// Ban the address at once for `offenders.ban` (and answer as the ban does).
    Ban,
}

impl TrapAction {
    /// The spelling used in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            TrapAction::Report => "report",
            TrapAction::Block => "block",
            TrapAction::Ban => "ban",
        }
    }
}

pub(crate) const TRAP_ACTIONS: [(&str, TrapAction); 3] = [
    ("report", TrapAction::Report),
    ("block", TrapAction::Block),
    ("ban", TrapAction::Ban),
];

/// `disguised`: a client with no crawler's User-Agent that read robots.txt and then requests
/// what it disallows to every group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DisguisedConfig {
    /// What is done once the address reached `strikes` within `window`.
    pub action: DisguisedAction,
    /// Such requests within `window` that make the address a disguised crawler.
    pub strikes: u32,
    /// The window strikes are counted in (from the first).
    pub window: Duration,
}

impl Default for DisguisedConfig {
    fn default() -> Self {
        DisguisedConfig {
            action: DisguisedAction::Report,
            strikes: 5,
            window: Duration::from_secs(600),
        }
    }
}

/// `disguised.action`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DisguisedAction {
    /// Log `would_block` and count; proxy.
    Report,
    /// Answer 403 on the paths robots.txt disallows, with a body saying why.
    Block,
    /// Ban the address with the origin's `offenders` settings.
    Ban,
}

impl DisguisedAction {
    /// The spelling used in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            DisguisedAction::Report => "report",
            DisguisedAction::Block => "block",
            DisguisedAction::Ban => "ban",
        }
    }
}

pub(crate) const DISGUISED_ACTIONS: [(&str, DisguisedAction); 3] = [
    ("report", DisguisedAction::Report),
    ("block", DisguisedAction::Block),
    ("ban", DisguisedAction::Ban),
];

/// Reads a `traps` section over `base`, key by key (`paths` replaces the inherited list).
pub(crate) fn traps(
    sink: &mut Sink,
    node: Option<&Node>,
    base: &TrapsConfig,
    base_dir: &Path,
) -> TrapsConfig {
    let mut out = base.clone();
    let Some(table) = node.and_then(|n| Table::read(sink, n, &TRAPS, "`traps`")) else {
        return out;
    };
    if let Some(enabled) = table
        .get("enabled")
        .and_then(|n| reader::boolean(sink, n, "enabled"))
    {
        out.enabled = enabled;
    }
    if let Some(action) = table
        .get("action")
        .and_then(|n| reader::choice(sink, n, "action", &TRAP_ACTIONS))
    {
        out.action = action;
    }
    if let Some(n) = table.get("paths") {
        let mut paths = Vec::new();
        for item in reader::one_or_many(n) {
            let Some(text) = reader::nonempty_string(sink, item, "paths") else {
                continue;
            };
            if !text.starts_with('/') || text == "/" || text.contains(['*', '$', '?', '#']) {
                sink.error_hint(
                    item.pos,
                    format!("trap path {} must be a plain path below `/`", quote(text)),
                    "e.g. /private-archive/ (no `*`, `$` or query: it is a Disallow line)",
                );
                continue;
            }
            if text
                .bytes()
                .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
            {
                sink.error(item.pos, format!("trap path {} holds a space", quote(text)));
                continue;
            }
            // Compared with canonical request paths, so written in the same form.
            let canonical = crate::robots::canonicalize(text.as_bytes());
            let canonical = String::from_utf8_lossy(&canonical).into_owned();
            if !paths.contains(&canonical) {
                paths.push(canonical);
            }
        }
        if paths.len() > MAX_TRAP_PATHS {
            sink.error(
                n.pos,
                format!("at most {MAX_TRAP_PATHS} trap paths (each is a line in every group)"),
            );
            paths.truncate(MAX_TRAP_PATHS);
        }
        out.paths = paths;
    }
    if let Some(n) = table.get("secret_file") {
        if let Some(file) = reader::nonempty_string(sink, n, "secret_file") {
            let path = base_dir.join(file);
            out.secret = None;
            if !sink.config_only {
                match crate::config::read_secret_file(&path, MAX_SECRET_FILE_BYTES) {
                    Ok(secret) => {
                        out.secret = Some(TrapSecret(Arc::from(secret.into_bytes())));
                    }
                    Err(e) => sink.error(n.pos, e.to_string()),
                }
            }
            out.secret_file = Some(path);
        }
    }
    out
}

/// Reads a `disguised` section over `base`, key by key.
pub(crate) fn disguised(
    sink: &mut Sink,
    node: Option<&Node>,
    base: &DisguisedConfig,
) -> DisguisedConfig {
    let mut out = *base;
    let Some(table) = node.and_then(|n| Table::read(sink, n, &DISGUISED, "`disguised`")) else {
        return out;
    };
    if let Some(action) = table
        .get("action")
        .and_then(|n| reader::choice(sink, n, "action", &DISGUISED_ACTIONS))
    {
        out.action = action;
    }
    if let Some(strikes) = table
        .get("strikes")
        .and_then(|n| reader::integer(sink, n, "strikes", 1, 1_000_000))
    {
        out.strikes = u32::try_from(strikes).unwrap_or(u32::MAX);
    }
    if let Some(n) = table.get("window") {
        match reader::duration(sink, n, "window") {
            Some(d) if d.is_zero() => sink.error(n.pos, "`window` must be longer than 0s"),
            Some(d) => out.window = d,
            None => {}
        }
    }
    out
}
