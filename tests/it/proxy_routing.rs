//! Routing by Host as a client sees it: unknown, missing, duplicated and absolute-form hosts never
//! reach an origin they do not belong to, CONNECT is never tunnelled, and each configured host
//! reaches its own upstream.

use crate::support;

use support::*;

const SHOP: &str = "shop.example";

fn shop() -> (Origin, Proxy) {
    let origin = Origin::start();
    let robots = inline_robots("User-agent: *\nDisallow: /private\n");
    let proxy = Proxy::start(&site(&origin, SHOP, &robots));
    (origin, proxy)
}

fn assert_refused(response: &Result<Response, String>, what: &str) {
    if let Ok(response) = response {
        assert!(
            (400..500).contains(&response.status),
            "{what}: expected a 4xx refusal, got {} {}",
            response.status,
            response.text()
        );
    }
}

/// A Host as sent is looked up before it is normalised: a spelling with spaces around it must
/// still reach the configured origin and be held to its robots.txt, and a name that merely
/// starts or ends like it must not (the other spellings: `hosts_match_regardless_of_case_port_and_trailing_dot`).
#[test]
fn a_spaced_host_is_routed_and_enforced_and_near_misses_are_not() {
    let (origin, proxy) = shop();
    let spaced = proxy.raw(
        format!("GET /private/a HTTP/1.1\r\nHost:  shop.example \r\nUser-Agent: {GPTBOT}\r\n\r\n")
            .as_bytes(),
    );
    assert_eq!(
        spaced.as_ref().map(|r| r.status).ok(),
        Some(403),
        "spaces around the Host"
    );
    for host in [
        "shop.example.evil",
        "shop.exampl",
        "xshop.example",
        "shop..example",
    ] {
        let response = proxy.get(host, "/public", GPTBOT);
        assert_eq!(response.status, 421, "{host}: {}", response.text());
    }
    assert!(
        origin
            .received()
            .iter()
            .all(|seen| !seen.target.starts_with("/private")),
        "a disallowed path reached the origin"
    );
}

#[test]
fn an_unknown_host_is_misdirected_and_never_proxied() {
    let (origin, proxy) = shop();
    for ua in [BROWSER, GPTBOT] {
        let response = proxy.get("evil.example", "/", ua);
        assert_eq!(response.status, 421, "{}", response.text());
        assert!(
            response.text().contains("does not serve that host"),
            "{}",
            response.text()
        );
        assert_eq!(response.header("cache-control"), Some("no-store"));
    }
    // A configured host's lookalikes are other hosts.
    for host in [
        "shop.example.evil",
        "evilshop.example",
        "sub.shop.example",
        "shop.example@evil.example",
    ] {
        let response = proxy.raw(
            format!("GET / HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {BROWSER}\r\n\r\n").as_bytes(),
        );
        assert_refused(&response, host);
    }
    assert!(
        origin.proxied().is_empty(),
        "reached the origin: {:?}",
        origin.proxied()
    );
}

#[test]
fn a_request_without_host_is_refused() {
    let (origin, proxy) = shop();
    for request in [
        format!("GET / HTTP/1.1\r\nUser-Agent: {BROWSER}\r\n\r\n"),
        format!("GET / HTTP/1.0\r\nUser-Agent: {BROWSER}\r\n\r\n"),
        format!("GET / HTTP/1.1\r\nHost:\r\nUser-Agent: {BROWSER}\r\n\r\n"),
    ] {
        let response = proxy.raw(request.as_bytes());
        assert_refused(&response, &request);
    }
    assert!(origin.proxied().is_empty(), "{:?}", origin.proxied());
}

#[test]
fn duplicate_host_headers_are_refused() {
    let (origin, proxy) = shop();
    for hosts in [
        "Host: shop.example\r\nHost: evil.example",
        "Host: evil.example\r\nHost: shop.example",
        "Host: shop.example\r\nHost: shop.example",
    ] {
        let request = format!("GET / HTTP/1.1\r\n{hosts}\r\nUser-Agent: {BROWSER}\r\n\r\n");
        assert_refused(&proxy.raw(request.as_bytes()), hosts);
    }
    assert!(origin.proxied().is_empty(), "{:?}", origin.proxied());
}

