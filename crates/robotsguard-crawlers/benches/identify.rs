//! Identification cost per User-Agent: the common mix (browsers and well-known crawlers, the
//! per-thread memory warm), User-Agents never seen before (every call misses the memory), and a
//! long hostile User-Agent made of crawler names. `cargo bench -p robotsguard-crawlers`.

use criterion::{criterion_group, criterion_main, Criterion};
use robotsguard_crawlers::{Identifier, RobotsTokenScanner};
use std::hint::black_box;

const MIX: &[&str] = &[
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)",
    "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
    "CCBot/2.0 (https://commoncrawl.org/faq/)",
    "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)",
    "python-requests/2.32.3",
];

fn identify(c: &mut Criterion) {
    let identifier = match Identifier::builtin(true) {
        Ok(identifier) => identifier,
        Err(error) => panic!("the built-in catalogue must load: {error}"),
    };
    let scanner = RobotsTokenScanner::new(["examplebot", "somecrawler", "gptbot"]);

    c.bench_function("identify/mix", |b| {
        b.iter(|| {
            for ua in MIX {
                black_box(identifier.identify(black_box(ua.as_bytes()), Some(&scanner)));
            }
        })
    });

    // A different User-Agent every call: what a flood of unique User-Agents costs.
    let unseen: Vec<String> = (0..4096)
        .map(|i| format!("{} build/{i}", MIX[i % MIX.len()]))
        .collect();
    let mut next = 0usize;
    c.bench_function("identify/unseen", |b| {
        b.iter(|| {
            let ua = &unseen[next % unseen.len()];
            next = next.wrapping_add(1);
            black_box(identifier.identify(black_box(ua.as_bytes()), Some(&scanner)))
        })
    });

    let hostile = "Googlebot GPTBot bingbot CCBot ".repeat(8192 / 31);
    c.bench_function("identify/hostile_8k", |b| {
        b.iter(|| black_box(identifier.identify_all(black_box(hostile.as_bytes()), Some(&scanner))))
    });
}

criterion_group!(benches, identify);
criterion_main!(benches);
