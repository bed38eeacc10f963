//! The pingora hooks: route by Host, decide, answer blocked crawlers, forward everything else.
//! The hooks stay thin; policy lives in [`crate::enforce`].

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use http::{HeaderName, HeaderValue};
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};

use crate::config::RobotsSource;
use crate::enforce::{decide, Decision, Outcome};
use crate::fetch::http_peer;
use crate::metrics::METRICS;
use crate::state::{Live, Origin};

/// The robotsguard proxy: reads the current snapshot once per request.
pub struct RobotsGuardProxy {
    pub snapshot: Arc<Live>,
}

/// Per-request state carried between hooks.
pub struct RequestContext {
    started: Instant,
    decision: Option<Decision>,
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

fn header_bytes<'a>(request: &'a RequestHeader, name: &HeaderName) -> &'a [u8] {
    request
        .headers
        .get(name)
        .map_or(&[][..], |value| value.as_bytes())
}

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

async fn respond(
    session: &mut Session,
    status: u16,
    body: String,
    extra: &[(&str, &str)],
) -> Result<()> {
    let body = Bytes::from(body);
    let mut header = ResponseHeader::build(status, Some(4))?;
    header.insert_header("content-type", "text/plain; charset=utf-8")?;
    header.insert_header("cache-control", "no-store")?;
    header.insert_header("content-length", body.len().to_string())?;
    for (name, value) in extra {
        header.insert_header(name.to_string(), value.to_string())?;
    }
    // pingora closes a connection answered before its request body was read; a small body is
    // drained instead, so a crawler's next request can reuse the connection.
    if body_is_drainable(session.req_header()) {
        session.set_close_on_response_before_downstream_finish(false);
        session.set_keepalive(Some(60));
    }
    session
        .write_response_header(Box::new(header), false)
        .await?;
    session.write_response_body(Some(body), true).await?;
    Ok(())
}

