//! Measures config hot reload of a large config (default 1,000 origins, robots.txt from files)
//! with robotsguard's real watcher and reload pipeline: the time from the write that changes the
//! config to the swap of the new snapshot.
//!
//! ```sh
//! cargo run --release --example reload_bench -- [ORIGINS] [ROUNDS]
//! ```
//!
//! Scenarios, each `ROUNDS` times:
//! - `rename, 1 origin changed`: the config is replaced by a rename (as editors and kubelet do)
//!   and one origin's mode changes; every robots.txt slot is carried over.
//! - `rename, all robots paths changed`: every origin points at another robots.txt file, so every
//!   file is read and compiled before the swap (the worst case).
//! - `in-place write, 1 origin changed`: the file is truncated and rewritten; the watcher waits
//!   for 200 ms of quiet before reading it.
//! - `pipeline only (SIGHUP path)`: load, validate, build and swap, without the watcher.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use robotsguard::reload::{ReloadOutcome, Reloader, Trigger};
use robotsguard::snapshot::{Live, Snapshot};

fn robots_txt(i: usize, variant: &str) -> String {
    format!(
        "# robots.txt of origin {i} ({variant})\n\
         User-agent: *\nDisallow: /admin/\nDisallow: /cart\nDisallow: /search?\nAllow: /search/about\n\n\
         User-agent: GPTBot\nUser-agent: CCBot\nDisallow: /\n\n\
         User-agent: Googlebot\nAllow: /\nDisallow: /private/*.pdf$\n\n\
         Sitemap: https://o{i}.example/sitemap.xml\n"
    )
}

fn config(origins: usize, report_origin: Option<usize>, robots_dir: &str) -> String {
    let mut text = String::from(
        "listen: [\"127.0.0.1:18080\"]\nadmin: \"127.0.0.1:19090\"\nthreads: 2\nshutdown: {grace: 10s}\norigins:\n",
    );
    for i in 0..origins {
        let mode = if report_origin == Some(i) {
            "report"
        } else {
            "enforce"
        };
        text.push_str(&format!(
            "  - name: o{i}\n    hosts: [\"o{i}.example\", \"www.o{i}.example\"]\n    upstream: \"127.0.0.1:{}\"\n    mode: {mode}\n    robots: {{source: file, path: {robots_dir}/o{i}.txt}}\n",
            10_000 + i % 50_000
        ));
    }
    text
}

fn replace(path: &Path, text: &str) {
    let temporary = path.with_extension("yaml.tmp");
    std::fs::write(&temporary, text).expect("temporary config written");
    std::fs::rename(&temporary, path).expect("config renamed into place");
}

struct Stats(Vec<Duration>);

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut sorted = self.0.clone();
        sorted.sort();
        let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        write!(
            f,
            "{:>3} rounds  min {:7.1} ms  median {:7.1} ms  p95 {:7.1} ms  max {:7.1} ms",
            sorted.len(),
            ms(sorted[0]),
            ms(at(0.5)),
            ms(at(0.95)),
            ms(sorted[sorted.len() - 1])
        )
    }
}

/// Writes `text` with `write` and waits for the swap it causes; returns the time between them.
async fn timed_swap(live: &Live, write: impl FnOnce()) -> Duration {
    let mut generations = live.subscribe();
    generations.borrow_and_update();
    let started = Instant::now();
    write();
    tokio::time::timeout(Duration::from_secs(10), generations.changed())
        .await
        .expect("the change is swapped in within 10 s")
        .expect("the snapshot is still live");
    started.elapsed()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let origins: usize = args
        .next()
        .map_or(1000, |a| a.parse().expect("ORIGINS is a number"));
    let rounds: usize = args
        .next()
        .map_or(30, |a| a.parse().expect("ROUNDS is a number"));

    let dir = tempfile::tempdir().expect("temp dir");
    for variant in ["robots-a", "robots-b"] {
        std::fs::create_dir(dir.path().join(variant)).expect("robots dir");
        for i in 0..origins {
            std::fs::write(
                dir.path().join(variant).join(format!("o{i}.txt")),
                robots_txt(i, variant),
            )
            .expect("robots.txt written");
        }
    }
    let path: PathBuf = dir.path().join("robotsguard.yaml");
    std::fs::write(&path, config(origins, None, "robots-a")).expect("config written");
    println!(
        "config: {origins} origins, {} bytes; robots.txt from files ({} bytes each)",
        std::fs::metadata(&path).map_or(0, |m| m.len()),
        robots_txt(0, "robots-a").len()
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let running = Arc::new(robotsguard::config::load_file(&path).expect("config is valid"));
        let snapshot = Snapshot::build(running.clone(), None).expect("snapshot builds");
        let live = Arc::new(Live::new(snapshot));
        let reloader = Arc::new(Reloader::new(live.clone(), path.clone(), running));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let watcher = tokio::spawn(robotsguard::reload::watch(
            reloader.clone(),
            None,
            None,
            stopped,
        ));

        // Warm-up: the first swap also proves the watcher is in place.
        let mut round = 0usize;
        let mut next = |robots_dir: &str| {
            round += 1;
            config(origins, Some(round % origins), robots_dir)
        };
        let warm = next("robots-a");
        let mut ready = false;
        for _ in 0..50 {
            let mut generations = live.subscribe();
            generations.borrow_and_update();
            replace(&path, &warm);
            if tokio::time::timeout(Duration::from_millis(500), generations.changed())
                .await
                .is_ok()
            {
                ready = true;
                break;
            }
        }
        assert!(ready, "the watcher never reloaded");

        let mut renamed = Vec::new();
        for _ in 0..rounds {
            let text = next("robots-a");
            renamed.push(timed_swap(&live, || replace(&path, &text)).await);
        }
        println!("rename, 1 origin changed:           {}", Stats(renamed));

        let mut all_paths = Vec::new();
        for r in 0..rounds {
            let text = next(if r % 2 == 0 { "robots-b" } else { "robots-a" });
            all_paths.push(timed_swap(&live, || replace(&path, &text)).await);
        }
        println!("rename, all robots paths changed:   {}", Stats(all_paths));

        let mut in_place = Vec::new();
        for _ in 0..rounds.min(10) {
            let text = next("robots-a");
            in_place.push(
                timed_swap(&live, || {
                    std::fs::write(&path, &text).expect("config overwritten")
                })
                .await,
            );
        }
        println!("in-place write, 1 origin changed:   {}", Stats(in_place));

        let mut pipeline = Vec::new();
        let (mut load, mut build, mut prefill) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
        for _ in 0..rounds {
            match reloader.reload(Trigger::Hangup, None).await {
                ReloadOutcome::Applied { timings, .. } => {
                    pipeline.push(timings.total);
                    load += timings.load;
                    build += timings.build;
                    prefill += timings.prefill;
                }
                other => panic!("reload did not apply: {other:?}"),
            }
        }
        let n = rounds.max(1) as u32;
        println!("pipeline only (SIGHUP path):        {}", Stats(pipeline));
        println!(
            "  mean per stage: load+validate {:.1} ms, build {:.1} ms, robots prefill {:.1} ms",
            (load / n).as_secs_f64() * 1000.0,
            (build / n).as_secs_f64() * 1000.0,
            (prefill / n).as_secs_f64() * 1000.0
        );

        let _ = stop.send(true);
        let _ = watcher.await;
    });
}
