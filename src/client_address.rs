//! Who the client is: the connection's peer, or, when the peer is a trusted proxy (a load
//! balancer, a CDN), the address it says it forwarded for. Pure.

use std::net::IpAddr;

use ipnet::IpNet;

/// Whether `address` is in one of `trusted`.
pub fn is_trusted(trusted: &[IpNet], address: IpAddr) -> bool {
    let address = canonical(address);
    trusted.iter().any(|net| net.contains(&address))
}

/// A set of IP networks built for lookups on every request: the networks as sorted, merged
/// address ranges, searched in O(log n) however many networks an allow-list holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressSet {
    v4: Vec<(u32, u32)>,
    v6: Vec<(u128, u128)>,
}

impl AddressSet {
    pub fn new(networks: &[IpNet]) -> AddressSet {
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for net in networks {
            match net {
                IpNet::V4(n) => v4.push((u32::from(n.network()), u32::from(n.broadcast()))),
                IpNet::V6(n) => v6.push((u128::from(n.network()), u128::from(n.broadcast()))),
            }
        }
        AddressSet {
            v4: merged(v4, |x| x.saturating_add(1)),
            v6: merged(v6, |x| x.saturating_add(1)),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }

    pub fn contains(&self, address: IpAddr) -> bool {
        match canonical(address) {
            IpAddr::V4(a) => in_ranges(&self.v4, u32::from(a)),
            IpAddr::V6(a) => in_ranges(&self.v6, u128::from(a)),
        }
    }
}

/// Sorted ranges with overlapping and adjacent ones joined; `next` is `x + 1`, saturating.
fn merged<T: Ord + Copy>(mut ranges: Vec<(T, T)>, next: fn(T) -> T) -> Vec<(T, T)> {
    ranges.sort_unstable();
    let mut out: Vec<(T, T)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match out.last_mut() {
            Some(last) if start <= next(last.1) => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

fn in_ranges<T: Ord + Copy>(ranges: &[(T, T)], address: T) -> bool {
    // The last range starting at or before the address is the only one that can hold it.
    let after = ranges.partition_point(|&(start, _)| start <= address);
    after > 0 && address <= ranges[after - 1].1
}

/// An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, as a dual-stack socket reports IPv4 peers) as
/// the IPv4 address it is, so `10.0.0.0/8` matches it.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    }
}

/// A client network as `/bans`, the console, the log and the shared store write it: an
/// address alone when the network is one address (`203.0.113.5`), else the prefix
/// (`2001:db8:1:2::/64`).
pub fn shown_network(network: &IpNet) -> String {
    if network.prefix_len() == network.max_prefix_len() {
        network.addr().to_string()
    } else {
        network.to_string()
    }
}

/// What an operator names a client by (`DELETE /bans`, the console's lift): an address, taken
/// as its network under `prefix`, or a network written as a prefix, which must be a network
/// boundary (`2001:db8:1:2::5/64` is refused, naming `2001:db8:1:2::/64`).
pub fn parse_client(
    text: &str,
    prefix: crate::config::ClientPrefix,
) -> Result<IpNet, ClientTextError> {
    let text = text.trim();
    if let Ok(address) = text.parse::<IpAddr>() {
        return Ok(prefix.network(address));
    }
    match text.parse::<IpNet>() {
        Ok(network) if network != network.trunc() => {
            Err(ClientTextError::HostBits(text.to_owned(), network.trunc()))
        }
        Ok(network) => Ok(match network {
            // An IPv4-mapped network is the IPv4 one it stands for.
            IpNet::V6(v6) => match v6.addr().to_ipv4_mapped() {
                Some(v4) if v6.prefix_len() >= 96 => {
                    ipnet::Ipv4Net::new(v4, v6.prefix_len() - 96).map_or(network, IpNet::V4)
                }
                _ => network,
            },
            v4 => v4,
        }),
        Err(_) => Err(ClientTextError::Neither(text.to_owned())),
    }
}

/// Why an operator's text names no client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientTextError {
    /// A network written with host bits set (the text as given), and the network it lies in.
    HostBits(String, IpNet),
    /// Neither an address nor a network (the text as given).
    Neither(String),
}

impl std::fmt::Display for ClientTextError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::HostBits(given, network) => {
                write!(f, "{given} has host bits set; did you mean {network}?")
            }
            Self::Neither(text) => write!(
                f,
                "{text} is neither an IP address nor a network (write 203.0.113.5 or 2001:db8:1:2::/64)"
            ),
        }
    }
}

impl std::error::Error for ClientTextError {}

/// The client address for a request from `peer` carrying these `X-Forwarded-For` values (in
/// header order): `peer` itself unless it is trusted; else the rightmost address that is not
/// itself trusted, walking from the right (each trusted hop appended the one before it), or the
/// leftmost when all are trusted. An entry that is not an address ends the walk: what lies left
/// of it cannot be attributed, so the last trusted hop is the client.
pub fn client_address<'a>(
    peer: IpAddr,
    trusted: &[IpNet],
    forwarded_for: impl DoubleEndedIterator<Item = &'a [u8]>,
) -> IpAddr {
    if trusted.is_empty() || !is_trusted(trusted, peer) {
        return peer;
    }
    let mut client = peer;
    for value in forwarded_for.rev() {
        for entry in value.rsplit(|&b| b == b',') {
            let Some(address) = parse_entry(entry) else {
                return client;
            };
            client = address;
            if !is_trusted(trusted, address) {
                return client;
            }
        }
    }
    client
}

