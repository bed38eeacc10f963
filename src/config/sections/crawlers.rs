//! `crawlers`: the built-in catalogue, generic bots, the operator's own crawlers and catalogue feeds; a crawler's `verify` lists.

use super::*;

pub(crate) const FEED_FORMAT_WORDS: Ty = Ty::Words(|| {
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
        key("format", FEED_FORMAT_WORDS, "`robotsguard`", "`robotsguard` (the schema of `crates/robotsguard-crawlers/crawlers.yaml`) or `ai-robots-txt` (the ai.robots.txt project's `robots.json`, its `function` mapped to a category and purposes)."),
        key("refresh", Ty::Duration, "`24h`", "How often it is fetched again (at least `1s`)."),
        key("may_override", Ty::Bool, "`false`", "Whether its entries may take the place of a built-in or `crawlers.extra` entry (`replace: true`) or hide one (a pattern holding that entry's pattern, such as `GPTBot/1.0`). Without it such entries are refused, counted in `robotsguard_catalogue_feed_entries_refused` and logged; the rest of the feed applies. No feed entry may match browsers (`Mozilla`, `Chrome`, `Safari`, `Firefox`, `Edge`, `AppleWebKit`, `Gecko`, or any pattern a common browser's User-Agent holds)."),
        key("max_lists", Ty::Int { min: 0, max: 10_000 }, "`32`", "The most distinct IP range lists its entries may name (each up to 8 MiB, held in memory); entries that would name more are refused. A feed fetched over the network may name `https://` lists only, fetched from public addresses only (see `verify.ranges.private_origins`); a `file:` feed may also name `http://` URLs and local files."),
    ],
};

/// Which crawlers are recognised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrawlersConfig {
    /// Use the built-in crawler catalogue.
    pub builtin: bool,
    /// Treat User-Agents that look automated but match no known crawler as
    /// crawlers bound by the robots.txt `*` group.
    pub generic: bool,
    /// Crawlers added by the operator, in file order; names are unique.
    pub extra: Vec<ExtraCrawler>,
    /// Catalogue feeds (`crawlers.feeds`), in file order; urls are unique.
    pub feeds: Vec<FeedConfig>,
}

/// One `crawlers.feeds` entry: where a feed of catalogue entries is published and how.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FeedConfig {
    /// An `http(s)://` URL, or `file:` and an absolute path; also the feed's name in metrics,
    /// logs, `identify` and `/explain`.
    pub url: String,
    /// How it is written.
    pub format: crate::crawlers::feed::FeedFormat,
    /// How often it is fetched (or, for a file, read) again; default 24 hours.
    pub refresh: Duration,
    /// `may_override`: its entries may replace (`replace: true`) or hide an entry of the
    /// built-in catalogue or `crawlers.extra`; default `false`.
    pub may_override: bool,
    /// `max_lists`: the most distinct range lists its entries may name; default 32.
    pub max_lists: usize,
}

impl FeedConfig {
    /// The file it is read from, for a `file:` feed.
    pub fn file(&self) -> Option<&std::path::Path> {
        self.url.strip_prefix("file:").map(std::path::Path::new)
    }

    /// What the feed's entries may do (see [`crate::crawlers::feed::FeedTrust`]): a feed
    /// fetched over the network names https range lists only.
    pub fn trust(&self) -> crate::crawlers::feed::FeedTrust {
        crate::crawlers::feed::FeedTrust {
            may_override: self.may_override,
            max_lists: self.max_lists,
            remote: self.file().is_none(),
        }
    }
}

/// An operator-defined crawler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtraCrawler {
    /// The name logs, metrics and `policy.crawlers` use.
    pub name: String,
    /// The robots.txt product tokens (`User-agent:` values) this crawler
    /// obeys, lower-cased; never empty. Defaults to the name, lower-cased.
    pub tokens: Vec<String>,
    /// The text that identifies this crawler in a User-Agent header.
    /// Defaults to the name.
    pub pattern: String,
    /// Defaults to `other`.
    pub category: Category,
    /// Who runs it, for `/explain` and logs.
    pub operator: Option<String>,
    /// The crawler does not obey the `*` group, only groups naming it.
    pub ignores_global: bool,
    /// Where its operator publishes who it is (`file:` paths made absolute).
    pub verify: Option<VerifyData>,
    /// What its fetches are for; empty: derived from `category`.
    pub purposes: Vec<crate::crawlers::Purpose>,
    /// Per purpose, the robots.txt token its operator names for refusing that use without
    /// refusing the crawler.
    pub controls: crate::crawlers::purpose::PurposeControls,
    /// Its operator documents that it ignores `Crawl-delay` (reported, not enforced, unless
    /// `crawl_delay.crawlers` says otherwise).
    pub ignores_crawl_delay: bool,
}

