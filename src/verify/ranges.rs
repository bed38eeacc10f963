//! Published IP range lists: parsed into sorted, merged ranges that answer "is this address
//! in?" with a binary search, and kept fresh in the background like robots.txt (conditional
//! requests, backoff, the last good copy kept through failures and malformed answers).

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use arc_swap::ArcSwapOption;
use ipnet::IpNet;
use serde_json::Value;

use super::ListAnswer;
use crate::crawlers::{compile_format_regex, ListFormat, MAX_FORMAT_MATCHES};

/// The most prefixes one list may hold: operators' lists hold hundreds to a few thousand.
pub const MAX_PREFIXES: usize = 100_000;

/// The largest list body read (a list of 100,000 prefixes in the operators' JSON is ~4 MiB).
pub const MAX_LIST_BYTES: usize = 8 * 1024 * 1024;

/// Addresses in sorted, disjoint, inclusive integer ranges per family.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    v4: Vec<(u32, u32)>,
    v6: Vec<(u128, u128)>,
}

fn merge<T: Copy + Ord + Successor>(mut ranges: Vec<(T, T)>) -> Vec<(T, T)> {
    ranges.sort_unstable();
    let mut out: Vec<(T, T)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match out.last_mut() {
            // Overlapping or adjacent: one range.
            Some(last) if start <= last.1.successor() => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

/// The next integer, saturating (so `MAX` ranges merge with nothing after them).
trait Successor {
    fn successor(self) -> Self;
}

impl Successor for u32 {
    fn successor(self) -> Self {
        self.saturating_add(1)
    }
}

impl Successor for u128 {
    fn successor(self) -> Self {
        self.saturating_add(1)
    }
}

fn find<T: Copy + Ord>(ranges: &[(T, T)], value: T) -> bool {
    // The last range starting at or before `value` is the only one that can hold it.
    let after = ranges.partition_point(|(start, _)| *start <= value);
    after > 0 && ranges[after - 1].1 >= value
}

impl RangeSet {
    /// The set of addresses in `prefixes`.
    pub fn new(prefixes: impl IntoIterator<Item = IpNet>) -> RangeSet {
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for prefix in prefixes {
            match prefix {
                IpNet::V4(net) => v4.push((u32::from(net.network()), u32::from(net.broadcast()))),
                IpNet::V6(net) => v6.push((u128::from(net.network()), u128::from(net.broadcast()))),
            }
        }
        RangeSet {
            v4: merge(v4),
            v6: merge(v6),
        }
    }

    /// Whether `ip` is in the set; an IPv4-mapped IPv6 address is looked up as IPv4.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(v4) => find(&self.v4, u32::from(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => find(&self.v4, u32::from(v4)),
                None => find(&self.v6, u128::from(v6)),
            },
        }
    }

    /// Disjoint ranges held.
    pub fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }

    /// Whether no address is in the set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

message_error! {
    /// Why a range list was refused (none of it is used), in one line.
    RangeListError
}

/// Parses a range list: the operators' JSON (`{"prefixes": [{"ipv4Prefix": "…"},
/// {"ipv6Prefix": "…"}]}`, or with `ip_prefix`/`ipv6_prefix`), a JSON array of addresses and
/// networks, the same JSON inside an HTML page (Amazon's), or text with one address or network
/// per line (`#` comments). A bare address is one host. A list without a single prefix is an
/// error: a broken list must not replace a good one.
pub fn parse_list(body: &[u8]) -> Result<Vec<IpNet>, RangeListError> {
    parse_list_as(body, &ListFormat::Auto, None).map(|parsed| {
        let mut all = parsed.open;
        all.extend(parsed.for_services.into_iter().map(|(net, _)| net));
        all
    })
}

/// A list as read: the prefixes that vouch for every crawler naming the list, and (JAFAR) the
/// prefixes that vouch only for the services they name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedList {
    /// Prefixes without `services`.
    pub open: Vec<IpNet>,
    /// Prefixes with `services`, each with the names (lower case).
    pub for_services: Vec<(IpNet, Vec<String>)>,
}

