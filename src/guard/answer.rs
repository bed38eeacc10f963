//! The answers robotsguard writes itself: the block response, refusals, failures, and the
//! robots.txt copy in force. Their text is ours: never an upstream's error or an internal one.

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use pingora::http::ResponseHeader;
use pingora::prelude::*;
use pingora::proxy::Session;

use super::request::{body_is_drainable, client_keeps_alive};
use crate::config::render_body;
use crate::enforce::{Decision, Outcome, Why};
use crate::judge::{Refusal, RefusedFor};
use crate::snapshot::RobotsCopy;

/// How long a connection answered by robotsguard stays open for the next request (the server's
/// idle limit bounds the wait itself).
const KEEPALIVE_SECONDS: u64 = 60;

/// Keeps the connection open after our answer when the client wants that and its body (if any)
/// can be drained: pingora closes a connection answered before its request body was read.
fn keep_connection_if_possible(session: &mut Session) {
    let request = session.req_header();
    if client_keeps_alive(request) && body_is_drainable(request) {
        session.set_close_on_response_before_downstream_finish(false);
        session.set_keepalive(Some(KEEPALIVE_SECONDS));
    } else {
        session.set_keepalive(None);
    }
}

/// Sends an answer robotsguard makes itself (block, refusal, failure).
pub(super) async fn respond(session: &mut Session, status: u16, body: String) -> Result<()> {
    respond_with(session, status, body, None, true).await
}

/// Sends a failure answer after which the connection closes (a connection whose proxying failed
/// is not reused), with `Connection: close` so that the client does not send its next request
/// into it.
pub(super) async fn respond_closing(
    session: &mut Session,
    status: u16,
    body: String,
) -> Result<()> {
    respond_with(session, status, body, None, false).await
}

/// A plain-text answer of ours, with one more header when given.
///
/// Built without pingora's map of header-name spellings, with names already parsed: pingora
/// writes the standard ones title-cased (`Content-Type`), the others lower-case, as every name
/// here is spelled anyway.
async fn respond_with(
    session: &mut Session,
    status: u16,
    body: String,
    extra: Option<(HeaderName, String)>,
    keep: bool,
) -> Result<()> {
    let body = Bytes::from(body);
    let mut header = ResponseHeader::build_no_case(status, Some(5))?;
    header.insert_header(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    )?;
    header.insert_header(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))?;
    if let Some((name, value)) = extra {
        header.insert_header(name, value)?;
    }
    header.insert_header(header::CONTENT_LENGTH, HeaderValue::from(body.len()))?;
    if keep {
        keep_connection_if_possible(session);
    } else {
        session.set_keepalive(None);
    }
    // A HEAD answer has no body. pingora drops one over HTTP/1.1 but sends it over HTTP/2, where
    // the client takes it for a protocol error.
    if session.req_header().method == http::Method::HEAD {
        return session.write_response_header(Box::new(header), true).await;
    }
    session
        .write_response_header(Box::new(header), false)
        .await?;
    session.write_response_body(Some(body), true).await?;
    Ok(())
}

/// Sends a refusal the judgment made, with its `Retry-After` when it has one (a ban's end, a
/// Crawl-delay's wait) or its `Accept-Signature` (Web Bot Auth).
pub(super) async fn respond_refusal(
    session: &mut Session,
    refusal: &Refusal,
    body: String,
) -> Result<()> {
    respond_with(session, refusal.status, body, refusal_header(refusal), true).await
}

/// Sends a refusal after which the connection closes (one made after the request was proxied,
/// whose upstream exchange was cut short).
pub(super) async fn respond_refusal_closing(
    session: &mut Session,
    refusal: &Refusal,
    body: String,
) -> Result<()> {
    respond_with(
        session,
        refusal.status,
        body,
        refusal_header(refusal),
        false,
    )
    .await
}

/// The one header a refusal carries besides its body, when it has one: `Link` to a 402's
/// licence, `Retry-After` (a ban's end, a Crawl-delay's wait) or `Accept-Signature` (Web Bot
/// Auth). Shared by the proxy and the decision listener.
pub(crate) fn refusal_header(refusal: &Refusal) -> Option<(HeaderName, String)> {
    // A refusal carries at most one of them.
    match &refusal.why {
        RefusedFor::PaymentRequired { license: Some(url) }
        | RefusedFor::ResponseSignal { license: Some(url) }
            if refusal.status == 402 =>
        {
            Some((header::LINK, format!("<{url}>; rel=\"license\"")))
        }
        why => why
            .retry_after()
            .map(|seconds| (header::RETRY_AFTER, seconds.to_string()))
            .or_else(|| {
                why.accept_signature().map(|value| {
                    (
                        HeaderName::from_static("accept-signature"),
                        value.to_string(),
                    )
                })
            }),
    }
}

