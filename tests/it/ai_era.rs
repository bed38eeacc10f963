//! robots.txt for the AI era, through the real proxy: crawlers' purposes and `policy.purposes`
//! (precedence, the most restrictive of several), `Content-Signal` and `Content-Usage` lines
//! (group-wide, path-scoped by longest match, never on disallowed paths, unknown keys and
//! malformed lines ignored) under `enforce`, `report` and `ignore`, the `Content-Usage` response
//! header, the 402 licence answer with its `Link`, and `Crawl-delay` per crawler. Refusing
//! training never refuses a search engine: Googlebot's and Applebot's training is refused through
//! their operators' own tokens (groups robotsguard adds to the robots.txt it serves), bingbot's
//! only with `multi_purpose: block`.

use crate::support;

use support::{inline_robots, metric, site, Origin, Proxy, BROWSER, GOOGLEBOT, GPTBOT};

const HOST: &str = "shop.example";
const CHATGPT_USER: &str =
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; ChatGPT-User/1.0; +https://openai.com/bot";
const OAI_SEARCHBOT: &str =
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; OAI-SearchBot/1.0; +https://openai.com/searchbot";
const CCBOT: &str = "CCBot/2.0 (https://commoncrawl.org/faq/)";
const BINGBOT: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) Chrome/116.0.1938.76 Safari/537.36";
const APPLEBOT: &str = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)";
/// The three search engines whose crawlers also serve training.
const SEARCH_ENGINES: [&str; 3] = [GOOGLEBOT, BINGBOT, APPLEBOT];

/// Group-wide and path-scoped preferences, a malformed line, a line on a disallowed path, and a
/// group of CCBot's own with an unknown key and an unknown value.
const SIGNALS: &str = "\
User-agent: *
Content-Signal: search=yes, ai-train=no, ai-input=no
Content-Usage: /open/ train-ai=y
Content-Usage: /open/deep/ train-ai=n
Content-Signal: broken
Disallow: /private
Content-Usage: /private/ train-ai=y

User-agent: CCBot
Content-Usage: train-ai=n, future-use=y
Content-Signal: ai-train=maybe, search=yes
Allow: /
";

fn start(robots: &str, origin_extra: &str) -> (Origin, Proxy) {
    let origin = Origin::start();
    let extra = format!(
        "    impostors: ignore\n{origin_extra}{}",
        inline_robots(robots)
    );
    let proxy = Proxy::start(&site(&origin, HOST, &extra));
    (origin, proxy)
}

fn status(proxy: &Proxy, path: &str, user_agent: &str) -> u16 {
    proxy.get(HOST, path, user_agent).status
}

#[test]
fn policy_purposes_sit_between_crawlers_and_categories() {
    let (_origin, proxy) = start(
        "User-agent: *\nDisallow: /private\n",
        "    policy:\n      categories: {ai-training: pass}\n      purposes: {training: block}\n      crawlers: {CCBot: enforce}\n",
    );
    // The purpose wins over the category…
    assert_eq!(status(&proxy, "/a", GPTBOT), 403);
    let (_, explain) = proxy.explain(HOST, GPTBOT, "/a");
    assert_eq!(explain["policy"], "purpose training: block", "{explain}");
    assert_eq!(
        explain["crawler"]["purposes"],
        serde_json::json!(["training"])
    );
    // …and the crawler's own entry wins over the purpose.
    assert_eq!(status(&proxy, "/a", CCBOT), 200);
    assert_eq!(status(&proxy, "/private/x", CCBOT), 403);
    // Purposes no entry names fall through to the categories and robots.txt.
    assert_eq!(status(&proxy, "/a", OAI_SEARCHBOT), 200);
    assert_eq!(status(&proxy, "/private/x", OAI_SEARCHBOT), 403);
    assert_eq!(status(&proxy, "/private/x", BROWSER), 200);
}

