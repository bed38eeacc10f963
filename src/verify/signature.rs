//! Web Bot Auth: HTTP Message Signatures (RFC 9421) of bots, as the IETF webbotauth draft
//! profiles them. A request signed by a configured agent, over `@authority` (or `@target-uri`)
//! and its `Signature-Agent` header, with `tag="web-bot-auth"`, a `created`..`expires` window
//! around now, and a `keyid` that is the JWK thumbprint of one of that agent's keys, is that
//! agent's crawler.
//!
//! Parsing the signature headers, building the signature base and checking Ed25519 signatures
//! is Cloudflare's `web-bot-auth` crate. It accepts a valid signature under any key it is
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

use arc_swap::ArcSwapOption;
use async_trait::async_trait;
use pingora::connectors::http::Connector;
use pingora::http::RequestHeader;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use sfv::SerializeValue;
use web_bot_auth::components::{
    CoveredComponent, DerivedComponent, HTTPField, HTTPFieldParameters,
};
use web_bot_auth::keyring::{KeyRing, Thumbprintable};
use web_bot_auth::message_signatures::SignedMessage;
use web_bot_auth::{SignatureAgentLink, WebBotAuthVerifier};

use crate::config::WebBotAuthConfig;
use crate::fetch::{FileWatcher, Validators};
use crate::metrics::METRICS;
use crate::net::url::get_url;

/// The path of an agent's key directory.
pub const DIRECTORY_PATH: &str = "/.well-known/http-message-signatures-directory";

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

/// Where an agent's keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum KeysSource {
    /// `<agent>/.well-known/http-message-signatures-directory`.
    Directory(String),
    /// A JWKS file.
    File(PathBuf),
}

/// One configured agent and its keys.
#[derive(Debug)]
struct Agent {
    agent: String,
    crawler: String,
    source: KeysSource,
    /// Read by every signed request (lock-free); replaced by the refresher.
    keys: ArcSwapOption<KeyRing>,
    /// What the refresher knows; never read on the request path.
    status: Mutex<KeysStatus>,
    /// Asks the refresher for the directory now: a signature named a key the agent's set
    /// lacks, perhaps one it rotated in since the set was fetched.
    nudge: tokio::sync::Notify,
    /// When (Unix seconds) the last nudge was given; one per `MIN_KEYS_TTL` at most.
    last_nudge: AtomicU64,
    /// The HTTP proxy its key directory is fetched through, if any.
    proxy: Option<crate::config::FetchProxy>,
}

impl Agent {
    /// Has the directory fetched again soon, at most once per `MIN_KEYS_TTL` whatever requests
    /// say: a flood of unknown key ids costs one fetch per five minutes. Key files need none
    /// (they are watched).
    fn nudge(&self, now: u64) {
        if !matches!(self.source, KeysSource::Directory(_)) {
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
}

/// What is known of one configured agent's keys: for `/explain`, logs and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentKeys {
    /// The agent (`https://chatgpt.com`).
    pub agent: String,
    /// The crawler its signatures identify.
    pub crawler: String,
    /// Usable (Ed25519) keys in force; 0 until the first load succeeds.
    pub keys: usize,
    /// Why the latest load failed (the keys in force, if any, are the last good ones).
    pub last_error: Option<String>,
    /// When the refresher loads the keys again (a directory's `max-age`, clamped, less a
    /// tenth; or the retry after a failure).
    pub next_load: Option<SystemTime>,
}

/// The Web Bot Auth verifier: the configured agents and their keys.
#[derive(Debug)]
pub struct WebBotAuth {
    enabled: bool,
    max_skew: Duration,
    agents: Vec<Arc<Agent>>,
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
    /// The verifier for `config`; keys load once its service runs, key directories through
    /// `proxy` when given.
    pub fn new(config: &WebBotAuthConfig, proxy: Option<&crate::config::FetchProxy>) -> WebBotAuth {
        let agents = config
            .agents
            .iter()
            .map(|agent| {
                Arc::new(Agent {
                    agent: agent.agent.clone(),
                    crawler: agent.crawler.clone(),
                    source: match &agent.keys {
                        Some(path) => KeysSource::File(path.clone()),
                        None => KeysSource::Directory(format!("{}{DIRECTORY_PATH}", agent.agent)),
                    },
                    keys: ArcSwapOption::empty(),
                    status: Mutex::new(KeysStatus::default()),
                    nudge: tokio::sync::Notify::new(),
                    last_nudge: AtomicU64::new(0),
                    proxy: proxy.cloned(),
                })
            })
            .collect();
        WebBotAuth {
            enabled: config.enabled,
            max_skew: config.max_skew,
            agents,
        }
    }

