//! Repeat offenders, through the real proxy (memory state): strikes within the window ban the
//! address on the origin (403 everywhere but /robots.txt, `Retry-After`), the ban ends or is
//! lifted through the admin endpoint, a rule younger than 24 hours does not strike, and `report`
//! bans nothing.

use crate::support;

use std::time::{Duration, Instant};

use support::{metric, Origin, Proxy, Request, BROWSER};

const EXAMPLEBOT: &str = "Mozilla/5.0 (compatible; ExampleBot/1.0)";

fn start(origin: &Origin, robots: &str, offenders: &str) -> Proxy {
    let body = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n\
         crawlers:\n  extra:\n    - {{name: ExampleBot, tokens: [examplebot], pattern: ExampleBot, category: ai-training}}\n\
         origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    \
         robots: {robots}\n    offenders: {offenders}\n",
        origin.addr()
    );
    Proxy::builder(&body)
        .files(&[("robots.txt", "User-agent: *\nDisallow: /other\n")])
        .start()
}

fn from(proxy: &Proxy, client: &str, path: &str, user_agent: &str) -> support::Response {
    proxy.send(
        &Request::get(path)
            .host("shop.example")
            .ua(user_agent)
            .header("X-Forwarded-For", client),
    )
}

/// Rewrites the running proxy's config with `from` replaced by `to`, and waits for its first
/// reload to succeed.
fn reload_replacing(proxy: &Proxy, from: &str, to: &str) {
    let current = std::fs::read_to_string(proxy.config_path()).expect("config readable");
    let changed = current.replace(from, to);
    assert_ne!(changed, current, "`{from}` is in the config");
    proxy.replace_config(&changed);
    assert_eq!(
        proxy.wait_reloads("success", 1.0),
        1.0,
        "{}",
        proxy.stderr()
    );
}

/// `2026-05-01T12:00:00Z`: RFC 3339 in UTC, to the second.
pub fn is_rfc3339(text: &str) -> bool {
    let bytes = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        bytes
            .get(range)
            .is_some_and(|part| part.iter().all(u8::is_ascii_digit))
    };
    bytes.len() == 20
        && digits(0..4)
        && digits(5..7)
        && digits(8..10)
        && digits(11..13)
        && digits(14..16)
        && digits(17..19)
        && &bytes[4..5] == b"-"
        && &bytes[7..8] == b"-"
        && &bytes[10..11] == b"T"
        && &bytes[13..14] == b":"
        && &bytes[16..17] == b":"
        && &bytes[19..20] == b"Z"
}

const INLINE: &str = "{source: inline, text: \"User-agent: *\\nDisallow: /private\\n\"}";

#[test]
fn strikes_ban_the_address_until_the_ban_ends() {
    let origin = Origin::start();
    let proxy = start(
        &origin,
        INLINE,
        "{action: ban, strikes: 3, window: 1m, ban: 2s}",
    );
    let client = "203.0.113.50";
    for n in 0..3 {
        assert_eq!(
            from(&proxy, client, &format!("/private/{n}"), EXAMPLEBOT).status,
            403
        );
    }
    let banned_at = Instant::now();
    let refused = from(&proxy, client, "/public", EXAMPLEBOT);
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(refused.text().contains("banned"), "{}", refused.text());
    // Rounded up: a client that comes back after it finds the ban over.
    assert_eq!(refused.header("retry-after"), Some("2"));
    // Any crawler, and a request without a User-Agent, is refused; a browser behind the same
    // address is not (`scope: crawlers`); robots.txt stays readable; other addresses are not
    // affected.
    assert_eq!(from(&proxy, client, "/public", "").status, 403);
    assert_eq!(from(&proxy, client, "/public", BROWSER).status, 200);
    assert_eq!(from(&proxy, client, "/robots.txt", EXAMPLEBOT).status, 200);
    assert_eq!(
        from(&proxy, "203.0.113.51", "/public", EXAMPLEBOT).status,
        200
    );
    assert!(
        origin.proxied_to("/public").len() == 2,
        "the browser's request and the other address's"
    );

    let bans = proxy.admin_get("/bans?origin=shop").json();
    assert_eq!(bans["bans"][0]["client"], client, "{bans}");
    assert_eq!(bans["bans"][0]["strikes"], 3, "{bans}");
    assert_eq!(bans["bans"][0]["browser_requests"], 1, "{bans}");
    // Times as RFC 3339 (UTC, to the second), and the seconds left as Retry-After counts them.
    for key in ["since", "until"] {
        let time = bans["bans"][0][key].as_str().unwrap_or_default();
        assert!(is_rfc3339(time), "{key}: {bans}");
    }
    assert!(
        (1..=2).contains(&bans["bans"][0]["remaining_seconds"].as_u64().unwrap_or(0)),
        "{bans}"
    );
    assert_eq!(proxy.admin_get("/bans").json()["bans"][0]["client"], client);
    assert_eq!(proxy.admin_get("/bans?origin=nope").status, 404);
    let (_, explain) = proxy.explain_from("shop.example", EXAMPLEBOT, "/public", client);
    assert_eq!(explain["ban"]["client"], client, "{explain}");
    let metrics = proxy.metrics();
    assert_eq!(
        metric(&metrics, "robotsguard_bans_total", &[("origin", "shop")]),
        1.0
    );
    assert_eq!(
        metric(
            &metrics,
            "robotsguard_banned_clients",
            &[("origin", "shop")]
        ),
        1.0
    );
    assert_eq!(
        metric(
            &metrics,
            "robotsguard_requests_total",
            &[("origin", "shop"), ("decision", "banned")]
        ),
        2.0
    );

    // The ban ends by itself, and stops being counted though the address has not come back.
    std::thread::sleep(
        Duration::from_secs(2).saturating_sub(banned_at.elapsed()) + Duration::from_millis(100),
    );
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_banned_clients",
            &[("origin", "shop")]
        ),
        0.0
    );
    assert_eq!(from(&proxy, client, "/public", EXAMPLEBOT).status, 200);
    assert_eq!(
        proxy.admin_get("/bans?origin=shop").json()["bans"],
        serde_json::json!([])
    );
}

