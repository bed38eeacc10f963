//! Logging: the `tracing` subscriber (human text or JSON lines on stderr), written by a background
//! thread so a slow stderr never stalls a proxy worker, the rate-limited line for each blocked
//! or would-block request, and the access log (beside the other lines, or apart: stdout or a
//! file reopened on SIGHUP and SIGUSR1).
//!
//! In JSON, every line has one envelope: `time` (RFC 3339, microseconds), `level`, `kind`
//! (`event` or `access`) and `request_id` where there is one; an event's fields follow in
//! `fields` (with its `message`) and its `target`, an access line's beside the envelope.
//!
//! Under a flood of disallowed requests a line per request would cost more than the requests
//! themselves and bury everything else, so at most 100 such lines are
//! written per second; the rest are counted and reported once a second in one line
//! (`suppressed=N`). Every request is still counted in `robotsguard_requests_total`.

use std::io::Write;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use tracing_appender::non_blocking::{NonBlocking, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::fmt::writer::BoxMakeWriter;

use crate::enforce::Decision;

/// Blocked and would-block request lines written per second at most; the rest are counted.
pub(crate) const REQUEST_LINES_PER_SECOND: u32 = 100;

/// Bytes of a request path written to a log line; longer paths are cut (a path is client input
/// and may be tens of kilobytes).
const MAX_LOGGED_PATH: usize = 1024;
/// Bytes of a request method kept in a log line: any token is a method, and a client can send a
/// long one.
const MAX_LOGGED_METHOD: usize = 32;

/// Lines buffered for the writer thread; when stderr falls this far behind, new lines are
/// dropped (and counted) rather than making the proxy wait.
const QUEUE_LINES: usize = 16 * 1024;

// ------------------------------------------------------------------------------------------------
// The subscriber and its non-blocking stderr.

/// The writer thread's input (tracing-appender's lossy non-blocking writer on stderr), shared by
/// the subscriber and the access log, and the guard whose drop writes what is queued.
struct Output {
    writer: NonBlocking,
    guard: Mutex<Option<WorkerGuard>>,
    /// Dropped lines already reported.
    reported_drops: AtomicUsize,
}

/// `None` when the writer thread could not start.
static OUTPUT: OnceLock<Option<Output>> = OnceLock::new();

/// The non-blocking stderr, started on first use.
fn output() -> Option<&'static Output> {
    OUTPUT.get_or_init(start_output).as_ref()
}

/// The non-blocking stderr, once [`init`] started it.
fn started_output() -> Option<&'static Output> {
    OUTPUT.get().and_then(Option::as_ref)
}

fn start_output() -> Option<Output> {
    // tracing-appender panics when it cannot start its thread; logging then goes to stderr
    // directly rather than taking the process down.
    let started = std::panic::catch_unwind(|| {
        NonBlockingBuilder::default()
            .lossy(true)
            .buffered_lines_limit(QUEUE_LINES)
            .thread_name("robotsguard-log")
            .finish(std::io::stderr())
    });
    match started {
        Ok((writer, guard)) => Some(Output {
            writer,
            guard: Mutex::new(Some(guard)),
            reported_drops: AtomicUsize::new(0),
        }),
        Err(_) => {
            eprintln!("warning: no log writer thread; log lines are written in place");
            None
        }
    }
}

