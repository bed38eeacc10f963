//! The `state` section: where Crawl-delay budgets, strike counts, bans and robots.txt reads are
//! kept (this process's memory, or a Redis/Valkey server shared by every replica).

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::io::Read;
mod topology;
pub use self::topology::{Credentials, RedisNode, RedisTopology, RedisUrlError};

use super::*;

pub(crate) static STATE: Section = Section {
    id: "state",
    place: "in `state`",
    title: "Shared state",
    doc: "Where Crawl-delay budgets, strike counts, bans and robots.txt reads are kept.",
    keys: &[
        key(
            "backend",
            Ty::Words(backend_words),
            "`memory`",
            "This process's memory, or a Redis/Valkey server every replica shares.",
        ),
        key(
            "redis",
            Ty::Section(&STATE_REDIS),
            "",
            "The store, with `backend: redis`.",
        ),
        key(
            "dir",
            Ty::Str,
            "`$STATE_DIRECTORY`, else `/var/lib/robotsguard`, else `$XDG_STATE_HOME/robotsguard`: the first that can be written",
            "Where this process keeps the generated trap secret (file `trap-secret`, mode 0600) without a shared store.",
        ).restart_only(&RestartOnly {
            differs: |old, new| old.state_dir != new.state_dir,
            keep: |new, running| new.state_dir.clone_from(&running.state_dir),
        }),
    ],
};

pub(crate) static STATE_REDIS: Section = Section {
    id: "state_redis",
    place: "in `state.redis`",
    title: "The Redis/Valkey store",
    doc: "One of `url`, `url_file`, `sentinel`, `cluster`. When the store is slow or down, decisions fall back to this process's memory until it answers again.",
    keys: &[
        key("url", Ty::Str, "", "`redis://[user:password@]host:port/db`, `redis+sentinel://…/MASTER[/DB]`, `redis+cluster://NODE,...`, `rediss://…` for TLS, or `unix:///path`."),
        key("url_file", Ty::Path, "", "A file holding the URL (a mounted Secret), read at start."),
        key("sentinel", Ty::Section(&STATE_REDIS_SENTINEL), "", "The primary that these sentinels name."),
        key("cluster", Ty::Section(&STATE_REDIS_CLUSTER), "", "A Redis or Valkey Cluster."),
        key("prefix", Ty::Str, "`robotsguard:`", "Put before every key, so several deployments can share one server."),
        key("timeout", Ty::Duration, "`50ms`", "The longest a request waits for the store (at most `5s`)."),
        key("tls", Ty::Section(&STATE_REDIS_TLS), "none", "TLS material for `rediss://` (or, present, TLS to sentinels and cluster nodes)."),
    ],
};

pub(crate) static STATE_REDIS_SENTINEL: Section = Section {
    id: "state_redis_sentinel",
    place: "in `state.redis.sentinel`",
    title: "Redis Sentinel",
    doc: "",
    keys: &[
        required(
            "master",
            Ty::Str,
            "The name the sentinels know the primary by.",
        ),
        required(
            "nodes",
            Ty::List(&Ty::HostPort),
            "1 to 32 sentinels, `host[:port]` (26379 by default).",
        ),
        key(
            "db",
            Ty::Int {
                min: 0,
                max: i32::MAX as i128,
            },
            "`0`",
            "The database number.",
        ),
        key("username", Ty::Str, "none", "The primary's user."),
        key(
            "password_file",
            Ty::Path,
            "none",
            "A file holding the primary's password, read at start.",
        ),
    ],
};

pub(crate) static STATE_REDIS_CLUSTER: Section = Section {
    id: "state_redis_cluster",
    place: "in `state.redis.cluster`",
    title: "Redis Cluster",
    doc: "",
    keys: &[
        required(
            "nodes",
            Ty::List(&Ty::HostPort),
            "1 to 32 nodes, `host[:port]` (6379 by default), from which the cluster is discovered.",
        ),
        key("username", Ty::Str, "none", "The user."),
        key(
            "password_file",
            Ty::Path,
            "none",
            "A file holding the password, read at start.",
        ),
    ],
};

pub(crate) static STATE_REDIS_TLS: Section = Section {
    id: "state_redis_tls",
    place: "in `state.redis.tls`",
    title: "The store's TLS",
    doc: "",
    keys: &[
        key(
            "ca",
            Ty::Path,
            "the system's roots",
            "PEM CA certificates the store's certificate is checked against.",
        ),
        key(
            "client_cert",
            Ty::Path,
            "none",
            "PEM certificate chain presented to a store that asks for one; with `client_key`.",
        ),
        key(
            "client_key",
            Ty::Path,
            "none",
            "Private key of `client_cert`.",
        ),
    ],
};

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

