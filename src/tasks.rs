//! One background task per key, following config reloads: the robots.txt refresher (a task per
//! robots.txt slot), the upstream keeper (per set of upstreams) and the range list refresher (per
//! list) each name, after every reload, the keys that must have a task; tasks of keys no longer
//! named are stopped. Also the backoff those tasks wait after failures, and how their failures
//! are said: a run of failures once, then at most a summary per [`FAILURE_SUMMARY_EVERY`]
//! ([`Failing`]); failures many tasks share a cause of, once for all of them ([`Causes`]).

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The wait before retrying work that failed `failures` times in a row (at least once):
/// `first`, doubled for each further failure, never more than `cap`.
pub(crate) fn backoff(first: Duration, failures: u32, cap: Duration) -> Duration {
    first
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(cap)
}

/// A task that keeps failing gets one summary line per this long.
pub(crate) const FAILURE_SUMMARY_EVERY: Duration = Duration::from_secs(600);

/// A run of failures (a list's, an agent's keys'), for its log lines.
#[derive(Debug, Default)]
pub(crate) struct Failing {
    /// Attempts failed in a row.
    attempts: u32,
    /// Failed attempts not yet in a line.
    unsaid: u32,
    /// When the latest line about it was written.
    said_at: Option<Instant>,
}

impl Failing {
    /// The line to write for a failure now, if any: the first of a run, then a summary at most
    /// every [`FAILURE_SUMMARY_EVERY`].
    pub(crate) fn failed(&mut self, now: Instant) -> Option<FailureLine> {
        self.attempts = self.attempts.saturating_add(1);
        self.unsaid = self.unsaid.saturating_add(1);
        let line = match self.said_at {
            None => FailureLine::First,
            Some(at) if now.duration_since(at) >= FAILURE_SUMMARY_EVERY => FailureLine::Summary {
                attempts: self.attempts,
                since_last: self.unsaid,
            },
            Some(_) => return None,
        };
        self.said_at = Some(now);
        self.unsaid = 0;
        Some(line)
    }

    /// Ends the run; returns how many attempts had failed.
    pub(crate) fn succeeded(&mut self) -> u32 {
        std::mem::take(self).attempts
    }
}

/// The causes of failures said lately, across lists (or across agents' keys): a cause many share
/// at once is said at most once per [`FAILURE_SUMMARY_EVERY`], whichever of them fails first, and that
/// line counts the failures of the cause left unsaid since the last. Bounded: the causes said
/// least lately are forgotten first.
#[derive(Debug, Default)]
pub(crate) struct Causes(std::sync::Mutex<Vec<CauseSaid>>);

#[derive(Debug)]
pub(crate) struct CauseSaid {
    cause: String,
    said_at: Instant,
    unsaid: u32,
}

/// Causes remembered at most.
const MAX_CAUSES: usize = 64;

impl Causes {
    /// Whether a line about `error` may be written at `now`: none about its cause was within
    /// [`FAILURE_SUMMARY_EVERY`]. When it may, how many failures of that cause went unsaid since its
    /// last line.
    pub(crate) fn admit(&self, error: &str, now: Instant) -> Option<u32> {
        let cause = cause_of(error);
        let mut said = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(known) = said.iter_mut().find(|known| known.cause == cause) {
            if now.duration_since(known.said_at) < FAILURE_SUMMARY_EVERY {
                known.unsaid = known.unsaid.saturating_add(1);
                return None;
            }
            known.said_at = now;
            return Some(std::mem::take(&mut known.unsaid));
        }
        if said.len() >= MAX_CAUSES {
            said.sort_by_key(|known| known.said_at);
            said.remove(0);
        }
        said.push(CauseSaid {
            cause,
            said_at: now,
            unsaid: 0,
        });
        Some(0)
    }
}

/// An error's cause: its text without the names quoted in it (`cannot resolve `openai.com`:
/// failed to lookup address information` is the cause of every list when no name resolves).
fn cause_of(error: &str) -> String {
    let mut cause = String::with_capacity(error.len());
    let mut quoted = false;
    for c in error.chars() {
        if c == '`' {
            quoted = !quoted;
        } else if !quoted {
            cause.push(c);
        }
    }
    cause
}

/// The line a failure gets: the first of a run, or a summary.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum FailureLine {
    First,
    Summary { attempts: u32, since_last: u32 },
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
    fn failures_of_one_cause_are_said_once_whichever_list_has_them() {
        let causes = Causes::default();
        let start = Instant::now();
        let dns = |host: &str| {
            format!(
                "cannot resolve `{host}`: failed to lookup address information: Temporary \
                 failure in name resolution"
            )
        };
        assert_eq!(causes.admit(&dns("openai.com"), start), Some(0));
        assert_eq!(causes.admit(&dns("developers.google.com"), start), None);
        assert_eq!(causes.admit(&dns("www.bing.com"), start), None);
        // Another cause has a line of its own.
        assert_eq!(
            causes.admit("`https://x.example/l.json` answered 404", start),
            Some(0)
        );
        // Ten minutes on, the cause is said again, counting what went unsaid.
        assert_eq!(
            causes.admit(&dns("mistral.ai"), start + FAILURE_SUMMARY_EVERY),
            Some(2)
        );
        assert_eq!(
            causes.admit(&dns("openai.com"), start + FAILURE_SUMMARY_EVERY),
            None
        );
        // Bounded.
        for n in 0..(MAX_CAUSES * 2) {
            causes.admit(&format!("cause {n}"), start);
        }
        assert!(causes.0.lock().map_or(0, |c| c.len()) <= MAX_CAUSES);
    }

    #[test]
    fn a_failing_list_is_said_once_then_summed_up_every_ten_minutes() {
        let mut failing = Failing::default();
        let start = Instant::now();
        assert_eq!(failing.failed(start), Some(FailureLine::First));
        for minute in 1..10 {
            let at = start + Duration::from_secs(60 * minute);
            assert_eq!(failing.failed(at), None, "minute {minute}");
        }
        assert_eq!(
            failing.failed(start + FAILURE_SUMMARY_EVERY),
            Some(FailureLine::Summary {
                attempts: 11,
                since_last: 10
            })
        );
        assert_eq!(failing.failed(start + FAILURE_SUMMARY_EVERY), None);
        assert_eq!(failing.succeeded(), 12);
        // A new run starts with a WARN of its own.
        assert_eq!(
            failing.failed(start + FAILURE_SUMMARY_EVERY),
            Some(FailureLine::First)
        );
    }

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
