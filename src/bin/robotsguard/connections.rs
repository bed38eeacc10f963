//! The connections the edge holds ([`crate::edge`] runs them): the listening application's
//! parts ([`EdgeApp`]), the connection cap and its idle waits ([`Slots`], [`Idle`],
//! [`HeadWait`]) and the client a connection's requests count against ([`Client`]). Below the
//! protocols: HTTP/1 ([`crate::http1`]) and HTTP/2 ([`crate::http2`]) use these, and the edge
//! that chooses between them uses all three.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pingora::apps::HttpServerApp;
use pingora::listeners::tls::Acceptor;
use pingora::protocols::{GetSocketDigest, SocketDigest, Stream, UniqueID};
use pingora::proxy::HttpProxy;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use crate::proxy::RobotsGuardProxy;
use crate::waits::{Ticket, Waits};
use robotsguard::guard::Guard;
use robotsguard::load::{Holder, InFlight, Refusal};
use robotsguard::metrics::METRICS;

/// A listening application: the connection layer around an HTTP application, pingora's HTTP
/// proxy on the proxy listeners and the decision service on the decision listeners, so both
/// have the same deadlines, caps and buffers.
pub struct EdgeApp<A = HttpProxy<RobotsGuardProxy>> {
    pub(crate) http: Arc<A>,
    pub(crate) guard: Guard,
    /// Whose connections each count as a client of their own (see [`EdgeApp::client`]).
    pub(crate) carriers: Carriers,
    pub(crate) slots: Arc<Slots>,
    pub(crate) in_flight: Arc<InFlight>,
    /// Listeners whose connections start with a PROXY protocol header.
    pub(crate) proxy_protocol: ListenerAddresses,
    /// Plain listeners that take HTTP/2 with prior knowledge (h2c) beside HTTP/1.1.
    pub(crate) h2c: ListenerAddresses,
    /// TLS listeners and their acceptors.
    pub(crate) tls: Vec<(std::net::SocketAddr, Arc<Acceptor>)>,
}

/// Some of the listen addresses (those with a PROXY protocol header, those that take h2c),
/// matched against a connection's local address.
#[derive(Debug, Clone, Default)]
pub struct ListenerAddresses(Vec<std::net::SocketAddr>);

impl ListenerAddresses {
    pub fn new(addresses: Vec<std::net::SocketAddr>) -> Self {
        ListenerAddresses(addresses)
    }

    /// Whether a connection accepted on `local` came through one of these listeners.
    pub fn contains(&self, local: Option<std::net::SocketAddr>) -> bool {
        self.0.iter().any(|listen| listener_matches(*listen, local))
    }
}

/// Whether a connection accepted on `local` came through the listener on `listen`. A listener
/// on the unspecified address accepts on every local address with its port.
pub(crate) fn listener_matches(
    listen: std::net::SocketAddr,
    local: Option<std::net::SocketAddr>,
) -> bool {
    let Some(local) = local else {
        return false;
    };
    listen.port() == local.port()
        && (listen.ip() == local.ip()
            || (listen.ip().is_unspecified()
                && listen.is_ipv4() == local.ip().to_canonical().is_ipv4()))
}

/// The local address of a connection, as its socket digest has it.
pub(crate) fn local_address(stream: &Stream) -> Option<std::net::SocketAddr> {
    stream
        .get_socket_digest()
        .and_then(|digest| digest.local_addr().and_then(|a| a.as_inet().copied()))
}

/// The peer address of a connection, as its socket digest has it (after a PROXY header, the
/// client it names).
pub(crate) fn peer_address(stream: &Stream) -> Option<std::net::IpAddr> {
    stream
        .get_socket_digest()
        .and_then(|digest| digest.peer_addr().and_then(|a| a.as_inet().map(|a| a.ip())))
}

/// Who a connection's requests are counted against under the per-client share of requests in
/// flight, and the address its refusals are logged with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Client {
    pub(crate) holder: Holder,
    address: Option<std::net::IpAddr>,
}

impl Client {
    /// Counts and logs (rate-limited) a request refused for `refusal`.
    pub(crate) fn refused(&self, refusal: Refusal) {
        METRICS
            .refused_requests
            .with_label_values(&[refusal.reason()])
            .inc();
        robotsguard::logs::request_refused(refusal.reason(), self.address, refusal.explain());
    }
}

/// Makes `source` the connection's peer address, keeping its other socket facts.
pub fn set_peer_address<S: GetSocketDigest + UniqueID + ?Sized>(
    stream: &mut S,
    source: std::net::SocketAddr,
) {
    let old = stream.get_socket_digest();
    let digest = SocketDigest::from_raw_fd(stream.id());
    let _ = digest
        .peer_addr
        .set(Some(pingora::protocols::l4::socket::SocketAddr::Inet(
            source,
        )));
    if let Some(local) = old.as_ref().and_then(|d| d.local_addr().cloned()) {
        let _ = digest.local_addr.set(Some(local));
    }
    stream.set_socket_digest(digest);
}

