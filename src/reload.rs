//! Config hot reload: watch the config file (and listen for SIGHUP), then parse, validate and
//! build a complete new [`Snapshot`] and swap it in — or keep the running one and say why.
//!
//! - **What is watched.** The config file's directory, not the file: editors save by renaming a
//!   new file over the old one, and Kubernetes updates a ConfigMap volume by renaming a fresh
//!   `..data` symlink over the old one; neither touches the old file. When the config path is a
//!   symlink into another directory, that directory is watched too. Open, read and close events
//!   are ignored (reading the config ourselves makes them).
//! - **Debounce.** A write in place (create, truncate, write) may be read half-done, so the file
//!   is read only after [`DEBOUNCE`] without further events. A rename onto the config name or onto
//!   `..data` replaces the file whole and atomically, so it is read after a short [`SETTLE`] that
//!   only gathers the rest of the same operation. A directory written to without pause is still
//!   read [`MAX_DELAY`] after its first event. SIGHUP reloads at once.
//! - **All or nothing.** A config that does not load, or whose snapshot cannot be built (an
//!   upstream name that does not resolve), changes nothing: every error is logged with
//!   `file:line:column` and `robotsguard_config_reloads_total{result="failure"}` counts it.
//! - **Restart-only settings.** Listeners, the admin address, threads and the shutdown grace are
//!   set up once at start. A file that changes them reloads everything else, keeps their running
//!   values, and says so in the log and in `robotsguard_config_restart_required`.
//! - **In-flight requests** hold the origin they were routed to, so they finish on the snapshot
//!   they started with; the robots.txt refresher reconciles its per-origin tasks on each swap
//!   (added origins are fetched, removed ones dropped).

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use notify::event::{ModifyKind, RenameMode};
use notify::{EventKind, RecursiveMode, Watcher};
use pingora::connectors::http::Connector;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use tokio::signal::unix::{Signal, SignalKind};

use crate::config::{Config, RobotsSource};
use crate::metrics::METRICS;
use crate::state::{Live, Snapshot};

/// Quiet time after the last in-place write before the config is read.
pub const DEBOUNCE: Duration = Duration::from_millis(200);

/// Wait after an atomic replacement (a rename onto the config or onto `..data`), to gather the
/// other events of the same save.
pub const SETTLE: Duration = Duration::from_millis(25);

/// Longest wait from the first event of a burst to the reload, however long the burst lasts.
pub const MAX_DELAY: Duration = Duration::from_secs(2);

/// What set a reload off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The watcher saw the config change.
    FileChange,
    /// SIGHUP (always rebuilds, so upstream DNS names are resolved again).
    Hangup,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::FileChange => "file change",
            Trigger::Hangup => "SIGHUP",
        }
    }
}

/// How long each stage of an applied reload took.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timings {
    /// Reading, parsing and validating the file.
    pub load: Duration,
    /// Building the snapshot: crawler catalogue, origins, upstream addresses.
    pub build: Duration,
    /// Reading file-sourced robots.txt of origins whose robots settings changed.
    pub prefill: Duration,
    /// From the start of the reload to the swap.
    pub total: Duration,
}

/// What a reload did.
#[derive(Debug)]
pub enum ReloadOutcome {
    Applied {
        origins: usize,
        added: Vec<String>,
        removed: Vec<String>,
        changed: Vec<String>,
        /// Settings the file changed that only a restart applies (their running values stay).
        restart_required: Vec<&'static str>,
        timings: Timings,
    },
    /// The file reads as the config in force; nothing was rebuilt.
    Unchanged,
    /// Nothing changed; each entry is one error (`file:line:column: message` where known).
    Failed(Vec<String>),
}

struct Applied {
    /// The config as the file last said it (restart-only settings not yet put back).
    written: Config,
    /// Whether the latest attempt succeeded.
    ok: bool,
}

/// The reload pipeline: load → validate → build → swap.
pub struct Reloader {
    live: Arc<Live>,
    path: PathBuf,
    /// The config the process started with: its listeners, admin address, threads and grace are
    /// what is bound and running, whatever later files say.
    running: Arc<Config>,
    last: Mutex<Applied>,
    /// For reading file-sourced robots.txt before the swap; made on first use.
    connector: OnceLock<Connector>,
}

