//! Canonical form of paths and patterns for enforcement, so that spellings of a path that reach the
//! same resource on a typical origin (`/%70rivate`, `/a/../private`, `//private`) match the same
//! rules.
//!
//! Google's matcher compares bytes literally; a crawler never needed more. A proxy enforcing
//! robots.txt against clients that may try to slip past it does: it applies this form to the
//! request path and, at compile time, to every pattern.

use std::borrow::Cow;

use super::pattern::{is_hex_pair, push_percent_escape};

/// Canonicalises a path (with params and query) or a rule pattern:
/// - bytes outside ASCII are percent-encoded (patterns already are; raw UTF-8 paths then meet them);
/// - `%xx` escapes of unreserved characters (`A-Z a-z 0-9 - . _ ~`) are decoded, other escapes get
///   upper-case hex, and a `%` that starts no escape becomes `%25` (so that decoding cannot
///   splice a new escape out of it, as `%%341` → `%41` would: the form is idempotent);
/// - in the part before `?`, backslashes count as slashes (IIS and some frameworks treat them so),
///   repeated slashes are merged and `.`/`..` segments removed (RFC 3986).
///
/// Returns the input unchanged (borrowed) when nothing needs rewriting, which is the common case.
///
/// Escaped slashes (`%2F`, `%5C`) stay escaped: they are data here. See
/// [`canonicalize_decoding_slashes`] for origins that read them as separators.
pub fn canonicalize(input: &[u8]) -> Cow<'_, [u8]> {
    canonicalize_with(input, false)
}

/// [`canonicalize`], but `%2F` and `%5C` (either case) in the path are decoded to `/` first, so
/// dot segments and slashes they form are resolved too: what nginx, Apache, Python's and most
/// frameworks' file servers read `/public/..%2Fprivate` as (`/private`).
pub fn canonicalize_decoding_slashes(input: &[u8]) -> Cow<'_, [u8]> {
    canonicalize_with(input, true)
}

fn canonicalize_with(input: &[u8], decode_slashes: bool) -> Cow<'_, [u8]> {
    if !needs_work(input) {
        return Cow::Borrowed(input);
    }
    let escaped = normalise_escapes(input, decode_slashes);
    let split = memchr::memchr(b'?', escaped.as_bytes()).unwrap_or(escaped.len());
    let (path, query) = escaped.split_at(split);
    let path = path.replace('\\', "/");
    let mut out = remove_dot_segments(&path);
    out.extend_from_slice(query.as_bytes());
    Cow::Owned(out)
}

/// Whether the path (before any `?`) holds an escaped slash or backslash (`%2F`, `%5C`, either
/// case).
pub fn has_escaped_slash(input: &[u8]) -> bool {
    let path_end = memchr::memchr(b'?', input).unwrap_or(input.len());
    let path = &input[..path_end];
    memchr::memchr_iter(b'%', path).any(|at| {
        matches!(
            (
                path.get(at + 1),
                path.get(at + 2).map(u8::to_ascii_uppercase)
            ),
            (Some(b'2'), Some(b'F')) | (Some(b'5'), Some(b'C'))
        )
    })
}

/// How a URL parser that follows the WHATWG URL standard (Node's `new URL(target, base)`, browsers'
/// `fetch`) reads a target starting with two or more slashes or backslashes (`//x/private`,
/// `/\\x/private`): as a host (`x`) and a path. Returns that path and query (`/private`), or
/// `None` when the target does not start that way.
pub fn authority_reading(input: &[u8]) -> Option<Cow<'_, [u8]>> {
    let slashes = input
        .iter()
        .take_while(|&&b| b == b'/' || b == b'\\')
        .count();
    if slashes < 2 {
        return None;
    }
    let rest = &input[slashes..];
    let host_end = rest
        .iter()
        .position(|&b| matches!(b, b'/' | b'\\' | b'?' | b'#'))
        .unwrap_or(rest.len());
    let after = &rest[host_end..];
    Some(if after.first().is_some_and(|&b| b == b'/' || b == b'\\') {
        Cow::Borrowed(after)
    } else {
        let mut path = Vec::with_capacity(after.len() + 1);
        path.push(b'/');
        path.extend_from_slice(after);
        Cow::Owned(path)
    })
}

/// Bytes [`needs_work`] must look at; every other byte is skipped with one table load.
static NOTABLE: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0x80;
    while byte < 256 {
        table[byte] = true;
        byte += 1;
    }
    table[b'%' as usize] = true;
    table[b'\\' as usize] = true;
    table[b'/' as usize] = true;
    table[b'.' as usize] = true;
    table[b'?' as usize] = true;
    table
};

