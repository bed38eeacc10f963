//! The one decision the proxy makes per request: given the snapshot, the Host, the User-Agent and
//! the path, pass, allow, block or report. Pure given a snapshot.
//!
//! One path, one truth: the decision is made on the canonical path the origin is then sent
//! (`paths.forward: canonical`), or, when the client's bytes are forwarded, on every way an
//! origin could read them; and under every crawler the User-Agent names. Any "disallowed" wins.

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::Arc;

use serde::Serialize;

use crate::config::{
    normalize_host_bytes, Action, CrawlDelayAction, EscapedSlashes, Forward, Mode, PathsConfig,
    PolicyConfig, SignalAction, Spared, SparedPurposes,
};
use crate::crawlers::{Category, CrawlerInfo, Identity, IdentitySource, Named, Purpose, Purposes};
use crate::robots::canonical::{
    authority_reading, canonicalize_decoding_slashes, has_escaped_slash,
};
use crate::robots::{
    canonicalize, GlobalFallback, GroupMatch, PreferenceKind, Preferences, Use, Verdict,
};
use crate::snapshot::{Origin, Policy, RobotsCopy, Snapshot};
use crate::tables::crawl_delay::{BudgetKey, CrawlDelays, GENERIC_BUDGET, MAX_DELAY};

pub mod response;
mod verification;
pub mod warnings;

pub use verification::{Verification, VerificationResult, VerifiedBy};
pub use warnings::{config_warnings, count_config_warnings, search_refusals};

/// What happens to the request: defined, with its word, status, log text and report column,
/// in the outcome table ([`crate::outcome`]).
pub use crate::outcome::Outcome;

/// The crawler behind a request. Its name, label, category and tokens are shared with the
/// catalogue entry (one reference count per request, no copies); crawlers outside the catalogue
/// get their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crawler {
    info: Arc<CrawlerInfo>,
    /// Which identification stage named it (catalogue, robots.txt names, generic rules).
    pub source: IdentitySource,
    /// It obeys only robots.txt groups naming it, not the `*` group (as AdsBot does).
    pub ignores_global: bool,
}

impl Crawler {
    fn from_identity(identity: &Identity<'_>) -> Crawler {
        let info = match identity.info {
            Some(info) => info.clone(),
            None => Arc::new(CrawlerInfo {
                name: identity.name.to_string(),
                label: identity.metric_label().to_string(),
                category: identity.category,
                tokens: identity.tokens.to_vec(),
                verify: None,
                feed: None,
                purposes: identity.purposes,
                controls: Default::default(),
                ignores_crawl_delay: identity.ignores_crawl_delay,
                signing_agents: Vec::new(),
            }),
        };
        Crawler {
            info,
            source: identity.source,
            ignores_global: identity.ignores_global,
        }
    }

    /// The crawler a signal found behind a browser's User-Agent (`disguised`): named, labelled
    /// and bound by robots.txt as a crawler of that name with no group of its own (the `*`
    /// group applies).
    pub fn signal(name: &str) -> Crawler {
        Crawler {
            info: Arc::new(CrawlerInfo {
                name: name.to_string(),
                label: name.to_string(),
                category: Category::Other,
                tokens: vec![name.to_string()],
                verify: None,
                feed: None,
                purposes: crate::crawlers::Purposes::from_category(Category::Other),
                controls: Default::default(),
                ignores_crawl_delay: false,
                signing_agents: Vec::new(),
            }),
            source: IdentitySource::Generic,
            ignores_global: false,
        }
    }

    /// The crawler's name: the catalogue's (`GPTBot`), or the product token it was found by.
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// Bounded metric label: the catalogue name, else `other`.
    pub fn label(&self) -> &str {
        &self.info.label
    }

    /// What its operator uses the fetched pages for.
    pub fn category(&self) -> Category {
        self.info.category
    }

    /// robots.txt tokens, most specific first.
    pub fn tokens(&self) -> &[String] {
        &self.info.tokens
    }

    /// What its fetches are for.
    pub fn purposes(&self) -> Purposes {
        self.info.purposes
    }

    /// The robots.txt tokens its operator names for refusing some of its purposes without
    /// refusing it (`Google-Extended` for Googlebot's training).
    pub fn controls(&self) -> &crate::crawlers::purpose::PurposeControls {
        &self.info.controls
    }

    /// Its operator documents that it ignores `Crawl-delay`.
    pub fn ignores_crawl_delay(&self) -> bool {
        self.info.ignores_crawl_delay
    }

    /// How a claim to be this crawler is checked, when its operator publishes that.
    pub fn verify_data(&self) -> Option<&crate::crawlers::VerifyData> {
        self.info.verify.as_ref()
    }
}

impl Serialize for Crawler {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = serializer.serialize_struct("Crawler", 9)?;
        out.serialize_field("name", &self.info.name)?;
        out.serialize_field("label", &self.info.label)?;
        out.serialize_field("category", &self.info.category)?;
        out.serialize_field("purposes", &self.info.purposes)?;
        out.serialize_field("ignores_crawl_delay", &self.info.ignores_crawl_delay)?;
        out.serialize_field("tokens", &self.info.tokens)?;
        out.serialize_field("source", &self.source)?;
        out.serialize_field("ignores_global", &self.ignores_global)?;
        // Which catalogue feed the entry came from; absent for built-in and `extra` entries.
        match &self.info.feed {
            Some(feed) => out.serialize_field("feed", feed)?,
            None => out.skip_field("feed")?,
        }
        out.end()
    }
}

/// The kind a [`MatchedRule`] has when it stands for a header of the origin's response (its
/// pattern is the header, `Content-Usage: train-ai=n`), not a robots.txt line.
pub const RESPONSE_HEADER_RULE: &str = "response-header";

/// The robots.txt rule behind a verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MatchedRule {
    /// The rule's line in the robots.txt (1-based).
    pub line: u32,
    /// `Allow` or `Disallow`.
    pub directive: &'static str,
    /// The path pattern, after Google's escaping.
    pub pattern: String,
}

impl MatchedRule {
    /// `Disallow: /private` as written (after Google's escaping).
    pub fn text(&self) -> String {
        format!("{}: {}", self.directive, self.pattern)
    }
}

/// A decision with everything logs, metrics, the block response and `/explain` need.
#[derive(Debug, Clone)]
pub struct Decision {
    /// The origin the request is for.
    pub origin: Arc<Origin>,
    /// What happens to the request.
    pub outcome: Outcome,
    /// The crawler behind the request; `None` for everyone else.
    pub crawler: Option<Crawler>,
    /// The group that applied: a product token, `*`, or none.
    pub group: Option<String>,
    /// The deciding robots.txt rule, when one matched.
    pub rule: Option<MatchedRule>,
    /// Why; [`Decision::reason`] puts it in words only when someone reads it.
    pub why: Why,
    /// The robots.txt copy the decision was made with.
    pub robots: Arc<RobotsCopy>,
    /// Other crawlers the User-Agent names (the decision covers them too).
    pub also_named: Vec<String>,
    /// The path and query the origin is sent instead of the client's (`forward: canonical`,
    /// when they differ).
    pub rewritten_target: Option<Vec<u8>>,
    /// What checking the crawler's claim found, when it was checked
    /// ([`Decision::apply_verification`]).
    pub verification: Option<Arc<Verification>>,
    /// The `Crawl-delay` of the group that decided, when it states one (before the origin's
    /// `crawl_delay.max`).
    pub crawl_delay: Option<std::time::Duration>,
    /// The request reads `/robots.txt` itself, whoever sends it: GET or HEAD, and every reading
    /// of its target is exactly `/robots.txt`, without a query (`/robots.txt?rest_route=...` is
    /// WordPress's REST API). Only such a request passes a ban.
    pub reads_robots_txt: bool,
    /// What robots.txt's `Content-Signal` and `Content-Usage` lines say about the request, when
    /// they say anything; boxed, so that a decision under a robots.txt without such lines stays
    /// as small (and as cheap to move) as before.
    pub usage: Option<Box<UsagePreferences>>,
    /// The refusals of one of the crawler's purposes (by `policy.purposes` or a preference line)
    /// that did not refuse it: the purpose is refused through its operator's own robots.txt
    /// token, or it serves search too (`multi_purpose: allow`).
    pub spared: SparedPurposes,
}

