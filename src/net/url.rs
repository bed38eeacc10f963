//! GETs of absolute `http(s)://` URLs that belong to no origin: published IP range lists and Web
//! Bot Auth key directories. The same connector, body limit and gzip handling as robots.txt
//! fetches; the host is resolved here (or by the HTTP proxy, when one carries the fetch), and
//! redirects are returned, never followed (each caller has its own rule: range lists follow a
//! few, key directories none).

use std::hash::{Hash, Hasher};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::connectors::http::Connector;
use pingora::connectors::L4Connect;
use pingora::protocols::l4::socket::SocketAddr as PeerAddr;
use pingora::protocols::l4::stream::Stream;
use pingora::upstreams::peer::HttpPeer;
use pingora::{Error, ErrorType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::http::{exchange, Answer, Failure, Validators};
use crate::config::FetchProxy;

/// The longest answer head a proxy may send to CONNECT.
const MAX_CONNECT_HEAD: usize = 8 * 1024;

/// What an absolute URL names: where to connect and what to ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct UrlTarget {
    tls: bool,
    /// The host without brackets or port: what is resolved and sent as SNI.
    hostname: String,
    port: u16,
    /// The `Host` header: the host, with the port when it is not the scheme's default.
    authority: String,
    /// Path and query.
    path: String,
}

fn target_of(url: &str) -> Result<UrlTarget, Failure> {
    let parsed =
        url::Url::parse(url).map_err(|e| Failure::caused(format!("unusable URL `{url}`"), e))?;
    let tls = match parsed.scheme() {
        "https" => true,
        "http" => false,
        other => return Err(Failure::new(format!("`{url}`: `{other}:` is not http(s)"))),
    };
    let Some(host) = parsed.host() else {
        return Err(Failure::new(format!("`{url}` names no host")));
    };
    let hostname = match host {
        url::Host::Domain(name) => name.to_string(),
        url::Host::Ipv4(ip) => ip.to_string(),
        url::Host::Ipv6(ip) => ip.to_string(),
    };
    let port = parsed
        .port_or_known_default()
        .unwrap_or(if tls { 443 } else { 80 });
    let authority = match (parsed.port(), host) {
        (Some(port), url::Host::Ipv6(ip)) => format!("[{ip}]:{port}"),
        (Some(port), _) => format!("{hostname}:{port}"),
        (None, url::Host::Ipv6(ip)) => format!("[{ip}]"),
        (None, _) => hostname.clone(),
    };
    let mut path = parsed.path().to_string();
    if let Some(query) = parsed.query() {
        path.push('?');
        path.push_str(query);
    }
    Ok(UrlTarget {
        tls,
        hostname,
        port,
        authority,
        path,
    })
}

/// Whether an address can be on the public internet ([`crate::config::is_public_address`]).
pub fn is_public_address(ip: IpAddr) -> bool {
    crate::config::is_public_address(ip)
}

/// The first address `host` resolves to, on `port`.
async fn resolve(host: &str, port: u16) -> Result<SocketAddr, Failure> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| Failure::caused(format!("cannot resolve `{host}`"), e))?
        .next()
        .ok_or_else(|| Failure::new(format!("`{host}` resolves to no address")))
}

