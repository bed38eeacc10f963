//! robotsguard behind load balancers and in front of misbehaving upstreams: the real client
//! address (PROXY protocol v1 and v2, trusted X-Forwarded-For), forwarded headers, upstream
//! timeouts, retries and health, upstream names that do not resolve, answers that leak nothing,
//! every answer counted, and the access log.

use crate::support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use support::{inline_robots, metric, site, Origin, Proxy, Request, BROWSER, GPTBOT};

const HOST: &str = "shop.example";
const DISALLOW_PRIVATE: &str = "User-agent: GPTBot\nDisallow: /private\n";

fn v1_header(source: &str, port: u16) -> Vec<u8> {
    let family = if source.contains(':') { "TCP6" } else { "TCP4" };
    let destination = if source.contains(':') {
        "::1"
    } else {
        "127.0.0.1"
    };
    format!("PROXY {family} {source} {destination} {port} 8080\r\n").into_bytes()
}

fn v2_header(source: [u8; 4], port: u16, local: bool) -> Vec<u8> {
    let mut header = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    header.push(if local { 0x20 } else { 0x21 });
    if local {
        header.extend_from_slice(&[0x00, 0x00, 0x00]);
        return header;
    }
    header.push(0x11);
    header.extend_from_slice(&12u16.to_be_bytes());
    header.extend_from_slice(&source);
    header.extend_from_slice(&[127, 0, 0, 1]);
    header.extend_from_slice(&port.to_be_bytes());
    header.extend_from_slice(&8080u16.to_be_bytes());
    header
}

/// Sends `prefix` then `request` on a new connection; the response, or an error when closed.
fn send_after(
    proxy: &Proxy,
    prefix: &[u8],
    request: &Request,
) -> Result<support::Response, String> {
    let mut conn = proxy.conn();
    conn.write(&[prefix, &request.to_bytes()].concat());
    conn.read_response(false)
}

#[test]
fn proxy_protocol_v1_and_v2_name_the_client() {
    let origin = Origin::start();
    // A PROXY header is believed only from a trusted peer: the balancer here is the test.
    let proxy = Proxy::builder(&format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n{}",
        site(&origin, HOST, &inline_robots(DISALLOW_PRIVATE))
    ))
    .listener("proxy_protocol: true")
    .start();
    let page = Request::get("/page").host(HOST).ua(BROWSER);
    let answer = send_after(&proxy, &v1_header("203.0.113.7", 4242), &page).expect("answered");
    assert_eq!(answer.status, 200);
    let answer =
        send_after(&proxy, &v2_header([198, 51, 100, 9], 4343, false), &page).expect("answered");
    assert_eq!(answer.status, 200);
    let seen: Vec<String> = origin
        .proxied_to("/page")
        .iter()
        .map(|r| r.header("x-forwarded-for").unwrap_or("").to_string())
        .collect();
    assert_eq!(seen, ["203.0.113.7", "198.51.100.9"]);

    // The client address reaches the block log line and the block body.
    let blocked = Request::get("/private/x").host(HOST).ua(GPTBOT);
    let answer = send_after(&proxy, &v1_header("2001:db8::7", 1), &blocked).expect("answered");
    assert_eq!(answer.status, 403);
    assert!(answer.text().contains("2001:db8::7"), "{}", answer.text());
    let logged = (0..100).any(|_| {
        thread::sleep(Duration::from_millis(20));
        proxy.stderr().contains("client=2001:db8::7")
    });
    assert!(logged, "{}", proxy.stderr());

    // LOCAL (a balancer's own health check) keeps the socket's peer.
    let answer = send_after(&proxy, &v2_header([0; 4], 0, true), &page).expect("answered");
    assert_eq!(answer.status, 200);
    assert_eq!(
        origin
            .proxied_to("/page")
            .last()
            .and_then(|r| r.header("x-forwarded-for").map(str::to_string)),
        Some("127.0.0.1".to_string())
    );

    // Without a valid header, nothing is served on the connection.
    for prefix in [
        &b""[..],
        b"PROXY TCP4 nonsense\r\n",
        b"PROXY TCP9 1.2.3.4 5.6.7.8 1 2\r\n",
    ] {
        let answer = send_after(&proxy, prefix, &page);
        assert!(
            answer.is_err(),
            "served without a valid PROXY header: {answer:?}"
        );
    }
    assert!(
        metric(
            &proxy.metrics(),
            "robotsguard_proxy_protocol_refused_total",
            &[]
        ) >= 3.0
    );
}