#[test]
fn a_ban_can_be_lifted_and_report_bans_nothing() {
    let origin = Origin::start();
    let proxy = start(
        &origin,
        INLINE,
        "{action: ban, strikes: 2, window: 1m, ban: 1h}",
    );
    let client = "203.0.113.60";
    // One strike from each form of the address: an IPv4 client and its IPv4-mapped IPv6 form
    // (as a dual-stack listener sees it) are one client.
    assert_eq!(from(&proxy, client, "/private/a", EXAMPLEBOT).status, 403);
    let mapped = "::ffff:203.0.113.60";
    assert_eq!(from(&proxy, mapped, "/private/b", EXAMPLEBOT).status, 403);
    assert_eq!(from(&proxy, client, "/public", EXAMPLEBOT).status, 403);
    let lift = |client: &str| {
        let request = Request::new("DELETE", &format!("/bans?origin=shop&client={client}"))
            .host(&proxy.admin.to_string());
        support::Conn::open(proxy.admin).send(&request)
    };
    assert_eq!(lift(mapped).status, 200, "lifted by its other form");
    assert_eq!(lift(client).status, 404);
    assert_eq!(from(&proxy, client, "/public", EXAMPLEBOT).status, 200);
    drop(proxy);

    let proxy = start(
        &origin,
        INLINE,
        "{action: report, strikes: 2, window: 1m, ban: 1h}",
    );
    for n in 0..4 {
        assert_eq!(
            from(&proxy, client, &format!("/private/{n}"), EXAMPLEBOT).status,
            403
        );
    }
    assert_eq!(from(&proxy, client, "/public", EXAMPLEBOT).status, 200);
    assert!(proxy.wait_log("client would be banned", 1, Duration::from_secs(5)));
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_bans_total",
            &[("origin", "shop")]
        ),
        0.0
    );
}

/// A ban does not refuse a client the policy allows (here, allowed after it was banned), and
/// `/explain` says so as the proxy does.
#[test]
fn an_allowed_client_is_not_held_by_a_ban() {
    let origin = Origin::start();
    let offenders = "{action: ban, strikes: 2, window: 1m, ban: 1h}";
    let proxy = start(&origin, INLINE, offenders);
    assert!(proxy.wait_log("config reload: watching", 1, Duration::from_secs(10)));
    let client = "203.0.113.80";
    for path in ["/private/a", "/private/b"] {
        assert_eq!(from(&proxy, client, path, EXAMPLEBOT).status, 403);
    }
    assert_eq!(from(&proxy, client, "/public", EXAMPLEBOT).status, 403);
    let (_, explain) = proxy.explain_from("shop.example", EXAMPLEBOT, "/public", client);
    assert_eq!(explain["ban"]["client"], client, "{explain}");

    reload_replacing(
        &proxy,
        "    offenders:",
        &format!("    policy: {{allow_clients: [\"{client}/32\"]}}\n    offenders:"),
    );
    assert_eq!(from(&proxy, client, "/public", EXAMPLEBOT).status, 200);
    let (_, explain) = proxy.explain_from("shop.example", EXAMPLEBOT, "/public", client);
    assert_eq!(explain["decision"], "pass", "{explain}");
    assert_eq!(explain["ban"], serde_json::Value::Null, "{explain}");
}

