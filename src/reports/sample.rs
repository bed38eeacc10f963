//! The recent crawler traffic of each origin, kept to be judged again against a candidate
//! robots.txt or policy (`POST /robots/preview`): per (crawler, canonical path), the requests
//! over `reports.window` in time slices, how many were verified, and the outcome the last one
//! got. Bounded: `preview.max_paths_per_origin` pairs per origin (the least-requested are
//! evicted first, their requests then counted as not replayable), [`MAX_CRAWLERS`] crawlers
//! per origin, paths cut at [`MAX_PATH_BYTES`]. Browsers are not kept.
//!
//! Recording a request for a pair already kept allocates nothing: the crawler and the path are
//! looked up by reference.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::enforce::{Decision, Outcome, VerificationResult};

/// Time slices of the window: a slice's counts leave the sample together.
pub const SLICES: usize = 6;
/// Crawlers kept per origin (the catalogue is a few hundred; made-up names beyond this count
/// as not replayable).
pub const MAX_CRAWLERS: usize = 2048;
/// Bytes of a canonical path kept; a longer path is counted as not replayable (cut, it would
/// be judged as another path).
pub const MAX_PATH_BYTES: usize = 2048;
/// Bytes of a crawler's User-Agent kept to replay its requests with.
pub const MAX_USER_AGENT_BYTES: usize = 512;

/// Counts of one (crawler, path) pair.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Requests per time slice (ring, indexed by slice number modulo [`SLICES`]).
    requests: [u32; SLICES],
    /// Of them, those whose crawler was verified.
    verified: [u32; SLICES],
    /// The outcome the last request got.
    outcome: Outcome,
}

impl Entry {
    fn total(&self) -> u64 {
        self.requests.iter().map(|&n| u64::from(n)).sum()
    }
}

/// One crawler's paths within an origin's sample.
#[derive(Debug)]
struct CrawlerPaths {
    /// The User-Agent of its last request, cut at [`MAX_USER_AGENT_BYTES`].
    user_agent: Arc<[u8]>,
    paths: HashMap<Box<[u8]>, Entry, foldhash::fast::RandomState>,
}

/// One origin's sample.
#[derive(Debug, Default)]
struct OriginSample {
    /// The slice number (Unix seconds / slice width) the newest counts are in.
    slice: u64,
    crawlers: HashMap<Arc<str>, CrawlerPaths, foldhash::fast::RandomState>,
    /// (crawler, path) pairs kept.
    pairs: usize,
    /// Requests counted but not kept (evicted, too long, too many crawlers), per slice.
    not_replayable: [u64; SLICES],
}

impl OriginSample {
    /// Moves the newest slice to `slice`: the counts of slices that fell out of the window are
    /// dropped, and pairs left without requests with them.
    fn advance(&mut self, slice: u64) {
        if slice <= self.slice {
            return;
        }
        let steps = (slice - self.slice).min(SLICES as u64);
        for step in 1..=steps {
            let index = ((self.slice + step) % SLICES as u64) as usize;
            self.not_replayable[index] = 0;
            for paths in self.crawlers.values_mut() {
                for entry in paths.paths.values_mut() {
                    entry.requests[index] = 0;
                    entry.verified[index] = 0;
                }
            }
        }
        self.slice = slice;
        let mut removed = 0;
        for paths in self.crawlers.values_mut() {
            let before = paths.paths.len();
            paths.paths.retain(|_, entry| entry.total() > 0);
            removed += before - paths.paths.len();
        }
        self.crawlers.retain(|_, paths| !paths.paths.is_empty());
        self.pairs -= removed;
    }

    /// Evicts the least-requested pairs until at most nine tenths of `max_pairs` are kept (in
    /// one pass, so that eviction costs a constant per request on average), counting their
    /// requests as not replayable.
    fn evict(&mut self, max_pairs: usize) {
        let keep = max_pairs - max_pairs / 10;
        let Some(excess) = self.pairs.checked_sub(keep).filter(|&n| n > 0) else {
            return;
        };
        let mut totals: Vec<u64> = self
            .crawlers
            .values()
            .flat_map(|paths| paths.paths.values().map(Entry::total))
            .collect();
        let (_, &mut threshold, _) = totals.select_nth_unstable(excess - 1);
        // Below the threshold all go; at it, only as many as still needed.
        let mut at_threshold = excess - totals.iter().filter(|&&total| total < threshold).count();
        let mut evicted = [0u64; SLICES];
        let mut removed = 0;
        for paths in self.crawlers.values_mut() {
            paths.paths.retain(|_, entry| {
                let total = entry.total();
                let goes = total < threshold || (total == threshold && at_threshold > 0);
                if goes {
                    if total == threshold {
                        at_threshold -= 1;
                    }
                    for (sum, &n) in evicted.iter_mut().zip(&entry.requests) {
                        *sum += u64::from(n);
                    }
                    removed += 1;
                }
                !goes
            });
        }
        self.crawlers.retain(|_, paths| !paths.paths.is_empty());
        self.pairs -= removed;
        for (sum, n) in self.not_replayable.iter_mut().zip(evicted) {
            *sum += n;
        }
    }
}

/// One sampled (crawler, path) pair, as a preview replays it.
#[derive(Debug, Clone)]
pub struct SampledPath {
    /// The crawler's name, as the decision named it.
    pub crawler: Arc<str>,
    /// The User-Agent its requests are replayed with (its last request's).
    pub user_agent: Arc<[u8]>,
    /// The canonical path (and query).
    pub path: Box<[u8]>,
    /// Requests within the window.
    pub requests: u64,
    /// Of them, verified.
    pub verified: u64,
    /// The outcome the last one got.
    pub outcome: Outcome,
}

