//! `limits`: deadlines and caps on client connections and requests.

use super::*;

pub(crate) static LIMITS: Section = Section {
    id: "limits",
    place: "in `limits`",
    title: "Limits",
    doc: "Deadlines and caps that keep slow or greedy clients from holding the proxy.",
    keys: &[
        key("header_timeout", Ty::Duration, "`10s`", "A request head must arrive whole within this, from the connection's start (or, kept alive, the request's first byte); else `408`."),
        key("max_header_bytes", Ty::Size, "`32KiB`", "Request line plus headers, 4 KiB to 1 MiB; more gets `431`."),
        key("idle_timeout", Ty::Duration, "`60s`", "How long a kept-alive connection (or an HTTP/2 connection with no stream open) waits for its next request."),
        key("write_timeout", Ty::Duration, "the value of `idle_timeout`", "How long a write to a client may make no progress (a client that stops reading, an HTTP/2 stream whose window stays shut): then the HTTP/2 stream is reset or the HTTP/1 connection closed, and the request's places are free again."),
        key("body_timeout", Ty::Duration, "`60s`", "A request body must arrive within this after its head; else `408`."),
        key("max_connections", Ty::Int { min: 1, max: MAX_MAX_CONNECTIONS }, "half of what the open-files limit leaves after 256 reserved descriptors, at most 10,000", "Client connections at once, of the proxy and decision listeners together; at the cap a new connection closes the one that has waited longest without a request in progress, or is closed when every one is busy.").restart_only(&RestartOnly {
            differs: |old, new| old.limits.max_connections != new.limits.max_connections,
            keep: |new, running| new.limits.max_connections = running.limits.max_connections,
        }),
        key("handshake_timeout", Ty::Duration, "`10s`", "A TLS handshake (and the PROXY header before it) must finish within this of the connection's start."),
        key("max_streams_per_connection", Ty::Int { min: 1, max: MAX_STREAMS_PER_CONNECTION }, "`100`", "HTTP/2 streams one connection may have open at once (advertised in SETTINGS); more are refused with `REFUSED_STREAM`."),
        key("max_requests_in_flight", Ty::Int { min: 1, max: MAX_MAX_CONNECTIONS }, "four times `max_connections`, within what the open-files limit leaves, at most 1,024", "Requests served at once in the process (a head over 8 KiB takes one more place per 8 KiB); more get `REFUSED_STREAM` (HTTP/2) or `503` with `Retry-After: 1` (HTTP/1).").restart_only(&RestartOnly {
            differs: |old, new| old.limits.max_requests_in_flight != new.limits.max_requests_in_flight,
            keep: |new, running| new.limits.max_requests_in_flight = running.limits.max_requests_in_flight,
        }),
        key("max_requests_in_flight_per_client", Ty::Int { min: 1, max: MAX_MAX_CONNECTIONS }, "an eighth of `max_requests_in_flight`, at least 8 (all of it, below 8)", "Places one client holds at most: an IPv4 address or an IPv6 /64, as the connection layer knows it (the peer, or a trusted peer's PROXY header); each connection of a peer in `trusted_proxies` that sends no PROXY header, and each of a `decision.trusted_callers` caller on the decision listener, counts as a client of its own. Under load a client holds less: once more than half the places are taken, one that holds places takes another only while at least four times its holding stays free, and its first request may take any free place, so a newcomer is served beside one or many flooding clients (with the defaults, ten leave it dozens of places). More get `REFUSED_STREAM` or `503`; at most `max_requests_in_flight`, which turns sharing off.").restart_only(&RestartOnly {
            differs: |old, new| old.limits.max_requests_in_flight_per_client != new.limits.max_requests_in_flight_per_client,
            keep: |new, running| new.limits.max_requests_in_flight_per_client = running.limits.max_requests_in_flight_per_client,
        }),
    ],
};

/// Bounds that keep a client from holding memory, file descriptors or a worker for long.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Limits {
    /// From a request's first byte (or the connection's start) to the end of its header block;
    /// trickling bytes does not extend it. Answered with 408.
    pub header_timeout: Duration,
    /// Total bytes of a request line and headers. Answered with 431.
    pub max_header_bytes: usize,
    /// How long a kept-alive connection (or an HTTP/2 connection with no stream open) may wait
    /// for its next request.
    pub idle_timeout: Duration,
    /// How long a write to a client may make no progress (a client that stops reading, an HTTP/2
    /// stream whose window stays shut) before its request ends: the stream is reset, an HTTP/1
    /// connection closed, and its places under `max_requests_in_flight` are free again. Unset in
    /// the file, it is `idle_timeout`.
    pub write_timeout: Duration,
    /// From the end of a request's headers to the end of its body.
    pub body_timeout: Duration,
    /// Downstream connections at once; `None` derives it from the open-files limit at start.
    pub max_connections: Option<usize>,
    /// From a TLS connection's start to the end of its handshake; trickling does not extend it.
    pub handshake_timeout: Duration,
    /// HTTP/2 streams one connection may have open at once (advertised in its SETTINGS); more
    /// are refused with `REFUSED_STREAM`.
    pub max_streams_per_connection: u32,
    /// Requests (HTTP/1 requests and HTTP/2 streams) being served at once in the process; more
    /// are refused (`REFUSED_STREAM`, or `503` on HTTP/1). `None` derives it at start from
    /// `max_connections` and the open-files limit.
    pub max_requests_in_flight: Option<usize>,
    /// Places under `max_requests_in_flight` one client (an IPv4 address, an IPv6 /64; each
    /// connection of a trusted proxy that sends no PROXY header) may hold at once; more are
    /// refused like requests past the process cap. `None`: an eighth of the process cap, at
    /// least 8. Equal to the process cap, sharing is off.
    pub max_requests_in_flight_per_client: Option<usize>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(10),
            max_header_bytes: 32 * 1024,
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(60),
            max_connections: None,
            handshake_timeout: Duration::from_secs(10),
            max_streams_per_connection: 100,
            max_requests_in_flight: None,
            max_requests_in_flight_per_client: None,
        }
    }
}