/// GETs `url` (http or https), conditionally when `validators` hold an ETag or Last-Modified,
/// within `timeout` in all (name resolution included), through `proxy` when given (a tunnel by
/// CONNECT; the proxy resolves the host). At most `max_size` decoded body bytes are read
/// (`Answer::over_limit` says more were sent). Certificates are verified against the platform's
/// roots (`SSL_CERT_FILE` and `SSL_CERT_DIR` are honoured), through the tunnel too.
///
/// With `allowed`, the fetch is refused before any connection ([`Failure::is_refused`]) when the
/// host resolves to an address `allowed` refuses (a URL someone else named must not reach the
/// local network: [`is_public_address`]). The address checked is the one connected to, so a name
/// cannot resolve differently between the check and the connection; through an HTTP proxy the
/// host is resolved here too, for the check. Redirects are returned, not followed: a caller
/// that follows one calls again, so every hop is checked.
pub async fn get_url_to(
    connector: &Connector,
    url: &str,
    validators: &Validators,
    max_size: usize,
    timeout: Duration,
    proxy: Option<&FetchProxy>,
    allowed: Option<fn(IpAddr) -> bool>,
) -> Result<Answer, Failure> {
    let target = target_of(url)?;
    let proxy = proxy.filter(|proxy| !proxy.bypasses(&target.hostname));
    let attempt = async {
        let checked = |address: SocketAddr| {
            if allowed.is_none_or(|allowed| allowed(address.ip())) {
                Ok(address)
            } else {
                Err(Failure::refused(format!(
                    "`{}` resolves to {}, which is not a public address",
                    target.hostname,
                    address.ip()
                )))
            }
        };
        let mut peer = match proxy {
            None => HttpPeer::new(
                checked(resolve(&target.hostname, target.port).await?)?,
                target.tls,
                target.hostname.clone(),
            ),
            Some(proxy) => {
                if allowed.is_some() {
                    checked(resolve(&target.hostname, target.port).await?)?;
                }
                let address = resolve(&proxy.host, proxy.port)
                    .await
                    .map_err(|e| Failure::caused(format!("the proxy of {}", proxy.from), e))?;
                let mut peer = HttpPeer::new(address, target.tls, target.hostname.clone());
                peer.options.custom_l4 = Some(Arc::new(Tunnel {
                    authority: target.connect_authority(),
                    credentials: proxy.credentials.clone(),
                }));
                // Pooled connections are told apart by address: each tunnel goes elsewhere.
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                target.connect_authority().hash(&mut hasher);
                peer.group_key = hasher.finish();
                peer
            }
        };
        peer.options.connection_timeout = Some(timeout);
        peer.options.total_connection_timeout = Some(timeout);
        peer.options.read_timeout = Some(timeout);
        peer.options.write_timeout = Some(timeout);
        let accept = [(
            "accept",
            "application/json, application/http-message-signatures-directory+json, */*;q=0.1",
        )];
        exchange(
            connector,
            &peer,
            &target.authority,
            &target.path,
            &accept,
            validators,
            max_size,
        )
        .await
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(answer) => answer,
        Err(_) => Err(Failure::new(format!(
            "no answer from `{url}` within {timeout:?}"
        ))),
    }
}

/// The most of an answer's body a POST reads (and throws away) before it lets the connection go.
const MAX_POST_ANSWER: usize = 64 * 1024;

