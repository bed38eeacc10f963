//! A fixed-size table of keys that each hold until a deadline: the per-process Crawl-delay
//! budgets, checked on every crawler request a delay applies to.
//!
//! Built for the cost of that check. A key lives in one bucket of eight slots, one cache line,
//! and has at most one slot. A check reads the slots without a lock: a key that holds (a
//! refusal), or a bucket full of keys that hold, changes nothing and costs eight loads. A key
//! whose own slot has run out (a crawler keeping its delay) claims it again with one
//! compare-and-swap. Only a key without a slot takes a lock (one of a few shared by the
//! buckets) to put one in, so that two requests cannot give one key two slots. Nothing is
//! allocated per check and nothing is swept: a slot whose deadline has passed is free. (A
//! general map with an expiry heap, as `src/expiring.rs`, costs more per check.) The table is
//! allocated zeroed, so the system gives it memory page by page as keys first reach them.
//!
//! A slot packs 32 bits of the key's 64-bit digest (the other bits chose the bucket) and its
//! deadline on the [`Millis`] clock, which wraps every 49 days. A deadline is in force while it
//! is ahead of now by no more than the delay being checked (at most [`MAX_DELAY`]), so a slot
//! left untouched for 49 days does not come back to life, except for the key that wrote it and
//! for at most one delay.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::clock::Millis;

/// The longest deadline a key can be given, from now.
pub const MAX_DELAY: Duration = Duration::from_secs(24 * 60 * 60);

const SLOTS: usize = 8;
/// Locks for putting new keys in, shared by the buckets (a lock is held for eight loads and a
/// compare-and-swap).
const LOCKS: usize = 64;

/// One bucket: eight slots, one 64-byte cache line. Slots change only by compare-and-swap.
struct Bucket<'a> {
    slots: &'a [AtomicU64],
}

/// What a bucket holds for a key.
enum Found {
    /// The key holds for this many more milliseconds.
    Held(u32),
    /// The key's own slot (index, value), run out.
    RunOut(usize, u64),
    /// The key has no slot; this one (index, value) is free.
    Free(usize, u64),
    /// The key has no slot, and every slot holds another key.
    Full,
}

