//! `robotsguard validate` and `robotsguard identify` as an operator runs them: the real binary,
//! real files, exit codes and output scripts rely on.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn robotsguard(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_robotsguard"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the robotsguard binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn validate(path: &Path) -> Output {
    robotsguard(&["validate", "--config", &path.to_string_lossy()])
}

fn shipped_configs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let mut configs = vec![root.join("robotsguard.yaml")];
    let mut examples: Vec<PathBuf> = std::fs::read_dir(root.join("examples"))
        .expect("config/examples exists")
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    examples.sort();
    assert!(examples.len() >= 5, "examples: {examples:?}");
    configs.extend(examples);
    configs
}

#[test]
fn every_shipped_config_is_valid() {
    for path in shipped_configs() {
        // The examples name files of the machine they are written for (TLS certificates under
        // /etc): the file itself is what is checked here.
        let output = robotsguard(&[
            "validate",
            "--config-only",
            "--config",
            &path.to_string_lossy(),
        ]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}: {}",
            path.display(),
            stderr(&output)
        );
        let out = stdout(&output);
        assert!(
            out.starts_with(&format!("{}: valid (", path.display())),
            "{out}"
        );
        // Example upstream names do not resolve here: warned about, not refused.
        let err = stderr(&output);
        assert!(
            err.lines().all(|line| line.contains(": warning: origin `")
                && line.contains("does not resolve here")),
            "{err}"
        );
    }
}

#[test]
fn validate_checks_the_files_a_config_refers_to() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("robotsguard.yaml");
    let config =
        "listen:\n  - {address: \"127.0.0.1:0\", tls: {cert: missing.pem, key: missing.key}}\n\
         admin: \"127.0.0.1:0\"\n\
         state: {backend: redis, redis: {url: \"rediss://127.0.0.1:6380/0\", tls: {ca: missing-ca.pem}}}\n\
         origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:9\"\n\
         \x20   robots: {source: file, path: robots/nowhere.txt}\n";
    std::fs::write(&path, config).expect("config written");
    let output = validate(&path);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("cannot read the TLS certificate"), "{err}");
    assert!(err.contains("missing.pem"), "{err}");
    assert!(err.contains("robots/nowhere.txt"), "{err}");
    assert!(err.contains("state.redis: cannot read"), "{err}");
    assert!(err.contains("missing-ca.pem"), "{err}");
    // The file alone is fine.
    let only = robotsguard(&[
        "validate",
        "--config-only",
        "--config",
        &path.to_string_lossy(),
    ]);
    assert_eq!(only.status.code(), Some(0), "{}", stderr(&only));
}

#[test]
fn a_broken_config_reports_every_error_with_its_position() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("broken.yaml");
    std::fs::write(
        &path,
        "listen: [\"127.0.0.1:8080\"]
origins:
  - name: shop
    hosts: [shop.example]
    upstreams: \"127.0.0.1:8081\"
    robots:
      refresh: 5
  - name: blog
    hosts: [blog.example, shop.example]
    upstream: \"127.0.0.1:8082\"
",
    )
    .expect("config written");
    let output = validate(&path);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(stdout(&output).is_empty(), "{}", stdout(&output));
    let err = stderr(&output);
    let file = path.display().to_string();
    let lines: Vec<&str> = err.lines().collect();
    let expect = [
        format!("{file}:3:5: origin is missing `upstream`"),
        format!("{file}:5:5: unknown key `upstreams` in origin; did you mean `upstream`?"),
        format!("{file}:7:16: duration `5` has no unit"),
        format!("{file}:9:27: host `shop.example` is already served by origin `shop` at line 4, column 13"),
    ];
    assert_eq!(lines.len(), expect.len(), "{err}");
    for (line, want) in lines.iter().zip(&expect) {
        assert!(
            line.starts_with(want.as_str()),
            "want {want:?}\n got {line:?}"
        );
    }
}

#[test]
fn each_kind_of_error_is_reported_alone_at_its_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cases = [
        (
            "origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:1\"\n    upstreams: \"127.0.0.1:2\"\n",
            "5:5: unknown key `upstreams` in origin",
        ),
        (
            "origins:\n  - name: a\n    hosts: [a.example, shop.example]\n    upstream: \"127.0.0.1:1\"\n  - name: b\n    hosts:\n      - SHOP.example.\n    upstream: \"127.0.0.1:2\"\n",
            "7:9: host `shop.example` is already served by origin `a` at line 3, column 24",
        ),
        (
            "defaults:\n  robots:\n    refresh: 5\norigins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:1\"\n",
            "3:14: duration `5` has no unit",
        ),
    ];
    for (index, (text, want)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("case{index}.yaml"));
        std::fs::write(&path, text).expect("config written");
        let output = validate(&path);
        assert_eq!(output.status.code(), Some(1), "{text}");
        let err = stderr(&output);
        let want = format!("{}:{want}", path.display());
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with(&want), "want {want:?}\n got {err:?}");
    }
}

