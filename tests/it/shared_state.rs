//! State shared by replicas through a real Redis server (`state.backend: redis`): two robotsguard
//! processes enforce one Crawl-delay budget, one strike count and one ban, see each other's
//! robots.txt reads, and lift a ban for both; when the store dies or freezes, requests are still
//! answered (decided from memory) and `robotsguard_state_backend_up` drops to 0; when it is back,
//! the processes share again by themselves.

use crate::support;

use std::collections::HashMap;
use std::thread;
use std::time::{Duration, Instant};

use support::redis::RedisServer;
use support::{metric, Origin, Proxy, Request};

const EXAMPLEBOT: &str = "Mozilla/5.0 (compatible; ExampleBot/1.0)";
const PREFIX: &str = "rg-test:";

/// A proxy of `origin` keeping its state in `redis`, with a 2 s Crawl-delay and bans after 3
/// strikes. The store's timeout is generous: these tests are about sharing, not speed, and the
/// machine running them may be busy.
fn start(origin: &Origin, redis: &RedisServer, timeout: &str) -> Proxy {
    start_at(origin, &redis.url(), timeout)
}

/// [`start`] with the store at `url`.
fn start_at(origin: &Origin, url: &str, timeout: &str) -> Proxy {
    let body = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n\
         state:\n  backend: redis\n  redis: {{url: \"{url}\", prefix: \"{PREFIX}\", timeout: {timeout}}}\n\
         defaults:\n  crawl_delay: {{action: enforce, max: 60s}}\n  \
         offenders: {{action: ban, strikes: 3, window: 10m, ban: 4s}}\n\
         crawlers:\n  extra:\n    - {{name: ExampleBot, tokens: [examplebot], pattern: ExampleBot, category: ai-training}}\n\
         origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    \
         robots: {{source: inline, text: \"User-agent: *\\nCrawl-delay: 2\\nDisallow: /private\\n\"}}\n",
        origin.addr()
    );
    let proxy = Proxy::start(&body);
    assert!(
        wait_up(&proxy, 1.0),
        "the store is reachable: {}",
        proxy.stderr()
    );
    proxy
}

fn from(proxy: &Proxy, client: &str, path: &str) -> support::Response {
    proxy.send(
        &Request::get(path)
            .host("shop.example")
            .ua(EXAMPLEBOT)
            .header("X-Forwarded-For", client),
    )
}

/// Waits up to 10 s for `robotsguard_state_backend_up` to read `want`.
fn wait_up(proxy: &Proxy, want: f64) -> bool {
    wait_for(Duration::from_secs(10), || {
        metric(&proxy.metrics(), "robotsguard_state_backend_up", &[]) == want
    })
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

fn lift(proxy: &Proxy, client: &str) -> u16 {
    let request = Request::new("DELETE", &format!("/bans?origin=shop&client={client}"))
        .host(&proxy.admin.to_string());
    support::Conn::open(proxy.admin).send(&request).status
}

#[test]
fn two_processes_share_one_budget_one_strike_count_one_ban_and_robots_reads() {
    let redis = RedisServer::start();
    let origin = Origin::start();
    let a = start(&origin, &redis, "1s");
    let b = start(&origin, &redis, "1s");

    // Crawl-delay: the budget of a crawler at one address is spent on either process.
    let crawler = "198.51.100.7";
    assert_eq!(from(&a, crawler, "/page").status, 200);
    let admitted = Instant::now();
    let refused = from(&b, crawler, "/page");
    assert_eq!(refused.status, 429, "{}", refused.text());
    let retry: u64 = refused
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("Retry-After in seconds");
    assert!((1..=2).contains(&retry), "Retry-After {retry}");
    assert_eq!(
        redis.command(&[
            "EXISTS",
            &format!("{PREFIX}delay:shop:examplebot:{crawler}")
        ]),
        "1",
        "the budget lives in the store"
    );
    let (_, explained) = b.explain_from("shop.example", EXAMPLEBOT, "/page", crawler);
    assert!(
        explained["crawl_delay"]["wait_seconds"]
            .as_f64()
            .unwrap_or(0.0)
            > 0.0,
        "/explain on the other process sees the spent budget: {explained}"
    );
    let wait =
        Duration::from_secs(2).saturating_sub(admitted.elapsed()) + Duration::from_millis(300);
    thread::sleep(wait);
    assert_eq!(
        from(&b, crawler, "/page").status,
        200,
        "the delay has passed"
    );
    assert_eq!(
        metric(
            &b.metrics(),
            "robotsguard_rate_limited_total",
            &[("origin", "shop"), ("crawler", "ExampleBot")]
        ),
        1.0
    );

    // robots.txt read through one process counts as read on the other.
    let reader = "198.51.100.8";
    assert_eq!(from(&a, reader, "/robots.txt").status, 200);
    assert_eq!(from(&b, reader, "/private/x").status, 403);
    let metrics = b.metrics();
    let violations = |read: &str| support::shop_violations(&metrics, "ExampleBot", read);
    assert_eq!(violations("yes"), 1.0, "{metrics}");
    assert_eq!(violations("no"), 0.0);

    // Both processes listen for announcements of ban changes (and reload their mirror at once).
    assert!(
        wait_for(Duration::from_secs(5), || redis
            .command(&["PUBSUB", "NUMSUB", &format!("{PREFIX}bans:version")])
            .ends_with("\n2")),
        "subscribed: {}",
        redis.command(&["PUBSUB", "NUMSUB", &format!("{PREFIX}bans:version")])
    );
    // Strikes on either process count together; the third bans on both.
    let offender = "198.51.100.9";
    assert_eq!(from(&a, offender, "/private/1").status, 403);
    assert_eq!(from(&b, offender, "/private/2").status, 403);
    assert_eq!(
        redis.command(&["GET", &format!("{PREFIX}strikes:shop:{offender}")]),
        "2"
    );
    assert_eq!(from(&a, offender, "/private/3").status, 403);
    let banned_at = Instant::now();
    let refused = from(&a, offender, "/allowed");
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(refused.text().contains("banned"), "{}", refused.text());
    assert!(
        wait_for(Duration::from_secs(3), || from(&b, offender, "/allowed")
            .status
            == 403),
        "the other process mirrors the ban"
    );
    assert_eq!(
        from(&b, offender, "/robots.txt").status,
        200,
        "robots.txt stays readable"
    );
    let bans = b.admin_get("/bans?origin=shop").json();
    assert_eq!(bans["bans"][0]["client"], offender, "{bans}");
    assert_eq!(
        metric(
            &a.metrics(),
            "robotsguard_bans_total",
            &[("origin", "shop")]
        ),
        1.0,
        "the process that imposed it counts it"
    );
    assert_eq!(
        metric(
            &b.metrics(),
            "robotsguard_banned_clients",
            &[("origin", "shop")]
        ),
        1.0
    );
    // The ban ends on both.
    let ended = banned_at + Duration::from_secs(4) + Duration::from_millis(300);
    thread::sleep(ended.saturating_duration_since(Instant::now()));
    assert_eq!(from(&a, offender, "/allowed").status, 200);
    // Not banned on the other either: limited, since that request spent the shared budget.
    assert_eq!(from(&b, offender, "/allowed").status, 429);

    // A ban lifted through one process is lifted on the other.
    let lifted = "198.51.100.10";
    for n in 0..3 {
        from(&b, lifted, &format!("/private/{n}"));
    }
    // Asked of the admin endpoint: a request would spend the address's Crawl-delay budget.
    let banned_on = |proxy: &Proxy| {
        proxy.admin_get("/bans?origin=shop").json()["bans"]
            .as_array()
            .is_some_and(|bans| bans.iter().any(|ban| ban["client"] == lifted))
    };
    assert!(wait_for(Duration::from_secs(3), || banned_on(&a)));
    assert_eq!(from(&a, lifted, "/allowed").status, 403);
    assert_eq!(lift(&a, lifted), 200);
    assert_eq!(
        redis.command(&[
            "HEXISTS",
            &format!("{PREFIX}bans"),
            &format!("{lifted} shop")
        ]),
        "0",
        "gone from the store"
    );
    // A mirror reload that read the list just before the lift may show the ban for one more
    // check.
    assert!(wait_for(Duration::from_secs(3), || !banned_on(&a)));
    assert_eq!(from(&a, lifted, "/allowed").status, 200);
    assert!(
        wait_for(Duration::from_secs(3), || !banned_on(&b)),
        "the lift reaches the other process"
    );
    assert_eq!(
        from(&b, lifted, "/allowed").status,
        429,
        "limited, not banned"
    );
    assert_eq!(lift(&b, lifted), 404);
}

#[test]
fn a_dead_store_falls_back_to_memory_and_a_restarted_one_is_shared_again() {
    let mut redis = RedisServer::start();
    let origin = Origin::start();
    let proxy = start(&origin, &redis, "200ms");

    redis.kill();
    // Every request is still answered, decided from this process's memory: the Crawl-delay
    // budget holds within the process.
    let crawler = "198.51.100.20";
    assert_eq!(from(&proxy, crawler, "/page").status, 200);
    assert_eq!(from(&proxy, crawler, "/page").status, 429);
    assert!(wait_up(&proxy, 0.0), "the gauge drops");
    let metrics = proxy.metrics();
    assert!(
        support::samples(&metrics, "robotsguard_state_backend_errors_total")
            .iter()
            .map(|(_, v)| v)
            .sum::<f64>()
            >= 1.0,
        "{metrics}"
    );
    assert!(
        proxy.stderr().contains("shared state store"),
        "a log line says so: {}",
        proxy.stderr()
    );
    // Bans go on too, in memory.
    let offender = "198.51.100.21";
    for n in 0..3 {
        assert_eq!(from(&proxy, offender, &format!("/private/{n}")).status, 403);
    }
    assert_eq!(from(&proxy, offender, "/allowed").status, 403);

    redis.restart();
    assert!(wait_up(&proxy, 1.0), "it reconnects by itself");
    // The ban made while the store was away is written to it.
    assert!(
        wait_for(Duration::from_secs(3), || redis.command(&[
            "HGET",
            &format!("{PREFIX}bans"),
            &format!("{offender} shop")
        ]) != "(nil)"),
        "the ban reaches the restarted store"
    );
    // New budgets live in the store again.
    let crawler = "198.51.100.22";
    assert_eq!(from(&proxy, crawler, "/page").status, 200);
    assert_eq!(
        redis.command(&[
            "EXISTS",
            &format!("{PREFIX}delay:shop:examplebot:{crawler}")
        ]),
        "1"
    );
}

/// The ids of the store's clients other than the one asking and the subscribers (`CLIENT
/// LIST`): the proxies' command connections.
fn other_clients(redis: &RedisServer) -> Vec<String> {
    redis
        .command(&["CLIENT", "LIST"])
        .lines()
        .filter(|line| !line.contains("cmd=client|list"))
        .filter(|line| {
            !line
                .split(' ')
                .any(|field| field.starts_with("flags=") && field.contains('P'))
        })
        .filter_map(|line| line.split(' ').find(|field| field.starts_with("id=")))
        .map(str::to_owned)
        .collect()
}

/// Waits up to 5 s for the proxy's command connections to be all new: none of `before`.
fn assert_new_connection(redis: &RedisServer, before: &[String]) {
    assert!(
        wait_for(Duration::from_secs(5), || {
            let now = other_clients(redis);
            !now.is_empty() && now.iter().all(|id| !before.contains(id))
        }),
        "a new connection: before {before:?}, now {:?}",
        other_clients(redis)
    );
}

/// A store user whose ACL has no pub/sub channels (the Redis 7 default for new users): bans are
/// still imposed and shared (the announcement is best effort), the store stays in use, and the
/// refusal is said once.
#[test]
fn a_user_without_the_announcement_channel_still_bans() {
    let redis = RedisServer::start();
    redis.command(&[
        "ACL",
        "SETUSER",
        "rg",
        "on",
        ">secret",
        "~*",
        "+@all",
        "resetchannels",
    ]);
    let origin = Origin::start();
    let url = format!("redis://rg:secret@127.0.0.1:{}/0", redis.port);
    let proxy = start_at(&origin, &url, "1s");
    let offender = "198.51.100.60";
    for n in 0..3 {
        assert_eq!(from(&proxy, offender, &format!("/private/{n}")).status, 403);
    }
    assert_eq!(from(&proxy, offender, "/allowed").status, 403, "banned");
    assert_ne!(
        redis.command(&[
            "HGET",
            &format!("{PREFIX}bans"),
            &format!("{offender} shop")
        ]),
        "(nil)",
        "the ban is in the store"
    );
    assert_eq!(
        metric(&proxy.metrics(), "robotsguard_state_backend_up", &[]),
        1.0,
        "the store stays in use"
    );
    assert!(
        proxy.wait_log("refuses ban announcements", 1, Duration::from_secs(5)),
        "{}",
        proxy.stderr()
    );
}

/// A primary that becomes a replica under the proxy (a failover behind the URL's name): writes
/// are refused (`READONLY`), requests are still answered from memory, and the proxy connects
/// again, so that it reaches wherever the name points once the failover is done.
#[test]
fn a_store_turned_replica_is_connected_to_again() {
    let redis = RedisServer::start();
    let origin = Origin::start();
    let proxy = start(&origin, &redis, "200ms");
    let before = other_clients(&redis);
    assert!(!before.is_empty(), "the proxy's connection");

    // Replica of a primary that is not there: read-only at once.
    redis.command(&["REPLICAOF", "127.0.0.1", "1"]);
    let crawler = "198.51.100.30";
    assert_eq!(from(&proxy, crawler, "/page").status, 200);
    assert_new_connection(&redis, &before);
    assert!(
        proxy.stderr().contains("read only replica"),
        "{}",
        proxy.stderr()
    );

    redis.command(&["REPLICAOF", "NO", "ONE"]);
    assert!(wait_up(&proxy, 1.0));
    // A new client each time: one admitted from memory would be limited there next time.
    let mut attempt = 0;
    assert!(
        wait_for(Duration::from_secs(5), || {
            attempt += 1;
            let crawler = format!("198.51.101.{attempt}");
            from(&proxy, &crawler, "/page").status == 200
                && redis.command(&[
                    "EXISTS",
                    &format!("{PREFIX}delay:shop:examplebot:{crawler}"),
                ]) == "1"
        }),
        "budgets live in the store again"
    );
}

#[test]
fn a_frozen_store_costs_a_request_at_most_the_timeout() {
    let redis = RedisServer::start();
    let origin = Origin::start();
    let proxy = start(&origin, &redis, "300ms");
    redis.pause();
    let crawler = "198.51.100.30";
    let sent = Instant::now();
    let first = from(&proxy, crawler, "/page");
    let waited = sent.elapsed();
    assert_eq!(first.status, 200, "decided from memory");
    // Bounded by the timeout (300 ms) with room for a busy machine; a request that waited for
    // the frozen store would never be answered.
    assert!(waited < Duration::from_secs(5), "answered after {waited:?}");
    assert!(wait_up(&proxy, 0.0), "the gauge drops");
    // While the store is down, requests do not wait for it at all.
    assert_eq!(from(&proxy, crawler, "/page").status, 429);
    redis.resume();
    assert!(wait_up(&proxy, 1.0), "it is used again once it answers");
}

/// A store that stops answering for several checks (its address gone without the connection
/// being closed, as when a pod is rescheduled): the connection is replaced rather than waited on.
#[test]
fn a_store_silent_for_several_checks_gets_a_new_connection() {
    let redis = RedisServer::start();
    let origin = Origin::start();
    let proxy = start(&origin, &redis, "200ms");
    let before = other_clients(&redis);
    assert!(!before.is_empty(), "the proxy's connection");
    redis.pause();
    assert!(wait_up(&proxy, 0.0), "the gauge drops");
    // Three checks a second apart go unanswered.
    thread::sleep(Duration::from_secs(4));
    redis.resume();
    assert!(wait_up(&proxy, 1.0), "it is used again once it answers");
    assert_new_connection(&redis, &before);
}

/// A proxy of `origin` reading robots.txt from a file that starts as `robots`, banning after 2
/// strikes, its state in `redis`.
fn start_with_robots_file(origin: &Origin, redis: &RedisServer, robots: &str) -> Proxy {
    let body = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n\
         state:\n  backend: redis\n  redis: {{url: \"{}\", prefix: \"{PREFIX}\", timeout: 1s}}\n\
         defaults:\n  offenders: {{action: ban, strikes: 2, window: 10m, ban: 1h}}\n\
         crawlers:\n  extra:\n    - {{name: ExampleBot, tokens: [examplebot], pattern: ExampleBot, category: ai-training}}\n\
         origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    \
         robots: {{source: file, path: robots.txt}}\n",
        redis.url(),
        origin.addr()
    );
    let proxy = Proxy::builder(&body)
        .files(&[("robots.txt", robots)])
        .start();
    assert!(
        wait_up(&proxy, 1.0),
        "the store is reachable: {}",
        proxy.stderr()
    );
    proxy
}

/// A replica started after robots.txt changed never saw the earlier copy, but the replicas'
/// shared history did: a rule younger than 24 hours does not strike there either.
#[test]
fn the_robots_txt_history_is_shared_so_a_young_replica_does_not_strike_a_new_rule() {
    let redis = RedisServer::start();
    let origin = Origin::start();
    let before = "User-agent: *\nDisallow: /always\n";
    let after = "User-agent: *\nDisallow: /always\nDisallow: /private\n";
    let old = start_with_robots_file(&origin, &redis, before);
    let path = old.dir.path().join("robots.txt");
    let staged = old.dir.path().join("robots.txt.new");
    std::fs::write(&staged, after).expect("robots.txt written");
    std::fs::rename(&staged, &path).expect("robots.txt replaced");
    let history = format!("{PREFIX}robots-history:shop");
    assert!(
        wait_for(Duration::from_secs(10), || redis
            .command(&["ZCARD", &history])
            == "1"),
        "the replica that saw the change writes the copy it replaced: {}",
        old.stderr()
    );

    // The young replica only ever read the new robots.txt.
    let young = start_with_robots_file(&origin, &redis, after);
    let client = "198.51.100.40";
    for n in 0..4 {
        assert_eq!(from(&young, client, &format!("/private/{n}")).status, 403);
    }
    assert_eq!(
        redis.command(&["EXISTS", &format!("{PREFIX}strikes:shop:{client}")]),
        "0",
        "no strike: the earlier robots.txt allowed /private within the last 24 hours"
    );
    assert_eq!(from(&young, client, "/public").status, 200, "not banned");
    // A rule every copy of the last 24 hours had does strike, and bans.
    let offender = "198.51.100.41";
    for n in 0..2 {
        assert_eq!(from(&young, offender, &format!("/always/{n}")).status, 403);
    }
    assert_eq!(from(&young, offender, "/public").status, 403, "banned");
}

/// Calls the server has counted of the commands requests send (`INFO commandstats`): the
/// Crawl-delay pipeline (SET, PTTL), the robots.txt read (SET) and the violation script.
fn request_commands(redis: &RedisServer) -> HashMap<String, u64> {
    let stats = redis.command(&["INFO", "commandstats"]);
    let mut calls = HashMap::new();
    for line in stats.lines() {
        let Some((name, rest)) = line
            .trim()
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        if !["set", "pttl", "evalsha", "eval"].contains(&name) {
            continue;
        }
        let count = rest
            .split(',')
            .find_map(|field| field.strip_prefix("calls="))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        calls.insert(name.to_string(), count);
    }
    calls
}

fn total(calls: &HashMap<String, u64>) -> u64 {
    calls.values().sum()
}

#[test]
fn browsers_never_reach_the_store_and_a_crawler_decision_sends_one_batch() {
    let redis = RedisServer::start();
    let origin = Origin::start();
    let proxy = start(&origin, &redis, "1s");
    // The first script call may be answered NOSCRIPT and sent again whole: load it first.
    assert_eq!(from(&proxy, "198.51.100.52", "/private/x").status, 403);
    let before = request_commands(&redis);
    for n in 0..20 {
        let answer = proxy.send(
            &Request::get(&format!("/private/{n}"))
                .host("shop.example")
                .ua(support::BROWSER)
                .header("X-Forwarded-For", "198.51.100.50"),
        );
        assert_eq!(answer.status, 200);
    }
    assert_eq!(
        request_commands(&redis),
        before,
        "browser requests sent nothing to the store"
    );
    // An allowed crawler under a Crawl-delay: one pipeline of SET NX and PTTL.
    assert_eq!(from(&proxy, "198.51.100.51", "/page").status, 200);
    let after_admission = request_commands(&redis);
    assert_eq!(
        total(&after_admission),
        total(&before) + 2,
        "{after_admission:?}"
    );
    // A disallowed one: one script (the read check, the strike and the ban together; the
    // server counts the PTTL the script calls among its commands too).
    assert_eq!(from(&proxy, "198.51.100.51", "/private/x").status, 403);
    let after_violation = request_commands(&redis);
    let calls = |calls: &HashMap<String, u64>, name: &str| calls.get(name).copied().unwrap_or(0);
    let scripts = |all: &HashMap<String, u64>| calls(all, "evalsha") + calls(all, "eval");
    assert_eq!(
        scripts(&after_violation),
        scripts(&after_admission) + 1,
        "{after_violation:?}"
    );
    assert_eq!(
        calls(&after_violation, "set"),
        calls(&after_admission, "set"),
        "{after_violation:?}"
    );
}

/// The server's clock in milliseconds (`TIME`).
fn server_millis(redis: &RedisServer) -> u64 {
    let time = redis.command(&["TIME"]);
    let mut parts = time
        .lines()
        .map(|part| part.parse::<u64>().expect("a number"));
    let seconds = parts.next().expect("seconds");
    let micros = parts.next().expect("microseconds");
    seconds * 1000 + micros / 1000
}

#[test]
fn bans_follow_the_store_clock_and_ended_or_foreign_entries_are_dropped() {
    let redis = RedisServer::start();
    let origin = Origin::start();
    let proxy = start(&origin, &redis, "1s");
    let bans = format!("{PREFIX}bans");
    let now = server_millis(&redis);
    // Written as another replica would: one live for a minute, one ended, one not robotsguard's.
    let live = format!("{} {} 3", now + 60_000, now - 1_000);
    let ended = format!("{} {} 3", now - 1_000, now - 61_000);
    redis.command(&["HSET", &bans, "198.51.100.60 shop", &live]);
    redis.command(&["HSET", &bans, "198.51.100.61 shop", &ended]);
    redis.command(&["HSET", &bans, "not a ban", "x"]);
    redis.command(&["INCR", &format!("{PREFIX}bans:version")]);
    assert!(
        wait_for(Duration::from_secs(5), || redis.command(&["HLEN", &bans])
            == "1"),
        "ended and foreign entries are deleted: {}",
        redis.command(&["HGETALL", &bans])
    );
    assert_eq!(redis.command(&["HGET", &bans, "198.51.100.60 shop"]), live);
    assert_eq!(from(&proxy, "198.51.100.60", "/allowed").status, 403);
    assert_eq!(from(&proxy, "198.51.100.61", "/allowed").status, 200);
    let listed = proxy.admin_get("/bans?origin=shop").json();
    let until = humantime::parse_rfc3339(listed["bans"][0]["until"].as_str().unwrap_or(""))
        .unwrap_or_else(|e| panic!("until is RFC 3339 ({e}): {listed}"));
    let left = until
        .duration_since(std::time::SystemTime::now())
        .unwrap_or_default()
        .as_secs();
    assert!(left.abs_diff(60) <= 3, "{listed}");
    let remaining = listed["bans"][0]["remaining_seconds"].as_u64().unwrap_or(0);
    assert!(remaining.abs_diff(60) <= 3, "{listed}");

    // A ban this process imposes is written in the store's milliseconds: its length is `ban`.
    for n in 0..3 {
        from(&proxy, "198.51.100.62", &format!("/private/{n}"));
    }
    let value = redis.command(&["HGET", &bans, "198.51.100.62 shop"]);
    // `UNTIL SINCE STRIKES`, then what earned it: the strikes of a crawler.
    let words: Vec<&str> = value.split(' ').collect();
    assert_eq!(words.len(), 5, "{value}");
    assert_eq!(words[3..], ["strikes", "ExampleBot"], "{value}");
    let numbers: Vec<u64> = words[..3]
        .iter()
        .map(|n| n.parse().expect("a number"))
        .collect();
    assert_eq!(numbers[0] - numbers[1], 4_000, "{value}");
    assert!(
        numbers[1].abs_diff(server_millis(&redis)) < 5_000,
        "{value}"
    );
    assert_eq!(numbers[2], 3);
}

/// Generic crawler names (made up by whoever sends them) from one address share one budget per
/// address and origin in the store too, whichever replica sees them.
#[test]
fn generic_crawler_names_from_one_address_share_one_budget_on_every_replica() {
    let redis = RedisServer::start();
    let origin = Origin::start();
    let a = start(&origin, &redis, "1s");
    let b = start(&origin, &redis, "1s");
    let client = "198.51.100.80";
    let as_named = |proxy: &Proxy, user_agent: &str| {
        proxy
            .send(
                &Request::get("/page")
                    .host("shop.example")
                    .ua(user_agent)
                    .header("X-Forwarded-For", client),
            )
            .status
    };
    assert_eq!(as_named(&a, "FooBot/1.0"), 200);
    assert_eq!(as_named(&b, "BarBot/1.0"), 429);
    assert_eq!(as_named(&a, "bazcrawler"), 429);
    assert_eq!(
        redis.command(&["EXISTS", &format!("{PREFIX}delay:shop:(generic):{client}")]),
        "1",
        "one budget in the store"
    );
}