#[test]
fn proxy_protocol_on_a_tls_listener() {
    let dir = tempfile::tempdir().expect("temp dir");
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
        .arg(dir.path().join("key.pem"))
        .arg("-out")
        .arg(dir.path().join("cert.pem"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl runs");
    assert!(made.success());
    let origin = Origin::start();
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    let proxy = Proxy::builder(&format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n{}",
        site(&origin, HOST, "")
    ))
    .listener(&format!(
        "proxy_protocol: true, tls: {{cert: \"{}\", key: \"{}\"}}",
        cert.display(),
        key.display()
    ))
    .start();
    // A PROXY header, then TLS: openssl s_client cannot send the header first, so relay: a local
    // listener hands curl's TLS bytes to the proxy after writing the header.
    let relay = TcpListener::bind("127.0.0.1:0").expect("relay binds");
    let relay_addr = relay.local_addr().expect("relay address");
    let target = proxy.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let stop_relay = stop.clone();
    let relay_thread = thread::spawn(move || {
        relay.set_nonblocking(true).expect("non-blocking");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !stop_relay.load(Ordering::Relaxed) && Instant::now() < deadline {
            let Ok((client, _)) = relay.accept() else {
                thread::sleep(Duration::from_millis(10));
                continue;
            };
            let Ok(mut upstream) = TcpStream::connect(target) else {
                return;
            };
            let _ = upstream.write_all(&v1_header("192.0.2.44", 5555));
            let _ = client.set_nonblocking(false);
            pipe(client, upstream);
        }
    });
    let output = crate::support::programs::command("curl")
        .args(["-sk", "--max-time", "10", "-A", BROWSER])
        .arg("--resolve")
        .arg(format!("shop.example:{}:127.0.0.1", relay_addr.port()))
        .arg(format!(
            "https://shop.example:{}/tls-page",
            relay_addr.port()
        ))
        .output()
        .expect("curl runs");
    stop.store(true, Ordering::Relaxed);
    let _ = relay_thread.join();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "origin: /tls-page",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen = origin.proxied_to("/tls-page");
    assert_eq!(seen[0].header("x-forwarded-for"), Some("192.0.2.44"));
    assert_eq!(seen[0].header("x-forwarded-proto"), Some("https"));
}

/// Copies both ways between two sockets until either closes (bounded by their read timeouts).
fn pipe(a: TcpStream, b: TcpStream) {
    let (mut a_read, mut b_write) = (a.try_clone().expect("clone"), b.try_clone().expect("clone"));
    let _ = a.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = b.set_read_timeout(Some(Duration::from_secs(10)));
    let forward = thread::spawn(move || {
        let mut chunk = [0u8; 16 * 1024];
        while let Ok(n) = a_read.read(&mut chunk) {
            if n == 0 || b_write.write_all(&chunk[..n]).is_err() {
                break;
            }
        }
        let _ = b_write.shutdown(std::net::Shutdown::Write);
    });
    let (mut b_read, mut a_write) = (b, a);
    let mut chunk = [0u8; 16 * 1024];
    while let Ok(n) = b_read.read(&mut chunk) {
        if n == 0 || a_write.write_all(&chunk[..n]).is_err() {
            break;
        }
    }
    let _ = a_write.shutdown(std::net::Shutdown::Both);
    let _ = forward.join();
}

#[test]
fn forwarded_headers_from_untrusted_peers_are_replaced() {
    let origin = Origin::start();
    let proxy = Proxy::start(&site(&origin, HOST, &inline_robots(DISALLOW_PRIVATE)));
    let spoofed = Request::get("/page")
        .host(HOST)
        .ua(BROWSER)
        .header("X-Forwarded-For", "6.6.6.6")
        .header("X-Forwarded-Proto", "https")
        .header("X-Forwarded-Host", "evil.example");
    assert_eq!(proxy.send(&spoofed).status, 200);
    let seen = &origin.proxied_to("/page")[0];
    assert_eq!(seen.header("x-forwarded-for"), Some("127.0.0.1"));
    assert_eq!(seen.header("x-forwarded-proto"), Some("http"));
    assert_eq!(seen.header("x-forwarded-host"), Some(HOST));
    let blocked = Request::get("/private/x")
        .host(HOST)
        .ua(GPTBOT)
        .header("X-Forwarded-Proto", "https");
    let answer = proxy.send(&blocked);
    assert!(
        answer.text().contains("http://shop.example/robots.txt"),
        "{}",
        answer.text()
    );
    assert!(
        answer.text().contains("Your address: 127.0.0.1"),
        "{}",
        answer.text()
    );
}

#[test]
fn forwarded_headers_from_trusted_proxies_are_believed() {
    let origin = Origin::start();
    let body = format!(
        "trusted_proxies: [\"127.0.0.1/32\", \"10.0.0.0/8\"]\n{}",
        site(&origin, HOST, &inline_robots(DISALLOW_PRIVATE))
    );
    let proxy = Proxy::start(&body);
    let from_balancer = Request::get("/page")
        .host(HOST)
        .ua(BROWSER)
        .header("X-Forwarded-For", "6.6.6.6, 203.0.113.7, 10.1.2.3")
        .header("X-Forwarded-Proto", "https")
        .header("X-Forwarded-Host", "www.shop.example")
        .header("X-Real-IP", "203.0.113.7");
    assert_eq!(proxy.send(&from_balancer).status, 200);
    let seen = &origin.proxied_to("/page")[0];
    assert_eq!(
        seen.header("x-forwarded-for"),
        Some("6.6.6.6, 203.0.113.7, 10.1.2.3, 127.0.0.1")
    );
    assert_eq!(seen.header("x-forwarded-proto"), Some("https"));
    assert_eq!(seen.header("x-forwarded-host"), Some("www.shop.example"));
    assert_eq!(seen.header("x-real-ip"), Some("203.0.113.7"));
    // The client is the rightmost untrusted address: the one in the block body and the log.
    let blocked = Request::get("/private/x")
        .host(HOST)
        .ua(GPTBOT)
        .header("X-Forwarded-For", "6.6.6.6, 203.0.113.7")
        .header("X-Forwarded-Proto", "https");
    let answer = proxy.send(&blocked);
    assert_eq!(answer.status, 403);
    assert!(
        answer.text().contains("https://shop.example/robots.txt"),
        "{}",
        answer.text()
    );
    assert!(
        answer.text().contains("Your address: 203.0.113.7"),
        "{}",
        answer.text()
    );
    let logged = (0..100).any(|_| {
        thread::sleep(Duration::from_millis(20));
        proxy.stderr().contains("client=203.0.113.7")
    });
    assert!(logged, "{}", proxy.stderr());
}

/// An upstream that accepts connections and reads requests but never answers.
fn hung_upstream() -> (SocketAddr, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    let stop = Arc::new(AtomicBool::new(false));
    let stop_thread = stop.clone();
    thread::spawn(move || {
        listener.set_nonblocking(true).expect("non-blocking");
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut held = Vec::new();
        while !stop_thread.load(Ordering::Relaxed) && Instant::now() < deadline {
            match listener.accept() {
                Ok((stream, _)) => held.push(stream),
                Err(_) => thread::sleep(Duration::from_millis(10)),
            }
        }
    });
    (addr, stop)
}

#[test]
fn a_hung_upstream_gets_504_after_the_read_timeout() {
    let (upstream, stop) = hung_upstream();
    let config = format!(
        "origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: \"{upstream}\"\n\
         \x20   upstream_timeouts: {{read: 1s}}\n{}",
        inline_robots(DISALLOW_PRIVATE)
    );
    let proxy = Proxy::start(&config);
    let started = Instant::now();
    let answer = proxy.get(HOST, "/slow", BROWSER);
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    assert_eq!(answer.status, 504);
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert!(
        !answer.text().contains(&upstream.to_string()),
        "{}",
        answer.text()
    );
    assert!(
        answer.text().starts_with("504 Gateway Timeout"),
        "{}",
        answer.text()
    );
}

#[test]
fn with_one_upstream_dead_every_request_is_answered() {
    let origin = Origin::start();
    let dead = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address")
    };
    let config = format!(
        "origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: [\"{dead}\", \"{}\"]\n{}",
        origin.addr(),
        inline_robots(DISALLOW_PRIVATE)
    );
    let proxy = Proxy::start(&config);
    let statuses: Vec<u16> = (0..20)
        .map(|_| proxy.get(HOST, "/page", BROWSER).status)
        .collect();
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
    let text = proxy.metrics();
    assert_eq!(
        metric(
            &text,
            "robotsguard_upstream_up",
            &[("origin", "shop"), ("upstream", &dead.to_string())]
        ),
        0.0,
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "robotsguard_upstream_up",
            &[("origin", "shop"), ("upstream", &origin.addr().to_string())]
        ),
        1.0
    );
    // POSTs are retried too: nothing reached the dead upstream.
    let post = Request::new("POST", "/form")
        .host(HOST)
        .ua(BROWSER)
        .body(b"a=1");
    assert_eq!(proxy.send(&post).status, 200);
}

