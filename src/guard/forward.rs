//! What the origin is told about a request: the headers robotsguard removes because a client may
//! not send them, and the `X-Forwarded-*` and `X-Request-Id` headers it sets.

use std::cell::RefCell;
use std::net::{IpAddr, Ipv4Addr};
use std::thread::LocalKey;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use pingora::http::RequestHeader;
use pingora::proxy::Session;
use pingora::{Error, ErrorType, Result};

use super::request::{is_tls, request_host, UNKNOWN_CLIENT};

pub(super) const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
pub(super) const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
pub(super) const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
pub(super) const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// At most the four headers [`forward`] sets.
const FORWARDING_HEADERS: usize = 4;

/// Headers through which a client could claim another address or re-route the request after
/// the decision. The `X-Forwarded-*` trio is replaced separately.
fn is_client_address_header(name: &str) -> bool {
    // A `match` compiles to a comparison of lengths first: every header name of every proxied
    // request is asked.
    matches!(
        name,
        "x-real-ip" | "forwarded" | "true-client-ip" | "x-client-ip" | "cf-connecting-ip"
    )
}

/// Headers a client's `Connection` header cannot take from the origin: what the decision was made
/// on, and the forwarding headers robotsguard sets (or keeps from a trusted proxy). A client
/// that nominates one (`Connection: user-agent`) would otherwise have the origin act on a
/// request without it.
const PROTECTED_FROM_NOMINATION: [&str; 8] = [
    "user-agent",
    "host",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
    "x-request-id",
    "x-real-ip",
    "forwarded",
];

/// `Connection` tokens read per request at most; beyond them a client only keeps headers of its
/// own that it could as well have sent without nominating them.
const MAX_NOMINATIONS: usize = 32;

/// The headers the client's `Connection` header nominates as hop-by-hop, to be removed before the
/// request goes upstream, less those in [`PROTECTED_FROM_NOMINATION`] (ignored: the origin still
/// gets them). Tokens that are not header names are ignored, as RFC 9110 lets a recipient do.
pub(super) fn connection_nominations(request: &RequestHeader) -> Vec<HeaderName> {
    let mut nominated = Vec::new();
    let tokens = request
        .headers
        .get_all(http::header::CONNECTION)
        .iter()
        .flat_map(|value| value.as_bytes().split(|&b| b == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|token| !token.is_empty())
        .take(MAX_NOMINATIONS);
    for token in tokens {
        let Ok(name) = HeaderName::from_bytes(token) else {
            continue;
        };
        // `close` and `keep-alive` name connection options, not headers (and pingora removes
        // the standard hop-by-hop headers itself).
        if PROTECTED_FROM_NOMINATION.contains(&name.as_str())
            || matches!(name.as_str(), "close" | "keep-alive" | "upgrade")
        {
            continue;
        }
        if !nominated.contains(&name) {
            nominated.push(name);
        }
    }
    nominated
}

/// Some frameworks (IIS URL Rewrite, Symfony, Zend) route on these instead of the request line.
fn is_rerouting_header(name: &str) -> bool {
    matches!(name, "x-original-url" | "x-rewrite-url")
}

/// Removes what a client may not tell the origin: other client addresses and its own
/// `X-Request-Id` (unless the peer is a trusted proxy, whose own headers they may be; with the
/// access log on, robotsguard sets its own id), re-routing headers (always), and underscore
/// spellings of any of these or of the headers robotsguard sets (always: CGI-style servers such
/// as gunicorn and wsgiref read `X_Forwarded_For` as `X-Forwarded-For`). One pass over the header
/// names, since most requests carry none of them.
fn strip_client_forwarding_headers(headers: &mut HeaderMap, peer_trusted: bool) {
    let mut found: Vec<HeaderName> = Vec::new();
    for name in headers.keys() {
        let name_text = name.as_str();
        // A byte loop: `str::contains` goes through a search made for longer texts.
        let remove = if name_text.bytes().any(|byte| byte == b'_') {
            let dashed = name_text.replace('_', "-");
            is_client_address_header(&dashed)
                || is_rerouting_header(&dashed)
                || [
                    X_FORWARDED_FOR,
                    X_FORWARDED_PROTO,
                    X_FORWARDED_HOST,
                    X_REQUEST_ID,
                ]
                .iter()
                .any(|ours| ours.as_str().eq_ignore_ascii_case(&dashed))
        } else {
            (!peer_trusted && (is_client_address_header(name_text) || *name == X_REQUEST_ID))
                || is_rerouting_header(name_text)
        };
        if remove {
            found.push(name.clone());
        }
    }
    for name in found {
        headers.remove(&name);
    }
}

/// The admin console's session cookie, under either name: a browser sends it to every port of
/// the host that set it, so to a site proxied on the same host too.
const CONSOLE_COOKIES: [&[u8]; 2] = [b"robotsguard_session", b"__Host-robotsguard_session"];

/// Removes the admin console's session cookie from the `Cookie` headers an origin would get
/// (it would hand the origin an admin session), leaving every other cookie byte for byte; a
/// `Cookie` header left empty goes. Requests without it cost one substring search per `Cookie`
/// header.
fn strip_console_session(headers: &mut HeaderMap) {
    let finder = memchr::memmem::Finder::new(b"robotsguard_session");
    let carries = headers
        .get_all(http::header::COOKIE)
        .iter()
        .any(|value| finder.find(value.as_bytes()).is_some());
    if !carries {
        return;
    }
    let kept: Vec<HeaderValue> = headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|value| without_console_session(value.as_bytes()))
        .filter_map(|value| HeaderValue::from_bytes(&value).ok())
        .collect();
    headers.remove(http::header::COOKIE);
    for value in kept {
        headers.append(http::header::COOKIE, value);
    }
}

