//! The decision listener (`decision`) gives the inline proxy's answer through every caller
//! convention: for each scenario of the one-judgment tests, the same requests are sent through
//! the proxy of one robotsguard and, as a front proxy would ask, to the decision listener of
//! another with the same config (one per convention: each spends its own budgets, strikes and
//! bans), and status, `Retry-After`, `Link` and body agree step by step. Then the listener's
//! own rules: trusted callers, bad input, nginx's 403-only flavour, `on_error`, the counters.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::support;

use support::{free_port, metric, Conn, Origin, Proxy, Request, BROWSER, GPTBOT};

const HOST: &str = "shop.example";
/// Verifiable from 198.51.100.0/24 (its range list is a file).
const LISTED: &str = "Mozilla/5.0 (compatible; ListedBot/1.0)";
const APP: &str = "python-requests/2.32.3";

/// How a front proxy asks.
#[derive(Clone, Copy, Debug)]
enum Convention {
    /// Traefik and Caddy: `GET /auth` with `X-Forwarded-*`.
    ForwardAuth,
    /// nginx `auth_request`: `GET /auth/nginx` with `X-Original-*` and `Host`.
    Nginx,
    /// Envoy HTTP `ext_authz`: `/envoy` + the original path, the original `Host`.
    Envoy,
}

const CONVENTIONS: [Convention; 3] = [
    Convention::ForwardAuth,
    Convention::Nginx,
    Convention::Envoy,
];

/// What a client gets: `None` when the request went to the origin, else robotsguard's answer.
#[derive(Debug, PartialEq)]
struct Seen {
    refusal: Option<Refused>,
}

#[derive(Debug, PartialEq)]
struct Refused {
    status: u16,
    link: Option<String>,
    /// Present or not (its seconds are compared within a second: two processes, two clocks).
    retry_after: Option<u64>,
    body: String,
}

/// The body with the parts that depend on the moment (a ban's end, a wait's seconds) blanked.
fn timeless(body: &str) -> String {
    let body = regex::Regex::new(r"until [^\n]* GMT")
        .unwrap()
        .replace_all(body, "until (date)");
    regex::Regex::new(r"retry after \d+ s")
        .unwrap()
        .replace_all(&body, "retry after (n) s")
        .into_owned()
}

fn refused(response: &support::Response) -> Refused {
    Refused {
        status: response.status,
        link: response.header("link").map(str::to_string),
        retry_after: response
            .header("retry-after")
            .and_then(|value| value.parse().ok()),
        body: response.text(),
    }
}

/// A robotsguard with `body` and a decision listener; waits until ListedBot's range list loaded.
fn start(body: &str) -> (Proxy, SocketAddr) {
    let decision = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let config = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n\
         decision: {{listen: [\"{decision}\"]}}\n\
         crawlers:\n  extra:\n    - {{name: ListedBot, pattern: ListedBot, category: ai-training, verify: {{ips: [\"file:listed.json\"]}}}}\n{body}"
    );
    let proxy = Proxy::builder(&config)
        .files(&[(
            "listed.json",
            r#"{"prefixes": [{"ipv4Prefix": "198.51.100.0/24"}]}"#,
        )])
        .start();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, json) = proxy.explain_from(HOST, LISTED, "/", "198.51.100.9");
        if json["verification"]["result"] == "verified" {
            break;
        }
        assert!(Instant::now() < deadline, "the list never loaded: {json}");
        std::thread::sleep(Duration::from_millis(25));
    }
    (proxy, decision)
}

fn origin_config(origin: &Origin, robots: &str, scope: &str, extra: &str) -> String {
    format!(
        "origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: \"{}\"\n    \
         robots: {{source: inline, text: {}, serve: false}}\n    \
         offenders: {{action: ban, scope: {scope}, strikes: 2, window: 10m, ban: 1h}}\n{extra}",
        origin.addr(),
        serde_json::to_string(robots).unwrap()
    )
}

/// The request through the inline proxy.
fn inline(proxy: &Proxy, origin: &Origin, user_agent: &str, path: &str, client: &str) -> Seen {
    let before = origin.proxied().len();
    let response = proxy.send(
        &Request::get(path)
            .host(HOST)
            .ua(user_agent)
            .header("X-Forwarded-For", client),
    );
    if origin.proxied().len() > before {
        return Seen { refusal: None };
    }
    Seen {
        refusal: Some(refused(&response)),
    }
}

