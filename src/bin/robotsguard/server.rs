//! Assembles the pingora server from a config: the proxy service on the configured listeners, the
//! admin service, and the background tasks. Before anything starts, everything `serve` needs
//! from the machine is checked (sockets bindable, TLS files valid, robots.txt files present), so
//! a bad setting stops `serve` with a clear message instead of leaving a half-alive process; and
//! every service is critical: a service that panics or stops on its own ends the process.

use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use async_trait::async_trait;
use futures::FutureExt;
use pingora::listeners::tls::TlsSettings;
use pingora::listeners::{L4BufferSettings, ListenerConfig};
use pingora::server::configuration::{Opt, ServerConf};
#[cfg(unix)]
use pingora::server::ListenFds;
use pingora::server::{RuntimeOpts, Server, ShutdownWatch};
use pingora::services::background::GenBackgroundService;
use pingora::services::listening::Service as ListeningService;
use pingora::services::{ServiceReadyNotifier, ServiceWithDependents};

use robotsguard::config::Config;
use robotsguard::guard::Guard;
use robotsguard::listener_tls::{CertificateError, ListenerCertificates};
use robotsguard::metrics::METRICS;

use crate::edge::{Carriers, EdgeApp, ListenerAddresses, Slots};
use crate::proxy::RobotsGuardProxy;
use robotsguard::load::InFlight;

/// Options of `serve` that are not part of the config file.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// Take over the listening sockets of a running instance (pingora's graceful upgrade).
    pub upgrade: bool,
    /// Where the upgrade socket lives (both instances must agree).
    pub upgrade_socket: Option<String>,
}

/// Why the server could not start.
#[derive(Debug)]
pub enum StartError {
    /// What the machine lacks for the config, one problem per entry.
    Preflight(Vec<String>),
    /// A listener's TLS certificates could not be loaded.
    Tls {
        listener: String,
        source: CertificateError,
    },
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Preflight(problems) => f.write_str(&problems.join("\n")),
            StartError::Tls { listener, source } => {
                write!(
                    f,
                    "listener {listener}: cannot load its TLS certificates: {source}"
                )
            }
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Preflight(_) => None,
            StartError::Tls { source, .. } => Some(source),
        }
    }
}

/// File descriptors no client can take: robots.txt fetches, the config watcher, the admin
/// listener (`/metrics`, `/healthz`) and its clients, DNS, log output. Client connections,
/// the upstream connection each request in flight holds and the upstream pool are capped to
/// what the open-files limit leaves after these.
const RESERVED_FDS: u64 = 256;

/// Idle upstream connections kept for reuse, in all (pingora's default too), counted in the
/// descriptor budget.
const UPSTREAM_POOL: usize = 128;

/// The default `limits.max_requests_in_flight` is this many times `limits.max_connections`, when
/// the open-files limit leaves room for as many upstream connections...
const REQUESTS_PER_CONNECTION: usize = 4;

/// ...and at most this many (Envoy's default circuit breaker allows as many requests per upstream
/// cluster): a request whose client stops reading holds 70–200 KiB under load (see
/// `robotsguard::load`), so the default keeps such requests under about 200 MiB whatever the
/// open-files limit.
const DEFAULT_MAX_REQUESTS_IN_FLIGHT: usize = 1024;

/// Bytes each client connection buffers reads in: a request head fits (a longer one is read in
/// several), and pingora's body reads (64 KiB) bypass a buffer smaller than themselves, so a larger
/// one only costs memory per connection (about 30 KiB per stalled request, measured).
const DOWNSTREAM_READ_BUFFER: usize = 4 * 1024;

/// The automatic connection cap's ceiling (a larger one must be written in the config).
const DEFAULT_MAX_CONNECTIONS: u64 = 10_000;

