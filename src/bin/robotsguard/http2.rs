//! HTTP/2 connections (ALPN `h2`, or h2c with prior knowledge), served by robotsguard's own loop
//! over pingora's HTTP/2 sessions, so that an HTTP/2 connection has the deadlines and limits an
//! HTTP/1 one has:
//!
//! - the preface, the SETTINGS exchange and the first complete request head must arrive within
//!   `limits.header_timeout` of the connection's start (a connection that sends the preface and
//!   goes silent is closed then);
//! - with no stream open it waits at most `limits.idle_timeout`, and at the connection cap it is
//!   closed for a newer connection like any connection without a request in progress;
//! - it may have `limits.max_streams_per_connection` streams open at once (advertised in its
//!   SETTINGS; the `h2` library refuses more with `REFUSED_STREAM`), and each stream holds a
//!   permit of `limits.max_requests_in_flight`, counted against the connection's client
//!   (`limits.max_requests_in_flight_per_client`): a stream past the cap or the client's share
//!   is refused the same way, so it can be retried, rather than taking a place from others;
//! - a stream whose response makes no progress for `limits.write_timeout` (its window stays
//!   shut) is reset by pingora's write timeout, which frees its places;
//! - each stream buffers at most [`SEND_BUFFER_PER_STREAM`] of response for the socket.
//!
//! pingora's own HTTP/2 server applies none of the deadlines: a connection that sent only the
//! preface kept its connection slot for as long as the client liked.

use std::future::poll_fn;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::task::AtomicWaker;

use pingora::protocols::http::v2::server::{handshake, H2Accept, H2Options, HttpSession};
use pingora::protocols::http::ServerSession;
use pingora::protocols::{Digest, Stream};
use pingora::server::ShutdownWatch;
use tokio::time::Instant;

use crate::connections::{Client, EdgeApp, Idle, Served};
use crate::frames::RefusalWatch;
use robotsguard::config::Limits;

/// Response bytes one stream may have waiting for the socket in the `h2` library (its default is
/// 400 KiB, per stream): with a hundred streams a client that stops reading would hold tens of
/// MiB per connection.
const SEND_BUFFER_PER_STREAM: usize = 64 * 1024;

/// Malformed requests (refused by pingora as they arrive) a connection may send before it is
/// closed, as pingora's own HTTP/2 server allows.
const MAX_MALFORMED_STREAMS: usize = 32;

/// The HTTP/2 settings of a client connection under `limits`.
pub fn options(limits: &Limits) -> H2Options {
    let mut options = H2Options::default();
    options.max_concurrent_streams(limits.max_streams_per_connection);
    options.max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX));
    options.max_send_buffer_size(SEND_BUFFER_PER_STREAM);
    options
}

/// The streams being served on one connection.
#[derive(Default)]
struct Open {
    count: AtomicUsize,
    /// The connection loop, woken when the last open stream ends so it can start counting idle
    /// time. Only then: a wake per stream would poll the loop once more for every request. An
    /// `AtomicWaker` rather than a `Notify`: the loop waits on it for every stream it accepts, and
    /// registering the same waker again is a few atomic operations, where a `Notify` waiter is
    /// linked into a list under a lock and unlinked again each time.
    loop_waker: AtomicWaker,
}

