//! The config file documented key by key, from the definitions the reader checks against:
//! every section's keys are `schema.rs`'s lists (a test holds them equal), the words a key
//! accepts are the reader's own tables, restart-only comes from the reload's list. From this
//! one table come `robotsguard config schema` (a JSON Schema, draft 2020-12, for editors) and
//! `robotsguard config reference` (the book's reference page).
//!
//! A new key: add it to its section in `schema.rs`, then a `Key` here (the test names the
//! missing one), then run `scripts/gen-docs.sh`.

use serde_json::{json, Map, Value};

use super::schema::{self, Section};

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
    Section(&'static SectionDoc),
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
}

/// A mapping of the config: its keys, documented.
pub(crate) struct SectionDoc {
    /// The JSON Schema `$defs` name.
    pub id: &'static str,
    /// The keys the reader accepts here (the tests hold `keys` to them).
    #[cfg_attr(not(test), allow(dead_code))]
    pub section: &'static Section,
    pub title: &'static str,
    pub doc: &'static str,
    pub keys: &'static [Key],
}

pub(super) const fn key(
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
    }
}

const fn required(name: &'static str, ty: Ty, doc: &'static str) -> Key {
    Key {
        name,
        ty,
        default: "",
        required: true,
        doc,
    }
}

fn names<T>(options: &[(&'static str, T)]) -> Vec<&'static str> {
    options.iter().map(|(name, _)| *name).collect()
}

fn purposes() -> Vec<&'static str> {
    crate::crawlers::Purpose::ALL
        .iter()
        .map(|p| p.as_str())
        .collect()
}

fn categories() -> Vec<&'static str> {
    crate::crawlers::Category::ALL
        .iter()
        .map(|c| c.as_str())
        .collect()
}

const MODE: Ty = Ty::Words(|| names(&super::origin::MODES));
const IMPOSTORS: Ty = Ty::Words(|| names(&super::origin::IMPOSTORS));
const WEB_BOT_AUTH_MODE: Ty = Ty::Words(|| names(&super::origin::WEB_BOT_AUTH_MODES));
const FEED_FORMAT: Ty = Ty::Words(|| {
    crate::crawlers::feed::FeedFormat::ALL
        .iter()
        .map(|f| f.as_str())
        .collect()
});
const POLICY_ACTION: Ty = Ty::Words(|| names(&super::origin::ACTIONS));

static TOP: SectionDoc = SectionDoc {
    id: "config",
    section: &schema::TOP,
    title: "The top level",
    doc: "Process-wide settings, the defaults every origin inherits, the crawler catalogue and the origins. Unknown keys are errors; relative paths resolve against the config file's directory.",
    keys: &[
        key("listen", Ty::OneOrList(&Ty::AnyOf(&[Ty::Address, Ty::Section(&LISTENER)])), "`127.0.0.1:8080`", "The proxy's listeners: `\"IP:PORT\"` entries, or mappings for TLS, PROXY protocol and HTTP/2."),
        key("admin", Ty::AnyOf(&[Ty::Address, Ty::Section(&ADMIN)]), "`127.0.0.1:9090`", "The admin listener (`/metrics`, `/healthz`, `/readyz`, `/explain`, `/robots`, `/bans`, the console): `\"IP:PORT\"` or a mapping with a token."),
        key("threads", Ty::Int { min: 1, max: schema::MAX_THREADS as i128 }, "one per CPU", "Proxy worker threads."),
        key("shutdown", Ty::Section(&SHUTDOWN), "", "What SIGTERM does."),
        key("limits", Ty::Section(&LIMITS), "", "Deadlines and caps on client connections and requests."),
        key("trusted_proxies", Ty::OneOrList(&Ty::Network), "`[]`", "Peers (CIDRs or addresses) whose forwarding headers are believed: the client is then the rightmost `X-Forwarded-For` entry that is not itself trusted; on a `proxy_protocol` listener, the only peers allowed to connect."),
        key("access_log", Ty::Section(&ACCESS_LOG), "off", "One line per request; off when absent."),
        key("defaults", Ty::Section(&DEFAULTS), "", "Settings every origin inherits, each overridable per origin."),
        key("crawlers", Ty::Section(&CRAWLERS), "", "The crawler catalogue: the built-in one and your own entries."),
        required("origins", Ty::List(&Ty::Section(&ORIGIN)), "The sites behind the proxy, each with its hosts, upstreams and robots.txt."),
        key("verify", Ty::Section(&VERIFY), "", "How crawler claims are checked: published IP ranges, reverse DNS, Web Bot Auth."),
        key("state", Ty::Section(&STATE), "`{backend: memory}`", "Where Crawl-delay budgets, strikes, bans and robots.txt reads are kept."),
        key("reports", Ty::Section(&REPORTS), "", "The violation reports behind `/reports/*` and the console."),
        key("preview", Ty::Section(&super::preview::PREVIEW_DOC), "", "The recent crawler traffic `POST /robots/preview` replays against a candidate robots.txt or policy."),
    ],
};

static LISTENER: SectionDoc = SectionDoc {
    id: "listener",
    section: &schema::LISTENER,
    title: "A listener",
    doc: "A `listen` entry written as a mapping.",
    keys: &[
        required("address", Ty::Address, "The listener's address."),
        key("tls", Ty::Section(&LISTENER_TLS), "none (plain HTTP)", "Terminate TLS here: one certificate (`cert`, `key`) or several chosen by SNI (`certs`)."),
        key("proxy_protocol", Ty::Bool, "`false`", "Every connection starts with a PROXY protocol header (v1 or v2), believed only from a peer in `trusted_proxies`: a connection from any other peer is closed before anything is read, one without a valid header too."),
        key("http2", Ty::Bool, "`true` with TLS, `false` without", "HTTP/2 beside HTTP/1.1: by ALPN on TLS, with prior knowledge (h2c) on plain listeners. Same as `tls.http2`; both must agree."),
    ],
};

static LISTENER_TLS: SectionDoc = SectionDoc {
    id: "listener_tls",
    section: &schema::LISTENER_TLS,
    title: "A listener's TLS",
    doc: "`cert` and `key`, or `certs`.",
    keys: &[
        key("cert", Ty::Path, "", "PEM certificate chain, leaf first (with `key`)."),
        key("key", Ty::Path, "", "PEM private key of `cert`."),
        key("certs", Ty::List(&Ty::Section(&LISTENER_CERT)), "", "Several sites' certificates: each connection gets the one whose names match its SNI (an exact name before a wildcard, an earlier certificate before a later one); no name, or an unknown one, gets the first."),
        key("http2", Ty::Bool, "`true`", "Offer HTTP/2 by ALPN (`h2`, then `http/1.1`)."),
    ],
};

static LISTENER_CERT: SectionDoc = SectionDoc {
    id: "listener_cert",
    section: &schema::LISTENER_CERT,
    title: "A certificate of `tls.certs`",
    doc: "One site's certificate and key.",
    keys: &[
        required("cert", Ty::Path, "PEM certificate chain, leaf first."),
        required("key", Ty::Path, "PEM private key."),
    ],
};

static ADMIN: SectionDoc = SectionDoc {
    id: "admin",
    section: &schema::ADMIN,
    title: "The admin listener",
    doc: "`admin` written as a mapping.",
    keys: &[
        required("address", Ty::Address, "The admin listener's address."),
        key("token_file", Ty::Path, "none", "A file holding the bearer token every admin request but `/healthz` and `/readyz` must carry (`Authorization: Bearer …`; at least 16 bytes); re-read when it changes."),
        key("read_token_file", Ty::Path, "none", "A read-only token (at least 16 bytes, not the admin token): reports, console pages, `/metrics`, `/explain`, `/bans`, `/robots`, but no action (lifting a ban). Needs `token_file`."),
        key("hosts", Ty::List(&Ty::Str), "none", "Names the admin listener answers to besides its own addresses (an IP literal `Host` naming the listener's address, any address when it listens on `0.0.0.0` or `[::]`; any port) and `localhost` (when it accepts loopback connections): a request naming another host gets 421, token or not, so a DNS-rebinding page cannot read it. List the names clients use, e.g. the admin Service's DNS names or an ingress host."),
    ],
};

static SHUTDOWN: SectionDoc = SectionDoc {
    id: "shutdown",
    section: &schema::SHUTDOWN,
    title: "Shutdown",
    doc: "",
    keys: &[key(
        "grace",
        Ty::Duration,
        "`10s`",
        "How long SIGTERM waits for requests in flight.",
    )],
};

static LIMITS: SectionDoc = SectionDoc {
    id: "limits",
    section: &schema::LIMITS,
    title: "Limits",
    doc: "Deadlines and caps that keep slow or greedy clients from holding the proxy.",
    keys: &[
        key("header_timeout", Ty::Duration, "`10s`", "A request head must arrive whole within this, from the connection's start (or, kept alive, the request's first byte); else `408`."),
        key("max_header_bytes", Ty::Size, "`32KiB`", "Request line plus headers, 4 KiB to 1 MiB; more gets `431`."),
        key("idle_timeout", Ty::Duration, "`60s`", "How long a kept-alive connection (or an HTTP/2 connection with no stream open) waits for its next request."),
        key("write_timeout", Ty::Duration, "the value of `idle_timeout`", "How long a write to a client may make no progress (a client that stops reading, an HTTP/2 stream whose window stays shut): then the HTTP/2 stream is reset or the HTTP/1 connection closed, and the request's places are free again."),
        key("body_timeout", Ty::Duration, "`60s`", "A request body must arrive within this after its head; else `408`."),
        key("max_connections", Ty::Int { min: 1, max: schema::MAX_MAX_CONNECTIONS }, "half of what the open-files limit leaves after 256 reserved descriptors, at most 10,000", "Client connections at once; at the cap a new connection closes the one that has waited longest without a request in progress, or is closed when every one is busy."),
        key("handshake_timeout", Ty::Duration, "`10s`", "A TLS handshake (and the PROXY header before it) must finish within this of the connection's start."),
        key("max_streams_per_connection", Ty::Int { min: 1, max: schema::MAX_STREAMS_PER_CONNECTION }, "`100`", "HTTP/2 streams one connection may have open at once (advertised in SETTINGS); more are refused with `REFUSED_STREAM`."),
        key("max_requests_in_flight", Ty::Int { min: 1, max: schema::MAX_MAX_CONNECTIONS }, "four times `max_connections`, within what the open-files limit leaves, at most 1,024", "Requests served at once in the process (a head over 8 KiB takes one more place per 8 KiB); more get `REFUSED_STREAM` (HTTP/2) or `503` with `Retry-After: 1` (HTTP/1)."),
        key("max_requests_in_flight_per_client", Ty::Int { min: 1, max: schema::MAX_MAX_CONNECTIONS }, "an eighth of `max_requests_in_flight`, at least 8 (all of it, below 8)", "Places one client holds at most: an IPv4 address or an IPv6 /64, as the connection layer knows it (the peer, or a trusted peer's PROXY header); each connection of a peer in `trusted_proxies` that sends no PROXY header counts as a client of its own. Under load a client holds less: once more than half the places are taken, one that holds places takes another only while at least four times its holding stays free, and its first request may take any free place, so a newcomer is served beside one or many flooding clients (with the defaults, ten leave it dozens of places). More get `REFUSED_STREAM` or `503`; at most `max_requests_in_flight`, which turns sharing off."),
    ],
};

static ACCESS_LOG: SectionDoc = SectionDoc {
    id: "access_log",
    section: &schema::ACCESS_LOG,
    title: "The access log",
    doc: "One line per request: time, client, host, method, path, status, bytes, duration, User-Agent, origin, crawler, decision, upstream, request id.",
    keys: &[
        key("format", Ty::Words(|| names(&super::validate::ACCESS_LOG_FORMATS)), "`json`", "The line's form."),
        key("path", Ty::Str, "stderr, beside the other lines", "`stdout`, or a file (appended to, opened again on `SIGHUP` or `SIGUSR1` after rotation; its directory must exist)."),
    ],
};

static DEFAULTS: SectionDoc = SectionDoc {
    id: "defaults",
    section: &schema::DEFAULTS,
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

static BLOCK: SectionDoc = SectionDoc {
    id: "block",
    section: &schema::BLOCK,
    title: "The block answer",
    doc: "",
    keys: &[
        key("status", Ty::Int { min: 400, max: 599 }, "`403`", "Status of the block response; `402` is the licence answer (with `Link: <url>; rel=\"license\"`; agents still get `403` unless a `license` policy action says otherwise)."),
        key("body", Ty::Str, "built-in text", "Body template; placeholders `{crawler} {path} {line} {rule} {robots_url} {origin} {client}`, other braces literal; expanded in one pass."),
        key("license_url", Ty::Url, "robots.txt's `License:` line", "The licence terms a `402` answer links to; every crawler may fetch it."),
    ],
};

const REFRESH_DOC: &str = "How often robots.txt is fetched or re-read (at least `1s`).";
const TIMEOUT_DOC: &str = "Time limit of one fetch.";
const ON_UNREACHABLE_DOC: &str = "With no good copy and the origin unreachable: `disallow` everything (RFC 9309) or `allow` (fail open).";
const MAX_SIZE_DOC: &str = "Bytes of robots.txt parsed; 500 KiB (RFC 9309's minimum) to 64 MiB.";
const ON_UNREACHABLE: Ty = Ty::Words(|| names(&super::origin::ON_UNREACHABLE));

static DEFAULT_ROBOTS: SectionDoc = SectionDoc {
    id: "default_robots",
    section: &schema::DEFAULT_ROBOTS,
    title: "robots.txt freshness (defaults)",
    doc: "The settings that make sense for every origin; `source`, `path`, `text`, `url` and `serve` are set per origin.",
    keys: &[
        key("refresh", Ty::Duration, "`5m`", REFRESH_DOC),
        key("timeout", Ty::Duration, "`10s`", TIMEOUT_DOC),
        key("on_unreachable", ON_UNREACHABLE, "`disallow`", ON_UNREACHABLE_DOC),
        key("max_size", Ty::Size, "`500KiB`", MAX_SIZE_DOC),
    ],
};

static ROBOTS: SectionDoc = SectionDoc {
    id: "robots",
    section: &schema::ROBOTS,
    title: "An origin's robots.txt",
    doc: "Where the origin's robots.txt comes from, and how it is kept fresh.",
    keys: &[
        key("source", Ty::Words(super::origin::source_words), "`origin`", "`origin` (fetched from the upstream), `file` (`path`) or `inline` (`text`)."),
        key("path", Ty::Path, "required for `file`", "The robots.txt file; watched and re-read every `refresh`. Missing at start it stops `serve` (and fails `validate`); gone later, the last copy read stays in force."),
        key("text", Ty::Str, "required for `inline`", "The robots.txt itself."),
        key("url", Ty::Str, "`/robots.txt`", "With `source: origin`: a path, or an http(s) URL on one of the origin's hosts."),
        key("refresh", Ty::Duration, "from `defaults.robots`", REFRESH_DOC),
        key("timeout", Ty::Duration, "from `defaults.robots`", TIMEOUT_DOC),
        key("on_unreachable", ON_UNREACHABLE, "from `defaults.robots`", ON_UNREACHABLE_DOC),
        key("max_size", Ty::Size, "from `defaults.robots`", MAX_SIZE_DOC),
        key("serve", Ty::Bool, "`true` for `file` and `inline`, `false` for `origin`", "Answer `GET`/`HEAD /robots.txt` with the copy in force (`ETag`, `Last-Modified`, `Cache-Control`, `304`) instead of proxying it: crawlers read exactly what is enforced."),
    ],
};

static PATHS: SectionDoc = SectionDoc {
    id: "paths",
    section: &schema::PATHS,
    title: "Paths",
    doc: "",
    keys: &[
        key("escaped_slashes", Ty::Words(|| names(&super::origin::ESCAPED_SLASHES)), "`decode`", "What `%2F` / `%5C` in a path mean: `decode` (slashes, as most origins read them), `reject` (`400`), `keep` (data)."),
        key("forward", Ty::Words(|| names(&super::origin::FORWARD)), "`canonical`", "What the origin is sent: the canonical path decided on, or the client's bytes (then decided on every reading)."),
    ],
};

static UPSTREAM_TIMEOUTS: SectionDoc = SectionDoc {
    id: "upstream_timeouts",
    section: &schema::UPSTREAM_TIMEOUTS,
    title: "Upstream timeouts",
    doc: "",
    keys: &[
        key("connect", Ty::Duration, "`5s`", "Connecting (TCP and TLS)."),
        key(
            "read",
            Ty::Duration,
            "`60s`",
            "Waiting between reads; a hung upstream is answered `504` after it.",
        ),
        key("write", Ty::Duration, "`60s`", "Waiting to write."),
        key(
            "idle",
            Ty::Duration,
            "`60s`",
            "Keeping an idle connection pooled.",
        ),
    ],
};

static PASSIVE_HEALTH: SectionDoc = SectionDoc {
    id: "passive_health",
    section: &schema::PASSIVE_HEALTH,
    title: "Passive health",
    doc: "An upstream that fails to connect or times out `failures` times in a row is skipped for `cooloff`.",
    keys: &[
        key("failures", Ty::Int { min: 1, max: 1000 }, "`3`", "Failures in a row that take an upstream out."),
        key("cooloff", Ty::Duration, "`10s`", "How long it stays out."),
    ],
};

static HEALTH_CHECK: SectionDoc = SectionDoc {
    id: "health_check",
    section: &schema::HEALTH_CHECK,
    title: "Active health checks",
    doc: "`GET path` on every upstream address each `interval`; anything but 2xx/3xx skips the address until a check passes.",
    keys: &[
        required("path", Ty::Str, "The path checked."),
        key("interval", Ty::Duration, "`5s`", "Time between checks."),
    ],
};

static POLICY: SectionDoc = SectionDoc {
    id: "policy",
    section: &schema::POLICY,
    title: "Policy",
    doc: "Who is bound by robots.txt. `enforce`: robots.txt decides; `pass`: never blocked; `block`: blocked everywhere but `/robots.txt` and exempt paths.",
    keys: &[
        key("categories", Ty::MapOf { keys: Some(categories), value: &POLICY_ACTION }, "`{library: pass, monitoring: pass}`, every other category `enforce`", "Per crawler category; merged category by category."),
        key("crawlers", Ty::MapOf { keys: None, value: &POLICY_ACTION }, "`{}`", "Per crawler, by catalogue name (case-insensitive); wins over its purposes and category; merged crawler by crawler."),
        key("purposes", Ty::MapOf { keys: Some(purposes), value: &Ty::AnyOf(&[POLICY_ACTION, Ty::Section(&PURPOSE_POLICY)]) }, "`{}`", "Per purpose (`search`, `training`, `agent`, `other`): an action, or `{action, multi_purpose}`. Wins over the category, loses to `crawlers`; a crawler with several purposes gets the most restrictive of their actions, except that a refusal (`block`, `license`) does not refuse a crawler that serves the purpose through its operator's own robots.txt token (Googlebot's training: `Google-Extended`; the served robots.txt gets a `Disallow: /` group for the token instead), nor, unless `multi_purpose: block`, one that serves `search` too. `license` answers with the origin's licence (`402`)."),
        key("allow_clients", Ty::OneOrList(&Ty::Network), "`[]`", "Client networks never blocked, whatever the User-Agent."),
        key("exempt_paths", Ty::OneOrList(&Ty::Str), "`[]`", "Path prefixes (starting with `/`, matched on the canonical path) never blocked for GET and HEAD without a query."),
    ],
};

static PURPOSE_POLICY: SectionDoc = SectionDoc {
    id: "purpose_policy",
    section: &schema::PURPOSE_POLICY,
    title: "A purpose's policy",
    doc: "The long form of a `policy.purposes` entry: `training: {action: block, multi_purpose: block}`.",
    keys: &[
        required("action", POLICY_ACTION, "As the short form's word: `enforce`, `pass`, `block` or `license`."),
        key("multi_purpose", Ty::Words(|| names(&super::origin::MULTI_PURPOSE)), "`allow`", "What a refusal does to a crawler that serves `search` too and whose operator names no robots.txt token for this purpose (bingbot): `allow` lets it in (refusing it would take the site out of its search), `block` refuses it too. A crawler with a control token (Googlebot, Applebot) is never refused for the purpose: its token's group is."),
    ],
};

static CRAWL_DELAY: SectionDoc = SectionDoc {
    id: "crawl_delay",
    section: &schema::CRAWL_DELAY,
    title: "Crawl-delay",
    doc: "robots.txt's `Crawl-delay` as a rate limit per crawler and client address.",
    keys: &[
        key("action", Ty::Words(|| names(&super::origin::CRAWL_DELAY_ACTIONS)), "`enforce`", "`enforce` (a request sooner than its group's delay after the previous admitted one gets `429` with `Retry-After`), `report` (proxied, counted `would_limit`), `ignore`."),
        key("max", Ty::Duration, "`60s`", "Longer delays are taken as this long."),
        key("crawlers", Ty::MapOf { keys: None, value: &Ty::Words(|| names(&super::origin::CRAWL_DELAY_ACTIONS)) }, "`report` for crawlers the catalogue marks as ignoring Crawl-delay (the Google family, Applebot, Amazonbot), `action` for the rest", "Per crawler, by catalogue name: `enforce`, `report` or `ignore`."),
    ],
};

static CONTENT_SIGNALS: SectionDoc = SectionDoc {
    id: "content_signals",
    section: &schema::CONTENT_SIGNALS,
    title: "Content signals",
    doc: "robots.txt's `Content-Signal:` (`search`, `ai-input`, `ai-train`) and `Content-Usage:` (`train-ai`, `search`) lines, for the crawler's group and the path (path-scoped lines by longest match, only on paths the group may crawl).",
    keys: &[
        key("action", Ty::Words(|| names(&super::origin::SIGNAL_ACTIONS)), "`report`", "`enforce` (a crawler whose purposes include `training` is refused on `ai-train=no`/`train-ai=n`, `search` on `search=no`/`search=n`, `agent` on `ai-input=no`, but for the refusals `multi_purpose` spares), `report` (counted and logged as would_block, policy `content-signal`), `ignore`."),
        key("header", Ty::Bool, "`false`", "Proxied responses carry `Content-Usage` with the preferences for the path, unless the origin set one."),
        key("multi_purpose", Ty::Words(|| names(&super::origin::MULTI_PURPOSE)), "`allow`", "As `policy.purposes`' `multi_purpose`: whether a refused purpose also refuses a crawler that serves `search` too with no token of its operator's own for the purpose (bingbot on `search=yes, ai-train=no`). A crawler with a control token (Googlebot, Applebot) is never refused for it: under `enforce` the served robots.txt carries the token's group instead."),
    ],
};

static OFFENDERS: SectionDoc = SectionDoc {
    id: "offenders",
    section: &schema::OFFENDERS,
    title: "Repeat offenders",
    doc: "A strike is a request a robots.txt rule blocks that every robots.txt in force over the previous 24 hours also disallowed.",
    keys: &[
        key("action", Ty::Words(|| names(&super::origin::OFFENDERS_ACTIONS)), "`report`", "`ban` (an address reaching `strikes` within `window` is refused for `ban` on every path but `/robots.txt`), `report` (logs `client would be banned`; bans in force for repeated violations are not applied: proxied, decision `would_ban`), `off` (no strikes, and no ban in force is applied: decision `ban_suspended`)."),
        key("scope", Ty::Words(|| names(&super::origin::BAN_SCOPES)), "`crawlers`", "Which requests of a banned address are refused: `crawlers` (those identifying as a crawler or with no User-Agent, and those with the exact User-Agent of a client a trap or disguised ban caught) or `address` (all)."),
        key("strikes", Ty::Int { min: 1, max: 1_000_000 }, "`20`", "Strikes that ban."),
        key("window", Ty::Duration, "`10m`", "Counted from the first strike."),
        key("ban", Ty::Duration, "`1h`", "How long a ban lasts."),
    ],
};

static CRAWLERS: SectionDoc = SectionDoc {
    id: "crawlers",
    section: &schema::CRAWLERS,
    title: "The crawler catalogue",
    doc: "",
    keys: &[
        key(
            "builtin",
            Ty::Bool,
            "`true`",
            "Use the built-in catalogue (`crates/robotsguard-crawlers/crawlers.yaml`).",
        ),
        key(
            "generic",
            Ty::Bool,
            "`true`",
            "Treat automated-looking User-Agents as crawlers under `*`.",
        ),
        key(
            "extra",
            Ty::List(&Ty::Section(&EXTRA_CRAWLER)),
            "`[]`",
            "More crawlers; an entry named like a built-in one replaces it.",
        ),
        key(
            "feeds",
            Ty::List(&Ty::Section(&FEED)),
            "`[]`",
            "Catalogue feeds, merged over the built-in catalogue while the proxy runs (built-in entries win unless a feed entry says `replace: true`; `extra` wins over both).",
        ),
    ],
};

static FEED: SectionDoc = SectionDoc {
    id: "feed",
    section: &schema::FEED,
    title: "A catalogue feed",
    doc: "Fetched at start and every `refresh` (conditional requests, backoff from 10 s on failure, at most 4 MiB); a copy that does not parse never replaces the last good one.",
    keys: &[
        required("url", Ty::Str, "An http(s) URL, or `file:path` (relative to the config file; checked by `validate` and `serve`, re-read when it changes)."),
        key("format", FEED_FORMAT, "`robotsguard`", "`robotsguard` (the schema of `crates/robotsguard-crawlers/crawlers.yaml`) or `ai-robots-txt` (the ai.robots.txt project's `robots.json`, its `function` mapped to a category and purposes)."),
        key("refresh", Ty::Duration, "`24h`", "How often it is fetched again (at least `1s`)."),
        key("may_override", Ty::Bool, "`false`", "Whether its entries may take the place of a built-in or `crawlers.extra` entry (`replace: true`) or hide one (a pattern holding that entry's pattern, such as `GPTBot/1.0`). Without it such entries are refused, counted in `robotsguard_catalogue_feed_entries_refused` and logged; the rest of the feed applies. No feed entry may match browsers (`Mozilla`, `Chrome`, `Safari`, `Firefox`, `Edge`, `AppleWebKit`, `Gecko`, or any pattern a common browser's User-Agent holds)."),
        key("max_lists", Ty::Int { min: 0, max: 10_000 }, "`32`", "The most distinct IP range lists its entries may name (each up to 8 MiB, held in memory); entries that would name more are refused. A feed fetched over the network may name `https://` lists only, fetched from public addresses only (see `verify.ranges.private_origins`); a `file:` feed may also name `http://` URLs and local files."),
    ],
};

static EXTRA_CRAWLER: SectionDoc = SectionDoc {
    id: "crawler",
    section: &schema::EXTRA_CRAWLER,
    title: "A crawler of `crawlers.extra`",
    doc: "",
    keys: &[
        required("name", Ty::Str, "Unique; in logs, metrics and `{crawler}`."),
        key("tokens", Ty::OneOrList(&Ty::Str), "the name, lower-cased", "robots.txt product tokens it obeys, most specific first."),
        key("pattern", Ty::Str, "the name", "Literal text that identifies it in a User-Agent (whole word, case-insensitive, 3+ characters)."),
        key("category", Ty::Words(categories), "`other`", "Its category, as `policy.categories` names them."),
        key("operator", Ty::Str, "none", "Who runs it (shown by `identify`)."),
        key("ignores_global", Ty::Bool, "`false`", "Obeys only groups that name it, never `*` (like AdsBot)."),
        key("verify", Ty::Section(&CRAWLER_VERIFY), "none", "How its claim is checked."),
        key("purposes", Ty::List(&Ty::Words(purposes)), "from its category", "What its fetches are for: `search`, `training`, `agent`, `other`."),
        key("controls", Ty::MapOf { keys: Some(purposes), value: &Ty::Str }, "`{}`", "Per purpose, the robots.txt token its operator names for refusing that use without refusing the crawler (`{training: Example-Extended}`): a policy or content signal refusing the purpose then lets the crawler in and the served robots.txt carries a `Disallow: /` group for the token. Letters, `-` and `_`; the purpose must be one of its `purposes`."),
        key("ignores_crawl_delay", Ty::Bool, "`false`", "Its operator documents that it ignores Crawl-delay: the delay is reported, not enforced, unless `crawl_delay.crawlers` says otherwise."),
    ],
};

static CRAWLER_VERIFY: SectionDoc = SectionDoc {
    id: "crawler_verify",
    section: &schema::CRAWLER_VERIFY,
    title: "A crawler's verification data",
    doc: "",
    keys: &[
        key("ips", Ty::OneOrList(&Ty::AnyOf(&[Ty::Str, Ty::Section(&RANGE_LIST)])), "none", "IP range lists: `http(s)://` URLs or `file:` paths (relative to the config file); the operators' JSON, the `ip_prefix` variant, JAFAR, or plain addresses and networks; or `{url, format}` for a list in another shape."),
        key("rdns", Ty::OneOrList(&Ty::Str), "none", "Reverse DNS suffixes (forward-confirmed, on a label boundary)."),
    ],
};

static RANGE_LIST: SectionDoc = SectionDoc {
    id: "range_list",
    section: &schema::RANGE_LIST,
    title: "A range list with its format",
    doc: "",
    keys: &[
        required("url", Ty::Str, "An `http(s)://` URL or a `file:` path."),
        key("format", Ty::AnyOf(&[Ty::Words(|| vec!["jafar"]), Ty::Section(&RANGE_LIST_FORMAT)]), "by the list's shape", "`jafar` (per-prefix `services`: a prefix vouches only for the crawlers it names), or a selector mapping."),
    ],
};

static RANGE_LIST_FORMAT: SectionDoc = SectionDoc {
    id: "range_list_format",
    section: &schema::RANGE_LIST_FORMAT,
    title: "A range list selector",
    doc: "One of the two keys. At most 100,000 values or matches; more is a broken list.",
    keys: &[
        key(
            "json_pointer",
            Ty::Str,
            "none",
            "A JSON pointer whose `*` steps match every member, e.g. `/prefixes/*/ip_prefix`.",
        ),
        key(
            "regex",
            Ty::Str,
            "none",
            "A regular expression with exactly one capture group, for lists inside text or HTML.",
        ),
    ],
};

static TRAPS: SectionDoc = SectionDoc {
    id: "traps",
    section: &schema::TRAPS,
    title: "Trap paths",
    doc: "With traps on, robotsguard serves the origin's robots.txt itself (whatever its source), with one `Disallow:` line per trap path in every group (and a `User-agent: *` group when the file has none). A request for a trap path or below it, from anyone but `policy.allow_clients` and the trusted proxies' own addresses, is a trap hit.",
    keys: &[
        key("enabled", Ty::Bool, "`false`", "Put trap paths in the robots.txt served and watch them."),
        key("paths", Ty::List(&Ty::Str), "one derived path", "The trap paths (plain paths, at most 16); none: one per origin, `/` and 16 letters and digits, an HMAC-SHA-256 of the origin's name under the secret (the same in every replica and across restarts)."),
        key("action", Ty::Words(|| names(&super::traps::TRAP_ACTIONS)), "`report`", "`report` (counted and logged, answered by the origin), `block` (`404` without contacting the origin), `ban` (`404`, and the address banned at once for `offenders.ban`, with the exact User-Agent of a browser or app that took the trap, refused as `offenders.scope` says; a request another site's page caused is never banned). `mode: report` only reports."),
        key("secret_file", Ty::Str, "the generated secret", "A file holding the secret trap paths are derived from; without it, a secret generated at first start and kept in the shared store (`state.backend: redis`) or in `state.dir`."),
    ],
};

static DISGUISED: SectionDoc = SectionDoc {
    id: "disguised",
    section: &schema::DISGUISED,
    title: "Disguised crawlers",
    doc: "A client without a crawler's User-Agent that read `/robots.txt` (GET or HEAD) and then, `strikes` times within `window`, asks for paths the robots.txt in force disallows to every group is the crawler `disguised` (bound by the `*` group) for that origin. Exempt paths, allowed clients and trusted proxies never count.",
    keys: &[
        key("action", Ty::Words(|| names(&super::traps::DISGUISED_ACTIONS)), "`report`", "`report` (proxied, logged as would_block, decision `would_disguised`), `block` (`403` on the paths robots.txt disallows, with a body saying why), `ban` (banned with the origin's `offenders` settings, together with its exact User-Agent)."),
        key("strikes", Ty::Int { min: 1, max: 1_000_000 }, "`5`", "Requests for paths disallowed to every group that make the address a disguised crawler."),
        key("window", Ty::Duration, "`10m`", "Within how long (from the first; each later one extends it)."),
    ],
};

static ORIGIN: SectionDoc = SectionDoc {
    id: "origin",
    section: &schema::ORIGIN,
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

static UPSTREAM_TLS: SectionDoc = SectionDoc {
    id: "upstream_tls",
    section: &schema::UPSTREAM_TLS,
    title: "Upstream TLS",
    doc: "Used for proxied requests, health checks and robots.txt fetches alike.",
    keys: &[
        key("sni", Ty::Str, "the first host", "Server name sent and verified."),
        key("verify", Ty::Bool, "`true`", "Check the upstream's certificate; `false` is for tests (logged as a warning) — trust a private CA with `ca` instead."),
        key("ca", Ty::Path, "the system's roots", "PEM CA certificates the upstream's certificate is checked against."),
        key("client_cert", Ty::Path, "none", "PEM certificate chain presented to origins that require one (mTLS); with `client_key`."),
        key("client_key", Ty::Path, "none", "Private key of `client_cert`."),
    ],
};

static VERIFY: SectionDoc = SectionDoc {
    id: "verify",
    section: &schema::VERIFY,
    title: "Crawler verification",
    doc: "How a User-Agent's claim to be a crawler is checked. Offline (no lists, no DNS) everything is `unverified`, and nothing is refused that would not be without verification.",
    keys: &[
        key("refresh", Ty::Duration, "`24h`", "How often the range lists are fetched again (conditional requests; at least `1s`)."),
        key("ranges", Ty::Section(&VERIFY_RANGES), "", "The operators' published IP range lists."),
        key("dns", Ty::Section(&VERIFY_DNS), "", "Forward-confirmed reverse DNS."),
        key("web_bot_auth", Ty::Section(&WEB_BOT_AUTH), "", "HTTP Message Signatures (Web Bot Auth)."),
    ],
};

static VERIFY_RANGES: SectionDoc = SectionDoc {
    id: "verify_ranges",
    section: &schema::VERIFY_RANGES,
    title: "Range lists",
    doc: "",
    keys: &[
        key("enabled", Ty::Bool, "`true`", "`false`: crawlers checked by lists alone stay `unverified`."),
        key("mirrors", Ty::MapOf { keys: None, value: &Ty::Str }, "`{}`", "A list's URL → another URL, or a `file:` path you keep up to date (re-read when it changes). The URL must be one some crawler's `verify.ips` names."),
        key("proxy", Ty::Url, "`HTTPS_PROXY`, minus the hosts `NO_PROXY` names", "An HTTP proxy (CONNECT) for the list and key directory fetches."),
        key("private_origins", Ty::List(&Ty::Url), "`[]`", "https origins (`https://host[:port]`) whose range lists a catalogue feed fetched over the network may name on a loopback, private or link-local address (a list server inside your network). Any other list such a feed names is fetched over https from public addresses only, every redirect checked again; a list that fails the check is not fetched (`robotsguard_verify_list_fetches_total{outcome=\"refused\"}`)."),
    ],
};

static VERIFY_DNS: SectionDoc = SectionDoc {
    id: "verify_dns",
    section: &schema::VERIFY_DNS,
    title: "Reverse DNS",
    doc: "",
    keys: &[
        key("enabled", Ty::Bool, "`true`", "`false`: crawlers checked by DNS alone stay `unverified`."),
        key("servers", Ty::OneOrList(&Ty::Str), "the system resolver, without `/etc/hosts`", "Resolvers (`IP` or `IP:PORT`), UDP and TCP."),
        key("timeout", Ty::Duration, "`2s`", "The longest the first request from an address waits for its lookup (the lookup goes on)."),
        key("positive_ttl", Ty::Duration, "`24h`", "How long a confirmed name is cached."),
        key("negative_ttl", Ty::Duration, "`1h`", "How long \"no name\" is cached (failures: 30 s, or this if shorter)."),
        key("max_entries", Ty::Int { min: 1, max: 10_000_000 }, "`100000`", "Addresses cached; a full cache drops expired answers first."),
        key("probe_name", Ty::Str, "`googlebot.com`", "A name that must exist in public DNS, looked up at start and every `probe_interval` to tell whether the resolver reaches public DNS. A resolver that does not answer it (silence, `SERVFAIL`, `REFUSED`) gets no lookups until it does; one that answers `NXDOMAIN` does not see public DNS. Either way reverse DNS verification reports itself unavailable (`robotsguard_verify_dns_available` 0, one log line, `/explain`'s `reverse_dns`) and its claims stay `unverified`."),
        key("probe_interval", Ty::Duration, "`60s`", "How often the probe runs while the name resolves (at least `1s`); every 5 s at most while it does not, so verification resumes soon after the resolver does."),
    ],
};

static WEB_BOT_AUTH: SectionDoc = SectionDoc {
    id: "web_bot_auth",
    section: &schema::WEB_BOT_AUTH,
    title: "Web Bot Auth",
    doc: "A request signed by a listed agent (RFC 9421 as the webbotauth draft profiles it) is `verified` as the agent's crawler, whatever its User-Agent.",
    keys: &[
        key("enabled", Ty::Bool, "`true`", "Check signatures."),
        key("max_skew", Ty::Duration, "`60s`", "How far `created`/`expires` may be from now (at most `1h`)."),
        key("agents", Ty::List(&Ty::Section(&SIGNATURE_AGENT)), "`[]`", "The signing agents trusted."),
        key("mode", WEB_BOT_AUTH_MODE, "`optional`", "What signatures may change: `observe` (verified and counted, no decision changed), `optional` (a valid signature identifies its crawler; a replayed nonce gets `429`), `required` (also: a request claiming a crawler that has a signing agent and carrying no valid signature gets `403` with `Accept-Signature`). An origin or `defaults` may set its own."),
        key("registries", Ty::List(&Ty::Str), "`[]`", "Registries of signature-agent cards (an https URL or `file:path`; one card URL a line, `#` comments; cards `https:`, `data:`, or `file:` in a `file:` registry), whose agents join `agents` (which win); read at start and every `verify.refresh`, the last good copy kept."),
        key("private_agents", Ty::List(&Ty::Url), "`[]`", "Agents (https origins) the catalogue, a feed or a registry names whose key directory may be fetched from a loopback, private or link-local address (an agent inside your network). Any other agent not in `agents` is fetched from public addresses only."),
        key("nonceless_agents", Ty::List(&Ty::Url), "`[]`", "Agents (https origins) whose signatures without a `nonce` are accepted for their whole validity, from any address: your word that the agent reuses its signatures (the drafts give an agent no way to say so). Any other agent's nonce-less signature is accepted only within `nonceless_window` of its `created` and only from the address that first sent it; a later or cross-address replay gets `429` with a fresh `Accept-Signature`."),
        key("nonceless_window", Ty::Duration, "`5m`", "How long after its `created` (plus `max_skew`) a signature without a `nonce` is accepted, for agents not in `nonceless_agents` (1s to 1h)."),
    ],
};

static ORIGIN_WEB_BOT_AUTH: SectionDoc = SectionDoc {
    id: "origin_web_bot_auth",
    section: &schema::ORIGIN_WEB_BOT_AUTH,
    title: "Web Bot Auth per origin",
    doc: "An origin's (or `defaults`') own Web Bot Auth mode.",
    keys: &[key(
        "mode",
        WEB_BOT_AUTH_MODE,
        "`verify.web_bot_auth.mode`",
        "`observe`, `optional` or `required`, as `verify.web_bot_auth.mode`.",
    )],
};

static SIGNATURE_AGENT: SectionDoc = SectionDoc {
    id: "signature_agent",
    section: &schema::SIGNATURE_AGENT,
    title: "A signing agent",
    doc: "",
    keys: &[
        required("agent", Ty::Url, "The `Signature-Agent` origin (https), whose `/.well-known/http-message-signatures-directory` holds its keys."),
        required("crawler", Ty::Str, "The catalogue crawler a valid signature proves."),
        key("keys", Ty::Str, "the agent's key directory", "A `file:` JWKS instead of the directory (re-read when it changes)."),
    ],
};

static STATE: SectionDoc = SectionDoc {
    id: "state",
    section: &schema::STATE,
    title: "Shared state",
    doc: "Where Crawl-delay budgets, strike counts, bans and robots.txt reads are kept.",
    keys: &[
        key(
            "backend",
            Ty::Words(super::state::backend_words),
            "`memory`",
            "This process's memory, or a Redis/Valkey server every replica shares.",
        ),
        key(
            "redis",
            Ty::Section(&STATE_REDIS),
            "",
            "The store, with `backend: redis`.",
        ),
        key(
            "dir",
            Ty::Str,
            "`$STATE_DIRECTORY`, else `/var/lib/robotsguard`, else `$XDG_STATE_HOME/robotsguard`: the first that can be written",
            "Where this process keeps the generated trap secret (file `trap-secret`, mode 0600) without a shared store.",
        ),
    ],
};

static STATE_REDIS: SectionDoc = SectionDoc {
    id: "state_redis",
    section: &schema::STATE_REDIS,
    title: "The Redis/Valkey store",
    doc: "One of `url`, `url_file`, `sentinel`, `cluster`. When the store is slow or down, decisions fall back to this process's memory until it answers again.",
    keys: &[
        key("url", Ty::Str, "", "`redis://[user:password@]host:port/db`, `redis+sentinel://…/MASTER[/DB]`, `redis+cluster://NODE,...`, `rediss://…` for TLS, or `unix:///path`."),
        key("url_file", Ty::Path, "", "A file holding the URL (a mounted Secret), read at start."),
        key("sentinel", Ty::Section(&STATE_REDIS_SENTINEL), "", "The primary that these sentinels name."),
        key("cluster", Ty::Section(&STATE_REDIS_CLUSTER), "", "A Redis or Valkey Cluster."),
        key("prefix", Ty::Str, "`robotsguard:`", "Put before every key, so several deployments can share one server."),
        key("timeout", Ty::Duration, "`50ms`", "The longest a request waits for the store (at most `5s`)."),
        key("tls", Ty::Section(&STATE_REDIS_TLS), "none", "TLS material for `rediss://` (or, present, TLS to sentinels and cluster nodes)."),
    ],
};

static STATE_REDIS_SENTINEL: SectionDoc = SectionDoc {
    id: "state_redis_sentinel",
    section: &schema::STATE_REDIS_SENTINEL,
    title: "Redis Sentinel",
    doc: "",
    keys: &[
        required(
            "master",
            Ty::Str,
            "The name the sentinels know the primary by.",
        ),
        required(
            "nodes",
            Ty::List(&Ty::HostPort),
            "1 to 32 sentinels, `host[:port]` (26379 by default).",
        ),
        key(
            "db",
            Ty::Int {
                min: 0,
                max: i32::MAX as i128,
            },
            "`0`",
            "The database number.",
        ),
        key("username", Ty::Str, "none", "The primary's user."),
        key(
            "password_file",
            Ty::Path,
            "none",
            "A file holding the primary's password, read at start.",
        ),
    ],
};

static STATE_REDIS_CLUSTER: SectionDoc = SectionDoc {
    id: "state_redis_cluster",
    section: &schema::STATE_REDIS_CLUSTER,
    title: "Redis Cluster",
    doc: "",
    keys: &[
        required(
            "nodes",
            Ty::List(&Ty::HostPort),
            "1 to 32 nodes, `host[:port]` (6379 by default), from which the cluster is discovered.",
        ),
        key("username", Ty::Str, "none", "The user."),
        key(
            "password_file",
            Ty::Path,
            "none",
            "A file holding the password, read at start.",
        ),
    ],
};

static STATE_REDIS_TLS: SectionDoc = SectionDoc {
    id: "state_redis_tls",
    section: &schema::STATE_REDIS_TLS,
    title: "The store's TLS",
    doc: "",
    keys: &[
        key(
            "ca",
            Ty::Path,
            "the system's roots",
            "PEM CA certificates the store's certificate is checked against.",
        ),
        key(
            "client_cert",
            Ty::Path,
            "none",
            "PEM certificate chain presented to a store that asks for one; with `client_key`.",
        ),
        key(
            "client_key",
            Ty::Path,
            "none",
            "Private key of `client_cert`.",
        ),
    ],
};

static REPORTS: SectionDoc = SectionDoc {
    id: "reports",
    section: &schema::REPORTS,
    title: "Reports",
    doc: "",
    keys: &[
        key("top", Ty::Int { min: 10, max: 100_000 }, "`1000`", "Violation rows kept per origin and time slice (a heavy-hitters sketch: more distinct paths cost no memory, counts then carry an error bound)."),
        key("window", Ty::Duration, "`24h`", "How far back `/reports/*` and the console reach (1h–7d)."),
    ],
};

/// Every documented section, in the reference page's order.
pub(crate) static SECTIONS: &[&SectionDoc] = &[
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
    &CRAWL_DELAY,
    &CONTENT_SIGNALS,
    &OFFENDERS,
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
    &super::preview::PREVIEW_DOC,
];

/// The paths (`defaults.block`, `origins[].block`) where each section appears, walking from
/// the top level.
fn section_paths() -> Vec<(&'static str, Vec<String>)> {
    let mut out: Vec<(&'static str, Vec<String>)> =
        SECTIONS.iter().map(|s| (s.id, Vec::new())).collect();
    fn walk(out: &mut Vec<(&'static str, Vec<String>)>, section: &'static SectionDoc, path: &str) {
        if let Some((_, paths)) = out.iter_mut().find(|(id, _)| *id == section.id) {
            paths.push(path.to_owned());
        }
        for key in section.keys {
            let key_path = if path.is_empty() {
                key.name.to_owned()
            } else {
                format!("{path}.{}", key.name)
            };
            for (inner, suffix) in nested(&key.ty) {
                walk(out, inner, &format!("{key_path}{suffix}"));
            }
        }
    }
    walk(&mut out, &TOP, "");
    out
}

/// The sections a type holds, with the path suffix that reaches them (`[]` through a list).
fn nested(ty: &'static Ty) -> Vec<(&'static SectionDoc, &'static str)> {
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

/// Whether a key at `path` keeps its running value until a restart.
fn restart_only(path: &str) -> bool {
    let path = path.replace("[]", "");
    super::restart_only_names().iter().any(|name| {
        path == *name
            || path
                .strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('.'))
    })
}

/// Whether some key below `path` is restart-only (`limits` holds `limits.max_connections`).
fn restart_only_within(path: &str) -> bool {
    let prefix = format!("{}.", path.replace("[]", ""));
    super::restart_only_names()
        .iter()
        .any(|name| name.starts_with(&prefix))
}

fn literal_default(text: &str) -> Option<&str> {
    let inner = text.strip_prefix('`')?.strip_suffix('`')?;
    (!inner.contains('`')).then_some(inner)
}

fn ty_schema(ty: &Ty) -> Value {
    match ty {
        Ty::Str | Ty::Path => json!({"type": "string"}),
        Ty::Url => json!({"type": "string", "pattern": "^https?://"}),
        Ty::Bool => json!({"type": "boolean"}),
        Ty::Int { min, max } => json!({"type": "integer", "minimum": min, "maximum": max}),
        Ty::Duration => json!({
            "type": "string",
            "pattern": "^(?=[0-9])([0-9]+d)?([0-9]+h)?([0-9]+m)?([0-9]+s)?([0-9]+ms)?$",
        }),
        Ty::Size => json!({"anyOf": [
            {"type": "integer", "minimum": 0},
            {"type": "string", "pattern": "^[0-9]+ ?([bB]|[kKmMgG][iI]?[bB])?$"},
        ]}),
        Ty::Words(words) => {
            let words = words();
            let mut allowed: Vec<Value> = words.iter().map(|w| json!(w)).collect();
            // The reader reads a YAML 1.1 boolean as the word it spells (`off` → false).
            if words.iter().any(|w| matches!(*w, "off" | "no")) {
                allowed.push(json!(false));
            }
            if words.iter().any(|w| matches!(*w, "on" | "yes")) {
                allowed.push(json!(true));
            }
            json!({"enum": allowed})
        }
        Ty::Address => {
            json!({"type": "string", "pattern": "^(\\[[0-9A-Fa-f:.]+\\]|[0-9.]+):[0-9]+$"})
        }
        Ty::HostPort => json!({"type": "string", "minLength": 1}),
        Ty::Network => json!({"type": "string", "pattern": "^[0-9A-Fa-f:.]+(/[0-9]+)?$"}),
        Ty::Section(s) => json!({"$ref": format!("#/$defs/{}", s.id)}),
        Ty::List(inner) => json!({"type": "array", "items": ty_schema(inner)}),
        Ty::OneOrList(inner) => {
            let one = ty_schema(inner);
            json!({"anyOf": [one.clone(), {"type": "array", "items": one}]})
        }
        Ty::AnyOf(options) => json!({"anyOf": options.iter().map(ty_schema).collect::<Vec<_>>()}),
        Ty::MapOf { keys, value } => {
            let mut out =
                json!({"type": ["object", "null"], "additionalProperties": ty_schema(value)});
            if let Some(keys) = keys {
                out["propertyNames"] = json!({"enum": keys()});
            }
            out
        }
    }
}

/// The config file's JSON Schema (draft 2020-12), pretty-printed with a final newline.
pub fn json_schema() -> String {
    let paths = section_paths();
    let mut defs = Map::new();
    for section in SECTIONS.iter().filter(|s| s.id != TOP.id) {
        defs.insert(section.id.to_owned(), section_schema(section, &paths));
    }
    let mut root = section_schema(&TOP, &paths);
    let top = root
        .as_object_mut()
        .expect("a section's schema is an object");
    let mut head = Map::new();
    head.insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    head.insert("title".into(), json!("robotsguard configuration"));
    head.append(top);
    head.insert("$defs".into(), Value::Object(defs));
    let mut text =
        serde_json::to_string_pretty(&Value::Object(head)).expect("a JSON value always serializes");
    text.push('\n');
    text
}

fn section_schema(section: &SectionDoc, paths: &[(&str, Vec<String>)]) -> Value {
    let where_ = paths
        .iter()
        .find(|(id, _)| *id == section.id)
        .map(|(_, p)| p.clone())
        .unwrap_or_default();
    let mut properties = Map::new();
    for key in section.keys {
        let mut schema = ty_schema(&key.ty);
        let full: Vec<String> = where_.iter().map(|p| join(p, key.name)).collect();
        let mut description = key.doc.to_owned();
        if !key.default.is_empty() {
            description.push_str(&format!(" Default: {}.", key.default));
        }
        if full.iter().any(|p| restart_only(p)) {
            description.push_str(" Restart-only: a reload keeps the running value.");
        }
        let obj = schema.as_object_mut().expect("a key's schema is an object");
        obj.insert("description".into(), json!(description));
        if let Some(value) = literal_default(key.default) {
            if let Some(typed) = typed_default(&key.ty, value) {
                obj.insert("default".into(), typed);
            }
        }
        properties.insert(key.name.to_owned(), schema);
    }
    let required: Vec<&str> = section
        .keys
        .iter()
        .filter(|k| k.required)
        .map(|k| k.name)
        .collect();
    let mut out = json!({
        "type": ["object", "null"],
        "title": section.title,
        "additionalProperties": false,
        "properties": properties,
    });
    if !section.doc.is_empty() {
        out["description"] = json!(section.doc);
    }
    if !required.is_empty() {
        out["required"] = json!(required);
    }
    out
}

fn typed_default(ty: &Ty, value: &str) -> Option<Value> {
    match ty {
        Ty::Bool => value.parse::<bool>().ok().map(Value::Bool),
        Ty::Int { .. } => value.parse::<i64>().ok().map(|n| json!(n)),
        Ty::Duration | Ty::Size | Ty::Words(_) | Ty::Str | Ty::Address => Some(json!(value)),
        _ => None,
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn ty_words(ty: &Ty) -> String {
    match ty {
        Ty::Str => "string".into(),
        Ty::Path => "file path".into(),
        Ty::Url => "URL".into(),
        Ty::Bool => "boolean".into(),
        Ty::Int { min, max } => format!("integer {min}–{max}"),
        Ty::Duration => "duration".into(),
        Ty::Size => "size".into(),
        Ty::Words(words) => words()
            .iter()
            .map(|w| format!("`{w}`"))
            .collect::<Vec<_>>()
            .join(" \\| "),
        Ty::Address => "`IP:PORT`".into(),
        Ty::HostPort => "`host:port`".into(),
        Ty::Network => "CIDR or address".into(),
        Ty::Section(s) => format!("[mapping](#{})", s.id.replace('_', "-")),
        Ty::List(inner) => format!("list of {}", ty_words(inner)),
        Ty::OneOrList(inner) => format!("{} or a list", ty_words(inner)),
        Ty::AnyOf(options) => options
            .iter()
            .map(ty_words)
            .collect::<Vec<_>>()
            .join(" or "),
        Ty::MapOf { keys, value } => match keys {
            Some(keys) => format!(
                "mapping of {} → {}",
                keys()
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                ty_words(value)
            ),
            None => format!("mapping of names → {}", ty_words(value)),
        },
    }
}

/// The Markdown reference of every key (the book's `reference/configuration.md`).
pub fn markdown() -> String {
    let paths = section_paths();
    let mut out = format!(
        "<!-- Generated by `robotsguard config reference` from src/config/reference.rs: do not edit; \
         run scripts/gen-docs.sh. -->\n\n# Configuration reference\n\n\
         Every key of the config file. Durations are strings such as `250ms`, `30s`, `5m`, `24h`, `1d`, \
         `1m30s`; sizes are bytes or `500KiB`, `1MiB`. A key written with an empty value (`key:`) takes \
         its default. Unknown keys are errors. **Live** keys take effect on a reload; \
         **restart** keys keep their running value until the process restarts (the log and \
         `robotsguard_config_restart_required` say so).\n\n\
         The restart-only settings, with every key below them: {}.\n\n\
         Editors complete and check the file with the JSON Schema `config/robotsguard.schema.json` \
         (`robotsguard config schema`): start the file with\n\n\
         ```yaml\n# yaml-language-server: $schema=../config/robotsguard.schema.json\n```\n\n\
         (a path relative to the config file, or a URL where you serve the schema).\n",
        super::restart_only_list(true)
    );
    for section in SECTIONS {
        let where_ = paths
            .iter()
            .find(|(id, _)| *id == section.id)
            .map(|(_, p)| p.clone())
            .unwrap_or_default();
        out.push_str(&format!(
            "\n<a id=\"{}\"></a>\n\n## {}\n\n",
            section.id.replace('_', "-"),
            section.title
        ));
        let shown: Vec<String> = where_
            .iter()
            .map(|p| {
                if p.is_empty() {
                    "the top of the file".to_owned()
                } else {
                    format!("`{p}`")
                }
            })
            .collect();
        out.push_str(&format!("At {}.", shown.join(", ")));
        if !section.doc.is_empty() {
            out.push(' ');
            out.push_str(section.doc);
        }
        out.push_str(
            "\n\n| key | type | default | reload | meaning |\n| --- | --- | --- | --- | --- |\n",
        );
        for key in section.keys {
            let paths: Vec<String> = where_.iter().map(|p| join(p, key.name)).collect();
            let reload = if paths.iter().any(|p| restart_only(p)) {
                "restart"
            } else if paths.iter().any(|p| restart_only_within(p)) {
                "per key"
            } else {
                "live"
            };
            let default = if key.required {
                "required".to_owned()
            } else if key.default.is_empty() {
                "—".to_owned()
            } else {
                key.default.to_owned()
            };
            out.push_str(&format!(
                "| `{}` | {} | {} | {} | {} |\n",
                key.name,
                ty_words(&key.ty),
                default,
                reload,
                key.doc.replace('|', "\\|")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_section_documents_exactly_the_keys_the_reader_accepts() {
        for doc in SECTIONS {
            let documented: Vec<&str> = doc.keys.iter().map(|k| k.name).collect();
            assert_eq!(
                documented, doc.section.keys,
                "src/config/reference.rs `{}` must document the keys of schema.rs's section {}, \
                 in its order",
                doc.id, doc.section.place
            );
        }
    }

    #[test]
    fn every_section_of_the_reader_is_documented() {
        // The sections schema.rs declares, read from its source: a new one cannot be forgotten.
        let source = include_str!("schema.rs");
        let declared: Vec<&str> = source
            .lines()
            .filter_map(|l| l.strip_prefix("pub(crate) const "))
            .filter_map(|l| l.strip_suffix(": Section = Section {"))
            .collect();
        assert!(declared.len() > 20, "schema.rs's sections were not found");
        for name in declared {
            let section = schema::ALL
                .iter()
                .find(|(n, _)| *n == name)
                .unwrap_or_else(|| panic!("schema.rs's section {name} is missing from ALL"))
                .1;
            assert!(
                SECTIONS.iter().any(|d| d.section.place == section.place),
                "section {name} ({}) has no SectionDoc in src/config/reference.rs",
                section.place
            );
        }
    }

    #[test]
    fn every_section_is_reachable_from_the_top() {
        for (id, paths) in section_paths() {
            assert!(!paths.is_empty(), "section {id} is referenced by no key");
        }
    }

    #[test]
    fn restart_only_follows_the_reload_list() {
        assert!(restart_only("listen"));
        assert!(restart_only("state.redis.url"));
        assert!(restart_only("limits.max_connections"));
        assert!(!restart_only("limits.header_timeout"));
        assert!(!restart_only("origins[].mode"));
        assert!(!restart_only("listener"));
    }

    #[test]
    fn the_schema_lists_every_key_of_every_section() {
        let schema: Value = serde_json::from_str(&json_schema()).unwrap();
        for doc in SECTIONS {
            let props = if doc.id == TOP.id {
                &schema["properties"]
            } else {
                &schema["$defs"][doc.id]["properties"]
            };
            let mut keys: Vec<&str> = props
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            let mut want = doc.section.keys.to_vec();
            keys.sort_unstable();
            want.sort_unstable();
            assert_eq!(keys, want, "schema of {}", doc.id);
        }
    }

    #[test]
    fn literal_defaults_match_the_readers_constants() {
        let find = |section: &SectionDoc, name: &str| {
            section
                .keys
                .iter()
                .find(|k| k.name == name)
                .map(|k| k.default)
                .unwrap()
        };
        assert_eq!(
            find(&TOP, "listen"),
            format!("`{}`", schema::DEFAULT_LISTEN)
        );
        assert_eq!(find(&TOP, "admin"), format!("`{}`", schema::DEFAULT_ADMIN));
        assert_eq!(
            find(&BLOCK, "status"),
            format!("`{}`", schema::DEFAULT_BLOCK_STATUS)
        );
        assert_eq!(
            find(&REPORTS, "top"),
            format!("`{}`", schema::DEFAULT_REPORTS_TOP)
        );
        assert_eq!(schema::DEFAULT_REFRESH.as_secs(), 300);
        assert_eq!(find(&DEFAULT_ROBOTS, "refresh"), "`5m`");
        assert_eq!(schema::DEFAULT_GRACE.as_secs(), 10);
        assert_eq!(find(&SHUTDOWN, "grace"), "`10s`");
    }
}