impl CrawlersConfig {
    /// The catalogue entries this config asks for: the built-in ones (unless `builtin: false`),
    /// with each `extra` entry appended or replacing the built-in one of the same name. Checked by
    /// [`crate::crawlers::Catalogue::new`], which `load_*` already ran on it.
    pub fn catalogue_defs(&self) -> Result<Vec<CrawlerDef>, CatalogueError> {
        self.catalogue_defs_with(None).map(|merged| merged.defs)
    }

    /// [`CrawlersConfig::catalogue_defs`] with the copies in force of the configured feeds
    /// merged in (see [`crate::crawlers::feed`]), each feed under its own rules, with the feed
    /// entries left out (clashes) and refused (the feed's rules).
    pub fn catalogue_defs_with(
        &self,
        feeds: Option<&crate::crawlers::feed::FeedStore>,
    ) -> Result<crate::crawlers::feed::Merged, CatalogueError> {
        let builtin: Vec<CrawlerDef> = if self.builtin {
            builtin_defs()?
        } else {
            Vec::new()
        };
        let copies: Vec<_> = feeds.map_or_else(Vec::new, |store| {
            self.feeds
                .iter()
                .filter_map(|feed| Some((feed, store.get(&feed.url)?)))
                .collect()
        });
        let inputs: Vec<crate::crawlers::feed::FeedInput<'_>> = copies
            .iter()
            .map(|(feed, copy)| crate::crawlers::feed::FeedInput {
                feed: &feed.url,
                defs: &copy.defs,
                trust: feed.trust(),
            })
            .collect();
        let extra = self.extra.iter().map(ExtraCrawler::to_def).collect();
        Ok(crate::crawlers::feed::merge(builtin, &inputs, extra))
    }
}

impl ExtraCrawler {
    fn to_def(&self) -> CrawlerDef {
        CrawlerDef {
            name: self.name.clone(),
            tokens: self.tokens.iter().map(|t| t.to_ascii_lowercase()).collect(),
            pattern: self.pattern.clone(),
            category: self.category,
            operator: self.operator.clone().unwrap_or_default(),
            ignores_global: self.ignores_global,
            verify: self.verify.clone(),
            purposes: self.purposes.clone(),
            controls: self.controls.clone(),
            ignores_crawl_delay: self.ignores_crawl_delay,
            signing_agents: Vec::new(),
            source: String::new(),
            replace: false,
            feed: None,
        }
    }
}

/// Where an `extra` crawler's name and pattern are written, for catalogue errors.
pub(crate) struct ExtraPositions {
    name: Pos,
    pattern: Pos,
}

/// Builds the catalogue exactly as `serve` will, so `validate` refuses what it would (a name
/// `other`, a pattern that a built-in entry already has, ...), each error at its entry. Returns
/// the crawler names a `policy` may use.
pub(crate) fn check_catalogue(
    sink: &mut Sink,
    crawlers: &CrawlersConfig,
    positions: &[ExtraPositions],
    report: bool,
) -> KnownCrawlers {
    let defs = match crawlers.catalogue_defs() {
        Ok(defs) => defs,
        Err(e) => {
            sink.error(Pos::UNKNOWN, format!("the built-in crawler catalogue: {e}"));
            return KnownCrawlers::default();
        }
    };
    let names = KnownCrawlers {
        names: defs.iter().map(|d| d.name.clone()).collect(),
        // Feeds add crawlers while running: a policy may name one before it is there.
        open: !crawlers.feeds.is_empty(),
    };
    if !report {
        return names;
    }
    // The extra entries are the last ones, in file order.
    let first_extra = defs.len() - crawlers.extra.len();
    let extra_at = |index: usize| {
        index
            .checked_sub(first_extra)
            .and_then(|i| positions.get(i))
    };
    let named = |name: &str| {
        crawlers
            .extra
            .iter()
            .position(|e| e.name.eq_ignore_ascii_case(name))
            .and_then(|i| positions.get(i))
    };
    match crate::crawlers::Catalogue::new(defs) {
        Ok(_) => {}
        Err(CatalogueError::Invalid {
            index,
            name,
            reason,
        }) => {
            let pos = extra_at(index).map_or(Pos::UNKNOWN, |p| {
                if reason.contains("pattern") {
                    p.pattern
                } else {
                    p.name
                }
            });
            sink.error(pos, format!("crawler {}: {reason}", quote(&name)));
        }
        Err(CatalogueError::DuplicatePattern {
            pattern,
            first,
            second,
        }) => {
            let pos = named(&second)
                .or_else(|| named(&first))
                .map_or(Pos::UNKNOWN, |p| p.pattern);
            sink.error_hint(
                pos,
                format!(
                    "crawler {}'s pattern {} is already the pattern of {}",
                    quote(&second),
                    quote(&pattern),
                    quote(&first)
                ),
                "give it a pattern of its own, or name it like that crawler to replace it",
            );
        }
        Err(e) => {
            let pos = positions.first().map_or(Pos::UNKNOWN, |p| p.name);
            sink.error(pos, format!("crawler catalogue: {e}"));
        }
    }
    names
}

