//! Parsing robots.txt bytes into groups, rules, sitemaps and diagnostics, byte for byte as Google's
//! reference parser reads them.
//!
//! Parsing never fails: every input yields a [`RobotsTxt`], and what the parser had to ignore is
//! recorded as a [`Diagnostic`] with its line number so `validate` and `/explain` can show it.

use super::pattern::escape_pattern;
use super::prefs::{
    is_absolute_http_url, parse_content_signal, parse_content_usage, License, PreferenceKind,
    PreferenceLine,
};

/// Google keeps at most this many bytes of a line (2083 × 8 − 1); the rest of the line is dropped.
pub const MAX_LINE_BYTES: usize = 2083 * 8 - 1;

/// RFC 9309 requires crawlers to parse at least the first 500 KiB; bytes beyond the limit are ignored.
pub const DEFAULT_MAX_SIZE: usize = 500 * 1024;

const UTF8_BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// Whether a rule allows or disallows the paths its pattern matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Directive {
    /// `Allow`: the paths may be fetched.
    Allow,
    /// `Disallow`: they may not.
    Disallow,
}

impl Directive {
    /// The directive as robots.txt spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Directive::Allow => "Allow",
            Directive::Disallow => "Disallow",
        }
    }
}

impl std::fmt::Display for Directive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `Allow` or `Disallow` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Allow or disallow.
    pub directive: Directive,
    /// The value as the matcher sees it: non-ASCII bytes percent-escaped, `%xx` upper-cased.
    /// Always ASCII, hence a `String`.
    pub pattern: String,
    /// 1-based line number in the file (CRLF counts as one line end).
    pub line: u32,
}

/// One `User-agent` line of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// The name the matcher compares with: the leading `[A-Za-z_-]` run of the value. Empty for
    /// values such as `User-agent:` or `User-agent: 123`, and for the global agent.
    pub name: String,
    /// `*` (optionally followed by whitespace and text): the global group.
    pub global: bool,
    /// The value as written (lossily decoded), for display.
    pub raw: String,
    /// 1-based line number in the file.
    pub line: u32,
}

/// A run of `User-agent` lines and the rules that follow them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Group {
    /// Its `User-agent` lines, in file order.
    pub agents: Vec<Agent>,
    /// Its `Allow` and `Disallow` lines, in file order.
    pub rules: Vec<Rule>,
    /// The non-standard `Crawl-delay`, in seconds, when the group states a valid one.
    pub crawl_delay: Option<f64>,
    /// Its `Content-Signal` and `Content-Usage` lines, in file order (they never change a
    /// verdict; see [`crate::prefs`]).
    pub preferences: Vec<PreferenceLine>,
}

impl Group {
    /// Whether one of this group's `User-agent` lines is `*`.
    pub fn is_global(&self) -> bool {
        self.agents.iter().any(|agent| agent.global)
    }

    /// Whether one of this group's `User-agent` lines names `token` (ASCII case-insensitively,
    /// exactly: the caller's token is compared verbatim, as Google does).
    pub fn names(&self, token: &str) -> bool {
        self.agents
            .iter()
            .any(|agent| !agent.global && agent.name.eq_ignore_ascii_case(token))
    }
}

/// One `Sitemap` line (it belongs to no group).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sitemap {
    /// The value as written (lossily decoded).
    pub url: String,
    /// 1-based line number in the file.
    pub line: u32,
}

