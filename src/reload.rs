//! Config hot reload: watch the config file (and listen for SIGHUP), then parse, validate and
//! build a complete new [`Snapshot`] and swap it in — or keep the running one and say why.
//! SIGHUP also fetches every origin's robots.txt again at once (after the reload, whatever its
//! outcome), so a robots.txt change can be forced live; SIGHUP and SIGUSR1 open the access log
//! file again (after log rotation).
//!
//! - **What is watched.** The config file's directory, with the events and the debounce rule of
//!   `fetch::watch` (shared with file-sourced robots.txt): only events on the config's
//!   name, or a rename onto `..data`, count. When the config path is a symlink into another
//!   directory, that directory is watched too. SIGHUP reloads at once.
//! - **All or nothing.** A config that does not load, or whose snapshot cannot be built (an
//!   upstream name that does not resolve), changes nothing: every error is logged with
//!   `file:line:column` and `robotsguard_config_reloads_total{result="failure"}` counts it.
//! - **Restart-only settings** (listeners, the admin address, the connection limit, threads, the
//!   shutdown grace; the one list is [`crate::config::restart_required`]'s) are set up once at
//!   start. A file that changes them reloads everything else, keeps their running values, and
//!   says so in the log and in `robotsguard_config_restart_required`.
//! - **In-flight requests** hold the origin they were routed to, so they finish on the snapshot
//!   they started with; the robots.txt refresher reconciles its per-origin tasks on each swap
//!   (added origins are fetched, removed ones dropped).

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use pingora::connectors::http::Connector;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use tokio::signal::unix::{Signal, SignalKind};

use crate::config::{Config, RobotsSource};
use crate::metrics::METRICS;
use crate::net::watch::{directory_of, Change, Debouncer, DirectoryWatcher};
use crate::snapshot::{Live, Snapshot};

/// What set a reload off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The watcher saw the config change.
    FileChange,
    /// SIGHUP (always rebuilds, so upstream DNS names are resolved again).
    Hangup,
}