/// `crawlers`, over the given defaults, and where each `extra` entry's name and pattern are.
pub(crate) fn crawlers(
    sink: &mut Sink,
    node: Option<&Node>,
    mut out: CrawlersConfig,
    base_dir: &Path,
) -> (CrawlersConfig, Vec<ExtraPositions>) {
    let mut positions = Vec::new();
    let Some(table) = node.and_then(|n| Table::read(sink, n, &CRAWLERS, "`crawlers`")) else {
        return (out, positions);
    };
    if let Some(b) = table
        .get("builtin")
        .and_then(|n| reader::boolean(sink, n, "builtin"))
    {
        out.builtin = b;
    }
    if let Some(b) = table
        .get("generic")
        .and_then(|n| reader::boolean(sink, n, "generic"))
    {
        out.generic = b;
    }
    if let Some(n) = table.get("feeds") {
        out.feeds = feeds(sink, n, base_dir);
    }
    let items = table
        .get("extra")
        .and_then(|n| reader::list(sink, n, "extra"))
        .unwrap_or_default();
    // Names compare case-insensitively: two crawlers told apart only by case
    // would be confusing in logs and metrics.
    let mut seen: HashMap<String, Pos> = HashMap::new();
    for item in items {
        let Some((crawler, name_pos)) = extra_crawler(sink, item, base_dir) else {
            continue;
        };
        let pattern_pos = Table::read(&mut Sink::new(""), item, &EXTRA_CRAWLER, "")
            .and_then(|t| t.get("pattern").map(|n| n.pos))
            .unwrap_or(name_pos);
        let folded = crawler.name.to_lowercase();
        if let Some(first) = seen.get(&folded) {
            sink.error(
                name_pos,
                format!(
                    "crawler {} is defined twice (first at {})",
                    quote(&crawler.name),
                    at(*first)
                ),
            );
            continue;
        }
        seen.insert(folded, name_pos);
        out.extra.push(crawler);
        positions.push(ExtraPositions {
            name: name_pos,
            pattern: pattern_pos,
        });
    }
    (out, positions)
}

/// The most range lists a feed may be allowed (`max_lists`): each list may hold megabytes.
const MAX_FEED_LISTS: i128 = 10_000;

