//! The metrics reference page (`robotsguard metrics`, the book's `reference/metrics.md`),
//! generated from the registry itself: every registered metric with its type, labels and help.
//! The notes below add what a help line is too short for (label values, when it moves); a
//! metric without a note is still listed.

use prometheus::proto::MetricType;

/// More about a metric than its help line: its label values and when it moves (Markdown).
const NOTES: &[(&str, &str)] = &[
    (
        "robotsguard_evidence_records_total",
        "evidence records (`evidence`): `written` (signed, appended to this replica's chain and synced to disk), `dropped` (the writer's queue, `evidence.queue`, was full: a request never waits for the disk, so the record is lost and its chain has no gap, since it was never linked), `failed` (the write or the robots.txt copy's write failed: disk full, permissions); any `dropped` or `failed` means a request the evidence cannot show",
    ),
    (
        "robotsguard_response_signals_total",
        "moves when the origin's response head for a crawler's request carries a page preference (`response_signals`, not `ignore`): `signal` is `content_usage` (`Content-Usage: train-ai=n` or `search=n`), `noai` or `noimageai` (`X-Robots-Tag`); `action` is `enforce` (refused: decision `blocked` or `payment_required`), `report` (passed: `would_block`), `spared` (a crawler with a control token, or one that serves search too under `content_signals.multi_purpose: allow`) or `malformed` (a `Content-Usage` line ignored)",
    ),
    (
        "robotsguard_decision_requests_total",
        "requests judged through the decision listener (`decision`), by origin and the access log's decision word; they are counted in `robotsguard_requests_total` as well, exactly as proxied requests, so proxied traffic is the difference",
    ),
    (
        "robotsguard_decision_errors_total",
        "judgments the decision listener could not make and answered with `decision.on_error`: `timeout` (longer than `decision.timeout`), `internal` (no answer came of it)",
    ),
    (
        "robotsguard_decision_rejected_total",
        "decision requests refused before any judgment: `untrusted_caller` (a peer outside `decision.trusted_callers`: 403, gRPC `PERMISSION_DENIED`), `missing_header` (no forwarded method, URI or host: 400), `conflicting_headers` (two differing values of a forwarded header, or `X-Forwarded-Uri` and `X-Original-URI` that disagree: 400), `bad_request` (a target that is not origin-form, an unknown method: 400), `too_large` (the header list over `limits.max_header_bytes`, or a User-Agent over 8 KiB: 431; a gRPC message over 64 KiB: `RESOURCE_EXHAUSTED`), `not_found` (a path the listener does not serve: 404)",
    ),
    (
        "robotsguard_webhook_events_total",
        "webhook deliveries (one event to one receiver of `events.webhooks`): `delivered` (a 2xx), `retried` (each attempt after the first: no answer within `timeout`, 5xx, 408, 429), `failed` (given up after `retries`, a 4xx, or an unreadable `secret_file`), `dropped` (the queue of 1,024 events or the 256 deliveries in flight were full: a receiver that hangs), `refused` (a redirect, never followed, or a target that resolves to an address neither public nor in `events.private_targets`)",
    ),
    (
        "robotsguard_decision_stream_requests_total",
        "bouncer requests to `/v1/decisions/stream` and `/v1/decisions` on the admin listener: `ok`, `forbidden` (no `X-Api-Key`, or one not in `admin.bouncer_keys_file`: 403), `bad_request` (a `startup`, `ip` or `range` that cannot be read: 400)",
    ),
    (
        "robotsguard_admin_refusals_total",
        "admin requests refused or cut short: `host` (a `Host` that is not an address of the admin listener nor in `admin.hosts`: 421), `cross_site` (a request that changes something from another site, or with a session cookie and no CSRF token: 403), `login_failed` (a console sign-in with a wrong token), `login_throttled` (a sign-in refused while its address waits: 429), `refresh_throttled` (`POST /robots/refresh` again within 5 s: 429), `explain_lookups` (an `/explain` whose client's reverse DNS was not looked up: its lookups were used up)",
    ),
    (
        "robotsguard_requests_total",
        // The decision words are added from the one list ([`decisions_markdown`]).
        "`crawler`/`category` are `none` for non-crawlers; requests by decision",
    ),
    (
        "robotsguard_config_warnings_total",
        "warnings about the config in force, counted at start-up and at every reload as `validate` prints them: `search_crawler_refused` (an origin refuses a search engine's crawler on every path), `proxy_protocol_untrusted` (a PROXY listener no peer may use)",
    ),
    (
        "robotsguard_decision_duration_seconds",
        "time to route, identify and match one request",
    ),
    (
        "robotsguard_request_duration_seconds",
        "whole request time through the proxy",
    ),
    (
        "robotsguard_upstream_errors_total",
        "upstream failures: `connect_refused`, `connect_timeout`, `connect_error`, `timeout`, `tls`, `upstream_protocol`, `no_address` (no upstream address to use)",
    ),
    (
        "robotsguard_upstream_request_duration_seconds",
        "from sending a request upstream to receiving its response header",
    ),
    (
        "robotsguard_upstream_up",
        "1 while an upstream address takes requests, 0 while it is skipped (failed passive or active health checks); `upstream` is the address",
    ),
    (
        "robotsguard_upstream_unresolved",
        "1 while none of the origin's upstream names resolves (its requests get `502`)",
    ),
    (
        "robotsguard_robots_fetches_total",
        "robots.txt fetch outcomes: `ok`, `not_modified`, `unavailable`, `unreachable`, `rate_limited`, `redirect_limit`, `redirect_loop`, `refused_redirect`, `too_large`, `no_rules` (a 2xx with no rule held while the copy in force has rules)",
    ),
    (
        "robotsguard_robots_state",
        "1 for the state in force: `conditional`, `allow_all`, `disallow_all`",
    ),
    (
        "robotsguard_robots_rules",
        "rules in the copy in force",
    ),
    (
        "robotsguard_robots_bytes",
        "bytes of the copy in force",
    ),
    (
        "robotsguard_robots_age_seconds",
        "seconds since the copy in force was fetched or confirmed by a 304",
    ),
    (
        "robotsguard_robots_last_error_timestamp_seconds",
        "Unix time of the latest failed fetch or read",
    ),
    (
        "robotsguard_build_info",
        "always 1",
    ),
    (
        "robotsguard_config_reloads_total",
        "config reloads: `success`, `failure` (a failed reload keeps the running config)",
    ),
    (
        "robotsguard_config_last_reload_successful",
        "1 if the latest config load or reload succeeded, else 0",
    ),
    (
        "robotsguard_config_last_reload_timestamp_seconds",
        "Unix time of the latest successful load or reload",
    ),
    (
        "robotsguard_config_restart_required",
        // The list of settings is added from the config's own ([`restart_only_note`]).
        "1 while the config file changes settings that apply only on restart",
    ),
    (
        "robotsguard_responses_total",
        "every answer sent to a client by status class (`2xx` … `5xx`); `origin` is `unrouted` for answers given before routing (400, 408, 421, 431)",
    ),
    (
        "robotsguard_downstream_connections",
        "client connections open now",
    ),
    (
        "robotsguard_downstream_connections_refused_total",
        "client connections closed on arrival because `limits.max_connections` were open, each with a request in progress",
    ),
    (
        "robotsguard_downstream_connections_evicted_total",
        "connections waiting for a request head closed at `limits.max_connections` to serve a new connection",
    ),
    (
        "robotsguard_downstream_connections_max",
        "the connection cap in force",
    ),
    (
        "robotsguard_proxy_protocol_refused_total",
        "connections to a `proxy_protocol` listener closed because their PROXY header was missing or invalid",
    ),
    (
        "robotsguard_connections_refused_total",
        "client connections closed before a request was served on them: `max_connections` (every connection had a request in progress), `proxy_untrusted` (a `proxy_protocol` listener's peer not in `trusted_proxies`), `proxy_header` (missing or invalid PROXY header), `handshake_timeout` (TLS handshake not done within `limits.handshake_timeout`); each also logged, at most 5 lines a second",
    ),
    (
        "robotsguard_requests_refused_total",
        "requests refused before being decided: `max_streams_per_connection` (HTTP/2 streams the connection's stream limit refused with `REFUSED_STREAM`; a header list over `limits.max_header_bytes` is refused the same way and counted here), `max_requests_in_flight` (the process's places are taken), `max_requests_in_flight_per_client` (the client holds its share), `fair_share` (more than half the places are taken, and the client holds places and would leave fewer than four times its holding free for others): each `REFUSED_STREAM`, or `503` with `Retry-After` on HTTP/1, and logged at most 5 lines a second",
    ),
    (
        "robotsguard_requests_in_flight",
        "requests (HTTP/1 requests, HTTP/2 streams) being served now",
    ),
    (
        "robotsguard_requests_in_flight_max",
        "the cap in force (`limits.max_requests_in_flight`, in places: a request with a head over 8 KiB takes more than one)",
    ),
    (
        "robotsguard_requests_in_flight_per_client_max",
        "the places one client (an IPv4 address, an IPv6 /64) may hold in force (`limits.max_requests_in_flight_per_client`)",
    ),
    (
        "robotsguard_downstream_write_timeouts_total",
        "requests ended because a write to their client made no progress for `limits.write_timeout` (an HTTP/2 stream is reset, an HTTP/1 connection closed), releasing their places",
    ),
    (
        "robotsguard_upstream_windows_narrowed_total",
        "requests sent upstream on connections opened with a narrow TCP receive buffer (8 KiB, or 2 KiB past 256 requests in flight) because more than 64 requests (or a sixteenth of `limits.max_requests_in_flight`) were in flight (see \"Security\")",
    ),
    (
        "robotsguard_crawler_verifications_total",
        "requests whose crawler claim was checked (see \"Verified crawlers\"), by verdict: `verified`, `impostor`, `unverified`; `crawler` is the catalogue name",
    ),
    (
        "robotsguard_verify_list_fetches_total",
        "fetches and reads of crawler IP range lists (`list` is the URL or `file:` path): `ok`, `not_modified`, `malformed` (the last good copy stays), `http_error`, `unreachable`, `refused` (a list a remote feed named resolved, or redirected, to an address that is not public, or redirected off https)",
    ),
    (
        "robotsguard_catalogue_feed_entries_refused",
        "entries of a catalogue feed's copy in force left out by its rules (the rest of the feed applies; a log line names them, at most once a minute per feed): `browser_token` (its pattern matches browsers), `overrides_builtin` (`replace: true` on a built-in or `extra` entry without `may_override`), `hides_builtin` (its pattern holds such an entry's pattern, without `may_override`), `list_url` (a remote feed naming a range list that is not `https://`), `too_many_lists` (past the feed's `max_lists`)",
    ),
    (
        "robotsguard_verify_list_prefixes",
        "prefixes in the range list in force",
    ),
    (
        "robotsguard_verify_list_last_success_timestamp_seconds",
        "Unix time the range list in force was fetched, read or confirmed by a 304",
    ),
    (
        "robotsguard_crawler_range_list_loaded",
        "1 while a copy of the range list is in force, 0 from start until one is (none with `verify.ranges.enabled: false`); `list` is the catalogue's URL, also when a mirror serves it",
    ),
    (
        "robotsguard_verify_dns_lookups_total",
        "reverse DNS lookups sent for crawler verification (cache hits are not counted): `confirmed`, `no_name`, `failed`",
    ),
    (
        "robotsguard_verify_dns_available",
        "1 while the resolver answers the probe of `verify.dns.probe_name` (a name that must exist), 0 while it does not: no answer, `SERVFAIL`, `REFUSED`, or `NXDOMAIN` for that name (a resolver that does not see public DNS). While 0, `/explain` and every unverified claim say reverse DNS is unavailable, and claims stay `unverified` (never `impostor`) unless an answer that does come proves otherwise. Probed at start and every `verify.dns.probe_interval`",
    ),
    (
        "robotsguard_verify_dns_cache_entries",
        "addresses in the reverse DNS cache (at most `verify.dns.max_entries`)",
    ),
    (
        "robotsguard_verify_signature_keys",
        "Web Bot Auth keys loaded for a signing agent of `verify.web_bot_auth.agents`",
    ),
    (
        "robotsguard_verify_signature_key_fetches_total",
        "fetches of an agent's key directory (or reads of its `keys:` file): `ok`, `failed` (the last good keys stay)",
    ),
    (
        "robotsguard_tls_certificate_expiry_timestamp_seconds",
        "when each certificate a TLS listener serves expires (Unix time); `name` is its first DNS name (else its file name). Alert `RobotsguardCertificateExpiringSoon` fires under 14 days",
    ),
    (
        "robotsguard_tls_certificate_reloads_total",
        "certificate files re-read after a change: `loaded` (served from the next handshake on), `failed` (the previous certificate is still served)",
    ),
    (
        "robotsguard_rate_limited_total",
        "crawler requests answered `429` because they came sooner than robots.txt's `Crawl-delay` (`would_limit` ones are in `robotsguard_requests_total`)",
    ),
    (
        "robotsguard_rate_budget_exceeded_total",
        "crawler requests over the operator's rate budget (`policy.rates`): answered `429` (`rate_limited`) or, on an origin in `mode: report`, proxied (`would_rate_limit`); `rule` is what the budget was written for: `crawler` (its name), `category` or `purpose`. See \"Bans, budgets and the firewall\"",
    ),
    (
        "robotsguard_violations_total",
        "crawler requests a rule of the robots.txt in force disallows (`blocked` or `would_block`; not policy blocks, impostors or an unreachable robots.txt), by whether that client address fetched this origin's `/robots.txt` within the last 24 hours (`yes`: it read the rules and ignored them)",
    ),
    (
        "robotsguard_bans_total",
        "bans imposed by this process: repeated violations (`offenders.action: ban`), trap hits (`traps.action: ban`), disguised crawlers (`disguised.action: ban`)",
    ),
    (
        "robotsguard_banned_clients",
        "client networks (`offenders.prefix`: an address, or an IPv6 /64 by default) with a ban in force, each once however many User-Agents its bans bind (updated when a ban is added, lifted, or found ended; with the shared store, those of every replica)",
    ),
    (
        "robotsguard_banned_browser_requests_total",
        "browser requests from banned addresses, refused (`offenders.scope: address`) or proxied (`crawlers`): people behind an address a ban hit",
    ),
    (
        "robotsguard_third_party_requests_total",
        "requests another site's page caused, by what they would have counted toward: `trap` (a trap hit under `traps.action: ban`, answered `404` and not banned), `disguised` (not a disguised crawler's strike), `robots_read` (a browser's load of `/robots.txt`, not recorded as a read); see \"Crawlers in disguise\"",
    ),
    (
        "robotsguard_state_backend_up",
        "`1` while the state store answers within `state.redis.timeout` (always `1` with `memory`), `0` while decisions fall back to this process's memory",
    ),
    (
        "robotsguard_state_schema_newer",
        "`1` while the shared store's `schema` key names a newer key schema than this build writes (`1` today): a newer release is running beside this one; logged once per change. The replica keeps serving with the keys it knows (see \"Upgrading\")",
    ),
    (
        "robotsguard_state_backend_errors_total",
        "commands to the shared store that failed or timed out, by `operation`: `crawl_delay`, `rate_budget`, `robots_read`, `violation`, `disguised`, `web_bot_auth_nonce`, `lift_ban`, `reports` (requests and the admin endpoint), `check` (the background check), `readers`, `reload_bans`, `share_bans`, `robots_history`, `schema` (background work, retried); and by `kind`: `timeout`, `connection`, `readonly` (the store is taken for down until a check succeeds), `oom` (a write refused for want of memory: that decision is made from this process's memory, the store stays in use), `lost` (the store answered without strikes this process knew of: evicted or lost; this process's count decided), `error` (anything else)",
    ),
];

