//! A small harness for end-to-end tests of the real `robotsguard` binary, so each test reads like
//! a sentence:
//!
//! ```ignore
//! let origin = Origin::start();
//! origin.robots(200, "User-agent: GPTBot\nDisallow: /\n");
//! let proxy = Proxy::start(&site(&origin, "shop.example", ""));
//! let answer = proxy.get("shop.example", "/page", GPTBOT);
//! assert_eq!(answer.status, 403);
//! ```
//!
//! - [`Origin`]: a real HTTP/1.1 server on `127.0.0.1:0` (keep-alive, Content-Length and chunked
//!   request bodies, HEAD), configurable per path, recording every request it receives.
//! - [`Proxy`]: the `robotsguard serve` binary on free ports with a config written to a temp
//!   dir; ready once `/readyz` answers 200; killed on drop.
//! - [`Conn`]: a tiny HTTP/1.1 client over `std::net::TcpStream`, with a raw mode for requests a
//!   client library would refuse or normalise.
//! - [`metric`] / [`samples`]: reading the Prometheus text of `/metrics`.
//! - [`redis::RedisServer`]: a real Redis/Valkey server for the shared state store.
//! - [`http_proxy::HttpProxy`]: a real HTTP proxy (tinyproxy) for fetches through CONNECT.
//! - [`nginx::Nginx`] / [`whatwg::WhatwgOrigin`]: origins that resolve targets as stock nginx
//!   and as a Node app (`new URL`) do, to show what a path-confusion bypass would reach.
//!
//! Every loop is bounded in iterations and time.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// User-Agents used across the tests.
pub const BROWSER: &str =
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36";
pub const GPTBOT: &str =
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; GPTBot/1.2; +https://openai.com/gptbot";
pub const GOOGLEBOT: &str =
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
pub const GOOGLEBOT_IMAGE: &str = "Googlebot-Image/1.0";
pub const ADSBOT: &str = "AdsBot-Google (+http://www.google.com/adsbot.html)";
pub const ZORGBOT: &str = "Mozilla/5.0 (compatible; ZorgBot/1.0)";
pub const GENERIC_BOT: &str = "SomethingCrawler/2.0 (+http://x.example/bot)";

/// How long a socket read or write may block.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Upper bound on a header block, either side.
const MAX_HEAD: usize = 64 * 1024;
/// Upper bound on a body, either side.
const MAX_BODY: usize = 8 * 1024 * 1024;

// ------------------------------------------------------------------------------------------------
// HTTP/1.1 message reading, shared by the origin and the client.

/// A buffered reader over a stream that can read a head, then a body, and keep leftovers for the
/// next message on the same connection.
struct Wire {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Wire {
    fn new(stream: TcpStream) -> Wire {
        Wire {
            stream,
            buf: Vec::new(),
        }
    }

