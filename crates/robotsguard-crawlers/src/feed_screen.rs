//! Which entries of a catalogue feed are refused before the merge: a feed is someone else's list,
//! so its entries may add crawlers but may not turn browsers into crawlers, take the place of
//! (or hide) an entry of the built-in catalogue or `crawlers.extra` unless the operator lets
//! that feed (`may_override`), make a remote feed name range lists that are not https URLs
//! (a `file:` path, plain http), or name more range lists than the operator allows
//! (`max_lists`). A refused entry is left out with why; the rest of the feed applies.

use aho_corasick::{AhoCorasick, MatchKind};

use super::catalogue::CrawlerDef;
use super::words::is_whole_word;

/// The products every browser's User-Agent carries: an entry whose pattern is one of them
/// (case-insensitively) would make browsers crawlers.
pub const BROWSER_TOKENS: [&str; 7] = [
    "Mozilla",
    "Chrome",
    "Safari",
    "Firefox",
    "Edge",
    "AppleWebKit",
    "Gecko",
];

/// User-Agents of today's common browsers (desktop and mobile Chrome, Safari, Firefox, Edge,
/// Samsung Internet, Opera, Chrome on iOS): a feed entry whose pattern matches one of them as a
/// whole word (`Mozilla/5.0`, `KHTML`, `Windows NT`, `Mobile`) would make every such browser a
/// crawler.
pub const BROWSER_USER_AGENTS: [&str; 10] = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
    "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 OPR/115.0.0.0",
    "Mozilla/5.0 (Android 14; Mobile; rv:133.0) Gecko/133.0 Firefox/133.0",
    "Mozilla/5.0 (iPad; CPU OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1",
];

/// The range lists one feed names at most unless its config says otherwise
/// (`crawlers.feeds[].max_lists`): each list costs memory (up to a few MiB) and a fetch.
pub const DEFAULT_MAX_LISTS: usize = 32;

/// What the operator lets one feed do (its `crawlers.feeds` entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedTrust {
    /// `may_override`: its entries may take the place of (`replace: true`) or hide an entry of
    /// the built-in catalogue or `crawlers.extra`.
    pub may_override: bool,
    /// `max_lists`: the most distinct range lists its entries may name.
    pub max_lists: usize,
    /// Fetched over the network (not a `file:` feed): every range list it names must be an
    /// `https://` URL (fetched from public addresses only), never a local file.
    pub remote: bool,
}

impl Default for FeedTrust {
    /// A remote feed with the defaults: no overrides, [`DEFAULT_MAX_LISTS`] lists.
    fn default() -> Self {
        FeedTrust {
            may_override: false,
            max_lists: DEFAULT_MAX_LISTS,
            remote: true,
        }
    }
}

/// Why a feed entry was refused; the `reason` label of
/// `robotsguard_catalogue_feed_entries_refused`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum RefusalReason {
    /// Its pattern is a browser's product or matches a browser's User-Agent.
    BrowserToken,
    /// `replace: true` on a built-in or `extra` entry, without `may_override`.
    Overrides,
    /// Its pattern holds a built-in or `extra` entry's pattern, so it would match in that
    /// entry's place (the longer match wins), without `may_override`.
    Hides,
    /// A remote feed names a range list that is not an `https://` URL.
    ListUrl,
    /// The lists it adds would take the feed past its `max_lists`.
    TooManyLists,
}

impl RefusalReason {
    /// Every reason, for metrics.
    pub const ALL: [RefusalReason; 5] = [
        RefusalReason::BrowserToken,
        RefusalReason::Overrides,
        RefusalReason::Hides,
        RefusalReason::ListUrl,
        RefusalReason::TooManyLists,
    ];

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalReason::BrowserToken => "browser_token",
            RefusalReason::Overrides => "overrides_builtin",
            RefusalReason::Hides => "hides_builtin",
            RefusalReason::ListUrl => "list_url",
            RefusalReason::TooManyLists => "too_many_lists",
        }
    }
}

/// A feed entry left out of the catalogue, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The feed (its configured `url`).
    pub feed: String,
    /// The entry's name.
    pub name: String,
    /// Why.
    pub reason: RefusalReason,
    /// Why, in words, for the log line (the feed's own text in it written `{:?}`).
    pub detail: String,
}

