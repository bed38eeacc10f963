//! The immutable snapshot the hot path reads: origins by host, their upstreams and block
//! responses, the crawler identifier, and per origin a slot holding the robots.txt copy in force.
//!
//! A request loads the snapshot once (one `ArcSwap` load) and never takes a lock. Fetches swap a
//! new [`RobotsCopy`] into an origin's [`RobotsSlot`]; config reloads build a whole new
//! [`Snapshot`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwap;
use foldhash::fast::RandomState;

use crate::client_address::AddressSet;
/// Routing looks hosts up in the form the config writes them in; the one normaliser is config's.
pub use crate::config::normalize_host;
use crate::config::{Config, OnUnreachable, OriginConfig, RobotsConfig, RobotsSource};
use crate::crawlers::feed::FeedStore;
use crate::crawlers::{Catalogue, CatalogueError, Identifier, RobotsTokenScanner};
use crate::metrics::{OriginRequestSeries, RobotsState};
use crate::purpose_controls::{AddedGroup, ControlPlan};
use crate::robots::{MatchMode, Robots, RobotsTxt};
use crate::upstream::Upstreams;

/// What robots.txt currently says for an origin, as a whole.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Policy {
    /// A robots.txt is in force; its rules decide.
    Rules(Arc<Robots>),
    /// No robots.txt applies (4xx, unreachable with `on_unreachable: allow`, ...).
    AllowAll,
    /// Crawlers may fetch nothing (unreachable with no good copy, the RFC 9309 default).
    DisallowAll,
}

impl Policy {
    /// What the policy says as a whole (the `state` label of `robotsguard_robots_state`).
    pub fn state(&self) -> RobotsState {
        match self {
            Policy::Rules(_) => RobotsState::Conditional,
            Policy::AllowAll => RobotsState::AllowAll,
            Policy::DisallowAll => RobotsState::DisallowAll,
        }
    }

    /// [`Policy::state`] as text.
    pub fn state_label(&self) -> &'static str {
        self.state().as_str()
    }
}

/// How the copy in force was obtained, as `/explain` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CopyOutcome {
    /// Read or fetched (or inline): its rules apply.
    Ok,
    /// The origin said robots.txt does not exist (4xx, or a redirect that was not followed).
    Unavailable,
    /// The source could not be read and no good copy exists.
    Unreachable,
    /// Not fetched yet.
    Pending,
}

impl CopyOutcome {
    /// The word `/explain` shows.
    pub fn as_str(self) -> &'static str {
        match self {
            CopyOutcome::Ok => "ok",
            CopyOutcome::Unavailable => "unavailable",
            CopyOutcome::Unreachable => "unreachable",
            CopyOutcome::Pending => "pending",
        }
    }
}

/// One robots.txt copy and how it was obtained.
#[derive(Debug, Clone)]
pub struct RobotsCopy {
    /// What it says: parsed rules, or allow/disallow everything.
    pub policy: Policy,
    /// Product tokens the file names, to recognise crawlers missing from the catalogue.
    pub scanner: RobotsTokenScanner,
    /// The raw body in force (empty for allow/disallow-all outcomes).
    pub body: bytes::Bytes,
    /// How it was obtained.
    pub outcome: CopyOutcome,
    /// Why this policy applies, for `/explain` and logs.
    pub reason: String,
    /// When it was fetched (or read), or confirmed by a 304.
    pub fetched_at: Option<SystemTime>,
    /// The status of the latest answer, when it came over HTTP.
    pub http_status: Option<u16>,
    /// What went wrong with the latest fetch, when it failed and this copy was kept.
    pub last_error: Option<String>,
    /// When that fetch failed.
    pub last_error_at: Option<SystemTime>,
    /// Validators for conditional refreshes.
    pub etag: Option<String>,
    /// See `etag`.
    pub last_modified: Option<String>,
    /// `Cache-Control: max-age` of the answer: refresh no later than this.
    pub max_age: Option<std::time::Duration>,
    /// Where the copy came from (URL and upstream, file path, or inline).
    pub source: String,
    /// When the source first failed in the current run of failures.
    pub unreachable_since: Option<SystemTime>,
    /// When the origin first answered 4xx, or a 2xx with no rule, while this copy was kept: a
    /// second such answer at least a minute later confirms that the rules are gone.
    pub unavailable_since: Option<SystemTime>,
    /// Since when this content (body and policy) has been in force: `Last-Modified` when
    /// robotsguard serves it.
    pub content_since: SystemTime,
    /// What robotsguard answers `GET /robots.txt` with (`robots.serve`), made on first use.
    served: std::sync::OnceLock<ServedRobots>,
    /// The trap paths whose `Disallow:` lines this copy carries in every group (`traps`): in its
    /// body when it has rules, in what is served when it has none.
    pub traps: Arc<[String]>,
    /// The control-token plan applied to this copy (empty: none was).
    pub controls: Arc<ControlPlan>,
    /// The groups robotsguard added for control tokens ([`crate::purpose_controls`]): at the
    /// end of its body when it has rules, of what is served when it has none.
    pub added_groups: Arc<[AddedGroup]>,
}

/// The robots.txt robotsguard serves for a copy: its bytes, or for a policy without a file the
/// text that says the same, and a strong validator of them.
#[derive(Debug, Clone)]
pub struct ServedRobots {
    /// The bytes served.
    pub body: bytes::Bytes,
    /// A quoted entity tag, the same in every replica for the same bytes.
    pub etag: String,
}

impl RobotsCopy {
    /// A copy from robots.txt bytes, compiled for enforcement (canonical matching).
    pub fn from_body(
        body: bytes::Bytes,
        max_size: usize,
        outcome: CopyOutcome,
        reason: String,
    ) -> RobotsCopy {
        let parsed = RobotsTxt::parse_with_limit(&body, max_size);
        let names = parsed.agent_names();
        let rules = Arc::new(Robots::compile(&parsed, MatchMode::Canonical));
        RobotsCopy {
            scanner: RobotsTokenScanner::new(names.iter().map(String::as_str)),
            body,
            ..RobotsCopy::without_rules(Policy::Rules(rules), outcome, reason)
        }
    }