/// `crawlers.feeds`: each `{url, format, refresh, may_override, max_lists}`, urls unique,
/// `file:` paths made absolute.
fn feeds(sink: &mut Sink, node: &Node, base_dir: &Path) -> Vec<crate::config::FeedConfig> {
    use crate::crawlers::feed::FeedFormat;
    let mut out: Vec<crate::config::FeedConfig> = Vec::new();
    let formats: Vec<(&'static str, FeedFormat)> =
        FeedFormat::ALL.iter().map(|f| (f.as_str(), *f)).collect();
    for item in reader::list(sink, node, "feeds").unwrap_or_default() {
        let Some(table) = Table::read(sink, item, &FEED, "each feed") else {
            continue;
        };
        let Some(url_node) = table.get("url") else {
            sink.error_hint(
                table.pos,
                "feed is missing `url`",
                "e.g. url: https://example.com/crawlers.yaml, or url: \"file:feeds/crawlers.yaml\"",
            );
            continue;
        };
        let Some(text) = reader::nonempty_string(sink, url_node, "url") else {
            continue;
        };
        let url = match text.strip_prefix("file:") {
            Some("") => {
                sink.error(url_node.pos, format!("feed {} names no file", quote(text)));
                continue;
            }
            Some(path) => format!("file:{}", base_dir.join(path).display()),
            None => match url::Url::parse(text) {
                Ok(parsed)
                    if matches!(parsed.scheme(), "http" | "https")
                        && parsed.host_str().is_some() =>
                {
                    text.to_owned()
                }
                _ => {
                    sink.error_hint(
                        url_node.pos,
                        format!(
                            "feed {} is neither an http(s) URL nor a file: path",
                            quote(text)
                        ),
                        "write an http(s) URL or file:path/to/feed (relative to this file)",
                    );
                    continue;
                }
            },
        };
        let format = match table.get("format") {
            Some(n) => match reader::choice(sink, n, "format", &formats) {
                Some(format) => format,
                None => continue,
            },
            None => FeedFormat::Robotsguard,
        };
        let refresh = match table.get("refresh") {
            Some(n) => match reader::duration(sink, n, "refresh") {
                Some(d) if d >= Duration::from_secs(1) => d,
                Some(_) => {
                    sink.error(n.pos, "a feed's `refresh` must be at least 1s");
                    continue;
                }
                None => continue,
            },
            None => Duration::from_secs(24 * 3600),
        };
        let may_override = match table.get("may_override") {
            Some(n) => match reader::boolean(sink, n, "may_override") {
                Some(b) => b,
                None => continue,
            },
            None => false,
        };
        let max_lists = match table.get("max_lists") {
            Some(n) => match reader::integer(sink, n, "max_lists", 0, MAX_FEED_LISTS) {
                Some(n) => usize::try_from(n).unwrap_or(0),
                None => continue,
            },
            None => crate::crawlers::feed::DEFAULT_MAX_LISTS,
        };
        if out.iter().any(|feed| feed.url == url) {
            sink.error(
                url_node.pos,
                format!("feed {} is listed twice", quote(text)),
            );
            continue;
        }
        out.push(crate::config::FeedConfig {
            url,
            format,
            refresh,
            may_override,
            max_lists,
        });
    }
    out
}

/// One `crawlers.extra` entry and the position of its name.
fn extra_crawler(sink: &mut Sink, node: &Node, base_dir: &Path) -> Option<(ExtraCrawler, Pos)> {
    let table = Table::read(sink, node, &EXTRA_CRAWLER, "each `extra` crawler")?;
    let name_node = table.get("name");
    let name = match name_node {
        Some(n) => reader::nonempty_string(sink, n, "name").and_then(|name| {
            if name.chars().count() > MAX_NAME_LEN || name.chars().any(char::is_control) {
                sink.error(
                    n.pos,
                    format!("crawler name must be at most {MAX_NAME_LEN} characters, without control characters"),
                );
                return None;
            }
            Some(name)
        }),
        None => {
            sink.error_hint(table.pos, "crawler is missing `name`", "e.g. name: ExampleBot");
            None
        }
    };

    let tokens = match table.get("tokens") {
        Some(n) => {
            let items = reader::one_or_many(n);
            if items.is_empty() {
                sink.error(n.pos, "`tokens` must list at least one product token");
            }
            let mut tokens = Vec::with_capacity(items.len());
            for item in items {
                let Some(token) = reader::nonempty_string(sink, item, "tokens") else {
                    continue;
                };
                if is_product_token(token) {
                    tokens.push(token.to_ascii_lowercase());
                } else {
                    sink.error_hint(
                        item.pos,
                        format!("token {} is not a robots.txt product token", quote(token)),
                        "tokens have only letters, digits, `-` and `_`",
                    );
                }
            }
            tokens
        }
        None => match name {
            Some(name) if is_product_token(name) => vec![name.to_ascii_lowercase()],
            Some(name) => {
                sink.error_hint(
                    table.pos,
                    format!("crawler {} needs `tokens`", quote(name)),
                    "its name is not a product token (letters, digits, `-`, `_`), so list the User-agent tokens it obeys",
                );
                Vec::new()
            }
            None => Vec::new(),
        },
    };

    let pattern = match table.get("pattern") {
        Some(n) => reader::nonempty_string(sink, n, "pattern").and_then(|p| {
            // A one- or two-letter pattern would match nearly every
            // User-Agent and turn all visitors into this crawler.
            if p.chars().count() < 3 {
                sink.error(n.pos, "`pattern` must be at least 3 characters");
                return None;
            }
            Some(p.to_owned())
        }),
        None => name.map(str::to_owned),
    };

    let categories: Vec<(&'static str, Category)> =
        Category::ALL.iter().map(|c| (c.as_str(), *c)).collect();
    let category = table
        .get("category")
        .and_then(|n| reader::choice(sink, n, "category", &categories))
        .unwrap_or(Category::Other);
    let operator = table
        .get("operator")
        .and_then(|n| reader::nonempty_string(sink, n, "operator"))
        .map(str::to_owned);
    let ignores_global = table
        .get("ignores_global")
        .and_then(|n| reader::boolean(sink, n, "ignores_global"))
        .unwrap_or(false);
    let verify = match table.get("verify") {
        Some(n) => Some(crawler_verify(sink, n, base_dir)?),
        None => None,
    };
    let purposes = table
        .get("purposes")
        .map(|n| purpose_list(sink, n))
        .unwrap_or_default();
    let ignores_crawl_delay = table
        .get("ignores_crawl_delay")
        .and_then(|n| reader::boolean(sink, n, "ignores_crawl_delay"))
        .unwrap_or(false);
    let controls = table
        .get("controls")
        .map(|n| {
            let served = if purposes.is_empty() {
                crate::crawlers::Purposes::from_category(category)
            } else {
                crate::crawlers::Purposes::of(&purposes)
            };
            purpose_controls(sink, n, served, &tokens)
        })
        .unwrap_or_default();

    let crawler = ExtraCrawler {
        name: name?.to_owned(),
        tokens,
        pattern: pattern?,
        category,
        operator,
        ignores_global,
        verify,
        purposes,
        controls,
        ignores_crawl_delay,
    };
    Some((crawler, name_node.map_or(table.pos, |n| n.pos)))
}

/// Product tokens: RFC 9309 allows letters, `-` and `_`; digits are
/// accepted too because real crawlers use them (`360Spider`).
fn is_product_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A crawler's `verify` mapping: `ips` (URLs or `file:` paths relative to the config) and
/// `rdns` suffixes.
pub(crate) fn crawler_verify(sink: &mut Sink, node: &Node, base_dir: &Path) -> Option<VerifyData> {
    let table = Table::read(sink, node, &CRAWLER_VERIFY, "crawler `verify`")?;
    let mut out = VerifyData::default();
    let mut ok = true;
    if let Some(n) = table.get("ips") {
        for item in reader::one_or_many(n) {
            // `{url: ..., format: ...}`: a list read other than by its shape.
            let (item, format) = match &item.value {
                crate::config::tree::Value::Map(_) => match list_with_format(sink, item) {
                    Some(pair) => pair,
                    None => {
                        ok = false;
                        continue;
                    }
                },
                _ => (item, crate::crawlers::ListFormat::Auto),
            };
            let Some(text) = reader::nonempty_string(sink, item, "ips") else {
                ok = false;
                continue;
            };
            match list_source(text, base_dir) {
                Ok(source) => {
                    if !format.is_auto() {
                        out.formats.push((source.clone(), format));
                    }
                    out.ips.push(source);
                }
                Err(why) => {
                    ok = false;
                    sink.error_hint(
                        item.pos,
                        format!("{} {why}", quote(text)),
                        "write an http(s) URL or file:path/to/list.json (relative to this file)",
                    );
                }
            }
        }
    }
    if let Some(n) = table.get("rdns") {
        for item in reader::one_or_many(n) {
            let Some(text) = reader::nonempty_string(sink, item, "rdns") else {
                ok = false;
                continue;
            };
            match dns_suffix(text) {
                Some(suffix) => out.rdns.push(suffix),
                None => {
                    ok = false;
                    sink.error_hint(
                        item.pos,
                        format!("{} is not a DNS name suffix", quote(text)),
                        "write the domain the crawler's reverse DNS names end in, e.g. googlebot.com",
                    );
                }
            }
        }
    }
    if out.ips.is_empty() && out.rdns.is_empty() && ok {
        sink.error_hint(
            table.pos,
            "`verify` names no `ips` and no `rdns`",
            "leave `verify` out for a crawler that cannot be verified",
        );
        return None;
    }
    ok.then_some(out)
}

/// An `ips` entry as stored: the URL as written, or `file:` and the absolute path.
/// An `ips` item written `{url, format}`: the url's node and the format (`jafar`, `auto`,
/// `{json_pointer: "/prefixes/*/ip_prefix"}` or `{regex: "..."}` with one capture group).
fn list_with_format<'a>(
    sink: &mut Sink,
    node: &'a Node,
) -> Option<(&'a Node, crate::crawlers::ListFormat)> {
    use crate::crawlers::ListFormat;
    let table = Table::read(
        sink,
        node,
        &crate::config::sections::RANGE_LIST,
        "an `ips` list",
    )?;
    let Some(url) = table.get("url") else {
        sink.error_hint(
            table.pos,
            "list is missing `url`",
            "e.g. {url: \"https://example.com/ips.html\", format: {regex: \"ip: ([0-9./]+)\"}}",
        );
        return None;
    };
    let format = match table.get("format") {
        None => ListFormat::Auto,
        Some(f) => match &f.value {
            crate::config::tree::Value::Str(word) if word == "auto" || word == "json" => {
                ListFormat::Auto
            }
            crate::config::tree::Value::Str(word) if word == "jafar" => ListFormat::Jafar,
            crate::config::tree::Value::Map(_) => {
                let inner = Table::read(
                    sink,
                    f,
                    &crate::config::sections::RANGE_LIST_FORMAT,
                    "a list `format`",
                )?;
                let pointer = inner.get("json_pointer");
                let regex = inner.get("regex");
                let format = match (pointer, regex) {
                    (Some(p), None) => ListFormat::JsonPointer(
                        reader::nonempty_string(sink, p, "json_pointer")?.to_owned(),
                    ),
                    (None, Some(r)) => {
                        ListFormat::Regex(reader::nonempty_string(sink, r, "regex")?.to_owned())
                    }
                    _ => {
                        sink.error(f.pos, "a list `format` is one of `json_pointer` or `regex`");
                        return None;
                    }
                };
                if let Err(e) = crate::crawlers::check_format(&format) {
                    sink.error(f.pos, e.to_string());
                    return None;
                }
                format
            }
            _ => {
                sink.error_hint(
                    f.pos,
                    "a list `format` is `auto`, `jafar`, `{json_pointer: ...}` or `{regex: ...}`",
                    "e.g. format: {json_pointer: \"/prefixes/*/ip_prefix\"}",
                );
                return None;
            }
        },
    };
    Some((url, format))
}

pub(crate) fn list_source(text: &str, base_dir: &Path) -> Result<String, &'static str> {
    if let Some(path) = text.strip_prefix("file:") {
        if path.is_empty() {
            return Err("names no file");
        }
        return Ok(format!("file:{}", base_dir.join(path).display()));
    }
    let url = url::Url::parse(text).map_err(|_| "is neither a URL nor a file: path")?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err("is not an http(s) URL");
    }
    Ok(text.to_owned())
}

