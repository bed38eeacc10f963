//! `robotsguard preview`: asks a running instance what a candidate robots.txt (or config
//! fragment) would change on an origin (`POST /robots/preview?origin=NAME`) and prints the
//! answer as a table, or as JSON. A CI gate before deploying a robots.txt: exit 3 when a
//! warning says a search engine loses the site or the file refuses everything.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use robotsguard::preview::{REFUSES_EVERYTHING, SEARCH_ENGINE_LOSES_SITE};

/// Exit status when nothing alarming was found.
pub const EXIT_OK: u8 = 0;
/// Exit status for an error (unreachable admin listener, refused candidate).
pub const EXIT_ERROR: u8 = 1;
/// Exit status when a warning says a search engine loses the site or everything is refused.
pub const EXIT_WARNED: u8 = 3;

/// The most of an answer read.
const MAX_ANSWER_BYTES: u64 = 32 * 1024 * 1024;
/// How long the whole exchange may take.
const TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, clap::Args)]
pub struct PreviewArgs {
    /// The admin listener (`http://127.0.0.1:9090`, or `127.0.0.1:9090`).
    #[arg(long, value_name = "URL")]
    pub admin: String,
    /// The origin to preview.
    #[arg(long, value_name = "NAME")]
    pub origin: String,
    /// The candidate robots.txt (`-` for standard input).
    #[arg(long, value_name = "FILE", required_unless_present = "config")]
    pub robots: Option<PathBuf>,
    /// A YAML mapping of the origin's keys to try (`policy: {...}`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// A file holding the admin (or read-only) token.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Print the answer as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &PreviewArgs) -> ExitCode {
    match ask(args) {
        Ok((answer, raw)) => {
            if args.json {
                println!("{raw}");
            } else {
                print!("{}", table(&answer));
            }
            ExitCode::from(if blocks(&answer) {
                EXIT_WARNED
            } else {
                EXIT_OK
            })
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn blocks(answer: &serde_json::Value) -> bool {
    answer["warnings"].as_array().is_some_and(|warnings| {
        warnings
            .iter()
            .any(|w| w["kind"] == SEARCH_ENGINE_LOSES_SITE || w["kind"] == REFUSES_EVERYTHING)
    })
}

fn read(path: &std::path::Path, what: &str) -> Result<String, String> {
    let bytes = if path.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .lock()
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read {what} from standard input: {e}"))?;
        bytes
    } else {
        std::fs::read(path).map_err(|e| format!("cannot read {what} `{}`: {e}", path.display()))?
    };
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "{what} `{}` is not valid UTF-8 (at byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// Sends the candidate; the answer parsed and as sent.
fn ask(args: &PreviewArgs) -> Result<(serde_json::Value, String), String> {
    let robots = args
        .robots
        .as_deref()
        .map(|p| read(p, "the robots.txt"))
        .transpose()?;
    let config = args
        .config
        .as_deref()
        .map(|p| read(p, "the config fragment"))
        .transpose()?;
    let token = args
        .token_file
        .as_deref()
        .map(robotsguard::admin::read_token)
        .transpose()
        .map_err(|e| e.to_string())?;
    let (content_type, body) = match (&robots, &config) {
        (Some(robots), None) => ("text/plain; charset=utf-8", robots.clone().into_bytes()),
        _ => (
            "application/json",
            serde_json::to_vec(&serde_json::json!({"robots": robots, "config": config}))
                .map_err(|e| e.to_string())?,
        ),
    };
    let authority = args
        .admin
        .strip_prefix("http://")
        .unwrap_or(&args.admin)
        .trim_end_matches('/');
    if authority.contains("://") || authority.contains('/') {
        return Err(format!(
            "--admin {}: give http://HOST:PORT (the admin listener speaks plain HTTP)",
            args.admin
        ));
    }
    let origin: String = form_urlencoded::byte_serialize(args.origin.as_bytes()).collect();
    let mut head = format!(
        "POST /robots/preview?origin={origin} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    head.push_str("\r\n");
    let (status, answer) = exchange(authority, head.as_bytes(), &body)?;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let parsed: serde_json::Value = serde_json::from_str(&text)
        .map_err(|_| format!("the admin listener answered {status}: {}", text.trim()))?;
    if status != 200 {
        let error = parsed["error"].as_str().map_or(text.trim(), |e| e);
        return Err(format!("the admin listener answered {status}: {error}"));
    }
    Ok((parsed, text))
}

/// One HTTP/1.1 exchange with `authority`: the status and the body.
fn exchange(authority: &str, head: &[u8], body: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let deadline = Instant::now() + TIMEOUT;
    let targets: Vec<SocketAddr> = authority
        .to_socket_addrs()
        .map_err(|e| format!("--admin {authority}: not an address: {e}"))?
        .collect();
    let target = targets
        .first()
        .ok_or("the admin address resolves to nothing")?;
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| format!("no answer within {TIMEOUT:?}"))
    };
    let mut stream = TcpStream::connect_timeout(target, left()?)
        .map_err(|e| format!("cannot connect to {authority}: {e}"))?;
    stream
        .set_write_timeout(Some(left()?))
        .map_err(|e| e.to_string())?;
    stream.write_all(head).map_err(|e| e.to_string())?;
    stream.write_all(body).map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    let mut limited = (&mut stream).take(MAX_ANSWER_BYTES);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        limited
            .get_ref()
            .set_read_timeout(Some(left()?))
            .map_err(|e| e.to_string())?;
        match limited.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(e.to_string()),
        }
    }
    let end = memchr::memmem::find(&answer, b"\r\n\r\n").ok_or("no answer head")?;
    let status = String::from_utf8_lossy(&answer[..end])
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or("no status in the answer")?;
    Ok((status, answer[end + 4..].to_vec()))
}