    /// Whether a request could be checked at all: verification is on and agents are set.
    pub fn is_active(&self) -> bool {
        self.enabled && !self.agents.is_empty()
    }

    /// Checks `request`'s signature: `authority` and `scheme` are the request's as the client
    /// addressed it (`@authority`, `@target-uri`). Cheap and synchronous: keys are in memory.
    pub fn verify(
        &self,
        request: &RequestHeader,
        authority: &str,
        scheme: &str,
        now: SystemTime,
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
            self.agents.iter().find(|agent| agent.agent == origin)
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
        let Some(keys) = agent.keys.load_full() else {
            return SignatureOutcome::Unavailable(format!(
                "the keys of {} are not loaded",
                agent.agent
            ));
        };
        match verifier.verify(&keys, None) {
            Ok(_) => SignatureOutcome::Verified {
                agent: agent.agent.clone(),
                crawler: agent.crawler.clone(),
            },
            Err(web_bot_auth::ImplementationError::NoSuchKey) => {
                agent.nudge(u64::try_from(now).unwrap_or(0));
                SignatureOutcome::Invalid(format!("the key is not one of {}'s", agent.agent))
            }
            Err(e) => SignatureOutcome::Invalid(format!("{e:?}").chars().take(200).collect()),
        }
    }

    /// Loads every agent's keys once, now (the command line and benchmarks; a server runs
    /// [`WebBotAuth::service`] instead).
    pub async fn load_once(&self) {
        let connector = Connector::new(None);
        for agent in &self.agents {
            let (result, _) = load(agent, &connector).await;
            record(agent, result);
        }
    }

