//! Decides whether a User-Agent belongs to a crawler and which robots.txt tokens it answers to: catalogue first, then the origin's robots.txt names, then generic rules.

use aho_corasick::{AhoCorasick, MatchKind};
use serde::Serialize;

use std::sync::Arc;

use super::catalogue::{
    Catalogue, CatalogueError, CrawlerDef, CrawlerInfo, NamedEntry, OTHER_LABEL,
};
use super::category::Category;
use super::memo::{self, Memo};
use super::purpose::Purposes;
use super::robots_tokens::RobotsTokenScanner;
use super::verdicts::{FoundToken, GenericVerdict, TokenScan};

/// Words whose presence (case-insensitive, anywhere in a word) marks a UA as automated.
/// `scrap` covers scraper, scraping and Scrapy-likes; `crawl` covers crawler and crawling.
const AUTOMATION_MARKERS: [&str; 6] = ["bot", "crawl", "spider", "scrap", "slurp", "fetch"];
/// Index of `bot` in [`AUTOMATION_MARKERS`]; it alone has extra rules.
const BOT_MARKER: usize = 0;

/// Whole words that end in `bot` but name no robot: `CUBOT` is a phone brand whose model
/// names appear in ordinary mobile browser UAs (`Android 10; CUBOT_X30`).
const BENIGN_BOT_WORDS: [&str; 1] = ["cubot"];

/// Leading products of HTTP-library UAs that are not catalogue patterns because, as words,
/// they are too common to match anywhere in a UA; at the very start of a UA they mean a
/// script (`Ruby`, `PHP/8.2`, `Dart/3.3 (dart:io)`, `node`).
const LIBRARY_PRODUCTS: &[&str] = &[
    "python",
    "ruby",
    "php",
    "perl",
    "dart",
    "node",
    "bun",
    "got",
    "superagent",
    "node-superagent",
    "reqwest",
    "hyper",
    "winhttp",
    "libcurl",
    "httpclient",
    "http-client",
    "httplib",
    "lwp-trivial",
    "lwp-request",
    "lua-resty-http",
    "hackney",
    "restsharp",
    "jetty",
];

/// Display name of an identity made for an empty or blank User-Agent.
pub const EMPTY_UA_NAME: &str = "(empty user-agent)";
/// Display name of a generic identity whose automation word only appeared inside a URL.
pub const UNNAMED_NAME: &str = "(unnamed automated client)";

/// Which stage identified a crawler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum IdentitySource {
    /// A catalogue pattern matched.
    Catalogue,
    /// A product token named in this origin's robots.txt occurs in the UA.
    RobotsTxt,
    /// One of the generic rules (see [`GenericRule`]).
    Generic,
}

impl IdentitySource {
    /// The spelling `/explain` and logs use.
    pub fn as_str(self) -> &'static str {
        match self {
            IdentitySource::Catalogue => "catalogue",
            IdentitySource::RobotsTxt => "robots-txt",
            IdentitySource::Generic => "generic",
        }
    }
}

impl std::fmt::Display for IdentitySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which generic rule made a UA a crawler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GenericRule {
    /// The UA is empty or holds only whitespace and control bytes.
    EmptyUserAgent,
    /// The UA contains an automation word (bot, crawl, spider, scrap, slurp, fetch).
    AutomationWord,
    /// The UA starts with the product of an HTTP library that has no catalogue entry.
    HttpLibrary,
}

impl GenericRule {
    /// The spelling `/explain` and logs use.
    pub fn as_str(self) -> &'static str {
        match self {
            GenericRule::EmptyUserAgent => "empty-user-agent",
            GenericRule::AutomationWord => "automation-word",
            GenericRule::HttpLibrary => "http-library",
        }
    }

    /// A short explanation for people.
    pub fn explain(self) -> &'static str {
        match self {
            GenericRule::EmptyUserAgent => "the User-Agent is empty",
            GenericRule::AutomationWord => {
                "the User-Agent contains an automation word (bot, crawl, spider, scrap, slurp, fetch)"
            }
            GenericRule::HttpLibrary => "the User-Agent starts with an HTTP library's product name",
        }
    }
}

/// The ordered robots.txt tokens of an identity, most specific first, borrowed from the
/// catalogue, the robots.txt scanner or the UA itself. Iterate it, or index it like a slice.
/// Empty means "no name of its own": only the `*` group can apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenList<'a> {
    // At most one of the two is non-empty.
    many: &'a [String],
    one: Option<&'a str>,
}

impl<'a> TokenList<'a> {
    pub(crate) fn from_def(def: &'a CrawlerDef) -> Self {
        TokenList {
            many: &def.tokens,
            one: None,
        }
    }

    pub(crate) fn single(token: &'a str) -> Self {
        TokenList {
            many: &[],
            one: Some(token),
        }
    }

    pub(crate) fn empty() -> Self {
        TokenList {
            many: &[],
            one: None,
        }
    }

    /// How many tokens.
    pub fn len(&self) -> usize {
        self.many.len() + usize::from(self.one.is_some())
    }

    /// Whether there are none (only the `*` group applies).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The token at `index`, most specific first.
    pub fn get(&self, index: usize) -> Option<&'a str> {
        match self.one {
            Some(t) if index == 0 => Some(t),
            Some(_) => None,
            None => self.many.get(index).map(String::as_str),
        }
    }

    /// The most specific token.
    pub fn first(&self) -> Option<&'a str> {
        self.get(0)
    }

    /// The tokens, most specific first.
    pub fn iter(&self) -> TokenIter<'a> {
        TokenIter {
            many: self.many.iter(),
            one: self.one,
        }
    }

    /// Owned copy, for reports and JSON.
    pub fn to_vec(&self) -> Vec<String> {
        self.iter().map(str::to_owned).collect()
    }
}

impl<'a> IntoIterator for TokenList<'a> {
    type Item = &'a str;
    type IntoIter = TokenIter<'a>;
    fn into_iter(self) -> TokenIter<'a> {
        self.iter()
    }
}

/// Iterator over a [`TokenList`], most specific first.
#[derive(Debug, Clone)]
pub struct TokenIter<'a> {
    many: std::slice::Iter<'a, String>,
    one: Option<&'a str>,
}

impl<'a> Iterator for TokenIter<'a> {
    type Item = &'a str;
    fn next(&mut self) -> Option<&'a str> {
        self.many
            .next()
            .map(String::as_str)
            .or_else(|| self.one.take())
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.many.len() + usize::from(self.one.is_some());
        (n, Some(n))
    }
}

impl ExactSizeIterator for TokenIter<'_> {}

/// Who a crawler is, as far as robotsguard can tell. Everything is borrowed from the
/// [`Identifier`], the robots.txt scanner or the UA: building one allocates nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity<'a> {
    /// Catalogue name; the robots.txt token; the generic token, or a placeholder name.
    pub name: &'a str,
    /// robots.txt tokens, most specific first; empty = only the `*` group applies.
    pub tokens: TokenList<'a>,
    /// What it fetches for.
    pub category: Category,
    /// Empty outside the catalogue.
    pub operator: &'a str,
    /// Skips the `*` group (catalogue entries only).
    pub ignores_global: bool,
    /// What its fetches are for (outside the catalogue: its category's).
    pub purposes: Purposes,
    /// Documented to ignore `Crawl-delay` (catalogue entries only).
    pub ignores_crawl_delay: bool,
    /// Which stage identified it.
    pub source: IdentitySource,
    /// Set when `source` is [`IdentitySource::Generic`].
    pub generic_rule: Option<GenericRule>,
    /// The catalogue entry, when `source` is [`IdentitySource::Catalogue`].
    pub def: Option<&'a CrawlerDef>,
    /// Its [`CrawlerInfo`], shared by every request that names it.
    pub info: Option<&'a Arc<CrawlerInfo>>,
}

impl<'a> Identity<'a> {
    fn from_entry(def: &'a CrawlerDef, info: Option<&'a Arc<CrawlerInfo>>) -> Self {
        Identity {
            info,
            name: &def.name,
            tokens: TokenList::from_def(def),
            category: def.category,
            operator: &def.operator,
            ignores_global: def.ignores_global,
            purposes: info.map_or_else(|| def.purposes(), |info| info.purposes),
            ignores_crawl_delay: def.ignores_crawl_delay,
            source: IdentitySource::Catalogue,
            generic_rule: None,
            def: Some(def),
        }
    }

