//! One HTTP GET of a robots.txt from an origin's upstream, through pingora's connector (so TLS and
//! address settings are those of proxied traffic), with a body limit and gzip decoding.

use std::io::Read;
use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use pingora::connectors::http::Connector;
use pingora::http::RequestHeader;
use pingora::upstreams::peer::HttpPeer;

use crate::snapshot::Origin;

/// The User-Agent robotsguard fetches robots.txt with.
pub fn user_agent() -> String {
    format!("robotsguard/{}", env!("CARGO_PKG_VERSION"))
}

/// Builds the upstream peer for an origin's address, with its TLS settings and timeouts. Boxed
/// as it is made: `HttpPeer` is large, and pingora takes it boxed (one copy, not two, per
/// proxied request).
pub fn http_peer(origin: &Origin, address: SocketAddr) -> Box<HttpPeer> {
    let (tls, sni, verify) = match &origin.config.upstream_tls {
        Some(tls) => (true, tls.sni.clone(), tls.verify),
        // No server name over plain HTTP: pingora sends none and pools the connections by
        // address (the Host header names the origin on each request).
        None => (false, String::new(), true),
    };
    let mut peer = Box::new(HttpPeer::new(address, tls, sni));
    peer.options.verify_cert = verify;
    peer.options.verify_hostname = verify;
    peer.options.ca = origin.upstream_tls.ca.clone();
    peer.client_cert_key = origin.upstream_tls.client.clone();
    let timeouts = &origin.config.upstream_timeouts;
    peer.options.connection_timeout = Some(timeouts.connect);
    peer.options.total_connection_timeout = Some(timeouts.connect);
    peer.options.read_timeout = Some(timeouts.read);
    peer.options.write_timeout = Some(timeouts.write);
    peer.options.idle_timeout = Some(timeouts.idle);
    peer
}

/// The parts of an answer the acquisition rules look at.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    pub status: u16,
    pub location: Option<String>,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    pub cache_control: Option<String>,
    pub retry_after: Option<String>,
    pub content_type: Option<String>,
    /// The decoded body, at most `max_size` bytes.
    pub body: Bytes,
    /// The body had more than `max_size` bytes; the rest was not read.
    pub over_limit: bool,
}

/// Validators of the copy in force, sent as conditional headers.
#[derive(Debug, Clone, Default)]
pub struct Validators {
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

/// What went wrong with a fetch that got no usable answer: what was being done, and the error
/// that stopped it when there was one (pingora's, or the gzip decoder's), kept as the
/// [`std::error::Error::source`].
#[derive(Debug)]
pub struct Failure {
    what: String,
    cause: Option<Box<dyn std::error::Error + Send + Sync>>,
    /// Not attempted: the URL's host resolved to an address the caller does not allow.
    refused: bool,
}

impl Failure {
    /// A failure with no underlying error.
    pub fn new(what: impl Into<String>) -> Failure {
        Failure {
            what: what.into(),
            cause: None,
            refused: false,
        }
    }

    /// A failure caused by `cause`.
    pub fn caused(
        what: impl Into<String>,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Failure {
        Failure {
            what: what.into(),
            cause: Some(cause.into()),
            refused: false,
        }
    }

    /// A fetch refused before any connection: the host resolves to an address not allowed.
    pub fn refused(what: impl Into<String>) -> Failure {
        Failure {
            refused: true,
            ..Failure::new(what)
        }
    }

    /// Whether the fetch was refused before any connection ([`Failure::refused`]).
    pub fn is_refused(&self) -> bool {
        self.refused
    }
}

/// The whole story on one line (`what: cause`), as logs and `/explain` show it.
impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.cause {
            Some(cause) => write!(f, "{}: {cause}", self.what),
            None => f.write_str(&self.what),
        }
    }
}

impl std::error::Error for Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause
            .as_deref()
            .map(|cause| cause as &(dyn std::error::Error + 'static))
    }
}