/// The Markdown reference of every metric, in registration order.
/// The note of `robotsguard_config_restart_required`, naming the settings from the config's one
/// list.
fn restart_only_note(note: &str) -> String {
    format!("{note}: {}", crate::config::restart_only_list(true))
}

/// The decision words of `robotsguard_requests_total` (or, with `access_log`, of the access log)
/// in Markdown (`` `pass` (…), `allowed` (…), … `` with what each means), from
/// [`crate::metrics::DECISIONS`].
pub fn decisions_markdown(access_log: bool) -> String {
    crate::metrics::DECISIONS
        .iter()
        .filter(|(word, _)| access_log || !crate::metrics::ACCESS_LOG_ONLY.contains(word))
        .map(|(word, meaning)| format!("`{word}` ({meaning})"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn reference_markdown() -> String {
    let mut out = String::from(
        "<!-- Generated by `robotsguard metrics` from the metric registry (src/metrics.rs) and the \
         notes in src/metrics_reference.rs: do not edit; run scripts/gen-docs.sh. -->\n\n\
         # Metrics reference\n\n\
         Every metric robotsguard exports on the admin listener's `/metrics`. All names start with \
         `robotsguard_`; labels are bounded (origin names from the config, crawler names from the \
         catalogue or `other`, never a raw User-Agent or path). The standard process metrics \
         (`process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_open_fds`, \
         `process_max_fds`, `process_start_time_seconds`, `process_threads`, \
         `process_virtual_memory_bytes`) are exported too.\n\n\
         | metric | type | labels | help | values and notes |\n| --- | --- | --- | --- | --- |\n",
    );
    for row in rows() {
        let labels: Vec<String> = row.labels.iter().map(|l| format!("`{l}`")).collect();
        let note = NOTES.iter().find(|(name, _)| *name == row.name).map_or(
            String::new(),
            |(name, note)| match *name {
                "robotsguard_config_restart_required" => restart_only_note(note),
                "robotsguard_requests_total" => format!("{note}: {}", decisions_markdown(false)),
                _ => note.to_string(),
            },
        );
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            row.name,
            row.kind,
            labels.join(", "),
            row.help.replace('\n', " ").replace('|', "\\|"),
            note
        ));
    }
    out.push_str(&format!(
        "\n## Decisions\n\nEvery `decision` of `robotsguard_requests_total` and of the access log, \
         the same words in both: {}.\n",
        decisions_markdown(true)
    ));
    out
}

/// One metric as the registry describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricRow {
    /// Its full name.
    pub name: String,
    /// `counter`, `gauge` or `histogram`.
    pub kind: &'static str,
    /// Its label names (histograms' `le` left out).
    pub labels: Vec<String>,
    /// Its help line.
    pub help: String,
}