/// The body of every refusal the judgment made for `decision`: the one place a refusal's text is
/// chosen, shared by the proxy and the decision listener. Only what robotsguard wrote; `block`
/// writes the block response, the one body that shows what was read of the request (its path,
/// the robots.txt URL, the client's address).
pub(crate) fn refusal_body(
    decision: &Decision,
    refusal: &Refusal,
    block: impl FnOnce() -> String,
) -> String {
    match &refusal.why {
        RefusedFor::Banned(ban) => banned_body(ban),
        RefusedFor::Limited { delay, wait } => limited_body(decision, *delay, *wait),
        RefusedFor::RateLimited { rule, wait } => rate_limited_body(decision, rule, *wait),
        RefusedFor::SignatureRequired { .. } => {
            "403 Forbidden: this site asks this crawler for a Web Bot Auth signature; \
             sign the request as the Accept-Signature header describes.\n"
                .to_string()
        }
        RefusedFor::KeysUnavailable => {
            "503 Service Unavailable: this site cannot check this crawler's Web Bot \
             Auth signature right now; try again later.\n"
                .to_string()
        }
        RefusedFor::Replayed { .. } => {
            "429 Too Many Requests: this signature's nonce was already used; sign \
             again with a fresh nonce (Accept-Signature offers one).\n"
                .to_string()
        }
        // A trap answers as a path that does not exist: nothing tells the client.
        RefusedFor::Trap => "404 Not Found\n".to_string(),
        RefusedFor::Disguised => disguised_body(decision),
        RefusedFor::ResponseSignal { license } => {
            response_signal_body(decision, refusal.status, license.as_deref())
        }
        _ => block(),
    }
}

/// The body of a refusal for the page's own preference in the origin's response: the crawler,
/// the purpose refused, the header that says so (as quoted: printable ASCII, cut) and, for a
/// 402, the licence terms. Nothing the client wrote.
fn response_signal_body(decision: &Decision, status: u16, license: Option<&str>) -> String {
    let crawler = decision
        .crawler
        .as_ref()
        .map_or("this crawler", |c| c.name());
    let (purpose, header) = match decision.response_signal() {
        Some(hit) => (
            hit.purpose.as_str(),
            format!("{} header: {}", hit.signal.header(), hit.value),
        ),
        None => ("this", "response headers".to_string()),
    };
    let mut body = format!(
        "{}: this page is not for {crawler}'s {purpose} use.\n\
         Reason: the page's {header}\n",
        status_line(status)
    );
    if status == 402 {
        match license {
            Some(url) => body.push_str(&format!("Licence terms: {url}\n")),
            None => body.push_str("Ask this site for its licence terms.\n"),
        }
    }
    body.push_str("Enforced by robotsguard.\n");
    body
}

/// The body of a ban's 403: that the address is banned, why, and until when. Nothing the client
/// wrote.
fn banned_body(ban: &crate::tables::offenders::Ban) -> String {
    format!(
        "403 Forbidden: {} is banned from this site until {} after {} requests for paths \
         robots.txt disallows; robots.txt stays readable.\n",
        crate::client_address::shown_network(&ban.client),
        httpdate::fmt_http_date(ban.until),
        ban.strikes
    )
}

/// The body of a 403 for a disguised crawler: why it is one, and the rule that disallows the
/// path. Only numbers, rule text and fixed words: nothing the client wrote.
fn disguised_body(decision: &Decision) -> String {
    let settings = decision.origin.config.disguised;
    let rule = decision.rule.as_ref().map_or_else(
        || "everything".to_string(),
        |rule| format!("line {}: {}", rule.line, rule.text()),
    );
    format!(
        "403 Forbidden: this client read robots.txt and then asked {} or more times within {} for \
         paths it disallows to every crawler, so it is treated as a crawler (disguised), and \
         robots.txt disallows this path to crawlers ({rule}).\n",
        settings.strikes,
        humantime::format_duration(settings.window)
    )
}

