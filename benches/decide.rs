//! The whole per-request decision: Host routing, crawler identification and robots.txt matching,
//! over a medium robots.txt and a realistic User-Agent mix. Run with `cargo bench --bench decide`.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use robotsguard::enforce::{decide, decide_for_client};
use robotsguard::snapshot::Snapshot;

const MEDIUM: &str = include_str!("../crates/robotsguard-robots/benches/data/medium.txt");

/// ~70 % browsers, ~20 % crawlers that are allowed, ~10 % that are blocked, as in the load test.
const REQUESTS: &[(&str, &str)] = &[
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36", "/products/42"),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15", "/blog/2026/robots"),
    ("Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0", "/search?q=shoes"),
    ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", "/cart"),
    ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36", "/news/today"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0", "/account/settings"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0", "/static/app.js"),
    ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "/products/shoes"),
    ("Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", "/blog/post-1"),
    ("Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)", "/api/static/admin/print/x"),
];

fn snapshot() -> Snapshot {
    snapshot_with(String::new())
}

/// A policy as a site might write one: a few categories and crawlers, 100 allow-listed networks
/// and 10 exempt paths, none of which the benchmark's requests hit (so every decision goes on to
/// robots.txt, the most work a policy adds).
fn policy() -> String {
    let networks: Vec<String> = (0..100)
        .map(|i| format!("\"10.{}.{}.0/24\"", i / 10, i % 10 * 20))
        .collect();
    let exempt: Vec<String> = (0..10).map(|i| format!("/exempt-{i}/")).collect();
    format!(
        "    policy:\n      categories: {{ai-training: enforce, seo: pass, social: enforce}}\n      crawlers: {{CCBot: block, AhrefsBot: pass, Bytespider: block}}\n      allow_clients: [{}]\n      exempt_paths: [{}]\n",
        networks.join(", "),
        exempt.join(", ")
    )
}

fn snapshot_with(origin_extra: String) -> Snapshot {
    snapshot_of(MEDIUM, origin_extra)
}

fn snapshot_of(robots: &str, origin_extra: String) -> Snapshot {
    let indented: String = robots
        .lines()
        .map(|line| format!("          {line}\n"))
        .collect();
    let yaml = format!(
        "origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:9\"\n{origin_extra}    robots:\n      source: inline\n      text: |\n{indented}"
    );
    let config = robotsguard::config::load_str(&yaml, "bench.yaml", Path::new("."))
        .unwrap_or_else(|e| panic!("bench config: {e}"));
    Snapshot::build(Arc::new(config), None).unwrap_or_else(|e| panic!("bench snapshot: {e}"))
}

fn decide_mix(c: &mut Criterion) {
    let snapshot = snapshot();
    let mut group = c.benchmark_group("decide");
    group.throughput(Throughput::Elements(REQUESTS.len() as u64));
    group.bench_function("medium_ua_mix", |b| {
        b.iter(|| {
            for (user_agent, path) in REQUESTS {
                let decision = decide(
                    &snapshot,
                    b"shop.example",
                    black_box(user_agent.as_bytes()),
                    path.as_bytes(),
                );
                black_box(decision.map(|d| d.outcome).ok());
            }
        })
    });
    // The same mix through a policy, for a client outside its allow-list.
    let with_policy = snapshot_with(policy());
    let client = Some(std::net::IpAddr::from([203, 0, 113, 200]));
    group.bench_function("medium_ua_mix_policy", |b| {
        b.iter(|| {
            for (user_agent, path) in REQUESTS {
                let decision = decide_for_client(
                    &with_policy,
                    b"shop.example",
                    black_box(user_agent.as_bytes()),
                    path.as_bytes(),
                    black_box(client),
                );
                black_box(decision.map(|d| d.outcome).ok());
            }
        })
    });
    // The same mix with every User-Agent new to the decider: what a request costs when its
    // User-Agent is not among those each worker remembers (a rare client, or one rotating
    // User-Agents to evade). 4,096 variants of each, far more than the memory holds.
    let unseen: Vec<Vec<(String, &str)>> = (0..4096)
        .map(|variant| {
            REQUESTS
                .iter()
                .map(|(user_agent, path)| (format!("{user_agent} r/{variant}"), *path))
                .collect()
        })
        .collect();
    let mut round = 0;
    group.bench_function("medium_ua_mix_unseen", |b| {
        b.iter(|| {
            round = (round + 1) % unseen.len();
            for (user_agent, path) in &unseen[round] {
                let decision = decide(
                    &snapshot,
                    b"shop.example",
                    black_box(user_agent.as_bytes()),
                    path.as_bytes(),
                );
                black_box(decision.map(|d| d.outcome).ok());
            }
        })
    });
    // The same mix on the medium file with Content-Signal and Content-Usage lines in every group
    // (one group-wide, one path-scoped), enforced: the cost those lines add to a decision.
    let signals = snapshot_of(
        &with_preference_lines(MEDIUM),
        "    content_signals: {action: enforce}\n".to_string(),
    );
    group.bench_function("medium_ua_mix_signals", |b| {
        b.iter(|| {
            for (user_agent, path) in REQUESTS {
                let decision = decide(
                    &signals,
                    b"shop.example",
                    black_box(user_agent.as_bytes()),
                    path.as_bytes(),
                );
                black_box(decision.map(|d| d.outcome).ok());
            }
        })
    });
    group.finish();
}

