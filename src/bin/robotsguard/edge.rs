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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::BytesMut;
use pingora::apps::{HttpPersistentSettings, HttpServerApp, ServerApp};
use pingora::listeners::PreTlsProcess;
use pingora::protocols::http::ServerSession;
use pingora::protocols::l4::stream::Stream as L4Stream;
use pingora::protocols::{GetSocketDigest, SocketDigest, Stream, UniqueID, UniqueIDType, ALPN};
use pingora::proxy::HttpProxy;
use pingora::server::ShutdownWatch;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::proxy::RobotsGuardProxy;
use robotsguard::config::Limits;
use robotsguard::guard::Guard;
use robotsguard::metrics::METRICS;

/// How every HTTP/2 connection starts (RFC 9113, section 3.4): as far as the blank line, which is
/// where a request head read ends; `SM\r\n\r\n` follows.
const H2_PREFACE_HEAD: &[u8] = b"PRI * HTTP/2.0\r\n\r\n";

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
    slots: Arc<Slots>,
    /// Plain listeners whose connections start with a PROXY protocol header.
    proxy_protocol: ListenerAddresses,
    /// Plain listeners that take HTTP/2 with prior knowledge (h2c) beside HTTP/1.1.
    h2c: ListenerAddresses,
}

/// Some of the listen addresses (those with a PROXY protocol header, those that take h2c),
/// matched against a connection's local address.
#[derive(Debug, Clone, Default)]
pub struct ListenerAddresses(Vec<std::net::SocketAddr>);

impl ListenerAddresses {
    pub fn new(addresses: Vec<std::net::SocketAddr>) -> Self {
        ListenerAddresses(addresses)
    }

