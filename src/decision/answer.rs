//! The decision listener's answers, in each caller's convention: what forward-auth callers copy
//! to the client as is, what nginx's `auth_request` can pass (401 and 403 only), and the answers
//! nginx fetches back for the client (the named-location recipe).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue, Response};
use parking_lot::Mutex;

/// The judged request's outcome, as every convention needs it.
pub(super) struct Answer {
    /// The status the proxy would have answered with; `200` when it would have proxied.
    pub status: u16,
    /// The proxy's body for a refusal; empty when allowed.
    pub body: String,
    /// The one header a refusal carries (`Retry-After`, `Link`, `Accept-Signature`).
    pub extra: Option<(HeaderName, String)>,
    /// The access log's decision word (`pass`, `blocked`, ...; `error` for `on_error`).
    pub decision: &'static str,
    /// The crawler's catalogue name; empty for none.
    pub crawler: String,
    /// `verified`, `unverified`, `impostor` or `none`.
    pub verified: &'static str,
    /// The `Content-Usage` a proxied response would carry (`content_signals.header`).
    pub content_usage: Option<String>,
}

const DECISION: HeaderName = HeaderName::from_static("x-robotsguard-decision");
const CRAWLER: HeaderName = HeaderName::from_static("x-robotsguard-crawler");
const VERIFIED: HeaderName = HeaderName::from_static("x-robotsguard-verified");
const STATUS: HeaderName = HeaderName::from_static("x-robotsguard-status");
const RETRY_AFTER: HeaderName = HeaderName::from_static("x-robotsguard-retry-after");
const LINK: HeaderName = HeaderName::from_static("x-robotsguard-link");
const ACCEPT_SIGNATURE: HeaderName = HeaderName::from_static("x-robotsguard-accept-signature");
const ANSWER: HeaderName = HeaderName::from_static("x-robotsguard-answer");

/// A plain-text answer with `status`, `body` and `headers`, as the proxy writes its own.
pub(super) fn plain(
    status: u16,
    body: impl Into<Vec<u8>>,
    headers: Vec<(HeaderName, String)>,
) -> Response<Vec<u8>> {
    let mut response = Response::new(body.into());
    *response.status_mut() =
        http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    let map = response.headers_mut();
    if !response_is_empty(status) {
        map.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
    }
    map.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    for (name, value) in headers {
        // Values are ours (numbers, catalogue names, URLs from the config); one that is not a
        // valid header value is left out rather than failing the answer.
        if let Ok(value) = HeaderValue::from_str(&value) {
            map.append(name, value);
        }
    }
    let length = response.body().len();
    response
        .headers_mut()
        .insert(http::header::CONTENT_LENGTH, HeaderValue::from(length));
    response
}

fn response_is_empty(status: u16) -> bool {
    status == 204 || status == 304
}

impl Answer {
    fn identity(&self) -> Vec<(HeaderName, String)> {
        vec![
            (DECISION, self.decision.to_string()),
            (CRAWLER, self.crawler.clone()),
            (VERIFIED, self.verified.to_string()),
        ]
    }

    /// Allowed requests get `200`, an empty body and the headers a front proxy copies upstream.
    fn allowed(&self) -> Option<Response<Vec<u8>>> {
        (self.status == 200).then(|| {
            let mut headers = self.identity();
            if let Some(usage) = &self.content_usage {
                headers.push((HeaderName::from_static("content-usage"), usage.clone()));
            }
            plain(200, String::new(), headers)
        })
    }

    /// Forward-auth (`/auth`) and Envoy HTTP: a refusal is the proxy's status, body and header,
    /// which the caller copies to the client as is.
    pub(super) fn passed_through(self) -> Response<Vec<u8>> {
        if let Some(allowed) = self.allowed() {
            return allowed;
        }
        let mut headers = self.identity();
        headers.extend(self.extra);
        plain(self.status, self.body, headers)
    }

    /// `/auth/nginx`: `auth_request` passes only 401 and 403, so every refusal is a 403 with the
    /// real status and headers in `X-Robotsguard-*`; `X-Robotsguard-Answer` names the whole
    /// answer, kept in `kept` for nginx to fetch back for the client.
    pub(super) fn for_nginx(self, kept: &KeptAnswers) -> Response<Vec<u8>> {
        if let Some(allowed) = self.allowed() {
            return allowed;
        }
        let mut headers = self.identity();
        headers.push((STATUS, self.status.to_string()));
        if let Some((name, value)) = &self.extra {
            let named = if *name == http::header::RETRY_AFTER {
                RETRY_AFTER
            } else if *name == http::header::LINK {
                LINK
            } else {
                ACCEPT_SIGNATURE
            };
            headers.push((named, value.clone()));
        }
        let mut whole = self.identity();
        whole.extend(self.extra.clone());
        if let Some(token) = kept.keep(self.status, self.body.clone(), whole) {
            headers.push((ANSWER, token));
        }
        plain(403, self.body, headers)
    }
}

/// How long a refusal's answer is kept for nginx to fetch, and how many are kept: nginx fetches
/// it within the same client request, so a few seconds is plenty; the count bounds memory
/// (bodies are a few hundred bytes) whatever the request rate.
const KEEP_FOR: Duration = Duration::from_secs(10);
const MAX_KEPT: usize = 4096;

struct Kept {
    at: Instant,
    status: u16,
    body: String,
    headers: Vec<(HeaderName, String)>,
}

/// Refusals given to nginx, by random token, each fetched at most once.
#[derive(Default)]
pub(super) struct KeptAnswers {
    answers: Mutex<(HashMap<u128, Kept>, VecDeque<u128>)>,
}

impl KeptAnswers {
    fn keep(
        &self,
        status: u16,
        body: String,
        headers: Vec<(HeaderName, String)>,
    ) -> Option<String> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).ok()?;
        let token = u128::from_le_bytes(bytes);
        let mut guard = self.answers.lock();
        let (answers, order) = &mut *guard;
        let now = Instant::now();
        // Oldest first: drop what expired, then the oldest while full.
        while let Some(oldest) = order.front().copied() {
            let expired = answers
                .get(&oldest)
                .is_none_or(|kept| now.duration_since(kept.at) > KEEP_FOR);
            // Taken answers leave their tokens here until they reach the front: bounded too.
            if !expired && answers.len() < MAX_KEPT && order.len() < 2 * MAX_KEPT {
                break;
            }
            order.pop_front();
            answers.remove(&oldest);
        }
        answers.insert(
            token,
            Kept {
                at: now,
                status,
                body,
                headers,
            },
        );
        order.push_back(token);
        Some(format!("{token:032x}"))
    }

    /// `GET /auth/nginx/answer/TOKEN`: the refusal as the proxy would have sent it, once; `404`
    /// for a token unknown, expired or already fetched.
    pub(super) fn take(&self, token: &[u8]) -> Response<Vec<u8>> {
        let found = std::str::from_utf8(token)
            .ok()
            .filter(|text| text.len() == 32)
            .and_then(|text| u128::from_str_radix(text, 16).ok())
            .and_then(|token| self.answers.lock().0.remove(&token))
            .filter(|kept| kept.at.elapsed() <= KEEP_FOR);
        match found {
            Some(kept) => plain(kept.status, kept.body, kept.headers),
            None => plain(
                404,
                crate::guard::refusal_text(404, "no such answer (it is kept 10 s and given once)"),
                Vec::new(),
            ),
        }
    }
}
