//! "See before you switch" (issue 55): crawler traffic sent through the proxy, then
//! `POST /robots/preview?origin=NAME` with candidates. A stricter file lists exactly the requests
//! it flips, the live file none, `Disallow: /` for `*` warns that Googlebot loses the site and
//! that everything is refused; and nothing live changes (the robots.txt in force, a crawler's
//! next request, Crawl-delay budgets, bans, metrics, reports).

use crate::support;

use std::time::{Duration, Instant};

use support::{inline_robots, site, Conn, Proxy, Request, BROWSER, GOOGLEBOT, GPTBOT, ZORGBOT};

const SHOP: &str = "shop.example";
const TOKEN: &str = "preview-admin-token-0123";
const READ_TOKEN: &str = "preview-read-token-01234";

const LIVE: &str = "User-agent: *\nDisallow: /private\n\nUser-agent: ZorgBot\nCrawl-delay: 30\nDisallow: /private\n";

fn start() -> (support::Origin, Proxy) {
    let origin = support::Origin::start();
    let proxy = Proxy::builder(&site(&origin, SHOP, &inline_robots(LIVE)))
        .admin_token(TOKEN)
        .read_token(READ_TOKEN)
        .start();
    (origin, proxy)
}

fn preview_with(
    proxy: &Proxy,
    token: Option<&str>,
    content_type: &str,
    body: &[u8],
) -> support::Response {
    let mut request = Request::new("POST", "/robots/preview?origin=shop")
        .host(&proxy.admin.to_string())
        .header("Content-Type", content_type);
    if let Some(token) = token {
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    Conn::open(proxy.admin).send(&request.body(body))
}

fn preview(proxy: &Proxy, robots: &str) -> serde_json::Value {
    let answer = preview_with(proxy, Some(TOKEN), "text/plain", robots.as_bytes());
    assert_eq!(answer.status, 200, "{}", answer.text());
    answer.json()
}

fn admin_get(proxy: &Proxy, target: &str) -> support::Response {
    Conn::open(proxy.admin).send(
        &Request::get(target)
            .host(&proxy.admin.to_string())
            .header("Authorization", &format!("Bearer {TOKEN}")),
    )
}

/// The live file previewed until the sample holds `requests` (the proxy keeps a request once
/// its answer is sent), within 10 s.
fn wait_sampled(proxy: &Proxy, requests: u64) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = preview(proxy, LIVE);
        if answer["window"]["requests_replayed"] == requests || Instant::now() > deadline {
            return answer;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The metric lines a preview must not move: decisions, violations, Crawl-delay refusals,
/// bans, strikes, verifications, content signals.
fn counted(metrics: &str) -> Vec<String> {
    const FAMILIES: [&str; 9] = [
        "robotsguard_requests_total",
        "robotsguard_violations_total",
        "robotsguard_rate_limited_total",
        "robotsguard_bans_total",
        "robotsguard_banned_clients",
        "robotsguard_disguised_strikes_total",
        "robotsguard_crawler_verifications_total",
        "robotsguard_content_signals_total",
        "robotsguard_trap_hits_total",
    ];
    metrics
        .lines()
        .filter(|line| FAMILIES.iter().any(|family| line.starts_with(family)))
        .map(str::to_string)
        .collect()
}

fn changes(answer: &serde_json::Value) -> Vec<(String, String, String, u64, u64)> {
    let mut rows: Vec<_> = answer["changes"]
        .as_array()
        .expect("changes is a list")
        .iter()
        .map(|row| {
            (
                row["crawler"].as_str().unwrap_or_default().to_string(),
                row["before"].as_str().unwrap_or_default().to_string(),
                row["after"].as_str().unwrap_or_default().to_string(),
                row["requests"].as_u64().unwrap_or_default(),
                row["paths"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    rows.sort();
    rows
}

fn warned(answer: &serde_json::Value, kind: &str, crawler: &str) -> bool {
    answer["warnings"]
        .as_array()
        .expect("warnings is a list")
        .iter()
        .any(|w| w["kind"] == kind && w["crawler"] == crawler && w["message"].is_string())
}

#[test]
fn a_stricter_file_flips_exactly_the_requests_sent_and_nothing_live_changes() {
    let (_origin, proxy) = start();
    for path in ["/a", "/a", "/a", "/b", "/b"] {
        assert_eq!(proxy.get(SHOP, path, GPTBOT).status, 200);
    }
    assert_eq!(proxy.get(SHOP, "/private", GPTBOT).status, 403);
    for _ in 0..2 {
        assert_eq!(proxy.get(SHOP, "/a", GOOGLEBOT).status, 200);
    }
    // Browsers are not kept.
    for _ in 0..4 {
        assert_eq!(proxy.get(SHOP, "/b", BROWSER).status, 200);
    }
    // ZorgBot's Crawl-delay of 30 s: its budget is spent by this request.
    assert_eq!(proxy.get(SHOP, "/z", ZORGBOT).status, 200);

    let live = wait_sampled(&proxy, 9);
    assert_eq!(live["origin"], "shop", "{live}");
    assert_eq!(live["window"]["requests_replayed"], 9, "{live}");
    assert_eq!(live["window"]["requests_not_replayable"], 0, "{live}");
    for field in ["since", "until"] {
        assert!(
            crate::offenders::is_rfc3339(live["window"][field].as_str().unwrap_or("")),
            "{live}"
        );
    }
    // The live file changes nothing.
    assert_eq!(changes(&live), vec![], "{live}");
    assert!(!warned(&live, "refuses_everything", "*"), "{live}");

    let metrics_before = counted(&admin_get(&proxy, "/metrics").text());
    let reports_before =
        admin_get(&proxy, "/reports/crawlers?origin=shop").json()["crawlers"].clone();
    let robots_before = admin_get(&proxy, "/robots?origin=shop").text();
    let bans_before = admin_get(&proxy, "/bans?origin=shop").json()["bans"].clone();

    let stricter = format!("{LIVE}\nUser-agent: GPTBot\nDisallow: /private\nDisallow: /b\n");
    let answer = preview(&proxy, &stricter);
    assert_eq!(
        changes(&answer),
        vec![("GPTBot".into(), "allowed".into(), "blocked".into(), 2, 1)],
        "{answer}"
    );
    let row = &answer["changes"][0];
    assert_eq!(row["sample_paths"], serde_json::json!(["/b"]), "{answer}");
    assert!(
        row["purposes"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p == "training")),
        "{answer}"
    );
    assert!(
        row["verified"]
            .as_f64()
            .is_some_and(|v| (0.0..=1.0).contains(&v)),
        "{answer}"
    );
    assert_eq!(answer["window"]["requests_replayed"], 9, "{answer}");
    assert!(
        !warned(&answer, "search_engine_loses_site", "Googlebot"),
        "{answer}"
    );

    // The read-only token may preview; no token may not.
    let read = preview_with(&proxy, Some(READ_TOKEN), "text/plain", stricter.as_bytes());
    assert_eq!(read.status, 200, "{}", read.text());
    assert_eq!(changes(&read.json()), changes(&answer));
    assert_eq!(
        preview_with(&proxy, None, "text/plain", stricter.as_bytes()).status,
        401
    );

    // Everything refused for `*`: Googlebot loses the site, and the file says so.
    let nothing = preview(&proxy, "User-agent: *\nDisallow: /\n");
    assert!(
        warned(&nothing, "search_engine_loses_site", "Googlebot"),
        "{nothing}"
    );
    assert!(warned(&nothing, "refuses_everything", "*"), "{nothing}");
    assert_eq!(
        changes(&nothing),
        vec![
            ("GPTBot".into(), "allowed".into(), "blocked".into(), 5, 2),
            ("Googlebot".into(), "allowed".into(), "blocked".into(), 2, 1),
            // ZorgBot loses its own group and falls under `*`; its one request was allowed.
            ("zorgbot".into(), "allowed".into(), "blocked".into(), 1, 1),
        ],
        "{nothing}"
    );

    // A policy tried as a config fragment, judged as the proxy would.
    let policy = preview_with(
        &proxy,
        Some(TOKEN),
        "application/json",
        br#"{"config": "policy:\n  crawlers: {Googlebot: block}\n"}"#,
    );
    assert_eq!(policy.status, 200, "{}", policy.text());
    let policy = policy.json();
    assert_eq!(
        changes(&policy),
        vec![("Googlebot".into(), "allowed".into(), "blocked".into(), 2, 1)],
        "{policy}"
    );
    assert!(
        warned(&policy, "search_engine_loses_site", "Googlebot"),
        "{policy}"
    );

    // Nothing live changed: the robots.txt in force, the crawlers' next requests, ZorgBot's
    // Crawl-delay budget (still the one request's 30 s, not more), bans, metrics, reports.
    assert_eq!(
        admin_get(&proxy, "/robots?origin=shop").text(),
        robots_before
    );
    assert_eq!(
        admin_get(&proxy, "/bans?origin=shop").json()["bans"],
        bans_before
    );
    assert_eq!(
        counted(&admin_get(&proxy, "/metrics").text()),
        metrics_before
    );
    assert_eq!(
        admin_get(&proxy, "/reports/crawlers?origin=shop").json()["crawlers"],
        reports_before
    );
    assert_eq!(proxy.get(SHOP, "/b", GPTBOT).status, 200);
    assert_eq!(proxy.get(SHOP, "/a", GOOGLEBOT).status, 200);
    let limited = proxy.get(SHOP, "/z", ZORGBOT);
    assert_eq!(limited.status, 429, "{}", limited.text());
    let wait: u64 = limited
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("a Retry-After in seconds");
    assert!((1..=30).contains(&wait), "Retry-After {wait}");
}

#[test]
fn bad_candidates_get_a_400_naming_the_problem() {
    let (_origin, proxy) = start();
    let big = format!("User-agent: *\n{}", "Disallow: /x\n".repeat(45_000));
    let too_big = preview_with(&proxy, Some(TOKEN), "text/plain", big.as_bytes());
    assert_eq!(too_big.status, 400);
    assert!(
        too_big.json()["error"]
            .as_str()
            .unwrap_or("")
            .contains("500 KiB"),
        "{}",
        too_big.text()
    );

    let binary = preview_with(
        &proxy,
        Some(TOKEN),
        "text/plain",
        b"User-agent: *\x00\x01\x02",
    );
    assert_eq!(binary.status, 400);
    assert!(binary.text().contains("binary"), "{}", binary.text());

    let latin1 = preview_with(
        &proxy,
        Some(TOKEN),
        "text/plain",
        b"User-agent: \xe9t\xe9\n",
    );
    assert_eq!(latin1.status, 400);
    assert!(
        latin1.text().contains("not valid UTF-8"),
        "{}",
        latin1.text()
    );

    let unknown = preview_with(
        &proxy,
        Some(TOKEN),
        "application/json",
        br#"{"config": "mode: enforce\npolcy: {crawlers: {Googlebot: block}}\n"}"#,
    );
    assert_eq!(unknown.status, 400);
    let error = unknown.json()["error"].as_str().unwrap_or("").to_string();
    assert!(error.contains("config fragment:2:1"), "{error}");
    assert!(
        error.contains("polcy") && error.contains("policy"),
        "{error}"
    );

    let bad_yaml = preview_with(
        &proxy,
        Some(TOKEN),
        "application/json",
        br#"{"config": "policy: {crawlers: [\n"}"#,
    );
    assert_eq!(bad_yaml.status, 400);
    assert!(
        bad_yaml.text().contains("config fragment:"),
        "{}",
        bad_yaml.text()
    );

    // The live robots.txt is still the one in force.
    assert_eq!(proxy.get(SHOP, "/private", GPTBOT).status, 403);
    assert_eq!(proxy.get(SHOP, "/a", GPTBOT).status, 200);
}

#[test]
fn a_candidate_with_lines_the_engine_ignores_says_which() {
    let (_origin, proxy) = start();
    let answer = preview(
        &proxy,
        "User-agent: *\nDisalow /x\nNoindex: /y\nDisallow: /private\n",
    );
    let invalid: Vec<u64> = answer["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter(|w| w["kind"] == "robots_txt_invalid")
        .filter_map(|w| w["line"].as_u64())
        .collect();
    assert_eq!(invalid, vec![2, 3], "{answer}");
}

#[test]
fn beyond_max_paths_the_least_requested_are_evicted_and_counted_as_not_replayable() {
    let origin = support::Origin::start();
    let body = format!(
        "preview: {{max_paths_per_origin: 3}}\n{}",
        site(&origin, SHOP, &inline_robots(LIVE))
    );
    let proxy = Proxy::builder(&body).admin_token(TOKEN).start();
    for _ in 0..4 {
        assert_eq!(proxy.get(SHOP, "/hot", GPTBOT).status, 200);
    }
    for path in ["/p1", "/p2", "/p3", "/p4"] {
        assert_eq!(proxy.get(SHOP, path, GPTBOT).status, 200);
    }
    // 8 requests sent: the 4 of /hot and 2 one-off paths kept, 2 one-off paths evicted.
    let deadline = Instant::now() + Duration::from_secs(10);
    let live = loop {
        let answer = preview(&proxy, LIVE);
        let window = &answer["window"];
        let seen = window["requests_replayed"].as_u64().unwrap_or(0)
            + window["requests_not_replayable"].as_u64().unwrap_or(0);
        if seen == 8 || Instant::now() > deadline {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(live["window"]["requests_replayed"], 6, "{live}");
    assert_eq!(live["window"]["requests_not_replayable"], 2, "{live}");
    let hot = preview(
        &proxy,
        &format!("{LIVE}\nUser-agent: GPTBot\nDisallow: /hot\n"),
    );
    assert_eq!(
        changes(&hot),
        vec![("GPTBot".into(), "allowed".into(), "blocked".into(), 4, 1)],
        "{hot}"
    );
}

fn robotsguard(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_robotsguard"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the robotsguard binary runs")
}

#[test]
fn the_cli_prints_the_changes_and_exits_3_when_a_search_engine_would_lose_the_site() {
    let (_origin, proxy) = start();
    for path in ["/a", "/b", "/b"] {
        assert_eq!(proxy.get(SHOP, path, GPTBOT).status, 200);
    }
    assert_eq!(proxy.get(SHOP, "/a", GOOGLEBOT).status, 200);
    wait_sampled(&proxy, 4);
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("file written");
        path.to_string_lossy().into_owned()
    };
    let token = write("token", READ_TOKEN);
    let stricter = write(
        "stricter.txt",
        &format!("{LIVE}\nUser-agent: GPTBot\nDisallow: /private\nDisallow: /b\n"),
    );
    let everything = write("everything.txt", "User-agent: *\nDisallow: /\n");
    let admin = format!("http://{}", proxy.admin);
    let base = [
        "preview",
        "--admin",
        &admin,
        "--origin",
        "shop",
        "--token-file",
        &token,
    ];

    let output = robotsguard(&[&base[..], &["--robots", &stricter]].concat());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let row = stdout
        .lines()
        .find(|line| line.starts_with("GPTBot"))
        .unwrap_or_else(|| panic!("no GPTBot row:\n{stdout}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        &cells[..5],
        ["GPTBot", "allowed", "blocked", "2", "1"],
        "{stdout}"
    );
    assert!(stdout.contains("4 requests replayed"), "{stdout}");

    let output = robotsguard(&[&base[..], &["--robots", &everything]].concat());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(3), "{stdout}");
    assert!(
        stdout.contains("warning: [search_engine_loses_site] Googlebot:"),
        "{stdout}"
    );
    assert!(stdout.contains("warning: [refuses_everything]"), "{stdout}");

    let output = robotsguard(&[&base[..], &["--robots", &everything, "--json"]].concat());
    assert_eq!(output.status.code(), Some(3));
    let json: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("--json prints the answer");
    assert_eq!(json["window"]["requests_replayed"], 4, "{json}");

    // No token: the admin listener's refusal is said, exit 1.
    let output = robotsguard(&[
        "preview", "--admin", &admin, "--origin", "shop", "--robots", &stricter,
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("401"));
}

#[test]
fn check_with_a_robots_file_alone_warns_from_the_catalogue() {
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("file written");
        path.to_string_lossy().into_owned()
    };
    let everything = write("everything.txt", "User-agent: *\nDisallow: /\n");
    let output = robotsguard(&["check", "--robots", &everything]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(3), "{stdout}");
    assert!(
        stdout.contains("warning: [search_engine_loses_site] Googlebot:"),
        "{stdout}"
    );
    assert!(
        stdout.contains("warning: [search_engine_loses_site] bingbot:"),
        "{stdout}"
    );
    assert!(
        stdout.contains("warning: [refuses_everything] *:"),
        "{stdout}"
    );

    // Only Googlebot refused: it loses the site, bingbot does not.
    let google = write(
        "google.txt",
        "User-agent: Googlebot\nDisallow: /\n\nUser-agent: *\nDisallow: /admin\n",
    );
    let output = robotsguard(&["check", "--robots", &google, "--json"]);
    assert_eq!(output.status.code(), Some(3));
    let warnings: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON warning a line"))
        .collect();
    assert!(
        warnings.iter().any(|w| w["crawler"] == "Googlebot"),
        "{warnings:?}"
    );
    assert!(
        !warnings.iter().any(|w| w["crawler"] == "bingbot"),
        "{warnings:?}"
    );
    assert!(
        !warnings.iter().any(|w| w["kind"] == "refuses_everything"),
        "{warnings:?}"
    );

    let fine = write("fine.txt", "User-agent: *\nDisallow: /admin\n");
    let output = robotsguard(&["check", "--robots", &fine]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

#[test]
fn validate_and_reloads_warn_when_an_inline_robots_txt_refuses_search_engines_everywhere() {
    let origin = support::Origin::start();
    let config = |robots: &str| site(&origin, SHOP, &inline_robots(robots));
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("robotsguard.yaml");
    std::fs::write(&path, config("User-agent: *\nDisallow: /\n")).expect("config written");
    let path = path.to_string_lossy().into_owned();
    let output = robotsguard(&["validate", "--config", &path]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let warning = stderr
        .lines()
        .find(|line| line.contains("warning:"))
        .unwrap_or_else(|| panic!("no warning: {stderr}"));
    for needle in [
        "origin `shop`",
        "`robots.source: inline` line 2: `Disallow: /`",
        "Googlebot",
        "bingbot",
    ] {
        assert!(warning.contains(needle), "{needle}: {warning}");
    }
    let output = robotsguard(&["validate", "--config", &path, "--strict"]);
    assert_eq!(output.status.code(), Some(1));

    // A reload to such a file logs the warning and counts it.
    let proxy = Proxy::start(&config(LIVE));
    let kind = [("kind", "search_crawler_refused")];
    assert_eq!(
        proxy.wait_metric("robotsguard_config_warnings_total", &kind, 0.0),
        0.0
    );
    assert!(proxy.wait_log("config reload: watching", 1, Duration::from_secs(10)));
    proxy.replace_config(&proxy.config_text(&config("User-agent: *\nDisallow: /\n")));
    assert_eq!(proxy.wait_reloads("success", 1.0), 1.0);
    assert_eq!(
        proxy.wait_metric("robotsguard_config_warnings_total", &kind, 1.0),
        1.0
    );
    assert!(proxy.wait_log(
        "`robots.source: inline` line 2: `Disallow: /` refuses",
        1,
        Duration::from_secs(10)
    ));
}

#[test]
fn the_console_preview_page_takes_a_pasted_file_with_the_csrf_token_and_the_read_only_token() {
    let (_origin, proxy) = start();
    for path in ["/a", "/b", "/b"] {
        assert_eq!(proxy.get(SHOP, path, GPTBOT).status, 200);
    }
    wait_sampled(&proxy, 3);
    let send =
        |request: Request| Conn::open(proxy.admin).send(&request.host(&proxy.admin.to_string()));
    // The read-only token signs in and may preview.
    let login = send(
        Request::new("POST", "/ui/login")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!("token={READ_TOKEN}").as_bytes()),
    );
    let session = login
        .header("set-cookie")
        .and_then(|c| c.split(';').next())
        .expect("a session cookie")
        .to_string();
    let page = send(Request::get("/ui/preview?origin=shop").header("Cookie", &session));
    assert_eq!(page.status, 200, "{}", page.text());
    let page = page.text();
    assert!(!page.contains("<script"), "no JavaScript needed");
    assert!(
        page.contains("Disallow: /private"),
        "the form holds the copy in force: {page}"
    );
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a CSRF token in the preview form")
        .to_string();
    let stricter = format!("{LIVE}\nUser-agent: GPTBot\nDisallow: /private\nDisallow: /b\n");
    let form = |csrf: &str| {
        let robots: String = form_urlencoded::byte_serialize(stricter.as_bytes()).collect();
        format!("csrf={csrf}&origin=shop&robots={robots}&config=")
    };
    let post = |body: String| {
        send(
            Request::new("POST", "/ui/preview")
                .header("Cookie", &session)
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(body.as_bytes()),
        )
    };
    assert_eq!(
        post(form("0000")).status,
        403,
        "without the session's CSRF token"
    );
    let answer = post(form(&csrf));
    assert_eq!(answer.status, 200, "{}", answer.text());
    let answer = answer.text();
    assert!(
        answer.contains("<tr><td>GPTBot</td><td>allowed</td><td>blocked</td><td class=\"num\">2</td><td class=\"num\">1</td>"),
        "{answer}"
    );
    assert!(answer.contains("<code>/b</code>"), "{answer}");
    // Nothing changed live.
    assert_eq!(proxy.get(SHOP, "/b", GPTBOT).status, 200);
}

/// With the shared store, a preview replays every replica's sample (each writes its own there
/// every few seconds, as the reports do): crawler traffic sent through two proxies, previewed on
/// one, flips the requests of both; the same pair seen by both counts once with their requests
/// added.
#[test]
fn with_a_shared_store_a_preview_replays_every_replicas_traffic() {
    let redis = support::redis::RedisServer::start();
    let origin = support::Origin::start();
    let body = format!(
        "state:\n  backend: redis\n  redis: {{url: \"{}\", prefix: \"preview-fleet:\", timeout: 2s}}\n{}",
        redis.url(),
        site(&origin, SHOP, &inline_robots(LIVE))
    );
    let first = Proxy::builder(&body).admin_token(TOKEN).start();
    let second = Proxy::builder(&body).admin_token(TOKEN).start();
    for path in ["/a", "/b"] {
        assert_eq!(first.get(SHOP, path, GPTBOT).status, 200);
    }
    for path in ["/b", "/b", "/c"] {
        assert_eq!(second.get(SHOP, path, GPTBOT).status, 200);
    }

    // The second replica writes its sample within the reports' publishing period.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut answer = preview(&first, LIVE);
    while answer["window"]["requests_replayed"] != 5 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        answer = preview(&first, LIVE);
    }
    assert_eq!(answer["window"]["requests_replayed"], 5, "{answer}");
    assert_eq!(answer["window"]["coverage"], "fleet", "{answer}");
    assert_eq!(answer["window"]["replicas"], 2, "{answer}");

    let stricter = format!("{LIVE}\nUser-agent: GPTBot\nDisallow: /private\nDisallow: /b\n");
    let answer = preview(&first, &stricter);
    assert_eq!(
        changes(&answer),
        vec![("GPTBot".into(), "allowed".into(), "blocked".into(), 3, 1)],
        "{answer}"
    );

    // Without the store's answer, the replica previews its own traffic and says so.
    drop(redis);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut answer = preview(&first, LIVE);
    while answer["window"]["coverage"] != "store_down" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        answer = preview(&first, LIVE);
    }
    assert_eq!(answer["window"]["coverage"], "store_down", "{answer}");
    assert_eq!(answer["window"]["requests_replayed"], 2, "{answer}");
}
