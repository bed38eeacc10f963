//! The `decision` section: the decision listener, which answers front proxies' auth subrequests
//! (nginx `auth_request`, Caddy `forward_auth`, Traefik `forwardAuth`, Envoy's HTTP `ext_authz`) with the
//! judgment the proxy would make. Its keys, defaults, reader, checks and reference rows live here.

use std::net::{IpAddr, Ipv6Addr};

use super::*;

/// `decision.timeout`: how long a caller waits for the judgment before `on_error` answers.
pub(crate) const DEFAULT_DECISION_TIMEOUT: Duration = Duration::from_millis(50);
/// The shortest and longest `decision.timeout`: a front proxy holds its client meanwhile.
const MIN_DECISION_TIMEOUT: Duration = Duration::from_millis(1);
const MAX_DECISION_TIMEOUT: Duration = Duration::from_secs(10);

/// `decision`: where the decision listener listens and whom it answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecisionConfig {
    /// The decision listener's addresses (HTTP/1.x and h2c on each); never empty.
    pub listen: Vec<SocketAddr>,
    /// Peers the listener answers; they are also trusted as proxies for `X-Forwarded-For`.
    pub trusted_callers: Vec<ipnet::IpNet>,
    /// How long the judgment may take before [`DecisionConfig::on_error`] answers instead.
    pub timeout: Duration,
    /// The answer when the judgment could not be made in time.
    pub on_error: OnDecisionError,
}

/// `decision.on_error`: fail open or fail closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnDecisionError {
    /// Let the request through (`200`), as if no crawler rule applied.
    Allow,
    /// Refuse it (`503`; `403` to nginx).
    Deny,
}

impl OnDecisionError {
    /// The word the config spells it with.
    pub fn as_str(self) -> &'static str {
        match self {
            OnDecisionError::Allow => "allow",
            OnDecisionError::Deny => "deny",
        }
    }
}

pub(crate) const ON_ERROR: [(&str, OnDecisionError); 2] = [
    ("allow", OnDecisionError::Allow),
    ("deny", OnDecisionError::Deny),
];

/// Loopback only: the front proxy runs beside robotsguard unless the operator says otherwise.
pub(crate) fn default_trusted_callers() -> Vec<ipnet::IpNet> {
    vec![
        ipnet::IpNet::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 0)), 8).unwrap_or_default(),
        ipnet::IpNet::from(IpAddr::V6(Ipv6Addr::LOCALHOST)),
    ]
}

/// `decision`, with the position of each listen address (for clash messages). `None` when the
/// section is absent or unreadable.
pub(crate) fn decision(sink: &mut Sink, node: Option<&Node>) -> Option<(DecisionConfig, Vec<Pos>)> {
    let node = node?;
    let table = Table::read(sink, node, &DECISION, "`decision`")?;
    let mut listen = Vec::new();
    let mut positions = Vec::new();
    match table.get("listen") {
        Some(n) => {
            let items = reader::one_or_many(n);
            if items.is_empty() {
                sink.error_hint(
                    n.pos,
                    "`decision.listen` must list at least one address",
                    "e.g. listen: [\"127.0.0.1:8081\"]",
                );
            }
            for item in items {
                let Some(text) = reader::string(sink, item, "decision.listen") else {
                    continue;
                };
                let Some(address) = parse_bind(text).map_err(|p| sink.problem(item.pos, p)).ok()
                else {
                    continue;
                };
                if let Some(first) = listen.iter().position(|a| *a == address) {
                    let first: Pos = positions[first];
                    sink.error(
                        item.pos,
                        format!(
                            "decision listen address `{address}` is listed twice (first at line {}, column {})",
                            first.line, first.column
                        ),
                    );
                    continue;
                }
                listen.push(address);
                positions.push(item.pos);
            }
        }
        None => sink.error_hint(
            table.pos,
            "`decision` is missing `listen`",
            "e.g. listen: [\"127.0.0.1:8081\"]",
        ),
    }
    let trusted_callers = match table.get("trusted_callers") {
        Some(n) => reader::networks(sink, n, "decision.trusted_callers"),
        None => default_trusted_callers(),
    };
    let timeout = match table.get("timeout") {
        Some(n) => match reader::duration(sink, n, "decision.timeout") {
            Some(t) if t < MIN_DECISION_TIMEOUT => {
                sink.error(n.pos, "`decision.timeout` must be at least 1ms");
                DEFAULT_DECISION_TIMEOUT
            }
            Some(t) if t > MAX_DECISION_TIMEOUT => {
                sink.error(n.pos, "`decision.timeout` must be at most 10s");
                DEFAULT_DECISION_TIMEOUT
            }
            Some(t) => t,
            None => DEFAULT_DECISION_TIMEOUT,
        },
        None => DEFAULT_DECISION_TIMEOUT,
    };
    let on_error = table
        .get("on_error")
        .and_then(|n| reader::choice(sink, n, "decision.on_error", &ON_ERROR))
        .unwrap_or(OnDecisionError::Allow);
    Some((
        DecisionConfig {
            listen,
            trusted_callers,
            timeout,
            on_error,
        },
        positions,
    ))
}

