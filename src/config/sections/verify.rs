//! The config of crawler verification: the top-level `verify` section, a crawler's own
//! `verify` data (`crawlers.extra[].verify`), and the `impostors` action.

use super::*;

pub(crate) static VERIFY: Section = Section {
    id: "verify",
    place: "in `verify`",
    title: "Crawler verification",
    doc: "How a User-Agent's claim to be a crawler is checked. Offline (no lists, no DNS) everything is `unverified`, and nothing is refused that would not be without verification.",
    keys: &[
        key("refresh", Ty::Duration, "`24h`", "How often the range lists are fetched again (conditional requests; at least `1s`)."),
        key("ranges", Ty::Section(&VERIFY_RANGES), "", "The operators' published IP range lists."),
        key("dns", Ty::Section(&VERIFY_DNS), "", "Forward-confirmed reverse DNS."),
        key("web_bot_auth", Ty::Section(&WEB_BOT_AUTH), "", "HTTP Message Signatures (Web Bot Auth)."),
    ],
};

pub(crate) static VERIFY_RANGES: Section = Section {
    id: "verify_ranges",
    place: "in `verify.ranges`",
    title: "Range lists",
    doc: "",
    keys: &[
        key("enabled", Ty::Bool, "`true`", "`false`: crawlers checked by lists alone stay `unverified`."),
        key("mirrors", Ty::MapOf { keys: None, value: &Ty::Str }, "`{}`", "A list's URL → another URL, or a `file:` path you keep up to date (re-read when it changes). The URL must be one some crawler's `verify.ips` names."),
        key("proxy", Ty::Url, "`HTTPS_PROXY`, minus the hosts `NO_PROXY` names", "An HTTP proxy (CONNECT) for the list and key directory fetches."),
        key("private_origins", Ty::List(&Ty::Url), "`[]`", "https origins (`https://host[:port]`) whose range lists a catalogue feed fetched over the network may name on a loopback, private or link-local address (a list server inside your network). Any other list such a feed names is fetched over https from public addresses only, every redirect checked again; a list that fails the check is not fetched (`robotsguard_verify_list_fetches_total{outcome=\"refused\"}`)."),
    ],
};

pub(crate) static VERIFY_DNS: Section = Section {
    id: "verify_dns",
    place: "in `verify.dns`",
    title: "Reverse DNS",
    doc: "",
    keys: &[
        key("enabled", Ty::Bool, "`true`", "`false`: crawlers checked by DNS alone stay `unverified`."),
        key("servers", Ty::OneOrList(&Ty::Str), "the system resolver, without `/etc/hosts`", "Resolvers (`IP` or `IP:PORT`), UDP and TCP."),
        key("timeout", Ty::Duration, "`2s`", "The longest the first request from an address waits for its lookup (the lookup goes on)."),
        key("positive_ttl", Ty::Duration, "`24h`", "How long a confirmed name is cached."),
        key("negative_ttl", Ty::Duration, "`1h`", "How long \"no name\" is cached (failures: 30 s, or this if shorter)."),
        key("max_entries", Ty::Int { min: 1, max: 10_000_000 }, "`100000`", "Addresses cached; a full cache drops expired answers first."),
        key("probe_name", Ty::Str, "`googlebot.com`", "A name that must exist in public DNS, looked up at start and every `probe_interval` to tell whether the resolver reaches public DNS. A resolver that does not answer it (silence, `SERVFAIL`, `REFUSED`) gets no lookups until it does; one that answers `NXDOMAIN` does not see public DNS. Either way reverse DNS verification reports itself unavailable (`robotsguard_verify_dns_available` 0, one log line, `/explain`'s `reverse_dns`) and its claims stay `unverified`."),
        key("probe_interval", Ty::Duration, "`60s`", "How often the probe runs while the name resolves (at least `1s`); every 5 s at most while it does not, so verification resumes soon after the resolver does."),
    ],
};

