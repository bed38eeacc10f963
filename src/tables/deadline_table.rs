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
//! general map with an expiry heap, as `src/tables/expiring.rs`, costs more per check.) The table is
//! allocated zeroed, which the system allocator serves with pages it fills in as they are
//! first touched.
//!
//! A slot packs 32 bits of the key's 64-bit digest (the tag: the low bits chose the bucket) and
//! its deadline on the [`Millis`] clock, which wraps every 49 days. Two keys with one tag in one
//! bucket share a budget: about one check in 2^29 meets another key's slot of its tag while the
//! table is full, and the seed is random, so this cannot be aimed at. A slot holds its key while
//! its deadline is ahead of now by no more than the key's delay (with a second to spare, because
//! two requests read the clock at slightly different moments), and blocks other keys while it
//! is ahead by no more than [`MAX_DELAY`]. So a slot left untouched for 49 days comes back for
//! at most one delay for its own key, and for at most a day as an occupied slot for others
//! (a new key meeting a bucket full of such slots is admitted untracked).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::tables::clock::Millis;

/// The longest deadline a key can be given, from now.
pub const MAX_DELAY: Duration = Duration::from_secs(24 * 60 * 60);

const SLOTS: usize = 8;
/// Locks for putting new keys in, shared by the buckets (a lock is held for eight loads and a
/// compare-and-swap).
const LOCKS: usize = 64;
/// How much later than now plus its delay a key's own slot may end and still hold it: requests
/// read the coarse clock a tick or a preemption apart, and the later one must not let the earlier
/// one claim the key again.
const SKEW: u32 = 1_000;
/// How close to its deadline a key's own slot counts as run out (at most half its delay):
/// requests read a coarse clock (one kernel tick, up to 10 ms, behind), so a client that waited
/// exactly its delay could otherwise be refused for the last tick.
const TICK: u32 = 10;
/// The most keys a table takes (the bucket index is computed in 64 bits).
const MAX_CAPACITY: usize = u32::MAX as usize;

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
                    Some(ahead)
                        if ahead > TICK.min(delay / 2) && ahead <= delay.saturating_add(SKEW) =>
                    {
                        Found::Held(ahead)
                    }
                    _ => Found::RunOut(index, slot),
                };
            }
            if free.is_none() && ahead.is_none() {
                free = Some((index, slot));
            }
        }
        free.map_or(Found::Full, |(index, slot)| Found::Free(index, slot))
    }

    /// How many slots hold keys at `now`.
    fn taken(&self, now: u32) -> usize {
        self.slots
            .iter()
            .filter(|slot| ahead(slot.load(Ordering::Relaxed), now).is_some())
            .count()
    }

    /// Replaces the slot's `old` value; false when it changed meanwhile.
    fn replace(&self, index: usize, old: u64, new: u64) -> bool {
        self.slots[index]
            .compare_exchange(old, new, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

/// How many times a claim looks again when a slot changed under it, without the lock and then
/// with it. Each retry means another claim in the bucket succeeded, so the last one is reached
/// only under a storm of claims in one bucket, and then the request is admitted untracked.
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
    /// The buckets' slots, from `first` on, with a bucket's worth to spare: a block of atomics
    /// is aligned to 8 bytes only, and the buckets start at its first cache-line boundary.
    slots: Box<[AtomicU64]>,
    first: usize,
    buckets: usize,
    locks: Box<[Mutex<()>]>,
    /// The longest delay a key was put in with, in milliseconds: how long after this table
    /// stops taking new keys its slots still matter.
    longest: AtomicU32,
}

/// What a claim did, besides its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Claimed {
    /// The answer.
    pub(crate) claim: Claim,
    /// The key's bucket is full or took its last free slot (see [`DeadlineTable::half_full`]
    /// for whether the table is).
    pub(crate) full: bool,
}

impl DeadlineTable {
    /// A table of at most `capacity` keys (rounded down to whole buckets, at least one; below
    /// 2^32).
    pub(crate) fn with_capacity(capacity: usize) -> DeadlineTable {
        let buckets = DeadlineTable::capacity_for(capacity) / SLOTS;
        let slots: Box<[AtomicU64]> = bytemuck::zeroed_slice_box((buckets + 1) * SLOTS);
        let misalignment = slots.as_ptr() as usize % 64;
        let first = (64 - misalignment) % 64 / std::mem::size_of::<AtomicU64>();
        DeadlineTable {
            slots,
            first,
            buckets,
            locks: (0..LOCKS).map(|_| Mutex::new(())).collect(),
            longest: AtomicU32::new(0),
        }
    }

