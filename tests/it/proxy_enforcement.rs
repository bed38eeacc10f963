//! The proxy as a client sees it: which requests reach the origin and which are answered with the
//! block response, per robots.txt group, crawler identity, method and path spelling. Each test
//! starts its own origin and the real `robotsguard serve` binary on free ports.

use crate::support;

use support::*;

const SHOP: &str = "shop.example";

/// An origin and a proxy in front of it serving `shop.example` with this inline robots.txt and
/// any extra origin keys.
fn shop(robots: &str, extra: &str) -> (Origin, Proxy) {
    let origin = Origin::start();
    let body = site(&origin, SHOP, &format!("{}{extra}", inline_robots(robots)));
    let proxy = Proxy::start(&body);
    (origin, proxy)
}

fn assert_blocked(response: &Response, what: &str) {
    assert_eq!(response.status, 403, "{what}: {}", response.text());
}

fn assert_passed(response: &Response, path: &str, what: &str) {
    assert_eq!(response.status, 200, "{what}: {}", response.text());
    assert_eq!(response.text(), format!("origin: {path}"), "{what}");
}

#[test]
fn a_browser_passes_and_the_origin_sees_forwarding_headers() {
    let (origin, proxy) = shop("User-agent: *\nDisallow: /\n", "");
    let response = proxy.get(SHOP, "/products?id=7", BROWSER);
    assert_passed(&response, "/products?id=7", "browser under Disallow: /");
    assert_eq!(response.header("x-origin"), Some("yes"));

    let seen = origin.proxied_to("/products?id=7");
    assert_eq!(seen.len(), 1, "{:?}", origin.received());
    let request = &seen[0];
    assert_eq!(request.method, "GET");
    assert_eq!(request.header("host"), Some(SHOP));
    assert_eq!(request.header("user-agent"), Some(BROWSER));
    assert_eq!(request.header("x-forwarded-for"), Some("127.0.0.1"));
    assert_eq!(request.header("x-forwarded-proto"), Some("http"));
    assert_eq!(request.header("x-forwarded-host"), Some(SHOP));
}

