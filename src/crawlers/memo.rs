//! A small per-thread memory of what the identification stages made of recent User-Agents: the
//! catalogue and the generic rules (which depend on the User-Agent and the identifier), and an
//! origin's robots.txt names (which depend on the User-Agent and that origin's scanner).
//!
//! These stages are the bulk of a browser request's decision: automaton scans of a ~120-byte
//! string, which in a busy proxy run with cold caches and cost about as much as the rest of
//! deciding.
//! Real traffic repeats a few hundred User-Agents over and over, so each worker thread keeps
//! the verdicts of the ones it saw last. A User-Agent that is not remembered costs one hash
//! and one copy more than before; one that is costs a hash and a comparison.
//!
//! The memory is exact: an entry answers only for the identical User-Agent bytes and the owner
//! (identifier or robots.txt-name scanner) that computed it, so a reload that changes the
//! catalogue or a robots.txt never sees old answers. Owners are numbered from one counter
//! ([`next_owner`]), so an identifier's and a scanner's entries never answer for each other.
//! It is bounded: [`SETS`] × [`WAYS`] entries per thread, each at most
//! [`MAX_REMEMBERED_USER_AGENT`] bytes; longer User-Agents are never remembered.

use std::cell::RefCell;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

use super::identify::GenericVerdict;
use super::robots_tokens::TokenScan;

/// What the stages that depend only on the User-Agent made of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Memo {
    /// The User-Agent names exactly one catalogue entry (this index) at `start..end`;
    /// `library_too`: it also names an HTTP library, which a crawler built on one does.
    Catalogue {
        index: usize,
        start: usize,
        end: usize,
        library_too: bool,
    },
    /// It names several catalogue entries: list them again (a rare, mostly hostile case).
    SeveralInCatalogue,
    /// No catalogue entry matched; this is what the generic rules say (`NotCrawler` when the
    /// identifier runs without them).
    Outside(GenericVerdict),
}

/// Source of owner numbers; 0 is never handed out.
static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// A number no other owner of remembered verdicts has; clones of an owner share it, as they give
/// the same verdicts.
pub(super) fn next_owner() -> u64 {
    NEXT_OWNER.fetch_add(1, Ordering::Relaxed)
}

/// Sets of the per-thread table (a power of two).
const SETS: usize = 256;
/// Entries per set: two, so that two busy User-Agents hashing to one set do not evict each
/// other on every request.
const WAYS: usize = 2;
/// Longer User-Agents are computed every time. Real ones are well under this.
pub const MAX_REMEMBERED_USER_AGENT: usize = 512;

struct Entry<T> {
    owner: u64,
    user_agent: Vec<u8>,
    memo: T,
}

struct Table<T> {
    hasher: foldhash::fast::RandomState,
    /// `SETS * WAYS` entries; set `s` is `entries[s * WAYS..(s + 1) * WAYS]`.
    entries: Vec<Option<Entry<T>>>,
    /// Per set, the way the next insertion replaces (the older of the two).
    next_victim: Vec<u8>,
}

impl<T: Copy> Table<T> {
    fn new() -> Table<T> {
        Table {
            hasher: foldhash::fast::RandomState::default(),
            entries: (0..SETS * WAYS).map(|_| None).collect(),
            next_victim: vec![0; SETS],
        }
    }

    fn set_of(&self, owner: u64, user_agent: &[u8]) -> usize {
        // The owner is hashed too, so one User-Agent's entries for the identifier and for an
        // origin's scanner land in different sets instead of filling one set's two ways.
        // The table length is a power of two, so the mask keeps the low bits of the hash.
        (self.hasher.hash_one((owner, user_agent)) as usize) & (SETS - 1)
    }

    fn find(&self, owner: u64, user_agent: &[u8]) -> Option<T> {
        let set = self.set_of(owner, user_agent);
        self.entries[set * WAYS..(set + 1) * WAYS]
            .iter()
            .flatten()
            .find(|entry| entry.owner == owner && entry.user_agent == user_agent)
            .map(|entry| entry.memo)
    }