#[test]
fn an_active_health_check_takes_a_failing_upstream_out() {
    let good = Origin::start();
    let sick = Origin::start();
    sick.route("/healthz", 500, "sick");
    good.route("/healthz", 200, "ok");
    let config = format!(
        "origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: [\"{}\", \"{}\"]\n\
         \x20   health_check: {{path: /healthz, interval: 200ms}}\n{}",
        sick.addr(),
        good.addr(),
        inline_robots(DISALLOW_PRIVATE)
    );
    let proxy = Proxy::start(&config);
    let down = (0..100).any(|_| {
        thread::sleep(Duration::from_millis(50));
        metric(
            &proxy.metrics(),
            "robotsguard_upstream_up",
            &[("upstream", &sick.addr().to_string())],
        ) == 0.0
    });
    assert!(down, "the failing upstream was not taken out");
    let before = sick.proxied_to("/page").len();
    for _ in 0..10 {
        assert_eq!(proxy.get(HOST, "/page", BROWSER).status, 200);
    }
    assert_eq!(sick.proxied_to("/page").len(), before);
}

#[test]
fn an_upstream_name_that_does_not_resolve_takes_down_only_its_origin() {
    let origin = Origin::start();
    let config = format!(
        "origins:\n  - name: gone\n    hosts: [gone.example]\n    upstream: \"backend.invalid:80\"\n{}\
         \x20 - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: \"{}\"\n{}",
        inline_robots(DISALLOW_PRIVATE),
        origin.addr(),
        inline_robots(DISALLOW_PRIVATE)
    );
    let proxy = Proxy::start(&config);
    assert_eq!(proxy.get(HOST, "/page", BROWSER).status, 200);
    let gone = proxy.get("gone.example", "/page", BROWSER);
    assert_eq!(gone.status, 502);
    assert_eq!(
        gone.text(),
        "502 Bad Gateway: the site's server is unavailable.\n"
    );
    assert!(!gone.text().contains("invalid"));
    let unresolved = (0..60).any(|_| {
        thread::sleep(Duration::from_millis(50));
        metric(
            &proxy.metrics(),
            "robotsguard_upstream_unresolved",
            &[("origin", "gone")],
        ) == 1.0
    });
    assert!(unresolved);
    assert!(
        proxy.stderr().contains("backend.invalid"),
        "the log names it"
    );
}

