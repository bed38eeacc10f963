//! Forward-confirmed reverse DNS through its public API, against a real DNS server on loopback:
//! what each kind of answer means, how long answers are kept, that concurrent requests share one
//! lookup, and that the cache stays bounded. Addresses are documentation ranges (resolvers
//! answer 127.0.0.0/8 themselves).

use crate::support;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use robotsguard::config::DnsConfig;
use robotsguard::metrics::METRICS;
use robotsguard::verify::dns::{Fcrdns, ReverseDns};
use support::dns::{DnsServer, Mode, Transport};

use hickory_proto::rr::RecordType;

fn settings(dns: &DnsServer) -> DnsConfig {
    DnsConfig {
        enabled: true,
        servers: vec![dns.addr],
        timeout: Duration::from_secs(1),
        positive_ttl: Duration::from_secs(3600),
        negative_ttl: Duration::from_secs(3600),
        max_entries: 1000,
    }
}

fn ip(text: &str) -> IpAddr {
    text.parse().expect("an address")
}

fn suffixes(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn confirmed(names: &[&str]) -> Fcrdns {
    Fcrdns::Confirmed(names.iter().map(|n| Box::from(*n)).collect())
}

/// `check` holds within `limit`, polled.
async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    check()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_under_the_suffix_that_resolves_back_is_confirmed() {
    let dns = DnsServer::start();
    dns.ptr(
        "198.51.100.7",
        &["Crawl-198-51-100-7.GoogleBot.com", "other.example.net"],
    )
    .addresses(
        "crawl-198-51-100-7.googlebot.com",
        &["198.51.100.6", "198.51.100.7"],
    )
    .addresses("other.example.net", &["203.0.113.1"]);
    let rdns = ReverseDns::new(settings(&dns));
    let answer = rdns.resolve(ip("198.51.100.7")).await;
    // Only the name that resolves back counts, lower case.
    assert_eq!(answer, confirmed(&["crawl-198-51-100-7.googlebot.com"]));
    assert!(answer.matches(&suffixes(&["google.com", "googlebot.com"])));
    assert_eq!(
        answer.name_under(&suffixes(&["googlebot.com"])),
        Some("crawl-198-51-100-7.googlebot.com")
    );
    assert!(!answer.matches(&suffixes(&["search.msn.com"])));
    assert!(!answer.matches(&suffixes(&["bot.com"])));
    assert_eq!(dns.ptr_lookups("198.51.100.7"), 1);
    // An IPv4-mapped IPv6 address is the IPv4 address: the cached answer, nothing sent.
    let sent = dns.all_queries();
    assert_eq!(rdns.resolve(ip("::ffff:198.51.100.7")).await, answer);
    assert_eq!(rdns.peek(ip("::ffff:198.51.100.7")), Some(answer));
    assert_eq!(dns.all_queries(), sent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_does_not_resolve_back_is_no_name() {
    let dns = DnsServer::start();
    // The forward lookup lacks the address.
    dns.ptr("198.51.100.8", &["crawl-1.googlebot.com"])
        .addresses("crawl-1.googlebot.com", &["198.51.100.9"]);
    // The forward name does not exist.
    dns.ptr("198.51.100.10", &["gone.googlebot.com"]);
    // The name has only an IPv6 address.
    dns.ptr("198.51.100.11", &["v6.googlebot.com"])
        .addresses("v6.googlebot.com", &["2001:db8::11"]);
    let rdns = ReverseDns::new(settings(&dns));
    let google = suffixes(&["googlebot.com"]);
    for (address, name) in [
        ("198.51.100.8", "crawl-1.googlebot.com"),
        ("198.51.100.10", "gone.googlebot.com"),
        ("198.51.100.11", "v6.googlebot.com"),
    ] {
        let answer = rdns.resolve(ip(address)).await;
        assert_eq!(answer, Fcrdns::NoName(Some(name.into())), "{address}");
        assert!(!answer.matches(&google));
    }
    assert_eq!(dns.lookups("crawl-1.googlebot.com", RecordType::A), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_ptr_record_is_no_name() {
    let dns = DnsServer::start();
    // NOERROR without PTR records.
    dns.ptr("198.51.100.12", &[]);
    let rdns = ReverseDns::new(settings(&dns));
    // NXDOMAIN: the server knows nothing of 198.51.100.13.
    for address in ["198.51.100.12", "198.51.100.13"] {
        assert_eq!(
            rdns.resolve(ip(address)).await,
            Fcrdns::NoName(None),
            "{address}"
        );
        assert_eq!(dns.ptr_lookups(address), 1);
    }
    // No forward lookup was needed.
    assert_eq!(dns.all_lookups(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servfail_and_refused_are_failures_not_answers() {
    let dns = DnsServer::start();
    dns.ptr("198.51.100.14", &["crawl-14.googlebot.com"])
        .addresses("crawl-14.googlebot.com", &["198.51.100.14"]);
    let rdns = ReverseDns::new(settings(&dns));
    let failed = || {
        METRICS
            .verify_dns_lookups
            .with_label_values(&["failed"])
            .get()
    };
    let before = failed();
    dns.set_mode(Mode::ServFail);
    let answer = rdns.resolve(ip("198.51.100.14")).await;
    assert!(matches!(answer, Fcrdns::Failed(_)), "{answer:?}");
    assert!(!answer.matches(&suffixes(&["googlebot.com"])));
    dns.set_mode(Mode::Refused);
    let answer = rdns.resolve(ip("198.51.100.15")).await;
    assert!(matches!(answer, Fcrdns::Failed(_)), "{answer:?}");
    // Counted as lookups sent (other tests in this process may add their own).
    assert!(failed() >= before + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forward_lookup_that_fails_is_a_failure_not_an_answer() {
    let dns = DnsServer::start();
    // The first name fails its forward lookup, the second resolves elsewhere: the first might
    // have confirmed, so nothing is definite.
    dns.ptr(
        "198.51.100.16",
        &["crawl-16.googlebot.com", "other-16.example.net"],
    )
    .fail_name("crawl-16.googlebot.com")
    .addresses("other-16.example.net", &["203.0.113.16"]);
    // One name that confirms is enough, whatever the others do.
    dns.ptr(
        "198.51.100.17",
        &["crawl-17.googlebot.com", "broken-17.example.net"],
    )
    .fail_name("broken-17.example.net")
    .addresses("crawl-17.googlebot.com", &["198.51.100.17"]);
    let rdns = ReverseDns::new(settings(&dns));
    let answer = rdns.resolve(ip("198.51.100.16")).await;
    assert!(
        matches!(&answer, Fcrdns::Failed(why) if why.contains("crawl-16.googlebot.com")),
        "{answer:?}"
    );
    assert_eq!(
        rdns.resolve(ip("198.51.100.17")).await,
        confirmed(&["crawl-17.googlebot.com"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_down_fails_within_the_timeout_and_heals() {
    let dns = DnsServer::start();
    dns.ptr("198.51.100.20", &["crawl-20.googlebot.com"])
        .addresses("crawl-20.googlebot.com", &["198.51.100.20"]);
    dns.set_mode(Mode::Down);
    // A failure is kept min(negative_ttl, 30 s): 2 s here.
    let rdns = ReverseDns::new(DnsConfig {
        negative_ttl: Duration::from_secs(2),
        ..settings(&dns)
    });
    let started = Instant::now();
    let answer = rdns.resolve(ip("198.51.100.20")).await;
    assert!(matches!(answer, Fcrdns::Failed(_)), "{answer:?}");
    // The timeout is 1 s; generous for a loaded machine.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // The failure is cached: a flood of requests from the address does not reach DNS.
    let rdns_ref = &rdns;
    assert!(
        eventually(Duration::from_secs(10), || matches!(
            rdns_ref.peek(ip("198.51.100.20")),
            Some(Fcrdns::Failed(_))
        ))
        .await
    );
    let sent = dns.ptr_queries("198.51.100.20");
    for _ in 0..20 {
        assert!(matches!(
            rdns.resolve(ip("198.51.100.20")).await,
            Fcrdns::Failed(_)
        ));
    }
    assert_eq!(dns.ptr_queries("198.51.100.20"), sent);
    // Back up: once the failure expires, the next request looks it up again.
    dns.set_mode(Mode::Answer);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut answer = rdns.resolve(ip("198.51.100.20")).await;
    while !matches!(answer, Fcrdns::Confirmed(_)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        answer = rdns.resolve(ip("198.51.100.20")).await;
    }
    assert_eq!(answer, confirmed(&["crawl-20.googlebot.com"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_lookup_goes_on_after_the_request_stops_waiting() {
    let dns = DnsServer::start();
    dns.ptr("198.51.100.21", &["crawl-21.googlebot.com"])
        .addresses("crawl-21.googlebot.com", &["198.51.100.21"]);
    // Each answer within the resolver's timeout (2 s), both together past it.
    dns.set_delay(Duration::from_millis(1200));
    let rdns = ReverseDns::new(DnsConfig {
        timeout: Duration::from_secs(2),
        ..settings(&dns)
    });
    let started = Instant::now();
    let answer = rdns.resolve(ip("198.51.100.21")).await;
    assert!(
        matches!(&answer, Fcrdns::Failed(why) if why.contains("timeout")),
        "{answer:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    // The lookup finishes on its own and serves the next request.
    let rdns_ref = &rdns;
    assert!(
        eventually(Duration::from_secs(10), || rdns_ref
            .peek(ip("198.51.100.21"))
            == Some(confirmed(&["crawl-21.googlebot.com"])))
        .await
    );
    // The resolver resends an unanswered UDP query (after about half a second), so a slow
    // server sees one lookup's query more than once; the next request sends nothing.
    let sent = dns.all_queries();
    assert_eq!(
        rdns.resolve(ip("198.51.100.21")).await,
        confirmed(&["crawl-21.googlebot.com"])
    );
    assert_eq!(dns.all_queries(), sent);
    assert_eq!(dns.ptr_lookups("198.51.100.21"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipv6_addresses_use_ip6_arpa_and_aaaa() {
    let dns = DnsServer::start();
    dns.ptr("2001:db8::7", &["crawl-v6.googlebot.com"])
        .addresses("crawl-v6.googlebot.com", &["198.51.100.7", "2001:db8::7"]);
    dns.ptr("2001:db8::8", &["crawl-v6-8.googlebot.com"])
        .addresses("crawl-v6-8.googlebot.com", &["2001:db8::9"]);
    let rdns = ReverseDns::new(settings(&dns));
    let answer = rdns.resolve(ip("2001:db8::7")).await;
    assert_eq!(answer, confirmed(&["crawl-v6.googlebot.com"]));
    assert_eq!(
        dns.lookups(
            "7.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa",
            RecordType::PTR
        ),
        1
    );
    assert_eq!(dns.lookups("crawl-v6.googlebot.com", RecordType::AAAA), 1);
    assert_eq!(
        rdns.resolve(ip("2001:db8::8")).await,
        Fcrdns::NoName(Some("crawl-v6-8.googlebot.com".into()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_from_one_address_share_one_lookup() {
    let dns = DnsServer::start();
    dns.ptr("198.51.100.30", &["crawl-30.googlebot.com"])
        .addresses("crawl-30.googlebot.com", &["198.51.100.30"]);
    // Slow enough that every request below arrives while the lookup is in flight.
    dns.set_delay(Duration::from_millis(300));
    let rdns = ReverseDns::new(DnsConfig {
        timeout: Duration::from_secs(5),
        ..settings(&dns)
    });
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let rdns = rdns.clone();
            tokio::spawn(async move { rdns.resolve(ip("198.51.100.30")).await })
        })
        .collect();
    for task in tasks {
        assert_eq!(
            task.await.expect("a resolve task"),
            confirmed(&["crawl-30.googlebot.com"])
        );
    }
    // One lookup each (a slow UDP answer may make the resolver resend the same query).
    assert_eq!(dns.ptr_lookups("198.51.100.30"), 1);
    assert_eq!(dns.lookups("crawl-30.googlebot.com", RecordType::A), 1);
}

/// A silent zone (the server never answers): the request that started the lookup waits the
/// timeout; one that joins it a second later waits only the second that is left, not a
/// timeout of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_joining_a_lookup_in_flight_waits_only_what_is_left_of_it() {
    let dns = DnsServer::start();
    dns.set_mode(Mode::Down);
    let timeout = Duration::from_secs(2);
    let rdns = ReverseDns::new(DnsConfig {
        timeout,
        ..settings(&dns)
    });
    let started = Instant::now();
    let first = {
        let rdns = rdns.clone();
        tokio::spawn(async move { rdns.resolve(ip("198.51.100.35")).await })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let joined_at = Instant::now();
    let second = rdns.resolve(ip("198.51.100.35")).await;
    let second_waited = joined_at.elapsed();
    let first = first.await.expect("the first resolve");
    assert!(matches!(first, Fcrdns::Failed(_)), "{first:?}");
    assert!(matches!(second, Fcrdns::Failed(_)), "{second:?}");
    // Both gave up at the first one's deadline (2 s after it started), not 1 s + 2 s.
    assert!(
        second_waited < Duration::from_millis(1800),
        "the second request waited {second_waited:?}"
    );
    assert!(
        started.elapsed() < timeout + Duration::from_millis(800),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_cached_and_peeked() {
    let dns = DnsServer::start();
    dns.ptr("198.51.100.40", &["crawl-40.googlebot.com"])
        .addresses("crawl-40.googlebot.com", &["198.51.100.40"]);
    let rdns = ReverseDns::new(settings(&dns));
    assert_eq!(rdns.peek(ip("198.51.100.40")), None);
    let first = rdns.resolve(ip("198.51.100.40")).await;
    assert_eq!(first, confirmed(&["crawl-40.googlebot.com"]));
    assert_eq!(dns.all_lookups(), 2, "one PTR, one A");
    let sent = dns.all_queries();
    // DNS changes; the cached answer stands until its TTL ends.
    dns.forget_ptr("198.51.100.40");
    assert_eq!(rdns.resolve(ip("198.51.100.40")).await, first);
    assert_eq!(rdns.peek(ip("198.51.100.40")), Some(first));
    assert_eq!(dns.all_queries(), sent);
    assert_eq!(rdns.peek(ip("198.51.100.41")), None);
    assert_eq!(rdns.cached(), 1);
    // Another handle has its own cache.
    let other = ReverseDns::new(settings(&dns));
    assert_eq!(other.peek(ip("198.51.100.40")), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_expire_after_their_ttl() {
    let dns = DnsServer::start();
    dns.ptr("198.51.100.50", &["crawl-50.googlebot.com"])
        .addresses("crawl-50.googlebot.com", &["198.51.100.50"]);
    let rdns = ReverseDns::new(DnsConfig {
        positive_ttl: Duration::from_secs(1),
        negative_ttl: Duration::from_secs(1),
        ..settings(&dns)
    });
    let address = ip("198.51.100.50");
    assert!(matches!(rdns.resolve(address).await, Fcrdns::Confirmed(_)));
    assert!(rdns.peek(address).is_some());
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(rdns.peek(address), None);
    // Looked up again, and DNS now says something else: no name.
    dns.forget_ptr("198.51.100.50");
    assert_eq!(rdns.resolve(address).await, Fcrdns::NoName(None));
    assert_eq!(dns.ptr_lookups("198.51.100.50"), 2);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(rdns.peek(address), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_holds_at_most_max_entries() {
    let dns = DnsServer::start();
    let rdns = ReverseDns::new(DnsConfig {
        max_entries: 10,
        ..settings(&dns)
    });
    for n in 0..60 {
        let address = IpAddr::from([203, 0, 113, n]);
        assert_eq!(rdns.resolve(address).await, Fcrdns::NoName(None));
        assert!(rdns.cached() <= 10, "{} after {n}", rdns.cached());
    }
    assert!(rdns.cached() > 0);
    assert_eq!(dns.all_lookups(), 60);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_first_names_are_checked() {
    let dns = DnsServer::start();
    let names: Vec<String> = (0..10).map(|n| format!("n{n}.googlebot.com")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    dns.ptr("198.51.100.60", &names);
    // Only the last name resolves back: a zone listing many names costs four lookups at most.
    dns.addresses("n9.googlebot.com", &["198.51.100.60"]);
    let rdns = ReverseDns::new(settings(&dns));
    let answer = rdns.resolve(ip("198.51.100.60")).await;
    assert!(matches!(answer, Fcrdns::NoName(Some(_))), "{answer:?}");
    let forward: usize = names
        .iter()
        .map(|name| dns.lookups(name, RecordType::A))
        .sum();
    assert!((1..=4).contains(&forward), "{forward} forward lookups");
    assert_eq!(dns.lookups("n9.googlebot.com", RecordType::A), 0);
    // A name repeated does not take the others' places.
    dns.ptr(
        "198.51.100.61",
        &[
            "dup.example.net",
            "dup.example.net",
            "DUP.example.net.",
            "dup.example.net",
            "dup.example.net",
            "n61.googlebot.com",
        ],
    )
    .addresses("n61.googlebot.com", &["198.51.100.61"]);
    assert_eq!(
        rdns.resolve(ip("198.51.100.61")).await,
        confirmed(&["n61.googlebot.com"])
    );
    assert_eq!(dns.lookups("dup.example.net", RecordType::A), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_udp_answers_are_asked_again_over_tcp() {
    let dns = DnsServer::start();
    dns.ptr("198.51.100.70", &["crawl-70.googlebot.com"])
        .addresses("crawl-70.googlebot.com", &["198.51.100.70"]);
    dns.set_mode(Mode::TruncateUdp);
    let rdns = ReverseDns::new(settings(&dns));
    assert_eq!(
        rdns.resolve(ip("198.51.100.70")).await,
        confirmed(&["crawl-70.googlebot.com"])
    );
    assert!(dns.queries_over(Transport::Tcp) >= 2);
}

#[test]
fn building_needs_no_runtime_and_peek_needs_no_lookup() {
    let dns = DnsServer::start();
    let rdns = ReverseDns::new(settings(&dns));
    assert_eq!(rdns.peek(ip("198.51.100.80")), None);
    assert_eq!(rdns.cached(), 0);
    assert_eq!(dns.all_queries(), 0);
}