/// Installs the global subscriber: text (`json: false`) or one JSON object per line in the
/// envelope the access log shares, on stderr, at the level `RUST_LOG` sets (default `info`).
pub fn init(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colour codes only help a person at a terminal; in files and log pipelines they are noise.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let writer = match output() {
        Some(output) => BoxMakeWriter::new(output.writer.clone()),
        None => BoxMakeWriter::new(std::io::stderr),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(writer);
    // `set_global_default`, not `try_init`: the latter would also route `log` records
    // (pingora's) straight to the subscriber, unlimited and unescaped.
    let result = if json {
        tracing::subscriber::set_global_default(builder.event_format(JsonEnvelope).finish())
    } else {
        tracing::subscriber::set_global_default(builder.finish())
    };
    if let Err(e) = result {
        eprintln!("warning: logging is not set up: {e}");
        return;
    }
    // pingora's messages at INFO and above; its DEBUG lines are per-request noise.
    let level = std::env::var("RUST_LOG")
        .ok()
        .filter(|filter| filter.contains("pingora") && filter.contains("debug"))
        .map_or(log::LevelFilter::Info, |_| log::LevelFilter::Debug);
    if log::set_boxed_logger(Box::new(LibraryLog)).is_ok() {
        log::set_max_level(level);
    }
}

/// Writes every line logged so far to stderr (and access lines to their own output), waiting
/// at most `timeout`; call once, before exiting (lines logged afterwards are lost).
pub fn flush(timeout: Duration) {
    report_dropped();
    if let Some(sink) = ACCESS_SINK.swap(None) {
        // Dropping the sink's guard writes what its thread still holds.
        let (done, finished) = std::sync::mpsc::sync_channel(1);
        let spawned = std::thread::Builder::new()
            .name("robotsguard-access-flush".into())
            .spawn(move || {
                drop(sink);
                let _ = done.send(());
            });
        if spawned.is_ok() {
            let _ = finished.recv_timeout(timeout);
        }
    }
    let Some(guard) = started_output().and_then(|output| output.guard.lock().ok()?.take()) else {
        return;
    };
    // Dropping the guard waits for the writer thread; a thread bounds that wait by `timeout`.
    let (done, finished) = std::sync::mpsc::sync_channel(1);
    let dropper = std::thread::Builder::new()
        .name("robotsguard-log-flush".into())
        .spawn(move || {
            drop(guard);
            let _ = done.send(());
        });
    if dropper.is_ok() {
        let _ = finished.recv_timeout(timeout);
    }
}

/// Says how many lines the writer dropped since the last report, if any.
fn report_dropped() {
    let Some(output) = started_output() else {
        return;
    };
    let total = output.writer.error_counter().dropped_lines();
    let before = output.reported_drops.swap(total, Ordering::Relaxed);
    let dropped = total.saturating_sub(before);
    if dropped > 0 {
        // Goes through the writer like any line, so it is formatted as text or JSON.
        tracing::warn!(
            dropped,
            "log lines dropped: stderr was not keeping up with the proxy"
        );
    }
}

// ------------------------------------------------------------------------------------------------
// Blocked and would-block request lines.

/// Admits at most `limit` events per one-second window and counts the rest. Lock-free: a flood
/// of blocked requests on every worker costs a clock read and two atomic adds each.
pub(crate) struct RateLimiter {
    limit: u32,
    started: Instant,
    /// The second (since `started`) the current window belongs to.
    window: AtomicU64,
    admitted: AtomicU32,
    suppressed: AtomicU64,
}

impl RateLimiter {
    pub fn new(limit: u32) -> RateLimiter {
        RateLimiter {
            limit,
            started: Instant::now(),
            window: AtomicU64::new(0),
            admitted: AtomicU32::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Whether this event may be logged now; if not, it is counted as suppressed.
    pub fn admit(&self) -> bool {
        self.admit_in(self.started.elapsed().as_secs())
    }

    /// [`RateLimiter::admit`] for an event in window `second`.
    pub fn admit_in(&self, second: u64) -> bool {
        let window = self.window.load(Ordering::Acquire);
        if second > window
            && self
                .window
                .compare_exchange(window, second, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            // Workers racing with this reset may see the old count for a moment: the limit is
            // approximate by a few lines, the count of suppressed lines stays exact.
            self.admitted.store(0, Ordering::Release);
        }
        if self.admitted.fetch_add(1, Ordering::AcqRel) < self.limit {
            true
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            false
        }
    }

    /// The events suppressed since the last call.
    pub fn take_suppressed(&self) -> u64 {
        self.suppressed.swap(0, Ordering::AcqRel)
    }
}

static REQUEST_LINES: LazyLock<RateLimiter> =
    LazyLock::new(|| RateLimiter::new(REQUEST_LINES_PER_SECOND));

/// Logs a blocked or would-block request (other outcomes are not logged): origin, crawler,
/// category, client address, method, path and the deciding robots.txt line. Rate-limited.
pub(crate) fn disallowed_request(
    decision: &Decision,
    client: impl FnOnce() -> String,
    method: &http::Method,
    path: &str,
    request_id: Option<&str>,
) {
    // Only the outcomes the outcome table gives a log text are logged per request.
    let Some(verb) = decision.outcome.info().log else {
        return;
    };
    if !REQUEST_LINES.admit() {
        return;
    }
    tracing::info!(
        decision = decision.outcome.as_str(),
        origin = decision.origin.name(),
        crawler = decision.crawler.as_ref().map_or("", |c| c.name()),
        category = decision.category_label(),
        client = %client(),
        method = cut(method.as_str(), MAX_LOGGED_METHOD),
        path = cut(path, MAX_LOGGED_PATH),
        line = decision.rule.as_ref().map(|r| r.line),
        rule = decision.rule.as_ref().map(|r| r.text()),
        verification = decision.verification_result().map(|r| r.as_str()),
        policy = %decision.policy(),
        request_id,
        "{verb}: {}",
        decision.reason()
    );
}

/// Bytes of client-supplied text (a request target, an error quoting one) kept in a log line.
pub(crate) const MAX_CLIENT_TEXT: usize = 256;

/// Lines about failures a client can cause (bad requests, upstream errors) per second at most.
const FAILURE_LINES_PER_SECOND: u32 = 20;

static FAILURE_LINES: LazyLock<RateLimiter> =
    LazyLock::new(|| RateLimiter::new(FAILURE_LINES_PER_SECOND));

/// `text` made safe for one log line: at most [`MAX_CLIENT_TEXT`] bytes of it, control and
/// non-ASCII bytes as `\xNN`, backslashes doubled, and a note of how much was cut.
pub(crate) fn escape_client_text(text: &[u8]) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_CLIENT_TEXT) + 16);
    for &byte in text.iter().take(MAX_CLIENT_TEXT) {
        match byte {
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(byte)),
            _ => {
                use std::fmt::Write as _;
                let _ = write!(out, "\\x{byte:02x}");
            }
        }
    }
    if text.len() > MAX_CLIENT_TEXT {
        use std::fmt::Write as _;
        let _ = write!(out, "... ({} bytes)", text.len());
    }
    out
}

