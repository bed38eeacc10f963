//! Crawlers in disguise, caught by robots.txt itself, through the real proxy: trap paths that the
//! robots.txt robotsguard serves disallows to every group (whatever the source of the file), hit
//! by browser User-Agents under `traps.action` report, block and ban; the same derived trap path
//! in two replicas sharing a real Redis and across a restart; and read-then-violate: a browser
//! User-Agent that read robots.txt and then asks for what it disallows to every group becomes
//! the crawler `disguised` at `disguised.strikes`, while a browser that never read robots.txt
//! never counts.

use crate::support;

use std::thread;
use std::time::{Duration, Instant};

use support::redis::RedisServer;
use support::{metric, Origin, Proxy, Request, BROWSER, GPTBOT};

/// Two named groups and `*`: `/private` is disallowed to all three, `/gpt-only` to GPTBot only,
/// `/star-only` to `*` only.
const ROBOTS: &str = "User-agent: GPTBot\nDisallow: /private\nDisallow: /gpt-only\n\n\
                      User-agent: CCBot\nUser-agent: Bytespider\nDisallow: /private\n\n\
                      User-agent: *\nDisallow: /private\nDisallow: /star-only\n";

/// Groups in [`ROBOTS`].
const GROUPS: usize = 3;

const TRAP: &str = "/archive-2009/";

fn robots_yaml() -> String {
    format!(
        "    robots: {{source: inline, text: {}}}\n",
        serde_json::to_string(ROBOTS).expect("a string")
    )
}

/// One origin `shop` behind a trusted load balancer (loopback), with `extra` origin keys.
fn start(origin: &Origin, extra: &str) -> Proxy {
    Proxy::start(&format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n\
         origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n{extra}",
        origin.addr()
    ))
}

fn from(
    proxy: &Proxy,
    client: &str,
    method: &str,
    path: &str,
    user_agent: &str,
) -> support::Response {
    proxy.send(
        &Request::new(method, path)
            .host("shop.example")
            .ua(user_agent)
            .header("X-Forwarded-For", client),
    )
}

fn get(proxy: &Proxy, client: &str, path: &str, user_agent: &str) -> u16 {
    from(proxy, client, "GET", path, user_agent).status
}

fn served_robots(proxy: &Proxy) -> String {
    let answer = proxy.get("shop.example", "/robots.txt", BROWSER);
    assert_eq!(answer.status, 200);
    answer.text()
}

fn trap_hits(proxy: &Proxy) -> f64 {
    metric(
        &proxy.metrics(),
        "robotsguard_trap_hits_total",
        &[("origin", "shop")],
    )
}

/// The requests counted with `decision` for `crawler`, once they reach `expected` (they are
/// counted in the logging phase, after the answer is sent), or what they are after 5 s.
fn decisions(proxy: &Proxy, decision: &str, crawler: &str, expected: f64) -> f64 {
    let count = || -> f64 {
        support::samples(&proxy.metrics(), "robotsguard_requests_total")
            .iter()
            .filter(|(labels, _)| {
                labels.get("decision").map(String::as_str) == Some(decision)
                    && labels.get("crawler").map(String::as_str) == Some(crawler)
            })
            .map(|(_, value)| value)
            .sum()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut seen = count();
    while seen < expected && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
        seen = count();
    }
    seen
}

