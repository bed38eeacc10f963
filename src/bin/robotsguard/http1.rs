//! HTTP/1 connections: each request head is read before pingora sees it, against a deadline that
//! trickling cannot move (`limits.header_timeout`) and a byte cap (`limits.max_header_bytes`),
//! then handed to pingora whole as the start of the stream, so pingora never waits on the client
//! for a head. Between requests the connection waits at most `limits.idle_timeout`, and may be
//! closed for a newer connection at the connection cap, or when the server shuts down. Each
//! request holds a permit of `limits.max_requests_in_flight` while pingora serves it, counted
//! against its client (`limits.max_requests_in_flight_per_client`); past the cap or the client's
//! share it is answered `503` with `Retry-After`.
//!
//! pingora reads a request head with a read timeout that restarts on every read and a 1 MiB
//! buffer per connection, so without this a client trickling a byte every few seconds would hold
//! a connection and its buffer forever.

use std::time::Duration;

use bytes::BytesMut;
use pingora::apps::HttpPersistentSettings;
use pingora::protocols::http::ServerSession;
use pingora::protocols::l4::stream::Stream as L4Stream;
use pingora::protocols::Stream;
use pingora::server::ShutdownWatch;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use crate::connections::{EdgeApp, Served};
use robotsguard::config::Limits;
use robotsguard::metrics::METRICS;

/// How every HTTP/2 connection starts (RFC 9113, section 3.4): as far as the blank line, which is
/// where a request head read ends; `SM\r\n\r\n` follows.
const H2_PREFACE_HEAD: &[u8] = b"PRI * HTTP/2.0\r\n\r\n";

/// How long writing a refusal (408, 431, 503) may take before the connection is dropped.
const REFUSAL_WRITE_TIMEOUT: Duration = Duration::from_secs(2);

/// Requests served on one connection before it is closed, so per-connection memory is returned
/// now and then (nginx closes after 1,000 too).
const KEEPALIVE_REQUESTS: u32 = 1000;

/// How an HTTP/1 connection ended.
pub enum End {
    /// Closed.
    Closed,
    /// It opened with the HTTP/2 preface on an h2c listener: the stream, the preface put back.
    Http2(Stream),
}

