//! Verification that says when it cannot work, through the real proxy: range lists turned off,
//! a list mirrored to a file, a list fetched through a real HTTP proxy (tinyproxy, CONNECT),
//! and a list that cannot be fetched (no egress): `robotsguard_crawler_range_list_loaded` is 0
//! from start, one WARN line says so however often it is retried, and `/readyz` is unaffected.
//! The built-in catalogue is off, so that no test depends on (or waits for) the internet.

use crate::support;

use std::time::{Duration, Instant};

use support::http_proxy::HttpProxy;
use support::{metric, Origin, Proxy};

/// A crawler verified by one range list only, `list` (a URL); and one by reverse DNS only.
const LISTED: &str = "Mozilla/5.0 (compatible; ListedBot/1.0)";
const NAMED: &str = "Mozilla/5.0 (compatible; NamedBot/1.0)";
const LIST_BODY: &str = r#"{"prefixes": [{"ipv4Prefix": "198.51.100.0/24"}]}"#;

fn start(origin: &Origin, list: &str, verify: &str) -> Proxy {
    let body = format!(
        "crawlers:\n  builtin: false\n  extra:\n    - {{name: ListedBot, pattern: ListedBot, category: ai-training, verify: {{ips: [\"{list}\"]}}}}\n\
         \x20   - {{name: NamedBot, pattern: NamedBot, category: search, verify: {{rdns: [crawl.example.com]}}}}\n\
         verify:\n{verify}\
         origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    \
         robots: {{source: inline, text: \"User-agent: *\\nDisallow: /private\\n\"}}\n",
        origin.addr()
    );
    Proxy::builder(&body)
        .files(&[("lists/listed.json", LIST_BODY)])
        .start()
}

fn loaded(proxy: &Proxy, list: &str) -> f64 {
    metric(
        &proxy.metrics(),
        "robotsguard_crawler_range_list_loaded",
        &[("list", list)],
    )
}

/// The verdict `/explain` gives a ListedBot claim from `client`.
fn verdict(proxy: &Proxy, client: &str) -> serde_json::Value {
    verdict_of(proxy, LISTED, client)
}

fn verdict_of(proxy: &Proxy, user_agent: &str, client: &str) -> serde_json::Value {
    let (_, json) = proxy.explain_from("shop.example", user_agent, "/", client);
    json["verification"].clone()
}

