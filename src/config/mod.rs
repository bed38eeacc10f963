//! Loads robotsguard's YAML config file into checked, ready-to-use settings.
//!
//! Loading never touches the network and reads no file but the config
//! itself and the Redis `url_file` (none at all with [`load_file_only`]): TLS
//! certificates and robots.txt files named in the config are resolved to
//! absolute paths here, and opened by the parts that use them
//! ([`crate::preflight`] checks them all before `serve` starts).
//! Every problem found is reported with `file:line:column`, all in one go.
//!
//! The file format is documented, key by key, in `config/robotsguard.yaml`.

mod address;
pub use address::{normalize_host, normalize_host_bytes};
mod duration;
mod error;
mod origin;
mod preview;
mod reader;
// Public for the binary (`robotsguard config schema|reference`), not an API of its own.
#[doc(hidden)]
pub mod reference;
mod schema;
mod size;
mod state;
pub use state::{Credentials, RedisClient, RedisNode, RedisTopology};
mod template;
mod traps;
mod tree;
mod validate;
mod verify;

pub(crate) use verify::https_origin;
pub use verify::https_origin_of;

#[cfg(test)]
mod tests;

pub use preview::{
    with_origin_fragment, PreviewConfig, DEFAULT_MAX_PATHS_PER_ORIGIN, MAX_FRAGMENT_BYTES,
};

use std::fmt;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::crawlers::{builtin_defs, CatalogueError, Category, CrawlerDef, VerifyData};

pub use error::{ConfigError, ConfigErrors};
pub use template::{render_body, BODY_PLACEHOLDERS};
pub use traps::{DisguisedAction, DisguisedConfig, TrapAction, TrapSecret, TrapsConfig};

/// The whole, checked configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Proxy listeners; never empty.
    pub listen: Vec<Listener>,
    /// The admin server (metrics, health, explain).
    pub admin: AdminConfig,
    /// Bounds on what one client connection may hold, and on connections in all.
    pub limits: Limits,
    /// Peers whose `X-Forwarded-*` headers are believed (load balancers, CDNs).
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// One line per request, when set.
    pub access_log: Option<AccessLog>,
    /// Proxy worker threads; `None` means one per CPU.
    pub threads: Option<usize>,
    /// How long in-flight requests may take to finish on SIGTERM.
    pub shutdown_grace: Duration,
    /// Which crawlers are recognised: the built-in catalogue, generic bots, the operator's own.
    pub crawlers: CrawlersConfig,
    /// Never empty; names and hosts are unique across all origins.
    pub origins: Vec<OriginConfig>,
    /// How crawlers' claims are checked: IP range lists, reverse DNS, Web Bot Auth.
    pub verify: VerifyConfig,
    /// Where Crawl-delay budgets, strike counts, bans and robots.txt reads are kept.
    pub state: StateConfig,
    /// `state.dir`: where this process keeps what must outlive it without a shared store (the
    /// generated trap secret); `None`: the default chain of [`crate::config::DEFAULT_STATE_DIR`].
    pub state_dir: Option<PathBuf>,
    /// What the reports keep (`/reports/*`, the console).
    pub reports: ReportsConfig,
    /// What the preview keeps to replay (`preview`).
    pub preview: PreviewConfig,
    /// The absolute path the config was loaded from (`None` from `load_str`).
    pub source_path: Option<PathBuf>,
}

/// `state`: where Crawl-delay budgets, strike counts, bans and robots.txt reads are kept.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum StateConfig {
    /// In this process only (`backend: memory`, the default).
    #[default]
    Memory,
    /// In a Redis or Valkey server shared by every replica (`backend: redis`).
    Redis(RedisConfig),
}

/// `state.redis`: the shared store.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisConfig {
    /// `redis://[user:password@]host:port/db` (`rediss://` for TLS, or `unix:///path`),
    /// `redis+sentinel://...` or `redis+cluster://...` ([`RedisTopology`]), from `url` or
    /// `url_file`, or a `sentinel` or `cluster` block written in that form.
    pub url: String,
    /// The file the URL was read from, when it came from `url_file`.
    pub url_file: Option<PathBuf>,
    /// Put before every key, so that several deployments can share one server.
    pub prefix: String,
    /// The longest a request waits for the store before deciding from local memory.
    pub timeout: Duration,
    /// The certificates of a `rediss://` connection (a private CA, a client certificate).
    pub tls: Option<RedisTls>,
}

/// `state.redis.tls`: what a `rediss://` connection trusts and presents (absolute paths).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisTls {
    /// PEM certificates of the CAs the server's certificate is checked against, instead of the
    /// system's roots.
    pub ca: Option<PathBuf>,
    /// A PEM certificate chain and private key presented to a server that asks for one (mTLS).
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

impl std::fmt::Debug for RedisConfig {
    // The URL may hold a password: show where it points, not how to log in.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &redacted_url(&self.url))
            .field("url_file", &self.url_file)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("tls", &self.tls)
            .finish()
    }
}

/// `url` without the password, for logs and messages.
pub fn redacted_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let credentials = &url[scheme_end + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme_end + 3], &url[at..]),
                None => format!("{}***{}", &url[..scheme_end + 3], &url[at..]),
            }
        }
        _ => url.to_owned(),
    }
}

/// `verify`: the settings of crawler verification shared by every crawler and origin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyConfig {
    /// How often IP range lists are fetched or re-read.
    pub refresh: Duration,
    /// Whether and from where IP range lists are fetched, and through which proxy.
    pub ranges: RangesConfig,
    /// Reverse DNS lookups.
    pub dns: DnsConfig,
    /// The probe telling whether the resolver reaches public DNS (`verify.dns.probe_name`,
    /// `verify.dns.probe_interval`).
    pub dns_probe: DnsProbe,
    /// HTTP Message Signatures of bots.
    pub web_bot_auth: WebBotAuthConfig,
}

