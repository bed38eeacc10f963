//! What the admin endpoint's reports and the console show: per origin, per crawler, what it asked
//! for and what it got; which requests a robots.txt rule disallowed, on which paths; and the
//! robots.txt copies in force. Bounded by construction: counts per crawler in time buckets over
//! `reports.window`, distinct clients as mergeable approximate counts, violations in a
//! heavy-hitters sketch of `reports.top` rows per time slice, so that no flood of clients, paths or
//! names grows memory.
//!
//! With the shared state store, each replica publishes its own report (see
//! [`crate::store::Store::publish_reports`]) and a report merges every replica's.

pub mod distinct;
pub mod sample;
pub mod sketch;
pub mod text;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use crate::config::ReportsConfig;
use crate::enforce::{Decision, Outcome, VerificationResult, Why};
use crate::outcome::ReportColumn;
use distinct::Distinct;
use sketch::{Counted, Mergeable, SpaceSaving};

pub use text::{csv, rfc3339, robots_diff};

/// Time buckets of the counts over a window.
const BUCKETS: u64 = 144;
/// Time slices of the distinct counts over a window.
const CLIENT_SLICES: u64 = 24;
/// Time slices of the violation sketches over a window.
const VIOLATION_SLICES: u64 = 6;
/// Rows kept per origin for crawlers named only by a User-Agent (generic rules, robots.txt
/// tokens): beyond them such names count as `other`, so that made-up names never take the rows
/// of catalogue crawlers.
const MAX_MADE_UP_ROWS: usize = 256;
/// Rows kept per origin in all (catalogue crawlers, the signals' rows and the made-up names):
/// beyond them everything counts as `other`. The catalogue is a few hundred entries, so it
/// always fits.
const MAX_CRAWLER_ROWS: usize = 2048;
/// The row that counts what has no row of its own.
const OTHER_ROW: &str = "other";
/// Bytes of a violating path kept.
pub const MAX_PATH_BYTES: usize = 256;

/// Counts of one crawler (or all requests) in one time bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Requests.
    pub requests: u64,
    /// Allowed by robots.txt and proxied.
    pub allowed: u64,
    /// Refused for robots.txt or the policy.
    pub blocked: u64,
    /// Refused for coming sooner than the Crawl-delay.
    pub limited: u64,
    /// Refused for a ban of the address.
    pub banned: u64,
    /// Would have been blocked (report mode).
    pub would_block: u64,
    /// Would have been limited (Crawl-delay report).
    pub would_limit: u64,
    /// Passed without robots.txt (not a crawler, policy pass, exempt path, robots.txt itself).
    pub passed: u64,
    /// Failed upstream.
    pub errors: u64,
    /// Requests whose crawler was verified.
    pub verified: u64,
    /// Requests whose claim could not be verified (or had no way to be).
    pub unverified: u64,
    /// Requests from impostors.
    pub impostor: u64,
    /// Response body bytes sent from the origin (refusals not counted).
    pub bytes: u64,
    /// Trap paths requested and refused (`traps.action: block` or `ban`).
    #[serde(default)]
    pub trap: u64,
    /// Trap paths requested and proxied (`traps.action: report`).
    #[serde(default)]
    pub would_trap: u64,
    /// Refused as a disguised crawler.
    #[serde(default)]
    pub disguised: u64,
    /// Would have been refused as a disguised crawler (report).
    #[serde(default)]
    pub would_disguised: u64,
    /// From a banned address, proxied because the origin only reports bans (`mode: report`,
    /// `offenders.action: report`).
    #[serde(default)]
    pub would_ban: u64,
    /// From a banned address, proxied because bans are off (`mode: off`, `offenders.action:
    /// off`).
    #[serde(default)]
    pub ban_suspended: u64,
    /// Refused for the operator's rate budget (`policy.rates`).
    #[serde(default)]
    pub rate_limited: u64,
    /// Would have been refused for the operator's rate budget (`mode: report`).
    #[serde(default)]
    pub would_rate_limit: u64,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.requests += other.requests;
        self.allowed += other.allowed;
        self.blocked += other.blocked;
        self.limited += other.limited;
        self.banned += other.banned;
        self.would_block += other.would_block;
        self.would_limit += other.would_limit;
        self.passed += other.passed;
        self.errors += other.errors;
        self.verified += other.verified;
        self.unverified += other.unverified;
        self.impostor += other.impostor;
        self.bytes += other.bytes;
        self.trap += other.trap;
        self.would_trap += other.would_trap;
        self.disguised += other.disguised;
        self.would_disguised += other.would_disguised;
        self.would_ban += other.would_ban;
        self.ban_suspended += other.ban_suspended;
        self.rate_limited += other.rate_limited;
        self.would_rate_limit += other.would_rate_limit;
    }

    /// The count of `column`: where the outcome table ([`crate::outcome::OUTCOMES`]) counts an
    /// outcome.
    fn column_mut(&mut self, column: ReportColumn) -> &mut u64 {
        match column {
            ReportColumn::Passed => &mut self.passed,
            ReportColumn::Allowed => &mut self.allowed,
            ReportColumn::Blocked => &mut self.blocked,
            ReportColumn::WouldBlock => &mut self.would_block,
            ReportColumn::Limited => &mut self.limited,
            ReportColumn::WouldLimit => &mut self.would_limit,
            ReportColumn::Banned => &mut self.banned,
            ReportColumn::Trap => &mut self.trap,
            ReportColumn::WouldTrap => &mut self.would_trap,
            ReportColumn::Disguised => &mut self.disguised,
            ReportColumn::WouldDisguised => &mut self.would_disguised,
            ReportColumn::WouldBan => &mut self.would_ban,
            ReportColumn::BanSuspended => &mut self.ban_suspended,
            ReportColumn::RateLimited => &mut self.rate_limited,
            ReportColumn::WouldRateLimit => &mut self.would_rate_limit,
        }
    }

    /// Adds one request, as `counted` describes it.
    fn count(&mut self, counted: &OneRequest) {
        self.requests += 1;
        self.bytes += counted.bytes;
        if counted.failed {
            self.errors += 1;
        } else {
            *self.column_mut(counted.outcome.info().column) += 1;
        }
        match counted.verification {
            Some(VerificationResult::Verified) => self.verified += 1,
            Some(VerificationResult::Impostor) => self.impostor += 1,
            Some(VerificationResult::Unverified) => self.unverified += 1,
            None => {}
        }
    }
}

