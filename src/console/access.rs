//! Who may use the admin endpoint: the admin token (everything), the read-only token (reports,
//! the console's pages, `/metrics`, `/explain`, `/bans`, `/robots`), and the console's sessions,
//! which a token typed into its login form opens (an `HttpOnly; SameSite=Strict` cookie,
//! `__Host-` prefixed behind TLS, and a CSRF token that every form that acts must carry).
//! Sign-ins are throttled per address, and sessions are bounded per address, so that nobody can
//! guess tokens quickly nor push another address's session out.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use hmac::Mac;

/// How long a console session lasts.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);

/// Sessions kept at most. When full, the address holding the most loses its oldest one.
const MAX_SESSIONS: usize = 1024;

/// Sessions kept per address (an IPv6 /64 counts as one): signing in again from an address
/// drops that address's oldest session, never another's.
const MAX_SESSIONS_PER_ADDRESS: usize = 16;

/// The session cookie's name over plain HTTP.
pub const SESSION_COOKIE: &str = "robotsguard_session";

/// The session cookie's name when the console is reached over TLS (a proxy in front says
/// `X-Forwarded-Proto: https`): a `__Host-` cookie is `Secure`, has `Path=/` and no `Domain`,
/// so another host of the site can neither set nor shadow it.
pub const SECURE_SESSION_COOKIE: &str = "__Host-robotsguard_session";

/// Failed sign-ins from one address answered at once; each one after waits twice as long as
/// the one before (1 s, 2 s, 4 s, … up to [`MAX_LOGIN_WAIT`]).
const FREE_LOGIN_FAILURES: u32 = 5;

/// The longest wait between two sign-in attempts from one address.
pub const MAX_LOGIN_WAIT: Duration = Duration::from_secs(10 * 60);

/// Addresses whose failed sign-ins are remembered at most; beyond, the one that failed longest
/// ago is forgotten first.
const MAX_LOGIN_ADDRESSES: usize = 4096;

/// Reads an admin token file: its content without surrounding whitespace, at least
/// [`crate::config::MIN_ADMIN_TOKEN_BYTES`] long.
pub fn read_token(path: &Path) -> Result<String, crate::config::SecretFileError> {
    crate::config::read_admin_token(path)
}

/// What a request may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Nothing but `/healthz` and `/readyz`.
    None,
    /// Read: reports, pages, metrics, explain, bans, robots.txt copies.
    Read,
    /// Everything, including lifting bans and refreshing robots.txt.
    Admin,
}

/// A token, re-read when its file changes (a Kubernetes Secret rotates in place).
struct TokenFile {
    path: PathBuf,
    cached: Mutex<Option<(SystemTime, String)>>,
}

impl TokenFile {
    fn new(path: PathBuf) -> TokenFile {
        TokenFile {
            path,
            cached: Mutex::new(None),
        }
    }

    /// The token in force; `None` when the file cannot be read now, or holds a token too short
    /// to use (then nobody is admitted with it).
    fn current(&self) -> Option<String> {
        let modified = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok();
        let mut cached = self
            .cached
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let (Some(modified), Some((seen, token))) = (modified, cached.as_ref()) {
            if *seen == modified {
                return Some(token.clone());
            }
        }
        match read_token(&self.path) {
            Ok(token) => {
                *cached = modified.map(|m| (m, token.clone()));
                Some(token)
            }
            Err(e) => {
                tracing::warn!(
                    "admin token: {e}; requests with it are refused until it is readable"
                );
                *cached = None;
                None
            }
        }
    }

    /// Whether `given` is the token. Compared in constant time.
    fn is(&self, given: &[u8]) -> bool {
        self.current()
            .is_some_and(|token| constant_time_eq(given, token.as_bytes()))
    }
}

/// Byte equality whose time does not depend on where the inputs differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// A console session.
#[derive(Debug, Clone)]
pub struct Session {
    /// What it may do.
    pub level: Level,
    /// The token every form that acts must carry.
    pub csrf: String,
    ends: Instant,
}

/// A session kept for a token holder, with the address that opened it.
struct Kept {
    session: Session,
    from: AddressKey,
}

/// An address as throttles and bounds count it: an IPv4 address, or an IPv6 /64 (one host
/// holds a whole /64); unknown addresses count as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressKey {
    /// An IPv4 address.
    V4(u32),
    /// The first 64 bits of an IPv6 address.
    V6(u64),
    /// No address known.
    Unknown,
}

