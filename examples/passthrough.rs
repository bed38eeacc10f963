//! A pingora pass-through proxy built from the same pingora version as robotsguard: the reference
//! the proxy benchmarks (`bench/proxy-compare.sh`, `bench/proxy-instructions.sh`,
//! `bench/proxy-tls-h2.sh`) compare against, in two forms.
//!
//! - bare (the default): `upstream_peer` only, no timeout anywhere;
//! - `--production`: the timeouts any proxy facing the Internet must set, with robotsguard's
//!   defaults: upstream connect 5 s, upstream read, write and idle 60 s, per request the client's
//!   body reads, drain and writes 60 s, and the wait for the next request on a kept-alive
//!   connection 60 s (`limits.idle_timeout`; pingora's own default waits for ever). pingora arms a
//!   timer per read and write for each, which a bare pass-through never pays; this is the fair
//!   floor for robotsguard's own cost.
//!
//! ```sh
//! cargo run --release --example passthrough -- 127.0.0.1:18081 127.0.0.1:18080 2
//! cargo run --release --example passthrough -- --production 127.0.0.1:18081 127.0.0.1:18080 2
//! cargo run --release --example passthrough -- 127.0.0.1:18443 127.0.0.1:18080 2 cert.pem key.pem
//! cargo run --release --example passthrough -- --h2c 127.0.0.1:18081 127.0.0.1:18080 2
//! ```
//! (listen address, upstream address, worker threads; with a certificate and key, the listener
//! is TLS with HTTP/2 offered by ALPN, as robotsguard's TLS listeners are by default; with
//! `--h2c`, the plain listener also takes HTTP/2 with prior knowledge, as robotsguard's does with
//! `http2: true`)

use std::time::Duration;

use async_trait::async_trait;
use pingora::prelude::*;
use pingora::proxy::{ProxyHttp, Session};
use pingora::server::configuration::{Opt, ServerConf};

// The same allocator as robotsguard's binary (src/bin/robotsguard/main.rs), so the comparison measures the hooks,
// not the allocator.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: robotsguard::allocator::Allocator = robotsguard::allocator::Allocator;

struct PassThrough {
    upstream: std::net::SocketAddr,
    production: bool,
}

/// robotsguard's default `upstream_timeouts.connect`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// robotsguard's default `upstream_timeouts.read|write|idle` and `limits.body_timeout|idle_timeout`.
const IO_TIMEOUT: Duration = Duration::from_secs(60);

#[async_trait]
impl ProxyHttp for PassThrough {
    type CTX = ();

    fn new_ctx(&self) {}

    async fn request_filter(&self, session: &mut Session, _ctx: &mut ()) -> Result<bool> {
        if self.production {
            session.set_read_timeout(Some(IO_TIMEOUT));
            session.set_total_drain_timeout(Some(IO_TIMEOUT));
            session.set_write_timeout(Some(IO_TIMEOUT));
            // pingora resets it from each request's Connection header (kept alive for ever, for
            // HTTP/1.1), so it is set again on every request.
            session.set_keepalive(Some(IO_TIMEOUT.as_secs()));
        }
        Ok(false)
    }

    async fn upstream_peer(&self, _session: &mut Session, _ctx: &mut ()) -> Result<Box<HttpPeer>> {
        let mut peer = HttpPeer::new(self.upstream, false, String::new());
        if self.production {
            peer.options.connection_timeout = Some(CONNECT_TIMEOUT);
            peer.options.total_connection_timeout = Some(CONNECT_TIMEOUT);
            peer.options.read_timeout = Some(IO_TIMEOUT);
            peer.options.write_timeout = Some(IO_TIMEOUT);
            peer.options.idle_timeout = Some(IO_TIMEOUT);
        }
        Ok(Box::new(peer))
    }
}

fn main() {
    let mut args: Vec<String> = std::env::args().collect();
    let production = args.iter().any(|a| a == "--production");
    let h2c = args.iter().any(|a| a == "--h2c");
    args.retain(|a| a != "--production" && a != "--h2c");
    let (Some(listen), Some(upstream)) = (args.get(1), args.get(2)) else {
        eprintln!(
            "usage: passthrough [--production] [--h2c] LISTEN_ADDR UPSTREAM_ADDR [THREADS [CERT KEY]]"
        );
        std::process::exit(2);
    };
    let Ok(upstream) = upstream.parse() else {
        eprintln!("upstream must be IP:PORT, got {upstream}");
        std::process::exit(2);
    };
    let threads = args.get(3).and_then(|t| t.parse().ok()).unwrap_or(1);
    let conf = ServerConf {
        threads,
        grace_period_seconds: Some(0),
        graceful_shutdown_timeout_seconds: Some(1),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(Opt::default(), conf);
    server.bootstrap();
    let mut service = http_proxy_service(
        &server.configuration,
        PassThrough {
            upstream,
            production,
        },
    );
    if h2c {
        if let Some(proxy) = service.app_logic_mut() {
            // Non-exhaustive: made by `default`, then changed.
            let mut options = pingora::apps::HttpServerOptions::default();
            options.h2c = true;
            proxy.server_options = Some(options);
        }
    }
    match (args.get(4), args.get(5)) {
        (Some(cert), Some(key)) => {
            let mut tls = match pingora::listeners::tls::TlsSettings::intermediate(cert, key) {
                Ok(tls) => tls,
                Err(e) => {
                    eprintln!("cannot use {cert} and {key}: {e}");
                    std::process::exit(2);
                }
            };
            tls.enable_h2();
            service.add_tls_with_settings(listen, None, tls);
        }
        _ => service.add_tcp(listen),
    }
    server.add_service(service);
    server.run_forever();
}
