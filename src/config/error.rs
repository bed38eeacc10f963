//! Config errors: what is wrong, where in the file, and how to fix it.

use std::fmt;

/// A 1-based line and column; 0:0 when unknown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Pos {
    pub line: usize,
    pub column: usize,
}

impl Pos {
    pub(crate) const UNKNOWN: Pos = Pos { line: 0, column: 0 };

    pub(crate) fn new(line: usize, column: usize) -> Self {
        Pos { line, column }
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One problem in a config file, pointing at the offending line and column.
///
/// `line` and `column` are 1-based; both are 0 when the problem has no
/// position (the file could not be read, for instance).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file as named on the command line (or the builder's name for a built config).
    pub file: String,
    /// 1-based; 0 when the problem has no position.
    pub line: usize,
    /// 1-based; 0 when the problem has no position.
    pub column: usize,
    /// What is wrong.
    pub message: String,
    /// How to fix it, when there is an obvious way (a close key name, the allowed range).
    pub hint: Option<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(
                f,
                "{}:{}:{}: {}",
                self.file, self.line, self.column, self.message
            )?;
        } else {
            write!(f, "{}: {}", self.file, self.message)?;
        }
        if let Some(hint) = &self.hint {
            write!(f, " ({hint})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// Every problem found in one config file, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// A located-nowhere-yet problem returned by the small parsers (durations,
/// sizes, addresses); the caller knows the node and adds the position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Problem {
    pub message: String,
    pub hint: Option<String>,
}

impl Problem {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Problem {
            message: message.into(),
            hint: None,
        }
    }

    pub(crate) fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Replaces the hint, e.g. to keep an inner problem's hint when
    /// wrapping its message.
    pub(crate) fn with_hint(mut self, hint: Option<String>) -> Self {
        self.hint = hint;
        self
    }
}

/// Collects errors while the whole file is checked, so one run reports
/// everything instead of making the operator fix problems one at a time.
pub(crate) struct Sink {
    file: String,
    errors: Vec<ConfigError>,
    /// Only the config file is checked: no other file may be opened (the Redis `url_file`).
    pub config_only: bool,
}

impl Sink {
    pub(crate) fn new(file: &str) -> Self {
        Sink {
            file: file.to_owned(),
            errors: Vec::new(),
            config_only: false,
        }
    }

    pub(crate) fn error(&mut self, pos: Pos, message: impl Into<String>) {
        self.push(pos, message.into(), None);
    }

    pub(crate) fn error_hint(
        &mut self,
        pos: Pos,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.push(pos, message.into(), Some(hint.into()));
    }

    pub(crate) fn problem(&mut self, pos: Pos, problem: Problem) {
        self.push(pos, problem.message, problem.hint);
    }

    /// Escapes control characters in both texts: most quote file text with [`quote`], but a hint
    /// may echo a value (`write {value}:8080`), and none may carry a terminal escape to the
    /// operator's screen or a newline into a log line. Escaping is idempotent, so quoted text is
    /// unchanged.
    fn push(&mut self, pos: Pos, message: String, hint: Option<String>) {
        self.errors.push(ConfigError {
            file: self.file.clone(),
            line: pos.line,
            column: pos.column,
            message: escape_controls(&message),
            hint: hint.map(|hint| escape_controls(&hint)),
        });
    }

