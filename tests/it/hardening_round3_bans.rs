//! Bans in hardening round 3, through the real proxy, a real origin and a real Redis: another
//! site's page cannot get its visitors banned (an `<img>` of the trap path, robots.txt and
//! disallowed pages loaded as images, a cross-site navigation), while a client that takes the
//! trap itself (curl included) is banned, a browser's User-Agent together with its address, so
//! that it is refused and the other browsers behind the address are not; `mode: report`/`off` and
//! `offenders.action: report`/`off` suspend the bans in force (`would_ban`, `ban_suspended`) until
//! enforcing again; `DELETE /bans?origin=` and `?all=1` lift in bulk, in memory and in the shared
//! store, and the console's "lift all" does it through its CSRF-protected form; a ban records
//! what earned it, in `/bans`, the console and the log line, and a ban the store holds in the
//! format written before that stays readable.

use crate::support;

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use support::redis::RedisServer;
use support::{metric, Conn, Origin, Proxy, Request, Response, BROWSER, GPTBOT};

const TRAP: &str = "/archive-2009/";
const SAFARI: &str = "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15";
const IMAGE_ACCEPT: &str = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8";

/// robots.txt disallowing `/search` to every group (the trap is added to each).
const ROBOTS: &str = "{source: inline, text: \"User-agent: GPTBot\\nDisallow: /search\\n\\nUser-agent: *\\nDisallow: /search\\nDisallow: /private\\n\"}";

/// One origin `shop` behind a trusted load balancer (loopback), with `extra` origin keys.
fn site(origin: &Origin, extra: &str) -> String {
    format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n\
         access_log: {{format: json}}\n\
         origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    \
         robots: {ROBOTS}\n{extra}",
        origin.addr()
    )
}

fn request(client: &str, path: &str, user_agent: &str) -> Request {
    Request::get(path)
        .host("shop.example")
        .ua(user_agent)
        .header("X-Forwarded-For", client)
}

fn get(proxy: &Proxy, client: &str, path: &str, user_agent: &str) -> u16 {
    proxy.send(&request(client, path, user_agent)).status
}

/// What Chrome sends for `<img src="https://shop.example/...">` on another site's page.
fn image_load(client: &str, path: &str) -> Request {
    request(client, path, BROWSER)
        .header("Accept", IMAGE_ACCEPT)
        .header("Sec-Fetch-Dest", "image")
        .header("Sec-Fetch-Mode", "no-cors")
        .header("Sec-Fetch-Site", "cross-site")
        .header("Referer", "https://evil.example/")
}

fn admin(proxy: &Proxy, request: Request) -> Response {
    Conn::open(proxy.admin).send(&request.host(&proxy.admin.to_string()))
}

fn bans(proxy: &Proxy) -> Vec<serde_json::Value> {
    let bans = proxy.admin_get("/bans").json();
    bans["bans"].as_array().cloned().unwrap_or_default()
}

fn delete(proxy: &Proxy, query: &str) -> Response {
    admin(proxy, Request::new("DELETE", &format!("/bans{query}")))
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

/// The access log's JSON lines for `client` so far.
fn access_lines(proxy: &Proxy, client: &str) -> Vec<serde_json::Value> {
    proxy
        .stderr()
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| line["kind"] == "access" && line["client"] == client)
        .collect()
}

