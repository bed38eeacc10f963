//! [`GuardBuilder`]: a [`Guard`] configured in code, or from a file with embedding options.
//!
//! Settings made in code are written out as a config document (JSON, which is YAML) and loaded
//! by the same reader as a config file, so a guard built in code gets exactly the defaults,
//! checks and error messages of `robotsguard serve`; there is no second validator to drift.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::{ErrorKind, Guard, GuardError, UnknownHosts};
use crate::config::{Action, ConfigError, ConfigErrors, Mode};
use crate::crawlers::Category;

/// The name config errors from a builder start with.
const BUILDER_SOURCE: &str = "GuardBuilder";

/// Builds a [`Guard`]: from a config file ([`GuardBuilder::config_file`]) or from origins and
/// policy set in code, plus options a config file does not hold (the metrics registry, what to
/// do with hosts the config does not name).
///
/// ```
/// use robotsguard::config::Action;
/// use robotsguard::crawlers::Category;
/// use robotsguard::enforce::Outcome;
/// use robotsguard::guard::{Guard, OriginSpec, UnknownHosts};
///
/// let registry = prometheus::Registry::new();
/// let guard = Guard::builder()
///     .origin(OriginSpec::new("blog", ["blog.example"], "127.0.0.1:8082").robots_inline(""))
///     .category(Category::AiTraining, Action::Block)
///     .unknown_hosts(UnknownHosts::Pass)
///     .registry(registry.clone())
///     .build()?;
/// // An empty robots.txt allows everything, but the policy turns AI-training crawlers away.
/// let decision = guard.decide(b"blog.example", b"GPTBot/1.2", b"/post", None)?;
/// assert_eq!(decision.outcome, Outcome::Blocked);
/// assert!(registry
///     .gather()
///     .iter()
///     .any(|family| family.name() == "robotsguard_decision_duration_seconds"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Default)]
pub struct GuardBuilder {
    config_file: Option<PathBuf>,
    origins: Vec<Value>,
    defaults: Map<String, Value>,
    policy: Map<String, Value>,
    extra_crawlers: Vec<Value>,
    trusted_proxies: Vec<String>,
    state: Option<Value>,
    base_dir: Option<PathBuf>,
    unknown_hosts: UnknownHosts,
    registry: Option<prometheus::Registry>,
}

/// One origin for [`GuardBuilder::origin`]: its name, the hosts it answers for, its upstream
/// and where its robots.txt comes from (by default, fetched from the origin).
#[derive(Debug, Clone)]
pub struct OriginSpec(Map<String, Value>);

impl OriginSpec {
    /// An origin named `name` (used in metrics and logs) for `hosts`, proxied to `upstream`
    /// (`host:port`, or `https://host:port` for TLS towards it).
    pub fn new<H: Into<String>>(
        name: &str,
        hosts: impl IntoIterator<Item = H>,
        upstream: &str,
    ) -> OriginSpec {
        let hosts: Vec<String> = hosts.into_iter().map(Into::into).collect();
        let mut map = Map::new();
        map.insert("name".into(), json!(name));
        map.insert("hosts".into(), json!(hosts));
        map.insert("upstream".into(), json!(upstream));
        OriginSpec(map)
    }

    /// robots.txt is this text, served to crawlers as it is.
    pub fn robots_inline(self, text: &str) -> OriginSpec {
        self.robots(json!({"source": "inline", "text": text}))
    }

    /// robots.txt is read from this file, and re-read when it changes.
    pub fn robots_file(self, path: &Path) -> OriginSpec {
        self.robots(json!({"source": "file", "path": path}))
    }

    /// robots.txt is fetched from this URL instead of the origin's `/robots.txt`.
    pub fn robots_url(self, url: &str) -> OriginSpec {
        self.robots(json!({"source": "origin", "url": url}))
    }

    fn robots(mut self, robots: Value) -> OriginSpec {
        self.0.insert("robots".into(), robots);
        self
    }

