//! The body of `POST /robots/preview`, read as hostile: a candidate robots.txt
//! (`text/plain`) or a JSON object `{"robots": "...", "config": "..."}`, each part optional.
//! Anything else is refused with a sentence naming the problem.

use serde::Deserialize;

/// The engine's cap: RFC 9309 crawlers read at least 500 KiB, robotsguard parses that much.
pub const MAX_ROBOTS_BYTES: usize = crate::robots::DEFAULT_MAX_SIZE;

/// The largest body read: a robots.txt at the cap and a config fragment, JSON-escaped.
pub const MAX_BODY_BYTES: usize = 2 * (MAX_ROBOTS_BYTES + crate::config::MAX_FRAGMENT_BYTES);

/// What a preview tries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Candidate {
    /// A robots.txt to put in force instead of the origin's copy.
    pub robots: Option<String>,
    /// A YAML mapping of origin keys to override (`policy: {...}`).
    pub config: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonCandidate {
    robots: Option<String>,
    config: Option<String>,
}

/// Reads a body sent with `content_type`: JSON when the media type is `application/json`,
/// a robots.txt otherwise (`text/plain`, or none).
pub fn parse(content_type: Option<&[u8]>, body: &[u8]) -> Result<Candidate, String> {
    let media = content_type
        .map(|value| {
            let value = value.split(|&b| b == b';').next().unwrap_or_default();
            String::from_utf8_lossy(value.trim_ascii()).to_ascii_lowercase()
        })
        .unwrap_or_default();
    let candidate = match media.as_str() {
        "application/json" => {
            let text = utf8(body, "the JSON body")?;
            let parsed: JsonCandidate = serde_json::from_str(text).map_err(|e| {
                format!("the JSON body is not {{\"robots\": \"...\", \"config\": \"...\"}}: {e}")
            })?;
            Candidate {
                robots: parsed.robots,
                config: parsed.config,
            }
        }
        "" | "text/plain" => Candidate {
            robots: Some(utf8(body, "the candidate robots.txt")?.to_string()),
            config: None,
        },
        other => {
            return Err(format!(
                "Content-Type `{}` is not taken: send the robots.txt as text/plain, or \
                 application/json {{\"robots\": \"...\", \"config\": \"...\"}}",
                other.escape_debug()
            ))
        }
    };
    if let Some(robots) = &candidate.robots {
        check_robots(robots.as_bytes())?;
    }
    if let Some(config) = &candidate.config {
        if config.len() > crate::config::MAX_FRAGMENT_BYTES {
            return Err(format!(
                "the config fragment is {} bytes, more than {} bytes",
                config.len(),
                crate::config::MAX_FRAGMENT_BYTES
            ));
        }
    }
    Ok(candidate)
}

/// A candidate robots.txt the engine would read as sent: at most [`MAX_ROBOTS_BYTES`], text
/// (no NUL or other control byte than tab, line feed, carriage return and form feed).
pub fn check_robots(robots: &[u8]) -> Result<(), String> {
    if robots.len() > MAX_ROBOTS_BYTES {
        return Err(format!(
            "the candidate robots.txt is {} bytes, more than the engine's cap of {} KiB: \
             crawlers ignore what follows it",
            robots.len(),
            MAX_ROBOTS_BYTES / 1024
        ));
    }
    if let Some(at) = robots
        .iter()
        .position(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c) || b == 0x7f)
    {
        return Err(format!(
            "the candidate robots.txt is binary data (control byte 0x{:02x} at byte {at}), not text",
            robots[at]
        ));
    }
    Ok(())
}

fn utf8<'a>(body: &'a [u8], what: &str) -> Result<&'a str, String> {
    std::str::from_utf8(body)
        .map_err(|e| format!("{what} is not valid UTF-8 (at byte {})", e.valid_up_to()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json_bodies() {
        let text = parse(
            Some(b"text/plain; charset=utf-8"),
            b"User-agent: *\nDisallow: /\n",
        );
        assert_eq!(
            text.unwrap().robots.as_deref(),
            Some("User-agent: *\nDisallow: /\n")
        );
        let json = parse(
            Some(b"application/json"),
            br#"{"config": "policy: {purposes: {search: block}}"}"#,
        )
        .unwrap();
        assert_eq!(json.robots, None);
        assert_eq!(
            json.config.as_deref(),
            Some("policy: {purposes: {search: block}}")
        );
    }

    #[test]
    fn bad_bodies_name_the_problem() {
        let big = vec![b'a'; MAX_ROBOTS_BYTES + 1];
        assert!(parse(None, &big).unwrap_err().contains("500 KiB"));
        assert!(parse(None, b"User-agent: *\x00\x01")
            .unwrap_err()
            .contains("binary"));
        assert!(parse(None, b"User-agent: \xff\xfe")
            .unwrap_err()
            .contains("UTF-8"));
        assert!(parse(Some(b"application/json"), br#"{"robot": "x"}"#)
            .unwrap_err()
            .contains("unknown field `robot`"));
        assert!(parse(Some(b"image/png"), b"x")
            .unwrap_err()
            .contains("image/png"));
    }
}
