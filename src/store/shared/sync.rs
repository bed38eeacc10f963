//! The shared store's background sync ([`StoreService`]): each second it checks the server,
//! marks the store up or down and reconnects; it mirrors the store's bans and its record of
//! robots.txt readers into this process's tables, shares the bans imposed here while the store
//! was down, and publishes and reloads the robots.txt history. The per-request commands are the
//! parent module's ([`super::Shared`]).

use super::*;

/// Keeps the shared store connected, marks it up or down, and mirrors its bans
/// (`Guard::services` runs it).
pub struct StoreService {
    shared: Arc<Shared>,
    /// The newer key schema last logged (0: none), so that each is said once.
    newer_schema_logged: std::sync::atomic::AtomicU64,
    offenders: Arc<Offenders>,
    reads: Arc<crate::tables::compliance::RobotsReads>,
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
    /// Checks in a row the connection did not answer in time.
    slow_checks: u32,
    /// Up to when (store milliseconds) robots.txt reads were mirrored.
    readers_until: Option<u64>,
}

/// How long a subscription the store refused waits before it is asked for again.
const RESUBSCRIBE_AFTER_REFUSAL: Duration = Duration::from_secs(60);

/// The least time between checks that announcements woke: a storm of bans costs a reload of the
/// ban list at most this often, not once per ban.
const ANNOUNCED_CHECK_GAP: Duration = Duration::from_millis(200);

/// Checks in a row without an answer after which the connection is replaced: a store that went
/// away without closing it (its address gone, a dropped flow) would otherwise keep it, and this
/// process off the store, until TCP gives up on it many minutes later.
const SLOW_CHECKS_BEFORE_RECONNECT: u32 = 3;

impl StoreService {
    pub(in crate::store) fn new(
        shared: Arc<Shared>,
        offenders: Arc<Offenders>,
        reads: Arc<crate::tables::compliance::RobotsReads>,
        live: Arc<Live>,
    ) -> StoreService {
        StoreService {
            shared,
            newer_schema_logged: std::sync::atomic::AtomicU64::new(0),
            offenders,
            reads,
            live,
        }
    }

    /// Mirrors the robots.txt reads any replica recorded since the last check (and forgets
    /// those older than a day in the store).
    async fn mirror_readers(&self, mut connection: StoreConnection, seen: &mut Seen) {
        let now = unix_millis(SystemTime::now());
        let day = u64::try_from(REMEMBERED.as_millis()).unwrap_or(u64::MAX);
        // A little overlap: two replicas' clocks, and reads written as this check ran.
        let since = seen
            .readers_until
            .map_or(now.saturating_sub(day), |until| until.saturating_sub(2_000));
        let key = self.shared.key(&[READERS]);
        let mut pipe = redis::pipe();
        pipe.cmd("ZREMRANGEBYSCORE")
            .arg(&key)
            .arg("-inf")
            .arg(format!("({}", now.saturating_sub(day)))
            .ignore()
            .cmd("ZRANGEBYSCORE")
            .arg(&key)
            .arg(since)
            .arg("+inf")
            .arg("WITHSCORES")
            .arg("LIMIT")
            .arg(0)
            .arg(READERS_PER_CHECK);
        let read = tokio::time::timeout(
            BACKGROUND_TIMEOUT,
            pipe.query_async::<(Vec<(String, u64)>,)>(&mut connection),
        )
        .await;
        let (entries,) = match read {
            Ok(Ok(entries)) => entries,
            Ok(Err(e)) => return self.background_failed("readers", e.into()),
            Err(_) => {
                return self.background_failed("readers", Failure::timeout("no answer within 2s"))
            }
        };
        let here = Instant::now();
        let mut latest = since;
        for (member, at) in &entries {
            latest = latest.max(*at);
            let Some((origin, client)) = member.split_once(' ') else {
                continue;
            };
            let Ok(client) = client.parse::<IpAddr>() else {
                continue;
            };
            let age = Duration::from_millis(now.saturating_sub(*at));
            if let Some(left) = REMEMBERED.checked_sub(age) {
                self.reads.record_until(origin, client, here + left, here);
            }
        }
        seen.readers_until = Some(latest.max(if entries.len() < READERS_PER_CHECK {
            now
        } else {
            latest
        }));
    }