/// The key prefix when `state.redis.prefix` is not given.
pub(crate) const DEFAULT_REDIS_PREFIX: &str = "robotsguard:";

/// The store's timeout when `state.redis.timeout` is not given.
pub(crate) const DEFAULT_REDIS_TIMEOUT: Duration = Duration::from_millis(50);

/// The longest `state.redis.timeout`: a request waits this long at most for the store.
const MAX_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest key prefix (every key carries it).
const MAX_PREFIX: usize = 128;

/// The largest `url_file` read (a URL, not a document).
const MAX_URL_FILE_BYTES: u64 = 4096;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Backend {
    Memory,
    Redis,
}

/// The words `state.backend` accepts (for the reference).
pub(crate) fn backend_words() -> Vec<&'static str> {
    BACKENDS.iter().map(|(name, _)| *name).collect()
}

const BACKENDS: [(&str, Backend); 2] = [("memory", Backend::Memory), ("redis", Backend::Redis)];

/// `state`, over the default (memory), and `state.dir` when given.
pub(crate) fn state(
    sink: &mut Sink,
    node: Option<&Node>,
    base_dir: &Path,
) -> (StateConfig, Option<std::path::PathBuf>) {
    let Some(table) = node.and_then(|n| Table::read(sink, n, &STATE, "`state`")) else {
        return (StateConfig::Memory, None);
    };
    let dir = table
        .get("dir")
        .and_then(|n| reader::nonempty_string(sink, n, "dir"))
        .map(|dir| base_dir.join(dir));
    (backend(sink, &table, base_dir), dir)
}

/// `state.backend` and `state.redis`.
fn backend(sink: &mut Sink, table: &Table<'_>, base_dir: &Path) -> StateConfig {
    let backend = table
        .get("backend")
        .and_then(|n| reader::choice(sink, n, "backend", &BACKENDS))
        .unwrap_or(Backend::Memory);
    let redis_node = table.get("redis");
    match (backend, redis_node) {
        (Backend::Memory, None) => StateConfig::Memory,
        (Backend::Memory, Some(n)) => {
            sink.error_hint(
                n.pos,
                "`state.redis` is set but `state.backend` is `memory`",
                "set `backend: redis` to use it, or remove `state.redis`",
            );
            StateConfig::Memory
        }
        (Backend::Redis, None) => {
            sink.error_hint(
                table.pos,
                "`state.backend: redis` needs `state.redis`",
                "e.g. redis: {url: \"redis://127.0.0.1:6379/0\"}",
            );
            StateConfig::Memory
        }
        (Backend::Redis, Some(n)) => match redis(sink, n, base_dir) {
            Some(redis) => StateConfig::Redis(redis),
            None => StateConfig::Memory,
        },
    }
}

