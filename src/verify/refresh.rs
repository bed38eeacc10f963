//! Keeps every IP range list the crawlers name fresh: one task per list, fetched (or read) at
//! start and every `verify.refresh`, conditionally (from its mirror when `verify.ranges.mirrors`
//! names one, through `verify.ranges.proxy` when set); on failure retried with backoff from
//! 10 s; a failed fetch or a malformed answer never replaces the last good copy. Lists are the
//! catalogue's: when a reload changes which lists crawlers name, tasks start and stop.
//!
//! A list that keeps failing (no egress, say) is said once: one WARN on its first failure, then
//! at most one summary line per [`SUMMARY_EVERY`]; `robotsguard_crawler_range_list_loaded` and
//! the chart's alert carry the rest. Lists failing for one cause (no DNS at all, no egress) share
//! those lines (`crate::tasks::Causes`): an offline start says it once, not once per list.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use pingora::connectors::http::Connector;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use super::ranges::{parse_list_as, ListCopy, ListSlot, ListSource, RangeLists, WantedList};
use super::ranges::{read_file, MAX_LIST_BYTES};
use crate::config::FetchProxy;
use crate::crawlers::ListFormat;
use crate::fetch::{FileWatcher, Validators};
use crate::metrics::METRICS;
use crate::net::url::get_url_to;
use crate::snapshot::{Live, Snapshot};

/// The first retry after a failure; it doubles up to the refresh interval.
const FIRST_RETRY: Duration = Duration::from_secs(10);

/// Redirects followed (Google's old list path redirects to the current one).
const MAX_REDIRECTS: usize = 5;

/// How long one fetch may take, redirects included.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Lists named only by remote catalogue feeds fetched (and parsed) at once, at most.
static REMOTE_LIST_FETCHES: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// A list that keeps failing gets one summary line per this long.
pub const SUMMARY_EVERY: Duration = crate::tasks::FAILURE_SUMMARY_EVERY;

pub(crate) use crate::tasks::{Causes, Failing, FailureLine};

/// The `ips` entries of every crawler in the snapshot's catalogue, each with its format (the
/// first entry naming a list with a format other than by shape decides it) and its fetch rule
/// (public addresses only when only entries of remote catalogue feeds name it).
pub(crate) fn list_formats(snapshot: &Snapshot) -> Vec<WantedList> {
    let mut lists: Vec<WantedList> = Vec::new();
    for def in snapshot.identifier.catalogue().defs() {
        let Some(verify) = &def.verify else {
            continue;
        };
        let from_remote_feed = def
            .feed
            .as_deref()
            .is_some_and(|feed| !feed.starts_with("file:"));
        for entry in &verify.ips {
            let format = verify.format_of(entry);
            match lists.iter_mut().find(|list| list.entry == *entry) {
                Some(known) => {
                    if known.format.is_auto() {
                        known.format = format;
                    }
                    // Named by the operator's own data too: fetched as configured.
                    known.public_only &= from_remote_feed;
                }
                None => lists.push(WantedList {
                    entry: entry.clone(),
                    format,
                    public_only: from_remote_feed,
                }),
            }
        }
    }
    lists.sort_by(|a, b| a.entry.cmp(&b.entry));
    lists
}

/// Whether `address` may be fetched from for a list named by a remote feed: a public address,
/// or any, when the URL's origin is one of `private_origins`.
fn allowed_for(url: &str, private_origins: &[String]) -> Option<fn(std::net::IpAddr) -> bool> {
    let private =
        crate::config::https_origin_of(url).is_some_and(|origin| private_origins.contains(&origin));
    (!private).then_some(super::is_public as fn(std::net::IpAddr) -> bool)
}

/// Fetches or reads each of `entries` once, now (for a one-off check such as `robotsguard
/// identify --client`), through `proxy` when given; a list that fails stays not loaded, and the
/// error is returned with it.
pub async fn load_once(
    lists: &RangeLists,
    entries: &[String],
    proxy: Option<&FetchProxy>,
) -> Vec<(String, String)> {
    let entries: Vec<(String, ListFormat)> = entries
        .iter()
        .map(|entry| (entry.clone(), ListFormat::Auto))
        .collect();
    load_lists_once(lists, &entries, proxy).await
}

