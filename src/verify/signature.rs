//! Web Bot Auth: HTTP Message Signatures (RFC 9421) of bots, as the IETF webbotauth draft
//! profiles them. A request signed by a configured agent, over `@authority` (or `@target-uri`)
//! and its `Signature-Agent` header, with `tag="web-bot-auth"`, a `created`..`expires` window
//! around now, and a `keyid` that is the JWK thumbprint of one of that agent's keys, is that
//! agent's crawler.
//!
//! Parsing the signature headers is Cloudflare's `web-bot-auth` crate; the signature base is
//! rebuilt and checked here (`signature_keys`: Ed25519, RSA-PSS-SHA512, ECDSA P-256),
//! since the crate verifies Ed25519 only. It accepts a valid signature under any key it is
//! given, so binding keys to the agent that published them — a keyring per agent, picked by the
//! request's `Signature-Agent` — is done here, as are the time window and the key directories.
//!
//! Why the crate: it is Cloudflare's implementation of the draft it co-authors (Apache-2.0, as
//! this project; maintained with the draft's revisions), builds with our Rust and dependency tree
//! (it shares `sfv`, `ed25519-dalek`, `base64` and `sha2` with it), and already refuses what the
//! draft forbids: no `keyid`, `tag="web-bot-auth"`, `created` or `expires`, neither `@authority`
//! nor `@target-uri` covered, a `Signature-Agent` present but not covered. Its limits, handled
//! here: it takes any key it is handed (so each agent has its own keyring), it does not check
//! time (done here against the caller's clock), and its `JSONWebKeySet` refuses a whole set for
//! one member of an unknown key type (sets are read member by member here). A `Signature-Agent`
//! dictionary covered as a whole field (without `;key=`) is refused by it; signers cover the
//! member (`"signature-agent";key="sig1"`) or send the older bare string.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arc_swap::{ArcSwap, ArcSwapOption};
use async_trait::async_trait;
use pingora::connectors::http::Connector;
use pingora::http::RequestHeader;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use sfv::SerializeValue;
use web_bot_auth::components::{
    CoveredComponent, DerivedComponent, HTTPField, HTTPFieldParameters,
};
use web_bot_auth::message_signatures::SignedMessage;
use web_bot_auth::{SignatureAgentLink, WebBotAuthVerifier};

use super::refresh::{Failing, FailureLine};
use super::registry::{self, CardKeys};
use super::signature_keys::{signature_base, KeySet};
use crate::config::{RegistrySource, WebBotAuthConfig, WebBotAuthMode};
use crate::crawlers::Catalogue;
use crate::fetch::{FileWatcher, Validators};
use crate::metrics::METRICS;
use crate::net::url::get_url_to;
use crate::snapshot::Live;

/// The path of an agent's key directory (defined with the keys it serves).
pub use super::signature_keys::DIRECTORY_PATH;

/// The longest signature lifetime accepted (the draft recommends 24 hours or less).
pub const MAX_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// The most bytes of signature headers examined; larger ones are refused unread.
const MAX_SIGNATURE_BYTES: usize = 8 * 1024;

/// The largest key directory read.
const MAX_DIRECTORY_BYTES: usize = 256 * 1024;

/// Bounds on how long a directory is kept before it is fetched again (its `max-age`, clamped).
const MIN_KEYS_TTL: Duration = Duration::from_secs(5 * 60);
const MAX_KEYS_TTL: Duration = Duration::from_secs(24 * 3600);

/// The first retry after a failed fetch; it doubles up to an hour.
const FIRST_RETRY: Duration = Duration::from_secs(10);
const MAX_RETRY: Duration = Duration::from_secs(3600);

/// How long a fetch of a key directory may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The `Accept-Signature` value (RFC 9421 §5.1) robotsguard answers with when it wants a
/// signature: the components the draft profile covers (`@authority` and the `Signature-Agent`
/// member `sig1`, which the signer's `Signature-Agent` must then use), `created` and `expires`,
/// `tag="web-bot-auth"`, and a fresh random `nonce` to sign with.
pub fn accept_signature() -> String {
    use base64::Engine;
    let mut bytes = [0u8; 32];
    // Without the system's randomness (never seen), the time stands in: the nonce is a hint
    // for the signer, not a secret robotsguard relies on.
    if getrandom::fill(&mut bytes).is_err() {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes[..16].copy_from_slice(&now.to_le_bytes());
    }
    let nonce = base64::engine::general_purpose::STANDARD.encode(bytes);
    format!(
        "sig1=(\"@authority\" \"signature-agent\";key=\"sig1\");created;expires;nonce=\"{nonce}\";tag=\"web-bot-auth\""
    )
}

/// What a request's signature says.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignatureOutcome {
    /// No `Signature-Input` header: the request is not signed.
    Absent,
    /// A valid signature of a configured agent.
    Verified {
        /// The agent (`https://chatgpt.com`).
        agent: String,
        /// The crawler it identifies.
        crawler: String,
    },
    /// A signature that does not hold: expired, not yet valid, a lifetime over 24 hours, a key
    /// the agent did not publish, a tampered component, a missing tag or component, no
    /// `Signature-Agent` or one the signature does not cover, malformed or oversized headers.
    Invalid(String),
    /// Signed by an agent that is not configured.
    UnknownAgent(String),
    /// The agent's keys are not loaded (yet): nothing can be said.
    Unavailable(String),
}

impl SignatureOutcome {
    /// The `outcome` label of `robotsguard_web_bot_auth_signatures_total`.
    pub fn as_str(&self) -> &'static str {
        match self {
            SignatureOutcome::Absent => "absent",
            SignatureOutcome::Verified { .. } => "verified",
            SignatureOutcome::Invalid(_) => "invalid",
            SignatureOutcome::UnknownAgent(_) => "unknown_agent",
            SignatureOutcome::Unavailable(_) => "unavailable",
        }
    }
}

/// Where an agent's keys come from.
#[derive(Debug, Clone)]
enum KeysSource {
    /// A key directory: `<agent>/.well-known/http-message-signatures-directory`, or a card's
    /// `jwks_uri`. `public_only` for one a registry or the catalogue named (never fetched from
    /// a loopback, private, link-local or unique-local address) unless the operator listed its
    /// origin in `private_agents`; an operator's `agents` entry is fetched as configured.
    Directory { url: String, public_only: bool },
    /// A JWKS file.
    File(PathBuf),
    /// A card's inline `jwks` (in force from the start).
    Inline,
}

