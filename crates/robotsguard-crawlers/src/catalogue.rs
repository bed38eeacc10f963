//! The crawler catalogue: validated crawler definitions plus one automaton that finds the catalogue entry a User-Agent names.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::fmt;

use aho_corasick::{AhoCorasick, MatchKind};
use serde::{Deserialize, Serialize};

use super::category::Category;
use super::purpose::{is_group_token, Purpose, PurposeControls, Purposes};
use super::words::{bounded_whole_words, is_whole_word, MAX_NAMES_CONSIDERED};

/// The built-in catalogue, compiled into the binary.
pub const BUILTIN_YAML: &str = include_str!("../crawlers.yaml");

/// Shortest accepted pattern. Shorter literals would match unrelated words in ordinary
/// User-Agents far too easily.
pub const MIN_PATTERN_LEN: usize = 3;

/// The metric label every non-catalogue identity shares; no catalogue entry may take it.
pub const OTHER_LABEL: &str = "other";

/// One known crawler, as written in `crates/robotsguard-crawlers/crawlers.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrawlerDef {
    /// Display and metric name (`Googlebot-Image`).
    pub name: String,
    /// robots.txt product tokens, lower-case, most specific first.
    pub tokens: Vec<String>,
    /// Literal User-Agent substring, matched ASCII case-insensitively as a whole word.
    pub pattern: String,
    /// What the crawler fetches for (search, AI training, ...).
    pub category: Category,
    /// Who runs it.
    #[serde(default)]
    pub operator: String,
    /// The crawler skips the `User-agent: *` group; only a group naming it applies.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ignores_global: bool,
    /// How a request claiming to be this crawler is checked; none: it cannot be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<VerifyData>,
    /// What its fetches are for; empty: derived from the category ([`CrawlerDef::purposes`]).
    /// The built-in catalogue lists them in its `purposes` table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub purposes: Vec<Purpose>,
    /// Per purpose, the robots.txt token its operator names for refusing that use without
    /// refusing the crawler (`{training: Google-Extended}`). The built-in catalogue lists them
    /// in its `controls` table.
    #[serde(default, skip_serializing_if = "PurposeControls::is_empty")]
    pub controls: PurposeControls,
    /// Its operator documents that it ignores robots.txt's `Crawl-delay`: a `429` would slow
    /// its whole crawl of the site, so the delay is reported rather than enforced by default.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ignores_crawl_delay: bool,
    /// Web Bot Auth signature agents (`https://` origins, the `Signature-Agent` value) whose
    /// valid signatures identify this crawler.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signing_agents: Vec<String>,
    /// Where the entry's facts come from: the operator's page (an https URL).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// In a `robotsguard`-format feed: the entry replaces the built-in one of the same name
    /// (without it, the built-in entry wins).
    #[serde(default, skip_serializing_if = "is_false")]
    pub replace: bool,
    /// The feed the entry came from (its `url` as configured); none: built in or `extra`.
    /// Set when feeds are merged, never read from a file.
    #[serde(skip)]
    pub feed: Option<String>,
}

/// How a published IP range list is read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum ListFormat {
    /// Recognised by its shape: the operators' JSON (`prefixes` of `ipv4Prefix`, `ipv6Prefix`
    /// or `ip_prefix`), JAFAR (per-prefix `services` honoured), that JSON inside an HTML page,
    /// a JSON array, or one address or network a line.
    #[default]
    Auto,
    /// JAFAR (`application/jafar+json`): a prefix with `services` vouches only for the
    /// crawlers it names.
    Jafar,
    /// A JSON pointer (RFC 6901) whose `*` segments walk every element of an array or value of
    /// an object: `/prefixes/*/ip_prefix`. Each string reached is an address or network.
    JsonPointer(String),
    /// A regular expression with one capture group, run over the body as text (a list inside
    /// an HTML page): each capture is an address or network.
    Regex(String),
}

impl ListFormat {
    /// Whether it is the default (recognised by shape).
    pub fn is_auto(&self) -> bool {
        matches!(self, ListFormat::Auto)
    }
}

impl CrawlerDef {
    /// What its fetches are for: the listed purposes, else those of its category.
    pub fn purposes(&self) -> Purposes {
        if self.purposes.is_empty() {
            Purposes::from_category(self.category)
        } else {
            Purposes::of(&self.purposes)
        }
    }
}

/// Where a crawler's operator publishes who its crawler is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "RawVerifyData")]
pub struct VerifyData {
    /// IP range lists: `http(s)://` URLs, or `file:` followed by an absolute path. In a file
    /// an item may also be `{url: ..., format: ...}` (see `formats`).
    #[serde(default)]
    pub ips: Vec<String>,
    /// Reverse DNS suffixes (lower case, no leading dot): a forward-confirmed name of the
    /// client's address must end in one of them on a label boundary.
    #[serde(default)]
    pub rdns: Vec<String>,
    /// How a list of `ips` is read when not by its shape: the list's entry and its format.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub formats: Vec<(String, ListFormat)>,
}

impl VerifyData {
    /// How the list `entry` is read.
    pub fn format_of(&self, entry: &str) -> ListFormat {
        self.formats
            .iter()
            .find(|(list, _)| list == entry)
            .map_or(ListFormat::Auto, |(_, format)| format.clone())
    }
}

/// An `ips` item as written: a URL, or a URL with its format.
#[derive(Deserialize)]
#[serde(untagged)]
enum IpsItem {
    Url(String),
    WithFormat(ListWithFormat),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListWithFormat {
    url: String,
    #[serde(default)]
    format: ListFormat,
}

/// `verify` as written in a catalogue file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVerifyData {
    #[serde(default)]
    ips: Vec<IpsItem>,
    #[serde(default)]
    rdns: Vec<String>,
    #[serde(default)]
    formats: Vec<(String, ListFormat)>,
}

