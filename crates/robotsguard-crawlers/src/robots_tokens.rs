//! Finds, in a User-Agent, the product tokens that one origin's robots.txt names in its `User-agent` lines, so crawlers missing from the catalogue still meet the group written for them.

use std::collections::HashSet;

use aho_corasick::{AhoCorasick, MatchKind};

use super::memo;
use super::verdicts::{FoundToken, TokenScan};
use super::words::{bounded_whole_words, is_whole_word, MAX_NAMES_CONSIDERED};
use robotsguard_robots::product_token;

/// Shortest robots.txt name the scanner uses. One- and two-letter names would match stray
/// fragments of ordinary UAs (`U` in `(Windows; U; ...)`, `NT`, `OS`).
pub const MIN_ROBOTS_TOKEN_LEN: usize = 3;

/// Words of ordinary browser and app User-Agents. A robots.txt that names one of them
/// (`User-agent: Mozilla` is seen in the wild) must not turn every visitor into a crawler, so
/// such names are left out of the scanner. Lower-case; compared case-insensitively.
const BROWSER_WORDS: &[&str] = &[
    "mozilla",
    "applewebkit",
    "khtml",
    "like",
    "gecko",
    "chrome",
    "chromium",
    "crios",
    "safari",
    "mobile",
    "version",
    "firefox",
    "fxios",
    "edg",
    "edga",
    "edgios",
    "edge",
    "opr",
    "opera",
    "opios",
    "vivaldi",
    "brave",
    "yabrowser",
    "yowser",
    "samsungbrowser",
    "ucbrowser",
    "qqbrowser",
    "miuibrowser",
    "huaweibrowser",
    "duckduckgo",
    "trident",
    "msie",
    "compatible",
    "windows",
    "linux",
    "android",
    "iphone",
    "ipad",
    "ipod",
    "cpu",
    "mac",
    "macintosh",
    "intel",
    "ubuntu",
    "fedora",
    "cros",
    "build",
    "gsa",
    "instagram",
    "fban",
    "fbav",
    "fbios",
    "line",
    "kakaotalk",
    "micromessenger",
    "baiduboxapp",
    "silk",
    "kindle",
    "playstation",
    "xbox",
    "nintendo",
    "smart-tv",
    "smarttv",
    "tizen",
    "webos",
    "crkey",
    "googletv",
    "dalvik",
    "cfnetwork",
    "darwin",
    "electron",
];

/// The product tokens named in one origin's robots.txt, compiled for matching against
/// User-Agents. Built when that robots.txt is compiled; immutable afterwards.
#[derive(Debug, Clone, Default)]
pub struct RobotsTokenScanner {
    /// Token `i` is pattern `i` of `automaton`.
    tokens: Vec<String>,
    automaton: Option<AhoCorasick>,
    /// Distinguishes this scanner's remembered answers ([`memo`]) from other scanners'.
    memo_owner: u64,
}

