//! `validate` ≡ `serve`: every config `validate` refuses, `serve` refuses to start with (exit 1,
//! naming the same problem), and a config `validate` accepts, `serve` starts with. Each case is
//! run through both. `validate --config-only` opens no file but the config: missing secrets and
//! files pass it.

use crate::support;

use std::process::Command;

use crate::fail_fast::serve_exit;
use support::{free_port, Proxy};

/// Runs `validate` (with `extra` arguments) on `config`, written to a temp dir with `files`;
/// returns its exit code and stderr.
fn validate_exit(config: &str, files: &[(&str, &str)], extra: &[&str]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, content) in files {
        std::fs::write(dir.path().join(name), content).expect("file written");
    }
    let path = dir.path().join("robotsguard.yaml");
    std::fs::write(&path, config).expect("config written");
    let output = Command::new(env!("CARGO_BIN_EXE_robotsguard"))
        .arg("validate")
        .args(extra)
        .arg("--config")
        .arg(&path)
        .output()
        .expect("robotsguard runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A whole config: free ports, one origin with `origin` keys (indented as under it), and `top`
/// keys before it. `listener` and `admin` are more keys of the listener and admin mappings.
fn config_with(listener: &str, admin: &str, top: &str, origin: &str) -> String {
    format!(
        "listen: [{{address: \"127.0.0.1:{}\"{listener}}}]\nadmin: {{address: \"127.0.0.1:{}\"{admin}}}\n\
         threads: 1\nshutdown: {{grace: 1s}}\n{top}\
         origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:9\"\n{origin}",
        free_port(),
        free_port()
    )
}

fn config(top: &str, origin: &str) -> String {
    config_with("", "", top, origin)
}

/// A `file:` registry of Web Bot Auth agents, `agents.txt` beside the config.
const REGISTRY: &str = "verify: {web_bot_auth: {registries: [\"file:agents.txt\"]}}\n";

const INLINE: &str = "    robots: {source: inline, text: \"User-agent: *\\nDisallow: /x\\n\"}\n";

/// A config both commands must refuse: what they must say, and the files beside it.
struct Case {
    name: &'static str,
    config: String,
    files: Vec<(&'static str, &'static str)>,
    said: &'static str,
}

fn case(
    name: &'static str,
    top: String,
    origin: String,
    files: Vec<(&'static str, &'static str)>,
    said: &'static str,
) -> Case {
    Case {
        name,
        config: config(&top, &origin),
        files,
        said,
    }
}

fn error_cases() -> Vec<Case> {
    let token = ", token_file: token";
    vec![
        Case {
            name: "a missing TLS certificate",
            config: config_with(", tls: {cert: listener.pem, key: listener.key}", "", "", INLINE),
            files: vec![],
            said: "listener.pem",
        },
        Case {
            name: "a missing admin token file",
            config: config_with("", token, "", INLINE),
            files: vec![],
            said: "admin token_file",
        },
        Case {
            name: "an empty admin token file",
            config: config_with("", token, "", INLINE),
            files: vec![("token", "  \n")],
            said: "is empty",
        },
        case(
            "a missing robots.txt file",
            String::new(),
            "    robots: {source: file, path: nowhere.txt}\n".into(),
            vec![],
            "nowhere.txt",
        ),
        case(
            "a network with host bits set",
            "trusted_proxies: [\"127.0.0.5/8\"]\n".into(),
            INLINE.into(),
            vec![],
            "127.0.0.5/8 has host bits set; did you mean 127.0.0.0/8?",
        ),
        case(
            "a boolean where no word means it",
            String::new(),
            format!("{INLINE}    mode: true\n"),
            vec![],
            "`mode` must be a word, not the boolean true",
        ),
        case(
            "a missing Redis url_file",
            "state: {backend: redis, redis: {url_file: redis-url}}\n".into(),
            INLINE.into(),
            vec![],
            "redis-url",
        ),
        case(
            "a Redis URL that is not one",
            "state: {backend: redis, redis: {url_file: redis-url}}\n".into(),
            INLINE.into(),
            vec![("redis-url", "http://not-redis")],
            "not a Redis URL",
        ),
        case(
            "a missing CA for the store",
            "state: {backend: redis, redis: {url: \"rediss://127.0.0.1:6380/0\", tls: {ca: store-ca.pem}}}\n".into(),
            INLINE.into(),
            vec![],
            "store-ca.pem",
        ),
        case(
            "a missing CA for the upstream",
            String::new(),
            format!("{INLINE}    tls: {{ca: upstream-ca.pem}}\n"),
            vec![],
            "upstream-ca.pem",
        ),
        case(
            "a mirror of a list no crawler names",
            "verify: {ranges: {mirrors: {\"https://example.com/nobody.json\": \"file:x.json\"}}}\n".into(),
            INLINE.into(),
            vec![],
            "no crawler's `verify.ips` names",
        ),
        case(
            "a missing Web Bot Auth registry file",
            REGISTRY.into(),
            INLINE.into(),
            vec![],
            "verify.web_bot_auth.registries `file:",
        ),
        case(
            "a registry listing a card file that is missing",
            REGISTRY.into(),
            INLINE.into(),
            vec![("agents.txt", "# ours\nfile:card.json\n")],
            "card `file:card.json`: cannot read",
        ),
        case(
            "a registry listing a card that is not JSON",
            REGISTRY.into(),
            INLINE.into(),
            vec![("agents.txt", "file:card.json\n"), ("card.json", "<html>")],
            "card `file:card.json`: not a JSON card",
        ),
        case(
            "a registry inlining a card without its crawler",
            REGISTRY.into(),
            INLINE.into(),
            vec![(
                "agents.txt",
                "data:application/json,{\"client_id\":\"https://a.example\"}\n",
            )],
            "no usable `rfc9309-product-token`",
        ),
        case(
            "an unknown key",
            "acess_log: {format: json}\n".into(),
            INLINE.into(),
            vec![],
            "unknown key `acess_log`",
        ),
    ]
}

#[test]
fn every_config_validate_refuses_serve_refuses_too() {
    for Case {
        name,
        config: text,
        files,
        said,
    } in error_cases()
    {
        let (code, stderr) = validate_exit(&text, &files, &[]);
        assert_eq!(code, Some(1), "validate, {name}:\n{text}\n{stderr}");
        assert!(stderr.contains(said), "validate, {name}: {stderr}");
        let (code, stderr) = serve_exit(&text, &files);
        assert_eq!(code, Some(1), "serve, {name}:\n{text}\n{stderr}");
        assert!(stderr.contains(said), "serve, {name}: {stderr}");
    }
}

#[test]
fn a_config_validate_accepts_serve_starts_with() {
    let top = "trusted_proxies: [\"127.0.0.0/8\"]\n\
               state: {backend: redis, redis: {url_file: redis-url, timeout: 50ms}}\n\
               verify: {web_bot_auth: {registries: [\"file:agents.txt\"]}}\n";
    let origin = "    robots: {source: file, path: robots.txt}\n    mode: off\n";
    let files = [
        ("robots.txt", "User-agent: *\nDisallow: /x\n"),
        // A card file beside it, and one at an https URL (fetched at run time, not checked).
        (
            "agents.txt",
            "file:card.json\nhttps://registry.example/card.json\n",
        ),
        (
            "card.json",
            "{\"client_id\":\"https://cards.example\",\"rfc9309-product-token\":\"CardBot\"}",
        ),
        // Nothing listens there: the store is unreachable, which is no reason not to start.
        ("redis-url", "redis://127.0.0.1:9/0"),
    ];
    let text = config(top, origin);
    let (code, stderr) = validate_exit(&text, &files, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let body = format!(
        "{top}origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:9\"\n{origin}"
    );
    let proxy = Proxy::builder(&body).files(&files).start();
    assert_eq!(proxy.admin_status("/readyz"), Some(200));
}

#[test]
fn config_only_opens_no_file_but_the_config() {
    // Every file it names is missing: the secrets of a Helm release, its robots.txt files.
    let top = "state: {backend: redis, redis: {url_file: secrets/redis-url, tls: {ca: secrets/ca.pem}}}\n";
    let origin = "    robots: {source: file, path: robots/shop.txt}\n";
    let text = config_with("", ", token_file: secrets/token", top, origin);
    let (code, stderr) = validate_exit(&text, &[], &["--config-only"]);
    assert_eq!(code, Some(0), "{text}\n{stderr}");
    // Without it, they are errors (the unreadable URL first: the rest waits for a config that
    // loads).
    let (code, stderr) = validate_exit(&text, &[], &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("secrets/redis-url"), "{stderr}");
    // The config itself is still checked.
    let broken = format!("{text}    mode: enforcing\n");
    let (code, stderr) = validate_exit(&broken, &[], &["--config-only"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("unknown `mode` `enforcing`"), "{stderr}");
}
