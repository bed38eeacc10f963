//! Catalogue feeds: crawler entries published by someone else (the ai.robots.txt project, a
//! team's own list) read into catalogue entries, the copies in force kept per feed, and the
//! merge of built-in entries, feeds and `crawlers.extra` into one catalogue. Pure: fetching and
//! refreshing is the job of `crate::feeds`.
//!
//! Merge order: the built-in entries first; then each feed, in config order, adds the entries
//! whose name and pattern no earlier entry has (a `robotsguard`-format entry with
//! `replace: true` takes the place of the built-in entry of its name, when the feed's
//! `may_override` allows it); `crawlers.extra` last, replacing any entry of the same name and
//! pushing out feed entries with the same pattern. Before the merge each feed's entries are
//! screened (see [`FeedTrust`]): entries that would make browsers crawlers, override or hide a
//! built-in or `extra` entry without `may_override`, name a range list a remote feed may not
//! name, or pass the feed's `max_lists` are refused, and the rest of the feed applies.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde_json::Value;

use super::catalogue::{parse_catalogue_yaml, validate_entry, CrawlerDef};
use super::category::Category;
use super::purpose::Purpose;

pub use super::feed_screen::{
    FeedTrust, RefusalReason, Refused, BROWSER_TOKENS, BROWSER_USER_AGENTS, DEFAULT_MAX_LISTS,
};

/// The largest feed body read: the ai.robots.txt list is ~60 KiB, the built-in catalogue ~80.
pub const MAX_FEED_BYTES: usize = 4 * 1024 * 1024;

/// The most entries one feed may add.
pub const MAX_FEED_ENTRIES: usize = 10_000;

/// How a feed is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FeedFormat {
    /// The built-in catalogue's own schema (`crawlers: [...]`, YAML or JSON).
    Robotsguard,
    /// The ai.robots.txt project's `robots.json`: an object of name → {operator, respect,
    /// function, frequency, description}.
    AiRobotsTxt,
}

impl FeedFormat {
    /// The spelling in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            FeedFormat::Robotsguard => "robotsguard",
            FeedFormat::AiRobotsTxt => "ai-robots-txt",
        }
    }

    /// Every format, for config errors.
    pub const ALL: [FeedFormat; 2] = [FeedFormat::Robotsguard, FeedFormat::AiRobotsTxt];
}

/// A feed's entries, read and checked, and what was left out of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedFeed {
    /// The entries, each marked with the feed.
    pub defs: Vec<CrawlerDef>,
    /// Entries of an `ai-robots-txt` feed that cannot be catalogue entries (a name too short or
    /// not printable ASCII), with why.
    pub skipped: Vec<String>,
}

message_error! {
    /// Why a feed's body was refused whole, in one line.
    FeedError
}

/// Reads a feed's body. `feed` (its configured `url`) is recorded on every entry. A
/// `robotsguard` feed with an entry that breaks a catalogue rule is refused whole (a team's
/// own list should be right); an `ai-robots-txt` entry that cannot be an entry is skipped.
pub fn parse_feed(format: FeedFormat, body: &[u8], feed: &str) -> Result<ParsedFeed, FeedError> {
    parse_feed_in(format, body, feed, None)
}

/// [`parse_feed`] for a feed read from a file in `base_dir`: its entries' `file:` range lists
/// may be relative to that directory (a URL feed's must be absolute).
pub fn parse_feed_in(
    format: FeedFormat,
    body: &[u8],
    feed: &str,
    base_dir: Option<&std::path::Path>,
) -> Result<ParsedFeed, FeedError> {
    read_feed(format, body, feed, base_dir).map_err(FeedError)
}