impl ParsedList {
    /// Prefixes held, all told.
    pub fn len(&self) -> usize {
        self.open.len() + self.for_services.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The media type of JAFAR lists (draft-illyes-webbotauth-jafar).
pub const JAFAR_MEDIA_TYPE: &str = "application/jafar+json";

/// Parses a list in `format` ([`ListFormat::Auto`]: by its shape, see [`parse_list`]; a body
/// served as `application/jafar+json` is read as JAFAR). JAFAR and the shape-recognised JSON
/// honour a prefix's `services` (a string or a list of names): such a prefix vouches only for
/// the crawlers it names. A list without a single prefix is an error.
pub fn parse_list_as(
    body: &[u8],
    format: &ListFormat,
    content_type: Option<&str>,
) -> Result<ParsedList, RangeListError> {
    parse_text(body, format, content_type).map_err(RangeListError)
}

/// [`parse_list_as`], the reason in words.
fn parse_text(
    body: &[u8],
    format: &ListFormat,
    content_type: Option<&str>,
) -> Result<ParsedList, String> {
    let text = std::str::from_utf8(body).map_err(|e| format!("not UTF-8 text: {e}"))?;
    let text = text.trim_start_matches('\u{feff}').trim();
    if text.is_empty() {
        return Err("the list is empty".to_string());
    }
    let jafar_type = content_type.is_some_and(|t| {
        t.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case(JAFAR_MEDIA_TYPE))
    });
    let parsed = match format {
        ListFormat::JsonPointer(pointer) => {
            let value: Value =
                serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
            ParsedList {
                open: by_pointer(&value, pointer)?,
                for_services: Vec::new(),
            }
        }
        ListFormat::Regex(pattern) => ParsedList {
            open: by_regex(text, pattern)?,
            for_services: Vec::new(),
        },
        ListFormat::Jafar => {
            let value: Value =
                serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
            if !value.get("prefixes").is_some_and(Value::is_array) {
                return Err("a JAFAR list is an object with a `prefixes` array".to_string());
            }
            from_json(&value)?
        }
        ListFormat::Auto if jafar_type || text.starts_with('{') || text.starts_with('[') => {
            let value: Value =
                serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
            from_json(&value)?
        }
        ListFormat::Auto if text.starts_with('<') => {
            let value = json_in_page(text)
                .ok_or_else(|| "an HTML page without a JSON list of prefixes in it".to_string())?;
            from_json(&value)?
        }
        _ => ParsedList {
            open: from_lines(text)?,
            for_services: Vec::new(),
        },
    };
    if parsed.is_empty() {
        return Err("the list holds no prefixes".to_string());
    }
    Ok(parsed)
}

/// Every string `pointer` reaches in `value`, each an address or network. A `*` segment walks
/// every element of an array (or value of an object); `~1` and `~0` are `/` and `~`.
fn by_pointer(value: &Value, pointer: &str) -> Result<Vec<IpNet>, String> {
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(format!("json_pointer {pointer:?} does not start with `/`"));
    };
    let segments: Vec<String> = rest
        .split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect();
    let mut current: Vec<&Value> = vec![value];
    for segment in &segments {
        let mut next = Vec::new();
        for node in current {
            match (segment.as_str(), node) {
                ("*", Value::Array(items)) => next.extend(items.iter()),
                ("*", Value::Object(map)) => next.extend(map.values()),
                (key, Value::Object(map)) => next.extend(map.get(key)),
                (index, Value::Array(items)) => {
                    next.extend(index.parse::<usize>().ok().and_then(|i| items.get(i)));
                }
                _ => {}
            }
            if next.len() > MAX_FORMAT_MATCHES {
                return Err(format!(
                    "json_pointer reaches more than {MAX_FORMAT_MATCHES} values"
                ));
            }
        }
        current = next;
    }
    let mut out = Vec::with_capacity(current.len());
    for (index, node) in current.into_iter().enumerate() {
        match node {
            Value::String(text) => {
                out.push(prefix(text).map_err(|e| format!("value {index}: {e}"))?);
            }
            // A pointer may stop at an array of strings.
            Value::Array(items) => {
                for item in items {
                    let text = item
                        .as_str()
                        .ok_or_else(|| format!("value {index} holds a non-string"))?;
                    out.push(prefix(text).map_err(|e| format!("value {index}: {e}"))?);
                }
            }
            _ => return Err(format!("value {index} the pointer reaches is not a string")),
        }
        if out.len() > MAX_FORMAT_MATCHES {
            return Err(format!(
                "json_pointer reaches more than {MAX_FORMAT_MATCHES} values"
            ));
        }
    }
    Ok(out)
}

