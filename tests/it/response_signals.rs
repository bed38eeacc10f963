//! A page's own AI preferences in the origin's response (`response_signals`), through the real
//! proxy and a real origin that sets them per page: `Content-Usage: train-ai=n` and
//! `X-Robots-Tag: noai` refuse a training crawler before any of the page's body leaves (403, or
//! 402 with the licence link), a scoped tag refuses only the crawler it names, `noimageai` only
//! images; search engines with a control token and browsers get the page; `report` passes it as
//! `would_block`; HEAD (with curl) is judged as GET; the refusals count in the metric, the
//! access log, the reports' violations and `/explain`'s note; hostile heads are bounded.

use crate::support;

use std::process::Command;

use support::{metric, site, Origin, Proxy, Request, BROWSER, GOOGLEBOT, GPTBOT};

const HOST: &str = "shop.example";
const CLAUDEBOT: &str =
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)";
const BINGBOT: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) Chrome/116.0.1938.76 Safari/537.36";
/// What only the origin's body holds: never in a refusal.
const SECRET: &str = "ORIGIN-BODY-7f3a";

/// An origin whose pages carry preferences of their own.
fn origin() -> Origin {
    let origin = Origin::start();
    let page = format!("<p>{SECRET}</p>");
    origin
        .route_with_headers(
            "/usage",
            200,
            page.as_bytes(),
            &[
                ("content-type", "text/html"),
                ("content-usage", "train-ai=n, search=y"),
            ],
        )
        .route_with_headers(
            "/noai",
            200,
            page.as_bytes(),
            &[
                ("content-type", "text/html"),
                ("x-robots-tag", "noindex, NoAI"),
            ],
        )
        .route_with_headers(
            "/scoped",
            200,
            page.as_bytes(),
            &[
                ("content-type", "text/html"),
                ("x-robots-tag", "ClaudeBot: noindex"),
                ("x-robots-tag", "GPTBot: noai"),
            ],
        )
        .route_with_headers(
            "/picture.png",
            200,
            SECRET.as_bytes(),
            &[("content-type", "image/png"), ("x-robots-tag", "noimageai")],
        )
        .route_with_headers(
            "/article",
            200,
            page.as_bytes(),
            &[("content-type", "text/html"), ("x-robots-tag", "noimageai")],
        )
        .route_with_headers(
            "/quoted",
            200,
            page.as_bytes(),
            &[
                ("content-type", "text/html"),
                ("content-usage", "train-ai=\"n\""),
                ("x-robots-tag", "unavailable_after: \"noai, 2030\""),
            ],
        )
        .route_with_headers(
            "/malformed",
            200,
            page.as_bytes(),
            &[
                ("content-type", "text/html"),
                ("content-usage", "Train-AI=n,"),
            ],
        );
    origin
}

fn start(origin: &Origin, response_signals: &str) -> Proxy {
    let extra = format!(
        "    impostors: ignore\n    block: {{license_url: \"https://shop.example/licence.xml\"}}\n{response_signals}    robots:\n      source: inline\n      text: \"User-agent: *\\nAllow: /\\n\"\n"
    );
    Proxy::start(&format!(
        "access_log: {{format: json}}\n{}",
        site(origin, HOST, &extra)
    ))
}

const ENFORCE: &str = "    response_signals: {action: enforce}\n";

/// One request with curl: status, headers and body as received (`head`: `-I`, a HEAD request).
fn curl(proxy: &Proxy, method_head: bool, path: &str, user_agent: &str) -> (u16, String, Vec<u8>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let headers = dir.path().join("headers");
    let body = dir.path().join("body");
    let mut command = Command::new(support::programs::program("curl").path);
    command
        .args(["-s", "--max-time", "10", "-w", "%{http_code}"])
        .args(["-A", user_agent])
        .args(["-H", &format!("Host: {HOST}")])
        .arg("-D")
        .arg(&headers)
        .arg("-o")
        .arg(&body);
    if method_head {
        command.arg("-I");
    }
    let output = command
        .arg(format!("http://{}{path}", proxy.addr))
        .output()
        .expect("curl runs");
    let status = String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("curl: {}", String::from_utf8_lossy(&output.stderr)));
    (
        status,
        std::fs::read_to_string(&headers).unwrap_or_default(),
        std::fs::read(&body).unwrap_or_default(),
    )
}

fn signals(proxy: &Proxy, signal: &str, action: &str, want: f64) -> f64 {
    proxy.wait_metric(
        "robotsguard_response_signals_total",
        &[("origin", "shop"), ("signal", signal), ("action", action)],
        want,
    )
}

