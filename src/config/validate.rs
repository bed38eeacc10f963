//! Walks the parsed YAML tree into a `Config`: fills in defaults, checks each
//! top-level section, and runs the checks that span entries (unique origin
//! names and hosts, listeners that would clash).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use crate::crawlers::Category;

use super::address::parse_bind;
use super::error::Pos;
use super::error::{quote, Sink};
use super::origin::{self, Defaults, KnownCrawlers, RobotsSettings, MODES};
use super::reader::{self, Table};
use super::schema::ACCESS_LOG;
use super::schema::{
    ADMIN, CRAWLERS, DEFAULTS, DEFAULT_ADMIN, DEFAULT_BLOCK_STATUS, DEFAULT_GRACE, DEFAULT_LISTEN,
    DEFAULT_REFRESH, DEFAULT_ROBOTS, DEFAULT_ROBOTS_MAX_SIZE, DEFAULT_TIMEOUT, EXTRA_CRAWLER, FEED,
    LIMITS, LISTENER, LISTENER_CERT, LISTENER_TLS, MAX_MAX_CONNECTIONS, MAX_MAX_HEADER_BYTES,
    MAX_NAME_LEN, MAX_STREAMS_PER_CONNECTION, MAX_THREADS, MIN_MAX_HEADER_BYTES, REPORTS, SHUTDOWN,
    TOP,
};
use super::tree::{Node, Value};
use super::{
    AccessLog, AccessLogFormat, AccessLogPath, PolicyConfig, UpstreamHealth, UpstreamTimeouts,
};
use super::{
    AdminConfig, BlockConfig, CertificatePair, Config, CrawlersConfig, ExtraCrawler, Limits,
    Listener, ListenerTls, Mode, OnUnreachable, OriginConfig, PathsConfig, MIN_ADMIN_TOKEN_BYTES,
};
use crate::crawlers::CatalogueError;

/// Builds the config, reporting problems to `sink`. The returned value is
/// only meaningful when `sink` stayed empty; on errors, parts are filled
/// with defaults so checking can go on.
pub(crate) fn build(root: &Node, sink: &mut Sink, base_dir: &Path) -> Config {
    let mut config = Config {
        listen: vec![Listener {
            address: DEFAULT_LISTEN,
            tls: None,
            proxy_protocol: false,
            http2: false,
        }],
        admin: AdminConfig {
            address: DEFAULT_ADMIN,
            token_file: None,
            read_token_file: None,
            hosts: Vec::new(),
        },
        limits: Limits::default(),
        trusted_proxies: Vec::new(),
        access_log: None,
        threads: None,
        shutdown_grace: DEFAULT_GRACE,
        crawlers: CrawlersConfig {
            builtin: true,
            generic: true,
            extra: Vec::new(),
            feeds: Vec::new(),
        },
        origins: Vec::new(),
        verify: super::VerifyConfig::default(),
        state: super::StateConfig::default(),
        state_dir: None,
        reports: super::ReportsConfig::default(),
        preview: super::PreviewConfig::default(),
        source_path: None,
    };
    let Some(top) = Table::read(sink, root, &TOP, "the config") else {
        return config;
    };

    let listen = listeners(sink, top.get("listen"), base_dir);
    if let Some(n) = top.get("admin") {
        if let Some((admin, pos)) = admin(sink, n, base_dir) {
            check_admin_clash(sink, admin.address, pos, &listen);
            config.admin = admin;
        }
    } else {
        check_admin_clash(sink, DEFAULT_ADMIN, top.pos, &listen);
    }
    if !listen.is_empty() {
        config.listen = listen.into_iter().map(|(l, _)| l).collect();
    }

    config.threads = top
        .get("threads")
        .and_then(|n| reader::integer(sink, n, "threads", 1, MAX_THREADS.into()))
        .and_then(|n| usize::try_from(n).ok());

    if let Some(table) = top
        .get("shutdown")
        .and_then(|n| Table::read(sink, n, &SHUTDOWN, "`shutdown`"))
    {
        if let Some(d) = table
            .get("grace")
            .and_then(|n| reader::duration(sink, n, "grace"))
        {
            config.shutdown_grace = d;
        }
    }

    if let Some(n) = top.get("limits") {
        config.limits = limits(sink, n);
    }
    if let Some(n) = top.get("trusted_proxies") {
        config.trusted_proxies = reader::networks(sink, n, "trusted_proxies");
    }
    if let Some(table) = top
        .get("access_log")
        .and_then(|n| Table::read(sink, n, &ACCESS_LOG, "`access_log`"))
    {
        let format = table
            .get("format")
            .and_then(|n| reader::choice(sink, n, "format", &ACCESS_LOG_FORMATS))
            .unwrap_or(AccessLogFormat::Json);
        let path = table
            .get("path")
            .and_then(|n| reader::nonempty_string(sink, n, "path"))
            .map(|text| match text {
                "stdout" => AccessLogPath::Stdout,
                file => AccessLogPath::File(base_dir.join(file)),
            });
        config.access_log = Some(AccessLog { format, path });
    }

    let errors_before = sink.count();
    let (crawlers_config, extra_positions) =
        crawlers(sink, top.get("crawlers"), config.crawlers, base_dir);
    config.crawlers = crawlers_config;
    // Entries already reported would only be reported again by the catalogue.
    let check = sink.count() == errors_before;
    let known = check_catalogue(sink, &config.crawlers, &extra_positions, check);
    config.verify =
        super::verify::verify(sink, top.get("verify"), base_dir, &known, &config.crawlers);
    (config.state, config.state_dir) = super::state::state(sink, top.get("state"), base_dir);
    if let Some(table) = top
        .get("reports")
        .and_then(|n| Table::read(sink, n, &REPORTS, "`reports`"))
    {
        if let Some(top) = table
            .get("top")
            .and_then(|n| reader::integer(sink, n, "top", 10, 100_000))
            .and_then(|n| usize::try_from(n).ok())
        {
            config.reports.top = top;
        }
        if let Some(n) = table.get("window") {
            match reader::duration(sink, n, "window") {
                Some(window) if window < Duration::from_secs(60 * 60) => {
                    sink.error(n.pos, "`reports.window` must be at least 1h");
                }
                Some(window) if window > Duration::from_secs(7 * 24 * 60 * 60) => {
                    sink.error(n.pos, "`reports.window` must be at most 7d");
                }
                Some(window) => config.reports.window = window,
                None => {}
            }
        }
    }
    config.preview = super::preview::preview(sink, top.get("preview"));
    let defaults = defaults(sink, top.get("defaults"), &known, base_dir);
    config.origins = origins(sink, &top, &defaults, base_dir, &known);
    config
}