#[test]
fn forwarding_headers_from_an_untrusted_client_are_replaced() {
    let (origin, proxy) = shop("User-agent: *\nAllow: /\n", "");
    let request = Request::get("/")
        .host(SHOP)
        .ua(BROWSER)
        .header("X-Forwarded-For", "203.0.113.9")
        .header("X-Forwarded-Proto", "https")
        .header("X-Forwarded-Host", "evil.example");
    assert_passed(&proxy.send(&request), "/", "browser");
    let seen = origin.proxied_to("/");
    assert_eq!(seen.len(), 1);
    let headers = |name: &str| -> Vec<&str> {
        seen[0]
            .headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    // The client is not a trusted proxy: what it claims is not passed on.
    assert_eq!(headers("x-forwarded-for"), ["127.0.0.1"]);
    assert_eq!(headers("x-forwarded-proto"), ["http"]);
    assert_eq!(headers("x-forwarded-host"), [SHOP]);
}

#[test]
fn a_crawler_named_in_robots_txt_is_blocked_where_its_group_disallows() {
    let robots = "User-agent: *\nDisallow: /cart\n\nUser-agent: GPTBot\nAllow: /private/ok\nDisallow: /private\n";
    let (origin, proxy) = shop(robots, "");

    let blocked = proxy.get(SHOP, "/private/report.pdf", GPTBOT);
    assert_blocked(&blocked, "GPTBot on /private/report.pdf");
    assert_eq!(
        blocked.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(blocked.header("cache-control"), Some("no-store"));
    let body = blocked.text();
    for part in [
        "GPTBot",
        "/private/report.pdf",
        "line 6",
        "Disallow: /private",
        "http://shop.example/robots.txt",
    ] {
        assert!(body.contains(part), "block body lacks {part:?}: {body}");
    }
    assert!(
        origin.proxied().is_empty(),
        "a blocked request reached the origin: {:?}",
        origin.proxied()
    );

    // The longer `Allow: /private/ok` wins over `Disallow: /private`.
    assert_passed(
        &proxy.get(SHOP, "/private/ok", GPTBOT),
        "/private/ok",
        "GPTBot on an allowed path",
    );
    // Paths outside the group's rules are allowed, even ones `*` disallows.
    assert_passed(
        &proxy.get(SHOP, "/cart", GPTBOT),
        "/cart",
        "GPTBot on /cart",
    );
    assert_passed(
        &proxy.get(SHOP, "/public", GPTBOT),
        "/public",
        "GPTBot on /public",
    );
}

#[test]
fn the_block_response_follows_the_configured_status_and_template() {
    let extra = "    block:\n      status: 451\n      body: \"{crawler} | {path} | {line} | {rule} | {robots_url} | {origin}\\n\"\n";
    let (origin, proxy) = shop("User-agent: GPTBot\nDisallow: /news\n", extra);
    let blocked = proxy.get(SHOP, "/news/today?page=2", GPTBOT);
    assert_eq!(blocked.status, 451, "{}", blocked.text());
    assert_eq!(
        blocked.text(),
        "GPTBot | /news/today?page=2 | 2 | Disallow: /news | http://shop.example/robots.txt | shop\n"
    );
    assert!(origin.proxied().is_empty());
}

#[test]
fn a_catalogue_crawler_without_a_group_of_its_own_obeys_the_star_group() {
    let robots = "User-agent: *\nDisallow: /private\n\nUser-agent: GPTBot\nDisallow: /\n";
    let (origin, proxy) = shop(robots, "");
    let claude = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)";
    let blocked = proxy.get(SHOP, "/private/a", claude);
    assert_blocked(&blocked, "ClaudeBot under *");
    assert!(blocked.text().contains("ClaudeBot"), "{}", blocked.text());
    assert!(blocked.text().contains("line 2"), "{}", blocked.text());
    // GPTBot's `Disallow: /` does not apply to ClaudeBot.
    assert_passed(
        &proxy.get(SHOP, "/open", claude),
        "/open",
        "ClaudeBot on /open",
    );
    assert_eq!(origin.proxied().len(), 1);
}

#[test]
fn googlebot_image_falls_back_to_the_googlebot_group() {
    let robots = "User-agent: *\nDisallow: /\n\nUser-agent: Googlebot\nDisallow: /nogoogle\n";
    let (_origin, proxy) = shop(robots, "");
    let blocked = proxy.get(SHOP, "/nogoogle/x.png", GOOGLEBOT_IMAGE);
    assert_blocked(&blocked, "Googlebot-Image under the googlebot group");
    assert!(
        blocked.text().contains("Googlebot-Image"),
        "{}",
        blocked.text()
    );
    assert!(blocked.text().contains("line 5"), "{}", blocked.text());
    // The googlebot group applies, not `*` (which disallows everything).
    assert_passed(
        &proxy.get(SHOP, "/images/x.png", GOOGLEBOT_IMAGE),
        "/images/x.png",
        "Googlebot-Image outside the googlebot rules",
    );
}

#[test]
fn googlebot_image_obeys_its_own_group_when_there_is_one() {
    let robots = "User-agent: Googlebot\nDisallow: /nogoogle\n\nUser-agent: Googlebot-Image\nDisallow: /photos\n";
    let (_origin, proxy) = shop(robots, "");
    let blocked = proxy.get(SHOP, "/photos/1.jpg", GOOGLEBOT_IMAGE);
    assert_blocked(&blocked, "Googlebot-Image under its own group");
    assert!(blocked.text().contains("line 5"), "{}", blocked.text());
    // Its own group replaces Googlebot's.
    assert_passed(
        &proxy.get(SHOP, "/nogoogle/1.jpg", GOOGLEBOT_IMAGE),
        "/nogoogle/1.jpg",
        "Googlebot-Image on a path only Googlebot's group disallows",
    );
    // Googlebot itself still obeys its group.
    assert_blocked(&proxy.get(SHOP, "/nogoogle/1", GOOGLEBOT), "Googlebot");
    assert_passed(
        &proxy.get(SHOP, "/photos/1.jpg", GOOGLEBOT),
        "/photos/1.jpg",
        "Googlebot on /photos",
    );
}

#[test]
fn adsbot_ignores_the_star_group() {
    let (origin, proxy) = shop("User-agent: *\nDisallow: /\n", "");
    assert_passed(&proxy.get(SHOP, "/landing", ADSBOT), "/landing", "AdsBot");
    // An ordinary crawler is blocked by the same file.
    assert_blocked(&proxy.get(SHOP, "/landing", GOOGLEBOT), "Googlebot");
    assert_eq!(origin.proxied().len(), 1);
}

#[test]
fn adsbot_obeys_a_group_naming_it() {
    let (origin, proxy) = shop("User-agent: AdsBot-Google\nDisallow: /\n", "");
    let blocked = proxy.get(SHOP, "/landing", ADSBOT);
    assert_blocked(&blocked, "AdsBot under its own group");
    assert!(
        blocked.text().contains("AdsBot-Google"),
        "{}",
        blocked.text()
    );
    assert!(origin.proxied().is_empty());
}

#[test]
fn a_bot_named_only_in_robots_txt_is_enforced() {
    let robots = "User-agent: ZorgBot\nDisallow: /z\n";
    let (origin, proxy) = shop(robots, "");
    let blocked = proxy.get(SHOP, "/z/1", ZORGBOT);
    assert_blocked(&blocked, "ZorgBot on /z/1");
    // Named by its robots.txt token (robots.txt names are case-insensitive).
    assert!(
        blocked
            .text()
            .to_ascii_lowercase()
            .contains("zorgbot may not fetch /z/1"),
        "{}",
        blocked.text()
    );
    assert!(blocked.text().contains("line 2"), "{}", blocked.text());
    assert_passed(&proxy.get(SHOP, "/a", ZORGBOT), "/a", "ZorgBot on /a");
    assert_eq!(origin.proxied().len(), 1);
}

#[test]
fn a_generic_bot_obeys_the_star_group() {
    let robots = "User-agent: *\nDisallow: /private\n\nUser-agent: GPTBot\nDisallow: /\n";
    let (origin, proxy) = shop(robots, "");
    let blocked = proxy.get(SHOP, "/private", GENERIC_BOT);
    assert_blocked(&blocked, "generic bot on /private");
    assert!(blocked.text().contains("line 2"), "{}", blocked.text());
    assert_passed(
        &proxy.get(SHOP, "/public", GENERIC_BOT),
        "/public",
        "generic bot on /public",
    );
    // A browser is never a crawler, whatever the rules.
    assert_passed(
        &proxy.get(SHOP, "/private", BROWSER),
        "/private",
        "browser on /private",
    );
    assert_eq!(origin.proxied().len(), 2);
}

#[test]
fn a_request_without_a_user_agent_obeys_the_star_group() {
    let (origin, proxy) = shop("User-agent: *\nDisallow: /private\n", "");
    for request in [
        format!("GET /private HTTP/1.1\r\nHost: {SHOP}\r\n\r\n"),
        format!("GET /private HTTP/1.1\r\nHost: {SHOP}\r\nUser-Agent: \r\n\r\n"),
    ] {
        let response = proxy.raw(request.as_bytes()).expect("a response");
        assert_blocked(&response, &request);
    }
    let allowed = proxy
        .raw(format!("GET /public HTTP/1.1\r\nHost: {SHOP}\r\n\r\n").as_bytes())
        .expect("a response");
    assert_passed(&allowed, "/public", "no User-Agent on /public");
    assert_eq!(origin.proxied().len(), 1);
}

#[test]
fn robots_txt_itself_passes_for_a_crawler_disallowed_everywhere() {
    let origin = Origin::start();
    let robots = "User-agent: GPTBot\nDisallow: /\n";
    origin.robots(200, robots);
    let proxy = Proxy::start(&site(&origin, SHOP, ""));

    let response = proxy.get(SHOP, "/robots.txt", GPTBOT);
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.text(), robots);
    assert_eq!(origin.proxied_to("/robots.txt").len(), 1);
    // With a query it is another resource (WordPress answers `?rest_route=` with its API):
    // decided like any other path.
    assert_blocked(
        &proxy.get(SHOP, "/robots.txt?rest_route=/wp/v2/posts", GPTBOT),
        "GPTBot on /robots.txt?rest_route=/wp/v2/posts",
    );
    assert!(
        !origin
            .proxied()
            .iter()
            .any(|r| r.target.starts_with("/robots.txt?")),
        "a robots.txt with a query reached the origin"
    );

    assert_blocked(&proxy.get(SHOP, "/", GPTBOT), "GPTBot on /");
    // Dot segments after robots.txt do not make another path look like it.
    assert_blocked(
        &proxy.get(SHOP, "/robots.txt/../secret", GPTBOT),
        "GPTBot on /robots.txt/../secret",
    );
    assert_blocked(
        &proxy.get(SHOP, "/robots.txt.bak", GPTBOT),
        "GPTBot on /robots.txt.bak",
    );
}

