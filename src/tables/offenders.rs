//! Repeat offenders: a client address that keeps fetching what robots.txt disallows is banned
//! from the origin for a while.
//!
//! A strike is a request blocked by a robots.txt rule that every copy of robots.txt in force over
//! the previous 24 hours also disallowed (the caller checks that: a crawler may keep a robots.txt
//! for a day, so a younger rule is not yet a violation). `strikes` within `window` (counted from
//! the first) ban the address on that origin for `ban`.
//!
//! Per process: strike counts in the bounded expiring table of `src/tables/expiring.rs`; bans in a map
//! that requests read without a lock (replaced whole when a ban is added, lifted or expires —
//! rare next to the reads every request makes), at most [`MAX_BANS`].

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwap;
use foldhash::fast::RandomState;

use crate::config::{OffendersAction, OffendersConfig};
use crate::metrics::METRICS;
use crate::tables::expiring::ExpiringMap;

/// The most bans in force at once; an address beyond that is not banned (and it is logged).
pub const MAX_BANS: usize = 100_000;

/// The most (origin, address) strike counts kept at once.
pub const MAX_STRIKE_COUNTS: usize = 1 << 20;

/// A ban in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ban {
    /// The origin it applies to.
    pub origin: Arc<str>,
    /// The banned client address.
    pub client: IpAddr,
    /// When it was imposed.
    pub since: SystemTime,
    /// When it ends.
    pub until: SystemTime,
    /// The same end, on the monotonic clock requests are checked against.
    ends: Instant,
    /// The strikes that led to it.
    pub strikes: u32,
    /// Whether the shared store holds it (a ban imposed while the store was unreachable is
    /// this process's own until the store is back).
    pub(crate) shared: bool,
    /// Browser requests that came from the address during the ban (this process's).
    browser_requests: BrowserRequests,
}

/// A count shared by every copy of one ban (copies are made on each lookup). Not part of the
/// ban's identity: two copies of one ban are equal whatever they counted.
#[derive(Debug, Clone, Default)]
struct BrowserRequests(Arc<AtomicU64>);

impl PartialEq for BrowserRequests {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for BrowserRequests {}

impl Ban {
    /// A ban from `since` to `until` (wall clock), ending on the monotonic clock at the same
    /// distance from `now`.
    pub(crate) fn new(
        origin: &str,
        client: IpAddr,
        since: SystemTime,
        until: SystemTime,
        strikes: u32,
        now: Instant,
    ) -> Ban {
        let left = until
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        Ban {
            origin: Arc::from(origin),
            client,
            since,
            until,
            ends: now + left,
            strikes,
            shared: false,
            browser_requests: BrowserRequests::default(),
        }
    }

    /// Browser requests that came from the banned address so far (in this process: with the
    /// shared store each replica counts its own).
    pub fn browser_requests(&self) -> u64 {
        self.browser_requests.0.load(Ordering::Relaxed)
    }

    /// Counts a browser request from the banned address; true for the ban's first.
    pub(crate) fn count_browser_request(&self) -> bool {
        self.browser_requests.0.fetch_add(1, Ordering::Relaxed) == 0
    }

    /// Whether `other` is this same ban (not a later one of the same address).
    fn same_ban(&self, other: &Ban) -> bool {
        self.origin == other.origin && self.client == other.client && self.since == other.since
    }
}

/// What a strike led to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Strike {
    /// Counted: this many within the window so far.
    Counted(u32),
    /// The address is now banned.
    Banned(Ban),
    /// The address reached the strikes, but `offenders.action` is `report` (or the origin only
    /// reports): nothing is banned.
    WouldBan(u32),
}

/// Strike counts and bans, per origin and client address.
pub struct Offenders {
    strikes: ExpiringMap<u32>,
    hasher: RandomState,
    /// Serialises changes to `bans`.
    changing: Mutex<()>,
    bans: ArcSwap<HashMap<u64, Ban>>,
    /// Whether `bans` holds any: every request asks, and almost always there is none.
    any_bans: AtomicBool,
}

impl std::fmt::Debug for Offenders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Offenders")
            .field("bans", &self.bans.load().len())
            .finish()
    }
}

impl Default for Offenders {
    fn default() -> Self {
        Offenders {
            strikes: ExpiringMap::with_capacity(MAX_STRIKE_COUNTS),
            hasher: RandomState::default(),
            changing: Mutex::new(()),
            bans: ArcSwap::from_pointee(HashMap::new()),
            any_bans: AtomicBool::new(false),
        }
    }
}

