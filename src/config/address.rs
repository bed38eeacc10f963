//! Parses and checks the config's three kinds of address: socket addresses
//! to bind, upstream `host:port` targets, and the host names an origin
//! answers to.

use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::error::{quote, Problem};
use super::Upstream;

/// Parses a `listen` or `admin` address: an IP and a port. Names are
/// refused because binding resolves nothing; port 0 (any free port) is
/// allowed, which tests use.
pub(crate) fn parse_bind(text: &str) -> Result<SocketAddr, Problem> {
    if text.is_empty() {
        return Err(Problem::new("the address is empty").hint("write e.g. 127.0.0.1:8080"));
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Err(missing_port(text, ip.is_ipv6()));
    }
    let (host, port) = split_host_port(text)?;
    let port = parse_port(text, port, true)?;
    if host.parse::<IpAddr>().is_ok() {
        // Only reachable for odd forms such as an unbracketed v6 host, which
        // split_host_port already refuses; kept as a plain fallback.
        return Err(bad_address(text));
    }
    let hint = if host.eq_ignore_ascii_case("localhost") {
        format!("write 127.0.0.1:{port}")
    } else {
        format!("write 0.0.0.0:{port} for all interfaces, or one interface's IP")
    };
    Err(Problem::new(format!(
        "address {} must be an IP address and port, not a host name",
        quote(text)
    ))
    .hint(hint))
}

/// Parses one upstream target: `host:port` with an IP or DNS name.
///
/// An IPv6 host is written `[::1]:8080`; the brackets are dropped from
/// `Upstream::host` (so it can be handed to a resolver as is) and kept in
/// `raw`. DNS names are lower-cased. Underscores are accepted in names since
/// container service names often have them.
pub(crate) fn parse_upstream(text: &str) -> Result<Upstream, Problem> {
    if text.is_empty() {
        return Err(Problem::new("the upstream is empty").hint("write e.g. 127.0.0.1:8081"));
    }
    if text.contains("://") {
        return Err(Problem::new(format!(
            "upstream {} has a scheme; write host:port",
            quote(text)
        ))
        .hint("e.g. 127.0.0.1:8081; for an HTTPS upstream set the origin's `tls: true`"));
    }
    if text.contains('/') {
        return Err(Problem::new(format!(
            "upstream {} has a path; write host:port",
            quote(text)
        ))
        .hint("requests keep their own path"));
    }
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Err(missing_port(text, ip.is_ipv6()));
    }
    let (host, port) = split_host_port(text)?;
    let port = parse_port(text, port, false)?;
    let host = if let Some(inner) = host.strip_prefix('[') {
        // split_host_port only yields a bracketed host when it ends in ']'.
        let inner = inner.strip_suffix(']').unwrap_or(inner);
        match inner.parse::<Ipv6Addr>() {
            Ok(ip) => ip.to_string(),
            Err(_) => return Err(bad_address(text)),
        }
    } else if let Ok(ip) = host.parse::<Ipv4Addr>() {
        ip.to_string()
    } else {
        check_dns_name(host).map_err(|p| {
            Problem::new(format!("upstream {}: {}", quote(text), p.message)).with_hint(p.hint)
        })?;
        host.to_ascii_lowercase()
    };
    Ok(Upstream {
        host,
        port,
        raw: text.to_owned(),
    })
}

/// Checks a host name an origin answers to and writes it in the form routing
/// looks hosts up in ([`normalize_host`]): lower-case, one trailing dot
/// removed (`shop.example.` is the same name), no port. IPv4 addresses and
/// bracketed IPv6 addresses (`[::1]`, as they appear in a Host header) are
/// accepted, IPv6 in canonical form (`[0:0::1]` is `[::1]`).
pub(crate) fn parse_host(text: &str) -> Result<String, Problem> {
    if text.contains("://") || text.contains('/') {
        return Err(Problem::new(format!(
            "host {} must be a bare host name, without scheme or path",
            quote(text)
        ))
        .hint("e.g. shop.example"));
    }
    if let Some(inner) = text.strip_prefix('[') {
        return match inner.strip_suffix(']').map(str::parse::<Ipv6Addr>) {
            Some(Ok(_)) => canonical(text),
            _ => Err(Problem::new(format!(
                "host {} is not a valid bracketed IPv6 address",
                quote(text)
            ))
            .hint("hosts have no port; write e.g. [2001:db8::1]")),
        };
    }
    if let Ok(ip) = text.parse::<Ipv6Addr>() {
        return Err(
            Problem::new(format!("IPv6 host {} must be in brackets", quote(text)))
                .hint(format!("write [{ip}]")),
        );
    }
    if let Some((name, _port)) = text.rsplit_once(':') {
        return Err(Problem::new(format!("host {} has a port", quote(text)))
            .hint(format!("write {name}; a host matches requests on any port")));
    }
    if text.contains('*') {
        return Err(
            Problem::new(format!("host {}: wildcards are not supported", quote(text)))
                .hint("list each host name"),
        );
    }
    let lower = text.to_ascii_lowercase();
    let name = lower.strip_suffix('.').unwrap_or(&lower);
    if name.parse::<Ipv4Addr>().is_err() {
        check_dns_name(name).map_err(|p| {
            Problem::new(format!("host {}: {}", quote(text), p.message)).with_hint(p.hint)
        })?;
    }
    canonical(text)
}