/// [`parse_feed_in`], its error as text.
fn read_feed(
    format: FeedFormat,
    body: &[u8],
    feed: &str,
    base_dir: Option<&std::path::Path>,
) -> Result<ParsedFeed, String> {
    if body.len() > MAX_FEED_BYTES {
        return Err(format!("larger than {MAX_FEED_BYTES} bytes"));
    }
    let text = std::str::from_utf8(body).map_err(|e| format!("not UTF-8 text: {e}"))?;
    let text = text.trim_start_matches('\u{feff}');
    let mut parsed = match format {
        FeedFormat::Robotsguard => {
            let mut defs = parse_catalogue_yaml(text).map_err(|e| e.to_string())?;
            if let Some(base) = base_dir {
                for verify in defs.iter_mut().filter_map(|d| d.verify.as_mut()) {
                    let absolute = |entry: &mut String| match entry.strip_prefix("file:") {
                        Some(path) if !path.starts_with('/') && !path.is_empty() => {
                            *entry = format!("file:{}", base.join(path).display());
                        }
                        _ => {}
                    };
                    verify.ips.iter_mut().for_each(absolute);
                    verify
                        .formats
                        .iter_mut()
                        .for_each(|(entry, _)| absolute(entry));
                }
            }
            let mut seen = HashMap::new();
            for (index, def) in defs.iter().enumerate() {
                validate_entry(index, def).map_err(|e| e.to_string())?;
                if let Some(first) = seen.insert(def.name.to_ascii_lowercase(), index) {
                    return Err(format!(
                        "crawler name {:?} is used by entries #{} and #{}",
                        def.name,
                        first + 1,
                        index + 1
                    ));
                }
            }
            ParsedFeed {
                defs,
                skipped: Vec::new(),
            }
        }
        FeedFormat::AiRobotsTxt => ai_robots_txt(text)?,
    };
    if parsed.defs.len() > MAX_FEED_ENTRIES {
        return Err(format!("more than {MAX_FEED_ENTRIES} entries"));
    }
    for def in &mut parsed.defs {
        def.feed = Some(feed.to_string());
    }
    Ok(parsed)
}

/// The purposes and category an ai.robots.txt `function` maps to.
///
/// The text is compared lower-cased, by words it contains:
/// - `train`, `scrap`, `dataset`, `data collect`, `llm`, `model` → purpose `training`;
/// - `search` → purpose `search`;
/// - `assistant`, `agent`, `user`, `on behalf`, `real-time`, `browsing` → purpose `agent`;
/// - none of them → purpose `other`.
///
/// The category is that of the first purpose found in the order training (`ai-training`),
/// search (`ai-search`), agent (`ai-assistant`); `other` otherwise. So the project's own
/// headings map as "AI Data Scrapers" → ai-training, "AI Search Crawlers" → ai-search,
/// "AI Assistants" and "AI Agents" → ai-assistant, "Undocumented AI Agents" → ai-assistant.
pub fn map_function(function: &str) -> (Category, Vec<Purpose>) {
    let text = function.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| text.contains(w));
    let mut purposes = Vec::new();
    if has(&["train", "scrap", "dataset", "data collect", "llm", "model"]) {
        purposes.push(Purpose::Training);
    }
    if has(&["search"]) {
        purposes.push(Purpose::Search);
    }
    if has(&[
        "assistant",
        "agent",
        "user",
        "on behalf",
        "real-time",
        "browsing",
    ]) {
        purposes.push(Purpose::Agent);
    }
    let category = match purposes.first() {
        Some(Purpose::Training) => Category::AiTraining,
        Some(Purpose::Search) => Category::AiSearch,
        Some(Purpose::Agent) => Category::AiAssistant,
        _ => Category::Other,
    };
    if purposes.is_empty() {
        purposes.push(Purpose::Other);
    }
    (category, purposes)
}

/// `[Name](https://url)` → ("Name", Some(url)); plain text → (text, None).
fn markdown_link(text: &str) -> (String, Option<String>) {
    let text = text.trim();
    if let Some(rest) = text.strip_prefix('[') {
        if let Some((label, after)) = rest.split_once("](") {
            if let Some((url, _)) = after.split_once(')') {
                let url = url.trim();
                let url = url.starts_with("https://").then(|| url.to_string());
                return (label.trim().to_string(), url);
            }
        }
    }
    (text.to_string(), None)
}

