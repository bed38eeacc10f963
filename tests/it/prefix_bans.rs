//! Bans and budgets for networks, not addresses (`offenders.prefix`, `crawl_delay.prefix`),
//! through the real proxy: IPv6 clients of one /64 (forwarded by a trusted proxy) share strikes,
//! a ban and a Crawl-delay budget, a client of another /64 does not, and IPv4 stays per address
//! by default; `/bans` shows the prefix and `DELETE /bans` takes an address or a prefix (one with
//! host bits set is refused, naming the network); with ban scope `crawlers` a browser behind a
//! banned prefix still passes and is counted; with the shared store, strikes from one /64 made on
//! two replicas add up to one ban of it on both.

use crate::support;

use std::thread;
use std::time::{Duration, Instant};

use support::redis::RedisServer;
use support::{metric, Origin, Proxy, Request, BROWSER};

const EXAMPLEBOT: &str = "Mozilla/5.0 (compatible; ExampleBot/1.0)";

/// The config of one origin with a 30 s Crawl-delay, `/private` disallowed and bans after 3
/// strikes; `extra` goes at the top level (a `state` section), `origin_extra` in the origin.
fn config(origin: &Origin, extra: &str, origin_extra: &str) -> String {
    format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n{extra}\
         crawlers:\n  extra:\n    - {{name: ExampleBot, tokens: [examplebot], pattern: ExampleBot, category: ai-training}}\n\
         origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    \
         robots: {{source: inline, text: \"User-agent: *\\nCrawl-delay: 30\\nDisallow: /private\\n\"}}\n    \
         crawl_delay: {{action: enforce}}\n{origin_extra}",
        origin.addr()
    )
}

fn from(proxy: &Proxy, client: &str, path: &str, user_agent: &str) -> support::Response {
    proxy.send(
        &Request::get(path)
            .host("shop.example")
            .ua(user_agent)
            .header("X-Forwarded-For", client),
    )
}

fn lift(proxy: &Proxy, client: &str) -> support::Response {
    let request = Request::new(
        "DELETE",
        &format!(
            "/bans?origin=shop&client={}",
            support::percent_encode(client)
        ),
    )
    .host(&proxy.admin.to_string());
    support::Conn::open(proxy.admin).send(&request)
}

fn banned_clients(proxy: &Proxy) -> Vec<String> {
    let bans = proxy.admin_get("/bans?origin=shop").json();
    bans["bans"]
        .as_array()
        .map(|bans| {
            bans.iter()
                .filter_map(|ban| ban["client"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn ipv6_clients_of_one_64_share_strikes_a_ban_and_a_budget_and_ipv4_stays_per_address() {
    let origin = Origin::start();
    let proxy = Proxy::start(&config(
        &origin,
        "",
        "    offenders: {action: ban, strikes: 3, window: 10m, ban: 1h}\n",
    ));
    // One strike from each of three addresses of one /64: the third bans the /64.
    for (n, client) in ["2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::3"]
        .iter()
        .enumerate()
    {
        assert_eq!(
            from(&proxy, client, &format!("/private/{n}"), EXAMPLEBOT).status,
            403
        );
    }
    assert_eq!(banned_clients(&proxy), ["2001:db8:1:2::/64"]);
    let refused = from(&proxy, "2001:db8:1:2:abcd::9", "/page", EXAMPLEBOT);
    assert_eq!(refused.status, 403, "another address of the banned /64");
    assert!(
        refused.text().contains("2001:db8:1:2::/64 is banned"),
        "{}",
        refused.text()
    );
    assert_eq!(
        from(&proxy, "2001:db8:1:3::1", "/page", EXAMPLEBOT).status,
        200,
        "the next /64 is another client"
    );

    // One Crawl-delay budget per /64.
    assert_eq!(
        from(&proxy, "2001:db8:9:9::1", "/a", EXAMPLEBOT).status,
        200
    );
    let limited = from(&proxy, "2001:db8:9:9::2", "/b", EXAMPLEBOT);
    assert_eq!(limited.status, 429, "the same /64's budget");
    assert!(limited.header("retry-after").is_some());
    assert_eq!(
        from(&proxy, "2001:db8:9:a::1", "/c", EXAMPLEBOT).status,
        200
    );

    // IPv4 keeps one budget and one strike count per address.
    assert_eq!(from(&proxy, "203.0.113.1", "/a", EXAMPLEBOT).status, 200);
    assert_eq!(from(&proxy, "203.0.113.2", "/a", EXAMPLEBOT).status, 200);
    for n in 1..=3 {
        let client = format!("203.0.113.{n}");
        assert_eq!(from(&proxy, &client, "/private/x", EXAMPLEBOT).status, 403);
    }
    assert_eq!(banned_clients(&proxy), ["2001:db8:1:2::/64"]);

    // The console (open on loopback without tokens) shows the network, and its Lift form names it.
    let page = support::Conn::open(proxy.admin)
        .send(&Request::get("/ui/bans").host(&proxy.admin.to_string()))
        .text();
    assert!(page.contains("<code>2001:db8:1:2::/64</code>"), "{page}");
    assert!(
        page.contains("name=\"client\" value=\"2001:db8:1:2::/64\""),
        "{page}"
    );

    // A prefix that is not a network boundary is refused, naming the network; an address of
    // the /64 or the /64 itself lifts the ban.
    let odd = lift(&proxy, "2001:db8:1:2::5/64");
    assert_eq!(odd.status, 400, "{}", odd.text());
    assert!(
        odd.text().contains("did you mean 2001:db8:1:2::/64"),
        "{}",
        odd.text()
    );
    let lifted = lift(&proxy, "2001:db8:1:2::77");
    assert_eq!(lifted.status, 200, "{}", lifted.text());
    assert_eq!(lifted.json()["lifted"]["client"], "2001:db8:1:2::/64");
    assert_eq!(
        lift(&proxy, "2001:db8:1:2::/64").status,
        404,
        "already lifted"
    );
    assert!(banned_clients(&proxy).is_empty());
    assert_eq!(
        from(&proxy, "2001:db8:1:2::1", "/page", EXAMPLEBOT).status,
        200
    );
}

#[test]
fn a_browser_behind_a_banned_prefix_passes_and_is_counted_and_a_wider_prefix_bans_wider() {
    let origin = Origin::start();
    let proxy = Proxy::start(&config(
        &origin,
        "",
        "    offenders: {action: ban, scope: crawlers, strikes: 2, window: 10m, ban: 1h, prefix: {ipv4: 24, ipv6: 48}}\n",
    ));
    assert_eq!(
        from(&proxy, "2001:db8:5:1::1", "/private/a", EXAMPLEBOT).status,
        403
    );
    assert_eq!(
        from(&proxy, "2001:db8:5:2::1", "/private/b", EXAMPLEBOT).status,
        403
    );
    assert_eq!(banned_clients(&proxy), ["2001:db8:5::/48"]);
    assert_eq!(
        from(&proxy, "2001:db8:5:ffff::1", "/page", EXAMPLEBOT).status,
        403
    );
    assert_eq!(
        from(&proxy, "2001:db8:5:7::7", "/page", BROWSER).status,
        200,
        "a browser behind the banned prefix"
    );
    assert_eq!(
        proxy.wait_metric(
            "robotsguard_banned_browser_requests_total",
            &[("origin", "shop")],
            1.0
        ),
        1.0
    );
    let bans = proxy.admin_get("/bans?origin=shop").json();
    assert_eq!(bans["bans"][0]["browser_requests"], 1, "{bans}");
    assert_eq!(
        from(&proxy, "2001:db8:6::1", "/page", EXAMPLEBOT).status,
        200
    );
    // IPv4 by /24 here: two addresses of 198.51.100.0/24 strike once each.
    assert_eq!(
        from(&proxy, "198.51.100.1", "/private/a", EXAMPLEBOT).status,
        403
    );
    assert_eq!(
        from(&proxy, "198.51.100.200", "/private/b", EXAMPLEBOT).status,
        403
    );
    let mut clients = banned_clients(&proxy);
    clients.sort();
    assert_eq!(clients, ["198.51.100.0/24", "2001:db8:5::/48"]);
    assert_eq!(
        from(&proxy, "198.51.100.99", "/page", EXAMPLEBOT).status,
        403
    );
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_banned_clients",
            &[("origin", "shop")]
        ),
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

#[test]
fn with_the_shared_store_strikes_of_one_64_on_two_replicas_ban_it_on_both() {
    let origin = Origin::start();
    let redis = RedisServer::start();
    let state = format!(
        "state:\n  backend: redis\n  redis: {{url: \"{}\", prefix: \"rg-prefix:\", timeout: 1s}}\n",
        redis.url()
    );
    let body = config(
        &origin,
        &state,
        "    offenders: {action: ban, strikes: 3, window: 10m, ban: 1h}\n",
    );
    let a = Proxy::start(&body);
    let b = Proxy::start(&body);
    for proxy in [&a, &b] {
        assert!(
            wait_for(Duration::from_secs(10), || metric(
                &proxy.metrics(),
                "robotsguard_state_backend_up",
                &[]
            ) == 1.0),
            "the store is reachable: {}",
            proxy.stderr()
        );
    }
    assert_eq!(
        from(&a, "2001:db8:7:1::1", "/private/a", EXAMPLEBOT).status,
        403
    );
    assert_eq!(
        from(&b, "2001:db8:7:1::2", "/private/b", EXAMPLEBOT).status,
        403
    );
    assert_eq!(
        redis.command(&["GET", "rg-prefix:strikes:shop:2001:db8:7:1::/64"]),
        "2",
        "one count for the /64 in the store"
    );
    assert_eq!(
        from(&a, "2001:db8:7:1::3", "/private/c", EXAMPLEBOT).status,
        403
    );
    // Asked through `/bans`: a request that came before the ban reached the other replica would
    // be admitted and spend the /64's Crawl-delay budget.
    assert!(
        wait_for(Duration::from_secs(10), || banned_clients(&b)
            == ["2001:db8:7:1::/64"]),
        "the ban reaches the other replica"
    );
    assert_eq!(
        from(&b, "2001:db8:7:1:1::1", "/page", EXAMPLEBOT).status,
        403,
        "the other replica refuses the banned /64"
    );
    assert_eq!(from(&b, "2001:db8:7:2::1", "/page", EXAMPLEBOT).status, 200);
    // Lifted by a prefix on one replica: lifted on both.
    assert_eq!(lift(&b, "2001:db8:7:1::/64").status, 200);
    assert_eq!(
        redis.command(&["HEXISTS", "rg-prefix:bans", "2001:db8:7:1::/64 shop"]),
        "0"
    );
    assert!(
        wait_for(Duration::from_secs(10), || banned_clients(&a).is_empty()),
        "lifted on the other replica"
    );
    assert_eq!(from(&a, "2001:db8:7:1::9", "/page", EXAMPLEBOT).status, 200);
    // One Crawl-delay budget for the /64 in the store: another address of it, on the other
    // replica, waits.
    assert_eq!(
        redis.command(&[
            "EXISTS",
            "rg-prefix:delay:shop:examplebot:2001:db8:7:1::/64"
        ]),
        "1"
    );
    assert_eq!(
        from(&b, "2001:db8:7:1:beef::1", "/page", EXAMPLEBOT).status,
        429
    );
}
