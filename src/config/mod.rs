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
pub use address::{is_public as is_public_address, normalize_host, normalize_host_bytes};
pub(crate) use sections::{default_trusted_callers, DEFAULT_DECISION_TIMEOUT};
pub use sections::{DecisionConfig, OnDecisionError};
pub use sections::{EventKind, EventsConfig, FirewallExport, Webhook};
mod duration;
pub(crate) use duration::parse_duration;
mod error;
mod fragment;
mod reader;
// Public for the binary (`robotsguard config schema|reference`), not an API of its own.
#[doc(hidden)]
pub mod reference;
mod sections;
use sections::RestartOnly;
mod size;
mod template;
mod tree;
mod validate;

// Each section's types live with its keys in `sections/`; these keep their `crate::config::`
// paths.
pub(crate) use sections::https_origin;
pub use sections::{
    https_origin_of, redacted_url, spared, AccessLog, AccessLogFormat, AccessLogPath, Action,
    AdminConfig, BanScope, BlockConfig, CertificatePair, ClientPrefix, ContentSignalsConfig,
    CrawlDelayAction, CrawlDelayConfig, CrawlersConfig, Credentials, DisguisedAction,
    DisguisedConfig, DnsConfig, DnsProbe, EscapedSlashes, ExtraCrawler, FeedConfig, FetchProxy,
    Forward, HealthCheck, Impostors, Limits, Listener, ListenerTls, Mode, MultiPurpose,
    OffendersAction, OffendersConfig, OnUnreachable, OriginConfig, PathsConfig, PolicyConfig,
    ProxyUrlError, PurposeAction, PurposeRule, RangesConfig, RatePer, RateRule, RateScope,
    RatesConfig, RedisClient, RedisConfig, RedisNode, RedisSetupError, RedisTls, RedisTopology,
    RedisUrlError, RegistrySource, ReportsConfig, ResponseSignalsConfig, RobotsConfig,
    RobotsSource, SignalAction, SignatureAgent, Spared, SparedPurposes, StateConfig, TrapAction,
    TrapSecret, TrapsConfig, Upstream, UpstreamHealth, UpstreamTimeouts, UpstreamTls, VerifyConfig,
    WebBotAuthConfig, WebBotAuthMode, MIN_ADMIN_TOKEN_BYTES,
};

#[cfg(test)]
mod tests;

pub use fragment::{with_origin_fragment, MAX_FRAGMENT_BYTES};
pub(crate) use sections::MAX_REPLICA_NAME as MAX_EVIDENCE_REPLICA_NAME;
pub use sections::{EvidenceConfig, EvidenceEvent};
pub use sections::{PreviewConfig, DEFAULT_MAX_PATHS_PER_ORIGIN};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use error::{ConfigError, ConfigErrors};
pub use template::{render_body, BODY_PLACEHOLDERS};

/// The whole, checked configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Proxy listeners; empty only when `decision` is set (`listen: []` runs only the decision
    /// listener).
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
    /// The decision listener for front proxies' auth subrequests, when `decision` is set.
    pub decision: Option<DecisionConfig>,
    /// `events`: webhooks and what the decision stream exports.
    pub events: EventsConfig,
    /// Signed compliance records (`evidence`).
    pub evidence: EvidenceConfig,
    /// The absolute path the config was loaded from (`None` from `load_str`).
    pub source_path: Option<PathBuf>,
}

/// The default `state.dir`, tried after `$STATE_DIRECTORY` (systemd's `StateDirectory=`) and
/// before `$XDG_STATE_HOME/robotsguard` (or `~/.local/state/robotsguard`): the first one that
/// can be written is used.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/robotsguard";

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

/// Every restart-only setting with its path, from the key rows marked restart-only in
/// `sections/`, in the reference page's order.
fn restart_only() -> &'static [(String, &'static RestartOnly)] {
    static KEYS: std::sync::OnceLock<Vec<(String, &'static RestartOnly)>> =
        std::sync::OnceLock::new();
    KEYS.get_or_init(sections::restart_only_keys)
}

/// The names of the restart-only settings (`listen`, `state`, `limits.max_connections`, …).
pub(crate) fn restart_only_names() -> Vec<&'static str> {
    restart_only()
        .iter()
        .map(|(name, _)| name.as_str())
        .collect()
}

/// The restart-only settings in words, the one list every text naming them is written from (the
/// configuration reference, the reload and Kubernetes pages, the chart's alert, the metric's
/// notes): `` `listen`, `admin`, … and `state.dir` `` in Markdown, else without the backticks.
pub fn restart_only_list(markdown: bool) -> String {
    let names: Vec<String> = restart_only_names()
        .into_iter()
        .map(|name| {
            if markdown {
                format!("`{name}`")
            } else {
                name.to_string()
            }
        })
        .collect();
    match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The settings that differ between `old` and `new` but only take effect on restart.
pub fn restart_required(old: &Config, new: &Config) -> Vec<&'static str> {
    restart_only()
        .iter()
        .filter(|(_, how)| (how.differs)(old, new))
        .map(|(name, _)| name.as_str())
        .collect()
}

/// Puts the running values of every restart-only setting into `new`; returns the ones `new`
/// had changed (as [`restart_required`] names them).
pub fn keep_restart_only(new: &mut Config, running: &Config) -> Vec<&'static str> {
    let changed = restart_required(running, new);
    for (_, how) in restart_only() {
        (how.keep)(new, running);
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

/// Reads a webhook's HMAC key: the file's bytes less one trailing newline (`\n` or `\r\n`),
/// which must not be empty. Read raw: a key may hold spaces that `read_secret_file` would trim.
pub fn read_webhook_secret(path: &Path) -> Result<Vec<u8>, SecretFileError> {
    let max_bytes = sections::MAX_WEBHOOK_SECRET_BYTES;
    let failed = |why| SecretFileError {
        path: path.to_path_buf(),
        why,
    };
    let file = std::fs::File::open(path).map_err(|e| failed(SecretProblem::Unreadable(e)))?;
    let mut bytes = Vec::new();
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| failed(SecretProblem::Unreadable(e)))?;
    if bytes.len() as u64 > max_bytes {
        return Err(failed(SecretProblem::TooLarge(max_bytes)));
    }
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
    }
    if bytes.is_empty() {
        return Err(failed(SecretProblem::Empty));
    }
    Ok(bytes)
}

/// The largest bouncer keys file read.
const MAX_BOUNCER_KEYS_FILE_BYTES: u64 = 64 * 1024;

/// Reads `admin.bouncer_keys_file`: one key a line, blank lines and `#` comments skipped; at
/// least one key, each at least [`MIN_ADMIN_TOKEN_BYTES`] long.
pub fn read_bouncer_keys(path: &Path) -> Result<Vec<String>, SecretFileError> {
    let text = read_secret_file(path, MAX_BOUNCER_KEYS_FILE_BYTES)?;
    let keys: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect();
    if keys.is_empty() {
        return Err(SecretFileError {
            path: path.to_path_buf(),
            why: SecretProblem::Empty,
        });
    }
    if let Some(short) = keys.iter().find(|key| key.len() < MIN_ADMIN_TOKEN_BYTES) {
        return Err(SecretFileError {
            path: path.to_path_buf(),
            why: SecretProblem::TooShort(short.len()),
        });
    }
    Ok(keys)
}

/// Reads an admin token file: [`read_secret_file`], and the token at least
/// [`MIN_ADMIN_TOKEN_BYTES`] long.
pub fn read_admin_token(path: &Path) -> Result<String, SecretFileError> {
    let token = read_secret_file(path, sections::MAX_ADMIN_TOKEN_FILE_BYTES)?;
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