    fn outside_catalogue(
        name: &'a str,
        tokens: TokenList<'a>,
        category: Category,
        source: IdentitySource,
        generic_rule: Option<GenericRule>,
    ) -> Self {
        Identity {
            name,
            tokens,
            category,
            operator: "",
            ignores_global: false,
            purposes: Purposes::from_category(category),
            ignores_crawl_delay: false,
            source,
            generic_rule,
            def: None,
            info: None,
        }
    }

    /// The label for metrics: the catalogue name, else `other`. Names outside the catalogue
    /// come from requests and robots.txt files, so they would make label sets unbounded.
    pub fn metric_label(&self) -> &'a str {
        match self.source {
            IdentitySource::Catalogue => self.name,
            IdentitySource::RobotsTxt | IdentitySource::Generic => OTHER_LABEL,
        }
    }
}

/// Every crawler one User-Agent names, most specific first. Holding one crawler (or none)
/// allocates nothing.
#[derive(Debug, Clone, Default)]
pub struct Named<'a> {
    first: Option<Identity<'a>>,
    rest: Vec<Identity<'a>>,
}

impl<'a> Named<'a> {
    fn push(&mut self, identity: Identity<'a>) {
        if self.first.is_none() {
            self.first = Some(identity);
        } else {
            self.rest.push(identity);
        }
    }

    /// The most specific crawler named: the catalogue's best match, else the longest
    /// robots.txt name, else what the generic rules found.
    pub fn primary(&self) -> Option<&Identity<'a>> {
        self.first.as_ref()
    }

    /// [`Named::primary`], by value.
    pub fn into_primary(self) -> Option<Identity<'a>> {
        self.first
    }

    /// How many crawlers the User-Agent names.
    pub fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    /// Whether it names none (the sender is not a crawler).
    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// Puts `identity` first (a crawler identified by a signature rather than by the
    /// User-Agent), dropping a claim of the same crawler the User-Agent made.
    pub fn with_primary(self, identity: Identity<'a>) -> Named<'a> {
        let mut named = Named {
            first: Some(identity),
            rest: Vec::with_capacity(self.len()),
        };
        for other in self.first.into_iter().chain(self.rest) {
            if !other.name.eq_ignore_ascii_case(identity.name) {
                named.rest.push(other);
            }
        }
        named
    }

    /// Puts the crawlers before the tools (libraries, monitors) named beside them, each in
    /// their order, so the primary is a crawler whenever one is named.
    fn crawlers_first(&mut self) {
        if !self.first.is_some_and(|first| first.category.is_tool())
            || self.rest.iter().all(|i| i.category.is_tool())
        {
            return;
        }
        let mut all: Vec<Identity<'a>> = self.first.take().into_iter().collect();
        all.append(&mut self.rest);
        let (crawlers, tools): (Vec<_>, Vec<_>) =
            all.into_iter().partition(|i| !i.category.is_tool());
        for identity in crawlers.into_iter().chain(tools) {
            self.push(identity);
        }
    }

    /// Makes `identity` the primary; the others follow in their order.
    fn put_first(&mut self, identity: Identity<'a>) {
        if let Some(old) = self.first.replace(identity) {
            self.rest.insert(0, old);
        }
    }

    /// Every crawler named, the primary first.
    pub fn iter(&self) -> impl Iterator<Item = &Identity<'a>> + '_ {
        self.first.iter().chain(self.rest.iter())
    }

    fn revoke_global_exemption(&mut self) {
        if let Some(first) = self.first.as_mut() {
            first.ignores_global = false;
        }
        for identity in &mut self.rest {
            identity.ignores_global = false;
        }
    }

    /// Whether `token` (a robots.txt name) is already among the named crawlers' tokens.
    fn has_token(&self, token: &str) -> bool {
        self.iter().any(|identity| {
            identity.tokens.iter().any(|own| {
                let own = robotsguard_robots::reduce_agent_name(own.as_bytes());
                own.eq_ignore_ascii_case(token.as_bytes())
            })
        })
    }
}

/// Adds a robots.txt name found in the UA as a crawler of its own, unless it is part of a
/// catalogue match or a token of a crawler already named.
#[cold]
#[inline(never)]
fn add_robots_token<'a>(
    named: &mut Named<'a>,
    scanner: &'a RobotsTokenScanner,
    found: FoundToken,
    catalogue_spans: &[(usize, usize)],
) {
    let inside = catalogue_spans
        .iter()
        .any(|&(start, end)| start <= found.start && found.end <= end);
    let Some(token) = scanner.token(found) else {
        return;
    };
    if inside || named.has_token(token) {
        return;
    }
    named.push(Identity::outside_catalogue(
        token,
        TokenList::single(token),
        Category::Other,
        IdentitySource::RobotsTxt,
        None,
    ));
}

/// Identifies crawlers by User-Agent. Built once at config load; cheap to share.
#[derive(Debug, Clone)]
pub struct Identifier {
    catalogue: Catalogue,
    generic: bool,
    markers: AhoCorasick,
    /// Distinguishes this identifier's remembered verdicts ([`memo`]) from other identifiers';
    /// clones share it, as they give the same verdicts.
    memo_owner: u64,
}

impl GenericVerdict {
    fn identity(self, user_agent: &[u8]) -> Option<Identity<'_>> {
        // Ranges come from scanning these same bytes and cover ASCII words only.
        let token = |start: usize, end: usize| {
            user_agent
                .get(start..end)
                .and_then(|bytes| std::str::from_utf8(bytes).ok())
        };
        let (name, tokens, category, rule) = match self {
            GenericVerdict::NotCrawler => return None,
            GenericVerdict::EmptyUserAgent => (
                EMPTY_UA_NAME,
                TokenList::empty(),
                Category::Other,
                GenericRule::EmptyUserAgent,
            ),
            GenericVerdict::AutomationWord { start, end } => {
                let word = token(start, end)?;
                (
                    word,
                    TokenList::single(word),
                    Category::Other,
                    GenericRule::AutomationWord,
                )
            }
            GenericVerdict::AutomationWordOnlyInUrls => (
                UNNAMED_NAME,
                TokenList::empty(),
                Category::Other,
                GenericRule::AutomationWord,
            ),
            GenericVerdict::HttpLibrary { start, end } => {
                let product = token(start, end)?;
                (
                    product,
                    TokenList::single(product),
                    Category::Library,
                    GenericRule::HttpLibrary,
                )
            }
        };
        Some(Identity::outside_catalogue(
            name,
            tokens,
            category,
            IdentitySource::Generic,
            Some(rule),
        ))
    }
}

