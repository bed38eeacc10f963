//! Checking URLs: one record per URL with its verdict and the rule behind it and, with the `json`
//! feature (on by default), the JSON Lines batch protocol that `robotsguard check --batch` speaks.
//!
//! ```
//! use robotsguard_robots::{check::UrlVerdict, Robots};
//!
//! let robots = Robots::parse(b"User-agent: *\nDisallow: /private\n");
//! let record = UrlVerdict::check(&robots, &["examplebot"], b"https://example.com/private/x?y#z");
//! assert_eq!(record.path, "/private/x?y");
//! assert!(!record.allowed);
//! assert_eq!((record.line, record.directive), (Some(2), Some("Disallow")));
//! assert_eq!(record.group, Some("*"));
//! ```

use crate::{path_params_query, GroupMatch, Robots, Verdict};

#[cfg(feature = "json")]
pub use batch::{Batch, BatchError, LineError};

/// One URL checked against a robots.txt, in a form made for reports: text fields instead of
/// bytes (lossily decoded), the deciding rule spelled out. With the `json` feature it serializes
/// to `{"url", "path", "allowed", "line", "directive", "pattern", "group"}`, absent parts `null`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "json", derive(serde::Serialize))]
pub struct UrlVerdict<'a> {
    /// The URL as given.
    pub url: String,
    /// Its path, params and query: what the rules were matched against ([`path_params_query`]).
    pub path: String,
    /// Whether the crawler may fetch it.
    pub allowed: bool,
    /// The deciding rule's line, if a rule matched.
    pub line: Option<u32>,
    /// The deciding rule's directive (`Allow` or `Disallow`), if a rule matched.
    pub directive: Option<&'static str>,
    /// The deciding rule's pattern (after Google's escaping), if a rule matched.
    pub pattern: Option<&'a str>,
    /// The group that decided: the lower-cased agent name, `*`, or `None` when no group applies.
    pub group: Option<&'a str>,
}