    /// Whether a connection accepted on `local` came through one of these listeners. A listener
    /// on the unspecified address accepts on every local address with its port.
    pub fn contains(&self, local: Option<std::net::SocketAddr>) -> bool {
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

/// The downstream connection cap, shared by the pre-TLS hook and [`EdgeApp`].
///
/// When every slot is taken, a new connection closes the connection that has waited longest for
/// a request head (an idle keep-alive, a silent or trickling client, a TLS client that never
/// sent its ClientHello) and takes its slot, as nginx reuses idle keep-alive connections when it
/// runs out: holding slots open then buys an attacker nothing, while connections with a request
/// in progress are never touched.
///
/// A TLS connection takes its slot before its handshake (which pingora lets run for up to a
/// minute), so connections still shaking hands count like any other; the slot is parked under
/// the connection's descriptor until [`EdgeApp`] receives the connection.
pub struct Slots {
    semaphore: Arc<Semaphore>,
    handshaking: Mutex<HashMap<UniqueIDType, (OwnedSemaphorePermit, std::time::Instant)>>,
    waiting: Mutex<WaitingForHeads>,
}

/// Connections waiting for a request head, oldest first.
#[derive(Default)]
struct WaitingForHeads {
    next: u64,
    list: std::collections::VecDeque<(u64, Arc<Notify>)>,
}

/// A parked slot older than this belongs to a handshake that failed (pingora gives up on a
/// handshake after 60 s): it is released.
const HANDSHAKE_SLOT_LIFETIME: Duration = Duration::from_secs(75);

/// How long a new connection waits for the slot of the connection it closed.
const EVICTION_WAIT: Duration = Duration::from_millis(200);

impl Slots {
    pub fn new(max_connections: usize) -> Arc<Slots> {
        Arc::new(Slots {
            semaphore: Arc::new(Semaphore::new(max_connections)),
            handshaking: Mutex::new(HashMap::new()),
            waiting: Mutex::new(WaitingForHeads::default()),
        })
    }

    /// A slot for a new connection: a free one, else the one of the connection that has waited
    /// longest for a request head, which is closed. `None` when every slot is busy with a request.
    async fn take(&self) -> Option<OwnedSemaphorePermit> {
        if let Ok(slot) = self.semaphore.clone().try_acquire_owned() {
            return Some(slot);
        }
        let oldest = self.waiting.lock().ok()?.list.pop_front();
        let Some((_, close)) = oldest else {
            METRICS.connections_refused.inc();
            return None;
        };
        close.notify_one();
        METRICS.connections_evicted.inc();
        match tokio::time::timeout(EVICTION_WAIT, self.semaphore.clone().acquire_owned()).await {
            Ok(Ok(slot)) => Some(slot),
            _ => {
                METRICS.connections_refused.inc();
                None
            }
        }
    }

    /// Marks the calling connection as waiting for a request head until the returned guard is
    /// dropped; `notified()` on it completes when the connection is to be closed for a newer one.
    /// Each wait has a `Notify` of its own: a notification that arrives as the wait ends (the
    /// head came in) stays with it, rather than closing the connection at its next wait.
    fn wait_for_head(self: &Arc<Self>) -> HeadWait {
        let close = Arc::new(Notify::new());
        let number = match self.waiting.lock() {
            Ok(mut waiting) => {
                let number = waiting.next;
                waiting.next += 1;
                waiting.list.push_back((number, close.clone()));
                number
            }
            Err(_) => u64::MAX,
        };
        HeadWait {
            slots: self.clone(),
            number,
            close,
        }
    }

    /// Parks `slot` for the connection with descriptor `id` until [`Slots::claim`]. A slot
    /// already parked under `id` was left by a failed handshake on a descriptor since reused:
    /// it is released, as are slots parked too long.
    fn park(&self, id: UniqueIDType, slot: OwnedSemaphorePermit) {
        let Ok(mut parked) = self.handshaking.lock() else {
            return;
        };
        let now = std::time::Instant::now();
        parked.retain(|_, (_, since)| now.duration_since(*since) < HANDSHAKE_SLOT_LIFETIME);
        parked.insert(id, (slot, now));
    }

    /// The slot parked for descriptor `id` before its TLS handshake, if any.
    fn claim(&self, id: UniqueIDType) -> Option<OwnedSemaphorePermit> {
        self.handshaking
            .lock()
            .ok()
            .and_then(|mut parked| parked.remove(&id))
            .map(|(slot, _)| slot)
    }
}

/// A connection's place among those waiting for a request head; leaves it when dropped.
struct HeadWait {
    slots: Arc<Slots>,
    number: u64,
    close: Arc<Notify>,
}

impl HeadWait {
    /// Completes when a newer connection needs this one's slot.
    async fn evicted(&self) {
        self.close.notified().await;
    }
}

impl Drop for HeadWait {
    fn drop(&mut self) {
        if let Ok(mut waiting) = self.slots.waiting.lock() {
            // Numbers are handed out in order and the list keeps it.
            if let Ok(position) = waiting.list.binary_search_by_key(&self.number, |(n, _)| *n) {
                waiting.list.remove(position);
            }
        }
    }
}

/// Before a TLS handshake (pingora's pre-TLS hook): takes the connection's slot, reads its PROXY
/// header on listeners that expect one, and waits for the TLS ClientHello within
/// `limits.header_timeout`, so a silent connection is closed then instead of after pingora's
/// minute-long handshake timeout.
pub struct PreTls {
    pub proxy_protocol: ListenerAddresses,
    pub guard: Guard,
    pub slots: Arc<Slots>,
}

#[async_trait]
impl PreTlsProcess for PreTls {
    async fn process(&self, stream: &mut L4Stream) -> pingora::Result<()> {
        let Some(slot) = self.slots.take().await else {
            return pingora::Error::e_explain(
                pingora::ErrorType::AcceptError,
                "limits.max_connections reached",
            );
        };
        let wait = self.slots.wait_for_head();
        let deadline = Instant::now() + self.guard.config().limits.header_timeout;
        let local = stream
            .get_socket_digest()
            .and_then(|digest| digest.local_addr().and_then(|a| a.as_inet().copied()));
        let mut start = BytesMut::new();
        if self.proxy_protocol.contains(local) {
            match crate::proxy_protocol::read(stream, deadline).await {
                crate::proxy_protocol::Read::Header { source, rest } => {
                    if let Some(source) = source {
                        set_peer_address(stream, source);
                    }
                    start = rest;
                }
                crate::proxy_protocol::Read::Failed(why) => {
                    METRICS.proxy_protocol_refused.inc();
                    return pingora::Error::e_explain(pingora::ErrorType::AcceptError, why);
                }
            }
        }
        let hello = tokio::select! {
            hello = read_client_hello(stream, &mut start, deadline) => hello,
            () = wait.evicted() => Err("closed for a newer connection (limits.max_connections)"),
        };
        drop(wait);
        if let Err(why) = hello {
            return pingora::Error::e_explain(pingora::ErrorType::AcceptError, why);
        }
        stream.rewind(&start);
        self.slots.park(stream.id(), slot);
        Ok(())
    }
}

/// A TLS record header: content type, version, length.
const TLS_RECORD_HEADER: usize = 5;
/// TLS handshake records' content type.
const TLS_HANDSHAKE: u8 = 22;
/// The largest TLS plaintext record (2^14 bytes) and its header.
const MAX_CLIENT_HELLO_RECORD: usize = TLS_RECORD_HEADER + (1 << 14);

/// Reads into `buf` (which may already hold bytes) until it holds the connection's first TLS
/// record, the ClientHello, or `deadline` passes. Anything that is not a TLS handshake record is
/// left for the handshake to refuse.
async fn read_client_hello(
    stream: &mut L4Stream,
    buf: &mut BytesMut,
    deadline: Instant,
) -> Result<(), &'static str> {
    loop {
        if buf.len() >= TLS_RECORD_HEADER {
            if buf[0] != TLS_HANDSHAKE {
                return Ok(());
            }
            let length = usize::from(u16::from_be_bytes([buf[3], buf[4]]));
            if buf.len() >= (TLS_RECORD_HEADER + length).min(MAX_CLIENT_HELLO_RECORD) {
                return Ok(());
            }
        }
        buf.reserve(4096);
        match tokio::time::timeout_at(deadline, stream.read_buf(buf)).await {
            Ok(Ok(0)) => return Err("closed before its TLS ClientHello"),
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return Err("read error before its TLS ClientHello"),
            Err(_) => return Err("no TLS ClientHello within limits.header_timeout"),
        }
    }
}

impl EdgeApp {
    /// `slots`: downstream connections served at once; more are closed on arrival.
    pub fn new(
        proxy: HttpProxy<RobotsGuardProxy>,
        guard: Guard,
        slots: Arc<Slots>,
        proxy_protocol: ListenerAddresses,
        h2c: ListenerAddresses,
    ) -> EdgeApp {
        EdgeApp {
            proxy: Arc::new(proxy),
            guard,
            slots,
            proxy_protocol,
            h2c,
        }
    }