/// The decision of the access log's last line for `client` and `path`, once it is written.
fn logged_decision(proxy: &Proxy, client: &str, path: &str, seen: usize) -> String {
    let mut decision = String::new();
    wait_for(Duration::from_secs(5), || {
        let lines: Vec<serde_json::Value> = access_lines(proxy, client)
            .into_iter()
            .filter(|line| line["path"] == path)
            .collect();
        if lines.len() > seen {
            decision = lines[lines.len() - 1]["decision"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            return true;
        }
        false
    });
    decision
}

#[test]
fn another_sites_page_cannot_get_its_visitors_banned() {
    let origin = Origin::start();
    let proxy = Proxy::start(&site(
        &origin,
        &format!(
            "    traps: {{enabled: true, paths: [\"{TRAP}\"], action: ban}}\n    \
             disguised: {{action: ban, strikes: 5}}\n    \
             offenders: {{scope: address, ban: 1h}}\n"
        ),
    ));
    // `<img src=/archive-2009/>` on another site, in every browser's dress: never a ban, under
    // scope `address` either.
    let victim = "203.0.113.20";
    let old_browser = request(victim, TRAP, BROWSER)
        .header("Accept", IMAGE_ACCEPT)
        .header("Referer", "https://evil.example/post");
    let navigation = request(victim, TRAP, BROWSER)
        .header("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
        .header("Sec-Fetch-Dest", "document")
        .header("Sec-Fetch-Site", "cross-site");
    for attack in [image_load(victim, TRAP), old_browser, navigation] {
        for _ in 0..3 {
            let answer = proxy.send(&attack);
            assert_eq!(answer.status, 404, "the trap is still refused");
        }
    }
    assert!(bans(&proxy).is_empty(), "{:?}", bans(&proxy));
    assert_eq!(get(&proxy, victim, "/page", BROWSER), 200);
    assert_eq!(get(&proxy, victim, "/page", SAFARI), 200);
    assert_eq!(
        proxy.wait_metric(
            "robotsguard_third_party_requests_total",
            &[("origin", "shop"), ("signal", "trap")],
            9.0
        ),
        9.0
    );
    assert!(origin.proxied_to(TRAP).is_empty());

    // The same requests without what a browser adds for another site's page do count: curl
    // (Accept: */*) taking the trap is banned at once.
    let curl = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
        .args([
            "-H",
            "Host: shop.example",
            "-H",
            "X-Forwarded-For: 203.0.113.22",
        ])
        .args(["-A", BROWSER])
        .arg(format!("http://{}{TRAP}", proxy.addr))
        .output()
        .expect("curl runs");
    assert_eq!(String::from_utf8_lossy(&curl.stdout), "404");
    let banned = bans(&proxy);
    assert_eq!(banned.len(), 1, "{banned:?}");
    assert_eq!(banned[0]["client"], "203.0.113.22");
    assert_eq!(
        get(&proxy, "203.0.113.22", "/page", SAFARI),
        403,
        "scope address"
    );
}

#[test]
fn another_sites_page_cannot_make_its_visitors_disguised_crawlers() {
    let origin = Origin::start();
    // The default scope, `crawlers`.
    let proxy = Proxy::start(&site(
        &origin,
        "    disguised: {action: ban, strikes: 5}\n    offenders: {ban: 1h}\n",
    ));
    // robots.txt and six `/search` loaded as images: neither a read nor strikes.
    let reader = "203.0.113.21";
    assert_eq!(proxy.send(&image_load(reader, "/robots.txt")).status, 200);
    for n in 0..6 {
        let answer = proxy.send(&image_load(reader, &format!("/search?q={n}")));
        assert_eq!(answer.status, 200);
    }
    // The visitor's own searches afterwards are not strikes either: the read was not theirs.
    for n in 0..6 {
        assert_eq!(
            get(&proxy, reader, &format!("/search?q=own{n}"), BROWSER),
            200
        );
    }
    assert!(bans(&proxy).is_empty(), "{:?}", bans(&proxy));
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_disguised_strikes_total",
            &[("origin", "shop")]
        ),
        0.0
    );
    assert_eq!(get(&proxy, reader, "/page", BROWSER), 200);
    assert_eq!(
        proxy.wait_metric(
            "robotsguard_third_party_requests_total",
            &[("origin", "shop"), ("signal", "robots_read")],
            1.0
        ),
        1.0
    );
    // A browser that reads robots.txt itself and then takes what it forbids is still caught.
    let scraper = "203.0.113.23";
    assert_eq!(get(&proxy, scraper, "/robots.txt", BROWSER), 200);
    for n in 0..4 {
        assert_eq!(
            get(&proxy, scraper, &format!("/search?q={n}"), BROWSER),
            200
        );
    }
    assert_eq!(get(&proxy, scraper, "/search?q=last", BROWSER), 403);
    assert_eq!(get(&proxy, scraper, "/page", BROWSER), 403);
    assert_eq!(get(&proxy, scraper, "/page", SAFARI), 200);
}