    /// Each configured agent's keys as the refresher last left them.
    pub fn agent_keys(&self) -> Vec<AgentKeys> {
        self.agents
            .iter()
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

    /// The background service loading and refreshing the agents' keys.
    pub fn service(self: &Arc<Self>) -> KeyRefresher {
        KeyRefresher { auth: self.clone() }
    }
}

/// Keeps each agent's keys: directories fetched and refetched before their `max-age` runs out,
/// files read and re-read when they change; the last good keys are kept through failures.
pub struct KeyRefresher {
    auth: Arc<WebBotAuth>,
}

#[async_trait]
impl BackgroundService for KeyRefresher {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        if !self.auth.enabled {
            return;
        }
        let connector = Arc::new(Connector::new(None));
        let watcher = Arc::new(FileWatcher::new());
        let tasks: Vec<_> = self
            .auth
            .agents
            .iter()
            .map(|agent| tokio::spawn(keep_keys(agent.clone(), connector.clone(), watcher.clone())))
            .collect();
        let _ = shutdown.wait_for(|stop| *stop).await;
        for task in tasks {
            task.abort();
        }
    }
}

/// The most keys of one set imported; a directory lists a few (the current key and the next).
const MAX_KEYS: usize = 64;

/// A JWKS as a keyring of its usable (Ed25519) keys, each under its RFC 7638 thumbprint
/// (computed here from the key, never taken from its `kid`). Keys that cannot be used — other
/// key types (RSA, EC, post-quantum), other curves, malformed members — are skipped one by one:
/// a directory that adds a key of a newer kind must not lose its Ed25519 keys. The crate's own
/// `JSONWebKeySet` would refuse the whole set for one member of an unknown `kty`.
fn keyring(body: &[u8]) -> Result<(KeyRing, usize), String> {
    #[derive(serde::Deserialize)]
    struct Set {
        keys: Vec<serde_json::Value>,
    }
    let set: Set =
        serde_json::from_slice(body).map_err(|e| format!("not a JSON Web Key Set: {e}"))?;
    let mut keys = KeyRing::default();
    let mut usable = 0;
    for member in set.keys.into_iter().take(MAX_KEYS) {
        let Ok(jwk) = serde_json::from_value::<Thumbprintable>(member) else {
            continue;
        };
        if matches!(&jwk, Thumbprintable::OKP { crv, .. } if crv == "Ed25519")
            && keys.try_import_jwk(&jwk).is_ok()
        {
            usable += 1;
        }
    }
    if usable == 0 {
        return Err("no Ed25519 key in the set".into());
    }
    Ok((keys, usable))
}

async fn keep_keys(agent: Arc<Agent>, connector: Arc<Connector>, watcher: Arc<FileWatcher>) {
    let changes = match &agent.source {
        KeysSource::File(path) => Some(watcher.subscribe(path)),
        KeysSource::Directory(_) => None,
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
            // Fetched again a little before the directory says it expires.
            ttl.mul_f64(0.9)
        } else {
            FIRST_RETRY
                .saturating_mul(1u32 << (failures - 1).min(16))
                .min(MAX_RETRY)
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

/// Puts a load's keys in force (or keeps the last good ones), and counts and logs it. Failures
/// are logged once per attempt, and attempts back off from 10 s to an hour.
fn record(agent: &Agent, result: Result<(KeyRing, usize), String>) {
    let outcome = match result {
        Ok((keys, count)) => {
            METRICS
                .verify_signature_keys
                .with_label_values(&[&agent.agent])
                .set(i64::try_from(count).unwrap_or(i64::MAX));
            agent.keys.store(Some(Arc::new(keys)));
            let mut status = agent.status.lock().unwrap_or_else(|e| e.into_inner());
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
            tracing::warn!(agent = %agent.agent, "Web Bot Auth keys: {error} ({kept})");
            let mut status = agent.status.lock().unwrap_or_else(|e| e.into_inner());
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
async fn load(
    agent: &Agent,
    connector: &Connector,
) -> (Result<(KeyRing, usize), String>, Duration) {
    match &agent.source {
        KeysSource::Directory(url) => fetch_directory(connector, url, agent.proxy.as_ref()).await,
        KeysSource::File(path) => {
            let path = path.clone();
            let read = tokio::task::spawn_blocking(move || crate::verify::ranges::read_file(&path))
                .await
                .unwrap_or_else(|e| Err(format!("the read did not finish: {e}")));
            (read.and_then(|body| keyring(&body)), MAX_KEYS_TTL)
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

async fn fetch_directory(
    connector: &Connector,
    url: &str,
    proxy: Option<&crate::config::FetchProxy>,
) -> (Result<(KeyRing, usize), String>, Duration) {
    let answer = match get_url(
        connector,
        url,
        &Validators::default(),
        MAX_DIRECTORY_BYTES,
        FETCH_TIMEOUT,
        proxy,
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
    (keyring(&answer.body), ttl)
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

    #[test]
    fn key_sets() {
        let set = br#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs"}]}"#;
        let (keys, count) = keyring(set).unwrap_or_default();
        assert_eq!(count, 1);
        assert!(keys
            .get(&"poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U".to_string())
            .is_some());
        // Keys it cannot use are skipped one by one, not the set.
        let mixed = br#"{"keys":[{"kty":"AKP","alg":"ML-DSA-44","pub":"AAAA"},{"kty":"OKP","crv":"X25519","x":"JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs"},{"kty":"OKP","crv":"Ed25519","x":"short"},"junk",{"kty":"OKP","crv":"Ed25519","x":"JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs","kid":"other"}]}"#;
        let (keys, count) = keyring(mixed).unwrap_or_default();
        assert_eq!(count, 1);
        assert!(keys
            .get(&"poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U".to_string())
            .is_some());
        assert!(keys.get(&"other".to_string()).is_none());
        assert!(keyring(br#"{"keys":[]}"#).is_err());
        assert!(keyring(br#"{"keys":{}}"#).is_err());
        assert!(keyring(b"<html>").is_err());
    }
}
