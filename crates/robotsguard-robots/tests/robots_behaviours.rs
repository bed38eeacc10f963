//! The robots.txt behaviours of Google's reference matcher, one test per behaviour (numbered as in
//! the project's behaviour list), plus the example tables of Google's specification. Every verdict
//! is also checked against the plain reference model in `tests/reference`.

mod reference;

use robotsguard_robots::{GlobalFallback, GroupMatch, MatchMode, Robots, RobotsTxt};

/// The engine's verdict (allowed, deciding line), asserted equal to the reference model's.
fn verdict(robots: &str, agent: &str, url: &str) -> (bool, Option<u32>) {
    verdict_bytes(robots.as_bytes(), agent, url.as_bytes())
}

fn verdict_bytes(robots: &[u8], agent: &str, url: &[u8]) -> (bool, Option<u32>) {
    let compiled = Robots::parse(robots);
    let engine = compiled.check_url(agent, url);
    let (allowed, line) = reference::allowed_by_robots(robots, &[agent.as_bytes()], url);
    assert_eq!(
        (engine.allowed, engine.line().unwrap_or(0)),
        (allowed, line),
        "engine and reference disagree: robots={:?} agent={agent:?} url={:?}",
        String::from_utf8_lossy(robots),
        String::from_utf8_lossy(url)
    );
    (engine.allowed, engine.line())
}

fn allowed(robots: &str, agent: &str, url: &str) -> bool {
    verdict(robots, agent, url).0
}

const FOO: &str = "FooBot";

#[test]
fn b01_empty_robots_allows_everything() {
    for body in ["", "\n\n", "# only a comment\n#another", "   \n\t\n"] {
        assert!(allowed(body, FOO, "http://foo.bar/x/y"));
        assert!(allowed(body, FOO, ""));
    }
}

#[test]
fn b02_empty_url_is_root() {
    let robots = "user-agent: FooBot\ndisallow: /\n";
    assert!(!allowed(robots, FOO, ""));
    assert!(!allowed(robots, FOO, "http://foo.bar"));
    assert!(allowed("user-agent: FooBot\ndisallow: /x\n", FOO, ""));
}

#[test]
fn b03_missing_colon_with_two_tokens_is_accepted() {
    let robots = "user-agent FooBot\ndisallow /\n";
    assert!(!allowed(robots, FOO, "http://foo.bar/x"));
    assert!(!allowed("user-agent\tFooBot\ndisallow \t /x", FOO, "/x/y"));
}

#[test]
fn b04_missing_colon_with_three_tokens_is_dropped() {
    assert!(allowed("user-agent FooBot\ndisallow / x\n", FOO, "/x"));
    assert!(allowed("user-agent Foo Bot\ndisallow /\n", "Foo", "/x"));
    assert!(!allowed("user-agent FooBot\ndisallow /x\n", FOO, "/x"));
}

#[test]
fn b05_unknown_keys_are_ignored() {
    let robots = "user-agent: FooBot\nfoo: /x\nnoindex: /x\ncrawl-delay: 5\nhost: example.com\n";
    assert!(allowed(robots, FOO, "/x"));
    let robots = "user-agent: FooBot\nnoindex: /\ndisallow: /y\n";
    assert!(allowed(robots, FOO, "/x"));
    assert!(!allowed(robots, FOO, "/y"));
}

#[test]
fn b06_rules_before_the_first_user_agent_are_ignored() {
    let robots = "disallow: /\nallow: /x\nuser-agent: FooBot\ndisallow: /y\n";
    assert!(allowed(robots, FOO, "/z"));
    assert!(!allowed(robots, FOO, "/y"));
    assert!(allowed("disallow: /\n", FOO, "/z"));
}

#[test]
fn b07_consecutive_user_agent_lines_share_a_group() {
    let robots = "user-agent: BarBot\n\nuser-agent: FooBot\nuser-agent: BazBot\ndisallow: /x\n";
    for agent in ["FooBot", "BarBot", "BazBot"] {
        assert!(!allowed(robots, agent, "/x"), "{agent}");
    }
    assert!(allowed(robots, "QuxBot", "/x"));
}

#[test]
fn b08_blank_lines_do_not_end_a_group() {
    let robots = "user-agent: FooBot\n\n\ndisallow: /x\n\n\nallow: /x/y\n";
    assert!(!allowed(robots, FOO, "/x"));
    assert!(allowed(robots, FOO, "/x/y"));
}

#[test]
fn b09_user_agent_after_rules_starts_a_new_group() {
    let robots = "user-agent: FooBot\ndisallow: /x\nuser-agent: BarBot\ndisallow: /y\n";
    assert!(!allowed(robots, FOO, "/x"));
    assert!(allowed(robots, FOO, "/y"));
    assert!(allowed(robots, "BarBot", "/x"));
    assert!(!allowed(robots, "BarBot", "/y"));
}

