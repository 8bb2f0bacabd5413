//! What the sharder of one guest did, and what its members waited for, for the metrics and the
//! controller's status.

use std::sync::Mutex;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::jiff::Timestamp;

use crate::histogram::{Histogram, exponential};

/// Bounds of the handover time, from asking for a drain to labelling for the new member.
pub const HANDOVER_BUCKETS: &[f64] = &exponential::<12>(0.005, 2.0);

/// What the sharder of one guest did.
pub struct ShardStats {
    /// Live members of the ring, as last seen.
    pub members: AtomicU64,
    /// Primary objects labelled for a member: new ones and those of gone members.
    pub assigned: AtomicU64,
    /// Drains asked for: keys moving between live members.
    pub moves: AtomicU64,
    /// Time from asking for a drain to labelling for the new member.
    pub handover: Histogram,
    /// Label writes that failed (other than a conflict or a missing object).
    pub failed: AtomicU64,
    /// Objects whose last label write failed, waiting to be sent again.
    pub backing_off: AtomicU64,
    /// While label writes fail: when they started to, and the last error.
    pub failing: Mutex<Option<(Timestamp, String)>>,
    /// Drains asked for over a minute ago that their holder has not served.
    pub drains_stuck: AtomicU64,
    /// Label writes that met a newer version of their object: decided again on it.
    pub conflicts: AtomicU64,
    /// On this replica as a member: keys that waited for its watches to show the children the
    /// sharder labelled for it.
    pub children_waits: AtomicU64,
}

impl ShardStats {
    /// When the sharder's label writes started failing and the last error, while they fail.
    pub fn failing(&self) -> Option<(Timestamp, String)> {
        self.failing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records the failures of one round of writes: `failed` writes, the first with `error`,
    /// and `backing_off` objects waiting to be sent again.
    pub(super) fn record(&self, failed: usize, error: Option<String>, backing_off: usize) {
        self.failed.fetch_add(failed as u64, Ordering::Relaxed);
        self.backing_off
            .store(backing_off as u64, Ordering::Relaxed);
        let mut failing = self.failing.lock().unwrap_or_else(PoisonError::into_inner);
        match error {
            Some(error) => {
                let since = failing
                    .take()
                    .map_or_else(Timestamp::now, |(since, _)| since);
                *failing = Some((since, error));
            }
            None if backing_off == 0 => *failing = None,
            None => {}
        }
    }
}

impl Default for ShardStats {
    fn default() -> Self {
        Self {
            members: AtomicU64::new(0),
            assigned: AtomicU64::new(0),
            moves: AtomicU64::new(0),
            handover: Histogram::new(HANDOVER_BUCKETS),
            failed: AtomicU64::new(0),
            backing_off: AtomicU64::new(0),
            failing: Mutex::new(None),
            drains_stuck: AtomicU64::new(0),
            conflicts: AtomicU64::new(0),
            children_waits: AtomicU64::new(0),
        }
    }
}
