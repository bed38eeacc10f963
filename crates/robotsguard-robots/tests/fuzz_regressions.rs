//! Inputs that the engine's cargo-fuzz targets (`fuzz/fuzz_targets/` at the repository root) once
//! failed on, kept as regression tests so `cargo test` guards them without building the fuzzers.
//! Each test names the target and the property it broke; see docs/BENCHMARKS.md, "Fuzzing". The
//! proxy's own findings (config loading) are in the proxy crate's `tests/fuzz_regressions.rs`.

use robotsguard_robots::{canonicalize, path_params_query, MatchMode, Robots, RobotsTxt};

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