    /// `enforce` (the default), `report` (proxy, but count and log what would be blocked) or
    /// `off`.
    pub fn mode(mut self, mode: Mode) -> OriginSpec {
        self.0.insert("mode".into(), json!(mode.as_str()));
        self
    }

    /// The block response's status (default 403) and body template (placeholders as in the
    /// config file's `block.body`; `None` for the built-in text).
    pub fn block(mut self, status: u16, body: Option<&str>) -> OriginSpec {
        let mut block = Map::new();
        block.insert("status".into(), json!(status));
        if let Some(body) = body {
            block.insert("body".into(), json!(body));
        }
        self.0.insert("block".into(), Value::Object(block));
        self
    }
}

impl GuardBuilder {
    /// Loads the config from this file (and reloads it when it changes). Cannot be combined with
    /// settings made in code.
    pub fn config_file(mut self, path: impl Into<PathBuf>) -> GuardBuilder {
        self.config_file = Some(path.into());
        self
    }

    /// Adds an origin.
    pub fn origin(mut self, origin: OriginSpec) -> GuardBuilder {
        self.origins.push(Value::Object(origin.0));
        self
    }

    /// The mode of every origin that does not set its own.
    pub fn mode(mut self, mode: Mode) -> GuardBuilder {
        self.defaults.insert("mode".into(), json!(mode.as_str()));
        self
    }

    /// What happens to crawlers of `category` before robots.txt is asked (`defaults.policy`).
    pub fn category(mut self, category: Category, action: Action) -> GuardBuilder {
        policy_entry(&mut self.policy, "categories", category.as_str(), action);
        self
    }

    /// What happens to the catalogue's crawler `name`, over its category's action.
    pub fn crawler(mut self, name: &str, action: Action) -> GuardBuilder {
        policy_entry(&mut self.policy, "crawlers", name, action);
        self
    }

    /// Clients (addresses or CIDR ranges) never blocked, whatever their User-Agent.
    pub fn allow_clients<S: Into<String>>(
        mut self,
        clients: impl IntoIterator<Item = S>,
    ) -> GuardBuilder {
        let clients: Vec<String> = clients.into_iter().map(Into::into).collect();
        self.policy.insert("allow_clients".into(), json!(clients));
        self
    }

    /// Paths (robots.txt patterns) every crawler may fetch, whatever robots.txt and the policy
    /// say.
    pub fn exempt_paths<S: Into<String>>(
        mut self,
        paths: impl IntoIterator<Item = S>,
    ) -> GuardBuilder {
        let paths: Vec<String> = paths.into_iter().map(Into::into).collect();
        self.policy.insert("exempt_paths".into(), json!(paths));
        self
    }

    /// Adds a crawler to the catalogue (or replaces the built-in one of that name): the product
    /// tokens its User-Agent carries and its category.
    pub fn extra_crawler<S: Into<String>>(
        mut self,
        name: &str,
        tokens: impl IntoIterator<Item = S>,
        category: Category,
    ) -> GuardBuilder {
        let tokens: Vec<String> = tokens.into_iter().map(Into::into).collect();
        self.extra_crawlers.push(json!({
            "name": name,
            "tokens": tokens,
            "category": category.as_str(),
        }));
        self
    }

    /// Peers (addresses or CIDR ranges) whose `X-Forwarded-For`, `-Proto` and `-Host` are
    /// believed: the load balancers or CDN in front of the proxy.
    pub fn trusted_proxies<S: Into<String>>(
        mut self,
        proxies: impl IntoIterator<Item = S>,
    ) -> GuardBuilder {
        self.trusted_proxies = proxies.into_iter().map(Into::into).collect();
        self
    }

    /// Keeps Crawl-delay budgets, robots.txt reads, strikes and bans in the Redis or Valkey
    /// server at `url`, shared by every proxy that names it (`state: {backend: redis}`, with the
    /// default prefix and timeout). [`Guard::services`] then includes the loop that connects,
    /// reconnects and mirrors the bans; until it has connected, and whenever the server fails,
    /// decisions use this process's memory.
    pub fn redis_state(mut self, url: &str) -> GuardBuilder {
        self.state = Some(json!({"backend": "redis", "redis": {"url": url}}));
        self
    }

