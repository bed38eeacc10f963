//! A real Redis (or Valkey) server (the system's, or Debian's fetched: [`super::programs`]) on a
//! free loopback port, started
//! and killed by the tests, and a minimal RESP client to look at what the proxies stored.

use std::io::{BufRead, BufReader};
use std::path::Path;

use super::*;

/// A running `redis-server` (or `valkey-server`) without persistence, killed on drop.
pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
    tls: Option<TlsPort>,
}

/// A TLS port beside the plain one (which the tests' own client keeps using).
struct TlsPort {
    port: u16,
    cert: PathBuf,
    key: PathBuf,
    ca: PathBuf,
    /// Clients must present a certificate `ca` signed.
    client_certificates: bool,
}

/// `redis-server` or `valkey-server` from the system, else Debian's `redis-server` fetched
/// ([`super::programs`]).
pub fn server_program() -> super::programs::Program {
    super::programs::first_of(&["redis-server", "valkey-server"])
}

impl RedisServer {
    /// Starts a server on a free port and returns once it answers PING.
    pub fn start() -> RedisServer {
        let mut server = RedisServer {
            child: None,
            port: free_port(),
            dir: tempfile::tempdir().expect("temp dir for redis"),
            tls: None,
        };
        server.run();
        server
    }

    /// Starts a server that also listens for TLS ([`RedisServer::tls_url`]) with `cert` and
    /// `key`; with `client_ca`, TLS clients must present a certificate that CA signed.
    pub fn start_tls(cert: &Path, key: &Path, client_ca: Option<&Path>) -> RedisServer {
        let mut server = RedisServer {
            child: None,
            port: free_port(),
            dir: tempfile::tempdir().expect("temp dir for redis"),
            tls: Some(TlsPort {
                port: free_port(),
                cert: cert.to_path_buf(),
                key: key.to_path_buf(),
                // redis-server wants a CA file even when it asks clients for nothing.
                ca: client_ca.unwrap_or(cert).to_path_buf(),
                client_certificates: client_ca.is_some(),
            }),
        };
        server.run();
        server
    }