#[test]
fn b10_groups_naming_the_same_agent_merge() {
    let robots = "user-agent: FooBot\ndisallow: /a\nuser-agent: BarBot\ndisallow: /b\n\
                  user-agent: FooBot\nallow: /a/b\ndisallow: /c\n";
    assert!(!allowed(robots, FOO, "/a"));
    assert!(allowed(robots, FOO, "/a/b"));
    assert!(!allowed(robots, FOO, "/c"));
    assert!(allowed(robots, FOO, "/b"));
    assert_eq!(verdict(robots, FOO, "/a/b/c").1, Some(6));
}

#[test]
fn b11_sitemap_and_unknown_lines_do_not_close_a_group() {
    let robots = "user-agent: BarBot\nsitemap: https://x/s.xml\nfoo: bar\nuser-agent: FooBot\ndisallow: /x\n";
    assert!(!allowed(robots, FOO, "/x"));
    assert!(!allowed(robots, "BarBot", "/x"));
}

#[test]
fn b12_keys_are_case_insensitive() {
    for robots in [
        "USER-AGENT: FooBot\nDISALLOW: /x\nALLOW: /x/y",
        "User-Agent: FooBot\nDisAllow: /x\naLLow: /x/y",
        "uSeR-aGeNt: FooBot\ndisallow: /x\nallow: /x/y",
    ] {
        assert!(!allowed(robots, FOO, "/x"));
        assert!(allowed(robots, FOO, "/x/y"));
    }
}

#[test]
fn b13_user_agent_value_is_case_insensitive() {
    for value in ["foobot", "FOOBOT", "FoObOt"] {
        let robots = format!("user-agent: {value}\ndisallow: /\n");
        assert!(!allowed(&robots, "FooBot", "/x"));
        assert!(!allowed(&robots, "foobot", "/x"));
    }
}

#[test]
fn b14_user_agent_value_is_truncated_to_its_leading_token() {
    assert!(!allowed("user-agent: Foo Bar\ndisallow: /\n", "Foo", "/x"));
    assert!(allowed(
        "user-agent: Foo Bar\ndisallow: /\n",
        "Foo Bar",
        "/x"
    ));
    assert!(!allowed(
        "user-agent: FooBot/2.1\ndisallow: /\n",
        "FooBot",
        "/x"
    ));
    assert!(!allowed("user-agent: Foo9Bot\ndisallow: /\n", "Foo", "/x"));
    assert!(allowed(
        "user-agent: Foo9Bot\ndisallow: /\n",
        "Foo9Bot",
        "/x"
    ));
    assert!(!allowed(
        "user-agent: foo_bar-baz.com\ndisallow: /\n",
        "foo_bar-baz",
        "/x"
    ));
}

#[test]
fn b15_agent_names_must_be_equal_not_prefixes() {
    assert!(allowed("user-agent: Foo\ndisallow: /\n", "FooBot", "/x"));
    assert!(allowed(
        "user-agent: FooBotX\ndisallow: /\n",
        "FooBot",
        "/x"
    ));
    let robots = "user-agent: Googlebot\ndisallow: /\n";
    assert!(allowed(robots, "Googlebot-Image", "/x"));
    assert!(!allowed(robots, "googlebot", "/x"));
}

#[test]
fn b16_the_callers_token_is_compared_verbatim() {
    let robots = "user-agent: FooBot\ndisallow: /\n";
    assert!(allowed(robots, "FooBot/1.0", "/x"));
    assert!(allowed(robots, "FooBot 1.0", "/x"));
    assert!(allowed(
        "user-agent: Foo Bar\ndisallow: /\n",
        "Foo Bar",
        "/x"
    ));
    assert!(allowed(robots, " FooBot", "/x"));
}

#[test]
fn b17_global_group_applies_only_without_a_group_of_ones_own() {
    let robots = "user-agent: *\ndisallow: /x\nuser-agent: FooBot\nallow: /\n";
    assert!(allowed(robots, FOO, "/x"));
    assert!(!allowed(robots, "BarBot", "/x"));
    assert!(allowed("user-agent: BarBot\ndisallow: /\n", FOO, "/x"));
}

#[test]
fn b18_a_group_of_ones_own_shields_from_the_global_group() {
    let star = "user-agent: *\ndisallow: /\n";
    for own in [
        "user-agent: FooBot\nallow: /other\n",
        "user-agent: FooBot\n",
        "user-agent: FooBot\ndisallow:\n",
        "user-agent: FooBot\nallow:\n",
    ] {
        assert!(allowed(&format!("{star}{own}"), FOO, "/x"), "{own:?}");
        assert!(!allowed(&format!("{star}{own}"), "BarBot", "/x"));
    }
    // Placed first, a group with rules stays separate from the '*' group that follows it.
    let robots = "user-agent: FooBot\ndisallow:\nuser-agent: *\ndisallow: /\n";
    assert!(allowed(robots, FOO, "/x"));
    // A rule-less one does not: the '*' line joins it, and FooBot obeys the shared rules.
    let robots = "user-agent: FooBot\nuser-agent: *\ndisallow: /\n";
    assert!(!allowed(robots, FOO, "/x"));
}

