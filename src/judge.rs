//! The whole judgment of one request, with no HTTP in it, as named phases (the module `phases`):
//! identify (route, crawler, policy and robots.txt verdict) → robots.txt (read recorded, copy
//! served) → bans → signals (trap hit, disguised crawler) → verify (Web Bot Auth, the claim
//! checked) → budgets (Crawl-delay) → strikes → answer.
//!
//! A request a browser makes for another site's page ([`Fetch::third_party`]: a sub-resource
//! load, a navigation from another site) is never what a ban or the read-then-violate signal
//! stands on: anyone's page can make a visitor's browser send it.
//!
//! Three callers, one answer: the proxy ([`crate::guard::Guard::request_filter`]) judges in
//! [`Mode::Apply`] (it spends Crawl-delay budgets, records robots.txt reads, counts strikes and
//! writes the log lines of refused requests); `/explain` and embedders
//! ([`crate::guard::Guard::judge`]) judge in [`Mode::Preview`], which changes nothing. The
//! difference is one value, [`Effects`], that every phase asks. Outcomes beyond the pure
//! robots.txt and policy verdict of [`crate::enforce`] (banned, limited, would limit) are set
//! here and nowhere else.

mod effects;
mod phases;
pub mod response;
mod signals;
mod web_bot_auth;

pub use effects::Effects;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{
    CrawlDelayAction, DisguisedAction, Mode as OriginMode, OffendersAction, TrapAction,
    WebBotAuthMode,
};
use crate::enforce::{is_blank_user_agent, Decision, Outcome, Why};
use crate::metrics::METRICS;
use crate::snapshot::Origin;
use crate::snapshot::{RobotsCopy, Snapshot};
use crate::store::{Earner, Store};
use crate::tables::crawl_delay::retry_after_seconds;
use crate::tables::offenders::{Ban, BanCause};
use crate::verify::Verifier;

/// What a judgment may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// The proxy's: spends the Crawl-delay budget, records a robots.txt read, counts a strike
    /// (and bans), counts the request's verdicts in metrics and logs a refusal.
    Apply,
    /// `/explain`'s and embedders': the answer the proxy would give now, changing nothing.
    Preview,
    /// [`Mode::Preview`] sending no DNS query: a claim only a reverse DNS lookup not yet made
    /// could check stays unverified and says so (`/explain` once its lookups are used up).
    PreviewWithoutLookups,
}

/// How long a signed claim whose agent's keys are not loaded is told to wait (`Retry-After`):
/// the first retries of a failed key fetch come within it.
pub const KEYS_UNAVAILABLE_RETRY: Duration = Duration::from_secs(60);

/// A crawler a valid Web Bot Auth signature identified (whatever the User-Agent says).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// The signing agent (`https://chatgpt.com`).
    pub agent: String,
    /// The catalogue name of the crawler the agent stands for.
    pub crawler: String,
    /// The signature's `nonce`, if it has one: seen again while the signature is valid, the
    /// request is a replay (429).
    pub nonce: Option<String>,
    /// How long the signature stays valid (how long its nonce is remembered).
    pub lifetime: Duration,
    /// When it was made (`created`), when known: a signature without a nonce is accepted only
    /// within `verify.web_bot_auth.nonceless_window` of it, unless its agent is listed in
    /// `nonceless_agents`.
    pub created: Option<std::time::SystemTime>,
    /// A digest standing for a signature without a nonce: seen again from another address
    /// while it is valid, the request is a replay (429).
    pub digest: Option<[u8; 32]>,
    /// The signature's `keyid` (the thumbprint of the agent's key), when known: what an
    /// evidence record names as the key that verified the claim.
    pub keyid: Option<String>,
}

impl Signed {
    /// A signature of `agent` identifying `crawler`, without a nonce, checked elsewhere (no
    /// `created` or digest: the nonce-less bounds do not apply).
    pub fn new(agent: &str, crawler: &str) -> Signed {
        Signed {
            agent: agent.to_string(),
            crawler: crawler.to_string(),
            nonce: None,
            lifetime: Duration::ZERO,
            created: None,
            digest: None,
            keyid: None,
        }
    }
}

/// The Web Bot Auth mode for a request to `host`: its origin's `web_bot_auth.mode`, else
/// `verify.web_bot_auth.mode`.
pub fn web_bot_auth_mode(snapshot: &Snapshot, verifier: &Verifier, host: &[u8]) -> WebBotAuthMode {
    crate::config::normalize_host(host)
        .and_then(|host| snapshot.origin_for(&host))
        .and_then(|origin| origin.config.web_bot_auth)
        .unwrap_or_else(|| verifier.web_bot_auth_mode())
}

/// The facts read off one request: everything the judgment uses.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// The Host (or `:authority`) as sent.
    pub host: &'a [u8],
    /// The User-Agent as sent (empty when there is none).
    pub user_agent: &'a [u8],
    /// The path and query the request is decided on, as sent: the origin-form target, the path
    /// of an absolute-form one, `/` for `OPTIONS *`.
    pub target: &'a [u8],
    /// The request method.
    pub method: &'a http::Method,
    /// The client's address (the peer's, or what a trusted proxy forwarded), when known.
    pub client: Option<IpAddr>,
    /// A verified Web Bot Auth signature, when the request carries one.
    pub signed: Option<&'a Signed>,
    /// The request is signed by a known agent whose keys are not loaded (yet, or not
    /// reachable): its signature can be neither accepted nor refused. Under `required` a claim
    /// of a signing crawler is then told to come back (503), never let through unverified.
    pub keys_unavailable: bool,
    /// The request id the access log and the origin see, when there is one: the log lines of
    /// a refusal, a ban or a banned address's browser request carry it.
    pub request_id: Option<&'a str>,
    /// What the request's headers say about the page that caused it.
    pub fetch: Fetch<'a>,
}

/// The headers by which a browser says what caused a request: Fetch Metadata's
/// `Sec-Fetch-Dest` and `Sec-Fetch-Site`, `Accept` and `Referer` (each as sent, when sent).
/// Read only where a request would count toward a ban or a disguised crawler.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fetch<'a> {
    /// `Sec-Fetch-Dest`: `document` for a top-level navigation, `image`, `script`, `iframe`,
    /// `empty` (a `fetch()`), ... for what a page loads.
    pub dest: Option<&'a [u8]>,
    /// `Sec-Fetch-Site`: `none` (typed, a bookmark), `same-origin`, `same-site` or
    /// `cross-site`.
    pub site: Option<&'a [u8]>,
    /// `Accept`.
    pub accept: Option<&'a [u8]>,
    /// `Referer`.
    pub referer: Option<&'a [u8]>,
}

/// Why a request is taken for one that another site's page caused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ThirdParty {
    /// `Sec-Fetch-Dest` other than `document`: an image, a script, a frame, a `fetch()`.
    SubResource,
    /// `Sec-Fetch-Site: cross-site` (or `same-site` without a `Referer` of this origin).
    CrossSite,
    /// A `Referer` on a host that is not this origin's.
    Referer,
    /// An `Accept` that does not take HTML (an image's, a style sheet's).
    NotHtml,
}

impl ThirdParty {
    /// `sub_resource`, `cross_site`, `referer` or `accept`: as the log says it.
    pub fn as_str(self) -> &'static str {
        match self {
            ThirdParty::SubResource => "sub_resource",
            ThirdParty::CrossSite => "cross_site",
            ThirdParty::Referer => "referer",
            ThirdParty::NotHtml => "accept",
        }
    }
}

impl Fetch<'_> {
    /// Whether the request is one a browser makes for another site's page, and why: a
    /// sub-resource load (`Sec-Fetch-Dest` present and not `document`), a request another site
    /// started (`Sec-Fetch-Site: cross-site`; `same-site` unless the `Referer` is one of
    /// `origin`'s hosts), a `Referer` on a host that is not one of `origin`'s, or an `Accept`
    /// that does not take HTML. Browsers set the `Sec-Fetch-*` headers themselves (a page
    /// cannot) and a page can at most drop the `Referer`, never forge it. A request without any
    /// of them (no `Accept` at all, `Accept: */*` alone as curl and HTTP libraries send) is not
    /// one: a client that leaves them out is judged on what it asks for.
    pub fn third_party(&self, snapshot: &Snapshot, origin: &Arc<Origin>) -> Option<ThirdParty> {
        if self
            .dest
            .is_some_and(|dest| !dest.trim_ascii().eq_ignore_ascii_case(b"document"))
        {
            return Some(ThirdParty::SubResource);
        }
        let referer = self
            .referer
            .map(|referer| referer_is_own(referer, snapshot, origin));
        if let Some(site) = self.site.map(<[u8]>::trim_ascii) {
            if site.eq_ignore_ascii_case(b"cross-site")
                || (site.eq_ignore_ascii_case(b"same-site") && referer != Some(Some(true)))
            {
                return Some(ThirdParty::CrossSite);
            }
        }
        if referer == Some(Some(false)) {
            return Some(ThirdParty::Referer);
        }
        if self.accept.is_some_and(|accept| !accepts_html(accept)) {
            return Some(ThirdParty::NotHtml);
        }
        None
    }
}