/// [`load_once`] with each list's format.
pub async fn load_lists_once(
    lists: &RangeLists,
    entries: &[(String, ListFormat)],
    proxy: Option<&FetchProxy>,
) -> Vec<(String, String)> {
    let wanted: Vec<WantedList> = entries
        .iter()
        .map(|(entry, format)| WantedList {
            entry: entry.clone(),
            format: format.clone(),
            public_only: false,
        })
        .collect();
    load_wanted_once(lists, &wanted, proxy, &[]).await
}

/// [`load_lists_once`] with each list's fetch rule (`private_origins`:
/// `verify.ranges.private_origins`).
pub async fn load_wanted_once(
    lists: &RangeLists,
    wanted: &[WantedList],
    proxy: Option<&FetchProxy>,
    private_origins: &[String],
) -> Vec<(String, String)> {
    lists.set_wanted(wanted);
    let connector = Connector::new(None);
    let mut failures = Vec::new();
    for slot in lists.slots() {
        let got = match &slot.source {
            ListSource::Url(url) => fetch(&connector, &slot, url, proxy, private_origins).await,
            ListSource::File(path) => read(path.clone(), &slot.format).await,
        };
        match got {
            Got::Fresh(copy) => {
                slot.copy.store(Some(Arc::new(copy)));
                lists.changed();
            }
            Got::NotModified => {}
            Got::Failed(_, error) => failures.push((slot.entry.clone(), error)),
        }
    }
    failures
}

/// The background service keeping the lists fresh.
pub struct ListRefresher {
    /// The snapshot whose catalogue names the lists.
    pub live: Arc<Live>,
    /// Where the copies go.
    pub lists: Arc<RangeLists>,
    /// `verify.refresh`.
    pub refresh: Duration,
    /// The HTTP proxy fetches go through, if any.
    pub proxy: Option<FetchProxy>,
    /// `verify.ranges.private_origins`.
    pub private_origins: Vec<String>,
}

#[async_trait]
impl BackgroundService for ListRefresher {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let shared = Arc::new(Shared {
            connector: Connector::new(None),
            watcher: FileWatcher::new(),
            refresh: self.refresh,
            proxy: self.proxy.clone(),
            private_origins: self.private_origins.clone(),
        });
        let mut generations = self.live.subscribe();
        let mut tasks = crate::tasks::Tasks::new();
        loop {
            let lists = list_formats(&self.live.load());
            self.lists.set_wanted(&lists);
            // Keyed by list, format and rule: a list read in another format, or under another
            // rule, is a new task.
            let wanted = self.lists.slots().into_iter().map(|slot| {
                (
                    (slot.entry.clone(), slot.format.clone(), slot.public_only),
                    slot,
                )
            });
            tasks.reconcile(
                wanted,
                |slot| tokio::spawn(keep_fresh(slot, self.lists.clone(), shared.clone())),
                |(entry, _, _)| {
                    if !lists.iter().any(|list| list.entry == *entry) {
                        METRICS.forget_list(entry);
                    }
                },
            );
            if !crate::tasks::next_reload(&mut generations, &mut shutdown).await {
                break;
            }
        }
    }
}

struct Shared {
    connector: Connector,
    watcher: FileWatcher,
    refresh: Duration,
    proxy: Option<FetchProxy>,
    private_origins: Vec<String>,
}

