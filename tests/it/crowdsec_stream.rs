//! The CrowdSec-compatible decision stream of the admin listener (`/v1/decisions/stream`,
//! `/v1/decisions`): the Local API's bouncer protocol spoken to real curl (keys, per-key state,
//! what is exported, new and deleted decisions), every one of 100,000 bans in one streamed
//! `startup=true` answer, and the real `crowdsec-custom-bouncer` (Debian's package) seeing a ban
//! appear and disappear. The bouncer must be installed (`.ci/run` installs it): without it the
//! test fails, saying so.

use crate::support;

use std::path::Path;
use std::process::{Child, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use support::redis::RedisServer;
use support::{Origin, Proxy, Request, GPTBOT};

const KEY: &str = "bouncer-key-0123456789abcdef";
const OTHER_KEY: &str = "bouncer-key-fedcba9876543210";
const ADMIN_TOKEN: &str = "admin-token-0123456789abcdef";

/// Two origins: `shop` bans whole addresses (exported), `blog` bans only crawlers (not
/// exported by default: a NAT's browsers must not be dropped at the firewall).
fn config(origin: &Origin, events: &str, state: &str) -> String {
    format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n{events}{state}\
         origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{0}\"\n    \
         robots: {{source: inline, text: \"User-agent: GPTBot\\nDisallow: /private\\n\"}}\n    \
         offenders: {{action: ban, scope: address, strikes: 1, window: 1m, ban: 1h}}\n  \
         - name: blog\n    hosts: [\"blog.example\"]\n    upstream: \"{0}\"\n    \
         robots: {{source: inline, text: \"User-agent: GPTBot\\nDisallow: /private\\n\"}}\n    \
         offenders: {{action: ban, scope: crawlers, strikes: 1, window: 1m, ban: 1h}}\n",
        origin.addr()
    )
}

fn start(origin: &Origin, events: &str) -> Proxy {
    Proxy::builder(&config(origin, events, ""))
        .admin_token(ADMIN_TOKEN)
        .bouncer_keys(&format!("# the firewall\n{KEY}\n\n{OTHER_KEY}\n"))
        .start()
}

fn ban(proxy: &Proxy, host: &str, client: &str) {
    let status = proxy
        .send(
            &Request::get("/private/x")
                .host(host)
                .ua(GPTBOT)
                .header("X-Forwarded-For", client),
        )
        .status;
    assert_eq!(status, 403);
}

fn lift(proxy: &Proxy, origin: &str, client: &str) {
    let request = Request::new("DELETE", &format!("/bans?origin={origin}&client={client}"))
        .host(&proxy.admin.to_string())
        .header("Authorization", &format!("Bearer {ADMIN_TOKEN}"));
    assert_eq!(support::Conn::open(proxy.admin).send(&request).status, 200);
}

/// A GET of `target` on the admin listener by real curl with `key` (none: no header): the
/// status, the response head and the body.
fn curl(proxy: &Proxy, target: &str, key: Option<&str>) -> (u16, String, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let body_file = dir.path().join("body");
    let mut command = support::programs::command("curl");
    command
        .args(["-s", "-S", "--max-time", "120", "-D", "-", "-o"])
        .arg(&body_file)
        .arg(format!("http://{}{target}", proxy.admin));
    if let Some(key) = key {
        command.arg("-H").arg(format!("X-Api-Key: {key}"));
    }
    let output = command.output().expect("curl runs");
    let head = String::from_utf8_lossy(&output.stdout).into_owned();
    let status = head
        .lines()
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = std::fs::read_to_string(&body_file).unwrap_or_default();
    (status, head, body)
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body:.300}"))
}

