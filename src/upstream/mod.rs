//! An origin's upstream servers as the hot path sees them: the addresses its names resolve to
//! now, which of them are healthy, and round-robin among those.
//!
//! Health is passive and, when configured, active: an upstream that fails to connect or times out
//! `passive_health.failures` times in a row is skipped for `passive_health.cooloff`, then tried
//! again; one that fails its `health_check` is skipped until a check passes. When every upstream
//! is skipped, they are all tried anyway: a request has a better chance with a doubtful upstream
//! than with none. DNS names are resolved again in the background ([`crate::upstream_keeper`]);
//! a name that resolves to nothing leaves its origin without upstreams (answered 502) while every
//! other origin serves, and it recovers when the name resolves again.

pub(crate) mod tls;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

use crate::config::{Upstream, UpstreamHealth};
use crate::metrics::METRICS;

/// Milliseconds are counted from this instant, so a time fits an atomic.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn now_millis() -> u64 {
    u64::try_from(EPOCH.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// One upstream address.
#[derive(Debug)]
pub struct Peer {
    pub address: SocketAddr,
    /// The configured `host:port` it comes from, for logs.
    pub label: String,
    consecutive_failures: AtomicU32,
    /// Skipped until this time (milliseconds from [`EPOCH`]); 0 when not skipped.
    skipped_until: AtomicU64,
    /// The latest active health check passed (true when there are no active checks).
    checked_up: AtomicBool,
    /// `robotsguard_upstream_up{origin, upstream}`.
    up: prometheus::IntGauge,
}

impl Peer {
    fn new(origin: &str, address: SocketAddr, label: &str) -> Peer {
        let up = METRICS
            .upstream_up
            .with_label_values(&[origin, &address.to_string()]);
        up.set(1);
        Peer {
            address,
            label: label.to_string(),
            consecutive_failures: AtomicU32::new(0),
            skipped_until: AtomicU64::new(0),
            checked_up: AtomicBool::new(true),
            up,
        }
    }

    /// Whether requests may go here now.
    pub fn is_healthy(&self) -> bool {
        if !self.checked_up.load(Ordering::Relaxed) {
            return false;
        }
        // 0 when the upstream was never skipped or has recovered: no clock read on every pick.
        let skipped_until = self.skipped_until.load(Ordering::Relaxed);
        skipped_until == 0 || skipped_until <= now_millis()
    }

    fn publish(&self) {
        self.up.set(i64::from(self.is_healthy()));
    }
}

/// The upstreams of one origin. Shared between snapshots while the origin's upstream settings stay
/// the same, so a config reload keeps what was learnt about them.
#[derive(Debug)]
pub struct Upstreams {
    origin: String,
    pub configured: Vec<Upstream>,
    pub health: UpstreamHealth,
    peers: ArcSwap<Vec<Arc<Peer>>>,
    next: AtomicUsize,
    /// Why there is no address, when there is none.
    pub resolution_error: ArcSwap<Option<String>>,
}

impl Upstreams {
    /// Resolves `configured` now (IP addresses at once, names through the system resolver); a name
    /// that does not resolve is left out and noted, never an error.
    pub fn resolve_now(
        origin: &str,
        configured: &[Upstream],
        health: &UpstreamHealth,
    ) -> Upstreams {
        let upstreams = Upstreams {
            origin: origin.to_string(),
            configured: configured.to_vec(),
            health: health.clone(),
            peers: ArcSwap::from_pointee(Vec::new()),
            next: AtomicUsize::new(0),
            resolution_error: ArcSwap::from_pointee(None),
        };
        let mut addresses = Vec::new();
        let mut errors = Vec::new();
        for upstream in configured {
            match resolve_blocking(upstream) {
                Ok(found) => addresses.extend(found.into_iter().map(|a| (a, upstream.raw.clone()))),
                Err(e) => errors.push(format!("`{}`: {e}", upstream.raw)),
            }
        }
        upstreams.set_addresses(addresses, errors);
        upstreams
    }

    /// Whether any configured upstream is a DNS name (and so needs resolving again).
    pub fn has_names(&self) -> bool {
        self.configured
            .iter()
            .any(|u| u.host.parse::<std::net::IpAddr>().is_err())
    }

    /// Puts in force the addresses found by a resolution, keeping what is known of addresses that
    /// stay. `errors` are the names that did not resolve.
    pub fn set_addresses(&self, addresses: Vec<(SocketAddr, String)>, errors: Vec<String>) {
        let old = self.peers.load();
        let mut peers: Vec<Arc<Peer>> = Vec::with_capacity(addresses.len());
        for (address, label) in addresses {
            if peers.iter().any(|p| p.address == address) {
                continue;
            }
            let kept = old.iter().find(|p| p.address == address).cloned();
            peers.push(kept.unwrap_or_else(|| Arc::new(Peer::new(&self.origin, address, &label))));
        }
        for gone in old
            .iter()
            .filter(|p| !peers.iter().any(|n| n.address == p.address))
        {
            let _ = METRICS
                .upstream_up
                .remove_label_values(&[&self.origin, &gone.address.to_string()]);
        }
        let error = if errors.is_empty() {
            None
        } else {
            Some(errors.join("; "))
        };
        self.resolution_error.store(Arc::new(error));
        self.peers.store(Arc::new(peers));
    }

    /// The addresses in force.
    pub fn peers(&self) -> Arc<Vec<Arc<Peer>>> {
        self.peers.load_full()
    }

    /// The next upstream, round-robin among the healthy ones not in `tried`; among all not in
    /// `tried` when none is healthy; `None` when there is no address (left).
    pub fn pick(&self, tried: &[SocketAddr]) -> Option<Arc<Peer>> {
        let peers = self.peers.load();
        if peers.is_empty() {
            return None;
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let candidates = |healthy_only: bool| {
            (0..peers.len())
                .map(|offset| &peers[(start + offset) % peers.len()])
                .find(|peer| !tried.contains(&peer.address) && (!healthy_only || peer.is_healthy()))
                .cloned()
        };
        candidates(true).or_else(|| candidates(false))
    }

    /// Whether another upstream than those in `tried` is there to retry on.
    pub fn has_other(&self, tried: &[SocketAddr]) -> bool {
        self.peers
            .load()
            .iter()
            .any(|peer| !tried.contains(&peer.address))
    }

    /// A connection failed or timed out: after `failures` in a row the upstream is skipped for
    /// the cool-off. Returns whether this failure started a cool-off.
    pub fn record_failure(&self, peer: &Peer) -> bool {
        let failures = peer.consecutive_failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failures < self.health.failures {
            return false;
        }
        let until = now_millis().saturating_add(duration_millis(self.health.cooloff));
        peer.skipped_until.store(until, Ordering::Relaxed);
        peer.consecutive_failures.store(0, Ordering::Relaxed);
        peer.publish();
        true
    }

    /// The upstream answered: its run of failures is over.
    pub fn record_success(&self, peer: &Peer) {
        if peer.consecutive_failures.load(Ordering::Relaxed) != 0 {
            peer.consecutive_failures.store(0, Ordering::Relaxed);
        }
        if peer.skipped_until.load(Ordering::Relaxed) != 0 {
            peer.skipped_until.store(0, Ordering::Relaxed);
            peer.publish();
        }
    }

    /// The outcome of an active health check.
    pub fn record_check(&self, peer: &Peer, up: bool) {
        peer.checked_up.store(up, Ordering::Relaxed);
        peer.publish();
    }

    /// Refreshes the `up` gauges (a cool-off ends with time, not with an event).
    pub fn publish(&self) {
        for peer in self.peers.load().iter() {
            peer.publish();
        }
    }

    /// Drops this origin's gauges (the origin or its upstreams left the config).
    pub fn forget(&self) {
        for peer in self.peers.load().iter() {
            let _ = METRICS
                .upstream_up
                .remove_label_values(&[&self.origin, &peer.address.to_string()]);
        }
    }
}

fn duration_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Every address `upstream` stands for, through the system resolver (blocking).
fn resolve_blocking(upstream: &Upstream) -> Result<Vec<SocketAddr>, String> {
    use std::net::ToSocketAddrs;
    if let Ok(ip) = upstream.host.parse::<std::net::IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, upstream.port)]);
    }
    let found: Vec<SocketAddr> = (upstream.host.as_str(), upstream.port)
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .collect();
    if found.is_empty() {
        return Err("no address".to_string());
    }
    Ok(found)
}

