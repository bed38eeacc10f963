//! The connection layer in front of pingora's HTTP handling: how many connections are open at
//! once, and how long and how large a request head may be.
//!
//! pingora reads a request head with a read timeout that restarts on every read and a 1 MiB
//! buffer per connection, so a client trickling a byte every few seconds holds a connection and
//! its buffer forever. Here each HTTP/1 request head is read before pingora sees it, against a
//! deadline that trickling cannot move ([`robotsguard::config::Limits::header_timeout`]) and a byte
//! cap ([`robotsguard::config::Limits::max_header_bytes`]); the complete head is then handed to pingora
//! as the start of the stream, so pingora never waits on the client for a head. HTTP/2
//! connections (negotiated by ALPN) go to pingora's own HTTP/2 server, whose frame and header
//! list limits apply.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::BytesMut;
use pingora::apps::{HttpPersistentSettings, HttpServerApp, ServerApp};
use pingora::listeners::PreTlsProcess;
use pingora::protocols::http::ServerSession;
use pingora::protocols::l4::stream::Stream as L4Stream;
use pingora::protocols::{GetSocketDigest, SocketDigest, Stream, UniqueID, ALPN};
use pingora::proxy::HttpProxy;
use pingora::server::ShutdownWatch;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::proxy::RobotsGuardProxy;
use robotsguard::config::Limits;
use robotsguard::guard::Guard;
use robotsguard::metrics::METRICS;

/// Headers httparse is asked to parse at once; pingora refuses more than this with 400 too.
const MAX_HEADERS: usize = 256;

/// How long writing a refusal (408, 431) may take before the connection is dropped.
const REFUSAL_WRITE_TIMEOUT: Duration = Duration::from_secs(2);

/// Requests served on one connection before it is closed, so per-connection memory is returned
/// now and then (nginx closes after 1,000 too).
const KEEPALIVE_REQUESTS: u32 = 1000;

/// The proxy's listening application: a connection cap and bounded request heads around
/// pingora's HTTP proxy.
pub struct EdgeApp {
    proxy: Arc<HttpProxy<RobotsGuardProxy>>,
    guard: Guard,
    connections: Arc<Semaphore>,
    /// Plain listeners whose connections start with a PROXY protocol header.
    proxy_protocol: ProxyProtocolListeners,
}

/// The listen addresses whose connections start with a PROXY protocol header, matched against a
/// connection's local address.
#[derive(Debug, Clone, Default)]
pub struct ProxyProtocolListeners(Vec<std::net::SocketAddr>);

impl ProxyProtocolListeners {
    pub fn new(addresses: Vec<std::net::SocketAddr>) -> Self {
        ProxyProtocolListeners(addresses)
    }