    /// [`RobotsCopy::from_body`], taking the compiled rules of `previous` when it was built from
    /// the same bytes. A watched directory sees changes to other files in it, and an origin
    /// mostly answers a refresh with the file it sent last time; either then costs a comparison
    /// instead of a parse and compile (milliseconds for a large file).
    pub fn from_body_or_previous(
        body: bytes::Bytes,
        max_size: usize,
        outcome: CopyOutcome,
        reason: String,
        previous: &RobotsCopy,
    ) -> RobotsCopy {
        match &previous.policy {
            Policy::Rules(rules) if previous.body == body => RobotsCopy {
                scanner: previous.scanner.clone(),
                body,
                content_since: previous.content_since,
                ..RobotsCopy::without_rules(Policy::Rules(rules.clone()), outcome, reason)
            },
            _ => RobotsCopy::from_body(body, max_size, outcome, reason),
        }
    }

    /// A copy with no file behind it: `policy` is allow or disallow everything.
    pub fn without_rules(policy: Policy, outcome: CopyOutcome, reason: String) -> RobotsCopy {
        RobotsCopy {
            policy,
            scanner: RobotsTokenScanner::new(std::iter::empty()),
            body: bytes::Bytes::new(),
            outcome,
            reason,
            fetched_at: Some(SystemTime::now()),
            http_status: None,
            last_error: None,
            last_error_at: None,
            etag: None,
            last_modified: None,
            max_age: None,
            source: String::new(),
            unreachable_since: None,
            unavailable_since: None,
            content_since: SystemTime::now(),
            served: std::sync::OnceLock::new(),
            traps: Arc::from(Vec::new()),
            controls: Arc::default(),
            added_groups: Arc::from(Vec::new()),
        }
    }

    /// What robotsguard answers `GET /robots.txt` with when it serves this copy.
    pub fn served(&self) -> &ServedRobots {
        self.served.get_or_init(|| {
            let body = match &self.policy {
                Policy::Rules(_) => self.body.clone(),
                Policy::DisallowAll | Policy::AllowAll => {
                    let disallow_all = matches!(self.policy, Policy::DisallowAll);
                    let text = crate::traps::without_rules_text(disallow_all, &[]);
                    let text = crate::purpose_controls::with_groups(&text, &self.added_groups);
                    bytes::Bytes::from(if self.traps.is_empty() {
                        text
                    } else {
                        crate::traps::with_trap_lines(&text, &self.traps)
                    })
                }
            };
            // SipHash with fixed keys: deterministic, so replicas agree on the tag.
            let mut hasher = std::hash::DefaultHasher::new();
            std::hash::Hash::hash(&body[..], &mut hasher);
            let etag = format!("\"rg-{:016x}\"", std::hash::Hasher::finish(&hasher));
            ServedRobots { body, etag }
        })
    }

    /// The policy while no outcome is known yet, or when the source cannot be read and no good
    /// copy exists: what `on_unreachable` says.
    pub fn unreachable(
        on_unreachable: OnUnreachable,
        reason: String,
        outcome: CopyOutcome,
    ) -> RobotsCopy {
        let policy = match on_unreachable {
            OnUnreachable::Disallow => Policy::DisallowAll,
            OnUnreachable::Allow => Policy::AllowAll,
        };
        RobotsCopy::without_rules(policy, outcome, reason)
    }

    /// A copy worth keeping when the source fails: a parsed robots.txt, or a definite
    /// "unavailable" answer (4xx), as opposed to a placeholder or an earlier failure.
    pub fn is_good(&self) -> bool {
        self.has_rules() || self.outcome == CopyOutcome::Unavailable
    }

    /// Whether robotsguard must answer `/robots.txt` with this copy itself: it carries lines the
    /// origin's file does not have (trap paths, groups for control tokens).
    pub fn carries_additions(&self) -> bool {
        !self.traps.is_empty() || !self.added_groups.is_empty()
    }

    /// Whether it is a parsed file (which may hold no rule at all).
    pub fn has_rules(&self) -> bool {
        matches!(self.policy, Policy::Rules(_))
    }

    /// `Allow` and `Disallow` lines of the parsed file; 0 without one.
    pub fn rule_count(&self) -> usize {
        match &self.policy {
            Policy::Rules(robots) => robots.rule_count(),
            _ => 0,
        }
    }
}

/// Where an origin's robots.txt copy lives. Shared between snapshots while the origin's robots
/// settings and upstreams stay the same, so a config reload keeps the copy.
#[derive(Debug)]
pub struct RobotsSlot {
    current: ArcSwap<RobotsCopy>,
    /// Wakes the refresh loop early (a client saw a different robots.txt through the proxy).
    pub refresh_requested: tokio::sync::Notify,
    /// Set once the first real outcome (not the start-up placeholder) is stored.
    ready: AtomicBool,
    /// The settings the copy was obtained with: a reload with other settings gets a new slot.
    pub settings: RobotsConfig,
    /// The copies in force before the current one within [`HISTORY`], for "disallowed by every
    /// robots.txt in force over the last 24 hours".
    history: std::sync::Mutex<History>,
    /// The origin's trap paths (`traps`): every copy stored here carries their lines.
    pub traps: Arc<[String]>,
    /// What the origin's config asks of groups for control tokens: every copy stored here
    /// carries the groups it adds.
    pub controls: Arc<ControlPlan>,
}

/// How far back earlier robots.txt copies are kept: RFC 9309 lets crawlers cache robots.txt for
/// up to 24 hours, so a rule younger than that may not have reached a crawler yet.
pub const HISTORY: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// Earlier copies kept at most (a robots.txt that changes more often than this in a day is not
/// treated as settled: see [`RobotsSlot::throughout_history`]).
pub const HISTORY_COPIES: usize = 64;

