//! Disguised crawlers: per origin and client address, how many requests without a crawler's
//! User-Agent asked, after a read of robots.txt, for a path it disallows to every group, within
//! `disguised.window` (counted from the first; extended by each one once the address reached
//! `disguised.strikes`, so that a crawler that keeps going stays known).
//!
//! Per process and bounded (the expiring table of `src/tables/expiring.rs`); with the shared
//! store the counts live there and this table mirrors what the store answered, for the ban
//! check, which must not make a round trip.

use std::net::IpAddr;
use std::time::Instant;

use crate::config::DisguisedConfig;
use crate::tables::expiring::ExpiringMap;

/// The most (origin, address) counts kept at once.
pub const MAX_COUNTS: usize = 1 << 18;

/// Strike counts of disguised crawlers.
pub struct DisguisedStrikes {
    counts: ExpiringMap<u32>,
}

impl std::fmt::Debug for DisguisedStrikes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DisguisedStrikes")
            .field("addresses", &self.counts.len())
            .finish()
    }
}

impl Default for DisguisedStrikes {
    fn default() -> Self {
        DisguisedStrikes {
            counts: ExpiringMap::with_capacity(MAX_COUNTS),
        }
    }
}

impl DisguisedStrikes {
    /// Counts one strike for `client` on `origin`; returns the count within the window.
    pub fn strike(
        &self,
        origin: &str,
        client: IpAddr,
        settings: DisguisedConfig,
        now: Instant,
    ) -> u32 {
        let key = self.counts.digest((origin, client));
        self.counts
            .update(key, now, |live| match live {
                Some((until, count)) => {
                    let count = count.saturating_add(1);
                    let until = if count >= settings.strikes {
                        until.max(now + settings.window)
                    } else {
                        until
                    };
                    Some((until, count))
                }
                None => Some((now + settings.window, 1)),
            })
            .map_or(1, |(_, count)| count)
    }

    /// The count of `client` on `origin` within its window.
    pub fn count(&self, origin: &str, client: IpAddr, now: Instant) -> u32 {
        self.counts
            .get(self.counts.digest((origin, client)), now)
            .map_or(0, |(_, count)| count)
    }

    /// Mirrors a count the shared store answered.
    pub fn mirror(
        &self,
        origin: &str,
        client: IpAddr,
        count: u32,
        settings: DisguisedConfig,
        now: Instant,
    ) {
        let key = self.counts.digest((origin, client));
        self.counts.update(key, now, |live| {
            let until = live.map_or(now + settings.window, |(until, _)| until);
            Some((until.max(now), count))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn strikes_count_within_the_window_and_a_known_crawler_stays_known() {
        let table = DisguisedStrikes::default();
        let settings = DisguisedConfig {
            strikes: 3,
            window: Duration::from_secs(60),
            ..DisguisedConfig::default()
        };
        let a: IpAddr = [203, 0, 113, 1].into();
        let now = Instant::now();
        assert_eq!(table.strike("shop", a, settings, now), 1);
        assert_eq!(table.strike("shop", a, settings, now), 2);
        assert_eq!(table.count("blog", a, now), 0);
        // The window runs from the first strike.
        assert_eq!(table.count("shop", a, now + Duration::from_secs(61)), 0);
        assert_eq!(
            table.strike("shop", a, settings, now + Duration::from_secs(30)),
            3
        );
        // Reaching the strikes extends the window from the latest.
        assert_eq!(table.count("shop", a, now + Duration::from_secs(80)), 3);
    }
}