/// What a signature check found, beyond its outcome: the signature's `nonce` and how long it
/// stays valid, for the replay check of a verified signature; for one without a nonce, when it
/// was made and a digest of it, for the nonce-less rule (see [`NoncelessRule`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// The outcome.
    pub outcome: SignatureOutcome,
    /// The `nonce` of a verified signature, if it has one.
    pub nonce: Option<String>,
    /// How long the signature stays valid from now (its `expires`, plus the clock skew
    /// tolerated): how long its nonce is remembered.
    pub lifetime: Duration,
    /// A verified signature's `created`.
    pub created: Option<SystemTime>,
    /// A verified signature without a nonce: a digest of its agent, key and signature bytes,
    /// which stand for it when it is seen again.
    pub digest: Option<[u8; 32]>,
    /// The `keyid` of a verified signature: the JWK thumbprint of the agent's key that signed.
    pub keyid: Option<String>,
}

/// What a verified signature without a `nonce` must meet to be accepted, by its agent: the
/// drafts make the `nonce` optional and define no way for an agent to say it signs without one,
/// so the operator says it (`verify.web_bot_auth.nonceless_agents`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoncelessRule {
    /// The operator lists the agent: accepted for its whole validity, from any address.
    Accepted,
    /// Accepted only within `window` of its `created` (the clock skew tolerated on top), and
    /// only from the address that first sent it within that time: a captured signature
    /// replayed elsewhere, or later, is refused.
    Bounded {
        /// `verify.web_bot_auth.nonceless_window`.
        window: Duration,
        /// `verify.web_bot_auth.max_skew`.
        skew: Duration,
    },
}

/// One configured agent and its keys.
#[derive(Debug)]
struct Agent {
    agent: String,
    crawler: String,
    source: KeysSource,
    /// Read by every signed request (lock-free); replaced by the refresher.
    keys: ArcSwapOption<KeySet>,
    /// What the refresher knows; never read on the request path.
    status: Mutex<KeysStatus>,
    /// Asks the refresher for the directory now: a signature named a key the agent's set
    /// lacks, perhaps one it rotated in since the set was fetched.
    nudge: tokio::sync::Notify,
    /// When (Unix seconds) the last nudge was given; one per `MIN_KEYS_TTL` at most.
    last_nudge: AtomicU64,
    /// The HTTP proxy its key directory is fetched through, if any.
    proxy: Option<crate::config::FetchProxy>,
    /// The longest its keys are kept before a fetch, whatever the directory's `max-age`
    /// (`verify.refresh`, for the catalogue's agents).
    refresh: Option<Duration>,
}

impl Agent {
    /// Has the directory fetched again soon, at most once per `MIN_KEYS_TTL` whatever requests
    /// say: a flood of unknown key ids costs one fetch per five minutes. Key files need none
    /// (they are watched).
    fn nudge(&self, now: u64) {
        if !matches!(self.source, KeysSource::Directory { .. }) {
            return;
        }
        let last = self.last_nudge.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < MIN_KEYS_TTL.as_secs() {
            return;
        }
        if self
            .last_nudge
            .compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            self.nudge.notify_one();
        }
    }
}

/// The refresher's account of one agent's keys.
#[derive(Debug, Default)]
struct KeysStatus {
    keys: usize,
    last_error: Option<String>,
    next_load: Option<SystemTime>,
    /// The run of failed loads, for its rate-limited log lines.
    failing: Failing,
}

/// What is known of one configured agent's keys: for `/explain`, logs and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentKeys {
    /// The agent (`https://chatgpt.com`).
    pub agent: String,
    /// The crawler its signatures identify.
    pub crawler: String,
    /// Usable keys (Ed25519, RSA-PSS, ECDSA P-256) in force; 0 until the first load succeeds.
    pub keys: usize,
    /// Why the latest load failed (the keys in force, if any, are the last good ones).
    pub last_error: Option<String>,
    /// When the refresher loads the keys again (a directory's `max-age`, clamped, less a
    /// tenth; or the retry after a failure).
    pub next_load: Option<SystemTime>,
}

/// The Web Bot Auth verifier: the configured agents, those the registries list, those the
/// crawler catalogue names (built in, feeds, `crawlers.extra`), and their keys. The same agent
/// is the operator's (`agents`) first, else a registry's, else the catalogue's.
#[derive(Debug)]
pub struct WebBotAuth {
    enabled: bool,
    max_skew: Duration,
    mode: WebBotAuthMode,
    agents: Vec<Arc<Agent>>,
    registries: Vec<RegistrySource>,
    /// How often registries are read again.
    refresh: Duration,
    /// The agents of the registries' last good copies (never one of `agents`).
    discovered: ArcSwap<Vec<Arc<Agent>>>,
    /// The signing agents of the catalogue in force (never one of `agents`; one a registry
    /// also lists is the registry's). Follows the catalogue: feed refreshes and reloads.
    catalogue: ArcSwap<Vec<Arc<Agent>>>,
    /// `private_agents`: origins whose directories may be fetched from non-public addresses.
    private_agents: Vec<String>,
    /// `nonceless_agents`: agents whose signatures without a nonce are accepted as they are.
    nonceless_agents: Vec<String>,
    /// `nonceless_window`: how long after `created` any other agent's nonce-less signature is.
    nonceless_window: Duration,
    proxy: Option<crate::config::FetchProxy>,
}

impl Agent {
    fn new(
        agent: String,
        crawler: String,
        source: KeysSource,
        proxy: Option<&crate::config::FetchProxy>,
    ) -> Agent {
        Agent {
            agent,
            crawler,
            source,
            keys: ArcSwapOption::empty(),
            status: Mutex::new(KeysStatus::default()),
            nudge: tokio::sync::Notify::new(),
            last_nudge: AtomicU64::new(0),
            proxy: proxy.cloned(),
            refresh: None,
        }
    }
}

/// A request as the signature base sees it.
struct Message<'a> {
    request: &'a RequestHeader,
    authority: &'a str,
    scheme: &'a str,
}

