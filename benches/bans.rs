//! Imposing a ban with 100 and with 20,000 bans already in force: what a trap hit or the strike
//! that bans costs the request that makes it. Run with `cargo bench --bench bans`.

use std::hint::black_box;
use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, Instant};

use ipnet::IpNet;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use robotsguard::store::{Earner, Store};
use robotsguard::tables::offenders::BanCause;

/// The `n`th address of the benchmark's own range, as a one-address network.
fn address(n: u64) -> IpNet {
    IpNet::from(IpAddr::V6(Ipv6Addr::from(
        0x2001_0db8_u128 << 96 | u128::from(n),
    )))
}

fn impose(store: &Store, client: IpNet) {
    let earner = Earner {
        cause: BanCause::Trap,
        crawler: "browser",
        user_agent: Some(b"Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0"),
    };
    black_box(store.ban_now("shop", client, Duration::from_secs(3600), 1, earner));
}

fn bans(c: &mut Criterion) {
    let mut group = c.benchmark_group("ban_insert");
    for in_force in [100_u64, 20_000] {
        // Set up once: criterion calls the routine for the warm-up and for every sample.
        let store = Store::default();
        for n in 0..in_force {
            impose(&store, address(n));
        }
        let offenders = store.offenders();
        // Each timed insert is of an address not banned yet; every 100 the new ones are lifted
        // (untimed), so the bans in force stay between `in_force` and `in_force` + 100.
        let mut next = in_force;
        group.bench_with_input(
            BenchmarkId::from_parameter(in_force),
            &in_force,
            |b, &in_force| {
                b.iter_custom(|iterations| {
                    let mut spent = Duration::ZERO;
                    for _ in 0..iterations {
                        if next == in_force + 100 {
                            for n in in_force..next {
                                offenders.lift("shop", address(n), Instant::now());
                            }
                            next = in_force;
                        }
                        let client = address(next);
                        next += 1;
                        let started = Instant::now();
                        impose(&store, client);
                        spent += started.elapsed();
                    }
                    spent
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bans);
criterion_main!(benches);
