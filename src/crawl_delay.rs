//! robots.txt's `Crawl-delay` as a rate limit: when each crawler may next be admitted.
//!
//! A crawler's requests are admitted at most one per delay. The key is the origin and the crawler
//! for a crawler whose identity was verified (its requests come from many addresses and share one
//! budget), and the origin, the crawler and the client address otherwise, so that an impostor
//! cannot spend a real crawler's budget and one scraper's speed does not slow another down.
//!
//! The state is per process and fixed in size (the table of `src/deadline_table.rs`): a budget
//! holds a slot only until its next admission time, and a client whose slots are all held by
//! other budgets is admitted untracked, as its first request would have been. A delay counts for
//! at most a day.

use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;
use std::time::Duration;

use foldhash::fast::RandomState;

use crate::clock::Millis;
use crate::deadline_table::{Claim, DeadlineTable};

pub use crate::deadline_table::MAX_DELAY;

/// The most budgets remembered at once: 8 bytes each, plus a lock per seven.
pub const MAX_ENTRIES: usize = 1 << 20;

/// What the limiter says about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Admitted; the key's next request is admitted no sooner than one delay from now.
    Admitted,
    /// Sooner than the delay after the previous admitted request: wait this long.
    TooSoon(Duration),
}

/// Who a budget belongs to.
#[derive(Debug, Clone, Copy)]
pub struct BudgetKey<'a> {
    /// The origin's name.
    pub origin: &'a str,
    /// The crawler's catalogue name.
    pub crawler: &'a str,
    /// The client address, for a crawler whose identity was not verified.
    pub client: Option<IpAddr>,
}

impl<'a> BudgetKey<'a> {
    /// The budget `decision` spends, with the delay that applies to it (its group's
    /// `Crawl-delay`, capped by the origin's `crawl_delay.max`); `None` when its group states
    /// none or it is not a crawler. A verified crawler has one budget per origin, any other
    /// claim one per client address.
    pub fn for_decision(
        decision: &'a crate::enforce::Decision,
        client: Option<IpAddr>,
    ) -> Option<(BudgetKey<'a>, Duration)> {
        let delay = decision
            .crawl_delay?
            .min(decision.origin.config.crawl_delay.max)
            .min(MAX_DELAY);
        let crawler = decision.crawler.as_ref()?;
        let key = BudgetKey {
            origin: decision.origin.name(),
            crawler: crawler.name(),
            client: if decision.is_verified() { None } else { client },
        };
        Some((key, delay))
    }
}

/// When each key may next be admitted.
pub struct CrawlDelays {
    /// Digests keys under a per-process random seed, so that collisions (two budgets merged)
    /// cannot be aimed at.
    hasher: RandomState,
    next: DeadlineTable,
}

impl std::fmt::Debug for CrawlDelays {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrawlDelays")
            .field("entries", &self.len())
            .finish()
    }
}

impl Default for CrawlDelays {
    fn default() -> Self {
        CrawlDelays::with_capacity(MAX_ENTRIES)
    }
}

impl CrawlDelays {
    /// A limiter that remembers at most about `entries` keys ([`MAX_ENTRIES`] by default).
    pub fn with_capacity(entries: usize) -> CrawlDelays {
        CrawlDelays {
            hasher: RandomState::default(),
            next: DeadlineTable::with_capacity(entries),
        }
    }

    /// Admits a request for `key` at `now` if at least `delay` has passed since the key's
    /// previous admitted request. A request that is not admitted does not move the key's time.
    pub fn admit(&self, key: BudgetKey<'_>, delay: Duration, now: Millis) -> Admission {
        if delay.is_zero() {
            return Admission::Admitted;
        }
        match self.next.claim(self.digest(&key), delay, now) {
            Claim::Claimed => Admission::Admitted,
            Claim::Held(wait) => Admission::TooSoon(wait),
        }
    }

