//! Byte-level word rules shared by every User-Agent matcher: what a word byte is and when a match
//! is a whole word. (How robots.txt reduces a name to its product token is the robots engine's:
//! [`robotsguard_robots::product_token`].)

/// Whether `b` continues a word: ASCII letters and digits, `_`, and every non-ASCII byte.
///
/// `-`, `.`, `/`, spaces and all other ASCII punctuation end a word. That makes `Googlebot`
/// a whole word inside `Googlebot-Image/1.0`; the catalogue's ranking then prefers the longer
/// `Googlebot-Image` entry that matches at the same place, and a crawler with no entry of its
/// own (`Googlebot-Mobile`-style suffixes) still falls back to its family. `_` joins words
/// because crawler names use it inside one name (`ia_archiver`, `archive.org_bot`). Non-ASCII
/// bytes count as word bytes so that a pattern never matches a fragment of a non-English word.
pub(crate) fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// Whether the match `hay[start..end]` stands as a whole word.
///
/// The rule is that of a regex `\b` on each edge whose byte is a word byte: the neighbouring
/// byte outside the match must not be a word byte. An edge that is itself punctuation (a pattern
/// such as `Pinterest/0.2` ends in a digit, one ending in `/` would not) needs no boundary.
/// Out-of-range positions are treated as "not a whole word" rather than panicking.
pub(crate) fn is_whole_word(hay: &[u8], start: usize, end: usize) -> bool {
    if start >= end || end > hay.len() {
        return false;
    }
    let left_ok = !is_word_byte(hay[start]) || start == 0 || !is_word_byte(hay[start - 1]);
    let right_ok = !is_word_byte(hay[end - 1]) || end == hay.len() || !is_word_byte(hay[end]);
    left_ok && right_ok
}

/// Names one User-Agent is read for at most: a real crawler names one or two, so a User-Agent
/// naming more is hostile, and the work per request stays bounded however many names it
/// repeats (each name costs a robots.txt verdict later). A client gains nothing from names past
/// the cap that it could not get by leaving them out.
pub const MAX_NAMES_CONSIDERED: usize = 16;

/// Whole-word matches collected from one User-Agent before the rest is no longer scanned:
/// enough for [`MAX_NAMES_CONSIDERED`] names with repeats and the shorter names inside them.
pub(crate) const MAX_MATCHES_CONSIDERED: usize = 4 * MAX_NAMES_CONSIDERED;

/// The whole-word matches of an overlapping search, `(pattern, start, end)`, in the order the
/// search reports them, at most [`MAX_MATCHES_CONSIDERED`] plus those overlapping the last one
/// kept (so a name is never cut from the longer name it is part of), and never more than twice
/// the cap. The search stops there: a User-Agent longer than the names it carries costs no
/// more than its first names do.
pub(crate) fn bounded_whole_words(
    hay: &[u8],
    matches: impl Iterator<Item = aho_corasick::Match>,
) -> Vec<(usize, usize, usize)> {
    let mut found = Vec::new();
    let mut reach = 0;
    for m in matches {
        if found.len() >= MAX_MATCHES_CONSIDERED
            && (m.start() >= reach || found.len() >= 2 * MAX_MATCHES_CONSIDERED)
        {
            break;
        }
        if is_whole_word(hay, m.start(), m.end()) {
            found.push((m.pattern().as_usize(), m.start(), m.end()));
            reach = reach.max(m.end());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_bytes() {
        for b in b"aZ09_".iter().copied().chain([0x80u8, 0xff]) {
            assert!(is_word_byte(b), "{b:#x}");
        }
        for b in b"-./ ;()+\t\0".iter().copied() {
            assert!(!is_word_byte(b), "{b:#x}");
        }
    }

    #[test]
    fn whole_word_edges() {
        let hay = b"SLCC LCC x";
        assert!(!is_whole_word(hay, 1, 4), "LCC inside SLCC");
        assert!(is_whole_word(hay, 5, 8));
        assert!(
            is_whole_word(b"Googlebot-Image", 0, 9),
            "hyphen is a boundary"
        );
        assert!(
            !is_whole_word(b"ia_archiver", 3, 11),
            "underscore joins words"
        );
        // An edge that is punctuation needs no boundary on that side.
        assert!(!is_whole_word(b"xPinterest/0.2", 1, 14));
        assert!(is_whole_word(b"x/0.2 ", 1, 5));
        // Bad ranges never panic.
        assert!(!is_whole_word(b"abc", 2, 9));
        assert!(!is_whole_word(b"abc", 2, 2));
    }
}
