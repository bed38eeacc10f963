//! Getting each origin's robots.txt: over HTTP from the origin's upstream, from a file, or inline
//! from the config; and keeping it fresh on the refresh interval without ever blocking a request.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::{Bytes, BytesMut};
use pingora::connectors::http::Connector;
use pingora::http::RequestHeader;
use pingora::upstreams::peer::HttpPeer;

use crate::config::RobotsSource;
use crate::metrics::METRICS;
use crate::state::{Origin, Policy, RobotsCopy, Snapshot};

/// How many origins are fetched at once at start-up, so 1,000 origins do not open 1,000
/// connections in the same instant.
pub const MAX_CONCURRENT_FETCHES: usize = 32;

/// The User-Agent robotsguard fetches robots.txt with.
pub fn user_agent() -> String {
    format!("robotsguard/{}", env!("CARGO_PKG_VERSION"))
}

/// What one fetch returned.
enum Fetched {
    Status(u16, Bytes),
    Failed(String),
}

/// Builds the upstream peer for an origin's address, with its TLS settings.
pub fn http_peer(origin: &Origin, address: std::net::SocketAddr) -> HttpPeer {
    let (tls, sni, verify) = match &origin.config.upstream_tls {
        Some(tls) => (true, tls.sni.clone(), tls.verify),
        None => (false, origin.primary_host().to_string(), true),
    };
    let mut peer = HttpPeer::new(address, tls, sni);
    peer.options.verify_cert = verify;
    peer.options.verify_hostname = verify;
    peer
}

