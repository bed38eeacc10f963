//! Operators' rate budgets (`policy.rates`), through the real proxy: a rate admits its limit per
//! period and refuses the rest with `429` and `Retry-After` (decision `rate_limited`, counted in
//! the metrics and the reports, shown by `/explain`), per client network by default and per
//! crawler for a verified crawler under `per: crawler`; an origin that only reports proxies and
//! counts `would_rate_limit`; and two replicas on one real Redis server together admit no more
//! than the rate while the store answers, and each no more than the rate on its own when it does
//! not (the bound `docs/src/operations/bans-budgets-and-the-firewall.md` documents).

use crate::support;

use std::thread;
use std::time::{Duration, Instant};

use support::redis::RedisServer;
use support::{metric, Origin, Proxy, Request, BROWSER};

/// A crawler without verification data: its budget is per client network.
const EXAMPLEBOT: &str = "Mozilla/5.0 (compatible; ExampleBot/1.0)";
/// A crawler verified by a range list file (203.0.113.0/24).
const LISTEDBOT: &str = "ListedBot/2.0";

const CRAWLERS: &str = "crawlers:\n  extra:\n    - {name: ExampleBot, tokens: [examplebot], pattern: ExampleBot, category: ai-training}\n    \
     - {name: ListedBot, tokens: [listedbot], pattern: ListedBot, category: archive, verify: {ips: [\"file:ranges.json\"]}}\n";

fn origin_entry(name: &str, origin: &Origin, extra: &str) -> String {
    format!(
        "  - name: {name}\n    hosts: [\"{name}.example\"]\n    upstream: \"{}\"\n    \
         robots: {{source: inline, text: \"User-agent: *\\nDisallow: /private\\n\"}}\n{extra}",
        origin.addr()
    )
}

fn from(proxy: &Proxy, host: &str, client: &str, path: &str, ua: &str) -> support::Response {
    proxy.send(
        &Request::get(path)
            .host(host)
            .ua(ua)
            .header("X-Forwarded-For", client),
    )
}

fn requests(proxy: &Proxy, origin: &str, crawler: &str, decision: &str) -> f64 {
    metric(
        &proxy.metrics(),
        "robotsguard_requests_total",
        &[
            ("origin", origin),
            ("crawler", crawler),
            ("decision", decision),
        ],
    )
}

