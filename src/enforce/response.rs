//! A page's own AI preferences, read off the origin's response head: `Content-Usage` (aipref's
//! attachment, the vocabulary of robots.txt's `Content-Usage` line) and `X-Robots-Tag`'s `noai`
//! and `noimageai` (optionally scoped, `X-Robots-Tag: GPTBot: noai`). Pure: the head in, what
//! the page refuses out; [`crate::judge::response`] counts and answers.
//!
//! The origin is the site's own server, but what it sends may come from its users (a UGC page's
//! headers, a proxy chain's repeats): every read is bounded in lines and bytes, and nothing here
//! allocates per byte of a header.

use http::{HeaderMap, HeaderName};

use crate::crawlers::Purpose;
use crate::robots::{content_usage_says, parse_content_usage_header, Use};

/// `Content-Usage`.
pub const CONTENT_USAGE: HeaderName = HeaderName::from_static("content-usage");
/// `X-Robots-Tag`.
pub const X_ROBOTS_TAG: HeaderName = HeaderName::from_static("x-robots-tag");

/// Lines of each header read at most; later ones are not looked at.
pub const MAX_LINES: usize = 100;
/// Bytes of one header line read at most: a `Content-Usage` line beyond it is malformed, an
/// `X-Robots-Tag` line is read up to it.
pub const MAX_LINE_BYTES: usize = 8 * 1024;
/// Bytes of all the lines of one header read at most.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// Bytes of a header's value a refusal quotes (the body, the log line, the reports' row).
pub const MAX_QUOTED_BYTES: usize = 200;

/// `X-Robots-Tag` directives that take a value after a colon: their name is not a crawler's
/// scope.
const VALUED_DIRECTIVES: [&[u8]; 4] = [
    b"unavailable_after",
    b"max-snippet",
    b"max-image-preview",
    b"max-video-preview",
];

/// Which of a page's signals refuses a use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// `Content-Usage: train-ai=n` (or `search=n`).
    ContentUsage,
    /// `X-Robots-Tag: noai`.
    NoAi,
    /// `X-Robots-Tag: noimageai` on an `image/*` response.
    NoImageAi,
}

impl Signal {
    /// `content_usage`, `noai`, `noimageai`: the metric's `signal` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::ContentUsage => "content_usage",
            Signal::NoAi => "noai",
            Signal::NoImageAi => "noimageai",
        }
    }

    /// The header that carries it, as the standards spell it.
    pub fn header(self) -> &'static str {
        match self {
            Signal::ContentUsage => "Content-Usage",
            Signal::NoAi | Signal::NoImageAi => "X-Robots-Tag",
        }
    }
}

/// One statement of the page refusing a use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRefusal {
    /// The use refused: `TrainAi` or `Search`.
    pub refused: Use,
    /// The signal that refuses it.
    pub signal: Signal,
    /// The header line that says so, printable ASCII, at most [`MAX_QUOTED_BYTES`] (then ending
    /// in `...`).
    pub value: String,
}

/// What a response head says about the page, for one crawler.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageSignals {
    /// The uses the page refuses, the first statement of each: `n` wins over `y` across lines,
    /// as robots.txt's lines combine.
    pub refusals: Vec<PageRefusal>,
    /// `Content-Usage` lines ignored as malformed (invalid Structured Fields, not ASCII, over
    /// [`MAX_LINE_BYTES`]).
    pub malformed: u32,
}

impl PageSignals {
    /// The statement refusing `purpose`, if the page refuses it (`agent` and `other` have no
    /// word in these headers).
    pub fn refusal_of(&self, purpose: Purpose) -> Option<&PageRefusal> {
        let refused = match purpose {
            Purpose::Training => Use::TrainAi,
            Purpose::Search => Use::Search,
            _ => return None,
        };
        self.refusals.iter().find(|r| r.refused == refused)
    }

    fn refuse(&mut self, refused: Use, signal: Signal, value: &[u8]) {
        if self.refusals.iter().any(|r| r.refused == refused) {
            return;
        }
        self.refusals.push(PageRefusal {
            refused,
            signal,
            value: quoted(value),
        });
    }
}

/// Whether a response head carries either header: all a response without them costs (two
/// lookups in its header map).
pub fn carries_signals(headers: &HeaderMap) -> bool {
    headers.contains_key(CONTENT_USAGE) || headers.contains_key(X_ROBOTS_TAG)
}

/// Whether a `Content-Type` is an image's (`image/*`, any case).
pub fn is_image(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|value| {
            let value = value.as_bytes().trim_ascii_start();
            value.len() > 6 && value[..6].eq_ignore_ascii_case(b"image/")
        })
}