impl Reloader {
    /// A reloader for the config at `path`, which the process started with as `running`.
    pub fn new(live: Arc<Live>, path: PathBuf, running: Arc<Config>) -> Reloader {
        METRICS.config_last_reload_successful.set(1);
        METRICS.config_last_reload_timestamp.set(unix_now());
        METRICS.config_restart_required.set(0);
        Reloader {
            live,
            path,
            last: Mutex::new(Applied {
                written: (*running).clone(),
                ok: true,
            }),
            running,
            connector: OnceLock::new(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reloads now and logs the outcome. `since` is when the change was first seen, for the log.
    pub async fn reload(&self, trigger: Trigger, since: Option<Instant>) -> ReloadOutcome {
        let outcome = self.try_reload(trigger).await;
        report(&outcome, trigger, since);
        outcome
    }

    async fn try_reload(&self, trigger: Trigger) -> ReloadOutcome {
        let started = Instant::now();
        let path = self.path.clone();
        let loaded = tokio::task::spawn_blocking(move || crate::config::load_file(&path)).await;
        let written = match loaded {
            Ok(Ok(config)) => config,
            Ok(Err(errors)) => {
                return self.failed(errors.0.iter().map(ToString::to_string).collect());
            }
            Err(e) => return self.failed(vec![format!("the reload task failed: {e}")]),
        };
        let load = started.elapsed();
        if trigger == Trigger::FileChange {
            if let Ok(last) = self.last.lock() {
                // Editors and kubelet touch files without changing them; a rebuild would only
                // add noise. SIGHUP always rebuilds (to resolve upstream names again).
                if last.ok && last.written == written {
                    return ReloadOutcome::Unchanged;
                }
            }
        }

        let mut config = written.clone();
        let restart_required = keep_running_settings(&mut config, &self.running);
        let previous = self.live.load();
        let build_started = Instant::now();
        let built = {
            let previous = previous.clone();
            tokio::task::spawn_blocking(move || Snapshot::build(Arc::new(config), Some(&previous)))
                .await
        };
        let snapshot = match built {
            Ok(Ok(snapshot)) => snapshot,
            Ok(Err(e)) => return self.failed(vec![format!("{}: {e}", self.path.display())]),
            Err(e) => return self.failed(vec![format!("the reload task failed: {e}")]),
        };
        let build = build_started.elapsed();

        let prefill_started = Instant::now();
        self.prefill_file_robots(&snapshot, &previous).await;
        let prefill = prefill_started.elapsed();

        let (added, removed, changed) = diff(&previous, &snapshot);
        let origins = snapshot.origins.len();
        self.live.install(snapshot);
        let total = started.elapsed();

        for name in &removed {
            METRICS.forget_origin(name);
        }
        METRICS.config_reloads.with_label_values(&["success"]).inc();
        METRICS.config_last_reload_successful.set(1);
        METRICS.config_last_reload_timestamp.set(unix_now());
        METRICS
            .config_restart_required
            .set(i64::from(!restart_required.is_empty()));
        if let Ok(mut last) = self.last.lock() {
            *last = Applied { written, ok: true };
        }
        ReloadOutcome::Applied {
            origins,
            added,
            removed,
            changed,
            restart_required,
            timings: Timings {
                load,
                build,
                prefill,
                total,
            },
        }
    }

    fn failed(&self, errors: Vec<String>) -> ReloadOutcome {
        METRICS.config_reloads.with_label_values(&["failure"]).inc();
        METRICS.config_last_reload_successful.set(0);
        if let Ok(mut last) = self.last.lock() {
            last.ok = false;
        }
        ReloadOutcome::Failed(errors)
    }

    /// Reads the robots.txt file of each origin that got a new slot, before the swap: otherwise
    /// its crawlers would get the `on_unreachable` policy until the refresher's first read.
    /// Origin-fetched robots.txt is left to the refresher — a swap never waits for the network.
    async fn prefill_file_robots(&self, snapshot: &Snapshot, previous: &Snapshot) {
        // Slots are compared by address, as the refresher does (a pointer would not be `Send`).
        let carried: HashSet<usize> = previous
            .origins
            .iter()
            .map(|origin| Arc::as_ptr(&origin.robots) as usize)
            .collect();
        for origin in &snapshot.origins {
            if carried.contains(&(Arc::as_ptr(&origin.robots) as usize))
                || !matches!(origin.robots.settings.source, RobotsSource::File { .. })
            {
                continue;
            }
            let connector = self.connector.get_or_init(|| Connector::new(None));
            if let Some(fetched) = crate::fetch::fetch_once(connector, origin).await {
                origin.robots.store(fetched.copy);
            }
        }
    }
}

/// Puts the running values of restart-only settings into `new`; returns the ones the file
/// changed.
fn keep_running_settings(new: &mut Config, running: &Config) -> Vec<&'static str> {
    let mut changed = crate::config::restart_required(running, new);
    // pingora reads the grace period once, when the server is built.
    if new.shutdown_grace != running.shutdown_grace {
        changed.push("shutdown.grace");
    }
    new.listen.clone_from(&running.listen);
    new.admin.clone_from(&running.admin);
    new.limits.max_connections = running.limits.max_connections;
    new.threads = running.threads;
    new.shutdown_grace = running.shutdown_grace;
    changed
}

/// Origin names added, removed and changed (same name, other settings).
fn diff(old: &Snapshot, new: &Snapshot) -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut added = Vec::new();
    let mut changed = Vec::new();
    for origin in &new.origins {
        match old.origin_named(origin.name()) {
            None => added.push(origin.name().to_string()),
            Some(before) if before.config != origin.config => {
                changed.push(origin.name().to_string());
            }
            Some(_) => {}
        }
    }
    let removed = old
        .origins
        .iter()
        .filter(|origin| new.origin_named(origin.name()).is_none())
        .map(|origin| origin.name().to_string())
        .collect();
    (added, removed, changed)
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn millis(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e5).round() / 100.0
}

/// A short list for a log field: the first few names and how many more.
fn names(list: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut text = list
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if list.len() > SHOWN {
        text.push_str(&format!(" and {} more", list.len() - SHOWN));
    }
    text
}

fn report(outcome: &ReloadOutcome, trigger: Trigger, since: Option<Instant>) {
    match outcome {
        ReloadOutcome::Applied {
            origins,
            added,
            removed,
            changed,
            restart_required,
            timings,
        } => {
            tracing::info!(
                trigger = trigger.as_str(),
                origins,
                added = %names(added),
                removed = %names(removed),
                changed = %names(changed),
                took_ms = millis(timings.total),
                load_ms = millis(timings.load),
                build_ms = millis(timings.build),
                since_change_ms = since.map(|at| millis(at.elapsed())),
                "config reloaded"
            );
            if !restart_required.is_empty() {
                tracing::warn!(
                    settings = %restart_required.join(", "),
                    "config reload: the file changes {} — applied only on restart; the running values stay in force until then",
                    restart_required.join(", ")
                );
            }
        }
        ReloadOutcome::Unchanged => {
            tracing::debug!(
                trigger = trigger.as_str(),
                "config unchanged; nothing to reload"
            );
        }
        ReloadOutcome::Failed(errors) => {
            for error in errors {
                tracing::error!(trigger = trigger.as_str(), "config reload: {error}");
            }
            tracing::error!(
                trigger = trigger.as_str(),
                errors = errors.len(),
                "config reload failed; the running config stays in force"
            );
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Watching.

/// How a file-system event bears on the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    /// The config was replaced whole (a rename onto it, or onto `..data`): safe to read now.
    Replaced,
    /// Written in place, created, removed or renamed away: may be mid-save; wait for quiet.
    Written,
}

/// The names in the watched directories whose events matter.
#[derive(Debug, Default)]
struct Relevant {
    /// The config's file name, and its symlink target's when that differs.
    names: HashSet<OsString>,
}

impl Relevant {
    fn classify(&self, event: &notify::Event) -> Option<Change> {
        if event.need_rescan() {
            // The kernel queue overflowed: anything may have changed.
            return Some(Change::Written);
        }
        let change = match event.kind {
            EventKind::Access(_) | EventKind::Modify(ModifyKind::Metadata(_)) => return None,
            EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both)) => {
                Change::Replaced
            }
            _ => Change::Written,
        };
        // For a rename with both ends, the destination is the last path.
        let path = match event.kind {
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => event.paths.last(),
            _ => event.paths.first(),
        };
        let name = path.and_then(|path| path.file_name())?;
        if self.names.contains(name) {
            return Some(change);
        }
        // Kubernetes' atomic writer: only the final rename onto `..data` changes what the config
        // path reads; its timestamped directories come and go around it.
        if change == Change::Replaced && name == "..data" {
            return Some(Change::Replaced);
        }
        None
    }
}

/// Events seen and not yet acted on.
#[derive(Debug, Default)]
struct Burst {
    first: Option<Instant>,
    last: Option<Instant>,
    written: bool,
}

impl Burst {
    /// When the burst may be read: [`DEBOUNCE`] after the last event if anything was written in
    /// place, else [`SETTLE`]; never later than [`MAX_DELAY`] after the first.
    fn due(&self) -> Option<Instant> {
        let (first, last) = (self.first?, self.last?);
        let quiet = if self.written { DEBOUNCE } else { SETTLE };
        Some((last + quiet).min(first + MAX_DELAY))
    }
}

#[derive(Default)]
struct Pending {
    burst: Mutex<Burst>,
    wake: tokio::sync::Notify,
}

/// The directories to watch for `config` and the names that matter in them.
fn watch_plan(config: &Path) -> (Vec<PathBuf>, Relevant) {
    let directory = config
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let mut directories = vec![directory.clone()];
    let mut relevant = Relevant::default();
    if let Some(name) = config.file_name() {
        relevant.names.insert(name.to_os_string());
    }
    // A symlink into another directory: edits there change what the config reads. (A target
    // inside the config's own directory — a ConfigMap's `..data/...` — changes only through
    // renames in the directory already watched.)
    if let Ok(target) = std::fs::canonicalize(config) {
        let canonical_directory = std::fs::canonicalize(&directory).unwrap_or(directory);
        if let Some(target_directory) = target.parent() {
            if !target_directory.starts_with(&canonical_directory) {
                directories.push(target_directory.to_path_buf());
                if let Some(name) = target.file_name() {
                    relevant.names.insert(name.to_os_string());
                }
            }
        }
    }
    (directories, relevant)
}

struct ConfigWatcher {
    watcher: notify::RecommendedWatcher,
    relevant: Arc<RwLock<Relevant>>,
    watched: Vec<PathBuf>,
}

impl ConfigWatcher {
    fn start(config: &Path, pending: Arc<Pending>) -> notify::Result<ConfigWatcher> {
        let relevant: Arc<RwLock<Relevant>> = Arc::default();
        let filter = relevant.clone();
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let event = match event {
                Ok(event) => event,
                Err(e) => {
                    tracing::warn!("config watcher: {e}");
                    return;
                }
            };
            let Some(change) = filter.read().ok().and_then(|r| r.classify(&event)) else {
                return;
            };
            if let Ok(mut burst) = pending.burst.lock() {
                let now = Instant::now();
                burst.first.get_or_insert(now);
                burst.last = Some(now);
                burst.written |= change == Change::Written;
            }
            pending.wake.notify_one();
        })?;
        let mut config_watcher = ConfigWatcher {
            watcher,
            relevant,
            watched: Vec::new(),
        };
        config_watcher.follow(config);
        if config_watcher.watched.is_empty() {
            return Err(notify::Error::generic(
                "cannot watch the config file's directory",
            ));
        }
        Ok(config_watcher)
    }

    /// Watches what the config path points at now (a symlink may have moved).
    fn follow(&mut self, config: &Path) {
        let (directories, relevant) = watch_plan(config);
        if let Ok(mut current) = self.relevant.write() {
            *current = relevant;
        }
        for gone in self.watched.iter().filter(|d| !directories.contains(d)) {
            let _ = self.watcher.unwatch(gone);
        }
        let mut watched = Vec::new();
        for directory in directories {
            if self.watched.contains(&directory) {
                watched.push(directory);
                continue;
            }
            match self.watcher.watch(&directory, RecursiveMode::NonRecursive) {
                Ok(()) => watched.push(directory),
                Err(e) => tracing::warn!(
                    directory = %directory.display(),
                    "config watcher: cannot watch the directory: {e}"
                ),
            }
        }
        self.watched = watched;
    }
}

