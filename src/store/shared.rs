//! The shared store on a Redis or Valkey server: Crawl-delay budgets, robots.txt reads, strike
//! counts and bans as keys with TTLs, each decision one atomic round trip (a pipeline or a
//! script), and the loop that checks the server, reconnects and mirrors its bans.
//!
//! Keys (after `state.redis.prefix`): `delay:ORIGIN:CRAWLER[:CLIENT]` (lives for the delay),
//! `read:ORIGIN:CLIENT` (24 hours), `strikes:ORIGIN:CLIENT` (the window), the hash `bans` (field
//! `CLIENT ORIGIN`, value `UNTIL_MS SINCE_MS STRIKES`) and `bans:version`, which every change to
//! the bans increments so that the processes' mirrors reload only when something changed, and
//! per origin `robots-history:ORIGIN`, the robots.txt copies any replica had in force over the
//! last 24 hours (a sorted set by when each stopped being in force; `robots-history-version`
//! counts changes), so that a young replica does not take a rule it never saw change for a
//! settled one. Times in the store are the Unix epoch in milliseconds; TTLs are the server's own.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwapOption;
use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use redis::aio::MultiplexedConnection;

use super::{from_unix_millis, unix_millis, StrikeRequest};
use crate::compliance::REMEMBERED;
use crate::config::{redacted_url, OffendersAction, RedisConfig};
use crate::crawl_delay::{Admission, BudgetKey};
use crate::logs::RateLimiter;
use crate::metrics::METRICS;
use crate::offenders::{Ban, Offenders, MAX_BANS};
use crate::state::{CopyOutcome, EndedCopy, Live, Policy, RobotsCopy, HISTORY, HISTORY_COPIES};

/// How often the loop checks the store, reconnects, and looks for changed bans.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// The longest a connection attempt or a read of the whole ban list may take (in the
/// background: no request waits for it).
const BACKGROUND_TIMEOUT: Duration = Duration::from_secs(2);

/// Commands in flight on the connection at most: beyond that, requests decide from memory.
const MAX_IN_FLIGHT: usize = 4096;

/// The key of an origin's robots.txt history (a sorted set by end time), before the origin.
const ROBOTS_HISTORY: &str = "robots-history";

/// The key every change to a robots.txt history increments.
const ROBOTS_VERSION: &str = "robots-history-version";

/// How often the robots.txt histories are read again even when none changed.
const RELOAD_ROBOTS_HISTORY_EVERY: Duration = Duration::from_secs(30);

/// Origins whose histories are read in one round trip.
const HISTORY_ORIGINS_PER_ROUND_TRIP: usize = 256;

/// Lines about the store failing, per second at most (every request could fail).
const FAILURE_LINES_PER_SECOND: u32 = 1;

static FAILURE_LINES: LazyLock<RateLimiter> =
    LazyLock::new(|| RateLimiter::new(FAILURE_LINES_PER_SECOND));

/// Counts a strike and, at `strikes`, bans; reports whether the client read robots.txt.
/// KEYS: read, strikes, bans, bans:version. ARGV: count a strike (1/0), strikes, window (ms),
/// ban (1/0: action ban on an enforcing origin), the ban's field, its value without the count
/// (`UNTIL SINCE`), the most bans. Returns {read, count, 0 counted | 1 banned | 2 would ban}.
const STRIKE_SCRIPT: &str = r"
local read = redis.call('EXISTS', KEYS[1])
if ARGV[1] ~= '1' then return {read, 0, 0} end
local count = redis.call('INCR', KEYS[2])
if count == 1 then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
if count < tonumber(ARGV[2]) then return {read, count, 0} end
if ARGV[4] ~= '1' then return {read, count, 2} end
if redis.call('HEXISTS', KEYS[3], ARGV[5]) == 0 and redis.call('HLEN', KEYS[3]) >= tonumber(ARGV[7]) then
  return {read, count, 2}
end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[3], ARGV[5], ARGV[6] .. ' ' .. count)
redis.call('INCR', KEYS[4])
return {read, count, 1}
";

/// Lifts a ban. KEYS: bans, bans:version. ARGV: the ban's field. Returns 1 when there was one.
const LIFT_SCRIPT: &str = r"
local lifted = redis.call('HDEL', KEYS[1], ARGV[1])
if lifted == 1 then redis.call('INCR', KEYS[2]) end
return lifted
";

