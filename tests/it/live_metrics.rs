//! The `/metrics` page of a running proxy, scraped and parsed: every metric the metrics reference
//! (docs/src/reference/metrics.md, generated from the registry) documents is there, with the
//! documented type and label names, and the names match `METRIC_NAMES`.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use support::{Origin, Proxy, BROWSER, GPTBOT};

/// A row of the metrics reference.
#[derive(Debug)]
struct Documented {
    kind: String,
    labels: BTreeSet<String>,
}

/// The `| metric | type | labels | help |` table of docs/src/reference/metrics.md.
fn documented_metrics() -> BTreeMap<String, Documented> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/reference/metrics.md");
    let section = std::fs::read_to_string(&path).expect("docs/src/reference/metrics.md readable");
    let mut metrics = BTreeMap::new();
    for line in section.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // ["", metric, type, labels, help, notes, ""]
        if cells.len() < 6 || !cells[1].starts_with("`robotsguard_") {
            continue;
        }
        let name = cells[1].trim_matches('`').to_string();
        let labels = cells[3]
            .split(',')
            .map(|label| label.trim().trim_matches('`').to_string())
            .filter(|label| !label.is_empty())
            .collect();
        metrics.insert(
            name,
            Documented {
                kind: cells[2].to_string(),
                labels,
            },
        );
    }
    metrics
}

/// `# TYPE name kind` lines of the exposition.
fn types(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| {
            let (name, kind) = rest.split_once(' ')?;
            Some((name.to_string(), kind.trim().to_string()))
        })
        .collect()
}

/// The label names the samples of `name` carry (histograms: of `name_count`, without `le`).
fn label_names(text: &str, name: &str, kind: &str) -> Vec<BTreeSet<String>> {
    let sample_name = if kind == "histogram" {
        format!("{name}_count")
    } else {
        name.to_string()
    };
    support::samples(text, &sample_name)
        .into_iter()
        .map(|(labels, _)| labels.into_keys().filter(|k| k != "le").collect())
        .collect()
}

#[test]
fn the_readme_documents_exactly_the_metrics_the_code_names() {
    let documented: BTreeSet<String> = documented_metrics().into_keys().collect();
    let named: BTreeSet<String> = robotsguard::metrics::METRIC_NAMES
        .iter()
        .map(|name| name.to_string())
        .collect();
    assert_eq!(
        documented, named,
        "the metrics reference vs METRIC_NAMES (regenerate with scripts/gen-docs.sh)"
    );
}

