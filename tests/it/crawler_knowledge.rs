//! Crawler knowledge that stays current: catalogue feeds fetched from a real local origin
//! while the proxy runs, a team's own feed with verified ranges, and range lists in JAFAR, behind
//! a JSON pointer or inside an HTML page. Clients are documentation addresses presented through
//! a trusted proxy address.

use crate::support;

use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use support::{metric, Origin, Proxy, Request};

const HOST: &str = "shop.example";
const NOVA: &str = "Mozilla/5.0 (compatible; NovaFetch/1.0; +https://nova.example/fetch)";

fn from(proxy: &Proxy, client: &str, path: &str, user_agent: &str) -> support::Response {
    proxy.send(
        &Request::get(path)
            .host(HOST)
            .ua(user_agent)
            .header("X-Forwarded-For", client),
    )
}

/// Polls `check` every 50 ms, at most `tries` times; whether it held once.
fn eventually(tries: usize, mut check: impl FnMut() -> bool) -> bool {
    (0..tries).any(|_| {
        if check() {
            return true;
        }
        thread::sleep(Duration::from_millis(50));
        false
    })
}

fn feed_fetches(origin: &Origin, path: &str) -> usize {
    origin
        .received()
        .iter()
        .filter(|r| r.target == path)
        .count()
}

#[test]
fn an_ai_robots_txt_feed_adds_a_crawler_at_runtime_and_a_broken_one_keeps_the_last_good() {
    let origin = Origin::start();
    // The first copy names someone else.
    origin.route(
        "/robots.json",
        200,
        r#"{"OtherFetch": {"operator": "Other", "respect": "Yes", "function": "AI Assistants", "frequency": "", "description": ""}}"#,
    );
    let config = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]
crawlers:
  generic: false
  feeds:
    - {{url: \"http://{upstream}/robots.json\", format: ai-robots-txt, refresh: 1s}}
origins:
  - name: shop
    hosts: [\"{HOST}\"]
    upstream: \"{upstream}\"
    robots: {{source: inline, text: \"User-agent: *\\nDisallow: /\\n\"}}
",
        upstream = origin.addr()
    );
    let feed = format!("http://{}/robots.json", origin.addr());
    let proxy = Proxy::start(&config);
    assert!(
        eventually(200, || metric(
            &proxy.metrics(),
            "robotsguard_catalogue_feed_loaded",
            &[("feed", &feed)]
        ) == 1.0),
        "the feed did not load:\n{}",
        proxy.stderr()
    );
    // Not in the catalogue yet: a browser, proxied.
    assert_eq!(from(&proxy, "192.0.2.1", "/page", NOVA).status, 200);

    // The feed now names it: after the next refresh, without a restart, robots.txt binds it.
    origin.route(
        "/robots.json",
        200,
        r#"{"OtherFetch": {"operator": "Other", "respect": "Yes", "function": "AI Assistants", "frequency": "", "description": ""},
            "NovaFetch": {"operator": "[Nova](https://nova.example/fetch)", "respect": "Unclear", "function": "AI Data Scrapers", "frequency": "No information.", "description": "Collects training data."}}"#,
    );
    assert!(
        eventually(200, || from(&proxy, "192.0.2.1", "/page", NOVA).status
            == 403),
        "the feed's crawler was not blocked:\n{}",
        proxy.stderr()
    );
    let (status, explain) = proxy.explain(HOST, NOVA, "/page");
    assert_eq!(status, 200);
    assert_eq!(explain["crawler"]["name"], "NovaFetch", "{explain}");
    assert_eq!(explain["crawler"]["category"], "ai-training", "{explain}");
    assert_eq!(explain["crawler"]["feed"], feed.as_str(), "{explain}");
    let metrics = proxy.metrics();
    assert_eq!(
        metric(
            &metrics,
            "robotsguard_catalogue_entries",
            &[("source", &feed)]
        ),
        2.0
    );
    assert!(
        metric(
            &metrics,
            "robotsguard_catalogue_entries",
            &[("source", "builtin")]
        ) > 100.0
    );

    // A feed that no longer parses: refetched (with backoff from the 1 s refresh), never put in
    // force; the last good copy stays.
    let before = feed_fetches(&origin, "/robots.json");
    origin.route("/robots.json", 200, "{\"NovaFetch\": [not json");
    assert!(
        eventually(200, || feed_fetches(&origin, "/robots.json") >= before + 2),
        "the broken feed was not fetched again"
    );
    assert_eq!(from(&proxy, "192.0.2.1", "/page", NOVA).status, 403);
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_catalogue_feed_loaded",
            &[("feed", &feed)]
        ),
        1.0
    );
    // And one that drops the crawler takes it out again.
    origin.route("/robots.json", 200, "{}");
    assert!(
        eventually(200, || from(&proxy, "192.0.2.1", "/page", NOVA).status
            == 200),
        "the crawler stayed after the feed dropped it"
    );
}