/// Starts listening for SIGHUP. Call it as early as possible: until a handler is installed,
/// SIGHUP's default action kills the process.
///
/// Works outside a tokio runtime too: the handler is process-wide and the returned stream is fed
/// by whichever runtime's signal driver runs, so a throwaway runtime is enough to register it.
pub fn listen_for_hangup() -> Option<Signal> {
    let result = if tokio::runtime::Handle::try_current().is_ok() {
        tokio::signal::unix::signal(SignalKind::hangup())
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .and_then(|runtime| {
                let _entered = runtime.enter();
                tokio::signal::unix::signal(SignalKind::hangup())
            })
    };
    match result {
        Ok(signal) => Some(signal),
        Err(e) => {
            tracing::warn!("cannot listen for SIGHUP (file changes still reload): {e}");
            None
        }
    }
}

/// Reloads on every change of the config file and on every SIGHUP until shutdown.
pub async fn watch(
    reloader: Arc<Reloader>,
    mut hangup: Option<Signal>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let pending = Arc::new(Pending::default());
    let mut watcher = match ConfigWatcher::start(reloader.path(), pending.clone()) {
        Ok(watcher) => Some(watcher),
        Err(e) => {
            tracing::warn!(
                config = %reloader.path().display(),
                "config file changes are not watched (SIGHUP still reloads): {e}"
            );
            None
        }
    };
    tracing::info!(
        config = %reloader.path().display(),
        watching = %watcher.as_ref().map_or_else(String::new, |w| {
            w.watched.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
        }),
        sighup = hangup.is_some(),
        "config reload: watching the config file (SIGHUP reloads too)"
    );
    loop {
        let trigger = tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => return,
            Some(()) = async {
                match hangup.as_mut() {
                    Some(signal) => signal.recv().await,
                    None => std::future::pending().await,
                }
            } => Trigger::Hangup,
            () = pending.wake.notified() => Trigger::FileChange,
        };
        let since = match trigger {
            Trigger::Hangup => None,
            Trigger::FileChange => {
                let Some(first) = settle(&pending, &mut shutdown).await else {
                    return;
                };
                match first {
                    Some(first) => Some(first),
                    // A wake-up left over from a burst already handled.
                    None => continue,
                }
            }
        };
        reloader.reload(trigger, since).await;
        if let Some(watcher) = watcher.as_mut() {
            watcher.follow(reloader.path());
        }
    }
}

