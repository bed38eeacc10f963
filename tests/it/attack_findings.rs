//! Attacks a security review of the hardened proxy (86f2752) found, all fixed since.
//!
//! Each test asserts the SAFE behaviour, so it fails if the weakness comes back. The doc comment
//! of each test describes the attack as it worked at the time of the review. They run the
//! real `robotsguard` binary against real origins on loopback: the harness origin (which records
//! the exact target it was sent), the harness's WHATWG (`new URL`) origin, Python's `wsgiref`
//! WSGI server, and small scripted origins where a particular answer is needed.
//!
//! 1. `a_blocked_request_body_is_drained_without_the_body_deadline`: answered requests (blocks,
//!    refusals) drain their body with no `limits.body_timeout`: connections held indefinitely.
//! 2. `robots_txt_with_a_query_is_not_a_way_past_disallow_and_block`,
//!    `robots_txt_with_another_method_is_not_proxied_for_a_blocked_crawler`,
//!    `an_exempt_path_with_a_query_is_not_a_way_past_block`: "/robots.txt always passes" and
//!    exempt paths pass with any query (and any method): WordPress `?rest_route=` reads all.
//! 3. `a_waf_block_longer_than_a_minute_does_not_lift_robots_txt`,
//!    `a_200_challenge_page_does_not_lift_robots_txt`: attacker-provoked robots.txt outcomes
//!    that lift the rules.
//! 4. `idle_admin_connections_do_not_take_the_proxy_down`,
//!    `silent_tls_handshakes_count_against_max_connections`: descriptors used up outside the
//!    connection cap; every listener stops.
//! 5. `a_huge_method_does_not_make_a_huge_log_line`: the method is logged uncut.
//! 6. `underscore_spellings_of_client_address_headers_do_not_reach_the_origin`: `X_Real_IP`,
//!    `X_Forwarded_For` reach CGI-style origins as the client's address.
//! 7. `a_client_that_stops_reading_is_cut_off`: no downstream write timeout (slow read).
//! 8. `robots_txt_shortcut_holds_for_every_reading_with_original_forwarding`: with
//!    `forward: original`, `//robots.txt` is "robots.txt" to robotsguard and `/` to a WHATWG app.
//!
//! Every loop is bounded in iterations and time; the slowest test (a WAF block that outlasts the
//! one-minute 4xx confirmation) takes about half a minute. Two tests need `prlimit` and `openssl`, one
//! needs `python3`.

use crate::support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use support::{inline_robots, metric, site, Origin, Proxy, BROWSER, GPTBOT};

const HOST: &str = "shop.example";

/// Sends `bytes` on a fresh connection and reads until the proxy closes or `wait` passes.
/// Returns what was read and whether the proxy closed the connection within `wait`.
fn send_and_watch(addr: SocketAddr, bytes: &[u8], wait: Duration) -> (Vec<u8>, bool) {
    let mut stream = TcpStream::connect(addr).expect("connects to the proxy");
    stream.write_all(bytes).expect("request written");
    support::trickle::read_until_closed(&mut stream, wait)
}

