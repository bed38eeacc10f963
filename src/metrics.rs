//! Every Prometheus metric robotsguard exports, named in one place. Labels are bounded: origin
//! names come from the config, crawler names from the catalogue (else `other`).

use crate::outcome::OUTCOMES;
use std::sync::{LazyLock, OnceLock};

use prometheus::{
    Encoder, Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec,
    IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// The `state` label of `robotsguard_robots_state`: what an origin's robots.txt says as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RobotsState {
    /// A robots.txt is in force; its rules decide.
    Conditional,
    /// Crawlers may fetch everything.
    AllowAll,
    /// Crawlers may fetch nothing.
    DisallowAll,
}

impl RobotsState {
    /// Every state, in label order.
    pub const ALL: [RobotsState; 3] = [
        RobotsState::Conditional,
        RobotsState::AllowAll,
        RobotsState::DisallowAll,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RobotsState::Conditional => "conditional",
            RobotsState::AllowAll => "allow_all",
            RobotsState::DisallowAll => "disallow_all",
        }
    }
}

/// Every `decision` a request is counted and logged with, and what it means: the one list the
/// help of `robotsguard_requests_total`, the access log's documentation and the metrics reference
/// are written from. Every [`crate::outcome::Outcome`] is here under its own word, from the
/// outcome table ([`crate::outcome::OUTCOMES`]), then `error` and the access log's `unrouted`.
pub const DECISIONS: &[(&str, &str)] = &DECISION_WORDS;

const DECISION_WORDS: [(&str, &str); OUTCOMES.len() + 2] = {
    let mut words = [("", ""); OUTCOMES.len() + 2];
    let mut i = 0;
    while i < OUTCOMES.len() {
        words[i] = (OUTCOMES[i].word, OUTCOMES[i].meaning);
        i += 1;
    }
    words[i] = ("error", "the request failed upstream");
    words[i + 1] = ("unrouted", "no origin serves the host: access log only");
    words
};

/// Decision words only the access log has (no origin to count them under).
pub const ACCESS_LOG_ONLY: &[&str] = &["unrouted"];