#[test]
fn a_crawler_of_several_purposes_gets_the_most_restrictive_action() {
    let (_origin, proxy) = start(
        "User-agent: *\nDisallow: /private\n",
        "    policy:\n      purposes: {other: pass, search: pass, training: block}\n",
    );
    // CCBot's open archive is read above all to train models: block beats pass.
    assert_eq!(status(&proxy, "/a", CCBOT), 403);
    let (_, explain) = proxy.explain(HOST, CCBOT, "/a");
    assert_eq!(
        explain["crawler"]["purposes"],
        serde_json::json!(["training", "other"])
    );
    assert_eq!(explain["policy"], "purpose training+other: block");
    // Googlebot searches and its pages train Gemini, but Google lets a site refuse the
    // training alone (Google-Extended): the search purpose's pass decides.
    assert_eq!(status(&proxy, "/private/x", GOOGLEBOT), 200);
    let (_, explain) = proxy.explain(HOST, GOOGLEBOT, "/a");
    assert_eq!(
        explain["crawler"]["purposes"],
        serde_json::json!(["search", "training"])
    );
    assert_eq!(explain["policy"], "purpose search+training: pass");
    // A search-only crawler passes, robots.txt notwithstanding.
    assert_eq!(status(&proxy, "/private/x", OAI_SEARCHBOT), 200);
}

#[test]
fn content_signals_enforced_group_wide_path_scoped_and_by_longest_match() {
    let (origin, proxy) = start(SIGNALS, "    content_signals: {action: enforce}\n");
    // Group-wide: ai-train=no refuses training, ai-input=no refuses agents, search=yes passes.
    let refused = proxy.get(HOST, "/a", GPTBOT);
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(refused.text().contains("line 2"), "{}", refused.text());
    // Googlebot's training is refused through Google-Extended, not by refusing Googlebot.
    assert_eq!(status(&proxy, "/a", GOOGLEBOT), 200);
    assert_eq!(status(&proxy, "/a", CHATGPT_USER), 403);
    assert_eq!(status(&proxy, "/a", OAI_SEARCHBOT), 200);
    assert_eq!(status(&proxy, "/a", BROWSER), 200);
    let (_, explain) = proxy.explain(HOST, GPTBOT, "/a");
    assert_eq!(explain["decision"], "blocked", "{explain}");
    assert_eq!(explain["policy"], "content-signal");
    assert_eq!(explain["content_signal"]["line"], 2);
    assert_eq!(explain["content_signal"]["purpose"], "training");
    assert!(explain["reason"]
        .as_str()
        .unwrap_or("")
        .contains("ai-train=no"));
    // Path-scoped: the longest matching path speaks first.
    assert_eq!(status(&proxy, "/open/page", GPTBOT), 200);
    assert_eq!(status(&proxy, "/open/deep/page", GPTBOT), 403);
    let (_, explain) = proxy.explain(HOST, GPTBOT, "/open/deep/page");
    assert_eq!(explain["content_signal"]["line"], 4, "{explain}");
    assert_eq!(explain["preferences"][0]["scoped"], true);
    // Never on a path the group may not crawl: robots.txt's rule decides there, and no
    // preference is shown.
    let (_, explain) = proxy.explain(HOST, GPTBOT, "/private/x");
    assert_eq!(explain["policy"], "robots.txt", "{explain}");
    assert_eq!(explain["preferences"], serde_json::json!([]));
    assert_eq!(status(&proxy, "/private/x", OAI_SEARCHBOT), 403);
    // A group of its own: CCBot's Content-Usage refuses training; its unknown key and unknown
    // value decide nothing, and the malformed line broke nothing.
    assert_eq!(status(&proxy, "/a", CCBOT), 403);
    let (_, explain) = proxy.explain(HOST, CCBOT, "/a");
    assert_eq!(explain["content_signal"]["line"], 10, "{explain}");
    let metrics = proxy.metrics();
    let labels = [
        ("origin", "shop"),
        ("crawler", "GPTBot"),
        ("purpose", "training"),
        ("action", "enforce"),
    ];
    assert!(metric(&metrics, "robotsguard_content_signals_total", &labels) >= 2.0);
    assert!(origin.proxied_to("/a").iter().all(|r| r
        .header("user-agent")
        .is_some_and(|ua| ua == OAI_SEARCHBOT || ua == BROWSER || ua == GOOGLEBOT)));
}

#[test]
fn unknown_keys_alone_refuse_nothing() {
    let (_origin, proxy) = start(
        "User-agent: *\nContent-Signal: use=immediate\nContent-Usage: future-use=n\nContent-Signal: ai-train\nAllow: /\n",
        "    content_signals: {action: enforce}\n",
    );
    assert_eq!(status(&proxy, "/a", GPTBOT), 200);
    let (_, explain) = proxy.explain(HOST, GPTBOT, "/a");
    assert_eq!(
        explain["content_signal"],
        serde_json::Value::Null,
        "{explain}"
    );
    assert_eq!(explain["preferences"].as_array().map(Vec::len), Some(2));
}

