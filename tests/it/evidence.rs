//! Signed compliance evidence through the real proxy and origin: a violation, a ban and a 402
//! each give a record; `robotsguard evidence verify` passes on the admin export and fails,
//! naming the record, on a flipped byte, a record deleted from the middle (`--complete`) and an
//! edited robots.txt copy; files rotate by size, the chain goes on across files and restarts,
//! old files are pruned; hostile User-Agents and paths stay one bounded line; a missing or
//! malformed key is refused by `validate` and `serve` alike.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::{metric, Origin, Proxy, Request};

const GPTBOT: &str = "Mozilla/5.0 (compatible; GPTBot/1.2; +https://openai.com/gptbot)";
const ROBOTS: &str = "User-agent: GPTBot\nDisallow: /private\n\nUser-agent: *\nDisallow: /cart\n";

/// A fresh Ed25519 key in PKCS#8 PEM, made by openssl.
fn pem_key() -> String {
    let output = Command::new("openssl")
        .args(["genpkey", "-algorithm", "ed25519"])
        .output()
        .expect("openssl runs");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).expect("PEM is text")
}

/// The config body: `shop` (strikes ban after 2) and `pay` (402 for crawlers), evidence into
/// `dir` signed with `key` (paths absolute), `extra` keys of `evidence`.
fn body(origin: &Origin, key: &Path, dir: &Path, extra: &str) -> String {
    let robots = serde_json::to_string(ROBOTS).expect("a string");
    format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n\
         evidence: {{enabled: true, key_file: \"{}\", dir: \"{}\", replica: r1{extra}}}\n\
         origins:\n  \
         - name: shop\n    hosts: [shop.example]\n    upstream: \"{addr}\"\n    \
           robots: {{source: inline, text: {robots}}}\n    \
           offenders: {{action: ban, strikes: 2}}\n  \
         - name: pay\n    hosts: [pay.example]\n    upstream: \"{addr}\"\n    \
           robots: {{source: inline, text: {robots}}}\n    \
           block: {{status: 402, license_url: \"https://terms.example/license.xml\"}}\n",
        key.display(),
        dir.display(),
        addr = origin.addr(),
    )
}

/// A key file and an evidence directory that outlive one proxy.
struct Place {
    root: tempfile::TempDir,
}

impl Place {
    fn new() -> Place {
        let root = tempfile::tempdir().expect("a temp dir");
        std::fs::write(root.path().join("key.pem"), pem_key()).expect("key written");
        Place { root }
    }
    fn key(&self) -> PathBuf {
        self.root.path().join("key.pem")
    }
    fn dir(&self) -> PathBuf {
        self.root.path().join("evidence")
    }
    fn start(&self, origin: &Origin, extra: &str) -> Proxy {
        Proxy::start(&body(origin, &self.key(), &self.dir(), extra))
    }
}

fn from(proxy: &Proxy, host: &str, client: &str, path: &str, ua: &str) -> support::Response {
    proxy.send(
        &Request::get(path)
            .host(host)
            .ua(ua)
            .header("X-Forwarded-For", client),
    )
}

/// Every record line in `dir`'s files, in file order.
pub(crate) fn lines_in(dir: &Path) -> Vec<String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Waits (bounded) until `dir` holds at least `count` records; returns them.
fn wait_records(dir: &Path, count: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut lines = lines_in(dir);
    for _ in 0..400 {
        if lines.len() >= count || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
        lines = lines_in(dir);
    }
    lines
}

fn json(line: &str) -> serde_json::Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

/// `robotsguard evidence ARGS`: (exit code, stdout and stderr).
fn evidence(args: &[&str]) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_robotsguard"))
        .arg("evidence")
        .args(args)
        .output()
        .expect("robotsguard runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), text)
}

/// Takes the export, the public key and every copy the records name from the admin endpoint
/// into `out`: `evidence.jsonl`, `key.jwk`, `robots/<sha256>`.
fn download(proxy: &Proxy, query: &str, out: &Path) -> Vec<String> {
    std::fs::create_dir_all(out.join("robots")).expect("dir");
    let export = proxy.admin_get(&format!("/evidence{query}"));
    assert_eq!(export.status, 200, "{}", export.text());
    assert_eq!(export.header("content-type"), Some("application/jsonl"));
    std::fs::write(out.join("evidence.jsonl"), &export.body).expect("written");
    let key = proxy.admin_get("/evidence/key");
    assert_eq!(key.status, 200);
    let jwk = key.json();
    assert_eq!(
        (jwk["kty"].as_str(), jwk["crv"].as_str()),
        (Some("OKP"), Some("Ed25519"))
    );
    std::fs::write(out.join("key.jwk"), &key.body).expect("written");
    let lines: Vec<String> = export.text().lines().map(str::to_string).collect();
    for line in &lines {
        let sha = json(line)["robots"]["sha256"]
            .as_str()
            .expect("a sha256")
            .to_string();
        let copy = proxy.admin_get(&format!("/evidence/robots/{sha}"));
        assert_eq!(copy.status, 200);
        assert!(copy
            .header("x-evidence-robots")
            .is_some_and(|m| m.contains("inline")));
        std::fs::write(out.join("robots").join(&sha), &copy.body).expect("written");
    }
    lines
}

fn verify(dir: &Path, file: &str, extra: &[&str]) -> (i32, String) {
    let file = dir.join(file);
    let key = dir.join("key.jwk");
    let robots = dir.join("robots");
    let mut args = vec![
        "verify",
        file.to_str().expect("utf-8"),
        "--key",
        key.to_str().expect("utf-8"),
        "--robots-dir",
        robots.to_str().expect("utf-8"),
    ];
    args.extend_from_slice(extra);
    evidence(&args)
}

/// Rewrites `file` with `change` applied to its lines.
fn rewrite(file: &Path, change: impl FnOnce(&mut Vec<String>)) {
    let text = std::fs::read_to_string(file).expect("readable");
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    change(&mut lines);
    std::fs::write(file, format!("{}\n", lines.join("\n"))).expect("written");
}

/// The scripted requests: two violations (the second bans), a refusal of the banned address,
/// a 402, and a browser that gets nothing recorded.
fn script(proxy: &Proxy) {
    let client = "203.0.113.9";
    assert_eq!(
        from(proxy, "shop.example", client, "/private", GPTBOT).status,
        403
    );
    assert_eq!(
        from(proxy, "shop.example", client, "/private/x", GPTBOT).status,
        403
    );
    assert_eq!(
        from(proxy, "shop.example", client, "/page", GPTBOT).status,
        403
    );
    assert_eq!(
        from(proxy, "pay.example", "203.0.113.20", "/private", GPTBOT).status,
        402
    );
    assert_eq!(
        from(
            proxy,
            "shop.example",
            "203.0.113.30",
            "/page",
            support::BROWSER
        )
        .status,
        200
    );
}

#[test]
fn a_violation_a_ban_and_a_402_each_give_a_signed_record_that_verifies() {
    let origin = Origin::start();
    let place = Place::new();
    let proxy = place.start(&origin, "");
    script(&proxy);
    let lines = wait_records(&place.dir(), 4);
    assert_eq!(lines.len(), 4, "{lines:#?}");
    let records: Vec<serde_json::Value> = lines.iter().map(|l| json(l)).collect();
    let violation = &records[0];
    assert_eq!(violation["id"], "r1-1");
    assert_eq!(violation["replica"], "r1");
    assert_eq!(violation["prev"], serde_json::Value::Null);
    assert_eq!(violation["origin"], "shop");
    assert_eq!(violation["host"], "shop.example");
    assert_eq!(violation["method"], "GET");
    assert_eq!(violation["path"], "/private");
    assert_eq!(violation["path_received"], "/private");
    assert_eq!(violation["client"], "203.0.113.9");
    assert_eq!(violation["client_prefix"], "203.0.113.9/32");
    assert_eq!(violation["user_agent"], GPTBOT);
    assert_eq!(violation["crawler"], "GPTBot");
    assert!(violation["purposes"]
        .as_array()
        .is_some_and(|p| !p.is_empty()));
    assert_eq!(violation["verification"]["verdict"], "unverified");
    assert_eq!(violation["decision"], "blocked");
    assert_eq!(violation["status"], 403);
    assert_eq!(
        violation["rule"],
        serde_json::json!({"line": 2, "text": "Disallow: /private", "agents": ["GPTBot"]})
    );
    assert_eq!(violation["robots"]["outcome"], "ok");
    assert_eq!(violation["read_robots"], serde_json::Value::Null);
    assert_eq!(violation["strikes"], serde_json::Value::Null);
    let time = violation["time"].as_str().expect("a time");
    // RFC 3339 with milliseconds, in UTC: 2026-05-01T12:00:00.123Z.
    assert_eq!(
        (time.len(), &time[19..20], &time[23..]),
        (24, ".", "Z"),
        "{time}"
    );
    let sha = violation["robots"]["sha256"].as_str().expect("a sha256");
    assert_eq!(sha.len(), 64);
    assert!(place.dir().join("robots").join(sha).is_file());
    // The second violation earned the ban; the banned address's next request is a refusal.
    assert_eq!(records[1]["strikes"], 2);
    assert_eq!(records[1]["prev"].as_str().map(str::len), Some(64));
    assert_eq!(records[2]["decision"], "banned");
    assert_eq!(records[2]["status"], 403);
    assert_eq!(records[3]["origin"], "pay");
    assert_eq!(records[3]["decision"], "payment_required");
    assert_eq!(records[3]["status"], 402);
    // The export verifies, from the admin endpoint alone.
    let out = tempfile::tempdir().expect("a temp dir");
    let exported = download(&proxy, "", out.path());
    assert_eq!(exported, lines);
    let (code, text) = verify(out.path(), "evidence.jsonl", &["--complete"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("4 records: 4 signatures valid, 3 links checked, 0 gaps"),
        "{text}"
    );
    assert!(
        text.contains("3 rule lines and 3 verdicts re-checked"),
        "{text}"
    );
    // A selection by crawler and origin has its gaps counted, not failed.
    let selected = proxy.admin_get("/evidence?origin=pay&crawler=gptbot");
    assert_eq!(selected.text().lines().count(), 1);
    assert_eq!(proxy.admin_get("/evidence?since=nonsense").status, 400);
    assert_eq!(proxy.admin_get("/evidence/robots/..%2Fkey.pem").status, 400);
    // The bundle for one origin and crawler: the records, their copy, the key and a README,
    // in a tar.gz that tar reads and whose records verify as they are.
    let bundle = out.path().join("gptbot.tar.gz");
    let (code, text) = evidence(&[
        "bundle",
        "--origin",
        "shop",
        "--crawler",
        "GPTBot",
        "--since",
        "1h",
        "--dir",
        place.dir().to_str().expect("utf-8"),
        "-o",
        bundle.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("3 records, 1 robots.txt copies"), "{text}");
    let unpacked = out.path().join("unpacked");
    std::fs::create_dir_all(&unpacked).expect("dir");
    let tar = Command::new("tar")
        .arg("xzf")
        .arg(&bundle)
        .arg("-C")
        .arg(&unpacked)
        .output()
        .expect("tar runs");
    assert!(tar.status.success(), "{tar:?}");
    assert!(std::fs::read_to_string(unpacked.join("README.md"))
        .is_ok_and(|readme| readme.contains("robotsguard evidence verify")));
    assert!(unpacked.join("robots").join(sha).is_file());
    let bundled = unpacked.join("evidence.jsonl");
    let (code, text) = evidence(&["verify", bundled.to_str().expect("utf-8"), "--complete"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("3 records: 3 signatures valid, 2 links checked"),
        "{text}"
    );
    let written = proxy.wait_metric(
        "robotsguard_evidence_records_total",
        &[("result", "written")],
        4.0,
    );
    assert_eq!(written, 4.0);
    let metrics = proxy.metrics();
    assert_eq!(
        metric(
            &metrics,
            "robotsguard_evidence_records_total",
            &[("result", "dropped")]
        ),
        0.0
    );
}

#[test]
fn a_changed_record_a_deleted_record_or_an_edited_robots_copy_fails_naming_the_record() {
    let origin = Origin::start();
    let place = Place::new();
    let proxy = place.start(&origin, "");
    script(&proxy);
    assert_eq!(wait_records(&place.dir(), 4).len(), 4);
    let out = tempfile::tempdir().expect("a temp dir");
    download(&proxy, "", out.path());
    let file = out.path().join("evidence.jsonl");
    let original = std::fs::read_to_string(&file).expect("readable");
    // One byte of the second record flipped.
    rewrite(&file, |lines| {
        lines[1] = lines[1].replacen("/private/x", "/private/y", 1)
    });
    let (code, text) = verify(out.path(), "evidence.jsonl", &[]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("record r1-2: the signature does not verify"),
        "{text}"
    );
    // The third record deleted: a gap no selection declared, which fails naming the record
    // after it, with or without --complete.
    std::fs::write(&file, &original).expect("written");
    rewrite(&file, |lines| {
        lines.remove(2);
    });
    for flags in [&[][..], &["--complete"][..]] {
        let (code, text) = verify(out.path(), "evidence.jsonl", flags);
        assert_eq!(code, 1, "{text}");
        assert!(
            text.contains("FAILED line 3, record r1-4: 1 record(s) of its chain missing before it"),
            "{text}"
        );
    }
    // The same record left out by a selection that declares it (as `GET /evidence` with a
    // filter does): a gap counted, failed only with --complete.
    std::fs::write(&file, &original).expect("written");
    rewrite(&file, |lines| {
        let replica = serde_json::from_str::<serde_json::Value>(&lines[2]).expect("a record")
            ["replica"]
            .as_str()
            .expect("a replica")
            .to_string();
        lines[2] = serde_json::json!({"left_out": {"replica": replica, "after": 2, "before": 4}})
            .to_string();
    });
    let (code, text) = verify(out.path(), "evidence.jsonl", &[]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("gap: line 4, record r1-4: 1 record(s) of chain"),
        "{text}"
    );
    let (code, text) = verify(out.path(), "evidence.jsonl", &["--complete"]);
    assert_eq!(code, 1, "{text}");
    // A record put back in another's place breaks the link after it.
    std::fs::write(&file, &original).expect("written");
    rewrite(&file, |lines| lines.swap(1, 2));
    let (code, text) = verify(out.path(), "evidence.jsonl", &[]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("record r1-2: out of order"), "{text}");
    // The stored robots.txt copy edited.
    std::fs::write(&file, &original).expect("written");
    let sha = json(original.lines().next().expect("a record"))["robots"]["sha256"]
        .as_str()
        .expect("a sha256")
        .to_string();
    let copy = out.path().join("robots").join(&sha);
    std::fs::write(&copy, ROBOTS.replace("/private", "/privatE")).expect("written");
    let (code, text) = verify(out.path(), "evidence.jsonl", &[]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(&format!(
            "record r1-1: the stored robots.txt copy {sha} does not hash to its name"
        )),
        "{text}"
    );
    // Another key does not verify anything.
    std::fs::write(&copy, ROBOTS).expect("written");
    let other = out.path().join("other.pem");
    std::fs::write(&other, pem_key()).expect("written");
    let file_arg = file.to_str().expect("utf-8");
    let (code, text) = evidence(&["verify", file_arg, "--key", other.to_str().expect("utf-8")]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("0 signatures valid"), "{text}");
    let (code, text) = verify(out.path(), "evidence.jsonl", &["--complete"]);
    assert_eq!(code, 0, "{text}");
}

#[test]
fn files_rotate_by_size_the_chain_goes_on_across_restarts_and_old_files_are_pruned() {
    let origin = Origin::start();
    let place = Place::new();
    std::fs::create_dir_all(place.dir()).expect("dir");
    // A file older than the retention, of a replica long gone: pruned at start.
    let old = place.dir().join("gone-000000000001.jsonl");
    std::fs::write(&old, "{}\n").expect("written");
    let long_ago = std::time::SystemTime::now() - Duration::from_secs(3 * 24 * 60 * 60);
    std::fs::File::options()
        .append(true)
        .open(&old)
        .and_then(|f| f.set_modified(long_ago))
        .expect("mtime set");
    let extra = ", max_file_size: 64KiB, retention: 1d";
    let long_ua = format!("{GPTBOT} {}", "x".repeat(900));
    let mut proxy = place.start(&origin, extra);
    for i in 0..60 {
        let client = format!("198.51.100.{}", i + 1);
        let path = format!("/private/{i}");
        assert_eq!(
            from(&proxy, "shop.example", &client, &path, &long_ua).status,
            403
        );
    }
    let lines = wait_records(&place.dir(), 60);
    assert_eq!(lines.len(), 60);
    assert!(!old.exists(), "the old file was not pruned");
    let files: Vec<PathBuf> = std::fs::read_dir(place.dir())
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    assert!(files.len() >= 2, "no rotation: {files:?}");
    for file in &files {
        let size = std::fs::metadata(file).expect("metadata").len();
        assert!(size <= 64 * 1024, "{} is {size} bytes", file.display());
    }
    // A restart goes on with the chain where it stopped.
    drop(proxy);
    proxy = place.start(&origin, extra);
    assert_eq!(
        from(&proxy, "shop.example", "192.0.2.1", "/private", GPTBOT).status,
        403
    );
    let lines = wait_records(&place.dir(), 61);
    assert_eq!(lines.len(), 61);
    assert_eq!(json(&lines[60])["id"], "r1-61");
    let out = tempfile::tempdir().expect("a temp dir");
    download(&proxy, "", out.path());
    let (code, text) = verify(out.path(), "evidence.jsonl", &["--complete"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("61 records: 61 signatures valid, 60 links checked, 0 gaps"),
        "{text}"
    );
}

#[test]
fn hostile_user_agents_and_paths_are_recorded_bounded_and_escaped() {
    let origin = Origin::start();
    let place = Place::new();
    let proxy = place.start(&origin, "");
    // 8 KB of User-Agent with bytes that are not UTF-8, a tab, quotes and backslashes; a
    // path with escaped control characters, a line separator and a quote (raw bytes that are
    // not UTF-8 in a target never reach the judgment: the HTTP layer answers 400).
    let mut ua = b"GPTBot/1.2 \"quoted\" \\ \t\xff\xfe".to_vec();
    // Up to the proxy's own bound on a User-Agent (8 KB; beyond it, 431).
    ua.extend(std::iter::repeat_n(b'A', 8000 - ua.len()));
    let mut request = b"GET /private/%0a%00%e2%80%a8\\\"x HTTP/1.1\r\nHost: shop.example\r\nX-Forwarded-For: 203.0.113.40\r\nUser-Agent: ".to_vec();
    request.extend_from_slice(&ua);
    request.extend_from_slice(b"\r\nConnection: close\r\n\r\n");
    let answer = proxy.raw(&request).expect("an answer");
    assert_eq!(answer.status, 403, "{}", answer.text());
    let lines = wait_records(&place.dir(), 1);
    assert_eq!(lines.len(), 1);
    let line = &lines[0];
    assert!(line.len() < 4 * 1024, "{} bytes", line.len());
    assert!(
        !line.bytes().any(|b| b < 0x20),
        "a control byte in the line"
    );
    let record = json(line);
    let recorded = record["user_agent"].as_str().expect("a string");
    assert!(
        recorded.starts_with("GPTBot/1.2 \"quoted\" \\\\ \\x09\\xff\\xfe"),
        "{recorded}"
    );
    assert!(
        recorded.ends_with(&format!("... ({} bytes)", ua.len())),
        "{recorded}"
    );
    assert_eq!(record["path_received"], "/private/%0a%00%e2%80%a8\\\\\"x");
    assert!(record["path"]
        .as_str()
        .is_some_and(|p| p.starts_with("/private/")));
    let out = tempfile::tempdir().expect("a temp dir");
    download(&proxy, "", out.path());
    let (code, text) = verify(out.path(), "evidence.jsonl", &["--complete"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("1 rule lines and 1 verdicts"), "{text}");
}

#[test]
fn a_missing_or_malformed_key_is_refused_by_validate_and_serve_alike() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let seed = dir.path().join("seed.b64");
    // A raw 32-byte seed in base64 is a key too.
    std::fs::write(&seed, "nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A=\n").expect("written");
    let bad = dir.path().join("bad.pem");
    std::fs::write(
        &bad,
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    )
    .expect("written");
    let short = dir.path().join("short.b64");
    std::fs::write(&short, "AAAA").expect("written");
    let missing = dir.path().join("missing.pem");
    let run = |what: &str, key: &Path| -> (i32, String) {
        let config = dir.path().join(format!("{what}.yaml"));
        std::fs::write(
            &config,
            format!(
                "listen: [\"127.0.0.1:{}\"]\nadmin: \"127.0.0.1:{}\"\n\
                 evidence: {{enabled: true, key_file: \"{}\", dir: \"{}\"}}\n\
                 origins:\n  - {{name: shop, hosts: [shop.example], upstream: \"127.0.0.1:9\"}}\n",
                support::free_port(),
                support::free_port(),
                key.display(),
                dir.path().join("evidence").display()
            ),
        )
        .expect("written");
        let output = Command::new(env!("CARGO_BIN_EXE_robotsguard"))
            .arg(what)
            .arg("--config")
            .arg(&config)
            .output()
            .expect("robotsguard runs");
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    assert_eq!(run("validate", &seed).0, 0);
    for key in [&bad, &short, &missing] {
        let (code, validate) = run("validate", key);
        assert_eq!(code, 1, "{validate}");
        assert!(validate.contains("evidence: key file"), "{validate}");
        let (code, serve) = run("serve", key);
        assert_ne!(code, 0, "{serve}");
        assert!(serve.contains("evidence: key file"), "{serve}");
    }
    // Enabled without a key: an error at the section's position.
    let config = dir.path().join("nokey.yaml");
    std::fs::write(
        &config,
        "evidence:\n  enabled: true\norigins:\n  - {name: shop, hosts: [shop.example], upstream: \"127.0.0.1:9\"}\n",
    )
    .expect("written");
    let output = Command::new(env!("CARGO_BIN_EXE_robotsguard"))
        .args(["validate", "--config"])
        .arg(&config)
        .output()
        .expect("robotsguard runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("nokey.yaml:2:3") && stderr.contains("evidence.key_file"),
        "{stderr}"
    );
}

#[test]
fn a_refused_crawler_s_record_says_how_its_claim_was_checked() {
    let origin = Origin::start();
    let place = Place::new();
    // ListedBot's range list is a file: a claim from 198.51.100.200 is verified by it, one
    // from elsewhere is an impostor; neither is looked up in DNS.
    let body = body(&origin, &place.key(), &place.dir(), "").replacen(
        "origins:",
        "crawlers:\n  extra:\n    - {name: ListedBot, tokens: [listedbot], pattern: ListedBot, category: ai-training, verify: {ips: [\"file:ranges/listed.json\"]}}\norigins:",
        1,
    );
    let proxy = Proxy::builder(&body)
        .files(&[("ranges/listed.json", r#"["198.51.100.200"]"#)])
        .start();
    // The entry as the list is known: its path made absolute.
    let list = format!("file:{}/ranges/listed.json", proxy.dir.path().display());
    let loaded = (0..200).any(|_| {
        let ok = metric(
            &proxy.metrics(),
            "robotsguard_crawler_range_list_loaded",
            &[("list", &list)],
        ) >= 1.0;
        if !ok {
            std::thread::sleep(Duration::from_millis(50));
        }
        ok
    });
    assert!(loaded, "the range list did not load");
    let ua = "Mozilla/5.0 (compatible; ListedBot/1.0)";
    assert_eq!(
        from(&proxy, "shop.example", "198.51.100.200", "/cart", ua).status,
        403
    );
    assert_eq!(
        from(&proxy, "shop.example", "203.0.113.77", "/cart", ua).status,
        403
    );
    let lines = wait_records(&place.dir(), 2);
    assert_eq!(lines.len(), 2);
    let verified = json(&lines[0]);
    assert_eq!(
        verified["verification"]["verdict"], "verified",
        "{verified}"
    );
    assert_eq!(verified["verification"]["method"], "range_list");
    assert_eq!(verified["verification"]["list"], list);
    assert!(
        verified["verification"]["list_fetched_at"].is_string(),
        "{verified}"
    );
    let other = json(&lines[1]);
    assert_eq!(other["verification"]["verdict"], "impostor", "{other}");
    assert_eq!(other["verification"]["method"], serde_json::Value::Null);
    assert_eq!(other["rule"]["agents"], serde_json::json!(["*"]));
}

#[test]
fn a_rotated_directory_streams_whole_to_a_token_holder_and_verifies() {
    const ADMIN: &str = "admin-token-for-evidence";
    const READ: &str = "read-token-for-evidence";
    let origin = Origin::start();
    let place = Place::new();
    let config = body(
        &origin,
        &place.key(),
        &place.dir(),
        ", max_file_size: 64KiB",
    );
    let proxy = Proxy::builder(&config)
        .admin_token(ADMIN)
        .read_token(READ)
        .start();
    // Long User-Agents make each record about 2 KB: 120 of them fill several files and take
    // several pieces of the chunked answer.
    let long_ua = format!("{GPTBOT} {}", "y".repeat(1500));
    for i in 0..120 {
        let client = format!("198.51.100.{}", i + 1);
        assert_eq!(
            from(
                &proxy,
                "shop.example",
                &client,
                &format!("/private/{i}"),
                &long_ua
            )
            .status,
            403
        );
    }
    let lines = wait_records(&place.dir(), 120);
    assert_eq!(lines.len(), 120);
    let files = std::fs::read_dir(place.dir())
        .expect("dir")
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|e| e == "jsonl"))
        .count();
    assert!(files >= 3, "{files} files");
    let with_token = |token: &str, target: &str| {
        support::Conn::open(proxy.admin).send(
            &Request::get(target)
                .host(&proxy.admin.to_string())
                .header("Authorization", &format!("Bearer {token}")),
        )
    };
    // The same access as every admin path: no token, no records.
    let refused = proxy.admin_get("/evidence");
    assert_eq!(refused.status, 401, "{}", refused.text());
    assert!(!refused.text().contains("\"sig\""));
    let export = with_token(READ, "/evidence");
    assert_eq!(export.status, 200, "{}", export.text());
    assert_eq!(export.header("content-type"), Some("application/jsonl"));
    assert!(
        export
            .header("transfer-encoding")
            .is_some_and(|t| t.contains("chunked")),
        "not streamed: {:?}",
        export.headers
    );
    assert_eq!(export.header("content-length"), None);
    let exported: Vec<String> = export.text().lines().map(str::to_string).collect();
    assert_eq!(exported, lines);
    let out = tempfile::tempdir().expect("a temp dir");
    std::fs::create_dir_all(out.path().join("robots")).expect("dir");
    std::fs::write(out.path().join("evidence.jsonl"), &export.body).expect("written");
    let key = with_token(ADMIN, "/evidence/key");
    assert_eq!(key.status, 200);
    std::fs::write(out.path().join("key.jwk"), &key.body).expect("written");
    let sha = json(&lines[0])["robots"]["sha256"]
        .as_str()
        .expect("a sha256")
        .to_string();
    let copy = with_token(READ, &format!("/evidence/robots/{sha}"));
    assert_eq!(copy.status, 200);
    std::fs::write(out.path().join("robots").join(&sha), &copy.body).expect("written");
    let (code, text) = verify(out.path(), "evidence.jsonl", &["--complete"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("120 records: 120 signatures valid, 119 links checked, 0 gaps"),
        "{text}"
    );
    // A filtered export streams with the same semantics: the records of some clients, the
    // runs left out between them declared.
    let selected = with_token(READ, "/evidence?crawler=GPTBot&origin=shop");
    assert_eq!(selected.status, 200);
    assert_eq!(selected.text().lines().count(), 120);
    let nothing = with_token(READ, "/evidence?origin=pay");
    assert_eq!(nothing.status, 200);
    assert!(nothing.body.is_empty(), "{}", nothing.text());
    // A client that goes away mid-export leaves the listener answering: the next export is
    // whole again.
    {
        use std::io::{Read as _, Write as _};
        let mut stream = std::net::TcpStream::connect(proxy.admin).expect("connects");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout set");
        write!(
            stream,
            "GET /evidence HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {READ}\r\n\r\n",
            proxy.admin
        )
        .expect("written");
        let mut first = [0_u8; 4096];
        let read = stream.read(&mut first).expect("an answer begins");
        assert!(read > 0);
    }
    let again = with_token(READ, "/evidence");
    assert_eq!(again.status, 200);
    assert_eq!(again.text().lines().count(), 120);
}
