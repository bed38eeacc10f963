//! Origins behind TLS with a private CA, and origins that require a client certificate (mTLS):
//! the real proxy in front of `openssl s_server -WWW`, certificates made by `openssl` here.
//! robots.txt is fetched over the same TLS as proxied requests, so a CA robotsguard cannot
//! verify would leave crawlers disallowed everywhere.

use crate::support;

use std::path::Path;

use support::tls::{make_ca, make_leaf, HttpsServer};
use support::{Proxy, BROWSER, GPTBOT};

const HOST: &str = "shop.example";

/// A directory the origin serves: robots.txt disallowing /private to GPTBot, and two pages.
fn site(root: &Path) {
    std::fs::write(
        root.join("robots.txt"),
        "User-agent: GPTBot\nDisallow: /private\n",
    )
    .expect("robots.txt written");
    std::fs::write(root.join("page.html"), "the page\n").expect("page written");
    std::fs::write(root.join("private"), "private\n").expect("private written");
}

fn pem(path: &Path) -> String {
    std::fs::read_to_string(path).expect("PEM readable")
}

fn config(port: u16, tls: &str) -> String {
    format!(
        "origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: \"127.0.0.1:{port}\"\n    tls: {tls}\n"
    )
}

#[test]
fn an_origin_with_a_private_ca() {
    let certs = tempfile::tempdir().expect("temp dir");
    make_ca(certs.path(), "private-ca");
    let (cert, key) = make_leaf(
        certs.path(),
        "private-ca",
        "origin",
        "DNS:shop.example,IP:127.0.0.1",
        false,
    );
    let root = tempfile::tempdir().expect("temp dir");
    site(root.path());
    let server = HttpsServer::start(root.path(), &cert, &key, None);
    let ca = pem(&certs.path().join("private-ca.pem"));
    let proxy = Proxy::builder(&config(server.port, "{ca: ca.pem}"))
        .files(&[("ca.pem", &ca)])
        .start();
    let page = proxy.get(HOST, "/page.html", BROWSER);
    assert_eq!(page.status, 200, "{}", page.text());
    assert!(page.text().contains("the page"), "{}", page.text());
    // robots.txt came over the same TLS: GPTBot is refused only where it says.
    assert_eq!(proxy.get(HOST, "/private", GPTBOT).status, 403);
    assert_eq!(proxy.get(HOST, "/page.html", GPTBOT).status, 200);
    let (_, explain) = proxy.explain(HOST, GPTBOT, "/page.html");
    assert_eq!(explain["robots"]["state"], "conditional", "{explain}");
    drop(proxy);

    // Without the CA the origin cannot be verified: pages fail (502), robots.txt is unreachable.
    let proxy = Proxy::start(&config(server.port, "true"));
    assert_eq!(proxy.get(HOST, "/page.html", BROWSER).status, 502);
    let (_, explain) = proxy.explain(HOST, GPTBOT, "/page.html");
    assert_eq!(explain["robots"]["state"], "disallow_all", "{explain}");
}

#[test]
fn an_origin_that_requires_a_client_certificate() {
    let certs = tempfile::tempdir().expect("temp dir");
    make_ca(certs.path(), "server-ca");
    make_ca(certs.path(), "client-ca");
    let (cert, key) = make_leaf(
        certs.path(),
        "server-ca",
        "origin",
        "DNS:shop.example",
        false,
    );
    let (client_cert, client_key) = make_leaf(
        certs.path(),
        "client-ca",
        "robotsguard",
        "DNS:robotsguard.example",
        true,
    );
    let root = tempfile::tempdir().expect("temp dir");
    site(root.path());
    let client_ca = certs.path().join("client-ca.pem");
    let server = HttpsServer::start(root.path(), &cert, &key, Some(&client_ca));
    let ca = pem(&certs.path().join("server-ca.pem"));
    let files = [
        ("tls/ca.pem", ca.as_str()),
        ("tls/client.pem", &pem(&client_cert)),
        ("tls/client.key", &pem(&client_key)),
    ];
    let files: Vec<(&str, String)> = files.iter().map(|(n, c)| (*n, c.to_string())).collect();
    let files: Vec<(&str, &str)> = files.iter().map(|(n, c)| (*n, c.as_str())).collect();
    let mtls = "{ca: tls/ca.pem, client_cert: tls/client.pem, client_key: tls/client.key}";
    let proxy = Proxy::builder(&config(server.port, mtls))
        .files(&files)
        .start();
    let page = proxy.get(HOST, "/page.html", BROWSER);
    assert_eq!(page.status, 200, "{}", page.text());
    assert_eq!(proxy.get(HOST, "/private", GPTBOT).status, 403);
    drop(proxy);

    // The same origin without a client certificate refuses the handshake.
    let proxy = Proxy::builder(&config(server.port, "{ca: tls/ca.pem}"))
        .files(&files)
        .start();
    assert_eq!(proxy.get(HOST, "/page.html", BROWSER).status, 502);
}

#[test]
fn unusable_tls_files_are_refused_at_start_with_the_file_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("robotsguard.yaml");
    std::fs::write(dir.path().join("ca.pem"), "not a certificate\n").expect("written");
    std::fs::write(&path, config(9, "{ca: ca.pem}")).expect("config written");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_robotsguard"))
        .args(["validate", "--config"])
        .arg(&path)
        .output()
        .expect("robotsguard runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("ca.pem") && stderr.contains("no PEM certificate"),
        "{stderr}"
    );
}
