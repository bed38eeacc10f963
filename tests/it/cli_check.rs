//! `robotsguard check` as a user runs it: the real binary, real files, exit codes scripts rely on.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn robotsguard(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_robotsguard"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the robotsguard binary starts");
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin).expect("stdin accepts input");
    }
    child.wait_with_output().expect("the binary finishes")
}

fn robots_file(dir: &tempfile::TempDir) -> String {
    let path = dir.path().join("robots.txt");
    std::fs::write(
        &path,
        "User-agent: *\nDisallow: /private\n\nUser-agent: googlebot\nDisallow: /nogoogle\nAllow: /private\n",
    )
    .expect("temp file is writable");
    path.to_string_lossy().into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn urls_as_arguments_print_verdicts_and_exit_by_outcome() {
    let dir = tempfile::tempdir().expect("temp dir");
    let robots = robots_file(&dir);
    let output = robotsguard(
        &[
            "check",
            "--robots",
            &robots,
            "--agent",
            "FooBot",
            "/private/x",
            "https://e.com/open",
        ],
        b"",
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stdout(&output),
        "disallowed  /private/x  (line 2: Disallow: /private)\nallowed     /open  (no matching rule)\n"
    );
    let output = robotsguard(
        &[
            "check",
            "--robots",
            &robots,
            "--agent",
            "googlebot",
            "/private/x",
        ],
        b"",
    );
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        stdout(&output),
        "allowed     /private/x  (line 6: Allow: /private)\n"
    );
}

#[test]
fn several_agents_select_the_first_with_a_group() {
    let dir = tempfile::tempdir().expect("temp dir");
    let robots = robots_file(&dir);
    let output = robotsguard(
        &[
            "check",
            "--robots",
            &robots,
            "--agent",
            "googlebot-image",
            "--agent",
            "googlebot",
            "--json",
            "/nogoogle",
        ],
        b"",
    );
    assert_eq!(output.status.code(), Some(1));
    let value: serde_json::Value =
        serde_json::from_str(stdout(&output).trim()).expect("one JSON line");
    assert_eq!(value["allowed"], false);
    assert_eq!(value["line"], 5);
    assert_eq!(value["group"], "googlebot");
}

#[test]
fn url_lists_from_stdin_with_summary() {
    let dir = tempfile::tempdir().expect("temp dir");
    let robots = robots_file(&dir);
    let list = b"/a\n\n/private/1\r\nhttps://e.com/private/2\n  /b  \n";
    let output = robotsguard(
        &[
            "check",
            "--robots",
            &robots,
            "--agent",
            "x",
            "--urls",
            "-",
            "--summary",
        ],
        list,
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "checked 4: 2 allowed, 2 disallowed\n");
}

#[test]
fn input_errors_exit_2_with_a_one_line_message() {
    let output = robotsguard(
        &[
            "check",
            "--robots",
            "/nonexistent/robots.txt",
            "--agent",
            "x",
            "/",
        ],
        b"",
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("error: cannot read robots.txt `/nonexistent/robots.txt`"),
        "{stderr}"
    );
    assert_eq!(stderr.trim_end().lines().count(), 1);
    let output = robotsguard(&["check", "--agent", "x", "/"], b"");
    assert_eq!(output.status.code(), Some(2));
    let dir = tempfile::tempdir().expect("temp dir");
    let robots = robots_file(&dir);
    let output = robotsguard(&["check", "--robots", &robots, "--agent", "x"], b"");
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn batch_mode_over_stdin() {
    let input = concat!(
        r#"{"robots": "User-agent: FooBot\nDisallow: /", "agent": "FooBot", "url": "http://x/y"}"#,
        "\n{broken\n",
        r#"{"robots": "User-agent: FooBot\nDisallow: /", "agent": "FooBot/1.0", "url": "http://x/y"}"#,
        "\n"
    );
    let output = robotsguard(&["check", "--batch"], input.as_bytes());
    assert_eq!(output.status.code(), Some(0));
    let lines: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each output line is JSON"))
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(
        (lines[0]["allowed"].clone(), lines[0]["line"].clone()),
        (false.into(), 2.into())
    );
    assert!(lines[1]["error"].is_string());
    assert_eq!(lines[2]["allowed"], true);
}