#[test]
fn b19_user_agent_and_rule_on_one_line_is_only_a_user_agent_line() {
    let robots = "user-agent: FooBot disallow: /\n";
    assert!(allowed(robots, FOO, "/x"));
    // The lost rule leaves FooBot's line rule-less, so the next User-agent line joins its group.
    let robots = "user-agent: FooBot disallow: /\nuser-agent: *\ndisallow: /y\n";
    assert!(!allowed(robots, FOO, "/y"));
    assert!(allowed(robots, FOO, "/x"));
    assert!(!allowed(robots, "BarBot", "/y"));
}

#[test]
fn b20_star_followed_by_text_is_still_global() {
    assert!(!allowed("user-agent: * ignored\ndisallow: /\n", FOO, "/x"));
    assert!(!allowed("user-agent: *\tfoo\ndisallow: /\n", FOO, "/x"));
    assert!(allowed("user-agent: *bot\ndisallow: /\n", FOO, "/x"));
    assert!(allowed("user-agent: *FooBot\ndisallow: /\n", FOO, "/x"));
}

#[test]
fn b21_empty_user_agent_value_is_not_global() {
    let robots = "user-agent:\ndisallow: /\n";
    assert!(allowed(robots, FOO, "/x"));
    let robots = "user-agent:\ndisallow: /\nuser-agent: *\ndisallow: /y\n";
    assert!(allowed(robots, FOO, "/x"));
    assert!(!allowed(robots, FOO, "/y"));
}

#[test]
fn b22_paths_are_case_sensitive() {
    let robots = "user-agent: FooBot\ndisallow: /X/\n";
    assert!(allowed(robots, FOO, "/x/"));
    assert!(!allowed(robots, FOO, "/X/"));
}

#[test]
fn b23_patterns_match_as_anchored_prefixes() {
    let robots = "user-agent: FooBot\ndisallow: /x/y\n";
    assert!(!allowed(robots, FOO, "/x/y"));
    assert!(!allowed(robots, FOO, "/x/yz/anything?q"));
    assert!(allowed(robots, FOO, "/a/x/y"));
    assert!(allowed(robots, FOO, "/x/"));
}

#[test]
fn b24_patterns_without_leading_slash_never_match_unless_starred() {
    assert!(allowed(
        "user-agent: FooBot\ndisallow: private\n",
        FOO,
        "/private"
    ));
    assert!(allowed(
        "user-agent: FooBot\ndisallow: x/private\n",
        FOO,
        "/x/private"
    ));
    assert!(!allowed(
        "user-agent: FooBot\ndisallow: *private\n",
        FOO,
        "/private"
    ));
    assert!(!allowed(
        "user-agent: FooBot\ndisallow: *private\n",
        FOO,
        "/x/private"
    ));
}

#[test]
fn b25_longest_match_wins_regardless_of_order() {
    let robots = "user-agent: FooBot\nallow: /x/page\ndisallow: /x/\n";
    assert!(allowed(robots, FOO, "/x/page"));
    assert!(!allowed(robots, FOO, "/x/other"));
    let robots = "user-agent: FooBot\ndisallow: /x/\nallow: /x/page\n";
    assert!(allowed(robots, FOO, "/x/page.html"));
    let robots = "user-agent: FooBot\nallow: /x/\ndisallow: /x/page\n";
    assert!(!allowed(robots, FOO, "/x/page"));
    assert_eq!(verdict(robots, FOO, "/x/page"), (false, Some(3)));
}

#[test]
fn b26_ties_go_to_allow() {
    let robots = "user-agent: FooBot\ndisallow: /x\nallow: /x\n";
    assert_eq!(verdict(robots, FOO, "/x"), (true, Some(3)));
    let robots = "user-agent: FooBot\nallow: /x\ndisallow: /x\n";
    assert_eq!(verdict(robots, FOO, "/x"), (true, Some(2)));
    let robots = "user-agent: FooBot\ndisallow: /*.a\nallow: /x*a\n";
    assert!(allowed(robots, FOO, "/x.a"));
}

#[test]
fn b27_priority_is_pattern_length_including_wildcards() {
    // "/*a" (3 bytes) beats "/b" (2 bytes) although it matches less of the path.
    let robots = "user-agent: FooBot\nallow: /b\ndisallow: /*a\n";
    assert!(!allowed(robots, FOO, "/ba"));
    let robots = "user-agent: FooBot\nallow: /ba\ndisallow: /*a\n";
    assert!(allowed(robots, FOO, "/ba"));
    let robots = "user-agent: FooBot\ndisallow: /x\nallow: /x$\n";
    assert!(allowed(robots, FOO, "/x"));
    assert!(!allowed(robots, FOO, "/xy"));
    let robots = "user-agent: FooBot\ndisallow: /page\nallow: /*$\n";
    assert!(!allowed(robots, FOO, "/page"));
}

