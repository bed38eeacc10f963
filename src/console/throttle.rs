//! What admin requests may cost, over time: the DNS lookups `/explain` (and the console's
//! Explain) makes to check a `client=` claim, per caller and overall, and robots.txt fetches
//! on demand (`POST /robots/refresh`), per origin. Memory is bounded whatever the callers do.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::access::AddressKey;

/// `/explain` checks with DNS at most this many `client=` addresses a minute per caller
/// (an IPv6 /64 counts as one)...
pub const EXPLAIN_LOOKUPS_PER_CALLER: u32 = 10;
/// ...and this many a minute over all callers. Each check costs a PTR query and a forward
/// query per name; beyond these, `/explain` answers without checking and says so.
pub const EXPLAIN_LOOKUPS_OVERALL: u32 = 60;

/// Callers whose lookups are counted at most; a caller forgotten starts with a full allowance,
/// which the overall allowance still bounds.
const MAX_CALLERS: usize = 1024;

/// The shortest time between two robots.txt fetches on demand for one origin.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(5);

/// A token bucket: `capacity` tokens, refilled at `capacity` a minute.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(capacity: u32, now: Instant) -> Bucket {
        Bucket {
            tokens: f64::from(capacity),
            at: now,
        }
    }

    /// The tokens there would be at `now`.
    fn level(&self, capacity: u32, now: Instant) -> f64 {
        let refilled =
            now.saturating_duration_since(self.at).as_secs_f64() * f64::from(capacity) / 60.0;
        (self.tokens + refilled).min(f64::from(capacity))
    }

    fn refill(&mut self, capacity: u32, now: Instant) {
        self.tokens = self.level(capacity, now);
        self.at = now;
    }
}

/// The rates of the admin listener's costly requests.
pub struct Throttles {
    overall: Mutex<Bucket>,
    callers: Mutex<HashMap<AddressKey, Bucket>>,
    refreshes: Mutex<HashMap<String, Instant>>,
}

impl Default for Throttles {
    fn default() -> Self {
        let now = Instant::now();
        Throttles {
            overall: Mutex::new(Bucket::full(EXPLAIN_LOOKUPS_OVERALL, now)),
            callers: Mutex::new(HashMap::new()),
            refreshes: Mutex::new(HashMap::new()),
        }
    }
}

impl Throttles {
    /// Takes one DNS check for `/explain` asked by `caller`: `false` when the caller's or the
    /// overall allowance is used up (then nothing is taken).
    pub fn take_explain_lookup(&self, caller: Option<IpAddr>) -> bool {
        let now = Instant::now();
        let key = AddressKey::of(caller);
        let mut callers = self.callers.lock().unwrap_or_else(|p| p.into_inner());
        if !callers.contains_key(&key) && callers.len() >= MAX_CALLERS {
            // Callers back to a full allowance are as good as forgotten; then the one idle
            // longest goes.
            callers.retain(|_, bucket| {
                bucket.level(EXPLAIN_LOOKUPS_PER_CALLER, now)
                    < f64::from(EXPLAIN_LOOKUPS_PER_CALLER)
            });
            if callers.len() >= MAX_CALLERS {
                if let Some(idle) = callers
                    .iter()
                    .min_by_key(|(_, bucket)| bucket.at)
                    .map(|(key, _)| *key)
                {
                    callers.remove(&idle);
                }
            }
        }
        let mine = callers
            .entry(key)
            .or_insert_with(|| Bucket::full(EXPLAIN_LOOKUPS_PER_CALLER, now));
        mine.refill(EXPLAIN_LOOKUPS_PER_CALLER, now);
        let mut overall = self.overall.lock().unwrap_or_else(|p| p.into_inner());
        overall.refill(EXPLAIN_LOOKUPS_OVERALL, now);
        if mine.tokens < 1.0 || overall.tokens < 1.0 {
            return false;
        }
        mine.tokens -= 1.0;
        overall.tokens -= 1.0;
        true
    }

    /// Takes the next robots.txt fetch on demand for `origin` (a configured name): `Err` with
    /// how long to wait when one was made less than [`REFRESH_INTERVAL`] ago.
    pub fn take_refresh(&self, origin: &str) -> Result<(), Duration> {
        let now = Instant::now();
        let mut refreshes = self.refreshes.lock().unwrap_or_else(|p| p.into_inner());
        // Only configured names come here, so this holds at most one entry per origin ever
        // configured; entries whose wait is over are dropped as they go.
        refreshes.retain(|_, at| now.saturating_duration_since(*at) < REFRESH_INTERVAL);
        if let Some(at) = refreshes.get(origin) {
            return Err(REFRESH_INTERVAL.saturating_sub(now.saturating_duration_since(*at)));
        }
        refreshes.insert(origin.to_string(), now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explain_lookups_are_limited_per_caller_and_overall() {
        let throttles = Throttles::default();
        let caller: IpAddr = "192.0.2.1".parse().expect("an address");
        for _ in 0..EXPLAIN_LOOKUPS_PER_CALLER {
            assert!(throttles.take_explain_lookup(Some(caller)));
        }
        assert!(!throttles.take_explain_lookup(Some(caller)));
        let mut others = 0;
        for i in 0..(EXPLAIN_LOOKUPS_OVERALL * 2) {
            let other = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            others += u32::from(throttles.take_explain_lookup(Some(other)));
        }
        assert!(others <= EXPLAIN_LOOKUPS_OVERALL - EXPLAIN_LOOKUPS_PER_CALLER + 1);
        assert!(throttles.callers.lock().expect("lock").len() <= MAX_CALLERS);
    }

    #[test]
    fn refreshes_are_spaced_per_origin() {
        let throttles = Throttles::default();
        assert_eq!(throttles.take_refresh("shop"), Ok(()));
        let wait = throttles.take_refresh("shop").expect_err("too soon");
        assert!(wait > Duration::ZERO && wait <= REFRESH_INTERVAL);
        assert_eq!(throttles.take_refresh("blog"), Ok(()));
    }
}
