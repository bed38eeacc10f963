//! Logs operators can parse, through the real binary: with the access log on, access and event
//! lines share one JSON envelope (`time` in RFC 3339, `level`, `kind`, `request_id` where there
//! is one) and a block's event line carries the request id of its access line; with
//! `access_log.path` the access lines go apart (a file, opened again on SIGUSR1 and SIGHUP after
//! rotation, or stdout); and a client's own `X-Request-Id` never reaches the origin from an
//! untrusted peer.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::live::Launch;
use support::{inline_robots, site, Origin, Proxy, Request, BROWSER, GPTBOT};

const SHOP: &str = "shop.example";

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line:?}"))
        })
        .collect()
}

/// Polls `read` until `found` holds for its JSON lines (at most 10 s); returns the last lines.
fn wait_lines(read: impl Fn() -> String, found: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let lines = json_lines(&read());
        if found(&lines) || Instant::now() > deadline {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// `2026-05-01T12:00:00.123456Z`: RFC 3339 in UTC.
fn is_rfc3339(text: &str) -> bool {
    humantime::parse_rfc3339(text).is_ok() && text.ends_with('Z')
}

fn access_lines_for<'a>(lines: &'a [Value], path: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|line| line["kind"] == "access" && line["path"] == path)
        .collect()
}

fn body(origin: &Origin, access_log: &str) -> String {
    format!(
        "access_log: {access_log}\n{}",
        site(
            origin,
            SHOP,
            &inline_robots("User-agent: GPTBot\nDisallow: /private\n")
        )
    )
}

#[test]
fn access_and_event_lines_share_one_envelope_and_a_block_carries_its_request_id() {
    let origin = Origin::start();
    let proxy = Launch::new(&body(&origin, "{format: json}"))
        .arg("--log-format")
        .arg("json")
        .start();
    assert_eq!(proxy.get(SHOP, "/private/a", GPTBOT).status, 403);
    assert_eq!(proxy.get(SHOP, "/page", BROWSER).status, 200);
    let lines = wait_lines(
        || proxy.stderr(),
        |lines| {
            access_lines_for(lines, "/page").len() == 1
                && lines.iter().any(|l| l["fields"]["decision"] == "blocked")
        },
    );
    for line in &lines {
        assert!(
            line["time"].as_str().is_some_and(is_rfc3339),
            "time: {line}"
        );
        assert!(
            ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"]
                .contains(&line["level"].as_str().unwrap_or("")),
            "level: {line}"
        );
        assert!(
            line["kind"] == "access" || line["kind"] == "event",
            "kind: {line}"
        );
    }
    let blocked = lines
        .iter()
        .find(|line| line["kind"] == "event" && line["fields"]["decision"] == "blocked")
        .unwrap_or_else(|| panic!("a blocked line: {lines:#?}"));
    let [access] = access_lines_for(&lines, "/private/a")[..] else {
        panic!("one access line for the block: {lines:#?}");
    };
    let id = access["request_id"].as_str().unwrap_or("");
    assert_eq!(id.len(), 32, "{access}");
    assert_eq!(blocked["request_id"], id, "{blocked}");
    assert_eq!(access["level"], "INFO");
    assert_eq!(access["status"], 403);
    // Lines without a request have none.
    let starting = lines
        .iter()
        .find(|line| line["fields"]["message"] == "robotsguard starting")
        .unwrap_or_else(|| panic!("a start-up line: {lines:#?}"));
    assert!(starting.get("request_id").is_none(), "{starting}");
}

#[test]
fn access_lines_go_to_their_file_which_is_opened_again_after_rotation() {
    let origin = Origin::start();
    let proxy = Launch::new(&body(&origin, "{format: json, path: access.log}")).start();
    let file = proxy.dir.path().join("access.log");
    let read = || std::fs::read_to_string(&file).unwrap_or_default();
    assert_eq!(proxy.get(SHOP, "/one", BROWSER).status, 200);
    wait_lines(read, |lines| access_lines_for(lines, "/one").len() == 1);
    assert!(
        !proxy.stderr().contains("\"path\":\"/one\""),
        "not on stderr too"
    );

    // logrotate: rename the file away, then tell robotsguard (SIGUSR1, then SIGHUP).
    for (round, signal) in ["USR1", "HUP"].iter().enumerate() {
        let rotated = proxy.dir.path().join(format!("access.log.{round}"));
        std::fs::rename(&file, &rotated).expect("rotated");
        proxy.signal(signal);
        let path = format!("/after-{signal}");
        // The signal and the request race: send until the new file has the line.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            assert_eq!(proxy.get(SHOP, &path, BROWSER).status, 200);
            std::thread::sleep(Duration::from_millis(50));
            if !access_lines_for(&json_lines(&read()), &path).is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{signal}: no new file:\n{}",
                proxy.stderr()
            );
        }
        let old = std::fs::read_to_string(&rotated).expect("the rotated file");
        assert!(json_lines(&old).iter().all(|line| line["kind"] == "access"));
    }
}

#[test]
fn access_lines_can_go_to_stdout_apart_from_the_events() {
    let origin = Origin::start();
    let proxy = Proxy::start(&body(&origin, "{format: json, path: stdout}"));
    assert_eq!(proxy.get(SHOP, "/page", BROWSER).status, 200);
    let lines = wait_lines(
        || proxy.stdout(),
        |lines| access_lines_for(lines, "/page").len() == 1,
    );
    assert!(
        lines.iter().all(|line| line["kind"] == "access"),
        "{lines:#?}"
    );
    assert!(!proxy.stderr().contains("\"kind\":\"access\""));
}

#[test]
fn a_request_id_from_an_untrusted_client_never_reaches_the_origin() {
    for (access_log, ours) in [("access_log: {format: json}\n", true), ("", false)] {
        let origin = Origin::start();
        let body = format!(
            "{access_log}{}",
            site(&origin, SHOP, &inline_robots("User-agent: *\nAllow: /\n"))
        );
        let proxy = Proxy::start(&body);
        let answer = proxy.send(
            &Request::get("/page")
                .host(SHOP)
                .ua(BROWSER)
                .header("X-Request-Id", "forged-by-the-client"),
        );
        assert_eq!(answer.status, 200);
        let received = origin.proxied_to("/page");
        let sent = received[0].header("x-request-id");
        assert_ne!(sent, Some("forged-by-the-client"), "{access_log}");
        if ours {
            assert_eq!(sent.map(str::len), Some(32), "robotsguard's own id");
        } else {
            assert_eq!(sent, None, "removed when the access log is off");
        }
    }
}
