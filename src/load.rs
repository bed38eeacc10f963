//! Requests in flight, process-wide, and what the load changes for the upstream side.
//!
//! Every request (an HTTP/1 request, an HTTP/2 stream) the connection layer serves holds a
//! [`Permit`] from one [`InFlight`] cap (`limits.max_requests_in_flight`), so requests, like
//! connections, are bounded: a request past the cap is refused before it costs an upstream
//! connection or a buffer. A request with a large head holds several places ([`weight`]): what a
//! request in flight costs grows with its head, which pingora keeps several copies of.
//!
//! pingora proxies a response through a pipeline of about a dozen upstream reads (a task queue of
//! four, the read waiting for room, the batch being written), each up to 64 KiB: about 700 KiB
//! per request whose client does not read. It offers no way to read the upstream in smaller
//! pieces, so under load robotsguard opens upstream connections with a small TCP receive buffer,
//! which bounds each read, and so the pipeline ([`Narrowing`]):
//!
//! - more than [`narrow_above`] requests in flight (64): [`NARROW_RECEIVE_BUFFER`], reads of up to
//!   8 KiB (about 140 KiB per stalled request, its connections included);
//! - more than [`squeeze_above`] (256): [`SQUEEZED_RECEIVE_BUFFER`], reads of about 2 KiB (about
//!   70 KiB).
//!
//! The buffer is set before the connection connects: shrunk on an established connection, whose
//! window has grown, it makes the kernel drop data the window already let in (0.3 MB/s on
//! loopback instead of 180 MB/s). So narrow connections live in pools of their own (a
//! [`Narrowing::pool_group`]), used only while the load lasts; a quiet process reuses its wide
//! connections and lets the narrow ones time out. A small window costs throughput from a distant
//! upstream (a window per round trip), so below those loads nothing changes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::metrics::METRICS;

/// Requests in flight above which new upstream exchanges get a narrow receive window: this, or
/// a sixteenth of a smaller cap on requests in flight ([`narrow_above`]).
pub const NARROW_ABOVE: usize = 64;

/// Requests in flight above which they get a very narrow one: this, or a quarter of a smaller
/// cap ([`squeeze_above`]).
pub const SQUEEZE_ABOVE: usize = 256;

/// The receive buffer (`SO_RCVBUF`, bytes) of an upstream connection opened under load: each
/// read returns about this much.
pub const NARROW_RECEIVE_BUFFER: u32 = 8 * 1024;

/// The receive buffer of an upstream connection opened under heavy load.
pub const SQUEEZED_RECEIVE_BUFFER: u32 = 2 * 1024;

/// Requests holding a permit now, for [`in_flight`].
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// The loads at which windows are narrowed and squeezed, set with the cap ([`InFlight::new`]).
static NARROW_THRESHOLD: AtomicUsize = AtomicUsize::new(NARROW_ABOVE);
static SQUEEZE_THRESHOLD: AtomicUsize = AtomicUsize::new(SQUEEZE_ABOVE);

/// The process-wide cap on requests in flight.
#[derive(Debug)]
pub struct InFlight {
    /// Places taken now. A counter rather than a semaphore: a request past the cap is refused,
    /// never queued, so nothing waits for a place and taking and giving one back need no lock.
    taken: Arc<AtomicUsize>,
    max: usize,
}

/// Head bytes per place under the cap: a request with a head of up to this takes one place, and
/// one more per this many bytes beyond.
pub const HEAD_BYTES_PER_PLACE: usize = 8 * 1024;

/// The places under the cap a request with a head (request line or pseudo-headers, and headers)
/// of `head_bytes` takes.
pub fn weight(head_bytes: usize) -> u32 {
    u32::try_from(1 + head_bytes / HEAD_BYTES_PER_PLACE).unwrap_or(u32::MAX)
}

/// One request's places under the cap; released when dropped.
#[derive(Debug)]
pub struct Permit {
    taken: Arc<AtomicUsize>,
    places: usize,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.taken.fetch_sub(self.places, Ordering::AcqRel);
        IN_FLIGHT.fetch_sub(1, Ordering::Relaxed);
        METRICS.requests_in_flight.dec();
    }
}

impl InFlight {
    /// A cap of `max` requests at once (at least one).
    pub fn new(max: usize) -> Arc<InFlight> {
        let max = max.max(1);
        NARROW_THRESHOLD.store(NARROW_ABOVE.min(max / 16), Ordering::Relaxed);
        SQUEEZE_THRESHOLD.store(SQUEEZE_ABOVE.min(max / 4), Ordering::Relaxed);
        METRICS
            .max_requests_in_flight
            .set(i64::try_from(max).unwrap_or(i64::MAX));
        Arc::new(InFlight {
            taken: Arc::new(AtomicUsize::new(0)),
            max,
        })
    }

    /// A permit for one more request taking `places` (see [`weight`]), or `None` when that many
    /// are not free (the caller refuses the request and counts it).
    pub fn try_take(&self, places: u32) -> Option<Permit> {
        let places = usize::try_from(places)
            .unwrap_or(usize::MAX)
            .clamp(1, self.max);
        self.taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |taken| {
                taken.checked_add(places).filter(|after| *after <= self.max)
            })
            .ok()?;
        IN_FLIGHT.fetch_add(1, Ordering::Relaxed);
        METRICS.requests_in_flight.inc();
        Some(Permit {
            taken: self.taken.clone(),
            places,
        })
    }

    /// The cap.
    pub fn max(&self) -> usize {
        self.max
    }
}