#[test]
fn a_robotsguard_feed_adds_a_crawler_with_verified_ranges() {
    let origin = Origin::start();
    origin.route(
        "/team.json",
        200,
        r#"{"prefixes": [{"ipv4Prefix": "192.0.2.0/28"}]}"#,
    );
    let feed_body = format!(
        "crawlers:\n  - {{name: TeamBot, tokens: [teambot], pattern: TeamBot, category: ai-search, purposes: [search], operator: Team, source: \"https://team.example/bot\", signing_agents: [\"https://agent.team.example\"], verify: {{ips: [\"http://{}/team.json\"]}}}}\n",
        origin.addr()
    );
    let config = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]
crawlers:
  feeds:
    - {{url: \"file:feeds/team.yaml\", format: robotsguard, refresh: 1h}}
origins:
  - name: shop
    hosts: [\"{HOST}\"]
    upstream: \"{upstream}\"
    robots: {{source: inline, text: \"User-agent: *\\nDisallow: /private\\n\"}}
",
        upstream = origin.addr()
    );
    let proxy = Proxy::builder(&config)
        .files(&[("feeds/team.yaml", &feed_body)])
        .start();
    let list = format!("http://{}/team.json", origin.addr());
    assert!(
        eventually(200, || metric(
            &proxy.metrics(),
            "robotsguard_crawler_range_list_loaded",
            &[("list", &list)]
        ) == 1.0),
        "the feed's range list did not load:\n{}",
        proxy.stderr()
    );
    let ua = "TeamBot/2.0 (+https://team.example/bot)";
    let (status, explain) = proxy.explain_from(HOST, ua, "/page", "192.0.2.5");
    assert_eq!(status, 200);
    assert_eq!(explain["crawler"]["name"], "TeamBot", "{explain}");
    assert!(
        explain["crawler"]["feed"]
            .as_str()
            .unwrap_or("")
            .ends_with("feeds/team.yaml"),
        "{explain}"
    );
    assert_eq!(explain["verification"]["result"], "verified", "{explain}");
    let (_, explain) = proxy.explain_from(HOST, ua, "/page", "203.0.113.9");
    assert_eq!(explain["verification"]["result"], "impostor", "{explain}");
    assert_eq!(from(&proxy, "192.0.2.5", "/page", ua).status, 200);
    assert_eq!(from(&proxy, "192.0.2.5", "/private/x", ua).status, 403);
}

#[test]
fn jafar_pointer_and_regex_lists_verify_addresses() {
    let origin = Origin::start();
    origin.route(
        "/jafar.json",
        200,
        r#"{"creationTime": "2026-11-01T00:00:00Z", "prefixes": [
            {"ipv4Prefix": "192.0.2.0/28", "services": ["JafarBot"]},
            {"ipv4Prefix": "192.0.2.16/28", "services": ["SomeoneElse"]}]}"#,
    );
    origin.route(
        "/cloud.json",
        200,
        r#"{"syncToken": "7", "prefixes": [{"ip_prefix": "198.51.100.0/28", "service": "x"}]}"#,
    );
    origin.route(
        "/page.html",
        200,
        "<html><body><h1>Our crawler</h1><ul><li>IP: 203.0.113.0/28</li><li>IP: 2001:db8:7::/48</li></ul></body></html>",
    );
    let up = origin.addr();
    let config = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]
crawlers:
  extra:
    - {{name: JafarBot, category: ai-training, verify: {{ips: [{{url: \"http://{up}/jafar.json\", format: jafar}}]}}}}
    - {{name: PointerBot, category: ai-training, verify: {{ips: [{{url: \"http://{up}/cloud.json\", format: {{json_pointer: \"/prefixes/*/ip_prefix\"}}}}]}}}}
    - {{name: PageBot, category: ai-training, verify: {{ips: [{{url: \"http://{up}/page.html\", format: {{regex: \"<li>IP: ([0-9a-f.:/]+)</li>\"}}}}]}}}}
origins:
  - name: shop
    hosts: [\"{HOST}\"]
    upstream: \"{up}\"
    robots: {{source: inline, text: \"User-agent: *\\nDisallow: /private\\n\"}}
"
    );
    let proxy = Proxy::start(&config);
    for path in ["/jafar.json", "/cloud.json", "/page.html"] {
        let list = format!("http://{up}{path}");
        assert!(
            eventually(200, || metric(
                &proxy.metrics(),
                "robotsguard_crawler_range_list_loaded",
                &[("list", &list)]
            ) == 1.0),
            "{list} did not load:\n{}",
            proxy.stderr()
        );
    }
    for (crawler, client, want) in [
        ("JafarBot", "192.0.2.3", "verified"),
        // Listed, but for another service: not this crawler's address.
        ("JafarBot", "192.0.2.20", "impostor"),
        ("PointerBot", "198.51.100.4", "verified"),
        ("PointerBot", "192.0.2.3", "impostor"),
        ("PageBot", "203.0.113.2", "verified"),
        ("PageBot", "2001:db8:7::9", "verified"),
        ("PageBot", "198.51.100.4", "impostor"),
    ] {
        let ua = format!("{crawler}/1.0");
        let (status, explain) = proxy.explain_from(HOST, &ua, "/page", client);
        assert_eq!(status, 200);
        assert_eq!(
            explain["verification"]["result"], want,
            "{crawler} from {client}: {explain}"
        );
    }
}

#[test]
fn validate_refuses_a_broken_file_feed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("robotsguard.yaml");
    std::fs::write(
        &config,
        "origins:\n  - {name: shop, hosts: [shop.example], upstream: \"127.0.0.1:9\"}\ncrawlers:\n  feeds:\n    - {url: \"file:feed.json\", format: ai-robots-txt}\n",
    )
    .expect("config written");
    let validate = || {
        Command::new(env!("CARGO_BIN_EXE_robotsguard"))
            .args(["validate", "--config", &config.to_string_lossy()])
            .stdin(Stdio::null())
            .output()
            .expect("the robotsguard binary runs")
    };
    // Missing, then not JSON: refused, naming the feed.
    for body in [None, Some("{\"NovaFetch\": [")] {
        if let Some(body) = body {
            std::fs::write(dir.path().join("feed.json"), body).expect("feed written");
        }
        let output = validate();
        let err = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(1), "{err}");
        assert!(err.contains("feed.json"), "{err}");
    }
    std::fs::write(
        dir.path().join("feed.json"),
        r#"{"NovaFetch": {"operator": "Nova", "function": "AI Data Scrapers"}}"#,
    )
    .expect("feed written");
    let output = validate();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // identify with the config says which feed the entry came from.
    let output = Command::new(env!("CARGO_BIN_EXE_robotsguard"))
        .args([
            "identify",
            "--config",
            &config.to_string_lossy(),
            "--json",
            NOVA,
        ])
        .stdin(Stdio::null())
        .output()
        .expect("the robotsguard binary runs");
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or(serde_json::Value::Null);
    assert_eq!(report["name"], "NovaFetch", "{report}");
    assert!(
        report["feed"].as_str().unwrap_or("").ends_with("feed.json"),
        "{report}"
    );
}

#[test]
fn serve_refuses_a_broken_file_feed_as_validate_does() {
    let config = format!(
        "listen: [{{address: \"127.0.0.1:{}\"}}]\nadmin: {{address: \"127.0.0.1:{}\"}}\nthreads: 1\n\
         shutdown: {{grace: 1s}}\ncrawlers:\n  feeds: [{{url: \"file:feed.yaml\", format: robotsguard}}]\n\
         origins:\n  - {{name: shop, hosts: [shop.example], upstream: \"127.0.0.1:9\"}}\n",
        support::free_port(),
        support::free_port()
    );
    // A robotsguard feed with an entry that breaks a catalogue rule (a two-letter pattern).
    let broken = "crawlers:\n  - {name: Ab, tokens: [ab], pattern: Ab, category: other}\n";
    let (code, err) = crate::fail_fast::serve_exit(&config, &[("feed.yaml", broken)]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("feed.yaml") && err.contains("shorter"),
        "{err}"
    );
}

#[test]
fn a_reload_keeps_a_feeds_copy_and_one_that_drops_the_feed_drops_its_crawlers() {
    let origin = Origin::start();
    origin.route(
        "/robots.json",
        200,
        r#"{"NovaFetch": {"operator": "Nova", "respect": "No", "function": "AI Data Scrapers"}}"#,
    );
    origin.route("/other.json", 200, "{}");
    let body = |feed: &str, robots: &str| {
        format!(
            "crawlers:
  generic: false
  feeds:
    - {{url: \"http://{up}{feed}\", format: ai-robots-txt, refresh: 1h}}
origins:
  - name: shop
    hosts: [\"{HOST}\"]
    upstream: \"{up}\"
    robots: {{source: inline, text: \"User-agent: *\\nDisallow: {robots}\\n\"}}
",
            up = origin.addr()
        )
    };
    let proxy = Proxy::start(&body("/robots.json", "/"));
    let feed = format!("http://{}/robots.json", origin.addr());
    assert!(
        eventually(200, || proxy.get(HOST, "/page", NOVA).status == 403),
        "the feed's crawler was not blocked:\n{}",
        proxy.stderr()
    );
    assert!(proxy.wait_log("config reload: watching", 1, Duration::from_secs(10)));
    let fetches = feed_fetches(&origin, "/robots.json");

    // Another robots.txt, the same feed: its copy carries over (no refetch for an hour).
    proxy.replace_config(&proxy.config_text(&body("/robots.json", "/private")));
    assert_eq!(proxy.wait_reloads("success", 1.0), 1.0);
    assert_eq!(proxy.get(HOST, "/page", NOVA).status, 200);
    assert_eq!(proxy.get(HOST, "/private/x", NOVA).status, 403);
    assert_eq!(proxy.get(HOST, "/private/x", support::BROWSER).status, 200);
    assert_eq!(feed_fetches(&origin, "/robots.json"), fetches);

    // The feed replaced by another: its crawler and its series go.
    proxy.replace_config(&proxy.config_text(&body("/other.json", "/private")));
    assert_eq!(proxy.wait_reloads("success", 2.0), 2.0);
    assert!(
        eventually(200, || proxy.get(HOST, "/private/x", NOVA).status == 200),
        "the dropped feed's crawler is still known"
    );
    assert!(
        eventually(200, || !proxy.metrics().contains(&feed)),
        "the dropped feed's series stay"
    );
}
