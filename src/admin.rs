//! The admin listener: `/healthz`, `/readyz`, `/metrics`, `/explain`, `/robots`, `/bans` and
//! `POST /robots/refresh`. Separate from the proxy listeners and meant to stay private. Every
//! request first passes [`crate::console::checks`]: a `Host` the listener answers to, and for a
//! state-changing one, proof that it is not another site's.
//!
//! The pieces a console needs are small public functions: [`rfc3339`] (how every time here is
//! written), [`ban_json`] and [`refresh_robots`] (a refresh on demand and its outcome as JSON);
//! Who may do what (tokens, console sessions) is [`crate::console::access`].

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use async_trait::async_trait;
use http::Response;
use pingora::apps::{HttpPersistentSettings, HttpServerApp, ReusedHttpStream};
use pingora::protocols::http::ServerSession;
use serde::Serialize;

use crate::console::access::{csrf_matches, Access, Level};
use crate::console::checks::{self, Provenance};
use crate::console::throttle::Throttles;
use crate::console::Console;
use crate::enforce::Decision;
use crate::judge::{Answer, Refusal, RefusedFor};
use crate::metrics::METRICS;
use crate::snapshot::{Live, Snapshot};

/// The admin endpoint as a pingora HTTP app ([`crate::guard::Guard::admin_service`]).
pub(crate) struct AdminApp {
    snapshot: Arc<Live>,
    access: Arc<Access>,
    verifier: Arc<crate::verify::Verifier>,
    store: Arc<crate::store::Store>,
    console: Console,
    /// The listener's address, for the `Host` check.
    address: std::net::SocketAddr,
    /// What each bouncer of the decision stream was sent.
    bouncers: Arc<crate::crowdsec::Bouncers>,
}

impl AdminApp {
    /// `admin`'s tokens: with `token_file` or `read_token_file` set, every endpoint but
    /// `/healthz` and `/readyz` needs `Authorization: Bearer <a token>` (or a console session),
    /// and actions need the admin token.
    pub(crate) fn new(
        snapshot: Arc<Live>,
        admin: &crate::config::AdminConfig,
        verifier: Arc<crate::verify::Verifier>,
        store: Arc<crate::store::Store>,
        reports: Arc<crate::reports::Reports>,
    ) -> AdminApp {
        let access = Arc::new(Access::new(
            admin.token_file.clone(),
            admin.read_token_file.clone(),
            admin.address,
        ));
        AdminApp {
            console: Console {
                access: access.clone(),
                live: snapshot.clone(),
                store: store.clone(),
                verifier: verifier.clone(),
                reports,
                throttles: Arc::new(Throttles::default()),
            },
            snapshot,
            access,
            verifier,
            store,
            address: admin.address,
            bouncers: Arc::new(crate::crowdsec::Bouncers::default()),
        }
    }
}

/// Reads an admin token file: its content without surrounding whitespace, which must not be
/// empty.
pub fn read_token(path: &Path) -> Result<String, crate::config::SecretFileError> {
    crate::console::access::read_token(path)
}

fn reply(status: u16, content_type: &str, body: Vec<u8>) -> Response<Vec<u8>> {
    let builder = Response::builder()
        .status(status)
        .header("content-type", content_type)
        .header("cache-control", "no-store")
        .header("content-length", body.len());
    builder
        .body(body)
        .unwrap_or_else(|_| Response::new(Vec::new()))
}

fn json(status: u16, value: &impl Serialize) -> Response<Vec<u8>> {
    let mut body = serde_json::to_vec_pretty(value).unwrap_or_default();
    body.push(b'\n');
    reply(status, "application/json", body)
}

fn text(status: u16, body: &str) -> Response<Vec<u8>> {
    reply(
        status,
        "text/plain; charset=utf-8",
        body.as_bytes().to_vec(),
    )
}

/// The value of the first `name` in decoded query parameters.
fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