#[test]
fn content_signals_reported_by_default_and_ignored_when_asked() {
    let (_origin, proxy) = start(SIGNALS, "");
    assert_eq!(status(&proxy, "/a", GPTBOT), 200);
    let (_, explain) = proxy.explain(HOST, GPTBOT, "/a");
    assert_eq!(explain["decision"], "would_block", "{explain}");
    assert_eq!(explain["policy"], "content-signal");
    let metrics = proxy.metrics();
    let labels = [
        ("origin", "shop"),
        ("crawler", "GPTBot"),
        ("purpose", "training"),
        ("action", "report"),
    ];
    assert_eq!(
        metric(&metrics, "robotsguard_content_signals_total", &labels),
        1.0
    );
    // robotsguard_requests_total is counted in the logging phase, after the answer is sent.
    assert_eq!(
        proxy.wait_metric(
            "robotsguard_requests_total",
            &[("origin", "shop"), ("decision", "would_block")],
            1.0
        ),
        1.0
    );

    let (_origin, ignoring) = start(SIGNALS, "    content_signals: {action: ignore}\n");
    assert_eq!(status(&ignoring, "/a", GPTBOT), 200);
    let (_, explain) = ignoring.explain(HOST, GPTBOT, "/a");
    assert_eq!(explain["decision"], "allowed", "{explain}");
    assert_eq!(explain["content_signal"], serde_json::Value::Null);
}

#[test]
fn responses_carry_content_usage_unless_the_origin_set_one() {
    let (origin, proxy) = start(
        SIGNALS,
        "    content_signals: {action: ignore, header: true}\n",
    );
    origin.route_with_header("/own", 200, "own", ("Content-Usage", "train-ai=y"));
    let page = proxy.get(HOST, "/a", BROWSER);
    assert_eq!(page.status, 200);
    assert_eq!(page.header("content-usage"), Some("search=y, train-ai=n"));
    let open = proxy.get(HOST, "/open/x", GPTBOT);
    assert_eq!(open.header("content-usage"), Some("search=y, train-ai=y"));
    let own = proxy.get(HOST, "/own", BROWSER);
    assert_eq!(own.header("content-usage"), Some("train-ai=y"));
    let (_, explain) = proxy.explain(HOST, BROWSER, "/a");
    assert_eq!(
        explain["content_usage"], "search=y, train-ai=n",
        "{explain}"
    );

    let (_origin, quiet) = start(SIGNALS, "");
    assert_eq!(quiet.get(HOST, "/a", BROWSER).header("content-usage"), None);
}

#[test]
fn a_402_points_at_the_licence_from_config_or_robots_txt() {
    let (_origin, proxy) = start(
        "User-agent: *\nDisallow: /private\n",
        "    block: {status: 402, license_url: \"https://terms.example/license.xml\"}\n",
    );
    let answer = proxy.get(HOST, "/private/x", GPTBOT);
    assert_eq!(answer.status, 402, "{}", answer.text());
    assert_eq!(
        answer.header("link"),
        Some("<https://terms.example/license.xml>; rel=\"license\"")
    );
    assert!(answer.text().starts_with("402"), "{}", answer.text());
    // Never by default for a fetch on a person's behalf; never for robots.txt.
    let agent = proxy.get(HOST, "/private/x", CHATGPT_USER);
    assert_eq!(agent.status, 403, "{}", agent.text());
    assert!(agent.text().starts_with("403"), "{}", agent.text());
    assert_eq!(agent.header("link"), None);
    assert_eq!(status(&proxy, "/robots.txt", GPTBOT), 200);
    assert_eq!(
        proxy.wait_metric(
            "robotsguard_requests_total",
            &[("origin", "shop"), ("decision", "payment_required")],
            1.0
        ),
        1.0
    );

    let licence = format!("https://{HOST}/license.xml");
    let (origin, licensing) = start(
        &format!("License: {licence}\nUser-agent: *\nAllow: /\n"),
        "    policy:\n      purposes: {training: license}\n",
    );
    let answer = licensing.get(HOST, "/article", GPTBOT);
    assert_eq!(answer.status, 402, "{}", answer.text());
    assert_eq!(
        answer.header("link").map(str::to_string),
        Some(format!("<{licence}>; rel=\"license\""))
    );
    let (_, explain) = licensing.explain(HOST, GPTBOT, "/article");
    assert_eq!(explain["decision"], "payment_required", "{explain}");
    assert_eq!(explain["answer"]["status"], 402);
    assert_eq!(explain["answer"]["license"], licence);
    // The licence itself and robots.txt stay readable; other purposes are not licensed.
    assert_eq!(status(&licensing, "/license.xml", GPTBOT), 200);
    assert_eq!(origin.proxied_to("/license.xml").len(), 1);
    assert_eq!(status(&licensing, "/robots.txt", GPTBOT), 200);
    assert_eq!(status(&licensing, "/article", OAI_SEARCHBOT), 200);
    assert_eq!(status(&licensing, "/article", BROWSER), 200);
}

