//! robots.txt acquisition per RFC 9309, against real origins on loopback that answer exactly as
//! scripted: status classes, redirects, gzip, conditional refreshes, the last good copy, dead and
//! broken connections, oversized bodies, watched files — and the metrics of each outcome.

use crate::support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use support::{metric, Proxy};

const CRAWLER: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
const HOST: &str = "shop.example";

/// A request as the scripted origin read it.
#[derive(Debug, Clone)]
struct Head {
    path: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What the scripted origin does with one request.
enum Reply {
    /// Write these bytes (a whole HTTP response), then close.
    Bytes(Vec<u8>),
    /// Read the request, then never answer (until the origin is dropped or 30 s pass).
    Hang,
    /// Close the connection without answering.
    Close,
}

type Script = Box<dyn Fn(&Head, usize) -> Reply + Send>;

/// An origin whose every answer is decided by a script (swappable mid-test). Each connection
/// carries one request and is closed after it, which keeps the server simple and bounded.
struct Scripted {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Head>>>,
    script: Arc<Mutex<Script>>,
    stop: Arc<AtomicBool>,
}

impl Scripted {
    fn start(script: impl Fn(&Head, usize) -> Reply + Send + 'static) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").expect("origin binds");
        listener.set_nonblocking(true).expect("non-blocking accept");
        let addr = listener.local_addr().expect("origin address");
        let requests: Arc<Mutex<Vec<Head>>> = Arc::default();
        let script: Arc<Mutex<Script>> = Arc::new(Mutex::new(Box::new(script)));
        let stop = Arc::new(AtomicBool::new(false));
        let (requests_c, script_c, stop_c) = (requests.clone(), script.clone(), stop.clone());
        thread::spawn(move || {
            // Bounded: stops when the test drops the origin, and after 120 s at most.
            let deadline = Instant::now() + Duration::from_secs(120);
            while !stop_c.load(Ordering::Relaxed) && Instant::now() < deadline {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (requests, script, stop) =
                            (requests_c.clone(), script_c.clone(), stop_c.clone());
                        thread::spawn(move || serve(stream, &requests, &script, &stop));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Scripted {
            addr,
            requests,
            script,
            stop,
        }
    }

    fn set(&self, script: impl Fn(&Head, usize) -> Reply + Send + 'static) {
        *self.script.lock().expect("script lock") = Box::new(script);
    }

    fn requests(&self) -> Vec<Head> {
        self.requests.lock().expect("requests lock").clone()
    }

    fn count(&self, path: &str) -> usize {
        self.requests().iter().filter(|h| h.path == path).count()
    }

    /// The proxy config for this origin; `robots` is the origin's `robots:` mapping body.
    fn config(&self, robots: &str) -> String {
        format!(
            "origins:\n  - name: shop\n    hosts: [\"{HOST}\", \"www.{HOST}\"]\n    upstream: \"{}\"\n    robots: {{{robots}}}\n",
            self.addr
        )
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve(
    mut stream: TcpStream,
    requests: &Mutex<Vec<Head>>,
    script: &Mutex<Script>,
    stop: &AtomicBool,
) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
        if buffer.len() > 64 * 1024 {
            return;
        }
    }
    let text = String::from_utf8_lossy(&buffer).into_owned();
    let mut lines = text.split("\r\n");
    let path = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .unwrap_or("/")
        .to_string();
    let headers = lines
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let head = Head { path, headers };
    let index = {
        let mut requests = requests.lock().expect("requests lock");
        requests.push(head.clone());
        requests.len()
    };
    let reply = (script.lock().expect("script lock"))(&head, index);
    match reply {
        Reply::Bytes(bytes) => {
            let _ = stream.write_all(&bytes);
        }
        Reply::Hang => {
            let until = Instant::now() + Duration::from_secs(30);
            while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                thread::sleep(Duration::from_millis(20));
            }
        }
        Reply::Close => {}
    }
}

fn response(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut out = format!(
        "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    Reply::Bytes(bytes)
}

fn page(head: &Head) -> Reply {
    response(200, &[], format!("page {}", head.path).as_bytes())
}

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

/// A site whose robots.txt disallows /private, pages everywhere else.
fn site(head: &Head, _: usize) -> Reply {
    if head.path == "/robots.txt" {
        response(200, &[("content-type", "text/plain")], ROBOTS.as_bytes())
    } else {
        page(head)
    }
}

/// Polls `check` every 50 ms until it holds or `seconds` pass; returns whether it held.
fn eventually(seconds: u64, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        thread::sleep(Duration::from_millis(50));
    }
    check()
}

fn status(proxy: &Proxy, path: &str, user_agent: &str) -> u16 {
    proxy.get(HOST, path, user_agent).status
}

fn fetches(proxy: &Proxy, outcome: &str) -> f64 {
    metric(
        &proxy.metrics(),
        "robotsguard_robots_fetches_total",
        &[("origin", "shop"), ("outcome", outcome)],
    )
}

fn state(proxy: &Proxy) -> String {
    let (_, explain) = proxy.explain(HOST, CRAWLER, "/");
    explain["robots"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_200_puts_the_file_in_force_and_the_fetch_looks_right() {
    let origin = Scripted::start(site);
    let proxy = Proxy::start(&origin.config("source: origin"));
    assert_eq!(status(&proxy, "/private/x", CRAWLER), 403);
    assert_eq!(status(&proxy, "/public", CRAWLER), 200);
    assert_eq!(status(&proxy, "/private/x", BROWSER), 200);
    let fetch = origin
        .requests()
        .into_iter()
        .find(|h| h.path == "/robots.txt")
        .expect("robots.txt fetched");
    assert_eq!(fetch.header("host"), Some(HOST));
    assert!(fetch
        .header("user-agent")
        .is_some_and(|ua| ua.starts_with("robotsguard/")));
    assert!(fetch
        .header("accept-encoding")
        .is_some_and(|e| e.contains("gzip")));
    assert!(fetches(&proxy, "ok") >= 1.0);
    let (_, explain) = proxy.explain(HOST, CRAWLER, "/private/x");
    assert_eq!(explain["robots"]["http_status"], 200);
    assert_eq!(explain["robots"]["state"], "conditional");
    let copy = proxy.admin_get("/robots?origin=shop");
    assert_eq!(copy.text(), ROBOTS);
    let metrics = proxy.metrics();
    assert_eq!(
        metric(
            &metrics,
            "robotsguard_robots_state",
            &[("origin", "shop"), ("state", "conditional")]
        ),
        1.0
    );
    assert_eq!(
        metric(&metrics, "robotsguard_robots_bytes", &[("origin", "shop")]),
        ROBOTS.len() as f64
    );
    assert_eq!(
        metric(&metrics, "robotsguard_robots_rules", &[("origin", "shop")]),
        1.0
    );
}

#[test]
fn a_gzip_body_is_decoded() {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(ROBOTS.as_bytes()).expect("gzip");
    let compressed = encoder.finish().expect("gzip");
    let origin = Scripted::start(move |head, _| {
        if head.path == "/robots.txt" {
            response(200, &[("content-encoding", "gzip")], &compressed)
        } else {
            page(head)
        }
    });
    let proxy = Proxy::start(&origin.config("source: origin"));
    assert_eq!(status(&proxy, "/private/x", CRAWLER), 403);
    assert_eq!(proxy.admin_get("/robots?origin=shop").text(), ROBOTS);
}

#[test]
fn a_304_keeps_the_copy_and_counts_not_modified() {
    let origin = Scripted::start(|head, _| {
        if head.path != "/robots.txt" {
            return page(head);
        }
        if head.header("if-none-match") == Some("\"v1\"") {
            return response(304, &[("etag", "\"v1\"")], b"");
        }
        response(200, &[("etag", "\"v1\"")], ROBOTS.as_bytes())
    });
    let proxy = Proxy::start(&origin.config("source: origin, refresh: 1s"));
    assert!(
        eventually(15, || fetches(&proxy, "not_modified") >= 1.0),
        "no conditional refresh was answered 304"
    );
    assert!(origin
        .requests()
        .iter()
        .any(|h| h.path == "/robots.txt" && h.header("if-none-match") == Some("\"v1\"")));
    assert_eq!(status(&proxy, "/private/x", CRAWLER), 403);
    assert_eq!(state(&proxy), "conditional");
}

#[test]
fn a_redirect_on_the_same_host_is_followed() {
    let origin = Scripted::start(|head, _| match head.path.as_str() {
        "/robots.txt" => response(
            301,
            &[("location", "http://www.shop.example/real-robots.txt")],
            b"",
        ),
        "/real-robots.txt" => response(200, &[], ROBOTS.as_bytes()),
        _ => page(head),
    });
    let proxy = Proxy::start(&origin.config("source: origin"));
    assert_eq!(status(&proxy, "/private/x", CRAWLER), 403);
    let followed = origin
        .requests()
        .into_iter()
        .find(|h| h.path == "/real-robots.txt")
        .expect("redirect followed");
    assert_eq!(followed.header("host"), Some("www.shop.example"));
}

#[test]
fn a_relative_redirect_to_a_query_keeps_the_path() {
    // RFC 3986 §5.2: `?x` replaces only the query of /robots.txt.
    let origin = Scripted::start(|head, _| match head.path.as_str() {
        "/robots.txt" => response(302, &[("location", "?x")], b""),
        "/robots.txt?x" => response(200, &[], ROBOTS.as_bytes()),
        _ => page(head),
    });
    let proxy = Proxy::start(&origin.config("source: origin"));
    assert_eq!(status(&proxy, "/private/x", CRAWLER), 403);
    assert_eq!(origin.count("/robots.txt?x"), 1, "{:?}", origin.requests());
    assert_eq!(origin.count("/?x"), 0);
}

#[test]
fn a_relative_redirect_with_dot_segments_is_merged() {
    // RFC 3986 §5.2.4: from /b/robots.txt, `../a/robots.txt` is /a/robots.txt.
    let origin = Scripted::start(|head, _| match head.path.as_str() {
        "/b/robots.txt" => response(301, &[("location", "../a/robots.txt")], b""),
        "/a/robots.txt" => response(200, &[], ROBOTS.as_bytes()),
        _ => page(head),
    });
    let proxy = Proxy::start(&origin.config("source: origin, url: /b/robots.txt"));
    assert_eq!(status(&proxy, "/private/x", CRAWLER), 403);
    let paths: Vec<String> = origin.requests().into_iter().map(|h| h.path).collect();
    assert!(
        paths.iter().any(|p| p == "/a/robots.txt"),
        "the merged path was fetched: {paths:?}"
    );
    assert!(
        !paths.iter().any(|p| p.contains("..")),
        "no dot segments reach the origin: {paths:?}"
    );
}

#[test]
fn six_redirects_are_too_many_and_allow_everything() {
    let origin = Scripted::start(|head, _| {
        if let Some(hop) = head.path.strip_prefix("/hop") {
            let next: u32 = hop.parse().unwrap_or(0) + 1;
            return response(302, &[("location", &format!("/hop{next}"))], b"");
        }
        match head.path.as_str() {
            "/robots.txt" => response(302, &[("location", "/hop1")], b""),
            _ => page(head),
        }
    });
    let proxy = Proxy::start(&origin.config("source: origin"));
    assert_eq!(status(&proxy, "/private/x", CRAWLER), 200);
    assert_eq!(state(&proxy), "allow_all");
    assert!(fetches(&proxy, "redirect_limit") >= 1.0);
    assert_eq!(
        origin.count("/hop5"),
        1,
        "the fifth redirect target is fetched"
    );
    assert_eq!(origin.count("/hop6"), 0, "a sixth redirect is not followed");
}

#[test]
fn a_redirect_to_another_host_or_scheme_is_refused() {
    for location in [
        "http://evil.example/robots.txt",
        "http://127.0.0.1/robots.txt",
        "ftp://shop.example/robots.txt",
    ] {
        let origin = Scripted::start(move |head, _| match head.path.as_str() {
            "/robots.txt" => response(301, &[("location", location)], b""),
            _ => page(head),
        });
        let proxy = Proxy::start(&origin.config("source: origin"));
        assert_eq!(state(&proxy), "allow_all", "{location}");
        assert!(fetches(&proxy, "refused_redirect") >= 1.0, "{location}");
        assert_eq!(
            origin
                .requests()
                .iter()
                .filter(|h| h.path == "/robots.txt")
                .count(),
            1,
            "{location}"
        );
        assert!(origin
            .requests()
            .iter()
            .all(|h| h.header("host") != Some("evil.example")));
    }
}

/// Serves ROBOTS until `broken` is set, then what `broken_reply` says for /robots.txt.
fn switchable(broken_reply: fn(&Head) -> Reply) -> (Scripted, Arc<AtomicBool>) {
    let broken = Arc::new(AtomicBool::new(false));
    let flag = broken.clone();
    let origin = Scripted::start(move |head, index| {
        if head.path.starts_with("/robots.txt") && flag.load(Ordering::Relaxed) {
            broken_reply(head)
        } else {
            site(head, index)
        }
    });
    (origin, broken)
}

#[test]
fn a_429_keeps_the_good_copy() {
    let (origin, broken) = switchable(|_| response(429, &[("retry-after", "1")], b"slow down"));
    let proxy = Proxy::start(&origin.config("source: origin, refresh: 1s"));
    assert_eq!(status(&proxy, "/private/x", CRAWLER), 403);
    broken.store(true, Ordering::Relaxed);
    assert!(
        eventually(10, || fetches(&proxy, "rate_limited") >= 2.0),
        "429s were not retried"
    );
    // Anyone who can flood the origin through the proxy can provoke a 429: it lifts nothing.
    assert_eq!(status(&proxy, "/private/x", CRAWLER), 403);
    assert_eq!(state(&proxy), "conditional");
}

#[test]
fn a_first_4xx_keeps_the_good_copy() {
    let (origin, broken) = switchable(|_| response(403, &[], b"challenge"));
    let proxy = Proxy::start(&origin.config("source: origin, refresh: 1s"));
    assert_eq!(status(&proxy, "/private/x", CRAWLER), 403);
    broken.store(true, Ordering::Relaxed);
    assert!(eventually(10, || fetches(&proxy, "unavailable") >= 1.0));
    assert_eq!(status(&proxy, "/private/x", CRAWLER), 403);
    let (_, explain) = proxy.explain(HOST, CRAWLER, "/private/x");
    assert_eq!(explain["robots"]["state"], "conditional", "{explain}");
    let described = explain["robots"]["description"].as_str().unwrap_or("");
    assert!(described.contains("confirm"), "{explain}");
    // The confirming fetch waits a minute; until then, no refetch hammers the origin.
    let fetched = origin.count("/robots.txt");
    thread::sleep(Duration::from_secs(3));
    assert_eq!(origin.count("/robots.txt"), fetched);
    // Back to 200 before confirmation: the rules never lapsed.
    broken.store(false, Ordering::Relaxed);
    assert_eq!(status(&proxy, "/private/x", CRAWLER), 403);
}

#[test]
fn redirect_failures_keep_a_young_good_copy() {
    for (name, reply) in [
        (
            "redirect_loop",
            (|_| response(302, &[("location", "/robots.txt")], b"")) as fn(&Head) -> Reply,
        ),
        ("refused_redirect", |_| {
            response(301, &[("location", "http://evil.example/robots.txt")], b"")
        }),
        ("redirect_limit", |head| {
            let hop: u32 = head
                .path
                .trim_start_matches("/robots.txt?")
                .parse()
                .unwrap_or(0);
            response(
                302,
                &[("location", &format!("/robots.txt?{}", hop + 1))],
                b"",
            )
        }),
    ] {
        let (origin, broken) = switchable(reply);
        let proxy = Proxy::start(&origin.config("source: origin, refresh: 1s"));
        assert_eq!(status(&proxy, "/private/x", CRAWLER), 403, "{name}");
        broken.store(true, Ordering::Relaxed);
        assert!(eventually(10, || fetches(&proxy, name) >= 1.0), "{name}");
        assert_eq!(status(&proxy, "/private/x", CRAWLER), 403, "{name}");
        assert_eq!(state(&proxy), "conditional", "{name}");
    }
}

#[test]
fn a_redirect_to_the_url_just_asked_is_a_loop() {
    let origin = Scripted::start(|head, _| match head.path.as_str() {
        "/robots.txt" => response(301, &[("location", "http://shop.example/robots.txt")], b""),
        _ => page(head),
    });
    let proxy = Proxy::start(&origin.config("source: origin, refresh: 1h"));
    // No earlier copy: RFC 9309's "unavailable".
    assert_eq!(state(&proxy), "allow_all");
    assert!(fetches(&proxy, "redirect_loop") >= 1.0);
    assert_eq!(origin.count("/robots.txt"), 1, "the loop is seen at once");
}

#[test]
fn an_origin_behind_tls_sees_the_fetch_as_https_after_its_redirect() {
    // Rails `force_ssl` or Django's SECURE_SSL_REDIRECT behind a TLS proxy: plain requests are
    // redirected to https unless X-Forwarded-Proto says https.
    let origin = Scripted::start(|head, index| {
        if head.path == "/robots.txt" && head.header("x-forwarded-proto") != Some("https") {
            return response(301, &[("location", "https://shop.example/robots.txt")], b"");
        }
        site(head, index)
    });
    let proxy = Proxy::start(&origin.config("source: origin"));
    assert_eq!(status(&proxy, "/private/x", CRAWLER), 403);
    assert_eq!(state(&proxy), "conditional");
    let asked: Vec<Head> = origin
        .requests()
        .into_iter()
        .filter(|h| h.path == "/robots.txt")
        .collect();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(asked[0].header("x-forwarded-proto"), Some("http"));
    assert_eq!(asked[1].header("x-forwarded-proto"), Some("https"));
    assert_eq!(asked[1].header("x-forwarded-host"), Some(HOST));
}

#[test]
fn client_errors_mean_no_restrictions() {
    for code in [404, 401, 403, 410] {
        let origin = Scripted::start(move |head, _| match head.path.as_str() {
            "/robots.txt" => response(code, &[], b"nope"),
            _ => page(head),
        });
        let proxy = Proxy::start(&origin.config("source: origin"));
        assert_eq!(status(&proxy, "/private/x", CRAWLER), 200, "HTTP {code}");
        assert_eq!(state(&proxy), "allow_all", "HTTP {code}");
        assert!(fetches(&proxy, "unavailable") >= 1.0);
    }
}

#[test]
fn a_server_error_with_no_copy_blocks_crawlers_but_not_browsers() {
    let origin = Scripted::start(|head, _| match head.path.as_str() {
        "/robots.txt" => response(500, &[], b"oops"),
        _ => page(head),
    });
    let proxy = Proxy::start(&origin.config("source: origin"));
    assert_eq!(status(&proxy, "/anything", CRAWLER), 403);
    assert_eq!(status(&proxy, "/anything", BROWSER), 200);
    assert_eq!(state(&proxy), "disallow_all");
    assert!(fetches(&proxy, "unreachable") >= 1.0);
    let metrics = proxy.metrics();
    assert!(
        metric(
            &metrics,
            "robotsguard_robots_last_error_timestamp_seconds",
            &[("origin", "shop")]
        ) > 1.6e9
    );
}

#[test]
fn fail_open_allows_crawlers_while_unreachable() {
    let origin = Scripted::start(|head, _| match head.path.as_str() {
        "/robots.txt" => response(502, &[], b""),
        _ => page(head),
    });
    let proxy = Proxy::start(&origin.config("source: origin, on_unreachable: allow"));
    assert_eq!(status(&proxy, "/anything", CRAWLER), 200);
    assert_eq!(state(&proxy), "allow_all");
}

#[test]
fn a_server_error_after_a_good_copy_keeps_the_copy() {
    let origin = Scripted::start(site);
    let proxy = Proxy::start(&origin.config("source: origin, refresh: 1s"));
    assert_eq!(status(&proxy, "/private/x", CRAWLER), 403);
    origin.set(|head, _| match head.path.as_str() {
        "/robots.txt" => response(500, &[], b""),
        _ => page(head),
    });
    assert!(
        eventually(15, || fetches(&proxy, "unreachable") >= 1.0),
        "the failing refresh happened"
    );
    assert_eq!(status(&proxy, "/private/x", CRAWLER), 403);
    assert_eq!(status(&proxy, "/public", CRAWLER), 200);
    let (_, explain) = proxy.explain(HOST, CRAWLER, "/private/x");
    assert_eq!(explain["robots"]["state"], "conditional");
    assert!(explain["robots"]["last_error"]
        .as_str()
        .is_some_and(|e| e.contains("500")));
}

#[test]
fn a_503_is_retried_and_recovers() {
    let origin = Scripted::start(|head, _| match head.path.as_str() {
        "/robots.txt" => response(503, &[("retry-after", "1")], b""),
        _ => page(head),
    });
    let proxy = Proxy::start(&origin.config("source: origin, refresh: 1h"));
    assert_eq!(state(&proxy), "disallow_all");
    origin.set(site);
    // Retry-After: 1 brings the next fetch well before the one-hour refresh.
    assert!(
        eventually(20, || state(&proxy) == "conditional"),
        "recovered after the 503"
    );
    assert_eq!(status(&proxy, "/public", CRAWLER), 200);
    assert_eq!(status(&proxy, "/private/x", CRAWLER), 403);
}

#[test]
fn a_retry_after_http_date_brings_the_retry_forward() {
    // Without a usable Retry-After the first retry after a 503 comes 5 s later; an HTTP-date
    // two seconds ahead must bring it to within about two.
    let origin = Scripted::start(|head, _| match head.path.as_str() {
        "/robots.txt" => {
            let at = std::time::SystemTime::now() + Duration::from_secs(2);
            response(503, &[("retry-after", &httpdate::fmt_http_date(at))], b"")
        }
        _ => page(head),
    });
    let proxy = Proxy::start(&origin.config("source: origin, refresh: 1h"));
    assert_eq!(state(&proxy), "disallow_all");
    let asked = Instant::now();
    origin.set(site);
    assert!(
        eventually(4, || state(&proxy) == "conditional"),
        "retried at the date the origin gave"
    );
    assert!(asked.elapsed() < Duration::from_millis(4500));
}

#[test]
fn an_origin_that_never_answers_is_unreachable_after_the_timeout() {
    let origin = Scripted::start(|head, _| match head.path.as_str() {
        "/robots.txt" => Reply::Hang,
        _ => page(head),
    });
    let proxy = Proxy::start(&origin.config("source: origin, timeout: 1s"));
    assert_eq!(state(&proxy), "disallow_all");
    let (_, explain) = proxy.explain(HOST, CRAWLER, "/");
    assert!(
        explain["robots"]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("no answer")),
        "{explain}"
    );
}

#[test]
fn a_closed_connection_is_unreachable() {
    let origin = Scripted::start(|head, _| match head.path.as_str() {
        "/robots.txt" => Reply::Close,
        _ => page(head),
    });
    let proxy = Proxy::start(&origin.config("source: origin"));
    assert_eq!(state(&proxy), "disallow_all");
    assert!(fetches(&proxy, "unreachable") >= 1.0);
}

#[test]
fn a_truncated_chunked_body_is_unreachable() {
    let origin = Scripted::start(|head, _| {
        match head.path.as_str() {
        "/robots.txt" => Reply::Bytes(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n40\r\nUser-agent: *\nDisallow: /pri".to_vec(),
        ),
        _ => page(head),
    }
    });
    let proxy = Proxy::start(&origin.config("source: origin"));
    assert_eq!(state(&proxy), "disallow_all");
    assert!(fetches(&proxy, "unreachable") >= 1.0);
}

#[test]
fn only_the_first_500_kib_of_a_10_mb_body_are_used() {
    let mut body = b"User-agent: *\nDisallow: /early\n".to_vec();
    body.resize(600 * 1024, b'\n');
    body.extend_from_slice(b"Disallow: /late\n");
    body.resize(10 * 1024 * 1024, b'#');
    let body = Arc::new(body);
    let origin = Scripted::start(move |head, _| match head.path.as_str() {
        "/robots.txt" => response(200, &[], &body),
        _ => page(head),
    });
    let proxy = Proxy::start(&origin.config("source: origin"));
    assert_eq!(status(&proxy, "/early", CRAWLER), 403);
    assert_eq!(status(&proxy, "/late", CRAWLER), 200);
    assert!(fetches(&proxy, "too_large") >= 1.0);
    let metrics = proxy.metrics();
    assert_eq!(
        metric(&metrics, "robotsguard_robots_bytes", &[("origin", "shop")]),
        512_000.0
    );
}

#[test]
fn a_client_seeing_a_different_robots_txt_triggers_an_early_refresh() {
    let origin = Scripted::start(site);
    let proxy = Proxy::start(&origin.config("source: origin, refresh: 1h"));
    assert_eq!(status(&proxy, "/secret", CRAWLER), 200);
    origin.set(|head, _| match head.path.as_str() {
        "/robots.txt" => response(200, &[], b"User-agent: *\nDisallow: /secret\n"),
        _ => page(head),
    });
    let seen = proxy.get(HOST, "/robots.txt", BROWSER);
    assert_eq!(seen.text(), "User-agent: *\nDisallow: /secret\n");
    assert!(
        eventually(20, || status(&proxy, "/secret", CRAWLER) == 403),
        "early refresh picked up the new file"
    );
    assert_eq!(
        origin.count("/robots.txt"),
        3,
        "start-up fetch, the client's request, one early refresh"
    );
}

/// Waits until a file-sourced robots.txt that disallows exactly `path` is in force: `path` is
/// blocked while another path passes (a disallow-all placeholder would block both).
fn in_force(proxy: &Proxy, path: &str) -> bool {
    eventually(10, || {
        status(proxy, path, CRAWLER) == 403 && status(proxy, "/control", CRAWLER) == 200
    })
}

#[test]
fn a_file_source_follows_in_place_writes_and_renames() {
    let origin = Scripted::start(|head, _| page(head));
    let config = format!(
        "origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: \"{}\"\n    robots: {{source: file, path: robots/robots.txt, refresh: 1h}}\n",
        origin.addr
    );
    let proxy = Proxy::builder(&config)
        .files(&[("robots/robots.txt", "User-agent: *\nDisallow: /one\n")])
        .start();
    let file = proxy.dir.path().join("robots/robots.txt");
    assert!(in_force(&proxy, "/one"));

    std::fs::write(&file, "User-agent: *\nDisallow: /two\n").expect("rewrite in place");
    assert!(in_force(&proxy, "/two"), "in-place write picked up");
    assert_eq!(status(&proxy, "/one", CRAWLER), 200);

    let fresh = proxy.dir.path().join("robots/.robots.txt.tmp");
    std::fs::write(&fresh, "User-agent: *\nDisallow: /three\n").expect("new file");
    std::fs::rename(&fresh, &file).expect("rename over");
    assert!(in_force(&proxy, "/three"), "rename-over picked up");

    std::fs::remove_file(&file).expect("remove");
    thread::sleep(Duration::from_millis(500));
    assert_eq!(
        status(&proxy, "/three", CRAWLER),
        403,
        "a missing file keeps the last good copy"
    );
    let (_, explain) = proxy.explain(HOST, CRAWLER, "/three");
    assert!(
        explain["robots"]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("cannot read")),
        "{explain}"
    );
}

#[test]
fn a_file_source_follows_a_configmap_style_symlink_swap() {
    let origin = Scripted::start(|head, _| page(head));
    let config = format!(
        "origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: \"{}\"\n    robots: {{source: file, path: cm/robots.txt, refresh: 1h}}\n",
        origin.addr
    );
    // Kubernetes layout: cm/robots.txt -> ..data/robots.txt, ..data -> ..2026_v1 (a directory).
    // The proxy starts with a plain file there (a robots.txt file must exist at start), which
    // the layout's link then replaces.
    let proxy = Proxy::builder(&config)
        .files(&[
            ("cm/robots.txt", "User-agent: *\nDisallow: /v0\n"),
            ("cm/..2026_v1/robots.txt", "User-agent: *\nDisallow: /v1\n"),
        ])
        .start();
    assert!(in_force(&proxy, "/v0"), "the plain file first");
    let cm = proxy.dir.path().join("cm");
    std::os::unix::fs::symlink("..2026_v1", cm.join("..data")).expect("..data link");
    std::os::unix::fs::symlink("..data/robots.txt", cm.join("robots.txt.link")).expect("file link");
    std::fs::rename(cm.join("robots.txt.link"), cm.join("robots.txt")).expect("link in place");
    assert!(
        in_force(&proxy, "/v1"),
        "initial version through the symlinks"
    );

    std::fs::create_dir(cm.join("..2026_v2")).expect("new version dir");
    std::fs::write(
        cm.join("..2026_v2/robots.txt"),
        "User-agent: *\nDisallow: /v2\n",
    )
    .expect("new version");
    std::os::unix::fs::symlink("..2026_v2", cm.join("..data_tmp")).expect("tmp link");
    std::fs::rename(cm.join("..data_tmp"), cm.join("..data")).expect("atomic swap");
    assert!(in_force(&proxy, "/v2"), "symlink swap picked up");
    assert_eq!(status(&proxy, "/v1", CRAWLER), 200);
}

#[test]
fn a_file_in_a_subdirectory_of_a_swapped_volume_follows_every_swap() {
    // Kubernetes layout with the file one level down: vol/robots -> ..data/robots,
    // vol/..data -> ..v1. Each swap deletes the directory the old watch was on.
    let volume = tempfile::tempdir().expect("volume dir");
    let root = volume.path();
    let write_version = |version: u32| {
        let dir = root.join(format!("..v{version}/robots"));
        std::fs::create_dir_all(&dir).expect("version dir");
        std::fs::write(
            dir.join("shop.txt"),
            format!("User-agent: *\nDisallow: /v{version}\n"),
        )
        .expect("version file");
    };
    write_version(1);
    std::os::unix::fs::symlink("..v1", root.join("..data")).expect("..data link");
    std::os::unix::fs::symlink("..data/robots", root.join("robots")).expect("robots link");
    let origin = Scripted::start(|head, _| page(head));
    let config = format!(
        "origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: \"{}\"\n    robots: {{source: file, path: \"{}\", refresh: 1h}}\n",
        origin.addr,
        root.join("robots/shop.txt").display()
    );
    let proxy = Proxy::start(&config);
    assert!(in_force(&proxy, "/v1"));
    for version in 2..=4 {
        write_version(version);
        std::os::unix::fs::symlink(format!("..v{version}"), root.join("..data_tmp"))
            .expect("tmp link");
        std::fs::rename(root.join("..data_tmp"), root.join("..data")).expect("atomic swap");
        std::fs::remove_dir_all(root.join(format!("..v{}", version - 1)))
            .expect("old version removed");
        assert!(
            in_force(&proxy, &format!("/v{version}")),
            "swap to v{version} picked up"
        );
    }
}