#[test]
fn a_trap_ban_stops_the_browser_user_agent_that_took_it_and_no_other_browser() {
    let origin = Origin::start();
    let proxy = Proxy::start(&site(
        &origin,
        &format!(
            "    traps: {{enabled: true, paths: [\"{TRAP}\"], action: ban}}\n    \
             offenders: {{ban: 1h}}\n"
        ),
    ));
    let scraper = "203.0.113.30";
    assert_eq!(
        get(&proxy, scraper, &format!("{TRAP}old.html"), BROWSER),
        404
    );
    // The scraper, by its exact User-Agent, is refused; so is any crawler from the address.
    assert_eq!(get(&proxy, scraper, "/page", BROWSER), 403);
    let refused = proxy.send(&request(scraper, "/page", BROWSER));
    assert!(refused.header("retry-after").is_some());
    assert_eq!(get(&proxy, scraper, "/page", GPTBOT), 403);
    // Other browsers behind the address pass; so does a User-Agent one byte longer.
    assert_eq!(get(&proxy, scraper, "/page", SAFARI), 200);
    assert_eq!(get(&proxy, scraper, "/page", &format!("{BROWSER}x")), 200);
    assert_eq!(get(&proxy, scraper, "/robots.txt", BROWSER), 200);
    // What earned it, in /bans, the log line and the console.
    let banned = bans(&proxy);
    assert_eq!(banned.len(), 1, "{banned:?}");
    assert_eq!(banned[0]["cause"], "trap");
    assert_eq!(banned[0]["crawler"], "browser");
    assert_eq!(banned[0]["user_agent"], BROWSER);
    assert_eq!(banned[0]["state"], "applied");
    assert!(proxy.wait_log("trap hit: client banned", 1, Duration::from_secs(5)));
    let line = proxy
        .stderr()
        .lines()
        .find(|line| line.contains("trap hit: client banned"))
        .unwrap_or_default()
        .to_string();
    assert!(
        line.contains("crawler=\"browser\"") && line.contains("Chrome/126"),
        "{line}"
    );
    let page = admin(&proxy, Request::get("/ui/bans")).text();
    assert!(page.contains("browser (trap)"), "{page}");
    assert!(page.contains("Chrome/126.0"), "{page}");

    // A crawler at the trap bans the address for crawlers only, binding no User-Agent.
    let crawler = "203.0.113.31";
    assert_eq!(get(&proxy, crawler, TRAP, GPTBOT), 404);
    assert_eq!(get(&proxy, crawler, "/page", GPTBOT), 403);
    assert_eq!(get(&proxy, crawler, "/page", BROWSER), 200);
    let banned = proxy.admin_get("/bans?origin=shop").json();
    let row = banned["bans"]
        .as_array()
        .and_then(|rows| rows.iter().find(|row| row["client"] == crawler).cloned())
        .unwrap_or_default();
    assert_eq!(row["crawler"], "GPTBot", "{banned}");
    assert_eq!(row["user_agent"], serde_json::Value::Null, "{banned}");
}

#[test]
fn a_ban_records_the_crawler_that_earned_it_and_the_console_table_has_a_header_per_column() {
    let origin = Origin::start();
    let proxy = Proxy::start(&site(
        &origin,
        "    offenders: {action: ban, strikes: 2, window: 10m, ban: 1h}\n",
    ));
    for n in 0..2 {
        assert_eq!(
            get(&proxy, "203.0.113.40", &format!("/search/{n}"), GPTBOT),
            403
        );
    }
    let banned = bans(&proxy);
    assert_eq!(banned.len(), 1, "{banned:?}");
    assert_eq!(
        (&banned[0]["cause"], &banned[0]["crawler"]),
        (&"strikes".into(), &"GPTBot".into())
    );
    assert!(proxy.wait_log("client banned", 1, Duration::from_secs(5)));
    assert!(proxy
        .stderr()
        .lines()
        .any(|line| line.contains("client banned") && line.contains("GPTBot")));
    let csv = proxy.admin_get("/bans?format=csv").text();
    let mut lines = csv.lines();
    assert!(
        lines
            .next()
            .is_some_and(|header| header.ends_with("cause,crawler,user_agent,state")),
        "{csv}"
    );
    assert!(
        lines
            .next()
            .is_some_and(|row| row.contains(",strikes,GPTBot,")),
        "{csv}"
    );
    // Every row of the console's bans table has as many cells as its header has columns.
    for page in ["/ui/bans", "/ui/origin?origin=shop"] {
        let html = admin(&proxy, Request::get(page)).text();
        let table = html
            .split("<table id=\"bans\">")
            .nth(1)
            .and_then(|rest| rest.split("</table>").next())
            .unwrap_or_else(|| panic!("{page} has a bans table:\n{html}"));
        let (head, body) = table.split_once("</thead>").expect("a header row");
        let columns = head.matches("<th scope").count();
        assert!(body.contains("GPTBot (strikes)"), "{page}: {body}");
        for row in body.split("<tr>").skip(1) {
            assert_eq!(row.matches("<td>").count(), columns, "{page}: {table}");
        }
    }
}

