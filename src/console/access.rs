//! Who may use the admin endpoint: the admin token (everything), the read-only token (reports,
//! the console's pages, `/metrics`, `/explain`, `/bans`, `/robots`), and the console's sessions,
//! which a token typed into its login form opens (an `HttpOnly; SameSite=Strict` cookie, and a
//! CSRF token that every form that acts must carry).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// Longest admin token accepted from a file (a secret, not a document).
const MAX_TOKEN_BYTES: u64 = 4096;

/// How long a console session lasts.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);

/// Sessions kept at most: logging in again and again drops the oldest.
const MAX_SESSIONS: usize = 1024;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "robotsguard_session";

/// Reads an admin token file: its content without surrounding whitespace, which must not be
/// empty.
pub fn read_token(path: &Path) -> Result<String, crate::config::SecretFileError> {
    crate::config::read_secret_file(path, MAX_TOKEN_BYTES)
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

    /// The token in force; `None` when the file cannot be read now (then nobody is admitted
    /// with it).
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

/// The admin endpoint's tokens and the console's sessions.
pub struct Access {
    admin: Option<TokenFile>,
    read: Option<TokenFile>,
    /// The admin listener is on a loopback address: without tokens, the console is open there
    /// only.
    loopback: bool,
    sessions: Mutex<HashMap<String, Session>>,
}

impl Access {
    /// Access as `admin.token_file` and `admin.read_token_file` say, on `address`.
    pub fn new(admin: Option<PathBuf>, read: Option<PathBuf>, address: SocketAddr) -> Access {
        Access {
            admin: admin.map(TokenFile::new),
            read: read.map(TokenFile::new),
            loopback: address.ip().is_loopback(),
            sessions: Mutex::new(HashMap::new()),
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
        let bearer = request
            .headers
            .get(http::header::AUTHORIZATION)
            .map(http::HeaderValue::as_bytes)
            .and_then(|value| {
                value
                    .get(..7)
                    .filter(|scheme| scheme.eq_ignore_ascii_case(b"bearer "))
                    .map(|_| value[7..].trim_ascii())
            });
        let by_token = bearer.map_or(Level::None, |token| self.level_of_token(token));
        let by_session = self.session(request).map_or(Level::None, |s| s.level);
        by_token.max(by_session)
    }

    /// The console session of a request, when its cookie names a live one. Without tokens on
    /// a loopback listener, every request has an admin session of its own (the CSRF token still
    /// binds forms to the page that served them: it is the session cookie's).
    pub fn session(&self, request: &pingora::http::RequestHeader) -> Option<Session> {
        let id = session_cookie(request)?;
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        match sessions.get(&id) {
            Some(session) if session.ends > now => Some(session.clone()),
            Some(_) => {
                sessions.remove(&id);
                None
            }
            None => None,
        }
    }

    /// Opens a session of `level`: its id (for the cookie) and the session.
    pub fn open_session(&self, level: Level) -> Option<(String, Session)> {
        let id = random_token()?;
        let session = Session {
            level,
            csrf: random_token()?,
            ends: Instant::now() + SESSION_LIFETIME,
        };
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        sessions.retain(|_, s| s.ends > now);
        if sessions.len() >= MAX_SESSIONS {
            if let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, s)| s.ends)
                .map(|(id, _)| id.clone())
            {
                sessions.remove(&oldest);
            }
        }
        sessions.insert(id.clone(), session.clone());
        Some((id, session))
    }

    /// Ends the session `id`.
    pub fn close_session(&self, id: &str) {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }
}

/// The session id in the request's cookies.
pub fn session_cookie(request: &pingora::http::RequestHeader) -> Option<String> {
    request
        .headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.to_string())
        .filter(|value| value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// 32 random bytes as hex, from the operating system's generator.
fn random_token() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
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

    #[test]
    fn tokens_give_their_level_and_sessions_carry_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let admin = dir.path().join("admin");
        let read = dir.path().join("read");
        std::fs::write(&admin, "admin-secret\n").expect("written");
        std::fs::write(&read, "read-secret").expect("written");
        let access = Access::new(
            Some(admin),
            Some(read),
            "0.0.0.0:9090".parse().expect("an address"),
        );
        assert!(!access.console_open());
        assert_eq!(
            access.level(&request(None, Some("admin-secret"))),
            Level::Admin
        );
        assert_eq!(
            access.level(&request(None, Some("read-secret"))),
            Level::Read
        );
        assert_eq!(access.level(&request(None, Some("wrong"))), Level::None);
        assert_eq!(access.level(&request(None, None)), Level::None);
        let (id, session) = access.open_session(Level::Read).expect("a session");
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
    fn without_tokens_the_api_is_open_and_the_console_only_on_loopback() {
        let open = Access::new(None, None, "127.0.0.1:9090".parse().expect("an address"));
        assert!(open.console_open());
        assert_eq!(open.level(&request(None, None)), Level::Admin);
        let wide = Access::new(None, None, "0.0.0.0:9090".parse().expect("an address"));
        assert!(!wide.console_open());
    }
}
