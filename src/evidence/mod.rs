//! Signed compliance evidence (`evidence`): for each violation, ban, refusal or licence answer
//! the judgment applies, a JSON Lines record a third party can check, signed with Ed25519 over
//! its RFC 8785 canonical form and chained by sha256 to the record before it; the robots.txt
//! copies the records refer to, stored once each by their sha256.
//!
//! The judgment hands each applied request here ([`Evidence::offer`]; a preview records
//! nothing); the record is built from
//! what the judgment knew and queued for the writer (`writer`), a thread of its own: a request
//! never waits for the disk. [`check`] verifies records (`robotsguard evidence verify`),
//! [`export`] selects them (`GET /evidence`, `robotsguard evidence bundle`).

pub mod bundle;
pub mod check;
pub mod export;
pub mod jcs;
pub mod key;
pub mod record;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use ed25519_dalek::VerifyingKey;

pub use record::Observed;
pub use writer::{hex, record_files};

use crate::config::{Config, EvidenceConfig, EvidenceEvent};
use crate::metrics::METRICS;

/// The subdirectory of `evidence.dir` holding the robots.txt copies.
pub const ROBOTS_DIR: &str = "robots";

/// The file in `evidence.dir` holding the public key (JWK), written at start: what a bundle
/// and a verifier take.
pub const KEY_FILE: &str = "key.jwk";

/// The evidence writer of this process, once [`start`]ed.
static ACTIVE: OnceLock<Arc<Evidence>> = OnceLock::new();

/// A started evidence writer: its settings, public key and queue.
pub struct Evidence {
    config: EvidenceConfig,
    dir: PathBuf,
    replica: String,
    public: VerifyingKey,
    queue: SyncSender<record::Pending>,
}

/// The directory records go to: `evidence.dir`, else `evidence` under the state directory.
pub fn dir_of(config: &Config) -> PathBuf {
    config.evidence.dir.clone().unwrap_or_else(|| {
        crate::traps::state_dirs(config.state_dir.as_deref())
            .into_iter()
            .next()
            .unwrap_or_else(|| PathBuf::from(crate::config::DEFAULT_STATE_DIR))
            .join("evidence")
    })
}

/// This replica's name: `evidence.replica`, else the host name (made a valid name), else
/// `replica`.
fn replica_of(config: &EvidenceConfig) -> String {
    if let Some(name) = &config.replica {
        return name.clone();
    }
    // In Kubernetes the pod's name: each pod writes its own chain.
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|name| !name.is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .unwrap_or_default();
    let host = host.trim();
    let name: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(crate::config::MAX_EVIDENCE_REPLICA_NAME)
        .collect();
    if name.is_empty() {
        "replica".to_string()
    } else {
        name
    }
}

/// What keeps `config`'s evidence from being written, when it is enabled: its key file is
/// missing or not a key, or its directory cannot be made. `validate` and `serve` both refuse
/// a config with one (through [`crate::preflight::problems`]).
pub fn problems(config: &Config) -> Vec<String> {
    let evidence = &config.evidence;
    if !evidence.enabled {
        return Vec::new();
    }
    let mut problems = Vec::new();
    match &evidence.key_file {
        Some(path) => {
            if let Err(e) = key::load(path) {
                problems.push(format!("evidence: {e}"));
            }
        }
        None => problems.push("evidence: `enabled` needs `key_file`".to_string()),
    }
    let dir = dir_of(config);
    if let Ok(metadata) = std::fs::metadata(&dir) {
        if !metadata.is_dir() {
            problems.push(format!(
                "evidence: dir `{}` is not a directory",
                dir.display()
            ));
        }
    } else if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.is_dir() {
            problems.push(format!(
                "evidence: dir `{}`: its parent `{}` does not exist",
                dir.display(),
                parent.display()
            ));
        }
    }
    problems
}

