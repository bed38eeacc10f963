//! Path canonicalisation (the form the proxy matches requests and rules in) on arbitrary bytes.
//! Asserts: the output is ASCII; canonicalisation is idempotent; a leading `/` is kept; the part
//! before `?` has no `//`, `.`/`..` segment or backslash left, and its escapes are upper-case and
//! never of unreserved characters; `path_params_query` always yields a path starting with `/`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use robotsguard_robots::{canonicalize, path_params_query};

fn check(input: &[u8]) {
    let once = canonicalize(input);
    assert!(once.is_ascii(), "non-ASCII output {once:?}");
    let twice = canonicalize(&once);
    assert_eq!(
        *twice,
        *once,
        "not idempotent: {:?} -> {:?} -> {:?}",
        String::from_utf8_lossy(input),
        String::from_utf8_lossy(&once),
        String::from_utf8_lossy(&twice)
    );
    if input.starts_with(b"/") {
        assert!(once.starts_with(b"/"), "lost the leading slash: {once:?}");
    }
    let path = &once[..once.iter().position(|&b| b == b'?').unwrap_or(once.len())];
    assert!(!path.contains(&b'\\'));
    assert!(!path.windows(2).any(|w| w == b"//"), "{path:?}");
    for segment in path.split(|&b| b == b'/') {
        assert!(
            segment != b"." && segment != b"..",
            "dot segment left in {path:?}"
        );
    }
    for (at, _) in once.iter().enumerate().filter(|(_, &b)| b == b'%') {
        if let Some(&[a, b]) = once.get(at + 1..at + 3) {
            if a.is_ascii_hexdigit() && b.is_ascii_hexdigit() {
                assert!(!a.is_ascii_lowercase() && !b.is_ascii_lowercase());
                let byte = u8::from_str_radix(std::str::from_utf8(&[a, b]).unwrap(), 16).unwrap();
                assert!(
                    !(byte.is_ascii_alphanumeric() || b"-._~".contains(&byte)),
                    "escaped unreserved byte in {once:?}"
                );
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    let path = path_params_query(data);
    assert!(path.starts_with(b"/"));
    assert!(!path.contains(&0));
    check(&path);
});
