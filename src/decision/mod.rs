//! The decision listener (`decision`): the proxies people already run ask robotsguard for the
//! judgment of each request instead of sending it through robotsguard.
//!
//! - `GET /auth`: the forward-auth convention of Traefik and Caddy (`X-Forwarded-Method`,
//!   `-Uri`, `-Host`, `-Proto`, `-For`, and nginx's `X-Original-URI`/`-Method`).
//! - `GET /auth/nginx`: the same, refusing with `403` every time (`auth_request` passes nothing
//!   else) with the real status in `X-Robotsguard-Status`.
//! - `/envoy/...`: Envoy's HTTP `ext_authz` (`path_prefix: /envoy`).
//! - `GET /robots.txt?host=HOST`: the robots.txt copy the judgment enforces.
//!
//! - `POST /envoy.service.auth.v3.Authorization/Check`: Envoy's gRPC `ext_authz`, over h2c.
//!
//! Each request is judged by [`crate::judge::Judge`] with the proxy's own reading of the request
//! (path canonicalisation, client address, signatures) and answered with the proxy's own status,
//! body and headers; budgets, strikes, bans, reports and metrics count it as a proxied request.

mod answer;
mod envoy;
mod grpc;
mod request;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use http::{HeaderValue, Response};
use pingora::apps::http_app::ServeHttp;
use pingora::apps::{HttpPersistentSettings, HttpServerApp, HttpServerOptions, ReusedHttpStream};
use pingora::http::ResponseHeader;
use pingora::protocols::http::ServerSession;
use pingora::server::ShutdownWatch;

use crate::config::{DecisionConfig, OnDecisionError};
use crate::enforce::Decision;
use crate::guard::Guard;
use crate::judge::{Answer as Judged, Facts, Mode, Refusal};
use crate::metrics::METRICS;
use answer::{plain, Answer, KeptAnswers};