/// The form routing looks `text` up in ([`normalize_host`]), so that a configured host and a
/// Host header naming it always meet.
fn canonical(text: &str) -> Result<String, Problem> {
    normalize_host(text.as_bytes())
        .map(Cow::into_owned)
        .ok_or_else(|| {
            Problem::new(format!(
                "host {} is not a name a Host header can carry",
                quote(text)
            ))
        })
}

/// Normalises a Host header or authority for lookup: lower-case, port and trailing dot removed,
/// an IPv6 literal in the canonical form the config writes it in (`[0:0::1]` is `[::1]`).
/// Returns `None` for values no configured host can equal (empty, spaces, userinfo, ...).
///
/// One pass over the bytes, borrowing unless a letter needs folding: it runs on every request.
pub fn normalize_host(raw: &[u8]) -> Option<Cow<'_, str>> {
    match normalize_host_bytes(raw)? {
        Cow::Borrowed(host) => std::str::from_utf8(host).ok().map(Cow::Borrowed),
        Cow::Owned(host) => String::from_utf8(host).ok().map(Cow::Owned),
    }
}

/// What a byte of a host name is, for [`normalize_host_bytes`]: one table lookup per byte.
const HOST_NAME_BYTE: [u8; 256] = {
    let mut classes = [HOST_BYTE_INVALID; 256];
    let mut byte = 0;
    while byte < 256 {
        classes[byte] = match byte as u8 {
            b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'_' => HOST_BYTE_KEPT,
            b'A'..=b'Z' => HOST_BYTE_UPPER,
            b':' => HOST_BYTE_COLON,
            _ => HOST_BYTE_INVALID,
        };
        byte += 1;
    }
    classes
};
const HOST_BYTE_INVALID: u8 = 0;
const HOST_BYTE_KEPT: u8 = 1;
const HOST_BYTE_UPPER: u8 = 2;
const HOST_BYTE_COLON: u8 = 3;

/// [`normalize_host`] as ASCII bytes: what routing looks up, without checking again as UTF-8
/// the bytes the pass over them already admitted.
pub fn normalize_host_bytes(raw: &[u8]) -> Option<Cow<'_, [u8]>> {
    let raw = raw.trim_ascii();
    if raw.is_empty() || raw.len() > 300 {
        return None;
    }
    if raw[0] == b'[' {
        return normalize_ipv6_host(raw).map(|host| Cow::Owned(host.into_owned().into_bytes()));
    }
    let mut colon = None;
    let mut upper = false;
    for (index, &byte) in raw.iter().enumerate() {
        match HOST_NAME_BYTE[usize::from(byte)] {
            HOST_BYTE_KEPT => {}
            HOST_BYTE_UPPER => upper = true,
            HOST_BYTE_COLON => colon = Some(index),
            _ => return None,
        }
    }
    let host = match colon {
        Some(at) if raw[at + 1..].iter().all(u8::is_ascii_digit) => &raw[..at],
        Some(_) => return None,
        None => raw,
    };
    let host = host.strip_suffix(b".").unwrap_or(host);
    if host.is_empty() {
        return None;
    }
    Some(if upper {
        Cow::Owned(host.to_ascii_lowercase())
    } else {
        Cow::Borrowed(host)
    })
}

/// `[v6]` or `[v6]:port`, as the canonical `[v6]`.
fn normalize_ipv6_host(raw: &[u8]) -> Option<Cow<'_, str>> {
    let text = std::str::from_utf8(raw).ok()?;
    let end = text.find(']')?;
    let rest = &text[end + 1..];
    if !(rest.is_empty()
        || (rest.starts_with(':') && rest[1..].bytes().all(|b| b.is_ascii_digit())))
    {
        return None;
    }
    let address: std::net::Ipv6Addr = text[1..end].parse().ok()?;
    Some(Cow::Owned(format!("[{address}]")))
}