impl Offenders {
    fn key(&self, origin: &str, client: IpAddr) -> u64 {
        self.hasher.hash_one((origin, client))
    }

    /// The ban in force for `client` on `origin`, if any.
    pub fn banned(&self, origin: &str, client: IpAddr, now: Instant) -> Option<Ban> {
        self.banned_at(origin, client, || now)
    }

    /// [`Offenders::banned`], reading the clock only when the address has a ban.
    pub(crate) fn banned_at(
        &self,
        origin: &str,
        client: IpAddr,
        clock: impl FnOnce() -> Instant,
    ) -> Option<Ban> {
        if !self.any_bans.load(Ordering::Acquire) {
            return None;
        }
        let bans = self.bans.load();
        let ban = bans.get(&self.key(origin, client))?;
        let now = clock();
        if ban.ends > now {
            return Some(ban.clone());
        }
        drop(bans);
        self.prune(now);
        None
    }

    /// Counts a strike for `client` on `origin`; `enforce` is whether the origin blocks (not
    /// report mode).
    pub fn strike(
        &self,
        origin: &str,
        client: IpAddr,
        settings: OffendersConfig,
        enforce: bool,
        now: Instant,
    ) -> Strike {
        if settings.action == OffendersAction::Off {
            return Strike::Counted(0);
        }
        let key = self.key(origin, client);
        let counted = self
            .strikes
            .update(key, now, |live| match live {
                Some((until, count)) => Some((until, count.saturating_add(1))),
                None => Some((now + settings.window, 1)),
            })
            .map_or(1, |(_, count)| count);
        if counted < settings.strikes {
            return Strike::Counted(counted);
        }
        if settings.action != OffendersAction::Ban || !enforce {
            return Strike::WouldBan(counted);
        }
        // The count starts again after the ban.
        self.strikes.remove(key);
        let since = SystemTime::now();
        let ban = Ban {
            origin: Arc::from(origin),
            client,
            since,
            until: since + settings.ban,
            ends: now + settings.ban,
            strikes: counted,
            shared: false,
            browser_requests: BrowserRequests::default(),
        };
        match self.impose(ban, now) {
            Some(ban) => Strike::Banned(ban),
            None => Strike::WouldBan(counted),
        }
    }

    /// Puts `ban` in force (imposed by this process: counted in `robotsguard_bans_total`);
    /// `None` when [`MAX_BANS`] are in force.
    pub(crate) fn impose(&self, ban: Ban, now: Instant) -> Option<Ban> {
        let key = self.key(&ban.origin, ban.client);
        if self.add(key, ban.clone(), now) {
            METRICS.bans.with_label_values(&[&ban.origin]).inc();
            Some(ban)
        } else {
            None
        }
    }

    /// Makes the bans in force those of the shared store, `shared`, plus this process's own
    /// that the store does not hold yet: those imposed while it was unreachable, and those
    /// imposed since `fresh_since` (the store's list may have been read before they were
    /// written).
    pub(crate) fn mirror(&self, shared: Vec<Ban>, fresh_since: Instant, now: Instant) {
        let Ok(_changing) = self.changing.lock() else {
            return;
        };
        let mut bans: HashMap<u64, Ban> = HashMap::with_capacity(shared.len());
        for ban in (**self.bans.load()).values() {
            let imposed = ban
                .ends
                .checked_sub(ban.until.duration_since(ban.since).unwrap_or_default());
            let recent = imposed.is_some_and(|at| at >= fresh_since);
            if ban.ends > now && (!ban.shared || recent) {
                bans.insert(self.key(&ban.origin, ban.client), ban.clone());
            }
        }
        let current = self.bans.load();
        for mut ban in shared {
            if bans.len() >= MAX_BANS {
                break;
            }
            if ban.ends > now {
                ban.shared = true;
                let key = self.key(&ban.origin, ban.client);
                // The store's copy of a ban already in force keeps the count made here.
                if let Some(held) = current.get(&key).filter(|held| held.same_ban(&ban)) {
                    ban.browser_requests = held.browser_requests.clone();
                }
                bans.insert(key, ban);
            }
        }
        drop(current);
        self.publish(bans);
    }

    /// The bans in force that the shared store does not hold.
    pub(crate) fn unshared(&self, now: Instant) -> Vec<Ban> {
        self.bans
            .load()
            .values()
            .filter(|ban| !ban.shared && ban.ends > now)
            .cloned()
            .collect()
    }