    /// `rediss://127.0.0.1:TLS_PORT/0`.
    pub fn tls_url(&self) -> String {
        let tls = self.tls.as_ref().expect("started with start_tls");
        format!("rediss://127.0.0.1:{}/0", tls.port)
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    fn run(&mut self) {
        let log = std::fs::File::create(self.dir.path().join("redis.log")).expect("log file");
        let mut command = server_program().command();
        command
            .args(["--bind", "127.0.0.1", "--port"])
            .arg(self.port.to_string())
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(self.dir.path());
        if let Some(tls) = &self.tls {
            command
                .arg("--tls-port")
                .arg(tls.port.to_string())
                .arg("--tls-cert-file")
                .arg(&tls.cert)
                .arg("--tls-key-file")
                .arg(&tls.key)
                .arg("--tls-ca-cert-file")
                .arg(&tls.ca)
                .arg("--tls-auth-clients")
                .arg(if tls.client_certificates { "yes" } else { "no" });
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.try_command(&["PING"]).as_deref() == Ok("PONG") {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let log = std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default();
        panic!("redis-server did not answer PING within 10 s:\n{log}");
    }

    /// Kills the server (its data is gone: it keeps none on disk).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port.
    pub fn restart(&mut self) {
        self.kill();
        self.run();
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing is answered.
    pub fn pause(&self) {
        self.signal("STOP");
    }

    /// Lets a paused server go on (SIGCONT).
    pub fn resume(&self) {
        self.signal("CONT");
    }

    fn signal(&self, name: &str) {
        let pid = self.child.as_ref().expect("redis-server is running").id();
        let status = super::programs::command("kill")
            .arg(format!("-{name}"))
            .arg(pid.to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{name} {pid}");
    }

    /// Sends one command and returns its reply as text: a status or bulk string, an integer,
    /// `(nil)`, or an array's items joined by newlines.
    pub fn command(&self, args: &[&str]) -> String {
        self.try_command(args)
            .unwrap_or_else(|e| panic!("redis command {args:?} failed: {e}"))
    }

    /// [`RedisServer::command`], with an error reply (`OOM ...`) as `Err` instead of a panic.
    pub fn try_command(&self, args: &[&str]) -> Result<String, String> {
        let stream = TcpStream::connect_timeout(
            &SocketAddr::from(([127, 0, 0, 1], self.port)),
            Duration::from_millis(500),
        )
        .map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .map_err(|e| e.to_string())?;
        (&stream)
            .write_all(encode(args).as_bytes())
            .map_err(|e| e.to_string())?;
        let mut reader = BufReader::new(stream);
        read_reply(&mut reader)
    }

    /// Sends `commands` on one connection without waiting between them (a pipeline: thousands
    /// of writes in one go) and returns their replies in order.
    pub fn pipeline(&self, commands: &[Vec<String>]) -> Vec<Result<String, String>> {
        let stream = TcpStream::connect_timeout(
            &SocketAddr::from(([127, 0, 0, 1], self.port)),
            Duration::from_millis(500),
        )
        .expect("connect to redis");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        let writer = stream.try_clone().expect("a second handle");
        let requests: Vec<String> = commands
            .iter()
            .map(|command| encode(&command.iter().map(String::as_str).collect::<Vec<_>>()))
            .collect();
        // Written from another thread: the server answers while the rest is still being sent,
        // and its replies would fill the socket's buffers if nobody read them meanwhile.
        let sender = thread::spawn(move || {
            let mut writer = std::io::BufWriter::new(writer);
            for request in requests {
                if writer.write_all(request.as_bytes()).is_err() {
                    return;
                }
            }
            let _ = writer.flush();
        });
        let mut reader = BufReader::new(stream);
        let replies = (0..commands.len())
            .map(|_| read_reply(&mut reader))
            .collect();
        let _ = sender.join();
        replies
    }

    /// A field of `INFO` (`used_memory`, `evicted_keys`, ...), as a number.
    pub fn info_number(&self, field: &str) -> u64 {
        let info = self.command(&["INFO"]);
        info.lines()
            .find_map(|line| line.trim().strip_prefix(&format!("{field}:")))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("INFO has no number {field}"))
    }
}

/// One command in the protocol's array form.
fn encode(args: &[&str]) -> String {
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    request
}

fn read_line(reader: &mut impl BufRead) -> Result<String, String> {
    let mut line = String::new();
    reader.read_line(&mut line).map_err(|e| e.to_string())?;
    if line.is_empty() {
        return Err("connection closed".into());
    }
    Ok(line.trim_end_matches("\r\n").to_string())
}

fn read_reply(reader: &mut impl BufRead) -> Result<String, String> {
    let line = read_line(reader)?;
    let (kind, rest) = line.split_at(1);
    match kind {
        "+" | ":" => Ok(rest.to_string()),
        "-" => Err(format!("error reply: {rest}")),
        "$" => {
            let len: i64 = rest.parse().map_err(|_| format!("bad length {rest}"))?;
            if len < 0 {
                return Ok("(nil)".into());
            }
            let mut body = vec![0; usize::try_from(len).unwrap_or(0) + 2];
            std::io::Read::read_exact(reader, &mut body).map_err(|e| e.to_string())?;
            body.truncate(body.len() - 2);
            Ok(String::from_utf8_lossy(&body).into_owned())
        }
        "*" => {
            let count: i64 = rest.parse().map_err(|_| format!("bad count {rest}"))?;
            let mut items = Vec::new();
            for _ in 0..count.max(0) {
                items.push(read_reply(reader)?);
            }
            Ok(items.join("\n"))
        }
        _ => Err(format!("unexpected reply {line:?}")),
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // SIGKILL ends a paused server too.
        self.kill();
    }
}
