//! `policy` and `content_signals`: what each category, crawler and purpose is allowed.

use super::*;

pub(crate) const POLICY_ACTION_WORDS: Ty = Ty::Words(|| names(&ACTIONS));

pub(crate) static POLICY: Section = Section {
    id: "policy",
    place: "in `policy`",
    title: "Policy",
    doc: "Who is bound by robots.txt. `enforce`: robots.txt decides; `pass`: never blocked; `block`: blocked everywhere but `/robots.txt` and exempt paths.",
    keys: &[
        key("categories", Ty::MapOf { keys: Some(categories), value: &POLICY_ACTION_WORDS }, "`{library: pass, monitoring: pass}`, every other category `enforce`", "Per crawler category; merged category by category."),
        key("crawlers", Ty::MapOf { keys: None, value: &POLICY_ACTION_WORDS }, "`{}`", "Per crawler, by catalogue name (case-insensitive); wins over its purposes and category; merged crawler by crawler."),
        key("purposes", Ty::MapOf { keys: Some(purposes), value: &Ty::AnyOf(&[POLICY_ACTION_WORDS, Ty::Section(&PURPOSE_POLICY)]) }, "`{}`", "Per purpose (`search`, `training`, `agent`, `other`): an action, or `{action, multi_purpose}`. Wins over the category, loses to `crawlers`; a crawler with several purposes gets the most restrictive of their actions, except that a refusal (`block`, `license`) does not refuse a crawler that serves the purpose through its operator's own robots.txt token (Googlebot's training: `Google-Extended`; the served robots.txt gets a `Disallow: /` group for the token instead), nor, unless `multi_purpose: block`, one that serves `search` too. `license` answers with the origin's licence (`402`)."),
        key("rates", Ty::MapOf { keys: None, value: &Ty::AnyOf(&[Ty::Str, Ty::Section(&RATE_RULE)]) }, "`{}`", "Rate budgets, by crawler name, category or purpose: `\"60/m\"` or `{rate: 60/m, per: crawler}`. A crawler's name wins over its category, a category over its purposes (of several, the strictest applies). A crawler that spends its budget gets `429` with `Retry-After` (decision `rate_limited`), whatever robots.txt's `Crawl-delay` says; merged key by key. See the book's \"Bans, budgets and the firewall\"."),
        key("allow_clients", Ty::OneOrList(&Ty::Network), "`[]`", "Client networks never blocked, whatever the User-Agent."),
        key("exempt_paths", Ty::OneOrList(&Ty::Str), "`[]`", "Path prefixes (starting with `/`, matched on the canonical path) never blocked for GET and HEAD without a query."),
    ],
};

pub(crate) static PURPOSE_POLICY: Section = Section {
    id: "purpose_policy",
    place: "in a purpose's policy",
    title: "A purpose's policy",
    doc: "The long form of a `policy.purposes` entry: `training: {action: block, multi_purpose: block}`.",
    keys: &[
        required("action", POLICY_ACTION_WORDS, "As the short form's word: `enforce`, `pass`, `block` or `license`."),
        key("multi_purpose", Ty::Words(|| names(&MULTI_PURPOSE)), "`allow`", "What a refusal does to a crawler that serves `search` too and whose operator names no robots.txt token for this purpose (bingbot): `allow` lets it in (refusing it would take the site out of its search), `block` refuses it too. A crawler with a control token (Googlebot, Applebot) is never refused for the purpose: its token's group is."),
    ],
};

pub(crate) static CONTENT_SIGNALS: Section = Section {
    id: "content_signals",
    place: "in `content_signals`",
    title: "Content signals",
    doc: "robots.txt's `Content-Signal:` (`search`, `ai-input`, `ai-train`) and `Content-Usage:` (`train-ai`, `search`) lines, for the crawler's group and the path (path-scoped lines by longest match, only on paths the group may crawl).",
    keys: &[
        key("action", Ty::Words(|| names(&SIGNAL_ACTIONS)), "`report`", "`enforce` (a crawler whose purposes include `training` is refused on `ai-train=no`/`train-ai=n`, `search` on `search=no`/`search=n`, `agent` on `ai-input=no`, but for the refusals `multi_purpose` spares), `report` (counted and logged as would_block, policy `content-signal`), `ignore`."),
        key("header", Ty::Bool, "`false`", "Proxied responses carry `Content-Usage` with the preferences for the path, unless the origin set one."),
        key("multi_purpose", Ty::Words(|| names(&MULTI_PURPOSE)), "`allow`", "As `policy.purposes`' `multi_purpose`: whether a refused purpose also refuses a crawler that serves `search` too with no token of its operator's own for the purpose (bingbot on `search=yes, ai-train=no`). A crawler with a control token (Googlebot, Applebot) is never refused for it: under `enforce` the served robots.txt carries the token's group instead."),
    ],
};