/// Why a line was ignored or read differently from how it looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiagnosticKind {
    /// No `:` and not exactly two whitespace-separated tokens: the line is dropped.
    NoSeparator,
    /// A separator but nothing before it.
    EmptyKey,
    /// A key robots.txt does not define (it has no effect on matching).
    UnknownKey(String),
    /// An accepted misspelling, such as `dissallow`.
    MisspelledKey {
        /// The key as written.
        written: String,
        /// The key it is read as.
        read_as: &'static str,
    },
    /// `Allow`/`Disallow` before any `User-agent` line: it belongs to no group.
    RuleOutsideGroup,
    /// The line was longer than [`MAX_LINE_BYTES`] and was cut there.
    LineTooLong {
        /// The line's length in bytes.
        length: usize,
    },
    /// `User-agent` whose value reduces to an empty name: it matches no crawler.
    EmptyUserAgent,
    /// A `User-agent` value that is cut to its leading `[A-Za-z_-]` run (`FooBot/1.0` → `FooBot`).
    UserAgentTruncated {
        /// The name the matcher compares with.
        name: String,
    },
    /// `Crawl-delay` whose value is not a non-negative number, or that appears outside a group.
    InvalidCrawlDelay,
    /// A `Content-Signal` or `Content-Usage` line whose value could not be read: the line is
    /// ignored, the rest of the file is not.
    MalformedPreference {
        /// `Content-Signal` or `Content-Usage`.
        key: &'static str,
    },
    /// A `Content-Signal` or `Content-Usage` line before any `User-agent` line.
    PreferenceOutsideGroup,
    /// A `License` line whose value is not an absolute `http`/`https` URL.
    InvalidLicense,
    /// Bytes past the size limit were ignored.
    TruncatedAtSizeLimit {
        /// The bytes parsed.
        limit: usize,
        /// The file's size.
        size: usize,
    },
}

/// A remark of the parser about one line, or about the whole file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// 1-based line; 0 for diagnostics about the whole file.
    pub line: u32,
    /// What the remark is.
    pub kind: DiagnosticKind,
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line > 0 {
            write!(f, "line {}: ", self.line)?;
        }
        match &self.kind {
            DiagnosticKind::NoSeparator => f.write_str("no ':' separator; line ignored"),
            DiagnosticKind::EmptyKey => f.write_str("nothing before ':'; line ignored"),
            DiagnosticKind::UnknownKey(key) => write!(f, "unknown key `{key}`; line ignored"),
            DiagnosticKind::MisspelledKey { written, read_as } => {
                write!(f, "misspelled key `{written}` read as `{read_as}`")
            }
            DiagnosticKind::RuleOutsideGroup => {
                f.write_str("rule before any User-agent line; it applies to no crawler")
            }
            DiagnosticKind::LineTooLong { length } => write!(
                f,
                "line of {length} bytes cut to its first {MAX_LINE_BYTES} bytes"
            ),
            DiagnosticKind::EmptyUserAgent => {
                f.write_str("User-agent value has no name; the group matches no crawler")
            }
            DiagnosticKind::UserAgentTruncated { name } => {
                write!(f, "User-agent value read as `{name}`")
            }
            DiagnosticKind::InvalidCrawlDelay => {
                f.write_str("Crawl-delay is not a non-negative number or is outside a group")
            }
            DiagnosticKind::MalformedPreference { key } => {
                write!(f, "{key} value could not be read; line ignored")
            }
            DiagnosticKind::PreferenceOutsideGroup => {
                f.write_str("preference line before any User-agent line; it applies to no crawler")
            }
            DiagnosticKind::InvalidLicense => {
                f.write_str("License is not an absolute http(s) URL; line ignored")
            }
            DiagnosticKind::TruncatedAtSizeLimit { limit, size } => write!(
                f,
                "file of {size} bytes: only the first {limit} bytes were parsed"
            ),
        }
    }
}

/// A parsed robots.txt.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RobotsTxt {
    /// Its groups, in file order (groups naming the same agent are not merged here).
    pub groups: Vec<Group>,
    /// Its `Sitemap` lines.
    pub sitemaps: Vec<Sitemap>,
    /// Lines ignored or read differently from how they look.
    pub diagnostics: Vec<Diagnostic>,
    /// Number of lines the parser saw (the last, possibly empty, line included).
    pub lines: u32,
    /// Bytes parsed (after the size limit).
    pub parsed_bytes: usize,
    /// Its `License` lines (RSL), in file order; they belong to no group.
    pub licenses: Vec<License>,
}

impl RobotsTxt {
    /// Parses the first [`DEFAULT_MAX_SIZE`] bytes of `body`.
    pub fn parse(body: &[u8]) -> RobotsTxt {
        Self::parse_with_limit(body, DEFAULT_MAX_SIZE)
    }