/// What the store said about a strike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SharedStrike {
    Counted(u32),
    WouldBan(u32),
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

/// A Redis/Valkey server and the connection to it.
pub(super) struct Shared {
    client: redis::Client,
    /// The multiplexed connection; `None` until connected, and after a failed check.
    connection: ArcSwapOption<MultiplexedConnection>,
    /// Whether the last check or command succeeded: requests skip the store while it is not.
    up: AtomicBool,
    prefix: String,
    timeout: Duration,
    /// Where the URL points (no password), for logs.
    shown_url: String,
    strike: redis::Script,
    lift: redis::Script,
}

impl Shared {
    /// `None` when the URL cannot be used (the config check refuses that first).
    pub(super) fn new(settings: &RedisConfig) -> Option<Shared> {
        let client = match redis::Client::open(settings.url.as_str()) {
            Ok(client) => client,
            Err(e) => {
                tracing::error!(url = %redacted_url(&settings.url), error = %e, "the shared store's URL cannot be used; state is kept in memory");
                return None;
            }
        };
        Some(Shared {
            client,
            connection: ArcSwapOption::empty(),
            up: AtomicBool::new(false),
            prefix: settings.prefix.clone(),
            timeout: settings.timeout,
            shown_url: redacted_url(&settings.url),
            strike: redis::Script::new(STRIKE_SCRIPT),
            lift: redis::Script::new(LIFT_SCRIPT),
        })
    }

    pub(super) fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    fn key(&self, parts: &[&str]) -> String {
        let mut key = String::with_capacity(
            self.prefix.len() + parts.iter().map(|p| p.len() + 1).sum::<usize>(),
        );
        key.push_str(&self.prefix);
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                key.push(':');
            }
            key.push_str(part);
        }
        key
    }

    fn budget_key(&self, budget: &BudgetKey<'_>) -> String {
        match budget.client {
            Some(client) => {
                self.key(&["delay", budget.origin, budget.crawler, &client.to_string()])
            }
            None => self.key(&["delay", budget.origin, budget.crawler]),
        }
    }

    fn ban_field(origin: &str, client: IpAddr) -> String {
        format!("{client} {origin}")
    }

    /// The connection, for a request's command.
    fn live_connection(&self) -> Option<MultiplexedConnection> {
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
        match tokio::time::timeout(self.timeout, command).await {
            Ok(Ok(value)) => Some(value),
            Ok(Err(e)) => {
                self.failed(operation, &e.to_string());
                None
            }
            Err(_) => {
                self.failed(operation, "no answer within state.redis.timeout");
                None
            }
        }
    }

    /// A command failed: requests decide from memory until the loop's next check succeeds.
    fn failed(&self, operation: &'static str, why: &str) {
        METRICS
            .state_backend_errors
            .with_label_values(&[operation])
            .inc();
        let was_up = self.up.swap(false, Ordering::AcqRel);
        if was_up {
            METRICS.state_backend_up.set(0);
        }
        if FAILURE_LINES.admit() {
            tracing::warn!(
                url = %self.shown_url,
                operation,
                error = %why,
                "the shared state store failed; deciding from this process's memory until it answers again"
            );
        }
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
        Some(if set.is_some() {
            Admission::Admitted
        } else {
            // The key may have expired between the two commands: the wait is then over.
            let wait = u64::try_from(wait).unwrap_or(1).max(1);
            Admission::TooSoon(Duration::from_millis(wait))
        })
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

    pub(super) async fn record_read(&self, origin: &str, client: IpAddr) {
        let key = self.key(&["read", origin, &client.to_string()]);
        let millis = u64::try_from(REMEMBERED.as_millis()).unwrap_or(u64::MAX);
        let Some(mut connection) = self.live_connection() else {
            return;
        };
        let mut command = redis::cmd("SET");
        command.arg(&key).arg(1).arg("PX").arg(millis);
        let _: Option<()> = self
            .run("robots_read", command.query_async(&mut connection))
            .await;
    }

    pub(super) async fn violation(
        &self,
        origin: &str,
        client: IpAddr,
        strike: Option<StrikeRequest>,
    ) -> Option<SharedViolation> {
        let address = client.to_string();
        let since = SystemTime::now();
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
        let until = since + ban_length;
        let mut invocation = self.strike.prepare_invoke();
        invocation
            .key(self.key(&["read", origin, &address]))
            .key(self.key(&["strikes", origin, &address]))
            .key(self.key(&["bans"]))
            .key(self.key(&["bans", "version"]))
            .arg(if count_strike { "1" } else { "0" })
            .arg(strikes)
            .arg(u64::try_from(window.as_millis()).unwrap_or(u64::MAX).max(1))
            .arg(if ban { "1" } else { "0" })
            .arg(Shared::ban_field(origin, client))
            .arg(format!("{} {}", unix_millis(until), unix_millis(since)))
            .arg(MAX_BANS);
        let mut connection = self.live_connection()?;
        let (read, count, state): (i64, i64, i64) = self
            .run("violation", invocation.invoke_async(&mut connection))
            .await?;
        let count = u32::try_from(count).unwrap_or(u32::MAX);
        let strike = count_strike.then_some(match state {
            1 => SharedStrike::Banned {
                since,
                until,
                strikes: count,
            },
            2 => SharedStrike::WouldBan(count),
            _ => SharedStrike::Counted(count),
        });
        Some(SharedViolation {
            read_robots: read == 1,
            strike,
        })
    }

    /// `Some(true)` lifted, `Some(false)` no such ban, `None` the store did not answer. Lifting
    /// is an operator's action, so it waits up to the background timeout, not the request one.
    pub(super) async fn lift(&self, origin: &str, client: IpAddr) -> Option<bool> {
        let connection = self.connection.load_full()?;
        let mut connection = (*connection).clone();
        let mut invocation = self.lift.prepare_invoke();
        invocation
            .key(self.key(&["bans"]))
            .key(self.key(&["bans", "version"]))
            .arg(Shared::ban_field(origin, client));
        match tokio::time::timeout(
            BACKGROUND_TIMEOUT,
            invocation.invoke_async::<i64>(&mut connection),
        )
        .await
        {
            Ok(Ok(lifted)) => Some(lifted == 1),
            Ok(Err(e)) => {
                self.failed("lift_ban", &e.to_string());
                None
            }
            Err(_) => {
                self.failed("lift_ban", "no answer");
                None
            }
        }
    }
}