/// Every robotsguard metric with its type, labels and help, in registration order.
pub fn rows() -> Vec<MetricRow> {
    let mut out = Vec::new();
    for collector in crate::metrics::METRICS.collectors() {
        let kinds: Vec<MetricType> = collector
            .collect()
            .iter()
            .map(|family| family.get_field_type())
            .collect();
        for (i, desc) in collector.desc().into_iter().enumerate() {
            let kind = match kinds.get(i).copied() {
                Some(MetricType::COUNTER) => "counter",
                Some(MetricType::GAUGE) => "gauge",
                Some(MetricType::HISTOGRAM) => "histogram",
                Some(MetricType::SUMMARY) => "summary",
                _ => "untyped",
            };
            let mut labels: Vec<String> = desc
                .const_label_pairs
                .iter()
                .map(|pair| pair.name().to_owned())
                .collect();
            labels.extend(desc.variable_labels.iter().cloned());
            out.push(MetricRow {
                name: desc.fq_name.clone(),
                kind,
                labels,
                help: desc.help.clone(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_note_belongs_to_a_registered_metric() {
        let names: Vec<String> = rows().into_iter().map(|r| r.name).collect();
        for (name, _) in NOTES {
            assert!(
                names.iter().any(|n| n == name),
                "note for unknown metric {name}"
            );
        }
    }

    #[test]
    fn every_registered_metric_is_named_and_typed() {
        let rows = rows();
        assert_eq!(rows.len(), crate::metrics::METRIC_NAMES.len());
        for row in rows {
            assert!(
                crate::metrics::METRIC_NAMES.contains(&row.name.as_str()),
                "{}",
                row.name
            );
            assert_ne!(row.kind, "untyped", "{}", row.name);
            assert!(!row.help.is_empty(), "{}", row.name);
        }
    }
}
