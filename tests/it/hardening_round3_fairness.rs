//! Fair shares of requests in flight (issue 51, item 1), each at small scale: real h2c clients
//! (the `h2` crate) from several loopback addresses (127.0.0.x binds) standing for several hosts,
//! the real proxy binary, and a real origin (nginx serving a 1 MiB file, or the harness's origin
//! answering late). Each test asserts the safe behaviour, so it fails if the weakness comes back.
//!
//! **Finding:** 11 h2c connections from one host, each with 100 zero-window GETs of a ~1 MB
//! static file, filled `limits.max_requests_in_flight`; every other client got 503 /
//! `REFUSED_STREAM` for as long as they were held (until the write timeout, 60 s), and slow
//! upstreams and 29 KB header blocks (a large head takes several places) did the same.
//!
//! - one client: `one_client_flooding_zero_window_streams_does_not_lock_out_others`,
//!   `a_flood_of_large_header_blocks_does_not_lock_out_others`,
//!   `a_slow_upstream_flood_over_http2_and_http1_does_not_lock_out_others`;
//! - ten clients: `ten_clients_flooding_zero_window_streams_do_not_lock_out_a_fresh_one`;
//! - who a client is: `a_proxy_header_names_the_client_and_an_ipv6_client_is_its_64`,
//!   `a_trusted_proxy_without_proxy_headers_is_capped_per_connection`;
//! - the write timeout: `a_stream_whose_window_stays_shut_is_reset_at_the_write_timeout`,
//!   `an_http1_client_that_stops_reading_is_closed_at_the_write_timeout`, and a stalled body,
//!   which is the client's timeout too: `a_client_s_stalled_body_is_not_the_upstream_s_timeout`;
//! - handshakes: `a_tls_handshake_stalled_anywhere_is_closed_at_the_handshake_timeout`.
//!
//! Every loop is bounded in iterations and time. Needs `nginx` and `openssl` (both used by other
//! suites too).

use crate::support;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::{ResponseFuture, SendRequest};
use h2::{RecvStream, SendStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::runtime::Runtime;

use support::nginx::Nginx;
use support::{inline_robots, metric, site, Origin, Proxy, BROWSER};

const HOST: &str = "shop.example";

/// The large static file the floods ask for, and a small page fresh clients ask for.
const BIG: &str = "/big.bin";
const PAGE: &str = "/page.html";

/// Polls `check` every 50 ms until it holds or `seconds` pass.
fn wait_until(seconds: u64, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    for _ in 0..(seconds * 20 + 1) {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            break;
        }
        thread::sleep(Duration::from_millis(50));
    }
    check()
}

/// 127.0.0.`last`: one simulated host.
fn host(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, last)
}

/// A runtime for the clients: their connections are driven by its workers while the test's own
/// thread checks metrics and opens fresh clients.
fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// nginx serving a 1 MiB file and a small page.
fn static_origin() -> Nginx {
    let big = vec![b'x'; 1 << 20];
    Nginx::start(&[("big.bin", &big), ("page.html", b"a small page\n")])
}

/// A proxy (h2c on its listener) in front of `upstream`, with `limits` (YAML flow-map keys) and
/// `extra` top-level config.
fn proxy_before(upstream: SocketAddr, limits: &str, extra: &str) -> Proxy {
    Proxy::builder(&format!(
        "limits: {{{limits}}}\n{extra}origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: \"{upstream}\"\n{}",
        inline_robots("")
    ))
    .listener("http2: true")
    .start()
}

/// A TCP connection to `server` from `local`.
async fn tcp_from(local: Ipv4Addr, server: SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket
        .bind(SocketAddr::from((local, 0)))
        .unwrap_or_else(|e| panic!("cannot bind {local}: {e}"));
    tokio::time::timeout(Duration::from_secs(5), socket.connect(server))
        .await
        .expect("connects in time")
        .expect("connects")
}

