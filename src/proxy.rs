//! The pingora hooks: route by Host, decide, answer blocked crawlers, forward everything else.
//! The hooks stay thin; policy lives in [`crate::enforce`].

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use http::HeaderValue;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};

use crate::config::{render_body, AccessLogFormat, RobotsSource};
use crate::enforce::{decide_for_client, Decision, Outcome, Refused, Why};
use crate::fetch::http_peer;
use crate::metrics::METRICS;
use crate::state::{Live, Origin, RobotsCopy};
use crate::upstream::Peer;

/// The robotsguard proxy: reads the current snapshot once per request.
pub struct RobotsGuardProxy {
    pub snapshot: Arc<Live>,
}

/// Per-request state carried between hooks.
pub struct RequestContext {
    started: Instant,
    decision: Option<Decision>,
    /// The client: the peer, or what a trusted proxy forwarded for.
    client: Option<IpAddr>,
    /// The peer is a trusted proxy: its `X-Forwarded-*` headers are kept.
    peer_trusted: bool,
    /// The upstream this attempt goes to, and those tried before (a connect failure is retried
    /// once on another).
    upstream: Option<Arc<Peer>>,
    tried: Vec<SocketAddr>,
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
}

/// Longest User-Agent accepted. Real ones are well under 1 KB; cutting longer ones instead would
/// let a crawler hide its name behind padding, and scanning them whole would let a client make
/// every request expensive, so they are refused with 431.
const MAX_USER_AGENT: usize = 8 * 1024;

// Names as text, as they go on the wire: pingora keeps a text name as it is, but copies the name
// of a non-standard `HeaderName` into a new buffer on every insert.
const X_FORWARDED_FOR: &str = "X-Forwarded-For";
const X_FORWARDED_PROTO: &str = "X-Forwarded-Proto";
const X_FORWARDED_HOST: &str = "X-Forwarded-Host";
const X_REQUEST_ID: &str = "X-Request-Id";

/// The Host a request is for: the HTTP/2 `:authority` when present, else the Host header (for an
/// HTTP/1 absolute-form target pingora has already checked that the two agree). A request carrying
/// two Host headers is refused (returns `None`).
fn request_host(request: &RequestHeader) -> Option<&[u8]> {
    if let Some(authority) = request.uri.authority() {
        return Some(authority.as_str().as_bytes());
    }
    let mut values = request.headers.get_all(http::header::HOST).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    Some(first.as_bytes())
}

/// The request target's path and query (`/` when it has none, as for `*`).
fn request_path(request: &RequestHeader) -> &str {
    request.uri.path_and_query().map_or("/", |p| p.as_str())
}

/// How a request names its resource (RFC 9112 §3.2), for the forms robotsguard accepts.
enum Target<'a> {
    /// `/path?query`, or the path and query of an absolute-form target.
    Path(&'a [u8]),
    /// `http://host/path`: decided on its path, forwarded in origin-form.
    Absolute(&'a [u8]),
    /// `OPTIONS *`: about the server as a whole; decided as `/`.
    Asterisk,
}

impl Target<'_> {
    fn decided_path(&self) -> &[u8] {
        match self {
            Target::Path(path) | Target::Absolute(path) => path,
            Target::Asterisk => b"/",
        }
    }
}

/// The request's target, if it has one of the forms robotsguard proxies: origin-form,
/// absolute-form with an http(s) scheme, or `*` for OPTIONS. Anything else (`private`,
/// `./x`, `?x`, `host/x`, `GET *`) would be read differently by different origins.
fn request_target(request: &RequestHeader) -> Option<Target<'_>> {
    let raw = request.raw_path();
    if raw.starts_with(b"/") {
        return Some(Target::Path(raw));
    }
    if raw == b"*" {
        return (request.method == http::Method::OPTIONS).then_some(Target::Asterisk);
    }
    let scheme_len = if raw.len() >= 7 && raw[..7].eq_ignore_ascii_case(b"http://") {
        7
    } else if raw.len() >= 8 && raw[..8].eq_ignore_ascii_case(b"https://") {
        8
    } else {
        return None;
    };
    // pingora extracted the path with its own authority parser (the one it checked against
    // Host); a target it had to read lossily is refused rather than guessed at.
    if !request.raw_path_is_utf8() || raw.len() == scheme_len {
        return None;
    }
    let path = request.uri.path_and_query().map_or("/", |p| p.as_str());
    path.starts_with('/')
        .then_some(Target::Absolute(path.as_bytes()))
}