/// Whether a `Referer` names one of `origin`'s hosts; `None` when it names no host (not an
/// absolute URL): that says nothing about another site.
fn referer_is_own(referer: &[u8], snapshot: &Snapshot, origin: &Arc<Origin>) -> Option<bool> {
    let referer = referer.trim_ascii();
    let start = memchr::memmem::find(referer, b"://")? + 3;
    let rest = &referer[start..];
    let end = rest
        .iter()
        .position(|&b| matches!(b, b'/' | b'?' | b'#'))
        .unwrap_or(rest.len());
    let authority = &rest[..end];
    let host = match memchr::memrchr(b'@', authority) {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    let Some(host) = crate::config::normalize_host_bytes(host) else {
        return Some(false);
    };
    Some(
        snapshot
            .origin_for_bytes(&host)
            .is_some_and(|routed| Arc::ptr_eq(routed, origin)),
    )
}

/// Whether an `Accept` value takes an HTML page: it names `text/html`,
/// `application/xhtml+xml` or `text/*` (not at `q=0`), or it is `*/*` alone (what curl and
/// HTTP libraries send). A browser's image, style sheet or script load names its own types
/// first (`image/avif,image/webp,*/*;q=0.8`): that does not.
fn accepts_html(accept: &[u8]) -> bool {
    let mut ranges = 0;
    let mut any = false;
    for range in accept.split(|&b| b == b',') {
        let mut parts = range.split(|&b| b == b';');
        let media = parts.next().unwrap_or_default().trim_ascii();
        if media.is_empty() {
            continue;
        }
        ranges += 1;
        let refused = parts.any(|param| {
            let param = param.trim_ascii();
            param.len() >= 2
                && param[..2].eq_ignore_ascii_case(b"q=")
                && param[2..]
                    .trim_ascii()
                    .iter()
                    .all(|&b| b == b'0' || b == b'.')
        });
        if refused {
            continue;
        }
        if [&b"text/html"[..], b"application/xhtml+xml", b"text/*"]
            .iter()
            .any(|html| media.eq_ignore_ascii_case(html))
        {
            return true;
        }
        any |= media == b"*/*";
    }
    // No range at all (an empty header) says nothing either.
    ranges == 0 || (ranges == 1 && any)
}

impl<'a> Facts<'a> {
    /// A GET of `target` on `host` by `user_agent`, from an unknown client, unsigned.
    pub fn get(host: &'a [u8], user_agent: &'a [u8], target: &'a [u8]) -> Facts<'a> {
        Facts {
            host,
            user_agent,
            target,
            method: &http::Method::GET,
            client: None,
            signed: None,
            keys_unavailable: false,
            request_id: None,
            fetch: Fetch::default(),
        }
    }

    /// The same facts from `client`.
    pub fn from_client(self, client: IpAddr) -> Facts<'a> {
        Facts {
            client: Some(client),
            ..self
        }
    }
}

/// What is done with the request.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Answer {
    /// Sent to the origin.
    Proxy,
    /// Answered with the origin's robots.txt copy in force, by robotsguard (`robots.serve`).
    ServeRobots(Arc<RobotsCopy>),
    /// Answered by robotsguard with an error status.
    Refuse(Refusal),
}

impl Answer {
    /// `proxy`, `serve_robots` or `refuse`, as `/explain` shows it.
    pub fn action(&self) -> &'static str {
        match self {
            Answer::Proxy => "proxy",
            Answer::ServeRobots(_) => "serve_robots",
            Answer::Refuse(_) => "refuse",
        }
    }

    /// The status robotsguard answers with itself: `None` when the request is proxied.
    pub fn status(&self) -> Option<u16> {
        match self {
            Answer::Proxy => None,
            Answer::ServeRobots(_) => Some(200),
            Answer::Refuse(refusal) => Some(refusal.status),
        }
    }
}

/// A request robotsguard answers with an error of its own.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// The status sent.
    pub status: u16,
    /// Why.
    pub why: RefusedFor,
}

impl Refusal {
    /// The refusal for `why`, with the status it always has ([`RefusedFor::status`]).
    pub fn new(why: RefusedFor) -> Refusal {
        Refusal {
            status: why.status(),
            why,
        }
    }

    /// A robots.txt or policy block of `decision`: the origin's block status
    /// ([`refusal_status`]).
    pub fn blocked(decision: &Decision) -> Refusal {
        Refusal {
            status: refusal_status(decision),
            why: RefusedFor::Blocked,
        }
    }
}

/// Why a request is refused.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum RefusedFor {
    /// No configured origin serves the Host (421).
    UnknownHost,
    /// The path holds an escaped slash the origin refuses (400).
    EscapedSlash,
    /// The client address is banned from the origin (403, `Retry-After` at its end).
    Banned(Ban),
    /// Sooner than the crawler's `Crawl-delay` (429, `Retry-After`).
    Limited {
        /// The delay that applies.
        delay: Duration,
        /// How long until the request would be admitted.
        wait: Duration,
    },
    /// Over the operator's rate budget for the crawler (`policy.rates`: 429, `Retry-After`).
    RateLimited {
        /// The budget that refused it.
        rule: crate::config::RateRule,
        /// How long until the budget holds a request again.
        wait: Duration,
    },
    /// robots.txt or the policy disallows the request to the crawler (the origin's block
    /// status).
    Blocked,
    /// The request claims a crawler it is not (always 403).
    Impostor,
    /// Web Bot Auth `required`: the request claims a crawler that signs, without a valid
    /// signature (403 with `Accept-Signature`).
    SignatureRequired {
        /// The `Accept-Signature` value sent.
        accept_signature: String,
    },
    /// The signature's nonce was seen before, while the signature is still valid (429 with a
    /// fresh `Accept-Signature`).
    Replayed {
        /// The `Accept-Signature` value sent.
        accept_signature: String,
    },
    /// Web Bot Auth `required`: the request claims a crawler that signs and is signed by an
    /// agent whose keys are not loaded, so the signature cannot be checked now (503 with
    /// `Retry-After`). Neither let through (anyone could name such an agent) nor refused as
    /// unsigned (it is signed).
    KeysUnavailable,
    /// A trap path (`traps.action: block` or `ban`): 404, as a path that does not exist.
    Trap,
    /// A disguised crawler asked for a path robots.txt disallows (`disguised.action: block` or
    /// `ban`): 403.
    Disguised,
    /// The origin answers the crawler with its licence terms (402): `block.status: 402`, or a
    /// `license` policy action.
    PaymentRequired {
        /// The licence URL the answer's `Link: <url>; rel="license"` points at
        /// (`block.license_url`, else robots.txt's `License:` line), when there is one.
        license: Option<String>,
    },
    /// The origin's response carries the page's own preference refusing one of the crawler's
    /// purposes (`response_signals.action: enforce`): `response_signals.status`, 403 or 402
    /// (then with the licence link, as [`RefusedFor::PaymentRequired`]). None of the origin's
    /// body is sent.
    ResponseSignal {
        /// For a 402, the licence URL its `Link: <url>; rel="license"` points at, when there
        /// is one.
        license: Option<String>,
    },
}

impl RefusedFor {
    /// The status each refusal is answered with; a block's is the origin's `block.status`
    /// ([`Refusal::blocked`]), 403 unless it says otherwise.
    pub fn status(&self) -> u16 {
        match self {
            RefusedFor::UnknownHost => 421,
            RefusedFor::EscapedSlash => 400,
            RefusedFor::Banned(_)
            | RefusedFor::Blocked
            | RefusedFor::Impostor
            | RefusedFor::SignatureRequired { .. }
            | RefusedFor::Disguised
            | RefusedFor::ResponseSignal { .. } => 403,
            RefusedFor::Limited { .. }
            | RefusedFor::RateLimited { .. }
            | RefusedFor::Replayed { .. } => 429,
            RefusedFor::KeysUnavailable => 503,
            RefusedFor::Trap => 404,
            RefusedFor::PaymentRequired { .. } => 402,
        }
    }

