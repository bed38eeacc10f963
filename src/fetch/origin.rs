//! RFC 9309 §2.3 for robots.txt fetched from an origin: redirects, status classes, the last good
//! copy, and the 30-day rule — turning one fetch into the copy that goes in force.

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use pingora::connectors::http::Connector;

use crate::config::normalize_host;
use crate::config::OnUnreachable;
use crate::net::http::{get, Answer, Validators};
use crate::snapshot::{CopyOutcome, Origin, Policy, RobotsCopy};

/// Redirects followed before giving up (RFC 9309: at least five).
pub const MAX_REDIRECTS: usize = 5;

/// Unreachable for longer than this with no good copy: assume no restrictions (Google's rule).
pub const UNREACHABLE_ALLOW_AFTER: Duration = Duration::from_secs(30 * 24 * 3600);

/// A 4xx for a robots.txt that had rules is believed only when a fetch at least this much later
/// says 4xx again: one 4xx may be a WAF challenge or a rate limit an attacker provoked.
pub const CONFIRM_UNAVAILABLE_AFTER: Duration = Duration::from_secs(60);

/// A good copy younger than this outlives answers an attacker or a misconfiguration can
/// provoke: redirect failures (loops, refused or too many redirects), 4xx answers other than
/// 404 and 410 (a WAF or rate limit blocking robotsguard's address, for as long as a flood
/// lasts), and 2xx pages that are not a robots.txt (challenge pages). RFC 9309 lets crawlers
/// cache robots.txt for 24 hours.
pub const KEEP_THROUGH_PROVOKED_FAILURES: Duration = Duration::from_secs(24 * 3600);

/// The label of `robotsguard_robots_fetches_total{outcome}` for one fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FetchOutcome {
    Ok,
    NotModified,
    Unavailable,
    Unreachable,
    /// 429: treated as a server error (Google's documented handling).
    RateLimited,
    RedirectLimit,
    RedirectLoop,
    RefusedRedirect,
    TooLarge,
    /// A 2xx with no rule while the copy in force has rules: held until a later fetch confirms.
    NoRules,
}

impl FetchOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            FetchOutcome::Ok => "ok",
            FetchOutcome::NotModified => "not_modified",
            FetchOutcome::Unavailable => "unavailable",
            FetchOutcome::Unreachable => "unreachable",
            FetchOutcome::RateLimited => "rate_limited",
            FetchOutcome::RedirectLimit => "redirect_limit",
            FetchOutcome::RedirectLoop => "redirect_loop",
            FetchOutcome::RefusedRedirect => "refused_redirect",
            FetchOutcome::TooLarge => "too_large",
            FetchOutcome::NoRules => "no_rules",
        }
    }
}

/// The result of one fetch: the copy to put in force and what to count.
#[derive(Debug)]
pub struct Fetched {
    pub copy: RobotsCopy,
    pub outcome: FetchOutcome,
    /// The origin answered 503 or 429: retry sooner (Retry-After when it gave one).
    pub retry_after: Option<Duration>,
    pub status_503: bool,
    /// The fetch failed but an earlier copy stays in force: retry with backoff, and for an
    /// unconfirmed 4xx no sooner than [`CONFIRM_UNAVAILABLE_AFTER`].
    pub kept: Option<Kept>,
}

/// Why a failed fetch left the copy in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// A first 404 or 410, to be confirmed.
    Unconfirmed4xx,
    /// A 4xx other than 404 and 410 (401, 403, 429-like WAF answers...): access refused to
    /// robotsguard rather than a robots.txt that is gone.
    Refused4xx,
    /// A 2xx page that is not a robots.txt (an HTML challenge or error page) and has no rules.
    NotRobotsTxt,
    /// A first 2xx whose body yields no rule (`Access denied` as text), to be confirmed as a
    /// first 404 is.
    UnconfirmedNoRules,
    /// A redirect loop, a refused redirect or too many redirects.
    RedirectFailure,
}