/// The registry served on `/metrics`.
pub struct Metrics {
    registry: Registry,
    /// `robotsguard_requests_total{origin, crawler, category, decision}`: every decided request.
    pub requests: IntCounterVec,
    /// `robotsguard_decision_duration_seconds`: time spent deciding one request.
    pub decision_duration: Histogram,
    /// `robotsguard_request_duration_seconds{origin}`: from a request's head to its answer.
    pub request_duration: HistogramVec,
    /// `robotsguard_upstream_errors_total{origin, kind}`: requests the upstream failed.
    pub upstream_errors: IntCounterVec,
    /// `robotsguard_robots_fetches_total{origin, outcome}`: robots.txt fetches and reads.
    pub robots_fetches: IntCounterVec,
    /// `robotsguard_robots_state{origin, state}`: 1 for the state of the copy in force.
    pub robots_state: IntGaugeVec,
    /// `robotsguard_robots_rules{origin}`: rules in the copy in force.
    pub robots_rules: IntGaugeVec,
    /// `robotsguard_robots_bytes{origin}`: bytes of the copy in force.
    pub robots_bytes: IntGaugeVec,
    /// `robotsguard_robots_age_seconds{origin}`: since the copy was fetched or confirmed.
    pub robots_age: GaugeVec,
    /// `robotsguard_robots_last_error_timestamp_seconds{origin}`: the latest failed fetch.
    pub robots_last_error_timestamp: GaugeVec,
    /// `robotsguard_build_info{version}`: always 1.
    pub build_info: IntGaugeVec,
    /// Config reloads by `result` (`success`, `failure`); both series exist from start-up.
    pub config_reloads: IntCounterVec,
    /// 1 when the latest config load succeeded.
    pub config_last_reload_successful: IntGauge,
    /// Unix time of the latest successful load (start-up counts).
    pub config_last_reload_timestamp: Gauge,
    /// 1 while the file asks for settings that only a restart applies.
    pub config_restart_required: IntGauge,
    /// `robotsguard_config_warnings_total{kind}`: warnings about the config in force, counted
    /// at start-up and at every reload (as `validate` prints them).
    pub config_warnings: IntCounterVec,
    /// Every answer by origin (`unrouted` before routing) and status class.
    pub responses: IntCounterVec,
    /// Downstream connections open now.
    pub open_connections: IntGauge,
    /// Downstream connections closed on arrival because `limits.max_connections` were open.
    pub connections_refused: IntCounter,
    /// Connections waiting for a request head closed to give their slot to a new connection.
    pub connections_evicted: IntCounter,
    /// The downstream connection cap in force.
    pub max_connections: IntGauge,
    /// 1 while an upstream address takes requests, 0 while it is skipped.
    pub upstream_up: IntGaugeVec,
    /// From sending a request upstream to its response header, by origin.
    pub upstream_duration: HistogramVec,
    /// Origins whose upstream names do not resolve (answered 502).
    pub upstream_unresolved: IntGaugeVec,
    /// Connections closed because their PROXY protocol header was missing or invalid.
    pub proxy_protocol_refused: IntCounter,
    /// `robotsguard_connections_refused_total{reason}`: client connections the connection layer
    /// closed before serving a request on them, by reason ([`CONNECTION_REFUSALS`]).
    pub refused_connections: IntCounterVec,
    /// `robotsguard_requests_refused_total{reason}`: requests refused (HTTP/2 `REFUSED_STREAM`,
    /// HTTP/1 `503`) before being decided, by reason ([`REQUEST_REFUSALS`]).
    pub refused_requests: IntCounterVec,
    /// `robotsguard_requests_in_flight`: requests (HTTP/1 requests, HTTP/2 streams) being served.
    pub requests_in_flight: IntGauge,
    /// `robotsguard_requests_in_flight_max`: the cap in force (`limits.max_requests_in_flight`).
    pub max_requests_in_flight: IntGauge,
    /// `robotsguard_requests_in_flight_per_client_max`: the places one client may hold
    /// (`limits.max_requests_in_flight_per_client`).
    pub max_requests_in_flight_per_client: IntGauge,
    /// `robotsguard_downstream_write_timeouts_total`: requests ended because a write to their
    /// client made no progress for `limits.write_timeout`.
    pub downstream_write_timeouts: IntCounter,
    /// `robotsguard_upstream_windows_narrowed_total`: upstream exchanges started with a narrow
    /// receive window because the process was under load.
    pub upstream_windows_narrowed: IntCounter,
    /// `robotsguard_crawler_verifications_total{crawler, result}`: requests whose crawler claim
    /// was checked, by verdict (`verified`, `impostor`, `unverified`).
    pub crawler_verifications: IntCounterVec,
    /// `robotsguard_verify_list_fetches_total{list, outcome}`: fetches and reads of crawler IP
    /// range lists.
    pub verify_list_fetches: IntCounterVec,
    /// `robotsguard_verify_list_prefixes{list}`: prefixes in the list in force.
    pub verify_list_prefixes: IntGaugeVec,
    /// `robotsguard_verify_list_last_success_timestamp_seconds{list}`: when the list in force
    /// was fetched or confirmed.
    pub verify_list_last_success: GaugeVec,
    /// `robotsguard_verify_dns_lookups_total{result}`: reverse DNS lookups sent (not cache
    /// hits), by answer: `confirmed`, `no_name`, `failed`.
    pub verify_dns_lookups: IntCounterVec,
    /// `robotsguard_verify_dns_cache_entries`: addresses in the reverse DNS cache.
    pub verify_dns_cache_entries: IntGauge,
    /// `robotsguard_verify_signature_keys{agent}`: Web Bot Auth keys loaded per agent.
    pub verify_signature_keys: IntGaugeVec,
    /// `robotsguard_verify_signature_key_fetches_total{agent, outcome}`: key directory fetches
    /// and key file reads.
    pub verify_signature_key_fetches: IntCounterVec,
    /// `robotsguard_web_bot_auth_signatures_total{mode, outcome}`: signed requests, by the mode
    /// in force and what the signature came to.
    pub web_bot_auth_signatures: IntCounterVec,
    /// `robotsguard_web_bot_auth_refusals_total{origin, reason}`: requests refused for Web Bot
    /// Auth (`signature_required`: 403; `replayed`: 429; `keys_unavailable`: 503).
    pub web_bot_auth_refusals: IntCounterVec,
    /// `robotsguard_web_bot_auth_registry_agents{registry}`: signing agents a registry lists
    /// (the last good list's).
    pub web_bot_auth_registry_agents: IntGaugeVec,
    /// `robotsguard_tls_certificate_expiry_timestamp_seconds{listener, name}`: when each served
    /// certificate expires.
    pub tls_certificate_expiry: GaugeVec,
    /// `robotsguard_tls_certificate_reloads_total{listener, result}`: certificate files re-read
    /// after a change (`loaded`, `failed`: the previous certificate is still served).
    pub tls_certificate_reloads: IntCounterVec,
    /// `robotsguard_rate_limited_total{origin, crawler}`: requests answered 429 under robots.txt's
    /// `Crawl-delay`.
    pub rate_limited: IntCounterVec,
    /// `robotsguard_rate_budget_exceeded_total{origin, crawler, rule}`: crawler requests over the
    /// operator's rate budget (`policy.rates`), by what the rule was written for (`crawler`,
    /// `category`, `purpose`): answered 429, or counted on an origin that only reports.
    pub rate_budget_exceeded: IntCounterVec,
    /// `robotsguard_content_signals_total{origin, crawler, purpose, action}`: crawler requests a
    /// robots.txt `Content-Signal` or `Content-Usage` line refuses for one of the crawler's
    /// purposes (`action`: `enforce`, refused; `report`, proxied and counted).
    pub content_signals: IntCounterVec,
    /// `robotsguard_response_signals_total{origin, signal, action}`: crawler responses whose
    /// head carries a page's AI preference that refuses one of the crawler's purposes (`signal`:
    /// `content_usage`, `noai`, `noimageai`; `action`: `enforce`, refused; `report`, passed and
    /// counted; `spared`, a multi-purpose crawler not refused), and `Content-Usage` headers
    /// ignored as malformed (`action`: `malformed`).
    pub response_signals: IntCounterVec,
    /// `robotsguard_violations_total{origin, crawler, read_robots}`: crawler requests robots.txt
    /// disallows, by whether the client fetched robots.txt within the last 24 hours.
    pub violations: IntCounterVec,
    /// `robotsguard_bans_total{origin}`: client addresses banned for repeated violations.
    pub bans: IntCounterVec,
    /// `robotsguard_banned_clients{origin}`: client addresses with a ban in force.
    pub banned_clients: IntGaugeVec,
    /// `robotsguard_banned_browser_requests_total{origin}`: browser requests from banned
    /// addresses (whether refused or not): how an operator sees a ban hit a shared address.
    pub banned_browser_requests: IntCounterVec,
    /// `robotsguard_trap_hits_total{origin}`: requests for a trap path (`traps`), whatever the
    /// User-Agent, whatever `traps.action` did with them.
    pub trap_hits: IntCounterVec,
    /// `robotsguard_disguised_strikes_total{origin}`: requests without a crawler's User-Agent,
    /// from an address that read robots.txt, for a path it disallows to every group.
    pub disguised_strikes: IntCounterVec,
    /// `robotsguard_third_party_requests_total{origin, signal}`: requests another site's page
    /// caused (sub-resource loads, cross-site requests and Referers, an `Accept` without HTML)
    /// that would otherwise have counted toward a ban: a trap hit not banned (`trap`), a
    /// disguised crawler's strike (`disguised`) or a robots.txt read (`robots_read`) not
    /// counted.
    pub third_party_requests: IntCounterVec,
    /// `robotsguard_crawler_range_list_loaded{list}`: 1 once a copy of the list is in force, 0
    /// until then (from start, for every list crawlers name).
    pub crawler_range_list_loaded: IntGaugeVec,
    /// `robotsguard_catalogue_feed_loaded{feed}`: 1 while a copy of the catalogue feed is in
    /// force, 0 while none was ever loaded.
    pub catalogue_feed_loaded: IntGaugeVec,
    /// `robotsguard_catalogue_entries{source}`: crawler catalogue entries in force by where
    /// they came from (`builtin`, `extra`, or a feed's url).
    pub catalogue_entries: IntGaugeVec,
    /// `robotsguard_catalogue_feed_entries_refused{feed,reason}`: entries of the feed's copy
    /// in force that its rules keep out of the catalogue.
    pub catalogue_feed_entries_refused: IntGaugeVec,
    /// `robotsguard_verify_dns_available`: 1 while the resolver's probe reaches public DNS, 0
    /// while it does not (and until the first probe answers).
    pub verify_dns_available: IntGauge,
    /// `robotsguard_state_backend_up`: 1 while the state store answers (always with `memory`),
    /// 0 while decisions fall back to this process's memory.
    pub state_backend_up: IntGauge,
    /// `robotsguard_state_schema_newer`: 1 while the shared store's keys carry a newer schema
    /// version than this build reads (a rolling upgrade in progress), else 0.
    pub state_schema_newer: IntGauge,
    /// `robotsguard_state_backend_errors_total{operation, kind}`: store commands that failed or
    /// took longer than `state.redis.timeout`, and answers that lacked what this process knew,
    /// by why (`kind`: `timeout`, `connection`, `oom`, `readonly`, `lost`, `error`).
    pub state_backend_errors: IntCounterVec,
    /// `robotsguard_admin_refusals_total{reason}`: admin requests refused or cut short, by
    /// reason ([`ADMIN_REFUSALS`]).
    pub admin_refusals: IntCounterVec,
    /// `robotsguard_decision_requests_total{origin, decision}`: requests judged through the
    /// decision listener (they count in `robotsguard_requests_total` too, exactly as proxied ones).
    pub decision_requests: IntCounterVec,
    /// `robotsguard_decision_errors_total{reason}`: judgments the decision listener could not
    /// make, answered by `decision.on_error` ([`DECISION_ERRORS`]).
    pub decision_errors: IntCounterVec,
    /// `robotsguard_decision_rejected_total{reason}`: decision requests refused before any
    /// judgment ([`DECISION_REJECTIONS`]).
    pub decision_rejected: IntCounterVec,
    /// `robotsguard_webhook_events_total{result}`: webhook deliveries by what became of them
    /// ([`WEBHOOK_RESULTS`]).
    pub webhook_events: IntCounterVec,
    /// `robotsguard_decision_stream_requests_total{result}`: bouncer requests to
    /// `/v1/decisions*` ([`DECISION_STREAM_RESULTS`]).
    pub decision_stream_requests: IntCounterVec,
    /// `robotsguard_evidence_records_total{result}`: evidence records by what became of them
    /// ([`EVIDENCE_RESULTS`]).
    pub evidence_records: IntCounterVec,
}

