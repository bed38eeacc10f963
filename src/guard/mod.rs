//! [`Guard`]: robots.txt enforcement for a pingora proxy, yours or robotsguard's own.
//!
//! A `Guard` holds the origins of a config, their robots.txt copies and the crawler catalogue. Its
//! methods are named after the [`ProxyHttp`] hooks they belong in;
//! call each from that hook of your proxy. Only [`Guard::request_filter`] and
//! [`Guard::upstream_request_filter`] are needed for enforcement; the others add what
//! robotsguard's own proxy does (its upstream choice and health, metrics and access log, early
//! robots.txt refresh). `robotsguard serve` is a `ProxyHttp` that calls every one of them.
//!
//! Add [`Guard::services`] to your server: they keep robots.txt copies fresh, re-read the config
//! file when it changes, and check upstream health.

mod answer;
mod builder;
mod forward;
mod request;
mod signature;

use std::borrow::Cow;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use http::HeaderValue;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, Session};
use pingora::services::background::background_service;
use pingora::services::listening::Service as ListeningService;
use pingora::services::ServiceWithDependents;

pub use answer::block_body;
pub use builder::{GuardBuilder, OriginSpec};

use crate::config::{Config, ConfigErrors, RobotsSource};
use crate::enforce::{decide_for_client, Decision, Outcome, Refused};
use crate::judge::{Answer, Facts, Judge, Judgment, Mode as JudgeMode, Refusal, RefusedFor};
use crate::metrics::METRICS;
use crate::net::http::http_peer;
use crate::snapshot::{BuildError, Live, Snapshot};
use crate::store::Store;
use crate::tables::offenders::Offenders;
use crate::upstream::Peer;
use answer::{failure_body, refuse, respond_refusal, serve_robots};
pub(crate) use answer::{refusal_body, refusal_header, refusal_text, unrouted_reason};
// What the decision listener shares with the proxy: how a request is read and answered.
use forward::{connection_nominations, forward, robots_url, Forwarding, X_FORWARDED_FOR};
pub(crate) use forward::{request_id, robots_url_of};
pub(crate) use request::{
    client_text, request_path, request_target, routed_host, scan_headers, Target, MAX_USER_AGENT,
};
use request::{is_tls, peer_ip, request_host};

/// The header that marks a Web Bot Auth signature ([`request::scan_headers`] looks for it on
/// every request).
const SIGNATURE_INPUT: http::HeaderName = http::HeaderName::from_static("signature-input");

/// robots.txt enforcement for pingora proxies. Cheap to clone: clones share the origins, the
/// robots.txt copies and the config reloads.
///
/// ```
/// use robotsguard::enforce::Outcome;
/// use robotsguard::guard::{Guard, OriginSpec};
///
/// let guard = Guard::builder()
///     .origin(
///         OriginSpec::new("shop", ["shop.example"], "127.0.0.1:8081")
///             .robots_inline("User-agent: GPTBot\nDisallow: /private\n"),
///     )
///     .build()?;
/// let decision = guard.decide(b"shop.example", b"GPTBot/1.2", b"/private/a", None)?;
/// assert_eq!(decision.outcome, Outcome::Blocked);
/// let decision = guard.decide(b"shop.example", b"Mozilla/5.0", b"/private/a", None)?;
/// assert_eq!(decision.outcome, Outcome::Pass);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Guard {
    live: Arc<Live>,
    /// The file the config came from, watched for changes when set.
    config_path: Option<PathBuf>,
    unknown_hosts: UnknownHosts,
    /// Checks crawlers' claims (range lists, reverse DNS, signatures).
    verifier: Arc<crate::verify::Verifier>,
    /// Crawl-delay budgets, who read robots.txt, strikes and bans (`state`).
    store: Arc<Store>,
    /// What the reports and the console show.
    reports: Arc<crate::reports::Reports>,
}

/// What [`Guard::request_filter`] does with a request for a host the config does not name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnknownHosts {
    /// Answer 421 Misdirected Request: the proxy serves only the configured hosts (robotsguard's
    /// own proxy).
    #[default]
    Refuse,
    /// Leave the request to the embedding proxy: `request_filter` returns `Ok(false)` with no
    /// decision, and the other hooks leave it alone.
    Pass,
}

/// Why a [`Guard`] could not be built.
#[derive(Debug)]
pub struct GuardError(ErrorKind);

#[derive(Debug)]
enum ErrorKind {
    Config(ConfigErrors),
    Build(BuildError),
    Metrics(prometheus::Error),
}

impl std::fmt::Display for GuardError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            ErrorKind::Config(errors) => write!(f, "{errors}"),
            ErrorKind::Build(e) => write!(f, "{e}"),
            ErrorKind::Metrics(e) => write!(f, "cannot register robotsguard's metrics: {e}"),
        }
    }
}

impl std::error::Error for GuardError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0 {
            ErrorKind::Config(errors) => Some(errors),
            ErrorKind::Build(e) => Some(e),
            ErrorKind::Metrics(e) => Some(e),
        }
    }
}

impl GuardError {
    /// The config's problems, each with its `file:line:column`, when that is what went wrong.
    pub fn config_errors(&self) -> Option<&ConfigErrors> {
        match &self.0 {
            ErrorKind::Config(errors) => Some(errors),
            _ => None,
        }
    }
}

/// What one request carries between the [`Guard`] hooks. Keep one in your proxy's `CTX` (made
/// with [`GuardContext::new`] in `new_ctx`) and pass it to each hook.
pub struct GuardContext {
    /// Boxed: pingora keeps the `CTX` inside the future of every request, a future that is
    /// moved into a box of its own per request, and copied there whole; the state inline made
    /// that copy several times its size larger.
    state: Box<RequestState>,
}