    /// The `Accept-Signature` value the refusal carries, when it carries one.
    pub fn accept_signature(&self) -> Option<&str> {
        match self {
            RefusedFor::SignatureRequired { accept_signature }
            | RefusedFor::Replayed { accept_signature } => Some(accept_signature),
            _ => None,
        }
    }

    /// The `Retry-After` seconds the refusal carries, when it carries one.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            RefusedFor::Banned(ban) => Some(crate::tables::offenders::seconds_left(ban)),
            RefusedFor::Limited { wait, .. } | RefusedFor::RateLimited { wait, .. } => {
                Some(retry_after_seconds(*wait))
            }
            RefusedFor::KeysUnavailable => Some(KEYS_UNAVAILABLE_RETRY.as_secs()),
            _ => None,
        }
    }
}

/// Whether the bans of `cause` in force on `origin` are suspended, and what the request from a
/// banned address is then counted as: `ban_suspended` while bans are off (`mode: off`,
/// `offenders.action: off`), `would_ban` while they are reported (`mode: report`;
/// `offenders.action: report` for bans of repeated violations, and for a trap's or a disguised
/// crawler's once its own `action` is no longer `ban`). `None`: the ban applies.
pub fn ban_suspension(origin: &Origin, cause: BanCause) -> Option<Outcome> {
    let config = &origin.config;
    if config.mode == OriginMode::Off || config.offenders.action == OffendersAction::Off {
        return Some(Outcome::BanSuspended);
    }
    // A trap's or a disguised crawler's `ban` is the operator's word for those bans, whatever
    // `offenders.action` (`report` by default) says of bans for repeated violations.
    let traps_ban = config.traps.enabled && config.traps.action == TrapAction::Ban;
    let disguised_ban = config.disguised.action == DisguisedAction::Ban;
    let signal_bans = match cause {
        BanCause::Strikes => false,
        BanCause::Trap => traps_ban,
        BanCause::Disguised => disguised_ban,
        // Written before causes were: any lever that bans keeps it.
        _ => traps_ban || disguised_ban,
    };
    let bans = config.offenders.action == OffendersAction::Ban || signal_bans;
    if config.mode == OriginMode::Report || !bans {
        return Some(Outcome::WouldBan);
    }
    None
}

/// Whether `ban` is applied now (`applied`), or suspended by its origin's settings
/// (`would_ban`, `ban_suspended`: [`ban_suspension`]), as `/bans` and the console show it. A ban
/// of an origin the config no longer has is `applied`: it applies again if the origin returns.
pub fn ban_state(snapshot: &Snapshot, ban: &Ban) -> &'static str {
    snapshot
        .origin_named(&ban.origin)
        .and_then(|origin| ban_suspension(origin, ban.cause))
        .map_or("applied", Outcome::as_str)
}

/// The judgment of one request.
#[derive(Debug, Clone)]
pub struct Judgment {
    /// The decision, with every outcome the judgment reached; `None` for a request refused before
    /// any decision (unknown host, escaped slash).
    pub decision: Option<Decision>,
    /// What is done with the request.
    pub answer: Answer,
    /// For a request a robots.txt rule disallowed (enforced or reported): whether the client read
    /// the origin's robots.txt within the last 24 hours.
    pub read_robots: Option<bool>,
}

impl Judgment {
    /// A request proxied from a banned address whose ban is suspended (`suspended`: how it is
    /// counted) is counted as that, whatever it would have been without the ban: the ban
    /// comes first, as it would when enforced. A refusal keeps its own outcome.
    fn with_suspended_ban(mut self, suspended: Option<Outcome>) -> Judgment {
        if let (Some(outcome), Answer::Proxy, Some(decision)) =
            (suspended, &self.answer, self.decision.as_mut())
        {
            decision.outcome = outcome;
        }
        self
    }
}

/// The judge: the snapshot in force and the state and verifier it consults.
pub struct Judge<'a> {
    /// The origins, robots.txt copies and catalogue in force.
    pub snapshot: &'a Snapshot,
    /// Checks crawlers' claims.
    pub verifier: &'a Verifier,
    /// Crawl-delay budgets, robots.txt reads, strikes and bans.
    pub store: &'a Store,
}

impl Judge<'_> {
    /// Judges the request `facts` describe, phase by phase. In [`Mode::Apply`] it
    /// changes the state as the proxy must; in [`Mode::Preview`] it changes nothing (a
    /// verification may still be looked up and cached, which changes no answer): what each
    /// mode may change is [`Effects`].
    pub async fn judge(&self, facts: &Facts<'_>, mode: Mode) -> Judgment {
        phases::Judging {
            snapshot: self.snapshot,
            verifier: self.verifier,
            store: self.store,
            facts,
            effects: Effects::of(mode),
            imposed: Default::default(),
        }
        .run()
        .await
    }
}

/// What `crawl_delay` does for the decision's crawler: `crawl_delay.crawlers` for it, else
/// `report` for a crawler documented to ignore `Crawl-delay`, else `crawl_delay.action`.
pub fn crawl_delay_action(decision: &Decision) -> CrawlDelayAction {
    let settings = &decision.origin.config.crawl_delay;
    match &decision.crawler {
        Some(crawler) => settings.action_for(crawler.name(), crawler.ignores_crawl_delay()),
        None => settings.action,
    }
}

/// The status of a block that is not a licence answer: the origin's `block.status`, except that
/// a `402` there becomes `403` for the requests that get no licence answer (agents acting for a
/// person).
pub fn refusal_status(decision: &Decision) -> u16 {
    match decision.origin.config.block.status {
        402 => 403,
        status => status,
    }
}

/// Where a licence answer's `Link` points, or that it has none.
enum Licence {
    /// `block.license_url`, or robots.txt's `License:` line.
    Url(String),
    /// A licence answer without a licence URL.
    Unnamed,
}

impl Licence {
    fn into_link(self) -> Option<String> {
        match self {
            Licence::Url(url) => Some(url),
            Licence::Unnamed => None,
        }
    }
}

/// The licence URL of `origin` a 402 points at: `block.license_url`, else the first `License:`
/// line of the robots.txt copy `copy`.
pub(crate) fn licence_url(origin: &Origin, copy: &RobotsCopy) -> Option<String> {
    origin
        .config
        .block
        .license_url
        .clone()
        .or_else(|| match &copy.policy {
            crate::snapshot::Policy::Rules(rules) => {
                rules.licenses().first().map(|l| l.url.clone())
            }
            _ => None,
        })
}

/// Whether a blocked decision is answered with the origin's licence (402), and where the
/// licence is: a `license` policy action always; `block.status: 402` for every crawler but
/// those fetching for a person (`agent` purpose), who get 403 unless a policy says `license`
/// for them.
fn licence_answer(decision: &Decision) -> Option<Licence> {
    let by_policy = matches!(decision.why, Why::PolicyLicense(_));
    let by_status = decision.origin.config.block.status == 402
        && !decision
            .crawler
            .as_ref()
            .is_some_and(|c| c.purposes().contains(crate::crawlers::Purpose::Agent));
    if !by_policy && !by_status {
        return None;
    }
    let url = licence_url(&decision.origin, &decision.robots);
    Some(url.map_or(Licence::Unnamed, Licence::Url))
}

/// Whether the request is for the licence URL itself (same host, same path and query).
fn targets_licence(licence: &Licence, facts: &Facts<'_>) -> bool {
    let Licence::Url(url) = licence else {
        return false;
    };
    let lower = url
        .get(..8)
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    let rest = if lower.starts_with("https://") {
        &url[8..]
    } else if lower.starts_with("http://") {
        &url[7..]
    } else {
        return false;
    };
    let (authority, path) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    let path = path.split('#').next().unwrap_or_default();
    let path = if path.is_empty() { "/" } else { path };
    let same_host = match (
        crate::config::normalize_host(authority.as_bytes()),
        crate::config::normalize_host(facts.host),
    ) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    };
    same_host
        && crate::robots::canonicalize(path.as_bytes()) == crate::robots::canonicalize(facts.target)
}

/// What earned a ban a request makes at once: the crawler label (`disguised` for a disguised
/// crawler, `browser` for a client without a crawler's User-Agent, `none` for one without any)
/// and, for a client that `offenders.scope: crawlers` lets through (a browser's User-Agent, an
/// app the policy passes, a disguised crawler), its exact User-Agent, which the ban binds.
fn earner<'a>(decision: &'a Decision, facts: &Facts<'a>, cause: BanCause) -> Earner<'a> {
    let blank = is_blank_user_agent(facts.user_agent);
    let (crawler, bound) = if cause == BanCause::Disguised {
        ("disguised", !blank)
    } else {
        let crawler = match &decision.crawler {
            Some(crawler) => crawler.label(),
            None if blank => "none",
            None => "browser",
        };
        (crawler, !decision.is_bannable_crawler(facts.user_agent))
    };
    Earner {
        cause,
        crawler,
        user_agent: bound.then_some(facts.user_agent),
    }
}

