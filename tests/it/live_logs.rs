//! Logs of the real binary with `--log-format json`: one structured line per blocked or
//! would-block request, start-up lines, and the rate limit under a flood (every request is either
//! logged or counted as suppressed, exactly).

use crate::support;

use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::live::{try_open, try_send, Launch};
use support::{inline_robots, Origin, Proxy, Request, GPTBOT};

/// The JSON lines logged so far (pingora's own lines included).
fn json_lines(proxy: &Proxy) -> Vec<Value> {
    proxy
        .stderr()
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line:?}"))
        })
        .collect()
}

fn field<'a>(line: &'a Value, name: &str) -> &'a Value {
    &line["fields"][name]
}

fn message(line: &Value) -> &str {
    field(line, "message").as_str().unwrap_or("")
}

/// Polls the log until `found` holds for its lines (at most 10 s); returns the last lines.
fn wait_lines(proxy: &Proxy, found: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut lines = json_lines(proxy);
    for _ in 0..500 {
        if found(&lines) || Instant::now() > deadline {
            break;
        }
        thread::sleep(Duration::from_millis(20));
        lines = json_lines(proxy);
    }
    lines
}

fn decision_lines<'a>(lines: &'a [Value], decision: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|line| field(line, "decision") == decision)
        .collect()
}

#[test]
fn blocked_and_would_block_requests_and_start_up_are_logged_as_structured_lines() {
    let origin = Origin::start();
    origin.robots(200, "User-agent: GPTBot\nDisallow: /private\n");
    let body = format!(
        "origins:\n\
         \x20 - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{0}\"\n\
         \x20 - name: staging\n    hosts: [\"staging.example\"]\n    upstream: \"{0}\"\n    mode: report\n{1}",
        origin.addr(),
        inline_robots("User-agent: *\nAllow: /\n\nUser-agent: GPTBot\nDisallow: /private\n"),
    );
    let proxy = Launch::new(&body).arg("--log-format").arg("json").start();
    assert_eq!(
        proxy.get("shop.example", "/private/a?b=1", GPTBOT).status,
        403
    );
    assert_eq!(
        proxy.get("staging.example", "/private/c", GPTBOT).status,
        200
    );

    let lines = wait_lines(&proxy, |lines| {
        decision_lines(lines, "blocked").len() == 1
            && decision_lines(lines, "would_block").len() == 1
    });
    let blocked = decision_lines(&lines, "blocked");
    let [blocked] = blocked.as_slice() else {
        panic!("one blocked line: {lines:#?}");
    };
    assert!(message(blocked).starts_with("blocked: "), "{blocked}");
    for (name, want) in [
        ("origin", "shop"),
        ("crawler", "GPTBot"),
        ("category", "ai-training"),
        ("client", "127.0.0.1"),
        ("method", "GET"),
        ("path", "/private/a?b=1"),
        ("rule", "Disallow: /private"),
    ] {
        assert_eq!(field(blocked, name), want, "{name} in {blocked}");
    }
    assert_eq!(field(blocked, "line"), 2, "{blocked}");
    assert_eq!(blocked["level"], "INFO");

    let would_block = decision_lines(&lines, "would_block");
    let [would_block] = would_block.as_slice() else {
        panic!("one would-block line: {lines:#?}");
    };
    assert!(message(would_block).starts_with("would block (report mode): "));
    assert_eq!(field(would_block, "origin"), "staging");
    assert_eq!(field(would_block, "path"), "/private/c");
    assert_eq!(field(would_block, "line"), 5);

    // Start-up: the listeners, each origin, each robots.txt outcome.
    let starting = lines
        .iter()
        .find(|line| message(line) == "robotsguard starting")
        .unwrap_or_else(|| panic!("a start-up line: {lines:#?}"));
    assert_eq!(field(starting, "listen"), proxy.addr.to_string().as_str());
    assert_eq!(field(starting, "admin"), proxy.admin.to_string().as_str());
    for name in ["shop", "staging"] {
        assert!(
            lines
                .iter()
                .any(|line| message(line) == "origin" && field(line, "origin") == name),
            "origin line for {name}"
        );
    }
    assert!(
        lines.iter().any(|line| field(line, "origin") == "shop"
            && message(line).starts_with("robots.txt:")
            && field(line, "state") == "conditional"),
        "robots.txt outcome for shop: {lines:#?}"
    );
}

#[test]
fn a_flood_of_blocked_requests_is_rate_limited_and_the_rest_counted() {
    const REQUESTS: usize = 1500;
    let origin = Origin::start();
    let body = format!(
        "origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n{}",
        origin.addr(),
        inline_robots("User-agent: GPTBot\nDisallow: /\n")
    );
    let proxy = Launch::new(&body).arg("--log-format").arg("json").start();
    let senders: Vec<_> = (0..3)
        .map(|t| {
            let addr = proxy.addr;
            thread::spawn(move || {
                let mut conn = try_open(addr).expect("connects");
                let mut refused = 0;
                for i in (t..REQUESTS).step_by(3) {
                    let request = Request::get(&format!("/page/{i}"))
                        .host("shop.example")
                        .ua(GPTBOT);
                    let response = try_send(&mut conn, &request).expect("an answer");
                    if response.status == 403 {
                        refused += 1;
                    }
                }
                refused
            })
        })
        .collect();
    let refused: usize = senders
        .into_iter()
        .map(|s| s.join().expect("sender finishes"))
        .sum();
    assert_eq!(refused, REQUESTS, "every request is refused");

    // Within about a second the suppressed remainder is reported; the sums then add up.
    let count = |lines: &[Value]| -> (u64, u64) {
        let logged = decision_lines(lines, "blocked").len() as u64;
        let suppressed = lines
            .iter()
            .filter_map(|line| field(line, "suppressed").as_u64())
            .sum();
        (logged, suppressed)
    };
    let lines = wait_lines(&proxy, |lines| {
        let (logged, suppressed) = count(lines);
        logged + suppressed >= REQUESTS as u64
    });
    let (logged, suppressed) = count(&lines);
    assert_eq!(
        logged + suppressed,
        REQUESTS as u64,
        "each request logged or counted once"
    );
    assert!(
        suppressed > 0,
        "the flood was rate-limited ({logged} logged)"
    );
    assert!(
        logged >= 100,
        "the first 100 lines of a second are written ({logged})"
    );
    let report = lines
        .iter()
        .find(|line| field(line, "suppressed").as_u64().is_some())
        .expect("a suppressed-lines report");
    assert_eq!(report["level"], "WARN");
    assert_eq!(field(report, "limit_per_second"), 100);
    assert_eq!(
        proxy.wait_metric(
            "robotsguard_requests_total",
            &[("decision", "blocked")],
            REQUESTS as f64
        ),
        REQUESTS as f64,
        "the metric counts every request"
    );
}
