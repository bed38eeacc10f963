//! One background task per key, following config reloads: the robots.txt refresher (a task per
//! robots.txt slot), the upstream keeper (per set of upstreams) and the range list refresher (per
//! list) each name, after every reload, the keys that must have a task; tasks of keys no longer
//! named are stopped. Also the backoff those tasks wait after failures.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The wait before retrying work that failed `failures` times in a row (at least once):
/// `first`, doubled for each further failure, never more than `cap`.
pub(crate) fn backoff(first: Duration, failures: u32, cap: Duration) -> Duration {
    first
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(cap)
}

/// The running tasks, by key. Dropping it stops them all.
pub(crate) struct Tasks<K: Hash + Eq> {
    running: HashMap<K, JoinHandle<()>>,
}

impl<K: Hash + Eq + Clone> Tasks<K> {
    pub(crate) fn new() -> Tasks<K> {
        Tasks {
            running: HashMap::new(),
        }
    }

    /// Starts `start(item)` for each wanted key that has no task yet, and stops the tasks of
    /// keys not wanted any more (calling `stopped` for each).
    pub(crate) fn reconcile<T>(
        &mut self,
        wanted: impl IntoIterator<Item = (K, T)>,
        mut start: impl FnMut(T) -> JoinHandle<()>,
        mut stopped: impl FnMut(&K),
    ) {
        let mut keep = std::collections::HashSet::new();
        for (key, item) in wanted {
            self.running
                .entry(key.clone())
                .or_insert_with(|| start(item));
            keep.insert(key);
        }
        self.running.retain(|key, task| {
            let wanted = keep.contains(key);
            if !wanted {
                task.abort();
                stopped(key);
            }
            wanted
        });
    }
}

impl<K: Hash + Eq> Drop for Tasks<K> {
    fn drop(&mut self) {
        for task in self.running.values() {
            task.abort();
        }
    }
}

/// Waits for the next snapshot generation (a reload) or shutdown: `true` to reconcile again,
/// `false` to stop.
pub(crate) async fn next_reload(
    generations: &mut watch::Receiver<u64>,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    tokio::select! {
        changed = generations.changed() => changed.is_ok(),
        _ = shutdown.wait_for(|stop| *stop) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_first_wait_up_to_the_cap() {
        let first = Duration::from_secs(10);
        let cap = Duration::from_secs(300);
        let waits: Vec<u64> = (1..=7).map(|n| backoff(first, n, cap).as_secs()).collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(backoff(first, u32::MAX, cap), cap);
    }

    #[tokio::test]
    async fn tasks_start_for_new_keys_and_stop_for_keys_gone() {
        let mut tasks = Tasks::new();
        let pending = || tokio::spawn(std::future::pending::<()>());
        let mut stopped = Vec::new();
        tasks.reconcile([("a", ()), ("b", ())], |()| pending(), |k| stopped.push(*k));
        assert_eq!(tasks.running.len(), 2);
        let a = tasks.running["a"].abort_handle();
        tasks.reconcile([("a", ()), ("c", ())], |()| pending(), |k| stopped.push(*k));
        assert_eq!(stopped, vec!["b"]);
        assert!(!a.is_finished(), "a kept its task");
        let mut keys: Vec<&str> = tasks.running.keys().copied().collect();
        keys.sort_unstable();
        assert_eq!(keys, vec!["a", "c"]);
        drop(tasks);
        tokio::task::yield_now().await;
        assert!(a.is_finished(), "dropping stops every task");
    }
}
