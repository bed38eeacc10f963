//! Repeat offenders: a client that keeps fetching what robots.txt disallows is banned from the
//! origin for a while. A client is a network (`offenders.prefix`: one IPv4 address, an IPv6 /64
//! by default): the caller cuts the address, and every address of the network shares its strike
//! count and its bans.
//!
//! A strike is a request blocked by a robots.txt rule that every copy of robots.txt in force over
//! the previous 24 hours also disallowed (the caller checks that: a crawler may keep a robots.txt
//! for a day, so a younger rule is not yet a violation). `strikes` within `window` (counted from
//! the first) ban the address on that origin for `ban`. A trap hit or a disguised crawler bans at
//! once (the caller imposes those).
//!
//! Each ban records what earned it ([`BanCause`]), the crawler it was earned by, and, when that
//! was a client the ban scope `crawlers` would let through (a browser's User-Agent, an app), the
//! exact User-Agent it binds ([`BoundAgent`]), so that the client that earned it is refused while
//! the other browsers behind the address are not. An address holds at most
//! [`MAX_BANS_PER_ADDRESS`] bans on an origin: one for the address, the others each bound to a
//! User-Agent.
//!
//! Per process: strike counts in the bounded expiring table of `src/tables/expiring.rs`; bans in
//! a persistent hash trie (`rpds`) that requests read without a lock: adding or lifting a ban
//! copies the few nodes on its key's path, not the map, so its cost does not grow with the bans
//! in force (docs/BENCHMARKS.md, "Bans"). Changes are serialised by a mutex that also keeps the
//! bans' end times in order (expired bans are dropped from the front) and the per-origin counts
//! behind `robotsguard_banned_clients`. At most [`MAX_BANS`] bans at once.

use ipnet::IpNet;
use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwap;
use foldhash::fast::RandomState;
use sha2::Digest as _;

use crate::config::{OffendersAction, OffendersConfig};
use crate::metrics::METRICS;
use crate::tables::expiring::ExpiringMap;

/// The most bans in force at once; an address beyond that is not banned (and it is logged).
pub const MAX_BANS: usize = 100_000;

/// The most bans one address holds on one origin: the address's own and those bound to a
/// User-Agent. A further one replaces the one that ends soonest.
pub const MAX_BANS_PER_ADDRESS: usize = 16;

/// The most (origin, address) strike counts kept at once.
pub const MAX_STRIKE_COUNTS: usize = 1 << 20;

/// The longest User-Agent text a ban keeps to show (escaped); matching uses its digest.
pub const MAX_SHOWN_AGENT: usize = 256;

/// The crawler name of a ban read from the shared store written before bans recorded it.
pub const UNKNOWN_CRAWLER: &str = "unknown";

/// What earned a ban.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BanCause {
    /// `offenders.strikes` robots.txt violations within the window.
    Strikes,
    /// A trap path (`traps.action: ban`).
    Trap,
    /// A disguised crawler (`disguised.action: ban`).
    Disguised,
    /// Not recorded: a ban the shared store holds from before causes were written.
    Unknown,
}

impl BanCause {
    /// `strikes`, `trap`, `disguised` or `unknown`: as `/bans`, the log and the store write it.
    pub fn as_str(self) -> &'static str {
        match self {
            BanCause::Strikes => "strikes",
            BanCause::Trap => "trap",
            BanCause::Disguised => "disguised",
            BanCause::Unknown => "unknown",
        }
    }

    /// The cause [`BanCause::as_str`] wrote; anything else is unknown.
    pub fn parse(text: &str) -> BanCause {
        match text {
            "strikes" => BanCause::Strikes,
            "trap" => BanCause::Trap,
            "disguised" => BanCause::Disguised,
            _ => BanCause::Unknown,
        }
    }
}

/// The exact User-Agent a ban binds: its digest (SHA-256, first 16 bytes: what requests are
/// matched on, and what names the ban in the shared store) and a bounded, escaped copy to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundAgent {
    digest: AgentDigest,
    shown: Arc<str>,
}

/// The digest of a User-Agent as [`BoundAgent`] keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AgentDigest([u8; 16]);

impl AgentDigest {
    /// The digest of the exact bytes of `user_agent`.
    pub fn of(user_agent: &[u8]) -> AgentDigest {
        let full = sha2::Sha256::digest(user_agent);
        let mut digest = [0; 16];
        digest.copy_from_slice(&full[..16]);
        AgentDigest(digest)
    }

    /// 32 lower-case hex digits.
    pub fn hex(&self) -> String {
        use std::fmt::Write as _;
        self.0.iter().fold(String::with_capacity(32), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
    }

    /// The digest [`AgentDigest::hex`] wrote.
    pub fn from_hex(hex: &str) -> Option<AgentDigest> {
        if hex.len() != 32 || !hex.is_ascii() {
            return None;
        }
        let mut digest = [0; 16];
        for (i, byte) in digest.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(AgentDigest(digest))
    }
}

impl BoundAgent {
    /// The binding of exactly `user_agent`.
    pub fn of(user_agent: &[u8]) -> BoundAgent {
        BoundAgent {
            digest: AgentDigest::of(user_agent),
            shown: Arc::from(shown_agent(user_agent)),
        }
    }

