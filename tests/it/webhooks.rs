//! Webhooks (`events.webhooks`) through the real proxy to a real receiver on loopback: signed
//! events for a ban, its lift, a failing robots.txt fetch and an impostor surge, each retried
//! under the same event id after a 500; a receiver that hangs while requests go on being
//! answered; one that always fails, one that redirects; and a private target `validate` refuses.

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use support::{metric, Origin, Proxy, Request, GPTBOT};

const SECRET_FILE_TEXT: &str = "a webhook key with spaces \n";
/// What signs: the file less its trailing newline (the space before it stays).
const KEY: &[u8] = b"a webhook key with spaces ";

/// How the receiver answers.
#[derive(Clone, Copy, PartialEq)]
enum Behaviour {
    /// 500 to an event id's first attempt, 200 to the next.
    FailFirst,
    Always500,
    Redirect,
    /// Reads the request and never answers.
    Hang,
}

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Delivery {
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Delivery {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_default()
    }
}

/// A webhook receiver on 127.0.0.1:0, recording every request.
struct Receiver {
    addr: SocketAddr,
    got: Arc<Mutex<Vec<Delivery>>>,
    /// Connections accepted and still held by a hanging receiver.
    held: Arc<AtomicUsize>,
}

impl Receiver {
    fn start(behaviour: Behaviour) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("receiver binds");
        let addr = listener.local_addr().expect("receiver address");
        let got = Arc::new(Mutex::new(Vec::new()));
        let held = Arc::new(AtomicUsize::new(0));
        {
            let got = got.clone();
            let held = held.clone();
            thread::spawn(move || {
                for stream in listener.incoming().take(10_000) {
                    let Ok(stream) = stream else { continue };
                    let got = got.clone();
                    let held = held.clone();
                    thread::spawn(move || serve(stream, behaviour, &got, &held));
                }
            });
        }
        Receiver { addr, got, held }
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    fn deliveries(&self) -> Vec<Delivery> {
        self.got.lock().map(|g| g.clone()).unwrap_or_default()
    }