/// An h2c connection (prior knowledge) from `local`, advertising a receive window of `window`
/// bytes per stream: 0 holds every response after its head.
async fn h2_from(local: Ipv4Addr, server: SocketAddr, window: u32) -> SendRequest<Bytes> {
    let tcp = tcp_from(local, server).await;
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(window)
        .initial_max_send_streams(256)
        .handshake::<_, Bytes>(tcp)
        .await
        .expect("an HTTP/2 handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    send
}

/// A GET of `path` from a browser, with `padding` bytes of one more header.
fn request(path: &str, padding: usize) -> http::Request<()> {
    let mut builder =
        http::Request::get(format!("http://{HOST}{path}")).header("user-agent", BROWSER);
    if padding > 0 {
        builder = builder.header("x-padding", "p".repeat(padding));
    }
    builder.body(()).expect("a request")
}

/// What became of the streams one connection opened. The streams still open are kept here, so
/// they go on holding their places until this is dropped.
#[derive(Default)]
struct Flood {
    /// Answered (head received), body never read.
    answered: Vec<http::Response<RecvStream>>,
    /// No answer yet (a slow upstream).
    waiting: Vec<ResponseFuture>,
    /// The request bodies of streams opened without their end.
    bodies: Vec<SendStream<Bytes>>,
    refused: usize,
    failed: usize,
}

impl Flood {
    fn merge(&mut self, other: Flood) {
        self.answered.extend(other.answered);
        self.waiting.extend(other.waiting);
        self.bodies.extend(other.bodies);
        self.refused += other.refused;
        self.failed += other.failed;
    }
}

/// What each flooding connection does.
#[derive(Debug, Clone, Copy)]
struct Attack {
    /// Each stream's receive window: 0 holds every response after its head.
    window: u32,
    /// Streams opened on the connection.
    streams: usize,
    /// What each stream GETs.
    path: &'static str,
    /// Bytes of one more header on each stream.
    padding: usize,
    /// Whether a request ends with its head; else its body never comes.
    end: bool,
}

/// Opens `attack.streams` streams on `send`, then gives each stream until `wait` has passed to
/// be answered or refused.
async fn flood(mut send: SendRequest<Bytes>, attack: Attack, wait: Duration) -> Flood {
    let mut out = Flood::default();
    let mut pending = Vec::new();
    for _ in 0..attack.streams {
        let Ok(Ok(ready)) = tokio::time::timeout(Duration::from_secs(5), send.ready()).await else {
            out.failed += 1;
            break;
        };
        send = ready;
        match send.send_request(request(attack.path, attack.padding), attack.end) {
            Ok((response, body)) => {
                pending.push(response);
                if !attack.end {
                    out.bodies.push(body);
                }
            }
            Err(_) => out.failed += 1,
        }
    }
    let deadline = tokio::time::Instant::now() + wait;
    for mut response in pending {
        match tokio::time::timeout_at(deadline, &mut response).await {
            Ok(Ok(answer)) => out.answered.push(answer),
            Ok(Err(e)) if e.reason() == Some(h2::Reason::REFUSED_STREAM) => out.refused += 1,
            Ok(Err(_)) => out.failed += 1,
            Err(_) => out.waiting.push(response),
        }
    }
    out
}

/// From each of `clients`, `connections` h2c connections, each flooding as `attack` says; what
/// became of each client's streams.
async fn flood_from(
    proxy: SocketAddr,
    clients: &[Ipv4Addr],
    connections: usize,
    attack: Attack,
) -> Vec<Flood> {
    let mut tasks = Vec::new();
    for &client in clients {
        for _ in 0..connections {
            tasks.push(tokio::spawn(async move {
                let send = h2_from(client, proxy, attack.window).await;
                flood(send, attack, Duration::from_secs(4)).await
            }));
        }
    }
    let mut per_client: Vec<Flood> = clients.iter().map(|_| Flood::default()).collect();
    for (index, task) in tasks.into_iter().enumerate() {
        let done = task.await.expect("a flooding connection's task");
        per_client[index / connections].merge(done);
    }
    per_client
}

/// A fresh client at `local` GETs `path` over HTTP/2 (its window open) and reads the whole
/// answer: the status, or an error.
async fn h2_get(local: Ipv4Addr, proxy: SocketAddr, path: &str) -> Result<u16, String> {
    let attempt = async {
        let send = h2_from(local, proxy, 65_535).await;
        let mut send = send.ready().await.map_err(|e| e.to_string())?;
        let (response, _) = send
            .send_request(request(path, 0), true)
            .map_err(|e| e.to_string())?;
        let response = response.await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let mut body = response.into_body();
        for _ in 0..10_000 {
            let Some(chunk) = body.data().await else {
                break;
            };
            let chunk = chunk.map_err(|e| e.to_string())?;
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        Ok(status)
    };
    tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .unwrap_or_else(|_| Err("no answer within 5 s".to_string()))
}

/// A fresh client at `local` GETs `path` over HTTP/1.1 on a new connection: the status and the
/// `Retry-After` header, or an error.
async fn http1_get(
    local: Ipv4Addr,
    proxy: SocketAddr,
    path: &str,
) -> Result<(u16, Option<String>), String> {
    let attempt = async {
        let mut tcp = tcp_from(local, proxy).await;
        let head = format!(
            "GET {path} HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: {BROWSER}\r\nConnection: close\r\n\r\n"
        );
        tcp.write_all(head.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut got = Vec::new();
        tcp.read_to_end(&mut got).await.map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&got);
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                format!(
                    "no status in {:?}",
                    text.chars().take(200).collect::<String>()
                )
            })?;
        let retry_after = text
            .lines()
            .take_while(|line| !line.is_empty())
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("retry-after")
                    .then(|| value.trim().to_string())
            });
        Ok((status, retry_after))
    };
    tokio::time::timeout(Duration::from_secs(15), attempt)
        .await
        .unwrap_or_else(|_| Err("no answer within 15 s".to_string()))
}