/// Why a decision request was refused before any judgment (`robotsguard_decision_rejected_total`).
#[derive(Debug)]
pub(crate) enum Rejection {
    /// The peer is not in `decision.trusted_callers` (403).
    UntrustedCaller,
    /// A forwarded header the request cannot be judged without (400).
    Missing(&'static str),
    /// A forwarded header sent twice with different values (400).
    Conflicting(&'static str),
    /// Something that cannot be judged (400).
    BadRequest(&'static str),
    /// Headers over their bound (431).
    TooLarge(&'static str),
    /// A path the listener does not serve (404).
    NotFound,
}

impl Rejection {
    fn reason(&self) -> &'static str {
        match self {
            Rejection::UntrustedCaller => "untrusted_caller",
            Rejection::Missing(_) => "missing_header",
            Rejection::Conflicting(_) => "conflicting_headers",
            Rejection::BadRequest(_) => "bad_request",
            Rejection::TooLarge(_) => "too_large",
            Rejection::NotFound => "not_found",
        }
    }

    fn status(&self) -> u16 {
        match self {
            Rejection::UntrustedCaller => 403,
            Rejection::Missing(_) | Rejection::Conflicting(_) | Rejection::BadRequest(_) => 400,
            Rejection::TooLarge(_) => 431,
            Rejection::NotFound => 404,
        }
    }

    /// The answer, counted, logged (rate-limited) and in our words (header names, never header
    /// values).
    fn answer(&self) -> Response<Vec<u8>> {
        METRICS
            .decision_rejected
            .with_label_values(&[self.reason()])
            .inc();
        let why = match self {
            Rejection::UntrustedCaller => {
                "this address is not in decision.trusted_callers".to_string()
            }
            Rejection::Missing(name) => format!("the request has no {name} header"),
            Rejection::Conflicting(name) => {
                format!("the request has differing values of {name}")
            }
            Rejection::BadRequest(what) => format!("{what} cannot be judged"),
            Rejection::TooLarge(what) => format!("{what} is too large"),
            Rejection::NotFound => {
                "the decision listener serves /auth, /auth/nginx, /envoy/... and /robots.txt?host="
                    .to_string()
            }
        };
        let status = self.status();
        log_line(
            None,
            &format!("decision request refused ({}): {why}", self.reason()),
        );
        plain(status, crate::guard::refusal_text(status, &why), Vec::new())
    }
}

/// Lines a second the decision listener logs at most (every event is counted whether logged
/// or not), so that a flood of bad requests cannot flood the log.
static LINES: std::sync::LazyLock<crate::logs::RateLimiter> =
    std::sync::LazyLock::new(|| crate::logs::RateLimiter::new(5));

fn log_line(client: Option<IpAddr>, what: &str) {
    if LINES.admit() {
        tracing::warn!(
            client = %client.map_or_else(|| "-".to_string(), |ip| ip.to_string()),
            "{what}"
        );
    }
}

/// The caller convention a request came in by.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Convention {
    ForwardAuth,
    Nginx,
    Envoy,
}

/// The decision listener's HTTP application.
pub struct DecisionApp {
    guard: Guard,
    kept: KeptAnswers,
}

/// The decision listener's application and its addresses, when the config sets `decision`:
/// HTTP/1.0, HTTP/1.1 and h2c on each `decision.listen` address. The binary serves it behind the
/// same connection layer as the proxy listener (connection cap, header and idle deadlines, read
/// buffer, requests in flight), which reads each request head before this application sees it.
pub fn server(guard: &Guard) -> Option<(DecisionServer, Vec<SocketAddr>)> {
    let config = guard.config();
    let decision = config.decision.as_ref()?;
    let mut options = HttpServerOptions::default();
    options.h2c = true;
    let server = DecisionServer {
        app: DecisionApp {
            guard: guard.clone(),
            kept: KeptAnswers::default(),
        },
        options,
    };
    Some((server, decision.listen.clone()))
}

/// Whether `peer` is one of the `decision.trusted_callers` in force (loopback by default).
pub fn is_trusted_caller(guard: &Guard, peer: IpAddr) -> bool {
    crate::client_address::is_trusted(callers(&guard.config()), peer.to_canonical())
}

/// The listener's server: gRPC Check calls (whose answer ends in trailers) and every other
/// request through [`DecisionApp`]'s [`ServeHttp`].
pub struct DecisionServer {
    app: DecisionApp,
    options: HttpServerOptions,
}

#[async_trait]
impl HttpServerApp for DecisionServer {
    async fn process_new_http(
        self: &Arc<Self>,
        mut http: ServerSession,
        shutdown: &ShutdownWatch,
    ) -> Option<ReusedHttpStream> {
        if !http.read_request().await.unwrap_or(false) {
            return None;
        }
        // Keep-alive is the connection layer's (limits.idle_timeout, and none once shutdown
        // begins) and the caller's: an HTTP/1.0 caller without `Connection: keep-alive`, or one
        // that sends `Connection: close`, gets its answer and the connection closed.
        if *shutdown.borrow() {
            http.set_keepalive(None);
        }
        let head = http.req_header();
        if head.method == http::Method::POST && head.uri.path().as_bytes() == grpc::CHECK {
            if self.app.check(&mut http).await.is_err() {
                return None;
            }
        } else {
            let (parts, body) = self.app.response(&mut http).await.into_parts();
            let header: ResponseHeader = parts.into();
            http.write_response_header(Box::new(header)).await.ok()?;
            if !body.is_empty() {
                http.write_response_body(body.into(), true).await.ok()?;
            }
        }
        let settings = HttpPersistentSettings::for_session(&http);
        http.finish()
            .await
            .ok()
            .flatten()
            .map(|stream| ReusedHttpStream::from_reusable_stream(stream, settings))
    }

    fn server_options(&self) -> Option<&HttpServerOptions> {
        Some(&self.options)
    }
}

/// What of `decision` a judgment needs once the config is let go.
#[derive(Clone, Copy)]
struct InForce {
    timeout: std::time::Duration,
    on_error: OnDecisionError,
}

/// `decision` in force: only a running listener asks, and a reload cannot remove `decision`
/// (`decision.listen` is restart-only); the defaults stand in all the same.
fn settings(config: &crate::config::Config) -> InForce {
    config.decision.as_ref().map_or(
        InForce {
            timeout: crate::config::DEFAULT_DECISION_TIMEOUT,
            on_error: OnDecisionError::Allow,
        },
        |decision| InForce {
            timeout: decision.timeout,
            on_error: decision.on_error,
        },
    )
}

/// The default `decision.trusted_callers`, for a config without `decision`.
static DEFAULT_CALLERS: std::sync::LazyLock<Vec<ipnet::IpNet>> =
    std::sync::LazyLock::new(crate::config::default_trusted_callers);

/// `decision.trusted_callers` in force.
fn callers(config: &crate::config::Config) -> &[ipnet::IpNet] {
    config
        .decision
        .as_ref()
        .map_or(&DEFAULT_CALLERS[..], |decision: &DecisionConfig| {
            &decision.trusted_callers[..]
        })
}

/// The peer, when it is one of `decision.trusted_callers`.
fn trusted_peer(session: &ServerSession, config: &crate::config::Config) -> Option<IpAddr> {
    session
        .client_addr()
        .and_then(|address| address.as_inet())
        .map(|address| address.ip().to_canonical())
        .filter(|ip| crate::client_address::is_trusted(callers(config), *ip))
}

#[async_trait]
impl ServeHttp for DecisionApp {
    async fn response(&self, session: &mut ServerSession) -> Response<Vec<u8>> {
        let started = Instant::now();
        let config = self.guard.config();
        let settings = settings(&config);
        let Some(peer) = trusted_peer(session, &config) else {
            return Rejection::UntrustedCaller.answer();
        };
        let head = session.req_header();
        let header_bytes: usize = head
            .headers
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len() + 4)
            .sum();
        if header_bytes > config.limits.max_header_bytes {
            return Rejection::TooLarge("the request's header list").answer();
        }
        let path = head.uri.path().as_bytes();
        let convention = match path {
            b"/auth" => Convention::ForwardAuth,
            b"/auth/nginx" => Convention::Nginx,
            b"/robots.txt" => return self.robots(head),
            _ if path.starts_with(b"/auth/nginx/answer/") => {
                return self.kept.take(&path[b"/auth/nginx/answer/".len()..]);
            }
            _ if path.starts_with(b"/envoy/") => Convention::Envoy,
            _ => return Rejection::NotFound.answer(),
        };
        if convention != Convention::Envoy
            && head.method != http::Method::GET
            && head.method != http::Method::HEAD
        {
            return Rejection::BadRequest("a method other than GET on /auth").answer();
        }
        let rebuilt = match convention {
            Convention::Envoy => request::envoy(head),
            _ => request::forward_auth(head),
        };
        let rebuilt = match rebuilt {
            Ok(rebuilt) => rebuilt,
            Err(rejection) => return rejection.answer(),
        };
        let client = client_of(
            peer,
            &config,
            head.headers
                .get_all(http::header::HeaderName::from_static("x-forwarded-for"))
                .iter()
                .map(HeaderValue::as_bytes),
        );
        drop(config);
        let answer = match self
            .judge_in_time(&settings, &rebuilt.head, rebuilt.https, client, started)
            .await
        {
            Ok(answer) => answer,
            Err(rejection) => return rejection.answer(),
        };
        match convention {
            Convention::Nginx => answer.for_nginx(&self.kept),
            _ => answer.passed_through(),
        }
    }
}

/// The answer when the judgment was not made in time: `decision.on_error`.
fn on_error(choice: OnDecisionError) -> Answer {
    let (status, body) = match choice {
        OnDecisionError::Allow => (200, String::new()),
        OnDecisionError::Deny => (
            503,
            crate::guard::refusal_text(503, "the request could not be judged in time"),
        ),
    };
    Answer {
        status,
        body,
        extra: None,
        decision: "error",
        crawler: String::new(),
        verified: "none",
        content_usage: None,
    }
}

/// A caller is a trusted proxy: the client is the rightmost X-Forwarded-For entry that is
/// neither a caller nor one of `trusted_proxies`, else the caller.
fn client_of<'a>(
    peer: IpAddr,
    config: &crate::config::Config,
    forwarded_for: impl DoubleEndedIterator<Item = &'a [u8]>,
) -> IpAddr {
    let trusted: Vec<ipnet::IpNet> = callers(config)
        .iter()
        .chain(&config.trusted_proxies)
        .copied()
        .collect();
    crate::client_address::client_address(peer, &trusted, forwarded_for)
}

