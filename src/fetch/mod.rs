//! Getting each origin's robots.txt — over HTTP from the origin's upstream (RFC 9309), from a
//! watched file, or inline from the config — and keeping it fresh without ever making a request
//! wait: requests read the copy in force; one task per origin replaces it.

mod file;
mod origin;

use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime};

use pingora::connectors::http::Connector;

pub use crate::net::http::Validators;
pub use file::FileWatcher;
pub use origin::{FetchOutcome, Fetched, Kept, CONFIRM_UNAVAILABLE_AFTER};

use crate::config::RobotsSource;
use crate::metrics::METRICS;
use crate::snapshot::{Live, Origin, RobotsCopy, Snapshot};

/// How many origins are fetched at once at start-up, so 1,000 origins do not open 1,000
/// connections in the same instant.
pub const MAX_CONCURRENT_FETCHES: usize = 32;

/// The first retry after a failure; it doubles up to the refresh interval.
pub const FIRST_RETRY: Duration = Duration::from_secs(10);

/// Early refreshes asked for by clients seeing a different robots.txt are at least this far apart.
const MIN_EARLY_REFRESH: Duration = Duration::from_secs(5);

/// Obtains the copy for an origin from its configured source (not inline).
pub async fn fetch_once(connector: &Connector, origin: &Origin) -> Option<Fetched> {
    match &origin.robots.settings.source {
        RobotsSource::Origin { url } => {
            Some(origin::fetch(connector, origin, url.as_deref()).await)
        }
        RobotsSource::File { path } => Some(file::read(origin, path).await),
        RobotsSource::Inline { .. } => None,
    }
}

/// What a refresh on demand came to.
#[derive(Debug)]
pub struct Refreshed {
    /// How the fetch (or read) went; `None` for an inline robots.txt (nothing to fetch).
    pub outcome: Option<FetchOutcome>,
    /// Whether the copy in force changed (its body or what it says as a whole).
    pub changed: bool,
    /// The copy in force now.
    pub copy: Arc<RobotsCopy>,
}

/// Refreshes on demand at once, at most (each is one fetch; the rest wait their turn).
const CONCURRENT_FORCED: usize = 4;

static FORCED: LazyLock<tokio::sync::Semaphore> =
    LazyLock::new(|| tokio::sync::Semaphore::new(CONCURRENT_FORCED));

/// One connector for refreshes on demand (connections to origins are pooled across them).
static FORCED_CONNECTOR: LazyLock<Connector> = LazyLock::new(|| Connector::new(None));

/// Fetches (or reads) `origin`'s robots.txt now and puts the result in force exactly as the
/// scheduled refresh does (counted, logged, the last good copy kept through a failure): the
/// admin endpoint's `POST /robots/refresh` and SIGHUP. The scheduled refresh keeps its own
/// timing.
pub async fn refresh_now(origin: &Origin) -> Refreshed {
    if matches!(origin.robots.settings.source, RobotsSource::Inline { .. }) {
        return Refreshed {
            outcome: None,
            changed: false,
            copy: origin.robots.current(),
        };
    }
    let _turn = FORCED.acquire().await.ok();
    let Some(fetched) = fetch_once(&FORCED_CONNECTOR, origin).await else {
        return Refreshed {
            outcome: None,
            changed: false,
            copy: origin.robots.current(),
        };
    };
    count(origin, fetched.outcome);
    tell(origin, &fetched);
    let changed = store(origin, fetched.copy.clone());
    if changed || fetched.copy.last_error.is_some() {
        log_outcome(origin, &fetched.copy);
    }
    Refreshed {
        outcome: Some(fetched.outcome),
        changed,
        copy: origin.robots.current(),
    }
}

/// [`refresh_now`] for every origin of `snapshot`, [`MAX_CONCURRENT_FETCHES`] at a time; returns
/// how many were fetched or read, how many changed, and how many failed.
pub async fn refresh_all(snapshot: &Snapshot) -> (usize, usize, usize) {
    use futures::StreamExt as _;
    let origins: Vec<Arc<Origin>> = snapshot.origins.clone();
    let results: Vec<Refreshed> = futures::stream::iter(origins)
        .map(|origin| async move { refresh_now(&origin).await })
        .buffer_unordered(MAX_CONCURRENT_FETCHES)
        .collect()
        .await;
    let fetched = results.iter().filter(|r| r.outcome.is_some()).count();
    let changed = results.iter().filter(|r| r.changed).count();
    let failed = results
        .iter()
        .filter(|r| r.outcome.is_some() && r.copy.last_error.is_some())
        .count();
    (fetched, changed, failed)
}

/// Keeps every origin's copy fresh: one task per robots.txt slot; start-up fetches run at most
/// [`MAX_CONCURRENT_FETCHES`] at a time. When a new snapshot is installed, slots that appeared get
/// a task and slots that disappeared lose theirs; slots carried over keep their task and copy.
pub struct Refresher {
    pub snapshot: Arc<Live>,
}

