//! robotsguard's enforcement in your own pingora proxy: your proxy keeps its own upstream; the
//! guard decides, answers blocked crawlers and keeps robots.txt fresh.
//!
//! ```sh
//! python3 -m http.server 18081 &
//! cargo run --example embed -- config/examples/file-robots.yaml 127.0.0.1:18080 127.0.0.1:18081
//! curl -i -A 'GPTBot/1.2' -H 'Host: shop.example' http://127.0.0.1:18080/products   # 403
//! ```

use async_trait::async_trait;
use pingora::prelude::*;
use pingora::proxy::{ProxyHttp, Session};
use robotsguard::guard::{Guard, GuardContext, UnknownHosts};

struct MyProxy {
    guard: Guard,
    upstream: String,
}

#[async_trait]
impl ProxyHttp for MyProxy {
    type CTX = GuardContext;

    fn new_ctx(&self) -> GuardContext {
        GuardContext::new()
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut GuardContext) -> Result<bool> {
        self.guard.request_filter(session, ctx).await
    }

    async fn upstream_peer(&self, _: &mut Session, _: &mut GuardContext) -> Result<Box<HttpPeer>> {
        Ok(Box::new(HttpPeer::new(
            &self.upstream,
            false,
            String::new(),
        )))
    }

    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        request: &mut RequestHeader,
        ctx: &mut GuardContext,
    ) -> Result<()> {
        self.guard.upstream_request_filter(session, request, ctx)
    }

    async fn logging(&self, session: &mut Session, _: Option<&Error>, ctx: &mut GuardContext) {
        self.guard.logging(session, ctx);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let [config, listen, upstream] =
        <[String; 3]>::try_from(std::env::args().skip(1).collect::<Vec<_>>())
            .map_err(|_| "usage: embed ROBOTSGUARD_CONFIG LISTEN_ADDR UPSTREAM_ADDR")?;
    // Hosts the config does not name are not robotsguard's business: they pass through.
    let guard = Guard::builder()
        .config_file(config)
        .unknown_hosts(UnknownHosts::Pass)
        .build()?;

    let mut server = Server::new(None)?;
    server.bootstrap();
    server.add_services(guard.services());
    let mut proxy = http_proxy_service(&server.configuration, MyProxy { guard, upstream });
    proxy.add_tcp(&listen);
    server.add_service(proxy);
    server.run_forever()
}