    /// Budgets whose next admission time has not come (counted slot by slot: for diagnostics).
    pub fn len(&self) -> usize {
        self.next.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How long `key`, under `delay`, must wait at `now` before its next admission, if at all
    /// (for `/explain`).
    pub fn next_admission(
        &self,
        key: BudgetKey<'_>,
        delay: Duration,
        now: Millis,
    ) -> Option<Duration> {
        self.next.remaining(self.digest(&key), delay, now)
    }

    fn digest(&self, key: &BudgetKey<'_>) -> u64 {
        // Written field by field, not as a tuple: the derived `Hash` of `Option<IpAddr>` feeds
        // the hasher a length and two discriminants besides the address. An IPv4 address and
        // its IPv6-mapped form are one client.
        let mut hasher = self.hasher.build_hasher();
        hasher.write(key.origin.as_bytes());
        hasher.write(key.crawler.as_bytes());
        if let Some(client) = key.client {
            hasher.write_u128(match client {
                IpAddr::V4(address) => address.to_ipv6_mapped().to_bits(),
                IpAddr::V6(address) => address.to_bits(),
            });
        }
        hasher.finish()
    }
}

/// Whole seconds to wait, rounded up (`Retry-After` takes seconds; a client that retries after
/// the rounded-down value would be refused again).
pub fn retry_after_seconds(wait: Duration) -> u64 {
    let seconds = wait.as_secs();
    if wait.subsec_nanos() > 0 {
        seconds + 1
    } else {
        seconds.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key<'a>(crawler: &'a str, client: Option<IpAddr>) -> BudgetKey<'a> {
        BudgetKey {
            origin: "shop",
            crawler,
            client,
        }
    }

    #[test]
    fn one_request_per_delay_and_refusals_do_not_move_the_time() {
        let limits = CrawlDelays::default();
        let start = Millis::coarse_now();
        let delay = Duration::from_secs(2);
        let bot = key("GPTBot", None);
        assert_eq!(limits.admit(bot, delay, start), Admission::Admitted);
        assert_eq!(
            limits.admit(bot, delay, start.after(Duration::from_millis(500))),
            Admission::TooSoon(Duration::from_millis(1500))
        );
        assert_eq!(
            limits.admit(bot, delay, start.after(Duration::from_millis(1999))),
            Admission::TooSoon(Duration::from_millis(1))
        );
        assert_eq!(
            limits.admit(bot, delay, start.after(delay)),
            Admission::Admitted
        );
        assert_eq!(
            limits.next_admission(bot, delay, start.after(delay)),
            Some(Duration::from_secs(2))
        );
    }

    #[test]
    fn budgets_are_per_crawler_address_and_origin() {
        let limits = CrawlDelays::default();
        let now = Millis::coarse_now();
        let delay = Duration::from_secs(5);
        let a: IpAddr = [192, 0, 2, 1].into();
        let b: IpAddr = [192, 0, 2, 2].into();
        assert_eq!(
            limits.admit(key("GPTBot", Some(a)), delay, now),
            Admission::Admitted
        );
        assert_eq!(
            limits.admit(key("GPTBot", Some(b)), delay, now),
            Admission::Admitted
        );
        assert_eq!(
            limits.admit(key("CCBot", Some(a)), delay, now),
            Admission::Admitted
        );
        assert_eq!(
            limits.admit(key("GPTBot", None), delay, now),
            Admission::Admitted
        );
        let other_origin = BudgetKey {
            origin: "blog",
            crawler: "GPTBot",
            client: Some(a),
        };
        assert_eq!(limits.admit(other_origin, delay, now), Admission::Admitted);
        assert!(matches!(
            limits.admit(key("GPTBot", Some(a)), delay, now),
            Admission::TooSoon(_)
        ));
        assert_eq!(
            limits.admit(key("GPTBot", Some(a)), Duration::ZERO, now),
            Admission::Admitted
        );
    }

    #[test]
    fn the_table_stays_bounded_and_drops_what_has_expired_first() {
        let capacity = 64 * 32;
        let limits = CrawlDelays::with_capacity(capacity);
        let now = Millis::coarse_now();
        let delay = Duration::from_secs(1);
        let total = capacity * 4;
        for n in 0..total {
            let address = IpAddr::from((n as u128 + 1).to_be_bytes());
            assert_eq!(
                limits.admit(key("GPTBot", Some(address)), delay, now),
                Admission::Admitted
            );
        }
        assert!(limits.len() <= capacity, "{}", limits.len());
        // Once their time has come, old entries make room again.
        let later = now.after(delay);
        let fresh: IpAddr = [198, 51, 100, 7].into();
        assert_eq!(
            limits.admit(key("GPTBot", Some(fresh)), delay, later),
            Admission::Admitted
        );
        assert!(matches!(
            limits.admit(key("GPTBot", Some(fresh)), delay, later),
            Admission::TooSoon(_)
        ));
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_seconds(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(1500)), 2);
        assert_eq!(retry_after_seconds(Duration::from_secs(2)), 2);
        assert_eq!(retry_after_seconds(Duration::ZERO), 1);
    }
}