impl AddressKey {
    /// The key of `address` (an IPv4-mapped IPv6 address is the IPv4 one).
    pub fn of(address: Option<IpAddr>) -> AddressKey {
        match address.map(|a| a.to_canonical()) {
            Some(IpAddr::V4(v4)) => AddressKey::V4(u32::from(v4)),
            Some(IpAddr::V6(v6)) => AddressKey::V6((u128::from(v6) >> 64) as u64),
            None => AddressKey::Unknown,
        }
    }
}

/// Failed sign-ins from one address.
#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
}

impl Failures {
    /// When the next attempt will be checked.
    fn next_at(&self) -> Instant {
        self.last + login_wait(self.count)
    }
}

/// How long an address waits after `failures` failed sign-ins in a row.
fn login_wait(failures: u32) -> Duration {
    match failures.checked_sub(FREE_LOGIN_FAILURES) {
        None => Duration::ZERO,
        Some(doublings) => Duration::from_secs(1u64 << doublings.min(20)).min(MAX_LOGIN_WAIT),
    }
}

/// The admin endpoint's tokens and the console's sessions.
pub struct Access {
    admin: Option<TokenFile>,
    read: Option<TokenFile>,
    /// The admin listener is on a loopback address: without tokens, the console is open there
    /// only.
    loopback: bool,
    sessions: Mutex<HashMap<String, Kept>>,
    /// The open console's CSRF tokens are this key's HMAC of the session cookie: the open
    /// console keeps nothing per browser, so no number of page loads can push a session out.
    open_key: [u8; 32],
    logins: Mutex<HashMap<AddressKey, Failures>>,
}

impl Access {
    /// Access as `admin.token_file` and `admin.read_token_file` say, on `address`.
    pub fn new(admin: Option<PathBuf>, read: Option<PathBuf>, address: SocketAddr) -> Access {
        let mut open_key = [0u8; 32];
        if getrandom::fill(&mut open_key).is_err() {
            // Without randomness the open console has no CSRF key, so no form of it is accepted
            // (`open_csrf` gives nothing): say why once.
            tracing::warn!(
                "no random numbers from the system: the open console's forms are refused"
            );
            open_key = [0u8; 32];
        }
        Access {
            admin: admin.map(TokenFile::new),
            read: read.map(TokenFile::new),
            loopback: address.ip().is_loopback(),
            sessions: Mutex::new(HashMap::new()),
            open_key,
            logins: Mutex::new(HashMap::new()),
        }
    }

    /// Whether any token is configured (without one, the API is open, as the admin listener
    /// must then be private).
    pub fn has_tokens(&self) -> bool {
        self.admin.is_some() || self.read.is_some()
    }

    /// Whether the console may be served without a login: no token is configured and the admin
    /// listener is on loopback.
    pub fn console_open(&self) -> bool {
        !self.has_tokens() && self.loopback
    }

    /// The level a token gives.
    pub fn level_of_token(&self, token: &[u8]) -> Level {
        if self.admin.as_ref().is_some_and(|file| file.is(token)) {
            Level::Admin
        } else if self.read.as_ref().is_some_and(|file| file.is(token)) {
            Level::Read
        } else {
            Level::None
        }
    }

    /// The level of an API request: everything without tokens, else what its bearer token (or
    /// its console session) gives.
    pub fn level(&self, request: &pingora::http::RequestHeader) -> Level {
        if !self.has_tokens() {
            return Level::Admin;
        }
        let by_token = bearer(request).map_or(Level::None, |token| self.level_of_token(token));
        let by_session = self.session(request).map_or(Level::None, |s| s.level);
        by_token.max(by_session)
    }

    /// The console session of a request, when its cookie names a live one. Without tokens on
    /// a loopback listener, every browser has an admin session of its own, which nothing is
    /// kept for: its CSRF token is derived from its cookie.
    pub fn session(&self, request: &pingora::http::RequestHeader) -> Option<Session> {
        let id = session_cookie(request)?;
        if self.console_open() {
            return self.open_session_of(&id);
        }
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        match sessions.get(&id) {
            Some(kept) if kept.session.ends > now => Some(kept.session.clone()),
            Some(_) => {
                sessions.remove(&id);
                None
            }
            None => None,
        }
    }

    /// The open console's session for the cookie `id`.
    fn open_session_of(&self, id: &str) -> Option<Session> {
        Some(Session {
            level: Level::Admin,
            csrf: self.open_csrf(id)?,
            ends: Instant::now() + SESSION_LIFETIME,
        })
    }

