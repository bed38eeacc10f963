//! robots.txt's `Crawl-delay` as a rate limit: when each crawler may next be admitted.
//!
//! A crawler's requests are admitted at most one per delay. The key is the origin and the crawler
//! for a crawler whose identity was verified (its requests come from many addresses and share one
//! budget), and the origin, the crawler and the client's network (`crawl_delay.prefix`: its
//! address alone for IPv4, its /64 for IPv6 unless configured otherwise) otherwise, so that an impostor
//! cannot spend a real crawler's budget and one scraper's speed does not slow another down.
//! Crawlers found only by the generic rules share one crawler name, [`GENERIC_BUDGET`]: a client
//! renaming itself keeps its address's budget.
//!
//! The state is per process and bounded (the tables of `src/tables/deadline_table.rs`): a budget holds
//! a slot only until its next admission time, and a client whose slots are all held by other
//! budgets is admitted untracked, as its first request would have been. A delay counts for at
//! most a day.
//!
//! The table starts small and grows fourfold, up to [`MAX_ENTRIES`] (or the capacity it was made
//! with), when a key finds its bucket full and a sample of buckets is half full: a check costs a
//! memory access to the key's slot, which stays in the CPU's caches only while the table is about
//! as small as the budgets it holds. After a growth, the keys of the smaller table are still
//! honoured (a key that holds there is refused) until its longest delay has passed, and a key
//! moves to the new table when it is next admitted; the table does not grow again before then. A
//! request racing a growth on another thread may, once, be admitted alongside its key's
//! admission in the other table.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use foldhash::fast::RandomState;
use ipnet::IpNet;

use crate::tables::clock::Millis;
use crate::tables::deadline_table::{Claim, DeadlineTable};

pub use crate::tables::deadline_table::MAX_DELAY;

/// The most budgets the table grows to, 8 bytes each (for a while after its last growth, the
/// quarter-size table it replaced is kept too).
pub const MAX_ENTRIES: usize = 1 << 20;

/// The budgets a table starts with (512 KiB).
const FIRST_ENTRIES: usize = 1 << 16;

/// What the limiter says about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Admitted; the key's next request is admitted no sooner than one delay from now.
    Admitted,
    /// Sooner than the delay after the previous admitted request: wait this long.
    TooSoon(Duration),
}

/// The crawler name of the one budget every crawler found only by the generic rules shares per
/// address and origin: those names are whatever the client chose to send, so a new one must not
/// buy a new budget. No catalogue, robots.txt or generic name has parentheses.
pub const GENERIC_BUDGET: &str = "(generic)";

/// Who a budget belongs to.
#[derive(Debug, Clone, Copy)]
pub struct BudgetKey<'a> {
    /// The origin's name.
    pub origin: &'a str,
    /// The crawler's name (catalogue name or robots.txt token; [`GENERIC_BUDGET`] for a crawler
    /// the generic rules found). Budgets are kept per name whatever its spelling: `FooBot`,
    /// `foobot` and `FOOBOT` are one crawler.
    pub crawler: &'a str,
    /// The client's network (`crawl_delay.prefix`), for a crawler whose identity was not
    /// verified.
    pub client: Option<IpNet>,
}

/// When each key may next be admitted.
pub struct CrawlDelays {
    /// Digests keys under a per-process random seed, so that collisions (two budgets merged)
    /// cannot be aimed at.
    hasher: RandomState,
    tables: ArcSwap<Tables>,
    max_entries: usize,
    /// Held while a larger table is made, so that one thread makes it.
    growing: parking_lot::Mutex<()>,
}

/// The table keys go into, and the smaller one it replaced while that one's keys may still hold.
struct Tables {
    current: Arc<DeadlineTable>,
    previous: Option<Previous>,
}

struct Previous {
    table: Arc<DeadlineTable>,
    /// When it was replaced: it matters until its longest delay after that.
    replaced: Millis,
}

impl Previous {
    /// Whether every key it holds has run out at `now`.
    fn done(&self, now: Millis) -> bool {
        let over = self
            .replaced
            .after(self.table.longest_delay())
            .after(Duration::from_secs(2));
        // Wrapping differences: `now` is past `over`, or so far before the replacement that the
        // clock can only have wrapped since (a process idle for weeks).
        (now.0.wrapping_sub(over.0) as i32) > 0
            || (now.0.wrapping_sub(self.replaced.0) as i32) < -60_000
    }
}