/// Checks a TLS server name: a DNS name, not an address (RFC 6066 forbids
/// IP literals in SNI).
pub(crate) fn check_sni(text: &str) -> Result<(), Problem> {
    if text.parse::<IpAddr>().is_ok() {
        return Err(Problem::new(format!(
            "sni {} is an IP address; SNI must be a host name",
            quote(text)
        )));
    }
    check_dns_name(text)
        .map_err(|p| Problem::new(format!("sni {}: {}", quote(text), p.message)).with_hint(p.hint))
}

/// Checks DNS name syntax: dot-separated labels of letters, digits, `-` and
/// `_`, each 1 to 63 bytes, 253 bytes in all, and a final label that is not
/// all digits (that would be a mistyped IPv4 address).
fn check_dns_name(name: &str) -> Result<(), Problem> {
    if name.is_empty() {
        return Err(Problem::new("the name is empty"));
    }
    if !name.is_ascii() {
        return Err(Problem::new("the name is not ASCII")
            .hint("write internationalised names in their xn-- (punycode) form"));
    }
    if name.len() > 253 {
        return Err(Problem::new("the name is longer than 253 characters"));
    }
    let mut last = "";
    for label in name.split('.') {
        if label.is_empty() {
            return Err(Problem::new(
                "the name has an empty label (`..` or a leading dot)",
            ));
        }
        if label.len() > 63 {
            return Err(Problem::new("a label is longer than 63 characters"));
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
        {
            return Err(Problem::new(format!(
                "the name has the character {}",
                quote(&c.to_string())
            ))
            .hint("names have letters, digits, `-`, `_` and dots"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(Problem::new("a label starts or ends with `-`"));
        }
        last = label;
    }
    if last.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Problem::new(
            "it is neither an IPv4 address nor a host name",
        ));
    }
    Ok(())
}

/// Splits `host:port` or `[v6]:port`, without judging either part.
fn split_host_port(text: &str) -> Result<(&str, &str), Problem> {
    if text.starts_with('[') {
        return match text.rfind("]:") {
            Some(i) => Ok((&text[..=i], &text[i + 2..])),
            None => Err(missing_port(text, true)),
        };
    }
    match text.rsplit_once(':') {
        Some((host, _)) if host.contains(':') => Err(Problem::new(format!(
            "{} looks like an IPv6 address without brackets",
            quote(text)
        ))
        .hint("write [ADDRESS]:PORT, e.g. [::1]:8080")),
        Some(("", _)) => Err(Problem::new(format!("address {} has no host", quote(text)))
            .hint("write e.g. 127.0.0.1:8080")),
        Some(parts) => Ok(parts),
        None => Err(missing_port(text, false)),
    }
}

fn parse_port(text: &str, port: &str, allow_zero: bool) -> Result<u16, Problem> {
    match port.parse::<u16>() {
        Ok(0) if !allow_zero => Err(Problem::new(format!("address {} has port 0", quote(text)))
            .hint("ports are 1 to 65535")),
        Ok(p) if port.bytes().all(|b| b.is_ascii_digit()) => Ok(p),
        _ => Err(
            Problem::new(format!("address {} has an invalid port", quote(text)))
                .hint("ports are 1 to 65535"),
        ),
    }
}

fn missing_port(text: &str, v6: bool) -> Problem {
    let hint = if v6 {
        let bare = text.trim_start_matches('[').trim_end_matches(']');
        format!("write [{bare}]:8080")
    } else {
        format!("write {text}:8080")
    };
    Problem::new(format!("address {} has no port", quote(text))).hint(hint)
}

fn bad_address(text: &str) -> Problem {
    Problem::new(format!("{} is not a valid address", quote(text)))
        .hint("write host:port, e.g. 127.0.0.1:8080 or [::1]:8080")
}

/// Whether an address can be on the public internet: loopback, private, link-local,
/// shared (100.64/10), unique-local, broadcast and unspecified addresses (and their IPv4-mapped
/// forms) are a load balancer's or the local network's.
pub fn is_public(ip: std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || (v4.octets()[0] == 100 && (v4.octets()[1] & 0xC0) == 64))
        }
        IpAddr::V6(v6) => {
            !(v6.is_loopback()
                || v6.is_unspecified()
                || (v6.segments()[0] & 0xFE00) == 0xFC00
                || (v6.segments()[0] & 0xFFC0) == 0xFE80)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg<T: std::fmt::Debug>(r: Result<T, Problem>) -> String {
        match r {
            Ok(v) => panic!("accepted: {v:?}"),
            Err(p) => format!("{} | {}", p.message, p.hint.unwrap_or_default()),
        }
    }

    #[test]
    fn bind_addresses() {
        assert_eq!(
            parse_bind("127.0.0.1:8080").ok(),
            Some(SocketAddr::from(([127, 0, 0, 1], 8080)))
        );
        assert!(parse_bind("[::1]:8080").is_ok_and(|a| a.is_ipv6() && a.port() == 8080));
        assert!(parse_bind("0.0.0.0:0").is_ok());
        assert!(msg(parse_bind("127.0.0.1")).contains("no port | write 127.0.0.1:8080"));
        assert!(msg(parse_bind("::1")).contains("no port | write [::1]:8080"));
        assert!(msg(parse_bind("[::1]")).contains("no port | write [::1]:8080"));
        assert!(msg(parse_bind("::1:8080")).contains("no port | write [::1:8080]:8080"));
        assert!(msg(parse_bind("2001:db8::g:8080")).contains("without brackets"));
        assert!(msg(parse_bind("localhost:8080")).contains("write 127.0.0.1:8080"));
        assert!(msg(parse_bind("example.com:80")).contains("not a host name"));
        assert!(msg(parse_bind("127.0.0.1:99999")).contains("invalid port"));
        assert!(msg(parse_bind("127.0.0.1:+80")).contains("invalid port"));
        assert!(msg(parse_bind(":8080")).contains("no host"));
        assert!(msg(parse_bind("")).contains("empty"));
        assert!(msg(parse_upstream("")).contains("empty"));
    }

    #[test]
    fn upstreams() {
        let u = parse_upstream("127.0.0.1:8081").unwrap_or_else(|p| panic!("{p:?}"));
        assert_eq!(
            (u.host.as_str(), u.port, u.raw.as_str()),
            ("127.0.0.1", 8081, "127.0.0.1:8081")
        );
        let u = parse_upstream("App_1.Internal:80").unwrap_or_else(|p| panic!("{p:?}"));
        assert_eq!((u.host.as_str(), u.port), ("app_1.internal", 80));
        let u = parse_upstream("[::1]:8443").unwrap_or_else(|p| panic!("{p:?}"));
        assert_eq!(
            (u.host.as_str(), u.port, u.raw.as_str()),
            ("::1", 8443, "[::1]:8443")
        );
        assert!(msg(parse_upstream("http://a.example:80")).contains("scheme"));
        assert!(msg(parse_upstream("a.example:80/x")).contains("path"));
        assert!(msg(parse_upstream("a.example")).contains("no port | write a.example:8080"));
        assert!(msg(parse_upstream("a.example:0")).contains("port 0"));
        assert!(msg(parse_upstream("a..example:80")).contains("empty label"));
        assert!(msg(parse_upstream("[zz]:80")).contains("not a valid address"));
        assert!(msg(parse_upstream("1.2.3:80")).contains("neither an IPv4"));
        assert!(msg(parse_upstream("a b:80")).contains("character ` `"));
    }

    #[test]
    fn host_normalisation() {
        let n = |t: &str| parse_host(t).unwrap_or_else(|p| panic!("{t}: {p:?}"));
        assert_eq!(n("Shop.Example."), "shop.example");
        assert_eq!(n("WWW.shop.example"), "www.shop.example");
        assert_eq!(n("192.0.2.1"), "192.0.2.1");
        assert_eq!(n("[2001:DB8::1]"), "[2001:db8::1]");
        assert_eq!(n("localhost"), "localhost");
        assert!(msg(parse_host("shop.example:8080")).contains("has a port | write shop.example;"));
        assert!(msg(parse_host("2001:db8::1")).contains("brackets | write [2001:db8::1]"));
        assert!(msg(parse_host("[::1]:80")).contains("bracketed"));
        assert!(msg(parse_host("*.shop.example")).contains("wildcards"));
        assert!(msg(parse_host("https://shop.example")).contains("without scheme"));
        assert!(msg(parse_host("bücher.example")).contains("punycode"));
        assert!(msg(parse_host("")).contains("empty"));
        assert!(msg(parse_host(".")).contains("empty"));
        assert!(msg(parse_host("-a.example")).contains("starts or ends"));
        assert!(msg(parse_host(&format!("{}.example", "a".repeat(64)))).contains("63"));
        assert!(msg(parse_host(&"a.".repeat(130))).contains("253"));
    }

    proptest::proptest! {
        /// Routing looks a Host up as sent before normalising it (`enforce::route`): that is
        /// right only if every host the config keeps normalises to itself.
        #[test]
        fn a_configured_host_normalises_to_itself(raw in "[ a-zA-Z0-9.:\\[\\]_-]{0,40}") {
            if let Ok(kept) = parse_host(&raw) {
                let again = normalize_host_bytes(kept.as_bytes());
                proptest::prop_assert_eq!(again.as_deref(), Some(kept.as_bytes()));
            }
        }
    }

    #[test]
    fn configured_hosts_normalise_to_themselves() {
        for text in [
            "Shop.Example",
            "shop.example.",
            "[0:0::1]",
            "127.0.0.1",
            "xn--bcher-kva.example",
        ] {
            let kept = parse_host(text).unwrap_or_else(|e| panic!("{text}: {}", e.message));
            assert_eq!(
                normalize_host_bytes(kept.as_bytes()).as_deref(),
                Some(kept.as_bytes())
            );
        }
    }

    #[test]
    fn host_header_normalisation() {
        assert_eq!(
            normalize_host(b"Shop.Example").as_deref(),
            Some("shop.example")
        );
        assert_eq!(
            normalize_host(b"shop.example:8080").as_deref(),
            Some("shop.example")
        );
        assert_eq!(
            normalize_host(b"shop.example.").as_deref(),
            Some("shop.example")
        );
        assert_eq!(
            normalize_host(b"shop.example.:80").as_deref(),
            Some("shop.example")
        );
        assert_eq!(normalize_host(b"[::1]:8080").as_deref(), Some("[::1]"));
        // The form the config writes IPv6 hosts in.
        assert_eq!(normalize_host(b"[0:0::1]").as_deref(), Some("[::1]"));
        assert_eq!(
            normalize_host(b"[2001:DB8::1]").as_deref(),
            Some("[2001:db8::1]")
        );
        assert_eq!(normalize_host(b"[::1]x"), None);
        assert_eq!(normalize_host(b"[nonsense]"), None);
        assert_eq!(
            normalize_host(b" shop.example "),
            Some("shop.example".into())
        );
        assert_eq!(
            normalize_host(b"shop.example:"),
            Some("shop.example".into())
        );
        assert_eq!(normalize_host(b"127.0.0.1").as_deref(), Some("127.0.0.1"));
        assert_eq!(normalize_host(b""), None);
        assert_eq!(normalize_host(b"a b"), None);
        assert_eq!(normalize_host(b"user@shop.example"), None);
        assert_eq!(normalize_host(b"shop.example:http"), None);
        assert_eq!(normalize_host(b"\xff"), None);
    }

    #[test]
    fn every_byte_of_a_host_name_is_kept_folded_or_refused() {
        for byte in 0..=u8::MAX {
            let host = [b'a', byte, b'b'];
            let expected: Option<Vec<u8>> = match byte {
                b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'_' => Some(host.to_vec()),
                b'A'..=b'Z' => Some(vec![b'a', byte.to_ascii_lowercase(), b'b']),
                // A port must be digits; anything else names no host.
                _ => None,
            };
            assert_eq!(
                normalize_host_bytes(&host).map(Cow::into_owned),
                expected,
                "byte {byte:#04x}"
            );
            assert_eq!(
                normalize_host(&host).map(|text| text.into_owned().into_bytes()),
                expected,
                "byte {byte:#04x}"
            );
        }
    }

    #[test]
    fn configured_hosts_are_in_the_form_routing_looks_up() {
        for written in [
            "Shop.Example.",
            "[0:0::1]",
            "[2001:DB8:0::1]",
            "192.0.2.1",
            "xn--bcher-kva.example",
        ] {
            let configured = parse_host(written).unwrap_or_else(|p| panic!("{written}: {p:?}"));
            assert_eq!(
                normalize_host(written.as_bytes()).as_deref(),
                Some(configured.as_str()),
                "{written}"
            );
        }
        assert_eq!(parse_host("[0:0::1]").as_deref(), Ok("[::1]"));
    }

    #[test]
    fn sni() {
        assert!(check_sni("shop.example").is_ok());
        assert!(msg(check_sni("192.0.2.1")).contains("IP address"));
        assert!(msg(check_sni("a b")).contains("character"));
    }
}
