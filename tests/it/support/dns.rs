//! A real DNS server on loopback for verification tests: answers PTR, A and AAAA from a table
//! the test sets (and may change while it runs), NXDOMAIN for names it does not know, and can be
//! switched to SERVFAIL, REFUSED or silence (for one name or all; silence is a server that is
//! down) or truncated UDP answers (the client must ask again over TCP). Answers over UDP and TCP on the same port, as a resolver
//! expects, may be delayed, and counts the queries it receives.
//!
//! Every loop is bounded; the server's threads stop soon after it is dropped (and after five
//! minutes in any case).

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, PTR};
use hickory_proto::rr::{Name, RData, Record, RecordType};

/// How long the server's threads live at most, whatever the test does.
const LIFETIME: Duration = Duration::from_secs(300);
/// Delayed answers pending at most (each is a thread).
const MAX_DELAYED: usize = 256;

/// How the server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// From the table; NXDOMAIN for unknown names.
    Answer,
    /// SERVFAIL to everything.
    ServFail,
    /// REFUSED to everything.
    Refused,
    /// No answer at all: the client times out.
    Down,
    /// Over UDP an empty answer with the TC (truncated) bit; over TCP from the table.
    TruncateUdp,
}

/// Which transport a query came over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Udp,
    Tcp,
}

#[derive(Default)]
struct Table {
    ptr: HashMap<IpAddr, Vec<String>>,
    addresses: HashMap<String, Vec<IpAddr>>,
    /// Names answered SERVFAIL whatever the mode.
    failing: std::collections::HashSet<String>,
    /// Names answered REFUSED whatever the mode.
    refusing: std::collections::HashSet<String>,
    /// Names never answered (the client times out) whatever the mode.
    silent: std::collections::HashSet<String>,
    /// Name, type, transport and message id of each query received.
    queries: Vec<(String, RecordType, Transport, u16)>,
}

struct Shared {
    table: Mutex<Table>,
    mode: Mutex<Mode>,
    delay: Mutex<Duration>,
    stop: AtomicBool,
    delayed: AtomicUsize,
    started: Instant,
}

impl Shared {
    fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed) && self.started.elapsed() < LIFETIME
    }
}