#[test]
fn b28_empty_rule_values_match_nothing_but_make_the_group() {
    let robots = "user-agent: FooBot\ndisallow:\n";
    assert_eq!(verdict(robots, FOO, "/x"), (true, Some(2)));
    let robots = "user-agent: FooBot\nallow:\n";
    assert_eq!(verdict(robots, FOO, "/x"), (true, Some(2)));
    let robots = "user-agent: FooBot\nallow: /y\n";
    assert_eq!(verdict(robots, FOO, "/x"), (true, None));
    let robots = "user-agent: FooBot\ndisallow:\nuser-agent: *\ndisallow: /\n";
    assert!(allowed(robots, FOO, "/x"));
    let robots = "user-agent: FooBot\nallow:\ndisallow: /\n";
    assert!(!allowed(robots, FOO, "/x"));
}

#[test]
fn b29_specific_group_ignores_global_rules() {
    let robots = "user-agent: *\nallow: /x/longer/allow\nuser-agent: FooBot\ndisallow: /x\n";
    assert!(!allowed(robots, FOO, "/x/longer/allow"));
    let robots = "user-agent: *\ndisallow: /x\nuser-agent: FooBot\nallow: /y\n";
    assert!(allowed(robots, FOO, "/x"));
}

#[test]
fn b30_non_ascii_pattern_bytes_are_escaped_not_the_url() {
    let robots = "user-agent: FooBot\ndisallow: /foo/bar/ツ\n";
    assert!(!allowed(robots, FOO, "/foo/bar/%E3%83%84"));
    assert!(allowed(robots, FOO, "/foo/bar/ツ"));
    let robots = "user-agent: FooBot\ndisallow: /foo/bar/%E3%83%84\n";
    assert!(!allowed(robots, FOO, "/foo/bar/%E3%83%84"));
    assert!(allowed(robots, FOO, "/foo/bar/ツ"));
    let parsed = RobotsTxt::parse("user-agent: x\ndisallow: /é\n".as_bytes());
    assert_eq!(parsed.groups[0].rules[0].pattern, "/%C3%A9");
}

#[test]
fn b31_pattern_hex_is_upper_cased_url_hex_is_not() {
    let robots = "user-agent: FooBot\ndisallow: /foo/bar/%62%61%7a\n";
    assert!(!allowed(robots, FOO, "/foo/bar/%62%61%7A"));
    assert!(allowed(robots, FOO, "/foo/bar/%62%61%7a"));
    let robots = "user-agent: FooBot\ndisallow: /a%2fb\n";
    assert!(!allowed(robots, FOO, "/a%2Fb"));
    assert!(allowed(robots, FOO, "/a%2fb"));
}

#[test]
fn b32_no_percent_decoding_on_either_side() {
    let robots = "user-agent: FooBot\ndisallow: /foo/bar/baz\n";
    assert!(allowed(robots, FOO, "/foo/bar/%62%61%7A"));
    let robots = "user-agent: FooBot\ndisallow: /foo/bar/%62%61%7A\n";
    assert!(allowed(robots, FOO, "/foo/bar/baz"));
    let robots = "user-agent: FooBot\ndisallow: /%7E\n";
    assert!(allowed(robots, FOO, "/~"));
    let robots = "user-agent: FooBot\ndisallow: /~\n";
    assert!(allowed(robots, FOO, "/%7E"));
}

#[test]
fn b33_priority_uses_the_escaped_length() {
    // "/é" is 7 bytes once escaped: it outranks the 6-byte "/%C3%A".
    let robots = "user-agent: FooBot\nallow: /é\ndisallow: /%C3%A\n";
    assert!(allowed(robots, FOO, "/%C3%A9"));
    let robots = "user-agent: FooBot\nallow: /%C3%A\ndisallow: /é\n";
    assert!(!allowed(robots, FOO, "/%C3%A9"));
    // Same escaped length: tie, Allow wins.
    let robots = "user-agent: FooBot\ndisallow: /é\nallow: /%c3%a9\n";
    assert!(allowed(robots, FOO, "/%C3%A9"));
}

#[test]
fn b34_the_query_is_part_of_the_path() {
    let robots = "user-agent: FooBot\ndisallow: /x?a=1&b=2\ndisallow: /*?redirect=http://\n";
    assert!(!allowed(robots, FOO, "/x?a=1&b=2&c=3"));
    assert!(allowed(robots, FOO, "/x?b=2&a=1"));
    assert!(!allowed(robots, FOO, "/go?redirect=http://evil"));
    assert!(!allowed(
        "user-agent: FooBot\ndisallow: /?\n",
        FOO,
        "http://h/?q"
    ));
    assert!(!allowed(
        "user-agent: FooBot\ndisallow: /x;\n",
        FOO,
        "/x;jsessionid=1"
    ));
}