    /// Waits (at most `within`) until `done` holds for what was received.
    fn wait(&self, within: Duration, done: impl Fn(&[Delivery]) -> bool) -> Vec<Delivery> {
        let deadline = Instant::now() + within;
        loop {
            let got = self.deliveries();
            if done(&got) || Instant::now() > deadline {
                return got;
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
}

fn serve(stream: TcpStream, behaviour: Behaviour, got: &Mutex<Vec<Delivery>>, held: &AtomicUsize) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(stream);
    // Keep-alive: requests one after another on the connection, at most 100.
    for _ in 0..100 {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut headers = Vec::new();
        for _ in 0..100 {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
            }
        }
        let length: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length.min(1 << 20)];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let delivery = Delivery { headers, body };
        let id = delivery.header("x-robotsguard-event-id").map(str::to_owned);
        let seen = {
            let mut got = got.lock().expect("lock");
            let seen = got
                .iter()
                .any(|d| d.header("x-robotsguard-event-id").map(str::to_owned) == id);
            got.push(delivery);
            seen
        };
        let answer = match behaviour {
            Behaviour::Hang => {
                held.fetch_add(1, Ordering::SeqCst);
                // Held until the proxy gives up (its timeout) or the test ends.
                let mut rest = [0u8; 1];
                let _ = reader.read(&mut rest);
                held.fetch_sub(1, Ordering::SeqCst);
                return;
            }
            Behaviour::FailFirst if !seen => "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n",
            Behaviour::FailFirst => "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
            Behaviour::Always500 => "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n",
            Behaviour::Redirect => "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://127.0.0.1:1/elsewhere\r\ncontent-length: 0\r\n\r\n",
        };
        if reader.get_mut().write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

fn expected_signature(body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(KEY).expect("any key length");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// `kind`'s deliveries.
fn of_kind<'a>(got: &'a [Delivery], kind: &str) -> Vec<&'a Delivery> {
    got.iter().filter(|d| d.json()["kind"] == kind).collect()
}

/// An event of `kind` that was tried twice under one id (500, then 200).
fn retried(got: &[Delivery], kind: &str) -> bool {
    let deliveries = of_kind(got, kind);
    deliveries.iter().any(|first| {
        deliveries
            .iter()
            .filter(|d| {
                d.header("x-robotsguard-event-id") == first.header("x-robotsguard-event-id")
            })
            .count()
            >= 2
    })
}

fn config(receiver_url: &str, origin: &Origin, broken: &Origin, hook_extra: &str) -> String {
    format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n\
         events:\n  private_targets: [\"127.0.0.0/8\"]\n  impostor_surge_per_minute: 3\n  \
         webhooks:\n    - {{url: \"{receiver_url}\", secret_file: hook.secret{hook_extra}}}\n\
         crawlers:\n  extra:\n    - {{name: ListedBot, pattern: ListedBot, category: ai-training, verify: {{ips: [\"file:listed.json\"]}}}}\n\
         origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    \
         robots: {{source: inline, text: \"User-agent: GPTBot\\nDisallow: /private\\n\"}}\n    \
         offenders: {{action: ban, scope: address, strikes: 2, window: 1m, ban: 1h}}\n  \
         - name: broken\n    hosts: [\"broken.example\"]\n    upstream: \"{}\"\n    \
         robots: {{source: origin, refresh: 1s}}\n",
        origin.addr(),
        broken.addr()
    )
}

fn start(receiver_url: &str, origin: &Origin, broken: &Origin, hook_extra: &str) -> Proxy {
    Proxy::builder(&config(receiver_url, origin, broken, hook_extra))
        .files(&[
            ("hook.secret", SECRET_FILE_TEXT),
            (
                "listed.json",
                r#"{"prefixes": [{"ipv4Prefix": "198.51.100.0/24"}]}"#,
            ),
        ])
        .unready()
        .start()
}

fn from(proxy: &Proxy, client: &str, path: &str, user_agent: &str) -> u16 {
    proxy
        .send(
            &Request::get(path)
                .host("shop.example")
                .ua(user_agent)
                .header("X-Forwarded-For", client),
        )
        .status
}

fn ban(proxy: &Proxy, client: &str) {
    for n in 0..2 {
        from(proxy, client, &format!("/private/{n}"), GPTBOT);
    }
}

#[test]
fn a_receiver_gets_signed_retried_events_for_a_ban_its_lift_a_failing_fetch_and_a_surge() {
    let receiver = Receiver::start(Behaviour::FailFirst);
    let origin = Origin::start();
    let broken = Origin::start();
    broken.robots(500, "down");
    let proxy = start(
        &receiver.url(),
        &origin,
        &broken,
        ", timeout: 2s, retries: 3",
    );

    ban(&proxy, "203.0.113.44");
    assert_eq!(from(&proxy, "203.0.113.44", "/page", GPTBOT), 403, "banned");
    let lift = Request::new("DELETE", "/bans?origin=shop&client=203.0.113.44")
        .host(&proxy.admin.to_string());
    assert_eq!(support::Conn::open(proxy.admin).send(&lift).status, 200);

    // The claim is checked against the list once it is loaded.
    let deadline = Instant::now() + Duration::from_secs(20);
    while proxy
        .explain_from("shop.example", "ListedBot/1.0", "/", "203.0.113.9")
        .1["verification"]["result"]
        != "impostor"
    {
        assert!(Instant::now() < deadline, "the range list never loaded");
        thread::sleep(Duration::from_millis(100));
    }
    for n in 0..5 {
        assert_eq!(
            from(&proxy, "203.0.113.9", &format!("/p/{n}"), "ListedBot/1.0"),
            403
        );
    }

    let kinds = ["ban", "unban", "robots_fetch_failing", "impostor_surge"];
    let got = receiver.wait(Duration::from_secs(40), |got| {
        kinds.iter().all(|k| retried(got, k))
    });
    for kind in kinds {
        assert!(
            retried(&got, kind),
            "{kind} not delivered twice under one id: {got:#?}"
        );
    }
    for delivery in &got {
        assert_eq!(
            delivery.header("x-robotsguard-signature"),
            Some(expected_signature(&delivery.body).as_str()),
            "{delivery:?}"
        );
        assert_eq!(delivery.header("content-type"), Some("application/json"));
        let body = delivery.json();
        assert!(
            body["time"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{body}"
        );
    }
    let ban = of_kind(&got, "ban")[0].json();
    assert_eq!(ban["origin"], "shop");
    assert_eq!(ban["client"], "203.0.113.44");
    assert_eq!(ban["crawler"], "GPTBot");
    assert_eq!(ban["count"], 2);
    let unban = of_kind(&got, "unban")[0].json();
    assert_eq!(unban["client"], "203.0.113.44");
    let failing = of_kind(&got, "robots_fetch_failing")[0].json();
    assert_eq!(failing["origin"], "broken");
    assert_eq!(failing["count"], 3);
    let surge = of_kind(&got, "impostor_surge")[0].json();
    assert_eq!(surge["origin"], "shop");
    assert_eq!(surge["crawler"], "ListedBot");
    // One surge for the minute, however many impostors follow.
    let surges: std::collections::HashSet<_> = of_kind(&got, "impostor_surge")
        .iter()
        .filter_map(|d| d.header("x-robotsguard-event-id").map(str::to_owned))
        .collect();
    assert_eq!(surges.len(), 1);
    // Counted once the answer is read, which may be just after the receiver recorded it.
    assert!(wait_result(&proxy, "delivered", 4.0) >= 4.0);
    assert!(wait_result(&proxy, "retried", 4.0) >= 4.0);
}

#[test]
fn a_hanging_receiver_never_holds_up_requests() {
    let receiver = Receiver::start(Behaviour::Hang);
    let origin = Origin::start();
    let broken = Origin::start();
    let proxy = start(
        &receiver.url(),
        &origin,
        &broken,
        ", timeout: 30s, retries: 5",
    );
    // The first ban's delivery hangs: the receiver holds its connection.
    ban(&proxy, "203.0.113.1");
    let deadline = Instant::now() + Duration::from_secs(20);
    while receiver.held.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the receiver got nothing");
        thread::sleep(Duration::from_millis(50));
    }
    // While it hangs, every request is answered, each ban making another event.
    for n in 2..60 {
        let client = format!("203.0.113.{n}");
        ban(&proxy, &client);
        assert_eq!(from(&proxy, &client, "/page", GPTBOT), 403);
        assert_eq!(from(&proxy, &client, "/robots.txt", GPTBOT), 200);
    }
    assert!(receiver.held.load(Ordering::SeqCst) >= 1, "still hanging");
    let metrics = proxy.metrics();
    assert_eq!(
        metric(
            &metrics,
            "robotsguard_webhook_events_total",
            &[("result", "delivered")]
        ),
        0.0
    );
}

#[test]
fn a_failing_receiver_is_retried_then_given_up_and_a_redirect_is_not_followed() {
    let failing = Receiver::start(Behaviour::Always500);
    let origin = Origin::start();
    let broken = Origin::start();
    let proxy = start(
        &failing.url(),
        &origin,
        &broken,
        ", timeout: 2s, retries: 2, events: [ban]",
    );
    ban(&proxy, "203.0.113.7");
    assert_eq!(wait_result(&proxy, "failed", 1.0), 1.0);
    let got = failing.deliveries();
    assert_eq!(got.len(), 3, "the first attempt and two retries: {got:#?}");
    assert!(got
        .iter()
        .all(|d| d.header("x-robotsguard-event-id") == got[0].header("x-robotsguard-event-id")));
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_webhook_events_total",
            &[("result", "retried")]
        ),
        2.0
    );
    drop(proxy);

    let redirecting = Receiver::start(Behaviour::Redirect);
    let proxy = start(
        &redirecting.url(),
        &origin,
        &broken,
        ", timeout: 2s, retries: 3, events: [ban]",
    );
    ban(&proxy, "203.0.113.8");
    assert_eq!(wait_result(&proxy, "refused", 1.0), 1.0);
    assert_eq!(
        redirecting.deliveries().len(),
        1,
        "a redirect is neither followed nor retried"
    );
}

