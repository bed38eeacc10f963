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
        key("prefix", Ty::Section(&CLIENT_PREFIX), "`{ipv4: 32, ipv6: 64}`", "The network strikes and bans are counted for: a client's address cut to this many bits. An IPv6 host usually holds a whole /64 (often a /48) and moves within it at will, so a ban of one IPv6 address is no ban."),
    ],
};

pub(crate) static CLIENT_PREFIX: Section = Section {
    id: "client_prefix",
    place: "in `prefix`",
    title: "Client networks",
    doc: "How many leading bits of a client's address name the client for strikes and bans (`offenders.prefix`) and for Crawl-delay budgets (`crawl_delay.prefix`): `{ipv4: 32, ipv6: 56}`. Every address of one network shares them.",
    keys: &[
        key("ipv4", Ty::Int { min: MIN_IPV4_PREFIX as i128, max: 32 }, "`32`", "Bits of an IPv4 address (16 to 32): 32 is one address (a carrier NAT is handled by `offenders.scope`)."),
        key("ipv6", Ty::Int { min: MIN_IPV6_PREFIX as i128, max: 128 }, "`64`", "Bits of an IPv6 address (32 to 128): 64 is one subscriber's or server's network; 56 or 48 for providers that give out larger ones."),
    ],
};

/// The shortest `prefix.ipv4`: a /16 already holds 65,536 addresses.
pub const MIN_IPV4_PREFIX: u8 = 16;

/// The shortest `prefix.ipv6`: a /32 is a whole provider's allocation.
pub const MIN_IPV6_PREFIX: u8 = 32;

/// `offenders.prefix`, `crawl_delay.prefix`: the network a client's address stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClientPrefix {
    /// Leading bits of an IPv4 address (16 to 32).
    pub ipv4: u8,
    /// Leading bits of an IPv6 address (32 to 128).
    pub ipv6: u8,
}

impl Default for ClientPrefix {
    fn default() -> Self {
        ClientPrefix { ipv4: 32, ipv6: 64 }
    }
}

impl ClientPrefix {
    /// The network of `client` (an IPv4-mapped IPv6 address is taken as the IPv4 address it
    /// is), host bits cleared.
    pub fn network(self, client: std::net::IpAddr) -> ipnet::IpNet {
        match client.to_canonical() {
            std::net::IpAddr::V4(v4) => ipnet::IpNet::V4(
                ipnet::Ipv4Net::new(v4, self.ipv4.clamp(MIN_IPV4_PREFIX, 32))
                    .map_or_else(|_| ipnet::Ipv4Net::from(v4), |net| net.trunc()),
            ),
            std::net::IpAddr::V6(v6) => ipnet::IpNet::V6(
                ipnet::Ipv6Net::new(v6, self.ipv6.clamp(MIN_IPV6_PREFIX, 128))
                    .map_or_else(|_| ipnet::Ipv6Net::from(v6), |net| net.trunc()),
            ),
        }
    }
}

/// Reads a `prefix` mapping over `base`.
pub(crate) fn client_prefix(
    sink: &mut Sink,
    node: Option<&Node>,
    base: ClientPrefix,
) -> ClientPrefix {
    let mut out = base;
    let Some(table) = node.and_then(|n| Table::read(sink, n, &CLIENT_PREFIX, "`prefix`")) else {
        return out;
    };
    if let Some(bits) = table
        .get("ipv4")
        .and_then(|n| reader::integer(sink, n, "ipv4", i128::from(MIN_IPV4_PREFIX), 32))
    {
        out.ipv4 = u8::try_from(bits).unwrap_or(32);
    }
    if let Some(bits) = table
        .get("ipv6")
        .and_then(|n| reader::integer(sink, n, "ipv6", i128::from(MIN_IPV6_PREFIX), 128))
    {
        out.ipv6 = u8::try_from(bits).unwrap_or(64);
    }
    out
}

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
    /// The network strikes and bans are counted for.
    pub prefix: ClientPrefix,
}

impl Default for OffendersConfig {
    fn default() -> Self {
        OffendersConfig {
            action: OffendersAction::Report,
            scope: BanScope::Crawlers,
            strikes: 20,
            window: Duration::from_secs(600),
            ban: Duration::from_secs(3600),
            prefix: ClientPrefix::default(),
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
    if let Some(node) = table.get("prefix") {
        out.prefix = client_prefix(sink, Some(node), out.prefix);
    }
    out
}
