//! `upstream_timeouts`, `passive_health`, `health_check` and an origin's upstream `tls`.

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

/// Time limits towards an origin's upstreams.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UpstreamTimeouts {
    /// Establishing a connection (TCP, and TLS when used).
    pub connect: Duration,
    /// Waiting for the upstream between reads (a hung upstream is answered 504 after this).
    pub read: Duration,
    /// Waiting for the upstream to take a write.
    pub write: Duration,
    /// How long an idle pooled connection is kept for reuse.
    pub idle: Duration,
}

impl Default for UpstreamTimeouts {
    fn default() -> Self {
        UpstreamTimeouts {
            connect: Duration::from_secs(5),
            read: Duration::from_secs(60),
            write: Duration::from_secs(60),
            idle: Duration::from_secs(60),
        }
    }
}

/// How failing upstreams are noticed and skipped.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UpstreamHealth {
    /// Consecutive failures (connection refused or timed out, upstream timeouts) after which an
    /// upstream is skipped.
    pub failures: u32,
    /// How long a failed upstream is skipped before it is tried again.
    pub cooloff: Duration,
    /// Active checks: `GET path` every `interval`, when set.
    pub check: Option<HealthCheck>,
    /// How often upstream DNS names are resolved again.
    pub dns_refresh: Duration,
}

impl Default for UpstreamHealth {
    fn default() -> Self {
        UpstreamHealth {
            failures: 3,
            cooloff: Duration::from_secs(10),
            check: None,
            dns_refresh: Duration::from_secs(30),
        }
    }
}

/// An active health check of each upstream.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HealthCheck {
    /// Path requested; any 2xx or 3xx answer is healthy.
    pub path: String,
    /// Time between two checks of one upstream.
    pub interval: Duration,
}

/// An upstream server address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Upstream {
    /// An IP address (IPv6 without brackets) or a lower-case DNS name.
    pub host: String,
    /// The TCP port.
    pub port: u16,
    /// As written in the config, for logs.
    pub raw: String,
}

/// TLS towards the upstream.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UpstreamTls {
    /// The server name sent and verified; defaults to the origin's first host.
    pub sni: String,
    /// Verify the upstream's certificate; default true.
    pub verify: bool,
    /// PEM certificates of the CAs the upstream's certificate is checked against, instead of
    /// the system's roots (a private CA); absolute.
    pub ca: Option<PathBuf>,
    /// A PEM certificate chain and private key robotsguard presents to origins that ask for
    /// one (mTLS); absolute, both or neither.
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

/// `tls: false`, `tls: true` or `tls: {sni, verify, ca, client_cert, client_key}` (paths
/// relative to `base_dir`).
pub(crate) fn upstream_tls(
    sink: &mut Sink,
    node: &Node,
    first_host: &str,
    base_dir: &std::path::Path,
) -> Option<UpstreamTls> {
    match &node.value {
        Value::Bool(false) => None,
        Value::Bool(true) => Some(UpstreamTls {
            sni: first_host.to_owned(),
            verify: true,
            ca: None,
            client_cert: None,
        }),
        Value::Map(_) => {
            let table = Table::read(sink, node, &UPSTREAM_TLS, "`tls`")?;
            let sni = match table.get("sni") {
                Some(n) => {
                    let sni = reader::string(sink, n, "sni")?;
                    if let Err(p) = check_sni(sni) {
                        sink.problem(n.pos, p);
                        return None;
                    }
                    sni.to_ascii_lowercase()
                }
                None => first_host.to_owned(),
            };
            let verify = match table.get("verify") {
                Some(n) => reader::boolean(sink, n, "verify")?,
                None => true,
            };
            let (ca, client_cert) = reader::tls_client_files(sink, &table, base_dir)?;
            Some(UpstreamTls {
                sni,
                verify,
                ca,
                client_cert,
            })
        }
        other => {
            sink.error_hint(
                node.pos,
                format!(
                    "`tls` must be true, false or a mapping, not {}",
                    other.kind()
                ),
                "e.g. tls: true, or tls: {sni: shop.example, verify: true}",
            );
            None
        }
    }
}

/// Reads an `upstream_timeouts` section over `base`, key by key.
pub(crate) fn upstream_timeouts(
    sink: &mut Sink,
    node: Option<&Node>,
    base: &UpstreamTimeouts,
) -> UpstreamTimeouts {
    let mut out = *base;
    let Some(table) =
        node.and_then(|n| Table::read(sink, n, &UPSTREAM_TIMEOUTS, "`upstream_timeouts`"))
    else {
        return out;
    };
    for (key, slot) in [
        ("connect", &mut out.connect),
        ("read", &mut out.read),
        ("write", &mut out.write),
        ("idle", &mut out.idle),
    ] {
        if let Some(d) = table.get(key).and_then(|n| positive_duration(sink, n, key)) {
            *slot = d;
        }
    }
    out
}

/// Reads `passive_health`, `health_check` and `dns_refresh` of a `defaults` or origin table over
/// `base`.
pub(crate) fn upstream_health(
    sink: &mut Sink,
    table: &Table<'_>,
    base: &UpstreamHealth,
) -> UpstreamHealth {
    let mut out = base.clone();
    if let Some(passive) = table
        .get("passive_health")
        .and_then(|n| Table::read(sink, n, &PASSIVE_HEALTH, "`passive_health`"))
    {
        if let Some(n) = passive.get("failures") {
            if let Some(count) = reader::integer(sink, n, "failures", 1, 1000) {
                out.failures = u32::try_from(count).unwrap_or(out.failures);
            }
        }
        if let Some(d) = passive
            .get("cooloff")
            .and_then(|n| positive_duration(sink, n, "cooloff"))
        {
            out.cooloff = d;
        }
    }
    if let Some(check) = table
        .get("health_check")
        .and_then(|n| Table::read(sink, n, &HEALTH_CHECK, "`health_check`"))
    {
        let path = match check.get("path") {
            Some(p) => reader::nonempty_string(sink, p, "path").and_then(|text| {
                if text.starts_with('/') && !text.bytes().any(|b| b <= b' ' || b == 0x7f) {
                    Some(text.to_owned())
                } else {
                    sink.error_hint(
                        p.pos,
                        format!("health check path {} must start with `/`", quote(text)),
                        "e.g. path: /healthz",
                    );
                    None
                }
            }),
            None => {
                sink.error_hint(
                    check.pos,
                    "`health_check` is missing `path`",
                    "e.g. path: /healthz",
                );
                None
            }
        };
        let interval = match check.get("interval") {
            Some(i) => positive_duration(sink, i, "interval"),
            None => Some(Duration::from_secs(5)),
        };
        if let (Some(path), Some(interval)) = (path, interval) {
            out.check = Some(HealthCheck { path, interval });
        }
    }
    if let Some(d) = table
        .get("dns_refresh")
        .and_then(|n| positive_duration(sink, n, "dns_refresh"))
    {
        out.dns_refresh = d;
    }
    out
}