/// The entries of one feed that may join the catalogue, by `trust`, and the refused ones.
/// `protected` are the entries a feed must not replace or hide without `may_override`: the
/// built-in catalogue's and `crawlers.extra`'s.
pub(crate) fn screen<'a>(
    feed: &str,
    defs: &'a [CrawlerDef],
    trust: FeedTrust,
    protected: &[&CrawlerDef],
) -> (Vec<&'a CrawlerDef>, Vec<Refused>) {
    let mut refused_at: Vec<Option<(RefusalReason, String)>> = vec![None; defs.len()];
    let browsers = browser_matches(defs);
    let hidden = if trust.may_override {
        vec![None; defs.len()]
    } else {
        hidden_entries(defs, protected)
    };
    for (index, def) in defs.iter().enumerate() {
        let why = if let Some(why) = browsers[index].clone() {
            Some((RefusalReason::BrowserToken, why))
        } else if let Some(list) = trust.remote.then(|| bad_list(def)).flatten() {
            Some((
                RefusalReason::ListUrl,
                format!("a remote feed may name https:// range lists only, not {list:?}"),
            ))
        } else if !trust.may_override
            && def.replace
            && protected
                .iter()
                .any(|p| p.name.eq_ignore_ascii_case(&def.name))
        {
            Some((
                RefusalReason::Overrides,
                "`replace: true` on an entry of the built-in catalogue or `crawlers.extra` \
                 needs the feed's `may_override: true`"
                    .to_string(),
            ))
        } else {
            hidden[index].as_ref().map(|name| {
                (
                    RefusalReason::Hides,
                    format!(
                        "its pattern holds {name:?}'s, so it would match in that entry's place \
                         (allowed with the feed's `may_override: true`)"
                    ),
                )
            })
        };
        refused_at[index] = why;
    }
    // The list cap last, over the entries that pass the rest, in feed order.
    let mut lists: Vec<&str> = Vec::new();
    for (index, def) in defs.iter().enumerate() {
        if refused_at[index].is_some() {
            continue;
        }
        let Some(verify) = &def.verify else {
            continue;
        };
        let new: Vec<&str> = verify
            .ips
            .iter()
            .map(String::as_str)
            .filter(|list| !lists.contains(list))
            .fold(Vec::new(), |mut new, list| {
                if !new.contains(&list) {
                    new.push(list);
                }
                new
            });
        if lists.len() + new.len() > trust.max_lists {
            refused_at[index] = Some((
                RefusalReason::TooManyLists,
                format!(
                    "the feed names more than {} range lists (its `max_lists`)",
                    trust.max_lists
                ),
            ));
            continue;
        }
        lists.extend(new);
    }
    let mut kept = Vec::with_capacity(defs.len());
    let mut refused = Vec::new();
    for (def, why) in defs.iter().zip(refused_at) {
        match why {
            None => kept.push(def),
            Some((reason, detail)) => refused.push(Refused {
                feed: feed.to_string(),
                name: def.name.clone(),
                reason,
                detail,
            }),
        }
    }
    (kept, refused)
}

/// A range list of `def` that a remote feed may not name: anything but an `https://` URL.
fn bad_list(def: &CrawlerDef) -> Option<&str> {
    let verify = def.verify.as_ref()?;
    verify
        .ips
        .iter()
        .find(|list| {
            !list
                .get(..8)
                .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
        })
        .map(String::as_str)
}

/// Per entry of `defs`, why its pattern would match browsers (`None`: it would not).
fn browser_matches(defs: &[CrawlerDef]) -> Vec<Option<String>> {
    let mut out: Vec<Option<String>> = defs
        .iter()
        .map(|def| {
            BROWSER_TOKENS
                .iter()
                .find(|token| token.eq_ignore_ascii_case(&def.pattern))
                .map(|token| format!("its pattern is the browser product {token:?}"))
        })
        .collect();
    let Ok(automaton) = AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .match_kind(MatchKind::Standard)
        .build(defs.iter().map(|d| d.pattern.as_str()))
    else {
        // Too large to build: the catalogue refuses the same patterns when it compiles them.
        return out;
    };
    for user_agent in BROWSER_USER_AGENTS {
        let hay = user_agent.as_bytes();
        for m in automaton.find_overlapping_iter(hay) {
            let index = m.pattern().as_usize();
            if is_whole_word(hay, m.start(), m.end()) {
                if let Some(slot) = out.get_mut(index).filter(|slot| slot.is_none()) {
                    *slot = Some(format!(
                        "its pattern matches browsers' User-Agents (such as {user_agent:?})"
                    ));
                }
            }
        }
    }
    out
}