    /// Parses the first `max_size` bytes of `body` (at least [`DEFAULT_MAX_SIZE`]).
    pub fn parse_with_limit(body: &[u8], max_size: usize) -> RobotsTxt {
        let limit = max_size.max(DEFAULT_MAX_SIZE);
        let parsed = &body[..body.len().min(limit)];
        let mut builder = Builder::default();
        if parsed.len() < body.len() {
            builder.robots.diagnostics.push(Diagnostic {
                line: 0,
                kind: DiagnosticKind::TruncatedAtSizeLimit {
                    limit,
                    size: body.len(),
                },
            });
        }
        for_each_line(parsed, |line_number, line, full_length| {
            if full_length > MAX_LINE_BYTES {
                builder.diagnose(
                    line_number,
                    DiagnosticKind::LineTooLong {
                        length: full_length,
                    },
                );
            }
            builder.line(line_number, line);
        });
        builder.robots.parsed_bytes = parsed.len();
        builder.robots
    }

    /// Every distinct agent name (lower-cased) that a `User-agent` line names, global excluded.
    pub fn agent_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .groups
            .iter()
            .flat_map(|group| group.agents.iter())
            .filter(|agent| !agent.global && !agent.name.is_empty())
            .map(|agent| agent.name.to_ascii_lowercase())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// `Allow` and `Disallow` lines in all groups.
    pub fn rule_count(&self) -> usize {
        self.groups.iter().map(|group| group.rules.len()).sum()
    }
}

/// Splits `body` into lines the way Google's parser does and calls `emit(line_number, kept_bytes,
/// full_length)` for each: LF, CR and CRLF end lines, a leading (partial) UTF-8 BOM is skipped,
/// bytes past [`MAX_LINE_BYTES`] are dropped, and the last line is emitted even when empty.
fn for_each_line(body: &[u8], mut emit: impl FnMut(u32, &[u8], usize)) {
    let mut start = 0;
    // A BOM, or a leading prefix of one, is skipped; the first mismatching byte ends the skipping.
    for (index, &byte) in UTF8_BOM.iter().enumerate() {
        if body.get(index) == Some(&byte) {
            start = index + 1;
        } else {
            break;
        }
    }
    let mut line_number: u32 = 0;
    let mut line_start = start;
    let mut last_was_cr = false;
    let mut position = start;
    while let Some(offset) = memchr::memchr2(b'\n', b'\r', &body[position..]) {
        let end = position + offset;
        let byte = body[end];
        // The LF of a CRLF does not end a second, empty line.
        let crlf_continuation = end == line_start && last_was_cr && byte == b'\n';
        if !crlf_continuation {
            line_number = line_number.saturating_add(1);
            let line = &body[line_start..end];
            emit(
                line_number,
                &line[..line.len().min(MAX_LINE_BYTES)],
                line.len(),
            );
        }
        last_was_cr = byte == b'\r';
        position = end + 1;
        line_start = position;
    }
    let line = &body[line_start..];
    emit(
        line_number.saturating_add(1),
        &line[..line.len().min(MAX_LINE_BYTES)],
        line.len(),
    );
}

/// What a line's key was read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    UserAgent,
    Allow,
    Disallow,
    Sitemap,
    Unknown,
}

/// Reads a key the way Google does: case-insensitively, and a key counts if it merely starts with
/// the directive's name (or one of the misspellings Google accepts). Returns the key and, for a
/// misspelling, the canonical name.
fn classify_key(key: &[u8]) -> (Key, Option<&'static str>) {
    const KEYS: [(&[u8], Key, bool); 12] = [
        (b"user-agent", Key::UserAgent, false),
        (b"useragent", Key::UserAgent, true),
        (b"user agent", Key::UserAgent, true),
        (b"allow", Key::Allow, false),
        (b"disallow", Key::Disallow, false),
        (b"dissallow", Key::Disallow, true),
        (b"dissalow", Key::Disallow, true),
        (b"disalow", Key::Disallow, true),
        (b"diasllow", Key::Disallow, true),
        (b"disallaw", Key::Disallow, true),
        (b"sitemap", Key::Sitemap, false),
        (b"site-map", Key::Sitemap, true),
    ];
    for (name, kind, misspelled) in KEYS {
        if starts_with_ignore_ascii_case(key, name) {
            let read_as = misspelled.then_some(match kind {
                Key::UserAgent => "User-agent",
                Key::Disallow => "Disallow",
                _ => "Sitemap",
            });
            return (kind, read_as);
        }
    }
    (Key::Unknown, None)
}