/// Serves HTTP/1 requests on `stream` until it closes; `start` holds bytes already read past a
/// PROXY header. With `h2c`, a connection opening with the HTTP/2 preface is handed back.
pub async fn serve<A: Served>(
    app: &EdgeApp<A>,
    mut stream: Stream,
    start: BytesMut,
    h2c: bool,
    shutdown: &ShutdownWatch,
) -> End {
    let mut persistent: Option<HttpPersistentSettings> = None;
    let mut first = true;
    let mut start = Some(start);
    let mut kept_limits = None;
    let client = app.client(&stream);
    loop {
        // Limits are read per request, so a reload applies to open connections too (and read
        // again at a kept-alive connection's next first byte: a reload while it was idle
        // applies to the head that follows).
        let mut limits = app.guard.limits_kept(&mut kept_limits);
        let already = start.take().unwrap_or_default();
        // Ends (the read sees end-of-file) for a newer connection at the cap, or, between
        // requests, at shutdown.
        let mut wait = app.slots.wait_for_head(&mut stream, !first);
        let head = read_head(
            wait.stream(),
            already,
            &mut limits,
            || app.guard.limits_kept(&mut kept_limits),
            first,
        )
        .await;
        drop(wait);
        let (prefix, head_bytes) = match head {
            Head::Ready(prefix, head_bytes) => (prefix, head_bytes),
            Head::Closed => return End::Closed,
            Head::TimedOut => {
                refuse(&mut stream, 408, "the request head did not arrive in time").await;
                return End::Closed;
            }
            Head::TooLarge => {
                refuse(&mut stream, 431, "the request head is too large").await;
                return End::Closed;
            }
        };
        if first && h2c && prefix.starts_with(H2_PREFACE_HEAD) {
            // The preface reads as a complete HTTP/1 head (`PRI * HTTP/2.0`): put it back for the
            // HTTP/2 server.
            return match stream.into_any().downcast::<L4Stream>() {
                Ok(mut plain) => {
                    plain.rewind(&prefix);
                    End::Http2(plain)
                }
                Err(_) => {
                    tracing::debug!("h2c preface on a stream that cannot be rewound");
                    End::Closed
                }
            };
        }
        let _permit = match app
            .in_flight
            .try_take(client.holder, robotsguard::load::weight(head_bytes))
        {
            Ok(permit) => permit,
            Err(refusal) => {
                client.refused(refusal);
                refuse(
                    &mut stream,
                    503,
                    "too many requests are in progress; try again shortly",
                )
                .await;
                return End::Closed;
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
        let Some(reused) = app.http.process_new_http(session, shutdown).await else {
            return End::Closed;
        };
        let (next, settings) = reused.consume();
        stream = next;
        persistent = settings;
        first = false;
    }
}

/// What came of reading one request head.
#[derive(Debug)]
enum Head {
    /// The head is complete (possibly followed by body bytes): hand all of it to pingora. With
    /// the head's length.
    Ready(BytesMut, usize),
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
/// until the first byte, and from there the header deadline and size of the limits in force then
/// (`in_force`; `limits` is updated to them).
async fn read_head(
    stream: &mut Stream,
    already: BytesMut,
    limits: &mut Limits,
    mut in_force: impl FnMut() -> Limits,
    new_connection: bool,
) -> Head {
    let mut buf = if already.capacity() == 0 {
        BytesMut::with_capacity(4096)
    } else {
        already
    };
    if buf.capacity() < 4096 {
        buf.reserve(4096 - buf.len());
    }
    if !buf.is_empty() {
        match head_state(&buf, limits.max_header_bytes) {
            HeadState::Complete(end) => return Head::Ready(buf, end),
            HeadState::TooLarge => return Head::TooLarge,
            HeadState::Partial => {}
        }
    }
    // The header deadline, fixed once it runs: on a new connection from now; on a kept-alive one
    // from the first byte, the wait for which is idle time. Most heads arrive in one read, so
    // the clock is read only when one does not.
    let mut deadline = new_connection.then(|| Instant::now() + limits.header_timeout);
    let mut left = if new_connection {
        limits.header_timeout
    } else {
        limits.idle_timeout
    };
    loop {
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(buf.len().max(4096));
        }
        // pingora's timer wheel (10 ms resolution, one shared timer per tick) rather than a
        // tokio timer per read: this wait is armed for every request, as pingora arms its own
        // read timeout when it reads a head itself. The deadline stays fixed: each read gets
        // only what is left of it.
        let read =
            pingora::prelude::fast_timeout::fast_timeout(left, stream.read_buf(&mut buf)).await;
        match read {
            Err(_elapsed) if buf.is_empty() => return Head::Closed,
            Err(_elapsed) => return Head::TimedOut,
            Ok(Err(_)) | Ok(Ok(0)) => return Head::Closed,
            Ok(Ok(_)) => {}
        }
        if deadline.is_none() {
            // A kept-alive connection's first byte: its wait was idle time, during which a
            // reload may have installed other limits.
            *limits = in_force();
        }
        match head_state(&buf, limits.max_header_bytes) {
            HeadState::Complete(end) => return Head::Ready(buf, end),
            HeadState::TooLarge => return Head::TooLarge,
            HeadState::Partial => {}
        }
        let now = Instant::now();
        let deadline = *deadline.get_or_insert(now + limits.header_timeout);
        left = deadline.saturating_duration_since(now);
    }
}

#[derive(Debug, PartialEq, Eq)]
enum HeadState {
    /// Where the head ends.
    Complete(usize),
    Partial,
    TooLarge,
}

/// Whether `buf` holds a whole request head within `max_bytes`. Only the end of the head is
/// looked for (pingora parses it next, and answers 400 to one it refuses): a full parse here
/// would cost as much as pingora's own for every request.
fn head_state(buf: &[u8], max_bytes: usize) -> HeadState {
    match head_end(buf) {
        Some(end) if end <= max_bytes => HeadState::Complete(end),
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
    let retry = if status == 503 {
        "Retry-After: 1\r\n"
    } else {
        ""
    };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nCache-Control: no-store\r\n{retry}Connection: close\r\n\r\n{body}",
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
            HeadState::Complete(27)
        );
        assert_eq!(
            head_state(b"GET / HTTP/1.1\nHost: a\n\n", max),
            HeadState::Complete(24)
        );
        assert_eq!(
            head_state(b"GET / HTTP/1.1\r\nHost: a\r\n", max),
            HeadState::Partial
        );
        // Body bytes after the head do not count against the cap.
        let mut with_body = b"POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n".to_vec();
        with_body.extend_from_slice(&[b'x'; 100]);
        assert_eq!(head_state(&with_body, max), HeadState::Complete(40));
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
            HeadState::Complete(21)
        );
        assert_eq!(
            head_state(b"GET /a b HTTP/1.1\r\n", max),
            HeadState::Partial
        );
        // Mixed line endings end a head as they do for httparse.
        assert_eq!(
            head_state(b"GET / HTTP/1.1\r\nHost: a\n\r\n", max),
            HeadState::Complete(26)
        );
        assert_eq!(
            head_state(b"GET / HTTP/1.1\nHost: a\r\n\n", max),
            HeadState::Complete(25)
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
            HeadState::Complete(29)
        );
        let leading = format!("{}GET / HTTP/1.1\r\n", "\r\n".repeat(40));
        assert_eq!(head_state(leading.as_bytes(), max), HeadState::TooLarge);
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nbody"), Some(27));
    }
}
