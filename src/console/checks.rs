//! What every admin request passes before anything answers it: a `Host` the admin listener
//! answers to (so a page whose name was rebound to the listener's address cannot read it), and,
//! for a request that changes something, proof that it came from the console's own page or from
//! a client that is not a browser (so another site cannot make a browser act).

use std::net::{IpAddr, SocketAddr};

use pingora::http::RequestHeader;

/// Whether the request names a host the admin listener at `listener` answers to: an address of
/// the listener (an IP literal, any port; any IP literal when it listens on a wildcard
/// address), `localhost` when it accepts loopback connections, or a name in `hosts`
/// (`admin.hosts`, normalised). A request without any host is no browser's and passes; one with
/// two `Host` headers or a malformed one does not.
///
/// Why an IP literal is safe: DNS rebinding needs a name the attacker controls; a page on
/// another site that talks to `http://10.0.0.5:9090/` is cross-origin and cannot read the
/// answers (the state-changing requests it can send are [`provenance`]'s to refuse).
pub fn host_allowed(request: &RequestHeader, listener: SocketAddr, hosts: &[String]) -> bool {
    let mut values = request.headers.get_all(http::header::HOST).iter();
    let header = values.next();
    if values.next().is_some() {
        return false;
    }
    let authority = request.uri.authority().map(|a| a.as_str().as_bytes());
    header
        .map(http::HeaderValue::as_bytes)
        .into_iter()
        .chain(authority)
        .all(|raw| names_listener(raw, listener, hosts))
}

/// Whether one `Host` value (or request-target authority) is the listener's.
fn names_listener(raw: &[u8], listener: SocketAddr, hosts: &[String]) -> bool {
    let Some(host) = crate::config::normalize_host(raw) else {
        return false;
    };
    let literal = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(&host);
    if let Ok(ip) = literal.parse::<IpAddr>() {
        let wildcard = listener.ip().is_unspecified();
        return wildcard || ip.to_canonical() == listener.ip().to_canonical();
    }
    if host == "localhost" {
        return listener.ip().is_loopback() || listener.ip().is_unspecified();
    }
    hosts.iter().any(|name| *name == host)
}

/// What a request that may change something shows about where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provenance {
    /// A browser says it comes from a page of this admin listener (`Origin` equal to the
    /// `Host`, or `Sec-Fetch-Site: same-origin`).
    SameOrigin,
    /// No browser's: no `Origin`, no `Sec-Fetch-Site`, and a bearer token or no session cookie.
    /// A browser sends `Origin` with every cross-origin request that can change something, and
    /// cannot attach a bearer token to one without a CORS preflight, which the admin listener
    /// never grants.
    NotBrowser,
    /// A session cookie and no browser signal either way: needs the session's CSRF token.
    NeedsToken,
    /// Another site's (`Origin` of another host, `Origin: null`, `Sec-Fetch-Site: cross-site` or
    /// `same-site`): refused, CSRF token or not.
    Foreign,
}

/// Whether `method` may change something (everything but `GET`, `HEAD` and `OPTIONS`).
pub fn changes_state(method: &http::Method) -> bool {
    !matches!(
        *method,
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
    )
}

/// Where a state-changing request came from, as far as its headers tell.
pub fn provenance(request: &RequestHeader, has_session_cookie: bool) -> Provenance {
    let fetch_site = request
        .headers
        .get("sec-fetch-site")
        .map(|v| v.as_bytes().to_ascii_lowercase());
    if matches!(fetch_site.as_deref(), Some(b"cross-site" | b"same-site")) {
        return Provenance::Foreign;
    }
    if let Some(origin) = request.headers.get(http::header::ORIGIN) {
        return if origin_is_host(origin.as_bytes(), request) {
            Provenance::SameOrigin
        } else {
            Provenance::Foreign
        };
    }
    if fetch_site.as_deref() == Some(b"same-origin") {
        return Provenance::SameOrigin;
    }
    if fetch_site.is_none() && (super::access::bearer(request).is_some() || !has_session_cookie) {
        return Provenance::NotBrowser;
    }
    Provenance::NeedsToken
}

/// Whether `origin` (`scheme://host[:port]`) names the host and port the request was sent to.
fn origin_is_host(origin: &[u8], request: &RequestHeader) -> bool {
    let Ok(origin) = std::str::from_utf8(origin) else {
        return false;
    };
    let (scheme_port, authority) = if let Some(rest) = origin.strip_prefix("http://") {
        (80, rest)
    } else if let Some(rest) = origin.strip_prefix("https://") {
        (443, rest)
    } else {
        // `null` (a sandboxed or privacy-sensitive context) and anything else.
        return false;
    };
    let host = request
        .headers
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri.authority().map(|a| a.as_str()));
    let Some(host) = host else {
        return false;
    };
    match (split_authority(authority), split_authority(host)) {
        (Some((origin_host, origin_port)), Some((host, port))) => {
            origin_host.eq_ignore_ascii_case(host)
                && origin_port.unwrap_or(scheme_port) == port.unwrap_or(scheme_port)
        }
        _ => false,
    }
}

