//! Keeps the catalogue feeds (`crawlers.feeds`) fresh and the catalogue built from them in
//! force: one task per feed, fetched (or read) at start and every `refresh`, conditionally
//! (ETag, Last-Modified); on failure retried with backoff from 10 s up to `refresh`; a failed
//! fetch or a body that does not parse never replaces the last good copy. A new copy whose
//! entries differ bumps the feeds' generation, and the keeper installs a snapshot with the
//! catalogue rebuilt (the whole identifier, swapped like a reload: its identification memory
//! is its own, and the range lists and verdicts follow the new snapshot's generation).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use pingora::connectors::http::Connector;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::config::{FeedConfig, FetchProxy};
use crate::crawlers::feed::{parse_feed, parse_feed_in, FeedCopy, FeedStore, MAX_FEED_BYTES};
use crate::fetch::{FileWatcher, Validators};
use crate::metrics::METRICS;
use crate::net::url::get_url_to;
use crate::snapshot::Live;

/// The first retry after a failure; it doubles up to the feed's refresh interval.
const FIRST_RETRY: Duration = Duration::from_secs(10);

/// Redirects followed.
const MAX_REDIRECTS: usize = 5;

/// How long one fetch may take, redirects included.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// What one fetch or read came to.
enum Got {
    Fresh(FeedCopy),
    NotModified,
    Failed(String),
}

message_error! {
    /// Why a `file:` feed could not be read or parsed, in one line.
    FeedFileError
}

/// Reads and parses a `file:` feed now: what `validate`, `serve` and a reload check, and how a
/// file feed's first copy is in force before the first request.
pub fn load_file(feed: &FeedConfig) -> Result<FeedCopy, FeedFileError> {
    let Some(path) = feed.file() else {
        return Err(FeedFileError("not a file: feed".to_string()));
    };
    let body = crate::net::file::read_capped(path, MAX_FEED_BYTES)
        .map_err(|e| FeedFileError(e.to_string()))?;
    let parsed = parse_feed_in(feed.format, &body, &feed.url, path.parent())
        .map_err(|e| FeedFileError(e.to_string()))?;
    Ok(FeedCopy {
        defs: parsed.defs,
        skipped: parsed.skipped,
        etag: None,
        last_modified: None,
        fetched_at: SystemTime::now(),
    })
}

/// Problems with the config's `file:` feeds (each read and parsed), one line each.
pub fn file_problems(feeds: &[FeedConfig]) -> Vec<String> {
    feeds
        .iter()
        .filter(|feed| feed.file().is_some())
        .filter_map(|feed| {
            load_file(feed)
                .err()
                .map(|e| format!("crawlers.feeds `{}`: {e}", feed.url))
        })
        .collect()
}

/// Puts every `file:` feed's copy in force in `snapshot`'s feed store now (before serving);
/// `true` when any came in (the caller rebuilds the catalogue). A file that fails is left to
/// its task, which retries.
pub fn load_files(snapshot: &crate::snapshot::Snapshot) -> bool {
    let mut changed = false;
    for feed in &snapshot.config.crawlers.feeds {
        if feed.file().is_none() {
            continue;
        }
        if let Ok(copy) = load_file(feed) {
            loaded(feed, &copy);
            changed |= snapshot.feeds.put(&feed.url, copy);
        }
    }
    changed
}

/// Fetches or reads each of `feeds` once, now, into `store` (for a one-off look such as
/// `robotsguard identify --config`); a feed that fails is left out, and its error returned.
pub async fn load_once(
    store: &FeedStore,
    feeds: &[FeedConfig],
    proxy: Option<&FetchProxy>,
) -> Vec<(String, String)> {
    let connector = Connector::new(None);
    let mut failures = Vec::new();
    for feed in feeds {
        let got = match feed.file() {
            Some(_) => load_file(feed).map_or_else(|e| Got::Failed(e.to_string()), Got::Fresh),
            None => fetch(&connector, proxy, None, feed).await,
        };
        match got {
            Got::Fresh(copy) => {
                store.put(&feed.url, copy);
            }
            Got::NotModified => {}
            Got::Failed(e) => failures.push((feed.url.clone(), e)),
        }
    }
    failures
}

fn loaded(feed: &FeedConfig, copy: &FeedCopy) {
    METRICS
        .catalogue_feed_loaded
        .with_label_values(&[&feed.url])
        .set(1);
    for line in &copy.skipped {
        tracing::debug!(feed = %feed.url, "catalogue feed entry skipped: {}", crate::logs::one_line(line));
    }
}