impl Fetched {
    pub fn new(copy: RobotsCopy, outcome: FetchOutcome) -> Fetched {
        Fetched {
            copy,
            outcome,
            retry_after: None,
            status_503: false,
            kept: None,
        }
    }
}

/// Where the next request of a redirect chain goes: the Host header and the path. The connection
/// always goes to the origin's configured upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    /// `http` or `https`: what the fetch tells the origin in `X-Forwarded-Proto` (the
    /// connection itself goes to the upstream as configured).
    scheme: &'static str,
    host: String,
    path: String,
}

impl Target {
    fn url(&self) -> String {
        format!("{}://{}{}", self.scheme, self.host, self.path)
    }
}

/// The first target: `robots.url` when set (a path, or an http(s) URL whose host is one of the
/// origin's), else `/robots.txt` on the primary host; `https` when the upstream is reached over
/// TLS, else `http`.
fn first_target(origin: &Origin, url: Option<&str>) -> Target {
    let primary = origin.primary_host().to_string();
    let scheme = if origin.config.upstream_tls.is_some() {
        "https"
    } else {
        "http"
    };
    match url {
        None => Target {
            scheme,
            host: primary,
            path: "/robots.txt".to_string(),
        },
        Some(url) => match split_absolute(url) {
            Some((scheme, host, path)) => Target { scheme, host, path },
            None => Target {
                scheme,
                host: primary,
                path: url.to_string(),
            },
        },
    }
}

/// `http(s)://authority/path` → (scheme, authority, path); `None` for anything else.
fn split_absolute(url: &str) -> Option<(&'static str, String, String)> {
    let lower = url.to_ascii_lowercase();
    let (scheme, rest) = if lower.starts_with("http://") {
        ("http", &url[7..])
    } else if lower.starts_with("https://") {
        ("https", &url[8..])
    } else {
        return None;
    };
    let (authority, path) = match rest.find(['/', '?', '#']) {
        Some(slash) => (&rest[..slash], &rest[slash..]),
        None => (rest, "/"),
    };
    let path = path.split('#').next().unwrap_or("/");
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    Some((scheme, authority.to_string(), path))
}

/// Where a redirect leads, resolved against the URL just asked (RFC 3986 reference resolution:
/// `?x`, `../x`, `//host/x`, ...), or why it is not followed.
fn resolve_redirect(origin: &Origin, current: &Target, location: &str) -> Result<Target, String> {
    let location = location.trim();
    let base = url::Url::parse(&current.url())
        .map_err(|e| format!("cannot resolve a redirect from `{}`: {e}", current.url()))?;
    let next = base
        .join(location)
        .map_err(|e| format!("unusable Location `{location}`: {e}"))?;
    let scheme = match next.scheme() {
        "http" => "http",
        "https" => "https",
        other => return Err(format!("redirect to another scheme: `{other}:`")),
    };
    let Some(host_text) = next.host_str() else {
        return Err(format!("unusable Location `{location}`"));
    };
    let authority = match next.port() {
        Some(port) => format!("{host_text}:{port}"),
        None => host_text.to_string(),
    };
    let mut path = next.path().to_string();
    if let Some(query) = next.query() {
        path.push('?');
        path.push_str(query);
    }
    let Some(host) = normalize_host(authority.as_bytes()) else {
        return Err(format!("redirect to an unusable host `{authority}`"));
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        if is_internal(ip) {
            return Err(format!("redirect to an internal address `{host}`"));
        }
    }
    if !origin
        .config
        .hosts
        .iter()
        .any(|configured| *configured == host)
    {
        return Err(format!("redirect to another host `{host}`"));
    }
    Ok(Target {
        scheme,
        host: authority,
        path,
    })
}