/// `host[:port]` or `[v6][:port]` split; `None` when the port is not a number or more follows.
fn split_authority(text: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = if text.starts_with('[') {
        let end = text.find(']')?;
        let rest = &text[end + 1..];
        let port = if rest.is_empty() {
            None
        } else {
            Some(rest.strip_prefix(':')?)
        };
        (&text[..=end], port)
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    if host.is_empty() || host.contains(['/', '@', '?', '#']) {
        return None;
    }
    let port = match port {
        Some(port) => Some(port.parse::<u16>().ok()?),
        None => None,
    };
    Some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, headers: &[(&str, &str)]) -> RequestHeader {
        let mut request = RequestHeader::build(method, b"/bans", None).expect("a request");
        for (name, value) in headers {
            request
                .append_header(name.to_string(), *value)
                .expect("a header");
        }
        request
    }

    fn allowed(host: &str, listener: &str, hosts: &[&str]) -> bool {
        let hosts: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
        host_allowed(
            &request("GET", &[("Host", host)]),
            listener.parse().expect("an address"),
            &hosts,
        )
    }

    #[test]
    fn only_the_listeners_own_names_pass() {
        let loopback = "127.0.0.1:9090";
        let wildcard = "0.0.0.0:9090";
        for host in [
            "127.0.0.1:9090",
            "127.0.0.1",
            "127.0.0.1:19090",
            "localhost:9090",
            "LOCALHOST",
            "localhost.",
        ] {
            assert!(allowed(host, loopback, &[]), "{host}");
        }
        for host in [
            "attacker.example",
            "attacker.example:9090",
            "127.0.0.2:9090",
            "10.0.0.5",
            "[::1]:9090",
            "",
            "a b",
            "localhost:x",
        ] {
            assert!(!allowed(host, loopback, &[]), "{host}");
        }
        // A wildcard listener is reached on any of the machine's addresses: the kubelet's
        // probes and Prometheus send the pod IP.
        for host in [
            "10.1.2.3:9090",
            "[fd00::7]:9090",
            "localhost:9090",
            "[::ffff:10.0.0.1]",
        ] {
            assert!(allowed(host, wildcard, &[]), "{host}");
        }
        assert!(!allowed("robotsguard-admin.edge.svc:9090", wildcard, &[]));
        assert!(allowed(
            "Robotsguard-Admin.edge.svc:9090",
            wildcard,
            &["robotsguard-admin.edge.svc"]
        ));
        assert!(!allowed("localhost", "10.0.0.5:9090", &[]));
        assert!(allowed("10.0.0.5", "10.0.0.5:9090", &[]));
        assert!(allowed("[::1]:9090", "[::1]:9090", &[]));
        // Two Host headers, or a target naming another host.
        let twice = request("GET", &[("Host", "127.0.0.1"), ("Host", "evil.example")]);
        assert!(!host_allowed(
            &twice,
            loopback.parse().expect("address"),
            &[]
        ));
        let mut absolute = request("GET", &[("Host", "127.0.0.1")]);
        absolute.set_uri(http::Uri::from_static("http://evil.example/bans"));
        assert!(!host_allowed(
            &absolute,
            loopback.parse().expect("address"),
            &[]
        ));
        let bare = RequestHeader::build("GET", b"/bans", None).expect("a request");
        assert!(host_allowed(&bare, loopback.parse().expect("address"), &[]));
    }

    #[test]
    fn a_change_needs_the_same_origin_or_no_browser_at_all() {
        let host = ("Host", "127.0.0.1:9090");
        type Case<'a> = (&'a [(&'a str, &'a str)], bool, Provenance);
        let cases: [Case; 12] = [
            (
                &[host, ("Origin", "http://127.0.0.1:9090")],
                true,
                Provenance::SameOrigin,
            ),
            (
                &[
                    ("Host", "admin.example"),
                    ("Origin", "https://admin.example"),
                ],
                true,
                Provenance::SameOrigin,
            ),
            (
                &[
                    ("Host", "admin.example:443"),
                    ("Origin", "https://ADMIN.example"),
                ],
                false,
                Provenance::SameOrigin,
            ),
            (
                &[host, ("Origin", "http://127.0.0.1:8080")],
                false,
                Provenance::Foreign,
            ),
            (
                &[host, ("Origin", "http://attacker.example")],
                false,
                Provenance::Foreign,
            ),
            (&[host, ("Origin", "null")], true, Provenance::Foreign),
            (
                &[host, ("Sec-Fetch-Site", "cross-site")],
                false,
                Provenance::Foreign,
            ),
            (
                &[
                    host,
                    ("Sec-Fetch-Site", "same-site"),
                    ("Origin", "http://127.0.0.1:9090"),
                ],
                false,
                Provenance::Foreign,
            ),
            (
                &[host, ("Sec-Fetch-Site", "same-origin")],
                true,
                Provenance::SameOrigin,
            ),
            (&[host], false, Provenance::NotBrowser),
            (
                &[host, ("Authorization", "Bearer t")],
                true,
                Provenance::NotBrowser,
            ),
            (&[host], true, Provenance::NeedsToken),
        ];
        for (headers, cookie, want) in cases {
            assert_eq!(
                provenance(&request("POST", headers), cookie),
                want,
                "{headers:?}"
            );
        }
        assert!(changes_state(&http::Method::DELETE));
        assert!(changes_state(&http::Method::PATCH));
        assert!(!changes_state(&http::Method::HEAD));
    }
}