/// Installs a snapshot whose catalogue holds the feeds' copies now in force, unless the one
/// in force already does. Retried when a reload got in between.
fn rebuild(live: &Live) {
    for _ in 0..8 {
        let current = live.load();
        if current.feeds_generation == current.feeds.generation() {
            return;
        }
        match current.with_fresh_catalogue() {
            Ok(snapshot) => {
                let entries = snapshot.identifier.catalogue().len();
                if live.install_if_current(&current, snapshot) {
                    tracing::info!(entries, "crawler catalogue rebuilt from its feeds");
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(
                    "crawler catalogue with its feeds is not usable ({e}); the one in force stays"
                );
                return;
            }
        }
    }
}

/// The background service keeping the feeds fresh and the catalogue in force.
pub struct FeedRefresher {
    /// The snapshot in force (its config names the feeds).
    pub live: Arc<Live>,
    /// The HTTP proxy fetches go through, if any.
    pub proxy: Option<FetchProxy>,
}

struct Shared {
    /// Made at the first fetch: a connector loads the platform's root certificates, work and
    /// memory a proxy with no feed to fetch (most) need not spend.
    connector: std::sync::OnceLock<Connector>,
    watcher: FileWatcher,
    proxy: Option<FetchProxy>,
    live: Arc<Live>,
    rebuild: tokio::sync::Notify,
}

impl Shared {
    /// The feed store of the snapshot in force (an embedder may install snapshots of its own).
    fn store(&self) -> Arc<FeedStore> {
        self.live.load().feeds.clone()
    }

    fn connector(&self) -> &Connector {
        self.connector.get_or_init(|| Connector::new(None))
    }
}

#[async_trait]
impl BackgroundService for FeedRefresher {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let shared = Arc::new(Shared {
            connector: std::sync::OnceLock::new(),
            watcher: FileWatcher::new(),
            proxy: self.proxy.clone(),
            live: self.live.clone(),
            rebuild: tokio::sync::Notify::new(),
        });
        let keeper = {
            let shared = shared.clone();
            tokio::spawn(async move {
                loop {
                    shared.rebuild.notified().await;
                    // Parsing the built-in catalogue and compiling the automata takes
                    // milliseconds: off the request workers.
                    let live = shared.live.clone();
                    let _ = tokio::task::spawn_blocking(move || rebuild(&live)).await;
                }
            })
        };
        let mut generations = self.live.subscribe();
        let mut tasks = crate::tasks::Tasks::new();
        loop {
            let snapshot = self.live.load();
            let wanted: Vec<(FeedConfig, FeedConfig)> = snapshot
                .config
                .crawlers
                .feeds
                .iter()
                .map(|feed| (feed.clone(), feed.clone()))
                .collect();
            let urls: Vec<String> = wanted.iter().map(|(f, _)| f.url.clone()).collect();
            let store = shared.store();
            for url in &urls {
                if store.get(url).is_none() {
                    METRICS
                        .catalogue_feed_loaded
                        .with_label_values(&[url])
                        .set(0);
                }
            }
            tasks.reconcile(
                wanted,
                |feed| tokio::spawn(keep_fresh(feed, shared.clone())),
                |feed| {
                    if !urls.contains(&feed.url) {
                        METRICS.forget_feed(&feed.url);
                    }
                },
            );
            // Copies of feeds no longer configured go; a reload may also have installed a
            // catalogue without the newest copies.
            let keep: Vec<&str> = urls.iter().map(String::as_str).collect();
            store.retain(&keep);
            shared.rebuild.notify_one();
            if !crate::tasks::next_reload(&mut generations, &mut shutdown).await {
                break;
            }
        }
        keeper.abort();
    }
}

