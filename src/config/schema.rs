//! The config file's contract in one place: the keys each section accepts and
//! the default values of the optional ones.
//!
//! Key names here are a public interface; renaming one breaks operators'
//! files.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

/// A mapping in the config: where it is (for messages) and its keys.
pub(crate) struct Section {
    /// Completes "unknown key `x` ...", e.g. "in origin".
    pub place: &'static str,
    pub keys: &'static [&'static str],
}

pub(crate) const TOP: Section = Section {
    place: "at the top level",
    keys: &[
        "listen",
        "admin",
        "threads",
        "shutdown",
        "limits",
        "trusted_proxies",
        "access_log",
        "defaults",
        "crawlers",
        "origins",
        "verify",
        "state",
        "reports",
        "preview",
    ],
};

pub(crate) const REPORTS: Section = Section {
    place: "in `reports`",
    keys: &["top", "window"],
};

/// `reports.top`: violation rows kept per origin and time slice.
pub(crate) const DEFAULT_REPORTS_TOP: usize = 1000;
/// `reports.window`: how far back the reports reach.
pub(crate) const DEFAULT_REPORTS_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);

pub(crate) const STATE: Section = Section {
    place: "in `state`",
    keys: &["backend", "redis", "dir"],
};

pub(crate) const STATE_REDIS: Section = Section {
    place: "in `state.redis`",
    keys: &[
        "url", "url_file", "sentinel", "cluster", "prefix", "timeout", "tls",
    ],
};

pub(crate) const STATE_REDIS_SENTINEL: Section = Section {
    place: "in `state.redis.sentinel`",
    keys: &["master", "nodes", "db", "username", "password_file"],
};

pub(crate) const STATE_REDIS_CLUSTER: Section = Section {
    place: "in `state.redis.cluster`",
    keys: &["nodes", "username", "password_file"],
};

pub(crate) const STATE_REDIS_TLS: Section = Section {
    place: "in `state.redis.tls`",
    keys: &["ca", "client_cert", "client_key"],
};

pub(crate) const VERIFY: Section = Section {
    place: "in `verify`",
    keys: &["refresh", "ranges", "dns", "web_bot_auth"],
};

pub(crate) const VERIFY_RANGES: Section = Section {
    place: "in `verify.ranges`",
    keys: &["enabled", "mirrors", "proxy", "private_origins"],
};

pub(crate) const VERIFY_DNS: Section = Section {
    place: "in `verify.dns`",
    keys: &[
        "enabled",
        "servers",
        "timeout",
        "positive_ttl",
        "negative_ttl",
        "max_entries",
        "probe_name",
        "probe_interval",
    ],
};

pub(crate) const WEB_BOT_AUTH: Section = Section {
    place: "in `verify.web_bot_auth`",
    keys: &[
        "enabled",
        "max_skew",
        "agents",
        "mode",
        "registries",
        "private_agents",
        "nonceless_agents",
        "nonceless_window",
    ],
};

pub(crate) const ORIGIN_WEB_BOT_AUTH: Section = Section {
    place: "in `web_bot_auth` (of an origin or `defaults`)",
    keys: &["mode"],
};

pub(crate) const SIGNATURE_AGENT: Section = Section {
    place: "in a `web_bot_auth` agent",
    keys: &["agent", "crawler", "keys"],
};

pub(crate) const RANGE_LIST: Section = Section {
    place: "in an `ips` list",
    keys: &["url", "format"],
};

pub(crate) const RANGE_LIST_FORMAT: Section = Section {
    place: "in a list `format`",
    keys: &["json_pointer", "regex"],
};

pub(crate) const CRAWLER_VERIFY: Section = Section {
    place: "in crawler `verify`",
    keys: &["ips", "rdns"],
};

pub(crate) const ADMIN: Section = Section {
    place: "in `admin`",
    keys: &["address", "token_file", "read_token_file", "hosts"],
};

pub(crate) const LIMITS: Section = Section {
    place: "in `limits`",
    keys: &[
        "header_timeout",
        "max_header_bytes",
        "idle_timeout",
        "write_timeout",
        "body_timeout",
        "max_connections",
        "handshake_timeout",
        "max_streams_per_connection",
        "max_requests_in_flight",
        "max_requests_in_flight_per_client",
    ],
};

pub(crate) const POLICY: Section = Section {
    place: "in `policy`",
    keys: &[
        "categories",
        "crawlers",
        "purposes",
        "allow_clients",
        "exempt_paths",
    ],
};

pub(crate) const ACCESS_LOG: Section = Section {
    place: "in `access_log`",
    keys: &["format", "path"],
};

pub(crate) const UPSTREAM_TIMEOUTS: Section = Section {
    place: "in `upstream_timeouts`",
    keys: &["connect", "read", "write", "idle"],
};

pub(crate) const PASSIVE_HEALTH: Section = Section {
    place: "in `passive_health`",
    keys: &["failures", "cooloff"],
};

pub(crate) const HEALTH_CHECK: Section = Section {
    place: "in `health_check`",
    keys: &["path", "interval"],
};