fn starts_with_ignore_ascii_case(text: &[u8], prefix: &[u8]) -> bool {
    text.len() >= prefix.len() && text[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// Whitespace as C's `isspace` in the C locale, which Google's parser trims.
fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

fn trim(mut bytes: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = bytes {
        if !is_space(*first) {
            break;
        }
        bytes = rest;
    }
    while let [rest @ .., last] = bytes {
        if !is_space(*last) {
            break;
        }
        bytes = rest;
    }
    bytes
}

/// The outcome of splitting a line into key and value.
enum Split<'a> {
    /// Blank or comment-only: nothing to report.
    Nothing,
    NoSeparator,
    EmptyKey,
    KeyValue(&'a [u8], &'a [u8]),
}

/// Splits a line into key and value: the comment is cut, whitespace trimmed, the key ends at the
/// first `:`; without a colon, a single run of spaces/tabs separates exactly two tokens.
fn split_key_value(line: &[u8]) -> Split<'_> {
    // Google works on C strings: a NUL byte ends the line.
    let line = match memchr::memchr(0, line) {
        Some(nul) => &line[..nul],
        None => line,
    };
    let line = match memchr::memchr(b'#', line) {
        Some(hash) => &line[..hash],
        None => line,
    };
    let line = trim(line);
    if line.is_empty() {
        return Split::Nothing;
    }
    let (key, value) = if let Some(colon) = memchr::memchr(b':', line) {
        (&line[..colon], &line[colon + 1..])
    } else {
        let Some(space) = line.iter().position(|&b| b == b' ' || b == b'\t') else {
            return Split::NoSeparator;
        };
        let value_start = line[space..]
            .iter()
            .position(|&b| b != b' ' && b != b'\t')
            .map_or(line.len(), |offset| space + offset);
        let value = &line[value_start..];
        if value.iter().any(|&b| b == b' ' || b == b'\t') {
            return Split::NoSeparator;
        }
        (&line[..space], value)
    };
    let key = trim(key);
    if key.is_empty() {
        return Split::EmptyKey;
    }
    Split::KeyValue(key, trim(value))
}

/// Whether `b` may be part of a product token: `[A-Za-z_-]` (RFC 9309 §2.2.1).
#[inline]
pub fn is_product_token_byte(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'-' || b == b'_'
}

/// The leading `[A-Za-z_-]` run of a User-agent value: the only part Google compares
/// (`FooBot/1.0` is `FooBot`, `MJ12bot` is `MJ`, `360Spider` is nothing).
#[inline]
pub fn reduce_agent_name(value: &[u8]) -> &[u8] {
    let end = value
        .iter()
        .position(|&b| !is_product_token_byte(b))
        .unwrap_or(value.len());
    &value[..end]
}

/// [`reduce_agent_name`] for text, after trimming surrounding whitespace.
#[inline]
pub fn product_token(name: &str) -> &str {
    let name = name.trim();
    // The run is ASCII, so its length is a char boundary.
    &name[..reduce_agent_name(name.as_bytes()).len()]
}

/// `*`, alone or followed by whitespace, names the global group; `*bot` does not.
fn is_global_agent(value: &[u8]) -> bool {
    match value {
        [b'*'] => true,
        [b'*', next, ..] => is_space(*next),
        _ => false,
    }
}

#[derive(Default)]
struct Builder {
    robots: RobotsTxt,
    /// Index of the group receiving rules, if a User-agent line has been seen.
    current: Option<usize>,
    /// A rule has been added to the current group, so the next User-agent line starts a new one.
    current_has_rules: bool,
}

impl Builder {
    fn diagnose(&mut self, line: u32, kind: DiagnosticKind) {
        self.robots.diagnostics.push(Diagnostic { line, kind });
    }