impl Default for VerifyConfig {
    fn default() -> Self {
        VerifyConfig {
            refresh: Duration::from_secs(24 * 3600),
            ranges: RangesConfig::default(),
            dns: DnsConfig::default(),
            dns_probe: DnsProbe::default(),
            web_bot_auth: WebBotAuthConfig::default(),
        }
    }
}

/// `verify.dns.probe_name` and `verify.dns.probe_interval`: a name that must exist, looked up at
/// start and every `interval` (more often while it does not resolve) to tell whether the
/// resolver reaches public DNS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsProbe {
    /// The name looked up (no trailing dot); default `googlebot.com`, whose reverse DNS names
    /// the built-in catalogue checks.
    pub name: String,
    /// How often it is looked up while it resolves; default 60 s.
    pub interval: Duration,
}

impl Default for DnsProbe {
    fn default() -> Self {
        DnsProbe {
            name: "googlebot.com".to_string(),
            interval: Duration::from_secs(60),
        }
    }
}

/// `verify.ranges`: the crawlers' published IP range lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangesConfig {
    /// Whether lists are fetched at all (`false`: claims checked only by reverse DNS and
    /// signatures; crawlers with lists alone stay unverified).
    pub enabled: bool,
    /// A list's URL (as the catalogue or `crawlers.extra` names it) and what to fetch or read
    /// instead: another URL, or `file:` and an absolute path.
    pub mirrors: Vec<(String, String)>,
    /// The HTTP proxy (CONNECT) list and key-directory fetches go through; `None`: direct.
    pub proxy: Option<FetchProxy>,
    /// `verify.ranges.private_origins`: https origins (`https://host[:port]`) whose range lists
    /// a remote catalogue feed may name on a loopback, private or link-local address (the
    /// operator's word that such a list server is its own).
    pub private_origins: Vec<String>,
}

impl Default for RangesConfig {
    fn default() -> Self {
        RangesConfig {
            enabled: true,
            mirrors: Vec::new(),
            proxy: None,
            private_origins: Vec::new(),
        }
    }
}

/// An HTTP proxy reached with CONNECT: `http://[user:password@]host:port`.
#[derive(Clone, PartialEq, Eq)]
pub struct FetchProxy {
    /// The proxy's host (a name or an address, without brackets).
    pub host: String,
    /// Its port.
    pub port: u16,
    /// `Proxy-Authorization` credentials, `user:password` as written (sent as Basic).
    pub credentials: Option<String>,
    /// Where it came from, for messages: `verify.ranges.proxy` or `HTTPS_PROXY`.
    pub from: &'static str,
    /// Hosts reached directly (`NO_PROXY`, with the environment's proxy): a name, a domain
    /// (`.example.com` or `example.com` covers its subdomains), or `*` for all.
    pub bypass: Vec<String>,
}

impl std::fmt::Debug for FetchProxy {
    // The credentials are a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FetchProxy")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("credentials", &self.credentials.as_ref().map(|_| "***"))
            .field("from", &self.from)
            .field("bypass", &self.bypass)
            .finish()
    }
}

impl FetchProxy {
    /// `http://[user:password@]host[:port]` (port 80 when left out); `from` names the setting.
    pub fn parse(text: &str, from: &'static str) -> Result<FetchProxy, String> {
        let url = url::Url::parse(text.trim()).map_err(|e| format!("not a URL: {e}"))?;
        if url.scheme() != "http" {
            return Err(format!(
                "`{}:` proxies are not supported; write http://host:port (a proxy that \
                 tunnels with CONNECT)",
                url.scheme()
            ));
        }
        let host = match url.host() {
            Some(url::Host::Domain(name)) => name.to_string(),
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            None => return Err("names no host".to_string()),
        };
        if !matches!(url.path(), "" | "/") || url.query().is_some() {
            return Err("has a path; write http://host:port".to_string());
        }
        let credentials = (!url.username().is_empty()).then(|| {
            let user = percent_decoded(url.username());
            let password = percent_decoded(url.password().unwrap_or(""));
            format!("{user}:{password}")
        });
        Ok(FetchProxy {
            host,
            port: url.port().unwrap_or(80),
            credentials,
            from,
            bypass: Vec::new(),
        })
    }

    /// The proxy of the environment: `HTTPS_PROXY` (or `https_proxy`), when set and usable,
    /// with the hosts `NO_PROXY` (or `no_proxy`) exempts.
    pub fn from_environment() -> Option<Result<FetchProxy, String>> {
        let variable = |names: [&str; 2]| {
            names
                .iter()
                .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
        };
        let text = variable(["HTTPS_PROXY", "https_proxy"])?;
        Some(FetchProxy::parse(&text, "HTTPS_PROXY").map(|mut proxy| {
            proxy.bypass = variable(["NO_PROXY", "no_proxy"])
                .unwrap_or_default()
                .split(',')
                .map(|host| host.trim().trim_start_matches('.').to_ascii_lowercase())
                .filter(|host| !host.is_empty())
                .collect();
            proxy
        }))
    }

    /// Whether `host` is reached directly (see `bypass`).
    pub fn bypasses(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.bypass.iter().any(|entry| {
            entry == "*"
                || host == *entry
                || host
                    .strip_suffix(entry.as_str())
                    .is_some_and(|rest| rest.ends_with('.'))
        })
    }
}

