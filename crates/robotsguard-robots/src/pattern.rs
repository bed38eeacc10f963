//! Rule patterns: Google's escaping of pattern bytes, and linear-time matching of `*` and `$`.

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// Escapes a rule value as Google does before matching: `%xx` sequences get upper-case hex, and
/// every byte with the high bit set becomes `%XX`. The result is pure ASCII.
pub fn escape_pattern(value: &[u8]) -> String {
    let mut escaped = String::with_capacity(value.len());
    let mut index = 0;
    while index < value.len() {
        let byte = value[index];
        if byte == b'%' && is_hex_pair(value, index + 1) {
            escaped.push('%');
            escaped.push(char::from(value[index + 1].to_ascii_uppercase()));
            escaped.push(char::from(value[index + 2].to_ascii_uppercase()));
            index += 3;
        } else if byte >= 0x80 {
            push_percent_escape(&mut escaped, byte);
            index += 1;
        } else {
            escaped.push(char::from(byte));
            index += 1;
        }
    }
    escaped
}

pub(crate) fn is_hex_pair(bytes: &[u8], at: usize) -> bool {
    matches!(bytes.get(at..at + 2), Some([a, b]) if a.is_ascii_hexdigit() && b.is_ascii_hexdigit())
}

pub(crate) fn push_percent_escape(out: &mut String, byte: u8) {
    out.push('%');
    out.push(char::from(HEX_UPPER[usize::from(byte >> 4)]));
    out.push(char::from(HEX_UPPER[usize::from(byte & 0x0F)]));
}

/// The structure of a pattern that the index and the matcher need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatternShape {
    /// Length of the literal run before the first `*` (and before a final `$`): every path the
    /// pattern matches starts with these bytes.
    pub literal_prefix: usize,
    /// The pattern ends with `$`, anchoring it to the end of the path.
    pub anchored: bool,
    /// The pattern contains a `*` (outside the literal prefix by construction).
    pub has_wildcard: bool,
}

impl PatternShape {
    pub fn of(pattern: &[u8]) -> PatternShape {
        let anchored = pattern.last() == Some(&b'$');
        let body = if anchored {
            &pattern[..pattern.len() - 1]
        } else {
            pattern
        };
        let star = memchr::memchr(b'*', body);
        PatternShape {
            literal_prefix: star.unwrap_or(body.len()),
            anchored,
            has_wildcard: star.is_some(),
        }
    }

    /// The pattern matches every path that starts with its literal prefix: nothing else to check.
    pub fn is_plain_prefix(self) -> bool {
        !self.anchored && !self.has_wildcard
    }
}

/// Whether `pattern` matches `path` with Google's semantics: anchored at the start of the path,
/// `*` matches any run of bytes, `$` anchors only as the last byte, everything else is literal.
///
/// Runs in time linear in `path.len() + pattern.len()`: the literal segments between stars are
/// placed at their leftmost occurrence, which is always optimal for this kind of pattern, so no
/// backtracking is needed.
pub fn pattern_matches(pattern: &[u8], path: &[u8]) -> bool {
    let shape = PatternShape::of(pattern);
    let prefix = &pattern[..shape.literal_prefix];
    path.starts_with(prefix) && matches_after_prefix(pattern, shape, path)
}

/// Completes a match whose literal prefix is already known to be a prefix of `path`.
pub fn matches_after_prefix(pattern: &[u8], shape: PatternShape, path: &[u8]) -> bool {
    let mut position = shape.literal_prefix;
    if !shape.has_wildcard {
        return !shape.anchored || position == path.len();
    }
    let body = if shape.anchored {
        &pattern[..pattern.len() - 1]
    } else {
        pattern
    };
    // body[literal_prefix] is the first '*'; split the remainder into literal segments.
    let rest = &body[shape.literal_prefix + 1..];
    let (middle, last) = match memchr::memrchr(b'*', rest) {
        Some(star) => (&rest[..star], &rest[star + 1..]),
        None => (&rest[..0], rest),
    };
    for segment in middle.split(|&b| b == b'*').filter(|s| !s.is_empty()) {
        match find(&path[position..], segment) {
            Some(found) => position += found + segment.len(),
            None => return false,
        }
    }
    if shape.anchored {
        path.len() >= position + last.len() && path.ends_with(last)
    } else {
        last.is_empty() || find(&path[position..], last).is_some()
    }
}

/// Leftmost occurrence of `needle` in `haystack`. Request paths are short, and building a
/// substring searcher costs more than scanning a short path directly, so short haystacks are
/// scanned with `memchr` on the first byte; long ones use a linear-time searcher, which keeps the
/// worst case (a 16 KB path against thousands of segments) linear.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    const SHORT_HAYSTACK: usize = 128;
    let (&first, rest) = needle.split_first()?;
    if haystack.len() > SHORT_HAYSTACK {
        return memchr::memmem::find(haystack, needle);
    }
    let mut from = 0;
    while let Some(offset) = memchr::memchr(first, &haystack[from..]) {
        let start = from + offset;
        let candidate = &haystack[start + 1..];
        if candidate.len() < rest.len() {
            return None;
        }
        if candidate.starts_with(rest) {
            return Some(start);
        }
        from = start + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_upper_cases_hex_and_encodes_non_ascii() {
        assert_eq!(escape_pattern(b"/a%2fb"), "/a%2Fb");
        assert_eq!(escape_pattern("/é".as_bytes()), "/%C3%A9");
        assert_eq!(escape_pattern(b"/%zz%4"), "/%zz%4");
        assert_eq!(escape_pattern(b"/%e2%82%ac\xff"), "/%E2%82%AC%FF");
        assert_eq!(escape_pattern(b"/*$"), "/*$");
    }

    #[test]
    fn shapes() {
        let shape = PatternShape::of(b"/fish*.php$");
        assert_eq!(
            shape,
            PatternShape {
                literal_prefix: 5,
                anchored: true,
                has_wildcard: true
            }
        );
        assert!(PatternShape::of(b"/a$b").is_plain_prefix());
        assert_eq!(PatternShape::of(b"/a$$").literal_prefix, 3);
    }

    #[test]
    fn matching_semantics() {
        let cases: &[(&str, &str, bool)] = &[
            ("", "/anything", true),
            ("/", "/", true),
            ("/fish", "/fish.html", true),
            ("/fish", "/Fish", false),
            ("/fish*", "/fishheads", true),
            ("/*.php", "/index.php", true),
            ("/*.php", "/folder/any.php.file.html", true),
            ("/*.php$", "/filename.php", true),
            ("/*.php$", "/filename.php?parameters", false),
            ("/*.php$", "/filename.php/", false),
            ("/fish*.php", "/fishheads/catfish.php?parameters", true),
            ("/fish*.php", "/Fish.PHP", false),
            ("$", "/", false),
            ("/$", "/", true),
            ("/a$b", "/a$bc", true),
            ("*", "/x", true),
            ("*$", "/x", true),
            ("/a*b*c", "/aXbYc", true),
            ("/a*b*c", "/aXcYb", false),
            ("/a*a$", "/a", false),
            ("/a*a$", "/aa", true),
            ("/*a*a", "/a", false),
            ("private", "/private", false),
            ("*private", "/private", true),
        ];
        for &(pattern, path, expected) in cases {
            assert_eq!(
                pattern_matches(pattern.as_bytes(), path.as_bytes()),
                expected,
                "{pattern} vs {path}"
            );
        }
    }
}