#[derive(Debug)]
struct History {
    /// Earlier copies with when each stopped being in force, oldest first.
    earlier: std::collections::VecDeque<(Arc<RobotsCopy>, std::time::Instant)>,
    /// The latest time a copy was dropped for [`HISTORY_COPIES`]: nothing before it is known.
    forgotten_until: Option<std::time::Instant>,
    /// Copies other replicas (and this one) had in force, from the shared state store, with
    /// when each stopped being in force.
    shared: Vec<(Arc<RobotsCopy>, SystemTime)>,
    /// Until when the shared store dropped copies for [`HISTORY_COPIES`].
    shared_forgotten_until: Option<SystemTime>,
    /// Copies that stopped being in force here and are not yet in the shared store (at most
    /// [`HISTORY_COPIES`], the newest).
    unpublished: std::collections::VecDeque<(Arc<RobotsCopy>, SystemTime)>,
    /// Every copy in force over the last [`HISTORY`], in order, with when it took effect (a
    /// re-fetch of the same content updates the entry): what the reports show.
    timeline: std::collections::VecDeque<(Arc<RobotsCopy>, SystemTime)>,
}

/// A robots.txt copy that stopped being in force, and when.
pub type EndedCopy = (Arc<RobotsCopy>, SystemTime);

impl History {
    /// Records `copy` as in force from now on.
    fn took_effect(&mut self, copy: Arc<RobotsCopy>) {
        let now = SystemTime::now();
        match self.timeline.back_mut() {
            Some((last, _)) if same_rules(last, &copy) && last.outcome == copy.outcome => {
                *last = copy;
            }
            _ => self.timeline.push_back((copy, now)),
        }
        // An entry is kept while the one after it took effect within the last day.
        while self.timeline.len() > HISTORY_COPIES
            || self.timeline.get(1).is_some_and(|(_, next_since)| {
                now.duration_since(*next_since)
                    .is_ok_and(|age| age > HISTORY)
            })
        {
            self.timeline.pop_front();
        }
    }

    /// Records that `copy` stopped being in force at `now` (and is to be shared).
    fn end(&mut self, copy: Arc<RobotsCopy>, now: std::time::Instant) {
        self.unpublished
            .push_back((copy.clone(), SystemTime::now()));
        if self.unpublished.len() > HISTORY_COPIES {
            self.unpublished.pop_front();
        }
        // One entry per content, with its latest end: a copy that came back (or a reload that
        // ended the same rules again) must not use up the copies kept.
        self.earlier
            .retain(|(earlier, _)| !same_rules(earlier, &copy));
        self.earlier.push_back((copy, now));
        while let Some((_, until)) = self.earlier.front() {
            let expired = now.saturating_duration_since(*until) > HISTORY;
            if !expired && self.earlier.len() <= HISTORY_COPIES {
                break;
            }
            if !expired {
                self.forgotten_until = Some(*until);
            }
            self.earlier.pop_front();
        }
    }
}

impl RobotsSlot {
    fn new(settings: RobotsConfig, traps: Arc<[String]>, controls: Arc<ControlPlan>) -> RobotsSlot {
        let initial = match &settings.source {
            RobotsSource::Inline { text } => {
                let mut copy = RobotsCopy::from_body(
                    bytes::Bytes::from(text.clone().into_bytes()),
                    settings.max_size,
                    CopyOutcome::Ok,
                    "inline robots.txt from the config".to_string(),
                );
                copy.source = "inline (config)".to_string();
                with_additions(copy, &traps, &controls, settings.max_size, None)
            }
            _ => {
                let copy = RobotsCopy::unreachable(
                    settings.on_unreachable,
                    "robots.txt not fetched yet".to_string(),
                    CopyOutcome::Pending,
                );
                with_additions(copy, &traps, &controls, settings.max_size, None)
            }
        };
        let ready = matches!(settings.source, RobotsSource::Inline { .. });
        let initial = Arc::new(initial);
        let mut timeline = std::collections::VecDeque::new();
        if ready {
            timeline.push_back((initial.clone(), SystemTime::now()));
        }
        RobotsSlot {
            current: ArcSwap::new(initial),
            refresh_requested: tokio::sync::Notify::new(),
            ready: AtomicBool::new(ready),
            settings,
            history: std::sync::Mutex::new(History {
                earlier: std::collections::VecDeque::new(),
                forgotten_until: None,
                shared: Vec::new(),
                shared_forgotten_until: None,
                unpublished: std::collections::VecDeque::new(),
                timeline,
            }),
            traps,
            controls,
        }
    }

    /// A slot for new settings of an origin that had `old`: what was in force before stays in
    /// the 24-hour history (a rule added by a config reload is as young as any other), the copy
    /// `old` had in force included, ended now.
    fn succeeding(
        old: &RobotsSlot,
        settings: RobotsConfig,
        traps: Arc<[String]>,
        controls: Arc<ControlPlan>,
    ) -> RobotsSlot {
        let slot = RobotsSlot::new(settings, traps, controls);
        let (Ok(old_history), Ok(mut history)) = (old.history.lock(), slot.history.lock()) else {
            return slot;
        };
        history.earlier = old_history.earlier.clone();
        history.forgotten_until = old_history.forgotten_until;
        history.shared = old_history.shared.clone();
        history.shared_forgotten_until = old_history.shared_forgotten_until;
        history.unpublished = old_history.unpublished.clone();
        let initial = history.timeline.pop_back();
        history.timeline = old_history.timeline.clone();
        drop(old_history);
        if let Some((copy, _)) = initial {
            history.took_effect(copy);
        }
        let ended = old.current();
        if ended.outcome != CopyOutcome::Pending {
            history.end(ended, std::time::Instant::now());
        }
        drop(history);
        slot
    }

    /// `copy` with the slot's additions: trap lines in every group and groups for control
    /// tokens ([`with_additions`]).
    fn with_additions(&self, copy: RobotsCopy) -> RobotsCopy {
        let current = self.current();
        with_additions(
            copy,
            &self.traps,
            &self.controls,
            self.settings.max_size,
            Some(&current),
        )
    }

    /// The copy in force.
    pub fn current(&self) -> Arc<RobotsCopy> {
        self.current.load_full()
    }

    /// Stores a new outcome and marks the slot ready.
    pub fn store(&self, copy: RobotsCopy) {
        let new = Arc::new(self.with_additions(copy));
        let old = self.current.swap(new.clone());
        self.ready.store(true, Ordering::Release);
        if let Ok(mut history) = self.history.lock() {
            history.took_effect(new.clone());
        }
        // A re-fetch of the same robots.txt is not a change of what is in force; nor is the
        // start-up placeholder a robots.txt anyone read.
        if old.outcome == CopyOutcome::Pending || same_rules(&old, &new) {
            return;
        }
        if let Ok(mut history) = self.history.lock() {
            history.end(old, std::time::Instant::now());
        }
    }