/// One request as the reports count it: added to the origin's totals and to its crawler's row
/// (a whole [`Tally`] of ones and zeros added twice cost several times as much).
struct OneRequest {
    outcome: Outcome,
    failed: bool,
    verification: Option<VerificationResult>,
    /// Bytes the client took: of answers that came from the origin (or the robots.txt
    /// robotsguard serves), not of robotsguard's refusals.
    bytes: u64,
}

impl OneRequest {
    fn of(decision: &Decision, failed: bool, bytes: u64) -> OneRequest {
        let refused = decision.outcome.refuses();
        let verification = decision.verification_result();
        OneRequest {
            outcome: decision.outcome,
            failed,
            verification,
            bytes: if refused { 0 } else { bytes },
        }
    }
}

/// Values in time buckets, oldest first, only buckets with something in them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Buckets<T> {
    items: VecDeque<(u64, T)>,
}

impl<T: Default> Buckets<T> {
    /// The bucket starting at `start`: the newest, or a new one. A moment older than the newest
    /// bucket (the clock went back) counts in the newest.
    fn at(&mut self, start: u64) -> Option<&mut T> {
        let newest = self.items.back().map(|(s, _)| *s);
        if newest.is_none_or(|newest| newest < start) {
            self.items.push_back((start, T::default()));
        }
        self.items.back_mut().map(|(_, value)| value)
    }

    fn prune(&mut self, oldest: u64) {
        while self.items.front().is_some_and(|(start, _)| *start < oldest) {
            self.items.pop_front();
        }
    }

    fn within(&self, since: u64, until: u64, width: u64) -> impl Iterator<Item = &T> {
        self.items
            .iter()
            .filter(move |(start, _)| *start + width > since && *start < until)
            .map(|(_, value)| value)
    }
}

/// One crawler's row.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct CrawlerRow {
    category: String,
    /// Named only by a User-Agent (not in the catalogue): counted against [`MAX_MADE_UP_ROWS`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    made_up: bool,
    counts: Buckets<Tally>,
    clients: Buckets<Distinct>,
    readers: Buckets<Distinct>,
    first_seen: u64,
    last_seen: u64,
}

