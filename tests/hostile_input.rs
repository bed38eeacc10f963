//! Hostile input against the real proxy: oversized and invalid headers, slow clients, odd framing,
//! pathological robots.txt files and an origin that trickles. Each gets a bounded, correct answer;
//! the proxy never panics and keeps serving everyone else.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use support::{inline_robots, site, Conn, Origin, Proxy, Request, BROWSER, GPTBOT};

const HOST: &str = "shop.example";

fn proxy_with(robots: &str) -> (Origin, Proxy) {
    let origin = Origin::start();
    let proxy = Proxy::start(&site(&origin, HOST, &inline_robots(robots)));
    (origin, proxy)
}

/// The proxy still answers an ordinary request correctly and never logged a panic.
fn still_healthy(proxy: &Proxy) {
    assert_eq!(proxy.get(HOST, "/ok", BROWSER).status, 200);
    assert_eq!(proxy.admin_get("/healthz").status, 200);
    assert!(!proxy.stderr().contains("panicked"), "{}", proxy.stderr());
}

/// Sends raw bytes and returns the status of the answer, or `None` when the proxy closed the
/// connection without one (also an acceptable refusal for garbage).
fn answer_to(proxy: &Proxy, bytes: &[u8]) -> Option<u16> {
    proxy.raw(bytes).ok().map(|response| response.status)
}

#[test]
fn invalid_utf8_and_huge_user_agents() {
    let (origin, proxy) = proxy_with("User-agent: *\nDisallow: /private\n");
    let mut request = b"GET /private/x HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: Evil\xff\xfe\x80Bot/1.0\r\n\r\n".to_vec();
    assert_eq!(
        answer_to(&proxy, &request),
        Some(403),
        "an invalid-UTF-8 bot UA is still a bot"
    );
    request = format!(
        "GET /private/x HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: {}GPTBot/1.2\r\n\r\n",
        "A".repeat(64 * 1024)
    )
    .into_bytes();
    // 64 KB of User-Agent: either refused as too large or decided; never proxied to /private.
    let status = answer_to(&proxy, &request);
    assert!(matches!(status, None | Some(400..=499)), "{status:?}");
    assert!(origin.proxied_to("/private/x").is_empty());
    still_healthy(&proxy);
}

#[test]
fn thousands_of_headers_and_overlong_header_lines_are_refused() {
    let (origin, proxy) = proxy_with("User-agent: *\nDisallow: /private\n");
    let mut many = String::from("GET /public HTTP/1.1\r\nHost: shop.example\r\n");
    for i in 0..5_000 {
        many.push_str(&format!("X-H{i}: v\r\n"));
    }
    many.push_str("\r\n");
    let status = answer_to(&proxy, many.as_bytes());
    assert!(matches!(status, None | Some(400..=499)), "{status:?}");
    let long_line = format!(
        "GET /public HTTP/1.1\r\nHost: shop.example\r\nX-Long: {}\r\n\r\n",
        "x".repeat(2 * 1024 * 1024)
    );
    let status = answer_to(&proxy, long_line.as_bytes());
    assert!(matches!(status, None | Some(400..=499)), "{status:?}");
    assert!(origin.proxied_to("/public").is_empty());
    still_healthy(&proxy);
}

#[test]
fn a_slowloris_client_does_not_stop_others() {
    let (_origin, proxy) = proxy_with("User-agent: *\nDisallow: /private\n");
    let stop = Arc::new(AtomicBool::new(false));
    let mut slow_clients = Vec::new();
    for _ in 0..20 {
        let addr = proxy.addr;
        let stop = stop.clone();
        slow_clients.push(thread::spawn(move || {
            let Ok(mut stream) = TcpStream::connect(addr) else {
                return;
            };
            let head = b"GET /public HTTP/1.1\r\nHost: shop.example\r\nX-Slow: ";
            let _ = stream.write_all(head);
            // One byte every 100 ms for at most 5 s: a header that never ends.
            for _ in 0..50 {
                if stop.load(Ordering::Relaxed) || stream.write_all(b"a").is_err() {
                    break;
                }
                thread::sleep(Duration::from_millis(100));
            }
        }));
    }
    thread::sleep(Duration::from_millis(300));
    for _ in 0..20 {
        assert_eq!(proxy.get(HOST, "/public", BROWSER).status, 200);
        assert_eq!(proxy.get(HOST, "/private", GPTBOT).status, 403);
    }
    stop.store(true, Ordering::Relaxed);
    for client in slow_clients {
        let _ = client.join();
    }
    still_healthy(&proxy);
}

#[test]
fn http_1_0_requests_are_decided_and_proxied() {
    let (origin, proxy) = proxy_with("User-agent: *\nDisallow: /private\n");
    let ok = proxy
        .raw(
            format!("GET /public HTTP/1.0\r\nHost: shop.example\r\nUser-Agent: {BROWSER}\r\n\r\n")
                .as_bytes(),
        )
        .expect("an answer");
    assert_eq!(ok.status, 200);
    let blocked = proxy
        .raw(
            format!("GET /private HTTP/1.0\r\nHost: shop.example\r\nUser-Agent: {GPTBOT}\r\n\r\n")
                .as_bytes(),
        )
        .expect("an answer");
    assert_eq!(blocked.status, 403);
    assert_eq!(origin.proxied_to("/private").len(), 0);
    // HTTP/1.0 without Host cannot be routed.
    let status = answer_to(&proxy, b"GET /public HTTP/1.0\r\n\r\n");
    assert!(matches!(status, None | Some(400) | Some(421)), "{status:?}");
}

