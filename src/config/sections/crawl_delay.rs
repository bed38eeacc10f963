//! `crawl_delay`: what happens to crawlers that come faster than robots.txt's Crawl-delay.

use super::*;

pub(crate) static CRAWL_DELAY: Section = Section {
    id: "crawl_delay",
    place: "in `crawl_delay`",
    title: "Crawl-delay",
    doc: "robots.txt's `Crawl-delay` as a rate limit per crawler and client network (`prefix`).",
    keys: &[
        key("action", Ty::Words(|| names(&CRAWL_DELAY_ACTIONS)), "`enforce`", "`enforce` (a request sooner than its group's delay after the previous admitted one gets `429` with `Retry-After`), `report` (proxied, counted `would_limit`), `ignore`."),
        key("max", Ty::Duration, "`60s`", "Longer delays are taken as this long."),
        key("crawlers", Ty::MapOf { keys: None, value: &Ty::Words(|| names(&CRAWL_DELAY_ACTIONS)) }, "`report` for crawlers the catalogue marks as ignoring Crawl-delay (the Google family, Applebot, Amazonbot), `action` for the rest", "Per crawler, by catalogue name: `enforce`, `report` or `ignore`."),
        key("prefix", Ty::Section(&CLIENT_PREFIX), "`{ipv4: 32, ipv6: 64}`", "The network a budget of an unverified crawler is kept for: every address of one network shares it (an IPv6 crawler moving within its /64 gets no new budget)."),
    ],
};

/// `crawl_delay`: robots.txt's `Crawl-delay` as a rate limit.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CrawlDelayConfig {
    /// What is done with a request that comes sooner than its crawler's delay.
    pub action: CrawlDelayAction,
    /// Longer delays are taken as this long.
    pub max: Duration,
    /// `crawl_delay.crawlers`: the action per crawler (as the catalogue spells its name),
    /// winning over `action` and over the catalogue's mark for crawlers that ignore
    /// `Crawl-delay`.
    pub crawlers: Vec<(String, CrawlDelayAction)>,
    /// The network a budget of an unverified crawler is kept for.
    pub prefix: ClientPrefix,
}

impl Default for CrawlDelayConfig {
    fn default() -> Self {
        CrawlDelayConfig {
            action: CrawlDelayAction::Enforce,
            max: Duration::from_secs(60),
            crawlers: Vec::new(),
            prefix: ClientPrefix::default(),
        }
    }
}

impl CrawlDelayConfig {
    /// The action for crawler `name`: its own entry in `crawlers`; else `report` for a crawler
    /// documented to ignore `Crawl-delay` (a 429 would slow its whole crawl of the site), unless
    /// `action` is `ignore`; else `action`.
    pub fn action_for(&self, name: &str, ignores_crawl_delay: bool) -> CrawlDelayAction {
        if let Some((_, action)) = self
            .crawlers
            .iter()
            .find(|(crawler, _)| crawler.eq_ignore_ascii_case(name))
        {
            return *action;
        }
        match self.action {
            CrawlDelayAction::Enforce if ignores_crawl_delay => CrawlDelayAction::Report,
            action => action,
        }
    }
}

/// `crawl_delay.action`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CrawlDelayAction {
    /// Answer 429 with `Retry-After`.
    Enforce,
    /// Proxy it, counted as `would_limit`.
    Report,
    /// `Crawl-delay` lines are not read.
    Ignore,
}

impl CrawlDelayAction {
    /// The spelling used in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            CrawlDelayAction::Enforce => "enforce",
            CrawlDelayAction::Report => "report",
            CrawlDelayAction::Ignore => "ignore",
        }
    }
}

/// The spellings of `crawl_delay.action`.
pub(crate) const CRAWL_DELAY_ACTIONS: [(&str, crate::config::CrawlDelayAction); 3] = [
    ("enforce", crate::config::CrawlDelayAction::Enforce),
    ("report", crate::config::CrawlDelayAction::Report),
    ("ignore", crate::config::CrawlDelayAction::Ignore),
];

/// Reads a `crawl_delay` section over `base`, key by key.
pub(crate) fn crawl_delay(
    sink: &mut Sink,
    node: Option<&Node>,
    base: &crate::config::CrawlDelayConfig,
    known: &KnownCrawlers,
) -> crate::config::CrawlDelayConfig {
    let mut out = base.clone();
    let Some(table) = node.and_then(|n| Table::read(sink, n, &CRAWL_DELAY, "`crawl_delay`")) else {
        return out;
    };
    for (key, key_pos, value) in map_entries(sink, table.get("crawlers"), "crawlers") {
        // A typo would silently leave the crawler on the default: unknown names are errors.
        let Some(name) = known.find(key) else {
            sink.error_hint(
                key_pos,
                format!("no crawler is named {}{}", quote(key), known.suggest(key)),
                "use a name from `robotsguard identify` or crates/robotsguard-crawlers/crawlers.yaml, or add it under `crawlers.extra`",
            );
            continue;
        };
        if let Some(action) = reader::choice(sink, value, key, &CRAWL_DELAY_ACTIONS) {
            out.crawlers
                .retain(|(existing, _)| !existing.eq_ignore_ascii_case(name));
            out.crawlers.push((name.to_owned(), action));
        }
    }
    if let Some(action) = table
        .get("action")
        .and_then(|n| reader::choice(sink, n, "action", &CRAWL_DELAY_ACTIONS))
    {
        out.action = action;
    }
    if let Some(max) = table
        .get("max")
        .and_then(|n| positive_duration(sink, n, "max"))
    {
        out.max = max;
    }
    if let Some(node) = table.get("prefix") {
        out.prefix = client_prefix(sink, Some(node), out.prefix);
    }
    out
}
