use super::*;

pub(crate) static UPSTREAM_TIMEOUTS: Section = Section {
    id: "upstream_timeouts",
    place: "in `upstream_timeouts`",
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

pub(crate) static PASSIVE_HEALTH: Section = Section {
    id: "passive_health",
    place: "in `passive_health`",
    title: "Passive health",
    doc: "An upstream that fails to connect or times out `failures` times in a row is skipped for `cooloff`.",
    keys: &[
        key("failures", Ty::Int { min: 1, max: 1000 }, "`3`", "Failures in a row that take an upstream out."),
        key("cooloff", Ty::Duration, "`10s`", "How long it stays out."),
    ],
};

pub(crate) static HEALTH_CHECK: Section = Section {
    id: "health_check",
    place: "in `health_check`",
    title: "Active health checks",
    doc: "`GET path` on every upstream address each `interval`; anything but 2xx/3xx skips the address until a check passes.",
    keys: &[
        required("path", Ty::Str, "The path checked."),
        key("interval", Ty::Duration, "`5s`", "Time between checks."),
    ],
};

pub(crate) static UPSTREAM_TLS: Section = Section {
    id: "upstream_tls",
    place: "in upstream `tls`",
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