#[test]
fn report_and_off_suspend_the_bans_in_force_until_enforcing_again() {
    let origin = Origin::start();
    let proxy = Proxy::start(&site(
        &origin,
        "    mode: enforce\n    offenders: {action: ban, strikes: 2, window: 10m, ban: 1h}\n",
    ));
    let banned = "203.0.113.50";
    for n in 0..2 {
        assert_eq!(get(&proxy, banned, &format!("/search/{n}"), GPTBOT), 403);
    }
    assert_eq!(get(&proxy, banned, "/page", GPTBOT), 403);
    assert_eq!(logged_decision(&proxy, banned, "/page", 0), "banned");
    let mut now_at = ("mode: enforce", "action: ban");
    for (step, (mode, action, status, decision)) in [
        ("mode: report", "action: ban", 200, "would_ban"),
        ("mode: off", "action: ban", 200, "ban_suspended"),
        ("mode: enforce", "action: off", 200, "ban_suspended"),
        ("mode: enforce", "action: report", 200, "would_ban"),
        // The ban is still in force: enforcing again refuses again.
        ("mode: enforce", "action: ban", 403, "banned"),
    ]
    .into_iter()
    .enumerate()
    {
        let reloads = (step + 1) as f64;
        let current = std::fs::read_to_string(proxy.config_path()).expect("config readable");
        let changed = current.replace(now_at.0, mode).replace(now_at.1, action);
        assert_ne!(changed, current);
        proxy.replace_config(&changed);
        assert_eq!(
            proxy.wait_reloads("success", reloads),
            reloads,
            "{}",
            proxy.stderr()
        );
        now_at = (mode, action);
        assert_eq!(
            get(&proxy, banned, "/page", GPTBOT),
            status,
            "{mode} {action}"
        );
        assert_eq!(
            logged_decision(&proxy, banned, "/page", step + 1),
            decision,
            "{mode} {action}"
        );
        let shown = bans(&proxy);
        let state = if decision == "banned" {
            "applied"
        } else {
            decision
        };
        assert_eq!(shown[0]["state"], state, "{mode} {action}: {shown:?}");
    }
    assert!(
        metric(
            &proxy.metrics(),
            "robotsguard_requests_total",
            &[
                ("origin", "shop"),
                ("crawler", "GPTBot"),
                ("decision", "would_ban")
            ]
        ) >= 2.0
    );
    // The console's crawler report counts them.
    let report = proxy.admin_get("/reports/crawlers?origin=shop").json();
    let row = report["crawlers"]
        .as_array()
        .and_then(|rows| rows.iter().find(|row| row["name"] == "GPTBot").cloned())
        .unwrap_or_default();
    assert_eq!(row["would_ban"], 2, "{report}");
    assert_eq!(row["ban_suspended"], 2, "{report}");
}

fn ban_by_trap(proxy: &Proxy, host: &str, client: &str) {
    let answer = proxy.send(
        &Request::get(TRAP)
            .host(host)
            .ua(GPTBOT)
            .header("X-Forwarded-For", client),
    );
    assert_eq!(answer.status, 404);
}

fn two_origins(origin: &Origin, state: &str) -> String {
    let traps = format!("traps: {{enabled: true, paths: [\"{TRAP}\"], action: ban}}");
    format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n{state}\
         origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{0}\"\n    {traps}\n\
         \x20 - name: blog\n    hosts: [\"blog.example\"]\n    upstream: \"{0}\"\n    {traps}\n",
        origin.addr()
    )
}