fn values(list: &serde_json::Value) -> Vec<String> {
    list.as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|d| d["value"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn bouncers_get_new_and_deleted_address_bans_by_key() {
    let origin = Origin::start();
    let proxy = start(&origin, "");
    ban(&proxy, "shop.example", "203.0.113.10");
    ban(&proxy, "blog.example", "203.0.113.20");

    // The key alone: no bearer token, and the admin token is no key.
    assert_eq!(
        curl(&proxy, "/v1/decisions/stream?startup=true", None).0,
        403
    );
    assert_eq!(
        curl(
            &proxy,
            "/v1/decisions/stream?startup=true",
            Some("wrong-key-0123456789")
        )
        .0,
        403
    );
    assert_eq!(
        curl(&proxy, "/v1/decisions/stream", Some(ADMIN_TOKEN)).0,
        403
    );
    assert_eq!(
        curl(&proxy, "/bans", Some(KEY)).0,
        401,
        "a key opens only the stream"
    );

    let (status, head, body) = curl(&proxy, "/v1/decisions/stream?startup=true", Some(KEY));
    assert_eq!(status, 200, "{head}{body}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    let answer = json(&body);
    assert_eq!(
        values(&answer["new"]),
        ["203.0.113.10"],
        "the crawler-scope ban stays: {body}"
    );
    let decision = &answer["new"][0];
    assert_eq!(decision["origin"], "robotsguard");
    assert_eq!(decision["type"], "ban");
    assert_eq!(decision["scope"], "Ip");
    assert_eq!(decision["scenario"], "strikes");
    assert!(
        decision["id"].as_u64().is_some_and(|id| id > 0),
        "{decision}"
    );
    let duration = decision["duration"].as_str().unwrap_or_default();
    assert!(
        duration.starts_with("59m") || duration == "1h0m0s",
        "a Go duration: {duration}"
    );
    assert!(answer["deleted"].is_null(), "{body}");

    // Nothing new since; `startup` left out means false.
    let again = json(&curl(&proxy, "/v1/decisions/stream", Some(KEY)).2);
    assert!(
        again["new"].is_null() && again["deleted"].is_null(),
        "{again}"
    );
    // Another key has its own state: everything is new to it.
    let other = json(
        &curl(
            &proxy,
            "/v1/decisions/stream?startup=false",
            Some(OTHER_KEY),
        )
        .2,
    );
    assert_eq!(values(&other["new"]), ["203.0.113.10"]);

    // A lookup by address, as a live-mode bouncer asks.
    let found = json(&curl(&proxy, "/v1/decisions?ip=203.0.113.10", Some(KEY)).2);
    assert_eq!(values(&found), ["203.0.113.10"]);
    assert!(json(&curl(&proxy, "/v1/decisions?ip=203.0.113.99", Some(KEY)).2).is_null());
    assert_eq!(curl(&proxy, "/v1/decisions?ip=nope", Some(KEY)).0, 400);
    assert_eq!(
        curl(&proxy, "/v1/decisions/stream?startup=maybe", Some(KEY)).0,
        400
    );

    lift(&proxy, "shop", "203.0.113.10");
    let after = json(&curl(&proxy, "/v1/decisions/stream", Some(KEY)).2);
    assert!(after["new"].is_null(), "{after}");
    assert_eq!(values(&after["deleted"]), ["203.0.113.10"]);
    assert_eq!(after["deleted"][0]["id"], decision["id"]);
    let once = json(&curl(&proxy, "/v1/decisions/stream", Some(KEY)).2);
    assert!(once["deleted"].is_null(), "a deletion is sent once: {once}");

    let request = Request::get("/metrics")
        .host(&proxy.admin.to_string())
        .header("Authorization", &format!("Bearer {ADMIN_TOKEN}"));
    let metrics = support::Conn::open(proxy.admin).send(&request).text();
    assert!(
        support::metric(
            &metrics,
            "robotsguard_decision_stream_requests_total",
            &[("result", "forbidden")]
        ) >= 3.0
    );
}

#[test]
fn all_bans_exports_crawler_scope_bans_too_and_off_exports_none() {
    let origin = Origin::start();
    let proxy = start(&origin, "events: {firewall: {export: all_bans}}\n");
    ban(&proxy, "shop.example", "203.0.113.10");
    ban(&proxy, "blog.example", "203.0.113.20");
    let answer = json(&curl(&proxy, "/v1/decisions/stream?startup=true", Some(KEY)).2);
    let mut got = values(&answer["new"]);
    got.sort();
    assert_eq!(got, ["203.0.113.10", "203.0.113.20"]);
    drop(proxy);
    let proxy = start(&origin, "events: {firewall: {export: \"off\"}}\n");
    ban(&proxy, "shop.example", "203.0.113.10");
    let answer = json(&curl(&proxy, "/v1/decisions/stream?startup=true", Some(KEY)).2);
    assert!(answer["new"].is_null(), "{answer}");
}

/// The Lua that writes `count` bans on `shop` (10.x.y.z) into the store's hash as robotsguard
/// writes them (`UNTIL SINCE STRIKES CAUSE CRAWLER`, milliseconds of the server's clock), and
/// bumps the version replicas watch.
const WRITE_BANS: &str = "local t = redis.call('TIME') \
    local now = tonumber(t[1]) * 1000 \
    for i = 0, tonumber(ARGV[1]) - 1 do \
      redis.call('HSET', KEYS[1], string.format('10.%d.%d.%d shop', math.floor(i / 65536), math.floor(i / 256) % 256, i % 256), \
        string.format('%d %d 1 strikes GPTBot', now + 3600000, now)) \
    end \
    return redis.call('INCR', KEYS[2])";

#[test]
fn a_startup_pull_streams_every_one_of_100000_bans() {
    const BANS: usize = 100_000;
    let origin = Origin::start();
    let redis = RedisServer::start();
    redis.command(&[
        "EVAL",
        WRITE_BANS,
        "2",
        "rg:bans",
        "rg:bans:version",
        &BANS.to_string(),
    ]);
    let state = format!(
        "state:\n  backend: redis\n  redis: {{url: \"{}\", prefix: \"rg:\", timeout: 5s}}\n",
        redis.url()
    );
    let proxy = Proxy::builder(&config(&origin, "", &state))
        .bouncer_keys(KEY)
        .start();
    let deadline = Instant::now() + Duration::from_secs(60);
    while support::metric(
        &proxy.metrics(),
        "robotsguard_banned_clients",
        &[("origin", "shop")],
    ) < BANS as f64
    {
        assert!(
            Instant::now() < deadline,
            "the store's bans never reached the mirror"
        );
        thread::sleep(Duration::from_millis(200));
    }
    let (status, head, body) = curl(&proxy, "/v1/decisions/stream?startup=true", Some(KEY));
    assert_eq!(status, 200, "{head}");
    // Streamed in chunks, never as one body: the answer is not held whole.
    assert!(
        head.to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{head}"
    );
    let answer = json(&body);
    let new = answer["new"].as_array().map_or(0, Vec::len);
    assert_eq!(new, BANS);
    let mut distinct: Vec<&str> = answer["new"]
        .as_array()
        .map(|all| all.iter().filter_map(|d| d["value"].as_str()).collect())
        .unwrap_or_default();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), BANS);
    // And the next pull has nothing to add.
    let again = json(&curl(&proxy, "/v1/decisions/stream", Some(KEY)).2);
    assert!(again["new"].is_null(), "{:.200}", again.to_string());
}

/// The real bouncer, stopped on drop.
struct Bouncer(Child);

impl Drop for Bouncer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_bouncer(dir: &Path, admin: std::net::SocketAddr) -> Bouncer {
    let received = dir.join("received.log");
    let script = dir.join("record.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho \"$@\" >> '{}'\n", received.display()),
    )
    .expect("script written");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            .expect("script made executable");
    }
    let config = dir.join("bouncer.yaml");
    std::fs::write(
        &config,
        format!(
            "bin_path: {}\nfeed_via_stdin: false\ntotal_retries: 0\nscenarios_containing: []\n\
             scenarios_not_containing: []\norigins: []\npiddir: {}\nupdate_frequency: 1s\n\
             cache_retention_duration: 10s\ndaemonize: false\nlog_mode: stdout\nlog_level: info\n\
             api_url: http://{admin}/\napi_key: {KEY}\nprometheus:\n  enabled: false\n  \
             listen_addr: 127.0.0.1\n  listen_port: 60602\n",
            script.display(),
            dir.display()
        ),
    )
    .expect("bouncer config written");
    // Missing in CI is a failure with what to install, never a skip.
    let program = support::programs::program("crowdsec-custom-bouncer");
    let log = std::fs::File::create(dir.join("bouncer.log")).expect("bouncer log");
    let child = program
        .command()
        .arg("-c")
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log handle"))
        .stderr(log)
        .spawn()
        .expect("crowdsec-custom-bouncer starts");
    Bouncer(child)
}