/// Per entry of `defs`, the protected entry whose pattern its own pattern holds as a whole word
/// (and is longer than): in a User-Agent naming it, the protected entry's match would be inside
/// this one's and no longer count.
fn hidden_entries(defs: &[CrawlerDef], protected: &[&CrawlerDef]) -> Vec<Option<String>> {
    let mut out = vec![None; defs.len()];
    if protected.is_empty() {
        return out;
    }
    let Ok(automaton) = AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .match_kind(MatchKind::Standard)
        .build(protected.iter().map(|d| d.pattern.as_str()))
    else {
        return out;
    };
    for (index, def) in defs.iter().enumerate() {
        let hay = def.pattern.as_bytes();
        let hidden = automaton
            .find_overlapping_iter(hay)
            .find(|m| m.len() < hay.len() && is_whole_word(hay, m.start(), m.end()));
        out[index] = hidden.and_then(|m| {
            protected
                .get(m.pattern().as_usize())
                .map(|p| p.name.clone())
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::{builtin_defs, VerifyData};
    use crate::category::Category;

    fn entry(name: &str, pattern: &str) -> CrawlerDef {
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
            feed: Some("f".into()),
        }
    }

    fn with_lists(name: &str, lists: &[&str]) -> CrawlerDef {
        CrawlerDef {
            verify: Some(VerifyData {
                ips: lists.iter().map(|l| l.to_string()).collect(),
                ..VerifyData::default()
            }),
            ..entry(name, name)
        }
    }

    fn reasons(refused: &[Refused]) -> Vec<(&str, RefusalReason)> {
        refused
            .iter()
            .map(|r| (r.name.as_str(), r.reason))
            .collect()
    }

    #[test]
    fn no_builtin_entry_matches_a_browser() {
        let builtin = builtin_defs().unwrap_or_default();
        assert!(builtin.len() > 100);
        let matches = browser_matches(&builtin);
        let hits: Vec<_> = builtin
            .iter()
            .zip(&matches)
            .filter(|(_, why)| why.is_some())
            .map(|(def, why)| (def.name.clone(), why.clone()))
            .collect();
        assert!(hits.is_empty(), "{hits:?}");
    }

    #[test]
    fn browser_products_and_patterns_that_match_browsers_are_refused() {
        let defs = vec![
            entry("Mozilla", "Mozilla"),
            entry("Gecko", "gecko"),
            entry("Edge", "Edge"),
            entry("Mozilla5", "Mozilla/5.0"),
            entry("Khtml", "KHTML, like Gecko"),
            entry("Mobile", "Mobile"),
            entry("Windows", "Windows NT"),
            entry("GeckoBot", "GeckoBot"),
            entry("NovaBot", "NovaBot"),
        ];
        let (kept, refused) = screen("f", &defs, FeedTrust::default(), &[]);
        let kept: Vec<&str> = kept.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(kept, ["GeckoBot", "NovaBot"]);
        assert!(refused
            .iter()
            .all(|r| r.reason == RefusalReason::BrowserToken));
        assert_eq!(refused.len(), 7);
        // `may_override` does not allow it.
        let trusted = FeedTrust {
            may_override: true,
            ..FeedTrust::default()
        };
        assert_eq!(screen("f", &defs, trusted, &[]).1.len(), 7);
    }

    #[test]
    fn replacing_or_hiding_a_protected_entry_needs_may_override() {
        let gptbot = entry("GPTBot", "GPTBot");
        let ours = entry("OurBot", "OurBot");
        let protected = [&gptbot, &ours];
        let mut replacing = entry("GPTBot", "GPTBot-nomatch");
        replacing.replace = true;
        let mut new_name = entry("FreshBot", "FreshBot");
        new_name.replace = true;
        let defs = vec![
            replacing,
            entry("Shadow", "GPTBot/1.0"),
            entry("Wrapper", "(compatible; ourbot"),
            entry("Glued", "GPTBotX"),
            new_name,
            entry("Same", "GPTBot"),
        ];
        let (kept, refused) = screen("f", &defs, FeedTrust::default(), &protected);
        assert_eq!(
            reasons(&refused),
            [
                ("GPTBot", RefusalReason::Overrides),
                ("Shadow", RefusalReason::Hides),
                ("Wrapper", RefusalReason::Hides),
            ]
        );
        // `GPTBotX` is another word; a same-pattern entry is a clash the merge leaves out.
        let kept: Vec<&str> = kept.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(kept, ["Glued", "FreshBot", "Same"]);
        let trusted = FeedTrust {
            may_override: true,
            ..FeedTrust::default()
        };
        assert!(screen("f", &defs, trusted, &protected).1.is_empty());
    }

    #[test]
    fn a_remote_feed_names_https_lists_only() {
        let defs = vec![
            with_lists("FileBot", &["file:/etc/passwd"]),
            with_lists("PlainBot", &["http://10.0.0.1/list.json"]),
            with_lists(
                "MixedBot",
                &["https://ok.example/a.json", "HTTP://x.example/b"],
            ),
            with_lists("GoodBot", &["https://ok.example/a.json"]),
        ];
        let (kept, refused) = screen("f", &defs, FeedTrust::default(), &[]);
        assert_eq!(kept.len(), 1);
        assert_eq!(
            reasons(&refused),
            [
                ("FileBot", RefusalReason::ListUrl),
                ("PlainBot", RefusalReason::ListUrl),
                ("MixedBot", RefusalReason::ListUrl),
            ]
        );
        // A local feed is the operator's: it may name local files.
        let local = FeedTrust {
            remote: false,
            ..FeedTrust::default()
        };
        assert!(screen("f", &defs, local, &[]).1.is_empty());
    }

    #[test]
    fn a_feed_names_at_most_max_lists_lists() {
        let defs: Vec<CrawlerDef> = (0..6)
            .map(|n| {
                let first = format!("https://l.example/{n}.json");
                let shared = "https://l.example/shared.json".to_string();
                with_lists(&format!("Bot{n}"), &[first.as_str(), shared.as_str()])
            })
            .collect();
        let trust = FeedTrust {
            max_lists: 4,
            ..FeedTrust::default()
        };
        let (kept, refused) = screen("f", &defs, trust, &[]);
        // Bot0 names two lists, Bot1 and Bot2 one more each: four; the rest would pass it.
        assert_eq!(kept.len(), 3);
        assert_eq!(refused.len(), 3);
        assert!(refused
            .iter()
            .all(|r| r.reason == RefusalReason::TooManyLists));
    }
}