#[test]
fn all_of_an_origins_bans_or_every_origins_are_lifted_in_memory_and_in_the_store() {
    let origin = Origin::start();
    // In memory.
    let proxy = Proxy::start(&two_origins(&origin, ""));
    for n in 0..3 {
        ban_by_trap(&proxy, "shop.example", &format!("203.0.113.{}", 60 + n));
    }
    ban_by_trap(&proxy, "blog.example", "203.0.113.60");
    assert_eq!(bans(&proxy).len(), 4);
    assert_eq!(delete(&proxy, "").status, 400);
    assert_eq!(delete(&proxy, "?origin=nowhere").status, 404);
    assert_eq!(delete(&proxy, "?all=maybe").status, 400);
    let lifted = delete(&proxy, "?origin=shop");
    assert_eq!(lifted.status, 200, "{}", lifted.text());
    assert_eq!(lifted.json()["lifted"], 3, "{}", lifted.text());
    assert_eq!(get(&proxy, "203.0.113.60", "/page", GPTBOT), 200);
    let left = bans(&proxy);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["origin"], "blog");
    let lifted = delete(&proxy, "?all=1");
    assert_eq!(lifted.json()["lifted"], 1, "{}", lifted.text());
    assert!(bans(&proxy).is_empty());
    drop(proxy);

    // Two replicas on a real Redis: lifted in the store, so neither gets them back.
    let redis = RedisServer::start();
    let state = format!(
        "state: {{backend: redis, redis: {{url: \"{}\", prefix: \"rg-lift:\"}}}}\n",
        redis.url()
    );
    let a = Proxy::start(&two_origins(&origin, &state));
    let b = Proxy::start(&two_origins(&origin, &state));
    for proxy in [&a, &b] {
        assert_eq!(
            proxy.wait_metric("robotsguard_state_backend_up", &[], 1.0),
            1.0
        );
    }
    for n in 0..3 {
        ban_by_trap(&a, "shop.example", &format!("203.0.113.{}", 70 + n));
    }
    ban_by_trap(&b, "blog.example", "203.0.113.70");
    assert!(
        wait_for(Duration::from_secs(10), || {
            redis.command(&["HLEN", "rg-lift:bans"]) == "4" && bans(&b).len() == 4
        }),
        "{}",
        redis.command(&["HKEYS", "rg-lift:bans"])
    );
    let lifted = delete(&b, "?origin=shop");
    assert_eq!(lifted.status, 200, "{}", lifted.text());
    assert_eq!(lifted.json()["lifted"], 3, "{}", lifted.text());
    assert_eq!(
        redis.command(&["HKEYS", "rg-lift:bans"]),
        "203.0.113.70 blog"
    );
    assert!(
        wait_for(Duration::from_secs(10), || bans(&a).len() == 1),
        "the other replica mirrors the lift: {:?}",
        bans(&a)
    );
    // A while later (several mirror checks) neither has them back.
    thread::sleep(Duration::from_millis(2500));
    for proxy in [&a, &b] {
        assert_eq!(get(proxy, "203.0.113.71", "/page", GPTBOT), 200);
        assert_eq!(bans(proxy).len(), 1);
    }
    let lifted = delete(&a, "?all=1");
    assert_eq!(lifted.json()["lifted"], 1, "{}", lifted.text());
    assert_eq!(redis.command(&["HLEN", "rg-lift:bans"]), "0");
    assert!(wait_for(Duration::from_secs(10), || bans(&b).is_empty()));
}