/// The request as `convention`'s front proxy asks the decision listener about it, and what
/// that front proxy then gives its client.
fn asked(
    decision: SocketAddr,
    convention: Convention,
    user_agent: &str,
    path: &str,
    client: &str,
) -> Seen {
    let request = match convention {
        Convention::ForwardAuth => Request::get("/auth")
            .host("robotsguard:8081")
            .header("X-Forwarded-Method", "GET")
            .header("X-Forwarded-Proto", "http")
            .header("X-Forwarded-Host", HOST)
            .header("X-Forwarded-Uri", path),
        Convention::Nginx => Request::get("/auth/nginx")
            .host(HOST)
            .header("X-Original-Method", "GET")
            .header("X-Original-URI", path),
        Convention::Envoy => Request::get(&format!("/envoy{path}")).host(HOST),
    };
    let request = request.ua(user_agent).header("X-Forwarded-For", client);
    let response = Conn::open(decision).send(&request);
    let identity = (
        response
            .header("x-robotsguard-decision")
            .map(str::to_string),
        response
            .header("x-robotsguard-verified")
            .map(str::to_string),
    );
    assert!(
        identity.0.is_some() && identity.1.is_some(),
        "{convention:?}: no X-Robotsguard-Decision/-Verified: {response:?}"
    );
    if response.status == 200 {
        assert!(
            response.body.is_empty(),
            "{convention:?}: {}",
            response.text()
        );
        return Seen { refusal: None };
    }
    match convention {
        Convention::Nginx => {
            // auth_request passes only 403: the real answer is in the headers and, whole, kept
            // for the named location to fetch.
            assert_eq!(response.status, 403, "{response:?}");
            let status: u16 = response
                .header("x-robotsguard-status")
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("no X-Robotsguard-Status: {response:?}"));
            let token = response
                .header("x-robotsguard-answer")
                .unwrap_or_else(|| panic!("no X-Robotsguard-Answer: {response:?}"));
            let whole = Conn::open(decision)
                .send(&Request::get(&format!("/auth/nginx/answer/{token}")).host("robotsguard"));
            assert_eq!(whole.status, status, "{whole:?}");
            assert_eq!(whole.text(), response.text());
            assert_eq!(
                whole.header("retry-after"),
                response.header("x-robotsguard-retry-after")
            );
            assert_eq!(whole.header("link"), response.header("x-robotsguard-link"));
            // Given once.
            let again = Conn::open(decision)
                .send(&Request::get(&format!("/auth/nginx/answer/{token}")).host("robotsguard"));
            assert_eq!(again.status, 404);
            Seen {
                refusal: Some(refused(&whole)),
            }
        }
        _ => Seen {
            refusal: Some(refused(&response)),
        },
    }
}

/// One step of a scenario: (User-Agent, path, client), and whether it is refused (`Some(status)`).
type Step<'a> = (&'a str, &'a str, &'a str, Option<u16>);