    /// Reads more bytes; `Ok(0)` at EOF.
    fn fill(&mut self) -> std::io::Result<usize> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk)?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// Reads up to and including the blank line ending a head. `Ok(None)` on a clean EOF before
    /// any byte of a new message.
    fn read_head(&mut self, deadline: Instant) -> Result<Option<Vec<u8>>, String> {
        for _ in 0..100_000 {
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                let head: Vec<u8> = self.buf.drain(..end + 4).collect();
                return Ok(Some(head));
            }
            if self.buf.len() > MAX_HEAD {
                return Err("header block too large".into());
            }
            if Instant::now() > deadline {
                return Err("timed out reading a head".into());
            }
            match self.fill() {
                Ok(0) if self.buf.is_empty() => return Ok(None),
                Ok(0) => {
                    return Err(format!(
                        "connection closed mid-head: {:?}",
                        String::from_utf8_lossy(&self.buf)
                    ))
                }
                Ok(_) => {}
                Err(e) => return Err(format!("read error: {e}")),
            }
        }
        Err("too many reads for one head".into())
    }

    fn read_exact_body(&mut self, len: usize, deadline: Instant) -> Result<Vec<u8>, String> {
        if len > MAX_BODY {
            return Err(format!("body of {len} bytes is too large"));
        }
        for _ in 0..100_000 {
            if self.buf.len() >= len {
                return Ok(self.buf.drain(..len).collect());
            }
            if Instant::now() > deadline {
                return Err("timed out reading a body".into());
            }
            match self.fill() {
                Ok(0) => return Err("connection closed mid-body".into()),
                Ok(_) => {}
                Err(e) => return Err(format!("read error: {e}")),
            }
        }
        Err("too many reads for one body".into())
    }

    fn read_line(&mut self, deadline: Instant) -> Result<Vec<u8>, String> {
        for _ in 0..100_000 {
            if let Some(end) = find(&self.buf, b"\r\n") {
                let mut line: Vec<u8> = self.buf.drain(..end + 2).collect();
                line.truncate(end);
                return Ok(line);
            }
            if self.buf.len() > MAX_HEAD || Instant::now() > deadline {
                return Err("bad or slow chunk line".into());
            }
            match self.fill() {
                Ok(0) => return Err("connection closed mid-chunk".into()),
                Ok(_) => {}
                Err(e) => return Err(format!("read error: {e}")),
            }
        }
        Err("too many reads for one line".into())
    }

    fn read_chunked(&mut self, deadline: Instant) -> Result<Vec<u8>, String> {
        let mut body = Vec::new();
        for _ in 0..100_000 {
            let line = self.read_line(deadline)?;
            let line = String::from_utf8_lossy(&line);
            let size = line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size, 16)
                .map_err(|e| format!("bad chunk size {size:?}: {e}"))?;
            if size == 0 {
                // Trailers, up to the blank line.
                for _ in 0..1000 {
                    if self.read_line(deadline)?.is_empty() {
                        return Ok(body);
                    }
                }
                return Err("too many trailers".into());
            }
            if body.len() + size > MAX_BODY {
                return Err("chunked body too large".into());
            }
            body.extend(self.read_exact_body(size, deadline)?);
            if !self.read_line(deadline)?.is_empty() {
                return Err("chunk not followed by CRLF".into());
            }
        }
        Err("too many chunks".into())
    }

    fn read_to_close(&mut self, deadline: Instant) -> Result<Vec<u8>, String> {
        for _ in 0..100_000 {
            if self.buf.len() > MAX_BODY {
                return Err("close-delimited body too large".into());
            }
            if Instant::now() > deadline {
                return Err("timed out reading to close".into());
            }
            match self.fill() {
                Ok(0) => return Ok(std::mem::take(&mut self.buf)),
                Ok(_) => {}
                Err(e) => return Err(format!("read error: {e}")),
            }
        }
        Err("too many reads to close".into())
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Splits a head into its first line and its headers (names lower-cased, values trimmed).
fn parse_head(head: &[u8]) -> (String, Vec<(String, String)>) {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or("").to_string();
    let headers = lines
        .filter(|l| !l.is_empty())
        .filter_map(|l| {
            let (name, value) = l.split_once(':')?;
            Some((name.trim().to_ascii_lowercase(), value.trim().to_string()))
        })
        .collect();
    (first, headers)
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    let name = name.to_ascii_lowercase();
    headers
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.as_str())
}

fn is_chunked(headers: &[(String, String)]) -> bool {
    header(headers, "transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
}

fn content_length(headers: &[(String, String)]) -> Result<Option<usize>, String> {
    match header(headers, "content-length") {
        Some(v) => v
            .parse()
            .map(Some)
            .map_err(|e| format!("bad content-length {v:?}: {e}")),
        None => Ok(None),
    }
}

// ------------------------------------------------------------------------------------------------
// Origin

/// A request as the origin received it.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    /// The request target exactly as sent on the wire.
    pub target: String,
    /// Lower-cased names, in order, duplicates kept.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    /// The robots.txt fetches robotsguard makes itself (User-Agent `robotsguard/...`).
    pub fn is_robots_fetch(&self) -> bool {
        self.header("user-agent")
            .is_some_and(|ua| ua.starts_with("robotsguard/"))
    }
}

#[derive(Clone)]
struct Route {
    status: u16,
    body: Vec<u8>,
    /// Wait this long before answering.
    delay: Duration,
    /// More header lines, each ending in CRLF.
    extra_headers: String,
}

#[derive(Default)]
struct OriginState {
    routes: Mutex<HashMap<String, Route>>,
    received: Mutex<Vec<Received>>,
}

