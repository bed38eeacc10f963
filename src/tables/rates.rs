//! Operators' rate budgets (`policy.rates`) in this process: a token bucket per key, kept as
//! the generic cell rate algorithm keeps one, a single instant per key.
//!
//! A budget of `limit` requests per `period` admits `limit` at once and then one every
//! `period / limit`. Its key holds the time at which the bucket would be full again (the
//! "theoretical arrival time"): a request is admitted when that time is at most
//! `period - period / limit` ahead, and moves it `period / limit` later; a refused request does
//! not move it. The key expires at that time, when the bucket is full and the key says nothing
//! a fresh key would not: the table (the bounded expiring table of `src/tables/expiring.rs`)
//! holds only budgets partly spent.

use std::cell::Cell;
use std::time::{Duration, Instant};

use ipnet::IpNet;

use crate::tables::expiring::ExpiringKeys;

/// The most budgets partly spent kept at once; beyond that the one whose bucket fills soonest
/// is forgotten (its client then finds a full bucket: a flood of networks cannot switch the
/// budgets off for the others).
pub const MAX_BUCKETS: usize = 1 << 20;

/// Who a rate budget belongs to.
#[derive(Debug, Clone, Copy)]
pub struct RateKey<'a> {
    /// The origin's name.
    pub origin: &'a str,
    /// The crawler's name (budgets are kept per name whatever its spelling).
    pub crawler: &'a str,
    /// The client's network, for a budget per client; `None` for one per crawler.
    pub client: Option<IpNet>,
}

/// A rate: `limit` requests per `period`, `limit` of them at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Requests per period (at least 1).
    pub limit: u32,
    /// The period.
    pub period: Duration,
}

impl Rate {
    /// The time one request takes from the bucket: `period / limit`.
    pub fn interval(self) -> Duration {
        self.period / self.limit.max(1)
    }

    /// How far ahead of now the bucket's time may be for a request to be admitted.
    pub fn tolerance(self) -> Duration {
        self.period.saturating_sub(self.interval())
    }
}

/// The rate budgets of this process.
pub struct RateBuckets {
    buckets: ExpiringKeys,
}

impl std::fmt::Debug for RateBuckets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateBuckets")
            .field("buckets", &self.buckets.len())
            .finish()
    }
}

impl Default for RateBuckets {
    fn default() -> Self {
        RateBuckets {
            buckets: ExpiringKeys::with_capacity(MAX_BUCKETS),
        }
    }
}

impl RateBuckets {
    fn digest(&self, key: &RateKey<'_>) -> u64 {
        let crawler = crate::tables::crawl_delay::budget_name(key.crawler);
        self.buckets.digest((key.origin, &*crawler, key.client))
    }

    /// Admits a request of `key` under `rate` at `now` (`None`), or says how long it must wait
    /// for the bucket to hold one (`Some`), spending nothing then.
    pub fn admit(&self, key: RateKey<'_>, rate: Rate, now: Instant) -> Option<Duration> {
        let wait = Cell::new(None);
        self.buckets.update(self.digest(&key), now, |live| {
            let due = live.map_or(now, |(due, ())| due.max(now));
            let ahead = due.saturating_duration_since(now);
            if ahead > rate.tolerance() {
                wait.set(Some(ahead - rate.tolerance()));
                return None;
            }
            Some((due + rate.interval(), ()))
        });
        wait.get()
    }

    /// How long a request of `key` must wait under `rate` at `now`, if at all, spending nothing
    /// (for `/explain`, and before asking the shared store).
    pub fn wait(&self, key: RateKey<'_>, rate: Rate, now: Instant) -> Option<Duration> {
        let (due, ()) = self.buckets.get(self.digest(&key), now)?;
        let ahead = due.saturating_duration_since(now);
        (ahead > rate.tolerance()).then(|| ahead - rate.tolerance())
    }

    /// Spends one request of `key` under `rate` at `now` whatever the bucket holds (the shared
    /// store admitted it: this process's bucket counts its own admissions).
    pub fn spend(&self, key: RateKey<'_>, rate: Rate, now: Instant) {
        self.buckets.update(self.digest(&key), now, |live| {
            let due = live.map_or(now, |(due, ())| due.max(now));
            Some((due + rate.interval(), ()))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(client: Option<&str>) -> RateKey<'_> {
        RateKey {
            origin: "shop",
            crawler: "Googlebot",
            client: client.map(|c| IpNet::from(c.parse::<std::net::IpAddr>().expect("an address"))),
        }
    }

    #[test]
    fn a_budget_admits_its_limit_at_once_then_one_per_interval() {
        let buckets = RateBuckets::default();
        let rate = Rate {
            limit: 5,
            period: Duration::from_secs(60),
        };
        let now = Instant::now();
        let bot = key(None);
        for n in 0..5 {
            assert_eq!(buckets.admit(bot, rate, now), None, "request {n}");
        }
        assert_eq!(buckets.wait(bot, rate, now), Some(Duration::from_secs(12)));
        assert_eq!(
            buckets.admit(bot, rate, now),
            Some(Duration::from_secs(12)),
            "one token comes back every 12 s"
        );
        // A refusal spends nothing: the wait is the same a second later, less the second.
        let later = now + Duration::from_secs(1);
        assert_eq!(
            buckets.admit(bot, rate, later),
            Some(Duration::from_secs(11))
        );
        let refilled = now + Duration::from_secs(12);
        assert_eq!(buckets.admit(bot, rate, refilled), None);
        assert!(buckets.admit(bot, rate, refilled).is_some());
        // Other keys have budgets of their own; spelling does not make a new one.
        assert_eq!(buckets.admit(key(Some("192.0.2.1")), rate, now), None);
        let shouting = RateKey {
            crawler: "GOOGLEBOT",
            ..bot
        };
        assert!(buckets.admit(shouting, rate, refilled).is_some());
        // Spending as the store admitted: counted even when this process would refuse.
        let spent = key(Some("192.0.2.2"));
        for _ in 0..6 {
            buckets.spend(spent, rate, now);
        }
        assert_eq!(
            buckets.wait(spent, rate, now),
            Some(Duration::from_secs(24))
        );
        // After a whole period the bucket is full again.
        let full = now + Duration::from_secs(120);
        for _ in 0..5 {
            assert_eq!(buckets.admit(spent, rate, full), None);
        }
    }
}