fn percent_decoded(text: &str) -> String {
    form_urlencoded::parse(format!("x={}", text.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, value)| value.into_owned())
        .unwrap_or_default()
}

/// `verify.dns`: where and how long forward-confirmed reverse DNS lookups go and are kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsConfig {
    /// Whether claims are checked by reverse DNS at all (`false`: by lists and signatures only).
    pub enabled: bool,
    /// Name servers to ask; empty: the system's resolver configuration.
    pub servers: Vec<SocketAddr>,
    /// The longest a request waits for a lookup (the lookup itself goes on and is cached).
    pub timeout: Duration,
    /// How long a confirmed name is kept.
    pub positive_ttl: Duration,
    /// How long "no name" is kept.
    pub negative_ttl: Duration,
    /// Addresses kept at most.
    pub max_entries: usize,
}

impl Default for DnsConfig {
    fn default() -> Self {
        DnsConfig {
            enabled: true,
            servers: Vec::new(),
            timeout: Duration::from_secs(2),
            positive_ttl: Duration::from_secs(24 * 3600),
            negative_ttl: Duration::from_secs(3600),
            max_entries: 100_000,
        }
    }
}

/// `verify.web_bot_auth`: which signing agents are believed, and for which crawler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebBotAuthConfig {
    /// Whether signatures are checked at all.
    pub enabled: bool,
    /// Clock difference tolerated on `created` and `expires`.
    pub max_skew: Duration,
    /// The agents whose signatures identify a crawler.
    pub agents: Vec<SignatureAgent>,
    /// What signatures may change: only labels (`observe`), identification (`optional`), or
    /// identification and a refusal of unsigned claims of signing crawlers (`required`). An
    /// origin's `web_bot_auth.mode` overrides it.
    pub mode: WebBotAuthMode,
    /// Registries of signature-agent cards (`verify.web_bot_auth.registries`), each an https
    /// URL or a `file:` path; their agents join `agents` (which win on the same agent).
    pub registries: Vec<RegistrySource>,
    /// Agents (https origins) not in `agents` whose key directories may be fetched from
    /// non-public addresses (`verify.web_bot_auth.private_agents`): the operator's word that
    /// an agent the catalogue, a feed or a registry names lives inside its network.
    pub private_agents: Vec<String>,
    /// Agents (https origins) whose signatures without a `nonce` are accepted for their whole
    /// validity, from any address (`verify.web_bot_auth.nonceless_agents`): the operator's word
    /// that the agent reuses its signatures, which the drafts give an agent no way to say.
    pub nonceless_agents: Vec<String>,
    /// How long after its `created` a signature without a `nonce` of any other agent is
    /// accepted, and then only from the address that first sent it
    /// (`verify.web_bot_auth.nonceless_window`, default 5 minutes).
    pub nonceless_window: Duration,
}

impl Default for WebBotAuthConfig {
    fn default() -> Self {
        WebBotAuthConfig {
            enabled: true,
            max_skew: Duration::from_secs(60),
            agents: Vec::new(),
            mode: WebBotAuthMode::Optional,
            registries: Vec::new(),
            private_agents: Vec::new(),
            nonceless_agents: Vec::new(),
            nonceless_window: Duration::from_secs(300),
        }
    }
}

/// `verify.web_bot_auth.mode` (and an origin's `web_bot_auth.mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WebBotAuthMode {
    /// Signatures are verified, counted and logged; no decision changes for them.
    Observe,
    /// A valid signature identifies its crawler; a replayed one is refused (429).
    Optional,
    /// As `optional`, and a request claiming a crawler that has a signing agent without a
    /// valid signature is refused (403 with `Accept-Signature`).
    Required,
}

impl WebBotAuthMode {
    /// As the config writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            WebBotAuthMode::Observe => "observe",
            WebBotAuthMode::Optional => "optional",
            WebBotAuthMode::Required => "required",
        }
    }
}

/// Where a registry of signature-agent cards is read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegistrySource {
    /// An http(s) URL.
    Url(String),
    /// A local file (absolute).
    File(PathBuf),
}

/// One `verify.web_bot_auth.agents` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignatureAgent {
    /// The `Signature-Agent` value: an https origin (`https://chatgpt.com`).
    pub agent: String,
    /// The crawler (catalogue name) a valid signature of this agent identifies.
    pub crawler: String,
    /// A JWKS file with the agent's keys (absolute); none: the agent's key directory.
    pub keys: Option<PathBuf>,
}

/// `offenders`: clients that keep fetching what robots.txt disallows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OffendersConfig {
    /// What is done when a client reaches `strikes` within `window`.
    pub action: OffendersAction,
    /// Which requests from a banned address are refused.
    pub scope: BanScope,
    /// Strikes within `window` that ban.
    pub strikes: u32,
    /// The window strikes are counted in (from the first).
    pub window: Duration,
    /// How long a ban lasts.
    pub ban: Duration,
}

impl Default for OffendersConfig {
    fn default() -> Self {
        OffendersConfig {
            action: OffendersAction::Report,
            scope: BanScope::Crawlers,
            strikes: 20,
            window: Duration::from_secs(600),
            ban: Duration::from_secs(3600),
        }
    }
}

/// `offenders.scope`: which requests from a banned address are refused. An address is often
/// shared (a carrier NAT, an office, a load balancer missing from `trusted_proxies`), and a ban
/// must not take the site down for the people behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BanScope {
    /// Requests that identify as a crawler (by the catalogue, a robots.txt name or a generic bot
    /// name) or carry no User-Agent; browsers and the categories the policy passes (apps' HTTP
    /// libraries, monitoring) are proxied.
    Crawlers,
    /// Every request but a read of `/robots.txt`.
    Address,
}