/// `key=value&...` with `+` and `%xx` decoded.
fn query_params(query: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

#[derive(Serialize)]
struct Explanation<'a> {
    host: &'a str,
    path: &'a str,
    /// What the origin is sent instead of `path` (`paths.forward: canonical`), when it differs.
    forwarded_path: Option<String>,
    user_agent: &'a str,
    /// The client address asked about (`client=`); per-client decisions use it.
    client: Option<String>,
    /// Other crawlers the User-Agent names; the decision covers them too.
    also_named: &'a [String],
    origin: &'a str,
    mode: &'a str,
    decision: &'a str,
    /// Which step of the policy decided (`robots.txt`, `category library: pass`, ...).
    policy: String,
    /// Where crawlers read this origin's robots.txt: `robotsguard` (served from the copy in
    /// force) or `origin` (proxied).
    robots_served_by: &'a str,
    crawler: Option<&'a crate::enforce::Crawler>,
    /// What checking the crawler's claim found (with `client=` only).
    verification: Option<&'a crate::enforce::Verification>,
    /// Whether reverse DNS verification works now (the resolver's probe), and why not.
    reverse_dns: Option<crate::verify::ReverseDnsStatus>,
    group: Option<&'a str>,
    rule: Option<&'a crate::enforce::MatchedRule>,
    reason: String,
    /// The crawler's `Crawl-delay` as enforced, when its group states one.
    crawl_delay: Option<CrawlDelayInfo>,
    /// The operator's rate budget (`policy.rates`) that applies to the crawler, when one does.
    rate_budget: Option<RateBudgetInfo>,
    /// The ban in force for `client=` on this origin (repeat offenders), if any.
    ban: Option<serde_json::Value>,
    /// What the proxy would do with the request now: `proxy`, `serve_robots` or `refuse`, and
    /// the status it would answer with itself (`null` when proxied).
    answer: Option<AnswerInfo>,
    /// For a request a robots.txt rule disallows: whether `client` read robots.txt within the
    /// last 24 hours.
    read_robots: Option<bool>,
    /// The robots.txt `Content-Signal` and `Content-Usage` lines that apply to the crawler on
    /// the path, each with its line.
    preferences: &'a [crate::enforce::AppliedPreference],
    /// The line that refuses one of the crawler's purposes there, when one does.
    content_signal: Option<&'a crate::enforce::SignalRefusal>,
    /// The `Content-Usage` header proxied responses carry (`content_signals.header`).
    content_usage: Option<&'a str>,
    /// Refusals of the crawler's purposes (by `policy.purposes` or a preference line) that did
    /// not refuse it: refused through its operator's own robots.txt token instead, or it serves
    /// search too.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    spared_purposes: Vec<crate::enforce::SparedPurpose>,
    /// `response_signals`: a page's preferences in the origin's response head are judged on
    /// the origin's answer, which `/explain` does not ask for.
    response_signals: &'static str,
    robots: RobotsInfo<'a>,
    /// Why the answer may differ from the proxy's: the claim was not checked because
    /// `/explain`'s DNS lookups are used up for now.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

#[derive(Serialize)]
struct AnswerInfo {
    action: &'static str,
    status: Option<u16>,
    /// For a licence answer (402): the URL its `Link: <url>; rel="license"` points at.
    #[serde(skip_serializing_if = "Option::is_none")]
    license: Option<String>,
}

#[derive(Serialize)]
struct CrawlDelayInfo {
    /// The delay applied: the group's, capped by `crawl_delay.max`.
    seconds: f64,
    /// `crawl_delay.action`.
    action: &'static str,
    /// Per-origin for a verified crawler, per client address otherwise.
    budget: &'static str,
    /// How long the next request of this crawler (from `client`, when not verified) would
    /// have to wait now; 0 when it would be admitted.
    wait_seconds: f64,
}

#[derive(Serialize)]
struct RateBudgetInfo {
    /// The rate, as written: `60/m`.
    rate: String,
    /// `client` or `crawler`, as written.
    per: &'static str,
    /// What the rule was written for: `crawler`, `category` or `purpose`.
    rule: &'static str,
    /// Whose budget this request spends: `crawler` (a verified crawler's own, `per: crawler`)
    /// or the client's network (`2001:db8:1:2::/64`).
    budget: String,
    /// How long the next request would have to wait now; 0 when it would be admitted.
    wait_seconds: f64,
}

/// The `rate_budget` part of `/explain`.
async fn rate_budget_info(
    decision: &Decision,
    client: Option<std::net::IpAddr>,
    store: &crate::store::Store,
) -> Option<RateBudgetInfo> {
    let (key, rule, scope) = decision.rate_budget(client)?;
    let rate = crate::tables::rates::Rate {
        limit: rule.limit,
        period: rule.period,
    };
    let wait = store.rate_wait(key, rate).await.unwrap_or_default();
    Some(RateBudgetInfo {
        rate: rule.rate_text(),
        per: rule.per.as_str(),
        rule: scope.as_str(),
        budget: key.client.map_or_else(
            || "crawler".to_owned(),
            |network| crate::client_address::shown_network(&network),
        ),
        wait_seconds: wait.as_secs_f64(),
    })
}

/// The `crawl_delay` part of `/explain`.
async fn crawl_delay_info(
    decision: &Decision,
    client: Option<std::net::IpAddr>,
    store: &crate::store::Store,
) -> Option<CrawlDelayInfo> {
    let (key, delay) = decision.budget(client)?;
    let wait = store.next_admission(key, delay).await.unwrap_or_default();
    Some(CrawlDelayInfo {
        seconds: delay.as_secs_f64(),
        action: crate::judge::crawl_delay_action(decision).as_str(),
        budget: if decision.is_verified_as_deciding_crawler() {
            "crawler"
        } else {
            "client"
        },
        wait_seconds: wait.as_secs_f64(),
    })
}

#[derive(Serialize)]
struct RobotsInfo<'a> {
    state: &'a str,
    outcome: &'a str,
    description: &'a str,
    source: &'a str,
    http_status: Option<u16>,
    /// RFC 3339, as every time the admin endpoint shows.
    fetched_at: Option<String>,
    etag: Option<&'a str>,
    last_modified: Option<&'a str>,
    last_error: Option<&'a str>,
    last_error_at: Option<String>,
    rules: usize,
    bytes: usize,
}

/// `/explain`'s answer for `query`, asked by `caller`.
async fn explain(
    snapshot: &Snapshot,
    verifier: &crate::verify::Verifier,
    store: &crate::store::Store,
    throttles: &Throttles,
    caller: Option<std::net::IpAddr>,
    query: &str,
) -> Response<Vec<u8>> {
    use crate::console::preview::{ExplainQuery, ExplainQueryError};
    let params = query_params(query);
    let asked = match ExplainQuery::parse(|name| param(&params, name)) {
        Ok(asked) => asked,
        Err(error) => {
            let error = match error {
                ExplainQueryError::NoHost => "give ?host=HOST&ua=USER_AGENT&path=/PATH",
                ExplainQueryError::Client => "`client` must be an IP address",
                ExplainQueryError::Method => "`method` must be an HTTP method",
            };
            return json(400, &serde_json::json!({ "error": error }));
        }
    };
    let (host, user_agent, path, client) =
        (asked.host, asked.user_agent, &asked.target, asked.client);
    let facts = asked.facts();
    let preview =
        crate::console::preview::preview(snapshot, verifier, store, throttles, caller, &facts)
            .await;
    let judgment = &preview.judgment;
    let answer = AnswerInfo {
        action: judgment.answer.action(),
        status: judgment.answer.status(),
        license: match &judgment.answer {
            Answer::Refuse(Refusal {
                why: RefusedFor::PaymentRequired { license },
                ..
            }) => license.clone(),
            _ => None,
        },
    };
    let Some(decision) = &judgment.decision else {
        return match judgment.answer {
            Answer::Refuse(Refusal {
                why: RefusedFor::EscapedSlash,
                ..
            }) => json(
                200,
                &serde_json::json!({"decision": "refused", "status": 400, "answer": answer, "reason": "the path holds an encoded slash and the origin's paths.escaped_slashes is reject"}),
            ),
            _ => json(
                404,
                &serde_json::json!({"error": format!("no origin serves host `{host}`"), "decision": "unknown_host", "answer": answer}),
            ),
        };
    };
    let mut explained = explanation(host, path, user_agent, client, decision);
    explained.reverse_dns = Some(verifier.reverse_dns());
    explained.answer = Some(answer);
    explained.read_robots = judgment.read_robots;
    explained.crawl_delay = crawl_delay_info(decision, client, store).await;
    explained.rate_budget = rate_budget_info(decision, client, store).await;
    explained.verification = preview.verification.as_deref();
    if preview.lookups_limited {
        explained.note = Some(format!(
            "the claim was not checked with reverse DNS: /explain looks up at most {} client addresses a minute per caller and {} in all; ask again in a minute",
            crate::console::throttle::EXPLAIN_LOOKUPS_PER_CALLER,
            crate::console::throttle::EXPLAIN_LOOKUPS_OVERALL,
        ));
    }
    // An allowed client is never refused for a ban (one imposed before it was allowed, or by a
    // replica configured otherwise).
    explained.ban = client.and_then(|address| {
        if decision.origin.allow_clients.contains(address) {
            return None;
        }
        let network = decision.origin.config.offenders.prefix.network(address);
        store
            .banned(decision.origin.name(), network)
            .map(|ban| ban_json(&ban))
    });
    json(200, &explained)
}

/// What `/explain` says of the origin's `response_signals`: they are judged on the origin's
/// answer (unless ignored).
fn response_signals_note(decision: &Decision) -> &'static str {
    if decision.origin.config.response_signals.action == crate::config::SignalAction::Ignore {
        "not read (response_signals.action: ignore)"
    } else {
        RESPONSE_SIGNALS_NOTE
    }
}

