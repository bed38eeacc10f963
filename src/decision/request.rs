//! The request being judged, rebuilt from what a front proxy's auth subrequest carries (never
//! from the subrequest's own line): the forward-auth headers of Traefik and Caddy, nginx's
//! `X-Original-*` pair, or Envoy's prefixed path.

use http::{HeaderMap, Method};
use pingora::http::RequestHeader;

use super::Rejection;

// Spelled as messages name them; looked up without regard to case.
const X_FORWARDED_METHOD: &str = "X-Forwarded-Method";
const X_ORIGINAL_METHOD: &str = "X-Original-Method";
const X_FORWARDED_URI: &str = "X-Forwarded-Uri";
const X_ORIGINAL_URI: &str = "X-Original-URI";
const X_FORWARDED_HOST: &str = "X-Forwarded-Host";
const X_FORWARDED_PROTO: &str = "X-Forwarded-Proto";
const HOST: &str = "Host";

/// The path prefix of Envoy's HTTP `ext_authz` (`path_prefix: /envoy`).
pub(super) const ENVOY_PREFIX: &[u8] = b"/envoy";

/// A rebuilt request: its head as the client sent it to the front proxy (the proxy's own
/// parsing of the target applies), and whether it came over HTTPS.
pub(super) struct Rebuilt {
    pub head: RequestHeader,
    pub https: bool,
}

/// The one value all of `names`' values agree on (every value of every name compared whole):
/// `None` when none is sent, a 400 when two differ.
fn agreed<'a>(
    headers: &'a HeaderMap,
    names: &[&'static str],
) -> Result<Option<&'a [u8]>, Rejection> {
    let mut found: Option<&[u8]> = None;
    for name in names {
        for value in headers.get_all(*name) {
            let value = value.as_bytes().trim_ascii();
            match found {
                Some(first) if first != value => return Err(Rejection::Conflicting(name)),
                _ => found = Some(value),
            }
        }
    }
    Ok(found)
}

/// Like [`agreed`] for a header that proxies write as a list (`X-Forwarded-Host: a, a`): every
/// entry of every value must be the same.
fn agreed_list<'a>(
    headers: &'a HeaderMap,
    name: &'static str,
) -> Result<Option<&'a [u8]>, Rejection> {
    let mut found: Option<&[u8]> = None;
    for value in headers.get_all(name) {
        for entry in value.as_bytes().split(|&b| b == b',') {
            let entry = entry.trim_ascii();
            match found {
                Some(first) if first != entry => return Err(Rejection::Conflicting(name)),
                _ => found = Some(entry),
            }
        }
    }
    Ok(found.filter(|value| !value.is_empty()))
}

/// `GET /auth` and `GET /auth/nginx`: the method from `X-Forwarded-Method` or
/// `X-Original-Method`, the target from `X-Forwarded-Uri` or `X-Original-URI` (origin-form), the
/// host from `X-Forwarded-Host`, else the subrequest's `Host`.
pub(super) fn forward_auth(subrequest: &RequestHeader) -> Result<Rebuilt, Rejection> {
    let headers = &subrequest.headers;
    let method = agreed(headers, &[X_FORWARDED_METHOD, X_ORIGINAL_METHOD])?
        .ok_or(Rejection::Missing(X_FORWARDED_METHOD))?;
    let target = agreed(headers, &[X_FORWARDED_URI, X_ORIGINAL_URI])?
        .ok_or(Rejection::Missing(X_FORWARDED_URI))?;
    let host = match agreed_list(headers, X_FORWARDED_HOST)? {
        Some(host) => host,
        None => agreed(headers, &[HOST])?.ok_or(Rejection::Missing("Host"))?,
    };
    let method =
        Method::from_bytes(method).map_err(|_| Rejection::BadRequest("the forwarded method"))?;
    rebuild(subrequest, method, target, host)
}

/// `/envoy/...`: Envoy's HTTP `ext_authz` sends the original method, the original path after
/// the prefix, and the original `Host` (`:authority`) and headers as they are.
pub(super) fn envoy(subrequest: &RequestHeader) -> Result<Rebuilt, Rejection> {
    let raw = subrequest.raw_path();
    let target = raw.strip_prefix(ENVOY_PREFIX).unwrap_or(raw);
    let host = match subrequest.uri.authority() {
        Some(authority) => authority.as_str().as_bytes(),
        None => agreed(&subrequest.headers, &[HOST])?.ok_or(Rejection::Missing("Host"))?,
    };
    rebuild(subrequest, subrequest.method.clone(), target, host)
}