/// What robots.txt's preference lines say about one request.
#[derive(Debug, Clone, Default)]
pub struct UsagePreferences {
    /// The `Content-Signal` and `Content-Usage` lines that apply to the crawler on the path
    /// (empty when the path is not the crawler's to fetch).
    pub lines: Vec<AppliedPreference>,
    /// The preference line that refuses the crawler's purpose on the path, when one does
    /// (`content_signals.action` other than `ignore`).
    pub refusal: Option<SignalRefusal>,
    /// The `Content-Usage` header value proxied responses carry (`content_signals.header`).
    pub content_usage: Option<String>,
    /// The page's own preference, in the origin's response head, that refuses one of the
    /// crawler's purposes (`response_signals`): set after the origin answered.
    pub response_signal: Option<ResponseSignalHit>,
}

/// A header of the origin's response that refuses one of the crawler's purposes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResponseSignalHit {
    /// The purpose refused.
    pub purpose: Purpose,
    /// `content_usage`, `noai` or `noimageai`.
    #[serde(serialize_with = "serialize_signal")]
    pub signal: response::Signal,
    /// The header line as quoted (printable ASCII, cut).
    pub value: String,
}

impl ResponseSignalHit {
    /// `Content-Usage: train-ai=n`: the header as the refusal cites it.
    pub fn text(&self) -> String {
        format!("{}: {}", self.signal.header(), self.value)
    }
}

fn serialize_signal<S: serde::Serializer>(
    signal: &response::Signal,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(signal.as_str())
}

/// A `Content-Signal` or `Content-Usage` line that applies to a request, for `/explain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AppliedPreference {
    /// Its line in the robots.txt (1-based).
    pub line: u32,
    /// The line as written (`Content-Signal: search=yes, ai-train=no`).
    #[serde(serialize_with = "serialize_str")]
    pub text: Arc<str>,
    /// It is scoped to a path (the longest matching one), not group-wide.
    pub scoped: bool,
}

/// The preference line that refuses one of the crawler's purposes on the path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SignalRefusal {
    /// The purpose refused.
    pub purpose: Purpose,
    /// The line's number in the robots.txt.
    pub line: u32,
    /// The line as written.
    #[serde(serialize_with = "serialize_str")]
    pub text: Arc<str>,
    /// The `Allow`/`Disallow` rule the decision held before the refusal took its place (it let
    /// the crawler fetch the path); it decides again when the refusal is forgotten.
    #[serde(skip)]
    pub refused_rule: Option<MatchedRule>,
}

/// A refusal of one of the crawler's purposes that did not refuse the crawler, for `/explain`
/// ([`Decision::spared_purposes`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SparedPurpose {
    /// The purpose refused.
    pub purpose: Purpose,
    /// `control_token`: its operator names a robots.txt token for the purpose; `serves_search`:
    /// it serves search too and has no such token (`multi_purpose: allow`).
    pub why: &'static str,
    /// The control token (`Google-Extended`), for `control_token`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// For `control_token`, where the token's group in the robots.txt robotsguard serves comes
    /// from: `added` (robotsguard added it), `site` (the site's file has its own) or
    /// `not_added` (the origin does not enforce this refusal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<&'static str>,
    /// The same in words.
    pub reason: String,
}

/// Shared text serialises as the text.
fn serialize_str<S: serde::Serializer>(text: &Arc<str>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(text)
}

/// Why a decision came out as it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Why {
    /// The User-Agent is not a crawler's.
    NotCrawler,
    /// The origin's mode is `off`.
    ModeOff,
    /// The request is for `/robots.txt` itself, which every crawler may read.
    RobotsTxtPath,
    /// The path starts with one of `policy.exempt_paths`.
    ExemptPath,
    /// The client is in `policy.allow_clients`.
    AllowedClient,
    /// `policy` lets every crawler named pass (by its name, or by its category).
    PolicyPass(PolicyBy),
    /// `policy` turns the crawler away (by its name, or by its category).
    PolicyBlock(PolicyBy),
    /// The robots.txt copy in force allows everything (a 4xx robots.txt, or `on_unreachable:
    /// allow`).
    AllowAll,
    /// The robots.txt copy in force disallows everything (robots.txt unreachable).
    DisallowAll,
    /// No group of the robots.txt applies to this crawler.
    NoGroup,
    /// A rule of the crawler's group matched ([`Decision::rule`]).
    Rule,
    /// The crawler's group has no rule matching the path: allowed.
    NoRuleMatched,
    /// The request claims a crawler it is not ([`Decision::verification`]).
    Impostor,
    /// The path is a trap (`traps`): robots.txt disallows it to every group.
    Trap,
    /// The client read robots.txt and then, without a crawler's User-Agent, kept asking for what
    /// it disallows to every group (`disguised`).
    Disguised,
    /// `policy` answers the crawler with the origin's licence (by name, purpose or category).
    PolicyLicense(PolicyBy),
    /// robots.txt allows the path, but a `Content-Signal` or `Content-Usage` line refuses one
    /// of the crawler's purposes there ([`Decision::content_signal`]).
    ContentSignal,
    /// The request is for the licence terms a `402` answer points at: every crawler may read it.
    LicenseUrl,
    /// The origin's response carries the page's own preference refusing one of the crawler's
    /// purposes (`Content-Usage`, `X-Robots-Tag: noai`): [`Decision::response_signal`].
    ResponseSignal,
}

impl Why {
    /// The word the access log's `why` says: `rule`, `no_rule_matched`, `content_signal`,
    /// `response_signal`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Why::NotCrawler => "not_crawler",
            Why::ModeOff => "mode_off",
            Why::RobotsTxtPath => "robots_txt",
            Why::ExemptPath => "exempt_path",
            Why::AllowedClient => "allowed_client",
            Why::PolicyPass(_) => "policy_pass",
            Why::PolicyBlock(_) => "policy_block",
            Why::PolicyLicense(_) => "policy_license",
            Why::AllowAll => "allow_all",
            Why::DisallowAll => "disallow_all",
            Why::NoGroup => "no_group",
            Why::Rule => "rule",
            Why::NoRuleMatched => "no_rule_matched",
            Why::Impostor => "impostor",
            Why::Trap => "trap",
            Why::Disguised => "disguised",
            Why::ContentSignal => "content_signal",
            Why::LicenseUrl => "license_url",
            Why::ResponseSignal => "response_signal",
        }
    }
}