/// `/explain`'s `response_signals` where the origin reads them.
pub const RESPONSE_SIGNALS_NOTE: &str = "judged on the origin's answer";

fn explanation<'a>(
    host: &'a str,
    path: &'a str,
    user_agent: &'a str,
    client: Option<std::net::IpAddr>,
    decision: &'a Decision,
) -> Explanation<'a> {
    let copy = &decision.robots;
    Explanation {
        host,
        path,
        forwarded_path: decision
            .rewritten_target
            .as_deref()
            .map(|target| String::from_utf8_lossy(target).into_owned()),
        user_agent,
        client: client.map(|c| c.to_string()),
        also_named: &decision.also_named,
        origin: decision.origin.name(),
        mode: decision.origin.config.mode.as_str(),
        decision: decision.outcome.as_str(),
        policy: decision.policy(),
        robots_served_by: if decision.origin.robots.settings.serve
            || decision.robots.carries_additions()
        {
            "robotsguard"
        } else {
            "origin"
        },
        crawler: decision.crawler.as_ref(),
        verification: decision.verification.as_deref(),
        reverse_dns: None,
        group: decision.group.as_deref(),
        rule: decision.rule.as_ref(),
        reason: decision.reason(),
        crawl_delay: None,
        rate_budget: None,
        ban: None,
        answer: None,
        read_robots: None,
        preferences: decision.preferences(),
        content_signal: decision.content_signal(),
        content_usage: decision.content_usage(),
        spared_purposes: decision.spared_purposes(),
        response_signals: response_signals_note(decision),
        robots: RobotsInfo {
            state: copy.policy.state_label(),
            outcome: copy.outcome.as_str(),
            description: &copy.reason,
            source: &copy.source,
            http_status: copy.http_status,
            fetched_at: copy.fetched_at.map(rfc3339),
            etag: copy.etag.as_deref(),
            last_modified: copy.last_modified.as_deref(),
            last_error: copy.last_error.as_deref(),
            last_error_at: copy.last_error_at.map(rfc3339),
            rules: copy.rule_count(),
            bytes: copy.body.len(),
        },
        note: None,
    }
}

/// A ban as the admin endpoint shows it: when it began and ends (RFC 3339), the whole seconds
/// left (as `Retry-After` says), the strikes that led to it, what earned it (`cause`:
/// `strikes`, `trap`, `disguised`, or `unknown` for one the shared store holds from before
/// causes were recorded) and the crawler that did (`crawler`: its catalogue name, `other`,
/// `disguised`, `browser`, `none` or `unknown`), the exact User-Agent it binds when it binds
/// one (`user_agent`, as shown: escaped and cut; else null), and the browser requests that came
/// from the address since (this process's count).
pub fn ban_json(ban: &crate::tables::offenders::Ban) -> serde_json::Value {
    serde_json::json!({
        "origin": &*ban.origin,
        "client": crate::client_address::shown_network(&ban.client),
        "since": rfc3339(ban.since),
        "until": rfc3339(ban.until),
        "remaining_seconds": crate::tables::offenders::seconds_left(ban),
        "strikes": ban.strikes,
        "cause": ban.cause.as_str(),
        "crawler": &*ban.crawler,
        "user_agent": ban.agent.as_ref().map(|agent| agent.shown()),
        "browser_requests": ban.browser_requests(),
    })
}

/// Fetches (or reads) the robots.txt of the origin called `name` now and puts it in force, as
/// `POST /robots/refresh?origin=NAME` does: the status to answer with and the outcome as JSON
/// (`404` for an origin the config does not have). The outcome: `outcome` (as
/// `robotsguard_robots_fetches_total` counts it; `inline` when there is nothing to fetch),
/// `changed`, and the copy now in force (`state`, `rules`, `http_status`, `fetched_at`,
/// `error` of this fetch when it failed and the last good copy was kept).
pub async fn refresh_robots(snapshot: &Snapshot, name: &str) -> (u16, serde_json::Value) {
    let Some(origin) = snapshot.origin_named(name) else {
        return (
            404,
            serde_json::json!({"error": format!("no origin `{name}`")}),
        );
    };
    let refreshed = crate::fetch::refresh_now(origin).await;
    let copy = &refreshed.copy;
    let failed = refreshed.outcome.is_some() && copy.last_error.is_some();
    (
        200,
        serde_json::json!({
            "origin": name,
            "outcome": refreshed.outcome.map_or("inline", |outcome| outcome.as_str()),
            "changed": refreshed.changed,
            "state": copy.policy.state_label(),
            "rules": copy.rule_count(),
            "source": &copy.source,
            "http_status": copy.http_status,
            "fetched_at": copy.fetched_at.map(rfc3339),
            "error": if failed { copy.last_error.as_deref() } else { None },
        }),
    )
}

/// `GET /bans?origin=`: the bans in force (on one origin, or all); 404 for an origin the config
/// does not have, as `DELETE` answers.
fn list_bans(snapshot: &Snapshot, store: &crate::store::Store, query: &str) -> Response<Vec<u8>> {
    let params = query_params(query);
    let origin = param(&params, "origin").filter(|name| !name.is_empty());
    if let Some(origin) = origin.filter(|name| !snapshot.origins.iter().any(|o| o.name() == *name))
    {
        return json(
            404,
            &serde_json::json!({"error": format!("no origin `{origin}`")}),
        );
    }
    let bans = store.bans(origin);
    let state = |ban| crate::judge::ban_state(snapshot, ban);
    if param(&params, "format") == Some("csv") {
        // New columns go last: spreadsheets reading the earlier ones by position go on.
        let rows = bans.iter().map(|ban| {
            vec![
                ban.origin.to_string(),
                crate::client_address::shown_network(&ban.client),
                rfc3339(ban.since),
                rfc3339(ban.until),
                crate::tables::offenders::seconds_left(ban).to_string(),
                ban.strikes.to_string(),
                ban.browser_requests().to_string(),
                ban.cause.as_str().to_string(),
                ban.crawler.to_string(),
                ban.agent
                    .as_ref()
                    .map_or_else(String::new, |agent| agent.shown().to_string()),
                state(ban).to_string(),
            ]
        });
        let header = [
            "origin",
            "client",
            "since",
            "until",
            "remaining_seconds",
            "strikes",
            "browser_requests",
            "cause",
            "crawler",
            "user_agent",
            "state",
        ];
        return reply(
            200,
            "text/csv; charset=utf-8",
            crate::reports::csv(&header, rows),
        );
    }
    let bans: Vec<serde_json::Value> = bans
        .iter()
        .map(|ban| {
            let mut shown = ban_json(ban);
            if let Some(fields) = shown.as_object_mut() {
                fields.insert("state".into(), state(ban).into());
            }
            shown
        })
        .collect();
    json(200, &serde_json::json!({ "bans": bans }))
}