/// Whether canonicalizing could change `input`: one pass over the bytes (this runs on every
/// request, and almost every path is already canonical).
fn needs_work(input: &[u8]) -> bool {
    let mut previous = 0u8;
    for (index, &byte) in input.iter().enumerate() {
        if !NOTABLE[usize::from(byte)] {
            previous = byte;
            continue;
        }
        match byte {
            b'?' => {
                // Only escapes and non-ASCII bytes count in the query.
                let query = &input[index..];
                return query.iter().any(|&b| b >= 0x80 || b == b'%');
            }
            b'%' | b'\\' | 0x80..=0xff => return true,
            b'/' | b'.' if previous == b'/' => return true,
            b'.' if index == 0 => return true,
            _ => {}
        }
        previous = byte;
    }
    false
}

fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        b'A'..=b'F' => digit - b'A' + 10,
        _ => 0,
    }
}

/// Decodes escaped unreserved characters (and, with `decode_slashes`, escaped slashes and
/// backslashes before the query), upper-cases the remaining escapes and escapes non-ASCII bytes
/// and lone `%`s. The result is ASCII, and every `%` in it starts an upper-case escape.
fn normalise_escapes(input: &[u8], decode_slashes: bool) -> String {
    let mut out = String::with_capacity(input.len() + 8);
    let mut index = 0;
    let mut in_query = false;
    while index < input.len() {
        let byte = input[index];
        in_query |= byte == b'?';
        if byte == b'%' && is_hex_pair(input, index + 1) {
            let decoded = hex_value(input[index + 1]) << 4 | hex_value(input[index + 2]);
            if decode_slashes && !in_query && matches!(decoded, b'/' | b'\\') {
                out.push('/');
            } else if is_unreserved(decoded) {
                out.push(char::from(decoded));
            } else {
                push_percent_escape(&mut out, decoded);
            }
            index += 3;
        } else if byte >= 0x80 || byte == b'%' {
            push_percent_escape(&mut out, byte);
            index += 1;
        } else {
            out.push(char::from(byte));
            index += 1;
        }
    }
    out
}