fn ai_robots_txt(text: &str) -> Result<ParsedFeed, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let Value::Object(map) = value else {
        return Err("not a JSON object of crawler names".to_string());
    };
    let mut out = ParsedFeed::default();
    let mut seen: HashMap<String, ()> = HashMap::new();
    for (name, info) in &map {
        let Value::Object(info) = info else {
            return Err(format!("{name:?} is not an object"));
        };
        let field = |key: &str| info.get(key).and_then(Value::as_str).unwrap_or("");
        let (category, purposes) = map_function(field("function"));
        let (operator, source) = markdown_link(field("operator"));
        let operator: String = operator.chars().filter(|c| !c.is_control()).collect();
        let name = name.trim();
        let def = CrawlerDef {
            name: name.to_string(),
            tokens: vec![name.to_ascii_lowercase()],
            pattern: name.to_string(),
            category,
            operator,
            ignores_global: false,
            verify: None,
            purposes,
            controls: Default::default(),
            ignores_crawl_delay: false,
            signing_agents: Vec::new(),
            source: source.unwrap_or_default(),
            replace: false,
            feed: None,
        };
        if let Err(e) = validate_entry(out.defs.len(), &def) {
            out.skipped.push(format!("{name:?}: {e}"));
            continue;
        }
        if seen.insert(name.to_ascii_lowercase(), ()).is_some() {
            out.skipped.push(format!("{name:?}: named twice"));
            continue;
        }
        out.defs.push(def);
    }
    Ok(out)
}

/// A feed's copy in force.
#[derive(Debug, Clone)]
pub struct FeedCopy {
    /// Its entries.
    pub defs: Vec<CrawlerDef>,
    /// Entries left out of it, with why.
    pub skipped: Vec<String>,
    /// Validators for conditional refreshes.
    pub etag: Option<String>,
    /// See `etag`.
    pub last_modified: Option<String>,
    /// When it was fetched or read, or confirmed by a 304.
    pub fetched_at: SystemTime,
}

/// The feeds' copies in force, by feed `url`, shared by every snapshot of a process: a
/// snapshot's catalogue is built from what it holds, and [`FeedStore::generation`] says
/// whether a newer copy came in since.
#[derive(Debug, Default)]
pub struct FeedStore {
    copies: Mutex<HashMap<String, Arc<FeedCopy>>>,
    generation: AtomicU64,
}

