//! Reading a connection until the proxy closes it, and sending input a byte at a time: how the
//! tests check that a deadline, not a per-read timeout, ends a slow client.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Reads until the proxy closes the connection or `within` passes: what it sent, and whether it
/// closed.
pub fn read_until_closed(stream: &mut TcpStream, within: Duration) -> (Vec<u8>, bool) {
    let deadline = Instant::now() + within;
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    while Instant::now() < deadline {
        match stream.read(&mut chunk) {
            Ok(0) => return (received, true),
            Ok(n) => received.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (received, true),
        }
    }
    (received, false)
}

/// Sends `byte` every 300 ms (so no per-read timeout ever fires), at most 40 times, until the
/// proxy closes the connection: what it answered meanwhile, and whether it closed.
pub fn trickle_until_closed(stream: &mut TcpStream, byte: u8) -> (Vec<u8>, bool) {
    let mut answer = Vec::new();
    for _ in 0..40 {
        if stream.write_all(&[byte]).is_err() {
            return (answer, true);
        }
        let (got, gone) = read_until_closed(stream, Duration::from_millis(300));
        answer.extend(got);
        if gone {
            return (answer, true);
        }
    }
    (answer, false)
}