impl BanScope {
    /// The spelling used in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            BanScope::Crawlers => "crawlers",
            BanScope::Address => "address",
        }
    }
}

/// `offenders.action`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OffendersAction {
    /// Ban the client's address on the origin: 403, for the requests `scope` names, on every
    /// path but `/robots.txt`.
    Ban,
    /// Log that it would be banned; ban nothing.
    Report,
    /// Count no strikes.
    Off,
}

impl OffendersAction {
    /// The spelling used in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            OffendersAction::Ban => "ban",
            OffendersAction::Report => "report",
            OffendersAction::Off => "off",
        }
    }
}

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
}

impl Default for CrawlDelayConfig {
    fn default() -> Self {
        CrawlDelayConfig {
            action: CrawlDelayAction::Enforce,
            max: Duration::from_secs(60),
            crawlers: Vec::new(),
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

/// What is done with a request from an impostor: one that claims a crawler whose operator
/// publishes who it is, from an address that is definitely not among it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Impostors {
    /// Refuse it (every path but `/robots.txt`).
    Block,
    /// Pass it as robots.txt decides, but count and log it as `would_block`.
    Report,
    /// Treat it as the crawler it claims to be.
    Ignore,
}

impl Impostors {
    /// The spelling used in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Impostors::Block => "block",
            Impostors::Report => "report",
            Impostors::Ignore => "ignore",
        }
    }
}

/// The admin listener: where it listens and who may use it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AdminConfig {
    /// Where the admin listener listens.
    pub address: SocketAddr,
    /// A file holding the bearer token every admin request but `/healthz` and `/readyz` must
    /// carry (absolute path; read when serving, so a rotated secret applies without restart).
    pub token_file: Option<PathBuf>,
    /// A file holding a read-only token: reports, the console's pages, `/metrics`, `/explain`,
    /// `/bans` and `/robots`, but no action (lifting a ban, refreshing robots.txt).
    pub read_token_file: Option<PathBuf>,
    /// Host names (lower case, no port) the admin listener answers to besides its own
    /// addresses and, when it accepts loopback connections, `localhost`: any other `Host` is
    /// refused (421), which is what keeps DNS rebinding out. Applied by a reload.
    pub hosts: Vec<String>,
}

/// The shortest admin token accepted (bytes): a token is typed into the console's login form
/// and sent as a bearer token, so guessing it must be hopeless.
pub const MIN_ADMIN_TOKEN_BYTES: usize = 16;

/// The reports of the admin endpoint and console (`reports`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReportsConfig {
    /// Violation rows kept per origin and time slice (a heavy-hitters sketch: more distinct
    /// rows than this cost no memory, and counts carry an error bound).
    pub top: usize,
    /// How far back the reports reach.
    pub window: Duration,
}

impl Default for ReportsConfig {
    fn default() -> Self {
        ReportsConfig {
            top: schema::DEFAULT_REPORTS_TOP,
            window: schema::DEFAULT_REPORTS_WINDOW,
        }
    }
}

/// Bounds that keep a client from holding memory, file descriptors or a worker for long.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Limits {
    /// From a request's first byte (or the connection's start) to the end of its header block;
    /// trickling bytes does not extend it. Answered with 408.
    pub header_timeout: Duration,
    /// Total bytes of a request line and headers. Answered with 431.
    pub max_header_bytes: usize,
    /// How long a kept-alive connection (or an HTTP/2 connection with no stream open) may wait
    /// for its next request.
    pub idle_timeout: Duration,
    /// How long a write to a client may make no progress (a client that stops reading, an HTTP/2
    /// stream whose window stays shut) before its request ends: the stream is reset, an HTTP/1
    /// connection closed, and its places under `max_requests_in_flight` are free again. Unset in
    /// the file, it is `idle_timeout`.
    pub write_timeout: Duration,
    /// From the end of a request's headers to the end of its body.
    pub body_timeout: Duration,
    /// Downstream connections at once; `None` derives it from the open-files limit at start.
    pub max_connections: Option<usize>,
    /// From a TLS connection's start to the end of its handshake; trickling does not extend it.
    pub handshake_timeout: Duration,
    /// HTTP/2 streams one connection may have open at once (advertised in its SETTINGS); more
    /// are refused with `REFUSED_STREAM`.
    pub max_streams_per_connection: u32,
    /// Requests (HTTP/1 requests and HTTP/2 streams) being served at once in the process; more
    /// are refused (`REFUSED_STREAM`, or `503` on HTTP/1). `None` derives it at start from
    /// `max_connections` and the open-files limit.
    pub max_requests_in_flight: Option<usize>,
    /// Places under `max_requests_in_flight` one client (an IPv4 address, an IPv6 /64; each
    /// connection of a trusted proxy that sends no PROXY header) may hold at once; more are
    /// refused like requests past the process cap. `None`: an eighth of the process cap, at
    /// least 8. Equal to the process cap, sharing is off.
    pub max_requests_in_flight_per_client: Option<usize>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(10),
            max_header_bytes: 32 * 1024,
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(60),
            max_connections: None,
            handshake_timeout: Duration::from_secs(10),
            max_streams_per_connection: 100,
            max_requests_in_flight: None,
            max_requests_in_flight_per_client: None,
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

/// How request paths are read for the decision and what the origin is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PathsConfig {
    /// What `%2F` and `%5C` mean (`paths.escaped_slashes`).
    pub escaped_slashes: EscapedSlashes,
    /// Which target the origin receives (`paths.forward`).
    pub forward: Forward,
}

