//! Hostile robots.txt input: the engine never panics, ignores what lies past the size limit, and
//! keeps its compiled form small. Time is measured by the benches, not asserted here.

use robotsguard_robots::{MatchMode, Robots, RobotsTxt, DEFAULT_MAX_SIZE};

#[test]
fn bytes_past_the_size_limit_are_ignored() {
    let mut body = b"User-agent: *\nDisallow: /early\n".to_vec();
    body.resize(DEFAULT_MAX_SIZE, b'\n');
    body.extend_from_slice(b"Disallow: /late\n");
    body.resize(10 * 1024 * 1024, b'x');
    let robots = Robots::parse(&body);
    assert!(!robots.check_url("x", b"/early").allowed);
    assert!(robots.check_url("x", b"/late").allowed);
    let larger = Robots::compile(
        &RobotsTxt::parse_with_limit(&body, 11 * 1024 * 1024),
        MatchMode::Exact,
    );
    assert!(!larger.check_url("x", b"/late").allowed);
}

#[test]
fn a_million_one_byte_lines_and_nul_bytes() {
    let mut body = b"User-agent: *\n".to_vec();
    body.extend(std::iter::repeat_n(b"a\n", 250_000).flatten());
    body.extend_from_slice(b"Disallow: /x\0/hidden\n");
    let parsed = RobotsTxt::parse(&body);
    assert_eq!(parsed.groups.len(), 1);
    assert_eq!(parsed.groups[0].rules[0].pattern, "/x");
    let robots = Robots::compile(&parsed, MatchMode::Exact);
    assert!(!robots.check_url("x", b"/x/anything").allowed);
}

#[test]
fn invalid_utf8_everywhere() {
    let body =
        b"User-agent: \xff\xfe*\nUser-agent: *\nDisallow: /\xc3\x28\xa0\nAllow: \xf0\x9f\x92\xa9\n";
    let robots = Robots::parse(body);
    assert!(!robots.check_url("\u{fffd}", b"/%C3(%A0x").allowed);
    assert!(robots.check_url("x", b"/\xc3\x28\xa0").allowed);
    let canonical = Robots::compile(&RobotsTxt::parse(body), MatchMode::Canonical);
    assert!(!canonical.verdict(&["x"], b"/\xc3\x28\xa0").allowed);
}

#[test]
fn thousands_of_stars_and_long_lines() {
    let stars = "*".repeat(16_000);
    let many = format!("User-agent: *\nDisallow: /{stars}z\n");
    let robots = Robots::parse(many.as_bytes());
    let path = format!("/{}", "a".repeat(16_000));
    assert!(robots.check_url("x", path.as_bytes()).allowed);
    assert!(!robots.check_url("x", format!("{path}z").as_bytes()).allowed);

    let mut rules = String::from("User-agent: *\n");
    for i in 0..5_000 {
        rules.push_str(&format!("Disallow: /*a*a*a*{i}*b$\n"));
    }
    let robots = Robots::parse(rules.as_bytes());
    assert!(robots.check_url("x", path.as_bytes()).allowed);
    assert!(!robots.check_url("x", b"/aaa42b").allowed);
}

#[test]
fn many_agents_sharing_one_group_compile_once() {
    let mut body = String::new();
    for i in 0..2_000 {
        body.push_str(&format!("User-agent: bot{}\n", "x".repeat(i % 50 + 1)));
    }
    for i in 0..2_000 {
        body.push_str(&format!("Disallow: /section{i}/\n"));
    }
    let robots = Robots::parse(body.as_bytes());
    assert!(!robots.check_url("botxxx", b"/section1999/page").allowed);
    assert!(
        robots.heap_size() < 3 * body.len(),
        "{} vs {}",
        robots.heap_size(),
        body.len()
    );
}

#[test]
fn compiled_size_of_the_large_benchmark_file_is_within_three_times_its_bytes() {
    let body = include_bytes!("../benches/data/large.txt");
    let robots = Robots::parse(body);
    eprintln!(
        "large.txt: {} bytes, compiled {} bytes ({:.2}x)",
        body.len(),
        robots.heap_size(),
        robots.heap_size() as f64 / body.len() as f64
    );
    assert!(robots.rule_count() > 4_500);
    assert!(
        robots.heap_size() <= 3 * body.len(),
        "compiled {} bytes for a {}-byte file",
        robots.heap_size(),
        body.len()
    );
}