/// What one fetch or read came to.
enum Got {
    /// A new copy.
    Fresh(ListCopy),
    /// 304: the copy stays, confirmed now.
    NotModified,
    /// Nothing usable: the label and the error.
    Failed(&'static str, String),
}

/// The causes of range list failures said lately, shared by every list's task.
static LIST_CAUSES: std::sync::LazyLock<Causes> = std::sync::LazyLock::new(Causes::default);

async fn keep_fresh(slot: Arc<ListSlot>, lists: Arc<RangeLists>, shared: Arc<Shared>) {
    let file_changes = match &slot.source {
        ListSource::File(path) => Some(shared.watcher.subscribe(path)),
        ListSource::Url(_) => None,
    };
    let mut failures: u32 = 0;
    let mut failing = Failing::default();
    loop {
        let got = match &slot.source {
            ListSource::Url(url) => {
                fetch(
                    &shared.connector,
                    &slot,
                    url,
                    shared.proxy.as_ref(),
                    &shared.private_origins,
                )
                .await
            }
            ListSource::File(path) => read(path.clone(), &slot.format).await,
        };
        if !matches!(got, Got::Failed(..)) {
            let failed = failing.succeeded();
            if failed > 0 {
                tracing::info!(
                    list = %slot.entry,
                    failed_attempts = failed,
                    "crawler IP range list reachable again"
                );
            }
        }
        let outcome = match got {
            Got::Fresh(copy) => {
                METRICS
                    .verify_list_prefixes
                    .with_label_values(&[&slot.entry])
                    .set(i64::try_from(copy.prefixes).unwrap_or(i64::MAX));
                let unchanged =
                    slot.copy.load().as_ref().is_some_and(|old| {
                        old.set == copy.set && old.by_service == copy.by_service
                    });
                if !unchanged {
                    tracing::info!(
                        list = %slot.entry,
                        prefixes = copy.prefixes,
                        "crawler IP range list loaded"
                    );
                }
                published(&slot, copy.fetched_at);
                slot.copy.store(Some(Arc::new(copy)));
                if !unchanged {
                    lists.changed();
                }
                clear_error(&slot);
                "ok"
            }
            Got::NotModified => {
                if let Some(old) = slot.copy.load_full() {
                    let confirmed = ListCopy {
                        set: old.set.clone(),
                        by_service: old.by_service.clone(),
                        prefixes: old.prefixes,
                        etag: old.etag.clone(),
                        last_modified: old.last_modified.clone(),
                        fetched_at: SystemTime::now(),
                    };
                    published(&slot, confirmed.fetched_at);
                    slot.copy.store(Some(Arc::new(confirmed)));
                }
                clear_error(&slot);
                "not_modified"
            }
            Got::Failed(outcome, error) => {
                let kept = if slot.copy.load().is_some() {
                    "the last good copy stays in force"
                } else {
                    "no copy yet: claims of its crawlers stay unverified"
                };
                let source = match &slot.source {
                    ListSource::Url(url) if *url != slot.entry => format!(" (mirror {url})"),
                    ListSource::File(path) => format!(" (file {})", path.display()),
                    ListSource::Url(_) => String::new(),
                };
                // The error may quote the answer (a line of a list, a parser's excerpt), and the
                // list's URL and path are a feed's text: one escaped, bounded line.
                let said = crate::logs::one_line(&error);
                let list = crate::logs::one_line(&slot.entry);
                let source = crate::logs::one_line(&source);
                let now = Instant::now();
                let line = failing
                    .failed(now)
                    .and_then(|line| Some((line, LIST_CAUSES.admit(&error, now)?)));
                match line {
                    Some((FailureLine::First, others)) => tracing::warn!(
                        list = %list,
                        outcome,
                        others_unsaid = others,
                        "crawler IP range list{source}: {said} ({kept}; retried with backoff; \
                         this cause is said at most every 10 minutes, whichever lists it stops: \
                         robotsguard_crawler_range_list_loaded shows each list)"
                    ),
                    Some((
                        FailureLine::Summary {
                            attempts,
                            since_last,
                        },
                        others,
                    )) => tracing::warn!(
                        list = %list,
                        outcome,
                        attempts,
                        since_last,
                        others_unsaid = others,
                        "crawler IP range list{source} still failing: {said} ({kept})"
                    ),
                    None => {}
                }
                if let Ok(mut last) = slot.last_error.lock() {
                    *last = Some(error);
                }
                outcome
            }
        };
        METRICS
            .verify_list_fetches
            .with_label_values(&[&slot.entry, outcome])
            .inc();
        failures = if matches!(outcome, "ok" | "not_modified") {
            0
        } else {
            failures.saturating_add(1)
        };
        let delay = if failures == 0 {
            jittered(shared.refresh)
        } else {
            crate::tasks::backoff(FIRST_RETRY, failures, shared.refresh)
        };
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = async {
                match file_changes.as_deref() {
                    Some(changes) => changes.next().await,
                    None => std::future::pending().await,
                }
            } => {
                if let ListSource::File(path) = &slot.source {
                    shared.watcher.rewatch(path);
                }
            }
        }
    }
}

fn published(slot: &ListSlot, at: SystemTime) {
    let seconds = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    METRICS
        .verify_list_last_success
        .with_label_values(&[&slot.entry])
        .set(seconds);
    METRICS
        .crawler_range_list_loaded
        .with_label_values(&[&slot.entry])
        .set(1);
}

