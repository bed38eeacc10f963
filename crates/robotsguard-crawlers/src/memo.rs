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

use super::verdicts::{GenericVerdict, TokenScan};

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

    /// Replaces the value of an entry that is there, else inserts one.
    fn update(&mut self, owner: u64, user_agent: &[u8], memo: T) {
        let set = self.set_of(owner, user_agent);
        let existing = self.entries[set * WAYS..(set + 1) * WAYS]
            .iter_mut()
            .flatten()
            .find(|entry| entry.owner == owner && entry.user_agent == user_agent);
        match existing {
            Some(entry) => entry.memo = memo,
            None => self.insert(owner, user_agent, memo),
        }
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

/// Everything remembered of one User-Agent: the identifier's verdict, and the answer of the last
/// robots.txt-name scanner (origin) that asked. One entry, so a request costs one hash and one
/// comparison of its User-Agent, not one per stage.
#[derive(Debug, Clone, Copy)]
struct Answers {
    memo: Memo,
    /// The scanner `scan` is from; 0 when none was asked.
    scanner: u64,
    scan: TokenScan,
}

thread_local! {
    static TABLE: RefCell<Table<Answers>> = RefCell::new(Table::new());
}

/// The identifier `owner`'s verdict for `user_agent` (`compute()` when not remembered) and, when
/// `scanner` is the owner number of an origin's robots.txt-name scanner, that scanner's answer
/// (`scan()` when not remembered for it). What is computed is remembered for next time.
pub(super) fn remembered(
    owner: u64,
    user_agent: &[u8],
    scanner: Option<u64>,
    compute: impl FnOnce() -> Memo,
    scan: impl FnOnce() -> TokenScan,
) -> (Memo, TokenScan) {
    if user_agent.len() > MAX_REMEMBERED_USER_AGENT {
        let scanned = if scanner.is_some() {
            scan()
        } else {
            TokenScan::None
        };
        return (compute(), scanned);
    }
    let found = TABLE.with_borrow(|table| table.find(owner, user_agent));
    // Computed outside the borrows: nothing `compute` or `scan` call may find the table borrowed.
    match (found, scanner) {
        (Some(answers), None) => (answers.memo, TokenScan::None),
        (Some(answers), Some(scanner)) if answers.scanner == scanner => {
            (answers.memo, answers.scan)
        }
        (Some(answers), Some(scanner)) => {
            let scanned = scan();
            let updated = Answers {
                scan: scanned,
                scanner,
                ..answers
            };
            TABLE.with_borrow_mut(|table| table.update(owner, user_agent, updated));
            (answers.memo, scanned)
        }
        (None, _) => {
            let memo = compute();
            let scanned = if scanner.is_some() {
                scan()
            } else {
                TokenScan::None
            };
            let answers = Answers {
                memo,
                scanner: scanner.unwrap_or(0),
                scan: scanned,
            };
            TABLE.with_borrow_mut(|table| table.insert(owner, user_agent, answers));
            (memo, scanned)
        }
    }
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

    /// Asks with the identifier `owner` only.
    fn verdict(owner: u64, ua: &[u8], answer: Memo, calls: &mut u32) -> Memo {
        remembered(
            owner,
            ua,
            None,
            || {
                *calls += 1;
                answer
            },
            || TokenScan::None,
        )
        .0
    }

    #[test]
    fn remembers_per_owner_and_exact_bytes() {
        let mut calls = 0;
        assert_eq!(verdict(7, b"Foo/1", catalogue(3), &mut calls), catalogue(3));
        // Remembered: the second answer is the first one's, not recomputed.
        assert_eq!(verdict(7, b"Foo/1", catalogue(9), &mut calls), catalogue(3));
        // Another owner, or other bytes (case included), compute afresh.
        assert_eq!(verdict(8, b"Foo/1", catalogue(4), &mut calls), catalogue(4));
        assert_eq!(verdict(7, b"foo/1", catalogue(5), &mut calls), catalogue(5));
        assert_eq!(calls, 3);
    }

    #[test]
    fn a_scanners_answer_is_remembered_for_that_scanner_only() {
        let found = |index| {
            TokenScan::One(super::super::verdicts::FoundToken {
                index,
                start: 0,
                end: 3,
            })
        };
        let mut scans = 0;
        let mut ask = |scanner: u64, answer: TokenScan| {
            remembered(
                70,
                b"Bar/1",
                Some(scanner),
                || catalogue(1),
                || {
                    scans += 1;
                    answer
                },
            )
        };
        assert_eq!(ask(100, found(1)), (catalogue(1), found(1)));
        assert_eq!(ask(100, found(2)), (catalogue(1), found(1)), "remembered");
        // Another origin's scanner asks afresh, and the identifier's verdict is kept.
        assert_eq!(ask(101, found(3)), (catalogue(1), found(3)));
        assert_eq!(ask(101, found(4)), (catalogue(1), found(3)));
        assert_eq!(scans, 2);
    }

    #[test]
    fn long_user_agents_are_never_remembered() {
        let long = vec![b'a'; MAX_REMEMBERED_USER_AGENT + 1];
        let mut calls = 0;
        for answer in [catalogue(1), catalogue(2)] {
            assert_eq!(verdict(1, &long, answer, &mut calls), answer);
        }
        assert_eq!(calls, 2);
    }

    #[test]
    fn stays_bounded_and_correct_under_many_user_agents() {
        // Far more distinct UAs than entries: every answer stays the right one, and the table
        // never grows past its fixed size.
        let mut calls = 0;
        for round in 0..3 {
            for i in 0..(SETS * WAYS * 4) {
                let ua = format!("Agent{i}/1.0");
                let got = verdict(42, ua.as_bytes(), catalogue(i), &mut calls);
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