impl std::fmt::Debug for CrawlDelays {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrawlDelays")
            .field("entries", &self.len())
            .field("capacity", &self.tables.load().current.capacity())
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
        CrawlDelays::growing(FIRST_ENTRIES.min(entries), entries)
    }

    /// A limiter whose table starts with room for `first` keys and grows up to `max`.
    fn growing(first: usize, max: usize) -> CrawlDelays {
        CrawlDelays {
            hasher: RandomState::default(),
            tables: ArcSwap::from_pointee(Tables {
                current: Arc::new(DeadlineTable::with_capacity(first)),
                previous: None,
            }),
            max_entries: max,
            growing: parking_lot::Mutex::new(()),
        }
    }

    /// Admits a request for `key` at `now` if at least `delay` has passed since the key's
    /// previous admitted request. A request that is not admitted does not move the key's time.
    pub fn admit(&self, key: BudgetKey<'_>, delay: Duration, now: Millis) -> Admission {
        if delay.is_zero() {
            return Admission::Admitted;
        }
        let digest = self.digest(&key);
        let tables = self.tables.load();
        let previous = tables.previous.as_ref();
        let claimed = tables
            .current
            .claim(digest, delay, now, previous.map(|p| &*p.table));
        let previous_done = previous.is_none_or(|previous| previous.done(now));
        if previous_done && previous.is_some() {
            self.forget_previous(&tables.current);
        } else if claimed.full
            && previous_done
            && tables.current.capacity() < DeadlineTable::capacity_for(self.max_entries)
            && tables.current.half_full(digest, now)
        {
            // Not while the table it replaced still matters: growing again would drop that one
            // with keys that still hold.
            self.grow(&tables.current, now);
        }
        match claimed.claim {
            Claim::Claimed => Admission::Admitted,
            Claim::Held(wait) => Admission::TooSoon(wait),
        }
    }

    /// Starts loading `key`'s slot into the CPU's caches, for an [`CrawlDelays::admit`] of it
    /// soon after: the decision prefetches while it matches robots.txt rules, so that the
    /// admission does not wait for memory (a key's slot is rarely in cache).
    pub fn prefetch(&self, key: BudgetKey<'_>) {
        let digest = self.digest(&key);
        self.tables.load().current.prefetch(digest);
    }

    /// Replaces `full` by a table four times larger (when it is still the current one and below
    /// the cap); `full` is kept as the previous table.
    fn grow(&self, full: &Arc<DeadlineTable>, now: Millis) {
        let larger = DeadlineTable::capacity_for((full.capacity() * 4).min(self.max_entries));
        if larger <= full.capacity() {
            return;
        }
        let Some(_growing) = self.growing.try_lock() else {
            return;
        };
        let tables = self.tables.load();
        if !Arc::ptr_eq(&tables.current, full) || tables.previous.is_some() {
            return;
        }
        let larger = DeadlineTable::with_capacity(larger);
        self.tables.store(Arc::new(Tables {
            current: Arc::new(larger),
            previous: Some(Previous {
                table: full.clone(),
                replaced: now,
            }),
        }));
    }

    /// Drops the previous table once none of its keys can hold any more.
    fn forget_previous(&self, current: &Arc<DeadlineTable>) {
        let Some(_growing) = self.growing.try_lock() else {
            return;
        };
        let tables = self.tables.load();
        if Arc::ptr_eq(&tables.current, current) && tables.previous.is_some() {
            self.tables.store(Arc::new(Tables {
                current: current.clone(),
                previous: None,
            }));
        }
    }

    /// Budgets whose next admission time has not come, in the current table and the one it
    /// replaced (counted slot by slot: for diagnostics).
    pub fn len(&self) -> usize {
        let tables = self.tables.load();
        tables.current.len() + tables.previous.as_ref().map_or(0, |p| p.table.len())
    }

    /// How many budgets the current table has room for.
    pub fn capacity(&self) -> usize {
        self.tables.load().current.capacity()
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
        let digest = self.digest(&key);
        let tables = self.tables.load();
        tables.current.remaining(digest, delay, now).or_else(|| {
            let previous = tables.previous.as_ref()?;
            previous.table.remaining(digest, delay, now)
        })
    }

    fn digest(&self, key: &BudgetKey<'_>) -> u64 {
        // Written field by field, not as a tuple: the derived `Hash` of `Option<IpNet>` feeds
        // the hasher a length and discriminants besides the network. An IPv4 network and its
        // IPv6-mapped form are one client.
        let mut hasher = self.hasher.build_hasher();
        hasher.write(key.origin.as_bytes());
        write_lowercase(&mut hasher, key.crawler.as_bytes());
        if let Some(client) = key.client {
            let (bits, length) = match client {
                IpNet::V4(net) => (net.addr().to_ipv6_mapped().to_bits(), net.prefix_len() + 96),
                IpNet::V6(net) => (net.addr().to_bits(), net.prefix_len()),
            };
            hasher.write_u128(bits);
            hasher.write_u8(length);
        }
        hasher.finish()
    }
}