/// A `GET` or `HEAD` of `/robots.txt` (in any spelling that reads as it; any query).
fn asks_for_robots_txt(request: &RequestHeader, target: &Target<'_>) -> bool {
    if request.method != http::Method::GET && request.method != http::Method::HEAD {
        return false;
    }
    let path = target.decided_path();
    let path = &path[..memchr::memchr(b'?', path).unwrap_or(path.len())];
    crate::robots::canonical::canonicalize_decoding_slashes(path).as_ref() == b"/robots.txt"
}

/// Answers a robots.txt request with the copy in force: `ETag`, `Last-Modified`,
/// `Cache-Control: max-age` of the refresh interval, and 304 to a matching conditional request.
async fn serve_robots(
    session: &mut Session,
    copy: &RobotsCopy,
    refresh: std::time::Duration,
) -> Result<()> {
    let served = copy.served();
    let last_modified = httpdate::fmt_http_date(copy.content_since);
    let request = session.req_header();
    let not_modified = match request.headers.get(http::header::IF_NONE_MATCH) {
        Some(tags) => tags.to_str().is_ok_and(|tags| {
            tags.split(',').any(|tag| {
                let tag = tag.trim();
                tag == "*" || tag.trim_start_matches("W/") == served.etag
            })
        }),
        None => request
            .headers
            .get(http::header::IF_MODIFIED_SINCE)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| httpdate::parse_http_date(value).ok())
            .is_some_and(|since| {
                // Last-Modified has whole seconds; compare at that precision.
                httpdate::parse_http_date(&last_modified).is_ok_and(|ours| ours <= since)
            }),
    };
    let head = request.method == http::Method::HEAD;
    let status = if not_modified { 304 } else { 200 };
    let mut header = ResponseHeader::build(status, Some(6))?;
    header.insert_header("content-type", "text/plain; charset=utf-8")?;
    header.insert_header("etag", served.etag.as_str())?;
    header.insert_header("last-modified", last_modified)?;
    header.insert_header(
        "cache-control",
        format!("public, max-age={}", refresh.as_secs()),
    )?;
    if !not_modified {
        header.insert_header("content-length", served.body.len().to_string())?;
    }
    if client_keeps_alive(request) && body_is_drainable(request) {
        session.set_close_on_response_before_downstream_finish(false);
        session.set_keepalive(Some(KEEPALIVE_SECONDS));
    } else {
        session.set_keepalive(None);
    }
    let body = (!not_modified && !head).then(|| served.body.clone());
    let end = body.is_none();
    session.write_response_header(Box::new(header), end).await?;
    if let Some(body) = body {
        session.write_response_body(Some(body), true).await?;
    }
    Ok(())
}

/// Headers through which a client could claim another address or re-route the request after
/// the decision. The `X-Forwarded-*` trio is replaced separately.
const CLIENT_ADDRESS_HEADERS: [&str; 5] = [
    "x-real-ip",
    "forwarded",
    "true-client-ip",
    "x-client-ip",
    "cf-connecting-ip",
];
/// Some frameworks (IIS URL Rewrite, Symfony, Zend) route on these instead of the request line.
const REROUTING_HEADERS: [&str; 2] = ["x-original-url", "x-rewrite-url"];

/// Removes what a client may not tell the origin: other client addresses (unless the peer is a
/// trusted proxy, whose own headers they may be) and re-routing headers (always). One pass over
/// the header names, since most requests carry none of them.
fn strip_client_forwarding_headers(request: &mut RequestHeader, peer_trusted: bool) {
    let mut found: Vec<http::HeaderName> = Vec::new();
    for name in request.headers.keys() {
        let name_text = name.as_str();
        if (!peer_trusted && CLIENT_ADDRESS_HEADERS.contains(&name_text))
            || REROUTING_HEADERS.contains(&name_text)
        {
            found.push(name.clone());
        }
    }
    for name in found {
        request.remove_header(&name);
    }
}