    /// How many keys it can hold.
    pub(crate) fn capacity(&self) -> usize {
        self.buckets * SLOTS
    }

    /// Raises the longest delay a key was put in with to `delay`.
    fn lengthen(&self, delay: u32) {
        if self.longest.load(Ordering::Relaxed) < delay {
            self.longest.fetch_max(delay, Ordering::Relaxed);
        }
    }

    /// Whether at least half the slots of a sample of buckets spread over the table, after
    /// `key`'s, hold keys at `now` (a full bucket alone says little: with keys placed at
    /// random, some bucket fills while most are nearly empty). Sixteen cache lines: for when a
    /// bucket is full and the table could grow.
    pub(crate) fn half_full(&self, key: u64, now: Millis) -> bool {
        const SAMPLE: usize = 16;
        let (index, now) = (self.bucket(key).0, now.0);
        let stride = (self.buckets / SAMPLE).max(1);
        let taken: usize = (1..=SAMPLE)
            .map(|step| {
                self.bucket_at((index + step * stride) % self.buckets)
                    .taken(now)
            })
            .sum();
        taken * 2 >= SAMPLE * SLOTS
    }

    /// How many keys a table made for `capacity` can hold.
    pub(crate) fn capacity_for(capacity: usize) -> usize {
        (capacity.min(MAX_CAPACITY) / SLOTS).max(1) * SLOTS
    }

    /// The longest delay a key was put in with.
    pub(crate) fn longest_delay(&self) -> Duration {
        Duration::from_millis(u64::from(self.longest.load(Ordering::Relaxed)))
    }

    /// If `key` does not hold at `now`, makes it hold for `delay` (at most [`MAX_DELAY`]);
    /// otherwise says for how much longer it holds. A key with no slot here that holds in
    /// `previous` (the smaller table this one replaced) holds. Two requests cannot both claim
    /// one key (unless slots keep changing under every retry; see [`RETRIES`]). A key whose
    /// bucket is full of keys that hold is left untracked and claimed.
    pub(crate) fn claim(
        &self,
        key: u64,
        delay: Duration,
        now: Millis,
        previous: Option<&DeadlineTable>,
    ) -> Claimed {
        let delay = delay_millis(delay);
        let now = now.0;
        let tag = tag(key);
        let claimed = u64::from(tag) << 32 | u64::from(now.wrapping_add(delay));
        let (index, bucket) = self.bucket(key);
        let answer = |claim, full| Claimed { claim, full };
        for _ in 0..RETRIES {
            match bucket.find(tag, delay, now) {
                Found::Held(ahead) => return answer(held(ahead), false),
                // Its only slot: whoever swaps it first has claimed the key.
                Found::RunOut(index, old) => {
                    if bucket.replace(index, old, claimed) {
                        self.lengthen(delay);
                        return answer(Claim::Claimed, false);
                    }
                }
                found @ (Found::Free(..) | Found::Full) => {
                    // A key with no slot here may hold in the table this one replaced.
                    if let Some(ahead) = previous.and_then(|p| p.holds(key, delay, now)) {
                        return answer(held(ahead), false);
                    }
                    if let Found::Full = found {
                        return answer(Claim::Claimed, true);
                    }
                    break;
                }
            }
        }
        // A new slot, under the lock: another request for the key may be putting one in too.
        let _locked = self.locks[index % LOCKS].lock();
        for _ in 0..RETRIES {
            match bucket.find(tag, delay, now) {
                Found::Held(ahead) => return answer(held(ahead), false),
                Found::Full => return answer(Claim::Claimed, true),
                Found::RunOut(index, old) | Found::Free(index, old) => {
                    if bucket.replace(index, old, claimed) {
                        self.lengthen(delay);
                        // The last slot of the bucket taken.
                        return answer(Claim::Claimed, index + 1 == SLOTS);
                    }
                }
            }
        }
        answer(Claim::Claimed, false)
    }