pub(crate) static WEB_BOT_AUTH: Section = Section {
    id: "web_bot_auth",
    place: "in `verify.web_bot_auth`",
    title: "Web Bot Auth",
    doc: "A request signed by a listed agent (RFC 9421 as the webbotauth draft profiles it) is `verified` as the agent's crawler, whatever its User-Agent.",
    keys: &[
        key("enabled", Ty::Bool, "`true`", "Check signatures."),
        key("max_skew", Ty::Duration, "`60s`", "How far `created`/`expires` may be from now (at most `1h`)."),
        key("agents", Ty::List(&Ty::Section(&SIGNATURE_AGENT)), "`[]`", "The signing agents trusted."),
        key("mode", WEB_BOT_AUTH_MODE_WORDS, "`optional`", "What signatures may change: `observe` (verified and counted, no decision changed), `optional` (a valid signature identifies its crawler; a replayed nonce gets `429`), `required` (also: a request claiming a crawler that has a signing agent and carrying no valid signature gets `403` with `Accept-Signature`). An origin or `defaults` may set its own."),
        key("registries", Ty::List(&Ty::Str), "`[]`", "Registries of signature-agent cards (an https URL or `file:path`; one card URL a line, `#` comments; cards `https:`, `data:`, or `file:` in a `file:` registry), whose agents join `agents` (which win); read at start and every `verify.refresh`, the last good copy kept."),
        key("private_agents", Ty::List(&Ty::Url), "`[]`", "Agents (https origins) the catalogue, a feed or a registry names whose key directory may be fetched from a loopback, private or link-local address (an agent inside your network). Any other agent not in `agents` is fetched from public addresses only."),
        key("nonceless_agents", Ty::List(&Ty::Url), "`[]`", "Agents (https origins) whose signatures without a `nonce` are accepted for their whole validity, from any address: your word that the agent reuses its signatures (the drafts give an agent no way to say so). Any other agent's nonce-less signature is accepted only within `nonceless_window` of its `created` and only from the address that first sent it; a later or cross-address replay gets `429` with a fresh `Accept-Signature`."),
        key("nonceless_window", Ty::Duration, "`5m`", "How long after its `created` (plus `max_skew`) a signature without a `nonce` is accepted, for agents not in `nonceless_agents` (1s to 1h)."),
    ],
};

pub(crate) static ORIGIN_WEB_BOT_AUTH: Section = Section {
    id: "origin_web_bot_auth",
    place: "in `web_bot_auth` (of an origin or `defaults`)",
    title: "Web Bot Auth per origin",
    doc: "An origin's (or `defaults`') own Web Bot Auth mode.",
    keys: &[key(
        "mode",
        WEB_BOT_AUTH_MODE_WORDS,
        "from `verify.web_bot_auth.mode`",
        "`observe`, `optional` or `required`, as `verify.web_bot_auth.mode`.",
    )],
};

pub(crate) static SIGNATURE_AGENT: Section = Section {
    id: "signature_agent",
    place: "in a `web_bot_auth` agent",
    title: "A signing agent",
    doc: "",
    keys: &[
        required("agent", Ty::Url, "The `Signature-Agent` origin (https), whose `/.well-known/http-message-signatures-directory` holds its keys."),
        required("crawler", Ty::Str, "The catalogue crawler a valid signature proves."),
        key("keys", Ty::Str, "the agent's key directory", "A `file:` JWKS instead of the directory (re-read when it changes)."),
    ],
};

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
    pub fn parse(text: &str, from: &'static str) -> Result<FetchProxy, ProxyUrlError> {
        let url =
            url::Url::parse(text.trim()).map_err(|e| ProxyUrlError::NotAUrl(e.to_string()))?;
        if url.scheme() != "http" {
            return Err(ProxyUrlError::Scheme(url.scheme().to_owned()));
        }
        let host = match url.host() {
            Some(url::Host::Domain(name)) => name.to_string(),
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            None => return Err(ProxyUrlError::NoHost),
        };
        if !matches!(url.path(), "" | "/") || url.query().is_some() {
            return Err(ProxyUrlError::HasPath);
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
    pub fn from_environment() -> Option<Result<FetchProxy, ProxyUrlError>> {
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

/// Why a proxy URL (`verify.ranges.proxy`, `HTTPS_PROXY`) cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProxyUrlError {
    /// Not a URL at all (the parser's reason).
    NotAUrl(String),
    /// A scheme other than `http:` (this one).
    Scheme(String),
    /// No host to connect to.
    NoHost,
    /// A path or query, which a proxy address does not have.
    HasPath,
}

impl fmt::Display for ProxyUrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProxyUrlError::NotAUrl(why) => write!(f, "not a URL: {why}"),
            ProxyUrlError::Scheme(scheme) => write!(
                f,
                "`{scheme}:` proxies are not supported; write http://host:port (a proxy that \
                 tunnels with CONNECT)"
            ),
            ProxyUrlError::NoHost => f.write_str("names no host"),
            ProxyUrlError::HasPath => f.write_str("has a path; write http://host:port"),
        }
    }
}

