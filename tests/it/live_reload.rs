//! Config hot reload through the real binary: rewrites under load, broken configs, ConfigMap
//! symlink swaps, SIGHUP, restart-only settings, origins added and removed.

use crate::support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use support::live::{try_open, try_send, Launch, Layout};
use support::{inline_robots, Origin, Proxy, Request, BROWSER, GPTBOT};

/// Under policy A GPTBot may not fetch `/private`; under policy B it may not fetch `/public`.
const POLICY_A: &str = "User-agent: GPTBot\nDisallow: /private\n";
const POLICY_B: &str = "User-agent: GPTBot\nDisallow: /public\n";

fn shop(origin: &Origin, robots: &str) -> String {
    format!(
        "origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n{}",
        origin.addr(),
        inline_robots(robots)
    )
}

/// The status GPTBot gets for `/private` on a fresh connection.
fn gptbot_private(proxy: &Proxy) -> u16 {
    proxy.get("shop.example", "/private", GPTBOT).status
}

/// Polls until GPTBot's answer for `/private` is `want` (at most 10 s); returns the last answer.
fn wait_policy(proxy: &Proxy, want: u16) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut status = 0;
    for _ in 0..2000 {
        status = gptbot_private(proxy);
        if status == want || Instant::now() > deadline {
            break;
        }
        thread::sleep(Duration::from_millis(5));
    }
    status
}

/// Keeps keep-alive connections busy until told to stop (or 60 s, or 200,000 requests each),
/// recording every request that did not get an acceptable answer.
struct Clients {
    stop: Arc<AtomicBool>,
    threads: Vec<thread::JoinHandle<u64>>,
    failures: Arc<Mutex<Vec<String>>>,
}

impl Clients {
    fn start(proxy: &Proxy, count: usize) -> Clients {
        let stop = Arc::new(AtomicBool::new(false));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let threads = (0..count)
            .map(|_| {
                let (stop, failures, addr) = (stop.clone(), failures.clone(), proxy.addr);
                thread::spawn(move || client_loop(addr, &stop, &failures))
            })
            .collect();
        Clients {
            stop,
            threads,
            failures,
        }
    }

    /// Stops the clients; returns the requests sent and the failures.
    fn finish(self) -> (u64, Vec<String>) {
        self.stop.store(true, Ordering::Release);
        let sent = self
            .threads
            .into_iter()
            .map(|t| t.join().expect("client thread finishes"))
            .sum();
        let failures = self.failures.lock().expect("failures lock").clone();
        (sent, failures)
    }
}

fn client_loop(
    addr: std::net::SocketAddr,
    stop: &AtomicBool,
    failures: &Mutex<Vec<String>>,
) -> u64 {
    // A browser always passes; GPTBot may always fetch /other; /private depends on the policy.
    let checks: [(&str, &str, &[u16]); 3] = [
        (BROWSER, "/private", &[200]),
        (GPTBOT, "/other", &[200]),
        (GPTBOT, "/private", &[200, 403]),
    ];
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut sent = 0u64;
    let mut conn = None;
    for i in 0..200_000usize {
        if stop.load(Ordering::Acquire) || Instant::now() > deadline {
            break;
        }
        let (ua, path, allowed) = checks[i % checks.len()];
        let request = Request::get(path).host("shop.example").ua(ua);
        let result = match conn.as_mut() {
            Some(c) => try_send(c, &request),
            None => try_open(addr).and_then(|mut c| {
                let answer = try_send(&mut c, &request);
                conn = Some(c);
                answer
            }),
        };
        sent += 1;
        let failure = match result {
            Ok(response) if allowed.contains(&response.status) => {
                if response.header("connection") == Some("close") {
                    conn = None;
                }
                continue;
            }
            Ok(response) => format!(
                "{ua} {path}: status {}: {}",
                response.status,
                response.text()
            ),
            Err(e) => format!("{ua} {path}: {e}"),
        };
        conn = None;
        failures.lock().expect("failures lock").push(failure);
    }
    sent
}