    /// Marks `bans` as held by the shared store.
    pub(crate) fn mark_shared(&self, bans: &[Ban]) {
        let Ok(_changing) = self.changing.lock() else {
            return;
        };
        let mut all: HashMap<u64, Ban> = (**self.bans.load()).clone();
        for ban in bans {
            if let Some(held) = all.get_mut(&self.key(&ban.origin, ban.client)) {
                held.shared = true;
            }
        }
        self.bans.store(Arc::new(all));
    }

    /// Adds a ban; false when [`MAX_BANS`] are in force.
    fn add(&self, key: u64, ban: Ban, now: Instant) -> bool {
        let Ok(_changing) = self.changing.lock() else {
            return false;
        };
        let mut bans: HashMap<u64, Ban> = (**self.bans.load()).clone();
        bans.retain(|_, ban| ban.ends > now);
        if bans.len() >= MAX_BANS && !bans.contains_key(&key) {
            self.publish(bans);
            return false;
        }
        bans.insert(key, ban);
        self.publish(bans);
        true
    }

    /// Lifts the ban of `client` on `origin`; false when there was none.
    pub fn lift(&self, origin: &str, client: IpAddr, now: Instant) -> bool {
        let Ok(_changing) = self.changing.lock() else {
            return false;
        };
        let mut bans: HashMap<u64, Ban> = (**self.bans.load()).clone();
        bans.retain(|_, ban| ban.ends > now);
        let lifted = bans.remove(&self.key(origin, client)).is_some();
        self.publish(bans);
        lifted
    }

    /// The bans in force, on `origin` or all, soonest to end first.
    pub fn list(&self, origin: Option<&str>, now: Instant) -> Vec<Ban> {
        let mut bans: Vec<Ban> = self
            .bans
            .load()
            .values()
            .filter(|ban| ban.ends > now && origin.is_none_or(|name| *ban.origin == *name))
            .cloned()
            .collect();
        bans.sort_by_key(|ban| ban.ends);
        bans
    }

    /// Drops the bans that have ended, so `robotsguard_banned_clients` counts only those in
    /// force (the admin endpoint calls this before each scrape of `/metrics`).
    pub fn prune(&self, now: Instant) {
        let Ok(_changing) = self.changing.lock() else {
            return;
        };
        let current = self.bans.load();
        if current.values().all(|ban| ban.ends > now) {
            return;
        }
        let mut bans: HashMap<u64, Ban> = (**current).clone();
        drop(current);
        bans.retain(|_, ban| ban.ends > now);
        self.publish(bans);
    }

    /// Installs `bans` and sets `robotsguard_banned_clients` from them.
    fn publish(&self, bans: HashMap<u64, Ban>) {
        let mut per_origin: HashMap<&str, i64> = HashMap::new();
        for ban in bans.values() {
            *per_origin.entry(&ban.origin).or_default() += 1;
        }
        for (origin, count) in &per_origin {
            METRICS
                .banned_clients
                .with_label_values(&[origin])
                .set(*count);
        }
        for ban in self.bans.load().values() {
            if !per_origin.contains_key(&*ban.origin) {
                METRICS
                    .banned_clients
                    .with_label_values(&[&ban.origin])
                    .set(0);
            }
        }
        let any = !bans.is_empty();
        self.bans.store(Arc::new(bans));
        // After the map: a request that sees the flag finds the bans.
        self.any_bans.store(any, Ordering::Release);
    }
}

/// With the shared store, this process's copy of the strike counts it answered: what stays in
/// force when the store fails, or answers without a count it had (evicted under `maxmemory`, lost
/// in a restart).
impl Offenders {
    /// The strikes this process knows of for `client` on `origin` within their window.
    pub fn strikes_known(&self, origin: &str, client: IpAddr, now: Instant) -> u32 {
        self.strikes
            .get(self.key(origin, client), now)
            .map_or(0, |(_, count)| count)
    }

    /// Takes `count` (the store's answer, whose window ends `left` from now) as this process's
    /// count, unless it knows of more.
    pub fn mirror_strikes(
        &self,
        origin: &str,
        client: IpAddr,
        count: u32,
        left: Duration,
        now: Instant,
    ) {
        self.strikes
            .update(self.key(origin, client), now, |live| match live {
                Some((_, known)) if known >= count => None,
                _ => Some((now + left, count)),
            });
    }

    /// Forgets the count of `client` on `origin` (the store banned it: counting starts again).
    pub fn forget_strikes(&self, origin: &str, client: IpAddr) {
        self.strikes.remove(self.key(origin, client));
    }
}