/// A `Cookie` value without the console's session cookie: `None` when nothing else is left.
/// The other pairs keep their bytes; the separator before a removed pair goes with it.
fn without_console_session(value: &[u8]) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = Vec::with_capacity(value.len());
    for pair in value.split(|&b| b == b';') {
        let name = pair
            .split(|&b| b == b'=')
            .next()
            .unwrap_or_default()
            .trim_ascii();
        if CONSOLE_COOKIES.contains(&name) {
            continue;
        }
        if !out.is_empty() {
            out.push(b';');
        }
        out.extend_from_slice(pair);
    }
    // A first pair removed leaves the next one's leading space.
    let start = out.iter().position(|b| !b.is_ascii_whitespace())?;
    out.drain(..start);
    Some(out)
}

/// All values of a header, joined with `, ` as one (a proxy chain may send several lines).
fn joined_header(headers: &HeaderMap, name: &HeaderName) -> Option<Vec<u8>> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    let mut joined = first.as_bytes().to_vec();
    for value in values {
        joined.extend_from_slice(b", ");
        joined.extend_from_slice(value.as_bytes());
    }
    Some(joined)
}

/// What the origin is told about where a request came from.
pub(super) struct Forwarding<'a> {
    /// The peer is a trusted proxy: its `X-Forwarded-*` headers are kept and extended.
    pub peer_trusted: bool,
    /// The address appended to `X-Forwarded-For`: the peer for a trusted proxy, else the client.
    pub from: Option<IpAddr>,
    pub tls: bool,
    /// The Host the request was routed by.
    pub host: &'a [u8],
    /// The same, when it came as the request's `Host` header: sent as `X-Forwarded-Host` as it is.
    pub host_header: Option<&'a HeaderValue>,
    pub request_id: Option<&'a HeaderValue>,
    /// Headers the client nominated as hop-by-hop ([`connection_nominations`]).
    pub nominated: &'a [HeaderName],
}