impl RobotsTokenScanner {
    /// Compile the `User-agent` values of a robots.txt. Each value is reduced as robots.txt
    /// matching reduces it, to its leading `[A-Za-z_-]` run (`FooBot/1.0` → `FooBot`); values
    /// that reduce to nothing (`*`, `360Spider`), to fewer than [`MIN_ROBOTS_TOKEN_LEN`] bytes,
    /// or to a word of ordinary browser UAs are skipped; repeats (case-insensitive) keep the
    /// first spelling.
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut seen = HashSet::new();
        let mut tokens = Vec::new();
        for name in names {
            let token = product_token(name);
            if token.len() < MIN_ROBOTS_TOKEN_LEN
                || BROWSER_WORDS.iter().any(|w| w.eq_ignore_ascii_case(token))
            {
                continue;
            }
            if seen.insert(token.to_ascii_lowercase()) {
                tokens.push(token.to_owned());
            }
        }
        if tokens.is_empty() {
            return Self::default();
        }
        let built = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(&tokens);
        match built {
            Ok(automaton) => Self {
                tokens,
                automaton: Some(automaton),
                memo_owner: memo::next_owner(),
            },
            // Only reachable past the automaton's size limits (an absurd robots.txt). Matching
            // nothing then is the safe side: the catalogue and generic rules still apply, and
            // compiling the rest of the robots.txt is not held up.
            Err(_) => Self::default(),
        }
    }

    /// The tokens the scanner looks for, as named (reduced) in robots.txt.
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// Whether the robots.txt names no product token at all.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The longest named token that occurs in `user_agent` as a whole word, ASCII
    /// case-insensitively (same word rule as the catalogue). Ties go to the leftmost
    /// occurrence, then to the token named first. Returns the token as robots.txt spells it.
    pub fn longest_whole_word(&self, user_agent: impl AsRef<[u8]>) -> Option<&str> {
        self.longest_whole_word_index(user_agent.as_ref())
            .and_then(|i| self.tokens.get(i))
            .map(String::as_str)
    }

    /// The number under which this scanner's answers are remembered per thread ([`memo`]);
    /// `None` for a scanner without tokens, which has nothing to find.
    pub(super) fn memo_owner(&self) -> Option<u64> {
        self.automaton.as_ref().map(|_| self.memo_owner)
    }

    /// What the scanner finds in `user_agent`, in the small form identification remembers:
    /// nothing, one named token (with where), or several (then [`Self::all_whole_words`] lists
    /// them).
    pub(super) fn scan(&self, user_agent: &[u8]) -> TokenScan {
        let all = self.all_whole_words(user_agent);
        match all.as_slice() {
            [] => TokenScan::None,
            [one] => TokenScan::One(*one),
            _ => TokenScan::Several,
        }
    }

    /// Every named token occurring in `user_agent` as a whole word and not inside a longer one,
    /// longest first (ties: the leftmost, then the one named first), each token once.
    pub(super) fn all_whole_words(&self, ua: &[u8]) -> Vec<FoundToken> {
        let Some(automaton) = self.automaton.as_ref() else {
            return Vec::new();
        };
        let Ok(matches) = automaton.try_find_overlapping_iter(ua) else {
            return Vec::new();
        };
        let mut found: Vec<FoundToken> = bounded_whole_words(ua, matches)
            .into_iter()
            .map(|(index, start, end)| FoundToken { index, start, end })
            .collect();
        // A name inside a longer name is part of it (`FooBot` in `FooBot-News/2.0`).
        let spans: Vec<(usize, usize)> = found.iter().map(|f| (f.start, f.end)).collect();
        found.retain(|f| {
            !spans.iter().any(|&(start, end)| {
                start <= f.start && f.end <= end && (end - start) > (f.end - f.start)
            })
        });
        found.sort_by_key(|f| (std::cmp::Reverse(f.end - f.start), f.start, f.index));
        let mut seen = Vec::with_capacity(found.len());
        found.retain(|f| {
            let first = !seen.contains(&f.index);
            seen.push(f.index);
            first
        });
        found.truncate(MAX_NAMES_CONSIDERED);
        found
    }

    /// The token `found` stands for, as robots.txt spells it.
    pub(super) fn token(&self, found: FoundToken) -> Option<&str> {
        self.tokens.get(found.index).map(String::as_str)
    }

    fn longest_whole_word_index(&self, ua: &[u8]) -> Option<usize> {
        let automaton = self.automaton.as_ref()?;
        let matches = automaton.try_find_overlapping_iter(ua).ok()?;
        let mut best: Option<(std::cmp::Reverse<usize>, usize, usize)> = None;
        for m in matches {
            if !is_whole_word(ua, m.start(), m.end()) {
                continue;
            }
            let key = (
                std::cmp::Reverse(m.len()),
                m.start(),
                m.pattern().as_usize(),
            );
            if best.is_none_or(|b| key < b) {
                best = Some(key);
            }
        }
        best.map(|(_, _, i)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduces_dedups_and_skips() {
        let s = RobotsTokenScanner::new([
            "*",
            "FooBot/1.0",
            "foobot",
            "Mozilla",
            "Chrome",
            "360Spider",
            "ab",
            "  Bar-Crawler  ",
            "archive.org_bot",
        ]);
        assert_eq!(s.tokens(), ["FooBot", "Bar-Crawler", "archive"]);
        assert!(!s.is_empty());
        assert!(RobotsTokenScanner::new(["*", "Mozilla"]).is_empty());
        assert!(RobotsTokenScanner::new(std::iter::empty()).is_empty());
    }

    #[test]
    fn longest_whole_word_wins() {
        let s = RobotsTokenScanner::new(["foo", "FooBar", "foobar-news", "baz"]);
        assert_eq!(
            s.longest_whole_word("Mozilla/5.0 (compatible; FOOBAR/2)"),
            Some("FooBar")
        );
        assert_eq!(s.longest_whole_word("foobar-news/1.0"), Some("foobar-news"));
        // `foo` inside `foobarx` is not a whole word; nor is `foobar`.
        assert_eq!(s.longest_whole_word("foobarx/1.0"), None);
        // Hyphen is a boundary, as in the catalogue.
        assert_eq!(s.longest_whole_word("foo-images/1.0"), Some("foo"));
        // Same length: leftmost.
        let s2 = RobotsTokenScanner::new(["aaa", "bbb"]);
        assert_eq!(s2.longest_whole_word("x bbb aaa"), Some("bbb"));
        assert_eq!(s2.longest_whole_word(b"x aaa bbb".as_slice()), Some("aaa"));
    }

    #[test]
    fn browser_uas_do_not_match_browser_words() {
        let s = RobotsTokenScanner::new(["Mozilla", "Safari", "Gecko", "Android", "Windows"]);
        let ua = "Mozilla/5.0 (Linux; Android 14) AppleWebKit/537.36 (KHTML, like Gecko) \
                  Chrome/124.0.0.0 Mobile Safari/537.36";
        assert_eq!(s.longest_whole_word(ua), None);
    }

    #[test]
    fn hostile_input() {
        let s = RobotsTokenScanner::new(["FooBot", "bot"]);
        let mut ua = "bot".repeat(30_000).into_bytes();
        ua.extend_from_slice(b"\x00\xff");
        assert_eq!(s.longest_whole_word(&ua), None);
        ua.extend_from_slice(b" foobot\x00");
        assert_eq!(s.longest_whole_word(&ua), Some("FooBot"));
    }

    #[test]
    fn a_scan_names_the_longest_token_or_says_there_are_several() {
        let news = RobotsTokenScanner::new(["FooBot", "FooBot-News"]);
        let other = RobotsTokenScanner::new(["BarCrawler"]);
        let first = b"FooBot-News/2.0 (+https://foo.example/)";
        match news.scan(first) {
            TokenScan::One(found) => assert_eq!(news.token(found), Some("FooBot-News")),
            scan => panic!("{scan:?}"),
        }
        assert_eq!(other.scan(first), TokenScan::None);
        let both = RobotsTokenScanner::new(["FooBot", "BarCrawler"]);
        assert_eq!(both.scan(b"BarCrawler/3 FooBot/1"), TokenScan::Several);
        // A scanner with no tokens has nothing to remember.
        assert_eq!(RobotsTokenScanner::new(["*"]).memo_owner(), None);
        assert!(news.memo_owner().is_some());
    }
}
