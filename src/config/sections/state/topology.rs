//! How the shared store is reached, read from `state.redis`'s URL: one server
//! (`redis://`, `rediss://`, `unix://`), the primary that Redis Sentinel names
//! (`redis+sentinel://`), or a Redis/Valkey Cluster (`redis+cluster://`).
//!
//! ```text
//! redis+sentinel://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]   port 26379
//! redis+cluster://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]                port 6379
//! ```
//!
//! `rediss+` speaks TLS to every node (sentinels included). The credentials are the data
//! nodes': sentinels are asked without any. The `sentinel` and `cluster` blocks of the config are
//! written into the same URL form, so one parser serves both.

use std::fmt;
use std::net::Ipv6Addr;

/// The most nodes a URL may list.
pub(crate) const MAX_NODES: usize = 32;

/// The port of a sentinel written without one.
const SENTINEL_PORT: u16 = 26379;

/// The port of a cluster node written without one.
const CLUSTER_PORT: u16 = 6379;

/// How the store is reached.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum RedisTopology {
    /// One server, or a proxy in front of several (`redis://`, `rediss://`, `unix://`).
    Single,
    /// The primary the sentinels name, asked again at every reconnection (after a failover).
    Sentinel {
        /// The name the sentinels monitor the primary under.
        master: String,
        /// The sentinels, asked in this order.
        nodes: Vec<RedisNode>,
        /// The database on the primary.
        db: i64,
        /// The primary's credentials.
        credentials: Credentials,
        /// TLS to the sentinels and the primary.
        tls: bool,
    },
    /// A Redis/Valkey Cluster, discovered from any of these nodes.
    Cluster {
        /// Nodes to discover the cluster from.
        nodes: Vec<RedisNode>,
        /// The nodes' credentials.
        credentials: Credentials,
        /// TLS to every node.
        tls: bool,
    },
}

/// A node's address.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RedisNode {
    /// A DNS name, an IPv4 address, or an IPv6 address (without brackets).
    pub host: String,
    /// The TCP port.
    pub port: u16,
}

impl RedisNode {
    /// `redis://host:port` (brackets around an IPv6 address), for the Redis client.
    pub fn url(&self, tls: bool) -> String {
        let scheme = if tls { "rediss" } else { "redis" };
        if self.host.contains(':') {
            format!("{scheme}://[{}]:{}", self.host, self.port)
        } else {
            format!("{scheme}://{}:{}", self.host, self.port)
        }
    }
}

impl RedisNode {
    /// [`RedisNode::url`] with the credentials in it.
    pub fn url_with(&self, credentials: &Credentials, tls: bool) -> String {
        let plain = self.url(tls);
        match plain.split_once("://") {
            Some((scheme, rest)) => format!("{scheme}://{}{rest}", userinfo(credentials)),
            None => plain,
        }
    }
}

