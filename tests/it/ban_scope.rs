//! A ban behind a shared address (a NAT, an office, a load balancer missing from
//! `trusted_proxies`), through the real proxy: with `offenders.scope: crawlers` (the default) the
//! people and apps behind a banned address still reach the site while crawlers are refused; with
//! `address` everything is refused. Under either scope every browser request from the banned
//! address is counted (the metric and `/bans`), and the first one per ban is logged once.

use crate::support;

use std::time::Duration;

use support::{metric, Origin, Proxy, Request, BROWSER, GPTBOT};

/// The address every request comes from, as a trusted load balancer forwards it.
const NAT: &str = "203.0.113.44";
const APP: &str = "python-requests/2.32.3";
const BROWSERS: usize = 40;
const LOG_LINE: &str = "a browser request came from a banned address";

fn start(origin: &Origin, scope: &str) -> Proxy {
    let body = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n\
         origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    \
         robots: {{source: inline, text: \"User-agent: GPTBot\\nDisallow: /private\\n\"}}\n    \
         offenders: {{action: ban, scope: {scope}, strikes: 3, window: 1m, ban: 1h}}\n",
        origin.addr()
    );
    Proxy::start(&body)
}

fn from_nat(proxy: &Proxy, path: &str, user_agent: &str) -> u16 {
    proxy
        .send(
            &Request::get(path)
                .host("shop.example")
                .ua(user_agent)
                .header("X-Forwarded-For", NAT),
        )
        .status
}

/// Bans the NAT address: a crawler behind it keeps fetching what robots.txt disallows.
fn ban_the_nat(proxy: &Proxy) {
    for n in 0..3 {
        assert_eq!(from_nat(proxy, &format!("/private/{n}"), GPTBOT), 403);
    }
    let bans = proxy.admin_get("/bans?origin=shop").json();
    assert_eq!(bans["bans"][0]["client"], NAT, "{bans}");
    assert_eq!(bans["bans"][0]["browser_requests"], 0, "{bans}");
}

/// What the NAT's users and apps get from a banned address; and the counts.
fn people_behind_the_nat(proxy: &Proxy, want: u16) {
    for n in 0..BROWSERS {
        assert_eq!(from_nat(proxy, &format!("/page/{n}"), BROWSER), want);
    }
    assert_eq!(from_nat(proxy, "/api/cart", APP), want, "an app's library");
    assert_eq!(
        proxy.wait_metric(
            "robotsguard_banned_browser_requests_total",
            &[("origin", "shop")],
            BROWSERS as f64
        ),
        BROWSERS as f64,
        "every browser request, and no app's"
    );
    let bans = proxy.admin_get("/bans?origin=shop").json();
    assert_eq!(bans["bans"][0]["browser_requests"], BROWSERS, "{bans}");
    assert!(proxy.wait_log(LOG_LINE, 1, Duration::from_secs(5)));
    // Once per ban, however many follow.
    assert_eq!(proxy.stderr().matches(LOG_LINE).count(), 1);
}

#[test]
fn scope_crawlers_refuses_the_crawler_and_serves_the_people_behind_its_address() {
    let origin = Origin::start();
    let proxy = start(&origin, "crawlers");
    ban_the_nat(&proxy);
    people_behind_the_nat(&proxy, 200);
    // The crawler, any crawler, and a request that names nobody are refused.
    assert_eq!(from_nat(&proxy, "/page", GPTBOT), 403);
    assert_eq!(from_nat(&proxy, "/page", "Googlebot/2.1"), 403);
    assert_eq!(from_nat(&proxy, "/page", ""), 403);
    assert_eq!(from_nat(&proxy, "/robots.txt", GPTBOT), 200);
    assert_eq!(
        origin.proxied_to("/page/0").len(),
        1,
        "the browsers reached the origin"
    );
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_requests_total",
            &[("origin", "shop"), ("decision", "banned")]
        ),
        3.0
    );
}

#[test]
fn scope_address_refuses_everyone_behind_the_address_and_counts_the_browsers() {
    let origin = Origin::start();
    let proxy = start(&origin, "address");
    ban_the_nat(&proxy);
    people_behind_the_nat(&proxy, 403);
    assert!(origin.proxied_to("/page/0").is_empty());
    assert_eq!(from_nat(&proxy, "/robots.txt", BROWSER), 200);
    // Another address is not affected.
    let other = proxy.send(
        &Request::get("/page")
            .host("shop.example")
            .ua(BROWSER)
            .header("X-Forwarded-For", "203.0.113.45"),
    );
    assert_eq!(other.status, 200);
}