    /// A binding as the shared store keeps it: the digest, and the text shown.
    pub fn from_parts(digest: AgentDigest, shown: &str) -> BoundAgent {
        let cut = shown
            .char_indices()
            .take_while(|(at, c)| at + c.len_utf8() <= MAX_SHOWN_AGENT)
            .last()
            .map_or(0, |(at, c)| at + c.len_utf8());
        BoundAgent {
            digest,
            shown: Arc::from(&shown[..cut]),
        }
    }

    /// The User-Agent as shown: escaped (control and non-ASCII bytes as `\xNN`), at most
    /// [`MAX_SHOWN_AGENT`] bytes.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The digest requests are matched on.
    pub fn digest(&self) -> AgentDigest {
        self.digest
    }
}

/// `user_agent` as a ban shows it: printable ASCII kept (backslashes doubled), every other byte
/// as `\xNN`, cut at [`MAX_SHOWN_AGENT`] bytes.
fn shown_agent(user_agent: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(user_agent.len().min(MAX_SHOWN_AGENT));
    for &byte in user_agent {
        let piece_len = match byte {
            b'\\' => 2,
            0x20..=0x7e => 1,
            _ => 4,
        };
        if out.len() + piece_len > MAX_SHOWN_AGENT {
            break;
        }
        match byte {
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(byte)),
            _ => {
                let _ = write!(out, "\\x{byte:02x}");
            }
        }
    }
    out
}

/// A ban in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ban {
    /// The origin it applies to.
    pub origin: Arc<str>,
    /// The banned client network (one address: a /32 or /128), as `offenders.prefix` cut it.
    pub client: IpNet,
    /// When it was imposed.
    pub since: SystemTime,
    /// When it ends.
    pub until: SystemTime,
    /// The same end, on the monotonic clock requests are checked against.
    ends: Instant,
    /// The strikes that led to it.
    pub strikes: u32,
    /// What earned it.
    pub cause: BanCause,
    /// The crawler that earned it: the catalogue name, `other` (a generic bot name),
    /// `disguised`, `browser` (a browser's or an app's User-Agent at a trap), `none` (no
    /// User-Agent), or [`UNKNOWN_CRAWLER`].
    pub crawler: Arc<str>,
    /// The exact User-Agent it binds besides the address's crawler requests, when it was earned
    /// by a client that `offenders.scope: crawlers` would let through.
    pub agent: Option<BoundAgent>,
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
    /// distance from `now`; earned by an unknown crawler until [`Ban::earned_by`] says.
    pub(crate) fn new(
        origin: &str,
        client: IpNet,
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
            cause: BanCause::Unknown,
            crawler: Arc::from(UNKNOWN_CRAWLER),
            agent: None,
            shared: false,
            browser_requests: BrowserRequests::default(),
        }
    }

    /// The same ban, earned by `cause`, by `crawler`, binding `agent`.
    pub(crate) fn earned_by(
        mut self,
        cause: BanCause,
        crawler: &str,
        agent: Option<BoundAgent>,
    ) -> Ban {
        self.cause = cause;
        self.crawler = Arc::from(crawler);
        self.agent = agent;
        self
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
        self.same_binding(other) && self.since == other.since
    }

    /// Whether `other` is a ban of the same address on the same origin, binding the same
    /// User-Agent (or none): a new one replaces the one in force.
    fn same_binding(&self, other: &Ban) -> bool {
        self.origin == other.origin
            && self.client == other.client
            && self.agent.as_ref().map(BoundAgent::digest)
                == other.agent.as_ref().map(BoundAgent::digest)
    }

    fn in_force(&self, now: Instant) -> bool {
        self.ends > now
    }
}

/// The bans in force for one address on one origin, as a request found them.
#[derive(Debug, Clone)]
pub struct AddressBans {
    bans: Arc<[Ban]>,
    now: Instant,
}

impl AddressBans {
    /// The bans in force.
    pub fn iter(&self) -> impl Iterator<Item = &Ban> {
        let now = self.now;
        self.bans.iter().filter(move |ban| ban.in_force(now))
    }

    /// The ban in force that ends last (there is at least one).
    pub fn latest(&self) -> Option<&Ban> {
        self.iter().max_by_key(|ban| ban.ends)
    }

    /// The ban in force that binds exactly `user_agent`, if any (the one ending last).
    pub fn binding(&self, user_agent: &[u8]) -> Option<&Ban> {
        if self.iter().all(|ban| ban.agent.is_none()) {
            return None;
        }
        let digest = AgentDigest::of(user_agent);
        self.iter()
            .filter(|ban| ban.agent.as_ref().is_some_and(|a| a.digest == digest))
            .max_by_key(|ban| ban.ends)
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

/// Hashes the map's keys, which are digests already (under the table's random seed): as they are.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, key: u64) {
        self.0 = key;
    }
}

