use super::*;

pub(crate) const FEED_FORMAT: Ty = Ty::Words(|| {
    crate::crawlers::feed::FeedFormat::ALL
        .iter()
        .map(|f| f.as_str())
        .collect()
});

pub(crate) static CRAWLERS: Section = Section {
    id: "crawlers",
    place: "in `crawlers`",
    title: "The crawler catalogue",
    doc: "",
    keys: &[
        key(
            "builtin",
            Ty::Bool,
            "`true`",
            "Use the built-in catalogue (`crates/robotsguard-crawlers/crawlers.yaml`).",
        ),
        key(
            "generic",
            Ty::Bool,
            "`true`",
            "Treat automated-looking User-Agents as crawlers under `*`.",
        ),
        key(
            "extra",
            Ty::List(&Ty::Section(&EXTRA_CRAWLER)),
            "`[]`",
            "More crawlers; an entry named like a built-in one replaces it.",
        ),
        key(
            "feeds",
            Ty::List(&Ty::Section(&FEED)),
            "`[]`",
            "Catalogue feeds, merged over the built-in catalogue while the proxy runs (built-in entries win unless a feed entry says `replace: true`; `extra` wins over both).",
        ),
    ],
};

pub(crate) static EXTRA_CRAWLER: Section = Section {
    id: "crawler",
    place: "in crawler",
    title: "A crawler of `crawlers.extra`",
    doc: "",
    keys: &[
        required("name", Ty::Str, "Unique; in logs, metrics and `{crawler}`."),
        key("tokens", Ty::OneOrList(&Ty::Str), "the name, lower-cased", "robots.txt product tokens it obeys, most specific first."),
        key("pattern", Ty::Str, "the name", "Literal text that identifies it in a User-Agent (whole word, case-insensitive, 3+ characters)."),
        key("category", Ty::Words(categories), "`other`", "Its category, as `policy.categories` names them."),
        key("operator", Ty::Str, "none", "Who runs it (shown by `identify`)."),
        key("ignores_global", Ty::Bool, "`false`", "Obeys only groups that name it, never `*` (like AdsBot)."),
        key("verify", Ty::Section(&CRAWLER_VERIFY), "none", "How its claim is checked."),
        key("purposes", Ty::List(&Ty::Words(purposes)), "from its category", "What its fetches are for: `search`, `training`, `agent`, `other`."),
        key("controls", Ty::MapOf { keys: Some(purposes), value: &Ty::Str }, "`{}`", "Per purpose, the robots.txt token its operator names for refusing that use without refusing the crawler (`{training: Example-Extended}`): a policy or content signal refusing the purpose then lets the crawler in and the served robots.txt carries a `Disallow: /` group for the token. Letters, `-` and `_`; the purpose must be one of its `purposes`."),
        key("ignores_crawl_delay", Ty::Bool, "`false`", "Its operator documents that it ignores Crawl-delay: the delay is reported, not enforced, unless `crawl_delay.crawlers` says otherwise."),
    ],
};

pub(crate) static CRAWLER_VERIFY: Section = Section {
    id: "crawler_verify",
    place: "in crawler `verify`",
    title: "A crawler's verification data",
    doc: "",
    keys: &[
        key("ips", Ty::OneOrList(&Ty::AnyOf(&[Ty::Str, Ty::Section(&RANGE_LIST)])), "none", "IP range lists: `http(s)://` URLs or `file:` paths (relative to the config file); the operators' JSON, the `ip_prefix` variant, JAFAR, or plain addresses and networks; or `{url, format}` for a list in another shape."),
        key("rdns", Ty::OneOrList(&Ty::Str), "none", "Reverse DNS suffixes (forward-confirmed, on a label boundary)."),
    ],
};

pub(crate) static RANGE_LIST: Section = Section {
    id: "range_list",
    place: "in an `ips` list",
    title: "A range list with its format",
    doc: "",
    keys: &[
        required("url", Ty::Str, "An `http(s)://` URL or a `file:` path."),
        key("format", Ty::AnyOf(&[Ty::Words(|| vec!["jafar"]), Ty::Section(&RANGE_LIST_FORMAT)]), "by the list's shape", "`jafar` (per-prefix `services`: a prefix vouches only for the crawlers it names), or a selector mapping."),
    ],
};

pub(crate) static RANGE_LIST_FORMAT: Section = Section {
    id: "range_list_format",
    place: "in a list `format`",
    title: "A range list selector",
    doc: "One of the two keys. At most 100,000 values or matches; more is a broken list.",
    keys: &[
        key(
            "json_pointer",
            Ty::Str,
            "none",
            "A JSON pointer whose `*` steps match every member, e.g. `/prefixes/*/ip_prefix`.",
        ),
        key(
            "regex",
            Ty::Str,
            "none",
            "A regular expression with exactly one capture group, for lists inside text or HTML.",
        ),
    ],
};

pub(crate) static FEED: Section = Section {
    id: "feed",
    place: "in feed",
    title: "A catalogue feed",
    doc: "Fetched at start and every `refresh` (conditional requests, backoff from 10 s on failure, at most 4 MiB); a copy that does not parse never replaces the last good one.",
    keys: &[
        required("url", Ty::Str, "An http(s) URL, or `file:path` (relative to the config file; checked by `validate` and `serve`, re-read when it changes)."),
        key("format", FEED_FORMAT, "`robotsguard`", "`robotsguard` (the schema of `crates/robotsguard-crawlers/crawlers.yaml`) or `ai-robots-txt` (the ai.robots.txt project's `robots.json`, its `function` mapped to a category and purposes)."),
        key("refresh", Ty::Duration, "`24h`", "How often it is fetched again (at least `1s`)."),
        key("may_override", Ty::Bool, "`false`", "Whether its entries may take the place of a built-in or `crawlers.extra` entry (`replace: true`) or hide one (a pattern holding that entry's pattern, such as `GPTBot/1.0`). Without it such entries are refused, counted in `robotsguard_catalogue_feed_entries_refused` and logged; the rest of the feed applies. No feed entry may match browsers (`Mozilla`, `Chrome`, `Safari`, `Firefox`, `Edge`, `AppleWebKit`, `Gecko`, or any pattern a common browser's User-Agent holds)."),
        key("max_lists", Ty::Int { min: 0, max: 10_000 }, "`32`", "The most distinct IP range lists its entries may name (each up to 8 MiB, held in memory); entries that would name more are refused. A feed fetched over the network may name `https://` lists only, fetched from public addresses only (see `verify.ranges.private_origins`); a `file:` feed may also name `http://` URLs and local files."),
    ],
};