/// The `result` values of `robotsguard_webhook_events_total`: an event a receiver accepted
/// (2xx); an attempt that failed and is tried again; an event given up on after its retries or
/// at a permanent refusal (4xx); one not sent because the queue was full or too many deliveries
/// were under way; one not sent because its target resolved to an address webhooks may not
/// reach, or answered with a redirect (not followed).
pub const WEBHOOK_RESULTS: [&str; 5] = ["delivered", "retried", "failed", "dropped", "refused"];

/// The `result` values of `robotsguard_decision_stream_requests_total`: answered; refused for a
/// missing or unknown `X-Api-Key` (403); a bad query (400).
pub const DECISION_STREAM_RESULTS: [&str; 3] = ["ok", "forbidden", "bad_request"];

/// The `result` values of `robotsguard_evidence_records_total`: signed and written (and
/// synced); dropped because the queue was full (a request never waits for the disk); lost
/// because the write failed (disk full, permissions).
pub const EVIDENCE_RESULTS: [&str; 3] = ["written", "dropped", "failed"];

/// The `reason` values of `robotsguard_decision_errors_total`: the judgment took longer than
/// `decision.timeout`; it came to no answer the listener can give.
pub const DECISION_ERRORS: [&str; 2] = ["timeout", "internal"];

/// The `reason` values of `robotsguard_decision_rejected_total`: a peer outside
/// `decision.trusted_callers` (403); a forwarded header missing (400) or sent twice with
/// different values (400); a forwarded target or method that cannot be judged (400); headers or
/// a User-Agent over their bound (431), a gRPC message over 64 KiB (`RESOURCE_EXHAUSTED`); a path
/// the listener does not serve (404).
pub const DECISION_REJECTIONS: [&str; 6] = [
    "untrusted_caller",
    "missing_header",
    "conflicting_headers",
    "bad_request",
    "too_large",
    "not_found",
];

/// The `reason` values of `robotsguard_admin_refusals_total`: a `Host` the admin listener does
/// not answer to (421); a state-changing request from another site (403); a sign-in with a
/// wrong token; a sign-in refused while its address waits (429); a robots.txt refresh on demand
/// too soon after the last (429); an `/explain` claim not checked because its DNS lookups are
/// used up.
pub const ADMIN_REFUSALS: [&str; 6] = [
    "host",
    "cross_site",
    "login_failed",
    "login_throttled",
    "refresh_throttled",
    "explain_lookups",
];

/// The `reason` values of `robotsguard_connections_refused_total`: at `limits.max_connections`
/// with every connection busy; a PROXY header from a peer not in `trusted_proxies`; a missing or
/// invalid PROXY header; a TLS handshake not finished within `limits.handshake_timeout`.
pub const CONNECTION_REFUSALS: [&str; 4] = [
    "max_connections",
    "proxy_untrusted",
    "proxy_header",
    "handshake_timeout",
];

/// The `reason` values of `robotsguard_requests_refused_total`: an HTTP/2 stream the
/// connection's stream limit refused (`limits.max_streams_per_connection`; a header list over
/// `limits.max_header_bytes` is refused the same way and counted here too); a request past
/// `limits.max_requests_in_flight`; one whose client holds
/// `limits.max_requests_in_flight_per_client` places; one whose client holds places and would
/// leave too few free for others (`fair_share`).
pub const REQUEST_REFUSALS: [&str; 4] = [
    "max_streams_per_connection",
    "max_requests_in_flight",
    "max_requests_in_flight_per_client",
    "fair_share",
];

/// Documented metric names (also checked by tests and the dashboard test).
pub const METRIC_NAMES: [&str; 71] = [
    "robotsguard_requests_total",
    "robotsguard_decision_duration_seconds",
    "robotsguard_request_duration_seconds",
    "robotsguard_upstream_errors_total",
    "robotsguard_robots_fetches_total",
    "robotsguard_robots_state",
    "robotsguard_robots_rules",
    "robotsguard_robots_bytes",
    "robotsguard_robots_age_seconds",
    "robotsguard_robots_last_error_timestamp_seconds",
    "robotsguard_build_info",
    "robotsguard_config_reloads_total",
    "robotsguard_config_last_reload_successful",
    "robotsguard_config_last_reload_timestamp_seconds",
    "robotsguard_config_restart_required",
    "robotsguard_config_warnings_total",
    "robotsguard_responses_total",
    "robotsguard_downstream_connections",
    "robotsguard_downstream_connections_refused_total",
    "robotsguard_downstream_connections_evicted_total",
    "robotsguard_downstream_connections_max",
    "robotsguard_upstream_up",
    "robotsguard_upstream_request_duration_seconds",
    "robotsguard_upstream_unresolved",
    "robotsguard_proxy_protocol_refused_total",
    "robotsguard_connections_refused_total",
    "robotsguard_requests_refused_total",
    "robotsguard_requests_in_flight",
    "robotsguard_requests_in_flight_max",
    "robotsguard_requests_in_flight_per_client_max",
    "robotsguard_downstream_write_timeouts_total",
    "robotsguard_upstream_windows_narrowed_total",
    "robotsguard_crawler_verifications_total",
    "robotsguard_verify_list_fetches_total",
    "robotsguard_verify_list_prefixes",
    "robotsguard_verify_list_last_success_timestamp_seconds",
    "robotsguard_verify_dns_lookups_total",
    "robotsguard_verify_dns_cache_entries",
    "robotsguard_verify_signature_keys",
    "robotsguard_verify_signature_key_fetches_total",
    "robotsguard_web_bot_auth_signatures_total",
    "robotsguard_web_bot_auth_refusals_total",
    "robotsguard_web_bot_auth_registry_agents",
    "robotsguard_tls_certificate_expiry_timestamp_seconds",
    "robotsguard_tls_certificate_reloads_total",
    "robotsguard_rate_limited_total",
    "robotsguard_rate_budget_exceeded_total",
    "robotsguard_content_signals_total",
    "robotsguard_response_signals_total",
    "robotsguard_violations_total",
    "robotsguard_bans_total",
    "robotsguard_banned_clients",
    "robotsguard_banned_browser_requests_total",
    "robotsguard_trap_hits_total",
    "robotsguard_disguised_strikes_total",
    "robotsguard_third_party_requests_total",
    "robotsguard_crawler_range_list_loaded",
    "robotsguard_catalogue_feed_loaded",
    "robotsguard_catalogue_entries",
    "robotsguard_catalogue_feed_entries_refused",
    "robotsguard_verify_dns_available",
    "robotsguard_state_backend_up",
    "robotsguard_state_schema_newer",
    "robotsguard_state_backend_errors_total",
    "robotsguard_admin_refusals_total",
    "robotsguard_decision_requests_total",
    "robotsguard_decision_errors_total",
    "robotsguard_decision_rejected_total",
    "robotsguard_webhook_events_total",
    "robotsguard_decision_stream_requests_total",
    "robotsguard_evidence_records_total",
];