impl std::error::Error for ProxyUrlError {}

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

/// The spellings of `web_bot_auth.mode`.
pub(crate) const WEB_BOT_AUTH_MODES: [(&str, crate::config::WebBotAuthMode); 3] = [
    ("observe", crate::config::WebBotAuthMode::Observe),
    ("optional", crate::config::WebBotAuthMode::Optional),
    ("required", crate::config::WebBotAuthMode::Required),
];

/// Reads an origin's (or `defaults`') `web_bot_auth` section: its `mode`, if set.
pub(crate) fn web_bot_auth_mode(
    sink: &mut Sink,
    node: Option<&Node>,
) -> Option<crate::config::WebBotAuthMode> {
    let table = node.and_then(|n| {
        Table::read(
            sink,
            n,
            &crate::config::sections::ORIGIN_WEB_BOT_AUTH,
            "`web_bot_auth`",
        )
    })?;
    table
        .get("mode")
        .and_then(|n| reader::choice(sink, n, "mode", &WEB_BOT_AUTH_MODES))
}

/// The most addresses a DNS cache may be told to hold: enough for any site, small enough that
/// a typo cannot let clients grow memory without bound.
const MAX_DNS_ENTRIES: i128 = 10_000_000;

/// Range lists are refreshed at most this often (as robots.txt): operators publish them daily,
/// and a conditional refresh costs them a 304.
const MIN_LIST_REFRESH: Duration = Duration::from_secs(1);

/// The most clock skew accepted on signatures: the draft's lifetimes are minutes to hours.
const MAX_SKEW: Duration = Duration::from_secs(3600);

/// The longest a signature without a nonce may be accepted after its `created`.
const MAX_NONCELESS_WINDOW: Duration = Duration::from_secs(3600);

/// `verify`, over the built-in values. Agents must name crawlers in `known`; mirrors, lists the
/// crawlers of `crawlers` name.
pub(crate) fn verify(
    sink: &mut Sink,
    node: Option<&Node>,
    base_dir: &Path,
    known: &KnownCrawlers,
    crawlers: &crate::config::CrawlersConfig,
) -> VerifyConfig {
    let mut out = VerifyConfig::default();
    let Some(table) = node.and_then(|n| Table::read(sink, n, &VERIFY, "`verify`")) else {
        return out;
    };
    if let Some(n) = table.get("refresh") {
        if let Some(d) = reader::duration(sink, n, "refresh") {
            if d < MIN_LIST_REFRESH {
                sink.error_hint(
                    n.pos,
                    "`verify.refresh` must be at least 1s",
                    "operators update their lists about daily; 24h is the default",
                );
            } else {
                out.refresh = d;
            }
        }
    }
    if let Some(n) = table.get("ranges") {
        out.ranges = ranges(sink, n, base_dir, crawlers);
    }
    if let Some(n) = table.get("dns") {
        (out.dns, out.dns_probe) = dns(sink, n);
    }
    if let Some(n) = table.get("web_bot_auth") {
        out.web_bot_auth = web_bot_auth(sink, n, base_dir, known);
    }
    out
}

fn positive(sink: &mut Sink, table: &Table<'_>, key: &str) -> Option<Duration> {
    let n = table.get(key)?;
    let d = reader::duration(sink, n, key)?;
    if d.is_zero() {
        sink.error(n.pos, format!("`{key}` must be longer than 0s"));
        return None;
    }
    Some(d)
}

