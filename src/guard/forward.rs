//! What the origin is told about a request: the headers robotsguard removes because a client may
//! not send them, and the `X-Forwarded-*` and `X-Request-Id` headers it sets.

use std::net::{IpAddr, Ipv4Addr};

use bytes::Bytes;
use http::HeaderValue;
use pingora::http::RequestHeader;
use pingora::proxy::Session;

use super::request::{is_tls, request_host, UNKNOWN_CLIENT};

// Names as text, as they go on the wire: pingora keeps a text name as it is, but copies the name
// of a non-standard `HeaderName` into a new buffer on every insert.
pub(super) const X_FORWARDED_FOR: &str = "X-Forwarded-For";
pub(super) const X_FORWARDED_PROTO: &str = "X-Forwarded-Proto";
pub(super) const X_FORWARDED_HOST: &str = "X-Forwarded-Host";
pub(super) const X_REQUEST_ID: &str = "X-Request-Id";

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
pub(super) fn strip_client_forwarding_headers(request: &mut RequestHeader, peer_trusted: bool) {
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

/// All values of a header, joined with `, ` as one (a proxy chain may send several lines).
pub(super) fn joined_header(request: &RequestHeader, name: &str) -> Option<Vec<u8>> {
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
pub(super) fn robots_url(session: &Session, peer_trusted: bool) -> String {
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
pub(super) fn request_id(request: &RequestHeader, peer_trusted: bool) -> HeaderValue {
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
