//! DNS failures are `unverified`, never `impostor` (issue 52), through the real proxy and a real
//! DNS server on loopback: NXDOMAIN, SERVFAIL, REFUSED and silence, for the PTR lookup and for the
//! forward lookup of its name, leave a crawler checked by reverse DNS alone unverified and
//! proxied; only an answer that contradicts the claim (a name outside the operator's domains
//! that resolves back to the address) refuses it. A probe tells whether the resolver reaches
//! public DNS: one that answers NXDOMAIN for everything, or nothing at all, makes reverse DNS
//! verification say it is unavailable (metric, one log line, `/explain`), and a dead one is sent
//! no lookups until it answers again. Also: the chart's `RobotsguardImpostorSurge` alert.
//! Clients are documentation addresses presented through a trusted proxy address (resolvers
//! answer loopback PTRs themselves).

use crate::support;

use std::time::{Duration, Instant};

use support::dns::{arpa, DnsServer, Mode};
use support::{metric, Origin, Proxy, Request};

const HOST: &str = "shop.example";
/// A crawler its operator lets sites check by reverse DNS only (as Yandex and Amazon do).
const NAMED: &str = "Mozilla/5.0 (compatible; NamedBot/1.0; +https://named.example/bot)";
/// The name the probe looks up, which the test's DNS server knows.
const PROBE: &str = "probe.named.example";
/// The probe's default name, which a DNS server standing for public DNS answers.
const DEFAULT_PROBE: &str = "googlebot.com";

fn start(dns: &DnsServer, origin: &Origin, dns_extra: &str) -> Proxy {
    let body = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]