impl DecisionApp {
    /// [`DecisionApp::judge`] within `decision.timeout`, else `decision.on_error`'s answer.
    async fn judge_in_time(
        &self,
        settings: &InForce,
        head: &pingora::http::RequestHeader,
        https: bool,
        client: IpAddr,
        started: Instant,
    ) -> Result<Answer, Rejection> {
        match tokio::time::timeout(settings.timeout, self.judge(head, https, client, started)).await
        {
            Ok(judged) => judged,
            Err(_elapsed) => {
                METRICS
                    .decision_errors
                    .with_label_values(&["timeout"])
                    .inc();
                log_line(
                    Some(client),
                    &format!(
                        "the judgment took longer than decision.timeout ({}); answered as decision.on_error: {}",
                        humantime::format_duration(settings.timeout),
                        settings.on_error.as_str()
                    ),
                );
                let answer = on_error(settings.on_error);
                let config = self.guard.config();
                let header = |name: http::header::HeaderName| {
                    head.headers
                        .get(name)
                        .map_or(&[][..], HeaderValue::as_bytes)
                };
                let request_id = config
                    .access_log
                    .is_some()
                    .then(|| crate::guard::request_id(head, true));
                Access {
                    settings: config.access_log.as_ref(),
                    head,
                    host: header(http::header::HOST),
                    user_agent: header(http::header::USER_AGENT),
                    client,
                    request_id: request_id.as_ref(),
                    started,
                }
                .log(answer.status, answer.body.len(), None, answer.decision);
                Ok(answer)
            }
        }
    }