/// `DELETE /bans?origin=NAME&client=ADDRESS` lifts the bans of an address's network (under the
/// origin's `offenders.prefix`) on an origin, `client=PREFIX` those of a network as `/bans`
/// shows it (`2001:db8:1:2::/64`; host bits set: 400 naming the network),
/// `DELETE /bans?origin=NAME` all of an origin's, `DELETE /bans?all=1` every origin's: here and
/// in the shared store.
async fn lift_ban(
    snapshot: &Snapshot,
    store: &crate::store::Store,
    query: &str,
) -> Response<Vec<u8>> {
    let params = query_params(query);
    let get = |name: &str| param(&params, name).filter(|value| !value.is_empty());
    let all = match get("all") {
        None => false,
        Some("1" | "true" | "yes") => true,
        Some(_) => {
            return json(
                400,
                &serde_json::json!({"error": "`all` lifts every origin's bans: give all=1"}),
            )
        }
    };
    let (origin, client) = match (get("origin"), get("client"), all) {
        (None, None, true) => {
            let lifted = store.lift_all(None).await;
            tracing::info!(
                count = lifted.count,
                "every ban lifted from the admin endpoint"
            );
            return lifted_all_answer(None, lifted);
        }
        (Some(origin), None, false) => {
            if snapshot.origin_named(origin).is_none() {
                return json(
                    404,
                    &serde_json::json!({"error": format!("no origin `{origin}`")}),
                );
            }
            let lifted = store.lift_all(Some(origin)).await;
            tracing::info!(
                origin,
                count = lifted.count,
                "an origin's bans lifted from the admin endpoint"
            );
            return lifted_all_answer(Some(origin), lifted);
        }
        (Some(origin), Some(client), false) => (origin, client),
        _ => {
            return json(
                400,
                &serde_json::json!({"error": "give ?origin=NAME&client=ADDRESS or client=PREFIX (one client network), ?origin=NAME (all of an origin's bans) or ?all=1 (every origin's)"}),
            )
        }
    };
    let Some(named) = snapshot.origin_named(origin) else {
        return json(
            404,
            &serde_json::json!({"error": format!("no origin `{origin}`")}),
        );
    };
    // An address stands for its network under the origin's `offenders.prefix`, as the proxy
    // keys bans; a prefix must be a network boundary.
    let client = match crate::client_address::parse_client(client, named.config.offenders.prefix) {
        Ok(client) => client,
        Err(e) => {
            return json(
                400,
                &serde_json::json!({ "error": format!("`client`: {e}") }),
            )
        }
    };
    let shown = crate::client_address::shown_network(&client);
    match store.lift(origin, client).await {
        crate::store::Lifted::Yes => json(
            200,
            &serde_json::json!({"lifted": {"origin": origin, "client": shown}}),
        ),
        crate::store::Lifted::NotBanned => json(
            404,
            &serde_json::json!({"error": format!("{shown} is not banned on `{origin}`")}),
        ),
        crate::store::Lifted::HereOnly => json(
            503,
            &serde_json::json!({
                "error": "the shared state store is unreachable: the ban is lifted in this process only, and comes back from the store when it is reachable; try again",
                "lifted_here": {"origin": origin, "client": shown},
            }),
        ),
    }
}

/// The answer to a bulk lift: how many bans were lifted, on which origin (or `all`); 503 when
/// the shared store was unreachable (lifted here only).
fn lifted_all_answer(origin: Option<&str>, lifted: crate::store::LiftedAll) -> Response<Vec<u8>> {
    let mut answer = serde_json::json!({
        "lifted": lifted.count,
        "origin": origin,
        "all": origin.is_none(),
    });
    if lifted.everywhere {
        return json(200, &answer);
    }
    if let Some(fields) = answer.as_object_mut() {
        fields.insert(
            "error".into(),
            "the shared state store is unreachable: the bans are lifted in this process only, and come back from the store when it is reachable; try again".into(),
        );
    }
    json(503, &answer)
}

/// `at` as RFC 3339 in UTC, to the second (`2026-05-01T12:00:00Z`): how the admin endpoint
/// and the log lines write times.
pub fn rfc3339(at: SystemTime) -> String {
    crate::logs::rfc3339(at)
}

fn robots_copy(snapshot: &Snapshot, query: &str) -> Response<Vec<u8>> {
    let params = query_params(query);
    let Some(name) = param(&params, "origin") else {
        return text(400, "give ?origin=NAME\n");
    };
    match snapshot.origin_named(name) {
        Some(origin) => {
            let copy = origin.robots.current();
            // With additions (trap paths, control-token groups), what robotsguard serves (a
            // policy without a file has a text too).
            let body = if !copy.carries_additions() {
                copy.body.to_vec()
            } else {
                copy.served().body.to_vec()
            };
            reply(200, "text/plain; charset=utf-8", body)
        }
        None => text(404, &format!("no origin named `{name}`\n")),
    }
}

/// `GET /evidence/robots/<sha256>`: a stored robots.txt copy.
const EVIDENCE_ROBOTS: &str = "/evidence/robots/";

/// The most bytes of records sent as one piece of the chunked `GET /evidence` answer.
const EXPORT_PIECE: usize = 64 * 1024;

/// The pieces of an export read ahead of the client: with the line being read, what one
/// export holds in memory, whatever the size of the evidence directory.
const EXPORT_PIECES_AHEAD: usize = 4;

const EVIDENCE_OFF: &str = "evidence is off: set evidence.enabled and evidence.key_file\n";

/// `GET /evidence/key`: the public key records are signed with, as a JWK.
fn evidence_key() -> Response<Vec<u8>> {
    match crate::evidence::active() {
        Some(evidence) => {
            let body = format!("{}\n", evidence.jwk()).into_bytes();
            reply(200, "application/jwk+json", body)
        }
        None => text(404, EVIDENCE_OFF),
    }
}

/// What a `GET /evidence` answer streams once its head is written ([`stream_evidence`]):
/// carried in the extensions of the answer [`AdminApp::response`] gives, after it checked the
/// request's access like any other path's.
#[derive(Clone)]
struct EvidenceExport {
    dir: std::path::PathBuf,
    filter: crate::evidence::export::Filter,
}

/// `GET /evidence?origin=&crawler=&since=&until=`: the head of the answer whose body is the
/// records selected, as written (JSON Lines), every replica's in the directory, streamed.
fn evidence_export(query: &str) -> Response<Vec<u8>> {
    let Some(evidence) = crate::evidence::active() else {
        return text(404, EVIDENCE_OFF);
    };
    let params = query_params(query);
    let nonempty = |name: &str| param(&params, name).filter(|v| !v.is_empty());
    let mut filter = crate::evidence::export::Filter {
        origin: nonempty("origin").map(str::to_string),
        crawler: nonempty("crawler").map(str::to_string),
        ..Default::default()
    };
    for (name, slot) in [("since", &mut filter.since), ("until", &mut filter.until)] {
        if let Some(value) = nonempty(name) {
            match crate::evidence::export::parse_time(value) {
                Ok(at) => *slot = Some(at),
                Err(why) => {
                    return text(
                        400,
                        &format!(
                            "{name}: {}\n",
                            crate::logs::escape_client_text(why.as_bytes())
                        ),
                    )
                }
            }
        }
    }
    let mut answer = reply(200, "application/jsonl", Vec::new());
    answer.headers_mut().remove("content-length");
    answer.extensions_mut().insert(EvidenceExport {
        dir: evidence.dir().to_path_buf(),
        filter,
    });
    answer
}

