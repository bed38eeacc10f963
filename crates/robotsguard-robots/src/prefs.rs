//! Usage preferences in robots.txt: Cloudflare's `Content-Signal` lines, the IETF aipref
//! `Content-Usage` lines (draft-ietf-aipref-attach) and RSL's file-wide `License` lines.
//!
//! Google's matcher ignores all three, and so do the verdicts: these lines never change what
//! `Allow`/`Disallow` decide. They are parsed alongside, kept per group, and answered for a
//! (group, path) pair by [`crate::Robots::preferences`]:
//!
//! ```
//! use robotsguard_robots::{Robots, Use};
//!
//! let robots = Robots::parse(
//!     b"User-agent: *\nContent-Signal: search=yes, ai-train=no\n\
//!       Content-Usage: /blog/ train-ai=y\nDisallow: /private\n",
//! );
//! let path = b"/news/today";
//! let verdict = robots.verdict(&["examplebot"], path);
//! let prefs = robots.preferences(&verdict, path);
//! let training = prefs.statement(Use::TrainAi).unwrap();
//! assert!(!training.allowed);
//! assert_eq!(training.line.line, 2);
//! // A path-scoped line (longest match) speaks before the group-wide ones.
//! let verdict = robots.verdict(&["examplebot"], b"/blog/post");
//! assert!(robots.preferences(&verdict, b"/blog/post").statement(Use::TrainAi).unwrap().allowed);
//! // Nothing applies where the group may not crawl.
//! let verdict = robots.verdict(&["examplebot"], b"/private/x");
//! assert!(robots.preferences(&verdict, b"/private/x").is_empty());
//! ```

/// Which kind of line stated a preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PreferenceKind {
    /// `Content-Signal: search=yes, ai-input=yes, ai-train=no` (Cloudflare Content Signals).
    ContentSignal,
    /// `Content-Usage: [path] train-ai=n, search=y` (IETF aipref).
    ContentUsage,
}

impl PreferenceKind {
    /// The key as robots.txt spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            PreferenceKind::ContentSignal => "Content-Signal",
            PreferenceKind::ContentUsage => "Content-Usage",
        }
    }
}

/// One value of a preference line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreferenceValue {
    /// `yes` (Content-Signal) or `y` (Content-Usage).
    Yes,
    /// `no` or `n`.
    No,
    /// Anything else, kept as written (unknown vocabularies such as `use=immediate`); it never
    /// counts as a statement.
    Other(String),
}

/// One `key=value` member of a preference line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreferenceEntry {
    /// The key, lower-cased for `Content-Signal`, as written for `Content-Usage` (structured
    /// field keys are lower-case by grammar).
    pub key: String,
    /// Its value.
    pub value: PreferenceValue,
}

/// A `Content-Signal` or `Content-Usage` line of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreferenceLine {
    /// Which kind of line.
    pub kind: PreferenceKind,
    /// 1-based line number in the file.
    pub line: u32,
    /// For a path-scoped `Content-Usage` line, its path pattern (matched like `Allow`/`Disallow`
    /// patterns, after Google's escaping).
    pub path: Option<String>,
    /// Its members, in order; unknown keys are kept.
    pub entries: Vec<PreferenceEntry>,
    /// The value as written after the key (comment and surrounding whitespace removed).
    pub text: String,
    /// `Content-Signal: search=yes, ai-train=no`: the line as it reads, made once at parse time
    /// so that a decision can quote it for a reference count.
    pub shown: std::sync::Arc<str>,
}

impl PreferenceLine {
    /// `Content-Signal: search=yes, ai-train=no`, as the line reads.
    pub fn display(&self) -> String {
        self.shown.to_string()
    }

    /// The value this line gives `category`, if it states one (the last member naming it).
    pub fn value_for(&self, category: Use) -> Option<&PreferenceEntry> {
        self.entries
            .iter()
            .rev()
            .find(|entry| category.is_named_by(self.kind, &entry.key))
    }
}