impl<'a> UrlVerdict<'a> {
    /// Checks `url` (absolute or a path) for a crawler with ordered product tokens, most specific
    /// first, as [`Robots::verdict`] does.
    pub fn check(robots: &'a Robots, tokens: &[&str], url: &[u8]) -> UrlVerdict<'a> {
        let path = path_params_query(url);
        let verdict = robots.verdict(tokens, &path);
        UrlVerdict::new(url, &path, &verdict)
    }

    /// The record of a verdict already computed for `path`, the path of `url`.
    pub fn new(url: &[u8], path: &[u8], verdict: &Verdict<'a>) -> UrlVerdict<'a> {
        UrlVerdict {
            url: String::from_utf8_lossy(url).into_owned(),
            path: String::from_utf8_lossy(path).into_owned(),
            allowed: verdict.allowed,
            line: verdict.line(),
            directive: verdict.rule.map(|rule| rule.directive.as_str()),
            pattern: verdict.rule.map(|rule| rule.pattern),
            group: match verdict.group {
                GroupMatch::Agent(name) => Some(name),
                GroupMatch::Global => Some("*"),
                GroupMatch::None => None,
            },
        }
    }
}

#[cfg(feature = "json")]
mod batch {
    use std::io::{self, BufRead, Write};

    use base64::Engine as _;

    use super::UrlVerdict;
    use crate::{MatchMode, Robots, RobotsTxt};

    /// Answers JSON Lines batches: each input line is an object `{"robots": "...", "agent":
    /// "...", "url": "..."}` (or `"robots_b64"` with the file in base64, which wins over
    /// `robots`), each answer one line, in order: the [`UrlVerdict`] object, or `{"error":
    /// "..."}` for a line that cannot be answered. Blank lines are skipped.
    ///
    /// Consecutive lines with the same robots.txt reuse its compiled copy, so a corpus grouped
    /// by file parses each file once.
    ///
    /// ```
    /// use robotsguard_robots::{check::Batch, MatchMode, DEFAULT_MAX_SIZE};
    ///
    /// let input = concat!(
    ///     r#"{"robots": "User-agent: *\nDisallow: /private", "agent": "FooBot", "url": "/private/x"}"#,
    ///     "\n",
    ///     r#"{"robots": "User-agent: *\nDisallow: /private", "url": "/"}"#,
    ///     "\n",
    /// );
    /// let mut out = Vec::new();
    /// Batch::new(MatchMode::Exact, DEFAULT_MAX_SIZE).run(input.as_bytes(), &mut out)?;
    /// let answers: Vec<serde_json::Value> = out
    ///     .split(|&b| b == b'\n')
    ///     .filter(|line| !line.is_empty())
    ///     .map(serde_json::from_slice)
    ///     .collect::<Result<_, _>>()?;
    /// assert_eq!(answers[0]["allowed"], false);
    /// assert_eq!(answers[0]["line"], 2);
    /// assert_eq!(answers[1]["error"], "missing field `agent`");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[derive(Debug)]
    pub struct Batch {
        mode: MatchMode,
        max_size: usize,
        /// The last robots.txt body and its compiled copy.
        last: Option<(Vec<u8>, Robots)>,
    }

    #[derive(Debug, serde::Deserialize)]
    struct Line {
        robots: Option<String>,
        robots_b64: Option<String>,
        agent: Option<String>,
        url: Option<String>,
    }

    /// Why one batch line has no verdict; its text is the answer's `error`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct LineError(String);

    impl std::fmt::Display for LineError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }

    impl std::error::Error for LineError {}

    /// Why a batch stopped before the end of its input.
    #[derive(Debug)]
    #[non_exhaustive]
    pub enum BatchError {
        /// Reading the input failed.
        Read(io::Error),
        /// Writing an answer failed.
        Write(io::Error),
    }

    impl std::fmt::Display for BatchError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            match self {
                BatchError::Read(e) => write!(f, "cannot read input: {e}"),
                BatchError::Write(e) => write!(f, "cannot write output: {e}"),
            }
        }
    }

    impl std::error::Error for BatchError {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            match self {
                BatchError::Read(e) | BatchError::Write(e) => Some(e),
            }
        }
    }

    impl Batch {
        /// A batch matching in `mode` and parsing at most `max_size` bytes of each robots.txt
        /// (never less than [`crate::DEFAULT_MAX_SIZE`]).
        pub fn new(mode: MatchMode, max_size: usize) -> Batch {
            Batch {
                mode,
                max_size,
                last: None,
            }
        }

        /// Answers one input line (without its line end).
        pub fn answer(&mut self, line: &[u8]) -> Result<UrlVerdict<'_>, LineError> {
            let input: Line = serde_json::from_slice(line)
                .map_err(|e| LineError(format!("invalid JSON: {e}")))?;
            let body = match (&input.robots_b64, input.robots) {
                (Some(encoded), _) => base64::engine::general_purpose::STANDARD
                    .decode(encoded.trim())
                    .map_err(|e| LineError(format!("invalid robots_b64: {e}")))?,
                (None, Some(text)) => text.into_bytes(),
                (None, None) => {
                    return Err(LineError("missing field `robots` (or `robots_b64`)".into()))
                }
            };
            let agent = input
                .agent
                .ok_or_else(|| LineError("missing field `agent`".into()))?;
            let url = input
                .url
                .ok_or_else(|| LineError("missing field `url`".into()))?;
            // Taken and put back, so the copy kept can be lent to the answer.
            let robots = match self.last.take() {
                Some((cached, robots)) if cached == body => &self.last.insert((cached, robots)).1,
                _ => {
                    let parsed = RobotsTxt::parse_with_limit(&body, self.max_size);
                    &self
                        .last
                        .insert((body, Robots::compile(&parsed, self.mode)))
                        .1
                }
            };
            Ok(UrlVerdict::check(robots, &[agent.as_str()], url.as_bytes()))
        }

        /// Answers every line of `input` on `out`, one JSON line each, then flushes `out`. Lines
        /// that cannot be answered get an `error` answer; only I/O failures stop the batch.
        pub fn run(&mut self, input: impl BufRead, out: &mut impl Write) -> Result<(), BatchError> {
            for line in input.split(b'\n') {
                let line = line.map_err(BatchError::Read)?;
                let line = line.trim_ascii();
                if line.is_empty() {
                    continue;
                }
                let written = match self.answer(line) {
                    Ok(record) => serde_json::to_writer(&mut *out, &record),
                    Err(error) => {
                        serde_json::to_writer(&mut *out, &serde_json::json!({ "error": error.0 }))
                    }
                };
                written.map_err(|e| BatchError::Write(e.into()))?;
                writeln!(out).map_err(BatchError::Write)?;
            }
            out.flush().map_err(BatchError::Write)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_name_the_group_and_rule_or_say_none_applies() {
        let robots =
            Robots::parse(b"User-agent: FooBot\nAllow: /\n\nUser-agent: BarBot\nDisallow: /x$\n");
        let foo = UrlVerdict::check(&robots, &["foobot"], b"https://e.com/a");
        assert_eq!(foo.group, Some("foobot"));
        assert_eq!(
            (foo.line, foo.directive, foo.pattern),
            (Some(2), Some("Allow"), Some("/"))
        );
        let bar = UrlVerdict::check(&robots, &["barbot"], b"/x");
        assert!(!bar.allowed);
        assert_eq!(bar.pattern, Some("/x$"));
        let other = UrlVerdict::check(&robots, &["otherbot"], b"//e.com?q");
        assert_eq!(other.path, "/?q");
        assert_eq!(
            (other.allowed, other.group, other.line, other.directive),
            (true, None, None, None)
        );
    }

    #[cfg(feature = "json")]
    mod batch {
        use base64::Engine as _;

        use crate::check::Batch;
        use crate::{MatchMode, DEFAULT_MAX_SIZE};

        fn answers(input: &str, mode: MatchMode) -> Vec<serde_json::Value> {
            let mut out = Vec::new();
            let result = Batch::new(mode, DEFAULT_MAX_SIZE).run(input.as_bytes(), &mut out);
            assert!(result.is_ok(), "{result:?}");
            String::from_utf8_lossy(&out)
                .lines()
                .map(|l| serde_json::from_str(l).unwrap_or(serde_json::Value::Null))
                .collect()
        }

        #[test]
        fn answers_every_line_in_order_and_survives_bad_ones() {
            let b64 = base64::engine::general_purpose::STANDARD
                .encode(b"User-agent: *\nDisallow: /b64\n");
            let input = format!(
                "{}\nnot json\n\n  {}  \n{{\"robots\": \"x\"}}\n{}\n{}\n{}",
                r#"{"robots": "User-agent: *\nDisallow: /private", "agent": "FooBot", "url": "https://e.com/private/x"}"#,
                r#"{"robots": "User-agent: *\nDisallow: /private", "agent": "FooBot", "url": "/public"}"#,
                format_args!(
                    r#"{{"robots": "ignored", "robots_b64": "{b64}", "agent": "a", "url": "/b64"}}"#
                ),
                r#"{"robots_b64": "!!!", "agent": "a", "url": "/"}"#,
                r#"{"robots": "User-agent: *", "agent": "a"}"#,
            );
            let answers = answers(&input, MatchMode::Exact);
            assert_eq!(answers.len(), 7, "{answers:?}");
            assert_eq!(answers[0]["allowed"], false);
            assert_eq!(answers[0]["line"], 2);
            assert_eq!(answers[0]["url"], "https://e.com/private/x");
            assert_eq!(answers[0]["path"], "/private/x");
            assert_eq!(answers[0]["directive"], "Disallow");
            assert_eq!(answers[0]["pattern"], "/private");
            assert_eq!(answers[0]["group"], "*");
            assert!(answers[1]["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("invalid JSON")));
            assert_eq!(answers[2]["allowed"], true);
            assert_eq!(answers[2]["line"], serde_json::Value::Null);
            assert_eq!(answers[3]["error"], "missing field `agent`");
            assert_eq!(answers[4]["allowed"], false);
            assert!(answers[5]["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("invalid robots_b64")));
            assert_eq!(answers[6]["error"], "missing field `url`");
        }

        #[test]
        fn a_changed_robots_txt_is_compiled_again_and_the_mode_applies() {
            let line = |robots: &str, url: &str| {
                serde_json::json!({"robots": robots, "agent": "a", "url": url}).to_string()
            };
            let input = [
                line("User-agent: *\nDisallow: /one", "/one"),
                line("User-agent: *\nDisallow: /one", "/two"),
                line("User-agent: *\nDisallow: /two", "/two"),
                line("User-agent: *\nDisallow: /two", "/%74wo"),
            ]
            .join("\n");
            let allowed = |mode| -> Vec<serde_json::Value> {
                answers(&input, mode)
                    .iter()
                    .map(|a| a["allowed"].clone())
                    .collect()
            };
            assert_eq!(allowed(MatchMode::Exact), [false, true, false, true]);
            assert_eq!(allowed(MatchMode::Canonical), [false, true, false, false]);
        }

        /// `/dev/full` refuses every write, as a full disk does.
        #[cfg(target_os = "linux")]
        #[test]
        fn a_failing_writer_stops_the_batch_with_a_write_error() {
            let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
            let Ok(mut full) = full else {
                panic!("cannot open /dev/full: {full:?}");
            };
            let input = "{\"robots\": \"\", \"agent\": \"a\", \"url\": \"/\"}\nnot read\n";
            let error = Batch::new(MatchMode::Exact, DEFAULT_MAX_SIZE)
                .run(input.as_bytes(), &mut full)
                .err();
            assert!(
                matches!(error, Some(crate::check::BatchError::Write(_))),
                "{error:?}"
            );
            let message = error.map(|e| e.to_string()).unwrap_or_default();
            assert!(message.starts_with("cannot write output: "), "{message}");
        }
    }
}