/// A real HTTP/1.1 origin on `127.0.0.1:0`. Any path answers 200 `origin: <target>` unless
/// configured otherwise with [`Origin::route`] or [`Origin::robots`].
pub struct Origin {
    addr: SocketAddr,
    state: Arc<OriginState>,
    stop: Arc<AtomicBool>,
}

impl Origin {
    pub fn start() -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").expect("origin binds 127.0.0.1:0");
        let addr = listener.local_addr().expect("origin has an address");
        let state = Arc::new(OriginState::default());
        let stop = Arc::new(AtomicBool::new(false));
        {
            let state = state.clone();
            let stop = stop.clone();
            thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let state = state.clone();
                    let stop = stop.clone();
                    thread::spawn(move || serve_connection(stream, &state, &stop));
                }
            });
        }
        Origin { addr, state, stop }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Answers `path` (the exact request target) with `status` and `body`.
    pub fn route(&self, path: &str, status: u16, body: &str) -> &Origin {
        self.route_delayed(path, status, body, Duration::ZERO)
    }

    /// As [`Origin::route`], answering only after `delay`.
    pub fn route_delayed(&self, path: &str, status: u16, body: &str, delay: Duration) -> &Origin {
        self.state.routes.lock().expect("routes lock").insert(
            path.to_string(),
            Route {
                status,
                body: body.as_bytes().to_vec(),
                delay,
                extra_headers: String::new(),
            },
        );
        self
    }

    /// As [`Origin::route`], with one more response header.
    pub fn route_with_header(
        &self,
        path: &str,
        status: u16,
        body: &str,
        header: (&str, &str),
    ) -> &Origin {
        self.state.routes.lock().expect("routes lock").insert(
            path.to_string(),
            Route {
                status,
                body: body.as_bytes().to_vec(),
                delay: Duration::ZERO,
                extra_headers: format!("{}: {}\r\n", header.0, header.1),
            },
        );
        self
    }

    /// As [`Origin::route`], with more response header lines, in order (repeats kept); a
    /// `content-type` among them replaces the default `text/plain`.
    pub fn route_with_headers(
        &self,
        path: &str,
        status: u16,
        body: &[u8],
        headers: &[(&str, &str)],
    ) -> &Origin {
        let extra_headers: String = headers
            .iter()
            .map(|(name, value)| format!("{name}: {value}\r\n"))
            .collect();
        self.state.routes.lock().expect("routes lock").insert(
            path.to_string(),
            Route {
                status,
                body: body.to_vec(),
                delay: Duration::ZERO,
                extra_headers,
            },
        );
        self
    }

    /// Answers `/robots.txt` with `status` and `body`.
    pub fn robots(&self, status: u16, body: &str) -> &Origin {
        self.route("/robots.txt", status, body)
    }

    /// Every request received, robotsguard's own robots.txt fetches included.
    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().expect("received lock").clone()
    }

    /// The requests proxied on behalf of clients (robotsguard's own robots.txt fetches left out).
    pub fn proxied(&self) -> Vec<Received> {
        self.received()
            .into_iter()
            .filter(|r| !r.is_robots_fetch())
            .collect()
    }

    /// Proxied requests for exactly this target.
    pub fn proxied_to(&self, target: &str) -> Vec<Received> {
        self.proxied()
            .into_iter()
            .filter(|r| r.target == target)
            .collect()
    }

    /// How many robots.txt fetches robotsguard made.
    pub fn robots_fetches(&self) -> usize {
        self.received()
            .iter()
            .filter(|r| r.is_robots_fetch())
            .count()
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        301 => "Moved Permanently",
        403 => "Forbidden",
        404 => "Not Found",
        410 => "Gone",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Whatever",
    }
}