#[test]
fn crawl_delay_is_reported_for_crawlers_that_ignore_it_unless_overridden() {
    let robots = "User-agent: *\nCrawl-delay: 30\n";
    let (_origin, proxy) = start(robots, "");
    // Googlebot is documented to ignore Crawl-delay: counted, never 429.
    for _ in 0..3 {
        assert_eq!(status(&proxy, "/a", GOOGLEBOT), 200);
    }
    assert_eq!(status(&proxy, "/a", GPTBOT), 200);
    assert_eq!(status(&proxy, "/b", GPTBOT), 429);
    assert_eq!(
        proxy.wait_metric(
            "robotsguard_requests_total",
            &[
                ("origin", "shop"),
                ("crawler", "Googlebot"),
                ("decision", "would_limit")
            ],
            2.0
        ),
        2.0
    );
    let (_, explain) = proxy.explain(HOST, GOOGLEBOT, "/a");
    assert_eq!(explain["crawl_delay"]["action"], "report", "{explain}");

    let (_origin, overridden) = start(
        robots,
        "    crawl_delay:\n      crawlers: {Googlebot: enforce, GPTBot: ignore}\n",
    );
    assert_eq!(status(&overridden, "/a", GOOGLEBOT), 200);
    assert_eq!(status(&overridden, "/b", GOOGLEBOT), 429);
    for _ in 0..3 {
        assert_eq!(status(&overridden, "/a", GPTBOT), 200);
    }
    let metrics = overridden.metrics();
    assert_eq!(
        metric(
            &metrics,
            "robotsguard_requests_total",
            &[
                ("origin", "shop"),
                ("crawler", "GPTBot"),
                ("decision", "would_limit")
            ]
        ),
        0.0
    );
}