/// Asserts that a fresh client at `local` is served over HTTP/2 and HTTP/1.
fn assert_fresh_client_served(rt: &Runtime, proxy: &Proxy, local: Ipv4Addr, beside: &str) {
    let h2 = rt.block_on(h2_get(local, proxy.addr, PAGE));
    assert_eq!(
        h2,
        Ok(200),
        "a fresh HTTP/2 client was not served beside {beside}\n{}",
        proxy.metrics()
    );
    let h1 = rt.block_on(http1_get(local, proxy.addr, PAGE));
    assert_eq!(
        h1.map(|(status, _)| status),
        Ok(200),
        "a fresh HTTP/1 client was not served beside {beside}"
    );
}

fn in_flight(proxy: &Proxy) -> f64 {
    metric(&proxy.metrics(), "robotsguard_requests_in_flight", &[])
}

fn refused(proxy: &Proxy, reason: &str) -> f64 {
    metric(
        &proxy.metrics(),
        "robotsguard_requests_refused_total",
        &[("reason", reason)],
    )
}

/// Waits until the proxy has decided on at least `streams` streams (each refused, whatever the
/// reason, or in flight): a client's view of a stream it has no answer for yet cannot tell a
/// stream being served from one not yet read. Returns the requests in flight then.
fn settled(proxy: &Proxy, streams: usize) -> f64 {
    let decided = |text: &str| {
        robotsguard::metrics::REQUEST_REFUSALS
            .iter()
            .map(|reason| {
                metric(
                    text,
                    "robotsguard_requests_refused_total",
                    &[("reason", reason)],
                )
            })
            .sum::<f64>()
            + metric(text, "robotsguard_requests_in_flight", &[])
    };
    let mut in_flight = 0.0;
    let done = wait_until(20, || {
        let text = proxy.metrics();
        in_flight = metric(&text, "robotsguard_requests_in_flight", &[]);
        decided(&text) >= streams as f64
    });
    assert!(
        done,
        "the proxy did not decide on {streams} streams within 20 s\n{}",
        proxy.metrics()
    );
    in_flight
}

// ------------------------------------------------------------------------------------------------
// One client flooding.

/// **Finding:** one host's zero-window streams of a large file took every place under
/// `max_requests_in_flight` (here 128, of which a client may hold the default eighth, 16).
#[test]
fn one_client_flooding_zero_window_streams_does_not_lock_out_others() {
    let nginx = static_origin();
    let proxy = proxy_before(
        nginx.addr(),
        "max_requests_in_flight: 128, max_streams_per_connection: 128",
        "",
    );
    let rt = runtime();
    let floods = rt.block_on(flood_from(
        proxy.addr,
        &[host(2)],
        2,
        Attack {
            window: 0,
            streams: 64,
            path: BIG,
            padding: 0,
            end: true,
        },
    ));
    let held = settled(&proxy, 128);
    assert_fresh_client_served(&rt, &proxy, host(3), "one client's zero-window flood");
    assert!(
        (8.0..=16.0).contains(&held),
        "one client kept {held} of its 128 streams"
    );
    let hostile = &floods[0];
    assert!(
        hostile.answered.len() <= 16 && hostile.refused >= 100,
        "one client's streams: {} answered, {} refused",
        hostile.answered.len(),
        hostile.refused
    );
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_requests_in_flight_per_client_max",
            &[]
        ),
        16.0,
        "the default share: an eighth of the cap"
    );
    assert!(refused(&proxy, "max_requests_in_flight_per_client") >= 112.0);
    assert_eq!(refused(&proxy, "max_requests_in_flight"), 0.0);
    assert!(
        proxy.stderr().contains(
            "request refused: the client holds limits.max_requests_in_flight_per_client places"
        ),
        "the refusal is logged"
    );
    drop(floods);
}