impl Default for PathsConfig {
    fn default() -> Self {
        PathsConfig {
            escaped_slashes: EscapedSlashes::Decode,
            forward: Forward::Canonical,
        }
    }
}

/// What `%2F` and `%5C` in a request path mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EscapedSlashes {
    /// They are slashes (as nginx, Apache and most frameworks read them): decoded before dot
    /// segments are removed and slashes merged.
    Decode,
    /// Paths holding them are refused with 400.
    Reject,
    /// They are data, not separators (for origins that route on encoded slashes).
    Keep,
}

impl EscapedSlashes {
    /// The spelling used in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            EscapedSlashes::Decode => "decode",
            EscapedSlashes::Reject => "reject",
            EscapedSlashes::Keep => "keep",
        }
    }
}

/// Which request target the origin receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Forward {
    /// The canonical path and query the decision was made on.
    Canonical,
    /// The client's bytes; the decision is then the most restrictive over every reading an
    /// origin could take of them.
    Original,
}

impl Forward {
    /// The spelling used in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Forward::Canonical => "canonical",
            Forward::Original => "original",
        }
    }
}

/// A socket the proxy accepts connections on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Listener {
    /// Where it listens.
    pub address: SocketAddr,
    /// Set when this listener terminates TLS.
    pub tls: Option<ListenerTls>,
    /// Every connection starts with a PROXY protocol (v1 or v2) header naming the client.
    pub proxy_protocol: bool,
    /// HTTP/2: offered by ALPN beside HTTP/1.1 on a TLS listener (`tls.http2`, default on);
    /// accepted with prior knowledge (h2c) beside HTTP/1.1 on a plain one (`http2`, default off).
    pub http2: bool,
}

/// `access_log`: one line per request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AccessLog {
    /// How lines are written.
    pub format: AccessLogFormat,
    /// Where: `None` beside the other log lines (stderr), else apart from them.
    pub path: Option<AccessLogPath>,
}

/// Where access lines go when they are kept apart from the other log lines.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AccessLogPath {
    /// Standard output (`path: stdout`).
    Stdout,
    /// A file, appended to and opened again on SIGHUP or SIGUSR1 (for log rotation); absolute.
    File(PathBuf),
}

/// How access log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessLogFormat {
    /// One JSON object per line.
    Json,
    /// `key=value` pairs, like the text log.
    Text,
}

/// Time limits towards an origin's upstreams.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UpstreamTimeouts {
    /// Establishing a connection (TCP, and TLS when used).
    pub connect: Duration,
    /// Waiting for the upstream between reads (a hung upstream is answered 504 after this).
    pub read: Duration,
    /// Waiting for the upstream to take a write.
    pub write: Duration,
    /// How long an idle pooled connection is kept for reuse.
    pub idle: Duration,
}

impl Default for UpstreamTimeouts {
    fn default() -> Self {
        UpstreamTimeouts {
            connect: Duration::from_secs(5),
            read: Duration::from_secs(60),
            write: Duration::from_secs(60),
            idle: Duration::from_secs(60),
        }
    }
}

/// How failing upstreams are noticed and skipped.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UpstreamHealth {
    /// Consecutive failures (connection refused or timed out, upstream timeouts) after which an
    /// upstream is skipped.
    pub failures: u32,
    /// How long a failed upstream is skipped before it is tried again.
    pub cooloff: Duration,
    /// Active checks: `GET path` every `interval`, when set.
    pub check: Option<HealthCheck>,
    /// How often upstream DNS names are resolved again.
    pub dns_refresh: Duration,
}

impl Default for UpstreamHealth {
    fn default() -> Self {
        UpstreamHealth {
            failures: 3,
            cooloff: Duration::from_secs(10),
            check: None,
            dns_refresh: Duration::from_secs(30),
        }
    }
}

/// An active health check of each upstream.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HealthCheck {
    /// Path requested; any 2xx or 3xx answer is healthy.
    pub path: String,
    /// Time between two checks of one upstream.
    pub interval: Duration,
}

/// A TLS listener's certificates: `tls: {cert, key}` or `tls: {certs: [{cert, key}, ...]}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ListenerTls {
    /// The certificates, picked by the name a client asks for (SNI); the first is the default.
    pub certs: Vec<CertificatePair>,
}

/// A certificate chain and its private key (PEM files). Absolute paths; the files are not opened
/// at load time.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CertificatePair {
    /// The certificate chain, leaf first.
    pub cert: PathBuf,
    /// The private key.
    pub key: PathBuf,
}

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

/// What happens to a crawler request that robots.txt disallows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// Refuse it with the block response.
    Enforce,
    /// Proxy it, but log and count it as a violation.
    Report,
    /// Proxy everything; robots.txt is not consulted.
    Off,
}

impl Mode {
    /// The spelling used in the config, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Report => "report",
            Mode::Off => "off",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The response sent for a blocked request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockConfig {
    /// 400..=599.
    pub status: u16,
    /// A template using only [`BODY_PLACEHOLDERS`] as `{name}`; other
    /// braces are literal. `None` means the built-in body.
    pub body: Option<String>,
    /// `block.license_url`: where a `402` answer's `Link: <url>; rel="license"` points; absent,
    /// robots.txt's `License:` line does.
    pub license_url: Option<String>,
}

/// How an origin's robots.txt is obtained and kept fresh.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RobotsConfig {
    /// Where robots.txt comes from.
    pub source: RobotsSource,
    /// How often to fetch or re-read it.
    pub refresh: Duration,
    /// Limit for one fetch.
    pub timeout: Duration,
    /// What to assume while no robots.txt could be obtained.
    pub on_unreachable: OnUnreachable,
    /// Bytes of robots.txt that are read and parsed; at least 512000.
    pub max_size: usize,
    /// Answer `GET`/`HEAD /robots.txt` with the copy in force instead of proxying it.
    pub serve: bool,
}

