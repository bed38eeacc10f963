//! Reports in the shared store: each replica writes its own report of each origin (its counts,
//! and its violation sketches per time slice) under its own keys, which expire after the reports'
//! window; a report of the fleet reads every replica's and merges them. A replica that stops
//! (or restarts, under a new name) leaves its counts in until they fall out of the window.
//!
//! Keys (after the prefix): `reports:ORIGIN:replicas` (a sorted set of replica names, scored by
//! their last write, at most [`MAX_REPLICAS`]), `reports:ORIGIN:counts:REPLICA` and
//! `reports:ORIGIN:violations:SLICE_START:REPLICA` (JSON), and `reports:ORIGIN:sample:REPLICA`
//! (the preview's sample of recent crawler traffic, JSON).
//!
//! In a cluster each origin's report keys carry their own hash tag, the prefix and `reports:ORIGIN`
//! (`{robotsguard:reports:shop}:counts:REPLICA`): every pipeline here reads or writes one
//! origin's keys only, so they must share a slot with each other but not with the bans, and a
//! fleet with many origins spreads its reports over the masters. One server and Sentinel keep
//! the keys as they were.

use std::time::Duration;

use super::Shared;
use crate::reports::{Published, PublishedParts};

/// Replicas whose reports are kept per origin (the most recent writers).
pub(crate) const MAX_REPLICAS: isize = 64;

/// The longest a write or read of reports may take (in the background, or for an admin page).
const REPORTS_TIMEOUT: Duration = Duration::from_secs(5);

impl Shared {
    /// The key `reports:ORIGIN:PARTS...` (in a cluster, tagged by the origin: module docs).
    fn report_key(&self, origin: &str, parts: &[&str]) -> String {
        if !self.endpoint.is_cluster() {
            let mut all = Vec::with_capacity(parts.len() + 2);
            all.extend_from_slice(&["reports", origin]);
            all.extend_from_slice(parts);
            return self.key_in(false, &all);
        }
        let mut key = format!("{{{}reports:{origin}}}", self.prefix);
        for part in parts {
            key.push(':');
            key.push_str(part);
        }
        key
    }

    /// Adds to `pipe` what marks `replica` as a writer of `origin`'s reports at `now_ms`: its
    /// place in the replicas set, which drops writers older than `window` and beyond
    /// [`MAX_REPLICAS`], and expires with the reports.
    fn join_replicas(
        &self,
        pipe: &mut redis::Pipeline,
        origin: &str,
        replica: &str,
        window: Duration,
        now_ms: u64,
    ) {
        let replicas = self.report_key(origin, &["replicas"]);
        let oldest = now_ms.saturating_sub(u64::try_from(window.as_millis()).unwrap_or(u64::MAX));
        pipe.cmd("ZADD")
            .arg(&replicas)
            .arg(now_ms)
            .arg(replica)
            .ignore()
            .cmd("ZREMRANGEBYSCORE")
            .arg(&replicas)
            .arg("-inf")
            .arg(format!("({oldest}"))
            .ignore()
            .cmd("ZREMRANGEBYRANK")
            .arg(&replicas)
            .arg(0)
            .arg(-(MAX_REPLICAS + 1))
            .ignore()
            .cmd("EXPIRE")
            .arg(&replicas)
            .arg(window.as_secs() + 3600)
            .ignore();
    }

    /// The replicas that wrote reports or samples of `origin` within `window`.
    async fn replicas_within(
        &self,
        connection: &mut super::StoreConnection,
        origin: &str,
        window: Duration,
        now_ms: u64,
    ) -> Option<Vec<String>> {
        let oldest = now_ms.saturating_sub(u64::try_from(window.as_millis()).unwrap_or(u64::MAX));
        let mut command = redis::cmd("ZRANGEBYSCORE");
        command
            .arg(self.report_key(origin, &["replicas"]))
            .arg(oldest)
            .arg("+inf");
        self.run_within("reports", REPORTS_TIMEOUT, command.query_async(connection))
            .await
    }

    /// Writes `replica`'s report of `origin`; `false` when the store did not take it.
    pub(crate) async fn publish_report(
        &self,
        origin: &str,
        replica: &str,
        parts: &PublishedParts,
        window: Duration,
        now_ms: u64,
    ) -> bool {
        let Some(mut connection) = self.live_connection() else {
            return false;
        };
        let ttl = window.as_secs() + 3600;
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(self.report_key(origin, &["counts", replica]))
            .arg(&parts.counts)
            .arg("EX")
            .arg(ttl)
            .ignore();
        for (start, slice) in &parts.violations {
            pipe.cmd("SET")
                .arg(self.report_key(origin, &["violations", &start.to_string(), replica]))
                .arg(slice)
                .arg("EX")
                .arg(ttl)
                .ignore();
        }
        self.join_replicas(&mut pipe, origin, replica, window, now_ms);
        self.run_within(
            "reports",
            REPORTS_TIMEOUT,
            pipe.query_async::<()>(&mut connection),
        )
        .await
        .is_some()
    }