/// A username and password, never printed.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Credentials {
    /// The ACL user (`default` when absent).
    pub username: Option<String>,
    /// The password.
    pub password: Option<String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl RedisTopology {
    /// Reads the topology from a URL. Every URL that is not `redis+sentinel://` or
    /// `redis+cluster://` (with or without the `s`) is [`RedisTopology::Single`]: the Redis client
    /// judges it.
    pub fn parse(url: &str) -> Result<RedisTopology, RedisUrlError> {
        RedisTopology::parse_text(url).map_err(RedisUrlError)
    }

    fn parse_text(url: &str) -> Result<RedisTopology, String> {
        let Some((scheme, rest)) = url.split_once("://") else {
            return Ok(RedisTopology::Single);
        };
        let (sentinel, tls) = match scheme.to_ascii_lowercase().as_str() {
            "redis+sentinel" => (true, false),
            "rediss+sentinel" => (true, true),
            "redis+cluster" => (false, false),
            "rediss+cluster" => (false, true),
            _ => return Ok(RedisTopology::Single),
        };
        if rest.contains(['?', '#']) {
            return Err("a sentinel or cluster URL takes no query or fragment".to_owned());
        }
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (credentials, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (credentials(userinfo)?, hosts),
            None => (Credentials::default(), authority),
        };
        let default_port = if sentinel {
            SENTINEL_PORT
        } else {
            CLUSTER_PORT
        };
        let nodes = hosts
            .split(',')
            .map(|node| parse_node(node, default_port).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        if nodes.len() > MAX_NODES {
            return Err(format!("at most {MAX_NODES} nodes"));
        }
        if !sentinel {
            if !path.is_empty() && path != "0" {
                return Err("a cluster has only database 0: write no path".to_owned());
            }
            return Ok(RedisTopology::Cluster {
                nodes,
                credentials,
                tls,
            });
        }
        let mut segments = path.split('/');
        let master = decode(segments.next().unwrap_or(""))?;
        if master.is_empty() {
            return Err(
                "the primary's name is missing: .../MASTER[/DB] after the sentinels".to_owned(),
            );
        }
        if master.chars().any(|c| c.is_control() || c == ' ') {
            return Err("the primary's name holds spaces or control characters".to_owned());
        }
        let db = match segments.next() {
            None | Some("") => 0,
            Some(db) => db
                .parse::<i64>()
                .ok()
                .filter(|db| *db >= 0)
                .ok_or_else(|| format!("`{db}` is not a database number"))?,
        };
        if segments.next().is_some() {
            return Err("the path is /MASTER or /MASTER/DB".to_owned());
        }
        Ok(RedisTopology::Sentinel {
            master,
            nodes,
            db,
            credentials,
            tls,
        })
    }

    /// Writes a `sentinel` block as its URL.
    pub(crate) fn sentinel_url(
        master: &str,
        nodes: &[RedisNode],
        db: i64,
        credentials: &Credentials,
        tls: bool,
    ) -> String {
        let scheme = if tls {
            "rediss+sentinel"
        } else {
            "redis+sentinel"
        };
        format!(
            "{scheme}://{}{}/{}/{db}",
            userinfo(credentials),
            hosts(nodes),
            encode(master)
        )
    }

    /// Writes a `cluster` block as its URL.
    pub(crate) fn cluster_url(nodes: &[RedisNode], credentials: &Credentials, tls: bool) -> String {
        let scheme = if tls {
            "rediss+cluster"
        } else {
            "redis+cluster"
        };
        format!("{scheme}://{}{}", userinfo(credentials), hosts(nodes))
    }
}

/// `host[:port]`, `[v6]`, `[v6]:port`.
pub(crate) fn parse_node(text: &str, default_port: u16) -> Result<RedisNode, NodeError> {
    let text = text.trim();
    let error = |problem| NodeError {
        text: text.to_owned(),
        problem,
    };
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| error(NodeProblem::Unclosed))?;
        host.parse::<Ipv6Addr>()
            .map_err(|_| error(NodeProblem::NotIpv6(host.to_owned())))?;
        match after {
            "" => (host, None),
            port => (
                host,
                Some(
                    port.strip_prefix(':')
                        .ok_or_else(|| error(NodeProblem::AfterAddress))?,
                ),
            ),
        }
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    if host.is_empty() {
        return Err(error(NodeProblem::NoHost));
    }
    if !host.contains(':')
        && !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    {
        return Err(error(NodeProblem::NotHost(host.to_owned())));
    }
    let port = match port {
        None => default_port,
        Some(port) => port
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| error(NodeProblem::NotPort(port.to_owned())))?,
    };
    Ok(RedisNode {
        host: host.to_owned(),
        port,
    })
}

/// Why a node's `host:port` text names no node: the text and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NodeError {
    text: String,
    problem: NodeProblem,
}

/// What is wrong with a node's text.
#[derive(Clone, Debug, PartialEq, Eq)]
enum NodeProblem {
    /// `[` without its `]`.
    Unclosed,
    /// Between the brackets, not an IPv6 address.
    NotIpv6(String),
    /// After `]`, something else than `:PORT`.
    AfterAddress,
    /// Nothing before the port.
    NoHost,
    /// Characters no host name has.
    NotHost(String),
    /// Not a port number from 1 to 65535.
    NotPort(String),
}

impl std::fmt::Display for NodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = &self.text;
        match &self.problem {
            NodeProblem::Unclosed => write!(f, "`{text}`: an IPv6 address needs its closing ]"),
            NodeProblem::NotIpv6(host) => write!(f, "`{text}`: `{host}` is not an IPv6 address"),
            NodeProblem::AfterAddress => write!(f, "`{text}`: expected `:PORT` after the address"),
            NodeProblem::NoHost => write!(f, "`{text}`: a node needs a host"),
            NodeProblem::NotHost(host) => {
                write!(f, "`{text}`: `{host}` is not a host name or address")
            }
            NodeProblem::NotPort(port) => write!(f, "`{text}`: `{port}` is not a port"),
        }
    }
}

impl std::error::Error for NodeError {}

fn credentials(userinfo: &str) -> Result<Credentials, String> {
    let (user, password) = match userinfo.split_once(':') {
        Some((user, password)) => (user, Some(password)),
        None => (userinfo, None),
    };
    Ok(Credentials {
        username: Some(decode(user)?).filter(|u| !u.is_empty()),
        password: password.map(decode).transpose()?,
    })
}

fn userinfo(credentials: &Credentials) -> String {
    match (&credentials.username, &credentials.password) {
        (None, None) => String::new(),
        (user, password) => format!(
            "{}{}@",
            encode(user.as_deref().unwrap_or("")),
            password
                .as_deref()
                .map(|p| format!(":{}", encode(p)))
                .unwrap_or_default()
        ),
    }
}