    fn insert(&mut self, owner: u64, user_agent: &[u8], memo: T) {
        let set = self.set_of(owner, user_agent);
        let ways = &mut self.entries[set * WAYS..(set + 1) * WAYS];
        let way = match ways.iter().position(Option::is_none) {
            Some(empty) => empty,
            None => {
                let victim = usize::from(self.next_victim[set]) % WAYS;
                self.next_victim[set] = ((victim + 1) % WAYS) as u8;
                victim
            }
        };
        match &mut ways[way] {
            // Reuse the evicted entry's buffer: no allocation once the table is warm.
            Some(entry) => {
                entry.owner = owner;
                entry.user_agent.clear();
                entry.user_agent.extend_from_slice(user_agent);
                entry.memo = memo;
            }
            slot @ None => {
                *slot = Some(Entry {
                    owner,
                    user_agent: user_agent.to_vec(),
                    memo,
                });
            }
        }
    }
}

thread_local! {
    /// The identifiers' verdicts (catalogue and generic rules).
    static TABLE: RefCell<Table<Memo>> = RefCell::new(Table::new());
    /// The robots.txt-name scanners' answers.
    static ROBOTS_TOKENS: RefCell<Table<TokenScan>> = RefCell::new(Table::new());
}

/// The remembered verdict for `user_agent` from the identifier `owner`, or `compute()`'s, which
/// is remembered for next time.
pub(super) fn remembered(owner: u64, user_agent: &[u8], compute: impl FnOnce() -> Memo) -> Memo {
    remembered_in(&TABLE, owner, user_agent, compute)
}

/// The remembered answer of the robots.txt-name scanner `owner` for `user_agent`, or
/// `compute()`'s, which is remembered for next time.
pub(super) fn remembered_robots_token(
    owner: u64,
    user_agent: &[u8],
    compute: impl FnOnce() -> TokenScan,
) -> TokenScan {
    remembered_in(&ROBOTS_TOKENS, owner, user_agent, compute)
}

fn remembered_in<T: Copy + 'static>(
    table: &'static std::thread::LocalKey<RefCell<Table<T>>>,
    owner: u64,
    user_agent: &[u8],
    compute: impl FnOnce() -> T,
) -> T {
    if user_agent.len() > MAX_REMEMBERED_USER_AGENT {
        return compute();
    }
    if let Some(memo) = table.with_borrow(|table| table.find(owner, user_agent)) {
        return memo;
    }
    // Computed outside the borrow: nothing `compute` calls may find the table borrowed.
    let memo = compute();
    table.with_borrow_mut(|table| table.insert(owner, user_agent, memo));
    memo
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalogue(index: usize) -> Memo {
        Memo::Catalogue {
            index,
            start: 0,
            end: 1,
            library_too: false,
        }
    }

    #[test]
    fn remembers_per_owner_and_exact_bytes() {
        let mut calls = 0;
        let mut ask = |owner: u64, ua: &[u8], answer: Memo| {
            remembered(owner, ua, || {
                calls += 1;
                answer
            })
        };
        assert_eq!(ask(7, b"Foo/1", catalogue(3)), catalogue(3));
        // Remembered: the second answer is the first one's, not recomputed.
        assert_eq!(ask(7, b"Foo/1", catalogue(9)), catalogue(3));
        // Another owner, or other bytes (case included), compute afresh.
        assert_eq!(ask(8, b"Foo/1", catalogue(4)), catalogue(4));
        assert_eq!(ask(7, b"foo/1", catalogue(5)), catalogue(5));
        assert_eq!(calls, 3);
    }

    #[test]
    fn long_user_agents_are_never_remembered() {
        let long = vec![b'a'; MAX_REMEMBERED_USER_AGENT + 1];
        let mut calls = 0;
        for answer in [catalogue(1), catalogue(2)] {
            let got = remembered(1, &long, || {
                calls += 1;
                answer
            });
            assert_eq!(got, answer);
        }
        assert_eq!(calls, 2);
    }

    #[test]
    fn stays_bounded_and_correct_under_many_user_agents() {
        // Far more distinct UAs than entries: every answer stays the right one, and the table
        // never grows past its fixed size.
        for round in 0..3 {
            for i in 0..(SETS * WAYS * 4) {
                let ua = format!("Agent{i}/1.0");
                let got = remembered(42, ua.as_bytes(), || catalogue(i));
                assert_eq!(got, catalogue(i), "round {round}, UA {ua}");
            }
        }
        TABLE.with_borrow(|table| {
            assert_eq!(table.entries.len(), SETS * WAYS);
            assert!(table
                .entries
                .iter()
                .flatten()
                .all(|e| e.user_agent.len() <= MAX_REMEMBERED_USER_AGENT));
        });
    }
}
