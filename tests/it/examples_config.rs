//! Each config in `config/examples/` still shows what its name promises. That they load and pass
//! `robotsguard validate` is checked in `tests/cli_validate_identify.rs`; here they are run through
//! the decision the proxy makes, so an edit that keeps a file valid but quietly stops it being a
//! report-only or fail-open example is caught.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use robotsguard::config::{load_file, Config, Mode, OnUnreachable, RobotsSource};
use robotsguard::enforce::{decide, Decision, Outcome, Why};
use robotsguard::snapshot::{CopyOutcome, RobotsCopy, Snapshot};

const GPTBOT: &[u8] = b"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; GPTBot/1.2; +https://openai.com/gptbot";
const GOOGLEBOT: &[u8] =
    b"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
const BROWSER: &[u8] =
    b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36";

fn example_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("config/examples")
        .join(name)
}

fn example(name: &str) -> Config {
    load_file(&example_path(name)).unwrap_or_else(|e| panic!("{name}:\n{e}"))
}

/// The snapshot the proxy would start with: robots.txt not fetched yet, except inline copies.
/// Only for examples whose upstreams are IP literals (building resolves upstream names).
fn snapshot(name: &str) -> Snapshot {
    Snapshot::build(Arc::new(example(name)), None).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn decision(snapshot: &Snapshot, host: &str, user_agent: &[u8], path: &str) -> Decision {
    decide(snapshot, host.as_bytes(), user_agent, path.as_bytes())
        .unwrap_or_else(|_| panic!("{host} is not routed"))
}

#[test]
fn single_origin_enforces_with_every_default() {
    let config = example("single-origin.yaml");
    assert_eq!(config.origins.len(), 1);
    let origin = &config.origins[0];
    assert_eq!(origin.mode, Mode::Enforce);
    assert_eq!(origin.robots.source, RobotsSource::Origin { url: None });
    assert_eq!(origin.robots.on_unreachable, OnUnreachable::Disallow);

    // Before the first fetch the RFC 9309 default holds: crawlers may fetch nothing, and
    // everyone else passes untouched.
    let snapshot = snapshot("single-origin.yaml");
    let crawler = decision(&snapshot, "example.com", GPTBOT, "/articles/1");
    assert_eq!(crawler.outcome, Outcome::Blocked);
    assert_eq!(crawler.why, Why::DisallowAll);
    let browser = decision(&snapshot, "www.example.com", BROWSER, "/articles/1");
    assert_eq!(browser.outcome, Outcome::Pass);
}

#[test]
fn report_only_never_blocks_but_counts_what_it_would_block() {
    let config = example("report-only.yaml");
    assert!(config.origins.iter().all(|o| o.mode == Mode::Report));

    let snapshot = snapshot("report-only.yaml");
    let crawler = decision(&snapshot, "site.example", GPTBOT, "/private");
    assert_eq!(crawler.outcome, Outcome::WouldBlock);
    let allowed = decision(&snapshot, "site.example", GPTBOT, "/robots.txt");
    assert_eq!(allowed.outcome, Outcome::Pass);
}

#[test]
fn fail_open_lets_crawlers_through_while_robots_txt_is_unknown() {
    let config = example("fail-open.yaml");
    assert!(config
        .origins
        .iter()
        .all(|o| o.robots.on_unreachable == OnUnreachable::Allow));

    let snapshot = snapshot("fail-open.yaml");
    let crawler = decision(&snapshot, "news.example", GPTBOT, "/articles/1");
    assert_eq!(crawler.outcome, Outcome::Allowed);
    assert_eq!(crawler.why, Why::AllowAll);
}

#[test]
fn file_robots_enforces_the_file_next_to_the_config() {
    let snapshot = snapshot("file-robots.yaml");
    let shop = snapshot
        .origin_named("shop")
        .unwrap_or_else(|| panic!("no shop origin"));
    let RobotsSource::File { path } = &shop.config.robots.source else {
        panic!("shop is not file-sourced: {:?}", shop.config.robots.source);
    };
    // What the refresher does on its first pass: read the file and install the copy.
    let body = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    shop.robots.store(RobotsCopy::from_body(
        body.into(),
        shop.config.robots.max_size,
        CopyOutcome::Ok,
        "file".to_string(),
    ));

    let gptbot = decision(&snapshot, "shop.example", GPTBOT, "/products/1");
    assert_eq!(gptbot.outcome, Outcome::Blocked);
    let googlebot_cart = decision(&snapshot, "shop.example", GOOGLEBOT, "/cart/42");
    assert_eq!(googlebot_cart.outcome, Outcome::Blocked);
    let rule = googlebot_cart.rule.unwrap_or_else(|| panic!("no rule"));
    assert_eq!(rule.text(), "Disallow: /cart/");
    let googlebot_product = decision(&snapshot, "shop.example", GOOGLEBOT, "/products/1");
    assert_eq!(googlebot_product.outcome, Outcome::Allowed);

    // The second origin's inline robots.txt is in force from the start.
    let inline = decision(&snapshot, "static.example", GPTBOT, "/logo.png");
    assert_eq!(inline.outcome, Outcome::Allowed);
}

#[test]
fn many_origins_shows_per_origin_overrides() {
    let config = example("many-origins.yaml");
    assert!(config.origins.len() >= 3);
    let origin = |name: &str| {
        config
            .origins
            .iter()
            .find(|o| o.name == name)
            .unwrap_or_else(|| panic!("no origin {name}"))
    };
    assert!(origin("shop").upstreams.len() > 1, "round-robin upstreams");
    assert_eq!(origin("docs").mode, Mode::Report);
    assert!(origin("api").upstream_tls.is_some());
    assert_eq!(
        origin("api").robots.source,
        RobotsSource::Origin {
            url: Some("/static/robots.txt".to_string())
        }
    );
    assert_eq!(origin("legal").block.status, 451);
    // Shared defaults reach origins that do not override them.
    assert_eq!(origin("shop").block.status, 403);
    assert!(origin("shop").block.body.is_some());
}

#[test]
fn tls_termination_serves_tls_and_verifies_the_upstream() {
    let config = example("tls-termination.yaml");
    let tls_listeners: Vec<_> = config.listen.iter().filter(|l| l.tls.is_some()).collect();
    assert!(!tls_listeners.is_empty());
    assert!(
        config.listen.iter().any(|l| l.tls.is_none()),
        "plain HTTP too"
    );
    for origin in &config.origins {
        let tls = origin
            .upstream_tls
            .as_ref()
            .unwrap_or_else(|| panic!("{}: no upstream TLS", origin.name));
        assert!(tls.verify, "{}: certificate checks off", origin.name);
    }
}

#[test]
fn block_ai_training_turns_the_category_away_but_not_robots_txt_or_exempt_paths() {
    let snapshot = snapshot("block-ai-training.yaml");
    let ccbot = b"CCBot/2.0 (https://commoncrawl.org/faq/)";
    for path in ["/", "/articles/1"] {
        let blocked = decision(&snapshot, "example.com", ccbot, path);
        assert_eq!(blocked.outcome, Outcome::Blocked, "{path}");
        assert_eq!(blocked.policy(), "category ai-training: block");
    }
    for path in ["/robots.txt", "/.well-known/security.txt", "/ads.txt"] {
        let open = decision(&snapshot, "example.com", GPTBOT, path);
        assert_eq!(open.outcome, Outcome::Pass, "{path}");
    }
    // The licensed crawler is left to robots.txt.
    let amazonbot =
        b"Mozilla/5.0 (compatible; Amazonbot/0.1; +https://developer.amazon.com/support/amazonbot)";
    assert_eq!(
        decision(&snapshot, "example.com", amazonbot, "/articles/1").outcome,
        Outcome::Allowed
    );
    assert_eq!(
        decision(&snapshot, "example.com", amazonbot, "/search").outcome,
        Outcome::Blocked
    );
    // Search crawlers are bound by robots.txt as usual.
    assert_eq!(
        decision(&snapshot, "example.com", GOOGLEBOT, "/articles/1").outcome,
        Outcome::Allowed
    );
}

#[test]
fn partners_and_monitors_let_the_right_clients_through() {
    let snapshot = snapshot("partners-and-monitors.yaml");
    let decide_from = |user_agent: &[u8], path: &str, client: &str| {
        robotsguard::enforce::decide_for_client(
            &snapshot,
            b"shop.example",
            user_agent,
            path.as_bytes(),
            Some(client.parse().unwrap_or_else(|_| unreachable!())),
        )
        .unwrap_or_else(|_| panic!("not routed"))
    };
    let outsider = "203.0.113.9";
    let partner = decide_from(b"PartnerBot/3.1", "/api/products", outsider);
    assert_eq!(partner.outcome, Outcome::Pass);
    assert_eq!(partner.policy(), "crawler PartnerBot: pass");
    let monitor_net = decide_from(GPTBOT, "/checkout/", "198.51.100.20");
    assert_eq!(monitor_net.policy(), "allowed client");
    let uptime = decide_from(
        b"Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)",
        "/checkout/",
        outsider,
    );
    assert_eq!(uptime.outcome, Outcome::Pass);
    let app = decide_from(b"okhttp/4.12.0", "/api/cart", outsider);
    assert_eq!(app.outcome, Outcome::Blocked, "libraries are bound here");
    assert_eq!(
        decide_from(GPTBOT, "/checkout/", outsider).outcome,
        Outcome::Blocked
    );
}

#[test]
fn ai_purposes_licenses_training_and_keeps_every_search_engine_indexing() {
    const BINGBOT: &[u8] =
        b"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) Chrome/116.0.1938.76 Safari/537.36";
    const APPLEBOT: &[u8] = b"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)";
    let snapshot = snapshot("ai-purposes.yaml");
    let config = example("ai-purposes.yaml");
    let catalogue = snapshot.identifier.catalogue();
    assert_eq!(
        robotsguard::enforce::config_warnings(&config, catalogue),
        Vec::new(),
        "the example warns of nothing"
    );
    for search in [GOOGLEBOT, BINGBOT, APPLEBOT] {
        let page = decision(&snapshot, "news.example", search, "/article");
        assert_eq!(
            page.outcome,
            Outcome::Allowed,
            "{}",
            String::from_utf8_lossy(search)
        );
        assert_eq!(
            decision(&snapshot, "news.example", search, "/account/x").outcome,
            Outcome::Blocked
        );
    }
    let trainer = decision(&snapshot, "news.example", GPTBOT, "/article");
    assert_eq!(
        trainer.outcome,
        Outcome::Blocked,
        "answered 402 by the judge"
    );
    let served =
        String::from_utf8_lossy(&snapshot.origins[0].robots.current().served().body).into_owned();
    for token in ["Google-Extended", "Applebot-Extended"] {
        assert!(
            served.contains(&format!("User-agent: {token}\nDisallow: /\n")),
            "{served}"
        );
    }
}
