//! Requests in flight, process-wide and per client, and what the load changes for the upstream
//! side.
//!
//! Every request (an HTTP/1 request, an HTTP/2 stream) the connection layer serves holds a
//! [`Permit`] from one [`InFlight`] cap (`limits.max_requests_in_flight`), so requests, like
//! connections, are bounded: a request past the cap is refused before it costs an upstream
//! connection or a buffer. A request with a large head holds several places ([`weight`]): what a
//! request in flight costs grows with its head, which pingora keeps several copies of.
//!
//! The places are shared fairly ([`Holder`]): a client (an IPv4 address, an IPv6 /64) holds at
//! most `limits.max_requests_in_flight_per_client` of them, and under load less: once more than
//! half the places are taken, a client that already holds places takes another only while, after
//! it, at least four times what it then holds remains free ([`FAIR_SHARE_HEADROOM`]); its first
//! place may be any free one. One
//! client flooding (streams that never read, slow upstreams, large heads) so gets its own share
//! and no more; clients flooding together each stop at a fifth of what they leave free, so the
//! free places shrink by a fifth per flooding client once the first few hold whole shares,
//! rather than running out at once: with the defaults ten flooding clients leave a newcomer
//! dozens of places, and locking newcomers out takes about thirty flooding addresses. A trusted
//! proxy's connection carries many clients, so each such connection is a holder of its own.
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

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use foldhash::fast::RandomState;
use parking_lot::Mutex;

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

/// The cap on requests in flight, process-wide and per [`Holder`].
#[derive(Debug)]
pub struct InFlight {
    shared: Arc<Shared>,
}

/// What the permits of one [`InFlight`] share.
#[derive(Debug)]
struct Shared {
    /// Places taken now. A counter rather than a semaphore: a request past the cap is refused,
    /// never queued, so nothing waits for a place.
    taken: AtomicUsize,
    max: usize,
    /// Places one holder may hold at once.
    per_client: usize,
    /// Whether a holder with places takes another only while it leaves
    /// [`FAIR_SHARE_HEADROOM`] times its holding free (off when one holder may hold the whole
    /// cap: the operator's choice of no sharing).
    fair: bool,
    /// Places held, by holder; a holder whose last request ends leaves its shard, so the shards
    /// hold at most one entry per request in flight. Sharded so that requests of different
    /// clients seldom meet on a lock; the hasher is seeded per process (an attacker choosing
    /// addresses cannot aim them at one bucket).
    holders: Box<[Mutex<HashMap<Holder, usize, RandomState>>]>,
    shard_of: RandomState,
}

/// Under fair sharing, once more than half the places are taken, a holder with places takes more
/// only while, after it, this many times what it then holds remains free. With the defaults (1,024 places, 128 a client) and 4, ten
/// clients flooding one after another leave 136 places free and a newcomer takes 27 of them,
/// and it takes 32 flooding addresses to leave a newcomer none
/// (`tests::many_clients_flooding_leave_places_for_a_newcomer`); with 2: 51, 17 and 21 addresses.
/// A lone client with a share larger than the default (an eighth) is held to about half the cap;
/// below half the cap taken, nothing changes (a small process's lone client gets its whole share).
pub const FAIR_SHARE_HEADROOM: usize = 4;

/// Shards of [`Shared::holders`].
const HOLDER_SHARDS: usize = 64;

/// Head bytes per place under the cap: a request with a head of up to this takes one place, and
/// one more per this many bytes beyond.
pub const HEAD_BYTES_PER_PLACE: usize = 8 * 1024;

/// The places under the cap a request with a head (request line or pseudo-headers, and headers)
/// of `head_bytes` takes.
pub fn weight(head_bytes: usize) -> u32 {
    u32::try_from(1 + head_bytes / HEAD_BYTES_PER_PLACE).unwrap_or(u32::MAX)
}

/// The default `limits.max_requests_in_flight_per_client` under a cap of `max`: an eighth of it
/// (128 of the default 1,024: a browser has a hundred streams at most on a connection, and a
/// NAT's users seldom more at once), but at least [`MIN_DEFAULT_PER_CLIENT`] (all of a smaller
/// cap), so a small process still serves a browser's parallel requests.
pub fn default_per_client(max: usize) -> usize {
    (max / 8).max(MIN_DEFAULT_PER_CLIENT.min(max)).max(1)
}

/// The least default per-client share ([`default_per_client`]).
pub const MIN_DEFAULT_PER_CLIENT: usize = 8;