/// Counts and logs (rate-limited) a connection closed before it was served.
pub(crate) fn refuse_connection(reason: &str, peer: Option<std::net::IpAddr>, why: &str) {
    METRICS
        .refused_connections
        .with_label_values(&[reason])
        .inc();
    robotsguard::logs::connection_refused(reason, peer, why);
}

/// The downstream connection cap.
///
/// When every slot is taken, a new connection closes the connection that has waited longest
/// without a request in progress and takes its slot, as nginx reuses idle keep-alive connections
/// when it runs out: holding slots open then buys an attacker nothing, while connections with a
/// request in progress are never touched.
pub struct Slots {
    semaphore: Arc<Semaphore>,
    waiting: Mutex<WaitingForRequests>,
}

/// Connections without a request in progress, oldest first.
#[derive(Default)]
struct WaitingForRequests {
    list: Waits<Waiting>,
    /// The server is shutting down: a kept-alive connection's wait for its next request ends at
    /// once.
    shutting_down: bool,
}

/// One connection's wait for a request.
struct Waiting {
    /// How the connection is told to close.
    close: Closer,
    /// Between two requests of a kept-alive connection (not before its first): such a wait
    /// also ends when the server shuts down.
    kept_alive: bool,
}

/// How a waiting connection is closed for a newer one (or at shutdown).
enum Closer {
    /// A wait that selects on [`Idle::evicted`] (a TLS handshake, a PROXY header, an HTTP/2
    /// connection without a stream).
    Notify(Arc<Notify>),
    /// An HTTP/1 connection reading its next request head ([`HeadWait`]): its socket's reading
    /// side is shut down, which ends the read with end-of-file. Only ever called with the
    /// `waiting` lock held, and a wait leaves the list under that lock before its socket can
    /// close, so the descriptor is the connection's own.
    Socket(std::os::fd::RawFd),
}

impl Closer {
    fn close(&self) {
        match self {
            Closer::Notify(notify) => notify.notify_one(),
            Closer::Socket(fd) => {
                // Fails only for a socket the client already closed, which ends the read too.
                let _ = nix::sys::socket::shutdown(*fd, nix::sys::socket::Shutdown::Read);
            }
        }
    }
}

/// How long a new connection waits for the slot of the connection it closed.
const EVICTION_WAIT: Duration = Duration::from_millis(200);

impl Slots {
    pub fn new(max_connections: usize) -> Arc<Slots> {
        Arc::new(Slots {
            semaphore: Arc::new(Semaphore::new(max_connections)),
            waiting: Mutex::new(WaitingForRequests::default()),
        })
    }

    /// A slot for a new connection: a free one, else the one of the connection that has waited
    /// longest without a request, which is closed. `None` when every slot is busy with a request.
    pub(crate) async fn take(&self) -> Option<OwnedSemaphorePermit> {
        if let Ok(slot) = self.semaphore.clone().try_acquire_owned() {
            return Some(slot);
        }
        {
            let mut waiting = self.waiting.lock().ok()?;
            let Some(oldest) = waiting.list.pop_oldest() else {
                drop(waiting);
                METRICS.connections_refused.inc();
                return None;
            };
            // Under the lock: a socket still listed is still open (see `Closer::Socket`).
            oldest.close.close();
        }
        METRICS.connections_evicted.inc();
        match tokio::time::timeout(EVICTION_WAIT, self.semaphore.clone().acquire_owned()).await {
            Ok(Ok(slot)) => Some(slot),
            _ => {
                METRICS.connections_refused.inc();
                None
            }
        }
    }

    /// Marks the calling connection as having no request in progress until the returned guard
    /// is dropped; [`Idle::evicted`] completes when the connection is to be closed for a newer
    /// one. Each wait has a `Notify` of its own: a notification that arrives as the wait ends
    /// stays with it.
    pub(crate) fn idle(self: &Arc<Self>) -> Idle {
        let close = Arc::new(Notify::new());
        Idle {
            slots: self.clone(),
            ticket: self.list(Closer::Notify(close.clone()), false),
            close,
        }
    }

