//! File-sourced robots.txt: reading the file, and one shared directory watcher ([`crate::net::watch`])
//! that wakes the origins whose file may have changed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::SystemTime;

use bytes::Bytes;

use super::origin::{unreachable, FetchOutcome, Fetched};
use crate::net::watch::{directory_of, Change, Debouncer, DirectoryWatcher};
use crate::snapshot::{CopyOutcome, Origin, RobotsCopy};

/// Reads a file-sourced robots.txt; an unreadable file keeps the last good copy.
pub async fn read(origin: &Origin, path: &Path) -> Fetched {
    let settings = &origin.robots.settings;
    let previous = origin.robots.current();
    let source = format!("file {}", path.display());
    // Off the runtime's workers: a file may be up to `max_size` (64 MiB) on a slow volume.
    let (owned, max_size) = (path.to_path_buf(), settings.max_size);
    let read = tokio::task::spawn_blocking(move || read_limited(&owned, max_size))
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)));
    match read {
        Ok((body, over_limit)) => {
            let reason = format!("read from {}", path.display());
            let mut copy = RobotsCopy::from_body_or_previous(
                body,
                settings.max_size,
                CopyOutcome::Ok,
                reason,
                &previous,
            );
            copy.source = source;
            copy.fetched_at = Some(SystemTime::now());
            let outcome = if over_limit {
                FetchOutcome::TooLarge
            } else {
                FetchOutcome::Ok
            };
            Fetched::new(copy, outcome)
        }
        Err(e) => {
            let error = format!("cannot read {}: {e}", path.display());
            unreachable(&previous, settings.on_unreachable, error, None, source)
        }
    }
}

/// Reads at most `max_size` bytes; says whether the file had more.
fn read_limited(path: &Path, max_size: usize) -> std::io::Result<(Bytes, bool)> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let mut body = Vec::new();
    file.take(max_size as u64 + 1).read_to_end(&mut body)?;
    let over = body.len() > max_size;
    body.truncate(max_size);
    Ok((Bytes::from(body), over))
}

/// Wakes the refresh loops of file-sourced origins when their file may have changed: one shared
/// [`DirectoryWatcher`], and per subscriber a [`Debouncer`] (the same rule as the config's).
pub struct FileWatcher {
    watcher: Option<DirectoryWatcher>,
    /// Per watched directory, the debouncers of the loops reading a file in it. Weak, so a loop
    /// that ends (its origin removed by a reload) leaves nothing behind.
    subscribers: Arc<Mutex<Subscribers>>,
}

type Subscribers = HashMap<PathBuf, Vec<Weak<Debouncer>>>;

impl FileWatcher {
    pub fn new() -> FileWatcher {
        let watcher = match DirectoryWatcher::new() {
            Ok(watcher) => Some(watcher),
            Err(e) => {
                tracing::warn!("cannot watch robots.txt files (they are still re-read every refresh interval): {e}");
                None
            }
        };
        FileWatcher {
            watcher,
            subscribers: Arc::default(),
        }
    }

    /// A debouncer that collects every change in the directory of `file`. Any file counts, not
    /// only `file`: a ConfigMap swaps `..data`, and an unchanged file is recognised cheaply when
    /// re-read. It stops receiving when dropped.
    pub fn subscribe(&self, file: &Path) -> Arc<Debouncer> {
        let debouncer = Arc::new(Debouncer::default());
        let Some(watcher) = &self.watcher else {
            return debouncer;
        };
        let directory = directory_of(file);
        let first = {
            let Ok(mut subscribers) = self.subscribers.lock() else {
                return debouncer;
            };
            let first = !subscribers.contains_key(&directory);
            let list = subscribers.entry(directory.clone()).or_default();
            list.retain(|subscriber| subscriber.strong_count() > 0);
            list.push(Arc::downgrade(&debouncer));
            first
        };
        // Added with the subscribers unlocked: the watcher calls the sink under its own lock,
        // and the sink takes this one.
        if first {
            let subscribers = self.subscribers.clone();
            let watched = directory.clone();
            let sink = Box::new(move |_: Option<&Path>, change: Change| {
                let Ok(mut subscribers) = subscribers.lock() else {
                    return;
                };
                if let Some(list) = subscribers.get_mut(&watched) {
                    list.retain(|subscriber| match subscriber.upgrade() {
                        Some(debouncer) => {
                            debouncer.record(change);
                            true
                        }
                        None => false,
                    });
                }
            });
            if let Err(e) = watcher.add(&directory, sink) {
                tracing::warn!(
                    directory = %directory.display(),
                    "cannot watch robots.txt directory (the file is still re-read every refresh interval): {e}"
                );
            }
        }
        debouncer
    }

    /// Watches the directory of `file` afresh (see [`DirectoryWatcher::rewatch`]).
    pub fn rewatch(&self, file: &Path) {
        let Some(watcher) = &self.watcher else { return };
        let directory = directory_of(file);
        if let Err(e) = watcher.rewatch(&directory) {
            tracing::warn!(directory = %directory.display(), "cannot watch robots.txt directory: {e}");
        }
    }
}

impl Default for FileWatcher {
    fn default() -> Self {
        FileWatcher::new()
    }
}
