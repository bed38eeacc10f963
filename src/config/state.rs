//! The `state` section: where Crawl-delay budgets, strike counts, bans and robots.txt reads are
//! kept (this process's memory, or a Redis/Valkey server shared by every replica).

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::error::{quote, Sink};
use super::reader::{self, Table};
use super::schema::{STATE, STATE_REDIS, STATE_REDIS_TLS};
use super::tree::Node;
use super::{RedisConfig, RedisTls, StateConfig};

/// The key prefix when `state.redis.prefix` is not given.
pub(crate) const DEFAULT_PREFIX: &str = "robotsguard:";

/// The store's timeout when `state.redis.timeout` is not given.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);

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

const BACKENDS: [(&str, Backend); 2] = [("memory", Backend::Memory), ("redis", Backend::Redis)];

/// `state`, over the default (memory).
pub(crate) fn state(sink: &mut Sink, node: Option<&Node>, base_dir: &Path) -> StateConfig {
    let Some(table) = node.and_then(|n| Table::read(sink, n, &STATE, "`state`")) else {
        return StateConfig::Memory;
    };
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
    let mut prefix = DEFAULT_PREFIX.to_owned();
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
    let mut timeout = DEFAULT_TIMEOUT;
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
    let (url, url_file, url_pos) = match (table.get("url"), table.get("url_file")) {
        (Some(_), Some(n)) => {
            sink.error(n.pos, "give `url` or `url_file`, not both");
            return None;
        }
        (None, None) => {
            sink.error_hint(
                table.pos,
                "`state.redis` is missing `url`",
                "e.g. url: \"redis://127.0.0.1:6379/0\", or url_file: a file holding it (a \
                 mounted Secret)",
            );
            return None;
        }
        (Some(n), None) => (
            reader::nonempty_string(sink, n, "url")?.to_owned(),
            None,
            n.pos,
        ),
        (None, Some(n)) => {
            let path = base_dir.join(reader::nonempty_string(sink, n, "url_file")?);
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
            match super::read_secret_file(&path, MAX_URL_FILE_BYTES) {
                Ok(url) => (url, Some(path), n.pos),
                Err(message) => {
                    sink.error(n.pos, message);
                    return None;
                }
            }
        }
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
        quote(&super::redacted_url(&config.url))
    };
    match redis::Client::open(config.url.as_str()).map(|c| c.get_connection_info().addr().clone()) {
        Err(e) => {
            sink.error_hint(
                url_pos,
                format!("{shown} is not a Redis URL robotsguard can use: {e}"),
                "redis://[user:password@]host:port/db, rediss://... for TLS, or \
                 unix:///path/to/socket",
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
        Ok(redis::ConnectionAddr::TcpTls { .. }) => {}
        Ok(_) => {
            if let Some(n) = table.get("tls") {
                sink.error_hint(
                    n.pos,
                    "`state.redis.tls` needs a `rediss://` URL",
                    "rediss://host:port/db connects over TLS",
                );
                return None;
            }
        }
    }
    Some(config)
}

/// `state.redis.tls: {ca, client_cert, client_key}` (paths relative to `base_dir`).
fn redis_tls(sink: &mut Sink, node: &Node, base_dir: &Path) -> Option<RedisTls> {
    let table = Table::read(sink, node, &STATE_REDIS_TLS, "`state.redis.tls`")?;
    let (ca, client_cert) = reader::tls_client_files(sink, &table, base_dir)?;
    Some(RedisTls { ca, client_cert })
}

/// The largest certificate or key file read for the store's TLS.
const MAX_PEM_BYTES: u64 = 1 << 20;

impl RedisConfig {
    /// A client for the store, with the certificates `tls` names read now (at start, and by
    /// `validate`; the config check does not read them). Errors say which file and what is
    /// wrong with it.
    pub fn client(&self) -> Result<redis::Client, String> {
        let client = redis::Client::open(self.url.as_str()).map_err(|e| e.to_string())?;
        if !matches!(
            client.get_connection_info().addr(),
            redis::ConnectionAddr::TcpTls { .. }
        ) {
            return Ok(client);
        }
        // The Redis client asks rustls for the process's provider, as pingora's TLS does.
        pingora::tls::install_default_crypto_provider();
        check_system_roots()?;
        let Some(tls) = &self.tls else {
            return Ok(client);
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
        redis::Client::build_with_tls(
            self.url.as_str(),
            redis::TlsCertificates {
                client_tls,
                root_cert,
            },
        )
        .map_err(|e| e.to_string())
    }
}

/// The Redis client reads the system's roots at every connection, even when `tls.ca` replaces
/// them, and fails on any problem with them (a missing `SSL_CERT_FILE`, an unreadable or
/// malformed certificate): say so at start rather than fall back to memory for ever.
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