    /// Whether every copy in force over the last [`HISTORY`] before `now`, the current one
    /// included, satisfies `check`, with none of those hours forgotten. The history starts
    /// with the process (a reload that changes the origin's robots.txt settings carries it
    /// over): a process younger than a day looks back to its start.
    pub fn throughout_history(
        &self,
        now: std::time::Instant,
        check: impl Fn(&RobotsCopy) -> bool,
    ) -> bool {
        if !check(&self.current()) {
            return false;
        }
        let wall = SystemTime::now();
        let recent = |until: SystemTime| wall.duration_since(until).unwrap_or_default() <= HISTORY;
        // The copies are gathered under the lock and checked after it: a check matches rules.
        let copies: Vec<Arc<RobotsCopy>> = {
            let Ok(history) = self.history.lock() else {
                return false;
            };
            let forgotten_here = history
                .forgotten_until
                .is_some_and(|until| now.saturating_duration_since(until) <= HISTORY);
            let forgotten_there = history.shared_forgotten_until.is_some_and(recent);
            if forgotten_here || forgotten_there {
                return false;
            }
            let mut copies: Vec<Arc<RobotsCopy>> = history
                .earlier
                .iter()
                .filter(|(_, until)| now.saturating_duration_since(*until) <= HISTORY)
                .map(|(copy, _)| copy.clone())
                .collect();
            // This process's own copies come back from the store too: checked twice, which is
            // cheaper than comparing bodies to skip them.
            copies.extend(
                history
                    .shared
                    .iter()
                    .filter(|(_, until)| recent(*until))
                    .map(|(copy, _)| copy.clone()),
            );
            copies
        };
        copies.iter().all(|copy| check(copy))
    }

    /// The copies that stopped being in force here since the last call, for the shared store.
    pub fn take_unpublished(&self) -> Vec<EndedCopy> {
        self.history
            .lock()
            .map(|mut history| history.unpublished.drain(..).collect())
            .unwrap_or_default()
    }

    /// Puts back copies [`RobotsSlot::take_unpublished`] gave that could not be published.
    pub fn keep_unpublished(&self, copies: Vec<EndedCopy>) {
        if let Ok(mut history) = self.history.lock() {
            for copy in copies.into_iter().rev() {
                if history.unpublished.len() >= HISTORY_COPIES {
                    break;
                }
                history.unpublished.push_front(copy);
            }
        }
    }

    /// The copies the shared store holds for this origin over the last [`HISTORY`] (all
    /// replicas'), which [`RobotsSlot::throughout_history`] checks too.
    pub fn set_shared_history(&self, copies: Vec<EndedCopy>, forgotten_until: Option<SystemTime>) {
        if let Ok(mut history) = self.history.lock() {
            history.shared = copies;
            history.shared_forgotten_until = forgotten_until;
        }
    }

    /// Every copy in force over the last day, oldest first, with when each took effect.
    pub fn timeline(&self) -> Vec<(Arc<RobotsCopy>, SystemTime)> {
        self.history
            .lock()
            .map(|history| history.timeline.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The shared history in force (to reuse copies already parsed).
    pub fn shared_history(&self) -> Vec<EndedCopy> {
        self.history
            .lock()
            .map(|history| history.shared.clone())
            .unwrap_or_default()
    }

    /// Whether a first outcome has been stored.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }
}

/// Whether two copies say the same: the same body with the same outcome, or the same
/// rule-less policy.
fn same_rules(a: &RobotsCopy, b: &RobotsCopy) -> bool {
    a.policy.state_label() == b.policy.state_label() && a.body == b.body
}

/// `copy` carrying `traps`' lines in every group and, after its own lines, the groups
/// `controls` adds for control tokens (a copy that already carries both, one kept after a
/// failed fetch, is returned as it is). The compiled rules of `current` (the copy in force) are
/// taken again when the text with the additions is the same.
fn with_additions(
    mut copy: RobotsCopy,
    traps: &Arc<[String]>,
    controls: &Arc<ControlPlan>,
    max_size: usize,
    current: Option<&RobotsCopy>,
) -> RobotsCopy {
    let applied = *copy.traps == **traps && *copy.controls == **controls;
    if applied || (traps.is_empty() && controls.is_empty()) {
        return copy;
    }
    copy.traps = traps.clone();
    copy.controls = controls.clone();
    let rules = match &copy.policy {
        Policy::Rules(rules) => Some(rules.clone()),
        Policy::AllowAll | Policy::DisallowAll => None,
    };
    copy.added_groups = Arc::from(crate::purpose_controls::added_groups(
        controls,
        rules.as_deref(),
    ));
    if rules.is_some() {
        // The groups first, so that the trap lines go into them as into every other group.
        let with_groups = crate::purpose_controls::with_groups(&copy.body, &copy.added_groups);
        let body = bytes::Bytes::from(if traps.is_empty() {
            with_groups
        } else {
            crate::traps::with_trap_lines(&with_groups, traps)
        });
        let (policy, scanner, content_since) = match current.map(|c| (&c.policy, c)) {
            Some((Policy::Rules(rules), current)) if current.body == body => (
                Policy::Rules(rules.clone()),
                current.scanner.clone(),
                current.content_since,
            ),
            _ => {
                // The limit grows by what was added: the origin's file is cut where it was.
                let limit = max_size + (body.len() - copy.body.len().min(body.len()));
                let compiled =
                    RobotsCopy::from_body(body.clone(), limit, copy.outcome, String::new());
                (compiled.policy, compiled.scanner, copy.content_since)
            }
        };
        copy.policy = policy;
        copy.scanner = scanner;
        copy.content_since = content_since;
        copy.body = body;
    }
    copy
}

/// A configured origin with everything the hot path needs precomputed.
#[derive(Debug)]
pub struct Origin {
    /// Its settings, with `defaults` merged in.
    pub config: OriginConfig,
    /// Its upstreams' addresses and health.
    pub upstreams: Arc<Upstreams>,
    /// `policy.allow_clients`, built for lookups.
    pub allow_clients: AddressSet,
    /// Its robots.txt copy, shared across snapshots while its robots settings stay.
    pub robots: Arc<RobotsSlot>,
    /// This origin's per-request metric series.
    pub request_series: OriginRequestSeries,
    /// The CAs and client certificate of `upstream_tls`, read when the snapshot was built.
    pub(crate) upstream_tls: crate::upstream::tls::UpstreamTlsMaterial,
}

impl Origin {
    /// Its name, as metrics and logs label it.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The host robots.txt is fetched for (and upstream TLS names by default).
    pub fn primary_host(&self) -> &str {
        self.config.hosts.first().map_or("", String::as_str)
    }
}

/// Why a snapshot could not be built from a valid config.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// The crawler catalogue (built in plus `crawlers.extra`) is not usable.
    Catalogue(CatalogueError),
    /// An origin's upstream TLS files (`tls.ca`, `tls.client_cert`, `tls.client_key`) cannot be
    /// used.
    UpstreamTls(String),
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::Catalogue(e) => write!(f, "crawler catalogue: {e}"),
            BuildError::UpstreamTls(e) => write!(f, "upstream TLS: {e}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Catalogue(e) => Some(e),
            BuildError::UpstreamTls(_) => None,
        }
    }
}

