//! Watching files for changes: one directory watcher and one debounce rule, used for the config
//! file (config reload) and for file-sourced robots.txt.
//!
//! - **Directories, not files.** Editors save by renaming a new file over the old one, and
//!   Kubernetes updates a ConfigMap volume by renaming a fresh `..data` symlink over the old one;
//!   neither touches the old file, so a watch on it would see nothing.
//! - **Which events count** ([`change_of`]): creating, writing, removing and renaming files, and
//!   a writer closing a file it wrote. Opening, reading and closing a file only read are not —
//!   reading the file ourselves makes them, and reacting would make every read set off another.
//! - **Debounce** ([`Burst`]): a write in place (create, truncate, write) may be read half-done,
//!   so a burst is read only after [`DEBOUNCE`] without further events. A rename onto a name
//!   replaces the file whole and atomically, so it is read after a short [`SETTLE`] that only
//!   gathers the rest of the same operation. A directory written to without pause is still read
//!   [`MAX_DELAY`] after its first event.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use notify::{EventKind, RecursiveMode, Watcher};

/// Quiet time after the last in-place write before the file is read.
pub const DEBOUNCE: Duration = Duration::from_millis(200);

/// Wait after an atomic replacement (a rename onto the file or onto `..data`), to gather the
/// other events of the same save.
pub const SETTLE: Duration = Duration::from_millis(25);

/// Longest wait from the first event of a burst to the read, however long the burst lasts.
pub const MAX_DELAY: Duration = Duration::from_secs(2);

/// How an event bears on a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Replaced whole by a rename onto its name: safe to read once the operation settles.
    Replaced,
    /// Created, written, removed or renamed away: may be half-done, read after quiet.
    Written,
}

/// What an event of this kind does to the path it names; `None` for events that cannot change
/// what a file reads as. The destination of a rename is [`Change::Replaced`]; see
/// [`changes_of`] for the source.
pub fn change_of(kind: &EventKind) -> Option<Change> {
    match kind {
        EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both)) => {
            Some(Change::Replaced)
        }
        EventKind::Modify(ModifyKind::Metadata(_)) => None,
        EventKind::Create(_) | EventKind::Remove(_) | EventKind::Modify(_) => Some(Change::Written),
        // A writer closing the file is the surest sign its write is complete.
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => Some(Change::Written),
        EventKind::Access(_) | EventKind::Any | EventKind::Other => None,
    }
}

/// Each path of an event with what the event did to it. A rename with both ends names the
/// source first: that name was written (it went away), the destination replaced.
pub fn changes_of(event: &notify::Event) -> impl Iterator<Item = (&Path, Change)> + '_ {
    let change = change_of(&event.kind);
    let both = matches!(
        event.kind,
        EventKind::Modify(ModifyKind::Name(RenameMode::Both))
    );
    let last = event.paths.len().saturating_sub(1);
    event
        .paths
        .iter()
        .enumerate()
        .filter_map(move |(index, path)| {
            let change = change?;
            let change = if both && index < last {
                Change::Written
            } else {
                change
            };
            Some((path.as_path(), change))
        })
}

/// Events seen and not yet acted on.
#[derive(Debug, Default, Clone, Copy)]
pub struct Burst {
    first: Option<Instant>,
    last: Option<Instant>,
    written: bool,
}

impl Burst {
    /// Adds an event seen at `now`.
    pub fn add(&mut self, change: Change, now: Instant) {
        self.first.get_or_insert(now);
        self.last = Some(now);
        self.written |= change == Change::Written;
    }

    /// When the burst may be read: [`DEBOUNCE`] after the last event if anything was written in
    /// place, else [`SETTLE`]; never later than [`MAX_DELAY`] after the first. `None` when empty.
    pub fn due(&self) -> Option<Instant> {
        let (first, last) = (self.first?, self.last?);
        let quiet = if self.written { DEBOUNCE } else { SETTLE };
        Some((last + quiet).min(first + MAX_DELAY))
    }
}

/// Collects the changes one reader cares about and says when to read (the [`Burst`] rule).
#[derive(Debug, Default)]
pub struct Debouncer {
    burst: Mutex<Burst>,
    wake: tokio::sync::Notify,
}

impl Debouncer {
    /// Records a change seen now and wakes the reader.
    pub fn record(&self, change: Change) {
        if let Ok(mut burst) = self.burst.lock() {
            burst.add(change, Instant::now());
        }
        self.wake.notify_one();
    }