/// Waits until the burst is due, then takes it. `None` on shutdown; `Some(None)` when there was
/// no burst; else when its first event was seen.
async fn settle(
    pending: &Pending,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
) -> Option<Option<Instant>> {
    // Bounded: each pass either returns or sleeps until a due time at most MAX_DELAY after the
    // burst's first event.
    loop {
        let due = pending.burst.lock().ok().and_then(|burst| burst.due());
        let Some(due) = due else {
            return Some(None);
        };
        if Instant::now() >= due {
            let first = pending
                .burst
                .lock()
                .ok()
                .and_then(|mut burst| std::mem::take(&mut *burst).first);
            return Some(first);
        }
        tokio::select! {
            _ = tokio::time::sleep_until(due.into()) => {}
            _ = shutdown.wait_for(|stop| *stop) => return None,
        }
    }
}

/// The reloader as a pingora background service.
pub struct ReloadService {
    reloader: Arc<Reloader>,
    hangup: Mutex<Option<Signal>>,
}

impl ReloadService {
    /// Installs the SIGHUP handler at once (see [`listen_for_hangup`]).
    pub fn new(live: Arc<Live>, path: PathBuf, running: Arc<Config>) -> ReloadService {
        ReloadService {
            reloader: Arc::new(Reloader::new(live, path, running)),
            hangup: Mutex::new(listen_for_hangup()),
        }
    }
}

