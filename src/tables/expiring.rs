//! A bounded table of keys that each hold a value until an instant: the per-process record of
//! who read robots.txt and of strike counts.
//!
//! Keys are 64-bit digests under a per-process random seed (foldhash: collisions cannot be aimed
//! at without the seed, and one would only merge two keys). The table is sharded, each shard
//! behind its own mutex, with at most `capacity / 64` keys. Each shard keeps one heap item per
//! key, soonest first, and drops the keys whose time has come when a new key goes into a shard at
//! least a quarter full, so an operation stays logarithmic however many clients there are. A
//! shard full of keys whose time has not come drops the one whose time comes soonest for a new
//! key: refusing new keys instead would let a flood of addresses switch the table off for
//! everyone after it (no strike counted, so no ban).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasher, Hash};
use std::sync::Mutex;
use std::time::Instant;

use foldhash::fast::RandomState;

const SHARDS: usize = 64;

/// Keys that each hold until an instant. See the module documentation.
pub(crate) type ExpiringKeys = ExpiringMap<()>;

/// Keys that each hold a value until an instant. See the module documentation.
pub(crate) struct ExpiringMap<V> {
    hasher: RandomState,
    shards: Vec<Mutex<Shard<V>>>,
    per_shard: usize,
}

struct Shard<V> {
    until: HashMap<u64, (Instant, V), RandomState>,
    /// One item per key, at or before the key's time (a key whose time moved later is
    /// rescheduled when its item comes up).
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
}

impl<V> Default for Shard<V> {
    fn default() -> Self {
        Shard {
            until: HashMap::default(),
            heap: BinaryHeap::new(),
        }
    }
}

impl<V: Copy> Shard<V> {
    fn expire(&mut self, now: Instant) {
        while let Some(Reverse((at, key))) = self.heap.peek().copied() {
            if at > now {
                break;
            }
            self.heap.pop();
            match self.until.get(&key).map(|(until, _)| *until) {
                Some(until) if until > now => self.heap.push(Reverse((until, key))),
                Some(_) => {
                    self.until.remove(&key);
                }
                None => {}
            }
        }
    }

    /// The key's time and value, if it holds past `now`.
    fn live(&self, key: u64, now: Instant) -> Option<(Instant, V)> {
        self.until
            .get(&key)
            .copied()
            .filter(|(until, _)| *until > now)
    }

    /// Sets `key` to hold `value` until `until`, dropping the key whose time comes soonest when
    /// the shard is full of live keys.
    fn set(&mut self, key: u64, until: Instant, value: V, now: Instant, capacity: usize) {
        if let Some(slot) = self.until.get_mut(&key) {
            // A later time keeps the heap item, which comes up at or before it and is
            // rescheduled; an earlier one needs an item of its own.
            let earlier = until < slot.0;
            *slot = (until, value);
            if earlier {
                self.heap.push(Reverse((until, key)));
            }
            return;
        }
        // Keys whose time has come are dropped once the shard is a quarter full: below that they
        // cost only memory, and a key that comes back (a crawler keeping its delay) finds its
        // entry and reuses it instead of being dropped and inserted again.
        // Also when the heap holds many items of keys removed or moved later, so that it stays
        // within a small multiple of the keys.
        if self.until.len() >= capacity / 4 || self.heap.len() > 2 * self.until.len() + 64 {
            self.expire(now);
        }
        while self.until.len() >= capacity {
            let Some(Reverse((at, soonest))) = self.heap.pop() else {
                break;
            };
            // An item of a key removed, or whose time moved later, is not that key's time.
            match self.until.get(&soonest).map(|(held, _)| *held) {
                Some(held) if held <= at => {
                    self.until.remove(&soonest);
                }
                Some(held) => self.heap.push(Reverse((held, soonest))),
                None => {}
            }
        }
        self.until.insert(key, (until, value));
        self.heap.push(Reverse((until, key)));
    }
}

impl<V: Copy> ExpiringMap<V> {
    /// A table of at most about `capacity` keys.
    pub(crate) fn with_capacity(capacity: usize) -> ExpiringMap<V> {
        ExpiringMap {
            hasher: RandomState::default(),
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            per_shard: (capacity / SHARDS).max(1),
        }
    }

    /// The digest that stands for `key`.
    pub(crate) fn digest(&self, key: impl Hash) -> u64 {
        self.hasher.hash_one(key)
    }

