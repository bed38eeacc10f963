//! `admin`: the admin listener, its tokens and the host names it answers to.

use super::*;

pub(crate) static ADMIN: Section = Section {
    id: "admin",
    place: "in `admin`",
    title: "The admin listener",
    doc: "`admin` written as a mapping.",
    keys: &[
        // The listener and its tokens are set up at start; `hosts` is read per request from the
        // config in force, so a reload applies it.
        required("address", Ty::Address, "The admin listener's address.").restart_only(&RestartOnly {
            differs: |old, new| old.admin.address != new.admin.address,
            keep: |new, running| new.admin.address = running.admin.address,
        }),
        key("token_file", Ty::Path, "none", "A file holding the bearer token every admin request but `/healthz` and `/readyz` must carry (`Authorization: Bearer …`; at least 16 bytes); re-read when it changes.").restart_only(&RestartOnly {
            differs: |old, new| old.admin.token_file != new.admin.token_file,
            keep: |new, running| new.admin.token_file.clone_from(&running.admin.token_file),
        }),
        key("read_token_file", Ty::Path, "none", "A read-only token (at least 16 bytes, not the admin token): reports, console pages, `/metrics`, `/explain`, `/bans`, `/robots`, but no action (lifting a ban). Needs `token_file`.").restart_only(&RestartOnly {
            differs: |old, new| old.admin.read_token_file != new.admin.read_token_file,
            keep: |new, running| new.admin.read_token_file.clone_from(&running.admin.read_token_file),
        }),
        key("bouncer_keys_file", Ty::Path, "none", "A file of CrowdSec bouncer API keys, one a line (at least 16 bytes each; blank lines and `#` comments skipped): a key in `X-Api-Key` authorises `GET /v1/decisions/stream` and `GET /v1/decisions` alone, admin token or not; re-read when it changes. Without it those paths answer 403."),
        key("hosts", Ty::List(&Ty::Str), "none", "Names the admin listener answers to besides its own addresses (an IP literal `Host` naming the listener's address, any address when it listens on `0.0.0.0` or `[::]`; any port) and `localhost` (when it accepts loopback connections): a request naming another host gets 421, token or not, so a DNS-rebinding page cannot read it. List the names clients use, e.g. the admin Service's DNS names or an ingress host."),
    ],
};

/// The admin listener: where it listens and who may use it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AdminConfig {
    /// Where the admin listener listens.
    pub address: SocketAddr,
    /// A file holding the bearer token every admin request but `/healthz` and `/readyz` must
    /// carry (absolute path; read when serving, so a rotated secret applies without restart).
    pub token_file: Option<PathBuf>,
    /// A file holding a read-only token: reports, the console's pages, `/metrics`, `/explain`,
    /// `/bans` and `/robots`, but no action (lifting a ban, refreshing robots.txt).
    pub read_token_file: Option<PathBuf>,
    /// Host names (lower case, no port) the admin listener answers to besides its own
    /// addresses and, when it accepts loopback connections, `localhost`: any other `Host` is
    /// refused (421), which is what keeps DNS rebinding out. Applied by a reload.
    pub hosts: Vec<String>,
    /// A file of CrowdSec bouncer keys (one a line): they authorise the decision stream alone.
    pub bouncer_keys_file: Option<PathBuf>,
}

/// The shortest admin token accepted (bytes): a token is typed into the console's login form
/// and sent as a bearer token, so guessing it must be hopeless.
pub const MIN_ADMIN_TOKEN_BYTES: usize = 16;

pub(crate) const DEFAULT_ADMIN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9090));

/// `admin: "ip:port"` or `admin: {address, token_file, read_token_file, hosts}`; the position of
/// the address.
pub(crate) fn admin(sink: &mut Sink, node: &Node, base_dir: &Path) -> Option<(AdminConfig, Pos)> {
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
            let bouncer_keys_file = table
                .get("bouncer_keys_file")
                .and_then(|n| reader::nonempty_string(sink, n, "bouncer_keys_file"))
                .map(|p| base_dir.join(p));
            if let (Some(n), Some(path)) = (table.get("bouncer_keys_file"), &bouncer_keys_file) {
                if !sink.config_only {
                    if let Err(e) = crate::config::read_bouncer_keys(path) {
                        sink.error(n.pos, format!("`admin.bouncer_keys_file`: {e}"));
                    }
                }
            }
            Some((
                AdminConfig {
                    address: address?,
                    token_file,
                    read_token_file,
                    hosts,
                    bouncer_keys_file,
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
                    bouncer_keys_file: None,
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
        match crate::config::address::parse_host(text) {
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

pub(crate) fn check_admin_clash(
    sink: &mut Sink,
    admin: SocketAddr,
    pos: Pos,
    listen: &[(Listener, Pos)],
) {
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