/// What a violation row is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ViolationKey {
    /// The crawler.
    pub crawler: String,
    /// `verified`, `unverified` or `impostor` (`unverified` when not checked).
    pub verification: String,
    /// The canonical path and query (at most [`MAX_PATH_BYTES`]; longer ones end in `…`).
    pub path: String,
    /// The deciding rule's line.
    pub line: u32,
    /// `Disallow` (or `Allow`, never for a violation).
    pub directive: String,
    /// The rule's pattern.
    pub pattern: String,
    /// Whether the client had read robots.txt within the last 24 hours.
    pub read_robots: bool,
    /// Refused (`true`) or only reported (report mode).
    pub enforced: bool,
}

/// A [`ViolationKey`] in borrowed form: what a request's violation is looked up by, so that a
/// row already counted costs no strings. The path is the logical text with a trailing `…` (of a
/// cut path) held apart, so a probe cut from a request and a key read back agree.
#[derive(Debug, Hash, PartialEq)]
pub struct ViolationProbe<'a> {
    crawler: &'a str,
    verification: &'a str,
    path: &'a str,
    path_cut: bool,
    line: u32,
    directive: &'a str,
    pattern: &'a str,
    read_robots: bool,
    enforced: bool,
}

impl ViolationProbe<'_> {
    fn to_key(&self) -> ViolationKey {
        let mut path = String::with_capacity(self.path.len() + if self.path_cut { 3 } else { 0 });
        path.push_str(self.path);
        if self.path_cut {
            path.push(ELLIPSIS);
        }
        ViolationKey {
            crawler: self.crawler.to_string(),
            verification: self.verification.to_string(),
            path,
            line: self.line,
            directive: self.directive.to_string(),
            pattern: self.pattern.to_string(),
            read_robots: self.read_robots,
            enforced: self.enforced,
        }
    }
}

/// What ends a path cut at [`MAX_PATH_BYTES`].
const ELLIPSIS: char = '…';

/// A row's path with its trailing `…` (of a cut path) held apart: `(head, cut)`.
fn split_ellipsis(path: &str) -> (&str, bool) {
    match path.strip_suffix(ELLIPSIS) {
        Some(head) => (head, true),
        None => (path, false),
    }
}

impl sketch::SketchKey for ViolationKey {
    type Probe<'a> = ViolationProbe<'a>;
    fn probe(&self) -> ViolationProbe<'_> {
        let (path, path_cut) = split_ellipsis(&self.path);
        ViolationProbe {
            crawler: &self.crawler,
            verification: &self.verification,
            path,
            path_cut,
            line: self.line,
            directive: &self.directive,
            pattern: &self.pattern,
            read_robots: self.read_robots,
            enforced: self.enforced,
        }
    }
    fn matches(&self, probe: &ViolationProbe<'_>) -> bool {
        self.probe() == *probe
    }
}

/// What a violation row carries besides its count.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ViolationSeen {
    /// The first request's time (Unix seconds).
    pub first_seen: u64,
    /// The latest request's time (Unix seconds).
    pub last_seen: u64,
    /// Distinct clients (approximate).
    pub clients: Distinct,
}

impl ViolationSeen {
    /// A violation seen for the first time, at `now`, from `client`.
    fn first(now: u64, client: Option<IpAddr>) -> ViolationSeen {
        let mut seen = ViolationSeen {
            first_seen: now,
            last_seen: now,
            clients: Distinct::default(),
        };
        if let Some(client) = client {
            seen.clients.insert(&client);
        }
        seen
    }

    /// [`Mergeable::merge`] of [`ViolationSeen::first`], without building it.
    fn seen_again(&mut self, now: u64, client: Option<IpAddr>) {
        self.first_seen = self.first_seen.min(now);
        self.last_seen = self.last_seen.max(now);
        if let Some(client) = client {
            self.clients.insert(&client);
        }
    }
}

impl Mergeable for ViolationSeen {
    fn merge(&mut self, other: &Self) {
        self.first_seen = self.first_seen.min(other.first_seen);
        self.last_seen = self.last_seen.max(other.last_seen);
        self.clients.merge(&other.clients);
    }
}

type Violations = SpaceSaving<ViolationKey, ViolationSeen>;

/// A violation slice as it is published: the sketch's entries and capacity.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PublishedSlice {
    start: u64,
    capacity: usize,
    entries: Vec<Counted<ViolationKey, ViolationSeen>>,
}

/// One origin's report.
#[derive(Debug, Clone, Default)]
pub struct OriginReport {
    totals: Buckets<Tally>,
    crawlers: BTreeMap<String, CrawlerRow>,
    violations: VecDeque<(u64, Violations)>,
    /// Changed since it was last published.
    dirty: bool,
    /// The newest violation slice when it was last published: older ones have not changed since.
    published_from: u64,
    /// Rows of made-up crawler names ([`MAX_MADE_UP_ROWS`]).
    made_up_rows: usize,
}