async fn fetch_once(
    connector: &Connector,
    origin: &Origin,
    path: &str,
    max_size: usize,
) -> Fetched {
    let peer = http_peer(origin, origin.next_peer().address);
    let (mut session, _reused) = match connector.get_http_session(&peer).await {
        Ok(session) => session,
        Err(e) => return Fetched::Failed(format!("cannot connect: {e}")),
    };
    let mut request = match RequestHeader::build("GET", path.as_bytes(), None) {
        Ok(request) => request,
        Err(e) => return Fetched::Failed(format!("bad robots.txt path `{path}`: {e}")),
    };
    let headers = [
        ("Host", origin.primary_host().to_string()),
        ("User-Agent", user_agent()),
        ("Accept", "text/plain, */*;q=0.5".to_string()),
    ];
    for (name, value) in headers {
        if let Err(e) = request.insert_header(name, value) {
            return Fetched::Failed(format!("cannot build request: {e}"));
        }
    }
    if let Err(e) = session.write_request_header(Box::new(request)).await {
        return Fetched::Failed(format!("cannot send request: {e}"));
    }
    if let Err(e) = session.finish_request_body().await {
        return Fetched::Failed(format!("cannot send request: {e}"));
    }
    if let Err(e) = session.read_response_header().await {
        return Fetched::Failed(format!("no response: {e}"));
    }
    let status = session.response_header().map_or(0, |h| h.status.as_u16());
    let mut body = BytesMut::new();
    loop {
        match session.read_response_body().await {
            Ok(Some(chunk)) => {
                let room = max_size.saturating_sub(body.len());
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                // Bytes past the limit are ignored; stop reading rather than drain a huge body.
                if room <= chunk.len() {
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => return Fetched::Failed(format!("body cut short: {e}")),
        }
    }
    Fetched::Status(status, body.freeze())
}

/// Fetches an origin's robots.txt and turns the answer into a copy, per RFC 9309: 2xx is parsed,
/// 4xx means no restrictions, 5xx and network errors mean unreachable (the last good copy stays;
/// with none, `on_unreachable` decides).
pub async fn refresh_from_origin(
    connector: &Connector,
    origin: &Origin,
    url: Option<&str>,
) -> RobotsCopy {
    let settings = &origin.robots.settings;
    let path = url.unwrap_or("/robots.txt");
    let fetched = match tokio::time::timeout(
        settings.timeout,
        fetch_once(connector, origin, path, settings.max_size),
    )
    .await
    {
        Ok(fetched) => fetched,
        Err(_) => Fetched::Failed(format!("no answer within {:?}", settings.timeout)),
    };
    let previous = origin.robots.current();
    let (copy, outcome) = match fetched {
        Fetched::Status(status @ 200..=299, body) => {
            let reason = format!("fetched from the origin (HTTP {status})");
            let mut copy = RobotsCopy::from_body(body, settings.max_size, "ok", reason);
            copy.http_status = Some(status);
            (copy, "ok")
        }
        Fetched::Status(status @ 400..=499, _) => {
            let reason = format!("the origin answered HTTP {status}: robots.txt unavailable");
            let mut copy = RobotsCopy::without_rules(Policy::AllowAll, "unavailable", reason);
            copy.http_status = Some(status);
            (copy, "unavailable")
        }
        Fetched::Status(status, _) => {
            let error = format!("the origin answered HTTP {status}");
            (
                unreachable(&previous, settings.on_unreachable, error, Some(status)),
                "unreachable",
            )
        }
        Fetched::Failed(error) => (
            unreachable(&previous, settings.on_unreachable, error, None),
            "unreachable",
        ),
    };
    METRICS
        .robots_fetches
        .with_label_values(&[origin.name(), outcome])
        .inc();
    copy
}

const KEPT_NOTE: &str = " (kept: the latest fetch failed)";

/// An unreachable outcome: the last good copy stays in force (with the error noted); without
/// one, `on_unreachable` decides.
fn unreachable(
    previous: &RobotsCopy,
    on_unreachable: crate::config::OnUnreachable,
    error: String,
    status: Option<u16>,
) -> RobotsCopy {
    // A good copy is a parsed file or a definite 4xx answer; placeholders and earlier failures
    // are not.
    if previous.has_rules() || previous.outcome == "unavailable" {
        let mut kept = previous.clone();
        if !kept.reason.ends_with(KEPT_NOTE) {
            kept.reason.push_str(KEPT_NOTE);
        }
        kept.last_error = Some(error);
        return kept;
    }
    let reason = format!("robots.txt unreachable ({error}) and no earlier copy");
    let mut copy = RobotsCopy::unreachable(on_unreachable, reason, "unreachable");
    copy.http_status = status;
    copy.last_error = Some(error);
    copy
}

/// Reads a file-sourced robots.txt. An unreadable file keeps the last good copy.
pub fn refresh_from_file(origin: &Origin, path: &std::path::Path) -> RobotsCopy {
    let settings = &origin.robots.settings;
    let previous = origin.robots.current();
    match std::fs::read(path) {
        Ok(mut body) => {
            body.truncate(settings.max_size);
            let reason = format!("read from {}", path.display());
            RobotsCopy::from_body(Bytes::from(body), settings.max_size, "ok", reason)
        }
        Err(e) => unreachable(
            &previous,
            settings.on_unreachable,
            format!("cannot read {}: {e}", path.display()),
            None,
        ),
    }
}

/// Obtains a fresh copy for one origin from its configured source; `None` for inline sources,
/// whose copy is built with the snapshot and never changes.
pub async fn refresh(connector: &Connector, origin: &Origin) -> Option<RobotsCopy> {
    match &origin.robots.settings.source {
        RobotsSource::Origin { url } => {
            Some(refresh_from_origin(connector, origin, url.as_deref()).await)
        }
        RobotsSource::File { path } => {
            let copy = refresh_from_file(origin, path);
            let outcome = if copy.last_error.is_some() {
                "unreachable"
            } else {
                "ok"
            };
            METRICS
                .robots_fetches
                .with_label_values(&[origin.name(), outcome])
                .inc();
            Some(copy)
        }
        RobotsSource::Inline { .. } => None,
    }
}

/// Keeps every origin's copy fresh: one task per origin, each fetching on its refresh interval;
/// start-up fetches run at most [`MAX_CONCURRENT_FETCHES`] at a time. A request never waits for
/// a fetch: it reads whatever copy is in force.
pub struct Refresher {
    pub snapshot: Arc<ArcSwap<Snapshot>>,
}

impl Refresher {
    pub async fn run(self, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        let connector = Arc::new(Connector::new(None));
        let start_permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_FETCHES));
        let snapshot = self.snapshot.load_full();
        let mut tasks = tokio::task::JoinSet::new();
        for origin in &snapshot.origins {
            if matches!(origin.robots.settings.source, RobotsSource::Inline { .. }) {
                METRICS
                    .robots_fetches
                    .with_label_values(&[origin.name(), "ok"])
                    .inc();
                METRICS.set_robots_state(origin.name(), &origin.robots.current());
                continue;
            }
            let origin = origin.clone();
            let connector = connector.clone();
            let permits = start_permits.clone();
            tasks.spawn(async move {
                let mut first = true;
                loop {
                    let copy = {
                        let _permit = if first {
                            permits.acquire().await.ok()
                        } else {
                            None
                        };
                        refresh(&connector, &origin).await
                    };
                    first = false;
                    let Some(copy) = copy else { break };
                    log_outcome(&origin, &copy);
                    METRICS.set_robots_state(origin.name(), &copy);
                    origin.robots.store(copy);
                    tokio::time::sleep(jittered(origin.robots.settings.refresh)).await;
                }
            });
        }
        // Runs until shutdown; dropping the JoinSet cancels the per-origin loops.
        let _ = shutdown.wait_for(|stop| *stop).await;
        tasks.abort_all();
    }
}

fn log_outcome(origin: &Origin, copy: &RobotsCopy) {
    match &copy.last_error {
        Some(error) => {
            tracing::warn!(origin = origin.name(), state = copy.policy.state_label(), error = %error, "robots.txt: {}", copy.reason)
        }
        None => tracing::info!(
            origin = origin.name(),
            state = copy.policy.state_label(),
            rules = copy.rule_count(),
            "robots.txt: {}",
            copy.reason
        ),
    }
}

/// The refresh interval minus up to 10 %, so origins configured alike spread out over time.
fn jittered(interval: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let fraction = f64::from(nanos % 1000) / 10_000.0;
    interval.mul_f64(1.0 - fraction)
}
