//! The PROXY protocol (HAProxy's, v1 text and v2 binary) that load balancers such as AWS NLB and
//! HAProxy put before a connection's first byte to name the client. Parsing is the `ppp` crate's;
//! this module reads the header off a connection within a deadline and a byte cap, and makes its
//! source address the connection's peer address, so everything downstream (logs,
//! `X-Forwarded-For`, per-client decisions) sees the client.

use std::net::SocketAddr;

use bytes::BytesMut;
use ppp::{v1, v2, HeaderResult, PartialResult};

/// Longest header accepted: a v2 header with addresses and a few TLVs.
pub const MAX_HEADER_BYTES: usize = 4096;

/// Longest v1 header the protocol allows.
const V1_MAX_BYTES: usize = 107;

/// What a buffer starting a connection holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Not enough bytes yet.
    Incomplete,
    /// Not a valid PROXY header: the connection is closed.
    Invalid(String),
    /// A header of `length` bytes; `source` is the client, or `None` for `LOCAL` / `UNKNOWN`
    /// (a health check from the balancer itself: the socket's peer stays the peer).
    Header {
        source: Option<SocketAddr>,
        length: usize,
    },
}

/// Parses the PROXY header at the start of `buf`.
pub fn parse(buf: &[u8]) -> Parsed {
    if buf.is_empty() {
        return Parsed::Incomplete;
    }
    let result = HeaderResult::parse(buf);
    if result.is_incomplete() {
        // A v1 header is one line of at most 107 bytes: a finished or overlong line that still
        // does not parse never will.
        let v1_line_done = buf.starts_with(b"PROXY")
            && (memchr::memmem::find(buf, b"\r\n").is_some() || buf.len() >= V1_MAX_BYTES);
        return if v1_line_done {
            Parsed::Invalid("bad PROXY v1 header".to_string())
        } else if buf.len() >= MAX_HEADER_BYTES {
            Parsed::Invalid(format!(
                "no complete PROXY header in {MAX_HEADER_BYTES} bytes"
            ))
        } else {
            Parsed::Incomplete
        };
    }
    match result {
        HeaderResult::V1(Ok(header)) => {
            let source = match header.addresses {
                v1::Addresses::Tcp4(a) => Some(SocketAddr::from((a.source_address, a.source_port))),
                v1::Addresses::Tcp6(a) => Some(SocketAddr::from((a.source_address, a.source_port))),
                v1::Addresses::Unknown => None,
            };
            Parsed::Header {
                source,
                length: header.header.len(),
            }
        }
        HeaderResult::V2(Ok(header)) => {
            let source = match (header.command, header.addresses) {
                (v2::Command::Local, _) => None,
                (v2::Command::Proxy, v2::Addresses::IPv4(a)) => {
                    Some(SocketAddr::from((a.source_address, a.source_port)))
                }
                (v2::Command::Proxy, v2::Addresses::IPv6(a)) => {
                    Some(SocketAddr::from((a.source_address, a.source_port)))
                }
                // UNSPEC and Unix sockets name no IP client.
                (v2::Command::Proxy, _) => None,
            };
            Parsed::Header {
                source,
                length: header.len(),
            }
        }
        HeaderResult::V1(Err(e)) => Parsed::Invalid(format!("bad PROXY v1 header: {e}")),
        HeaderResult::V2(Err(e)) => Parsed::Invalid(format!("bad PROXY v2 header: {e}")),
    }
}

/// What reading a header off a connection came to.
#[derive(Debug)]
pub enum Read {
    /// The client address (if the header names one) and the bytes read past the header.
    Header {
        source: Option<SocketAddr>,
        rest: BytesMut,
    },
    /// Closed, timed out or invalid: drop the connection.
    Failed(String),
}