/// The bans by (origin, address) digest: each address's bans on an origin together.
type BanMap = rpds::HashTrieMapSync<u64, Arc<[Ban]>, BuildHasherDefault<KeyHasher>>;

fn empty_map() -> BanMap {
    rpds::HashTrieMap::new_with_hasher_and_ptr_kind(BuildHasherDefault::default())
}

/// What changes to the bans keep up to date beside the map, under [`Offenders::changing`].
#[derive(Default)]
struct Books {
    /// Each ban's end and key, soonest first: the expired ones are dropped from the front.
    ends: BTreeSet<(Instant, u64)>,
    /// Banned addresses per origin (`robotsguard_banned_clients`).
    addresses: HashMap<Arc<str>, i64>,
    /// Bans in the map.
    bans: usize,
    /// Bans in the map the shared store does not hold.
    unshared: usize,
}

/// Strike counts and bans, per origin and client address.
pub struct Offenders {
    strikes: ExpiringMap<u32>,
    hasher: RandomState,
    /// Serialises changes to `bans`, and keeps their books.
    changing: Mutex<Books>,
    bans: ArcSwap<BanMap>,
    /// Whether `bans` holds any: every request asks, and almost always there is none.
    any_bans: AtomicBool,
}

impl std::fmt::Debug for Offenders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Offenders")
            .field("addresses", &self.bans.load().size())
            .finish()
    }
}

impl Default for Offenders {
    fn default() -> Self {
        Offenders {
            strikes: ExpiringMap::with_capacity(MAX_STRIKE_COUNTS),
            hasher: RandomState::default(),
            changing: Mutex::new(Books::default()),
            bans: ArcSwap::from_pointee(empty_map()),
            any_bans: AtomicBool::new(false),
        }
    }
}

/// The changes one operation made, published at its end.
struct Change {
    map: BanMap,
    /// Origins whose count of banned addresses changed.
    origins: Vec<Arc<str>>,
}

impl Offenders {
    fn key(&self, origin: &str, client: IpNet) -> u64 {
        self.hasher.hash_one((origin, client))
    }

    /// The ban in force for `client` on `origin` that ends last, if any.
    pub fn banned(&self, origin: &str, client: IpNet, now: Instant) -> Option<Ban> {
        self.banned_at(origin, client, || now)
    }

    /// [`Offenders::banned`], reading the clock only when the address has a ban.
    pub(crate) fn banned_at(
        &self,
        origin: &str,
        client: IpNet,
        clock: impl FnOnce() -> Instant,
    ) -> Option<Ban> {
        self.bans_of(origin, client, clock)
            .and_then(|bans| bans.latest().cloned())
    }

    /// Every ban in force for `client` on `origin` (none: `None`), reading the clock only when
    /// the address has a ban. Every request asks: one atomic load while no ban is in force, one
    /// lookup in the trie after.
    pub(crate) fn bans_of(
        &self,
        origin: &str,
        client: IpNet,
        clock: impl FnOnce() -> Instant,
    ) -> Option<AddressBans> {
        if !self.any_bans.load(Ordering::Acquire) {
            return None;
        }
        let map = self.bans.load();
        let bans = map.get(&self.key(origin, client))?;
        // Two keys that share a digest would only meet here: the ban must be this address's.
        let now = clock();
        let mine = |ban: &Ban| *ban.origin == *origin && ban.client == client;
        if bans.iter().any(|ban| mine(ban) && ban.in_force(now)) {
            if bans.iter().all(mine) {
                return Some(AddressBans {
                    bans: bans.clone(),
                    now,
                });
            }
            let bans: Vec<Ban> = bans.iter().filter(|ban| mine(ban)).cloned().collect();
            return Some(AddressBans {
                bans: bans.into(),
                now,
            });
        }
        if bans.iter().any(|ban| !ban.in_force(now)) {
            drop(map);
            self.prune(now);
        }
        None
    }

    /// Counts a strike for `client` on `origin` by `crawler` (the label of the crawler the
    /// request named); `enforce` is whether the origin blocks (not report mode).
    pub fn strike(
        &self,
        origin: &str,
        client: IpNet,
        crawler: &str,
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
        let ban = Ban::new(origin, client, since, since + settings.ban, counted, now).earned_by(
            BanCause::Strikes,
            crawler,
            None,
        );
        let ban = Ban {
            ends: now + settings.ban,
            ..ban
        };
        match self.impose(ban, now) {
            Some(ban) => Strike::Banned(ban),
            None => Strike::WouldBan(counted),
        }
    }

