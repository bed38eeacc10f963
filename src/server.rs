//! Assembles the pingora server from a config: the proxy service on the configured listeners, the
//! admin service, and the robots.txt refresher; pingora's defaults that hurt an edge proxy (a 300 s
//! drain on SIGTERM) are replaced by ours.

use std::sync::Arc;

use async_trait::async_trait;
use pingora::server::configuration::{Opt, ServerConf};
use pingora::server::{Server, ShutdownWatch};
use pingora::services::background::{background_service, BackgroundService};
use pingora::services::listening::Service;

use crate::admin::AdminApp;
use crate::config::Config;
use crate::fetch::Refresher;
use crate::proxy::RobotsGuardProxy;
use crate::state::{Live, Snapshot};

/// Options of `serve` that are not part of the config file.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// Take over the listening sockets of a running instance (pingora's graceful upgrade).
    pub upgrade: bool,
    /// Where the upgrade socket lives (both instances must agree).
    pub upgrade_socket: Option<String>,
    /// The config file to watch and reload (`None`: no reloads, as in the demo).
    pub config_path: Option<std::path::PathBuf>,
}

struct RefresherService {
    snapshot: Arc<Live>,
}

#[async_trait]
impl BackgroundService for RefresherService {
    async fn start(&self, shutdown: ShutdownWatch) {
        let refresher = Refresher {
            snapshot: self.snapshot.clone(),
        };
        refresher.run(shutdown).await;
    }
}

/// Why the server could not start.
#[derive(Debug)]
pub struct StartError(pub String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartError {}

/// Builds the server for `config`; call [`Server::run_forever`] on the result.
pub fn build(config: Config, options: &ServeOptions) -> Result<Server, StartError> {
    let config = Arc::new(config);
    let snapshot = Snapshot::build(config.clone(), None).map_err(|e| StartError(e.to_string()))?;
    let snapshot = Arc::new(Live::new(snapshot));

    let mut conf = ServerConf::default();
    if let Some(threads) = config.threads {
        conf.threads = threads;
    } else {
        conf.threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    }
    // pingora waits 300 s after SIGTERM by default; Kubernetes kills pods after 30 s.
    conf.grace_period_seconds = Some(config.shutdown_grace.as_secs());
    conf.graceful_shutdown_timeout_seconds = Some(1);
    conf.upgrade_sock = options
        .upgrade_socket
        .clone()
        .unwrap_or_else(|| format!("/tmp/robotsguard-upgrade-{}.sock", config.admin.port()));
    conf.pid_file = format!("/tmp/robotsguard-{}.pid", config.admin.port());
    let opt = Opt {
        upgrade: options.upgrade,
        ..Opt::default()
    };
    let mut server = Server::new_with_opt_and_conf(opt, conf);
    server.bootstrap();

    let proxy = RobotsGuardProxy {
        snapshot: snapshot.clone(),
    };
    let mut proxy_service = pingora::proxy::http_proxy_service_with_name(
        &server.configuration,
        proxy,
        "robotsguard proxy",
    );
    for listener in &config.listen {
        let address = listener.address.to_string();
        match &listener.tls {
            None => proxy_service.add_tcp(&address),
            Some(tls) => {
                let cert = tls.cert.to_string_lossy();
                let key = tls.key.to_string_lossy();
                proxy_service.add_tls(&address, &cert, &key).map_err(|e| {
                    StartError(format!(
                        "listener {address}: cannot load TLS certificate `{cert}` / key `{key}`: {e}"
                    ))
                })?;
            }
        }
    }
    server.add_service(proxy_service);

    let mut admin = Service::new(
        "robotsguard admin".to_string(),
        AdminApp {
            snapshot: snapshot.clone(),
        },
    );
    admin.add_tcp(&config.admin.to_string());
    server.add_service(admin);

    server.add_service(background_service(
        "robots.txt refresher",
        RefresherService {
            snapshot: snapshot.clone(),
        },
    ));
    server.add_service(background_service(
        "request log rate limit",
        crate::logs::SuppressedLinesReporter,
    ));
    if let Some(path) = &options.config_path {
        // Built here, not when the service starts, so SIGHUP is handled from now on.
        let reloader = crate::reload::ReloadService::new(snapshot, path.clone(), config.clone());
        server.add_service(background_service("config reloader", reloader));
    }

    tracing::info!(
        listen = %config.listen.iter().map(|l| l.address.to_string()).collect::<Vec<_>>().join(", "),
        admin = %config.admin,
        origins = config.origins.len(),
        "robotsguard starting"
    );
    for origin in &config.origins {
        tracing::info!(
            origin = %origin.name,
            hosts = %origin.hosts.join(", "),
            upstream = %origin.upstreams.iter().map(|u| u.raw.as_str()).collect::<Vec<_>>().join(", "),
            mode = origin.mode.as_str(),
            "origin"
        );
    }
    Ok(server)
}
