//! An evidence record's fields, from what the judgment knew. What depends on the robots.txt
//! copy's bytes (its sha256, the rule's line as written, the group's agents) is filled in by the
//! writer, off the request path.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{json, Map, Value};

use crate::enforce::{Decision, VerifiedBy, RESPONSE_HEADER_RULE};
use crate::snapshot::RobotsCopy;

/// The most bytes of a User-Agent, a Host or a path as received that a record keeps (escaped
/// beyond that, with how long it was): a record stays one bounded line whatever a client sends.
pub const MAX_CLIENT_FIELD: usize = 1024;

/// The most bytes of the canonical path a record keeps (percent-escaped where it is not
/// printable ASCII, as the matcher compares paths).
pub const MAX_PATH: usize = 8 * 1024;

/// What one applied judgment gives the evidence: the request's facts and how it ended.
#[derive(Debug)]
pub struct Observed<'a> {
    /// The decision (origin, crawler, rule, robots.txt copy, verification).
    pub decision: &'a Decision,
    /// The Host as sent.
    pub host: &'a [u8],
    /// The method.
    pub method: &'a http::Method,
    /// The path and query as received.
    pub target: &'a [u8],
    /// The client, when known.
    pub client: Option<IpAddr>,
    /// The User-Agent as sent.
    pub user_agent: &'a [u8],
    /// The status robotsguard answered with; `None`: the request went to the origin.
    pub status: Option<u16>,
    /// The strikes of the ban this request earned, when it earned one.
    pub ban_strikes: Option<u32>,
    /// When this client last read the origin's robots.txt, when known.
    pub read_robots: Option<SystemTime>,
}

/// A record waiting for the writer: its fields but `id`, `prev`, `sig` and what the robots.txt
/// copy gives, and the copy.
#[derive(Debug)]
pub struct Pending {
    /// The record's fields known at judgment.
    pub fields: Map<String, Value>,
    /// The deciding rule's line, when a rule decided.
    pub rule_line: Option<u32>,
    /// The copy in force.
    pub robots: Arc<RobotsCopy>,
}

/// `at` in RFC 3339, UTC, to the millisecond.
pub fn time_ms(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

/// The record of `observed` for the writer.
pub fn pending(observed: &Observed<'_>, replica: &str, now: SystemTime) -> Pending {
    let decision = observed.decision;
    let copy = &decision.robots;
    let path = crate::enforce::read_target(observed.target, decision.origin.config.paths)
        .map(|readings| readings.canonical.to_vec())
        .unwrap_or_else(|_| crate::robots::canonicalize(observed.target).into_owned());
    let purposes: Vec<&str> = decision
        .crawler
        .as_ref()
        .map(|crawler| crawler.purposes().iter().map(|p| p.as_str()).collect())
        .unwrap_or_default();
    let verification = verification(decision);
    let mut fields = Map::new();
    let mut put = |name: &str, value: Value| {
        fields.insert(name.to_string(), value);
    };
    put("replica", json!(replica));
    put("time", json!(time_ms(now)));
    put("origin", json!(decision.origin.name()));
    put("host", json!(escaped(observed.host, MAX_CLIENT_FIELD)));
    put(
        "method",
        json!(escaped(observed.method.as_str().as_bytes(), 64)),
    );
    put("path", json!(matcher_form(&path, MAX_PATH)));
    put(
        "path_received",
        json!(escaped(observed.target, MAX_CLIENT_FIELD)),
    );
    put("client", json!(observed.client.map(|c| c.to_string())));
    put(
        "client_prefix",
        json!(observed.client.map(|c| ipnet::IpNet::from(c).to_string())),
    );
    put(
        "user_agent",
        json!(escaped(observed.user_agent, MAX_CLIENT_FIELD)),
    );
    put(
        "crawler",
        json!(decision.crawler.as_ref().map(|c| c.name().to_string())),
    );
    put("purposes", json!(purposes));
    put("verification", verification);
    put("decision", json!(decision.outcome.as_str()));
    put("status", json!(observed.status));
    put("read_robots", json!(observed.read_robots.map(time_ms)));
    put("response_signal", response_signal(decision));
    put("strikes", json!(observed.ban_strikes));
    put(
        "robots",
        json!({
            "fetched_at": copy.fetched_at.map(time_ms),
            "source": escaped(copy.source.as_bytes(), MAX_CLIENT_FIELD),
            "outcome": copy.outcome.as_str(),
        }),
    );
    Pending {
        fields,
        // A refusal by the page's response headers names no line of robots.txt.
        rule_line: decision
            .rule
            .as_ref()
            .filter(|rule| rule.directive != RESPONSE_HEADER_RULE)
            .map(|rule| rule.line),
        robots: copy.clone(),
    }
}

/// For a request the origin's response headers refused (`response_signals`), the preference
/// that refused it as the response carried it (`Content-Usage: train-ai=n`); else null.
fn response_signal(decision: &Decision) -> Value {
    match &decision.rule {
        Some(rule) if rule.directive == RESPONSE_HEADER_RULE => {
            json!(escaped(rule.pattern.as_bytes(), MAX_CLIENT_FIELD))
        }
        _ => Value::Null,
    }
}

/// `verification`: the verdict, the sentence that says how, and what a verified claim stood on:
/// `method` (`range_list`, `reverse_dns`, `web_bot_auth`) with the list and its fetch time, the
/// reverse DNS name, or the signing agent and its key id (the signature's `keyid`).
fn verification(decision: &Decision) -> Value {
    let checked = decision.verification.as_deref();
    let mut value = json!({
        "verdict": decision.verification_result().map(|r| r.as_str()),
        "how": checked.map(|v| escaped(v.how.as_bytes(), MAX_CLIENT_FIELD)),
        "method": Value::Null,
    });
    let by = match checked.and_then(|v| v.by.as_ref()) {
        Some(VerifiedBy::RangeList { list, fetched_at }) => json!({
            "method": "range_list",
            "list": escaped(list.as_bytes(), MAX_CLIENT_FIELD),
            "list_fetched_at": fetched_at.map(time_ms),
        }),
        Some(VerifiedBy::ReverseDns { name }) => json!({
            "method": "reverse_dns",
            "name": escaped(name.as_bytes(), MAX_CLIENT_FIELD),
        }),
        Some(VerifiedBy::WebBotAuth { agent, keyid }) => json!({
            "method": "web_bot_auth",
            "agent": escaped(agent.as_bytes(), MAX_CLIENT_FIELD),
            "key_id": keyid.as_ref().map(|k| escaped(k.as_bytes(), MAX_CLIENT_FIELD)),
        }),
        _ => Value::Null,
    };
    if let (Value::Object(value), Value::Object(by)) = (&mut value, by) {
        value.extend(by);
    }
    value
}

/// Client bytes as one bounded line of text: printable ASCII as is, a backslash doubled, every
/// other byte (control characters, bytes of UTF-8 or invalid UTF-8) as `\xNN`; beyond `max`
/// bytes cut, with how long it was.
pub fn escaped(bytes: &[u8], max: usize) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len().min(max) + 16);
    for &byte in bytes.iter().take(max) {
        match byte {
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(byte)),
            _ => {
                let _ = write!(out, "\\x{byte:02x}");
            }
        }
    }
    if bytes.len() > max {
        let _ = write!(out, "... ({} bytes)", bytes.len());
    }
    out
}

