//! A guest's tally: how its reconciles ended, how long its current run of failures is, and its
//! last error. Metrics and status endpoints read it as a [`Tally`] snapshot.
//!
//! Guarantees: a guest whose reconciles fail [`FAILING_AFTER`] times in a row (across keys) is
//! reported once with a warning naming the guest, the key and the error; its next successful
//! reconcile ends the run and is reported with an info line. A run of failures shorter than
//! that (a conflict, a blip of the API server) is not reported beyond the failures' own lines.

use std::fmt::Display;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

/// Failed reconciles in a row after which a guest is reported as failing: a single conflict or
/// unavailable API server fails a reconcile or two, while a broken guest reaches five within
/// a second of per-key backoff.
pub const FAILING_AFTER: u64 = 5;

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
    /// The error of the last failed reconcile, if any failed since the module was loaded.
    pub last_error: Option<String>,
}

/// The current run of failed reconciles of one guest, and its last error.
#[derive(Debug, Default)]
pub struct Streak {
    failures: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl Streak {
    /// Records a failed reconcile of `key`; warns when it makes the run [`FAILING_AFTER`] long.
    pub fn failed(&self, guest: &str, key: &impl Display, error: &str) {
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(error.to_owned());
        let failures = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failures == FAILING_AFTER {
            tracing::warn!(
                %guest, %key, %error,
                "guest is failing: {failures} reconciles in a row failed"
            );
        }
    }

    /// Records a successful reconcile; reports the end of a run of failures long enough to
    /// have been reported.
    pub fn succeeded(&self, guest: &str) {
        let failures = self.failures.swap(0, Ordering::Relaxed);
        if failures >= FAILING_AFTER {
            tracing::info!(%guest, "guest recovered after {failures} failed reconciles in a row");
        }
    }

    /// Failed reconciles since the last successful one.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// The error of the last failed reconcile.
    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streak_counts_failures_until_a_success_and_keeps_the_last_error() {
        let streak = Streak::default();
        assert_eq!((streak.failures(), streak.last_error()), (0, None));
        for attempt in 1..=FAILING_AFTER + 2 {
            streak.failed("spin", &"ns/a", &format!("attempt {attempt}"));
        }
        assert_eq!(streak.failures(), FAILING_AFTER + 2);
        streak.succeeded("spin");
        assert_eq!(streak.failures(), 0);
        assert_eq!(
            streak.last_error().as_deref(),
            Some(format!("attempt {}", FAILING_AFTER + 2).as_str())
        );
    }
}
