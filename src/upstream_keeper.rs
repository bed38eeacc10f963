//! Keeps each origin's upstreams current in the background: upstream DNS names resolved again
//! every `dns_refresh` (all addresses used), active health checks every `health_check.interval`,
//! and the `robotsguard_upstream_up` gauges refreshed as cool-offs end. One task per set of
//! upstreams; reloads add and drop tasks as the Refresher does for robots.txt (a dropped task
//! takes its set's gauges with it).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use pingora::connectors::http::Connector;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use tokio::time::Instant;

use crate::metrics::METRICS;
use crate::net::http::health_check;
use crate::snapshot::{Live, Origin};
use crate::upstream::resolve;

/// How often skipped upstreams are looked at again for the gauges.
const PUBLISH_EVERY: Duration = Duration::from_secs(1);

/// A name that did not resolve is tried again this soon (or at `dns_refresh`, if sooner).
const UNRESOLVED_RETRY: Duration = Duration::from_secs(5);

/// The background service.
pub struct UpstreamKeeper {
    pub snapshot: Arc<Live>,
}

#[async_trait]
impl BackgroundService for UpstreamKeeper {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        // Made at the first health check: a connector loads the platform's root certificates,
        // work and memory a proxy whose origins have no checks need not spend.
        let connector = Arc::new(OnceLock::new());
        let mut generations = self.snapshot.subscribe();
        let mut tasks = crate::tasks::Tasks::new();
        loop {
            let snapshot = self.snapshot.load();
            let wanted = snapshot
                .origins
                .iter()
                .map(|origin| (Arc::as_ptr(&origin.upstreams) as usize, origin.clone()));
            tasks.reconcile(
                wanted,
                |origin| tokio::spawn(keep(origin, connector.clone())),
                |_| {},
            );
            if !crate::tasks::next_reload(&mut generations, &mut shutdown).await {
                break;
            }
        }
    }
}

/// The loop of one origin's upstream set.
async fn keep(origin: Arc<Origin>, connector: Arc<OnceLock<Connector>>) {
    let upstreams = origin.upstreams.clone();
    let _forget = Forget(upstreams.clone());
    let names = upstreams.has_names();
    let dns_refresh = upstreams.health.dns_refresh;
    let check = upstreams.health.check.clone();
    let now = Instant::now();
    let mut next_dns = now + first_dns_delay(&origin, dns_refresh);
    let mut next_check = now;
    let mut next_publish = now;
    loop {
        let mut wake = next_publish;
        if names {
            wake = wake.min(next_dns);
        }
        if check.is_some() {
            wake = wake.min(next_check);
        }
        tokio::time::sleep_until(wake).await;
        let now = Instant::now();
        if names && now >= next_dns {
            let resolved = resolve_all(&origin).await;
            next_dns = now + first_dns_delay(&origin, dns_refresh);
            if resolved {
                METRICS
                    .upstream_unresolved
                    .with_label_values(&[origin.name()])
                    .set(0);
            }
        }
        if let Some(check) = check.as_ref().filter(|_| now >= next_check) {
            let connector = connector.get_or_init(|| Connector::new(None));
            run_checks(&origin, connector, &check.path, check.interval).await;
            next_check = Instant::now() + check.interval;
        }
        if now >= next_publish {
            upstreams.publish();
            let unresolved = upstreams.peers().is_empty();
            METRICS
                .upstream_unresolved
                .with_label_values(&[origin.name()])
                .set(i64::from(unresolved));
            next_publish = now + PUBLISH_EVERY;
        }
    }
}

/// Drops a set's gauges when its task ends (the origin left, or its upstreams changed).
struct Forget(Arc<crate::upstream::Upstreams>);

impl Drop for Forget {
    fn drop(&mut self) {
        self.0.forget();
    }
}

/// When to resolve again: soon while nothing resolves, else at `dns_refresh`.
fn first_dns_delay(origin: &Origin, dns_refresh: Duration) -> Duration {
    if origin.upstreams.peers().is_empty() {
        UNRESOLVED_RETRY.min(dns_refresh)
    } else {
        dns_refresh
    }
}

/// Resolves every configured upstream and puts the addresses found in force. A name that fails
/// keeps its last addresses (a DNS hiccup must not empty a working origin); one that never
/// resolved leaves the origin without them. Returns whether every name resolved.
async fn resolve_all(origin: &Origin) -> bool {
    let upstreams = &origin.upstreams;
    let current = upstreams.peers();
    let mut addresses = Vec::new();
    let mut errors = Vec::new();
    for upstream in &upstreams.configured {
        match resolve(upstream).await {
            Ok(found) => addresses.extend(found.into_iter().map(|a| (a, upstream.raw.clone()))),
            Err(e) => {
                let kept: Vec<_> = current
                    .iter()
                    .filter(|peer| peer.label == upstream.raw)
                    .map(|peer| (peer.address, peer.label.clone()))
                    .collect();
                crate::logs::upstream_unresolved(
                    origin.name(),
                    &upstream.raw,
                    &e.to_string(),
                    !kept.is_empty(),
                );
                addresses.extend(kept);
                errors.push(format!("`{}`: {e}", upstream.raw));
            }
        }
    }
    let resolved = errors.is_empty();
    let changed = {
        let mut old: Vec<_> = current.iter().map(|p| p.address).collect();
        let mut new: Vec<_> = addresses.iter().map(|(a, _)| *a).collect();
        old.sort();
        new.sort();
        old != new
    };
    if changed && !addresses.is_empty() {
        tracing::info!(
            origin = origin.name(),
            upstreams = %addresses.iter().map(|(a, _)| a.to_string()).collect::<Vec<_>>().join(", "),
            "upstream addresses changed"
        );
    }
    upstreams.set_addresses(addresses, errors);
    resolved
}

/// Checks every address of the origin once, at most `interval` each.
async fn run_checks(origin: &Origin, connector: &Connector, path: &str, interval: Duration) {
    let timeouts = origin.config.upstream_timeouts;
    let limit = interval.min(timeouts.connect + timeouts.read);
    for peer in origin.upstreams.peers().iter() {
        let outcome =
            tokio::time::timeout(limit, health_check(connector, origin, peer.address, path)).await;
        let up = matches!(outcome, Ok(Ok(status)) if (200..400).contains(&status));
        let was_up = peer.is_healthy();
        origin.upstreams.record_check(peer, up);
        if was_up && !up {
            let why = match outcome {
                Ok(Ok(status)) => format!("HTTP {status}"),
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("no answer within {limit:?}"),
            };
            crate::logs::upstream_check_failed(origin.name(), peer.address, &why);
        }
    }
}
