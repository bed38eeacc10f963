//! Config loading on arbitrary text: it never panics, every error points at a line (>= 1, with a
//! column >= 1) or is a whole-file error (0:0), no message or hint carries a raw control
//! character, and loading is deterministic (checked for one input in eight).
//! Input: the config text (invalid UTF-8 is replaced, as the file loader would refuse it anyway).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use robotsguard::config::load_str;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let base = Path::new("/etc/robotsguard");
    let first = load_str(&text, "fuzz.yaml", base);
    match &first {
        Ok(config) => {
            assert!(!config.listen.is_empty(), "a loaded config has a listener");
            assert!(!config.origins.is_empty(), "a loaded config has an origin");
            assert!(config.source_path.is_none());
            for origin in &config.origins {
                assert!(!origin.upstreams.is_empty());
                assert!((400..=599).contains(&origin.block.status));
            }
        }
        Err(errors) => {
            assert!(!errors.0.is_empty(), "an Err carries at least one error");
            for error in &errors.0 {
                assert_eq!(error.file, "fuzz.yaml");
                assert!(!error.message.is_empty());
                assert!(
                    (error.line >= 1 && error.column >= 1)
                        || (error.line == 0 && error.column == 0),
                    "error at {}:{}: {}",
                    error.line,
                    error.column,
                    error.message
                );
                // File text is quoted with control characters escaped, so none reach a terminal.
                for text in std::iter::once(&error.message).chain(&error.hint) {
                    assert!(
                        !text.chars().any(char::is_control),
                        "raw control in {text:?}"
                    );
                }
            }
            let _ = errors.to_string();
        }
    }
    // Loading again costs as much as the first load; do it for one input in eight (chosen by
    // content, so a failing input reproduces) to keep the throughput for new inputs.
    if data.iter().fold(0u8, |hash, &b| hash.rotate_left(1) ^ b) % 8 == 0 {
        assert_eq!(
            load_str(&text, "fuzz.yaml", base),
            first,
            "loading is deterministic"
        );
    }
});
