//! TLS termination: a listener with a certificate serves HTTPS, decides like the plain one and
//! tells the origin the request came over https. Uses the system's `openssl` (to make a
//! self-signed certificate) and `curl` (as the TLS client).

use crate::support;

use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use support::{free_port, Origin, BROWSER, GPTBOT};

/// curl through the TLS listener; returns (status, body).
fn curl(port: u16, path: &str, user_agent: &str) -> (u16, String) {
    let output = crate::support::programs::command("curl")
        .args([
            "-sk",
            "--max-time",
            "10",
            "-A",
            user_agent,
            "-w",
            "\n%{http_code}",
        ])
        .arg("--resolve")
        .arg(format!("shop.example:{port}:127.0.0.1"))
        .arg(format!("https://shop.example:{port}{path}"))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (status.trim().parse().unwrap_or(0), body.to_string())
}

#[test]
fn a_tls_listener_terminates_https_and_enforces() {
    let dir = tempfile::tempdir().expect("temp dir");
    let made = crate::support::programs::command("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=shop.example",
        ])
        .args(["-addext", "subjectAltName=DNS:shop.example"])
        .arg("-keyout")
        .arg(dir.path().join("key.pem"))
        .arg("-out")
        .arg(dir.path().join("cert.pem"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl runs");
    assert!(made.success(), "self-signed certificate created");

    let origin = Origin::start();
    let (tls_port, admin_port) = (free_port(), free_port());
    let config = format!(
        "listen:\n  - address: \"127.0.0.1:{tls_port}\"\n    tls: {{cert: cert.pem, key: key.pem}}\n\
         admin: \"127.0.0.1:{admin_port}\"\nthreads: 1\nshutdown: {{grace: 1s}}\n\
         origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"{}\"\n\
         \x20   robots: {{source: inline, text: \"User-agent: *\\nDisallow: /private\\n\"}}\n",
        origin.addr()
    );
    let path = dir.path().join("robotsguard.yaml");
    std::fs::write(&path, config).expect("config written");
    let mut child = Command::new(env!("CARGO_BIN_EXE_robotsguard"))
        .args(["serve", "--config"])
        .arg(&path)
        .arg("--upgrade-socket")
        .arg(dir.path().join("upgrade.sock"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("robotsguard starts");

    let deadline = Instant::now() + Duration::from_secs(20);
    let mut ready = false;
    while Instant::now() < deadline && !ready {
        ready = curl(tls_port, "/ready-probe", BROWSER).0 == 200;
        if !ready {
            thread::sleep(Duration::from_millis(100));
        }
    }
    let outcome = std::panic::catch_unwind(|| {
        assert!(ready, "the TLS listener answers");
        let (status, body) = curl(tls_port, "/private/x", GPTBOT);
        assert_eq!(status, 403);
        assert!(body.contains("https://shop.example"), "{body}");
        assert_eq!(curl(tls_port, "/private/x", BROWSER).0, 200);
        let seen = origin.proxied_to("/private/x");
        assert_eq!(
            seen.len(),
            1,
            "only the browser's request reached the origin"
        );
        assert_eq!(seen[0].header("x-forwarded-proto"), Some("https"));
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}
