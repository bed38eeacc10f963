//! Envoy's gRPC `ext_authz`: `envoy.service.auth.v3.Authorization/Check` over h2c on the
//! decision listener. The request judged comes from `attributes.request.http` (method, host,
//! path, headers); the client from an `x-forwarded-for` among those headers, else
//! `attributes.source.address`. A refusal is `PERMISSION_DENIED` with a `DeniedHttpResponse`
//! carrying the proxy's status, headers and body.

use std::net::IpAddr;

use bytes::{BufMut, BytesMut};
use http::{HeaderMap, Method};
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::protocols::http::ServerSession;
use prost::Message;

use super::answer::Answer;
use super::envoy::{
    CheckRequest, CheckResponse, DeniedHttpResponse, HeaderValue, HeaderValueOption, HttpResponse,
    HttpStatus, OkHttpResponse, Status,
};
use super::Rejection;
use crate::metrics::METRICS;

/// The method's path.
pub(super) const CHECK: &[u8] = b"/envoy.service.auth.v3.Authorization/Check";

/// The largest Check message read: a request's headers, bounded as the proxy bounds them.
const MAX_MESSAGE: usize = 64 * 1024;

/// gRPC status codes used here.
const OK: i32 = 0;
const INVALID_ARGUMENT: i32 = 3;
const PERMISSION_DENIED: i32 = 7;
const RESOURCE_EXHAUSTED: i32 = 8;
const UNIMPLEMENTED: i32 = 12;

/// What went wrong before a judgment, as a gRPC status.
pub(super) struct Failed {
    pub code: i32,
    pub message: String,
}

impl Failed {
    pub(super) fn from_rejection(rejection: &Rejection) -> Failed {
        METRICS
            .decision_rejected
            .with_label_values(&[rejection.reason()])
            .inc();
        let code = match rejection {
            Rejection::UntrustedCaller => PERMISSION_DENIED,
            Rejection::TooLarge(_) => RESOURCE_EXHAUSTED,
            _ => INVALID_ARGUMENT,
        };
        Failed {
            code,
            message: rejection.reason().to_string(),
        }
    }
}

/// Reads the one Check message of the call: at most [`MAX_MESSAGE`] bytes, uncompressed.
pub(super) async fn read_check(session: &mut ServerSession) -> Result<CheckRequest, Failed> {
    let mut body = BytesMut::new();
    loop {
        match session.read_request_body().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MAX_MESSAGE + 5 {
                    return Err(Failed::from_rejection(&Rejection::TooLarge(
                        "the Check message",
                    )));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(_) => {
                return Err(Failed::from_rejection(&Rejection::BadRequest(
                    "the request body",
                )))
            }
        }
    }
    if body.len() < 5 {
        return Err(Failed::from_rejection(&Rejection::BadRequest(
            "an empty Check call",
        )));
    }
    if body[0] != 0 {
        return Err(Failed {
            code: UNIMPLEMENTED,
            message: "compressed messages are not accepted".to_string(),
        });
    }
    let length = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    if length > MAX_MESSAGE {
        return Err(Failed::from_rejection(&Rejection::TooLarge(
            "the Check message",
        )));
    }
    if body.len() != 5 + length {
        return Err(Failed::from_rejection(&Rejection::BadRequest(
            "the Check message's framing",
        )));
    }
    CheckRequest::decode(&body[5..])
        .map_err(|_| Failed::from_rejection(&Rejection::BadRequest("the Check message")))
}

/// The request a Check asks about: its head (the proxy's parsing of the path), whether it came
/// over HTTPS, its `x-forwarded-for` values and its source address.
pub(super) struct Asked {
    pub head: RequestHeader,
    pub https: bool,
    pub forwarded_for: Vec<Vec<u8>>,
    pub source: Option<IpAddr>,
}