    /// Whether a connection accepted on `local` must start with a PROXY header. A listener on
    /// the unspecified address accepts on every local address with its port.
    pub fn expects(&self, local: Option<std::net::SocketAddr>) -> bool {
        let Some(local) = local else {
            return false;
        };
        self.0.iter().any(|listen| {
            listen.port() == local.port()
                && (listen.ip() == local.ip()
                    || (listen.ip().is_unspecified()
                        && listen.is_ipv4() == local.ip().to_canonical().is_ipv4()))
        })
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The local address of a connection, as its socket digest has it.
fn local_address(stream: &Stream) -> Option<std::net::SocketAddr> {
    stream
        .get_socket_digest()
        .and_then(|digest| digest.local_addr().and_then(|a| a.as_inet().copied()))
}

/// Makes `source` the connection's peer address, keeping its other socket facts.
pub fn set_peer_address<S: GetSocketDigest + UniqueID + ?Sized>(
    stream: &mut S,
    source: std::net::SocketAddr,
) {
    let old = stream.get_socket_digest();
    let digest = SocketDigest::from_raw_fd(stream.id());
    let _ = digest
        .peer_addr
        .set(Some(pingora::protocols::l4::socket::SocketAddr::Inet(
            source,
        )));
    if let Some(local) = old.as_ref().and_then(|d| d.local_addr().cloned()) {
        let _ = digest.local_addr.set(Some(local));
    }
    stream.set_socket_digest(digest);
}

/// Reads the PROXY header of a TLS listener's connection before the TLS handshake (pingora's
/// pre-TLS hook), for the listeners that expect one.
pub struct PreTlsProxyProtocol {
    pub listeners: ProxyProtocolListeners,
    pub guard: Guard,
}

#[async_trait]
impl PreTlsProcess for PreTlsProxyProtocol {
    async fn process(&self, stream: &mut L4Stream) -> pingora::Result<()> {
        let local = stream
            .get_socket_digest()
            .and_then(|digest| digest.local_addr().and_then(|a| a.as_inet().copied()));
        if !self.listeners.expects(local) {
            return Ok(());
        }
        let deadline = Instant::now() + self.guard.config().limits.header_timeout;
        match crate::proxy_protocol::read(stream, deadline).await {
            crate::proxy_protocol::Read::Header { source, rest } => {
                stream.rewind(&rest);
                if let Some(source) = source {
                    set_peer_address(stream, source);
                }
                Ok(())
            }
            crate::proxy_protocol::Read::Failed(why) => {
                METRICS.proxy_protocol_refused.inc();
                pingora::Error::e_explain(pingora::ErrorType::AcceptError, why)
            }
        }
    }
}

impl EdgeApp {
    /// `max_connections`: downstream connections served at once; more are closed on arrival.
    pub fn new(
        proxy: HttpProxy<RobotsGuardProxy>,
        guard: Guard,
        max_connections: usize,
        proxy_protocol: ProxyProtocolListeners,
    ) -> EdgeApp {
        EdgeApp {
            proxy: Arc::new(proxy),
            guard,
            connections: Arc::new(Semaphore::new(max_connections)),
            proxy_protocol,
        }
    }

    async fn serve_http1(&self, mut stream: Stream, start: BytesMut, shutdown: &ShutdownWatch) {
        let mut persistent: Option<HttpPersistentSettings> = None;
        let mut first = true;
        let mut start = Some(start);
        loop {
            // Limits are read per request, so a reload applies to open connections too.
            let limits = self.guard.config().limits;
            let already = start.take().unwrap_or_default();
            let head = tokio::select! {
                head = read_head(&mut stream, already, &limits, first) => head,
                _ = wait_for_shutdown(shutdown.clone()), if !first => Head::Closed,
            };
            let prefix = match head {
                Head::Ready(prefix) => prefix,
                Head::Closed => return,
                Head::TimedOut => {
                    refuse(&mut stream, 408, "the request head did not arrive in time").await;
                    return;
                }
                Head::TooLarge => {
                    refuse(&mut stream, 431, "the request head is too large").await;
                    return;
                }
            };
            let mut session = ServerSession::new_http1(stream);
            match persistent.take() {
                Some(settings) => settings.apply_to_session(&mut session),
                None => {
                    session.set_keepalive(Some(limits.idle_timeout.as_secs().max(1)));
                    session.set_keepalive_reuses_remaining(Some(KEEPALIVE_REQUESTS));
                }
            }
            if *shutdown.borrow() {
                session.set_keepalive(None);
            }
            session.set_pipelined_prefix(prefix);
            let Some(reused) = self.proxy.process_new_http(session, shutdown).await else {
                return;
            };
            let (next, settings) = reused.consume();
            stream = next;
            persistent = settings;
            first = false;
        }
    }
}

#[async_trait]
impl ServerApp for EdgeApp {
    async fn process_new(
        self: &Arc<Self>,
        stream: Stream,
        shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        let Ok(_permit) = self.connections.clone().try_acquire_owned() else {
            // Closing at once keeps the process and the connections it already serves alive;
            // a client retries, an attacker gains nothing by holding more.
            METRICS.connections_refused.inc();
            return None;
        };
        METRICS.open_connections.inc();
        let _open = scopeguard(|| METRICS.open_connections.dec());
        let mut stream = stream;
        let mut start = BytesMut::new();
        // TLS listeners read their PROXY header before the handshake (PreTlsProxyProtocol).
        if stream.get_ssl_digest().is_none() && self.proxy_protocol.expects(local_address(&stream))
        {
            let deadline = Instant::now() + self.guard.config().limits.header_timeout;
            match crate::proxy_protocol::read(&mut stream, deadline).await {
                crate::proxy_protocol::Read::Header { source, rest } => {
                    if let Some(source) = source {
                        set_peer_address(&mut *stream, source);
                    }
                    start = rest;
                }
                crate::proxy_protocol::Read::Failed(_) => {
                    // Without it, the client is unknown: nothing on this connection is served.
                    METRICS.proxy_protocol_refused.inc();
                    return None;
                }
            }
        }
        if matches!(stream.selected_alpn_proto(), Some(ALPN::H2)) {
            return ServerApp::process_new(&self.proxy, stream, shutdown).await;
        }
        self.serve_http1(stream, start, shutdown).await;
        None
    }

    async fn cleanup(&self) {
        self.proxy.http_cleanup().await;
    }
}

/// Runs `f` when dropped.
fn scopeguard(f: impl FnOnce()) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

async fn wait_for_shutdown(mut shutdown: ShutdownWatch) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

/// What came of reading one request head.
#[derive(Debug)]
enum Head {
    /// The head is complete (possibly followed by body bytes): hand all of it to pingora.
    Ready(BytesMut),
    /// The client closed, or sent nothing before the idle (or, on a new connection, header)
    /// timeout: nothing to answer.
    Closed,
    /// Part of a head arrived but not the end of it before the deadline: 408.
    TimedOut,
    /// More than `max_header_bytes` without the end of the head: 431.
    TooLarge,
}

/// Reads one request head, after the bytes `already` read (what followed a PROXY header). On a
/// new connection the header deadline runs from now; on a kept-alive one the idle timeout applies
/// until the first byte, and the header deadline from there.
async fn read_head(
    stream: &mut Stream,
    already: BytesMut,
    limits: &Limits,
    new_connection: bool,
) -> Head {
    let mut buf = already;
    if buf.capacity() < 4096 {
        buf.reserve(4096 - buf.len());
    }
    if !buf.is_empty() {
        match head_state(&buf, limits.max_header_bytes) {
            HeadState::Complete => return Head::Ready(buf),
            HeadState::TooLarge => return Head::TooLarge,
            HeadState::Partial => {}
        }
    }
    let mut deadline = Instant::now()
        + if new_connection {
            limits.header_timeout
        } else {
            limits.idle_timeout
        };
    // On a kept-alive connection, the wait for the first byte is idle time.
    let mut idle = !new_connection;
    loop {
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(buf.len().max(4096));
        }
        let read = tokio::time::timeout_at(deadline, stream.read_buf(&mut buf)).await;
        match read {
            Err(_elapsed) if buf.is_empty() => return Head::Closed,
            Err(_elapsed) => return Head::TimedOut,
            Ok(Err(_)) | Ok(Ok(0)) => return Head::Closed,
            Ok(Ok(_)) => {}
        }
        if idle {
            idle = false;
            deadline = Instant::now() + limits.header_timeout;
        }
        match head_state(&buf, limits.max_header_bytes) {
            HeadState::Complete => return Head::Ready(buf),
            HeadState::TooLarge => return Head::TooLarge,
            HeadState::Partial => {}
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum HeadState {
    Complete,
    Partial,
    TooLarge,
}

/// Whether `buf` holds a whole request head within `max_bytes`. A head httparse refuses is
/// handed to pingora (which answers 400) once its blank line has arrived.
fn head_state(buf: &[u8], max_bytes: usize) -> HeadState {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let end = match request.parse(buf) {
        Ok(httparse::Status::Complete(end)) => Some(end),
        Ok(httparse::Status::Partial) => None,
        Err(_) => blank_line_end(buf),
    };
    match end {
        Some(end) if end <= max_bytes => HeadState::Complete,
        Some(_) => HeadState::TooLarge,
        None if buf.len() > max_bytes => HeadState::TooLarge,
        None => HeadState::Partial,
    }
}

/// The end of the first blank line (`\r\n\r\n` or `\n\n`), if any.
fn blank_line_end(buf: &[u8]) -> Option<usize> {
    let crlf = memchr::memmem::find(buf, b"\r\n\r\n").map(|at| at + 4);
    let lf = memchr::memmem::find(buf, b"\n\n").map(|at| at + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Answers a head robotsguard will not read further, then closes. Counted before routing.
async fn refuse(stream: &mut Stream, status: u16, why: &str) {
    METRICS.count_response(None, status);
    let reason = http::StatusCode::from_u16(status)
        .ok()
        .and_then(|code| code.canonical_reason())
        .unwrap_or("Error");
    let body = format!("{status} {reason}: {why}.\n");
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let write = async {
        stream.write_all(response.as_bytes()).await?;
        stream.flush().await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(REFUSAL_WRITE_TIMEOUT, write).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_complete_partial_or_too_large() {
        let max = 64;
        assert_eq!(
            head_state(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", max),
            HeadState::Complete
        );
        assert_eq!(
            head_state(b"GET / HTTP/1.1\nHost: a\n\n", max),
            HeadState::Complete
        );
        assert_eq!(
            head_state(b"GET / HTTP/1.1\r\nHost: a\r\n", max),
            HeadState::Partial
        );
        // Body bytes after the head do not count against the cap.
        let mut with_body = b"POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n".to_vec();
        with_body.extend_from_slice(&[b'x'; 100]);
        assert_eq!(head_state(&with_body, max), HeadState::Complete);
        let long = format!("GET / HTTP/1.1\r\nX: {}\r\n", "a".repeat(100));
        assert_eq!(head_state(long.as_bytes(), max), HeadState::TooLarge);
        let long_complete = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(100));
        assert_eq!(
            head_state(long_complete.as_bytes(), max),
            HeadState::TooLarge
        );
        // What httparse refuses goes to pingora once it is whole, so pingora can answer 400.
        assert_eq!(
            head_state(b"GET /a b HTTP/1.1\r\n\r\n", max),
            HeadState::Complete
        );
        assert_eq!(
            head_state(b"GET /a b HTTP/1.1\r\n", max),
            HeadState::Partial
        );
    }
}