/// Keeps the shared store connected, marks it up or down, and mirrors its bans
/// (`Guard::services` runs it).
pub struct StoreService {
    shared: Arc<Shared>,
    offenders: Arc<Offenders>,
    live: Arc<Live>,
}

/// What the loop last saw of the store.
#[derive(Default)]
struct Seen {
    bans_version: Option<i64>,
    robots_version: Option<i64>,
    /// When the robots.txt histories were last loaded (reloaded now and then anyway, for the
    /// origins a config reload added).
    robots_loaded: Option<Instant>,
}

impl StoreService {
    pub(super) fn new(
        shared: Arc<Shared>,
        offenders: Arc<Offenders>,
        live: Arc<Live>,
    ) -> StoreService {
        StoreService {
            shared,
            offenders,
            live,
        }
    }

    /// One check: connect if needed, read the versions of the bans and of the robots.txt
    /// histories within the request timeout (the store is up when it answers in time), publish
    /// this process's ended robots.txt copies, and reload what changed.
    async fn check(&self, seen: &mut Seen) {
        let shared = &self.shared;
        let connection = match shared.connection.load_full() {
            Some(connection) => (*connection).clone(),
            None => match self.connect().await {
                Ok(connection) => {
                    shared.connection.store(Some(Arc::new(connection.clone())));
                    connection
                }
                Err(why) => {
                    self.down(&why);
                    return;
                }
            },
        };
        let mut probe = connection.clone();
        let mut versions = redis::cmd("MGET");
        versions
            .arg(shared.key(&["bans", "version"]))
            .arg(shared.key(&[ROBOTS_VERSION]));
        let (bans_version, robots_version) = match tokio::time::timeout(
            shared.timeout,
            versions.query_async::<(Option<i64>, Option<i64>)>(&mut probe),
        )
        .await
        {
            Ok(Ok((bans, robots))) => (bans.unwrap_or(0), robots.unwrap_or(0)),
            Ok(Err(e)) => {
                // A fresh connection next time: this one may be broken.
                shared.connection.store(None);
                self.down(&e.to_string());
                return;
            }
            Err(_) => {
                shared.connection.store(None);
                self.down("no answer within state.redis.timeout");
                return;
            }
        };
        if !shared.up.load(Ordering::Acquire) {
            // Back: what was banned meanwhile goes to the store, then everything is reloaded.
            self.share_local_bans(connection.clone()).await;
            *seen = Seen::default();
        }
        if seen.bans_version != Some(bans_version) {
            match self.reload_bans(connection.clone()).await {
                Ok(()) => seen.bans_version = Some(bans_version),
                Err(why) => {
                    self.down(&why);
                    return;
                }
            }
        }
        self.publish_robots_history(connection.clone()).await;
        let stale = seen
            .robots_loaded
            .is_none_or(|at| at.elapsed() >= RELOAD_ROBOTS_HISTORY_EVERY);
        if stale || seen.robots_version != Some(robots_version) {
            match self.load_robots_history(connection).await {
                Ok(()) => {
                    seen.robots_version = Some(robots_version);
                    seen.robots_loaded = Some(Instant::now());
                }
                Err(why) => {
                    self.down(&why);
                    return;
                }
            }
        }
        if !shared.up.swap(true, Ordering::AcqRel) {
            METRICS.state_backend_up.set(1);
            tracing::info!(url = %shared.shown_url, "the shared state store is reachable: state is shared");
        }
    }

