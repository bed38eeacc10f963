//! The Web Bot Auth nonces this process has seen, each kept until its signature expires: a
//! signature whose nonce is already here is a replay. And for signatures without a nonce, the
//! address each was first sent from, kept while it may be accepted: sent from another, it is a
//! replay. Bounded (expiring tables): a flood of signatures with fresh nonces (or fresh
//! signatures) evicts the soonest-expiring ones, never grows the tables.

use std::net::IpAddr;
use std::time::Instant;

use super::expiring::{ExpiringKeys, ExpiringMap};

/// Nonces kept at most.
const CAPACITY: usize = 200_000;

/// Nonce-less signatures (with their first address) kept at most.
const SENDERS_CAPACITY: usize = 100_000;

/// Nonces seen, per signing agent; and the first address of each nonce-less signature.
pub struct Nonces {
    seen: ExpiringKeys,
    senders: ExpiringMap<IpAddr>,
}

impl std::fmt::Debug for Nonces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nonces")
            .field("kept", &self.seen.len())
            .finish()
    }
}

impl Default for Nonces {
    fn default() -> Self {
        Nonces {
            seen: ExpiringKeys::with_capacity(CAPACITY),
            senders: ExpiringMap::with_capacity(SENDERS_CAPACITY),
        }
    }
}

impl Nonces {
    /// Records `agent`'s `nonce` until `until`: `true` the first time, `false` for a nonce
    /// already held (a replay; its time is left as it was).
    pub fn first_use(&self, agent: &str, nonce: &str, until: Instant, now: Instant) -> bool {
        let key = self.seen.digest((agent, nonce));
        let mut first = false;
        self.seen.update(key, now, |live| match live {
            Some(_) => None,
            None => {
                first = true;
                Some((until, ()))
            }
        });
        first
    }

    /// Records `client` as the address `agent`'s nonce-less signature `digest` came from until
    /// `until`, unless one is recorded: `true` from the first address, `false` from another (a
    /// replay; the first address is kept).
    pub fn from_first_sender(
        &self,
        agent: &str,
        digest: &[u8; 32],
        client: IpAddr,
        until: Instant,
        now: Instant,
    ) -> bool {
        let key = self.senders.digest((agent, digest));
        let mut first = true;
        self.senders.update(key, now, |live| match live {
            Some((_, sender)) => {
                first = sender == client;
                None
            }
            None => Some((until, client)),
        });
        first
    }

    /// Records `client` as the first address of `agent`'s nonce-less signature `digest` until
    /// `until`, whatever was recorded (the shared store, which saw every replica, said so).
    pub fn record_sender(
        &self,
        agent: &str,
        digest: &[u8; 32],
        client: IpAddr,
        until: Instant,
        now: Instant,
    ) {
        let key = self.senders.digest((agent, digest));
        self.senders.update(key, now, |_| Some((until, client)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_nonce_is_first_used_once_per_agent_until_it_expires() {
        let nonces = Nonces::default();
        let now = Instant::now();
        let until = now + Duration::from_secs(60);
        assert!(nonces.first_use("https://a.example", "n1", until, now));
        assert!(!nonces.first_use("https://a.example", "n1", until, now));
        assert!(nonces.first_use("https://b.example", "n1", until, now));
        assert!(nonces.first_use("https://a.example", "n2", until, now));
        let later = until + Duration::from_secs(1);
        assert!(nonces.first_use(
            "https://a.example",
            "n1",
            later + Duration::from_secs(60),
            later
        ));
    }

    #[test]
    fn a_nonceless_signature_belongs_to_its_first_address_until_it_expires() {
        let nonces = Nonces::default();
        let now = Instant::now();
        let until = now + Duration::from_secs(60);
        let (first, other): (IpAddr, IpAddr) = (
            "192.0.2.1".parse().unwrap_or_else(|_| unreachable!()),
            "198.51.100.1".parse().unwrap_or_else(|_| unreachable!()),
        );
        let signature = [7u8; 32];
        assert!(nonces.from_first_sender("https://a.example", &signature, first, until, now));
        assert!(nonces.from_first_sender("https://a.example", &signature, first, until, now));
        assert!(!nonces.from_first_sender("https://a.example", &signature, other, until, now));
        // Another agent's, or another signature: their own.
        assert!(nonces.from_first_sender("https://b.example", &signature, other, until, now));
        assert!(nonces.from_first_sender("https://a.example", &[8u8; 32], other, until, now));
        let later = until + Duration::from_secs(1);
        assert!(nonces.from_first_sender(
            "https://a.example",
            &signature,
            other,
            later + Duration::from_secs(60),
            later
        ));
    }
}