/// Makes the request what the origin should act on: `target` (when set) as its request target,
/// no header through which the client could claim another address or re-route it, and the
/// `X-Forwarded-*` and `X-Request-Id` headers of `facts`.
///
/// The header map is edited directly rather than through `RequestHeader::insert_header`, which
/// on every call parses the name into a new `HeaderName` and inserts into a second map of
/// original-case names, and which cannot reserve room: a request that arrived with few headers
/// grew both maps on each insert, the largest per-request cost robotsguard added to pingora.
/// Header names therefore reach the origin lower-cased (pingora title-cases a dozen standard ones
/// such as `Host`), as they already do for every HTTP/2 client; field names are case-insensitive
/// (RFC 9110, section 5.1).
pub(super) fn forward(
    request: &mut RequestHeader,
    target: Option<&[u8]>,
    facts: &Forwarding<'_>,
) -> Result<()> {
    let taken = std::mem::replace(
        request,
        RequestHeader::from(http::Request::new(()).into_parts().0),
    );
    // A target the URI does not reproduce byte for byte (not UTF-8, say) is set again below.
    let received_target = (target.is_none() && taken.raw_path() != uri_target(&taken.uri))
        .then(|| taken.raw_path().to_vec());
    let end_stream = taken.send_end_stream();
    let mut parts = http::request::Parts::from(taken);
    // Whatever happens, the request is put back whole; an error then fails it.
    let edited = set_forwarding_headers(&mut parts.headers, facts);
    *request = RequestHeader::from(parts);
    if let Some(target) = target.or(received_target.as_deref()) {
        request.set_raw_path(target)?;
    }
    if let Some(end_stream) = end_stream {
        request.set_send_end_stream(end_stream);
    }
    edited
}

fn set_forwarding_headers(headers: &mut HeaderMap, facts: &Forwarding<'_>) -> Result<()> {
    headers.try_reserve(FORWARDING_HEADERS).map_err(too_many)?;
    for name in facts.nominated {
        headers.remove(name);
    }
    strip_client_forwarding_headers(headers, facts.peer_trusted);
    strip_console_session(headers);
    // From a trusted proxy, its X-Forwarded-For chain grows by the peer, and the scheme and host
    // it saw are kept; from anyone else, all three are ours alone.
    let existing = facts
        .peer_trusted
        .then(|| joined_header(headers, &X_FORWARDED_FOR))
        .flatten();
    let forwarded_for = match existing {
        Some(existing) => forwarded_for(Some(&existing), facts.from),
        None => client_forwarded_for(facts.from),
    }
    .map_err(|e| Error::because(ErrorType::InvalidHTTPHeader, "X-Forwarded-For", e))?;
    headers
        .try_insert(X_FORWARDED_FOR, forwarded_for)
        .map_err(too_many)?;
    if !(facts.peer_trusted && headers.contains_key(X_FORWARDED_PROTO)) {
        let proto = HeaderValue::from_static(if facts.tls { "https" } else { "http" });
        headers
            .try_insert(X_FORWARDED_PROTO, proto)
            .map_err(too_many)?;
    }
    if !(facts.peer_trusted && headers.contains_key(X_FORWARDED_HOST)) {
        let host = match facts.host_header {
            Some(host) => host.clone(),
            // An HTTP/2 request's host is its `:authority`, not a header value to share.
            None => forwarded_host(facts.host)
                .map_err(|e| Error::because(ErrorType::InvalidHTTPHeader, "X-Forwarded-Host", e))?,
        };
        headers
            .try_insert(X_FORWARDED_HOST, host)
            .map_err(too_many)?;
    }
    if let Some(id) = facts.request_id {
        headers
            .try_insert(X_REQUEST_ID, id.clone())
            .map_err(too_many)?;
    }
    Ok(())
}

/// The request target as the URI alone reproduces it (what `RequestHeader::raw_path` falls back
/// to).
fn uri_target(uri: &http::Uri) -> &[u8] {
    uri.path_and_query()
        .map(|path| path.as_str().as_bytes())
        .or_else(|| {
            uri.authority()
                .map(|authority| authority.as_str().as_bytes())
        })
        .unwrap_or_default()
}

fn too_many(_: http::header::MaxSizeReached) -> Box<Error> {
    Error::explain(ErrorType::InvalidHTTPHeader, "too many request headers")
}

