//! `robotsguard demo`: an embedded demo origin, the proxy and the admin endpoint on loopback, with
//! curl lines to try. What a newcomer runs first.

use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The demo site's robots.txt: a global group, AI crawlers shut out, Googlebot with its own rules.
pub const DEMO_ROBOTS_TXT: &str = "\
# robots.txt of the robotsguard demo site
User-agent: *
Disallow: /private/
Disallow: /search

User-agent: GPTBot
User-agent: CCBot
Disallow: /

User-agent: Googlebot
Allow: /private/press-kit
Disallow: /private/
";

/// Binds `preferred` on loopback, or any free port when it is taken.
fn free_port(preferred: u16) -> u16 {
    for port in [preferred, 0] {
        if let Ok(listener) = StdListener::bind(("127.0.0.1", port)) {
            if let Ok(address) = listener.local_addr() {
                return address.port();
            }
        }
    }
    preferred
}

/// Serves the demo site on `listener` until the process ends.
pub async fn serve_demo_origin(listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let _ = serve_connection(stream).await;
        });
    }
}

/// One keep-alive HTTP/1.1 connection of the demo origin.
async fn serve_connection(mut stream: TcpStream) -> std::io::Result<()> {
    let mut buffer = Vec::with_capacity(4096);
    loop {
        let head_end = loop {
            if let Some(end) = memchr::memmem::find(&buffer, b"\r\n\r\n") {
                break end + 4;
            }
            if buffer.len() > 64 * 1024 {
                return Ok(());
            }
            let mut chunk = [0u8; 4096];
            let read = stream.read(&mut chunk).await?;
            if read == 0 {
                return Ok(());
            }
            buffer.extend_from_slice(&chunk[..read]);
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let request_line = lines.next().unwrap_or_default();
        let mut parts = request_line.split(' ');
        let method = parts.next().unwrap_or("GET").to_string();
        let target = parts.next().unwrap_or("/").to_string();
        let content_length = lines
            .filter_map(|line| line.split_once(':'))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
            .and_then(|(_, value)| value.trim().parse::<usize>().ok())
            .unwrap_or(0);
        let mut consumed = head_end;
        while buffer.len() < consumed + content_length {
            let mut chunk = [0u8; 4096];
            let read = stream.read(&mut chunk).await?;
            if read == 0 {
                return Ok(());
            }
            buffer.extend_from_slice(&chunk[..read]);
        }
        consumed += content_length;
        buffer.drain(..consumed);
        let path = target.split('?').next().unwrap_or("/");
        let (content_type, body) = if path == "/robots.txt" {
            ("text/plain; charset=utf-8", DEMO_ROBOTS_TXT.to_string())
        } else {
            ("text/html; charset=utf-8", page(path))
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nserver: robotsguard-demo-origin\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await?;
        if method != "HEAD" {
            stream.write_all(body.as_bytes()).await?;
        }
    }
}

fn page(path: &str) -> String {
    let escaped: String = path
        .chars()
        .map(|c| match c {
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '&' => "&amp;".to_string(),
            c => c.to_string(),
        })
        .collect();
    format!("<!doctype html><title>demo {escaped}</title><h1>Demo origin</h1><p>You reached {escaped} on the demo origin.</p>\n")
}

/// Runs the demo: origin, proxy and admin on loopback, until Ctrl-C.
pub fn run() -> Result<(), String> {
    let origin_port = free_port(8081);
    let proxy_port = free_port(8080);
    let admin_port = free_port(9090);
    let origin_address: SocketAddr = ([127, 0, 0, 1], origin_port).into();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the demo origin's runtime: {e}"))?;
    let listener = runtime
        .block_on(TcpListener::bind(origin_address))
        .map_err(|e| format!("cannot listen on {origin_address}: {e}"))?;
    std::thread::spawn(move || runtime.block_on(serve_demo_origin(listener)));

    let yaml = format!(
        "listen: [\"127.0.0.1:{proxy_port}\"]\n\
         admin: \"127.0.0.1:{admin_port}\"\n\
         threads: 2\n\
         shutdown: {{grace: 1s}}\n\
         origins:\n\
         \x20 - name: demo\n\
         \x20   hosts: [\"demo.local\", \"localhost\", \"127.0.0.1\"]\n\
         \x20   upstream: \"127.0.0.1:{origin_port}\"\n\
         \x20   robots: {{source: origin, refresh: 30s}}\n"
    );
    let guard = robotsguard::guard::Guard::from_yaml(&yaml, Path::new("."))
        .map_err(|e| format!("the built-in demo config is invalid (a bug): {e}"))?;
    let server = crate::server::build(guard, &crate::server::ServeOptions::default())
        .map_err(|e| e.to_string())?;

    let proxy = format!("http://127.0.0.1:{proxy_port}");
    let admin = format!("http://127.0.0.1:{admin_port}");
    println!(
        "\nrobotsguard demo\n\
         \x20 demo origin  http://127.0.0.1:{origin_port}  (robots.txt: curl http://127.0.0.1:{origin_port}/robots.txt)\n\
         \x20 proxy        {proxy}\n\
         \x20 admin        {admin}\n\n\
         Try:\n\
         \x20 # a browser passes (200)\n\
         \x20 curl -i -A 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36' {proxy}/private/report\n\
         \x20 # Googlebot may fetch its allowed path (200)\n\
         \x20 curl -i -A 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)' {proxy}/private/press-kit\n\
         \x20 # GPTBot is disallowed everywhere (403, with the reason)\n\
         \x20 curl -i -A 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)' {proxy}/articles/1\n\
         \x20 # robots.txt itself always passes\n\
         \x20 curl -i -A 'GPTBot/1.2' {proxy}/robots.txt\n\
         \x20 # why was that blocked?\n\
         \x20 curl '{admin}/explain?host=localhost&ua=GPTBot/1.2&path=/articles/1'\n\
         \x20 # what was counted\n\
         \x20 curl -s {admin}/metrics | grep robotsguard_requests_total\n\n\
         Ctrl-C stops the demo.\n"
    );
    server.run_forever()
}