/// POSTs `body` to `url` (http or https) with `headers` besides `Host`, `User-Agent` and
/// `Content-Length`, within `timeout` in all (name resolution included), directly (no proxy).
/// The address the host resolves to is checked with `allowed` before connecting (the one
/// connected to, so a name cannot answer differently between the check and the connection):
/// refused ([`Failure::is_refused`]) when it is not allowed. Answers the status and the
/// `Location` of a redirect, which is never followed.
pub(crate) async fn post_url(
    connector: &Connector,
    url: &str,
    headers: &[(&str, &str)],
    body: bytes::Bytes,
    timeout: Duration,
    allowed: &(dyn Fn(IpAddr) -> bool + Send + Sync),
) -> Result<(u16, Option<String>), Failure> {
    let target = target_of(url)?;
    let attempt = async {
        let address = resolve(&target.hostname, target.port).await?;
        if !allowed(address.ip()) {
            return Err(Failure::refused(format!(
                "`{}` resolves to {}, which webhooks may not reach (not public, not in events.private_targets)",
                target.hostname,
                address.ip()
            )));
        }
        let mut peer = HttpPeer::new(address, target.tls, target.hostname.clone());
        peer.options.connection_timeout = Some(timeout);
        peer.options.total_connection_timeout = Some(timeout);
        peer.options.read_timeout = Some(timeout);
        peer.options.write_timeout = Some(timeout);
        let (mut session, _) = connector
            .get_http_session(&peer)
            .await
            .map_err(|e| Failure::caused(format!("cannot connect to {address}"), e))?;
        let mut request = pingora::http::RequestHeader::build("POST", target.path.as_bytes(), None)
            .map_err(|e| Failure::caused(format!("bad path `{}`", target.path), e))?;
        let user_agent = super::http::user_agent();
        let length = body.len().to_string();
        let mut all: Vec<(&str, &str)> = vec![
            ("host", &target.authority),
            ("user-agent", &user_agent),
            ("content-length", &length),
        ];
        all.extend_from_slice(headers);
        for (name, value) in all {
            request
                .insert_header(name.to_string(), value)
                .map_err(|e| Failure::caused("cannot build the request", e))?;
        }
        session
            .write_request_header(Box::new(request))
            .await
            .map_err(|e| Failure::caused("cannot send the request", e))?;
        session
            .write_request_body(body, true)
            .await
            .map_err(|e| Failure::caused("cannot send the body", e))?;
        session
            .finish_request_body()
            .await
            .map_err(|e| Failure::caused("cannot send the body", e))?;
        session
            .read_response_header()
            .await
            .map_err(|e| Failure::caused("no answer", e))?;
        let Some(response) = session.response_header() else {
            return Err(Failure::new("no answer"));
        };
        let status = response.status.as_u16();
        let location = response
            .headers
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // What the receiver says is not used; read a little so the exchange ends cleanly.
        let mut read = 0;
        while read < MAX_POST_ANSWER {
            match session.read_response_body().await {
                Ok(Some(chunk)) => read += chunk.len(),
                Ok(None) | Err(_) => break,
            }
        }
        Ok((status, location))
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(answer) => answer,
        Err(_) => Err(Failure::new(format!(
            "no answer from `{url}` within {timeout:?}"
        ))),
    }
}

impl UrlTarget {
    /// `host:port` as CONNECT names it (IPv6 in brackets).
    fn connect_authority(&self) -> String {
        if self.hostname.contains(':') {
            format!("[{}]:{}", self.hostname, self.port)
        } else {
            format!("{}:{}", self.hostname, self.port)
        }
    }
}

/// Opens connections through an HTTP proxy: a TCP connection to the proxy (the peer's address),
/// `CONNECT authority`, and the tunnel it answers `2xx` with. TLS, when used, runs through it.
#[derive(Debug)]
struct Tunnel {
    authority: String,
    credentials: Option<String>,
}

