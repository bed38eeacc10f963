//! `origins`: each site robotsguard fronts, with the per-origin sections merged over `defaults`.

use super::*;

pub(crate) const MODE_WORDS: Ty = Ty::Words(|| names(&MODES));

pub(crate) const IMPOSTORS_WORDS: Ty = Ty::Words(|| names(&IMPOSTORS));

pub(crate) const WEB_BOT_AUTH_MODE_WORDS: Ty = Ty::Words(|| names(&WEB_BOT_AUTH_MODES));

pub(crate) static ORIGIN: Section = Section {
    id: "origin",
    place: "in origin",
    title: "An origin",
    doc: "A site behind the proxy. Every `defaults` key may be written here too, overriding it key by key.",
    keys: &[
        required("name", Ty::Str, "Unique, `[A-Za-z0-9_.-]+`, up to 64 characters; the `origin` metric label."),
        required("hosts", Ty::OneOrList(&Ty::Str), "Host names served (any port); unique across origins."),
        required("upstream", Ty::OneOrList(&Ty::HostPort), "`host:port` or a list (round-robin over every address the names resolve to; unhealthy ones skipped)."),
        key("tls", Ty::AnyOf(&[Ty::Bool, Ty::Section(&UPSTREAM_TLS)]), "`false`", "Upstream TLS: `true`, or a mapping."),
        key("mode", MODE_WORDS, "from `defaults`", "As `defaults.mode`."),
        key("block", Ty::Section(&BLOCK), "from `defaults`", "As `defaults.block`."),
        key("robots", Ty::Section(&ROBOTS), "`{source: origin}`", "Where robots.txt comes from."),
        key("paths", Ty::Section(&PATHS), "from `defaults`", "As `defaults.paths`."),
        key("upstream_timeouts", Ty::Section(&UPSTREAM_TIMEOUTS), "from `defaults`", "As `defaults.upstream_timeouts`."),
        key("passive_health", Ty::Section(&PASSIVE_HEALTH), "from `defaults`", "As `defaults.passive_health`."),
        key("health_check", Ty::Section(&HEALTH_CHECK), "from `defaults`", "As `defaults.health_check`."),
        key("dns_refresh", Ty::Duration, "from `defaults`", "As `defaults.dns_refresh`."),
        key("policy", Ty::Section(&POLICY), "from `defaults`", "As `defaults.policy`, merged over it."),
        key("impostors", IMPOSTORS_WORDS, "from `defaults`", "As `defaults.impostors`."),
        key("crawl_delay", Ty::Section(&CRAWL_DELAY), "from `defaults`", "As `defaults.crawl_delay`."),
        key("offenders", Ty::Section(&OFFENDERS), "from `defaults`", "As `defaults.offenders`."),
        key("web_bot_auth", Ty::Section(&ORIGIN_WEB_BOT_AUTH), "from `defaults`", "As `defaults.web_bot_auth`."),
        key("traps", Ty::Section(&TRAPS), "from `defaults`", "As `defaults.traps`."),
        key("disguised", Ty::Section(&DISGUISED), "from `defaults`", "As `defaults.disguised`."),
        key("content_signals", Ty::Section(&CONTENT_SIGNALS), "from `defaults`", "As `defaults.content_signals`."),
        key("response_signals", Ty::Section(&RESPONSE_SIGNALS), "from `defaults`", "As `defaults.response_signals`."),
    ],
};

/// What is done with a request from an impostor: one that claims a crawler whose operator
/// publishes who it is, from an address that is definitely not among it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Impostors {
    /// Refuse it (every path but `/robots.txt`).
    Block,
    /// Pass it as robots.txt decides, but count and log it as `would_block`.
    Report,
    /// Treat it as the crawler it claims to be.
    Ignore,
}

impl Impostors {
    /// The spelling used in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Impostors::Block => "block",
            Impostors::Report => "report",
            Impostors::Ignore => "ignore",
        }
    }
}

/// What happens to a crawler request that robots.txt disallows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// Refuse it with the block response.
    Enforce,
    /// Proxy it, but log and count it as a violation.
    Report,
    /// Proxy everything; robots.txt is not consulted.
    Off,
}