/// Which `policy` entry decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PolicyBy {
    /// `policy.crawlers`, for the crawler named in the decision.
    Crawler,
    /// `policy.categories`, for the crawler's category.
    Category,
    /// `policy.purposes`, for one of the crawler's purposes (the most restrictive).
    Purpose,
}

impl Decision {
    /// The `Content-Signal` and `Content-Usage` lines that apply to the crawler on the path.
    pub fn preferences(&self) -> &[AppliedPreference] {
        self.usage.as_ref().map_or(&[], |usage| &usage.lines)
    }

    /// The preference line that refuses the crawler's purpose on the path, when one does.
    pub fn content_signal(&self) -> Option<&SignalRefusal> {
        self.usage.as_ref().and_then(|usage| usage.refusal.as_ref())
    }

    /// The header of the origin's response that refuses the crawler's purpose, when one did.
    pub fn response_signal(&self) -> Option<&ResponseSignalHit> {
        self.usage
            .as_ref()
            .and_then(|usage| usage.response_signal.as_ref())
    }

    /// Records that the origin's response refuses one of the crawler's purposes: the decision
    /// cites the header (its rule is the header, kind `response-header`) and says why
    /// ([`Why::ResponseSignal`]); the outcome is the caller's.
    pub fn refuse_for_response(&mut self, hit: ResponseSignalHit) {
        self.rule = Some(MatchedRule {
            line: 0,
            directive: RESPONSE_HEADER_RULE,
            pattern: hit.text(),
        });
        self.why = Why::ResponseSignal;
        self.usage_mut().response_signal = Some(hit);
    }

    /// The `Content-Usage` header value proxied responses carry (`content_signals.header`).
    pub fn content_usage(&self) -> Option<&str> {
        self.usage
            .as_ref()
            .and_then(|usage| usage.content_usage.as_deref())
    }

    /// Forgets a content-signal refusal (the request is refused, or let through, for another
    /// reason).
    pub fn clear_content_signal(&mut self) {
        let Some(refusal) = self.usage.as_mut().and_then(|usage| usage.refusal.take()) else {
            return;
        };
        // The preference line stood in for the rule; an impostor's refusal has none at all.
        let cites_the_line = self.rule.as_ref().is_some_and(|rule| {
            rule.line == refusal.line
                && [PreferenceKind::ContentSignal, PreferenceKind::ContentUsage]
                    .iter()
                    .any(|kind| kind.as_str() == rule.directive)
        });
        if cites_the_line {
            self.rule = refusal.refused_rule;
        }
    }

    fn usage_mut(&mut self) -> &mut UsagePreferences {
        self.usage.get_or_insert_with(Box::default)
    }

    /// The refusals of the crawler's purposes that did not refuse it, each with why and, for a
    /// control token, where its group in the served robots.txt comes from.
    pub fn spared_purposes(&self) -> Vec<SparedPurpose> {
        let Some(crawler) = &self.crawler else {
            return Vec::new();
        };
        let name = crawler.name();
        let by_policy = self.origin.config.policy.purposes_refused();
        let refuser = |purpose: Purpose| {
            if by_policy.contains(purpose) {
                format!("policy.purposes refuses {purpose}")
            } else {
                format!("a Content-Signal or Content-Usage line refuses {purpose}")
            }
        };
        let mut out = Vec::new();
        for purpose in self.spared.by_token.iter() {
            let Some(token) = crawler.controls().token(purpose) else {
                continue;
            };
            let added = self
                .robots
                .added_groups
                .iter()
                .any(|group| group.token.eq_ignore_ascii_case(token));
            let site = match &self.robots.policy {
                Policy::Rules(rules) => crate::purpose_controls::site_names(rules, token),
                _ => false,
            };
            let (group, served) = if added {
                (
                    "added",
                    format!(
                        "the robots.txt robotsguard serves carries a `User-agent: {token}` group                          refusing it (added by robotsguard)"
                    ),
                )
            } else if site {
                (
                    "site",
                    format!(
                        "the site's robots.txt has its own `{token}` group, which speaks for it"
                    ),
                )
            } else {
                (
                    "not_added",
                    format!(
                        "robotsguard adds a `User-agent: {token}` group to the robots.txt it serves                          only where the refusal is enforced (mode enforce; for a content signal,                          content_signals.action enforce)"
                    ),
                )
            };
            out.push(SparedPurpose {
                purpose,
                why: "control_token",
                token: Some(token.to_string()),
                group: Some(group),
                reason: format!(
                    "{}, and {name}'s operator lets a site refuse that use through its own                      robots.txt token, {token}: {served}; {name} is not refused",
                    refuser(purpose)
                ),
            });
        }
        for purpose in self.spared.for_search.iter() {
            out.push(SparedPurpose {
                purpose,
                why: "serves_search",
                token: None,
                group: None,
                reason: format!(
                    "{}, but {name} serves search too and its operator names no robots.txt token                      for {purpose}: refusing it would take the site out of its search, so it is                      not refused (multi_purpose: allow; `block` refuses it)",
                    refuser(purpose)
                ),
            });
        }
        out
    }

    /// Whether the crawler's identity was verified (range lists, reverse DNS or a signature).
    pub fn is_verified(&self) -> bool {
        self.verification
            .as_ref()
            .is_some_and(|v| v.result == VerificationResult::Verified)
    }

    /// Whether the identity of the deciding crawler itself was verified (not another crawler
    /// the User-Agent also names).
    pub fn is_verified_as_deciding_crawler(&self) -> bool {
        self.is_verified()
            && self
                .crawler
                .as_ref()
                .zip(self.verification.as_ref())
                .is_some_and(|(crawler, verification)| verification.crawler == crawler.name())
    }

    /// The Crawl-delay budget this decision spends, with the delay that applies to it (its
    /// group's `Crawl-delay`, capped by the origin's `crawl_delay.max` and by a day); `None` when
    /// its group states none or it is not a crawler. A crawler verified as itself has one budget
    /// per origin; any other claim, one per client network (`crawl_delay.prefix`), so that it
    /// cannot spend a real crawler's budget; and every crawler found only by the generic rules,
    /// one per network whatever name it gives.
    pub fn budget(&self, client: Option<IpAddr>) -> Option<(BudgetKey<'_>, std::time::Duration)> {
        let delay = self
            .crawl_delay?
            .min(self.origin.config.crawl_delay.max)
            .min(MAX_DELAY);
        let crawler = self.crawler.as_ref()?;
        let key = BudgetKey {
            origin: self.origin.name(),
            crawler: budget_name(crawler.name(), crawler.source),
            client: if self.is_verified_as_deciding_crawler() {
                None
            } else {
                client.map(|client| self.origin.config.crawl_delay.prefix.network(client))
            },
        };
        Some((key, delay))
    }