impl Open {
    /// Ready when no stream is open. The waker is registered before the count is read, so a last
    /// stream that ends in between still wakes the loop.
    fn poll_all_ended(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.loop_waker.register(cx.waker());
        if self.count.load(Ordering::Acquire) == 0 {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// One stream's place in [`Open`]; leaves it when dropped.
struct OpenStream(Arc<Open>);

impl OpenStream {
    fn new(open: &Arc<Open>) -> OpenStream {
        open.count.fetch_add(1, Ordering::AcqRel);
        OpenStream(open.clone())
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.loop_waker.wake();
        }
    }
}

/// Completes when `idle` (if any) is evicted; never without one.
async fn evicted(idle: Option<&Idle>) {
    match idle {
        Some(idle) => idle.evicted().await,
        None => std::future::pending().await,
    }
}

/// Serves one HTTP/2 connection until it closes, times out or is evicted. `started`: when the
/// connection was accepted.
pub async fn serve<A: Served>(
    app: &EdgeApp<A>,
    stream: Stream,
    started: Instant,
    shutdown: &ShutdownWatch,
) {
    let limits = app.guard.limits();
    let client = app.client(&stream);
    let digest = Arc::new(Digest {
        ssl_digest: stream.get_ssl_digest(),
        timing_digest: stream.get_timing_digest(),
        proxy_digest: stream.get_proxy_digest(),
        socket_digest: stream.get_socket_digest(),
    });
    // Streams robotsguard refuses itself, so the watch does not count them again.
    let ours = Arc::new(AtomicUsize::new(0));
    let stream: Stream = Box::new(RefusalWatch::new(stream, ours.clone()));
    let first_head_by = started + limits.header_timeout;
    let mut idle = Some(app.slots.idle());
    let handshake = tokio::select! {
        done = tokio::time::timeout_at(first_head_by, handshake(stream, Some(options(&limits)))) => done,
        () = evicted(idle.as_ref()) => return,
    };
    let Ok(Ok(mut connection)) = handshake else {
        return;
    };
    let open = Arc::new(Open::default());
    let mut watch = shutdown.clone();
    let mut shutting_down = false;
    let mut malformed = 0;
    let mut first = true;
    let mut idle_since = Instant::now();
    // One timer for the connection, moved when its deadline changes: a new one per accepted
    // stream would be built (and, when polled, registered and cancelled) for every request.
    let idle_timer = tokio::time::sleep_until(first_head_by);
    tokio::pin!(idle_timer);
    loop {
        let streams = open.count.load(Ordering::Acquire);
        if streams > 0 {
            idle = None;
        } else {
            if idle.is_none() {
                idle = Some(app.slots.idle());
                idle_since = Instant::now();
            }
            let idle_until = if first {
                first_head_by
            } else {
                idle_since + app.guard.limits().idle_timeout
            };
            if idle_timer.deadline() != idle_until {
                idle_timer.as_mut().reset(idle_until);
            }
        }
        let accepted = tokio::select! {
            biased;
            _ = watch.changed(), if !shutting_down => {
                connection.graceful_shutdown();
                shutting_down = true;
                continue;
            }
            accepted = HttpSession::from_h2_conn(&mut connection, digest.clone()) => accepted,
            () = &mut idle_timer, if streams == 0 => return,
            () = evicted(idle.as_ref()), if streams == 0 => return,
            () = poll_fn(|cx| open.poll_all_ended(cx)), if streams > 0 => continue,
        };
        let session = match accepted {
            Ok(Some(H2Accept::Session(session))) => session,
            Ok(Some(H2Accept::Rejected)) => {
                malformed += 1;
                if malformed >= MAX_MALFORMED_STREAMS {
                    return;
                }
                continue;
            }
            // The client closed, or broke the protocol.
            Ok(None) | Err(_) => return,
        };
        first = false;
        serve_stream(app, client, session, &open, &ours, shutdown);
    }
}

/// The size of a stream's head as HTTP/1 would send it, near enough: the target and every
/// header's name and value, with a few bytes of framing each.
fn head_bytes(session: &HttpSession) -> usize {
    let head = session.req_header();
    let headers: usize = head
        .headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    head.raw_path().len() + 16 + headers
}

/// Starts serving one stream, or refuses it when `limits.max_requests_in_flight` are in flight or
/// its client holds its share.
fn serve_stream<A: Served>(
    app: &EdgeApp<A>,
    client: Client,
    mut session: HttpSession,
    open: &Arc<Open>,
    ours: &Arc<AtomicUsize>,
    shutdown: &ShutdownWatch,
) {
    let weight = robotsguard::load::weight(head_bytes(&session));
    let permit = match app.in_flight.try_take(client.holder, weight) {
        Ok(permit) => permit,
        Err(refusal) => {
            ours.fetch_add(1, Ordering::AcqRel);
            session.shutdown_with_reason(h2::Reason::REFUSED_STREAM);
            client.refused(refusal);
            return;
        }
    };
    let place = OpenStream::new(open);
    let http = app.http.clone();
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        let _place = place;
        let _permit = permit;
        http.process_new_http(ServerSession::new_http2(session), &shutdown)
            .await;
    });
}
