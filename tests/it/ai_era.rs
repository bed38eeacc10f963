//! robots.txt for the AI era, through the real proxy: crawlers' purposes and `policy.purposes`
//! (precedence, the most restrictive of several), `Content-Signal` and `Content-Usage` lines
//! (group-wide, path-scoped by longest match, never on disallowed paths, unknown keys and
//! malformed lines ignored) under `enforce`, `report` and `ignore`, the `Content-Usage` response
//! header, the 402 licence answer with its `Link`, and `Crawl-delay` per crawler.

use crate::support;

use support::{inline_robots, metric, site, Origin, Proxy, BROWSER, GOOGLEBOT, GPTBOT};

const HOST: &str = "shop.example";
const CHATGPT_USER: &str =
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; ChatGPT-User/1.0; +https://openai.com/bot";
const OAI_SEARCHBOT: &str =
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; OAI-SearchBot/1.0; +https://openai.com/searchbot";
const CCBOT: &str = "CCBot/2.0 (https://commoncrawl.org/faq/)";

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
        "    policy:\n      purposes: {search: pass, training: block}\n",
    );
    // Googlebot searches and its pages train Gemini: block beats pass.
    assert_eq!(status(&proxy, "/a", GOOGLEBOT), 403);
    let (_, explain) = proxy.explain(HOST, GOOGLEBOT, "/a");
    assert_eq!(
        explain["crawler"]["purposes"],
        serde_json::json!(["search", "training"])
    );
    assert_eq!(explain["policy"], "purpose search+training: block");
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
    assert_eq!(status(&proxy, "/a", GOOGLEBOT), 403);
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
        .is_some_and(|ua| ua == OAI_SEARCHBOT || ua == BROWSER)));
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