/// Where an origin's robots.txt comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RobotsSource {
    /// Fetched from the origin's upstream. `url` overrides the location: a
    /// path (`/robots.txt` is the default) or an absolute http(s) URL.
    Origin {
        /// `robots.url`, when set.
        url: Option<String>,
    },
    /// Read from a local file (absolute path; existence is checked when it
    /// is read, not at load).
    File {
        /// The file.
        path: PathBuf,
    },
    /// Written in the config.
    Inline {
        /// The robots.txt text.
        text: String,
    },
}

/// What to assume when robots.txt cannot be obtained (network error,
/// timeout, 5xx). RFC 9309 section 2.3.1.4 says to assume complete
/// disallow; `allow` is the fail-open choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OnUnreachable {
    /// Crawlers may fetch nothing (RFC 9309's default).
    Disallow,
    /// Crawlers may fetch everything (fail open).
    Allow,
}

impl OnUnreachable {
    /// The spelling used in the config and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            OnUnreachable::Disallow => "disallow",
            OnUnreachable::Allow => "allow",
        }
    }
}

impl fmt::Display for OnUnreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One site behind the proxy, with `defaults` already merged in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OriginConfig {
    /// Unique; `[A-Za-z0-9_.-]+`, used as a metric label.
    pub name: String,
    /// Lower-case, without trailing dot or port; unique across origins.
    /// Bracketed IPv6 literals (`[::1]`) are as a Host header writes them.
    pub hosts: Vec<String>,
    /// Never empty; requests are spread round-robin.
    pub upstreams: Vec<Upstream>,
    /// Set when the upstream is reached over TLS.
    pub upstream_tls: Option<UpstreamTls>,
    /// Whether disallowed crawler requests are blocked, reported or not looked at.
    pub mode: Mode,
    /// The answer to a blocked request.
    pub block: BlockConfig,
    /// How robots.txt is obtained and kept fresh.
    pub robots: RobotsConfig,
    /// How request paths are read and forwarded.
    pub paths: PathsConfig,
    /// Connect, read, write and idle limits towards the upstream.
    pub upstream_timeouts: UpstreamTimeouts,
    /// Passive and active health checks, and DNS refresh.
    pub upstream_health: UpstreamHealth,
    /// Who is bound by robots.txt, and who is passed or blocked regardless.
    pub policy: PolicyConfig,
    /// What is done with impostors of verifiable crawlers.
    pub impostors: Impostors,
    /// Whether robots.txt's `Crawl-delay` is enforced as a rate limit, and its cap.
    pub crawl_delay: CrawlDelayConfig,
    /// What robots.txt's `Content-Signal` and `Content-Usage` lines do.
    pub content_signals: ContentSignalsConfig,
    /// Bans for clients that keep fetching what robots.txt disallows.
    pub offenders: OffendersConfig,
    /// `web_bot_auth.mode` for this origin (or `defaults`); `None`: `verify.web_bot_auth.mode`.
    pub web_bot_auth: Option<WebBotAuthMode>,
    /// Trap paths in the robots.txt served, and what a hit does.
    pub traps: TrapsConfig,
    /// Clients without a crawler's User-Agent that read robots.txt and take what it forbids.
    pub disguised: DisguisedConfig,
}

/// The default `state.dir`, tried after `$STATE_DIRECTORY` (systemd's `StateDirectory=`) and
/// before `$XDG_STATE_HOME/robotsguard` (or `~/.local/state/robotsguard`): the first one that
/// can be written is used.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/robotsguard";

/// An upstream server address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Upstream {
    /// An IP address (IPv6 without brackets) or a lower-case DNS name.
    pub host: String,
    /// The TCP port.
    pub port: u16,
    /// As written in the config, for logs.
    pub raw: String,
}

/// TLS towards the upstream.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UpstreamTls {
    /// The server name sent and verified; defaults to the origin's first host.
    pub sni: String,
    /// Verify the upstream's certificate; default true.
    pub verify: bool,
    /// PEM certificates of the CAs the upstream's certificate is checked against, instead of
    /// the system's roots (a private CA); absolute.
    pub ca: Option<PathBuf>,
    /// A PEM certificate chain and private key robotsguard presents to origins that ask for
    /// one (mTLS); absolute, both or neither.
    pub client_cert: Option<(PathBuf, PathBuf)>,
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

/// Reads and checks a config file. Relative paths inside it are resolved
/// against the file's directory.
pub fn load_file(path: &Path) -> Result<Config, ConfigErrors> {
    load_file_with(path, false)
}

/// [`load_file`] opening no file but the config: the Redis `url_file` is not read (the
/// returned config's `state.redis.url` is then empty), as `validate --config-only` checks a
/// config rendered for another machine, where its secrets are not mounted.
pub fn load_file_only(path: &Path) -> Result<Config, ConfigErrors> {
    load_file_with(path, true)
}

fn load_file_with(path: &Path, config_only: bool) -> Result<Config, ConfigErrors> {
    let file_name = path.display().to_string();
    let text = read_text(path).map_err(|(pos, message)| {
        ConfigErrors(vec![ConfigError {
            file: file_name.clone(),
            line: pos.line,
            column: pos.column,
            message,
            hint: None,
        }])
    })?;
    // Resolve against an absolute directory now, so a later change of
    // working directory (daemonising) cannot change what paths mean.
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let base_dir = absolute.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut config = load_text(&text, &file_name, &base_dir, config_only)?;
    config.source_path = Some(absolute);
    Ok(config)
}