/// A message of ours that quotes fetched text (an error naming a list's line, a parser's
/// excerpt), made one log line: at most [`MAX_CLIENT_TEXT`] bytes, control characters as
/// `\xNN` (or `\u{NNNN}`), everything else (backslashes included: quoted parts were escaped where
/// they were quoted) kept, and a note of how much was cut.
pub(crate) fn one_line(text: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(text.len().min(MAX_CLIENT_TEXT) + 16);
    let mut taken = 0;
    for c in text.chars() {
        if taken + c.len_utf8() > MAX_CLIENT_TEXT {
            let _ = write!(out, "... ({} bytes)", text.len());
            break;
        }
        taken += c.len_utf8();
        match c {
            c if u32::from(c) < 0x100 && c.is_control() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') => {
                let _ = write!(out, "\\u{{{:04x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// Logs a request that could not be proxied (upstream failure, bad request body, ...) at WARN,
/// rate-limited with the rest counted; the error text may quote the client and is escaped.
pub(crate) fn proxy_failure(origin: Option<&str>, status: u16, error: &str) {
    if !FAILURE_LINES.admit() {
        return;
    }
    tracing::warn!(
        origin = origin.unwrap_or("-"),
        status,
        error = %escape_client_text(error.as_bytes()),
        "request not proxied"
    );
}

/// `text` (already UTF-8) made safe for one log line without garbling what it says: at most
/// [`MAX_CLIENT_TEXT`] bytes, control characters and the ones that reorder text (bidirectional
/// overrides) as `\u{NN}`, backslashes doubled; every other character as it is (`792µs` stays
/// `792µs`, not `792\xc2\xb5s`).
pub(crate) fn escape_log_text(text: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(text.len().min(MAX_CLIENT_TEXT) + 16);
    let mut taken = 0;
    for c in text.chars() {
        taken += c.len_utf8();
        if taken > MAX_CLIENT_TEXT {
            let _ = write!(out, "... ({} bytes)", text.len());
            break;
        }
        let reorders = matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        match c {
            '\\' => out.push_str("\\\\"),
            c if c.is_control() || reorders => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// A line from a library (pingora writes through the `log` crate): at most WARN, its text escaped
/// and cut. Its warnings and errors are about connections and requests a client can cause, so
/// they are rate-limited with the failure lines; its INFO lines are about the server's own life
/// (start, shutdown) and pass.
pub(crate) fn library_line(target: &str, level: log::Level, text: &str) {
    let client_caused = matches!(level, log::Level::Error | log::Level::Warn);
    if client_caused && !FAILURE_LINES.admit() {
        return;
    }
    let text = escape_log_text(text);
    match level {
        log::Level::Error | log::Level::Warn => {
            tracing::warn!(target: "pingora", source = target, "{text}")
        }
        log::Level::Info => tracing::info!(target: "pingora", source = target, "{text}"),
        log::Level::Debug => tracing::debug!(target: "pingora", source = target, "{text}"),
        log::Level::Trace => tracing::trace!(target: "pingora", source = target, "{text}"),
    }
}

/// Lines about repeat offenders per second: many addresses can offend at once.
const OFFENDER_LINES_PER_SECOND: u32 = 10;

static OFFENDER_LINES: LazyLock<RateLimiter> =
    LazyLock::new(|| RateLimiter::new(OFFENDER_LINES_PER_SECOND));

/// Logs a repeat offender banned, or one that would be (report). Rate-limited on its own, so
/// that it neither crowds out nor is crowded out by the blocked-request lines.
pub(crate) fn offender(
    origin: &str,
    client: std::net::IpAddr,
    strikes: u32,
    ban: Option<&crate::tables::offenders::Ban>,
    request_id: Option<&str>,
) {
    if !OFFENDER_LINES.admit() {
        return;
    }
    match ban {
        Some(ban) => tracing::warn!(
            origin,
            client = %client,
            banned = %crate::client_address::shown_network(&ban.client),
            strikes,
            until = %rfc3339(ban.until),
            cause = ban.cause.as_str(),
            crawler = &*ban.crawler,
            user_agent = ban.agent.as_ref().map(|agent| agent.shown()),
            request_id,
            "client banned: it kept fetching what robots.txt disallows"
        ),
        None => tracing::info!(
            origin,
            client = %client,
            strikes,
            request_id,
            "client would be banned (offenders: report): it keeps fetching what robots.txt disallows"
        ),
    }
}

/// Logs a request for a trap path (and the ban it led to), rate-limited with the offender lines.
pub(crate) fn trap_hit(
    origin: &str,
    client: Option<std::net::IpAddr>,
    trap: &str,
    ban: Option<&crate::tables::offenders::Ban>,
    request_id: Option<&str>,
) {
    if !OFFENDER_LINES.admit() {
        return;
    }
    let client = client.map_or_else(|| "unknown".to_string(), |c| c.to_string());
    match ban {
        Some(ban) => tracing::warn!(
            origin,
            client = %client,
            trap,
            until = %rfc3339(ban.until),
            crawler = &*ban.crawler,
            user_agent = ban.agent.as_ref().map(|agent| agent.shown()),
            request_id,
            "trap hit: client banned (it asked for a path robots.txt disallows to every crawler)"
        ),
        None => tracing::warn!(
            origin,
            client = %client,
            trap,
            request_id,
            "trap hit: a client asked for a path robots.txt disallows to every crawler"
        ),
    }
}

/// Logs a request another site's page caused that would otherwise have counted toward a ban
/// (`signal`: `trap`, `disguised` or `robots_read`; `why`: the header that tells), rate-limited
/// with the offender lines.
pub(crate) fn third_party_request(
    origin: &str,
    client: Option<std::net::IpAddr>,
    signal: &str,
    why: &str,
    request_id: Option<&str>,
) {
    if !OFFENDER_LINES.admit() {
        return;
    }
    let client = client.map_or_else(|| "unknown".to_string(), |c| c.to_string());
    tracing::info!(
        origin,
        client = %client,
        signal,
        why,
        request_id,
        "a request another site's page caused (a sub-resource load, a cross-site request) is not counted toward a ban"
    );
}

/// Logs an address that became a disguised crawler, rate-limited with the offender lines.
pub(crate) fn disguised_crawler(
    origin: &str,
    client: std::net::IpAddr,
    strikes: u32,
    action: crate::config::DisguisedAction,
) {
    if !OFFENDER_LINES.admit() {
        return;
    }
    tracing::warn!(
        origin,
        client = %client,
        strikes,
        action = action.as_str(),
        "disguised crawler: it read robots.txt, then kept asking for what it disallows to every crawler, with no crawler's User-Agent"
    );
}

/// Logs the first browser request from a banned address, per ban (rate-limited with the
/// offender lines): browsers behind a banned address are people sharing it with the crawler
/// (a carrier NAT, an office, a load balancer missing from `trusted_proxies`).
pub(crate) fn banned_browser_request(
    origin: &str,
    ban: &crate::tables::offenders::Ban,
    scope: crate::config::BanScope,
    request_id: Option<&str>,
) {
    if !OFFENDER_LINES.admit() {
        return;
    }
    let what = match scope {
        crate::config::BanScope::Crawlers => "proxied (offenders.scope: crawlers)",
        crate::config::BanScope::Address => "refused (offenders.scope: address)",
    };
    tracing::warn!(
        origin,
        client = %crate::client_address::shown_network(&ban.client),
        scope = scope.as_str(),
        until = %rfc3339(ban.until),
        request_id,
        "a browser request came from a banned address and was {what}: the address may be \
         shared (a NAT, an office, a load balancer missing from trusted_proxies); \
         robotsguard_banned_browser_requests_total counts them, /bans shows them per ban"
    );
}

/// Lines about the shared state store failing per second: every request could fail.
const STATE_LINES_PER_SECOND: u32 = 1;

static STATE_LINES: LazyLock<RateLimiter> =
    LazyLock::new(|| RateLimiter::new(STATE_LINES_PER_SECOND));

/// Logs that the shared state store failed (`operation`: a request's command, the background
/// check, or background work; `kind` as `robotsguard_state_backend_errors_total` counts it) at
/// WARN, rate-limited on its own.
pub(crate) fn state_store_failed(url: &str, operation: &str, kind: &str, error: &str) {
    if !STATE_LINES.admit() {
        return;
    }
    let error = escape_client_text(error.as_bytes());
    match kind {
        "oom" => tracing::warn!(
            url,
            operation,
            kind,
            error = %error,
            "the shared state store refused a write: it is out of memory (maxmemory, nothing it may evict); decided from this process's memory, which keeps the budgets, strikes and bans it knows"
        ),
        "lost" => tracing::warn!(
            url,
            operation,
            kind,
            error = %error,
            "the shared state store no longer held what this process knew (evicted under maxmemory, or lost in a restart); what this process knew decided"
        ),
        _ => tracing::warn!(
            url,
            operation,
            kind,
            error = %error,
            "the shared state store failed; deciding from this process's memory until it answers again"
        ),
    }
}

/// Connection refusals logged per second at most (each is counted in
/// `robotsguard_connections_refused_total` whether logged or not).
const CONNECTION_LINES_PER_SECOND: u32 = 5;

static CONNECTION_LINES: LazyLock<RateLimiter> =
    LazyLock::new(|| RateLimiter::new(CONNECTION_LINES_PER_SECOND));

/// Logs that the connection layer closed a connection before serving it (`reason` as the
/// metric's label, `why` in words). Rate-limited: a flood of such connections is one line a
/// moment, not one per connection.
pub fn connection_refused(reason: &str, peer: Option<std::net::IpAddr>, why: &str) {
    if CONNECTION_LINES.admit() {
        tracing::warn!(
            reason,
            peer = %peer.map_or_else(|| "unknown".to_string(), |ip| ip.to_string()),
            "connection closed: {why}"
        );
    }
}

static EVIDENCE_LINES: LazyLock<RateLimiter> = LazyLock::new(|| RateLimiter::new(1));
static EVIDENCE_DROPS: LazyLock<RateLimiter> = LazyLock::new(|| RateLimiter::new(1));

/// Logs that an evidence record (or a robots.txt copy it needs) could not be written, at
/// ERROR: a request the evidence will not show. One line a second at most (each is counted in
/// `robotsguard_evidence_records_total{result="failed"}`).
pub(crate) fn evidence_failed(why: &str) {
    if EVIDENCE_LINES.admit() {
        tracing::error!("evidence record not written: {}", one_line(why));
    }
}

/// Logs that the evidence queue was full and a record was dropped, at WARN, one line a second
/// at most (each is counted in `robotsguard_evidence_records_total{result="dropped"}`).
pub(crate) fn evidence_dropped(queue: usize) {
    if EVIDENCE_DROPS.admit() {
        tracing::warn!(
            "evidence record dropped: {queue} records already wait for the disk (evidence.queue)"
        );
    }
}

static ADMIN_LINES: LazyLock<RateLimiter> = LazyLock::new(|| RateLimiter::new(1));

/// Logs a request the admin listener refused before answering it (a `Host` it does not answer
/// to, a state-changing request from another site): `why` in words, client text escaped by the
/// caller. One line a second at most, so that probing it cannot flood the log.
pub(crate) fn admin_refused(peer: Option<std::net::IpAddr>, why: &str) {
    if ADMIN_LINES.admit() {
        tracing::warn!(
            peer = %peer.map_or_else(|| "unknown".to_string(), |ip| ip.to_string()),
            "admin request refused: {why}"
        );
    }
}

/// Webhook failures logged per second at most (each is counted in
/// `robotsguard_webhook_events_total`).
static WEBHOOK_LINES: LazyLock<RateLimiter> = LazyLock::new(|| RateLimiter::new(1));

/// Logs that a webhook delivery was given up on (rate-limited: a receiver that is down fails
/// every event).
pub(crate) fn webhook_failed(url: &str, why: &str) {
    if WEBHOOK_LINES.admit() {
        tracing::warn!(
            url = %one_line(url),
            "webhook: event not delivered: {} (robotsguard_webhook_events_total counts every one)",
            one_line(why)
        );
    }
}

/// Request refusals logged per second at most (each is counted in
/// `robotsguard_requests_refused_total` whether logged or not).
const REFUSAL_LINES_PER_SECOND: u32 = 5;

static REFUSAL_LINES: LazyLock<RateLimiter> =
    LazyLock::new(|| RateLimiter::new(REFUSAL_LINES_PER_SECOND));

/// Logs that the connection layer refused a request before deciding it (`reason` as the metric's
/// label, `why` in words), with the client it was counted against. Rate-limited: a flooding
/// client's refusals are a line a moment, not one per stream.
pub fn request_refused(reason: &str, client: Option<std::net::IpAddr>, why: &str) {
    if REFUSAL_LINES.admit() {
        tracing::warn!(
            reason,
            client = %client.map_or_else(|| "unknown".to_string(), |ip| ip.to_string()),
            "request refused: {why}"
        );
    }
}

/// Logs that an upstream address is skipped for its cool-off (failures in a row). Rate-limited
/// with the failure lines: a dead upstream under load fails many requests.
pub(crate) fn upstream_skipped(origin: &str, address: std::net::SocketAddr) {
    if FAILURE_LINES.admit() {
        tracing::warn!(
            origin,
            upstream = %address,
            "upstream failed repeatedly; skipped for its cool-off"
        );
    }
}

/// Logs that an upstream name did not resolve (rate-limited with the failure lines).
pub(crate) fn upstream_unresolved(origin: &str, upstream: &str, error: &str, kept_addresses: bool) {
    if FAILURE_LINES.admit() {
        tracing::warn!(
            origin,
            upstream,
            error,
            "upstream name does not resolve; {}",
            if kept_addresses {
                "its last addresses stay in use"
            } else {
                "the origin answers 502 until it does"
            }
        );
    }
}

/// Logs that an active health check failed for an upstream that was up.
pub(crate) fn upstream_check_failed(origin: &str, address: std::net::SocketAddr, why: &str) {
    if FAILURE_LINES.admit() {
        tracing::warn!(
            origin,
            upstream = %address,
            error = %escape_client_text(why.as_bytes()),
            "upstream failed its health check; skipped until one passes"
        );
    }
}

/// A request id: a per-process random prefix and a counter, unique without coordination and
/// cheap to make.
pub(crate) fn new_request_id() -> http::HeaderValue {
    static PREFIX: LazyLock<u64> = LazyLock::new(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = foldhash::fast::RandomState::default().build_hasher();
        hasher.write_u32(std::process::id());
        hasher.finish()
    });
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let text = format!("{:016x}{n:016x}", *PREFIX);
    http::HeaderValue::from_str(&text).unwrap_or_else(|_| http::HeaderValue::from_static("-"))
}

/// A reverse DNS lookup for crawler verification that gave no definite answer (rate-limited:
/// clients choose the addresses looked up).
pub(crate) fn verification_lookup_failed(address: std::net::IpAddr, why: &str) {
    if FAILURE_LINES.admit() {
        tracing::warn!(
            client = %address,
            "crawler verification: reverse DNS gave no answer ({why}); the claim stays unverified"
        );
    }
}

/// Longest User-Agent (in bytes) an access log line carries.
const MAX_LOGGED_USER_AGENT: usize = 256;

/// What the access log says of one request.
#[derive(Debug)]
pub(crate) struct AccessRecord<'a> {
    pub client: Option<std::net::IpAddr>,
    pub host: &'a [u8],
    pub method: &'a str,
    pub path: &'a [u8],
    /// 0 when nothing was answered (the client went away).
    pub status: u16,
    pub bytes: usize,
    pub duration: Duration,
    pub user_agent: &'a [u8],
    pub origin: Option<&'a str>,
    pub crawler: Option<&'a str>,
    pub decision: &'a str,
    /// Why the decision came out as it did ([`crate::enforce::Why::as_str`]), when decided.
    pub why: Option<&'a str>,
    pub upstream: Option<std::net::SocketAddr>,
    pub request_id: Option<&'a [u8]>,
    /// How the request reached robotsguard: `proxy` (through the proxy listener) or
    /// `decision` (judged for a front proxy on the decision listener).
    pub via: &'static str,
}

/// Client text for the access log: cut to `max` bytes, invalid UTF-8 replaced; JSON or the text
/// format escapes the rest.
fn lossy_cut(bytes: &[u8], max: usize) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(max)]).into_owned()
}

/// Writes one access log line, off the request path (through a log writer thread, dropped and
/// counted if it falls behind): beside the other lines, or to `access_log.path`. Not
/// rate-limited: it is the record of every request, asked for.
pub(crate) fn access(settings: &crate::config::AccessLog, record: &AccessRecord<'_>) {
    let format = settings.format;
    let time = humantime_now();
    let client = record.client.map(|c| c.to_string());
    let upstream = record.upstream.map(|u| u.to_string());
    let host = lossy_cut(record.host, MAX_CLIENT_TEXT);
    let path = lossy_cut(record.path, MAX_LOGGED_PATH);
    let user_agent = lossy_cut(record.user_agent, MAX_LOGGED_USER_AGENT);
    let request_id = record.request_id.map(|id| lossy_cut(id, MAX_CLIENT_TEXT));
    let duration_ms = record.duration.as_secs_f64() * 1000.0;
    let mut line = match format {
        crate::config::AccessLogFormat::Json => {
            let value = serde_json::json!({
                "time": time,
                "level": "INFO",
                "kind": "access",
                "client": client,
                "host": host,
                "method": cut(record.method, MAX_LOGGED_METHOD),
                "path": path,
                "status": record.status,
                "bytes": record.bytes,
                "duration_ms": (duration_ms * 1000.0).round() / 1000.0,
                "user_agent": user_agent,
                "origin": record.origin,
                "crawler": record.crawler,
                "decision": record.decision,
                "why": record.why,
                "upstream": upstream,
                "request_id": request_id,
                "via": record.via,
            });
            value.to_string()
        }
        crate::config::AccessLogFormat::Text => {
            let quoted = |text: &str| escape_client_text(text.as_bytes());
            format!(
                "{time} access client={} host=\"{}\" method={} path=\"{}\" status={} bytes={} duration_ms={duration_ms:.3} user_agent=\"{}\" origin={} crawler=\"{}\" decision={} why={} upstream={} request_id={} via={}",
                client.as_deref().unwrap_or("-"),
                quoted(&host),
                quoted(cut(record.method, MAX_LOGGED_METHOD)),
                quoted(&path),
                record.status,
                record.bytes,
                quoted(&user_agent),
                record.origin.unwrap_or("-"),
                record.crawler.unwrap_or("-"),
                record.decision,
                record.why.unwrap_or("-"),
                upstream.as_deref().unwrap_or("-"),
                request_id.as_deref().map_or_else(|| "-".to_string(), quoted),
                record.via,
            )
        }
    };
    line.push('\n');
    match &settings.path {
        None => queue_line(line.as_bytes()),
        Some(path) => access_sink(path).write_line(line.as_bytes()),
    }
}

// ------------------------------------------------------------------------------------------------
// The access log apart from the other lines.

/// Bumped on SIGHUP and SIGUSR1: an access log file is opened again before its next line, so
/// that a rotated file (renamed away by logrotate) is replaced by a new one.
static REOPEN: AtomicU64 = AtomicU64::new(0);

/// Has the access log file opened again before its next line (after log rotation).
pub fn reopen_access_log() {
    REOPEN.fetch_add(1, Ordering::AcqRel);
}

/// Where access lines go now, with its own writer thread; replaced when a reload changes
/// `access_log.path`.
struct AccessSink {
    path: crate::config::AccessLogPath,
    writer: Option<NonBlocking>,
    _guard: Option<WorkerGuard>,
}

impl AccessSink {
    fn open(path: &crate::config::AccessLogPath) -> AccessSink {
        let started = std::panic::catch_unwind(|| {
            let builder = NonBlockingBuilder::default()
                .lossy(true)
                .buffered_lines_limit(QUEUE_LINES)
                .thread_name("robotsguard-access");
            match path {
                crate::config::AccessLogPath::Stdout => {
                    builder.finish(Box::new(std::io::stdout()) as Box<dyn Write + Send + 'static>)
                }
                crate::config::AccessLogPath::File(file) => builder
                    .finish(Box::new(ReopeningFile::new(file.clone())) as Box<dyn Write + Send>),
            }
        });
        match started {
            Ok((writer, guard)) => AccessSink {
                path: path.clone(),
                writer: Some(writer),
                _guard: Some(guard),
            },
            Err(_) => {
                tracing::warn!("no access log writer thread; access lines are written in place");
                AccessSink {
                    path: path.clone(),
                    writer: None,
                    _guard: None,
                }
            }
        }
    }

    fn write_line(&self, line: &[u8]) {
        match &self.writer {
            Some(writer) => {
                let _ = writer.clone().write_all(line);
            }
            None => queue_line(line),
        }
    }
}

static ACCESS_SINK: arc_swap::ArcSwapOption<AccessSink> = arc_swap::ArcSwapOption::const_empty();
static ACCESS_SINK_CHANGING: Mutex<()> = Mutex::new(());

/// The sink for `path`: the one in use (one load, no lock), or a new one when the config named
/// another (a reload); the old one's thread writes what it holds and ends, off this thread.
fn access_sink(path: &crate::config::AccessLogPath) -> Arc<AccessSink> {
    if let Some(sink) = ACCESS_SINK.load_full().filter(|sink| sink.path == *path) {
        return sink;
    }
    let _changing = ACCESS_SINK_CHANGING.lock();
    if let Some(sink) = ACCESS_SINK.load_full().filter(|sink| sink.path == *path) {
        return sink;
    }
    let sink = Arc::new(AccessSink::open(path));
    if let Some(old) = ACCESS_SINK.swap(Some(sink.clone())) {
        let _ = std::thread::Builder::new()
            .name("robotsguard-access-close".into())
            .spawn(move || drop(old));
    }
    sink
}

/// An access log file, appended to, opened again when [`REOPEN`] moves. A file that cannot be
/// opened drops its lines (counted by the writer) and is tried again on the next line, at most
/// once a second, with one WARN per failure that follows a success.
struct ReopeningFile {
    path: std::path::PathBuf,
    file: Option<std::fs::File>,
    seen: u64,
    failed_at: Option<Instant>,
}

impl ReopeningFile {
    fn new(path: std::path::PathBuf) -> ReopeningFile {
        ReopeningFile {
            path,
            file: None,
            seen: REOPEN.load(Ordering::Acquire),
            failed_at: None,
        }
    }

    fn current(&mut self) -> std::io::Result<&mut std::fs::File> {
        let generation = REOPEN.load(Ordering::Acquire);
        if generation != self.seen {
            self.seen = generation;
            self.file = None;
        }
        if self.file.is_none() {
            if self
                .failed_at
                .is_some_and(|at| at.elapsed() < Duration::from_secs(1))
            {
                return Err(std::io::Error::other("the access log file is not open"));
            }
            match std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
            {
                Ok(file) => {
                    self.failed_at = None;
                    self.file = Some(file);
                }
                Err(e) => {
                    if self.failed_at.is_none() {
                        tracing::warn!(
                            path = %self.path.display(),
                            "cannot open the access log file: {e}; its lines are dropped until it opens"
                        );
                    }
                    self.failed_at = Some(Instant::now());
                    return Err(e);
                }
            }
        }
        self.file
            .as_mut()
            .ok_or_else(|| std::io::Error::other("the access log file is not open"))
    }
}

impl Write for ReopeningFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.current()?.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.file.as_mut() {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }
}

// ------------------------------------------------------------------------------------------------
// The JSON envelope of event lines.

/// Formats events as one JSON object each, in the envelope access lines share: `time`,
/// `level`, `kind: "event"`, `request_id` (when the event has that field), `target`, and the
/// event's `fields` (with its `message`).
struct JsonEnvelope;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for JsonEnvelope
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let mut fields = FieldsToJson(serde_json::Map::new());
        event.record(&mut fields);
        let mut fields = fields.0;
        let metadata = event.metadata();
        let mut line = serde_json::Map::new();
        line.insert("time".into(), humantime_now().into());
        line.insert("level".into(), metadata.level().as_str().into());
        line.insert("kind".into(), "event".into());
        if let Some(id) = fields.remove("request_id").filter(|id| !id.is_null()) {
            line.insert("request_id".into(), id);
        }
        line.insert("target".into(), metadata.target().into());
        line.insert("fields".into(), serde_json::Value::Object(fields));
        writeln!(writer, "{}", serde_json::Value::Object(line))
    }
}