/// Everything a request needs, immutable once built.
#[derive(Debug)]
pub struct Snapshot {
    /// The config it was built from.
    pub config: Arc<Config>,
    /// The crawler identifier the config asks for.
    pub identifier: Identifier,
    /// The origins, in config order.
    pub origins: Vec<Arc<Origin>>,
    /// Keyed by a fast seeded hash rather than SipHash: every request looks its Host up here,
    /// and its keys come from the config, so a client can only look up, never add collisions.
    by_host: HashMap<Box<[u8]>, usize, RandomState>,
    by_name: HashMap<String, usize, RandomState>,
    /// The catalogue feeds' copies in force, shared by every snapshot of the process.
    pub feeds: Arc<FeedStore>,
    /// The feeds' generation the identifier was built with.
    pub feeds_generation: u64,
}

impl Snapshot {
    /// Builds a snapshot. Origins whose robots settings match one in `previous` keep its robots
    /// slot (and so its copy); others start pending.
    pub fn build(config: Arc<Config>, previous: Option<&Snapshot>) -> Result<Snapshot, BuildError> {
        // Copies of feeds this config no longer names are left out of its catalogue (the feed
        // refresher forgets them once the snapshot is in force).
        let feeds = previous.map_or_else(Arc::default, |p| p.feeds.clone());
        let feeds_generation = feeds.generation();
        let identifier = build_identifier_with(&config, Some(&feeds))?;
        let mut origins = Vec::with_capacity(config.origins.len());
        let mut by_host = HashMap::default();
        // Looked up by name, so carrying 10,000 origins over stays linear.
        let previous_by_name: HashMap<&str, &Arc<Origin>> = previous
            .map(|snapshot| snapshot.origins.iter().map(|o| (o.name(), o)).collect())
            .unwrap_or_default();
        for origin_config in &config.origins {
            // The ban series exist from the start (a rate or an alert over them never sees a
            // missing series); the gauge keeps its value across a reload.
            let name = origin_config.name.as_str();
            crate::metrics::METRICS
                .bans
                .with_label_values(&[name])
                .inc_by(0);
            let _ = crate::metrics::METRICS
                .banned_clients
                .with_label_values(&[name]);
            crate::metrics::METRICS
                .banned_browser_requests
                .with_label_values(&[name])
                .inc_by(0);
            crate::metrics::METRICS
                .trap_hits
                .with_label_values(&[name])
                .inc_by(0);
            crate::metrics::METRICS
                .disguised_strikes
                .with_label_values(&[name])
                .inc_by(0);
            for signal in ["trap", "disguised", "robots_read"] {
                crate::metrics::METRICS
                    .third_party_requests
                    .with_label_values(&[name, signal])
                    .inc_by(0);
            }
            let previous = previous_by_name.get(origin_config.name.as_str());
            let traps = crate::traps::paths_for(&origin_config.traps, name);
            let controls = Arc::new(ControlPlan::for_origin(
                origin_config,
                identifier.catalogue(),
            ));
            let robots = previous
                .filter(|old| {
                    old.config.hosts.first() == origin_config.hosts.first()
                        && old.robots.settings == origin_config.robots
                        && old.robots.traps == traps
                        && old.robots.controls == controls
                        && old.config.upstreams == origin_config.upstreams
                        && old.config.upstream_tls == origin_config.upstream_tls
                })
                .map(|old| old.robots.clone())
                .unwrap_or_else(|| {
                    let settings = origin_config.robots.clone();
                    Arc::new(match previous {
                        Some(old) => RobotsSlot::succeeding(&old.robots, settings, traps, controls),
                        None => RobotsSlot::new(settings, traps, controls),
                    })
                });
            // A reload keeps what is known of unchanged upstreams (addresses, health); a new
            // or changed set is resolved now, and a name that does not resolve leaves only this
            // origin without upstreams.
            let upstreams = previous
                .filter(|old| {
                    old.upstreams.configured == origin_config.upstreams
                        && old.upstreams.health == origin_config.upstream_health
                })
                .map(|old| old.upstreams.clone())
                .unwrap_or_else(|| {
                    Arc::new(Upstreams::resolve_now(
                        &origin_config.name,
                        &origin_config.upstreams,
                        &origin_config.upstream_health,
                    ))
                });
            if let Some(error) = upstreams.resolution_error.load().as_deref() {
                tracing::warn!(
                    origin = %origin_config.name,
                    "upstream name does not resolve ({error}); the origin answers 502 until it does"
                );
            }
            let upstream_tls = match &origin_config.upstream_tls {
                Some(tls) => crate::upstream::tls::load(tls).map_err(|e| {
                    BuildError::UpstreamTls(format!("origin `{}`: {e}", origin_config.name))
                })?,
                None => Default::default(),
            };
            for host in &origin_config.hosts {
                by_host.insert(host.as_bytes().into(), origins.len());
            }
            origins.push(Arc::new(Origin {
                allow_clients: AddressSet::new(&origin_config.policy.allow_clients),
                config: origin_config.clone(),
                upstreams,
                robots,
                request_series: Default::default(),
                upstream_tls,
            }));
        }
        let by_name = origins
            .iter()
            .enumerate()
            .map(|(index, origin)| (origin.name().to_string(), index))
            .collect();
        Ok(Snapshot {
            config,
            identifier,
            origins,
            by_host,
            by_name,
            feeds,
            feeds_generation,
        })
    }