/// Each capture of `pattern`'s one group over `text`, as an address or network.
fn by_regex(text: &str, pattern: &str) -> Result<Vec<IpNet>, String> {
    let regex = compile_format_regex(pattern).map_err(|e| e.to_string())?;
    if regex.captures_len() != 2 {
        return Err(format!(
            "regex {pattern:?} must have exactly one capture group"
        ));
    }
    let mut out = Vec::new();
    for captures in regex.captures_iter(text) {
        let Some(found) = captures.get(1) else {
            continue;
        };
        if out.len() == MAX_FORMAT_MATCHES {
            return Err(format!(
                "the regex matches more than {MAX_FORMAT_MATCHES} times"
            ));
        }
        out.push(prefix(found.as_str())?);
    }
    Ok(out)
}

fn prefix(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    if let Ok(net) = text.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    text.parse::<IpAddr>()
        .map(IpNet::from)
        .map_err(|_| format!("`{}` is not an address or network", excerpt(text)))
}

/// The most bytes of a list's content an error quotes: enough to recognise a bad line, too few
/// to read a file through the errors a list fetched from it gives.
const EXCERPT_BYTES: usize = 24;

/// A bounded, escaped excerpt of `text` (a list's content): its first [`EXCERPT_BYTES`] bytes,
/// control and non-ASCII bytes written `\xNN`, so that it never breaks a log line.
fn excerpt(text: &str) -> String {
    let bytes = text.as_bytes();
    let shown = crate::logs::escape_client_text(&bytes[..bytes.len().min(EXCERPT_BYTES)]);
    if bytes.len() > EXCERPT_BYTES {
        format!("{shown}...")
    } else {
        shown
    }
}

fn from_json(value: &Value) -> Result<ParsedList, String> {
    let items = match value {
        Value::Object(map) => match map.get("prefixes") {
            Some(Value::Array(items)) => items,
            Some(_) => return Err("`prefixes` is not an array".to_string()),
            None => return Err("a JSON object without `prefixes`".to_string()),
        },
        Value::Array(items) => items,
        _ => return Err("neither a JSON object nor an array".to_string()),
    };
    if items.len() > MAX_PREFIXES {
        return Err(format!("more than {MAX_PREFIXES} prefixes"));
    }
    let mut out = ParsedList::default();
    for (index, item) in items.iter().enumerate() {
        let (text, services) = match item {
            Value::String(text) => (text.as_str(), None),
            Value::Object(entry) => (
                ["ipv4Prefix", "ipv6Prefix", "ip_prefix", "ipv6_prefix"]
                    .iter()
                    .find_map(|key| entry.get(*key).and_then(Value::as_str))
                    .ok_or_else(|| format!("prefix {index} has no ipv4Prefix or ipv6Prefix"))?,
                entry.get("services"),
            ),
            _ => return Err(format!("prefix {index} is neither a string nor an object")),
        };
        let net = prefix(text).map_err(|e| format!("prefix {index}: {e}"))?;
        let names: Vec<String> = match services {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(name)) => vec![name.trim().to_ascii_lowercase()],
            Some(Value::Array(names)) => names
                .iter()
                .map(|name| {
                    name.as_str()
                        .map(|n| n.trim().to_ascii_lowercase())
                        .ok_or_else(|| format!("prefix {index}: a service is not a string"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(format!("prefix {index}: `services` is not a list of names")),
        };
        if names.is_empty() {
            out.open.push(net);
        } else {
            out.for_services.push((net, names));
        }
    }
    Ok(out)
}

/// The JSON object holding `"prefixes"` inside an HTML page: from the `{` that opens it to its
/// matching `}` (strings and escapes respected).
fn json_in_page(text: &str) -> Option<Value> {
    let key = text.find("\"prefixes\"")?;
    let bytes = text.as_bytes();
    // Try each `{` before the key, nearest first, until one parses as an object holding it.
    let mut open = key;
    while let Some(start) = text[..open].rfind('{') {
        if let Some(end) = matching_brace(bytes, start) {
            if end > key {
                if let Ok(value @ Value::Object(_)) = serde_json::from_str(&text[start..=end]) {
                    if value.get("prefixes").is_some() {
                        return Some(value);
                    }
                }
            }
        }
        open = start;
    }
    None
}

fn matching_brace(bytes: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (offset, &byte) in bytes.get(start..)?.iter().enumerate() {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' => depth += 1,
            b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(start + offset);
                }
            }
            _ => {}
        }
    }
    None
}

