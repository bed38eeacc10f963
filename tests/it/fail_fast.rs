//! `serve` never runs half-alive: what it cannot serve stops it at once with a clear message and
//! a non-zero exit, before any listener answers health checks.

use crate::support;

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::free_port;

/// Runs `serve` on `config` (written to a temp dir with `files`) and waits at most 15 s for it to
/// exit; returns its exit code (`None` if it was still running) and stderr.
pub(crate) fn serve_exit(config: &str, files: &[(&str, &str)]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, content) in files {
        std::fs::write(dir.path().join(name), content).expect("file written");
    }
    let path = dir.path().join("robotsguard.yaml");
    std::fs::write(&path, config).expect("config written");
    let stderr_path = dir.path().join("stderr.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_robotsguard"))
        .args(["serve", "--config"])
        .arg(&path)
        .arg("--upgrade-socket")
        .arg(dir.path().join("upgrade.sock"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
        .spawn()
        .expect("robotsguard starts");
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut code = None;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            code = Some(status.code().unwrap_or(-1));
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Still running (the check failed): stop it. Waiting again on an exited child is harmless.
    let _ = child.kill();
    let _ = child.wait();
    (
        code,
        std::fs::read_to_string(stderr_path).unwrap_or_default(),
    )
}

fn config(listen: &str, admin: u16) -> String {
    format!(
        "listen:\n  - {listen}\nadmin: \"127.0.0.1:{admin}\"\nthreads: 1\nshutdown: {{grace: 1s}}\n\
         origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:9\"\n\
         \x20   robots: {{source: inline, text: \"User-agent: *\\nDisallow: /\\n\"}}\n"
    )
}

#[test]
fn a_listen_address_in_use_stops_serve() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("address").port();
    let started = Instant::now();
    let (code, stderr) = serve_exit(&config(&format!("\"127.0.0.1:{port}\""), free_port()), &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        stderr.contains(&format!("cannot bind the listen address 127.0.0.1:{port}")),
        "{stderr}"
    );
}

#[test]
fn an_admin_address_in_use_stops_serve() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("address").port();
    let listen = format!("\"127.0.0.1:{}\"", free_port());
    let (code, stderr) = serve_exit(&config(&listen, port), &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot bind the admin address 127.0.0.1:{port}")),
        "{stderr}"
    );
}

#[test]
fn missing_unparseable_or_mismatched_tls_files_stop_serve() {
    let port = free_port();
    let listen =
        format!("{{address: \"127.0.0.1:{port}\", tls: {{cert: cert.pem, key: key.pem}}}}");
    let (code, stderr) = serve_exit(&config(&listen, free_port()), &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot read the TLS certificate"),
        "{stderr}"
    );
    assert!(stderr.contains("cert.pem"), "{stderr}");

    let garbage = [("cert.pem", "not a certificate"), ("key.pem", "not a key")];
    let (code, stderr) = serve_exit(&config(&listen, free_port()), &garbage);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("cert.pem") || stderr.contains("key.pem"),
        "{stderr}"
    );

    // Two valid pairs, crossed: each file parses, the key is not the certificate's.
    let dir = tempfile::tempdir().expect("temp dir");
    for name in ["a", "b"] {
        let made = crate::support::programs::command("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            ])
            .args(["-subj", "/CN=shop.example"])
            .arg("-keyout")
            .arg(dir.path().join(format!("{name}.key")))
            .arg("-out")
            .arg(dir.path().join(format!("{name}.pem")))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("openssl runs");
        assert!(made.success());
    }
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).expect("pem");
    let (cert, key) = (read("a.pem"), read("b.key"));
    let crossed = [("cert.pem", cert.as_str()), ("key.pem", key.as_str())];
    let (code, stderr) = serve_exit(&config(&listen, free_port()), &crossed);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("does not fit the certificate"), "{stderr}");
}