/// `content_signals`: what the `Content-Signal` and `Content-Usage` lines of robots.txt do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ContentSignalsConfig {
    /// What is done with a crawler whose purpose the lines refuse on the path.
    pub action: SignalAction,
    /// Proxied responses carry a `Content-Usage` header with the preferences for the path,
    /// unless the origin sent one.
    pub header: bool,
    /// Whether a refused purpose also refuses a crawler that serves search too, with no token
    /// of its operator's own for the purpose (as `policy.purposes`' `multi_purpose`).
    pub multi_purpose: MultiPurpose,
}

impl Default for ContentSignalsConfig {
    fn default() -> Self {
        ContentSignalsConfig {
            action: SignalAction::Report,
            header: false,
            multi_purpose: MultiPurpose::Allow,
        }
    }
}

/// `content_signals.action`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SignalAction {
    /// Refuse the request with the block response.
    Enforce,
    /// Proxy it, counted and logged as `would_block` (policy `content-signal`).
    Report,
    /// The lines are not looked at.
    Ignore,
}

impl SignalAction {
    /// The spelling used in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            SignalAction::Enforce => "enforce",
            SignalAction::Report => "report",
            SignalAction::Ignore => "ignore",
        }
    }
}

/// What happens to a crawler's requests before robots.txt is asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Action {
    /// robots.txt decides.
    Enforce,
    /// Never blocked: not bound by robots.txt (apps' HTTP libraries, uptime monitors).
    Pass,
    /// Blocked on every path but `/robots.txt` and the exempt paths.
    Block,
    /// Refused with the origin's licence answer (`402` and a `Link` to the licence terms) on
    /// every path but `/robots.txt`, the exempt paths and the licence itself.
    License,
}

impl Action {
    /// How restrictive the action is: pass < enforce < license < block.
    pub fn restriction(self) -> u8 {
        match self {
            Action::Pass => 0,
            Action::Enforce => 1,
            Action::License => 2,
            Action::Block => 3,
        }
    }

    /// The spelling used in the config, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Enforce => "enforce",
            Action::Pass => "pass",
            Action::Block => "block",
            Action::License => "license",
        }
    }
}

impl Action {
    /// Whether the action turns the crawler away on every path (`block`, `license`).
    pub fn refuses(self) -> bool {
        matches!(self, Action::Block | Action::License)
    }
}

/// One `policy.purposes` entry: `training: block`, or `training: {action: block,
/// multi_purpose: block}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PurposeRule {
    /// What is done with a crawler serving the purpose.
    pub action: Action,
    /// Whether a refusal also refuses a crawler that serves search too, with no token of its
    /// operator's own for this purpose.
    pub multi_purpose: MultiPurpose,
}

/// `multi_purpose`: what a refusal of one purpose does to a crawler that serves `search` too
/// and whose operator names no robots.txt token for the refused purpose (bingbot: its search
/// and training are one crawl).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MultiPurpose {
    /// The refusal does not apply to it: refusing it would take the site out of its search.
    #[default]
    Allow,
    /// The refusal applies to it too.
    Block,
}

impl MultiPurpose {
    /// The spelling used in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            MultiPurpose::Allow => "allow",
            MultiPurpose::Block => "block",
        }
    }
}

/// Why a refusal of one purpose does not refuse a crawler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spared {
    /// Its operator names a robots.txt token for the purpose (`Google-Extended`): the token's
    /// group refuses the use instead.
    Token,
    /// It serves `search` too, with no token for the purpose, and `multi_purpose` is `allow`.
    Search,
}