/// A file-wide `License:` line (RSL 1.0): the URL of the site's licence terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct License {
    /// The absolute `http`/`https` URL as written.
    pub url: String,
    /// 1-based line number in the file.
    pub line: u32,
}

/// A use of content that the preference lines speak about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Use {
    /// Building a search index and showing links back: `search` in both vocabularies.
    Search,
    /// Input to an AI answer at request time (grounding): Content-Signal's `ai-input`.
    AiInput,
    /// Training or fine-tuning models: Content-Signal's `ai-train`, aipref's `train-ai`.
    TrainAi,
}

impl Use {
    /// Every use, in a fixed order.
    pub const ALL: [Use; 3] = [Use::Search, Use::AiInput, Use::TrainAi];

    /// Whether `key` of a `kind` line names this use.
    fn is_named_by(self, kind: PreferenceKind, key: &str) -> bool {
        match (self, kind) {
            (Use::Search, _) => key == "search",
            (Use::AiInput, PreferenceKind::ContentSignal) => key == "ai-input",
            (Use::TrainAi, PreferenceKind::ContentSignal) => key == "ai-train",
            (Use::TrainAi, PreferenceKind::ContentUsage) => key == "train-ai",
            (Use::AiInput, PreferenceKind::ContentUsage) => false,
        }
    }

    /// The aipref vocabulary's name for this use, if it has one.
    pub fn aipref_key(self) -> Option<&'static str> {
        match self {
            Use::Search => Some("search"),
            Use::TrainAi => Some("train-ai"),
            Use::AiInput => None,
        }
    }
}

/// What the applicable lines say about one [`Use`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statement<'a> {
    /// `yes`/`y` (true) or `no`/`n` (false).
    pub allowed: bool,
    /// The line that said it.
    pub line: &'a PreferenceLine,
}

/// The preference lines that apply to one crawler's group and one path: the group-wide lines
/// (`Content-Signal`, `Content-Usage` without a path) and the path-scoped `Content-Usage` lines
/// with the longest matching path. Empty where the group may not crawl.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preferences<'a> {
    /// Group-wide lines, in file order.
    pub group_wide: &'a [PreferenceLine],
    /// Path-scoped lines of the longest matching path (several when lines repeat the path), in
    /// file order.
    pub scoped: Vec<&'a PreferenceLine>,
}

impl<'a> Preferences<'a> {
    /// No line applies.
    pub fn is_empty(&self) -> bool {
        self.group_wide.is_empty() && self.scoped.is_empty()
    }

    /// Every applicable line: path-scoped first, then group-wide.
    pub fn lines(&self) -> impl Iterator<Item = &'a PreferenceLine> + '_ {
        self.scoped.iter().copied().chain(self.group_wide.iter())
    }

    /// What the lines say about `category`: the path-scoped lines speak first, then the
    /// group-wide ones; among lines of one scope that disagree, `no` wins (combining, as aipref
    /// asks, rather than letting the most permissive line win). `None`: no statement.
    pub fn statement(&self, category: Use) -> Option<Statement<'a>> {
        resolve(self.scoped.iter().copied(), category)
            .or_else(|| resolve(self.group_wide.iter(), category))
    }

    /// The aipref response header value for these preferences (`train-ai=n, search=y`), or
    /// `None` when they state nothing in aipref's vocabulary.
    pub fn content_usage_header(&self) -> Option<String> {
        let members: Vec<String> = Use::ALL
            .iter()
            .filter_map(|&category| {
                let key = category.aipref_key()?;
                let statement = self.statement(category)?;
                Some(format!(
                    "{key}={}",
                    if statement.allowed { "y" } else { "n" }
                ))
            })
            .collect();
        (!members.is_empty()).then(|| members.join(", "))
    }
}