fn from_lines(text: &str) -> Result<Vec<IpNet>, String> {
    let mut out = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if out.len() == MAX_PREFIXES {
            return Err(format!("more than {MAX_PREFIXES} prefixes"));
        }
        out.push(prefix(line).map_err(|e| format!("line {}: {e}", number + 1))?);
    }
    Ok(out)
}

/// Where a list comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ListSource {
    /// An `http(s)://` URL.
    Url(String),
    /// A local file (absolute path).
    File(PathBuf),
}

impl ListSource {
    /// A catalogue or config `ips` entry: a URL, or `file:` and an absolute path.
    pub fn from_entry(entry: &str) -> ListSource {
        match entry.strip_prefix("file:") {
            Some(path) => ListSource::File(PathBuf::from(path)),
            None => ListSource::Url(entry.to_string()),
        }
    }
}

/// One list's copy in force.
#[derive(Debug)]
pub struct ListCopy {
    /// Its addresses that vouch for every crawler naming the list.
    pub set: RangeSet,
    /// JAFAR: addresses that vouch only for the named services (lower case), by service.
    pub by_service: Vec<(String, RangeSet)>,
    /// Prefixes as published.
    pub prefixes: usize,
    /// Validators for conditional refreshes.
    pub etag: Option<String>,
    /// See `etag`.
    pub last_modified: Option<String>,
    /// When it was fetched or read, or confirmed by a 304.
    pub fetched_at: SystemTime,
}

impl ListCopy {
    /// A copy of `parsed`, with its validators.
    pub fn new(
        parsed: ParsedList,
        etag: Option<String>,
        last_modified: Option<String>,
    ) -> ListCopy {
        let prefixes = parsed.len();
        let mut by_service: HashMap<String, Vec<IpNet>> = HashMap::new();
        for (net, services) in parsed.for_services {
            for service in services {
                by_service.entry(service).or_default().push(net);
            }
        }
        ListCopy {
            set: RangeSet::new(parsed.open),
            by_service: by_service
                .into_iter()
                .map(|(service, nets)| (service, RangeSet::new(nets)))
                .collect(),
            prefixes,
            etag,
            last_modified,
            fetched_at: SystemTime::now(),
        }
    }

    /// Whether `ip` is in the list for `crawler`.
    pub fn contains_for(&self, crawler: &str, ip: IpAddr) -> bool {
        self.set.contains(ip)
            || self
                .by_service
                .iter()
                .any(|(service, set)| service.eq_ignore_ascii_case(crawler) && set.contains(ip))
    }
}

/// A list, its copy in force (none until the first good answer) and its last error.
#[derive(Debug)]
pub struct ListSlot {
    /// The `ips` entry as written in the catalogue or config.
    pub entry: String,
    /// Where it comes from.
    pub source: ListSource,
    /// How it is read.
    pub format: ListFormat,
    /// The copy in force.
    pub copy: ArcSwapOption<ListCopy>,
    /// The latest failure, when the latest fetch failed.
    pub last_error: Mutex<Option<String>>,
    /// Named by remote catalogue feeds alone (and not mirrored): fetched over https from public
    /// addresses only, every redirect checked again (see [`WantedList::public_only`]).
    pub public_only: bool,
}

