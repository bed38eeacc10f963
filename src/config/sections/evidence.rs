//! `evidence`: signed compliance records of violations, bans, refusals and licence answers.

use super::*;

pub(crate) static EVIDENCE: Section = Section {
    id: "evidence",
    place: "in `evidence`",
    title: "Evidence",
    doc: "Signed, hash-chained JSON Lines records of the requests robotsguard judged (violations, bans, refusals, licence answers), with the robots.txt copies they refer to, for a third party to check (`robotsguard evidence verify`). Off unless `enabled: true`.",
    keys: &[
        key("enabled", Ty::Bool, "`false`", "Write evidence records."),
        key("key_file", Ty::Path, "none (required when enabled)", "The Ed25519 signing key: a PKCS#8 PEM file (`openssl genpkey -algorithm ed25519`), or the raw 32-byte seed in base64. Its public key is served at `GET /evidence/key`."),
        key("dir", Ty::Path, "`evidence` under `state.dir`", "Where the record files (`<replica>-<first record's number>.jsonl`) and the robots.txt copies (`robots/<sha256>` with `robots/<sha256>.json`) are written; created when missing."),
        key("retention", Ty::Duration, "`90d`", "How long a record file (and a robots.txt copy no record written since refers to) is kept after its last write."),
        key("events", Ty::List(&Ty::Words(|| names(&EVIDENCE_EVENTS))), "`[violation, ban, refusal, payment_required]`", "Which requests get a record: a robots.txt rule disallowed it (`violation`, enforced or reported), it earned a ban (`ban`), robotsguard refused it itself (`refusal`: 403, 404, 429, 503 of a known origin), or it was answered with the licence terms (`payment_required`). A request gets one record, whatever it is."),
        key("max_file_size", Ty::Size, "`64MiB`", "A record file is closed and a new one started (the chain goes on) once it would grow past this."),
        key("queue", Ty::Int { min: 16, max: 1_000_000 }, "`10000`", "Records waiting to be written at most: a request never waits for the disk; beyond this, records are dropped and counted (`robotsguard_evidence_records_total{result=\"dropped\"}`)."),
        key("replica", Ty::Str, "the host name", "This process's name in its records and files: each replica writes its own chain. Letters, digits, `.`, `_` and `-`, at most 64."),
    ],
};

/// Which requests get an evidence record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EvidenceEvent {
    /// A robots.txt rule disallowed the request (enforced or reported).
    Violation,
    /// The request earned its client a ban.
    Ban,
    /// robotsguard refused the request itself.
    Refusal,
    /// The request was answered with the licence terms (402).
    PaymentRequired,
}

pub(crate) const EVIDENCE_EVENTS: [(&str, EvidenceEvent); 4] = [
    ("violation", EvidenceEvent::Violation),
    ("ban", EvidenceEvent::Ban),
    ("refusal", EvidenceEvent::Refusal),
    ("payment_required", EvidenceEvent::PaymentRequired),
];

/// `evidence`: signed compliance records.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EvidenceConfig {
    /// Whether records are written.
    pub enabled: bool,
    /// The signing key's file (absolute); required when enabled.
    pub key_file: Option<PathBuf>,
    /// Where records go (absolute); `None`: `evidence` under the state directory.
    pub dir: Option<PathBuf>,
    /// How long a file is kept after its last write.
    pub retention: Duration,
    /// The events that get a record.
    pub events: Vec<EvidenceEvent>,
    /// A file's size at most before the next one is started.
    pub max_file_size: u64,
    /// Records waiting to be written at most.
    pub queue: usize,
    /// This replica's name; `None`: the host name.
    pub replica: Option<String>,
}