/// What [`GuardContext`] holds.
struct RequestState {
    started: Instant,
    decision: Option<Decision>,
    /// The client: the peer, or what a trusted proxy forwarded for.
    client: Option<IpAddr>,
    /// The peer is a trusted proxy: its `X-Forwarded-*` headers are kept.
    peer_trusted: bool,
    /// The upstream this attempt goes to.
    upstream: Option<Arc<Peer>>,
    /// Upstreams this request could not connect to: a retry goes elsewhere (once). A retry after
    /// a reused connection failed (pingora's own) may go to the same upstream. Inline: almost
    /// no request has any.
    connect_failed: smallvec::SmallVec<[SocketAddr; 2]>,
    /// When the request was sent upstream.
    upstream_sent: Option<Instant>,
    /// The request failed upstream (counted as `decision="error"`).
    failed: bool,
    /// The request id the access log and the origin see.
    request_id: Option<HeaderValue>,
    /// The target was in absolute-form: the origin is sent it in origin-form.
    absolute_form: bool,
    /// When the request body must have arrived (`limits.body_timeout`).
    body_deadline: Option<Instant>,
    /// A client's own `GET /robots.txt`: the body the origin sends, collected to notice that the
    /// origin's robots.txt changed before the next scheduled refresh.
    robots_seen: Option<BytesMut>,
    /// For a request a robots.txt rule disallowed: whether the client had read robots.txt.
    read_robots: Option<bool>,
    /// The request has a `Connection` header (whose nominations `upstream_request_filter`
    /// reads); until `request_filter` has looked, assumed so.
    connection_header: bool,
    /// The request's one `Host` header when it named the host (see `HeaderScan::host_header`).
    host_header: Option<HeaderValue>,
    /// `request_filter` found no `access_log` in force: `logging` need not look again (a
    /// reload in between applies from the next request).
    access_log_off: bool,
    /// The origin's response carries the page's preference refusing the crawler
    /// (`response_signals: enforce`): `fail_to_proxy` answers with it instead of the response.
    response_refusal: Option<Refusal>,
}

impl Default for GuardContext {
    fn default() -> Self {
        GuardContext::new()
    }
}

impl GuardContext {
    /// A context for a new request.
    pub fn new() -> GuardContext {
        GuardContext {
            state: Box::new(RequestState {
                started: Instant::now(),
                decision: None,
                client: None,
                peer_trusted: false,
                upstream: None,
                connect_failed: smallvec::SmallVec::new(),
                upstream_sent: None,
                failed: false,
                request_id: None,
                absolute_form: false,
                body_deadline: None,
                robots_seen: None,
                read_robots: None,
                connection_header: true,
                host_header: None,
                access_log_off: false,
                response_refusal: None,
            }),
        }
    }

    /// The decision [`Guard::request_filter`] made, for your own logging: `None` before it ran,
    /// for a request it refused before deciding (malformed, unknown host) and for an unknown host
    /// under [`UnknownHosts::Pass`].
    pub fn decision(&self) -> Option<&Decision> {
        self.state.decision.as_ref()
    }

    /// The client's address: the peer's, or the one a trusted proxy forwarded
    /// (`trusted_proxies`). `None` for a Unix-socket client or before `request_filter`.
    pub fn client(&self) -> Option<IpAddr> {
        self.state.client
    }
}

impl Guard {
    /// A builder for a guard configured in code.
    pub fn builder() -> GuardBuilder {
        GuardBuilder::default()
    }

    /// A guard for the config file at `path` (the file checked; the files it names are checked
    /// by [`crate::preflight::problems`], which `robotsguard serve` runs before it starts). Its
    /// [`services`](Guard::services) reload the file when it changes (and on SIGHUP). Metrics
    /// go to the global registry.
    pub fn from_file(path: &Path) -> Result<Guard, GuardError> {
        Guard::builder().config_file(path).build()
    }

    /// A guard for config text (YAML); relative paths in it are relative to `base_dir`. Not
    /// reloaded. Metrics go to the global registry.
    pub fn from_yaml(text: &str, base_dir: &Path) -> Result<Guard, GuardError> {
        let config = crate::config::load_str(text, "config", base_dir)
            .map_err(|e| GuardError(ErrorKind::Config(e)))?;
        Guard::from_config(config, UnknownHosts::Refuse, None)
    }

    fn from_config(
        config: Config,
        unknown_hosts: UnknownHosts,
        registry: Option<&prometheus::Registry>,
    ) -> Result<Guard, GuardError> {
        // Trap paths derived from the deployment's secret need it before the snapshot.
        crate::store::install_trap_secret(&config);
        let mut snapshot =
            Snapshot::build(Arc::new(config), None).map_err(|e| GuardError(ErrorKind::Build(e)))?;
        // Feeds in files are in the catalogue from the first request (URLs follow shortly).
        if crate::feeds::load_files(&snapshot) {
            snapshot = snapshot
                .with_fresh_catalogue()
                .map_err(|e| GuardError(ErrorKind::Build(e)))?;
        }
        crate::metrics::register_into(registry.unwrap_or(prometheus::default_registry()))
            .map_err(|e| GuardError(ErrorKind::Metrics(e)))?;
        for origin in &snapshot.config.origins {
            if origin.upstream_tls.as_ref().is_some_and(|tls| !tls.verify) {
                tracing::warn!(
                    origin = %origin.name,
                    "upstream TLS certificates are not verified (tls.verify: false): for tests \
                     only; trust a private CA with tls.ca instead"
                );
            }
        }
        let verifier = Arc::new(crate::verify::Verifier::new(&snapshot.config.verify));
        // Claims of crawlers whose catalogue entry names a signing agent are known to be
        // signable from the first request, before their keys load.
        verifier.set_catalogue_agents(snapshot.identifier.catalogue());
        if snapshot.config.verify.ranges.enabled {
            // Every list is reported (not loaded) from the start, before its first fetch.
            let lists = crate::verify::refresh::list_formats(&snapshot);
            verifier.lists().set_wanted(&lists);
        }
        let snapshot_state = snapshot.config.state.clone();
        let reports_settings = snapshot.config.reports;
        let preview_settings = snapshot.config.preview;
        Ok(Guard {
            live: Arc::new(Live::new(snapshot)),
            config_path: None,
            unknown_hosts,
            verifier,
            store: Arc::new(Store::new(&snapshot_state)),
            reports: {
                let reports = crate::reports::Reports::new(reports_settings);
                reports
                    .sample()
                    .set_max_pairs(preview_settings.max_paths_per_origin);
                Arc::new(reports)
            },
        })
    }