impl Message<'_> {
    fn header_values(&self, name: &str) -> Vec<String> {
        self.request
            .headers
            .get_all(name)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .map(|value| value.trim().to_string())
            .collect()
    }

    fn query(&self) -> Option<&str> {
        self.request.uri.query()
    }
}

impl SignedMessage for Message<'_> {
    fn lookup_component(&self, component: &CoveredComponent) -> Vec<String> {
        match component {
            CoveredComponent::HTTP(HTTPField { name, parameters }) => {
                let values = self.header_values(name);
                if values.is_empty() {
                    return values;
                }
                let key = parameters.0.iter().find_map(|parameter| match parameter {
                    HTTPFieldParameters::Key(key) => Some(key.as_str()),
                    _ => None,
                });
                match key {
                    // `;key=` names one member of a dictionary field: its value, re-serialized.
                    Some(key) => dictionary_member(&values.join(", "), key)
                        .into_iter()
                        .collect(),
                    // Several lines of one field are one value, joined as RFC 9421 says.
                    None => vec![values.join(", ")],
                }
            }
            CoveredComponent::Derived(derived) => {
                let path = self.request.uri.path();
                let value = match derived {
                    DerivedComponent::Authority { .. } => self.authority.to_ascii_lowercase(),
                    DerivedComponent::Method { .. } => self.request.method.as_str().to_string(),
                    DerivedComponent::Path { .. } => path.to_string(),
                    DerivedComponent::Query { .. } => format!("?{}", self.query().unwrap_or("")),
                    DerivedComponent::Scheme { .. } => self.scheme.to_string(),
                    DerivedComponent::RequestTarget { .. } => match self.query() {
                        Some(query) => format!("{path}?{query}"),
                        None => path.to_string(),
                    },
                    DerivedComponent::TargetUri { .. } => {
                        let authority = self.authority.to_ascii_lowercase();
                        match self.query() {
                            Some(query) => format!("{}://{authority}{path}?{query}", self.scheme),
                            None => format!("{}://{authority}{path}", self.scheme),
                        }
                    }
                    // Responses only.
                    _ => return Vec::new(),
                };
                vec![value]
            }
        }
    }
}

/// The value of member `key` of dictionary field `value`, serialized.
fn dictionary_member(value: &str, key: &str) -> Option<String> {
    let dictionary = sfv::Parser::new(value).parse_dictionary().ok()?;
    let (_, member) = dictionary.iter().find(|(name, _)| name.as_str() == key)?;
    match member {
        sfv::ListEntry::Item(item) => Some(item.serialize_value()),
        inner @ sfv::ListEntry::InnerList(_) => vec![inner.clone()].serialize_value(),
    }
}

impl WebBotAuth {
    /// The verifier for `config`; keys and registries load once its service runs, key
    /// directories and registries through `proxy` when given; registries are read again every
    /// `refresh`.
    pub fn new(
        config: &WebBotAuthConfig,
        proxy: Option<&crate::config::FetchProxy>,
        refresh: Duration,
    ) -> WebBotAuth {
        let agents = config
            .agents
            .iter()
            .map(|agent| {
                let source = match &agent.keys {
                    Some(path) => KeysSource::File(path.clone()),
                    None => KeysSource::Directory {
                        url: format!("{}{DIRECTORY_PATH}", agent.agent),
                        public_only: false,
                    },
                };
                Arc::new(Agent::new(
                    agent.agent.clone(),
                    agent.crawler.clone(),
                    source,
                    proxy,
                ))
            })
            .collect();
        WebBotAuth {
            enabled: config.enabled,
            max_skew: config.max_skew,
            mode: config.mode,
            agents,
            registries: config.registries.clone(),
            refresh,
            discovered: ArcSwap::from_pointee(Vec::new()),
            catalogue: ArcSwap::from_pointee(Vec::new()),
            private_agents: config.private_agents.clone(),
            nonceless_agents: config.nonceless_agents.clone(),
            nonceless_window: config.nonceless_window,
            proxy: proxy.cloned(),
        }
    }

    /// Whether a request could be checked at all: verification is on and agents, registries
    /// or catalogue agents are there.
    pub fn is_active(&self) -> bool {
        self.enabled
            && !(self.agents.is_empty()
                && self.registries.is_empty()
                && self.catalogue.load().is_empty())
    }

    /// Whether a directory at `url`, named by a registry or the catalogue, is fetched from
    /// public addresses only: unless its origin is one of `private_agents`.
    fn public_only(&self, url: &str) -> bool {
        !crate::config::https_origin_of(url)
            .is_some_and(|origin| self.private_agents.contains(&origin))
    }

    /// Puts the signing agents `catalogue` names in force: each (agent, crawler) once, the
    /// first entry naming an agent keeping it, none that `agents` configures. An agent already
    /// in force for the same crawler keeps its loaded keys. `true` when the set changed.
    pub fn set_catalogue(&self, catalogue: &Catalogue) -> bool {
        let old = self.catalogue.load_full();
        let mut agents: Vec<Arc<Agent>> = Vec::new();
        for def in catalogue.defs() {
            for named in &def.signing_agents {
                let Some(origin) = crate::config::https_origin(named) else {
                    continue;
                };
                let taken = self
                    .agents
                    .iter()
                    .chain(agents.iter())
                    .any(|agent| agent.agent == origin);
                if taken {
                    continue;
                }
                let kept = old
                    .iter()
                    .find(|agent| agent.agent == origin && agent.crawler == def.name);
                let agent = match kept {
                    Some(agent) => agent.clone(),
                    None => {
                        let url = format!("{origin}{DIRECTORY_PATH}");
                        let public_only = self.public_only(&url);
                        let mut agent = Agent::new(
                            origin,
                            def.name.clone(),
                            KeysSource::Directory { url, public_only },
                            self.proxy.as_ref(),
                        );
                        agent.refresh = Some(self.refresh);
                        Arc::new(agent)
                    }
                };
                agents.push(agent);
            }
        }
        let changed = agents.len() != old.len()
            || agents
                .iter()
                .zip(old.iter())
                .any(|(a, b)| !Arc::ptr_eq(a, b));
        if changed {
            self.catalogue.store(Arc::new(agents));
        }
        changed
    }

    /// The catalogue's agents in force for lookups: those no registry also lists.
    fn catalogue_agents(&self) -> Vec<Arc<Agent>> {
        let discovered = self.discovered.load();
        self.catalogue
            .load()
            .iter()
            .filter(|agent| !discovered.iter().any(|d| d.agent == agent.agent))
            .cloned()
            .collect()
    }

