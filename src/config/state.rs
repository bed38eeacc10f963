//! The `state` section: where Crawl-delay budgets, strike counts, bans and robots.txt reads are
//! kept (this process's memory, or a Redis/Valkey server shared by every replica).

use std::path::Path;
use std::time::Duration;

use super::error::{quote, Sink};
use super::reader::{self, Table};
use super::schema::{STATE, STATE_REDIS};
use super::tree::Node;
use super::{RedisConfig, StateConfig};

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
            match super::read_secret_file(&path, MAX_URL_FILE_BYTES) {
                Ok(url) => (url, Some(path), n.pos),
                Err(message) => {
                    sink.error(n.pos, message);
                    return None;
                }
            }
        }
    };
    if let Err(e) = redis::Client::open(url.as_str()) {
        let shown = if url_file.is_some() {
            "the URL in `url_file`".to_owned()
        } else {
            quote(&super::redacted_url(&url))
        };
        sink.error_hint(
            url_pos,
            format!("{shown} is not a Redis URL robotsguard can use: {e}"),
            "redis://[user:password@]host:port/db or unix:///path/to/socket (TLS to the store is \
             not supported: run it on a private network or through a local TLS tunnel)",
        );
        return None;
    }
    Some(RedisConfig {
        url,
        url_file,
        prefix,
        timeout,
    })
}