fn serve_connection(stream: TcpStream, state: &OriginState, stop: &AtomicBool) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    let _ = stream.set_nodelay(true);
    let mut wire = Wire::new(stream);
    for _ in 0..10_000 {
        if stop.load(Ordering::Acquire) {
            return;
        }
        // Idle keep-alive connections wait up to the read timeout for the next request.
        let deadline = Instant::now() + Duration::from_secs(30);
        let Ok(Some(head)) = wire.read_head(deadline) else {
            return;
        };
        let (line, headers) = parse_head(&head);
        let mut parts = line.split(' ');
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("").to_string();
        let deadline = Instant::now() + IO_TIMEOUT;
        let body = if is_chunked(&headers) {
            wire.read_chunked(deadline)
        } else {
            match content_length(&headers) {
                Ok(Some(len)) => wire.read_exact_body(len, deadline),
                Ok(None) => Ok(Vec::new()),
                Err(e) => Err(e),
            }
        };
        let Ok(body) = body else { return };
        let close = header(&headers, "connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let route = state
            .routes
            .lock()
            .expect("routes lock")
            .get(&target)
            .cloned()
            .unwrap_or_else(|| Route {
                status: 200,
                body: format!("origin: {target}").into_bytes(),
                delay: Duration::ZERO,
                extra_headers: String::new(),
            });
        state
            .received
            .lock()
            .expect("received lock")
            .push(Received {
                method: method.clone(),
                target,
                headers,
                body,
            });
        if !route.delay.is_zero() {
            thread::sleep(route.delay);
        }
        let typed = route
            .extra_headers
            .to_ascii_lowercase()
            .contains("content-type:");
        let mut out = format!(
            "HTTP/1.1 {} {}\r\n{}content-length: {}\r\nx-origin: yes\r\n{}{}\r\n",
            route.status,
            reason(route.status),
            if typed {
                ""
            } else {
                "content-type: text/plain\r\n"
            },
            route.body.len(),
            route.extra_headers,
            if close { "connection: close\r\n" } else { "" }
        )
        .into_bytes();
        if method != "HEAD" {
            out.extend_from_slice(&route.body);
        }
        if wire.stream.write_all(&out).is_err() || close {
            let _ = wire.stream.shutdown(Shutdown::Both);
            return;
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Client

/// A request to send with [`Conn::send`].
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn new(method: &str, target: &str) -> Request {
        Request {
            method: method.to_string(),
            target: target.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    pub fn get(target: &str) -> Request {
        Request::new("GET", target)
    }

    pub fn header(mut self, name: &str, value: &str) -> Request {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn host(self, host: &str) -> Request {
        self.header("Host", host)
    }

    pub fn ua(self, user_agent: &str) -> Request {
        self.header("User-Agent", user_agent)
    }

    /// Sets the body and its Content-Length.
    pub fn body(mut self, body: &[u8]) -> Request {
        self.body = body.to_vec();
        let len = body.len().to_string();
        self.header("Content-Length", &len)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = format!("{} {} HTTP/1.1\r\n", self.method, self.target).into_bytes();
        for (name, value) in &self.headers {
            out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.body);
        out
    }
}

/// A response read by [`Conn`].
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Lower-cased names, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("response is not JSON ({e}): {}", self.text()))
    }
}

/// How long until the proxy closes `stream` (reading and discarding what it sends), or `None`
/// if it is still open after `wait`.
pub fn closed_within(stream: &mut TcpStream, wait: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        let left = wait.saturating_sub(started.elapsed());
        if left.is_zero() {
            return None;
        }
        let _ = stream.set_read_timeout(Some(left.min(Duration::from_millis(100))));
        match stream.read(&mut buf) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return Some(started.elapsed()),
        }
    }
}

/// One client connection.
pub struct Conn {
    wire: Wire,
}

impl Conn {
    pub fn open(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
            .unwrap_or_else(|e| panic!("cannot connect to {addr}: {e}"));
        stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("read timeout");
        stream
            .set_write_timeout(Some(IO_TIMEOUT))
            .expect("write timeout");
        let _ = stream.set_nodelay(true);
        Conn {
            wire: Wire::new(stream),
        }
    }

    /// Sends a request and reads its response (no body for HEAD).
    pub fn send(&mut self, request: &Request) -> Response {
        self.write(&request.to_bytes());
        self.read_response(request.method == "HEAD")
            .unwrap_or_else(|e| panic!("{} {}: {e}", request.method, request.target))
    }

    /// The connection itself, once every answer read from it is whole (nothing is buffered).
    pub fn into_stream(self) -> TcpStream {
        self.wire.stream
    }