/// Each decision address must have a port of its own: not a proxy listener's, not the admin's.
pub(crate) fn check_clashes(
    sink: &mut Sink,
    decision: &DecisionConfig,
    positions: &[Pos],
    taken: &[(&str, SocketAddr)],
) {
    for (address, pos) in decision.listen.iter().zip(positions) {
        if let Some((what, other)) = taken.iter().find(|(_, other)| overlaps(*address, *other)) {
            sink.error_hint(
                *pos,
                format!(
                    "decision listen address `{address}` clashes with the {what} address `{other}`"
                ),
                "the decision listener needs its own port",
            );
        }
    }
}

fn overlaps(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() != 0
        && a.port() == b.port()
        && (a.ip() == b.ip()
            || (a.is_ipv4() == b.is_ipv4() && (a.ip().is_unspecified() || b.ip().is_unspecified())))
}

const ON_ERROR_WORDS: Ty = Ty::Words(|| ON_ERROR.iter().map(|(name, _)| *name).collect());

/// The keys `decision` accepts, each documented.
pub(crate) static DECISION: Section = Section {
    id: "decision",
    place: "in `decision`",
    title: "The decision listener",
    doc: "Answers a front proxy's auth subrequests (nginx `auth_request`, Caddy `forward_auth`, Traefik `forwardAuth`, Envoy `ext_authz` over HTTP and gRPC) with the judgment the proxy would make: `GET /auth`, `GET /auth/nginx`, `/envoy/…`, `envoy.service.auth.v3.Authorization/Check`, `GET /robots.txt?host=HOST`. With `listen: []` at the top level only this listener runs. See \"Use it with your proxy\".",
    keys: &[
        // The sockets are bound at start; callers, timeout and on_error are read per request
        // from the config in force.
        required("listen", Ty::OneOrList(&Ty::Address), "The decision listener's addresses (HTTP/1.0, HTTP/1.1 and h2c, which gRPC uses, on each).").restart_only(&RestartOnly {
            differs: |old, new| old.decision.as_ref().map(|d| &d.listen) != new.decision.as_ref().map(|d| &d.listen),
            keep: |new, running| match (&mut new.decision, &running.decision) {
            (Some(new), Some(running)) => new.listen.clone_from(&running.listen),
            (new, running) => new.clone_from(running),
        },
        }),
        key("trusted_callers", Ty::OneOrList(&Ty::Network), "loopback (`127.0.0.0/8`, `::1`)", "Peers that may ask (everyone else gets `403`, counted in `robotsguard_decision_rejected_total{reason=\"untrusted_caller\"}`). A caller is a trusted proxy: the client is the rightmost `X-Forwarded-For` entry that is neither a caller nor in `trusted_proxies`."),
        key("timeout", Ty::Duration, "`50ms`", "How long the judgment may take (a slow store, reverse DNS) before `on_error` answers (1ms–10s)."),
        key("on_error", ON_ERROR_WORDS, "`allow`", "The answer when the judgment is not made in time: `allow` (fail open, `200`) or `deny` (fail closed, `503`; `403` on `/auth/nginx`), counted in `robotsguard_decision_errors_total{reason}`."),
    ],
};

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::load_str;

    const ORIGIN: &str =
        "origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:8081\"\n";

    fn errors(yaml: &str) -> Vec<String> {
        match load_str(yaml, "t.yaml", Path::new("/etc/robotsguard")) {
            Ok(c) => panic!("config accepted: {c:#?}"),
            Err(e) => e.0.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn defaults_and_decision_only() {
        let yaml = format!("listen: []\ndecision: {{listen: [\"127.0.0.1:8082\"]}}\n{ORIGIN}");
        let config = load_str(&yaml, "t.yaml", Path::new("/")).unwrap();
        assert!(
            config.listen.is_empty(),
            "listen: [] runs the decision listener alone"
        );
        let decision = config.decision.unwrap();
        assert_eq!(decision.listen, vec!["127.0.0.1:8082".parse().unwrap()]);
        assert_eq!(decision.trusted_callers, default_trusted_callers());
        assert_eq!(decision.timeout, DEFAULT_DECISION_TIMEOUT);
        assert_eq!(decision.on_error, OnDecisionError::Allow);
        // Without `decision`, an empty `listen` is still an error; absent, no decision listener.
        let errs = errors(&format!("listen: []\n{ORIGIN}"));
        assert!(
            errs[0].starts_with("t.yaml:1:9: `listen` must list"),
            "{errs:?}"
        );
        let config = load_str(ORIGIN, "t.yaml", Path::new("/")).unwrap();
        assert!(config.decision.is_none());
    }

    #[test]
    fn every_key_is_read_and_checked_with_its_position() {
        let yaml = format!(
            "decision:\n  listen: \"0.0.0.0:8082\"\n  trusted_callers: [10.0.0.0/8]\n  timeout: 200ms\n  on_error: deny\n{ORIGIN}"
        );
        let decision = load_str(&yaml, "t.yaml", Path::new("/"))
            .unwrap()
            .decision
            .unwrap();
        assert_eq!(
            decision.trusted_callers,
            vec!["10.0.0.0/8".parse().unwrap()]
        );
        assert_eq!(decision.timeout, Duration::from_millis(200));
        assert_eq!(decision.on_error, OnDecisionError::Deny);

        let errs = errors(&format!(
            "decision:\n  listen: [\"127.0.0.1:8082\"]\n  on_eror: deny\n{ORIGIN}"
        ));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with("t.yaml:3:3: unknown key `on_eror` in `decision`"),
            "{errs:?}"
        );
        assert!(errs[0].contains("did you mean `on_error`"), "{errs:?}");

        let errs = errors(&format!(
            "decision:\n  listen: [\"127.0.0.1:8082\"]\n  on_error: allw\n{ORIGIN}"
        ));
        assert!(errs[0].starts_with("t.yaml:3:13:"), "{errs:?}");
        assert!(errs[0].contains("did you mean `allow`"), "{errs:?}");

        let errs = errors(&format!(
            "decision:\n  listen: [\"127.0.0.1:8082\"]\n  timeout: 20s\n{ORIGIN}"
        ));
        assert!(
            errs[0].starts_with("t.yaml:3:12: `decision.timeout` must be at most 10s"),
            "{errs:?}"
        );

        let errs = errors(&format!(
            "decision: {{trusted_callers: [10.0.0.0/8]}}\n{ORIGIN}"
        ));
        assert!(
            errs[0].contains("`decision` is missing `listen`"),
            "{errs:?}"
        );

        let errs = errors(&format!("decision: {{listen: []}}\n{ORIGIN}"));
        assert!(
            errs[0].starts_with("t.yaml:1:20: `decision.listen` must list"),
            "{errs:?}"
        );

        let errs = errors(&format!(
            "decision: {{listen: [\"127.0.0.1:8082\"], trusted_callers: [10.0.0.1/8]}}\n{ORIGIN}"
        ));
        assert!(errs[0].contains("did you mean 10.0.0.0/8"), "{errs:?}");
    }

    #[test]
    fn addresses_clash_with_the_proxy_and_the_admin() {
        let errs = errors(&format!(
            "listen: [\"127.0.0.1:8080\"]\ndecision:\n  listen: [\"0.0.0.0:8080\", \"127.0.0.1:9090\", \"127.0.0.1:8082\", \"127.0.0.1:8082\"]\n{ORIGIN}"
        ));
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(
            errs.iter().any(|e| e.starts_with("t.yaml:3:64:")
                && e.contains("listed twice (first at line 3, column 46)")),
            "{errs:?}"
        );
        assert!(
            errs.iter()
                .any(|e| e.starts_with("t.yaml:3:12:") && e.contains("the listen address")),
            "{errs:?}"
        );
        assert!(
            errs.iter()
                .any(|e| e.starts_with("t.yaml:3:28:") && e.contains("the admin address")),
            "{errs:?}"
        );
    }
}
