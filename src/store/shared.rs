use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwapOption;
use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

mod reports;
mod sync;

pub use sync::StoreService;

use super::endpoint::{Endpoint, StoreConnection};
use super::{from_unix_millis, unix_millis, StrikeRequest};
use crate::client_address::shown_network;
use crate::config::{redacted_url, OffendersAction, RedisConfig};
use crate::metrics::METRICS;
use crate::snapshot::{CopyOutcome, EndedCopy, Live, Policy, RobotsCopy, HISTORY, HISTORY_COPIES};
use crate::tables::compliance::REMEMBERED;
use crate::tables::crawl_delay::{Admission, BudgetKey};
use crate::tables::offenders::{
    AgentDigest, Ban, BanCause, BoundAgent, Offenders, MAX_BANS, UNKNOWN_CRAWLER,
};
use crate::tables::rates::{Rate, RateKey};

/// How often the loop checks the store, reconnects, and looks for changed bans.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// The longest a connection attempt or a read of the whole ban list may take (in the
/// background: no request waits for it).
const BACKGROUND_TIMEOUT: Duration = Duration::from_secs(2);

/// The longest a read of the whole ban list may take: up to 100,000 bans (megabytes) must still
/// reach a replica whose CPU is busy, where two seconds would time out again at every try.
const BULK_READ_TIMEOUT: Duration = Duration::from_secs(15);

/// Commands in flight on the connection at most: beyond that, requests decide from memory.
const MAX_IN_FLIGHT: usize = 4096;

/// The key of an origin's robots.txt history (a sorted set by end time), before the origin.
const ROBOTS_HISTORY: &str = "robots-history";

/// The key holding, per origin, until when history copies were dropped for the most copies.
const ROBOTS_FORGOTTEN: &str = "robots-history-forgotten";

/// The key naming the version of the key schema the replicas write ([`SCHEMA`]): a replica of
/// an older release meeting a newer one says so once, in a log line and
/// `robotsguard_state_schema_newer`, and keeps serving with the keys it knows.
const SCHEMA_KEY: &str = "schema";

/// The key schema this build reads and writes: the keys and value layouts of
/// docs/src/operations/replicas.md ("What the store holds"). A release that changes a key's
/// layout in a way an older replica would misread raises it, and writes the old layout beside
/// the new one for one release, so that a rolling upgrade never leaves a replica unable to serve.
pub(crate) const SCHEMA: u64 = 1;

/// The key of the deployment's generated trap secret (`traps` without `paths` or
/// `secret_file`).
const TRAP_SECRET: &str = "trap-secret";

/// The sorted set of robots.txt reads (`ORIGIN CLIENT`, scored by when, in milliseconds):
/// what the scripts look a client up in, and every replica mirrors into its own table of readers.
const READERS: &str = "readers";

/// The most reads the readers set keeps (about 125 bytes each in the store, 32 MiB in all):
/// beyond that each new read drops the oldest.
pub(crate) const MAX_READERS: usize = 1 << 18;

/// The most reads mirrored at one check.
const READERS_PER_CHECK: usize = 50_000;

/// The key every change to a robots.txt history increments.
const ROBOTS_VERSION: &str = "robots-history-version";

/// How often the robots.txt histories are read again even when none changed.
const RELOAD_ROBOTS_HISTORY_EVERY: Duration = Duration::from_secs(30);

/// Origins whose histories are read in one round trip.
const HISTORY_ORIGINS_PER_ROUND_TRIP: usize = 256;

/// Counts a strike and, at `strikes`, bans; reports whether the client read robots.txt.
/// KEYS: readers, strikes, bans, bans:version. ARGV: count a strike (1/0), strikes, window (ms),
/// ban (1/0: action ban on an enforcing origin), the ban's field, the ban's length (ms), the
/// most bans, the client's member of the readers set, the oldest read that counts (ms), what
/// earns the ban (`CAUSE CRAWLER`). Returns {read, count, 0 counted | 1 banned | 2 would ban, ms
/// left of the count's window}. A ban is written as `UNTIL SINCE STRIKES CAUSE CRAWLER` in the
/// server's milliseconds. A count without a TTL (however it came to be) is given one.
const STRIKE_SCRIPT: &str = "
local seen = redis.call('ZSCORE', KEYS[1], ARGV[8])
local read = 0
if seen and tonumber(seen) >= tonumber(ARGV[9]) then read = 1 end
if ARGV[1] ~= '1' then return {read, 0, 0, 0} end
local count = redis.call('INCR', KEYS[2])
local left = redis.call('PTTL', KEYS[2])
if left < 0 then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  left = tonumber(ARGV[3])
end
if count < tonumber(ARGV[2]) then return {read, count, 0, left} end
if ARGV[4] ~= '1' then return {read, count, 2, left} end
if redis.call('HEXISTS', KEYS[3], ARGV[5]) == 0 and redis.call('HLEN', KEYS[3]) >= tonumber(ARGV[7]) then
  return {read, count, 2, left}
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[3], ARGV[5], string.format('%d %d %d %s', now + tonumber(ARGV[6]), now, count, ARGV[10]))
redis.pcall('PUBLISH', KEYS[4], redis.call('INCR', KEYS[4]))
return {read, count, 1, 0}
";