async fn keep_fresh(feed: FeedConfig, shared: Arc<Shared>) {
    let file_changes = feed.file().map(|path| shared.watcher.subscribe(path));
    let mut failures: u32 = 0;
    loop {
        let got = match feed.file() {
            Some(_) => {
                let feed = feed.clone();
                match tokio::task::spawn_blocking(move || load_file(&feed)).await {
                    Ok(Ok(copy)) => Got::Fresh(copy),
                    Ok(Err(e)) => Got::Failed(e.to_string()),
                    Err(e) => Got::Failed(format!("the read did not finish: {e}")),
                }
            }
            None => {
                let old = shared.store().get(&feed.url);
                fetch(shared.connector(), shared.proxy.as_ref(), old, &feed).await
            }
        };
        match got {
            Got::Fresh(copy) => {
                loaded(&feed, &copy);
                let entries = copy.defs.len();
                if shared.store().put(&feed.url, copy) {
                    tracing::info!(feed = %feed.url, entries, "catalogue feed loaded");
                    shared.rebuild.notify_one();
                }
                failures = 0;
            }
            Got::NotModified => {
                let store = shared.store();
                if let Some(old) = store.get(&feed.url) {
                    let mut confirmed = (*old).clone();
                    confirmed.fetched_at = SystemTime::now();
                    store.put(&feed.url, confirmed);
                }
                failures = 0;
            }
            Got::Failed(error) => {
                failures = failures.saturating_add(1);
                let kept = if shared.store().get(&feed.url).is_some() {
                    "the last good copy stays in force"
                } else {
                    "no copy yet: its crawlers are not in the catalogue"
                };
                if failures == 1 || failures.is_power_of_two() {
                    // A parser's error may quote the body: one escaped, bounded line.
                    tracing::warn!(
                        feed = %feed.url,
                        attempts = failures,
                        "catalogue feed: {} ({kept}; retried with backoff)",
                        crate::logs::one_line(&error)
                    );
                }
            }
        }
        let delay = if failures == 0 {
            feed.refresh
        } else {
            crate::tasks::backoff(FIRST_RETRY, failures, feed.refresh)
        };
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = async {
                match file_changes.as_deref() {
                    Some(changes) => changes.next().await,
                    None => std::future::pending().await,
                }
            } => {
                if let Some(path) = feed.file() {
                    shared.watcher.rewatch(path);
                }
            }
        }
    }
}

/// `scheme://host[:port]` of a URL, for telling a redirect to another origin.
fn origin_of(url: &str) -> Option<String> {
    let url = url::Url::parse(url).ok()?;
    Some(url.origin().ascii_serialization())
}

async fn fetch(
    connector: &Connector,
    proxy: Option<&FetchProxy>,
    old: Option<Arc<FeedCopy>>,
    feed: &FeedConfig,
) -> Got {
    let validators = match &old {
        Some(copy) => Validators {
            etag: copy.etag.clone(),
            last_modified: copy.last_modified.clone(),
        },
        None => Validators::default(),
    };
    let mut current = feed.url.clone();
    let configured_origin = origin_of(&feed.url);
    for _ in 0..=MAX_REDIRECTS {
        // The feed's URL is the operator's; a redirect elsewhere is the feed server's word, so
        // it is followed as a URL someone else named: https, public addresses only.
        let elsewhere = origin_of(&current) != configured_origin;
        if elsewhere && !current.starts_with("https://") {
            return Got::Failed(format!(
                "a redirect to `{current}` leaves the feed's origin for another that is not https"
            ));
        }
        let answer = match get_url_to(
            connector,
            &current,
            &validators,
            MAX_FEED_BYTES,
            FETCH_TIMEOUT,
            proxy,
            elsewhere.then_some(crate::net::url::is_public_address as fn(std::net::IpAddr) -> bool),
        )
        .await
        {
            Ok(answer) => answer,
            Err(e) => return Got::Failed(e.to_string()),
        };
        match answer.status {
            200 if answer.over_limit => {
                return Got::Failed(format!("larger than {MAX_FEED_BYTES} bytes"));
            }
            200 => {
                return match parse_feed(feed.format, &answer.body, &feed.url) {
                    Ok(parsed) => Got::Fresh(FeedCopy {
                        defs: parsed.defs,
                        skipped: parsed.skipped,
                        etag: answer.etag,
                        last_modified: answer.last_modified,
                        fetched_at: SystemTime::now(),
                    }),
                    Err(e) => Got::Failed(format!("does not parse: {e}")),
                };
            }
            304 if old.is_some() => return Got::NotModified,
            301 | 302 | 303 | 307 | 308 => {
                let Some(location) = answer.location.as_deref() else {
                    return Got::Failed(format!("HTTP {} without a Location", answer.status));
                };
                match url::Url::parse(&current).and_then(|base| base.join(location.trim())) {
                    Ok(next) if matches!(next.scheme(), "http" | "https") => {
                        current = next.to_string();
                    }
                    _ => return Got::Failed(format!("unusable redirect to `{location}`")),
                }
            }
            status => return Got::Failed(format!("HTTP {status} from {current}")),
        }
    }
    Got::Failed(format!("more than {MAX_REDIRECTS} redirects"))
}