    /// The operator's rate budget (`policy.rates`) this decision spends: the rule for the
    /// crawler (its name's, else its category's, else its purposes'), what it was written for, and
    /// the budget's key. `None` when no rule applies or the request is not a crawler's. A budget
    /// `per: crawler` is the crawler's own only for a request verified as it; any other claim
    /// (and every budget `per: client`) is kept per client network (`crawl_delay.prefix`), and
    /// crawlers found only by the generic rules share one name per network.
    pub fn rate_budget(
        &self,
        client: Option<IpAddr>,
    ) -> Option<(
        crate::tables::rates::RateKey<'_>,
        crate::config::RateRule,
        crate::config::RateScope,
    )> {
        let rates = &self.origin.config.policy.rates;
        if rates.is_empty() {
            return None;
        }
        let crawler = self.crawler.as_ref()?;
        let (rule, scope) =
            rates.rule_for(crawler.name(), crawler.category(), crawler.purposes())?;
        let own =
            rule.per == crate::config::RatePer::Crawler && self.is_verified_as_deciding_crawler();
        let key = crate::tables::rates::RateKey {
            origin: self.origin.name(),
            crawler: budget_name(crawler.name(), crawler.source),
            client: if own {
                None
            } else {
                client.map(|client| self.origin.config.crawl_delay.prefix.network(client))
            },
        };
        Some((key, rule, scope))
    }

    /// The reason in words, for logs, `/explain` and the block response.
    pub fn reason(&self) -> String {
        match self.why {
            Why::NotCrawler => "not a crawler".to_string(),
            Why::ModeOff => "mode is off for this origin".to_string(),
            Why::RobotsTxtPath => "robots.txt is always allowed".to_string(),
            Why::ExemptPath => "the path is exempt (policy.exempt_paths)".to_string(),
            Why::AllowedClient => "the client is allowed (policy.allow_clients)".to_string(),
            Why::PolicyPass(_) | Why::PolicyBlock(_) | Why::PolicyLicense(_) => self.policy(),
            Why::ContentSignal => match self.content_signal() {
                Some(hit) => format!("line {}: {} refuses {}", hit.line, hit.text, hit.purpose),
                None => "a content signal refuses this use".to_string(),
            },
            Why::LicenseUrl => "the licence terms are always readable".to_string(),
            Why::ResponseSignal => match self.response_signal() {
                Some(hit) => format!(
                    "the page's {} header refuses {}: {}",
                    hit.signal.header(),
                    hit.purpose,
                    hit.value
                ),
                None => "the page's response headers refuse this use".to_string(),
            },
            Why::AllowAll => format!("robots.txt allows everything ({})", self.robots.reason),
            Why::DisallowAll => format!("robots.txt disallows everything ({})", self.robots.reason),
            Why::NoGroup => "no robots.txt group applies to this crawler".to_string(),
            Why::Rule | Why::NoRuleMatched => {
                let group = self.group.as_deref().unwrap_or("*");
                match &self.rule {
                    Some(rule) => format!("group `{group}`, line {}: {}", rule.line, rule.text()),
                    None => format!("group `{group}`: no rule matches"),
                }
            }
            Why::Impostor => {
                let crawler = self
                    .verification
                    .as_ref()
                    .map_or("a crawler", |v| v.crawler.as_str());
                let how = self.verification.as_ref().map_or("", |v| v.how.as_str());
                format!("the request claims to be {crawler} and is not ({how})")
            }
            Why::Trap => format!(
                "trap path (traps): the served robots.txt disallows it to every group{}",
                self.rule.as_ref().map_or(String::new(), |rule| format!(
                    ", line {}: {}",
                    rule.line,
                    rule.text()
                ))
            ),
            Why::Disguised => {
                let settings = self.origin.config.disguised;
                format!(
                    "disguised crawler: read robots.txt, then asked {} or more times within {} \
                     for paths it disallows to every group, with no crawler's User-Agent{}",
                    settings.strikes,
                    humantime::format_duration(settings.window),
                    self.rule.as_ref().map_or(String::new(), |rule| format!(
                        "; group `{}`, line {}: {}",
                        self.group.as_deref().unwrap_or("*"),
                        rule.line,
                        rule.text()
                    ))
                )
            }
        }
    }

    /// Which step of the policy decided, in the words `/explain` shows (`category library:
    /// pass`, `crawler GPTBot: block`, `exempt path`, `allowed client`, `robots.txt`).
    pub fn policy(&self) -> String {
        let crawler = self.crawler.as_ref();
        match self.why {
            Why::PolicyPass(by) | Why::PolicyBlock(by) | Why::PolicyLicense(by) => {
                let action = match self.why {
                    Why::PolicyPass(_) => "pass",
                    Why::PolicyLicense(_) => "license",
                    _ => "block",
                };
                match by {
                    PolicyBy::Crawler => {
                        format!("crawler {}: {action}", crawler.map_or("", |c| c.name()))
                    }
                    PolicyBy::Category => format!(
                        "category {}: {action}",
                        crawler.map_or("other", |c| c.category().as_str())
                    ),
                    PolicyBy::Purpose => format!(
                        "purpose {}: {action}",
                        crawler.map_or_else(String::new, |c| c.purposes().joined())
                    ),
                }
            }
            Why::ExemptPath => "exempt path".to_string(),
            Why::AllowedClient => "allowed client".to_string(),
            Why::RobotsTxtPath => "robots.txt path".to_string(),
            Why::NotCrawler => "not a crawler".to_string(),
            Why::ModeOff => "mode off".to_string(),
            Why::Impostor => "impostors".to_string(),
            Why::Trap => "traps".to_string(),
            Why::Disguised => "disguised".to_string(),
            Why::ContentSignal => "content-signal".to_string(),
            Why::LicenseUrl => "licence URL".to_string(),
            Why::ResponseSignal => "response-signal".to_string(),
            Why::AllowAll | Why::DisallowAll | Why::NoGroup | Why::Rule | Why::NoRuleMatched => {
                "robots.txt".to_string()
            }
        }
    }

    /// The reason in words fit for the client: what the logs and `/explain` say, without the
    /// robots.txt fetch details (upstream addresses, error texts, file paths) a client must not see.
    pub fn public_reason(&self) -> String {
        match self.why {
            Why::AllowAll => "robots.txt allows everything".to_string(),
            Why::DisallowAll => {
                "this site's robots.txt could not be read, so crawlers may fetch nothing for now"
                    .to_string()
            }
            Why::PolicyBlock(_) => "this site does not admit this crawler".to_string(),
            Why::Disguised => "this client read robots.txt and then kept asking for what it \
                               disallows to every crawler; it is treated as a crawler, and \
                               robots.txt disallows this path"
                .to_string(),
            Why::PolicyLicense(_) => {
                "this site licenses its content to this crawler on its terms".to_string()
            }
            Why::Impostor => {
                let crawler = self
                    .verification
                    .as_ref()
                    .map_or("a crawler", |v| v.crawler.as_str());
                format!("the request claims to be {crawler} and could not be verified")
            }
            _ => self.reason(),
        }
    }

    /// Whether the request identifies as a crawler that the origin's `policy` does not pass
    /// (by its name, or its category: apps' HTTP libraries and monitors by default), or carries
    /// no User-Agent (`user_agent`, as sent): what `offenders.scope: crawlers` refuses from a
    /// banned address. Browsers and passed categories are the people and apps behind it.
    pub fn is_bannable_crawler(&self, user_agent: &[u8]) -> bool {
        if is_blank_user_agent(user_agent) {
            return true;
        }
        let Some(crawler) = &self.crawler else {
            return false;
        };
        if matches!(self.why, Why::PolicyPass(_)) {
            return false;
        }
        let policy = &self.origin.config.policy;
        let (action, _, _) = policy_action(
            policy,
            crawler.name(),
            crawler.purposes(),
            crawler.controls().purposes(),
            crawler.category(),
        );
        action != crate::config::Action::Pass
    }