/// A reverse DNS suffix, lower-cased, without a trailing dot: labels of letters, digits and
/// `-`, at least two labels (a bare `com` would admit any `.com` name).
pub(crate) fn dns_suffix(text: &str) -> Option<String> {
    let lower = text.trim_end_matches('.').to_ascii_lowercase();
    let labels: Vec<&str> = lower.split('.').collect();
    let good = labels.len() >= 2
        && lower.len() <= 253
        && labels.iter().all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    good.then_some(lower)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_suffixes() {
        assert_eq!(dns_suffix("GoogleBot.com."), Some("googlebot.com".into()));
        assert_eq!(dns_suffix("crawl.baidu.jp"), Some("crawl.baidu.jp".into()));
        for bad in [
            "com",
            ".googlebot.com",
            "*.google.com",
            "goo gle.com",
            "-x.com",
            "a..b",
        ] {
            assert_eq!(dns_suffix(bad), None, "{bad}");
        }
    }

    #[test]
    fn list_sources() {
        let base = Path::new("/etc/robotsguard");
        assert_eq!(
            list_source("file:ranges/google.json", base),
            Ok("file:/etc/robotsguard/ranges/google.json".into())
        );
        assert_eq!(
            list_source("https://openai.com/gptbot.json", base),
            Ok("https://openai.com/gptbot.json".into())
        );
        assert!(list_source("ftp://x.example/list", base).is_err());
        assert!(list_source("file:", base).is_err());
        assert!(list_source("ranges.json", base).is_err());
    }
}