#[test]
fn bans_bound_to_a_user_agent_are_shared_and_old_stored_bans_stay_readable() {
    let origin = Origin::start();
    let redis = RedisServer::start();
    let state = format!(
        "state: {{backend: redis, redis: {{url: \"{}\", prefix: \"rg-bound:\"}}}}\n",
        redis.url()
    );
    let replica = || {
        Proxy::start(&format!(
            "{state}{}",
            site(
                &origin,
                &format!("    traps: {{enabled: true, paths: [\"{TRAP}\"], action: ban}}\n")
            )
        ))
    };
    let a = replica();
    let b = replica();
    for proxy in [&a, &b] {
        assert_eq!(
            proxy.wait_metric("robotsguard_state_backend_up", &[], 1.0),
            1.0
        );
    }
    let scraper = "203.0.113.80";
    assert_eq!(get(&a, scraper, TRAP, BROWSER), 404);
    // The other replica refuses that User-Agent from that address, and only that one.
    assert!(
        wait_for(Duration::from_secs(10), || get(
            &b, scraper, "/page", BROWSER
        ) == 403),
        "{}",
        redis.command(&["HGETALL", "rg-bound:bans"])
    );
    assert_eq!(get(&b, scraper, "/page", SAFARI), 200);
    let fields = redis.command(&["HKEYS", "rg-bound:bans"]);
    assert!(
        fields.starts_with(&format!("{scraper} shop ua:")),
        "{fields}"
    );
    let shown = bans(&b);
    assert_eq!(shown[0]["crawler"], "browser", "{shown:?}");
    assert_eq!(shown[0]["user_agent"], BROWSER, "{shown:?}");

    // A ban as the store held it before bans recorded what earned them: read as earned by an
    // unknown crawler, and still applied.
    let time = redis.command(&["TIME"]);
    let seconds: u64 = time
        .lines()
        .next()
        .and_then(|s| s.parse().ok())
        .expect("TIME");
    let now = seconds * 1000;
    let old = format!("{} {} 20", now + 3_600_000, now - 60_000);
    redis.command(&["HSET", "rg-bound:bans", "203.0.113.81 shop", &old]);
    redis.command(&["INCR", "rg-bound:bans:version"]);
    assert!(
        wait_for(Duration::from_secs(10), || get(
            &a,
            "203.0.113.81",
            "/page",
            GPTBOT
        ) == 403),
        "{:?}",
        bans(&a)
    );
    let old_ban = bans(&a)
        .into_iter()
        .find(|ban| ban["client"] == "203.0.113.81")
        .unwrap_or_default();
    assert_eq!(old_ban["crawler"], "unknown", "{old_ban}");
    assert_eq!(old_ban["cause"], "unknown", "{old_ban}");
    assert_eq!(old_ban["strikes"], 20, "{old_ban}");
    // Lifting an address lifts its bound bans too, in the store.
    let lifted = delete(&a, &format!("?origin=shop&client={scraper}"));
    assert_eq!(lifted.status, 200, "{}", lifted.text());
    assert_eq!(
        redis.command(&["HKEYS", "rg-bound:bans"]),
        "203.0.113.81 shop"
    );
    assert!(wait_for(Duration::from_secs(10), || get(
        &b, scraper, "/page", BROWSER
    ) == 200));
}

#[test]
fn the_console_lifts_all_of_an_origins_bans_with_its_csrf_protected_form() {
    let origin = Origin::start();
    let proxy = Proxy::start(&two_origins(&origin, ""));
    for n in 0..3 {
        ban_by_trap(&proxy, "shop.example", &format!("203.0.113.{}", 90 + n));
    }
    ban_by_trap(&proxy, "blog.example", "203.0.113.90");
    // The open loopback console: a session of its own, and its CSRF token in each form.
    let page = admin(&proxy, Request::get("/ui/bans"));
    let session = page
        .header("set-cookie")
        .and_then(|c| c.split(';').next())
        .expect("a session cookie")
        .to_string();
    let page = admin(&proxy, Request::get("/ui/bans").header("Cookie", &session)).text();
    assert!(page.contains("Lift all 3 bans on shop"), "{page}");
    assert!(page.contains("Lift all 1 ban on blog"), "{page}");
    let csrf = page
        .split("action=\"/ui/bans/lift-all\"")
        .nth(1)
        .and_then(|form| form.split("name=\"csrf\" value=\"").nth(1))
        .and_then(|rest| rest.split('"').next())
        .expect("a CSRF token in the lift-all form")
        .to_string();
    let post = |body: String, origin_header: Option<&str>| {
        let mut request = Request::new("POST", "/ui/bans/lift-all")
            .header("Cookie", &session)
            .header("Content-Type", "application/x-www-form-urlencoded");
        if let Some(value) = origin_header {
            request = request.header("Origin", value);
        }
        admin(&proxy, request.body(body.as_bytes()))
    };
    assert_eq!(post("origin=shop".into(), None).status, 403);
    assert_eq!(post("origin=shop&csrf=0000".into(), None).status, 403);
    assert_eq!(
        post(
            format!("origin=shop&csrf={csrf}"),
            Some("http://evil.example")
        )
        .status,
        403
    );
    assert_eq!(bans(&proxy).len(), 4, "nothing lifted yet");
    let lifted = post(format!("origin=shop&csrf={csrf}"), None);
    assert_eq!(lifted.status, 303, "{}", lifted.text());
    let left = bans(&proxy);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["origin"], "blog");
    let after = admin(
        &proxy,
        Request::get(lifted.header("location").unwrap_or("/ui/bans")).header("Cookie", &session),
    )
    .text();
    assert!(after.contains("Lifted 3 bans on shop"), "{after}");
}