    /// Sends raw bytes.
    pub fn write(&mut self, bytes: &[u8]) {
        self.wire
            .stream
            .write_all(bytes)
            .unwrap_or_else(|e| panic!("cannot send: {e}"));
    }

    /// Reads one response: Content-Length, chunked or close-delimited body.
    pub fn read_response(&mut self, head_request: bool) -> Result<Response, String> {
        let deadline = Instant::now() + Duration::from_secs(15);
        let head = self
            .wire
            .read_head(deadline)?
            .ok_or_else(|| "connection closed before a response".to_string())?;
        let (line, headers) = parse_head(&head);
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse::<u16>().ok())
            .ok_or_else(|| format!("bad status line {line:?}"))?;
        let no_body =
            head_request || status == 204 || status == 304 || (100..200).contains(&status);
        let body = if no_body {
            Vec::new()
        } else if is_chunked(&headers) {
            self.wire.read_chunked(deadline)?
        } else if let Some(len) = content_length(&headers)? {
            self.wire.read_exact_body(len, deadline)?
        } else {
            self.wire.read_to_close(deadline)?
        };
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}

/// Sends raw bytes on a fresh connection and reads what comes back: a response, or an error when
/// the connection is closed (or times out) without one.
pub fn raw(addr: SocketAddr, bytes: &[u8]) -> Result<Response, String> {
    let mut conn = Conn::open(addr);
    conn.write(bytes);
    conn.read_response(false)
}

/// One GET on a fresh connection.
pub fn get(addr: SocketAddr, target: &str) -> Response {
    Conn::open(addr).send(&Request::get(target).host(&addr.to_string()))
}

// ------------------------------------------------------------------------------------------------
// Metrics

/// Parses `name{a="b",c="d"} value` lines of the Prometheus text format for `name`.
pub fn samples(text: &str, name: &str) -> Vec<(HashMap<String, String>, f64)> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let (labels, value) = if let Some(rest) = rest.strip_prefix('{') {
            let Some(end) = rest.rfind('}') else { continue };
            (parse_labels(&rest[..end]), rest[end + 1..].trim())
        } else if rest.starts_with(' ') {
            (HashMap::new(), rest.trim())
        } else {
            continue; // a longer metric name with this prefix
        };
        let value = value.split(' ').next().unwrap_or("");
        if let Ok(value) = value.parse::<f64>() {
            out.push((labels, value));
        }
    }
    out
}

fn parse_labels(text: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut rest = text;
    for _ in 0..100 {
        let Some((name, after)) = rest.split_once("=\"") else {
            break;
        };
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(if escaped == 'n' { '\n' } else { escaped });
                    }
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        out.insert(
            name.trim().trim_start_matches(',').trim().to_string(),
            value,
        );
        rest = &after[end..];
    }
    out
}

/// The sum of the samples of `name` whose labels include all of `labels` (0 when none match).
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    samples(text, name)
        .into_iter()
        .filter(|(have, _)| {
            labels
                .iter()
                .all(|(k, v)| have.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, value)| value)
        .sum()
}

// ------------------------------------------------------------------------------------------------
// Proxy

/// A running `robotsguard serve`, killed on drop.
pub struct Proxy {
    child: Child,
    /// The proxy listener.
    pub addr: SocketAddr,
    /// The admin listener.
    pub admin: SocketAddr,
    pub dir: tempfile::TempDir,
    stderr: PathBuf,
}

/// Where the proxy's stdout goes, in its temp dir.
pub const STDOUT_LOG: &str = "stdout.log";

/// The admin token file [`ProxyBuilder::admin_token`] writes.
const ADMIN_TOKEN_FILE: &str = "admin-token";
/// The read-only token's file (`admin.read_token_file`), with [`ADMIN_TOKEN_FILE`].
const READ_TOKEN_FILE: &str = "read-token";

/// The CrowdSec bouncer keys' file (`admin.bouncer_keys_file`) [`ProxyBuilder::bouncer_keys`]
/// writes.
pub const BOUNCER_KEYS_FILE: &str = "bouncer-keys";

/// How to start a [`Proxy`]: its config body, files beside the config, listener keys, tokens.
pub struct ProxyBuilder {
    body: String,
    files: Vec<(String, String)>,
    wait_ready: bool,
    listener_extra: String,
    second: String,
}

