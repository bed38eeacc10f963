//! Catalogue feeds cannot reach inside or rewrite identity (hardening round 3): a feed served
//! over HTTP from a real local origin names range lists that are local files, plain-http URLs,
//! loopback addresses (by address and by a name resolving to one) and redirects to them — none
//! is read or fetched, and only an operator's `verify.ranges.private_origins` lets a list on a
//! private address load; its entries that would make browsers crawlers, replace or hide a
//! built-in entry are refused (counted, logged once) while the rest of the feed applies, unless
//! the operator's `may_override` lets that feed override; a feed names at most `max_lists` lists;
//! and a range list's content never starts a log line.

use crate::support;

use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use support::tls::{self, HttpsServer};
use support::{metric, Origin, Proxy, Request};

const HOST: &str = "shop.example";
const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0";
const GPTBOT: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.0; +https://openai.com/gptbot)";
const TEAM: &str = "TeamBot/2.0 (+https://team.example/bot)";
const LIST: &str = r#"{"prefixes": [{"ipv4Prefix": "192.0.2.0/28"}]}"#;

fn from(proxy: &Proxy, client: &str, path: &str, user_agent: &str) -> support::Response {
    proxy.send(
        &Request::get(path)
            .host(HOST)
            .ua(user_agent)
            .header("X-Forwarded-For", client),
    )
}

/// Polls `check` every 50 ms for at most `limit`; whether it held once.
fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// A TCP listener on loopback that counts the connections made to it (and closes each): what
/// a list URL pointing at it would cost if robotsguard connected.
struct ConnCounter {
    port: u16,
    accepted: Arc<AtomicUsize>,
}