/// Counts a disguised crawler's strike, or reads its count, for a client that read robots.txt.
/// KEYS: readers, disguised. ARGV: count a strike (1/0), window (ms), strikes, the client's
/// member of the readers set, the oldest read that counts (ms). Returns -1 when the client did
/// not read robots.txt, else the count within the window (which a strike at or past `strikes`
/// extends from now, so that a crawler that keeps going stays known).
const DISGUISED_SCRIPT: &str = "
local seen = redis.call('ZSCORE', KEYS[1], ARGV[4])
if not seen or tonumber(seen) < tonumber(ARGV[5]) then return -1 end
if ARGV[1] ~= '1' then return tonumber(redis.call('GET', KEYS[2]) or '0') or 0 end
local count = redis.call('INCR', KEYS[2])
if count == 1 or count >= tonumber(ARGV[3]) or redis.call('PTTL', KEYS[2]) < 0 then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return count
";

/// Lifts bans: those of a client on an origin, all of an origin's, or all. KEYS: bans,
/// bans:version. ARGV: the client (empty: any), the origin (empty: any). Returns the fields
/// lifted. Reads every field (an operator's action: at most the most bans).
const LIFT_SCRIPT: &str = "
local lifted = {}
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  local client, origin = string.match(field, '^(%S+) (%S+)')
  if client and (ARGV[1] == '' or client == ARGV[1]) and (ARGV[2] == '' or origin == ARGV[2]) then
    redis.call('HDEL', KEYS[1], field)
    lifted[#lifted + 1] = field
  end
end
if #lifted > 0 then redis.pcall('PUBLISH', KEYS[2], redis.call('INCR', KEYS[2])) end
return lifted
";

/// Deletes the given fields of the bans hash whose ban has ended by the server's clock (or that
/// robotsguard did not write); a field imposed again since it was read is left alone.
/// KEYS: bans. ARGV: fields.
const PRUNE_SCRIPT: &str = "
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local removed = 0
for i = 1, #ARGV do
  local value = redis.call('HGET', KEYS[1], ARGV[i])
  if value then
    local ends = tonumber(string.match(value, '^(%d+) '))
    if ends == nil or ends <= now then
      redis.call('HDEL', KEYS[1], ARGV[i])
      removed = removed + 1
    end
  end
end
return removed
";

/// Writes bans imposed while the store was unreachable (or, for a trap or a disguised
/// crawler, by a request: the background loop shares them). KEYS: bans, bans:version. ARGV:
/// per ban, its field, milliseconds left, milliseconds since it was imposed, strikes, what
/// earned it (`CAUSE CRAWLER [USER-AGENT]`).
const SHARE_SCRIPT: &str = "
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
for i = 1, #ARGV, 5 do
  redis.call('HSET', KEYS[1], ARGV[i], string.format('%d %d %d %s',
    now + tonumber(ARGV[i + 1]), now - tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), ARGV[i + 4]))
end
redis.pcall('PUBLISH', KEYS[2], redis.call('INCR', KEYS[2]))
return #ARGV / 5
";

/// Adds ended robots.txt copies to an origin's history: one member per content (`KIND\nBODY`),
/// scored by the latest time any replica saw it end; drops what ended more than 24 hours ago,
/// and beyond the most copies the oldest, remembering until when copies were forgotten.
/// KEYS: history, forgotten, robots-history-version. ARGV: the cutoff (ms), the most copies, the
/// keys' lifetime (ms), then per copy its end (ms) and member.
const PUBLISH_HISTORY_SCRIPT: &str = "
for i = 4, #ARGV, 2 do
  redis.call('ZADD', KEYS[1], 'GT', ARGV[i], ARGV[i + 1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1])
local extra = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[2])
if extra > 0 then
  local dropped = redis.call('ZRANGE', KEYS[1], 0, extra - 1, 'WITHSCORES')
  local latest = tonumber(dropped[#dropped])
  local known = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
  if latest > known then
    redis.call('SET', KEYS[2], string.format('%d', latest), 'PX', ARGV[3])
  end
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, extra - 1)
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('INCR', KEYS[3])
return 1
";

/// An operator's rate budget (`policy.rates`) as a token bucket, kept as the generic cell rate
/// algorithm keeps one: the key holds, in the server's microseconds, when the bucket would be
/// full again. KEYS: the budget. ARGV: microseconds one request takes (period / limit), the
/// tolerance (period less that), spend (1/0: admit, or only say). Returns 0 when admitted (or
/// admissible), else the microseconds to wait; a refusal spends nothing. The key expires when the
/// bucket is full.
const RATE_SCRIPT: &str = "
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local due = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if due < now then due = now end
local wait = due - now - tonumber(ARGV[2])
if wait > 0 then return wait end
if ARGV[3] == '1' then
  local next = due + tonumber(ARGV[1])
  redis.call('SET', KEYS[1], string.format('%d', next), 'PX', math.max(1, math.ceil((next - now) / 1000)))
end
return 0
";

/// Why a command to the store failed: the `kind` of `robotsguard_state_backend_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureKind {
    /// No answer within the time limit.
    Timeout,
    /// No connection, or it broke (refused, reset, closed).
    Connection,
    /// The server refused a write for want of memory (`OOM`: `maxmemory` reached with nothing it
    /// may evict). It still answers reads, so it stays in use.
    OutOfMemory,
    /// The server is a replica now (`READONLY`, a failover): connected to again.
    ReadOnly,
    /// The store answered, but without what this process knew it held (a key evicted under
    /// `maxmemory`, a restart without persistence): what this process knew decided.
    Lost,
    /// Anything else the server or the client library reported.
    Error,
}