    /// Puts `ban` in force (imposed by this process: counted in `robotsguard_bans_total`),
    /// replacing the address's ban that binds the same User-Agent (or none); `None` when
    /// [`MAX_BANS`] are in force.
    pub(crate) fn impose(&self, ban: Ban, now: Instant) -> Option<Ban> {
        if self.add(ban.clone(), now) {
            METRICS.bans.with_label_values(&[&ban.origin]).inc();
            crate::events::ban(
                &ban.origin,
                ban.client,
                &ban.crawler,
                ban.cause.as_str(),
                ban.strikes,
                ban.until,
            );
            Some(ban)
        } else {
            None
        }
    }

    /// Adds `ban`; false when [`MAX_BANS`] are in force.
    fn add(&self, ban: Ban, now: Instant) -> bool {
        let Ok(mut books) = self.changing.lock() else {
            return false;
        };
        let mut change = self.start_change(&mut books, now);
        let key = self.key(&ban.origin, ban.client);
        let old: &[Ban] = change.map.get(&key).map_or(&[], |bans| &bans[..]);
        let mut bans: Vec<Ban> = old
            .iter()
            .filter(|held| held.in_force(now) && !held.same_binding(&ban))
            .cloned()
            .collect();
        if books.bans - old.len() + bans.len() >= MAX_BANS {
            self.publish(&mut books, change);
            return false;
        }
        if bans.len() >= MAX_BANS_PER_ADDRESS {
            if let Some(soonest) = (0..bans.len()).min_by_key(|&i| bans[i].ends) {
                bans.remove(soonest);
            }
        }
        bans.push(ban);
        Self::replace(&mut books, &mut change, key, bans);
        self.publish(&mut books, change);
        true
    }

    /// The map to change, with the bans that ended dropped.
    fn start_change(&self, books: &mut Books, now: Instant) -> Change {
        let mut change = Change {
            map: BanMap::clone(&self.bans.load()),
            origins: Vec::new(),
        };
        while let Some(&(ends, key)) = books.ends.first() {
            if ends > now {
                break;
            }
            books.ends.pop_first();
            if let Some(held) = change.map.get(&key) {
                if held.iter().any(|ban| !ban.in_force(now)) {
                    let kept = held.iter().filter(|ban| ban.in_force(now)).cloned();
                    let kept: Vec<Ban> = kept.collect();
                    Self::replace(books, &mut change, key, kept);
                }
            }
        }
        change
    }

    /// Makes `bans` the bans of `key` (none: the key is removed), keeping the books.
    fn replace(books: &mut Books, change: &mut Change, key: u64, bans: Vec<Ban>) {
        let old = change.map.get(&key).cloned();
        let old: &[Ban] = old.as_deref().unwrap_or(&[]);
        for ban in old {
            books.ends.remove(&(ban.ends, key));
        }
        for ban in &bans {
            books.ends.insert((ban.ends, key));
        }
        books.bans = books.bans - old.len() + bans.len();
        let unshared = |bans: &[Ban]| bans.iter().filter(|ban| !ban.shared).count();
        books.unshared = books.unshared - unshared(old) + unshared(&bans);
        let origin = bans.first().or(old.first()).map(|ban| ban.origin.clone());
        if let Some(origin) = origin {
            let step = i64::from(!bans.is_empty()) - i64::from(!old.is_empty());
            if step != 0 {
                *books.addresses.entry(origin.clone()).or_default() += step;
                change.origins.push(origin);
            }
        }
        if bans.is_empty() {
            change.map.remove_mut(&key);
        } else {
            change.map.insert_mut(key, bans.into());
        }
    }

    /// Installs the changed map and sets `robotsguard_banned_clients` for the origins whose
    /// count changed.
    fn publish(&self, books: &mut Books, change: Change) {
        for origin in &change.origins {
            let count = books.addresses.get(origin).copied().unwrap_or(0);
            METRICS
                .banned_clients
                .with_label_values(&[origin])
                .set(count);
            if count == 0 {
                books.addresses.remove(origin);
            }
        }
        let any = books.bans > 0;
        self.bans.store(Arc::new(change.map));
        // After the map: a request that sees the flag finds the bans.
        self.any_bans.store(any, Ordering::Release);
    }

