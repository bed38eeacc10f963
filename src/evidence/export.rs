//! Selecting records: by origin, crawler and time, from every record file of a directory (every
//! replica's, oldest file first), for `GET /evidence` and `robotsguard evidence bundle`. Lines
//! are copied as written: a selection verifies as the files do. Where the filter leaves records
//! of a chain out between two it selects, a line `{"left_out":{"replica":R,"after":N,"before":M}}`
//! declares them, so that verify tells a selection's gaps (counted) from records deleted since
//! (failed).

use std::io::{BufRead as _, BufReader, Read as _};
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::{is_sha256_name, record_files, ROBOTS_DIR};

/// The longest line read back (records are far shorter): a longer one is not a record.
const MAX_LINE: u64 = 1024 * 1024;

/// The largest robots.txt copy read back (the engine reads at most 500 KiB of a file).
pub const MAX_COPY: u64 = 4 * 1024 * 1024;

/// Which records to select; `None` fields select all.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// The origin's name.
    pub origin: Option<String>,
    /// The crawler's name (case-insensitive).
    pub crawler: Option<String>,
    /// Records at or after this time.
    pub since: Option<SystemTime>,
    /// Records before this time.
    pub until: Option<SystemTime>,
}

/// A time as a filter takes it: RFC 3339 (`2026-05-01T12:00:00Z`, fractions allowed), or a
/// duration before now (`24h`, `7d`).
pub fn parse_time(text: &str) -> Result<SystemTime, String> {
    if let Ok(at) = humantime::parse_rfc3339_weak(text) {
        return Ok(at);
    }
    let ago: Duration = crate::config::parse_duration(text)
        .map_err(|_| format!("`{text}` is neither an RFC 3339 time nor a duration like 24h"))?;
    SystemTime::now()
        .checked_sub(ago)
        .ok_or_else(|| format!("`{text}` reaches before the epoch"))
}

impl Filter {
    /// Whether `record` is selected.
    pub fn matches(&self, record: &Value) -> bool {
        let field = |name: &str| record.get(name).and_then(Value::as_str);
        if let Some(origin) = &self.origin {
            if field("origin") != Some(origin.as_str()) {
                return false;
            }
        }
        if let Some(crawler) = &self.crawler {
            if !field("crawler").is_some_and(|c| c.eq_ignore_ascii_case(crawler)) {
                return false;
            }
        }
        if self.since.is_some() || self.until.is_some() {
            let Some(at) = field("time").and_then(|t| humantime::parse_rfc3339_weak(t).ok()) else {
                return false;
            };
            if self.since.is_some_and(|since| at < since) || self.until.is_some_and(|u| at >= u) {
                return false;
            }
        }
        true
    }
}

/// What a selection wrote.
#[derive(Debug, Clone, Default)]
pub struct Selected {
    /// Records written.
    pub records: usize,
    /// It stopped at `max_bytes`: more records matched.
    pub truncated: bool,
    /// The sha256 of every robots.txt copy the records refer to, once each.
    pub copies: Vec<String>,
}

/// A record's chain and its number in it (`edge-1-42`: 42).
fn chain_place(record: &Value) -> Option<(String, u64)> {
    let replica = record.get("replica").and_then(Value::as_str)?;
    let number = record
        .get("id")
        .and_then(Value::as_str)?
        .rsplit('-')
        .next()?
        .parse()
        .ok()?;
    Some((replica.to_string(), number))
}

/// Per chain, while selecting: the number of the last record selected, and the run of records
/// left out since (first number, count).
#[derive(Default)]
struct ChainSelection {
    last_selected: Option<u64>,
    left_out: Option<(u64, u64)>,
}

/// The line declaring that the filter left out the records of `replica` between `after` and
/// `before`.
pub fn left_out_line(replica: &str, after: u64, before: u64) -> String {
    let mut line =
        serde_json::json!({"left_out": {"replica": replica, "after": after, "before": before}})
            .to_string();
    line.push('\n');
    line
}

