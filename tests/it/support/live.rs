//! Helpers for the live-operations tests (`tests/live_*.rs`): launching with other settings
//! (grace, log format, a Kubernetes ConfigMap layout), rewriting a running proxy's config the
//! ways editors and kubelet do, signals, and requests that report failures instead of panicking.
//!
//! Every config written here starts with the same four lines as the harness's (`listen`,
//! `admin`, `threads`, `shutdown`), so [`Proxy::config_text`] can keep them when a test rewrites
//! only the rest.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::ExitStatus;

use super::*;

/// The four lines the harness puts before a config body.
pub fn header(listen: SocketAddr, admin: SocketAddr, grace: &str) -> String {
    format!(
        "listen: [\"{listen}\"]\nadmin: \"{admin}\"\nthreads: 1\nshutdown: {{grace: {grace}}}\n"
    )
}

/// How [`Launch::start`] lays out the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `robotsguard.yaml`, a plain file.
    Plain,
    /// As Kubernetes mounts a ConfigMap: `robotsguard.yaml -> ..data/robotsguard.yaml`,
    /// `..data -> ..<version>/`.
    ConfigMap,
}

/// A proxy started with settings [`Proxy::start`] does not offer.
pub struct Launch<'a> {
    body: &'a str,
    grace: &'a str,
    args: Vec<&'a str>,
    layout: Layout,
}

impl<'a> Launch<'a> {
    /// `body`: the config without its first four lines, as for [`Proxy::start`].
    pub fn new(body: &'a str) -> Launch<'a> {
        Launch {
            body,
            grace: "1s",
            args: Vec::new(),
            layout: Layout::Plain,
        }
    }

    pub fn grace(mut self, grace: &'a str) -> Launch<'a> {
        self.grace = grace;
        self
    }

    /// An extra command-line argument (`--log-format`, `json`, ...), placed before `serve`.
    pub fn arg(mut self, arg: &'a str) -> Launch<'a> {
        self.args.push(arg);
        self
    }

    pub fn layout(mut self, layout: Layout) -> Launch<'a> {
        self.layout = layout;
        self
    }

    /// Starts the proxy and waits until `/readyz` answers 200 and the proxy port accepts.
    pub fn start(self) -> Proxy {
        let mut last_error = String::new();
        for _ in 0..3 {
            let dir = tempfile::tempdir().expect("temp dir");
            let listen = SocketAddr::from(([127, 0, 0, 1], free_port()));
            let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
            let config = header(listen, admin, self.grace) + self.body;
            match self.layout {
                Layout::Plain => std::fs::write(dir.path().join("robotsguard.yaml"), &config)
                    .expect("config written"),
                Layout::ConfigMap => configmap_create(dir.path(), &config),
            }
            let mut args = self.args.clone();
            args.push("serve");
            let config_path = dir.path().join("robotsguard.yaml");
            let socket = dir.path().join("upgrade.sock");
            let mut proxy = spawn(dir, &config_path, &socket, listen, admin, &args);
            match proxy.wait_ready() {
                Ok(()) => return proxy,
                Err((log, retry)) if retry => last_error = log,
                Err((log, _)) => panic!("robotsguard did not start:\n{config}\n{log}"),
            }
        }
        panic!("robotsguard did not start after 3 attempts:\n{last_error}");
    }
}

/// Spawns `robotsguard <args> --config <config> --upgrade-socket <socket>` with stderr in
/// `<dir>/stderr.log`, without waiting.
fn spawn(
    dir: tempfile::TempDir,
    config: &Path,
    socket: &Path,
    listen: SocketAddr,
    admin: SocketAddr,
    args: &[&str],
) -> Proxy {
    let stderr = dir.path().join("stderr.log");
    let stderr_file = std::fs::File::create(&stderr).expect("stderr file");
    let stdout_file = std::fs::File::create(dir.path().join(STDOUT_LOG)).expect("stdout file");
    let child = Command::new(env!("CARGO_BIN_EXE_robotsguard"))
        .args(args)
        .arg("--config")
        .arg(config)
        .arg("--upgrade-socket")
        .arg(socket)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(stdout_file)
        .stderr(stderr_file)
        .spawn()
        .expect("the robotsguard binary starts");
    Proxy {
        child,
        addr: listen,
        admin,
        dir,
        stderr,
    }
}

impl Proxy {
    /// Waits until `/readyz` answers 200 and the proxy port accepts; `Err((log, port_clash))`.
    fn wait_ready(&mut self) -> Result<(), (String, bool)> {
        let deadline = Instant::now() + Duration::from_secs(20);
        for _ in 0..1000 {
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = self.stderr();
                let clash = log.contains("in use") || log.contains("bind");
                return Err((format!("exited with {status}\n{log}"), clash));
            }
            if self.admin_status("/readyz") == Some(200) && self.listening() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err((format!("not ready within 20 s\n{}", self.stderr()), false));
            }
            thread::sleep(Duration::from_millis(50));
        }
        Err(("not ready after 1000 polls".into(), false))
    }

    /// The config file the proxy was started with.
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("robotsguard.yaml")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal (`HUP`, `TERM`, `QUIT`, ...) with `kill`.
    pub fn signal(&self, name: &str) {
        let status = super::programs::command("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{name} {} failed", self.pid());
    }