/// `verify.ranges: {enabled, mirrors, proxy, private_origins}`. A mirror of a list no crawler of `crawlers`
/// names is an error, since a typo there would leave the real list fetched unnoticed (not
/// checked when the catalogue is broken: that is reported already).
fn ranges(
    sink: &mut Sink,
    node: &Node,
    base_dir: &Path,
    crawlers: &crate::config::CrawlersConfig,
) -> RangesConfig {
    let mut out = RangesConfig::default();
    let Some(table) = Table::read(sink, node, &VERIFY_RANGES, "`verify.ranges`") else {
        return out;
    };
    if let Some(enabled) = table
        .get("enabled")
        .and_then(|n| reader::boolean(sink, n, "enabled"))
    {
        out.enabled = enabled;
    }
    if let Some(n) = table.get("mirrors") {
        // Built only when there are mirrors: reading the catalogue costs more than the rest.
        let lists: Option<Vec<String>> = crawlers.catalogue_defs().ok().map(|defs| {
            defs.into_iter()
                .filter_map(|def| def.verify)
                .flat_map(|verify| verify.ips)
                .collect()
        });
        let lists = lists.as_deref();
        match &n.value {
            Value::Map(entries) => {
                for (key, value) in entries {
                    let Some(list) = reader::nonempty_string(sink, key, "mirrors") else {
                        continue;
                    };
                    if !is_http_url(list) {
                        sink.error_hint(
                            key.pos,
                            format!("{} is not a list URL", quote(list)),
                            "each key is the URL of a crawler's IP range list, as the catalogue \
                             names it (crates/robotsguard-crawlers/crawlers.yaml lists them under `verify: {ips}`)",
                        );
                        continue;
                    }
                    if lists.is_some_and(|lists| !lists.iter().any(|named| named == list)) {
                        sink.error_hint(
                            key.pos,
                            format!("no crawler's `verify.ips` names {}", quote(list)),
                            "mirror a list the catalogue or crawlers.extra names \
                             (crates/robotsguard-crawlers/crawlers.yaml lists them under `verify: {ips}`)",
                        );
                        continue;
                    }
                    if out.mirrors.iter().any(|(known, _)| known == list) {
                        sink.error(key.pos, format!("{} is mirrored twice", quote(list)));
                        continue;
                    }
                    let Some(text) = reader::nonempty_string(sink, value, "mirror") else {
                        continue;
                    };
                    match list_source(text, base_dir) {
                        Ok(mirror) => out.mirrors.push((list.to_owned(), mirror)),
                        Err(why) => sink.error_hint(
                            value.pos,
                            format!("mirror {} {why}", quote(text)),
                            "write an http(s) URL or file:path/to/list.json (relative to this file)",
                        ),
                    }
                }
            }
            other => sink.error_hint(
                n.pos,
                format!("`mirrors` must be a mapping, not {}", other.kind()),
                "e.g. mirrors: {\"https://openai.com/gptbot.json\": \"file:lists/gptbot.json\"}",
            ),
        }
    }
    let private = table
        .get("private_origins")
        .and_then(|n| reader::list(sink, n, "private_origins"))
        .unwrap_or_default();
    for item in private {
        let Some(text) = reader::nonempty_string(sink, item, "private_origins") else {
            continue;
        };
        match https_origin(text) {
            Some(origin) if !out.private_origins.contains(&origin) => {
                out.private_origins.push(origin)
            }
            Some(_) => sink.error(
                item.pos,
                format!("private origin {} is listed twice", quote(text)),
            ),
            None => sink.error_hint(
                item.pos,
                format!("private origin {} is not an https origin", quote(text)),
                "e.g. private_origins: [\"https://lists.internal.example\"]",
            ),
        }
    }
    if let Some(n) = table.get("proxy") {
        if let Some(text) = reader::nonempty_string(sink, n, "proxy") {
            match FetchProxy::parse(text, "verify.ranges.proxy") {
                Ok(proxy) => out.proxy = Some(proxy),
                Err(why) => sink.error_hint(
                    n.pos,
                    format!("proxy {}: {why}", quote(text)),
                    "e.g. proxy: \"http://proxy.internal:3128\"",
                ),
            }
        }
    }
    out
}