fn counter(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let metric = IntCounterVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|e| panic!("metric {name} is malformed (a programming error): {e}"));
    register(registry, Box::new(metric.clone()));
    metric
}

fn gauge(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let metric = IntGaugeVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|e| panic!("metric {name} is malformed (a programming error): {e}"));
    register(registry, Box::new(metric.clone()));
    metric
}

fn float_gauge(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
    let metric = GaugeVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|e| panic!("metric {name} is malformed (a programming error): {e}"));
    register(registry, Box::new(metric.clone()));
    metric
}

fn register(registry: &Registry, metric: Box<dyn prometheus::core::Collector>) {
    if let Err(e) = registry.register(metric) {
        panic!("metric registered twice (a programming error): {e}");
    }
}

impl Metrics {
    fn new() -> Metrics {
        let registry = Registry::new();
        let requests = counter(
            &registry,
            "robotsguard_requests_total",
            &format!(
                "Requests by origin, crawler, crawler category and decision ({}).",
                DECISIONS
                    .iter()
                    .filter(|(word, _)| !ACCESS_LOG_ONLY.contains(word))
                    .map(|(word, _)| *word)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            &["origin", "crawler", "category", "decision"],
        );
        let decision_duration = Histogram::with_opts(
            HistogramOpts::new(
                "robotsguard_decision_duration_seconds",
                "Time to decide a request: routing, crawler identification and robots.txt matching.",
            )
            .buckets(vec![1e-7, 2.5e-7, 5e-7, 1e-6, 2.5e-6, 5e-6, 1e-5, 5e-5, 1e-4, 1e-3]),
        )
        .unwrap_or_else(|e| panic!("decision histogram is malformed: {e}"));
        register(&registry, Box::new(decision_duration.clone()));
        let request_duration = HistogramVec::new(
            HistogramOpts::new(
                "robotsguard_request_duration_seconds",
                "Whole request time through the proxy, by origin.",
            )
            .buckets(vec![
                0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ]),
            &["origin"],
        )
        .unwrap_or_else(|e| panic!("request histogram is malformed: {e}"));
        register(&registry, Box::new(request_duration.clone()));
        let upstream_errors = counter(
            &registry,
            "robotsguard_upstream_errors_total",
            "Requests that failed to reach or read from the upstream, by origin and kind.",
            &["origin", "kind"],
        );
        let robots_fetches = counter(
            &registry,
            "robotsguard_robots_fetches_total",
            "robots.txt fetch outcomes by origin.",
            &["origin", "outcome"],
        );
        let robots_state = gauge(
            &registry,
            "robotsguard_robots_state",
            "1 for the robots.txt state in force per origin: conditional, allow_all or disallow_all.",
            &["origin", "state"],
        );
        let robots_rules = gauge(
            &registry,
            "robotsguard_robots_rules",
            "Rules in the robots.txt copy in force.",
            &["origin"],
        );
        let robots_bytes = gauge(
            &registry,
            "robotsguard_robots_bytes",
            "Size of the robots.txt copy in force.",
            &["origin"],
        );
        let robots_age = float_gauge(
            &registry,
            "robotsguard_robots_age_seconds",
            "Seconds since the robots.txt copy in force was fetched or confirmed (304).",
            &["origin"],
        );
        let robots_last_error_timestamp = float_gauge(
            &registry,
            "robotsguard_robots_last_error_timestamp_seconds",
            "Unix time of the latest failed robots.txt fetch or read.",
            &["origin"],
        );
        let build_info = gauge(
            &registry,
            "robotsguard_build_info",
            "Always 1; the version label tells which build runs.",
            &["version"],
        );
        build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);
        let config_reloads = counter(
            &registry,
            "robotsguard_config_reloads_total",
            "Config reloads by result (success, failure).",
            &["result"],
        );
        // Both series exist from the start, so `increase()` sees the first failure.
        for result in ["success", "failure"] {
            config_reloads.with_label_values(&[result]);
        }
        let config_last_reload_successful = IntGauge::new(
            "robotsguard_config_last_reload_successful",
            "1 if the latest config load or reload succeeded, 0 if it failed (the previous config stays in force).",
        )
        .unwrap_or_else(|e| panic!("config gauge is malformed: {e}"));
        register(&registry, Box::new(config_last_reload_successful.clone()));
        config_last_reload_successful.set(1);
        let config_last_reload_timestamp = Gauge::new(
            "robotsguard_config_last_reload_timestamp_seconds",
            "Unix time of the latest successful config load or reload.",
        )
        .unwrap_or_else(|e| panic!("config gauge is malformed: {e}"));
        register(&registry, Box::new(config_last_reload_timestamp.clone()));
        let config_restart_required = IntGauge::new(
            "robotsguard_config_restart_required",
            "1 while the config file changes settings that apply only on restart (the reload's warning line names them; the configuration reference lists them).",
        )
        .unwrap_or_else(|e| panic!("config gauge is malformed: {e}"));
        register(&registry, Box::new(config_restart_required.clone()));
        // Its series are made when warnings are first counted, one per kind
        // (`crate::enforce::count_config_warnings`).
        let config_warnings = counter(
            &registry,
            "robotsguard_config_warnings_total",
            "Warnings about the config in force (as `validate` prints them), counted at start-up and at every reload, by kind (search_crawler_refused: an origin refuses a search engine's crawler on every path; proxy_protocol_untrusted).",
            &["kind"],
        );
        let responses = counter(
            &registry,
            "robotsguard_responses_total",
            "Answers sent to clients by origin (`unrouted` before routing) and status class (2xx .. 5xx).",
            &["origin", "code_class"],
        );
        let open_connections = IntGauge::new(
            "robotsguard_downstream_connections",
            "Client connections open now.",
        )
        .unwrap_or_else(|e| panic!("connections gauge is malformed: {e}"));
        register(&registry, Box::new(open_connections.clone()));
        let connections_refused = IntCounter::new(
            "robotsguard_downstream_connections_refused_total",
            "Client connections closed on arrival because limits.max_connections were open.",
        )
        .unwrap_or_else(|e| panic!("connections counter is malformed: {e}"));
        register(&registry, Box::new(connections_refused.clone()));
        let connections_evicted = IntCounter::new(
            "robotsguard_downstream_connections_evicted_total",
            "Connections waiting for a request head that were closed, at limits.max_connections, to serve a new connection.",
        )
        .unwrap_or_else(|e| panic!("evicted connections counter is malformed: {e}"));
        register(&registry, Box::new(connections_evicted.clone()));
        let max_connections = IntGauge::new(
            "robotsguard_downstream_connections_max",
            "The client connection cap in force (limits.max_connections).",
        )
        .unwrap_or_else(|e| panic!("connections gauge is malformed: {e}"));
        register(&registry, Box::new(max_connections.clone()));
        let upstream_up = gauge(
            &registry,
            "robotsguard_upstream_up",
            "1 while an upstream address takes requests, 0 while it is skipped (failed passive or active health checks).",
            &["origin", "upstream"],
        );
        let upstream_duration = HistogramVec::new(
            HistogramOpts::new(
                "robotsguard_upstream_request_duration_seconds",
                "From sending a request upstream to receiving its response header, by origin.",
            )
            .buckets(vec![
                0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
            ]),
            &["origin"],
        )
        .unwrap_or_else(|e| panic!("upstream histogram is malformed: {e}"));
        register(&registry, Box::new(upstream_duration.clone()));
        let upstream_unresolved = gauge(
            &registry,
            "robotsguard_upstream_unresolved",
            "1 while none of an origin's upstream names resolves (its requests get 502).",
            &["origin"],
        );
        let proxy_protocol_refused = IntCounter::new(
            "robotsguard_proxy_protocol_refused_total",
            "Connections to a proxy_protocol listener closed because their PROXY header was missing or invalid.",
        )
        .unwrap_or_else(|e| panic!("proxy protocol counter is malformed: {e}"));
        register(&registry, Box::new(proxy_protocol_refused.clone()));
        let refused_connections = counter(
            &registry,
            "robotsguard_connections_refused_total",
            "Client connections closed before a request was served on them, by reason (max_connections, proxy_untrusted, proxy_header, handshake_timeout).",
            &["reason"],
        );
        for reason in CONNECTION_REFUSALS {
            refused_connections.with_label_values(&[reason]);
        }
        let refused_requests = counter(
            &registry,
            "robotsguard_requests_refused_total",
            "Requests refused before being decided (HTTP/2 REFUSED_STREAM, HTTP/1 503), by reason (max_streams_per_connection, max_requests_in_flight, max_requests_in_flight_per_client, fair_share).",
            &["reason"],
        );
        for reason in REQUEST_REFUSALS {
            refused_requests.with_label_values(&[reason]);
        }
        let requests_in_flight = IntGauge::new(
            "robotsguard_requests_in_flight",
            "Requests (HTTP/1 requests and HTTP/2 streams) being served now.",
        )
        .unwrap_or_else(|e| panic!("in-flight gauge is malformed: {e}"));
        register(&registry, Box::new(requests_in_flight.clone()));
        let max_requests_in_flight = IntGauge::new(
            "robotsguard_requests_in_flight_max",
            "The cap on requests in flight in force (limits.max_requests_in_flight).",
        )
        .unwrap_or_else(|e| panic!("in-flight gauge is malformed: {e}"));
        register(&registry, Box::new(max_requests_in_flight.clone()));
        let max_requests_in_flight_per_client = IntGauge::new(
            "robotsguard_requests_in_flight_per_client_max",
            "The places under the cap on requests in flight one client may hold (limits.max_requests_in_flight_per_client).",
        )
        .unwrap_or_else(|e| panic!("in-flight gauge is malformed: {e}"));
        register(
            &registry,
            Box::new(max_requests_in_flight_per_client.clone()),
        );
        let downstream_write_timeouts = IntCounter::new(
            "robotsguard_downstream_write_timeouts_total",
            "Requests ended (HTTP/2 stream reset, HTTP/1 connection closed) because a write to their client made no progress for limits.write_timeout.",
        )
        .unwrap_or_else(|e| panic!("write timeouts counter is malformed: {e}"));
        register(&registry, Box::new(downstream_write_timeouts.clone()));
        let upstream_windows_narrowed = IntCounter::new(
            "robotsguard_upstream_windows_narrowed_total",
            "Upstream exchanges started with a narrow TCP receive window because many requests were in flight.",
        )
        .unwrap_or_else(|e| panic!("narrowed windows counter is malformed: {e}"));
        register(&registry, Box::new(upstream_windows_narrowed.clone()));
        let crawler_verifications = counter(
            &registry,
            "robotsguard_crawler_verifications_total",
            "Requests whose crawler claim was checked, by crawler and verdict (verified, impostor, unverified).",
            &["crawler", "result"],
        );
        let verify_list_fetches = counter(
            &registry,
            "robotsguard_verify_list_fetches_total",
            "Fetches and reads of crawler IP range lists, by list and outcome (ok, not_modified, malformed, http_error, unreachable).",
            &["list", "outcome"],
        );
        let verify_list_prefixes = gauge(
            &registry,
            "robotsguard_verify_list_prefixes",
            "Prefixes in the crawler IP range list in force.",
            &["list"],
        );
        let verify_list_last_success = float_gauge(
            &registry,
            "robotsguard_verify_list_last_success_timestamp_seconds",
            "Unix time the crawler IP range list in force was fetched, read or confirmed.",
            &["list"],
        );
        let verify_dns_lookups = counter(
            &registry,
            "robotsguard_verify_dns_lookups_total",
            "Reverse DNS lookups for crawler verification (not cache hits), by answer: confirmed, no_name, failed.",
            &["result"],
        );
        let verify_dns_cache_entries = IntGauge::new(
            "robotsguard_verify_dns_cache_entries",
            "Addresses in the reverse DNS cache of crawler verification.",
        )
        .unwrap_or_else(|e| panic!("DNS cache gauge is malformed: {e}"));
        register(&registry, Box::new(verify_dns_cache_entries.clone()));
        let verify_signature_keys = gauge(
            &registry,
            "robotsguard_verify_signature_keys",
            "Web Bot Auth keys loaded, by signing agent.",
            &["agent"],
        );
        let verify_signature_key_fetches = counter(
            &registry,
            "robotsguard_verify_signature_key_fetches_total",
            "Web Bot Auth key directory fetches and key file reads, by agent and outcome (ok, failed).",
            &["agent", "outcome"],
        );
        let web_bot_auth_signatures = counter(
            &registry,
            "robotsguard_web_bot_auth_signatures_total",
            "Requests carrying a Web Bot Auth signature, by the mode in force (observe, optional, required) and outcome (verified, invalid, unknown_agent, unavailable, replayed).",
            &["mode", "outcome"],
        );
        let web_bot_auth_refusals = counter(
            &registry,
            "robotsguard_web_bot_auth_refusals_total",
            "Requests refused for Web Bot Auth, by origin and reason (signature_required: 403, replayed: 429, keys_unavailable: 503).",
            &["origin", "reason"],
        );
        let web_bot_auth_registry_agents = gauge(
            &registry,
            "robotsguard_web_bot_auth_registry_agents",
            "Signing agents a Web Bot Auth registry lists, from its last good copy.",
            &["registry"],
        );
        let tls_certificate_expiry = float_gauge(
            &registry,
            "robotsguard_tls_certificate_expiry_timestamp_seconds",
            "When each certificate a TLS listener serves expires (Unix time), by listener and certificate name.",
            &["listener", "name"],
        );
        let tls_certificate_reloads = counter(
            &registry,
            "robotsguard_tls_certificate_reloads_total",
            "Listener certificate files re-read after a change, by result (loaded; failed: the previous certificate is still served).",
            &["listener", "result"],
        );
        let rate_limited = counter(
            &registry,
            "robotsguard_rate_limited_total",
            "Crawler requests answered 429 because they came sooner than robots.txt's Crawl-delay, by origin and crawler.",
            &["origin", "crawler"],
        );
        let rate_budget_exceeded = counter(
            &registry,
            "robotsguard_rate_budget_exceeded_total",
            "Crawler requests over the operator's rate budget (policy.rates), by origin, crawler and what the rule was written for (crawler, category, purpose): answered 429 (rate_limited), or counted where the origin only reports (would_rate_limit).",
            &["origin", "crawler", "rule"],
        );
        let content_signals = counter(
            &registry,
            "robotsguard_content_signals_total",
            "Crawler requests a robots.txt Content-Signal or Content-Usage line refuses for one of the crawler's purposes, by origin, crawler, purpose and action (enforce: refused; report: proxied and counted).",
            &["origin", "crawler", "purpose", "action"],
        );
        let response_signals = counter(
            &registry,
            "robotsguard_response_signals_total",
            "Crawler responses whose head carries a page's AI preference (Content-Usage, X-Robots-Tag noai or noimageai) refusing one of the crawler's purposes, by origin, signal (content_usage, noai, noimageai) and action (enforce: refused; report: passed and counted; spared: a multi-purpose crawler not refused; malformed: a Content-Usage header ignored).",
            &["origin", "signal", "action"],
        );
        let violations = counter(
            &registry,
            "robotsguard_violations_total",
            "Crawler requests robots.txt disallows (blocked or would_block), by origin, crawler and whether the client fetched robots.txt within the last 24 hours (read_robots: yes, no).",
            &["origin", "crawler", "read_robots"],
        );
        let bans = counter(
            &registry,
            "robotsguard_bans_total",
            "Client addresses banned from an origin for repeatedly fetching what robots.txt disallows (offenders.action: ban).",
            &["origin"],
        );
        let banned_clients = gauge(
            &registry,
            "robotsguard_banned_clients",
            "Client addresses with a ban in force, by origin (updated when a ban is added, lifted or found ended).",
            &["origin"],
        );
        let banned_browser_requests = counter(
            &registry,
            "robotsguard_banned_browser_requests_total",
            "Browser requests from banned client addresses, by origin: people behind an address a ban hit (a NAT, an office, a load balancer missing from trusted_proxies).",
            &["origin"],
        );
        let trap_hits = counter(
            &registry,
            "robotsguard_trap_hits_total",
            "Requests for a trap path (traps), by origin: paths the served robots.txt disallows to every group, which only a client ignoring it requests.",
            &["origin"],
        );
        let disguised_strikes = counter(
            &registry,
            "robotsguard_disguised_strikes_total",
            "Requests without a crawler's User-Agent for a path robots.txt disallows to every group, from an address that read robots.txt (disguised).",
            &["origin"],
        );
        let third_party_requests = counter(
            &registry,
            "robotsguard_third_party_requests_total",
            "Requests another site's page caused (a sub-resource load, a cross-site request or Referer, an Accept without HTML) that would otherwise have counted toward a ban, by origin and signal: trap (a trap hit not banned), disguised (not a disguised crawler's strike), robots_read (not a read of robots.txt).",
            &["origin", "signal"],
        );
        let crawler_range_list_loaded = gauge(
            &registry,
            "robotsguard_crawler_range_list_loaded",
            "1 while a copy of the crawler IP range list is in force, 0 while none was ever loaded (claims of its crawlers stay unverified).",
            &["list"],
        );
        let catalogue_feed_loaded = gauge(
            &registry,
            "robotsguard_catalogue_feed_loaded",
            "1 while a copy of the crawler catalogue feed is in force, 0 while none was ever loaded (its crawlers are not in the catalogue).",
            &["feed"],
        );
        let catalogue_entries = gauge(
            &registry,
            "robotsguard_catalogue_entries",
            "Crawler catalogue entries in force, by where they came from: builtin, extra, or a catalogue feed's url.",
            &["source"],
        );
        let catalogue_feed_entries_refused = gauge(
            &registry,
            "robotsguard_catalogue_feed_entries_refused",
            "Entries of the catalogue feed's copy in force that its rules keep out of the catalogue, by reason: browser_token, overrides_builtin, hides_builtin, list_url, too_many_lists.",
            &["feed", "reason"],
        );
        let verify_dns_available = IntGauge::new(
            "robotsguard_verify_dns_available",
            "1 while the resolver answers the reverse DNS probe (verify.dns.probe_name), 0 while it does not reach public DNS (reverse DNS verification is unavailable) or before the first probe.",
        )
        .unwrap_or_else(|e| panic!("DNS availability gauge is malformed: {e}"));
        register(&registry, Box::new(verify_dns_available.clone()));
        let state_backend_up = IntGauge::new(
            "robotsguard_state_backend_up",
            "1 while the state store (state.backend) answers within its timeout; 0 while Crawl-delay, strikes and robots.txt reads are decided from this process's memory alone.",
        )
        .unwrap_or_else(|e| panic!("state gauge is malformed: {e}"));
        register(&registry, Box::new(state_backend_up.clone()));
        let state_schema_newer = IntGauge::new(
            "robotsguard_state_schema_newer",
            "1 while the shared state store's keys carry a newer schema version than this build reads (a newer release wrote them: finish the rolling upgrade); this replica keeps serving with the keys it knows. 0 otherwise.",
        )
        .unwrap_or_else(|e| panic!("state schema gauge is malformed: {e}"));
        register(&registry, Box::new(state_schema_newer.clone()));
        let state_backend_errors = counter(
            &registry,
            "robotsguard_state_backend_errors_total",
            "Commands to the shared state store that failed or took longer than state.redis.timeout, by operation (crawl_delay, robots_read, violation, lift_ban, check, ...) and kind (timeout, connection, oom, readonly, lost, error).",
            &["operation", "kind"],
        );
        let admin_refusals = counter(
            &registry,
            "robotsguard_admin_refusals_total",
            "Admin requests refused or cut short, by reason (host, cross_site, login_failed, login_throttled, refresh_throttled, explain_lookups).",
            &["reason"],
        );
        for reason in ADMIN_REFUSALS {
            admin_refusals.with_label_values(&[reason]);
        }
        let decision_requests = counter(
            &registry,
            "robotsguard_decision_requests_total",
            "Requests judged through the decision listener, by origin and decision (also counted in robotsguard_requests_total).",
            &["origin", "decision"],
        );
        let decision_errors = counter(
            &registry,
            "robotsguard_decision_errors_total",
            "Judgments the decision listener could not make, answered by decision.on_error, by reason (timeout, internal).",
            &["reason"],
        );
        for reason in DECISION_ERRORS {
            decision_errors.with_label_values(&[reason]);
        }
        let decision_rejected = counter(
            &registry,
            "robotsguard_decision_rejected_total",
            "Decision requests refused before any judgment, by reason (untrusted_caller, missing_header, conflicting_headers, bad_request, too_large, not_found).",
            &["reason"],
        );
        for reason in DECISION_REJECTIONS {
            decision_rejected.with_label_values(&[reason]);
        }
        let webhook_events = counter(
            &registry,
            "robotsguard_webhook_events_total",
            "Webhook deliveries by result (delivered, retried, failed, dropped, refused).",
            &["result"],
        );
        for result in WEBHOOK_RESULTS {
            webhook_events.with_label_values(&[result]);
        }
        let decision_stream_requests = counter(
            &registry,
            "robotsguard_decision_stream_requests_total",
            "Bouncer requests to the CrowdSec-compatible decision stream (/v1/decisions/stream, /v1/decisions), by result (ok, forbidden, bad_request).",
            &["result"],
        );
        for result in DECISION_STREAM_RESULTS {
            decision_stream_requests.with_label_values(&[result]);
        }
        let evidence_records = counter(
            &registry,
            "robotsguard_evidence_records_total",
            "Evidence records, by result (written, dropped: the queue was full, failed: the write failed).",
            &["result"],
        );
        for result in EVIDENCE_RESULTS {
            evidence_records.with_label_values(&[result]);
        }
        // process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds, ... (Linux).
        register(
            &registry,
            Box::new(prometheus::process_collector::ProcessCollector::for_self()),
        );
        Metrics {
            registry,
            requests,
            decision_duration,
            request_duration,
            upstream_errors,
            robots_fetches,
            robots_state,
            robots_rules,
            robots_bytes,
            robots_age,
            robots_last_error_timestamp,
            build_info,
            config_reloads,
            config_last_reload_successful,
            config_last_reload_timestamp,
            config_restart_required,
            config_warnings,
            responses,
            open_connections,
            connections_refused,
            connections_evicted,
            max_connections,
            upstream_up,
            upstream_duration,
            upstream_unresolved,
            proxy_protocol_refused,
            refused_connections,
            refused_requests,
            requests_in_flight,
            max_requests_in_flight,
            max_requests_in_flight_per_client,
            downstream_write_timeouts,
            upstream_windows_narrowed,
            crawler_verifications,
            verify_list_fetches,
            verify_list_prefixes,
            verify_list_last_success,
            verify_dns_lookups,
            verify_dns_cache_entries,
            verify_signature_keys,
            verify_signature_key_fetches,
            web_bot_auth_signatures,
            web_bot_auth_refusals,
            web_bot_auth_registry_agents,
            tls_certificate_expiry,
            tls_certificate_reloads,
            rate_limited,
            rate_budget_exceeded,
            content_signals,
            response_signals,
            violations,
            bans,
            banned_clients,
            banned_browser_requests,
            trap_hits,
            disguised_strikes,
            third_party_requests,
            crawler_range_list_loaded,
            catalogue_feed_loaded,
            catalogue_entries,
            catalogue_feed_entries_refused,
            verify_dns_available,
            state_backend_up,
            state_schema_newer,
            state_backend_errors,
            admin_refusals,
            decision_requests,
            decision_errors,
            decision_rejected,
            webhook_events,
            decision_stream_requests,
            evidence_records,
        }
    }

