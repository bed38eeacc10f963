//! `defaults`: the per-origin settings every origin inherits, key by key.

use super::*;

pub(crate) static DEFAULTS: Section = Section {
    id: "defaults",
    place: "in `defaults`",
    title: "Defaults",
    doc: "What every origin inherits; an origin overrides any of these key by key.",
    keys: &[
        key("mode", MODE_WORDS, "`enforce`", "`enforce` blocks, `report` passes and counts `would_block`, `off` does nothing. A YAML boolean is read as the word YAML 1.1 spells so (`false` is `off`, as Helm renders it)."),
        key("block", Ty::Section(&BLOCK), "", "The answer to a blocked request."),
        key("robots", Ty::Section(&DEFAULT_ROBOTS), "", "How robots.txt is kept fresh (where it comes from is set per origin)."),
        key("paths", Ty::Section(&PATHS), "", "How request paths are read and forwarded."),
        key("upstream_timeouts", Ty::Section(&UPSTREAM_TIMEOUTS), "", "Timeouts towards the upstreams."),
        key("passive_health", Ty::Section(&PASSIVE_HEALTH), "", "Skipping an upstream that keeps failing."),
        key("health_check", Ty::Section(&HEALTH_CHECK), "off", "Active health checks of every upstream address."),
        key("dns_refresh", Ty::Duration, "`30s`", "How often upstream DNS names are resolved again (every address is used)."),
        key("policy", Ty::Section(&POLICY), "", "Who is bound by robots.txt: categories and crawlers passed or blocked, clients and paths never blocked."),
        key("impostors", IMPOSTORS_WORDS, "`block`", "What happens to a request whose crawler claim fails verification: `block` (`403`), `report` (proxied, counted, held to the claimed crawler's Crawl-delay), `ignore` (decided as claimed; `off` is the same, so that Helm's `false` reads as it)."),
        key("crawl_delay", Ty::Section(&CRAWL_DELAY), "", "robots.txt's Crawl-delay as a rate limit."),
        key("offenders", Ty::Section(&OFFENDERS), "", "Banning addresses that keep violating robots.txt."),
        key("web_bot_auth", Ty::Section(&ORIGIN_WEB_BOT_AUTH), "from `verify.web_bot_auth.mode`", "Web Bot Auth's mode for every origin."),
        key("traps", Ty::Section(&TRAPS), "off", "Trap paths in the robots.txt served: a request for one is a trap hit, whatever its User-Agent."),
        key("disguised", Ty::Section(&DISGUISED), "`{action: report, strikes: 5, window: 10m}`", "Clients without a crawler's User-Agent that read robots.txt and then take what it disallows to every group."),
        key("content_signals", Ty::Section(&CONTENT_SIGNALS), "`{action: report, header: false, multi_purpose: allow}`", "robots.txt's Content-Signal and Content-Usage lines, per crawler purpose."),
        key("response_signals", Ty::Section(&RESPONSE_SIGNALS), "`{action: report, status: 403}`", "A page's own AI preferences in the origin's response (`Content-Usage`, `X-Robots-Tag: noai`), judged before its body is sent."),
    ],
};

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
    pub impostors: crate::config::Impostors,
    pub crawl_delay: crate::config::CrawlDelayConfig,
    pub offenders: crate::config::OffendersConfig,
    pub web_bot_auth: Option<crate::config::WebBotAuthMode>,
    pub traps: crate::config::TrapsConfig,
    pub disguised: crate::config::DisguisedConfig,
    pub content_signals: crate::config::ContentSignalsConfig,
    pub response_signals: crate::config::ResponseSignalsConfig,
}

/// `defaults`, over the built-in defaults.
pub(crate) fn defaults(
    sink: &mut Sink,
    node: Option<&Node>,
    known: &KnownCrawlers,
    base_dir: &Path,
) -> Defaults {
    let mut out = Defaults {
        mode: Mode::Enforce,
        block: BlockConfig {
            license_url: None,
            status: DEFAULT_BLOCK_STATUS,
            body: None,
        },
        robots: RobotsSettings {
            refresh: DEFAULT_ROBOTS_REFRESH,
            timeout: DEFAULT_ROBOTS_TIMEOUT,
            on_unreachable: OnUnreachable::Disallow,
            max_size: DEFAULT_ROBOTS_MAX_SIZE,
        },
        paths: PathsConfig::default(),
        upstream_timeouts: UpstreamTimeouts::default(),
        upstream_health: UpstreamHealth::default(),
        policy: PolicyConfig::default(),
        impostors: crate::config::Impostors::Block,
        crawl_delay: crate::config::CrawlDelayConfig::default(),
        offenders: crate::config::OffendersConfig::default(),
        web_bot_auth: None,
        traps: crate::config::TrapsConfig::default(),
        disguised: crate::config::DisguisedConfig::default(),
        content_signals: crate::config::ContentSignalsConfig::default(),
        response_signals: crate::config::ResponseSignalsConfig::default(),
    };
    let Some(table) = node.and_then(|n| Table::read(sink, n, &DEFAULTS, "`defaults`")) else {
        return out;
    };
    if let Some(mode) = table
        .get("mode")
        .and_then(|n| reader::choice(sink, n, "mode", &MODES))
    {
        out.mode = mode;
    }
    if let Some(impostors) = table
        .get("impostors")
        .and_then(|n| reader::choice(sink, n, "impostors", &IMPOSTORS))
    {
        out.impostors = impostors;
    }
    out.block = block(sink, table.get("block"), &out.block);
    out.paths = paths(sink, table.get("paths"), &out.paths);
    out.upstream_timeouts =
        upstream_timeouts(sink, table.get("upstream_timeouts"), &out.upstream_timeouts);
    out.crawl_delay = crawl_delay(sink, table.get("crawl_delay"), &out.crawl_delay, known);
    out.offenders = offenders(sink, table.get("offenders"), &out.offenders);
    out.web_bot_auth = web_bot_auth_mode(sink, table.get("web_bot_auth"));
    out.traps = traps(sink, table.get("traps"), &out.traps, base_dir);
    out.disguised = disguised(sink, table.get("disguised"), &out.disguised);
    out.content_signals = content_signals(sink, table.get("content_signals"), &out.content_signals);
    out.response_signals =
        response_signals(sink, table.get("response_signals"), &out.response_signals);
    out.upstream_health = upstream_health(sink, &table, &out.upstream_health);
    out.policy = policy(sink, table.get("policy"), &out.policy, known);
    if let Some(robots) = table
        .get("robots")
        .and_then(|n| Table::read(sink, n, &DEFAULT_ROBOTS, "`defaults.robots`"))
    {
        out.robots = robots_settings(sink, &robots, &out.robots);
    }
    out
}
