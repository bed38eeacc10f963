//! `robotsguard healthcheck`: asks a running instance's admin listener for `/healthz`, for a
//! container's HEALTHCHECK (the image has no curl). Exit 0 when it answers 200, 1 otherwise.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The most read of the answer: the status line is all that counts.
const MAX_ANSWER: u64 = 4096;

/// Asks `address` for `path` within `timeout` (connecting, sending and reading together).
pub fn run(address: &str, path: &str, timeout: Duration) -> ExitCode {
    match probe(address, path, timeout) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("unhealthy: http://{address}{path}: {e}");
            ExitCode::from(1)
        }
    }
}

fn probe(address: &str, path: &str, timeout: Duration) -> Result<(), String> {
    if !path.starts_with('/') || path.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err("the path must start with / and hold no spaces".to_owned());
    }
    let deadline = Instant::now() + timeout;
    let targets: Vec<SocketAddr> = address
        .to_socket_addrs()
        .map_err(|e| format!("not an address: {e}"))?
        .collect();
    let target = targets.first().ok_or("the address resolves to nothing")?;
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| format!("no answer within {timeout:?}"))
    };
    let mut stream = TcpStream::connect_timeout(target, left()?).map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(left()?))
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    let mut limited = (&mut stream).take(MAX_ANSWER);
    let mut chunk = [0u8; 512];
    // Read until the status line is complete, the answer ends, or time runs out.
    while !answer.contains(&b'\n') {
        stream_timeout(limited.get_ref(), left()?)?;
        match limited.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(e.to_string()),
        }
    }
    let status_line = answer
        .split(|&b| b == b'\n')
        .next()
        .map(|line| String::from_utf8_lossy(line).trim().to_owned())
        .unwrap_or_default();
    let mut words = status_line.split(' ');
    match (words.next(), words.next()) {
        (Some(version), Some("200")) if version.starts_with("HTTP/1.") => Ok(()),
        _ if status_line.is_empty() => Err("no answer".to_owned()),
        _ => Err(format!("answered `{status_line}`")),
    }
}

fn stream_timeout(stream: &TcpStream, left: Duration) -> Result<(), String> {
    stream
        .set_read_timeout(Some(left))
        .map_err(|e| e.to_string())
}