/// `robots` with a `Content-Signal` and a path-scoped `Content-Usage` line after each
/// `User-agent` line (preference lines do not end a group's run of `User-agent` lines).
fn with_preference_lines(robots: &str) -> String {
    let mut out = String::with_capacity(robots.len() * 2);
    for line in robots.lines() {
        out.push_str(line);
        out.push('\n');
        if line.to_ascii_lowercase().starts_with("user-agent") {
            out.push_str("Content-Signal: search=yes, ai-input=yes, ai-train=no\n");
            out.push_str("Content-Usage: /blog/ train-ai=y\n");
        }
    }
    out
}

/// A config with `count` origins, each with its own small inline robots.txt.
fn snapshot_with_origins(count: usize) -> Snapshot {
    let mut yaml = String::from("origins:\n");
    for i in 0..count {
        yaml.push_str(&format!(
            "  - name: o{i}\n    hosts: [o{i}.example]\n    upstream: \"127.0.0.1:9\"\n    robots: {{source: inline, text: \"User-agent: *\\nDisallow: /private{i}\\n\"}}\n"
        ));
    }
    let config = robotsguard::config::load_str(&yaml, "scale.yaml", Path::new("."))
        .unwrap_or_else(|e| panic!("scale config: {e}"));
    Snapshot::build(Arc::new(config), None).unwrap_or_else(|e| panic!("scale snapshot: {e}"))
}

/// Routing must stay O(1) in the number of origins: the same request against 10 … 10,000.
fn decide_by_origin_count(c: &mut Criterion) {
    let mut group = c.benchmark_group("decide_origins");
    for count in [10, 100, 1_000, 10_000] {
        let snapshot = snapshot_with_origins(count);
        let host = format!("o{}.example", count / 2);
        group.bench_function(count.to_string(), |b| {
            b.iter(|| {
                let decision = decide(
                    &snapshot,
                    black_box(host.as_bytes()),
                    REQUESTS[9].0.as_bytes(),
                    b"/private5/x",
                );
                black_box(decision.map(|d| d.outcome).ok())
            })
        });
    }
    group.finish();
}

/// GPTBot's budget on `shop` from the IPv4 address `n`.
fn gptbot_at(n: u32) -> robotsguard::tables::crawl_delay::BudgetKey<'static> {
    robotsguard::tables::crawl_delay::BudgetKey {
        origin: "shop",
        crawler: "GPTBot",
        client: Some(ipnet::IpNet::from(std::net::IpAddr::from(n.to_be_bytes()))),
    }
}

