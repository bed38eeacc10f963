//! A real HTTP proxy (tinyproxy, the system's or Debian's fetched: [`super::programs`]) on a free
//! loopback port: what `verify.ranges.proxy` tunnels list fetches through with CONNECT. Killed on
//! drop.

use super::*;

pub struct HttpProxy {
    child: Child,
    pub port: u16,
    dir: tempfile::TempDir,
}

impl HttpProxy {
    /// Starts tinyproxy (CONNECT to any port allowed, from loopback only) and returns once it
    /// accepts connections.
    pub fn start() -> HttpProxy {
        let dir = tempfile::tempdir().expect("temp dir for the proxy");
        let port = free_port();
        let config = dir.path().join("tinyproxy.conf");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListen 127.0.0.1\nTimeout 30\nMaxClients 20\nAllow 127.0.0.1\n\
                 LogLevel Connect\nLogFile \"{}\"\n",
                dir.path().join("proxy.log").display()
            ),
        )
        .expect("proxy config written");
        let child = super::programs::command("tinyproxy")
            .arg("-d")
            .arg("-c")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tinyproxy starts");
        let proxy = HttpProxy { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "tinyproxy did not listen");
            thread::sleep(Duration::from_millis(20));
        }
        proxy
    }

    /// `http://127.0.0.1:PORT`, as `verify.ranges.proxy` takes it.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// What it logged: one `CONNECT` line per tunnel among others.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("proxy.log")).unwrap_or_default()
    }
}

impl Drop for HttpProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