/// A list some crawler names, as the refresher keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WantedList {
    /// The `ips` entry as written in the catalogue or config.
    pub entry: String,
    /// How it is read.
    pub format: ListFormat,
    /// Only entries of catalogue feeds fetched over the network name it: the list is someone
    /// else's URL, so it is fetched as a URL a request named would be — `https://` only, from
    /// public addresses only (checked after resolution, at every redirect), unless
    /// `verify.ranges.private_origins` names its origin. A mirror is the operator's: fetched as
    /// configured.
    pub public_only: bool,
}

/// Every list the crawlers name, by entry. Slots are shared by the crawlers naming the same
/// list and survive config reloads while some crawler still names them.
#[derive(Debug, Default)]
pub struct RangeLists {
    /// Keyed by configured and catalogue list names (not client input), so the fast hash: a
    /// crawler's claim looks its lists up here on every request.
    slots: RwLock<HashMap<String, Arc<ListSlot>, foldhash::fast::RandomState>>,
    /// `verify.ranges.mirrors`: a list's URL and what to fetch or read instead.
    mirrors: Vec<(String, String)>,
    /// Bumped whenever what the lists say may have changed (a copy stored, the set of lists
    /// changed by a reload): verdicts reached under an older version are not reused.
    version: std::sync::atomic::AtomicU64,
}

impl RangeLists {
    /// No lists yet; a list named in `mirrors` is fetched or read from its mirror.
    pub fn with_mirrors(mirrors: Vec<(String, String)>) -> RangeLists {
        RangeLists {
            mirrors,
            ..RangeLists::default()
        }
    }