/// With robots.txt proxied to the origin (`serve: false`), a banned address reaches it with
/// `/robots.txt` exactly, and with nothing that only looks like it: `/robots.txt?rest_route=...`
/// is WordPress's REST API.
#[test]
fn a_banned_address_reaches_only_robots_txt_itself() {
    let origin = Origin::start();
    let proxy = start(
        &origin,
        "{source: inline, serve: false, text: \"User-agent: *\\nDisallow: /private\\n\"}",
        "{action: ban, scope: address, strikes: 2, window: 1m, ban: 1h}",
    );
    let client = "203.0.113.70";
    for path in ["/private/a", "/private/b"] {
        assert_eq!(from(&proxy, client, path, EXAMPLEBOT).status, 403);
    }
    for path in [
        "/robots.txt?rest_route=/wp/v2/users",
        "/robots.txt/",
        "/robots.txt/..",
    ] {
        let response = from(&proxy, client, path, BROWSER);
        assert_eq!(response.status, 403, "{path}: {}", response.text());
        assert!(response.text().contains("banned"), "{path}");
    }
    let robots = from(&proxy, client, "/robots.txt", BROWSER);
    assert_eq!(robots.status, 200, "{}", robots.text());
    let reached: Vec<String> = origin
        .proxied()
        .into_iter()
        .filter(|r| {
            r.header("x-forwarded-for")
                .is_some_and(|chain| chain.contains(client))
        })
        .map(|r| r.target)
        .collect();
    assert_eq!(
        reached,
        ["/robots.txt"],
        "all the banned address got from the origin"
    );
}

/// A rule added less than 24 hours ago is not yet a violation: crawlers may still hold the
/// robots.txt from before it.
#[test]
fn a_rule_younger_than_a_day_does_not_strike() {
    let origin = Origin::start();
    let proxy = start(
        &origin,
        "{source: file, path: robots.txt}",
        "{action: ban, strikes: 2, window: 1m, ban: 1h}",
    );
    let client = "203.0.113.70";
    // Allowed under the robots.txt in force at start.
    assert_eq!(from(&proxy, client, "/private/a", EXAMPLEBOT).status, 200);
    let path = proxy.dir.path().join("robots.txt");
    let staged = proxy.dir.path().join("robots.txt.new");
    std::fs::write(&staged, "User-agent: *\nDisallow: /private\n").expect("robots.txt written");
    std::fs::rename(&staged, &path).expect("robots.txt replaced");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, explain) = proxy.explain("shop.example", EXAMPLEBOT, "/private/a");
        if explain["decision"] == "blocked" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new robots.txt never applied: {explain}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    blocked_without_strikes(&proxy, client);
}

/// Requests to `/private/...` from `client` are blocked, but strike nothing: the address is not
/// banned.
fn blocked_without_strikes(proxy: &Proxy, client: &str) {
    for n in 0..5 {
        assert_eq!(
            from(proxy, client, &format!("/private/{n}"), EXAMPLEBOT).status,
            403
        );
    }
    assert_eq!(from(proxy, client, "/public", EXAMPLEBOT).status, 200);
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_bans_total",
            &[("origin", "shop")]
        ),
        0.0
    );
}

/// The same through a config reload that changes an inline robots.txt: the origin's robots.txt
/// settings change, and what was in force before still counts for the next 24 hours.
#[test]
fn a_rule_added_by_a_config_reload_does_not_strike() {
    let origin = Origin::start();
    let before = "{source: inline, text: \"User-agent: *\\nDisallow: /other\\n\"}";
    let proxy = start(
        &origin,
        before,
        "{action: ban, strikes: 2, window: 1m, ban: 1h}",
    );
    assert!(proxy.wait_log("config reload: watching", 1, Duration::from_secs(10)));
    let client = "203.0.113.90";
    reload_replacing(
        &proxy,
        "Disallow: /other",
        "Disallow: /other\\nDisallow: /private",
    );
    blocked_without_strikes(&proxy, client);
    // A rule that was in force before the reload too strikes.
    for n in 0..2 {
        assert_eq!(
            from(&proxy, client, &format!("/other/{n}"), EXAMPLEBOT).status,
            403
        );
    }
    assert_eq!(
        from(&proxy, client, "/public", EXAMPLEBOT).status,
        403,
        "banned"
    );
}

/// A trusted proxy's own address (a request through it without X-Forwarded-For) stands for
/// every client behind it: its violations are refused but never strike, so it is never banned.
#[test]
fn a_trusted_proxy_is_never_banned() {
    let origin = Origin::start();
    let proxy = start(
        &origin,
        INLINE,
        "{action: ban, strikes: 2, window: 1m, ban: 1h}",
    );
    let direct = |path: &str| proxy.send(&Request::get(path).host("shop.example").ua(EXAMPLEBOT));
    for n in 0..4 {
        assert_eq!(direct(&format!("/private/{n}")).status, 403);
    }
    assert_eq!(direct("/public").status, 200);
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_bans_total",
            &[("origin", "shop")]
        ),
        0.0
    );
    // The clients it forwards for are counted as usual.
    let client = "203.0.113.95";
    for n in 0..2 {
        assert_eq!(
            from(&proxy, client, &format!("/private/{n}"), EXAMPLEBOT).status,
            403
        );
    }
    assert_eq!(from(&proxy, client, "/public", EXAMPLEBOT).status, 403);
}