/// An origin's report as one replica writes it to the shared store: its counts, and the violation
/// slices that changed since the last write, as JSON.
#[derive(Debug, Clone, Default)]
pub struct PublishedParts {
    /// The counts per crawler and the totals.
    pub counts: String,
    /// `(slice start, slice)`.
    pub violations: Vec<(u64, String)>,
}

/// The counts part of a published report.
#[derive(Serialize, Deserialize)]
struct PublishedCounts {
    totals: Buckets<Tally>,
    crawlers: BTreeMap<String, CrawlerRow>,
}

impl Published {
    /// A report from its stored parts; `None` when the counts are missing or do not parse (a
    /// slice that does not parse is left out).
    pub fn from_parts<'a>(
        counts: Option<&str>,
        violations: impl Iterator<Item = &'a String>,
    ) -> Option<Published> {
        let counts: PublishedCounts = serde_json::from_str(counts?).ok()?;
        Some(Published {
            totals: counts.totals,
            crawlers: counts.crawlers,
            violations: violations
                .filter_map(|slice| serde_json::from_str(slice).ok())
                .collect(),
        })
    }
}

/// An origin's report as one replica publishes it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Published {
    totals: Buckets<Tally>,
    crawlers: BTreeMap<String, CrawlerRow>,
    violations: Vec<PublishedSlice>,
}

/// The time layout of a window.
#[derive(Debug, Clone, Copy)]
struct Grid {
    window: u64,
    bucket: u64,
    client_slice: u64,
    violation_slice: u64,
}

impl Grid {
    fn new(window: Duration) -> Grid {
        let window = window.as_secs().max(BUCKETS);
        Grid {
            window,
            bucket: (window / BUCKETS).max(1),
            client_slice: (window / CLIENT_SLICES).max(1),
            violation_slice: (window / VIOLATION_SLICES).max(1),
        }
    }

    fn start(at: u64, width: u64) -> u64 {
        at - at % width
    }
}

/// Every origin's report, and the clock they are kept by.
pub struct Reports {
    settings: ReportsConfig,
    grid: Grid,
    /// Keyed by configured origin names only (clients cannot add keys), so the fast hash.
    origins: RwLock<HashMap<Arc<str>, Arc<Mutex<OriginReport>>, foldhash::fast::RandomState>>,
    /// The wall clock at a moment of the monotonic one: requests read the cheap coarse clock.
    anchor: (Instant, u64),
    /// The crawler traffic a preview replays.
    sample: sample::Sample,
}

impl std::fmt::Debug for Reports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reports")
            .field("settings", &self.settings)
            .finish()
    }
}

/// One request, as the reports count it.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The decision (with every outcome the judgment reached).
    pub decision: &'a Decision,
    /// It failed upstream.
    pub failed: bool,
    /// The client's address.
    pub client: Option<IpAddr>,
    /// Response body bytes sent.
    pub bytes: u64,
    /// For a violation: whether the client had read robots.txt.
    pub read_robots: Option<bool>,
    /// The target the decision was made on (path and query as sent).
    pub target: &'a [u8],
}

impl Reports {
    /// Empty reports kept as `settings` says.
    pub fn new(settings: ReportsConfig) -> Reports {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Reports::starting_at(settings, now)
    }

    /// Empty reports whose clock reads `unix` (Unix seconds) now.
    fn starting_at(settings: ReportsConfig, unix: u64) -> Reports {
        Reports {
            settings,
            grid: Grid::new(settings.window),
            origins: RwLock::new(HashMap::default()),
            anchor: (crate::tables::clock::coarse_now(), unix),
            sample: sample::Sample::new(
                settings.window.as_secs(),
                crate::config::DEFAULT_MAX_PATHS_PER_ORIGIN,
            ),
        }
    }

    /// What the reports keep.
    pub fn settings(&self) -> ReportsConfig {
        self.settings
    }

    /// Now, in Unix seconds, by the coarse clock.
    pub fn now(&self) -> u64 {
        self.unix_at(crate::tables::clock::coarse_now())
    }

    /// `at`, in Unix seconds.
    fn unix_at(&self, at: Instant) -> u64 {
        let (instant, unix) = self.anchor;
        unix + at.saturating_duration_since(instant).as_secs()
    }