    /// One check: connect if needed, read the versions of the bans and of the robots.txt
    /// histories within the request timeout (the store is up when it answers in time), write the
    /// bans imposed while it was not and this process's ended robots.txt copies, and reload what
    /// changed. A failed reload or write is tried again at the next check; only the version read
    /// decides whether requests use the store.
    async fn check(&self, seen: &mut Seen) {
        let shared = &self.shared;
        let connection = match shared.connection.load_full() {
            Some(connection) => (*connection).clone(),
            None => match self.connect().await {
                Ok(connection) => {
                    self.load_request_scripts(connection.clone()).await;
                    shared.connection.store(Some(Arc::new(connection.clone())));
                    // A new connection may be to a server that lost its data (a restart without
                    // persistence): read everything again.
                    *seen = Seen::default();
                    connection
                }
                Err(failure) => {
                    self.down(failure);
                    return;
                }
            },
        };
        let mut probe = connection.clone();
        let mut versions = redis::cmd("MGET");
        versions
            .arg(shared.key(&["bans", "version"]))
            .arg(shared.key(&[ROBOTS_VERSION]))
            .arg(shared.key(&[SCHEMA_KEY]));
        let (bans_version, robots_version, schema) = match tokio::time::timeout(
            shared.timeout,
            versions.query_async::<(Option<i64>, Option<i64>, Option<Vec<u8>>)>(&mut probe),
        )
        .await
        {
            Ok(Ok((bans, robots, schema))) => (bans.unwrap_or(0), robots.unwrap_or(0), schema),
            Ok(Err(e)) => {
                // A fresh connection next time: this one may be broken.
                shared.connection.store(None);
                self.down(e.into());
                return;
            }
            // Slow, maybe not broken: the same connection is asked again at the next check,
            // a few times.
            Err(_) => {
                seen.slow_checks += 1;
                if seen.slow_checks >= SLOW_CHECKS_BEFORE_RECONNECT {
                    seen.slow_checks = 0;
                    shared.connection.store(None);
                }
                self.down(Failure::timeout("no answer within state.redis.timeout"));
                return;
            }
        };
        seen.slow_checks = 0;
        if !shared.up.swap(true, Ordering::AcqRel) {
            METRICS.state_backend_up.set(1);
            tracing::info!(url = %shared.shown_url, "the shared state store is reachable: state is shared");
        }
        self.check_schema(connection.clone(), schema.as_deref())
            .await;
        self.share_local_bans(connection.clone()).await;
        self.mirror_readers(connection.clone(), seen).await;
        if seen.bans_version != Some(bans_version) {
            match self.reload_bans(connection.clone()).await {
                Ok(()) => seen.bans_version = Some(bans_version),
                Err(failure) => self.background_failed("reload_bans", failure),
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
                Err(failure) => self.background_failed("robots_history", failure),
            }
        }
    }

    /// Compares the store's key schema with this build's: writes it when the store has none
    /// (the first replica, or a store that lost it), and says once when it is newer (a newer
    /// release is running beside this one). An unreadable value counts as newer: something
    /// other than this build wrote it.
    async fn check_schema(&self, mut connection: StoreConnection, schema: Option<&[u8]>) {
        let Some(schema) = schema else {
            let mut write = redis::cmd("SET");
            write
                .arg(self.shared.key(&[SCHEMA_KEY]))
                .arg(SCHEMA)
                .arg("NX");
            match tokio::time::timeout(
                BACKGROUND_TIMEOUT,
                write.query_async::<Option<String>>(&mut connection),
            )
            .await
            {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => self.background_failed("schema", e.into()),
                Err(_) => self.background_failed("schema", Failure::timeout("no answer")),
            }
            return;
        };
        let version = std::str::from_utf8(schema)
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
            .unwrap_or(u64::MAX);
        if version <= SCHEMA {
            METRICS.state_schema_newer.set(0);
            self.newer_schema_logged.store(0, Ordering::Relaxed);
            return;
        }
        METRICS.state_schema_newer.set(1);
        if self.newer_schema_logged.swap(version, Ordering::Relaxed) != version {
            let found = String::from_utf8_lossy(&schema[..schema.len().min(32)])
                .escape_debug()
                .to_string();
            tracing::warn!(
                url = %self.shared.shown_url,
                store_schema = %found,
                this_schema = SCHEMA,
                "the shared state store's keys carry a newer schema than this release reads: a newer release runs beside this one; this replica keeps serving with the keys it knows until it is upgraded"
            );
        }
    }