#[test]
fn pipelined_requests_get_correct_answers_or_a_close() {
    // pingora serves a pipelined connection's first request and then closes it (RFC 9112 §9.3.2
    // lets a server do so; clients retry the rest on a new connection). Whatever is answered must
    // be right, and the blocked request must never reach the origin.
    let (origin, proxy) = proxy_with("User-agent: *\nDisallow: /private\n");
    let mut conn = proxy.conn();
    let first = Request::get("/one").host(HOST).ua(BROWSER).to_bytes();
    let second = Request::get("/private").host(HOST).ua(GPTBOT).to_bytes();
    let third = Request::get("/three").host(HOST).ua(BROWSER).to_bytes();
    conn.write(&[first, second, third].concat());
    let expected = [200, 403, 200];
    let mut answered = 0;
    for want in expected {
        match conn.read_response(false) {
            Ok(response) => {
                assert_eq!(response.status, want, "answer {answered}");
                answered += 1;
            }
            Err(_) => break,
        }
    }
    assert!(answered >= 1, "the first pipelined request is answered");
    assert!(origin.proxied_to("/private").is_empty());
    still_healthy(&proxy);
}

#[test]
fn a_robots_txt_built_to_be_slow_still_decides_correctly() {
    let mut robots = String::from("User-agent: *\n");
    for i in 0..3_000 {
        robots.push_str(&format!("Disallow: /*a*b*c*d*e*{i}*z$\n"));
    }
    robots.push_str(&format!("Disallow: /{}x\n", "*".repeat(2_000)));
    let (_origin, proxy) = proxy_with(&robots);
    // Each request must be answered within the client's read timeout (15 s): a super-linear
    // matcher would blow through it rather than hang the test.
    let long_path = format!("/{}", "abcde".repeat(1_500));
    assert_eq!(proxy.get(HOST, &long_path, GPTBOT).status, 200);
    assert_eq!(proxy.get(HOST, "/abcde42z", GPTBOT).status, 403);
    assert_eq!(proxy.get(HOST, "/tax", GPTBOT).status, 403);
    assert_eq!(proxy.get(HOST, &long_path, BROWSER).status, 200);
    still_healthy(&proxy);
}

#[test]
fn an_origin_trickling_robots_txt_is_cut_off_by_the_timeout() {
    // One byte a second: the fetch must give up at its timeout, not wait for the whole file.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("addr");
    let stop = Arc::new(AtomicBool::new(false));
    let stop_origin = stop.clone();
    thread::spawn(move || {
        listener.set_nonblocking(true).expect("non-blocking");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !stop_origin.load(Ordering::Relaxed) && Instant::now() < deadline {
            let Ok((mut stream, _)) = listener.accept() else {
                thread::sleep(Duration::from_millis(10));
                continue;
            };
            let stop = stop_origin.clone();
            thread::spawn(move || {
                let mut buffer = [0u8; 4096];
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let _ = stream.read(&mut buffer);
                let body = "User-agent: *\nDisallow: /\n";
                let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
                let _ = stream.write_all(head.as_bytes());
                for byte in body.bytes().take(20) {
                    if stop.load(Ordering::Relaxed) || stream.write_all(&[byte]).is_err() {
                        break;
                    }
                    thread::sleep(Duration::from_secs(1));
                }
            });
        }
    });
    let config = format!(
        "origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: \"{addr}\"\n    robots: {{source: origin, timeout: 2s}}\n"
    );
    let proxy = Proxy::start(&config);
    let (_, explain) = proxy.explain(HOST, GPTBOT, "/x");
    assert_eq!(explain["robots"]["state"], "disallow_all", "{explain}");
    assert!(
        explain["robots"]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("no answer")),
        "{explain}"
    );
    assert_eq!(proxy.admin_get("/healthz").status, 200);
    stop.store(true, Ordering::Relaxed);
}

#[test]
fn garbage_and_truncated_requests_get_bounded_answers() {
    let (_origin, proxy) = proxy_with("User-agent: *\nDisallow: /private\n");
    for garbage in [
        &b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"[..],
        b"GET\r\n\r\n",
        b"GET / HTTP/9.9\r\nHost: shop.example\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: shop.example\r\nContent-Length: -1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: shop.example\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"\r\n\r\n\r\n",
        b"GET /%zz%00/private HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: GPTBot/1.2\r\n\r\n",
    ] {
        let mut conn = Conn::open(proxy.addr);
        conn.write(garbage);
        // Any answer or a close is fine; hanging is not (the client read times out at 15 s).
        let _ = conn.read_response(false);
    }
    still_healthy(&proxy);
}