#[async_trait]
impl L4Connect for Tunnel {
    async fn connect(&self, proxy: &PeerAddr) -> pingora::Result<Stream> {
        let Some(address) = proxy.as_inet() else {
            return Error::e_explain(ErrorType::ConnectError, "the proxy is not a TCP address");
        };
        let fail = |what: String| Error::explain(ErrorType::ConnectError, what);
        let mut tcp = tokio::net::TcpStream::connect(address)
            .await
            .map_err(|e| fail(format!("cannot connect to the proxy {address}: {e}")))?;
        let mut head = format!(
            "CONNECT {0} HTTP/1.1\r\nHost: {0}\r\nUser-Agent: {1}\r\n",
            self.authority,
            super::http::user_agent()
        );
        if let Some(credentials) = &self.credentials {
            use base64::Engine as _;
            let encoded = base64::engine::general_purpose::STANDARD.encode(credentials);
            head.push_str(&format!("Proxy-Authorization: Basic {encoded}\r\n"));
        }
        head.push_str("\r\n");
        tcp.write_all(head.as_bytes())
            .await
            .map_err(|e| fail(format!("the proxy {address}: {e}")))?;
        // Byte by byte: what follows the head is the tunnel's, and must stay in the stream.
        let mut answer = Vec::with_capacity(256);
        while !answer.ends_with(b"\r\n\r\n") {
            if answer.len() >= MAX_CONNECT_HEAD {
                return Err(fail(format!(
                    "the proxy {address} answered CONNECT with a head over {MAX_CONNECT_HEAD} bytes"
                )));
            }
            let byte = tcp
                .read_u8()
                .await
                .map_err(|e| fail(format!("the proxy {address} closed the tunnel: {e}")))?;
            answer.push(byte);
        }
        let status_line = answer.split(|b| *b == b'\r').next().unwrap_or_default();
        let status = std::str::from_utf8(status_line)
            .ok()
            .and_then(|line| line.split(' ').nth(1))
            .and_then(|code| code.parse::<u16>().ok());
        match status {
            Some(200..=299) => Ok(Stream::from(tcp)),
            _ => Err(fail(format!(
                "the proxy {address} refused CONNECT {}: {}",
                self.authority,
                crate::logs::escape_client_text(status_line)
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_of_urls() {
        let t = target_of("https://developers.google.com/static/x.json?v=1#top").ok();
        assert_eq!(
            t,
            Some(UrlTarget {
                tls: true,
                hostname: "developers.google.com".into(),
                port: 443,
                authority: "developers.google.com".into(),
                path: "/static/x.json?v=1".into(),
            })
        );
        let t = target_of("http://127.0.0.1:8080/list").ok();
        assert_eq!(
            t.map(|t| (t.port, t.authority)),
            Some((8080, "127.0.0.1:8080".into()))
        );
        let t = target_of("https://[2001:db8::1]:8443/").ok();
        assert_eq!(
            t.map(|t| (t.hostname, t.authority)),
            Some(("2001:db8::1".into(), "[2001:db8::1]:8443".into()))
        );
        assert!(target_of("ftp://example.com/x").is_err());
        assert!(target_of("file:/etc/passwd").is_err());
        assert!(target_of("not a url").is_err());
    }

    /// Serves one connection: records the request head, answers with `response`.
    fn serve_once(response: &'static str) -> (SocketAddr, std::thread::JoinHandle<String>) {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("address");
        let handle = std::thread::spawn(move || {
            let Ok((mut stream, _)) = listener.accept() else {
                return String::new();
            };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
                match stream.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            let _ = stream.write_all(response.as_bytes());
            String::from_utf8_lossy(&head).into_owned()
        });
        (addr, handle)
    }

    #[test]
    fn a_conditional_get_of_a_url() {
        let (addr, server) =
            serve_once("HTTP/1.1 304 Not Modified\r\netag: \"v1\"\r\ncontent-length: 0\r\n\r\n");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let validators = Validators {
            etag: Some("\"v1\"".into()),
            last_modified: None,
        };
        let answer = runtime.block_on(get_url_to(
            &Connector::new(None),
            &format!("http://{addr}/ranges.json?x=1"),
            &validators,
            1024,
            Duration::from_secs(5),
            None,
            None,
        ));
        let head = server.join().unwrap_or_default().to_ascii_lowercase();
        assert!(
            head.starts_with("get /ranges.json?x=1 http/1.1\r\n"),
            "{head}"
        );
        assert!(head.contains(&format!("host: {addr}\r\n")), "{head}");
        assert!(head.contains("if-none-match: \"v1\"\r\n"), "{head}");
        let answer = answer.map_err(|e| e.to_string());
        assert_eq!(
            answer.map(|a| (a.status, a.etag)),
            Ok((304, Some("\"v1\"".into())))
        );
    }

    #[test]
    fn a_silent_server_is_given_up_on_at_the_timeout() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("address");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let answer = runtime.block_on(get_url_to(
            &Connector::new(None),
            &format!("http://{addr}/"),
            &Validators::default(),
            1024,
            Duration::from_millis(300),
            None,
            None,
        ));
        drop(listener);
        assert!(answer.is_err());
    }
}