    /// A gRPC Check call: the peer checked before anything is read, the message read within
    /// its bound, the request judged as over HTTP.
    async fn check(&self, session: &mut ServerSession) -> pingora::Result<()> {
        let started = Instant::now();
        let config = self.guard.config();
        let settings = settings(&config);
        let Some(peer) = trusted_peer(session, &config) else {
            let failed = grpc::Failed::from_rejection(&Rejection::UntrustedCaller);
            return grpc::write(session, None, Some(failed)).await;
        };
        session.set_read_timeout(Some(config.limits.body_timeout));
        let check = match grpc::read_check(session).await {
            Ok(check) => check,
            Err(failed) => return grpc::write(session, None, Some(failed)).await,
        };
        let asked = match grpc::asked(&check) {
            Ok(asked) => asked,
            Err(rejection) => {
                let failed = grpc::Failed::from_rejection(&rejection);
                return grpc::write(session, None, Some(failed)).await;
            }
        };
        let client = if asked.forwarded_for.is_empty() {
            asked.source.map_or(peer, |ip| ip.to_canonical())
        } else {
            client_of(peer, &config, asked.forwarded_for.iter().map(Vec::as_slice))
        };
        drop(config);
        match self
            .judge_in_time(&settings, &asked.head, asked.https, client, started)
            .await
        {
            Ok(answer) => grpc::write(session, Some(grpc::response(answer)), None).await,
            Err(rejection) => {
                let failed = grpc::Failed::from_rejection(&rejection);
                grpc::write(session, None, Some(failed)).await
            }
        }
    }

