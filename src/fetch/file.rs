//! File-sourced robots.txt: reading the file, and one shared directory watcher that wakes the
//! origins whose file may have changed.
//!
//! The watcher watches directories, not files: editors replace files by renaming a new one over
//! them, and Kubernetes updates ConfigMap volumes by swapping the `..data` symlink, and neither
//! produces an event on the old file. Only create, modify, remove and rename events count —
//! reading the file ourselves produces open/close (access) events, which must not trigger reloads.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use bytes::Bytes;
use notify::{EventKind, RecursiveMode, Watcher};

use super::origin::{unreachable, FetchOutcome, Fetched};
use crate::state::{Origin, RobotsCopy};

/// Reads a file-sourced robots.txt; an unreadable file keeps the last good copy.
pub fn read(origin: &Origin, path: &Path) -> Fetched {
    let settings = &origin.robots.settings;
    let previous = origin.robots.current();
    let source = format!("file {}", path.display());
    match read_limited(path, settings.max_size) {
        Ok((body, over_limit)) => {
            let reason = format!("read from {}", path.display());
            let mut copy =
                RobotsCopy::from_body_or_previous(body, settings.max_size, "ok", reason, &previous);
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

/// One notify watcher for every watched directory; subscribers get a `watch` channel per
/// directory that ticks on each relevant event in it.
pub struct DirectoryWatcher {
    watcher: Mutex<Option<notify::RecommendedWatcher>>,
    directories: Arc<Mutex<HashMap<PathBuf, tokio::sync::watch::Sender<u64>>>>,
}

impl DirectoryWatcher {
    pub fn new() -> DirectoryWatcher {
        let directories: Arc<Mutex<HashMap<PathBuf, tokio::sync::watch::Sender<u64>>>> =
            Arc::default();
        let senders = directories.clone();
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let Ok(event) = event else { return };
            if !is_content_change(&event.kind) {
                return;
            }
            let Ok(directories) = senders.lock() else {
                return;
            };
            for path in &event.paths {
                let directory = path.parent().unwrap_or(path);
                for candidate in [directory, path.as_path()] {
                    if let Some(sender) = directories.get(candidate) {
                        sender.send_modify(|ticks| *ticks = ticks.wrapping_add(1));
                    }
                }
            }
        });
        let watcher = match watcher {
            Ok(watcher) => Some(watcher),
            Err(e) => {
                tracing::warn!("cannot watch robots.txt files (they are still re-read every refresh interval): {e}");
                None
            }
        };
        DirectoryWatcher {
            watcher: Mutex::new(watcher),
            directories,
        }
    }

    /// Ticks whenever something in the directory of `file` is created, changed, removed or
    /// renamed. The directory is watched from the first subscription on.
    pub fn subscribe(&self, file: &Path) -> tokio::sync::watch::Receiver<u64> {
        let directory = file
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let Ok(mut directories) = self.directories.lock() else {
            return tokio::sync::watch::Sender::new(0).subscribe();
        };
        if let Some(sender) = directories.get(&directory) {
            return sender.subscribe();
        }
        let sender = tokio::sync::watch::Sender::new(0);
        let receiver = sender.subscribe();
        directories.insert(directory.clone(), sender);
        drop(directories);
        if let Ok(mut watcher) = self.watcher.lock() {
            if let Some(watcher) = watcher.as_mut() {
                if let Err(e) = watcher.watch(&directory, RecursiveMode::NonRecursive) {
                    tracing::warn!(
                        directory = %directory.display(),
                        "cannot watch robots.txt directory (the file is still re-read every refresh interval): {e}"
                    );
                }
            }
        }
        receiver
    }
}

impl DirectoryWatcher {
    /// Watches the directory of `file` afresh. When that directory is reached through a symlink
    /// that was swapped (a ConfigMap's `robots -> ..data/robots`), the old watch went with the
    /// deleted target; a new watch follows the link to where it points now.
    pub fn rewatch(&self, file: &Path) {
        let directory = file
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        if let Ok(mut watcher) = self.watcher.lock() {
            if let Some(watcher) = watcher.as_mut() {
                let _ = watcher.unwatch(&directory);
                if let Err(e) = watcher.watch(&directory, RecursiveMode::NonRecursive) {
                    tracing::warn!(directory = %directory.display(), "cannot watch robots.txt directory: {e}");
                }
            }
        }
    }
}

impl Default for DirectoryWatcher {
    fn default() -> Self {
        DirectoryWatcher::new()
    }
}

/// Events that can change what a file reads as. Opening, reading and closing a file we only read
/// are not — reacting to them would make every read trigger another read — but a writer closing
/// the file is the surest sign its write is complete.
fn is_content_change(kind: &EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode};
    match kind {
        EventKind::Create(_) | EventKind::Remove(_) => true,
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Modify(notify::event::ModifyKind::Metadata(_)) => false,
        EventKind::Modify(_) => true,
        EventKind::Access(_) | EventKind::Any | EventKind::Other => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{AccessKind, AccessMode, CreateKind, MetadataKind, ModifyKind, RenameMode};

    #[test]
    fn only_content_changes_count() {
        assert!(is_content_change(&EventKind::Create(CreateKind::File)));
        assert!(is_content_change(&EventKind::Modify(ModifyKind::Name(
            RenameMode::To
        ))));
        assert!(is_content_change(&EventKind::Modify(ModifyKind::Data(
            notify::event::DataChange::Any
        ))));
        assert!(is_content_change(&EventKind::Access(AccessKind::Close(
            AccessMode::Write
        ))));
        assert!(!is_content_change(&EventKind::Access(AccessKind::Close(
            AccessMode::Read
        ))));
        assert!(!is_content_change(&EventKind::Access(AccessKind::Open(
            AccessMode::Read
        ))));
        assert!(!is_content_change(&EventKind::Modify(
            ModifyKind::Metadata(MetadataKind::AccessTime)
        )));
    }
}