/// What `headers` say about the page for a crawler whose robots.txt tokens are `tokens` (a
/// scoped `X-Robots-Tag` applies when its scope is one of them, case-insensitively); `image`:
/// the response is an image (`noimageai` applies).
pub fn read(headers: &HeaderMap, tokens: &[String], image: bool) -> PageSignals {
    let mut out = PageSignals::default();
    let mut budget = MAX_HEADER_BYTES;
    for line in headers.get_all(CONTENT_USAGE).iter().take(MAX_LINES) {
        let bytes = line.as_bytes();
        if bytes.len() > MAX_LINE_BYTES || bytes.len() > budget {
            out.malformed += 1;
            continue;
        }
        budget -= bytes.len();
        let Some(entries) = std::str::from_utf8(bytes)
            .ok()
            .and_then(parse_content_usage_header)
        else {
            out.malformed += 1;
            continue;
        };
        for refused in [Use::TrainAi, Use::Search] {
            if content_usage_says(&entries, refused) == Some(false) {
                out.refuse(refused, Signal::ContentUsage, bytes);
            }
        }
    }
    let mut budget = MAX_HEADER_BYTES;
    for line in headers.get_all(X_ROBOTS_TAG).iter().take(MAX_LINES) {
        if budget == 0 {
            break;
        }
        let bytes = line.as_bytes();
        let read = &bytes[..bytes.len().min(MAX_LINE_BYTES).min(budget)];
        budget -= read.len();
        let said = robots_tag(read, tokens, image);
        if let Some(signal) = said {
            out.refuse(Use::TrainAi, signal, bytes);
        }
    }
    out
}

/// What one `X-Robots-Tag` line says about training for a crawler of `tokens`: `noai`, or
/// `noimageai` on an image, in the line's unscoped part or under a scope naming the crawler.
/// Directives are comma-separated; `name: directive` sets the scope for the rest of the line
/// (unless `name` is a directive that takes a value, `unavailable_after: ...`); a quoted string
/// is never a directive, and commas inside one separate nothing.
pub fn robots_tag(line: &[u8], tokens: &[String], image: bool) -> Option<Signal> {
    let mut scope_applies = true;
    let mut found: Option<Signal> = None;
    for item in split_outside_quotes(line, b',') {
        let mut item = item.trim_ascii();
        if let Some(colon) = find_outside_quotes(item, b':') {
            let name = item[..colon].trim_ascii();
            if !VALUED_DIRECTIVES
                .iter()
                .any(|valued| name.eq_ignore_ascii_case(valued))
            {
                if !is_scope(name) {
                    continue;
                }
                scope_applies = name == b"*"
                    || tokens
                        .iter()
                        .any(|token| name.eq_ignore_ascii_case(token.as_bytes()));
                item = item[colon + 1..].trim_ascii();
            }
        }
        if !scope_applies {
            continue;
        }
        if item.eq_ignore_ascii_case(b"noai") {
            return Some(Signal::NoAi);
        }
        if image && item.eq_ignore_ascii_case(b"noimageai") {
            found = Some(Signal::NoImageAi);
        }
    }
    found
}

/// A crawler's name as a scope: a product token (`GPTBot`, `Googlebot-Image`), or `*`.
fn is_scope(name: &[u8]) -> bool {
    name == b"*"
        || (!name.is_empty()
            && name
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')))
}

/// The parts of `text` between `separator`s that are not inside a double-quoted string (with
/// backslash escapes). An unterminated quote runs to the end.
fn split_outside_quotes(text: &[u8], separator: u8) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let text = rest?;
        match find_outside_quotes(text, separator) {
            Some(at) => {
                rest = Some(&text[at + 1..]);
                Some(&text[..at])
            }
            None => {
                rest = None;
                Some(text)
            }
        }
    })
}

/// The first `byte` of `text` outside a double-quoted string.
fn find_outside_quotes(text: &[u8], byte: u8) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (at, &b) in text.iter().enumerate() {
        if quoted {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                quoted = false;
            }
        } else if b == b'"' {
            quoted = true;
        } else if b == byte {
            return Some(at);
        }
    }
    None
}