    /// Makes the lists exactly `entries`: new ones get an empty slot (and
    /// `robotsguard_crawler_range_list_loaded` 0 until a copy is in), lists no longer named are
    /// dropped.
    pub fn set_entries<'a>(&self, entries: impl IntoIterator<Item = &'a str>) {
        let entries: Vec<(String, ListFormat)> = entries
            .into_iter()
            .map(|entry| (entry.to_string(), ListFormat::Auto))
            .collect();
        self.set_lists(&entries);
    }

    /// [`RangeLists::set_entries`] with each list's format; a list whose format changed gets
    /// a new slot (read again in its new format).
    pub fn set_lists(&self, lists: &[(String, ListFormat)]) {
        let wanted: Vec<WantedList> = lists
            .iter()
            .map(|(entry, format)| WantedList {
                entry: entry.clone(),
                format: format.clone(),
                public_only: false,
            })
            .collect();
        self.set_wanted(&wanted);
    }

    /// [`RangeLists::set_lists`] with each list's fetch rule; a list whose format or rule
    /// changed gets a new slot.
    pub fn set_wanted(&self, lists: &[WantedList]) {
        self.changed();
        let mirror_of = |entry: &str| {
            self.mirrors
                .iter()
                .find(|(list, _)| list == entry)
                .map(|(_, mirror)| mirror.clone())
        };
        let mut slots = self.slots.write().unwrap_or_else(|e| e.into_inner());
        slots.retain(|entry, slot| {
            lists.iter().any(|wanted| {
                wanted.entry == *entry
                    && wanted.format == slot.format
                    && (wanted.public_only && mirror_of(entry).is_none()) == slot.public_only
            })
        });
        for WantedList {
            entry,
            format,
            public_only,
        } in lists
        {
            let entry = entry.as_str();
            if !slots.contains_key(entry) {
                let mirror = mirror_of(entry);
                let public_only = *public_only && mirror.is_none();
                let source = mirror.as_deref().unwrap_or(entry);
                crate::metrics::METRICS
                    .crawler_range_list_loaded
                    .with_label_values(&[entry])
                    .set(0);
                slots.insert(
                    entry.to_string(),
                    Arc::new(ListSlot {
                        entry: entry.to_string(),
                        source: ListSource::from_entry(source),
                        format: format.clone(),
                        copy: ArcSwapOption::empty(),
                        last_error: Mutex::new(None),
                        public_only,
                    }),
                );
            }
        }
    }

    /// Says that what the lists hold changed (see `version`).
    pub fn changed(&self) {
        self.version
            .fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// The current version (see [`RangeLists::changed`]).
    pub fn version(&self) -> u64 {
        self.version.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Every slot.
    pub fn slots(&self) -> Vec<Arc<ListSlot>> {
        let slots = self.slots.read().unwrap_or_else(|e| e.into_inner());
        slots.values().cloned().collect()
    }

    /// When the copy in force of the list `entry` was fetched, if one is.
    pub fn fetched_at(&self, entry: &str) -> Option<std::time::SystemTime> {
        let slots = self.slots.read().unwrap_or_else(|e| e.into_inner());
        let slot = slots.get(entry)?;
        let copy = slot.copy.load();
        copy.as_ref().map(|copy| copy.fetched_at)
    }

    /// What `crawler`'s lists (`entries`) say of `ip`; a JAFAR prefix with `services` vouches
    /// only when it names the crawler (case-insensitively).
    pub fn answer(&self, crawler: &str, entries: &[String], ip: IpAddr) -> ListAnswer {
        if entries.is_empty() {
            return ListAnswer::NoLists;
        }
        let slots = self.slots.read().unwrap_or_else(|e| e.into_inner());
        let mut all_loaded = true;
        for entry in entries {
            // A guard rather than a counted reference: the copy is only read here.
            let Some(slot) = slots.get(entry) else {
                all_loaded = false;
                continue;
            };
            match &*slot.copy.load() {
                Some(copy) if copy.contains_for(crawler, ip) => {
                    return ListAnswer::In(entry.clone())
                }
                Some(_) => {}
                None => all_loaded = false,
            }
        }
        if all_loaded {
            ListAnswer::NotIn
        } else {
            ListAnswer::NotLoaded
        }
    }
}

/// Reads a list file: at most [`MAX_LIST_BYTES`].
pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>, crate::net::file::ReadCappedError> {
    crate::net::file::read_capped(path, MAX_LIST_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(prefixes: &[&str]) -> RangeSet {
        RangeSet::new(prefixes.iter().filter_map(|p| p.parse::<IpNet>().ok()))
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap_or_else(|_| unreachable!())
    }

    #[test]
    fn ranges_hold_their_addresses_and_nothing_else() {
        let s = set(&[
            "66.249.64.0/27",
            "66.249.64.32/27",
            "192.0.2.7/32",
            "2001:4860:4801:10::/64",
        ]);
        // The two /27s are adjacent: one range.
        assert_eq!(s.len(), 3);
        for inside in [
            "66.249.64.0",
            "66.249.64.63",
            "192.0.2.7",
            "2001:4860:4801:10::1",
            "::ffff:66.249.64.5",
        ] {
            assert!(s.contains(ip(inside)), "{inside}");
        }
        for outside in [
            "66.249.63.255",
            "66.249.64.64",
            "192.0.2.6",
            "192.0.2.8",
            "2001:4860:4801:11::1",
            "::ffff:192.0.2.8",
        ] {
            assert!(!s.contains(ip(outside)), "{outside}");
        }
        let everything = set(&["0.0.0.0/0", "::/0"]);
        assert!(everything.contains(ip("255.255.255.255")));
        assert!(everything.contains(ip("ffff::1")));
        assert!(!RangeSet::default().contains(ip("1.2.3.4")));
        let overlapping = set(&[
            "10.0.0.0/8",
            "10.1.0.0/16",
            "10.255.255.255/32",
            "11.0.0.0/8",
        ]);
        assert_eq!(overlapping.len(), 1);
    }

    #[test]
    fn the_operators_formats() {
        let google = br#"{"creationTime": "2026-11-20T00:00:00", "prefixes": [{"ipv6Prefix": "2001:4860:4801:10::/64"}, {"ipv4Prefix": "66.249.64.0/27"}]}"#;
        assert_eq!(parse_list(google).map(|p| p.len()), Ok(2));
        let common_crawl =
            br#"{"synctoken": "1", "notes": "x", "prefixes": [{"ipv4Prefix": "18.97.9.168/29"}]}"#;
        assert_eq!(parse_list(common_crawl).map(|p| p.len()), Ok(1));
        let aws_style =
            br#"{"prefixes": [{"ip_prefix": "3.5.140.0/22"}, {"ipv6_prefix": "2600:1f00::/24"}]}"#;
        assert_eq!(parse_list(aws_style).map(|p| p.len()), Ok(2));
        let plain = br#"["192.0.2.1", "198.51.100.0/24", "2001:db8::/32"]"#;
        assert_eq!(parse_list(plain).map(|p| p.len()), Ok(3));
        let text = b"# our crawlers\n192.0.2.1\n\n198.51.100.0/24  # office\n";
        assert_eq!(parse_list(text).map(|p| p.len()), Ok(2));
        let page = br#"<!DOCTYPE html><html><body><pre>{"creationTime": "x", "prefixes": [{"ip_prefix": "52.70.240.171/32"}, {"ip_prefix": "52.70.240.172/32"}]}</pre></body></html>"#;
        assert_eq!(parse_list(page).map(|p| p.len()), Ok(2));
        // A host bit set is read as its network, as the operators mean it.
        let sloppy = br#"{"prefixes": [{"ipv4Prefix": "66.249.64.5/27"}]}"#;
        let parsed = parse_list(sloppy).unwrap_or_default();
        assert!(RangeSet::new(parsed).contains(ip("66.249.64.31")));
    }

    #[test]
    fn broken_lists_are_refused_with_a_reason() {
        for (body, why) in [
            (&b""[..], "empty"),
            (b"{\"prefixes\": []}", "no prefixes"),
            (b"{\"creationTime\": \"x\"}", "without `prefixes`"),
            (
                b"{\"prefixes\": [{\"ipv4Prefix\": \"300.1.1.1/8\"}]}",
                "prefix 0",
            ),
            (
                b"{\"prefixes\": [{\"cidr\": \"1.2.3.0/24\"}]}",
                "has no ipv4Prefix",
            ),
            (b"{\"prefixes\": ", "not valid JSON"),
            (b"<html><body>Access denied</body></html>", "HTML page"),
            (b"192.0.2.1\nnot-an-address\n", "line 2"),
            (b"\xff\xfe", "UTF-8"),
        ] {
            match parse_list(body) {
                Ok(p) => panic!("{body:?} parsed: {p:?}"),
                Err(e) => assert!(e.to_string().contains(why), "{e} (wanted {why})"),
            }
        }
    }

    #[test]
    fn answers_from_the_lists_of_a_crawler() {
        let lists = RangeLists::default();
        let a = "https://a.example/list.json".to_string();
        let b = "file:/etc/robotsguard/b.json".to_string();
        lists.set_entries([a.as_str(), b.as_str()]);
        let both = [a.clone(), b.clone()];
        assert_eq!(
            lists.answer("Bot", &both, ip("192.0.2.1")),
            ListAnswer::NotLoaded
        );
        let load = |entry: &str, prefixes: &[&str]| {
            let slots = lists.slots();
            let slot = slots.iter().find(|s| s.entry == entry).cloned();
            if let Some(slot) = slot {
                slot.copy.store(Some(Arc::new(ListCopy {
                    set: set(prefixes),
                    by_service: Vec::new(),
                    prefixes: prefixes.len(),
                    etag: None,
                    last_modified: None,
                    fetched_at: SystemTime::now(),
                })));
            }
        };
        load(&a, &["192.0.2.0/24"]);
        assert_eq!(
            lists.answer("Bot", &both, ip("192.0.2.1")),
            ListAnswer::In(a.clone())
        );
        assert_eq!(
            lists.answer("Bot", &both, ip("198.51.100.1")),
            ListAnswer::NotLoaded
        );
        load(&b, &["198.51.100.0/24"]);
        assert_eq!(
            lists.answer("Bot", &both, ip("198.51.100.1")),
            ListAnswer::In(b.clone())
        );
        assert_eq!(
            lists.answer("Bot", &both, ip("203.0.113.1")),
            ListAnswer::NotIn
        );
        assert_eq!(
            lists.answer("Bot", &[], ip("203.0.113.1")),
            ListAnswer::NoLists
        );
        lists.set_entries([a.as_str()]);
        assert_eq!(lists.slots().len(), 1);
    }

    #[test]
    fn jafar_services_vouch_only_for_the_crawlers_they_name() {
        let body = br#"{"creationTime": "2026-10-01T00:00:00Z", "prefixes": [
            {"ipv4Prefix": "192.0.2.0/24"},
            {"ipv4Prefix": "198.51.100.0/24", "services": ["ExampleBot", "ExampleBot-Image"]},
            {"ipv6Prefix": "2001:db8::/32", "services": "ExampleAgent"}
        ]}"#;
        for (format, content_type) in [
            (ListFormat::Jafar, None),
            (
                ListFormat::Auto,
                Some("application/jafar+json; charset=utf-8"),
            ),
            (ListFormat::Auto, None),
        ] {
            let parsed = match parse_list_as(body, &format, content_type) {
                Ok(parsed) => parsed,
                Err(e) => panic!("{e}"),
            };
            assert_eq!(parsed.open.len(), 1);
            assert_eq!(parsed.for_services.len(), 2);
            let copy = ListCopy::new(parsed, None, None);
            assert!(copy.contains_for("AnyBot", ip("192.0.2.9")));
            assert!(copy.contains_for("examplebot", ip("198.51.100.9")));
            assert!(!copy.contains_for("OtherBot", ip("198.51.100.9")));
            assert!(copy.contains_for("ExampleAgent", ip("2001:db8::1")));
            assert!(!copy.contains_for("ExampleBot", ip("2001:db8::1")));
        }
        assert!(parse_list_as(b"[\"192.0.2.0/24\"]", &ListFormat::Jafar, None).is_err());
        let bad_services = br#"{"prefixes": [{"ipv4Prefix": "192.0.2.0/24", "services": 7}]}"#;
        assert!(parse_list_as(bad_services, &ListFormat::Jafar, None).is_err());
    }

    #[test]
    fn json_pointer_selectors() {
        let body = br#"{"syncToken": "1", "prefixes": [
            {"ip_prefix": "192.0.2.0/24", "region": "x"},
            {"ip_prefix": "198.51.100.7"}
        ], "v6": {"a": {"cidrs": ["2001:db8::/48", "2001:db8:1::/48"]}}}"#;
        let read = |pointer: &str| {
            parse_list_as(body, &ListFormat::JsonPointer(pointer.into()), None)
                .map(|parsed| parsed.open.len())
        };
        assert_eq!(read("/prefixes/*/ip_prefix"), Ok(2));
        assert_eq!(read("/prefixes/1/ip_prefix"), Ok(1));
        assert_eq!(read("/v6/*/cidrs"), Ok(2));
        assert_eq!(read("/v6/*/cidrs/*"), Ok(2));
        // Nothing reached, or something that is not an address: refused.
        assert!(read("/nothing/*").is_err());
        assert!(read("/syncToken").is_err());
        assert!(read("/prefixes/*/region").is_err());
        assert!(read("prefixes").is_err());
    }

    #[test]
    fn regex_selectors_read_lists_inside_pages() {
        let page = b"<html><body><table>
            <tr><td>Amazonbot</td><td>192.0.2.0/24</td></tr>
            <tr><td>Amazonbot</td><td>198.51.100.0/25</td></tr>
            <tr><td>Other</td><td>not an address</td></tr>
        </table></body></html>";
        let format = ListFormat::Regex(r"<td>Amazonbot</td><td>([0-9./]+)</td>".into());
        let parsed = parse_list_as(page, &format, None).unwrap_or_default();
        assert_eq!(parsed.open.len(), 2);
        // No capture group, two groups, no match, a capture that is no address: refused.
        for pattern in [
            r"<td>[0-9./]+</td>",
            r"(a)(b)",
            r"nomatch(x)",
            r"<td>(Other)</td>",
        ] {
            assert!(
                parse_list_as(page, &ListFormat::Regex(pattern.into()), None).is_err(),
                "{pattern}"
            );
        }
        // The cap on matches: more than allowed is a broken list, not a cut one.
        let many = "1.2.3.4\n".repeat(MAX_FORMAT_MATCHES + 1);
        let every_line = ListFormat::Regex(r"(?m)^([0-9.]+)$".into());
        assert!(parse_list_as(many.as_bytes(), &every_line, None).is_err());
    }
}