impl Identifier {
    /// `generic` turns on stage 3 (UAs that merely look automated are crawlers).
    pub fn new(catalogue: Catalogue, generic: bool) -> Result<Self, CatalogueError> {
        let markers = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostFirst)
            .build(AUTOMATION_MARKERS)
            .map_err(CatalogueError::Automaton)?;
        Ok(Identifier {
            catalogue,
            generic,
            markers,
            memo_owner: memo::next_owner(),
        })
    }

    /// The built-in catalogue with the given generic setting.
    pub fn builtin(generic: bool) -> Result<Self, CatalogueError> {
        Identifier::new(Catalogue::builtin()?, generic)
    }

    /// The catalogue it matches against.
    pub fn catalogue(&self) -> &Catalogue {
        &self.catalogue
    }

    /// The catalogue entry called `name` (case-insensitive) as an identity, as if a User-Agent
    /// had named it.
    pub fn entry_named(&self, name: &str) -> Option<Identity<'_>> {
        let index = self
            .catalogue
            .defs()
            .iter()
            .position(|def| def.name.eq_ignore_ascii_case(name))?;
        let def = self.catalogue.defs().get(index)?;
        Some(Identity::from_entry(def, self.catalogue.info(index)))
    }

    /// Whether the generic rules apply (`crawlers.generic`).
    pub fn generic(&self) -> bool {
        self.generic
    }

    /// Identify the sender of `user_agent` (the raw header value; pass an empty slice when the
    /// header is missing): the first of [`Identifier::identify_all`]'s crawlers.
    pub fn identify<'a>(
        &'a self,
        user_agent: &'a [u8],
        robots_tokens: Option<&'a RobotsTokenScanner>,
    ) -> Option<Identity<'a>> {
        self.identify_all(user_agent, robots_tokens).into_primary()
    }

    /// Every crawler `user_agent` names. `robots_tokens` is the scanner of the requested
    /// origin's robots.txt, if it has one. Stages:
    /// 1. the catalogue: every entry named (see [`Catalogue::find_all`]); an HTTP library named
    ///    beside a crawler is what the crawler is built on, so it is left out;
    /// 2. robots.txt names occurring as whole words outside the catalogue matches, other than
    ///    tokens of the crawlers already named;
    /// 3. only when neither found anything and generic is on: the generic rules.
    ///
    /// A crawler that ignores the `*` group keeps that privilege only when it is the only
    /// crawler named and no other automation word, HTTP library or second crawler shares its
    /// User-Agent: appending `AdsBot-Google` to a scraper's UA must not lift every `*` rule.
    /// The common cases (no crawler, one crawler) allocate nothing.
    pub fn identify_all<'a>(
        &'a self,
        user_agent: &'a [u8],
        robots_tokens: Option<&'a RobotsTokenScanner>,
    ) -> Named<'a> {
        // Stages 1 and 3 depend on the UA alone, so their verdict is remembered per UA; stage
        // 2 depends on the origin, so its answer is remembered per UA and origin scanner.
        let scanner = robots_tokens.and_then(|s| s.memo_owner().map(|owner| (s, owner)));
        let (memo, scan) = memo::remembered(
            self.memo_owner,
            user_agent,
            scanner.map(|(_, owner)| owner),
            || self.stage_one(user_agent),
            || scanner.map_or(TokenScan::None, |(s, _)| s.scan(user_agent)),
        );
        let mut named = Named::default();
        let mut library_too = false;
        // The catalogue matches' spans: one in the common case, kept in place (a list would cost
        // an allocation per crawler request); a list only when several entries are named.
        let mut several_spans: Vec<(usize, usize)> = Vec::new();
        let mut single_span = [(0, 0); 1];
        let mut one = false;
        match memo {
            Memo::Catalogue {
                index,
                start,
                end,
                library_too: library,
            } => {
                if let Some(def) = self.catalogue.defs().get(index) {
                    named.push(Identity::from_entry(def, self.catalogue.info(index)));
                    single_span[0] = (start, end);
                    one = true;
                    library_too = library;
                }
            }
            Memo::SeveralInCatalogue => {
                let (entries, library) = self.catalogue_entries(user_agent);
                library_too = library;
                for entry in entries {
                    if let Some(def) = self.catalogue.defs().get(entry.index) {
                        named.push(Identity::from_entry(def, self.catalogue.info(entry.index)));
                        several_spans.push((entry.start, entry.end));
                    }
                }
            }
            Memo::Outside(_) => {}
        }
        let spans: &[(usize, usize)] = if one { &single_span } else { &several_spans };
        if let Some((scanner, _)) = scanner {
            match scan {
                TokenScan::None => {}
                TokenScan::One(found) => add_robots_token(&mut named, scanner, found, spans),
                TokenScan::Several => {
                    for found in scanner.all_whole_words(user_agent) {
                        add_robots_token(&mut named, scanner, found, spans);
                    }
                }
            }
        }
        if self.generic && !named.is_empty() && named.iter().all(|i| i.category.is_tool()) {
            // A crawler that names a library or monitor beside itself (`FooSpider/0.9
            // python-requests/2.31`) is the crawler: the tools' policy is for clients that are
            // nothing else. It goes first; the tools stay named, so a policy that blocks one
            // still applies.
            if let MarkerScan::Word { start, end } = self.automation_word_where(user_agent, spans) {
                let word = GenericVerdict::AutomationWord { start, end }.identity(user_agent);
                if let Some(word) = word {
                    named.put_first(word);
                }
            }
        }
        named.crawlers_first();
        if named.is_empty() {
            if let Memo::Outside(generic) = memo {
                if let Some(identity) = generic.identity(user_agent) {
                    named.push(identity);
                }
            }
            return named;
        }
        let privileged = named.len() == 1
            && named.first.is_some_and(|first| first.ignores_global)
            && !library_too
            && !self.automation_word_outside(user_agent, spans);
        if !privileged {
            named.revoke_global_exemption();
        }
        named
    }

    /// What stage 1 (and, without a catalogue match, stage 3) make of a UA.
    // Off the common path (a miss, or a UA naming more than one crawler): kept out of line.
    #[cold]
    #[inline(never)]
    fn stage_one(&self, user_agent: &[u8]) -> Memo {
        let (entries, library_too) = self.catalogue_entries(user_agent);
        match entries.as_slice() {
            [] if self.generic => Memo::Outside(self.generic_verdict(user_agent)),
            [] => Memo::Outside(GenericVerdict::NotCrawler),
            [one] => Memo::Catalogue {
                index: one.index,
                start: one.start,
                end: one.end,
                library_too,
            },
            _ => Memo::SeveralInCatalogue,
        }
    }

    /// The catalogue entries a UA names, and whether an HTTP library was named beside a
    /// crawler. Beyond the first (best) entry, these are not names of a crawler of their own:
    /// - a library when a crawler is named too (what it is built on), or a second library
    ///   (`Apache-HttpClient/4.5 (Java/17)` names its runtime);
    /// - a name in a URL or e-mail address (`+http://www.archive.org/details/archive.org_bot`);
    /// - a comparison (`TelegramBot (like TwitterBot)`).
    // Off the common path (a miss, or a UA naming more than one crawler): kept out of line.
    #[cold]
    #[inline(never)]
    fn catalogue_entries(&self, user_agent: &[u8]) -> (Vec<NamedEntry>, bool) {
        let mut entries = self.catalogue.find_all(user_agent);
        let is_library = |entry: &NamedEntry| {
            self.catalogue
                .defs()
                .get(entry.index)
                .is_some_and(|def| def.category == Category::Library)
        };
        let libraries = entries.iter().filter(|e| is_library(e)).count();
        let library_too = libraries > 0 && libraries < entries.len();
        let mut kept = 0;
        // Entries come by start within each rank, so most fall in the field looked at last:
        // each field is scanned once, not once per entry (a field can be the whole UA).
        let mut field: Option<Field> = None;
        entries.retain(|entry| {
            let keep = kept == 0
                || !(is_library(entry)
                    || {
                        let f = match field {
                            Some(f) if f.start <= entry.start && entry.start < f.end => f,
                            _ => Field::around(user_agent, entry.start),
                        };
                        field = Some(f);
                        f.is_url
                    }
                    || follows_like(user_agent, entry.start));
            kept += usize::from(keep);
            keep
        });
        // Crawlers rank before libraries, so a library is never first when a crawler is named.
        (entries, library_too)
    }

    /// Whether an automation word (as the generic rules read them) or an HTTP library's leading
    /// product occurs outside the given spans.
    // Off the common path (a miss, or a UA naming more than one crawler): kept out of line.
    #[cold]
    #[inline(never)]
    fn automation_word_outside(&self, user_agent: &[u8], spans: &[(usize, usize)]) -> bool {
        let outside = |start: usize, end: usize| !spans.iter().any(|&(s, e)| start < e && s < end);
        let lead = user_agent.len() - user_agent.trim_ascii_start().len();
        let ua = user_agent.trim_ascii();
        let product = leading_product(ua);
        if !product.is_empty()
            && LIBRARY_PRODUCTS
                .iter()
                .any(|p| p.as_bytes().eq_ignore_ascii_case(product))
            && outside(lead, lead + product.len())
        {
            return true;
        }
        let Ok(matches) = self.markers.try_find_iter(ua) else {
            return false;
        };
        let mut field: Option<Field> = None;
        for m in matches {
            let (start, end) = (m.start(), m.end());
            if m.pattern().as_usize() == BOT_MARKER && !bot_counts(ua, start, end) {
                continue;
            }
            let f = match field {
                Some(f) if f.start <= start && start < f.end => f,
                _ => {
                    let f = Field::around(ua, start);
                    field = Some(f);
                    f
                }
            };
            if f.is_url {
                continue;
            }
            let (ws, we) = word_around(ua, start, end, f);
            if outside(lead + ws, lead + we) {
                return true;
            }
        }
        false
    }

    /// Stage 3. Rules, in order:
    /// 1. a blank UA (empty, or only whitespace/control bytes) is a crawler with no token of
    ///    its own (it meets the `*` group);
    /// 2. Apple and Android app UAs (`... CFNetwork/...`, `Dalvik/...`) are never generic
    ///    crawlers: they are apps talking to their own backends, whatever their app name says;
    /// 3. an automation word makes a crawler. `bot` counts only at the end of a word (not
    ///    followed by a letter: `FooBot/1`, `foo_bot2`, `robot`, but not `Bottle`) and not in
    ///    known benign words (`CUBOT` phones); the others count anywhere. The token is the
    ///    `[A-Za-z0-9_-]` word around the first such word outside URLs and e-mail addresses
    ///    (`Mozilla/5.0 (compatible; FooBot/1.0; +http://foo/bot.html)` → `FooBot`); if every
    ///    automation word sits in a URL, it is still a crawler, with no token;
    /// 4. a UA whose leading product is a known HTTP library without a catalogue entry is a
    ///    crawler whose token is that product (`PHP/8.2` → `PHP`).
    ///
    /// Ordinary browser UAs contain none of these and are not crawlers.
    fn generic_verdict(&self, user_agent: &[u8]) -> GenericVerdict {
        if user_agent.iter().all(|&b| b <= b' ' || b == 0x7f) {
            return GenericVerdict::EmptyUserAgent;
        }
        // Ranges below are of the trimmed UA; `lead` turns them into ranges of `user_agent`.
        let lead = user_agent.len() - user_agent.trim_ascii_start().len();
        let ua = user_agent.trim_ascii();
        if looks_like_app(ua) {
            return GenericVerdict::NotCrawler;
        }
        match self.automation_word(ua) {
            MarkerScan::Word { start, end } => {
                return GenericVerdict::AutomationWord {
                    start: lead + start,
                    end: lead + end,
                }
            }
            MarkerScan::OnlyInUrls => return GenericVerdict::AutomationWordOnlyInUrls,
            MarkerScan::None => {}
        }
        let product = leading_product(ua);
        if LIBRARY_PRODUCTS
            .iter()
            .any(|p| p.as_bytes().eq_ignore_ascii_case(product))
        {
            return GenericVerdict::HttpLibrary {
                start: lead,
                end: lead + product.len(),
            };
        }
        GenericVerdict::NotCrawler
    }

    /// The first automation word outside URLs. Each field (the text between delimiters) is
    /// scanned at most once for URL-ness and the chosen word once, so this stays linear
    /// however many markers a hostile UA repeats.
    fn automation_word(&self, ua: &[u8]) -> MarkerScan {
        self.automation_word_avoiding(ua, &[])
    }

    /// [`Identifier::automation_word`] in the untrimmed `user_agent`, skipping words in a field
    /// that `spans` (ranges of `user_agent`, such as catalogue matches) overlap; ranges returned
    /// are of `user_agent`.
    fn automation_word_where(&self, user_agent: &[u8], spans: &[(usize, usize)]) -> MarkerScan {
        let lead = user_agent.len() - user_agent.trim_ascii_start().len();
        let shifted: Vec<(usize, usize)> = spans
            .iter()
            .map(|&(s, e)| (s.saturating_sub(lead), e.saturating_sub(lead)))
            .collect();
        match self.automation_word_avoiding(user_agent.trim_ascii(), &shifted) {
            MarkerScan::Word { start, end } => MarkerScan::Word {
                start: lead + start,
                end: lead + end,
            },
            other => other,
        }
    }

    /// The first automation word of `ua` outside URLs and outside the fields `spans` (ranges of
    /// `ua`) overlap.
    fn automation_word_avoiding(&self, ua: &[u8], spans: &[(usize, usize)]) -> MarkerScan {
        let Ok(matches) = self.markers.try_find_iter(ua) else {
            return MarkerScan::None;
        };
        let mut field: Option<Field> = None;
        let mut in_url = false;
        for m in matches {
            let (start, end) = (m.start(), m.end());
            if m.pattern().as_usize() == BOT_MARKER && !bot_counts(ua, start, end) {
                continue;
            }
            let f = match field {
                Some(f) if f.start <= start && start < f.end => f,
                _ => {
                    let f = Field::around(ua, start);
                    field = Some(f);
                    f
                }
            };
            if f.is_url {
                in_url = true;
                continue;
            }
            let (mut ws, mut we) = word_around(ua, start, end, f);
            // The word is `[A-Za-z0-9_-]` bytes; hyphens at its ends are not part of a name.
            while ws < we && ua[ws] == b'-' {
                ws += 1;
            }
            while we > ws && ua[we - 1] == b'-' {
                we -= 1;
            }
            // A word in the same field as a span is part of that name's product
            // (`Pingdom.com_bot_version_1.4`).
            let overlaps = spans.iter().any(|&(s, e)| f.start < e && s < f.end);
            if ws < we && !overlaps {
                return MarkerScan::Word { start: ws, end: we };
            }
        }
        if in_url {
            MarkerScan::OnlyInUrls
        } else {
            MarkerScan::None
        }
    }
}

