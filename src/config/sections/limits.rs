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
        key("max_connections", Ty::Int { min: 1, max: crate::config::schema::MAX_MAX_CONNECTIONS }, "half of what the open-files limit leaves after 256 reserved descriptors, at most 10,000", "Client connections at once; at the cap a new connection closes the one that has waited longest without a request in progress, or is closed when every one is busy."),
        key("handshake_timeout", Ty::Duration, "`10s`", "A TLS handshake (and the PROXY header before it) must finish within this of the connection's start."),
        key("max_streams_per_connection", Ty::Int { min: 1, max: crate::config::schema::MAX_STREAMS_PER_CONNECTION }, "`100`", "HTTP/2 streams one connection may have open at once (advertised in SETTINGS); more are refused with `REFUSED_STREAM`."),
        key("max_requests_in_flight", Ty::Int { min: 1, max: crate::config::schema::MAX_MAX_CONNECTIONS }, "four times `max_connections`, within what the open-files limit leaves, at most 1,024", "Requests served at once in the process (a head over 8 KiB takes one more place per 8 KiB); more get `REFUSED_STREAM` (HTTP/2) or `503` with `Retry-After: 1` (HTTP/1)."),
        key("max_requests_in_flight_per_client", Ty::Int { min: 1, max: crate::config::schema::MAX_MAX_CONNECTIONS }, "an eighth of `max_requests_in_flight`, at least 8 (all of it, below 8)", "Places one client holds at most: an IPv4 address or an IPv6 /64, as the connection layer knows it (the peer, or a trusted peer's PROXY header); each connection of a peer in `trusted_proxies` that sends no PROXY header counts as a client of its own. Under load a client holds less: once more than half the places are taken, one that holds places takes another only while at least four times its holding stays free, and its first request may take any free place, so a newcomer is served beside one or many flooding clients (with the defaults, ten leave it dozens of places). More get `REFUSED_STREAM` or `503`; at most `max_requests_in_flight`, which turns sharing off."),
    ],
};