    /// The same snapshot with its catalogue rebuilt from the feeds' copies now in force: what a
    /// feed refresh installs. Origins, their robots.txt slots and upstreams are shared.
    pub fn with_fresh_catalogue(&self) -> Result<Snapshot, BuildError> {
        let feeds_generation = self.feeds.generation();
        let identifier = build_identifier_with(&self.config, Some(&self.feeds))?;
        // A feed entry may name control tokens: origins whose robots.txt additions change get
        // new slots, as a reload would give them.
        let controls_changed = self.origins.iter().any(|origin| {
            *origin.robots.controls
                != ControlPlan::for_origin(&origin.config, identifier.catalogue())
        });
        if controls_changed {
            return Snapshot::build(self.config.clone(), Some(self));
        }
        Ok(Snapshot {
            config: self.config.clone(),
            identifier,
            origins: self.origins.clone(),
            by_host: self.by_host.clone(),
            by_name: self.by_name.clone(),
            feeds: self.feeds.clone(),
            feeds_generation,
        })
    }

    /// The origin serving `host` (already normalised with [`normalize_host`]).
    pub fn origin_for(&self, host: &str) -> Option<&Arc<Origin>> {
        self.origin_for_bytes(host.as_bytes())
    }

    /// [`Snapshot::origin_for`] a host normalised with [`crate::config::normalize_host_bytes`].
    pub fn origin_for_bytes(&self, host: &[u8]) -> Option<&Arc<Origin>> {
        self.by_host.get(host).map(|&index| &self.origins[index])
    }

    /// The origin called `name`.
    pub fn origin_named(&self, name: &str) -> Option<&Arc<Origin>> {
        self.by_name.get(name).map(|&index| &self.origins[index])
    }

    /// Every origin has a first robots.txt outcome.
    pub fn is_ready(&self) -> bool {
        self.origins.iter().all(|origin| origin.robots.is_ready())
    }

    /// This snapshot with the origin `name` as a candidate would make it, for a preview:
    /// `config` (default: the origin's own) and `robots`, robots.txt bytes (default: the copy in
    /// force), in a slot of its own that nothing else sees, so that judging with the result
    /// changes no copy in force. Routing, upstreams and every other origin stay shared.
    /// `None` when there is no such origin.
    pub fn with_candidate(
        &self,
        name: &str,
        config: Option<OriginConfig>,
        robots: Option<bytes::Bytes>,
    ) -> Option<Snapshot> {
        let index = *self.by_name.get(name)?;
        let live = &self.origins[index];
        let config = config.unwrap_or_else(|| live.config.clone());
        let traps = crate::traps::paths_for(&config.traps, name);
        let controls = Arc::new(ControlPlan::for_origin(
            &config,
            self.identifier.catalogue(),
        ));
        let settings = config.robots.clone();
        let copy = match robots {
            Some(body) => {
                let mut copy = RobotsCopy::from_body(
                    body,
                    settings.max_size,
                    CopyOutcome::Ok,
                    "candidate robots.txt (preview)".to_string(),
                );
                copy.source = "preview".to_string();
                copy
            }
            // The copy in force already carries the live additions; taken as it is.
            None => (*live.robots.current()).clone(),
        };
        let copy = with_additions(copy, &traps, &controls, settings.max_size, None);
        let slot = RobotsSlot::new(settings, traps, controls);
        slot.current.store(Arc::new(copy));
        slot.ready.store(true, Ordering::Release);
        let mut origins = self.origins.clone();
        origins[index] = Arc::new(Origin {
            allow_clients: AddressSet::new(&config.policy.allow_clients),
            config,
            upstreams: live.upstreams.clone(),
            robots: Arc::new(slot),
            request_series: Default::default(),
            upstream_tls: live.upstream_tls.clone(),
        });
        Some(Snapshot {
            config: self.config.clone(),
            identifier: self.identifier.clone(),
            origins,
            by_host: self.by_host.clone(),
            by_name: self.by_name.clone(),
            feeds: self.feeds.clone(),
            feeds_generation: self.feeds_generation,
        })
    }
}

/// Reads every origin's upstream TLS files (`tls.ca`, `tls.client_cert`, `tls.client_key`) as
/// building a snapshot would, for `validate`.
pub fn check_upstream_tls(config: &Config) -> Result<(), BuildError> {
    for origin in &config.origins {
        if let Some(tls) = &origin.upstream_tls {
            crate::upstream::tls::load(tls)
                .map_err(|e| BuildError::UpstreamTls(format!("origin `{}`: {e}", origin.name)))?;
        }
    }
    Ok(())
}

/// The crawler identifier a config asks for: the catalogue (built in, plus `crawlers.extra`)
/// with its checks, and the generic rules.
pub fn build_identifier(config: &Config) -> Result<Identifier, BuildError> {
    build_identifier_with(config, None)
}