    /// `verify.web_bot_auth.mode`: what an origin without its own `web_bot_auth.mode` uses.
    pub fn mode(&self) -> WebBotAuthMode {
        self.mode
    }

    /// Whether `crawler` (a catalogue name, any case) has a signing agent: configured,
    /// listed by a registry, or named by its catalogue entry (built in, a feed's, `extra`).
    /// `required` refuses its unsigned claims.
    pub fn has_signing_agent(&self, crawler: &str) -> bool {
        if !self.enabled {
            return false;
        }
        let signs = |agent: &Arc<Agent>| agent.crawler.eq_ignore_ascii_case(crawler);
        let discovered = self.discovered.load();
        // On the request path (under `required`): no allocation, the registries' agents
        // shadowing the catalogue's in place.
        self.agents.iter().any(signs)
            || discovered.iter().any(signs)
            || self
                .catalogue
                .load()
                .iter()
                .any(|agent| signs(agent) && !discovered.iter().any(|d| d.agent == agent.agent))
    }

    /// The agent whose `Signature-Agent` origin is `origin`: the operator's, else a
    /// registry's, else the catalogue's.
    fn agent(&self, origin: &str) -> Option<Arc<Agent>> {
        self.agents
            .iter()
            .find(|agent| agent.agent == origin)
            .cloned()
            .or_else(|| {
                self.discovered
                    .load()
                    .iter()
                    .find(|agent| agent.agent == origin)
                    .cloned()
            })
            .or_else(|| {
                self.catalogue
                    .load()
                    .iter()
                    .find(|agent| agent.agent == origin)
                    .cloned()
            })
    }

    /// Checks `request`'s signature ([`WebBotAuth::check`], its outcome only).
    pub fn verify(
        &self,
        request: &RequestHeader,
        authority: &str,
        scheme: &str,
        now: SystemTime,
    ) -> SignatureOutcome {
        self.check(request, authority, scheme, now).outcome
    }

    /// Checks `request`'s signature: `authority` and `scheme` are the request's as the client
    /// addressed it (`@authority`, `@target-uri`). Cheap and synchronous: keys are in memory.
    /// The key is looked up in the signing agent's own set, by the thumbprint its `keyid`
    /// names; its algorithm must be the signature's `alg`, when given.
    pub fn check(
        &self,
        request: &RequestHeader,
        authority: &str,
        scheme: &str,
        now: SystemTime,
    ) -> Checked {
        let mut checked = Checked {
            outcome: SignatureOutcome::Absent,
            nonce: None,
            lifetime: Duration::ZERO,
            created: None,
            digest: None,
            keyid: None,
        };
        checked.outcome = self.check_outcome(request, authority, scheme, now, &mut checked);
        if !matches!(checked.outcome, SignatureOutcome::Verified { .. }) {
            checked.nonce = None;
            checked.created = None;
            checked.digest = None;
            checked.keyid = None;
        } else if checked.nonce.is_some() {
            checked.digest = None;
        }
        checked
    }

    /// The rule a verified signature of `agent` without a nonce must meet.
    pub fn nonceless_rule(&self, agent: &str) -> NoncelessRule {
        if self.nonceless_agents.iter().any(|listed| listed == agent) {
            NoncelessRule::Accepted
        } else {
            NoncelessRule::Bounded {
                window: self.nonceless_window,
                skew: self.max_skew,
            }
        }
    }