    /// Writes this process's ended robots.txt copies to the origins' histories in the store.
    async fn publish_robots_history(&self, mut connection: StoreConnection) {
        let snapshot = self.live.load();
        let shared = &self.shared;
        let cutoff = history_cutoff();
        let lifetime = u64::try_from(HISTORY.as_millis()).unwrap_or(u64::MAX);
        for origin in &snapshot.origins {
            let ended = origin.robots.take_unpublished();
            if ended.is_empty() {
                continue;
            }
            let mut invocation = shared.publish_history.prepare_invoke();
            invocation
                .key(shared.key(&[ROBOTS_HISTORY, origin.name()]))
                .key(shared.key(&[ROBOTS_FORGOTTEN, origin.name()]))
                .key(shared.key(&[ROBOTS_VERSION]))
                .arg(cutoff)
                .arg(HISTORY_COPIES)
                .arg(lifetime);
            for (copy, until) in &ended {
                invocation
                    .arg(unix_millis(*until))
                    .arg(history_member(copy));
            }
            match tokio::time::timeout(
                BACKGROUND_TIMEOUT,
                invocation.invoke_async::<i64>(&mut connection),
            )
            .await
            {
                Ok(Ok(_)) => {}
                failed => {
                    let failure = match failed {
                        Ok(Err(e)) => e.into(),
                        _ => Failure::timeout("no answer"),
                    };
                    self.background_failed("robots_history", failure);
                    origin.robots.keep_unpublished(ended);
                    return;
                }
            }
        }
    }

    /// Reads every origin's robots.txt history from the store into its slot: the copies any
    /// replica had in force over the last 24 hours, and until when copies were forgotten.
    async fn load_robots_history(&self, mut connection: StoreConnection) -> Result<(), Failure> {
        let snapshot = self.live.load();
        let shared = &self.shared;
        let cutoff = history_cutoff();
        for origins in snapshot.origins.chunks(HISTORY_ORIGINS_PER_ROUND_TRIP) {
            let mut pipe = redis::pipe();
            for origin in origins {
                pipe.cmd("ZRANGEBYSCORE")
                    .arg(shared.key(&[ROBOTS_HISTORY, origin.name()]))
                    .arg(cutoff)
                    .arg("+inf")
                    .arg("WITHSCORES")
                    .cmd("GET")
                    .arg(shared.key(&[ROBOTS_FORGOTTEN, origin.name()]));
            }
            let replies: Vec<redis::Value> =
                match tokio::time::timeout(BACKGROUND_TIMEOUT, pipe.query_async(&mut connection))
                    .await
                {
                    Ok(Ok(replies)) => replies,
                    Ok(Err(e)) => return Err(e.into()),
                    Err(_) => {
                        return Err(Failure::timeout(
                            "reading the robots.txt histories took too long",
                        ))
                    }
                };
            let mut replies = replies.into_iter();
            for origin in origins {
                let (Some(entries), Some(forgotten)) = (replies.next(), replies.next()) else {
                    return Err(Failure {
                        kind: FailureKind::Error,
                        why: "a short answer to the robots.txt history read".to_owned(),
                    });
                };
                let entries: Vec<Vec<u8>> = redis::from_redis_value(entries)?;
                let forgotten: Option<u64> = redis::from_redis_value(forgotten)?;
                let known = origin.robots.shared_history();
                let max_size = origin.robots.settings.max_size;
                let copies = entries
                    .chunks_exact(2)
                    .filter_map(|pair| parse_history_entry(&pair[0], &pair[1], max_size, &known))
                    .collect();
                origin
                    .robots
                    .set_shared_history(copies, forgotten.map(from_unix_millis));
            }
        }
        Ok(())
    }