fn redis(sink: &mut Sink, node: &Node, base_dir: &Path) -> Option<RedisConfig> {
    let table = Table::read(sink, node, &STATE_REDIS, "`state.redis`")?;
    let mut prefix = DEFAULT_REDIS_PREFIX.to_owned();
    if let Some(n) = table.get("prefix") {
        if let Some(text) = reader::string(sink, n, "prefix") {
            if text.len() > MAX_PREFIX || text.chars().any(|c| c.is_control() || c == ' ') {
                sink.error(
                    n.pos,
                    format!(
                        "`prefix` must be at most {MAX_PREFIX} bytes, without spaces or control \
                         characters"
                    ),
                );
            } else {
                text.clone_into(&mut prefix);
            }
        }
    }
    let mut timeout = DEFAULT_REDIS_TIMEOUT;
    if let Some(n) = table.get("timeout") {
        if let Some(d) = reader::duration(sink, n, "timeout") {
            if d.is_zero() || d > MAX_TIMEOUT {
                sink.error_hint(
                    n.pos,
                    "`state.redis.timeout` must be longer than 0s and at most 5s",
                    "requests wait this long at most for the store; 50ms is the default",
                );
            } else {
                timeout = d;
            }
        }
    }
    // Exactly one of the four says where the store is.
    let given: Vec<(&str, &Node)> = ["url", "url_file", "sentinel", "cluster"]
        .into_iter()
        .filter_map(|key| table.get(key).map(|n| (key, n)))
        .collect();
    let (source, source_node) = match given.as_slice() {
        [] => {
            sink.error_hint(
                table.pos,
                "`state.redis` is missing `url`",
                "e.g. url: \"redis://127.0.0.1:6379/0\", url_file: a file holding it (a \
                 mounted Secret), or a `sentinel` or `cluster` block",
            );
            return None;
        }
        [one] => *one,
        [(first, _), (second, n), ..] => {
            sink.error(
                n.pos,
                format!(
                    "give one of `url`, `url_file`, `sentinel` or `cluster`, not both `{first}` \
                     and `{second}`"
                ),
            );
            return None;
        }
    };
    let tls_wanted = table.get("tls").is_some();
    let url_pos = source_node.pos;
    let (url, url_file) = match source {
        "url" => (
            reader::nonempty_string(sink, source_node, "url")?.to_owned(),
            None,
        ),
        "url_file" => {
            let path = base_dir.join(reader::nonempty_string(sink, source_node, "url_file")?);
            if sink.config_only {
                // Not opened: the URL is checked where the secret is mounted.
                let tls = match table.get("tls") {
                    Some(n) => Some(redis_tls(sink, n, base_dir)?),
                    None => None,
                };
                return Some(RedisConfig {
                    url: String::new(),
                    url_file: Some(path),
                    prefix,
                    timeout,
                    tls,
                });
            }
            match crate::config::read_secret_file(&path, MAX_URL_FILE_BYTES) {
                Ok(url) => (url, Some(path)),
                Err(message) => {
                    sink.error(source_node.pos, message.to_string());
                    return None;
                }
            }
        }
        "sentinel" => (sentinel(sink, source_node, base_dir, tls_wanted)?, None),
        _ => (cluster(sink, source_node, base_dir, tls_wanted)?, None),
    };
    let tls = match table.get("tls") {
        Some(n) => Some(redis_tls(sink, n, base_dir)?),
        None => None,
    };
    let config = RedisConfig {
        url,
        url_file,
        prefix,
        timeout,
        tls,
    };
    let shown = if config.url_file.is_some() {
        "the URL in `url_file`".to_owned()
    } else {
        quote(&crate::config::redacted_url(&config.url))
    };
    let hint =
        "redis://[user:password@]host:port/db, rediss://... for TLS, unix:///path/to/socket, \
                redis+sentinel://[user:password@]sentinel:26379,.../MASTER[/DB] or \
                redis+cluster://[user:password@]node:6379,...";
    let single_tls = match RedisTopology::parse(&config.url) {
        Err(e) => {
            sink.error_hint(
                url_pos,
                format!("{shown} is not a Redis URL robotsguard can use: {e}"),
                hint,
            );
            return None;
        }
        Ok(RedisTopology::Sentinel { tls, .. } | RedisTopology::Cluster { tls, .. }) => tls,
        Ok(RedisTopology::Single) => match redis::Client::open(config.url.as_str())
            .map(|c| c.get_connection_info().addr().clone())
        {
            Err(e) => {
                sink.error_hint(
                    url_pos,
                    format!("{shown} is not a Redis URL robotsguard can use: {e}"),
                    hint,
                );
                return None;
            }
            Ok(redis::ConnectionAddr::TcpTls { insecure: true, .. }) => {
                sink.error_hint(
                    url_pos,
                    format!("{shown} turns off checking the store's certificate (`#insecure`)"),
                    "trust the store's CA with `tls: {ca: ca.pem}` instead",
                );
                return None;
            }
            Ok(redis::ConnectionAddr::TcpTls { .. }) => true,
            Ok(_) => false,
        },
    };
    if !single_tls {
        if let Some(n) = table.get("tls") {
            sink.error_hint(
                n.pos,
                "`state.redis.tls` needs a `rediss://` URL",
                "rediss://host:port/db connects over TLS (rediss+sentinel:// and \
                 rediss+cluster:// too)",
            );
            return None;
        }
    }
    Some(config)
}

