//! A TCP relay between the proxy and a real Redis server that holds every chunk for a fixed
//! delay in each direction (a store far away) and records each command the proxy sends, parsed
//! from the RESP it writes: what a request costs the store, counted exactly, and unaffected by
//! how busy the machine is.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The most connections the relay accepts (the proxy opens a few: commands, announcements, the
/// trap secret), so a bug cannot spawn threads without end.
const MAX_CONNECTIONS: usize = 64;

/// The most bytes of commands waiting to be parsed on one connection.
const MAX_PENDING: usize = 16 << 20;

/// A running relay, stopped on drop.
pub struct Relay {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<Vec<String>>>>,
    chunks: Arc<Mutex<usize>>,
}

impl Relay {
    /// Relays `127.0.0.1:PORT` to `upstream`, holding every chunk `delay` in each direction.
    pub fn start(upstream: SocketAddr, delay: Duration) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let addr = listener.local_addr().expect("relay address");
        listener.set_nonblocking(true).expect("non-blocking accept");
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let chunks = Arc::new(Mutex::new(0));
        let (stop_accepting, log_of, chunks_of) = (stop.clone(), log.clone(), chunks.clone());
        thread::spawn(move || {
            let mut accepted = 0;
            while !stop_accepting.load(Ordering::Relaxed) && accepted < MAX_CONNECTIONS {
                match listener.accept() {
                    Ok((client, _)) => {
                        accepted += 1;
                        let Ok(server) = TcpStream::connect(upstream) else {
                            continue;
                        };
                        let _ = client.set_nonblocking(false);
                        relay(client, server, delay, &stop_accepting, &log_of, &chunks_of);
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Relay {
            addr,
            stop,
            log,
            chunks,
        }
    }

    /// `redis://ADDR/0` through the relay.
    pub fn url(&self) -> String {
        format!("redis://{}/0", self.addr)
    }

    /// Every command relayed so far, in order: the name upper-cased, then its arguments.
    pub fn commands(&self) -> Vec<Vec<String>> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// How many commands were relayed so far (a mark for [`Relay::commands_since`]).
    pub fn mark(&self) -> usize {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The commands relayed after `mark`.
    pub fn commands_since(&self, mark: usize) -> Vec<Vec<String>> {
        let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        log.get(mark..).map(<[_]>::to_vec).unwrap_or_default()
    }

    /// How many chunks went from the proxy to the store (each one a write the store answers).
    pub fn chunks_to_store(&self) -> usize {
        *self.chunks.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The commands parsed so far, and how many chunks carried them.
type Record = (Arc<Mutex<Vec<Vec<String>>>>, Arc<Mutex<usize>>);

/// Chunks read and not yet due, each with when it is due.
type Queue = Arc<(Mutex<VecDeque<(Instant, Vec<u8>)>>, Condvar)>;

/// Relays one connection both ways: a reader and a delayed writer per direction.
fn relay(
    client: TcpStream,
    server: TcpStream,
    delay: Duration,
    stop: &Arc<AtomicBool>,
    log: &Arc<Mutex<Vec<Vec<String>>>>,
    chunks: &Arc<Mutex<usize>>,
) {
    let pairs = [
        (
            client.try_clone(),
            server.try_clone(),
            Some((log.clone(), chunks.clone())),
        ),
        (server.try_clone(), client.try_clone(), None),
    ];
    for (from, to, record) in pairs {
        let (Ok(from), Ok(to)) = (from, to) else {
            return;
        };
        let queue: Queue = Arc::new((Mutex::new(VecDeque::new()), Condvar::new()));
        let (reader_queue, reader_stop) = (queue.clone(), stop.clone());
        thread::spawn(move || read_side(from, reader_queue, delay, record, &reader_stop));
        let writer_stop = stop.clone();
        thread::spawn(move || write_side(to, queue, &writer_stop));
    }
}

/// Reads chunks into `queue`, due `delay` from now; with `record`, parses the commands in them.
fn read_side(
    mut from: TcpStream,
    queue: Queue,
    delay: Duration,
    record: Option<Record>,
    stop: &AtomicBool,
) {
    let _ = from.set_read_timeout(Some(Duration::from_millis(200)));
    let mut pending = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => break,
        };
        if let Some((log, chunks)) = &record {
            *chunks.lock().unwrap_or_else(|e| e.into_inner()) += 1;
            pending.extend_from_slice(&buf[..n]);
            if pending.len() > MAX_PENDING {
                break;
            }
            let mut parsed = 0;
            while let Some((command, used)) = parse_command(&pending[parsed..]) {
                parsed += used;
                log.lock().unwrap_or_else(|e| e.into_inner()).push(command);
            }
            pending.drain(..parsed);
        }
        let (lock, ready) = &*queue;
        lock.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back((Instant::now() + delay, buf[..n].to_vec()));
        ready.notify_one();
    }
    // An empty chunk: the writer closes its side once everything before it is written.
    let (lock, ready) = &*queue;
    lock.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push_back((Instant::now() + delay, Vec::new()));
    ready.notify_one();
}

/// Writes each chunk of `queue` once it is due; an empty chunk ends the direction.
fn write_side(mut to: TcpStream, queue: Queue, stop: &AtomicBool) {
    let (lock, ready) = &*queue;
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let next = {
            let mut chunks = lock.lock().unwrap_or_else(|e| e.into_inner());
            match chunks.front() {
                Some((due, _)) if *due <= Instant::now() => chunks.pop_front(),
                Some((due, _)) => {
                    let wait = due.saturating_duration_since(Instant::now());
                    drop(ready.wait_timeout(chunks, wait));
                    continue;
                }
                None => {
                    drop(ready.wait_timeout(chunks, Duration::from_millis(200)));
                    continue;
                }
            }
        };
        let Some((_, chunk)) = next else {
            continue;
        };
        if chunk.is_empty() || to.write_all(&chunk).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// One RESP command (an array of bulk strings) at the start of `bytes`, and its length;
/// `None` while it is incomplete.
fn parse_command(bytes: &[u8]) -> Option<(Vec<String>, usize)> {
    let (count, mut at) = header(bytes, b'*')?;
    let mut command = Vec::with_capacity(count);
    for index in 0..count {
        let (len, start) = header(&bytes[at..], b'$')?;
        let start = at + start;
        let end = start.checked_add(len)?;
        if bytes.len() < end + 2 {
            return None;
        }
        let text = String::from_utf8_lossy(&bytes[start..end]).into_owned();
        command.push(if index == 0 {
            text.to_ascii_uppercase()
        } else {
            text
        });
        at = end + 2;
    }
    Some((command, at))
}

/// A `KIND NUMBER\r\n` line at the start of `bytes`: the number and the line's length.
fn header(bytes: &[u8], kind: u8) -> Option<(usize, usize)> {
    if bytes.first() != Some(&kind) {
        return None;
    }
    let end = bytes.windows(2).position(|w| w == b"\r\n")?;
    let number = std::str::from_utf8(&bytes[1..end]).ok()?.parse().ok()?;
    Some((number, end + 2))
}

#[test]
fn commands_are_parsed_whole_and_only_whole() {
    let wire = b"*3\r\n$3\r\nset\r\n$1\r\nk\r\n$2\r\nv1\r\n*1\r\n$4\r\nPTTL\r\n";
    let (first, used) = parse_command(wire).expect("a whole command");
    assert_eq!(first, ["SET", "k", "v1"]);
    let (second, _) = parse_command(&wire[used..]).expect("another");
    assert_eq!(second, ["PTTL"]);
    assert!(parse_command(&wire[..used - 1]).is_none());
}