impl From<RawVerifyData> for VerifyData {
    fn from(raw: RawVerifyData) -> VerifyData {
        let mut out = VerifyData {
            ips: Vec::with_capacity(raw.ips.len()),
            rdns: raw.rdns,
            formats: raw.formats,
        };
        for item in raw.ips {
            match item {
                IpsItem::Url(url) => out.ips.push(url),
                IpsItem::WithFormat(ListWithFormat { url, format }) => {
                    if !format.is_auto() {
                        out.formats.push((url.clone(), format));
                    }
                    out.ips.push(url);
                }
            }
        }
        out
    }
}

/// What a decision reports of a crawler (its name, metric label, category and tokens), made
/// once per catalogue entry so that a request names its crawler with one reference count, not
/// fresh copies of its strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CrawlerInfo {
    /// The crawler's name.
    pub name: String,
    /// Bounded metric label: the catalogue name, else `other`.
    pub label: String,
    /// Its category.
    pub category: Category,
    /// robots.txt tokens, most specific first.
    pub tokens: Vec<String>,
    /// How its claims are checked, when its operator publishes that.
    #[serde(skip)]
    pub verify: Option<VerifyData>,
    /// The feed its catalogue entry came from; none: built in or `extra`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feed: Option<String>,
    /// What its fetches are for.
    pub purposes: Purposes,
    /// The robots.txt tokens that control some of its purposes.
    #[serde(skip_serializing_if = "PurposeControls::is_empty")]
    pub controls: PurposeControls,
    /// It ignores `Crawl-delay` (documented by its operator).
    pub ignores_crawl_delay: bool,
    /// Signature agents whose valid signatures identify it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub signing_agents: Vec<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The top level of a catalogue file; a mapping so that the format can grow.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogueFile {
    crawlers: Vec<CrawlerDef>,
    /// Purposes by crawler name, for entries that list none of their own.
    #[serde(default)]
    purposes: std::collections::BTreeMap<String, Vec<Purpose>>,
    /// Names of crawlers documented to ignore `Crawl-delay`.
    #[serde(default)]
    ignores_crawl_delay: Vec<String>,
    /// Purpose control tokens by crawler name, for entries that name none of their own.
    #[serde(default)]
    controls: std::collections::BTreeMap<String, PurposeControls>,
}

/// Why a catalogue could not be loaded or built. The parser's and the automaton builder's
/// errors are kept whole ([`std::error::Error::source`]); the message includes them too.
#[derive(Debug)]
#[non_exhaustive]
pub enum CatalogueError {
    /// The YAML did not parse into catalogue entries.
    Parse(Box<serde_saphyr::Error>),
    /// Entry `index` (0-based) breaks a rule.
    Invalid {
        /// The entry's position.
        index: usize,
        /// The entry's name.
        name: String,
        /// The rule it breaks.
        reason: String,
    },
    /// Two entries share a name (compared case-insensitively).
    DuplicateName {
        /// The shared name.
        name: String,
        /// Index of the first entry with it.
        first: usize,
        /// Index of the second.
        second: usize,
    },
    /// Two entries share a pattern (compared case-insensitively); the later could never win.
    DuplicatePattern {
        /// The shared pattern.
        pattern: String,
        /// Name of the first entry with it.
        first: String,
        /// Name of the second.
        second: String,
    },
    /// The matching automaton could not be built (size limits).
    Automaton(aho_corasick::BuildError),
}

impl fmt::Display for CatalogueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CatalogueError::Parse(e) => write!(f, "crawler catalogue does not parse: {e}"),
            CatalogueError::Invalid {
                index,
                name,
                reason,
            } => write!(f, "crawler entry #{} ({name:?}): {reason}", index + 1),
            CatalogueError::DuplicateName {
                name,
                first,
                second,
            } => write!(
                f,
                "crawler name {name:?} is used by entries #{} and #{}",
                first + 1,
                second + 1
            ),
            CatalogueError::DuplicatePattern {
                pattern,
                first,
                second,
            } => write!(
                f,
                "crawler pattern {pattern:?} is used by both {first:?} and {second:?}"
            ),
            CatalogueError::Automaton(e) => {
                write!(f, "crawler patterns could not be compiled: {e}")
            }
        }
    }
}

impl std::error::Error for CatalogueError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CatalogueError::Parse(e) => Some(e.as_ref()),
            CatalogueError::Automaton(e) => Some(e),
            _ => None,
        }
    }
}

/// Parse a catalogue file (`crawlers: [...]`) without validating it; [`Catalogue::new`]
/// validates.
pub fn parse_catalogue_yaml(text: &str) -> Result<Vec<CrawlerDef>, CatalogueError> {
    let file = serde_saphyr::from_str::<CatalogueFile>(text)
        .map_err(|e| CatalogueError::Parse(Box::new(e)))?;
    let mut defs = file.crawlers;
    for def in &mut defs {
        if def.purposes.is_empty() {
            if let Some((_, purposes)) = file
                .purposes
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(&def.name))
            {
                def.purposes = purposes.clone();
            }
        }
        if file
            .ignores_crawl_delay
            .iter()
            .any(|name| name.eq_ignore_ascii_case(&def.name))
        {
            def.ignores_crawl_delay = true;
        }
        if def.controls.is_empty() {
            if let Some((_, controls)) = file
                .controls
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(&def.name))
            {
                def.controls = controls.clone();
            }
        }
    }
    Ok(defs)
}

