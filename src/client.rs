//! Who the client is: the connection's peer, or, when the peer is a trusted proxy (a load
//! balancer, a CDN), the address it says it forwarded for. Pure.

use std::net::IpAddr;

use ipnet::IpNet;

/// Whether `address` is in one of `trusted`.
pub fn is_trusted(trusted: &[IpNet], address: IpAddr) -> bool {
    let address = canonical(address);
    trusted.iter().any(|net| net.contains(&address))
}

/// An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, as a dual-stack socket reports IPv4 peers) as
/// the IPv4 address it is, so `10.0.0.0/8` matches it.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    }
}

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

    fn client(peer: &str, trusted: &[&str], headers: &[&str]) -> IpAddr {
        client_address(
            ip(peer),
            &nets(trusted),
            headers.iter().map(|h| h.as_bytes()),
        )
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