/// Writes the head of a `GET /evidence` answer and streams its records as a chunked body: a
/// thread reads the files as it goes, a few pieces ahead of the client, and stops when the
/// client is gone. False when the connection cannot go on.
async fn stream_evidence(
    http: &mut ServerSession,
    answer: Response<Vec<u8>>,
    export: EvidenceExport,
) -> bool {
    let head_only = http.req_header().method == http::Method::HEAD;
    let (parts, _) = answer.into_parts();
    let mut head: pingora::http::ResponseHeader = parts.into();
    if !head_only {
        let _ = head.insert_header("transfer-encoding", "chunked");
    }
    if http.write_response_header(Box::new(head)).await.is_err() {
        return false;
    }
    if !head_only {
        let (pieces, mut receiver) =
            tokio::sync::mpsc::channel::<bytes::Bytes>(EXPORT_PIECES_AHEAD);
        // Reading and parsing the files is blocking work: off the admin listener's threads.
        let reader = tokio::task::spawn_blocking(move || {
            let mut piece = Vec::with_capacity(EXPORT_PIECE);
            let selected =
                crate::evidence::export::select_each(&export.dir, &export.filter, |record| {
                    piece.extend_from_slice(record);
                    if piece.len() < EXPORT_PIECE {
                        return true;
                    }
                    let full = std::mem::replace(&mut piece, Vec::with_capacity(EXPORT_PIECE));
                    pieces.blocking_send(full.into()).is_ok()
                });
            !selected.truncated && (piece.is_empty() || pieces.blocking_send(piece.into()).is_ok())
        });
        while let Some(piece) = receiver.recv().await {
            if http.write_response_body(piece, false).await.is_err() {
                // The receiver dropped on return stops the reader at its next piece.
                return false;
            }
            made_progress();
        }
        // A reader that did not finish must not end the body as if the export were whole.
        if !matches!(reader.await, Ok(true)) {
            return false;
        }
    }
    http.write_response_body(bytes::Bytes::new(), true)
        .await
        .is_ok()
}

/// `GET /evidence/robots/<sha256>`: a stored robots.txt copy, as fetched; its fetch time,
/// source and status in `X-Evidence-Robots` (the JSON stored beside it).
fn evidence_robots(name: &str) -> Response<Vec<u8>> {
    let Some(evidence) = crate::evidence::active() else {
        return text(404, EVIDENCE_OFF);
    };
    if !crate::evidence::is_sha256_name(name) {
        return text(400, "give the copy's sha256: 64 lower-case hex digits\n");
    }
    match crate::evidence::export::robots_copy(evidence.dir(), name) {
        Some(body) => {
            let mut answer = reply(200, "text/plain; charset=utf-8", body);
            let meta = crate::evidence::export::robots_meta(evidence.dir(), name)
                .and_then(|m| String::from_utf8(m).ok())
                .and_then(|m| http::HeaderValue::from_str(m.trim()).ok());
            if let Some(meta) = meta {
                answer.headers_mut().insert("x-evidence-robots", meta);
            }
            answer
        }
        None => text(404, "no stored robots.txt copy by that sha256\n"),
    }
}

/// Ages change with time, not with events: they are computed when scraped.
fn publish_ages(snapshot: &Snapshot) {
    let now = std::time::SystemTime::now();
    for origin in &snapshot.origins {
        let copy = origin.robots.current();
        if let Some(age) = copy.fetched_at.and_then(|at| now.duration_since(at).ok()) {
            METRICS
                .robots_age
                .with_label_values(&[origin.name()])
                .set(age.as_secs_f64());
        }
    }
}

/// The methods each path answers (its `Allow` header): `POST` only on `/robots/refresh`,
/// `DELETE` besides `GET` and `HEAD` on `/bans`, `GET` and `HEAD` elsewhere.
fn allowed_methods(path: &str) -> &'static [http::Method] {
    const READ: &[http::Method] = &[http::Method::GET, http::Method::HEAD];
    const BANS: &[http::Method] = &[http::Method::GET, http::Method::HEAD, http::Method::DELETE];
    match path {
        REFRESH_PATH | PREVIEW_PATH => &[http::Method::POST],
        "/bans" => BANS,
        _ => READ,
    }
}

const REFRESH_PATH: &str = "/robots/refresh";
/// `POST /robots/preview?origin=NAME`: what a candidate robots.txt or policy would change
/// ([`crate::preview`]); the read-only token may ask, as it changes nothing.
const PREVIEW_PATH: &str = "/robots/preview";

/// What answers a request whose `Host` the admin listener does not answer to.
const MISDIRECTED: &str = "421 misdirected: this admin listener answers to its own addresses, localhost (when it listens on loopback) and the names in admin.hosts; add the name you reach it by to admin.hosts\n";

impl AdminApp {
    /// Refuses what no admin path may answer: a `Host` that is not the listener's (DNS
    /// rebinding; `/healthz` and `/readyz` excepted, which show nothing then) and a request that
    /// changes something from another site (CSRF), on every path, the console's and the JSON
    /// API's alike. `None`: go on.
    fn refuse_foreign(
        &self,
        request: &pingora::http::RequestHeader,
        path: &str,
        host_ok: bool,
        peer: Option<std::net::IpAddr>,
    ) -> Option<Response<Vec<u8>>> {
        if !host_ok && !matches!(path, "/healthz" | "/readyz") {
            METRICS.admin_refusals.with_label_values(&["host"]).inc();
            crate::logs::admin_refused(
                peer,
                &format!(
                    "Host {} is not an address of the admin listener nor in admin.hosts",
                    crate::logs::escape_client_text(
                        request
                            .headers
                            .get(http::header::HOST)
                            .map_or(b"(none)".as_slice(), http::HeaderValue::as_bytes)
                    )
                ),
            );
            return Some(text(421, MISDIRECTED));
        }
        if !checks::changes_state(&request.method) {
            return None;
        }
        let has_cookie = crate::console::access::session_cookie(request).is_some();
        let refused = match checks::provenance(request, has_cookie) {
            Provenance::SameOrigin | Provenance::NotBrowser => false,
            Provenance::Foreign => true,
            // The console's forms carry the token in their body, which its pages check; the
            // JSON API takes it in `X-CSRF-Token`.
            Provenance::NeedsToken if Console::serves(path) => false,
            Provenance::NeedsToken => {
                let given = request
                    .headers
                    .get("x-csrf-token")
                    .and_then(|v| v.to_str().ok());
                let session = self.access.session(request);
                !matches!((session, given), (Some(s), Some(given)) if csrf_matches(&s.csrf, given))
            }
        };
        if refused {
            METRICS
                .admin_refusals
                .with_label_values(&["cross_site"])
                .inc();
            crate::logs::admin_refused(
                peer,
                &format!(
                    "{} {} from another site (its Origin or Sec-Fetch-Site), or with a session cookie and no CSRF token",
                    request.method,
                    crate::logs::escape_client_text(path.as_bytes())
                ),
            );
            return Some(text(
                403,
                "403 refused: a request that changes something must come from the console's own pages (Origin or Sec-Fetch-Site: same-origin), carry the session's CSRF token (X-CSRF-Token), or come from a client that is not a browser with a bearer token\n",
            ));
        }
        None
    }
}