/// Runs `steps` through a fresh inline proxy, then through a fresh decision listener per
/// convention, and compares each step.
fn side_by_side(
    robots: &str,
    scope: &str,
    extra: &str,
    steps: &[Step<'_>],
    pause_after: Option<usize>,
) {
    let origin = Origin::start();
    origin.route("/page", 200, "page");
    let body = origin_config(&origin, robots, scope, extra);
    let (proxy, _) = start(&body);
    let mut expected = Vec::new();
    for (index, (user_agent, path, client, want)) in steps.iter().enumerate() {
        let seen = inline(&proxy, &origin, user_agent, path, client);
        assert_eq!(
            seen.refusal.as_ref().map(|r| r.status),
            *want,
            "inline step {index}: {user_agent} {path} {client}: {seen:?}"
        );
        expected.push(seen);
        if pause_after == Some(index) {
            std::thread::sleep(Duration::from_millis(1100));
        }
    }
    drop(proxy);
    for convention in CONVENTIONS {
        let (listener, decision) = start(&body);
        let proxied_before = origin.proxied().len();
        for (index, (user_agent, path, client, _)) in steps.iter().enumerate() {
            let seen = asked(decision, convention, user_agent, path, client);
            let want = &expected[index];
            match (&seen.refusal, &want.refusal) {
                (None, None) => {}
                (Some(got), Some(want)) => {
                    assert_eq!(
                        (got.status, &got.link, got.retry_after.is_some(), timeless(&got.body)),
                        (want.status, &want.link, want.retry_after.is_some(), timeless(&want.body)),
                        "{convention:?} step {index}: {user_agent} {path} {client}"
                    );
                    if let (Some(a), Some(b)) = (got.retry_after, want.retry_after) {
                        assert!(a.abs_diff(b) <= 1, "{convention:?} step {index}: Retry-After {a} vs {b}");
                    }
                }
                _ => panic!(
                    "{convention:?} step {index}: {user_agent} {path} {client}: decision {seen:?}, proxy {want:?}"
                ),
            }
            if pause_after == Some(index) {
                std::thread::sleep(Duration::from_millis(1100));
            }
        }
        // The decision listener never contacts the origin.
        assert_eq!(origin.proxied().len(), proxied_before, "{convention:?}");
        // Its judgments count as the proxy's do, and in its own counter.
        let metrics = listener.metrics();
        let judged: f64 = support::samples(&metrics, "robotsguard_decision_requests_total")
            .iter()
            .map(|(_, value)| value)
            .sum();
        assert_eq!(judged as usize, steps.len(), "{convention:?}");
    }
}

const ROBOTS: &str = "User-agent: *\nDisallow: /private\nCrawl-delay: 30\n";

#[test]
fn every_convention_answers_as_the_inline_proxy_through_a_ban_of_crawlers() {
    side_by_side(
        ROBOTS,
        "crawlers",
        "",
        &[
            (BROWSER, "/private", "192.0.2.1", None),
            (GPTBOT, "/page", "192.0.2.1", None),
            (GPTBOT, "/private", "192.0.2.1", Some(403)),
            (GPTBOT, "/page", "192.0.2.1", Some(429)),
            (GPTBOT, "/page", "192.0.2.2", None),
            (GPTBOT, "/private/2", "192.0.2.1", Some(403)),
            (BROWSER, "/", "192.0.2.1", None),
            (APP, "/", "192.0.2.1", None),
            ("", "/", "192.0.2.1", Some(403)),
            (GPTBOT, "/page", "192.0.2.1", Some(403)),
            (GPTBOT, "/robots.txt", "192.0.2.1", None),
            (GPTBOT, "/robots.txt.bak", "192.0.2.1", Some(403)),
            (GPTBOT, "/%70rivate", "192.0.2.3", Some(403)),
            (GPTBOT, "/a/../private", "192.0.2.4", Some(403)),
            (LISTED, "/page", "198.51.100.9", None),
            (LISTED, "/page", "8.8.8.8", Some(403)),
        ],
        None,
    );
}

#[test]
fn every_convention_answers_as_the_inline_proxy_through_a_ban_of_the_address() {
    side_by_side(
        ROBOTS,
        "address",
        "",
        &[
            (GPTBOT, "/private/0", "192.0.2.1", Some(403)),
            (GPTBOT, "/private/1", "192.0.2.1", Some(403)),
            (BROWSER, "/page", "192.0.2.1", Some(403)),
            (APP, "/page", "192.0.2.1", Some(403)),
            (BROWSER, "/robots.txt", "192.0.2.1", None),
        ],
        None,
    );
}

#[test]
fn every_convention_answers_as_the_inline_proxy_before_and_after_the_crawl_delay() {
    side_by_side(
        "User-agent: *\nDisallow: /private\nCrawl-delay: 1\n",
        "crawlers",
        "",
        &[
            (GPTBOT, "/page", "192.0.2.1", None),
            (GPTBOT, "/page", "192.0.2.1", Some(429)),
            (GPTBOT, "/page", "192.0.2.1", None),
        ],
        Some(1),
    );
}

#[test]
fn every_convention_answers_as_the_inline_proxy_in_report_mode_exempt_paths_traps_licences_and_signals(
) {
    // Report mode: nothing refused, the Crawl-delay neither.
    side_by_side(
        ROBOTS,
        "crawlers",
        "    mode: report\n",
        &[
            (GPTBOT, "/private", "192.0.2.1", None),
            (GPTBOT, "/page", "192.0.2.1", None),
            (GPTBOT, "/page", "192.0.2.1", None),
        ],
        None,
    );
    // Exempt paths and allowed clients.
    side_by_side(
        ROBOTS,
        "crawlers",
        "    policy: {exempt_paths: [/private/open], allow_clients: [\"192.0.2.200/32\"]}\n",
        &[
            (GPTBOT, "/private/open", "192.0.2.1", None),
            (GPTBOT, "/private/x", "192.0.2.200", None),
            (GPTBOT, "/private/x", "192.0.2.1", Some(403)),
        ],
        None,
    );
    // A trap: answered 404 without contacting the origin.
    side_by_side(
        ROBOTS,
        "crawlers",
        "    traps: {enabled: true, paths: [\"/trap-9f2\"], action: block}\n",
        &[
            (GPTBOT, "/trap-9f2", "192.0.2.1", Some(404)),
            (BROWSER, "/trap-9f2", "192.0.2.2", Some(404)),
        ],
        None,
    );
    // A licence: 402 with its Link.
    side_by_side(
        ROBOTS,
        "crawlers",
        "    block: {status: 402, license_url: \"https://terms.example/license.xml\"}\n",
        &[(GPTBOT, "/private", "192.0.2.1", Some(402))],
        None,
    );
    // Content signals: ai-train=no refuses a training crawler, not a browser.
    side_by_side(
        "User-agent: *\nContent-Signal: search=yes, ai-train=no\nDisallow: /private\n",
        "crawlers",
        "    content_signals: {action: enforce}\n",
        &[
            (GPTBOT, "/a", "192.0.2.1", Some(403)),
            (BROWSER, "/a", "192.0.2.1", None),
        ],
        None,
    );
}

/// A decision listener on its own, for the listener's own rules.
fn listener(extra: &str) -> (Origin, Proxy, SocketAddr) {
    let origin = Origin::start();
    let (proxy, decision) = start(&format!(
        "{extra}{}",
        origin_config(&origin, ROBOTS, "crawlers", "")
    ));
    (origin, proxy, decision)
}

fn forward_auth(path: &str) -> Request {
    Request::get("/auth")
        .host("robotsguard")
        .header("X-Forwarded-Method", "GET")
        .header("X-Forwarded-Host", HOST)
        .header("X-Forwarded-Uri", path)
}

#[test]
fn bad_input_is_refused_clearly_and_counted_never_allowed() {
    let (_origin, proxy, decision) = listener("");
    let send = |request: Request| Conn::open(decision).send(&request);
    let cases: [(Request, u16, &str); 8] = [
        (
            Request::get("/auth")
                .host(HOST)
                .header("X-Forwarded-Uri", "/private")
                .ua(GPTBOT),
            400,
            "missing_header",
        ),
        (
            Request::get("/auth")
                .host(HOST)
                .header("X-Forwarded-Method", "GET")
                .ua(GPTBOT),
            400,
            "missing_header",
        ),
        (
            forward_auth("/page")
                .header("X-Forwarded-Uri", "/private")
                .ua(GPTBOT),
            400,
            "conflicting_headers",
        ),
        (
            forward_auth("/page")
                .header("X-Original-URI", "/private")
                .ua(GPTBOT),
            400,
            "conflicting_headers",
        ),
        (
            forward_auth("http://shop.example/private").ua(GPTBOT),
            400,
            "bad_request",
        ),
        (
            forward_auth("/private").ua(GPTBOT).ua(BROWSER),
            400,
            "conflicting_headers",
        ),
        (
            forward_auth("/private").ua(&"a".repeat(9000)),
            431,
            "too_large",
        ),
        (Request::get("/other").host(HOST), 404, "not_found"),
    ];
    for (request, status, reason) in cases {
        let shown = format!("{} {:?}", request.target, request.headers);
        let before = metric(
            &proxy.metrics(),
            "robotsguard_decision_rejected_total",
            &[("reason", reason)],
        );
        let response = send(request);
        assert_eq!(response.status, status, "{shown}: {}", response.text());
        assert!(
            response.text().starts_with(&status.to_string()),
            "{}",
            response.text()
        );
        assert!(response.header("x-robotsguard-decision").is_none());
        let after = metric(
            &proxy.metrics(),
            "robotsguard_decision_rejected_total",
            &[("reason", reason)],
        );
        assert_eq!(after, before + 1.0, "{shown}");
    }
    // Oversized headers: 431, not a judgment.
    let response = send(forward_auth("/page").header("X-Padding", &"p".repeat(70_000)));
    assert!(
        response.status == 431 || response.status == 400,
        "{}",
        response.status
    );
    // An unknown host: the proxy's 421 through /auth, a 403 with the status through nginx's.
    let response = send(
        Request::get("/auth")
            .host("robotsguard")
            .header("X-Forwarded-Method", "GET")
            .header("X-Forwarded-Host", "elsewhere.example")
            .header("X-Forwarded-Uri", "/"),
    );
    assert_eq!(response.status, 421, "{}", response.text());
    let response = send(
        Request::get("/auth/nginx")
            .host("elsewhere.example")
            .header("X-Original-Method", "GET")
            .header("X-Original-URI", "/"),
    );
    assert_eq!(response.status, 403);
    assert_eq!(response.header("x-robotsguard-status"), Some("421"));
    // A browser is allowed with an empty crawler and `none`.
    let response = send(forward_auth("/private").ua(BROWSER));
    assert_eq!(response.status, 200);
    assert_eq!(response.header("x-robotsguard-crawler"), Some(""));
    assert_eq!(response.header("x-robotsguard-verified"), Some("none"));
    assert_eq!(response.header("x-robotsguard-decision"), Some("pass"));
}

#[test]
fn only_trusted_callers_are_answered_and_their_forwarded_for_is_believed() {
    // 127.0.0.1 is not a caller here: every request is refused before any judgment.
    let origin = Origin::start();
    let untrusted = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let proxy = Proxy::start(&format!(
        "decision: {{listen: [\"{untrusted}\"], trusted_callers: [\"10.9.0.0/16\"]}}\n{}",
        origin_config(&origin, ROBOTS, "crawlers", "")
    ));
    let response = Conn::open(untrusted).send(&forward_auth("/private").ua(GPTBOT));
    assert_eq!(response.status, 403, "{}", response.text());
    assert!(response.header("x-robotsguard-decision").is_none());
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_decision_rejected_total",
            &[("reason", "untrusted_caller")]
        ),
        1.0
    );
    // No judgment was made: no request counted.
    assert!(
        support::samples(&proxy.metrics(), "robotsguard_decision_requests_total")
            .iter()
            .all(|(_, value)| *value == 0.0)
    );

    // A trusted caller's X-Forwarded-For names the client: the rightmost entry that is
    // neither a caller nor a trusted proxy.
    let (_origin, proxy, decision) = listener("");
    let response = Conn::open(decision).send(
        &forward_auth("/private")
            .ua(GPTBOT)
            .header("X-Forwarded-For", "203.0.113.7, 192.0.2.50, 127.0.0.1"),
    );
    assert_eq!(response.status, 403);
    assert!(
        response.text().contains("Your address: 192.0.2.50"),
        "{}",
        response.text()
    );
    drop(proxy);
}