#[test]
fn report_mode_passes_a_disallowed_request_but_counts_it() {
    let (origin, proxy) = shop("User-agent: GPTBot\nDisallow: /\n", "    mode: report\n");
    let response = proxy.get(SHOP, "/article", GPTBOT);
    assert_passed(&response, "/article", "GPTBot in report mode");
    assert_eq!(origin.proxied_to("/article").len(), 1);

    let labels = [
        ("origin", "shop"),
        ("crawler", "GPTBot"),
        ("category", "ai-training"),
        ("decision", "would_block"),
    ];
    assert_eq!(
        proxy.wait_metric("robotsguard_requests_total", &labels, 1.0),
        1.0
    );
    let metrics = proxy.metrics();
    assert_eq!(
        metric(
            &metrics,
            "robotsguard_requests_total",
            &[("decision", "blocked")]
        ),
        0.0,
        "{metrics}"
    );
}

#[test]
fn mode_off_passes_every_crawler_request() {
    let (origin, proxy) = shop("User-agent: *\nDisallow: /\n", "    mode: off\n");
    assert_passed(&proxy.get(SHOP, "/x", GPTBOT), "/x", "GPTBot with mode off");
    assert_eq!(origin.proxied().len(), 1);
    let labels = [("crawler", "GPTBot"), ("decision", "pass")];
    assert_eq!(
        proxy.wait_metric("robotsguard_requests_total", &labels, 1.0),
        1.0
    );
}