/// Whether a refusal of `purpose` spares a crawler serving `purposes` (`controlled` of them
/// through tokens of its operator's own), under `multi_purpose`.
pub fn spared(
    purpose: crate::crawlers::Purpose,
    purposes: crate::crawlers::Purposes,
    controlled: crate::crawlers::Purposes,
    multi_purpose: MultiPurpose,
) -> Option<Spared> {
    use crate::crawlers::Purpose;
    if controlled.contains(purpose) {
        return Some(Spared::Token);
    }
    let searches_too = purpose != Purpose::Search && purposes.contains(Purpose::Search);
    (searches_too && multi_purpose == MultiPurpose::Allow).then_some(Spared::Search)
}

/// The purposes whose refusal a crawler was spared, and why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SparedPurposes {
    /// Refused through their control token (the served robots.txt's group for it).
    pub by_token: crate::crawlers::Purposes,
    /// Not refused: the crawler serves search too (`multi_purpose: allow`).
    pub for_search: crate::crawlers::Purposes,
}

impl SparedPurposes {
    /// Whether no refusal was spared.
    pub fn is_empty(&self) -> bool {
        self.by_token.is_empty() && self.for_search.is_empty()
    }
}

/// What `policy.purposes` says for one crawler ([`PolicyConfig::purpose_action`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PurposeAction {
    /// The most restrictive action that applies, with the purpose it was written for.
    pub action: Option<(Action, crate::crawlers::Purpose)>,
    /// The refusals the crawler was spared.
    pub spared: SparedPurposes,
}

/// Who is bound by robots.txt, who is let through or turned away regardless.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PolicyConfig {
    /// The action per category, indexed by [`Category::index`].
    pub categories: [Action; Category::ALL.len()],
    /// Actions per crawler (as the catalogue spells its name); they win over purposes and
    /// categories.
    pub crawlers: Vec<(String, Action)>,
    /// Actions per purpose, indexed by [`crate::crawlers::Purpose::index`]; they win over
    /// categories. A crawler with several purposes gets the most restrictive action written for
    /// them, but for refusals its operator lets a site express otherwise
    /// ([`PolicyConfig::purpose_action`]).
    pub purposes: [Option<PurposeRule>; crate::crawlers::Purpose::ALL.len()],
    /// Rate budgets per crawler, category and purpose (`policy.rates`).
    pub rates: RatesConfig,
    /// Clients (networks) never blocked, whatever their User-Agent.
    pub allow_clients: Vec<ipnet::IpNet>,
    /// Path prefixes (canonical form) never blocked.
    pub exempt_paths: Vec<String>,
}

impl Default for PolicyConfig {
    /// HTTP libraries (apps talking to their own backends) and uptime monitors are not bound by
    /// robots.txt; every other category is.
    fn default() -> Self {
        let mut categories = [Action::Enforce; Category::ALL.len()];
        categories[Category::Library.index()] = Action::Pass;
        categories[Category::Monitoring.index()] = Action::Pass;
        PolicyConfig {
            categories,
            crawlers: Vec::new(),
            purposes: [None; crate::crawlers::Purpose::ALL.len()],
            rates: RatesConfig::default(),
            allow_clients: Vec::new(),
            exempt_paths: Vec::new(),
        }
    }
}

impl PolicyConfig {
    /// The action for a category.
    pub fn category(&self, category: Category) -> Action {
        self.categories[category.index()]
    }

    /// What `policy.purposes` says for a crawler serving `purposes`, of which `controlled` have
    /// a robots.txt token of their operator's own (`Google-Extended` for Googlebot's training):
    /// the most restrictive action written for them (block, then license, then enforce, then
    /// pass), leaving out the refusals the crawler is spared ([`spared`]): a refused purpose
    /// it serves through its own token (the served robots.txt refuses it there instead), and,
    /// unless `multi_purpose: block`, a refused purpose of a crawler that also searches.
    pub fn purpose_action(
        &self,
        purposes: crate::crawlers::Purposes,
        controlled: crate::crawlers::Purposes,
    ) -> PurposeAction {
        let mut out = PurposeAction::default();
        // Most configs write none: one comparison instead of a walk over the purposes.
        if self.purposes == [None; crate::crawlers::Purpose::ALL.len()] {
            return out;
        }
        for purpose in purposes.iter() {
            let Some(rule) = self.purposes[purpose.index()] else {
                continue;
            };
            if rule.action.refuses() {
                match spared(purpose, purposes, controlled, rule.multi_purpose) {
                    Some(Spared::Token) => {
                        out.spared.by_token = out.spared.by_token.with(purpose);
                        continue;
                    }
                    Some(Spared::Search) => {
                        out.spared.for_search = out.spared.for_search.with(purpose);
                        continue;
                    }
                    None => {}
                }
            }
            if out
                .action
                .is_none_or(|(action, _)| rule.action.restriction() > action.restriction())
            {
                out.action = Some((rule.action, purpose));
            }
        }
        out
    }