    /// The `crawler` metric label: the catalogue name, `other`, or `none` for a non-crawler.
    pub fn crawler_label(&self) -> &str {
        self.crawler.as_ref().map_or("none", |c| c.label())
    }

    /// The `category` metric label, or `none` for a non-crawler.
    pub fn category_label(&self) -> &'static str {
        self.crawler
            .as_ref()
            .map_or("none", |c| c.category().as_str())
    }
}

/// A User-Agent that names nobody: empty, or only spaces and control bytes.
pub fn is_blank_user_agent(user_agent: &[u8]) -> bool {
    user_agent
        .iter()
        .all(|b| b.is_ascii_whitespace() || b.is_ascii_control())
}

/// Why a request is refused before any robots.txt decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refused {
    /// No configured origin serves this Host: answer 421, never proxy.
    UnknownHost,
    /// The path holds `%2F` or `%5C` and the origin's `paths.escaped_slashes` is `reject`:
    /// answer 400.
    EscapedSlash,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refused::UnknownHost => "no configured origin serves this host",
            Refused::EscapedSlash => "the path holds an escaped slash, which this origin refuses",
        })
    }
}

impl std::error::Error for Refused {}

/// Product tokens a crawler can carry; more are ignored (catalogue entries have a handful).
const MAX_TOKENS: usize = 8;

/// The readings of one request target that a decision covers.
#[derive(Debug, Clone)]
pub struct Readings<'a> {
    /// The canonical path and query: what the decision is reported on and, with
    /// `forward: canonical`, exactly what the origin is sent.
    pub canonical: Cow<'a, [u8]>,
    /// With `forward: original`, the other ways an origin could read the client's bytes; each
    /// is decided too and the most restrictive answer wins.
    pub others: Vec<Vec<u8>>,
    /// The method only reads (GET or HEAD). Only reads of `/robots.txt` and of exempt paths
    /// skip the rules: a `POST /robots.txt` is an ordinary request to the origin's app.
    pub reads: bool,
}

impl Readings<'_> {
    /// The canonical reading and every other one.
    pub fn all(&self) -> impl Iterator<Item = &[u8]> {
        std::iter::once(&self.canonical[..]).chain(self.others.iter().map(Vec::as_slice))
    }
}

/// Reads a request's path and query (origin-form, as the client sent it) per an origin's
/// `paths` settings.
pub fn read_target(path: &[u8], paths: PathsConfig) -> Result<Readings<'_>, Refused> {
    let decode = match paths.escaped_slashes {
        EscapedSlashes::Reject if has_escaped_slash(path) => return Err(Refused::EscapedSlash),
        EscapedSlashes::Decode => true,
        EscapedSlashes::Reject | EscapedSlashes::Keep => false,
    };
    let canon = |bytes: &[u8]| -> Vec<u8> {
        if decode {
            canonicalize_decoding_slashes(bytes).into_owned()
        } else {
            canonicalize(bytes).into_owned()
        }
    };
    let canonical = if decode {
        canonicalize_decoding_slashes(path)
    } else {
        canonicalize(path)
    };
    let mut others = Vec::new();
    if paths.forward == Forward::Original {
        let mut add = |reading: Vec<u8>| {
            if reading != *canonical && !others.contains(&reading) {
                others.push(reading);
            }
        };
        if decode {
            // An origin that treats escaped slashes as data reads the plain form.
            add(canonicalize(path).into_owned());
        }
        if let Some(after_host) = authority_reading(path) {
            add(canon(&after_host));
            if decode {
                add(canonicalize(&after_host).into_owned());
            }
        }
    }
    Ok(Readings {
        canonical,
        others,
        reads: true,
    })
}

/// Decides a request. `host` is the raw Host header or authority; `path` the request target's
/// path and query as the client sent them. Per-client policy (`allow_clients`) does not apply:
/// see [`decide_for_client`].
pub fn decide(
    snapshot: &Snapshot,
    host: &[u8],
    user_agent: &[u8],
    path: &[u8],
) -> Result<Decision, Refused> {
    decide_for_client(snapshot, host, user_agent, path, None)
}

/// [`decide`] for a GET from `client`.
pub fn decide_for_client(
    snapshot: &Snapshot,
    host: &[u8],
    user_agent: &[u8],
    path: &[u8],
    client: Option<IpAddr>,
) -> Result<Decision, Refused> {
    decide_for_method(snapshot, host, user_agent, path, client, &http::Method::GET)
}

/// [`decide_for_client`] for a request with this method: only GET and HEAD read `/robots.txt`
/// and exempt paths without the rules applying.
pub fn decide_for_method(
    snapshot: &Snapshot,
    host: &[u8],
    user_agent: &[u8],
    path: &[u8],
    client: Option<IpAddr>,
    method: &http::Method,
) -> Result<Decision, Refused> {
    let request = Request {
        host,
        user_agent,
        path,
        client,
        method,
        signed_by: None,
        budgets: None,
    };
    decide_request(snapshot, &request)
}

/// Everything a decision is made on.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The Host (or `:authority`) as sent.
    pub host: &'a [u8],
    /// The User-Agent as sent (empty when there is none).
    pub user_agent: &'a [u8],
    /// The request target's path and query as sent.
    pub path: &'a [u8],
    /// The client's address, when known.
    pub client: Option<IpAddr>,
    /// The method: only GET and HEAD read `/robots.txt` and exempt paths as such.
    pub method: &'a http::Method,
    /// A crawler (catalogue name) a valid signature identified, whatever the User-Agent says.
    pub signed_by: Option<&'a str>,
    /// The Crawl-delay budgets the request will be admitted against after the decision, when
    /// they are this process's: the decision starts loading the crawler's budget into the CPU's
    /// caches before it matches the rules, so that the admission finds it there.
    pub budgets: Option<&'a CrawlDelays>,
}

/// Decides `request`: routes it, reads its target, and decides under every crawler it claims
/// (the one a signature identified first).
pub fn decide_request(snapshot: &Snapshot, request: &Request<'_>) -> Result<Decision, Refused> {
    decide_routed(snapshot, route(snapshot, request.host)?, request)
}

/// The origin that serves `host` (the Host header or `:authority` as sent).
pub fn route<'s>(snapshot: &'s Snapshot, host: &[u8]) -> Result<&'s Arc<Origin>, Refused> {
    // Configured hosts are kept normalised, and normalising a normalised host changes nothing:
    // a Host that is a key as sent (lower-case, no port, the usual case) routes where its
    // normalised form would, without the pass over its bytes.
    if let Some(origin) = snapshot.origin_for_bytes(host) {
        return Ok(origin);
    }
    let host = normalize_host_bytes(host).ok_or(Refused::UnknownHost)?;
    snapshot.origin_for_bytes(&host).ok_or(Refused::UnknownHost)
}

