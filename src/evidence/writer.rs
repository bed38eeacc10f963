//! The writer: one thread of its own that takes records off a bounded queue, stores the
//! robots.txt copies they refer to, signs them, chains them and appends them to this replica's
//! current file; it also rotates files by size and prunes them after `evidence.retention`.
//!
//! Durability: a batch of records (what the queue held, at most [`BATCH`]) is written with one
//! `write` per record and made durable with one `fdatasync` before the next batch; a robots.txt
//! copy is written to a temporary file, synced and renamed before any record naming it. A crash
//! loses what was queued and the batch not yet synced; it cannot damage an earlier record: files
//! are only appended to, and a torn last line (no newline) is cut off when the chain is opened
//! again, so the chain goes on from the last whole record.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use ed25519_dalek::{Signer as _, SigningKey};
use serde_json::{json, Value};
use sha2::Digest as _;

use super::record::{group_agents, robots_line, Pending, MAX_CLIENT_FIELD};
use super::{jcs, key, ROBOTS_DIR};
use crate::metrics::METRICS;
use crate::snapshot::RobotsCopy;

/// The most records written between two syncs.
const BATCH: usize = 256;

/// How often old files are looked for.
const PRUNE_EVERY: Duration = Duration::from_secs(60 * 60);

/// The robots.txt copies whose digest is remembered (a copy seen again is not hashed again).
const KNOWN_COPIES: usize = 256;

/// A stored copy's file is touched again after this long, so that pruning by age never takes a
/// copy records still refer to.
const TOUCH_EVERY: Duration = Duration::from_secs(24 * 60 * 60);

/// The most of a file's end read to find its last record when the chain is opened again.
const TAIL_BYTES: u64 = 256 * 1024;

/// What the writer needs.
pub(super) struct Writer {
    pub(super) dir: PathBuf,
    pub(super) replica: String,
    pub(super) key: SigningKey,
    pub(super) max_file_size: u64,
    pub(super) retention: Duration,
}

/// A robots.txt copy already stored: its digest, its parsed groups, when its file was touched.
struct Known {
    copy: Arc<RobotsCopy>,
    sha256: String,
    parsed: crate::robots::RobotsTxt,
    touched: Instant,
}

/// This replica's chain: the file written to and the last record's link.
struct Chain {
    file: Option<File>,
    size: u64,
    /// The next record's number.
    next: u64,
    /// The hex sha256 of the last record's line.
    prev: Option<String>,
}

/// A record file's name: `<replica>-<first record's number, 12 digits>.jsonl`.
fn file_name(replica: &str, first: u64) -> String {
    format!("{replica}-{first:012}.jsonl")
}

/// This replica's record files, oldest first.
pub(super) fn replica_files(dir: &Path, replica: &str) -> Vec<PathBuf> {
    let prefix = format!("{replica}-");
    let mut files: Vec<PathBuf> = record_files(dir)
        .into_iter()
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix(&prefix))
                .is_some_and(|rest| {
                    rest.len() == 12 + ".jsonl".len()
                        && rest.as_bytes()[..12].iter().all(u8::is_ascii_digit)
                })
        })
        .collect();
    files.sort();
    files
}

/// Every record file in `dir` (every replica's), by name.
pub fn record_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "jsonl") && path.is_file())
        .collect();
    files.sort();
    files
}