message_error! {
    /// Why an upstream's host name gave no address, in one line.
    ResolveError
}

/// Every address `upstream` stands for, through the system resolver, off the async threads.
pub async fn resolve(upstream: &Upstream) -> Result<Vec<SocketAddr>, ResolveError> {
    resolve_text(upstream).await.map_err(ResolveError)
}

/// [`resolve`], its error as text.
async fn resolve_text(upstream: &Upstream) -> Result<Vec<SocketAddr>, String> {
    if let Ok(ip) = upstream.host.parse::<std::net::IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, upstream.port)]);
    }
    let found: Vec<SocketAddr> = tokio::net::lookup_host((upstream.host.as_str(), upstream.port))
        .await
        .map_err(|e| e.to_string())?
        .collect();
    if found.is_empty() {
        return Err("no address".to_string());
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstreams(addresses: &[&str], failures: u32) -> Upstreams {
        let configured: Vec<Upstream> = addresses
            .iter()
            .map(|a| {
                let address: SocketAddr = a.parse().unwrap_or_else(|_| unreachable!());
                Upstream {
                    host: address.ip().to_string(),
                    port: address.port(),
                    raw: a.to_string(),
                }
            })
            .collect();
        let health = UpstreamHealth {
            failures,
            cooloff: Duration::from_secs(60),
            ..UpstreamHealth::default()
        };
        Upstreams::resolve_now("unit", &configured, &health)
    }

    #[test]
    fn round_robin_skips_failed_upstreams_until_none_is_left() {
        let set = upstreams(&["127.0.0.1:1", "127.0.0.1:2"], 2);
        let picked: Vec<u16> = (0..4)
            .filter_map(|_| set.pick(&[]).map(|p| p.address.port()))
            .collect();
        assert_eq!(picked.iter().filter(|&&p| p == 1).count(), 2, "{picked:?}");
        let first = set.peers()[0].clone();
        assert!(!set.record_failure(&first));
        assert!(
            set.record_failure(&first),
            "the second failure in a row skips it"
        );
        for _ in 0..4 {
            assert_eq!(set.pick(&[]).map(|p| p.address.port()), Some(2));
        }
        // A retry never goes back to an upstream already tried...
        assert_eq!(
            set.pick(&[first.address]).map(|p| p.address.port()),
            Some(2)
        );
        // ...and when every upstream is doubtful, they are tried anyway.
        let second = set.peers()[1].clone();
        set.record_failure(&second);
        set.record_failure(&second);
        assert!(set.pick(&[]).is_some());
        assert!(set.pick(&[first.address, second.address]).is_none());
        set.record_success(&first);
        assert!(first.is_healthy());
    }

    #[test]
    fn new_addresses_keep_what_is_known_of_the_old_ones() {
        let set = upstreams(&["127.0.0.1:1"], 1);
        let first = set.peers()[0].clone();
        set.record_failure(&first);
        assert!(!first.is_healthy());
        let again: SocketAddr = "127.0.0.1:1".parse().unwrap_or_else(|_| unreachable!());
        let new: SocketAddr = "127.0.0.1:3".parse().unwrap_or_else(|_| unreachable!());
        set.set_addresses(vec![(again, "a".into()), (new, "a".into())], Vec::new());
        let peers = set.peers();
        assert_eq!(peers.len(), 2);
        assert!(
            Arc::ptr_eq(&peers[0], &first),
            "the known address keeps its state"
        );
        set.set_addresses(Vec::new(), vec!["`a`: no address".into()]);
        assert!(set.pick(&[]).is_none());
        assert!(set.resolution_error.load().is_some());
    }
}