#[test]
fn on_error_answers_when_the_judgment_is_not_made_in_time() {
    const NAMED: &str = "Mozilla/5.0 (compatible; NamedBot/1.0; +https://named.example/bot)";
    const PROBE: &str = "probe.named.example";
    for (choice, status, nginx_status) in [("allow", 200, 200), ("deny", 503, 403)] {
        // A resolver that answers, then slowly: reverse DNS verification waits on it (up to
        // its 2 s timeout), past decision.timeout.
        let dns = support::dns::DnsServer::start();
        dns.addresses(PROBE, &["192.0.2.53"]);
        for n in 1..=2 {
            let ip = format!("198.51.100.{n}");
            let name = format!("crawl-{n}.named.example");
            dns.ptr(&ip, &[&name]).addresses(&name, &[&ip]);
        }
        let origin = Origin::start();
        let decision = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let proxy = Proxy::start(&format!(
            "decision: {{listen: [\"{decision}\"], timeout: 20ms, on_error: {choice}}}\n\
             verify:\n  dns: {{servers: [\"{}\"], timeout: 2s, probe_name: {PROBE}}}\n\
             crawlers:\n  extra:\n    - {{name: NamedBot, pattern: NamedBot, category: search, verify: {{rdns: [named.example]}}}}\n{}",
            dns.addr,
            origin_config(&origin, ROBOTS, "crawlers", "")
        ));
        let deadline = Instant::now() + Duration::from_secs(10);
        while proxy.explain_from(HOST, NAMED, "/page", "192.0.2.9").1["reverse_dns"]["probed"]
            != true
        {
            assert!(
                Instant::now() < deadline,
                "never probed: {}",
                proxy.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        dns.set_delay(Duration::from_millis(1500));
        let response = Conn::open(decision).send(
            &forward_auth("/page")
                .ua(NAMED)
                .header("X-Forwarded-For", "198.51.100.1"),
        );
        assert_eq!(response.status, status, "{choice}: {}", response.text());
        assert_eq!(response.header("x-robotsguard-decision"), Some("error"));
        assert_eq!(
            metric(
                &proxy.metrics(),
                "robotsguard_decision_errors_total",
                &[("reason", "timeout")]
            ),
            1.0,
            "{choice}"
        );
        let nginx = Conn::open(decision).send(
            &Request::get("/auth/nginx")
                .host(HOST)
                .header("X-Original-Method", "GET")
                .header("X-Original-URI", "/page")
                .ua(NAMED)
                .header("X-Forwarded-For", "198.51.100.2"),
        );
        assert_eq!(nginx.status, nginx_status, "{choice}");
        if choice == "deny" {
            assert_eq!(nginx.header("x-robotsguard-status"), Some("503"));
        }
    }
}

#[test]
fn robots_txt_by_host_is_the_copy_in_force_and_http_1_0_and_h2c_are_served() {
    let (_origin, proxy, decision) = listener("");
    let response = support::get(decision, "/robots.txt?host=shop.example");
    assert_eq!(response.status, 200);
    assert_eq!(
        response.text(),
        proxy.admin_get("/robots?origin=shop").text()
    );
    let response = support::get(decision, "/robots.txt?host=elsewhere.example");
    assert_eq!(response.status, 421);
    // HTTP/1.0, nginx's default to its upstreams.
    let raw = support::raw(
        decision,
        b"GET /auth/nginx HTTP/1.0\r\nHost: shop.example\r\nX-Original-Method: GET\r\nX-Original-URI: /private\r\nUser-Agent: GPTBot/1.2\r\n\r\n",
    )
    .unwrap();
    assert_eq!(raw.status, 403);
    assert_eq!(raw.header("x-robotsguard-status"), Some("403"));
    // h2c with prior knowledge (what gRPC and Envoy use), with curl.
    let output = std::process::Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_version} %{http_code}",
            "--http2-prior-knowledge",
        ])
        .arg(format!("http://{decision}/envoy/private"))
        .args(["-H", "Host: shop.example", "-A", GPTBOT])
        .output()
        .expect("curl runs");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "2 403");
}