/// Deciding on one User-Agent and forwarding both would let the origin read the other: a crawler
/// could pass as a browser to robotsguard and as itself to the origin.
#[test]
fn two_user_agent_headers_are_refused_whatever_their_order() {
    let (origin, proxy) = shop();
    for agents in [
        format!("User-Agent: {BROWSER}\r\nUser-Agent: {GPTBOT}"),
        format!("User-Agent: {GPTBOT}\r\nUser-Agent: {BROWSER}"),
        format!("User-Agent: {BROWSER}\r\nAccept: */*\r\nuser-agent: {BROWSER}"),
    ] {
        let request = format!("GET /private/a HTTP/1.1\r\nHost: {SHOP}\r\n{agents}\r\n\r\n");
        let response = proxy.raw(request.as_bytes());
        assert_eq!(
            response.as_ref().map(|r| r.status).ok(),
            Some(400),
            "{agents}"
        );
    }
    // One User-Agent, among other headers, is decided as usual.
    let request = format!(
        "GET /page HTTP/1.1\r\nHost: {SHOP}\r\nAccept: */*\r\nUser-Agent: {BROWSER}\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(
        proxy.raw(request.as_bytes()).map(|r| r.status).ok(),
        Some(200)
    );
    assert_eq!(origin.proxied().len(), 1, "{:?}", origin.proxied());
}

/// An absolute-form target names the host itself: the origin is told the host it was routed by
/// and gets the request in origin-form.
#[test]
fn an_absolute_form_request_forwards_the_host_it_was_routed_by() {
    let (origin, proxy) = shop();
    let request = format!(
        "GET http://{SHOP}/page?x=1 HTTP/1.1\r\nHost: {SHOP}\r\nUser-Agent: {BROWSER}\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(
        proxy.raw(request.as_bytes()).map(|r| r.status).ok(),
        Some(200)
    );
    let seen = origin.proxied_to("/page?x=1");
    assert_eq!(seen.len(), 1, "{:?}", origin.proxied());
    assert_eq!(seen[0].header("x-forwarded-host"), Some(SHOP));
}

#[test]
fn an_absolute_form_target_cannot_reach_another_host() {
    let (origin, proxy) = shop();
    // The Host header names a configured origin, the target another host.
    let response = proxy.raw(
        format!(
            "GET http://evil.example/ HTTP/1.1\r\nHost: {SHOP}\r\nUser-Agent: {BROWSER}\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_refused(
        &response,
        "absolute-form evil.example with Host: shop.example",
    );
    // Both name the other host.
    let response = proxy
        .raw(
            format!(
                "GET http://evil.example/ HTTP/1.1\r\nHost: evil.example\r\nUser-Agent: {BROWSER}\r\n\r\n"
            )
            .as_bytes(),
        )
        .expect("a response");
    assert_eq!(response.status, 421, "{}", response.text());
    // Only the target names it.
    let response = proxy.raw(
        format!("GET http://evil.example/ HTTP/1.1\r\nUser-Agent: {BROWSER}\r\n\r\n").as_bytes(),
    );
    assert_refused(&response, "absolute-form evil.example without Host");
    assert!(
        origin.proxied().is_empty(),
        "reached the origin: {:?}",
        origin.proxied()
    );
}

#[test]
fn an_absolute_form_target_for_the_configured_host_is_decided_on_its_path() {
    let (origin, proxy) = shop();
    let request = |path: &str, ua: &str| {
        format!("GET http://{SHOP}{path} HTTP/1.1\r\nHost: {SHOP}\r\nUser-Agent: {ua}\r\n\r\n")
    };
    let blocked = proxy
        .raw(request("/private/x", GPTBOT).as_bytes())
        .expect("a response");
    assert_eq!(blocked.status, 403, "{}", blocked.text());
    assert!(blocked.text().contains("/private/x"), "{}", blocked.text());
    assert!(origin.proxied().is_empty(), "{:?}", origin.proxied());

    let allowed = proxy
        .raw(request("/public?q=1", GPTBOT).as_bytes())
        .expect("a response");
    assert_eq!(allowed.status, 200, "{}", allowed.text());
    let seen = origin.proxied();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].header("host"), Some(SHOP));
}

/// `Guard::upstream_request_filter` (src/guard/mod.rs) forwards absolute-form targets "in origin-form with the matching Host", so the
/// origin never has to parse a URL it did not expect.
#[test]
fn an_absolute_form_target_is_forwarded_in_origin_form() {
    let (origin, proxy) = shop();
    let response = proxy
        .raw(
            format!(
                "GET http://{SHOP}/public?q=1 HTTP/1.1\r\nHost: {SHOP}\r\nUser-Agent: {BROWSER}\r\n\r\n"
            )
            .as_bytes(),
        )
        .expect("a response");
    assert_eq!(response.status, 200, "{}", response.text());
    let seen = origin.proxied();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        seen[0].target, "/public?q=1",
        "the origin received the absolute-form target"
    );
}

#[test]
fn connect_is_refused_and_never_tunnelled() {
    let (origin, proxy) = shop();
    let upstream = origin.addr();
    for request in [
        "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n".to_string(),
        format!("CONNECT {SHOP}:443 HTTP/1.1\r\nHost: {SHOP}\r\n\r\n"),
        format!("CONNECT {upstream} HTTP/1.1\r\nHost: {upstream}\r\n\r\n"),
    ] {
        let response = proxy.raw(request.as_bytes());
        // Refused by closing the connection without an answer is fine too.
        if let Ok(response) = &response {
            assert_eq!(response.status, 405, "{request}: {}", response.text());
            let allow = response.header("allow").unwrap_or("");
            assert!(!allow.contains("CONNECT"), "{:?}", response.headers);
        }
    }
    assert!(
        origin.received().iter().all(|r| r.method != "CONNECT"),
        "{:?}",
        origin.received()
    );
    assert!(origin.proxied().is_empty(), "{:?}", origin.proxied());
}

