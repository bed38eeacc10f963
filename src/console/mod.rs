//! The operator's console on the admin listener: the reports as JSON and CSV (`/reports/*`) and
//! as server-rendered pages (`/ui/`) that read without JavaScript, with every asset inside the
//! binary and a strict Content-Security-Policy.

pub mod access;
mod api;
mod chart;
pub mod checks;
mod html;
mod pages;
pub(crate) mod preview;
mod preview_page;
pub mod throttle;

use std::sync::Arc;

use http::Response;
use pingora::protocols::http::ServerSession;

use crate::reports::Reports;
use crate::snapshot::Live;
use crate::store::Store;
use crate::verify::Verifier;
use access::{Access, Level};

/// Bytes of a form body read at most (a login token or a lift button's fields).
const MAX_FORM_BYTES: usize = 16 * 1024;

/// What the console reads and acts on.
pub struct Console {
    /// Tokens and sessions.
    pub access: Arc<Access>,
    pub(crate) live: Arc<Live>,
    pub(crate) store: Arc<Store>,
    pub(crate) verifier: Arc<Verifier>,
    pub(crate) reports: Arc<Reports>,
    /// What `/explain` lookups and robots.txt refreshes on demand may cost.
    pub(crate) throttles: Arc<throttle::Throttles>,
}

/// The parts of a request the console reads.
pub(crate) struct Asked {
    pub method: http::Method,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub form: Vec<(String, String)>,
    /// The session cookie's session, when there is one, and its id.
    pub session: Option<access::Session>,
    pub session_id: Option<String>,
    /// The level the request has (token or session).
    pub level: Level,
    /// The request came over TLS to a proxy in front (`X-Forwarded-Proto: https`): the
    /// session cookie is `Secure` and `__Host-` prefixed.
    pub secure: bool,
    /// The admin client's address (sign-ins are throttled and sessions bounded by it).
    pub client: Option<std::net::IpAddr>,
}

impl Asked {
    /// The first value of `name` in the query.
    pub fn param(&self, name: &str) -> Option<&str> {
        first(&self.query, name)
    }

    /// The first value of `name` in the form body.
    pub fn field(&self, name: &str) -> Option<&str> {
        first(&self.form, name)
    }
}

fn first<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

/// `key=value&...` with `+` and `%xx` decoded.
pub(crate) fn query_params(query: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

impl Console {
    /// Whether `path` is the console's (`/ui`, `/ui/…`, `/reports/…`).
    pub fn serves(path: &str) -> bool {
        path == "/ui" || path.starts_with("/ui/") || path.starts_with("/reports/")
    }

    /// Answers a console request from `client` (the admin listener's peer). A form that acts
    /// has passed the admin listener's `Host` and cross-site checks already
    /// ([`checks`]); its CSRF token is checked here.
    pub async fn respond(
        &self,
        session: &mut ServerSession,
        client: Option<std::net::IpAddr>,
    ) -> Response<Vec<u8>> {
        let request = session.req_header();
        let method = request.method.clone();
        let path = request.uri.path().to_string();
        let query = query_params(request.uri.query().unwrap_or(""));
        let level = self.access.level(request);
        let console_session = self.access.session(request);
        let session_id = access::session_cookie(request);
        let secure = access::over_tls(request);
        let form = if method == http::Method::POST {
            // A pasted robots.txt may be as large as the engine reads (form-encoded, larger).
            let limit = if path == "/ui/preview" {
                crate::preview::body::MAX_BODY_BYTES * 2
            } else {
                MAX_FORM_BYTES
            };
            match read_form(session, limit).await {
                Some(form) => form,
                None => return html::text(413, "the form is too large\n"),
            }
        } else {
            Vec::new()
        };
        let asked = Asked {
            method,
            path,
            query,
            form,
            session: console_session,
            session_id,
            level,
            secure,
            client,
        };
        if asked.path.starts_with("/reports/") {
            if asked.method != http::Method::GET && asked.method != http::Method::HEAD {
                return html::with_allow(html::text(405, "only GET and HEAD\n"), "GET, HEAD");
            }
            if asked.level < Level::Read {
                return html::unauthorized();
            }
            return api::respond(self, &asked).await;
        }
        pages::respond(self, &asked).await
    }
}

/// A form body (`application/x-www-form-urlencoded`), at most `limit` bytes ([`MAX_FORM_BYTES`]
/// but for the preview's pasted robots.txt); `None` when
/// it is larger.
async fn read_form(session: &mut ServerSession, limit: usize) -> Option<Vec<(String, String)>> {
    let mut body = Vec::new();
    for _ in 0..1024 {
        match session.read_request_body().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > limit {
                    return None;
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) | Err(_) => break,
        }
    }
    Some(
        form_urlencoded::parse(&body)
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect(),
    )
}
