//! `offenders`: strikes and bans for crawlers that keep ignoring robots.txt.

use super::*;

pub(crate) static OFFENDERS: Section = Section {
    id: "offenders",
    place: "in `offenders`",
    title: "Repeat offenders",
    doc: "A strike is a request a robots.txt rule blocks that every robots.txt in force over the previous 24 hours also disallowed.",
    keys: &[
        key("action", Ty::Words(|| names(&OFFENDERS_ACTIONS)), "`report`", "`ban` (an address reaching `strikes` within `window` is refused for `ban` on every path but `/robots.txt`), `report` (logs `client would be banned`; bans in force for repeated violations are not applied: proxied, decision `would_ban`), `off` (no strikes, and no ban in force is applied: decision `ban_suspended`)."),
        key("scope", Ty::Words(|| names(&BAN_SCOPES)), "`crawlers`", "Which requests of a banned address are refused: `crawlers` (those identifying as a crawler or with no User-Agent, and those with the exact User-Agent of a client a trap or disguised ban caught) or `address` (all)."),
        key("strikes", Ty::Int { min: 1, max: 1_000_000 }, "`20`", "Strikes that ban."),
        key("window", Ty::Duration, "`10m`", "Counted from the first strike."),
        key("ban", Ty::Duration, "`1h`", "How long a ban lasts."),
    ],
};

/// `offenders`: clients that keep fetching what robots.txt disallows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OffendersConfig {
    /// What is done when a client reaches `strikes` within `window`.
    pub action: OffendersAction,
    /// Which requests from a banned address are refused.
    pub scope: BanScope,
    /// Strikes within `window` that ban.
    pub strikes: u32,
    /// The window strikes are counted in (from the first).
    pub window: Duration,
    /// How long a ban lasts.
    pub ban: Duration,
}

impl Default for OffendersConfig {
    fn default() -> Self {
        OffendersConfig {
            action: OffendersAction::Report,
            scope: BanScope::Crawlers,
            strikes: 20,
            window: Duration::from_secs(600),
            ban: Duration::from_secs(3600),
        }
    }
}

/// `offenders.scope`: which requests from a banned address are refused. An address is often
/// shared (a carrier NAT, an office, a load balancer missing from `trusted_proxies`), and a ban
/// must not take the site down for the people behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BanScope {
    /// Requests that identify as a crawler (by the catalogue, a robots.txt name or a generic bot
    /// name) or carry no User-Agent; browsers and the categories the policy passes (apps' HTTP
    /// libraries, monitoring) are proxied.
    Crawlers,
    /// Every request but a read of `/robots.txt`.
    Address,
}

impl BanScope {
    /// The spelling used in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            BanScope::Crawlers => "crawlers",
            BanScope::Address => "address",
        }
    }
}

/// `offenders.action`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OffendersAction {
    /// Ban the client's address on the origin: 403, for the requests `scope` names, on every
    /// path but `/robots.txt`.
    Ban,
    /// Log that it would be banned; ban nothing.
    Report,
    /// Count no strikes.
    Off,
}

impl OffendersAction {
    /// The spelling used in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            OffendersAction::Ban => "ban",
            OffendersAction::Report => "report",
            OffendersAction::Off => "off",
        }
    }
}

/// The spellings of `offenders.action`.
pub(crate) const OFFENDERS_ACTIONS: [(&str, crate::config::OffendersAction); 3] = [
    ("ban", crate::config::OffendersAction::Ban),
    ("report", crate::config::OffendersAction::Report),
    ("off", crate::config::OffendersAction::Off),
];

/// The spellings of `offenders.scope`.
pub(crate) const BAN_SCOPES: [(&str, crate::config::BanScope); 2] = [
    ("crawlers", crate::config::BanScope::Crawlers),
    ("address", crate::config::BanScope::Address),
];

/// Reads an `offenders` section over `base`, key by key.
pub(crate) fn offenders(
    sink: &mut Sink,
    node: Option<&Node>,
    base: &crate::config::OffendersConfig,
) -> crate::config::OffendersConfig {
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