/// `robotsguard_webhook_events_total{result}` once it is at least `want` (waiting at most 30 s:
/// the retries back off 1 s, then 2 s).
fn wait_result(proxy: &Proxy, result: &str, want: f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let value = metric(
            &proxy.metrics(),
            "robotsguard_webhook_events_total",
            &[("result", result)],
        );
        if value >= want || Instant::now() > deadline {
            return value;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// `validate` on `config` (with a secret file beside it): its exit code and stderr.
fn validate(config: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("hook.secret"), SECRET_FILE_TEXT).expect("secret written");
    let path = dir.path().join("robotsguard.yaml");
    std::fs::write(&path, config).expect("config written");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_robotsguard"))
        .arg("validate")
        .arg("--config")
        .arg(&path)
        .output()
        .expect("robotsguard runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn validate_refuses_a_private_target_not_listed_and_plain_http_to_a_public_one() {
    let origin =
        "origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:1\"\n";
    let with = |events: &str| format!("events:\n{events}{origin}");
    let (code, stderr) = validate(&with(
        "  webhooks:\n    - {url: \"http://10.1.2.3/hook\", secret_file: hook.secret}\n",
    ));
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("robotsguard.yaml:3:"), "{stderr}");
    assert!(stderr.contains("private address (10.1.2.3)"), "{stderr}");
    assert!(stderr.contains("events.private_targets"), "{stderr}");
    let (code, stderr) = validate(&with(
        "  private_targets: [\"10.0.0.0/8\"]\n  webhooks:\n    - {url: \"http://10.1.2.3/hook\", secret_file: hook.secret}\n",
    ));
    assert_eq!(code, Some(0), "{stderr}");
    let (code, stderr) = validate(&with(
        "  webhooks:\n    - {url: \"http://hooks.example.com/x\", secret_file: hook.secret}\n",
    ));
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("plain http"), "{stderr}");
    let (code, stderr) = validate(&with(
        "  webhooks:\n    - {url: \"https://[::1]/x\", secret_file: missing.secret}\n",
    ));
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("private address"), "{stderr}");
    let (code, stderr) = validate(&with("  private_targets: [\"10.0.0.1/8\"]\n"));
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("did you mean 10.0.0.0/8"), "{stderr}");
}