    /// Drops the series of a range list no crawler names any more.
    pub fn forget_list(&self, list: &str) {
        let _ = self.verify_list_prefixes.remove_label_values(&[list]);
        let _ = self.verify_list_last_success.remove_label_values(&[list]);
        let _ = self.crawler_range_list_loaded.remove_label_values(&[list]);
    }

    /// Drops the series of a catalogue feed no longer configured.
    pub fn forget_feed(&self, feed: &str) {
        let _ = self.catalogue_feed_loaded.remove_label_values(&[feed]);
        let _ = self.catalogue_entries.remove_label_values(&[feed]);
        for reason in crate::crawlers::feed::RefusalReason::ALL {
            let _ = self
                .catalogue_feed_entries_refused
                .remove_label_values(&[feed, reason.as_str()]);
        }
    }

    /// Counts an answer by status class; `origin` is `None` before routing (`unrouted`).
    pub fn count_response(&self, origin: Option<&str>, status: u16) {
        self.responses
            .with_label_values(&[origin.unwrap_or(UNROUTED), code_class(status)])
            .inc();
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::warn!("cannot encode metrics: {e}");
        }
        out
    }

    /// Publishes the state of an origin's robots.txt copy: what it says as a whole, its rule
    /// count and its size in bytes.
    pub fn set_robots_state(&self, origin: &str, state: RobotsState, rules: usize, bytes: usize) {
        for each in RobotsState::ALL {
            self.robots_state
                .with_label_values(&[origin, each.as_str()])
                .set(i64::from(each == state));
        }
        self.robots_rules
            .with_label_values(&[origin])
            .set(i64::try_from(rules).unwrap_or(i64::MAX));
        self.robots_bytes
            .with_label_values(&[origin])
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// Drops the per-origin gauges of an origin a reload removed, so dashboards do not show a
    /// state nobody keeps up to date. Counters stay: they are history, not state.
    pub fn forget_origin(&self, origin: &str) {
        for state in RobotsState::ALL {
            let _ = self
                .robots_state
                .remove_label_values(&[origin, state.as_str()]);
        }
        let _ = self.robots_rules.remove_label_values(&[origin]);
        let _ = self.robots_bytes.remove_label_values(&[origin]);
        let _ = self.robots_age.remove_label_values(&[origin]);
        let _ = self
            .robots_last_error_timestamp
            .remove_label_values(&[origin]);
        let _ = self.bans.remove_label_values(&[origin]);
        let _ = self.banned_clients.remove_label_values(&[origin]);
        let _ = self.banned_browser_requests.remove_label_values(&[origin]);
        let _ = self.trap_hits.remove_label_values(&[origin]);
        let _ = self.disguised_strikes.remove_label_values(&[origin]);
        for signal in ["trap", "disguised", "robots_read"] {
            let _ = self
                .third_party_requests
                .remove_label_values(&[origin, signal]);
        }
    }
}