    /// The open console's CSRF token for the cookie `id`: HMAC-SHA-256 under this process's
    /// key, as hex.
    fn open_csrf(&self, id: &str) -> Option<String> {
        if self.open_key == [0u8; 32] {
            return None;
        }
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&self.open_key).ok()?;
        mac.update(id.as_bytes());
        Some(hex(&mac.finalize().into_bytes()))
    }

    /// Opens a session of `level` for a browser at `from`: its id (for the cookie) and the
    /// session. A token holder's session is kept (at most 16 per
    /// address: the address's own oldest goes first); the open console keeps none.
    pub fn open_session(&self, level: Level, from: Option<IpAddr>) -> Option<(String, Session)> {
        let id = random_token()?;
        if self.console_open() {
            let session = self.open_session_of(&id)?;
            return Some((id, session));
        }
        let session = Session {
            level,
            csrf: random_token()?,
            ends: Instant::now() + SESSION_LIFETIME,
        };
        let from = AddressKey::of(from);
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        sessions.retain(|_, kept| kept.session.ends > now);
        let mine = sessions.values().filter(|kept| kept.from == from).count();
        let crowded = if mine >= MAX_SESSIONS_PER_ADDRESS {
            Some(from)
        } else if sessions.len() >= MAX_SESSIONS {
            // Full: the address holding the most gives one up, never one holding a few; among
            // addresses holding as many, the one that signed in last, so that a run of sign-ins
            // from many addresses never ends a session that was there before it.
            let mut counts: HashMap<AddressKey, (usize, Instant)> = HashMap::new();
            for kept in sessions.values() {
                let entry = counts.entry(kept.from).or_insert((0, kept.session.ends));
                entry.0 += 1;
                entry.1 = entry.1.max(kept.session.ends);
            }
            counts
                .into_iter()
                .max_by_key(|(_, held)| *held)
                .map(|(key, _)| key)
        } else {
            None
        };
        if let Some(crowded) = crowded {
            let oldest = sessions
                .iter()
                .filter(|(_, kept)| kept.from == crowded)
                .min_by_key(|(_, kept)| kept.session.ends)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                sessions.remove(&oldest);
            }
        }
        sessions.insert(
            id.clone(),
            Kept {
                session: session.clone(),
                from,
            },
        );
        Some((id, session))
    }

    /// Ends the session `id`.
    pub fn close_session(&self, id: &str) {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }

    /// How long a sign-in from `from` must still wait before its token is checked (`None`:
    /// it is checked now).
    pub fn login_wait(&self, from: Option<IpAddr>) -> Option<Duration> {
        let logins = self.logins.lock().unwrap_or_else(|p| p.into_inner());
        let next = logins.get(&AddressKey::of(from))?.next_at();
        next.checked_duration_since(Instant::now())
            .filter(|wait| !wait.is_zero())
    }

    /// Records a failed sign-in from `from`; returns how long the next attempt must wait.
    pub fn login_failed(&self, from: Option<IpAddr>) -> Duration {
        let key = AddressKey::of(from);
        let now = Instant::now();
        let mut logins = self.logins.lock().unwrap_or_else(|p| p.into_inner());
        if !logins.contains_key(&key) && logins.len() >= MAX_LOGIN_ADDRESSES {
            // Addresses whose wait has run out long ago first, then the one that failed
            // longest ago.
            logins.retain(|_, failures| failures.next_at() + MAX_LOGIN_WAIT > now);
            if logins.len() >= MAX_LOGIN_ADDRESSES {
                if let Some(oldest) = logins
                    .iter()
                    .min_by_key(|(_, failures)| failures.last)
                    .map(|(key, _)| *key)
                {
                    logins.remove(&oldest);
                }
            }
        }
        let failures = logins.entry(key).or_insert(Failures {
            count: 0,
            last: now,
        });
        // A wait long over starts the count again (a typo a day later is not a guess).
        if failures.count > 0 && failures.next_at() + MAX_LOGIN_WAIT <= now {
            failures.count = 0;
        }
        failures.count = failures.count.saturating_add(1);
        failures.last = now;
        login_wait(failures.count)
    }

    /// Forgets the failed sign-ins of `from` (it signed in).
    pub fn login_succeeded(&self, from: Option<IpAddr>) {
        self.logins
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&AddressKey::of(from));
    }
}

/// The bearer token of a request, when it carries one.
pub fn bearer(request: &pingora::http::RequestHeader) -> Option<&[u8]> {
    request
        .headers
        .get(http::header::AUTHORIZATION)
        .map(http::HeaderValue::as_bytes)
        .and_then(|value| {
            value
                .get(..7)
                .filter(|scheme| scheme.eq_ignore_ascii_case(b"bearer "))
                .map(|_| value[7..].trim_ascii())
        })
}

