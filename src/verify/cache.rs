//! Verdicts per (crawler, address), kept a short while so a crawler's requests cost one lookup,
//! not a range search and a DNS cache probe each. Bounded: a client cannot grow it by coming
//! from many addresses.
//!
//! Hand-written rather than a caching crate: a lookup must cost well under 100 ns on the request
//! path, and the general-purpose concurrent caches spend more than that on bookkeeping (access
//! order, expiry wheels) this cache does not need — entries expire by time and a full shard is
//! simply emptied.

use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crate::enforce::Verification;

const SHARDS: usize = 16;

/// One shard's addresses, each with the verdicts on the crawlers it claimed.
type Shard = hashbrown::HashTable<(IpAddr, Vec<Entry>)>;

struct Entry {
    crawler: Arc<str>,
    verification: Arc<Verification>,
    until: Instant,
    /// The version of the sources it was reached under.
    version: u64,
}

/// Verdicts by address, each address holding the crawlers it claimed. One keyed hash of the
/// address (addresses are the client's choice) picks the shard and probes its table.
pub(crate) struct VerdictCache {
    shards: [RwLock<Shard>; SHARDS],
    hasher: std::collections::hash_map::RandomState,
    per_shard: usize,
    ttl: Duration,
}

impl VerdictCache {
    /// At most about `max_entries` addresses, each verdict kept `ttl`.
    pub(crate) fn new(max_entries: usize, ttl: Duration) -> VerdictCache {
        VerdictCache {
            shards: std::array::from_fn(|_| RwLock::new(Shard::new())),
            hasher: std::collections::hash_map::RandomState::new(),
            per_shard: (max_entries / SHARDS).max(1),
            ttl,
        }
    }

    /// The address's hash and its shard. The shard comes from bits the table does not use at
    /// any size it can reach (it places by the low bits and tags by the top ones), so one
    /// shard's addresses still spread over its table.
    fn shard(&self, ip: &IpAddr) -> (u64, &RwLock<Shard>) {
        let hash = self.hasher.hash_one(ip);
        // The modulo keeps the index in bounds whatever the hash.
        (hash, &self.shards[((hash >> 32) as usize) % SHARDS])
    }

    /// The unexpired verdict on `crawler` (exact catalogue name) from `ip`, reached under
    /// `version` of the sources.
    pub(crate) fn get(
        &self,
        crawler: &str,
        ip: IpAddr,
        now: Instant,
        version: u64,
    ) -> Option<Arc<Verification>> {
        let (hash, shard) = self.shard(&ip);
        let shard = shard.read().unwrap_or_else(|e| e.into_inner());
        shard
            .find(hash, |(held, _)| *held == ip)?
            .1
            .iter()
            .find(|entry| {
                &*entry.crawler == crawler && entry.until > now && entry.version == version
            })
            .map(|entry| entry.verification.clone())
    }

    /// Keeps `verification`, reached under `version` of the sources, for `ttl` from `now`.
    pub(crate) fn put(
        &self,
        ip: IpAddr,
        verification: Arc<Verification>,
        now: Instant,
        version: u64,
    ) {
        let (hash, shard) = self.shard(&ip);
        let mut shard = shard.write().unwrap_or_else(|e| e.into_inner());
        let rehash = |(held, _): &(IpAddr, Vec<Entry>)| self.hasher.hash_one(held);
        if shard.len() >= self.per_shard && shard.find(hash, |(held, _)| *held == ip).is_none() {
            // Expired entries first; a shard still full of live ones is emptied (cheap, bounded,
            // and the verdicts come back from the sources' own caches).
            shard.retain(|(_, entries)| {
                entries.retain(|entry| entry.until > now);
                !entries.is_empty()
            });
            if shard.len() >= self.per_shard {
                shard.clear();
            }
        }
        let (_, entries) = shard
            .entry(hash, |(held, _)| *held == ip, rehash)
            .or_insert_with(|| (ip, Vec::new()))
            .into_mut();
        entries.retain(|entry| entry.until > now && *entry.crawler != *verification.crawler);
        // A User-Agent names few crawlers; a client naming ever more must not grow one entry.
        entries.truncate(7);
        entries.push(Entry {
            crawler: Arc::from(verification.crawler.as_str()),
            verification,
            until: now + self.ttl,
            version,
        });
    }

    /// Addresses held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.read().map_or(0, |s| s.len()))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enforce::VerificationResult;

    fn verdict(crawler: &str, result: VerificationResult) -> Arc<Verification> {
        Arc::new(Verification {
            crawler: crawler.into(),
            result,
            how: String::new(),
            by: None,
        })
    }

    #[test]
    fn verdicts_are_kept_per_crawler_and_address_until_they_expire() {
        let cache = VerdictCache::new(1000, Duration::from_secs(60));
        let now = Instant::now();
        let ip: IpAddr = "198.51.100.7".parse().unwrap_or_else(|_| unreachable!());
        cache.put(
            ip,
            verdict("Googlebot", VerificationResult::Impostor),
            now,
            1,
        );
        cache.put(ip, verdict("GPTBot", VerificationResult::Verified), now, 1);
        let got = |crawler: &str, at: Instant| cache.get(crawler, ip, at, 1).map(|v| v.result);
        assert_eq!(got("Googlebot", now), Some(VerificationResult::Impostor));
        assert_eq!(got("GPTBot", now), Some(VerificationResult::Verified));
        assert_eq!(got("bingbot", now), None);
        assert_eq!(got("Googlebot", now + Duration::from_secs(61)), None);
        // A newer verdict replaces the old one.
        cache.put(
            ip,
            verdict("Googlebot", VerificationResult::Verified),
            now,
            1,
        );
        assert_eq!(got("Googlebot", now), Some(VerificationResult::Verified));
        // Sources that changed since make it stale.
        assert_eq!(cache.get("Googlebot", ip, now, 2), None);
    }

    #[test]
    fn many_addresses_stay_within_the_bound() {
        let cache = VerdictCache::new(160, Duration::from_secs(60));
        let now = Instant::now();
        for n in 0..10_000u32 {
            let ip = IpAddr::from(std::net::Ipv4Addr::from(0xC633_6400 + n));
            cache.put(
                ip,
                verdict("Googlebot", VerificationResult::Impostor),
                now,
                1,
            );
            for _ in 0..3 {
                cache.put(
                    ip,
                    verdict("Googlebot", VerificationResult::Impostor),
                    now,
                    1,
                );
            }
        }
        assert!(cache.len() <= 160, "{}", cache.len());
    }
}