/// Merges repeated slashes and removes `.` and `..` segments; `..` never climbs above the root.
fn remove_dot_segments(path: &str) -> Vec<u8> {
    let absolute = path.starts_with('/');
    let body = if absolute { &path[1..] } else { path };
    let mut kept: Vec<&str> = Vec::new();
    let mut trailing_slash = false;
    let mut segments = body.split('/').peekable();
    while let Some(segment) = segments.next() {
        let last = segments.peek().is_none();
        match segment {
            "" | "." => trailing_slash = last,
            ".." => {
                kept.pop();
                trailing_slash = last;
            }
            _ => {
                kept.push(segment);
                trailing_slash = false;
            }
        }
    }
    let mut out = Vec::with_capacity(path.len());
    if absolute {
        out.push(b'/');
    }
    for (index, segment) in kept.iter().enumerate() {
        if index > 0 {
            out.push(b'/');
        }
        out.extend_from_slice(segment.as_bytes());
    }
    if trailing_slash && !kept.is_empty() {
        out.push(b'/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(input: &str) -> String {
        String::from_utf8_lossy(&canonicalize(input.as_bytes())).into_owned()
    }

    #[test]
    fn evasions_reach_the_canonical_path() {
        for evasion in [
            "/private",
            "/%70rivate",
            "/%70%72%69%76%61%74%65",
            "//private",
            "/public/../private",
            "/./private",
            "/public/%2e%2e/private",
            "/a/b/../../private",
            "/../private",
            "///private",
            "/\\private",
            "/public\\..\\private",
        ] {
            assert_eq!(canon(evasion), "/private", "{evasion}");
        }
    }

    #[test]
    fn reserved_escapes_stay_encoded_but_upper_case() {
        assert_eq!(canon("/a%2fb"), "/a%2Fb");
        assert_eq!(canon("/a%3f?x=%2a"), "/a%3F?x=%2A");
        assert_eq!(canon("/caf%c3%a9"), "/caf%C3%A9");
        assert_eq!(canon("/café"), "/caf%C3%A9");
    }

    #[test]
    fn lone_percent_signs_are_escaped() {
        assert_eq!(canon("/100%"), "/100%25");
        assert_eq!(canon("/a%zz%4"), "/a%25zz%254");
        // Decoding `%34` must not make `%` + `41` a new escape for a second pass to decode.
        assert_eq!(canon("/%%341"), "/%2541");
        assert_eq!(canon("/%2541"), "/%2541");
    }

    #[test]
    fn query_keeps_its_slashes_and_dots() {
        assert_eq!(canon("/a//b?next=//x/../y"), "/a/b?next=//x/../y");
    }

    #[test]
    fn trailing_slashes_and_dot_segments() {
        assert_eq!(canon("/"), "/");
        assert_eq!(canon("/a/"), "/a/");
        assert_eq!(canon("/a/."), "/a/");
        assert_eq!(canon("/a/b/.."), "/a/");
        assert_eq!(canon("/a/.."), "/");
        assert_eq!(canon("/a//"), "/a/");
        assert_eq!(canon("/*.php$"), "/*.php$");
    }

    fn decoded(input: &str) -> String {
        String::from_utf8_lossy(&canonicalize_decoding_slashes(input.as_bytes())).into_owned()
    }

    #[test]
    fn escaped_slashes_decode_before_dot_segments() {
        for evasion in [
            "/%2Fprivate/secret.html",
            "/%2fprivate/secret.html",
            "/public/..%2Fprivate/secret.html",
            "/public/..%2fprivate/secret.html",
            "/public%2F..%2Fprivate/secret.html",
            "/public%2f..%2fprivate/secret.html",
            "/public%5C..%5Cprivate/secret.html",
            "/public/%2e%2e%2Fprivate/secret.html",
            "/private%2Fsecret.html",
            "/private/press/..%2F..%2Fprivate/secret.html",
        ] {
            assert_eq!(decoded(evasion), "/private/secret.html", "{evasion}");
        }
        // Only the path: a query keeps its escapes.
        assert_eq!(decoded("/a%2Fb?next=%2Fx"), "/a/b?next=%2Fx");
        // Kept as data by the plain form.
        assert_eq!(canon("/public/..%2Fprivate"), "/public/..%2Fprivate");
        // Double-escaped stays one level escaped.
        assert_eq!(decoded("/a%252Fb"), "/a%252Fb");
    }

    #[test]
    fn escaped_slash_detection() {
        assert!(has_escaped_slash(b"/a%2Fb"));
        assert!(has_escaped_slash(b"/a%2fb"));
        assert!(has_escaped_slash(b"/a%5cb"));
        assert!(!has_escaped_slash(b"/a%252Fb"));
        assert!(!has_escaped_slash(b"/a?b=%2F"));
        assert!(!has_escaped_slash(b"/a%2"));
    }

    #[test]
    fn authority_readings() {
        let read = |t: &str| {
            authority_reading(t.as_bytes()).map(|p| String::from_utf8_lossy(&p).into_owned())
        };
        assert_eq!(
            read("//x/private/secret.html").as_deref(),
            Some("/private/secret.html")
        );
        assert_eq!(read("/\\x/private").as_deref(), Some("/private"));
        assert_eq!(read("\\\\x\\private").as_deref(), Some("\\private"));
        assert_eq!(read("///x/a?q").as_deref(), Some("/a?q"));
        assert_eq!(read("//x?q=1").as_deref(), Some("/?q=1"));
        assert_eq!(read("//x").as_deref(), Some("/"));
        assert_eq!(read("/x//private"), None);
        assert_eq!(read("/private"), None);
    }

    #[test]
    fn the_quick_check_agrees_with_the_full_form() {
        for input in [
            "/",
            "/a",
            "/a/b?x=//y/../z",
            "/a//b",
            "/a/./b",
            "/a/../b",
            "/.hidden",
            ".x",
            "/a\\b",
            "/a%2fb",
            "/caf\u{e9}",
            "/a?b\\c",
            "/a.b/c.d",
            "/a/b.",
            "/a/b/",
            "//",
            "/?",
            "/a?%",
        ] {
            let changes = canonicalize_with(input.as_bytes(), true).as_ref() != input.as_bytes();
            // The check may be cautious (say "work" for a path that turns out unchanged), never
            // the other way round.
            assert!(needs_work(input.as_bytes()) || !changes, "{input}");
        }
        assert!(!needs_work(b"/plain/path.html?q=1&next=//x"));
    }

    #[test]
    fn plain_paths_are_borrowed() {
        assert!(matches!(canonicalize(b"/plain/path?q=1"), Cow::Borrowed(_)));
        assert!(matches!(canonicalize(b"/a?next=//x"), Cow::Borrowed(_)));
    }
}
