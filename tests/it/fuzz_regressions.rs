//! Inputs that the cargo-fuzz targets (`fuzz/fuzz_targets/`) once failed on, kept as regression
//! tests so the main crate's `cargo test` guards them without building the fuzzers. Each test names
//! the target and the property it broke; see docs/BENCHMARKS.md, "Fuzzing".

use std::path::Path;

use robotsguard::config::load_str;
use robotsguard::robots::{canonicalize, path_params_query, MatchMode, Robots, RobotsTxt};

/// The `path_canonicalize` target's properties, for one input.
fn assert_canonical_properties(input: &[u8]) {
    let once = canonicalize(input).into_owned();
    assert!(once.is_ascii(), "{once:?}");
    assert_eq!(
        *canonicalize(&once),
        *once,
        "not idempotent for {:?}",
        String::from_utf8_lossy(input)
    );
    if input.starts_with(b"/") {
        assert!(once.starts_with(b"/"));
    }
    let path = path_params_query(input);
    assert_eq!(*canonicalize(&canonicalize(&path)), *canonicalize(&path));
}

/// path_canonicalize, found after 1,216 executions: a lone `%` followed by an escape that decodes
/// to a hex digit (`%7` + `%62` → `%7b`) made a new escape, which a second pass changed again
/// (`%7b` → `%7B`; with `%%341` → `%41` → `A`, to another character). Fixed by escaping lone `%`s.
#[test]
fn path_canonicalize_lone_percent_splices_an_escape() {
    let crash = b"//.%70%7%629%76%61%74%65";
    assert_canonical_properties(crash);
    assert_eq!(&*canonicalize(crash), b"/.p%257b9vate");
    for input in [
        &b"/%%341"[..],
        b"/%4%31",
        b"/%%%34%31",
        b"/a%",
        b"/%%",
        b"/%2%35",
    ] {
        assert_canonical_properties(input);
    }
    assert_eq!(&*canonicalize(b"/%%341"), b"/%2541");
}

/// The same input through the canonical matcher: the pattern and the request path spelled with a
/// lone `%` meet in one form, and a rule for the decoded path is not matched by the spliced one.
#[test]
fn canonical_matching_with_lone_percent_signs() {
    let parsed = RobotsTxt::parse(b"User-agent: *\nDisallow: /100%\nDisallow: /A\n");
    let robots = Robots::compile(&parsed, MatchMode::Canonical);
    for blocked in ["/100%", "/100%25", "/100%25/x", "/A", "/%41"] {
        assert!(
            !robots.verdict(&["x"], blocked.as_bytes()).allowed,
            "{blocked}"
        );
    }
    // `%%341` is a literal `%` then `41` after one decoding, not `A`.
    assert!(robots.verdict(&["x"], b"/%%341").allowed);
}

/// config_load, found after 204 executions (from the `controls` seed): a listen address without a
/// port gets the hint `write <address>:8080`, which echoed the value's terminal escape raw. Fixed
/// where every config error is collected: messages and hints have control characters escaped.
#[test]
fn config_load_hint_echoed_a_terminal_escape() {
    let crash = "listen: [\"\\e[31mz80\"]\norigins: [{name: \"x\\u0007\", hosts: [\"\\x1b]0;t\\x07\"], upstream: \"a:1\"}]\n";
    let errors = load_str(crash, "fuzz.yaml", Path::new("/etc")).expect_err("invalid");
    assert!(!errors.0.is_empty());
    for error in &errors.0 {
        assert!(error.line >= 1 || (error.line, error.column) == (0, 0));
        for text in std::iter::once(&error.message).chain(&error.hint) {
            assert!(!text.chars().any(char::is_control), "{text:?}");
        }
    }
    let hint = errors.0[0].hint.as_deref().unwrap_or_default();
    assert_eq!(hint, "write \\u{1b}[31mz80:8080");
}
