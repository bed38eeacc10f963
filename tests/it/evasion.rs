//! A non-compliant crawler trying to make the proxy and the origin disagree, against real origins:
//! stock nginx (which decodes `%2F` and then resolves dot segments), an app that reads targets
//! the way Node's `new URL(req.url, base)` does (`//x/...` is a host), and the harness origin
//! (which records the exact target it was sent). Whatever the encoding, the secret never comes
//! back to the crawler; what is allowed still works.

use crate::support;

use support::nginx::Nginx;
use support::whatwg::WhatwgOrigin;
use support::{Origin, Proxy, Request, BROWSER, GPTBOT};

const HOST: &str = "shop.example";
const SECRET: &[u8] = b"THE SECRET";
const ROBOTS: &str = "User-agent: GPTBot\nDisallow: /private\nAllow: /private/press/\n";

const FILES: &[(&str, &[u8])] = &[
    ("private/secret.html", SECRET),
    ("private/press/release.html", b"press release"),
    ("public/index.html", b"public page"),
];

/// Spellings of `/private/secret.html` that some origin reads as that file.
const EVASIONS: &[&str] = &[
    "/private/secret.html",
    "/%2Fprivate/secret.html",
    "/%2fprivate/secret.html",
    "/public/..%2Fprivate/secret.html",
    "/public/..%2fprivate/secret.html",
    "/public%2F..%2Fprivate/secret.html",
    "/public%2f..%2fprivate/secret.html",
    "/public/%2e%2e/private/secret.html",
    "/public/%2E%2E/private/secret.html",
    "/public/.%2e/private/secret.html",
    "/public/%2E./private/secret.html",
    "/public/%2e%2e%2fprivate/secret.html",
    "/public/%2E%2E%2Fprivate/secret.html",
    "/private%2Fsecret.html",
    "/private%2fsecret.html",
    "//private/secret.html",
    "///private//secret.html",
    "/./private/./secret.html",
    "/%70rivate/secret.html",
    "/%70%72%69%76%61%74%65/secret.html",
    "/private/press/..%2Fsecret.html",
    "/private/press/..%2fsecret.html",
    "/private/press/%2e%2e/secret.html",
    "/private/press/%2e%2e%2Fsecret.html",
    "/private/press/../secret.html",
    "/public/..%5Cprivate/secret.html",
    "/public\\..\\private/secret.html",
    "/private/secret.html?x=1",
    "/private/secret.html#frag",
    "/public/..%2F..%2F..%2Fprivate/secret.html",
];

/// Authority-looking first segments that a WHATWG parser reads as a host.
const AUTHORITY_EVASIONS: &[&str] = &[
    "//x/private/secret.html",
    "/\\x/private/secret.html",
    "///x/private/secret.html",
    "\\\\x/private/secret.html",
    "//x/private/press/../secret.html",
    "//x/public/..%2Fprivate/secret.html",
];

fn config(upstream: std::net::SocketAddr, paths: &str) -> String {
    format!(
        "origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: \"{upstream}\"\n{paths}    robots:\n      source: inline\n      text: {}\n",
        serde_json::to_string(ROBOTS).expect("a string serialises")
    )
}