    fn check_outcome(
        &self,
        request: &RequestHeader,
        authority: &str,
        scheme: &str,
        now: SystemTime,
        checked: &mut Checked,
    ) -> SignatureOutcome {
        let inputs = request.headers.get_all("signature-input");
        if inputs.iter().next().is_none() {
            return SignatureOutcome::Absent;
        }
        let size: usize = ["signature-input", "signature", "signature-agent"]
            .iter()
            .flat_map(|name| request.headers.get_all(*name).iter())
            .map(|value| value.len())
            .sum();
        if size > MAX_SIGNATURE_BYTES {
            return SignatureOutcome::Invalid(format!(
                "signature headers over {MAX_SIGNATURE_BYTES} bytes"
            ));
        }
        let message = Message {
            request,
            authority,
            scheme,
        };
        let verifier = match WebBotAuthVerifier::parse(&message) {
            Ok(verifier) => verifier,
            Err(e) => {
                return SignatureOutcome::Invalid(format!("{e:?}").chars().take(200).collect())
            }
        };
        let named: Vec<&str> = verifier
            .get_signature_agents()
            .iter()
            .map(|link| match link {
                SignatureAgentLink::External(url) => url.as_str(),
                SignatureAgentLink::Inline(_) => "an inline key",
            })
            .collect();
        let details = &verifier.get_parsed_label().base.parameters.details;
        // The draft: `Signature-Agent` names where the signer's keys are, and is covered (the
        // crate refuses a signature that leaves a present `Signature-Agent` uncovered). Without
        // it nothing binds the key to an agent.
        if named.is_empty() {
            return SignatureOutcome::Invalid("no usable Signature-Agent".into());
        }
        let found = named.iter().find_map(|name| {
            let origin = crate::config::https_origin(name)?;
            self.agent(&origin)
        });
        let Some(agent) = found else {
            return SignatureOutcome::UnknownAgent(named.join(", ").chars().take(200).collect());
        };
        let seconds = |at: SystemTime| {
            at.duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        };
        let now = seconds(now);
        let skew = i64::try_from(self.max_skew.as_secs()).unwrap_or(i64::MAX);
        let (Some(created), Some(expires)) = (details.created, details.expires) else {
            return SignatureOutcome::Invalid("no created or expires".into());
        };
        if created > now.saturating_add(skew) {
            return SignatureOutcome::Invalid("created in the future".into());
        }
        if expires < now.saturating_sub(skew) {
            return SignatureOutcome::Invalid("expired".into());
        }
        if expires.saturating_sub(created) > MAX_LIFETIME.as_secs() as i64 || expires < created {
            return SignatureOutcome::Invalid("a lifetime over 24 hours".into());
        }
        checked.nonce = details.nonce.clone();
        checked.lifetime = Duration::from_secs(
            u64::try_from(expires.saturating_add(skew).saturating_sub(now)).unwrap_or(0),
        );
        checked.created = u64::try_from(created)
            .ok()
            .and_then(|secs| SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(secs)));
        let Some(keys) = agent.keys.load_full() else {
            return SignatureOutcome::Unavailable(format!(
                "the keys of {} are not loaded",
                agent.agent
            ));
        };
        let label = verifier.get_parsed_label();
        let Some(key) = details.keyid.as_deref().and_then(|keyid| keys.get(keyid)) else {
            agent.nudge(u64::try_from(now).unwrap_or(0));
            return SignatureOutcome::Invalid(format!("the key is not one of {}'s", agent.agent));
        };
        let alg = label
            .base
            .parameters
            .raw
            .iter()
            .find(|(name, _)| name.as_str() == "alg")
            .map(|(_, value)| value.as_string().map(|alg| alg.as_str().to_string()));
        match alg {
            Some(Some(alg)) if alg == key.algorithm() => {}
            Some(alg) => {
                return SignatureOutcome::Invalid(format!(
                    "alg {} is not the key's {}",
                    alg.unwrap_or_default().chars().take(40).collect::<String>(),
                    key.algorithm()
                ))
            }
            None => {}
        }
        let Some(base) = signature_base(&label.base) else {
            return SignatureOutcome::Invalid("the signature base cannot be built".into());
        };
        match key.verify(base.as_bytes(), &label.signature) {
            Ok(()) => {
                use sha2::Digest;
                let mut digest = sha2::Sha256::new();
                digest.update(agent.agent.as_bytes());
                digest.update([0]);
                digest.update(details.keyid.as_deref().unwrap_or("").as_bytes());
                digest.update([0]);
                digest.update(&label.signature);
                checked.digest = Some(digest.finalize().into());
                checked.keyid = details.keyid.clone();
                SignatureOutcome::Verified {
                    agent: agent.agent.clone(),
                    crawler: agent.crawler.clone(),
                }
            }
            Err(e) => SignatureOutcome::Invalid(e.to_string().chars().take(200).collect()),
        }
    }

    /// Loads every agent's keys once, now (the command line and benchmarks; a server runs
    /// [`WebBotAuth::service`] instead).
    pub async fn load_once(&self) {
        let connector = Connector::new(None);
        let mut registries = Registries::default();
        self.load_registries(&connector, &mut registries).await;
        let discovered = self.discovered.load_full();
        let catalogue = self.catalogue_agents();
        for agent in self
            .agents
            .iter()
            .chain(discovered.iter())
            .chain(&catalogue)
        {
            let (result, _) = load(agent, &connector).await;
            record(agent, result);
        }
    }

    /// Reads every registry and its cards, and puts their agents in force: a registry that
    /// cannot be read keeps its last good agents, a card that cannot be read its last good
    /// copy. An agent already in force keeps its loaded keys when its card is unchanged.
    async fn load_registries(&self, connector: &Connector, registries: &mut Registries) {
        for source in &self.registries {
            let name = match source {
                RegistrySource::Url(url) => url.clone(),
                RegistrySource::File(path) => format!("file:{}", path.display()),
            };
            let text = match registry::fetch_registry(connector, source, self.proxy.as_ref()).await
            {
                Ok(text) => text,
                Err(e) => {
                    let said = crate::logs::one_line(&e.to_string());
                    tracing::warn!(registry = %name, "Web Bot Auth registry: {said} (its last good agents stay)");
                    continue;
                }
            };
            let base = match source {
                RegistrySource::File(path) => path.parent().map(std::path::Path::to_path_buf),
                RegistrySource::Url(_) => None,
            };
            let mut cards = Vec::new();
            for url in registry::card_urls(&text) {
                match registry::fetch_card(connector, &url, base.as_deref(), self.proxy.as_ref())
                    .await
                {
                    Ok(card) => cards.push((url, card)),
                    Err(e) => {
                        // The card's URL and a parser's error are the registry's text.
                        let shown = crate::logs::one_line(&url);
                        let said = crate::logs::one_line(&e.to_string());
                        tracing::warn!(registry = %name, card = %shown, "Web Bot Auth card: {said}");
                        if let Some(last) = registries.cards.get(&(name.clone(), url.clone())) {
                            cards.push((url, last.clone()));
                        }
                    }
                }
            }
            METRICS
                .web_bot_auth_registry_agents
                .with_label_values(&[&name])
                .set(i64::try_from(cards.len()).unwrap_or(i64::MAX));
            registries
                .cards
                .retain(|(registry, _), _| *registry != name);
            for (url, card) in &cards {
                registries
                    .cards
                    .insert((name.clone(), url.clone()), card.clone());
            }
            registries.by_registry.insert(name, cards);
        }
        let old = self.discovered.load_full();
        let mut agents: Vec<Arc<Agent>> = Vec::new();
        for source in &self.registries {
            let name = match source {
                RegistrySource::Url(url) => url.clone(),
                RegistrySource::File(path) => format!("file:{}", path.display()),
            };
            for (_, card) in registries.by_registry.get(&name).into_iter().flatten() {
                let taken = self
                    .agents
                    .iter()
                    .chain(agents.iter())
                    .any(|a| a.agent == card.agent);
                if taken {
                    continue;
                }
                agents.push(self.card_agent(card, &old));
            }
        }
        self.discovered.store(Arc::new(agents));
    }

    /// The agent of `card`: the one in force when the card has not changed (its keys stay
    /// loaded), else a new one.
    fn card_agent(&self, card: &registry::Card, old: &[Arc<Agent>]) -> Arc<Agent> {
        let same = old.iter().find(|agent| {
            agent.agent == card.agent
                && agent.crawler == card.crawler
                && match (&agent.source, &card.keys) {
                    (KeysSource::Directory { url, .. }, CardKeys::Directory(card_url)) => {
                        url == card_url
                    }
                    _ => false,
                }
        });
        if let Some(agent) = same {
            return agent.clone();
        }
        match &card.keys {
            CardKeys::Inline(keys) => {
                let agent = Agent::new(
                    card.agent.clone(),
                    card.crawler.clone(),
                    KeysSource::Inline,
                    self.proxy.as_ref(),
                );
                let count = keys.len();
                agent.keys.store(Some(Arc::new(keys.clone())));
                if let Ok(mut status) = agent.status.lock() {
                    status.keys = count;
                }
                METRICS
                    .verify_signature_keys
                    .with_label_values(&[&agent.agent])
                    .set(i64::try_from(count).unwrap_or(i64::MAX));
                Arc::new(agent)
            }
            CardKeys::Directory(url) => Arc::new(Agent::new(
                card.agent.clone(),
                card.crawler.clone(),
                KeysSource::Directory {
                    url: url.clone(),
                    public_only: self.public_only(url),
                },
                self.proxy.as_ref(),
            )),
        }
    }

    /// Each agent's keys (configured, then the registries', then the catalogue's) as the
    /// refresher last left them.
    pub fn agent_keys(&self) -> Vec<AgentKeys> {
        let discovered = self.discovered.load_full();
        let catalogue = self.catalogue_agents();
        self.agents
            .iter()
            .chain(discovered.iter())
            .chain(&catalogue)
            .map(|agent| {
                let status = agent.status.lock().unwrap_or_else(|e| e.into_inner());
                AgentKeys {
                    agent: agent.agent.clone(),
                    crawler: agent.crawler.clone(),
                    keys: status.keys,
                    last_error: status.last_error.clone(),
                    next_load: status.next_load,
                }
            })
            .collect()
    }

    /// The background service loading and refreshing the agents' keys: the configured ones
    /// and the registries'; with `live`, also the catalogue's, following it through reloads
    /// and feed refreshes.
    pub fn service(self: &Arc<Self>, live: Option<Arc<Live>>) -> KeyRefresher {
        KeyRefresher {
            auth: self.clone(),
            live,
        }
    }
}