/// The log line of a request refused, or that would be (rate-limited there).
fn log_disallowed(decision: &Decision, facts: &Facts<'_>) {
    crate::logs::disallowed_request(
        decision,
        || {
            facts
                .client
                .map_or_else(|| "unknown".to_string(), |c| c.to_string())
        },
        facts.method,
        &String::from_utf8_lossy(facts.target),
        facts.request_id,
    );
}

/// A browser request from a banned address, whatever the scope does with it: counted, and the
/// ban's first logged (rate-limited) — how an operator sees a ban hit the people behind a
/// shared address.
fn banned_browser_request(decision: &Decision, ban: &Ban, facts: &Facts<'_>) {
    let origin = decision.origin.name();
    METRICS
        .banned_browser_requests
        .with_label_values(&[origin])
        .inc();
    if ban.count_browser_request() {
        crate::logs::banned_browser_request(
            origin,
            ban,
            decision.origin.config.offenders.scope,
            facts.request_id,
        );
    }
}

/// A `GET` or `HEAD` of `/robots.txt` (in any spelling that reads as it; any query).
pub fn asks_for_robots_txt(method: &http::Method, target: &[u8]) -> bool {
    if *method != http::Method::GET && *method != http::Method::HEAD {
        return false;
    }
    // Every request asks this; almost none can be it.
    if !crate::enforce::may_read_as_robots_txt(target) {
        return false;
    }
    let path = &target[..memchr::memchr(b'?', target).unwrap_or(target.len())];
    crate::robots::canonical::canonicalize_decoding_slashes(path).as_ref() == b"/robots.txt"
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn asks(path: &[u8]) -> bool {
        asks_for_robots_txt(&http::Method::GET, path)
    }

    #[test]
    fn robots_txt_is_recognised_in_every_spelling_and_nothing_else_is() {
        let spellings: [&[u8]; 9] = [
            b"/robots.txt",
            b"/robots.txt?x=1",
            b"/%72obots.txt",
            b"/robots.tx%74",
            b"/robots%2etxt",
            b"/a/../robots.txt",
            b"/./robots.txt",
            b"/x%2F..%2Frobots.txt",
            b"//robots.txt",
        ];
        for path in spellings {
            assert!(asks(path), "{}", String::from_utf8_lossy(path));
        }
        let others: [&[u8]; 9] = [
            b"/robots.txt/",
            b"/robots.txt/.",
            b"/robots.txt/..",
            b"/robots.txt%2F",
            b"/robots.tx%74/",
            b"/robots.txT",
            b"/robots.txt.bak",
            b"/cart",
            b"/",
        ];
        for path in others {
            assert!(!asks(path), "{}", String::from_utf8_lossy(path));
        }
        // The short cut agrees with canonicalizing whatever the path ends with.
        for end in ["t", "%74", "/", "/.", "%2e", "%2E", "s", "%2F", "\\", ""] {
            for start in ["/robots.tx", "/robots.txt", "/x/../robots.tx", "/robots"] {
                let path = format!("{start}{end}");
                let canonical =
                    crate::robots::canonical::canonicalize_decoding_slashes(path.as_bytes());
                assert_eq!(
                    asks(path.as_bytes()),
                    canonical.as_ref() == b"/robots.txt",
                    "{path}"
                );
            }
        }
        assert!(!asks_for_robots_txt(&http::Method::POST, b"/robots.txt"));
    }

    /// A request that names no crawler skips reading its target only where nothing needs it:
    /// whether it reads robots.txt and whether it is refused for an escaped slash come out as
    /// they do from the whole reading, under every `paths` setting.
    #[test]
    fn a_browser_is_judged_as_the_whole_reading_would_judge_it() {
        let targets = [
            "/robots.txt",
            "/robots.txt?x=1",
            "/%72obots.txt",
            "/robots.tx%74",
            "/a/../robots.txt",
            "//robots.txt",
            "/\\robots.txt",
            "/x%2F..%2Frobots.txt",
            "/robots.txt/",
            "/robots.txt%2F",
            "/cart",
            "/private%2Fa",
            "/private%5ca",
            "/search?q=%2F",
            "/",
        ];
        for paths in [
            "{}",
            "{forward: original}",
            "{forward: original, escaped_slashes: reject}",
            "{forward: original, escaped_slashes: keep}",
            "{escaped_slashes: reject}",
        ] {
            let bench = bench_for(
                "",
                &format!("    robots: {{source: inline, text: \"User-agent: *\\nDisallow: /private\\n\"}}\n    paths: {paths}"),
            );
            let origin = bench.snapshot.origins[0].clone();
            for target in targets {
                let facts = Facts::get(b"shop.example", BROWSER, target.as_bytes());
                let judgment = bench.judge(&facts, Mode::Preview);
                let whole = crate::enforce::read_target(target.as_bytes(), origin.config.paths);
                match whole {
                    Err(_) => assert_eq!(judgment.answer.status(), Some(400), "{paths} {target}"),
                    Ok(readings) => {
                        let reads = readings.all().all(|path| path == b"/robots.txt");
                        let decision = judgment.decision.expect("a decision");
                        assert_eq!(decision.reads_robots_txt, reads, "{paths} {target}");
                        assert!(decision.crawler.is_none(), "{paths} {target}");
                    }
                }
            }
        }
    }

    /// A snapshot of `origin` (YAML of one origin's settings, indented as under `origins:`)
    /// for shop.example, with `ListedBot`, a crawler whose one range list holds 198.51.100.0/24
    /// (stubbed: the list's copy is stored directly, no fetch).
    pub(super) struct Bench {
        pub(super) snapshot: Snapshot,
        pub(super) verifier: Verifier,
        pub(super) store: Store,
        pub(super) runtime: tokio::runtime::Runtime,
    }

    pub(super) const LISTED: &str = "ListedBot/1.0";
    pub(super) const GPTBOT: &[u8] = b"GPTBot/1.2";
    pub(super) const BROWSER: &[u8] = b"Mozilla/5.0 (X11; Linux x86_64) Firefox/130.0";

    pub(super) fn bench_for(top: &str, origin: &str) -> Bench {
        let yaml = format!(
            "listen: [{{address: \"127.0.0.1:0\"}}]\n\
             admin: {{address: \"127.0.0.1:0\"}}\n\
             {top}\n\
             crawlers:\n  extra:\n    - name: ListedBot\n      category: ai-training\n      \
             verify: {{ips: [\"file:/listed.json\"]}}\n\
             origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:9\"\n{origin}\n"
        );
        let config = crate::config::load_str(&yaml, "test.yaml", std::path::Path::new("/"))
            .unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        let snapshot = Snapshot::build(Arc::new(config), None).expect("snapshot");
        let verifier = Verifier::new(&snapshot.config.verify);
        verifier.set_catalogue_agents(snapshot.identifier.catalogue());
        verifier.lists().set_entries(["file:/listed.json"]);
        for slot in verifier.lists().slots() {
            let prefixes: Vec<ipnet::IpNet> = vec!["198.51.100.0/24".parse().expect("a prefix")];
            slot.copy
                .store(Some(Arc::new(crate::verify::ranges::ListCopy {
                    set: crate::verify::ranges::RangeSet::new(prefixes),
                    by_service: Vec::new(),
                    prefixes: 1,
                    etag: None,
                    last_modified: None,
                    fetched_at: std::time::SystemTime::now(),
                })));
        }
        verifier.lists().changed();
        Bench {
            store: Store::new(&snapshot.config.state),
            snapshot,
            verifier,
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime"),
        }
    }

    impl Bench {
        pub(super) fn judge(&self, facts: &Facts<'_>, mode: Mode) -> Judgment {
            let judge = Judge {
                snapshot: &self.snapshot,
                verifier: &self.verifier,
                store: &self.store,
            };
            self.runtime.block_on(judge.judge(facts, mode))
        }

        /// `(action, status, outcome)` of a GET.
        fn get(
            &self,
            ua: &[u8],
            target: &str,
            client: &str,
            mode: Mode,
        ) -> (&'static str, Option<u16>, &'static str) {
            let client: IpAddr = client.parse().expect("an address");
            let facts = Facts::get(b"shop.example", ua, target.as_bytes()).from_client(client);
            let judgment = self.judge(&facts, mode);
            let outcome = judgment
                .decision
                .as_ref()
                .map_or("none", |d| d.outcome.as_str());
            (judgment.answer.action(), judgment.answer.status(), outcome)
        }

        pub(super) fn ban(&self, client: &str) {
            let client: IpAddr = client.parse().expect("an address");
            let client = ipnet::IpNet::from(client);
            let now = std::time::SystemTime::now();
            let ban = Ban::new(
                "shop",
                client,
                now,
                now + Duration::from_secs(600),
                3,
                Instant::now(),
            );
            assert!(self.store.offenders().impose(ban, Instant::now()).is_some());
        }

        pub(super) fn banned(&self, client: &str) -> bool {
            let client: IpAddr = client.parse().expect("an address");
            self.store
                .banned("shop", ipnet::IpNet::from(client))
                .is_some()
        }
    }

    pub(super) const ROBOTS: &str = "    robots: {source: inline, text: \"User-agent: *\\nDisallow: /private\\nCrawl-delay: 30\\n\", serve: false}";

    #[test]
    fn a_banned_address_gets_robots_txt_and_nothing_else_under_scope_address() {
        let bench = bench_for(
            "",
            &format!("{ROBOTS}\n    offenders: {{action: ban, scope: address}}"),
        );
        bench.ban("192.0.2.7");
        for ua in [GPTBOT, BROWSER, b"".as_slice()] {
            assert_eq!(
                bench.get(ua, "/page", "192.0.2.7", Mode::Apply),
                ("refuse", Some(403), "banned")
            );
            assert_eq!(
                bench.get(ua, "/robots.txt", "192.0.2.7", Mode::Apply).0,
                "proxy"
            );
            // Look-alikes are not robots.txt reads: WordPress's REST API, POST, other paths.
            for other in [
                "/robots.txt?rest_route=/wp/v2/users",
                "/robots.txt/",
                "/robots.txt.bak",
            ] {
                assert_eq!(
                    bench.get(ua, other, "192.0.2.7", Mode::Apply),
                    ("refuse", Some(403), "banned"),
                    "{other}"
                );
            }
        }
        let facts = Facts {
            method: &http::Method::POST,
            ..Facts::get(b"shop.example", GPTBOT, b"/robots.txt")
                .from_client("192.0.2.7".parse().expect("an address"))
        };
        assert_eq!(bench.judge(&facts, Mode::Apply).answer.status(), Some(403));
        // Another address is not refused.
        assert_eq!(
            bench.get(BROWSER, "/page", "192.0.2.8", Mode::Apply).0,
            "proxy"
        );
    }

    #[test]
    fn robotsguard_serves_robots_txt_in_every_spelling_even_to_a_banned_address() {
        let served = "    robots: {source: inline, text: \"User-agent: *\\nDisallow: /private\\n\", serve: true}\n    offenders: {action: ban}";
        let bench = bench_for("", served);
        bench.ban("192.0.2.7");
        for spelling in [
            "/robots.txt",
            "/%72obots.txt",
            "/a/../robots.txt",
            "/robots.txt?x=1",
        ] {
            for client in ["192.0.2.7", "192.0.2.8"] {
                let (action, status, _) = bench.get(GPTBOT, spelling, client, Mode::Apply);
                assert_eq!(
                    (action, status),
                    ("serve_robots", Some(200)),
                    "{spelling} {client}"
                );
            }
        }
        assert_eq!(
            bench
                .get(GPTBOT, "/robots.txt/", "192.0.2.7", Mode::Apply)
                .2,
            "banned"
        );
    }

    #[test]
    fn an_allowed_client_is_never_refused_for_a_ban() {
        let bench = bench_for(
            "",
            &format!("{ROBOTS}\n    policy: {{allow_clients: [\"192.0.2.0/24\"]}}"),
        );
        bench.ban("192.0.2.7");
        assert_eq!(
            bench.get(GPTBOT, "/private", "192.0.2.7", Mode::Apply),
            ("proxy", None, "pass")
        );
        assert_eq!(
            bench.get(BROWSER, "/page", "192.0.2.7", Mode::Apply),
            ("proxy", None, "pass")
        );
    }

    #[test]
    fn a_trusted_proxy_never_strikes_and_another_address_is_banned() {
        let bench = bench_for(
            "trusted_proxies: [\"192.0.2.1/32\"]",
            &format!("{ROBOTS}\n    offenders: {{action: ban, strikes: 2, window: 10m, ban: 1h}}"),
        );
        for _ in 0..5 {
            assert_eq!(
                bench.get(GPTBOT, "/private", "192.0.2.1", Mode::Apply),
                ("refuse", Some(403), "blocked")
            );
        }
        assert!(!bench.banned("192.0.2.1"));
        for _ in 0..2 {
            assert_eq!(
                bench.get(GPTBOT, "/private", "192.0.2.9", Mode::Apply),
                ("refuse", Some(403), "blocked")
            );
        }
        assert!(bench.banned("192.0.2.9"));
        assert_eq!(
            bench.get(GPTBOT, "/", "192.0.2.9", Mode::Apply),
            ("refuse", Some(403), "banned")
        );
    }

    const LIBRARY: &[u8] = b"python-requests/2.32.3";

    fn browser_requests(bench: &Bench, client: &str) -> u64 {
        let client: IpAddr = client.parse().expect("an address");
        bench
            .store
            .banned("shop", ipnet::IpNet::from(client))
            .map_or(0, |ban| ban.browser_requests())
    }

    #[test]
    fn under_scope_crawlers_a_banned_address_still_serves_browsers_and_apps() {
        let bench = bench_for("", &format!("{ROBOTS}\n    offenders: {{action: ban}}"));
        bench.ban("192.0.2.7");
        for (ua, answer) in [
            (BROWSER, ("proxy", None, "pass")),
            // An app's HTTP library passes by policy (category library).
            (LIBRARY, ("proxy", None, "pass")),
            (GPTBOT, ("refuse", Some(403), "banned")),
            // A generic bot name, and no User-Agent at all, are crawlers here.
            (b"SomeSpider/1.0", ("refuse", Some(403), "banned")),
            (b"", ("refuse", Some(403), "banned")),
            (b"  ", ("refuse", Some(403), "banned")),
        ] {
            for mode in [Mode::Preview, Mode::Apply] {
                assert_eq!(
                    bench.get(ua, "/page", "192.0.2.7", mode),
                    answer,
                    "{} {mode:?}",
                    String::from_utf8_lossy(ua)
                );
            }
        }
        // A category passed by the policy is an app, by name or category; one the policy turns
        // to robots.txt is a crawler.
        let blocked_libraries = bench_for(
            "",
            &format!(
                "{ROBOTS}\n    policy: {{categories: {{library: enforce}}}}\n    offenders: {{action: ban}}"
            ),
        );
        blocked_libraries.ban("192.0.2.7");
        assert_eq!(
            blocked_libraries.get(LIBRARY, "/page", "192.0.2.7", Mode::Apply),
            ("refuse", Some(403), "banned")
        );
        // Only browsers count as browser requests, and only applied ones.
        assert_eq!(browser_requests(&bench, "192.0.2.7"), 1);
    }

    #[test]
    fn browser_requests_from_a_banned_address_are_counted_under_either_scope() {
        for (scope, browser) in [
            ("crawlers", ("proxy", None, "pass")),
            ("address", ("refuse", Some(403), "banned")),
        ] {
            let bench = bench_for(
                "",
                &format!("{ROBOTS}\n    offenders: {{action: ban, scope: {scope}}}"),
            );
            bench.ban("192.0.2.7");
            let metric = || {
                METRICS
                    .banned_browser_requests
                    .with_label_values(&["shop"])
                    .get()
            };
            let before = metric();
            for _ in 0..3 {
                assert_eq!(bench.get(BROWSER, "/", "192.0.2.7", Mode::Apply), browser);
                assert_eq!(bench.get(BROWSER, "/", "192.0.2.7", Mode::Preview), browser);
            }
            bench.get(GPTBOT, "/", "192.0.2.7", Mode::Apply);
            bench.get(BROWSER, "/", "192.0.2.8", Mode::Apply);
            assert_eq!(browser_requests(&bench, "192.0.2.7"), 3, "{scope}");
            // The metric is process-wide and other tests add to it: at least these three.
            assert!(metric() >= before + 3, "{scope}");
        }
    }

    #[test]
    fn a_preview_never_strikes_records_a_read_or_spends_a_budget() {
        let bench = bench_for(
            "",
            &format!("{ROBOTS}\n    offenders: {{action: ban, strikes: 1, window: 10m, ban: 1h}}"),
        );
        for _ in 0..3 {
            assert_eq!(
                bench.get(GPTBOT, "/private", "192.0.2.9", Mode::Preview),
                ("refuse", Some(403), "blocked")
            );
            assert_eq!(
                bench.get(GPTBOT, "/page", "192.0.2.9", Mode::Preview),
                ("proxy", None, "allowed")
            );
            assert_eq!(
                bench.get(GPTBOT, "/robots.txt", "192.0.2.9", Mode::Preview),
                ("proxy", None, "pass")
            );
        }
        assert!(!bench.banned("192.0.2.9"));
        let facts = Facts::get(b"shop.example", GPTBOT, b"/private")
            .from_client("192.0.2.9".parse().expect("an address"));
        assert_eq!(
            bench.judge(&facts, Mode::Preview).read_robots,
            Some(false),
            "no read recorded"
        );
        // The budget is whole: the first applied request is admitted, the next one is not, and
        // a preview now says what the proxy says.
        assert_eq!(
            bench.get(GPTBOT, "/page", "192.0.2.9", Mode::Apply),
            ("proxy", None, "allowed")
        );
        assert_eq!(
            bench.get(GPTBOT, "/page", "192.0.2.9", Mode::Preview),
            ("refuse", Some(429), "limited")
        );
        assert_eq!(
            bench.get(GPTBOT, "/page", "192.0.2.9", Mode::Apply),
            ("refuse", Some(429), "limited")
        );
        // Applied: a read is recorded, and a strike bans.
        assert_eq!(
            bench.get(GPTBOT, "/robots.txt", "192.0.2.9", Mode::Apply).0,
            "proxy"
        );
        assert_eq!(bench.judge(&facts, Mode::Apply).read_robots, Some(true));
        assert!(bench.banned("192.0.2.9"));
    }

    #[test]
    fn report_mode_and_crawl_delay_report_only_count() {
        for (mode, action, second) in [
            ("report", "enforce", ("proxy", None, "would_limit")),
            ("enforce", "report", ("proxy", None, "would_limit")),
            ("enforce", "enforce", ("refuse", Some(429), "limited")),
            ("enforce", "ignore", ("proxy", None, "allowed")),
        ] {
            let bench = bench_for(
                "",
                &format!("{ROBOTS}\n    mode: {mode}\n    crawl_delay: {{action: {action}}}"),
            );
            assert_eq!(
                bench.get(GPTBOT, "/page", "192.0.2.9", Mode::Apply),
                ("proxy", None, "allowed"),
                "{mode} {action}"
            );
            assert_eq!(
                bench.get(GPTBOT, "/page", "192.0.2.9", Mode::Apply),
                second,
                "{mode} {action}"
            );
            let blocked = if mode == "report" {
                ("proxy", None, "would_block")
            } else {
                ("refuse", Some(403), "blocked")
            };
            assert_eq!(
                bench.get(GPTBOT, "/private", "192.0.2.9", Mode::Apply),
                blocked,
                "{mode} {action}"
            );
        }
    }

    #[test]
    fn an_impostor_is_refused_or_reported_and_a_reported_one_is_held_to_the_crawl_delay() {
        let listed = LISTED.as_bytes();
        let blocking = bench_for("", &format!("{ROBOTS}\n    impostors: block"));
        let bench = &blocking;
        assert_eq!(
            bench.get(listed, "/page", "198.51.100.4", Mode::Apply),
            ("proxy", None, "allowed")
        );
        assert_eq!(
            bench.get(listed, "/page", "8.8.8.8", Mode::Preview),
            ("refuse", Some(403), "blocked")
        );
        assert_eq!(
            bench.get(listed, "/page", "8.8.8.8", Mode::Apply),
            ("refuse", Some(403), "blocked")
        );
        // Not verifiable here (a private address): unverified, never an impostor.
        assert_eq!(
            bench.get(listed, "/page", "10.1.2.3", Mode::Apply),
            ("proxy", None, "allowed")
        );

        let reported = bench_for("", &format!("{ROBOTS}\n    impostors: report"));
        let bench = reported;
        assert_eq!(
            bench.get(listed, "/page", "8.8.8.8", Mode::Apply),
            ("proxy", None, "would_block")
        );
        assert_eq!(
            bench.get(listed, "/page", "8.8.8.8", Mode::Preview),
            ("refuse", Some(429), "limited")
        );
        assert_eq!(
            bench.get(listed, "/page", "8.8.8.8", Mode::Apply),
            ("refuse", Some(429), "limited")
        );
        // Its budget is its address's: the real crawler is admitted.
        assert_eq!(
            bench.get(listed, "/page", "198.51.100.4", Mode::Apply),
            ("proxy", None, "allowed")
        );
    }

    #[test]
    fn exempt_paths_and_unknown_hosts() {
        let bench = bench_for(
            "",
            &format!("{ROBOTS}\n    policy: {{exempt_paths: [/private/ads.txt]}}"),
        );
        assert_eq!(
            bench.get(GPTBOT, "/private/ads.txt", "192.0.2.9", Mode::Apply),
            ("proxy", None, "pass")
        );
        assert_eq!(
            bench.get(GPTBOT, "/private/x", "192.0.2.9", Mode::Apply),
            ("refuse", Some(403), "blocked")
        );
        let facts = Facts::get(b"other.example", GPTBOT, b"/");
        let judgment = bench.judge(&facts, Mode::Preview);
        assert!(judgment.decision.is_none());
        assert_eq!(judgment.answer.status(), Some(421));
    }

    /// `/private` is disallowed to every group, `/star-only` to `*` only.
    pub(super) const EVERY_GROUP: &str = "    robots: {source: inline, text: \"User-agent: GPTBot\\nDisallow: /private\\n\\nUser-agent: *\\nDisallow: /private\\nDisallow: /star-only\\n\"}";

    #[test]
    fn a_preview_of_a_disguised_crawler_counts_nothing_and_agrees_with_the_proxy() {
        let bench = bench_for(
            "",
            &format!("{EVERY_GROUP}\n    disguised: {{action: block, strikes: 2}}"),
        );
        let reader = "192.0.2.20";
        // Before a read: nothing counts, applied or previewed.
        for mode in [Mode::Preview, Mode::Apply] {
            assert_eq!(
                bench.get(BROWSER, "/private", reader, mode),
                ("proxy", None, "pass")
            );
        }
        bench.get(BROWSER, "/robots.txt", reader, Mode::Apply);
        // Previews never strike.
        for _ in 0..5 {
            assert_eq!(
                bench.get(BROWSER, "/private", reader, Mode::Preview),
                ("proxy", None, "pass")
            );
        }
        // Only paths disallowed to every group count.
        for _ in 0..3 {
            assert_eq!(
                bench.get(BROWSER, "/star-only", reader, Mode::Apply),
                ("proxy", None, "pass")
            );
        }
        assert_eq!(
            bench.get(BROWSER, "/private", reader, Mode::Apply),
            ("proxy", None, "pass")
        );
        assert_eq!(
            bench.get(BROWSER, "/private", reader, Mode::Preview),
            ("proxy", None, "pass")
        );
        assert_eq!(
            bench.get(BROWSER, "/private", reader, Mode::Apply),
            ("refuse", Some(403), "disguised")
        );
        // Now a crawler bound by `*`: previews say what the proxy says.
        for mode in [Mode::Preview, Mode::Apply] {
            assert_eq!(
                bench.get(BROWSER, "/star-only", reader, mode),
                ("refuse", Some(403), "disguised")
            );
            assert_eq!(
                bench.get(BROWSER, "/page", reader, mode),
                ("proxy", None, "pass")
            );
        }
    }

    /// `(action, status, outcome)` of a GET with `fetch`'s headers.
    fn get_fetching(
        bench: &Bench,
        ua: &[u8],
        target: &str,
        client: &str,
        fetch: Fetch<'_>,
    ) -> (&'static str, Option<u16>, &'static str) {
        let client: IpAddr = client.parse().expect("an address");
        let facts = Facts {
            fetch,
            ..Facts::get(b"shop.example", ua, target.as_bytes()).from_client(client)
        };
        let judgment = bench.judge(&facts, Mode::Apply);
        let outcome = judgment
            .decision
            .as_ref()
            .map_or("none", |d| d.outcome.as_str());
        (judgment.answer.action(), judgment.answer.status(), outcome)
    }

    const CHROME_IMAGE: &[u8] = b"image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8";
    const CHROME_PAGE: &[u8] =
        b"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8";

    #[test]
    fn fetch_metadata_accept_and_referer_tell_a_load_another_sites_page_caused() {
        let bench = bench_for("", "");
        let origin = bench.snapshot.origins[0].clone();
        let says = |fetch: Fetch<'_>| fetch.third_party(&bench.snapshot, &origin);
        let none = Fetch::default();
        assert_eq!(says(none), None, "a client that sends none of them");
        for (fetch, expected) in [
            // Top-level navigations: typed, from the site's own pages.
            (
                Fetch {
                    dest: Some(b"document"),
                    site: Some(b"none"),
                    accept: Some(CHROME_PAGE),
                    ..none
                },
                None,
            ),
            (
                Fetch {
                    dest: Some(b"Document"),
                    site: Some(b"same-origin"),
                    referer: Some(b"https://shop.example/a"),
                    ..none
                },
                None,
            ),
            (
                Fetch {
                    site: Some(b"same-site"),
                    referer: Some(b"https://SHOP.example:8443/x"),
                    ..none
                },
                None,
            ),
            // curl, HTTP libraries: `*/*` alone, or no Accept.
            (
                Fetch {
                    accept: Some(b"*/*"),
                    ..none
                },
                None,
            ),
            (
                Fetch {
                    accept: Some(b"text/html;q=0.9, */*"),
                    ..none
                },
                None,
            ),
            (
                Fetch {
                    accept: Some(b""),
                    ..none
                },
                None,
            ),
            // What another site's page makes a browser send.
            (
                Fetch {
                    dest: Some(b"image"),
                    site: Some(b"cross-site"),
                    accept: Some(CHROME_IMAGE),
                    ..none
                },
                Some(ThirdParty::SubResource),
            ),
            (
                Fetch {
                    dest: Some(b"iframe"),
                    ..none
                },
                Some(ThirdParty::SubResource),
            ),
            (
                Fetch {
                    dest: Some(b"empty"),
                    accept: Some(b"*/*"),
                    ..none
                },
                Some(ThirdParty::SubResource),
            ),
            (
                Fetch {
                    dest: Some(b"document"),
                    site: Some(b"cross-site"),
                    ..none
                },
                Some(ThirdParty::CrossSite),
            ),
            (
                Fetch {
                    site: Some(b"same-site"),
                    ..none
                },
                Some(ThirdParty::CrossSite),
            ),
            (
                Fetch {
                    referer: Some(b"https://evil.example/page"),
                    ..none
                },
                Some(ThirdParty::Referer),
            ),
            (
                Fetch {
                    referer: Some(b"https://user@evil.example:8443/"),
                    ..none
                },
                Some(ThirdParty::Referer),
            ),
            (
                Fetch {
                    referer: Some(b"http://shop.example.evil.example/"),
                    ..none
                },
                Some(ThirdParty::Referer),
            ),
            // Browsers without Fetch Metadata: an image's Accept, a style sheet's.
            (
                Fetch {
                    accept: Some(CHROME_IMAGE),
                    ..none
                },
                Some(ThirdParty::NotHtml),
            ),
            (
                Fetch {
                    accept: Some(b"text/css,*/*;q=0.1"),
                    ..none
                },
                Some(ThirdParty::NotHtml),
            ),
            (
                Fetch {
                    accept: Some(b"text/html;q=0, image/png"),
                    ..none
                },
                Some(ThirdParty::NotHtml),
            ),
        ] {
            assert_eq!(says(fetch), expected, "{fetch:?}");
        }
        // A Referer that is no URL names no site.
        assert_eq!(
            says(Fetch {
                referer: Some(b"-"),
                ..none
            }),
            None
        );
    }

    #[test]
    fn a_trap_hit_another_sites_page_caused_never_bans_and_a_browsers_ban_binds_its_user_agent() {
        let bench = bench_for(
            "",
            &format!("{EVERY_GROUP}\n    traps: {{enabled: true, paths: [/trap/], action: ban}}"),
        );
        let victim = "192.0.2.40";
        let third_party = [
            Fetch {
                dest: Some(b"image"),
                site: Some(b"cross-site"),
                accept: Some(CHROME_IMAGE),
                ..Fetch::default()
            },
            Fetch {
                accept: Some(CHROME_IMAGE),
                ..Fetch::default()
            },
            Fetch {
                referer: Some(b"https://evil.example/"),
                ..Fetch::default()
            },
            Fetch {
                dest: Some(b"document"),
                site: Some(b"cross-site"),
                ..Fetch::default()
            },
        ];
        for fetch in third_party {
            // Refused as a path that does not exist, and that is all.
            for _ in 0..3 {
                assert_eq!(
                    get_fetching(&bench, BROWSER, "/trap/x", victim, fetch),
                    ("refuse", Some(404), "trap"),
                    "{fetch:?}"
                );
            }
        }
        assert!(!bench.banned(victim));
        assert_eq!(bench.get(GPTBOT, "/page", victim, Mode::Apply).2, "allowed");
        // A browser's User-Agent that takes the trap itself (no such headers, as a scraper
        // sends) is banned together with that User-Agent: it, and crawlers, are refused;
        // other browsers behind the address pass.
        let scraper = "192.0.2.41";
        assert_eq!(
            bench.get(BROWSER, "/trap/x", scraper, Mode::Apply),
            ("refuse", Some(404), "trap")
        );
        let client: IpAddr = scraper.parse().expect("an address");
        let ban = bench
            .store
            .banned("shop", ipnet::IpNet::from(client))
            .expect("banned");
        assert_eq!((ban.cause, &*ban.crawler), (BanCause::Trap, "browser"));
        assert_eq!(
            ban.agent.as_ref().map(|a| a.shown()),
            Some(std::str::from_utf8(BROWSER).expect("text"))
        );
        for mode in [Mode::Preview, Mode::Apply] {
            assert_eq!(
                bench.get(BROWSER, "/page", scraper, mode),
                ("refuse", Some(403), "banned")
            );
            assert_eq!(
                bench.get(GPTBOT, "/page", scraper, mode),
                ("refuse", Some(403), "banned")
            );
            assert_eq!(
                bench.get(
                    b"Mozilla/5.0 (Macintosh) Safari/605.1.15",
                    "/page",
                    scraper,
                    mode
                ),
                ("proxy", None, "pass")
            );
        }
        // Under scope `address` every request from the address is refused.
        let address = bench_for(
            "",
            &format!("{EVERY_GROUP}\n    traps: {{enabled: true, paths: [/trap/], action: ban}}\n    offenders: {{scope: address}}"),
        );
        address.get(BROWSER, "/trap/x", scraper, Mode::Apply);
        assert_eq!(
            address.get(
                b"Mozilla/5.0 (Macintosh) Safari/605.1.15",
                "/page",
                scraper,
                Mode::Apply
            ),
            ("refuse", Some(403), "banned")
        );
        // A crawler that takes the trap bans the address for crawlers, binding no User-Agent.
        bench.get(GPTBOT, "/trap/x", "192.0.2.42", Mode::Apply);
        let ban = bench
            .store
            .banned(
                "shop",
                ipnet::IpNet::from("192.0.2.42".parse::<IpAddr>().expect("an address")),
            )
            .expect("banned");
        assert_eq!((&*ban.crawler, ban.agent.is_none()), ("GPTBot", true));
        assert_eq!(
            bench.get(BROWSER, "/page", "192.0.2.42", Mode::Apply),
            ("proxy", None, "pass")
        );
        // A page cannot make a browser send a crawler's User-Agent: a crawler is banned
        // whatever headers it adds.
        let image = Fetch {
            dest: Some(b"image"),
            accept: Some(CHROME_IMAGE),
            ..Fetch::default()
        };
        assert_eq!(
            get_fetching(&bench, GPTBOT, "/trap/x", "192.0.2.43", image),
            ("refuse", Some(404), "trap")
        );
        assert!(bench.banned("192.0.2.43"));
    }

    #[test]
    fn reads_and_strikes_another_sites_page_caused_never_make_a_disguised_crawler() {
        let bench = bench_for(
            "",
            &format!("{EVERY_GROUP}\n    disguised: {{action: ban, strikes: 2}}"),
        );
        let image = Fetch {
            dest: Some(b"image"),
            site: Some(b"cross-site"),
            accept: Some(CHROME_IMAGE),
            ..Fetch::default()
        };
        let victim = "192.0.2.50";
        // robots.txt loaded as an image: not a read; the visitor's own visits then never count.
        get_fetching(&bench, BROWSER, "/robots.txt", victim, image);
        for _ in 0..4 {
            assert_eq!(
                bench.get(BROWSER, "/private", victim, Mode::Apply),
                ("proxy", None, "pass")
            );
        }
        // A real read, then loads another site's page caused: never strikes.
        bench.get(BROWSER, "/robots.txt", victim, Mode::Apply);
        for _ in 0..4 {
            assert_eq!(
                get_fetching(&bench, BROWSER, "/private", victim, image),
                ("proxy", None, "pass")
            );
        }
        assert!(!bench.banned(victim));
        // The same requests without those headers do; the ban binds the User-Agent.
        assert_eq!(
            bench.get(BROWSER, "/private", victim, Mode::Apply),
            ("proxy", None, "pass")
        );
        assert_eq!(
            bench.get(BROWSER, "/private", victim, Mode::Apply),
            ("refuse", Some(403), "disguised")
        );
        let ban = bench
            .store
            .banned(
                "shop",
                ipnet::IpNet::from(victim.parse::<IpAddr>().expect("an address")),
            )
            .expect("banned");
        assert_eq!(
            (ban.cause, &*ban.crawler),
            (BanCause::Disguised, "disguised")
        );
        assert!(ban.agent.is_some());
        assert_eq!(
            bench.get(BROWSER, "/page", victim, Mode::Apply),
            ("refuse", Some(403), "banned")
        );
        assert_eq!(
            bench.get(
                b"Mozilla/5.0 (Macintosh) Safari/605.1.15",
                "/page",
                victim,
                Mode::Apply
            ),
            ("proxy", None, "pass")
        );
    }

    #[test]
    fn report_and_off_suspend_bans_in_force_until_enforcing_again() {
        for (settings, page, private) in [
            (
                "mode: report\n    offenders: {action: ban}",
                "would_ban",
                ("proxy", None, "would_ban"),
            ),
            (
                "mode: off\n    offenders: {action: ban}",
                "ban_suspended",
                ("proxy", None, "ban_suspended"),
            ),
            (
                "offenders: {action: report}",
                "would_ban",
                ("refuse", Some(403), "blocked"),
            ),
            (
                "offenders: {action: off}",
                "ban_suspended",
                ("refuse", Some(403), "blocked"),
            ),
            (
                "offenders: {action: ban}",
                "banned",
                ("refuse", Some(403), "banned"),
            ),
        ] {
            let bench = bench_for("", &format!("{ROBOTS}\n    {settings}"));
            bench.ban("192.0.2.60");
            let expected = if page == "banned" {
                ("refuse", Some(403), "banned")
            } else {
                ("proxy", None, page)
            };
            for mode in [Mode::Preview, Mode::Apply] {
                assert_eq!(
                    bench.get(GPTBOT, "/page", "192.0.2.60", mode),
                    expected,
                    "{settings}"
                );
            }
            // A refusal of its own (robots.txt) keeps its outcome.
            assert_eq!(
                bench.get(GPTBOT, "/private", "192.0.2.60", Mode::Apply),
                private,
                "{settings}"
            );
            // Other addresses are judged as ever.
            assert_ne!(
                bench.get(GPTBOT, "/page", "192.0.2.61", Mode::Apply).2,
                page,
                "{settings}"
            );
        }
        // A trap's ban follows `traps.action: ban` whatever `offenders.action` (report by
        // default) says of bans for repeated violations; `offenders.action: off` or
        // `mode: report` suspends it too.
        for (offenders, expected) in [
            ("", ("refuse", Some(403), "banned")),
            (
                "\n    offenders: {action: off}",
                ("proxy", None, "ban_suspended"),
            ),
            ("\n    mode: report", ("proxy", None, "would_ban")),
        ] {
            let traps = bench_for(
                "",
                &format!(
                    "{EVERY_GROUP}\n    traps: {{enabled: true, paths: [/trap/], action: ban}}"
                ),
            );
            traps.get(GPTBOT, "/trap/x", "192.0.2.62", Mode::Apply);
            assert!(traps.banned("192.0.2.62"));
            let ban = traps
                .store
                .banned(
                    "shop",
                    ipnet::IpNet::from("192.0.2.62".parse::<IpAddr>().expect("an address")),
                )
                .expect("banned");
            let settings = bench_for(
                "",
                &format!("{EVERY_GROUP}\n    traps: {{enabled: true, paths: [/trap/], action: ban}}{offenders}"),
            );
            assert_eq!(
                ban_suspension(&settings.snapshot.origins[0], ban.cause).map(Outcome::as_str),
                (expected.2 != "banned").then_some(expected.2),
                "{offenders}"
            );
        }
        // While bans are off, a trap hit bans nobody.
        let off = bench_for(
            "",
            &format!("{EVERY_GROUP}\n    traps: {{enabled: true, paths: [/trap/], action: ban}}\n    offenders: {{action: off}}"),
        );
        assert_eq!(
            off.get(BROWSER, "/trap/x", "192.0.2.63", Mode::Apply),
            ("refuse", Some(404), "trap")
        );
        assert!(!off.banned("192.0.2.63"));
    }

    #[test]
    fn a_trap_hit_is_judged_alike_in_preview_and_bans_only_when_applied() {
        let bench = bench_for(
            "trusted_proxies: [\"192.0.2.1/32\"]",
            &format!("{EVERY_GROUP}\n    traps: {{enabled: true, paths: [/trap/], action: ban}}"),
        );
        assert_eq!(
            bench.get(BROWSER, "/trap/x", "192.0.2.30", Mode::Preview),
            ("refuse", Some(404), "trap")
        );
        assert!(!bench.banned("192.0.2.30"));
        assert_eq!(
            bench.get(BROWSER, "/trap/x", "192.0.2.30", Mode::Apply),
            ("refuse", Some(404), "trap")
        );
        assert!(bench.banned("192.0.2.30"));
        assert_eq!(
            bench.get(GPTBOT, "/page", "192.0.2.30", Mode::Apply),
            ("refuse", Some(403), "banned")
        );
        // A trusted proxy's own address never hits.
        assert_eq!(
            bench.get(BROWSER, "/trap/x", "192.0.2.1", Mode::Apply),
            ("proxy", None, "pass")
        );
        assert!(!bench.banned("192.0.2.1"));
        // robots.txt is served by robotsguard, with the trap in every group.
        let facts = Facts::get(b"shop.example", BROWSER, b"/robots.txt");
        let Answer::ServeRobots(copy) = bench.judge(&facts, Mode::Preview).answer else {
            panic!("robots.txt is served");
        };
        let served = String::from_utf8_lossy(&copy.served().body).into_owned();
        assert_eq!(served.matches("Disallow: /trap/\n").count(), 2, "{served}");
    }

    #[test]
    fn under_required_a_catalogue_signers_claim_needs_its_signature_and_unchecked_keys_mean_later()
    {
        let robots =
            "    robots: {source: inline, text: \"User-agent: *\\nDisallow: /private\\n\"}";
        let required = bench_for("verify: {web_bot_auth: {mode: required}}", robots);
        let optional = bench_for("", robots);
        // Google-Agent signs as https://agent.bot.goog by its built-in entry.
        let claim: &[u8] = b"Mozilla/5.0 (compatible; Google-Agent)";
        let unsigned = Facts::get(b"shop.example", claim, b"/page");
        let answer = required.judge(&unsigned, Mode::Preview).answer;
        assert_eq!(answer.status(), Some(403));
        let Answer::Refuse(refusal) = &answer else {
            panic!("{answer:?}")
        };
        assert!(refusal.why.accept_signature().is_some(), "{refusal:?}");
        // Signed, by an agent whose keys are not loaded: neither passed nor told to sign.
        let unchecked = Facts {
            keys_unavailable: true,
            ..unsigned
        };
        let answer = required.judge(&unchecked, Mode::Preview).answer;
        assert_eq!(answer.status(), Some(503));
        let Answer::Refuse(refusal) = &answer else {
            panic!("{answer:?}")
        };
        assert_eq!(
            refusal.why.retry_after(),
            Some(KEYS_UNAVAILABLE_RETRY.as_secs())
        );
        assert!(refusal.why.accept_signature().is_none());
        // A valid signature of its agent lets the claim through.
        let signed = Signed::new("https://agent.bot.goog", "Google-Agent");
        let verified = Facts {
            signed: Some(&signed),
            ..unsigned
        };
        assert_eq!(
            required.judge(&verified, Mode::Preview).answer.action(),
            "proxy"
        );
        // A browser, or a crawler that does not sign, is asked for nothing.
        for ua in [BROWSER, GPTBOT] {
            let facts = Facts {
                keys_unavailable: true,
                ..Facts::get(b"shop.example", ua, b"/page")
            };
            assert_eq!(
                required.judge(&facts, Mode::Preview).answer.action(),
                "proxy"
            );
        }
        // `optional` asks nothing of either.
        for facts in [&unsigned, &unchecked] {
            assert_eq!(
                optional.judge(facts, Mode::Preview).answer.action(),
                "proxy"
            );
        }
    }
}