#[async_trait]
impl BackgroundService for ReloadService {
    async fn start(&self, shutdown: ShutdownWatch) {
        let hangup = self
            .hangup
            .lock()
            .ok()
            .and_then(|mut hangup| hangup.take())
            .or_else(listen_for_hangup);
        watch(self.reloader.clone(), hangup, shutdown).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{AccessKind, AccessMode, CreateKind, DataChange, MetadataKind, RemoveKind};

    fn relevant(names: &[&str]) -> Relevant {
        Relevant {
            names: names.iter().map(OsString::from).collect(),
        }
    }

    fn event(kind: EventKind, paths: &[&str]) -> notify::Event {
        let mut event = notify::Event::new(kind);
        for path in paths {
            event = event.add_path(PathBuf::from(path));
        }
        event
    }

    #[test]
    fn renames_onto_the_config_or_data_are_atomic_replacements() {
        let r = relevant(&["robotsguard.yaml"]);
        let rename_to = EventKind::Modify(ModifyKind::Name(RenameMode::To));
        let both = EventKind::Modify(ModifyKind::Name(RenameMode::Both));
        assert_eq!(
            r.classify(&event(rename_to, &["/etc/rg/robotsguard.yaml"])),
            Some(Change::Replaced)
        );
        assert_eq!(
            r.classify(&event(
                both,
                &["/etc/rg/.robotsguard.yaml.swp", "/etc/rg/robotsguard.yaml"]
            )),
            Some(Change::Replaced)
        );
        assert_eq!(
            r.classify(&event(both, &["/etc/rg/..data_tmp", "/etc/rg/..data"])),
            Some(Change::Replaced)
        );
    }

    #[test]
    fn in_place_writes_wait_for_quiet() {
        let r = relevant(&["robotsguard.yaml"]);
        for kind in [
            EventKind::Create(CreateKind::File),
            EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            EventKind::Remove(RemoveKind::File),
            EventKind::Modify(ModifyKind::Name(RenameMode::From)),
        ] {
            assert_eq!(
                r.classify(&event(kind, &["/etc/rg/robotsguard.yaml"])),
                Some(Change::Written),
                "{kind:?}"
            );
        }
    }

    #[test]
    fn open_close_metadata_and_other_files_are_ignored() {
        let r = relevant(&["robotsguard.yaml"]);
        let config = "/etc/rg/robotsguard.yaml";
        for kind in [
            EventKind::Access(AccessKind::Open(AccessMode::Read)),
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Modify(ModifyKind::Metadata(MetadataKind::Any)),
        ] {
            assert_eq!(r.classify(&event(kind, &[config])), None, "{kind:?}");
        }
        let write = EventKind::Modify(ModifyKind::Data(DataChange::Any));
        assert_eq!(r.classify(&event(write, &["/etc/rg/stderr.log"])), None);
        // The ConfigMap's timestamped directories appear and go without changing the config.
        let create = EventKind::Create(CreateKind::Folder);
        assert_eq!(
            r.classify(&event(create, &["/etc/rg/..2024_01_01_00_00_00.1"])),
            None
        );
        let rename_to = EventKind::Modify(ModifyKind::Name(RenameMode::To));
        assert_eq!(r.classify(&event(rename_to, &["/etc/rg/other.yaml"])), None);
    }

    #[test]
    fn a_burst_is_due_after_quiet_or_the_maximum_delay() {
        let start = Instant::now();
        let mut burst = Burst {
            first: Some(start),
            last: Some(start),
            written: false,
        };
        assert_eq!(burst.due(), Some(start + SETTLE));
        burst.written = true;
        assert_eq!(burst.due(), Some(start + DEBOUNCE));
        burst.last = Some(start + Duration::from_secs(5));
        assert_eq!(burst.due(), Some(start + MAX_DELAY));
        assert_eq!(Burst::default().due(), None);
    }

    #[test]
    fn restart_only_settings_keep_their_running_values() {
        let running = crate::config::load_str(
            "listen: [\"127.0.0.1:8080\"]\nadmin: \"127.0.0.1:9090\"\nthreads: 2\nshutdown: {grace: 10s}\norigins:\n  - {name: a, hosts: [a.example], upstream: \"127.0.0.1:1\"}\n",
            "old.yaml",
            Path::new("."),
        )
        .expect("old config is valid");
        let mut new = crate::config::load_str(
            "listen: [\"127.0.0.1:8081\"]\nadmin: \"127.0.0.1:9091\"\nthreads: 4\nshutdown: {grace: 5s}\norigins:\n  - {name: b, hosts: [b.example], upstream: \"127.0.0.1:2\"}\n",
            "new.yaml",
            Path::new("."),
        )
        .expect("new config is valid");
        let changed = keep_running_settings(&mut new, &running);
        assert_eq!(changed, ["listen", "admin", "threads", "shutdown.grace"]);
        assert_eq!(new.listen, running.listen);
        assert_eq!(new.admin, running.admin);
        assert_eq!(new.threads, running.threads);
        assert_eq!(new.shutdown_grace, running.shutdown_grace);
        assert_eq!(
            new.origins[0].name, "b",
            "everything else is the new file's"
        );
        let mut same = running.clone();
        assert!(keep_running_settings(&mut same, &running).is_empty());
    }
}