/// Keeps each agent's keys: directories fetched and refetched before their `max-age` runs out,
/// files read and re-read when they change; the last good keys are kept through failures.
pub struct KeyRefresher {
    auth: Arc<WebBotAuth>,
    live: Option<Arc<Live>>,
}

/// One key task per agent of `agents` whose keys are in a directory: started for agents new
/// to `tasks`, stopped (and their series dropped) for agents gone from it.
fn reconcile_key_tasks(
    tasks: &mut Vec<(Arc<Agent>, tokio::task::JoinHandle<()>)>,
    agents: &[Arc<Agent>],
    connector: &Arc<Connector>,
    watcher: &Arc<FileWatcher>,
) {
    tasks.retain(|(agent, task)| {
        let kept = agents.iter().any(|a| Arc::ptr_eq(a, agent));
        if !kept {
            task.abort();
            if !agents.iter().any(|a| a.agent == agent.agent) {
                forget_agent(&agent.agent);
            }
        }
        kept
    });
    for agent in agents {
        let known = tasks.iter().any(|(a, _)| Arc::ptr_eq(a, agent));
        if !known && matches!(agent.source, KeysSource::Directory { .. }) {
            let task = tokio::spawn(keep_keys(agent.clone(), connector.clone(), watcher.clone()));
            tasks.push((agent.clone(), task));
        }
    }
}

/// Drops the key series of an agent no longer in force.
fn forget_agent(agent: &str) {
    let _ = METRICS.verify_signature_keys.remove_label_values(&[agent]);
    for outcome in ["ok", "failed"] {
        let _ = METRICS
            .verify_signature_key_fetches
            .remove_label_values(&[agent, outcome]);
    }
}

#[async_trait]
impl BackgroundService for KeyRefresher {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        if !self.auth.enabled {
            return;
        }
        let connector = Arc::new(Connector::new(None));
        let watcher = Arc::new(FileWatcher::new());
        let mut tasks: Vec<_> = self
            .auth
            .agents
            .iter()
            .map(|agent| tokio::spawn(keep_keys(agent.clone(), connector.clone(), watcher.clone())))
            .collect();
        if !self.auth.registries.is_empty() {
            tasks.push(tokio::spawn(keep_registries(
                self.auth.clone(),
                connector.clone(),
                watcher.clone(),
            )));
        }
        // The catalogue's agents follow the catalogue in force: tasks start for agents new to
        // it and stop for agents of entries gone (a reload, a feed refresh).
        let mut catalogue_tasks = Vec::new();
        match &self.live {
            Some(live) => {
                let mut generations = live.subscribe();
                loop {
                    self.auth.set_catalogue(live.load().identifier.catalogue());
                    let agents = self.auth.catalogue.load_full();
                    reconcile_key_tasks(&mut catalogue_tasks, &agents, &connector, &watcher);
                    if !crate::tasks::next_reload(&mut generations, &mut shutdown).await {
                        break;
                    }
                }
            }
            None => {
                let agents = self.auth.catalogue.load_full();
                reconcile_key_tasks(&mut catalogue_tasks, &agents, &connector, &watcher);
                let _ = shutdown.wait_for(|stop| *stop).await;
            }
        }
        for task in tasks {
            task.abort();
        }
        for (_, task) in catalogue_tasks {
            task.abort();
        }
    }
}

/// The registries' last good copies, kept by the task that reads them.
#[derive(Default)]
struct Registries {
    /// Per registry, its cards (by URL) in its order.
    by_registry: std::collections::HashMap<String, Vec<(String, registry::Card)>>,
    /// Per (registry, card URL), the card's last good copy.
    cards: std::collections::HashMap<(String, String), registry::Card>,
}

/// Reads the registries at start and every `refresh`, and keeps a key task per agent whose
/// keys are in a directory (started when the agent appears, stopped when it goes).
async fn keep_registries(
    auth: Arc<WebBotAuth>,
    connector: Arc<Connector>,
    watcher: Arc<FileWatcher>,
) {
    let mut registries = Registries::default();
    let mut tasks: Vec<(Arc<Agent>, tokio::task::JoinHandle<()>)> = Vec::new();
    loop {
        auth.load_registries(&connector, &mut registries).await;
        let agents = auth.discovered.load_full();
        reconcile_key_tasks(&mut tasks, &agents, &connector, &watcher);
        tokio::time::sleep(auth.refresh).await;
    }
}

