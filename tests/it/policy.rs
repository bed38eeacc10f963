//! Who is bound by robots.txt: apps' HTTP libraries and uptime monitors pass by default,
//! categories and crawlers can be turned away outright or let through, allowed clients and
//! exempt paths are never blocked, in the documented order; and for `file` and `inline`
//! sources, crawlers read the very robots.txt that is enforced.

use crate::support;

use support::{inline_robots, site, Origin, Proxy, Request, BROWSER, GPTBOT};

const HOST: &str = "shop.example";

const APP_LIBRARIES: &[&str] = &[
    "okhttp/4.12.0",
    "axios/1.6.7",
    "Java/17.0.9",
    "python-requests/2.31.0",
    "Go-http-client/1.1",
    "node-fetch/1.0 (+https://github.com/bitinn/node-fetch)",
    "Apache-HttpClient/4.5.14 (Java/17.0.9)",
];

const MONITORS: &[&str] = &[
    "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)",
    "Pingdom.com_bot_version_1.4_(http://www.pingdom.com/)",
    "Datadog/Synthetics",
];

fn proxy(robots: &str, origin_extra: &str) -> (Origin, Proxy) {
    let origin = Origin::start();
    let extra = format!("{origin_extra}{}", inline_robots(robots));
    let proxy = Proxy::start(&site(&origin, HOST, &extra));
    (origin, proxy)
}

#[test]
fn apps_http_libraries_pass_by_default_and_are_bound_when_asked() {
    let (origin, proxy) = proxy("User-agent: *\nDisallow: /api/\n", "");
    for ua in APP_LIBRARIES {
        assert_eq!(proxy.get(HOST, "/api/cart", ua).status, 200, "{ua}");
        let (_, explain) = proxy.explain(HOST, ua, "/api/cart");
        assert_eq!(explain["policy"], "category library: pass", "{explain}");
        assert_eq!(explain["decision"], "pass");
    }
    assert_eq!(origin.proxied_to("/api/cart").len(), APP_LIBRARIES.len());
    // Crawling tools are not apps: still bound.
    assert_eq!(
        proxy
            .get(HOST, "/api/cart", "Scrapy/2.11 (+https://scrapy.org)")
            .status,
        403
    );
    let (_, proxy) = proxy_with_policy(
        "User-agent: *\nDisallow: /api/\n",
        "    policy: {categories: {library: enforce}}\n",
    );
    for ua in APP_LIBRARIES {
        assert_eq!(proxy.get(HOST, "/api/cart", ua).status, 403, "{ua}");
    }
}

fn proxy_with_policy(robots: &str, policy: &str) -> (Origin, Proxy) {
    proxy(robots, policy)
}

#[test]
fn uptime_monitors_are_not_taken_down_by_disallow_all() {
    let (_origin, proxy) = proxy("User-agent: *\nDisallow: /\n", "");
    for ua in MONITORS {
        assert_eq!(proxy.get(HOST, "/", ua).status, 200, "{ua}");
    }
    assert_eq!(proxy.get(HOST, "/", GPTBOT).status, 403);
}

#[test]
fn a_blocked_crawler_may_read_robots_txt_and_exempt_paths_only() {
    let (origin, proxy) = proxy(
        "User-agent: *\nAllow: /\n",
        "    policy: {crawlers: {GPTBot: block}, exempt_paths: [/.well-known/, /ads.txt]}\n",
    );
    let blocked = proxy.get(HOST, "/", GPTBOT);
    assert_eq!(blocked.status, 403);
    assert!(
        blocked
            .text()
            .starts_with("403 Forbidden: this site does not admit GPTBot."),
        "{}",
        blocked.text()
    );
    assert!(
        !blocked.text().contains("robots.txt line"),
        "{}",
        blocked.text()
    );
    assert_eq!(proxy.get(HOST, "/anything/else", GPTBOT).status, 403);
    assert_eq!(proxy.get(HOST, "/robots.txt", GPTBOT).status, 200);
    assert_eq!(
        proxy.get(HOST, "/.well-known/security.txt", GPTBOT).status,
        200
    );
    assert_eq!(proxy.get(HOST, "/ads.txt", GPTBOT).status, 200);
    // An exempt prefix is matched on the canonical path: no way around it, no way into it.
    assert_eq!(
        proxy.get(HOST, "/.well-known/../private", GPTBOT).status,
        403
    );
    assert_eq!(proxy.get(HOST, "/%2Ewell-known/x", GPTBOT).status, 200);
    assert_eq!(proxy.get(HOST, "/", BROWSER).status, 200);
    let (_, explain) = proxy.explain(HOST, GPTBOT, "/");
    assert_eq!(explain["policy"], "crawler GPTBot: block", "{explain}");
    assert!(
        origin.proxied_to("/").len() == 1,
        "only the browser's request"
    );
    let text = proxy.metrics();
    assert_eq!(
        support::metric(
            &text,
            "robotsguard_requests_total",
            &[("crawler", "GPTBot"), ("decision", "blocked")]
        ),
        3.0
    );
}