    /// Every replica's report of `origin` within `window` (violation slices starting at
    /// `slices`), by replica name; `None` when the store cannot be read.
    pub(crate) async fn fleet_report(
        &self,
        origin: &str,
        slices: &[u64],
        window: Duration,
        now_ms: u64,
    ) -> Option<Vec<(String, Published)>> {
        let mut connection = self.live_connection()?;
        let replicas = self
            .replicas_within(&mut connection, origin, window, now_ms)
            .await?;
        let mut pipe = redis::pipe();
        for replica in &replicas {
            pipe.cmd("GET")
                .arg(self.report_key(origin, &["counts", replica]));
            for start in slices {
                pipe.cmd("GET")
                    .arg(self.report_key(origin, &["violations", &start.to_string(), replica]));
            }
        }
        if replicas.is_empty() {
            return Some(Vec::new());
        }
        let values: Vec<Option<String>> = self
            .run_within(
                "reports",
                REPORTS_TIMEOUT,
                pipe.query_async(&mut connection),
            )
            .await?;
        let per_replica = slices.len() + 1;
        let reports = values
            .chunks(per_replica)
            .zip(replicas)
            .filter_map(|(chunk, replica)| {
                let (counts, violations) = chunk.split_first()?;
                let report = Published::from_parts(counts.as_deref(), violations.iter().flatten())?;
                Some((replica, report))
            })
            .collect();
        Some(reports)
    }

    /// Writes `replica`'s preview sample of `origin` (JSON); `false` when the store did not
    /// take it. The replica joins the origin's replicas as a report write does.
    pub(crate) async fn publish_sample(
        &self,
        origin: &str,
        replica: &str,
        sample: &str,
        window: Duration,
        now_ms: u64,
    ) -> bool {
        let Some(mut connection) = self.live_connection() else {
            return false;
        };
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(self.report_key(origin, &["sample", replica]))
            .arg(sample)
            .arg("EX")
            .arg(window.as_secs() + 3600)
            .ignore();
        self.join_replicas(&mut pipe, origin, replica, window, now_ms);
        self.run_within(
            "reports",
            REPORTS_TIMEOUT,
            pipe.query_async::<()>(&mut connection),
        )
        .await
        .is_some()
    }

    /// Every replica's preview sample of `origin` written within `window`, by replica name;
    /// `None` when the store cannot be read.
    pub(crate) async fn fleet_samples(
        &self,
        origin: &str,
        window: Duration,
        now_ms: u64,
    ) -> Option<Vec<(String, String)>> {
        let mut connection = self.live_connection()?;
        let replicas = self
            .replicas_within(&mut connection, origin, window, now_ms)
            .await?;
        if replicas.is_empty() {
            return Some(Vec::new());
        }
        let mut pipe = redis::pipe();
        for replica in &replicas {
            pipe.cmd("GET")
                .arg(self.report_key(origin, &["sample", replica]));
        }
        let values: Vec<Option<String>> = self
            .run_within(
                "reports",
                REPORTS_TIMEOUT,
                pipe.query_async(&mut connection),
            )
            .await?;
        Some(
            replicas
                .into_iter()
                .zip(values)
                .filter_map(|(replica, value)| Some((replica, value?)))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RedisConfig;

    fn shared(url: &str) -> Shared {
        Shared::new(&RedisConfig {
            url: url.to_owned(),
            url_file: None,
            prefix: "robotsguard:".to_owned(),
            timeout: Duration::from_millis(100),
            tls: None,
        })
        .expect("a client for the URL")
    }

    #[test]
    fn a_cluster_tags_each_origins_reports_alone_and_one_server_keeps_the_plain_keys() {
        let cluster = shared("redis+cluster://127.0.0.1:7000,127.0.0.1:7001");
        assert_eq!(
            cluster.report_key("shop", &["counts", "r1"]),
            "{robotsguard:reports:shop}:counts:r1"
        );
        assert_eq!(
            cluster.report_key("shop", &["violations", "1700000000", "r1"]),
            "{robotsguard:reports:shop}:violations:1700000000:r1"
        );
        // The bans keep the deployment's tag: the scripts use them with the readers and strikes.
        assert_eq!(cluster.key(&["bans"]), "{robotsguard:}bans");
        let single = shared("redis://127.0.0.1:6379/0");
        assert_eq!(
            single.report_key("shop", &["replicas"]),
            "robotsguard:reports:shop:replicas"
        );
        assert_eq!(single.key(&["bans"]), "robotsguard:bans");
    }
}
