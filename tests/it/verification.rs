//! Verified crawlers, end to end: the real proxy behind a trusted proxy address (so clients can
//! be documentation addresses), a real origin, range lists served over HTTP and from files, and
//! a real DNS server on loopback for forward-confirmed reverse DNS.

use crate::support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use support::dns::{DnsServer, Mode};
use support::{metric, Origin, Proxy, Request, BROWSER, GOOGLEBOT};

const HOST: &str = "shop.example";

/// A range list server: answers `GET /list.json` with the current body and an ETag, 304 when
/// `If-None-Match` matches; counts requests and conditional ones.
struct ListServer {
    addr: SocketAddr,
    body: Arc<Mutex<(String, String)>>,
    requests: Arc<AtomicUsize>,
    not_modified: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl ListServer {
    fn start(body: &str) -> ListServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("list server binds");
        listener.set_nonblocking(true).expect("non-blocking");
        let addr = listener.local_addr().expect("address");
        let body = Arc::new(Mutex::new((body.to_string(), "\"v1\"".to_string())));
        let requests = Arc::new(AtomicUsize::new(0));
        let not_modified = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (body_c, requests_c, not_modified_c, stop_c) = (
            body.clone(),
            requests.clone(),
            not_modified.clone(),
            stop.clone(),
        );
        thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(240);
            while !stop_c.load(Ordering::Relaxed) && Instant::now() < deadline {
                let Ok((mut stream, _)) = listener.accept() else {
                    thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
                    match stream.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => break,
                    }
                }
                requests_c.fetch_add(1, Ordering::Relaxed);
                let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
                let (body, etag) = body_c.lock().map(|b| b.clone()).unwrap_or_default();
                let response = if head.contains(&format!("if-none-match: {etag}")) {
                    not_modified_c.fetch_add(1, Ordering::Relaxed);
                    format!("HTTP/1.1 304 Not Modified\r\netag: {etag}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                } else {
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\netag: {etag}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                };
                let _ = stream.write_all(response.as_bytes());
            }
        });
        ListServer {
            addr,
            body,
            requests,
            not_modified,
            stop,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/list.json", self.addr)
    }

    fn set(&self, body: &str, etag: &str) {
        if let Ok(mut current) = self.body.lock() {
            *current = (body.to_string(), etag.to_string());
        }
    }
}

impl Drop for ListServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// How long a request waits for the loopback DNS server: generous, because the whole suite shares
/// two cores and a reverse-DNS check answered late is (rightly) "unverified", not "impostor".
const DNS_TIMEOUT_SECS: u64 = 5;

const GOOGLE_LIST: &str = r#"{"creationTime": "2026-11-20T00:00:00", "prefixes": [{"ipv4Prefix": "192.0.2.0/28"}, {"ipv6Prefix": "2001:db8:4860::/48"}]}"#;

/// A site behind robotsguard, whose Googlebot is verified by `list` (a URL) and by the ranges
/// file `ranges/extra.json`, and by reverse DNS under `googlebot.com` through `dns`.
fn setup(list: &ListServer, dns: &DnsServer, origin_extra: &str, refresh: &str) -> (Origin, Proxy) {
    let origin = Origin::start();
    let config = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]