impl ProxyBuilder {
    /// Writes `files` (relative path, content) into the temp dir next to the config first, so
    /// relative paths in the config find them.
    pub fn files(mut self, files: &[(&str, &str)]) -> ProxyBuilder {
        self.files
            .extend(files.iter().map(|(p, c)| (p.to_string(), c.to_string())));
        self
    }

    /// More keys on the proxy listener (e.g. `proxy_protocol: true`).
    pub fn listener(mut self, extra: &str) -> ProxyBuilder {
        self.listener_extra = extra.to_string();
        self
    }

    /// Another `listen` entry after the proxy listener (e.g. a TLS listener).
    pub fn second_listener(mut self, entry: &str) -> ProxyBuilder {
        self.second = entry.to_string();
        self
    }

    /// An admin listener that wants `Authorization: Bearer <token>` (`admin.token_file`).
    pub fn admin_token(self, token: &str) -> ProxyBuilder {
        self.files(&[(ADMIN_TOKEN_FILE, token)])
    }

    /// A read-only token besides the admin one (`admin.read_token_file`).
    pub fn read_token(self, token: &str) -> ProxyBuilder {
        self.files(&[(READ_TOKEN_FILE, token)])
    }

    /// Bouncer keys for the decision stream (`admin.bouncer_keys_file`), one a line.
    pub fn bouncer_keys(self, keys: &str) -> ProxyBuilder {
        self.files(&[(BOUNCER_KEYS_FILE, keys)])
    }

    /// Returns once the admin listener answers `/healthz`, without waiting for `/readyz`.
    pub fn unready(mut self) -> ProxyBuilder {
        self.wait_ready = false;
        self
    }

    /// Starts it.
    pub fn start(self) -> Proxy {
        let files: Vec<(&str, &str)> = self
            .files
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
            .collect();
        Proxy::launch_with(
            &self.body,
            &files,
            self.wait_ready,
            &self.listener_extra,
            &self.second,
        )
    }
}

/// `robotsguard_violations_total` of `crawler` on the origin `shop`, by whether the client read
/// robots.txt (`read`: `yes` or `no`), in the metrics page `text`.
pub fn shop_violations(text: &str, crawler: &str, read: &str) -> f64 {
    metric(
        text,
        "robotsguard_violations_total",
        &[
            ("origin", "shop"),
            ("crawler", crawler),
            ("read_robots", read),
        ],
    )
}

/// A free port on 127.0.0.1 (bound and released; another process could take it, so
/// [`Proxy::start`] retries on a bind failure).
pub fn free_port() -> u16 {
    // The kernel may hand the same free port to two binds in a row once the first listener is
    // closed; a port this process handed out recently is never handed out again.
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    for _ in 0..64 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
        if !handed_out.contains(&port) {
            if handed_out.len() >= 4096 {
                handed_out.remove(0);
            }
            handed_out.push(port);
            return port;
        }
    }
    panic!("no free port that was not handed out already");
}

/// YAML text for one origin serving `host` through `origin`, with `extra` origin keys (each line
/// indented by four spaces, e.g. `"    mode: report\n"`).
pub fn site(origin: &Origin, host: &str, extra: &str) -> String {
    format!(
        "origins:\n  - name: shop\n    hosts: [\"{host}\"]\n    upstream: \"{}\"\n{extra}",
        origin.addr()
    )
}

/// The `robots:` key of an origin with an inline robots.txt.
pub fn inline_robots(text: &str) -> String {
    format!(
        "    robots:\n      source: inline\n      text: {}\n",
        serde_json::to_string(text).expect("a string serialises")
    )
}

impl Proxy {
    /// Starts the proxy with `body` (the config without `listen`, `admin`, `threads` and
    /// `shutdown`, which the harness adds; `{dir}` is replaced by the temp dir) and waits until
    /// `/readyz` answers 200. [`Proxy::builder`] for files, listeners and tokens.
    pub fn start(body: &str) -> Proxy {
        Proxy::builder(body).start()
    }

    /// A proxy to start with more than a config body.
    pub fn builder(body: &str) -> ProxyBuilder {
        ProxyBuilder {
            body: body.to_string(),
            files: Vec::new(),
            wait_ready: true,
            listener_extra: String::new(),
            second: String::new(),
        }
    }