fn fetch(proxy: &Proxy, target: &str, user_agent: &str) -> (u16, Vec<u8>) {
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: {user_agent}\r\nConnection: close\r\n\r\n"
    );
    match proxy.raw(request.as_bytes()) {
        Ok(response) => (response.status, response.body),
        Err(_) => (0, Vec::new()),
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn assert_never_secret(proxy: &Proxy, targets: &[&str]) {
    let leaked: Vec<String> = targets
        .iter()
        .filter_map(|target| {
            let (status, body) = fetch(proxy, target, GPTBOT);
            contains(&body, SECRET).then(|| format!("{target} -> {status}"))
        })
        .collect();
    assert!(leaked.is_empty(), "the secret reached GPTBot: {leaked:#?}");
}

#[test]
fn nginx_origin_canonical_forwarding_never_leaks() {
    let nginx = Nginx::start(FILES);
    let proxy = Proxy::start(&config(nginx.addr(), ""));
    // nginx itself serves the secret for these spellings (tests/origins_selftest.rs); through
    // the proxy, GPTBot gets it for none of them.
    assert_never_secret(&proxy, EVASIONS);
    assert_never_secret(&proxy, AUTHORITY_EVASIONS);
    // Each was refused by robotsguard itself, not by nginx.
    for target in EVASIONS.iter().take(25) {
        assert_eq!(fetch(&proxy, target, GPTBOT).0, 403, "{target}");
    }
    // What is allowed still works, and nginx is sent the canonical path decided on.
    assert_eq!(
        fetch(&proxy, "/private/press/release.html", GPTBOT),
        (200, b"press release".to_vec())
    );
    assert_eq!(fetch(&proxy, "/public/./index.html", GPTBOT).0, 200);
    assert_eq!(nginx.access_for("/public/index.html").status, 200);
    assert_eq!(fetch(&proxy, "/%70ublic//index.html", GPTBOT).0, 200);
    // Browsers are not crawlers: they reach every file, through the same canonical path.
    assert_eq!(
        fetch(&proxy, "/public/..%2Fprivate/secret.html", BROWSER),
        (200, SECRET.to_vec())
    );
    assert_eq!(nginx.access_for("/private/secret.html").status, 200);
}

#[test]
fn nginx_origin_original_forwarding_never_leaks() {
    let nginx = Nginx::start(FILES);
    let paths = "    paths: {escaped_slashes: decode, forward: original}\n";
    let proxy = Proxy::start(&config(nginx.addr(), paths));
    assert_never_secret(&proxy, EVASIONS);
    assert_never_secret(&proxy, AUTHORITY_EVASIONS);
    assert_eq!(
        fetch(&proxy, "/private/press/release.html", GPTBOT),
        (200, b"press release".to_vec())
    );
    // The client's bytes go to the origin unchanged.
    assert_eq!(fetch(&proxy, "/public/./index.html", GPTBOT).0, 200);
    assert_eq!(nginx.access_for("/public/./index.html").status, 200);
}

#[test]
fn node_style_origin_never_leaks_either_way() {
    for paths in ["", "    paths: {forward: original}\n"] {
        let app = WhatwgOrigin::start(FILES);
        let proxy = Proxy::start(&config(app.addr(), paths));
        assert_never_secret(&proxy, AUTHORITY_EVASIONS);
        assert_never_secret(&proxy, EVASIONS);
        assert_eq!(
            fetch(&proxy, "/private/press/release.html", GPTBOT).0,
            200,
            "{paths}"
        );
        if paths.is_empty() {
            // Canonical forwarding never sends a target an app could read as a host.
            assert!(app
                .received()
                .iter()
                .all(|(raw, _)| raw.starts_with('/') && !raw.starts_with("//")));
        }
    }
}

#[test]
fn escaped_slashes_reject_and_keep() {
    let origin = Origin::start();
    let reject = Proxy::start(&format!(
        "{}    paths: {{escaped_slashes: reject}}\n",
        support::site(&origin, HOST, "")
    ));
    assert_eq!(reject.get(HOST, "/a%2Fb", BROWSER).status, 400);
    assert_eq!(reject.get(HOST, "/a%5cb", GPTBOT).status, 400);
    assert_eq!(reject.get(HOST, "/a/b?next=%2F", BROWSER).status, 200);
    assert!(origin.proxied_to("/a%2Fb").is_empty());

    let origin = Origin::start();
    let keep = Proxy::start(&format!(
        "{}    paths: {{escaped_slashes: keep}}\n",
        support::site(&origin, HOST, "")
    ));
    assert_eq!(keep.get(HOST, "/a%2fb", BROWSER).status, 200);
    assert_eq!(origin.proxied_to("/a%2Fb").len(), 1, "kept as data");

    let origin = Origin::start();
    let decode = Proxy::start(&support::site(&origin, HOST, ""));
    assert_eq!(decode.get(HOST, "/a%2fb", BROWSER).status, 200);
    assert_eq!(origin.proxied_to("/a/b").len(), 1, "decoded by default");
}

#[test]
fn request_targets_other_than_origin_absolute_and_options_asterisk_are_refused() {
    let origin = Origin::start();
    let proxy = Proxy::start(&support::site(
        &origin,
        HOST,
        &support::inline_robots("User-agent: GPTBot\nDisallow: /\n"),
    ));
    for target in [
        "private",
        "./private",
        "shop.example/private",
        "?x",
        "*",
        "ftp://shop.example/private",
    ] {
        let status = proxy
            .send(&Request::get(target).host(HOST).ua(BROWSER))
            .status;
        assert_eq!(status, 400, "GET {target}");
    }
    let long_query = format!(
        "GET ?{} HTTP/1.1\r\nHost: {HOST}\r\n\r\n",
        "q".repeat(60_000)
    );
    let status = proxy.raw(long_query.as_bytes()).map(|r| r.status);
    assert!(matches!(status, Ok(400) | Ok(431)), "{status:?}");
    let doubled = proxy
        .raw(format!("GET  /private HTTP/1.1\r\nHost: {HOST}\r\n\r\n").as_bytes())
        .map(|r| r.status);
    assert!(matches!(doubled, Ok(400) | Err(_)), "{doubled:?}");
    for method in ["GET", "POST", "DELETE"] {
        let status = proxy
            .send(&Request::new(method, "*").host(HOST).ua(GPTBOT))
            .status;
        assert_eq!(status, 400, "{method} *");
    }
    assert!(origin.proxied().is_empty(), "{:?}", origin.proxied());
    // OPTIONS * is about the server: decided like `/`, forwarded as `*`.
    let options = Request::new("OPTIONS", "*").host(HOST);
    assert_eq!(proxy.send(&options.clone().ua(GPTBOT)).status, 403);
    assert_eq!(proxy.send(&options.ua(BROWSER)).status, 200);
    assert_eq!(origin.proxied_to("*").len(), 1);
    // Absolute-form is decided on its path and forwarded in origin-form.
    let absolute = Request::get("http://shop.example/private/x").host(HOST);
    assert_eq!(proxy.send(&absolute.clone().ua(GPTBOT)).status, 403);
    assert_eq!(proxy.send(&absolute.ua(BROWSER)).status, 200);
    assert_eq!(origin.proxied_to("/private/x").len(), 1);
    assert!(
        !proxy.stderr().contains(&"q".repeat(300)),
        "a client's target was logged whole"
    );
}

#[test]
fn every_crawler_a_user_agent_names_is_decided() {
    let origin = Origin::start();
    let robots = "User-agent: Googlebot\nAllow: /\n\nUser-agent: GPTBot\nDisallow: /\n\n\
                  User-agent: *\nDisallow: /private\n\nUser-agent: AdsBot-Google\nAllow: /\n";
    let proxy = Proxy::start(&support::site(
        &origin,
        HOST,
        &support::inline_robots(robots),
    ));
    let both =
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html) GPTBot/1.2";
    assert_eq!(proxy.get(HOST, "/page", both).status, 403);
    assert_eq!(
        proxy
            .get(HOST, "/page", "Mozilla/5.0 (compatible; Googlebot/2.1)")
            .status,
        200
    );
    // A crawler's own group applies to it, whatever `*` says.
    assert_eq!(
        proxy
            .get(
                HOST,
                "/private/x",
                "AdsBot-Google (+http://www.google.com/adsbot.html)"
            )
            .status,
        200
    );
    // AdsBot ignores `*` only when it is the one crawler named.
    let robots_without_adsbot = "User-agent: *\nDisallow: /private\n";
    let origin = Origin::start();
    let proxy = Proxy::start(&support::site(
        &origin,
        HOST,
        &support::inline_robots(robots_without_adsbot),
    ));
    let adsbot = "AdsBot-Google (+http://www.google.com/adsbot.html)";
    assert_eq!(proxy.get(HOST, "/private/x", adsbot).status, 200);
    for scraper in [
        "python-requests/2.31 AdsBot-Google",
        "EvilScraper/1.0 AdsBot-Google",
        "Mozilla/5.0 (compatible; GPTBot/1.2) AdsBot-Google",
    ] {
        assert_eq!(
            proxy.get(HOST, "/private/x", scraper).status,
            403,
            "{scraper}"
        );
    }
    // Two User-Agent headers: deciding on one while the origin reads the other is refused.
    let twice = Request::get("/public")
        .host(HOST)
        .ua(BROWSER)
        .header("User-Agent", "GPTBot/1.2");
    assert_eq!(proxy.send(&twice).status, 400);
    assert!(origin.proxied_to("/public").is_empty());
}