impl Refresher {
    pub async fn run(self, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        let shared = Arc::new(Shared {
            connector: Connector::new(None),
            start_permits: tokio::sync::Semaphore::new(MAX_CONCURRENT_FETCHES),
            watcher: FileWatcher::new(),
        });
        let mut generations = self.snapshot.subscribe();
        let mut tasks = crate::tasks::Tasks::new();
        loop {
            let snapshot = self.snapshot.load();
            // Keyed by slot: a reload that keeps an origin's robots.txt settings keeps its task.
            let wanted = snapshot
                .origins
                .iter()
                .map(|origin| (Arc::as_ptr(&origin.robots) as usize, origin.clone()));
            tasks.reconcile(
                wanted,
                |origin| tokio::spawn(keep_fresh(origin, shared.clone())),
                |_| {},
            );
            if !crate::tasks::next_reload(&mut generations, &mut shutdown).await {
                break;
            }
        }
    }
}

struct Shared {
    connector: Connector,
    start_permits: tokio::sync::Semaphore,
    watcher: FileWatcher,
}

/// The refresh loop of one origin's robots.txt slot.
async fn keep_fresh(origin: Arc<Origin>, shared: Arc<Shared>) {
    let settings = origin.robots.settings.clone();
    if matches!(settings.source, RobotsSource::Inline { .. }) {
        count(&origin, FetchOutcome::Ok);
        publish(&origin, &origin.robots.current());
        return;
    }
    let file_changes = match &settings.source {
        RobotsSource::File { path } => Some(shared.watcher.subscribe(path)),
        _ => None,
    };
    let mut first = true;
    let mut failures: u32 = 0;
    // A run of failed fetches is said once, then summed up at most every 10 minutes: an
    // unreachable origin retried with backoff is one cause, not a line per retry.
    let mut failing = crate::tasks::Failing::default();
    loop {
        let fetched = {
            let _permit = if first {
                shared.start_permits.acquire().await.ok()
            } else {
                None
            };
            fetch_once(&shared.connector, &origin).await
        };
        first = false;
        let fetch_ended = tokio::time::Instant::now();
        let Some(fetched) = fetched else { return };
        count(&origin, fetched.outcome);
        tell(&origin, &fetched);
        let had_rules = origin.robots.current().rule_count() > 0;
        let changed = store(&origin, fetched.copy.clone());
        if fetched.copy.last_error.is_some() {
            match failing.failed(std::time::Instant::now()) {
                Some(crate::tasks::FailureLine::First) => log_outcome(&origin, &fetched.copy),
                Some(crate::tasks::FailureLine::Summary {
                    attempts,
                    since_last,
                }) => tracing::warn!(
                    origin = origin.name(),
                    state = fetched.copy.policy.state_label(),
                    attempts,
                    since_last,
                    "robots.txt still failing: {}",
                    fetched.copy.reason
                ),
                None => {}
            }
        } else {
            let failed = failing.succeeded();
            if changed || failed > 0 {
                log_outcome(&origin, &fetched.copy);
            }
        }
        // Rules just lifted by a 4xx are re-checked on the failure backoff, not the refresh
        // interval: if the 4xx was provoked after all, they come back soon.
        let lifted = had_rules && !fetched.copy.has_rules();
        let failed = matches!(
            fetched.outcome,
            FetchOutcome::Unreachable | FetchOutcome::RateLimited
        ) || fetched.kept.is_some()
            || (fetched.outcome == FetchOutcome::Unavailable && (lifted || failures > 0));
        failures = if failed {
            failures.saturating_add(1)
        } else {
            0
        };
        let delay = next_delay(&settings.refresh, &fetched, failures);
        // Wait for the refresh time, a file change, or a client's hint that robots.txt changed.
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = origin.robots.refresh_requested.notified() => {
                tokio::time::sleep_until(fetch_ended + MIN_EARLY_REFRESH).await;
            }
            _ = async {
                match file_changes.as_deref() {
                    Some(changes) => changes.next().await,
                    None => std::future::pending().await,
                }
            } => {
                if let RobotsSource::File { path } = &settings.source {
                    shared.watcher.rewatch(path);
                }
            }
        }
    }
}

/// When to fetch again: the refresh interval (shortened by `Cache-Control: max-age`), with
/// jitter; after failures (including failures that kept the copy in force), a backoff from
/// [`FIRST_RETRY`] doubling up to the refresh interval, halved for 503 and 429 (or the origin's
/// Retry-After); an unconfirmed 4xx is retried after [`CONFIRM_UNAVAILABLE_AFTER`].
fn next_delay(refresh: &Duration, fetched: &Fetched, failures: u32) -> Duration {
    if failures > 0 {
        let backoff = crate::tasks::backoff(FIRST_RETRY, failures, *refresh);
        match fetched.kept {
            // The confirming fetch must come at least this late to count.
            Some(Kept::Unconfirmed4xx | Kept::UnconfirmedNoRules) => {
                return backoff.max(CONFIRM_UNAVAILABLE_AFTER + Duration::from_secs(1))
            }
            // Refetching into a WAF block or a challenge faster than this only prolongs it.
            Some(Kept::Refused4xx | Kept::NotRobotsTxt) => return backoff.max(FIRST_RETRY),
            _ => {}
        }
        if fetched.status_503 {
            return fetched.retry_after.map_or(backoff / 2, |after| {
                after.clamp(Duration::from_secs(1), *refresh)
            });
        }
        return backoff;
    }
    let interval = match fetched.copy.max_age {
        Some(max_age) => (*refresh).min(max_age.max(Duration::from_secs(1))),
        None => *refresh,
    };
    jittered(interval)
}

