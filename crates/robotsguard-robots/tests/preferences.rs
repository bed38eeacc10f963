//! Content-Signal, Content-Usage and License lines: read beside the rules, never changing a
//! verdict, and answered per (group, path).

use robotsguard_robots::{DiagnosticKind, MatchMode, PreferenceValue, Robots, RobotsTxt, Use};

const FILE: &str = "\
License: https://example.com/license.xml
User-agent: GPTBot
Content-Signal: search=yes, ai-train=no
Content-Usage: /open/ train-ai=y
Content-Usage: /open/deep/ search=n
Content-Usage: /open/deep/ search=y, train-ai=n
Disallow: /private
Content-Signal: ai-train
Content-Usage: /broken/train-ai=n

User-agent: *
Content-Usage: train-ai=n, future-key=y, search=y
Content-Signal: use=immediate, ai-input=no
Allow: /
";

fn statement(robots: &Robots, token: &str, path: &str, category: Use) -> Option<(bool, u32)> {
    let verdict = robots.verdict(&[token], path.as_bytes());
    robots
        .preferences(&verdict, path.as_bytes())
        .statement(category)
        .map(|s| (s.allowed, s.line.line))
}

#[test]
fn verdicts_are_those_of_the_file_without_the_lines() {
    let plain: String = FILE
        .lines()
        .map(|line| {
            if line.starts_with("Content-") || line.starts_with("License") {
                "#"
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let with = Robots::parse(FILE.as_bytes());
    let without = Robots::parse(plain.as_bytes());
    for token in ["gptbot", "ccbot", "googlebot"] {
        for path in ["/", "/private/x", "/open/deep/a", "/broken/x"] {
            let a = with.verdict(&[token], path.as_bytes());
            let b = without.verdict(&[token], path.as_bytes());
            assert_eq!(
                (a.allowed, a.line()),
                (b.allowed, b.line()),
                "{token} {path}"
            );
        }
    }
}

#[test]
fn group_wide_path_scoped_and_longest_match() {
    let robots = Robots::parse(FILE.as_bytes());
    // Group-wide Content-Signal.
    assert_eq!(
        statement(&robots, "gptbot", "/a", Use::TrainAi),
        Some((false, 3))
    );
    assert_eq!(
        statement(&robots, "gptbot", "/a", Use::Search),
        Some((true, 3))
    );
    assert_eq!(statement(&robots, "gptbot", "/a", Use::AiInput), None);
    // Path-scoped line speaks first.
    assert_eq!(
        statement(&robots, "gptbot", "/open/x", Use::TrainAi),
        Some((true, 4))
    );
    // The longest match wins; two lines for the same path combine, `n` winning.
    assert_eq!(
        statement(&robots, "gptbot", "/open/deep/x", Use::TrainAi),
        Some((false, 6))
    );
    assert_eq!(
        statement(&robots, "gptbot", "/open/deep/x", Use::Search),
        Some((false, 5))
    );
    // The global group's lines apply to crawlers without a group of their own.
    assert_eq!(
        statement(&robots, "ccbot", "/x", Use::TrainAi),
        Some((false, 12))
    );
    assert_eq!(
        statement(&robots, "ccbot", "/x", Use::AiInput),
        Some((false, 13))
    );
}

#[test]
fn nothing_applies_on_a_disallowed_path() {
    let robots = Robots::parse(FILE.as_bytes());
    let verdict = robots.verdict(&["gptbot"], b"/private/x");
    assert!(!verdict.allowed);
    assert!(robots.preferences(&verdict, b"/private/x").is_empty());
}

#[test]
fn unknown_keys_are_kept_and_decide_nothing_malformed_lines_are_reported() {
    let parsed = RobotsTxt::parse(FILE.as_bytes());
    let global = &parsed.groups[1].preferences;
    assert!(global[0]
        .entries
        .iter()
        .any(|e| e.key == "future-key" && e.value == PreferenceValue::Yes));
    assert_eq!(
        global[1].entries[0].value,
        PreferenceValue::Other("immediate".into())
    );
    let malformed: Vec<u32> = parsed
        .diagnostics
        .iter()
        .filter(|d| matches!(d.kind, DiagnosticKind::MalformedPreference { .. }))
        .map(|d| d.line)
        .collect();
    assert_eq!(malformed, vec![8, 9]);
    assert_eq!(parsed.groups[0].preferences.len(), 4);
    assert_eq!(parsed.licenses[0].url, "https://example.com/license.xml");
    assert_eq!(Robots::parse(FILE.as_bytes()).licenses()[0].line, 1);
}

#[test]
fn header_form_and_canonical_paths() {
    let parsed = RobotsTxt::parse(b"User-agent: *\nContent-Usage: /%6Fpen/ train-ai=y\nContent-Signal: ai-train=no, search=yes\n");
    let robots = Robots::compile(&parsed, MatchMode::Canonical);
    let verdict = robots.verdict(&["x"], b"/open/a");
    let prefs = robots.preferences(&verdict, b"/open/a");
    assert_eq!(
        prefs.content_usage_header().as_deref(),
        Some("search=y, train-ai=y")
    );
    let verdict = robots.verdict(&["x"], b"/other");
    let prefs = robots.preferences(&verdict, b"/other");
    assert_eq!(
        prefs.content_usage_header().as_deref(),
        Some("search=y, train-ai=n")
    );
    assert!(!Robots::parse(b"User-agent: *\nDisallow: /").has_preferences());
    assert!(robots.has_preferences());
}

#[test]
fn lines_outside_a_group_apply_to_nobody() {
    let parsed = RobotsTxt::parse(b"Content-Signal: ai-train=no\nUser-agent: *\nDisallow: /x\n");
    assert!(parsed
        .diagnostics
        .iter()
        .any(|d| d.line == 1 && d.kind == DiagnosticKind::PreferenceOutsideGroup));
    assert!(!Robots::compile(&parsed, MatchMode::Exact).has_preferences());
}