/// The nodes of a `sentinel` or `cluster` block: `host:port` strings, at least one.
fn nodes(
    sink: &mut Sink,
    table: &Table<'_>,
    place: &str,
    default_port: u16,
) -> Option<Vec<RedisNode>> {
    let Some(n) = table.get("nodes") else {
        sink.error_hint(
            table.pos,
            format!("`{place}` is missing `nodes`"),
            "e.g. nodes: [\"10.0.0.5:26379\", \"10.0.0.6:26379\"]",
        );
        return None;
    };
    let items = reader::list(sink, n, "nodes")?;
    if items.is_empty() || items.len() > topology::MAX_NODES {
        sink.error(
            n.pos,
            format!(
                "`nodes` lists 1 to {} host:port addresses",
                topology::MAX_NODES
            ),
        );
        return None;
    }
    let mut nodes = Vec::with_capacity(items.len());
    let mut ok = true;
    for item in items {
        let Some(text) = reader::nonempty_string(sink, item, "nodes") else {
            ok = false;
            continue;
        };
        match topology::parse_node(text, default_port) {
            Ok(node) => nodes.push(node),
            Err(e) => {
                sink.error(item.pos, e.to_string());
                ok = false;
            }
        }
    }
    ok.then_some(nodes)
}

/// `username` and `password_file` of a `sentinel` or `cluster` block.
fn block_credentials(sink: &mut Sink, table: &Table<'_>, base_dir: &Path) -> Option<Credentials> {
    let username = match table.get("username") {
        Some(n) => Some(reader::nonempty_string(sink, n, "username")?.to_owned()),
        None => None,
    };
    let password = match table.get("password_file") {
        Some(n) => {
            let path = base_dir.join(reader::nonempty_string(sink, n, "password_file")?);
            match crate::config::read_secret_file(&path, MAX_URL_FILE_BYTES) {
                Ok(password) => Some(password),
                Err(message) => {
                    sink.error(n.pos, message.to_string());
                    return None;
                }
            }
        }
        None => None,
    };
    Some(Credentials { username, password })
}

/// `state.redis.sentinel: {master, nodes, db, username, password_file}`, written as its URL.
fn sentinel(sink: &mut Sink, node: &Node, base_dir: &Path, tls: bool) -> Option<String> {
    let table = Table::read(sink, node, &STATE_REDIS_SENTINEL, "`state.redis.sentinel`")?;
    let master = match table.get("master") {
        Some(n) => {
            let master = reader::nonempty_string(sink, n, "master")?;
            if master.chars().any(|c| c.is_control() || c == ' ') {
                sink.error(n.pos, "`master` holds spaces or control characters");
                return None;
            }
            master.to_owned()
        }
        None => {
            sink.error_hint(
                table.pos,
                "`state.redis.sentinel` is missing `master`",
                "the name the sentinels monitor the primary under (`sentinel monitor NAME ...`)",
            );
            return None;
        }
    };
    let db = match table.get("db") {
        Some(n) => i64::try_from(reader::integer(sink, n, "db", 0, i128::from(i32::MAX))?).ok()?,
        None => 0,
    };
    let nodes = nodes(sink, &table, "state.redis.sentinel", 26379);
    let credentials = block_credentials(sink, &table, base_dir);
    Some(RedisTopology::sentinel_url(
        &master,
        &nodes?,
        db,
        &credentials?,
        tls,
    ))
}

/// `state.redis.cluster: {nodes, username, password_file}`, written as its URL.
fn cluster(sink: &mut Sink, node: &Node, base_dir: &Path, tls: bool) -> Option<String> {
    let table = Table::read(sink, node, &STATE_REDIS_CLUSTER, "`state.redis.cluster`")?;
    let nodes = nodes(sink, &table, "state.redis.cluster", 6379);
    let credentials = block_credentials(sink, &table, base_dir);
    Some(RedisTopology::cluster_url(&nodes?, &credentials?, tls))
}

/// `state.redis.tls: {ca, client_cert, client_key}` (paths relative to `base_dir`).
fn redis_tls(sink: &mut Sink, node: &Node, base_dir: &Path) -> Option<RedisTls> {
    let table = Table::read(sink, node, &STATE_REDIS_TLS, "`state.redis.tls`")?;
    let (ca, client_cert) = reader::tls_client_files(sink, &table, base_dir)?;
    Some(RedisTls { ca, client_cert })
}

/// The largest certificate or key file read for the store's TLS.
const MAX_PEM_BYTES: u64 = 1 << 20;

