//! Who read robots.txt: per origin and client address, whether it fetched `/robots.txt` within
//! the last [`REMEMBERED`] (RFC 9309 lets a crawler keep robots.txt for 24 hours). A crawler that
//! read robots.txt and then fetched what it disallows ignored it knowingly: the evidence behind
//! `robotsguard_violations_total{read_robots="yes"}`.
//!
//! Per process and bounded (the expiring table of `src/tables/expiring.rs`): at most [`MAX_CLIENTS`]
//! readers at once; beyond that, the read nearest the end of its 24 hours is forgotten to make
//! room (that reader's violations then count as `read_robots="no"`).

use std::net::IpAddr;
use std::time::{Duration, Instant};

use crate::tables::expiring::ExpiringKeys;

/// How long a read of robots.txt is remembered.
pub const REMEMBERED: Duration = Duration::from_secs(24 * 60 * 60);

/// The most (origin, client) pairs remembered at once.
pub const MAX_CLIENTS: usize = 1 << 20;

/// Who read each origin's robots.txt within [`REMEMBERED`].
pub struct RobotsReads {
    reads: ExpiringKeys,
    /// Whether any read was ever recorded: until then, asking costs one load (every browser
    /// request asks, for the signal of disguised crawlers).
    any: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for RobotsReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RobotsReads")
            .field("readers", &self.reads.len())
            .finish()
    }
}

impl Default for RobotsReads {
    fn default() -> Self {
        RobotsReads {
            reads: ExpiringKeys::with_capacity(MAX_CLIENTS),
            any: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

impl RobotsReads {
    /// Records that `client` fetched `origin`'s robots.txt at `now`.
    pub fn record(&self, origin: &str, client: IpAddr, now: Instant) {
        if !self.any.load(std::sync::atomic::Ordering::Relaxed) {
            self.any.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        self.reads
            .extend(self.reads.digest((origin, client)), now + REMEMBERED, now);
    }

    /// Records a read another replica saw, remembered until `until`.
    pub fn record_until(&self, origin: &str, client: IpAddr, until: Instant, now: Instant) {
        if !self.any.load(std::sync::atomic::Ordering::Relaxed) {
            self.any.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        self.reads
            .extend(self.reads.digest((origin, client)), until, now);
    }

    /// Whether any read was ever recorded: while none was, nothing needs the clock.
    pub fn any(&self) -> bool {
        self.any.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// When `client` last fetched `origin`'s robots.txt, if within [`REMEMBERED`] before `now`
    /// (its memory ends [`REMEMBERED`] after the read, so the read is that much before).
    pub fn read_at(&self, origin: &str, client: IpAddr, now: Instant) -> Option<Instant> {
        if !self.any.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let until = self
            .reads
            .holds_until(self.reads.digest((origin, client)), now)?;
        until.checked_sub(REMEMBERED)
    }

    /// Whether `client` fetched `origin`'s robots.txt within [`REMEMBERED`] before `now`.
    pub fn read_recently(&self, origin: &str, client: IpAddr, now: Instant) -> bool {
        if !self.any.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        self.reads
            .holds_until(self.reads.digest((origin, client)), now)
            .is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_remembered_per_origin_and_client_for_a_day() {
        let reads = RobotsReads::default();
        let now = Instant::now();
        let a: IpAddr = [203, 0, 113, 1].into();
        let b: IpAddr = [203, 0, 113, 2].into();
        assert!(!reads.read_recently("shop", a, now));
        reads.record("shop", a, now);
        assert!(reads.read_recently("shop", a, now));
        assert!(!reads.read_recently("shop", b, now));
        assert!(!reads.read_recently("blog", a, now));
        let almost = now + REMEMBERED - Duration::from_secs(1);
        assert!(reads.read_recently("shop", a, almost));
        assert!(!reads.read_recently("shop", a, now + REMEMBERED));
        // A later read extends it.
        reads.record("shop", a, almost);
        assert!(reads.read_recently("shop", a, now + REMEMBERED));
    }
}