/// "line 3, column 5", for messages that point at a second place.
fn at(pos: Pos) -> String {
    format!("line {}, column {}", pos.line, pos.column)
}

/// The `listen` entries with their positions. Absent means the default;
/// an explicitly empty list is an error.
fn listeners(sink: &mut Sink, node: Option<&Node>, base_dir: &Path) -> Vec<(Listener, Pos)> {
    let Some(node) = node else {
        return vec![(
            Listener {
                address: DEFAULT_LISTEN,
                tls: None,
                proxy_protocol: false,
                http2: false,
            },
            Pos::UNKNOWN,
        )];
    };
    let items = reader::one_or_many(node);
    if items.is_empty() {
        sink.error_hint(
            node.pos,
            "`listen` must list at least one address",
            "e.g. listen: [\"127.0.0.1:8080\"]",
        );
    }
    let mut out: Vec<(Listener, Pos)> = Vec::with_capacity(items.len());
    for item in items {
        let Some(listener) = listener(sink, item, base_dir) else {
            continue;
        };
        let clash = out
            .iter()
            .find(|(other, _)| overlaps(other.address, listener.address));
        if let Some((other, pos)) = clash {
            let message = if other.address == listener.address {
                format!(
                    "listen address `{}` is listed twice (first at {})",
                    listener.address,
                    at(*pos)
                )
            } else {
                format!(
                    "listen address `{}` overlaps `{}` at {}",
                    listener.address,
                    other.address,
                    at(*pos)
                )
            };
            sink.error(item.pos, message);
            continue;
        }
        out.push((listener, item.pos));
    }
    out
}

/// One `listen` entry: `"ip:port"` or `{address, tls, proxy_protocol, http2}`.
fn listener(sink: &mut Sink, item: &Node, base_dir: &Path) -> Option<Listener> {
    match &item.value {
        Value::Str(text) => parse_bind(text)
            .map(|address| Listener {
                address,
                tls: None,
                proxy_protocol: false,
                http2: false,
            })
            .map_err(|p| sink.problem(item.pos, p))
            .ok(),
        Value::Map(_) => {
            let table = Table::read(sink, item, &LISTENER, "each listener")?;
            let address = match table.get("address") {
                Some(n) => {
                    let text = reader::string(sink, n, "address");
                    text.and_then(|t| parse_bind(t).map_err(|p| sink.problem(n.pos, p)).ok())
                }
                None => {
                    sink.error_hint(
                        table.pos,
                        "listener is missing `address`",
                        "e.g. address: \"0.0.0.0:8443\"",
                    );
                    None
                }
            };
            let (tls, tls_http2) = match table.get("tls") {
                Some(n) => {
                    let (tls, http2) = listener_tls(sink, n, base_dir)?;
                    (Some(tls), http2)
                }
                None => (None, None),
            };
            let proxy_protocol = table
                .get("proxy_protocol")
                .and_then(|n| reader::boolean(sink, n, "proxy_protocol"))
                .unwrap_or(false);
            let http2_node = table.get("http2");
            let listener_http2 = http2_node.and_then(|n| reader::boolean(sink, n, "http2"));
            let http2 = match (tls_http2, listener_http2) {
                (Some(a), Some(b)) if a != b => {
                    if let Some(n) = http2_node {
                        sink.error_hint(
                            n.pos,
                            "`http2` and `tls.http2` disagree",
                            "set it in one place (`tls.http2` on a TLS listener)",
                        );
                    }
                    return None;
                }
                (Some(on), _) | (None, Some(on)) => on,
                // ALPN lets every client choose, so TLS offers HTTP/2 unless told not to; h2c
                // with prior knowledge is opt-in.
                (None, None) => tls.is_some(),
            };
            Some(Listener {
                address: address?,
                tls,
                proxy_protocol,
                http2,
            })
        }
        other => {
            sink.error_hint(
                item.pos,
                format!("a `listen` entry must be an address or a mapping, not {}", other.kind()),
                "e.g. \"127.0.0.1:8080\" or {address: \"0.0.0.0:8443\", tls: {cert: cert.pem, key: key.pem}}",
            );
            None
        }
    }
}