/// The entries of the built-in catalogue. A unit test proves this is `Ok`; callers still get
/// a `Result` so that a broken edit surfaces as a config error, never a panic.
pub fn builtin_defs() -> Result<Vec<CrawlerDef>, CatalogueError> {
    parse_catalogue_yaml(BUILTIN_YAML)
}

/// The most captures (or pointer matches) a list read with a `regex` or `json_pointer` format
/// may yield; more is refused as a broken list, not cut short.
pub const MAX_FORMAT_MATCHES: usize = 100_000;

message_error! {
    /// Why a range list's `format` is unusable, in one line as a config error is.
    FormatError
}

/// Whether a list format is usable: a pointer starts with `/`; a regex compiles (within a
/// size limit) and has exactly one capture group.
pub fn check_format(format: &ListFormat) -> Result<(), FormatError> {
    check_format_text(format).map_err(FormatError)
}

/// [`check_format`], its error as text.
fn check_format_text(format: &ListFormat) -> Result<(), String> {
    match format {
        ListFormat::Auto | ListFormat::Jafar => Ok(()),
        ListFormat::JsonPointer(pointer) => {
            if pointer.starts_with('/') {
                Ok(())
            } else {
                Err(format!("json_pointer {pointer:?} does not start with `/`"))
            }
        }
        ListFormat::Regex(pattern) => {
            let regex = compile_format_regex_text(pattern)?;
            if regex.captures_len() == 2 {
                Ok(())
            } else {
                Err(format!(
                    "regex {pattern:?} has {} capture groups; it needs exactly one",
                    regex.captures_len() - 1
                ))
            }
        }
    }
}

/// Compiles a list's `regex` with a size limit (it comes from a config or a feed). The error is
/// one line, as a config error is (`regex "IP: ([0-9" does not compile: unclosed character
/// class, at character 6`).
pub fn compile_format_regex(pattern: &str) -> Result<regex::Regex, FormatError> {
    compile_format_regex_text(pattern).map_err(FormatError)
}

/// [`compile_format_regex`], its error as text.
fn compile_format_regex_text(pattern: &str) -> Result<regex::Regex, String> {
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| format!("regex {pattern:?} does not compile: {}", regex_error(&e)))
}