/// The body of the block response: the configured template, or a built-in text.
pub fn block_body(decision: &Decision, path: &str, robots_url: &str) -> String {
    let crawler = decision
        .crawler
        .as_ref()
        .map_or("crawler", |c| c.name.as_str());
    let (line, rule) = match &decision.rule {
        Some(rule) => (rule.line.to_string(), rule.text()),
        None => (String::from("-"), decision.reason()),
    };
    match &decision.origin.config.block.body {
        Some(template) => template
            .replace("{crawler}", crawler)
            .replace("{path}", path)
            .replace("{line}", &line)
            .replace("{rule}", &rule)
            .replace("{robots_url}", robots_url)
            .replace("{origin}", decision.origin.name()),
        None => {
            let why = match &decision.rule {
                Some(rule) => format!("robots.txt line {}: {}", rule.line, rule.text()),
                None => decision.reason(),
            };
            format!(
                "403 Forbidden: {crawler} may not fetch {path}.\n\
                 Reason: {why}\n\
                 This site's robots.txt: {robots_url}\n\
                 Enforced by robotsguard.\n"
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
        let request = session.req_header();
        let user_agent = header_bytes(request, &http::header::USER_AGENT);
        if user_agent.len() > MAX_USER_AGENT {
            respond(
                session,
                431,
                "431 Request Header Fields Too Large: User-Agent over 8 KB\n".into(),
                &[],
            )
            .await?;
            return Ok(true);
        }
        let decision_started = Instant::now();
        let decision = decide(
            &snapshot,
            request_host(request).unwrap_or_default(),
            user_agent,
            request_path(request).as_bytes(),
        );
        METRICS
            .decision_duration
            .observe(decision_started.elapsed().as_secs_f64());
        let Ok(decision) = decision else {
            respond(
                session,
                421,
                "421 Misdirected Request: this proxy does not serve that host.\n".into(),
                &[],
            )
            .await?;
            return Ok(true);
        };
        if decision.outcome == Outcome::Blocked {
            let request = session.req_header();
            let path = request_path(request);
            let scheme = if is_tls(session) { "https" } else { "http" };
            // The Host routed, so it is a valid host[:port]; keep the port the client used.
            let host = String::from_utf8_lossy(request_host(request).unwrap_or_default());
            let robots_url = format!("{scheme}://{}/robots.txt", host.trim());
            let body = block_body(&decision, path, &robots_url);
            let status = decision.origin.config.block.status;
            crate::logs::disallowed_request(
                &decision,
                || client_address(session),
                &request.method,
                path,
            );
            ctx.decision = Some(decision);
            respond(session, status, body, &[]).await?;
            return Ok(true);
        }
        let request = session.req_header();
        if decision.outcome == Outcome::WouldBlock {
            crate::logs::disallowed_request(
                &decision,
                || client_address(session),
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
        ctx.decision = Some(decision);
        Ok(false)
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
        let peer = origin.next_peer();
        Ok(Box::new(http_peer(origin, peer.address)))
    }

    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        upstream_request: &mut RequestHeader,
        _ctx: &mut RequestContext,
    ) -> Result<()> {
        // An absolute-form target (`GET http://host/path`) is forwarded in origin-form. pingora
        // keeps the original target bytes for the request line and has already checked that its
        // authority agrees with Host; the parsed URI holds the path and query.
        let raw_target = session.req_header().raw_path();
        if !raw_target.starts_with(b"/") && raw_target != b"*" {
            let path = upstream_request
                .uri
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_string();
            let uri = path
                .parse::<http::Uri>()
                .map_err(|e| Error::because(ErrorType::InvalidHTTPHeader, "request target", e))?;
            upstream_request.set_uri(uri);
        }
        let existing = upstream_request
            .headers
            .get(X_FORWARDED_FOR)
            .map(HeaderValue::as_bytes);
        let forwarded_for = forwarded_for(existing, client_ip(session))
            .map_err(|e| Error::because(ErrorType::InvalidHTTPHeader, "X-Forwarded-For", e))?;
        upstream_request.insert_header(X_FORWARDED_FOR, forwarded_for)?;
        let proto = if is_tls(session) { "https" } else { "http" };
        upstream_request.insert_header(X_FORWARDED_PROTO, HeaderValue::from_static(proto))?;
        // request_filter routed this request by this host, so it is there and a valid value.
        let host = request_host(session.req_header()).unwrap_or_default();
        upstream_request.insert_header(X_FORWARDED_HOST, host)?;
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
        if let Some(decision) = &ctx.decision {
            let kind = match e.etype() {
                ErrorType::ConnectTimedout => "connect_timeout",
                ErrorType::ConnectRefused => "connect_refused",
                ErrorType::ConnectError | ErrorType::ConnectNoRoute => "connect_error",
                ErrorType::ReadTimedout | ErrorType::WriteTimedout => "timeout",
                ErrorType::TLSHandshakeFailure | ErrorType::InvalidCert => "tls",
                _ if e.esource() == &ErrorSource::Upstream => "upstream_protocol",
                _ => "other",
            };
            if e.esource() == &ErrorSource::Upstream || kind != "other" {
                METRICS
                    .upstream_errors
                    .with_label_values(&[decision.origin.name(), kind])
                    .inc();
            }
        }
        let code = match e.etype() {
            ErrorType::HTTPStatus(code) => *code,
            _ => match e.esource() {
                ErrorSource::Upstream => 502,
                ErrorSource::Downstream => match e.etype() {
                    ErrorType::WriteError | ErrorType::ReadError | ErrorType::ConnectionClosed => 0,
                    _ => 400,
                },
                ErrorSource::Internal | ErrorSource::Unset => 500,
            },
        };
        if code > 0 {
            let _ = session.respond_error(code).await;
        }
        FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        }
    }

    async fn logging(&self, _session: &mut Session, _e: Option<&Error>, ctx: &mut RequestContext) {
        let Some(decision) = &ctx.decision else {
            return;
        };
        let origin = decision.origin.name();
        let series = decision.origin.request_series.get(origin);
        if decision.crawler.is_none() && decision.outcome == Outcome::Pass {
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

fn is_tls(session: &Session) -> bool {
    session
        .digest()
        .is_some_and(|digest| digest.ssl_digest.is_some())
}

/// How logs and `X-Forwarded-For` name a client without an IP address (a Unix-socket client).
const UNKNOWN_CLIENT: &str = "unknown";

/// The client's IP address; `None` for a Unix-socket client.
fn client_ip(session: &Session) -> Option<IpAddr> {
    session
        .client_addr()
        .and_then(|addr| addr.as_inet())
        .map(|addr| addr.ip())
}

/// The client's IP address as text, or [`UNKNOWN_CLIENT`].
fn client_address(session: &Session) -> String {
    client_ip(session).map_or_else(|| UNKNOWN_CLIENT.to_string(), |ip| ip.to_string())
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
