//! `listen`: the proxy's listeners (addresses, TLS certificates, PROXY protocol, HTTP/2).

use super::*;

pub(crate) static LISTENER: Section = Section {
    id: "listener",
    place: "in listener",
    title: "A listener",
    doc: "A `listen` entry written as a mapping.",
    keys: &[
        required("address", Ty::Address, "The listener's address."),
        key("tls", Ty::Section(&LISTENER_TLS), "none (plain HTTP)", "Terminate TLS here: one certificate (`cert`, `key`) or several chosen by SNI (`certs`)."),
        key("proxy_protocol", Ty::Bool, "`false`", "Every connection starts with a PROXY protocol header (v1 or v2), believed only from a peer in `trusted_proxies`: a connection from any other peer is closed before anything is read, one without a valid header too."),
        key("http2", Ty::Bool, "`true` with TLS, `false` without", "HTTP/2 beside HTTP/1.1: by ALPN on TLS, with prior knowledge (h2c) on plain listeners. Same as `tls.http2`; both must agree."),
    ],
};

pub(crate) static LISTENER_TLS: Section = Section {
    id: "listener_tls",
    place: "in listener `tls`",
    title: "A listener's TLS",
    doc: "`cert` and `key`, or `certs`.",
    keys: &[
        key("cert", Ty::Path, "", "PEM certificate chain, leaf first (with `key`)."),
        key("key", Ty::Path, "", "PEM private key of `cert`."),
        key("certs", Ty::List(&Ty::Section(&LISTENER_CERT)), "", "Several sites' certificates: each connection gets the one whose names match its SNI (an exact name before a wildcard, an earlier certificate before a later one); no name, or an unknown one, gets the first."),
        key("http2", Ty::Bool, "`true`", "Offer HTTP/2 by ALPN (`h2`, then `http/1.1`)."),
    ],
};

pub(crate) static LISTENER_CERT: Section = Section {
    id: "listener_cert",
    place: "in a `tls.certs` entry",
    title: "A certificate of `tls.certs`",
    doc: "One site's certificate and key.",
    keys: &[
        required("cert", Ty::Path, "PEM certificate chain, leaf first."),
        required("key", Ty::Path, "PEM private key."),
    ],
};

/// A socket the proxy accepts connections on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Listener {
    /// Where it listens.
    pub address: SocketAddr,
    /// Set when this listener terminates TLS.
    pub tls: Option<ListenerTls>,
    /// Every connection starts with a PROXY protocol (v1 or v2) header naming the client.
    pub proxy_protocol: bool,
    /// HTTP/2: offered by ALPN beside HTTP/1.1 on a TLS listener (`tls.http2`, default on);
    /// accepted with prior knowledge (h2c) beside HTTP/1.1 on a plain one (`http2`, default off).
    pub http2: bool,
}

/// A TLS listener's certificates: `tls: {cert, key}` or `tls: {certs: [{cert, key}, ...]}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ListenerTls {
    /// The certificates, picked by the name a client asks for (SNI); the first is the default.
    pub certs: Vec<CertificatePair>,
}

/// A certificate chain and its private key (PEM files). Absolute paths; the files are not opened
/// at load time.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CertificatePair {
    /// The certificate chain, leaf first.
    pub cert: PathBuf,
    /// The private key.
    pub key: PathBuf,
}

/// Loopback by default: exposing the proxy or the admin server on every
/// interface should be a decision written in the config.
pub(crate) const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080));

/// "line 3, column 5", for messages that point at a second place.
pub(crate) fn at(pos: Pos) -> String {
    format!("line {}, column {}", pos.line, pos.column)
}

/// The `listen` entries with their positions. Absent means the default;
/// an explicitly empty list is an error unless `decision` is set.
pub(crate) fn listeners(
    sink: &mut Sink,
    node: Option<&Node>,
    base_dir: &Path,
    decision_set: bool,
) -> Vec<(Listener, Pos)> {
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
    if items.is_empty() && !decision_set {
        sink.error_hint(
            node.pos,
            "`listen` must list at least one address",
            "e.g. listen: [\"127.0.0.1:8080\"]; or set `decision` to run only the decision listener",
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
pub(crate) fn overlaps(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() != 0
        && a.port() == b.port()
        && (a.ip() == b.ip()
            || (a.is_ipv4() == b.is_ipv4() && (a.ip().is_unspecified() || b.ip().is_unspecified())))
}