#[test]
fn a_training_crawler_is_refused_before_any_body_byte_and_others_get_the_page() {
    let origin = origin();
    let proxy = start(&origin, ENFORCE);
    // GPTBot: refused with the header cited, and nothing of the origin's answer.
    let (status, headers, body) = curl(&proxy, false, "/usage", GPTBOT);
    let body = String::from_utf8_lossy(&body).into_owned();
    assert_eq!(status, 403, "{headers}{body}");
    assert!(
        body.contains("Reason: the page's Content-Usage header: train-ai=n, search=y"),
        "{body}"
    );
    assert!(!body.contains(SECRET), "{body}");
    assert!(
        !headers.to_ascii_lowercase().contains("x-origin"),
        "{headers}"
    );
    // The origin was asked: the refusal is made on its answer.
    assert_eq!(origin.proxied_to("/usage").len(), 1);
    // Googlebot (training refused through Google-Extended, not by refusing Googlebot) and a
    // browser get the page as the origin sent it, its Content-Usage header included.
    for user_agent in [GOOGLEBOT, BROWSER] {
        let (status, headers, body) = curl(&proxy, false, "/usage", user_agent);
        assert_eq!(status, 200, "{user_agent}: {headers}");
        assert!(String::from_utf8_lossy(&body).contains(SECRET));
        assert!(
            headers
                .to_ascii_lowercase()
                .contains("content-usage: train-ai=n, search=y"),
            "{headers}"
        );
    }
    // bingbot serves search too and names no token for training: spared (multi_purpose:
    // allow).
    assert_eq!(proxy.get(HOST, "/usage", BINGBOT).status, 200);
    // X-Robots-Tag's noai, in any case, after another directive.
    let refused = proxy.get(HOST, "/noai", GPTBOT);
    assert_eq!(refused.status, 403);
    assert!(
        refused
            .text()
            .contains("Reason: the page's X-Robots-Tag header: noindex, NoAI"),
        "{}",
        refused.text()
    );
    // A page without a preference, and preferences hidden in quoted strings or malformed:
    // the page passes.
    for path in ["/plain", "/quoted", "/malformed"] {
        let response = proxy.get(HOST, path, GPTBOT);
        assert_eq!(response.status, 200, "{path}: {}", response.text());
    }
    // The connection the refusals cut short did not poison the next requests.
    assert_eq!(proxy.get(HOST, "/plain", GPTBOT).status, 200);

    assert_eq!(signals(&proxy, "content_usage", "enforce", 1.0), 1.0);
    assert_eq!(signals(&proxy, "noai", "enforce", 1.0), 1.0);
    assert_eq!(signals(&proxy, "content_usage", "spared", 2.0), 2.0);
    assert_eq!(signals(&proxy, "content_usage", "malformed", 1.0), 1.0);
    let metrics = proxy.metrics();
    assert_eq!(
        metric(
            &metrics,
            "robotsguard_requests_total",
            &[
                ("origin", "shop"),
                ("crawler", "GPTBot"),
                ("decision", "blocked")
            ]
        ),
        2.0,
        "{metrics}"
    );
    // The access log says why.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut log = proxy.stderr();
    for _ in 0..100 {
        if log.matches("\"why\":\"response_signal\"").count() >= 2
            || std::time::Instant::now() > deadline
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        log = proxy.stderr();
    }
    let line = log
        .lines()
        .find(|line| line.contains("\"kind\":\"access\"") && line.contains("\"path\":\"/usage\""))
        .unwrap_or_else(|| panic!("no access line for /usage:\n{log}"));
    let line: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
    assert_eq!(line["why"], "response_signal", "{line}");
    assert_eq!(line["decision"], "blocked", "{line}");
    assert_eq!(line["status"], 403, "{line}");
    // The reports' violations: the header as the rule.
    let report = proxy.admin_get("/reports/violations?origin=shop").json();
    let rows = report["violations"].as_array().cloned().unwrap_or_default();
    let row = rows
        .iter()
        .find(|row| row["path"] == "/usage")
        .unwrap_or_else(|| panic!("no row for /usage: {report}"));
    assert_eq!(row["directive"], "response-header", "{row}");
    assert_eq!(
        row["pattern"], "Content-Usage: train-ai=n, search=y",
        "{row}"
    );
    assert_eq!(row["crawler"], "GPTBot", "{row}");
    assert_eq!(row["enforced"], true, "{row}");
    // /explain cannot know the answer and says so.
    let (_, explain) = proxy.explain(HOST, GPTBOT, "/usage");
    assert_eq!(
        explain["response_signals"], "judged on the origin's answer",
        "{explain}"
    );
    assert_eq!(explain["decision"], "allowed", "{explain}");
}