pub(crate) const PATHS: Section = Section {
    place: "in `paths`",
    keys: &["escaped_slashes", "forward"],
};

pub(crate) const SHUTDOWN: Section = Section {
    place: "in `shutdown`",
    keys: &["grace"],
};

pub(crate) const LISTENER: Section = Section {
    place: "in listener",
    keys: &["address", "tls", "proxy_protocol", "http2"],
};

pub(crate) const LISTENER_TLS: Section = Section {
    place: "in listener `tls`",
    keys: &["cert", "key", "certs", "http2"],
};

pub(crate) const LISTENER_CERT: Section = Section {
    place: "in a `tls.certs` entry",
    keys: &["cert", "key"],
};

pub(crate) const DEFAULTS: Section = Section {
    place: "in `defaults`",
    keys: &[
        "mode",
        "block",
        "robots",
        "paths",
        "upstream_timeouts",
        "passive_health",
        "health_check",
        "dns_refresh",
        "policy",
        "impostors",
        "crawl_delay",
        "offenders",
        "web_bot_auth",
        "traps",
        "disguised",
        "content_signals",
    ],
};

pub(crate) const CRAWL_DELAY: Section = Section {
    place: "in `crawl_delay`",
    keys: &["action", "max", "crawlers"],
};

pub(crate) const CONTENT_SIGNALS: Section = Section {
    place: "in `content_signals`",
    keys: &["action", "header", "multi_purpose"],
};

pub(crate) const PURPOSE_POLICY: Section = Section {
    place: "in a purpose's policy",
    keys: &["action", "multi_purpose"],
};

pub(crate) const OFFENDERS: Section = Section {
    place: "in `offenders`",
    keys: &["action", "scope", "strikes", "window", "ban"],
};

pub(crate) const TRAPS: Section = Section {
    place: "in `traps`",
    keys: &["enabled", "paths", "action", "secret_file"],
};

pub(crate) const DISGUISED: Section = Section {
    place: "in `disguised`",
    keys: &["action", "strikes", "window"],
};

pub(crate) const BLOCK: Section = Section {
    place: "in `block`",
    keys: &["status", "body", "license_url"],
};

/// `defaults.robots`: only the settings that make sense for every origin.
/// Where robots.txt comes from is chosen per origin.
pub(crate) const DEFAULT_ROBOTS: Section = Section {
    place: "in `defaults.robots`",
    keys: &["refresh", "timeout", "on_unreachable", "max_size"],
};

pub(crate) const ROBOTS: Section = Section {
    place: "in `robots`",
    keys: &[
        "source",
        "path",
        "text",
        "url",
        "refresh",
        "timeout",
        "on_unreachable",
        "max_size",
        "serve",
    ],
};

pub(crate) const CRAWLERS: Section = Section {
    place: "in `crawlers`",
    keys: &["builtin", "generic", "extra", "feeds"],
};

pub(crate) const FEED: Section = Section {
    place: "in feed",
    keys: &["url", "format", "refresh", "may_override", "max_lists"],
};

pub(crate) const EXTRA_CRAWLER: Section = Section {
    place: "in crawler",
    keys: &[
        "name",
        "tokens",
        "pattern",
        "category",
        "operator",
        "ignores_global",
        "verify",
        "purposes",
        "controls",
        "ignores_crawl_delay",
    ],
};

pub(crate) const ORIGIN: Section = Section {
    place: "in origin",
    keys: &[
        "name",
        "hosts",
        "upstream",
        "tls",
        "mode",
        "block",
        "robots",
        "paths",
        "upstream_timeouts",
        "passive_health",
        "health_check",
        "dns_refresh",
        "policy",
        "impostors",
        "crawl_delay",
        "offenders",
        "web_bot_auth",
        "traps",
        "disguised",
        "content_signals",
    ],
};

pub(crate) const UPSTREAM_TLS: Section = Section {
    place: "in upstream `tls`",
    keys: &["sni", "verify", "ca", "client_cert", "client_key"],
};