/// Waits at most `within` for a line of the bouncer's script's log holding every one of `words`.
fn wait_line(dir: &Path, words: &[&str], within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let got = std::fs::read_to_string(dir.join("received.log")).unwrap_or_default();
        if got
            .lines()
            .any(|line| words.iter().all(|w| line.split(' ').any(|part| part == *w)))
        {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_real_crowdsec_custom_bouncer_sees_a_ban_appear_and_disappear() {
    let origin = Origin::start();
    let proxy = start(&origin, "");
    let dir = tempfile::tempdir().expect("temp dir");
    let _bouncer = start_bouncer(dir.path(), proxy.admin);
    ban(&proxy, "shop.example", "203.0.113.77");
    let log = || std::fs::read_to_string(dir.path().join("bouncer.log")).unwrap_or_default();
    assert!(
        wait_line(
            dir.path(),
            &["add", "203.0.113.77"],
            Duration::from_secs(15)
        ),
        "the bouncer got no ban within 15 s; its log:\n{}\nproxy:\n{}",
        log(),
        proxy.stderr()
    );
    lift(&proxy, "shop", "203.0.113.77");
    assert!(
        wait_line(
            dir.path(),
            &["del", "203.0.113.77"],
            Duration::from_secs(15)
        ),
        "the bouncer saw no deletion; its log:\n{}",
        log()
    );
}
