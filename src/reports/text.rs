//! Reports as text: CSV with a header row, RFC 3339 times, and the unified diff between two
//! robots.txt copies.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `2026-11-26T20:15:00Z` for Unix seconds.
pub fn rfc3339(unix_seconds: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(unix_seconds)).to_string()
}

/// Unix seconds of an RFC 3339 time (`2026-11-26T20:15:00Z`, fractions and offsets of `Z`
/// only, as humantime reads them).
pub fn parse_rfc3339(text: &str) -> Option<u64> {
    humantime::parse_rfc3339_weak(text)
        .ok()
        .and_then(|at| at.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs())
}

/// Unix seconds of a wall-clock time.
pub fn unix_seconds(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// CSV text: `header`, then each row. Paths and names come from clients, so no cell may start a
/// formula in a spreadsheet: a `'` goes before a `=`, `+`, `-`, `@`, tab or CR that starts the
/// cell or follows a character a spreadsheet may split cells at (`,` `;` tab, `|`, a space or a
/// line break), spaces between them included, since the separator it is opened with may not be
/// this file's comma.
pub fn csv(header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> Vec<u8> {
    let mut writer = ::csv::Writer::from_writer(Vec::new());
    // Writing to memory cannot fail but for a row of the wrong length, which the callers
    // build from the same fields as the header.
    let _ = writer.write_record(header);
    for row in rows {
        let cells: Vec<String> = row.into_iter().map(defused).collect();
        let _ = writer.write_record(&cells);
    }
    writer.into_inner().unwrap_or_default()
}

fn defused(cell: String) -> String {
    let splits = |c: char| matches!(c, ',' | ';' | '\t' | '|' | ' ' | '\r' | '\n');
    let starts_formula = |c: char| matches!(c, '=' | '+' | '-' | '@' | '\t' | '\r');
    // Most cells (numbers, times, names) hold nothing to defuse: no copy for them.
    let mut at_start = true;
    let needs = cell.chars().any(|c| {
        let hit = at_start && starts_formula(c);
        at_start = splits(c);
        hit
    });
    if !needs {
        return cell;
    }
    let mut out = String::with_capacity(cell.len() + 8);
    let mut at_start = true;
    for c in cell.chars() {
        if at_start && starts_formula(c) {
            out.push('\'');
        }
        at_start = splits(c);
        out.push(c);
    }
    out
}

/// The longest a diff may take to compute: robots.txt files can be half a megabyte.
const DIFF_DEADLINE: Duration = Duration::from_millis(200);
/// Bytes of diff text kept.
const MAX_DIFF_BYTES: usize = 64 * 1024;

/// A unified diff of robots.txt `old` to `new` (lossy UTF-8), at most 64 KiB of text.
pub fn robots_diff(old: &[u8], new: &[u8], old_name: &str, new_name: &str) -> String {
    let old = String::from_utf8_lossy(old);
    let new = String::from_utf8_lossy(new);
    let diff = similar::TextDiff::configure()
        .deadline(std::time::Instant::now() + DIFF_DEADLINE)
        .diff_lines(old.as_ref(), new.as_ref());
    let mut text = diff
        .unified_diff()
        .context_radius(3)
        .header(old_name, new_name)
        .to_string();
    if text.len() > MAX_DIFF_BYTES {
        let mut cut = MAX_DIFF_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n… (diff cut at 64 KiB)\n");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diff_shows_the_rule_added_and_removed() {
        let diff = robots_diff(
            b"User-agent: *\nDisallow: /private\nAllow: /\n",
            b"User-agent: *\nDisallow: /private\nDisallow: /drafts\n",
            "copy 1",
            "copy 2",
        );
        assert!(diff.starts_with("--- copy 1\n+++ copy 2\n"), "{diff}");
        assert!(diff.contains("\n-Allow: /\n"), "{diff}");
        assert!(diff.contains("\n+Disallow: /drafts\n"), "{diff}");
        assert!(diff.contains("\n Disallow: /private\n"), "{diff}");
        assert_eq!(robots_diff(b"a\n", b"a\n", "x", "y"), "");
    }

    #[test]
    fn a_huge_diff_is_cut() {
        let old: String = (0..40_000).map(|i| format!("Disallow: /a{i}\n")).collect();
        let new: String = (0..40_000).map(|i| format!("Disallow: /b{i}\n")).collect();
        let diff = robots_diff(old.as_bytes(), new.as_bytes(), "x", "y");
        assert!(diff.len() <= MAX_DIFF_BYTES + 64);
        assert!(diff.ends_with("(diff cut at 64 KiB)\n"));
    }

    #[test]
    fn csv_quotes_and_defuses_formulas() {
        let text = csv(
            &["path", "count"],
            [
                vec!["/a,b".to_string(), "3".to_string()],
                vec!["=cmd()".to_string(), "1".to_string()],
            ],
        );
        assert_eq!(
            String::from_utf8(text).expect("utf-8"),
            "path,count\n\"/a,b\",3\n'=cmd(),1\n"
        );
    }

    #[test]
    fn csv_defuses_a_formula_after_any_separator() {
        for (cell, defused_cell) in [
            (
                "/x;=HYPERLINK(\"http://e.example\")",
                "/x;'=HYPERLINK(\"http://e.example\")",
            ),
            ("/a,+1", "/a,'+1"),
            ("/a; -1", "/a; '-1"),
            ("a|@SUM(A1)", "a|'@SUM(A1)"),
            ("x\t=1", "x\t'=1"),
            ("\t=1", "'\t'=1"),
            ("=1;=2", "'=1;'=2"),
            ("/plain/path-with-dash=ok", "/plain/path-with-dash=ok"),
            ("2026-11-26T20:15:00Z", "2026-11-26T20:15:00Z"),
            ("12", "12"),
        ] {
            assert_eq!(defused(cell.to_string()), defused_cell, "{cell}");
        }
        let text =
            String::from_utf8(csv(&["path"], [vec!["/x;=cmd()".to_string()]])).expect("utf-8");
        assert_eq!(text, "path\n/x;'=cmd()\n");
    }

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(parse_rfc3339("2026-11-26T20:15:00Z"), Some(1_795_724_100));
        assert_eq!(parse_rfc3339("yesterday"), None);
    }
}