    /// The config in force (a reload replaces it).
    pub fn config(&self) -> Arc<Config> {
        self.live.load().config.clone()
    }

    /// The `limits` in force: [`Guard::config`]'s, without holding the config (a connection
    /// reads them before every request).
    pub fn limits(&self) -> crate::config::Limits {
        self.live.peek().config.limits
    }

    /// [`Guard::limits`] for a reader that asks again and again (a connection, before each
    /// request): `kept` holds the limits it read last, read again only when a snapshot was
    /// installed since, so that most requests pay one atomic load rather than a snapshot load.
    pub fn limits_kept(
        &self,
        kept: &mut Option<(u64, crate::config::Limits)>,
    ) -> crate::config::Limits {
        self.live.limits_kept(kept)
    }

    /// The origins, robots.txt copies and crawler catalogue in force, for [`crate::enforce`]'s
    /// functions and for reading robots.txt state.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.live.load()
    }

    /// The robots.txt and policy verdict alone, without a pingora session: `host` as in the Host
    /// header, `path` the request target's path and query as the client sent them, `client` the
    /// client's address (for `allow_clients`). Bans, Crawl-delay and verification are not
    /// consulted; [`Guard::judge`] gives the whole answer the proxy would give.
    pub fn decide(
        &self,
        host: &[u8],
        user_agent: &[u8],
        path: &[u8],
        client: Option<IpAddr>,
    ) -> Result<Decision, Refused> {
        decide_for_client(&self.live.load(), host, user_agent, path, client)
    }

    /// Checks the crawler claims of `decision` from `client` (published IP ranges, reverse DNS)
    /// and applies the origin's `impostors` action to it, as [`Guard::request_filter`] does.
    /// Waits for reverse DNS at most `verify.dns.timeout`.
    pub async fn verify(&self, decision: &mut Decision, client: IpAddr) {
        if decision.wants_verification() {
            let snapshot = self.live.load();
            if let Some(verification) = self.verifier.verify(&snapshot, decision, client).await {
                decision.apply_verification(verification);
            }
        }
    }

    /// Whether every origin has its first robots.txt copy (what `/readyz` reports).
    pub fn is_ready(&self) -> bool {
        self.live.load().is_ready()
    }

    /// The background services to add to your `pingora::server::Server`
    /// (`server.add_services(guard.services())`): the robots.txt refresher, the upstream health
    /// and DNS keeper, the report of log lines dropped by the rate limit, the crawler range list
    /// refresher (and, with Web Bot Auth agents configured, their keys' refresher), and, for a
    /// guard made with [`Guard::from_file`], the config reloader (which also handles SIGHUP).
    pub fn services(&self) -> Vec<Box<dyn ServiceWithDependents>> {
        let mut services: Vec<Box<dyn ServiceWithDependents>> = vec![
            Box::new(background_service(
                "robots.txt refresher",
                RefresherService {
                    live: self.live.clone(),
                },
            )),
            Box::new(background_service(
                "upstream keeper",
                crate::upstream_keeper::UpstreamKeeper {
                    snapshot: self.live.clone(),
                },
            )),
            Box::new(background_service(
                "request log rate limit",
                crate::logs::SuppressedLinesReporter,
            )),
        ];
        services.push(Box::new(background_service(
            "crawler catalogue feeds",
            crate::feeds::FeedRefresher {
                live: self.live.clone(),
                proxy: self.verifier.proxy().cloned(),
            },
        )));
        services.push(Box::new(background_service(
            "webhook sender",
            crate::webhooks::WebhookSender {
                live: self.live.clone(),
            },
        )));
        services.extend(self.verifier.services(self.live.clone()));
        if let Some(store) = self.store.service(self.live.clone()) {
            services.push(Box::new(background_service("shared state store", store)));
        }
        if let Some(publisher) = self.store.reports_service(self.reports.clone()) {
            services.push(Box::new(background_service("reports publisher", publisher)));
        }
        if let Some(path) = &self.config_path {
            // Built here, not when the service starts, so SIGHUP is handled from now on.
            let reloader =
                crate::reload::ReloadService::new(self.live.clone(), path.clone(), self.config());
            services.push(Box::new(background_service("config reloader", reloader)));
        }
        services
    }

    /// The admin endpoint (`/healthz`, `/readyz`, `/metrics`, `/explain`, `/robots`) on the
    /// config's `admin.address`, with its `admin.token_file`. Optional: robotsguard's own server
    /// runs it; yours may serve metrics its own way.
    pub fn admin_service(&self) -> Box<dyn ServiceWithDependents> {
        let config = self.config();
        let mut admin = ListeningService::new(
            "robotsguard admin".to_string(),
            crate::admin::BoundedAdmin::new(crate::admin::AdminApp::new(
                self.live.clone(),
                &config.admin,
                self.verifier.clone(),
                self.store.clone(),
                self.reports.clone(),
            )),
        );
        admin.add_tcp(&config.admin.address.to_string());
        Box::new(admin)
    }

    /// Checks a request's Web Bot Auth signature for the decision listener, as the proxy does:
    /// the crawler a valid signature identifies, and whether its agent's keys are not loaded.
    pub(crate) fn check_signature(
        &self,
        snapshot: &Snapshot,
        request: &RequestHeader,
        authority: &str,
        https: bool,
    ) -> (Option<crate::judge::Signed>, bool) {
        let read = signature::read_signature(&self.verifier, snapshot, request, authority, https);
        (read.signed, read.keys_unavailable)
    }

    /// The judge over `snapshot`, this guard's verifier and store.
    pub(crate) fn judge_over<'a>(&'a self, snapshot: &'a Snapshot) -> Judge<'a> {
        Judge {
            snapshot,
            verifier: &self.verifier,
            store: &self.store,
        }
    }

    /// The snapshot in force, for a reader that drops it before anything slow.
    pub(crate) fn peek_snapshot(&self) -> arc_swap::Guard<Arc<Snapshot>> {
        self.live.peek()
    }

    /// Call from `request_filter`. Routes the request by host, identifies the crawler (by a Web
    /// Bot Auth signature first), decides, verifies a claimed crawler that would be let through
    /// (waiting for reverse DNS at most `verify.dns.timeout`, once per address), and answers
    /// itself what it does not proxy: a blocked crawler (the origin's block response), an
    /// impostor (403), a malformed request (400/431), an unknown host (421, unless
    /// [`UnknownHosts::Pass`]), and `/robots.txt` when the origin's `robots.serve` is on.
    ///
    /// Returns `Ok(true)` when the request has been answered (return `Ok(true)` from your hook
    /// too), `Ok(false)` when it is to be proxied. The decision is then in
    /// [`GuardContext::decision`].
    pub async fn request_filter(
        &self,
        session: &mut Session,
        ctx: &mut GuardContext,
    ) -> Result<bool> {
        // CONNECT never gets here: pingora refuses it with 405 unless CONNECT proxying is
        // enabled, which robotsguard never does (tests/it/proxy_routing.rs checks the refusal).
        // Not counted (a guard): dropped once the judgment is made.
        let snapshot = self.live.peek();
        let peer = peer_ip(session);
        let trusted = &snapshot.config.trusted_proxies;
        ctx.state.peer_trusted =
            peer.is_some_and(|ip| crate::client_address::is_trusted(trusted, ip));
        ctx.state.client = peer.map(|ip| {
            if ctx.state.peer_trusted {
                let values = session
                    .req_header()
                    .headers
                    .get_all(X_FORWARDED_FOR)
                    .iter()
                    .map(HeaderValue::as_bytes);
                crate::client_address::client_address(ip, trusted, values)
            } else {
                ip
            }
        });
        if snapshot.config.access_log.is_some() {
            ctx.state.request_id = Some(request_id(session.req_header(), ctx.state.peer_trusted));
        } else {
            ctx.state.access_log_off = true;
        }
        // The body, whether proxied or drained after an answer of ours, must arrive within
        // limits.body_timeout: per read, and in all for a drain (a proxied body's total is
        // bounded in request_body_filter).
        let limits = snapshot.config.limits;
        session.set_read_timeout(Some(limits.body_timeout));
        session.set_total_drain_timeout(Some(limits.body_timeout));
        // A client that stops reading (or an HTTP/2 stream whose window stays shut) must not
        // hold its connection, its places under limits.max_requests_in_flight and its upstream
        // exchange for ever: a write that makes no progress for limits.write_timeout ends it.
        session.set_write_timeout(Some(limits.write_timeout));
        let request = session.req_header();
        let scan = scan_headers(&request.headers);
        ctx.state.connection_header = scan.connection;
        // Kept for X-Forwarded-Host (a clone shares the bytes pingora read the head into).
        let host_header = scan.host_header(request);
        ctx.state.host_header = host_header.cloned();
        let host = routed_host(host_header, request);
        let user_agent = scan.user_agent.map_or(&[][..], HeaderValue::as_bytes);
        if scan.user_agents > 1 {
            // Deciding on one and forwarding both would let the origin read the other.
            return refuse(
                session,
                400,
                "the request has more than one User-Agent header",
            )
            .await;
        }
        if user_agent.len() > MAX_USER_AGENT {
            return refuse(session, 431, "the User-Agent is over 8 KB").await;
        }
        let Some(target) = request_target(request) else {
            return refuse(session, 400, "unsupported request target").await;
        };
        // A Web Bot Auth signature names its crawler whatever the User-Agent says.
        let signature = if scan.signature_input {
            let https = signature::signed_over_https(session, request, ctx.state.peer_trusted);
            signature::read_signature(
                &self.verifier,
                &snapshot,
                request,
                &String::from_utf8_lossy(host.unwrap_or_default()),
                https,
            )
        } else {
            signature::SignatureRead::default()
        };
        let request_id = ctx.state.request_id.clone();
        let facts = Facts {
            host: host.unwrap_or_default(),
            user_agent,
            target: target.decided_path(),
            method: &request.method,
            client: ctx.state.client,
            signed: signature.signed.as_ref(),
            keys_unavailable: signature.keys_unavailable,
            request_id: request_id.as_ref().and_then(|id| id.to_str().ok()),
            fetch: scan.fetch,
        };
        // Not through `judge_with`: each async layer moves the judgment once more.
        let judgment = Judge {
            snapshot: &snapshot,
            verifier: &self.verifier,
            store: &self.store,
        }
        .judge(&facts, JudgeMode::Apply)
        .await;
        drop(snapshot);
        ctx.state.absolute_form = matches!(target, Target::Absolute(_));
        ctx.state.read_robots = judgment.read_robots;
        let Some(decision) = judgment.decision else {
            return match judgment.answer {
                Answer::Refuse(Refusal {
                    why: RefusedFor::UnknownHost,
                    ..
                }) if self.unknown_hosts == UnknownHosts::Pass => Ok(false),
                Answer::Refuse(refusal) => {
                    refuse(session, refusal.status, unrouted_reason(&refusal.why)).await
                }
                // Every request the judgment routes has a decision.
                _ => refuse(session, 500, "the request could not be judged").await,
            };
        };
        match judgment.answer {
            Answer::Proxy => {}
            Answer::ServeRobots(copy) => {
                let refresh = decision.origin.robots.settings.refresh;
                ctx.state.decision = Some(decision);
                serve_robots(session, &copy, refresh).await?;
                return Ok(true);
            }
            Answer::Refuse(refusal) => {
                let body = refusal_body(&decision, &refusal, || {
                    let path = request_path(session.req_header());
                    let robots_url = robots_url(session, ctx.state.peer_trusted);
                    block_body(&decision, path, &robots_url, &client_text(ctx.state.client))
                });
                ctx.state.decision = Some(decision);
                respond_refusal(session, &refusal, body).await?;
                return Ok(true);
            }
        }
        let request = session.req_header();
        if request.method == http::Method::GET
            && matches!(
                decision.origin.robots.settings.source,
                RobotsSource::Origin { .. }
            )
            && request.raw_path() == b"/robots.txt"
        {
            ctx.state.robots_seen = Some(BytesMut::new());
        }
        // From when the head was read (the context is made then): no clock read of its own.
        ctx.state.body_deadline = Some(ctx.state.started + limits.body_timeout);
        ctx.state.decision = Some(decision);
        Ok(false)
    }

    /// The judgment of a request as the proxy would make it now, changing nothing: the Crawl-delay
    /// budget is read, not spent; no robots.txt read or strike is recorded. A claimed crawler
    /// is verified as the proxy would (which may wait for reverse DNS, at most
    /// `verify.dns.timeout`). What `/explain` shows.
    ///
    /// ```
    /// use robotsguard::guard::{Guard, OriginSpec};
    /// use robotsguard::judge::Facts;
    ///
    /// let guard = Guard::builder()
    ///     .origin(
    ///         OriginSpec::new("shop", ["shop.example"], "127.0.0.1:8081")
    ///             .robots_inline("User-agent: GPTBot\nDisallow: /private\n"),
    ///     )
    ///     .build()?;
    /// let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    /// let facts = Facts::get(b"shop.example", b"GPTBot/1.2", b"/private/a");
    /// let judgment = runtime.block_on(guard.judge(&facts));
    /// assert_eq!(judgment.answer.action(), "refuse");
    /// assert_eq!(judgment.answer.status(), Some(403));
    /// let facts = Facts::get(b"shop.example", b"Mozilla/5.0", b"/private/a");
    /// assert_eq!(runtime.block_on(guard.judge(&facts)).answer.action(), "proxy");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn judge(&self, facts: &Facts<'_>) -> Judgment {
        self.judge_with(&self.live.load(), facts, JudgeMode::Preview)
            .await
    }

    async fn judge_with(
        &self,
        snapshot: &Snapshot,
        facts: &Facts<'_>,
        mode: JudgeMode,
    ) -> Judgment {
        Judge {
            snapshot,
            verifier: &self.verifier,
            store: &self.store,
        }
        .judge(facts, mode)
        .await
    }

    /// The strikes and bans of repeat offenders (for the admin endpoint and embedders): with the
    /// shared store, this process's mirror of its bans.
    pub fn offenders(&self) -> Arc<Offenders> {
        self.store.offenders()
    }

    /// Crawl-delay budgets, robots.txt reads, strikes and bans, in memory or shared (`state`).
    pub fn store(&self) -> Arc<Store> {
        self.store.clone()
    }

    /// What the reports and the console show: per crawler, violations, robots.txt copies.
    pub fn reports(&self) -> Arc<crate::reports::Reports> {
        self.reports.clone()
    }

    /// Call from `request_body_filter`: ends a request whose body has not arrived within
    /// `limits.body_timeout` of its header (408), however slowly it trickles.
    pub fn request_body_filter(
        &self,
        session: &mut Session,
        end_of_stream: bool,
        ctx: &mut GuardContext,
    ) -> Result<()> {
        let Some(deadline) = ctx.state.body_deadline else {
            return Ok(());
        };
        if end_of_stream {
            return Ok(());
        }
        // The read timeout is per read; shrinking it to what is left of the deadline makes a
        // body that trickles in end at the deadline, not one timeout after each byte.
        match deadline.checked_duration_since(Instant::now()) {
            Some(left) if !left.is_zero() => {
                session.set_read_timeout(Some(left));
                Ok(())
            }
            _ => Error::e_explain(
                ErrorType::HTTPStatus(408),
                "the request body did not arrive within limits.body_timeout",
            ),
        }
    }

    /// Call from `upstream_peer` to send the request to the origin's configured upstreams
    /// (round robin over healthy addresses, skipping one this request could not connect to). Your
    /// proxy may choose its own peer instead.
    pub fn upstream_peer(&self, ctx: &mut GuardContext) -> Result<Box<HttpPeer>> {
        let Some(decision) = &ctx.state.decision else {
            return Error::e_explain(
                ErrorType::InternalError,
                "Guard::upstream_peer: the request has no decision (request_filter did not route it)",
            );
        };
        let origin = &decision.origin;
        let Some(upstream) = origin.upstreams.pick(&ctx.state.connect_failed) else {
            let why = origin.upstreams.resolution_error.load();
            return Error::e_explain(
                ErrorType::HTTPStatus(502),
                format!(
                    "origin `{}` has no upstream address: {}",
                    origin.name(),
                    why.as_deref().unwrap_or("none left to try")
                ),
            );
        };
        let mut peer = http_peer(origin, upstream.address);
        // pingora would refuse a request whose `Connection` header names `Host` or an
        // `X-Forwarded-*` header, and drop any other header named there before
        // `upstream_request_filter` runs, the User-Agent included; the filter does it instead,
        // sparing those (see `forward::connection_nominations`).
        peer.options
            .http_upstream_request_policy
            .strip_connection_nominated = false;
        // Under load, upstream connections are opened with a small receive buffer, in pools of
        // their own, so a client that does not read holds a few KiB of the response in memory
        // rather than the ~700 KiB pingora's pipeline holds with full-size reads (see
        // `crate::load`).
        let narrowing = crate::load::Narrowing::now();
        if let Some(bytes) = narrowing.receive_buffer() {
            peer.group_key = narrowing.pool_group();
            peer.options.upstream_tcp_sock_tweak_hook = Some(Arc::new(move |socket| {
                socket.set_recv_buffer_size(bytes).or_err(
                    ErrorType::SocketError,
                    "setting the receive buffer of an upstream connection",
                )
            }));
            METRICS.upstream_windows_narrowed.inc();
        }
        ctx.state.upstream = Some(upstream);
        Ok(peer)
    }

    /// Call from `fail_to_connect` (with [`Guard::upstream_peer`]): counts the failure towards
    /// skipping that upstream and retries once on another, since nothing reached the first.
    pub fn fail_to_connect(&self, ctx: &mut GuardContext, mut e: Box<Error>) -> Box<Error> {
        if let (Some(decision), Some(upstream)) = (&ctx.state.decision, &ctx.state.upstream) {
            let upstreams = &decision.origin.upstreams;
            if upstreams.record_failure(upstream) {
                crate::logs::upstream_skipped(decision.origin.name(), upstream.address);
            }
            ctx.state.connect_failed.push(upstream.address);
            if ctx.state.connect_failed.len() < 2 && upstreams.has_other(&ctx.state.connect_failed)
            {
                e.set_retry(true);
            }
        }
        e
    }

    /// Call from `upstream_request_filter`. Makes the origin act on exactly what was decided:
    /// the canonical target (`paths.forward: canonical`) or origin-form for an absolute-form
    /// target, and no re-routing headers (`X-Original-URL`, `X-Rewrite-URL`). Also removes client
    /// address headers from untrusted peers and sets `X-Forwarded-For`, `-Proto`, `-Host` and
    /// `X-Request-Id` (kept from a trusted proxy; see `trusted_proxies`).
    pub fn upstream_request_filter(
        &self,
        session: &Session,
        upstream_request: &mut RequestHeader,
        ctx: &mut GuardContext,
    ) -> Result<()> {
        let Some(decision) = ctx.state.decision.as_ref() else {
            // Not ours (an unknown host under UnknownHosts::Pass).
            return Ok(());
        };
        // Borrowed, not taken: pingora calls this again for a retry (after a reused upstream
        // connection failed), which must carry the same target.
        let target: Option<Cow<'_, [u8]>> = if let Some(target) = &decision.rewritten_target {
            // `paths.forward: canonical`: the origin gets exactly the path it was decided on.
            Some(Cow::Borrowed(target))
        } else if ctx.state.absolute_form {
            // An absolute-form target (`GET http://host/path`) is forwarded in origin-form.
            // pingora has already checked that its authority agrees with Host; the parsed URI
            // holds the path and query.
            let path = upstream_request.uri.path_and_query();
            Some(Cow::Owned(
                path.map_or("/", |p| p.as_str()).as_bytes().to_vec(),
            ))
        } else {
            None
        };
        forward(
            upstream_request,
            target.as_deref(),
            &Forwarding {
                peer_trusted: ctx.state.peer_trusted,
                from: if ctx.state.peer_trusted {
                    peer_ip(session)
                } else {
                    ctx.state.client
                },
                tls: is_tls(session),
                // request_filter routed this request by this host, so it is there and valid.
                host: routed_host(ctx.state.host_header.as_ref(), session.req_header())
                    .unwrap_or_default(),
                host_header: ctx.state.host_header.as_ref(),
                request_id: ctx.state.request_id.as_ref(),
                nominated: &if ctx.state.connection_header {
                    connection_nominations(session.req_header())
                } else {
                    Vec::new()
                },
            },
        )?;
        ctx.state.upstream_sent = Some(Instant::now());
        Ok(())
    }

    /// Whether `peer` (a connection's own peer address, before any PROXY header) is one of
    /// `trusted_proxies`: only such a peer's PROXY header or forwarding headers are believed.
    pub fn is_trusted_proxy(&self, peer: IpAddr) -> bool {
        crate::client_address::is_trusted(&self.live.load().config.trusted_proxies, peer)
    }

    /// Call from `upstream_response_filter` (with [`Guard::upstream_peer`]): the upstream
    /// answered, so it is healthy; its response time is measured.
    pub fn upstream_response_filter(&self, ctx: &mut GuardContext) {
        if let (Some(decision), Some(upstream)) = (&ctx.state.decision, &ctx.state.upstream) {
            decision.origin.upstreams.record_success(upstream);
            if let Some(sent) = ctx.state.upstream_sent {
                decision
                    .origin
                    .request_series
                    .get(decision.origin.name())
                    .upstream_duration
                    .observe(sent.elapsed().as_secs_f64());
            }
        }
    }

    /// Call from `response_filter`, and return its error: the page's own AI preferences in the
    /// origin's response head (`response_signals`: `Content-Usage`, `X-Robots-Tag: noai`) are
    /// judged before any of its body is sent. A crawler the page refuses, under `enforce`, makes
    /// this an error (status 403 or 402) after which nothing of the origin's response reaches
    /// the client; [`Guard::fail_to_proxy`] then answers with the refusal (the upstream
    /// connection is closed, not reused). Under `report` the response passes and the decision
    /// becomes `would_block`.
    ///
    /// Also, with [`Guard::response_body_filter`]: when a client fetches `/robots.txt` through
    /// the proxy and the origin's differs from the copy in force, robotsguard refreshes its copy
    /// at once instead of at the next scheduled refresh.
    pub fn response_filter(
        &self,
        session: &Session,
        response: &ResponseHeader,
        ctx: &mut GuardContext,
    ) -> Result<()> {
        // Every proxied response is asked; almost none is a crawler's carrying a preference,
        // and those cost two comparisons and two header lookups before anything is built.
        if let Some(decision) = ctx
            .state
            .decision
            .as_mut()
            .filter(|decision| crate::judge::response::to_judge(decision, &response.headers))
        {
            let request = session.req_header();
            let request_id = ctx.state.request_id.as_ref();
            let asked = crate::judge::response::Asked {
                method: &request.method,
                target: request.raw_path(),
                client: ctx.state.client,
                request_id: request_id.and_then(|id| id.to_str().ok()),
            };
            if let Some(refusal) =
                crate::judge::response::judge_response(decision, &response.headers, &asked)
            {
                let status = refusal.status;
                let header = |name| {
                    request
                        .headers
                        .get(name)
                        .map_or(&[][..], http::HeaderValue::as_bytes)
                };
                let host = header(http::header::HOST);
                let host = if host.is_empty() {
                    request
                        .uri
                        .authority()
                        .map_or(&[][..], |a| a.as_str().as_bytes())
                } else {
                    host
                };
                let read_robots = asked
                    .client
                    .and_then(|client| self.store.robots_read_at(decision.origin.name(), client));
                crate::judge::response::record_refusal(
                    decision,
                    &asked,
                    host,
                    header(http::header::USER_AGENT),
                    status,
                    read_robots,
                );
                ctx.state.response_refusal = Some(refusal);
                ctx.state.robots_seen = None;
                return Error::e_explain(
                    ErrorType::HTTPStatus(status),
                    "the page's response headers refuse this crawler",
                );
            }
        }
        self.robots_response(response, ctx);
        Ok(())
    }

    /// A client's own `/robots.txt` through the proxy: only a plain-text 200 is compared with
    /// the copy in force.
    fn robots_response(&self, response: &ResponseHeader, ctx: &mut GuardContext) {
        if ctx.state.robots_seen.is_none() {
            return;
        }
        // Only a plain-text 200 body (or one of no declared type) can be compared with the
        // copy in force: a challenge page or an error page must not make robotsguard refetch
        // at a moment a client chose.
        let identity = response
            .headers
            .get("content-encoding")
            .is_none_or(|value| value.as_bytes().eq_ignore_ascii_case(b"identity"));
        let plain_text = response
            .headers
            .get(http::header::CONTENT_TYPE)
            .is_none_or(|value| {
                let value = value.as_bytes();
                value.len() >= 10 && value[..10].eq_ignore_ascii_case(b"text/plain")
            });
        if response.status.as_u16() != 200 || !identity || !plain_text {
            ctx.state.robots_seen = None;
        }
    }

    /// Call from `response_filter` with the response's header: with `content_signals.header`, a
    /// proxied response gets a `Content-Usage` header stating the robots.txt preferences that
    /// apply to its path (aipref's attach form), unless the origin sent one.
    pub fn response_headers(&self, response: &mut ResponseHeader, ctx: &GuardContext) {
        let Some(value) = ctx.state.decision.as_ref().and_then(|d| d.content_usage()) else {
            return;
        };
        if response.headers.contains_key("content-usage") {
            return;
        }
        if let Ok(value) = http::HeaderValue::from_str(value) {
            // Only an invalid header value could fail, and the one built here is valid.
            let _ = response.insert_header("content-usage", value);
        }
    }

    /// Call from `response_body_filter`; see [`Guard::response_filter`]. Holds at most the
    /// origin's `robots.max_size` bytes of one `/robots.txt` response.
    pub fn response_body_filter(
        &self,
        body: &Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut GuardContext,
    ) {
        let (Some(seen), Some(decision)) =
            (ctx.state.robots_seen.as_mut(), ctx.state.decision.as_ref())
        else {
            return;
        };
        let limit = decision.origin.robots.settings.max_size;
        if let Some(chunk) = body {
            if seen.len() + chunk.len() > limit {
                ctx.state.robots_seen = None;
                return;
            }
            seen.extend_from_slice(chunk);
        }
        if end_of_stream {
            // A body of no declared type that is markup is a page, not a robots.txt.
            let markup = seen.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'<');
            if !markup && seen[..] != decision.robots.body[..] {
                tracing::info!(
                    origin = decision.origin.name(),
                    "a client received a robots.txt that differs from the copy in force; refreshing early"
                );
                decision.origin.robots.refresh_requested.notify_one();
            }
            ctx.state.robots_seen = None;
        }
    }

    /// Call from `fail_to_proxy`. Counts upstream failures by kind, and answers with robotsguard's
    /// own short text (never the error itself, which could name upstream addresses): 502 when
    /// the upstream could not be reached or read, 504 when it did not answer in time, 408 when
    /// the client's body did not arrive in time.
    pub async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut GuardContext,
    ) -> FailToProxy {
        if let Some(refusal) = ctx.state.response_refusal.take() {
            return self.answer_response_refusal(session, &refusal, ctx).await;
        }
        let from_upstream = e.esource() == &ErrorSource::Upstream;
        let upstream_failure = from_upstream || matches!(e.etype(), ErrorType::HTTPStatus(502));
        // A client that stopped reading (limits.write_timeout): its request ends here and its
        // places are released. Not the upstream's fault: it must not count towards skipping it.
        let client_stalled = matches!(e.etype(), ErrorType::WriteTimedout) && !from_upstream;
        if client_stalled {
            METRICS.downstream_write_timeouts.inc();
        }
        if let Some(decision) = &ctx.state.decision {
            let kind = match e.etype() {
                ErrorType::ConnectTimedout => "connect_timeout",
                ErrorType::ConnectRefused => "connect_refused",
                ErrorType::ConnectError | ErrorType::ConnectNoRoute => "connect_error",
                // A client's slow body (limits.body_timeout) or stalled reading is the client's.
                ErrorType::ReadTimedout | ErrorType::WriteTimedout if from_upstream => "timeout",
                ErrorType::TLSHandshakeFailure | ErrorType::InvalidCert => "tls",
                ErrorType::HTTPStatus(502) => "no_address",
                _ if e.esource() == &ErrorSource::Upstream => "upstream_protocol",
                _ => "other",
            };
            if upstream_failure || kind != "other" {
                ctx.state.failed = true;
                METRICS
                    .upstream_errors
                    .with_label_values(&[decision.origin.name(), kind])
                    .inc();
            }
            // A hung upstream counts towards skipping it, like one that refuses connections.
            if let (Some(upstream), "timeout") = (&ctx.state.upstream, kind) {
                if decision.origin.upstreams.record_failure(upstream) {
                    crate::logs::upstream_skipped(decision.origin.name(), upstream.address);
                }
            }
        }
        let code = match e.etype() {
            ErrorType::HTTPStatus(code) => *code,
            ErrorType::ConnectTimedout | ErrorType::ReadTimedout | ErrorType::WriteTimedout
                if e.esource() == &ErrorSource::Upstream =>
            {
                504
            }
            // Nothing more is written to a client that does not read.
            ErrorType::WriteTimedout => 0,
            _ => match e.esource() {
                ErrorSource::Upstream => 502,
                ErrorSource::Downstream => match e.etype() {
                    ErrorType::WriteError | ErrorType::ReadError | ErrorType::ConnectionClosed => 0,
                    // The body did not arrive within limits.body_timeout.
                    ErrorType::ReadTimedout => 408,
                    _ => 400,
                },
                ErrorSource::Internal | ErrorSource::Unset => 500,
            },
        };
        crate::logs::proxy_failure(
            ctx.state.decision.as_ref().map(|d| d.origin.name()),
            code,
            &e.to_string(),
        );
        if code > 0 && session.response_written().is_none() {
            let _ = answer::respond_closing(session, code, failure_body(code)).await;
        }
        FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        }
    }

    /// Answers a crawler the page's response headers refuse ([`Guard::response_filter`]): the
    /// refusal's status and body, nothing of the origin's response; the connection closes after
    /// it (pingora does not reuse one whose proxying ended in an error).
    async fn answer_response_refusal(
        &self,
        session: &mut Session,
        refusal: &Refusal,
        ctx: &GuardContext,
    ) -> FailToProxy {
        let status = match &ctx.state.decision {
            Some(decision) if session.response_written().is_none() => {
                let body = refusal_body(decision, refusal, || {
                    block_body(
                        decision,
                        request_path(session.req_header()),
                        &robots_url(session, ctx.state.peer_trusted),
                        &client_text(ctx.state.client),
                    )
                });
                match answer::respond_refusal_closing(session, refusal, body).await {
                    Ok(()) => refusal.status,
                    Err(_) => 0,
                }
            }
            _ => 0,
        };
        FailToProxy {
            error_code: status,
            can_reuse_downstream: false,
        }
    }

    /// Call from `logging`: counts the request in robotsguard's metrics and writes its access log
    /// line (when `access_log` is set).
    pub fn logging(&self, session: &Session, ctx: &GuardContext) {
        let status = session
            .response_written()
            .map(|response| response.status.as_u16());
        if !ctx.state.access_log_off {
            if let Some(settings) = &self.live.load().config.access_log {
                access_log(settings, session, ctx, status);
            }
        }
        let Some(decision) = &ctx.state.decision else {
            if let Some(status) = status {
                METRICS.count_response(None, status);
            }
            return;
        };
        let target = request_target(session.req_header());
        self.count_decided(
            &crate::reports::Observed {
                decision,
                failed: ctx.state.failed,
                client: ctx.state.client,
                bytes: session.body_bytes_sent() as u64,
                read_robots: ctx.state.read_robots,
                target: target.as_ref().map_or(&b"/"[..], Target::decided_path),
            },
            session
                .req_header()
                .headers
                .get(http::header::USER_AGENT)
                .map_or(&b""[..], http::HeaderValue::as_bytes),
            status,
            ctx.state.started,
        );
    }

    /// Counts a decided request in the reports, the preview's sample and the request metrics, as
    /// the proxy does for every request it decided; the decision listener does the same for each
    /// judgment. `user_agent` is the request's, for the sample to judge it again.
    pub(crate) fn count_decided(
        &self,
        observed: &crate::reports::Observed<'_>,
        user_agent: &[u8],
        status: Option<u16>,
        started: Instant,
    ) {
        let now = Instant::now();
        self.reports.record_at(observed, now);
        let decision = observed.decision;
        let failed = observed.failed;
        self.reports
            .record_sample(decision, observed.target, user_agent, now);
        let origin = decision.origin.name();
        let series = decision.origin.request_series.get(origin);
        if let Some(status) = status {
            series.count_response(status);
        }
        if !failed && decision.crawler.is_none() && decision.outcome == Outcome::Pass {
            series.not_crawler_passed.inc();
        } else {
            series.count_request(
                origin,
                decision.crawler_label(),
                decision.category_label(),
                if failed {
                    "error"
                } else {
                    decision.outcome.as_str()
                },
            );
        }
        series
            .duration
            .observe(now.saturating_duration_since(started).as_secs_f64());
    }
}

