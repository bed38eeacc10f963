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
    /// Changed since it was last published to the shared store.
    dirty: bool,
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

/// A (crawler, path) pair, as the merge finds it.
type PairKey = (Arc<str>, Box<[u8]>);

/// One crawler's pairs as a replica publishes them: `[path, requests, verified, outcome]`.
#[derive(serde::Serialize, serde::Deserialize)]
struct PublishedCrawler {
    name: String,
    /// Lossy UTF-8 of the (bounded) User-Agent: the store holds text.
    user_agent: String,
    paths: Vec<(String, u64, u64, String)>,
}

/// A replica's sample of one origin in the shared store.
#[derive(serde::Serialize, serde::Deserialize)]
struct PublishedSample {
    not_replayable: u64,
    crawlers: Vec<PublishedCrawler>,
}

impl SampledTraffic {
    /// The text a replica writes to the shared store. Paths are canonical (percent-encoded,
    /// ASCII), so the lossy conversion keeps them as they are.
    pub fn publish(&self) -> String {
        let mut crawlers: Vec<PublishedCrawler> = Vec::new();
        for pair in &self.paths {
            let at = match crawlers.iter().position(|c| *c.name == *pair.crawler) {
                Some(at) => at,
                None => {
                    crawlers.push(PublishedCrawler {
                        name: pair.crawler.to_string(),
                        user_agent: String::from_utf8_lossy(&pair.user_agent).into_owned(),
                        paths: Vec::new(),
                    });
                    crawlers.len() - 1
                }
            };
            crawlers[at].paths.push((
                String::from_utf8_lossy(&pair.path).into_owned(),
                pair.requests,
                pair.verified,
                pair.outcome.as_str().to_owned(),
            ));
        }
        serde_json::to_string(&PublishedSample {
            not_replayable: self.not_replayable,
            crawlers,
        })
        .unwrap_or_default()
    }

    /// Another replica's published sample; `None` when the text is not one (a store shared
    /// with a newer or broken writer), which the merge then leaves out. Bounded as this
    /// replica's own sample is: pairs, crawlers, path and User-Agent lengths.
    pub fn from_published(text: &str, max_pairs: usize) -> Option<SampledTraffic> {
        let published: PublishedSample = serde_json::from_str(text).ok()?;
        let mut traffic = SampledTraffic {
            paths: Vec::new(),
            not_replayable: published.not_replayable,
        };
        for crawler in published.crawlers.into_iter().take(MAX_CRAWLERS) {
            let name: Arc<str> = Arc::from(crawler.name.as_str());
            let agent = crawler.user_agent.as_bytes();
            let user_agent: Arc<[u8]> = Arc::from(&agent[..agent.len().min(MAX_USER_AGENT_BYTES)]);
            for (path, requests, verified, outcome) in crawler.paths {
                let outcome = Outcome::ALL.iter().copied().find(|o| o.as_str() == outcome);
                let Some(outcome) = outcome
                    .filter(|_| path.len() <= MAX_PATH_BYTES && traffic.paths.len() < max_pairs)
                else {
                    traffic.not_replayable = traffic.not_replayable.saturating_add(requests);
                    continue;
                };
                traffic.paths.push(SampledPath {
                    crawler: name.clone(),
                    user_agent: user_agent.clone(),
                    path: Box::from(path.as_bytes()),
                    requests,
                    verified: verified.min(requests),
                    outcome,
                });
            }
        }
        Some(traffic)
    }

