use super::*;

pub(crate) const MODE: Ty = Ty::Words(|| names(&crate::config::origin::MODES));

pub(crate) const IMPOSTORS: Ty = Ty::Words(|| names(&crate::config::origin::IMPOSTORS));

pub(crate) const WEB_BOT_AUTH_MODE: Ty =
    Ty::Words(|| names(&crate::config::origin::WEB_BOT_AUTH_MODES));

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
        key("mode", MODE, "from `defaults`", "As `defaults.mode`."),
        key("block", Ty::Section(&BLOCK), "from `defaults`", "As `defaults.block`."),
        key("robots", Ty::Section(&ROBOTS), "`{source: origin}`", "Where robots.txt comes from."),
        key("paths", Ty::Section(&PATHS), "from `defaults`", "As `defaults.paths`."),
        key("upstream_timeouts", Ty::Section(&UPSTREAM_TIMEOUTS), "from `defaults`", "As `defaults.upstream_timeouts`."),
        key("passive_health", Ty::Section(&PASSIVE_HEALTH), "from `defaults`", "As `defaults.passive_health`."),
        key("health_check", Ty::Section(&HEALTH_CHECK), "from `defaults`", "As `defaults.health_check`."),
        key("dns_refresh", Ty::Duration, "from `defaults`", "As `defaults.dns_refresh`."),
        key("policy", Ty::Section(&POLICY), "from `defaults`", "As `defaults.policy`, merged over it."),
        key("impostors", IMPOSTORS, "from `defaults`", "As `defaults.impostors`."),
        key("crawl_delay", Ty::Section(&CRAWL_DELAY), "from `defaults`", "As `defaults.crawl_delay`."),
        key("offenders", Ty::Section(&OFFENDERS), "from `defaults`", "As `defaults.offenders`."),
        key("web_bot_auth", Ty::Section(&ORIGIN_WEB_BOT_AUTH), "from `defaults`", "As `defaults.web_bot_auth`."),
        key("traps", Ty::Section(&TRAPS), "from `defaults`", "As `defaults.traps`."),
        key("disguised", Ty::Section(&DISGUISED), "from `defaults`", "As `defaults.disguised`."),
        key("content_signals", Ty::Section(&CONTENT_SIGNALS), "from `defaults`", "As `defaults.content_signals`."),
    ],
};