    /// How many errors were reported so far.
    pub(crate) fn count(&self) -> usize {
        self.errors.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// Errors sorted by position: checks run section by section, but people
    /// read the file top to bottom. The sort is stable, so two errors at one
    /// spot keep the order they were found in.
    ///
    /// At most `MAX_REPORTED` errors are kept, plus a line saying how many
    /// were left out: a file of thousands of bad keys should not produce
    /// thousands of lines.
    pub(crate) fn into_errors(mut self) -> ConfigErrors {
        const MAX_REPORTED: usize = 200;
        self.errors.sort_by_key(|e| (e.line, e.column));
        if self.errors.len() > MAX_REPORTED {
            let left_out = self.errors.len() - MAX_REPORTED;
            self.errors.truncate(MAX_REPORTED);
            self.errors.push(ConfigError {
                file: self.file,
                line: 0,
                column: 0,
                message: format!("{left_out} more errors not shown"),
                hint: None,
            });
        }
        ConfigErrors(self.errors)
    }
}

/// Escapes control characters (newlines, terminal escapes) and leaves all
/// other text, non-ASCII included, as it is.
pub(crate) fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Quotes text taken from the file for use in a message. Control characters
/// are escaped and long text is cut, so a hostile or broken file cannot put
/// terminal escapes or megabytes of text into logs.
pub(crate) fn quote(text: &str) -> String {
    const MAX_CHARS: usize = 60;
    let mut out = String::from("`");
    for (i, c) in text.chars().enumerate() {
        if i == MAX_CHARS {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.push('`');
    out
}

/// The candidate closest to `word` by edit distance, if it is close enough to
/// be a plausible typo (about one edit per three characters, at least one).
pub(crate) fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    // Suggestions are for typos; a long key is not one, and skipping it keeps
    // the quadratic distance computation cheap on hostile input.
    if word.chars().count() > 64 {
        return None;
    }
    let folded = word.to_ascii_lowercase().replace('-', "_");
    let budget = (word.chars().count() / 3).clamp(1, 3);
    candidates
        .iter()
        // Optimal string alignment: a swap of two neighbours (`tsl` for `tls`) is one edit.
        .map(|c| (strsim::osa_distance(&folded, c), *c))
        .filter(|(d, _)| *d <= budget)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// "did you mean `x`?" text for an unknown word, or nothing.
pub(crate) fn did_you_mean(word: &str, candidates: &[&str]) -> String {
    match closest(word, candidates) {
        Some(c) => format!("; did you mean `{c}`?"),
        None => String::new(),
    }
}

/// "expected one of: a, b, c" hint text.
pub(crate) fn one_of(candidates: &[&str]) -> String {
    format!("expected one of: {}", candidates.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_with_and_without_position_and_hint() {
        let e = ConfigError {
            file: "robotsguard.yaml".into(),
            line: 12,
            column: 7,
            message: "unknown key `upstreams` in origin; did you mean `upstream`?".into(),
            hint: Some("expected one of: name, upstream".into()),
        };
        assert_eq!(
            e.to_string(),
            "robotsguard.yaml:12:7: unknown key `upstreams` in origin; did you mean `upstream`? \
             (expected one of: name, upstream)"
        );
        let e = ConfigError {
            file: "x.yaml".into(),
            line: 0,
            column: 0,
            message: "cannot read".into(),
            hint: None,
        };
        assert_eq!(e.to_string(), "x.yaml: cannot read");
        let all = ConfigErrors(vec![e.clone(), e]);
        assert_eq!(all.to_string(), "x.yaml: cannot read\nx.yaml: cannot read");
    }

    #[test]
    fn closest_suggests_only_plausible_typos() {
        let keys = [
            "name", "hosts", "upstream", "tls", "mode", "block", "robots",
        ];
        assert_eq!(closest("upstreams", &keys), Some("upstream"));
        assert_eq!(closest("host", &keys), Some("hosts"));
        assert_eq!(closest("Mode", &keys), Some("mode"));
        assert_eq!(closest("completely_else", &keys), None);
        assert_eq!(closest("x", &keys), None);
        assert_eq!(
            closest("on-unreachable", &["on_unreachable"]),
            Some("on_unreachable")
        );
        assert_eq!(closest(&"a".repeat(1000), &keys), None);
        // A swap of two neighbours is one edit.
        assert_eq!(closest("tsl", &keys), Some("tls"));
        assert_eq!(closest("moed", &keys), Some("mode"));
    }

    #[test]
    fn quote_escapes_and_truncates() {
        assert_eq!(quote("a\u{1b}[31m"), "`a\\u{1b}[31m`");
        assert_eq!(quote(&"x".repeat(100)).chars().count(), 60 + 3);
    }
}