/// A listener's `tls`: `{cert, key}` or `{certs: [{cert, key}, ...]}`, and `http2` when given.
/// The files are not opened here.
fn listener_tls(
    sink: &mut Sink,
    node: &Node,
    base_dir: &Path,
) -> Option<(ListenerTls, Option<bool>)> {
    let table = Table::read(sink, node, &LISTENER_TLS, "listener `tls`")?;
    let http2 = table
        .get("http2")
        .and_then(|n| reader::boolean(sink, n, "http2"));
    let single = table.get("cert").is_some() || table.get("key").is_some();
    let certs = match (table.get("certs"), single) {
        (Some(list), true) => {
            sink.error_hint(
                list.pos,
                "listener `tls` has both `certs` and `cert`/`key`",
                "list every certificate under `certs`, the default first",
            );
            return None;
        }
        (Some(list), false) => {
            let items = reader::list(sink, list, "certs")?;
            if items.is_empty() {
                sink.error_hint(
                    list.pos,
                    "listener `tls.certs` is empty",
                    "e.g. certs: [{cert: tls/shop.pem, key: tls/shop.key}]",
                );
                return None;
            }
            let mut pairs = Vec::with_capacity(items.len());
            let mut complete = true;
            for item in items {
                let Some(entry) = Table::read(sink, item, &LISTENER_CERT, "each `tls.certs` entry")
                else {
                    complete = false;
                    continue;
                };
                match certificate_pair(sink, &entry, base_dir, "a `tls.certs` entry") {
                    Some(pair) => pairs.push(pair),
                    None => complete = false,
                }
            }
            if !complete {
                return None;
            }
            pairs
        }
        (None, _) => vec![certificate_pair(sink, &table, base_dir, "listener `tls`")?],
    };
    Some((ListenerTls { certs }, http2))
}

/// `cert` and `key` of `table`, both required.
fn certificate_pair(
    sink: &mut Sink,
    table: &Table<'_>,
    base_dir: &Path,
    what: &str,
) -> Option<CertificatePair> {
    let mut path = |key: &str| match table.get(key) {
        Some(n) => reader::nonempty_string(sink, n, key).map(|p| base_dir.join(p)),
        None => {
            sink.error_hint(
                table.pos,
                format!("{what} is missing `{key}`"),
                "TLS listeners need both `cert` and `key` (PEM files), or a `certs` list of them",
            );
            None
        }
    };
    let cert = path("cert");
    let key = path("key");
    Some(CertificatePair {
        cert: cert?,
        key: key?,
    })
}

/// Whether two bind addresses would fight over a port: the same address, or
/// one is the wildcard of the same family. Port 0 picks a free port, so it
/// never clashes.
fn overlaps(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() != 0
        && a.port() == b.port()
        && (a.ip() == b.ip()
            || (a.is_ipv4() == b.is_ipv4() && (a.ip().is_unspecified() || b.ip().is_unspecified())))
}

/// `admin: "ip:port"` or `admin: {address, token_file, read_token_file, hosts}`; the position of
/// the address.
fn admin(sink: &mut Sink, node: &Node, base_dir: &Path) -> Option<(AdminConfig, Pos)> {
    let bind = |sink: &mut Sink, n: &Node| {
        let text = reader::string(sink, n, "admin address")?;
        parse_bind(text).map_err(|p| sink.problem(n.pos, p)).ok()
    };
    match &node.value {
        Value::Map(_) => {
            let table = Table::read(sink, node, &ADMIN, "`admin`")?;
            let Some(address_node) = table.get("address") else {
                sink.error_hint(
                    table.pos,
                    "`admin` is missing `address`",
                    "e.g. admin: {address: \"127.0.0.1:9090\"}",
                );
                return None;
            };
            let address = bind(sink, address_node);
            let token_file = table
                .get("token_file")
                .and_then(|n| reader::nonempty_string(sink, n, "token_file"))
                .map(|p| base_dir.join(p));
            let read_token_file = table
                .get("read_token_file")
                .and_then(|n| reader::nonempty_string(sink, n, "read_token_file"))
                .map(|p| base_dir.join(p));
            if let (Some(n), None) = (table.get("read_token_file"), &token_file) {
                // Reading would need a token while acting would not.
                sink.error_hint(
                    n.pos,
                    "`admin.read_token_file` needs `admin.token_file`",
                    "set token_file too: the admin token lifts bans and refreshes robots.txt",
                );
            }
            admin_tokens(
                sink,
                [
                    table.get("token_file").zip(token_file.as_deref()),
                    table.get("read_token_file").zip(read_token_file.as_deref()),
                ],
            );
            let hosts = table
                .get("hosts")
                .map(|n| admin_hosts(sink, n))
                .unwrap_or_default();
            Some((
                AdminConfig {
                    address: address?,
                    token_file,
                    read_token_file,
                    hosts,
                },
                address_node.pos,
            ))
        }
        _ => bind(sink, node).map(|address| {
            (
                AdminConfig {
                    address,
                    token_file: None,
                    read_token_file: None,
                    hosts: Vec::new(),
                },
                node.pos,
            )
        }),
    }
}

