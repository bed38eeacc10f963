//! One judgment, two callers: for each scenario, `/explain?…&client=` answers the action and
//! status the real request then gets, and asking `/explain` (twice, before the request) changes
//! nothing: no Crawl-delay budget spent, no strike, no robots.txt read recorded.

use crate::support;

use support::{Origin, Proxy, Request, BROWSER, GPTBOT};

/// A crawler whose one range list (a file) holds 198.51.100.0/24: verifiable from documentation
/// addresses presented through the trusted proxy (127.0.0.1).
const LISTED: &str = "Mozilla/5.0 (compatible; ListedBot/1.0)";

fn start(origin: &Origin, extra: &str) -> Proxy {
    start_with_delay(origin, 30, extra)
}

fn start_with_delay(origin: &Origin, crawl_delay: u32, extra: &str) -> Proxy {
    start_scoped(origin, crawl_delay, "crawlers", extra)
}

/// `scope`: the origin's `offenders.scope`.
fn start_scoped(origin: &Origin, crawl_delay: u32, scope: &str, extra: &str) -> Proxy {
    let body = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n\
         crawlers:\n  extra:\n    - {{name: ListedBot, pattern: ListedBot, category: ai-training, verify: {{ips: [\"file:listed.json\"]}}}}\n\
         origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    \
         robots: {{source: inline, text: \"User-agent: *\\nDisallow: /private\\nCrawl-delay: {crawl_delay}\\n\", serve: false}}\n    \
         offenders: {{action: ban, scope: {scope}, strikes: 2, window: 10m, ban: 1h}}\n{extra}",
        origin.addr()
    );
    let proxy = Proxy::builder(&body)
        .files(&[(
            "listed.json",
            r#"{"prefixes": [{"ipv4Prefix": "198.51.100.0/24"}]}"#,
        )])
        .start();
    // The list is read in the background: wait until it verifies (an explain from inside it).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, json) = proxy.explain_from("shop.example", LISTED, "/", "198.51.100.9");
        if json["verification"]["result"] == "verified" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the list never loaded: {json}"
        );
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    proxy
}

/// `(action, status)` as `/explain` gives them for a GET from `client`.
fn explained(proxy: &Proxy, user_agent: &str, path: &str, client: &str) -> (String, Option<u16>) {
    let (status, json) = proxy.explain_from("shop.example", user_agent, path, client);
    assert!(status == 200, "{status} {json}");
    let answer = &json["answer"];
    let action = answer["action"].as_str().unwrap_or("missing").to_string();
    let status = answer["status"]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok());
    (action, status)
}

/// `(action, status)` of the real request: proxied when the origin answered it (the origin
/// counts it), else robotsguard's status.
fn sent(
    proxy: &Proxy,
    origin: &Origin,
    user_agent: &str,
    path: &str,
    client: &str,
) -> (String, Option<u16>) {
    let before = origin.proxied().len();
    let response = proxy.send(
        &Request::get(path)
            .host("shop.example")
            .ua(user_agent)
            .header("X-Forwarded-For", client),
    );
    if origin.proxied().len() > before {
        ("proxy".to_string(), None)
    } else if response
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/plain"))
        && path.starts_with("/robots.txt")
        && response.status == 200
    {
        ("serve_robots".to_string(), Some(200))
    } else {
        ("refuse".to_string(), Some(response.status))
    }
}

/// Asks `/explain` twice, then sends the request: all three agree.
fn agree(
    proxy: &Proxy,
    origin: &Origin,
    user_agent: &str,
    path: &str,
    client: &str,
) -> (String, Option<u16>) {
    let first = explained(proxy, user_agent, path, client);
    let second = explained(proxy, user_agent, path, client);
    assert_eq!(
        first, second,
        "explain changed its own answer: {user_agent} {path} {client}"
    );
    let real = sent(proxy, origin, user_agent, path, client);
    assert_eq!(
        first, real,
        "explain and the proxy disagree: {user_agent} {path} {client}"
    );
    real
}

fn proxied() -> (String, Option<u16>) {
    ("proxy".to_string(), None)
}

fn refused(status: u16) -> (String, Option<u16>) {
    ("refuse".to_string(), Some(status))
}

#[test]
fn explain_and_the_proxy_agree_on_every_step_of_the_judgment() {
    let origin = Origin::start();
    origin.route("/page", 200, "page");
    let proxy = start(&origin, "");
    // A browser, an allowed crawler, a blocked one.
    assert_eq!(
        agree(&proxy, &origin, BROWSER, "/private", "192.0.2.1"),
        proxied()
    );
    assert_eq!(
        agree(&proxy, &origin, GPTBOT, "/page", "192.0.2.1"),
        proxied()
    );
    assert_eq!(
        agree(&proxy, &origin, GPTBOT, "/private", "192.0.2.1"),
        refused(403)
    );
    // Crawl-delay: the budget was spent by the real request above, not by the explains.
    assert_eq!(
        agree(&proxy, &origin, GPTBOT, "/page", "192.0.2.1"),
        refused(429)
    );
    // Another address has its own budget, and explaining it twice did not spend it.
    assert_eq!(
        agree(&proxy, &origin, GPTBOT, "/page", "192.0.2.2"),
        proxied()
    );
    // The second disallowed request strikes out: banned for crawlers (and requests without a
    // User-Agent), while browsers and apps behind the address are proxied (`scope: crawlers`);
    // robots.txt stays readable and its look-alikes do not.
    assert_eq!(
        agree(&proxy, &origin, GPTBOT, "/private/2", "192.0.2.1"),
        refused(403)
    );
    let (_, json) = proxy.explain_from("shop.example", BROWSER, "/", "192.0.2.1");
    assert!(json["ban"].is_object(), "{json}");
    assert_eq!(json["decision"], "pass", "{json}");
    assert_eq!(agree(&proxy, &origin, BROWSER, "/", "192.0.2.1"), proxied());
    assert_eq!(agree(&proxy, &origin, APP, "/", "192.0.2.1"), proxied());
    assert_eq!(agree(&proxy, &origin, "", "/", "192.0.2.1"), refused(403));
    let (_, json) = proxy.explain_from("shop.example", GPTBOT, "/page", "192.0.2.1");
    assert_eq!(json["decision"], "banned", "{json}");
    assert_eq!(
        agree(&proxy, &origin, GPTBOT, "/page", "192.0.2.1"),
        refused(403)
    );
    assert_eq!(
        agree(&proxy, &origin, GPTBOT, "/robots.txt", "192.0.2.1"),
        proxied()
    );
    for look_alike in [
        "/robots.txt?rest_route=/wp/v2/users",
        "/robots.txt/",
        "/robots.txt.bak",
    ] {
        assert_eq!(
            agree(&proxy, &origin, GPTBOT, look_alike, "192.0.2.1"),
            refused(403)
        );
    }
    // Explaining disallowed requests from a fresh address never strikes it.
    for _ in 0..3 {
        let (_, json) = proxy.explain_from("shop.example", GPTBOT, "/private", "192.0.2.3");
        assert_eq!(json["answer"]["status"], 403, "{json}");
    }
    assert_eq!(agree(&proxy, &origin, BROWSER, "/", "192.0.2.3"), proxied());
    // A verified crawler, and an impostor (blocked by default).
    assert_eq!(
        agree(&proxy, &origin, LISTED, "/page", "198.51.100.9"),
        proxied()
    );
    assert_eq!(
        agree(&proxy, &origin, LISTED, "/page", "8.8.8.8"),
        refused(403)
    );
}

/// An app's HTTP library: passed by the default policy (category `library`).
const APP: &str = "python-requests/2.32.3";

#[test]
fn explain_and_the_proxy_agree_on_a_ban_of_the_whole_address() {
    let origin = Origin::start();
    origin.route("/page", 200, "page");
    let proxy = start_scoped(&origin, 30, "address", "");
    for n in 0..2 {
        assert_eq!(
            agree(
                &proxy,
                &origin,
                GPTBOT,
                &format!("/private/{n}"),
                "192.0.2.1"
            ),
            refused(403)
        );
    }
    for user_agent in [BROWSER, APP, GPTBOT, ""] {
        assert_eq!(
            agree(&proxy, &origin, user_agent, "/page", "192.0.2.1"),
            refused(403),
            "{user_agent}"
        );
    }
    assert_eq!(
        agree(&proxy, &origin, BROWSER, "/robots.txt", "192.0.2.1"),
        proxied()
    );
    // Either scope counts the browser requests (the explains did not).
    let bans = proxy.admin_get("/bans?origin=shop").json();
    assert_eq!(bans["bans"][0]["browser_requests"], 1, "{bans}");
}

#[test]
fn explain_and_the_proxy_agree_in_report_mode_and_for_reported_impostors() {
    let origin = Origin::start();
    origin.route("/page", 200, "page");
    let proxy = start(&origin, "    mode: report\n");
    assert_eq!(
        agree(&proxy, &origin, GPTBOT, "/private", "192.0.2.1"),
        proxied()
    );
    assert_eq!(
        agree(&proxy, &origin, GPTBOT, "/page", "192.0.2.1"),
        proxied()
    );
    assert_eq!(
        agree(&proxy, &origin, GPTBOT, "/page", "192.0.2.1"),
        proxied()
    );

    let origin = Origin::start();
    origin.route("/page", 200, "page");
    let proxy = start(&origin, "    impostors: report\n");
    // Reported, so proxied; held to the Crawl-delay of its address all the same.
    assert_eq!(
        agree(&proxy, &origin, LISTED, "/page", "8.8.8.8"),
        proxied()
    );
    assert_eq!(
        agree(&proxy, &origin, LISTED, "/page", "8.8.8.8"),
        refused(429)
    );
}

#[test]
fn explain_and_the_proxy_agree_on_exempt_paths_and_allowed_clients() {
    let origin = Origin::start();
    let proxy = start(
        &origin,
        "    policy: {exempt_paths: [/private/open], allow_clients: [\"192.0.2.200/32\"]}\n",
    );
    assert_eq!(
        agree(&proxy, &origin, GPTBOT, "/private/open", "192.0.2.1"),
        proxied()
    );
    assert_eq!(
        agree(&proxy, &origin, GPTBOT, "/private/x", "192.0.2.200"),
        proxied()
    );
    assert_eq!(
        agree(&proxy, &origin, GPTBOT, "/private/x", "192.0.2.200"),
        proxied()
    );
    assert_eq!(
        agree(&proxy, &origin, GPTBOT, "/private/x", "192.0.2.1"),
        refused(403)
    );
}

#[test]
fn explain_and_the_proxy_agree_before_and_after_the_crawl_delay() {
    let origin = Origin::start();
    origin.route("/page", 200, "page");
    let proxy = start_with_delay(&origin, 1, "");
    assert_eq!(
        agree(&proxy, &origin, GPTBOT, "/page", "192.0.2.1"),
        proxied()
    );
    assert_eq!(
        agree(&proxy, &origin, GPTBOT, "/page", "192.0.2.1"),
        refused(429)
    );
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(
        agree(&proxy, &origin, GPTBOT, "/page", "192.0.2.1"),
        proxied()
    );
}