    /// Judges the rebuilt request exactly as the proxy's `request_filter` does, and counts it
    /// as the proxy's `logging` does.
    async fn judge(
        &self,
        head: &pingora::http::RequestHeader,
        https: bool,
        client: IpAddr,
        started: Instant,
    ) -> Result<Answer, Rejection> {
        let scan = crate::guard::scan_headers(&head.headers);
        let host = crate::guard::routed_host(scan.host_header(head), head).unwrap_or_default();
        if scan.user_agents > 1 {
            return Err(Rejection::Conflicting("User-Agent"));
        }
        let user_agent = scan.user_agent.map_or(&[][..], HeaderValue::as_bytes);
        if user_agent.len() > crate::guard::MAX_USER_AGENT {
            return Err(Rejection::TooLarge("the User-Agent"));
        }
        let Some(target) = crate::guard::request_target(head) else {
            return Err(Rejection::BadRequest("the forwarded URI"));
        };
        let snapshot = self.guard.peek_snapshot();
        let (signed, keys_unavailable) = if scan.signature_input {
            let authority = String::from_utf8_lossy(host);
            self.guard
                .check_signature(&snapshot, head, &authority, https)
        } else {
            (None, false)
        };
        let request_id = snapshot
            .config
            .access_log
            .is_some()
            .then(|| crate::guard::request_id(head, true));
        let facts = Facts {
            host,
            user_agent,
            target: target.decided_path(),
            method: &head.method,
            client: Some(client),
            signed: signed.as_ref(),
            keys_unavailable,
            request_id: request_id.as_ref().and_then(|id| id.to_str().ok()),
            fetch: scan.fetch,
        };
        let judgment = self
            .guard
            .judge_over(&snapshot)
            .judge(&facts, Mode::Apply)
            .await;
        // The proxy's access line, said to come through here.
        let access = Access {
            settings: snapshot.config.access_log.as_ref(),
            head,
            host,
            user_agent,
            client,
            request_id: request_id.as_ref(),
            started,
        };
        let Some(decision) = judgment.decision else {
            let (status, body) = match &judgment.answer {
                Judged::Refuse(Refusal { status, why }) => (
                    *status,
                    crate::guard::refusal_text(*status, crate::guard::unrouted_reason(why)),
                ),
                _ => {
                    METRICS
                        .decision_errors
                        .with_label_values(&["internal"])
                        .inc();
                    (
                        500,
                        crate::guard::refusal_text(500, "the request could not be judged"),
                    )
                }
            };
            METRICS.count_response(None, status);
            access.log(status, body.len(), None, "unrouted");
            return Ok(Answer {
                status,
                body,
                extra: None,
                decision: "unrouted",
                crawler: String::new(),
                verified: "none",
                content_usage: None,
            });
        };
        let (status, body, extra) = match &judgment.answer {
            // `/robots.txt` is the origin's to serve: the recipes send it to the front proxy's
            // upstream, or to `/robots.txt?host=` for the copy robotsguard serves.
            Judged::Proxy | Judged::ServeRobots(_) => (200, String::new(), None),
            Judged::Refuse(refusal) => {
                let body = crate::guard::refusal_body(&decision, refusal, || {
                    let robots_url = crate::guard::robots_url_of(head, true, false);
                    crate::guard::block_body(
                        &decision,
                        crate::guard::request_path(head),
                        &robots_url,
                        &crate::guard::client_text(Some(client)),
                    )
                });
                (refusal.status, body, crate::guard::refusal_header(refusal))
            }
        };
        self.guard.count_decided(
            &crate::reports::Observed {
                decision: &decision,
                failed: false,
                client: Some(client),
                bytes: body.len() as u64,
                read_robots: judgment.read_robots,
                target: target.decided_path(),
            },
            user_agent,
            Some(status),
            started,
        );
        METRICS
            .decision_requests
            .with_label_values(&[decision.origin.name(), decision.outcome.as_str()])
            .inc();
        access.log(
            status,
            body.len(),
            Some(&decision),
            decision.outcome.as_str(),
        );
        Ok(Answer {
            status,
            body,
            extra,
            decision: decision.outcome.as_str(),
            crawler: decision
                .crawler
                .as_ref()
                .map_or_else(String::new, |crawler| crawler.name().to_string()),
            verified: verified(&decision),
            content_usage: decision.content_usage().map(str::to_string),
        })
    }