/// `limits.max_header_bytes` below this would refuse ordinary browser requests (cookies
/// alone reach a few KiB); above the ceiling a header block is no longer a header.
pub(crate) const MIN_MAX_HEADER_BYTES: u64 = 4 * 1024;

pub(crate) const MAX_MAX_HEADER_BYTES: u64 = 1024 * 1024;

/// A sanity bound on `limits.max_connections` and `limits.max_requests_in_flight`.
pub(crate) const MAX_MAX_CONNECTIONS: i128 = 10_000_000;

/// A sanity bound on `limits.max_streams_per_connection` (browsers open about a hundred).
pub(crate) const MAX_STREAMS_PER_CONNECTION: i128 = 1000;

/// `limits`, over the built-in values.
pub(crate) fn limits(sink: &mut Sink, node: &Node) -> Limits {
    let mut out = Limits::default();
    let Some(table) = Table::read(sink, node, &LIMITS, "`limits`") else {
        return out;
    };
    let positive = |sink: &mut Sink, key: &str| {
        let n = table.get(key)?;
        let d = reader::duration(sink, n, key)?;
        if d.is_zero() {
            sink.error(n.pos, format!("`{key}` must be longer than 0s"));
            return None;
        }
        Some(d)
    };
    if let Some(d) = positive(sink, "header_timeout") {
        out.header_timeout = d;
    }
    if let Some(d) = positive(sink, "idle_timeout") {
        out.idle_timeout = d;
    }
    // Unset, writes are held to the idle timeout, as before the key existed.
    out.write_timeout = positive(sink, "write_timeout").unwrap_or(out.idle_timeout);
    if let Some(d) = positive(sink, "body_timeout") {
        out.body_timeout = d;
    }
    if let Some(d) = positive(sink, "handshake_timeout") {
        out.handshake_timeout = d;
    }
    if let Some(n) = table.get("max_header_bytes") {
        if let Some(bytes) = reader::size(sink, n, "max_header_bytes") {
            if (MIN_MAX_HEADER_BYTES..=MAX_MAX_HEADER_BYTES).contains(&bytes) {
                out.max_header_bytes = usize::try_from(bytes).unwrap_or(out.max_header_bytes);
            } else {
                sink.error_hint(
                    n.pos,
                    format!(
                        "`max_header_bytes` is {bytes} bytes; it must be between 4KiB and 1MiB"
                    ),
                    "browsers send a few KiB of headers; 32KiB is the default",
                );
            }
        }
    }
    if let Some(n) = table.get("max_connections") {
        out.max_connections = reader::integer(sink, n, "max_connections", 1, MAX_MAX_CONNECTIONS)
            .and_then(|n| usize::try_from(n).ok());
    }
    if let Some(n) = table.get("max_streams_per_connection") {
        let streams = reader::integer(
            sink,
            n,
            "max_streams_per_connection",
            1,
            MAX_STREAMS_PER_CONNECTION,
        );
        if let Some(streams) = streams.and_then(|n| u32::try_from(n).ok()) {
            out.max_streams_per_connection = streams;
        }
    }
    if let Some(n) = table.get("max_requests_in_flight") {
        out.max_requests_in_flight =
            reader::integer(sink, n, "max_requests_in_flight", 1, MAX_MAX_CONNECTIONS)
                .and_then(|n| usize::try_from(n).ok());
    }
    if let Some(n) = table.get("max_requests_in_flight_per_client") {
        let key = "max_requests_in_flight_per_client";
        let per_client = reader::integer(sink, n, key, 1, MAX_MAX_CONNECTIONS)
            .and_then(|n| usize::try_from(n).ok());
        match (per_client, out.max_requests_in_flight) {
            (Some(share), Some(max)) if share > max => sink.error_hint(
                n.pos,
                format!("`{key}` is {share}, more than `max_requests_in_flight` ({max})"),
                "one client can hold at most every place; set it equal to \
                 `max_requests_in_flight` to turn sharing off",
            ),
            _ => out.max_requests_in_flight_per_client = per_client,
        }
    }
    out
}
