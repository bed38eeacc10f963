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

/// Parses a range list: the operators' JSON (`{"prefixes": [{"ipv4Prefix": "…"},
/// {"ipv6Prefix": "…"}]}`, or with `ip_prefix`/`ipv6_prefix`), a JSON array of addresses and
/// networks, the same JSON inside an HTML page (Amazon's), or text with one address or network
/// per line (`#` comments). A bare address is one host. A list without a single prefix is an
/// error: a broken list must not replace a good one.
pub fn parse_list(body: &[u8]) -> Result<Vec<IpNet>, String> {
    let text = std::str::from_utf8(body).map_err(|e| format!("not UTF-8 text: {e}"))?;
    let text = text.trim_start_matches('\u{feff}').trim();
    if text.is_empty() {
        return Err("the list is empty".to_string());
    }
    let prefixes = if text.starts_with('{') || text.starts_with('[') {
        let value: Value =
            serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
        from_json(&value)?
    } else if text.starts_with('<') {
        let value = json_in_page(text)
            .ok_or_else(|| "an HTML page without a JSON list of prefixes in it".to_string())?;
        from_json(&value)?
    } else {
        from_lines(text)?
    };
    if prefixes.is_empty() {
        return Err("the list holds no prefixes".to_string());
    }
    Ok(prefixes)
}

fn prefix(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    if let Ok(net) = text.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    text.parse::<IpAddr>()
        .map(IpNet::from)
        .map_err(|_| format!("`{}` is not an address or network", cut(text)))
}

fn cut(text: &str) -> String {
    text.chars().take(64).collect()
}

fn from_json(value: &Value) -> Result<Vec<IpNet>, String> {
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
    let mut out = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let text = match item {
            Value::String(text) => text.as_str(),
            Value::Object(entry) => ["ipv4Prefix", "ipv6Prefix", "ip_prefix", "ipv6_prefix"]
                .iter()
                .find_map(|key| entry.get(*key).and_then(Value::as_str))
                .ok_or_else(|| format!("prefix {index} has no ipv4Prefix or ipv6Prefix"))?,
            _ => return Err(format!("prefix {index} is neither a string nor an object")),
        };
        out.push(prefix(text).map_err(|e| format!("prefix {index}: {e}"))?);
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
    /// Its addresses.
    pub set: RangeSet,
    /// Prefixes as published.
    pub prefixes: usize,
    /// Validators for conditional refreshes.
    pub etag: Option<String>,
    /// See `etag`.
    pub last_modified: Option<String>,
    /// When it was fetched or read, or confirmed by a 304.
    pub fetched_at: SystemTime,
}

/// A list, its copy in force (none until the first good answer) and its last error.
#[derive(Debug)]
pub struct ListSlot {
    /// The `ips` entry as written in the catalogue or config.
    pub entry: String,
    /// Where it comes from.
    pub source: ListSource,
    /// The copy in force.
    pub copy: ArcSwapOption<ListCopy>,
    /// The latest failure, when the latest fetch failed.
    pub last_error: Mutex<Option<String>>,
}

/// Every list the crawlers name, by entry. Slots are shared by the crawlers naming the same
/// list and survive config reloads while some crawler still names them.
#[derive(Debug, Default)]
pub struct RangeLists {
    slots: RwLock<HashMap<String, Arc<ListSlot>>>,
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
        self.changed();
        let wanted: Vec<&str> = entries.into_iter().collect();
        let mut slots = self.slots.write().unwrap_or_else(|e| e.into_inner());
        slots.retain(|entry, _| wanted.contains(&entry.as_str()));
        for entry in wanted {
            if !slots.contains_key(entry) {
                let source = self
                    .mirrors
                    .iter()
                    .find(|(list, _)| list == entry)
                    .map_or(entry, |(_, mirror)| mirror.as_str());
                crate::metrics::METRICS
                    .crawler_range_list_loaded
                    .with_label_values(&[entry])
                    .set(0);
                slots.insert(
                    entry.to_string(),
                    Arc::new(ListSlot {
                        entry: entry.to_string(),
                        source: ListSource::from_entry(source),
                        copy: ArcSwapOption::empty(),
                        last_error: Mutex::new(None),
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

    /// What a crawler's lists (`entries`) say of `ip`.
    pub fn answer(&self, entries: &[String], ip: IpAddr) -> ListAnswer {
        if entries.is_empty() {
            return ListAnswer::NoLists;
        }
        let slots = self.slots.read().unwrap_or_else(|e| e.into_inner());
        let mut all_loaded = true;
        for entry in entries {
            let copy = slots.get(entry).and_then(|slot| slot.copy.load_full());
            match copy {
                Some(copy) if copy.set.contains(ip) => return ListAnswer::In(entry.clone()),
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
pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut body = Vec::new();
    file.take(MAX_LIST_BYTES as u64 + 1)
        .read_to_end(&mut body)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if body.len() > MAX_LIST_BYTES {
        return Err(format!(
            "{} is larger than {MAX_LIST_BYTES} bytes",
            path.display()
        ));
    }
    Ok(body)
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
                Err(e) => assert!(e.contains(why), "{e} (wanted {why})"),
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
        assert_eq!(lists.answer(&both, ip("192.0.2.1")), ListAnswer::NotLoaded);
        let load = |entry: &str, prefixes: &[&str]| {
            let slots = lists.slots();
            let slot = slots.iter().find(|s| s.entry == entry).cloned();
            if let Some(slot) = slot {
                slot.copy.store(Some(Arc::new(ListCopy {
                    set: set(prefixes),
                    prefixes: prefixes.len(),
                    etag: None,
                    last_modified: None,
                    fetched_at: SystemTime::now(),
                })));
            }
        };
        load(&a, &["192.0.2.0/24"]);
        assert_eq!(
            lists.answer(&both, ip("192.0.2.1")),
            ListAnswer::In(a.clone())
        );
        assert_eq!(
            lists.answer(&both, ip("198.51.100.1")),
            ListAnswer::NotLoaded
        );
        load(&b, &["198.51.100.0/24"]);
        assert_eq!(
            lists.answer(&both, ip("198.51.100.1")),
            ListAnswer::In(b.clone())
        );
        assert_eq!(lists.answer(&both, ip("203.0.113.1")), ListAnswer::NotIn);
        assert_eq!(lists.answer(&[], ip("203.0.113.1")), ListAnswer::NoLists);
        lists.set_entries([a.as_str()]);
        assert_eq!(lists.slots().len(), 1);
    }
}
