//! The shared state store over TLS (`rediss://`), against a real `redis-server` with a TLS port
//! and certificates made with openssl: a private CA and a client certificate (mTLS) are used,
//! and a store whose certificate is not trusted, or that is refused a client certificate, is not
//! used: requests are still answered from memory and `robotsguard_state_backend_up` stays 0.

use crate::support;

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use support::redis::RedisServer;
use support::tls::{make_ca, make_leaf};
use support::{metric, Origin, Proxy, Request};

const EXAMPLEBOT: &str = "Mozilla/5.0 (compatible; ExampleBot/1.0)";
const PREFIX: &str = "rg-tls:";

/// A proxy of `origin` keeping its state at `url` with `tls` (a YAML mapping, or empty), and a
/// 5 s Crawl-delay.
fn start(origin: &Origin, url: &str, tls: &str) -> Proxy {
    let tls = if tls.is_empty() {
        String::new()
    } else {
        format!(", tls: {tls}")
    };
    let body = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n\
         state:\n  backend: redis\n  redis: {{url: \"{url}\", prefix: \"{PREFIX}\", timeout: 1s{tls}}}\n\
         defaults:\n  crawl_delay: {{action: enforce, max: 60s}}\n\
         crawlers:\n  extra:\n    - {{name: ExampleBot, tokens: [examplebot], pattern: ExampleBot, category: ai-training}}\n\
         origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    \
         robots: {{source: inline, text: \"User-agent: *\\nCrawl-delay: 5\\n\"}}\n",
        origin.addr()
    );
    Proxy::start(&body)
}

fn from(proxy: &Proxy, client: &str, path: &str) -> support::Response {
    proxy.send(
        &Request::get(path)
            .host("shop.example")
            .ua(EXAMPLEBOT)
            .header("X-Forwarded-For", client),
    )
}

fn backend_up(proxy: &Proxy) -> f64 {
    metric(&proxy.metrics(), "robotsguard_state_backend_up", &[])
}

/// Waits up to 10 s for `robotsguard_state_backend_up` to read 1.
fn wait_up(proxy: &Proxy) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    for _ in 0..1_000 {
        if backend_up(proxy) == 1.0 {
            return true;
        }
        if Instant::now() > deadline {
            break;
        }
        thread::sleep(Duration::from_millis(50));
    }
    false
}

/// `{ca: .., client_cert: .., client_key: ..}` for files in `dir`.
fn tls_files(dir: &Path, ca: &str, client: Option<&str>) -> String {
    let path = |name: String| dir.join(name).to_string_lossy().into_owned();
    let mut mapping = format!("{{ca: \"{}\"", path(format!("{ca}.pem")));
    if let Some(client) = client {
        mapping.push_str(&format!(
            ", client_cert: \"{}\", client_key: \"{}\"",
            path(format!("{client}.pem")),
            path(format!("{client}.key"))
        ));
    }
    mapping.push('}');
    mapping
}

#[test]
fn the_store_over_tls_with_a_private_ca_and_a_client_certificate_is_shared() {
    let certs = tempfile::tempdir().expect("temp dir");
    make_ca(certs.path(), "ca");
    let (cert, key) = make_leaf(certs.path(), "ca", "store", "IP:127.0.0.1", false);
    make_leaf(certs.path(), "ca", "robotsguard", "DNS:robotsguard", true);
    let ca = certs.path().join("ca.pem");
    let redis = RedisServer::start_tls(&cert, &key, Some(&ca));
    let origin = Origin::start();
    let tls = tls_files(certs.path(), "ca", Some("robotsguard"));
    let first = start(&origin, &redis.tls_url(), &tls);
    let second = start(&origin, &redis.tls_url(), &tls);
    for proxy in [&first, &second] {
        assert!(wait_up(proxy), "over TLS: {}", proxy.stderr());
    }

    // One budget, kept in the store over TLS (robotsguard knows only the TLS port).
    let client = "203.0.113.5";
    assert_eq!(from(&first, client, "/a").status, 200);
    let limited = from(&second, client, "/b");
    assert_eq!(limited.status, 429, "{}", limited.text());
    let keys = redis.command(&["KEYS", &format!("{PREFIX}delay:*")]);
    assert!(keys.contains(client), "budget keys in the store: {keys:?}");
}

