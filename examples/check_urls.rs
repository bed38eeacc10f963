//! robotsguard's engine as a library: identify the crawler behind a User-Agent, then ask a
//! robots.txt whether it may fetch each URL, with the deciding line. No proxy, no I/O beyond
//! reading the file.
//!
//! ```sh
//! cargo run --example check_urls -- robots.txt "Mozilla/5.0 (compatible; GPTBot/1.2)" /private https://example.com/blog
//! cargo run --example check_urls            # a built-in robots.txt and a few User-Agents
//! ```
//!
//! Matching is in the proxy's canonical mode, so `/%70rivate` and `/a/../private` are judged as
//! `/private`; switch to `MatchMode::Google` for the byte-exact verdicts of Google's library.
//! Exit status: 0 when every URL is allowed, 1 when some is disallowed, 2 on bad input.

use std::process::ExitCode;

use robotsguard::crawlers::Identifier;
use robotsguard::robots::{
    path_params_query, reduce_agent_name, GlobalFallback, GroupMatch, MatchMode, Robots, RobotsTxt,
};

const SAMPLE_ROBOTS: &str = "\
User-agent: *
Disallow: /cart/
Disallow: /search

User-agent: GPTBot
User-agent: CCBot
Disallow: /

User-agent: Googlebot
Allow: /search/help
Disallow: /search
";

const SAMPLE_REQUESTS: [(&str, &str); 5] = [
    (
        "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; GPTBot/1.2; +https://openai.com/gptbot",
        "/articles/1",
    ),
    (
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        "/search/help",
    ),
    (
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        "/%73earch?q=shoes",
    ),
    ("curl/8.5.0", "/cart/42"),
    (
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36",
        "/cart/42",
    ),
];

/// One line of output for a User-Agent and URL; `Some(false)` when disallowed, `None` when the
/// User-Agent is not a crawler (robots.txt does not apply to people).
fn check(identifier: &Identifier, robots: &Robots, user_agent: &str, url: &str) -> Option<bool> {
    let Some(crawler) = identifier.identify(user_agent.as_bytes(), None) else {
        println!("pass        {url}  (not a crawler: {user_agent})");
        return None;
    };
    // robots.txt names a group by the leading letters of a token (`MJ12bot` is `MJ`), so the
    // crawler's tokens are reduced the same way before they select a group.
    let tokens: Vec<&str> = crawler
        .tokens
        .iter()
        .map(|token| &token[..reduce_agent_name(token.as_bytes()).len()])
        .filter(|token| !token.is_empty())
        .collect();
    let fallback = if crawler.ignores_global {
        GlobalFallback::Ignore
    } else {
        GlobalFallback::Use
    };
    let verdict = robots.verdict_with(&tokens, &path_params_query(url.as_bytes()), fallback);
    let group = match verdict.group {
        GroupMatch::Agent(name) => format!("group `{name}`"),
        GroupMatch::Global => "group `*`".to_string(),
        GroupMatch::None => "no group".to_string(),
    };
    let rule = match verdict.rule {
        Some(rule) => format!(
            "line {}: {}: {}",
            rule.line,
            rule.directive.as_str(),
            rule.pattern
        ),
        None => "no matching rule".to_string(),
    };
    let word = if verdict.allowed {
        "allowed"
    } else {
        "disallowed"
    };
    println!("{word:<11} {url}  ({}, {group}, {rule})", crawler.name);
    Some(verdict.allowed)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (robots_txt, requests): (Vec<u8>, Vec<(String, String)>) = match args.as_slice() {
        [] => (
            SAMPLE_ROBOTS.as_bytes().to_vec(),
            SAMPLE_REQUESTS
                .iter()
                .map(|(ua, url)| (ua.to_string(), url.to_string()))
                .collect(),
        ),
        [file, user_agent, urls @ ..] if !urls.is_empty() => match std::fs::read(file) {
            Ok(body) => (
                body,
                urls.iter()
                    .map(|url| (user_agent.clone(), url.clone()))
                    .collect(),
            ),
            Err(e) => {
                eprintln!("cannot read {file}: {e}");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("usage: check_urls [ROBOTS_FILE USER_AGENT URL...]");
            return ExitCode::from(2);
        }
    };

    // Parse and compile once; each check is then a lookup in the compiled index.
    let parsed = RobotsTxt::parse(&robots_txt);
    let robots = Robots::compile(&parsed, MatchMode::Canonical);
    let identifier = match Identifier::builtin(true) {
        Ok(identifier) => identifier,
        Err(e) => {
            eprintln!("the built-in crawler catalogue does not load: {e}");
            return ExitCode::from(2);
        }
    };

    let mut all_allowed = true;
    for (user_agent, url) in &requests {
        if check(&identifier, &robots, user_agent, url) == Some(false) {
            all_allowed = false;
        }
    }
    if all_allowed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