    fn shard(&self, digest: u64) -> Option<std::sync::MutexGuard<'_, Shard<V>>> {
        // A panic while holding a shard's lock cannot leave an entry half-written, but a
        // poisoned shard is left alone rather than trusted.
        self.shards[(digest as usize) % SHARDS].lock().ok()
    }

    /// Until when `key` holds, if past `now`.
    pub(crate) fn holds_until(&self, key: u64, now: Instant) -> Option<Instant> {
        self.get(key, now).map(|(until, _)| until)
    }

    /// `key`'s time and value, if it holds past `now`.
    pub(crate) fn get(&self, key: u64, now: Instant) -> Option<(Instant, V)> {
        self.shard(key)?.live(key, now)
    }

    /// Reads and replaces `key`'s entry under one lock: `change` gets the live entry (if any)
    /// and returns the new one (`None` leaves the entry as it is). Returns what `change`
    /// returned; a full shard drops its soonest key for a new one.
    pub(crate) fn update(
        &self,
        key: u64,
        now: Instant,
        change: impl FnOnce(Option<(Instant, V)>) -> Option<(Instant, V)>,
    ) -> Option<(Instant, V)> {
        let Some(mut shard) = self.shard(key) else {
            return change(None);
        };
        let live = shard.live(key, now);
        let new = change(live)?;
        let capacity = self.per_shard;
        shard.set(key, new.0, new.1, now, capacity);
        Some(new)
    }

    /// Removes `key`.
    pub(crate) fn remove(&self, key: u64) {
        if let Some(mut shard) = self.shard(key) {
            shard.until.remove(&key);
        }
    }

    /// Keys kept now (some may have expired and not been dropped yet).
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.lock().map_or(0, |shard| shard.until.len()))
            .sum()
    }
}

impl ExpiringKeys {
    /// Makes `key` hold until `until`, or later if it already does.
    pub(crate) fn extend(&self, key: u64, until: Instant, now: Instant) {
        self.update(key, now, |live| match live {
            Some((held, ())) if held >= until => None,
            _ => Some((until, ())),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn keys_hold_until_their_time_and_extensions_only_move_later() {
        let keys = ExpiringKeys::with_capacity(1024);
        let now = Instant::now();
        let key = keys.digest(("shop", "192.0.2.1"));
        let later = now + Duration::from_secs(2);
        keys.extend(key, later, now);
        assert_eq!(keys.holds_until(key, now), Some(later));
        assert_eq!(keys.holds_until(key, later), None);
        keys.extend(key, now + Duration::from_secs(1), now);
        assert_eq!(keys.holds_until(key, now), Some(later), "never earlier");
        let much_later = now + Duration::from_secs(60);
        keys.extend(key, much_later, now);
        assert_eq!(keys.holds_until(key, later), Some(much_later));
    }

    #[test]
    fn the_table_is_bounded_and_expired_keys_make_room() {
        let capacity = 64 * 16;
        let keys = ExpiringKeys::with_capacity(capacity);
        let now = Instant::now();
        let until = now + Duration::from_secs(1);
        for n in 0..capacity * 4 {
            keys.extend(keys.digest(n), until, now);
        }
        assert!(keys.len() <= capacity, "{}", keys.len());
        // Room for a new key once the first keys' time has come; an extended key is
        // rescheduled, not dropped, when its first time comes.
        let kept = keys.digest("kept");
        let later = now + Duration::from_secs(10);
        keys.extend(kept, until + Duration::from_secs(1), until);
        assert!(keys.holds_until(kept, until).is_some());
        keys.extend(kept, later, until);
        // Few enough that no shard fills (a full one would drop its soonest key, maybe `kept`).
        for n in 0..capacity / 8 {
            keys.extend(
                keys.digest(("again", n)),
                later + Duration::from_secs(1),
                until + Duration::from_secs(2),
            );
        }
        assert_eq!(
            keys.holds_until(kept, until + Duration::from_secs(3)),
            Some(later)
        );
        assert!(keys.len() <= capacity, "{}", keys.len());
    }

    #[test]
    fn a_full_table_drops_its_soonest_keys_for_new_ones() {
        let capacity = 64 * 16;
        let keys = ExpiringMap::<u32>::with_capacity(capacity);
        let now = Instant::now();
        let total = capacity * 4;
        for n in 0..total {
            // Each key holds a little longer than the one before.
            let until = now + Duration::from_secs(60) + Duration::from_millis(n as u64);
            keys.update(keys.digest(n), now, |_| Some((until, 1)));
        }
        assert!(keys.len() <= capacity, "{}", keys.len());
        // The newest keys are all kept (no shard refused them); the oldest made room.
        for n in total - 16..total {
            assert!(keys.get(keys.digest(n), now).is_some(), "{n}");
        }
        let dropped = (0..16).filter(|n| keys.get(keys.digest(n), now).is_none());
        assert_eq!(dropped.count(), 16);
        // A key counted again is a key kept: its count goes on.
        let counted = keys.digest("counted");
        for _ in 0..3 {
            keys.update(counted, now, |live| match live {
                Some((until, count)) => Some((until, count + 1)),
                None => Some((now + Duration::from_secs(600), 1)),
            });
        }
        assert_eq!(keys.get(counted, now).map(|(_, count)| count), Some(3));
    }
}