/// The `origin` label of answers given before a request was routed to an origin.
pub const UNROUTED: &str = "unrouted";

/// `2xx`, `4xx`, ... for a status code.
pub fn code_class(status: u16) -> &'static str {
    match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}

/// Registers robotsguard's metrics in `registry` as well (an embedding proxy's own registry, or
/// the global one). Registering twice in one registry is not an error. The process metrics are
/// left out: a registry that wants them has its own collector.
pub fn register_into(registry: &Registry) -> prometheus::Result<()> {
    for collector in METRICS.collectors() {
        match registry.register(collector) {
            Ok(()) | Err(prometheus::Error::AlreadyReg) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl Metrics {
    /// Every robotsguard metric (not the process collector), as collectors another registry can
    /// hold; they share their values with the ones here.
    pub(crate) fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.requests.clone()),
            Box::new(self.decision_duration.clone()),
            Box::new(self.request_duration.clone()),
            Box::new(self.upstream_errors.clone()),
            Box::new(self.robots_fetches.clone()),
            Box::new(self.robots_state.clone()),
            Box::new(self.robots_rules.clone()),
            Box::new(self.robots_bytes.clone()),
            Box::new(self.robots_age.clone()),
            Box::new(self.robots_last_error_timestamp.clone()),
            Box::new(self.build_info.clone()),
            Box::new(self.config_reloads.clone()),
            Box::new(self.config_last_reload_successful.clone()),
            Box::new(self.config_last_reload_timestamp.clone()),
            Box::new(self.config_restart_required.clone()),
            Box::new(self.config_warnings.clone()),
            Box::new(self.responses.clone()),
            Box::new(self.open_connections.clone()),
            Box::new(self.connections_refused.clone()),
            Box::new(self.connections_evicted.clone()),
            Box::new(self.max_connections.clone()),
            Box::new(self.upstream_up.clone()),
            Box::new(self.upstream_duration.clone()),
            Box::new(self.upstream_unresolved.clone()),
            Box::new(self.proxy_protocol_refused.clone()),
            Box::new(self.refused_connections.clone()),
            Box::new(self.refused_requests.clone()),
            Box::new(self.requests_in_flight.clone()),
            Box::new(self.max_requests_in_flight.clone()),
            Box::new(self.max_requests_in_flight_per_client.clone()),
            Box::new(self.downstream_write_timeouts.clone()),
            Box::new(self.upstream_windows_narrowed.clone()),
            Box::new(self.crawler_verifications.clone()),
            Box::new(self.verify_list_fetches.clone()),
            Box::new(self.verify_list_prefixes.clone()),
            Box::new(self.verify_list_last_success.clone()),
            Box::new(self.verify_dns_lookups.clone()),
            Box::new(self.verify_dns_cache_entries.clone()),
            Box::new(self.verify_signature_keys.clone()),
            Box::new(self.verify_signature_key_fetches.clone()),
            Box::new(self.web_bot_auth_signatures.clone()),
            Box::new(self.web_bot_auth_refusals.clone()),
            Box::new(self.web_bot_auth_registry_agents.clone()),
            Box::new(self.tls_certificate_expiry.clone()),
            Box::new(self.tls_certificate_reloads.clone()),
            Box::new(self.rate_limited.clone()),
            Box::new(self.rate_budget_exceeded.clone()),
            Box::new(self.content_signals.clone()),
            Box::new(self.response_signals.clone()),
            Box::new(self.violations.clone()),
            Box::new(self.bans.clone()),
            Box::new(self.banned_clients.clone()),
            Box::new(self.banned_browser_requests.clone()),
            Box::new(self.trap_hits.clone()),
            Box::new(self.disguised_strikes.clone()),
            Box::new(self.third_party_requests.clone()),
            Box::new(self.crawler_range_list_loaded.clone()),
            Box::new(self.catalogue_feed_loaded.clone()),
            Box::new(self.catalogue_entries.clone()),
            Box::new(self.catalogue_feed_entries_refused.clone()),
            Box::new(self.verify_dns_available.clone()),
            Box::new(self.state_backend_up.clone()),
            Box::new(self.state_schema_newer.clone()),
            Box::new(self.state_backend_errors.clone()),
            Box::new(self.admin_refusals.clone()),
            Box::new(self.decision_requests.clone()),
            Box::new(self.decision_errors.clone()),
            Box::new(self.decision_rejected.clone()),
            Box::new(self.webhook_events.clone()),
            Box::new(self.decision_stream_requests.clone()),
            Box::new(self.evidence_records.clone()),
        ]
    }
}