#[test]
fn the_served_robots_txt_carries_a_trap_line_in_every_group_whatever_its_source() {
    let traps = format!("    traps: {{enabled: true, paths: [\"{TRAP}\"]}}\n");
    // Inline.
    let origin = Origin::start();
    let proxy = start(&origin, &format!("{}{traps}", robots_yaml()));
    let served = served_robots(&proxy);
    assert_eq!(
        served.matches(&format!("Disallow: {TRAP}\n")).count(),
        GROUPS,
        "{served}"
    );
    // The rules of the file are all still there, and CCBot still shares Bytespider's group.
    assert!(served.contains("User-agent: CCBot\nUser-agent: Bytespider\nDisallow: /archive"));
    assert_eq!(proxy.admin_get("/robots?origin=shop").text(), served);
    drop(proxy);

    // A file.
    let proxy = Proxy::builder(&format!(
        "origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    \
         robots: {{source: file, path: robots.txt}}\n{traps}",
        origin.addr()
    ))
    .files(&[("robots.txt", ROBOTS)])
    .start();
    let served = served_robots(&proxy);
    assert_eq!(
        served.matches(&format!("Disallow: {TRAP}\n")).count(),
        GROUPS,
        "{served}"
    );
    drop(proxy);

    // The origin's own copy, which robotsguard then serves itself; one without a `*` group
    // gets one, so that a crawler of any name is kept out.
    let fetched = Origin::start();
    fetched.robots(200, "User-agent: GPTBot\nDisallow: /private\n");
    let proxy = start(&fetched, &traps);
    let served = served_robots(&proxy);
    assert_eq!(
        served.matches(&format!("Disallow: {TRAP}\n")).count(),
        2,
        "{served}"
    );
    assert!(served.contains("User-agent: *\n"), "{served}");
    assert!(
        fetched.proxied_to("/robots.txt").is_empty(),
        "robots.txt is served by robotsguard, not proxied"
    );
    // What /explain shows is that copy: the trap is disallowed to a crawler by a rule of it.
    let (status, explained) = proxy.explain("shop.example", GPTBOT, "/archive-2009/a");
    assert_eq!(status, 200);
    assert_eq!(explained["robots_served_by"], "robotsguard", "{explained}");
    assert_eq!(explained["rule"]["pattern"], TRAP, "{explained}");
    drop(proxy);

    // No paths: one derived from the secret, the same for the same secret.
    let secret_traps = "    traps: {enabled: true, secret_file: trap.secret}\n";
    let derived = |secret: &str| {
        let proxy = Proxy::builder(&format!(
            "{}{secret_traps}",
            support::site(&origin, "shop.example", &robots_yaml())
        ))
        .files(&[("trap.secret", secret)])
        .start();
        let served = served_robots(&proxy);
        let lines: Vec<&str> = served
            .lines()
            .filter(|line| {
                line.starts_with("Disallow: /")
                    && !line.contains("private")
                    && !line.contains("only")
            })
            .collect();
        assert_eq!(lines.len(), GROUPS, "{served}");
        assert!(lines.iter().all(|line| *line == lines[0]), "{served}");
        lines[0].trim_start_matches("Disallow: ").to_string()
    };
    let first = derived("correct horse battery staple");
    assert_eq!(first.len(), 17, "{first}");
    assert_eq!(derived("correct horse battery staple"), first);
    assert_ne!(derived("another secret"), first);
}

fn trap_proxy(origin: &Origin, action: &str, more: &str) -> Proxy {
    start(
        origin,
        &format!(
            "{}    traps: {{enabled: true, paths: [\"{TRAP}\"], action: {action}}}\n{more}",
            robots_yaml()
        ),
    )
}