/// Whom a request's places are counted against: its client, as the connection layer knows it
/// (the peer, or the address a trusted peer's PROXY header names). An IPv6 client is its /64 (a
/// host is commonly given a whole /64, so its addresses are one client); an IPv4-mapped IPv6
/// address is the IPv4 address. A connection from a trusted proxy without a PROXY header carries
/// many clients it does not name to the connection layer: each such connection is a holder of
/// its own ([`Holder::connection`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Holder(HolderKey);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum HolderKey {
    V4(u32),
    V6Prefix(u64),
    Connection(u64),
}

/// Connection holders handed out so far ([`Holder::connection`]).
static CONNECTIONS: AtomicU64 = AtomicU64::new(0);

impl Holder {
    /// The client at `address` (its /64 for IPv6).
    pub fn client(address: IpAddr) -> Holder {
        match address.to_canonical() {
            IpAddr::V4(v4) => Holder(HolderKey::V4(u32::from(v4))),
            IpAddr::V6(v6) => {
                let prefix = u128::from(v6) >> 64;
                Holder(HolderKey::V6Prefix(
                    u64::try_from(prefix).unwrap_or(u64::MAX),
                ))
            }
        }
    }

    /// A holder of its own, for one connection whose clients are not known.
    pub fn connection() -> Holder {
        Holder(HolderKey::Connection(
            CONNECTIONS.fetch_add(1, Ordering::Relaxed),
        ))
    }
}

/// Why a request got no permit; [`Refusal::reason`] is its label in
/// `robotsguard_requests_refused_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `limits.max_requests_in_flight` places are taken.
    Process,
    /// Its holder holds `limits.max_requests_in_flight_per_client` places.
    Client,
    /// More than half the places are taken, and its holder holds places and would then leave
    /// fewer than [`FAIR_SHARE_HEADROOM`] times its holding free for everyone else.
    FairShare,
}

impl Refusal {
    /// The metric label.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::Process => "max_requests_in_flight",
            Refusal::Client => "max_requests_in_flight_per_client",
            Refusal::FairShare => "fair_share",
        }
    }

    /// In words, for a log line.
    pub fn explain(self) -> &'static str {
        match self {
            Refusal::Process => "limits.max_requests_in_flight places are taken",
            Refusal::Client => "the client holds limits.max_requests_in_flight_per_client places",
            Refusal::FairShare => {
                "the client holds places and would leave too few free for other clients"
            }
        }
    }
}

/// One request's places under the cap; released when dropped.
#[derive(Debug)]
pub struct Permit {
    shared: Arc<Shared>,
    holder: Holder,
    places: usize,
}

impl Drop for Permit {
    fn drop(&mut self) {
        {
            let mut shard = self.shared.shard(self.holder).lock();
            if let Some(held) = shard.get_mut(&self.holder) {
                *held = held.saturating_sub(self.places);
                if *held == 0 {
                    shard.remove(&self.holder);
                }
            }
        }
        self.shared.taken.fetch_sub(self.places, Ordering::AcqRel);
        IN_FLIGHT.fetch_sub(1, Ordering::Relaxed);
        METRICS.requests_in_flight.dec();
    }
}

impl Shared {
    fn shard(&self, holder: Holder) -> &Mutex<HashMap<Holder, usize, RandomState>> {
        let digest = self.shard_of.hash_one(holder);
        &self.holders[(digest as usize) % HOLDER_SHARDS]
    }
}

impl InFlight {
    /// A cap of `max` requests at once (at least one), of which one holder may hold
    /// `per_client` (at least one, at most `max`; `max` turns fair sharing off).
    pub fn new(max: usize, per_client: usize) -> Arc<InFlight> {
        let max = max.max(1);
        let per_client = per_client.clamp(1, max);
        NARROW_THRESHOLD.store(NARROW_ABOVE.min(max / 16), Ordering::Relaxed);
        SQUEEZE_THRESHOLD.store(SQUEEZE_ABOVE.min(max / 4), Ordering::Relaxed);
        METRICS
            .max_requests_in_flight
            .set(i64::try_from(max).unwrap_or(i64::MAX));
        METRICS
            .max_requests_in_flight_per_client
            .set(i64::try_from(per_client).unwrap_or(i64::MAX));
        Arc::new(InFlight {
            shared: Arc::new(Shared {
                taken: AtomicUsize::new(0),
                max,
                per_client,
                fair: per_client < max,
                holders: (0..HOLDER_SHARDS)
                    .map(|_| Mutex::new(HashMap::with_hasher(RandomState::default())))
                    .collect(),
                shard_of: RandomState::default(),
            }),
        })
    }