    fn origin(&self, name: &str) -> Arc<Mutex<OriginReport>> {
        if let Some(report) = self.origins.read().get(name) {
            return report.clone();
        }
        self.origins
            .write()
            .entry(Arc::from(name))
            .or_default()
            .clone()
    }

    /// The crawler traffic kept for previews.
    pub fn sample(&self) -> &sample::Sample {
        &self.sample
    }

    /// Keeps one request in the preview's sample ([`sample::Sample::record`]), ended `at`.
    pub fn record_sample(
        &self,
        decision: &Decision,
        target: &[u8],
        user_agent: &[u8],
        at: Instant,
    ) {
        self.sample
            .record(decision, target, user_agent, self.unix_at(at));
    }

    /// Counts one request, now.
    pub fn record(&self, observed: &Observed<'_>) {
        self.record_at(observed, crate::tables::clock::coarse_now());
    }

    /// Counts one request that ended `at` (the proxy has just read the clock for its duration).
    pub fn record_at(&self, observed: &Observed<'_>, at: Instant) {
        let decision = observed.decision;
        let now = self.unix_at(at);
        let grid = self.grid;
        let counted = OneRequest::of(decision, observed.failed, observed.bytes);
        let report = self.origin(decision.origin.name());
        let mut report = report.lock();
        report.dirty = true;
        if let Some(bucket) = report.totals.at(Grid::start(now, grid.bucket)) {
            bucket.count(&counted);
        }
        let oldest = now.saturating_sub(grid.window);
        if report
            .totals
            .items
            .front()
            .is_some_and(|(start, _)| *start + grid.bucket < oldest)
        {
            prune(&mut report, oldest, grid);
        }
        // A signal that catches clients whatever their User-Agent has a row of its own (the
        // disguised crawler is the decision's crawler already).
        let (name, category, made_up) =
            if matches!(decision.outcome, Outcome::Trap | Outcome::WouldTrap) {
                ("trap", "other", false)
            } else {
                let Some(crawler) = &decision.crawler else {
                    return;
                };
                // A name whose metric label is its own is the catalogue's (or a configured
                // signal's); the others come from User-Agents alone.
                let made_up = crawler.label() != crawler.name();
                (crawler.name(), crawler.category().as_str(), made_up)
            };
        let name = if report.crawlers.contains_key(name) {
            name
        } else if report.crawlers.len() >= MAX_CRAWLER_ROWS
            || (made_up && report.made_up_rows >= MAX_MADE_UP_ROWS)
        {
            OTHER_ROW
        } else {
            name
        };
        // Looked up before inserting: a crawler's row exists after its first request, and
        // `entry` would allocate the name on every one.
        let row = match report.crawlers.get_mut(name) {
            Some(row) => row,
            None => {
                let made_up = made_up && name != OTHER_ROW;
                report.made_up_rows += usize::from(made_up);
                let row = report.crawlers.entry(name.to_string()).or_default();
                row.made_up = made_up;
                row
            }
        };
        if row.category.is_empty() {
            row.category = category.to_string();
            row.first_seen = now;
        }
        row.last_seen = now;
        if let Some(bucket) = row.counts.at(Grid::start(now, grid.bucket)) {
            bucket.count(&counted);
        }
        if let Some(client) = observed.client {
            let slice = Grid::start(now, grid.client_slice);
            if let Some(clients) = row.clients.at(slice) {
                clients.insert(&client);
            }
            if decision.reads_robots_txt {
                if let Some(readers) = row.readers.at(slice) {
                    readers.insert(&client);
                }
            }
        }
        let violation = matches!(
            decision.outcome,
            Outcome::Blocked | Outcome::WouldBlock | Outcome::PaymentRequired
        ) && matches!(decision.why, Why::Rule | Why::ResponseSignal);
        if let (true, Some(rule)) = (violation, &decision.rule) {
            let canonical = match &decision.rewritten_target {
                Some(target) => std::borrow::Cow::Borrowed(&target[..]),
                None => crate::robots::canonicalize(observed.target),
            };
            // The path as a row keeps it: lossy UTF-8, cut at MAX_PATH_BYTES (then ending in
            // `…`); the pattern is cut at as many characters.
            let path_cut = canonical.len() > MAX_PATH_BYTES;
            let path = String::from_utf8_lossy(&canonical[..canonical.len().min(MAX_PATH_BYTES)]);
            let pattern = match rule.pattern.char_indices().nth(MAX_PATH_BYTES) {
                Some((end, _)) => &rule.pattern[..end],
                None => rule.pattern.as_str(),
            };
            // A path that itself ends in `…` cannot come from a request (canonical paths are
            // ASCII), but is split as a key read back would be.
            let (path, path_cut) = if path_cut {
                (path.as_ref(), true)
            } else {
                split_ellipsis(&path)
            };
            let probe = ViolationProbe {
                crawler: name,
                verification: decision
                    .verification_result()
                    .unwrap_or(VerificationResult::Unverified)
                    .as_str(),
                path,
                path_cut,
                line: rule.line,
                directive: rule.directive,
                pattern,
                read_robots: observed.read_robots.unwrap_or(false),
                enforced: matches!(
                    decision.outcome,
                    Outcome::Blocked | Outcome::PaymentRequired
                ),
            };
            let slice = Grid::start(now, grid.violation_slice);
            let top = self.settings.top;
            if report.violations.back().map(|(start, _)| *start) != Some(slice) {
                report.violations.push_back((slice, SpaceSaving::new(top)));
            }
            if let Some((_, sketch)) = report.violations.back_mut() {
                let client = observed.client;
                sketch.add_with(
                    probe,
                    1,
                    ViolationProbe::to_key,
                    |seen| seen.seen_again(now, client),
                    || ViolationSeen::first(now, client),
                );
            }
        }
    }