impl FailureKind {
    /// The metric's label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            FailureKind::Timeout => "timeout",
            FailureKind::Connection => "connection",
            FailureKind::OutOfMemory => "oom",
            FailureKind::ReadOnly => "readonly",
            FailureKind::Lost => "lost",
            FailureKind::Error => "error",
        }
    }

    /// The kind of `error` (a pipeline's or a script's by the first error code among its
    /// replies that names one).
    fn of(error: &redis::RedisError) -> FailureKind {
        if error.is_timeout() {
            return FailureKind::Timeout;
        }
        if error.is_io_error() || error.is_connection_dropped() || error.is_connection_refusal() {
            return FailureKind::Connection;
        }
        let codes = error.clone().into_server_errors().unwrap_or_default();
        let has = |code: &str| codes.iter().any(|(_, e)| e.code() == code);
        if has("OOM") {
            FailureKind::OutOfMemory
        } else if has("READONLY") {
            FailureKind::ReadOnly
        } else {
            FailureKind::Error
        }
    }

    /// Whether requests should stop asking the store until the next check succeeds: not for a
    /// store that answers but refuses writes for want of memory (its reads are right, and each
    /// refused write costs one quick answer), nor for what a store answered without.
    fn takes_the_store_down(self) -> bool {
        !matches!(self, FailureKind::OutOfMemory | FailureKind::Lost)
    }
}

/// A failed piece of background work: its kind and what went wrong.
#[derive(Debug)]
struct Failure {
    kind: FailureKind,
    why: String,
}

impl From<redis::RedisError> for Failure {
    fn from(error: redis::RedisError) -> Failure {
        Failure {
            kind: FailureKind::of(&error),
            why: error.to_string(),
        }
    }
}

impl From<redis::ParsingError> for Failure {
    fn from(error: redis::ParsingError) -> Failure {
        Failure {
            kind: FailureKind::Error,
            why: error.to_string(),
        }
    }
}

impl Failure {
    fn timeout(why: &str) -> Failure {
        Failure {
            kind: FailureKind::Timeout,
            why: why.to_owned(),
        }
    }
}

/// What the store said about a strike: a count, with how long its window has left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SharedStrike {
    Counted(u32, Duration),
    WouldBan(u32, Duration),
    Banned {
        since: SystemTime,
        until: SystemTime,
        strikes: u32,
    },
}

/// What the store said about a violation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SharedViolation {
    pub read_robots: bool,
    pub strike: Option<SharedStrike>,
}

/// A Redis/Valkey store and the connection to it.
pub(super) struct Shared {
    endpoint: Endpoint,
    /// The multiplexed connection; `None` until connected, and after a failed check.
    connection: ArcSwapOption<StoreConnection>,
    /// Whether the last check or command succeeded: requests skip the store while it is not.
    up: AtomicBool,
    prefix: String,
    timeout: Duration,
    /// Where the URL points (no password), for logs.
    shown_url: String,
    strike: redis::Script,
    lift: redis::Script,
    prune: redis::Script,
    share: redis::Script,
    publish_history: redis::Script,
    disguised: redis::Script,
    rate: redis::Script,
}

impl Shared {
    /// `None` when the URL cannot be used (the config check refuses that first).
    pub(super) fn new(settings: &RedisConfig) -> Option<Shared> {
        let client = match settings.client() {
            Ok(client) => client,
            Err(e) => {
                tracing::error!(url = %redacted_url(&settings.url), error = %e, "the shared store cannot be set up (URL or TLS files); state is kept in memory");
                return None;
            }
        };
        Some(Shared {
            endpoint: Endpoint::new(client),
            connection: ArcSwapOption::empty(),
            up: AtomicBool::new(false),
            prefix: settings.prefix.clone(),
            timeout: settings.timeout,
            shown_url: redacted_url(&settings.url),
            strike: redis::Script::new(STRIKE_SCRIPT),
            lift: redis::Script::new(LIFT_SCRIPT),
            prune: redis::Script::new(PRUNE_SCRIPT),
            share: redis::Script::new(SHARE_SCRIPT),
            publish_history: redis::Script::new(PUBLISH_HISTORY_SCRIPT),
            disguised: redis::Script::new(DISGUISED_SCRIPT),
            rate: redis::Script::new(RATE_SCRIPT),
        })
    }