    /// `GET /robots.txt?host=HOST` (or `/robots.txt` with the site's `X-Forwarded-Host` or
    /// `Host`): the copy in force for HOST's origin (with the lines robotsguard adds), `421` for
    /// a host no origin serves.
    fn robots(&self, head: &pingora::http::RequestHeader) -> Response<Vec<u8>> {
        let host = head.uri.query().and_then(|query| {
            form_urlencoded::parse(query.as_bytes())
                .find(|(name, _)| name == "host")
                .map(|(_, value)| value.into_owned())
        });
        // Without `?host=`, the host the front proxy forwarded, else the one it passed on.
        let host = host.or_else(|| {
            ["x-forwarded-host", "host"].iter().find_map(|name| {
                head.headers
                    .get(*name)
                    .and_then(|value| value.to_str().ok())
                    .map(|value| value.split(',').next().unwrap_or("").trim().to_string())
            })
        });
        let Some(host) = host else {
            return Rejection::Missing("Host").answer();
        };
        let snapshot = self.guard.peek_snapshot();
        let Some(origin) = snapshot.origin_for_bytes(host.as_bytes()) else {
            return plain(
                421,
                crate::guard::refusal_text(421, "this proxy does not serve that host"),
                Vec::new(),
            );
        };
        let copy = origin.robots.current();
        let refresh = origin.robots.settings.refresh;
        let served = copy.served();
        let mut response = plain(
            200,
            served.body.to_vec(),
            vec![
                (http::header::ETAG, served.etag.clone()),
                (
                    http::header::LAST_MODIFIED,
                    httpdate::fmt_http_date(copy.content_since),
                ),
            ],
        );
        if let Ok(value) = HeaderValue::from_str(&format!("public, max-age={}", refresh.as_secs()))
        {
            response
                .headers_mut()
                .insert(http::header::CACHE_CONTROL, value);
        }
        response
    }
}

/// What a judged request's access line says besides its answer: the line the proxy writes for
/// the same request (`access_log`), with `via: decision`. The status is the one the proxy would
/// have answered with (`200` when it would have proxied, whatever nginx's flavour sent), the
/// bytes those of the refusal's body, and no upstream: the front proxy forwards.
struct Access<'a> {
    settings: Option<&'a crate::config::AccessLog>,
    head: &'a pingora::http::RequestHeader,
    host: &'a [u8],
    user_agent: &'a [u8],
    client: IpAddr,
    request_id: Option<&'a HeaderValue>,
    started: Instant,
}

impl Access<'_> {
    fn log(&self, status: u16, bytes: usize, decision: Option<&Decision>, word: &str) {
        let Some(settings) = self.settings else {
            return;
        };
        let record = crate::logs::AccessRecord {
            client: Some(self.client),
            host: self.host,
            method: self.head.method.as_str(),
            path: self.head.raw_path(),
            status,
            bytes,
            duration: self.started.elapsed(),
            user_agent: self.user_agent,
            origin: decision.map(|d| d.origin.name()),
            crawler: decision.and_then(|d| d.crawler.as_ref()).map(|c| c.name()),
            decision: word,
            why: decision.map(|d| d.why.as_str()),
            upstream: None,
            request_id: self.request_id.map(HeaderValue::as_bytes),
            via: "decision",
        };
        crate::logs::access(settings, &record);
    }
}

/// `verified`, `impostor`, `unverified` (a claim not checked or not provable) or `none` (no
/// crawler).
fn verified(decision: &Decision) -> &'static str {
    match (&decision.crawler, &decision.verification) {
        (_, Some(verification)) => verification.result.as_str(),
        (Some(_), None) => "unverified",
        (None, None) => "none",
    }
}