    /// This replica's report of `origin`, for writing to the shared store; `None` when nothing
    /// changed since the last call (then call [`Reports::changed_again`] if the write failed).
    pub fn take_changed(&self, origin: &str) -> Option<PublishedParts> {
        let report = self.origins.read().get(origin)?.clone();
        let mut report = report.lock();
        if !report.dirty {
            return None;
        }
        report.dirty = false;
        let oldest = self.now().saturating_sub(self.grid.window);
        prune(&mut report, oldest, self.grid);
        let counts = serde_json::to_string(&PublishedCounts {
            totals: report.totals.clone(),
            crawlers: report.crawlers.clone(),
        })
        .ok()?;
        let from = report.published_from;
        let violations = report
            .violations
            .iter()
            .filter(|(start, _)| *start >= from)
            .filter_map(|(start, sketch)| {
                let slice = PublishedSlice {
                    start: *start,
                    capacity: sketch.capacity(),
                    entries: sketch.entries().to_vec(),
                };
                Some((*start, serde_json::to_string(&slice).ok()?))
            })
            .collect();
        if let Some((newest, _)) = report.violations.back() {
            report.published_from = *newest;
        }
        Some(PublishedParts { counts, violations })
    }

    /// Marks `origin`'s report as changed (a write of it failed), from `from` on.
    pub fn changed_again(&self, origin: &str, parts: &PublishedParts) {
        if let Some(report) = self.origins.read().get(origin) {
            let mut report = report.lock();
            report.dirty = true;
            if let Some(oldest) = parts.violations.iter().map(|(start, _)| *start).min() {
                report.published_from = report.published_from.min(oldest);
            }
        }
    }

    /// The starts of the violation slices within the window.
    pub fn violation_slices(&self) -> Vec<u64> {
        let now = self.now();
        let width = self.grid.violation_slice;
        let mut at = Grid::start(now.saturating_sub(self.grid.window), width);
        let mut starts = Vec::new();
        while at <= now {
            starts.push(at);
            at += width;
        }
        starts
    }

    /// The window the reports cover.
    pub fn window(&self) -> Duration {
        Duration::from_secs(self.grid.window)
    }

    /// The origins with a report here.
    pub fn origins(&self) -> Vec<String> {
        let mut names: Vec<String> = self.origins.read().keys().map(|k| k.to_string()).collect();
        names.sort();
        names
    }

    /// This replica's report of `origin`, as published (for merging with others).
    pub fn local(&self, origin: &str) -> Published {
        match self.origins.read().get(origin) {
            Some(report) => publish(&report.lock()),
            None => Published::default(),
        }
    }

    /// The time range a query covers: `since`/`until` clamped to the window. `until` is where
    /// it ends (buckets starting there are out); by default after the current second, so that a
    /// request counted this second is in, also in the first second of a bucket. A range that
    /// lies wholly outside the window (in the future, say) comes back empty (`since == until`),
    /// and every table of an empty range is empty.
    pub fn range(&self, since: Option<u64>, until: Option<u64>) -> (u64, u64) {
        let now = self.now();
        let oldest = now.saturating_sub(self.grid.window);
        let until = until.unwrap_or(now + 1).min(now + 1);
        let since = since.unwrap_or(oldest).max(oldest);
        (since.min(until), until)
    }