#[test]
fn a_config_refusing_a_search_engine_and_a_rejected_reload_are_told() {
    let receiver = Receiver::start(Behaviour::FailFirst);
    let origin = Origin::start();
    let body = format!(
        "events:\n  private_targets: [\"127.0.0.0/8\"]\n  webhooks:\n    - {{url: \"{}\", secret_file: hook.secret, timeout: 2s, events: [search_engine_refused, config_rejected]}}\n\
         origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    \
         robots: {{source: inline, text: \"User-agent: *\\nAllow: /\\n\"}}\n    \
         policy: {{crawlers: {{Googlebot: block}}}}\n",
        receiver.url(),
        origin.addr()
    );
    let proxy = Proxy::builder(&body)
        .files(&[("hook.secret", SECRET_FILE_TEXT)])
        .start();
    let got = receiver.wait(Duration::from_secs(30), |got| {
        retried(got, "search_engine_refused")
    });
    let refused = of_kind(&got, "search_engine_refused");
    assert!(!refused.is_empty(), "{got:#?}");
    let text = refused[0].json()["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(text.contains("Googlebot"), "{text}");

    proxy.replace_config(
        &proxy.config_text(&format!("{body}  - name: broken\n    hosts: oops: [\n")),
    );
    let got = receiver.wait(Duration::from_secs(30), |got| {
        retried(got, "config_rejected")
    });
    let rejected = of_kind(&got, "config_rejected");
    assert!(!rejected.is_empty(), "{got:#?}\n{}", proxy.stderr());
    let body = rejected[0].json();
    assert!(body["origin"].is_null(), "{body}");
    assert!(
        body["reason"]
            .as_str()
            .is_some_and(|r| r.contains("robotsguard.yaml:")),
        "{body}"
    );
    for delivery in &got {
        assert_eq!(
            delivery.header("x-robotsguard-signature"),
            Some(expected_signature(&delivery.body).as_str())
        );
    }
}