/// [`build_identifier`] with the feeds' copies in `feeds` merged in; counts the entries by
/// where they came from (`robotsguard_catalogue_entries`).
pub fn build_identifier_with(
    config: &Config,
    feeds: Option<&FeedStore>,
) -> Result<Identifier, BuildError> {
    let merged = config
        .crawlers
        .catalogue_defs_with(feeds)
        .map_err(BuildError::Catalogue)?;
    for line in &merged.dropped {
        tracing::debug!("catalogue feed entry left out: {line}");
    }
    if feeds.is_some() {
        report_refused_feed_entries(&config.crawlers.feeds, &merged.refused);
    }
    let defs = merged.defs;
    let mut counts: HashMap<String, i64> = HashMap::new();
    counts.insert("builtin".to_string(), 0);
    counts.insert("extra".to_string(), 0);
    for feed in &config.crawlers.feeds {
        counts.insert(feed.url.clone(), 0);
    }
    let extra_names: Vec<&str> = config
        .crawlers
        .extra
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    for def in &defs {
        let source = match &def.feed {
            Some(feed) => feed.as_str(),
            None if extra_names
                .iter()
                .any(|n| n.eq_ignore_ascii_case(&def.name)) =>
            {
                "extra"
            }
            None => "builtin",
        };
        *counts.entry(source.to_string()).or_insert(0) += 1;
    }
    let from_feeds = defs.iter().any(|def| def.feed.is_some());
    let catalogue = match Catalogue::new(defs) {
        Ok(catalogue) => catalogue,
        // Feed entries are checked one by one and clashes left out, so this is rare (the
        // automaton's size limit); a feed must never keep the config from loading.
        Err(e) if from_feeds => {
            tracing::warn!(
                "the crawler catalogue with its feeds is not usable ({e}); built without them"
            );
            return build_identifier_with(config, None);
        }
        Err(e) => return Err(BuildError::Catalogue(e)),
    };
    let identifier =
        Identifier::new(catalogue, config.crawlers.generic).map_err(BuildError::Catalogue)?;
    if feeds.is_some() {
        for (source, count) in counts {
            crate::metrics::METRICS
                .catalogue_entries
                .with_label_values(&[source.as_str()])
                .set(count);
        }
    }
    Ok(identifier)
}

/// How often one feed's refused entries are logged at most: a feed that changes at every
/// refresh must not fill the log.
const REFUSED_LINE_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Refused entries named in one log line at most (the rest are counted).
const REFUSED_NAMED: usize = 5;

/// The longest list of refused entries one line carries.
const REFUSED_LINE_CHARS: usize = 2048;

/// Sets `robotsguard_catalogue_feed_entries_refused` for each of `feeds` from `refused` (the
/// entries the feeds' rules keep out of the catalogue being built), and logs a feed's refusals
/// once when they change, at most once a minute per feed. Names and lists are the feed's
/// text: written escaped (`{:?}`, so a control character never ends the line) and cut.
fn report_refused_feed_entries(
    feeds: &[crate::config::FeedConfig],
    refused: &[crate::crawlers::feed::Refused],
) {
    use crate::crawlers::feed::RefusalReason;
    use std::hash::{Hash, Hasher};
    static SAID: std::sync::LazyLock<std::sync::Mutex<HashMap<String, (u64, std::time::Instant)>>> =
        std::sync::LazyLock::new(Default::default);
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    said.retain(|feed, _| feeds.iter().any(|f| f.url == *feed));
    for feed in feeds {
        let mine: Vec<&crate::crawlers::feed::Refused> =
            refused.iter().filter(|r| r.feed == feed.url).collect();
        for reason in RefusalReason::ALL {
            let count = mine.iter().filter(|r| r.reason == reason).count();
            crate::metrics::METRICS
                .catalogue_feed_entries_refused
                .with_label_values(&[feed.url.as_str(), reason.as_str()])
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for entry in &mine {
            (&entry.name, entry.reason).hash(&mut hasher);
        }
        let digest = hasher.finish();
        let now = std::time::Instant::now();
        let due = match said.get(&feed.url) {
            Some((before, _)) if *before == digest => false,
            Some((_, at)) => now.duration_since(*at) >= REFUSED_LINE_EVERY,
            None => !mine.is_empty(),
        };
        if !due {
            continue;
        }
        said.insert(feed.url.clone(), (digest, now));
        if mine.is_empty() {
            tracing::info!(feed = %feed.url, "catalogue feed: no entry is refused any more");
            continue;
        }
        let named: Vec<String> = mine
            .iter()
            .take(REFUSED_NAMED)
            .map(|entry| format!("{:?}: {}", entry.name, entry.detail))
            .collect();
        let more = mine.len().saturating_sub(REFUSED_NAMED);
        let text = format!(
            "{}{}",
            named.join("; "),
            if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            }
        );
        tracing::warn!(
            feed = %feed.url,
            refused = mine.len(),
            "catalogue feed: {} entries refused, the rest of the feed applies: {}",
            mine.len(),
            text.chars().take(REFUSED_LINE_CHARS).collect::<String>()
        );
    }
}

/// The snapshot in force, shared by the proxy, the admin listener and the background tasks.
///
/// Requests load it once (lock-free). Whoever installs a new snapshot (a config reload) calls
/// [`Live::install`], which also bumps `generation` so background tasks (the robots.txt
/// refresher) start fetching new origins and stop fetching removed ones.
#[derive(Debug)]
pub struct Live {
    snapshot: ArcSwap<Snapshot>,
    generation: tokio::sync::watch::Sender<u64>,
    /// Snapshots installed so far, counted after each is in force (see [`Live::installs`]).
    installs: AtomicU64,
}

impl Live {
    /// Puts `snapshot` in force.
    pub fn new(snapshot: Snapshot) -> Live {
        Live {
            snapshot: ArcSwap::from_pointee(snapshot),
            generation: tokio::sync::watch::Sender::new(0),
            installs: AtomicU64::new(0),
        }
    }