/// What the machine must provide for `config`, checked before anything starts: every file the
/// config names ([`robotsguard::preflight::problems`], exactly what `validate` checks) and, with
/// `binds`, that the listen and admin addresses can be bound (not when taking over an old
/// instance's sockets, nor in `validate`, which may run beside a live instance). Every problem is
/// listed.
pub fn preflight(config: &Config, binds: bool) -> Result<(), StartError> {
    let mut problems = robotsguard::preflight::problems(config);
    if binds {
        let addresses = config
            .listen
            .iter()
            .map(|l| ("listen", l.address))
            .chain([("admin", config.admin.address)])
            .chain(
                config
                    .decision
                    .iter()
                    .flat_map(|d| d.listen.iter().map(|a| ("decision", *a))),
            );
        for (what, address) in addresses {
            if let Err(e) = try_bind(address) {
                problems.push(format!("cannot bind the {what} address {address}: {e}"));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(StartError::Preflight(problems))
    }
}

/// Upstream names that do not resolve here: a warning, not an error, since DNS where the proxy
/// runs may differ from where the config is checked.
pub fn resolution_warnings(config: &Config) -> Vec<String> {
    use std::net::ToSocketAddrs;
    let mut warnings = Vec::new();
    for origin in &config.origins {
        for upstream in &origin.upstreams {
            if upstream.host.parse::<std::net::IpAddr>().is_ok() {
                continue;
            }
            let problem = match (upstream.host.as_str(), upstream.port).to_socket_addrs() {
                Ok(addresses) if addresses.len() > 0 => continue,
                Ok(_) => "no address".to_string(),
                Err(e) => e.to_string(),
            };
            warnings.push(format!(
                "origin `{}`: upstream `{}` does not resolve here: {problem}",
                origin.name, upstream.raw
            ));
        }
    }
    warnings
}

/// Binds and releases `address`, as pingora will (std sets address reuse on Unix, so a socket
/// in TIME_WAIT is no obstacle, but one another process listens on is).
fn try_bind(address: SocketAddr) -> std::io::Result<()> {
    std::net::TcpListener::bind(address).map(drop)
}

/// Raises the soft open-files limit to the hard limit (a busy proxy needs two descriptors per
/// proxied request and a 1,024 soft limit is common), logs both, and returns the soft limit now
/// in force.
fn raise_open_files_limit() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        tracing::warn!("cannot read the open-files limit; assuming 1024");
        return 1024;
    };
    let raised = if soft < hard {
        match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => hard,
            Err(e) => {
                tracing::warn!(soft, hard, "cannot raise the open-files limit: {e}");
                soft
            }
        }
    } else {
        soft
    };
    tracing::info!(
        was = soft,
        now = raised,
        hard,
        "open-files limit (soft limit raised to the hard limit)"
    );
    raised
}

/// The cap on requests in flight: the configured one, else [`REQUESTS_PER_CONNECTION`] times the
/// connection cap but no more than the upstream connections the open-files limit has room for
/// beside the client connections, the upstream pool and the reserved descriptors, nor than
/// [`DEFAULT_MAX_REQUESTS_IN_FLIGHT`].
fn in_flight_cap(config: &Config, open_files: u64, max_connections: usize) -> usize {
    let room = open_files
        .saturating_sub(RESERVED_FDS)
        .saturating_sub(max_connections as u64)
        .saturating_sub(UPSTREAM_POOL as u64);
    let room = usize::try_from(room).unwrap_or(usize::MAX);
    match config.limits.max_requests_in_flight {
        Some(configured) => {
            if configured > room {
                tracing::warn!(
                    max_requests_in_flight = configured,
                    max_connections,
                    open_files,
                    "limits.max_requests_in_flight is more than the open-files limit leaves room \
                     for beside limits.max_connections; under load upstream connections may fail"
                );
            }
            configured
        }
        None => max_connections
            .saturating_mul(REQUESTS_PER_CONNECTION)
            .min(room)
            .clamp(1, DEFAULT_MAX_REQUESTS_IN_FLIGHT),
    }
}

/// The places one client may hold under the cap on requests in flight (`max`): the configured
/// share (at most `max`, which turns sharing off), else [`robotsguard::load::default_per_client`].
fn per_client_share(config: &Config, max: usize) -> usize {
    match config.limits.max_requests_in_flight_per_client {
        Some(configured) if configured > max => {
            // Only with a derived process cap: validate refuses more than a configured one.
            tracing::warn!(
                max_requests_in_flight_per_client = configured,
                max_requests_in_flight = max,
                "limits.max_requests_in_flight_per_client is more than the cap on requests in \
                 flight derived at start; one client may hold every place"
            );
            max
        }
        Some(configured) => configured,
        None => robotsguard::load::default_per_client(max),
    }
}

/// The downstream connection cap: the configured one, else what the open-files limit allows
/// with room for the upstream connection each proxied request needs.
fn connection_cap(config: &Config, open_files: u64) -> usize {
    let room = open_files.saturating_sub(RESERVED_FDS) / 2;
    match config.limits.max_connections {
        Some(configured) => {
            if configured as u64 > room {
                tracing::warn!(
                    max_connections = configured,
                    open_files,
                    "limits.max_connections is more than the open-files limit leaves room for; \
                     accept() may fail under load"
                );
            }
            configured
        }
        None => usize::try_from(room.clamp(1, DEFAULT_MAX_CONNECTIONS)).unwrap_or(1),
    }
}