#[test]
fn a_rate_admits_its_limit_per_period_and_refuses_the_rest_with_retry_after() {
    let origin = Origin::start();
    let body = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n{CRAWLERS}origins:\n{}{}",
        origin_entry(
            "shop",
            &origin,
            "    policy:\n      rates: {ExampleBot: 3/m, archive: {rate: 4/m, per: crawler}, ai-training: 100/s}\n"
        ),
        origin_entry(
            "report",
            &origin,
            "    mode: report\n    policy: {rates: {ai-training: 2/h}}\n"
        ),
    );
    let proxy = Proxy::builder(&body)
        .files(&[("ranges.json", "[\"203.0.113.0/24\"]")])
        .start();

    // The crawler's own rule (3/m) wins over its category's (100/s).
    for n in 0..3 {
        let admitted = from(
            &proxy,
            "shop.example",
            "192.0.2.1",
            &format!("/p/{n}"),
            EXAMPLEBOT,
        );
        assert_eq!(admitted.status, 200, "request {n}");
    }
    let refused = from(&proxy, "shop.example", "192.0.2.1", "/p/3", EXAMPLEBOT);
    assert_eq!(refused.status, 429);
    let retry: u64 = refused
        .header("retry-after")
        .and_then(|value| value.parse().ok())
        .expect("a Retry-After in seconds");
    assert!(
        (1..=20).contains(&retry),
        "one of 3 a minute comes back within 20 s: {retry}"
    );
    assert!(
        refused
            .text()
            .contains("at most 3 requests a minute (rate budget)"),
        "{}",
        refused.text()
    );
    assert_eq!(
        from(&proxy, "shop.example", "192.0.2.1", "/p/4", EXAMPLEBOT).status,
        429,
        "a refusal does not refill the bucket"
    );
    assert!(origin.proxied_to("/p/3").is_empty());
    // Robots.txt is never limited; a browser from the same address is not a crawler.
    assert_eq!(
        from(
            &proxy,
            "shop.example",
            "192.0.2.1",
            "/robots.txt",
            EXAMPLEBOT
        )
        .status,
        200
    );
    assert_eq!(
        from(&proxy, "shop.example", "192.0.2.1", "/p/5", BROWSER).status,
        200
    );
    // Another address has a budget of its own; an IPv6 /64 has one for all its addresses.
    assert_eq!(
        from(&proxy, "shop.example", "192.0.2.2", "/p/0", EXAMPLEBOT).status,
        200
    );
    for n in 1..=3 {
        let client = format!("2001:db8:1:2::{n}");
        assert_eq!(
            from(&proxy, "shop.example", &client, "/q", EXAMPLEBOT).status,
            200
        );
    }
    assert_eq!(
        from(&proxy, "shop.example", "2001:db8:1:2::99", "/q", EXAMPLEBOT).status,
        429,
        "the same /64"
    );
    assert_eq!(
        from(&proxy, "shop.example", "2001:db8:1:3::1", "/q", EXAMPLEBOT).status,
        200
    );

    // `per: crawler`: one budget for the verified crawler across its addresses (once the range
    // list, loaded in the background, is in; `/explain` spends nothing).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, explained) = proxy.explain_from("shop.example", LISTEDBOT, "/r", "203.0.113.1");
        if explained["verification"]["result"] == "verified" {
            assert_eq!(explained["rate_budget"]["budget"], "crawler", "{explained}");
            assert_eq!(explained["rate_budget"]["per"], "crawler", "{explained}");
            break;
        }
        assert!(Instant::now() < deadline, "never verified: {explained}");
        thread::sleep(Duration::from_millis(50));
    }
    for n in 1..=4 {
        let client = format!("203.0.113.{n}");
        assert_eq!(
            from(&proxy, "shop.example", &client, "/r", LISTEDBOT).status,
            200,
            "{client}"
        );
    }
    assert_eq!(
        from(&proxy, "shop.example", "203.0.113.77", "/r", LISTEDBOT).status,
        429,
        "the crawler's one budget is spent"
    );

    assert_eq!(requests(&proxy, "shop", "ExampleBot", "rate_limited"), 3.0);
    assert_eq!(requests(&proxy, "shop", "ListedBot", "rate_limited"), 1.0);
    let exceeded = |crawler: &str| {
        metric(
            &proxy.metrics(),
            "robotsguard_rate_budget_exceeded_total",
            &[
                ("origin", "shop"),
                ("crawler", crawler),
                ("rule", "crawler"),
            ],
        )
    };
    assert_eq!(exceeded("ExampleBot"), 3.0);
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_rate_budget_exceeded_total",
            &[
                ("origin", "shop"),
                ("crawler", "ListedBot"),
                ("rule", "category")
            ],
        ),
        1.0
    );
    let report = proxy.admin_get("/reports/crawlers?origin=shop").json();
    let row = report["crawlers"]
        .as_array()
        .and_then(|rows| rows.iter().find(|row| row["name"] == "ExampleBot").cloned())
        .unwrap_or_default();
    assert_eq!(row["rate_limited"], 3, "{report}");

    // `/explain` says what the next request would get, spending nothing.
    let (status, explained) = proxy.explain_from("shop.example", EXAMPLEBOT, "/p/9", "192.0.2.1");
    assert_eq!(status, 200, "{explained}");
    assert_eq!(explained["decision"], "rate_limited", "{explained}");
    assert_eq!(explained["answer"]["status"], 429, "{explained}");
    assert_eq!(explained["rate_budget"]["rate"], "3/m", "{explained}");
    assert_eq!(explained["rate_budget"]["rule"], "crawler", "{explained}");
    assert_eq!(
        explained["rate_budget"]["budget"], "192.0.2.1",
        "{explained}"
    );
    assert!(explained["rate_budget"]["wait_seconds"].as_f64() > Some(0.0));
    let (_, fresh) = proxy.explain_from("shop.example", EXAMPLEBOT, "/p/9", "192.0.2.50");
    assert_eq!(fresh["decision"], "allowed", "{fresh}");
    assert_eq!(fresh["rate_budget"]["wait_seconds"], 0.0, "{fresh}");
    for _ in 0..5 {
        proxy.explain_from("shop.example", EXAMPLEBOT, "/p/9", "192.0.2.60");
    }
    assert_eq!(
        from(&proxy, "shop.example", "192.0.2.60", "/p/0", EXAMPLEBOT).status,
        200,
        "explaining spent nothing"
    );

    // An origin that only reports: proxied, counted.
    for n in 0..4 {
        assert_eq!(
            from(
                &proxy,
                "report.example",
                "192.0.2.1",
                &format!("/p/{n}"),
                EXAMPLEBOT
            )
            .status,
            200
        );
    }
    assert_eq!(
        requests(&proxy, "report", "ExampleBot", "would_rate_limit"),
        2.0
    );
}