#[test]
fn b35_star_matches_any_run() {
    let robots = "user-agent: FooBot\ndisallow: /x*y\n";
    for path in ["/xy", "/x/y", "/x?y", "/xaaa/bbb?ccc=y", "/xyz"] {
        assert!(!allowed(robots, FOO, path), "{path}");
    }
    assert!(allowed(robots, FOO, "/x"));
    assert!(allowed(robots, FOO, "/yx"));
}

#[test]
fn b36_trailing_star_is_redundant_but_counts() {
    for path in ["/fish", "/fish.html", "/fishheads/x", "/fish?x"] {
        assert_eq!(
            allowed("user-agent: FooBot\ndisallow: /fish*\n", FOO, path),
            allowed("user-agent: FooBot\ndisallow: /fish\n", FOO, path)
        );
    }
    // "/fish*" (6) outranks "/fish" (5) as an Allow.
    let robots = "user-agent: FooBot\ndisallow: /fish\nallow: /fish*\n";
    assert!(allowed(robots, FOO, "/fish"));
    let robots = "user-agent: FooBot\nallow: /fish\ndisallow: /fish*\n";
    assert!(!allowed(robots, FOO, "/fish"));
}

#[test]
fn b37_dollar_anchors_at_the_end_of_path_and_query() {
    let robots = "user-agent: FooBot\ndisallow: /*.php$\n";
    assert!(!allowed(robots, FOO, "/filename.php"));
    assert!(!allowed(robots, FOO, "/folder/filename.php"));
    assert!(allowed(robots, FOO, "/filename.php?parameters"));
    assert!(allowed(robots, FOO, "/filename.php/"));
    assert!(allowed(robots, FOO, "/filename.php5"));
    assert!(allowed(robots, FOO, "/windows.PHP"));
    assert!(!allowed(
        "user-agent: FooBot\ndisallow: /$\n",
        FOO,
        "http://h"
    ));
    assert!(allowed("user-agent: FooBot\ndisallow: /$\n", FOO, "/x"));
}

#[test]
fn b38_dollar_inside_a_pattern_is_literal() {
    let robots = "user-agent: FooBot\ndisallow: /a$b\n";
    assert!(!allowed(robots, FOO, "/a$b"));
    assert!(!allowed(robots, FOO, "/a$bc"));
    assert!(allowed(robots, FOO, "/a"));
    let robots = "user-agent: FooBot\ndisallow: /a$$\n";
    assert!(!allowed(robots, FOO, "/a$"));
    assert!(allowed(robots, FOO, "/a$x"));
}

#[test]
fn b39_wildcard_examples_of_the_documentation() {
    let robots = "user-agent: FooBot\ndisallow: /*.php\ndisallow: /*.css\n";
    assert!(!allowed(robots, FOO, "/index.php"));
    assert!(!allowed(robots, FOO, "/filename.php"));
    assert!(!allowed(robots, FOO, "/folder/filename.php"));
    assert!(!allowed(robots, FOO, "/folder/filename.php?parameters"));
    assert!(!allowed(robots, FOO, "/folder/any.php.file.html"));
    assert!(!allowed(robots, FOO, "/filename.php/"));
    assert!(!allowed(robots, FOO, "/x?style=main.css"));
    assert!(allowed(robots, FOO, "/"));
    assert!(allowed(robots, FOO, "/windows.PHP"));
}

#[test]
fn b40_hash_starts_a_comment_anywhere() {
    let robots = "# header\nuser-agent: FooBot # the bot\ndisallow: /x#y\n";
    assert!(!allowed(robots, FOO, "/x"));
    assert!(!allowed(robots, FOO, "/xz"));
    assert!(allowed("user-agent: FooBot\n#disallow: /\n", FOO, "/x"));
    assert!(allowed("user-agent: FooBot\ndisallow: #/\n", FOO, "/x"));
}

#[test]
fn b41_index_html_allows_its_directory() {
    let robots = "user-agent: FooBot\ndisallow: /\nallow: /allowed-slash/index.html\n";
    assert_eq!(verdict(robots, FOO, "/allowed-slash/"), (true, Some(3)));
    assert!(allowed(robots, FOO, "/allowed-slash/index.html"));
    assert!(!allowed(robots, FOO, "/allowed-slash/index.htm"));
    assert!(!allowed(robots, FOO, "/allowed-slash/other"));
    assert!(!allowed(robots, FOO, "/allowed-slash/?q"));
    assert!(!allowed(robots, FOO, "/allowed-slash"));
    let robots = "user-agent: FooBot\ndisallow: /\nallow: /a/index.htm\n";
    assert!(allowed(robots, FOO, "/a/"));
    let robots = "user-agent: FooBot\ndisallow: /\nallow: /a/index.html5\n";
    assert!(allowed(robots, FOO, "/a/"));
    let robots = "user-agent: FooBot\nallow: /\ndisallow: /a/index.html\n";
    assert!(allowed(robots, FOO, "/a/"));
    // The directory rule counts as "/a/$" (4 bytes): it beats "/a/" (3), loses to "/a/**" (5).
    let robots = "user-agent: FooBot\nallow: /a/index.html\ndisallow: /a/\n";
    assert!(allowed(robots, FOO, "/a/"));
    let robots = "user-agent: FooBot\nallow: /a/index.html\ndisallow: /a/**\n";
    assert!(!allowed(robots, FOO, "/a/"));
}