/// A service whose end (panic, or return before shutdown) ends the process with exit code 1:
/// a proxy whose listener died must not keep answering health checks.
struct Critical {
    inner: Box<dyn ServiceWithDependents>,
}

#[async_trait]
impl ServiceWithDependents for Critical {
    async fn start_service(
        &mut self,
        #[cfg(unix)] fds: Option<ListenFds>,
        shutdown: ShutdownWatch,
        listeners_per_fd: usize,
        ready: ServiceReadyNotifier,
    ) {
        let name = self.inner.name().to_string();
        let run = self.inner.start_service(
            #[cfg(unix)]
            fds,
            shutdown.clone(),
            listeners_per_fd,
            ready,
        );
        let ended = AssertUnwindSafe(run).catch_unwind().await;
        let stopping = *shutdown.borrow();
        let why = match ended {
            Err(panic) => {
                let text = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)");
                format!("panicked: {text}")
            }
            Ok(()) if stopping => return,
            Ok(()) => "stopped on its own".to_string(),
        };
        tracing::error!(service = %name, "service {why}; exiting");
        robotsguard::logs::flush(std::time::Duration::from_secs(1));
        std::process::exit(1);
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn threads(&self) -> Option<usize> {
        self.inner.threads()
    }

    fn runtime_opts_override(&self, global: &RuntimeOpts) -> Option<RuntimeOpts> {
        self.inner.runtime_opts_override(global)
    }

    fn listen_addresses(&self) -> Option<Vec<String>> {
        self.inner.listen_addresses()
    }
}

fn critical(inner: Box<dyn ServiceWithDependents>) -> Critical {
    Critical { inner }
}

/// Builds the server for `guard`'s config; call [`Server::run`] on the result.
pub fn build(guard: Guard, options: &ServeOptions) -> Result<Server, StartError> {
    build_after(guard, options, None)
}