/// `evidence.retention`.
pub(crate) const DEFAULT_EVIDENCE_RETENTION: Duration = Duration::from_secs(90 * 24 * 60 * 60);
/// `evidence.max_file_size`.
pub(crate) const DEFAULT_EVIDENCE_FILE_SIZE: u64 = 64 * 1024 * 1024;
/// `evidence.queue`.
pub(crate) const DEFAULT_EVIDENCE_QUEUE: usize = 10_000;
/// The smallest `max_file_size`: a record with a long User-Agent and path must fit.
const MIN_EVIDENCE_FILE_SIZE: u64 = 64 * 1024;
/// The longest replica name.
pub(crate) const MAX_REPLICA_NAME: usize = 64;

impl Default for EvidenceConfig {
    fn default() -> Self {
        EvidenceConfig {
            enabled: false,
            key_file: None,
            dir: None,
            retention: DEFAULT_EVIDENCE_RETENTION,
            events: EVIDENCE_EVENTS.iter().map(|(_, e)| *e).collect(),
            max_file_size: DEFAULT_EVIDENCE_FILE_SIZE,
            queue: DEFAULT_EVIDENCE_QUEUE,
            replica: None,
        }
    }
}

impl EvidenceConfig {
    /// Whether `event` gets a record.
    pub fn records(&self, event: EvidenceEvent) -> bool {
        self.enabled && self.events.contains(&event)
    }
}

/// Whether `name` may name a replica (it names files too).
pub(crate) fn valid_replica_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_REPLICA_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// `evidence`: signed compliance records.
pub(crate) fn evidence(sink: &mut Sink, node: &Node, base_dir: &Path) -> EvidenceConfig {
    let mut evidence = EvidenceConfig::default();
    let Some(table) = Table::read(sink, node, &EVIDENCE, "`evidence`") else {
        return evidence;
    };
    if let Some(enabled) = table
        .get("enabled")
        .and_then(|n| reader::boolean(sink, n, "enabled"))
    {
        evidence.enabled = enabled;
    }
    evidence.key_file = table
        .get("key_file")
        .and_then(|n| reader::nonempty_string(sink, n, "key_file"))
        .map(|path| base_dir.join(path));
    evidence.dir = table
        .get("dir")
        .and_then(|n| reader::nonempty_string(sink, n, "dir"))
        .map(|path| base_dir.join(path));
    if let Some(retention) = table
        .get("retention")
        .and_then(|n| positive_duration(sink, n, "retention"))
    {
        evidence.retention = retention;
    }
    if let Some(n) = table.get("events") {
        if let Some(items) = reader::list(sink, n, "events") {
            let mut events = Vec::new();
            for item in items {
                if let Some(event) = reader::choice(sink, item, "events", &EVIDENCE_EVENTS) {
                    if !events.contains(&event) {
                        events.push(event);
                    }
                }
            }
            evidence.events = events;
        }
    }
    if let Some(n) = table.get("max_file_size") {
        match reader::size(sink, n, "max_file_size") {
            Some(size) if size < MIN_EVIDENCE_FILE_SIZE => {
                sink.error(n.pos, "`evidence.max_file_size` must be at least 64KiB");
            }
            Some(size) => evidence.max_file_size = size,
            None => {}
        }
    }
    if let Some(queue) = table
        .get("queue")
        .and_then(|n| reader::integer(sink, n, "queue", 16, 1_000_000))
        .and_then(|n| usize::try_from(n).ok())
    {
        evidence.queue = queue;
    }
    if let Some(n) = table.get("replica") {
        if let Some(name) = reader::nonempty_string(sink, n, "replica") {
            if valid_replica_name(name) {
                evidence.replica = Some(name.to_string());
            } else {
                sink.error_hint(
                    n.pos,
                    format!("`evidence.replica` {} is not a replica name", quote(name)),
                    "letters, digits, `.`, `_` and `-`, at most 64 (it names the record files)",
                );
            }
        }
    }
    if evidence.enabled && evidence.key_file.is_none() {
        sink.error_hint(
            node.pos,
            "`evidence.enabled` needs `evidence.key_file`: the records are signed",
            "key_file: evidence.pem (openssl genpkey -algorithm ed25519 -out evidence.pem)",
        );
    }
    evidence
}