fn resolve<'a>(
    lines: impl Iterator<Item = &'a PreferenceLine>,
    category: Use,
) -> Option<Statement<'a>> {
    let mut found: Option<Statement<'a>> = None;
    for line in lines {
        let allowed = match line.value_for(category).map(|entry| &entry.value) {
            Some(PreferenceValue::Yes) => true,
            Some(PreferenceValue::No) => false,
            Some(PreferenceValue::Other(_)) | None => continue,
        };
        match found {
            Some(previous) if !previous.allowed || allowed => {}
            _ => found = Some(Statement { allowed, line }),
        }
    }
    found
}

/// Parses a `Content-Signal` value: comma-separated `key=value` members, whitespace allowed
/// around them; keys are case-insensitive; `yes`/`no` are statements, other values are kept.
/// `None` for a malformed line (a member without `=`, or a key that is not a token).
pub(crate) fn parse_content_signal(value: &str) -> Option<Vec<PreferenceEntry>> {
    let mut entries = Vec::new();
    for member in value.split(',') {
        let member = member.trim();
        if member.is_empty() {
            // A trailing comma is common in hand-written files and harmless.
            continue;
        }
        let (key, value) = member.split_once('=')?;
        let key = key.trim().to_ascii_lowercase();
        let value = value.trim();
        if key.is_empty()
            || !key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return None;
        }
        let value = match value.to_ascii_lowercase().as_str() {
            "yes" => PreferenceValue::Yes,
            "no" => PreferenceValue::No,
            _ => PreferenceValue::Other(value.to_string()),
        };
        entries.push(PreferenceEntry { key, value });
    }
    (!entries.is_empty()).then_some(entries)
}

/// Parses a `Content-Usage` value: an optional path (starting with `/` or `*`, ending at the
/// first whitespace), then a Structured Fields dictionary (RFC 9651) whose `y`/`n` tokens are
/// statements. `None` for a malformed line.
pub(crate) fn parse_content_usage(value: &str) -> Option<(Option<&str>, Vec<PreferenceEntry>)> {
    let (path, dictionary) = match value.split_once([' ', '\t']) {
        Some((first, rest)) if first.starts_with(['/', '*']) && !first.contains('=') => {
            (Some(first), rest.trim())
        }
        _ if value.starts_with('/') => return None,
        _ => (None, value),
    };
    parse_dictionary(dictionary, usize::MAX).map(|entries| (path, entries))
}

/// Members a `Content-Usage` response header may hold; one with more is malformed. The
/// vocabulary has two keys: a page's header with dozens is not a preference, and the check for
/// a repeated key is quadratic in the members.
pub const MAX_HEADER_MEMBERS: usize = 64;

/// Parses one `Content-Usage` response header line (draft-ietf-aipref-attach): a Structured
/// Fields dictionary, as the robots.txt line's after its path, of at most
/// [`MAX_HEADER_MEMBERS`] members. `None` for a malformed value (invalid Structured Fields, a
/// path, too many members).
pub fn parse_content_usage_header(value: &str) -> Option<Vec<PreferenceEntry>> {
    parse_dictionary(value.trim_end_matches([' ', '\t']), MAX_HEADER_MEMBERS)
}

/// What the members of a `Content-Usage` value say about `category`: `Some(true)` for `y`,
/// `Some(false)` for `n` (the last member naming it; aipref's keys: `train-ai`, `search`), `None`
/// when none states it.
pub fn content_usage_says(entries: &[PreferenceEntry], category: Use) -> Option<bool> {
    entries
        .iter()
        .rev()
        .find(|entry| category.is_named_by(PreferenceKind::ContentUsage, &entry.key))
        .and_then(|entry| match entry.value {
            PreferenceValue::Yes => Some(true),
            PreferenceValue::No => Some(false),
            PreferenceValue::Other(_) => None,
        })
}