/// [`build`], with every service of robotsguard's starting only once `prerequisite` is ready
/// (the demo's origin).
pub fn build_after(
    guard: Guard,
    options: &ServeOptions,
    prerequisite: Option<Box<dyn ServiceWithDependents>>,
) -> Result<Server, StartError> {
    let config = guard.config();
    preflight(&config, !options.upgrade)?;

    let mut conf = ServerConf::default();
    if let Some(threads) = config.threads {
        conf.threads = threads;
    } else {
        conf.threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    }
    // pingora waits 300 s after SIGTERM by default; Kubernetes kills pods after 30 s.
    conf.grace_period_seconds = Some(config.shutdown_grace.as_secs());
    conf.graceful_shutdown_timeout_seconds = Some(1);
    conf.upgrade_sock = options.upgrade_socket.clone().unwrap_or_else(|| {
        format!(
            "/tmp/robotsguard-upgrade-{}.sock",
            config.admin.address.port()
        )
    });
    conf.pid_file = format!("/tmp/robotsguard-{}.pid", config.admin.address.port());
    conf.upstream_keepalive_pool_size = UPSTREAM_POOL;
    let opt = Opt {
        upgrade: options.upgrade,
        ..Opt::default()
    };
    let mut server = Server::new_with_opt_and_conf(opt, conf);
    server.bootstrap();
    // After bootstrap: the writer's thread must be this process's.
    robotsguard::evidence::start(&config)
        .map_err(|e| StartError::Preflight(vec![e.to_string()]))?;

    let open_files = raise_open_files_limit();
    let max_connections = connection_cap(&config, open_files);
    METRICS
        .max_connections
        .set(i64::try_from(max_connections).unwrap_or(i64::MAX));
    let max_in_flight = in_flight_cap(&config, open_files, max_connections);
    let in_flight = InFlight::new(max_in_flight, per_client_share(&config, max_in_flight));
    // EdgeApp serves HTTP/2 connections itself (crate::http2); pingora only serves their
    // sessions.
    let proxy = pingora::proxy::http_proxy(
        &server.configuration,
        RobotsGuardProxy {
            guard: guard.clone(),
        },
    );
    let listeners_where = |wanted: fn(&robotsguard::config::Listener) -> bool| {
        ListenerAddresses::new(
            config
                .listen
                .iter()
                .filter(|l| wanted(l))
                .map(|l| l.address)
                .collect(),
        )
    };
    let proxy_protocol = listeners_where(|l| l.proxy_protocol);
    let h2c = listeners_where(|l| l.http2 && l.tls.is_none());
    let slots = Slots::new(max_connections);
    let mut certificate_services = Vec::new();
    let mut acceptors = Vec::new();
    let mut endpoints = Vec::new();
    for listener in &config.listen {
        let address = listener.address.to_string();
        // A smaller read buffer than pingora's 64 KiB: each open connection holds one, and a
        // proxy facing clients that hold connections open pays for every one of them. TLS is
        // accepted by EdgeApp (within limits.handshake_timeout), so every listener is TCP here.
        endpoints.push(
            ListenerConfig::tcp(address.clone())
                .l4_buffer(L4BufferSettings::default().read(DOWNSTREAM_READ_BUFFER)),
        );
        if let Some(tls) = &listener.tls {
            let certificates =
                ListenerCertificates::load(&address, tls).map_err(|source| StartError::Tls {
                    listener: address.clone(),
                    source,
                })?;
            // No paths: the resolver picks the certificate.
            let mut settings = TlsSettings::intermediate("", "")
                .map_err(|e| StartError::Preflight(vec![format!("listener {address}: {e}")]))?;
            settings.set_cert_resolver(certificates.clone());
            if listener.http2 {
                settings.enable_h2();
            }
            acceptors.push((listener.address, Arc::new(settings.build())));
            certificate_services.push(GenBackgroundService::new(
                format!("TLS certificates of {address}"),
                certificates,
            ));
        }
    }
    // The decision listener behind the same connection layer: one connection cap and one
    // request cap for the process (they share its open files), the same deadlines and read
    // buffer, so callers cannot hold more of the process than clients can.
    let decision_service = robotsguard::decision::server(&guard).map(|(decision, addresses)| {
        let edge = EdgeApp::new(
            decision,
            Carriers::TrustedCallers,
            guard.clone(),
            slots.clone(),
            in_flight.clone(),
            ListenerAddresses::default(),
            ListenerAddresses::new(addresses.clone()),
            Vec::new(),
        );
        let mut service = ListeningService::new("robotsguard decision".to_string(), edge);
        for address in addresses {
            service.add_listener(
                ListenerConfig::tcp(address.to_string())
                    .l4_buffer(L4BufferSettings::default().read(DOWNSTREAM_READ_BUFFER)),
            );
        }
        Box::new(service) as Box<dyn ServiceWithDependents>
    });
    let edge = EdgeApp::new(
        proxy,
        Carriers::TrustedProxies,
        guard.clone(),
        slots,
        in_flight.clone(),
        proxy_protocol,
        h2c,
        acceptors,
    );
    let mut proxy_service = ListeningService::new("robotsguard proxy".to_string(), edge);
    for endpoint in endpoints {
        proxy_service.add_listener(endpoint);
    }
    let first = prerequisite.map(|service| server.add_boxed_service(service));
    // The proxy, then the admin endpoint and the guard's background services exactly as an
    // embedding proxy would add them; here each one's end ends the process.
    // `listen: []` beside `decision`: the decision listener alone, no proxy listener.
    let proxy_service = (!config.listen.is_empty())
        .then(|| Box::new(proxy_service) as Box<dyn ServiceWithDependents>);
    let services = proxy_service
        .into_iter()
        .chain([guard.admin_service()])
        .chain(decision_service)
        .chain(guard.services())
        .chain(
            certificate_services
                .into_iter()
                .map(|service| Box::new(service) as Box<dyn ServiceWithDependents>),
        );
    for service in services {
        let handle = server.add_service(critical(service));
        if let Some(first) = &first {
            handle.add_dependency(first);
        }
    }

    tracing::info!(
        listen = %config.listen.iter().map(|l| l.address.to_string()).collect::<Vec<_>>().join(", "),
        admin = %config.admin.address,
        decision = %config.decision.as_ref().map_or_else(String::new, |d| d.listen.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", ")),
        origins = config.origins.len(),
        max_connections,
        max_requests_in_flight = in_flight.max(),
        max_requests_in_flight_per_client = in_flight.per_client(),
        "robotsguard starting"
    );
    let snapshot = guard.snapshot();
    robotsguard::events::configure(&snapshot.config.events);
    robotsguard::enforce::count_config_warnings(&robotsguard::enforce::config_warnings(
        &snapshot.config,
        snapshot.identifier.catalogue(),
    ));
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