#[test]
fn status_402_answers_with_the_licence_link() {
    let origin = origin();
    let proxy = start(
        &origin,
        "    response_signals: {action: enforce, status: 402}\n",
    );
    let refused = proxy.get(HOST, "/usage", GPTBOT);
    assert_eq!(refused.status, 402, "{}", refused.text());
    assert_eq!(
        refused.header("link"),
        Some("<https://shop.example/licence.xml>; rel=\"license\"")
    );
    assert!(
        refused
            .text()
            .contains("Licence terms: https://shop.example/licence.xml"),
        "{}",
        refused.text()
    );
    assert!(!refused.text().contains(SECRET));
    assert_eq!(
        proxy.wait_metric(
            "robotsguard_requests_total",
            &[
                ("origin", "shop"),
                ("crawler", "GPTBot"),
                ("decision", "payment_required")
            ],
            1.0
        ),
        1.0
    );
}

#[test]
fn a_scoped_tag_refuses_only_the_crawler_it_names() {
    let origin = origin();
    let proxy = start(&origin, ENFORCE);
    let refused = proxy.get(HOST, "/scoped", GPTBOT);
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(
        refused.text().contains("X-Robots-Tag header: GPTBot: noai"),
        "{}",
        refused.text()
    );
    for user_agent in [CLAUDEBOT, GOOGLEBOT, BROWSER] {
        let response = proxy.get(HOST, "/scoped", user_agent);
        assert_eq!(response.status, 200, "{user_agent}");
        assert!(response.text().contains(SECRET));
    }
}

#[test]
fn noimageai_refuses_only_images() {
    let origin = origin();
    let proxy = start(&origin, ENFORCE);
    let refused = proxy.get(HOST, "/picture.png", GPTBOT);
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(!refused.text().contains(SECRET));
    assert_eq!(
        refused.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    let page = proxy.get(HOST, "/article", GPTBOT);
    assert_eq!(page.status, 200);
    assert!(page.text().contains(SECRET));
    assert_eq!(signals(&proxy, "noimageai", "enforce", 1.0), 1.0);
}

#[test]
fn head_is_judged_as_get() {
    let origin = origin();
    let proxy = start(&origin, ENFORCE);
    let (status, headers, body) = curl(&proxy, true, "/usage", GPTBOT);
    assert_eq!(status, 403, "{headers}");
    assert!(body.is_empty() || !String::from_utf8_lossy(&body).contains(SECRET));
    let (status, headers, _) = curl(&proxy, true, "/usage", GOOGLEBOT);
    assert_eq!(status, 200, "{headers}");
    assert!(
        headers
            .to_ascii_lowercase()
            .contains("content-usage: train-ai=n"),
        "{headers}"
    );
    let (status, _, _) = curl(&proxy, true, "/scoped", CLAUDEBOT);
    assert_eq!(status, 200);
    let (status, _, _) = curl(&proxy, true, "/noai", GPTBOT);
    assert_eq!(status, 403);
    assert_eq!(origin.proxied_to("/usage").len(), 2);
}

#[test]
fn report_mode_passes_the_page_as_would_block() {
    let origin = origin();
    // `report` is the default.
    let proxy = start(&origin, "");
    let page = proxy.get(HOST, "/usage", GPTBOT);
    assert_eq!(page.status, 200);
    assert!(page.text().contains(SECRET));
    assert_eq!(
        proxy.wait_metric(
            "robotsguard_requests_total",
            &[
                ("origin", "shop"),
                ("crawler", "GPTBot"),
                ("decision", "would_block")
            ],
            1.0
        ),
        1.0
    );
    assert_eq!(signals(&proxy, "content_usage", "report", 1.0), 1.0);
    let report = proxy.admin_get("/reports/violations?origin=shop").json();
    let rows = report["violations"].as_array().cloned().unwrap_or_default();
    assert!(
        rows.iter()
            .any(|row| row["directive"] == "response-header" && row["enforced"] == false),
        "{report}"
    );
    // `ignore` does not read the headers at all.
    drop(proxy);
    let proxy = start(&origin, "    response_signals: {action: ignore}\n");
    assert_eq!(proxy.get(HOST, "/noai", GPTBOT).status, 200);
    let (_, explain) = proxy.explain(HOST, GPTBOT, "/noai");
    assert_eq!(
        explain["response_signals"], "not read (response_signals.action: ignore)",
        "{explain}"
    );
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_response_signals_total",
            &[("origin", "shop"), ("signal", "noai"), ("action", "report")]
        ),
        0.0
    );
}

