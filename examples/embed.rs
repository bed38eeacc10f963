//! robotsguard's enforcement inside your own pingora proxy. Your `ProxyHttp` keeps its routing,
//! headers and everything else; `request_filter` asks robotsguard for a decision and answers
//! blocked crawlers. robotsguard's refresher keeps each origin's robots.txt fresh in the
//! background.
//!
//! ```sh
//! python3 -m http.server 18081 &    # any upstream
//! cargo run --example embed -- config/examples/file-robots.yaml 127.0.0.1:18080 127.0.0.1:18081
//! curl -i -A 'GPTBot/1.2' -H 'Host: shop.example' http://127.0.0.1:18080/products   # 403
//! curl -i -A 'Mozilla/5.0' -H 'Host: shop.example' http://127.0.0.1:18080/          # proxied
//! ```
//!
//! The robotsguard config supplies the origins (their hosts, mode, block response and robots.txt
//! source); its `listen`, `admin` and `threads` are ignored because the server here is yours.
//! Hosts the config does not name are not robotsguard's business and pass through.

use std::net::SocketAddr;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::prelude::*;
use pingora::proxy::{ProxyHttp, Session};
use pingora::server::configuration::{Opt, ServerConf};
use pingora::server::ShutdownWatch;
use pingora::services::background::{background_service, BackgroundService};

use robotsguard::enforce::{decide, Outcome};
use robotsguard::fetch::Refresher;
use robotsguard::proxy::block_body;
use robotsguard::state::{Live, Snapshot};

/// Your proxy: one upstream, plus robotsguard's snapshot of origins and robots.txt copies.
struct MyProxy {
    upstream: SocketAddr,
    guard: Arc<Live>,
}

#[async_trait]
impl ProxyHttp for MyProxy {
    type CTX = ();

    fn new_ctx(&self) {}

    async fn request_filter(&self, session: &mut Session, _ctx: &mut ()) -> Result<bool> {
        let request = session.req_header();
        let header = |name: &str| {
            request
                .headers
                .get(name)
                .map_or(&[][..], |value| value.as_bytes())
        };
        let host = header("host").to_vec();
        let user_agent = header("user-agent").to_vec();
        let path = request
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();

        // One lock-free load; the refresher swaps robots.txt copies in behind it.
        let snapshot = self.guard.load();
        let Ok(decision) = decide(&snapshot, &host, &user_agent, path.as_bytes()) else {
            return Ok(false);
        };
        if decision.outcome != Outcome::Blocked {
            return Ok(false);
        }
        let robots_url = format!("http://{}/robots.txt", String::from_utf8_lossy(&host));
        let client = session
            .client_addr()
            .and_then(|addr| addr.as_inet())
            .map_or_else(|| "unknown".to_string(), |addr| addr.ip().to_string());
        let body = Bytes::from(block_body(&decision, &path, &robots_url, &client));
        let mut answer = ResponseHeader::build(decision.origin.config.block.status, Some(3))?;
        answer.insert_header("content-type", "text/plain; charset=utf-8")?;
        answer.insert_header("content-length", body.len().to_string())?;
        answer.insert_header("cache-control", "no-store")?;
        session
            .write_response_header(Box::new(answer), false)
            .await?;
        session.write_response_body(Some(body), true).await?;
        Ok(true)
    }

    async fn upstream_peer(&self, _session: &mut Session, _ctx: &mut ()) -> Result<Box<HttpPeer>> {
        Ok(Box::new(HttpPeer::new(self.upstream, false, String::new())))
    }
}

/// Runs robotsguard's robots.txt refresher as a pingora background service, so it stops with
/// the server.
struct RobotsRefresher {
    guard: Arc<Live>,
}

#[async_trait]
impl BackgroundService for RobotsRefresher {
    async fn start(&self, shutdown: ShutdownWatch) {
        Refresher {
            snapshot: self.guard.clone(),
        }
        .run(shutdown)
        .await;
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [config_path, listen, upstream] = args.as_slice() else {
        eprintln!("usage: embed ROBOTSGUARD_CONFIG LISTEN_ADDR UPSTREAM_ADDR");
        std::process::exit(2);
    };
    let Ok(upstream) = upstream.parse::<SocketAddr>() else {
        eprintln!("UPSTREAM_ADDR must be IP:PORT, got {upstream}");
        std::process::exit(2);
    };
    let config = match robotsguard::config::load_file(config_path.as_ref()) {
        Ok(config) => config,
        Err(errors) => {
            eprintln!("{errors}");
            std::process::exit(1);
        }
    };
    let guard = match Snapshot::build(Arc::new(config), None) {
        Ok(snapshot) => Arc::new(Live::new(snapshot)),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };

    let conf = ServerConf {
        threads: 2,
        // pingora's default drain is 300 s; an example should stop promptly on SIGTERM.
        grace_period_seconds: Some(1),
        graceful_shutdown_timeout_seconds: Some(1),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(Opt::default(), conf);
    server.bootstrap();
    let mut proxy = http_proxy_service(
        &server.configuration,
        MyProxy {
            upstream,
            guard: guard.clone(),
        },
    );
    proxy.add_tcp(listen);
    server.add_service(proxy);
    server.add_service(background_service(
        "robots.txt refresher",
        RobotsRefresher { guard },
    ));
    eprintln!("embed: proxying {listen} -> {upstream} with robotsguard's decisions");
    server.run_forever();
}
