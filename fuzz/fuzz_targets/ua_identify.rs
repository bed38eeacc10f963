//! User-Agent identification on arbitrary bytes. Input layout: robots.txt `User-agent` names, one
//! per line (the first 256 bytes count), then a 0xFF byte, then the User-Agent (no 0xFF: the
//! whole input is the UA, no names).
//! Asserts more than "no panic": identification is deterministic; stages 1-2 give the same answer
//! with generic rules on or off; every identity is well formed for its source; a robots.txt
//! identity names a scanner token that occurs in the UA; a generic word comes from the UA.
#![no_main]

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use libfuzzer_sys::fuzz_target;
use robotsguard::crawlers::{
    describe, report, GenericRule, Identifier, IdentitySource, RobotsTokenScanner, OTHER_LABEL,
};

static GENERIC: LazyLock<Identifier> =
    LazyLock::new(|| Identifier::builtin(true).expect("built-in catalogue"));
static SCANNERS: LazyLock<Mutex<HashMap<Vec<u8>, RobotsTokenScanner>>> =
    LazyLock::new(Mutex::default);
static NO_GENERIC: LazyLock<Identifier> =
    LazyLock::new(|| Identifier::builtin(false).expect("built-in catalogue"));

fn contains_ignore_case(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty()
        || haystack
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
}

fuzz_target!(|data: &[u8]| {
    let (names, ua) = match data.iter().position(|&b| b == 0xFF) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (&b""[..], data),
    };
    // Building the scanner's automaton (a DFA, instrumented) costs far more than identifying: a
    // first run spent 85 % of its time there, at 3,500 exec/s. So the names are capped (long name
    // lists are the robots target's and the benches' business) and scanners are cached by names:
    // most mutations keep an input's names and change its UA.
    let names = &names[..names.len().min(256)];
    let mut scanners = SCANNERS.lock().unwrap_or_else(|e| e.into_inner());
    if scanners.len() >= 512 && !scanners.contains_key(names) {
        scanners.clear();
    }
    let scanner = &*scanners
        .entry(names.to_vec())
        .or_insert_with(|| RobotsTokenScanner::new(String::from_utf8_lossy(names).lines()));
    for token in scanner.tokens() {
        assert!(!token.is_empty());
    }
    if let Some(token) = scanner.longest_whole_word(ua) {
        assert!(scanner.tokens().iter().any(|t| t == token));
        assert!(contains_ignore_case(ua, token.as_bytes()));
    }

    let found = GENERIC.identify(ua, Some(scanner));
    assert_eq!(GENERIC.identify(ua, Some(scanner)), found, "deterministic");
    let without_generic = NO_GENERIC.identify(ua, Some(scanner));
    match (&found, &without_generic) {
        (Some(a), Some(b)) => assert_eq!(a, b, "stages 1-2 do not depend on generic"),
        (None, Some(b)) => panic!("found without generic rules only: {b:?}"),
        (Some(a), None) => assert_eq!(a.source, IdentitySource::Generic),
        (None, None) => {}
    }

    if let Some(id) = &found {
        assert!(!id.name.is_empty());
        assert!(id.tokens.iter().all(|t| !t.is_empty()));
        assert_eq!(id.tokens.iter().len(), id.tokens.len());
        match id.source {
            IdentitySource::Catalogue => {
                let def = id.def.expect("catalogue identity has its entry");
                assert_eq!(def.name, id.name);
                assert!(id.generic_rule.is_none());
                assert_eq!(id.metric_label(), id.name);
                assert!(contains_ignore_case(ua, def.pattern.as_bytes()));
            }
            IdentitySource::RobotsTxt => {
                assert!(id.def.is_none() && id.generic_rule.is_none());
                assert!(scanner.tokens().iter().any(|t| t == id.name));
                assert_eq!(id.tokens.first(), Some(id.name));
                assert!(contains_ignore_case(ua, id.name.as_bytes()));
                assert_eq!(id.metric_label(), OTHER_LABEL);
            }
            IdentitySource::Generic => {
                assert!(id.def.is_none());
                let rule = id.generic_rule.expect("generic identity has its rule");
                assert_eq!(id.metric_label(), OTHER_LABEL);
                match rule {
                    GenericRule::EmptyUserAgent => assert!(id.tokens.is_empty()),
                    GenericRule::AutomationWord | GenericRule::HttpLibrary => {
                        if let Some(token) = id.tokens.first() {
                            assert_eq!(token, id.name);
                            assert!(contains_ignore_case(ua, token.as_bytes()));
                        }
                    }
                }
            }
        }
    }
    let _ = describe(found.as_ref());
    let _ = report(found.as_ref());
});