/// The body of a 429 for `decision`: which crawler, the delay applied (robots.txt's, capped), and
/// when to come back. Only names from the catalogue and numbers: nothing the client wrote.
fn limited_body(
    decision: &Decision,
    delay: std::time::Duration,
    wait: std::time::Duration,
) -> String {
    let crawler = decision
        .crawler
        .as_ref()
        .map_or("this crawler", |c| c.name());
    format!(
        "429 Too Many Requests: robots.txt asks {crawler} to wait {} s between requests \
         (Crawl-delay); retry after {} s.\n",
        seconds_text(delay),
        crate::tables::crawl_delay::retry_after_seconds(wait)
    )
}

/// The body of a 429 for the operator's rate budget: the rate and when to come back. Only the
/// crawler's catalogue name and numbers: nothing the client wrote.
fn rate_limited_body(
    decision: &Decision,
    rule: &crate::config::RateRule,
    wait: std::time::Duration,
) -> String {
    let crawler = decision
        .crawler
        .as_ref()
        .map_or("this crawler", |c| c.name());
    format!(
        "429 Too Many Requests: this site allows {crawler} at most {} requests a {} (rate \
         budget); retry after {} s.\n",
        rule.limit,
        rule.period_word(),
        crate::tables::crawl_delay::retry_after_seconds(wait)
    )
}

/// `2`, `0.5`: a delay as robots.txt would write it.
fn seconds_text(delay: std::time::Duration) -> String {
    let seconds = delay.as_secs_f64();
    if seconds.fract() == 0.0 {
        format!("{seconds:.0}")
    } else {
        format!("{seconds}")
    }
}

/// Answers a request robotsguard will not proxy with `status` and a one-line reason (written by
/// us, never client text), and ends the request.
pub(super) async fn refuse(session: &mut Session, status: u16, why: &str) -> Result<bool> {
    respond(session, status, refusal_text(status, why)).await?;
    Ok(true)
}

/// The body of a refusal of ours: `403 Forbidden: {why}.` and a line end.
pub(crate) fn refusal_text(status: u16, why: &str) -> String {
    format!("{}: {why}.\n", status_line(status))
}

/// Why a request the judgment could not route is refused, in the words of its answer.
pub(crate) fn unrouted_reason(why: &RefusedFor) -> &'static str {
    match why {
        RefusedFor::EscapedSlash => "encoded slashes are not accepted in paths",
        _ => "this proxy does not serve that host",
    }
}

/// `403 Forbidden`, `451 Unavailable For Legal Reasons`, ...
fn status_line(status: u16) -> String {
    let mut line = String::new();
    push_status_line(&mut line, status);
    line
}

fn push_status_line(out: &mut String, status: u16) {
    let reason = http::StatusCode::from_u16(status)
        .ok()
        .and_then(|code| code.canonical_reason())
        .unwrap_or("Error");
    out.push_str(itoa::Buffer::new().format(status));
    out.push(' ');
    out.push_str(reason);
}

