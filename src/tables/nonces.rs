//! The Web Bot Auth nonces this process has seen, each kept until its signature expires: a
//! signature whose nonce is already here is a replay. Bounded (an expiring table): a flood of
//! signatures with fresh nonces evicts the soonest-expiring ones, never grows the table.

use std::time::Instant;

use super::expiring::ExpiringKeys;

/// Nonces kept at most.
const CAPACITY: usize = 200_000;

/// Nonces seen, per signing agent.
pub struct Nonces {
    seen: ExpiringKeys,
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
}