/// The admin token files, checked where the config names them: each token at least
/// [`MIN_ADMIN_TOKEN_BYTES`] long, and the read-only token not the admin token (one file, or two
/// files holding the same token, would make every read-only user an admin). A file that cannot
/// be read is the preflight's to report (`validate --config-only` opens none).
fn admin_tokens(sink: &mut Sink, files: [Option<(&Node, &Path)>; 2]) {
    let [admin, read] = files;
    if let (Some((_, admin_path)), Some((read_node, read_path))) = (admin, read) {
        let same_file = admin_path == read_path
            || std::fs::canonicalize(admin_path)
                .ok()
                .zip(std::fs::canonicalize(read_path).ok())
                .is_some_and(|(a, b)| a == b);
        if same_file {
            sink.error_hint(
                read_node.pos,
                "`admin.read_token_file` is the same file as `admin.token_file`: the read-only token would be the admin token",
                "give the read-only token a file and a token of its own (e.g. `openssl rand -hex 32`)",
            );
            return;
        }
    }
    if sink.config_only {
        return;
    }
    let mut tokens = Vec::with_capacity(2);
    for (key, file) in ["token_file", "read_token_file"].into_iter().zip(files) {
        let Some((node, path)) = file else { continue };
        let Ok(token) = crate::config::read_secret_file(path, MAX_ADMIN_TOKEN_FILE_BYTES) else {
            continue;
        };
        if token.len() < MIN_ADMIN_TOKEN_BYTES {
            sink.error_hint(
                node.pos,
                format!(
                    "`admin.{key}`: the token in `{}` is {} bytes long; an admin token must have at least {MIN_ADMIN_TOKEN_BYTES}",
                    path.display(),
                    token.len()
                ),
                "make one with e.g. `openssl rand -hex 32`",
            );
        }
        tokens.push((node, token));
    }
    if let [(_, admin), (read_node, read)] = tokens.as_slice() {
        if admin == read {
            sink.error_hint(
                read_node.pos,
                "`admin.read_token_file` holds the same token as `admin.token_file`: the read-only token would be the admin token",
                "give the read-only token a token of its own (e.g. `openssl rand -hex 32`)",
            );
        }
    }
}

/// The largest admin token file read (a secret, not a document).
pub(crate) const MAX_ADMIN_TOKEN_FILE_BYTES: u64 = 4096;

/// `admin.hosts`: host names (or addresses) the admin listener answers to, normalised as
/// origins' `hosts` are (lower case, no trailing dot, no port).
fn admin_hosts(sink: &mut Sink, node: &Node) -> Vec<String> {
    let Some(items) = reader::list(sink, node, "admin.hosts") else {
        return Vec::new();
    };
    let mut hosts: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let Some(text) = reader::string(sink, item, "admin.hosts") else {
            continue;
        };
        match super::address::parse_host(text) {
            Ok(host) if !hosts.contains(&host) => hosts.push(host),
            Ok(host) => sink.error(
                item.pos,
                format!("host {} is listed twice in `admin.hosts`", quote(&host)),
            ),
            Err(p) => sink.problem(item.pos, p),
        }
    }
    hosts
}

pub(crate) const ACCESS_LOG_FORMATS: [(&str, AccessLogFormat); 2] = [
    ("json", AccessLogFormat::Json),
    ("text", AccessLogFormat::Text),
];

