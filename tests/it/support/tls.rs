//! Certificates made with the `openssl` command for tests (a CA, and server or client
//! certificates it signs), and `openssl s_server -WWW` as a real HTTPS server over a directory.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

fn openssl(dir: &Path, args: &[&str]) {
    let status = super::programs::command("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl runs");
    assert!(status.success(), "openssl {args:?}");
}

/// A CA in `dir`: `<name>.pem` and `<name>.key` (EC P-256).
pub fn make_ca(dir: &Path, name: &str) -> PathBuf {
    let key = format!("{name}.key");
    let pem = format!("{name}.pem");
    openssl(
        dir,
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            &key,
        ],
    );
    let subject = format!("/CN={name}");
    openssl(
        dir,
        &[
            "req", "-x509", "-new", "-key", &key, "-days", "2", "-subj", &subject, "-out", &pem,
        ],
    );
    dir.join(pem)
}

/// A certificate `<name>.pem` with key `<name>.key` in `dir`, signed by CA `ca` (made by
/// [`make_ca`] in the same directory), for `sans` (`DNS:shop.example,IP:127.0.0.1`); a client
/// certificate when `client`.
pub fn make_leaf(dir: &Path, ca: &str, name: &str, sans: &str, client: bool) -> (PathBuf, PathBuf) {
    let key = format!("{name}.key");
    let csr = format!("{name}.csr");
    let pem = format!("{name}.pem");
    let ext = format!("{name}.ext");
    openssl(
        dir,
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            &key,
        ],
    );
    let subject = format!("/CN={name}");
    openssl(
        dir,
        &["req", "-new", "-key", &key, "-subj", &subject, "-out", &csr],
    );
    let usage = if client { "clientAuth" } else { "serverAuth" };
    std::fs::write(
        dir.join(&ext),
        format!("subjectAltName={sans}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage={usage}\n"),
    )
    .expect("extensions written");
    let (ca_pem, ca_key) = (format!("{ca}.pem"), format!("{ca}.key"));
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_pem,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &ext,
            "-out",
            &pem,
        ],
    );
    (dir.join(pem), dir.join(key))
}

/// `openssl s_server -WWW` serving the files of `root` over HTTPS on a free loopback port,
/// requiring a client certificate signed by `client_ca` when given; killed on drop.
pub struct HttpsServer {
    child: Child,
    pub port: u16,
}

impl HttpsServer {
    pub fn start(root: &Path, cert: &Path, key: &Path, client_ca: Option<&Path>) -> HttpsServer {
        HttpsServer::run("-WWW", root, cert, key, client_ca)
    }

    /// `openssl s_server -HTTP`: each file of `root` is a whole HTTP response (status line,
    /// header fields, blank line, body), sent as it is, so a test can answer with any status or
    /// header (a redirect, `Cache-Control`).
    pub fn start_raw(root: &Path, cert: &Path, key: &Path) -> HttpsServer {
        HttpsServer::run("-HTTP", root, cert, key, None)
    }

    fn run(
        mode: &str,
        root: &Path,
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
    ) -> HttpsServer {
        let port = super::free_port();
        let mut command = super::programs::command("openssl");
        command
            .args(["s_server", "-quiet", mode, "-accept"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("-cert")
            .arg(cert)
            .arg("-key")
            .arg(key);
        if let Some(ca) = client_ca {
            command
                .args(["-Verify", "1", "-verify_return_error", "-CAfile"])
                .arg(ca);
        }
        let child = command
            .current_dir(root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("openssl s_server runs");
        let up = (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(25));
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(up, "openssl s_server did not listen");
        HttpsServer { child, port }
    }
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test binary's own CA, and a server certificate it signed for 127.0.0.1 and localhost,
/// made once: in-process fetches and every robotsguard the tests start trust the CA through
/// `SSL_CERT_FILE` (set here, once, so that modules cannot set two different CAs).
pub fn trusted_server_certificate() -> &'static (tempfile::TempDir, PathBuf, PathBuf) {
    static MADE: OnceLock<(tempfile::TempDir, PathBuf, PathBuf)> = OnceLock::new();
    MADE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let ca = make_ca(dir.path(), "test-ca");
        let (cert, key) = make_leaf(
            dir.path(),
            "test-ca",
            "server",
            "IP:127.0.0.1,DNS:localhost",
            false,
        );
        std::env::set_var("SSL_CERT_FILE", ca);
        (dir, cert, key)
    })
}

/// `openssl s_client -quiet` connected to `addr` (`host:port`) with SNI `server_name` (and ALPN
/// `alpn`), its input piped (what the test writes is sent over TLS), its output discarded. It
/// ends after 60 s whatever happens; tests kill it sooner.
pub fn s_client(addr: &str, server_name: &str, alpn: Option<&str>) -> Child {
    let mut command = super::programs::program("openssl").with_timeout(60);
    command.args(["s_client", "-quiet", "-servername", server_name]);
    if let Some(alpn) = alpn {
        command.args(["-alpn", alpn]);
    }
    command
        .args(["-connect", addr])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl s_client runs")
}
