//! Reducing a URL to the part robots.txt rules match against: path, params and query.

/// Returns the path, params and query of `url` exactly as Google's library extracts them: the
/// scheme, authority and `#fragment` are dropped, a missing path becomes `/`, and a result that
/// would start with `?` or `;` gets a leading `/`. Nothing is decoded or normalised.
///
/// Accepts absolute URLs (`https://host/p?q`), network-path references (`//host/p`) and plain
/// paths (`/p`). Google hands the result on as a C string, so it also ends at the first NUL byte.
pub fn path_params_query(url: &[u8]) -> Vec<u8> {
    let mut path = extract(url).to_vec();
    if path.first() != Some(&b'/') {
        path.insert(0, b'/');
    }
    if let Some(nul) = memchr::memchr(0, &path) {
        path.truncate(nul.max(1));
    }
    path
}

fn extract(url: &[u8]) -> &[u8] {
    let search_start = if url.starts_with(b"//") { 2 } else { 0 };
    let find_path_start = |from: usize| find_first_of(url, from, b"/?;").unwrap_or(usize::MAX);
    let early_path = find_path_start(search_start);
    let mut protocol_end = memchr::memmem::find(&url[search_start..], b"://")
        .map_or(usize::MAX, |offset| search_start + offset);
    if early_path < protocol_end {
        // A path, param or query that starts before "://" means "://" is not the scheme's end.
        protocol_end = usize::MAX;
    }
    let authority_start = if protocol_end == usize::MAX {
        search_start
    } else {
        protocol_end + 3
    };
    let path_start = find_path_start(authority_start);
    if path_start == usize::MAX {
        return b"/";
    }
    let hash = memchr::memchr(b'#', &url[search_start..]).map(|offset| search_start + offset);
    match hash {
        Some(hash) if hash < path_start => b"/",
        Some(hash) => &url[path_start..hash],
        None => &url[path_start..],
    }
}

fn find_first_of(haystack: &[u8], from: usize, needles: &[u8]) -> Option<usize> {
    haystack
        .get(from..)?
        .iter()
        .position(|byte| needles.contains(byte))
        .map(|offset| from + offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(url: &str) -> String {
        String::from_utf8(path_params_query(url.as_bytes())).unwrap_or_default()
    }

    #[test]
    fn reduces_urls_like_google() {
        let cases = [
            ("", "/"),
            ("http://www.example.com", "/"),
            ("http://www.example.com/", "/"),
            ("http://www.example.com/a", "/a"),
            ("http://www.example.com/a/", "/a/"),
            (
                "http://www.example.com/a/b?c=http://d.e/",
                "/a/b?c=http://d.e/",
            ),
            (
                "http://www.example.com/a/b?c=d&e=f#fragment",
                "/a/b?c=d&e=f",
            ),
            ("example.com", "/"),
            ("example.com/", "/"),
            ("example.com/a", "/a"),
            ("example.com/a/b?c=d#frag", "/a/b?c=d"),
            ("a", "/"),
            ("a/", "/"),
            ("/a", "/a"),
            ("a/b", "/b"),
            ("example.com?a", "/?a"),
            ("example.com/a;b#c", "/a;b"),
            ("//a/b/c", "/b/c"),
            ("http://user:pass@host:8080/p?q#f", "/p?q"),
            ("http://example.com#frag/x", "/"),
            ("/a#b", "/a"),
            ("/a?b=//c://d", "/a?b=//c://d"),
        ];
        for (url, expected) in cases {
            assert_eq!(path(url), expected, "{url:?}");
        }
    }

    #[test]
    fn stops_at_nul_like_a_c_string() {
        assert_eq!(path_params_query(b"/a\0b"), b"/a");
        assert_eq!(path_params_query(b"http://h/\0x"), b"/");
    }
}