verify:
  refresh: {refresh}
  dns: {{servers: [\"{dns}\"], timeout: {DNS_TIMEOUT_SECS}s, positive_ttl: 1h, negative_ttl: 1h}}
crawlers:
  extra:
    - name: Googlebot
      tokens: [googlebot]
      pattern: Googlebot
      category: search
      verify:
        ips: [\"{list}\", \"file:ranges/extra.json\"]
        rdns: [googlebot.com, google.com]
origins:
  - name: shop
    hosts: [\"{HOST}\"]
    upstream: \"{upstream}\"
    robots: {{source: inline, text: \"User-agent: *\\nDisallow: /private\\n\"}}
{origin_extra}",
        dns = dns.addr,
        list = list.url(),
        upstream = origin.addr(),
    );
    let extra = r#"["198.51.100.200"]"#;
    let proxy = Proxy::builder(&config)
        .files(&[("ranges/extra.json", extra)])
        .start();
    // The lists load in the background: wait for both.
    let loaded = (0..200).any(|_| {
        let metrics = proxy.metrics();
        let ok = |list: &str| {
            metric(
                &metrics,
                "robotsguard_verify_list_fetches_total",
                &[("list", list), ("outcome", "ok")],
            ) >= 1.0
        };
        if ok(&list.url()) && metrics.contains("ranges/extra.json") {
            return true;
        }
        thread::sleep(Duration::from_millis(50));
        false
    });
    assert!(loaded, "the range lists did not load:\n{}", proxy.stderr());
    (origin, proxy)
}

fn from(proxy: &Proxy, client: &str, path: &str, user_agent: &str) -> support::Response {
    proxy.send(
        &Request::get(path)
            .host(HOST)
            .ua(user_agent)
            .header("X-Forwarded-For", client),
    )
}

fn verifications(proxy: &Proxy, result: &str) -> f64 {
    metric(
        &proxy.metrics(),
        "robotsguard_crawler_verifications_total",
        &[("crawler", "Googlebot"), ("result", result)],
    )
}

#[test]
fn googlebot_is_verified_by_its_ranges_and_by_reverse_dns() {
    let list = ListServer::start(GOOGLE_LIST);
    let dns = DnsServer::start();
    dns.ptr("203.0.113.10", &["crawl-203-0-113-10.googlebot.com"])
        .addresses("crawl-203-0-113-10.googlebot.com", &["203.0.113.10"])
        .ptr("2001:db8:99::10", &["crawl-v6.google.com"])
        .addresses("crawl-v6.google.com", &["2001:db8:99::10"]);
    let (origin, proxy) = setup(&list, &dns, "", "24h");
    // In the URL list (IPv4 and IPv6), in the file list, and by reverse DNS (v4 and v6).
    for client in [
        "192.0.2.5",
        "2001:db8:4860::1",
        "198.51.100.200",
        "203.0.113.10",
        "2001:db8:99::10",
    ] {
        let answer = from(&proxy, client, "/public", GOOGLEBOT);
        assert_eq!(answer.status, 200, "{client}: {}", answer.text());
    }
    assert_eq!(origin.proxied_to("/public").len(), 5);
    // robots.txt still decides for a verified crawler.
    assert_eq!(
        from(&proxy, "192.0.2.5", "/private/x", GOOGLEBOT).status,
        403
    );
    let (status, explain) = proxy.explain_from(HOST, GOOGLEBOT, "/public", "203.0.113.10");
    assert_eq!(status, 200);
    assert_eq!(explain["verification"]["result"], "verified", "{explain}");
    let how = explain["verification"]["how"].as_str().unwrap_or("");
    assert!(
        how.contains("crawl-203-0-113-10.googlebot.com"),
        "{explain}"
    );
    let (_, explain) = proxy.explain_from(HOST, GOOGLEBOT, "/public", "192.0.2.5");
    assert!(
        explain["verification"]["how"]
            .as_str()
            .unwrap_or("")
            .contains(&list.url()),
        "{explain}"
    );
    assert!(verifications(&proxy, "verified") >= 5.0);
    // A range match needs no DNS; the reverse DNS answers are cached (one PTR query each).
    assert_eq!(
        dns.queries("5.2.0.192.in-addr.arpa", hickory_proto::rr::RecordType::PTR),
        0
    );
    for _ in 0..3 {
        assert_eq!(
            from(&proxy, "203.0.113.10", "/public", GOOGLEBOT).status,
            200
        );
    }
    assert_eq!(
        dns.queries(
            "10.113.0.203.in-addr.arpa",
            hickory_proto::rr::RecordType::PTR
        ),
        1
    );
}

#[test]
fn impostors_are_refused_everywhere_but_robots_txt() {
    let list = ListServer::start(GOOGLE_LIST);
    let dns = DnsServer::start();
    dns.ptr("203.0.113.9", &["host-9.evil.example"])
        .addresses("host-9.evil.example", &["203.0.113.9"])
        // A PTR that claims Google's domain but whose forward lookup is elsewhere.
        .ptr("203.0.113.11", &["crawl-2.googlebot.com"])
        .addresses("crawl-2.googlebot.com", &["203.0.113.99"])
        // A look-alike domain.
        .ptr("203.0.113.12", &["crawl.evilgooglebot.com"])
        .addresses("crawl.evilgooglebot.com", &["203.0.113.12"]);
    let (origin, proxy) = setup(&list, &dns, "", "24h");
    for client in ["203.0.113.9", "203.0.113.11", "203.0.113.12"] {
        let answer = from(&proxy, client, "/public", GOOGLEBOT);
        assert_eq!(answer.status, 403, "{client}: {}", answer.text());
        assert!(
            answer
                .text()
                .contains("claims to be Googlebot and could not be verified"),
            "{}",
            answer.text()
        );
        // robots.txt itself stays readable.
        assert_eq!(from(&proxy, client, "/robots.txt", GOOGLEBOT).status, 200);
    }
    assert!(origin.proxied_to("/public").is_empty());
    // A browser from the same address is not affected.
    assert_eq!(from(&proxy, "203.0.113.9", "/public", BROWSER).status, 200);
    let (_, explain) = proxy.explain_from(HOST, GOOGLEBOT, "/public", "203.0.113.11");
    assert_eq!(explain["verification"]["result"], "impostor", "{explain}");
    assert_eq!(explain["decision"], "blocked", "{explain}");
    assert!(verifications(&proxy, "impostor") >= 3.0);
    let blocked = proxy.wait_metric(
        "robotsguard_requests_total",
        &[
            ("origin", "shop"),
            ("crawler", "Googlebot"),
            ("decision", "blocked"),
        ],
        3.0,
    );
    assert!(blocked >= 3.0, "{blocked}");
    // 203.0.113.13 has no PTR at all (NXDOMAIN): that proves nothing (a resolver may answer
    // NXDOMAIN for everything), so the claim stays unverified and is proxied.
    assert_eq!(
        from(&proxy, "203.0.113.13", "/public", GOOGLEBOT).status,
        200
    );
    let (_, explain) = proxy.explain_from(HOST, GOOGLEBOT, "/public", "203.0.113.13");
    assert_eq!(explain["verification"]["result"], "unverified", "{explain}");
    assert!(
        proxy.stderr().contains("verification=\"impostor\""),
        "{}",
        proxy.stderr()
    );
}

#[test]
fn what_cannot_be_checked_is_unverified_and_passes() {
    let list = ListServer::start(GOOGLE_LIST);
    let dns = DnsServer::start();
    let (origin, proxy) = setup(&list, &dns, "", "24h");
    // DNS down: the first request waits at most the timeout, and passes.
    dns.set_mode(Mode::Down);
    let started = Instant::now();
    let answer = from(&proxy, "203.0.113.20", "/public", GOOGLEBOT);
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert!(started.elapsed() < Duration::from_secs(2 * DNS_TIMEOUT_SECS));
    // SERVFAIL: the same.
    dns.set_mode(Mode::ServFail);
    assert_eq!(
        from(&proxy, "203.0.113.21", "/public", GOOGLEBOT).status,
        200
    );
    let (_, explain) = proxy.explain_from(HOST, GOOGLEBOT, "/public", "203.0.113.21");
    assert_eq!(explain["verification"]["result"], "unverified", "{explain}");
    // A private address (a load balancer that is not trusted) is never an impostor.
    dns.set_mode(Mode::Answer);
    assert_eq!(from(&proxy, "10.1.2.3", "/public", GOOGLEBOT).status, 200);
    assert_eq!(
        proxy.get(HOST, "/public", GOOGLEBOT).status,
        200,
        "the proxy's own peer (127.0.0.1)"
    );
    // A crawler its operator publishes nothing for.
    let other = "Mozilla/5.0 (compatible; SomeResearchBot/1.0)";
    assert_eq!(from(&proxy, "203.0.113.22", "/public", other).status, 200);
    assert_eq!(origin.proxied_to("/public").len(), 5);
    assert!(verifications(&proxy, "unverified") >= 2.0);
    assert_eq!(verifications(&proxy, "impostor"), 0.0);
}

#[test]
fn report_and_ignore_modes() {
    let list = ListServer::start(GOOGLE_LIST);
    let dns = DnsServer::start();
    dns.ptr("203.0.113.30", &["host.evil.example"])
        .addresses("host.evil.example", &["203.0.113.30"]);
    let (_origin, proxy) = setup(&list, &dns, "    impostors: report\n", "24h");
    assert_eq!(
        from(&proxy, "203.0.113.30", "/public", GOOGLEBOT).status,
        200
    );
    let would_block = proxy.wait_metric(
        "robotsguard_requests_total",
        &[("crawler", "Googlebot"), ("decision", "would_block")],
        1.0,
    );
    assert_eq!(would_block, 1.0, "{}", proxy.metrics());
    drop(proxy);
    let (_origin, proxy) = setup(&list, &dns, "    impostors: ignore\n", "24h");
    assert_eq!(
        from(&proxy, "203.0.113.30", "/public", GOOGLEBOT).status,
        200
    );
    // Ignored: not even checked.
    assert_eq!(verifications(&proxy, "impostor"), 0.0);
    assert_eq!(
        dns.queries(
            "30.113.0.203.in-addr.arpa",
            hickory_proto::rr::RecordType::PTR
        ),
        1,
        "only the report-mode proxy asked"
    );
}

#[test]
fn range_lists_refresh_conditionally_and_survive_bad_answers() {
    let list = ListServer::start(GOOGLE_LIST);
    let dns = DnsServer::start();
    dns.ptr("192.0.2.7", &["host-7.other.example"])
        .addresses("host-7.other.example", &["192.0.2.7"]);
    let (_origin, proxy) = setup(&list, &dns, "", "2s");
    let fetches = |outcome: &str| {
        metric(
            &proxy.metrics(),
            "robotsguard_verify_list_fetches_total",
            &[("list", &list.url()), ("outcome", outcome)],
        )
    };
    let wait = |what: &str, done: &dyn Fn() -> bool| {
        let happened = (0..60).any(|_| {
            thread::sleep(Duration::from_millis(250));
            done()
        });
        assert!(happened, "{what} did not happen:\n{}", proxy.stderr());
    };
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_verify_list_prefixes",
            &[("list", &list.url())]
        ),
        2.0
    );
    // Refreshes carry the ETag: an unchanged list costs a 304.
    wait("a conditional refresh", &|| fetches("not_modified") >= 1.0);
    assert!(list.not_modified.load(Ordering::Relaxed) >= 1);
    // A malformed answer (a WAF's page, a truncated file) keeps the good copy.
    list.set("<html>Access denied</html>", "\"v2\"");
    wait("a malformed refresh", &|| fetches("malformed") >= 1.0);
    assert_eq!(from(&proxy, "192.0.2.5", "/public", GOOGLEBOT).status, 200);
    let (_, explain) = proxy.explain_from(HOST, GOOGLEBOT, "/public", "192.0.2.6");
    assert_eq!(explain["verification"]["result"], "verified", "{explain}");
    // A new good list replaces it.
    list.set(
        r#"{"prefixes": [{"ipv4Prefix": "192.0.2.128/28"}]}"#,
        "\"v3\"",
    );
    wait("the new list", &|| {
        metric(
            &proxy.metrics(),
            "robotsguard_verify_list_prefixes",
            &[("list", &list.url())],
        ) == 1.0
    });
    let (_, explain) = proxy.explain_from(HOST, GOOGLEBOT, "/public", "192.0.2.130");
    assert_eq!(explain["verification"]["result"], "verified", "{explain}");
    // 192.0.2.7 is in no list now, and its reverse DNS name is someone else's: an impostor.
    assert_eq!(from(&proxy, "192.0.2.7", "/public", GOOGLEBOT).status, 403);
    assert!(list.requests.load(Ordering::Relaxed) >= 4);
}

#[test]
fn allowed_clients_and_exempt_paths_win_over_impostor_checks() {
    let list = ListServer::start(GOOGLE_LIST);
    let dns = DnsServer::start();
    for client in ["203.0.113.40", "203.0.113.41"] {
        dns.ptr(client, &["host.evil.example"]);
    }
    dns.addresses("host.evil.example", &["203.0.113.40", "203.0.113.41"]);
    let policy = "    policy: {allow_clients: [\"203.0.113.40\"], exempt_paths: [/.well-known/]}\n";
    let (origin, proxy) = setup(&list, &dns, policy, "24h");
    // An allowed client is let through whatever it claims, and is not even checked.
    assert_eq!(
        from(&proxy, "203.0.113.40", "/public", GOOGLEBOT).status,
        200
    );
    assert_eq!(
        dns.queries(
            "40.113.0.203.in-addr.arpa",
            hickory_proto::rr::RecordType::PTR
        ),
        0
    );
    // An exempt path is readable by an impostor; anything else is not.
    assert_eq!(
        from(
            &proxy,
            "203.0.113.41",
            "/.well-known/security.txt",
            GOOGLEBOT
        )
        .status,
        200
    );
    assert_eq!(
        from(&proxy, "203.0.113.41", "/public", GOOGLEBOT).status,
        403
    );
    assert_eq!(origin.proxied_to("/.well-known/security.txt").len(), 1);
}

#[test]
fn a_reload_that_adds_a_list_loads_it() {
    let list = ListServer::start(GOOGLE_LIST);
    let dns = DnsServer::start();
    let (_origin, proxy) = setup(&list, &dns, "", "24h");
    std::fs::write(proxy.dir.path().join("ranges/new.json"), "198.51.100.77\n")
        .expect("list written");
    let (_, before) = proxy.explain_from(HOST, GOOGLEBOT, "/public", "198.51.100.77");
    assert_ne!(before["verification"]["result"], "verified", "{before}");
    // The same config with one more list for Googlebot.
    let text = std::fs::read_to_string(proxy.config_path()).expect("config read");
    let text = text.replace(
        "\"file:ranges/extra.json\"]",
        "\"file:ranges/extra.json\", \"file:ranges/new.json\"]",
    );
    proxy.replace_config(&text);
    assert_eq!(
        proxy.wait_reloads("success", 1.0),
        1.0,
        "{}",
        proxy.stderr()
    );
    let verified = (0..100).any(|_| {
        thread::sleep(Duration::from_millis(50));
        let (_, now) = proxy.explain_from(HOST, GOOGLEBOT, "/public", "198.51.100.77");
        now["verification"]["result"] == "verified"
    });
    assert!(verified, "the new list was not loaded:\n{}", proxy.stderr());
}