    /// Lists an HTTP/1 connection about to read its next request head (every request's wait:
    /// nothing is registered beyond this entry, see [`HeadWait`]). A `kept_alive` wait (for a
    /// request after the first) ends at once when the server is shutting down.
    pub(crate) fn wait_for_head<'a>(
        &'a self,
        stream: &'a mut Stream,
        kept_alive: bool,
    ) -> HeadWait<'a> {
        HeadWait {
            slots: self,
            ticket: self.list(Closer::Socket(stream.id()), kept_alive),
            stream,
        }
    }

    /// Adds a wait to the list, with its place; `None` when it is not listed (a kept-alive
    /// wait at shutdown, closed at once instead).
    fn list(&self, close: Closer, kept_alive: bool) -> Option<Ticket> {
        let mut waiting = self.waiting.lock().ok()?;
        if kept_alive && waiting.shutting_down {
            close.close();
            return None;
        }
        Some(waiting.list.push(Waiting { close, kept_alive }))
    }

    /// Takes the wait `ticket` names out of the list, unless an evicting connection already
    /// took it out to close it.
    fn unlist(&self, ticket: Ticket) {
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.list.remove(ticket);
        }
    }

    /// The server is shutting down: every kept-alive connection waiting for its next request
    /// closes now, and any that starts such a wait later closes at once (a connection waiting
    /// for its first request, or with a request in progress, is served).
    pub(crate) fn shut_down(&self) {
        let Ok(mut waiting) = self.waiting.lock() else {
            return;
        };
        waiting.shutting_down = true;
        waiting.list.retain(|wait| {
            if wait.kept_alive {
                wait.close.close();
            }
            !wait.kept_alive
        });
    }
}

/// A connection's place among those without a request in progress; leaves it when dropped.
pub(crate) struct Idle {
    slots: Arc<Slots>,
    /// Its place in the list; `None` when it was not listed.
    ticket: Option<Ticket>,
    close: Arc<Notify>,
}

impl Idle {
    /// Completes when a newer connection needs this one's slot.
    pub(crate) async fn evicted(&self) {
        self.close.notified().await;
    }
}

impl Drop for Idle {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket {
            self.slots.unlist(ticket);
        }
    }
}

/// An HTTP/1 connection's wait for its next request head, listed among the connections without
/// a request in progress until dropped. It holds the stream, so the socket cannot close while
/// listed; read through [`HeadWait::stream`].
pub(crate) struct HeadWait<'a> {
    slots: &'a Slots,
    /// Its place in the list; `None` when it was not listed (closed at once at shutdown).
    ticket: Option<Ticket>,
    stream: &'a mut Stream,
}

impl HeadWait<'_> {
    pub(crate) fn stream(&mut self) -> &mut Stream {
        self.stream
    }
}

impl Drop for HeadWait<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket {
            self.slots.unlist(ticket);
        }
    }
}

/// Peers that carry many clients on one connection, each connection of theirs counted as a
/// client of its own under `limits.max_requests_in_flight_per_client`.
#[derive(Debug, Clone, Copy)]
pub enum Carriers {
    /// The proxy listeners: peers in `trusted_proxies`.
    TrustedProxies,
    /// The decision listeners: peers in `decision.trusted_callers` (the front proxies asking
    /// for their clients' requests).
    TrustedCallers,
}

/// What an [`EdgeApp`] serves: an HTTP application pingora can hand sessions to.
pub trait Served: HttpServerApp + Send + Sync + 'static {}
impl<A: HttpServerApp + Send + Sync + 'static> Served for A {}

impl<A: Served> EdgeApp<A> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        http: A,
        carriers: Carriers,
        guard: Guard,
        slots: Arc<Slots>,
        in_flight: Arc<InFlight>,
        proxy_protocol: ListenerAddresses,
        h2c: ListenerAddresses,
        tls: Vec<(std::net::SocketAddr, Arc<Acceptor>)>,
    ) -> EdgeApp<A> {
        EdgeApp {
            http: Arc::new(http),
            carriers,
            guard,
            slots,
            in_flight,
            proxy_protocol,
            h2c,
            tls,
        }
    }

    /// The client a connection's requests are counted against: the address the connection layer
    /// knows (the peer, or the client a trusted peer's PROXY header named). A peer in
    /// `trusted_proxies` that named no client carries many clients on one connection (a load
    /// balancer passing X-Forwarded-For): that connection is a client of its own, rather than
    /// every client behind it sharing one share. So does a trusted caller of the decision
    /// listener (a front proxy asking for all of its clients).
    pub(crate) fn client(&self, stream: &Stream) -> Client {
        let address = peer_address(stream);
        let carrier = |ip| match self.carriers {
            Carriers::TrustedProxies => self.guard.is_trusted_proxy(ip),
            Carriers::TrustedCallers => robotsguard::decision::is_trusted_caller(&self.guard, ip),
        };
        let holder = match address {
            Some(ip) if !carrier(ip) => Holder::client(ip),
            _ => Holder::connection(),
        };
        Client { holder, address }
    }
}

/// Runs `f` when dropped.
pub(crate) fn scopeguard(f: impl FnOnce()) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}