/// What a bouncer's request is answered with: a pull of the stream, or the list of
/// `/v1/decisions`.
enum Walked {
    Stream(crate::crowdsec::Pull),
    List(Vec<crate::crowdsec::Decision>),
}

/// A bouncer's request, authorised and read.
struct BouncerRequest {
    /// The digest of its key: what was sent is remembered per key.
    key: [u8; 32],
    filter: crate::crowdsec::Filter,
    startup: bool,
    head: bool,
}

/// Writes a whole answer; false when the connection cannot go on.
async fn write_whole(http: &mut ServerSession, answer: Response<Vec<u8>>) -> bool {
    let (parts, body) = answer.into_parts();
    let head: pingora::http::ResponseHeader = parts.into();
    if http.write_response_header(Box::new(head)).await.is_err() {
        return false;
    }
    body.is_empty() || http.write_response_body(body.into(), true).await.is_ok()
}

/// Writes `decisions` as a JSON list (`null` when empty) through `chunk`, sending it each time
/// it fills.
async fn write_list(
    http: &mut ServerSession,
    chunk: &mut String,
    decisions: &[crate::crowdsec::Decision],
    deleted: bool,
) -> bool {
    if decisions.is_empty() {
        chunk.push_str("null");
        return true;
    }
    let parts = decisions.len().div_ceil(256);
    for (i, part) in decisions.chunks(256).enumerate() {
        crate::crowdsec::write_part(part, i == 0, i + 1 == parts, deleted, chunk);
        if chunk.len() >= crate::crowdsec::CHUNK_BYTES && !write_chunk(http, chunk).await {
            return false;
        }
    }
    true
}

/// Sends what `chunk` holds as a piece of a chunked body, and empties it.
async fn write_chunk(http: &mut ServerSession, chunk: &mut String) -> bool {
    let piece = std::mem::replace(
        chunk,
        String::with_capacity(crate::crowdsec::CHUNK_BYTES + 1024),
    );
    http.write_response_body(bytes::Bytes::from(piece), false)
        .await
        .is_ok()
}

/// The decision stream's paths (`crate::crowdsec`).
const STREAM_PATH: &str = "/v1/decisions/stream";
const DECISIONS_PATH: &str = "/v1/decisions";

#[async_trait]
impl HttpServerApp for AdminApp {
    async fn process_new_http(
        self: &Arc<Self>,
        mut http: ServerSession,
        shutdown: &pingora::server::ShutdownWatch,
    ) -> Option<ReusedHttpStream> {
        if !matches!(http.read_request().await, Ok(true)) {
            return None;
        }
        http.set_keepalive(if *shutdown.borrow() { None } else { Some(60) });
        let path = http.req_header().uri.path().to_string();
        if matches!(path.as_str(), STREAM_PATH | DECISIONS_PATH) {
            // Streamed: an answer may hold every ban in force.
            if !self.decisions(&mut http, &path).await {
                return None;
            }
        } else {
            let mut answer = self.response(&mut http).await;
            let written = match answer.extensions_mut().remove::<EvidenceExport>() {
                // Streamed: an export may hold every record in the evidence directory.
                Some(export) => stream_evidence(&mut http, answer, export).await,
                None => write_whole(&mut http, answer).await,
            };
            if !written {
                return None;
            }
        }
        finish(http).await
    }
}

/// Ends an answered request: the connection back for the next one, when it can go on.
async fn finish(http: ServerSession) -> Option<ReusedHttpStream> {
    let settings = HttpPersistentSettings::for_session(&http);
    match http.finish().await {
        Ok(stream) => stream.map(|s| ReusedHttpStream::from_reusable_stream(s, settings)),
        Err(_) => None,
    }
}

impl AdminApp {
    /// `GET /v1/decisions/stream?startup=true|false` and `GET /v1/decisions`, as the CrowdSec
    /// Local API answers bouncers; `X-Api-Key` alone authorises them. False when the
    /// connection cannot go on.
    async fn decisions(&self, http: &mut ServerSession, path: &str) -> bool {
        let snapshot = self.snapshot.load();
        let asked = match self.bouncer_request(http, path, &snapshot) {
            Ok(asked) => asked,
            Err(refused) => return write_whole(http, *refused).await,
        };
        METRICS
            .decision_stream_requests
            .with_label_values(&["ok"])
            .inc();
        let export = snapshot.config.events.firewall;
        let offenders = self.store.offenders();
        let bouncers = self.bouncers.clone();
        let stream = path == STREAM_PATH;
        let BouncerRequest {
            key,
            filter,
            startup,
            head,
        } = asked;
        // Walking up to 100,000 bans is CPU work: off the admin listener's async threads.
        let walked = tokio::task::spawn_blocking(move || {
            let current = crate::crowdsec::in_force(&snapshot, &offenders, export, &filter);
            if stream {
                Walked::Stream(bouncers.pull(key, startup, current))
            } else {
                Walked::List(current.into_values().collect())
            }
        })
        .await;
        let Ok(walked) = walked else {
            return false;
        };
        let Ok(mut header) = pingora::http::ResponseHeader::build(200, Some(4)) else {
            return false;
        };
        let _ = header.insert_header("content-type", "application/json");
        let _ = header.insert_header("cache-control", "no-store");
        if !head {
            let _ = header.insert_header("transfer-encoding", "chunked");
        }
        if http.write_response_header(Box::new(header)).await.is_err() {
            return false;
        }
        if !head {
            // Written a chunk at a time as it fills: one chunk of the answer is held at once.
            let mut chunk = String::with_capacity(crate::crowdsec::CHUNK_BYTES + 1024);
            let written = match &walked {
                Walked::Stream(pull) => {
                    chunk.push_str("{\"new\":");
                    let new = write_list(http, &mut chunk, &pull.new, false).await;
                    chunk.push_str(",\"deleted\":");
                    let deleted = new && write_list(http, &mut chunk, &pull.deleted, true).await;
                    chunk.push('}');
                    deleted
                }
                Walked::List(decisions) => write_list(http, &mut chunk, decisions, false).await,
            };
            chunk.push('\n');
            if !written || !write_chunk(http, &mut chunk).await {
                return false;
            }
        }
        http.write_response_body(bytes::Bytes::new(), true)
            .await
            .is_ok()
    }