impl ConnCounter {
    fn start() -> ConnCounter {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("non-blocking");
        let port = listener.local_addr().expect("address").port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = accepted.clone();
        thread::spawn(move || {
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(120) {
                match listener.accept() {
                    Ok(_) => {
                        counted.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(_) => thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        ConnCounter { port, accepted }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }
}

/// An https server on loopback (the test CA's certificate for 127.0.0.1 and localhost) whose
/// files are whole raw HTTP responses.
fn raw_https(files: &[(&str, String)]) -> (tempfile::TempDir, HttpsServer) {
    let (_, cert, key) = tls::trusted_server_certificate();
    let root = tempfile::tempdir().expect("temp dir");
    for (name, response) in files {
        std::fs::write(root.path().join(name), response).expect("response written");
    }
    let server = HttpsServer::start_raw(root.path(), cert, key);
    (root, server)
}

fn ok_list(body: &str) -> String {
    format!(
        "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn redirect(to: &str) -> String {
    format!("HTTP/1.0 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\n\r\n")
}

/// The config of a shop whose robots.txt disallows GPTBot everything and every crawler
/// `/private`, with the catalogue feed at `feed` (served by `origin`) and `verify` settings.
fn config(origin: &Origin, feed: &str, feed_extra: &str, verify: &str) -> String {
    format!(
        "trusted_proxies: [\"127.0.0.1/32\"]
{verify}crawlers:
  feeds:
    - {{url: \"{feed}\", format: robotsguard, refresh: 1h{feed_extra}}}
origins:
  - name: shop
    hosts: [\"{HOST}\"]
    upstream: \"{upstream}\"
    robots: {{source: inline, text: \"User-agent: GPTBot\\nDisallow: /\\n\\nUser-agent: *\\nDisallow: /private\\n\"}}
",
        upstream = origin.addr()
    )
}

fn refused(proxy: &Proxy, feed: &str, reason: &str) -> f64 {
    metric(
        &proxy.metrics(),
        "robotsguard_catalogue_feed_entries_refused",
        &[("feed", feed), ("reason", reason)],
    )
}

fn fetches(proxy: &Proxy, list: &str, outcome: &str) -> f64 {
    metric(
        &proxy.metrics(),
        "robotsguard_verify_list_fetches_total",
        &[("list", list), ("outcome", outcome)],
    )
}

/// Waits until TeamBot (the feed's honest entry) is in the catalogue, from `feed`.
fn wait_for_team(proxy: &Proxy, feed: &str) {
    let loaded = eventually(Duration::from_secs(15), || {
        let (_, explain) = proxy.explain(HOST, TEAM, "/page");
        explain["crawler"]["feed"] == feed
    });
    assert!(loaded, "the feed did not load:\n{}", proxy.stderr());
}

#[test]
fn a_remote_feed_reaches_no_file_or_inside_address_and_cannot_rewrite_identity() {
    let origin = Origin::start();
    // What the feed points at: an internal file, an internal plain-http service (the origin
    // itself), and an https port on loopback reached by address and by name.
    let secret_dir = tempfile::tempdir().expect("temp dir");
    let secret = secret_dir.path().join("passwd");
    std::fs::write(
        &secret,
        "root:x:0:0:root:/root:/bin/bash\n192.0.2.1\nFORGED line from a file\n",
    )
    .expect("secret written");
    origin.route("/inside.json", 200, LIST);
    let loopback = ConnCounter::start();
    let by_address = format!("https://127.0.0.1:{}/inside.json", loopback.port);
    let by_name = format!("https://localhost:{}/inside.json", loopback.port);
    let feed_body = format!(
        "crawlers:
  - {{name: FileBot, tokens: [filebot], pattern: FileBot, category: other, verify: {{ips: [\"file:{secret}\"]}}}}
  - {{name: PlainBot, tokens: [plainbot], pattern: PlainBot, category: other, verify: {{ips: [\"http://{upstream}/inside.json\"]}}}}
  - {{name: LoopBot, tokens: [loopbot], pattern: LoopBot, category: other, verify: {{ips: [\"{by_address}\"]}}}}
  - {{name: NameBot, tokens: [namebot], pattern: NameBot, category: other, verify: {{ips: [\"{by_name}\"]}}}}
  - {{name: Mozilla, tokens: [mozilla], pattern: Mozilla, category: ai-training}}
  - {{name: GPTBot, tokens: [gptbot-nomatch], pattern: GPTBot-nomatch, category: other, replace: true}}
  - {{name: Shadow, tokens: [shadow], pattern: \"GPTBot/1.0\", category: other}}
  - {{name: TeamBot, tokens: [teambot], pattern: TeamBot, category: ai-search}}
",
        secret = secret.display(),
        upstream = origin.addr(),
    );
    origin.route("/feed.yaml", 200, &feed_body);
    let feed = format!("http://{}/feed.yaml", origin.addr());
    let proxy = Proxy::start(&config(&origin, &feed, "", ""));
    wait_for_team(&proxy, &feed);

    // The rest of the feed applies: TeamBot is a crawler bound by robots.txt.
    assert_eq!(from(&proxy, "192.0.2.9", "/private/x", TEAM).status, 403);
    assert_eq!(from(&proxy, "192.0.2.9", "/page", TEAM).status, 200);
    // Browsers stay browsers, and GPTBot stays GPTBot (refused everywhere by robots.txt).
    assert_eq!(from(&proxy, "192.0.2.9", "/private/x", BROWSER).status, 200);
    assert_eq!(from(&proxy, "192.0.2.9", "/page", GPTBOT).status, 403);
    let (_, explain) = proxy.explain(HOST, GPTBOT, "/page");
    assert_eq!(explain["crawler"]["name"], "GPTBot", "{explain}");
    assert!(explain["crawler"]["feed"].is_null(), "{explain}");

    // Each refusal is counted by reason.
    for (reason, count) in [
        ("list_url", 2.0),
        ("browser_token", 1.0),
        ("overrides_builtin", 1.0),
        ("hides_builtin", 1.0),
        ("too_many_lists", 0.0),
    ] {
        assert_eq!(
            refused(&proxy, &feed, reason),
            count,
            "{reason}:\n{}",
            proxy.metrics()
        );
    }
    // The https lists on loopback are refused before any connection, by address and by name
    // (checked after resolution); the file is never a list, the internal service never asked.
    for list in [&by_address, &by_name] {
        assert!(
            eventually(Duration::from_secs(15), || fetches(&proxy, list, "refused")
                >= 1.0),
            "{list} was not refused:\n{}",
            proxy.metrics()
        );
    }
    assert_eq!(loopback.accepted(), 0, "a connection reached loopback");
    assert!(origin.proxied_to("/inside.json").is_empty());
    assert!(origin.received().iter().all(|r| r.target != "/inside.json"));
    let metrics = proxy.metrics();
    assert!(
        !metrics.contains(&secret.display().to_string()),
        "the file became a list:\n{metrics}"
    );
    // Claims of the lists' crawlers stay unverified, never verified by an inside answer.
    let (_, explain) = proxy.explain_from(HOST, "LoopBot/1.0", "/page", "192.0.2.5");
    assert_eq!(explain["verification"]["result"], "unverified", "{explain}");

    // One line names the refused entries; nothing of the file reaches the log.
    let stderr = proxy.stderr();
    assert_eq!(
        stderr
            .matches("catalogue feed: 5 entries refused, the rest of the feed applies")
            .count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains("root:x"), "{stderr}");
    assert!(!stderr.contains("FORGED"), "{stderr}");
}

#[test]
fn may_override_lets_the_operators_own_feed_replace_a_builtin_entry_but_never_match_browsers() {
    let origin = Origin::start();
    let feed_body = "crawlers:
  - {name: GPTBot, tokens: [gptbot], pattern: GPTBot, category: ai-training, operator: OpenAI, replace: true, purposes: [training]}
  - {name: Mozilla, tokens: [mozilla], pattern: Mozilla, category: ai-training}
  - {name: TeamBot, tokens: [teambot], pattern: TeamBot, category: ai-search}
";
    origin.route("/feed.yaml", 200, feed_body);
    let feed = format!("http://{}/feed.yaml", origin.addr());
    let proxy = Proxy::start(&config(&origin, &feed, ", may_override: true", ""));
    wait_for_team(&proxy, &feed);
    let replaced = eventually(Duration::from_secs(10), || {
        let (_, explain) = proxy.explain(HOST, GPTBOT, "/page");
        explain["crawler"]["feed"] == feed.as_str()
    });
    assert!(
        replaced,
        "the feed's GPTBot did not replace the built-in one"
    );
    assert_eq!(refused(&proxy, &feed, "overrides_builtin"), 0.0);
    assert_eq!(refused(&proxy, &feed, "browser_token"), 1.0);
    assert_eq!(from(&proxy, "192.0.2.9", "/private/x", BROWSER).status, 200);
}

#[test]
fn a_list_on_a_private_origin_loads_only_when_the_operator_names_it_and_every_redirect_is_checked()
{
    let origin = Origin::start();
    origin.route("/inside.json", 200, LIST);
    let elsewhere = ConnCounter::start();
    let (_root, server) = raw_https(&[
        ("ok.json", ok_list(LIST)),
        (
            "hop",
            redirect(&format!("https://localhost:{}/ok.json", elsewhere.port)),
        ),
        (
            "plain",
            redirect(&format!("http://{}/inside.json", origin.addr())),
        ),
    ]);
    let private = format!("https://127.0.0.1:{}", server.port);
    let ok = format!("{private}/ok.json");
    let hop = format!("{private}/hop");
    let plain = format!("{private}/plain");
    let feed_body = format!(
        "crawlers:
  - {{name: OkBot, tokens: [okbot], pattern: OkBot, category: other, verify: {{ips: [\"{ok}\"]}}}}
  - {{name: HopBot, tokens: [hopbot], pattern: HopBot, category: other, verify: {{ips: [\"{hop}\"]}}}}
  - {{name: PlainHopBot, tokens: [plainhopbot], pattern: PlainHopBot, category: other, verify: {{ips: [\"{plain}\"]}}}}
  - {{name: TeamBot, tokens: [teambot], pattern: TeamBot, category: ai-search}}
"
    );
    origin.route("/feed.yaml", 200, &feed_body);
    let feed = format!("http://{}/feed.yaml", origin.addr());
    let verify = format!("verify:\n  ranges: {{private_origins: [\"{private}\"]}}\n");
    let proxy = Proxy::start(&config(&origin, &feed, "", &verify));
    wait_for_team(&proxy, &feed);
    let loaded = eventually(Duration::from_secs(15), || {
        metric(
            &proxy.metrics(),
            "robotsguard_crawler_range_list_loaded",
            &[("list", &ok)],
        ) == 1.0
    });
    assert!(loaded, "the allowed list did not load:\n{}", proxy.stderr());
    let (_, explain) = proxy.explain_from(HOST, "OkBot/1.0", "/page", "192.0.2.5");
    assert_eq!(explain["verification"]["result"], "verified", "{explain}");
    // A redirect to another origin on loopback, and one to plain http: each hop is checked
    // again, and neither is followed.
    for list in [&hop, &plain] {
        assert!(
            eventually(Duration::from_secs(15), || fetches(&proxy, list, "refused")
                >= 1.0),
            "{list} was not refused:\n{}",
            proxy.metrics()
        );
    }
    assert_eq!(elsewhere.accepted(), 0);
    assert!(origin.received().iter().all(|r| r.target != "/inside.json"));
}

#[test]
fn a_feed_names_at_most_max_lists_range_lists() {
    let origin = Origin::start();
    let entries: String = (0..40)
        .map(|n| {
            format!(
                "  - {{name: ListBot{n}, tokens: [listbot{n}], pattern: ListBot{n}, category: other, verify: {{ips: [\"https://lists.invalid/{n}.json\"]}}}}\n"
            )
        })
        .collect();
    origin.route("/feed.yaml", 200, &format!("crawlers:\n{entries}"));
    origin.route(
        "/small.yaml",
        200,
        &format!(
            "crawlers:\n{}",
            entries
                .replace("ListBot", "SmallBot")
                .replace("listbot", "smallbot")
                .replace("lists.invalid/", "lists.invalid/small-")
        ),
    );
    let feed = format!("http://{}/feed.yaml", origin.addr());
    let small = format!("http://{}/small.yaml", origin.addr());
    let body = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]
crawlers:
  builtin: false
  feeds:
    - {{url: \"{feed}\", format: robotsguard, refresh: 1h}}
    - {{url: \"{small}\", format: robotsguard, refresh: 1h, max_lists: 3}}
origins:
  - name: shop
    hosts: [\"{HOST}\"]
    upstream: \"{upstream}\"
",
        upstream = origin.addr()
    );
    let proxy = Proxy::start(&body);
    let lists = |prefix: &str| {
        support::samples(&proxy.metrics(), "robotsguard_crawler_range_list_loaded")
            .iter()
            .filter(|(labels, _)| labels.get("list").is_some_and(|l| l.starts_with(prefix)))
            .count()
    };
    let settled = eventually(Duration::from_secs(15), || {
        refused(&proxy, &feed, "too_many_lists") == 8.0
            && refused(&proxy, &small, "too_many_lists") == 37.0
    });
    assert!(settled, "{}", proxy.metrics());
    assert!(
        eventually(Duration::from_secs(10), || lists(
            "https://lists.invalid/small-"
        ) == 3),
        "{}",
        proxy.metrics()
    );
    let all = lists("https://lists.invalid/");
    assert_eq!(all, 32 + 3, "{}", proxy.metrics());
}

#[test]
fn a_newline_in_a_range_list_never_starts_a_log_line() {
    let origin = Origin::start();
    let body = format!(
        "crawlers:
  builtin: false
  extra:
    - {{name: ListedBot, pattern: ListedBot, category: other, verify: {{ips: [\"file:lists/listed.json\"]}}}}
origins:
  - name: shop
    hosts: [\"{HOST}\"]
    upstream: \"{}\"
",
        origin.addr()
    );
    let list = "[\"192.0.2.1\\nFORGED robotsguard line\\r\\nFORGED too\"]";
    let proxy = Proxy::builder(&body)
        .files(&[("lists/listed.json", list)])
        .start();
    let said = eventually(Duration::from_secs(10), || {
        proxy.stderr().contains("crawler IP range list")
    });
    assert!(said, "{}", proxy.stderr());
    let stderr = proxy.stderr();
    assert!(
        stderr.lines().all(|line| !line.starts_with("FORGED")),
        "{stderr}"
    );
    // What the log says of the content is a short, escaped excerpt.
    assert!(stderr.contains("192.0.2.1\\x0aFORGED"), "{stderr}");
}
