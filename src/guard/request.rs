//! Reading a client's request: which host it is for, how it names its resource, whether it may
//! keep its connection, and where it comes from.

use std::net::IpAddr;

use http::{HeaderMap, HeaderValue};
use pingora::http::RequestHeader;
use pingora::proxy::Session;

/// Longest User-Agent accepted. Real ones are well under 1 KB; cutting longer ones instead would
/// let a crawler hide its name behind padding, and scanning them whole would let a client make
/// every request expensive, so they are refused with 431.
pub(crate) const MAX_USER_AGENT: usize = 8 * 1024;

/// The Host a request is for: the HTTP/2 `:authority` when present, else the Host header (for an
/// HTTP/1 absolute-form target pingora has already checked that the two agree). A request carrying
/// two Host headers is refused (returns `None`).
pub(crate) fn request_host(request: &RequestHeader) -> Option<&[u8]> {
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

/// The Host the request is routed by, as [`request_host`] reads it, from the `Host` value
/// [`HeaderScan::host_header`] already found when there is one.
pub(crate) fn routed_host<'a>(
    host_header: Option<&'a HeaderValue>,
    request: &'a RequestHeader,
) -> Option<&'a [u8]> {
    host_header
        .map(HeaderValue::as_bytes)
        .or_else(|| request_host(request))
}

const SEC_FETCH_DEST: http::HeaderName = http::HeaderName::from_static("sec-fetch-dest");
const SEC_FETCH_SITE: http::HeaderName = http::HeaderName::from_static("sec-fetch-site");

/// What [`super::Guard::request_filter`] reads of the request's header names, in one pass over
/// the headers rather than a hashed lookup per name (most requests carry a handful of headers).
pub(crate) struct HeaderScan<'a> {
    /// The first `User-Agent` value.
    pub user_agent: Option<&'a HeaderValue>,
    /// How many `User-Agent` values there are.
    pub user_agents: usize,
    /// A Web Bot Auth `Signature-Input` is there.
    pub signature_input: bool,
    /// A `Connection` header is there (it may nominate headers as hop-by-hop).
    pub connection: bool,
    /// The first `Host` value, and how many there are.
    pub host: Option<&'a HeaderValue>,
    pub hosts: usize,
    /// The first `Sec-Fetch-Dest`, `Sec-Fetch-Site`, `Accept` and `Referer` values: what a
    /// browser says caused the request (a ban never stands on what another site's page made a
    /// visitor's browser send).
    pub fetch: crate::judge::Fetch<'a>,
}

impl<'a> HeaderScan<'a> {
    /// The `Host` header that names the request's host, as [`request_host`] reads it: the one
    /// `Host` value when the target carries no authority (an HTTP/2 `:authority` or an
    /// absolute-form target comes first).
    pub(crate) fn host_header(&self, request: &RequestHeader) -> Option<&'a HeaderValue> {
        if request.uri.authority().is_some() || self.hosts != 1 {
            return None;
        }
        self.host
    }
}

pub(crate) fn scan_headers(headers: &HeaderMap) -> HeaderScan<'_> {
    let mut scan = HeaderScan {
        user_agent: None,
        user_agents: 0,
        signature_input: false,
        connection: false,
        host: None,
        hosts: 0,
        fetch: crate::judge::Fetch::default(),
    };
    for (name, value) in headers {
        if *name == http::header::USER_AGENT {
            scan.user_agents += 1;
            scan.user_agent.get_or_insert(value);
        } else if *name == http::header::HOST {
            scan.hosts += 1;
            scan.host.get_or_insert(value);
        } else if *name == http::header::CONNECTION {
            scan.connection = true;
        } else if *name == http::header::ACCEPT {
            scan.fetch.accept.get_or_insert(value.as_bytes());
        } else if *name == http::header::REFERER {
            scan.fetch.referer.get_or_insert(value.as_bytes());
        } else if *name == super::SIGNATURE_INPUT {
            scan.signature_input = true;
        } else if *name == SEC_FETCH_DEST {
            scan.fetch.dest.get_or_insert(value.as_bytes());
        } else if *name == SEC_FETCH_SITE {
            scan.fetch.site.get_or_insert(value.as_bytes());
        }
    }
    scan
}