/// **Finding:** 29 KB header blocks (4 places each) with a body never sent filled the cap with a
/// quarter as many streams.
#[test]
fn a_flood_of_large_header_blocks_does_not_lock_out_others() {
    let nginx = static_origin();
    let proxy = proxy_before(
        nginx.addr(),
        "max_requests_in_flight: 128, max_streams_per_connection: 128",
        "",
    );
    let rt = runtime();
    let floods = rt.block_on(flood_from(
        proxy.addr,
        &[host(4)],
        2,
        Attack {
            window: 65_535,
            streams: 64,
            path: BIG,
            padding: 29 * 1024,
            end: false,
        },
    ));
    let held = settled(&proxy, 128);
    assert_fresh_client_served(&rt, &proxy, host(5), "one client's 29 KB heads");
    // 16 places: four streams of four places each.
    assert!(
        (1.0..=4.0).contains(&held),
        "29 KB heads: one client kept {held} of its 128 streams"
    );
    assert!(refused(&proxy, "max_requests_in_flight_per_client") >= 124.0);
    drop(floods);
}

/// **Finding:** streams waiting on a slow upstream held their places as zero-window ones did,
/// over HTTP/2 and HTTP/1 alike; HTTP/1 requests past a client's share get `503` with
/// `Retry-After`.
#[test]
fn a_slow_upstream_flood_over_http2_and_http1_does_not_lock_out_others() {
    let origin = Origin::start();
    origin.route_delayed("/slow", 200, "slow", Duration::from_secs(15));
    origin.route(PAGE, 200, "a small page");
    let proxy = Proxy::builder(&format!(
        "limits: {{max_requests_in_flight: 64, max_streams_per_connection: 128}}\n{}",
        site(&origin, HOST, "")
    ))
    .listener("http2: true")
    .start();
    let rt = runtime();
    let floods = rt.block_on(flood_from(
        proxy.addr,
        &[host(6)],
        2,
        Attack {
            window: 65_535,
            streams: 64,
            path: "/slow",
            padding: 0,
            end: true,
        },
    ));
    let held = settled(&proxy, 128);
    assert_fresh_client_served(&rt, &proxy, host(7), "one client's slow-upstream flood");
    // The default share of 64 places is 8.
    assert!(
        (1.0..=8.0).contains(&held),
        "slow upstream: one client kept {held} of its 128 streams"
    );
    // The same client over HTTP/1, at its share: 503 with Retry-After.
    let http1 = rt.block_on(http1_get(host(6), proxy.addr, "/slow"));
    let (status, retry_after) = http1.expect("an HTTP/1 answer");
    assert_eq!(status, 503);
    assert_eq!(retry_after.as_deref(), Some("1"));
    drop(floods);
}

// ------------------------------------------------------------------------------------------------
// Ten clients flooding.

/// **Finding (at scale in the adversarial run: 20 connections × 128):** ten clients, each with
/// two connections of 128 zero-window streams, held every place; a fresh client got 503. Ten
/// shares of 16 are more than the cap of 128: a client with places stops where it would leave
/// less than four times its holding free, so places stay free for the newcomer.
#[test]
fn ten_clients_flooding_zero_window_streams_do_not_lock_out_a_fresh_one() {
    let nginx = static_origin();
    let proxy = proxy_before(
        nginx.addr(),
        "max_requests_in_flight: 128, max_streams_per_connection: 128",
        "",
    );
    let rt = runtime();
    let clients: Vec<Ipv4Addr> = (20..30).map(host).collect();
    let floods = rt.block_on(flood_from(
        proxy.addr,
        &clients,
        2,
        Attack {
            window: 0,
            streams: 128,
            path: BIG,
            padding: 0,
            end: true,
        },
    ));
    let held = settled(&proxy, 2560);
    assert_fresh_client_served(&rt, &proxy, host(31), "ten clients' zero-window floods");
    let admitted: Vec<usize> = floods.iter().map(|flood| flood.answered.len()).collect();
    let total = held as usize;
    assert!(
        admitted.iter().all(|&n| n <= 16),
        "a client kept more than its share: {admitted:?}"
    );
    // One client after another, the first two hold whole shares and each later one a fifth of
    // what it leaves: 19 stay free; at once, about 38.
    assert!(
        128 - total >= 12,
        "ten clients left {} places free: {admitted:?}",
        128 - total
    );
    assert!(
        refused(&proxy, "fair_share") >= 1.0,
        "the fair share refused nothing: {admitted:?}"
    );
    // A second newcomer too.
    assert_eq!(rt.block_on(h2_get(host(32), proxy.addr, PAGE)), Ok(200));
    drop(floods);
}