impl Bucket<'_> {
    fn find(&self, tag: u32, delay: u32, now: u32) -> Found {
        let mut free = None;
        for (index, slot) in self.slots.iter().enumerate() {
            let slot = slot.load(Ordering::Relaxed);
            let ahead = ahead(slot, now);
            if (slot >> 32) as u32 == tag {
                return match ahead {
                    Some(ahead) if ahead <= delay => Found::Held(ahead),
                    _ => Found::RunOut(index, slot),
                };
            }
            if free.is_none() && ahead.is_none() {
                free = Some((index, slot));
            }
        }
        free.map_or(Found::Full, |(index, slot)| Found::Free(index, slot))
    }

    /// Replaces the slot's `old` value; false when it changed meanwhile.
    fn replace(&self, index: usize, old: u64, new: u64) -> bool {
        self.slots[index]
            .compare_exchange(old, new, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

/// How many times a claim looks again when a slot changed under it: each retry means another
/// claim in the bucket succeeded, so this is reached only under a storm of claims in one bucket,
/// and then the request is admitted untracked.
const RETRIES: usize = 8;

/// What [`DeadlineTable::claim`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// The key was free (or untracked: its bucket is full); it now holds until now + delay.
    Claimed,
    /// The key holds for this much longer; nothing changed.
    Held(Duration),
}

/// Keys that each hold until a deadline. See the module documentation.
pub(crate) struct DeadlineTable {
    /// The buckets' slots, from `first` on, with a bucket's worth to spare: the allocator
    /// aligns a large zeroed block (which it leaves to the system to fill with zeroed pages) to
    /// 16 bytes, and the buckets start at the first cache-line boundary in it.
    slots: Box<[AtomicU64]>,
    first: usize,
    buckets: usize,
    locks: Box<[Mutex<()>]>,
}

impl DeadlineTable {
    /// A table of at most `capacity` keys (rounded down to whole buckets, at least one).
    pub(crate) fn with_capacity(capacity: usize) -> DeadlineTable {
        let buckets = (capacity / SLOTS).max(1);
        let slots: Box<[AtomicU64]> = bytemuck::zeroed_slice_box((buckets + 1) * SLOTS);
        let misalignment = slots.as_ptr() as usize % 64;
        let first = (64 - misalignment) % 64 / std::mem::size_of::<AtomicU64>();
        DeadlineTable {
            slots,
            first,
            buckets,
            locks: (0..LOCKS).map(|_| Mutex::new(())).collect(),
        }
    }

    /// If `key` does not hold at `now`, makes it hold for `delay` (at most [`MAX_DELAY`]);
    /// otherwise says for how much longer it holds. Two requests cannot both claim one key. A
    /// key whose bucket is full of keys that hold is left untracked and claimed.
    pub(crate) fn claim(&self, key: u64, delay: Duration, now: Millis) -> Claim {
        let delay = delay_millis(delay);
        let now = now.0;
        let tag = tag(key);
        let claimed = u64::from(tag) << 32 | u64::from(now.wrapping_add(delay));
        let (index, bucket) = self.bucket(key);
        for _ in 0..RETRIES {
            match bucket.find(tag, delay, now) {
                Found::Held(ahead) => return held(ahead),
                Found::Full => return Claim::Claimed,
                // Its only slot: whoever swaps it first has claimed the key.
                Found::RunOut(index, old) => {
                    if bucket.replace(index, old, claimed) {
                        return Claim::Claimed;
                    }
                }
                Found::Free(..) => {
                    // A new slot, under the lock: another request for the key may be putting
                    // one in too.
                    let _locked = self.locks[index % LOCKS].lock();
                    match bucket.find(tag, delay, now) {
                        Found::Held(ahead) => return held(ahead),
                        Found::Full => return Claim::Claimed,
                        Found::RunOut(index, old) | Found::Free(index, old) => {
                            if bucket.replace(index, old, claimed) {
                                return Claim::Claimed;
                            }
                        }
                    }
                }
            }
        }
        Claim::Claimed
    }

    /// For how much longer `key` holds at `now`, if it was claimed with a delay of at most
    /// `delay`.
    pub(crate) fn remaining(&self, key: u64, delay: Duration, now: Millis) -> Option<Duration> {
        match self
            .bucket(key)
            .1
            .find(tag(key), delay_millis(delay), now.0)
        {
            Found::Held(ahead) => Some(Duration::from_millis(u64::from(ahead))),
            _ => None,
        }
    }

    /// Keys in force now (an O(size) count, for diagnostics and tests).
    pub(crate) fn len(&self) -> usize {
        let now = Millis::coarse_now().0;
        self.slots[self.first..self.first + self.buckets * SLOTS]
            .iter()
            .filter(|slot| ahead(slot.load(Ordering::Relaxed), now).is_some())
            .count()
    }

    /// The bucket of `key`, and its index.
    fn bucket(&self, key: u64) -> (usize, Bucket<'_>) {
        // The low half of the digest picks the bucket (scaled, not taken modulo, so any number
        // of buckets is uniform); the high half is the tag kept in the slot.
        let index = (((key & 0xffff_ffff) * self.buckets as u64) >> 32) as usize;
        let start = self.first + index * SLOTS;
        let slots = &self.slots[start..start + SLOTS];
        (index, Bucket { slots })
    }
}

fn held(ahead: u32) -> Claim {
    Claim::Held(Duration::from_millis(u64::from(ahead)))
}

/// The key's bits kept in its slot.
fn tag(key: u64) -> u32 {
    (key >> 32) as u32
}

/// A delay in whole milliseconds: at least 1, at most [`MAX_DELAY`].
fn delay_millis(delay: Duration) -> u32 {
    (delay.min(MAX_DELAY).as_millis() as u32).max(1)
}

/// How far the slot's deadline is ahead of `now`, when it is ahead and by no more than
/// [`MAX_DELAY`]. An empty slot is 0 (a key whose tag and deadline are both 0 is lost: it is
/// admitted once more, untracked).
fn ahead(slot: u64, now: u32) -> Option<u32> {
    let ahead = (slot as u32).wrapping_sub(now);
    (slot != 0 && ahead > 0 && ahead <= MAX_DELAY.as_millis() as u32).then_some(ahead)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A digest whose halves (bucket and tag) both differ from those of other `n`.
    fn key(n: u64) -> u64 {
        n << 32 | n
    }

    fn ms(n: u32) -> Duration {
        Duration::from_millis(u64::from(n))
    }

    #[test]
    fn a_key_holds_for_its_delay_and_a_refusal_does_not_move_it() {
        let table = DeadlineTable::with_capacity(1024);
        let start = Millis::coarse_now();
        let delay = Duration::from_secs(30);
        assert_eq!(table.claim(key(42), delay, start), Claim::Claimed);
        let later = start.after(ms(500));
        assert_eq!(table.claim(key(42), delay, later), Claim::Held(ms(29_500)));
        assert_eq!(table.remaining(key(42), delay, later), Some(ms(29_500)));
        assert_eq!(table.remaining(key(43), delay, later), None);
        assert_eq!(
            table.claim(key(42), delay, start.after(delay)),
            Claim::Claimed
        );
        assert_eq!(table.len(), 1, "one slot per key");
    }

    #[test]
    fn a_full_bucket_leaves_a_new_key_untracked_until_a_slot_runs_out() {
        // One bucket: every key shares it.
        let table = DeadlineTable::with_capacity(SLOTS);
        let now = Millis::coarse_now();
        let long = Duration::from_secs(60);
        for n in 1..=SLOTS as u64 {
            assert_eq!(table.claim(key(n), long, now), Claim::Claimed);
        }
        let newcomer = key(99);
        assert_eq!(table.claim(newcomer, long, now), Claim::Claimed);
        assert_eq!(
            table.claim(newcomer, long, now),
            Claim::Claimed,
            "untracked"
        );
        assert_eq!(table.len(), SLOTS);
        let later = now.after(long);
        assert_eq!(table.claim(newcomer, long, later), Claim::Claimed);
        assert!(matches!(table.claim(newcomer, long, later), Claim::Held(_)));
    }

    #[test]
    fn deadlines_hold_across_the_wrap_and_old_slots_stay_free() {
        let table = DeadlineTable::with_capacity(1024);
        let delay = Duration::from_secs(10);
        // Claimed just before the millisecond count wraps (an empty slot, 0, is not a deadline
        // just ahead of it): held across the wrap.
        let before = Millis(u32::MAX - 2_999);
        assert_eq!(table.claim(key(7), delay, before), Claim::Claimed);
        assert_eq!(
            table.claim(key(7), delay, Millis(1_000)),
            Claim::Held(ms(6_000))
        );
        // A slot claimed once and left alone for most of a wrap does not hold its key again
        // (beyond the key's delay).
        assert_eq!(table.claim(key(8), delay, Millis(0)), Claim::Claimed);
        let next_cycle = Millis(0u32.wrapping_sub(3_600_000));
        assert_eq!(table.remaining(key(8), delay, next_cycle), None);
        assert_eq!(table.claim(key(8), delay, next_cycle), Claim::Claimed);
    }

    #[test]
    fn buckets_start_on_cache_lines() {
        for capacity in [SLOTS, 1_000, 1 << 20] {
            let table = DeadlineTable::with_capacity(capacity);
            for n in [0, 3, u64::from(u32::MAX)] {
                let (_, bucket) = table.bucket(key(n));
                assert_eq!(bucket.slots.as_ptr() as usize % 64, 0);
                assert_eq!(bucket.slots.len(), SLOTS);
            }
        }
    }

    #[test]
    fn a_delay_is_capped_at_a_day() {
        let table = DeadlineTable::with_capacity(1024);
        let now = Millis::coarse_now();
        let week = Duration::from_secs(7 * 24 * 3600);
        assert_eq!(table.claim(key(5), week, now), Claim::Claimed);
        assert_eq!(table.claim(key(5), week, now), Claim::Held(MAX_DELAY));
        assert_eq!(
            table.claim(key(5), week, now.after(MAX_DELAY)),
            Claim::Claimed
        );
    }

    #[test]
    fn racing_claims_admit_one_request_per_delay() {
        // Threads claim the same few keys while other keys, each running out at once, keep
        // taking and freeing slots of the same bucket: each key is claimed exactly once.
        let table = DeadlineTable::with_capacity(SLOTS);
        let start = Millis::coarse_now();
        let now = start.after(Duration::from_secs(10));
        let delay = Duration::from_secs(60);
        let claimed = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for thread in 0..4u64 {
                let (table, claimed) = (&table, &claimed);
                scope.spawn(move || {
                    for round in 0..2_000u64 {
                        for n in 1..=4 {
                            if table.claim(key(n), delay, now) == Claim::Claimed {
                                claimed.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        let churn = key(1_000 + thread * 10_000 + round);
                        let earlier = start.after(Duration::from_millis(round));
                        table.claim(churn, Duration::from_millis(1), earlier);
                    }
                });
            }
        });
        assert_eq!(claimed.load(Ordering::Relaxed), 4);
    }
}