#[test]
fn a_trap_hit_by_a_browser_is_reported_blocked_or_banned() {
    // report: counted and logged, answered by the origin.
    let origin = Origin::start();
    origin.route("/archive-2009/old.html", 200, "old page");
    let proxy = trap_proxy(&origin, "report", "");
    let answer = from(
        &proxy,
        "203.0.113.5",
        "GET",
        "/archive-2009/old.html",
        BROWSER,
    );
    assert_eq!((answer.status, answer.text().as_str()), (200, "old page"));
    assert_eq!(origin.proxied_to("/archive-2009/old.html").len(), 1);
    assert_eq!(
        proxy.wait_metric("robotsguard_trap_hits_total", &[("origin", "shop")], 1.0),
        1.0
    );
    assert!(proxy.wait_log("trap hit", 1, Duration::from_secs(5)));
    assert_eq!(
        proxy.wait_metric(
            "robotsguard_requests_total",
            &[("origin", "shop"), ("decision", "would_trap")],
            1.0
        ),
        1.0
    );
    let (_, explained) =
        proxy.explain_from("shop.example", BROWSER, "/archive-2009/x", "203.0.113.5");
    assert_eq!(explained["decision"], "would_trap", "{explained}");
    // Not a trap: a path beside it.
    assert_eq!(get(&proxy, "203.0.113.5", "/archive-2009x", BROWSER), 200);
    assert_eq!(trap_hits(&proxy), 1.0);
    drop(proxy);

    // block: 404 without contacting the origin, whatever the User-Agent and the spelling.
    let origin = Origin::start();
    let proxy = trap_proxy(&origin, "block", "");
    for (path, user_agent) in [
        ("/archive-2009/", BROWSER),
        ("/archive-2009", BROWSER),
        ("/%61rchive-2009/a?b=c", BROWSER),
        ("/x/../archive-2009/deep/page", "curl/8.5.0"),
        ("/archive-2009/", GPTBOT),
    ] {
        assert_eq!(get(&proxy, "203.0.113.6", path, user_agent), 404, "{path}");
    }
    assert!(origin.proxied().is_empty(), "{:?}", origin.proxied());
    assert_eq!(
        proxy.wait_metric("robotsguard_trap_hits_total", &[("origin", "shop")], 5.0),
        5.0
    );
    let (_, explained) =
        proxy.explain_from("shop.example", BROWSER, "/archive-2009/x", "203.0.113.6");
    assert_eq!(explained["decision"], "trap", "{explained}");
    assert_eq!(explained["answer"]["status"], 404, "{explained}");
    assert_eq!(get(&proxy, "203.0.113.6", "/page", BROWSER), 200);
    // The console's crawler table has a row for the signal.
    let report = proxy.admin_get("/reports/crawlers?origin=shop").json();
    let rows = report["crawlers"].as_array().cloned().unwrap_or_default();
    let trap = rows.iter().find(|row| row["name"] == "trap");
    assert_eq!(
        trap.map(|row| row["trap"].clone()),
        Some(5.into()),
        "{report}"
    );
    drop(proxy);

    // ban: at once, for offenders.ban; under scope crawlers its crawler requests are refused
    // afterwards, and so are the requests of the browser User-Agent that took the trap; other
    // browsers behind the address are not.
    let origin = Origin::start();
    let proxy = trap_proxy(&origin, "ban", "    offenders: {ban: 1h}\n");
    assert_eq!(get(&proxy, "203.0.113.7", "/archive-2009/", BROWSER), 404);
    assert!(origin.proxied().is_empty());
    assert_eq!(get(&proxy, "203.0.113.7", "/page", GPTBOT), 403);
    assert_eq!(get(&proxy, "203.0.113.7", "/page", "SomeSpider/1.0"), 403);
    assert_eq!(get(&proxy, "203.0.113.7", "/page", BROWSER), 403);
    let another_browser = "Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0";
    assert_eq!(get(&proxy, "203.0.113.7", "/page", another_browser), 200);
    assert_eq!(get(&proxy, "203.0.113.8", "/page", GPTBOT), 200);
    let bans = proxy.admin_get("/bans?origin=shop").json();
    assert_eq!(bans["bans"][0]["client"], "203.0.113.7", "{bans}");
    assert_eq!(bans["bans"].as_array().map(Vec::len), Some(1), "{bans}");
    // robots.txt stays readable, with the trap in it.
    let robots = from(&proxy, "203.0.113.7", "GET", "/robots.txt", GPTBOT);
    assert_eq!(robots.status, 200);
    assert!(robots.text().contains(TRAP));
}

#[test]
fn allowed_clients_and_trusted_proxies_never_hit_a_trap() {
    let origin = Origin::start();
    let proxy = trap_proxy(
        &origin,
        "ban",
        "    policy: {allow_clients: [\"198.51.100.0/24\"]}\n",
    );
    // An allowed client, however often.
    for _ in 0..3 {
        assert_eq!(get(&proxy, "198.51.100.9", "/archive-2009/a", BROWSER), 200);
    }
    // The load balancer's own address (no X-Forwarded-For): it stands for everyone behind it.
    for _ in 0..3 {
        assert_eq!(
            proxy.get("shop.example", "/archive-2009/a", BROWSER).status,
            200
        );
    }
    assert_eq!(origin.proxied_to("/archive-2009/a").len(), 6);
    assert_eq!(trap_hits(&proxy), 0.0);
    assert_eq!(
        proxy.admin_get("/bans?origin=shop").json()["bans"]
            .as_array()
            .map(Vec::len),
        Some(0)
    );
    // Anyone else is caught.
    assert_eq!(get(&proxy, "198.51.101.9", "/archive-2009/a", BROWSER), 404);
    assert_eq!(trap_hits(&proxy), 1.0);
}

/// The derived trap path `proxy` serves.
fn derived_trap(proxy: &Proxy) -> String {
    let served = served_robots(proxy);
    let lines: Vec<String> = served
        .lines()
        .filter_map(|line| line.strip_prefix("Disallow: "))
        .filter(|path| !path.contains("private") && !path.contains("only"))
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), GROUPS, "{served}");
    lines[0].clone()
}