#[test]
fn client_forwarding_and_rerouting_headers_never_reach_the_origin() {
    let origin = Origin::start();
    let proxy = Proxy::start(&support::site(&origin, HOST, ""));
    let mut request = Request::get("/page").host(HOST).ua(BROWSER);
    for (name, value) in [
        ("X-Real-IP", "203.0.113.1"),
        ("Forwarded", "for=203.0.113.1"),
        ("True-Client-IP", "203.0.113.1"),
        ("X-Client-IP", "203.0.113.1"),
        ("CF-Connecting-IP", "203.0.113.1"),
        ("X-Original-URL", "/private/secret.html"),
        ("X-Rewrite-URL", "/private/secret.html"),
        ("X-Kept", "yes"),
    ] {
        request = request.header(name, value);
    }
    assert_eq!(proxy.send(&request).status, 200);
    let received = origin.proxied_to("/page");
    let headers = &received[0];
    for name in [
        "x-real-ip",
        "forwarded",
        "true-client-ip",
        "x-client-ip",
        "cf-connecting-ip",
        "x-original-url",
        "x-rewrite-url",
    ] {
        assert_eq!(headers.header(name), None, "{name}");
    }
    assert_eq!(headers.header("x-kept"), Some("yes"));
    assert_eq!(headers.header("x-forwarded-for"), Some("127.0.0.1"));
}

