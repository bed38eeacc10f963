//! Engine benchmarks: parse+compile and per-check cost on small, medium and large robots.txt files,
//! and a pathological wildcard pattern. Run with `cargo bench --bench robots`; figures are recorded
//! in docs/BENCHMARKS.md.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use robotsguard_robots::{MatchMode, Robots, RobotsTxt};
use std::hint::black_box;

const FILES: [(&str, &[u8]); 3] = [
    ("small", include_bytes!("data/small.txt")),
    ("medium", include_bytes!("data/medium.txt")),
    ("large", include_bytes!("data/large.txt")),
];

/// A mix of paths for a file: for every fifth rule, a path under its literal prefix (often
/// disallowed), plus as many paths no rule names (allowed), deterministic.
fn paths_for(parsed: &RobotsTxt) -> Vec<Vec<u8>> {
    let mut paths = Vec::new();
    let rules: Vec<&str> = parsed
        .groups
        .iter()
        .flat_map(|g| g.rules.iter().map(|r| r.pattern.as_str()))
        .collect();
    for (i, pattern) in rules.iter().enumerate().step_by(5).take(200) {
        let prefix = pattern.split(['*', '$']).next().unwrap_or("/");
        paths.push(format!("{prefix}item{i}/page.html?ref=home").into_bytes());
        paths.push(format!("/unlisted{i}/section/article-{i}.html").into_bytes());
    }
    if paths.is_empty() {
        paths.push(b"/".to_vec());
    }
    paths
}

fn agents() -> [Vec<&'static str>; 3] {
    [
        vec!["googlebot-image", "googlebot"],
        vec!["gptbot"],
        vec!["someotherbot"],
    ]
}

fn parse_and_compile(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse_compile");
    for (name, body) in FILES {
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), body, |b, body| {
            b.iter(|| Robots::compile(&RobotsTxt::parse(black_box(body)), MatchMode::Exact))
        });
    }
    group.finish();
}

fn check(c: &mut Criterion) {
    for mode in [MatchMode::Exact, MatchMode::Canonical] {
        let mut group = c.benchmark_group(format!("check_{mode:?}").to_lowercase());
        for (name, body) in FILES {
            let parsed = RobotsTxt::parse(body);
            let robots = Robots::compile(&parsed, mode);
            let paths = paths_for(&parsed);
            let agents = agents();
            let checks = paths.len() * agents.len();
            group.throughput(Throughput::Elements(checks as u64));
            group.bench_function(BenchmarkId::from_parameter(name), |b| {
                b.iter(|| {
                    let mut disallowed = 0usize;
                    for tokens in &agents {
                        for path in &paths {
                            disallowed +=
                                usize::from(!robots.verdict(tokens, black_box(path)).allowed);
                        }
                    }
                    disallowed
                })
            });
        }
        group.finish();
    }
}

fn pathological(c: &mut Criterion) {
    let mut pattern = String::from("/");
    while pattern.len() < 16 * 1024 - 2 {
        pattern.push_str("*a");
    }
    let path = format!("/{}", "a".repeat(16 * 1024 - 1));
    let matching = Robots::parse(format!("User-agent: *\nDisallow: {pattern}\n").as_bytes());
    let failing = Robots::parse(format!("User-agent: *\nDisallow: {pattern}*b\n").as_bytes());
    let mut group = c.benchmark_group("pathological_16k");
    group.bench_function("star_a_matches", |b| {
        b.iter(|| matching.verdict(&["x"], black_box(path.as_bytes())).allowed)
    });
    group.bench_function("star_a_then_b_fails", |b| {
        b.iter(|| failing.verdict(&["x"], black_box(path.as_bytes())).allowed)
    });
    group.finish();
}

criterion_group!(benches, parse_and_compile, check, pathological);
criterion_main!(benches);