/// The robots.txt refresher as a pingora background service.
struct RefresherService {
    live: Arc<Live>,
}

#[async_trait::async_trait]
impl pingora::services::background::BackgroundService for RefresherService {
    async fn start(&self, shutdown: pingora::server::ShutdownWatch) {
        crate::fetch::Refresher {
            snapshot: self.live.clone(),
        }
        .run(shutdown)
        .await;
    }
}

/// Writes one access log line for this request.
fn access_log(
    settings: &crate::config::AccessLog,
    session: &Session,
    ctx: &GuardContext,
    status: Option<u16>,
) {
    let request = session.req_header();
    let host = request_host(request).unwrap_or_default();
    let user_agent = request
        .headers
        .get(http::header::USER_AGENT)
        .map_or(&[][..], HeaderValue::as_bytes);
    let decision = ctx.state.decision.as_ref();
    let record = crate::logs::AccessRecord {
        client: ctx.state.client,
        host,
        method: request.method.as_str(),
        path: request.raw_path(),
        status: status.unwrap_or(0),
        bytes: session.body_bytes_sent(),
        duration: ctx.state.started.elapsed(),
        user_agent,
        origin: decision.map(|d| d.origin.name()),
        crawler: decision.and_then(|d| d.crawler.as_ref()).map(|c| c.name()),
        decision: match decision {
            None => "unrouted",
            Some(_) if ctx.state.failed => "error",
            Some(d) => d.outcome.as_str(),
        },
        why: decision.map(|d| d.why.as_str()),
        upstream: ctx.state.upstream.as_ref().map(|u| u.address),
        request_id: ctx.state.request_id.as_ref().map(HeaderValue::as_bytes),
        via: "proxy",
    };
    crate::logs::access(settings, &record);
}