impl Trigger {
    /// How log lines name it.
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
#[non_exhaustive]
pub enum ReloadOutcome {
    /// A new snapshot is in force.
    Applied {
        /// Origins in the new config.
        origins: usize,
        /// Origins the file added, removed, or changed, by name.
        added: Vec<String>,
        /// See `added`.
        removed: Vec<String>,
        /// See `added`.
        changed: Vec<String>,
        /// Settings the file changed that only a restart applies (their running values stay).
        restart_required: Vec<&'static str>,
        /// What the new config says that is probably not meant (`validate` prints the same).
        warnings: Vec<crate::config::ConfigWarning>,
        /// How long each stage took.
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

    /// The config file this reloader reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Fetches (or reads) every origin's robots.txt of the snapshot in force again, in the
    /// background, and logs what came of it.
    pub fn refetch_robots(&self, trigger: Trigger) {
        let live = self.live.clone();
        tokio::spawn(async move {
            let snapshot = live.load();
            let (fetched, changed, failed) = crate::fetch::refresh_all(&snapshot).await;
            tracing::info!(
                trigger = trigger.as_str(),
                fetched,
                changed,
                failed,
                "robots.txt fetched again for every origin"
            );
        });
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
        let restart_required = crate::config::keep_restart_only(&mut config, &self.running);
        let previous = self.live.load();
        let build_started = Instant::now();
        let built = {
            let previous = previous.clone();
            tokio::task::spawn_blocking(move || {
                crate::store::install_trap_secret(&config);
                Snapshot::build(Arc::new(config), Some(&previous))
            })
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
        let warnings =
            crate::enforce::config_warnings(&snapshot.config, snapshot.identifier.catalogue());
        // Set before the snapshot is in force: whoever sees the new config applied also sees
        // whether part of it waits for a restart.
        METRICS
            .config_restart_required
            .set(i64::from(!restart_required.is_empty()));
        // Before the warnings are told: a reload that adds a webhook hears of them.
        crate::events::configure(&snapshot.config.events);
        self.live.install(snapshot);
        let total = started.elapsed();

        for name in &removed {
            METRICS.forget_origin(name);
        }
        METRICS.config_reloads.with_label_values(&["success"]).inc();
        METRICS.config_last_reload_successful.set(1);
        METRICS.config_last_reload_timestamp.set(unix_now());
        if let Ok(mut last) = self.last.lock() {
            *last = Applied { written, ok: true };
        }
        ReloadOutcome::Applied {
            origins,
            added,
            removed,
            changed,
            restart_required,
            warnings,
            timings: Timings {
                load,
                build,
                prefill,
                total,
            },
        }
    }

    fn failed(&self, errors: Vec<String>) -> ReloadOutcome {
        crate::events::config_rejected(&errors);
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
            warnings,
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
            crate::enforce::count_config_warnings(warnings);
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

/// The names in the watched directories whose events matter.
#[derive(Debug, Default)]
struct Relevant {
    /// The config's file name, and its symlink target's when that differs.
    names: HashSet<OsString>,
}

impl Relevant {
    /// What a change to `path` does to the config, if anything. No path: events were lost, so
    /// the config may have changed.
    fn classify(&self, path: Option<&Path>, change: Change) -> Option<Change> {
        let Some(path) = path else {
            return Some(Change::Written);
        };
        let name = path.file_name()?;
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

/// The directories to watch for `config` and the names that matter in them.
fn watch_plan(config: &Path) -> (Vec<PathBuf>, Relevant) {
    let directory = directory_of(config);
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
    watcher: DirectoryWatcher,
    relevant: Arc<RwLock<Relevant>>,
    pending: Arc<Debouncer>,
    watched: Vec<PathBuf>,
}

impl ConfigWatcher {
    fn start(config: &Path) -> notify::Result<ConfigWatcher> {
        let mut config_watcher = ConfigWatcher {
            watcher: DirectoryWatcher::new()?,
            relevant: Arc::default(),
            pending: Arc::default(),
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
            self.watcher.remove(gone);
        }
        let mut watched = Vec::new();
        for directory in directories {
            if self.watched.contains(&directory) {
                watched.push(directory);
                continue;
            }
            let (relevant, pending) = (self.relevant.clone(), self.pending.clone());
            let sink = Box::new(move |path: Option<&Path>, change: Change| {
                let change = relevant
                    .read()
                    .ok()
                    .and_then(|relevant| relevant.classify(path, change));
                if let Some(change) = change {
                    pending.record(change);
                }
            });
            match self.watcher.add(&directory, sink) {
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
    listen_for(SignalKind::hangup(), "SIGHUP (file changes still reload)")
}

/// Starts listening for SIGUSR1 (opens the access log file again), as [`listen_for_hangup`].
pub fn listen_for_usr1() -> Option<Signal> {
    listen_for(
        SignalKind::user_defined1(),
        "SIGUSR1 (SIGHUP still opens the access log again)",
    )
}

fn listen_for(kind: SignalKind, what: &str) -> Option<Signal> {
    let result = if tokio::runtime::Handle::try_current().is_ok() {
        tokio::signal::unix::signal(kind)
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .and_then(|runtime| {
                let _entered = runtime.enter();
                tokio::signal::unix::signal(kind)
            })
    };
    match result {
        Ok(signal) => Some(signal),
        Err(e) => {
            tracing::warn!("cannot listen for {what}: {e}");
            None
        }
    }
}

/// The next delivery of `signal`; never, without one.
async fn next(signal: &mut Option<Signal>) -> Option<()> {
    match signal.as_mut() {
        Some(signal) => signal.recv().await,
        None => std::future::pending().await,
    }
}

/// Reloads on every change of the config file and on every SIGHUP until shutdown; opens the
/// access log file again on SIGHUP and on `usr1`.
pub async fn watch(
    reloader: Arc<Reloader>,
    mut hangup: Option<Signal>,
    mut usr1: Option<Signal>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut watcher = match ConfigWatcher::start(reloader.path()) {
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
    let pending = watcher.as_ref().map(|watcher| watcher.pending.clone());
    loop {
        // A burst cut short by SIGHUP or shutdown stays pending for the next pass.
        let (trigger, since) = tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => return,
            Some(()) = next(&mut usr1) => {
                crate::logs::reopen_access_log();
                tracing::info!("SIGUSR1: the access log file is opened again");
                continue;
            }
            Some(()) = next(&mut hangup) => {
                crate::logs::reopen_access_log();
                (Trigger::Hangup, None)
            }
            first = async {
                match pending.as_deref() {
                    Some(pending) => pending.next().await,
                    None => std::future::pending().await,
                }
            } => (Trigger::FileChange, Some(first)),
        };
        reloader.reload(trigger, since).await;
        if trigger == Trigger::Hangup {
            reloader.refetch_robots(trigger);
        }
        if let Some(watcher) = watcher.as_mut() {
            watcher.follow(reloader.path());
        }
    }
}

/// The reloader as a pingora background service.
pub struct ReloadService {
    reloader: Arc<Reloader>,
    hangup: Mutex<Option<Signal>>,
    usr1: Mutex<Option<Signal>>,
}

impl ReloadService {
    /// Installs the SIGHUP and SIGUSR1 handlers at once (see [`listen_for_hangup`]).
    pub fn new(live: Arc<Live>, path: PathBuf, running: Arc<Config>) -> ReloadService {
        ReloadService {
            reloader: Arc::new(Reloader::new(live, path, running)),
            hangup: Mutex::new(listen_for_hangup()),
            usr1: Mutex::new(listen_for_usr1()),
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
        let usr1 = self
            .usr1
            .lock()
            .ok()
            .and_then(|mut usr1| usr1.take())
            .or_else(listen_for_usr1);
        watch(self.reloader.clone(), hangup, usr1, shutdown).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relevant(names: &[&str]) -> Relevant {
        Relevant {
            names: names.iter().map(OsString::from).collect(),
        }
    }

    #[test]
    fn changes_to_the_config_name_count_as_they_are() {
        let r = relevant(&["robotsguard.yaml"]);
        let config = Path::new("/etc/rg/robotsguard.yaml");
        for change in [Change::Replaced, Change::Written] {
            assert_eq!(r.classify(Some(config), change), Some(change));
        }
    }

    #[test]
    fn a_rename_onto_data_replaces_the_config() {
        let r = relevant(&["robotsguard.yaml"]);
        let data = Path::new("/etc/rg/..data");
        assert_eq!(
            r.classify(Some(data), Change::Replaced),
            Some(Change::Replaced)
        );
        // `..data` going away (the source end of a rename) is not the swap itself.
        assert_eq!(r.classify(Some(data), Change::Written), None);
    }

    #[test]
    fn lost_events_may_have_changed_the_config() {
        let r = relevant(&["robotsguard.yaml"]);
        assert_eq!(r.classify(None, Change::Written), Some(Change::Written));
    }

    #[test]
    fn other_files_are_ignored() {
        let r = relevant(&["robotsguard.yaml"]);
        for path in [
            "/etc/rg/stderr.log",
            "/etc/rg/other.yaml",
            // The ConfigMap's timestamped directories appear and go without changing the config.
            "/etc/rg/..2024_01_01_00_00_00.1",
        ] {
            for change in [Change::Replaced, Change::Written] {
                assert_eq!(r.classify(Some(Path::new(path)), change), None, "{path}");
            }
        }
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
        let changed = crate::config::keep_restart_only(&mut new, &running);
        assert_eq!(
            changed,
            ["listen", "threads", "admin.address", "shutdown.grace"]
        );
        assert_eq!(new.listen, running.listen);
        assert_eq!(new.admin, running.admin);
        assert_eq!(new.threads, running.threads);
        assert_eq!(new.shutdown_grace, running.shutdown_grace);
        assert_eq!(
            new.origins[0].name, "b",
            "everything else is the new file's"
        );
        let mut same = running.clone();
        assert!(crate::config::keep_restart_only(&mut same, &running).is_empty());
    }
}