/// Checks config text. `file_name` prefixes error messages; relative paths
/// are resolved against `base_dir`.
pub fn load_str(text: &str, file_name: &str, base_dir: &Path) -> Result<Config, ConfigErrors> {
    load_text(text, file_name, base_dir, false)
}

fn load_text(
    text: &str,
    file_name: &str,
    base_dir: &Path,
    config_only: bool,
) -> Result<Config, ConfigErrors> {
    let root = tree::parse(text).map_err(|(pos, message)| {
        ConfigErrors(vec![ConfigError {
            file: file_name.to_owned(),
            line: pos.line,
            column: pos.column,
            message,
            hint: None,
        }])
    })?;
    let mut sink = error::Sink::new(file_name);
    sink.config_only = config_only;
    let config = validate::build(&root, &mut sink, base_dir);
    if sink.is_empty() {
        Ok(config)
    } else {
        Err(sink.into_errors())
    }
}

/// Something a config may say that `serve` accepts but that is probably not meant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigWarning {
    /// What kind of problem: the `kind` label of `robotsguard_config_warnings_total`.
    pub kind: &'static str,
    /// One sentence saying what and where.
    pub text: String,
}

impl std::fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Every `kind` a [`ConfigWarning`] has (the metric's series exist from the start).
pub const WARNING_KINDS: [&str; 2] = [WARNING_PROXY_PROTOCOL, WARNING_SEARCH_REFUSED];

/// A PROXY-protocol listener no peer may use: `trusted_proxies` is empty.
pub const WARNING_PROXY_PROTOCOL: &str = "proxy_protocol_untrusted";

/// An origin refuses a catalogue search crawler on every path.
pub const WARNING_SEARCH_REFUSED: &str = "search_crawler_refused";

/// What is allowed but probably not meant in `config` alone, one sentence each (`validate`
/// prints them, `serve` and every reload log them); [`crate::enforce::config_warnings`] adds
/// those that need the crawler catalogue.
pub fn warnings(config: &Config) -> Vec<ConfigWarning> {
    let mut warnings = Vec::new();
    if config.trusted_proxies.is_empty() {
        for listener in config.listen.iter().filter(|l| l.proxy_protocol) {
            warnings.push(ConfigWarning {
                kind: WARNING_PROXY_PROTOCOL,
                text: format!(
                    "listener {} has `proxy_protocol: true` but `trusted_proxies` is empty: a \
                     PROXY header is believed only from a trusted peer, so every connection to \
                     it is refused; list the load balancer's addresses in `trusted_proxies`",
                    listener.address
                ),
            });
        }
    }
    warnings
}

/// A setting applied once at start: listening sockets, the connection limit, the thread pool
/// and pingora's grace period are set up when the server is built.
struct RestartOnly {
    name: &'static str,
    differs: fn(&Config, &Config) -> bool,
    /// Copies the running value into a new config.
    keep: fn(&mut Config, &Config),
}

/// The names of the restart-only settings (`listen`, `state`, `limits.max_connections`, …).
pub(crate) fn restart_only_names() -> Vec<&'static str> {
    RESTART_ONLY.iter().map(|s| s.name).collect()
}

/// The restart-only settings in words, the one list every text naming them is written from (the
/// configuration reference, the reload and Kubernetes pages, the chart's alert, the metric's
/// notes): `` `listen`, `admin`, … and `state.dir` `` in Markdown, else without the backticks.
pub fn restart_only_list(markdown: bool) -> String {
    let names: Vec<String> = RESTART_ONLY
        .iter()
        .map(|setting| {
            if markdown {
                format!("`{}`", setting.name)
            } else {
                setting.name.to_string()
            }
        })
        .collect();
    match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Every restart-only setting, in the order they are reported.
const RESTART_ONLY: &[RestartOnly] = &[
    RestartOnly {
        name: "listen",
        differs: |old, new| old.listen != new.listen,
        keep: |new, running| new.listen.clone_from(&running.listen),
    },
    // The listener and its tokens are set up at start; `admin.hosts` is read per request from
    // the config in force, so a reload applies it.
    RestartOnly {
        name: "admin.address",
        differs: |old, new| old.admin.address != new.admin.address,
        keep: |new, running| new.admin.address = running.admin.address,
    },
    RestartOnly {
        name: "admin.token_file",
        differs: |old, new| old.admin.token_file != new.admin.token_file,
        keep: |new, running| new.admin.token_file.clone_from(&running.admin.token_file),
    },
    RestartOnly {
        name: "admin.read_token_file",
        differs: |old, new| old.admin.read_token_file != new.admin.read_token_file,
        keep: |new, running| {
            new.admin
                .read_token_file
                .clone_from(&running.admin.read_token_file);
        },
    },
    RestartOnly {
        name: "limits.max_connections",
        differs: |old, new| old.limits.max_connections != new.limits.max_connections,
        keep: |new, running| new.limits.max_connections = running.limits.max_connections,
    },
    RestartOnly {
        name: "limits.max_requests_in_flight",
        differs: |old, new| old.limits.max_requests_in_flight != new.limits.max_requests_in_flight,
        keep: |new, running| {
            new.limits.max_requests_in_flight = running.limits.max_requests_in_flight;
        },
    },
    RestartOnly {
        name: "limits.max_requests_in_flight_per_client",
        differs: |old, new| {
            old.limits.max_requests_in_flight_per_client
                != new.limits.max_requests_in_flight_per_client
        },
        keep: |new, running| {
            new.limits.max_requests_in_flight_per_client =
                running.limits.max_requests_in_flight_per_client;
        },
    },
    RestartOnly {
        name: "threads",
        differs: |old, new| old.threads != new.threads,
        keep: |new, running| new.threads = running.threads,
    },
    RestartOnly {
        name: "shutdown.grace",
        differs: |old, new| old.shutdown_grace != new.shutdown_grace,
        keep: |new, running| new.shutdown_grace = running.shutdown_grace,
    },
    RestartOnly {
        name: "verify",
        differs: |old, new| old.verify != new.verify,
        keep: |new, running| new.verify.clone_from(&running.verify),
    },
    RestartOnly {
        name: "reports",
        differs: |old, new| old.reports != new.reports,
        keep: |new, running| new.reports = running.reports,
    },
    RestartOnly {
        name: "preview",
        differs: |old, new| old.preview != new.preview,
        keep: |new, running| new.preview = running.preview,
    },
    RestartOnly {
        name: "state",
        differs: |old, new| old.state != new.state,
        keep: |new, running| new.state.clone_from(&running.state),
    },
    RestartOnly {
        name: "state.dir",
        differs: |old, new| old.state_dir != new.state_dir,
        keep: |new, running| new.state_dir.clone_from(&running.state_dir),
    },
];

/// The settings that differ between `old` and `new` but only take effect on restart.
pub fn restart_required(old: &Config, new: &Config) -> Vec<&'static str> {
    RESTART_ONLY
        .iter()
        .filter(|setting| (setting.differs)(old, new))
        .map(|setting| setting.name)
        .collect()
}