verify:
  dns: {{servers: [\"{dns}\"], timeout: 1s{dns_extra}}}
crawlers:
  builtin: false
  extra:
    - {{name: NamedBot, pattern: NamedBot, category: search, verify: {{rdns: [crawl.named.example]}}}}
origins:
  - name: shop
    hosts: [\"{HOST}\"]
    upstream: \"{upstream}\"
    robots: {{source: inline, text: \"User-agent: *\\nDisallow: /private\\n\"}}
",
        dns = dns.addr,
        upstream = origin.addr()
    );
    Proxy::start(&body)
}

fn from(proxy: &Proxy, client: &str, path: &str) -> support::Response {
    proxy.send(
        &Request::get(path)
            .host(HOST)
            .ua(NAMED)
            .header("X-Forwarded-For", client),
    )
}

fn explain(proxy: &Proxy, client: &str) -> serde_json::Value {
    let (status, json) = proxy.explain_from(HOST, NAMED, "/page", client);
    assert_eq!(status, 200, "{json}");
    json
}

fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn available(proxy: &Proxy) -> f64 {
    metric(&proxy.metrics(), "robotsguard_verify_dns_available", &[])
}

#[test]
fn dns_failures_leave_a_reverse_dns_crawler_unverified_and_only_a_contradiction_refuses_it() {
    let dns = DnsServer::start();
    // It stands for public DNS: the probe's default name resolves.
    dns.addresses(DEFAULT_PROBE, &["192.0.2.53"]);
    // NXDOMAIN for the PTR of .1 (the server knows nothing of it).
    // A name of the operator's whose forward lookup is NXDOMAIN, SERVFAIL, REFUSED, silent.
    dns.ptr("198.51.100.2", &["crawl-2.crawl.named.example"]);
    dns.ptr("198.51.100.3", &["crawl-3.crawl.named.example"])
        .fail_name("crawl-3.crawl.named.example");
    dns.ptr("198.51.100.4", &["crawl-4.crawl.named.example"])
        .refuse_name("crawl-4.crawl.named.example");
    dns.ptr("198.51.100.5", &["crawl-5.crawl.named.example"])
        .silence_name("crawl-5.crawl.named.example");
    // The PTR lookup itself answered SERVFAIL, REFUSED, or not at all.
    dns.fail_name(&arpa("198.51.100.6"));
    dns.refuse_name(&arpa("198.51.100.7"));
    dns.silence_name(&arpa("198.51.100.8"));
    // A name outside the operator's domain that resolves back: a definite impostor.
    dns.ptr("198.51.100.10", &["host-10.evil.example"])
        .addresses("host-10.evil.example", &["198.51.100.10"]);
    // The operator's own name, resolving back: verified.
    dns.ptr("198.51.100.11", &["crawl-11.crawl.named.example"])
        .addresses("crawl-11.crawl.named.example", &["198.51.100.11"]);
    let origin = Origin::start();
    let proxy = start(&dns, &origin, "");
    for client in [
        "198.51.100.1",
        "198.51.100.2",
        "198.51.100.3",
        "198.51.100.4",
        "198.51.100.5",
        "198.51.100.6",
        "198.51.100.7",
        "198.51.100.8",
    ] {
        let answer = from(&proxy, client, "/page");
        assert_eq!(answer.status, 200, "{client}: {}", answer.text());
        let explained = explain(&proxy, client);
        assert_eq!(
            explained["verification"]["result"], "unverified",
            "{client}: {explained}"
        );
    }
    assert_eq!(origin.proxied_to("/page").len(), 8);
    // The reasons read as sentences.
    let no_name = explain(&proxy, "198.51.100.1");
    assert_eq!(
        no_name["verification"]["how"],
        "reverse DNS proves nothing: the address has no reverse DNS name",
        "{no_name}"
    );
    let not_back = explain(&proxy, "198.51.100.2");
    assert_eq!(
        not_back["verification"]["how"],
        "reverse DNS proves nothing: its reverse DNS name crawl-2.crawl.named.example does not resolve back to it",
        "{not_back}"
    );
    // robots.txt still decides for an unverified claim.
    assert_eq!(from(&proxy, "198.51.100.1", "/private/x").status, 403);
    // The positive proof refuses; the operator's own name verifies.
    let impostor = from(&proxy, "198.51.100.10", "/page");
    assert_eq!(impostor.status, 403, "{}", impostor.text());
    let explained = explain(&proxy, "198.51.100.10");
    assert_eq!(
        explained["verification"]["result"], "impostor",
        "{explained}"
    );
    assert_eq!(
        explained["verification"]["how"],
        "its reverse DNS name host-10.evil.example resolves back to it and is not under crawl.named.example",
        "{explained}"
    );
    assert_eq!(from(&proxy, "198.51.100.11", "/page").status, 200);
    let explained = explain(&proxy, "198.51.100.11");
    assert_eq!(
        explained["verification"]["result"], "verified",
        "{explained}"
    );
    let impostors = metric(
        &proxy.metrics(),
        "robotsguard_crawler_verifications_total",
        &[("crawler", "NamedBot"), ("result", "impostor")],
    );
    assert!(impostors >= 1.0);
    assert!(
        metric(
            &proxy.metrics(),
            "robotsguard_requests_total",
            &[("crawler", "NamedBot"), ("decision", "blocked")],
        ) == 2.0,
        "only the impostor and robots.txt's /private were refused:\n{}",
        proxy.metrics()
    );
    // The probe's name resolved: reverse DNS verification is available, and /explain says so.
    assert!(eventually(Duration::from_secs(10), || available(&proxy) == 1.0));
    let explained = explain(&proxy, "198.51.100.11");
    assert_eq!(explained["reverse_dns"]["available"], true, "{explained}");
    assert_eq!(
        explained["reverse_dns"]["probe_name"], DEFAULT_PROBE,
        "{explained}"
    );
}

#[test]
fn a_resolver_that_answers_nxdomain_for_everything_makes_reverse_dns_unavailable_not_impostors() {
    // It knows no name at all: not the probe's (googlebot.com, the default), not any PTR.
    let dns = DnsServer::start();
    let origin = Origin::start();
    let proxy = start(&dns, &origin, "");
    let clients = ["198.51.100.30", "198.51.100.31", "203.0.113.32"];
    // Proxied as the crawler they claim, whether the probe has answered yet or not.
    for client in clients {
        assert_eq!(from(&proxy, client, "/page").status, 200, "{client}");
        let explained = explain(&proxy, client);
        assert_eq!(
            explained["verification"]["result"], "unverified",
            "{explained}"
        );
    }
    let probed = eventually(Duration::from_secs(10), || {
        explain(&proxy, "198.51.100.30")["reverse_dns"]["probed"] == true
    });
    assert!(probed, "{}", proxy.stderr());
    assert_eq!(available(&proxy), 0.0);
    for client in clients {
        assert_eq!(from(&proxy, client, "/page").status, 200, "{client}");
        let explained = explain(&proxy, client);
        assert_eq!(
            explained["verification"]["result"], "unverified",
            "{explained}"
        );
        let how = explained["verification"]["how"].as_str().unwrap_or("");
        assert!(
            how.starts_with(
                "reverse DNS verification is unavailable: the resolver says googlebot.com"
            ),
            "{explained}"
        );
        assert_eq!(explained["reverse_dns"]["available"], false, "{explained}");
        assert!(
            explained["reverse_dns"]["why"]
                .as_str()
                .unwrap_or("")
                .contains("does not see public DNS"),
            "{explained}"
        );
    }
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_crawler_verifications_total",
            &[("crawler", "NamedBot"), ("result", "impostor")],
        ),
        0.0
    );
    let stderr = proxy.stderr();
    assert_eq!(
        stderr
            .matches("reverse DNS verification is unavailable: the resolver says googlebot.com")
            .count(),
        1,
        "{stderr}"
    );
}

#[test]
fn a_dead_resolver_gets_no_lookups_and_verification_resumes_when_it_answers() {
    let dns = DnsServer::start();
    dns.addresses(PROBE, &["192.0.2.53"]);
    dns.ptr("198.51.100.40", &["crawl-40.crawl.named.example"])
        .addresses("crawl-40.crawl.named.example", &["198.51.100.40"]);
    dns.set_mode(Mode::Down);
    let origin = Origin::start();
    // Probed every 30 s while it resolves, every 5 s while it does not.
    let proxy = start(
        &dns,
        &origin,
        &format!(", probe_name: {PROBE}, probe_interval: 30s"),
    );
    let probed = eventually(Duration::from_secs(15), || {
        explain(&proxy, "198.51.100.41")["reverse_dns"]["probed"] == true
    });
    assert!(probed, "{}", proxy.stderr());
    assert_eq!(available(&proxy), 0.0);
    // Claims pass unverified, and no PTR lookup is sent to the dead resolver.
    assert_eq!(from(&proxy, "198.51.100.40", "/page").status, 200);
    let explained = explain(&proxy, "198.51.100.40");
    assert_eq!(
        explained["verification"]["result"], "unverified",
        "{explained}"
    );
    assert!(
        explained["verification"]["how"]
            .as_str()
            .unwrap_or("")
            .contains("the resolver does not answer a lookup of probe.named.example"),
        "{explained}"
    );
    assert_eq!(dns.ptr_queries("198.51.100.40"), 0);
    // Probed again (every 5 s while it is down), and said once.
    assert!(eventually(Duration::from_secs(20), || dns
        .lookups(PROBE, hickory_proto::rr::RecordType::A)
        >= 2));
    // The resolver comes back: the next probe finds it, and verification resumes.
    dns.set_mode(Mode::Answer);
    assert!(
        eventually(Duration::from_secs(20), || available(&proxy) == 1.0),
        "{}",
        proxy.stderr()
    );
    let explained = explain(&proxy, "198.51.100.40");
    assert_eq!(
        explained["verification"]["result"], "verified",
        "{explained}"
    );
    assert_eq!(explained["reverse_dns"]["available"], true, "{explained}");
    let stderr = proxy.stderr();
    assert_eq!(
        stderr
            .matches("reverse DNS verification is unavailable")
            .count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains("reverse DNS verification is available again"),
        "{stderr}"
    );
}

/// The chart alerts on a surge of impostor verdicts, on metrics robotsguard exports, and the
/// runbooks say what to do about it.
#[test]
fn the_chart_alerts_on_an_impostor_surge_and_the_runbook_says_what_to_do() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let values =
        std::fs::read_to_string(root.join("helm/robotsguard/values.yaml")).expect("values.yaml");
    let rules: serde_json::Value =
        serde_saphyr::from_str(&values).unwrap_or_else(|e| panic!("values.yaml: {e}"));
    let rules = rules["prometheusRule"]["rules"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let surge = rules
        .iter()
        .find(|rule| rule["alert"] == "RobotsguardImpostorSurge")
        .unwrap_or_else(|| {
            let names: Vec<&serde_json::Value> = rules.iter().map(|rule| &rule["alert"]).collect();
            panic!("no RobotsguardImpostorSurge among {names:?}")
        });
    let expr = surge["expr"].as_str().unwrap_or("");
    assert!(
        expr.contains("robotsguard_crawler_verifications_total{result=\"impostor\"}"),
        "{expr}"
    );
    // Every metric any default alert names is one robotsguard exports.
    for rule in &rules {
        let expr = rule["expr"].as_str().unwrap_or("");
        for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if word.starts_with("robotsguard_") {
                assert!(
                    robotsguard::metrics::METRIC_NAMES.contains(&word),
                    "{}: {word} is not a metric",
                    rule["alert"]
                );
            }
        }
    }
    let runbooks =
        std::fs::read_to_string(root.join("docs/src/operations/runbooks.md")).expect("runbooks");
    assert!(runbooks.contains("RobotsguardImpostorSurge"));
}