#[test]
fn reloading_a_hundred_times_under_load_fails_no_request_and_applies_each_policy() {
    let origin = Origin::start();
    let proxy = Proxy::start(&shop(&origin, POLICY_A));
    assert!(proxy.wait_log("config reload: watching", 1, Duration::from_secs(10)));
    assert_eq!(gptbot_private(&proxy), 403, "policy A at start");
    let clients = Clients::start(&proxy, 3);
    let started = Instant::now();

    let mut applied = 0;
    for round in 1..=100 {
        let (robots, want) = if round % 2 == 1 {
            (POLICY_B, 200)
        } else {
            (POLICY_A, 403)
        };
        let text = proxy.config_text(&shop(&origin, robots));
        // Most saves replace the file (editors, kubelet); every fourth writes it in place.
        if round % 4 == 0 {
            proxy.overwrite_config(&text);
        } else {
            proxy.replace_config(&text);
        }
        let status = wait_policy(&proxy, want);
        assert_eq!(status, want, "round {round}: the new policy took effect");
        applied += 1;

        if round == 50 {
            // A broken save mid-flight: the running policy stays, the failure is counted.
            let failures = proxy.reloads("failure");
            proxy.replace_config(&proxy.config_text("origins: [\n"));
            assert_eq!(
                proxy.wait_reloads("failure", failures + 1.0),
                failures + 1.0
            );
            assert_eq!(gptbot_private(&proxy), want, "the running policy stays");
            let text = proxy.metrics();
            assert_eq!(
                support::metric(&text, "robotsguard_config_last_reload_successful", &[]),
                0.0
            );
        }
    }
    let (sent, failures) = clients.finish();
    eprintln!(
        "{applied} policies applied, {sent} requests in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} failed requests of {sent}, first: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(sent > 300, "the clients kept sending ({sent})");
    assert!(proxy.reloads("success") >= 100.0);
    let text = proxy.metrics();
    assert_eq!(
        support::metric(&text, "robotsguard_config_last_reload_successful", &[]),
        1.0
    );
}

#[test]
fn a_broken_config_keeps_the_running_one_and_logs_every_error_with_its_position() {
    let origin = Origin::start();
    let proxy = Proxy::start(&shop(&origin, POLICY_A));
    assert!(proxy.wait_log("config reload: watching", 1, Duration::from_secs(10)));
    // Lines 9 and 10 of the file (after the four header lines) are wrong.
    let broken = proxy.config_text(&format!(
        "origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    colour: blue\n    robots: {{source: inline, refresh: soon, text: \"User-agent: *\\nDisallow: /\\n\"}}\n",
        origin.addr()
    ));
    proxy.replace_config(&broken);
    assert_eq!(proxy.wait_reloads("failure", 1.0), 1.0);
    assert!(proxy.wait_log("config reload failed", 1, Duration::from_secs(5)));
    let log = proxy.stderr();
    assert!(
        log.contains("robotsguard.yaml:9:5: unknown key `colour`"),
        "{log}"
    );
    assert!(log.contains("robotsguard.yaml:10:"), "{log}");
    assert!(log.contains("`soon` is not a duration"), "{log}");
    assert_eq!(gptbot_private(&proxy), 403, "policy A stays");
    assert_eq!(proxy.get("shop.example", "/other", GPTBOT).status, 200);
    let text = proxy.metrics();
    assert_eq!(
        support::metric(&text, "robotsguard_config_last_reload_successful", &[]),
        0.0
    );
    assert_eq!(
        support::metric(
            &text,
            "robotsguard_config_reloads_total",
            &[("result", "success")]
        ),
        0.0
    );

    // Fixing the file applies it and clears the failure state.
    proxy.replace_config(&proxy.config_text(&shop(&origin, POLICY_B)));
    assert_eq!(proxy.wait_reloads("success", 1.0), 1.0);
    assert_eq!(wait_policy(&proxy, 200), 200);
    let text = proxy.metrics();
    assert_eq!(
        support::metric(&text, "robotsguard_config_last_reload_successful", &[]),
        1.0
    );
}

#[test]
fn a_configmap_symlink_swap_reloads() {
    let origin = Origin::start();
    let body = shop(&origin, POLICY_A);
    let proxy = Launch::new(&body).layout(Layout::ConfigMap).start();
    assert!(proxy.wait_log("config reload: watching", 1, Duration::from_secs(10)));
    assert_eq!(gptbot_private(&proxy), 403);

    proxy.configmap_update(&proxy.config_text(&shop(&origin, POLICY_B)));
    assert_eq!(
        wait_policy(&proxy, 200),
        200,
        "the swapped-in policy B applies"
    );
    // The old version directory is gone; the next swap is still seen.
    proxy.configmap_update(&proxy.config_text(&shop(&origin, POLICY_A)));
    assert_eq!(wait_policy(&proxy, 403), 403, "policy A again");
    assert_eq!(proxy.reloads("success"), 2.0);
    assert_eq!(proxy.reloads("failure"), 0.0);
}

#[test]
fn sighup_reloads() {
    let origin = Origin::start();
    let proxy = Proxy::start(&shop(&origin, POLICY_A));
    assert!(proxy.wait_log("config reload: watching", 1, Duration::from_secs(10)));
    proxy.signal("HUP");
    assert_eq!(proxy.wait_reloads("success", 1.0), 1.0);
    assert!(proxy.wait_log("trigger=\"SIGHUP\"", 1, Duration::from_secs(5)));
    // SIGHUP's default action would have ended the process; it still serves.
    assert_eq!(gptbot_private(&proxy), 403);
    assert_eq!(proxy.get("shop.example", "/x", BROWSER).status, 200);
}

#[test]
fn restart_only_settings_are_not_half_applied() {
    let origin = Origin::start();
    let proxy = Proxy::start(&shop(&origin, POLICY_A));
    assert!(proxy.wait_log("config reload: watching", 1, Duration::from_secs(10)));
    let other_listener = std::net::SocketAddr::from(([127, 0, 0, 1], support::free_port()));
    let other_admin = std::net::SocketAddr::from(([127, 0, 0, 1], support::free_port()));
    let moved = format!(
        "listen: [\"{other_listener}\"]\nadmin: \"{other_admin}\"\nthreads: 2\nshutdown: {{grace: 1s}}\n{}",
        shop(&origin, POLICY_B)
    );
    proxy.replace_config(&moved);
    // The rest of the file applies ...
    assert_eq!(wait_policy(&proxy, 200), 200, "policy B applies");
    // ... while the sockets stay where they are, and the log and the metric say so.
    let text = proxy.metrics();
    assert_eq!(
        support::metric(&text, "robotsguard_config_restart_required", &[]),
        1.0
    );
    assert!(proxy.wait_log("applied only on restart", 1, Duration::from_secs(5)));
    assert!(
        proxy
            .stderr()
            .contains("settings=listen, threads, admin.address"),
        "{}",
        proxy.stderr()
    );
    assert!(std::net::TcpStream::connect(other_listener).is_err());
    assert!(std::net::TcpStream::connect(other_admin).is_err());

    // Back to the running values: nothing is pending any more.
    let original = support::live::header(proxy.addr, proxy.admin, "1s");
    proxy.replace_config(&(original + &shop(&origin, POLICY_A)));
    assert_eq!(wait_policy(&proxy, 403), 403);
    let text = proxy.metrics();
    assert_eq!(
        support::metric(&text, "robotsguard_config_restart_required", &[]),
        0.0
    );
}

#[test]
fn origins_added_are_fetched_and_origins_removed_are_dropped() {
    let shop_origin = Origin::start();
    let blog_origin = Origin::start();
    blog_origin.robots(200, "User-agent: GPTBot\nDisallow: /drafts\n");
    let proxy = Proxy::start(&shop(&shop_origin, POLICY_A));
    assert!(proxy.wait_log("config reload: watching", 1, Duration::from_secs(10)));
    assert_eq!(proxy.get("blog.example", "/", BROWSER).status, 421);

    let blog = format!(
        "  - name: blog\n    hosts: [\"blog.example\"]\n    upstream: \"{}\"\n    robots: {{source: origin}}\n",
        blog_origin.addr()
    );
    proxy.replace_config(&proxy.config_text(&(shop(&shop_origin, POLICY_A) + &blog)));
    assert_eq!(proxy.wait_reloads("success", 1.0), 1.0);
    assert_eq!(proxy.get("blog.example", "/post", BROWSER).status, 200);
    // The new origin's robots.txt is fetched and enforced. Until the first fetch its crawlers get
    // `on_unreachable` (disallow), so wait for an allowed path to pass.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut status = 0;
    for _ in 0..500 {
        status = proxy.get("blog.example", "/post", GPTBOT).status;
        if status == 200 || Instant::now() > deadline {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(status, 200);
    assert!(blog_origin.robots_fetches() >= 1);
    assert_eq!(proxy.get("blog.example", "/drafts/1", GPTBOT).status, 403);
    assert_eq!(proxy.admin_status("/readyz"), Some(200));

    // Removing shop: its host is no longer served, and its robots gauges go.
    let only_blog = format!("origins:\n{blog}");
    proxy.replace_config(&proxy.config_text(&only_blog));
    assert_eq!(proxy.wait_reloads("success", 2.0), 2.0);
    assert_eq!(proxy.get("shop.example", "/", BROWSER).status, 421);
    assert_eq!(proxy.get("blog.example", "/post", BROWSER).status, 200);
    let text = proxy.metrics();
    assert!(
        support::samples(&text, "robotsguard_robots_state")
            .iter()
            .all(|(labels, _)| labels.get("origin").map(String::as_str) != Some("shop")),
        "{text}"
    );
    // The log line is written by the log thread, possibly after the metric moved.
    assert!(
        proxy.wait_log("removed=shop", 1, Duration::from_secs(10)),
        "{}",
        proxy.stderr()
    );
}

/// A reload that lowers `limits.header_timeout` applies to a connection kept alive from before
/// it: the connection's next request head is held to the new deadline, not the one it opened
/// under (a connection may not keep a laxer limit than the config in force).
#[test]
fn a_lowered_header_timeout_applies_to_a_connection_already_kept_alive() {
    use std::io::{Read, Write};
    let origin = Origin::start();
    // A short answer, sent whole at once: the connection is back waiting for its next head
    // (with the limits of then) well before the reload, which is what is tested.
    origin.route("/x", 200, "ok");
    let proxy = Proxy::start(&format!(
        "limits: {{header_timeout: 60s, idle_timeout: 60s}}\n{}",
        shop(&origin, POLICY_A)
    ));
    assert!(proxy.wait_log("config reload: watching", 1, Duration::from_secs(10)));
    let mut stream = std::net::TcpStream::connect(proxy.addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("read timeout");
    let request = format!("GET /x HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: {BROWSER}\r\n\r\n");
    stream.write_all(request.as_bytes()).expect("first request");
    let mut first = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(10);
    while !String::from_utf8_lossy(&first).contains("\r\n\r\n") && Instant::now() < deadline {
        match stream.read(&mut chunk) {
            Ok(0) => panic!("the proxy closed the kept-alive connection after its first answer"),
            Ok(n) => first.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("reading the first answer: {e}"),
        }
    }
    assert!(
        String::from_utf8_lossy(&first).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&first)
    );

    let lowered = proxy.config_text(&format!(
        "limits: {{header_timeout: 2s, idle_timeout: 60s}}\n{}",
        shop(&origin, POLICY_A)
    ));
    proxy.replace_config(&lowered);
    assert_eq!(proxy.wait_reloads("success", 1.0), 1.0);
    // Drain what is left of the first answer's body before the next request starts.
    thread::sleep(Duration::from_millis(300));
    while let Ok(n) = stream.read(&mut chunk) {
        if n == 0 {
            panic!("the proxy closed the kept-alive connection at the reload");
        }
    }

    // The next head, trickled a byte every 300 ms: a per-read timeout never fires, the head's
    // deadline does, at the reloaded 2 s rather than the 60 s in force when the connection opened.
    stream
        .write_all(b"GET /x HTTP/1.1\r\nHost: shop.example\r\nX-Slow: ")
        .expect("second head starts");
    let started = Instant::now();
    let (answer, closed) = support::trickle::trickle_until_closed(&mut stream, b'a');
    let elapsed = started.elapsed();
    assert!(closed, "the trickling connection was never closed");
    assert!(
        elapsed < Duration::from_secs(6),
        "closed after {elapsed:?}, not at the reloaded 2 s deadline"
    );
    assert!(
        String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    assert_eq!(
        origin.proxied().len(),
        1,
        "only the first request reached the origin"
    );
}