#[test]
fn spellings_of_a_disallowed_path_are_blocked() {
    let (origin, proxy) = shop("User-agent: *\nDisallow: /private\n", "");
    for target in [
        "/private",
        "/private/",
        "/private?x=1",
        "/%70rivate",
        "/priv%61te",
        "/a/../private",
        "//private",
        "/./private",
        "/%2e%2e/private",
        "/%2E/private",
        "/x/%2e%2e/private/y",
    ] {
        let request =
            format!("GET {target} HTTP/1.1\r\nHost: {SHOP}\r\nUser-Agent: {GPTBOT}\r\n\r\n");
        let response = proxy
            .raw(request.as_bytes())
            .unwrap_or_else(|e| panic!("{target}: {e}"));
        assert_eq!(response.status, 403, "{target}: {}", response.text());
    }
    assert!(
        origin.proxied().is_empty(),
        "reached the origin: {:?}",
        origin.proxied()
    );
}

#[test]
fn path_matching_is_case_sensitive() {
    let (origin, proxy) = shop("User-agent: *\nDisallow: /private\n", "");
    let request = format!("GET /PRIVATE HTTP/1.1\r\nHost: {SHOP}\r\nUser-Agent: {GPTBOT}\r\n\r\n");
    let response = proxy.raw(request.as_bytes()).expect("a response");
    assert_passed(&response, "/PRIVATE", "GPTBot on /PRIVATE");
    assert_eq!(origin.proxied_to("/PRIVATE").len(), 1);
    let response = proxy.get(SHOP, "/Private", GPTBOT);
    assert_passed(&response, "/Private", "GPTBot on /Private");
}

#[test]
fn head_is_decided_like_get_and_the_connection_stays_usable() {
    let (origin, proxy) = shop("User-agent: *\nDisallow: /private\n", "");
    let mut conn = proxy.conn();
    let blocked = conn.send(&Request::new("HEAD", "/private").host(SHOP).ua(GPTBOT));
    assert_eq!(blocked.status, 403);
    assert_eq!(
        blocked.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    // No body was sent for HEAD: the next response on the connection parses cleanly.
    let allowed = conn.send(&Request::new("HEAD", "/public").host(SHOP).ua(GPTBOT));
    assert_eq!(allowed.status, 200);
    assert_eq!(allowed.header("x-origin"), Some("yes"));
    let again = conn.send(&Request::get("/public").host(SHOP).ua(GPTBOT));
    assert_passed(&again, "/public", "GET after HEAD");

    let seen: Vec<(String, String)> = origin
        .proxied()
        .into_iter()
        .map(|r| (r.method, r.target))
        .collect();
    assert_eq!(
        seen,
        [
            ("HEAD".to_string(), "/public".to_string()),
            ("GET".to_string(), "/public".to_string())
        ]
    );
}

#[test]
fn post_is_decided_like_get() {
    let (origin, proxy) = shop("User-agent: *\nDisallow: /private\n", "");
    let body = b"name=zorg&comment=hello";

    let blocked = proxy.send(
        &Request::new("POST", "/private/form")
            .host(SHOP)
            .ua(GPTBOT)
            .body(body),
    );
    assert_eq!(blocked.status, 403, "{}", blocked.text());
    assert!(
        blocked.text().contains("/private/form"),
        "{}",
        blocked.text()
    );
    assert!(origin.proxied().is_empty(), "{:?}", origin.proxied());

    let allowed = proxy.send(
        &Request::new("POST", "/public/form")
            .host(SHOP)
            .ua(GPTBOT)
            .body(body),
    );
    assert_passed(&allowed, "/public/form", "POST to an allowed path");
    let seen = origin.proxied_to("/public/form");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].body, body);

    // A browser's POST to the disallowed path passes, body intact.
    let browser = proxy.send(
        &Request::new("POST", "/private/form")
            .host(SHOP)
            .ua(BROWSER)
            .body(body),
    );
    assert_passed(&browser, "/private/form", "browser POST");
    assert_eq!(origin.proxied_to("/private/form")[0].body, body);
}

