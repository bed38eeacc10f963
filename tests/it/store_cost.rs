//! What a request costs the shared store (issue 59), counted exactly: two robotsguard replicas
//! reach a real Redis server through a relay that holds every chunk 20 ms each way (a store in
//! another zone) and records each command they send. Browsers, crawlers without a budget,
//! verified crawlers and banned clients cost no command; a crawler under a Crawl-delay costs one
//! pipeline when its budget is due; a crawler that keeps asking while over its budget costs
//! nothing more on a replica until its window ends, and no replica admits it twice in a window.
//! Counts, not timings: the relay sees every command, whatever the machine's load.

use crate::support;

use std::thread;
use std::time::{Duration, Instant};

use support::redis::RedisServer;
use support::relay::Relay;
use support::{metric, Origin, Proxy, Request};

const PREFIX: &str = "rg-cost:";
const SLOWBOT: &str = "Mozilla/5.0 (compatible; SlowBot/1.0)";
const QUICKBOT: &str = "Mozilla/5.0 (compatible; QuickBot/1.0)";
const EXAMPLEBOT: &str = "Mozilla/5.0 (compatible; ExampleBot/1.0)";
const TRUSTEDBOT: &str = "Mozilla/5.0 (compatible; TrustedBot/1.0)";
/// The address TrustedBot's published range holds.
const TRUSTED_ADDRESS: &str = "198.51.100.200";

/// The one-way delay of the relay.
const FAR: Duration = Duration::from_millis(20);

