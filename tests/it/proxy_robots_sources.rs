//! Where robots.txt comes from and what happens when it cannot be had: inline text, a file, or
//! the origin answering 200, 404 or 500 (RFC 9309: 4xx allows all, 5xx with no earlier copy
//! disallows all unless `on_unreachable: allow`).

use crate::support;

use std::time::{Duration, Instant};

use support::*;

const SHOP: &str = "shop.example";

/// Polls `check` every 50 ms for up to 10 s; true once it holds.
fn eventually(mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    for _ in 0..400 {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn inline_robots_txt_is_enforced_without_fetching() {
    let origin = Origin::start();
    origin.robots(200, "User-agent: *\nAllow: /\n");
    let proxy = Proxy::start(&site(
        &origin,
        SHOP,
        &inline_robots("User-agent: GPTBot\nDisallow: /inline-only\n"),
    ));
    assert_eq!(proxy.get(SHOP, "/inline-only/x", GPTBOT).status, 403);
    assert_eq!(proxy.get(SHOP, "/other", GPTBOT).status, 200);
    assert_eq!(origin.robots_fetches(), 0, "{:?}", origin.received());
}

#[test]
fn file_robots_txt_is_read_relative_to_the_config_and_reread() {
    let origin = Origin::start();
    let extra = "    robots:\n      source: file\n      path: robots/shop.txt\n      refresh: 1s\n";
    let proxy = Proxy::builder(&site(&origin, SHOP, extra))
        .files(&[(
            "robots/shop.txt",
            "User-agent: GPTBot\nDisallow: /from-file\n",
        )])
        .start();
    let blocked = proxy.get(SHOP, "/from-file", GPTBOT);
    assert_eq!(blocked.status, 403, "{}", blocked.text());
    assert!(blocked.text().contains("line 2"), "{}", blocked.text());
    assert_eq!(proxy.get(SHOP, "/elsewhere", GPTBOT).status, 200);
    assert_eq!(origin.robots_fetches(), 0);

    // The file is read again every `refresh`.
    std::fs::write(
        proxy.dir.path().join("robots/shop.txt"),
        "User-agent: GPTBot\nDisallow: /elsewhere\n",
    )
    .expect("robots file rewritten");
    assert!(
        eventually(|| proxy.get(SHOP, "/elsewhere", GPTBOT).status == 403),
        "the new file was not picked up"
    );
    assert_eq!(proxy.get(SHOP, "/from-file", GPTBOT).status, 200);
}

/// A file missing at start stops `serve` (tests/it/validate_serve.rs); one that goes missing
/// later leaves the last copy read in force, and says why.
#[test]
fn a_robots_file_gone_after_start_keeps_the_last_copy() {
    let origin = Origin::start();
    let extra = "    robots:\n      source: file\n      path: robots/shop.txt\n      refresh: 1s\n";
    let proxy = Proxy::builder(&site(&origin, SHOP, extra))
        .files(&[(
            "robots/shop.txt",
            "User-agent: GPTBot\nDisallow: /from-file\n",
        )])
        .start();
    std::fs::remove_file(proxy.dir.path().join("robots/shop.txt")).expect("file removed");
    assert!(
        eventually(|| {
            let (_, json) = proxy.explain(SHOP, GPTBOT, "/");
            json["robots"]["last_error"]
                .as_str()
                .is_some_and(|error| error.contains("robots/shop.txt"))
        }),
        "the failed read was not noticed"
    );
    assert_eq!(proxy.get(SHOP, "/from-file", GPTBOT).status, 403);
    assert_eq!(proxy.get(SHOP, "/anything", GPTBOT).status, 200);
    assert_eq!(proxy.get(SHOP, "/from-file", BROWSER).status, 200);
}

#[test]
fn origin_robots_txt_200_is_fetched_and_enforced() {
    let origin = Origin::start();
    origin.robots(200, "User-agent: GPTBot\nDisallow: /members\n");
    let proxy = Proxy::start(&site(&origin, SHOP, ""));

    let blocked = proxy.get(SHOP, "/members/1", GPTBOT);
    assert_eq!(blocked.status, 403, "{}", blocked.text());
    assert!(blocked.text().contains("line 2"), "{}", blocked.text());
    assert_eq!(proxy.get(SHOP, "/news", GPTBOT).status, 200);

    let fetches: Vec<Received> = origin
        .received()
        .into_iter()
        .filter(Received::is_robots_fetch)
        .collect();
    assert!(!fetches.is_empty());
    assert_eq!(fetches[0].method, "GET");
    assert_eq!(fetches[0].target, "/robots.txt");
    assert_eq!(fetches[0].header("host"), Some(SHOP));
    let (_, json) = proxy.explain(SHOP, GPTBOT, "/members");
    assert_eq!(json["robots"]["http_status"], 200, "{json}");
    assert_eq!(json["robots"]["outcome"], "ok", "{json}");
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_robots_fetches_total",
            &[("origin", "shop"), ("outcome", "ok")]
        ),
        1.0
    );
}