/// How long a connection answered by robotsguard stays open for the next request (the edge
/// layer's `limits.idle_timeout` bounds the wait itself).
const KEEPALIVE_SECONDS: u64 = 60;

/// Request bodies up to this size are drained after robotsguard answers, so the connection stays
/// usable; a larger body closes the connection instead of being read.
const MAX_DRAINED_BODY: u64 = 1024 * 1024;

/// Whether the request's body (if any) is small enough to drain after answering it ourselves.
fn body_is_drainable(request: &RequestHeader) -> bool {
    if request.headers.contains_key("transfer-encoding") {
        return false;
    }
    match request.headers.get("content-length") {
        None => true,
        Some(value) => std::str::from_utf8(value.as_bytes())
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
            .is_some_and(|length| length <= MAX_DRAINED_BODY),
    }
}

/// Whether the client asked to keep the connection open: HTTP/1.1 unless it sent
/// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`.
fn client_keeps_alive(request: &RequestHeader) -> bool {
    let has_token = |token: &str| {
        request
            .headers
            .get_all(http::header::CONNECTION)
            .iter()
            .any(|value| {
                value
                    .as_bytes()
                    .split(|&b| b == b',')
                    .any(|item| item.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
            })
    };
    match request.version {
        http::Version::HTTP_10 | http::Version::HTTP_09 => has_token("keep-alive"),
        _ => !has_token("close"),
    }
}

/// Sends an answer robotsguard makes itself (block, refusal).
async fn respond(session: &mut Session, status: u16, body: String) -> Result<()> {
    let body = Bytes::from(body);
    let mut header = ResponseHeader::build(status, Some(4))?;
    header.insert_header("content-type", "text/plain; charset=utf-8")?;
    header.insert_header("cache-control", "no-store")?;
    header.insert_header("content-length", body.len().to_string())?;
    // pingora closes a connection answered before its request body was read; a small body is
    // drained instead, so a crawler's next request can reuse the connection.
    let request = session.req_header();
    if client_keeps_alive(request) && body_is_drainable(request) {
        session.set_close_on_response_before_downstream_finish(false);
        session.set_keepalive(Some(KEEPALIVE_SECONDS));
    } else {
        session.set_keepalive(None);
    }
    session
        .write_response_header(Box::new(header), false)
        .await?;
    session.write_response_body(Some(body), true).await?;
    Ok(())
}

/// Answers a request robotsguard will not proxy with `status` and a one-line reason (written by
/// us, never client text), and ends the request.
async fn refuse(session: &mut Session, status: u16, why: &str) -> Result<bool> {
    respond(
        session,
        status,
        format!("{}: {why}.\n", status_line(status)),
    )
    .await?;
    Ok(true)
}

/// `403 Forbidden`, `451 Unavailable For Legal Reasons`, ...
fn status_line(status: u16) -> String {
    let reason = http::StatusCode::from_u16(status)
        .ok()
        .and_then(|code| code.canonical_reason())
        .unwrap_or("Error");
    format!("{status} {reason}")
}

/// The body of the block response: the configured template, or a built-in text. Rendered in one
/// pass, so placeholders inside the values (a path may contain `{origin}`) stay as they are.
/// `client` is the client's address as text.
pub fn block_body(decision: &Decision, path: &str, robots_url: &str, client: &str) -> String {
    let crawler = decision.crawler.as_ref().map_or("crawler", |c| c.name());
    let (line, rule) = match &decision.rule {
        Some(rule) => (rule.line.to_string(), rule.text()),
        None => (String::from("-"), decision.public_reason()),
    };
    match &decision.origin.config.block.body {
        Some(template) => render_body(template, |name| match name {
            "crawler" => Some(crawler),
            "path" => Some(path),
            "line" => Some(line.as_str()),
            "rule" => Some(rule.as_str()),
            "robots_url" => Some(robots_url),
            "origin" => Some(decision.origin.name()),
            "client" => Some(client),
            _ => None,
        }),
        None if matches!(decision.why, Why::PolicyBlock(_)) => format!(
            "{}: this site does not admit {crawler}.\n\
             This site's robots.txt: {robots_url}\n\
             Your address: {client}\n\
             Enforced by robotsguard.\n",
            status_line(decision.origin.config.block.status)
        ),
        None => {
            let why = match &decision.rule {
                Some(rule) => format!("robots.txt line {}: {}", rule.line, rule.text()),
                None => decision.public_reason(),
            };
            format!(
                "{}: {crawler} may not fetch {path}.\n\
                 Reason: {why}\n\
                 This site's robots.txt: {robots_url}\n\
                 Your address: {client}\n\
                 Enforced by robotsguard.\n",
                status_line(decision.origin.config.block.status)
            )
        }
    }
}

#[async_trait]
impl ProxyHttp for RobotsGuardProxy {
    type CTX = RequestContext;

    fn new_ctx(&self) -> RequestContext {
        RequestContext {
            started: Instant::now(),
            decision: None,
            client: None,
            peer_trusted: false,
            upstream: None,
            tried: Vec::new(),
            upstream_sent: None,
            failed: false,
            request_id: None,
            absolute_form: false,
            body_deadline: None,
            robots_seen: None,
        }
    }

    async fn request_filter(
        &self,
        session: &mut Session,
        ctx: &mut RequestContext,
    ) -> Result<bool> {
        // CONNECT never gets here: pingora refuses it with 405 unless CONNECT proxying is
        // enabled, which robotsguard never does (tests/proxy_routing.rs checks the refusal).
        let snapshot = self.snapshot.load();
        let peer = peer_ip(session);
        let trusted = &snapshot.config.trusted_proxies;
        ctx.peer_trusted = peer.is_some_and(|ip| crate::client::is_trusted(trusted, ip));
        ctx.client = peer.map(|ip| {
            if ctx.peer_trusted {
                let values = session
                    .req_header()
                    .headers
                    .get_all(X_FORWARDED_FOR)
                    .iter()
                    .map(HeaderValue::as_bytes);
                crate::client::client_address(ip, trusted, values)
            } else {
                ip
            }
        });
        if snapshot.config.access_log.is_some() {
            ctx.request_id = Some(request_id(session.req_header(), ctx.peer_trusted));
        }
        let request = session.req_header();
        let mut user_agents = request.headers.get_all(http::header::USER_AGENT).iter();
        let user_agent = user_agents.next().map_or(&[][..], HeaderValue::as_bytes);
        if user_agents.next().is_some() {
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
        let decision_started = Instant::now();
        let decision = decide_for_client(
            &snapshot,
            request_host(request).unwrap_or_default(),
            user_agent,
            target.decided_path(),
            ctx.client,
        );
        METRICS
            .decision_duration
            .observe(decision_started.elapsed().as_secs_f64());
        let decision = match decision {
            Ok(decision) => decision,
            Err(Refused::UnknownHost) => {
                return refuse(session, 421, "this proxy does not serve that host").await;
            }
            Err(Refused::EscapedSlash) => {
                return refuse(session, 400, "encoded slashes are not accepted in paths").await;
            }
        };
        ctx.absolute_form = matches!(target, Target::Absolute(_));
        if decision.origin.robots.settings.serve && asks_for_robots_txt(request, &target) {
            // The copy robotsguard enforces is the one crawlers read, never the origin's.
            let copy = decision.robots.clone();
            let refresh = decision.origin.robots.settings.refresh;
            ctx.decision = Some(decision);
            serve_robots(session, &copy, refresh).await?;
            return Ok(true);
        }
        if decision.outcome == Outcome::Blocked {
            let request = session.req_header();
            let path = request_path(request);
            let robots_url = robots_url(session, ctx.peer_trusted);
            let body = block_body(&decision, path, &robots_url, &client_text(ctx.client));
            let status = decision.origin.config.block.status;
            crate::logs::disallowed_request(
                &decision,
                || client_text(ctx.client),
                &request.method,
                path,
            );
            ctx.decision = Some(decision);
            respond(session, status, body).await?;
            return Ok(true);
        }
        let request = session.req_header();
        if decision.outcome == Outcome::WouldBlock {
            crate::logs::disallowed_request(
                &decision,
                || client_text(ctx.client),
                &request.method,
                request_path(request),
            );
        }
        if request.method == http::Method::GET
            && matches!(
                decision.origin.robots.settings.source,
                RobotsSource::Origin { .. }
            )
            && request.uri.path() == "/robots.txt"
        {
            ctx.robots_seen = Some(BytesMut::new());
        }
        let limits = snapshot.config.limits;
        ctx.body_deadline = Some(Instant::now() + limits.body_timeout);
        session.set_read_timeout(Some(limits.body_timeout));
        ctx.decision = Some(decision);
        Ok(false)
    }

    async fn request_body_filter(
        &self,
        session: &mut Session,
        _body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut RequestContext,
    ) -> Result<()> {
        let Some(deadline) = ctx.body_deadline else {
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

    async fn response_filter(
        &self,
        _session: &mut Session,
        response: &mut ResponseHeader,
        ctx: &mut RequestContext,
    ) -> Result<()> {
        if ctx.robots_seen.is_none() {
            return Ok(());
        }
        // Only a plain 200 body can be compared with the copy in force.
        let identity = response
            .headers
            .get("content-encoding")
            .is_none_or(|value| value.as_bytes().eq_ignore_ascii_case(b"identity"));
        if response.status.as_u16() != 200 || !identity {
            ctx.robots_seen = None;
        }
        Ok(())
    }

    fn response_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut RequestContext,
    ) -> Result<Option<std::time::Duration>> {
        let (Some(seen), Some(decision)) = (ctx.robots_seen.as_mut(), ctx.decision.as_ref()) else {
            return Ok(None);
        };
        let limit = decision.origin.robots.settings.max_size;
        if let Some(chunk) = body {
            if seen.len() + chunk.len() > limit {
                ctx.robots_seen = None;
                return Ok(None);
            }
            seen.extend_from_slice(chunk);
        }
        if end_of_stream {
            if seen[..] != decision.robots.body[..] {
                tracing::info!(
                    origin = decision.origin.name(),
                    "a client received a robots.txt that differs from the copy in force; refreshing early"
                );
                decision.origin.robots.refresh_requested.notify_one();
            }
            ctx.robots_seen = None;
        }
        Ok(None)
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        ctx: &mut RequestContext,
    ) -> Result<Box<HttpPeer>> {
        let Some(decision) = &ctx.decision else {
            // request_filter answers every request it does not route; reaching here is a bug.
            return Err(Error::explain(
                ErrorType::InternalError,
                "request was not routed",
            ));
        };
        let origin: &Origin = &decision.origin;
        let Some(upstream) = origin.upstreams.pick(&ctx.tried) else {
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
        let peer = http_peer(origin, upstream.address);
        ctx.tried.push(upstream.address);
        ctx.upstream = Some(upstream);
        Ok(Box::new(peer))
    }

    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut RequestContext,
        mut e: Box<Error>,
    ) -> Box<Error> {
        // Nothing reached the upstream yet, so any method may go to another one, once.
        if let (Some(decision), Some(upstream)) = (&ctx.decision, &ctx.upstream) {
            let upstreams = &decision.origin.upstreams;
            if upstreams.record_failure(upstream) {
                crate::logs::upstream_skipped(decision.origin.name(), upstream.address);
            }
            if ctx.tried.len() < 2 && upstreams.has_other(&ctx.tried) {
                e.set_retry(true);
            }
        }
        e
    }

    async fn upstream_response_filter(
        &self,
        _session: &mut Session,
        _response: &mut ResponseHeader,
        ctx: &mut RequestContext,
    ) -> Result<()> {
        if let (Some(decision), Some(upstream)) = (&ctx.decision, &ctx.upstream) {
            decision.origin.upstreams.record_success(upstream);
            if let Some(sent) = ctx.upstream_sent {
                decision
                    .origin
                    .request_series
                    .get(decision.origin.name())
                    .upstream_duration
                    .observe(sent.elapsed().as_secs_f64());
            }
        }
        Ok(())
    }

    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        upstream_request: &mut RequestHeader,
        ctx: &mut RequestContext,
    ) -> Result<()> {
        if let Some(target) = ctx
            .decision
            .as_mut()
            .and_then(|d| d.rewritten_target.take())
        {
            // `paths.forward: canonical`: the origin gets exactly the path it was decided on.
            upstream_request.set_raw_path(&target)?;
        } else if ctx.absolute_form {
            // An absolute-form target (`GET http://host/path`) is forwarded in origin-form.
            // pingora has already checked that its authority agrees with Host; the parsed URI
            // holds the path and query.
            let path = upstream_request
                .uri
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_string();
            upstream_request.set_raw_path(path.as_bytes())?;
        }
        strip_client_forwarding_headers(upstream_request, ctx.peer_trusted);
        // From a trusted proxy, its X-Forwarded-For chain grows by the peer, and the scheme and
        // host it saw are kept; from anyone else, all three are ours alone.
        let forwarded_for = if ctx.peer_trusted {
            let existing = joined_header(upstream_request, X_FORWARDED_FOR);
            forwarded_for(existing.as_deref(), peer_ip(session))
        } else {
            forwarded_for(None, ctx.client)
        }
        .map_err(|e| Error::because(ErrorType::InvalidHTTPHeader, "X-Forwarded-For", e))?;
        upstream_request.insert_header(X_FORWARDED_FOR, forwarded_for)?;
        if !(ctx.peer_trusted && upstream_request.headers.contains_key(X_FORWARDED_PROTO)) {
            let proto = if is_tls(session) { "https" } else { "http" };
            upstream_request.insert_header(X_FORWARDED_PROTO, HeaderValue::from_static(proto))?;
        }
        if !(ctx.peer_trusted && upstream_request.headers.contains_key(X_FORWARDED_HOST)) {
            // request_filter routed this request by this host, so it is there and valid.
            let host = request_host(session.req_header()).unwrap_or_default();
            upstream_request.insert_header(X_FORWARDED_HOST, host)?;
        }
        if let Some(id) = &ctx.request_id {
            upstream_request.insert_header(X_REQUEST_ID, id.clone())?;
        }
        ctx.upstream_sent = Some(Instant::now());
        Ok(())
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut RequestContext,
    ) -> FailToProxy
    where
        Self::CTX: Send + Sync,
    {
        let upstream_failure = e.esource() == &ErrorSource::Upstream
            || matches!(e.etype(), ErrorType::HTTPStatus(502));
        if let Some(decision) = &ctx.decision {
            let kind = match e.etype() {
                ErrorType::ConnectTimedout => "connect_timeout",
                ErrorType::ConnectRefused => "connect_refused",
                ErrorType::ConnectError | ErrorType::ConnectNoRoute => "connect_error",
                ErrorType::ReadTimedout | ErrorType::WriteTimedout => "timeout",
                ErrorType::TLSHandshakeFailure | ErrorType::InvalidCert => "tls",
                ErrorType::HTTPStatus(502) => "no_address",
                _ if e.esource() == &ErrorSource::Upstream => "upstream_protocol",
                _ => "other",
            };
            if upstream_failure || kind != "other" {
                ctx.failed = true;
                METRICS
                    .upstream_errors
                    .with_label_values(&[decision.origin.name(), kind])
                    .inc();
            }
            // A hung upstream counts towards skipping it, like one that refuses connections.
            if let (Some(upstream), "timeout") = (&ctx.upstream, kind) {
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
            ctx.decision.as_ref().map(|d| d.origin.name()),
            code,
            &e.to_string(),
        );
        // Our own short text: pingora's error page, and the error itself, could name upstream
        // addresses or internal errors, which clients never see.
        if code > 0 && session.response_written().is_none() {
            let _ = respond(session, code, failure_body(code)).await;
        }
        FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        }
    }

    fn suppress_error_log(&self, _session: &Session, _ctx: &RequestContext, _e: &Error) -> bool {
        // pingora's own line for each failure holds client text and is not rate-limited;
        // fail_to_proxy logs through the limiter instead.
        true
    }

    async fn logging(&self, session: &mut Session, _e: Option<&Error>, ctx: &mut RequestContext) {
        let status = session
            .response_written()
            .map(|response| response.status.as_u16());
        if let Some(format) = self.snapshot.load().config.access_log {
            access_log(format, session, ctx, status);
        }
        let Some(decision) = &ctx.decision else {
            if let Some(status) = status {
                METRICS.count_response(None, status);
            }
            return;
        };
        let origin = decision.origin.name();
        let series = decision.origin.request_series.get(origin);
        if let Some(status) = status {
            series.count_response(status);
        }
        if ctx.failed {
            METRICS
                .requests
                .with_label_values(&[
                    origin,
                    decision.crawler_label(),
                    decision.category_label(),
                    "error",
                ])
                .inc();
        } else if decision.crawler.is_none() && decision.outcome == Outcome::Pass {
            series.not_crawler_passed.inc();
        } else {
            METRICS
                .requests
                .with_label_values(&[
                    origin,
                    decision.crawler_label(),
                    decision.category_label(),
                    decision.outcome.as_str(),
                ])
                .inc();
        }
        series.duration.observe(ctx.started.elapsed().as_secs_f64());
    }
}

/// The body of an answer given for a request that could not be proxied: what happened, in words
/// that name nothing internal.
fn failure_body(status: u16) -> String {
    let what = match status {
        502 => "the site's server is unavailable",
        503 => "the site is unavailable",
        504 => "the site's server did not answer in time",
        408 => "the request did not arrive in time",
        400 => "the request could not be read",
        _ => "the request could not be completed",
    };
    format!("{}: {what}.\n", status_line(status))
}

/// Writes one access log line for this request.
fn access_log(
    format: AccessLogFormat,
    session: &Session,
    ctx: &RequestContext,
    status: Option<u16>,
) {
    let request = session.req_header();
    let host = request_host(request).unwrap_or_default();
    let user_agent = request
        .headers
        .get(http::header::USER_AGENT)
        .map_or(&[][..], HeaderValue::as_bytes);
    let decision = ctx.decision.as_ref();
    let record = crate::logs::AccessRecord {
        client: ctx.client,
        host,
        method: request.method.as_str(),
        path: request.raw_path(),
        status: status.unwrap_or(0),
        bytes: session.body_bytes_sent(),
        duration: ctx.started.elapsed(),
        user_agent,
        origin: decision.map(|d| d.origin.name()),
        crawler: decision.and_then(|d| d.crawler.as_ref()).map(|c| c.name()),
        decision: match decision {
            None => "unrouted",
            Some(_) if ctx.failed => "error",
            Some(d) => d.outcome.as_str(),
        },
        upstream: ctx.upstream.as_ref().map(|u| u.address),
        request_id: ctx.request_id.as_ref().map(HeaderValue::as_bytes),
    };
    crate::logs::access(format, &record);
}

fn is_tls(session: &Session) -> bool {
    session
        .digest()
        .is_some_and(|digest| digest.ssl_digest.is_some())
}

/// How logs and `X-Forwarded-For` name a client without an IP address (a Unix-socket client).
const UNKNOWN_CLIENT: &str = "unknown";

/// The connection's peer address (after a PROXY header, the client it names); `None` for a
/// Unix-socket client.
fn peer_ip(session: &Session) -> Option<IpAddr> {
    session
        .client_addr()
        .and_then(|addr| addr.as_inet())
        .map(|addr| addr.ip())
}

/// A client address as text, or [`UNKNOWN_CLIENT`].
fn client_text(client: Option<IpAddr>) -> String {
    client.map_or_else(|| UNKNOWN_CLIENT.to_string(), |ip| ip.to_string())
}

/// All values of a header, joined with `, ` as one (a proxy chain may send several lines).
fn joined_header(request: &RequestHeader, name: &str) -> Option<Vec<u8>> {
    let mut values = request.headers.get_all(name).iter();
    let first = values.next()?;
    let mut joined = first.as_bytes().to_vec();
    for value in values {
        joined.extend_from_slice(b", ");
        joined.extend_from_slice(value.as_bytes());
    }
    Some(joined)
}

/// The robots.txt URL a client should read: the scheme and host it used (as a trusted proxy
/// forwarded them, else as this connection shows them).
fn robots_url(session: &Session, peer_trusted: bool) -> String {
    let request = session.req_header();
    let forwarded = |name: &str| {
        peer_trusted
            .then(|| request.headers.get(name))
            .flatten()
            .and_then(|value| value.to_str().ok())
            .map(|value| value.split(',').next().unwrap_or("").trim())
            .filter(|value| !value.is_empty())
    };
    let scheme = match forwarded(X_FORWARDED_PROTO) {
        Some(proto) if proto.eq_ignore_ascii_case("https") => "https",
        Some(proto) if proto.eq_ignore_ascii_case("http") => "http",
        _ if is_tls(session) => "https",
        _ => "http",
    };
    let host = forwarded(X_FORWARDED_HOST)
        .filter(|host| crate::state::normalize_host(host.as_bytes()).is_some())
        .map(str::to_string)
        // The Host routed, so it is a valid host[:port]; keep the port the client used.
        .unwrap_or_else(|| {
            String::from_utf8_lossy(request_host(request).unwrap_or_default())
                .trim()
                .to_string()
        });
    format!("{scheme}://{host}/robots.txt")
}

/// The `X-Request-Id` of a request: kept from a trusted proxy, else a new one.
fn request_id(request: &RequestHeader, peer_trusted: bool) -> HeaderValue {
    if peer_trusted {
        if let Some(id) = request
            .headers
            .get(X_REQUEST_ID)
            .filter(|id| !id.is_empty() && id.len() <= 200)
        {
            return id.clone();
        }
    }
    crate::logs::new_request_id()
}

/// The `X-Forwarded-For` value to send upstream: the client's own value, if it sent one, with the
/// client's address (or `unknown`, for a Unix-socket client) appended. Every request that is
/// proxied pays for this, so it is built in one buffer without the formatting machinery; the
/// client's value is kept byte for byte (it was a valid header value, and so is the result).
fn forwarded_for(
    existing: Option<&[u8]>,
    client: Option<IpAddr>,
) -> Result<HeaderValue, http::header::InvalidHeaderValue> {
    // 39 bytes: the longest IPv6 text form.
    let mut value = Vec::with_capacity(existing.map_or(0, |e| e.len() + 2) + 39);
    if let Some(existing) = existing {
        value.extend_from_slice(existing);
        value.extend_from_slice(b", ");
    }
    match client {
        Some(IpAddr::V4(ip)) => push_ipv4(&mut value, ip),
        Some(IpAddr::V6(ip)) => {
            use std::io::Write as _;
            // Writing to a Vec cannot fail.
            let _ = write!(value, "{ip}");
        }
        None => value.extend_from_slice(UNKNOWN_CLIENT.as_bytes()),
    }
    HeaderValue::from_maybe_shared(Bytes::from(value))
}

/// Appends `ip` in dotted-decimal form.
fn push_ipv4(out: &mut Vec<u8>, ip: Ipv4Addr) {
    for (index, octet) in ip.octets().into_iter().enumerate() {
        if index > 0 {
            out.push(b'.');
        }
        if octet >= 100 {
            out.push(b'0' + octet / 100);
        }
        if octet >= 10 {
            out.push(b'0' + octet / 10 % 10);
        }
        out.push(b'0' + octet % 10);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;

    #[test]
    fn ipv4_text_matches_the_standard_form_for_every_octet_value() {
        for octet in 0..=255u8 {
            for ip in [
                Ipv4Addr::new(octet, 0, 255, octet),
                Ipv4Addr::new(10, octet, octet, 9),
            ] {
                let mut text = Vec::new();
                push_ipv4(&mut text, ip);
                assert_eq!(text, ip.to_string().into_bytes(), "{ip}");
            }
        }
    }

    #[test]
    fn forwarded_for_appends_the_client_to_what_the_client_sent() {
        let v4 = Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)));
        let v6 = Some(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)));
        let value = |existing: Option<&[u8]>, client| {
            forwarded_for(existing, client).map(|v| v.as_bytes().to_vec())
        };
        assert_eq!(value(None, v4).ok(), Some(b"192.0.2.7".to_vec()));
        assert_eq!(value(None, v6).ok(), Some(b"2001:db8::1".to_vec()));
        assert_eq!(value(None, None).ok(), Some(b"unknown".to_vec()));
        assert_eq!(
            value(Some(b"203.0.113.9, 198.51.100.1"), v4).ok(),
            Some(b"203.0.113.9, 198.51.100.1, 192.0.2.7".to_vec())
        );
        // Bytes beyond ASCII in the client's value are kept as they were, not replaced.
        assert_eq!(
            value(Some(b"caf\xe9"), v4).ok(),
            Some(b"caf\xe9, 192.0.2.7".to_vec())
        );
    }
}