    /// Asks the CPU to start loading `key`'s bucket into its caches, without waiting for it.
    pub(crate) fn prefetch(&self, key: u64) {
        let slots = self.bucket(key).1.slots;
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: a prefetch is a hint: it reads nothing the program sees and cannot fault,
            // and SSE, which it needs, is part of every x86_64 CPU. std has no stable prefetch.
            #[allow(unsafe_code)]
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(slots.as_ptr().cast())
            };
        }
        // Elsewhere nothing: a plain load instead would stall an in-order CPU for the miss.
        #[cfg(not(target_arch = "x86_64"))]
        let _ = slots;
    }

    /// For how much longer `key` holds at `now`, if it was claimed with a delay of at most
    /// `delay`.
    pub(crate) fn remaining(&self, key: u64, delay: Duration, now: Millis) -> Option<Duration> {
        self.holds(key, delay_millis(delay), now.0)
            .map(|ahead| Duration::from_millis(u64::from(ahead)))
    }

    /// For how many more milliseconds `key`, under a delay of `delay` milliseconds, holds.
    fn holds(&self, key: u64, delay: u32, now: u32) -> Option<u32> {
        match self.bucket(key).1.find(tag(key), delay, now) {
            Found::Held(ahead) => Some(ahead),
            _ => None,
        }
    }

    /// Slots in use now: keys that hold, and slots left untouched for a wrap of the clock that
    /// look as if they did (an O(size) count, for diagnostics and tests).
    pub(crate) fn len(&self) -> usize {
        let now = Millis::coarse_now().0;
        (0..self.buckets)
            .map(|index| self.bucket_at(index).taken(now))
            .sum()
    }

    /// The bucket of `key`, and its index.
    fn bucket(&self, key: u64) -> (usize, Bucket<'_>) {
        // The low half of the digest picks the bucket (scaled, not taken modulo, so any number
        // of buckets is uniform); the high half is the tag kept in the slot.
        let index = (((key & 0xffff_ffff) * self.buckets as u64) >> 32) as usize;
        (index, self.bucket_at(index))
    }

    fn bucket_at(&self, index: usize) -> Bucket<'_> {
        let start = self.first + index * SLOTS;
        Bucket {
            slots: &self.slots[start..start + SLOTS],
        }
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

    fn claim(table: &DeadlineTable, key: u64, delay: Duration, now: Millis) -> Claim {
        table.claim(key, delay, now, None).claim
    }

    fn ms(n: u32) -> Duration {
        Duration::from_millis(u64::from(n))
    }

    #[test]
    fn a_key_holds_for_its_delay_and_a_refusal_does_not_move_it() {
        let table = DeadlineTable::with_capacity(1024);
        let start = Millis::coarse_now();
        let delay = Duration::from_secs(30);
        assert_eq!(claim(&table, key(42), delay, start), Claim::Claimed);
        let later = start.after(ms(500));
        assert_eq!(
            claim(&table, key(42), delay, later),
            Claim::Held(ms(29_500))
        );
        assert_eq!(table.remaining(key(42), delay, later), Some(ms(29_500)));
        assert_eq!(table.remaining(key(43), delay, later), None);
        assert_eq!(
            claim(&table, key(42), delay, start.after(delay)),
            Claim::Claimed
        );
        assert_eq!(table.len(), 1, "one slot per key");
    }

    #[test]
    fn a_request_that_read_the_clock_a_little_earlier_does_not_claim_again() {
        let table = DeadlineTable::with_capacity(1024);
        let delay = Duration::from_secs(10);
        let now = Millis::coarse_now();
        assert_eq!(
            claim(&table, key(9), delay, now.after(ms(4))),
            Claim::Claimed
        );
        assert_eq!(claim(&table, key(9), delay, now), Claim::Held(ms(10_004)));
        // The deadline did not move earlier.
        assert_eq!(
            claim(&table, key(9), delay, now.after(ms(9_990))),
            Claim::Held(ms(14))
        );
        // Within a tick of it, the key has run out: the coarse clock may lag that much.
        assert_eq!(
            claim(&table, key(9), delay, now.after(ms(9_995))),
            Claim::Claimed
        );
    }

    #[test]
    fn a_full_bucket_leaves_a_new_key_untracked_until_a_slot_runs_out() {
        // One bucket: every key shares it.
        let table = DeadlineTable::with_capacity(SLOTS);
        let now = Millis::coarse_now();
        let long = Duration::from_secs(60);
        for n in 1..=SLOTS as u64 {
            assert_eq!(claim(&table, key(n), long, now), Claim::Claimed);
        }
        let newcomer = key(99);
        assert_eq!(claim(&table, newcomer, long, now), Claim::Claimed);
        assert_eq!(
            claim(&table, newcomer, long, now),
            Claim::Claimed,
            "untracked"
        );
        assert_eq!(table.len(), SLOTS);
        let later = now.after(long);
        assert_eq!(claim(&table, newcomer, long, later), Claim::Claimed);
        assert!(matches!(
            claim(&table, newcomer, long, later),
            Claim::Held(_)
        ));
    }

    #[test]
    fn deadlines_hold_across_the_wrap_and_old_slots_stay_free() {
        let table = DeadlineTable::with_capacity(1024);
        let delay = Duration::from_secs(10);
        // Claimed just before the millisecond count wraps (an empty slot, 0, is not a deadline
        // just ahead of it): held across the wrap.
        let before = Millis(u32::MAX - 2_999);
        assert_eq!(claim(&table, key(7), delay, before), Claim::Claimed);
        assert_eq!(
            claim(&table, key(7), delay, Millis(1_000)),
            Claim::Held(ms(6_000))
        );
        // A slot claimed once and left alone for most of a wrap does not hold its key again
        // (beyond the key's delay).
        assert_eq!(claim(&table, key(8), delay, Millis(0)), Claim::Claimed);
        let next_cycle = Millis(0u32.wrapping_sub(3_600_000));
        assert_eq!(table.remaining(key(8), delay, next_cycle), None);
        assert_eq!(claim(&table, key(8), delay, next_cycle), Claim::Claimed);
    }

    #[test]
    fn a_key_that_holds_in_the_previous_table_holds_until_it_runs_out() {
        let small = DeadlineTable::with_capacity(64);
        let large = DeadlineTable::with_capacity(1024);
        let now = Millis::coarse_now();
        let delay = Duration::from_secs(10);
        assert_eq!(claim(&small, key(1), delay, now), Claim::Claimed);
        assert_eq!(small.longest_delay(), delay);
        let later = now.after(ms(1_000));
        let claimed = large.claim(key(1), delay, later, Some(&small));
        assert_eq!(claimed.claim, Claim::Held(ms(9_000)));
        assert_eq!(large.len(), 0, "nothing is put in while the key holds");
        let after = now.after(delay);
        assert_eq!(
            large.claim(key(1), delay, after, Some(&small)).claim,
            Claim::Claimed
        );
        assert_eq!(
            large.claim(key(1), delay, after, Some(&small)).claim,
            Claim::Held(delay)
        );
        assert_eq!(large.len(), 1);
    }

    #[test]
    fn a_bucket_says_when_it_is_full() {
        let table = DeadlineTable::with_capacity(SLOTS);
        let now = Millis::coarse_now();
        let long = Duration::from_secs(60);
        for n in 1..SLOTS as u64 {
            assert!(!table.claim(key(n), long, now, None).full, "{n}");
        }
        let last = table.claim(key(SLOTS as u64), long, now, None);
        assert_eq!((last.claim, last.full), (Claim::Claimed, true));
        let untracked = table.claim(key(99), long, now, None);
        assert_eq!((untracked.claim, untracked.full), (Claim::Claimed, true));
        assert_eq!(table.capacity(), SLOTS);
        assert!(table.half_full(key(1), now));

        // In a table of 64 buckets, one full bucket is not the table half full.
        let table = DeadlineTable::with_capacity(64 * SLOTS);
        for n in 1..=SLOTS as u64 {
            // Small keys all fall in the first bucket.
            table.claim(key(n), long, now, None);
        }
        assert!(table.claim(key(99), long, now, None).full);
        assert!(!table.half_full(key(99), now));
        let spread = (1..10_000u64).map(|n| n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        for digest in spread.take(64 * SLOTS * 3 / 4) {
            table.claim(digest, long, now, None);
        }
        assert!(table.half_full(key(99), now));
        assert!(!table.half_full(key(99), now.after(long)), "run out");
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
        assert_eq!(claim(&table, key(5), week, now), Claim::Claimed);
        assert_eq!(claim(&table, key(5), week, now), Claim::Held(MAX_DELAY));
        assert_eq!(
            claim(&table, key(5), week, now.after(MAX_DELAY)),
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
                            if claim(table, key(n), delay, now) == Claim::Claimed {
                                claimed.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        let churn = key(1_000 + thread * 10_000 + round);
                        let earlier = start.after(Duration::from_millis(round));
                        claim(table, churn, Duration::from_millis(1), earlier);
                    }
                });
            }
        });
        assert_eq!(claimed.load(Ordering::Relaxed), 4);
    }
}