/// What an origin's sample holds now.
#[derive(Debug, Clone, Default)]
pub struct SampledTraffic {
    /// The pairs, in no particular order.
    pub paths: Vec<SampledPath>,
    /// Requests within the window that the sample could not keep.
    pub not_replayable: u64,
}

/// Every origin's sample.
#[derive(Debug)]
pub struct Sample {
    max_pairs: AtomicUsize,
    slice_seconds: u64,
    /// Keyed by configured origin names only, so the fast hash.
    origins: RwLock<HashMap<Arc<str>, Arc<Mutex<OriginSample>>, foldhash::fast::RandomState>>,
}

impl Sample {
    /// An empty sample over `window` seconds keeping `max_pairs` pairs per origin.
    pub fn new(window_seconds: u64, max_pairs: usize) -> Sample {
        Sample {
            max_pairs: AtomicUsize::new(max_pairs.max(1)),
            slice_seconds: (window_seconds / SLICES as u64).max(1),
            origins: RwLock::new(HashMap::default()),
        }
    }

    /// Keeps at most `max_pairs` pairs per origin from now on (`preview.max_paths_per_origin`).
    pub fn set_max_pairs(&self, max_pairs: usize) {
        self.max_pairs.store(max_pairs.max(1), Ordering::Relaxed);
    }

    /// How long the sample reaches back: [`SLICES`] slices.
    pub fn window_seconds(&self) -> u64 {
        self.slice_seconds * SLICES as u64
    }

    fn origin(&self, name: &str) -> Arc<Mutex<OriginSample>> {
        if let Some(sample) = self.origins.read().get(name) {
            return sample.clone();
        }
        self.origins
            .write()
            .entry(Arc::from(name))
            .or_default()
            .clone()
    }

    /// Counts one request `decision` judged, on `target` (path and query as sent) from
    /// `user_agent`, at `now` (Unix seconds). A request that names no crawler (a browser), and
    /// one whose crawler a signal found behind a browser's User-Agent, is not kept.
    pub fn record(&self, decision: &Decision, target: &[u8], user_agent: &[u8], now: u64) {
        let Some(crawler) = &decision.crawler else {
            return;
        };
        if matches!(
            decision.outcome,
            Outcome::Disguised | Outcome::WouldDisguised
        ) {
            return;
        }
        let path = match &decision.rewritten_target {
            Some(target) => std::borrow::Cow::Borrowed(&target[..]),
            None => crate::robots::canonicalize(target),
        };
        let verified = decision.verification_result() == Some(VerificationResult::Verified);
        let slice = now / self.slice_seconds;
        let index = (slice % SLICES as u64) as usize;
        let max_pairs = self.max_pairs.load(Ordering::Relaxed);
        let sample = self.origin(decision.origin.name());
        let mut sample = sample.lock();
        sample.advance(slice);
        if path.len() > MAX_PATH_BYTES {
            sample.not_replayable[index] += 1;
            return;
        }
        let name = crawler.name();
        if !sample.crawlers.contains_key(name) {
            if sample.crawlers.len() >= MAX_CRAWLERS {
                sample.not_replayable[index] += 1;
                return;
            }
            sample.crawlers.insert(
                Arc::from(name),
                CrawlerPaths {
                    user_agent: Arc::from(
                        &user_agent[..user_agent.len().min(MAX_USER_AGENT_BYTES)],
                    ),
                    paths: HashMap::default(),
                },
            );
        }
        let OriginSample {
            crawlers, pairs, ..
        } = &mut *sample;
        let Some(paths) = crawlers.get_mut(name) else {
            return;
        };
        // The latest User-Agent is replayed; replaced only when it changed.
        if *paths.user_agent != user_agent[..user_agent.len().min(MAX_USER_AGENT_BYTES)] {
            paths.user_agent = Arc::from(&user_agent[..user_agent.len().min(MAX_USER_AGENT_BYTES)]);
        }
        let entry = match paths.paths.get_mut(&path[..]) {
            Some(entry) => entry,
            None => {
                *pairs += 1;
                paths.paths.entry(Box::from(&path[..])).or_insert(Entry {
                    requests: [0; SLICES],
                    verified: [0; SLICES],
                    outcome: decision.outcome,
                })
            }
        };
        entry.requests[index] = entry.requests[index].saturating_add(1);
        entry.verified[index] = entry.verified[index].saturating_add(u32::from(verified));
        entry.outcome = decision.outcome;
        if sample.pairs > max_pairs {
            sample.evict(max_pairs);
        }
    }

    /// What `origin`'s sample holds at `now` (Unix seconds).
    pub fn traffic(&self, origin: &str, now: u64) -> SampledTraffic {
        let Some(sample) = self.origins.read().get(origin).cloned() else {
            return SampledTraffic::default();
        };
        let mut sample = sample.lock();
        sample.advance(now / self.slice_seconds);
        let paths = sample
            .crawlers
            .iter()
            .flat_map(|(crawler, paths)| {
                paths.paths.iter().map(|(path, entry)| SampledPath {
                    crawler: crawler.clone(),
                    user_agent: paths.user_agent.clone(),
                    path: path.clone(),
                    requests: entry.total(),
                    verified: entry.verified.iter().map(|&n| u64::from(n)).sum(),
                    outcome: entry.outcome,
                })
            })
            .collect();
        SampledTraffic {
            paths,
            not_replayable: sample.not_replayable.iter().sum(),
        }
    }

    /// Pairs kept for `origin` now.
    pub fn pairs(&self, origin: &str) -> usize {
        self.origins
            .read()
            .get(origin)
            .map_or(0, |sample| sample.lock().pairs)
    }
}