    fn line(&mut self, line_number: u32, line: &[u8]) {
        self.robots.lines = line_number;
        let (key, value) = match split_key_value(line) {
            Split::Nothing => return,
            Split::NoSeparator => return self.diagnose(line_number, DiagnosticKind::NoSeparator),
            Split::EmptyKey => return self.diagnose(line_number, DiagnosticKind::EmptyKey),
            Split::KeyValue(key, value) => (key, value),
        };
        let (kind, misspelling) = classify_key(key);
        if let Some(read_as) = misspelling {
            let written = String::from_utf8_lossy(key).into_owned();
            self.diagnose(
                line_number,
                DiagnosticKind::MisspelledKey { written, read_as },
            );
        }
        match kind {
            Key::UserAgent => self.user_agent(line_number, value),
            Key::Allow => self.rule(line_number, Directive::Allow, value),
            Key::Disallow => self.rule(line_number, Directive::Disallow, value),
            Key::Sitemap => self.robots.sitemaps.push(Sitemap {
                url: String::from_utf8_lossy(value).into_owned(),
                line: line_number,
            }),
            Key::Unknown => self.unknown(line_number, key, value),
        }
    }

    fn user_agent(&mut self, line_number: u32, value: &[u8]) {
        let group = match self.current {
            Some(index) if !self.current_has_rules => index,
            _ => {
                self.robots.groups.push(Group::default());
                self.current_has_rules = false;
                self.robots.groups.len() - 1
            }
        };
        self.current = Some(group);
        let global = is_global_agent(value);
        let name = if global {
            String::new()
        } else {
            let name = reduce_agent_name(value);
            if name.is_empty() {
                self.diagnose(line_number, DiagnosticKind::EmptyUserAgent);
            } else if name.len() < value.len() {
                self.diagnose(
                    line_number,
                    DiagnosticKind::UserAgentTruncated {
                        name: String::from_utf8_lossy(name).into_owned(),
                    },
                );
            }
            String::from_utf8_lossy(name).into_owned()
        };
        self.robots.groups[group].agents.push(Agent {
            name,
            global,
            raw: String::from_utf8_lossy(value).into_owned(),
            line: line_number,
        });
    }

    fn rule(&mut self, line_number: u32, directive: Directive, value: &[u8]) {
        let Some(group) = self.current else {
            return self.diagnose(line_number, DiagnosticKind::RuleOutsideGroup);
        };
        self.current_has_rules = true;
        self.robots.groups[group].rules.push(Rule {
            directive,
            pattern: escape_pattern(value),
            line: line_number,
        });
    }

    fn unknown(&mut self, line_number: u32, key: &[u8], value: &[u8]) {
        if starts_with_ignore_ascii_case(key, b"crawl-delay") {
            let delay = std::str::from_utf8(value)
                .ok()
                .and_then(|text| text.parse::<f64>().ok())
                .filter(|delay| delay.is_finite() && *delay >= 0.0);
            match (self.current, delay) {
                (Some(group), Some(delay)) => {
                    let slot = &mut self.robots.groups[group].crawl_delay;
                    slot.get_or_insert(delay);
                }
                _ => self.diagnose(line_number, DiagnosticKind::InvalidCrawlDelay),
            }
            return;
        }
        if key.eq_ignore_ascii_case(b"content-signal") {
            return self.preference(line_number, PreferenceKind::ContentSignal, value);
        }
        if key.eq_ignore_ascii_case(b"content-usage") {
            return self.preference(line_number, PreferenceKind::ContentUsage, value);
        }
        if key.eq_ignore_ascii_case(b"license") {
            let url = String::from_utf8_lossy(value);
            if is_absolute_http_url(&url) {
                self.robots.licenses.push(License {
                    url: url.into_owned(),
                    line: line_number,
                });
            } else {
                self.diagnose(line_number, DiagnosticKind::InvalidLicense);
            }
            return;
        }
        let key = String::from_utf8_lossy(key).into_owned();
        self.diagnose(line_number, DiagnosticKind::UnknownKey(key));
    }