/// What `Crawl-delay` adds to a crawler's request: one admission check against the per-process
/// budgets (with the clock read it takes), for a key that is admitted (a new client each time,
/// as a crawl from many addresses: the table fills up, so most checks miss the CPU caches and
/// find the key's bucket full), for a new key in a table with room, for one that is refused (the
/// same client again within the delay), and for the steady state of crawlers that keep their
/// delay (10,000 clients in turn, each back after its budget has run out).
fn crawl_delay_admission(c: &mut Criterion) {
    use robotsguard::tables::clock::Millis;
    use robotsguard::tables::crawl_delay::CrawlDelays;
    use std::time::Duration;
    let limits = CrawlDelays::default();
    let delay = Duration::from_secs(10);
    let mut group = c.benchmark_group("crawl_delay");
    let mut n: u32 = 0;
    group.bench_function("admit_new_client", |b| {
        b.iter(|| {
            n = n.wrapping_add(1);
            let key = gptbot_at(n);
            black_box(limits.admit(black_box(key), delay, Millis::coarse_now()))
        })
    });
    let repeat = gptbot_at(u32::from_be_bytes([203, 0, 113, 9]));
    // A table of its own: in the one above, filled by new clients, the key's bucket would be
    // full and the key untracked (admitted), not refused.
    let refusing = CrawlDelays::default();
    refusing.admit(repeat, delay, Millis::coarse_now());
    assert!(matches!(
        refusing.admit(repeat, delay, Millis::coarse_now()),
        robotsguard::tables::crawl_delay::Admission::TooSoon(_)
    ));
    group.bench_function("refuse_same_client", |b| {
        b.iter(|| black_box(refusing.admit(black_box(repeat), delay, Millis::coarse_now())))
    });
    // New clients into a table kept about half full: each key runs out 500 ms (500,000 checks)
    // after it was admitted, so a new key finds a free slot and is put in under the lock.
    let with_room = CrawlDelays::default();
    let mut fresh: u32 = 0;
    let mut clock = Millis::coarse_now();
    group.bench_function("admit_new_client_with_room", |b| {
        b.iter(|| {
            fresh = fresh.wrapping_add(1);
            if fresh.is_multiple_of(1_000) {
                clock = clock.after(Duration::from_millis(1));
            }
            black_box(Millis::coarse_now());
            let key = gptbot_at(fresh);
            black_box(with_room.admit(black_box(key), Duration::from_millis(500), clock))
        })
    });
    let returning = CrawlDelays::default();
    let short = Duration::from_millis(500);
    let mut at = Millis::coarse_now();
    let mut client: u32 = 0;
    group.bench_function("admit_returning_client", |b| {
        b.iter(|| {
            // Each client comes back 10,000 iterations (10 s of this clock) later: after its
            // 500 ms delay. The clock is stepped by hand, and read as a request would read it.
            client = (client + 1) % 10_000;
            at = at.after(Duration::from_millis(1));
            black_box(Millis::coarse_now());
            let key = gptbot_at(client);
            black_box(returning.admit(black_box(key), short, at))
        })
    });
    group.finish();
}

/// The decision mix against the medium robots.txt with a `Crawl-delay: 10` in every group, with
/// the Crawl-delay admission the proxy adds for the crawlers it lets through, and without it (the
/// same decisions): the "within 15 % of decide". The clock moves 1 ms per mix, and each
/// mix comes from one client address: either the next of 10,000 that take turns (each back after
/// its delay has run out, as crawlers that keep their delay: every admission re-claims the
/// client's slot), or one never seen before (every admission puts a key new to the table in, on a
/// cache line that is rarely in cache: the dearest check). As in the proxy, the decision
/// prefetches the budget it will be admitted against while it matches the rules.
fn decide_with_crawl_delay(c: &mut Criterion) {
    use robotsguard::enforce::{decide_request, Request};
    use robotsguard::tables::clock::Millis;
    use robotsguard::tables::crawl_delay::{Admission, CrawlDelays};
    let mut robots = String::new();
    let mut in_agents = false;
    for line in MEDIUM.lines() {
        let agent = line.to_ascii_lowercase().starts_with("user-agent:");
        if in_agents && !agent {
            robots.push_str("Crawl-delay: 10\n");
        }
        in_agents = agent;
        robots.push_str(line);
        robots.push('\n');
    }
    let snapshot = snapshot_of(&robots, String::new());
    let mut group = c.benchmark_group("decide_crawl_delay");
    group.throughput(Throughput::Elements(REQUESTS.len() as u64));
    let cases = [
        ("decide_only", false, 10_000),
        ("decide_and_admit_returning", true, 10_000),
        ("decide_and_admit_new_clients", true, u32::MAX),
    ];
    // One mix from `client` at `clock`, as the proxy decides and admits (the decision given the
    // budgets it prefetches the crawler's from); how many requests were admitted.
    let mix = |limits: Option<&CrawlDelays>, client: Option<std::net::IpAddr>, clock: Millis| {
        let mut admitted = 0u32;
        for (user_agent, path) in REQUESTS {
            let request = Request {
                host: b"shop.example",
                user_agent: black_box(user_agent.as_bytes()),
                path: path.as_bytes(),
                client,
                method: &http::Method::GET,
                signed_by: None,
                budgets: limits,
            };
            let Ok(decision) = decide_request(&snapshot, &request) else {
                continue;
            };
            if let Some(limits) = limits {
                if decision.outcome == robotsguard::enforce::Outcome::Allowed {
                    if let Some((key, delay)) = decision.budget(client) {
                        black_box(Millis::coarse_now());
                        let admission = limits.admit(key, delay, clock);
                        admitted += u32::from(admission == Admission::Admitted);
                    }
                }
            }
            black_box(decision.outcome);
        }
        admitted
    };
    let probe = CrawlDelays::default();
    let one_mix = mix(
        Some(&probe),
        Some([192, 0, 2, 1].into()),
        Millis::coarse_now(),
    );
    assert!(
        one_mix >= 2,
        "crawlers admitted under a Crawl-delay per mix: {one_mix}"
    );
    for (name, admit, clients) in cases {
        let limits = CrawlDelays::default();
        let (mut n, mut clock) = (0u32, Millis::coarse_now());
        group.bench_function(name, |b| {
            b.iter(|| {
                n = (n + 1) % clients;
                clock = clock.after(std::time::Duration::from_millis(1));
                let client = Some(std::net::IpAddr::from(n.to_be_bytes()));
                black_box(mix(admit.then_some(&limits), client, clock))
            })
        });
    }
    group.finish();
}