/// Reads a PROXY header from `stream` before `deadline`. Reads at most [`MAX_HEADER_BYTES`]; bytes
/// after the header are returned, not lost.
pub async fn read<S: tokio::io::AsyncRead + Unpin>(
    stream: &mut S,
    deadline: tokio::time::Instant,
) -> Read {
    use tokio::io::AsyncReadExt;
    let mut buf = BytesMut::with_capacity(512);
    loop {
        match parse(&buf) {
            Parsed::Header { source, length } => {
                let rest = buf.split_off(length);
                return Read::Header { source, rest };
            }
            Parsed::Invalid(why) => return Read::Failed(why),
            Parsed::Incomplete => {}
        }
        if buf.capacity() - buf.len() < 256 {
            buf.reserve(512);
        }
        match tokio::time::timeout_at(deadline, stream.read_buf(&mut buf)).await {
            Ok(Ok(0)) => return Read::Failed("closed before a PROXY header".to_string()),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Read::Failed(format!("reading the PROXY header: {e}")),
            Err(_) => return Read::Failed("no PROXY header in time".to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(command: u8, family: u8, addresses: &[u8], tlvs: &[u8]) -> Vec<u8> {
        let mut header = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
        header.push(0x20 | command);
        header.push(family);
        let len = u16::try_from(addresses.len() + tlvs.len()).unwrap_or(u16::MAX);
        header.extend_from_slice(&len.to_be_bytes());
        header.extend_from_slice(addresses);
        header.extend_from_slice(tlvs);
        header
    }

    #[test]
    fn v1_headers() {
        let text = b"PROXY TCP4 203.0.113.7 10.0.0.1 51234 443\r\nGET / HTTP/1.1\r\n";
        assert_eq!(
            parse(text),
            Parsed::Header {
                source: Some(
                    "203.0.113.7:51234"
                        .parse()
                        .unwrap_or_else(|_| unreachable!())
                ),
                length: 43
            }
        );
        let v6 = b"PROXY TCP6 2001:db8::7 2001:db8::1 1 2\r\n";
        assert!(matches!(parse(v6), Parsed::Header { source: Some(a), .. } if a.is_ipv6()));
        assert!(matches!(
            parse(b"PROXY UNKNOWN\r\n"),
            Parsed::Header {
                source: None,
                length: 15
            }
        ));
        assert_eq!(parse(b"PROXY TCP4 203.0"), Parsed::Incomplete);
        assert!(matches!(
            parse(b"GET / HTTP/1.1\r\n\r\n"),
            Parsed::Invalid(_)
        ));
        assert!(matches!(
            parse(b"PROXY TCP4 nonsense\r\n"),
            Parsed::Invalid(_)
        ));
    }

    #[test]
    fn v2_headers() {
        let mut addresses = vec![203, 0, 113, 7, 10, 0, 0, 1];
        addresses.extend_from_slice(&51234u16.to_be_bytes());
        addresses.extend_from_slice(&443u16.to_be_bytes());
        let proxy = v2(1, 0x11, &addresses, &[0x04, 0x00, 0x01, 0x00]);
        assert_eq!(
            parse(&proxy),
            Parsed::Header {
                source: Some(
                    "203.0.113.7:51234"
                        .parse()
                        .unwrap_or_else(|_| unreachable!())
                ),
                length: proxy.len()
            }
        );
        let local = v2(0, 0x00, &[], &[]);
        assert_eq!(
            parse(&local),
            Parsed::Header {
                source: None,
                length: 16
            }
        );
        assert_eq!(parse(&proxy[..10]), Parsed::Incomplete);
        assert_eq!(parse(&proxy[..20]), Parsed::Incomplete);
    }

    #[test]
    fn headers_never_complete_within_the_cap_are_refused() {
        let endless = vec![b' '; MAX_HEADER_BYTES];
        let mut buf = b"PROXY TCP4".to_vec();
        buf.extend_from_slice(&endless);
        assert!(matches!(parse(&buf), Parsed::Invalid(_)));
    }
}
