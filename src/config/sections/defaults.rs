use super::*;

pub(crate) static DEFAULTS: Section = Section {
    id: "defaults",
    place: "in `defaults`",
    title: "Defaults",
    doc: "What every origin inherits; an origin overrides any of these key by key.",
    keys: &[
        key("mode", MODE, "`enforce`", "`enforce` blocks, `report` passes and counts `would_block`, `off` does nothing. A YAML boolean is read as the word YAML 1.1 spells so (`false` is `off`, as Helm renders it)."),
        key("block", Ty::Section(&BLOCK), "", "The answer to a blocked request."),
        key("robots", Ty::Section(&DEFAULT_ROBOTS), "", "How robots.txt is kept fresh (where it comes from is set per origin)."),
        key("paths", Ty::Section(&PATHS), "", "How request paths are read and forwarded."),
        key("upstream_timeouts", Ty::Section(&UPSTREAM_TIMEOUTS), "", "Timeouts towards the upstreams."),
        key("passive_health", Ty::Section(&PASSIVE_HEALTH), "", "Skipping an upstream that keeps failing."),
        key("health_check", Ty::Section(&HEALTH_CHECK), "off", "Active health checks of every upstream address."),
        key("dns_refresh", Ty::Duration, "`30s`", "How often upstream DNS names are resolved again (every address is used)."),
        key("policy", Ty::Section(&POLICY), "", "Who is bound by robots.txt: categories and crawlers passed or blocked, clients and paths never blocked."),
        key("impostors", IMPOSTORS, "`block`", "What happens to a request whose crawler claim fails verification: `block` (`403`), `report` (proxied, counted, held to the claimed crawler's Crawl-delay), `ignore` (decided as claimed; `off` is the same, so that Helm's `false` reads as it)."),
        key("crawl_delay", Ty::Section(&CRAWL_DELAY), "", "robots.txt's Crawl-delay as a rate limit."),
        key("offenders", Ty::Section(&OFFENDERS), "", "Banning addresses that keep violating robots.txt."),
        key("web_bot_auth", Ty::Section(&ORIGIN_WEB_BOT_AUTH), "`verify.web_bot_auth.mode`", "Web Bot Auth's mode for every origin."),
        key("traps", Ty::Section(&TRAPS), "off", "Trap paths in the robots.txt served: a request for one is a trap hit, whatever its User-Agent."),
        key("disguised", Ty::Section(&DISGUISED), "`{action: report, strikes: 5, window: 10m}`", "Clients without a crawler's User-Agent that read robots.txt and then take what it disallows to every group."),
        key("content_signals", Ty::Section(&CONTENT_SIGNALS), "`{action: report, header: false, multi_purpose: allow}`", "robots.txt's Content-Signal and Content-Usage lines, per crawler purpose."),
    ],
};