/// The process-wide metrics; [`register_into`] adds them to another registry.
pub static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// One origin's per-request series, looked up by label once (on the origin's first request)
/// instead of on every request: most requests are browsers passed through, and a label lookup
/// hashes every label value and takes a lock. Created lazily so an origin without traffic adds no
/// series, as before.
#[derive(Debug, Default)]
pub struct OriginRequestSeries(OnceLock<RequestSeries>);

/// The series of [`OriginRequestSeries`].
#[derive(Debug)]
pub struct RequestSeries {
    /// `robotsguard_request_duration_seconds{origin}`.
    pub duration: Histogram,
    /// `robotsguard_requests_total{origin, crawler="none", category="none", decision="pass"}`:
    /// requests from clients that are not crawlers.
    pub not_crawler_passed: IntCounter,
    /// `robotsguard_responses_total{origin, code_class}` for 1xx .. 5xx.
    responses: [IntCounter; 5],
    /// `robotsguard_upstream_request_duration_seconds{origin}`.
    pub upstream_duration: Histogram,
    /// `robotsguard_requests_total{origin, crawler, category, decision}` of other requests:
    /// by crawler label, each (category, decision) seen with its counter. A label lookup hashes
    /// all four values under the vector's lock and clones the counter; the labels are bounded
    /// (catalogue names and `other`), so each counter is looked up once and kept here.
    crawler_requests: CrawlerRequestCounters,
}

