//! Verifying records (`robotsguard evidence verify`): each signature; the hash chain of each
//! replica, with the links a selection left out counted as gaps; each rule line against the
//! stored robots.txt copy (whose sha256 must be its name); and the engine, re-run on that copy,
//! giving the recorded verdict for the recorded crawler and path.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::PathBuf;

use ed25519_dalek::{Signature, Verifier as _, VerifyingKey};
use serde_json::Value;
use sha2::Digest as _;

use super::record::{escaped, robots_line, MAX_CLIENT_FIELD};
use super::{hex, jcs};
use crate::robots::{GlobalFallback, MatchMode, Robots, RobotsTxt};

/// How to verify.
#[derive(Debug, Clone)]
pub struct Options {
    /// The public key the records must be signed with.
    pub key: VerifyingKey,
    /// Where the robots.txt copies are (`<sha256>` files); `None`: the rules are not checked.
    pub robots_dir: Option<PathBuf>,
    /// Fail on a gap in a chain (a selection's left-out records) too.
    pub complete: bool,
}

/// What verifying found.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Records read.
    pub records: usize,
    /// Valid signatures.
    pub signatures: usize,
    /// Links checked: a record's `prev` is the hash of the record before it in its chain.
    pub links: usize,
    /// Links that could not be checked: records of a chain missing between two that are
    /// there (a selection by origin, crawler or time leaves them out; so does a deletion).
    pub gaps: usize,
    /// Chains whose first record here is not their first record (its `prev` is not null).
    pub opened_midway: usize,
    /// Rule lines found as recorded in their stored copy.
    pub rules: usize,
    /// Verdicts the engine gave again on the stored copy.
    pub verdicts: usize,
    /// Each mismatch, naming the record (`line N, record ID: ...`).
    pub failures: Vec<String>,
    /// Each gap, naming the record after it.
    pub gap_notes: Vec<String>,
}

