//! GETs of absolute `http(s)://` URLs that belong to no origin: published IP range lists and Web
//! Bot Auth key directories. The same connector, body limit and gzip handling as robots.txt
//! fetches; the host is resolved here, and redirects are returned, never followed (each caller
//! has its own rule: range lists follow a few, key directories none).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use pingora::connectors::http::Connector;
use pingora::upstreams::peer::HttpPeer;

use super::http::{exchange, Answer, Failure, Validators};

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

/// GETs `url` (http or https), conditionally when `validators` hold an ETag or Last-Modified,
/// within `timeout` in all (name resolution included). At most `max_size` decoded body bytes are
/// read (`Answer::over_limit` says more were sent). Certificates are verified against the
/// platform's roots (`SSL_CERT_FILE` and `SSL_CERT_DIR` are honoured).
pub async fn get_url(
    connector: &Connector,
    url: &str,
    validators: &Validators,
    max_size: usize,
    timeout: Duration,
) -> Result<Answer, Failure> {
    let target = target_of(url)?;
    let attempt = async {
        let address = match target.hostname.parse::<IpAddr>() {
            Ok(ip) => SocketAddr::new(ip, target.port),
            Err(_) => tokio::net::lookup_host((target.hostname.as_str(), target.port))
                .await
                .map_err(|e| Failure::caused(format!("cannot resolve `{}`", target.hostname), e))?
                .next()
                .ok_or_else(|| {
                    Failure::new(format!("`{}` resolves to no address", target.hostname))
                })?,
        };
        let mut peer = HttpPeer::new(address, target.tls, target.hostname.clone());
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
        let answer = runtime.block_on(get_url(
            &Connector::new(None),
            &format!("http://{addr}/ranges.json?x=1"),
            &validators,
            1024,
            Duration::from_secs(5),
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
        let answer = runtime.block_on(get_url(
            &Connector::new(None),
            &format!("http://{addr}/"),
            &Validators::default(),
            1024,
            Duration::from_millis(300),
        ));
        drop(listener);
        assert!(answer.is_err());
    }
}