/// The regex crate's error in one line. A syntax error is several: `regex parse error:`, the
/// pattern, a line of spaces and carets under the fault, then `error: what`; what is said, and
/// where (the first caret's character within the pattern, counted from 1).
fn regex_error(error: &regex::Error) -> String {
    let text = error.to_string();
    let lines: Vec<&str> = text.lines().collect();
    let Some(what) = lines
        .iter()
        .rev()
        .find_map(|line| line.trim_start().strip_prefix("error: "))
    else {
        return lines
            .iter()
            .map(|line| line.trim())
            .filter(|line| !line.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
    };
    // The pattern line and the carets under it share their indent (the pattern may itself
    // span lines: the caret line is the one made of spaces and carets only).
    let at = lines
        .windows(2)
        .find(|pair| {
            let carets = pair[1].trim();
            !carets.is_empty() && carets.chars().all(|c| c == '^')
        })
        .and_then(|pair| {
            let indent = pair[0].len() - pair[0].trim_start().len();
            let caret = pair[1].find('^')?;
            Some(pair[1][indent.min(caret)..caret].chars().count() + 1)
        });
    match at {
        Some(column) => format!("{what}, at character {column}"),
        None => what.to_string(),
    }
}

/// An immutable, validated set of crawler definitions with one Aho-Corasick automaton over
/// all their patterns. Built once at config load; shared by every request.
#[derive(Debug, Clone)]
pub struct Catalogue {
    defs: Vec<CrawlerDef>,
    /// Entry `i`'s [`CrawlerInfo`].
    infos: Vec<std::sync::Arc<CrawlerInfo>>,
    /// Pattern `i` of the automaton is `defs[i].pattern`.
    automaton: AhoCorasick,
}

impl Catalogue {
    /// The built-in catalogue, validated and compiled.
    pub fn builtin() -> Result<Catalogue, CatalogueError> {
        Catalogue::new(builtin_defs()?)
    }

    /// Validate `defs` and compile their patterns. Rules: names non-empty, trimmed, free of
    /// control characters, unique (case-insensitively) and not `other` (the shared metric
    /// label of non-catalogue crawlers); at least one token per entry, each lower-case,
    /// trimmed, without control characters, `#` or the `*` wildcard, and not repeated;
    /// patterns printable ASCII, trimmed, at least [`MIN_PATTERN_LEN`] bytes and unique
    /// (case-insensitively).
    pub fn new(defs: Vec<CrawlerDef>) -> Result<Catalogue, CatalogueError> {
        let mut names: HashMap<String, usize> = HashMap::with_capacity(defs.len());
        let mut patterns: HashMap<String, usize> = HashMap::with_capacity(defs.len());
        for (index, def) in defs.iter().enumerate() {
            validate(index, def)?;
            if let Some(&first) = names.get(&def.name.to_ascii_lowercase()) {
                return Err(CatalogueError::DuplicateName {
                    name: def.name.clone(),
                    first,
                    second: index,
                });
            }
            names.insert(def.name.to_ascii_lowercase(), index);
            if let Some(&first) = patterns.get(&def.pattern.to_ascii_lowercase()) {
                return Err(CatalogueError::DuplicatePattern {
                    pattern: def.pattern.clone(),
                    first: defs[first].name.clone(),
                    second: def.name.clone(),
                });
            }
            patterns.insert(def.pattern.to_ascii_lowercase(), index);
        }
        // Standard semantics so the search can report every overlapping match: the ranking in
        // `find` needs all of them, not the automaton's own leftmost pick.
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(defs.iter().map(|d| d.pattern.as_str()))
            .map_err(CatalogueError::Automaton)?;
        let infos = defs
            .iter()
            .map(|def| {
                std::sync::Arc::new(CrawlerInfo {
                    name: def.name.clone(),
                    label: def.name.clone(),
                    category: def.category,
                    tokens: def.tokens.clone(),
                    verify: def.verify.clone(),
                    feed: def.feed.clone(),
                    purposes: def.purposes(),
                    controls: def.controls.clone(),
                    ignores_crawl_delay: def.ignores_crawl_delay,
                    signing_agents: def.signing_agents.clone(),
                })
            })
            .collect();
        Ok(Catalogue {
            defs,
            infos,
            automaton,
        })
    }

    /// Entry `index`'s [`CrawlerInfo`].
    pub fn info(&self, index: usize) -> Option<&std::sync::Arc<CrawlerInfo>> {
        self.infos.get(index)
    }

    /// All entries, in catalogue order.
    pub fn defs(&self) -> &[CrawlerDef] {
        &self.defs
    }

    /// How many entries.
    pub fn len(&self) -> usize {
        self.defs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }

    /// The entry called `name` (case-insensitive), for config that refers to crawlers by name.
    pub fn get(&self, name: &str) -> Option<&CrawlerDef> {
        self.defs.iter().find(|d| d.name.eq_ignore_ascii_case(name))
    }

    /// The catalogue entry `user_agent` names, if any.
    ///
    /// Every whole-word match of every pattern is considered (one overlapping pass), and the
    /// best is chosen by, in order:
    /// 1. a non-`library` entry beats a `library` entry: a crawler built on a library names
    ///    both (`LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient ...)`), and who
    ///    is crawling matters more than with what;
    /// 2. the leftmost match: a UA names itself before what it is "like"
    ///    (`TelegramBot (like TwitterBot)`, `Feedly/1.0 (...; like FeedFetcher-Google)`);
    /// 3. the longest match: at one position the longer pattern is the more specific crawler
    ///    (`Googlebot-Image` over `Googlebot`), which also makes the longest of any set of
    ///    overlapping matches win;
    /// 4. the earliest catalogue entry.
    pub fn find(&self, user_agent: &[u8]) -> Option<&CrawlerDef> {
        self.find_index(user_agent)
            .and_then(|index| self.defs.get(index))
    }

    /// [`Catalogue::find`], as the entry's index in [`Catalogue::defs`].
    pub fn find_index(&self, user_agent: &[u8]) -> Option<usize> {
        let matches = self.automaton.try_find_overlapping_iter(user_agent).ok()?;
        let mut best: Option<(bool, usize, Reverse<usize>, usize)> = None;
        for m in matches {
            if !is_whole_word(user_agent, m.start(), m.end()) {
                continue;
            }
            let index = m.pattern().as_usize();
            let Some(def) = self.defs.get(index) else {
                continue;
            };
            let key = (
                def.category == Category::Library,
                m.start(),
                Reverse(m.len()),
                index,
            );
            if best.is_none_or(|b| key < b) {
                best = Some(key);
            }
        }
        best.map(|(_, _, _, index)| index)
    }

    /// Every catalogue entry `user_agent` names, best first (the order of [`Catalogue::find`]),
    /// each with the span of its match. A match inside a longer match of another entry is part
    /// of that name, not a name of its own (`Googlebot` in `Googlebot-Image/1.0`); an entry
    /// named twice is listed once.
    pub fn find_all(&self, user_agent: &[u8]) -> Vec<NamedEntry> {
        let Ok(matches) = self.automaton.try_find_overlapping_iter(user_agent) else {
            return Vec::new();
        };
        let mut found: Vec<NamedEntry> = bounded_whole_words(user_agent, matches)
            .into_iter()
            .filter(|&(index, _, _)| index < self.defs.len())
            .map(|(index, start, end)| NamedEntry { index, start, end })
            .collect();
        // Quadratic in the number of matches, which `bounded_whole_words` caps.
        let spans: Vec<(usize, usize)> = found.iter().map(|e| (e.start, e.end)).collect();
        found.retain(|e| {
            !spans.iter().any(|&(start, end)| {
                start <= e.start && e.end <= end && (end - start) > (e.end - e.start)
            })
        });
        found.sort_by_key(|e| {
            let library = self.defs[e.index].category == Category::Library;
            (library, e.start, Reverse(e.end - e.start), e.index)
        });
        let mut seen = Vec::with_capacity(found.len());
        found.retain(|e| {
            let first = !seen.contains(&e.index);
            seen.push(e.index);
            first
        });
        found.truncate(MAX_NAMES_CONSIDERED);
        found
    }
}

/// A catalogue entry named in a User-Agent, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamedEntry {
    /// The entry's index in [`Catalogue::defs`].
    pub index: usize,
    /// `user_agent[start..end]` is the match.
    pub start: usize,
    /// See `start`.
    pub end: usize,
}

/// Checks one entry against the rules of [`Catalogue::new`] that concern it alone.
pub(crate) fn validate_entry(index: usize, def: &CrawlerDef) -> Result<(), CatalogueError> {
    validate(index, def)
}