fn is_http_url(text: &str) -> bool {
    url::Url::parse(text)
        .is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.host_str().is_some())
}

fn dns(sink: &mut Sink, node: &Node) -> (DnsConfig, DnsProbe) {
    let mut out = DnsConfig::default();
    let mut probe = DnsProbe::default();
    let Some(table) = Table::read(sink, node, &VERIFY_DNS, "`verify.dns`") else {
        return (out, probe);
    };
    if let Some(n) = table.get("probe_name") {
        if let Some(text) = reader::nonempty_string(sink, n, "probe_name") {
            match dns_suffix(text) {
                Some(name) => probe.name = name,
                None => sink.error_hint(
                    n.pos,
                    format!("probe name {} is not a DNS name", quote(text)),
                    "a name that must exist in public DNS, e.g. googlebot.com",
                ),
            }
        }
    }
    if let Some(n) = table.get("probe_interval") {
        if let Some(d) = reader::duration(sink, n, "probe_interval") {
            if d < Duration::from_secs(1) {
                sink.error(n.pos, "`probe_interval` must be at least 1s");
            } else {
                probe.interval = d;
            }
        }
    }
    if let Some(enabled) = table
        .get("enabled")
        .and_then(|n| reader::boolean(sink, n, "enabled"))
    {
        out.enabled = enabled;
    }
    if let Some(n) = table.get("servers") {
        let mut servers = Vec::new();
        for item in reader::one_or_many(n) {
            let Some(text) = reader::nonempty_string(sink, item, "servers") else {
                continue;
            };
            match name_server(text) {
                Some(address) => servers.push(address),
                None => sink.error_hint(
                    item.pos,
                    format!("{} is not a name server address", quote(text)),
                    "write an IP address, optionally with a port: 10.0.0.2, 10.0.0.2:5353, [2001:db8::53]:53",
                ),
            }
        }
        out.servers = servers;
    }
    if let Some(d) = positive(sink, &table, "timeout") {
        out.timeout = d;
    }
    if let Some(d) = positive(sink, &table, "positive_ttl") {
        out.positive_ttl = d;
    }
    if let Some(d) = positive(sink, &table, "negative_ttl") {
        out.negative_ttl = d;
    }
    if let Some(n) = table
        .get("max_entries")
        .and_then(|n| reader::integer(sink, n, "max_entries", 1, MAX_DNS_ENTRIES))
    {
        out.max_entries = usize::try_from(n).unwrap_or(out.max_entries);
    }
    (out, probe)
}

/// `10.0.0.2`, `10.0.0.2:5353`, `2001:db8::53`, `[2001:db8::53]:53`; port 53 by default.
fn name_server(text: &str) -> Option<SocketAddr> {
    if let Ok(address) = text.parse::<SocketAddr>() {
        return Some(address);
    }
    let bare = text.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<std::net::IpAddr>()
        .ok()
        .map(|ip| SocketAddr::new(ip, 53))
}