/// Requests in flight in this process now.
pub fn in_flight() -> usize {
    IN_FLIGHT.load(Ordering::Relaxed)
}

/// Requests in flight above which upstream windows are narrowed: [`NARROW_ABOVE`], or a
/// sixteenth of the cap when that is less (a process capped at a few hundred requests narrows
/// sooner, in proportion).
pub fn narrow_above() -> usize {
    NARROW_THRESHOLD.load(Ordering::Relaxed)
}

/// Requests in flight above which upstream windows are squeezed: [`SQUEEZE_ABOVE`], or a quarter
/// of the cap when that is less.
pub fn squeeze_above() -> usize {
    SQUEEZE_THRESHOLD.load(Ordering::Relaxed)
}

/// How upstream connections are opened at the current load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Narrowing {
    /// Quiet: as the kernel tunes them.
    Wide,
    /// More than [`narrow_above`] requests in flight: [`NARROW_RECEIVE_BUFFER`].
    Narrow,
    /// More than [`squeeze_above`]: [`SQUEEZED_RECEIVE_BUFFER`].
    Squeezed,
}

impl Narrowing {
    /// At the load now.
    pub fn now() -> Narrowing {
        let load = in_flight();
        if load > squeeze_above() {
            Narrowing::Squeezed
        } else if load > narrow_above() {
            Narrowing::Narrow
        } else {
            Narrowing::Wide
        }
    }

    /// The receive buffer to set before connecting, if any.
    pub fn receive_buffer(self) -> Option<u32> {
        match self {
            Narrowing::Wide => None,
            Narrowing::Narrow => Some(NARROW_RECEIVE_BUFFER),
            Narrowing::Squeezed => Some(SQUEEZED_RECEIVE_BUFFER),
        }
    }

    /// The upstream pool group of connections opened this way (pingora's `HttpPeer::group_key`):
    /// a request reuses only a connection opened as it would open one, so a narrow connection never
    /// serves a quiet process, and a wide one, whose pipeline would be large, never serves a
    /// loaded one.
    pub fn pool_group(self) -> u64 {
        match self {
            Narrowing::Wide => 0,
            Narrowing::Narrow => 0x6e61_7272_6f77,
            Narrowing::Squeezed => 0x7371_7565_657a,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_stop_at_the_cap_and_come_back_when_dropped() {
        let cap = InFlight::new(2);
        let before = in_flight();
        let a = cap.try_take(1).expect("first");
        let b = cap.try_take(1).expect("second");
        assert!(cap.try_take(1).is_none());
        assert!(in_flight() >= before + 2);
        drop(a);
        let c = cap.try_take(1).expect("a freed place");
        drop((b, c));
        assert_eq!(cap.max(), 2);
        // A large head takes more places; more than the cap is the whole cap.
        assert_eq!(weight(500), 1);
        assert_eq!(weight(29 * 1024), 4);
        let big = cap.try_take(weight(9 * 1024)).expect("two places");
        assert!(cap.try_take(1).is_none());
        drop(big);
        let all = cap.try_take(u32::MAX).expect("the whole cap");
        drop(all);
    }

    /// Reads from a connection whose receive buffer was set to `buffer` before it connected,
    /// with the sender ahead; the sizes of the reads after the first.
    fn read_sizes(buffer: Option<u32>) -> Vec<usize> {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("address");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let client = runtime.block_on(async {
            let socket = tokio::net::TcpSocket::new_v4().expect("socket");
            if let Some(bytes) = buffer {
                socket.set_recv_buffer_size(bytes).expect("receive buffer");
            }
            socket
                .connect(addr)
                .await
                .expect("connect")
                .into_std()
                .expect("std")
        });
        client.set_nonblocking(false).expect("blocking");
        let (mut server, _) = listener.accept().expect("accept");
        let sender = std::thread::spawn(move || {
            let chunk = vec![7u8; 64 * 1024];
            for _ in 0..32 {
                if server.write_all(&chunk).is_err() {
                    break;
                }
            }
        });
        let mut client = client;
        std::thread::sleep(std::time::Duration::from_millis(100));
        let mut buf = vec![0u8; 64 * 1024];
        let mut sizes = Vec::new();
        for _ in 0..8 {
            sizes.push(client.read(&mut buf).expect("read"));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        drop(client);
        let _ = sender.join();
        sizes.split_off(1)
    }

    #[test]
    fn a_connection_opened_narrow_reads_in_small_pieces() {
        let wide = read_sizes(Narrowing::Wide.receive_buffer());
        assert!(wide.iter().any(|&n| n > 16 * 1024), "{wide:?}");
        let narrow = read_sizes(Narrowing::Narrow.receive_buffer());
        assert!(narrow.iter().all(|&n| n <= 16 * 1024), "{narrow:?}");
        let squeezed = read_sizes(Narrowing::Squeezed.receive_buffer());
        assert!(squeezed.iter().all(|&n| n <= 4 * 1024), "{squeezed:?}");
        assert_ne!(Narrowing::Narrow.pool_group(), Narrowing::Wide.pool_group());
        assert_ne!(
            Narrowing::Squeezed.pool_group(),
            Narrowing::Narrow.pool_group()
        );
    }
}
