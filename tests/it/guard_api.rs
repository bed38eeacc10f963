//! The library's entry point as an embedder meets it: a `Guard` from a builder or a file, the
//! errors it gives, and what the builder's settings do.

use std::io::Write as _;

use robotsguard::config::{Action, Mode};
use robotsguard::crawlers::Category;
use robotsguard::enforce::{Outcome, Refused};
use robotsguard::guard::{Guard, OriginSpec};

const GPTBOT: &[u8] = b"Mozilla/5.0 (compatible; GPTBot/1.2; +https://openai.com/gptbot)";

#[test]
fn a_builder_error_names_the_setting_and_where_it_is() {
    let error = Guard::builder()
        .origin(OriginSpec::new("shop", ["shop.example"], "127.0.0.1:8081").robots_inline(""))
        .origin(OriginSpec::new("blog", ["blog.example"], "not a host:port").robots_inline(""))
        .build()
        .err()
        .expect("an upstream that is not host:port is refused");
    let errors = error.config_errors().expect("a config error");
    assert_eq!(errors.0.len(), 1, "{errors}");
    let found = &errors.0[0];
    assert_eq!(found.file, "GuardBuilder");
    assert!(found.line > 0 && found.column > 0, "{found}");
    assert!(found.message.contains("not a host:port"), "{found}");
    assert!(error.to_string().starts_with("GuardBuilder:"), "{error}");
}

#[test]
fn an_unknown_policy_crawler_is_refused_as_serve_refuses_it() {
    let error = Guard::builder()
        .origin(OriginSpec::new("shop", ["shop.example"], "127.0.0.1:8081").robots_inline(""))
        .crawler("NoSuchBot", Action::Block)
        .build()
        .err()
        .expect("a policy for a crawler the catalogue lacks is refused");
    assert!(error.to_string().contains("NoSuchBot"), "{error}");
}

#[test]
fn a_config_file_cannot_be_mixed_with_settings_in_code() {
    let error = Guard::builder()
        .config_file("robotsguard.yaml")
        .origin(OriginSpec::new("shop", ["shop.example"], "127.0.0.1:8081"))
        .build()
        .err()
        .expect("refused");
    assert!(error.to_string().contains("config_file"), "{error}");
}

#[test]
fn a_file_error_points_at_file_line_and_column() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("robotsguard.yaml");
    let mut file = std::fs::File::create(&path).expect("config file");
    file.write_all(
        b"origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:8081\"\n    mode: enforcing\n",
    )
    .expect("written");
    let error = Guard::from_file(&path)
        .err()
        .expect("an unknown mode is refused");
    let errors = error.config_errors().expect("a config error");
    assert_eq!(errors.0[0].line, 5, "{errors}");
    assert_eq!(errors.0[0].column, 11, "{errors}");
    assert!(
        error.to_string().contains("robotsguard.yaml:5:11"),
        "{error}"
    );
}

#[test]
fn inline_robots_text_reaches_the_engine_byte_for_byte() {
    // Quotes, backslashes, tabs, non-ASCII and a YAML-looking line must survive the builder.
    let text =
        "User-agent: GPTBot\nDisallow: /a\"b\\c\n\t# caf\u{e9}: {x: [1]}\nDisallow: /private\n";
    let guard = Guard::builder()
        .origin(OriginSpec::new("shop", ["shop.example"], "127.0.0.1:8081").robots_inline(text))
        .build()
        .expect("valid");
    let snapshot = guard.snapshot();
    let origin = snapshot.origin_named("shop").expect("the origin");
    assert_eq!(&origin.robots.current().body[..], text.as_bytes());
    let decision = guard
        .decide(b"shop.example", GPTBOT, b"/private/x", None)
        .expect("routed");
    assert_eq!(decision.outcome, Outcome::Blocked);
    assert_eq!(decision.rule.as_ref().map(|r| r.line), Some(4));
}

#[test]
fn builder_policy_modes_and_extra_crawlers_apply() {
    let guard = Guard::builder()
        .origin(
            OriginSpec::new("shop", ["shop.example"], "127.0.0.1:8081")
                .robots_inline("User-agent: *\nDisallow: /private\n"),
        )
        .origin(
            OriginSpec::new("docs", ["docs.example"], "127.0.0.1:8082")
                .robots_inline("User-agent: *\nDisallow: /\n")
                .mode(Mode::Report),
        )
        .extra_crawler("AcmeBot", ["acmebot"], Category::AiTraining)
        .category(Category::AiTraining, Action::Block)
        .crawler("GPTBot", Action::Enforce)
        .exempt_paths(["/legal/"])
        .allow_clients(["192.0.2.0/24"])
        .build()
        .expect("valid");
    let decide = |host: &[u8], ua: &[u8], path: &[u8], client: Option<&str>| {
        guard
            .decide(
                host,
                ua,
                path,
                client.map(|c| c.parse().expect("an address")),
            )
            .expect("routed")
            .outcome
    };
    // The category blocks AcmeBot everywhere but the exempt path; GPTBot's own action wins.
    assert_eq!(
        decide(b"shop.example", b"AcmeBot/2.0", b"/", None),
        Outcome::Blocked
    );
    assert_eq!(
        decide(b"shop.example", b"AcmeBot/2.0", b"/legal/terms", None),
        Outcome::Pass
    );
    assert_eq!(
        decide(b"shop.example", GPTBOT, b"/", None),
        Outcome::Allowed
    );
    assert_eq!(
        decide(b"shop.example", GPTBOT, b"/private", None),
        Outcome::Blocked
    );
    assert_eq!(
        decide(b"shop.example", GPTBOT, b"/private", Some("192.0.2.9")),
        Outcome::Pass
    );
    // Report mode proxies what enforce mode would block.
    assert_eq!(
        decide(b"docs.example", GPTBOT, b"/x", None),
        Outcome::WouldBlock
    );
    // Hosts the config does not name are refused by the decision itself.
    assert_eq!(
        guard.decide(b"other.example", GPTBOT, b"/", None).err(),
        Some(Refused::UnknownHost)
    );
}

#[test]
fn redis_state_is_checked_as_serve_checks_it_and_adds_the_store_loop() {
    let origin = || OriginSpec::new("shop", ["shop.example"], "127.0.0.1:8081").robots_inline("");
    let memory = Guard::builder().origin(origin()).build().expect("a guard");
    assert_eq!(memory.store().backend(), "memory");
    let shared = Guard::builder()
        .origin(origin())
        .redis_state("redis://127.0.0.1:6379/0")
        .build()
        .expect("a guard with a shared store");
    assert_eq!(shared.store().backend(), "redis");
    assert_eq!(
        shared.services().len(),
        memory.services().len() + 2,
        "the store's loop and the reports' publisher are two more background services"
    );
    let error = Guard::builder()
        .origin(origin())
        .redis_state("http://127.0.0.1:6379/")
        .build()
        .err()
        .expect("a URL that is not Redis's is refused");
    assert!(error.to_string().contains("not a Redis URL"), "{error}");
}