/// A replica of `origin` whose store is reached through `relay`: SlowBot under a 30 s
/// Crawl-delay, QuickBot under 2 s, ExampleBot without one, TrustedBot verified by its range,
/// bans after two strikes.
fn replica(origin: &Origin, relay: &Relay) -> Proxy {
    let robots = "User-agent: slowbot\\nCrawl-delay: 30\\nDisallow: /private\\n\\n\
                  User-agent: quickbot\\nCrawl-delay: 2\\nDisallow: /private\\n\\n\
                  User-agent: *\\nDisallow: /private\\n";
    let body = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n\
         state:\n  backend: redis\n  redis: {{url: \"{url}\", prefix: \"{PREFIX}\", timeout: 3s}}\n\
         defaults:\n  crawl_delay: {{action: enforce, max: 60s}}\n  \
         offenders: {{action: ban, strikes: 2, window: 10m, ban: 1h}}\n\
         crawlers:\n  extra:\n    \
         - {{name: SlowBot, tokens: [slowbot], pattern: SlowBot, category: ai-training}}\n    \
         - {{name: QuickBot, tokens: [quickbot], pattern: QuickBot, category: ai-training}}\n    \
         - {{name: ExampleBot, tokens: [examplebot], pattern: ExampleBot, category: ai-training}}\n    \
         - {{name: TrustedBot, tokens: [trustedbot], pattern: TrustedBot, category: search, verify: {{ips: [\"file:ranges/trusted.json\"]}}}}\n\
         origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{upstream}\"\n    \
         robots: {{source: inline, text: \"{robots}\"}}\n",
        url = relay.url(),
        upstream = origin.addr(),
    );
    let proxy = Proxy::builder(&body)
        .files(&[("ranges/trusted.json", &format!("[\"{TRUSTED_ADDRESS}\"]"))])
        .start();
    let ready = wait_for(Duration::from_secs(20), || {
        let metrics = proxy.metrics();
        metric(&metrics, "robotsguard_state_backend_up", &[]) == 1.0
            && metrics.contains("ranges/trusted.json")
    });
    assert!(
        ready,
        "the store is reachable and the range loaded: {}",
        proxy.stderr()
    );
    proxy
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

fn from(proxy: &Proxy, client: &str, user_agent: &str, path: &str) -> support::Response {
    proxy.send(
        &Request::get(path)
            .host("shop.example")
            .ua(user_agent)
            .header("X-Forwarded-For", client),
    )
}

/// Whether `command` is one the background loops send whatever the requests (the checks each
/// second, the readers and bans mirrors, the robots.txt history, the reports publisher, the
/// connection's own handshake), not one a request sent.
fn background(command: &[String]) -> bool {
    let name = command.first().map_or("", String::as_str);
    if matches!(
        name,
        "MGET"
            | "ZRANGEBYSCORE"
            | "ZREMRANGEBYSCORE"
            | "HGETALL"
            | "TIME"
            | "GET"
            | "PING"
            | "CLIENT"
            | "HELLO"
            | "SELECT"
            | "SUBSCRIBE"
            | "SCRIPT"
            | "EXPIRE"
            | "INFO"
    ) {
        return true;
    }
    let keys = command.get(1..).unwrap_or_default();
    if keys
        .iter()
        .any(|arg| arg.starts_with(&format!("{PREFIX}reports")) || arg.contains("trap-secret"))
    {
        return true;
    }
    // Scripts are told apart by their first key: the ban list's and the history's are the
    // loop's; a request's start with the readers set.
    if name == "EVALSHA" || name == "EVAL" {
        let first_key = command.get(3).map_or("", String::as_str);
        return first_key == format!("{PREFIX}bans") || first_key.contains("robots-history");
    }
    false
}

/// The commands requests sent since `mark`, by name.
fn request_commands(relay: &Relay, mark: usize) -> Vec<String> {
    relay
        .commands_since(mark)
        .into_iter()
        .filter(|command| !background(command))
        .map(|command| command.join(" "))
        .collect()
}

/// Sends `count` requests and returns the store commands they cost.
fn cost_of(
    relay: &Relay,
    count: usize,
    mut request: impl FnMut(usize) -> support::Response,
    status: u16,
) -> Vec<String> {
    let mark = relay.mark();
    for n in 0..count {
        let answer = request(n);
        assert_eq!(answer.status, status, "request {n}: {}", answer.text());
    }
    request_commands(relay, mark)
}

fn names(commands: &[String]) -> Vec<&str> {
    commands
        .iter()
        .map(|c| c.split(' ').next().unwrap_or(""))
        .collect()
}

#[test]
fn a_far_store_costs_browsers_and_unbudgeted_crawlers_nothing_and_a_budget_one_pipeline() {
    let redis = RedisServer::start();
    let upstream = format!("127.0.0.1:{}", redis.port)
        .parse()
        .expect("an address");
    let relay = Relay::start(upstream, FAR);
    let origin = Origin::start();
    let a = replica(&origin, &relay);
    let b = replica(&origin, &relay);

    // Browsers, on allowed and disallowed paths: nothing.
    let browsers = cost_of(
        &relay,
        20,
        |n| {
            let path = if n % 2 == 0 { "/page" } else { "/private/x" };
            from(&a, "198.51.100.10", support::BROWSER, path)
        },
        200,
    );
    assert!(browsers.is_empty(), "browsers: {browsers:?}");

    // A crawler without a Crawl-delay on allowed paths: nothing.
    let unbudgeted = cost_of(
        &relay,
        20,
        |n| from(&a, "198.51.100.11", EXAMPLEBOT, &format!("/page/{n}")),
        200,
    );
    assert!(
        unbudgeted.is_empty(),
        "crawler without a budget: {unbudgeted:?}"
    );

    // A verified crawler: nothing (its identity is this process's ranges and caches).
    let verified = cost_of(
        &relay,
        20,
        |n| from(&a, TRUSTED_ADDRESS, TRUSTEDBOT, &format!("/page/{n}")),
        200,
    );
    assert!(verified.is_empty(), "verified crawler: {verified:?}");
    assert!(
        metric(
            &a.metrics(),
            "robotsguard_crawler_verifications_total",
            &[("crawler", "TrustedBot"), ("result", "verified")],
        ) >= 1.0,
        "TrustedBot was verified"
    );

    // A crawler under a Crawl-delay: its due request costs one pipeline (SET NX PX, PTTL)...
    let slow = "198.51.100.12";
    let due = cost_of(&relay, 1, |_| from(&a, slow, SLOWBOT, "/page"), 200);
    assert_eq!(names(&due), ["SET", "PTTL"], "{due:?}");
    // ...and its refusals on the replica that admitted it nothing.
    let refused_here = cost_of(&relay, 20, |_| from(&a, slow, SLOWBOT, "/page"), 429);
    assert!(refused_here.is_empty(), "{refused_here:?}");
    // On another replica: the first refusal asks the store once, and the node keeps the
    // store's answer until the window ends: asking again costs nothing, and is refused (no
    // over-admission: one admission per window in the fleet).
    let first_elsewhere = cost_of(&relay, 1, |_| from(&b, slow, SLOWBOT, "/page"), 429);
    assert_eq!(
        names(&first_elsewhere),
        ["SET", "PTTL"],
        "{first_elsewhere:?}"
    );
    let refused_elsewhere = cost_of(&relay, 30, |_| from(&b, slow, SLOWBOT, "/page"), 429);
    assert!(refused_elsewhere.is_empty(), "{refused_elsewhere:?}");

    // The kept answer ends with the store's window, not later: once QuickBot's 2 s have
    // passed, the replica that refused it asks again, and admits it.
    let quick = "198.51.100.13";
    assert_eq!(from(&a, quick, QUICKBOT, "/page").status, 200);
    let admitted_at = Instant::now();
    let refused = cost_of(&relay, 5, |_| from(&b, quick, QUICKBOT, "/page"), 429);
    assert_eq!(names(&refused), ["SET", "PTTL"], "{refused:?}");
    thread::sleep(Duration::from_millis(2_300).saturating_sub(admitted_at.elapsed()));
    let next_window = cost_of(&relay, 1, |_| from(&b, quick, QUICKBOT, "/page"), 200);
    assert_eq!(names(&next_window), ["SET", "PTTL"], "{next_window:?}");

    // Strikes cost one script each (the scripts were loaded when the replica connected: no
    // NOSCRIPT and second round trip); the second bans.
    let banned = "198.51.100.14";
    let strikes = cost_of(
        &relay,
        2,
        |n| from(&a, banned, EXAMPLEBOT, &format!("/private/{n}")),
        403,
    );
    assert_eq!(names(&strikes), ["EVALSHA", "EVALSHA"], "{strikes:?}");
    // The ban reaches the other replica's mirror through the store (announced).
    let mirrored = wait_for(Duration::from_secs(10), || {
        b.admin_get("/bans?origin=shop").text().contains(banned)
    });
    assert!(mirrored, "the ban reached the other replica");
    // A banned client is refused from each replica's mirror: nothing, on either.
    for proxy in [&a, &b] {
        let bans = cost_of(
            &relay,
            20,
            |n| from(proxy, banned, EXAMPLEBOT, &format!("/page/{n}")),
            403,
        );
        assert!(bans.is_empty(), "banned client: {bans:?}");
    }
    // Ten browsers, SlowBot once, QuickBot once per window: refusals never reached the origin.
    assert_eq!(origin.proxied_to("/page").len(), 13);
    // The relay carried every command the server counted (the strike script calls PTTL once
    // per strike on the server): the instrument is sound.
    let relayed = relay
        .commands()
        .iter()
        .filter(|command| command.first().map(String::as_str) == Some("PTTL"))
        .count() as u64;
    assert_eq!(cmdstat_calls(&redis, "pttl"), relayed + 2);
}

/// `calls` of `command` in the server's `INFO commandstats`.
fn cmdstat_calls(redis: &RedisServer, command: &str) -> u64 {
    let stats = redis.command(&["INFO", "commandstats"]);
    stats
        .lines()
        .find_map(|line| line.trim().strip_prefix(&format!("cmdstat_{command}:")))
        .and_then(|rest| {
            rest.split(',')
                .find_map(|field| field.strip_prefix("calls="))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

#[test]
fn a_store_of_a_newer_key_schema_is_said_once_and_still_served() {
    let redis = RedisServer::start();
    let origin = Origin::start();
    // A fresh store: the first replica writes the schema it uses.
    let direct = Relay::start(
        format!("127.0.0.1:{}", redis.port)
            .parse()
            .expect("an address"),
        Duration::ZERO,
    );
    let first = replica(&origin, &direct);
    assert!(
        wait_for(Duration::from_secs(10), || redis
            .command(&["GET", &format!("{PREFIX}schema")])
            == "1"),
        "the schema is written"
    );
    assert_eq!(
        metric(&first.metrics(), "robotsguard_state_schema_newer", &[]),
        0.0
    );
    drop(first);
    // A newer release's keys: this replica says so once, and keeps serving from the store.
    redis.command(&["SET", &format!("{PREFIX}schema"), "2"]);
    let older = replica(&origin, &direct);
    assert!(
        wait_for(Duration::from_secs(10), || metric(
            &older.metrics(),
            "robotsguard_state_schema_newer",
            &[]
        ) == 1.0),
        "the gauge says so: {}",
        older.stderr()
    );
    // A few more checks (one a second) say nothing more.
    thread::sleep(Duration::from_millis(2_500));
    let said = older
        .stderr()
        .matches("carry a newer schema than this release reads")
        .count();
    assert_eq!(said, 1, "{}", older.stderr());
    let due = cost_of(
        &direct,
        1,
        |_| from(&older, "198.51.100.60", SLOWBOT, "/page"),
        200,
    );
    assert_eq!(
        names(&due),
        ["SET", "PTTL"],
        "the budget is still shared: {due:?}"
    );
    assert_eq!(
        redis.command(&["GET", &format!("{PREFIX}schema")]),
        "2",
        "an older replica never writes the schema back"
    );
    // Back to this schema (the newer release rolled back): the gauge follows.
    redis.command(&["SET", &format!("{PREFIX}schema"), "1"]);
    assert!(wait_for(Duration::from_secs(10), || metric(
        &older.metrics(),
        "robotsguard_state_schema_newer",
        &[]
    ) == 0.0));
}