/// An event's fields as JSON values (numbers and booleans as such, the rest as text).
struct FieldsToJson(serde_json::Map<String, serde_json::Value>);

impl tracing::field::Visit for FieldsToJson {
    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_f64(&mut self, field: &tracing::field::Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
}

/// Now as RFC 3339 UTC with microseconds, like the other log lines.
fn humantime_now() -> String {
    humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string()
}

/// Hands a finished line to the writer thread (dropped and counted when it is behind); when
/// there is none (not set up, or it could not start), writes in place rather than lose the line.
fn queue_line(line: &[u8]) {
    match started_output() {
        Some(output) => {
            let _ = output.writer.clone().write_all(line);
        }
        None => {
            let _ = std::io::stderr().write_all(line);
        }
    }
}

/// Hands `log` records (pingora's) to [`library_line`].
struct LibraryLog;

impl log::Log for LibraryLog {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            library_line(record.target(), record.level(), &record.args().to_string());
        }
    }

    fn flush(&self) {}
}

/// `text` cut to at most `max` bytes on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Writes the count of suppressed request lines once a second (and once more at shutdown), so a
/// flood that stops is still reported.
pub(crate) struct SuppressedLinesReporter;

fn report_suppressed() {
    report_dropped();
    let limiters: [(&RateLimiter, u32, &str); 4] = [
        (
            &FAILURE_LINES,
            FAILURE_LINES_PER_SECOND,
            "failure lines suppressed by the log rate limit",
        ),
        (
            &OFFENDER_LINES,
            OFFENDER_LINES_PER_SECOND,
            "repeat-offender lines suppressed by the log rate limit (bans are counted in robotsguard_bans_total)",
        ),
        (
            &STATE_LINES,
            STATE_LINES_PER_SECOND,
            "shared state store lines suppressed by the log rate limit (failures are counted in robotsguard_state_backend_errors_total)",
        ),
        (
            &REQUEST_LINES,
            REQUEST_LINES_PER_SECOND,
            "blocked/would-block request lines suppressed by the log rate limit (all are counted in robotsguard_requests_total)",
        ),
    ];
    for (limiter, limit_per_second, what) in limiters {
        let suppressed = limiter.take_suppressed();
        if suppressed > 0 {
            tracing::warn!(suppressed, limit_per_second, "{what}");
        }
    }
}