#[test]
fn a_missing_config_file_is_an_error() {
    let output = robotsguard(&["validate", "--config", "/nonexistent/robotsguard.yaml"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).starts_with("/nonexistent/robotsguard.yaml: cannot open the config"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn identify_json_names_googlebot() {
    let output = robotsguard(&[
        "identify",
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let json: serde_json::Value =
        serde_json::from_str(stdout(&output).trim()).expect("identify --json prints JSON");
    assert_eq!(json["crawler"], true, "{json}");
    assert_eq!(json["name"], "Googlebot", "{json}");
    assert_eq!(json["tokens"], serde_json::json!(["googlebot"]), "{json}");
    assert_eq!(json["category"], "search", "{json}");
    assert_eq!(json["operator"], "Google", "{json}");
    assert_eq!(json["source"], "catalogue", "{json}");
    assert_eq!(json["metric_label"], "Googlebot", "{json}");
}

#[test]
fn identify_json_for_googlebot_image_and_adsbot() {
    let output = robotsguard(&["identify", "Googlebot-Image/1.0", "--json"]);
    let json: serde_json::Value = serde_json::from_str(stdout(&output).trim()).expect("JSON");
    assert_eq!(json["name"], "Googlebot-Image", "{json}");
    assert_eq!(
        json["tokens"],
        serde_json::json!(["googlebot-image", "googlebot"]),
        "{json}"
    );
    let output = robotsguard(&[
        "identify",
        "AdsBot-Google (+http://www.google.com/adsbot.html)",
        "--json",
    ]);
    let json: serde_json::Value = serde_json::from_str(stdout(&output).trim()).expect("JSON");
    assert_eq!(json["name"], "AdsBot-Google", "{json}");
    assert_eq!(json["ignores_global"], true, "{json}");
}

#[test]
fn a_browser_is_not_a_crawler() {
    let browser = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36";
    let output = robotsguard(&["identify", browser, "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output).trim(), r#"{"crawler":false}"#);
    let output = robotsguard(&["identify", browser]);
    assert_eq!(output.status.code(), Some(0));
    assert!(
        stdout(&output).starts_with("not a crawler"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn identify_in_words() {
    let output = robotsguard(&["identify", "Googlebot-Image/1.0"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        stdout(&output),
        "crawler Googlebot-Image (search, operated by Google), from the catalogue\n\
         robots.txt groups tried: googlebot-image, googlebot, then *\n\
         purposes: search, training (ignores Crawl-delay)\n"
    );
}

#[test]
fn identify_uses_extra_crawlers_from_a_config() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("c.yaml");
    std::fs::write(
        &path,
        "crawlers:\n  extra:\n    - name: ZorgBot\n      category: ai-training\norigins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:1\"\n",
    )
    .expect("config written");
    let output = robotsguard(&[
        "identify",
        "Mozilla/5.0 (compatible; ZorgBot/1.0)",
        "--json",
        "--config",
        &path.to_string_lossy(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_str(stdout(&output).trim()).expect("JSON");
    assert_eq!(json["name"], "ZorgBot", "{json}");
    assert_eq!(json["category"], "ai-training", "{json}");
    assert_eq!(json["source"], "catalogue", "{json}");
}

#[test]
fn identify_checks_a_claim_from_a_client_address() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("ranges.json"),
        r#"{"prefixes": [{"ipv4Prefix": "198.51.100.0/24"}]}"#,
    )
    .expect("list written");
    let path = dir.path().join("c.yaml");
    std::fs::write(
        &path,
        "crawlers:\n  extra:\n    - name: ZorgBot\n      verify: {ips: [\"file:ranges.json\"]}\norigins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:1\"\n",
    )
    .expect("config written");
    let config = path.to_string_lossy();
    let ask = |client: &str| {
        let output = robotsguard(&[
            "identify",
            "ZorgBot/1.0",
            "--json",
            "--config",
            &config,
            "--client",
            client,
        ]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let json: serde_json::Value = serde_json::from_str(stdout(&output).trim()).expect("JSON");
        json["verification"].clone()
    };
    let inside = ask("198.51.100.7");
    assert_eq!(inside["result"], "verified", "{inside}");
    assert!(
        inside["how"].as_str().unwrap_or("").contains("ranges.json"),
        "{inside}"
    );
    assert_eq!(ask("203.0.113.7")["result"], "impostor");
    // A private address is never an impostor.
    assert_eq!(ask("10.0.0.7")["result"], "unverified");
    // In words too.
    let output = robotsguard(&[
        "identify",
        "ZorgBot/1.0",
        "--config",
        &config,
        "--client",
        "198.51.100.7",
    ]);
    assert!(
        stdout(&output).contains("from 198.51.100.7: verified"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn validate_refuses_what_the_catalogue_would_refuse_at_serve() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("robotsguard.yaml");
    for (extra, position, says) in [
        ("{name: other, tokens: [otherbot]}", ":5:14:", "reserved"),
        (
            "{name: MyBot, tokens: [mybot], pattern: GPTBot}",
            ":5:47:",
            "already the pattern of `GPTBot`",
        ),
    ] {
        let config = format!(
            "origins:\n  - {{name: shop, hosts: [shop.example], upstream: \"127.0.0.1:9\"}}\ncrawlers:\n  extra:\n    - {extra}\n"
        );
        std::fs::write(&path, config).expect("config written");
        let output = validate(&path);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{err}");
        assert!(err.contains(position) && err.contains(says), "{err}");
    }
}

/// `robotsguard identify … | head` and `robotsguard config schema | head`: a reader that has gone
/// away ends the output quietly with success instead of a panic (a closed pipe, no reader at all).
#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    for args in [
        &["identify", "GPTBot/1.0"][..],
        &["identify", "--json", "GPTBot/1.0"][..],
        &["config", "schema"][..],
        &["config", "reference"][..],
        &["metrics"][..],
    ] {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let output = Command::new(env!("CARGO_BIN_EXE_robotsguard"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .expect("the robotsguard binary runs");
        assert!(
            output.status.success(),
            "{args:?} into a closed pipe: {:?}, stderr {}",
            output.status,
            stderr(&output)
        );
        assert!(
            !stderr(&output).contains("panicked"),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}
