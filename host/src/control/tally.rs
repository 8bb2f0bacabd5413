//! A guest's tally: how its reconciles ended, how long its current run of failures is, and its
//! last error. Metrics and status endpoints read it as a [`Tally`] snapshot.
//!
//! Guarantees: a guest is *failing* when its last [`FAILING_AFTER`] reconciles or more all
//! failed and that run of failures spans every key it holds, or [`FAILING_AFTER`] distinct
//! keys. One key retried on its own (blocked by an object the guest may not touch, say) while
//! the others are idle is that key's failure, logged on each retry, and does not make the guest
//! failing. Becoming failing is reported once with a warning naming the guest, the key and the
//! error; the next successful reconcile of any key ends the run and is reported with an info
//! line. A run of failures shorter than that (a conflict, a blip of the API server) is not
//! reported beyond the failures' own lines.

use std::collections::BTreeSet;
use std::fmt::Display;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use k8s_openapi::jiff::Timestamp;

use crate::histogram::{Histogram, RECONCILE_TIME_BUCKETS};
pub use crate::wasm::dispatch::Blame;

/// Failed reconciles in a row, and distinct keys among them, after which a guest is failing: a
/// single conflict or unavailable API server fails a reconcile or two, while a broken guest
/// reaches five within a second of per-key backoff.
pub const FAILING_AFTER: u64 = 5;

/// Counters of a guest's reconciles. Every reconcile is timed once and counted once as
/// succeeded, requeued or failed.
#[derive(Debug)]
pub struct Counters {
    /// Reconciles that returned done, and keys left alone because their object is being deleted
    /// without the guest's finalizer.
    pub succeeded: AtomicU64,
    /// Reconciles that asked to be requeued after a delay.
    pub requeued: AtomicU64,
    /// Reconciles that failed, for any reason.
    pub failed: AtomicU64,
    /// Reconciles that trapped, other than by running out of memory.
    pub traps: AtomicU64,
    /// Reconciles that ran past their deadline.
    pub timeouts: AtomicU64,
    /// Reconciles that ran out of memory.
    pub out_of_memory: AtomicU64,
    /// The current run of failed reconciles and the last error.
    pub streak: Streak,
    /// Time of each reconcile: the whole processing of a dequeued key, finalizers included.
    pub reconcile_time: Histogram,
}

impl Default for Counters {
    /// Nothing counted yet.
    fn default() -> Self {
        Self {
            succeeded: AtomicU64::default(),
            requeued: AtomicU64::default(),
            failed: AtomicU64::default(),
            traps: AtomicU64::default(),
            timeouts: AtomicU64::default(),
            out_of_memory: AtomicU64::default(),
            streak: Streak::default(),
            reconcile_time: Histogram::new(RECONCILE_TIME_BUCKETS),
        }
    }
}

/// A snapshot of one guest's tally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally {
    /// When the module answering reconciles was loaded.
    pub loaded_at: SystemTime,
    /// SHA-256 of that module, hex.
    pub digest: String,
    /// Reconciles that returned done, and keys left alone because their object is being deleted
    /// without the guest's finalizer.
    pub succeeded: u64,
    /// Reconciles that asked to be requeued after a delay.
    pub requeued: u64,
    /// Reconciles that failed, for any reason.
    pub failed: u64,
    /// Reconciles that trapped (a panic, an `unreachable`, a stack overflow, ...).
    pub traps: u64,
    /// Reconciles that ran past their deadline.
    pub timeouts: u64,
    /// Reconciles that ran out of memory.
    pub out_of_memory: u64,
    /// Host calls refused because the kind was not declared or the verb not granted.
    pub denied: u64,
    /// Lines of guest output the rate limit kept out of the host's log.
    pub output_dropped: u64,
    /// Failed reconciles since the last successful one.
    pub consecutive_failures: u64,
    /// Whether the guest is failing: see the module's guarantees.
    pub failing: bool,
    /// The module's own failures since its last success, cluster failures left out.
    pub module_failures: u64,
    /// Whether the module's own run of failures spans every key the guest holds, or
    /// [`FAILING_AFTER`] distinct keys.
    pub module_failing: bool,
    /// The error of the last failed reconcile, if any failed since the module was loaded.
    pub last_error: Option<String>,
    /// While its sharder's label writes fail: since when, and the last error.
    pub shard_labels_failing: Option<(Timestamp, String)>,
}

/// The current run of failed reconciles of one guest, and its last error.
#[derive(Debug, Default)]
pub struct Streak {
    failures: AtomicU64,
    run: Mutex<Run>,
}

#[derive(Debug, Default)]
struct Run {
    last_error: Option<String>,
    /// Distinct keys of the current run, up to [`FAILING_AFTER`] of them.
    keys: BTreeSet<String>,
    failing: bool,
    /// The module's own failures of the current run, and their distinct keys.
    module_failures: u64,
    module_keys: BTreeSet<String>,
}