async fn keep_keys(agent: Arc<Agent>, connector: Arc<Connector>, watcher: Arc<FileWatcher>) {
    let changes = match &agent.source {
        KeysSource::File(path) => Some(watcher.subscribe(path)),
        KeysSource::Directory { .. } => None,
        // Inline keys never change.
        KeysSource::Inline => return,
    };
    let mut failures: u32 = 0;
    loop {
        let (result, ttl) = load(&agent, &connector).await;
        let failed = result.is_err();
        record(&agent, result);
        failures = if failed {
            failures.saturating_add(1)
        } else {
            0
        };
        let delay = if failures == 0 {
            // Fetched again a little before the directory says it expires (and, for the
            // catalogue's agents, at least every `verify.refresh`).
            let before_expiry = ttl.mul_f64(0.9);
            agent
                .refresh
                .map_or(before_expiry, |refresh| before_expiry.min(refresh))
        } else {
            crate::tasks::backoff(FIRST_RETRY, failures, MAX_RETRY)
        };
        if let Ok(mut status) = agent.status.lock() {
            status.next_load = SystemTime::now().checked_add(delay);
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = async {
                match changes.as_deref() {
                    Some(changes) => changes.next().await,
                    None => std::future::pending().await,
                }
            } => {
                if let KeysSource::File(path) = &agent.source {
                    watcher.rewatch(path);
                }
            }
            _ = agent.nudge.notified() => {
                tracing::debug!(agent = %agent.agent, "Web Bot Auth keys: a signature named an unknown key; fetching the directory again");
            }
        }
    }
}

/// The causes of key directory failures said lately, shared by every agent.
static KEY_CAUSES: std::sync::LazyLock<super::refresh::Causes> =
    std::sync::LazyLock::new(Default::default);

/// Puts a load's keys in force (or keeps the last good ones), and counts and logs it. A run of
/// failures is said once, then summed up at most every ten minutes (an offline deployment's
/// built-in agents fail for good); attempts back off from 10 s to an hour.
fn record(agent: &Agent, result: Result<KeySet, String>) {
    let outcome = match result {
        Ok(keys) => {
            let count = keys.len();
            METRICS
                .verify_signature_keys
                .with_label_values(&[&agent.agent])
                .set(i64::try_from(count).unwrap_or(i64::MAX));
            agent.keys.store(Some(Arc::new(keys)));
            let mut status = agent.status.lock().unwrap_or_else(|e| e.into_inner());
            status.failing.succeeded();
            if status.last_error.take().is_some() {
                tracing::info!(agent = %agent.agent, keys = count, "Web Bot Auth keys loaded again");
            }
            status.keys = count;
            "ok"
        }
        Err(error) => {
            let kept = if agent.keys.load().is_some() {
                "the last good keys stay in force"
            } else {
                "its signatures cannot be checked until they load"
            };
            let mut status = agent.status.lock().unwrap_or_else(|e| e.into_inner());
            // A parser's error may quote the directory: one escaped, bounded line.
            let said = crate::logs::one_line(&error);
            let now = std::time::Instant::now();
            // Agents failing for one cause (no DNS, no egress) share their lines.
            let line = status
                .failing
                .failed(now)
                .and_then(|line| Some((line, KEY_CAUSES.admit(&error, now)?)));
            match line {
                Some((FailureLine::First, others)) => tracing::warn!(
                    agent = %agent.agent,
                    crawler = %agent.crawler,
                    others_unsaid = others,
                    "Web Bot Auth keys: {said} ({kept}; retried with backoff; this cause is \
                     said at most every 10 minutes, whichever agents it stops: \
                     robotsguard_verify_signature_keys shows each agent)"
                ),
                Some((
                    FailureLine::Summary {
                        attempts,
                        since_last,
                    },
                    others,
                )) => tracing::warn!(
                    agent = %agent.agent,
                    crawler = %agent.crawler,
                    attempts,
                    since_last,
                    others_unsaid = others,
                    "Web Bot Auth keys still failing: {said} ({kept})"
                ),
                None => {}
            }
            status.last_error = Some(error);
            "failed"
        }
    };
    METRICS
        .verify_signature_key_fetches
        .with_label_values(&[&agent.agent, outcome])
        .inc();
}

/// An agent's keys from its source, and how long they may be kept.
async fn load(agent: &Agent, connector: &Connector) -> (Result<KeySet, String>, Duration) {
    match &agent.source {
        KeysSource::Directory { url, public_only } => {
            fetch_directory(connector, url, agent.proxy.as_ref(), *public_only).await
        }
        KeysSource::Inline => match agent.keys.load_full() {
            Some(keys) => (Ok((*keys).clone()), MAX_KEYS_TTL),
            None => (Err("no inline keys".into()), MAX_KEYS_TTL),
        },
        KeysSource::File(path) => {
            let path = path.clone();
            let read = tokio::task::spawn_blocking(move || crate::verify::ranges::read_file(&path))
                .await
                .map_err(|e| format!("the read did not finish: {e}"))
                .and_then(|read| read.map_err(|e| e.to_string()));
            let keys = read.and_then(|body| KeySet::from_jwks(&body).map_err(|e| e.to_string()));
            (keys, MAX_KEYS_TTL)
        }
    }
}

/// `max-age` of a Cache-Control value, clamped to [5 min, 24 h]; 1 h without one.
fn keys_ttl(cache_control: Option<&str>) -> Duration {
    let max_age = cache_control.and_then(|value| {
        value.split(',').find_map(|directive| {
            let (name, seconds) = directive.trim().split_once('=')?;
            name.trim()
                .eq_ignore_ascii_case("max-age")
                .then(|| seconds.trim().trim_matches('"').parse::<u64>().ok())
                .flatten()
        })
    });
    max_age.map_or(Duration::from_secs(3600), |seconds| {
        Duration::from_secs(seconds).clamp(MIN_KEYS_TTL, MAX_KEYS_TTL)
    })
}