    /// Loads the scripts requests run into the server before requests use a new connection: a
    /// request's script then costs one round trip, not a refused `EVALSHA` and the script sent
    /// again. A failure is only logged: the invocation falls back to sending the script.
    async fn load_request_scripts(&self, mut connection: StoreConnection) {
        for script in [&self.shared.strike, &self.shared.disguised] {
            match tokio::time::timeout(BACKGROUND_TIMEOUT, script.load_async(&mut connection)).await
            {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "could not load a script into the shared store");
                }
                Err(_) => tracing::debug!("loading a script into the shared store took too long"),
            }
        }
    }

    async fn connect(&self) -> Result<StoreConnection, Failure> {
        match tokio::time::timeout(
            BACKGROUND_TIMEOUT,
            self.shared.endpoint.connect(
                BACKGROUND_TIMEOUT,
                self.shared.timeout.max(BACKGROUND_TIMEOUT),
                MAX_IN_FLIGHT,
            ),
        )
        .await
        {
            Ok(Ok(connection)) => Ok(connection),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(Failure::timeout("connecting took too long")),
        }
    }

    /// The check failed: requests decide from memory until one succeeds.
    fn down(&self, failure: Failure) {
        // Whatever the answer, a check that failed takes the store down.
        let kind = if failure.kind.takes_the_store_down() {
            failure.kind
        } else {
            FailureKind::Error
        };
        self.shared.failed("check", kind, &failure.why);
    }

    /// Background work that failed with the store answering its checks: counted and logged, and
    /// tried again at the next check; requests keep using the store.
    fn background_failed(&self, operation: &'static str, failure: Failure) {
        METRICS
            .state_backend_errors
            .with_label_values(&[operation, failure.kind.label()])
            .inc();
        crate::logs::state_store_failed(
            &self.shared.shown_url,
            operation,
            failure.kind.label(),
            &failure.why,
        );
    }

    /// Writes the bans this process imposed while the store was unreachable (at every check
    /// until that succeeds).
    async fn share_local_bans(&self, mut connection: StoreConnection) {
        let now = Instant::now();
        let local = self.offenders.unshared(now);
        if local.is_empty() {
            return;
        }
        let shared = &self.shared;
        let wall = SystemTime::now();
        let mut invocation = shared.share.prepare_invoke();
        invocation
            .key(shared.key(&["bans"]))
            .key(shared.key(&["bans", "version"]));
        for ban in &local {
            let left = ban.until.duration_since(wall).unwrap_or(Duration::ZERO);
            let age = wall.duration_since(ban.since).unwrap_or(Duration::ZERO);
            invocation
                .arg(Shared::ban_field(
                    &ban.origin,
                    ban.client,
                    ban.agent.as_ref(),
                ))
                .arg(u64::try_from(left.as_millis()).unwrap_or(u64::MAX))
                .arg(u64::try_from(age.as_millis()).unwrap_or(u64::MAX))
                .arg(ban.strikes)
                .arg(earned_text(ban.cause, &ban.crawler, ban.agent.as_ref()));
        }
        match tokio::time::timeout(
            BACKGROUND_TIMEOUT,
            invocation.invoke_async::<i64>(&mut connection),
        )
        .await
        {
            Ok(Ok(_)) => self.offenders.mark_shared(&local),
            Ok(Err(e)) => self.background_failed("share_bans", e.into()),
            Err(_) => self.background_failed("share_bans", Failure::timeout("no answer")),
        }
    }

    /// Reads every ban in the store into the mirror (times relative to the server's clock), and
    /// deletes those that have ended.
    async fn reload_bans(&self, mut connection: StoreConnection) -> Result<(), Failure> {
        let started = Instant::now();
        let bans_key = self.shared.key(&["bans"]);
        let mut pipe = redis::pipe();
        pipe.cmd("TIME").cmd("HGETALL").arg(&bans_key);
        let ((seconds, micros), all): ((u64, u64), HashMap<Vec<u8>, Vec<u8>>) =
            match tokio::time::timeout(BULK_READ_TIMEOUT, pipe.query_async(&mut connection)).await {
                Ok(Ok(answer)) => answer,
                Ok(Err(e)) => return Err(e.into()),
                Err(_) => return Err(Failure::timeout("reading the bans took too long")),
            };
        let server_now = seconds.saturating_mul(1000).saturating_add(micros / 1000);
        let now = Instant::now();
        let mut bans = Vec::with_capacity(all.len().min(MAX_BANS));
        let mut ended = Vec::new();
        for (field, value) in &all {
            match parse_ban(field, value, server_now, now) {
                Some(ban) => bans.push(ban),
                // Ended, or not written by robotsguard: nothing a request should be refused for.
                None => ended.push(field.as_slice()),
            }
        }
        if !ended.is_empty() {
            let mut invocation = self.shared.prune.prepare_invoke();
            invocation.key(&bans_key);
            for field in &ended {
                invocation.arg(*field);
            }
            if let Ok(Err(e)) = tokio::time::timeout(
                BACKGROUND_TIMEOUT,
                invocation.invoke_async::<i64>(&mut connection),
            )
            .await
            {
                tracing::debug!(error = %e, "could not delete ended bans from the shared store");
            }
        }
        self.offenders.mirror(bans, started, now);
        Ok(())
    }
}