    /// Who asks the decision stream what: a GET with a bouncer key of
    /// `admin.bouncer_keys_file` and a query that can be read; else the answer refusing it.
    fn bouncer_request(
        &self,
        http: &ServerSession,
        path: &str,
        snapshot: &Snapshot,
    ) -> Result<BouncerRequest, Box<Response<Vec<u8>>>> {
        let peer = http
            .client_addr()
            .and_then(|address| address.as_inet())
            .map(|address| address.ip().to_canonical());
        let request = http.req_header();
        let host_ok = checks::host_allowed(request, self.address, &snapshot.config.admin.hosts);
        if let Some(refused) = self.refuse_foreign(request, path, host_ok, peer) {
            return Err(Box::new(refused));
        }
        if !matches!(request.method, http::Method::GET | http::Method::HEAD) {
            let mut answer = json(405, &serde_json::json!({"message": "only GET"}));
            answer
                .headers_mut()
                .insert("allow", http::HeaderValue::from_static("GET, HEAD"));
            return Err(Box::new(answer));
        }
        let count = |result: &str| {
            METRICS
                .decision_stream_requests
                .with_label_values(&[result])
                .inc();
        };
        let given = request
            .headers
            .get("x-api-key")
            .and_then(|v| v.to_str().ok());
        let Ok(key) = self
            .bouncers
            .authenticate(snapshot.config.admin.bouncer_keys_file.as_deref(), given)
        else {
            count("forbidden");
            crate::logs::admin_refused(
                peer,
                "a decision stream request without a bouncer key of admin.bouncer_keys_file",
            );
            return Err(Box::new(json(
                403,
                &serde_json::json!({"message": "access forbidden"}),
            )));
        };
        let params = query_params(request.uri.query().unwrap_or(""));
        let bad = |message: String| {
            count("bad_request");
            Box::new(json(400, &serde_json::json!({ "message": message })))
        };
        let filter =
            crate::crowdsec::Filter::from_params(&params).map_err(|e| bad(e.to_string()))?;
        let startup = match param(&params, "startup") {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(bad(format!("startup must be true or false, not {other:?}")))
            }
        };
        Ok(BouncerRequest {
            key,
            filter,
            startup,
            head: request.method == http::Method::HEAD,
        })
    }

    async fn response(&self, session: &mut ServerSession) -> Response<Vec<u8>> {
        let peer = session
            .client_addr()
            .and_then(|address| address.as_inet())
            .map(|address| address.ip().to_canonical());
        let snapshot = self.snapshot.load();
        let request = session.req_header();
        let path = request.uri.path().to_string();
        let host_ok = checks::host_allowed(request, self.address, &snapshot.config.admin.hosts);
        if let Some(refused) = self.refuse_foreign(request, &path, host_ok, peer) {
            return refused;
        }
        if Console::serves(&path) {
            return self.console.respond(session, peer).await;
        }
        let query = request.uri.query().unwrap_or("").to_string();
        let method = &request.method;
        let allowed = allowed_methods(&path);
        if !allowed.contains(method) {
            let mut answer = text(
                405,
                "only GET and HEAD are allowed (DELETE on /bans, and POST only on /robots/refresh and /robots/preview)\n",
            );
            let names: Vec<&str> = allowed.iter().map(http::Method::as_str).collect();
            if let Ok(allow) = http::HeaderValue::from_str(&names.join(", ")) {
                answer.headers_mut().insert("allow", allow);
            }
            return answer;
        }
        let lifting = *method == http::Method::DELETE;
        let open = matches!(path.as_str(), "/healthz" | "/readyz");
        let level = self.access.level(request);
        // A probe through a name the listener does not answer to learns nothing more.
        let authorized = || host_ok && level >= Level::Read;
        if !open && !authorized() {
            let mut answer = text(401, "a bearer token is required\n");
            answer.headers_mut().insert(
                "www-authenticate",
                http::HeaderValue::from_static("Bearer realm=\"robotsguard admin\""),
            );
            return answer;
        }
        let acting = lifting || path == REFRESH_PATH;
        if acting && level < Level::Admin {
            return text(
                403,
                "the read-only token cannot lift bans or refresh robots.txt: use the admin token\n",
            );
        }
        match path.as_str() {
            "/healthz" => text(200, "ok\n"),
            "/readyz" => {
                if snapshot.is_ready() {
                    text(200, "ready\n")
                } else if !authorized() {
                    // Origin names are for those who hold the token.
                    text(503, "waiting for robots.txt\n")
                } else {
                    let pending: Vec<&str> = snapshot
                        .origins
                        .iter()
                        .filter(|o| !o.robots.is_ready())
                        .map(|o| o.name())
                        .collect();
                    text(503, &format!("waiting for robots.txt of: {}\n", pending.join(", ")))
                }
            }
            "/metrics" => {
                publish_ages(&snapshot);
                // A ban that ended without its address coming back must not be counted.
                self.store.prune_ended_bans();
                reply(200, "text/plain; version=0.0.4", METRICS.render())
            }
            "/explain" => {
                explain(
                    &snapshot,
                    &self.verifier,
                    &self.store,
                    &self.console.throttles,
                    peer,
                    &query,
                )
                .await
            }
            "/bans" if lifting => lift_ban(&snapshot, &self.store, &query).await,
            "/bans" => list_bans(&snapshot, &self.store, &query),
            "/robots" => robots_copy(&snapshot, &query),
            "/evidence/key" => evidence_key(),
            "/evidence" => evidence_export(&query),
            other if other.starts_with(EVIDENCE_ROBOTS) => {
                evidence_robots(&other[EVIDENCE_ROBOTS.len()..])
            }
            REFRESH_PATH => {
                let params = query_params(&query);
                match param(&params, "origin") {
                    Some(name) if snapshot.origin_named(name).is_some() => {
                        if let Err(wait) = self.console.throttles.take_refresh(name) {
                            return too_soon(name, wait);
                        }
                        let (status, outcome) = refresh_robots(&snapshot, name).await;
                        json(status, &outcome)
                    }
                    Some(name) => json(
                        404,
                        &serde_json::json!({"error": format!("no origin `{name}`")}),
                    ),
                    None => json(400, &serde_json::json!({"error": "give ?origin=NAME"})),
                }
            }
            PREVIEW_PATH => {
                let content_type = session
                    .req_header()
                    .headers
                    .get(http::header::CONTENT_TYPE)
                    .map(|v| v.as_bytes().to_vec());
                let params = query_params(&query);
                let Some(name) = param(&params, "origin").map(str::to_string) else {
                    return json(400, &serde_json::json!({"error": "give ?origin=NAME"}));
                };
                if snapshot.origin_named(&name).is_none() {
                    return json(
                        404,
                        &serde_json::json!({"error": format!("no origin `{name}`")}),
                    );
                }
                let Some(body) = read_body(session, crate::preview::body::MAX_BODY_BYTES).await
                else {
                    return json(
                        400,
                        &serde_json::json!({"error": format!(
                            "the body is larger than {} KiB: a candidate robots.txt may be at most {} KiB (the engine's cap)",
                            crate::preview::body::MAX_BODY_BYTES / 1024,
                            crate::preview::body::MAX_ROBOTS_BYTES / 1024
                        )}),
                    );
                };
                let candidate = match crate::preview::body::parse(content_type.as_deref(), &body) {
                    Ok(candidate) => candidate,
                    Err(error) => {
                        return json(400, &serde_json::json!({ "error": error.to_string() }))
                    }
                };
                match crate::preview::preview(
                    &snapshot,
                    &self.verifier,
                    &self.store,
                    &self.console.reports,
                    &name,
                    &candidate,
                )
                .await
                {
                    Ok(answer) => json(200, &answer),
                    Err(error) => json(400, &serde_json::json!({ "error": error.to_string() })),
                }
            }
            _ => text(404, "not found: try /healthz /readyz /metrics /explain?host=&ua=&path= /robots?origin= /bans?origin= /reports/crawlers?origin= /evidence?origin=&crawler=&since=&until= /evidence/key /ui/ /v1/decisions/stream (POST /robots/refresh?origin= /robots/preview?origin=)\n"),
        }
    }
}

