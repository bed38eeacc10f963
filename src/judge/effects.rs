//! What a judgment may change, held in one value: the phases of [`super::Judge::judge`] ask it
//! instead of branching on the mode, so the difference between applying a judgment (the proxy)
//! and previewing it (`/explain`, the console, embedders) lives here and nowhere else.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use super::Mode;
use crate::enforce::{Decision, Verification};
use crate::snapshot::Snapshot;
use crate::store::Store;
use crate::tables::crawl_delay::{Admission, BudgetKey, CrawlDelays};
use crate::tables::rates::{Rate, RateKey};
use crate::verify::Verifier;

/// The effects a judgment is allowed: spend Crawl-delay budgets, nonces and first signature
/// addresses, record robots.txt reads, count strikes and bans, count metrics and write log lines
/// ([`Mode::Apply`]), or none of them ([`Mode::Preview`]; [`Mode::PreviewWithoutLookups`] also
/// sends no DNS query).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Effects {
    mode: Mode,
}

impl Effects {
    /// The effects `mode` allows.
    pub fn of(mode: Mode) -> Effects {
        Effects { mode }
    }

    /// Whether the judgment changes state (the proxy's); `false` for a preview.
    pub fn applies(self) -> bool {
        self.mode == Mode::Apply
    }

    /// Runs `record` (metrics counted, log lines written) only when the judgment is applied: a
    /// preview is seen by nobody but the one who asked for it.
    pub fn record(self, record: impl FnOnce()) {
        if self.applies() {
            record();
        }
    }

    /// This process's Crawl-delay budgets, which the decision admits against as it decides
    /// (applied only: a preview must not spend them).
    pub fn local_budgets(self, store: &Store) -> Option<&CrawlDelays> {
        if self.applies() {
            store.local_budgets()
        } else {
            None
        }
    }

    /// How long `key` must still wait under `delay`, if at all: applying admits (spends the
    /// budget when it is due), previewing only reads it.
    pub async fn crawl_delay_wait(
        self,
        store: &Store,
        key: BudgetKey<'_>,
        delay: Duration,
    ) -> Option<Duration> {
        if self.applies() {
            match store.admit(key, delay).await {
                Admission::Admitted => None,
                Admission::TooSoon(wait) => Some(wait),
            }
        } else {
            let wait = store.next_admission(key, delay).await?;
            (!wait.is_zero()).then_some(wait)
        }
    }

    /// How long a request of `key` must still wait under the operator's rate budget `rate`, if
    /// at all: applying admits (spends the budget), previewing only reads it.
    pub async fn rate_wait(self, store: &Store, key: RateKey<'_>, rate: Rate) -> Option<Duration> {
        if self.applies() {
            store.admit_rate(key, rate).await
        } else {
            store.rate_wait(key, rate).await
        }
    }

    /// Whether a signature's `nonce` was seen before while it is valid. Applying records the
    /// use; a preview never spends a nonce, so it never calls one a replay.
    pub async fn nonce_replayed(
        self,
        store: &Store,
        agent: &str,
        nonce: &str,
        lifetime: Duration,
    ) -> bool {
        self.applies() && !store.first_nonce_use(agent, nonce, lifetime).await
    }

    /// Whether a nonce-less signature (`digest`), still valid for `left`, was first sent from
    /// another address than `client`. Applying records the first address; a preview only reads
    /// the signature's time elsewhere, so it answers `false` here.
    pub async fn signature_from_elsewhere(
        self,
        store: &Store,
        agent: &str,
        digest: Option<&[u8; 32]>,
        client: Option<IpAddr>,
        lifetime: Duration,
    ) -> bool {
        match (self.applies(), digest, client) {
            (true, Some(digest), Some(client)) => {
                !store.signature_from(agent, digest, client, lifetime).await
            }
            _ => false,
        }
    }

    /// Records that `client` read `origin`'s robots.txt (applied only).
    pub async fn robots_read(self, store: &Store, origin: &str, client: IpAddr) {
        if self.applies() {
            store.record_robots_read(origin, client).await;
        }
    }

    /// The verification of a request a valid signature (`signed`) identified: counted in
    /// `robotsguard_crawler_verifications_total` when applied.
    pub fn signature_verification(self, signed: &super::Signed) -> Arc<Verification> {
        let keyid = signed.keyid.as_deref();
        if self.applies() {
            Verifier::signed(&signed.crawler, &signed.agent, keyid)
        } else {
            Verification::by_signature(&signed.crawler, &signed.agent, keyid)
        }
    }