/// The oldest end time a history keeps: [`HISTORY`] ago, in milliseconds.
pub(super) fn history_cutoff() -> u64 {
    unix_millis(
        SystemTime::now()
            .checked_sub(HISTORY)
            .unwrap_or(SystemTime::UNIX_EPOCH),
    )
}

/// A copy as a member of a history: `KIND\nBODY`, KIND `rules` (BODY the robots.txt), `allow` or
/// `disallow` (everything, no body). The same content is one member whichever replica writes it.
pub(super) fn history_member(copy: &RobotsCopy) -> Vec<u8> {
    let kind: &[u8] = match copy.policy {
        Policy::Rules(_) => b"rules\n",
        Policy::AllowAll => b"allow\n",
        Policy::DisallowAll => b"disallow\n",
    };
    let mut member = kind.to_vec();
    if matches!(copy.policy, Policy::Rules(_)) {
        member.extend_from_slice(&copy.body);
    }
    member
}

/// A history member and its score read back, reusing the parsed copy of an entry already
/// `known`; `None` for anything robotsguard did not write.
pub(super) fn parse_history_entry(
    member: &[u8],
    score: &[u8],
    max_size: usize,
    known: &[EndedCopy],
) -> Option<EndedCopy> {
    let until: f64 = std::str::from_utf8(score).ok()?.parse().ok()?;
    if !until.is_finite() || until < 0.0 {
        return None;
    }
    // Scores are whole milliseconds well below 2^53: the conversion is exact.
    let until = from_unix_millis(until as u64);
    let newline = member.iter().position(|&b| b == b'\n')?;
    let (kind, body) = (&member[..newline], &member[newline + 1..]);
    let same = |copy: &RobotsCopy| match (&copy.policy, kind) {
        (Policy::Rules(_), b"rules") => copy.body.as_ref() == body,
        (Policy::AllowAll, b"allow") | (Policy::DisallowAll, b"disallow") => true,
        _ => false,
    };
    if let Some((copy, _)) = known.iter().find(|(copy, _)| same(copy)) {
        return Some((copy.clone(), until));
    }
    let reason = "an earlier robots.txt (shared state store)".to_owned();
    let copy = match kind {
        b"rules" => RobotsCopy::from_body(
            bytes::Bytes::copy_from_slice(body),
            max_size,
            CopyOutcome::Ok,
            reason,
        ),
        b"allow" => RobotsCopy::without_rules(Policy::AllowAll, CopyOutcome::Ok, reason),
        b"disallow" => RobotsCopy::without_rules(Policy::DisallowAll, CopyOutcome::Ok, reason),
        _ => return None,
    };
    Some((Arc::new(copy), until))
}