/// The body of the block response for `decision`: the origin's configured template, or a
/// built-in text. Rendered in one pass, so placeholders inside the values (a path may contain
/// `{origin}`) stay as they are. `path` is the request's path and query, `robots_url` the
/// robots.txt URL the client should read and `client` the client's address as text.
///
/// [`Guard::request_filter`](super::Guard::request_filter) sends this itself; it is public for
/// code that answers blocked requests its own way.
pub fn block_body(decision: &Decision, path: &str, robots_url: &str, client: &str) -> String {
    let crawler = decision.crawler.as_ref().map_or("crawler", |c| c.name());
    match &decision.origin.config.block.body {
        Some(template) => {
            let (line, rule) = match &decision.rule {
                Some(rule) => (rule.line.to_string(), rule.text()),
                None => (String::from("-"), decision.public_reason()),
            };
            render_body(template, |name| match name {
                "crawler" => Some(crawler),
                "path" => Some(path),
                "line" => Some(line.as_str()),
                "rule" => Some(rule.as_str()),
                "robots_url" => Some(robots_url),
                "origin" => Some(decision.origin.name()),
                "client" => Some(client),
                _ => None,
            })
        }
        None if decision.why == Why::Impostor => {
            let claimed = decision
                .verification
                .as_ref()
                .map_or(crawler, |v| v.crawler.as_str());
            format!(
                "403 Forbidden: this request claims to be {claimed} and could not be verified.\n\
                 {claimed}'s operator publishes how to recognise its requests, and this one is \
                 not among them.\n\
                 Your address: {client}\n\
                 Enforced by robotsguard.\n"
            )
        }
        None if decision.outcome == Outcome::PaymentRequired => {
            let license = decision
                .origin
                .config
                .block
                .license_url
                .clone()
                .or_else(|| match &decision.robots.policy {
                    crate::snapshot::Policy::Rules(rules) => {
                        rules.licenses().first().map(|l| l.url.clone())
                    }
                    _ => None,
                });
            let terms = license.map_or_else(
                || "Ask this site for its licence terms.".to_string(),
                |url| format!("Licence terms: {url}"),
            );
            format!(
                "402 Payment Required: this site licenses {path} to {crawler} on its terms.\n\
                 {terms}\n\
                 This site's robots.txt: {robots_url}\n\
                 Your address: {client}\n\
                 Enforced by robotsguard.\n"
            )
        }
        None if matches!(decision.why, Why::PolicyBlock(_)) => format!(
            "{}: this site does not admit {crawler}.\n\
             This site's robots.txt: {robots_url}\n\
             Your address: {client}\n\
             Enforced by robotsguard.\n",
            status_line(crate::judge::refusal_status(decision))
        ),
        // The answer to one request in ten in a crawler-heavy mix: written into one buffer rather
        // than through a chain of `format!`s.
        None => {
            let status = crate::judge::refusal_status(decision);
            let reason = decision.rule.is_none().then(|| decision.public_reason());
            let mut body = String::with_capacity(
                200 + crawler.len() + path.len() + robots_url.len() + client.len(),
            );
            push_status_line(&mut body, status);
            for part in [": ", crawler, " may not fetch ", path, ".\nReason: "] {
                body.push_str(part);
            }
            match &decision.rule {
                Some(rule) => {
                    body.push_str("robots.txt line ");
                    body.push_str(itoa::Buffer::new().format(rule.line));
                    for part in [": ", rule.directive, ": ", rule.pattern.as_str()] {
                        body.push_str(part);
                    }
                }
                None => body.push_str(reason.as_deref().unwrap_or_default()),
            }
            for part in [
                "\nThis site's robots.txt: ",
                robots_url,
                "\nYour address: ",
                client,
                "\nEnforced by robotsguard.\n",
            ] {
                body.push_str(part);
            }
            body
        }
    }
}

/// The body of an answer given for a request that could not be proxied: what happened, in words
/// that name nothing internal.
pub(super) fn failure_body(status: u16) -> String {
    let what = match status {
        502 => "the site's server is unavailable",
        503 => "the site is unavailable",
        504 => "the site's server did not answer in time",
        408 => "the request did not arrive in time",
        400 => "the request could not be read",
        _ => "the request could not be completed",
    };
    format!("{}: {what}.\n", status_line(status))
}

/// Answers a robots.txt request with the copy in force: `ETag`, `Last-Modified`,
/// `Cache-Control: max-age` of the refresh interval, and 304 to a matching conditional request.
pub(super) async fn serve_robots(
    session: &mut Session,
    copy: &RobotsCopy,
    refresh: std::time::Duration,
) -> Result<()> {
    let served = copy.served();
    let last_modified = httpdate::fmt_http_date(copy.content_since);
    let request = session.req_header();
    let not_modified = match request.headers.get(http::header::IF_NONE_MATCH) {
        Some(tags) => tags.to_str().is_ok_and(|tags| {
            tags.split(',').any(|tag| {
                let tag = tag.trim();
                tag == "*" || tag.trim_start_matches("W/") == served.etag
            })
        }),
        None => request
            .headers
            .get(http::header::IF_MODIFIED_SINCE)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| httpdate::parse_http_date(value).ok())
            .is_some_and(|since| {
                // Last-Modified has whole seconds; compare at that precision.
                httpdate::parse_http_date(&last_modified).is_ok_and(|ours| ours <= since)
            }),
    };
    let head = request.method == http::Method::HEAD;
    let status = if not_modified { 304 } else { 200 };
    let mut header = ResponseHeader::build(status, Some(6))?;
    header.insert_header("content-type", "text/plain; charset=utf-8")?;
    header.insert_header("etag", served.etag.as_str())?;
    header.insert_header("last-modified", last_modified)?;
    header.insert_header(
        "cache-control",
        format!("public, max-age={}", refresh.as_secs()),
    )?;
    if !not_modified {
        header.insert_header("content-length", served.body.len().to_string())?;
    }
    keep_connection_if_possible(session);
    let body = (!not_modified && !head).then(|| served.body.clone());
    let end = body.is_none();
    session.write_response_header(Box::new(header), end).await?;
    if let Some(body) = body {
        session.write_response_body(Some(body), true).await?;
    }
    Ok(())
}