impl Summary {
    /// Whether everything checked out (gaps count only with `--complete`).
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// The last record seen of a chain: its number and its line's hash.
struct Link {
    number: u64,
    hash: String,
}

/// Verifies the JSON Lines `input`.
pub fn verify(input: impl BufRead, options: &Options) -> Summary {
    let mut summary = Summary::default();
    let mut chains: HashMap<String, Link> = HashMap::new();
    // The gaps an export declared it left out, by chain: (after, before).
    let mut declared: HashMap<String, (u64, u64)> = HashMap::new();
    let mut copies: HashMap<String, Result<(Vec<u8>, Robots), String>> = HashMap::new();
    for (index, line) in input.split(b'\n').enumerate() {
        let number = index + 1;
        let line = match line {
            Ok(line) => line,
            Err(e) => {
                summary
                    .failures
                    .push(format!("line {number}: unreadable: {e}"));
                break;
            }
        };
        if line.is_empty() {
            continue;
        }
        if let Some((replica, after, before)) = left_out(&line) {
            declared.insert(replica, (after, before));
            continue;
        }
        summary.records += 1;
        let Ok(Value::Object(mut record)) = serde_json::from_slice::<Value>(&line) else {
            summary
                .failures
                .push(format!("line {number}: not a JSON record"));
            continue;
        };
        let id = record
            .get("id")
            .and_then(Value::as_str)
            .map_or_else(|| "(no id)".to_string(), |id| escaped(id.as_bytes(), 128));
        let name = format!("line {number}, record {id}");
        let mut fail = |why: String| summary.failures.push(format!("{name}: {why}"));
        // The signature, over the record without `sig` in canonical form.
        let sig = record.remove("sig");
        let record = Value::Object(record);
        match signature_of(sig.as_ref()) {
            Err(why) => fail(why),
            Ok(sig) => match jcs::canonical(&record) {
                Err(e) => fail(format!("not canonical JSON: {e}")),
                Ok(canonical) => {
                    if options.key.verify(canonical.as_bytes(), &sig).is_ok() {
                        summary.signatures += 1;
                    } else {
                        fail("the signature does not verify: the record was changed, or signed with another key".into());
                    }
                }
            },
        }
        // The chain.
        let replica = record
            .get("replica")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let sequence = id.rsplit('-').next().and_then(|n| n.parse::<u64>().ok());
        let prev = record.get("prev").and_then(Value::as_str);
        let hash = hex(&sha2::Sha256::digest(&line));
        match (chains.get(&replica), sequence) {
            (_, None) => fail("its id has no record number".into()),
            (None, Some(_)) => {
                if prev.is_some() {
                    summary.opened_midway += 1;
                }
            }
            (Some(last), Some(sequence)) => {
                if sequence <= last.number {
                    fail(format!(
                        "out of order: record number {sequence} after {}",
                        last.number
                    ));
                } else if prev == Some(last.hash.as_str()) && sequence == last.number + 1 {
                    summary.links += 1;
                } else if sequence == last.number + 1 {
                    fail("`prev` is not the hash of the record before it: the record before was changed".into());
                } else if declared.get(&replica) == Some(&(last.number, sequence)) {
                    summary.gaps += 1;
                    let note = format!(
                        "{name}: {} record(s) of chain `{replica}` left out by the selection before it",
                        sequence - last.number - 1
                    );
                    if options.complete {
                        fail(format!(
                            "{} record(s) of its chain missing before it (--complete)",
                            sequence - last.number - 1
                        ));
                    }
                    summary.gap_notes.push(note);
                } else {
                    fail(format!(
                        "{} record(s) of its chain missing before it, and no selection declared them left out: deleted",
                        sequence - last.number - 1
                    ));
                }
            }
        }
        if let Some(sequence) = sequence {
            chains.insert(
                replica,
                Link {
                    number: sequence,
                    hash,
                },
            );
        }
        // The rule and the verdict, against the stored copy.
        if let Some(dir) = &options.robots_dir {
            if let Err(why) = check_rule(&record, dir, &mut copies, &mut summary) {
                summary.failures.push(format!("{name}: {why}"));
            }
        }
    }
    summary
}

/// A line an export wrote to declare the records its filter left out: (replica, after, before).
fn left_out(line: &[u8]) -> Option<(String, u64, u64)> {
    if !line.starts_with(b"{\"left_out\"") {
        return None;
    }
    let value: Value = serde_json::from_slice(line).ok()?;
    let gap = value.get("left_out")?;
    Some((
        gap.get("replica")?.as_str()?.to_string(),
        gap.get("after")?.as_u64()?,
        gap.get("before")?.as_u64()?,
    ))
}

fn signature_of(sig: Option<&Value>) -> Result<Signature, String> {
    use base64::Engine as _;
    let text = sig
        .and_then(Value::as_str)
        .ok_or("no `sig`: the record is not signed")?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .map_err(|_| "`sig` is not base64url")?;
    let bytes: [u8; 64] = bytes
        .try_into()
        .map_err(|_| "`sig` is not 64 bytes".to_string())?;
    Ok(Signature::from_bytes(&bytes))
}

/// The rule line and the verdict of `record` against its stored copy.
fn check_rule(
    record: &Value,
    dir: &std::path::Path,
    copies: &mut HashMap<String, Result<(Vec<u8>, Robots), String>>,
    summary: &mut Summary,
) -> Result<(), String> {
    let sha = record
        .pointer("/robots/sha256")
        .and_then(Value::as_str)
        .ok_or("no `robots.sha256`")?;
    let stored = copies.entry(sha.to_string()).or_insert_with(|| {
        let bytes = std::fs::read(dir.join(sha))
            .map_err(|e| format!("its robots.txt copy {sha} is not in {}: {e}", dir.display()))?;
        if hex(&sha2::Sha256::digest(&bytes)) != sha {
            return Err(format!(
                "the stored robots.txt copy {sha} does not hash to its name: it was changed"
            ));
        }
        let robots = Robots::compile(&RobotsTxt::parse(&bytes), MatchMode::Canonical);
        Ok((bytes, robots))
    });
    let (body, robots) = stored.as_ref().map_err(Clone::clone)?;
    let Some(rule) = record.get("rule").filter(|r| !r.is_null()) else {
        return Ok(());
    };
    let line = rule
        .get("line")
        .and_then(Value::as_u64)
        .and_then(|l| u32::try_from(l).ok())
        .ok_or("`rule.line` is not a line number")?;
    let text = rule.get("text").and_then(Value::as_str).unwrap_or_default();
    let stored_line = robots_line(body, line)
        .ok_or_else(|| format!("its robots.txt copy {sha} has no line {line}"))?;
    if escaped(stored_line, MAX_CLIENT_FIELD) != text {
        return Err(format!(
            "rule line {line} of robots.txt copy {sha} is `{}`, not the recorded `{}`",
            escaped(stored_line, 200),
            escaped(text.as_bytes(), 200)
        ));
    }
    summary.rules += 1;
    let disallows = stored_line
        .trim_ascii_start()
        .get(..8)
        .is_some_and(|key| key.eq_ignore_ascii_case(b"disallow"));
    let path = record
        .get("path")
        .and_then(Value::as_str)
        .ok_or("no `path`")?;
    let crawler = record.get("crawler").and_then(Value::as_str);
    let agents: Vec<String> = rule
        .get("agents")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let same = token_sets(crawler, &agents).iter().any(|tokens| {
        let tokens: Vec<&str> = tokens.iter().map(String::as_str).collect();
        [
            crate::robots::canonicalize(path.as_bytes()),
            crate::robots::canonical::canonicalize_decoding_slashes(path.as_bytes()),
        ]
        .iter()
        .any(|reading| {
            let verdict = robots.verdict_with(&tokens, reading, GlobalFallback::Use);
            verdict.line() == Some(line) && verdict.allowed != disallows
        })
    });
    if !same {
        return Err(format!(
            "the engine, run on robots.txt copy {sha}, does not give line {line} ({}) for crawler {} on `{}`",
            if disallows { "disallowed" } else { "allowed" },
            crawler.unwrap_or("(none)"),
            escaped(path.as_bytes(), 200)
        ));
    }
    summary.verdicts += 1;
    Ok(())
}

/// The product tokens the recorded crawler may have been matched with: the built-in
/// catalogue's for its name, its name itself, and the named agents of the deciding group (a
/// crawler of an operator's own catalogue); none for a request without a crawler (the `*` group).
fn token_sets(crawler: Option<&str>, agents: &[String]) -> Vec<Vec<String>> {
    let Some(name) = crawler else {
        return vec![Vec::new()];
    };
    let mut sets = Vec::new();
    if let Ok(defs) = crate::crawlers::builtin_defs() {
        if let Some(def) = defs.iter().find(|d| d.name.eq_ignore_ascii_case(name)) {
            sets.push(def.tokens.clone());
        }
    }
    sets.push(vec![name.to_ascii_lowercase()]);
    let named: Vec<String> = agents
        .iter()
        .filter(|a| a.trim() != "*")
        .map(|a| a.to_ascii_lowercase())
        .collect();
    if !named.is_empty() {
        sets.push(named);
    }
    sets.push(Vec::new());
    sets
}