enum MarkerScan {
    /// The word is `ua[start..end]`.
    Word {
        start: usize,
        end: usize,
    },
    OnlyInUrls,
    None,
}

/// `bot` at `ua[start..end]` counts if no letter follows it and it does not end a benign word.
fn bot_counts(ua: &[u8], start: usize, end: usize) -> bool {
    if ua.get(end).is_some_and(u8::is_ascii_alphabetic) {
        return false;
    }
    let benign = BENIGN_BOT_WORDS.iter().any(|w| {
        let w = w.as_bytes();
        end >= w.len()
            && end - w.len() <= start
            && ua[end - w.len()..end].eq_ignore_ascii_case(w)
            && (end == w.len() || !ua[end - w.len() - 1].is_ascii_alphanumeric())
    });
    !benign
}

/// Bytes that separate the fields of a UA (products, comment items, URLs).
fn is_field_delimiter(b: u8) -> bool {
    b <= b' '
        || b == 0x7f
        || matches!(
            b,
            b';' | b'(' | b')' | b',' | b'[' | b']' | b'{' | b'}' | b'"' | b'\'' | b'<' | b'>'
        )
}

/// Bytes of a generic token: robots.txt's `[A-Za-z_-]` plus digits (kept so `Foo2Bot` stays
/// one name; robots.txt matching later looks at its leading run only).
fn is_generic_token_byte(b: u8) -> bool {
    robotsguard_robots::is_product_token_byte(b) || b.is_ascii_digit()
}

#[derive(Debug, Clone, Copy)]
struct Field {
    start: usize,
    end: usize,
    is_url: bool,
}

impl Field {
    fn around(ua: &[u8], pos: usize) -> Field {
        let start = ua[..pos]
            .iter()
            .rposition(|&b| is_field_delimiter(b))
            .map_or(0, |i| i + 1);
        let end = ua[pos..]
            .iter()
            .position(|&b| is_field_delimiter(b))
            .map_or(ua.len(), |i| pos + i);
        let text = &ua[start..end];
        let is_url = memchr::memmem::find(text, b"://").is_some()
            || memchr::memchr(b'@', text).is_some()
            || text.len() >= 4 && text[..4].eq_ignore_ascii_case(b"www.")
            || text.len() >= 5 && text[..5].eq_ignore_ascii_case(b"+www.");
        Field { start, end, is_url }
    }
}

/// The `[A-Za-z0-9_-]` word around `ua[start..end]`, kept inside its field.
fn word_around(ua: &[u8], start: usize, end: usize, field: Field) -> (usize, usize) {
    let ws = ua[field.start..start]
        .iter()
        .rposition(|&b| !is_generic_token_byte(b))
        .map_or(field.start, |i| field.start + i + 1);
    let we = ua[end..field.end]
        .iter()
        .position(|&b| !is_generic_token_byte(b))
        .map_or(field.end, |i| end + i);
    (ws, we)
}

/// How far before a name [`follows_like`] looks for `like`.
const LIKE_LOOKBACK: usize = 32;

