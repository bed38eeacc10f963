//! Parse + compile + match on arbitrary bytes, in both modes, and compare the exact mode with the
//! plain reference model of Google's matcher. Input layout: robots.txt body, then a 0xFF byte,
//! the agent token, 0xFF, the URL (missing parts are empty).
#![no_main]

use libfuzzer_sys::fuzz_target;
use robotsguard_robots::{MatchMode, Robots, RobotsTxt};

#[path = "../../crates/robotsguard-robots/tests/reference/mod.rs"]
mod reference;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |&b| b == 0xFF);
    let body = parts.next().unwrap_or_default();
    let agent = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let url = parts.next().unwrap_or_default();

    let parsed = RobotsTxt::parse(body);
    let exact = Robots::compile(&parsed, MatchMode::Exact);
    let verdict = exact.check_url(&agent, url);
    // The reference model is quadratic; keep the comparison to inputs it handles quickly.
    if body.len() + url.len() < 8192 {
        let expected = reference::allowed_by_robots(body, &[agent.as_bytes()], url);
        assert_eq!((verdict.allowed, verdict.line().unwrap_or(0)), expected);
    }
    let canonical = Robots::compile(&parsed, MatchMode::Canonical);
    let path = robotsguard_robots::path_params_query(url);
    let _ = canonical.verdict(&[&agent, "googlebot"], &path);
});
