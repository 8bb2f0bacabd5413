//! The backoff of the sharder's label writes that failed: per object, doubling.

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

/// Pause before an object whose label write failed is decided and sent again; it doubles with
/// each failure in a row, up to [`RETRY_MAX`].
pub const RETRY: Duration = Duration::from_secs(1);

/// The longest pause between two label writes of one object that keep failing.
pub const RETRY_MAX: Duration = Duration::from_secs(300);

/// Sleeps until `due`, or forever without one.
pub async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

/// The objects whose label writes failed, each with its backoff; an object's failures count on
/// until a write of it succeeds or it is gone.
pub struct Retries<K> {
    /// By object: its failures in a row, and when it may be sent again.
    pub waiting: HashMap<K, (u32, Instant)>,
}

impl<K: Clone + Eq + Hash + Ord> Retries<K> {
    /// Counts a failure of `object`'s write at `now`; returns the pause before it is sent
    /// again: [`RETRY`], doubled with each failure in a row, up to [`RETRY_MAX`].
    pub fn failed(&mut self, object: K, now: Instant) -> Duration {
        let (failures, due) = self.waiting.entry(object).or_insert((0, now));
        let pause = RETRY
            .saturating_mul(2u32.saturating_pow(*failures))
            .min(RETRY_MAX);
        *failures = failures.saturating_add(1);
        *due = now + pause;
        pause
    }

    /// Ends `object`'s backoff: its write succeeded, or is left to the next event.
    pub fn succeeded(&mut self, object: &K) {
        self.waiting.remove(object);
    }

    /// Whether `object` waits out its backoff at `now`.
    pub fn waits(&self, object: &K, now: Instant) -> bool {
        self.waiting.get(object).is_some_and(|(_, due)| *due > now)
    }

    /// When the first backoff of the objects of `dirty` ends, if any of them waits; an object
    /// that had nothing to write when its backoff ended is left out.
    pub fn next_due(&self, dirty: &BTreeSet<K>) -> Option<Instant> {
        dirty
            .iter()
            .filter_map(|object| self.waiting.get(object).map(|(_, due)| *due))
            .min()
    }

    /// The objects of `dirty` in backoff.
    pub fn len(&self, dirty: &BTreeSet<K>) -> usize {
        dirty
            .iter()
            .filter(|o| self.waiting.contains_key(*o))
            .count()
    }
}

impl<K> Default for Retries<K> {
    fn default() -> Self {
        Self {
            waiting: HashMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_that_keeps_failing_waits_twice_as_long_each_time_up_to_five_minutes() {
        let mut retries = Retries::default();
        let now = Instant::now();
        let pauses: Vec<u64> = (0..11)
            .map(|_| retries.failed("a", now).as_secs())
            .collect();
        assert_eq!(pauses, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert!(retries.waits(&"a", now + Duration::from_secs(299)));
        assert!(!retries.waits(&"a", now + Duration::from_secs(300)));
        // Each object has its own backoff.
        assert_eq!(retries.failed("b", now), RETRY);
        let dirty = BTreeSet::from(["a", "b"]);
        assert_eq!(retries.next_due(&dirty), Some(now + RETRY));
        assert_eq!(retries.len(&dirty), 2);
        // Only the objects still to be written count.
        let dirty = BTreeSet::from(["a"]);
        assert_eq!(retries.next_due(&dirty), Some(now + RETRY_MAX));
        assert_eq!(retries.len(&dirty), 1);
        retries.succeeded(&"a");
        assert_eq!(retries.failed("a", now), RETRY);
    }
}