impl Streak {
    /// Records a failed reconcile of `key`, `blame`d on the module or the cluster; `held`
    /// counts the keys the guest holds, and is only called while fewer than [`FAILING_AFTER`]
    /// distinct keys failed in a row. Warns when the guest becomes failing.
    pub fn failed(
        &self,
        guest: &str,
        key: &impl Display,
        (error, blame): (&str, Blame),
        held: impl FnOnce() -> usize,
    ) {
        let mut run = self.run.lock().unwrap_or_else(PoisonError::into_inner);
        run.last_error = Some(error.to_owned());
        let failures = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        let spread = FAILING_AFTER as usize;
        if run.keys.len() < spread {
            run.keys.insert(key.to_string());
        }
        if blame == Blame::Module {
            run.module_failures += 1;
            if run.module_keys.len() < spread {
                run.module_keys.insert(key.to_string());
            }
        }
        if run.failing || failures < FAILING_AFTER {
            return;
        }
        if run.keys.len() >= spread || run.keys.len() >= held() {
            run.failing = true;
            tracing::warn!(
                %guest, %key, %error,
                "guest is failing: {failures} reconciles in a row failed (distinct keys: {})",
                run.keys.len()
            );
        }
    }

    /// Records a successful reconcile; reports the end of a run of failures that made the
    /// guest failing.
    pub fn succeeded(&self, guest: &str) {
        let mut run = self.run.lock().unwrap_or_else(PoisonError::into_inner);
        let failures = self.failures.swap(0, Ordering::Relaxed);
        run.keys.clear();
        run.module_keys.clear();
        run.module_failures = 0;
        if std::mem::take(&mut run.failing) {
            tracing::info!(%guest, "guest recovered after {failures} failed reconciles in a row");
        }
    }

    /// Failed reconciles since the last successful one.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Whether the guest is failing: see the module's guarantees.
    pub fn is_failing(&self) -> bool {
        self.run
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .failing
    }

    /// The module's own failures since the last success, and whether they span every key the
    /// guest holds (`held`) or [`FAILING_AFTER`] distinct keys.
    pub fn module_failures(&self, held: impl FnOnce() -> usize) -> (u64, bool) {
        let run = self.run.lock().unwrap_or_else(PoisonError::into_inner);
        let keys = run.module_keys.len();
        let spread = keys >= FAILING_AFTER as usize || (keys > 0 && keys >= held());
        (run.module_failures, spread)
    }

    /// The error of the last failed reconcile.
    pub fn last_error(&self) -> Option<String> {
        self.run
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last_error
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_stuck_key_among_others_does_not_make_the_guest_failing() {
        let streak = Streak::default();
        // Three primaries; one is blocked by a foreign object and retried, the others are idle.
        for attempt in 0..3 * FAILING_AFTER {
            streak.failed(
                "foo",
                &"ns/blocked",
                (&format!("attempt {attempt}"), Blame::Module),
                || 3,
            );
        }
        assert!(!streak.is_failing());
        // Every key failing is a failing guest, and a success ends it.
        for key in ["ns/a", "ns/b"] {
            streak.failed("foo", &key, ("broken", Blame::Module), || 3);
        }
        assert!(streak.is_failing());
        streak.succeeded("foo");
        assert!(!streak.is_failing());
    }

    #[test]
    fn a_guest_failing_on_its_only_key_or_on_five_keys_is_failing() {
        let only = Streak::default();
        for _ in 0..FAILING_AFTER {
            only.failed("foo", &"ns/a", ("broken", Blame::Module), || 1);
        }
        assert!(only.is_failing());
        let many = Streak::default();
        for i in 0..FAILING_AFTER {
            many.failed("foo", &format!("ns/{i}"), ("broken", Blame::Module), || {
                10_000
            });
        }
        assert!(many.is_failing());
    }

    #[test]
    fn the_clusters_failures_neither_extend_nor_end_the_modules_run() {
        let streak = Streak::default();
        for i in 0..FAILING_AFTER {
            streak.failed("foo", &format!("ns/{i}"), ("409", Blame::Cluster), || 10);
        }
        assert_eq!(streak.module_failures(|| 10), (0, false));
        assert!(
            streak.is_failing(),
            "the guest still fails, if not by its module"
        );
        for i in 0..3 {
            streak.failed("foo", &format!("ns/{i}"), ("broken", Blame::Module), || 10);
            streak.failed("foo", &"ns/x", ("429", Blame::Cluster), || 10);
        }
        assert_eq!(streak.module_failures(|| 10), (3, false), "3 keys of 10");
        assert_eq!(streak.module_failures(|| 3), (3, true), "every key held");
        streak.succeeded("foo");
        assert_eq!(streak.module_failures(|| 3), (0, false));
    }

    #[test]
    fn a_streak_counts_failures_until_a_success_and_keeps_the_last_error() {
        let streak = Streak::default();
        assert_eq!((streak.failures(), streak.last_error()), (0, None));
        for attempt in 1..=FAILING_AFTER + 2 {
            streak.failed(
                "spin",
                &"ns/a",
                (&format!("attempt {attempt}"), Blame::Module),
                || 1,
            );
        }
        assert_eq!(streak.failures(), FAILING_AFTER + 2);
        assert!(streak.is_failing());
        streak.succeeded("spin");
        assert_eq!(streak.failures(), 0);
        assert_eq!(
            streak.last_error().as_deref(),
            Some(format!("attempt {}", FAILING_AFTER + 2).as_str())
        );
    }
}