/// A Structured Fields dictionary, strictly enough that garbage is refused and loosely enough
/// that any member value is kept: bare keys are `?1` (true), parameters are skipped. More than
/// `max_members` members make it malformed.
fn parse_dictionary(text: &str, max_members: usize) -> Option<Vec<PreferenceEntry>> {
    let mut members = 0usize;
    let mut entries = Vec::new();
    let mut rest = text.trim_start_matches([' ', '\t']);
    if rest.is_empty() {
        return None;
    }
    loop {
        members += 1;
        if members > max_members {
            return None;
        }
        let key_len = sf_key_len(rest)?;
        let key = &rest[..key_len];
        rest = &rest[key_len..];
        let value = if let Some(after) = rest.strip_prefix('=') {
            let (item, remaining) = sf_bare_item(after)?;
            rest = remaining;
            item
        } else {
            "?1".to_string()
        };
        rest = skip_parameters(rest)?;
        let value = match value.as_str() {
            "y" => PreferenceValue::Yes,
            "n" => PreferenceValue::No,
            _ => PreferenceValue::Other(value),
        };
        // A repeated key replaces the earlier member (RFC 9651 §4.2.2).
        entries.retain(|entry: &PreferenceEntry| entry.key != key);
        entries.push(PreferenceEntry {
            key: key.to_string(),
            value,
        });
        rest = rest.trim_start_matches([' ', '\t']);
        if rest.is_empty() {
            return Some(entries);
        }
        rest = rest.strip_prefix(',')?.trim_start_matches([' ', '\t']);
        if rest.is_empty() {
            // A trailing comma is a parse failure in Structured Fields.
            return None;
        }
    }
}

/// Length of a Structured Fields key at the start of `text`: `( lcalpha / "*" ) *( lcalpha /
/// DIGIT / "_" / "-" / "." / "*" )`.
fn sf_key_len(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    match bytes.first() {
        Some(b) if b.is_ascii_lowercase() || *b == b'*' => {}
        _ => return None,
    }
    Some(
        bytes
            .iter()
            .position(|&b| {
                !(b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || matches!(b, b'_' | b'-' | b'.' | b'*'))
            })
            .unwrap_or(bytes.len()),
    )
}

/// A bare item at the start of `text` (token, number, string, boolean or byte sequence), as
/// written, and what follows it.
fn sf_bare_item(text: &str) -> Option<(String, &str)> {
    let bytes = text.as_bytes();
    let first = *bytes.first()?;
    let end = if first == b'"' {
        let mut index = 1;
        loop {
            match bytes.get(index)? {
                b'\\' => index += 2,
                b'"' => break index + 1,
                b if (0x20..0x7F).contains(b) => index += 1,
                _ => return None,
            }
        }
    } else if first == b':' {
        text[1..].find(':')? + 2
    } else if first.is_ascii_alphabetic()
        || first == b'*'
        || first == b'?'
        || first.is_ascii_digit()
        || first == b'-'
        || first == b'@'
    {
        bytes
            .iter()
            .position(|&b| {
                !(b.is_ascii_alphanumeric()
                    || matches!(
                        b,
                        b'!' | b'#'
                            | b'$'
                            | b'%'
                            | b'&'
                            | b'\''
                            | b'*'
                            | b'+'
                            | b'-'
                            | b'.'
                            | b'^'
                            | b'_'
                            | b'`'
                            | b'|'
                            | b'~'
                            | b':'
                            | b'/'
                            | b'?'
                            | b'@'
                    ))
            })
            .unwrap_or(bytes.len())
    } else {
        return None;
    };
    let end = end.min(text.len());
    Some((text.get(..end)?.to_string(), text.get(end..)?))
}

/// Skips `;key[=item]` parameters after a member.
fn skip_parameters(mut rest: &str) -> Option<&str> {
    while let Some(after) = rest.strip_prefix(';') {
        let after = after.trim_start_matches(' ');
        let key_len = sf_key_len(after)?;
        rest = &after[key_len..];
        if let Some(after) = rest.strip_prefix('=') {
            rest = sf_bare_item(after)?.1;
        }
    }
    Some(rest)
}

