//! Memory of the Crawl-delay budgets under many distinct clients: admits one request from each of
//! `COUNT` client addresses (default 2,000,000, twice what is kept) and prints how many budgets are
//! kept and how much the resident set grew. Recorded in `docs/BENCHMARKS.md`.
//!
//! ```sh
//! cargo run --release --example crawl_delay_memory [COUNT]
//! ```

use std::time::{Duration, Instant};

use robotsguard::tables::clock::Millis;
use robotsguard::tables::crawl_delay::{BudgetKey, CrawlDelays};

/// Resident set size in bytes (Linux `/proc/self/statm`, second field, in pages).
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|field| field.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn main() {
    let count: u32 = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(2_000_000);
    let limits = CrawlDelays::default();
    let before = resident_bytes();
    let started = Instant::now();
    let now = Millis::coarse_now();
    for n in 0..count {
        let key = BudgetKey {
            origin: "shop",
            crawler: "GPTBot",
            client: Some(ipnet::IpNet::from(std::net::IpAddr::from(n.to_be_bytes()))),
        };
        limits.admit(key, Duration::from_secs(60), now);
    }
    let elapsed = started.elapsed();
    let grown = resident_bytes().saturating_sub(before);
    println!(
        "{count} clients: {} budgets kept, resident set +{:.1} MiB ({:.0} bytes per budget), {:.0} ns per admission",
        limits.len(),
        grown as f64 / (1 << 20) as f64,
        grown as f64 / limits.len().max(1) as f64,
        elapsed.as_nanos() as f64 / f64::from(count.max(1))
    );
}