/// [`decide_request`] for a request [`route`] already routed to `origin` (its `host` is not
/// read again).
pub fn decide_routed(
    snapshot: &Snapshot,
    origin: &Arc<Origin>,
    request: &Request<'_>,
) -> Result<Decision, Refused> {
    let path = request.path;
    let paths = origin.config.paths;
    let robots = origin.robots.current();
    let named = identify(snapshot, &robots, request.user_agent, request.signed_by);
    // A request that names no crawler needs its target read only to tell whether it reads
    // robots.txt, for a Content-Usage header, or to forward it canonical: most requests are
    // browsers', and their path is not canonicalised for nothing.
    if named.is_empty()
        && !origin.config.content_signals.header
        && paths.forward != Forward::Canonical
        && !may_read_as_robots_txt(path)
    {
        if paths.escaped_slashes == EscapedSlashes::Reject && has_escaped_slash(path) {
            return Err(Refused::EscapedSlash);
        }
        return Ok(unnamed_decision(origin, &robots, false));
    }
    let mut readings = read_target(path, paths)?;
    readings.reads = *request.method == http::Method::GET || *request.method == http::Method::HEAD;
    let mut decision = decide_identified(
        origin,
        &robots,
        named,
        &readings,
        request.client,
        request.signed_by,
        request.budgets,
    );
    if origin.config.content_signals.header {
        if let Some(header) = content_usage_header(&decision, &readings.canonical) {
            decision.usage_mut().content_usage = Some(header);
        }
    }
    if origin.config.paths.forward == Forward::Canonical && readings.canonical[..] != *path {
        decision.rewritten_target = Some(readings.canonical.into_owned());
    }
    Ok(decision)
}

/// Decides a request already routed to `origin`, on every reading of its target and under
/// every crawler its User-Agent names: blocked when any of them is disallowed.
pub fn decide_for_origin(
    snapshot: &Snapshot,
    origin: &Arc<Origin>,
    user_agent: &[u8],
    readings: &Readings<'_>,
    client: Option<IpAddr>,
) -> Decision {
    decide_named(snapshot, origin, user_agent, readings, client, None, None)
}

fn decide_named(
    snapshot: &Snapshot,
    origin: &Arc<Origin>,
    user_agent: &[u8],
    readings: &Readings<'_>,
    client: Option<IpAddr>,
    signed_by: Option<&str>,
    budgets: Option<&CrawlDelays>,
) -> Decision {
    let robots = origin.robots.current();
    let named = identify(snapshot, &robots, user_agent, signed_by);
    decide_identified(origin, &robots, named, readings, client, signed_by, budgets)
}

/// The crawlers a User-Agent names (with a Web Bot Auth signature's crawler first).
fn identify<'a>(
    snapshot: &'a Snapshot,
    robots: &'a RobotsCopy,
    user_agent: &'a [u8],
    signed_by: Option<&str>,
) -> Named<'a> {
    let named = snapshot
        .identifier
        .identify_all(user_agent, Some(&robots.scanner));
    match signed_by.and_then(|name| snapshot.identifier.entry_named(name)) {
        Some(signed) => named.with_primary(signed),
        None => named,
    }
}

/// The decision for a request that names no crawler: it passes.
fn unnamed_decision(
    origin: &Arc<Origin>,
    robots: &Arc<RobotsCopy>,
    reads_robots_txt: bool,
) -> Decision {
    Decision {
        origin: origin.clone(),
        outcome: Outcome::Pass,
        crawler: None,
        also_named: Vec::new(),
        group: None,
        rule: None,
        why: Why::NotCrawler,
        robots: robots.clone(),
        rewritten_target: None,
        verification: None,
        crawl_delay: None,
        reads_robots_txt,
        usage: None,
        spared: SparedPurposes::default(),
    }
}

/// Whether some reading of `target` (path and query as sent) could be `/robots.txt`: a
/// canonical reading keeps the path's last character (decoding `%74`) or leaves a trailing
/// slash, so a path that ends in neither `t` nor `%74` cannot read as `/robots.txt`. Cheap:
/// almost every request is asked, and almost none can be it.
pub fn may_read_as_robots_txt(target: &[u8]) -> bool {
    let path = match memchr::memchr(b'?', target) {
        Some(query) => &target[..query],
        None => target,
    };
    path.ends_with(b"t") || path.ends_with(b"%74")
}

#[allow(clippy::too_many_arguments)]
fn decide_identified(
    origin: &Arc<Origin>,
    robots: &Arc<RobotsCopy>,
    named: Named<'_>,
    readings: &Readings<'_>,
    client: Option<IpAddr>,
    signed_by: Option<&str>,
    budgets: Option<&CrawlDelays>,
) -> Decision {
    let reads_robots_txt = readings.reads && readings.all().all(|path| path == b"/robots.txt");
    if named.is_empty() {
        return unnamed_decision(origin, robots, reads_robots_txt);
    }
    let mut decision = Decision {
        crawler: named.primary().map(Crawler::from_identity),
        // Most requests name one crawler or none: nothing to collect.
        also_named: if named.len() > 1 {
            named
                .iter()
                .skip(1)
                .map(|identity| identity.name.to_string())
                .collect()
        } else {
            Vec::new()
        },
        ..unnamed_decision(origin, robots, reads_robots_txt)
    };
    if origin.config.mode == Mode::Off {
        decision.why = Why::ModeOff;
        return decision;
    }
    // `/robots.txt` and exempt paths are for reading, as they are: every reading of the target
    // must be one, without a query (`/robots.txt?rest_route=...` is WordPress's REST API), and
    // the method must only read.
    if decision.reads_robots_txt {
        decision.why = Why::RobotsTxtPath;
        return decision;
    }
    // Policy, in its order: exempt paths, allowed clients, then each crawler's action (by name,
    // else by category).
    let policy = &origin.config.policy;
    if readings.reads
        && !policy.exempt_paths.is_empty()
        && readings
            .all()
            .all(|path| is_exempt(&policy.exempt_paths, path))
    {
        decision.why = Why::ExemptPath;
        return decision;
    }
    if client.is_some_and(|address| origin.allow_clients.contains(address)) {
        decision.why = Why::AllowedClient;
        return decision;
    }
    // Counted rather than collected: most requests name one crawler, and a list would cost an
    // allocation per crawler request.
    let mut enforced = 0usize;
    let mut first_enforced: Option<&Identity<'_>> = None;
    let mut passed_by = None;
    let mut licensed_by = None;
    for (index, identity) in named.iter().enumerate() {
        let (action, by, spared) = action_for(policy, identity);
        if index == 0 {
            decision.spared = spared;
        }
        match action {
            Action::Block => {
                decision.why = Why::PolicyBlock(by);
                set_deciding_crawler(&mut decision, identity);
                decision.spared = spared;
                decision.outcome = if origin.config.mode == Mode::Report {
                    Outcome::WouldBlock
                } else {
                    Outcome::Blocked
                };
                return decision;
            }
            Action::License => {
                // A block of another crawler named is still more restrictive: look on.
                licensed_by.get_or_insert((identity, by));
            }
            Action::Pass => {
                passed_by.get_or_insert((identity, by));
            }
            Action::Enforce => {
                enforced += 1;
                first_enforced.get_or_insert(identity);
            }
        }
    }
    if let Some((identity, by)) = licensed_by {
        decision.why = Why::PolicyLicense(by);
        set_deciding_crawler(&mut decision, identity);
        decision.spared = action_for(policy, identity).2;
        decision.outcome = if origin.config.mode == Mode::Report {
            Outcome::WouldBlock
        } else {
            Outcome::Blocked
        };
        return decision;
    }
    if enforced == 0 {
        if let Some((identity, by)) = passed_by {
            set_deciding_crawler(&mut decision, identity);
            decision.why = Why::PolicyPass(by);
        }
        return decision;
    }
    let disallowed = match &robots.policy {
        Policy::AllowAll => {
            decision.why = Why::AllowAll;
            false
        }
        Policy::DisallowAll => {
            decision.why = Why::DisallowAll;
            true
        }
        Policy::Rules(rules) => {
            if let (Some(budgets), Some(identity), true) = (
                budgets,
                first_enforced,
                rules.has_crawl_delay()
                    && origin.config.crawl_delay.action != CrawlDelayAction::Ignore,
            ) {
                let network = client.map(|client| origin.config.crawl_delay.prefix.network(client));
                prefetch_budget(budgets, origin.name(), identity, network, signed_by);
            }
            let mut first: Option<Verdict<'_>> = None;
            let mut blocking: Option<(Verdict<'_>, &Identity<'_>)> = None;
            let enforced_identities = named.iter().filter(|identity| {
                enforced == named.len() || action_for(policy, identity).0 == Action::Enforce
            });
            'crawlers: for identity in enforced_identities {
                let (tokens, count) = robots_tokens(identity.tokens.iter());
                let fallback = global_fallback(identity.ignores_global);
                let paths = std::iter::once(&readings.canonical[..])
                    .chain(readings.others.iter().map(Vec::as_slice));
                for path in paths {
                    let verdict =
                        rules.verdict_with_canonical_path(&tokens[..count], path, fallback);
                    if !verdict.allowed {
                        blocking = Some((verdict, identity));
                        break 'crawlers;
                    }
                    first.get_or_insert(verdict);
                }
            }
            match (blocking, first) {
                (Some((verdict, identity)), _) => {
                    set_deciding_crawler(&mut decision, identity);
                    record_verdict(&mut decision, &verdict);
                    true
                }
                (None, Some(verdict)) => {
                    if let Some(first) = first_enforced {
                        set_deciding_crawler(&mut decision, first);
                    }
                    record_verdict(&mut decision, &verdict);
                    let signals = origin.config.content_signals.action;
                    if signals != SignalAction::Ignore && rules.has_preferences() {
                        let preferences =
                            rules.preferences_with_canonical_path(&verdict, &readings.canonical);
                        apply_preferences(&mut decision, &preferences);
                    }
                    decision.content_signal().is_some() && signals == SignalAction::Enforce
                }
                (None, None) => false,
            }
        }
    };
    decision.outcome = match (disallowed, origin.config.mode) {
        (false, _) if decision.content_signal().is_some() => Outcome::WouldBlock,
        (false, _) => Outcome::Allowed,
        (true, Mode::Report) => Outcome::WouldBlock,
        (true, _) => Outcome::Blocked,
    };
    decision
}