fn hosts(nodes: &[RedisNode]) -> String {
    nodes
        .iter()
        .map(|n| {
            if n.host.contains(':') {
                format!("[{}]:{}", n.host, n.port)
            } else {
                format!("{}:{}", n.host, n.port)
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Percent-encodes everything but unreserved characters.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Percent-decodes; the result must be UTF-8.
fn decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or("a % that is not followed by two hexadecimal digits")?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "percent-encoded bytes that are not UTF-8".to_owned())
}

/// Why a `state.redis` URL cannot be used (what is wrong with it, in words).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisUrlError(String);

impl std::fmt::Display for RedisUrlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RedisUrlError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(host: &str, port: u16) -> RedisNode {
        RedisNode {
            host: host.to_owned(),
            port,
        }
    }

    #[test]
    fn sentinel_urls_name_the_sentinels_the_primary_and_the_database() {
        assert_eq!(
            RedisTopology::parse("redis+sentinel://:p%40ss@s1,s2:26380,[::1]/fleet/2"),
            Ok(RedisTopology::Sentinel {
                master: "fleet".to_owned(),
                nodes: vec![node("s1", 26379), node("s2", 26380), node("::1", 26379)],
                db: 2,
                credentials: Credentials {
                    username: None,
                    password: Some("p@ss".to_owned())
                },
                tls: false,
            })
        );
        let Ok(RedisTopology::Sentinel { db, tls, .. }) =
            RedisTopology::parse("rediss+sentinel://s1/fleet")
        else {
            panic!("a sentinel URL");
        };
        assert_eq!((db, tls), (0, true));
        for bad in [
            "redis+sentinel://s1",
            "redis+sentinel://s1/",
            "redis+sentinel://s1/fleet/x",
            "redis+sentinel://s1/fleet/-1",
            "redis+sentinel://s1/fleet/0/more",
            "redis+sentinel://s1:0/fleet",
            "redis+sentinel://s1:x/fleet",
            "redis+sentinel://,s1/fleet",
            "redis+sentinel://s 1/fleet",
            "redis+sentinel://[::1/fleet",
            "redis+sentinel://s1/fleet?insecure",
            "redis+sentinel://s1/fleet#insecure",
            "redis+sentinel://u:%zz@s1/fleet",
        ] {
            assert!(RedisTopology::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cluster_urls_list_nodes_and_no_database() {
        assert_eq!(
            RedisTopology::parse("redis+cluster://rg:pw@n1:7000,n2"),
            Ok(RedisTopology::Cluster {
                nodes: vec![node("n1", 7000), node("n2", 6379)],
                credentials: Credentials {
                    username: Some("rg".to_owned()),
                    password: Some("pw".to_owned())
                },
                tls: false,
            })
        );
        assert!(RedisTopology::parse("redis+cluster://n1/0").is_ok());
        assert!(RedisTopology::parse("redis+cluster://n1/3").is_err());
        assert_eq!(
            RedisTopology::parse("redis://127.0.0.1:6379/0"),
            Ok(RedisTopology::Single)
        );
        assert_eq!(
            RedisTopology::parse("unix:///run/redis.sock"),
            Ok(RedisTopology::Single)
        );
    }

    #[test]
    fn nodes_are_host_and_port_and_errors_say_what_is_wrong() {
        assert_eq!(parse_node(" s1 ", 26379), Ok(node("s1", 26379)));
        assert_eq!(
            parse_node("[2001:db8::5]:5000", 1),
            Ok(node("2001:db8::5", 5000))
        );
        let said = |text: &str| parse_node(text, 1).map_err(|e| e.problem);
        assert_eq!(said("[2001:db8::5"), Err(NodeProblem::Unclosed));
        assert_eq!(said("[nope]"), Err(NodeProblem::NotIpv6("nope".to_owned())));
        assert_eq!(said("[::1]5"), Err(NodeProblem::AfterAddress));
        assert_eq!(said(":6379"), Err(NodeProblem::NoHost));
        assert_eq!(said("a/b:1"), Err(NodeProblem::NotHost("a/b".to_owned())));
        assert_eq!(said("s1:0"), Err(NodeProblem::NotPort("0".to_owned())));
        assert_eq!(
            parse_node("s1:x", 1).map_err(|e| e.to_string()),
            Err("`s1:x`: `x` is not a port".to_owned())
        );
    }

    #[test]
    fn blocks_written_as_urls_read_back_the_same() {
        let credentials = Credentials {
            username: Some("edge user".to_owned()),
            password: Some("a:b@c/d".to_owned()),
        };
        let nodes = vec![node("s1", 26379), node("2001:db8::5", 5000)];
        // A primary's name with a space is refused, written in a block as in a URL.
        let url = RedisTopology::sentinel_url("my master", &nodes, 3, &credentials, true);
        assert!(RedisTopology::parse(&url).is_err(), "{url}");
        let url = RedisTopology::sentinel_url("fleet", &nodes, 3, &credentials, true);
        assert_eq!(
            RedisTopology::parse(&url),
            Ok(RedisTopology::Sentinel {
                master: "fleet".to_owned(),
                nodes: nodes.clone(),
                db: 3,
                credentials: credentials.clone(),
                tls: true,
            })
        );
        let url = RedisTopology::cluster_url(&nodes, &Credentials::default(), false);
        assert_eq!(url, "redis+cluster://s1:26379,[2001:db8::5]:5000");
        assert_eq!(
            RedisTopology::parse(&url),
            Ok(RedisTopology::Cluster {
                nodes,
                credentials: Credentials::default(),
                tls: false,
            })
        );
        assert!(!format!("{credentials:?}").contains("a:b@c/d"));
    }
}