/// Polls `check` every 50 ms until it holds or `within` passes.
fn wait_for(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    for _ in 0..10_000 {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(50));
    }
    false
}

fn store_up(proxy: &Proxy) -> f64 {
    metric(&proxy.metrics(), "robotsguard_state_backend_up", &[])
}

#[test]
fn two_replicas_on_one_redis_admit_the_rate_together_and_each_at_most_the_rate_alone() {
    const LIMIT: usize = 5;
    let origin = Origin::start();
    let mut redis = RedisServer::start();
    // A generous timeout: an answer slower than it is decided from the replica's own bucket,
    // which is the second bound, not the first (and this machine may be busy).
    let body = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n\
         state:\n  backend: redis\n  redis: {{url: \"{}\", prefix: \"rg-rates:\", timeout: 2s}}\n{CRAWLERS}origins:\n{}",
        redis.url(),
        origin_entry("shop", &origin, "    policy: {rates: {ExampleBot: 5/h}}\n"),
    );
    let replicas = [Proxy::start(&body), Proxy::start(&body)];
    for proxy in &replicas {
        assert!(
            wait_for(Duration::from_secs(10), || store_up(proxy) == 1.0),
            "the store is reachable: {}",
            proxy.stderr()
        );
    }
    // Requests of one client alternate between the replicas: the store's one bucket admits 5
    // (5 an hour: none comes back during the test).
    let mut admitted = [0_usize; 2];
    for n in 0..4 * LIMIT {
        let replica = n % 2;
        let status = from(
            &replicas[replica],
            "shop.example",
            "192.0.2.7",
            "/x",
            EXAMPLEBOT,
        )
        .status;
        assert!(status == 200 || status == 429, "{status}");
        admitted[replica] += usize::from(status == 200);
    }
    assert_eq!(
        admitted.iter().sum::<usize>(),
        LIMIT,
        "together, exactly the rate while the store answers: {admitted:?}"
    );
    assert_eq!(
        redis.command(&["EXISTS", "rg-rates:rate:shop:examplebot:192.0.2.7"]),
        "1"
    );

    // Cut off from the store, each replica decides from its own bucket, which counted its own
    // admissions: each admits at most the rate in all, so two admit at most twice the rate.
    redis.kill();
    for proxy in &replicas {
        assert!(
            wait_for(Duration::from_secs(10), || {
                // A request notices the store is gone (and is decided from memory).
                from(proxy, "shop.example", "192.0.2.8", "/y", BROWSER);
                store_up(proxy) == 0.0
            }),
            "the store is seen down"
        );
    }
    for n in 0..4 * LIMIT {
        let replica = n % 2;
        let status = from(
            &replicas[replica],
            "shop.example",
            "192.0.2.7",
            "/z",
            EXAMPLEBOT,
        )
        .status;
        admitted[replica] += usize::from(status == 200);
    }
    for (replica, count) in admitted.iter().enumerate() {
        assert!(
            *count <= LIMIT,
            "replica {replica} admitted {count} in all, more than the rate on its own"
        );
    }
    assert_eq!(
        admitted.iter().sum::<usize>(),
        2 * LIMIT,
        "each replica's own bucket admits the rest of its rate: {admitted:?}"
    );
}