/// Puts the running values of every restart-only setting into `new`; returns the ones `new`
/// had changed (as [`restart_required`] names them).
pub fn keep_restart_only(new: &mut Config, running: &Config) -> Vec<&'static str> {
    let changed = restart_required(running, new);
    for setting in RESTART_ONLY {
        (setting.keep)(new, running);
    }
    changed
}

/// Reads a file that holds one secret (a token, a URL with a password): its content without
/// surrounding whitespace, which must not be empty, reading at most `max_bytes`.
pub fn read_secret_file(path: &Path, max_bytes: u64) -> Result<String, SecretFileError> {
    let failed = |why| SecretFileError {
        path: path.to_path_buf(),
        why,
    };
    let file = std::fs::File::open(path).map_err(|e| failed(SecretProblem::Unreadable(e)))?;
    let mut text = String::new();
    file.take(max_bytes + 1)
        .read_to_string(&mut text)
        .map_err(|e| failed(SecretProblem::Unreadable(e)))?;
    if text.len() as u64 > max_bytes {
        return Err(failed(SecretProblem::TooLarge(max_bytes)));
    }
    let secret = text.trim();
    if secret.is_empty() {
        return Err(failed(SecretProblem::Empty));
    }
    Ok(secret.to_owned())
}

/// Reads an admin token file: [`read_secret_file`], and the token at least
/// [`MIN_ADMIN_TOKEN_BYTES`] long.
pub fn read_admin_token(path: &Path) -> Result<String, SecretFileError> {
    let token = read_secret_file(path, validate::MAX_ADMIN_TOKEN_FILE_BYTES)?;
    if token.len() < MIN_ADMIN_TOKEN_BYTES {
        return Err(SecretFileError {
            path: path.to_path_buf(),
            why: SecretProblem::TooShort(token.len()),
        });
    }
    Ok(token)
}

/// Why a file holding a secret (a token, a URL with a password) could not be used. Its text
/// names the file, never the secret.
#[derive(Debug)]
pub struct SecretFileError {
    path: PathBuf,
    why: SecretProblem,
}

#[derive(Debug)]
enum SecretProblem {
    Unreadable(std::io::Error),
    TooLarge(u64),
    Empty,
    /// An admin token shorter than [`MIN_ADMIN_TOKEN_BYTES`] (its length).
    TooShort(usize),
}

impl SecretFileError {
    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl std::fmt::Display for SecretFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = self.path.display();
        match &self.why {
            SecretProblem::Unreadable(e) => write!(f, "cannot read `{path}`: {e}"),
            SecretProblem::TooLarge(max) => write!(f, "`{path}` is larger than {max} bytes"),
            SecretProblem::Empty => write!(f, "`{path}` is empty"),
            SecretProblem::TooShort(bytes) => write!(
                f,
                "the token in `{path}` is {bytes} bytes long; an admin token must have at least {MIN_ADMIN_TOKEN_BYTES} (make one with `openssl rand -hex 32`)"
            ),
        }
    }
}

impl std::error::Error for SecretFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.why {
            SecretProblem::Unreadable(e) => Some(e),
            _ => None,
        }
    }
}

/// Reads the file as UTF-8, refusing files over the size limit without
/// reading them whole.
fn read_text(path: &Path) -> Result<String, (error::Pos, String)> {
    let file = std::fs::File::open(path)
        .map_err(|e| (error::Pos::UNKNOWN, format!("cannot open the config: {e}")))?;
    let limit = tree::MAX_INPUT_BYTES;
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| (error::Pos::UNKNOWN, format!("cannot read the config: {e}")))?;
    if bytes.len() > limit {
        return Err((
            error::Pos::UNKNOWN,
            format!("the config is larger than the limit of {limit} bytes"),
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        // The prefix is valid UTF-8 by definition; count lines and chars in it.
        let valid = std::str::from_utf8(valid).unwrap_or_default();
        let line = valid.matches('\n').count() + 1;
        let column = valid.rsplit('\n').next().unwrap_or("").chars().count() + 1;
        (
            error::Pos::new(line, column),
            "the config is not valid UTF-8".to_owned(),
        )
    })
}