/// Whether a `License:` value is an absolute `http` or `https` URL with a host.
pub(crate) fn is_absolute_http_url(value: &str) -> bool {
    let lower = value.get(..8).map(str::to_ascii_lowercase);
    let rest = match lower.as_deref() {
        Some("https://") => &value[8..],
        _ if value.len() > 7 && value[..7].eq_ignore_ascii_case("http://") => &value[7..],
        _ => return false,
    };
    !rest.is_empty()
        && !rest.starts_with('/')
        && !value.bytes().any(|b| b.is_ascii_whitespace() || b < 0x20)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(entries: &[PreferenceEntry]) -> Vec<(&str, &PreferenceValue)> {
        entries.iter().map(|e| (e.key.as_str(), &e.value)).collect()
    }

    #[test]
    fn content_signal_members() {
        let entries = parse_content_signal(" search=yes ,AI-Train=NO, use=immediate,").unwrap();
        assert_eq!(
            keys(&entries),
            vec![
                ("search", &PreferenceValue::Yes),
                ("ai-train", &PreferenceValue::No),
                ("use", &PreferenceValue::Other("immediate".into())),
            ]
        );
        assert!(parse_content_signal("ai-train").is_none());
        assert!(parse_content_signal("=no").is_none());
        assert!(parse_content_signal("ai train=no").is_none());
        assert!(parse_content_signal("").is_none());
    }

    #[test]
    fn content_usage_dictionary_and_path() {
        let (path, entries) = parse_content_usage("train-ai=n, search=y").unwrap();
        assert_eq!(path, None);
        assert_eq!(
            keys(&entries),
            vec![
                ("train-ai", &PreferenceValue::No),
                ("search", &PreferenceValue::Yes)
            ]
        );
        let (path, entries) = parse_content_usage("/blog/ train-ai=y;x=1, foo=\"a b\"").unwrap();
        assert_eq!(path, Some("/blog/"));
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].value, PreferenceValue::Other("\"a b\"".into()));
        for malformed in [
            "train-ai=n,",
            "Train-AI=n",
            "/blog/",
            "/blog/train-ai=n",
            "train-ai=n search=y",
            "train-ai=(n)",
            "",
        ] {
            assert!(
                parse_content_usage(malformed).is_none(),
                "{malformed:?} should be malformed"
            );
        }
        let (_, entries) = parse_content_usage("train-ai=y, train-ai=n").unwrap();
        assert_eq!(keys(&entries), vec![("train-ai", &PreferenceValue::No)]);
    }

    #[test]
    fn content_usage_header_values() {
        let entries = parse_content_usage_header("train-ai=n, search=y").unwrap();
        assert_eq!(content_usage_says(&entries, Use::TrainAi), Some(false));
        assert_eq!(content_usage_says(&entries, Use::Search), Some(true));
        assert_eq!(content_usage_says(&entries, Use::AiInput), None);
        // A path belongs to robots.txt lines only; a quoted `n` is a string, not a preference.
        assert!(parse_content_usage_header("/blog/ train-ai=n").is_none());
        let quoted = parse_content_usage_header("train-ai=\"n\"").unwrap();
        assert_eq!(content_usage_says(&quoted, Use::TrainAi), None);
        // Upper case is not a Structured Fields key: the value is malformed.
        assert!(parse_content_usage_header("Train-AI=n").is_none());
        let many = vec!["a=1"; MAX_HEADER_MEMBERS + 1].join(", ");
        assert!(parse_content_usage_header(&many).is_none());
        let long = format!("train-ai=n, x=\"{}\"", "a".repeat(8192));
        let entries = parse_content_usage_header(&long).unwrap();
        assert_eq!(content_usage_says(&entries, Use::TrainAi), Some(false));
    }

    #[test]
    fn license_urls() {
        assert!(is_absolute_http_url("https://example.com/license.xml"));
        assert!(is_absolute_http_url("HTTP://example.com/l"));
        assert!(!is_absolute_http_url("/license.xml"));
        assert!(!is_absolute_http_url("https:///x"));
        assert!(!is_absolute_http_url("ftp://example.com/l"));
    }
}