/// `limits`, over the built-in values.
fn limits(sink: &mut Sink, node: &Node) -> Limits {
    let mut out = Limits::default();
    let Some(table) = Table::read(sink, node, &LIMITS, "`limits`") else {
        return out;
    };
    let positive = |sink: &mut Sink, key: &str| {
        let n = table.get(key)?;
        let d = reader::duration(sink, n, key)?;
        if d.is_zero() {
            sink.error(n.pos, format!("`{key}` must be longer than 0s"));
            return None;
        }
        Some(d)
    };
    if let Some(d) = positive(sink, "header_timeout") {
        out.header_timeout = d;
    }
    if let Some(d) = positive(sink, "idle_timeout") {
        out.idle_timeout = d;
    }
    // Unset, writes are held to the idle timeout, as before the key existed.
    out.write_timeout = positive(sink, "write_timeout").unwrap_or(out.idle_timeout);
    if let Some(d) = positive(sink, "body_timeout") {
        out.body_timeout = d;
    }
    if let Some(d) = positive(sink, "handshake_timeout") {
        out.handshake_timeout = d;
    }
    if let Some(n) = table.get("max_header_bytes") {
        if let Some(bytes) = reader::size(sink, n, "max_header_bytes") {
            if (MIN_MAX_HEADER_BYTES..=MAX_MAX_HEADER_BYTES).contains(&bytes) {
                out.max_header_bytes = usize::try_from(bytes).unwrap_or(out.max_header_bytes);
            } else {
                sink.error_hint(
                    n.pos,
                    format!(
                        "`max_header_bytes` is {bytes} bytes; it must be between 4KiB and 1MiB"
                    ),
                    "browsers send a few KiB of headers; 32KiB is the default",
                );
            }
        }
    }
    if let Some(n) = table.get("max_connections") {
        out.max_connections = reader::integer(sink, n, "max_connections", 1, MAX_MAX_CONNECTIONS)
            .and_then(|n| usize::try_from(n).ok());
    }
    if let Some(n) = table.get("max_streams_per_connection") {
        let streams = reader::integer(
            sink,
            n,
            "max_streams_per_connection",
            1,
            MAX_STREAMS_PER_CONNECTION,
        );
        if let Some(streams) = streams.and_then(|n| u32::try_from(n).ok()) {
            out.max_streams_per_connection = streams;
        }
    }
    if let Some(n) = table.get("max_requests_in_flight") {
        out.max_requests_in_flight =
            reader::integer(sink, n, "max_requests_in_flight", 1, MAX_MAX_CONNECTIONS)
                .and_then(|n| usize::try_from(n).ok());
    }
    if let Some(n) = table.get("max_requests_in_flight_per_client") {
        let key = "max_requests_in_flight_per_client";
        let per_client = reader::integer(sink, n, key, 1, MAX_MAX_CONNECTIONS)
            .and_then(|n| usize::try_from(n).ok());
        match (per_client, out.max_requests_in_flight) {
            (Some(share), Some(max)) if share > max => sink.error_hint(
                n.pos,
                format!("`{key}` is {share}, more than `max_requests_in_flight` ({max})"),
                "one client can hold at most every place; set it equal to \
                 `max_requests_in_flight` to turn sharing off",
            ),
            _ => out.max_requests_in_flight_per_client = per_client,
        }
    }
    out
}

fn check_admin_clash(sink: &mut Sink, admin: SocketAddr, pos: Pos, listen: &[(Listener, Pos)]) {
    let Some((other, other_pos)) = listen.iter().find(|(l, _)| overlaps(l.address, admin)) else {
        return;
    };
    let where_ = if *other_pos == Pos::UNKNOWN {
        "the default listen address".to_owned()
    } else {
        format!("listen address at {}", at(*other_pos))
    };
    sink.error_hint(
        pos,
        format!(
            "admin address `{admin}` clashes with `{}`, the {where_}",
            other.address
        ),
        "the admin server needs its own port",
    );
}

/// `defaults`, over the built-in defaults.
fn defaults(
    sink: &mut Sink,
    node: Option<&Node>,
    known: &KnownCrawlers,
    base_dir: &Path,
) -> Defaults {
    let mut out = Defaults {
        mode: Mode::Enforce,
        block: BlockConfig {
            license_url: None,
            status: DEFAULT_BLOCK_STATUS,
            body: None,
        },
        robots: RobotsSettings {
            refresh: DEFAULT_REFRESH,
            timeout: DEFAULT_TIMEOUT,
            on_unreachable: OnUnreachable::Disallow,
            max_size: DEFAULT_ROBOTS_MAX_SIZE,
        },
        paths: PathsConfig::default(),
        upstream_timeouts: UpstreamTimeouts::default(),
        upstream_health: UpstreamHealth::default(),
        policy: PolicyConfig::default(),
        impostors: super::Impostors::Block,
        crawl_delay: super::CrawlDelayConfig::default(),
        offenders: super::OffendersConfig::default(),
        web_bot_auth: None,
        traps: super::TrapsConfig::default(),
        disguised: super::DisguisedConfig::default(),
        content_signals: super::ContentSignalsConfig::default(),
    };
    let Some(table) = node.and_then(|n| Table::read(sink, n, &DEFAULTS, "`defaults`")) else {
        return out;
    };
    if let Some(mode) = table
        .get("mode")
        .and_then(|n| reader::choice(sink, n, "mode", &MODES))
    {
        out.mode = mode;
    }
    if let Some(impostors) = table
        .get("impostors")
        .and_then(|n| reader::choice(sink, n, "impostors", &super::origin::IMPOSTORS))
    {
        out.impostors = impostors;
    }
    out.block = origin::block(sink, table.get("block"), &out.block);
    out.paths = origin::paths(sink, table.get("paths"), &out.paths);
    out.upstream_timeouts =
        origin::upstream_timeouts(sink, table.get("upstream_timeouts"), &out.upstream_timeouts);
    out.crawl_delay = origin::crawl_delay(sink, table.get("crawl_delay"), &out.crawl_delay, known);
    out.offenders = origin::offenders(sink, table.get("offenders"), &out.offenders);
    out.web_bot_auth = origin::web_bot_auth_mode(sink, table.get("web_bot_auth"));
    out.traps = super::traps::traps(sink, table.get("traps"), &out.traps, base_dir);
    out.disguised = super::traps::disguised(sink, table.get("disguised"), &out.disguised);
    out.content_signals =
        origin::content_signals(sink, table.get("content_signals"), &out.content_signals);
    out.upstream_health = origin::upstream_health(sink, &table, &out.upstream_health);
    out.policy = origin::policy(sink, table.get("policy"), &out.policy, known);
    if let Some(robots) = table
        .get("robots")
        .and_then(|n| Table::read(sink, n, &DEFAULT_ROBOTS, "`defaults.robots`"))
    {
        out.robots = origin::robots_settings(sink, &robots, &out.robots);
    }
    out
}