/// Loopback, private, link-local, unspecified and similar addresses a redirect must not reach.
fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.octets()[0] == 100 && (v4.octets()[1] & 0xC0) == 64
        }
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || (v6.segments()[0] & 0xFE00) == 0xFC00
                || (v6.segments()[0] & 0xFFC0) == 0xFE80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| is_internal(IpAddr::V4(v4)))
        }
    }
}

/// `max-age` of a Cache-Control header, when the origin gives one.
fn max_age(cache_control: Option<&str>) -> Option<Duration> {
    cache_control?.split(',').find_map(|directive| {
        let (name, value) = directive.trim().split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("max-age")
            .then(|| value.trim().trim_matches('"').parse::<u64>().ok())
            .flatten()
            .map(Duration::from_secs)
    })
}

/// The longest Retry-After taken from an origin (the refresh interval bounds it again): a date
/// years ahead must not stop refreshes.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);

/// Retry-After (RFC 9110 §10.2.3), delta-seconds or an HTTP-date, as a wait from `now`: a date
/// in the past is no wait, anything longer than [`MAX_RETRY_AFTER`] is cut to it.
fn retry_after(value: Option<&str>, now: SystemTime) -> Option<Duration> {
    let value = value?.trim();
    let wait = if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Digits beyond u64 are a very long wait, not an unreadable one.
        Duration::from_secs(value.parse::<u64>().unwrap_or(u64::MAX))
    } else {
        let at = httpdate::parse_http_date(value).ok()?;
        at.duration_since(now).unwrap_or(Duration::ZERO)
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// Fetches an origin's robots.txt and decides the copy per RFC 9309, with the deviations that
/// keep an attacker from provoking an allow-all (see [`Kept`]).
pub async fn fetch(connector: &Connector, origin: &Origin, url: Option<&str>) -> Fetched {
    let settings = &origin.robots.settings;
    let previous = origin.robots.current();
    let validators = if previous.has_rules() {
        Validators {
            etag: previous.etag.clone(),
            last_modified: previous.last_modified.clone(),
        }
    } else {
        Validators::default()
    };
    let source = |target: &Target| {
        format!(
            "{} via {}",
            target.url(),
            origin
                .config
                .upstreams
                .iter()
                .map(|u| u.raw.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let mut target = first_target(origin, url);
    let mut visited: Vec<Target> = Vec::new();
    let answer = loop {
        let attempt = get(
            connector,
            origin,
            target.scheme,
            &target.host,
            &target.path,
            &validators,
            settings.max_size,
        );
        let answer = match tokio::time::timeout(settings.timeout, attempt).await {
            Ok(Ok(answer)) => answer,
            failed => {
                let error = match failed {
                    Ok(Err(failure)) => failure.to_string(),
                    _ => format!("no answer within {:?}", settings.timeout),
                };
                let source = source(&target);
                return unreachable(&previous, settings.on_unreachable, error, None, source);
            }
        };
        if !(300..400).contains(&answer.status) || answer.status == 304 {
            break answer;
        }
        let failure = |outcome, error: String| {
            redirect_failure(&previous, outcome, answer.status, error, source(&target))
        };
        let Some(location) = answer.location.as_deref() else {
            let error = format!("HTTP {} without a Location", answer.status);
            return failure(FetchOutcome::RefusedRedirect, error);
        };
        if visited.len() == MAX_REDIRECTS {
            let error = format!("more than {MAX_REDIRECTS} redirects");
            return failure(FetchOutcome::RedirectLimit, error);
        }
        let next = match resolve_redirect(origin, &target, location) {
            Ok(next) => next,
            Err(error) => return failure(FetchOutcome::RefusedRedirect, error),
        };
        visited.push(target.clone());
        if visited.contains(&next) {
            let error = format!("redirect loop back to {}", next.url());
            return failure(FetchOutcome::RedirectLoop, error);
        }
        target = next;
    };
    let source = source(&target);
    match answer.status {
        200..=299 => ok(answer, settings.max_size, source, &previous),
        304 if previous.has_rules() => {
            let mut copy = (*previous).clone();
            copy.fetched_at = Some(SystemTime::now());
            copy.last_error = None;
            copy.unreachable_since = None;
            copy.unavailable_since = None;
            copy.http_status = Some(304);
            copy.max_age = max_age(answer.cache_control.as_deref()).or(copy.max_age);
            Fetched::new(copy, FetchOutcome::NotModified)
        }
        429 => {
            // Google treats 429 as a server error: robots.txt exists but cannot be read now.
            // An origin that rate-limits by address sees all clients as robotsguard, so any
            // client can make this happen; it must never lift the rules.
            let error = "the origin answered HTTP 429 (too many requests)".to_string();
            let mut fetched =
                unreachable(&previous, settings.on_unreachable, error, Some(429), source);
            fetched.outcome = FetchOutcome::RateLimited;
            fetched.status_503 = true;
            fetched.retry_after = retry_after(answer.retry_after.as_deref(), SystemTime::now());
            fetched
        }
        404 | 410 => {
            let error = format!("the origin answered HTTP {}", answer.status);
            client_error(&previous, answer.status, error, source)
        }
        400..=499 => {
            let error = format!("the origin answered HTTP {}", answer.status);
            keep_if_young(
                &previous,
                Kept::Refused4xx,
                FetchOutcome::Unavailable,
                answer.status,
                error,
                source,
            )
        }
        status => {
            let error = format!("the origin answered HTTP {status}");
            let mut fetched = unreachable(
                &previous,
                settings.on_unreachable,
                error,
                Some(status),
                source,
            );
            if status == 503 {
                fetched.status_503 = true;
                fetched.retry_after = retry_after(answer.retry_after.as_deref(), SystemTime::now());
            }
            fetched
        }
    }
}

/// The copy in force, kept after a failed fetch: with a note in its reason and the error.
fn keep(previous: &RobotsCopy, error: String, status: Option<u16>, note: &str) -> RobotsCopy {
    let mut kept = previous.clone();
    if let Some(at) = kept.reason.find(" (kept: ") {
        kept.reason.truncate(at);
    }
    kept.reason.push_str(note);
    kept.last_error = Some(error);
    kept.last_error_at = Some(SystemTime::now());
    kept.http_status = status.or(kept.http_status);
    kept
}

/// A 404 or 410. RFC 9309 says robots.txt is then unavailable and everything allowed; but one
/// such answer may be a passing misconfiguration, so while a copy with rules is in force it
/// stays until a second fetch at least [`CONFIRM_UNAVAILABLE_AFTER`] later gets a 4xx too.
fn client_error(previous: &RobotsCopy, status: u16, error: String, source: String) -> Fetched {
    let now = SystemTime::now();
    if previous.has_rules() {
        let since = previous.unavailable_since.unwrap_or(now);
        let confirmed = now
            .duration_since(since)
            .is_ok_and(|waited| waited >= CONFIRM_UNAVAILABLE_AFTER);
        if !confirmed {
            let mut copy = keep(
                previous,
                error,
                Some(status),
                " (kept: the latest fetch got a 4xx; a second one will confirm it)",
            );
            copy.unavailable_since = Some(since);
            let mut fetched = Fetched::new(copy, FetchOutcome::Unavailable);
            fetched.kept = Some(Kept::Unconfirmed4xx);
            return fetched;
        }
    }
    unavailable(FetchOutcome::Unavailable, status, error, source)
}

/// A redirect loop, a refused redirect or too many redirects: unavailable per RFC 9309, but a
/// young good copy stays (an origin that redirects plain requests to https, or a misconfigured
/// rewrite, must not lift the rules at once).
fn redirect_failure(
    previous: &RobotsCopy,
    outcome: FetchOutcome,
    status: u16,
    error: String,
    source: String,
) -> Fetched {
    keep_if_young(
        previous,
        Kept::RedirectFailure,
        outcome,
        status,
        error,
        source,
    )
}

/// Whether the copy in force was fetched less than [`KEEP_THROUGH_PROVOKED_FAILURES`] ago.
fn is_young(previous: &RobotsCopy) -> bool {
    previous.fetched_at.is_some_and(|at| {
        SystemTime::now()
            .duration_since(at)
            .is_ok_and(|age| age < KEEP_THROUGH_PROVOKED_FAILURES)
    })
}

/// An answer that would make robots.txt unavailable but that an attacker can provoke (see
/// [`KEEP_THROUGH_PROVOKED_FAILURES`]): a copy with rules younger than that stays in force;
/// an older one, or none, gives way to "unavailable" as RFC 9309 says.
fn keep_if_young(
    previous: &RobotsCopy,
    why: Kept,
    outcome: FetchOutcome,
    status: u16,
    error: String,
    source: String,
) -> Fetched {
    if previous.has_rules() && is_young(previous) {
        let note = match why {
            Kept::RedirectFailure => " (kept: the latest fetch failed on a redirect)",
            _ => {
                " (kept: the latest fetch was refused, as a WAF or rate limit may refuse it; \
                 a good copy stays up to 24 h unless a fetch confirms a change)"
            }
        };
        let copy = keep(previous, error, Some(status), note);
        let mut fetched = Fetched::new(copy, outcome);
        fetched.kept = Some(why);
        return fetched;
    }
    unavailable(outcome, status, error, source)
}

/// A 2xx answer that is not a robots.txt: an HTML page (a JavaScript challenge, a "please wait"
/// page, an app's error page rendered with 200) or a body of another declared type. Only
/// consulted when the answer has no rules: a robots.txt served with a wrong type still counts.
fn looks_like_a_page(content_type: Option<&str>, body: &[u8]) -> bool {
    let declared_other = content_type.is_some_and(|value| {
        let essence = value.split(';').next().unwrap_or("").trim();
        !essence.is_empty() && !essence.eq_ignore_ascii_case("text/plain")
    });
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let starts_with_markup = body
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&first| first == b'<');
    declared_other || starts_with_markup
}

/// A 2xx: the body is robots.txt — unless it is a page that is not one while a young copy
/// with rules is in force (see [`looks_like_a_page`]).
fn ok(answer: Answer, max_size: usize, source: String, previous: &RobotsCopy) -> Fetched {
    let outcome = if answer.over_limit {
        FetchOutcome::TooLarge
    } else {
        FetchOutcome::Ok
    };
    let reason = if answer.over_limit {
        format!(
            "fetched (HTTP {}); only the first {max_size} bytes are used",
            answer.status
        )
    } else {
        format!("fetched (HTTP {})", answer.status)
    };
    let page = looks_like_a_page(answer.content_type.as_deref(), &answer.body);
    let mut copy =
        RobotsCopy::from_body_or_previous(answer.body, max_size, CopyOutcome::Ok, reason, previous);
    let lifts_rules = copy.rule_count() == 0 && previous.rule_count() > 0;
    if lifts_rules && !(page && is_young(previous)) {
        // A 200 with no rule ("Access denied" as plain text, an empty body from a broken
        // deploy) lifts every rule as a 404 would, and is as easy to provoke: held the same way,
        // until a second fetch at least CONFIRM_UNAVAILABLE_AFTER later says it again.
        let now = SystemTime::now();
        let since = previous.unavailable_since.unwrap_or(now);
        let confirmed = now
            .duration_since(since)
            .is_ok_and(|waited| waited >= CONFIRM_UNAVAILABLE_AFTER);
        if !confirmed {
            let error = format!(
                "HTTP {} with no rule while the copy in force has {}",
                answer.status,
                previous.rule_count()
            );
            let mut kept = keep(
                previous,
                error,
                Some(answer.status),
                " (kept: the latest fetch got a robots.txt with no rule; a second one will \
                 confirm it)",
            );
            kept.unavailable_since = Some(since);
            let mut fetched = Fetched::new(kept, FetchOutcome::NoRules);
            fetched.kept = Some(Kept::UnconfirmedNoRules);
            return fetched;
        }
    }
    if page && lifts_rules && is_young(previous) {
        // A challenge page answered with 200 must not lift rules any more than a 403 does.
        let error = format!(
            "HTTP {} with a page that is not a robots.txt (content type {})",
            answer.status,
            answer.content_type.as_deref().unwrap_or("none")
        );
        let kept = keep(
            previous,
            error,
            Some(answer.status),
            " (kept: the latest fetch got a page that is not a robots.txt, such as a \
             challenge; a good copy stays up to 24 h unless a fetch confirms a change)",
        );
        let mut fetched = Fetched::new(kept, outcome);
        fetched.kept = Some(Kept::NotRobotsTxt);
        return fetched;
    }
    copy.http_status = Some(answer.status);
    copy.etag = answer.etag;
    copy.last_modified = answer.last_modified;
    copy.max_age = max_age(answer.cache_control.as_deref());
    copy.source = source;
    Fetched::new(copy, outcome)
}

/// 4xx, too many redirects, or a refused redirect: robots.txt is unavailable, so crawlers may
/// fetch everything (RFC 9309 §2.3.1.3).
fn unavailable(outcome: FetchOutcome, status: u16, error: String, source: String) -> Fetched {
    let reason = format!("robots.txt unavailable: {error}");
    let mut copy = RobotsCopy::without_rules(Policy::AllowAll, CopyOutcome::Unavailable, reason);
    copy.http_status = Some(status);
    copy.source = source;
    Fetched::new(copy, outcome)
}

/// 5xx, 429 or a failed connection: the last good copy stays in force; with none,
/// `on_unreachable` decides until 30 days have passed, then everything is allowed.
pub fn unreachable(
    previous: &RobotsCopy,
    on_unreachable: OnUnreachable,
    error: String,
    status: Option<u16>,
    source: String,
) -> Fetched {
    let now = SystemTime::now();
    let since = previous.unreachable_since.unwrap_or(now);
    let copy = if previous.is_good() {
        // A good copy is a parsed file or a definite "unavailable" answer.
        let mut kept = keep(previous, error, None, " (kept: the latest fetch failed)");
        kept.unreachable_since = Some(since);
        kept
    } else {
        let long_gone = now
            .duration_since(since)
            .is_ok_and(|elapsed| elapsed > UNREACHABLE_ALLOW_AFTER);
        let mut copy = if long_gone {
            let reason = format!("robots.txt unreachable for more than 30 days ({error})");
            RobotsCopy::without_rules(Policy::AllowAll, CopyOutcome::Unreachable, reason)
        } else {
            let reason = format!("robots.txt unreachable ({error}) and no earlier copy");
            RobotsCopy::unreachable(on_unreachable, reason, CopyOutcome::Unreachable)
        };
        copy.last_error = Some(error);
        copy.last_error_at = Some(now);
        copy.unreachable_since = Some(since);
        copy.source = source;
        copy
    };
    let mut copy = copy;
    copy.http_status = status.or(copy.http_status);
    Fetched::new(copy, FetchOutcome::Unreachable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_control_max_age() {
        assert_eq!(
            max_age(Some("public, max-age=60")),
            Some(Duration::from_secs(60))
        );
        assert_eq!(max_age(Some("no-cache")), None);
        assert_eq!(max_age(Some("max-age=abc")), None);
        assert_eq!(max_age(None), None);
    }

    #[test]
    fn retry_after_in_seconds_or_as_an_http_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let at = |seconds: u64| httpdate::fmt_http_date(now + Duration::from_secs(seconds));
        assert_eq!(
            retry_after(Some(" 120 "), now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            retry_after(Some(&at(90)), now),
            Some(Duration::from_secs(90))
        );
        // The obsolete RFC 850 form is an HTTP-date too.
        let rfc850 = "Tuesday, 14-Nov-23 22:13:27 GMT";
        assert_eq!(retry_after(Some(rfc850), now), Some(Duration::from_secs(7)));
        assert_eq!(
            retry_after(
                Some(&httpdate::fmt_http_date(now - Duration::from_secs(60))),
                now
            ),
            Some(Duration::ZERO),
            "a date in the past is no wait"
        );
        assert_eq!(
            retry_after(Some(&at(10 * 86_400)), now),
            Some(MAX_RETRY_AFTER)
        );
        assert_eq!(
            retry_after(Some("99999999999999999999999"), now),
            Some(MAX_RETRY_AFTER)
        );
        for unreadable in ["", "soon", "-5", "1.5", "Mon, 99 Foo 2023 00:00:00 GMT"] {
            assert_eq!(retry_after(Some(unreadable), now), None, "{unreadable}");
        }
        assert_eq!(retry_after(None, now), None);
    }

    #[test]
    fn pages_that_are_not_a_robots_txt() {
        let html = "text/html; charset=utf-8";
        assert!(looks_like_a_page(Some(html), b"Just a moment..."));
        assert!(looks_like_a_page(Some("application/json"), b"{}"));
        assert!(looks_like_a_page(
            None,
            b"\xEF\xBB\xBF \n<!DOCTYPE html><html>"
        ));
        assert!(looks_like_a_page(
            Some("text/plain"),
            b"<html><body>x</body>"
        ));
        assert!(!looks_like_a_page(
            Some("text/plain; charset=utf-8"),
            b"# no rules\n"
        ));
        assert!(!looks_like_a_page(Some("TEXT/PLAIN"), b""));
        assert!(!looks_like_a_page(None, b"User-agent: *\nDisallow:\n"));
    }

    fn copy_with_rules(fetched_ago: Duration) -> RobotsCopy {
        let body = bytes::Bytes::from_static(b"User-agent: GPTBot\nDisallow: /private\n");
        let mut copy = RobotsCopy::from_body(body, 1 << 16, CopyOutcome::Ok, "fetched".into());
        copy.fetched_at = Some(SystemTime::now() - fetched_ago);
        copy
    }

    fn answer(status: u16, content_type: &str, body: &'static [u8]) -> Answer {
        Answer {
            status,
            content_type: Some(content_type.to_string()),
            body: bytes::Bytes::from_static(body),
            ..Answer::default()
        }
    }

    #[test]
    fn a_refusal_keeps_a_young_copy_and_lifts_an_old_one() {
        let young = copy_with_rules(Duration::from_secs(3600));
        let fetched = keep_if_young(
            &young,
            Kept::Refused4xx,
            FetchOutcome::Unavailable,
            403,
            "the origin answered HTTP 403".into(),
            "src".into(),
        );
        assert_eq!(fetched.kept, Some(Kept::Refused4xx));
        assert_eq!(fetched.copy.rule_count(), 1);
        assert_eq!(fetched.copy.http_status, Some(403));
        let old = copy_with_rules(KEEP_THROUGH_PROVOKED_FAILURES + Duration::from_secs(1));
        let fetched = keep_if_young(
            &old,
            Kept::Refused4xx,
            FetchOutcome::Unavailable,
            403,
            "the origin answered HTTP 403".into(),
            "src".into(),
        );
        assert_eq!(fetched.kept, None);
        assert!(matches!(fetched.copy.policy, Policy::AllowAll));
    }

    #[test]
    fn a_challenge_page_keeps_a_young_copy_but_a_plain_empty_file_replaces_it() {
        let young = copy_with_rules(Duration::from_secs(60));
        let challenge = answer(
            200,
            "text/html",
            b"<!DOCTYPE html><title>Just a moment</title>",
        );
        let fetched = ok(challenge, 1 << 16, "src".into(), &young);
        assert_eq!(fetched.kept, Some(Kept::NotRobotsTxt));
        assert_eq!(fetched.outcome, FetchOutcome::Ok);
        assert_eq!(fetched.copy.rule_count(), 1);
        // A plain file with no rule (the site emptied its robots.txt, or answers "Access
        // denied" as text): held like a first 404...
        for body in [&b"# open\n"[..], b"Access denied", b""] {
            let emptied = ok(
                answer(200, "text/plain", body),
                1 << 16,
                "src".into(),
                &young,
            );
            assert_eq!(emptied.kept, Some(Kept::UnconfirmedNoRules));
            assert_eq!(emptied.outcome, FetchOutcome::NoRules);
            assert_eq!(emptied.copy.rule_count(), 1);
            assert!(emptied.copy.last_error.is_some());
            // ...and confirmed by a second one at least a minute later.
            let mut held = emptied.copy.clone();
            held.unavailable_since =
                Some(SystemTime::now() - CONFIRM_UNAVAILABLE_AFTER - Duration::from_secs(1));
            let again = ok(
                answer(200, "text/plain", body),
                1 << 16,
                "src".into(),
                &held,
            );
            assert_eq!(again.kept, None);
            assert_eq!(again.outcome, FetchOutcome::Ok);
            assert_eq!(again.copy.rule_count(), 0);
            // A second one sooner keeps holding, from the first one's time.
            let soon = ok(
                answer(200, "text/plain", body),
                1 << 16,
                "src".into(),
                &emptied.copy,
            );
            assert_eq!(soon.kept, Some(Kept::UnconfirmedNoRules));
            assert_eq!(soon.copy.unavailable_since, emptied.copy.unavailable_since);
        }
        // An HTML page with rules in it is parsed like any robots.txt (Google does so too).
        let with_rules = answer(200, "text/html", b"<p>\nUser-agent: *\nDisallow: /a\n");
        let parsed = ok(with_rules, 1 << 16, "src".into(), &young);
        assert_eq!(parsed.kept, None);
        assert_eq!(parsed.copy.rule_count(), 1);
        // With no copy that has rules, a page is what it is: no rules.
        let none = RobotsCopy::from_body(bytes::Bytes::new(), 1 << 16, CopyOutcome::Ok, "x".into());
        let first = ok(
            answer(200, "text/html", b"<html></html>"),
            1 << 16,
            "src".into(),
            &none,
        );
        assert_eq!(first.kept, None);
        // A day-old copy is not kept for a day more: only until a second fetch confirms, as
        // for any answer with no rule.
        let old = copy_with_rules(KEEP_THROUGH_PROVOKED_FAILURES + Duration::from_secs(1));
        let late = ok(
            answer(200, "text/html", b"<html></html>"),
            1 << 16,
            "src".into(),
            &old,
        );
        assert_eq!(late.kept, Some(Kept::UnconfirmedNoRules));
        assert_eq!(late.copy.rule_count(), 1);
    }

    #[test]
    fn absolute_urls_split_into_host_and_path() {
        assert_eq!(
            split_absolute("https://Shop.example:8443/r.txt?x#f"),
            Some(("https", "Shop.example:8443".into(), "/r.txt?x".into()))
        );
        assert_eq!(
            split_absolute("http://shop.example"),
            Some(("http", "shop.example".into(), "/".into()))
        );
        assert_eq!(split_absolute("ftp://shop.example/x"), None);
        assert_eq!(split_absolute("/robots.txt"), None);
    }

    #[test]
    fn internal_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "172.16.5.5",
            "169.254.169.254",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "100.64.0.1",
        ] {
            assert!(
                is_internal(ip.parse().unwrap_or(IpAddr::from([0, 0, 0, 0]))),
                "{ip}"
            );
        }
        for ip in ["93.184.216.34", "2606:4700::1111"] {
            assert!(
                !is_internal(ip.parse().unwrap_or(IpAddr::from([127, 0, 0, 1]))),
                "{ip}"
            );
        }
    }
}