#[test]
fn a_whole_category_can_be_turned_away() {
    let (_origin, proxy) = proxy(
        "User-agent: *\nAllow: /\n",
        "    policy: {categories: {ai-training: block}}\n",
    );
    for ua in [GPTBOT, "CCBot/2.0 (https://commoncrawl.org/faq/)"] {
        assert_eq!(proxy.get(HOST, "/page", ua).status, 403, "{ua}");
    }
    let googlebot = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
    assert_eq!(proxy.get(HOST, "/page", googlebot).status, 200);
    let (_, explain) = proxy.explain(HOST, GPTBOT, "/page");
    assert_eq!(
        explain["policy"], "category ai-training: block",
        "{explain}"
    );
}

#[test]
fn allowed_clients_pass_with_a_crawler_user_agent() {
    let (_origin, proxy) = proxy(
        "User-agent: *\nDisallow: /\n",
        "    policy: {allow_clients: [\"127.0.0.0/8\", \"2001:db8::/32\"], crawlers: {GPTBot: block}}\n",
    );
    // The proxy's clients are on 127.0.0.1 here: every crawler passes, even a blocked one.
    assert_eq!(proxy.get(HOST, "/", GPTBOT).status, 200);
    assert_eq!(proxy.get(HOST, "/", "SomethingCrawler/1.0").status, 200);
    let ask = |client: &str| {
        proxy
            .admin_get(&format!(
                "/explain?host={HOST}&ua=GPTBot/1.2&path=/&client={client}"
            ))
            .json()
    };
    assert_eq!(ask("127.0.0.1")["policy"], "allowed client");
    assert_eq!(ask("2001:db8::5")["decision"], "pass");
    assert_eq!(ask("203.0.113.1")["decision"], "blocked");
}

#[test]
fn precedence_is_robots_txt_exempt_path_allowed_client_crawler_category() {
    let (_origin, proxy) = proxy(
        "User-agent: *\nDisallow: /\n",
        "    policy:\n      categories: {ai-training: block, seo: pass}\n      crawlers: {GPTBot: pass, AhrefsBot: block}\n      exempt_paths: [/open/]\n      allow_clients: [\"198.51.100.0/24\"]\n",
    );
    let explain = |ua: &str, path: &str, client: &str| {
        let ua = support::percent_encode(ua);
        proxy
            .admin_get(&format!(
                "/explain?host={HOST}&ua={ua}&path={path}&client={client}"
            ))
            .json()
    };
    let outsider = "203.0.113.9";
    let ccbot = "CCBot/2.0";
    let ahrefs = "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)";
    let semrush = "Mozilla/5.0 (compatible; SemrushBot/7~bl; +http://www.semrush.com/bot.html)";
    let cases = [
        // robots.txt itself wins over a block.
        (ccbot, "/robots.txt", outsider, "robots.txt path", "pass"),
        // An exempt path wins over a block and over robots.txt.
        (ccbot, "/open/x", outsider, "exempt path", "pass"),
        // An allowed client wins over a block.
        (ccbot, "/x", "198.51.100.7", "allowed client", "pass"),
        // A crawler's own entry wins over its category (GPTBot is ai-training).
        ("GPTBot/1.2", "/x", outsider, "crawler GPTBot: pass", "pass"),
        // ... both ways (AhrefsBot is seo).
        (
            ahrefs,
            "/x",
            outsider,
            "crawler AhrefsBot: block",
            "blocked",
        ),
        // The category applies without a crawler entry.
        (
            ccbot,
            "/x",
            outsider,
            "category ai-training: block",
            "blocked",
        ),
        (semrush, "/x", outsider, "category seo: pass", "pass"),
        // Everything else: robots.txt.
        (
            "Mozilla/5.0 (compatible; Googlebot/2.1)",
            "/x",
            outsider,
            "robots.txt",
            "blocked",
        ),
    ];
    for (ua, path, client, policy, decision) in cases {
        let json = explain(ua, path, client);
        assert_eq!(json["policy"], policy, "{ua} {path} {client}: {json}");
        assert_eq!(json["decision"], decision, "{ua} {path} {client}: {json}");
    }
}