    /// The directory relative robots.txt file paths are resolved against (default: the working
    /// directory).
    pub fn base_dir(mut self, dir: impl Into<PathBuf>) -> GuardBuilder {
        self.base_dir = Some(dir.into());
        self
    }

    /// What to do with a request for a host no origin names (default: refuse with 421).
    pub fn unknown_hosts(mut self, unknown_hosts: UnknownHosts) -> GuardBuilder {
        self.unknown_hosts = unknown_hosts;
        self
    }

    /// The registry robotsguard's metrics are registered in (default: the global
    /// `prometheus::default_registry()`). The metrics are process-wide: guards in one process
    /// share them, told apart by the `origin` label.
    pub fn registry(mut self, registry: prometheus::Registry) -> GuardBuilder {
        self.registry = Some(registry);
        self
    }

    /// Checks the settings as `robotsguard serve` checks a config file and builds the guard.
    pub fn build(self) -> Result<Guard, GuardError> {
        let in_code = !self.origins.is_empty()
            || !self.defaults.is_empty()
            || !self.policy.is_empty()
            || !self.extra_crawlers.is_empty()
            || !self.trusted_proxies.is_empty()
            || self.state.is_some();
        let (config, config_path) =
            match &self.config_file {
                Some(_) if in_code => return Err(builder_error(
                    "config_file cannot be combined with origins, policy or crawlers set in code",
                )),
                Some(path) => {
                    let config = crate::config::load_file(path)
                        .map_err(|e| GuardError(ErrorKind::Config(e)))?;
                    let watched = config.source_path.clone().unwrap_or_else(|| path.clone());
                    (config, Some(watched))
                }
                None => {
                    let text = self.document();
                    let base_dir = match self.base_dir {
                        Some(dir) => dir,
                        None => std::env::current_dir().map_err(|e| {
                            builder_error(format!("cannot read the working directory: {e}"))
                        })?,
                    };
                    let config = crate::config::load_str(&text, BUILDER_SOURCE, &base_dir)
                        .map_err(|e| GuardError(ErrorKind::Config(e)))?;
                    (config, None)
                }
            };
        let mut guard = Guard::from_config(config, self.unknown_hosts, self.registry.as_ref())?;
        guard.config_path = config_path;
        Ok(guard)
    }

    /// The settings made in code as a config document, one key per line so that an error's
    /// line number points at the setting.
    fn document(&self) -> String {
        let mut root = Map::new();
        if !self.trusted_proxies.is_empty() {
            root.insert("trusted_proxies".into(), json!(self.trusted_proxies));
        }
        if let Some(state) = &self.state {
            root.insert("state".into(), state.clone());
        }
        let mut defaults = self.defaults.clone();
        if !self.policy.is_empty() {
            defaults.insert("policy".into(), Value::Object(self.policy.clone()));
        }
        if !defaults.is_empty() {
            root.insert("defaults".into(), Value::Object(defaults));
        }
        if !self.extra_crawlers.is_empty() {
            root.insert("crawlers".into(), json!({"extra": self.extra_crawlers}));
        }
        root.insert("origins".into(), Value::Array(self.origins.clone()));
        // Serialising a map of strings, numbers and arrays cannot fail.
        serde_json::to_string_pretty(&Value::Object(root)).unwrap_or_default()
    }
}

fn policy_entry(policy: &mut Map<String, Value>, section: &str, key: &str, action: Action) {
    if let Value::Object(entries) = policy
        .entry(section.to_string())
        .or_insert_with(|| Value::Object(Map::new()))
    {
        entries.insert(key.to_string(), json!(action.as_str()));
    }
}

fn builder_error(message: impl Into<String>) -> GuardError {
    GuardError(ErrorKind::Config(ConfigErrors(vec![ConfigError {
        file: BUILDER_SOURCE.to_string(),
        line: 0,
        column: 0,
        message: message.into(),
        hint: None,
    }])))
}