impl Writer {
    /// Runs until every sender is gone.
    pub(super) fn run(self, queue: Receiver<Pending>) {
        let mut chain = self.open_chain();
        let mut known: HashMap<usize, Known> = HashMap::new();
        let mut pruned = Instant::now();
        self.prune();
        loop {
            let first = match queue.recv_timeout(Duration::from_secs(1)) {
                Ok(pending) => pending,
                Err(RecvTimeoutError::Timeout) => {
                    if pruned.elapsed() >= PRUNE_EVERY {
                        pruned = Instant::now();
                        self.prune();
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return,
            };
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match queue.try_recv() {
                    Ok(pending) => batch.push(pending),
                    Err(_) => break,
                }
            }
            let mut written = 0_u64;
            for pending in batch {
                match self.write(&mut chain, &mut known, pending) {
                    Ok(()) => written += 1,
                    Err(e) => {
                        METRICS
                            .evidence_records
                            .with_label_values(&["failed"])
                            .inc();
                        crate::logs::evidence_failed(&e);
                        // The file is opened again for the next record: a failed write may
                        // have left it anywhere.
                        chain.file = None;
                    }
                }
            }
            if let Some(file) = &chain.file {
                if let Err(e) = file.sync_data() {
                    crate::logs::evidence_failed(&format!("sync: {e}"));
                }
            }
            METRICS
                .evidence_records
                .with_label_values(&["written"])
                .inc_by(written);
        }
    }

    /// Opens the chain again where the last run left it: the last whole record of this
    /// replica's newest file (a torn last line cut off).
    fn open_chain(&self) -> Chain {
        let mut chain = Chain {
            file: None,
            size: 0,
            next: 1,
            prev: None,
        };
        if let Err(e) = std::fs::create_dir_all(self.dir.join(ROBOTS_DIR)) {
            crate::logs::evidence_failed(&format!("{}: {e}", self.dir.display()));
        }
        let Some(newest) = replica_files(&self.dir, &self.replica).pop() else {
            return chain;
        };
        match last_record(&newest) {
            Ok(Some((line, number))) => {
                chain.prev = Some(hex(&sha2::Sha256::digest(&line)));
                chain.next = number + 1;
            }
            Ok(None) => {}
            Err(e) => crate::logs::evidence_failed(&format!("{}: {e}", newest.display())),
        }
        chain
    }

    fn write(
        &self,
        chain: &mut Chain,
        known: &mut HashMap<usize, Known>,
        pending: Pending,
    ) -> Result<(), String> {
        let copy = self.stored_copy(known, &pending.robots)?;
        let mut record = pending.fields;
        if let Some(robots) = record.get_mut("robots").and_then(Value::as_object_mut) {
            robots.insert("sha256".into(), json!(copy.sha256));
        }
        let rule = pending.rule_line.map(|line| {
            let text = robots_line(&copy.copy.body, line).unwrap_or_default();
            json!({
                "line": line,
                "text": super::record::escaped(text, MAX_CLIENT_FIELD),
                "agents": group_agents(&copy.parsed, line),
            })
        });
        record.insert("rule".into(), rule.unwrap_or(Value::Null));
        record.insert(
            "id".into(),
            json!(format!("{}-{}", self.replica, chain.next)),
        );
        record.insert("prev".into(), json!(chain.prev));
        let unsigned = Value::Object(record);
        let canonical = jcs::canonical(&unsigned).map_err(|e| e.to_string())?;
        let sig = key::base64url(&self.key.sign(canonical.as_bytes()).to_bytes());
        let Value::Object(mut record) = unsigned else {
            return Err("a record is an object".into());
        };
        record.insert("sig".into(), json!(sig));
        let line = jcs::canonical(&Value::Object(record)).map_err(|e| e.to_string())?;
        let file = self.file_for(chain, line.len() as u64 + 1)?;
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        file.write_all(&bytes).map_err(|e| format!("write: {e}"))?;
        chain.size += bytes.len() as u64;
        bytes.pop();
        chain.prev = Some(hex(&sha2::Sha256::digest(&bytes)));
        chain.next += 1;
        Ok(())
    }

    /// The file the next record of `len` bytes goes to: the current one, or a new one when it
    /// would grow past `max_file_size` (the chain goes on across files).
    fn file_for<'c>(&self, chain: &'c mut Chain, len: u64) -> Result<&'c mut File, String> {
        let full = chain.size > 0 && chain.size + len > self.max_file_size;
        if full {
            if let Some(file) = chain.file.take() {
                let _ = file.sync_data();
            }
        }
        if chain.file.is_none() {
            let current = replica_files(&self.dir, &self.replica)
                .pop()
                .filter(|path| {
                    !full
                        && std::fs::metadata(path)
                            .is_ok_and(|m| m.len() + len <= self.max_file_size)
                });
            let path =
                current.unwrap_or_else(|| self.dir.join(file_name(&self.replica, chain.next)));
            if path.is_file() {
                // A write that failed may have left half a record: it is cut off before the
                // next one is appended.
                last_record(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            }
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            chain.size = file.metadata().map(|m| m.len()).unwrap_or(0);
            if let Some(parent) = path.parent() {
                // The new file's name must survive a crash too.
                if let Ok(dir) = File::open(parent) {
                    let _ = dir.sync_all();
                }
            }
            chain.file = Some(file);
        }
        chain
            .file
            .as_mut()
            .ok_or_else(|| "no record file".to_string())
    }