// ------------------------------------------------------------------------------------------------
// Who a client is.

/// A PROXY protocol v1 header for a TCP connection from `source`.
fn proxy_v1(source: &str) -> String {
    if source.contains(':') {
        format!("PROXY TCP6 {source} ::1 40000 80\r\n")
    } else {
        format!("PROXY TCP4 {source} 127.0.0.1 40000 80\r\n")
    }
}

/// Starts a GET of `/slow` from `source` (named in a PROXY header) on a new connection; the
/// thread returns its status (0 for none).
fn slow_get_as(proxy: SocketAddr, source: &str) -> thread::JoinHandle<u16> {
    let head = format!(
        "{}GET /slow HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: {BROWSER}\r\nConnection: close\r\n\r\n",
        proxy_v1(source)
    );
    thread::spawn(move || {
        let Ok(mut stream) = TcpStream::connect(proxy) else {
            return 0;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(15)));
        if stream.write_all(head.as_bytes()).is_err() {
            return 0;
        }
        let mut got = Vec::new();
        let _ = stream.read_to_end(&mut got);
        String::from_utf8_lossy(&got)
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    })
}

/// Behind a load balancer sending PROXY headers, the client is the address the header names,
/// not the load balancer; an IPv6 client is its /64.
#[test]
fn a_proxy_header_names_the_client_and_an_ipv6_client_is_its_64() {
    let origin = Origin::start();
    origin.route_delayed("/slow", 200, "slow", Duration::from_secs(4));
    let proxy = Proxy::builder(&format!(
        "limits: {{max_requests_in_flight: 64}}\ntrusted_proxies: [\"127.0.0.1/32\"]\n{}",
        site(&origin, HOST, "")
    ))
    .listener("proxy_protocol: true")
    .start();
    // Four requests from each of two addresses in one /64: the /64's share of 8.
    let mut held: Vec<thread::JoinHandle<u16>> = (0..4)
        .map(|_| slow_get_as(proxy.addr, "2001:db8::1"))
        .chain((0..4).map(|_| slow_get_as(proxy.addr, "2001:db8::2")))
        .collect();
    assert!(
        wait_until(5, || in_flight(&proxy) >= 8.0),
        "eight requests in flight"
    );
    let third = slow_get_as(proxy.addr, "2001:db8::3").join().ok();
    assert_eq!(third, Some(503), "a third address of the same /64");
    assert!(refused(&proxy, "max_requests_in_flight_per_client") >= 1.0);
    // Another /64, and an IPv4 client, are other clients: served beside it.
    held.push(slow_get_as(proxy.addr, "2001:db8:0:1::1"));
    held.push(slow_get_as(proxy.addr, "203.0.113.7"));
    let statuses: Vec<u16> = held.into_iter().filter_map(|h| h.join().ok()).collect();
    assert_eq!(
        statuses, [200; 10],
        "the held requests and the other clients"
    );
}

/// A trusted proxy that sends no PROXY header carries many clients on its connections: each
/// connection is capped like a client, so its clients are not all refused as one, and one of its
/// connections still cannot take every place.
#[test]
fn a_trusted_proxy_without_proxy_headers_is_capped_per_connection() {
    let origin = Origin::start();
    origin.route_delayed("/slow", 200, "slow", Duration::from_secs(15));
    origin.route(PAGE, 200, "a small page");
    let proxy = Proxy::builder(&format!(
        "limits: {{max_requests_in_flight: 64, max_streams_per_connection: 64}}\ntrusted_proxies: [\"127.0.0.8/32\"]\n{}",
        site(&origin, HOST, "")
    ))
    .listener("http2: true")
    .start();
    let rt = runtime();
    let trusted = rt.block_on(flood_from(
        proxy.addr,
        &[host(8)],
        3,
        Attack {
            window: 65_535,
            streams: 12,
            path: "/slow",
            padding: 0,
            end: true,
        },
    ));
    // Three connections, each a holder of its own with a share of 8.
    assert_eq!(
        settled(&proxy, 36),
        24.0,
        "the trusted proxy's streams kept"
    );
    assert_eq!(refused(&proxy, "max_requests_in_flight_per_client"), 12.0);
    let untrusted = rt.block_on(flood_from(
        proxy.addr,
        &[host(9)],
        3,
        Attack {
            window: 65_535,
            streams: 12,
            path: "/slow",
            padding: 0,
            end: true,
        },
    ));
    // The same from an ordinary client: one share for all three connections.
    assert_eq!(
        settled(&proxy, 72),
        24.0 + 8.0,
        "an ordinary client's streams kept beside the trusted proxy's"
    );
    assert_eq!(
        refused(&proxy, "max_requests_in_flight_per_client"),
        12.0 + 28.0
    );
    assert_fresh_client_served(&rt, &proxy, host(10), "a trusted proxy's load");
    drop((trusted, untrusted));
}