fn status_of(response: &[u8]) -> u16 {
    std::str::from_utf8(response.get(9..12).unwrap_or_default())
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

// ------------------------------------------------------------------------------------------------
// 1. The body of a request robotsguard answers itself is drained without limits.body_timeout.

/// **Attack:** send a request robotsguard answers itself (a blocked crawler's request, or a
/// refusal such as 421 for an unknown Host) declaring a small body (`Content-Length` up to 1 MiB),
/// then send that body one byte at a time, slower than any limit allows.
///
/// robotsguard answers at once and, to keep the connection usable, lets pingora drain the body
/// (`respond()` sets `close_on_response_before_downstream_finish(false)`), but the drain runs under
/// pingora's default 60 s per-read timeout and no total deadline: `limits.body_timeout` is only
/// armed for proxied requests. A client holds the connection for 60 s without sending anything,
/// and for as long as it likes by sending a byte every 59 s (a 1 MiB body: ~2 years).
///
/// **Impact:** the connection cap (`limits.max_connections`) is used up by a handful of idle
/// sockets that never expire, so the book's "a body must arrive within `limits.body_timeout`"
/// and "bounded by construction" do not hold: with `max_connections: 3`, three such sockets lock
/// every browser and crawler out for as long as the attacker wishes.
#[test]
fn a_blocked_request_body_is_drained_without_the_body_deadline() {
    let origin = Origin::start();
    let extra = inline_robots("User-agent: GPTBot\nDisallow: /private\n");
    let config = format!(
        "limits: {{header_timeout: 2s, idle_timeout: 2s, body_timeout: 2s, max_connections: 3}}\n{}",
        site(&origin, HOST, &extra)
    );
    let proxy = Proxy::start(&config);
    let addr = proxy.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let mut holders = Vec::new();
    for kind in ["blocked", "unknown-host", "blocked"] {
        let stop = stop.clone();
        holders.push(thread::spawn(move || -> Option<Duration> {
            let head = match kind {
                "blocked" => format!(
                    "POST /private/x HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: {GPTBOT}\r\nContent-Length: 1000\r\n\r\n"
                ),
                _ => "POST /x HTTP/1.1\r\nHost: elsewhere.example\r\nContent-Length: 1000\r\n\r\n"
                    .to_string(),
            };
            let mut stream = TcpStream::connect(addr).ok()?;
            stream.write_all(head.as_bytes()).ok()?;
            let started = Instant::now();
            let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
            let mut sink = [0u8; 4096];
            // One body byte a second for at most 12 s: far slower than the 2 s body deadline.
            let mut next_byte = started;
            for _ in 0..120 {
                if stop.load(Ordering::Relaxed) {
                    return None;
                }
                if Instant::now() >= next_byte {
                    next_byte += Duration::from_secs(1);
                    if stream.write_all(b"x").is_err() {
                        return Some(started.elapsed());
                    }
                }
                match stream.read(&mut sink) {
                    Ok(0) => return Some(started.elapsed()),
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => return Some(started.elapsed()),
                }
            }
            None
        }));
    }
    // Well past header_timeout + body_timeout: a browser must get in.
    thread::sleep(Duration::from_secs(7));
    let (answer, _) = send_and_watch(
        addr,
        format!("GET /page HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: {BROWSER}\r\nConnection: close\r\n\r\n").as_bytes(),
        Duration::from_secs(3),
    );
    let browser_status = status_of(&answer);
    stop.store(true, Ordering::Relaxed);
    let closed_after: Vec<Option<Duration>> = holders
        .into_iter()
        .map(|h| h.join().unwrap_or(None))
        .collect();
    for closed in &closed_after {
        assert!(
            closed.is_some_and(|after| after < Duration::from_secs(6)),
            "a trickled body of an answered request kept its connection open past \
             body_timeout (2 s): closed after {closed_after:?} (None: still open at 12 s); \
             a browser meanwhile got {browser_status} (0: refused, max_connections: 3)"
        );
    }
    assert_eq!(
        browser_status, 200,
        "three trickling clients locked a browser out (max_connections: 3)"
    );
}

// ------------------------------------------------------------------------------------------------
// 2. "/robots.txt always passes" and exempt paths pass with any query string.

/// **Attack:** a crawler that robots.txt (or `policy`) turns away asks for `/robots.txt` with a
/// query that a front-controller app routes on, e.g. WordPress's
/// `/robots.txt?rest_route=/wp/v2/posts` (WordPress's robots.txt is virtual, served by
/// `index.php`, and any URL carrying `rest_route` is answered by the REST API: every post and
/// page, in full).
///
/// robotsguard decides "`/robots.txt` always passes" on the canonical path *including its
/// query* (`is_robots_txt` ignores everything after `?`), and forwards the query to the origin.
/// With `robots.source: origin` (the default) this is any `GET`/`HEAD`; with `file`/`inline`
/// sources (served by robotsguard) any other method still goes through (`POST
/// /robots.txt?rest_route=…&_method=GET`, which WordPress's REST API reads as a GET).
///
/// **Impact:** `Disallow: /`, and `policy` `block` of a whole category (e.g. `ai-training`), are
/// bypassed on WordPress and on any app that picks content by query. Google's reading of
/// robots.txt does not exempt `/robots.txt?x` either: it is a different URL, covered by
/// `Disallow: /`. Safe: exempt only `/robots.txt` without a query (or forward it without one),
/// and only for GET/HEAD.
#[test]
fn robots_txt_with_a_query_is_not_a_way_past_disallow_and_block() {
    let origin = Origin::start();
    origin.robots(200, "User-agent: GPTBot\nDisallow: /\n");
    let proxy = Proxy::start(&site(
        &origin,
        HOST,
        "    policy: {categories: {ai-training: block}}\n",
    ));
    // Plainly blocked, as it should be.
    assert_eq!(
        proxy.get(HOST, "/?rest_route=/wp/v2/posts", GPTBOT).status,
        403
    );
    for target in [
        "/robots.txt?rest_route=/wp/v2/posts&per_page=100",
        "/robots.txt?p=42",
        "/private/../robots.txt?rest_route=/wp/v2/pages",
    ] {
        let answer = proxy.get(HOST, target, GPTBOT);
        let proxied: Vec<String> = origin
            .proxied()
            .into_iter()
            .map(|r| r.target)
            .filter(|t| t.contains('?'))
            .collect();
        assert!(
            proxied.is_empty(),
            "GPTBot, blocked everywhere, had {target} proxied ({} {:?}); the origin was sent \
             {proxied:?}",
            answer.status,
            answer.text()
        );
    }
}

/// As above, with a robots.txt robotsguard serves itself (`inline`): `GET /robots.txt?…` is
/// answered from the copy in force, but any other method with the same target is proxied.
#[test]
fn robots_txt_with_another_method_is_not_proxied_for_a_blocked_crawler() {
    let origin = Origin::start();
    let proxy = Proxy::start(&site(
        &origin,
        HOST,
        &inline_robots("User-agent: GPTBot\nDisallow: /\n"),
    ));
    let request = format!(
        "POST /robots.txt?rest_route=/wp/v2/posts&_method=GET HTTP/1.1\r\nHost: {HOST}\r\n\
         User-Agent: {GPTBOT}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    let answer = proxy.raw(request.as_bytes()).expect("an answer");
    assert!(
        origin.proxied().is_empty(),
        "a POST to /robots.txt?rest_route=… from a disallowed crawler reached the origin \
         ({}): {:?}",
        answer.status,
        origin
            .proxied()
            .iter()
            .map(|r| &r.target)
            .collect::<Vec<_>>()
    );
}

/// **Attack:** the same query trick on `policy.exempt_paths`, which are matched as prefixes of
/// the canonical path *and query*: with `exempt_paths: [/ads.txt]` (the book's example),
/// `/ads.txt?rest_route=/wp/v2/posts` is exempt from `block` and from every Disallow.
///
/// **Impact:** as above, on any origin that routes on the query. Safe: match exempt prefixes on
/// the path only, and (for prefixes that name a file) require the whole path to match.
#[test]
fn an_exempt_path_with_a_query_is_not_a_way_past_block() {
    let origin = Origin::start();
    let extra = format!(
        "    policy: {{categories: {{ai-training: block}}, exempt_paths: [/ads.txt]}}\n{}",
        inline_robots("User-agent: *\nDisallow: /\n")
    );
    let proxy = Proxy::start(&site(&origin, HOST, &extra));
    assert_eq!(proxy.get(HOST, "/ads.txt", GPTBOT).status, 200);
    let answer = proxy.get(HOST, "/ads.txt?rest_route=/wp/v2/posts", GPTBOT);
    assert!(
        origin
            .proxied_to("/ads.txt?rest_route=/wp/v2/posts")
            .is_empty(),
        "a blocked crawler reached /ads.txt?rest_route=… ({})",
        answer.status
    );
}

// ------------------------------------------------------------------------------------------------
// 3. robots.txt fetches an attacker can spoil: a WAF block that lasts over a minute, a 200
//    challenge page.

/// A scripted origin: `/robots.txt` answers with the current (status, content type, body); any
/// other path answers 200 `origin: <target>`. One request per connection.
struct Switchable {
    addr: SocketAddr,
    robots: Arc<Mutex<(u16, &'static str, String)>>,
    stop: Arc<AtomicBool>,
}

impl Switchable {
    fn start(status: u16, content_type: &'static str, body: &str) -> Switchable {
        let listener = TcpListener::bind("127.0.0.1:0").expect("origin binds");
        listener.set_nonblocking(true).expect("non-blocking accept");
        let addr = listener.local_addr().expect("origin address");
        let robots = Arc::new(Mutex::new((status, content_type, body.to_string())));
        let stop = Arc::new(AtomicBool::new(false));
        let (robots_c, stop_c) = (robots.clone(), stop.clone());
        thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(180);
            while !stop_c.load(Ordering::Relaxed) && Instant::now() < deadline {
                let Ok((mut stream, _)) = listener.accept() else {
                    thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let robots = robots_c.clone();
                thread::spawn(move || {
                    let _ = stream.set_nonblocking(false);
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
                        match stream.read(&mut byte) {
                            Ok(1) => head.push(byte[0]),
                            _ => return,
                        }
                    }
                    let text = String::from_utf8_lossy(&head);
                    let target = text.split(' ').nth(1).unwrap_or("/").to_string();
                    let (status, content_type, body) = if target == "/robots.txt" {
                        robots.lock().map(|r| r.clone()).unwrap_or((
                            500,
                            "text/plain",
                            String::new(),
                        ))
                    } else {
                        (200, "text/plain", format!("origin: {target}"))
                    };
                    let response = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(response.as_bytes());
                });
            }
        });
        Switchable { addr, robots, stop }
    }

    fn set(&self, status: u16, content_type: &'static str, body: &str) {
        if let Ok(mut robots) = self.robots.lock() {
            *robots = (status, content_type, body.to_string());
        }
    }
}

impl Drop for Switchable {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

const ROBOTS_WITH_RULES: &str = "User-agent: GPTBot\nDisallow: /private\n";

fn fetches(proxy: &Proxy, outcome: &str) -> f64 {
    metric(
        &proxy.metrics(),
        "robotsguard_robots_fetches_total",
        &[("origin", "shop"), ("outcome", outcome)],
    )
}

fn wait_until(seconds: u64, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        thread::sleep(Duration::from_millis(250));
    }
    done()
}

/// **Attack:** flood the site through the proxy until the origin's WAF or rate limiter blocks
/// the address everything comes from — robotsguard's — with 403 (AWS WAF rate-based rules and
/// Cloudflare's rate limiting block with 403, for minutes), keep it up a little over a minute,
/// then stop.
///
/// robotsguard keeps a copy with rules through one 4xx, but a second 4xx at least 60 s later
/// (`CONFIRM_UNAVAILABLE_AFTER`) is believed: robots.txt becomes "unavailable" and everything is
/// allowed. Nothing re-checks sooner than the normal `refresh` (5 min by default; 10 s here to
/// keep the test short), so once the attacker stops flooding and the WAF lets robotsguard's
/// address through again, every crawler gets every disallowed path until the next refresh.
///
/// **Impact:** attacker-triggered fail-open (the book's "No attacker-triggered fail-open" names
/// exactly this: "flooding it makes the next robots.txt fetch a 429 or a 403"); the one-minute
/// confirmation is shorter than the blocks WAFs actually impose. Safe: treat 401/403 like redirect
/// failures (keep a copy younger than 24 h), or require the 4xx to persist far longer than a WAF
/// block; and after rules are lifted by a 4xx, re-check at the failure backoff, not `refresh`.
#[test]
fn a_waf_block_longer_than_a_minute_does_not_lift_robots_txt() {
    let origin = Switchable::start(200, "text/plain", ROBOTS_WITH_RULES);
    let config = format!(
        "origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: \"{}\"\n    robots: {{source: origin, refresh: 10s}}\n",
        origin.addr
    );
    let proxy = Proxy::start(&config);
    assert_eq!(proxy.get(HOST, "/private/report.html", GPTBOT).status, 403);
    // The WAF starts answering robotsguard's address with 403.
    origin.set(403, "text/html", "<html><body>Access denied</body></html>");
    assert!(
        wait_until(20, || fetches(&proxy, "unavailable") >= 1.0),
        "the first 403 fetch did not happen"
    );
    // ... and keeps doing so for a little over a minute.
    assert!(
        wait_until(75, || fetches(&proxy, "unavailable") >= 2.0),
        "no confirming fetch"
    );
    // The attacker stops; the WAF lets robotsguard through again. robots.txt never changed.
    origin.set(200, "text/plain", ROBOTS_WITH_RULES);
    let answer = proxy.get(HOST, "/private/report.html", GPTBOT);
    let (_, explain) = proxy.explain(HOST, GPTBOT, "/private/report.html");
    assert_eq!(
        answer.status,
        403,
        "a WAF block of 70 s lifted robots.txt: GPTBot got {} {:?}; robots.txt in force: {}",
        answer.status,
        answer.text(),
        explain["robots"]
    );
}

/// **Attack:** the same flood, against an origin (or CDN/WAF in front of it) that answers
/// challenged or rate-limited clients with a `200` HTML page (JavaScript challenges, "please
/// wait" pages, apps that render errors with status 200).
///
/// A 2xx is parsed as robots.txt whatever it is: an HTML page has no rules, so the copy with
/// rules is replaced at once by "allow everything" — no confirmation, no 24 h keep — until the
/// next refresh (5 min by default). The attacker does not even have to wait for the refresh
/// schedule: its own `GET /robots.txt` through the proxy receives the challenge page, a 200 whose
/// body differs from the copy in force, which makes robotsguard refresh early (5 s later) — into
/// the same challenge.
///
/// **Impact:** attacker-timed fail-open, with default settings, wherever the fetch can be made to
/// get a 200 page that is not robots.txt. Safe: while a copy with rules is in force, a 2xx that
/// is not `text/plain` (or looks like HTML: `<!DOCTYPE`, `<html`) and yields no rule should be
/// kept as suspect and confirmed like a 4xx; and a client-seen body should only hint a refresh
/// when it is plain text.
#[test]
fn a_200_challenge_page_does_not_lift_robots_txt() {
    let origin = Switchable::start(200, "text/plain", ROBOTS_WITH_RULES);
    // A client-seen page that is not plain text no longer hints an early refresh, so the
    // scheduled refresh (5 s here) brings the challenge to the fetch.
    let config = format!(
        "origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: \"{}\"\n    robots: {{source: origin, refresh: 5s}}\n",
        origin.addr
    );
    let proxy = Proxy::start(&config);
    assert_eq!(proxy.get(HOST, "/private/report.html", GPTBOT).status, 403);
    let before = fetches(&proxy, "ok");
    // Under the flood, the bot filter in front of the origin challenges robotsguard's address.
    origin.set(
        200,
        "text/html; charset=utf-8",
        "<!DOCTYPE html><html><head><title>Just a moment...</title></head>\
         <body><noscript>Enable JavaScript and cookies to continue</noscript></body></html>",
    );
    // The attacker reads /robots.txt through the proxy: a 200 that differs from the copy.
    assert_eq!(proxy.get(HOST, "/robots.txt", BROWSER).status, 200);
    assert!(
        wait_until(15, || fetches(&proxy, "ok") > before),
        "no refresh"
    );
    let (_, explain) = proxy.explain(HOST, GPTBOT, "/private/report.html");
    let described = explain["robots"]["description"].as_str().unwrap_or("");
    assert!(described.contains("not a robots.txt"), "{explain}");
    let answer = proxy.get(HOST, "/private/report.html", GPTBOT);
    assert_eq!(
        answer.status,
        403,
        "one challenge page lifted robots.txt: GPTBot got {} {:?}",
        answer.status,
        answer.text()
    );
}

// ------------------------------------------------------------------------------------------------
// 4. The admin listener: no connection cap and no header deadline.

/// A robotsguard started under `prlimit --nofile=N:N`, killed on drop.
struct Limited {
    child: std::process::Child,
    listen: SocketAddr,
    admin: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Limited {
    fn start(body: &str, nofile: u32) -> Limited {
        Limited::launch(body, nofile, "")
    }

    /// With a TLS listener on `tls_port` too.
    fn start_with_tls(
        body: &str,
        nofile: u32,
        tls_port: u16,
        cert: &std::path::Path,
        key: &std::path::Path,
    ) -> Limited {
        let tls = format!(
            ", {{address: \"127.0.0.1:{tls_port}\", tls: {{cert: \"{}\", key: \"{}\"}}}}",
            cert.display(),
            key.display()
        );
        Limited::launch(body, nofile, &tls)
    }

    fn launch(body: &str, nofile: u32, more_listeners: &str) -> Limited {
        let dir = tempfile::tempdir().expect("temp dir");
        let listen = SocketAddr::from(([127, 0, 0, 1], support::free_port()));
        let admin = SocketAddr::from(([127, 0, 0, 1], support::free_port()));
        let config = format!(
            "listen: [\"{listen}\"{more_listeners}]\nadmin: \"{admin}\"\nthreads: 1\n{body}"
        );
        let path = dir.path().join("robotsguard.yaml");
        std::fs::write(&path, config).expect("config written");
        let log = std::fs::File::create(dir.path().join("stderr.log")).expect("log file");
        let child = std::process::Command::new("prlimit")
            .arg(format!("--nofile={nofile}:{nofile}"))
            .arg(env!("CARGO_BIN_EXE_robotsguard"))
            .args(["serve", "--config"])
            .arg(&path)
            .arg("--upgrade-socket")
            .arg(dir.path().join("upgrade.sock"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prlimit runs robotsguard");
        let limited = Limited {
            child,
            listen,
            admin,
            _dir: dir,
        };
        assert!(
            wait_until(20, || http_status(limited.admin, "/readyz") == 200),
            "robotsguard did not become ready"
        );
        limited
    }
}

impl Drop for Limited {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The status of `GET target` (0 when there is no answer within 3 s).
fn http_status(addr: SocketAddr, target: &str) -> u16 {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(3)) else {
        return 0;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(3)));
    let request =
        format!("GET {target} HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: {BROWSER}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return 0;
    }
    let mut head = [0u8; 12];
    match stream.read_exact(&mut head) {
        Ok(()) => status_of(&head),
        Err(_) => 0,
    }
}

/// **Attack:** open idle connections to the admin listener (reachable by anything in the
/// cluster that the NetworkPolicy lets through, and by anyone when `admin` is bound to a public
/// address) and send nothing, or a byte a minute.
///
/// The proxy listener is capped (`limits.max_connections`, sized to half of the descriptors left
/// after a reserve) and has a header deadline; the admin listener is pingora's plain HTTP server
/// with neither: each connection lives 60 s per read (pingora's default), forever when trickled,
/// and they all share the process's descriptors. Once they are used up, `accept()` fails with
/// EMFILE on *every* listener and upstream connects fail.
///
/// **Impact:** the proxy stops serving (every client times out) and `/healthz` stops answering,
/// from a few hundred sockets at a 1024 limit (`max_connections` was 384). Safe: cap the admin
/// listener's connections (a few dozen suffice for probes and scrapes) and apply
/// `limits.header_timeout` to it; keep its descriptors inside the reserve.
#[test]
fn idle_admin_connections_do_not_take_the_proxy_down() {
    let origin = Origin::start();
    let limited = Limited::start(&site(&origin, HOST, ""), 1024);
    assert_eq!(http_status(limited.listen, "/page"), 200);
    let mut idle = Vec::new();
    for _ in 0..1000 {
        match TcpStream::connect_timeout(&limited.admin, Duration::from_secs(1)) {
            Ok(stream) => idle.push(stream),
            Err(_) => break,
        }
    }
    thread::sleep(Duration::from_millis(500));
    let proxy_status = http_status(limited.listen, "/page");
    let health = http_status(limited.admin, "/healthz");
    drop(idle);
    assert_eq!(
        (proxy_status, health),
        (200, 200),
        "1000 idle admin connections left the proxy answering {proxy_status} and /healthz {health} \
         (0: no answer)"
    );
}

// ------------------------------------------------------------------------------------------------
// 5. Log volume: the method is logged whole.

/// **Attack:** send requests whose method is a 20 KB token (any `tchar` run is a valid method;
/// pingora accepts it and robotsguard proxies it).
///
/// The access log cuts the User-Agent at 256 bytes and the path at 1 KiB, but writes the method
/// whole, in both formats; the "blocked" line does too. Each request writes a line as long as
/// the request head allows (32 KiB by default), ~25 times what the cuts otherwise allow, and access
/// lines are never rate-limited.
///
/// **Impact:** log flooding (disk, log shipping cost) at the rate of requests. Safe: cut the
/// method like other client text (or log unknown methods as `OTHER`).
#[test]
fn a_huge_method_does_not_make_a_huge_log_line() {
    let origin = Origin::start();
    let proxy = Proxy::start(&format!(
        "access_log: {{format: text}}\n{}",
        site(&origin, HOST, "")
    ));
    let method = "X".repeat(20_000);
    let request = format!("{method} /page HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n");
    let _ = proxy.raw(request.as_bytes());
    assert!(wait_until(5, || proxy.stderr().contains(" access ")));
    let longest = proxy
        .stderr()
        .lines()
        .filter(|line| line.contains(" access "))
        .map(str::len)
        .max()
        .unwrap_or(0);
    assert!(
        longest < 4096,
        "one request wrote an access line of {longest} bytes"
    );
}

/// A self-signed certificate for `shop.example` in `dir`: (cert, key).
fn certificate(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = crate::support::programs::command("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args([
            "-subj",
            "/CN=shop.example",
            "-addext",
            "subjectAltName=DNS:shop.example",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl runs");
    assert!(made.success(), "openssl made no certificate");
    (cert, key)
}

/// **Attack:** open TCP connections to a TLS listener and never send a ClientHello.
///
/// `limits.max_connections` is counted in the edge application, which pingora calls only after
/// the TLS handshake (and, with `proxy_protocol`, after the PROXY header read before it). A
/// connection that never completes its handshake is held for pingora's 60 s handshake timeout
/// without counting against the cap, and there is no limit on how many there are: the book's
/// "connections in all are bounded" does not hold for TLS listeners, and the descriptors reserved
/// for upstreams and robots.txt fetches are consumed too.
///
/// **Impact:** with `nofile` 1024 (`max_connections` 384) 1000 silent sockets to the TLS port make
/// `accept()` fail with EMFILE on every listener: the plain listener, TLS clients and `/healthz`
/// all stop answering for as long as the attacker keeps re-opening them (every 60 s). The same
/// number of sockets on the plain listener is refused by the cap and harms nobody. Safe: take the
/// connection permit before the TLS handshake (pingora's pre-TLS hook runs per connection) and
/// bound the handshake by `limits.header_timeout`.
#[test]
fn silent_tls_handshakes_count_against_max_connections() {
    let origin = Origin::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let (cert, key) = certificate(dir.path());
    let tls_port = support::free_port();
    let body = site(&origin, HOST, "");
    // A TLS listener next to the plain one.
    let limited = Limited::start_with_tls(&body, 1024, tls_port, &cert, &key);
    assert_eq!(http_status(limited.listen, "/page"), 200);
    // Control: as many silent connections on the plain listener meet the cap and harm nobody
    // else (the test process itself has descriptors to spare).
    let mut plain_silent = Vec::new();
    for _ in 0..1000 {
        match TcpStream::connect_timeout(&limited.listen, Duration::from_secs(1)) {
            Ok(stream) => plain_silent.push(stream),
            Err(_) => break,
        }
    }
    thread::sleep(Duration::from_millis(500));
    assert_eq!(plain_silent.len(), 1000);
    assert_eq!(
        http_status(limited.admin, "/healthz"),
        200,
        "control failed"
    );
    drop(plain_silent);
    assert!(wait_until(10, || http_status(limited.listen, "/page") == 200));
    let tls = SocketAddr::from(([127, 0, 0, 1], tls_port));
    let mut silent = Vec::new();
    for _ in 0..1000 {
        match TcpStream::connect_timeout(&tls, Duration::from_secs(1)) {
            Ok(stream) => silent.push(stream),
            Err(_) => break,
        }
    }
    thread::sleep(Duration::from_millis(500));
    let plain = http_status(limited.listen, "/page");
    let health = http_status(limited.admin, "/healthz");
    drop(silent);
    assert_eq!(
        (plain, health),
        (200, 200),
        "1000 silent TLS connections left the plain listener answering {plain} and /healthz \
         {health} (0: no answer)"
    );
}

// ------------------------------------------------------------------------------------------------
// 6. Client-address headers spelt with underscores.

/// A WSGI app under Python's own `wsgiref` server that answers with what it sees as the client's
/// forwarding headers. CGI-style servers (wsgiref, gunicorn before 22, PHP's CGI SAPI) map a
/// header name to `HTTP_` + upper-case with `-` → `_`, so `X_Forwarded_For` and
/// `X-Forwarded-For` both land in `HTTP_X_FORWARDED_FOR` (joined with a comma).
struct Wsgi {
    child: std::process::Child,
    addr: SocketAddr,
}

const WSGI_APP: &str = r#"
import sys
from wsgiref.simple_server import make_server, WSGIRequestHandler
class Quiet(WSGIRequestHandler):
    def log_message(self, *args): pass
def app(env, start):
    body = ("XFF=%s REALIP=%s" % (env.get("HTTP_X_FORWARDED_FOR"), env.get("HTTP_X_REAL_IP"))).encode()
    start("200 OK", [("content-type", "text/plain"), ("content-length", str(len(body)))])
    return [body]
make_server("127.0.0.1", int(sys.argv[1]), app, handler_class=Quiet).serve_forever()
"#;

impl Wsgi {
    fn start() -> Wsgi {
        let port = support::free_port();
        let child = std::process::Command::new("python3")
            .args(["-c", WSGI_APP, &port.to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 runs");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        assert!(
            wait_until(10, || TcpStream::connect(addr).is_ok()),
            "the WSGI origin did not start"
        );
        Wsgi { child, addr }
    }
}

impl Drop for Wsgi {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// **Attack:** an untrusted client sends `X_Forwarded_For: 203.0.113.66` and
/// `X_Real_IP: 203.0.113.66` (underscores instead of hyphens).
///
/// robotsguard replaces `X-Forwarded-For` and removes `X-Real-IP`, `Forwarded`, … by exact name,
/// so the underscore spellings reach the origin untouched. A CGI-style server merges them with
/// the real ones: the app reads `HTTP_X_FORWARDED_FOR = "203.0.113.66,<real client>"` (the
/// leftmost entry, which most apps take as the client, is the attacker's choice) and
/// `HTTP_X_REAL_IP = "203.0.113.66"` (robotsguard never sends one, so it is entirely forged).
/// Checked by hand with gunicorn 21.2 too: same result.
///
/// **Impact:** the book's "headers through which a client could claim another address are
/// removed" does not hold for such origins: their IP allow-lists, rate limits and audit logs
/// take the forged address. (nginx and Apache in front of the app drop underscore headers by
/// default; Python WSGI servers, gunicorn < 22 and CGI setups do not.) Safe: compare header
/// names with `_` read as `-` (and remove any such spelling of the headers robotsguard manages),
/// or drop headers with underscores in their names, as nginx does.
#[test]
fn underscore_spellings_of_client_address_headers_do_not_reach_the_origin() {
    let app = Wsgi::start();
    let config = format!(
        "origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: \"{}\"\n",
        app.addr
    );
    let proxy = Proxy::start(&config);
    let request = format!(
        "GET / HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: {BROWSER}\r\n\
         X_Forwarded_For: 203.0.113.66\r\nX_Real_IP: 203.0.113.66\r\n\
         X-Forwarded-For: 198.51.100.1\r\nX-Real-IP: 198.51.100.1\r\nConnection: close\r\n\r\n"
    );
    let answer = proxy.raw(request.as_bytes()).expect("an answer");
    let seen = answer.text();
    assert_eq!(answer.status, 200, "{seen}");
    // The hyphenated spellings are handled: 198.51.100.1 never gets through.
    assert!(!seen.contains("198.51.100.1"), "{seen}");
    assert!(
        !seen.contains("203.0.113.66"),
        "the app behind robotsguard took a client-chosen address: {seen}"
    );
}

// ------------------------------------------------------------------------------------------------
// 7. A client that stops reading its answer holds the connection without limit.

/// **Attack:** ask for any large allowed resource (an image, a PDF, a video) and never read
/// the answer.
///
/// pingora writes downstream with no write timeout (its default, which robotsguard keeps), and
/// none of `limits.*` covers a response that makes no progress: the connection and its permit in
/// `limits.max_connections` are held for as long as the client keeps the socket open, while
/// every other kind of slow client (head, body, idle) is cut off by a deadline.
///
/// **Impact:** a slow-read attack: zero-window sockets keep the proxy at its connection cap for as
/// long as the attacker likes (here `max_connections: 1` and every limit 2 s: a browser is still
/// locked out 15 s later). Safe: a downstream write timeout (pingora's `set_write_timeout`, or
/// `set_min_send_rate`), e.g. `limits.idle_timeout` without progress.
#[test]
fn a_client_that_stops_reading_is_cut_off() {
    let origin = Origin::start();
    // 8 MiB: the origin hands it all to robotsguard's side of the connection at once (socket
    // buffers), so the origin is done and never times out; only the client-side write waits.
    let big = "x".repeat(8 * 1024 * 1024);
    origin.route("/video.bin", 200, &big);
    let config = format!(
        "limits: {{header_timeout: 2s, idle_timeout: 2s, body_timeout: 2s, max_connections: 1}}\n\
         defaults:\n  upstream_timeouts: {{connect: 2s, read: 2s, write: 2s, idle: 2s}}\n{}",
        site(&origin, HOST, "")
    );
    let proxy = Proxy::start(&config);
    let mut reader_that_never_reads = TcpStream::connect(proxy.addr).expect("connects");
    let request = format!(
        "GET /video.bin HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: {BROWSER}\r\nConnection: close\r\n\r\n"
    );
    reader_that_never_reads
        .write_all(request.as_bytes())
        .expect("request written");
    // Read nothing for 15 s: far beyond every configured limit (2 s).
    thread::sleep(Duration::from_secs(15));
    let open = metric(&proxy.metrics(), "robotsguard_downstream_connections", &[]);
    let browser = http_status(proxy.addr, "/page");
    drop(reader_that_never_reads);
    assert!(
        open == 0.0 && browser == 200,
        "a client that read nothing for 15 s (every limit 2 s) still held its connection \
         (open connections: {open}); a browser got {browser} (0: refused, max_connections: 1)"
    );
}

// ------------------------------------------------------------------------------------------------
// 8. `forward: original`: the robots.txt shortcut is taken on one reading only.

/// **Attack:** with `paths.forward: original`, request `//robots.txt` (or `/\robots.txt`,
/// `//robots.txt?…`).
///
/// robotsguard lets "`/robots.txt`" through before anything else, but checks that on the
/// canonical reading alone (`is_robots_txt(&readings.canonical)`), where `//robots.txt` is
/// `/robots.txt`. It then forwards the client's bytes, and an app that parses targets as Node's
/// `new URL(req.url, base)` does reads `//robots.txt` as host `robots.txt` and path `/`: the
/// home page. The book promises that with `original` "the decision is the most restrictive
/// over every reading an origin could take", naming exactly this WHATWG reading (exempt paths do
/// check every reading; the robots.txt shortcut does not).
///
/// **Impact:** under `Disallow: /` (or `policy` `block`), the site's root page, and with a query
/// anything a query-routed app serves at `/`, reaches any crawler. Checked by hand against a real
/// Node 20 static server as well. Safe: take the shortcut only when every reading is
/// `/robots.txt`.
#[test]
fn robots_txt_shortcut_holds_for_every_reading_with_original_forwarding() {
    use support::whatwg::WhatwgOrigin;
    const HOME: &[u8] = b"HOME PAGE, disallowed to GPTBot";
    let origin = WhatwgOrigin::start(&[
        ("", HOME),
        ("robots.txt", b"User-agent: GPTBot\nDisallow: /\n"),
    ]);
    let config = format!(
        "origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: \"{}\"\n    paths: {{forward: original}}\n",
        origin.addr()
    );
    let proxy = Proxy::start(&config);
    assert_eq!(proxy.get(HOST, "/", GPTBOT).status, 403);
    let mut leaked = Vec::new();
    for target in ["//robots.txt", "/\\robots.txt", "//robots.txt?page_id=2"] {
        let request = format!(
            "GET {target} HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: {GPTBOT}\r\nConnection: close\r\n\r\n"
        );
        if let Ok(answer) = proxy.raw(request.as_bytes()) {
            if answer.body.windows(HOME.len()).any(|w| w == HOME) {
                leaked.push(format!("{target} -> {}", answer.status));
            }
        }
    }
    assert!(
        leaked.is_empty(),
        "GPTBot (Disallow: /) got the home page: {leaked:?}; the origin resolved {:?}",
        origin.received()
    );
}