    /// Merges published reports (this replica's and others') into one view.
    pub fn merge(&self, reports: &[Published]) -> Merged {
        let mut merged = Merged {
            grid: self.grid,
            top: self.settings.top,
            totals: Buckets::default(),
            crawlers: BTreeMap::new(),
            violations: Vec::new(),
        };
        for report in reports {
            merge_buckets(&mut merged.totals, &report.totals, |a, b| a.add(b));
            for (name, row) in &report.crawlers {
                let into = merged.crawlers.entry(name.clone()).or_default();
                if into.category.is_empty() {
                    into.category.clone_from(&row.category);
                    into.first_seen = row.first_seen;
                }
                into.first_seen = into.first_seen.min(row.first_seen);
                into.last_seen = into.last_seen.max(row.last_seen);
                merge_buckets(&mut into.counts, &row.counts, |a, b| a.add(b));
                merge_buckets(&mut into.clients, &row.clients, |a, b| a.merge(b));
                merge_buckets(&mut into.readers, &row.readers, |a, b| a.merge(b));
            }
            merged.violations.extend(report.violations.iter().cloned());
        }
        merged
    }
}

fn merge_buckets<T: Clone + Default>(
    into: &mut Buckets<T>,
    from: &Buckets<T>,
    add: impl Fn(&mut T, &T),
) {
    for (start, value) in &from.items {
        match into.items.iter_mut().find(|(s, _)| s == start) {
            Some((_, existing)) => add(existing, value),
            None => {
                let at = into.items.partition_point(|(s, _)| s < start);
                into.items.insert(at, (*start, value.clone()));
            }
        }
    }
}

fn prune(report: &mut OriginReport, oldest: u64, grid: Grid) {
    report.totals.prune(oldest.saturating_sub(grid.bucket));
    report.crawlers.retain(|_, row| {
        row.counts.prune(oldest.saturating_sub(grid.bucket));
        row.clients.prune(oldest.saturating_sub(grid.client_slice));
        row.readers.prune(oldest.saturating_sub(grid.client_slice));
        row.last_seen >= oldest
    });
    report.made_up_rows = report.crawlers.values().filter(|row| row.made_up).count();
    while report
        .violations
        .front()
        .is_some_and(|(start, _)| *start + grid.violation_slice < oldest)
    {
        report.violations.pop_front();
    }
}

fn publish(report: &OriginReport) -> Published {
    Published {
        totals: report.totals.clone(),
        crawlers: report.crawlers.clone(),
        violations: report
            .violations
            .iter()
            .map(|(start, sketch)| PublishedSlice {
                start: *start,
                capacity: sketch.capacity(),
                entries: sketch.entries().to_vec(),
            })
            .collect(),
    }
}

/// Reports merged from one or more replicas, ready to be queried.
pub struct Merged {
    grid: Grid,
    top: usize,
    totals: Buckets<Tally>,
    crawlers: BTreeMap<String, CrawlerRow>,
    violations: Vec<PublishedSlice>,
}

/// One row of `/reports/crawlers`.
#[derive(Debug, Clone, Serialize)]
pub struct CrawlerReport {
    /// The crawler (`other` for names beyond the rows kept).
    pub name: String,
    /// Its category.
    pub category: String,
    /// Who runs it, from the catalogue.
    pub operator: String,
    /// Its counts over the range.
    #[serde(flatten)]
    pub tally: Tally,
    /// Distinct client addresses (approximate).
    pub distinct_clients: u64,
    /// Distinct client addresses that read robots.txt (approximate).
    pub clients_read_robots: u64,
    /// Unix seconds.
    pub first_seen: u64,
    /// Unix seconds.
    pub last_seen: u64,
}

/// One row of `/reports/violations`.
#[derive(Debug, Clone, Serialize)]
pub struct ViolationReport {
    /// What the row is about.
    #[serde(flatten)]
    pub key: ViolationKey,
    /// Requests (at most `count_error` more than the truth).
    pub count: u64,
    /// How much `count` may over-estimate (0 when exact).
    pub count_error: u64,
    /// Distinct clients (approximate).
    pub distinct_clients: u64,
    /// Unix seconds.
    pub first_seen: u64,
    /// Unix seconds.
    pub last_seen: u64,
}