/// A request body of at most `max` bytes; `None` when it is larger (reading stops there).
async fn read_body(session: &mut ServerSession, max: usize) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    // Bounded in chunks too; the admin request deadline bounds the time.
    for _ in 0..16_384 {
        match session.read_request_body().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > max {
                    return None;
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) | Err(_) => break,
        }
    }
    Some(body)
}

/// 429 for a robots.txt refresh of `origin` asked again within
/// [`crate::console::throttle::REFRESH_INTERVAL`], with `Retry-After`.
fn too_soon(origin: &str, wait: std::time::Duration) -> Response<Vec<u8>> {
    METRICS
        .admin_refusals
        .with_label_values(&["refresh_throttled"])
        .inc();
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let seconds = seconds.max(1);
    let mut answer = json(
        429,
        &serde_json::json!({
            "error": format!(
                "robots.txt of `{origin}` was fetched on demand less than {} s ago; try again in {seconds} s",
                crate::console::throttle::REFRESH_INTERVAL.as_secs()
            ),
            "retry_after_seconds": seconds,
        }),
    );
    if let Ok(value) = http::HeaderValue::from_str(&seconds.to_string()) {
        answer
            .headers_mut()
            .insert(http::header::RETRY_AFTER, value);
    }
    answer
}

/// Admin connections served at once. The admin endpoint serves probes and a scraper, not
/// crowds, and its connections share the process's descriptors with the proxy's.
const MAX_ADMIN_CONNECTIONS: usize = 64;

/// How long one admin request may take, from waiting for its head to the end of its answer; a
/// streamed answer (`GET /evidence`) has as long again after each piece the client took, so an
/// export of any size can finish while a client that stops taking it is still cut off.
const ADMIN_REQUEST_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// When the request on an admin connection last made progress (see [`ADMIN_REQUEST_DEADLINE`]).
struct Progress {
    started: std::time::Instant,
    /// Milliseconds from `started`.
    last: std::sync::atomic::AtomicU64,
}

impl Progress {
    fn new() -> Progress {
        Progress {
            started: std::time::Instant::now(),
            last: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn mark(&self) {
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(now, std::sync::atomic::Ordering::Relaxed);
    }

    /// When the request's time runs out, as things stand.
    fn deadline(&self) -> std::time::Instant {
        let last = self.last.load(std::sync::atomic::Ordering::Relaxed);
        self.started + std::time::Duration::from_millis(last) + ADMIN_REQUEST_DEADLINE
    }
}

tokio::task_local! {
    /// The progress of the request the current task serves, set by [`BoundedAdmin`].
    static PROGRESS: Arc<Progress>;
}

/// Gives the request the current task serves [`ADMIN_REQUEST_DEADLINE`] again from now: a
/// streamed answer calls it for each piece the client took.
fn made_progress() {
    let _ = PROGRESS.try_with(|progress| progress.mark());
}

/// The admin app behind a connection cap and a per-request deadline. When the cap is reached, a
/// new connection closes the oldest one rather than being refused: a probe must get through
/// even while someone holds idle connections to the admin port (closing the newest instead
/// would let them lock probes out, and the pod be restarted for it).
pub(crate) struct BoundedAdmin {
    app: Arc<AdminApp>,
    open: Mutex<AdminConnections>,
}

#[derive(Default)]
struct AdminConnections {
    next: u64,
    /// Oldest first: each connection's number and how to close it.
    live: std::collections::VecDeque<(u64, Arc<tokio::sync::Notify>)>,
}

impl BoundedAdmin {
    pub(crate) fn new(app: AdminApp) -> BoundedAdmin {
        BoundedAdmin {
            app: Arc::new(app),
            open: Mutex::new(AdminConnections::default()),
        }
    }
}

#[async_trait]
impl pingora::apps::ServerApp for BoundedAdmin {
    async fn process_new(
        self: &Arc<Self>,
        stream: pingora::protocols::Stream,
        shutdown: &pingora::server::ShutdownWatch,
    ) -> Option<pingora::protocols::Stream> {
        let close = Arc::new(tokio::sync::Notify::new());
        let number = {
            let mut open = self.open.lock().ok()?;
            if open.live.len() >= MAX_ADMIN_CONNECTIONS {
                if let Some((_, oldest)) = open.live.pop_front() {
                    oldest.notify_one();
                }
            }
            let number = open.next;
            open.next += 1;
            open.live.push_back((number, close.clone()));
            number
        };
        let progress = Arc::new(Progress::new());
        let serving = PROGRESS.scope(
            progress.clone(),
            pingora::apps::ServerApp::process_new(&self.app, stream, shutdown),
        );
        tokio::pin!(serving);
        // Bounded: each turn but the last follows progress, a piece of an answer taken.
        let served = loop {
            let deadline = progress.deadline();
            tokio::select! {
                served = &mut serving => break served,
                () = tokio::time::sleep_until(deadline.into()) => {
                    if progress.deadline() <= std::time::Instant::now() {
                        break None;
                    }
                }
                // Dropping the stream closes the connection.
                () = close.notified() => break None,
            }
        };
        if let Ok(mut open) = self.open.lock() {
            open.live.retain(|(n, _)| *n != number);
        }
        served
    }
}