/// Feeds `bytes` to `hasher` ASCII-lower-cased, without allocating.
fn write_lowercase(hasher: &mut impl Hasher, bytes: &[u8]) {
    let mut buf = [0u8; 64];
    for chunk in bytes.chunks(buf.len()) {
        let lowered = &mut buf[..chunk.len()];
        lowered.copy_from_slice(chunk);
        lowered.make_ascii_lowercase();
        hasher.write(lowered);
    }
}

/// A crawler's name as budgets are keyed by it (in the shared store too): ASCII lower case, so
/// one crawler has one budget however a User-Agent spells its name.
pub fn budget_name(crawler: &str) -> std::borrow::Cow<'_, str> {
    if crawler.bytes().any(|b| b.is_ascii_uppercase()) {
        std::borrow::Cow::Owned(crawler.to_ascii_lowercase())
    } else {
        std::borrow::Cow::Borrowed(crawler)
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
    use std::net::IpAddr;

    fn key<'a>(crawler: &'a str, client: Option<IpAddr>) -> BudgetKey<'a> {
        BudgetKey {
            origin: "shop",
            crawler,
            client: client.map(IpNet::from),
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
            limits.admit(bot, delay, start.after(Duration::from_millis(1980))),
            Admission::TooSoon(Duration::from_millis(20))
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
    fn one_crawler_has_one_budget_however_it_is_spelt() {
        let limits = CrawlDelays::default();
        let now = Millis::coarse_now();
        let delay = Duration::from_secs(5);
        let a: IpAddr = [192, 0, 2, 1].into();
        assert_eq!(
            limits.admit(key("FooBot", Some(a)), delay, now),
            Admission::Admitted
        );
        for spelling in ["foobot", "FOOBOT", "fOoBoT"] {
            assert!(
                matches!(
                    limits.admit(key(spelling, Some(a)), delay, now),
                    Admission::TooSoon(_)
                ),
                "{spelling}"
            );
        }
        let long = "X".repeat(200);
        assert_eq!(
            limits.admit(key(&long, Some(a)), delay, now),
            Admission::Admitted
        );
        let lower = long.to_ascii_lowercase();
        assert!(matches!(
            limits.admit(key(&lower, Some(a)), delay, now),
            Admission::TooSoon(_)
        ));
        assert_eq!(budget_name("FooBot"), "foobot");
        assert!(matches!(
            budget_name("foobot"),
            std::borrow::Cow::Borrowed(_)
        ));
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
            client: Some(IpNet::from(a)),
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
    fn the_table_grows_when_crowded_and_honours_the_smaller_one_until_it_runs_out() {
        let limits = CrawlDelays::growing(64, 256);
        let now = Millis::coarse_now();
        let delay = Duration::from_secs(10);
        let first = key("GPTBot", Some([192, 0, 2, 1].into()));
        assert_eq!(limits.admit(first, delay, now), Admission::Admitted);
        for n in 0..1_000u32 {
            let client = IpAddr::from((n + 1_000).to_be_bytes());
            limits.admit(key("GPTBot", Some(client)), delay, now);
        }
        assert_eq!(limits.capacity(), 256, "grown once, to the cap");
        assert!(limits.len() <= 64 + 256, "{}", limits.len());
        // The key admitted into the first table still waits out its delay.
        let later = now.after(Duration::from_secs(4));
        assert_eq!(
            limits.admit(first, delay, later),
            Admission::TooSoon(Duration::from_secs(6))
        );
        assert_eq!(
            limits.next_admission(first, delay, later),
            Some(Duration::from_secs(6))
        );
        // Then it is admitted (into the new table), once.
        let after = now.after(delay);
        assert_eq!(limits.admit(first, delay, after), Admission::Admitted);
        assert!(matches!(
            limits.admit(first, delay, after),
            Admission::TooSoon(_)
        ));
        // Once every key of the first table has run out, it is let go.
        assert!(limits.tables.load().previous.is_some());
        limits.admit(first, delay, now.after(Duration::from_secs(13)));
        assert!(limits.tables.load().previous.is_none());
        assert_eq!(limits.capacity(), 256);
    }

    #[test]
    fn the_table_does_not_grow_again_while_the_one_it_replaced_matters() {
        let limits = CrawlDelays::growing(64, 4096);
        let now = Millis::coarse_now();
        let delay = Duration::from_secs(10);
        let admit_many = |crawler, at| {
            for n in 0..5_000u32 {
                let client = IpAddr::from((n + 1).to_be_bytes());
                limits.admit(key(crawler, Some(client)), delay, at);
            }
        };
        admit_many("GPTBot", now);
        assert_eq!(limits.capacity(), 256);
        admit_many("CCBot", now.after(Duration::from_secs(13)));
        assert_eq!(limits.capacity(), 1024);
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_seconds(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(1500)), 2);
        assert_eq!(retry_after_seconds(Duration::from_secs(2)), 2);
        assert_eq!(retry_after_seconds(Duration::ZERO), 1);
    }
}