#[async_trait]
impl BackgroundService for SuppressedLinesReporter {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut ticks = tokio::time::interval(Duration::from_secs(1));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => report_suppressed(),
                _ = shutdown.wait_for(|stop| *stop) => break,
            }
        }
        report_suppressed();
    }
}

/// `2026-11-26T20:15:00Z`: how every time is written in logs and admin answers (UTC, seconds).
pub fn rfc3339(at: std::time::SystemTime) -> String {
    humantime::format_rfc3339_seconds(at).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_the_limit_per_window_and_counts_the_rest() {
        let limiter = RateLimiter::new(3);
        let admitted = (0..10).filter(|_| limiter.admit_in(0)).count();
        assert_eq!(admitted, 3);
        assert_eq!(limiter.take_suppressed(), 7);
        assert_eq!(limiter.take_suppressed(), 0, "a count is reported once");
        // A new second opens a new window.
        let admitted = (0..5).filter(|_| limiter.admit_in(1)).count();
        assert_eq!(admitted, 3);
        assert_eq!(limiter.take_suppressed(), 2);
        // An event from a window already closed does not reopen it.
        assert!(!limiter.admit_in(0));
        assert_eq!(limiter.take_suppressed(), 1);
    }

    #[test]
    fn every_event_is_either_admitted_or_counted_under_contention() {
        let limiter = std::sync::Arc::new(RateLimiter::new(50));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let limiter = limiter.clone();
                std::thread::spawn(move || {
                    (0..10_000u64)
                        .filter(|i| limiter.admit_in((i + t) / 2_500))
                        .count() as u64
                })
            })
            .collect();
        let admitted: u64 = threads
            .into_iter()
            .map(|t| t.join().expect("thread finishes"))
            .sum();
        assert_eq!(admitted + limiter.take_suppressed(), 40_000);
        assert!(admitted >= 50, "{admitted}");
    }

    #[test]
    fn client_text_is_escaped_and_cut() {
        assert_eq!(
            escape_client_text(b"GET /a\\b\n\x1b[31m\xff"),
            "GET /a\\\\b\\x0a\\x1b[31m\\xff"
        );
        let long = vec![b'a'; 60_000];
        let escaped = escape_client_text(&long);
        assert!(escaped.len() < MAX_CLIENT_TEXT + 32, "{}", escaped.len());
        assert!(escaped.ends_with("... (60000 bytes)"), "{escaped}");
    }

    #[test]
    fn library_text_keeps_its_characters_and_escapes_what_could_forge_a_line() {
        // pingora's "exited after 792.287µs".
        assert_eq!(
            escape_log_text("exited after 792.287µs"),
            "exited after 792.287µs"
        );
        assert_eq!(
            escape_log_text("a\\b\nINFO forged\r\x1b[31m\u{202e}x"),
            "a\\\\b\\u{a}INFO forged\\u{d}\\u{1b}[31m\\u{202e}x"
        );
        let long = "é".repeat(60_000);
        let escaped = escape_log_text(&long);
        assert!(escaped.len() < MAX_CLIENT_TEXT + 32, "{}", escaped.len());
        assert!(escaped.ends_with("... (120000 bytes)"), "{escaped}");
    }

    #[test]
    fn paths_are_cut_on_character_boundaries() {
        assert_eq!(cut("/short", 10), "/short");
        assert_eq!(cut("/ééé", 4), "/é");
        assert_eq!(cut("/abcdef", 3), "/ab");
    }
}