/// Crawler names from the catalogue, cycled into hostile User-Agents.
const NAMES: &[&str] = &[
    "GPTBot/1.2",
    "ClaudeBot/1.0",
    "Googlebot/2.1",
    "bingbot/2.0",
    "CCBot/2.0",
    "YandexBot/3.0",
    "Baiduspider/2.0",
    "DuckDuckBot/1.1",
    "Applebot/0.1",
    "AhrefsBot/7.0",
    "SemrushBot/7",
    "PetalBot",
    "Bytespider",
    "Amazonbot/0.1",
    "PerplexityBot/1.0",
    "facebookexternalhit/1.1",
    "Twitterbot/1.0",
    "LinkedInBot/1.0",
    "MJ12bot/v1.4.8",
    "DotBot/1.2",
    "SeznamBot/4.0",
    "ZorgBot/1.0",
    "FooCrawler/2",
];

/// A User-Agent of `bytes` made of crawler names only: every word is a name to consider.
fn names_user_agent(bytes: usize) -> String {
    let mut ua = String::with_capacity(bytes + 32);
    for name in NAMES.iter().cycle() {
        if ua.len() + name.len() >= bytes {
            break;
        }
        ua.push_str(name);
        ua.push(' ');
    }
    ua
}

/// One decision for a User-Agent made of nothing but crawler names, 1 KB and 8 KB long (the
/// longest a request may carry), against an origin whose robots.txt names two of them outside
/// the catalogue. At most 16 names are considered, so the longer one costs little more than the
/// shorter (issue 26: 2.1 ms at 8 KB before the cap).
fn decide_hostile_user_agent(c: &mut Criterion) {
    let robots = format!("User-agent: ZorgBot\nUser-agent: FooCrawler\nDisallow: /z\n{MEDIUM}");
    let snapshot = snapshot_of(&robots, String::new());
    let mut group = c.benchmark_group("decide_hostile_user_agent");
    for bytes in [1024, 8 * 1024] {
        let ua = names_user_agent(bytes);
        group.bench_function(format!("{}_kb_of_names", bytes / 1024), |b| {
            b.iter(|| {
                let decision = decide(
                    &snapshot,
                    b"shop.example",
                    black_box(ua.as_bytes()),
                    b"/products/42",
                );
                black_box(decision.map(|d| d.outcome).ok());
            })
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    decide_mix,
    decide_by_origin_count,
    crawl_delay_admission,
    decide_with_crawl_delay,
    decide_hostile_user_agent
);
criterion_main!(benches);
