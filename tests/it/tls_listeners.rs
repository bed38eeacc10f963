//! TLS listeners with several sites' certificates (chosen by SNI, renewed live) and HTTP/2 to
//! clients: over TLS by ALPN and in clear text with prior knowledge (h2c). The real proxy,
//! certificates made by `openssl`, `openssl s_client` to see which certificate is served, and
//! curl (HTTP/1.1 and HTTP/2) as the client.

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::tls::{make_ca, make_leaf, s_client};
use support::{inline_robots, metric, site, Origin, Proxy, BROWSER, GPTBOT};

/// The subject line of the certificate the listener on `port` serves for `server_name` (no SNI
/// when `None`).
fn served_subject(port: u16, server_name: Option<&str>) -> String {
    let mut command = crate::support::programs::program("openssl").with_timeout(10);
    command
        .args(["s_client", "-connect"])
        .arg(format!("127.0.0.1:{port}"));
    match server_name {
        Some(name) => command.args(["-servername", name]),
        None => command.arg("-noservername"),
    };
    let output = command
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .expect("openssl s_client runs");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find(|line| line.starts_with("subject="))
        .unwrap_or("")
        .replace(' ', "")
}

/// Waits (at most 15 s) until the certificate served for `server_name` has `subject`.
fn wait_for_subject(port: u16, server_name: &str, subject: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut seen = String::new();
    for _ in 0..300 {
        seen = served_subject(port, Some(server_name));
        if seen == subject || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    seen
}

/// Waits (at most 15 s) until `condition` holds on the proxy's metrics text.
fn wait_for_metrics(proxy: &Proxy, condition: impl Fn(&str) -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(15);
    for _ in 0..300 {
        if condition(&proxy.metrics()) {
            return true;
        }
        if Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// `status`, `http_version` and body of a curl request with `args` (`--http2`, `-k`, ...).
fn curl(args: &[&str], url: &str, user_agent: &str) -> (u16, String, String) {
    let output = crate::support::programs::command("curl")
        .args(["-s", "--max-time", "10", "-A", user_agent])
        .args(["-w", "\n%{http_code} %{http_version}"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, tail) = text.rsplit_once('\n').unwrap_or(("", "0 0"));
    let (status, version) = tail.split_once(' ').unwrap_or(("0", "0"));
    (
        status.trim().parse().unwrap_or(0),
        version.trim().to_string(),
        body.to_string(),
    )
}

fn pem(path: &Path) -> String {
    std::fs::read_to_string(path).expect("PEM readable")
}

/// Replaces `path` whole with `content`, as editors and cert-manager's tools do (a rename onto it).
fn replace_file(path: &Path, content: &str) {
    let temporary = path.with_extension("new");
    std::fs::write(&temporary, content).expect("new file written");
    std::fs::rename(&temporary, path).expect("new file renamed over the old");
}

/// A Secret in a projected volume as the chart mounts it (`tls/tls.crt`, `tls/tls.key`): the
/// kubelet writes each version to a timestamped directory, links `tls -> ..data/tls`, and on an
/// update renames a new `..data` link over the old one and deletes the old directory. The watched
/// directory (`tls`, through the link) is a different one after every update.
fn secret_volume(dir: &Path, version: u32, cert: &str, key: &str) {
    let timestamped = format!("..v{version}");
    let files = dir.join(&timestamped).join("tls");
    std::fs::create_dir_all(&files).expect("secret version directory");
    std::fs::write(files.join("tls.crt"), cert).expect("tls.crt written");
    std::fs::write(files.join("tls.key"), key).expect("tls.key written");
    let staged = dir.join("..data_tmp");
    std::os::unix::fs::symlink(&timestamped, &staged).expect("..data_tmp linked");
    std::fs::rename(&staged, dir.join("..data")).expect("..data swapped");
    if std::fs::symlink_metadata(dir.join("tls")).is_err() {
        std::os::unix::fs::symlink("..data/tls", dir.join("tls")).expect("tls linked");
    }
    if version > 1 {
        std::fs::remove_dir_all(dir.join(format!("..v{}", version - 1)))
            .expect("old version removed");
    }
}

#[test]
fn sni_picks_each_sites_certificate_and_renewals_are_served_without_a_restart() {
    let certs = tempfile::tempdir().expect("temp dir");
    make_ca(certs.path(), "ca");
    let (shop_cert, shop_key) = make_leaf(certs.path(), "ca", "shop", "DNS:shop.example", false);
    let (blog_cert, blog_key) = make_leaf(
        certs.path(),
        "ca",
        "blog",
        "DNS:*.blog.example,DNS:blog.example",
        false,
    );
    let (renewed_cert, renewed_key) = make_leaf(
        certs.path(),
        "ca",
        "shop-renewed",
        "DNS:shop.example",
        false,
    );
    let (blog2_cert, blog2_key) = make_leaf(
        certs.path(),
        "ca",
        "blog-renewed",
        "DNS:*.blog.example",
        false,
    );
    let (blog3_cert, blog3_key) = make_leaf(
        certs.path(),
        "ca",
        "blog-third",
        "DNS:*.blog.example",
        false,
    );

    let origin = Origin::start();
    let body = site(
        &origin,
        "shop.example",
        &inline_robots("User-agent: GPTBot\nDisallow: /private\n"),
    );
    let files = [
        ("certs/shop.pem", pem(&shop_cert)),
        ("certs/shop.key", pem(&shop_key)),
    ];
    let files: Vec<(&str, &str)> = files.iter().map(|(n, c)| (*n, c.as_str())).collect();
    // The second certificate comes from a Secret volume, made before the proxy starts.
    let secret = tempfile::tempdir().expect("temp dir");
    secret_volume(secret.path(), 1, &pem(&blog_cert), &pem(&blog_key));
    let listener = format!(
        "tls: {{certs: [{{cert: certs/shop.pem, key: certs/shop.key}}, {{cert: \"{0}/tls/tls.crt\", key: \"{0}/tls/tls.key\"}}]}}",
        secret.path().display()
    );
    let proxy = Proxy::builder(&body)
        .listener(&listener)
        .files(&files)
        .start();
    let port = proxy.addr.port();

    // Each name gets its certificate; a wildcard covers one label; the first is the default.
    assert_eq!(
        served_subject(port, Some("shop.example")),
        "subject=CN=shop"
    );
    assert_eq!(
        served_subject(port, Some("www.blog.example")),
        "subject=CN=blog"
    );
    assert_eq!(
        served_subject(port, Some("blog.example")),
        "subject=CN=blog"
    );
    assert_eq!(
        served_subject(port, Some("a.b.blog.example")),
        "subject=CN=shop"
    );
    assert_eq!(
        served_subject(port, Some("other.example")),
        "subject=CN=shop"
    );
    assert_eq!(served_subject(port, None), "subject=CN=shop");
    // curl checks the served certificate against the name it asked for.
    let ca = certs.path().join("ca.pem");
    let resolve = format!("shop.example:{port}:127.0.0.1");
    let url = format!("https://shop.example:{port}/private");
    let ca_arg = ca.to_string_lossy().into_owned();
    let tls_args = ["--cacert", ca_arg.as_str(), "--resolve", resolve.as_str()];
    assert_eq!(curl(&tls_args, &url, GPTBOT).0, 403);
    assert_eq!(curl(&tls_args, &url, BROWSER).0, 200);

    // Expiry, by listener and certificate name: within the two days the certificates last.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs_f64();
    let metrics = proxy.metrics();
    let listener_label = proxy.addr.to_string();
    for name in ["shop.example", "*.blog.example"] {
        let expiry = metric(
            &metrics,
            "robotsguard_tls_certificate_expiry_timestamp_seconds",
            &[("listener", &listener_label), ("name", name)],
        );
        assert!(
            expiry > now + 86_400.0 && expiry < now + 3.0 * 86_400.0,
            "{name}: {expiry}\n{metrics}"
        );
    }

    // A renewal renamed over the files is served without a restart.
    replace_file(&proxy.dir.path().join("certs/shop.key"), &pem(&renewed_key));
    replace_file(
        &proxy.dir.path().join("certs/shop.pem"),
        &pem(&renewed_cert),
    );
    assert_eq!(
        wait_for_subject(port, "shop.example", "subject=CN=shop-renewed"),
        "subject=CN=shop-renewed"
    );
    // So is each Secret update (a new `..data`), the second one too.
    secret_volume(secret.path(), 2, &pem(&blog2_cert), &pem(&blog2_key));
    assert_eq!(
        wait_for_subject(port, "www.blog.example", "subject=CN=blog-renewed"),
        "subject=CN=blog-renewed"
    );
    secret_volume(secret.path(), 3, &pem(&blog3_cert), &pem(&blog3_key));
    assert_eq!(
        wait_for_subject(port, "www.blog.example", "subject=CN=blog-third"),
        "subject=CN=blog-third"
    );
    let loaded = |text: &str| {
        metric(
            text,
            "robotsguard_tls_certificate_reloads_total",
            &[("listener", &listener_label), ("result", "loaded")],
        )
    };
    assert!(wait_for_metrics(&proxy, |text| loaded(text) >= 3.0));

    // A broken new pair keeps the previous one, and says so.
    let failed = |text: &str| {
        metric(
            text,
            "robotsguard_tls_certificate_reloads_total",
            &[("listener", &listener_label), ("result", "failed")],
        )
    };
    let failed_before = failed(&proxy.metrics());
    std::fs::write(
        proxy.dir.path().join("certs/shop.pem"),
        "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n",
    )
    .expect("broken certificate written");
    assert!(
        wait_for_metrics(&proxy, |text| failed(text) > failed_before),
        "{}",
        proxy.metrics()
    );
    assert_eq!(
        served_subject(port, Some("shop.example")),
        "subject=CN=shop-renewed"
    );
    assert_eq!(curl(&tls_args, &url, BROWSER).0, 200);
    assert!(proxy
        .stderr()
        .contains("TLS certificate not reloaded, the previous one is still served"));
}

/// The forwarding headers of HTTP/2 requests are each request's own. Each worker thread
/// remembers the values it built last, so the test alternates the client's address and the
/// spelling of the host (all routed to the one site) across the proxy's workers, with addresses
/// that share a slot: no request may get a value that was built for another.
#[test]
fn forwarding_headers_over_http2_are_each_requests_own() {
    let origin = Origin::start();
    let proxy = Proxy::builder(&site(&origin, "shop.example", ""))
        .listener("http2: true")
        .start();
    let port = proxy.addr.port();
    let mut sent = Vec::new();
    for round in 0..3 {
        for (index, (host, from)) in [
            ("shop.example", "127.0.0.1"),
            ("SHOP.example", "127.0.0.9"),
            ("Shop.Example", "127.0.0.17"),
            ("shop.example", "127.0.0.25"),
        ]
        .into_iter()
        .enumerate()
        {
            let authority = format!("{host}:{port}");
            let path = format!("/r{round}-{index}");
            let header = format!("Host: {authority}");
            let args = [
                "--http2-prior-knowledge",
                "--interface",
                from,
                "-H",
                header.as_str(),
            ];
            let (status, version, _) =
                curl(&args, &format!("http://127.0.0.1:{port}{path}"), BROWSER);
            assert_eq!(
                (status, version.as_str()),
                (200, "2"),
                "{path} {authority} from {from}"
            );
            sent.push((path, authority, from));
        }
    }
    for (path, authority, from) in sent {
        let seen = origin.proxied_to(&path);
        assert_eq!(seen.len(), 1, "{path}");
        assert_eq!(
            (
                seen[0].header("x-forwarded-host"),
                seen[0].header("x-forwarded-for")
            ),
            (Some(authority.as_str()), Some(from)),
            "{path}"
        );
    }
}

/// Requests on the proxy decided over HTTP/1.1, HTTP/2 over TLS and h2c, all alike.
#[test]
fn http2_over_tls_and_h2c_are_decided_like_http1() {
    let certs = tempfile::tempdir().expect("temp dir");
    make_ca(certs.path(), "ca");
    let (cert, key) = make_leaf(certs.path(), "ca", "shop", "DNS:shop.example", false);
    let origin = Origin::start();
    let robots = "User-agent: GPTBot\nDisallow: /private\n";
    let body = site(&origin, "shop.example", &inline_robots(robots));
    let files = [("shop.pem", pem(&cert)), ("shop.key", pem(&key))];
    let files: Vec<(&str, &str)> = files.iter().map(|(n, c)| (*n, c.as_str())).collect();
    let tls_proxy = Proxy::builder(&body)
        .listener("tls: {cert: shop.pem, key: shop.key}")
        .files(&files)
        .start();
    let h2c_proxy = Proxy::builder(&body).listener("http2: true").start();
    let plain_proxy = Proxy::start(&body);

    let ca = certs.path().join("ca.pem").to_string_lossy().into_owned();
    let tls_port = tls_proxy.addr.port();
    let resolve = format!("shop.example:{tls_port}:127.0.0.1");
    let https = |path: &str| format!("https://shop.example:{tls_port}{path}");
    let h2c_port = h2c_proxy.addr.port();
    let h2c_resolve = format!("shop.example:{h2c_port}:127.0.0.1");
    let h2c = |path: &str| format!("http://shop.example:{h2c_port}{path}");

    // curl's arguments, how to make a URL of a path, and the HTTP version expected.
    type Case<'a> = (&'a [&'a str], &'a dyn Fn(&str) -> String, &'a str);
    let cases: [Case; 4] = [
        (
            &["--cacert", &ca, "--resolve", &resolve, "--http2"],
            &https,
            "2",
        ),
        (
            &["--cacert", &ca, "--resolve", &resolve, "--http1.1"],
            &https,
            "1.1",
        ),
        (
            &["--resolve", &h2c_resolve, "--http2-prior-knowledge"],
            &h2c,
            "2",
        ),
        (&["--resolve", &h2c_resolve, "--http1.1"], &h2c, "1.1"),
    ];
    for (args, url, version) in cases {
        let (status, seen_version, text) = curl(args, &url("/private/page"), GPTBOT);
        assert_eq!(
            (status, seen_version.as_str()),
            (403, version),
            "{args:?}: {text}"
        );
        assert!(text.contains("robots.txt"), "{args:?}: {text}");
        let (status, seen_version, _) = curl(args, &url("/private/page"), BROWSER);
        assert_eq!((status, seen_version.as_str()), (200, version), "{args:?}");
        let (status, seen_version, text) = curl(args, &url("/robots.txt"), GPTBOT);
        assert_eq!((status, seen_version.as_str()), (200, version), "{args:?}");
        assert!(text.contains("Disallow: /private"), "{args:?}: {text}");
        // Routing by :authority over HTTP/2 (curl makes it of Host), by Host over HTTP/1.1: an
        // unknown site is refused.
        let other: Vec<&str> = args
            .iter()
            .copied()
            .chain(["-H", "Host: other.example"])
            .collect();
        let (status, seen_version, _) = curl(&other, &url("/"), BROWSER);
        assert_eq!((status, seen_version.as_str()), (421, version), "{args:?}");
        // HEAD: the same answers, without a body (over HTTP/2, a body on a HEAD answer is a
        // protocol error the client fails on).
        for (args, path, user_agent, expected) in [
            (args.to_vec(), "/private/page", GPTBOT, 403),
            (other.clone(), "/", BROWSER, 421),
        ] {
            let head = crate::support::programs::command("curl")
                .args(["-s", "-I", "--max-time", "10", "-A", user_agent])
                .args(["-w", "%{http_code} %{http_version}"])
                .args(&args)
                .arg(url(path))
                .output()
                .expect("curl runs");
            let text = String::from_utf8_lossy(&head.stdout);
            assert!(head.status.success(), "HEAD {path} {args:?}: {head:?}");
            assert!(
                text.ends_with(&format!("{expected} {version}")),
                "HEAD {path} {args:?}: {text}"
            );
        }
    }
    // Only the browsers' requests reached the origin (robots.txt is answered by the proxy),
    // each telling it the host the client named: HTTP/2's `:authority` and HTTP/1.1's `Host`
    // alike, with the scheme of the listener.
    let seen = origin.proxied_to("/private/page");
    assert_eq!(seen.len(), 4);
    let mut forwarded: Vec<(String, String)> = seen
        .iter()
        .map(|request| {
            (
                request.header("x-forwarded-host").unwrap_or("").to_string(),
                request
                    .header("x-forwarded-proto")
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    forwarded.sort();
    let tls_host = format!("shop.example:{tls_port}");
    let h2c_host = format!("shop.example:{h2c_port}");
    let mut expected = vec![
        (tls_host.clone(), "https".to_string()),
        (tls_host, "https".to_string()),
        (h2c_host.clone(), "http".to_string()),
        (h2c_host, "http".to_string()),
    ];
    expected.sort();
    assert_eq!(forwarded, expected);
    for proxy in [&tls_proxy, &h2c_proxy] {
        let blocked = metric(
            &proxy.metrics(),
            "robotsguard_requests_total",
            &[("origin", "shop"), ("decision", "blocked")],
        );
        assert_eq!(blocked, 4.0, "a GET and a HEAD per protocol");
    }

    // A plain listener without `http2: true` does not take h2c.
    let plain_port = plain_proxy.addr.port();
    let (status, _, _) = curl(
        &["--http2-prior-knowledge"],
        &format!("http://127.0.0.1:{plain_port}/private/page"),
        BROWSER,
    );
    assert_ne!(status, 200);
    let (status, version, _) = curl(
        &["--http1.1"],
        &format!("http://127.0.0.1:{plain_port}/"),
        BROWSER,
    );
    assert_eq!((status, version.as_str()), (421, "1.1"));
}

/// `validate` and `serve` refuse a certificate list with a pair that cannot be served, naming
/// its files; a good list validates.
#[test]
fn a_pair_that_cannot_be_served_is_refused_at_start_with_its_files_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    make_ca(dir.path(), "ca");
    make_leaf(dir.path(), "ca", "shop", "DNS:shop.example", false);
    make_leaf(dir.path(), "ca", "blog", "DNS:blog.example", false);
    let config = |second_key: &str| {
        format!(
            "listen:\n  - address: \"127.0.0.1:{}\"\n    tls:\n      certs:\n        \
             - {{cert: shop.pem, key: shop.key}}\n        - {{cert: blog.pem, key: {second_key}}}\n\
             origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:9\"\n",
            support::free_port()
        )
    };
    let run = |command: &str, text: &str| {
        let path = dir.path().join("robotsguard.yaml");
        std::fs::write(&path, text).expect("config written");
        let mut robotsguard = Command::new(env!("CARGO_BIN_EXE_robotsguard"));
        robotsguard.args([command, "--config"]).arg(&path);
        if command == "serve" {
            robotsguard
                .arg("--upgrade-socket")
                .arg(dir.path().join("upgrade.sock"));
        }
        let mut child = robotsguard
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("robotsguard runs");
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Ok(Some(status)) = child.try_wait() {
                break Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let output = child.wait_with_output().expect("output collected");
        (
            status.and_then(|s| s.code()),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    // The blog certificate with the shop key: the key does not fit.
    for command in ["validate", "serve"] {
        let (code, stderr) = run(command, &config("shop.key"));
        assert_eq!(code, Some(1), "{command}: {stderr}");
        assert!(
            stderr.contains("shop.key")
                && stderr.contains("blog.pem")
                && stderr.contains("does not fit"),
            "{command}: {stderr}"
        );
    }
    let (code, stderr) = run("validate", &config("missing.key"));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("missing.key"), "{stderr}");
    let (code, stderr) = run("validate", &config("blog.key"));
    assert_eq!(code, Some(0), "{stderr}");
}

/// An HTTP/1.1 connection over TLS waiting for its next request is evicted like a plain one (its
/// socket's reading side shut down under the TLS session): at the cap the one idle longest
/// closes, the newest stays open, and the newcomer is served. `openssl s_client` holds each
/// connection open after one request.
#[test]
fn at_the_cap_a_kept_alive_tls_connection_idle_longest_is_evicted() {
    let certs = tempfile::tempdir().expect("temp dir");
    make_ca(certs.path(), "ca");
    let (cert, key) = make_leaf(certs.path(), "ca", "shop", "DNS:shop.example", false);
    let origin = Origin::start();
    let body = format!(
        "limits: {{max_connections: 3, header_timeout: 30s, idle_timeout: 30s}}\n{}",
        site(
            &origin,
            "shop.example",
            &inline_robots("User-agent: *\nAllow: /\n")
        )
    );
    let files = [("shop.pem", pem(&cert)), ("shop.key", pem(&key))];
    let files: Vec<(&str, &str)> = files.iter().map(|(n, c)| (*n, c.as_str())).collect();
    let proxy = Proxy::builder(&body)
        .listener("tls: {cert: shop.pem, key: shop.key}")
        .files(&files)
        .start();
    let port = proxy.addr.port();
    let request =
        format!("GET /page HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: {BROWSER}\r\n\r\n");
    let mut clients: Vec<std::process::Child> = Vec::new();
    for _ in 0..3 {
        let mut client = s_client(&format!("127.0.0.1:{port}"), "shop.example", None);
        let stdin = client.stdin.as_mut().expect("stdin");
        std::io::Write::write_all(stdin, request.as_bytes()).expect("request written");
        clients.push(client);
        std::thread::sleep(Duration::from_millis(400));
    }
    // Each has had its answer and waits, kept alive, for its next request.
    assert!(
        wait_for_metrics(&proxy, |text| {
            metric(text, "robotsguard_requests_total", &[("decision", "pass")]) >= 3.0
        }),
        "the three first requests were not served"
    );
    let (status, _, _) = curl(
        &[
            "-k",
            "--resolve",
            &format!("shop.example:{port}:127.0.0.1"),
            "--http1.1",
        ],
        &format!("https://shop.example:{port}/page"),
        BROWSER,
    );
    assert_eq!(status, 200, "the newcomer at the cap was not served");
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_downstream_connections_evicted_total",
            &[]
        ),
        1.0
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while clients[0].try_wait().expect("status").is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let oldest_closed = clients[0].try_wait().expect("status").is_some();
    let newest_open = clients[2].try_wait().expect("status").is_none();
    for client in &mut clients {
        let _ = client.kill();
        let _ = client.wait();
    }
    assert!(
        oldest_closed,
        "the TLS connection idle longest was not closed"
    );
    assert!(newest_open, "the newest TLS connection was closed");
}
