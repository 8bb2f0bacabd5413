//! One guest's Events, aggregated and rate-limited as client-go's event correlator does, so a
//! guest that records an event on every reconcile keeps one Event object with a count instead
//! of a new object each time.
//!
//! Guarantees:
//! - An event identical to one recorded less than [`SERIES_WINDOW`] before (same object, type,
//!   reason, action and note) joins that event's series instead of creating an Event. The
//!   series' `count` and `lastObservedTime` are written at its 2nd, 4th, 8th, ... occurrence and
//!   at least every [`SERIES_REFRESH`] while it repeats, so a flood costs few writes; between
//!   those writes the count on the server lags.
//! - New series about one object are limited by a token bucket of [`BURST`] that refills one
//!   token every [`REFILL`] (client-go's spam filter); events beyond it are dropped and counted.
//! - At most [`SERIES_KEPT`] series are remembered, the oldest forgotten first.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::rate::TokenBucket;

/// How long after its last occurrence an event still joins a series.
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);
/// Longest wait between two writes of a repeating series.
pub const SERIES_REFRESH: Duration = Duration::from_secs(30);
/// New series one object may start at once.
pub const BURST: u32 = 25;
/// Time to earn one more new series about an object.
pub const REFILL: Duration = Duration::from_secs(5 * 60);
/// Series remembered.
pub const SERIES_KEPT: usize = 4096;

/// Tokens a bucket earns per second: one per [`REFILL`].
fn refill_rate() -> f64 {
    1.0 / REFILL.as_secs_f64()
}

/// What makes two events the same: the object they are about (its kind, namespace, name and
/// uid), their type, reason, action and note.
pub type EventKey = (String, bool, String, String, String);

/// What to do with one recorded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Create a new Event, then report its name with [`Correlator::created`].
    Create,
    /// Write the series of the Event `name` in `namespace`: it has occurred `count` times.
    Count {
        /// The Event's namespace.
        namespace: String,
        /// The Event's name.
        name: String,
        /// Occurrences so far.
        count: u32,
    },
    /// Counted in its series; nothing to write now.
    Merged,
    /// Over the object's rate: dropped.
    Dropped,
}

struct Series {
    /// The Event, once created.
    event: Option<(String, String)>,
    count: u32,
    last_seen: Instant,
    last_written: Instant,
}

/// The series and rate buckets of one guest.
#[derive(Default)]
pub struct Correlator {
    series: HashMap<EventKey, Series>,
    buckets: HashMap<String, TokenBucket>,
    dropped: u64,
}

impl Correlator {
    /// Decides what the event `key` recorded at `now` becomes.
    pub fn observe(&mut self, key: &EventKey, now: Instant) -> Decision {
        if let Some(series) = self.series.get_mut(key)
            && now.saturating_duration_since(series.last_seen) < SERIES_WINDOW
        {
            series.count += 1;
            series.last_seen = now;
            // While its Event is being created, this one counts into it.
            let Some((namespace, name)) = series.event.clone() else {
                return Decision::Merged;
            };
            let due = now.saturating_duration_since(series.last_written) >= SERIES_REFRESH;
            if series.count.is_power_of_two() || due {
                series.last_written = now;
                return Decision::Count {
                    namespace,
                    name,
                    count: series.count,
                };
            }
            return Decision::Merged;
        }
        if !self.take_token(&key.0, now) {
            self.dropped += 1;
            return Decision::Dropped;
        }
        self.forget_old(now);
        self.series.insert(
            key.clone(),
            Series {
                event: None,
                count: 1,
                last_seen: now,
                last_written: now,
            },
        );
        Decision::Create
    }

    /// Notes the Event of `key` created as `(namespace, name)`, or with `None` that creating it
    /// failed: the series is forgotten and its next occurrence creates an Event again.
    pub fn created(&mut self, key: &EventKey, created: Option<(String, String)>) {
        match created {
            Some(event) => {
                if let Some(series) = self.series.get_mut(key) {
                    series.event = Some(event);
                }
            }
            None => {
                self.series.remove(key);
            }
        }
    }

    /// Events dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    fn take_token(&mut self, object: &str, now: Instant) -> bool {
        let bucket = self.buckets.entry(object.to_owned()).or_default();
        bucket.try_take(refill_rate(), f64::from(BURST), now.into_std())
    }

    /// Forgets series past their window, and the oldest while [`SERIES_KEPT`] remain; forgets
    /// buckets, full ones first, past that many objects.
    fn forget_old(&mut self, now: Instant) {
        if self.series.len() >= SERIES_KEPT {
            self.series
                .retain(|_, s| now.saturating_duration_since(s.last_seen) < SERIES_WINDOW);
        }
        while self.series.len() >= SERIES_KEPT {
            let oldest = self
                .series
                .iter()
                .min_by_key(|(_, s)| s.last_seen)
                .map(|(k, _)| k.clone());
            if let Some(key) = oldest {
                self.series.remove(&key);
            }
        }
        if self.buckets.len() >= SERIES_KEPT {
            let now = now.into_std();
            self.buckets
                .retain(|_, b| !b.is_full(refill_rate(), f64::from(BURST), now));
            if self.buckets.len() >= SERIES_KEPT {
                self.buckets.clear();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(object: &str, note: &str) -> EventKey {
        (
            object.into(),
            false,
            "Synced".into(),
            "Reconcile".into(),
            note.into(),
        )
    }

    #[test]
    fn a_repeated_event_is_one_series_written_at_powers_of_two_and_every_thirty_seconds() {
        let mut events = Correlator::default();
        let start = Instant::now();
        let synced = key("v1/ConfigMap/a/x/u1", "up to date");
        assert_eq!(events.observe(&synced, start), Decision::Create);
        // Repeats while the Event is being created count into it.
        assert_eq!(events.observe(&synced, start), Decision::Merged);
        events.created(&synced, Some(("a".into(), "x.1".into())));
        let mut writes = Vec::new();
        for i in 3..=100u64 {
            let at = start + Duration::from_millis(i * 10);
            if let Decision::Count { count, .. } = events.observe(&synced, at) {
                writes.push(count);
            }
        }
        assert_eq!(writes, [4, 8, 16, 32, 64]);
        let later = start + Duration::from_secs(45);
        assert!(matches!(
            events.observe(&synced, later),
            Decision::Count { count: 101, .. }
        ));
        // Past the window it is a new Event.
        let much_later = later + SERIES_WINDOW;
        assert_eq!(events.observe(&synced, much_later), Decision::Create);
    }

    #[test]
    fn new_series_about_one_object_are_rate_limited_and_drops_counted() {
        let mut events = Correlator::default();
        let start = Instant::now();
        let decisions: Vec<_> = (0..30)
            .map(|i| events.observe(&key("o1", &format!("created pod {i}")), start))
            .collect();
        assert!(decisions[..25].iter().all(|d| *d == Decision::Create));
        assert!(decisions[25..].iter().all(|d| *d == Decision::Dropped));
        assert_eq!(events.dropped(), 5);
        // Another object has its own bucket, and the bucket refills.
        assert_eq!(events.observe(&key("o2", "x"), start), Decision::Create);
        let refilled = start + REFILL;
        assert_eq!(
            events.observe(&key("o1", "created pod 30"), refilled),
            Decision::Create
        );
    }

    #[test]
    fn a_failed_create_starts_over() {
        let mut events = Correlator::default();
        let now = Instant::now();
        let synced = key("o", "n");
        assert_eq!(events.observe(&synced, now), Decision::Create);
        events.created(&synced, None);
        assert_eq!(events.observe(&synced, now), Decision::Create);
    }
}
