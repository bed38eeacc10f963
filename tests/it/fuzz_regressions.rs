//! Inputs that the cargo-fuzz targets (`fuzz/fuzz_targets/`) once failed on, kept as regression
//! tests so the main crate's `cargo test` guards them without building the fuzzers. Each test names
//! the target and the property it broke; see docs/BENCHMARKS.md, "Fuzzing". The robots.txt engine's
//! findings are in `crates/robotsguard-robots/tests/fuzz_regressions.rs`.

use std::path::Path;

use robotsguard::config::load_str;

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