#[test]
fn the_derived_trap_path_is_stable_across_replicas_and_restarts() {
    let origin = Origin::start();
    // Two replicas sharing a real Redis.
    let redis = RedisServer::start();
    let shared = format!(
        "state:\n  backend: redis\n  redis: {{url: \"{}\", prefix: \"rg-traps:\"}}\n",
        redis.url()
    );
    let replica = || {
        Proxy::start(&format!(
            "{shared}{}",
            support::site(
                &origin,
                "shop.example",
                &format!(
                    "{}    traps: {{enabled: true, action: block}}\n",
                    robots_yaml()
                )
            )
        ))
    };
    let a = replica();
    let b = replica();
    let trap = derived_trap(&a);
    assert_eq!(derived_trap(&b), trap);
    assert!(!redis.command(&["GET", "rg-traps:trap-secret"]).is_empty());
    // Both refuse it; a restarted replica still serves the same path.
    assert_eq!(b.get("shop.example", &trap, BROWSER).status, 404);
    drop(a);
    let a = replica();
    assert_eq!(derived_trap(&a), trap);
    assert_eq!(
        a.get("shop.example", &format!("{trap}/x"), BROWSER).status,
        404
    );

    // Without a shared store: kept in state.dir across a restart.
    let state = tempfile::tempdir().expect("a directory");
    let single = || {
        Proxy::start(&format!(
            "state: {{dir: \"{}\"}}\n{}",
            state.path().display(),
            support::site(
                &origin,
                "shop.example",
                &format!("{}    traps: {{enabled: true}}\n", robots_yaml())
            )
        ))
    };
    let first = derived_trap(&single());
    assert!(state.path().join("trap-secret").exists());
    assert_eq!(derived_trap(&single()), first);
    assert_ne!(first, trap, "another secret, another path");
}

fn disguised_proxy(origin: &Origin, action: &str, strikes: u32) -> Proxy {
    start(
        origin,
        &format!(
            "{}    disguised: {{action: {action}, strikes: {strikes}, window: 10m}}\n    \
             policy: {{exempt_paths: [/private/public]}}\n",
            robots_yaml()
        ),
    )
}

fn strikes(proxy: &Proxy) -> f64 {
    metric(
        &proxy.metrics(),
        "robotsguard_disguised_strikes_total",
        &[("origin", "shop")],
    )
}

#[test]
fn a_browser_that_read_robots_txt_and_takes_what_it_forbids_everyone_is_a_disguised_crawler() {
    let origin = Origin::start();
    let proxy = disguised_proxy(&origin, "block", 3);
    // A browser that never read robots.txt never counts, however often.
    for n in 0..10 {
        assert_eq!(
            get(&proxy, "203.0.113.10", &format!("/private/{n}"), BROWSER),
            200
        );
    }
    assert_eq!(strikes(&proxy), 0.0);

    let reader = "203.0.113.11";
    assert_eq!(get(&proxy, reader, "/robots.txt", BROWSER), 200);
    // Paths not disallowed to every group, and exempt ones, never count.
    for n in 0..5 {
        assert_eq!(get(&proxy, reader, &format!("/gpt-only/{n}"), BROWSER), 200);
        assert_eq!(
            get(&proxy, reader, &format!("/star-only/{n}"), BROWSER),
            200
        );
        assert_eq!(get(&proxy, reader, "/private/public/ad.txt", BROWSER), 200);
    }
    assert_eq!(strikes(&proxy), 0.0);
    // Strikes, and at the third the address is the crawler `disguised`.
    assert_eq!(get(&proxy, reader, "/private/a", BROWSER), 200);
    assert_eq!(get(&proxy, reader, "/private/b", BROWSER), 200);
    let refused = from(&proxy, reader, "GET", "/private/c", BROWSER);
    assert_eq!(refused.status, 403);
    assert!(refused.text().contains("disguised"), "{}", refused.text());
    assert!(
        refused.text().contains("read robots.txt"),
        "{}",
        refused.text()
    );
    assert_eq!(origin.proxied_to("/private/c").len(), 0);
    // Bound by the `*` group as a crawler now; what it allows still passes.
    assert_eq!(get(&proxy, reader, "/star-only/x", BROWSER), 403);
    assert_eq!(get(&proxy, reader, "/gpt-only/x", BROWSER), 200);
    assert_eq!(get(&proxy, reader, "/page", BROWSER), 200);
    assert_eq!(strikes(&proxy), 3.0);
    assert_eq!(decisions(&proxy, "disguised", "disguised", 2.0), 2.0);
    let (_, explained) = proxy.explain_from("shop.example", BROWSER, "/private/d", reader);
    assert_eq!(explained["decision"], "disguised", "{explained}");
    assert_eq!(explained["crawler"]["name"], "disguised", "{explained}");
    // /explain changes nothing.
    assert_eq!(strikes(&proxy), 3.0);
    // The console's crawler table has a row for it.
    let report = proxy.admin_get("/reports/crawlers?origin=shop");
    assert!(report.text().contains("disguised"), "{}", report.text());
    // Other addresses are untouched.
    assert_eq!(get(&proxy, "203.0.113.10", "/private/x", BROWSER), 200);
}