    /// A `Content-Signal` or `Content-Usage` line: kept in the current group, like `Crawl-delay`
    /// it does not end the group's `User-agent` run (Google ignores the line altogether).
    fn preference(&mut self, line_number: u32, kind: PreferenceKind, value: &[u8]) {
        let Some(group) = self.current else {
            return self.diagnose(line_number, DiagnosticKind::PreferenceOutsideGroup);
        };
        let text = String::from_utf8_lossy(value);
        let parsed = match kind {
            PreferenceKind::ContentSignal => parse_content_signal(&text).map(|e| (None, e)),
            PreferenceKind::ContentUsage => parse_content_usage(&text)
                .map(|(path, entries)| (path.map(|p| escape_pattern(p.as_bytes())), entries)),
        };
        let Some((path, entries)) = parsed else {
            return self.diagnose(
                line_number,
                DiagnosticKind::MalformedPreference { key: kind.as_str() },
            );
        };
        let shown = format!("{}: {text}", kind.as_str()).into();
        self.robots.groups[group].preferences.push(PreferenceLine {
            kind,
            line: line_number,
            path,
            entries,
            text: text.into_owned(),
            shown,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(body: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut lines = Vec::new();
        for_each_line(body, |number, line, _| lines.push((number, line.to_vec())));
        lines
    }

    #[test]
    fn lf_cr_and_crlf_each_end_one_line() {
        let lines = lines_of(b"a\nb\r\nc\rd\r\n\r\ne");
        let texts: Vec<&[u8]> = lines.iter().map(|(_, l)| l.as_slice()).collect();
        assert_eq!(texts, vec![&b"a"[..], b"b", b"c", b"d", b"", b"e"]);
        assert_eq!(lines.last().map(|(n, _)| *n), Some(6));
    }

    #[test]
    fn bom_and_partial_bom_are_skipped_only_at_the_start() {
        assert_eq!(lines_of(b"\xEF\xBB\xBFab")[0].1, b"ab");
        assert_eq!(lines_of(b"\xEF\xBBab")[0].1, b"ab");
        assert_eq!(lines_of(b"\xEFab")[0].1, b"ab");
        assert_eq!(lines_of(b"\xEF\xBB\xEFab")[0].1, b"\xEFab");
        assert_eq!(lines_of(b"x\n\xEF\xBB\xBFab")[1].1, b"\xEF\xBB\xBFab");
    }

    #[test]
    fn long_lines_are_cut_and_reported() {
        let mut body = b"Disallow: /".to_vec();
        body.extend(std::iter::repeat_n(b'a', 20_000));
        let lines = lines_of(&body);
        assert_eq!(lines[0].1.len(), MAX_LINE_BYTES);
        let robots = RobotsTxt::parse(&[b"User-agent: *\n".as_slice(), &body].concat());
        assert!(robots.diagnostics.iter().any(
            |d| matches!(d.kind, DiagnosticKind::LineTooLong { length } if length == body.len())
        ));
        assert_eq!(robots.groups[0].rules[0].pattern.len(), MAX_LINE_BYTES - 10);
    }

    #[test]
    fn key_value_splitting() {
        let kv = |line: &[u8]| match split_key_value(line) {
            Split::KeyValue(k, v) => Some((k.to_vec(), v.to_vec())),
            _ => None,
        };
        assert_eq!(
            kv(b"  Disallow :  /a b  "),
            Some((b"Disallow".to_vec(), b"/a b".to_vec()))
        );
        assert_eq!(
            kv(b"disallow /a"),
            Some((b"disallow".to_vec(), b"/a".to_vec()))
        );
        assert_eq!(
            kv(b"disallow \t /a"),
            Some((b"disallow".to_vec(), b"/a".to_vec()))
        );
        assert_eq!(kv(b"disallow /a /b"), None);
        assert_eq!(kv(b"disallow"), None);
        assert_eq!(kv(b": /a"), None);
        assert_eq!(
            kv(b"Disallow: /a # comment"),
            Some((b"Disallow".to_vec(), b"/a".to_vec()))
        );
        assert_eq!(
            kv(b"Disallow: /a\0/b"),
            Some((b"Disallow".to_vec(), b"/a".to_vec()))
        );
        assert_eq!(
            kv(b"Disallow: http://x/y"),
            Some((b"Disallow".to_vec(), b"http://x/y".to_vec()))
        );
        assert_eq!(kv(b"# only a comment"), None);
    }

    #[test]
    fn groups_form_like_googles_state_machine() {
        let robots = RobotsTxt::parse(
            b"Disallow: /orphan\nUser-agent: a\n\nUser-agent: b\nSitemap: /s\nDisallow: /x\n\
              User-agent: c\nAllow: /y\nUser-agent: d",
        );
        assert_eq!(robots.groups.len(), 3);
        let names: Vec<Vec<&str>> = robots
            .groups
            .iter()
            .map(|g| g.agents.iter().map(|a| a.name.as_str()).collect())
            .collect();
        assert_eq!(names, vec![vec!["a", "b"], vec!["c"], vec!["d"]]);
        assert_eq!(robots.groups[0].rules[0].line, 6);
        assert!(robots.groups[2].rules.is_empty());
        assert!(robots
            .diagnostics
            .iter()
            .any(|d| d.line == 1 && d.kind == DiagnosticKind::RuleOutsideGroup));
        assert_eq!(robots.sitemaps[0].url, "/s");
    }

    #[test]
    fn agent_values_reduce_to_their_leading_name() {
        assert_eq!(reduce_agent_name(b"FooBot/2.1"), b"FooBot");
        assert_eq!(reduce_agent_name(b"Foo Bar"), b"Foo");
        assert_eq!(reduce_agent_name(b"foo_bar-baz9x"), b"foo_bar-baz");
        assert_eq!(reduce_agent_name(b"9foo"), b"");
        assert_eq!(product_token("  FooBot/1.0 "), "FooBot");
        assert_eq!(product_token("archive.org_bot"), "archive");
        assert_eq!(product_token("MJ12bot"), "MJ");
        assert_eq!(product_token("Screaming Frog"), "Screaming");
        assert_eq!(product_token("*"), "");
        assert_eq!(product_token("360Spider"), "");
        assert_eq!(product_token("Ünïcode"), "");
        assert!(is_global_agent(b"*"));
        assert!(is_global_agent(b"* ignored text"));
        assert!(!is_global_agent(b"*bot"));
    }

    #[test]
    fn misspellings_and_prefix_keys() {
        assert_eq!(classify_key(b"Disallowed").0, Key::Disallow);
        assert_eq!(classify_key(b"ALLOWANCE").0, Key::Allow);
        assert_eq!(classify_key(b"user-agents").0, Key::UserAgent);
        assert_eq!(
            classify_key(b"useragent"),
            (Key::UserAgent, Some("User-agent"))
        );
        assert_eq!(
            classify_key(b"user agent"),
            (Key::UserAgent, Some("User-agent"))
        );
        for typo in ["dissallow", "dissalow", "disalow", "diasllow", "disallaw"] {
            assert_eq!(classify_key(typo.as_bytes()).0, Key::Disallow, "{typo}");
        }
        for rejected in [
            "alow",
            "user_agent",
            "disalllow",
            "dis-allow",
            "crawl-delay",
        ] {
            assert_eq!(
                classify_key(rejected.as_bytes()).0,
                Key::Unknown,
                "{rejected}"
            );
        }
        assert_eq!(classify_key(b"site-map").0, Key::Sitemap);
    }

    #[test]
    fn crawl_delay_is_kept_per_group() {
        let robots = RobotsTxt::parse(
            b"User-agent: a\nCrawl-delay: 2.5\nDisallow: /a\nUser-agent: *\nDisallow: /\nCrawl-delay: x\n",
        );
        assert_eq!(robots.groups[0].crawl_delay, Some(2.5));
        assert_eq!(robots.groups[1].crawl_delay, None);
        assert!(robots
            .diagnostics
            .iter()
            .any(|d| d.line == 6 && d.kind == DiagnosticKind::InvalidCrawlDelay));
    }

    #[test]
    fn size_limit_is_never_below_the_rfc_minimum() {
        let mut body = b"User-agent: *\n".to_vec();
        body.extend(std::iter::repeat_n(b'#', DEFAULT_MAX_SIZE));
        body.extend_from_slice(b"\nDisallow: /");
        let robots = RobotsTxt::parse_with_limit(&body, 10);
        assert_eq!(robots.parsed_bytes, DEFAULT_MAX_SIZE);
        assert_eq!(robots.rule_count(), 0);
        let robots = RobotsTxt::parse_with_limit(&body, body.len());
        assert_eq!(robots.rule_count(), 1);
    }
}