fn validate(index: usize, def: &CrawlerDef) -> Result<(), CatalogueError> {
    let invalid = |reason: String| CatalogueError::Invalid {
        index,
        name: def.name.clone(),
        reason,
    };
    if def.name.trim().is_empty() {
        return Err(invalid("name is empty".into()));
    }
    if def.name.trim() != def.name || def.name.chars().any(char::is_control) {
        return Err(invalid(
            "name has surrounding whitespace or control characters".into(),
        ));
    }
    if def.name.eq_ignore_ascii_case(OTHER_LABEL) {
        return Err(invalid(format!(
            "name {OTHER_LABEL:?} is reserved for crawlers outside the catalogue"
        )));
    }
    if def.tokens.is_empty() {
        return Err(invalid("tokens is empty".into()));
    }
    for (i, token) in def.tokens.iter().enumerate() {
        if token.is_empty() || token.trim() != token {
            return Err(invalid(format!(
                "token {token:?} is empty or has surrounding whitespace"
            )));
        }
        if token.chars().any(char::is_uppercase) {
            return Err(invalid(format!("token {token:?} is not lower-case")));
        }
        if token == "*" || token.contains('#') || token.chars().any(char::is_control) {
            return Err(invalid(format!(
                "token {token:?} is not a product token (`*`, `#` or control characters)"
            )));
        }
        if def.tokens[..i].contains(token) {
            return Err(invalid(format!("token {token:?} is listed twice")));
        }
    }
    if def.pattern.trim() != def.pattern
        || !def
            .pattern
            .bytes()
            .all(|b| b.is_ascii_graphic() || b == b' ')
    {
        return Err(invalid(format!(
            "pattern {:?} must be printable ASCII without surrounding whitespace",
            def.pattern
        )));
    }
    if def.pattern.len() < MIN_PATTERN_LEN {
        return Err(invalid(format!(
            "pattern {:?} is shorter than {MIN_PATTERN_LEN} characters",
            def.pattern
        )));
    }
    if def.operator.chars().any(char::is_control) {
        return Err(invalid("operator has control characters".into()));
    }
    for agent in &def.signing_agents {
        if !agent.starts_with("https://") || agent.chars().any(|c| c.is_control() || c == ' ') {
            return Err(invalid(format!(
                "signing agent {agent:?} is not an https:// URL"
            )));
        }
    }
    let purposes = def.purposes();
    for (purpose, token) in def.controls.iter() {
        if !is_group_token(token) {
            return Err(invalid(format!(
                "control token {token:?} for {purpose} is not a robots.txt group name (letters, \
                 `-` and `_` only)"
            )));
        }
        if !purposes.contains(purpose) {
            return Err(invalid(format!(
                "control token {token:?} is for {purpose}, which is not one of its purposes"
            )));
        }
        if def.tokens.iter().any(|own| own.eq_ignore_ascii_case(token)) {
            return Err(invalid(format!(
                "control token {token:?} is one of its own tokens: a group for it would refuse \
                 the crawler itself"
            )));
        }
    }
    if !def.source.is_empty() && !def.source.starts_with("https://") {
        return Err(invalid(format!(
            "source {:?} is not an https:// URL",
            def.source
        )));
    }
    if let Some(verify) = &def.verify {
        for (list, format) in &verify.formats {
            check_format(format).map_err(|e| invalid(format!("verify list {list:?}: {e}")))?;
        }
        if verify.ips.is_empty() && verify.rdns.is_empty() {
            return Err(invalid("verify names no ips and no rdns".into()));
        }
        for list in &verify.ips {
            let absolute_file = list
                .strip_prefix("file:")
                .is_some_and(|p| p.starts_with('/'));
            if !(list.starts_with("https://") || list.starts_with("http://") || absolute_file) {
                return Err(invalid(format!(
                    "verify list {list:?} is neither an http(s) URL nor file: and an absolute path"
                )));
            }
        }
        for suffix in &verify.rdns {
            let labels_ok = suffix.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            });
            if !labels_ok || !suffix.contains('.') {
                return Err(invalid(format!(
                    "verify rdns {suffix:?} is not a lower-case domain of two labels or more"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_verification_data_is_well_formed() {
        let defs = builtin_defs().unwrap_or_default();
        let verifiable: Vec<&CrawlerDef> = defs.iter().filter(|d| d.verify.is_some()).collect();
        // Every operator in the catalogue that publishes lists or reverse DNS domains.
        for name in [
            "Googlebot",
            "AdsBot-Google",
            "FeedFetcher-Google",
            "bingbot",
            "GPTBot",
            "OAI-SearchBot",
            "ChatGPT-User",
            "ClaudeBot",
            "PerplexityBot",
            "Applebot",
            "DuckDuckBot",
            "CCBot",
            "Amazonbot",
            "MistralAI-User",
            "YandexBot",
        ] {
            assert!(
                verifiable.iter().any(|d| d.name == name),
                "{name} has no verify data"
            );
        }
        for def in verifiable {
            let verify = def
                .verify
                .as_ref()
                .map_or((0, 0), |v| (v.ips.len(), v.rdns.len()));
            assert!(verify.0 + verify.1 > 0, "{}", def.name);
            for list in &def.verify.as_ref().map_or(vec![], |v| v.ips.clone()) {
                assert!(list.starts_with("https://"), "{}: {list}", def.name);
            }
        }
        let mut bad = def("X", &["x"], "XBot", Category::Other);
        bad.verify = Some(VerifyData {
            ips: vec!["ftp://x".into()],
            rdns: vec![],
            ..Default::default()
        });
        assert!(validate(0, &bad).is_err());
        bad.verify = Some(VerifyData {
            ips: vec![],
            rdns: vec!["Example.com".into()],
            ..Default::default()
        });
        assert!(validate(0, &bad).is_err());
        bad.verify = Some(VerifyData {
            ips: vec!["file:/etc/l.json".into()],
            rdns: vec!["crawl.example.com".into()],
            ..Default::default()
        });
        assert!(validate(0, &bad).is_ok());
    }

    #[test]
    fn every_list_is_https_and_every_entry_has_a_source() {
        let defs = builtin_defs().unwrap_or_default();
        assert!(!defs.is_empty());
        for def in &defs {
            let verify = def.verify.clone().unwrap_or_default();
            for list in &verify.ips {
                assert!(list.starts_with("https://"), "{}: {list}", def.name);
            }
            for agent in &def.signing_agents {
                assert!(agent.starts_with("https://"), "{}: {agent}", def.name);
            }
            // Every built-in fact says where it comes from (the release note lists them), not
            // only what an entry vouches for; a bare scheme or a space is no page.
            let host = def.source.strip_prefix("https://").unwrap_or_default();
            assert!(
                host.split('/').next().is_some_and(|h| h.contains('.'))
                    && !def.source.contains(char::is_whitespace),
                "{} has no https source: {:?}",
                def.name,
                def.source
            );
        }
        // Added or updated in the 2026 refresh, each with its source.
        let get = |name: &str| defs.iter().find(|d| d.name == name);
        for (name, list) in [
            (
                "Google-Agent",
                "https://developers.google.com/static/crawling/ipranges/user-triggered-agents.json",
            ),
            (
                "Googlebot",
                "https://developers.google.com/static/crawling/ipranges/user-triggered-agents.json",
            ),
            ("OAI-AdsBot", "https://openai.com/adsbot.json"),
            ("Claude-SearchBot", "https://claude.com/crawling/bots.json"),
            ("Claude-User", "https://claude.com/crawling/bots.json"),
            (
                "MistralAI-Index",
                "https://mistral.ai/mistralai-index-ips.json",
            ),
        ] {
            let verify = get(name).and_then(|d| d.verify.clone()).unwrap_or_default();
            assert!(verify.ips.iter().any(|l| l == list), "{name} lacks {list}");
        }
        for name in ["meta-webindexer", "MistralAI-Training"] {
            assert!(
                get(name).is_some_and(|d| d.source.starts_with("https://")),
                "{name}"
            );
        }
        assert_eq!(
            get("Google-Agent").map(|d| d.signing_agents.clone()),
            Some(vec!["https://agent.bot.goog".to_string()])
        );
        // No list under Google's pre-2026 path.
        assert!(!defs.iter().any(|d| d.verify.as_ref().is_some_and(|v| v
            .ips
            .iter()
            .any(|l| l.contains("/static/search/apis/ipranges/")))));
    }

    fn def(name: &str, tokens: &[&str], pattern: &str, category: Category) -> CrawlerDef {
        CrawlerDef {
            name: name.into(),
            tokens: tokens.iter().map(|t| t.to_string()).collect(),
            pattern: pattern.into(),
            category,
            operator: String::new(),
            ignores_global: false,
            verify: None,
            purposes: Vec::new(),
            controls: PurposeControls::default(),
            ignores_crawl_delay: false,
            signing_agents: Vec::new(),
            source: String::new(),
            replace: false,
            feed: None,
        }
    }

    fn builtin() -> Catalogue {
        match Catalogue::builtin() {
            Ok(c) => c,
            Err(e) => panic!("built-in catalogue is broken: {e}"),
        }
    }

    fn found<'c>(c: &'c Catalogue, ua: &str) -> Option<&'c str> {
        c.find(ua.as_bytes()).map(|d| d.name.as_str())
    }

    #[test]
    fn builtin_parses_validates_and_is_large_enough() {
        let c = builtin();
        assert!(c.len() >= 110, "only {} entries", c.len());
    }

    #[test]
    fn builtin_uses_every_category() {
        let c = builtin();
        for category in Category::ALL {
            let n = c.defs().iter().filter(|d| d.category == category).count();
            assert!(n >= 1, "no {category} entry");
        }
        // Spot-check that categories were assigned with sense, not at random.
        let cat = |name: &str| c.get(name).map(|d| d.category);
        assert_eq!(cat("Googlebot"), Some(Category::Search));
        assert_eq!(cat("GPTBot"), Some(Category::AiTraining));
        assert_eq!(cat("OAI-SearchBot"), Some(Category::AiSearch));
        assert_eq!(cat("ChatGPT-User"), Some(Category::AiAssistant));
        assert_eq!(cat("AhrefsBot"), Some(Category::Seo));
        assert_eq!(cat("facebookexternalhit"), Some(Category::Social));
        assert_eq!(cat("archive.org_bot"), Some(Category::Archive));
        assert_eq!(cat("UptimeRobot"), Some(Category::Monitoring));
        assert_eq!(cat("curl"), Some(Category::Library));
    }

    #[test]
    fn builtin_names_unique_and_tokens_lower_case() {
        let c = builtin();
        let mut names: Vec<String> = c.defs().iter().map(|d| d.name.to_lowercase()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), c.len());
        for d in c.defs() {
            for t in &d.tokens {
                assert_eq!(t, &t.to_lowercase(), "{}", d.name);
            }
        }
    }

    #[test]
    fn every_builtin_entry_has_purposes_and_every_row_names_an_entry() {
        let file: CatalogueFile = serde_saphyr::from_str(BUILTIN_YAML).unwrap();
        let names: Vec<String> = file
            .crawlers
            .iter()
            .map(|d| d.name.to_ascii_lowercase())
            .collect();
        for def in &file.crawlers {
            let row = file
                .purposes
                .keys()
                .any(|name| name.eq_ignore_ascii_case(&def.name));
            assert!(row, "{} has no row in `purposes`", def.name);
        }
        for name in file
            .purposes
            .keys()
            .chain(&file.ignores_crawl_delay)
            .chain(file.controls.keys())
        {
            assert!(
                names.contains(&name.to_ascii_lowercase()),
                "{name} names no catalogue entry"
            );
        }
        let defs = builtin_defs().unwrap();
        let get = |name: &str| defs.iter().find(|d| d.name == name).unwrap();
        use super::super::purpose::Purpose::*;
        assert_eq!(get("Googlebot").purposes, vec![Search, Training]);
        assert_eq!(get("GPTBot").purposes, vec![Training]);
        assert_eq!(get("ChatGPT-User").purposes, vec![Agent]);
        assert_eq!(get("OAI-SearchBot").purposes, vec![Search]);
        assert!(get("Googlebot").ignores_crawl_delay);
        assert!(get("Applebot").ignores_crawl_delay);
        assert!(get("Amazonbot").ignores_crawl_delay);
        assert!(!get("bingbot").ignores_crawl_delay);
    }

    #[test]
    fn builtin_ignores_global_only_where_google_documents_it() {
        let c = builtin();
        let mut flagged: Vec<&str> = c
            .defs()
            .iter()
            .filter(|d| d.ignores_global)
            .map(|d| d.name.as_str())
            .collect();
        flagged.sort_unstable();
        assert_eq!(
            flagged,
            ["APIs-Google", "AdsBot-Google", "AdsBot-Google-Mobile"]
        );
    }

    #[test]
    fn a_regex_error_is_one_line_saying_what_and_where() {
        let error = compile_format_regex("IP: ([0-9")
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "regex \"IP: ([0-9\" does not compile: unclosed character class, at character 6"
        );
        assert!(!error.contains('\n'));
        let error = compile_format_regex("a{99999999}")
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(!error.contains('\n'), "{error}");
        assert!(
            error.starts_with("regex \"a{99999999}\" does not compile: "),
            "{error}"
        );
    }

    #[test]
    fn the_operators_control_tokens_are_where_they_document_them() {
        let c = builtin();
        let token = |name: &str| {
            c.get(name)
                .and_then(|d| d.controls.token(Purpose::Training))
                .map(str::to_string)
        };
        for google in [
            "Googlebot",
            "Googlebot-Image",
            "Googlebot-News",
            "Googlebot-Video",
            "Googlebot-Mobile",
        ] {
            assert_eq!(
                token(google).as_deref(),
                Some("Google-Extended"),
                "{google}"
            );
        }
        assert_eq!(token("Applebot").as_deref(), Some("Applebot-Extended"));
        // Microsoft names no robots.txt token for Bing's AI use (its controls are the pages'
        // `noarchive` / `nocache`): bingbot's search and training are one crawl.
        assert_eq!(token("bingbot"), None);
        // Every multi-purpose crawler that searches is either controlled or documented here.
        let searching_multi: Vec<&str> = c
            .defs()
            .iter()
            .filter(|d| {
                let purposes = d.purposes();
                purposes.contains(Purpose::Search) && purposes.iter().count() > 1
            })
            .filter(|d| d.controls.is_empty())
            .map(|d| d.name.as_str())
            .collect();
        assert_eq!(searching_multi, ["bingbot"]);
    }

    #[test]
    fn control_tokens_are_group_names_for_purposes_the_crawler_serves() {
        let mut bad = def("Bot", &["bot"], "SomeBot", Category::Search);
        bad.purposes = vec![Purpose::Search, Purpose::Training];
        bad.controls = PurposeControls::of([(Purpose::Agent, "Bot-Agent")]);
        let error = Catalogue::new(vec![bad.clone()]).map(|_| ()).unwrap_err();
        assert!(
            error.to_string().contains("not one of its purposes"),
            "{error}"
        );
        bad.controls = PurposeControls::of([(Purpose::Training, "Bot 2")]);
        let error = Catalogue::new(vec![bad.clone()]).map(|_| ()).unwrap_err();
        assert!(
            error.to_string().contains("not a robots.txt group name"),
            "{error}"
        );
        bad.controls = PurposeControls::of([(Purpose::Training, "BOT")]);
        let error = Catalogue::new(vec![bad.clone()]).map(|_| ()).unwrap_err();
        assert!(
            error.to_string().contains("one of its own tokens"),
            "{error}"
        );
        bad.controls = PurposeControls::of([(Purpose::Training, "Bot-Extended")]);
        assert!(Catalogue::new(vec![bad]).is_ok());
    }

    #[test]
    fn builtin_has_no_usage_only_tokens() {
        // Google-Extended / Applebot-Extended steer AI use of content; no crawler sends them,
        // and they must not be part of any crawler's token list.
        let c = builtin();
        for d in c.defs() {
            for t in &d.tokens {
                assert!(!t.ends_with("-extended"), "{} has token {t}", d.name);
            }
        }
    }

    #[test]
    fn every_builtin_entry_is_reachable() {
        // Each entry's own pattern, alone or inside a typical UA, must identify that entry and
        // not some other one: no entry is shadowed by another.
        let c = builtin();
        for d in c.defs() {
            assert_eq!(found(&c, &d.pattern), Some(d.name.as_str()));
            let wrapped = format!(
                "Mozilla/5.0 (compatible; {}/1.0; +https://example.com/info)",
                d.pattern
            );
            assert_eq!(found(&c, &wrapped), Some(d.name.as_str()), "{wrapped}");
            let lower = d.pattern.to_lowercase();
            assert_eq!(found(&c, &lower), Some(d.name.as_str()), "case: {lower}");
        }
    }

    #[test]
    fn whole_word_only() {
        let c = match Catalogue::new(vec![def("LCC", &["lcc"], "LCC", Category::Other)]) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(found(&c, "SLCC/1.0"), None);
        assert_eq!(found(&c, "LCCS/1.0"), None);
        assert_eq!(found(&c, "LCC2/1.0"), None, "digits join words");
        assert_eq!(found(&c, "x_LCC"), None, "underscore joins words");
        assert_eq!(found(&c, "Mozilla/5.0 (SLCC2; LCC)"), Some("LCC"));
        assert_eq!(
            found(&c, "lcc-agent/1.0"),
            Some("LCC"),
            "hyphen is a boundary"
        );
        assert_eq!(found(&c, "LCC"), Some("LCC"));
    }

    #[test]
    fn ranking() {
        let c = match Catalogue::new(vec![
            def("A", &["a"], "Googlebot", Category::Search),
            def("B", &["b"], "Googlebot-Image", Category::Search),
            def("Lib", &["lib"], "Apache-HttpClient", Category::Library),
            def("Li", &["li"], "LinkedInBot", Category::Social),
            def("Tg", &["tg"], "TelegramBot", Category::Social),
            def("Tw", &["tw"], "TwitterBot", Category::Social),
            def("Java", &["java"], "Java", Category::Library),
        ]) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        // Same start: longest.
        assert_eq!(found(&c, "Googlebot-Image/1.0"), Some("B"));
        assert_eq!(found(&c, "Googlebot-Mobile/2.1"), Some("A"));
        // Library loses even when longer and leftmost.
        assert_eq!(
            found(&c, "Apache-HttpClient/4.5 (LinkedInBot/1.0)"),
            Some("Li")
        );
        // Disjoint: leftmost.
        assert_eq!(found(&c, "TelegramBot (like TwitterBot)"), Some("Tg"));
        assert_eq!(found(&c, "TwitterBot (like TelegramBot)"), Some("Tw"));
        // Two libraries: leftmost.
        assert_eq!(
            found(&c, "Apache-HttpClient/4.5.13 (Java/17.0.1)"),
            Some("Lib")
        );
    }

    fn expect_invalid(defs: Vec<CrawlerDef>, needle: &str) {
        match Catalogue::new(defs) {
            Ok(_) => panic!("accepted; expected error containing {needle:?}"),
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
            }
        }
    }

    #[test]
    fn validation() {
        let ok = || def("FooBot", &["foobot"], "FooBot", Category::Other);
        expect_invalid(
            vec![def("", &["x"], "Foo", Category::Other)],
            "name is empty",
        );
        expect_invalid(
            vec![def(" Foo", &["x"], "Foo", Category::Other)],
            "whitespace",
        );
        expect_invalid(
            vec![def("Other", &["x"], "Foo", Category::Other)],
            "reserved",
        );
        expect_invalid(
            vec![def("Foo", &[], "Foo", Category::Other)],
            "tokens is empty",
        );
        expect_invalid(
            vec![def("Foo", &["Foo"], "Foo", Category::Other)],
            "lower-case",
        );
        expect_invalid(
            vec![def("Foo", &["*"], "Foo", Category::Other)],
            "product token",
        );
        expect_invalid(vec![def("Foo", &[""], "Foo", Category::Other)], "empty");
        expect_invalid(
            vec![def("Foo", &["a", "a"], "Foo", Category::Other)],
            "twice",
        );
        expect_invalid(vec![def("Foo", &["foo"], "Fo", Category::Other)], "shorter");
        expect_invalid(
            vec![def("Foo", &["foo"], " Foo", Category::Other)],
            "printable",
        );
        expect_invalid(
            vec![def("Foo", &["foo"], "Föö", Category::Other)],
            "printable",
        );
        let mut dup = ok();
        dup.name = "foobot".into();
        dup.pattern = "Other".into();
        expect_invalid(vec![ok(), dup], "is used by entries #1 and #2");
        let mut dup = ok();
        dup.name = "Another".into();
        dup.pattern = "FOOBOT".into();
        expect_invalid(vec![ok(), dup], "pattern");
        assert!(Catalogue::new(vec![ok()]).is_ok());
        assert!(Catalogue::new(Vec::new()).is_ok());
    }

    #[test]
    fn yaml_errors_are_reported_not_panicked() {
        let unknown =
            "crawlers:\n  - { name: A, tokens: [a], pattern: Aaa, category: other, colour: red }\n";
        assert!(matches!(
            parse_catalogue_yaml(unknown),
            Err(CatalogueError::Parse(_))
        ));
        let bad_category =
            "crawlers:\n  - { name: A, tokens: [a], pattern: Aaa, category: evil }\n";
        assert!(parse_catalogue_yaml(bad_category).is_err());
        assert!(parse_catalogue_yaml("crawlers: [").is_err());
        assert!(parse_catalogue_yaml("").is_err());
        let good = "crawlers:\n  - { name: A, tokens: [a], pattern: Aaa, category: ai-search, ignores_global: true }\n";
        match parse_catalogue_yaml(good) {
            Ok(defs) => {
                assert_eq!(defs.len(), 1);
                assert_eq!(defs[0].category, Category::AiSearch);
                assert!(defs[0].ignores_global);
                assert_eq!(defs[0].operator, "");
            }
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn hostile_input_does_not_panic() {
        let c = builtin();
        let mut ua = vec![0u8; 64 * 1024];
        assert_eq!(c.find(&ua), None);
        ua.extend_from_slice(b"\xff\xfe Googlebot/2.1 \x00");
        assert_eq!(c.find(&ua).map(|d| d.name.as_str()), Some("Googlebot"));
        let repeated = "bingbotbingbot ".repeat(5000);
        assert_eq!(found(&c, &repeated), None);
        let many = "curl/1 Googlebot ".repeat(4000);
        assert_eq!(found(&c, &many), Some("Googlebot"));
    }
}
