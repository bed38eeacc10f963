//! `robotsguard demo`: an embedded demo origin, the proxy and the admin endpoint on loopback, with
//! curl lines to try. What a newcomer runs first.

use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::Path;

use async_trait::async_trait;
use http::Response;
use pingora::apps::http_app::ServeHttp;
use pingora::protocols::http::ServerSession;
use pingora::server::{ListenFds, ShutdownWatch};
use pingora::services::listening::Service as ListeningService;
use pingora::services::{ServiceReadyNotifier, ServiceWithDependents};

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

/// The demo site: its robots.txt, and a small page for every other path.
struct DemoOrigin;

#[async_trait]
impl ServeHttp for DemoOrigin {
    async fn response(&self, session: &mut ServerSession) -> Response<Vec<u8>> {
        let path = session.req_header().uri.path();
        let (content_type, body) = if path == "/robots.txt" {
            ("text/plain; charset=utf-8", DEMO_ROBOTS_TXT.to_string())
        } else {
            ("text/html; charset=utf-8", page(path))
        };
        Response::builder()
            .status(200)
            .header("content-type", content_type)
            .header("content-length", body.len())
            .header("server", "robotsguard-demo-origin")
            .body(body.into_bytes())
            .unwrap_or_else(|_| Response::new(Vec::new()))
    }
}

/// The demo origin's listener, ready for the services that depend on it (the robots.txt
/// refresher among them) only once it accepts connections, so the first robots.txt fetch cannot
/// find the port still closed.
struct DemoOriginService {
    listener: ListeningService<DemoOrigin>,
    address: SocketAddr,
}

#[async_trait]
impl ServiceWithDependents for DemoOriginService {
    async fn start_service(
        &mut self,
        fds: Option<ListenFds>,
        shutdown: ShutdownWatch,
        listeners_per_fd: usize,
        ready: ServiceReadyNotifier,
    ) {
        let address = self.address;
        tokio::spawn(async move {
            // Bounded: after five seconds the dependents start anyway (and retry their fetch).
            for _ in 0..500 {
                if tokio::net::TcpStream::connect(address).await.is_ok() {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            ready.notify_ready();
        });
        pingora::services::Service::start_service(
            &mut self.listener,
            fds,
            shutdown,
            listeners_per_fd,
        )
        .await;
    }

    fn name(&self) -> &str {
        "demo origin"
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
    let mut listener = ListeningService::new("demo origin".to_string(), DemoOrigin);
    listener.add_tcp(&origin_address.to_string());
    let origin = DemoOriginService {
        listener,
        address: origin_address,
    };
    let server = crate::server::build_after(
        guard,
        &crate::server::ServeOptions::default(),
        Some(Box::new(origin)),
    )
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