/// Where an `extra` crawler's name and pattern are written, for catalogue errors.
struct ExtraPositions {
    name: Pos,
    pattern: Pos,
}

/// Builds the catalogue exactly as `serve` will, so `validate` refuses what it would (a name
/// `other`, a pattern that a built-in entry already has, ...), each error at its entry. Returns
/// the crawler names a `policy` may use.
fn check_catalogue(
    sink: &mut Sink,
    crawlers: &CrawlersConfig,
    positions: &[ExtraPositions],
    report: bool,
) -> KnownCrawlers {
    let defs = match crawlers.catalogue_defs() {
        Ok(defs) => defs,
        Err(e) => {
            sink.error(Pos::UNKNOWN, format!("the built-in crawler catalogue: {e}"));
            return KnownCrawlers::default();
        }
    };
    let names = KnownCrawlers {
        names: defs.iter().map(|d| d.name.clone()).collect(),
        // Feeds add crawlers while running: a policy may name one before it is there.
        open: !crawlers.feeds.is_empty(),
    };
    if !report {
        return names;
    }
    // The extra entries are the last ones, in file order.
    let first_extra = defs.len() - crawlers.extra.len();
    let extra_at = |index: usize| {
        index
            .checked_sub(first_extra)
            .and_then(|i| positions.get(i))
    };
    let named = |name: &str| {
        crawlers
            .extra
            .iter()
            .position(|e| e.name.eq_ignore_ascii_case(name))
            .and_then(|i| positions.get(i))
    };
    match crate::crawlers::Catalogue::new(defs) {
        Ok(_) => {}
        Err(CatalogueError::Invalid {
            index,
            name,
            reason,
        }) => {
            let pos = extra_at(index).map_or(Pos::UNKNOWN, |p| {
                if reason.contains("pattern") {
                    p.pattern
                } else {
                    p.name
                }
            });
            sink.error(pos, format!("crawler {}: {reason}", quote(&name)));
        }
        Err(CatalogueError::DuplicatePattern {
            pattern,
            first,
            second,
        }) => {
            let pos = named(&second)
                .or_else(|| named(&first))
                .map_or(Pos::UNKNOWN, |p| p.pattern);
            sink.error_hint(
                pos,
                format!(
                    "crawler {}'s pattern {} is already the pattern of {}",
                    quote(&second),
                    quote(&pattern),
                    quote(&first)
                ),
                "give it a pattern of its own, or name it like that crawler to replace it",
            );
        }
        Err(e) => {
            let pos = positions.first().map_or(Pos::UNKNOWN, |p| p.name);
            sink.error(pos, format!("crawler catalogue: {e}"));
        }
    }
    names
}

/// `crawlers`, over the given defaults, and where each `extra` entry's name and pattern are.
fn crawlers(
    sink: &mut Sink,
    node: Option<&Node>,
    mut out: CrawlersConfig,
    base_dir: &Path,
) -> (CrawlersConfig, Vec<ExtraPositions>) {
    let mut positions = Vec::new();
    let Some(table) = node.and_then(|n| Table::read(sink, n, &CRAWLERS, "`crawlers`")) else {
        return (out, positions);
    };
    if let Some(b) = table
        .get("builtin")
        .and_then(|n| reader::boolean(sink, n, "builtin"))
    {
        out.builtin = b;
    }
    if let Some(b) = table
        .get("generic")
        .and_then(|n| reader::boolean(sink, n, "generic"))
    {
        out.generic = b;
    }
    if let Some(n) = table.get("feeds") {
        out.feeds = feeds(sink, n, base_dir);
    }
    let items = table
        .get("extra")
        .and_then(|n| reader::list(sink, n, "extra"))
        .unwrap_or_default();
    // Names compare case-insensitively: two crawlers told apart only by case
    // would be confusing in logs and metrics.
    let mut seen: HashMap<String, Pos> = HashMap::new();
    for item in items {
        let Some((crawler, name_pos)) = extra_crawler(sink, item, base_dir) else {
            continue;
        };
        let pattern_pos = Table::read(&mut Sink::new(""), item, &EXTRA_CRAWLER, "")
            .and_then(|t| t.get("pattern").map(|n| n.pos))
            .unwrap_or(name_pos);
        let folded = crawler.name.to_lowercase();
        if let Some(first) = seen.get(&folded) {
            sink.error(
                name_pos,
                format!(
                    "crawler {} is defined twice (first at {})",
                    quote(&crawler.name),
                    at(*first)
                ),
            );
            continue;
        }
        seen.insert(folded, name_pos);
        out.extra.push(crawler);
        positions.push(ExtraPositions {
            name: name_pos,
            pattern: pattern_pos,
        });
    }
    (out, positions)
}