#[test]
fn origin_robots_txt_at_a_configured_url() {
    let origin = Origin::start();
    origin.robots(200, "User-agent: *\nDisallow: /\n");
    origin.route(
        "/static/robots.txt",
        200,
        "User-agent: *\nDisallow: /static-rule\n",
    );
    let extra = "    robots:\n      url: /static/robots.txt\n";
    let proxy = Proxy::start(&site(&origin, SHOP, extra));
    assert_eq!(proxy.get(SHOP, "/static-rule", GPTBOT).status, 403);
    assert_eq!(proxy.get(SHOP, "/other", GPTBOT).status, 200);
    let targets: Vec<String> = origin
        .received()
        .into_iter()
        .filter(Received::is_robots_fetch)
        .map(|r| r.target)
        .collect();
    assert_eq!(targets, ["/static/robots.txt"]);
}

#[test]
fn origin_robots_txt_404_allows_everything() {
    let origin = Origin::start();
    origin.robots(404, "not found");
    let proxy = Proxy::start(&site(&origin, SHOP, ""));
    assert_eq!(proxy.get(SHOP, "/anything", GPTBOT).status, 200);
    assert_eq!(proxy.get(SHOP, "/", GENERIC_BOT).status, 200);
    let (_, json) = proxy.explain(SHOP, GPTBOT, "/anything");
    assert_eq!(json["decision"], "allowed", "{json}");
    assert_eq!(json["robots"]["state"], "allow_all", "{json}");
    assert_eq!(json["robots"]["http_status"], 404, "{json}");
}

#[test]
fn origin_robots_txt_500_without_a_copy_blocks_crawlers_but_not_browsers() {
    let origin = Origin::start();
    origin.robots(500, "oops");
    let proxy = Proxy::start(&site(&origin, SHOP, ""));
    for path in ["/", "/a", "/deep/path?q=1"] {
        let blocked = proxy.get(SHOP, path, GPTBOT);
        assert_eq!(blocked.status, 403, "{path}: {}", blocked.text());
        assert!(
            blocked.text().contains("http://shop.example/robots.txt"),
            "{}",
            blocked.text()
        );
        assert_eq!(proxy.get(SHOP, path, GENERIC_BOT).status, 403, "{path}");
        assert_eq!(proxy.get(SHOP, path, BROWSER).status, 200, "{path}");
    }
    // robots.txt itself stays reachable, so the crawler can learn the rules.
    assert_eq!(proxy.get(SHOP, "/robots.txt", GPTBOT).status, 500);
    let (_, json) = proxy.explain(SHOP, GPTBOT, "/");
    assert_eq!(json["robots"]["state"], "disallow_all", "{json}");
    assert_eq!(json["robots"]["http_status"], 500, "{json}");
    let metrics = proxy.metrics();
    assert_eq!(
        metric(
            &metrics,
            "robotsguard_robots_state",
            &[("origin", "shop"), ("state", "disallow_all")]
        ),
        1.0,
        "{metrics}"
    );
    // At least the first fetch (a retry may follow).
    assert!(
        metric(
            &metrics,
            "robotsguard_robots_fetches_total",
            &[("origin", "shop"), ("outcome", "unreachable")]
        ) >= 1.0,
        "{metrics}"
    );
}

