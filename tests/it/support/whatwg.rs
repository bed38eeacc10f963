//! An origin that finds files the way a Node.js app does with `new URL(req.url, base)`: WHATWG
//! URL parsing against the special base `http://base.example/`, then a lookup of `pathname`.
//!
//! Such an app disagrees with a byte-wise reading of the request target in ways a proxy must
//! expect: a leading run of two or more `/` or `\` starts an authority (`//x/private/p` is the
//! path `/private/p` on host `x`), `\` is a path separator, dot segments (also spelt `%2e`) are
//! resolved, but other percent escapes stay as they are (`%2F` is data, not a separator) and
//! repeated slashes are kept.
//!
//! [`resolve`] follows the WHATWG URL standard's state machine for what decides the path, checked
//! against Node 20. Left out, because a request target does not reach them in these tests:
//! Windows drive letters in `file:` URLs, IDNA mapping of non-ASCII hosts (accepted as they are)
//! and full IPv6 host validation (left to `std`).

use std::collections::HashMap;

use super::*;

/// What [`resolve`] gives, and [`WhatwgOrigin::received`] records, for a target Node's `new URL`
/// would throw on (the app would answer 400 or crash; this origin answers 400).
pub const INVALID: &str = "<invalid URL>";

/// The base the targets are resolved against, as an app typically writes it.
pub const BASE: &str = "http://base.example/";

#[derive(Default)]
struct State {
    /// Resolved path (`/private/secret.html`) to content.
    files: HashMap<String, Vec<u8>>,
    /// (raw target, resolved path), in arrival order.
    received: Mutex<Vec<(String, String)>>,
}

/// A real HTTP/1.1 server on `127.0.0.1:0` serving `files` by WHATWG-resolved path: 200 with
/// the bytes, 404 when no file has exactly that path, 400 when the target does not parse.
pub struct WhatwgOrigin {
    addr: SocketAddr,
    state: Arc<State>,
    stop: Arc<AtomicBool>,
}

impl WhatwgOrigin {
    /// Serves `files`, each a path relative to the root (`"private/secret.html"`) and its bytes.
    pub fn start(files: &[(&str, &[u8])]) -> WhatwgOrigin {
        let files = files
            .iter()
            .map(|(path, bytes)| (format!("/{}", path.trim_start_matches('/')), bytes.to_vec()))
            .collect();
        let state = Arc::new(State {
            files,
            received: Mutex::new(Vec::new()),
        });
        let listener = TcpListener::bind("127.0.0.1:0").expect("WHATWG origin binds 127.0.0.1:0");
        let addr = listener.local_addr().expect("WHATWG origin has an address");
        let stop = Arc::new(AtomicBool::new(false));
        {
            let state = state.clone();
            let stop = stop.clone();
            thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let state = state.clone();
                    let stop = stop.clone();
                    thread::spawn(move || serve(stream, &state, &stop));
                }
            });
        }
        WhatwgOrigin { addr, state, stop }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request so far as (target exactly as sent, resolved path or [`INVALID`]).
    pub fn received(&self) -> Vec<(String, String)> {
        self.state.received.lock().expect("received lock").clone()
    }
}

impl Drop for WhatwgOrigin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