#[test]
fn block_bodies_leak_no_upstream_or_file_detail() {
    let dead = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address")
    };
    let config = |blog_robots: &str| {
        format!(
            "origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: \"{dead}\"\n\
             \x20   tls: {{sni: internal-backend.corp, verify: true}}\n\
             \x20 - name: blog\n    hosts: [blog.example]\n    upstream: \"{dead}\"\n\
             \x20   robots: {blog_robots}\n"
        )
    };
    let proxy = Proxy::start(&config("{source: inline, text: \"\"}"));
    // A robots.txt file missing at start stops `serve`; a reload adding one that is missing
    // leaves that origin with robots.txt unreachable, and its reason names the file.
    assert!(proxy.wait_log("config reload: watching", 1, Duration::from_secs(10)));
    let missing = config("{source: file, path: /srv/secret/robots-missing.txt}");
    proxy.replace_config(&proxy.config_text(&missing));
    assert_eq!(
        proxy.wait_reloads("success", 1.0),
        1.0,
        "{}",
        proxy.stderr()
    );
    for host in [HOST, "blog.example"] {
        let answer = proxy.get(host, "/x", GPTBOT);
        assert_eq!(answer.status, 403, "{host}");
        let text = answer.text();
        for secret in [
            dead.to_string(),
            dead.port().to_string(),
            "internal-backend".to_string(),
            "/srv/secret".to_string(),
            "refused".to_string(),
            "error".to_string(),
        ] {
            assert!(
                !text.contains(&secret),
                "{host}: body names `{secret}`:\n{text}"
            );
        }
    }
    // The admin listener does say why.
    let (_, explain) = proxy.explain(HOST, GPTBOT, "/x");
    assert!(explain["robots"]["last_error"]
        .as_str()
        .is_some_and(|e| !e.is_empty()));
}