/// Whether the request reached the admin listener through TLS ended by a proxy in front
/// (`X-Forwarded-Proto: https`): the session cookie is then `Secure` and `__Host-` prefixed.
pub fn over_tls(request: &pingora::http::RequestHeader) -> bool {
    request
        .headers
        .get("x-forwarded-proto")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"))
}

/// The name of the session cookie for a request ([`SECURE_SESSION_COOKIE`] over TLS).
pub fn session_cookie_name(request: &pingora::http::RequestHeader) -> &'static str {
    if over_tls(request) {
        SECURE_SESSION_COOKIE
    } else {
        SESSION_COOKIE
    }
}

/// The session id in the request's cookies: over TLS only the `__Host-` cookie counts (a plain
/// one may have been set by another host of the site).
pub fn session_cookie(request: &pingora::http::RequestHeader) -> Option<String> {
    let name = session_cookie_name(request);
    request
        .headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(cookie, _)| *cookie == name)
        .map(|(_, value)| value.to_string())
        .filter(|value| value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// 32 random bytes as hex, from the operating system's generator.
fn random_token() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(hex(&bytes))
}

/// Whether two CSRF tokens are the same, in constant time.
pub fn csrf_matches(expected: &str, given: &str) -> bool {
    !expected.is_empty() && constant_time_eq(expected.as_bytes(), given.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(cookie: Option<&str>, bearer: Option<&str>) -> pingora::http::RequestHeader {
        let mut request =
            pingora::http::RequestHeader::build("GET", b"/ui/", None).expect("a request");
        if let Some(cookie) = cookie {
            request.insert_header("cookie", cookie).expect("a header");
        }
        if let Some(token) = bearer {
            request
                .insert_header("authorization", format!("Bearer {token}"))
                .expect("a header");
        }
        request
    }

    const ADMIN_TOKEN: &str = "admin-secret-0123456789";
    const READ_TOKEN: &str = "read-secret-0123456789";

    fn with_tokens(dir: &tempfile::TempDir) -> Access {
        let admin = dir.path().join("admin");
        let read = dir.path().join("read");
        std::fs::write(&admin, format!("{ADMIN_TOKEN}\n")).expect("written");
        std::fs::write(&read, READ_TOKEN).expect("written");
        Access::new(
            Some(admin),
            Some(read),
            "0.0.0.0:9090".parse().expect("an address"),
        )
    }

    #[test]
    fn tokens_give_their_level_and_sessions_carry_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let access = with_tokens(&dir);
        assert!(!access.console_open());
        assert_eq!(
            access.level(&request(None, Some(ADMIN_TOKEN))),
            Level::Admin
        );
        assert_eq!(access.level(&request(None, Some(READ_TOKEN))), Level::Read);
        assert_eq!(access.level(&request(None, Some("wrong"))), Level::None);
        assert_eq!(access.level(&request(None, None)), Level::None);
        let (id, session) = access.open_session(Level::Read, None).expect("a session");
        let cookie = format!("other=1; {SESSION_COOKIE}={id}");
        assert_eq!(access.level(&request(Some(&cookie), None)), Level::Read);
        assert_eq!(
            access
                .session(&request(Some(&cookie), None))
                .map(|s| s.csrf),
            Some(session.csrf.clone())
        );
        access.close_session(&id);
        assert_eq!(access.level(&request(Some(&cookie), None)), Level::None);
        assert!(csrf_matches(&session.csrf, &session.csrf));
        assert!(!csrf_matches(&session.csrf, "x"));
        assert!(!csrf_matches("", ""), "no session, no form");
    }

    #[test]
    fn a_short_token_admits_nobody() {
        let dir = tempfile::tempdir().expect("temp dir");
        let admin = dir.path().join("admin");
        std::fs::write(&admin, "short").expect("written");
        let access = Access::new(Some(admin), None, "0.0.0.0:9090".parse().expect("address"));
        assert_eq!(access.level(&request(None, Some("short"))), Level::None);
    }

    #[test]
    fn without_tokens_the_api_is_open_and_the_console_only_on_loopback() {
        let open = Access::new(None, None, "127.0.0.1:9090".parse().expect("an address"));
        assert!(open.console_open());
        assert_eq!(open.level(&request(None, None)), Level::Admin);
        let wide = Access::new(None, None, "0.0.0.0:9090".parse().expect("an address"));
        assert!(!wide.console_open());
    }

    #[test]
    fn the_open_console_keeps_no_session_so_page_loads_evict_nothing() {
        let open = Access::new(None, None, "127.0.0.1:9090".parse().expect("an address"));
        let (id, session) = open.open_session(Level::Admin, None).expect("a session");
        for _ in 0..(MAX_SESSIONS + 100) {
            open.open_session(Level::Admin, None).expect("a session");
        }
        let cookie = format!("{SESSION_COOKIE}={id}");
        let again = open.session(&request(Some(&cookie), None)).expect("live");
        assert_eq!(again.csrf, session.csrf);
        assert!(open.sessions.lock().expect("lock").is_empty());
        // Another cookie has another token.
        let (_, other) = open.open_session(Level::Admin, None).expect("a session");
        assert_ne!(other.csrf, session.csrf);
    }

    #[test]
    fn sessions_are_bounded_per_address_and_others_keep_theirs() {
        let dir = tempfile::tempdir().expect("temp dir");
        let access = with_tokens(&dir);
        let operator: IpAddr = "192.0.2.1".parse().expect("an address");
        let (mine, _) = access
            .open_session(Level::Admin, Some(operator))
            .expect("a session");
        let cookie = format!("{SESSION_COOKIE}={mine}");
        // Another address signing in over and over, and many addresses: the operator's stays.
        let other: IpAddr = "192.0.2.2".parse().expect("an address");
        for _ in 0..(MAX_SESSIONS * 2) {
            access
                .open_session(Level::Read, Some(other))
                .expect("a session");
        }
        for i in 0..(MAX_SESSIONS as u32 * 2) {
            let many = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            access
                .open_session(Level::Read, Some(many))
                .expect("a session");
        }
        assert!(access.session(&request(Some(&cookie), None)).is_some());
        let kept = access.sessions.lock().expect("lock");
        assert!(kept.len() <= MAX_SESSIONS);
        let from_other = kept
            .values()
            .filter(|k| k.from == AddressKey::of(Some(other)))
            .count();
        assert!(from_other <= MAX_SESSIONS_PER_ADDRESS, "{from_other}");
    }

    #[test]
    fn failed_sign_ins_wait_twice_as_long_each_time_per_address() {
        let access = Access::new(None, None, "0.0.0.0:9090".parse().expect("an address"));
        let guesser: IpAddr = "2001:db8::1".parse().expect("an address");
        let neighbour: IpAddr = "2001:db8::2".parse().expect("an address");
        let elsewhere: IpAddr = "2001:db8:1::1".parse().expect("an address");
        for _ in 0..FREE_LOGIN_FAILURES - 1 {
            assert_eq!(access.login_failed(Some(guesser)), Duration::ZERO);
            assert_eq!(access.login_wait(Some(guesser)), None);
        }
        let waits: Vec<Duration> = (0..4).map(|_| access.login_failed(Some(guesser))).collect();
        assert_eq!(
            waits,
            [1, 2, 4, 8].map(Duration::from_secs),
            "exponential backoff"
        );
        assert!(access.login_wait(Some(guesser)).is_some());
        assert!(access.login_wait(Some(neighbour)).is_some(), "one /64");
        assert_eq!(access.login_wait(Some(elsewhere)), None);
        for _ in 0..64 {
            access.login_failed(Some(guesser));
        }
        assert_eq!(login_wait(u32::MAX), MAX_LOGIN_WAIT);
        assert!(access.login_wait(Some(guesser)) <= Some(MAX_LOGIN_WAIT));
        access.login_succeeded(Some(guesser));
        assert_eq!(access.login_wait(Some(guesser)), None);
        // Bounded: a flood of addresses keeps at most MAX_LOGIN_ADDRESSES.
        for i in 0..(MAX_LOGIN_ADDRESSES as u32 + 100) {
            access.login_failed(Some(IpAddr::from(std::net::Ipv4Addr::from(i))));
        }
        assert!(access.logins.lock().expect("lock").len() <= MAX_LOGIN_ADDRESSES);
    }

    #[test]
    fn over_tls_only_the_host_prefixed_cookie_counts() {
        let id = "a".repeat(64);
        let mut secure = request(Some(&format!("{SESSION_COOKIE}={id}")), None);
        secure
            .insert_header("x-forwarded-proto", "https")
            .expect("a header");
        assert_eq!(session_cookie(&secure), None);
        let mut prefixed = request(Some(&format!("{SECURE_SESSION_COOKIE}={id}")), None);
        prefixed
            .insert_header("x-forwarded-proto", "https")
            .expect("a header");
        assert_eq!(session_cookie(&prefixed), Some(id.clone()));
        let plain = request(Some(&format!("{SESSION_COOKIE}={id}")), None);
        assert_eq!(session_cookie(&plain), Some(id));
    }
}
