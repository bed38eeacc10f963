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

/// Why a preview body is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// A part that is not UTF-8: which part, and where the valid text ends.
    NotUtf8 {
        /// The part (`the JSON body`, `the candidate robots.txt`).
        what: &'static str,
        /// The byte where the valid text ends.
        at: usize,
    },
    /// JSON that is not `{"robots": "...", "config": "..."}` (the parser's reason).
    NotCandidate(String),
    /// A media type that is not taken (as sent, lower case).
    MediaType(String),
    /// The candidate robots.txt is not one the engine would read as sent.
    Robots(RobotsTextError),
    /// The config fragment's length, over [`crate::config::MAX_FRAGMENT_BYTES`].
    FragmentTooLarge(usize),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotUtf8 { what, at } => write!(f, "{what} is not valid UTF-8 (at byte {at})"),
            Self::NotCandidate(e) => write!(
                f,
                "the JSON body is not {{\"robots\": \"...\", \"config\": \"...\"}}: {e}"
            ),
            Self::MediaType(media) => write!(
                f,
                "Content-Type `{}` is not taken: send the robots.txt as text/plain, or \
                 application/json {{\"robots\": \"...\", \"config\": \"...\"}}",
                media.escape_debug()
            ),
            Self::Robots(e) => e.fmt(f),
            Self::FragmentTooLarge(len) => write!(
                f,
                "the config fragment is {len} bytes, more than {} bytes",
                crate::config::MAX_FRAGMENT_BYTES
            ),
        }
    }
}

impl std::error::Error for BodyError {}

/// Why a candidate robots.txt is not one the engine would read as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RobotsTextError {
    /// Its length, over [`MAX_ROBOTS_BYTES`].
    TooLarge(usize),
    /// A control byte, and where it is.
    Binary {
        /// The byte.
        byte: u8,
        /// Its offset.
        at: usize,
    },
}

impl std::fmt::Display for RobotsTextError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLarge(len) => write!(
                f,
                "the candidate robots.txt is {len} bytes, more than the engine's cap of {} KiB: \
                 crawlers ignore what follows it",
                MAX_ROBOTS_BYTES / 1024
            ),
            Self::Binary { byte, at } => write!(
                f,
                "the candidate robots.txt is binary data (control byte 0x{byte:02x} at byte {at}), not text"
            ),
        }
    }
}

impl std::error::Error for RobotsTextError {}

/// Reads a body sent with `content_type`: JSON when the media type is `application/json`,
/// a robots.txt otherwise (`text/plain`, or none).
pub fn parse(content_type: Option<&[u8]>, body: &[u8]) -> Result<Candidate, BodyError> {
    let media = content_type
        .map(|value| {
            let value = value.split(|&b| b == b';').next().unwrap_or_default();
            String::from_utf8_lossy(value.trim_ascii()).to_ascii_lowercase()
        })
        .unwrap_or_default();
    let candidate = match media.as_str() {
        "application/json" => {
            let text = utf8(body, "the JSON body")?;
            let parsed: JsonCandidate =
                serde_json::from_str(text).map_err(|e| BodyError::NotCandidate(e.to_string()))?;
            Candidate {
                robots: parsed.robots,
                config: parsed.config,
            }
        }
        "" | "text/plain" => Candidate {
            robots: Some(utf8(body, "the candidate robots.txt")?.to_string()),
            config: None,
        },
        other => return Err(BodyError::MediaType(other.to_owned())),
    };
    if let Some(robots) = &candidate.robots {
        check_robots(robots.as_bytes()).map_err(BodyError::Robots)?;
    }
    if let Some(config) = &candidate.config {
        if config.len() > crate::config::MAX_FRAGMENT_BYTES {
            return Err(BodyError::FragmentTooLarge(config.len()));
        }
    }
    Ok(candidate)
}

/// A candidate robots.txt the engine would read as sent: at most [`MAX_ROBOTS_BYTES`], text
/// (no NUL or other control byte than tab, line feed, carriage return and form feed).
pub fn check_robots(robots: &[u8]) -> Result<(), RobotsTextError> {
    if robots.len() > MAX_ROBOTS_BYTES {
        return Err(RobotsTextError::TooLarge(robots.len()));
    }
    if let Some(at) = robots
        .iter()
        .position(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c) || b == 0x7f)
    {
        return Err(RobotsTextError::Binary {
            byte: robots[at],
            at,
        });
    }
    Ok(())
}

fn utf8<'a>(body: &'a [u8], what: &'static str) -> Result<&'a str, BodyError> {
    std::str::from_utf8(body).map_err(|e| BodyError::NotUtf8 {
        what,
        at: e.valid_up_to(),
    })
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
        let said = |content_type: Option<&[u8]>, body: &[u8]| {
            parse(content_type, body).map_err(|e| (e.clone(), e.to_string()))
        };
        let (error, text) = said(None, &big).unwrap_err();
        assert_eq!(
            error,
            BodyError::Robots(RobotsTextError::TooLarge(MAX_ROBOTS_BYTES + 1))
        );
        assert!(text.contains("500 KiB"), "{text}");
        let (error, text) = said(None, b"User-agent: *\x00\x01").unwrap_err();
        assert_eq!(
            error,
            BodyError::Robots(RobotsTextError::Binary { byte: 0, at: 13 })
        );
        assert!(text.contains("binary"), "{text}");
        let (error, text) = said(None, b"User-agent: \xff\xfe").unwrap_err();
        assert!(
            matches!(error, BodyError::NotUtf8 { at: 12, .. }),
            "{error:?}"
        );
        assert!(text.contains("UTF-8"), "{text}");
        let (error, text) = said(Some(b"application/json"), br#"{"robot": "x"}"#).unwrap_err();
        assert!(matches!(error, BodyError::NotCandidate(_)), "{error:?}");
        assert!(text.contains("unknown field `robot`"), "{text}");
        let (error, text) = said(Some(b"image/png"), b"x").unwrap_err();
        assert_eq!(error, BodyError::MediaType("image/png".to_owned()));
        assert!(text.contains("image/png"), "{text}");
        let fragment =
            serde_json::json!({"config": "#".repeat(crate::config::MAX_FRAGMENT_BYTES + 1)});
        let (error, _) =
            said(Some(b"application/json"), fragment.to_string().as_bytes()).unwrap_err();
        assert_eq!(
            error,
            BodyError::FragmentTooLarge(crate::config::MAX_FRAGMENT_BYTES + 1)
        );
    }
}
