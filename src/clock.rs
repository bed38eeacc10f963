//! A cheap monotonic clock for bookkeeping that needs milliseconds, not nanoseconds (Crawl-delay
//! budgets are checked on every crawler request they apply to).
//!
//! On Linux it reads `CLOCK_MONOTONIC_COARSE` through the vDSO, several times cheaper than
//! `Instant::now()` (`CLOCK_MONOTONIC`), at the resolution of the kernel's tick (1 to 4 ms). Both
//! clocks count from the same origin, so the coarse reading is turned into an [`Instant`] by its
//! distance from a pair of readings taken once: it can be compared with other `Instant`s to within
//! a tick. Elsewhere it is `Instant::now()`.

use std::time::Instant;

/// Now, to within the kernel's tick.
pub fn coarse_now() -> Instant {
    #[cfg(target_os = "linux")]
    {
        use std::sync::OnceLock;
        use std::time::Duration;

        fn since_boot() -> Option<Duration> {
            let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC_COARSE).ok()?;
            let seconds = u64::try_from(now.tv_sec()).ok()?;
            let nanos = u32::try_from(now.tv_nsec()).ok()?;
            Some(Duration::new(seconds, nanos))
        }

        static ANCHOR: OnceLock<Option<(Instant, Duration)>> = OnceLock::new();
        let anchor = ANCHOR.get_or_init(|| since_boot().map(|at| (Instant::now(), at)));
        if let (Some((instant, at)), Some(now)) = (anchor, since_boot()) {
            return *instant + now.saturating_sub(*at);
        }
    }
    Instant::now()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_coarse_clock_keeps_up_with_instant_to_within_a_tick() {
        let tick = Duration::from_millis(20);
        for _ in 0..5 {
            let precise = Instant::now();
            let coarse = coarse_now();
            let gap = if coarse > precise {
                coarse - precise
            } else {
                precise - coarse
            };
            assert!(gap < tick, "{gap:?}");
            std::thread::sleep(Duration::from_millis(30));
        }
        let first = coarse_now();
        std::thread::sleep(Duration::from_millis(50));
        let elapsed = coarse_now() - first;
        assert!(
            elapsed >= Duration::from_millis(40) && elapsed < Duration::from_secs(5),
            "{elapsed:?}"
        );
    }
}