/// Why the evidence writer did not start.
#[derive(Debug)]
pub enum StartError {
    /// `enabled` without `key_file`.
    NoKeyFile,
    /// The key file gives no key.
    Key(key::KeyError),
    /// The directory could not be made or written to.
    Dir(PathBuf, std::io::Error),
    /// The writer's thread could not be started.
    Thread(std::io::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoKeyFile => f.write_str("evidence: `enabled` needs `key_file`"),
            Self::Key(e) => write!(f, "evidence: {e}"),
            Self::Dir(dir, e) => write!(f, "evidence: dir `{}`: {e}", dir.display()),
            Self::Thread(e) => write!(f, "evidence: the writer's thread: {e}"),
        }
    }
}

impl std::error::Error for StartError {}

/// Starts the writer for `config` (once per process; `Ok(None)` when evidence is off): loads
/// the key, makes the directory, writes the public key beside the records and starts the
/// writer's thread.
pub fn start(config: &Config) -> Result<Option<Arc<Evidence>>, StartError> {
    let settings = &config.evidence;
    if !settings.enabled {
        return Ok(None);
    }
    if let Some(running) = ACTIVE.get() {
        return Ok(Some(running.clone()));
    }
    let path = settings.key_file.as_ref().ok_or(StartError::NoKeyFile)?;
    let signing = key::load(path).map_err(StartError::Key)?;
    let dir = dir_of(config);
    std::fs::create_dir_all(dir.join(ROBOTS_DIR)).map_err(|e| StartError::Dir(dir.clone(), e))?;
    let public = signing.verifying_key();
    let jwk = format!("{}\n", key::jwk(&public));
    std::fs::write(dir.join(KEY_FILE), jwk).map_err(|e| StartError::Dir(dir.clone(), e))?;
    let replica = replica_of(settings);
    let (queue, receiver) = sync_channel(settings.queue);
    let writer = writer::Writer {
        dir: dir.clone(),
        replica: replica.clone(),
        key: signing,
        max_file_size: settings.max_file_size,
        retention: settings.retention,
    };
    std::thread::Builder::new()
        .name("evidence".into())
        .spawn(move || writer.run(receiver))
        .map_err(StartError::Thread)?;
    let evidence = Arc::new(Evidence {
        config: settings.clone(),
        dir,
        replica,
        public,
        queue,
    });
    Ok(Some(ACTIVE.get_or_init(|| evidence).clone()))
}

/// The started writer, if any.
pub fn active() -> Option<&'static Arc<Evidence>> {
    ACTIVE.get()
}

/// Which events an applied judgment is.
#[derive(Debug, Clone, Copy, Default)]
pub struct Events {
    /// A robots.txt rule disallowed it.
    pub violation: bool,
    /// It earned a ban.
    pub ban: bool,
    /// robotsguard refused it.
    pub refusal: bool,
    /// It got the licence answer.
    pub payment_required: bool,
}

impl Evidence {
    /// Whether a request that is `events` gets a record.
    pub fn wants(&self, events: Events) -> bool {
        (events.violation && self.config.records(EvidenceEvent::Violation))
            || (events.ban && self.config.records(EvidenceEvent::Ban))
            || (events.refusal && self.config.records(EvidenceEvent::Refusal))
            || (events.payment_required && self.config.records(EvidenceEvent::PaymentRequired))
    }

    /// Queues the record of `observed`; when the queue is full it is dropped and counted, never
    /// waited for.
    pub fn offer(&self, observed: &Observed<'_>) {
        let pending = record::pending(observed, &self.replica, SystemTime::now());
        match self.queue.try_send(pending) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                METRICS
                    .evidence_records
                    .with_label_values(&["dropped"])
                    .inc();
                crate::logs::evidence_dropped(self.config.queue);
            }
            Err(TrySendError::Disconnected(_)) => {
                METRICS
                    .evidence_records
                    .with_label_values(&["failed"])
                    .inc();
                crate::logs::evidence_failed("the writer stopped");
            }
        }
    }

    /// The public key, as `GET /evidence/key` serves it.
    pub fn jwk(&self) -> serde_json::Value {
        key::jwk(&self.public)
    }

    /// Where the records are.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// This replica's name.
    pub fn replica(&self) -> &str {
        &self.replica
    }
}

/// Whether `name` is a stored copy's name (64 lower-case hex digits): nothing else is read
/// from the copies' directory.
pub fn is_sha256_name(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