/// Records the preference lines that apply and, when one refuses a purpose of the decision's
/// crawler, the refusal (the decision then says why: [`Why::ContentSignal`]).
fn apply_preferences(decision: &mut Decision, preferences: &Preferences<'_>) {
    if preferences.is_empty() {
        return;
    }
    let scoped = preferences.scoped.len();
    decision.usage_mut().lines = preferences
        .lines()
        .enumerate()
        .map(|(index, line)| AppliedPreference {
            line: line.line,
            text: line.shown.clone(),
            scoped: index < scoped,
        })
        .collect();
    let Some(crawler) = &decision.crawler else {
        return;
    };
    let purposes = crawler.purposes();
    let controlled = crawler.controls().purposes();
    let multi_purpose = decision.origin.config.content_signals.multi_purpose;
    let mut spared = decision.spared;
    let refused = crawler.purposes().iter().find_map(|purpose| {
        let statement = preferences.statement(use_of(purpose)?)?;
        if statement.allowed {
            return None;
        }
        match crate::config::spared(purpose, purposes, controlled, multi_purpose) {
            Some(Spared::Token) => {
                spared.by_token = spared.by_token.with(purpose);
                None
            }
            Some(Spared::Search) => {
                spared.for_search = spared.for_search.with(purpose);
                None
            }
            None => Some(SignalRefusal {
                purpose,
                line: statement.line.line,
                text: statement.line.shown.clone(),
                refused_rule: None,
            }),
        }
    });
    decision.spared = spared;
    if let Some(mut refusal) = refused {
        // The refusal cites the preference line, not the `Allow` rule that let the path be
        // fetched: the body, the log line and `/explain` name the line that said no.
        let line = preferences
            .lines()
            .find(|line| line.line == refusal.line)
            .map(|line| MatchedRule {
                line: line.line,
                directive: line.kind.as_str(),
                pattern: line.text.clone(),
            });
        refusal.refused_rule = std::mem::replace(&mut decision.rule, line);
        decision.usage_mut().refusal = Some(refusal);
        decision.why = Why::ContentSignal;
    }
}

/// The preference lines' name for what a purpose does with a page (`other` has none).
fn use_of(purpose: Purpose) -> Option<Use> {
    match purpose {
        Purpose::Search => Some(Use::Search),
        Purpose::Training => Some(Use::TrainAi),
        Purpose::Agent => Some(Use::AiInput),
        Purpose::Other => None,
    }
}

/// The `Content-Usage` header value for a decided request (`content_signals.header`): the
/// preferences of the crawler's group on the path, or of the `*` group for everyone else.
fn content_usage_header(decision: &Decision, canonical: &[u8]) -> Option<String> {
    let Policy::Rules(rules) = &decision.robots.policy else {
        return None;
    };
    if !rules.has_preferences() {
        return None;
    }
    let (tokens, count, fallback) = match &decision.crawler {
        Some(crawler) => {
            let (tokens, count) = robots_tokens(crawler.tokens().iter().map(String::as_str));
            (tokens, count, global_fallback(crawler.ignores_global))
        }
        None => ([""; MAX_TOKENS], 0, GlobalFallback::Use),
    };
    let verdict = rules.verdict_with_canonical_path(&tokens[..count], canonical, fallback);
    rules
        .preferences_with_canonical_path(&verdict, canonical)
        .content_usage_header()
}

/// The crawler name a budget is kept under: [`GENERIC_BUDGET`] for any crawler found only by
/// the generic rules (names the client made up), else its own.
fn budget_name(name: &str, source: IdentitySource) -> &str {
    match source {
        IdentitySource::Generic => GENERIC_BUDGET,
        _ => name,
    }
}

/// Starts loading the budget an allowed request of `identity` (the first crawler robots.txt is
/// enforced for) would be admitted against: the address's, or the crawler's own when a signature
/// already verified it. Verification by address comes after the decision; a verified crawler's
/// own budget is one line that every request of that crawler touches, so it is in cache while
/// the crawler is busy, and the address's is the one a crawl from many addresses misses.
fn prefetch_budget(
    budgets: &CrawlDelays,
    origin: &str,
    identity: &Identity<'_>,
    client: Option<ipnet::IpNet>,
    signed_by: Option<&str>,
) {
    let signed = signed_by.is_some_and(|name| name.eq_ignore_ascii_case(identity.name));
    budgets.prefetch(BudgetKey {
        origin,
        crawler: budget_name(identity.name, identity.source),
        client: if signed { None } else { client },
    });
}

