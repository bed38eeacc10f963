//! The shared store bounded by design: a real Redis with a small `maxmemory` and the documented
//! `volatile-ttl` policy, flooded with robots.txt reads from thousands of addresses (or filled
//! to the brim by other data). Every key robotsguard writes for a client has a TTL, the readers
//! set is bounded, and what a replica knows stands when the store forgets or refuses it:
//! Crawl-delay admits what the delay allows, strikes counted before still ban, and the errors are
//! counted in `robotsguard_state_backend_errors_total{operation, kind}`.

use crate::support;

use std::thread;
use std::time::{Duration, Instant};

use support::redis::RedisServer;
use support::{metric, Origin, Proxy, Request};

const EXAMPLEBOT: &str = "Mozilla/5.0 (compatible; ExampleBot/1.0)";
const PREFIX: &str = "rg-bound:";
const ERRORS: &str = "robotsguard_state_backend_errors_total";

/// Keys without a TTL that robotsguard writes (none per client): the bans (bounded by the most
/// bans in force), the two version counters, the trap secret and the key schema's version.
const WITHOUT_TTL: [&str; 5] = [
    "bans",
    "bans:version",
    "robots-history-version",
    "trap-secret",
    "schema",
];

/// The most robots.txt reads the store keeps (docs/src/operations/replicas.md).
const MAX_READERS: usize = 1 << 18;