mod grpc {
    use super::*;
    use envoy_types::pb::envoy::service::auth::v3::{
        attribute_context, authorization_client::AuthorizationClient, check_response,
        AttributeContext, CheckRequest,
    };

    fn check(user_agent: &str, path: &str, client: &str, padding: usize) -> CheckRequest {
        let mut headers: std::collections::HashMap<String, String> = [
            ("user-agent".to_string(), user_agent.to_string()),
            ("x-forwarded-for".to_string(), client.to_string()),
            (":authority".to_string(), HOST.to_string()),
        ]
        .into_iter()
        .collect();
        if padding > 0 {
            headers.insert("x-padding".to_string(), "p".repeat(padding));
        }
        CheckRequest {
            attributes: Some(AttributeContext {
                request: Some(attribute_context::Request {
                    http: Some(attribute_context::HttpRequest {
                        method: "GET".to_string(),
                        host: HOST.to_string(),
                        path: path.to_string(),
                        headers,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        }
    }

    fn header<'a>(
        headers: &'a [envoy_types::pb::envoy::config::core::v3::HeaderValueOption],
        name: &str,
    ) -> Option<&'a str> {
        headers
            .iter()
            .filter_map(|option| option.header.as_ref())
            .find(|header| header.key.eq_ignore_ascii_case(name))
            .map(|header| header.value.as_str())
    }

    #[test]
    fn check_answers_as_the_proxy_to_a_real_grpc_client() {
        let (_origin, proxy, decision) = listener("");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut client = AuthorizationClient::connect(format!("http://{decision}"))
                .await
                .expect("the gRPC client connects");
            // A browser: OK, with the judgment's headers for the upstream.
            let ok = client
                .check(check(BROWSER, "/private", "192.0.2.1", 0))
                .await
                .expect("a Check answer")
                .into_inner();
            assert_eq!(ok.status.as_ref().map(|s| s.code), Some(0));
            let Some(check_response::HttpResponse::OkResponse(allowed)) = ok.http_response else {
                panic!("no OkHttpResponse: {ok:?}");
            };
            assert_eq!(header(&allowed.headers, "x-robotsguard-verified"), Some("none"));
            assert_eq!(header(&allowed.headers, "x-robotsguard-crawler"), Some(""));
            // GPTBot: allowed once, then its Crawl-delay (429 with Retry-After), then a refusal
            // with the proxy's body; each PERMISSION_DENIED with a DeniedHttpResponse.
            let ok = client
                .check(check(GPTBOT, "/page", "192.0.2.1", 0))
                .await
                .unwrap()
                .into_inner();
            assert_eq!(ok.status.as_ref().map(|s| s.code), Some(0));
            for (path, status, body) in [
                ("/page", 429, "429 Too Many Requests: robots.txt asks GPTBot to wait 30 s"),
                ("/%70rivate", 403, "403 Forbidden: GPTBot may not fetch /%70rivate.\nReason: robots.txt line 2: Disallow: /private"),
            ] {
                let denied = client
                    .check(check(GPTBOT, path, "192.0.2.1", 0))
                    .await
                    .unwrap()
                    .into_inner();
                assert_eq!(denied.status.as_ref().map(|s| s.code), Some(7), "{denied:?}");
                let Some(check_response::HttpResponse::DeniedResponse(refused)) = denied.http_response else {
                    panic!("no DeniedHttpResponse: {denied:?}");
                };
                assert_eq!(refused.status.map(|s| s.code), Some(status));
                assert!(refused.body.starts_with(body), "{}", refused.body);
                if status == 429 {
                    assert_eq!(header(&refused.headers, "retry-after"), Some("30"));
                } else {
                    // The client is the x-forwarded-for entry, not the gRPC peer.
                    assert!(refused.body.contains("Your address: 192.0.2.1"), "{}", refused.body);
                }
            }
            // Over 64 KiB: RESOURCE_EXHAUSTED, no judgment.
            let judged_before = metric(&proxy.metrics(), "robotsguard_decision_requests_total", &[("origin", "shop"), ("decision", "pass")]);
            let too_large = client
                .check(check(BROWSER, "/", "192.0.2.9", 70 * 1024))
                .await
                .expect_err("a message over 64 KiB is refused");
            assert_eq!(too_large.code(), tonic::Code::ResourceExhausted);
            assert_eq!(
                metric(&proxy.metrics(), "robotsguard_decision_requests_total", &[("origin", "shop"), ("decision", "pass")]),
                judged_before
            );
            assert_eq!(
                metric(&proxy.metrics(), "robotsguard_decision_rejected_total", &[("reason", "too_large")]),
                1.0
            );
        });
    }

    /// Envoy with `encode_raw_headers` sends the headers as bytes in `header_map` and leaves
    /// `headers` empty; the client is then `attributes.source.address` when no
    /// `x-forwarded-for` is among them.
    #[test]
    fn check_reads_a_raw_header_map_and_the_source_address() {
        use envoy_types::pb::envoy::config::core::v3::{
            address, Address, HeaderMap, HeaderValue, SocketAddress,
        };
        let (_origin, _proxy, decision) = listener("");
        let raw = |key: &str, value: &str| HeaderValue {
            key: key.to_string(),
            raw_value: value.as_bytes().to_vec(),
            ..Default::default()
        };
        let mut request = check(GPTBOT, "/private", "192.0.2.1", 0);
        let attributes = request.attributes.as_mut().unwrap();
        attributes.source = Some(attribute_context::Peer {
            address: Some(Address {
                address: Some(address::Address::SocketAddress(SocketAddress {
                    address: "198.51.100.77".to_string(),
                    ..Default::default()
                })),
            }),
            ..Default::default()
        });
        let http = attributes
            .request
            .as_mut()
            .and_then(|request| request.http.as_mut())
            .unwrap();
        http.headers.clear();
        http.header_map = Some(HeaderMap {
            headers: vec![raw("user-agent", GPTBOT), raw(":authority", HOST)],
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut client = AuthorizationClient::connect(format!("http://{decision}"))
                .await
                .expect("the gRPC client connects");
            let denied = client.check(request).await.unwrap().into_inner();
            assert_eq!(
                denied.status.as_ref().map(|s| s.code),
                Some(7),
                "{denied:?}"
            );
            let Some(check_response::HttpResponse::DeniedResponse(refused)) = denied.http_response
            else {
                panic!("no DeniedHttpResponse: {denied:?}");
            };
            assert_eq!(refused.status.map(|s| s.code), Some(403));
            assert!(
                refused.body.contains("GPTBot may not fetch /private"),
                "{}",
                refused.body
            );
            assert!(
                refused.body.contains("Your address: 198.51.100.77"),
                "{}",
                refused.body
            );
            assert_eq!(
                header(&refused.headers, "x-robotsguard-crawler"),
                Some("GPTBot")
            );
        });
    }

    #[test]
    fn an_untrusted_peer_is_denied_without_a_judgment() {
        let origin = Origin::start();
        let decision = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let proxy = Proxy::start(&format!(
            "decision: {{listen: [\"{decision}\"], trusted_callers: [\"10.9.0.0/16\"]}}\n{}",
            origin_config(&origin, ROBOTS, "crawlers", "")
        ));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut client = AuthorizationClient::connect(format!("http://{decision}"))
                .await
                .expect("the gRPC client connects");
            let denied = client
                .check(check(GPTBOT, "/private", "192.0.2.1", 0))
                .await
                .expect_err("an untrusted peer is refused");
            assert_eq!(denied.code(), tonic::Code::PermissionDenied);
        });
        assert_eq!(
            metric(
                &proxy.metrics(),
                "robotsguard_decision_rejected_total",
                &[("reason", "untrusted_caller")]
            ),
            1.0
        );
        assert!(
            support::samples(&proxy.metrics(), "robotsguard_decision_requests_total")
                .iter()
                .all(|(_, value)| *value == 0.0)
        );
    }
}