fn web_bot_auth(
    sink: &mut Sink,
    node: &Node,
    base_dir: &Path,
    known: &KnownCrawlers,
) -> WebBotAuthConfig {
    let mut out = WebBotAuthConfig::default();
    let Some(table) = Table::read(sink, node, &WEB_BOT_AUTH, "`verify.web_bot_auth`") else {
        return out;
    };
    if let Some(enabled) = table
        .get("enabled")
        .and_then(|n| reader::boolean(sink, n, "enabled"))
    {
        out.enabled = enabled;
    }
    if let Some(n) = table.get("max_skew") {
        if let Some(d) = reader::duration(sink, n, "max_skew") {
            if d > MAX_SKEW {
                sink.error(n.pos, "`max_skew` must be at most 1h");
            } else {
                out.max_skew = d;
            }
        }
    }
    if let Some(mode) = table
        .get("mode")
        .and_then(|n| reader::choice(sink, n, "mode", &WEB_BOT_AUTH_MODES))
    {
        out.mode = mode;
    }
    let registries = table
        .get("registries")
        .and_then(|n| reader::list(sink, n, "registries"))
        .unwrap_or_default();
    for item in registries {
        let Some(text) = reader::nonempty_string(sink, item, "registries") else {
            continue;
        };
        let source = match text.strip_prefix("file:") {
            Some(path) if !path.is_empty() => Some(RegistrySource::File(base_dir.join(path))),
            Some(_) => None,
            None => url::Url::parse(text)
                .ok()
                .filter(|url| matches!(url.scheme(), "https" | "http") && url.host().is_some())
                .map(|_| RegistrySource::Url(text.to_string())),
        };
        match source {
            Some(source) if !out.registries.contains(&source) => out.registries.push(source),
            Some(_) => sink.error(
                item.pos,
                format!("registry {} is listed twice", quote(text)),
            ),
            None => sink.error_hint(
                item.pos,
                format!(
                    "registry {} is neither an https URL nor a `file:` path",
                    quote(text)
                ),
                "e.g. registries: [\"https://registry.example/agents.txt\", \"file:agents.txt\"]",
            ),
        }
    }
    let private = table
        .get("private_agents")
        .and_then(|n| reader::list(sink, n, "private_agents"))
        .unwrap_or_default();
    for item in private {
        let Some(text) = reader::nonempty_string(sink, item, "private_agents") else {
            continue;
        };
        match https_origin(text) {
            Some(origin) if !out.private_agents.contains(&origin) => {
                out.private_agents.push(origin)
            }
            Some(_) => sink.error(
                item.pos,
                format!("private agent {} is listed twice", quote(text)),
            ),
            None => sink.error_hint(
                item.pos,
                format!("private agent {} is not an https origin", quote(text)),
                "e.g. private_agents: [\"https://agent.internal.example\"]",
            ),
        }
    }
    let nonceless = table
        .get("nonceless_agents")
        .and_then(|n| reader::list(sink, n, "nonceless_agents"))
        .unwrap_or_default();
    for item in nonceless {
        let Some(text) = reader::nonempty_string(sink, item, "nonceless_agents") else {
            continue;
        };
        match https_origin(text) {
            Some(origin) if !out.nonceless_agents.contains(&origin) => {
                out.nonceless_agents.push(origin)
            }
            Some(_) => sink.error(
                item.pos,
                format!("nonce-less agent {} is listed twice", quote(text)),
            ),
            None => sink.error_hint(
                item.pos,
                format!("nonce-less agent {} is not an https origin", quote(text)),
                "write the Signature-Agent value the bot sends, e.g. https://chatgpt.com",
            ),
        }
    }
    if let Some(n) = table.get("nonceless_window") {
        if let Some(d) = reader::duration(sink, n, "nonceless_window") {
            if d < Duration::from_secs(1) || d > MAX_NONCELESS_WINDOW {
                sink.error_hint(
                    n.pos,
                    "`nonceless_window` must be between 1s and 1h",
                    "a signature without a nonce can be replayed for this long: keep it short (5m is the default)",
                );
            } else {
                out.nonceless_window = d;
            }
        }
    }
    let items = table
        .get("agents")
        .and_then(|n| reader::list(sink, n, "agents"))
        .unwrap_or_default();
    for item in items {
        let Some(agent_table) = Table::read(sink, item, &SIGNATURE_AGENT, "each agent") else {
            continue;
        };
        let agent = match agent_table.get("agent") {
            Some(n) => reader::nonempty_string(sink, n, "agent").and_then(|text| {
                let origin = https_origin(text);
                if origin.is_none() {
                    sink.error_hint(
                        n.pos,
                        format!("agent {} is not an https origin", quote(text)),
                        "write the Signature-Agent value the bot sends, e.g. https://chatgpt.com",
                    );
                }
                origin
            }),
            None => {
                sink.error_hint(
                    agent_table.pos,
                    "agent is missing `agent`",
                    "e.g. agent: \"https://chatgpt.com\"",
                );
                None
            }
        };
        let repeated = agent
            .as_ref()
            .and_then(|agent| out.agents.iter().find(|a| a.agent == *agent));
        if let (Some(agent), Some(first)) = (&agent, repeated) {
            let at = agent_table.key_pos("agent").unwrap_or(agent_table.pos);
            sink.error(
                at,
                format!(
                    "agent {} is listed twice (for {})",
                    quote(agent),
                    first.crawler
                ),
            );
            continue;
        }
        let crawler = match agent_table.get("crawler") {
            Some(n) => reader::nonempty_string(sink, n, "crawler").and_then(|name| {
                let found = known.find(name).map(str::to_owned);
                if found.is_none() {
                    sink.error(
                        n.pos,
                        format!("no crawler is named {}{}", quote(name), known.suggest(name)),
                    );
                }
                found
            }),
            None => {
                sink.error_hint(
                    agent_table.pos,
                    "agent is missing `crawler`",
                    "the crawler a valid signature identifies, e.g. crawler: ChatGPT-Agent",
                );
                None
            }
        };
        let keys = match agent_table.get("keys") {
            Some(n) => match reader::nonempty_string(sink, n, "keys") {
                Some(text) => match text.strip_prefix("file:") {
                    Some(path) if !path.is_empty() => Some(Some(base_dir.join(path))),
                    _ => {
                        sink.error_hint(
                            n.pos,
                            format!("keys {} is not a `file:` path", quote(text)),
                            "e.g. keys: \"file:keys/example.json\" (a JWKS file); leave it out to use the agent's key directory",
                        );
                        None
                    }
                },
                None => None,
            },
            None => Some(None),
        };
        if let (Some(agent), Some(crawler), Some(keys)) = (agent, crawler, keys) {
            out.agents.push(SignatureAgent {
                agent,
                crawler,
                keys,
            });
        }
    }
    out
}