/// Counters by crawler label, then by (category, decision).
type CrawlerRequestCounters = parking_lot::RwLock<
    std::collections::HashMap<
        Box<str>,
        Vec<(&'static str, &'static str, IntCounter)>,
        foldhash::fast::RandomState,
    >,
>;

impl RequestSeries {
    /// Counts an answer to a request routed to this origin.
    pub fn count_response(&self, status: u16) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        self.responses[class].inc();
    }

    /// Counts a request to `origin` (this series' origin) in `robotsguard_requests_total`:
    /// a crawler's, or one that failed (a client that is not a crawler and passes is
    /// [`RequestSeries::not_crawler_passed`]).
    pub fn count_request(
        &self,
        origin: &str,
        crawler: &str,
        category: &'static str,
        decision: &'static str,
    ) {
        let find = |series: &[(&'static str, &'static str, IntCounter)]| {
            series
                .iter()
                .find(|(c, d, _)| *c == category && *d == decision)
                .map(|(_, _, counter)| counter.clone())
        };
        if let Some(series) = self.crawler_requests.read().get(crawler) {
            if let Some((_, _, counter)) = series
                .iter()
                .find(|(c, d, _)| *c == category && *d == decision)
            {
                counter.inc();
                return;
            }
        }
        let mut table = self.crawler_requests.write();
        let series = table.entry(crawler.into()).or_default();
        let counter = find(series).unwrap_or_else(|| {
            let counter = METRICS
                .requests
                .with_label_values(&[origin, crawler, category, decision]);
            series.push((category, decision, counter.clone()));
            counter
        });
        counter.inc();
    }
}

impl OriginRequestSeries {
    /// The series of `origin`, created on first use.
    pub fn get(&self, origin: &str) -> &RequestSeries {
        self.0.get_or_init(|| RequestSeries {
            duration: METRICS.request_duration.with_label_values(&[origin]),
            not_crawler_passed: METRICS
                .requests
                .with_label_values(&[origin, "none", "none", "pass"]),
            responses: ["1xx", "2xx", "3xx", "4xx", "5xx"]
                .map(|class| METRICS.responses.with_label_values(&[origin, class])),
            upstream_duration: METRICS.upstream_duration.with_label_values(&[origin]),
            crawler_requests: Default::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_registry_gets_every_documented_metric_once() {
        let registry = Registry::new();
        register_into(&registry).expect("first registration");
        register_into(&registry).expect("a second registration is not an error");
        let mut names: Vec<String> = METRICS
            .collectors()
            .iter()
            .flat_map(|c| c.desc().into_iter().map(|d| d.fq_name.clone()))
            .collect();
        names.sort();
        let mut documented: Vec<String> = METRIC_NAMES.iter().map(|n| n.to_string()).collect();
        documented.sort();
        assert_eq!(names, documented);
        METRICS.connections_refused.inc();
        let families = registry.gather();
        let refused = families
            .iter()
            .find(|f| f.name() == "robotsguard_downstream_connections_refused_total")
            .expect("the counter is in the other registry");
        assert!(refused.get_metric()[0].get_counter().get_value() >= 1.0);
    }
}