    /// Waits for the next burst to be due and takes it; returns when its first event was seen.
    ///
    /// A burst left pending by a cancelled call is taken up by the next call, so it is safe to
    /// use in `select!`.
    pub async fn next(&self) -> Instant {
        loop {
            let due = self.burst.lock().ok().and_then(|burst| burst.due());
            let Some(due) = due else {
                // Nothing pending (a wake-up may be left over from a burst already taken).
                self.wake.notified().await;
                continue;
            };
            if Instant::now() < due {
                tokio::time::sleep_until(due.into()).await;
                continue;
            }
            let taken = self
                .burst
                .lock()
                .ok()
                .map(|mut burst| std::mem::take(&mut *burst));
            if let Some(first) = taken.and_then(|burst| burst.first) {
                return first;
            }
        }
    }
}

/// Receives each change in a watched directory: the path and what happened to it. No path means
/// events were lost (the kernel's queue overflowed) and any file may have changed.
pub type Sink = Box<dyn Fn(Option<&Path>, Change) + Send + Sync>;

/// One notify watcher over any number of directories, each with the sinks that want its events.
pub struct DirectoryWatcher {
    watcher: Mutex<notify::RecommendedWatcher>,
    sinks: Arc<Mutex<HashMap<PathBuf, Vec<Sink>>>>,
}

impl DirectoryWatcher {
    pub fn new() -> notify::Result<DirectoryWatcher> {
        let sinks: Arc<Mutex<HashMap<PathBuf, Vec<Sink>>>> = Arc::default();
        let targets = sinks.clone();
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let event = match event {
                Ok(event) => event,
                Err(e) => {
                    tracing::warn!("file watcher: {e}");
                    return;
                }
            };
            let Ok(targets) = targets.lock() else { return };
            if event.need_rescan() {
                // The kernel's queue overflowed: anything may have changed anywhere.
                for sink in targets.values().flatten() {
                    sink(None, Change::Written);
                }
                return;
            }
            for (path, change) in changes_of(&event) {
                // An event names a file in a watched directory, or the directory itself.
                let directory = path.parent().unwrap_or(path);
                for watched in [directory, path] {
                    for sink in targets.get(watched).into_iter().flatten() {
                        sink(Some(path), change);
                    }
                }
            }
        })?;
        Ok(DirectoryWatcher {
            watcher: Mutex::new(watcher),
            sinks,
        })
    }

    /// Sends the changes in `directory` to `sink` from now on (the directory is watched from
    /// its first sink on).
    pub fn add(&self, directory: &Path, sink: Sink) -> notify::Result<()> {
        let broken = || notify::Error::generic("the file watcher is broken");
        let first = !self
            .sinks
            .lock()
            .map_err(|_| broken())?
            .contains_key(directory);
        // Not under the sinks' lock: notify's `watch` waits for its event thread, which may be
        // waiting for that lock to deliver an event.
        if first {
            let mut watcher = self.watcher.lock().map_err(|_| broken())?;
            watcher.watch(directory, RecursiveMode::NonRecursive)?;
        }
        self.sinks
            .lock()
            .map_err(|_| broken())?
            .entry(directory.to_path_buf())
            .or_default()
            .push(sink);
        Ok(())
    }

    /// Stops watching `directory` and drops its sinks.
    pub fn remove(&self, directory: &Path) {
        if let Ok(mut sinks) = self.sinks.lock() {
            sinks.remove(directory);
        }
        // The sinks' lock is released: see `add`.
        if let Ok(mut watcher) = self.watcher.lock() {
            let _ = watcher.unwatch(directory);
        }
    }

    /// Watches `directory` afresh. When it is reached through a symlink that was swapped (a
    /// ConfigMap's `robots -> ..data/robots`), the old watch went with the deleted target; a new
    /// one follows the link to where it points now.
    pub fn rewatch(&self, directory: &Path) -> notify::Result<()> {
        let mut watcher = self
            .watcher
            .lock()
            .map_err(|_| notify::Error::generic("the file watcher is broken"))?;
        let _ = watcher.unwatch(directory);
        watcher.watch(directory, RecursiveMode::NonRecursive)
    }
}