#[test]
fn hosts_match_regardless_of_case_port_and_trailing_dot() {
    let (origin, proxy) = shop();
    for host in [
        "SHOP.example",
        "shop.example:8080",
        "shop.example.",
        "Shop.Example.:80",
    ] {
        let response = proxy.get(host, "/page", BROWSER);
        assert_eq!(response.status, 200, "{host}: {}", response.text());
        let blocked = proxy.get(host, "/private", GPTBOT);
        assert_eq!(blocked.status, 403, "{host}: {}", blocked.text());
        // The robots.txt URL in the block body keeps the Host as the client wrote it.
        let url = format!("http://{host}/robots.txt");
        assert!(blocked.text().contains(&url), "{host}: {}", blocked.text());
    }
    let hosts: Vec<String> = origin
        .proxied()
        .iter()
        .map(|r| r.header("host").unwrap_or("").to_string())
        .collect();
    assert_eq!(
        hosts,
        [
            "SHOP.example",
            "shop.example:8080",
            "shop.example.",
            "Shop.Example.:80"
        ]
    );
}

#[test]
fn an_ipv6_host_matches_in_any_spelling_of_its_address() {
    // Configured as `[::1]`; clients may write the same address another way, with a port.
    let origin = Origin::start();
    let robots = inline_robots("User-agent: *\nDisallow: /private\n");
    let proxy = Proxy::start(&site(&origin, "[::1]", &robots));
    let port = proxy.addr.port();
    for host in [
        format!("[0:0::1]:{port}"),
        format!("[0:0:0:0:0:0:0:1]:{port}"),
        "[::1]".to_string(),
    ] {
        let response = proxy.get(&host, "/page", BROWSER);
        assert_eq!(response.status, 200, "{host}: {}", response.text());
        let blocked = proxy.get(&host, "/private", GPTBOT);
        assert_eq!(blocked.status, 403, "{host}: {}", blocked.text());
    }
    assert_eq!(origin.proxied_to("/page").len(), 3);
}

#[test]
fn each_host_reaches_its_own_origin_and_robots_txt() {
    let shop_origin = Origin::start();
    let blog_origin = Origin::start();
    let body = format!(
        "origins:
  - name: shop
    hosts: [shop.example, www.shop.example]
    upstream: \"{}\"
    robots: {{source: inline, text: \"User-agent: GPTBot\\nDisallow: /\\n\"}}
  - name: blog
    hosts: [blog.example]
    upstream: \"{}\"
    robots: {{source: inline, text: \"User-agent: GPTBot\\nDisallow: /drafts\\n\"}}
",
        shop_origin.addr(),
        blog_origin.addr()
    );
    let proxy = Proxy::start(&body);

    assert_eq!(proxy.get("shop.example", "/a", BROWSER).status, 200);
    assert_eq!(proxy.get("www.shop.example", "/b", BROWSER).status, 200);
    assert_eq!(proxy.get("blog.example", "/c", BROWSER).status, 200);
    assert_eq!(proxy.get("shop.example", "/post", GPTBOT).status, 403);
    assert_eq!(proxy.get("blog.example", "/post", GPTBOT).status, 200);
    assert_eq!(proxy.get("blog.example", "/drafts/1", GPTBOT).status, 403);

    let targets = |origin: &Origin| -> Vec<String> {
        origin.proxied().into_iter().map(|r| r.target).collect()
    };
    assert_eq!(targets(&shop_origin), ["/a", "/b"]);
    assert_eq!(targets(&blog_origin), ["/c", "/post"]);
}

#[test]
fn an_unreachable_upstream_is_a_502_and_counted() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = dead.local_addr().expect("address");
    drop(dead);
    let body = format!(
        "origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"{address}\"\n{}",
        inline_robots("User-agent: *\nDisallow: /private\n")
    );
    let proxy = Proxy::start(&body);
    let response = proxy.get(SHOP, "/", BROWSER);
    assert_eq!(response.status, 502, "{}", response.text());
    // A blocked crawler is still answered by robotsguard itself.
    assert_eq!(proxy.get(SHOP, "/private", GPTBOT).status, 403);
    let errors = proxy.wait_metric(
        "robotsguard_upstream_errors_total",
        &[("origin", "shop"), ("kind", "connect_refused")],
        1.0,
    );
    assert_eq!(errors, 1.0, "{}", proxy.metrics());
}