/// Appends to `out` every record in `dir`'s files that `filter` selects, as [`select_each`]
/// gives them, up to `max_bytes` (a record that would pass it is not written, and `truncated`
/// says so).
pub fn select(dir: &Path, filter: &Filter, max_bytes: usize, out: &mut Vec<u8>) -> Selected {
    let mut selected = select_each(dir, filter, |piece| {
        if out.len() + piece.len() > max_bytes {
            return false;
        }
        out.extend_from_slice(piece);
        true
    });
    // `select_each` counts the record it offered, kept or not.
    if selected.truncated {
        selected.records = selected.records.saturating_sub(1);
    }
    selected
}

/// Gives `emit` every record in `dir`'s files that `filter` selects, as written (one line
/// each, oldest file first), reading the files as it goes: what it holds at once is one line
/// and, per replica, where its chain stands. Before a selected record whose chain's previous
/// records the filter left out, the line declaring them ([`left_out_line`]) comes in the same
/// piece. It stops when `emit` returns false (`truncated`).
pub fn select_each(dir: &Path, filter: &Filter, mut emit: impl FnMut(&[u8]) -> bool) -> Selected {
    let mut selected = Selected::default();
    // Bounded by the replicas whose files are in `dir`.
    let mut chains: std::collections::HashMap<String, ChainSelection> =
        std::collections::HashMap::new();
    let mut line = Vec::new();
    let mut piece = Vec::new();
    for path in record_files(dir) {
        let Ok(file) = std::fs::File::open(&path) else {
            continue;
        };
        let mut reader = BufReader::new(file);
        loop {
            line.clear();
            match (&mut reader).take(MAX_LINE).read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if line.last() != Some(&b'\n') {
                // A torn or overlong line is no record; skip to the next line end.
                if line.len() as u64 >= MAX_LINE {
                    skip_line(&mut reader, &mut line);
                }
                continue;
            }
            let Ok(record) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            let place = chain_place(&record);
            if !filter.matches(&record) {
                if let Some((replica, number)) = place {
                    let chain = chains.entry(replica).or_default();
                    chain.left_out = Some(match chain.left_out {
                        Some((first, count)) => (first, count + 1),
                        None => (number, 1),
                    });
                }
                continue;
            }
            piece.clear();
            if let Some((replica, number)) = &place {
                let chain = chains.entry(replica.clone()).or_default();
                // Declared only when the records left out are exactly the missing numbers: a
                // record missing from the files themselves stays an undeclared gap.
                if let (Some(last), Some((first, count))) = (chain.last_selected, chain.left_out) {
                    if first == last + 1 && last + 1 + count == *number {
                        piece.extend_from_slice(left_out_line(replica, last, *number).as_bytes());
                    }
                }
                chain.last_selected = Some(*number);
                chain.left_out = None;
            }
            piece.extend_from_slice(&line);
            selected.records += 1;
            if !emit(&piece) {
                selected.truncated = true;
                return selected;
            }
            if let Some(sha) = record
                .get("robots")
                .and_then(|r| r.get("sha256"))
                .and_then(Value::as_str)
            {
                if !selected.copies.iter().any(|known| known == sha) {
                    selected.copies.push(sha.to_string());
                }
            }
        }
    }
    selected
}

/// Reads past the end of the line being read, a bounded piece at a time (`scratch` holds one).
fn skip_line(reader: &mut impl std::io::BufRead, scratch: &mut Vec<u8>) {
    loop {
        scratch.clear();
        match (&mut *reader).take(MAX_LINE).read_until(b'\n', scratch) {
            Ok(0) | Err(_) => return,
            Ok(_) if scratch.last() == Some(&b'\n') => return,
            Ok(_) => {}
        }
    }
}

/// A stored robots.txt copy's bytes, by its sha256 (`None`: not a sha256 name, or not stored).
pub fn robots_copy(dir: &Path, sha256: &str) -> Option<Vec<u8>> {
    if !is_sha256_name(sha256) {
        return None;
    }
    read_bounded(&dir.join(ROBOTS_DIR).join(sha256), MAX_COPY)
}

/// A stored copy's description (`<sha256>.json`: fetch time, source, status).
pub fn robots_meta(dir: &Path, sha256: &str) -> Option<Vec<u8>> {
    if !is_sha256_name(sha256) {
        return None;
    }
    read_bounded(
        &dir.join(ROBOTS_DIR).join(format!("{sha256}.json")),
        64 * 1024,
    )
}

fn read_bounded(path: &Path, max: u64) -> Option<Vec<u8>> {
    let file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= max).then_some(bytes)
}