fn clear_error(slot: &ListSlot) {
    if let Ok(mut last) = slot.last_error.lock() {
        *last = None;
    }
}

/// The interval less up to 10 %, so replicas started together do not fetch together.
fn jittered(interval: Duration) -> Duration {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    interval.mul_f64(1.0 - f64::from(nanos % 1000) / 10_000.0)
}

async fn read(path: std::path::PathBuf, format: &ListFormat) -> Got {
    let body = match tokio::task::spawn_blocking(move || read_file(&path)).await {
        Ok(Ok(body)) => body,
        Ok(Err(error)) => return Got::Failed("unreachable", error.to_string()),
        Err(e) => return Got::Failed("unreachable", format!("the read did not finish: {e}")),
    };
    parsed(&body, format, None, None, None)
}

fn parsed(
    body: &[u8],
    format: &ListFormat,
    content_type: Option<&str>,
    etag: Option<String>,
    last_modified: Option<String>,
) -> Got {
    match parse_list_as(body, format, content_type) {
        Ok(parsed) => Got::Fresh(ListCopy::new(parsed, etag, last_modified)),
        Err(error) => Got::Failed("malformed", error.to_string()),
    }
}

/// Fetches a list's URL, following up to [`MAX_REDIRECTS`] redirects. A list of
/// [`ListSlot::public_only`] is fetched as a URL someone else named: every hop must be
/// `https://` and resolve to a public address (unless `private_origins` names its origin), or
/// the fetch is `refused` before any connection to it.
async fn fetch(
    connector: &Connector,
    slot: &ListSlot,
    url: &str,
    proxy: Option<&FetchProxy>,
    private_origins: &[String],
) -> Got {
    // Lists someone else named are fetched and parsed a few at a time: each holds its body (up
    // to 8 MiB) and its parse at once, and a feed may name dozens. The operator's own lists
    // never wait for them.
    let _turn = if slot.public_only {
        REMOTE_LIST_FETCHES.acquire().await.ok()
    } else {
        None
    };
    let validators = match slot.copy.load_full() {
        Some(copy) => Validators {
            etag: copy.etag.clone(),
            last_modified: copy.last_modified.clone(),
        },
        None => Validators::default(),
    };
    let mut current = url.to_string();
    for _ in 0..=MAX_REDIRECTS {
        let allowed = if slot.public_only {
            if !current.starts_with("https://") {
                return Got::Failed(
                    "refused",
                    format!(
                        "`{current}` is not an https URL (a list a remote catalogue feed names \
                         is fetched over https only)"
                    ),
                );
            }
            allowed_for(&current, private_origins)
        } else {
            None
        };
        let answer = match get_url_to(
            connector,
            &current,
            &validators,
            MAX_LIST_BYTES,
            FETCH_TIMEOUT,
            proxy,
            allowed,
        )
        .await
        {
            Ok(answer) => answer,
            Err(e) if e.is_refused() => return Got::Failed("refused", e.to_string()),
            Err(e) => return Got::Failed("unreachable", e.to_string()),
        };
        match answer.status {
            200 if answer.over_limit => {
                return Got::Failed("malformed", format!("larger than {MAX_LIST_BYTES} bytes"));
            }
            200 => {
                return parsed(
                    &answer.body,
                    &slot.format,
                    answer.content_type.as_deref(),
                    answer.etag,
                    answer.last_modified,
                )
            }
            304 if slot.copy.load().is_some() => return Got::NotModified,
            301 | 302 | 303 | 307 | 308 => {
                let Some(location) = answer.location.as_deref() else {
                    return Got::Failed(
                        "http_error",
                        format!("HTTP {} without a Location", answer.status),
                    );
                };
                match url::Url::parse(&current).and_then(|base| base.join(location.trim())) {
                    Ok(next) if matches!(next.scheme(), "http" | "https") => {
                        current = next.to_string();
                    }
                    _ => {
                        return Got::Failed(
                            "http_error",
                            format!("unusable redirect to `{location}`"),
                        );
                    }
                }
            }
            status => return Got::Failed("http_error", format!("HTTP {status} from {current}")),
        }
    }
    Got::Failed("http_error", format!("more than {MAX_REDIRECTS} redirects"))
}