    /// Writes the robots.txt copies that stopped being in force here to the origin's history in
    /// the store (trimmed to the last 24 hours and [`HISTORY_COPIES`] copies).
    async fn publish_robots_history(&self, mut connection: MultiplexedConnection) {
        let snapshot = self.live.load();
        let shared = &self.shared;
        let cutoff = unix_millis(
            SystemTime::now()
                .checked_sub(HISTORY)
                .unwrap_or(SystemTime::UNIX_EPOCH),
        );
        let history_ms = u64::try_from(HISTORY.as_millis()).unwrap_or(u64::MAX);
        for origin in &snapshot.origins {
            let ended = origin.robots.take_unpublished();
            if ended.is_empty() {
                continue;
            }
            let key = shared.key(&[ROBOTS_HISTORY, origin.name()]);
            let mut pipe = redis::pipe();
            pipe.atomic();
            for (copy, until) in &ended {
                pipe.cmd("ZADD")
                    .arg(&key)
                    .arg(unix_millis(*until))
                    .arg(history_entry(copy, *until))
                    .ignore();
            }
            pipe.cmd("ZREMRANGEBYSCORE")
                .arg(&key)
                .arg("-inf")
                .arg(format!("({cutoff}"))
                .ignore();
            pipe.cmd("ZREMRANGEBYRANK")
                .arg(&key)
                .arg(0)
                .arg(-1 - i64::try_from(HISTORY_COPIES).unwrap_or(i64::MAX))
                .ignore();
            pipe.cmd("PEXPIRE").arg(&key).arg(history_ms).ignore();
            pipe.cmd("INCR").arg(shared.key(&[ROBOTS_VERSION])).ignore();
            match tokio::time::timeout(BACKGROUND_TIMEOUT, pipe.query_async::<()>(&mut connection))
                .await
            {
                Ok(Ok(())) => {}
                failed => {
                    let why = match failed {
                        Ok(Err(e)) => e.to_string(),
                        _ => "no answer".to_owned(),
                    };
                    tracing::warn!(origin = origin.name(), error = %why, "could not write an ended robots.txt copy to the shared store; trying again");
                    origin.robots.keep_unpublished(ended);
                    return;
                }
            }
        }
    }

    /// Reads every origin's robots.txt history from the store into its slot: the copies any
    /// replica had in force over the last 24 hours.
    async fn load_robots_history(
        &self,
        mut connection: MultiplexedConnection,
    ) -> Result<(), String> {
        let snapshot = self.live.load();
        let shared = &self.shared;
        let cutoff = unix_millis(
            SystemTime::now()
                .checked_sub(HISTORY)
                .unwrap_or(SystemTime::UNIX_EPOCH),
        );
        for origins in snapshot.origins.chunks(HISTORY_ORIGINS_PER_ROUND_TRIP) {
            let mut pipe = redis::pipe();
            for origin in origins {
                pipe.cmd("ZRANGEBYSCORE")
                    .arg(shared.key(&[ROBOTS_HISTORY, origin.name()]))
                    .arg(cutoff)
                    .arg("+inf");
            }
            let entries: Vec<Vec<Vec<u8>>> =
                match tokio::time::timeout(BACKGROUND_TIMEOUT, pipe.query_async(&mut connection))
                    .await
                {
                    Ok(Ok(entries)) => entries,
                    Ok(Err(e)) => return Err(e.to_string()),
                    Err(_) => {
                        return Err("reading the robots.txt histories took too long".to_owned())
                    }
                };
            for (origin, entries) in origins.iter().zip(entries) {
                let known = origin.robots.shared_history();
                let copies = entries
                    .iter()
                    .filter_map(|entry| {
                        parse_history_entry(entry, origin.robots.settings.max_size, &known)
                    })
                    .collect();
                origin.robots.set_shared_history(copies);
            }
        }
        Ok(())
    }