#[test]
fn config_names_purposes_and_crawlers_it_knows() {
    let origin = Origin::start();
    for (extra, needle) in [
        (
            "    policy: {purposes: {trainig: block}}\n",
            "unknown purpose `trainig`",
        ),
        (
            "    crawl_delay: {crawlers: {Gooblebot: ignore}}\n",
            "no crawler is named `Gooblebot`",
        ),
        ("    content_signals: {action: refuse}\n", "action"),
        ("    block: {license_url: /terms}\n", "license_url"),
    ] {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("c.yaml");
        std::fs::write(&path, site(&origin, HOST, extra)).expect("config written");
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_robotsguard"))
            .args(["validate", "--config-only", "--config"])
            .arg(&path)
            .output()
            .expect("validate runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_ne!(output.status.code(), Some(0), "{extra}");
        assert!(stderr.contains(needle), "{extra}: {stderr}");
    }
}

#[test]
fn crawlers_added_in_the_config_take_purposes_or_their_categorys() {
    let origin = Origin::start();
    let body = format!(
        "crawlers:\n  extra:\n    - {{name: HelperBot, category: ai-search, purposes: [agent]}}\n    \
         - {{name: IndexBot, category: ai-search}}\n{}",
        site(
            &origin,
            HOST,
            &format!(
                "    policy: {{purposes: {{agent: block}}}}\n{}",
                inline_robots("User-agent: *\nAllow: /\n")
            )
        )
    );
    let proxy = Proxy::start(&body);
    assert_eq!(status(&proxy, "/a", "HelperBot/1.0"), 403);
    assert_eq!(status(&proxy, "/a", "IndexBot/1.0"), 200);
    let (_, explain) = proxy.explain(HOST, "IndexBot/1.0", "/a");
    assert_eq!(
        explain["crawler"]["purposes"],
        serde_json::json!(["search"])
    );
}

/// The robots.txt robotsguard serves `proxy`'s clients.
fn served_robots(proxy: &Proxy) -> String {
    let answer = proxy.get(HOST, "/robots.txt", BROWSER);
    assert_eq!(answer.status, 200);
    answer.text()
}

#[test]
fn refusing_training_by_purpose_keeps_search_engines_and_refuses_through_their_tokens() {
    for action in ["block", "license"] {
        let (origin, proxy) = start(
            "User-agent: *\nDisallow: /private\n",
            &format!("    policy:\n      purposes: {{training: {action}}}\n"),
        );
        for search in SEARCH_ENGINES {
            let page = proxy.get(HOST, "/a", search);
            assert_eq!(page.status, 200, "{action} {search}: {}", page.text());
            // Still bound by robots.txt.
            assert_eq!(status(&proxy, "/private/x", search), 403, "{search}");
        }
        let trainer = if action == "block" { 403 } else { 402 };
        assert_eq!(status(&proxy, "/a", GPTBOT), trainer);
        assert_eq!(origin.proxied_to("/a").len(), 3);
        let served = served_robots(&proxy);
        for token in ["Google-Extended", "Applebot-Extended"] {
            assert!(
                served.contains(&format!("User-agent: {token}\nDisallow: /\n")),
                "{served}"
            );
        }
        assert!(
            served.contains("# Added by robotsguard: policy.purposes refuses training"),
            "{served}"
        );
        // The served file, not the origin's, is the one crawlers read.
        assert!(origin.proxied_to("/robots.txt").is_empty());

        let (_, explain) = proxy.explain(HOST, GOOGLEBOT, "/a");
        assert_eq!(explain["decision"], "allowed", "{explain}");
        assert_eq!(explain["robots_served_by"], "robotsguard");
        let spared = &explain["spared_purposes"][0];
        assert_eq!(spared["purpose"], "training", "{explain}");
        assert_eq!(spared["why"], "control_token");
        assert_eq!(spared["token"], "Google-Extended");
        assert_eq!(spared["group"], "added");
        let (_, explain) = proxy.explain(HOST, BINGBOT, "/a");
        assert_eq!(
            explain["spared_purposes"][0]["why"], "serves_search",
            "{explain}"
        );
        assert!(explain["spared_purposes"][0]["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("multi_purpose")));
    }
}

#[test]
fn multi_purpose_block_refuses_a_search_engine_without_a_token_only() {
    let (_origin, proxy) = start(
        "User-agent: *\nAllow: /\n",
        "    policy:\n      purposes: {training: {action: block, multi_purpose: block}}\n",
    );
    assert_eq!(status(&proxy, "/a", BINGBOT), 403);
    let (_, explain) = proxy.explain(HOST, BINGBOT, "/a");
    assert_eq!(
        explain["policy"], "purpose search+training: block",
        "{explain}"
    );
    // Google and Apple give sites their tokens: their crawlers are never refused for it.
    assert_eq!(status(&proxy, "/a", GOOGLEBOT), 200);
    assert_eq!(status(&proxy, "/a", APPLEBOT), 200);
    assert_eq!(status(&proxy, "/a", GPTBOT), 403);
    assert!(served_robots(&proxy).contains("User-agent: Google-Extended\nDisallow: /\n"));
}

#[test]
fn a_training_signal_keeps_search_engines_and_its_refusal_cites_the_line() {
    let robots = "User-agent: *\nContent-Signal: search=yes, ai-train=no\nAllow: /\n";
    let (origin, proxy) = start(robots, "    content_signals: {action: enforce}\n");
    for search in SEARCH_ENGINES {
        let page = proxy.get(HOST, "/a", search);
        assert_eq!(page.status, 200, "{search}: {}", page.text());
    }
    let served = served_robots(&proxy);
    assert!(
        served.starts_with(robots),
        "the site's lines stay first: {served}"
    );
    for token in ["Google-Extended", "Applebot-Extended"] {
        assert!(
            served.contains(&format!("User-agent: {token}\nDisallow: /\n")),
            "{served}"
        );
    }
    assert!(served.contains("line 2 refuses training"), "{served}");

    // The refusal names the preference line, not the `Allow: /` that let the path be fetched:
    // in the body, in /explain and in the log line.
    let refused = proxy.get(HOST, "/a", GPTBOT);
    assert_eq!(refused.status, 403);
    assert!(
        refused
            .text()
            .contains("Reason: robots.txt line 2: Content-Signal: search=yes, ai-train=no\n"),
        "{}",
        refused.text()
    );
    assert!(!refused.text().contains("Allow: /"), "{}", refused.text());
    let (_, explain) = proxy.explain(HOST, GPTBOT, "/a");
    assert_eq!(explain["rule"]["line"], 2, "{explain}");
    assert_eq!(explain["rule"]["directive"], "Content-Signal");
    assert_eq!(explain["rule"]["pattern"], "search=yes, ai-train=no");
    assert!(
        proxy.wait_log(
            "rule=\"Content-Signal: search=yes, ai-train=no\"",
            1,
            std::time::Duration::from_secs(10)
        ),
        "{}",
        proxy.stderr()
    );
    assert!(origin.proxied_to("/a").len() == 3);

    // `multi_purpose: block`: bingbot, whose search and training are one crawl, is refused
    // too; Googlebot and Applebot still are not.
    let (_origin, strict) = start(
        robots,
        "    content_signals: {action: enforce, multi_purpose: block}\n",
    );
    assert_eq!(status(&strict, "/a", BINGBOT), 403);
    assert_eq!(status(&strict, "/a", GOOGLEBOT), 200);
    assert_eq!(status(&strict, "/a", APPLEBOT), 200);

    // Reported only: nothing is added to robots.txt, and /explain says why.
    let (origin, reported) = start(robots, "");
    assert_eq!(status(&reported, "/a", GOOGLEBOT), 200);
    let (_, explain) = reported.explain(HOST, GOOGLEBOT, "/a");
    assert_eq!(explain["decision"], "allowed", "{explain}");
    assert_eq!(explain["spared_purposes"][0]["group"], "not_added");
    assert!(!served_robots(&reported).contains("Google-Extended"));
    assert_eq!(origin.proxied_to("/a").len(), 1);
}

#[test]
fn the_sites_own_token_group_is_left_as_it_is() {
    let robots = "User-agent: *\nContent-Signal: ai-train=no\nAllow: /\n\nUser-agent: Google-Extended\nAllow: /open/\nDisallow: /\n";
    let (_origin, proxy) = start(robots, "    content_signals: {action: enforce}\n");
    assert_eq!(status(&proxy, "/a", GOOGLEBOT), 200);
    let served = served_robots(&proxy);
    assert_eq!(served.matches("Google-Extended").count(), 1, "{served}");
    assert!(served.contains("User-agent: Applebot-Extended"), "{served}");
    let (_, explain) = proxy.explain(HOST, GOOGLEBOT, "/a");
    assert_eq!(explain["spared_purposes"][0]["group"], "site", "{explain}");
}

/// `robotsguard validate` (with `extra` flags) on a config of one origin with `policy`.
fn validate(policy: &str, extra: &[&str]) -> (Option<i32>, String) {
    let origin = Origin::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("c.yaml");
    let body = site(
        &origin,
        HOST,
        &format!(
            "    policy: {policy}\n{}",
            inline_robots("User-agent: *\nAllow: /\n")
        ),
    );
    std::fs::write(&path, body).expect("config written");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_robotsguard"))
        .args(["validate", "--config"])
        .arg(&path)
        .args(extra)
        .output()
        .expect("validate runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn validate_warns_of_a_search_engine_refused_everywhere_and_strict_fails() {
    for (policy, setting, crawler) in [
        (
            "{crawlers: {Googlebot: block}}",
            "`policy.crawlers.Googlebot: block`",
            "Googlebot",
        ),
        (
            "{purposes: {search: block}}",
            "`policy.purposes.search: block`",
            "bingbot",
        ),
        (
            "{categories: {search: license}}",
            "`policy.categories.search: license`",
            "Applebot",
        ),
        (
            "{purposes: {training: {action: block, multi_purpose: block}}}",
            "multi_purpose: block}`",
            "bingbot",
        ),
    ] {
        let (code, stderr) = validate(policy, &[]);
        assert_eq!(code, Some(0), "{policy}: {stderr}");
        let warning = stderr
            .lines()
            .find(|line| line.contains("warning:"))
            .unwrap_or_else(|| panic!("{policy}: no warning: {stderr}"));
        for needle in ["origin `shop`", setting, crawler] {
            assert!(warning.contains(needle), "{policy}: {needle}: {warning}");
        }
        let (code, stderr) = validate(policy, &["--strict"]);
        assert_eq!(code, Some(1), "{policy} --strict: {stderr}");
    }
    // Refusing training alone takes no search engine away.
    for policy in [
        "{purposes: {training: block}}",
        "{purposes: {training: license}}",
    ] {
        let (code, stderr) = validate(policy, &["--strict"]);
        assert_eq!(code, Some(0), "{policy}: {stderr}");
        assert!(!stderr.contains("warning:"), "{policy}: {stderr}");
    }
}

#[test]
fn serve_and_every_reload_log_and_count_the_warnings() {
    let origin = Origin::start();
    let config = |policy: &str| {
        site(
            &origin,
            HOST,
            &format!(
                "    policy: {policy}\n{}",
                inline_robots("User-agent: *\nAllow: /\n")
            ),
        )
    };
    let proxy = Proxy::start(&config("{crawlers: {Googlebot: block}}"));
    let kind = [("kind", "search_crawler_refused")];
    assert_eq!(
        proxy.wait_metric("robotsguard_config_warnings_total", &kind, 1.0),
        1.0
    );
    assert!(proxy.wait_log(
        "warning: origin `shop`: `policy.crawlers.Googlebot: block` refuses",
        1,
        std::time::Duration::from_secs(10)
    ));
    assert!(proxy.wait_log(
        "config reload: watching",
        1,
        std::time::Duration::from_secs(10)
    ));
    proxy.replace_config(&proxy.config_text(&config("{purposes: {search: block}}")));
    assert_eq!(proxy.wait_reloads("success", 1.0), 1.0);
    assert_eq!(
        proxy.wait_metric("robotsguard_config_warnings_total", &kind, 2.0),
        2.0
    );
    assert!(proxy.wait_log(
        "`policy.purposes.search: block` refuses the search crawlers",
        1,
        std::time::Duration::from_secs(10)
    ));
    // The other kind's series is there from the start, at 0.
    let metrics = proxy.metrics();
    assert_eq!(
        metric(
            &metrics,
            "robotsguard_config_warnings_total",
            &[("kind", "proxy_protocol_untrusted")]
        ),
        0.0
    );
}

#[test]
fn a_fetched_robots_txt_gets_the_token_groups_too() {
    let origin = Origin::start();
    origin.robots(
        200,
        "User-agent: *\nContent-Signal: search=yes, ai-train=no\nDisallow: /private\n",
    );
    let proxy = Proxy::start(&site(
        &origin,
        HOST,
        "    content_signals: {action: enforce}\n",
    ));
    for search in SEARCH_ENGINES {
        assert_eq!(status(&proxy, "/a", search), 200, "{search}");
        assert_eq!(status(&proxy, "/private/x", search), 403, "{search}");
    }
    assert_eq!(status(&proxy, "/a", GPTBOT), 403);
    let served = served_robots(&proxy);
    assert!(
        served.starts_with("User-agent: *\nContent-Signal: search=yes, ai-train=no\n"),
        "{served}"
    );
    assert!(
        served.contains("User-agent: Applebot-Extended\nDisallow: /\n"),
        "{served}"
    );
    let fetches = origin.robots_fetches();
    assert_eq!(served_robots(&proxy), served);
    assert_eq!(
        origin.robots_fetches(),
        fetches,
        "served from the copy in force"
    );
}

#[test]
fn a_content_usage_training_refusal_keeps_search_engines_too() {
    let robots = "User-agent: *\nContent-Usage: train-ai=n, search=y\nAllow: /\n";
    let (_origin, proxy) = start(robots, "    content_signals: {action: enforce}\n");
    for search in SEARCH_ENGINES {
        assert_eq!(status(&proxy, "/a", search), 200, "{search}");
    }
    let refused = proxy.get(HOST, "/a", GPTBOT);
    assert_eq!(refused.status, 403);
    assert!(
        refused
            .text()
            .contains("Reason: robots.txt line 2: Content-Usage: train-ai=n, search=y\n"),
        "{}",
        refused.text()
    );
    let served = served_robots(&proxy);
    assert!(
        served.contains("User-agent: Google-Extended\nDisallow: /\n"),
        "{served}"
    );
}
