//! `examples/embed.rs`, the book's "Use as a library" proxy, run as a real process: a pingora
//! proxy of its own with robotsguard's `Guard` in two hooks, in front of a real origin.

use crate::support;

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use support::*;

/// The example binary `cargo test` builds next to the test binaries.
fn example_binary() -> PathBuf {
    let test_binary = std::env::current_exe().expect("the test binary's path");
    let profile_dir = test_binary
        .parent()
        .and_then(|deps| deps.parent())
        .expect("tests run from <target>/<profile>/deps");
    profile_dir.join("examples").join("embed")
}

struct Embedded {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Embedded {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Embedded {
    fn start(config: &str, upstream: SocketAddr) -> Embedded {
        let dir = tempfile::tempdir().expect("temp dir");
        let config_path = dir.path().join("robotsguard.yaml");
        std::fs::write(&config_path, config).expect("config written");
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let binary = example_binary();
        let child = Command::new(&binary)
            .arg(&config_path)
            .arg(addr.to_string())
            .arg(upstream.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{} starts: {e}", binary.display()));
        let mut embedded = Embedded {
            child,
            addr,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if let Ok(Some(status)) = embedded.child.try_wait() {
                panic!("the embed example exited with {status}");
            }
            assert!(
                Instant::now() < deadline,
                "the embed example did not listen"
            );
            thread::sleep(Duration::from_millis(50));
        }
        embedded
    }

    fn get(&self, host: &str, path: &str, user_agent: &str) -> Response {
        let mut conn = Conn::open(self.addr);
        conn.send(&Request::get(path).host(host).ua(user_agent))
    }
}

const GPTBOT: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)";
const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

#[test]
fn the_embed_example_enforces_robots_txt_in_its_own_proxy() {
    let origin = Origin::start();
    let robots = "User-agent: GPTBot\nDisallow: /private\n";
    let config = site(&origin, "shop.example", &inline_robots(robots));
    let proxy = Embedded::start(&config, origin.addr());

    let blocked = proxy.get("shop.example", "/private/report", GPTBOT);
    assert_eq!(blocked.status, 403, "{}", blocked.text());
    assert!(
        blocked
            .text()
            .contains("robots.txt line 2: Disallow: /private"),
        "{}",
        blocked.text()
    );
    // The canonical reading is decided, so an escaped letter does not slip through.
    let escaped = proxy.get("shop.example", "/%70rivate/report", GPTBOT);
    assert_eq!(escaped.status, 403, "{}", escaped.text());
    assert!(
        origin.proxied_to("/private/report").is_empty()
            && origin.proxied_to("/%70rivate/report").is_empty(),
        "a blocked request reached the origin"
    );

    let allowed = proxy.get("shop.example", "/products", GPTBOT);
    assert_eq!(allowed.status, 200, "{}", allowed.text());
    let browser = proxy.get("shop.example", "/private/report", BROWSER);
    assert_eq!(browser.status, 200, "{}", browser.text());
    let seen = origin.proxied_to("/private/report");
    assert_eq!(
        seen.len(),
        1,
        "the browser's request reached the origin once"
    );
    assert_eq!(seen[0].header("x-forwarded-for"), Some("127.0.0.1"));

    // The copy in force is what crawlers read.
    let served = proxy.get("shop.example", "/robots.txt", GPTBOT);
    assert_eq!(served.status, 200);
    assert_eq!(served.text(), robots);
    assert!(served.header("etag").is_some());

    // Hosts the config does not name are the embedding proxy's business.
    let other = proxy.get("other.example", "/private/report", GPTBOT);
    assert_eq!(other.status, 200, "{}", other.text());
}