    /// A permit for one more request of `holder` taking `places` (see [`weight`]), or why not
    /// (the caller refuses the request and counts it). It is refused when the process cap has no
    /// room for it, when its holder would hold more than its share, or (with sharing on, past half
    /// the cap) when its holder already holds places and would then leave fewer than
    /// [`FAIR_SHARE_HEADROOM`] times its holding free: the last free places are for holders that
    /// hold fewer, and a holder's first place is refused only when none is free.
    pub fn try_take(&self, holder: Holder, places: u32) -> Result<Permit, Refusal> {
        let shared = &self.shared;
        let places = usize::try_from(places)
            .unwrap_or(usize::MAX)
            .clamp(1, shared.max);
        // The holder's count is read and raised under its shard's lock, so two requests of one
        // holder cannot both pass on the same count; the process count is one atomic update.
        let mut shard = shared.shard(holder).lock();
        let held = shard.get(&holder).copied().unwrap_or(0);
        let mut refusal = Refusal::Process;
        shared
            .taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |taken| {
                let after = taken
                    .checked_add(places)
                    .filter(|after| *after <= shared.max);
                let Some(after) = after else {
                    refusal = Refusal::Process;
                    return None;
                };
                let holds = held.saturating_add(places);
                if holds > shared.per_client {
                    refusal = Refusal::Client;
                    return None;
                }
                let leaves = shared.max - after;
                let loaded = after > shared.max / 2;
                if shared.fair
                    && held > 0
                    && loaded
                    && holds.saturating_mul(FAIR_SHARE_HEADROOM) > leaves
                {
                    refusal = Refusal::FairShare;
                    return None;
                }
                Some(after)
            })
            .map_err(|_| refusal)?;
        *shard.entry(holder).or_insert(0) += places;
        drop(shard);
        IN_FLIGHT.fetch_add(1, Ordering::Relaxed);
        METRICS.requests_in_flight.inc();
        Ok(Permit {
            shared: shared.clone(),
            holder,
            places,
        })
    }

    /// The cap.
    pub fn max(&self) -> usize {
        self.shared.max
    }

    /// The places one holder may hold.
    pub fn per_client(&self) -> usize {
        self.shared.per_client
    }

    /// Holders with a request in flight now.
    pub fn holders(&self) -> usize {
        self.shared
            .holders
            .iter()
            .map(|shard| shard.lock().len())
            .sum()
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

    fn client(last: u8) -> Holder {
        Holder::client(IpAddr::from([192, 0, 2, last]))
    }

    #[test]
    fn permits_stop_at_the_cap_and_come_back_when_dropped() {
        // One holder may hold the whole cap: no sharing.
        let cap = InFlight::new(2, 2);
        let before = in_flight();
        let a = cap.try_take(client(1), 1).expect("first");
        let b = cap.try_take(client(1), 1).expect("second");
        assert_eq!(cap.try_take(client(2), 1).err(), Some(Refusal::Process));
        assert!(in_flight() >= before + 2);
        drop(a);
        let c = cap.try_take(client(2), 1).expect("a freed place");
        drop((b, c));
        assert_eq!(cap.max(), 2);
        assert_eq!(
            cap.holders(),
            0,
            "a holder whose requests ended is forgotten"
        );
        // A large head takes more places; more than the cap is the whole cap.
        assert_eq!(weight(500), 1);
        assert_eq!(weight(29 * 1024), 4);
        let big = cap
            .try_take(client(1), weight(9 * 1024))
            .expect("two places");
        assert!(cap.try_take(client(1), 1).is_err());
        drop(big);
        let all = cap.try_take(client(1), u32::MAX).expect("the whole cap");
        drop(all);
    }

    #[test]
    fn one_client_holds_its_share_and_no_more() {
        let cap = InFlight::new(64, 8);
        let hog: Vec<Permit> = (0..8)
            .map(|_| cap.try_take(client(1), 1).expect("within the share"))
            .collect();
        assert_eq!(cap.try_take(client(1), 1).err(), Some(Refusal::Client));
        // A large head counts its places against the share too.
        assert_eq!(cap.try_take(client(2), 9).err(), Some(Refusal::Client));
        let other = cap
            .try_take(client(2), weight(29 * 1024))
            .expect("another client");
        drop(hog);
        assert!(cap.try_take(client(1), 1).is_ok());
        drop(other);
        assert_eq!(cap.holders(), 0);
    }

    /// Takes single places for `clients` until none of them gets more: one client after
    /// another (`at_once: false`), or each in turn.
    fn flood(cap: &InFlight, clients: std::ops::Range<u8>, at_once: bool) -> Vec<Permit> {
        let mut held = Vec::new();
        if at_once {
            for _ in 0..=cap.per_client() {
                for flooder in clients.clone() {
                    held.extend(cap.try_take(client(flooder), 1).ok());
                }
            }
        } else {
            for flooder in clients {
                held.extend(
                    (0..=cap.per_client()).map_while(|_| cap.try_take(client(flooder), 1).ok()),
                );
            }
        }
        held
    }

    /// Places a newcomer gets, one at a time, beside what the others hold now.
    fn newcomer(cap: &InFlight) -> usize {
        let places: Vec<Permit> = (0..cap.per_client())
            .map_while(|_| cap.try_take(client(250), 1).ok())
            .collect();
        places.len()
    }

    #[test]
    fn many_clients_flooding_leave_places_for_a_newcomer() {
        // The defaults at 1,024 places: 128 a client. Ten clients one after another: the first
        // four hold whole shares, each later one a fifth of what it leaves.
        let cap = InFlight::new(1024, 128);
        let held = flood(&cap, 10..20, false);
        assert_eq!(
            1024 - held.len(),
            136,
            "free beside ten clients flooding in turn"
        );
        assert_eq!(newcomer(&cap), 27);
        drop(held);
        // At once, each stops at a fifth of what it leaves.
        let held = flood(&cap, 10..20, true);
        assert_eq!(
            1024 - held.len(),
            294,
            "free beside ten clients flooding at once"
        );
        assert_eq!(newcomer(&cap), 58);
        drop(held);
        // 31 flooding addresses still leave a newcomer a place; 32 leave none.
        let held = flood(&cap, 10..41, false);
        assert!(newcomer(&cap) >= 1);
        let more = flood(&cap, 41..42, false);
        assert_eq!(newcomer(&cap), 0, "32 flooding addresses");
        drop((held, more));
        // A first place with a large head, beside ten.
        let held = flood(&cap, 10..20, false);
        assert!(cap.try_take(client(251), weight(29 * 1024)).is_ok());
        drop(held);
        assert_eq!(cap.holders(), 0);
        // A small process (four connections, sixteen places) lets a lone client hold its whole
        // share of 8: below half the cap the fair share does not apply.
        let small = InFlight::new(16, default_per_client(16));
        let held = flood(&small, 10..11, false);
        assert_eq!(held.len(), 8);
        assert!(newcomer(&small) >= 1);
        drop(held);
        // Without sharing (one client may hold the whole cap), nothing is kept back.
        let unshared = InFlight::new(64, 64);
        let held = flood(&unshared, 10..11, false);
        assert_eq!(held.len(), 64);
    }

    #[test]
    fn a_holder_is_an_ipv4_address_an_ipv6_prefix_or_a_connection() {
        let v6 = |text: &str| Holder::client(text.parse().expect("an address"));
        assert_eq!(v6("2001:db8::1"), v6("2001:db8::ffff:2"));
        assert_ne!(v6("2001:db8::1"), v6("2001:db8:0:1::1"));
        assert_eq!(v6("::ffff:192.0.2.1"), client(1));
        assert_ne!(client(1), client(2));
        assert_ne!(Holder::connection(), Holder::connection());
        let cap = InFlight::new(64, 2);
        let _a = cap.try_take(v6("2001:db8::1"), 1).expect("first");
        let _b = cap.try_take(v6("2001:db8::2"), 1).expect("second");
        assert_eq!(
            cap.try_take(v6("2001:db8::3"), 1).err(),
            Some(Refusal::Client),
            "one /64 is one client"
        );
        assert!(cap.try_take(v6("2001:db8:0:1::1"), 1).is_ok());
    }

    #[test]
    fn the_default_share_is_an_eighth_of_the_cap_and_at_least_eight() {
        assert_eq!(default_per_client(1024), 128);
        assert_eq!(default_per_client(256), 32);
        assert_eq!(default_per_client(64), 8);
        assert_eq!(default_per_client(16), 8);
        assert_eq!(default_per_client(2), 2);
        assert_eq!(default_per_client(1), 1);
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
