//! Hostile input against the real proxy: oversized and invalid headers, slow clients, odd framing,
//! pathological robots.txt files and an origin that trickles. Each gets a bounded, correct answer;
//! the proxy never panics and keeps serving everyone else.
//!
//! The guarantees these tests hold (the book, "Security"):
//! - a request head arrives whole within `limits.header_timeout` from its first byte (or the
//!   connection's start), however it trickles (408), and within `limits.max_header_bytes` (431);
//!   a body within `limits.body_timeout` (408); an idle kept-alive connection closes after
//!   `limits.idle_timeout`; past `limits.max_connections`, new connections are closed at once
//!   while the open ones are served;
//! - an HTTP/1.0 answer closes the connection unless the client asked to keep it;
//! - whatever a client sends, log lines it causes are WARN at most, rate-limited, escaped and cut.
//!
//! Their limits: caps are per connection and for the process, not per client address (one client
//! can use up `max_connections`); a TLS handshake is bounded by pingora's own 60 s timeout before
//! these limits apply. Path evasion is in `tests/evasion.rs`, fetch tampering in
//! `tests/robots_acquisition.rs`.

use crate::support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use support::trickle::{read_until_closed, trickle_until_closed};
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

fn limited(limits: &str) -> (Origin, Proxy) {
    let origin = Origin::start();
    let body = format!(
        "limits: {{{limits}}}\n{}",
        site(
            &origin,
            HOST,
            &inline_robots("User-agent: GPTBot\nDisallow: /private\n")
        )
    );
    let proxy = Proxy::start(&body);
    (origin, proxy)
}