/// The most range lists a feed may be allowed (`max_lists`): each list may hold megabytes.
const MAX_FEED_LISTS: i128 = 10_000;

/// `crawlers.feeds`: each `{url, format, refresh, may_override, max_lists}`, urls unique,
/// `file:` paths made absolute.
fn feeds(sink: &mut Sink, node: &Node, base_dir: &Path) -> Vec<super::FeedConfig> {
    use crate::crawlers::feed::FeedFormat;
    let mut out: Vec<super::FeedConfig> = Vec::new();
    let formats: Vec<(&'static str, FeedFormat)> =
        FeedFormat::ALL.iter().map(|f| (f.as_str(), *f)).collect();
    for item in reader::list(sink, node, "feeds").unwrap_or_default() {
        let Some(table) = Table::read(sink, item, &FEED, "each feed") else {
            continue;
        };
        let Some(url_node) = table.get("url") else {
            sink.error_hint(
                table.pos,
                "feed is missing `url`",
                "e.g. url: https://example.com/crawlers.yaml, or url: \"file:feeds/crawlers.yaml\"",
            );
            continue;
        };
        let Some(text) = reader::nonempty_string(sink, url_node, "url") else {
            continue;
        };
        let url = match text.strip_prefix("file:") {
            Some("") => {
                sink.error(url_node.pos, format!("feed {} names no file", quote(text)));
                continue;
            }
            Some(path) => format!("file:{}", base_dir.join(path).display()),
            None => match url::Url::parse(text) {
                Ok(parsed)
                    if matches!(parsed.scheme(), "http" | "https")
                        && parsed.host_str().is_some() =>
                {
                    text.to_owned()
                }
                _ => {
                    sink.error_hint(
                        url_node.pos,
                        format!(
                            "feed {} is neither an http(s) URL nor a file: path",
                            quote(text)
                        ),
                        "write an http(s) URL or file:path/to/feed (relative to this file)",
                    );
                    continue;
                }
            },
        };
        let format = match table.get("format") {
            Some(n) => match reader::choice(sink, n, "format", &formats) {
                Some(format) => format,
                None => continue,
            },
            None => FeedFormat::Robotsguard,
        };
        let refresh = match table.get("refresh") {
            Some(n) => match reader::duration(sink, n, "refresh") {
                Some(d) if d >= Duration::from_secs(1) => d,
                Some(_) => {
                    sink.error(n.pos, "a feed's `refresh` must be at least 1s");
                    continue;
                }
                None => continue,
            },
            None => Duration::from_secs(24 * 3600),
        };
        let may_override = match table.get("may_override") {
            Some(n) => match reader::boolean(sink, n, "may_override") {
                Some(b) => b,
                None => continue,
            },
            None => false,
        };
        let max_lists = match table.get("max_lists") {
            Some(n) => match reader::integer(sink, n, "max_lists", 0, MAX_FEED_LISTS) {
                Some(n) => usize::try_from(n).unwrap_or(0),
                None => continue,
            },
            None => crate::crawlers::feed::DEFAULT_MAX_LISTS,
        };
        if out.iter().any(|feed| feed.url == url) {
            sink.error(
                url_node.pos,
                format!("feed {} is listed twice", quote(text)),
            );
            continue;
        }
        out.push(super::FeedConfig {
            url,
            format,
            refresh,
            may_override,
            max_lists,
        });
    }
    out
}

/// One `crawlers.extra` entry and the position of its name.
fn extra_crawler(sink: &mut Sink, node: &Node, base_dir: &Path) -> Option<(ExtraCrawler, Pos)> {
    let table = Table::read(sink, node, &EXTRA_CRAWLER, "each `extra` crawler")?;
    let name_node = table.get("name");
    let name = match name_node {
        Some(n) => reader::nonempty_string(sink, n, "name").and_then(|name| {
            if name.chars().count() > MAX_NAME_LEN || name.chars().any(char::is_control) {
                sink.error(
                    n.pos,
                    format!("crawler name must be at most {MAX_NAME_LEN} characters, without control characters"),
                );
                return None;
            }
            Some(name)
        }),
        None => {
            sink.error_hint(table.pos, "crawler is missing `name`", "e.g. name: ExampleBot");
            None
        }
    };

    let tokens = match table.get("tokens") {
        Some(n) => {
            let items = reader::one_or_many(n);
            if items.is_empty() {
                sink.error(n.pos, "`tokens` must list at least one product token");
            }
            let mut tokens = Vec::with_capacity(items.len());
            for item in items {
                let Some(token) = reader::nonempty_string(sink, item, "tokens") else {
                    continue;
                };
                if is_product_token(token) {
                    tokens.push(token.to_ascii_lowercase());
                } else {
                    sink.error_hint(
                        item.pos,
                        format!("token {} is not a robots.txt product token", quote(token)),
                        "tokens have only letters, digits, `-` and `_`",
                    );
                }
            }
            tokens
        }
        None => match name {
            Some(name) if is_product_token(name) => vec![name.to_ascii_lowercase()],
            Some(name) => {
                sink.error_hint(
                    table.pos,
                    format!("crawler {} needs `tokens`", quote(name)),
                    "its name is not a product token (letters, digits, `-`, `_`), so list the User-agent tokens it obeys",
                );
                Vec::new()
            }
            None => Vec::new(),
        },
    };

    let pattern = match table.get("pattern") {
        Some(n) => reader::nonempty_string(sink, n, "pattern").and_then(|p| {
            // A one- or two-letter pattern would match nearly every
            // User-Agent and turn all visitors into this crawler.
            if p.chars().count() < 3 {
                sink.error(n.pos, "`pattern` must be at least 3 characters");
                return None;
            }
            Some(p.to_owned())
        }),
        None => name.map(str::to_owned),
    };

    let categories: Vec<(&'static str, Category)> =
        Category::ALL.iter().map(|c| (c.as_str(), *c)).collect();
    let category = table
        .get("category")
        .and_then(|n| reader::choice(sink, n, "category", &categories))
        .unwrap_or(Category::Other);
    let operator = table
        .get("operator")
        .and_then(|n| reader::nonempty_string(sink, n, "operator"))
        .map(str::to_owned);
    let ignores_global = table
        .get("ignores_global")
        .and_then(|n| reader::boolean(sink, n, "ignores_global"))
        .unwrap_or(false);
    let verify = match table.get("verify") {
        Some(n) => Some(super::verify::crawler_verify(sink, n, base_dir)?),
        None => None,
    };
    let purposes = table
        .get("purposes")
        .map(|n| super::origin::purpose_list(sink, n))
        .unwrap_or_default();
    let ignores_crawl_delay = table
        .get("ignores_crawl_delay")
        .and_then(|n| reader::boolean(sink, n, "ignores_crawl_delay"))
        .unwrap_or(false);
    let controls = table
        .get("controls")
        .map(|n| {
            let served = if purposes.is_empty() {
                crate::crawlers::Purposes::from_category(category)
            } else {
                crate::crawlers::Purposes::of(&purposes)
            };
            super::origin::purpose_controls(sink, n, served, &tokens)
        })
        .unwrap_or_default();

    let crawler = ExtraCrawler {
        name: name?.to_owned(),
        tokens,
        pattern: pattern?,
        category,
        operator,
        ignores_global,
        verify,
        purposes,
        controls,
        ignores_crawl_delay,
    };
    Some((crawler, name_node.map_or(table.pos, |n| n.pos)))
}

/// Product tokens: RFC 9309 allows letters, `-` and `_`; digits are
/// accepted too because real crawlers use them (`360Spider`).
fn is_product_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `origins`: each entry checked on its own, then names and hosts checked
/// for uniqueness across all of them.
fn origins(
    sink: &mut Sink,
    top: &Table<'_>,
    defaults: &Defaults,
    base_dir: &Path,
    known: &KnownCrawlers,
) -> Vec<OriginConfig> {
    let Some(node) = top.get("origins") else {
        let pos = top.key_pos("origins").unwrap_or(top.pos);
        sink.error_hint(
            pos,
            "the config needs at least one entry in `origins`",
            "e.g. origins: [{name: shop, hosts: [shop.example], upstream: \"127.0.0.1:8081\"}]",
        );
        return Vec::new();
    };
    let Some(items) = reader::list(sink, node, "origins") else {
        return Vec::new();
    };
    if items.is_empty() {
        sink.error(node.pos, "`origins` must list at least one origin");
    }
    let mut names: HashMap<String, Pos> = HashMap::new();
    let mut hosts: HashMap<String, (String, Pos)> = HashMap::new();
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Some(parsed) = origin::parse_origin(sink, item, defaults, known, base_dir) else {
            continue;
        };
        if let Some((name, pos)) = &parsed.name {
            match names.get(name) {
                Some(first) => sink.error(
                    *pos,
                    format!(
                        "origin name {} is used twice (first at {})",
                        quote(name),
                        at(*first)
                    ),
                ),
                None => {
                    names.insert(name.clone(), *pos);
                }
            }
        }
        let origin_name = parsed.name.as_ref().map_or("", |(n, _)| n.as_str());
        for (host, pos) in &parsed.hosts {
            match hosts.get(host) {
                Some((other, first)) => sink.error_hint(
                    *pos,
                    format!(
                        "host {} is already served by {} at {}",
                        quote(host),
                        if other.is_empty() {
                            "the origin".to_owned()
                        } else {
                            format!("origin {}", quote(other))
                        },
                        at(*first)
                    ),
                    "each host belongs to exactly one origin",
                ),
                None => {
                    hosts.insert(host.clone(), (origin_name.to_owned(), *pos));
                }
            }
        }
        out.push(parsed.config);
    }
    out
}