#[test]
fn hostile_heads_are_bounded_and_decided_as_documented() {
    let origin = Origin::start();
    let long = format!("{}noai", "noindex, ".repeat(900));
    assert!(long.len() <= 8 * 1024);
    let mut many: Vec<(&str, &str)> = vec![("x-robots-tag", "noindex"); 99];
    many.push(("x-robots-tag", "noai"));
    let mut too_many: Vec<(&str, &str)> = vec![("x-robots-tag", "noindex"); 100];
    too_many.push(("x-robots-tag", "noai"));
    let junk = format!("train-ai=n, x=\"{}\"", "a".repeat(9000));
    origin
        .route_with_headers("/long", 200, SECRET.as_bytes(), &[("x-robots-tag", &long)])
        .route_with_headers("/many", 200, SECRET.as_bytes(), &many)
        .route_with_headers("/too-many", 200, SECRET.as_bytes(), &too_many)
        .route_with_headers("/junk", 200, SECRET.as_bytes(), &[("content-usage", &junk)]);
    let proxy = start(&origin, ENFORCE);
    // An 8 KiB value is read whole (and quoted cut); 100 lines are read, the 101st is not.
    let refused = proxy.send(&Request::get("/long").host(HOST).ua(GPTBOT));
    assert_eq!(refused.status, 403);
    assert!(refused.text().len() < 1024, "{}", refused.text());
    assert_eq!(proxy.get(HOST, "/many", GPTBOT).status, 403);
    assert_eq!(proxy.get(HOST, "/too-many", GPTBOT).status, 200);
    // A Content-Usage line over 8 KiB is malformed: ignored, counted.
    assert_eq!(proxy.get(HOST, "/junk", GPTBOT).status, 200);
    assert_eq!(signals(&proxy, "content_usage", "malformed", 1.0), 1.0);
    // Still serving.
    assert_eq!(proxy.get(HOST, "/plain", BROWSER).status, 200);
}

#[test]
fn a_refusal_by_the_page_s_headers_gets_an_evidence_record_that_verifies() {
    let origin = origin();
    let place = tempfile::tempdir().expect("temp dir");
    // The evidence signing key: a raw 32-byte seed in base64.
    let key = place.path().join("evidence.key");
    std::fs::write(&key, "nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A=\n").expect("written");
    let dir = place.path().join("evidence");
    let extra = format!(
        "    impostors: ignore\n{ENFORCE}    robots:\n      source: inline\n      text: \"User-agent: *\\nAllow: /\\n\"\n"
    );
    let proxy = Proxy::start(&format!(
        "evidence: {{enabled: true, key_file: \"{}\", dir: \"{}\", replica: r1, events: [refusal]}}\n{}",
        key.display(),
        dir.display(),
        site(&origin, HOST, &extra)
    ));
    assert_eq!(proxy.get(HOST, "/usage", GPTBOT).status, 403);
    // The page given to a browser, and robots.txt allowing the crawler elsewhere: no record.
    assert_eq!(proxy.get(HOST, "/usage", BROWSER).status, 200);
    assert_eq!(proxy.get(HOST, "/article", GPTBOT).status, 200);
    let written = proxy.wait_metric(
        "robotsguard_evidence_records_total",
        &[("result", "written")],
        1.0,
    );
    assert_eq!(written, 1.0);
    let export = proxy.admin_get("/evidence");
    assert_eq!(export.status, 200, "{}", export.text());
    let lines: Vec<String> = export.text().lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let record: serde_json::Value = serde_json::from_str(&lines[0]).expect("a record");
    assert_eq!(record["decision"], "blocked", "{record}");
    assert_eq!(record["status"], 403, "{record}");
    assert_eq!(record["crawler"], "GPTBot", "{record}");
    assert_eq!(record["path"], "/usage", "{record}");
    // The preference that refused it, not a line of robots.txt (which allowed the path).
    assert_eq!(record["rule"], serde_json::Value::Null, "{record}");
    assert!(
        record["response_signal"]
            .as_str()
            .is_some_and(|s| s.contains("train-ai")),
        "{record}"
    );
    // The record verifies against the key and the stored robots.txt copy.
    let out = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(out.path().join("robots")).expect("dir");
    std::fs::write(out.path().join("evidence.jsonl"), &export.body).expect("written");
    std::fs::write(
        out.path().join("key.jwk"),
        proxy.admin_get("/evidence/key").body,
    )
    .expect("written");
    let sha = record["robots"]["sha256"].as_str().expect("a sha256");
    let copy = proxy.admin_get(&format!("/evidence/robots/{sha}"));
    assert_eq!(copy.status, 200);
    std::fs::write(out.path().join("robots").join(sha), &copy.body).expect("written");
    let output = Command::new(env!("CARGO_BIN_EXE_robotsguard"))
        .args(["evidence", "verify"])
        .arg(out.path().join("evidence.jsonl"))
        .arg("--complete")
        .output()
        .expect("robotsguard runs");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(text.contains("1 records: 1 signatures valid"), "{text}");
}