/// A header value as a refusal quotes it: printable ASCII (anything else as `?`), at most
/// [`MAX_QUOTED_BYTES`] bytes, then `...`.
fn quoted(value: &[u8]) -> String {
    let mut out: String = value
        .iter()
        .take(MAX_QUOTED_BYTES)
        .map(|&b| {
            if (0x20..0x7f).contains(&b) {
                char::from(b)
            } else {
                '?'
            }
        })
        .collect();
    if value.len() > MAX_QUOTED_BYTES {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn tokens(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    fn head(lines: &[(&HeaderName, &[u8])]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in lines {
            headers.append(
                (*name).clone(),
                HeaderValue::from_bytes(value).expect("a header value"),
            );
        }
        headers
    }

    fn gptbot(headers: &HeaderMap, image: bool) -> PageSignals {
        read(headers, &tokens(&["GPTBot"]), image)
    }

    #[test]
    fn content_usage_refuses_training_and_search() {
        let signals = gptbot(&head(&[(&CONTENT_USAGE, b"train-ai=n, search=y")]), false);
        let training = signals.refusal_of(Purpose::Training).expect("refused");
        assert_eq!(training.signal, Signal::ContentUsage);
        assert_eq!(training.value, "train-ai=n, search=y");
        assert!(signals.refusal_of(Purpose::Search).is_none());
        assert!(signals.refusal_of(Purpose::Agent).is_none());
        assert_eq!(signals.malformed, 0);
        // `n` wins across lines; an unknown key says nothing.
        let signals = gptbot(
            &head(&[
                (&CONTENT_USAGE, b"train-ai=y"),
                (&CONTENT_USAGE, b"search=n, foo=bar"),
                (&CONTENT_USAGE, b"train-ai=n"),
            ]),
            false,
        );
        assert!(signals.refusal_of(Purpose::Training).is_some());
        assert!(signals.refusal_of(Purpose::Search).is_some());
    }

    #[test]
    fn malformed_content_usage_is_ignored_and_counted() {
        let long = format!("train-ai=n, x=\"{}\"", "a".repeat(MAX_LINE_BYTES));
        for bad in [
            &b"Train-AI=n"[..],
            b"train-ai=n,",
            b"train-ai=(n",
            b"/blog/ train-ai=n",
            b"train-ai=\xffn",
            long.as_bytes(),
        ] {
            let signals = gptbot(&head(&[(&CONTENT_USAGE, bad)]), false);
            assert_eq!(
                signals.refusals,
                Vec::new(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
            assert_eq!(signals.malformed, 1);
        }
        // A quoted `n` is a string, not a preference; `noai` inside one is not a directive.
        let signals = gptbot(
            &head(&[
                (&CONTENT_USAGE, b"train-ai=\"n\""),
                (
                    &X_ROBOTS_TAG,
                    b"\"noai\", unavailable_after: \"noai, 2030\"",
                ),
            ]),
            false,
        );
        assert_eq!(signals, PageSignals::default());
    }

    #[test]
    fn noai_scoped_and_unscoped() {
        let cases: [(&[u8], bool); 10] = [
            (b"noai", true),
            (b"NoAI", true),
            (b"noindex, noai", true),
            (b"GPTBot: noai", true),
            (b"gptbot: nofollow, noai", true),
            (b"ClaudeBot: noai", false),
            (b"ClaudeBot: noindex, noai", false),
            (b"ClaudeBot: noindex, GPTBot: noai", true),
            (b"noaix, xnoai", false),
            (b"unavailable_after: 25 Jun 2030 15:00:00 PST", false),
        ];
        for (line, refused) in cases {
            let signals = gptbot(&head(&[(&X_ROBOTS_TAG, line)]), false);
            assert_eq!(
                signals.refusal_of(Purpose::Training).is_some(),
                refused,
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        // A scope ends with its line.
        let signals = gptbot(
            &head(&[
                (&X_ROBOTS_TAG, b"ClaudeBot: noindex"),
                (&X_ROBOTS_TAG, b"noai"),
            ]),
            false,
        );
        assert_eq!(
            signals.refusal_of(Purpose::Training).map(|r| r.signal),
            Some(Signal::NoAi)
        );
    }

    #[test]
    fn noimageai_only_on_images() {
        let headers = head(&[(&X_ROBOTS_TAG, b"noimageai")]);
        assert!(gptbot(&headers, false).refusals.is_empty());
        let signals = gptbot(&headers, true);
        assert_eq!(
            signals.refusal_of(Purpose::Training).map(|r| r.signal),
            Some(Signal::NoImageAi)
        );
        let mut typed = headers.clone();
        typed.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("Image/PNG"),
        );
        assert!(is_image(&typed));
        typed.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("text/html"),
        );
        assert!(!is_image(&typed));
    }

    #[test]
    fn hostile_heads_are_bounded() {
        // 100 lines are read; the 101st is not.
        let mut headers = HeaderMap::new();
        for _ in 0..MAX_LINES {
            headers.append(X_ROBOTS_TAG, HeaderValue::from_static("noindex"));
        }
        headers.append(X_ROBOTS_TAG, HeaderValue::from_static("noai"));
        assert!(gptbot(&headers, false).refusals.is_empty());
        // 100 lines, the last saying noai, are read.
        let mut headers = HeaderMap::new();
        for _ in 0..MAX_LINES - 1 {
            headers.append(X_ROBOTS_TAG, HeaderValue::from_static("noindex"));
        }
        headers.append(X_ROBOTS_TAG, HeaderValue::from_static("noai"));
        assert!(gptbot(&headers, false)
            .refusal_of(Purpose::Training)
            .is_some());
        // An 8 KiB line is read, and quoted cut.
        let line = format!("{}noai", "noindex, ".repeat((MAX_LINE_BYTES - 4) / 9));
        assert!(line.len() <= MAX_LINE_BYTES);
        let signals = gptbot(&head(&[(&X_ROBOTS_TAG, line.as_bytes())]), false);
        let refusal = signals.refusal_of(Purpose::Training).expect("refused");
        assert_eq!(refusal.value.len(), MAX_QUOTED_BYTES + 3);
        // An unterminated quote hides the rest of its line.
        let signals = gptbot(&head(&[(&X_ROBOTS_TAG, b"\"noindex, noai")]), false);
        assert!(signals.refusals.is_empty());
        // Control bytes are not quoted as they are.
        let signals = gptbot(&head(&[(&X_ROBOTS_TAG, b"noai, \xff\t")]), false);
        assert_eq!(
            signals
                .refusal_of(Purpose::Training)
                .map(|r| r.value.as_str()),
            Some("noai, ??")
        );
    }
}