    /// Makes the bans in force those of the shared store, `shared`, plus this process's own
    /// that the store does not hold yet: those imposed while it was unreachable, and those
    /// imposed since `fresh_since` (the store's list may have been read before they were
    /// written). Rebuilds the map: the store's list is read whole.
    pub(crate) fn mirror(&self, shared: Vec<Ban>, fresh_since: Instant, now: Instant) {
        let Ok(mut books) = self.changing.lock() else {
            return;
        };
        let current = self.bans.load_full();
        let mut by_key: HashMap<u64, Vec<Ban>> = HashMap::with_capacity(shared.len());
        let mut count = 0;
        for ban in current.values().flat_map(|bans| bans.iter()) {
            let imposed = ban
                .ends
                .checked_sub(ban.until.duration_since(ban.since).unwrap_or_default());
            let recent = imposed.is_some_and(|at| at >= fresh_since);
            if ban.in_force(now) && (!ban.shared || recent) {
                by_key
                    .entry(self.key(&ban.origin, ban.client))
                    .or_default()
                    .push(ban.clone());
                count += 1;
            }
        }
        for mut ban in shared {
            if count >= MAX_BANS {
                break;
            }
            if !ban.in_force(now) {
                continue;
            }
            ban.shared = true;
            let key = self.key(&ban.origin, ban.client);
            // The store's copy of a ban already in force keeps the count made here.
            if let Some(held) = current
                .get(&key)
                .and_then(|held| held.iter().find(|held| held.same_ban(&ban)))
            {
                ban.browser_requests = held.browser_requests.clone();
            }
            let bans = by_key.entry(key).or_default();
            let before = bans.len();
            bans.retain(|held| !held.same_binding(&ban));
            if bans.len() >= MAX_BANS_PER_ADDRESS {
                continue;
            }
            count = count + 1 + bans.len() - before;
            bans.push(ban);
        }
        drop(current);
        let mut rebuilt = Books::default();
        let mut change = Change {
            map: empty_map(),
            origins: books.addresses.keys().cloned().collect(),
        };
        for (key, bans) in by_key {
            Self::replace(&mut rebuilt, &mut change, key, bans);
        }
        // Every origin counted before or now is set again (to 0 when it has no ban left).
        *books = rebuilt;
        change.origins.sort();
        change.origins.dedup();
        self.publish(&mut books, change);
    }

    /// The bans in force that the shared store does not hold.
    pub(crate) fn unshared(&self, now: Instant) -> Vec<Ban> {
        if self.changing.lock().is_ok_and(|books| books.unshared == 0) {
            return Vec::new();
        }
        self.bans
            .load()
            .values()
            .flat_map(|bans| bans.iter())
            .filter(|ban| !ban.shared && ban.in_force(now))
            .cloned()
            .collect()
    }

    /// Marks `bans` as held by the shared store.
    pub(crate) fn mark_shared(&self, bans: &[Ban]) {
        let Ok(mut books) = self.changing.lock() else {
            return;
        };
        let mut change = Change {
            map: BanMap::clone(&self.bans.load()),
            origins: Vec::new(),
        };
        for ban in bans {
            let key = self.key(&ban.origin, ban.client);
            let Some(held) = change.map.get(&key) else {
                continue;
            };
            if !held.iter().any(|held| held.same_ban(ban) && !held.shared) {
                continue;
            }
            let marked: Vec<Ban> = held
                .iter()
                .map(|held| Ban {
                    shared: held.shared || held.same_ban(ban),
                    ..held.clone()
                })
                .collect();
            Self::replace(&mut books, &mut change, key, marked);
        }
        self.publish(&mut books, change);
    }