// ------------------------------------------------------------------------------------------------
// The write timeout.

/// **Finding:** a zero-window stream held its place (and its upstream exchange) until
/// `idle_timeout`, 60 s; each one that timed out also counted as an upstream timeout, so three
/// of them took a healthy upstream out of service for its cool-off. Now `limits.write_timeout`
/// resets the stream, counts it as the client's, and frees its place.
#[test]
fn a_stream_whose_window_stays_shut_is_reset_at_the_write_timeout() {
    let nginx = static_origin();
    let proxy = proxy_before(nginx.addr(), "write_timeout: 1s, idle_timeout: 60s", "");
    let rt = runtime();
    let started = Instant::now();
    let mut floods = rt.block_on(flood_from(
        proxy.addr,
        &[host(11)],
        1,
        Attack {
            window: 0,
            streams: 4,
            path: BIG,
            padding: 0,
            end: true,
        },
    ));
    assert_eq!(
        floods[0].answered.len(),
        4,
        "four zero-window streams answered"
    );
    // Each stream is reset once its writes have made no progress for a second.
    let mut bodies: Vec<RecvStream> = floods[0]
        .answered
        .drain(..)
        .map(http::Response::into_body)
        .collect();
    let ended = rt.block_on(async {
        let mut ended = Vec::new();
        for body in &mut bodies {
            let end = tokio::time::timeout(Duration::from_secs(10), body.data()).await;
            ended.push(matches!(end, Ok(Some(Err(_)) | None)));
        }
        ended
    });
    let took = started.elapsed();
    assert_eq!(ended, [true; 4], "zero-window streams were not reset");
    assert!(took < Duration::from_secs(10), "reset after {took:?}");
    assert!(wait_until(5, || in_flight(&proxy) == 0.0), "places freed");
    assert!(
        proxy.wait_metric("robotsguard_downstream_write_timeouts_total", &[], 4.0) >= 4.0,
        "write timeouts counted"
    );
    let text = proxy.metrics();
    assert_eq!(
        metric(
            &text,
            "robotsguard_upstream_errors_total",
            &[("origin", "shop"), ("kind", "timeout")]
        ),
        0.0,
        "a client's stall is not the upstream's timeout"
    );
    // The upstream stays in service (3 failures in a row would skip it for its cool-off).
    assert_eq!(
        metric(
            &text,
            "robotsguard_upstream_up",
            &[("origin", "shop"), ("upstream", &nginx.addr().to_string())]
        ),
        1.0,
        "one client's stalled streams took the upstream out of service"
    );
    assert_eq!(rt.block_on(h2_get(host(12), proxy.addr, PAGE)), Ok(200));
}

/// An HTTP/1 client that stops reading is closed at `limits.write_timeout` (not at
/// `idle_timeout`), and its place is freed.
#[test]
fn an_http1_client_that_stops_reading_is_closed_at_the_write_timeout() {
    // Larger than the socket buffers of both ends can take.
    let big = vec![b'x'; 16 << 20];
    let nginx = Nginx::start(&[("big.bin", &big)]);
    let proxy = proxy_before(nginx.addr(), "write_timeout: 1s, idle_timeout: 60s", "");
    let mut stream = TcpStream::connect(proxy.addr).expect("connects");
    let head = format!("GET {BIG} HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: {BROWSER}\r\n\r\n");
    stream.write_all(head.as_bytes()).expect("sent");
    assert!(
        wait_until(5, || in_flight(&proxy) >= 1.0),
        "the request is served"
    );
    assert!(
        wait_until(10, || in_flight(&proxy) == 0.0),
        "the request of a client that does not read was still in flight after 10 s"
    );
    assert!(proxy.wait_metric("robotsguard_downstream_write_timeouts_total", &[], 1.0) >= 1.0);
    // What the buffers hold arrives, then the end: the response was cut short.
    let mut got = Vec::new();
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = stream.read_to_end(&mut got);
    assert!(got.len() < big.len(), "the whole response arrived");
}