    async fn connect(&self) -> Result<MultiplexedConnection, String> {
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(BACKGROUND_TIMEOUT))
            .set_response_timeout(Some(self.shared.timeout.max(BACKGROUND_TIMEOUT)))
            .set_concurrency_limit(MAX_IN_FLIGHT);
        match tokio::time::timeout(
            BACKGROUND_TIMEOUT,
            self.shared
                .client
                .get_multiplexed_async_connection_with_config(&config),
        )
        .await
        {
            Ok(Ok(connection)) => Ok(connection),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("connecting took too long".to_owned()),
        }
    }

    fn down(&self, why: &str) {
        let shared = &self.shared;
        METRICS
            .state_backend_errors
            .with_label_values(&["check"])
            .inc();
        if shared.up.swap(false, Ordering::AcqRel) {
            METRICS.state_backend_up.set(0);
        }
        if FAILURE_LINES.admit() {
            tracing::warn!(
                url = %shared.shown_url,
                error = %why,
                "the shared state store is unreachable; deciding from this process's memory and retrying every second"
            );
        }
    }

    /// Writes the bans this process imposed while the store was unreachable.
    async fn share_local_bans(&self, mut connection: MultiplexedConnection) {
        let now = Instant::now();
        let local = self.offenders.unshared(now);
        if local.is_empty() {
            return;
        }
        let shared = &self.shared;
        let bans_key = shared.key(&["bans"]);
        let mut pipe = redis::pipe();
        pipe.atomic();
        for ban in &local {
            pipe.cmd("HSET")
                .arg(&bans_key)
                .arg(Shared::ban_field(&ban.origin, ban.client))
                .arg(format!(
                    "{} {} {}",
                    unix_millis(ban.until),
                    unix_millis(ban.since),
                    ban.strikes
                ))
                .ignore();
        }
        pipe.cmd("INCR")
            .arg(shared.key(&["bans", "version"]))
            .ignore();
        match tokio::time::timeout(BACKGROUND_TIMEOUT, pipe.query_async::<()>(&mut connection))
            .await
        {
            Ok(Ok(())) => self.offenders.mark_shared(&local),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "could not write this process's bans to the shared store")
            }
            Err(_) => {
                tracing::warn!("could not write this process's bans to the shared store in time")
            }
        }
    }

    /// Reads every ban in the store into the mirror, and deletes those that have ended.
    async fn reload_bans(&self, mut connection: MultiplexedConnection) -> Result<(), String> {
        let started = Instant::now();
        let bans_key = self.shared.key(&["bans"]);
        let all: HashMap<String, String> = match tokio::time::timeout(
            BACKGROUND_TIMEOUT,
            redis::cmd("HGETALL")
                .arg(&bans_key)
                .query_async(&mut connection),
        )
        .await
        {
            Ok(Ok(all)) => all,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("reading the bans took too long".to_owned()),
        };
        let wall = SystemTime::now();
        let now = Instant::now();
        let mut bans = Vec::with_capacity(all.len().min(MAX_BANS));
        let mut ended = Vec::new();
        for (field, value) in &all {
            match parse_ban(field, value, now) {
                Some(ban) if ban.until > wall => bans.push(ban),
                // Ended, or not written by robotsguard: nothing a request should be refused for.
                _ => ended.push(field.as_str()),
            }
        }
        if !ended.is_empty() {
            // Only fields that still hold what was read: a ban imposed again since stays.
            let mut pipe = redis::pipe();
            for field in &ended {
                pipe.cmd("HDEL").arg(&bans_key).arg(*field).ignore();
            }
            if let Ok(Err(e)) =
                tokio::time::timeout(BACKGROUND_TIMEOUT, pipe.query_async::<()>(&mut connection))
                    .await
            {
                tracing::debug!(error = %e, "could not delete ended bans from the shared store");
            }
        }
        self.offenders.mirror(bans, started, now);
        Ok(())
    }
}