#[test]
fn b42_long_lines_are_cut_at_16663_bytes() {
    let max = 2083 * 8 - 1;
    let prefix = "user-agent: FooBot\ndisallow: /";
    let kept = max - "disallow: /".len();
    let long = format!(
        "{prefix}{}{}\ndisallow: /next\n",
        "a".repeat(kept),
        "b".repeat(100)
    );
    let kept_path = format!("/{}", "a".repeat(kept));
    assert!(!allowed(&long, FOO, &kept_path));
    assert!(!allowed(&long, FOO, &format!("{kept_path}c")));
    assert!(allowed(&long, FOO, &"a".repeat(kept - 1)));
    assert!(!allowed(&long, FOO, "/next"));
    let shorter = format!("/{}", "a".repeat(kept - 1));
    assert!(allowed(&long, FOO, &shorter));
}

#[test]
fn b43_lf_crlf_and_cr_all_end_lines() {
    for robots in [
        "user-agent: FooBot\ndisallow: /x\nallow: /x/y\n",
        "user-agent: FooBot\r\ndisallow: /x\r\nallow: /x/y\r\n",
        "user-agent: FooBot\rdisallow: /x\rallow: /x/y\r",
        "user-agent: FooBot\r\ndisallow: /x\rallow: /x/y",
    ] {
        assert!(!allowed(robots, FOO, "/x"));
        assert_eq!(verdict(robots, FOO, "/x/y"), (true, Some(3)));
    }
    assert_eq!(
        verdict("user-agent: FooBot\n\r\ndisallow: /x", FOO, "/x").1,
        Some(3)
    );
}

#[test]
fn b44_bom_is_skipped_only_at_the_start() {
    let body = b"\xEF\xBB\xBFuser-agent: FooBot\ndisallow: /\n";
    assert!(!verdict_bytes(body, FOO, b"/x").0);
    let body = b"\xEF\xBBuser-agent: FooBot\ndisallow: /\n";
    assert!(!verdict_bytes(body, FOO, b"/x").0);
    let body = b"\xEFuser-agent: FooBot\ndisallow: /\n";
    assert!(!verdict_bytes(body, FOO, b"/x").0);
    let body = b"\xEF\x11\xBFuser-agent: FooBot\ndisallow: /\n";
    assert!(verdict_bytes(body, FOO, b"/x").0);
    let body = b"user-agent: FooBot\n\xEF\xBB\xBFdisallow: /\n";
    assert!(verdict_bytes(body, FOO, b"/x").0);
}

#[test]
fn b45_sitemaps_anywhere_never_change_a_verdict() {
    let robots =
        "sitemap: https://x/s.xml\nuser-agent: FooBot\nsitemap: /s2\ndisallow: /x\nsitemap: /s3\n";
    assert!(!allowed(robots, FOO, "/x"));
    assert!(allowed(robots, FOO, "/s2"));
    let parsed = RobotsTxt::parse(robots.as_bytes());
    assert_eq!(parsed.sitemaps.len(), 3);
}

#[test]
fn b46_common_misspellings_are_accepted() {
    for key in ["dissallow", "dissalow", "disalow", "diasllow", "disallaw"] {
        let robots = format!("user-agent: FooBot\n{key}: /x\n");
        assert!(!allowed(&robots, FOO, "/x"), "{key}");
    }
    assert!(!allowed("useragent: FooBot\ndisallow: /x\n", FOO, "/x"));
    assert!(!allowed("user agent: FooBot\ndisallow: /x\n", FOO, "/x"));
    assert!(!allowed("useragent FooBot\ndisallow /x\n", FOO, "/x"));
    let parsed = RobotsTxt::parse(b"site-map: /s\n");
    assert_eq!(parsed.sitemaps.len(), 1);
}

#[test]
fn b47_other_misspellings_are_rejected() {
    assert!(!allowed(
        "user-agent: FooBot\ndisallow: /\nalow: /x\n",
        FOO,
        "/x"
    ));
    assert!(allowed("user_agent: FooBot\ndisallow: /x\n", FOO, "/x"));
    assert!(allowed("user-agent: FooBot\ndisalllow: /x\n", FOO, "/x"));
    assert!(allowed("user-agent: FooBot\ndis-allow: /x\n", FOO, "/x"));
    assert!(allowed("useragnet: FooBot\ndisallow: /x\n", FOO, "/x"));
}

