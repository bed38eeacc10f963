//! The connection layer in front of pingora's HTTP handling: which connections are served at all,
//! how long a connection may take to become useful, and how many connections and requests there
//! are at once.
//!
//! pingora's listeners only accept TCP here; everything until the first request is robotsguard's:
//!
//! - **The connection cap** ([`Slots`], `limits.max_connections`): a new connection at the cap
//!   closes the one that has waited longest without a request in progress (an idle keep-alive, a
//!   silent or trickling client, a TLS handshake, an HTTP/2 connection with no open stream) and
//!   takes its place, whatever its protocol; only when every connection has a request in
//!   progress is the new one closed.
//! - **PROXY protocol** (`listen[].proxy_protocol`): the header is read only from a peer in
//!   `trusted_proxies`; from any other peer the connection is closed, so a client cannot name
//!   an address of its choosing (to be banned in another's place, or to pass as a verified
//!   crawler from its published range).
//! - **TLS** is accepted here rather than by pingora's listener, within
//!   `limits.handshake_timeout` of the connection's start (pingora allows a minute).
//! - **HTTP/1** ([`crate::http1`]) and **HTTP/2** ([`crate::http2`], by ALPN or h2c prior
//!   knowledge) each have a deadline until the first request head and an idle timeout after.
//! - **Requests in flight** ([`robotsguard::load::InFlight`], `limits.max_requests_in_flight`):
//!   every request holds a permit while it is served, counted against its client ([`crate::connections::Client`],
//!   `limits.max_requests_in_flight_per_client`); past the cap or its client's share it is
//!   refused.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::BytesMut;
use pingora::apps::ServerApp;
use pingora::protocols::l4::stream::Stream as L4Stream;
use pingora::protocols::{GetSocketDigest, Stream, ALPN};
use pingora::server::ShutdownWatch;
use tokio::time::Instant;

use robotsguard::metrics::METRICS;

use crate::connections::{
    listener_matches, local_address, peer_address, refuse_connection, scopeguard, set_peer_address,
};
pub use crate::connections::{Carriers, EdgeApp, ListenerAddresses, Served, Slots};

/// What became of a connection's start (PROXY header, TLS handshake).
enum Start {
    /// Ready to speak HTTP: the stream, and bytes already read past a PROXY header.
    Ready(Stream, BytesMut),
    /// Closed (refused, timed out, evicted, or the client left).
    Closed,
}

impl<A: Served> EdgeApp<A> {
    /// The PROXY header (from trusted peers only) and the TLS handshake, within their deadlines
    /// and while a newer connection may evict this one.
    async fn start(&self, mut stream: Stream, started: Instant) -> Start {
        let limits = self.guard.limits();
        let local = local_address(&stream);
        let mut rest = BytesMut::new();
        let idle = self.slots.idle();
        if self.proxy_protocol.contains(local) {
            let peer = peer_address(&stream);
            if !peer.is_some_and(|ip| self.guard.is_trusted_proxy(ip)) {
                refuse_connection(
                    "proxy_untrusted",
                    peer,
                    "a PROXY protocol listener's peer is not in trusted_proxies",
                );
                return Start::Closed;
            }
            let deadline = started + limits.header_timeout;
            let read = tokio::select! {
                read = crate::proxy_protocol::read(&mut stream, deadline) => read,
                () = idle.evicted() => return Start::Closed,
            };
            match read {
                crate::proxy_protocol::Read::Header {
                    source,
                    rest: after,
                } => {
                    if let Some(source) = source {
                        set_peer_address(&mut *stream, source);
                    }
                    rest = after;
                }
                crate::proxy_protocol::Read::Failed(why) => {
                    // Without it, the client is unknown: nothing on this connection is served.
                    METRICS.proxy_protocol_refused.inc();
                    refuse_connection("proxy_header", peer, &why);
                    return Start::Closed;
                }
            }
        }
        let Some(acceptor) = self
            .tls
            .iter()
            .find(|(listen, _)| listener_matches(*listen, local))
            .map(|(_, acceptor)| acceptor.clone())
        else {
            return Start::Ready(stream, rest);
        };
        let Ok(mut plain) = stream.into_any().downcast::<L4Stream>() else {
            tracing::debug!("a TLS listener's connection is not a TCP stream");
            return Start::Closed;
        };
        plain.rewind(&rest);
        let peer = plain
            .get_socket_digest()
            .and_then(|digest| digest.peer_addr().and_then(|a| a.as_inet().map(|a| a.ip())));
        let deadline = started + limits.handshake_timeout;
        let handshake = tokio::select! {
            done = tokio::time::timeout_at(deadline, acceptor.tls_handshake(*plain)) => done,
            () = idle.evicted() => return Start::Closed,
        };
        match handshake {
            Ok(Ok(tls)) => Start::Ready(Box::new(tls), BytesMut::new()),
            Ok(Err(e)) => {
                tracing::debug!("TLS handshake failed: {e}");
                Start::Closed
            }
            Err(_) => {
                refuse_connection(
                    "handshake_timeout",
                    peer,
                    "the TLS handshake did not finish within limits.handshake_timeout",
                );
                Start::Closed
            }
        }
    }
}

#[async_trait]
impl<A: Served> ServerApp for EdgeApp<A> {
    async fn process_new(
        self: &Arc<Self>,
        stream: Stream,
        shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        let started = Instant::now();
        let Some(_slot) = self.slots.take().await else {
            // Closing at once keeps the process and the connections it already serves alive; a
            // client retries.
            refuse_connection(
                "max_connections",
                peer_address(&stream),
                "limits.max_connections are open, each with a request in progress",
            );
            return None;
        };
        METRICS.open_connections.inc();
        let _open = scopeguard(|| METRICS.open_connections.dec());
        let Start::Ready(stream, rest) = self.start(stream, started).await else {
            return None;
        };
        if matches!(stream.selected_alpn_proto(), Some(ALPN::H2)) {
            crate::http2::serve(self, stream, started, shutdown).await;
            return None;
        }
        let h2c = stream.get_ssl_digest().is_none() && self.h2c.contains(local_address(&stream));
        if let crate::http1::End::Http2(stream) =
            crate::http1::serve(self, stream, rest, h2c, shutdown).await
        {
            crate::http2::serve(self, stream, started, shutdown).await;
        }
        None
    }

    async fn cleanup(&self) {
        // Called once the listeners stop accepting, as shutdown begins.
        self.slots.shut_down();
        pingora::apps::HttpServerApp::http_cleanup(&*self.http).await;
    }
}
