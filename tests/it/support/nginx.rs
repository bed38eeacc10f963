//! The stock Debian `nginx` (the system's, or Debian's package fetched: [`super::programs`]) as a
//! static-file origin, for tests that need a real server's reading of a request target rather
//! than the harness's byte-exact one.
//!
//! nginx decodes percent escapes (`%2F` included) and then resolves dot segments and merges
//! slashes before it maps the path to a file, so `/public/..%2Fprivate/secret.html` is served
//! from `private/secret.html`. The access log records both the raw target and the path nginx
//! resolved, see [`Nginx::access_for`].
//!
//! nginx runs in the foreground as a single process (`master_process off`): no workers to leave
//! behind when it is killed, and no switch to another user who could not read the temp dir, so
//! it works the same as root and as anyone else.

use std::path::Path;

use super::*;

/// One access-log line: what nginx answered, the target as sent, and the path it resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    pub status: u16,
    /// The request target as sent (`-` when nginx could not parse the request line).
    pub request_uri: String,
    /// nginx's `$uri`: decoded, dot segments resolved, slashes merged.
    pub uri: String,
}

/// A running nginx serving a temp docroot on `127.0.0.1:<free port>`, killed on drop.
pub struct Nginx {
    child: Child,
    addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Nginx {
    /// Serves `files`, each a path relative to the docroot (`"private/secret.html"`) and its
    /// bytes, and returns once nginx accepts connections.
    pub fn start(files: &[(&str, &[u8])]) -> Nginx {
        let nginx = super::programs::program("nginx");
        let mut last_error = String::new();
        for _ in 0..3 {
            match Nginx::try_start(&nginx, files) {
                Ok(nginx) => return nginx,
                // Another process may have taken the port between picking and binding it.
                Err((log, true)) => last_error = log,
                Err((log, false)) => panic!("nginx did not start:\n{log}"),
            }
        }
        panic!("nginx did not start after 3 attempts:\n{last_error}");
    }

    /// `Err((what went wrong, whether another port may help))`.
    fn try_start(
        nginx: &super::programs::Program,
        files: &[(&str, &[u8])],
    ) -> Result<Nginx, (String, bool)> {
        let dir = tempfile::tempdir().expect("temp dir for nginx");
        let root = dir.path().join("root");
        std::fs::create_dir_all(&root).expect("nginx docroot created");
        for (name, content) in files {
            let relative = Path::new(name.trim_start_matches('/'));
            assert!(
                relative
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_))),
                "nginx file {name:?} must be a plain relative path"
            );
            let path = root.join(relative);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).expect("nginx file's directory created");
            }
            std::fs::write(&path, content).expect("nginx file written");
        }
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let config = config(dir.path(), addr);
        let config_path = dir.path().join("nginx.conf");
        std::fs::write(&config_path, &config).expect("nginx config written");
        let error_log = dir.path().join("error.log");
        let stderr = std::fs::File::create(dir.path().join("stderr.log")).expect("stderr file");
        let child = nginx
            .command()
            .arg("-p")
            .arg(dir.path())
            // Before it reads the config nginx would log to the path built into it.
            .arg("-e")
            .arg(&error_log)
            .arg("-c")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", nginx.path.display()));
        let mut nginx = Nginx { child, addr, dir };
        let deadline = Instant::now() + Duration::from_secs(15);
        for _ in 0..1000 {
            if let Ok(Some(status)) = nginx.child.try_wait() {
                let log = nginx.logs();
                let retry = log.contains("in use");
                return Err((
                    format!("exited with {status}\nconfig:\n{config}\n{log}"),
                    retry,
                ));
            }
            // nginx writes its pid file only after binding, so a connection after that reaches
            // this nginx, not some other holder of the port.
            if nginx.pid_written()
                && TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
            {
                return Ok(nginx);
            }
            if Instant::now() > deadline {
                let log = nginx.logs();
                return Err((
                    format!("not listening within 15 s\nconfig:\n{config}\n{log}"),
                    false,
                ));
            }
            thread::sleep(Duration::from_millis(20));
        }
        Err(("not listening after 1000 polls".into(), false))
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The access log so far: one line per request, `status TAB request_uri TAB uri`, with `"`,
    /// `\` and bytes outside printable ASCII written `\xHH` by nginx.
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default()
    }

    /// The access log parsed, escapes undone.
    pub fn accesses(&self) -> Vec<Access> {
        self.access_log().lines().filter_map(parse_access).collect()
    }

    /// The first access for the target `request_uri` (as sent). nginx logs a request after it
    /// has answered, so a client may look a moment early: this polls for up to 5 s, then panics.
    pub fn access_for(&self, request_uri: &str) -> Access {
        let deadline = Instant::now() + Duration::from_secs(5);
        for _ in 0..500 {
            if let Some(access) = self
                .accesses()
                .into_iter()
                .find(|a| a.request_uri == request_uri)
            {
                return access;
            }
            if Instant::now() > deadline {
                break;
            }
            thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "nginx logged no request for {request_uri:?}; access log:\n{}",
            self.access_log()
        );
    }

    /// nginx's error log and anything it wrote to stderr.
    pub fn logs(&self) -> String {
        let read =
            |name: &str| std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        format!("{}{}", read("error.log"), read("stderr.log"))
    }

    fn pid_written(&self) -> bool {
        std::fs::read_to_string(self.dir.path().join("nginx.pid"))
            .is_ok_and(|pid| pid.trim() == self.child.id().to_string())
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if thread::panicking() {
            eprintln!(
                "---- nginx error log ----\n{}---- nginx access log ----\n{}",
                self.logs(),
                self.access_log()
            );
        }
    }
}

/// A minimal config: every path nginx writes to is inside `dir`.
fn config(dir: &Path, addr: SocketAddr) -> String {
    let dir = dir.display();
    format!(
        r#"daemon off;
master_process off;
pid "{dir}/nginx.pid";
error_log "{dir}/error.log" info;
events {{
    worker_connections 256;
}}
http {{
    client_body_temp_path "{dir}/client_body";
    proxy_temp_path "{dir}/proxy";
    fastcgi_temp_path "{dir}/fastcgi";
    uwsgi_temp_path "{dir}/uwsgi";
    scgi_temp_path "{dir}/scgi";
    log_format targets "$status\t$request_uri\t$uri";
    access_log "{dir}/access.log" targets;
    server {{
        listen {addr};
        root "{dir}/root";
    }}
}}
"#
    )
}

fn parse_access(line: &str) -> Option<Access> {
    let mut fields = line.split('\t');
    let status = fields.next()?.parse().ok()?;
    let request_uri = unescape(fields.next()?);
    let uri = unescape(fields.next()?);
    Some(Access {
        status,
        request_uri,
        uri,
    })
}

/// Undoes nginx's `\xHH` log escaping.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = bytes
            .get(i..i + 4)
            .filter(|e| e.starts_with(b"\\x"))
            .and_then(|e| std::str::from_utf8(&e[2..]).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