pub(super) fn asked(check: &CheckRequest) -> Result<Asked, Rejection> {
    let attributes = check
        .attributes
        .as_ref()
        .ok_or(Rejection::Missing("attributes"))?;
    let http = attributes
        .request
        .as_ref()
        .and_then(|request| request.http.as_ref())
        .ok_or(Rejection::Missing("attributes.request.http"))?;
    let method = Method::from_bytes(http.method.as_bytes())
        .map_err(|_| Rejection::BadRequest("the method"))?;
    if !http.path.starts_with('/') {
        return Err(Rejection::BadRequest("a path that is not origin-form"));
    }
    if http.host.is_empty() {
        return Err(Rejection::Missing("host"));
    }
    let raw_headers = http
        .header_map
        .as_ref()
        .map_or(&[][..], |map| &map.headers[..]);
    let mut head = RequestHeader::build_no_case(
        method,
        http.path.as_bytes(),
        Some(http.headers.len() + raw_headers.len()),
    )
    .map_err(|_| Rejection::BadRequest("a path that cannot be parsed"))?;
    let mut forwarded_for = Vec::new();
    let mut https = false;
    // Names arrive lower-cased; pseudo-headers (`:path`, `:authority`) are Envoy's copies of
    // what the fields above say. A raw header map (`encode_raw_headers`) carries its values as
    // bytes in `raw_value`.
    let named = http
        .headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_bytes()))
        .chain(raw_headers.iter().map(|header| {
            let value = if header.raw_value.is_empty() {
                header.value.as_bytes()
            } else {
                &header.raw_value[..]
            };
            (header.key.as_str(), value)
        }));
    for (name, value) in named {
        if name.starts_with(':') || name.eq_ignore_ascii_case("host") {
            continue;
        }
        if name.eq_ignore_ascii_case("x-forwarded-for") {
            forwarded_for.push(value.to_vec());
        }
        if name.eq_ignore_ascii_case("x-forwarded-proto") {
            https = value.trim_ascii().eq_ignore_ascii_case(b"https");
        }
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| Rejection::BadRequest("a header name"))?;
        let value = http::HeaderValue::from_bytes(value)
            .map_err(|_| Rejection::BadRequest("a header value"))?;
        // Envoy joins repeated headers with `,`; a User-Agent sent twice is one value here.
        head.append_header(name, value)
            .map_err(|_| Rejection::BadRequest("a header value"))?;
    }
    head.insert_header(http::header::HOST, http.host.as_str())
        .map_err(|_| Rejection::BadRequest("the host"))?;
    let source = attributes
        .source
        .as_ref()
        .and_then(|peer| peer.address.as_ref())
        .and_then(|address| address.socket_address.as_ref())
        .and_then(|socket| socket.address.parse().ok());
    Ok(Asked {
        head,
        https,
        forwarded_for,
        source,
    })
}

fn header(key: &str, value: &str) -> HeaderValueOption {
    HeaderValueOption {
        header: Some(HeaderValue {
            key: key.to_string(),
            value: value.to_string(),
            raw_value: Vec::new(),
        }),
    }
}

/// The CheckResponse for an answer: `OkHttpResponse` with the judgment's headers when allowed,
/// else `PERMISSION_DENIED` with the proxy's status, headers and body.
pub(super) fn response(answer: Answer) -> CheckResponse {
    let mut headers = vec![
        header("x-robotsguard-decision", answer.decision),
        header("x-robotsguard-crawler", &answer.crawler),
        header("x-robotsguard-verified", answer.verified),
    ];
    if answer.status == 200 {
        if let Some(usage) = &answer.content_usage {
            headers.push(header("content-usage", usage));
        }
        return CheckResponse {
            status: Some(Status {
                code: OK,
                message: String::new(),
            }),
            http_response: Some(HttpResponse::OkResponse(OkHttpResponse { headers })),
        };
    }
    if let Some((name, value)) = &answer.extra {
        headers.push(header(name.as_str(), value));
    }
    headers.push(header("content-type", "text/plain; charset=utf-8"));
    headers.push(header("cache-control", "no-store"));
    CheckResponse {
        status: Some(Status {
            code: PERMISSION_DENIED,
            message: String::new(),
        }),
        http_response: Some(HttpResponse::DeniedResponse(DeniedHttpResponse {
            status: Some(HttpStatus {
                code: i32::from(answer.status),
            }),
            headers,
            body: answer.body,
        })),
    }
}

/// Writes a gRPC answer: the message (when there is one) and the status in the trailers.
pub(super) async fn write(
    session: &mut ServerSession,
    message: Option<CheckResponse>,
    failed: Option<Failed>,
) -> pingora::Result<()> {
    let mut head = ResponseHeader::build(200, Some(2))?;
    head.insert_header(http::header::CONTENT_TYPE, "application/grpc")?;
    session.write_response_header(Box::new(head)).await?;
    if let Some(message) = message {
        let encoded = message.encode_to_vec();
        let mut framed = BytesMut::with_capacity(5 + encoded.len());
        framed.put_u8(0);
        framed.put_u32(u32::try_from(encoded.len()).unwrap_or(u32::MAX));
        framed.put_slice(&encoded);
        session.write_response_body(framed.freeze(), false).await?;
    }
    let mut trailers = HeaderMap::new();
    let (code, message) = failed.map_or((OK, String::new()), |f| (f.code, f.message));
    trailers.insert("grpc-status", http::HeaderValue::from(code));
    if let Ok(value) = http::HeaderValue::from_str(&message) {
        if !message.is_empty() {
            trailers.insert("grpc-message", value);
        }
    }
    // The trailers end the stream.
    session.write_response_trailers(trailers).await
}
