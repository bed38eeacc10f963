//! robots.txt's `Crawl-delay` as a rate limit, through the real proxy: one request per delay per
//! budget (a verified crawler's budget is shared by its addresses, anyone else's is per address),
//! 429 with `Retry-After`, `/robots.txt` never limited, `report`, `ignore` and `max`; and the
//! compliance signal (violations by whether the client read robots.txt).

use crate::support;

use std::time::{Duration, Instant};

use support::{metric, Origin, Proxy, Request, BROWSER};

/// A crawler without published verification data, so its budget is per address.
const EXAMPLEBOT: &str = "Mozilla/5.0 (compatible; ExampleBot/1.0)";
/// A crawler verified by a range list file (203.0.113.0/24).
const LISTEDBOT: &str = "ListedBot/2.0";

fn origin_entry(name: &str, origin: &Origin, robots: &str, extra: &str) -> String {
    format!(
        "  - name: {name}\n    hosts: [\"{name}.example\"]\n    upstream: \"{}\"\n    \
         robots: {{source: inline, text: {}}}\n{extra}",
        origin.addr(),
        serde_json::to_string(robots).expect("a string serialises")
    )
}

fn start(origin: &Origin) -> Proxy {
    let body = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n\
         defaults:\n  crawl_delay: {{action: enforce, max: 60s}}\n\
         crawlers:\n  extra:\n    - {{name: ExampleBot, tokens: [examplebot], pattern: ExampleBot, category: ai-training}}\n    \
         - {{name: ListedBot, tokens: [listedbot], pattern: ListedBot, category: ai-training, verify: {{ips: [\"file:ranges.json\"]}}}}\n\
         origins:\n{}{}{}{}{}",
        origin_entry(
            "shop",
            origin,
            "User-agent: *\nCrawl-delay: 2\nDisallow: /private\n",
            ""
        ),
        origin_entry(
            "report",
            origin,
            "User-agent: *\nCrawl-delay: 2\n",
            "    crawl_delay: {action: report}\n"
        ),
        origin_entry(
            "capped",
            origin,
            "User-agent: *\nCrawl-delay: 30\n",
            "    crawl_delay: {max: 1s}\n"
        ),
        origin_entry(
            "ignored",
            origin,
            "User-agent: *\nCrawl-delay: 30\n",
            "    crawl_delay: {action: ignore}\n"
        ),
        origin_entry(
            "reported",
            origin,
            "User-agent: *\nCrawl-delay: 2\n",
            "    impostors: report\n"
        ),
    );
    Proxy::builder(&body)
        .files(&[("ranges.json", "[\"203.0.113.0/24\"]")])
        .start()
}

fn from(
    proxy: &Proxy,
    client: &str,
    host: &str,
    path: &str,
    user_agent: &str,
) -> support::Response {
    proxy.send(
        &Request::get(path)
            .host(host)
            .ua(user_agent)
            .header("X-Forwarded-For", client),
    )
}

#[test]
fn crawl_delay_admits_one_request_per_delay_per_budget() {
    let origin = Origin::start();
    let proxy = start(&origin);
    let host = "shop.example";

    let first = from(&proxy, "203.0.113.10", host, "/a", EXAMPLEBOT);
    assert_eq!(first.status, 200, "{}", first.text());
    let started = Instant::now();
    let second = from(&proxy, "203.0.113.10", host, "/b", EXAMPLEBOT);
    assert_eq!(second.status, 429, "{}", second.text());
    let retry_after: u64 = second
        .header("retry-after")
        .and_then(|value| value.parse().ok())
        .expect("a Retry-After in whole seconds");
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    assert!(
        second.text().contains("ExampleBot") && second.text().contains("Crawl-delay"),
        "{}",
        second.text()
    );
    assert!(
        origin.proxied_to("/b").is_empty(),
        "a limited request is not proxied"
    );
    // robots.txt decides first; robots.txt itself is never limited; browsers are not crawlers.
    assert_eq!(
        from(&proxy, "203.0.113.10", host, "/private/x", EXAMPLEBOT).status,
        403
    );
    assert_eq!(
        from(&proxy, "203.0.113.10", host, "/robots.txt", EXAMPLEBOT).status,
        200
    );
    for _ in 0..3 {
        assert_eq!(
            from(&proxy, "203.0.113.10", host, "/a", BROWSER).status,
            200
        );
    }
    // Another address has a budget of its own.
    assert_eq!(
        from(&proxy, "203.0.113.11", host, "/a", EXAMPLEBOT).status,
        200
    );
    let (_, explain) = proxy.explain_from(host, EXAMPLEBOT, "/a", "203.0.113.10");
    assert_eq!(explain["crawl_delay"]["seconds"], 2.0, "{explain}");
    assert_eq!(explain["crawl_delay"]["budget"], "client", "{explain}");
    assert!(
        explain["crawl_delay"]["wait_seconds"]
            .as_f64()
            .unwrap_or(0.0)
            > 0.0,
        "{explain}"
    );

    // Once Retry-After has passed, the next request is admitted.
    let wait = Duration::from_secs(retry_after).saturating_sub(started.elapsed());
    std::thread::sleep(wait + Duration::from_millis(50));
    assert_eq!(
        from(&proxy, "203.0.113.10", host, "/c", EXAMPLEBOT).status,
        200
    );

    let metrics = proxy.metrics();
    let labels = [("origin", "shop"), ("crawler", "ExampleBot")];
    assert_eq!(
        metric(&metrics, "robotsguard_rate_limited_total", &labels),
        1.0
    );
    assert_eq!(
        metric(
            &metrics,
            "robotsguard_requests_total",
            &[("origin", "shop"), ("decision", "limited")]
        ),
        1.0
    );
}

#[test]
fn a_verified_crawler_has_one_budget_for_all_its_addresses() {
    let origin = Origin::start();
    let proxy = start(&origin);
    let host = "shop.example";
    wait_for_range_list(&proxy, host);
    assert_eq!(
        from(&proxy, "203.0.113.20", host, "/a", LISTEDBOT).status,
        200
    );
    let other = from(&proxy, "203.0.113.21", host, "/b", LISTEDBOT);
    assert_eq!(other.status, 429, "{}", other.text());
    let (_, explain) = proxy.explain_from(host, LISTEDBOT, "/a", "203.0.113.99");
    assert_eq!(explain["crawl_delay"]["budget"], "crawler", "{explain}");
}

/// Waits until the range list, which loads in the background, is in: a ListedBot claim from
/// 203.0.113.20 is verified.
fn wait_for_range_list(proxy: &Proxy, host: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, explain) = proxy.explain_from(host, LISTEDBOT, "/a", "203.0.113.20");
        if explain["verification"]["result"] == "verified" {
            return;
        }
        assert!(Instant::now() < deadline, "never verified: {explain}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `impostors: report` lets an impostor through; it is still held to the Crawl-delay, per
/// address, and never spends the real crawler's budget.
#[test]
fn a_reported_impostor_is_held_to_the_crawl_delay_of_its_address() {
    let origin = Origin::start();
    let proxy = start(&origin);
    let host = "reported.example";
    wait_for_range_list(&proxy, host);
    let impostor = "198.51.100.7";
    let (_, explain) = proxy.explain_from(host, LISTEDBOT, "/a", impostor);
    assert_eq!(explain["verification"]["result"], "impostor", "{explain}");

    let first = from(&proxy, impostor, host, "/a", LISTEDBOT);
    assert_eq!(first.status, 200, "reported, not refused: {}", first.text());
    let second = from(&proxy, impostor, host, "/b", LISTEDBOT);
    assert_eq!(second.status, 429, "{}", second.text());
    assert!(second.header("retry-after").is_some());
    assert!(
        origin.proxied_to("/b").is_empty(),
        "a limited request is not proxied"
    );
    // Both requests are logged as the impostor's, the limited one too.
    assert!(
        proxy.wait_log("would block (report mode)", 2, Duration::from_secs(5)),
        "{}",
        proxy.stderr()
    );
    // Another impostor address has its own budget; the real crawler's is untouched.
    assert_eq!(
        from(&proxy, "198.51.100.8", host, "/c", LISTEDBOT).status,
        200
    );
    assert_eq!(
        from(&proxy, "203.0.113.20", host, "/d", LISTEDBOT).status,
        200
    );
    let metrics = proxy.metrics();
    assert_eq!(
        metric(
            &metrics,
            "robotsguard_rate_limited_total",
            &[("origin", "reported"), ("crawler", "ListedBot")]
        ),
        1.0
    );
}

/// A User-Agent naming two crawlers, from an address verified for the second: the first one's
/// budget stays per address (the address proves nothing about the first).
#[test]
fn an_address_verified_for_another_named_crawler_keeps_a_budget_per_address() {
    let origin = Origin::start();
    let proxy = start(&origin);
    let host = "shop.example";
    wait_for_range_list(&proxy, host);
    let both = "Mozilla/5.0 (compatible; ExampleBot/1.0) ListedBot/2.0";
    let (_, explain) = proxy.explain_from(host, both, "/a", "203.0.113.40");
    assert_eq!(explain["crawler"]["name"], "ExampleBot", "{explain}");
    assert_eq!(explain["verification"]["result"], "verified", "{explain}");
    assert_eq!(explain["verification"]["crawler"], "ListedBot", "{explain}");
    assert_eq!(explain["crawl_delay"]["budget"], "client", "{explain}");
    for client in ["203.0.113.40", "203.0.113.41"] {
        let response = from(&proxy, client, host, "/a", both);
        assert_eq!(response.status, 200, "{client}: {}", response.text());
    }
    assert_eq!(from(&proxy, "203.0.113.40", host, "/b", both).status, 429);
}

#[test]
fn report_ignore_and_max() {
    let origin = Origin::start();
    let proxy = start(&origin);
    let client = "203.0.113.30";

    // report: proxied, counted as would_limit.
    for path in ["/a", "/b"] {
        assert_eq!(
            from(&proxy, client, "report.example", path, EXAMPLEBOT).status,
            200
        );
    }
    // ignore: Crawl-delay is not read.
    for path in ["/a", "/b", "/c"] {
        assert_eq!(
            from(&proxy, client, "ignored.example", path, EXAMPLEBOT).status,
            200
        );
    }
    // max: a 30 s delay is taken as 1 s.
    assert_eq!(
        from(&proxy, client, "capped.example", "/a", EXAMPLEBOT).status,
        200
    );
    let limited = from(&proxy, client, "capped.example", "/b", EXAMPLEBOT);
    assert_eq!(limited.status, 429);
    assert_eq!(limited.header("retry-after"), Some("1"));
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(
        from(&proxy, client, "capped.example", "/c", EXAMPLEBOT).status,
        200
    );

    let metrics = proxy.metrics();
    let decisions = |origin: &str, decision: &str| {
        metric(
            &metrics,
            "robotsguard_requests_total",
            &[("origin", origin), ("decision", decision)],
        )
    };
    assert_eq!(decisions("report", "would_limit"), 1.0);
    assert_eq!(decisions("report", "allowed"), 1.0);
    assert_eq!(decisions("ignored", "allowed"), 3.0);
    assert_eq!(decisions("capped", "limited"), 1.0);
    assert_eq!(
        metric(
            &metrics,
            "robotsguard_rate_limited_total",
            &[("origin", "report")]
        ),
        0.0
    );
}

/// `robotsguard_violations_total{read_robots}`: whether the client fetched robots.txt (within
/// 24 hours) before fetching what it disallows.
#[test]
fn violations_say_whether_the_client_read_robots_txt() {
    let origin = Origin::start();
    let proxy = start(&origin);
    let host = "shop.example";
    // Never read robots.txt.
    assert_eq!(
        from(&proxy, "203.0.113.40", host, "/private/a", EXAMPLEBOT).status,
        403
    );
    // Read it, then ignored it, twice.
    assert_eq!(
        from(&proxy, "203.0.113.41", host, "/robots.txt", EXAMPLEBOT).status,
        200
    );
    for path in ["/private/a", "/private/b"] {
        assert_eq!(
            from(&proxy, "203.0.113.41", host, path, EXAMPLEBOT).status,
            403
        );
    }
    // Another origin's robots.txt does not count for this one.
    assert_eq!(
        from(
            &proxy,
            "203.0.113.40",
            "report.example",
            "/robots.txt",
            EXAMPLEBOT
        )
        .status,
        200
    );
    assert_eq!(
        from(&proxy, "203.0.113.40", host, "/private/c", EXAMPLEBOT).status,
        403
    );
    let metrics = proxy.metrics();
    let violations = |read: &str| support::shop_violations(&metrics, "ExampleBot", read);
    assert_eq!(violations("no"), 2.0, "{metrics}");
    assert_eq!(violations("yes"), 2.0, "{metrics}");
}

/// One request with curl (its own User-Agent), as a client at `client`: the status.
fn curl_status(proxy: &Proxy, client: &str, user_agent: &str, path: &str) -> u16 {
    let output = std::process::Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "10",
        ])
        .args(["-A", user_agent])
        .args(["-H", "Host: shop.example"])
        .args(["-H", &format!("X-Forwarded-For: {client}")])
        .arg(format!("http://{}{path}", proxy.addr))
        .output()
        .expect("curl runs");
    String::from_utf8_lossy(&output.stdout)
        .parse()
        .unwrap_or_else(|_| panic!("curl: {}", String::from_utf8_lossy(&output.stderr)))
}

/// Crawlers named only by the generic rules (an automation word, an HTTP library, no
/// User-Agent at all) are anyone's made-up names: renaming from one address does not buy a
/// fresh budget. They share one per address and origin; a catalogue crawler and other
/// addresses keep their own.
#[test]
fn generic_crawler_names_from_one_address_share_one_budget() {
    let origin = Origin::start();
    let proxy = start(&origin);
    let client = "203.0.113.50";
    assert_eq!(curl_status(&proxy, client, "FooBot/1.0", "/a"), 200);
    for user_agent in [
        "BarBot/2.0 (+https://bar.example/bot)",
        "my-little-crawler",
        "SpiderOfTheDay/3",
        "NewsFetcher/4.2",
        "",
    ] {
        assert_eq!(
            curl_status(&proxy, client, user_agent, "/a"),
            429,
            "{user_agent:?} shares FooBot's budget"
        );
    }
    assert_eq!(curl_status(&proxy, "203.0.113.51", "BarBot/2.0", "/a"), 200);
    assert_eq!(curl_status(&proxy, client, EXAMPLEBOT, "/a"), 200);
    let (_, explain) = proxy.explain_from("shop.example", "QuuxBot/1", "/a", client);
    assert!(
        explain["crawl_delay"]["wait_seconds"]
            .as_f64()
            .unwrap_or(0.0)
            > 0.0,
        "/explain shows the shared budget: {explain}"
    );
}