/// Whether the word starting at `start` is introduced by `like` (`(like TwitterBot)`), which
/// compares a crawler with another instead of naming it.
fn follows_like(ua: &[u8], start: usize) -> bool {
    // Looks back a few bytes only: a long run of spaces before each of many names must not
    // make this scan the run once per name.
    let from = start.saturating_sub(LIKE_LOOKBACK);
    let before = ua[from..start].trim_ascii_end();
    if before.len() < 4 {
        return false;
    }
    let before = &ua[..from + before.len()];
    before.len() >= 4
        && before[before.len() - 4..].eq_ignore_ascii_case(b"like")
        && before.len() < start
        && (before.len() == 4 || !is_generic_token_byte(before[before.len() - 5]))
}

/// Apple platform apps send `Name/1 CFNetwork/x Darwin/y`; Android apps `Dalvik/2.1.0 (...)`.
fn looks_like_app(ua: &[u8]) -> bool {
    memchr::memmem::find(ua, b"CFNetwork/").is_some()
        || (ua.len() >= 7 && ua[..7].eq_ignore_ascii_case(b"Dalvik/"))
}

/// The UA's first product name: everything before the first `/`, whitespace, `(` or `;`.
fn leading_product(ua: &[u8]) -> &[u8] {
    let end = ua
        .iter()
        .position(|&b| b == b'/' || b == b'(' || b == b';' || b <= b' ')
        .unwrap_or(ua.len());
    &ua[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identifier(generic: bool) -> Identifier {
        match Identifier::builtin(generic) {
            Ok(i) => i,
            Err(e) => panic!("built-in catalogue is broken: {e}"),
        }
    }

    fn tokens(id: &Identity<'_>) -> Vec<String> {
        id.tokens.to_vec()
    }

    #[test]
    fn remembered_verdicts_are_per_identifier_and_per_origin() {
        let generic_on = identifier(true);
        let generic_off = identifier(false);
        let names = RobotsTokenScanner::new(["FooCrawler"]);
        let ua = b"FooCrawler/1.0 (+https://foo.example/)";
        // Asked repeatedly and interleaved, so later answers come from the memory.
        for _ in 0..3 {
            let generic = generic_on.identify(ua, None).map(|i| (i.name, i.source));
            assert_eq!(generic, Some(("FooCrawler", IdentitySource::Generic)));
            assert_eq!(generic_off.identify(ua, None), None);
            // The origin's robots.txt names it: stage 2 runs even when stage 1 is remembered.
            let named = generic_off.identify(ua, Some(&names)).map(|i| i.source);
            assert_eq!(named, Some(IdentitySource::RobotsTxt));
            let catalogued = generic_off.identify(b"Mozilla/5.0 (compatible; Googlebot/2.1)", None);
            assert_eq!(catalogued.map(|i| i.name), Some("Googlebot"));
        }
        // Leading whitespace shifts the remembered token range; the token is still the word.
        let padded = b"  \tFooCrawler/2.0";
        for _ in 0..2 {
            let id = generic_on.identify(padded, None).map(|i| i.name);
            assert_eq!(id, Some("FooCrawler"));
        }
    }

    fn names(
        identifier: &Identifier,
        ua: &str,
        scanner: Option<&RobotsTokenScanner>,
    ) -> Vec<String> {
        identifier
            .identify_all(ua.as_bytes(), scanner)
            .iter()
            .map(|i| i.name.to_string())
            .collect()
    }

    #[test]
    fn every_crawler_a_user_agent_names_is_listed() {
        let id = identifier(true);
        assert_eq!(
            names(
                &id,
                "Mozilla/5.0 (compatible; Googlebot/2.1) GPTBot/1.2",
                None
            ),
            ["Googlebot", "GPTBot"]
        );
        // A name inside a longer one is not a second crawler.
        assert_eq!(names(&id, "Googlebot-Image/1.0", None), ["Googlebot-Image"]);
        // A library a crawler is built on is not a second crawler...
        let linkedin =
            "LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)";
        assert_eq!(names(&id, linkedin, None), ["LinkedInBot"]);
        // ...but it takes away a `*` exemption, as a second crawler or automation word does.
        for ua in [
            "AdsBot-Google (+http://www.google.com/adsbot.html)",
            "Mozilla/5.0 (iPhone; CPU iPhone OS 14_7_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/14.1.2 Mobile/15E148 Safari/604.1 (compatible; AdsBot-Google-Mobile; +http://www.google.com/mobile/adsbot.html)",
        ] {
            let all = id.identify_all(ua.as_bytes(), None);
            assert_eq!(all.len(), 1, "{ua}");
            assert!(all.primary().is_some_and(|p| p.ignores_global), "{ua}");
        }
        for ua in [
            "python-requests/2.31 AdsBot-Google",
            "MyScraper/1.0 AdsBot-Google",
            "AdsBot-Google GPTBot/1.0",
            "PHP/8.2 AdsBot-Google",
        ] {
            let all = id.identify_all(ua.as_bytes(), None);
            assert!(all.iter().all(|i| !i.ignores_global), "{ua}");
            assert_eq!(all.primary().map(|p| p.name), Some("AdsBot-Google"), "{ua}");
        }
        // robots.txt names count as crawlers of their own, beside catalogue ones.
        let scanner = RobotsTokenScanner::new(["ZorgBot", "googlebot"]);
        assert_eq!(
            names(&id, "Googlebot/2.1 ZorgBot/1.0", Some(&scanner)),
            ["Googlebot", "ZorgBot"]
        );
        assert_eq!(names(&id, "Googlebot/2.1", Some(&scanner)), ["Googlebot"]);
        assert_eq!(
            names(&id, "Googlebot-Image/1.0", Some(&scanner)),
            ["Googlebot-Image"]
        );
        let two = RobotsTokenScanner::new(["FooBot", "BarCrawler"]);
        for _ in 0..2 {
            assert_eq!(
                names(&id, "BarCrawler/3 FooBot/1", Some(&two)),
                ["BarCrawler", "FooBot"]
            );
        }
    }

    #[test]
    fn a_crawler_naming_a_library_or_monitor_is_the_crawler() {
        let id = identifier(true);
        for tool in [
            "python-requests/2.31",
            "curl/8.5.0",
            "okhttp/4.12.0",
            "axios/1.6.8",
            "Go-http-client/1.1",
            "UptimeRobot/2.0",
        ] {
            let ua = format!("SuperSpider/0.9 {tool}");
            let all = id.identify_all(ua.as_bytes(), None);
            let primary = all.primary().map(|p| (p.name, p.category));
            assert_eq!(primary, Some(("SuperSpider", Category::Other)), "{ua}");
            // The tool stays named, so a policy that blocks it still applies.
            assert!(all.len() >= 2, "{ua}");
            // The tool first, the crawler after: the same.
            let ua = format!("{tool} SuperSpider/0.9");
            let primary = id.identify(ua.as_bytes(), None).map(|p| p.name);
            assert_eq!(primary, Some("SuperSpider"), "{ua}");
        }
        // A catalogue crawler beside a monitor is the crawler.
        assert_eq!(
            names(&id, "UptimeRobot/2.0 GPTBot/1.2", None),
            ["GPTBot", "UptimeRobot"]
        );
        // A robots.txt name beside a library is the crawler.
        let scanner = RobotsTokenScanner::new(["ZorgFetch"]);
        assert_eq!(
            names(&id, "python-requests/2.31 ZorgFetch/1", Some(&scanner)),
            ["ZorgFetch", "python-requests"]
        );
        // Only tools: the tools.
        assert_eq!(
            names(&id, "python-requests/2.31", None),
            ["python-requests"]
        );
        assert_eq!(
            names(&id, "UptimeRobot/2.0 (http://www.uptimerobot.com/)", None),
            ["UptimeRobot"]
        );
        // An automation word in a URL names no crawler.
        assert_eq!(
            names(&id, "python-requests/2.31 (+https://example.com/bot)", None),
            ["python-requests"]
        );
        // Without the generic rules an unnamed crawler word is nobody.
        let plain = identifier(false);
        assert_eq!(
            names(&plain, "SuperSpider/0.9 python-requests/2.31", None),
            ["python-requests"]
        );
    }

    #[test]
    fn names_considered_per_user_agent_are_capped() {
        let id = identifier(true);
        let names_list = [
            "GPTBot/1.2",
            "ClaudeBot/1.0",
            "Googlebot/2.1",
            "bingbot/2.0",
            "CCBot/2.0",
            "YandexBot/3.0",
            "Baiduspider/2.0",
            "DuckDuckBot/1.1",
            "Applebot/0.1",
            "AhrefsBot/7.0",
            "SemrushBot/7",
            "PetalBot",
            "Bytespider",
            "Amazonbot/0.1",
            "PerplexityBot/1.0",
            "facebookexternalhit/1.1",
            "Twitterbot/1.0",
            "LinkedInBot/1.0",
            "Slurp",
            "MJ12bot/v1.4.8",
        ];
        let mut ua = String::new();
        while ua.len() < 8192 {
            for name in names_list {
                ua.push_str(name);
                ua.push(' ');
            }
        }
        let all = id.identify_all(ua.as_bytes(), None);
        assert!(all.len() <= crate::MAX_NAMES_CONSIDERED, "{}", all.len());
        assert_eq!(all.primary().map(|p| p.name), Some("GPTBot"));
        let tokens: Vec<&str> = names_list
            .iter()
            .map(|n| n.split('/').next().unwrap_or(n))
            .collect();
        let scanner = RobotsTokenScanner::new(tokens);
        let all = id.identify_all(ua.as_bytes(), Some(&scanner));
        assert!(
            all.len() <= 2 * crate::MAX_NAMES_CONSIDERED,
            "{}",
            all.len()
        );
    }

    #[test]
    fn real_crawlers_name_one_crawler_each() {
        let id = identifier(true);
        let wrong: Vec<String> = REAL_CRAWLERS
            .iter()
            .filter(|(ua, name, _)| names(&id, ua, None) != [*name])
            .map(|(ua, _, _)| format!("{ua} -> {:?}", names(&id, ua, None)))
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    /// (UA, expected catalogue name, expected tokens)
    const REAL_CRAWLERS: &[(&str, &str, &[&str])] = &[
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Googlebot/2.1; +http://www.google.com/bot.html) Chrome/124.0.6367.201 Safari/537.36",
            "Googlebot",
            &["googlebot"],
        ),
        (
            "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.201 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            "Googlebot",
            &["googlebot"],
        ),
        ("Googlebot/2.1 (+http://www.google.com/bot.html)", "Googlebot", &["googlebot"]),
        ("Googlebot-Image/1.0", "Googlebot-Image", &["googlebot-image", "googlebot"]),
        ("Googlebot-Video/1.0", "Googlebot-Video", &["googlebot-video", "googlebot"]),
        (
            "Mozilla/5.0 (compatible; Google-InspectionTool/1.0;)",
            "Google-InspectionTool",
            &["google-inspectiontool", "googlebot"],
        ),
        (
            "Mozilla/5.0 (X11; Linux x86_64; Storebot-Google/1.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
            "Storebot-Google",
            &["storebot-google"],
        ),
        ("Mozilla/5.0 (compatible; GoogleOther)", "GoogleOther", &["googleother"]),
        ("GoogleOther-Image/1.0", "GoogleOther-Image", &["googleother-image", "googleother"]),
        (
            "Mozilla/5.0 (compatible; Google-CloudVertexBot; +https://cloud.google.com/enterprise-search)",
            "Google-CloudVertexBot",
            &["google-cloudvertexbot"],
        ),
        ("AdsBot-Google (+http://www.google.com/adsbot.html)", "AdsBot-Google", &["adsbot-google"]),
        (
            "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36 (compatible; AdsBot-Google-Mobile; +http://www.google.com/mobile/adsbot.html)",
            "AdsBot-Google-Mobile",
            &["adsbot-google-mobile"],
        ),
        ("Mediapartners-Google", "Mediapartners-Google", &["mediapartners-google"]),
        (
            "APIs-Google (+https://developers.google.com/webmasters/APIs-Google.html)",
            "APIs-Google",
            &["apis-google"],
        ),
        (
            "FeedFetcher-Google; (+http://www.google.com/feedfetcher.html)",
            "FeedFetcher-Google",
            &["feedfetcher-google"],
        ),
        (
            "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
            "bingbot",
            &["bingbot", "msnbot"],
        ),
        (
            "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/116.0.1938.76 Mobile Safari/537.36 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
            "bingbot",
            &["bingbot", "msnbot"],
        ),
        (
            "Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)",
            "YandexBot",
            &["yandexbot", "yandex"],
        ),
        (
            "Mozilla/5.0 (compatible; YandexImages/3.0; +http://yandex.com/bots)",
            "YandexImages",
            &["yandeximages", "yandex"],
        ),
        (
            "Mozilla/5.0 (compatible; Baiduspider/2.0; +http://www.baidu.com/search/spider.html)",
            "Baiduspider",
            &["baiduspider"],
        ),
        (
            "Baiduspider-image+(+http://www.baidu.com/search/spider.htm)",
            "Baiduspider-image",
            &["baiduspider-image", "baiduspider"],
        ),
        (
            "DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)",
            "DuckDuckBot",
            &["duckduckbot"],
        ),
        (
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)",
            "Applebot",
            &["applebot", "googlebot"],
        ),
        (
            "Mozilla/5.0 (compatible; Yahoo! Slurp; http://help.yahoo.com/help/us/ysearch/slurp)",
            "Slurp",
            &["slurp"],
        ),
        (
            "Mozilla/5.0 (compatible; SeznamBot/4.0; +https://o-seznam.cz/napoveda/vyhledavani/en/seznambot-crawler/)",
            "SeznamBot",
            &["seznambot"],
        ),
        ("Mozilla/5.0 (compatible; Yeti/1.1; +https://naver.me/spd)", "Yeti", &["yeti"]),
        (
            "Sogou web spider/4.0(+http://www.sogou.com/docs/help/webmasters.htm#07)",
            "Sogou web spider",
            &["sogou"],
        ),
        (
            "Mozilla/5.0 (Linux; Android 7.0;) AppleWebKit/537.36 (KHTML, like Gecko) Mobile Safari/537.36 (compatible; PetalBot;+https://webmaster.petalsearch.com/site/petalbot)",
            "PetalBot",
            &["petalbot"],
        ),
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)",
            "GPTBot",
            &["gptbot"],
        ),
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; ChatGPT-User/1.0; +https://openai.com/bot",
            "ChatGPT-User",
            &["chatgpt-user"],
        ),
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; OAI-SearchBot/1.0; +https://openai.com/searchbot",
            "OAI-SearchBot",
            &["oai-searchbot"],
        ),
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)",
            "ClaudeBot",
            &["claudebot"],
        ),
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; PerplexityBot/1.0; +https://perplexity.ai/perplexitybot)",
            "PerplexityBot",
            &["perplexitybot"],
        ),
        ("CCBot/2.0 (https://commoncrawl.org/faq/)", "CCBot", &["ccbot"]),
        (
            "Mozilla/5.0 (Linux; Android 5.0) AppleWebKit/537.36 (KHTML, like Gecko) Mobile Safari/537.36 (compatible; Bytespider; spider-feedback@bytedance.com)",
            "Bytespider",
            &["bytespider"],
        ),
        (
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/119.0.0.0 Safari/537.36 (Amazonbot/0.1; +https://developer.amazon.com/support/amazonbot)",
            "Amazonbot",
            &["amazonbot"],
        ),
        (
            "meta-externalagent/1.1 (+https://developers.facebook.com/docs/sharing/webmasters/crawler)",
            "Meta-ExternalAgent",
            &["meta-externalagent"],
        ),
        (
            "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)",
            "AhrefsBot",
            &["ahrefsbot"],
        ),
        (
            "Mozilla/5.0 (compatible; SemrushBot/7~bl; +http://www.semrush.com/bot.html)",
            "SemrushBot",
            &["semrushbot"],
        ),
        ("Mozilla/5.0 (compatible; MJ12bot/v1.4.8; http://mj12bot.com/)", "MJ12bot", &["mj12bot"]),
        (
            "Mozilla/5.0 (compatible; DotBot/1.2; +https://opensiteexplorer.org/dotbot; help@moz.com)",
            "DotBot",
            &["dotbot"],
        ),
        (
            "Screaming Frog SEO Spider/19.8",
            "Screaming Frog SEO Spider",
            &["screaming frog seo spider"],
        ),
        (
            "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
            "facebookexternalhit",
            &["facebookexternalhit"],
        ),
        ("Twitterbot/1.0", "Twitterbot", &["twitterbot"]),
        (
            "LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)",
            "LinkedInBot",
            &["linkedinbot"],
        ),
        (
            "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
            "Slackbot-LinkExpanding",
            &["slackbot-linkexpanding", "slackbot"],
        ),
        (
            "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
            "Discordbot",
            &["discordbot"],
        ),
        ("TelegramBot (like TwitterBot)", "TelegramBot", &["telegrambot"]),
        ("WhatsApp/2.23.20.0 A", "WhatsApp", &["whatsapp"]),
        (
            "Mozilla/5.0 (compatible; Pinterestbot/1.0; +http://www.pinterest.com/bot.html)",
            "Pinterestbot",
            &["pinterestbot", "pinterest"],
        ),
        (
            "Feedly/1.0 (+http://www.feedly.com/fetcher.html; like FeedFetcher-Google)",
            "Feedly",
            &["feedly"],
        ),
        (
            "Mozilla/5.0 (compatible; archive.org_bot +http://archive.org/details/archive.org_bot)",
            "archive.org_bot",
            &["archive.org_bot"],
        ),
        (
            "Mozilla/5.0 (compatible; special_archiver/3.1.1 +http://www.archive.org/details/archive.org_bot)",
            "special_archiver",
            &["special_archiver"],
        ),
        ("ia_archiver", "ia_archiver", &["ia_archiver"]),
        (
            "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)",
            "UptimeRobot",
            &["uptimerobot"],
        ),
        ("Pingdom.com_bot_version_1.4_(http://www.pingdom.com/)", "Pingdom", &["pingdom"]),
        ("curl/8.5.0", "curl", &["curl"]),
        ("Wget/1.21.4", "Wget", &["wget"]),
        ("python-requests/2.31.0", "python-requests", &["python-requests"]),
        ("Python-urllib/3.11", "Python-urllib", &["python-urllib"]),
        ("Python/3.11 aiohttp/3.9.1", "aiohttp", &["aiohttp"]),
        ("python-httpx/0.27.0", "httpx", &["python-httpx"]),
        ("Go-http-client/1.1", "Go-http-client", &["go-http-client"]),
        ("Go-http-client/2.0", "Go-http-client", &["go-http-client"]),
        ("okhttp/4.12.0", "okhttp", &["okhttp"]),
        ("Apache-HttpClient/4.5.14 (Java/17.0.9)", "Apache-HttpClient", &["apache-httpclient"]),
        ("Java/1.8.0_392", "Java", &["java"]),
        ("node-fetch/1.0 (+https://github.com/bitinn/node-fetch)", "node-fetch", &["node-fetch"]),
        ("axios/1.6.8", "axios", &["axios"]),
        ("libwww-perl/6.72", "libwww-perl", &["libwww-perl"]),
        ("Scrapy/2.11.0 (+https://scrapy.org)", "Scrapy", &["scrapy"]),
        (
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/124.0.6367.60 Safari/537.36",
            "HeadlessChrome",
            &["headlesschrome"],
        ),
        (
            "Mozilla/5.0 (Unknown; Linux x86_64) AppleWebKit/538.1 (KHTML, like Gecko) PhantomJS/2.1.1 Safari/538.1",
            "PhantomJS",
            &["phantomjs"],
        ),
    ];

    #[test]
    fn real_crawler_uas() {
        let idf = identifier(false);
        for &(ua, name, want) in REAL_CRAWLERS {
            let Some(id) = idf.identify(ua.as_bytes(), None) else {
                panic!("not identified: {ua}");
            };
            assert_eq!(id.name, name, "{ua}");
            assert_eq!(tokens(&id), want, "{ua}");
            assert_eq!(id.source, IdentitySource::Catalogue);
            assert_eq!(id.metric_label(), name);
            assert!(id.def.is_some());
        }
    }

    #[test]
    fn adsbot_ignores_global() {
        let idf = identifier(true);
        for ua in [
            "AdsBot-Google (+http://www.google.com/adsbot.html)",
            "Mozilla/5.0 (iPhone; CPU iPhone OS 14_7_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/14.1.2 Mobile/15E148 Safari/604.1 (compatible; AdsBot-Google-Mobile; +http://www.google.com/mobile/adsbot.html)",
        ] {
            let id = idf.identify(ua.as_bytes(), None);
            assert_eq!(id.map(|i| i.ignores_global), Some(true), "{ua}");
        }
        let id = idf.identify(b"Googlebot/2.1", None);
        assert_eq!(id.map(|i| i.ignores_global), Some(false));
    }

    const BROWSERS: &[&str] = &[
        // Chrome, Windows
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
        // Chrome, macOS
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
        // Chrome, Android
        "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36",
        // Chrome, iOS
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/124.0.6367.88 Mobile/15E148 Safari/604.1",
        // Firefox, Windows
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:125.0) Gecko/20100101 Firefox/125.0",
        // Firefox, Linux
        "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0",
        // Firefox, Android
        "Mozilla/5.0 (Android 14; Mobile; rv:125.0) Gecko/125.0 Firefox/125.0",
        // Safari, macOS
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 Safari/605.1.15",
        // Safari, iPhone
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 Mobile/15E148 Safari/604.1",
        // Safari, iPad
        "Mozilla/5.0 (iPad; CPU OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1",
        // Edge, Windows
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 Edg/124.0.2478.80",
        // Edge, Android
        "Mozilla/5.0 (Linux; Android 10; HD1913) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36 EdgA/124.0.2478.64",
        // Opera
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 OPR/109.0.0.0",
        // Samsung Internet
        "Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/24.0 Chrome/117.0.0.0 Mobile Safari/537.36",
        // DuckDuckGo browser: names DuckDuckGo, must not be taken for DuckDuckBot.
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 DuckDuckGo/7 Safari/605.1.15",
        // Chrome on a CUBOT phone: "CUBOT" ends in "bot".
        "Mozilla/5.0 (Linux; Android 10; CUBOT_X30) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36",
        "Mozilla/5.0 (Linux; Android 11; CUBOT P50) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36",
        // In-app browsers.
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [FBAN/FBIOS;FBAV/460.0.0.38.108;FBBV/585404540;FBDV/iPhone15,2;FBMD/iPhone;FBSN/iOS;FBSV/17.4;FBSS/3;FBID/phone;FBLC/en_US;FBOP/5]",
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Instagram 327.0.2.30.93 (iPhone15,2; iOS 17_4; en_US; en; scale=3.00; 1179x2556; 594063466)",
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [Pinterest/iOS]",
        // Internet Explorer 11
        "Mozilla/5.0 (Windows NT 10.0; WOW64; Trident/7.0; rv:11.0) like Gecko",
    ];

    #[test]
    fn browsers_are_not_crawlers() {
        let idf = identifier(true);
        // A robots.txt that names browser words must not change that either.
        let robots = RobotsTokenScanner::new([
            "Mozilla",
            "Safari",
            "Chrome",
            "Googlebot",
            "bot",
            "GPTBot",
            "DuckDuckGo",
        ]);
        for ua in BROWSERS {
            let id = idf.identify(ua.as_bytes(), Some(&robots));
            assert!(id.is_none(), "{ua} identified as {id:?}");
        }
    }

    #[test]
    fn apps_are_not_generic_crawlers() {
        let idf = identifier(true);
        for ua in [
            "FetchRewards/3.12.0 CFNetwork/1494.0.7 Darwin/23.4.0",
            "ChatBotApp/1.0 (iPhone; iOS 17.4; Scale/3.00) CFNetwork/1494.0.7 Darwin/23.4.0",
            "Dalvik/2.1.0 (Linux; U; Android 13; SpiderPhone Build/TP1A.220624.014)",
        ] {
            assert!(idf.identify(ua.as_bytes(), None).is_none(), "{ua}");
        }
    }

    #[test]
    fn robots_named_tokens() {
        let idf = identifier(false);
        let robots = RobotsTokenScanner::new(["*", "FooBot", "foobot-news", "Googlebot", "bar"]);
        let id = idf.identify(b"Mozilla/5.0 (compatible; FooBot-News/2.0)", Some(&robots));
        let Some(id) = id else {
            panic!("not identified")
        };
        assert_eq!(id.name, "foobot-news");
        assert_eq!(tokens(&id), ["foobot-news"]);
        assert_eq!(id.source, IdentitySource::RobotsTxt);
        assert_eq!(id.category, Category::Other);
        assert_eq!(id.metric_label(), "other");
        assert_eq!(id.operator, "");
        // Whole word only: `bar` is not found inside `Barbican`.
        assert!(idf.identify(b"Barbican/1.0", Some(&robots)).is_none());
        let id = idf.identify(b"bar/1.0", Some(&robots));
        assert_eq!(id.map(|i| i.name), Some("bar"));
        // The catalogue comes first, even for tokens robots.txt names.
        let id = idf.identify(b"Googlebot-Image/1.0", Some(&robots));
        assert_eq!(id.map(|i| i.source), Some(IdentitySource::Catalogue));
        // Without the scanner, an unknown crawler is not identified (generic off).
        assert!(idf.identify(b"FooBot/1.0", None).is_none());
    }

    fn generic(
        idf: &Identifier,
        ua: &'static str,
    ) -> Option<(String, Vec<String>, Option<GenericRule>)> {
        idf.identify(ua.as_bytes(), None)
            .map(|i| (i.name.to_owned(), tokens(&i), i.generic_rule))
    }

    #[test]
    fn generic_rules() {
        let on = identifier(true);
        let word = Some(GenericRule::AutomationWord);
        let cases: &[(&str, &str, &[&str])] = &[
            (
                "FooScraper/1.0 (+http://x.example)",
                "FooScraper",
                &["FooScraper"],
            ),
            (
                "Mozilla/5.0 (compatible; Foo-Bot/1.0; +http://foo.example/bot.html)",
                "Foo-Bot",
                &["Foo-Bot"],
            ),
            (
                "Mozilla/5.0 (compatible; my_spider2/0.1)",
                "my_spider2",
                &["my_spider2"],
            ),
            ("NewsCrawler", "NewsCrawler", &["NewsCrawler"]),
            (
                "Mozilla/5.0 (compatible; acme-fetcher)",
                "acme-fetcher",
                &["acme-fetcher"],
            ),
            ("robot", "robot", &["robot"]),
            ("SiteSlurper 2.0", "SiteSlurper", &["SiteSlurper"]),
            ("Acme Web Scraping Tool", "Scraping", &["Scraping"]),
            // The URL's automation word is passed over for the one outside it.
            (
                "Mozilla/5.0 (+https://example.com/bot.html; ExampleCrawler/3)",
                "ExampleCrawler",
                &["ExampleCrawler"],
            ),
        ];
        for &(ua, name, want) in cases {
            let got = generic(&on, ua);
            let want_tokens: Vec<String> = want.iter().map(|s| s.to_string()).collect();
            assert_eq!(got, Some((name.to_owned(), want_tokens, word)), "{ua}");
        }
        // Automation words only inside URLs or addresses: a crawler with no token.
        let got = generic(
            &on,
            "Mozilla/5.0 (compatible; +https://example.com/crawler-info)",
        );
        assert_eq!(got, Some((UNNAMED_NAME.to_owned(), vec![], word)));
        let got = generic(&on, "Mozilla/5.0 (compatible; spider@example.com)");
        assert_eq!(got, Some((UNNAMED_NAME.to_owned(), vec![], word)));
        // `bot` followed by a letter, or in CUBOT, is not an automation word.
        assert_eq!(generic(&on, "Bottle/1.0"), None);
        assert_eq!(
            generic(&on, "Mozilla/5.0 (Linux; Android 10; CUBOT X30)"),
            None
        );
        // ... but a real name that ends in cubot-like letters still counts.
        assert!(generic(&on, "MegaCubot/1.0").is_some());
        // HTTP library leading product.
        let lib = Some(GenericRule::HttpLibrary);
        assert_eq!(
            generic(&on, "PHP/8.2.7"),
            Some(("PHP".into(), vec!["PHP".into()], lib))
        );
        assert_eq!(
            generic(&on, "Ruby"),
            Some(("Ruby".into(), vec!["Ruby".into()], lib))
        );
        assert_eq!(
            generic(&on, "Dart/3.3 (dart:io)"),
            Some(("Dart".into(), vec!["Dart".into()], lib))
        );
        let id = on.identify(b"node", None);
        assert_eq!(id.map(|i| i.category), Some(Category::Library));
        // A library name later in the UA is not a leading product.
        assert_eq!(generic(&on, "MyApp/1.0 ruby"), None);
        // Metric labels stay bounded.
        let id = on.identify(b"WhateverBot/1", None);
        assert_eq!(id.map(|i| i.metric_label()), Some("other"));
        // Generic off: none of these is a crawler.
        let off = identifier(false);
        for ua in ["FooScraper/1.0", "PHP/8.2", "", "   "] {
            assert!(off.identify(ua.as_bytes(), None).is_none(), "{ua:?}");
        }
        // Unknown non-automated clients are not crawlers even with generic on.
        for ua in ["MyApp/1.0", "Mozilla/5.0", "Lynx/2.9.0 libwww-FM/2.14"] {
            assert!(on.identify(ua.as_bytes(), None).is_none(), "{ua:?}");
        }
    }

    #[test]
    fn empty_user_agent() {
        let on = identifier(true);
        for ua in [&b""[..], b"   ", b"\t \r\n", b"\0\0", b"\x7f"] {
            let Some(id) = on.identify(ua, None) else {
                panic!("{ua:?} not identified");
            };
            assert_eq!(id.name, EMPTY_UA_NAME);
            assert!(id.tokens.is_empty());
            assert_eq!(id.generic_rule, Some(GenericRule::EmptyUserAgent));
            assert_eq!(id.metric_label(), "other");
        }
        assert!(identifier(false).identify(b"", None).is_none());
    }

    #[test]
    fn token_list_behaves_like_a_slice() {
        let idf = identifier(false);
        let Some(id) = idf.identify(b"Googlebot-Image/1.0", None) else {
            panic!("not identified")
        };
        let t = id.tokens;
        assert_eq!(t.len(), 2);
        assert!(!t.is_empty());
        assert_eq!(t.first(), Some("googlebot-image"));
        assert_eq!(t.get(1), Some("googlebot"));
        assert_eq!(t.get(2), None);
        assert_eq!(t.iter().len(), 2);
        let collected: Vec<&str> = t.into_iter().collect();
        assert_eq!(collected, ["googlebot-image", "googlebot"]);
        let one = TokenList::single("x");
        assert_eq!((one.len(), one.get(0), one.get(1)), (1, Some("x"), None));
        assert_eq!(TokenList::empty().first(), None);
    }

    #[test]
    fn hostile_user_agents_do_not_panic() {
        let on = identifier(true);
        let robots = RobotsTokenScanner::new(["FooBot", "bar"]);
        let big_a = vec![b'a'; 64 * 1024];
        let big_nul = vec![0u8; 64 * 1024];
        let big_ff = vec![0xffu8; 64 * 1024];
        let bots = "bot1".repeat(16 * 1024).into_bytes();
        let url_bots = format!("+http://{}", "bot/".repeat(16 * 1024)).into_bytes();
        let cubots = "CUBOT ".repeat(10_000).into_bytes();
        let fields = "; (bot) ".repeat(8 * 1024).into_bytes();
        let mut mixed = b"\xc3\x28 \xf0\x28\x8c\xbc \0 ".to_vec();
        mixed.extend_from_slice(&big_ff);
        mixed.extend_from_slice(b"\0xbot\xff");
        for ua in [
            &big_a[..],
            &big_nul,
            &big_ff,
            &bots,
            &url_bots,
            &cubots,
            &fields,
            &mixed,
            b"\xff\xfebot",
            b"bot",
            b"\0",
        ] {
            let _ = on.identify(ua, Some(&robots));
            let _ = on.identify(ua, None);
        }
        // Invalid UTF-8 around a catalogue name still identifies it.
        let id = on.identify(b"\xff\xfe(compatible; GPTBot/1.2)\xc3", None);
        assert_eq!(id.map(|i| i.name), Some("GPTBot"));
        // The automation word next to invalid bytes: the non-ASCII bytes are not part of
        // the generic token, which stays valid UTF-8.
        let id = on.identify(b"\xffxbot\xfe", None);
        assert_eq!(id.map(|i| i.name), Some("xbot"));
        assert_eq!(
            on.identify(&bots, None).map(|i| i.name.len()),
            Some(bots.len())
        );
    }
}