/// Fetches a key directory; with `public_only` (a directory a registry named), never from a
/// non-public address.
async fn fetch_directory(
    connector: &Connector,
    url: &str,
    proxy: Option<&crate::config::FetchProxy>,
    public_only: bool,
) -> (Result<KeySet, String>, Duration) {
    let answer = match get_url_to(
        connector,
        url,
        &Validators::default(),
        MAX_DIRECTORY_BYTES,
        FETCH_TIMEOUT,
        proxy,
        public_only.then_some(super::is_public as fn(std::net::IpAddr) -> bool),
    )
    .await
    {
        Ok(answer) => answer,
        Err(e) => return (Err(e.to_string()), MAX_KEYS_TTL),
    };
    let ttl = keys_ttl(answer.cache_control.as_deref());
    // The draft: no redirects, and anything but 200 is a failure.
    if answer.status != 200 {
        return (Err(format!("HTTP {} from {url}", answer.status)), ttl);
    }
    if answer.over_limit {
        return (Err(format!("larger than {MAX_DIRECTORY_BYTES} bytes")), ttl);
    }
    (
        KeySet::from_jwks(&answer.body).map_err(|e| e.to_string()),
        ttl,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_lifetimes() {
        assert_eq!(keys_ttl(Some("max-age=86400")), Duration::from_secs(86400));
        assert_eq!(keys_ttl(Some("public, max-age=10")), MIN_KEYS_TTL);
        assert_eq!(keys_ttl(Some("max-age=9999999")), MAX_KEYS_TTL);
        assert_eq!(keys_ttl(None), Duration::from_secs(3600));
    }

    fn entry(name: &str, agents: &[&str]) -> crate::crawlers::CrawlerDef {
        crate::crawlers::CrawlerDef {
            name: name.into(),
            tokens: vec![name.to_ascii_lowercase()],
            pattern: name.into(),
            category: crate::crawlers::Category::AiAssistant,
            operator: String::new(),
            ignores_global: false,
            verify: None,
            purposes: Vec::new(),
            controls: Default::default(),
            ignores_crawl_delay: false,
            signing_agents: agents.iter().map(|a| a.to_string()).collect(),
            source: String::new(),
            replace: false,
            feed: None,
        }
    }

    fn catalogue(defs: Vec<crate::crawlers::CrawlerDef>) -> Catalogue {
        Catalogue::new(defs).unwrap_or_else(|e| unreachable!("{e}"))
    }

    fn public_only(auth: &WebBotAuth, agent: &str) -> Option<bool> {
        auth.agent(agent).and_then(|agent| match &agent.source {
            KeysSource::Directory { public_only, .. } => Some(*public_only),
            _ => None,
        })
    }

    #[test]
    fn catalogue_agents_come_after_the_operators_and_the_registries() {
        let config = WebBotAuthConfig {
            agents: vec![crate::config::SignatureAgent {
                agent: "https://op.example".into(),
                crawler: "OpBot".into(),
                keys: None,
            }],
            private_agents: vec!["https://10.0.0.7:8443".into()],
            ..WebBotAuthConfig::default()
        };
        let auth = WebBotAuth::new(&config, None, Duration::from_secs(600));
        assert!(!auth.has_signing_agent("TeamBot"));
        let first = catalogue(vec![
            // The operator's agent stays the operator's; the same agent spelled twice is one.
            entry(
                "TeamBot",
                &[
                    "https://op.example",
                    "https://Team.example/",
                    "https://team.example",
                ],
            ),
            // An agent an earlier entry took stays that entry's.
            entry("OtherBot", &["https://team.example"]),
            entry("InternalBot", &["https://10.0.0.7:8443"]),
            entry("RegBot", &["https://reg.example"]),
        ]);
        assert!(auth.set_catalogue(&first));
        let listed: Vec<(String, String)> = auth
            .agent_keys()
            .into_iter()
            .map(|keys| (keys.agent, keys.crawler))
            .collect();
        let pair = |a: &str, c: &str| (a.to_string(), c.to_string());
        assert_eq!(
            listed,
            [
                pair("https://op.example", "OpBot"),
                pair("https://team.example", "TeamBot"),
                pair("https://10.0.0.7:8443", "InternalBot"),
                pair("https://reg.example", "RegBot"),
            ]
        );
        assert!(auth.is_active());
        assert_eq!(
            auth.agent("https://op.example")
                .map(|a| a.crawler.clone())
                .as_deref(),
            Some("OpBot")
        );
        assert!(auth.has_signing_agent("teambot"));
        assert!(!auth.has_signing_agent("OtherBot"));
        // Catalogue agents are fetched from public addresses only, unless the operator said.
        assert_eq!(public_only(&auth, "https://team.example"), Some(true));
        assert_eq!(public_only(&auth, "https://10.0.0.7:8443"), Some(false));
        assert_eq!(public_only(&auth, "https://op.example"), Some(false));
        let cached = auth.agent("https://team.example");
        // A registry listing the same agent wins over the catalogue.
        let card = registry::Card {
            agent: "https://reg.example".into(),
            crawler: "CardBot".into(),
            keys: CardKeys::Directory(
                "https://reg.example/.well-known/http-message-signatures-directory".into(),
            ),
        };
        auth.discovered
            .store(Arc::new(vec![auth.card_agent(&card, &[])]));
        assert_eq!(
            auth.agent("https://reg.example")
                .map(|a| a.crawler.clone())
                .as_deref(),
            Some("CardBot")
        );
        assert!(!auth.has_signing_agent("RegBot"));
        assert!(auth.has_signing_agent("CardBot"));
        // The same catalogue again changes nothing (loaded keys stay); an entry gone takes its
        // agent with it.
        assert!(!auth.set_catalogue(&first));
        assert!(
            matches!((&cached, auth.agent("https://team.example")), (Some(a), Some(b)) if Arc::ptr_eq(a, &b))
        );
        assert!(auth.set_catalogue(&catalogue(vec![entry(
            "InternalBot",
            &["https://10.0.0.7:8443"]
        )])));
        assert!(auth.agent("https://team.example").is_none());
        assert!(!auth.has_signing_agent("TeamBot"));
        assert!(auth.has_signing_agent("InternalBot"));
        // Web Bot Auth off: nobody signs.
        let off = WebBotAuth::new(
            &WebBotAuthConfig {
                enabled: false,
                ..WebBotAuthConfig::default()
            },
            None,
            Duration::from_secs(600),
        );
        off.set_catalogue(&first);
        assert!(!off.has_signing_agent("TeamBot"));
        assert!(!off.is_active());
    }

    #[test]
    fn dictionary_members() {
        let value = r#"sig1="https://chatgpt.com", sig2="https://bot.example""#;
        assert_eq!(
            dictionary_member(value, "sig2").as_deref(),
            Some(r#""https://bot.example""#)
        );
        assert_eq!(dictionary_member(value, "sig3"), None);
        assert_eq!(dictionary_member("not a dictionary ((", "sig1"), None);
    }
}