/// The directory a file is in (`.` for a bare name).
pub fn directory_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, DataChange, MetadataKind, RemoveKind};

    #[test]
    fn renames_onto_a_name_replace_it_and_in_place_writes_write_it() {
        for kind in [
            EventKind::Modify(ModifyKind::Name(RenameMode::To)),
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)),
        ] {
            assert_eq!(change_of(&kind), Some(Change::Replaced), "{kind:?}");
        }
        for kind in [
            EventKind::Create(CreateKind::File),
            EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            EventKind::Remove(RemoveKind::File),
            EventKind::Modify(ModifyKind::Name(RenameMode::From)),
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
        ] {
            assert_eq!(change_of(&kind), Some(Change::Written), "{kind:?}");
        }
    }

    #[test]
    fn reading_and_metadata_are_not_changes() {
        for kind in [
            EventKind::Access(AccessKind::Open(AccessMode::Read)),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Modify(ModifyKind::Metadata(MetadataKind::AccessTime)),
            EventKind::Modify(ModifyKind::Metadata(MetadataKind::Any)),
            EventKind::Any,
            EventKind::Other,
        ] {
            assert_eq!(change_of(&kind), None, "{kind:?}");
        }
    }

    #[test]
    fn a_rename_with_both_ends_writes_the_source_and_replaces_the_destination() {
        let event = notify::Event::new(EventKind::Modify(ModifyKind::Name(RenameMode::Both)))
            .add_path(PathBuf::from("/etc/rg/..data_tmp"))
            .add_path(PathBuf::from("/etc/rg/..data"));
        let changes: Vec<_> = changes_of(&event).collect();
        assert_eq!(
            changes,
            [
                (Path::new("/etc/rg/..data_tmp"), Change::Written),
                (Path::new("/etc/rg/..data"), Change::Replaced)
            ]
        );
    }

    #[test]
    fn a_burst_is_due_after_quiet_or_the_maximum_delay() {
        let start = Instant::now();
        let mut burst = Burst::default();
        assert_eq!(burst.due(), None);
        burst.add(Change::Replaced, start);
        assert_eq!(burst.due(), Some(start + SETTLE));
        burst.add(Change::Written, start);
        assert_eq!(burst.due(), Some(start + DEBOUNCE));
        burst.add(Change::Replaced, start + Duration::from_secs(5));
        assert_eq!(burst.due(), Some(start + MAX_DELAY));
    }

    #[tokio::test]
    async fn a_debouncer_returns_once_per_burst() {
        let debouncer = Debouncer::default();
        let before = Instant::now();
        debouncer.record(Change::Written);
        debouncer.record(Change::Replaced);
        let first = debouncer.next().await;
        assert!(first >= before);
        assert!(Instant::now() >= first + DEBOUNCE, "waited for quiet");
        // The burst was taken: a leftover wake-up does not make a second one.
        let again = tokio::time::timeout(Duration::from_millis(300), debouncer.next()).await;
        assert!(again.is_err());
    }

    /// A watcher on a real temporary directory feeding one debouncer.
    fn watched_directory() -> (tempfile::TempDir, DirectoryWatcher, Arc<Debouncer>) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
        let watcher = DirectoryWatcher::new().unwrap_or_else(|e| panic!("watcher: {e}"));
        let debouncer = Arc::new(Debouncer::default());
        let receiver = debouncer.clone();
        let sink = Box::new(move |_: Option<&Path>, change: Change| receiver.record(change));
        watcher
            .add(dir.path(), sink)
            .unwrap_or_else(|e| panic!("watch: {e}"));
        (dir, watcher, debouncer)
    }

    #[tokio::test]
    async fn a_real_rename_over_a_file_is_seen_once_settled() {
        let (dir, _watcher, debouncer) = watched_directory();
        let target = dir.path().join("robots.txt");
        let fresh = dir.path().join(".robots.txt.tmp");
        std::fs::write(&fresh, "User-agent: *\nDisallow: /\n")
            .unwrap_or_else(|e| panic!("write: {e}"));
        std::fs::rename(&fresh, &target).unwrap_or_else(|e| panic!("rename: {e}"));
        let seen = tokio::time::timeout(Duration::from_secs(5), debouncer.next()).await;
        assert!(seen.is_ok(), "the rename was seen");
    }

    #[tokio::test]
    async fn reading_a_real_file_is_not_a_change() {
        let (dir, _watcher, debouncer) = watched_directory();
        let file = dir.path().join("robots.txt");
        std::fs::write(&file, "User-agent: *\n").unwrap_or_else(|e| panic!("write: {e}"));
        // The write's own burst.
        let written = tokio::time::timeout(Duration::from_secs(5), debouncer.next()).await;
        assert!(written.is_ok(), "the write was seen");
        for _ in 0..3 {
            std::fs::read(&file).unwrap_or_else(|e| panic!("read: {e}"));
        }
        let after = tokio::time::timeout(Duration::from_millis(500), debouncer.next()).await;
        assert!(after.is_err(), "reads set nothing off");
    }

    #[test]
    fn the_directory_of_a_bare_name_is_the_current_one() {
        assert_eq!(directory_of(Path::new("robots.txt")), PathBuf::from("."));
        assert_eq!(directory_of(Path::new("/a/b.txt")), PathBuf::from("/a"));
    }
}
