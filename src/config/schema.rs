//! The config file's contract in one place: the keys each section accepts and
//! the default values of the optional ones.
//!
//! Key names here are a public interface; renaming one breaks operators'
//! files.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

/// `reports.top`: violation rows kept per origin and time slice.
pub(crate) const DEFAULT_REPORTS_TOP: usize = 1000;
/// `reports.window`: how far back the reports reach.
pub(crate) const DEFAULT_REPORTS_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);

/// Loopback by default: exposing the proxy or the admin server on every
/// interface should be a decision written in the config.
pub(crate) const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080));
pub(crate) const DEFAULT_ADMIN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9090));
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(10);
pub(crate) const DEFAULT_BLOCK_STATUS: u16 = 403;
pub(crate) const DEFAULT_REFRESH: Duration = Duration::from_secs(5 * 60);
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// RFC 9309 section 2.5: crawlers must parse at least the first 500 KiB of
/// a robots.txt, so smaller limits are refused.
pub(crate) const MIN_ROBOTS_MAX_SIZE: usize = 500 * 1024;
pub(crate) const DEFAULT_ROBOTS_MAX_SIZE: usize = MIN_ROBOTS_MAX_SIZE;
/// A robots.txt is held in memory per origin; a cap keeps a typo such as
/// `5GiB` from becoming a memory problem.
pub(crate) const MAX_ROBOTS_MAX_SIZE: usize = 64 * 1024 * 1024;

/// `limits.max_header_bytes` below this would refuse ordinary browser requests (cookies
/// alone reach a few KiB); above the ceiling a header block is no longer a header.
pub(crate) const MIN_MAX_HEADER_BYTES: u64 = 4 * 1024;
pub(crate) const MAX_MAX_HEADER_BYTES: u64 = 1024 * 1024;
/// A sanity bound on `limits.max_connections` and `limits.max_requests_in_flight`.
pub(crate) const MAX_MAX_CONNECTIONS: i128 = 10_000_000;
/// A sanity bound on `limits.max_streams_per_connection` (browsers open about a hundred).
pub(crate) const MAX_STREAMS_PER_CONNECTION: i128 = 1000;

/// A sanity bound on `threads`; more than this is almost surely a typo.
pub(crate) const MAX_THREADS: u64 = 1024;

/// Origin names are metric label values; keep them short.
pub(crate) const MAX_NAME_LEN: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_max_size_is_the_documented_value() {
        assert_eq!(DEFAULT_ROBOTS_MAX_SIZE, 512_000);
    }
}