/// The answer as a table, then the warnings.
fn table(answer: &serde_json::Value) -> String {
    let typed: Option<PreviewSummary> = serde_json::from_value(answer.clone()).ok();
    let mut out = String::new();
    let window = &answer["window"];
    out.push_str(&format!(
        "origin {}: {} requests replayed from {} to {} ({} not replayable)\n",
        answer["origin"].as_str().unwrap_or("?"),
        window["requests_replayed"],
        window["since"].as_str().unwrap_or("?"),
        window["until"].as_str().unwrap_or("?"),
        window["requests_not_replayable"],
    ));
    match window["coverage"].as_str() {
        Some("fleet") => out.push_str(&format!(
            "traffic of every replica ({} within the window)\n",
            window["replicas"]
        )),
        Some("store_down") => out.push_str(
            "traffic of the answering replica only: the shared store could not be read\n",
        ),
        _ => {}
    }
    let rows = typed.map(|t| t.changes).unwrap_or_default();
    if rows.is_empty() {
        out.push_str("no change\n");
    } else {
        let mut lines = vec![[
            "CRAWLER".to_string(),
            "BEFORE".into(),
            "AFTER".into(),
            "REQUESTS".into(),
            "PATHS".into(),
            "VERIFIED".into(),
            "PURPOSES".into(),
            "SAMPLE PATHS".into(),
        ]];
        for row in rows {
            lines.push([
                row.crawler,
                row.before,
                row.after,
                row.requests.to_string(),
                row.paths.to_string(),
                format!("{:.0}%", row.verified * 100.0),
                row.purposes.join(","),
                row.sample_paths.join(" "),
            ]);
        }
        let widths: Vec<usize> = (0..8)
            .map(|i| {
                lines
                    .iter()
                    .map(|l| l[i].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for line in lines {
            let cells: Vec<String> = line
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
    }
    for warning in answer["warnings"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "warning: [{}]{} {}\n",
            warning["kind"].as_str().unwrap_or("?"),
            warning["crawler"]
                .as_str()
                .map(|c| format!(" {c}:"))
                .unwrap_or_default(),
            warning["message"].as_str().unwrap_or(""),
        ));
    }
    out
}

/// The part of `robotsguard::preview::PreviewAnswer` the table reads.
#[derive(serde::Deserialize)]
struct PreviewSummary {
    changes: Vec<ChangeRow>,
}

#[derive(serde::Deserialize)]
struct ChangeRow {
    crawler: String,
    before: String,
    after: String,
    requests: u64,
    paths: u64,
    sample_paths: Vec<String>,
    purposes: Vec<String>,
    verified: f64,
}