impl Mode {
    /// The spelling used in the config, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Report => "report",
            Mode::Off => "off",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One site behind the proxy, with `defaults` already merged in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OriginConfig {
    /// Unique; `[A-Za-z0-9_.-]+`, used as a metric label.
    pub name: String,
    /// Lower-case, without trailing dot or port; unique across origins.
    /// Bracketed IPv6 literals (`[::1]`) are as a Host header writes them.
    pub hosts: Vec<String>,
    /// Never empty; requests are spread round-robin.
    pub upstreams: Vec<Upstream>,
    /// Set when the upstream is reached over TLS.
    pub upstream_tls: Option<UpstreamTls>,
    /// Whether disallowed crawler requests are blocked, reported or not looked at.
    pub mode: Mode,
    /// The answer to a blocked request.
    pub block: BlockConfig,
    /// How robots.txt is obtained and kept fresh.
    pub robots: RobotsConfig,
    /// How request paths are read and forwarded.
    pub paths: PathsConfig,
    /// Connect, read, write and idle limits towards the upstream.
    pub upstream_timeouts: UpstreamTimeouts,
    /// Passive and active health checks, and DNS refresh.
    pub upstream_health: UpstreamHealth,
    /// Who is bound by robots.txt, and who is passed or blocked regardless.
    pub policy: PolicyConfig,
    /// What is done with impostors of verifiable crawlers.
    pub impostors: Impostors,
    /// Whether robots.txt's `Crawl-delay` is enforced as a rate limit, and its cap.
    pub crawl_delay: CrawlDelayConfig,
    /// What robots.txt's `Content-Signal` and `Content-Usage` lines do.
    pub content_signals: ContentSignalsConfig,
    /// What a page's AI preferences in the origin's response head do.
    pub response_signals: ResponseSignalsConfig,
    /// Bans for clients that keep fetching what robots.txt disallows.
    pub offenders: OffendersConfig,
    /// `web_bot_auth.mode` for this origin (or `defaults`); `None`: `verify.web_bot_auth.mode`.
    pub web_bot_auth: Option<WebBotAuthMode>,
    /// Trap paths in the robots.txt served, and what a hit does.
    pub traps: TrapsConfig,
    /// Clients without a crawler's User-Agent that read robots.txt and take what it forbids.
    pub disguised: DisguisedConfig,
}

/// Origin names are metric label values; keep them short.
pub(crate) const MAX_NAME_LEN: usize = 64;

pub(crate) const MODES: [(&str, Mode); 3] = [
    ("enforce", Mode::Enforce),
    ("report", Mode::Report),
    ("off", Mode::Off),
];

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
    let traps = traps(sink, table.get("traps"), &defaults.traps, base_dir);
    let disguised = disguised(sink, table.get("disguised"), &defaults.disguised);
    let content_signals = content_signals(
        sink,
        table.get("content_signals"),
        &defaults.content_signals,
    );
    let response_signals = response_signals(
        sink,
        table.get("response_signals"),
        &defaults.response_signals,
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
        response_signals,
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

/// `off` is `ignore` (impostors are not looked for), the word an operator reaches for and the
/// one Helm turns into `false`.
pub(crate) const IMPOSTORS: [(&str, crate::config::Impostors); 4] = [
    ("block", crate::config::Impostors::Block),
    ("report", crate::config::Impostors::Report),
    ("ignore", crate::config::Impostors::Ignore),
    ("off", crate::config::Impostors::Ignore),
];

/// `origins`: each entry checked on its own, then names and hosts checked
/// for uniqueness across all of them.
pub(crate) fn origins(
    sink: &mut Sink,
    top: &Table<'_>,
    defaults: &Defaults,
    base_dir: &Path,
    known: &KnownCrawlers,
) -> Vec<OriginConfig> {
    let Some(node) = top.get("origins") else {
        let pos = top.key_pos("origins").unwrap_or(top.pos);
        sink.error_hint(
            pos,
            "the config needs at least one entry in `origins`",
            "e.g. origins: [{name: shop, hosts: [shop.example], upstream: \"127.0.0.1:8081\"}]",
        );
        return Vec::new();
    };
    let Some(items) = reader::list(sink, node, "origins") else {
        return Vec::new();
    };
    if items.is_empty() {
        sink.error(node.pos, "`origins` must list at least one origin");
    }
    let mut names: HashMap<String, Pos> = HashMap::new();
    let mut hosts: HashMap<String, (String, Pos)> = HashMap::new();
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Some(parsed) = parse_origin(sink, item, defaults, known, base_dir) else {
            continue;
        };
        if let Some((name, pos)) = &parsed.name {
            match names.get(name) {
                Some(first) => sink.error(
                    *pos,
                    format!(
                        "origin name {} is used twice (first at {})",
                        quote(name),
                        at(*first)
                    ),
                ),
                None => {
                    names.insert(name.clone(), *pos);
                }
            }
        }
        let origin_name = parsed.name.as_ref().map_or("", |(n, _)| n.as_str());
        for (host, pos) in &parsed.hosts {
            match hosts.get(host) {
                Some((other, first)) => sink.error_hint(
                    *pos,
                    format!(
                        "host {} is already served by {} at {}",
                        quote(host),
                        if other.is_empty() {
                            "the origin".to_owned()
                        } else {
                            format!("origin {}", quote(other))
                        },
                        at(*first)
                    ),
                    "each host belongs to exactly one origin",
                ),
                None => {
                    hosts.insert(host.clone(), (origin_name.to_owned(), *pos));
                }
            }
        }
        out.push(parsed.config);
    }
    out
}