/// One `X-Forwarded-For` entry: an address, optionally with a port (`203.0.113.7:1234`,
/// `[2001:db8::1]:443`), surrounded by optional whitespace.
fn parse_entry(entry: &[u8]) -> Option<IpAddr> {
    let text = std::str::from_utf8(entry).ok()?.trim();
    if let Ok(address) = text.parse::<IpAddr>() {
        return Some(canonical(address));
    }
    if let Ok(socket) = text.parse::<std::net::SocketAddr>() {
        return Some(canonical(socket.ip()));
    }
    let bracketed = text.strip_prefix('[')?.strip_suffix(']')?;
    bracketed.parse::<IpAddr>().ok().map(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter()
            .map(|n| n.parse().unwrap_or_else(|_| unreachable!()))
            .collect()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap_or_else(|_| unreachable!())
    }

    #[test]
    fn clients_are_named_by_address_or_network_and_shown_as_operators_write_them() {
        let prefix = crate::config::ClientPrefix::default();
        let shown = |text: &str| parse_client(text, prefix).map(|net| shown_network(&net));
        assert_eq!(shown("203.0.113.5"), Ok("203.0.113.5".to_owned()));
        assert_eq!(shown("::ffff:203.0.113.5"), Ok("203.0.113.5".to_owned()));
        assert_eq!(
            shown("2001:db8:1:2:aaaa::5"),
            Ok("2001:db8:1:2::/64".to_owned())
        );
        assert_eq!(
            shown("2001:db8:1:2::/64"),
            Ok("2001:db8:1:2::/64".to_owned())
        );
        assert_eq!(shown("198.51.100.0/24"), Ok("198.51.100.0/24".to_owned()));
        let host_bits = shown("2001:db8:1:2::5/64").expect_err("host bits set");
        assert!(matches!(host_bits, ClientTextError::HostBits(..)));
        assert_eq!(
            host_bits.to_string(),
            "2001:db8:1:2::5/64 has host bits set; did you mean 2001:db8:1:2::/64?"
        );
        assert_eq!(
            shown("a.example"),
            Err(ClientTextError::Neither("a.example".to_owned()))
        );
        assert!(shown("a.example").is_err_and(|e| e.to_string().contains("neither")));
        let wide = crate::config::ClientPrefix { ipv4: 24, ipv6: 48 };
        assert_eq!(
            shown_network(&wide.network(ip("2001:db8:1:2::9"))),
            "2001:db8:1::/48"
        );
        assert_eq!(
            shown_network(&wide.network(ip("192.0.2.77"))),
            "192.0.2.0/24"
        );
    }

    fn client(peer: &str, trusted: &[&str], headers: &[&str]) -> IpAddr {
        client_address(
            ip(peer),
            &nets(trusted),
            headers.iter().map(|h| h.as_bytes()),
        )
    }

    #[test]
    fn address_sets_answer_like_a_scan_of_their_networks() {
        let list = nets(&[
            "10.0.0.0/8",
            "10.1.0.0/16",
            "192.0.2.0/25",
            "192.0.2.128/25",
            "203.0.113.7/32",
            "2001:db8::/32",
            "0.0.0.0/32",
        ]);
        let set = AddressSet::new(&list);
        for text in [
            "10.0.0.0",
            "10.255.255.255",
            "11.0.0.0",
            "9.255.255.255",
            "192.0.2.0",
            "192.0.2.255",
            "192.0.3.0",
            "203.0.113.7",
            "203.0.113.8",
            "2001:db8::1",
            "2001:db9::",
            "::ffff:10.2.3.4",
            "0.0.0.0",
            "0.0.0.1",
            "::1",
        ] {
            let address = ip(text);
            assert_eq!(set.contains(address), is_trusted(&list, address), "{text}");
        }
        assert!(!AddressSet::new(&[]).contains(ip("10.0.0.1")));
        let everything = AddressSet::new(&nets(&["0.0.0.0/0", "::/0"]));
        assert!(everything.contains(ip("255.255.255.255")) && everything.contains(ip("ffff::1")));
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        assert_eq!(
            client("198.51.100.9", &[], &["1.2.3.4"]),
            ip("198.51.100.9")
        );
        assert_eq!(
            client("198.51.100.9", &["10.0.0.0/8"], &["1.2.3.4"]),
            ip("198.51.100.9")
        );
    }

    #[test]
    fn a_trusted_chain_is_walked_from_the_right() {
        let trusted = ["10.0.0.0/8", "127.0.0.1/32"];
        // Spoofed entries left of the real client do not count.
        assert_eq!(
            client("10.0.0.2", &trusted, &["6.6.6.6, 203.0.113.7, 10.0.0.1"]),
            ip("203.0.113.7")
        );
        // Several headers are one list, in order.
        assert_eq!(
            client(
                "10.0.0.2",
                &trusted,
                &["6.6.6.6", "203.0.113.7", "10.0.0.1"]
            ),
            ip("203.0.113.7")
        );
        // All trusted: the leftmost.
        assert_eq!(
            client("10.0.0.2", &trusted, &["10.1.1.1, 10.0.0.1"]),
            ip("10.1.1.1")
        );
        // No header: the peer.
        assert_eq!(client("10.0.0.2", &trusted, &[]), ip("10.0.0.2"));
        // Garbage stops the walk at the last trusted hop.
        assert_eq!(
            client("10.0.0.2", &trusted, &["203.0.113.7, unknown, 10.0.0.1"]),
            ip("10.0.0.1")
        );
        // Ports, brackets and mapped addresses.
        assert_eq!(
            client("::ffff:10.0.0.2", &trusted, &["[2001:db8::7]:443"]),
            ip("2001:db8::7")
        );
        assert_eq!(
            client("10.0.0.2", &trusted, &["203.0.113.7:5555"]),
            ip("203.0.113.7")
        );
    }
}