    /// The snapshot in force.
    pub fn load(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    /// The snapshot in force, for a short read: no reference is counted (see
    /// [`arc_swap::Guard`]); not to be held across an await.
    pub fn peek(&self) -> arc_swap::Guard<Arc<Snapshot>> {
        self.snapshot.load()
    }

    /// Swaps in a new snapshot; requests already running finish on the one they loaded.
    pub fn install(&self, snapshot: Snapshot) {
        self.snapshot.store(Arc::new(snapshot));
        self.installs.fetch_add(1, Ordering::Release);
        self.generation.send_modify(|generation| *generation += 1);
    }

    /// Installs `snapshot` only if `expected` is still the one in force (a feed refresh must not
    /// undo a reload that happened while it built); `false`: it was not installed.
    pub fn install_if_current(&self, expected: &Arc<Snapshot>, snapshot: Snapshot) -> bool {
        let previous = self.snapshot.compare_and_swap(expected, Arc::new(snapshot));
        let installed = Arc::ptr_eq(&previous, expected);
        if installed {
            self.installs.fetch_add(1, Ordering::Release);
            self.generation.send_modify(|generation| *generation += 1);
        }
        installed
    }

    /// How many snapshots were installed so far. One atomic load: a reader that kept a value
    /// read from the snapshot at count `n` knows it is still the one in force while this is `n`
    /// (a snapshot installed after the count was read shows in the next count).
    pub fn installs(&self) -> u64 {
        self.installs.load(Ordering::Acquire)
    }

    /// The `limits` in force, read through `kept` (the limits read last and the
    /// [`Live::installs`] count they were read at): the snapshot is loaded again only when
    /// another was installed since.
    pub fn limits_kept(
        &self,
        kept: &mut Option<(u64, crate::config::Limits)>,
    ) -> crate::config::Limits {
        let installs = self.installs();
        match kept {
            Some((seen, limits)) if *seen == installs => *limits,
            _ => {
                let limits = self.peek().config.limits;
                *kept = Some((installs, limits));
                limits
            }
        }
    }

    /// Changes whenever a new snapshot is installed.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.generation.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot_with_header_timeout(seconds: u64) -> Snapshot {
        let yaml = format!(
            "limits: {{header_timeout: {seconds}s}}\norigins:\n  - name: shop\n    hosts: \
             [shop.example]\n    upstream: \"127.0.0.1:9\"\n    robots: {{source: inline, text: \
             \"User-agent: *\\nDisallow: /private\\n\"}}\n"
        );
        let config = crate::config::load_str(&yaml, "test.yaml", std::path::Path::new("/"))
            .unwrap_or_else(|e| panic!("{e}"));
        Snapshot::build(Arc::new(config), None).expect("snapshot")
    }

    /// A connection keeps the limits it read, and reads them again after every install, whether
    /// by a reload or by a refresh that checked it was still current.
    #[test]
    fn kept_limits_are_read_again_once_another_snapshot_is_installed() {
        let live = Live::new(snapshot_with_header_timeout(10));
        let mut kept = None;
        let seconds = |limits: crate::config::Limits| limits.header_timeout.as_secs();
        assert_eq!(seconds(live.limits_kept(&mut kept)), 10);
        assert_eq!(kept.map(|(installs, _)| installs), Some(0));
        live.install(snapshot_with_header_timeout(3));
        assert_eq!(seconds(live.limits_kept(&mut kept)), 3);
        assert_eq!(seconds(live.limits_kept(&mut kept)), 3);
        let current = live.load();
        assert!(live.install_if_current(&current, snapshot_with_header_timeout(7)));
        assert_eq!(seconds(live.limits_kept(&mut kept)), 7);
        // Not installed: the kept limits stay.
        assert!(!live.install_if_current(&current, snapshot_with_header_timeout(1)));
        assert_eq!(seconds(live.limits_kept(&mut kept)), 7);
        assert_eq!(live.installs(), 2);
    }

    fn compiled(copy: &RobotsCopy) -> &Arc<Robots> {
        match &copy.policy {
            Policy::Rules(rules) => rules,
            _ => panic!("expected compiled rules, got another policy"),
        }
    }

    #[test]
    fn same_bytes_reuse_the_compiled_rules_and_other_bytes_compile_afresh() {
        let body = bytes::Bytes::from_static(b"User-agent: FooBot\nDisallow: /private\n");
        let first = RobotsCopy::from_body(body.clone(), 1 << 20, CopyOutcome::Ok, "first".into());
        let same = RobotsCopy::from_body_or_previous(
            body,
            1 << 20,
            CopyOutcome::Ok,
            "again".into(),
            &first,
        );
        assert!(Arc::ptr_eq(compiled(&first), compiled(&same)));
        assert_eq!(same.reason, "again");
        assert!(same.scanner.longest_whole_word(b"FooBot/1.0").is_some());

        let changed = bytes::Bytes::from_static(b"User-agent: FooBot\nDisallow: /\n");
        let other = RobotsCopy::from_body_or_previous(
            changed.clone(),
            1 << 20,
            CopyOutcome::Ok,
            "new".into(),
            &first,
        );
        assert!(!Arc::ptr_eq(compiled(&first), compiled(&other)));
        assert_eq!(other.body, changed);

        // A previous outcome without rules (say, unreachable) never stands in for a file.
        let none =
            RobotsCopy::without_rules(Policy::AllowAll, CopyOutcome::Unavailable, "404".into());
        let fresh = RobotsCopy::from_body_or_previous(
            changed,
            1 << 20,
            CopyOutcome::Ok,
            "back".into(),
            &none,
        );
        assert!(matches!(fresh.policy, Policy::Rules(_)));
    }

    #[test]
    fn control_groups_and_trap_lines_are_served_enforced_and_name_no_crawler() {
        let yaml = "origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \
                    \"127.0.0.1:9\"\n    content_signals: {action: enforce}\n    traps: \
                    {enabled: true, paths: [/trap/]}\n    robots: {source: inline, text: \
                    \"User-agent: *\\nContent-Usage: /blog/ train-ai=n\\nDisallow: \
                    /private\\n\"}\n";
        let config = crate::config::load_str(yaml, "test.yaml", std::path::Path::new("/"))
            .unwrap_or_else(|e| panic!("{e}"));
        let snapshot = Snapshot::build(Arc::new(config), None).expect("snapshot");
        let copy = snapshot.origins[0].robots.current();
        let served = String::from_utf8_lossy(&copy.served().body).into_owned();
        // The path-scoped refusal becomes the token's rule, and the trap line reaches the
        // added group as every other.
        assert!(
            served.contains("User-agent: Google-Extended\nDisallow: /trap/\nDisallow: /blog/\n"),
            "{served}"
        );
        assert!(copy.carries_additions());
        let Policy::Rules(rules) = &copy.policy else {
            panic!("rules")
        };
        assert!(!rules.verdict(&["google-extended"], b"/blog/x").allowed);
        // `/private` is still disallowed to every group a crawler may be named by: the token's
        // group, which allows it, names none.
        assert!(crate::enforce::disallowed_to_every_group(
            &copy,
            b"/private"
        ));
        assert!(!crate::enforce::disallowed_to_every_group(&copy, b"/open"));
        // A copy stored later (a refresh) gets the same additions once, not twice.
        let slot = &snapshot.origins[0].robots;
        slot.store((*copy).clone());
        assert_eq!(slot.current().body, copy.body);
    }
}