/// A client whose request body stops coming gets 408 at `limits.body_timeout`; like a client that
/// stops reading, that is the client's doing, not an upstream timeout, and four such clients do
/// not take a healthy upstream out of service.
#[test]
fn a_client_s_stalled_body_is_not_the_upstream_s_timeout() {
    let origin = Origin::start();
    origin.route(PAGE, 200, "a small page");
    let proxy = Proxy::start(&format!(
        "limits: {{body_timeout: 1s}}\n{}",
        site(&origin, HOST, "")
    ));
    let stalled: Vec<thread::JoinHandle<u16>> = (0..4)
        .map(|_| {
            let addr = proxy.addr;
            thread::spawn(move || {
                let Ok(mut stream) = TcpStream::connect(addr) else {
                    return 0;
                };
                let head = format!(
                    "POST /form HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: {BROWSER}\r\nContent-Length: 100\r\n\r\nfirst bytes"
                );
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                if stream.write_all(head.as_bytes()).is_err() {
                    return 0;
                }
                let mut got = Vec::new();
                let _ = stream.read_to_end(&mut got);
                String::from_utf8_lossy(&got)
                    .split(' ')
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0)
            })
        })
        .collect();
    let statuses: Vec<u16> = stalled.into_iter().filter_map(|h| h.join().ok()).collect();
    assert_eq!(statuses, [408; 4], "stalled bodies");
    let text = proxy.metrics();
    assert_eq!(
        metric(
            &text,
            "robotsguard_upstream_errors_total",
            &[("origin", "shop"), ("kind", "timeout")]
        ),
        0.0,
        "a client's stalled body is not the upstream's timeout"
    );
    assert_eq!(
        metric(
            &text,
            "robotsguard_upstream_up",
            &[("origin", "shop"), ("upstream", &origin.addr().to_string())]
        ),
        1.0,
        "four clients' stalled bodies took the upstream out of service"
    );
}

// ------------------------------------------------------------------------------------------------
// TLS handshakes.

/// Where a handshake through [`stalled_handshake`] stops.
#[derive(Debug, Clone, Copy)]
enum Stall {
    /// The client sends nothing at all.
    Silent,
    /// The ClientHello is sent a byte every 300 ms (trickling must not move the deadline).
    Trickle,
    /// The client's first `n` TLS records pass, then nothing more.
    AfterRecords(usize),
}

/// How long after connecting the proxy closed a TLS handshake by `openssl s_client` (with
/// `version`: `-tls1_2` or `-tls1_3`) relayed to `server` until `stall`; `None` if it was still
/// open after `wait`.
fn stalled_handshake(
    server: SocketAddr,
    version: &str,
    stall: Stall,
    wait: Duration,
) -> Option<Duration> {
    let listener = TcpListener::bind("127.0.0.1:0").expect("the relay binds");
    let relay = listener.local_addr().expect("the relay's address");
    let mut client: Child = Command::new("timeout")
        .args([
            "30",
            "openssl",
            "s_client",
            "-quiet",
            version,
            "-servername",
            HOST,
        ])
        .args(["-connect", &relay.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl s_client runs");
    let (mut from_client, _) = listener.accept().expect("openssl connects to the relay");
    let mut to_server = TcpStream::connect(server).expect("the relay connects to the proxy");
    let started = Instant::now();
    // The server's bytes go back to the client as they come; the end of them is the close.
    let closed: Arc<Mutex<Option<Duration>>> = Arc::default();
    {
        let closed = closed.clone();
        let mut from_server = to_server.try_clone().expect("a second handle");
        let mut back = from_client.try_clone().expect("a second handle");
        thread::spawn(move || {
            let mut buf = [0u8; 16 * 1024];
            let _ = from_server.set_read_timeout(Some(wait + Duration::from_secs(1)));
            for _ in 0..100_000 {
                match from_server.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if back.write_all(&buf[..n]).is_err() {
                            // The client gave up: keep reading until the server closes.
                        }
                    }
                }
            }
            if let Ok(mut closed) = closed.lock() {
                *closed = Some(started.elapsed());
            }
        });
    }
    let _ = from_client.set_read_timeout(Some(Duration::from_secs(5)));
    match stall {
        Stall::Silent => {}
        Stall::Trickle => {
            let mut byte = [0u8; 1];
            for _ in 0..(wait.as_millis() / 300 + 1) {
                if from_client.read_exact(&mut byte).is_err() || to_server.write_all(&byte).is_err()
                {
                    break;
                }
                if closed_at(&closed).is_some() {
                    break;
                }
                thread::sleep(Duration::from_millis(300));
            }
        }
        Stall::AfterRecords(records) => {
            for _ in 0..records {
                let mut header = [0u8; 5];
                if from_client.read_exact(&mut header).is_err() {
                    break;
                }
                let length = usize::from(u16::from_be_bytes([header[3], header[4]]));
                let mut body = vec![0u8; length];
                if from_client.read_exact(&mut body).is_err() {
                    break;
                }
                let _ = to_server.write_all(&header);
                let _ = to_server.write_all(&body);
            }
        }
    }
    let _ = wait_until(wait.as_secs(), || {
        closed_at(&closed).is_some() || started.elapsed() > wait
    });
    let _ = to_server.shutdown(std::net::Shutdown::Both);
    let _ = client.kill();
    let _ = client.wait();
    closed_at(&closed).filter(|after| *after <= wait)
}