    /// The purposes whose refusal `policy.purposes` asks for through their control token:
    /// `block` or `license` written for them.
    pub fn purposes_refused(&self) -> crate::crawlers::Purposes {
        crate::crawlers::Purpose::ALL
            .iter()
            .filter(|purpose| {
                self.purposes[purpose.index()].is_some_and(|rule| rule.action.refuses())
            })
            .fold(crate::crawlers::Purposes::default(), |set, purpose| {
                set.with(*purpose)
            })
    }

    /// The action written for crawler `name` (case-insensitive), if any.
    pub fn crawler(&self, name: &str) -> Option<Action> {
        self.crawlers
            .iter()
            .find(|(crawler, _)| crawler.eq_ignore_ascii_case(name))
            .map(|(_, action)| *action)
    }
}

/// The spellings of `content_signals.action`.
pub(crate) const SIGNAL_ACTIONS: [(&str, crate::config::SignalAction); 3] = [
    ("enforce", crate::config::SignalAction::Enforce),
    ("report", crate::config::SignalAction::Report),
    ("ignore", crate::config::SignalAction::Ignore),
];

/// Reads a `content_signals` section over `base`, key by key.
pub(crate) fn content_signals(
    sink: &mut Sink,
    node: Option<&Node>,
    base: &crate::config::ContentSignalsConfig,
) -> crate::config::ContentSignalsConfig {
    let mut out = *base;
    let Some(table) =
        node.and_then(|n| Table::read(sink, n, &CONTENT_SIGNALS, "`content_signals`"))
    else {
        return out;
    };
    if let Some(action) = table
        .get("action")
        .and_then(|n| reader::choice(sink, n, "action", &SIGNAL_ACTIONS))
    {
        out.action = action;
    }
    if let Some(header) = table
        .get("header")
        .and_then(|n| reader::boolean(sink, n, "header"))
    {
        out.header = header;
    }
    if let Some(multi_purpose) = table
        .get("multi_purpose")
        .and_then(|n| reader::choice(sink, n, "multi_purpose", &MULTI_PURPOSE))
    {
        out.multi_purpose = multi_purpose;
    }
    out
}

