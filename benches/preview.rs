//! The preview's sample and replay (issue 55): what keeping a request costs the proxy's request
//! path (a pair already kept), how much memory 10 origins × 20,000 distinct crawler paths take
//! (RSS growth, printed), and how long a preview over one origin's 20,000 paths takes. Run with
//! `cargo bench --bench preview`; docs/BENCHMARKS.md has the figures.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use robotsguard::preview::Replay;
use robotsguard::reports::sample::Sample;
use robotsguard::snapshot::Snapshot;

const ORIGINS: usize = 10;
const PATHS: usize = 20_000;
const GPTBOT: &[u8] =
    b"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; GPTBot/1.2; +https://openai.com/gptbot";
const LIVE: &str = "User-agent: *\nDisallow: /private\n";

fn snapshot() -> Snapshot {
    let mut text = String::from("origins:\n");
    for n in 0..ORIGINS {
        text.push_str(&format!(
            "  - name: site{n}\n    hosts: [\"site{n}.example\"]\n    upstream: \"127.0.0.1:1\"\n    robots: {{source: inline, text: {:?}}}\n",
            LIVE
        ));
    }
    let config = robotsguard::config::load_str(&text, "bench.yaml", std::path::Path::new("."))
        .unwrap_or_else(|e| panic!("{e}"));
    Snapshot::build(Arc::new(config), None).unwrap_or_else(|e| panic!("{e}"))
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmRSS:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}

fn preview(c: &mut Criterion) {
    let snapshot = snapshot();
    let now = 1_800_000_000;
    let sample = Sample::new(24 * 3600, PATHS);
    let decision =
        robotsguard::enforce::decide(&snapshot, b"site0.example", GPTBOT, b"/known/page")
            .unwrap_or_else(|e| panic!("{e:?}"));
    c.bench_function("preview_sample_record_known_path", |b| {
        b.iter(|| sample.record(black_box(&decision), b"/known/page", GPTBOT, now))
    });

    // 10 origins x 20,000 distinct paths: the sample's memory, as RSS growth.
    let sample = Sample::new(24 * 3600, PATHS);
    let before = rss_kib();
    for origin in 0..ORIGINS {
        let host = format!("site{origin}.example");
        for n in 0..PATHS {
            let path = format!("/articles/{n}/some-article-title-{origin}");
            let decision =
                robotsguard::enforce::decide(&snapshot, host.as_bytes(), GPTBOT, path.as_bytes())
                    .unwrap_or_else(|e| panic!("{e:?}"));
            sample.record(&decision, path.as_bytes(), GPTBOT, now);
        }
    }
    let after = rss_kib();
    eprintln!(
        "preview sample: {ORIGINS} origins x {PATHS} paths: RSS growth {:.1} MiB ({} pairs in origin 0)",
        after.saturating_sub(before) as f64 / 1024.0,
        sample.pairs("site0")
    );

    // One preview over an origin's 20,000 paths, with a stricter file.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let verifier = robotsguard::verify::Verifier::new(&snapshot.config.verify);
    let store = robotsguard::store::Store::new(&snapshot.config.state);
    let stricter = bytes::Bytes::from(format!(
        "{LIVE}\nUser-agent: GPTBot\nDisallow: /articles/1\n"
    ));
    let candidate = snapshot
        .with_candidate("site0", None, Some(stricter))
        .unwrap_or_else(|| panic!("no site0"));
    let traffic = sample.traffic("site0", now);
    let replay = Replay {
        live: &snapshot,
        candidate: &candidate,
        verifier: &verifier,
        store: &store,
    };
    let started = Instant::now();
    let answer = runtime.block_on(replay.run("site0", &traffic, now - 86_400, now, None));
    eprintln!(
        "preview of {} paths: {:.0} ms, {} changed requests",
        traffic.paths.len(),
        started.elapsed().as_secs_f64() * 1000.0,
        answer.changes.iter().map(|c| c.requests).sum::<u64>()
    );
    let mut group = c.benchmark_group("preview_replay");
    group.sample_size(10);
    group.bench_function("20000_paths", |b| {
        b.iter(|| runtime.block_on(replay.run("site0", &traffic, now - 86_400, now, None)))
    });
    group.finish();
}

criterion_group!(benches, preview);
criterion_main!(benches);
