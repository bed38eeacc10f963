//! The heaviest hitters of a stream in bounded memory: the space-saving algorithm (Metwally,
//! Agrawal, El Abbadi). At most `capacity` keys are counted; a new key takes the place of the
//! least counted one and inherits its count as an over-estimate, so a flood of unique keys costs
//! no memory and a key seen more often than any evicted one is never lost.
//!
//! Written here rather than taken from a crate: the few crates that implement it count bare keys,
//! while each entry here carries its own data (first and last seen, distinct clients) that must
//! be merged across time slices and replicas.

use std::collections::BTreeSet;
use std::hash::{BuildHasher, Hash};

use hashbrown::HashTable;
use serde::{Deserialize, Serialize};

/// One counted key.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Counted<K, V> {
    /// The key.
    pub key: K,
    /// How often it was seen (at most `error` more than the truth).
    pub count: u64,
    /// How much `count` may over-estimate: the count of the key it replaced.
    pub error: u64,
    /// What the entry carries besides its count.
    pub value: V,
}

/// What an entry's data does when it is seen again or merged.
pub trait Mergeable {
    /// Folds `other` (the same key, from elsewhere) into `self`.
    fn merge(&mut self, other: &Self);
}

/// A key the sketch can look up by a borrowed form of it, so that counting a key already there
/// builds no owned key (a violation's key holds several strings). Keys are hashed and compared
/// through that form only, so a probe and the key it was made into always agree.
pub trait SketchKey: Clone + Ord {
    /// The borrowed form.
    type Probe<'a>: Hash + PartialEq
    where
        Self: 'a;
    /// The key in its borrowed form.
    fn probe(&self) -> Self::Probe<'_>;
    /// Whether `probe` stands for this key (`self.probe() == *probe`, across lifetimes).
    fn matches(&self, probe: &Self::Probe<'_>) -> bool;
}

impl SketchKey for String {
    type Probe<'a> = &'a str;
    fn probe(&self) -> &str {
        self
    }
    fn matches(&self, probe: &&str) -> bool {
        self == probe
    }
}

/// The space-saving sketch.
#[derive(Debug, Clone)]
pub struct SpaceSaving<K, V> {
    capacity: usize,
    entries: Vec<Counted<K, V>>,
    /// Positions in `entries`, found by the hash of their key's probe. A table of positions
    /// rather than a map from keys: a lookup needs no owned key, and no key is stored twice.
    index: HashTable<usize>,
    hasher: foldhash::fast::RandomState,
    /// `(count, position in entries)` of every entry, to find the least counted one in
    /// O(log n). Positions rather than keys: a count that changes moves its entry here without
    /// cloning the key.
    order: BTreeSet<(u64, usize)>,
}

impl<K: SketchKey, V: Mergeable + Clone> SpaceSaving<K, V> {
    /// An empty sketch for at most `capacity` keys (at least 1).
    pub fn new(capacity: usize) -> Self {
        SpaceSaving {
            capacity: capacity.max(1),
            entries: Vec::new(),
            index: HashTable::new(),
            hasher: foldhash::fast::RandomState::default(),
            order: BTreeSet::new(),
        }
    }

    /// Counts `count` more of `key`; `value` is merged into its data, or becomes the data of a
    /// key new to the sketch (which may take the least counted key's place).
    pub fn add(&mut self, key: &K, count: u64, value: &V) {
        self.add_with(
            key.probe(),
            count,
            |_| key.clone(),
            |data| data.merge(value),
            || value.clone(),
        );
    }

    /// Counts `count` more of the key `probe` stands for: `seen` updates the data of a key
    /// already counted; a new key is built by `key` with data `fresh` (and may take the least
    /// counted key's place).
    pub fn add_with<'p>(
        &mut self,
        probe: K::Probe<'p>,
        count: u64,
        key: impl FnOnce(&K::Probe<'p>) -> K,
        seen: impl FnOnce(&mut V),
        fresh: impl FnOnce() -> V,
    ) {
        let hash = self.hasher.hash_one(&probe);
        if let Some(at) = self.position(hash, &probe) {
            let entry = &mut self.entries[at];
            self.order.remove(&(entry.count, at));
            entry.count += count;
            seen(&mut entry.value);
            self.order.insert((entry.count, at));
            return;
        }
        let at = if self.entries.len() < self.capacity {
            let at = self.entries.len();
            self.entries.push(Counted {
                key: key(&probe),
                count,
                error: 0,
                value: fresh(),
            });
            self.order.insert((count, at));
            at
        } else {
            // The least counted entry gives its place (of several, the one earliest in
            // `entries`).
            let Some((least, at)) = self.order.pop_first() else {
                return;
            };
            let Some(evicted) = self.entries.get(at) else {
                return;
            };
            let evicted_hash = self.hasher.hash_one(evicted.key.probe());
            if let Ok(slot) = self.index.find_entry(evicted_hash, |&other| other == at) {
                slot.remove();
            }
            self.entries[at] = Counted {
                key: key(&probe),
                count: least + count,
                error: least,
                value: fresh(),
            };
            self.order.insert((least + count, at));
            at
        };
        let (entries, hasher) = (&self.entries, &self.hasher);
        self.index.insert_unique(hash, at, |&other| {
            hasher.hash_one(entries[other].key.probe())
        });
    }