/// The access lines (JSON) written so far, waiting until there are `count` of them.
fn access_lines(proxy: &Proxy, count: usize) -> Vec<serde_json::Value> {
    let mut lines = Vec::new();
    for _ in 0..200 {
        lines = proxy
            .stderr()
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|value| value["kind"] == "access")
            .collect();
        if lines.len() >= count {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    lines
}

#[test]
fn a_judged_request_gets_the_proxys_access_line_with_via_decision() {
    let origin = Origin::start();
    let (proxy, decision) = start(&format!(
        "access_log: {{format: json}}\n{}",
        origin_config(&origin, ROBOTS, "crawlers", "")
    ));
    // The same requests through the proxy, then through nginx's and the forward-auth flavour.
    let inline_page = inline(&proxy, &origin, BROWSER, "/page?q=1", "192.0.2.7");
    assert_eq!(inline_page, Seen { refusal: None });
    let inline_refused = inline(&proxy, &origin, GPTBOT, "/private/x", "192.0.2.8");
    assert_eq!(inline_refused.refusal.map(|r| r.status), Some(403));
    let page = asked(
        decision,
        Convention::Nginx,
        BROWSER,
        "/page?q=1",
        "192.0.2.7",
    );
    assert_eq!(page, Seen { refusal: None });
    let refused = asked(
        decision,
        Convention::Nginx,
        GPTBOT,
        "/private/x",
        "192.0.2.9",
    );
    assert_eq!(refused.refusal.map(|r| r.status), Some(403));
    let unknown = Conn::open(decision).send(
        &Request::get("/auth")
            .host("unknown.example")
            .header("X-Forwarded-Method", "GET")
            .header("X-Forwarded-Uri", "/")
            .ua(BROWSER),
    );
    assert_eq!(unknown.status, 421);
    // A path far over the logged length is cut as the proxy cuts it.
    let long = format!("/page/{}", "a".repeat(5000));
    assert_eq!(
        asked(
            decision,
            Convention::ForwardAuth,
            BROWSER,
            &long,
            "192.0.2.7"
        ),
        Seen { refusal: None }
    );

    let lines = access_lines(&proxy, 6);
    assert_eq!(lines.len(), 6, "{}", proxy.stderr());
    let (proxied, judged) = lines.split_at(2);
    for line in proxied {
        assert_eq!(line["via"], "proxy", "{line}");
    }
    for line in judged {
        assert_eq!(line["via"], "decision", "{line}");
        assert_eq!(line["upstream"], serde_json::Value::Null, "{line}");
        assert!(
            line["request_id"].as_str().is_some_and(|id| !id.is_empty()),
            "{line}"
        );
        assert!(line["duration_ms"].as_f64().is_some(), "{line}");
    }
    // Field by field as the proxy's line, but for what only proxying has.
    let same = [
        "host",
        "method",
        "path",
        "status",
        "origin",
        "crawler",
        "decision",
        "why",
        "user_agent",
    ];
    for field in same {
        assert_eq!(
            judged[0][field], proxied[0][field],
            "{field}: {}",
            judged[0]
        );
        assert_eq!(
            judged[1][field], proxied[1][field],
            "{field}: {}",
            judged[1]
        );
    }
    assert_eq!(judged[0]["client"], "192.0.2.7");
    assert_eq!(judged[0]["status"], 200);
    assert_eq!(judged[0]["decision"], "pass");
    // nginx's flavour answered 403 with the real status beside it: the line has the real one.
    assert_eq!(judged[1]["client"], "192.0.2.9");
    assert_eq!(judged[1]["decision"], "blocked");
    assert_eq!(judged[1]["crawler"], "GPTBot");
    assert_eq!(judged[1]["why"], "rule");
    assert_eq!(
        judged[1]["bytes"], proxied[1]["bytes"],
        "the refusal's body is the proxy's"
    );
    assert_eq!(judged[2]["status"], 421);
    assert_eq!(judged[2]["decision"], "unrouted");
    assert_eq!(judged[2]["host"], "unknown.example");
    let path = judged[3]["path"].as_str().unwrap_or_default();
    assert!(
        path.starts_with("/page/aaa") && path.len() <= 1100,
        "the long path is cut: {} bytes",
        path.len()
    );
}

#[test]
fn the_decision_listener_has_the_proxy_listeners_deadlines_and_connection_cap() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    let (_origin, proxy, decision) = listener(
        "limits: {header_timeout: 2s, idle_timeout: 2s, max_connections: 3, max_header_bytes: 8KiB}\n",
    );
    // Three callers that send part of a head and then nothing hold every connection place.
    let mut stalled: Vec<TcpStream> = (0..3)
        .map(|_| {
            let mut stream = TcpStream::connect(decision).expect("connects");
            stream
                .write_all(b"GET /auth/nginx HTTP/1.1\r\nHost: shop.example\r\n")
                .expect("part of a head sent");
            stream
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    // At the cap, a new caller is served all the same: a connection with no request in
    // progress is closed for it, as on the proxy listener.
    let response = Conn::open(decision).send(
        &Request::get("/auth/nginx")
            .host(HOST)
            .header("X-Original-Method", "GET")
            .header("X-Original-URI", "/page")
            .ua(BROWSER),
    );
    assert_eq!(response.status, 200, "{response:?}");
    assert!(proxy.wait_metric("robotsguard_downstream_connections_evicted_total", &[], 1.0) >= 1.0);
    // The others are answered 408 at header_timeout and closed.
    let mut timed_out = 0;
    for stream in &mut stalled {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(8)));
        let mut got = Vec::new();
        let _ = stream.read_to_end(&mut got);
        if got.starts_with(b"HTTP/1.1 408") {
            timed_out += 1;
        }
    }
    assert!(timed_out >= 1, "no stalled head was answered 408");
    // A kept-alive caller with nothing more to ask is closed at idle_timeout.
    let mut conn = Conn::open(decision);
    let answered = conn.send(
        &Request::get("/auth/nginx")
            .host(HOST)
            .header("X-Original-Method", "GET")
            .header("X-Original-URI", "/page")
            .ua(BROWSER),
    );
    assert_eq!(answered.status, 200);
    let mut idle = conn.into_stream();
    assert!(
        support::closed_within(&mut idle, Duration::from_secs(8)).is_some(),
        "an idle decision connection was still open after 8 s"
    );
    // A head over limits.max_header_bytes: 431 before any judgment.
    let mut big = TcpStream::connect(decision).expect("connects");
    let head = format!(
        "GET /auth/nginx HTTP/1.1\r\nHost: {HOST}\r\nX-Original-Method: GET\r\nX-Original-URI: /\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(9000)
    );
    let _ = big.write_all(head.as_bytes());
    let _ = big.set_read_timeout(Some(Duration::from_secs(5)));
    let mut got = Vec::new();
    let _ = big.read_to_end(&mut got);
    assert!(
        got.starts_with(b"HTTP/1.1 431"),
        "{}",
        String::from_utf8_lossy(&got)
    );
}