/// `https://host[:port]` with nothing after it (a trailing `/` is dropped), lower-cased: the
/// form `Signature-Agent` values are compared in.
pub(crate) fn https_origin(text: &str) -> Option<String> {
    let url = url::Url::parse(text).ok()?;
    let bare = url.path() == "/" && url.query().is_none() && url.fragment().is_none();
    if url.scheme() != "https" || !bare || !url.username().is_empty() || url.password().is_some() {
        return None;
    }
    let host = url.host_str()?;
    Some(match url.port() {
        Some(port) => format!("https://{host}:{port}"),
        None => format!("https://{host}"),
    })
}

/// The origin (`https://host[:port]`, lower-cased) of an https URL with any path: what
/// `verify.ranges.private_origins` and `verify.web_bot_auth.private_agents` are compared with.
pub fn https_origin_of(text: &str) -> Option<String> {
    let url = url::Url::parse(text).ok()?;
    if url.scheme() != "https" {
        return None;
    }
    let host = url.host_str()?.to_ascii_lowercase();
    Some(match url.port() {
        Some(port) => format!("https://{host}:{port}"),
        None => format!("https://{host}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_servers() {
        assert_eq!(name_server("10.0.0.2"), "10.0.0.2:53".parse().ok());
        assert_eq!(name_server("10.0.0.2:5353"), "10.0.0.2:5353".parse().ok());
        assert_eq!(
            name_server("2001:db8::53"),
            "[2001:db8::53]:53".parse().ok()
        );
        assert_eq!(
            name_server("[2001:db8::53]:54"),
            "[2001:db8::53]:54".parse().ok()
        );
        assert_eq!(name_server("dns.example"), None);
    }

    #[test]
    fn https_origins() {
        assert_eq!(
            https_origin("https://ChatGPT.com/"),
            Some("https://chatgpt.com".into())
        );
        assert_eq!(
            https_origin("https://bot.example:8443"),
            Some("https://bot.example:8443".into())
        );
        assert_eq!(https_origin("http://chatgpt.com"), None);
        assert_eq!(https_origin("https://chatgpt.com/keys"), None);
        assert_eq!(https_origin("chatgpt.com"), None);
    }
}