#[test]
fn every_documented_metric_is_served_with_its_type_and_labels() {
    let shop = Origin::start();
    shop.robots(
        200,
        // The Content-Signal line is reported (the default), for robotsguard_content_signals_total.
        "User-agent: GPTBot\nCrawl-delay: 60\nContent-Signal: ai-train=no\nDisallow: /private\n",
    );
    // An upstream nobody listens on: its robots.txt fetch and its requests fail.
    let dead = std::net::SocketAddr::from(([127, 0, 0, 1], support::free_port()));
    // Crawler verification: a range list file, reverse DNS on a loopback server, a client
    // address forwarded by a trusted proxy.
    let dns = support::dns::DnsServer::start();
    // The impostor's address is another's by its reverse DNS (no name would prove nothing).
    dns.ptr("203.0.113.5", &["host-5.other.example"])
        .addresses("host-5.other.example", &["203.0.113.5"]);
    // A shared state store nobody listens on: its checks fail, decisions fall back to memory.
    let no_store = support::free_port();
    // A decision listener, asked once below.
    let decision = std::net::SocketAddr::from(([127, 0, 0, 1], support::free_port()));
    let body = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n\
         decision: {{listen: [\"{decision}\"]}}\n\
         state: {{backend: redis, redis: {{url: \"redis://127.0.0.1:{no_store}/0\"}}}}\n\
         verify:\n  dns: {{servers: [\"{}\"], timeout: 1s}}\n  web_bot_auth:\n    \
         agents: [{{agent: \"https://bot.example\", crawler: ExampleBot, keys: \"file:keys.json\"}}]\n    \
         registries: [\"file:registry.txt\"]\n\
         crawlers:\n  feeds: [{{url: \"file:feed.json\", format: ai-robots-txt}}]\n  extra:\n    - name: ExampleBot\n      \
         verify: {{ips: [\"file:ranges.json\"], rdns: [crawl.example.com]}}\n\
         origins:\n\
         \x20 - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    \
         policy: {{rates: {{search: 1/h}}}}\n\
         \x20 - name: dead\n    hosts: [\"dead.example\"]\n    upstream: \"{dead}\"\n\
         \x20 - name: signed\n    hosts: [\"signed.example\"]\n    upstream: \"{}\"\n    \
         robots: {{source: inline, text: \"User-agent: *\\nAllow: /\\n\"}}\n    \
         web_bot_auth: {{mode: required}}\n",
        dns.addr,
        shop.addr(),
        shop.addr()
    );
    // A registry with one inline (data:) card.
    let card = r#"{"client_id":"https://cards.example","rfc9309-product-token":"CardBot","jwks":{"keys":[{"kty":"OKP","crv":"Ed25519","x":"JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs"}]}}"#;
    let registry = format!("data:application/json,{}\n", card.replace(' ', "%20"));
    let keys = r#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs"}]}"#;
    // A TLS listener beside the plain one, for the certificate metrics.
    let certs = tempfile::tempdir().expect("temp dir");
    support::tls::make_ca(certs.path(), "ca");
    let (cert, key) =
        support::tls::make_leaf(certs.path(), "ca", "shop", "DNS:shop.example", false);
    let cert = std::fs::read_to_string(cert).expect("certificate readable");
    let key = std::fs::read_to_string(key).expect("key readable");
    let tls_listener = format!(
        "{{address: \"127.0.0.1:{}\", tls: {{cert: tls.pem, key: tls.key}}}}",
        support::free_port()
    );
    let proxy = Proxy::builder(&body)
        .second_listener(&tls_listener)
        .files(&[
            ("ranges.json", "[\"192.0.2.0/24\"]"),
            (
                "feed.json",
                r#"{"NovaFetch": {"operator": "Nova", "function": "AI Data Scrapers"}}"#,
            ),
            ("keys.json", keys),
            ("registry.txt", &registry),
            ("tls.pem", &cert),
            ("tls.key", &key),
        ])
        .start();
    assert_eq!(proxy.get("shop.example", "/page", BROWSER).status, 200);
    let asked = support::Conn::open(decision).send(
        &support::Request::get("/auth")
            .host("shop.example")
            .header("X-Forwarded-Method", "GET")
            .header("X-Forwarded-Uri", "/page")
            .ua(BROWSER),
    );
    assert_eq!(asked.status, 200);
    let impostor = support::Request::get("/page")
        .host("shop.example")
        .ua("ExampleBot/1.0")
        .header("X-Forwarded-For", "203.0.113.5");
    // The range list loads in the background; until it has, the claim is only unverified.
    let refused = (0..200).any(|_| {
        let status = proxy.send(&impostor).status;
        std::thread::sleep(Duration::from_millis(25));
        status == 403
    });
    assert!(refused, "the impostor was never refused");
    assert_eq!(proxy.get("shop.example", "/private", GPTBOT).status, 403);
    // Crawl-delay: the second request within the delay is limited.
    assert_eq!(proxy.get("shop.example", "/page", GPTBOT).status, 200);
    assert_eq!(proxy.get("shop.example", "/page", GPTBOT).status, 429);
    // A page whose response says `train-ai=n`: reported (the default), for
    // robotsguard_response_signals_total.
    shop.route_with_headers(
        "/usage",
        200,
        b"<p>page</p>",
        &[
            ("content-type", "text/html"),
            ("content-usage", "train-ai=n"),
        ],
    );
    assert_eq!(
        proxy
            .get(
                "shop.example",
                "/usage",
                "CCBot/2.0 (https://commoncrawl.org/faq/)"
            )
            .status,
        200
    );
    // A rate budget (`search: 1/h`): the second request of a search crawler is over it.
    let bingbot = "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)";
    assert_eq!(proxy.get("shop.example", "/page", bingbot).status, 200);
    assert_eq!(proxy.get("shop.example", "/page", bingbot).status, 429);
    assert_eq!(proxy.get("dead.example", "/page", BROWSER).status, 502);
    // Web Bot Auth: `required` refuses an unsigned claim of a crawler that signs; a signature
    // that does not hold is counted.
    assert_eq!(
        proxy
            .get("signed.example", "/page", "ExampleBot/1.0")
            .status,
        403
    );
    let bad = support::Request::get("/page")
        .host("signed.example")
        .ua(BROWSER)
        .header("Signature-Agent", "sig1=\"https://bot.example\"")
        .header("Signature-Input", "sig1=(\"@authority\");created=1")
        .header("Signature", "sig1=:AAAA:");
    assert_eq!(proxy.send(&bad).status, 200);
    assert!(proxy.wait_log("config reload: watching", 1, Duration::from_secs(10)));
    proxy.signal("HUP");
    assert_eq!(proxy.wait_reloads("success", 1.0), 1.0);

    // Requests are counted after their response is written: poll until the last one shows.
    let documented = documented_metrics();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut text = proxy.metrics();
    for _ in 0..500 {
        let all_there = documented
            .iter()
            .all(|(name, doc)| !label_names(&text, name, &doc.kind).is_empty());
        if all_there || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        text = proxy.metrics();
    }

    let types = types(&text);
    for (name, doc) in &documented {
        assert_eq!(
            types.get(name).map(String::as_str),
            Some(doc.kind.as_str()),
            "{name}: documented as a {}; the page says:\n{text}",
            doc.kind
        );
        let seen = label_names(&text, name, &doc.kind);
        assert!(!seen.is_empty(), "{name} has no sample:\n{text}");
        for labels in seen {
            assert_eq!(labels, doc.labels, "{name}: label names");
        }
    }

    // A few values the test itself caused.
    let requests = |decision: &str| {
        support::metric(
            &text,
            "robotsguard_requests_total",
            &[("origin", "shop"), ("decision", decision)],
        )
    };
    // The browser's request through the proxy, and the one the decision listener judged: it
    // counts as a proxied request does.
    assert_eq!(requests("pass"), 2.0);
    assert_eq!(
        support::metric(
            &text,
            "robotsguard_decision_requests_total",
            &[("origin", "shop"), ("decision", "pass")],
        ),
        1.0
    );
    // GPTBot on /private, and the impostor.
    assert_eq!(requests("blocked"), 2.0);
    assert!(
        support::metric(
            &text,
            "robotsguard_upstream_errors_total",
            &[("origin", "dead"), ("kind", "connect_refused")]
        ) >= 1.0
    );
    assert_eq!(
        support::metric(
            &text,
            "robotsguard_config_reloads_total",
            &[("result", "failure")]
        ),
        0.0,
        "the failure series exists from start-up"
    );
    assert_eq!(
        support::metric(&text, "robotsguard_config_last_reload_successful", &[]),
        1.0
    );
    assert_eq!(
        support::metric(&text, "robotsguard_config_restart_required", &[]),
        0.0
    );
    let reloaded_at = support::metric(
        &text,
        "robotsguard_config_last_reload_timestamp_seconds",
        &[],
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs_f64();
    assert!(
        reloaded_at > now - 600.0 && reloaded_at <= now + 1.0,
        "{reloaded_at} vs {now}"
    );
    assert_eq!(
        support::metric(
            &text,
            "robotsguard_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        1.0
    );
}