/// A store named by its DNS name, with a certificate for that name, and no client certificate
/// asked for.
#[test]
fn the_store_is_checked_against_the_name_in_its_url() {
    let certs = tempfile::tempdir().expect("temp dir");
    make_ca(certs.path(), "ca");
    let (cert, key) = make_leaf(certs.path(), "ca", "store", "DNS:localhost", false);
    let redis = RedisServer::start_tls(&cert, &key, None);
    let origin = Origin::start();
    let url = redis.tls_url().replace("127.0.0.1", "localhost");
    let proxy = start(&origin, &url, &tls_files(certs.path(), "ca", None));
    assert!(wait_up(&proxy), "{}", proxy.stderr());
    assert_eq!(from(&proxy, "203.0.113.7", "/a").status, 200);
    assert_eq!(from(&proxy, "203.0.113.7", "/b").status, 429);
    let keys = redis.command(&["KEYS", &format!("{PREFIX}delay:*")]);
    assert!(keys.contains("203.0.113.7"), "{keys:?}");
}

#[test]
fn a_store_it_cannot_trust_or_that_refuses_it_is_not_used() {
    let certs = tempfile::tempdir().expect("temp dir");
    make_ca(certs.path(), "ca");
    make_ca(certs.path(), "other");
    let (cert, key) = make_leaf(certs.path(), "ca", "store", "IP:127.0.0.1", false);
    make_leaf(certs.path(), "ca", "robotsguard", "DNS:robotsguard", true);
    let ca = certs.path().join("ca.pem");
    let redis = RedisServer::start_tls(&cert, &key, Some(&ca));
    let origin = Origin::start();

    // Trusting another CA: the store's certificate does not verify.
    let distrusting = start(
        &origin,
        &redis.tls_url(),
        &tls_files(certs.path(), "other", Some("robotsguard")),
    );
    // Trusting the system's roots only (no `tls`): the private CA is not among them.
    let system_roots = start(&origin, &redis.tls_url(), "");
    // Without a client certificate: the store refuses the connection.
    let anonymous = start(
        &origin,
        &redis.tls_url(),
        &tls_files(certs.path(), "ca", None),
    );
    // The right CA, another name: the certificate is for 127.0.0.1, not for localhost.
    let misnamed = start(
        &origin,
        &redis.tls_url().replace("127.0.0.1", "localhost"),
        &tls_files(certs.path(), "ca", Some("robotsguard")),
    );
    // With everything right the store is used, which gives the others time to have tried.
    let trusted = start(
        &origin,
        &redis.tls_url(),
        &tls_files(certs.path(), "ca", Some("robotsguard")),
    );
    assert!(wait_up(&trusted), "{}", trusted.stderr());
    // A server that refuses the client may close the connection before its alert is read.
    let refused: &[&str] = &["CertificateRequired", "reset by peer", "broken pipe"];
    for (name, proxy, why) in [
        ("another CA", &distrusting, &["UnknownIssuer"][..]),
        ("system roots", &system_roots, &["UnknownIssuer"][..]),
        ("no client certificate", &anonymous, refused),
        ("another name", &misnamed, &["not valid for name"][..]),
    ] {
        assert!(
            proxy.wait_log("the shared state store failed", 1, Duration::from_secs(10)),
            "{name}: no failure logged: {}",
            proxy.stderr()
        );
        let log = proxy.stderr();
        assert!(why.iter().any(|why| log.contains(why)), "{name}: {log}");
        assert_eq!(backend_up(proxy), 0.0, "{name}: never connected");
        // Decided from memory: admitted, then limited by this process's own budget.
        let client = "203.0.113.9";
        assert_eq!(from(proxy, client, "/a").status, 200, "{name}");
        assert_eq!(from(proxy, client, "/b").status, 429, "{name}");
    }
    assert_eq!(
        redis.command(&["KEYS", &format!("{PREFIX}delay:*203.0.113.9")]),
        "",
        "nothing reached the store from the proxies it refused or could not trust"
    );
}