/// The violations of a range, and the bound on what the sketch may have left out.
#[derive(Debug, Clone, Serialize)]
pub struct ViolationsReport {
    /// The rows, most requested first.
    pub rows: Vec<ViolationReport>,
    /// A path not listed was requested at most this often; listed counts may over-estimate by
    /// their own `count_error`. 0: every count is exact.
    pub error_bound: u64,
}

impl Merged {
    /// Totals of every request to the origin over the range.
    pub fn totals(&self, since: u64, until: u64) -> Tally {
        let mut total = Tally::default();
        if since >= until {
            return total;
        }
        for tally in self.totals.within(since, until, self.grid.bucket) {
            total.add(tally);
        }
        total
    }

    /// Requests and blocks per bucket over the range, oldest first: `(bucket start, tally)`,
    /// for every crawler together (`None`) or one.
    pub fn series(&self, crawler: Option<&str>, since: u64, until: u64) -> Vec<(u64, Tally)> {
        let buckets = match crawler {
            None => &self.totals,
            Some(name) => match self.crawlers.get(name) {
                Some(row) => &row.counts,
                None => return Vec::new(),
            },
        };
        let width = self.grid.bucket;
        let mut series = Vec::new();
        if since >= until {
            return series;
        }
        let mut at = Grid::start(since, width);
        while at < until && series.len() < 10_000 {
            let tally = buckets
                .items
                .iter()
                .find(|(start, _)| *start == at)
                .map_or_else(Tally::default, |(_, t)| *t);
            series.push((at, tally));
            at += width;
        }
        series
    }

    /// The width of a bucket, in seconds.
    pub fn bucket_seconds(&self) -> u64 {
        self.grid.bucket
    }

    /// Per crawler over the range, most requests first (then by name).
    pub fn crawlers(
        &self,
        since: u64,
        until: u64,
        operator: impl Fn(&str) -> String,
    ) -> Vec<CrawlerReport> {
        if since >= until {
            return Vec::new();
        }
        let mut rows: Vec<CrawlerReport> = self
            .crawlers
            .iter()
            .filter_map(|(name, row)| {
                let mut tally = Tally::default();
                for bucket in row.counts.within(since, until, self.grid.bucket) {
                    tally.add(bucket);
                }
                if tally.requests == 0 {
                    return None;
                }
                let mut clients = Distinct::default();
                for slice in row.clients.within(since, until, self.grid.client_slice) {
                    clients.merge(slice);
                }
                let mut readers = Distinct::default();
                for slice in row.readers.within(since, until, self.grid.client_slice) {
                    readers.merge(slice);
                }
                Some(CrawlerReport {
                    name: name.clone(),
                    category: row.category.clone(),
                    operator: operator(name),
                    tally,
                    distinct_clients: clients.estimate(),
                    clients_read_robots: readers.estimate(),
                    first_seen: row.first_seen,
                    last_seen: row.last_seen,
                })
            })
            .collect();
        rows.sort_by(|a, b| {
            b.tally
                .requests
                .cmp(&a.tally.requests)
                .then_with(|| a.name.cmp(&b.name))
        });
        rows
    }

    /// The violations over the range, most requested first, at most `reports.top` rows: those
    /// seen within it (a row's counts cover its whole time slice, a sixth of the window, so at
    /// the range's edges they may include requests just outside it).
    pub fn violations(&self, since: u64, until: u64) -> ViolationsReport {
        let mut merged: Violations = SpaceSaving::new(self.top);
        let mut dropped_bound = 0;
        if since >= until {
            return ViolationsReport {
                rows: Vec::new(),
                error_bound: 0,
            };
        }
        for slice in &self.violations {
            if slice.start + self.grid.violation_slice <= since || slice.start >= until {
                continue;
            }
            for entry in &slice.entries {
                merged.merge_entry(entry);
            }
            if slice.entries.len() >= slice.capacity {
                dropped_bound += slice
                    .entries
                    .iter()
                    .map(|entry| entry.count)
                    .min()
                    .unwrap_or(0);
            }
        }
        let error_bound = merged.error_bound() + dropped_bound;
        let rows = merged
            .top()
            .into_iter()
            .filter(|entry| entry.value.last_seen >= since && entry.value.first_seen < until)
            .map(|entry| ViolationReport {
                key: entry.key.clone(),
                count: entry.count,
                count_error: entry.error,
                distinct_clients: entry.value.clients.estimate(),
                first_seen: entry.value.first_seen,
                last_seen: entry.value.last_seen,
            })
            .collect();
        ViolationsReport { rows, error_bound }
    }
}

#[cfg(test)]
mod tests;
