//! The admin listener of a running proxy: health, readiness, metrics with bounded labels,
//! `/explain` and `/robots`.

use crate::support;

use std::time::Duration;

use support::*;

const SHOP: &str = "shop.example";

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n\nUser-agent: GPTBot\nDisallow: /\n";

fn shop() -> (Origin, Proxy) {
    let origin = Origin::start();
    let proxy = Proxy::start(&site(&origin, SHOP, &inline_robots(ROBOTS)));
    (origin, proxy)
}

#[test]
fn health_and_readiness() {
    let (_origin, proxy) = shop();
    let health = proxy.admin_get("/healthz");
    assert_eq!((health.status, health.text().as_str()), (200, "ok\n"));
    let ready = proxy.admin_get("/readyz");
    assert_eq!((ready.status, ready.text().as_str()), (200, "ready\n"));
    let unknown = proxy.admin_get("/nope");
    assert_eq!(unknown.status, 404);
    // The admin endpoints are not served on the proxy listener.
    let proxied = proxy.get(SHOP, "/metrics", BROWSER);
    assert_eq!(proxied.text(), "origin: /metrics");
}

#[test]
fn readyz_waits_for_the_first_robots_txt_outcome() {
    let origin = Origin::start();
    origin.route_delayed(
        "/robots.txt",
        200,
        "User-agent: *\nDisallow: /\n",
        Duration::from_millis(1500),
    );
    let proxy = Proxy::builder(&site(&origin, SHOP, "")).unready().start();
    let waiting = proxy.admin_get("/readyz");
    assert_eq!(waiting.status, 503, "{}", waiting.text());
    assert!(waiting.text().contains("shop"), "{}", waiting.text());
    // Health does not depend on robots.txt.
    assert_eq!(proxy.admin_get("/healthz").status, 200);

    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut status = 503;
    for _ in 0..200 {
        status = proxy.admin_status("/readyz").unwrap_or(0);
        if status == 200 || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(status, 200);
    assert_eq!(proxy.get(SHOP, "/x", GPTBOT).status, 403);
}

#[test]
fn readyz_names_pending_origins_only_to_token_holders() {
    let origin = Origin::start();
    origin.route_delayed(
        "/robots.txt",
        200,
        "User-agent: *\nDisallow: /\n",
        Duration::from_secs(3),
    );
    let proxy = Proxy::builder(&site(&origin, SHOP, ""))
        .unready()
        .admin_token("s3cret-0123456789\n")
        .start();
    let anonymous =
        Conn::open(proxy.admin).send(&Request::get("/readyz").host(&proxy.admin.to_string()));
    assert_eq!(anonymous.status, 503, "{}", anonymous.text());
    assert!(!anonymous.text().contains("shop"), "{}", anonymous.text());
    let holder = Conn::open(proxy.admin).send(
        &Request::get("/readyz")
            .host(&proxy.admin.to_string())
            .header("Authorization", "Bearer s3cret-0123456789"),
    );
    assert_eq!(holder.status, 503, "{}", holder.text());
    assert!(holder.text().contains("shop"), "{}", holder.text());
}

#[test]
fn requests_are_counted_by_origin_crawler_category_and_decision() {
    let (_origin, proxy) = shop();
    assert_eq!(proxy.get(SHOP, "/a", GPTBOT).status, 403);
    assert_eq!(proxy.get(SHOP, "/b", GPTBOT).status, 403);
    assert_eq!(proxy.get(SHOP, "/c", BROWSER).status, 200);
    assert_eq!(proxy.get(SHOP, "/private", GENERIC_BOT).status, 403);
    assert_eq!(proxy.get(SHOP, "/public", GENERIC_BOT).status, 200);
    assert_eq!(proxy.get("evil.example", "/", GPTBOT).status, 421);

    let name = "robotsguard_requests_total";
    let gptbot = [
        ("origin", "shop"),
        ("crawler", "GPTBot"),
        ("category", "ai-training"),
        ("decision", "blocked"),
    ];
    assert_eq!(proxy.wait_metric(name, &gptbot, 2.0), 2.0);
    // Wait for all five routed requests to be counted before reading the rest.
    assert_eq!(
        proxy.wait_metric(name, &[], 5.0),
        5.0,
        "{}",
        proxy.metrics()
    );
    let metrics = proxy.metrics();
    let browser = [
        ("origin", "shop"),
        ("crawler", "none"),
        ("category", "none"),
        ("decision", "pass"),
    ];
    assert_eq!(metric(&metrics, name, &browser), 1.0, "{metrics}");
    let other_blocked = [("crawler", "other"), ("decision", "blocked")];
    assert_eq!(metric(&metrics, name, &other_blocked), 1.0, "{metrics}");
    let other_allowed = [("crawler", "other"), ("decision", "allowed")];
    assert_eq!(metric(&metrics, name, &other_allowed), 1.0, "{metrics}");

    // Labels are bounded: configured origin names and catalogue names only.
    for (labels, _) in samples(&metrics, name) {
        let crawler = labels.get("crawler").map(String::as_str).unwrap_or("");
        assert!(
            ["GPTBot", "none", "other"].contains(&crawler),
            "unexpected crawler label {crawler:?}"
        );
        assert_eq!(labels.get("origin").map(String::as_str), Some("shop"));
    }
    assert!(!metrics.contains("SomethingCrawler"), "{metrics}");
    assert!(!metrics.contains("evil.example"), "{metrics}");
}

#[test]
fn a_bot_named_only_in_robots_txt_is_counted_as_other() {
    let origin = Origin::start();
    let proxy = Proxy::start(&site(
        &origin,
        SHOP,
        &inline_robots("User-agent: ZorgBot\nDisallow: /z\n"),
    ));
    assert_eq!(proxy.get(SHOP, "/z", ZORGBOT).status, 403);
    let labels = [
        ("origin", "shop"),
        ("crawler", "other"),
        ("category", "other"),
        ("decision", "blocked"),
    ];
    assert_eq!(
        proxy.wait_metric("robotsguard_requests_total", &labels, 1.0),
        1.0
    );
    let metrics = proxy.metrics();
    assert!(!metrics.contains("ZorgBot"), "{metrics}");
    assert!(!metrics.contains("Mozilla"), "{metrics}");
}

#[test]
fn metrics_describe_the_robots_txt_in_force() {
    let (_origin, proxy) = shop();
    // Published by the refresher as it starts, which may be a moment after `/readyz`.
    let conditional = [("origin", "shop"), ("state", "conditional")];
    assert_eq!(
        proxy.wait_metric("robotsguard_robots_state", &conditional, 1.0),
        1.0
    );
    let metrics = proxy.metrics();
    let state = |state: &str| {
        metric(
            &metrics,
            "robotsguard_robots_state",
            &[("origin", "shop"), ("state", state)],
        )
    };
    assert_eq!(state("conditional"), 1.0, "{metrics}");
    assert_eq!(state("allow_all"), 0.0, "{metrics}");
    assert_eq!(state("disallow_all"), 0.0, "{metrics}");
    assert_eq!(
        metric(&metrics, "robotsguard_robots_rules", &[("origin", "shop")]),
        2.0,
        "{metrics}"
    );
    assert_eq!(
        metric(&metrics, "robotsguard_robots_bytes", &[("origin", "shop")]),
        ROBOTS.len() as f64,
        "{metrics}"
    );
    assert_eq!(
        metric(&metrics, "robotsguard_build_info", &[]),
        1.0,
        "{metrics}"
    );
}

#[test]
fn explain_reports_decision_crawler_group_and_rule() {
    let (origin, proxy) = shop();
    let (status, json) = proxy.explain(SHOP, GPTBOT, "/anything");
    assert_eq!(status, 200, "{json}");
    assert_eq!(json["decision"], "blocked", "{json}");
    assert_eq!(json["origin"], "shop", "{json}");
    assert_eq!(json["mode"], "enforce", "{json}");
    assert_eq!(json["crawler"]["name"], "GPTBot", "{json}");
    assert_eq!(json["crawler"]["category"], "ai-training", "{json}");
    assert!(
        json["group"]
            .as_str()
            .is_some_and(|g| g.eq_ignore_ascii_case("gptbot")),
        "{json}"
    );
    assert_eq!(json["rule"]["line"], 5, "{json}");
    assert_eq!(json["rule"]["directive"], "Disallow", "{json}");
    assert_eq!(json["rule"]["pattern"], "/", "{json}");
    assert_eq!(json["robots"]["state"], "conditional", "{json}");

    let (_, json) = proxy.explain(SHOP, GENERIC_BOT, "/private/x");
    assert_eq!(json["decision"], "blocked", "{json}");
    assert_eq!(json["group"], "*", "{json}");
    assert_eq!(json["rule"]["line"], 2, "{json}");

    let (_, json) = proxy.explain(SHOP, GENERIC_BOT, "/public");
    assert_eq!(json["decision"], "allowed", "{json}");
    assert!(json["rule"].is_null(), "{json}");

    let (_, json) = proxy.explain(SHOP, BROWSER, "/private");
    assert_eq!(json["decision"], "pass", "{json}");
    assert!(json["crawler"].is_null(), "{json}");

    let (status, json) = proxy.explain("evil.example", GPTBOT, "/");
    assert_eq!(status, 404, "{json}");
    assert_eq!(json["decision"], "unknown_host", "{json}");

    let missing = proxy.admin_get("/explain?ua=GPTBot");
    assert_eq!(missing.status, 400, "{}", missing.text());

    // Explaining is not requesting: nothing reached the origin.
    assert!(origin.proxied().is_empty());
}

#[test]
fn explain_agrees_with_the_proxy_on_path_spellings() {
    let (_origin, proxy) = shop();
    for path in ["/private", "/%70rivate", "/a/../private", "//private"] {
        let (_, json) = proxy.explain(SHOP, GENERIC_BOT, path);
        assert_eq!(json["decision"], "blocked", "{path}: {json}");
    }
    let (_, json) = proxy.explain(SHOP, GENERIC_BOT, "/PRIVATE");
    assert_eq!(json["decision"], "allowed", "{json}");
}

#[test]
fn admin_robots_shows_the_copy_in_force() {
    let (_origin, proxy) = shop();
    let response = proxy.admin_get("/robots?origin=shop");
    assert_eq!(response.status, 200);
    assert_eq!(response.text(), ROBOTS);
    assert_eq!(proxy.admin_get("/robots?origin=nope").status, 404);
    assert_eq!(proxy.admin_get("/robots").status, 400);
}

#[test]
fn the_admin_listener_answers_get_and_head_only() {
    let (_origin, proxy) = shop();
    for method in ["POST", "DELETE", "PUT", "PATCH"] {
        for path in ["/healthz", "/metrics", "/explain?host=shop.example"] {
            let answer = raw(
                proxy.admin,
                format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
                    .as_bytes(),
            )
            .expect("an answer");
            assert_eq!(answer.status, 405, "{method} {path}");
            assert_eq!(answer.header("allow"), Some("GET, HEAD"));
        }
    }
    let head = Conn::open(proxy.admin)
        .send(&Request::new("HEAD", "/healthz").host(&proxy.admin.to_string()));
    assert_eq!((head.status, head.body.len()), (200, 0));
}

#[test]
fn an_admin_token_guards_everything_but_health() {
    let origin = Origin::start();
    let proxy = Proxy::builder(&site(&origin, SHOP, ""))
        .admin_token("s3cret-token-0123456789\n")
        .start();
    let ask = |path: &str, authorization: Option<&str>| {
        let mut request = Request::get(path).host(&proxy.admin.to_string());
        if let Some(value) = authorization {
            request = request.header("Authorization", value);
        }
        Conn::open(proxy.admin).send(&request)
    };
    assert_eq!(ask("/healthz", None).status, 200);
    assert_eq!(ask("/readyz", None).status, 200);
    for path in [
        "/metrics",
        "/explain?host=shop.example&ua=GPTBot&path=/",
        "/robots?origin=shop",
    ] {
        let refused = ask(path, None);
        assert_eq!(refused.status, 401, "{path}");
        assert!(refused
            .header("www-authenticate")
            .is_some_and(|v| v.starts_with("Bearer")));
        assert_eq!(ask(path, Some("Bearer wrong")).status, 401, "{path}");
        assert_eq!(
            ask(path, Some("Basic czNjcmV0LXRva2Vu")).status,
            401,
            "{path}"
        );
        assert_eq!(
            ask(path, Some("Bearer s3cret-token-0123456789")).status,
            200,
            "{path}"
        );
    }
    // A rotated secret applies without a restart.
    let token_file = proxy.dir.path().join("admin-token");
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&token_file, "rotated-token-0123456789").expect("token rewritten");
    let rotated = (0..50).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        ask("/metrics", Some("Bearer rotated-token-0123456789")).status == 200
    });
    assert!(rotated, "the new token was not accepted");
    assert_eq!(
        ask("/metrics", Some("Bearer s3cret-token-0123456789")).status,
        401
    );
}

#[test]
fn explain_shows_the_client_the_canonical_path_and_every_crawler_named() {
    let (_origin, proxy) = shop();
    let ua = percent_encode("Googlebot/2.1 GPTBot/1.2");
    let answer = proxy.admin_get(&format!(
        "/explain?host=shop.example&ua={ua}&path=/public/.%252Fx&client=203.0.113.7"
    ));
    assert_eq!(answer.status, 200, "{}", answer.text());
    let json = answer.json();
    assert_eq!(json["client"], "203.0.113.7");
    assert_eq!(json["forwarded_path"], "/public/x");
    assert_eq!(json["decision"], "blocked");
    assert_eq!(json["crawler"]["name"], "GPTBot", "{json}");
    assert_eq!(
        json["also_named"],
        serde_json::json!(["Googlebot"]),
        "{json}"
    );
    let bad = proxy.admin_get("/explain?host=shop.example&client=not-an-address");
    assert_eq!(bad.status, 400);
}