#[test]
fn the_connection_stays_usable_after_a_blocked_post_with_a_body() {
    let (origin, proxy) = shop("User-agent: *\nDisallow: /private\n", "");
    let mut conn = proxy.conn();
    let blocked = conn.send(
        &Request::new("POST", "/private/form")
            .host(SHOP)
            .ua(GPTBOT)
            .body(b"GET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"),
    );
    assert_eq!(blocked.status, 403, "{}", blocked.text());
    assert_ne!(
        blocked.header("connection"),
        Some("close"),
        "the proxy closes the connection after blocking a POST with a body"
    );
    conn.write(
        format!("GET /after HTTP/1.1\r\nHost: {SHOP}\r\nUser-Agent: {GPTBOT}\r\n\r\n").as_bytes(),
    );
    let after = conn
        .read_response(false)
        .expect("a response on the same connection after the blocked POST");
    assert_passed(&after, "/after", "GET after the blocked POST");
    // The blocked request's body was never taken for a request of its own.
    assert!(origin.proxied_to("/smuggled").is_empty());
}

#[test]
fn keep_alive_survives_a_blocked_request() {
    let (origin, proxy) = shop("User-agent: GPTBot\nDisallow: /private\n", "");
    let mut conn = proxy.conn();
    let request = |path: &str, ua: &str| Request::get(path).host(SHOP).ua(ua);
    assert_blocked(&conn.send(&request("/private/1", GPTBOT)), "first");
    assert_passed(
        &conn.send(&request("/public/1", GPTBOT)),
        "/public/1",
        "allowed after blocked",
    );
    assert_blocked(&conn.send(&request("/private/2", GPTBOT)), "blocked again");
    assert_passed(
        &conn.send(&request("/private/2", BROWSER)),
        "/private/2",
        "a browser on the same connection",
    );
    let targets: Vec<String> = origin.proxied().into_iter().map(|r| r.target).collect();
    assert_eq!(targets, ["/public/1", "/private/2"]);
}

#[test]
fn the_default_body_names_the_configured_status() {
    let origin = Origin::start();
    let extra = format!(
        "    block: {{status: 451}}\n{}",
        inline_robots("User-agent: GPTBot\nDisallow: /\n")
    );
    let proxy = Proxy::start(&site(&origin, "shop.example", &extra));
    let blocked = proxy.get("shop.example", "/x", GPTBOT);
    assert_eq!(blocked.status, 451);
    let text = blocked.text();
    assert!(
        text.starts_with("451 Unavailable For Legal Reasons: GPTBot may not fetch /x."),
        "{text}"
    );
}

#[test]
fn a_block_template_expands_each_placeholder_once() {
    let origin = Origin::start();
    let extra = format!(
        "    block:\n      body: \"path={{path}} origin={{origin}} crawler={{crawler}}\"\n{}",
        inline_robots("User-agent: GPTBot\nDisallow: /\n")
    );
    let proxy = Proxy::start(&site(&origin, "shop.example", &extra));
    // A request target may hold placeholder text; it is never expanded again.
    let blocked = proxy.get("shop.example", "/{origin}/{crawler}/{robots_url}", GPTBOT);
    assert_eq!(blocked.status, 403);
    assert_eq!(
        blocked.text(),
        "path=/{origin}/{crawler}/{robots_url} origin=shop crawler=GPTBot"
    );
}