    /// `second`: another `listen` entry after the proxy listener, or empty.
    fn launch_with(
        body: &str,
        files: &[(&str, &str)],
        wait_ready: bool,
        listener_extra: &str,
        second: &str,
    ) -> Proxy {
        let mut last_error = String::new();
        for _ in 0..3 {
            match Proxy::try_start(body, files, wait_ready, listener_extra, second) {
                Ok(proxy) => return proxy,
                // Another process may have taken a port between picking and binding it.
                Err((stderr, true)) => last_error = stderr,
                Err((stderr, false)) => panic!("robotsguard did not start:\n{stderr}"),
            }
        }
        panic!("robotsguard did not start after 3 attempts:\n{last_error}");
    }

    /// `Err((stderr, retryable))`.
    fn try_start(
        body: &str,
        files: &[(&str, &str)],
        wait_ready: bool,
        listener_extra: &str,
        second: &str,
    ) -> Result<Proxy, (String, bool)> {
        let dir = tempfile::tempdir().expect("temp dir");
        let second = if second.is_empty() {
            String::new()
        } else {
            format!(", {second}")
        };
        for (name, content) in files {
            let path = dir.path().join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).expect("file's directory created");
            }
            std::fs::write(&path, content).expect("file written");
        }
        let listen = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let body = body.replace("{dir}", &dir.path().to_string_lossy());
        let has = |file: &str| files.iter().any(|(name, _)| *name == file);
        let mut admin_keys = String::new();
        if has(ADMIN_TOKEN_FILE) {
            admin_keys.push_str(&format!(", token_file: {ADMIN_TOKEN_FILE}"));
            if has(READ_TOKEN_FILE) {
                admin_keys.push_str(&format!(", read_token_file: {READ_TOKEN_FILE}"));
            }
        }
        if has(BOUNCER_KEYS_FILE) {
            admin_keys.push_str(&format!(", bouncer_keys_file: {BOUNCER_KEYS_FILE}"));
        }
        let admin_line = if admin_keys.is_empty() {
            format!("\"{admin}\"")
        } else {
            format!("{{address: \"{admin}\"{admin_keys}}}")
        };
        let listen_line = if listener_extra.is_empty() {
            format!("\"{listen}\"")
        } else {
            format!("{{address: \"{listen}\", {listener_extra}}}")
        };
        let config = format!(
            "listen: [{listen_line}{second}]\nadmin: {admin_line}\nthreads: 1\nshutdown: {{grace: 1s}}\n{body}"
        );
        let config_path = dir.path().join("robotsguard.yaml");
        std::fs::write(&config_path, &config).expect("config written");
        let stderr = dir.path().join("stderr.log");
        let stderr_file = std::fs::File::create(&stderr).expect("stderr file");
        let stdout_file = std::fs::File::create(dir.path().join(STDOUT_LOG)).expect("stdout file");
        let child = Command::new(env!("CARGO_BIN_EXE_robotsguard"))
            .arg("serve")
            .arg("--config")
            .arg(&config_path)
            .arg("--upgrade-socket")
            .arg(dir.path().join("upgrade.sock"))
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(stdout_file)
            .stderr(stderr_file)
            .spawn()
            .expect("the robotsguard binary starts");
        let mut proxy = Proxy {
            child,
            addr: listen,
            admin,
            dir,
            stderr,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        for _ in 0..1000 {
            if let Ok(Some(status)) = proxy.child.try_wait() {
                let log = proxy.stderr();
                let retry = log.contains("in use") || log.contains("bind");
                return Err((
                    format!("exited with {status}\nconfig:\n{config}\n{log}"),
                    retry,
                ));
            }
            let probe = if wait_ready { "/readyz" } else { "/healthz" };
            if proxy.admin_status(probe) == Some(200) && proxy.listening() {
                return Ok(proxy);
            }
            if Instant::now() > deadline {
                let log = proxy.stderr();
                return Err((
                    format!("not ready within 20 s\nconfig:\n{config}\n{log}"),
                    false,
                ));
            }
            thread::sleep(Duration::from_millis(50));
        }
        Err(("not ready after 1000 polls".into(), false))
    }

    /// The status of a GET on the admin listener, `None` when it does not answer (yet).
    pub fn admin_status(&self, target: &str) -> Option<u16> {
        let stream = TcpStream::connect_timeout(&self.admin, Duration::from_millis(500)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        let mut conn = Conn {
            wire: Wire::new(stream),
        };
        let request = Request::get(target)
            .host(&self.admin.to_string())
            .header("Connection", "close");
        conn.wire.stream.write_all(&request.to_bytes()).ok()?;
        conn.read_response(false).ok().map(|r| r.status)
    }

    fn listening(&self) -> bool {
        TcpStream::connect_timeout(&self.addr, Duration::from_millis(500)).is_ok()
    }

    /// What the proxy logged so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// What the proxy wrote to stdout so far (access lines with `access_log.path: stdout`).
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(self.dir.path().join(STDOUT_LOG)).unwrap_or_default()
    }

    /// A new connection to the proxy listener.
    pub fn conn(&self) -> Conn {
        Conn::open(self.addr)
    }

    /// A GET through the proxy on a fresh connection.
    pub fn get(&self, host: &str, path: &str, user_agent: &str) -> Response {
        self.send(&Request::get(path).host(host).ua(user_agent))
    }

    /// Any request through the proxy on a fresh connection.
    pub fn send(&self, request: &Request) -> Response {
        self.conn().send(request)
    }

    /// Raw bytes to the proxy listener on a fresh connection.
    pub fn raw(&self, bytes: &[u8]) -> Result<Response, String> {
        raw(self.addr, bytes)
    }

    /// A GET on the admin listener.
    pub fn admin_get(&self, target: &str) -> Response {
        get(self.admin, target)
    }

    pub fn metrics(&self) -> String {
        let response = self.admin_get("/metrics");
        assert_eq!(response.status, 200, "/metrics: {}", response.text());
        response.text()
    }

    /// Polls `/metrics` until the sample reaches `want` (metrics are counted after the response
    /// is written, so a test may look a moment early) or 5 s pass; returns the last value.
    pub fn wait_metric(&self, name: &str, labels: &[(&str, &str)], want: f64) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut value = 0.0;
        for _ in 0..200 {
            value = metric(&self.metrics(), name, labels);
            if value >= want || Instant::now() > deadline {
                break;
            }
            thread::sleep(Duration::from_millis(25));
        }
        value
    }

    /// `/explain?host=&ua=&path=` as JSON.
    /// `/explain` for a request from `client`.
    pub fn explain_from(
        &self,
        host: &str,
        user_agent: &str,
        path: &str,
        client: &str,
    ) -> (u16, serde_json::Value) {
        let query: String = [
            ("host", host),
            ("ua", user_agent),
            ("path", path),
            ("client", client),
        ]
        .iter()
        .map(|(k, v)| format!("{k}={}", percent_encode(v)))
        .collect::<Vec<_>>()
        .join("&");
        let response = self.admin_get(&format!("/explain?{query}"));
        (response.status, response.json())
    }

    pub fn explain(&self, host: &str, user_agent: &str, path: &str) -> (u16, serde_json::Value) {
        let query: String = [("host", host), ("ua", user_agent), ("path", path)]
            .iter()
            .map(|(k, v)| format!("{k}={}", percent_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let response = self.admin_get(&format!("/explain?{query}"));
        (response.status, response.json())
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if thread::panicking() {
            eprintln!("---- robotsguard stderr ----\n{}", self.stderr());
        }
    }
}

/// Percent-encodes everything but unreserved characters.
pub fn percent_encode(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

// Live-operations helpers (reload, signals, custom launches), kept apart from the core harness.
pub mod dns;
// A real HTTP proxy (tinyproxy) that fetches of range lists can be tunnelled through.
pub mod http_proxy;
pub mod live;
// Real origins that read a request target as a server or app would: stock nginx, and an app
// resolving it with WHATWG URL parsing.
pub mod nginx;
// The programs above and curl, openssl, kill: the system's, or Debian's fetched without root.
pub mod programs;
pub mod redis;
pub mod relay;
pub mod tls;
pub mod trickle;
pub mod whatwg;
