//! A bundle for a third party (`robotsguard evidence bundle`): a gzipped tar of the records
//! selected, the robots.txt copies they refer to, the public key and a README that says how to
//! check them. The tar is plain POSIX ustar, written here: a handful of regular files with short
//! names needs no more.

use std::io::Write;
use std::path::Path;
use std::time::SystemTime;

use super::export::{robots_copy, robots_meta, select, Filter};
use super::KEY_FILE;

/// The most bytes of records a bundle holds.
const MAX_RECORDS: usize = 1024 * 1024 * 1024;

/// The README a bundle carries.
pub const README: &str = "# robotsguard evidence bundle

- `evidence.jsonl`: the records, one JSON object a line, as robotsguard wrote them.
- `key.jwk`: the Ed25519 public key they are signed with (a JWK, RFC 8037); compare it with the
  one the publisher gives you by other means (`GET /evidence/key` on its admin endpoint).
- `robots/<sha256>`: each robots.txt copy a record refers to, as fetched, named by its SHA-256;
  `robots/<sha256>.json` says when it was fetched, from where and with what status.

## Checking it

    robotsguard evidence verify evidence.jsonl --key key.jwk --robots-dir robots

checks, for every record: its signature (`sig`: Ed25519, base64url, over the record without
`sig` as RFC 8785 canonical JSON); its link (`prev`: the hex SHA-256 of the line before it in its
replica's chain, null for a chain's first record; a bundle selected by crawler or time leaves
records out, counted as gaps); that its rule (`rule.line`, `rule.text`) is that line of the
stored copy, whose SHA-256 must be its name; and that the robots.txt engine, run again on that
copy, gives the same line and verdict for the recorded crawler and path. It prints a summary and
exits non-zero naming the first record that does not check out.

Without robotsguard: canonicalise each record less `sig` (RFC 8785), verify the signature with
any Ed25519 library, and hash each line (without its newline) with SHA-256 for the chain.

## What a record shows, and what it does not

A record shows that the holder of this key recorded, at `time`, that a request from `client`
with this User-Agent asked for `path` on `host`, what the robots.txt copy in force (by hash) said
about it, and what robotsguard did. It does not show who operated the client: `verification`
says whether its identity was checked and how (`unverified` is not `impostor`). The key's owner
could have signed anything; the chain shows records were not removed or reordered afterwards,
not that they were true when written.
";

/// Writes the bundle of the records `filter` selects from `dir` to `out`; returns how many
/// records and copies it holds.
pub fn write(dir: &Path, filter: &Filter, out: impl Write) -> Result<(usize, usize), String> {
    let mut records = Vec::new();
    let selected = select(dir, filter, MAX_RECORDS, &mut records);
    if selected.truncated {
        return Err(format!(
            "more than {} MiB of records match: narrow the selection with --since",
            MAX_RECORDS / 1024 / 1024
        ));
    }
    let key = std::fs::read(dir.join(KEY_FILE)).map_err(|e| {
        format!(
            "{}: {e} (written by `serve` with evidence enabled)",
            dir.join(KEY_FILE).display()
        )
    })?;
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let gzip = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    let mut tar = Tar {
        out: gzip,
        mtime: now,
    };
    tar.file("evidence.jsonl", &records)?;
    tar.file(KEY_FILE, &key)?;
    tar.file("README.md", README.as_bytes())?;
    let mut copies = 0;
    for sha in &selected.copies {
        let body = robots_copy(dir, sha)
            .ok_or_else(|| format!("robots.txt copy {sha} is missing from {}", dir.display()))?;
        tar.file(&format!("robots/{sha}"), &body)?;
        if let Some(meta) = robots_meta(dir, sha) {
            tar.file(&format!("robots/{sha}.json"), &meta)?;
        }
        copies += 1;
    }
    tar.finish()?;
    Ok((selected.records, copies))
}

struct Tar<W: Write> {
    out: flate2::write::GzEncoder<W>,
    mtime: u64,
}

impl<W: Write> Tar<W> {
    /// One regular file: a 512-byte ustar header, the bytes, padding to 512.
    fn file(&mut self, name: &str, bytes: &[u8]) -> Result<(), String> {
        if name.len() > 100 {
            return Err(format!("`{name}`: a name over 100 bytes"));
        }
        let mut header = [0_u8; 512];
        header[..name.len()].copy_from_slice(name.as_bytes());
        octal(&mut header[100..108], 0o644);
        octal(&mut header[108..116], 0);
        octal(&mut header[116..124], 0);
        octal(&mut header[124..136], bytes.len() as u64);
        octal(&mut header[136..148], self.mtime);
        header[156] = b'0';
        header[257..263].copy_from_slice(b"ustar\0");
        header[263..265].copy_from_slice(b"00");
        // The checksum is summed with its own field as spaces.
        header[148..156].copy_from_slice(b"        ");
        let sum: u64 = header.iter().map(|&b| u64::from(b)).sum();
        let digits = format!("{sum:06o}\0 ");
        header[148..156].copy_from_slice(digits.as_bytes());
        let padding = (512 - bytes.len() % 512) % 512;
        self.out
            .write_all(&header)
            .and_then(|()| self.out.write_all(bytes))
            .and_then(|()| self.out.write_all(&vec![0; padding]))
            .map_err(|e| e.to_string())
    }

    /// Two zero blocks end the archive.
    fn finish(mut self) -> Result<(), String> {
        self.out
            .write_all(&[0; 1024])
            .and_then(|()| self.out.finish().and_then(|mut inner| inner.flush()))
            .map_err(|e| e.to_string())
    }
}

/// `value` in octal, zero-padded to the field less its NUL.
fn octal(field: &mut [u8], value: u64) {
    let text = format!("{value:0width$o}\0", width = field.len() - 1);
    let bytes = text.as_bytes();
    let start = bytes.len().saturating_sub(field.len());
    field.copy_from_slice(&bytes[start..]);
}