/// An origin that closes each kept-alive connection on its second request, unanswered (as one
/// whose keep-alive timeout fires just then would), and answers everything else with the target
/// it was sent. Returns its address and the targets it received, in order.
fn origin_dropping_second_requests() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds 127.0.0.1:0");
    let addr = listener.local_addr().expect("has an address");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(64) {
            let Ok(mut stream) = stream else { continue };
            let record = record.clone();
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(10)));
                let mut buf = Vec::new();
                for request in 1..=16 {
                    let end = loop {
                        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break end + 4;
                        }
                        let mut chunk = [0u8; 4096];
                        match stream.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                    buf.drain(..end);
                    let target = head.split(' ').nth(1).unwrap_or("").to_string();
                    record.lock().expect("not poisoned").push(target.clone());
                    if request == 2 {
                        return;
                    }
                    let body = format!("origin: {target}");
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, seen)
}

/// pingora retries a request whose reused upstream connection closed before answering (an
/// origin's keep-alive timeout racing the request) and calls `upstream_peer` and
/// `upstream_request_filter` again. The retry may go to the same upstream, even the only one (it
/// was reachable: this is not a connect failure), and must carry the target that was decided, not
/// the client's spelling of it.
#[test]
fn a_retried_request_still_carries_the_decided_target() {
    let (addr, seen) = origin_dropping_second_requests();
    let config = format!(
        "origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: \"{addr}\"\n{}",
        support::inline_robots(ROBOTS)
    );
    let proxy = Proxy::start(&config);
    // The first request leaves a kept-alive upstream connection for the second to reuse.
    let first = proxy.get(HOST, "/first", BROWSER);
    assert_eq!(first.text(), "origin: /first");
    let second = proxy.get(HOST, "/public/./index.html", GPTBOT);
    assert_eq!(second.status, 200, "{}", second.text());
    assert_eq!(second.text(), "origin: /public/index.html");
    let seen = seen.lock().expect("not poisoned").clone();
    assert_eq!(
        seen,
        ["/first", "/public/index.html", "/public/index.html"],
        "the dropped attempt and its retry"
    );
}