/// A canonical path as the matcher compares it: bytes outside printable ASCII percent-escaped
/// (the matcher escapes patterns so), at most `max` bytes.
pub fn matcher_form(path: &[u8], max: usize) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(path.len().min(max));
    for &byte in path.iter().take(max) {
        if (0x21..=0x7e).contains(&byte) {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// Line `number` (1-based) of a robots.txt body as the engine numbers lines (LF, CR and CRLF
/// end a line; a leading UTF-8 byte order mark is skipped), without its end; `None` past the
/// last line.
pub fn robots_line(body: &[u8], number: u32) -> Option<&[u8]> {
    let mut start = 0;
    for (index, &byte) in [0xEF_u8, 0xBB, 0xBF].iter().enumerate() {
        if body.get(index) == Some(&byte) {
            start = index + 1;
        } else {
            break;
        }
    }
    let mut line = 0_u32;
    let mut line_start = start;
    let mut last_was_cr = false;
    let mut position = start;
    while let Some(offset) = memchr::memchr2(b'\n', b'\r', &body[position..]) {
        let end = position + offset;
        let byte = body[end];
        let crlf_continuation = end == line_start && last_was_cr && byte == b'\n';
        if !crlf_continuation {
            line += 1;
            if line == number {
                return Some(&body[line_start..end]);
            }
        }
        last_was_cr = byte == b'\r';
        position = end + 1;
        line_start = position;
    }
    (line + 1 == number).then(|| &body[line_start..])
}

/// The `User-agent` values (as written) of the group holding the rule on line `number`.
pub fn group_agents(parsed: &crate::robots::RobotsTxt, number: u32) -> Vec<String> {
    parsed
        .groups
        .iter()
        .find(|group| group.rules.iter().any(|rule| rule.line == number))
        .map(|group| {
            group
                .agents
                .iter()
                .map(|agent| escaped(agent.raw.as_bytes(), 256))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_bytes_stay_one_bounded_line() {
        let mut hostile = b"a\nb\r\x00\x1b[31m\\\xff\xfe".to_vec();
        hostile.extend(std::iter::repeat_n(b'x', 8 * 1024));
        let text = escaped(&hostile, MAX_CLIENT_FIELD);
        assert!(
            text.starts_with("a\\x0ab\\x0d\\x00\\x1b[31m\\\\\\xff\\xfe"),
            "{text}"
        );
        assert!(text.ends_with(&format!("... ({} bytes)", hostile.len())));
        assert!(text.len() < MAX_CLIENT_FIELD * 4 + 32);
        assert!(!text.chars().any(char::is_control));
        assert_eq!(matcher_form(b"/a b\xff", 100), "/a%20b%FF");
    }

    #[test]
    fn lines_are_numbered_as_the_engine_numbers_them() {
        let body = b"\xEF\xBB\xBFUser-agent: *\r\nDisallow: /a\rAllow: /b\n\nDisallow: /c";
        assert_eq!(robots_line(body, 1), Some(&b"User-agent: *"[..]));
        assert_eq!(robots_line(body, 2), Some(&b"Disallow: /a"[..]));
        assert_eq!(robots_line(body, 3), Some(&b"Allow: /b"[..]));
        assert_eq!(robots_line(body, 4), Some(&b""[..]));
        assert_eq!(robots_line(body, 5), Some(&b"Disallow: /c"[..]));
        assert_eq!(robots_line(body, 6), None);
        let parsed = crate::robots::RobotsTxt::parse(body);
        for rule in parsed.groups.iter().flat_map(|g| &g.rules) {
            let line = robots_line(body, rule.line).expect("the rule's line");
            assert!(line.ends_with(rule.pattern.as_bytes()), "{rule:?}");
        }
        assert_eq!(group_agents(&parsed, 5), vec!["*".to_string()]);
    }
}