/// When the relay saw the server close, if it has.
fn closed_at(closed: &Mutex<Option<Duration>>) -> Option<Duration> {
    closed.lock().ok().and_then(|closed| *closed)
}

/// A TLS connection stalled anywhere in its handshake — before its ClientHello, trickling it,
/// after it (the server's whole flight sent, TLS 1.3), or mid-way through the client's second
/// flight (TLS 1.2: its key exchange sent, its Finished not) — is closed at
/// `limits.handshake_timeout` (2 s here; `header_timeout` is 10 s and does not apply), while a
/// complete handshake is served.
#[test]
fn a_tls_handshake_stalled_anywhere_is_closed_at_the_handshake_timeout() {
    let origin = Origin::start();
    let dir = tempfile::tempdir().expect("temp dir");
    support::tls::make_ca(dir.path(), "ca");
    let (cert, key) = support::tls::make_leaf(dir.path(), "ca", "shop", "DNS:shop.example", false);
    let tls_port = support::free_port();
    let proxy = Proxy::builder(&format!(
        "limits: {{header_timeout: 10s, handshake_timeout: 2s}}\n{}",
        site(&origin, HOST, "")
    ))
    .second_listener(&format!(
        "{{address: \"127.0.0.1:{tls_port}\", tls: {{cert: \"{}\", key: \"{}\"}}}}",
        cert.display(),
        key.display()
    ))
    .start();
    let tls = SocketAddr::from(([127, 0, 0, 1], tls_port));
    let wait = Duration::from_secs(8);
    let stalls = [
        ("-tls1_3", Stall::Silent, "no ClientHello"),
        ("-tls1_3", Stall::Trickle, "a ClientHello trickled"),
        (
            "-tls1_3",
            Stall::AfterRecords(1),
            "TLS 1.3, after the server's flight",
        ),
        (
            "-tls1_2",
            Stall::AfterRecords(1),
            "TLS 1.2, after ServerHelloDone",
        ),
        (
            "-tls1_2",
            Stall::AfterRecords(2),
            "TLS 1.2, after the client key exchange",
        ),
    ];
    for (version, stall, what) in stalls {
        let closed = stalled_handshake(tls, version, stall, wait);
        let Some(after) = closed else {
            panic!("{what}: still open after {wait:?}");
        };
        assert!(
            after >= Duration::from_millis(1500) && after <= Duration::from_secs(5),
            "{what}: closed after {after:?}, not at the 2 s handshake timeout"
        );
    }
    assert!(
        proxy.wait_metric(
            "robotsguard_connections_refused_total",
            &[("reason", "handshake_timeout")],
            5.0
        ) >= 5.0
    );
    // A handshake that completes is served.
    let mut client = support::tls::s_client(&tls.to_string(), HOST, None);
    if let Some(stdin) = client.stdin.as_mut() {
        let _ = stdin.write_all(
            format!("GET /page HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: {BROWSER}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        );
    }
    let served = wait_until(8, || !origin.proxied_to("/page").is_empty());
    let _ = client.kill();
    let _ = client.wait();
    assert!(served, "a complete TLS handshake was not served");
}