    async fn serve_http1(&self, mut stream: Stream, start: BytesMut, shutdown: &ShutdownWatch) {
        let h2c = self.h2c.contains(local_address(&stream));
        let mut persistent: Option<HttpPersistentSettings> = None;
        let mut first = true;
        let mut start = Some(start);
        // Made once per connection rather than once per request: each request waits on it.
        let mut shutting_down = std::pin::pin!(wait_for_shutdown(shutdown.clone()));
        loop {
            // Limits are read per request, so a reload applies to open connections too.
            let limits = self.guard.config().limits;
            let already = start.take().unwrap_or_default();
            let wait = self.slots.wait_for_head();
            let head = tokio::select! {
                head = read_head(&mut stream, already, &limits, first) => head,
                // Completed, it ends the connection: it is never polled again.
                () = &mut shutting_down, if !first => Head::Closed,
                () = wait.evicted() => Head::Closed,
            };
            drop(wait);
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
            if first && h2c && prefix.starts_with(H2_PREFACE_HEAD) {
                // The preface reads as a complete HTTP/1 head (`PRI * HTTP/2.0`): give it back to
                // the stream and let pingora's HTTP/2 server take the connection.
                let plain = stream.into_any().downcast::<L4Stream>().ok();
                match plain {
                    Some(mut plain) => {
                        plain.rewind(&prefix);
                        let _ = ServerApp::process_new(&self.proxy, plain, shutdown).await;
                    }
                    None => tracing::debug!("h2c preface on a stream that cannot be rewound"),
                }
                return;
            }
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
        // A TLS connection's slot was taken before its handshake.
        let slot = match self.slots.claim(stream.id()) {
            Some(slot) => Some(slot),
            None => self.slots.take().await,
        };
        // Without one, closing at once keeps the process and the connections it already serves
        // alive; a client retries.
        let _slot = slot?;
        METRICS.open_connections.inc();
        let _open = scopeguard(|| METRICS.open_connections.dec());
        let mut stream = stream;
        let mut start = BytesMut::new();
        // TLS listeners read their PROXY header before the handshake (PreTlsProxyProtocol).
        if stream.get_ssl_digest().is_none() && self.proxy_protocol.contains(local_address(&stream))
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

/// Whether `buf` holds a whole request head within `max_bytes`. Only the end of the head is
/// looked for (pingora parses it next, and answers 400 to one it refuses): a full parse here
/// would cost as much as pingora's own for every request.
fn head_state(buf: &[u8], max_bytes: usize) -> HeadState {
    match head_end(buf) {
        Some(end) if end <= max_bytes => HeadState::Complete,
        Some(_) => HeadState::TooLarge,
        None if buf.len() > max_bytes => HeadState::TooLarge,
        None => HeadState::Partial,
    }
}

/// Where the head ends: after the first empty line (CRLF or bare LF line endings, as httparse and
/// pingora read them) that follows the request line. Empty lines before the request line (RFC
/// 9112 section 2.2 lets a server ignore them) are not its end, so a client cannot hand pingora a
/// few line breaks and then trickle the real head past the deadline.
fn head_end(buf: &[u8]) -> Option<usize> {
    let mut from = buf.iter().position(|b| *b != b'\r' && *b != b'\n')?;
    while let Some(offset) = memchr::memchr(b'\n', &buf[from..]) {
        let newline = from + offset;
        match (buf.get(newline + 1), buf.get(newline + 2)) {
            (Some(b'\n'), _) => return Some(newline + 2),
            (Some(b'\r'), Some(b'\n')) => return Some(newline + 3),
            (None, _) | (Some(b'\r'), None) => return None,
            _ => from = newline + 1,
        }
    }
    None
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
        // Mixed line endings end a head as they do for httparse.
        assert_eq!(
            head_state(b"GET / HTTP/1.1\r\nHost: a\n\r\n", max),
            HeadState::Complete
        );
        assert_eq!(
            head_state(b"GET / HTTP/1.1\nHost: a\r\n\n", max),
            HeadState::Complete
        );
        assert_eq!(
            head_state(b"GET / HTTP/1.1\r\nHost: a\n\r", max),
            HeadState::Partial
        );
        // Empty lines before the request line are not a head.
        assert_eq!(head_state(b"\r\n\r\n", max), HeadState::Partial);
        assert_eq!(
            head_state(b"\r\n\r\nGET / HTTP/1.1\r\n", max),
            HeadState::Partial
        );
        assert_eq!(
            head_state(b"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", max),
            HeadState::Complete
        );
        let leading = format!("{}GET / HTTP/1.1\r\n", "\r\n".repeat(40));
        assert_eq!(head_state(leading.as_bytes(), max), HeadState::TooLarge);
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nbody"), Some(27));
    }
}