/// The robots.txt URL a client should read: the scheme and host it used (as a trusted proxy
/// forwarded them, else as this connection shows them).
pub(super) fn robots_url(session: &Session, peer_trusted: bool) -> String {
    robots_url_of(session.req_header(), peer_trusted, is_tls(session))
}

/// [`robots_url`] for `request`, received over TLS when `tls`: shared by the proxy and the
/// decision listener (which judges a request a front proxy forwarded).
pub(crate) fn robots_url_of(request: &RequestHeader, peer_trusted: bool, tls: bool) -> String {
    let forwarded = |name: HeaderName| {
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
        _ if tls => "https",
        _ => "http",
    };
    let host = match forwarded(X_FORWARDED_HOST)
        .filter(|host| crate::snapshot::normalize_host(host.as_bytes()).is_some())
    {
        Some(forwarded) => std::borrow::Cow::Borrowed(forwarded),
        // The Host routed, so it is a valid host[:port]; keep the port the client used.
        None => String::from_utf8_lossy(request_host(request).unwrap_or_default().trim_ascii()),
    };
    // One buffer rather than `format!`: every blocked request names its robots.txt.
    let mut url = String::with_capacity(scheme.len() + host.len() + 14);
    for part in [scheme, "://", &host, "/robots.txt"] {
        url.push_str(part);
    }
    url
}