/// A client for the store, as `state.redis` describes it.
pub enum RedisClient {
    /// One server (or a proxy in front of several).
    Single(Box<redis::Client>),
    /// The primary the sentinels name: asked of them at every connection.
    Sentinel(Box<redis::sentinel::SentinelClient>),
    /// A cluster, and a client per configured node for what a cluster connection does not do
    /// (subscribing to announcements, which any node relays).
    Cluster {
        /// The cluster, discovered from the configured nodes.
        cluster: Box<redis::cluster::ClusterClient>,
        /// The configured nodes one by one.
        nodes: Vec<redis::Client>,
    },
}

impl std::fmt::Debug for RedisClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RedisClient::Single(_) => "RedisClient::Single",
            RedisClient::Sentinel(_) => "RedisClient::Sentinel",
            RedisClient::Cluster { .. } => "RedisClient::Cluster",
        })
    }
}

impl RedisConfig {
    /// How the store is reached (the config check has refused URLs that do not parse).
    pub fn topology(&self) -> RedisTopology {
        RedisTopology::parse(&self.url).unwrap_or(RedisTopology::Single)
    }

    /// A client for the store, with the certificates `tls` names read now (at start, and by
    /// `validate`; the config check does not read them). Errors say which file and what is
    /// wrong with it. Nothing is connected.
    pub fn client(&self) -> Result<RedisClient, RedisSetupError> {
        let topology = RedisTopology::parse(&self.url).map_err(RedisSetupError::Url)?;
        let tls = match &topology {
            RedisTopology::Single => matches!(
                redis::Client::open(self.url.as_str())
                    .map_err(|e| RedisSetupError::Client(e.to_string()))?
                    .get_connection_info()
                    .addr(),
                redis::ConnectionAddr::TcpTls { .. }
            ),
            RedisTopology::Sentinel { tls, .. } | RedisTopology::Cluster { tls, .. } => *tls,
        };
        let certificates = if tls {
            // The Redis client asks rustls for the process's provider, as pingora's TLS does.
            pingora::tls::install_default_crypto_provider();
            check_system_roots().map_err(RedisSetupError::Tls)?;
            self.certificates().map_err(RedisSetupError::Tls)?
        } else {
            None
        };
        let error = |e: redis::RedisError| RedisSetupError::Client(e.to_string());
        match topology {
            RedisTopology::Single => match certificates {
                None => redis::Client::open(self.url.as_str())
                    .map(|client| RedisClient::Single(Box::new(client)))
                    .map_err(error),
                Some(certificates) => {
                    redis::Client::build_with_tls(self.url.as_str(), certificates)
                        .map(|client| RedisClient::Single(Box::new(client)))
                        .map_err(error)
                }
            },
            RedisTopology::Sentinel {
                master,
                nodes,
                db,
                credentials,
                tls,
            } => {
                use redis::IntoConnectionInfo;
                let sentinels = nodes
                    .iter()
                    .map(|n| n.url(tls).into_connection_info().map(|i| i.addr().clone()))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(error)?;
                let mut builder = redis::sentinel::SentinelClientBuilder::new(
                    sentinels,
                    master,
                    redis::sentinel::SentinelServerType::Master,
                )
                .map_err(error)?
                .set_client_to_redis_db(db);
                if let Some(username) = &credentials.username {
                    builder = builder.set_client_to_redis_username(username);
                }
                if let Some(password) = &credentials.password {
                    builder = builder.set_client_to_redis_password(password);
                }
                if tls {
                    builder = builder
                        .set_client_to_redis_tls_mode(redis::TlsMode::Secure)
                        .set_client_to_sentinel_tls_mode(redis::TlsMode::Secure);
                    if let Some(certificates) = certificates {
                        builder = builder
                            .set_client_to_redis_certificates(certificates.clone())
                            .set_client_to_sentinel_certificates(certificates);
                    }
                }
                builder
                    .build()
                    .map(|client| RedisClient::Sentinel(Box::new(client)))
                    .map_err(error)
            }
            RedisTopology::Cluster {
                nodes,
                credentials,
                tls,
            } => {
                let urls: Vec<String> = nodes.iter().map(|n| n.url(tls)).collect();
                let mut builder = redis::cluster::ClusterClientBuilder::new(urls.clone())
                    // Requests wait `timeout` at most anyway; a retry after that only queues.
                    .retries(1)
                    .connection_timeout(Duration::from_secs(2))
                    .response_timeout(self.timeout.max(Duration::from_secs(2)));
                if let Some(username) = &credentials.username {
                    builder = builder.username(username);
                }
                if let Some(password) = &credentials.password {
                    builder = builder.password(password);
                }
                if tls {
                    builder = builder.tls(redis::TlsMode::Secure);
                    if let Some(certificates) = &certificates {
                        builder = builder.certs(certificates.clone());
                    }
                }
                let cluster = builder.build().map_err(error)?;
                let nodes = nodes
                    .iter()
                    .map(|node| {
                        let url = node.url_with(&credentials, tls);
                        match &certificates {
                            Some(certificates) => {
                                redis::Client::build_with_tls(url.as_str(), certificates.clone())
                            }
                            None => redis::Client::open(url.as_str()),
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(error)?;
                Ok(RedisClient::Cluster {
                    cluster: Box::new(cluster),
                    nodes,
                })
            }
        }
    }

    /// The certificate files of `tls`, read and checked; `None` without `tls` (the system's
    /// roots, no client certificate).
    fn certificates(&self) -> Result<Option<redis::TlsCertificates>, String> {
        let Some(tls) = &self.tls else {
            return Ok(None);
        };
        let root_cert = match &tls.ca {
            Some(path) => {
                let pem = read_pem(path)?;
                let certificates = certificates(path, &pem)?;
                let mut roots = pingora::tls::RootCertStore::empty();
                for (index, certificate) in certificates.into_iter().enumerate() {
                    roots.add(certificate).map_err(|e| {
                        format!(
                            "`{}`: certificate {} is not a usable CA: {e}",
                            path.display(),
                            index + 1
                        )
                    })?;
                }
                Some(pem)
            }
            None => None,
        };
        let client_tls = match &tls.client_cert {
            Some((cert_path, key_path)) => {
                let client_cert = read_pem(cert_path)?;
                let chain = certificates(cert_path, &client_cert)?;
                let client_key = read_pem(key_path)?;
                let key = PrivateKeyDer::from_pem_slice(&client_key)
                    .map_err(|e| format!("`{}`: no usable private key: {e}", key_path.display()))?;
                // The key must be the certificate's: rustls checks that only when it connects.
                pingora::tls::ClientConfig::builder()
                    .with_root_certificates(pingora::tls::RootCertStore::empty())
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| {
                        format!(
                            "`{}` and `{}` cannot be used together: {e}",
                            cert_path.display(),
                            key_path.display()
                        )
                    })?;
                Some(redis::ClientTlsConfig {
                    client_cert,
                    client_key,
                })
            }
            None => None,
        };
        Ok(Some(redis::TlsCertificates {
            client_tls,
            root_cert,
        }))
    }
}

/// The Redis client reads the system's roots at every connection, even when `tls.ca` replaces
/// them, and fails on any problem with them (a missing `SSL_CERT_FILE`, an unreadable or
/// malformed certificate): say so at start rather than fall back to memory for ever.
/// Why a client for the shared store cannot be made from `state.redis`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedisSetupError {
    /// The URL does not parse.
    Url(RedisUrlError),
    /// A certificate file cannot be read or holds nothing usable, or there are no system roots.
    Tls(String),
    /// The Redis client refused the settings (its reason).
    Client(String),
}

impl fmt::Display for RedisSetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisSetupError::Url(e) => e.fmt(f),
            RedisSetupError::Tls(why) | RedisSetupError::Client(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for RedisSetupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RedisSetupError::Url(e) => Some(e),
            _ => None,
        }
    }
}

fn check_system_roots() -> Result<(), String> {
    let loaded = rustls_native_certs::load_native_certs();
    if let Some(error) = loaded.errors.first() {
        return Err(format!(
            "the system's CA certificates cannot be loaded, which a rediss:// connection needs \
             even with `tls.ca`: {error}"
        ));
    }
    let mut roots = pingora::tls::RootCertStore::empty();
    for certificate in loaded.certs {
        roots.add(certificate).map_err(|e| {
            format!("a certificate among the system's CA certificates is not usable: {e}")
        })?;
    }
    Ok(())
}

fn read_pem(path: &Path) -> Result<Vec<u8>, String> {
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(format!(
            "`{}` is larger than {MAX_PEM_BYTES} bytes",
            path.display()
        ));
    }
    Ok(bytes)
}

/// The certificates of a PEM file: at least one, each parsed.
fn certificates(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("`{}`: {e}", path.display()))?;
    if certificates.is_empty() {
        return Err(format!("`{}` holds no PEM certificate", path.display()));
    }
    Ok(certificates)
}