/// Every section, by its name here (a test reads this file's source and checks none is missing).
#[cfg(test)]
pub(crate) const ALL: &[(&str, &Section)] = &[
    ("TOP", &TOP),
    ("REPORTS", &REPORTS),
    ("STATE", &STATE),
    ("STATE_REDIS", &STATE_REDIS),
    ("STATE_REDIS_SENTINEL", &STATE_REDIS_SENTINEL),
    ("STATE_REDIS_CLUSTER", &STATE_REDIS_CLUSTER),
    ("STATE_REDIS_TLS", &STATE_REDIS_TLS),
    ("VERIFY", &VERIFY),
    ("VERIFY_RANGES", &VERIFY_RANGES),
    ("VERIFY_DNS", &VERIFY_DNS),
    ("WEB_BOT_AUTH", &WEB_BOT_AUTH),
    ("ORIGIN_WEB_BOT_AUTH", &ORIGIN_WEB_BOT_AUTH),
    ("TRAPS", &TRAPS),
    ("CONTENT_SIGNALS", &CONTENT_SIGNALS),
    ("DISGUISED", &DISGUISED),
    ("SIGNATURE_AGENT", &SIGNATURE_AGENT),
    ("CRAWLER_VERIFY", &CRAWLER_VERIFY),
    ("RANGE_LIST", &RANGE_LIST),
    ("RANGE_LIST_FORMAT", &RANGE_LIST_FORMAT),
    ("FEED", &FEED),
    ("ADMIN", &ADMIN),
    ("LIMITS", &LIMITS),
    ("POLICY", &POLICY),
    ("PURPOSE_POLICY", &PURPOSE_POLICY),
    ("ACCESS_LOG", &ACCESS_LOG),
    ("UPSTREAM_TIMEOUTS", &UPSTREAM_TIMEOUTS),
    ("PASSIVE_HEALTH", &PASSIVE_HEALTH),
    ("HEALTH_CHECK", &HEALTH_CHECK),
    ("PATHS", &PATHS),
    ("SHUTDOWN", &SHUTDOWN),
    ("LISTENER", &LISTENER),
    ("LISTENER_TLS", &LISTENER_TLS),
    ("LISTENER_CERT", &LISTENER_CERT),
    ("DEFAULTS", &DEFAULTS),
    ("CRAWL_DELAY", &CRAWL_DELAY),
    ("OFFENDERS", &OFFENDERS),
    ("BLOCK", &BLOCK),
    ("DEFAULT_ROBOTS", &DEFAULT_ROBOTS),
    ("ROBOTS", &ROBOTS),
    ("CRAWLERS", &CRAWLERS),
    ("EXTRA_CRAWLER", &EXTRA_CRAWLER),
    ("ORIGIN", &ORIGIN),
    ("UPSTREAM_TLS", &UPSTREAM_TLS),
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

/// Loopback by default: exposing the proxy or the admin server on every
/// interface should be a decision written in the config.
pub(crate) const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080));
pub(crate) const DEFAULT_ADMIN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9090));
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(10);
pub(crate) const DEFAULT_BLOCK_STATUS: u16 = 403;
pub(crate) const DEFAULT_REFRESH: Duration = Duration::from_secs(5 * 60);
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// RFC 9309 section 2.5: crawlers must parse at least the first 500 KiB of
/// a robots.txt, so smaller limits are refused.
pub(crate) const MIN_ROBOTS_MAX_SIZE: usize = 500 * 1024;
pub(crate) const DEFAULT_ROBOTS_MAX_SIZE: usize = MIN_ROBOTS_MAX_SIZE;
/// A robots.txt is held in memory per origin; a cap keeps a typo such as
/// `5GiB` from becoming a memory problem.
pub(crate) const MAX_ROBOTS_MAX_SIZE: usize = 64 * 1024 * 1024;

/// `limits.max_header_bytes` below this would refuse ordinary browser requests (cookies
/// alone reach a few KiB); above the ceiling a header block is no longer a header.
pub(crate) const MIN_MAX_HEADER_BYTES: u64 = 4 * 1024;
pub(crate) const MAX_MAX_HEADER_BYTES: u64 = 1024 * 1024;
/// A sanity bound on `limits.max_connections` and `limits.max_requests_in_flight`.
pub(crate) const MAX_MAX_CONNECTIONS: i128 = 10_000_000;
/// A sanity bound on `limits.max_streams_per_connection` (browsers open about a hundred).
pub(crate) const MAX_STREAMS_PER_CONNECTION: i128 = 1000;

/// A sanity bound on `threads`; more than this is almost surely a typo.
pub(crate) const MAX_THREADS: u64 = 1024;

/// Origin names are metric label values; keep them short.
pub(crate) const MAX_NAME_LEN: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misplaced_hints_name_real_sections_and_foreign_keys() {
        let sections = [
            &TOP,
            &SHUTDOWN,
            &LISTENER,
            &LISTENER_TLS,
            &LISTENER_CERT,
            &DEFAULTS,
            &BLOCK,
            &DEFAULT_ROBOTS,
            &ROBOTS,
            &CRAWLERS,
            &EXTRA_CRAWLER,
            &ORIGIN,
            &UPSTREAM_TLS,
            &STATE_REDIS_TLS,
            &ADMIN,
            &LIMITS,
            &PATHS,
            &ACCESS_LOG,
            &POLICY,
            &UPSTREAM_TIMEOUTS,
            &CRAWL_DELAY,
            &OFFENDERS,
            &PASSIVE_HEALTH,
            &HEALTH_CHECK,
        ];
        for (place, key, _) in MISPLACED {
            let section = sections.iter().find(|s| s.place == *place);
            let section = section.unwrap_or_else(|| panic!("no section {place}"));
            assert!(!section.keys.contains(key), "{key} is valid {place}");
        }
    }

    #[test]
    fn default_max_size_is_the_documented_value() {
        assert_eq!(DEFAULT_ROBOTS_MAX_SIZE, 512_000);
    }
}