/// The server; stops when dropped.
pub struct DnsServer {
    /// Its UDP and TCP address.
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

fn lower(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// The PTR query name of `ip`: `7.100.51.198.in-addr.arpa`, or the ip6.arpa nibble form.
pub fn arpa(ip: &str) -> String {
    match ip.parse::<IpAddr>().expect("an address") {
        IpAddr::V4(v4) => {
            let [a, b, c, d] = v4.octets();
            format!("{d}.{c}.{b}.{a}.in-addr.arpa")
        }
        IpAddr::V6(v6) => {
            let mut nibbles: Vec<String> = v6
                .octets()
                .iter()
                .flat_map(|byte| [byte >> 4, byte & 0xF])
                .map(|nibble| format!("{nibble:x}"))
                .collect();
            nibbles.reverse();
            format!("{}.ip6.arpa", nibbles.join("."))
        }
    }
}

/// UDP and TCP sockets on one free loopback port (a few tries: the port UDP got may be taken
/// for TCP).
fn bind() -> (UdpSocket, TcpListener) {
    for _ in 0..50 {
        let udp = UdpSocket::bind("127.0.0.1:0").expect("DNS server binds UDP");
        let addr = udp.local_addr().expect("DNS server address");
        if let Ok(tcp) = TcpListener::bind(addr) {
            return (udp, tcp);
        }
    }
    panic!("no loopback port free for both UDP and TCP");
}

impl DnsServer {
    pub fn start() -> DnsServer {
        let (udp, tcp) = bind();
        let addr = udp.local_addr().expect("DNS server address");
        udp.set_read_timeout(Some(Duration::from_millis(20)))
            .expect("read timeout");
        tcp.set_nonblocking(true).expect("non-blocking listener");
        let shared = Arc::new(Shared {
            table: Mutex::default(),
            mode: Mutex::new(Mode::Answer),
            delay: Mutex::new(Duration::ZERO),
            stop: AtomicBool::new(false),
            delayed: AtomicUsize::new(0),
            started: Instant::now(),
        });
        let udp_shared = shared.clone();
        thread::spawn(move || serve_udp(udp, udp_shared));
        let tcp_shared = shared.clone();
        thread::spawn(move || serve_tcp(tcp, tcp_shared));
        DnsServer { addr, shared }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.shared.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `ip`'s PTR names (an empty list: the name exists, without PTR records).
    pub fn ptr(&self, ip: &str, names: &[&str]) -> &DnsServer {
        let ip: IpAddr = ip.parse().expect("an address");
        self.table()
            .ptr
            .insert(ip, names.iter().map(|n| lower(n)).collect());
        self
    }

    /// `name`'s A and AAAA addresses.
    pub fn addresses(&self, name: &str, ips: &[&str]) -> &DnsServer {
        let ips = ips
            .iter()
            .map(|ip| ip.parse().expect("an address"))
            .collect();
        self.table().addresses.insert(lower(name), ips);
        self
    }

    /// Queries for `name` (any type) are answered SERVFAIL from now on, whatever the mode.
    pub fn fail_name(&self, name: &str) -> &DnsServer {
        self.table().failing.insert(lower(name));
        self
    }

    /// Queries for `name` (any type) are answered REFUSED from now on, whatever the mode.
    pub fn refuse_name(&self, name: &str) -> &DnsServer {
        self.table().refusing.insert(lower(name));
        self
    }

    /// Queries for `name` (any type) get no answer from now on (the client times out).
    pub fn silence_name(&self, name: &str) -> &DnsServer {
        self.table().silent.insert(lower(name));
        self
    }

    /// Forgets `ip`'s PTR names (NXDOMAIN from now on).
    pub fn forget_ptr(&self, ip: &str) -> &DnsServer {
        let ip: IpAddr = ip.parse().expect("an address");
        self.table().ptr.remove(&ip);
        self
    }

    pub fn set_mode(&self, mode: Mode) {
        *self.shared.mode.lock().unwrap_or_else(|e| e.into_inner()) = mode;
    }

    /// Every answer from now on is sent `delay` late.
    pub fn set_delay(&self, delay: Duration) {
        *self.shared.delay.lock().unwrap_or_else(|e| e.into_inner()) = delay;
    }

    /// Queries received for `name` of `kind`.
    pub fn queries(&self, name: &str, kind: RecordType) -> usize {
        let name = lower(name);
        self.table()
            .queries
            .iter()
            .filter(|(n, k, _, _)| *n == name && *k == kind)
            .count()
    }

    /// Distinct queries (by message id) received for `name` of `kind`: a resolver resends an
    /// unanswered UDP query with the same id, so this counts lookups, not packets.
    pub fn lookups(&self, name: &str, kind: RecordType) -> usize {
        let name = lower(name);
        let ids: std::collections::HashSet<u16> = self
            .table()
            .queries
            .iter()
            .filter(|(n, k, _, _)| *n == name && *k == kind)
            .map(|(_, _, _, id)| *id)
            .collect();
        ids.len()
    }

    /// Distinct PTR queries received for address `ip`.
    pub fn ptr_lookups(&self, ip: &str) -> usize {
        self.lookups(&arpa(ip), RecordType::PTR)
    }

    /// PTR queries received for address `ip`.
    pub fn ptr_queries(&self, ip: &str) -> usize {
        self.queries(&arpa(ip), RecordType::PTR)
    }

    /// Queries received over `transport`.
    pub fn queries_over(&self, transport: Transport) -> usize {
        self.table()
            .queries
            .iter()
            .filter(|(_, _, t, _)| *t == transport)
            .count()
    }

    /// Every query received.
    pub fn all_queries(&self) -> usize {
        self.table().queries.len()
    }

    /// Every distinct query (name, type and message id) received.
    pub fn all_lookups(&self) -> usize {
        let distinct: std::collections::HashSet<(String, RecordType, u16)> = self
            .table()
            .queries
            .iter()
            .map(|(name, kind, _, id)| (name.clone(), *kind, *id))
            .collect();
        distinct.len()
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

fn serve_udp(socket: UdpSocket, shared: Arc<Shared>) {
    let mut buffer = [0u8; 4096];
    while shared.running() {
        let Ok((n, peer)) = socket.recv_from(&mut buffer) else {
            continue;
        };
        let Some(bytes) = respond(&buffer[..n], Transport::Udp, &shared) else {
            continue;
        };
        let delay = *shared.delay.lock().unwrap_or_else(|e| e.into_inner());
        if delay.is_zero() {
            let _ = socket.send_to(&bytes, peer);
            continue;
        }
        // Late answers on their own threads, so one does not hold up the others.
        let Ok(late) = socket.try_clone() else {
            continue;
        };
        if shared.delayed.fetch_add(1, Ordering::Relaxed) >= MAX_DELAYED {
            shared.delayed.fetch_sub(1, Ordering::Relaxed);
            continue;
        }
        let shared = shared.clone();
        thread::spawn(move || {
            thread::sleep(delay);
            let _ = late.send_to(&bytes, peer);
            shared.delayed.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

fn serve_tcp(listener: TcpListener, shared: Arc<Shared>) {
    while shared.running() {
        match listener.accept() {
            Ok((stream, _)) => {
                let shared = shared.clone();
                thread::spawn(move || serve_tcp_connection(stream, &shared));
            }
            Err(_) => thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Length-prefixed messages (RFC 1035 §4.2.2), a bounded number per connection.
fn serve_tcp_connection(mut stream: TcpStream, shared: &Shared) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    for _ in 0..1000 {
        if !shared.running() {
            return;
        }
        let mut length = [0u8; 2];
        if stream.read_exact(&mut length).is_err() {
            return;
        }
        let mut query = vec![0u8; usize::from(u16::from_be_bytes(length))];
        if stream.read_exact(&mut query).is_err() {
            return;
        }
        let Some(bytes) = respond(&query, Transport::Tcp, shared) else {
            continue;
        };
        let delay = *shared.delay.lock().unwrap_or_else(|e| e.into_inner());
        thread::sleep(delay);
        let Ok(length) = u16::try_from(bytes.len()) else {
            return;
        };
        if stream.write_all(&length.to_be_bytes()).is_err() || stream.write_all(&bytes).is_err() {
            return;
        }
    }
}

/// The answer's bytes to `query`, or `None` for no answer.
fn respond(query: &[u8], transport: Transport, shared: &Shared) -> Option<Vec<u8>> {
    let query = Message::from_vec(query).ok()?;
    let mode = *shared.mode.lock().unwrap_or_else(|e| e.into_inner());
    let mut table = shared.table.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(question) = query.queries.first() {
        let name = lower(&question.name().to_ascii());
        table
            .queries
            .push((name, question.query_type(), transport, query.metadata.id));
    }
    if mode == Mode::Down {
        return None;
    }
    let silent = query
        .queries
        .first()
        .is_some_and(|question| table.silent.contains(&lower(&question.name().to_ascii())));
    if silent {
        return None;
    }
    answer(&query, mode, transport, &table).to_vec().ok()
}

/// `1.100.51.198.in-addr.arpa` → 198.51.100.1; the ip6.arpa nibble form → the IPv6 address.
fn address_of(name: &str) -> Option<IpAddr> {
    if let Some(rest) = name.strip_suffix(".in-addr.arpa") {
        let octets: Vec<&str> = rest.split('.').rev().collect();
        return octets.join(".").parse().ok();
    }
    let rest = name.strip_suffix(".ip6.arpa")?;
    let nibbles: Vec<&str> = rest.split('.').rev().collect();
    if nibbles.len() != 32 || nibbles.iter().any(|n| n.len() != 1) {
        return None;
    }
    let hex: String = nibbles.concat();
    let groups: Vec<&str> = (0..8).map(|i| &hex[i * 4..i * 4 + 4]).collect();
    groups.join(":").parse().ok()
}

fn answer(query: &Message, mode: Mode, transport: Transport, table: &Table) -> Message {
    let mut response = Message::new(query.metadata.id, MessageType::Response, OpCode::Query);
    response.metadata.recursion_desired = query.metadata.recursion_desired;
    response.metadata.recursion_available = true;
    response.metadata.authoritative = true;
    let Some(question) = query.queries.first() else {
        response.metadata.response_code = ResponseCode::FormErr;
        return response;
    };
    // The question as asked, letter case included (a client may check it).
    response.add_query(question.clone());
    let name = lower(&question.name().to_ascii());
    if table.failing.contains(&name) {
        response.metadata.response_code = ResponseCode::ServFail;
        return response;
    }
    if table.refusing.contains(&name) {
        response.metadata.response_code = ResponseCode::Refused;
        return response;
    }
    match mode {
        Mode::ServFail => {
            response.metadata.response_code = ResponseCode::ServFail;
            return response;
        }
        Mode::Refused => {
            response.metadata.response_code = ResponseCode::Refused;
            return response;
        }
        Mode::TruncateUdp if transport == Transport::Udp => {
            response.metadata.truncation = true;
            return response;
        }
        _ => {}
    }
    let kind = question.query_type();
    let mut known = false;
    let mut records = Vec::new();
    match kind {
        RecordType::PTR => {
            if let Some(names) = address_of(&name).and_then(|ip| table.ptr.get(&ip)) {
                known = true;
                for target in names {
                    if let Ok(target) = Name::from_ascii(format!("{target}.")) {
                        records.push(Record::from_rdata(
                            question.name().clone(),
                            60,
                            RData::PTR(PTR(target)),
                        ));
                    }
                }
            }
        }
        RecordType::A | RecordType::AAAA => {
            if let Some(ips) = table.addresses.get(&name) {
                known = true;
                for ip in ips {
                    let data = match (kind, ip) {
                        (RecordType::A, IpAddr::V4(v4)) => RData::A(A(*v4)),
                        (RecordType::AAAA, IpAddr::V6(v6)) => RData::AAAA(AAAA(*v6)),
                        _ => continue,
                    };
                    records.push(Record::from_rdata(question.name().clone(), 60, data));
                }
            }
        }
        _ => {}
    }
    if !known {
        response.metadata.response_code = ResponseCode::NXDomain;
    }
    for record in records {
        response.add_answer(record);
    }
    response
}