/// The `X-Request-Id` of a request: kept from a trusted proxy, else a new one.
pub(crate) fn request_id(request: &RequestHeader, peer_trusted: bool) -> HeaderValue {
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

/// Header values a worker thread built last, each with what it was built from, one per slot:
/// every request of a kept-alive connection sends the same `X-Forwarded-For` (from an untrusted
/// peer) and the same `X-Forwarded-Host`, and a clone of a remembered value is a reference count
/// where building it is an allocation or two and a validation. Bounded by its slots, whatever
/// the clients do.
struct RecentValues<K, const SLOTS: usize>([Option<(K, HeaderValue)>; SLOTS]);

impl<K, const SLOTS: usize> RecentValues<K, SLOTS> {
    const fn new() -> Self {
        RecentValues([const { None }; SLOTS])
    }
}

/// The value remembered in `slot` of `recent` if `is_it` says it is the one wanted, else
/// `build()`'s (then remembered in that slot).
fn remembered<K, const SLOTS: usize>(
    recent: &'static LocalKey<RefCell<RecentValues<K, SLOTS>>>,
    slot: usize,
    is_it: impl Fn(&K, &HeaderValue) -> bool,
    build: impl FnOnce() -> Result<(K, HeaderValue), http::header::InvalidHeaderValue>,
) -> Result<HeaderValue, http::header::InvalidHeaderValue> {
    let slot = slot % SLOTS;
    let found = recent.with_borrow(|recent| match &recent.0[slot] {
        Some((built_from, value)) if is_it(built_from, value) => Some(value.clone()),
        _ => None,
    });
    if let Some(value) = found {
        return Ok(value);
    }
    let (built_from, value) = build()?;
    recent.with_borrow_mut(|recent| recent.0[slot] = Some((built_from, value.clone())));
    Ok(value)
}

thread_local! {
    /// By client address: a worker serves a few clients' connections at once.
    static RECENT_CLIENTS: RefCell<RecentValues<Option<IpAddr>, 8>> =
        const { RefCell::new(RecentValues::new()) };
    /// Hosts that came as no header (an HTTP/2 `:authority`), each its own value's bytes. Only
    /// routed hosts get here; most deployments serve a few.
    static RECENT_HOSTS: RefCell<RecentValues<(), 4>> =
        const { RefCell::new(RecentValues::new()) };
}

/// The `X-Forwarded-For` value for `client` alone (a request with no chain to extend), as
/// [`forwarded_for`] builds it.
fn client_forwarded_for(
    client: Option<IpAddr>,
) -> Result<HeaderValue, http::header::InvalidHeaderValue> {
    let slot = match client {
        Some(IpAddr::V4(ip)) => ip.to_bits() as usize,
        Some(IpAddr::V6(ip)) => (ip.to_bits() ^ (ip.to_bits() >> 64)) as usize,
        None => 0,
    };
    remembered(
        &RECENT_CLIENTS,
        slot,
        |built_from, _| *built_from == client,
        || Ok((client, forwarded_for(None, client)?)),
    )
}

/// `host` as an `X-Forwarded-Host` value.
fn forwarded_host(host: &[u8]) -> Result<HeaderValue, http::header::InvalidHeaderValue> {
    let slot = host.len() + usize::from(host.last().copied().unwrap_or(0));
    remembered(
        &RECENT_HOSTS,
        slot,
        |_, value| value.as_bytes() == host,
        || Ok(((), HeaderValue::from_bytes(host)?)),
    )
}

/// The `X-Forwarded-For` value to send upstream: the client's own value, if it sent one, with the
/// client's address (or `unknown`, for a Unix-socket client) appended. Every request that is
/// proxied pays for this, so it is built in one buffer without the formatting machinery; the
/// client's value is kept byte for byte (it was a valid header value, and so is the result).
pub(super) fn forwarded_for(
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

    /// The request as pingora writes it to an HTTP/1.1 origin.
    fn wire(request: &RequestHeader) -> String {
        let mut out = bytes::BytesMut::new();
        request.header_to_h1_wire(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    fn facts(peer_trusted: bool) -> Forwarding<'static> {
        Forwarding {
            peer_trusted,
            from: Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7))),
            tls: true,
            host: b"shop.example",
            host_header: None,
            request_id: None,
            nominated: &[],
        }
    }

    #[test]
    fn connection_tokens_never_take_the_user_agent_host_or_forwarding_headers() {
        let mut upstream = request(
            b"/",
            &[
                ("Host", "shop.example"),
                ("User-Agent", "GPTBot/1.2"),
                (
                    "Connection",
                    "keep-alive, User-Agent, HOST, x-forwarded-for, X-Request-Id, forwarded",
                ),
                (
                    "Connection",
                    "x-real-ip, X-Secret, x-forwarded-proto, x-forwarded-host",
                ),
                ("X-Secret", "1"),
            ],
        );
        let nominated = connection_nominations(&upstream);
        assert_eq!(nominated, [HeaderName::from_static("x-secret")]);
        let facts = Forwarding {
            nominated: &nominated,
            ..facts(false)
        };
        forward(&mut upstream, None, &facts).expect("forwarded");
        let text = wire(&upstream);
        assert!(text.contains("user-agent: GPTBot/1.2\r\n"), "{text}");
        assert!(
            text.to_ascii_lowercase().contains("host: shop.example\r\n"),
            "{text}"
        );
        assert!(text.contains("x-forwarded-for: 192.0.2.7\r\n"), "{text}");
        assert!(!text.contains("x-secret"), "{text}");
        // Hostile lists are read only so far.
        let many: Vec<String> = (0..1000).map(|i| format!("x-h{i}")).collect();
        let hostile = request(b"/", &[("Connection", &many.join(","))]);
        assert_eq!(connection_nominations(&hostile).len(), MAX_NOMINATIONS);
    }

    fn request(target: &[u8], headers: &[(&str, &str)]) -> RequestHeader {
        let mut request = RequestHeader::build("GET", target, None).expect("a valid request");
        for (name, value) in headers {
            request
                .append_header(name.to_string(), *value)
                .expect("a valid header");
        }
        request
    }

    #[test]
    fn forwarding_sets_ours_and_keeps_every_other_header_and_value() {
        let mut upstream = request(
            b"/cart?id=7",
            &[
                ("Host", "shop.example"),
                ("Accept", "text/html"),
                ("X-Custom-Thing", "one"),
                ("x-custom-thing", "two"),
                ("X-Forwarded-For", "203.0.113.9"),
                ("X-Real-IP", "203.0.113.9"),
                ("X_Forwarded_Host", "evil.example"),
                ("X-Original-URL", "/admin"),
                ("X-Request-Id", "chosen-by-the-client"),
            ],
        );
        forward(&mut upstream, None, &facts(false)).expect("forwarded");
        assert_eq!(upstream.raw_path(), b"/cart?id=7");
        assert_eq!(
            wire(&upstream),
            "Host: shop.example\r\n\
             accept: text/html\r\n\
             x-custom-thing: one\r\n\
             x-custom-thing: two\r\n\
             x-forwarded-for: 192.0.2.7\r\n\
             x-forwarded-proto: https\r\n\
             x-forwarded-host: shop.example\r\n"
        );
    }

    #[test]
    fn the_consoles_session_cookie_never_reaches_the_origin_and_others_stay_byte_for_byte() {
        for (sent, kept) in [
            ("a=1; robotsguard_session=x; b=2", Some("a=1; b=2")),
            ("robotsguard_session=x; a=1", Some("a=1")),
            ("a=1;robotsguard_session=x", Some("a=1")),
            ("__Host-robotsguard_session=x;  b=2", Some("b=2")),
            ("robotsguard_session=x", None),
            (
                "xrobotsguard_session=1; robotsguard_sessions=2",
                Some("xrobotsguard_session=1; robotsguard_sessions=2"),
            ),
            ("a=1 ;  b = 2", Some("a=1 ;  b = 2")),
        ] {
            assert_eq!(
                without_console_session(sent.as_bytes())
                    .map(|v| String::from_utf8(v).expect("text")),
                kept.map(str::to_string),
                "{sent}"
            );
        }
        let mut upstream = request(
            b"/",
            &[
                ("Host", "shop.example"),
                ("Cookie", "cart=7; robotsguard_session=abc"),
                ("Cookie", "__Host-robotsguard_session=def"),
                ("Cookie", "theme=dark"),
            ],
        );
        forward(&mut upstream, None, &facts(false)).expect("forwarded");
        let cookies: Vec<&str> = upstream
            .headers
            .get_all("cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        assert_eq!(cookies, ["cart=7", "theme=dark"]);
        let mut untouched = request(b"/", &[("Host", "shop.example"), ("Cookie", "a=1;b=2")]);
        forward(&mut untouched, None, &facts(false)).expect("forwarded");
        assert_eq!(
            untouched.headers.get("cookie").map(|v| v.as_bytes()),
            Some(b"a=1;b=2".as_slice())
        );
    }

    #[test]
    fn an_untrusted_clients_request_id_is_replaced_by_ours_or_removed() {
        let ours = HeaderValue::from_static("ours");
        for (peer_trusted, request_id, want) in [
            (false, Some(&ours), Some("ours")),
            (false, None, None),
            (true, Some(&ours), Some("ours")),
            (true, None, Some("the-balancers")),
        ] {
            let mut upstream = request(b"/", &[("X-Request-Id", "the-balancers")]);
            let facts = Forwarding {
                request_id,
                ..facts(peer_trusted)
            };
            forward(&mut upstream, None, &facts).expect("forwarded");
            let sent: Vec<&[u8]> = upstream
                .headers
                .get_all(X_REQUEST_ID)
                .iter()
                .map(HeaderValue::as_bytes)
                .collect();
            let want: Vec<&[u8]> = want.map(str::as_bytes).into_iter().collect();
            assert_eq!(sent, want, "trusted: {peer_trusted}, ours: {request_id:?}");
        }
    }

    #[test]
    fn the_host_header_is_forwarded_as_x_forwarded_host_byte_for_byte() {
        // A Host value beyond ASCII is a valid header value; it goes on as it came.
        let received = HeaderValue::from_bytes(b"shop.example:8080\xe9").expect("a header value");
        let mut upstream = request(b"/", &[]);
        let with_header = Forwarding {
            host: received.as_bytes(),
            host_header: Some(&received),
            ..facts(false)
        };
        forward(&mut upstream, None, &with_header).expect("forwarded");
        assert_eq!(upstream.headers.get(X_FORWARDED_HOST), Some(&received));
        // Without the header (an HTTP/2 authority), the routed host's bytes are sent.
        let mut upstream = request(b"/", &[]);
        forward(&mut upstream, None, &facts(false)).expect("forwarded");
        assert_eq!(
            upstream
                .headers
                .get(X_FORWARDED_HOST)
                .map(HeaderValue::as_bytes),
            Some(&b"shop.example"[..])
        );
    }

    #[test]
    fn a_trusted_proxys_chain_grows_and_its_scheme_and_host_are_kept() {
        let mut upstream = request(
            b"/",
            &[
                ("X-Forwarded-For", "203.0.113.9"),
                ("X-Forwarded-For", "198.51.100.1"),
                ("X-Forwarded-Proto", "http"),
                ("X-Forwarded-Host", "www.shop.example"),
                ("X-Real-IP", "203.0.113.9"),
                ("X_Forwarded_For", "10.0.0.1"),
            ],
        );
        let id = HeaderValue::from_static("abc");
        let trusted = Forwarding {
            request_id: Some(&id),
            ..facts(true)
        };
        forward(&mut upstream, None, &trusted).expect("forwarded");
        let text = wire(&upstream);
        assert!(
            text.contains("x-forwarded-for: 203.0.113.9, 198.51.100.1, 192.0.2.7\r\n"),
            "{text}"
        );
        assert!(text.contains("x-forwarded-proto: http\r\n"), "{text}");
        assert!(
            text.contains("x-forwarded-host: www.shop.example\r\n"),
            "{text}"
        );
        assert!(text.contains("x-real-ip: 203.0.113.9\r\n"), "{text}");
        assert!(text.contains("x-request-id: abc\r\n"), "{text}");
        assert!(!text.contains("10.0.0.1"), "{text}");
    }

    #[test]
    fn the_target_goes_upstream_byte_for_byte_or_as_decided() {
        for target in [&b"/caf\xe9/menu?q=\xff"[..], b"/a%2Fb?x=%FF"] {
            let mut upstream = request(target, &[("Host", "shop.example")]);
            forward(&mut upstream, None, &facts(false)).expect("forwarded");
            assert_eq!(
                upstream.raw_path(),
                target,
                "{}",
                String::from_utf8_lossy(target)
            );
        }
        let mut upstream = request(b"http://shop.example/a/../b", &[("Host", "shop.example")]);
        forward(&mut upstream, Some(b"/b"), &facts(false)).expect("forwarded");
        assert_eq!(upstream.raw_path(), b"/b");
    }

    #[test]
    fn a_remembered_forwarded_for_is_always_the_clients_own() {
        // More addresses than slots, in an order that makes them share slots and come back to
        // them: each answer must be built for its own address, never a slot-mate's.
        let clients: Vec<Option<IpAddr>> = (0..40u32)
            .map(|n| Some(IpAddr::V4(Ipv4Addr::from_bits(0xC000_0200 + n * 8))))
            .chain(
                (0..40u16)
                    .map(|n| Some(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, n, 8)))),
            )
            .chain([None, Some(IpAddr::V4(Ipv4Addr::new(0, 0, 0, 0)))])
            .collect();
        for _ in 0..3 {
            for (index, client) in clients.iter().enumerate() {
                let built = forwarded_for(None, *client).expect("a valid value");
                let remembered = client_forwarded_for(*client).expect("a valid value");
                assert_eq!(remembered, built, "client {index}: {client:?}");
            }
        }
    }

    #[test]
    fn a_remembered_forwarded_host_is_always_the_requests_own() {
        // Hosts that share slots (equal lengths, equal last bytes) and come back to them.
        let hosts: Vec<Vec<u8>> = (0..12)
            .map(|n| format!("shop{n}.example").into_bytes())
            .chain((0..12).map(|n| format!("{}.example:8443", "a".repeat(n)).into_bytes()))
            .collect();
        for _ in 0..3 {
            for host in &hosts {
                let remembered = forwarded_host(host).expect("a valid value");
                assert_eq!(remembered.as_bytes(), host.as_slice());
            }
        }
        assert!(forwarded_host(b"bad\nhost").is_err());
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
