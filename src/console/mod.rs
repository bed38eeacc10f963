//! The operator's console on the admin listener: the reports as JSON and CSV (`/reports/*`) and
//! as server-rendered pages (`/ui/`) that read without JavaScript, with every asset inside the
//! binary and a strict Content-Security-Policy.

pub mod access;
mod api;
mod chart;
mod html;
mod pages;

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
    /// The request came over TLS to a proxy in front (`X-Forwarded-Proto: https`): cookies
    /// are `Secure`.
    pub secure: bool,
    /// The `Origin` header of a form post agrees with the Host (or is absent).
    pub same_origin: bool,
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

    /// Answers a console request.
    pub async fn respond(&self, session: &mut ServerSession) -> Response<Vec<u8>> {
        let request = session.req_header();
        let method = request.method.clone();
        let path = request.uri.path().to_string();
        let query = query_params(request.uri.query().unwrap_or(""));
        let level = self.access.level(request);
        let console_session = self.access.session(request);
        let session_id = access::session_cookie(request);
        let secure = request
            .headers
            .get("x-forwarded-proto")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"));
        let same_origin = same_origin(request);
        let form = if method == http::Method::POST {
            match read_form(session).await {
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
            same_origin,
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

/// Whether a request's `Origin` (when it sends one) names the host it was sent to: a form
/// posted from another site is refused even before its CSRF token is checked.
fn same_origin(request: &pingora::http::RequestHeader) -> bool {
    let Some(origin) = request.headers.get(http::header::ORIGIN) else {
        return true;
    };
    let host = request
        .headers
        .get(http::header::HOST)
        .map(http::HeaderValue::as_bytes)
        .or_else(|| request.uri.authority().map(|a| a.as_str().as_bytes()));
    let Some(host) = host else {
        return false;
    };
    let origin = origin.as_bytes();
    let after_scheme = origin
        .strip_prefix(b"http://")
        .or_else(|| origin.strip_prefix(b"https://"));
    after_scheme.is_some_and(|authority| authority.eq_ignore_ascii_case(host))
}

/// A form body (`application/x-www-form-urlencoded`), at most [`MAX_FORM_BYTES`]; `None` when
/// it is larger.
async fn read_form(session: &mut ServerSession) -> Option<Vec<(String, String)>> {
    let mut body = Vec::new();
    for _ in 0..1024 {
        match session.read_request_body().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MAX_FORM_BYTES {
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