/// The client's request head: `method` and `target` parsed as the proxy parses a request line,
/// the subrequest's headers with `host` as the one `Host`.
fn rebuild(
    subrequest: &RequestHeader,
    method: Method,
    target: &[u8],
    host: &[u8],
) -> Result<Rebuilt, Rejection> {
    // Only origin-form: a front proxy forwards the path it routed, never an absolute URI or `*`.
    if !target.starts_with(b"/") {
        return Err(Rejection::BadRequest(
            "a forwarded URI that is not origin-form",
        ));
    }
    if method == Method::CONNECT {
        return Err(Rejection::BadRequest("a CONNECT request"));
    }
    let mut head = RequestHeader::build_no_case(method, target, Some(subrequest.headers.len()))
        .map_err(|_| Rejection::BadRequest("a forwarded URI that cannot be parsed"))?;
    for (name, value) in &subrequest.headers {
        if *name != http::header::HOST {
            head.append_header(name.clone(), value.clone())
                .map_err(|_| Rejection::BadRequest("a header that cannot be kept"))?;
        }
    }
    let host = http::HeaderValue::from_bytes(host)
        .map_err(|_| Rejection::BadRequest("a forwarded host that cannot be parsed"))?;
    head.insert_header(http::header::HOST, host)
        .map_err(|_| Rejection::BadRequest("a forwarded host that cannot be parsed"))?;
    let https = agreed_list(&subrequest.headers, X_FORWARDED_PROTO)?
        .is_some_and(|proto| proto.eq_ignore_ascii_case(b"https"));
    Ok(Rebuilt { head, https })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subrequest(path: &str, headers: &[(&str, &str)]) -> RequestHeader {
        let mut head = RequestHeader::build("GET", path.as_bytes(), None).unwrap();
        for (name, value) in headers {
            head.append_header(name.to_string(), *value).unwrap();
        }
        head
    }

    #[test]
    fn forward_auth_reads_both_conventions() {
        let traefik = subrequest(
            "/auth",
            &[
                ("host", "robotsguard:8081"),
                ("x-forwarded-method", "POST"),
                ("x-forwarded-uri", "/a/../b?x=1"),
                ("x-forwarded-host", "shop.example"),
                ("x-forwarded-proto", "https"),
            ],
        );
        let rebuilt = forward_auth(&traefik).unwrap();
        assert_eq!(rebuilt.head.method, Method::POST);
        assert_eq!(rebuilt.head.raw_path(), b"/a/../b?x=1");
        assert_eq!(rebuilt.head.headers.get("host").unwrap(), "shop.example");
        assert!(rebuilt.https);
        let nginx = subrequest(
            "/auth/nginx",
            &[
                ("host", "shop.example"),
                ("x-original-method", "GET"),
                ("x-original-uri", "/private"),
            ],
        );
        let rebuilt = forward_auth(&nginx).unwrap();
        assert_eq!(rebuilt.head.raw_path(), b"/private");
        assert_eq!(rebuilt.head.headers.get("host").unwrap(), "shop.example");
        assert!(!rebuilt.https);
    }

    #[test]
    fn forward_auth_refuses_what_it_cannot_judge() {
        let cases: [(&[(&str, &str)], &str); 6] = [
            (&[("host", "a"), ("x-forwarded-uri", "/")], "missing"),
            (&[("host", "a"), ("x-forwarded-method", "GET")], "missing"),
            (
                &[
                    ("host", "a"),
                    ("x-forwarded-method", "GET"),
                    ("x-forwarded-uri", "/a"),
                    ("x-original-uri", "/b"),
                ],
                "conflicting",
            ),
            (
                &[
                    ("host", "a"),
                    ("x-forwarded-method", "GET"),
                    ("x-forwarded-uri", "/a"),
                    ("x-forwarded-uri", "/b"),
                ],
                "conflicting",
            ),
            (
                &[
                    ("host", "a"),
                    ("x-forwarded-method", "GET"),
                    ("x-forwarded-uri", "http://b/a"),
                ],
                "bad",
            ),
            (
                &[
                    ("host", "a"),
                    ("x-forwarded-method", "GET"),
                    ("x-forwarded-uri", "/a"),
                    ("x-forwarded-host", "a, b"),
                ],
                "conflicting",
            ),
        ];
        for (headers, want) in cases {
            let got = forward_auth(&subrequest("/auth", headers)).err().unwrap();
            let kind = match got {
                Rejection::Missing(_) => "missing",
                Rejection::Conflicting(_) => "conflicting",
                Rejection::BadRequest(_) => "bad",
                _ => "other",
            };
            assert_eq!(kind, want, "{headers:?}");
        }
        // The same value twice is no conflict.
        let twice = subrequest(
            "/auth",
            &[
                ("host", "a"),
                ("x-forwarded-method", "GET"),
                ("x-forwarded-uri", "/a"),
                ("x-original-uri", "/a"),
            ],
        );
        assert!(forward_auth(&twice).is_ok());
    }

    #[test]
    fn envoy_takes_the_path_after_its_prefix() {
        let rebuilt = envoy(&subrequest(
            "/envoy/private/x?y",
            &[("host", "shop.example")],
        ))
        .unwrap();
        assert_eq!(rebuilt.head.raw_path(), b"/private/x?y");
        assert!(envoy(&subrequest("/envoyx", &[("host", "a")])).is_err());
    }
}