    /// Checks `decision`'s claims from `client`: with reverse DNS lookups unless the judgment is
    /// a preview whose lookups are used up ([`Mode::PreviewWithoutLookups`]). A lookup's answer
    /// is cached either way, which changes no answer.
    pub async fn verify(
        self,
        verifier: &Verifier,
        snapshot: &Snapshot,
        decision: &Decision,
        client: IpAddr,
    ) -> Option<Arc<Verification>> {
        let verification = if self.mode == Mode::PreviewWithoutLookups {
            verifier
                .verify_without_lookups(snapshot, decision, client)
                .await
        } else {
            verifier.verify(snapshot, decision, client).await
        };
        if let Some(found) = verification
            .as_ref()
            .filter(|v| self.applies() && v.result == crate::enforce::VerificationResult::Impostor)
        {
            crate::events::impostor(decision.origin.name(), &found.crawler);
        }
        verification
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_apply_records_and_each_preview_records_nothing() {
        assert!(Effects::of(Mode::Apply).applies());
        for mode in [Mode::Preview, Mode::PreviewWithoutLookups] {
            assert!(!Effects::of(mode).applies());
            let mut ran = false;
            Effects::of(mode).record(|| ran = true);
            assert!(!ran, "{mode:?} recorded");
        }
        let mut ran = false;
        Effects::of(Mode::Apply).record(|| ran = true);
        assert!(ran);
    }

    #[test]
    fn a_preview_never_calls_a_nonce_a_replay_and_never_spends_one() {
        let config = crate::config::StateConfig::default();
        let store = Store::new(&config);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let lifetime = Duration::from_secs(60);
        runtime.block_on(async {
            let preview = Effects::of(Mode::Preview);
            let apply = Effects::of(Mode::Apply);
            for _ in 0..2 {
                assert!(!preview.nonce_replayed(&store, "a", "n1", lifetime).await);
            }
            // The previews spent nothing: the first applied use is the first use.
            assert!(!apply.nonce_replayed(&store, "a", "n1", lifetime).await);
            assert!(apply.nonce_replayed(&store, "a", "n1", lifetime).await);
            assert!(!preview.nonce_replayed(&store, "a", "n1", lifetime).await);
        });
    }

    #[test]
    fn a_preview_reads_a_crawl_delay_budget_and_applying_spends_it() {
        let config = crate::config::StateConfig::default();
        let store = Store::new(&config);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let client: IpAddr = "192.0.2.1".parse().expect("an address");
        let key = BudgetKey {
            origin: "shop",
            crawler: "GPTBot",
            client: Some(ipnet::IpNet::from(client)),
        };
        let delay = Duration::from_secs(30);
        runtime.block_on(async {
            let preview = Effects::of(Mode::Preview);
            let apply = Effects::of(Mode::Apply);
            assert_eq!(preview.crawl_delay_wait(&store, key, delay).await, None);
            assert_eq!(preview.crawl_delay_wait(&store, key, delay).await, None);
            assert_eq!(apply.crawl_delay_wait(&store, key, delay).await, None);
            let wait = apply.crawl_delay_wait(&store, key, delay).await;
            assert!(wait.is_some_and(|wait| wait <= delay), "{wait:?}");
            let seen = preview.crawl_delay_wait(&store, key, delay).await;
            assert!(seen.is_some_and(|wait| wait <= delay), "{seen:?}");
        });
    }

    #[test]
    fn a_preview_reads_a_rate_budget_and_applying_spends_it() {
        let store = Store::new(&crate::config::StateConfig::default());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let key = RateKey {
            origin: "shop",
            crawler: "Googlebot",
            client: None,
        };
        let rate = Rate {
            limit: 2,
            period: Duration::from_secs(60),
        };
        runtime.block_on(async {
            let preview = Effects::of(Mode::Preview);
            let apply = Effects::of(Mode::Apply);
            for _ in 0..3 {
                assert_eq!(preview.rate_wait(&store, key, rate).await, None);
            }
            assert_eq!(apply.rate_wait(&store, key, rate).await, None);
            assert_eq!(apply.rate_wait(&store, key, rate).await, None);
            let refused = apply.rate_wait(&store, key, rate).await;
            assert!(
                refused.is_some_and(|wait| wait <= Duration::from_secs(30)),
                "{refused:?}"
            );
            let seen = preview.rate_wait(&store, key, rate).await;
            assert!(seen.is_some(), "a preview sees the spent budget");
        });
    }
}