/// GETs `path` with `Host: host` from one of the origin's upstreams. Reads at most `max_size`
/// decoded body bytes. A body that ends early, or a gzip body that does not decode, is a failure.
/// `scheme` is the scheme of the URL asked for (`X-Forwarded-Proto`: an origin behind a TLS
/// proxy that redirects plain requests to https must see the request as the https one it is).
pub async fn get(
    connector: &Connector,
    origin: &Origin,
    scheme: &str,
    host: &str,
    path: &str,
    validators: &Validators,
    max_size: usize,
) -> Result<Answer, Failure> {
    let Some(upstream) = origin.upstreams.pick(&[]) else {
        let why = origin.upstreams.resolution_error.load();
        return Err(Failure::new(format!(
            "no upstream address ({})",
            why.as_deref().unwrap_or("none configured")
        )));
    };
    let peer = http_peer(origin, upstream.address);
    let headers = [
        ("accept", "text/plain, */*;q=0.5"),
        ("x-forwarded-proto", scheme),
        ("x-forwarded-host", host),
    ];
    exchange(connector, &peer, host, path, &headers, validators, max_size).await
}

/// One GET over a connection from `connector` to `peer`: the request with `Host: host`,
/// robotsguard's User-Agent, `Accept-Encoding: gzip`, the conditional headers of `validators` and
/// `extra` headers; the answer with at most `max_size` decoded body bytes.
pub(crate) async fn exchange(
    connector: &Connector,
    peer: &HttpPeer,
    host: &str,
    path: &str,
    extra: &[(&str, &str)],
    validators: &Validators,
    max_size: usize,
) -> Result<Answer, Failure> {
    let address = &peer._address;
    let (mut session, _reused) = connector
        .get_http_session(peer)
        .await
        .map_err(|e| Failure::caused(format!("cannot connect to {address}"), e))?;
    let mut request = RequestHeader::build("GET", path.as_bytes(), None)
        .map_err(|e| Failure::caused(format!("bad path `{path}`"), e))?;
    let user_agent = user_agent();
    let mut headers: Vec<(&str, &str)> = vec![
        ("host", host),
        ("user-agent", &user_agent),
        ("accept-encoding", "gzip"),
    ];
    headers.extend_from_slice(extra);
    if let Some(etag) = &validators.etag {
        headers.push(("if-none-match", etag));
    }
    if let Some(modified) = &validators.last_modified {
        headers.push(("if-modified-since", modified));
    }
    for (name, value) in headers {
        request
            .insert_header(name.to_string(), value)
            .map_err(|e| Failure::caused("cannot build the request", e))?;
    }
    session
        .write_request_header(Box::new(request))
        .await
        .map_err(|e| Failure::caused("cannot send the request", e))?;
    session
        .finish_request_body()
        .await
        .map_err(|e| Failure::caused("cannot send the request", e))?;
    session
        .read_response_header()
        .await
        .map_err(|e| Failure::caused("no answer", e))?;
    let Some(response) = session.response_header() else {
        return Err(Failure::new("no answer"));
    };
    let header = |name: &str| {
        response
            .headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string)
    };
    let mut answer = Answer {
        status: response.status.as_u16(),
        location: header("location"),
        etag: header("etag"),
        last_modified: header("last-modified"),
        cache_control: header("cache-control"),
        retry_after: header("retry-after"),
        content_type: header("content-type"),
        ..Answer::default()
    };
    let encoding = header("content-encoding")
        .unwrap_or_default()
        .to_ascii_lowercase();
    let gzip = matches!(encoding.trim(), "gzip" | "x-gzip");
    if !gzip && !matches!(encoding.trim(), "" | "identity") {
        return Err(Failure::new(format!(
            "body in an encoding robotsguard did not ask for: {encoding}"
        )));
    }
    // A gzip body is read up to a bounded multiple of the limit; what it decodes to is cut at
    // the limit, so a small bomb cannot grow past `max_size` either.
    let raw_limit = if gzip {
        max_size.saturating_mul(4)
    } else {
        max_size
    };
    let mut raw = BytesMut::new();
    let mut over_limit = false;
    loop {
        match session.read_response_body().await {
            Ok(Some(chunk)) => {
                let room = raw_limit.saturating_sub(raw.len());
                raw.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if chunk.len() > room || (chunk.len() == room && !session.response_done()) {
                    over_limit = true;
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => return Err(Failure::caused("body cut short", e)),
        }
    }
    if gzip {
        let (body, decoded_over) = gunzip(&raw, max_size, over_limit)?;
        answer.body = body;
        answer.over_limit = decoded_over;
    } else {
        answer.body = raw.freeze();
        answer.over_limit = over_limit;
    }
    Ok(answer)
}

/// One active health check: `GET path` on `address` with the origin's first host; returns the
/// status, having read (and dropped) at most 64 KiB of body so the connection can be reused.
pub async fn health_check(
    connector: &Connector,
    origin: &Origin,
    address: SocketAddr,
    path: &str,
) -> Result<u16, Failure> {
    let peer = http_peer(origin, address);
    let (mut session, _reused) = connector
        .get_http_session(&*peer)
        .await
        .map_err(|e| Failure::caused("cannot connect", e))?;
    let mut request = RequestHeader::build("GET", path.as_bytes(), None)
        .map_err(|e| Failure::caused(format!("bad health check path `{path}`"), e))?;
    for (name, value) in [
        ("host", origin.primary_host().to_string()),
        ("user-agent", user_agent()),
    ] {
        request
            .insert_header(name, value)
            .map_err(|e| Failure::caused("cannot build the request", e))?;
    }
    session
        .write_request_header(Box::new(request))
        .await
        .map_err(|e| Failure::caused("cannot send the request", e))?;
    session
        .finish_request_body()
        .await
        .map_err(|e| Failure::caused("cannot send the request", e))?;
    session
        .read_response_header()
        .await
        .map_err(|e| Failure::caused("no answer", e))?;
    let status = session
        .response_header()
        .map(|response| response.status.as_u16())
        .ok_or_else(|| Failure::new("no answer"))?;
    let mut read = 0usize;
    while read < 64 * 1024 {
        match session.read_response_body().await {
            Ok(Some(chunk)) => read += chunk.len(),
            Ok(None) | Err(_) => break,
        }
    }
    Ok(status)
}

/// Decodes at most `max_size` bytes of a gzip body. `input_cut` says the compressed input was cut
/// at its own limit, in which case an early end of input is expected and not an error.
fn gunzip(raw: &[u8], max_size: usize, input_cut: bool) -> Result<(Bytes, bool), Failure> {
    let mut decoder = flate2::read::GzDecoder::new(raw).take(max_size as u64 + 1);
    let mut out = Vec::new();
    match decoder.read_to_end(&mut out) {
        Ok(_) => {}
        Err(e) if input_cut && e.kind() == std::io::ErrorKind::UnexpectedEof => {}
        Err(e) => return Err(Failure::caused("gzip body does not decode", e)),
    }
    let over = out.len() > max_size || input_cut;
    out.truncate(max_size);
    Ok((Bytes::from(out), over))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let _ = encoder.write_all(data);
        encoder.finish().unwrap_or_default()
    }

    #[test]
    fn gzip_bodies_decode_within_the_limit() {
        let body = b"User-agent: *\nDisallow: /x\n";
        let (decoded, over) = gunzip(&gzip(body), 1000, false).unwrap_or_default();
        assert_eq!((&decoded[..], over), (&body[..], false));
        let bomb = gzip(&vec![b'#'; 5_000_000]);
        let (decoded, over) = gunzip(&bomb, 1000, false).unwrap_or_default();
        assert_eq!((decoded.len(), over), (1000, true));
        assert!(gunzip(b"not gzip at all", 1000, false).is_err());
    }
}