    /// The fleet's sample: `own` (this replica's, whose outcome and User-Agent win for a pair
    /// both hold) and the others', counts added per (crawler, path); at most `max_pairs` pairs,
    /// the least-requested left out and counted as not replayable, as a replica's own sample
    /// does.
    pub fn merge(
        own: SampledTraffic,
        others: Vec<SampledTraffic>,
        max_pairs: usize,
    ) -> SampledTraffic {
        let mut not_replayable = own.not_replayable;
        let mut at: HashMap<PairKey, usize, foldhash::fast::RandomState> = HashMap::default();
        let mut paths: Vec<SampledPath> = Vec::with_capacity(own.paths.len());
        for pair in own
            .paths
            .into_iter()
            .chain(others.iter().flat_map(|o| o.paths.iter().cloned()))
        {
            match at.get(&(pair.crawler.clone(), pair.path.clone())) {
                Some(&index) => {
                    let kept = &mut paths[index];
                    kept.requests = kept.requests.saturating_add(pair.requests);
                    kept.verified = kept.verified.saturating_add(pair.verified);
                }
                None => {
                    at.insert((pair.crawler.clone(), pair.path.clone()), paths.len());
                    paths.push(pair);
                }
            }
        }
        for other in &others {
            not_replayable = not_replayable.saturating_add(other.not_replayable);
        }
        if paths.len() > max_pairs {
            paths.sort_unstable_by_key(|pair| std::cmp::Reverse(pair.requests));
            for left_out in paths.drain(max_pairs..) {
                not_replayable = not_replayable.saturating_add(left_out.requests);
            }
        }
        SampledTraffic {
            paths,
            not_replayable,
        }
    }
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
            sample.dirty = true;
            return;
        }
        let name = crawler.name();
        if !sample.crawlers.contains_key(name) {
            if sample.crawlers.len() >= MAX_CRAWLERS {
                sample.not_replayable[index] += 1;
                sample.dirty = true;
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
        sample.dirty = true;
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

    /// The origins with a sample.
    pub fn origins(&self) -> Vec<Arc<str>> {
        self.origins.read().keys().cloned().collect()
    }

    /// `origin`'s sample at `now` for the shared store when it changed since the last call
    /// ([`Sample::changed_again`] when the store did not take it).
    pub fn take_changed(&self, origin: &str, now: u64) -> Option<String> {
        let sample = self.origins.read().get(origin).cloned()?;
        {
            let mut sample = sample.lock();
            if !sample.dirty {
                return None;
            }
            sample.dirty = false;
        }
        Some(self.traffic(origin, now).publish())
    }

    /// Marks `origin`'s sample to be published again.
    pub fn changed_again(&self, origin: &str) {
        if let Some(sample) = self.origins.read().get(origin) {
            sample.lock().dirty = true;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(crawler: &str, path: &str, requests: u64, outcome: Outcome) -> SampledPath {
        SampledPath {
            crawler: Arc::from(crawler),
            user_agent: Arc::from(&b"Bot/1.0"[..]),
            path: Box::from(path.as_bytes()),
            requests,
            verified: requests / 2,
            outcome,
        }
    }

    #[test]
    fn a_published_sample_reads_back_as_it_was() {
        let traffic = SampledTraffic {
            paths: vec![
                pair("GPTBot", "/a?x=%20", 3, Outcome::Allowed),
                pair("GPTBot", "/b", 1, Outcome::Blocked),
                pair("Googlebot", "/a?x=%20", 2, Outcome::Allowed),
            ],
            not_replayable: 7,
        };
        let read = SampledTraffic::from_published(&traffic.publish(), 100).expect("readable");
        assert_eq!(read.not_replayable, 7);
        let mut rows: Vec<_> = read
            .paths
            .iter()
            .map(|p| {
                (
                    p.crawler.to_string(),
                    p.path.to_vec(),
                    p.requests,
                    p.verified,
                    p.outcome,
                )
            })
            .collect();
        rows.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        let expected: Vec<(String, Vec<u8>, u64, u64, Outcome)> = vec![
            (
                "GPTBot".into(),
                b"/a?x=%20".to_vec(),
                3,
                1,
                Outcome::Allowed,
            ),
            ("GPTBot".into(), b"/b".to_vec(), 1, 0, Outcome::Blocked),
            (
                "Googlebot".into(),
                b"/a?x=%20".to_vec(),
                2,
                1,
                Outcome::Allowed,
            ),
        ];
        let mut expected = expected;
        expected.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        assert_eq!(rows, expected);
    }

    #[test]
    fn what_another_replica_wrote_is_bounded_and_garbage_is_left_out() {
        assert!(SampledTraffic::from_published("not json", 10).is_none());
        let long = "/".repeat(MAX_PATH_BYTES + 1);
        let text = format!(
            r#"{{"not_replayable":1,"crawlers":[{{"name":"GPTBot","user_agent":"{}","paths":[["{long}",4,0,"allowed"],["/x",5,9,"no_such_word"],["/a",2,1,"allowed"],["/b",3,0,"allowed"]]}}]}}"#,
            "u".repeat(MAX_USER_AGENT_BYTES * 2)
        );
        let read = SampledTraffic::from_published(&text, 1).expect("readable");
        // The long path, the unknown outcome and the pair beyond the bound are not replayable.
        assert_eq!(read.paths.len(), 1);
        assert_eq!(read.not_replayable, 1 + 4 + 5 + 3);
        assert_eq!(read.paths[0].user_agent.len(), MAX_USER_AGENT_BYTES);
    }

    #[test]
    fn merging_adds_a_pairs_requests_and_keeps_the_most_requested() {
        let own = SampledTraffic {
            paths: vec![
                pair("GPTBot", "/a", 3, Outcome::Blocked),
                pair("GPTBot", "/b", 1, Outcome::Allowed),
            ],
            not_replayable: 1,
        };
        let other = SampledTraffic {
            paths: vec![
                pair("GPTBot", "/a", 2, Outcome::Allowed),
                pair("GPTBot", "/c", 4, Outcome::Allowed),
            ],
            not_replayable: 2,
        };
        let merged = SampledTraffic::merge(own, vec![other], 2);
        let mut rows: Vec<_> = merged
            .paths
            .iter()
            .map(|p| (p.path.to_vec(), p.requests, p.outcome))
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        // `/a`: 3 + 2 with this replica's outcome; `/b` (1 request) is left out.
        assert_eq!(
            rows,
            vec![
                (b"/a".to_vec(), 5, Outcome::Blocked),
                (b"/c".to_vec(), 4, Outcome::Allowed)
            ]
        );
        assert_eq!(merged.not_replayable, 1 + 2 + 1);
    }
}