    /// Where the key `probe` (hashed to `hash`) is counted.
    fn position(&self, hash: u64, probe: &K::Probe<'_>) -> Option<usize> {
        let entries = &self.entries;
        self.index
            .find(hash, |&at| entries[at].key.matches(probe))
            .copied()
    }

    fn position_of(&self, key: &K) -> Option<usize> {
        let probe = key.probe();
        self.position(self.hasher.hash_one(&probe), &probe)
    }

    /// Merges a whole counted entry (from another slice or replica), keeping its error.
    pub fn merge_entry(&mut self, entry: &Counted<K, V>) {
        let before_error = self
            .position_of(&entry.key)
            .map(|at| self.entries[at].error);
        self.add(&entry.key, entry.count, &entry.value);
        if let Some(at) = self.position_of(&entry.key) {
            let inherited = match before_error {
                Some(error) => error,
                None => self.entries[at].error,
            };
            self.entries[at].error = inherited + entry.error;
        }
    }

    /// The entries, most counted first (ties by key).
    pub fn top(&self) -> Vec<&Counted<K, V>> {
        let mut entries: Vec<&Counted<K, V>> = self.entries.iter().collect();
        entries.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        entries
    }

    /// Every entry, in no order.
    pub fn entries(&self) -> &[Counted<K, V>] {
        &self.entries
    }

    /// How many keys it counts now.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it counts nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How much any key's count may be over-estimated, and how often a key that is not listed
    /// may have been seen at most: the least count while the sketch is full, else 0.
    pub fn error_bound(&self) -> u64 {
        if self.entries.len() < self.capacity {
            0
        } else {
            self.order.first().map_or(0, |(count, _)| *count)
        }
    }

    /// The most keys it counts.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Default)]
    struct Seen(u32);

    impl Mergeable for Seen {
        fn merge(&mut self, other: &Self) {
            self.0 += other.0;
        }
    }

    #[test]
    fn below_capacity_every_count_is_exact() {
        let mut sketch = SpaceSaving::new(10);
        for (key, times) in [("a", 5), ("b", 3), ("c", 1)] {
            for _ in 0..times {
                sketch.add(&key.to_string(), 1, &Seen(1));
            }
        }
        let top: Vec<(String, u64, u64, u32)> = sketch
            .top()
            .iter()
            .map(|e| (e.key.clone(), e.count, e.error, e.value.0))
            .collect();
        assert_eq!(
            top,
            vec![
                ("a".to_string(), 5, 0, 5),
                ("b".to_string(), 3, 0, 3),
                ("c".to_string(), 1, 0, 1)
            ]
        );
        assert_eq!(sketch.error_bound(), 0);
    }

    #[test]
    fn a_flood_of_unique_keys_stays_within_capacity_and_keeps_the_heavy_hitters() {
        let mut sketch = SpaceSaving::new(100);
        for round in 0..100_000u64 {
            sketch.add(&format!("/flood/{round}"), 1, &Seen(1));
            if round % 10 == 0 {
                sketch.add(&"/heavy".to_string(), 1, &Seen(1));
            }
        }
        assert_eq!(sketch.len(), 100);
        let top = sketch.top();
        assert_eq!(top[0].key, "/heavy");
        // The true count is 10,000; the estimate is never below it and over it by at most its
        // error.
        assert!(top[0].count >= 10_000);
        assert!(top[0].count - top[0].error <= 10_000);
        // Counts are guaranteed: every listed count minus its error is at most the truth, and
        // the sum of counts is the stream's length.
        let total: u64 = sketch.entries().iter().map(|e| e.count).sum();
        assert_eq!(total, 110_000);
        assert!(sketch.error_bound() > 0);
    }

    #[test]
    fn merging_sketches_adds_counts_and_errors() {
        let mut a = SpaceSaving::new(3);
        let mut b = SpaceSaving::new(3);
        a.add(&"x".to_string(), 4, &Seen(1));
        b.add(&"x".to_string(), 6, &Seen(2));
        b.add(&"y".to_string(), 1, &Seen(1));
        let mut merged = SpaceSaving::new(3);
        for entry in a.entries().iter().chain(b.entries()) {
            merged.merge_entry(entry);
        }
        let top = merged.top();
        assert_eq!(
            (top[0].key.as_str(), top[0].count, top[0].value.0),
            ("x", 10, 3)
        );
        assert_eq!((top[1].key.as_str(), top[1].count), ("y", 1));
    }
}