#[test]
fn every_answer_is_counted() {
    let origin = Origin::start();
    let proxy = Proxy::start(&site(&origin, HOST, &inline_robots(DISALLOW_PRIVATE)));
    assert_eq!(proxy.get("unknown.example", "/", BROWSER).status, 421);
    assert_eq!(proxy.get(HOST, "/page", BROWSER).status, 200);
    assert_eq!(proxy.get(HOST, "/private/x", GPTBOT).status, 403);
    let _ = proxy.raw(b"GET private HTTP/1.1\r\nHost: shop.example\r\n\r\n");
    let want = |labels: &[(&str, &str)], value: f64| {
        assert_eq!(
            proxy.wait_metric("robotsguard_responses_total", labels, value),
            value,
            "{labels:?}"
        );
    };
    // 421 and the 400 for a target that is not a path, both before routing.
    want(&[("origin", "unrouted"), ("code_class", "4xx")], 2.0);
    want(&[("origin", "shop"), ("code_class", "2xx")], 1.0);
    want(&[("origin", "shop"), ("code_class", "4xx")], 1.0);
    let text = proxy.metrics();
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "robotsguard_downstream_connections",
    ] {
        assert!(
            support::samples(&text, name)
                .first()
                .is_some_and(|(_, v)| *v >= 0.0),
            "{name} missing"
        );
    }
}

#[test]
fn the_access_log_has_a_json_line_per_request() {
    let origin = Origin::start();
    let body = format!(
        "access_log: {{format: json}}\n{}",
        site(&origin, HOST, &inline_robots(DISALLOW_PRIVATE))
    );
    let proxy = Proxy::start(&body);
    assert_eq!(proxy.get(HOST, "/page?q=1", BROWSER).status, 200);
    assert_eq!(proxy.get(HOST, "/private/x", GPTBOT).status, 403);
    assert_eq!(proxy.get("unknown.example", "/", BROWSER).status, 421);
    let lines = (0..100)
        .find_map(|_| {
            thread::sleep(Duration::from_millis(30));
            let lines: Vec<serde_json::Value> = proxy
                .stderr()
                .lines()
                .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
                .filter(|value| value.get("request_id").is_some())
                .collect();
            (lines.len() >= 3).then_some(lines)
        })
        .unwrap_or_else(|| panic!("no access lines:\n{}", proxy.stderr()));
    let page = &lines[0];
    assert_eq!(page["path"], "/page?q=1");
    assert_eq!(page["status"], 200);
    assert_eq!(page["client"], "127.0.0.1");
    assert_eq!(page["host"], HOST);
    assert_eq!(page["decision"], "pass");
    assert_eq!(page["upstream"], origin.addr().to_string());
    assert!(page["duration_ms"].as_f64().is_some());
    assert!(page["user_agent"]
        .as_str()
        .is_some_and(|ua| ua.starts_with("Mozilla")));
    let id = page["request_id"].as_str().unwrap_or_default();
    assert!(!id.is_empty());
    assert_eq!(
        origin.proxied_to("/page?q=1")[0].header("x-request-id"),
        Some(id),
        "the origin gets the same request id"
    );
    assert_eq!(lines[1]["decision"], "blocked");
    assert_eq!(lines[1]["crawler"], "GPTBot");
    assert_eq!(lines[1]["status"], 403);
    assert_eq!(lines[2]["status"], 421);
    assert_eq!(lines[2]["decision"], "unrouted");
}