/// The request target's path and query (`/` when it has none, as for `*`).
pub(crate) fn request_path(request: &RequestHeader) -> &str {
    request.uri.path_and_query().map_or("/", |p| p.as_str())
}

/// How a request names its resource (RFC 9112 §3.2), for the forms robotsguard accepts.
pub(crate) enum Target<'a> {
    /// `/path?query`, or the path and query of an absolute-form target.
    Path(&'a [u8]),
    /// `http://host/path`: decided on its path, forwarded in origin-form.
    Absolute(&'a [u8]),
    /// `OPTIONS *`: about the server as a whole; decided as `/`.
    Asterisk,
}

impl Target<'_> {
    pub(crate) fn decided_path(&self) -> &[u8] {
        match self {
            Target::Path(path) | Target::Absolute(path) => path,
            Target::Asterisk => b"/",
        }
    }
}

/// The request's target, if it has one of the forms robotsguard proxies: origin-form,
/// absolute-form with an http(s) scheme, or `*` for OPTIONS. Anything else (`private`,
/// `./x`, `?x`, `host/x`, `GET *`) would be read differently by different origins.
pub(crate) fn request_target(request: &RequestHeader) -> Option<Target<'_>> {
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

/// Request bodies up to this size are drained after robotsguard answers, so the connection stays
/// usable; a larger body closes the connection instead of being read.
const MAX_DRAINED_BODY: u64 = 1024 * 1024;

/// Whether the request's body (if any) is small enough to drain after answering it ourselves.
pub(super) fn body_is_drainable(request: &RequestHeader) -> bool {
    // Names as constants: a name given as text is parsed again on every lookup.
    if request
        .headers
        .contains_key(http::header::TRANSFER_ENCODING)
    {
        return false;
    }
    match request.headers.get(http::header::CONTENT_LENGTH) {
        None => true,
        Some(value) => std::str::from_utf8(value.as_bytes())
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
            .is_some_and(|length| length <= MAX_DRAINED_BODY),
    }
}

/// Whether the client asked to keep the connection open: HTTP/1.1 unless it sent
/// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`.
pub(super) fn client_keeps_alive(request: &RequestHeader) -> bool {
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

/// Whether the connection is TLS.
pub(super) fn is_tls(session: &Session) -> bool {
    session
        .digest()
        .is_some_and(|digest| digest.ssl_digest.is_some())
}

/// How logs and `X-Forwarded-For` name a client without an IP address (a Unix-socket client).
pub(super) const UNKNOWN_CLIENT: &str = "unknown";

/// The connection's peer address (after a PROXY header, the client it names); `None` for a
/// Unix-socket client.
/// The peer's address, IPv4-mapped IPv6 (`::ffff:a.b.c.d`, as an IPv4 client reaches a
/// dual-stack listener) as IPv4: one client must meet the same trust, bans, strikes, reads and
/// budgets whichever listener it came through.
pub(super) fn peer_ip(session: &Session) -> Option<IpAddr> {
    session
        .client_addr()
        .and_then(|addr| addr.as_inet())
        .map(|addr| addr.ip().to_canonical())
}

/// A client address as text, or [`UNKNOWN_CLIENT`].
pub(crate) fn client_text(client: Option<IpAddr>) -> String {
    match client {
        // Written octet by octet: `Ipv4Addr`'s `Display` goes through the formatter's machinery,
        // several times the cost, and every blocked request names its client.
        Some(IpAddr::V4(ip)) => {
            let mut text = String::with_capacity(15);
            for (index, octet) in ip.octets().into_iter().enumerate() {
                if index > 0 {
                    text.push('.');
                }
                text.push_str(itoa::Buffer::new().format(octet));
            }
            text
        }
        Some(ip) => ip.to_string(),
        None => UNKNOWN_CLIENT.to_string(),
    }
}
