//! Property tests: the compiled engine against the plain reference model of Google's matcher, on
//! random robots.txt files, agents and URLs built from a small alphabet so that rules collide,
//! nest, tie and overlap often.

mod reference;

use proptest::prelude::*;
use robotsguard_robots::{pattern_matches, Robots};

/// Pattern bytes: a small path alphabet plus wildcards, anchors, escapes and non-ASCII.
fn pattern_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec!["/", "a", "b", "ab", ".", "?", "=", "/a", "/b"]).prop_map(String::from),
        2 => Just("*".to_string()),
        1 => Just("$".to_string()),
        1 => prop::sample::select(vec!["%2f", "%2F", "%61", "%zz", "%", "é", "ツ", "index.html", "index.htm"]).prop_map(String::from),
    ]
}

fn pattern() -> impl Strategy<Value = String> {
    prop::collection::vec(pattern_piece(), 0..7).prop_map(|pieces| {
        let joined = pieces.concat();
        if joined.starts_with('/') || joined.starts_with('*') || joined.is_empty() {
            joined
        } else {
            format!("/{joined}")
        }
    })
}

fn path() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            "/",
            "a",
            "b",
            "ab",
            ".",
            "?",
            "=",
            "$",
            "%2f",
            "%2F",
            "%61",
            "%C3%A9",
            "é",
            "index.html",
            "*",
        ]),
        0..8,
    )
    .prop_map(|pieces| format!("/{}", pieces.concat()))
}

fn agent_value() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "FooBot",
        "foobot",
        "BarBot",
        "*",
        "* extra",
        "*foo",
        "FooBot/1.0",
        "Foo Bot",
        "",
        "9x",
        "foo_bot-x",
    ])
    .prop_map(String::from)
}

/// One robots.txt line, in the forms (and misforms) the parser must handle.
fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => agent_value().prop_map(|v| format!("User-agent: {v}")),
        1 => agent_value().prop_map(|v| format!("useragent {v}")),
        5 => pattern().prop_map(|p| format!("Disallow: {p}")),
        5 => pattern().prop_map(|p| format!("Allow: {p}")),
        1 => pattern().prop_map(|p| format!("disallow {p}")),
        1 => pattern().prop_map(|p| format!("  DISALLOWED :{p}  # note")),
        1 => pattern().prop_map(|p| format!("dissallow: {p}")),
        1 => pattern().prop_map(|p| format!("alow: {p}")),
        1 => pattern().prop_map(|p| format!("disallow {p} extra")),
        1 => Just(String::new()),
        1 => Just("# comment".to_string()),
        1 => Just("Sitemap: https://example.com/s.xml".to_string()),
        1 => Just("Crawl-delay: 3".to_string()),
    ]
}

fn robots_body() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(line(), 0..14),
        prop::sample::select(vec!["\n", "\r\n", "\r"]),
        any::<bool>(),
    )
        .prop_map(|(lines, ending, bom)| {
            let mut body = if bom {
                vec![0xEF, 0xBB, 0xBF]
            } else {
                Vec::new()
            };
            body.extend_from_slice(lines.join(ending).as_bytes());
            body
        })
}

fn url() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => path(),
        1 => path().prop_map(|p| format!("http://example.com{p}")),
        1 => path().prop_map(|p| format!("https://example.com:8443{p}#frag")),
        1 => Just(String::new()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, .. ProptestConfig::default() })]

    #[test]
    fn engine_agrees_with_the_reference(
        body in robots_body(),
        agent in prop::sample::select(vec!["FooBot", "foobot", "BarBot", "QuxBot", "foo_bot-x", ""]),
        urls in prop::collection::vec(url(), 1..6),
    ) {
        let robots = Robots::parse(&body);
        for url in &urls {
            let verdict = robots.check_url(agent, url.as_bytes());
            let expected = reference::allowed_by_robots(&body, &[agent.as_bytes()], url.as_bytes());
            prop_assert_eq!(
                (verdict.allowed, verdict.line().unwrap_or(0)),
                expected,
                "robots={:?} agent={} url={}",
                String::from_utf8_lossy(&body),
                agent,
                url
            );
        }
    }

    #[test]
    fn compiled_pattern_matcher_agrees_with_naive_matching(pattern in pattern(), path in path()) {
        let escaped = robotsguard_robots::escape_pattern(pattern.as_bytes());
        prop_assert_eq!(
            pattern_matches(escaped.as_bytes(), path.as_bytes()),
            naive_matches(escaped.as_bytes(), path.as_bytes()),
            "pattern={} path={}", escaped, path
        );
    }
}

/// Backtracking glob matching, written the obvious way: exponential at worst, fine for short input.
fn naive_matches(pattern: &[u8], path: &[u8]) -> bool {
    match pattern {
        [] => true,
        [b'$'] => path.is_empty(),
        [b'*', rest @ ..] => (0..=path.len()).any(|skip| naive_matches(rest, &path[skip..])),
        [first, rest @ ..] => path.first() == Some(first) && naive_matches(rest, &path[1..]),
    }
}