#[test]
fn a_head_of_robots_txt_counts_as_a_read_and_report_mode_only_logs() {
    let origin = Origin::start();
    let proxy = disguised_proxy(&origin, "report", 2);
    let reader = "203.0.113.12";
    assert_eq!(
        from(&proxy, reader, "HEAD", "/robots.txt", BROWSER).status,
        200
    );
    for n in 0..4 {
        assert_eq!(get(&proxy, reader, &format!("/private/{n}"), BROWSER), 200);
    }
    assert_eq!(
        origin
            .proxied()
            .iter()
            .filter(|r| r.target.starts_with("/private/"))
            .count(),
        4
    );
    assert_eq!(strikes(&proxy), 4.0);
    assert_eq!(decisions(&proxy, "would_disguised", "disguised", 3.0), 3.0);
    assert!(proxy.wait_log(
        "would_block (report), disguised crawler",
        1,
        Duration::from_secs(5)
    ));
    assert!(proxy.wait_log(
        "disguised crawler: it read robots.txt",
        1,
        Duration::from_secs(5)
    ));
}

#[test]
fn a_disguised_crawler_is_banned_with_the_offenders_settings() {
    let origin = Origin::start();
    let proxy = start(
        &origin,
        &format!(
            "{}    disguised: {{action: ban, strikes: 2}}\n    offenders: {{ban: 1h}}\n",
            robots_yaml()
        ),
    );
    let reader = "203.0.113.13";
    assert_eq!(get(&proxy, reader, "/robots.txt", BROWSER), 200);
    assert_eq!(get(&proxy, reader, "/private/a", BROWSER), 200);
    assert_eq!(get(&proxy, reader, "/private/b", BROWSER), 403);
    let bans = proxy.admin_get("/bans?origin=shop").json();
    assert_eq!(bans["bans"][0]["client"], reader, "{bans}");
    // Banned: as a crawler, and as the disguised crawler it is behind its browser User-Agent.
    assert_eq!(get(&proxy, reader, "/page", GPTBOT), 403);
    assert_eq!(get(&proxy, reader, "/page", BROWSER), 403);
    assert_eq!(get(&proxy, reader, "/robots.txt", BROWSER), 200);
    assert_eq!(get(&proxy, "203.0.113.14", "/private/a", BROWSER), 200);
}

#[test]
fn with_a_shared_store_reads_and_strikes_count_across_replicas() {
    let origin = Origin::start();
    let redis = RedisServer::start();
    let replica = || {
        Proxy::start(&format!(
            "trusted_proxies: [\"127.0.0.1/32\"]\n\
             state:\n  backend: redis\n  redis: {{url: \"{}\", prefix: \"rg-disguised:\", timeout: 1s}}\n{}",
            redis.url(),
            support::site(&origin, "shop.example", &format!("{}    disguised: {{action: block, strikes: 3}}\n", robots_yaml()))
        ))
    };
    let a = replica();
    let b = replica();
    for proxy in [&a, &b] {
        assert_eq!(
            proxy.wait_metric("robotsguard_state_backend_up", &[], 1.0),
            1.0,
            "the store is reachable"
        );
    }
    let reader = "203.0.113.15";
    // Never read: nothing counts on either.
    assert_eq!(get(&b, reader, "/private/0", BROWSER), 200);
    assert_eq!(strikes(&b), 0.0);
    // Read through one; the other mirrors the read within a second or so: its first strike.
    assert_eq!(get(&a, reader, "/robots.txt", BROWSER), 200);
    let mut mirrored = false;
    for n in 0..100 {
        assert_eq!(
            get(&b, reader, &format!("/private/mirror-{n}"), BROWSER),
            200
        );
        if strikes(&b) == 1.0 {
            mirrored = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(mirrored, "the read reached the other replica");
    // Strikes through both count together.
    assert_eq!(get(&a, reader, "/private/2", BROWSER), 200);
    assert_eq!(get(&b, reader, "/private/3", BROWSER), 403);
    assert_eq!(get(&a, reader, "/private/4", BROWSER), 403);
}