    /// The stored copy of `copy`: hashed and written under `robots/` the first time it is seen
    /// (with its fetch time, source and status beside it), its file touched again daily.
    fn stored_copy<'k>(
        &self,
        known: &'k mut HashMap<usize, Known>,
        copy: &Arc<RobotsCopy>,
    ) -> Result<&'k Known, String> {
        // The map holds the copy, so its address stays its own while it is a key.
        let address = Arc::as_ptr(copy) as usize;
        let fresh = known
            .get(&address)
            .is_some_and(|k| k.touched.elapsed() < TOUCH_EVERY);
        if !fresh {
            if known.len() >= KNOWN_COPIES && !known.contains_key(&address) {
                known.clear();
            }
            let sha256 = hex(&sha2::Sha256::digest(&copy.body));
            self.store_copy(&sha256, copy)?;
            let parsed = crate::robots::RobotsTxt::parse(&copy.body);
            known.insert(
                address,
                Known {
                    copy: copy.clone(),
                    sha256,
                    parsed,
                    touched: Instant::now(),
                },
            );
        }
        known
            .get(&address)
            .ok_or_else(|| "a stored copy".to_string())
    }

    fn store_copy(&self, sha256: &str, copy: &RobotsCopy) -> Result<(), String> {
        let dir = self.dir.join(ROBOTS_DIR);
        let body_path = dir.join(sha256);
        let meta_path = dir.join(format!("{sha256}.json"));
        if body_path.is_file() && meta_path.is_file() {
            let now = SystemTime::now();
            for path in [&body_path, &meta_path] {
                if let Ok(file) = File::options().append(true).open(path) {
                    let _ = file.set_modified(now);
                }
            }
            return Ok(());
        }
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let meta = json!({
            "sha256": sha256,
            "fetched_at": copy.fetched_at.map(super::record::time_ms),
            "source": super::record::escaped(copy.source.as_bytes(), MAX_CLIENT_FIELD),
            "status": copy.http_status,
            "outcome": copy.outcome.as_str(),
            "size": copy.body.len(),
        });
        write_durably(&body_path, &copy.body)?;
        write_durably(&meta_path, format!("{meta}\n").as_bytes())?;
        if let Ok(dir) = File::open(&dir) {
            let _ = dir.sync_all();
        }
        Ok(())
    }

    /// Deletes record files (every replica's) and stored copies last written more than
    /// `retention` ago; the file being written to is always younger.
    fn prune(&self) {
        let Some(cutoff) = SystemTime::now().checked_sub(self.retention) else {
            return;
        };
        let old = |path: &Path| {
            std::fs::metadata(path)
                .and_then(|m| m.modified())
                .is_ok_and(|at| at < cutoff)
        };
        let copies = std::fs::read_dir(self.dir.join(ROBOTS_DIR))
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|entry| entry.path());
        for path in record_files(&self.dir).into_iter().chain(copies) {
            if old(&path) {
                if let Err(e) = std::fs::remove_file(&path) {
                    crate::logs::evidence_failed(&format!("prune {}: {e}", path.display()));
                }
            }
        }
    }
}

/// Writes `bytes` to `path` through a synced temporary file and a rename: a reader (and a
/// crash) sees the whole file or none.
fn write_durably(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let temporary = path.with_extension("partial");
    let written = (|| {
        let mut file = File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temporary);
        format!("{}: {e}", path.display())
    })
}

/// The last whole record of a file (its line and its number), after cutting off a torn last
/// line; `None` for a file without one.
fn last_record(path: &Path) -> std::io::Result<Option<(Vec<u8>, u64)>> {
    let mut file = OpenOptions::new().read(true).write(true).open(path)?;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(start))?;
    let mut tail = Vec::new();
    (&mut file).take(TAIL_BYTES).read_to_end(&mut tail)?;
    let whole = match memchr::memrchr(b'\n', &tail) {
        Some(end) => end + 1,
        None => 0,
    };
    if whole < tail.len() {
        // A torn write: the record never finished, so it was never part of the chain.
        file.set_len(start + whole as u64)?;
        file.sync_all()?;
    }
    let lines = &tail[..whole];
    let Some(line) = lines
        .strip_suffix(b"\n")
        .map(|body| match memchr::memrchr(b'\n', body) {
            Some(before) => &body[before + 1..],
            None => body,
        })
    else {
        return Ok(None);
    };
    let number = serde_json::from_slice::<Value>(line)
        .ok()
        .and_then(|record| {
            record
                .get("id")
                .and_then(Value::as_str)
                .and_then(|id| id.rsplit('-').next())
                .and_then(|n| n.parse::<u64>().ok())
        })
        .unwrap_or(0);
    Ok(Some((line.to_vec(), number)))
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}
