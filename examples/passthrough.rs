//! A bare pingora pass-through proxy — `upstream_peer` only — built from the same pingora version
//! as robotsguard. The reference the proxy benchmark (`bench/proxy-compare.sh`) compares against.
//!
//! ```sh
//! cargo run --release --example passthrough -- 127.0.0.1:18081 127.0.0.1:18080 2
//! cargo run --release --example passthrough -- 127.0.0.1:18443 127.0.0.1:18080 2 cert.pem key.pem
//! ```
//! (listen address, upstream address, worker threads; with a certificate and key, the listener
//! is TLS with HTTP/2 offered by ALPN, as robotsguard's TLS listeners are by default)

use async_trait::async_trait;
use pingora::prelude::*;
use pingora::proxy::{ProxyHttp, Session};
use pingora::server::configuration::{Opt, ServerConf};

// The same allocator as robotsguard's binary (src/bin/robotsguard/main.rs), so the comparison measures the hooks,
// not the allocator.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

struct PassThrough {
    upstream: std::net::SocketAddr,
}

#[async_trait]
impl ProxyHttp for PassThrough {
    type CTX = ();

    fn new_ctx(&self) {}

    async fn upstream_peer(&self, _session: &mut Session, _ctx: &mut ()) -> Result<Box<HttpPeer>> {
        Ok(Box::new(HttpPeer::new(self.upstream, false, String::new())))
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(listen), Some(upstream)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: passthrough LISTEN_ADDR UPSTREAM_ADDR [THREADS [CERT KEY]]");
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
    let mut service = http_proxy_service(&server.configuration, PassThrough { upstream });
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