/// The word [`escape_word`] wrote.
pub(super) fn unescape_word(word: &str) -> Option<String> {
    if word == "-" {
        return Some(String::new());
    }
    let bytes = word.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = word.get(at + 1..at + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A client as a ban's field names it: an address (one-address network), or a prefix at a
/// network boundary.
fn parse_network(text: &str) -> Option<ipnet::IpNet> {
    if let Ok(address) = text.parse::<IpAddr>() {
        return Some(ipnet::IpNet::from(address));
    }
    let network = text.parse::<ipnet::IpNet>().ok()?;
    (network == network.trunc()).then_some(network)
}

/// A ban as the store writes it (`UNTIL SINCE STRIKES [CAUSE CRAWLER [USER-AGENT]]` in the
/// server's milliseconds), placed on this process's clocks by its distance from `server_now`;
/// `None` when it has ended or is not a ban robotsguard wrote.
pub(super) fn parse_ban(field: &[u8], value: &[u8], server_now: u64, now: Instant) -> Option<Ban> {
    let mut parts = std::str::from_utf8(field).ok()?.split(' ');
    let client = parse_network(parts.next()?)?;
    let origin = parts.next()?;
    let digest = match parts.next() {
        None => None,
        Some(bound) => Some(AgentDigest::from_hex(bound.strip_prefix("ua:")?)?),
    };
    if origin.is_empty() || parts.next().is_some() {
        return None;
    }
    let mut words = std::str::from_utf8(value).ok()?.splitn(6, ' ');
    let mut number = || words.next()?.parse::<u64>().ok();
    let until = number()?;
    let since = number()?;
    let strikes = u32::try_from(number()?).ok()?;
    let cause = words.next().map_or(BanCause::Unknown, BanCause::parse);
    let crawler = match words.next() {
        Some(crawler) => unescape_word(crawler)?,
        None => UNKNOWN_CRAWLER.to_owned(),
    };
    let agent = match (digest, words.next()) {
        (Some(digest), shown) => Some(BoundAgent::from_parts(digest, shown.unwrap_or(""))),
        (None, _) => None,
    };
    if until <= server_now {
        return None;
    }
    let wall = SystemTime::now();
    let left = Duration::from_millis(until - server_now);
    let age = Duration::from_millis(server_now.saturating_sub(since));
    Some(
        Ban::new(
            origin,
            client,
            wall.checked_sub(age).unwrap_or(wall),
            wall + left,
            strikes,
            now,
        )
        .earned_by(cause, &crawler, agent),
    )
}

impl StoreService {
    /// Wakes the check whenever a process announces a change to the bans (the scripts publish
    /// `bans:version` on its own name), so that a ban reaches every replica's mirror within a
    /// round trip; subscribes again a check interval after the subscription fails or ends. The
    /// checks go on regardless: a lost subscription only delays mirrors to the next one.
    async fn listen_for_ban_changes(&self, wake: &tokio::sync::Notify) {
        use futures::StreamExt;
        let channel = self.shared.key(&["bans", "version"]);
        let mut refused_logged = false;
        loop {
            let subscribed = tokio::time::timeout(BACKGROUND_TIMEOUT, async {
                let mut pubsub = self.shared.endpoint.pubsub().await?;
                pubsub.subscribe(&channel).await?;
                Ok::<_, redis::RedisError>(pubsub)
            })
            .await;
            match subscribed {
                Ok(Ok(mut pubsub)) => {
                    let mut announcements = pubsub.on_message();
                    while announcements.next().await.is_some() {
                        wake.notify_one();
                    }
                    tracing::debug!(url = %self.shared.shown_url, "ban announcements ended; subscribing again");
                }
                Ok(Err(e)) => {
                    // A refusal (an ACL without the channel) is said once, and asked again
                    // rarely: the checks keep the mirror current meanwhile.
                    if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm) {
                        if !refused_logged {
                            refused_logged = true;
                            tracing::warn!(url = %self.shared.shown_url, channel, error = %e, "the shared store refuses ban announcements to this user: replicas see bans at their next check (each second) instead");
                        }
                        tokio::time::sleep(RESUBSCRIBE_AFTER_REFUSAL).await;
                    }
                    tracing::debug!(url = %self.shared.shown_url, error = %e, "cannot subscribe to ban announcements");
                }
                Err(_) => {
                    tracing::debug!(url = %self.shared.shown_url, "subscribing to ban announcements took too long");
                }
            }
            tokio::time::sleep(CHECK_EVERY).await;
        }
    }
}

#[async_trait]
impl BackgroundService for StoreService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut seen = Seen::default();
        let mut ticks = tokio::time::interval(CHECK_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let wake = tokio::sync::Notify::new();
        let listening = self.listen_for_ban_changes(&wake);
        tokio::pin!(listening);
        let mut last_check = Instant::now();
        loop {
            let (stopping, announced) = tokio::select! {
                _ = ticks.tick() => (false, false),
                _ = wake.notified() => (false, true),
                // Polled here so that it runs; it never ends.
                _ = &mut listening => (false, false),
                _ = shutdown.wait_for(|stop| *stop) => (true, false),
            };
            let gap = ANNOUNCED_CHECK_GAP.saturating_sub(last_check.elapsed());
            let stopping = stopping
                || (announced
                    && !gap.is_zero()
                    && tokio::select! {
                        _ = tokio::time::sleep(gap) => false,
                        _ = shutdown.wait_for(|stop| *stop) => true,
                    });
            if stopping {
                break;
            }
            self.check(&mut seen).await;
            last_check = Instant::now();
        }
    }
}