    pub(super) fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    /// A key the scripts and pipelines use together with others: the bans, the readers set and
    /// strike counts the violation script reads and writes at once, the versions every check
    /// reads in one `MGET`, the robots.txt histories read many origins to a pipeline. In a
    /// cluster the prefix is its hash tag (`{robotsguard:}bans`), so that all of them share one
    /// slot, as a script's or pipeline's keys must; a single server keeps the keys as they were.
    /// Keys used alone (budgets, rate buckets, nonces, signatures) are untagged, and each
    /// origin's reports have a tag of their own (`reports.rs`), so that a cluster spreads them.
    fn key(&self, parts: &[&str]) -> String {
        self.key_in(self.endpoint.is_cluster(), parts)
    }

    /// `PREFIX` and `parts` joined by `:`, the prefix in braces when `tagged`.
    fn key_in(&self, tagged: bool, parts: &[&str]) -> String {
        let mut key = String::with_capacity(
            self.prefix.len() + 2 + parts.iter().map(|p| p.len() + 1).sum::<usize>(),
        );
        if tagged {
            key.push('{');
            key.push_str(&self.prefix);
            key.push('}');
        } else {
            key.push_str(&self.prefix);
        }
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                key.push(':');
            }
            key.push_str(part);
        }
        key
    }

    fn budget_key(&self, budget: &BudgetKey<'_>) -> String {
        let crawler = crate::tables::crawl_delay::budget_name(budget.crawler);
        match budget.client {
            // Each budget is one key on its own: untagged, so that a cluster spreads them.
            Some(client) => self.key_in(
                false,
                &["delay", budget.origin, &crawler, &shown_network(&client)],
            ),
            None => self.key_in(false, &["delay", budget.origin, &crawler]),
        }
    }

    /// The field of a ban in the hash `bans`: `CLIENT ORIGIN`, and ` ua:DIGEST` for one bound
    /// to a User-Agent (origin names have no spaces; a process that reads fields as `CLIENT
    /// ORIGIN` only takes such a ban for one of an origin it does not have). `CLIENT` is an
    /// address for a one-address network (as before prefixes), else the prefix.
    pub(super) fn ban_field(
        origin: &str,
        client: ipnet::IpNet,
        agent: Option<&BoundAgent>,
    ) -> String {
        let client = shown_network(&client);
        match agent {
            Some(agent) => format!("{client} {origin} ua:{}", agent.digest().hex()),
            None => format!("{client} {origin}"),
        }
    }

    /// The connection, for a request's command.
    fn live_connection(&self) -> Option<StoreConnection> {
        self.connection
            .load_full()
            .map(|connection| (*connection).clone())
    }

    /// Awaits one request's command with the timeout; on failure the store is marked down (the
    /// caller then decides from memory) and `None` returned.
    async fn run<T>(
        &self,
        operation: &'static str,
        command: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Option<T> {
        self.run_within(operation, self.timeout, command).await
    }

    /// [`Shared::run`] with another time limit.
    async fn run_within<T>(
        &self,
        operation: &'static str,
        limit: Duration,
        command: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Option<T> {
        match tokio::time::timeout(limit, command).await {
            Ok(Ok(value)) => Some(value),
            Ok(Err(e)) => {
                let kind = FailureKind::of(&e);
                if kind == FailureKind::ReadOnly {
                    // A primary that became a replica (a failover behind the URL's name):
                    // connect again, to wherever the name points now.
                    self.connection.store(None);
                }
                self.failed(operation, kind, &e.to_string());
                None
            }
            Err(_) => {
                self.failed(
                    operation,
                    FailureKind::Timeout,
                    "no answer within the time limit",
                );
                None
            }
        }
    }

    /// A command failed: counted and logged (rate-limited); unless the store answered (a write
    /// refused for want of memory), requests decide from memory until the loop's next check
    /// succeeds.
    pub(super) fn failed(&self, operation: &'static str, kind: FailureKind, why: &str) {
        METRICS
            .state_backend_errors
            .with_label_values(&[operation, kind.label()])
            .inc();
        if kind.takes_the_store_down() && self.up.swap(false, Ordering::AcqRel) {
            METRICS.state_backend_up.set(0);
        }
        crate::logs::state_store_failed(&self.shown_url, operation, kind.label(), why);
    }

    pub(super) async fn admit(&self, budget: &BudgetKey<'_>, delay: Duration) -> Option<Admission> {
        let key = self.budget_key(budget);
        let millis = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut connection = self.live_connection()?;
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(&key)
            .arg(1)
            .arg("NX")
            .arg("PX")
            .arg(millis)
            .cmd("PTTL")
            .arg(&key);
        let (set, wait): (Option<String>, i64) = self
            .run("crawl_delay", pipe.query_async(&mut connection))
            .await?;
        Some(match (set, u64::try_from(wait)) {
            (None, Ok(wait)) if wait > 0 => Admission::TooSoon(Duration::from_millis(wait)),
            // Set now, or the budget ran out between the two commands (PTTL -2): admitted.
            _ => Admission::Admitted,
        })
    }

    /// The key of an operator's rate budget: `rate:ORIGIN:CRAWLER[:CLIENT]`, untagged (one key
    /// per script call: a cluster spreads them).
    fn rate_key(&self, key: &RateKey<'_>) -> String {
        let crawler = crate::tables::crawl_delay::budget_name(key.crawler);
        match key.client {
            Some(client) => self.key_in(
                false,
                &["rate", key.origin, &crawler, &shown_network(&client)],
            ),
            None => self.key_in(false, &["rate", key.origin, &crawler]),
        }
    }

    /// An operator's rate budget in the store, every replica's requests together: `Some(None)`
    /// admitted (spent when `spend`), `Some(Some(wait))` refused, `None` when the store did not
    /// answer.
    pub(super) async fn rate(
        &self,
        key: &RateKey<'_>,
        rate: Rate,
        spend: bool,
    ) -> Option<Option<Duration>> {
        let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let mut invocation = self.rate.prepare_invoke();
        invocation
            .key(self.rate_key(key))
            .arg(micros(rate.interval()).max(1))
            .arg(micros(rate.tolerance()))
            .arg(if spend { "1" } else { "0" });
        let mut connection = self.live_connection()?;
        let wait: i64 = self
            .run("rate_budget", invocation.invoke_async(&mut connection))
            .await?;
        Some(
            u64::try_from(wait)
                .ok()
                .filter(|&wait| wait > 0)
                .map(Duration::from_micros),
        )
    }

    /// `Some(None)`: the budget may spend now; `None`: the store did not answer.
    pub(super) async fn next_admission(&self, budget: &BudgetKey<'_>) -> Option<Option<Duration>> {
        let key = self.budget_key(budget);
        let mut connection = self.live_connection()?;
        let mut command = redis::cmd("PTTL");
        command.arg(&key);
        let wait: i64 = self
            .run("crawl_delay", command.query_async(&mut connection))
            .await?;
        Some(
            u64::try_from(wait)
                .ok()
                .filter(|&w| w > 0)
                .map(Duration::from_millis),
        )
    }

    /// `Some(true)` when `agent`'s `nonce` was not in the store (it is now, for `lifetime`),
    /// `Some(false)` for a replay, `None` when the store did not answer. The key is a digest:
    /// nonces are the client's text.
    pub(super) async fn first_nonce_use(
        &self,
        agent: &str,
        nonce: &str,
        lifetime: Duration,
    ) -> Option<bool> {
        use sha2::Digest;
        let mut digest = sha2::Sha256::new();
        digest.update(agent.as_bytes());
        digest.update([0]);
        digest.update(nonce.as_bytes());
        let hex: String = digest
            .finalize()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        // Untagged: each nonce is a key on its own, spread over a cluster.
        let key = self.key_in(false, &["nonce", &hex]);
        let millis = u64::try_from(lifetime.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut connection = self.live_connection()?;
        let mut command = redis::cmd("SET");
        command.arg(&key).arg(1).arg("NX").arg("PX").arg(millis);
        let set: Option<String> = self
            .run("web_bot_auth_nonce", command.query_async(&mut connection))
            .await?;
        Some(set.is_some())
    }

    /// `Some(true)` when `agent`'s nonce-less signature `digest` was first sent by `client`
    /// (it is recorded now, for `lifetime`, if it was not), `Some(false)` when another address
    /// sent it first, `None` when the store did not answer.
    pub(super) async fn signature_from(
        &self,
        agent: &str,
        digest: &[u8; 32],
        client: IpAddr,
        lifetime: Duration,
    ) -> Option<bool> {
        use sha2::Digest;
        let mut key_digest = sha2::Sha256::new();
        key_digest.update(agent.as_bytes());
        key_digest.update([0]);
        key_digest.update(digest);
        let hex: String = key_digest
            .finalize()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        // Untagged: each signature is a key on its own, spread over a cluster.
        let key = self.key_in(false, &["signature", &hex]);
        let millis = u64::try_from(lifetime.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let address = client.to_string();
        let mut connection = self.live_connection()?;
        let mut command = redis::cmd("SET");
        command
            .arg(&key)
            .arg(&address)
            .arg("NX")
            .arg("PX")
            .arg(millis);
        let set: Option<String> = self
            .run(
                "web_bot_auth_signature",
                command.query_async(&mut connection),
            )
            .await?;
        if set.is_some() {
            return Some(true);
        }
        let mut command = redis::cmd("GET");
        command.arg(&key);
        let first: Option<String> = self
            .run(
                "web_bot_auth_signature",
                command.query_async(&mut connection),
            )
            .await?;
        // Gone between the two commands (it expired): the signature's time is over anyway.
        Some(first.is_none_or(|first| first == address))
    }

    /// Records a read of `origin`'s robots.txt by `client` in the readers set: the latest
    /// [`MAX_READERS`] reads, the set expiring a day after the last (one round trip).
    pub(super) async fn record_read(&self, origin: &str, client: IpAddr) {
        let Some(mut connection) = self.live_connection() else {
            return;
        };
        let readers = self.key(&[READERS]);
        let day = u64::try_from(REMEMBERED.as_millis()).unwrap_or(u64::MAX);
        // `GT`: a replica whose clock is behind does not move a read back.
        let mut pipe = redis::pipe();
        pipe.cmd("ZADD")
            .arg(&readers)
            .arg("GT")
            .arg(unix_millis(SystemTime::now()))
            .arg(reader_member(origin, client))
            .ignore()
            .cmd("ZREMRANGEBYRANK")
            .arg(&readers)
            .arg(0)
            .arg(-(MAX_READERS as i64) - 1)
            .ignore()
            .cmd("PEXPIRE")
            .arg(&readers)
            .arg(day)
            .ignore();
        let _: Option<()> = self
            .run("robots_read", pipe.query_async(&mut connection))
            .await;
    }

    pub(super) async fn violation(
        &self,
        origin: &str,
        client: IpAddr,
        strike: Option<StrikeRequest<'_>>,
    ) -> Option<SharedViolation> {
        // Strikes are counted for the client's network; the read of robots.txt is the address's.
        let network = strike.map_or_else(|| ipnet::IpNet::from(client), |s| s.network);
        let counted = shown_network(&network);
        let (count_strike, strikes, window, ban, ban_length) = match strike {
            Some(s) => (
                true,
                s.settings.strikes,
                s.settings.window,
                s.settings.action == OffendersAction::Ban && s.enforce,
                s.settings.ban,
            ),
            None => (false, 0, Duration::ZERO, false, Duration::ZERO),
        };
        let mut invocation = self.strike.prepare_invoke();
        invocation
            .key(self.key(&[READERS]))
            .key(self.key(&["strikes", origin, &counted]))
            .key(self.key(&["bans"]))
            .key(self.key(&["bans", "version"]))
            .arg(if count_strike { "1" } else { "0" })
            .arg(strikes)
            .arg(u64::try_from(window.as_millis()).unwrap_or(u64::MAX).max(1))
            .arg(if ban { "1" } else { "0" })
            .arg(Shared::ban_field(origin, network, None))
            .arg(u64::try_from(ban_length.as_millis()).unwrap_or(u64::MAX))
            .arg(MAX_BANS)
            .arg(reader_member(origin, client))
            .arg(oldest_read())
            .arg(earned_text(
                BanCause::Strikes,
                strike.map_or("", |s| s.crawler),
                None,
            ));
        let mut connection = self.live_connection()?;
        let (read, count, state, left): (i64, i64, i64, i64) = self
            .run("violation", invocation.invoke_async(&mut connection))
            .await?;
        let count = u32::try_from(count).unwrap_or(u32::MAX);
        let left = Duration::from_millis(u64::try_from(left).unwrap_or(0));
        let since = SystemTime::now();
        let strike = count_strike.then_some(match state {
            1 => SharedStrike::Banned {
                since,
                until: since + ban_length,
                strikes: count,
            },
            2 => SharedStrike::WouldBan(count, left),
            _ => SharedStrike::Counted(count, left),
        });
        Some(SharedViolation {
            read_robots: read == 1,
            strike,
        })
    }

    /// A disguised crawler's count (after counting a strike when `strike`): `Some(None)` when
    /// the client did not read robots.txt, `None` when the store did not answer.
    pub(super) async fn disguised(
        &self,
        origin: &str,
        client: IpAddr,
        strike: bool,
        settings: crate::config::DisguisedConfig,
    ) -> Option<Option<u32>> {
        let address = client.to_string();
        let mut invocation = self.disguised.prepare_invoke();
        invocation
            .key(self.key(&[READERS]))
            .key(self.key(&["disguised", origin, &address]))
            .arg(if strike { "1" } else { "0" })
            .arg(
                u64::try_from(settings.window.as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1),
            )
            .arg(settings.strikes)
            .arg(reader_member(origin, client))
            .arg(oldest_read());
        let mut connection = self.live_connection()?;
        let count: i64 = self
            .run("disguised", invocation.invoke_async(&mut connection))
            .await?;
        Some(u32::try_from(count).ok())
    }

    /// The deployment's generated trap secret: `candidate` stored unless one already is, and
    /// the one stored read back (so every replica gets the first one written).
    pub(super) async fn trap_secret(&self, candidate: &str) -> Result<Vec<u8>, String> {
        let mut connection = tokio::time::timeout(
            BACKGROUND_TIMEOUT,
            self.endpoint
                .connect(BACKGROUND_TIMEOUT, BACKGROUND_TIMEOUT, MAX_IN_FLIGHT),
        )
        .await
        .map_err(|_| "connecting took too long".to_owned())?
        .map_err(|e| e.to_string())?;
        let key = self.key(&[TRAP_SECRET]);
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(&key)
            .arg(candidate)
            .arg("NX")
            .ignore()
            .cmd("GET")
            .arg(&key);
        let (stored,): (Option<String>,) =
            tokio::time::timeout(BACKGROUND_TIMEOUT, pipe.query_async(&mut connection))
                .await
                .map_err(|_| "no answer within 2s".to_owned())?
                .map_err(|e| e.to_string())?;
        stored
            .filter(|secret| !secret.trim().is_empty())
            .map(|secret| secret.trim().as_bytes().to_vec())
            .ok_or_else(|| "the store kept no secret".to_owned())
    }

    /// Lifts the bans of `client` (`None`: any) on `origin` (`None`: any): the fields lifted,
    /// `None` when the store did not answer. Lifting is an operator's action, so it waits up to
    /// the background timeout, not the request one.
    pub(super) async fn lift(
        &self,
        origin: Option<&str>,
        client: Option<ipnet::IpNet>,
    ) -> Option<Vec<String>> {
        let mut connection = self.live_connection()?;
        let mut invocation = self.lift.prepare_invoke();
        invocation
            .key(self.key(&["bans"]))
            .key(self.key(&["bans", "version"]))
            .arg(client.map_or_else(String::new, |client| shown_network(&client)))
            .arg(origin.unwrap_or(""));
        self.run_within(
            "lift_ban",
            BACKGROUND_TIMEOUT,
            invocation.invoke_async(&mut connection),
        )
        .await
    }
}

/// A read of robots.txt as a member of the readers set: `ORIGIN CLIENT`.
fn reader_member(origin: &str, client: IpAddr) -> String {
    format!("{origin} {client}")
}

/// The oldest read of robots.txt that still counts: [`REMEMBERED`] ago, in milliseconds.
fn oldest_read() -> u64 {
    unix_millis(
        SystemTime::now()
            .checked_sub(REMEMBERED)
            .unwrap_or(SystemTime::UNIX_EPOCH),
    )
}

/// What earned a ban as the store writes it after its times and strikes: `CAUSE CRAWLER`, and
/// ` USER-AGENT` (as shown) for one bound to it; the crawler percent-escaped, so that it is one
/// word.
fn earned_text(cause: BanCause, crawler: &str, agent: Option<&BoundAgent>) -> String {
    let mut text = format!("{} {}", cause.as_str(), escape_word(crawler));
    if let Some(agent) = agent {
        text.push(' ');
        text.push_str(agent.shown());
    }
    text
}

/// `word` with `%`, spaces, control and non-ASCII bytes as `%XX`.
fn escape_word(word: &str) -> String {
    use std::fmt::Write as _;
    if word.is_empty() {
        return "-".to_owned();
    }
    let mut out = String::with_capacity(word.len());
    for &byte in word.as_bytes() {
        if byte.is_ascii_graphic() && byte != b'%' {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::sync::{history_member, parse_ban, parse_history_entry, unescape_word};
    use super::*;

    /// The error an error reply of the server becomes.
    fn server_error(reply: &[u8]) -> redis::RedisError {
        match redis::parse_redis_value(reply).and_then(redis::Value::extract_error) {
            Ok(value) => panic!("not an error: {value:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn failures_are_told_apart_by_kind_and_only_an_answering_store_stays_in_use() {
        let oom = server_error(b"-OOM command not allowed when used memory > 'maxmemory'.\r\n");
        assert_eq!(FailureKind::of(&oom), FailureKind::OutOfMemory);
        let in_script = server_error(
            b"-OOM command not allowed when used memory > 'maxmemory'. script: 1f, on @user_script:5.\r\n",
        );
        assert_eq!(FailureKind::of(&in_script), FailureKind::OutOfMemory);
        let readonly = server_error(b"-READONLY You can't write against a read only replica.\r\n");
        assert_eq!(FailureKind::of(&readonly), FailureKind::ReadOnly);
        let other = server_error(b"-NOPERM this user has no permissions\r\n");
        assert_eq!(FailureKind::of(&other), FailureKind::Error);
        let reset =
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(FailureKind::of(&reset), FailureKind::Connection);
        assert!(!FailureKind::OutOfMemory.takes_the_store_down());
        assert!(!FailureKind::Lost.takes_the_store_down());
        for kind in [
            FailureKind::Timeout,
            FailureKind::Connection,
            FailureKind::ReadOnly,
            FailureKind::Error,
        ] {
            assert!(kind.takes_the_store_down(), "{kind:?}");
        }
    }

    #[test]
    fn bans_are_placed_by_their_distance_from_the_server_clock_and_anything_else_is_refused() {
        let now = Instant::now();
        // The server's clock is an hour behind this process's: the ban still has 30 minutes.
        let server_now: u64 = 1_700_000_000_000;
        let field = Shared::ban_field(
            "shop",
            ipnet::IpNet::from(IpAddr::from([203, 0, 113, 9])),
            None,
        );
        let value = format!("{} {} 20", server_now + 1_800_000, server_now - 60_000);
        let ban = parse_ban(field.as_bytes(), value.as_bytes(), server_now, now)
            .expect("a ban as written");
        assert_eq!(&*ban.origin, "shop");
        assert_eq!(
            ban.client,
            ipnet::IpNet::from(IpAddr::from([203, 0, 113, 9]))
        );
        assert_eq!(ban.strikes, 20);
        // Written before bans recorded what earned them.
        assert_eq!((ban.cause, &*ban.crawler), (BanCause::Unknown, "unknown"));
        assert!(ban.agent.is_none());
        let left = ban
            .until
            .duration_since(SystemTime::now())
            .expect("ends later");
        assert!(
            left > Duration::from_secs(1790) && left <= Duration::from_secs(1800),
            "{left:?}"
        );
        let v6 = Shared::ban_field(
            "blog.v2",
            "2001:db8:1:2::/64".parse().expect("a network"),
            None,
        );
        assert_eq!(v6, "2001:db8:1:2::/64 blog.v2");
        let read = parse_ban(v6.as_bytes(), value.as_bytes(), server_now, now).expect("a prefix");
        assert_eq!(read.client.to_string(), "2001:db8:1:2::/64");
        // A prefix with host bits set is not one robotsguard wrote.
        let odd = b"2001:db8:1:2::5/64 blog.v2";
        assert!(parse_ban(odd, value.as_bytes(), server_now, now).is_none());
        let ended = format!("{} {} 20", server_now - 1, server_now - 60_000);
        for (field, value) in [
            (field.as_bytes(), ended.as_bytes()),
            (b"shop".as_slice(), value.as_bytes()),
            (b"not-an-address shop".as_slice(), value.as_bytes()),
            (b"\xff\xfe shop".as_slice(), value.as_bytes()),
            (field.as_bytes(), b"12 34".as_slice()),
            (field.as_bytes(), b"x 34 5".as_slice()),
            (field.as_bytes(), b"".as_slice()),
        ] {
            assert!(
                parse_ban(field, value, server_now, now).is_none(),
                "{field:?} {value:?}"
            );
        }
    }

    #[test]
    fn what_earned_a_ban_and_the_user_agent_it_binds_are_written_and_read_back() {
        let now = Instant::now();
        let server_now: u64 = 1_700_000_000_000;
        let times = format!("{} {} 1", server_now + 60_000, server_now);
        let agent = BoundAgent::of(b"Mozilla/5.0 (X11; Linux x86_64) Firefox/130.0");
        let field = Shared::ban_field(
            "shop",
            ipnet::IpNet::from(IpAddr::from([203, 0, 113, 9])),
            Some(&agent),
        );
        assert!(field.starts_with("203.0.113.9 shop ua:"), "{field}");
        let value = format!(
            "{times} {}",
            earned_text(BanCause::Trap, "browser", Some(&agent))
        );
        let ban = parse_ban(field.as_bytes(), value.as_bytes(), server_now, now).expect("read");
        assert_eq!((ban.cause, &*ban.crawler), (BanCause::Trap, "browser"));
        assert_eq!(ban.agent, Some(agent.clone()));
        // A crawler name with spaces and percent signs stays one word.
        let odd = "Odd Bot 100%";
        let value = format!("{times} {}", earned_text(BanCause::Strikes, odd, None));
        let plain = Shared::ban_field(
            "shop",
            ipnet::IpNet::from(IpAddr::from([203, 0, 113, 9])),
            None,
        );
        let ban = parse_ban(plain.as_bytes(), value.as_bytes(), server_now, now).expect("read");
        assert_eq!((ban.cause, &*ban.crawler), (BanCause::Strikes, odd));
        assert!(ban.agent.is_none());
        // A bound field whose value lost the User-Agent text still binds by its digest.
        let bare = format!("{times} disguised disguised");
        let ban = parse_ban(field.as_bytes(), bare.as_bytes(), server_now, now).expect("read");
        assert_eq!(ban.agent.map(|a| a.digest()), Some(agent.digest()));
        // Anything else in the field is refused.
        for field in [
            "203.0.113.9 shop ua:nothex",
            "203.0.113.9 shop other",
            "203.0.113.9 shop ua:00000000000000000000000000000000 more",
        ] {
            assert!(
                parse_ban(field.as_bytes(), bare.as_bytes(), server_now, now).is_none(),
                "{field}"
            );
        }
        assert_eq!(unescape_word(&escape_word("")), Some(String::new()));
        assert_eq!(unescape_word("bad%zz"), None);
    }

    #[test]
    fn history_members_are_one_per_content_and_read_back() {
        let rules = RobotsCopy::from_body(
            bytes::Bytes::from_static(b"User-agent: *\nDisallow: /x\n"),
            1 << 20,
            CopyOutcome::Ok,
            String::new(),
        );
        let member = history_member(&rules);
        assert_eq!(member, b"rules\nUser-agent: *\nDisallow: /x\n");
        let (copy, until) =
            parse_history_entry(&member, b"1700000000000", 1 << 20, &[]).expect("read back");
        assert_eq!(copy.body, rules.body);
        assert_eq!(unix_millis(until), 1_700_000_000_000);
        // An entry already parsed is reused.
        let known = vec![(copy.clone(), until)];
        let (again, _) =
            parse_history_entry(&member, b"1700000000500", 1 << 20, &known).expect("read back");
        assert!(Arc::ptr_eq(&again, &copy));
        let disallow =
            RobotsCopy::without_rules(Policy::DisallowAll, CopyOutcome::Ok, String::new());
        assert_eq!(history_member(&disallow), b"disallow\n");
        for (member, score) in [
            (b"other\nx".as_slice(), b"1".as_slice()),
            (b"rules".as_slice(), b"1".as_slice()),
            (member.as_slice(), b"soon".as_slice()),
            (member.as_slice(), b"-5".as_slice()),
        ] {
            assert!(parse_history_entry(member, score, 1 << 20, &[]).is_none());
        }
    }
}
