//! A robots.txt change forced live: `POST /robots/refresh?origin=NAME` on the admin listener
//! fetches it at once and answers the outcome (the other admin paths stay read-only), and
//! SIGHUP fetches every origin's robots.txt again besides reloading the config. Without either,
//! the change would wait for the refresh interval (an hour here).

use crate::support;

use std::time::{Duration, Instant};

use support::{site, Conn, Origin, Proxy, Request, GPTBOT};

const SHOP: &str = "shop.example";
const TOKEN: &str = "s3cret-admin-token";

/// Robots fetched from the origin, refreshed hourly.
fn body(origin: &Origin) -> String {
    site(origin, SHOP, "    robots: {source: origin, refresh: 1h}\n")
}

fn admin(proxy: &Proxy, method: &str, target: &str, token: Option<&str>) -> support::Response {
    let mut request = Request::new(method, target).host(&proxy.admin.to_string());
    if let Some(token) = token {
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    if method == "POST" {
        request = request.body(b"");
    }
    Conn::open(proxy.admin).send(&request)
}

/// A refresh of `shop` with the admin token, waiting out the 5 s between two refreshes of one
/// origin (`429` with `Retry-After`) within 15 s.
fn refresh_shop(proxy: &Proxy) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let answer = admin(proxy, "POST", "/robots/refresh?origin=shop", Some(TOKEN));
        if answer.status != 429 {
            assert_eq!(answer.status, 200, "{}", answer.text());
            return answer.json();
        }
        assert!(answer.header("retry-after").is_some());
        assert!(Instant::now() < deadline, "still 429");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn a_post_refreshes_one_origins_robots_txt_now_and_says_what_came_of_it() {
    let origin = Origin::start();
    origin.robots(200, "User-agent: GPTBot\nDisallow: /old\n");
    let proxy = Proxy::builder(&body(&origin)).admin_token(TOKEN).start();
    assert_eq!(proxy.get(SHOP, "/new", GPTBOT).status, 200);
    origin.robots(200, "User-agent: GPTBot\nDisallow: /old\nDisallow: /new\n");

    let refresh = "/robots/refresh?origin=shop";
    assert_eq!(admin(&proxy, "POST", refresh, None).status, 401);
    let answer = admin(&proxy, "POST", refresh, Some(TOKEN));
    assert_eq!(answer.status, 200, "{}", answer.text());
    let outcome = answer.json();
    assert_eq!(outcome["origin"], "shop", "{outcome}");
    assert_eq!(outcome["outcome"], "ok", "{outcome}");
    assert_eq!(outcome["changed"], true, "{outcome}");
    assert_eq!(outcome["state"], "conditional", "{outcome}");
    assert_eq!(outcome["rules"], 2, "{outcome}");
    assert_eq!(outcome["http_status"], 200, "{outcome}");
    assert!(
        crate::offenders::is_rfc3339(outcome["fetched_at"].as_str().unwrap_or("")),
        "{outcome}"
    );
    assert_eq!(outcome["error"], serde_json::Value::Null, "{outcome}");
    // In force as soon as the answer came.
    assert_eq!(proxy.get(SHOP, "/new", GPTBOT).status, 403);
    // Again (once the 5 s between two refreshes of an origin are over): nothing changed.
    let again = refresh_shop(&proxy);
    assert_eq!(again["changed"], false, "{again}");

    // A failure is an outcome too: the last good copy stays, and the error is said.
    origin.robots(503, "busy");
    let failed = refresh_shop(&proxy);
    assert_eq!(failed["outcome"], "unreachable", "{failed}");
    assert_eq!(failed["changed"], false, "{failed}");
    assert!(
        failed["error"].as_str().is_some_and(|e| e.contains("503")),
        "{failed}"
    );
    assert_eq!(proxy.get(SHOP, "/new", GPTBOT).status, 403);

    let unknown = admin(&proxy, "POST", "/robots/refresh?origin=nope", Some(TOKEN));
    assert_eq!(unknown.status, 404, "{}", unknown.text());
    let no_origin = admin(&proxy, "POST", "/robots/refresh", Some(TOKEN));
    assert_eq!(no_origin.status, 400, "{}", no_origin.text());
}

#[test]
fn post_is_answered_on_the_refresh_path_only() {
    let origin = Origin::start();
    origin.robots(200, "User-agent: *\nAllow: /\n");
    let proxy = Proxy::start(&body(&origin));
    let get = admin(&proxy, "GET", "/robots/refresh?origin=shop", None);
    assert_eq!(get.status, 405);
    assert_eq!(get.header("allow"), Some("POST"));
    for path in [
        "/metrics",
        "/explain?host=shop.example",
        "/bans",
        "/robots?origin=shop",
    ] {
        let post = admin(&proxy, "POST", path, None);
        assert_eq!(post.status, 405, "{path}");
        assert!(
            post.header("allow")
                .is_some_and(|allow| allow.starts_with("GET, HEAD")),
            "{path}"
        );
    }
    let delete = admin(&proxy, "DELETE", "/robots/refresh?origin=shop", None);
    assert_eq!(delete.status, 405);
}

#[test]
fn sighup_fetches_every_origins_robots_txt_again() {
    let shop = Origin::start();
    shop.robots(200, "User-agent: GPTBot\nDisallow: /old\n");
    let blog = Origin::start();
    blog.robots(200, "User-agent: GPTBot\nDisallow: /old\n");
    let body = format!(
        "origins:\n\
         \x20 - {{name: shop, hosts: [shop.example], upstream: \"{}\", robots: {{source: origin, refresh: 1h}}}}\n\
         \x20 - {{name: blog, hosts: [blog.example], upstream: \"{}\", robots: {{source: origin, refresh: 1h}}}}\n",
        shop.addr(),
        blog.addr()
    );
    let proxy = support::live::Launch::new(&body).start();
    assert!(proxy.wait_log("config reload: watching", 1, Duration::from_secs(10)));
    for origin in [&shop, &blog] {
        origin.robots(200, "User-agent: GPTBot\nDisallow: /new\n");
    }
    assert_eq!(proxy.get("shop.example", "/new", GPTBOT).status, 200);
    proxy.signal("HUP");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(proxy.get("shop.example", "/new", GPTBOT).status == 403
        && proxy.get("blog.example", "/new", GPTBOT).status == 403)
    {
        assert!(
            Instant::now() < deadline,
            "SIGHUP did not bring the new robots.txt in:\n{}",
            proxy.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(proxy.wait_log(
        "robots.txt fetched again for every origin",
        1,
        Duration::from_secs(5)
    ));
    assert!(proxy.stderr().contains("config reloaded"));
}

#[test]
fn an_origin_that_keeps_failing_is_said_once_not_at_every_retry() {
    // Nothing listens at the upstream: every fetch fails at once and is retried after 10 s.
    let closed = support::free_port();
    let proxy = Proxy::start(&format!(
        "origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"127.0.0.1:{closed}\"\n"
    ));
    let attempts = || {
        support::metric(
            &proxy.metrics(),
            "robotsguard_robots_fetches_total",
            &[("origin", "shop"), ("outcome", "unreachable")],
        )
    };
    let deadline = Instant::now() + Duration::from_secs(25);
    while attempts() < 2.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(attempts() >= 2.0, "retried: {}", attempts());
    let warnings: Vec<String> = proxy
        .stderr()
        .lines()
        .filter(|line| line.contains("WARN") && line.contains("robots.txt"))
        .map(str::to_string)
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].contains("said again at most every 10 minutes"),
        "{}",
        warnings[0]
    );
}