#[test]
fn b48_a_key_counts_if_it_starts_with_the_directive() {
    assert!(!allowed("user-agents: FooBot\ndisallowed: /x\n", FOO, "/x"));
    assert!(allowed(
        "user-agent: FooBot\ndisallow: /\nallowance: /x\n",
        FOO,
        "/x"
    ));
    assert!(!allowed(
        "user-agent: FooBot\ndisallow-this: /x\n",
        FOO,
        "/x"
    ));
    // A colon-less line whose value holds a colon: the key is everything before that colon.
    let robots = "user-agent: FooBot\ndisallow /foo:/bar\n";
    assert!(!allowed(robots, FOO, "/bar"));
    assert!(allowed(robots, FOO, "/foo"));
}

#[test]
fn b49_whitespace_around_keys_colon_and_values_is_trimmed() {
    let robots = "  user-agent \t :  FooBot  \n\t disallow  :   /x  \n";
    assert!(!allowed(robots, FOO, "/x"));
    let robots = "user-agent: FooBot\ndisallow: /a:b\n";
    assert!(!allowed(robots, FOO, "/a:b"));
    assert!(allowed(robots, FOO, "/a"));
    let robots = "user-agent: FooBot\ndisallow: /a b\n";
    assert!(!allowed(robots, FOO, "/a b"));
}

#[test]
fn b50_only_path_params_and_query_are_matched() {
    let robots = "user-agent: FooBot\ndisallow: /x\n";
    for url in [
        "http://foo.bar/x",
        "https://user:pw@foo.bar:8080/x?y",
        "//foo.bar/x/y",
        "foo.bar/x",
        "/x#fragment",
    ] {
        assert!(!allowed(robots, FOO, url), "{url}");
    }
    assert!(allowed(robots, FOO, "http://foo.bar/#x"));
    assert!(allowed(robots, FOO, "http://x.bar"));
    assert!(!allowed(
        "user-agent: FooBot\ndisallow: /$\n",
        FOO,
        "http://foo.bar"
    ));
    assert!(allowed(
        "user-agent: FooBot\ndisallow: /x#\n",
        FOO,
        "http://foo.bar/y#x"
    ));
}

#[test]
fn b51_url_paths_are_not_normalised() {
    let robots = "user-agent: FooBot\ndisallow: /private\n";
    assert!(allowed(robots, FOO, "/public/../private"));
    assert!(allowed(robots, FOO, "//private"));
    assert!(allowed(robots, FOO, "/./private"));
    assert!(allowed(robots, FOO, "/Private"));
    assert!(allowed(robots, FOO, "/%70rivate"));
}

/// Google's documented path-matching table (English specification, "URL matching based on path
/// values").
#[test]
fn specification_path_matching_table() {
    let table: &[(&str, &[&str], &[&str])] = &[
        ("/", &["/", "/fish", "/fish.html", "/fish?id=anything"], &[]),
        ("/*", &["/", "/fish", "/fish.html"], &[]),
        (
            "/fish",
            &[
                "/fish",
                "/fish.html",
                "/fish/salmon.html",
                "/fishheads",
                "/fishheads/yummy.html",
                "/fish.php?id=anything",
            ],
            &["/Fish.asp", "/catfish", "/?id=fish", "/desert/fish"],
        ),
        (
            "/fish*",
            &[
                "/fish",
                "/fish.html",
                "/fish/salmon.html",
                "/fishheads",
                "/fishheads/yummy.html",
                "/fish.php?id=anything",
            ],
            &["/Fish.asp", "/catfish", "/?id=fish", "/desert/fish"],
        ),
        (
            "/fish/",
            &["/fish/", "/fish/?id=anything", "/fish/salmon.htm"],
            &["/fish", "/fish.html", "/animals/fish/", "/Fish/Salmon.asp"],
        ),
        (
            "/*.php",
            &[
                "/index.php",
                "/filename.php",
                "/folder/filename.php",
                "/folder/filename.php?parameters",
                "/folder/any.php.file.html",
                "/filename.php/",
            ],
            &["/", "/windows.PHP"],
        ),
        (
            "/*.php$",
            &["/filename.php", "/folder/filename.php"],
            &[
                "/filename.php?parameters",
                "/filename.php/",
                "/filename.php5",
                "/windows.PHP",
            ],
        ),
        (
            "/fish*.php",
            &["/fish.php", "/fishheads/catfish.php?parameters"],
            &["/Fish.PHP"],
        ),
    ];
    for (pattern, matching, not_matching) in table {
        let robots = format!("user-agent: FooBot\ndisallow: {pattern}\n");
        for path in *matching {
            assert!(
                !allowed(&robots, FOO, path),
                "{pattern} should match {path}"
            );
        }
        for path in *not_matching {
            assert!(
                allowed(&robots, FOO, path),
                "{pattern} should not match {path}"
            );
        }
    }
}

