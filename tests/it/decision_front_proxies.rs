//! The decision listener behind the real front proxies, with the recipes shipped in
//! `deploy/proxies/`: Debian's nginx (`auth_request` and the named location that gives the
//! client the real answer) and Debian's Caddy (`forward_auth`). Through each: a browser, an
//! allowed crawler, a refused crawler (403 body), a Crawl-delay 429 with `Retry-After`, a 402
//! with `Link`, a ban, and `/robots.txt` (the copy robotsguard serves, through `?host=`).
//! robotsguard runs the decision listener alone (`listen: []`).

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::support;

use support::{free_port, Origin, BROWSER, GPTBOT};

const HOST: &str = "shop.example";
const LICENSED: &str =
    "    block: {status: 402, license_url: \"https://terms.example/license.xml\"}\n";
const ROBOTS: &str = "User-agent: *\nDisallow: /private\nDisallow: /paid\nCrawl-delay: 30\n";

/// robotsguard with only its decision listener, and its admin address.
struct DecisionOnly {
    child: Child,
    decision: SocketAddr,
    admin: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for DecisionOnly {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_listening(address: SocketAddr, what: &str, log: impl Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_err() {
        assert!(
            Instant::now() < deadline,
            "{what} is not listening:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// `extra`: more keys of the origin, each line indented by four spaces.
fn decision_only(origin: &Origin, extra: &str) -> DecisionOnly {
    let dir = tempfile::tempdir().expect("temp dir");
    let decision = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let config = format!(
        "listen: []\nadmin: \"{admin}\"\nthreads: 1\nshutdown: {{grace: 1s}}\n\
         decision: {{listen: [\"{decision}\"]}}\n\
         origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: \"{}\"\n    \
         robots: {{source: inline, text: {}, serve: false}}\n    \
         offenders: {{action: ban, scope: crawlers, strikes: 2, window: 10m, ban: 1h}}\n{extra}",
        origin.addr(),
        serde_json::to_string(ROBOTS).unwrap()
    );
    let path = dir.path().join("robotsguard.yaml");
    std::fs::write(&path, config).unwrap();
    let log = dir.path().join("stderr.log");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_robotsguard"))
        .args(["serve", "--config"])
        .arg(&path)
        .arg("--upgrade-socket")
        .arg(dir.path().join("upgrade.sock"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("robotsguard starts");
    let running = DecisionOnly {
        child,
        decision,
        admin,
        _dir: dir,
    };
    wait_listening(decision, "the decision listener", || {
        std::fs::read_to_string(&log).unwrap_or_default()
    });
    running
}

/// A front proxy, killed on drop.
struct Front {
    child: Child,
    address: SocketAddr,
    dir: tempfile::TempDir,
}

impl Drop for Front {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            for name in ["error.log", "stderr.log"] {
                eprintln!(
                    "---- {name} ----\n{}",
                    std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
                );
            }
        }
    }
}

fn recipe(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("deploy/proxies")
            .join(name),
    )
    .expect("the recipe is in deploy/proxies")
}

/// Debian's nginx with `deploy/proxies/nginx.conf`, its addresses put in.
fn nginx(decision: SocketAddr, site: SocketAddr) -> Front {
    let dir = tempfile::tempdir().expect("temp dir");
    let address = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let server = recipe("nginx.conf")
        .replace("server 127.0.0.1:8081;", &format!("server {decision};"))
        .replace("listen 80;", &format!("listen {address};"))
        .replace(
            "proxy_pass http://127.0.0.1:8080;",
            &format!("proxy_pass http://{site};"),
        );
    let d = dir.path().display();
    let config = format!(
        "daemon off;\nmaster_process off;\npid \"{d}/nginx.pid\";\nerror_log \"{d}/error.log\" info;\n\
         events {{ worker_connections 256; }}\nhttp {{\n\
         access_log \"{d}/access.log\";\n\
         client_body_temp_path \"{d}/client_body\";\nproxy_temp_path \"{d}/proxy\";\n\
         fastcgi_temp_path \"{d}/fastcgi\";\nuwsgi_temp_path \"{d}/uwsgi\";\nscgi_temp_path \"{d}/scgi\";\n\
         {server}\n}}\n"
    );
    let path = dir.path().join("nginx.conf");
    std::fs::write(&path, &config).unwrap();
    let child = support::programs::program("nginx")
        .command()
        .arg("-p")
        .arg(dir.path())
        .arg("-e")
        .arg(dir.path().join("error.log"))
        .arg("-c")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
        .spawn()
        .expect("nginx starts");
    let front = Front {
        child,
        address,
        dir,
    };
    let log = front.dir.path().join("error.log");
    wait_listening(address, "nginx", || {
        std::fs::read_to_string(&log).unwrap_or_default()
    });
    front
}

/// Debian's Caddy with `deploy/proxies/Caddyfile`, its addresses put in (plain HTTP, no admin
/// endpoint, state in the temp dir).
fn caddy(decision: SocketAddr, site: SocketAddr) -> Front {
    let dir = tempfile::tempdir().expect("temp dir");
    let address = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let d = dir.path().display();
    let config = format!(
        "{{\n\tadmin off\n\tauto_https off\n\tstorage file_system {d}\n}}\n\n{}",
        recipe("Caddyfile")
            .replace(
                "shop.example {",
                &format!("http://{HOST}:{} {{", address.port())
            )
            .replace("127.0.0.1:8081", &decision.to_string())
            .replace("127.0.0.1:8080 # your site", &site.to_string())
    );
    let path = dir.path().join("Caddyfile");
    std::fs::write(&path, &config).unwrap();
    let child = support::programs::program("caddy")
        .command()
        .args(["run", "--adapter", "caddyfile", "--config"])
        .arg(&path)
        .env("HOME", dir.path())
        .env("XDG_DATA_HOME", dir.path())
        .env("XDG_CONFIG_HOME", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
        .spawn()
        .expect("caddy starts");
    let front = Front {
        child,
        address,
        dir,
    };
    let log = front.dir.path().join("stderr.log");
    wait_listening(address, "caddy", || {
        std::fs::read_to_string(&log).unwrap_or_default()
    });
    front
}

/// A client's request through the front proxy, with curl.
fn through(front: &Front, user_agent: &str, path: &str) -> support::Response {
    let output = support::programs::program("curl")
        .with_timeout(20)
        .args(["-s", "-i", "--max-time", "10"])
        .args(["-H", &format!("Host: {HOST}:{}", front.address.port())])
        .args(["-A", user_agent])
        .arg(format!("http://{}{path}", front.address))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no response: {text:?}"));
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    support::Response {
        status,
        headers,
        body: body.as_bytes().to_vec(),
    }
}

fn every_case_through(front: &Front, origin: &Origin, name: &str) {
    let proxied = |before: usize| origin.proxied().len() > before;
    // A browser, on a path robots.txt disallows: the site answers.
    let before = origin.proxied().len();
    let response = through(front, BROWSER, "/private");
    assert_eq!(response.status, 200, "{name}: {}", response.text());
    assert_eq!(response.text(), "private page");
    assert!(proxied(before));
    // The judgment reaches the site as headers.
    let received = origin.proxied().pop().unwrap();
    assert_eq!(
        received.header("x-robotsguard-decision"),
        Some("pass"),
        "{name}"
    );
    assert_eq!(
        received.header("x-robotsguard-verified"),
        Some("none"),
        "{name}"
    );
    // An allowed crawler.
    let response = through(front, GPTBOT, "/page");
    assert_eq!(response.status, 200, "{name}: {}", response.text());
    assert_eq!(response.text(), "page");
    let received = origin.proxied().pop().unwrap();
    assert_eq!(
        received.header("x-robotsguard-crawler"),
        Some("GPTBot"),
        "{name}"
    );
    // Its next request within the Crawl-delay: 429 with Retry-After.
    let before = origin.proxied().len();
    let response = through(front, GPTBOT, "/page");
    assert_eq!(response.status, 429, "{name}: {}", response.text());
    let retry: u64 = response
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!((28..=30).contains(&retry), "{name}: {:?}", response.headers);
    assert!(
        response
            .text()
            .starts_with("429 Too Many Requests: robots.txt asks GPTBot to wait 30 s"),
        "{name}: {}",
        response.text()
    );
    // A refused crawler: 403 with robotsguard's body.
    let response = through(front, GPTBOT, "/private/a");
    assert_eq!(response.status, 403, "{name}: {}", response.text());
    assert!(
        response.text().contains("GPTBot may not fetch /private/a."),
        "{name}: {}",
        response.text()
    );
    assert!(
        response
            .text()
            .contains("robots.txt line 2: Disallow: /private"),
        "{name}"
    );
    // The second strike: banned (its crawlers), with the ban's own body and Retry-After.
    let response = through(front, GPTBOT, "/private/b");
    assert_eq!(response.status, 403, "{name}");
    let response = through(front, GPTBOT, "/other");
    assert_eq!(response.status, 403, "{name}: {}", response.text());
    assert!(
        response.text().contains("is banned from this site until"),
        "{name}: {}",
        response.text()
    );
    assert!(
        response.header("retry-after").is_some(),
        "{name}: {:?}",
        response.headers
    );
    assert!(
        !proxied(before),
        "{name}: a refused request reached the site"
    );
    // robots.txt: the copy robotsguard serves.
    let response = through(front, BROWSER, "/robots.txt");
    assert_eq!(response.status, 200, "{name}");
    assert_eq!(response.text(), ROBOTS);
}

fn licence_through(front: &Front, origin: &Origin, name: &str) {
    let before = origin.proxied().len();
    let response = through(front, GPTBOT, "/paid/report");
    assert_eq!(response.status, 402, "{name}: {}", response.text());
    assert_eq!(
        response.header("link"),
        Some("<https://terms.example/license.xml>; rel=\"license\""),
        "{name}: {:?}",
        response.headers
    );
    assert!(
        response
            .text()
            .starts_with("402 Payment Required: this site licenses /paid/report to GPTBot"),
        "{name}: {}",
        response.text()
    );
    assert_eq!(origin.proxied().len(), before);
}

fn site() -> Origin {
    let origin = Origin::start();
    origin.route("/page", 200, "page");
    origin.route("/private", 200, "private page");
    origin
}

#[test]
fn nginx_auth_request_gives_the_client_robotsguards_answer() {
    // A site that licenses what robots.txt disallows (402 with its licence).
    let origin = site();
    let robotsguard = decision_only(&origin, LICENSED);
    let front = nginx(robotsguard.decision, origin.addr());
    licence_through(&front, &origin, "nginx");
    drop(front);
    drop(robotsguard);
    let robotsguard = decision_only(&origin, "");
    let front = nginx(robotsguard.decision, origin.addr());
    every_case_through(&front, &origin, "nginx");
    let metrics = support::get(robotsguard.admin, "/metrics").text();
    assert!(
        support::metric(
            &metrics,
            "robotsguard_decision_requests_total",
            &[("origin", "shop"), ("decision", "blocked")]
        ) >= 1.0
    );
}

#[test]
fn caddy_forward_auth_gives_the_client_robotsguards_answer() {
    let origin = site();
    let robotsguard = decision_only(&origin, LICENSED);
    let front = caddy(robotsguard.decision, origin.addr());
    licence_through(&front, &origin, "caddy");
    drop(front);
    drop(robotsguard);
    let robotsguard = decision_only(&origin, "");
    let front = caddy(robotsguard.decision, origin.addr());
    every_case_through(&front, &origin, "caddy");
}