#[test]
fn report_mode_turns_a_policy_block_into_would_block() {
    let (origin, proxy) = proxy(
        "User-agent: *\nAllow: /\n",
        "    mode: report\n    policy: {crawlers: {GPTBot: block}}\n",
    );
    assert_eq!(proxy.get(HOST, "/page", GPTBOT).status, 200);
    assert_eq!(origin.proxied_to("/page").len(), 1);
    assert_eq!(
        proxy.wait_metric(
            "robotsguard_requests_total",
            &[("crawler", "GPTBot"), ("decision", "would_block")],
            1.0
        ),
        1.0
    );
}

#[test]
fn every_crawler_named_is_under_the_policy() {
    let (_origin, proxy) = proxy(
        "User-agent: *\nAllow: /\n",
        "    policy: {crawlers: {GPTBot: block}}\n",
    );
    // A pass for one name does not let a blocked one through.
    let both = "Mozilla/5.0 (compatible; UptimeRobot/2.0) GPTBot/1.2";
    assert_eq!(proxy.get(HOST, "/", both).status, 403);
}

/// GETs `/robots.txt` with extra headers; returns the whole response.
fn robots(proxy: &Proxy, headers: &[(&str, &str)], method: &str) -> support::Response {
    let mut request = Request::new(method, "/robots.txt").host(HOST).ua(GPTBOT);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    proxy.send(&request)
}

#[test]
fn file_and_inline_robots_txt_are_served_as_enforced() {
    const ENFORCED: &str = "User-agent: GPTBot\nDisallow: /\n";
    for source in [
        inline_robots(ENFORCED),
        "    robots: {source: file, path: \"{dir}/robots.txt\", refresh: 2m}\n".to_string(),
    ] {
        let origin = Origin::start();
        origin.robots(200, "User-agent: *\nAllow: /\n");
        let proxy = Proxy::builder(&site(&origin, HOST, &source))
            .files(&[("robots.txt", ENFORCED)])
            .start();
        let first = robots(&proxy, &[], "GET");
        assert_eq!(first.status, 200, "{source}");
        assert_eq!(first.text(), ENFORCED);
        assert_eq!(
            first.header("content-type"),
            Some("text/plain; charset=utf-8")
        );
        let etag = first.header("etag").unwrap_or_default().to_string();
        assert!(etag.starts_with('"') && etag.len() > 4, "{etag}");
        let last_modified = first
            .header("last-modified")
            .unwrap_or_default()
            .to_string();
        assert!(last_modified.ends_with("GMT"), "{last_modified}");
        let max_age = if source.contains("2m") {
            "max-age=120"
        } else {
            "max-age=300"
        };
        assert!(
            first
                .header("cache-control")
                .is_some_and(|c| c.contains(max_age)),
            "{:?}",
            first.header("cache-control")
        );
        let same = robots(&proxy, &[("If-None-Match", &etag)], "GET");
        assert_eq!((same.status, same.body.len()), (304, 0));
        let since = robots(&proxy, &[("If-Modified-Since", &last_modified)], "GET");
        assert_eq!(since.status, 304);
        let stale = robots(&proxy, &[("If-None-Match", "\"other\"")], "GET");
        assert_eq!(stale.status, 200);
        let head = robots(&proxy, &[], "HEAD");
        assert_eq!((head.status, head.body.len()), (200, 0));
        assert_eq!(
            head.header("content-length"),
            Some(ENFORCED.len().to_string().as_str())
        );
        // The origin's own, different robots.txt is never sent, nor asked for.
        assert!(origin.proxied_to("/robots.txt").is_empty(), "{source}");
        let (_, explain) = proxy.explain(HOST, GPTBOT, "/x");
        assert_eq!(explain["robots_served_by"], "robotsguard");
    }
}

#[test]
fn an_origin_source_proxies_robots_txt_unless_told_to_serve_it() {
    let origin = Origin::start();
    origin.robots(200, "User-agent: GPTBot\nDisallow: /\n");
    let proxy = Proxy::start(&site(&origin, HOST, ""));
    assert_eq!(robots(&proxy, &[], "GET").status, 200);
    assert_eq!(origin.proxied_to("/robots.txt").len(), 1);
    let (_, explain) = proxy.explain(HOST, GPTBOT, "/x");
    assert_eq!(explain["robots_served_by"], "origin");
    // A robots.txt that cannot be read is served as the disallow-everything it enforces.
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address")
    };
    let config = format!(
        "origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: \"{dead}\"\n    robots: {{serve: true}}\n"
    );
    let proxy = Proxy::start(&config);
    let served = robots(&proxy, &[], "GET");
    assert_eq!(served.status, 200);
    assert_eq!(served.text(), "User-agent: *\nDisallow: /\n");
}