/// A crawler's tokens as robots.txt names are compared (at most [`MAX_TOKENS`]): robots.txt
/// names are their leading [A-Za-z_-] run (`MJ12bot` is `mj`), so the owner's line applies.
fn robots_tokens<'a>(tokens: impl Iterator<Item = &'a str>) -> ([&'a str; MAX_TOKENS], usize) {
    let mut reduced_tokens: [&str; MAX_TOKENS] = [""; MAX_TOKENS];
    let mut count = 0;
    for token in tokens {
        let reduced = crate::robots::reduce_agent_name(token.as_bytes());
        if count < MAX_TOKENS && !reduced.is_empty() {
            reduced_tokens[count] = &token[..reduced.len()];
            count += 1;
        }
    }
    (reduced_tokens, count)
}

/// Whether the `*` group applies to a crawler without a group of its own.
fn global_fallback(ignores_global: bool) -> GlobalFallback {
    if ignores_global {
        GlobalFallback::Ignore
    } else {
        GlobalFallback::Use
    }
}

/// Whether `copy` (an earlier robots.txt of the decision's origin) also disallows what
/// `decision` was blocked for: the same crawler, the same path (`path`: the request's target, read
/// as [`decide_request`] reads it). A copy with no rules disallows only when it disallows all.
pub fn copy_disallows(copy: &RobotsCopy, decision: &Decision, path: &[u8]) -> bool {
    let Some(crawler) = &decision.crawler else {
        return false;
    };
    let rules = match &copy.policy {
        Policy::AllowAll => return false,
        Policy::DisallowAll => return true,
        Policy::Rules(rules) => rules,
    };
    let Ok(readings) = read_target(path, decision.origin.config.paths) else {
        return true;
    };
    let (tokens, count) = robots_tokens(crawler.tokens().iter().map(String::as_str));
    let fallback = global_fallback(crawler.ignores_global);
    let disallowed = readings.all().any(|reading| {
        !rules
            .verdict_with_canonical_path(&tokens[..count], reading, fallback)
            .allowed
    });
    disallowed
}

/// Whether `copy` disallows the canonical path `canonical` to every group it has: `*` and each
/// named one (a file without a `*` group lets a crawler of any other name fetch it). What the
/// signal of disguised crawlers counts.
pub fn disallowed_to_every_group(copy: &RobotsCopy, canonical: &[u8]) -> bool {
    let rules = match &copy.policy {
        Policy::AllowAll => return false,
        Policy::DisallowAll => return true,
        Policy::Rules(rules) => rules,
    };
    // A token no group can be named: the `*` group's verdict.
    let global = rules.verdict_with_canonical_path(&[], canonical, GlobalFallback::Use);
    if global.allowed || global.group != GroupMatch::Global {
        return false;
    }
    // The groups robotsguard added for control tokens name no crawler: what they allow is no
    // crawler's to fetch.
    let added = |name: &str| {
        copy.added_groups
            .iter()
            .any(|group| group.token.eq_ignore_ascii_case(name))
    };
    rules.agent_names().filter(|name| !added(name)).all(|name| {
        !rules
            .verdict_with_canonical_path(&[name], canonical, GlobalFallback::Ignore)
            .allowed
    })
}

/// The verdict of `copy`'s `*` group for the canonical path `canonical` (what binds a crawler
/// with no group of its own, such as a disguised one), when it disallows it: the deciding rule.
pub fn global_disallows(copy: &RobotsCopy, canonical: &[u8]) -> Option<Option<MatchedRule>> {
    match &copy.policy {
        Policy::AllowAll => None,
        Policy::DisallowAll => Some(None),
        Policy::Rules(rules) => {
            let verdict = rules.verdict_with_canonical_path(&[], canonical, GlobalFallback::Use);
            (!verdict.allowed).then(|| {
                verdict.rule.map(|rule| MatchedRule {
                    line: rule.line,
                    directive: rule.directive.as_str(),
                    pattern: rule.pattern.to_string(),
                })
            })
        }
    }
}

/// Whether every reading of a target is under one of the origin's `policy.exempt_paths`, for a
/// request that only reads.
pub fn is_exempt_reading(origin: &Origin, readings: &Readings<'_>) -> bool {
    let prefixes = &origin.config.policy.exempt_paths;
    readings.reads && !prefixes.is_empty() && readings.all().all(|path| is_exempt(prefixes, path))
}

/// What `policy` says for one crawler named: its own entry, else the most restrictive entry
/// for its purposes (but for the refusals it is spared), else its category's.
fn action_for(
    policy: &PolicyConfig,
    identity: &Identity<'_>,
) -> (Action, PolicyBy, SparedPurposes) {
    let controlled = identity
        .info
        .map_or_else(Purposes::default, |info| info.controls.purposes());
    policy_action(
        policy,
        identity.name,
        identity.purposes,
        controlled,
        identity.category,
    )
}

/// What `policy` says for a crawler called `name` serving `purposes` (`controlled` of them
/// through its operator's own robots.txt tokens), of `category`: the action, which entry gave
/// it, and the purposes' refusals it was spared.
pub fn policy_action(
    policy: &PolicyConfig,
    name: &str,
    purposes: Purposes,
    controlled: Purposes,
    category: Category,
) -> (Action, PolicyBy, SparedPurposes) {
    if !policy.crawlers.is_empty() {
        if let Some(action) = policy.crawler(name) {
            return (action, PolicyBy::Crawler, SparedPurposes::default());
        }
    }
    let written = policy.purpose_action(purposes, controlled);
    match written.action {
        Some((action, _)) => (action, PolicyBy::Purpose, written.spared),
        None => (
            policy.category(category),
            PolicyBy::Category,
            written.spared,
        ),
    }
}

/// Makes `identity` the decision's crawler (the one that decided); the primary, if another,
/// becomes "also named".
fn set_deciding_crawler(decision: &mut Decision, identity: &Identity<'_>) {
    if decision.crawler.as_ref().map(|c| c.name()) == Some(identity.name) {
        return;
    }
    if let Some(primary) = decision.crawler.take() {
        decision.also_named.retain(|name| name != identity.name);
        decision.also_named.insert(0, primary.name().to_string());
    }
    decision.crawler = Some(Crawler::from_identity(identity));
}

/// Whether a canonical path without a query starts with one of the exempt prefixes.
fn is_exempt(prefixes: &[String], path: &[u8]) -> bool {
    !path.contains(&b'?')
        && prefixes
            .iter()
            .any(|prefix| path.starts_with(prefix.as_bytes()))
}

fn record_verdict(decision: &mut Decision, verdict: &Verdict<'_>) {
    decision.group = match verdict.group {
        GroupMatch::Agent(name) => Some(name.to_string()),
        GroupMatch::Global => Some("*".to_string()),
        GroupMatch::None => None,
    };
    decision.rule = verdict.rule.map(|rule| MatchedRule {
        line: rule.line,
        directive: rule.directive.as_str(),
        pattern: rule.pattern.to_string(),
    });
    decision.crawl_delay = verdict.crawl_delay;
    decision.why = match (&decision.group, &decision.rule) {
        (None, _) => Why::NoGroup,
        (Some(_), Some(_)) => Why::Rule,
        (Some(_), None) => Why::NoRuleMatched,
    };
}