/// A list of purposes (`[search, training]`), for `crawlers.extra` entries.
pub(crate) fn purpose_list(sink: &mut Sink, node: &Node) -> Vec<Purpose> {
    let choices: Vec<(&'static str, Purpose)> =
        Purpose::ALL.iter().map(|p| (p.as_str(), *p)).collect();
    let mut out = Vec::new();
    for item in reader::one_or_many(node) {
        if let Some(purpose) = reader::choice(sink, item, "purposes", &choices) {
            if !out.contains(&purpose) {
                out.push(purpose);
            }
        }
    }
    out
}

/// `controls` of a `crawlers.extra` entry: per purpose, the robots.txt token its operator names
/// for refusing that use without refusing the crawler (`{training: Example-Extended}`). Each
/// purpose must be one of the entry's `purposes`, each token a robots.txt group name other than
/// the entry's own tokens.
pub(crate) fn purpose_controls(
    sink: &mut Sink,
    node: &Node,
    purposes: crate::crawlers::Purposes,
    own_tokens: &[String],
) -> crate::crawlers::purpose::PurposeControls {
    let mut pairs: Vec<(Purpose, &str)> = Vec::new();
    for (key, key_pos, value) in map_entries(sink, Some(node), "controls") {
        let Some(purpose) = purpose_key(sink, key, key_pos) else {
            continue;
        };
        if !purposes.contains(purpose) {
            sink.error_hint(
                key_pos,
                format!("`controls` names {purpose}, which is not one of this crawler's purposes"),
                "list it under `purposes`, or remove the control",
            );
            continue;
        }
        let Some(token) = reader::nonempty_string(sink, value, "controls") else {
            continue;
        };
        if !crate::crawlers::purpose::is_group_token(token) {
            sink.error_hint(
                value.pos,
                format!("control token {} is not a robots.txt group name", quote(token)),
                "letters, `-` and `_` only: robots.txt reads a User-agent name up to any other character",
            );
            continue;
        }
        if own_tokens.iter().any(|own| own.eq_ignore_ascii_case(token)) {
            sink.error_hint(
                value.pos,
                format!("control token {} is one of this crawler's own tokens", quote(token)),
                "a group for it would refuse the crawler itself; name the operator's separate token",
            );
            continue;
        }
        pairs.push((purpose, token));
    }
    crate::crawlers::purpose::PurposeControls::of(pairs)
}

/// The crawler names a `policy` may name: the catalogue the config asks for (built-in entries
/// unless `crawlers.builtin: false`, plus `crawlers.extra`), as the catalogue spells them.
#[derive(Debug, Clone, Default)]
pub(crate) struct KnownCrawlers {
    pub names: Vec<String>,
    /// Catalogue feeds are configured: a name outside `names` may come from one.
    pub open: bool,
}

impl KnownCrawlers {
    /// "; did you mean `X`?" for a misspelt crawler name, or nothing. Names are compared as the
    /// config keys are (lower case, `-` as `_`), and suggested as the catalogue spells them.
    pub(crate) fn suggest(&self, word: &str) -> String {
        let folded: Vec<String> = self
            .names
            .iter()
            .map(|n| n.to_ascii_lowercase().replace('-', "_"))
            .collect();
        let candidates: Vec<&str> = folded.iter().map(String::as_str).collect();
        crate::config::error::closest(word, &candidates)
            .and_then(|found| candidates.iter().position(|c| *c == found))
            .map_or_else(String::new, |i| {
                format!("; did you mean `{}`?", self.names[i])
            })
    }

    /// The catalogue spelling of `name` (compared case-insensitively).
    pub(crate) fn find(&self, name: &str) -> Option<&str> {
        self.names
            .iter()
            .find(|known| known.eq_ignore_ascii_case(name))
            .map(String::as_str)
    }
}

pub(crate) const ACTIONS: [(&str, Action); 4] = [
    ("enforce", Action::Enforce),
    ("pass", Action::Pass),
    ("block", Action::Block),
    ("license", Action::License),
];

/// Reads a `policy` section over `base`: `categories` and `crawlers` entry by entry,
/// `allow_clients` and `exempt_paths` replacing the inherited lists when given.
pub(crate) fn policy(
    sink: &mut Sink,
    node: Option<&Node>,
    base: &PolicyConfig,
    known: &KnownCrawlers,
) -> PolicyConfig {
    let mut out = base.clone();
    let Some(table) = node.and_then(|n| Table::read(sink, n, &POLICY, "`policy`")) else {
        return out;
    };
    let category_names: Vec<&str> = Category::ALL.iter().map(|c| c.as_str()).collect();
    for (key, key_pos, value) in map_entries(sink, table.get("categories"), "categories") {
        let Some(category) = Category::ALL.iter().find(|c| c.as_str() == key) else {
            sink.error_hint(
                key_pos,
                format!(
                    "unknown category {}{}",
                    quote(key),
                    did_you_mean(key, &category_names)
                ),
                one_of(&category_names),
            );
            continue;
        };
        if let Some(action) = reader::choice(sink, value, key, &ACTIONS) {
            out.categories[category.index()] = action;
        }
    }
    for (key, key_pos, value) in map_entries(sink, table.get("crawlers"), "crawlers") {
        let Some(name) = known.find(key).or(known.open.then_some(key)) else {
            sink.error_hint(
                key_pos,
                format!("no crawler is named {}{}", quote(key), known.suggest(key)),
                "use a name from `robotsguard identify` or crates/robotsguard-crawlers/crawlers.yaml, or add it under `crawlers.extra`",
            );
            continue;
        };
        let Some(action) = reader::choice(sink, value, key, &ACTIONS) else {
            continue;
        };
        out.crawlers
            .retain(|(existing, _)| !existing.eq_ignore_ascii_case(name));
        out.crawlers.push((name.to_owned(), action));
    }
    for (key, key_pos, value) in map_entries(sink, table.get("purposes"), "purposes") {
        let Some(purpose) = purpose_key(sink, key, key_pos) else {
            continue;
        };
        if let Some(rule) = purpose_rule(sink, value, key) {
            out.purposes[purpose.index()] = Some(rule);
        }
    }
    if let Some(n) = table.get("rates") {
        out.rates = rates(sink, Some(n), &out.rates, known);
    }
    if let Some(n) = table.get("allow_clients") {
        out.allow_clients = reader::networks(sink, n, "allow_clients");
    }
    if let Some(n) = table.get("exempt_paths") {
        let mut paths = Vec::new();
        for item in reader::one_or_many(n) {
            let Some(text) = reader::nonempty_string(sink, item, "exempt_paths") else {
                continue;
            };
            if !text.starts_with('/') {
                sink.error_hint(
                    item.pos,
                    format!("exempt path {} must start with `/`", quote(text)),
                    "e.g. /.well-known/",
                );
                continue;
            }
            // Compared with canonical request paths, so written in the same form.
            let canonical = crate::robots::canonicalize(text.as_bytes());
            paths.push(String::from_utf8_lossy(&canonical).into_owned());
        }
        out.exempt_paths = paths;
    }
    out
}

/// The spellings of `multi_purpose`.
pub(crate) const MULTI_PURPOSE: [(&str, crate::config::MultiPurpose); 2] = [
    ("allow", crate::config::MultiPurpose::Allow),
    ("block", crate::config::MultiPurpose::Block),
];

/// One `policy.purposes` value: an action (`block`), or `{action: block, multi_purpose:
/// block}`.
fn purpose_rule(sink: &mut Sink, node: &Node, purpose: &str) -> Option<crate::config::PurposeRule> {
    if !matches!(node.value, Value::Map(_)) {
        let action = reader::choice(sink, node, purpose, &ACTIONS)?;
        return Some(crate::config::PurposeRule {
            action,
            multi_purpose: crate::config::MultiPurpose::Allow,
        });
    }
    let table = Table::read(sink, node, &PURPOSE_POLICY, "a purpose's policy")?;
    let multi_purpose = table
        .get("multi_purpose")
        .and_then(|n| reader::choice(sink, n, "multi_purpose", &MULTI_PURPOSE))
        .unwrap_or_default();
    let Some(action_node) = table.get("action") else {
        sink.error_hint(
            node.pos,
            format!("`policy.purposes.{purpose}` needs `action`"),
            format!("e.g. {purpose}: {{action: block, multi_purpose: block}}"),
        );
        return None;
    };
    let action = reader::choice(sink, action_node, "action", &ACTIONS)?;
    Some(crate::config::PurposeRule {
        action,
        multi_purpose,
    })
}

/// The entries of a mapping whose keys are names (not a fixed set): `(key, key position, value)`.
pub(crate) fn map_entries<'a>(
    sink: &mut Sink,
    node: Option<&'a Node>,
    what: &str,
) -> Vec<(&'a str, Pos, &'a Node)> {
    let Some(node) = node else {
        return Vec::new();
    };
    let Value::Map(entries) = &node.value else {
        sink.error_hint(
            node.pos,
            format!("`{what}` must be a mapping, not {}", node.value.kind()),
            format!("e.g. {what}: {{NAME: block}}"),
        );
        return Vec::new();
    };
    let mut out = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        match &key.value {
            Value::Str(name) => out.push((name.as_str(), key.pos, value)),
            other => sink.error(
                key.pos,
                format!("keys of `{what}` must be names, not {}", other.kind()),
            ),
        }
    }
    out
}

/// The purpose a mapping key names; an unknown one is an error with did-you-mean.
fn purpose_key(sink: &mut Sink, key: &str, key_pos: Pos) -> Option<Purpose> {
    let found = Purpose::ALL.iter().copied().find(|p| p.as_str() == key);
    if found.is_none() {
        let purpose_names: Vec<&str> = Purpose::ALL.iter().map(|p| p.as_str()).collect();
        sink.error_hint(
            key_pos,
            format!(
                "unknown purpose {}{}",
                quote(key),
                did_you_mean(key, &purpose_names)
            ),
            one_of(&purpose_names),
        );
    }
    found
}