/// Stores a copy; returns whether what is in force changed (for logging).
fn store(origin: &Origin, copy: RobotsCopy) -> bool {
    let previous = origin.robots.current();
    let changed = !origin.robots.is_ready()
        || previous.body != copy.body
        || previous.policy.state() != copy.policy.state();
    publish(origin, &copy);
    origin.robots.store(copy);
    changed
}

/// Tells `events` how a fetch went: a run of failures makes a `robots_fetch_failing` event.
fn tell(origin: &Origin, fetched: &Fetched) {
    let failed = !matches!(
        fetched.outcome,
        FetchOutcome::Ok | FetchOutcome::NotModified | FetchOutcome::NoRules
    );
    crate::events::robots_fetch(origin.name(), failed, || {
        let outcome = fetched.outcome.as_str();
        fetched.copy.last_error.as_deref().map_or_else(
            || format!("robots.txt fetch: {outcome}"),
            |error| {
                format!(
                    "robots.txt fetch: {outcome}: {}",
                    crate::logs::one_line(error)
                )
            },
        )
    });
}

fn count(origin: &Origin, outcome: FetchOutcome) {
    METRICS
        .robots_fetches
        .with_label_values(&[origin.name(), outcome.as_str()])
        .inc();
}

fn publish(origin: &Origin, copy: &RobotsCopy) {
    METRICS.set_robots_state(
        origin.name(),
        copy.policy.state(),
        copy.rule_count(),
        copy.body.len(),
    );
    if let Some(at) = copy.last_error_at {
        let seconds = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        METRICS
            .robots_last_error_timestamp
            .with_label_values(&[origin.name()])
            .set(seconds);
    }
}

fn log_outcome(origin: &Origin, copy: &RobotsCopy) {
    match &copy.last_error {
        Some(error) => tracing::warn!(
            origin = origin.name(),
            state = copy.policy.state_label(),
            // It may quote the answer (a redirect's Location): one escaped, bounded line.
            error = %crate::logs::one_line(error),
            "robots.txt: {} (retried with backoff; while it fails, said again at most every 10 \
             minutes: robotsguard_robots_fetches_total counts every attempt)",
            copy.reason
        ),
        None => tracing::info!(
            origin = origin.name(),
            state = copy.policy.state_label(),
            rules = copy.rule_count(),
            source = %copy.source,
            "robots.txt: {}",
            copy.reason
        ),
    }
}

/// The interval minus up to 10 %, so origins configured alike spread out over time.
fn jittered(interval: Duration) -> Duration {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let fraction = f64::from(nanos % 1000) / 10_000.0;
    interval.mul_f64(1.0 - fraction)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{CopyOutcome, Policy};

    fn fetched(outcome: FetchOutcome, status_503: bool, retry_after: Option<Duration>) -> Fetched {
        Fetched {
            copy: RobotsCopy::without_rules(Policy::AllowAll, CopyOutcome::Ok, String::new()),
            outcome,
            retry_after,
            status_503,
            kept: None,
        }
    }

    #[test]
    fn backoff_starts_at_ten_seconds_and_caps_at_the_refresh_interval() {
        let refresh = Duration::from_secs(300);
        let failed = fetched(FetchOutcome::Unreachable, false, None);
        assert_eq!(next_delay(&refresh, &failed, 1), Duration::from_secs(10));
        assert_eq!(next_delay(&refresh, &failed, 2), Duration::from_secs(20));
        assert_eq!(next_delay(&refresh, &failed, 6), Duration::from_secs(300));
        assert_eq!(next_delay(&refresh, &failed, 60), Duration::from_secs(300));
        let busy = fetched(FetchOutcome::Unreachable, true, None);
        assert_eq!(next_delay(&refresh, &busy, 1), Duration::from_secs(5));
        let told = fetched(
            FetchOutcome::Unreachable,
            true,
            Some(Duration::from_secs(42)),
        );
        assert_eq!(next_delay(&refresh, &told, 3), Duration::from_secs(42));
    }

    #[test]
    fn max_age_shortens_the_refresh_interval_with_jitter() {
        let refresh = Duration::from_secs(300);
        let mut ok = fetched(FetchOutcome::Ok, false, None);
        let delay = next_delay(&refresh, &ok, 0);
        assert!(
            delay <= refresh && delay >= refresh.mul_f64(0.9),
            "{delay:?}"
        );
        ok.copy.max_age = Some(Duration::from_secs(60));
        let delay = next_delay(&refresh, &ok, 0);
        assert!(
            delay <= Duration::from_secs(60) && delay >= Duration::from_secs(54),
            "{delay:?}"
        );
    }
}