#[test]
fn on_unreachable_allow_fails_open() {
    let origin = Origin::start();
    origin.robots(503, "down");
    let extra = "    robots:\n      on_unreachable: allow\n";
    let proxy = Proxy::start(&site(&origin, SHOP, extra));
    assert_eq!(proxy.get(SHOP, "/anything", GPTBOT).status, 200);
    let (_, json) = proxy.explain(SHOP, GPTBOT, "/anything");
    assert_eq!(json["robots"]["state"], "allow_all", "{json}");
}

#[test]
fn on_unreachable_allow_from_defaults() {
    let origin = Origin::start();
    origin.robots(500, "down");
    let body = format!(
        "defaults:\n  robots:\n    on_unreachable: allow\n{}",
        site(&origin, SHOP, "")
    );
    let proxy = Proxy::start(&body);
    assert_eq!(proxy.get(SHOP, "/anything", GPTBOT).status, 200);
}

#[test]
fn a_slow_robots_txt_times_out_and_counts_as_unreachable() {
    let origin = Origin::start();
    origin.route_delayed(
        "/robots.txt",
        200,
        "User-agent: *\nAllow: /\n",
        Duration::from_secs(3),
    );
    let extra = "    robots:\n      timeout: 300ms\n";
    let proxy = Proxy::start(&site(&origin, SHOP, extra));
    assert_eq!(proxy.get(SHOP, "/x", GPTBOT).status, 403);
    assert_eq!(proxy.get(SHOP, "/x", BROWSER).status, 200);
}

#[test]
fn a_5xx_after_a_good_copy_keeps_the_copy() {
    let origin = Origin::start();
    origin.robots(200, "User-agent: GPTBot\nDisallow: /kept\n");
    let extra = "    robots:\n      refresh: 1s\n";
    let proxy = Proxy::start(&site(&origin, SHOP, extra));
    assert_eq!(proxy.get(SHOP, "/kept", GPTBOT).status, 403);
    assert_eq!(proxy.get(SHOP, "/open", GPTBOT).status, 200);

    origin.robots(500, "broken");
    let before = origin.robots_fetches();
    assert!(
        eventually(|| origin.robots_fetches() >= before + 2),
        "robots.txt was not fetched again"
    );
    // Neither disallow-all nor allow-all: the last good rules still apply.
    assert_eq!(proxy.get(SHOP, "/kept", GPTBOT).status, 403);
    assert_eq!(proxy.get(SHOP, "/open", GPTBOT).status, 200);
    let (_, json) = proxy.explain(SHOP, GPTBOT, "/kept");
    assert_eq!(json["robots"]["state"], "conditional", "{json}");
    assert!(
        json["robots"]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("500")),
        "{json}"
    );

    // A new good copy replaces it.
    origin.robots(200, "User-agent: GPTBot\nDisallow: /open\n");
    assert!(
        eventually(|| proxy.get(SHOP, "/open", GPTBOT).status == 403),
        "the new robots.txt was not picked up"
    );
    assert_eq!(proxy.get(SHOP, "/kept", GPTBOT).status, 200);
}

#[test]
fn a_404_after_a_good_copy_allows_everything_once_a_second_fetch_confirms_it() {
    let origin = Origin::start();
    origin.robots(200, "User-agent: GPTBot\nDisallow: /\n");
    let extra = "    robots:\n      refresh: 1s\n";
    let proxy = Proxy::start(&site(&origin, SHOP, extra));
    assert_eq!(proxy.get(SHOP, "/x", GPTBOT).status, 403);
    origin.robots(404, "gone");
    let first_404 = Instant::now();
    let before = origin.robots_fetches();
    assert!(
        eventually(|| origin.robots_fetches() > before),
        "robots.txt was not fetched again"
    );
    // One 404 could be a WAF or a rate limit: the rules stay until it is confirmed.
    assert_eq!(proxy.get(SHOP, "/x", GPTBOT).status, 403);
    let (_, json) = proxy.explain(SHOP, GPTBOT, "/x");
    assert_eq!(json["robots"]["state"], "conditional", "{json}");
    let lifted = (0..1800).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        proxy.get(SHOP, "/x", GPTBOT).status == 200
    });
    assert!(lifted, "a confirmed 404 did not lift the rules");
    assert!(
        first_404.elapsed() >= Duration::from_secs(60),
        "lifted after {:?}, before a confirming fetch a minute later",
        first_404.elapsed()
    );
}