/// A history entry: `UNTIL_MS KIND\nBODY`, KIND `rules` (BODY the robots.txt), `allow` or
/// `disallow` (everything, no body).
fn history_entry(copy: &RobotsCopy, until: SystemTime) -> Vec<u8> {
    let kind = match copy.policy {
        Policy::Rules(_) => "rules",
        Policy::AllowAll => "allow",
        Policy::DisallowAll => "disallow",
    };
    let mut entry = format!("{} {kind}\n", unix_millis(until)).into_bytes();
    if matches!(copy.policy, Policy::Rules(_)) {
        entry.extend_from_slice(&copy.body);
    }
    entry
}

/// A history entry read back, reusing the parsed copy of an entry already `known`; `None` for
/// anything robotsguard did not write.
fn parse_history_entry(entry: &[u8], max_size: usize, known: &[EndedCopy]) -> Option<EndedCopy> {
    let newline = entry.iter().position(|&b| b == b'\n')?;
    let head = std::str::from_utf8(&entry[..newline]).ok()?;
    let body = &entry[newline + 1..];
    let (until, kind) = head.split_once(' ')?;
    let until = from_unix_millis(until.parse().ok()?);
    let same = |copy: &RobotsCopy| match (&copy.policy, kind) {
        (Policy::Rules(_), "rules") => copy.body.as_ref() == body,
        (Policy::AllowAll, "allow") | (Policy::DisallowAll, "disallow") => true,
        _ => false,
    };
    if let Some((copy, _)) = known.iter().find(|(copy, at)| *at == until && same(copy)) {
        return Some((copy.clone(), until));
    }
    let reason = "an earlier robots.txt (shared state store)".to_owned();
    let copy = match kind {
        "rules" => RobotsCopy::from_body(
            bytes::Bytes::copy_from_slice(body),
            max_size,
            CopyOutcome::Ok,
            reason,
        ),
        "allow" => RobotsCopy::without_rules(Policy::AllowAll, CopyOutcome::Ok, reason),
        "disallow" => RobotsCopy::without_rules(Policy::DisallowAll, CopyOutcome::Ok, reason),
        _ => return None,
    };
    Some((Arc::new(copy), until))
}

/// A ban as the store writes it; `None` for anything else.
fn parse_ban(field: &str, value: &str, now: Instant) -> Option<Ban> {
    let (client, origin) = field.split_once(' ')?;
    let client: IpAddr = client.parse().ok()?;
    let mut numbers = value.split(' ').map(str::parse::<u64>);
    let until = from_unix_millis(numbers.next()?.ok()?);
    let since = from_unix_millis(numbers.next()?.ok()?);
    let strikes = u32::try_from(numbers.next()?.ok()?).ok()?;
    Some(Ban::new(origin, client, since, until, strikes, now))
}

#[async_trait]
impl BackgroundService for StoreService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut seen = Seen::default();
        let mut ticks = tokio::time::interval(CHECK_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let stopping = tokio::select! {
                _ = ticks.tick() => false,
                _ = shutdown.wait_for(|stop| *stop) => true,
            };
            if stopping {
                break;
            }
            self.check(&mut seen).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bans_are_read_back_as_written_and_anything_else_is_refused() {
        let now = Instant::now();
        let since = SystemTime::now();
        let until = since + Duration::from_secs(3600);
        let field = Shared::ban_field("shop", [203, 0, 113, 9].into());
        let value = format!("{} {} 20", unix_millis(until), unix_millis(since));
        let ban = parse_ban(&field, &value, now).expect("a ban as written");
        assert_eq!(&*ban.origin, "shop");
        assert_eq!(ban.client, IpAddr::from([203, 0, 113, 9]));
        assert_eq!(ban.strikes, 20);
        assert_eq!(unix_millis(ban.until), unix_millis(until));
        let v6 = Shared::ban_field("blog.v2", "2001:db8::1".parse().expect("an address"));
        assert!(parse_ban(&v6, &value, now).is_some());
        for (field, value) in [
            ("shop", value.as_str()),
            ("not-an-address shop", value.as_str()),
            (field.as_str(), "12 34"),
            (field.as_str(), "x 34 5"),
            (field.as_str(), ""),
        ] {
            assert!(
                parse_ban(field, value, now).is_none(),
                "{field:?} {value:?}"
            );
        }
    }
}
