//! Counts the HTTP/2 streams a connection refuses. The `h2` library refuses a stream past the
//! connection's `SETTINGS_MAX_CONCURRENT_STREAMS` itself (`RST_STREAM` with `REFUSED_STREAM`) and
//! says nothing to its user, so [`RefusalWatch`] sits between it and the socket and reads the
//! frame headers it writes: a few bytes of bookkeeping per write, no copy.

use std::io::IoSlice;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use pingora::protocols::raw_connect::ProxyDigest;
use pingora::protocols::tls::{SslDigest, TlsRef};
use pingora::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest, Ssl, Stream,
    TimingDigest, UniqueID, UniqueIDType, ALPN,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use robotsguard::metrics::METRICS;

/// An HTTP/2 frame header: length (3), type, flags, stream (4).
const FRAME_HEADER: usize = 9;
/// `RST_STREAM`'s frame type, and the `REFUSED_STREAM` error code.
const RST_STREAM: u8 = 0x3;
const REFUSED_STREAM: u32 = 0x7;

/// Follows the frames written on one HTTP/2 connection (the server side writes nothing but
/// frames: its preface is a SETTINGS frame).
#[derive(Debug, Default)]
struct FrameReader {
    header: [u8; FRAME_HEADER],
    header_len: usize,
    /// Payload bytes of the current frame still to come.
    payload_left: usize,
    /// The current frame is a `RST_STREAM`: its error code is being read.
    reset: Option<([u8; 4], usize)>,
}

impl FrameReader {
    /// Reads `bytes` (the next written bytes); returns how many `REFUSED_STREAM` resets ended
    /// in them.
    fn read(&mut self, mut bytes: &[u8]) -> usize {
        let mut refused = 0;
        while !bytes.is_empty() {
            if self.header_len < FRAME_HEADER {
                let take = (FRAME_HEADER - self.header_len).min(bytes.len());
                self.header[self.header_len..self.header_len + take]
                    .copy_from_slice(&bytes[..take]);
                self.header_len += take;
                bytes = &bytes[take..];
                if self.header_len == FRAME_HEADER {
                    let length = usize::from(self.header[0]) << 16
                        | usize::from(self.header[1]) << 8
                        | usize::from(self.header[2]);
                    self.payload_left = length;
                    self.reset =
                        (self.header[3] == RST_STREAM && length == 4).then_some(([0; 4], 0));
                    if length == 0 {
                        self.header_len = 0;
                    }
                }
                continue;
            }
            let take = self.payload_left.min(bytes.len());
            if let Some((code, have)) = self.reset.as_mut() {
                let copy = take.min(4 - *have);
                code[*have..*have + copy].copy_from_slice(&bytes[..copy]);
                *have += copy;
                if *have == 4 && u32::from_be_bytes(*code) == REFUSED_STREAM {
                    refused += 1;
                }
            }
            self.payload_left -= take;
            bytes = &bytes[take..];
            if self.payload_left == 0 {
                self.header_len = 0;
                self.reset = None;
            }
        }
        refused
    }
}

/// An HTTP/2 connection's stream, counting the streams refused on it into
/// `robotsguard_requests_refused_total`: those robotsguard refuses itself (`ours`, raised before
/// each such reset and counted by the caller) are left out, the rest are the connection's
/// stream limit's.
#[derive(Debug)]
pub struct RefusalWatch {
    inner: Stream,
    frames: FrameReader,
    ours: Arc<AtomicUsize>,
}

impl RefusalWatch {
    pub fn new(inner: Stream, ours: Arc<AtomicUsize>) -> RefusalWatch {
        RefusalWatch {
            inner,
            frames: FrameReader::default(),
            ours,
        }
    }

    fn written(&mut self, bytes: &[u8]) {
        for _ in 0..self.frames.read(bytes) {
            let ours = self
                .ours
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                .is_ok();
            if !ours {
                METRICS
                    .refused_requests
                    .with_label_values(&["max_streams_per_connection"])
                    .inc();
            }
        }
    }
}

impl AsyncRead for RefusalWatch {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for RefusalWatch {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = result {
            this.written(&buf[..n.min(buf.len())]);
        }
        result
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = result {
            let mut left = n;
            for buf in bufs {
                if left == 0 {
                    break;
                }
                let take = left.min(buf.len());
                this.written(&buf[..take]);
                left -= take;
            }
        }
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[async_trait]
impl Shutdown for RefusalWatch {
    async fn shutdown(&mut self) {
        Shutdown::shutdown(&mut *self.inner).await;
    }
}

impl UniqueID for RefusalWatch {
    fn id(&self) -> UniqueIDType {
        self.inner.id()
    }
}

impl Ssl for RefusalWatch {
    fn get_ssl(&self) -> Option<&TlsRef> {
        self.inner.get_ssl()
    }

    fn get_ssl_digest(&self) -> Option<Arc<SslDigest>> {
        self.inner.get_ssl_digest()
    }

    fn selected_alpn_proto(&self) -> Option<ALPN> {
        self.inner.selected_alpn_proto()
    }
}

impl GetTimingDigest for RefusalWatch {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        self.inner.get_timing_digest()
    }

    fn get_read_pending_time(&self) -> Duration {
        self.inner.get_read_pending_time()
    }

    fn get_write_pending_time(&self) -> Duration {
        self.inner.get_write_pending_time()
    }
}

impl GetProxyDigest for RefusalWatch {
    fn get_proxy_digest(&self) -> Option<Arc<ProxyDigest>> {
        self.inner.get_proxy_digest()
    }

    fn set_proxy_digest(&mut self, digest: ProxyDigest) {
        self.inner.set_proxy_digest(digest);
    }
}

impl GetSocketDigest for RefusalWatch {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        self.inner.get_socket_digest()
    }

    fn set_socket_digest(&mut self, digest: SocketDigest) {
        self.inner.set_socket_digest(digest);
    }
}

#[async_trait]
impl Peek for RefusalWatch {
    async fn try_peek(&mut self, buf: &mut [u8]) -> std::io::Result<bool> {
        self.inner.try_peek(buf).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let length = u32::try_from(payload.len()).unwrap_or(0).to_be_bytes();
        let mut out = vec![length[1], length[2], length[3], kind, 0];
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn refused_stream_resets_are_counted_however_the_writes_split_them() {
        let mut written = frame(0x4, 0, &[0, 3, 0, 0, 0, 100]); // SETTINGS
        written.extend(frame(0x1, 1, &[0x88])); // HEADERS
        written.extend(frame(RST_STREAM, 3, &REFUSED_STREAM.to_be_bytes()));
        written.extend(frame(0x0, 1, &[b'x'; 300])); // DATA
        written.extend(frame(RST_STREAM, 5, &0x8u32.to_be_bytes())); // CANCEL
        written.extend(frame(0x6, 0, &[0; 8])); // PING
        written.extend(frame(RST_STREAM, 7, &REFUSED_STREAM.to_be_bytes()));
        // A DATA frame whose payload happens to hold a reset's bytes is not a reset.
        written.extend(frame(
            0x0,
            1,
            &frame(RST_STREAM, 9, &REFUSED_STREAM.to_be_bytes()),
        ));
        for split in [1, 2, 3, 7, 9, 13, 64, written.len()] {
            let mut reader = FrameReader::default();
            let refused: usize = written.chunks(split).map(|chunk| reader.read(chunk)).sum();
            assert_eq!(refused, 2, "split {split}");
        }
    }
}