/// Empty lines before the request line are not a head: a client cannot send them to have the
/// head handed over (to pingora's per-read timeouts) and then trickle the real one.
#[test]
fn leading_empty_lines_do_not_end_the_head_deadline() {
    let (origin, proxy) = limited("header_timeout: 2s");
    let mut stream = TcpStream::connect(proxy.addr).expect("connect");
    stream
        .write_all(b"\r\n\r\n\n\nGET /public HTTP/1.1\r\nHost: shop.example\r\nX-Slow: ")
        .expect("head start");
    let started = Instant::now();
    let (answer, closed) = trickle_until_closed(&mut stream, b'a');
    let elapsed = started.elapsed();
    assert!(closed, "the trickling connection was never closed");
    assert!(
        elapsed < Duration::from_secs(6),
        "closed after {elapsed:?}, not at the 2 s deadline"
    );
    assert!(
        String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    assert!(origin.proxied().is_empty());
}

#[test]
fn a_trickled_head_gets_408_at_the_header_deadline() {
    let (origin, proxy) = limited("header_timeout: 2s");
    let mut stream = TcpStream::connect(proxy.addr).expect("connect");
    stream
        .write_all(b"GET /public HTTP/1.1\r\nHost: shop.example\r\nX-Slow: ")
        .expect("head start");
    let started = Instant::now();
    // A byte every 300 ms keeps a per-read timeout from ever firing; the deadline does not move.
    let (answer, closed) = trickle_until_closed(&mut stream, b'a');
    let elapsed = started.elapsed();
    assert!(closed, "the trickling connection was never closed");
    assert!(
        elapsed < Duration::from_secs(6),
        "closed after {elapsed:?}, not at the 2 s deadline"
    );
    assert!(
        String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    assert!(origin.proxied().is_empty());
    assert_eq!(
        support::metric(
            &proxy.metrics(),
            "robotsguard_responses_total",
            &[("origin", "unrouted"), ("code_class", "4xx")]
        ),
        1.0
    );
    still_healthy(&proxy);
}

#[test]
fn a_head_over_max_header_bytes_gets_431() {
    let (origin, proxy) = limited("max_header_bytes: 8KiB");
    let big = format!(
        "GET /public HTTP/1.1\r\nHost: shop.example\r\nX-Big: {}\r\n\r\n",
        "b".repeat(9 * 1024)
    );
    let answer = proxy.raw(big.as_bytes()).map(|r| r.status);
    assert_eq!(answer, Ok(431));
    // A megabyte without an end is cut off at the cap too, not buffered.
    let mut stream = TcpStream::connect(proxy.addr).expect("connect");
    let _ = stream.write_all(b"GET /public HTTP/1.1\r\nHost: shop.example\r\n");
    let mut refused = false;
    for _ in 0..256 {
        if stream.write_all(&[b'x'; 4096]).is_err() {
            refused = true;
            break;
        }
    }
    let (answer, closed) = read_until_closed(&mut stream, Duration::from_secs(5));
    assert!(refused || closed, "a 1 MB head was read on");
    assert!(
        answer.is_empty() || answer.starts_with(b"HTTP/1.1 431"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    // Just under the cap is fine.
    let fits = Request::get("/public")
        .host(HOST)
        .ua(BROWSER)
        .header("X-Fits", &"f".repeat(7 * 1024));
    assert_eq!(proxy.send(&fits).status, 200);
    assert_eq!(origin.proxied_to("/public").len(), 1);
}

#[test]
fn an_idle_kept_alive_connection_is_closed_at_the_idle_timeout() {
    let (_origin, proxy) = limited("idle_timeout: 1s, header_timeout: 5s");
    let mut conn = proxy.conn();
    assert_eq!(
        conn.send(&Request::get("/public").host(HOST).ua(BROWSER))
            .status,
        200
    );
    thread::sleep(Duration::from_millis(1500));
    conn.write(&Request::get("/public").host(HOST).ua(BROWSER).to_bytes());
    assert!(
        conn.read_response(false).is_err(),
        "the connection outlived the idle timeout"
    );
    // One that comes back in time is served.
    let mut conn = proxy.conn();
    for _ in 0..3 {
        assert_eq!(
            conn.send(&Request::get("/public").host(HOST).ua(BROWSER))
                .status,
            200
        );
        thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn connections_beyond_max_connections_are_refused_and_others_served() {
    let (_origin, proxy) = limited("max_connections: 4, header_timeout: 30s, body_timeout: 30s");
    // Four requests in progress: heads sent, bodies announced and never sent.
    let busy: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut stream = TcpStream::connect(proxy.addr).expect("connect");
            let head = format!(
                "POST /public HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: {BROWSER}\r\n\
                 Content-Length: 10\r\n\r\n"
            );
            stream.write_all(head.as_bytes()).expect("head written");
            stream
        })
        .collect();
    thread::sleep(Duration::from_millis(500));
    // Nothing to evict (each connection has a request in progress): the fifth is closed.
    let mut extra = TcpStream::connect(proxy.addr).expect("the kernel accepts");
    let _ = extra.write_all(b"GET /public HTTP/1.1\r\nHost: shop.example\r\n\r\n");
    let (answer, closed) = read_until_closed(&mut extra, Duration::from_secs(5));
    assert!(
        closed && answer.is_empty(),
        "the fifth connection was served: {:?}",
        String::from_utf8_lossy(&answer)
    );
    let refused = support::metric(
        &proxy.metrics(),
        "robotsguard_downstream_connections_refused_total",
        &[],
    );
    assert!(refused >= 1.0, "{refused}");
    assert_eq!(
        support::metric(&proxy.metrics(), "robotsguard_downstream_connections", &[]),
        4.0
    );
    drop(busy);
    let served = (0..100).any(|_| {
        thread::sleep(Duration::from_millis(50));
        proxy
            .raw(
                format!("GET /public HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: {BROWSER}\r\n\r\n")
                    .as_bytes(),
            )
            .is_ok_and(|r| r.status == 200)
    });
    assert!(
        served,
        "connections were not admitted again once others closed"
    );
}

/// A new connection at the cap is answered, one connection having been evicted for it.
fn a_newcomer_is_answered_after_one_eviction(proxy: &Proxy) {
    let answer = proxy
        .raw(
            format!("GET /public HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: {BROWSER}\r\n\r\n")
                .as_bytes(),
        )
        .expect("the newcomer is answered");
    assert_eq!(answer.status, 200);
    let evicted = support::metric(
        &proxy.metrics(),
        "robotsguard_downstream_connections_evicted_total",
        &[],
    );
    assert_eq!(evicted, 1.0);
}

#[test]
fn at_the_cap_a_new_connection_evicts_the_one_idle_longest() {
    let (_origin, proxy) = limited("max_connections: 4, header_timeout: 30s");
    // Four connections that never send a request head, opened a little apart.
    let mut idle: Vec<TcpStream> = Vec::new();
    for _ in 0..4 {
        idle.push(TcpStream::connect(proxy.addr).expect("connect"));
        thread::sleep(Duration::from_millis(150));
    }
    thread::sleep(Duration::from_millis(300));
    a_newcomer_is_answered_after_one_eviction(&proxy);
    // The oldest idle connection is the one closed; the newest is still open.
    let (_, oldest_closed) = read_until_closed(&mut idle[0], Duration::from_secs(2));
    assert!(oldest_closed, "the connection idle longest was not closed");
    let (_, newest_closed) = read_until_closed(&mut idle[3], Duration::from_millis(500));
    assert!(!newest_closed, "the newest idle connection was closed");
}

/// A kept-alive connection between two requests is evicted the same way (its wait for the next
/// head ends with its socket's reading side shut down): the one idle longest closes, and the
/// others go on serving requests on their connections.
#[test]
fn at_the_cap_the_kept_alive_connection_idle_longest_is_evicted_and_the_others_serve_on() {
    let (_origin, proxy) = limited("max_connections: 4, header_timeout: 30s, idle_timeout: 30s");
    let request = format!("GET /public HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: {BROWSER}\r\n\r\n");
    let mut kept: Vec<Conn> = Vec::new();
    for _ in 0..4 {
        let mut conn = Conn::open(proxy.addr);
        conn.write(request.as_bytes());
        let answer = conn
            .read_response(false)
            .expect("the first request is answered");
        assert_eq!(answer.status, 200);
        kept.push(conn);
        thread::sleep(Duration::from_millis(150));
    }
    thread::sleep(Duration::from_millis(300));
    a_newcomer_is_answered_after_one_eviction(&proxy);
    let mut oldest = kept.remove(0).into_stream();
    let (_, oldest_closed) = read_until_closed(&mut oldest, Duration::from_secs(2));
    assert!(
        oldest_closed,
        "the kept-alive connection idle longest was not closed"
    );
    for (index, conn) in kept.iter_mut().enumerate() {
        conn.write(request.as_bytes());
        let answer = conn
            .read_response(false)
            .unwrap_or_else(|e| panic!("kept-alive connection {}: {e}", index + 1));
        assert_eq!(answer.status, 200);
    }
}

#[test]
fn a_trickled_body_gets_408_at_the_body_deadline() {
    let (_origin, proxy) = limited("body_timeout: 2s");
    let mut stream = TcpStream::connect(proxy.addr).expect("connect");
    stream
        .write_all(
            format!("POST /upload HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: {BROWSER}\r\nContent-Length: 1000\r\n\r\n")
                .as_bytes(),
        )
        .expect("head");
    let started = Instant::now();
    let (answer, closed) = trickle_until_closed(&mut stream, b'x');
    assert!(closed, "a body trickled forever");
    assert!(
        started.elapsed() < Duration::from_secs(7),
        "{:?}",
        started.elapsed()
    );
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    still_healthy(&proxy);
}

#[test]
fn http_1_0_answers_close_the_connection() {
    let (_origin, proxy) = proxy_with("User-agent: *\nDisallow: /private\n");
    let mut stream = TcpStream::connect(proxy.addr).expect("connect");
    stream
        .write_all(
            format!("GET /private HTTP/1.0\r\nHost: {HOST}\r\nUser-Agent: {GPTBOT}\r\n\r\n")
                .as_bytes(),
        )
        .expect("request");
    let (answer, closed) = read_until_closed(&mut stream, Duration::from_secs(5));
    let text = String::from_utf8_lossy(&answer).to_ascii_lowercase();
    assert!(text.contains(" 403 "), "{text}");
    assert!(text.contains("connection: close"), "{text}");
    assert!(!text.contains("keep-alive"), "{text}");
    assert!(closed, "an HTTP/1.0 answer kept the connection open");
}

#[test]
fn a_client_cannot_flood_the_logs() {
    let (_origin, proxy) = proxy_with("User-agent: *\nDisallow: /private\n");
    let flood = format!("GET /x?{} HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "q".repeat(20_000));
    for _ in 0..200 {
        let _ = proxy.raw(flood.as_bytes());
        let _ = proxy.raw(
            format!(
                "GET ?{} HTTP/1.1\r\nHost: {HOST}\r\n\r\n",
                "q".repeat(20_000)
            )
            .as_bytes(),
        );
    }
    still_healthy(&proxy);
    let log = proxy.stderr();
    assert!(
        log.len() < 200_000,
        "{} bytes of log from 400 bad requests",
        log.len()
    );
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 2_000, "a log line of {longest} bytes");
    assert!(
        !log.contains(" ERROR "),
        "client-caused lines are at most WARN:\n{log}"
    );
}
