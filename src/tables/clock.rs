//! A cheap monotonic clock for bookkeeping that needs milliseconds, not nanoseconds (Crawl-delay
//! budgets are checked on every crawler request they apply to).
//!
//! On Linux it reads `CLOCK_MONOTONIC_COARSE` through the vDSO, several times cheaper than
//! `Instant::now()` (`CLOCK_MONOTONIC`), at the resolution of the kernel's tick (1 to 4 ms). Both
//! clocks count from the same origin, so the coarse reading is turned into an [`Instant`] by its
//! distance from a pair of readings taken once: it can be compared with other `Instant`s to within
//! a tick. Elsewhere it is `Instant::now()`.

use std::time::{Duration, Instant};

/// Where both clocks are read from once: an `Instant` and the coarse clock's reading at the same
/// moment (none where there is no coarse clock).
#[derive(Clone, Copy)]
struct Anchor {
    instant: Instant,
    #[cfg(target_os = "linux")]
    coarse: Option<Duration>,
}

fn anchor() -> &'static Anchor {
    static ANCHOR: std::sync::OnceLock<Anchor> = std::sync::OnceLock::new();
    ANCHOR.get_or_init(|| Anchor {
        #[cfg(target_os = "linux")]
        coarse: coarse_since_boot(),
        instant: Instant::now(),
    })
}

#[cfg(target_os = "linux")]
fn coarse_since_boot() -> Option<Duration> {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC_COARSE).ok()?;
    let seconds = u64::try_from(now.tv_sec()).ok()?;
    let nanos = u32::try_from(now.tv_nsec()).ok()?;
    Some(Duration::new(seconds, nanos))
}

/// Time since the anchor on the coarse clock; `None` where there is none.
fn coarse_since_anchor() -> Option<Duration> {
    #[cfg(target_os = "linux")]
    if let (Some(at), Some(now)) = (anchor().coarse, coarse_since_boot()) {
        return Some(now.saturating_sub(at));
    }
    None
}

/// Now, to within the kernel's tick.
pub fn coarse_now() -> Instant {
    coarse_since_anchor().map_or_else(Instant::now, |since| anchor().instant + since)
}

/// A moment as whole milliseconds since this process first read the clock, in 32 bits that
/// wrap every 49 days: the time of the Crawl-delay table, compared by wrapping differences.
/// Cheaper to read and to compare than an [`Instant`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Millis(pub u32);

impl Millis {
    /// Now, to within the kernel's tick (as [`coarse_now`]).
    pub fn coarse_now() -> Millis {
        coarse_since_anchor().map_or_else(|| Millis::of(Instant::now()), Millis::of_duration)
    }

    /// `instant` on this clock (one before the first reading counts back from it).
    pub fn of(instant: Instant) -> Millis {
        let anchor = anchor().instant;
        match instant.checked_duration_since(anchor) {
            Some(after) => Millis::of_duration(after),
            // Rounded down like a moment after it, so that differences stay exact.
            None => {
                let before = anchor - instant;
                let whole = Millis::of_duration(before).0;
                let part = !before.subsec_nanos().is_multiple_of(1_000_000);
                Millis(0u32.wrapping_sub(whole).wrapping_sub(u32::from(part)))
            }
        }
    }

    /// `duration` later.
    pub fn after(self, duration: Duration) -> Millis {
        Millis(self.0.wrapping_add(Millis::of_duration(duration).0))
    }

    fn of_duration(duration: Duration) -> Millis {
        Millis(
            duration
                .as_secs()
                .wrapping_mul(1000)
                .wrapping_add(u64::from(duration.subsec_millis())) as u32,
        )
    }
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

    #[test]
    fn milliseconds_agree_with_instants_on_either_side_of_the_first_reading() {
        let before = Instant::now();
        let anchor = anchor().instant;
        let precise = Millis::of(Instant::now());
        let coarse = Millis::coarse_now();
        let gap = coarse.0.wrapping_sub(precise.0) as i32;
        assert!(gap.abs() < 20, "{gap}");
        // Differences are exact whichever side of the anchor the moments fall.
        for start in [before, anchor, anchor + Duration::from_micros(1_500)] {
            for step in [1, 499, 500, 1_000, 86_400_000] {
                let later = start + Duration::from_millis(step);
                assert_eq!(
                    Millis::of(later).0.wrapping_sub(Millis::of(start).0),
                    step as u32,
                    "{step} ms"
                );
                assert_eq!(
                    Millis::of(start).after(Duration::from_millis(step)),
                    Millis::of(later)
                );
            }
        }
        let early = anchor - Duration::from_micros(2_500);
        assert_eq!(
            Millis::of(early),
            Millis(u32::MAX - 2),
            "-2.5 ms rounds down to -3"
        );
    }
}