/// Polls until the list's metric reads 1 (at most 10 s).
fn wait_loaded(proxy: &Proxy, list: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while loaded(proxy, list) != 1.0 {
        assert!(
            Instant::now() < deadline,
            "the list never loaded:\n{}",
            proxy.stderr()
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

#[test]
fn a_list_mirrored_to_a_file_verifies_and_its_url_is_never_fetched() {
    let origin = Origin::start();
    // The list's own URL answers nothing useful: only the mirror can verify.
    let list = format!("http://{}/listed.json", origin.addr());
    let verify = format!("  ranges:\n    mirrors: {{\"{list}\": \"file:lists/listed.json\"}}\n");
    let proxy = start(&origin, &list, &verify);
    wait_loaded(&proxy, &list);
    assert_eq!(verdict(&proxy, "198.51.100.9")["result"], "verified");
    assert_eq!(verdict(&proxy, "8.8.8.8")["result"], "impostor");
    assert!(
        origin.proxied_to("/listed.json").is_empty() && origin.received().len() <= 1,
        "only robots.txt may have been asked of the origin: {:?}",
        origin.received()
    );
}

#[test]
fn a_list_is_fetched_through_the_configured_proxy() {
    let origin = Origin::start();
    origin.route("/listed.json", 200, LIST_BODY);
    let http_proxy = HttpProxy::start();
    let list = format!("http://{}/listed.json", origin.addr());
    let verify = format!("  ranges: {{proxy: \"{}\"}}\n", http_proxy.url());
    let proxy = start(&origin, &list, &verify);
    wait_loaded(&proxy, &list);
    assert_eq!(verdict(&proxy, "198.51.100.9")["result"], "verified");
    let log = http_proxy.log();
    assert!(
        log.contains(&format!("CONNECT {}", origin.addr())),
        "the fetch went through the proxy:\n{log}"
    );
}

#[test]
fn with_lists_off_nothing_is_fetched_and_claims_stay_unverified() {
    let origin = Origin::start();
    origin.route("/listed.json", 200, LIST_BODY);
    let list = format!("http://{}/listed.json", origin.addr());
    let proxy = start(
        &origin,
        &list,
        "  ranges: {enabled: false}\n  dns: {enabled: false}\n",
    );
    for client in ["198.51.100.9", "8.8.8.8"] {
        let verification = verdict(&proxy, client);
        assert_eq!(verification["result"], "unverified", "{verification}");
        assert!(
            verification["how"]
                .as_str()
                .unwrap_or("")
                .contains("verify.ranges.enabled: false"),
            "{verification}"
        );
    }
    // A crawler checked by reverse DNS only: DNS is off, so nothing is known.
    let verification = verdict_of(&proxy, NAMED, "8.8.8.8");
    assert_eq!(verification["result"], "unverified", "{verification}");
    assert!(
        verification["how"]
            .as_str()
            .unwrap_or("")
            .contains("verify.dns.enabled: false"),
        "{verification}"
    );
    assert!(origin.proxied_to("/listed.json").is_empty());
    let metrics = proxy.metrics();
    assert!(
        !metrics.contains("robotsguard_crawler_range_list_loaded{"),
        "no list is in play, so none is reported missing"
    );
    assert!(!proxy.stderr().contains("crawler IP range list"));
}

#[test]
fn a_list_that_cannot_be_fetched_is_said_once_and_reported_not_loaded() {
    let origin = Origin::start();
    // Nothing listens there: every attempt fails at once, as without egress.
    let closed = support::free_port();
    let list = format!("http://127.0.0.1:{closed}/listed.json");
    let proxy = start(&origin, &list, "  refresh: 24h\n");
    assert_eq!(proxy.admin_status("/readyz"), Some(200));
    assert_eq!(loaded(&proxy, &list), 0.0, "0 from the start");
    // The first retry comes 10 s after the first failure: wait for it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let attempts = || {
        metric(
            &proxy.metrics(),
            "robotsguard_verify_list_fetches_total",
            &[("list", list.as_str()), ("outcome", "unreachable")],
        )
    };
    while attempts() < 2.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let attempts = attempts();
    assert!(attempts >= 2.0, "retried: {attempts}");
    let warnings: Vec<String> = proxy
        .stderr()
        .lines()
        .filter(|line| line.contains("WARN") && line.contains(&list))
        .map(str::to_string)
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].contains("no copy yet: claims of its crawlers stay unverified"),
        "{}",
        warnings[0]
    );
    assert_eq!(loaded(&proxy, &list), 0.0);
    assert_eq!(proxy.admin_status("/readyz"), Some(200));
    assert_eq!(verdict(&proxy, "8.8.8.8")["result"], "unverified");
}

#[test]
fn lists_failing_for_one_cause_are_said_in_one_line() {
    let origin = Origin::start();
    // Three lists behind one closed port: one cause (nothing listens there), as when a
    // deployment has no egress or no DNS and every built-in list fails at once.
    let closed = support::free_port();
    let lists: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|name| format!("http://127.0.0.1:{closed}/{name}.json"))
        .collect();
    let extra: String = lists
        .iter()
        .enumerate()
        .map(|(n, list)| {
            format!(
                "    - {{name: Bot{n}, pattern: Bot{n}x, category: ai-training, verify: {{ips: [\"{list}\"]}}}}\n"
            )
        })
        .collect();
    let body = format!(
        "crawlers:\n  builtin: false\n  extra:\n{extra}origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n",
        origin.addr()
    );
    let proxy = Proxy::start(&body);
    let attempts = |list: &str| {
        metric(
            &proxy.metrics(),
            "robotsguard_verify_list_fetches_total",
            &[("list", list), ("outcome", "unreachable")],
        )
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while lists.iter().any(|list| attempts(list) < 1.0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(lists.iter().all(|list| attempts(list) >= 1.0));
    let warnings: Vec<String> = proxy
        .stderr()
        .lines()
        .filter(|line| line.contains("WARN") && line.contains("crawler IP range list"))
        .map(str::to_string)
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    // Each list still says it is not loaded.
    for list in &lists {
        assert_eq!(loaded(&proxy, list), 0.0);
    }
}