    /// Lifts every ban of `client` on `origin`: those in force that were lifted.
    pub fn lift(&self, origin: &str, client: IpNet, now: Instant) -> Vec<Ban> {
        let Ok(mut books) = self.changing.lock() else {
            return Vec::new();
        };
        let mut change = self.start_change(&mut books, now);
        let key = self.key(origin, client);
        let lifted: Vec<Ban> = change
            .map
            .get(&key)
            .map(|bans| {
                bans.iter()
                    .filter(|ban| *ban.origin == *origin && ban.client == client)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        if !lifted.is_empty() {
            let kept: Vec<Ban> = change
                .map
                .get(&key)
                .map(|bans| {
                    bans.iter()
                        .filter(|ban| !(*ban.origin == *origin && ban.client == client))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            Self::replace(&mut books, &mut change, key, kept);
        }
        self.publish(&mut books, change);
        lifted
    }

    /// Lifts every ban on `origin` (`None`: on every origin): those in force that were lifted.
    /// Reads the whole map (an operator's action, not a request's).
    pub fn lift_all(&self, origin: Option<&str>, now: Instant) -> Vec<Ban> {
        let Ok(mut books) = self.changing.lock() else {
            return Vec::new();
        };
        let mut change = self.start_change(&mut books, now);
        let on_origin = |ban: &Ban| origin.is_none_or(|name| *ban.origin == *name);
        let keys: Vec<u64> = change
            .map
            .iter()
            .filter(|(_, bans)| bans.iter().any(on_origin))
            .map(|(key, _)| *key)
            .collect();
        let mut lifted = Vec::new();
        for key in keys {
            let Some(bans) = change.map.get(&key).cloned() else {
                continue;
            };
            let (gone, kept): (Vec<Ban>, Vec<Ban>) = bans.iter().cloned().partition(on_origin);
            lifted.extend(gone);
            Self::replace(&mut books, &mut change, key, kept);
        }
        self.publish(&mut books, change);
        lifted.sort_by_key(|ban| ban.ends);
        lifted
    }

    /// Calls `f` with each ban in force, read off the map published now: no copy of the bans,
    /// however many (the decision stream walks them all).
    pub fn each_in_force(&self, now: Instant, mut f: impl FnMut(&Ban)) {
        let map = self.bans.load_full();
        for ban in map.values().flat_map(|bans| bans.iter()) {
            if ban.in_force(now) {
                f(ban);
            }
        }
    }

    /// The bans in force, on `origin` or all, soonest to end first.
    pub fn list(&self, origin: Option<&str>, now: Instant) -> Vec<Ban> {
        let mut bans: Vec<Ban> = self
            .bans
            .load()
            .values()
            .flat_map(|bans| bans.iter())
            .filter(|ban| ban.in_force(now) && origin.is_none_or(|name| *ban.origin == *name))
            .cloned()
            .collect();
        bans.sort_by_key(|ban| ban.ends);
        bans
    }

    /// Drops the bans that have ended, so `robotsguard_banned_clients` counts only those in
    /// force (the admin endpoint calls this before each scrape of `/metrics`).
    pub fn prune(&self, now: Instant) {
        let Ok(mut books) = self.changing.lock() else {
            return;
        };
        if books.ends.first().is_none_or(|&(ends, _)| ends > now) {
            return;
        }
        let change = self.start_change(&mut books, now);
        self.publish(&mut books, change);
    }
}

/// With the shared store, this process's copy of the strike counts it answered: what stays in
/// force when the store fails, or answers without a count it had (evicted under `maxmemory`, lost
/// in a restart).
impl Offenders {
    /// The strikes this process knows of for `client` on `origin` within their window.
    pub fn strikes_known(&self, origin: &str, client: IpNet, now: Instant) -> u32 {
        self.strikes
            .get(self.key(origin, client), now)
            .map_or(0, |(_, count)| count)
    }

    /// Takes `count` (the store's answer, whose window ends `left` from now) as this process's
    /// count, unless it knows of more.
    pub fn mirror_strikes(
        &self,
        origin: &str,
        client: IpNet,
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
    pub fn forget_strikes(&self, origin: &str, client: IpNet) {
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
    use std::net::IpAddr;

    /// The one-address network of `address`.
    fn net(address: impl Into<IpAddr>) -> IpNet {
        IpNet::from(address.into())
    }

    fn settings(action: OffendersAction) -> OffendersConfig {
        OffendersConfig {
            action,
            scope: crate::config::BanScope::Crawlers,
            strikes: 3,
            window: Duration::from_secs(60),
            ban: Duration::from_secs(10),
            prefix: crate::config::ClientPrefix::default(),
        }
    }

    #[test]
    fn strikes_within_the_window_ban_and_the_ban_ends() {
        let offenders = Offenders::default();
        let now = Instant::now();
        let client = net([203, 0, 113, 5]);
        let ban = settings(OffendersAction::Ban);
        assert_eq!(
            offenders.strike("shop", client, "GPTBot", ban, true, now),
            Strike::Counted(1)
        );
        assert_eq!(
            offenders.strike("shop", client, "GPTBot", ban, true, now),
            Strike::Counted(2)
        );
        // Another origin counts apart.
        assert_eq!(
            offenders.strike("blog", client, "GPTBot", ban, true, now),
            Strike::Counted(1)
        );
        assert!(offenders.banned("shop", client, now).is_none());
        let Strike::Banned(imposed) = offenders.strike("shop", client, "GPTBot", ban, true, now)
        else {
            panic!("the third strike bans");
        };
        assert_eq!(imposed.strikes, 3);
        assert_eq!(
            (imposed.cause, &*imposed.crawler),
            (BanCause::Strikes, "GPTBot")
        );
        assert!(imposed.agent.is_none());
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
        let client = net([203, 0, 113, 6]);
        let ban = settings(OffendersAction::Ban);
        offenders.strike("shop", client, "GPTBot", ban, true, now);
        offenders.strike("shop", client, "GPTBot", ban, true, now);
        // The window (from the first strike) has passed: counting starts again.
        let later = now + Duration::from_secs(61);
        assert_eq!(
            offenders.strike("shop", client, "GPTBot", ban, true, later),
            Strike::Counted(1)
        );
        let report = settings(OffendersAction::Report);
        for _ in 0..2 {
            offenders.strike("shop", client, "GPTBot", report, true, later);
        }
        assert_eq!(
            offenders.strike("shop", client, "GPTBot", report, true, later),
            Strike::WouldBan(4)
        );
        assert!(offenders.banned("shop", client, later).is_none());
        // Report mode of the origin never bans either.
        assert!(matches!(
            offenders.strike("shop", client, "GPTBot", ban, false, later),
            Strike::WouldBan(_)
        ));
        let off = settings(OffendersAction::Off);
        assert_eq!(
            offenders.strike("shop", client, "GPTBot", off, true, later),
            Strike::Counted(0)
        );
        assert!(matches!(
            offenders.strike("shop", client, "GPTBot", ban, true, later),
            Strike::Banned(_)
        ));
        assert_eq!(offenders.lift("shop", client, later).len(), 1);
        assert!(offenders.lift("shop", client, later).is_empty());
        assert!(offenders.banned("shop", client, later).is_none());
    }

    #[test]
    fn mirrored_counts_are_kept_for_their_window_and_never_lowered() {
        let offenders = Offenders::default();
        let now = Instant::now();
        let client = net([203, 0, 113, 7]);
        let window = Duration::from_secs(30);
        offenders.mirror_strikes("shop", client, 2, window, now);
        assert_eq!(offenders.strikes_known("shop", client, now), 2);
        // A lower answer (the store lost strikes) leaves what is known.
        offenders.mirror_strikes("shop", client, 1, Duration::from_secs(60), now);
        assert_eq!(offenders.strikes_known("shop", client, now), 2);
        // Counting goes on from it: the third strike bans.
        assert!(matches!(
            offenders.strike(
                "shop",
                client,
                "GPTBot",
                settings(OffendersAction::Ban),
                true,
                now
            ),
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

    fn ban_of(origin: &str, client: IpNet, length: u64, agent: Option<&[u8]>) -> Ban {
        let since = SystemTime::now();
        Ban::new(
            origin,
            client,
            since,
            since + Duration::from_secs(length),
            1,
            Instant::now(),
        )
        .earned_by(
            BanCause::Trap,
            if agent.is_some() { "browser" } else { "GPTBot" },
            agent.map(BoundAgent::of),
        )
    }

    const FIREFOX: &[u8] =
        b"Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0";
    const CHROME: &[u8] = b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/130.0";

    #[test]
    fn an_address_holds_a_ban_of_its_own_and_bans_bound_to_user_agents() {
        let offenders = Offenders::default();
        let now = Instant::now();
        let client = net([203, 0, 113, 7]);
        assert!(offenders
            .impose(ban_of("shop", client, 60, Some(FIREFOX)), now)
            .is_some());
        let bans = offenders.bans_of("shop", client, || now).expect("banned");
        assert!(bans.binding(FIREFOX).is_some());
        assert!(bans.binding(CHROME).is_none());
        // Exactly those bytes: a User-Agent one byte longer is another client.
        assert!(bans.binding(&[FIREFOX, b" "].concat()).is_none());
        // Another User-Agent taking the trap adds a ban; the same one again replaces its own.
        offenders.impose(ban_of("shop", client, 120, Some(CHROME)), now);
        offenders.impose(ban_of("shop", client, 90, Some(FIREFOX)), now);
        let bans = offenders.bans_of("shop", client, || now).expect("banned");
        assert_eq!(bans.iter().count(), 2);
        assert!(bans.binding(FIREFOX).is_some() && bans.binding(CHROME).is_some());
        assert_eq!(
            bans.latest().and_then(|ban| ban.agent.clone()),
            Some(BoundAgent::of(CHROME))
        );
        assert_eq!(offenders.list(Some("shop"), now).len(), 2);
        // The address's own ban (no User-Agent) binds nobody's User-Agent.
        offenders.impose(ban_of("shop", client, 30, None), now);
        let bans = offenders.bans_of("shop", client, || now).expect("banned");
        assert_eq!(bans.iter().count(), 3);
        // Each ends on its own: after 100 s only Chrome's is left.
        let later = now + Duration::from_secs(100);
        let bans = offenders.bans_of("shop", client, || later).expect("banned");
        assert_eq!(bans.iter().count(), 1);
        assert!(bans.binding(FIREFOX).is_none());
        // At most MAX_BANS_PER_ADDRESS: the one ending soonest makes room.
        for n in 0..MAX_BANS_PER_ADDRESS + 4 {
            let agent = format!("Agent/{n}");
            let length = 1000 + u64::try_from(n).expect("small");
            offenders.impose(ban_of("blog", client, length, Some(agent.as_bytes())), now);
        }
        let blog = offenders.bans_of("blog", client, || now).expect("banned");
        assert_eq!(blog.iter().count(), MAX_BANS_PER_ADDRESS);
        assert!(blog.binding(b"Agent/0").is_none());
        assert!(blog.binding(b"Agent/19").is_some());
        // Lifting the address lifts all of its bans on that origin, and only those.
        assert_eq!(offenders.lift("shop", client, now).len(), 3);
        assert!(offenders.bans_of("shop", client, || now).is_none());
        assert!(offenders.bans_of("blog", client, || now).is_some());
    }

    #[test]
    fn all_of_an_origins_bans_or_every_origins_are_lifted_and_counted() {
        let offenders = Offenders::default();
        let now = Instant::now();
        for n in 0..50_u8 {
            let client = net([198, 51, 100, n]);
            offenders.impose(ban_of("lift-a", client, 60, None), now);
            offenders.impose(ban_of("lift-b", client, 60, Some(FIREFOX)), now);
        }
        offenders.impose(
            ban_of("lift-a", net([198, 51, 100, 0]), 60, Some(CHROME)),
            now,
        );
        let gauge = |origin: &str| METRICS.banned_clients.with_label_values(&[origin]).get();
        assert_eq!((gauge("lift-a"), gauge("lift-b")), (50, 50));
        assert_eq!(offenders.lift_all(Some("lift-a"), now).len(), 51);
        assert_eq!((gauge("lift-a"), gauge("lift-b")), (0, 50));
        assert!(offenders.list(Some("lift-a"), now).is_empty());
        assert_eq!(offenders.list(None, now).len(), 50);
        assert_eq!(offenders.lift_all(None, now).len(), 50);
        assert!(offenders.list(None, now).is_empty());
        assert!(offenders
            .bans_of("lift-b", net([198, 51, 100, 1]), || now)
            .is_none());
        assert_eq!(gauge("lift-b"), 0);
    }

    #[test]
    fn ended_bans_leave_the_map_and_the_counts() {
        let offenders = Offenders::default();
        let now = Instant::now();
        for n in 0..10_u8 {
            let length = if n < 6 { 5 } else { 500 };
            offenders.impose(ban_of("ending", net([192, 0, 2, n]), length, None), now);
        }
        let gauge = || METRICS.banned_clients.with_label_values(&["ending"]).get();
        assert_eq!(gauge(), 10);
        let later = now + Duration::from_secs(6);
        offenders.prune(later);
        assert_eq!(gauge(), 4);
        assert_eq!(offenders.list(None, later).len(), 4);
        assert!(offenders
            .bans_of("ending", net([192, 0, 2, 0]), || later)
            .is_none());
        // A ban added later drops the ended ones on its way.
        let ended = Offenders::default();
        ended.impose(ban_of("ending2", net([192, 0, 2, 1]), 5, None), now);
        ended.impose(ban_of("ending2", net([192, 0, 2, 2]), 500, None), later);
        assert_eq!(ended.list(None, now).len(), 1);
        assert_eq!(
            METRICS.banned_clients.with_label_values(&["ending2"]).get(),
            1
        );
    }

    #[test]
    fn the_store_mirror_keeps_bindings_counts_and_this_process_s_own_bans() {
        let offenders = Offenders::default();
        let now = Instant::now();
        let client = net([203, 0, 113, 70]);
        let here = offenders
            .impose(ban_of("mirror", client, 60, Some(FIREFOX)), now)
            .expect("imposed");
        assert!(here.count_browser_request());
        assert_eq!(offenders.unshared(now).len(), 1);
        // The store's list: that same ban (now shared) and another replica's.
        let mut stored = here.clone();
        stored.shared = true;
        let other = ban_of("mirror", net([203, 0, 113, 71]), 60, None);
        offenders.mirror(vec![stored, other], now, now);
        let bans = offenders.bans_of("mirror", client, || now).expect("banned");
        let ban = bans.binding(FIREFOX).expect("still bound");
        assert_eq!(ban.browser_requests(), 1, "the count made here is kept");
        assert!(ban.shared);
        assert!(offenders.unshared(now).is_empty());
        assert_eq!(offenders.list(Some("mirror"), now).len(), 2);
        // A ban of this process the store does not hold (imposed while it was unreachable)
        // stays through a mirror, and is marked once written.
        let local = offenders
            .impose(ban_of("mirror", net([203, 0, 113, 72]), 60, None), now)
            .expect("imposed");
        let started = now + Duration::from_secs(1);
        offenders.mirror(Vec::new(), started, started);
        assert_eq!(offenders.list(Some("mirror"), now).len(), 1);
        offenders.mark_shared(&[local]);
        assert!(offenders.unshared(now).is_empty());
        assert_eq!(
            METRICS.banned_clients.with_label_values(&["mirror"]).get(),
            1
        );
    }

    #[test]
    fn bound_agents_are_shown_escaped_and_bounded_and_read_back() {
        let agent = BoundAgent::of(b"Bot\\1\n\xff");
        assert_eq!(agent.shown(), "Bot\\\\1\\x0a\\xff");
        let long = vec![b'a'; 1000];
        assert_eq!(BoundAgent::of(&long).shown().len(), MAX_SHOWN_AGENT);
        let digest = agent.digest();
        assert_eq!(AgentDigest::from_hex(&digest.hex()), Some(digest));
        assert_eq!(AgentDigest::from_hex("xyz"), None);
        assert_eq!(AgentDigest::from_hex(&"g".repeat(32)), None);
        let read = BoundAgent::from_parts(digest, agent.shown());
        assert_eq!(read, agent);
        assert_eq!(BanCause::parse("trap"), BanCause::Trap);
        assert_eq!(BanCause::parse("anything"), BanCause::Unknown);
    }
}