impl FeedStore {
    /// Puts `copy` in force for `feed`; `changed` (its entries differ from the copy before)
    /// bumps the generation so the catalogue is rebuilt.
    pub fn put(&self, feed: &str, copy: FeedCopy) -> bool {
        let mut copies = self.copies.lock().unwrap_or_else(|e| e.into_inner());
        let changed = copies.get(feed).is_none_or(|old| old.defs != copy.defs);
        copies.insert(feed.to_string(), Arc::new(copy));
        if changed {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        changed
    }

    /// The copy in force for `feed`.
    pub fn get(&self, feed: &str) -> Option<Arc<FeedCopy>> {
        let copies = self.copies.lock().unwrap_or_else(|e| e.into_inner());
        copies.get(feed).cloned()
    }

    /// Forgets feeds not in `keep` (a reload removed them).
    pub fn retain(&self, keep: &[&str]) {
        let mut copies = self.copies.lock().unwrap_or_else(|e| e.into_inner());
        let before = copies.len();
        copies.retain(|feed, _| keep.contains(&feed.as_str()));
        if copies.len() != before {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Bumped whenever what the feeds hold changed.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

/// One feed's copy in force and what the operator lets it do, for [`merge`].
#[derive(Debug, Clone, Copy)]
pub struct FeedInput<'a> {
    /// The feed (its configured `url`).
    pub feed: &'a str,
    /// Its entries.
    pub defs: &'a [CrawlerDef],
    /// What it may do.
    pub trust: FeedTrust,
}

/// What [`merge`] made: the catalogue's entries, the feed entries left out for a clash with an
/// earlier entry (one line each), and the feed entries refused by their feed's rules.
#[derive(Debug, Clone, Default)]
pub struct Merged {
    /// The entries, built in first.
    pub defs: Vec<CrawlerDef>,
    /// Feed entries whose name or pattern an earlier entry (or `extra`) has, one line each.
    pub dropped: Vec<String>,
    /// Feed entries refused by the rules of [`FeedTrust`].
    pub refused: Vec<Refused>,
}

/// Merges `feeds` (in config order) over `builtin`, then `extra` over both (see the module
/// documentation).
pub fn merge(builtin: Vec<CrawlerDef>, feeds: &[FeedInput<'_>], extra: Vec<CrawlerDef>) -> Merged {
    let protected_defs: Vec<CrawlerDef> = builtin.iter().chain(extra.iter()).cloned().collect();
    let protected: Vec<&CrawlerDef> = protected_defs.iter().collect();
    let mut defs = builtin;
    let mut dropped = Vec::new();
    let mut refused = Vec::new();
    let name_at = |defs: &[CrawlerDef], name: &str| {
        defs.iter().position(|d| d.name.eq_ignore_ascii_case(name))
    };
    for input in feeds {
        let (admitted, refusals) =
            super::feed_screen::screen(input.feed, input.defs, input.trust, &protected);
        refused.extend(refusals);
        for def in admitted {
            let feed_name = def.feed.as_deref().unwrap_or("a feed");
            let same_name = name_at(&defs, &def.name);
            if let Some(index) = same_name {
                let builtin_entry = defs[index].feed.is_none();
                if !(def.replace && builtin_entry) {
                    dropped.push(format!(
                        "{feed_name}: {:?} is already in the catalogue{}",
                        def.name,
                        if builtin_entry {
                            " (built in; `replace: true` takes its place)"
                        } else {
                            ""
                        }
                    ));
                    continue;
                }
            }
            let pattern_owner = defs.iter().position(|d| {
                d.pattern.eq_ignore_ascii_case(&def.pattern)
                    && Some(&d.name) != same_name.map(|i| &defs[i].name)
            });
            if let Some(owner) = pattern_owner {
                dropped.push(format!(
                    "{feed_name}: {:?}'s pattern {:?} is {:?}'s",
                    def.name, def.pattern, defs[owner].name
                ));
                continue;
            }
            match same_name {
                Some(index) => defs[index] = def.clone(),
                None => defs.push(def.clone()),
            }
        }
    }
    for def in extra {
        defs.retain(|existing| {
            let replaced = existing.name.eq_ignore_ascii_case(&def.name);
            let pushed_out =
                existing.feed.is_some() && existing.pattern.eq_ignore_ascii_case(&def.pattern);
            if pushed_out && !replaced {
                dropped.push(format!(
                    "{}: {:?}'s pattern is that of `crawlers.extra` entry {:?}",
                    existing.feed.as_deref().unwrap_or("a feed"),
                    existing.name,
                    def.name
                ));
            }
            !(replaced || pushed_out)
        });
        defs.push(def);
    }
    Merged {
        defs,
        dropped,
        refused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROBOTS_JSON: &str = r#"{
      "AI2Bot": {"operator": "[Ai2](https://allenai.org/crawler)", "respect": "Yes",
                 "function": "Content is used to train open language models.",
                 "frequency": "No information provided.", "description": "x"},
      "GPTBot": {"operator": "OpenAI", "respect": "Yes", "function": "Scrapes data to train OpenAI's products.",
                 "frequency": "", "description": ""},
      "NovaSearch": {"operator": "Nova", "respect": "Unclear", "function": "AI Search Crawlers",
                 "frequency": "", "description": ""},
      "HelperAgent": {"operator": "Helper", "respect": "No", "function": "AI Assistants",
                 "frequency": "", "description": ""},
      "Mystery": {"operator": "Unknown", "respect": "Unclear", "function": "No information.",
                 "frequency": "", "description": ""},
      "QQ": {"operator": "x", "function": "AI Data Scrapers"},
      "Bötli": {"operator": "x", "function": "AI Data Scrapers"}
    }"#;

    #[test]
    fn function_maps_to_category_and_purposes() {
        let cases: [(&str, Category, &[&str]); 8] = [
            ("AI Data Scrapers", Category::AiTraining, &["training"]),
            ("AI Search Crawlers", Category::AiSearch, &["search"]),
            ("AI Assistants", Category::AiAssistant, &["agent"]),
            ("Undocumented AI Agents", Category::AiAssistant, &["agent"]),
            (
                "Scrapes data to train LLMs and power search",
                Category::AiTraining,
                &["training", "search"],
            ),
            (
                "Fetches pages on behalf of a user in real-time",
                Category::AiAssistant,
                &["agent"],
            ),
            ("No information provided.", Category::Other, &["other"]),
            ("", Category::Other, &["other"]),
        ];
        for (function, category, purposes) in cases {
            let (got_category, got_purposes) = map_function(function);
            assert_eq!(got_category, category, "{function}");
            let got_purposes: Vec<&str> = got_purposes.iter().map(|p| p.as_str()).collect();
            assert_eq!(got_purposes, purposes, "{function}");
        }
    }

    #[test]
    fn ai_robots_txt_entries() {
        let parsed = match parse_feed(FeedFormat::AiRobotsTxt, ROBOTS_JSON.as_bytes(), "f") {
            Ok(parsed) => parsed,
            Err(e) => panic!("{e}"),
        };
        let names: Vec<&str> = parsed.defs.iter().map(|d| d.name.as_str()).collect();
        // In name order (the JSON object's keys, sorted).
        assert_eq!(
            names,
            ["AI2Bot", "GPTBot", "HelperAgent", "Mystery", "NovaSearch"]
        );
        let ai2 = &parsed.defs[0];
        assert_eq!(ai2.operator, "Ai2");
        assert_eq!(ai2.source, "https://allenai.org/crawler");
        assert_eq!(ai2.tokens, ["ai2bot"]);
        assert_eq!(ai2.pattern, "AI2Bot");
        assert_eq!(ai2.category, Category::AiTraining);
        assert_eq!(ai2.feed.as_deref(), Some("f"));
        assert_eq!(parsed.defs[4].category, Category::AiSearch);
        assert_eq!(parsed.defs[2].purposes, [Purpose::Agent]);
        assert_eq!(parsed.defs[3].category, Category::Other);
        // Too short, and not ASCII: skipped, with why.
        assert_eq!(parsed.skipped.len(), 2, "{:?}", parsed.skipped);
        for broken in ["", "[]", "{\"A\": 1}", "not json", "{\"GPTBot\": "] {
            assert!(
                parse_feed(FeedFormat::AiRobotsTxt, broken.as_bytes(), "f").is_err(),
                "{broken}"
            );
        }
    }

    #[test]
    fn robotsguard_feeds_are_strict() {
        let good = "crawlers:\n  - {name: TeamBot, tokens: [teambot], pattern: TeamBot, category: ai-training, purposes: [training], signing_agents: [\"https://agent.team.example\"], verify: {ips: [{url: \"https://team.example/ips.json\", format: {json_pointer: \"/p/*/ip\"}}]}}\n";
        let parsed = match parse_feed(FeedFormat::Robotsguard, good.as_bytes(), "team") {
            Ok(parsed) => parsed,
            Err(e) => panic!("{e}"),
        };
        let def = &parsed.defs[0];
        assert_eq!(def.signing_agents, ["https://agent.team.example"]);
        let verify = def.verify.clone().unwrap_or_default();
        assert_eq!(verify.ips, ["https://team.example/ips.json"]);
        assert_eq!(
            verify.format_of("https://team.example/ips.json"),
            super::super::ListFormat::JsonPointer("/p/*/ip".into())
        );
        for bad in [
            "crawlers:\n  - {name: A, tokens: [a], pattern: Aa, category: other}\n",
            "crawlers:\n  - {name: Abc, tokens: [abc], pattern: Abc, category: other, purposes: [fun]}\n",
            "crawlers:\n  - {name: Abc, tokens: [abc], pattern: Abc, category: other, verify: {ips: [{url: \"https://x.example/l\", format: {regex: \"(a)(b)\"}}]}}\n",
            "crawlers: [",
            "{}",
        ] {
            assert!(
                parse_feed(FeedFormat::Robotsguard, bad.as_bytes(), "f").is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_file_feed_may_name_lists_beside_it() {
        let body = "crawlers:\n  - {name: TeamBot, tokens: [teambot], pattern: TeamBot, category: other, verify: {ips: [\"file:lists/team.json\", {url: \"file:lists/page.html\", format: {regex: \"ip=([0-9./]+)\"}}]}}\n";
        let dir = std::path::Path::new("/etc/robotsguard/feeds");
        let parsed = match parse_feed_in(FeedFormat::Robotsguard, body.as_bytes(), "f", Some(dir)) {
            Ok(parsed) => parsed,
            Err(e) => panic!("{e}"),
        };
        let verify = parsed.defs[0].verify.clone().unwrap_or_default();
        assert_eq!(
            verify.ips,
            [
                "file:/etc/robotsguard/feeds/lists/team.json",
                "file:/etc/robotsguard/feeds/lists/page.html"
            ]
        );
        assert!(!verify
            .format_of("file:/etc/robotsguard/feeds/lists/page.html")
            .is_auto());
        // From a URL, a relative file is refused.
        assert!(parse_feed(FeedFormat::Robotsguard, body.as_bytes(), "f").is_err());
    }

    fn entry(name: &str, pattern: &str, feed: Option<&str>) -> CrawlerDef {
        CrawlerDef {
            name: name.into(),
            tokens: vec![name.to_ascii_lowercase()],
            pattern: pattern.into(),
            category: Category::Other,
            operator: String::new(),
            ignores_global: false,
            verify: None,
            purposes: Vec::new(),
            controls: Default::default(),
            ignores_crawl_delay: false,
            signing_agents: Vec::new(),
            source: String::new(),
            replace: false,
            feed: feed.map(str::to_string),
        }
    }

    #[test]
    fn builtin_wins_unless_replaced_and_extra_wins_over_all() {
        let builtin = vec![entry("Alpha", "Alpha", None), entry("Beta", "Beta", None)];
        let mut replacing = entry("Beta", "BetaBot", Some("one"));
        replacing.replace = true;
        let one = vec![
            entry("alpha", "AlphaX", Some("one")),
            replacing,
            entry("Gamma", "Gamma", Some("one")),
            entry("Clash", "alpha", Some("one")),
        ];
        let two = vec![
            entry("Gamma", "GammaTwo", Some("two")),
            entry("Delta", "Delta", Some("two")),
        ];
        let extra = vec![
            entry("Gamma", "Gamma", None),
            entry("Epsilon", "Delta", None),
        ];
        let trusted = FeedTrust {
            may_override: true,
            ..FeedTrust::default()
        };
        let inputs = [
            FeedInput {
                feed: "one",
                defs: &one,
                trust: trusted,
            },
            FeedInput {
                feed: "two",
                defs: &two,
                trust: trusted,
            },
        ];
        let Merged { defs, dropped, .. } = merge(builtin, &inputs, extra);
        let got: Vec<(&str, &str, Option<&str>)> = defs
            .iter()
            .map(|d| (d.name.as_str(), d.pattern.as_str(), d.feed.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("Alpha", "Alpha", None),
                ("Beta", "BetaBot", Some("one")),
                ("Gamma", "Gamma", None),
                ("Epsilon", "Delta", None),
            ]
        );
        // alpha (name), Clash (pattern), Gamma of feed two (name), Delta (extra's pattern).
        assert_eq!(dropped.len(), 4, "{dropped:?}");
        assert!(
            crate::Catalogue::new(defs).is_ok(),
            "the merge is a valid catalogue"
        );
    }

    #[test]
    fn the_store_bumps_its_generation_on_change_only() {
        let store = FeedStore::default();
        let copy = |defs: Vec<CrawlerDef>| FeedCopy {
            defs,
            skipped: Vec::new(),
            etag: None,
            last_modified: None,
            fetched_at: SystemTime::now(),
        };
        assert!(store.put("f", copy(vec![entry("A1", "A1x", Some("f"))])));
        let generation = store.generation();
        assert!(!store.put("f", copy(vec![entry("A1", "A1x", Some("f"))])));
        assert_eq!(store.generation(), generation);
        store.retain(&["g"]);
        assert!(store.get("f").is_none());
        assert!(store.generation() > generation);
    }
}
