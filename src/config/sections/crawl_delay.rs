use super::*;

pub(crate) static CRAWL_DELAY: Section = Section {
    id: "crawl_delay",
    place: "in `crawl_delay`",
    title: "Crawl-delay",
    doc: "robots.txt's `Crawl-delay` as a rate limit per crawler and client address.",
    keys: &[
        key("action", Ty::Words(|| names(&crate::config::origin::CRAWL_DELAY_ACTIONS)), "`enforce`", "`enforce` (a request sooner than its group's delay after the previous admitted one gets `429` with `Retry-After`), `report` (proxied, counted `would_limit`), `ignore`."),
        key("max", Ty::Duration, "`60s`", "Longer delays are taken as this long."),
        key("crawlers", Ty::MapOf { keys: None, value: &Ty::Words(|| names(&crate::config::origin::CRAWL_DELAY_ACTIONS)) }, "`report` for crawlers the catalogue marks as ignoring Crawl-delay (the Google family, Applebot, Amazonbot), `action` for the rest", "Per crawler, by catalogue name: `enforce`, `report` or `ignore`."),
    ],
};
