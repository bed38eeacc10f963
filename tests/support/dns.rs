//! A real DNS server on loopback for verification tests: answers PTR, A and AAAA from a table
//! the test sets (and may change), NXDOMAIN for names it does not know, and can be switched to
//! SERVFAIL or to silence (a server that is down). Counts the queries it receives.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, PTR};
use hickory_proto::rr::{Name, RData, Record, RecordType};

/// How the server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// From the table; NXDOMAIN for unknown names.
    Answer,
    /// SERVFAIL to everything.
    ServFail,
    /// No answer at all.
    Down,
}

#[derive(Default)]
struct Table {
    ptr: HashMap<IpAddr, Vec<String>>,
    addresses: HashMap<String, Vec<IpAddr>>,
    queries: Vec<(String, RecordType)>,
}

/// The server; stops when dropped.
pub struct DnsServer {
    pub addr: SocketAddr,
    table: Arc<Mutex<Table>>,
    mode: Arc<Mutex<Mode>>,
    stop: Arc<AtomicBool>,
}

fn lower(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

impl DnsServer {
    pub fn start() -> DnsServer {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("DNS server binds");
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .expect("read timeout");
        let addr = socket.local_addr().expect("DNS server address");
        let table = Arc::new(Mutex::new(Table::default()));
        let mode = Arc::new(Mutex::new(Mode::Answer));
        let stop = Arc::new(AtomicBool::new(false));
        let (table_c, mode_c, stop_c) = (table.clone(), mode.clone(), stop.clone());
        thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(300);
            let mut buffer = [0u8; 4096];
            while !stop_c.load(Ordering::Relaxed) && Instant::now() < deadline {
                let Ok((n, peer)) = socket.recv_from(&mut buffer) else {
                    continue;
                };
                let Ok(query) = Message::from_vec(&buffer[..n]) else {
                    continue;
                };
                let mode = *mode_c.lock().unwrap_or_else(|e| e.into_inner());
                if mode == Mode::Down {
                    continue;
                }
                let answer = answer(&query, mode, &table_c);
                if let Ok(bytes) = answer.to_vec() {
                    let _ = socket.send_to(&bytes, peer);
                }
            }
        });
        DnsServer {
            addr,
            table,
            mode,
            stop,
        }
    }

    /// `ip`'s PTR names.
    pub fn ptr(&self, ip: &str, names: &[&str]) -> &DnsServer {
        let ip: IpAddr = ip.parse().expect("an address");
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        table
            .ptr
            .insert(ip, names.iter().map(|n| lower(n)).collect());
        self
    }

    /// `name`'s A and AAAA addresses.
    pub fn addresses(&self, name: &str, ips: &[&str]) -> &DnsServer {
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        table.addresses.insert(
            lower(name),
            ips.iter()
                .map(|ip| ip.parse().expect("an address"))
                .collect(),
        );
        self
    }

    pub fn set_mode(&self, mode: Mode) {
        *self.mode.lock().unwrap_or_else(|e| e.into_inner()) = mode;
    }

    /// Queries received for `name` of `kind`.
    pub fn queries(&self, name: &str, kind: RecordType) -> usize {
        let table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let name = lower(name);
        table
            .queries
            .iter()
            .filter(|(n, k)| *n == name && *k == kind)
            .count()
    }

    /// Every query received.
    pub fn all_queries(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .queries
            .len()
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// `1.100.51.198.in-addr.arpa` → 198.51.100.1; the ip6.arpa nibble form → the IPv6 address.
fn address_of(name: &str) -> Option<IpAddr> {
    if let Some(rest) = name.strip_suffix(".in-addr.arpa") {
        let octets: Vec<&str> = rest.split('.').rev().collect();
        return octets.join(".").parse().ok();
    }
    let rest = name.strip_suffix(".ip6.arpa")?;
    let nibbles: Vec<&str> = rest.split('.').rev().collect();
    if nibbles.len() != 32 {
        return None;
    }
    let hex: String = nibbles.concat();
    let groups: Vec<&str> = (0..8).map(|i| &hex[i * 4..i * 4 + 4]).collect();
    groups.join(":").parse().ok()
}

fn answer(query: &Message, mode: Mode, table: &Mutex<Table>) -> Message {
    let mut response = Message::new(query.metadata.id, MessageType::Response, OpCode::Query);
    response.metadata.recursion_desired = query.metadata.recursion_desired;
    response.metadata.recursion_available = true;
    response.metadata.authoritative = true;
    let Some(question) = query.queries.first() else {
        response.metadata.response_code = ResponseCode::FormErr;
        return response;
    };
    response.add_query(question.clone());
    let name = lower(&question.name().to_ascii());
    let kind = question.query_type();
    let mut table = table.lock().unwrap_or_else(|e| e.into_inner());
    table.queries.push((name.clone(), kind));
    if mode == Mode::ServFail {
        response.metadata.response_code = ResponseCode::ServFail;
        return response;
    }
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
