//! The top level of the file (`threads`, `trusted_proxies`, which sections exist) and `shutdown`.

use super::*;

pub(crate) static TOP: Section = Section {
    id: "config",
    place: "at the top level",
    title: "The top level",
    doc: "Process-wide settings, the defaults every origin inherits, the crawler catalogue and the origins. Unknown keys are errors; relative paths resolve against the config file's directory.",
    keys: &[
        key("listen", Ty::OneOrList(&Ty::AnyOf(&[Ty::Address, Ty::Section(&LISTENER)])), "`127.0.0.1:8080`", "The proxy's listeners: `\"IP:PORT\"` entries, or mappings for TLS, PROXY protocol and HTTP/2.").restart_only(&RestartOnly {
            differs: |old, new| old.listen != new.listen,
            keep: |new, running| new.listen.clone_from(&running.listen),
        }),
        key("admin", Ty::AnyOf(&[Ty::Address, Ty::Section(&ADMIN)]), "`127.0.0.1:9090`", "The admin listener (`/metrics`, `/healthz`, `/readyz`, `/explain`, `/robots`, `/bans`, the console): `\"IP:PORT\"` or a mapping with a token."),
        key("threads", Ty::Int { min: 1, max: MAX_THREADS as i128 }, "one per CPU", "Proxy worker threads.").restart_only(&RestartOnly {
            differs: |old, new| old.threads != new.threads,
            keep: |new, running| new.threads = running.threads,
        }),
        key("shutdown", Ty::Section(&SHUTDOWN), "", "What SIGTERM does."),
        key("limits", Ty::Section(&LIMITS), "", "Deadlines and caps on client connections and requests."),
        key("trusted_proxies", Ty::OneOrList(&Ty::Network), "`[]`", "Peers (CIDRs or addresses) whose forwarding headers are believed: the client is then the rightmost `X-Forwarded-For` entry that is not itself trusted; on a `proxy_protocol` listener, the only peers allowed to connect."),
        key("access_log", Ty::Section(&ACCESS_LOG), "off", "One line per request; off when absent."),
        key("defaults", Ty::Section(&DEFAULTS), "", "Settings every origin inherits, each overridable per origin."),
        key("crawlers", Ty::Section(&CRAWLERS), "", "The crawler catalogue: the built-in one and your own entries."),
        required("origins", Ty::List(&Ty::Section(&ORIGIN)), "The sites behind the proxy, each with its hosts, upstreams and robots.txt."),
        key("verify", Ty::Section(&VERIFY), "", "How crawler claims are checked: published IP ranges, reverse DNS, Web Bot Auth.").restart_only(&RestartOnly {
            differs: |old, new| old.verify != new.verify,
            keep: |new, running| new.verify.clone_from(&running.verify),
        }),
        key("state", Ty::Section(&STATE), "`{backend: memory}`", "Where Crawl-delay budgets, strikes, bans and robots.txt reads are kept.").restart_only(&RestartOnly {
            differs: |old, new| old.state != new.state,
            keep: |new, running| new.state.clone_from(&running.state),
        }),
        key("reports", Ty::Section(&REPORTS), "", "The violation reports behind `/reports/*` and the console.").restart_only(&RestartOnly {
            differs: |old, new| old.reports != new.reports,
            keep: |new, running| new.reports = running.reports,
        }),
        key("preview", Ty::Section(&PREVIEW), "", "The recent crawler traffic `POST /robots/preview` replays against a candidate robots.txt or policy.").restart_only(&RestartOnly {
            differs: |old, new| old.preview != new.preview,
            keep: |new, running| new.preview = running.preview,
        }),
        key("events", Ty::Section(&EVENTS), "", "Decisions pushed out: signed webhooks, and which bans the admin listener's CrowdSec-compatible decision stream exports to firewalls."),
        key("decision", Ty::Section(&DECISION), "off", "The decision listener: front proxies (nginx `auth_request`, Caddy, Traefik, Envoy) ask it for the judgment instead of proxying through robotsguard."),
        key("evidence", Ty::Section(&EVIDENCE), "off", "Signed compliance records of violations, bans, refusals and licence answers, with the robots.txt copies they refer to.").restart_only(&RestartOnly {
            differs: |old, new| old.evidence != new.evidence,
            keep: |new, running| new.evidence.clone_from(&running.evidence),
        }),
    ],
};

pub(crate) static SHUTDOWN: Section = Section {
    id: "shutdown",
    place: "in `shutdown`",
    title: "Shutdown",
    doc: "",
    keys: &[key(
        "grace",
        Ty::Duration,
        "`10s`",
        "How long SIGTERM waits for requests in flight.",
    )
    .restart_only(&RestartOnly {
        differs: |old, new| old.shutdown_grace != new.shutdown_grace,
        keep: |new, running| new.shutdown_grace = running.shutdown_grace,
    })],
};

pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// A sanity bound on `threads`; more than this is almost surely a typo.
pub(crate) const MAX_THREADS: u64 = 1024;

/// `shutdown`: how long in-flight requests may take to finish on SIGTERM.
pub(crate) fn shutdown_grace(sink: &mut Sink, node: &Node) -> Duration {
    Table::read(sink, node, &SHUTDOWN, "`shutdown`")
        .and_then(|table| {
            table
                .get("grace")
                .and_then(|n| reader::duration(sink, n, "grace"))
        })
        .unwrap_or(DEFAULT_GRACE)
}