/// The precedence examples of the specification ("Order of precedence for rules").
#[test]
fn specification_precedence_examples() {
    let cases = [
        ("allow: /p\ndisallow: /", "http://example.com/page", true),
        (
            "allow: /folder\ndisallow: /folder",
            "http://example.com/folder/page",
            true,
        ),
        (
            "allow: /page\ndisallow: /*.htm",
            "http://example.com/page.htm",
            false,
        ),
        (
            "allow: /page\ndisallow: /*.ph",
            "http://example.com/page.php5",
            true,
        ),
        ("allow: /$\ndisallow: /", "http://example.com/", true),
        (
            "allow: /$\ndisallow: /",
            "http://example.com/page.htm",
            false,
        ),
    ];
    for (rules, url, expected) in cases {
        let robots = format!("user-agent: FooBot\n{rules}\n");
        assert_eq!(allowed(&robots, FOO, url), expected, "{rules:?} {url}");
    }
}

/// The user-agent precedence example of the specification: which group each crawler obeys.
#[test]
fn specification_group_selection_example() {
    let robots = "user-agent: googlebot-news\ndisallow: /fish\n\n\
                  user-agent: *\ndisallow: /carrots\n\n\
                  user-agent: googlebot-news\ndisallow: /shrimp\n";
    assert!(!allowed(robots, "googlebot-news", "/fish"));
    assert!(!allowed(robots, "googlebot-news", "/shrimp"));
    assert!(allowed(robots, "googlebot-news", "/carrots"));
    assert!(!allowed(robots, "googlebot", "/carrots"));
    assert!(allowed(robots, "googlebot", "/fish"));

    // Googlebot-Image without a group of its own falls back to the googlebot group when the caller
    // lists its tokens most specific first.
    let robots = "user-agent: googlebot\ndisallow: /g\nuser-agent: *\ndisallow: /all\n";
    let compiled = Robots::parse(robots.as_bytes());
    let image = compiled.verdict(&["googlebot-image", "googlebot"], b"/g");
    assert!(!image.allowed);
    assert_eq!(image.group, GroupMatch::Agent("googlebot"));
    assert!(
        compiled
            .verdict(&["googlebot-image", "googlebot"], b"/all")
            .allowed
    );
    let other = compiled.verdict(&["otherbot"], b"/all");
    assert_eq!((other.allowed, other.group), (false, GroupMatch::Global));
    let with_own = Robots::parse(
        b"user-agent: googlebot-image\ndisallow: /i\nuser-agent: googlebot\ndisallow: /g\n",
    );
    let verdict = with_own.verdict(&["googlebot-image", "googlebot"], b"/g");
    assert!(verdict.allowed);
    assert_eq!(verdict.group, GroupMatch::Agent("googlebot-image"));
}

#[test]
fn global_fallback_can_be_ignored() {
    let robots = Robots::parse(b"user-agent: *\ndisallow: /\n");
    let verdict = robots.verdict_with(&["adsbot-google"], b"/x", GlobalFallback::Ignore);
    assert!(verdict.allowed);
    assert_eq!(verdict.group, GroupMatch::None);
    assert!(!robots.verdict(&["adsbot-google"], b"/x").allowed);
}

#[test]
fn deciding_rule_names_line_directive_and_pattern() {
    let robots = Robots::parse(
        b"user-agent: *\ndisallow: /private\nallow: /private/ok\nallow: /d/index.html\n",
    );
    let verdict = robots.verdict(&["x"], b"/private/x");
    let rule = verdict.rule.expect("a rule decided");
    assert_eq!(
        (rule.line, rule.directive.as_str(), rule.pattern),
        (2, "Disallow", "/private")
    );
    let rule = robots
        .verdict(&["x"], b"/private/ok")
        .rule
        .expect("a rule decided");
    assert_eq!((rule.line, rule.directive.as_str()), (3, "Allow"));
    let rule = robots.verdict(&["x"], b"/d/").rule.expect("a rule decided");
    assert_eq!((rule.line, rule.pattern), (4, "/d/index.html"));
}

#[test]
fn canonical_mode_defeats_evasion_on_both_sides() {
    let parsed = RobotsTxt::parse(
        b"user-agent: *\ndisallow: /private\ndisallow: /%7Euser/\nallow: /private/ok\n",
    );
    let robots = Robots::compile(&parsed, MatchMode::Canonical);
    for evasion in [
        "/private",
        "/%70rivate",
        "//private",
        "/public/../private",
        "/./private",
        "/public/%2E%2E/private",
        "/~user/x",
        "/%7euser/x",
    ] {
        assert!(
            !robots.verdict(&["x"], evasion.as_bytes()).allowed,
            "{evasion}"
        );
    }
    assert!(robots.verdict(&["x"], b"/private/ok").allowed);
    assert!(robots.verdict(&["x"], b"/Private").allowed);
    let exact = Robots::compile(&parsed, MatchMode::Exact);
    assert!(exact.verdict(&["x"], b"/%70rivate").allowed);
}