/// A proxy of `origin` keeping its state in `redis`: a 30 s Crawl-delay and bans after 3
/// strikes.
fn start(origin: &Origin, redis: &RedisServer) -> Proxy {
    let body = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n\
         state:\n  backend: redis\n  redis: {{url: \"{}\", prefix: \"{PREFIX}\", timeout: 1s}}\n\
         defaults:\n  crawl_delay: {{action: enforce, max: 60s}}\n  \
         offenders: {{action: ban, strikes: 3, window: 10m, ban: 1h}}\n\
         crawlers:\n  extra:\n    - {{name: ExampleBot, tokens: [examplebot], pattern: ExampleBot, category: ai-training}}\n\
         origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    \
         robots: {{source: inline, text: \"User-agent: *\\nCrawl-delay: 30\\nDisallow: /private\\n\"}}\n",
        redis.url(),
        origin.addr()
    );
    let proxy = Proxy::start(&body);
    assert!(
        wait_for(Duration::from_secs(10), || metric(
            &proxy.metrics(),
            "robotsguard_state_backend_up",
            &[]
        ) == 1.0),
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

/// Limits `redis` to what it holds now plus `headroom` bytes, under the documented policy.
fn limit_memory(redis: &RedisServer, headroom: u64) {
    let limit = redis.info_number("used_memory") + headroom;
    redis.command(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    redis.command(&["CONFIG", "SET", "maxmemory-policy", "volatile-ttl"]);
}

/// Reads robots.txt from `count` addresses no one used before, on kept-alive connections (a new
/// one every hundred requests).
fn read_flood(proxy: &Proxy, count: u32) {
    let mut conn = proxy.conn();
    for n in 0..count {
        if n % 100 == 99 {
            conn = proxy.conn();
        }
        let client = format!("2001:db8:f::{:x}", n + 1);
        let answer = conn.send(
            &Request::get("/robots.txt")
                .host("shop.example")
                .ua(EXAMPLEBOT)
                .header("X-Forwarded-For", &client),
        );
        assert_eq!(answer.status, 200, "read {n}: {}", answer.text());
    }
}

/// How many of `count` requests of `client` for `/page` were let through.
fn admitted(proxy: &Proxy, client: &str, count: usize) -> usize {
    (0..count)
        .filter(|_| {
            let answer = from(proxy, client, "/page");
            assert!(
                [200, 429].contains(&answer.status),
                "{}: {}",
                answer.status,
                answer.text()
            );
            answer.status == 200
        })
        .count()
}

/// The keys under the prefix whose TTL is not set (`PTTL` -1), besides [`WITHOUT_TTL`].
fn keys_without_ttl(redis: &RedisServer) -> Vec<String> {
    let mut cursor = "0".to_owned();
    let mut found = Vec::new();
    for _ in 0..10_000 {
        let reply = redis.command(&[
            "SCAN",
            &cursor,
            "MATCH",
            &format!("{PREFIX}*"),
            "COUNT",
            "1000",
        ]);
        let mut lines = reply.lines();
        cursor = lines.next().unwrap_or("0").to_owned();
        for key in lines {
            let name = key.strip_prefix(PREFIX).unwrap_or(key);
            if !WITHOUT_TTL.contains(&name) && redis.command(&["PTTL", key]) == "-1" {
                found.push(key.to_owned());
            }
        }
        if cursor == "0" {
            break;
        }
    }
    found
}

/// The finding: robots.txt readers were kept in a set without a TTL, so a flood of reads filled a
/// store limited by `maxmemory` with what `volatile-ttl` cannot evict; it evicted the Crawl-delay
/// budgets and strike counts instead, then refused every write. Now every key written for a client
/// expires, and what the store dropped this replica still knows.
#[test]
fn a_read_flood_under_maxmemory_leaves_crawl_delay_and_strikes_in_force() {
    let redis = RedisServer::start();
    let origin = Origin::start();
    let proxy = start(&origin, &redis);

    // Before the flood: a crawler spends its budget, an offender earns two strikes.
    let crawler = "198.51.100.70";
    let offender = "198.51.100.71";
    assert_eq!(from(&proxy, crawler, "/page").status, 200);
    for n in 0..2 {
        assert_eq!(from(&proxy, offender, &format!("/private/{n}")).status, 403);
    }
    assert_eq!(
        redis.command(&["GET", &format!("{PREFIX}strikes:shop:{offender}")]),
        "2"
    );

    limit_memory(&redis, 1 << 20);
    read_flood(&proxy, 12_000);
    assert!(
        redis.info_number("evicted_keys") > 0,
        "the flood filled the store to its maxmemory"
    );
    assert_eq!(
        keys_without_ttl(&redis),
        Vec::<String>::new(),
        "every key written for a client expires"
    );
    // The store dropped the budget and the strike count: the soonest to expire go first.
    assert_eq!(
        redis.command(&["EXISTS", &format!("{PREFIX}strikes:shop:{offender}")]),
        "0",
        "the flood evicted the strike count"
    );

    // The budget spent before holds: the delay is 30 s.
    assert_eq!(
        admitted(&proxy, crawler, 10),
        0,
        "Crawl-delay admits nothing more within the delay"
    );
    // The third strike bans.
    assert_eq!(from(&proxy, offender, "/private/3").status, 403);
    let banned = from(&proxy, offender, "/allowed");
    assert_eq!(banned.status, 403, "{}", banned.text());
    assert!(banned.text().contains("banned"), "{}", banned.text());
    // The store no longer had the strikes this replica knew of: counted.
    assert!(
        metric(
            &proxy.metrics(),
            ERRORS,
            &[("operation", "violation"), ("kind", "lost")]
        ) >= 1.0,
        "{}",
        proxy.metrics()
    );
    // The ban made here reaches the store.
    assert!(
        wait_for(Duration::from_secs(5), || redis.command(&[
            "HEXISTS",
            &format!("{PREFIX}bans"),
            &format!("{offender} shop")
        ]) == "1"),
        "the ban is shared: {}",
        proxy.stderr()
    );
}

/// Fills the store with keys that never expire until it refuses writes: large values first,
/// then ever smaller ones, so that little room is left.
fn fill_until_refused(redis: &RedisServer, ballast: &mut usize) {
    for size in [64 << 10, 1 << 10, 64] {
        let value = "x".repeat(size);
        let mut full = false;
        for _ in 0..1_000 {
            *ballast += 1;
            if let Err(e) = redis.try_command(&["SET", &format!("ballast:{ballast}"), &value]) {
                assert!(e.contains("OOM"), "{e}");
                full = true;
                break;
            }
        }
        assert!(full, "the store refuses writes of {size} bytes");
    }
}

/// A store that answers `OOM` to every write (full of data that cannot be evicted): reads of
/// robots.txt, Crawl-delay admissions and strikes are decided from this replica's memory, which
/// knows the budgets and strikes the store counted before; each refusal is counted.
#[test]
fn a_store_out_of_memory_keeps_what_this_replica_knows_in_force() {
    let redis = RedisServer::start();
    let origin = Origin::start();
    let proxy = start(&origin, &redis);

    let crawler = "198.51.100.72";
    let offender = "198.51.100.73";
    assert_eq!(from(&proxy, crawler, "/page").status, 200);
    for n in 0..2 {
        assert_eq!(from(&proxy, offender, &format!("/private/{n}")).status, 403);
    }

    // Something else fills the store with keys that never expire, until it refuses writes:
    // large values first, then ever smaller ones, so that little room is left.
    limit_memory(&redis, 1 << 20);
    // Nothing may be evicted to make room (under volatile-ttl the replica's own keys, which
    // expire, could be, and a write would then pass): every write is refused.
    redis.command(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    let mut ballast = 0;
    fill_until_refused(&redis, &mut ballast);

    // robots.txt reads cannot be written: counted.
    read_flood(&proxy, 20);
    assert!(
        proxy.wait_metric(
            ERRORS,
            &[("operation", "robots_read"), ("kind", "oom")],
            1.0
        ) >= 1.0,
        "{}",
        proxy.metrics()
    );
    // Keys that expired meanwhile may have made room: full again before each kind of write.
    fill_until_refused(&redis, &mut ballast);
    // The budget spent before the store filled holds.
    assert_eq!(admitted(&proxy, crawler, 10), 0, "within the 30 s delay");
    // A crawler the store never saw gets this replica's own budget: one request per delay.
    assert_eq!(admitted(&proxy, "198.51.100.74", 10), 1);
    // Whether this admission reached the store (and was counted as refused) is not asserted:
    // under a loaded machine the replica may decide from its own budget without a live
    // connection to ask, which is the same answer; the robots.txt reads above show refused
    // writes counted.
    fill_until_refused(&redis, &mut ballast);
    // The third strike bans: the two before are known here.
    assert_eq!(from(&proxy, offender, "/private/3").status, 403);
    let banned = from(&proxy, offender, "/allowed");
    assert_eq!(banned.status, 403, "{}", banned.text());
    assert!(banned.text().contains("banned"), "{}", banned.text());
    let metrics = proxy.metrics();
    // As for the admission above, whether the strikes reached the store under a loaded machine
    // is not asserted; the ban from what this replica knows is.
    // The store answers (reads work): it is not taken for down, and the log says why writes fail.
    assert_eq!(metric(&metrics, "robotsguard_state_backend_up", &[]), 1.0);
    assert!(
        proxy.stderr().contains("out of memory"),
        "{}",
        proxy.stderr()
    );

    // Once there is room again, the ban made meanwhile is written to the store.
    for n in 1..=ballast {
        redis.command(&["DEL", &format!("ballast:{n}")]);
    }
    assert!(
        wait_for(Duration::from_secs(5), || redis.command(&[
            "HEXISTS",
            &format!("{PREFIX}bans"),
            &format!("{offender} shop")
        ]) == "1"),
        "the ban reaches the store: {}",
        proxy.stderr()
    );
}

/// The readers set keeps the most recent [`MAX_READERS`] reads and expires a day after the last.
#[test]
fn the_readers_set_is_bounded_and_expires() {
    let redis = RedisServer::start();
    let origin = Origin::start();
    let proxy = start(&origin, &redis);
    let readers = format!("{PREFIX}readers");
    let now_ms: u64 = {
        let time = redis.command(&["TIME"]);
        let seconds: u64 = time
            .lines()
            .next()
            .and_then(|s| s.parse().ok())
            .expect("seconds");
        seconds * 1000
    };
    // Reads an hour old, one member per address.
    let oldest = now_ms - 3_600_000;
    let commands: Vec<Vec<String>> = (0..MAX_READERS / 1024)
        .map(|chunk| {
            let mut command = vec!["ZADD".to_owned(), readers.clone()];
            for n in chunk * 1024..(chunk + 1) * 1024 {
                command.push((oldest + n as u64).to_string());
                command.push(format!("shop 2001:db8:e::{:x}", n + 1));
            }
            command
        })
        .collect();
    for reply in redis.pipeline(&commands) {
        assert!(reply.is_ok(), "{reply:?}");
    }
    assert_eq!(redis.command(&["ZCARD", &readers]), MAX_READERS.to_string());

    assert_eq!(from(&proxy, "198.51.100.75", "/robots.txt").status, 200);
    assert_eq!(
        redis.command(&["ZCARD", &readers]),
        MAX_READERS.to_string(),
        "the oldest read made room"
    );
    assert_ne!(
        redis.command(&["ZSCORE", &readers, "shop 198.51.100.75"]),
        "(nil)"
    );
    assert_eq!(
        redis.command(&["ZSCORE", &readers, "shop 2001:db8:e::1"]),
        "(nil)"
    );
    let ttl: i64 = redis
        .command(&["PTTL", &readers])
        .parse()
        .expect("a number");
    assert!(
        ttl > 23 * 3_600_000 && ttl <= 24 * 3_600_000,
        "a day after the last read: {ttl}"
    );
}