    /// A full config for `body`, keeping the four restart-only lines the proxy started with.
    pub fn config_text(&self, body: &str) -> String {
        let current = std::fs::read_to_string(self.config_path()).expect("config readable");
        let head: Vec<&str> = current.lines().take(4).collect();
        assert!(
            head.last().is_some_and(|l| l.starts_with("shutdown:")),
            "config does not start with the harness's four lines:\n{current}"
        );
        head.join("\n") + "\n" + body
    }

    /// Waits (at most 10 s) until the config watcher is watching: a change made before it is
    /// missed, which under load made reload tests fail now and then.
    fn wait_watching(&self) {
        self.wait_log("config reload: watching", 1, Duration::from_secs(10));
    }

    /// Replaces the config file whole, as editors do: a new file renamed over the old one.
    pub fn replace_config(&self, text: &str) {
        self.wait_watching();
        let temporary = self.dir.path().join(".robotsguard.yaml.tmp");
        std::fs::write(&temporary, text).expect("temporary config written");
        std::fs::rename(&temporary, self.config_path()).expect("config renamed into place");
    }

    /// Rewrites the config file in place (truncate, then write).
    pub fn overwrite_config(&self, text: &str) {
        self.wait_watching();
        std::fs::write(self.config_path(), text).expect("config overwritten");
    }

    /// Updates a [`Layout::ConfigMap`] config the way kubelet does.
    pub fn configmap_update(&self, text: &str) {
        configmap_update(self.dir.path(), text);
    }

    /// Waits until stderr contains `needle` `count` times, at most `within`.
    pub fn wait_log(&self, needle: &str, count: usize, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        for _ in 0..10_000 {
            if self.stderr().matches(needle).count() >= count {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// The sample of `robotsguard_config_reloads_total{result}` now.
    pub fn reloads(&self, result: &str) -> f64 {
        metric(
            &self.metrics(),
            "robotsguard_config_reloads_total",
            &[("result", result)],
        )
    }

    /// Waits until `robotsguard_config_reloads_total{result}` reaches `want` (at most 10 s).
    pub fn wait_reloads(&self, result: &str, want: f64) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut value = 0.0;
        for _ in 0..1000 {
            value = self.reloads(result);
            if value >= want || Instant::now() > deadline {
                break;
            }
            thread::sleep(Duration::from_millis(10));
        }
        value
    }

    /// Waits for the process to exit, at most `within`.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        for _ in 0..10_000 {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Starts a second instance on this one's config that takes over its listening sockets
    /// (`serve --upgrade` on the same upgrade socket); send this one `QUIT` to hand them over.
    pub fn start_upgrade(&self) -> Proxy {
        let socket = self.dir.path().join("upgrade.sock");
        let dir = tempfile::tempdir().expect("temp dir");
        let args = ["serve", "--upgrade"];
        spawn(
            dir,
            &self.config_path(),
            &socket,
            self.addr,
            self.admin,
            &args,
        )
    }
}

/// Lays out a ConfigMap volume holding `robotsguard.yaml` in `dir`.
pub fn configmap_create(dir: &Path, text: &str) {
    let version = dir.join("..v1");
    std::fs::create_dir(&version).expect("version directory");
    std::fs::write(version.join("robotsguard.yaml"), text).expect("config written");
    symlink("..v1", dir.join("..data")).expect("..data link");
    symlink("..data/robotsguard.yaml", dir.join("robotsguard.yaml")).expect("config link");
}

/// kubelet's atomic update: a new version directory, a `..data_tmp` link to it renamed over
/// `..data`, then the old version removed.
pub fn configmap_update(dir: &Path, text: &str) {
    let old = std::fs::read_link(dir.join("..data")).expect("..data is a link");
    let old_name = old.to_string_lossy().into_owned();
    let number: u32 = old_name
        .trim_start_matches("..v")
        .parse()
        .expect("version number");
    let new_name = format!("..v{}", number + 1);
    let version = dir.join(&new_name);
    std::fs::create_dir(&version).expect("version directory");
    std::fs::write(version.join("robotsguard.yaml"), text).expect("config written");
    let temporary = dir.join("..data_tmp");
    symlink(&new_name, &temporary).expect("..data_tmp link");
    std::fs::rename(&temporary, dir.join("..data")).expect("..data swapped");
    std::fs::remove_dir_all(dir.join(&old_name)).expect("old version removed");
}

/// Sends `request` on `conn` and reads the answer, reporting failures instead of panicking (for
/// client loops that count them).
pub fn try_send(conn: &mut Conn, request: &Request) -> Result<Response, String> {
    conn.wire
        .stream
        .write_all(&request.to_bytes())
        .map_err(|e| format!("cannot send: {e}"))?;
    conn.read_response(request.method == "HEAD")
}

/// Opens a connection, reporting failure instead of panicking.
pub fn try_open(addr: SocketAddr) -> Result<Conn, String> {
    let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    let _ = stream.set_nodelay(true);
    Ok(Conn {
        wire: Wire::new(stream),
    })
}