/// Whole seconds until `ban` ends, rounded up and at least 1 (for `Retry-After`: a client that
/// comes back then finds the ban over).
pub fn seconds_left(ban: &Ban) -> u64 {
    let left = ban
        .until
        .duration_since(SystemTime::now())
        .unwrap_or(Duration::ZERO);
    (left.as_secs() + u64::from(left.subsec_nanos() > 0)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(action: OffendersAction) -> OffendersConfig {
        OffendersConfig {
            action,
            scope: crate::config::BanScope::Crawlers,
            strikes: 3,
            window: Duration::from_secs(60),
            ban: Duration::from_secs(10),
        }
    }

    #[test]
    fn strikes_within_the_window_ban_and_the_ban_ends() {
        let offenders = Offenders::default();
        let now = Instant::now();
        let client: IpAddr = [203, 0, 113, 5].into();
        let ban = settings(OffendersAction::Ban);
        assert_eq!(
            offenders.strike("shop", client, ban, true, now),
            Strike::Counted(1)
        );
        assert_eq!(
            offenders.strike("shop", client, ban, true, now),
            Strike::Counted(2)
        );
        // Another origin counts apart.
        assert_eq!(
            offenders.strike("blog", client, ban, true, now),
            Strike::Counted(1)
        );
        assert!(offenders.banned("shop", client, now).is_none());
        let Strike::Banned(imposed) = offenders.strike("shop", client, ban, true, now) else {
            panic!("the third strike bans");
        };
        assert_eq!(imposed.strikes, 3);
        assert!(offenders.banned("shop", client, now).is_some());
        assert!(offenders.banned("blog", client, now).is_none());
        assert_eq!(offenders.list(Some("shop"), now).len(), 1);
        assert_eq!(offenders.list(Some("blog"), now).len(), 0);
        let after = now + Duration::from_secs(11);
        assert!(offenders.banned("shop", client, after).is_none());
        assert!(offenders.list(None, after).is_empty());
    }

    #[test]
    fn the_window_restarts_and_report_off_and_lifting() {
        let offenders = Offenders::default();
        let now = Instant::now();
        let client: IpAddr = [203, 0, 113, 6].into();
        let ban = settings(OffendersAction::Ban);
        offenders.strike("shop", client, ban, true, now);
        offenders.strike("shop", client, ban, true, now);
        // The window (from the first strike) has passed: counting starts again.
        let later = now + Duration::from_secs(61);
        assert_eq!(
            offenders.strike("shop", client, ban, true, later),
            Strike::Counted(1)
        );
        let report = settings(OffendersAction::Report);
        for _ in 0..2 {
            offenders.strike("shop", client, report, true, later);
        }
        assert_eq!(
            offenders.strike("shop", client, report, true, later),
            Strike::WouldBan(4)
        );
        assert!(offenders.banned("shop", client, later).is_none());
        // Report mode of the origin never bans either.
        assert!(matches!(
            offenders.strike("shop", client, ban, false, later),
            Strike::WouldBan(_)
        ));
        let off = settings(OffendersAction::Off);
        assert_eq!(
            offenders.strike("shop", client, off, true, later),
            Strike::Counted(0)
        );
        assert!(matches!(
            offenders.strike("shop", client, ban, true, later),
            Strike::Banned(_)
        ));
        assert!(offenders.lift("shop", client, later));
        assert!(!offenders.lift("shop", client, later));
        assert!(offenders.banned("shop", client, later).is_none());
    }

    #[test]
    fn mirrored_counts_are_kept_for_their_window_and_never_lowered() {
        let offenders = Offenders::default();
        let now = Instant::now();
        let client: IpAddr = [203, 0, 113, 7].into();
        let window = Duration::from_secs(30);
        offenders.mirror_strikes("shop", client, 2, window, now);
        assert_eq!(offenders.strikes_known("shop", client, now), 2);
        // A lower answer (the store lost strikes) leaves what is known.
        offenders.mirror_strikes("shop", client, 1, Duration::from_secs(60), now);
        assert_eq!(offenders.strikes_known("shop", client, now), 2);
        // Counting goes on from it: the third strike bans.
        assert!(matches!(
            offenders.strike("shop", client, settings(OffendersAction::Ban), true, now),
            Strike::Banned(_)
        ));
        offenders.mirror_strikes("shop", client, 2, window, now);
        assert_eq!(
            offenders.strikes_known("shop", client, now + Duration::from_secs(31)),
            0,
            "the store's window ended"
        );
        offenders.forget_strikes("shop", client);
        assert_eq!(offenders.strikes_known("shop", client, now), 0);
    }
}