fn serve(stream: TcpStream, state: &State, stop: &AtomicBool) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    let _ = stream.set_nodelay(true);
    let mut wire = Wire::new(stream);
    for _ in 0..10_000 {
        if stop.load(Ordering::Acquire) {
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        let Ok(Some(head)) = wire.read_head(deadline) else {
            return;
        };
        // The target is taken from the raw bytes, not a lossy UTF-8 reading, because Node hands
        // the app `req.url` decoded as Latin-1.
        let line_end = find(&head, b"\r\n").unwrap_or(head.len());
        let mut words = head[..line_end].split(|&b| b == b' ');
        let method = String::from_utf8_lossy(words.next().unwrap_or_default()).into_owned();
        let target: String = words
            .next()
            .unwrap_or_default()
            .iter()
            .map(|&b| char::from(b))
            .collect();
        let (_, headers) = parse_head(&head);
        let deadline = Instant::now() + IO_TIMEOUT;
        let body = if is_chunked(&headers) {
            wire.read_chunked(deadline)
        } else {
            match content_length(&headers) {
                Ok(Some(len)) => wire.read_exact_body(len, deadline),
                Ok(None) => Ok(Vec::new()),
                Err(e) => Err(e),
            }
        };
        if body.is_err() {
            return;
        }
        let resolved = resolve(&target);
        let (status, content) = match &resolved {
            None => (400, b"invalid URL\n".to_vec()),
            Some(path) => match state.files.get(path) {
                Some(bytes) => (200, bytes.clone()),
                None => (404, format!("no file at {path}\n").into_bytes()),
            },
        };
        state
            .received
            .lock()
            .expect("received lock")
            .push((target, resolved.unwrap_or_else(|| INVALID.to_string())));
        let close = header(&headers, "connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let mut out = format!(
            "HTTP/1.1 {status} {}\r\ncontent-type: text/html\r\ncontent-length: {}\r\nx-origin: whatwg\r\n{}\r\n",
            reason(status),
            content.len(),
            if close { "connection: close\r\n" } else { "" }
        )
        .into_bytes();
        if method != "HEAD" {
            out.extend_from_slice(&content);
        }
        if wire.stream.write_all(&out).is_err() || close {
            let _ = wire.stream.shutdown(Shutdown::Both);
            return;
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Resolution

/// The `pathname` of `new URL(target, "http://base.example/")`, or `None` where that throws.
pub fn resolve(target: &str) -> Option<String> {
    // The standard first trims C0 controls and spaces at both ends and drops every tab and
    // newline anywhere.
    let input: Vec<char> = target
        .trim_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    match scheme(&input) {
        // The base's own scheme: everything after the colon reads as a relative reference.
        Some((name, rest)) if name == "http" => relative(rest),
        Some((name, rest)) if name == "file" => file(rest),
        Some((name, rest)) if is_special(&name) => {
            // Another special scheme always has an authority, however many slashes (zero too).
            authority(skip_slashes(rest, true), true)
        }
        Some((_, rest)) => not_special(rest),
        None => relative(&input),
    }
}

fn is_special(scheme: &str) -> bool {
    matches!(scheme, "ftp" | "http" | "https" | "ws" | "wss" | "file")
}

/// A leading `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"`, lower-cased, and what follows.
fn scheme(input: &[char]) -> Option<(String, &[char])> {
    if !input.first()?.is_ascii_alphabetic() {
        return None;
    }
    let end = input
        .iter()
        .position(|c| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))?;
    (input[end] == ':').then(|| {
        let name: String = input[..end].iter().collect();
        (name.to_ascii_lowercase(), &input[end + 1..])
    })
}

fn is_slash(c: char, special: bool) -> bool {
    c == '/' || (special && c == '\\')
}

fn skip_slashes(input: &[char], special: bool) -> &[char] {
    let n = input.iter().take_while(|&&c| is_slash(c, special)).count();
    &input[n..]
}

/// A reference relative to the base, whose path is `/`.
fn relative(input: &[char]) -> Option<String> {
    match input {
        // Same document, or only a new query or fragment: the base's path.
        [] | ['?' | '#', ..] => Some("/".to_string()),
        // Two slashes of either kind: an authority follows, and any further slashes are skipped.
        [a, b, rest @ ..] if is_slash(*a, true) && is_slash(*b, true) => {
            authority(skip_slashes(rest, true), true)
        }
        // An absolute path.
        [a, rest @ ..] if is_slash(*a, true) => Some(path(rest, true)),
        // A relative path replaces the base's last (here only, empty) segment.
        _ => Some(path(input, true)),
    }
}

/// An authority (`user:pass@host:port`) up to the first `/`, `?` or `#` (or `\` when special),
/// then the path.
fn authority(input: &[char], special: bool) -> Option<String> {
    let end = input
        .iter()
        .position(|&c| is_slash(c, special) || c == '?' || c == '#')
        .unwrap_or(input.len());
    let (auth, rest) = input.split_at(end);
    // Up to the last `@` are credentials, which do not matter to the path.
    let host_port = match auth.iter().rposition(|&c| c == '@') {
        Some(at) if at + 1 == auth.len() => return None,
        Some(at) => &auth[at + 1..],
        None => auth,
    };
    host_and_port(host_port, special)?;
    Some(path_start(rest, special))
}

/// Checks a `host[:port]` the way the standard's host state does; `None` where it fails.
fn host_and_port(input: &[char], special: bool) -> Option<()> {
    // A colon inside brackets belongs to an IPv6 address.
    let mut inside = false;
    let colon = input.iter().position(|&c| {
        inside = match c {
            '[' => true,
            ']' => false,
            _ => inside,
        };
        c == ':' && !inside
    });
    let (host, port) = match colon {
        Some(i) => (&input[..i], &input[i + 1..]),
        None => (input, &[][..]),
    };
    if host.is_empty() {
        // Special URLs need a host; others may have none, but then no port either.
        return (!special && colon.is_none()).then_some(());
    }
    let port_ok = port.iter().all(char::is_ascii_digit)
        && port
            .iter()
            .collect::<String>()
            .parse::<u64>()
            .map_or(port.is_empty(), |p| p <= 65535);
    if !port_ok {
        return None;
    }
    let host: String = host.iter().collect();
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner.strip_suffix(']')?;
        return inner.parse::<std::net::Ipv6Addr>().ok().map(|_| ());
    }
    if !special {
        // An opaque host: only the forbidden host code points fail.
        let forbidden = |c: char| " #/:<>?@[\\]^|\0".contains(c) || c == '\t' || c == '\n';
        return (!host.contains(forbidden)).then_some(());
    }
    let domain = percent_decode(&host)?.to_ascii_lowercase();
    let forbidden = |c: char| c < ' ' || c == '\u{7f}' || " #%/:<>?@[\\]^|".contains(c);
    if domain.is_empty() || domain.contains(forbidden) {
        return None;
    }
    if ends_in_a_number(&domain) {
        return ipv4(&domain);
    }
    Some(())
}

/// Percent-decodes to UTF-8 text; `None` when the bytes are not UTF-8 (the domain step fails).
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(byte) if bytes[i] == b'%' => {
                out.push(byte);
                i += 3;
            }
            _ => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// The standard's test for a host that must then parse as IPv4: its last label (a trailing empty
/// one aside) is all digits or a `0x` hex number.
fn ends_in_a_number(domain: &str) -> bool {
    let mut labels: Vec<&str> = domain.split('.').collect();
    if labels.len() > 1 && labels.last() == Some(&"") {
        labels.pop();
    }
    let last = labels.last().copied().unwrap_or("");
    (!last.is_empty() && last.bytes().all(|b| b.is_ascii_digit())) || ipv4_number(last).is_some()
}

/// One IPv4 part: decimal, `0x` hex or `0` octal. Too large a number saturates (it then fails
/// the range check) rather than failing here, as the standard's unbounded integers do.
fn ipv4_number(part: &str) -> Option<u64> {
    if part.is_empty() {
        return None;
    }
    let (digits, radix) = if let Some(hex) = part.strip_prefix("0x").or(part.strip_prefix("0X")) {
        (hex, 16)
    } else if part.len() > 1 && part.starts_with('0') {
        (&part[1..], 8)
    } else {
        (part, 10)
    };
    digits.chars().try_fold(0u64, |n, c| {
        let digit = c.to_digit(radix)?;
        Some(
            n.saturating_mul(u64::from(radix))
                .saturating_add(u64::from(digit)),
        )
    })
}

fn ipv4(domain: &str) -> Option<()> {
    let mut parts: Vec<&str> = domain.split('.').collect();
    if parts.len() > 1 && parts.last() == Some(&"") {
        parts.pop();
    }
    if parts.len() > 4 {
        return None;
    }
    let numbers: Vec<u64> = parts
        .iter()
        .map(|p| ipv4_number(p))
        .collect::<Option<_>>()?;
    let (last, init) = numbers.split_last()?;
    let fits = init.iter().all(|&n| n <= 255) && *last < 256u64.pow(5 - numbers.len() as u32);
    fits.then_some(())
}

/// After an authority: the path, whose first slash is a separator rather than an empty segment.
fn path_start(input: &[char], special: bool) -> String {
    match input {
        [c, rest @ ..] if is_slash(*c, special) => path(rest, special),
        // Nothing or only a query or fragment: a special URL's path is `/`, another's is empty.
        [] | ['?' | '#', ..] if !special => String::new(),
        _ => path(input, special),
    }
}

/// `file:` URLs: an authority only after two slashes; drive letters are not modelled.
fn file(input: &[char]) -> Option<String> {
    match input {
        [a, b, rest @ ..] if is_slash(*a, true) && is_slash(*b, true) => {
            let end = rest
                .iter()
                .position(|&c| is_slash(c, true) || c == '?' || c == '#')
                .unwrap_or(rest.len());
            let (host, rest) = rest.split_at(end);
            if !host.is_empty() {
                host_and_port(host, true)?;
            }
            Some(path_start(rest, true))
        }
        [a, rest @ ..] if is_slash(*a, true) => Some(path(rest, true)),
        _ => Some(path(input, true)),
    }
}

/// A scheme the standard does not special-case: `\` is data, `//` starts an authority, and a
/// path not starting with `/` is opaque (kept whole, nothing resolved).
fn not_special(input: &[char]) -> Option<String> {
    match input {
        ['/', '/', rest @ ..] => authority(rest, false),
        ['/', rest @ ..] => Some(path(rest, false)),
        _ => {
            let end = input
                .iter()
                .position(|&c| c == '?' || c == '#')
                .unwrap_or(input.len());
            let mut out = String::new();
            for &c in &input[..end] {
                encode(c, &mut out, |c| !(' '..='~').contains(&c));
            }
            Some(out)
        }
    }
}

/// The path state: segments up to `?`, `#` or the end, with `.` and `..` (also spelt with `%2e`
/// in any case) resolved and nothing else decoded.
fn path(input: &[char], special: bool) -> String {
    let mut segments: Vec<String> = Vec::new();
    let mut buffer = String::new();
    let mut chars = input.iter().copied();
    loop {
        let c = chars.next();
        let ends = c.is_none_or(|c| is_slash(c, special) || c == '?' || c == '#');
        if !ends {
            // Node 20's path percent-encode set (a later edition of the standard adds `^`).
            encode(c.unwrap_or_default(), &mut buffer, |c| {
                !(' '..='~').contains(&c) || " \"#<>?`{}".contains(c)
            });
            continue;
        }
        let then_slash = c.is_some_and(|c| is_slash(c, special));
        if is_double_dot(&buffer) {
            segments.pop();
            // `/a/..` ends in a directory: the path keeps its trailing slash.
            if !then_slash {
                segments.push(String::new());
            }
        } else if is_single_dot(&buffer) {
            if !then_slash {
                segments.push(String::new());
            }
        } else {
            segments.push(std::mem::take(&mut buffer));
        }
        buffer.clear();
        if !then_slash {
            break;
        }
    }
    segments.iter().map(|s| format!("/{s}")).collect()
}

/// Appends `c`, UTF-8 percent-encoded when `in_set` says so.
fn encode(c: char, out: &mut String, in_set: impl Fn(char) -> bool) {
    if in_set(c) {
        let mut utf8 = [0u8; 4];
        for byte in c.encode_utf8(&mut utf8).bytes() {
            out.push_str(&format!("%{byte:02X}"));
        }
    } else {
        out.push(c);
    }
}

fn is_single_dot(segment: &str) -> bool {
    segment == "." || segment.eq_ignore_ascii_case("%2e")
}

fn is_double_dot(segment: &str) -> bool {
    matches!(
        segment.to_ascii_lowercase().as_str(),
        ".." | ".%2e" | "%2e." | "%2e%2e"
    )
}
