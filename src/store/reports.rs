//! The reports of every replica: this process's own, and with the shared store the others',
//! which each replica writes there at most every [`PUBLISH_EVERY`].

use std::hash::BuildHasher;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use super::{unix_millis, Store};
use crate::reports::sample::SampledTraffic;
use crate::reports::{Published, Reports};

/// How often a replica writes its changed reports and preview samples to the shared store: a
/// fleet-wide report or preview sees another replica's traffic at most this late.
pub const PUBLISH_EVERY: Duration = Duration::from_secs(10);

/// This process's name among the replicas: random, so that a restarted replica does not write
/// over the counts its previous run left in the store.
fn replica_name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        let random = std::collections::hash_map::RandomState::new().hash_one(std::process::id());
        format!("{random:016x}")
    })
}

/// Whose reports a view holds.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Coverage {
    /// Every replica's, through the shared store (this many replicas wrote within the window).
    Fleet(usize),
    /// This replica's only: the state is in memory.
    ThisReplica,
    /// This replica's only: the shared store could not be read.
    StoreDown,
}

impl Store {
    /// The reports of `origin` to merge: this replica's own (always fresh) and, with the shared
    /// store, every other replica's as they last wrote them.
    pub async fn reports_of(&self, reports: &Reports, origin: &str) -> (Vec<Published>, Coverage) {
        let local = reports.local(origin);
        let Some(shared) = &self.shared else {
            return (vec![local], Coverage::ThisReplica);
        };
        if !shared.is_up() {
            return (vec![local], Coverage::StoreDown);
        }
        let now = unix_millis(SystemTime::now());
        match shared
            .fleet_report(origin, &reports.violation_slices(), reports.window(), now)
            .await
        {
            Some(others) => {
                let mut all = vec![local];
                all.extend(
                    others
                        .into_iter()
                        .filter(|(name, _)| name != replica_name())
                        .map(|(_, report)| report),
                );
                let replicas = all.len();
                (all, Coverage::Fleet(replicas))
            }
            None => (vec![local], Coverage::StoreDown),
        }
    }

    /// The preview's sample of `origin` at `now` (Unix seconds): this replica's own and, with
    /// the shared store, every other replica's as it last wrote it, merged and bounded by
    /// `preview.max_paths_per_origin` ([`SampledTraffic::merge`]).
    pub async fn sample_of(
        &self,
        reports: &Reports,
        origin: &str,
        now: u64,
        max_pairs: usize,
    ) -> (SampledTraffic, Coverage) {
        let local = reports.sample().traffic(origin, now);
        let Some(shared) = &self.shared else {
            return (local, Coverage::ThisReplica);
        };
        if !shared.is_up() {
            return (local, Coverage::StoreDown);
        }
        let now_ms = unix_millis(SystemTime::now());
        match shared.fleet_samples(origin, reports.window(), now_ms).await {
            Some(samples) => {
                let others: Vec<SampledTraffic> = samples
                    .iter()
                    .filter(|(name, _)| name != replica_name())
                    .filter_map(|(_, text)| SampledTraffic::from_published(text, max_pairs))
                    .collect();
                let replicas = others.len() + 1;
                (
                    SampledTraffic::merge(local, others, max_pairs),
                    Coverage::Fleet(replicas),
                )
            }
            None => (local, Coverage::StoreDown),
        }
    }

    /// Writes every changed preview sample to the shared store (nothing with the memory
    /// backend).
    pub async fn publish_samples(&self, reports: &Reports) {
        let Some(shared) = self.shared() else {
            return;
        };
        let sample = reports.sample();
        let now = reports.now();
        let now_ms = unix_millis(SystemTime::now());
        for origin in sample.origins() {
            let Some(text) = sample.take_changed(&origin, now) else {
                continue;
            };
            if !shared
                .publish_sample(&origin, replica_name(), &text, reports.window(), now_ms)
                .await
            {
                sample.changed_again(&origin);
                return;
            }
        }
    }

    /// Writes every changed report to the shared store (nothing with the memory backend).
    pub async fn publish_reports(&self, reports: &Reports) {
        let Some(shared) = self.shared() else {
            return;
        };
        let now = unix_millis(SystemTime::now());
        for origin in reports.origins() {
            let Some(parts) = reports.take_changed(&origin) else {
                continue;
            };
            if !shared
                .publish_report(&origin, replica_name(), &parts, reports.window(), now)
                .await
            {
                reports.changed_again(&origin, &parts);
                return;
            }
        }
    }

    /// The loop that writes the reports to the shared store; `None` with the memory backend.
    pub fn reports_service(self: &Arc<Self>, reports: Arc<Reports>) -> Option<ReportsPublisher> {
        self.shared.as_ref()?;
        Some(ReportsPublisher {
            store: self.clone(),
            reports,
        })
    }
}

/// Writes this replica's reports to the shared store every [`PUBLISH_EVERY`].
pub struct ReportsPublisher {
    store: Arc<Store>,
    reports: Arc<Reports>,
}

#[async_trait]
impl BackgroundService for ReportsPublisher {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut tick = tokio::time::interval(PUBLISH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    self.store.publish_reports(&self.reports).await;
                    self.store.publish_samples(&self.reports).await;
                }
                _ = shutdown.changed() => {
                    // What was counted since the last write is not lost to the fleet.
                    self.store.publish_reports(&self.reports).await;
                    self.store.publish_samples(&self.reports).await;
                    return;
                }
            }
        }
    }
}
