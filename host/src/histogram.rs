//! A lock-free histogram of durations with fixed bucket bounds, in the shape of a Prometheus
//! histogram.
//!
//! Guarantees: [`Histogram::observe`] is a binary search over the bounds and two relaxed atomic
//! additions, without allocating or locking; an observation lands in the first bucket whose
//! bound it does not exceed (bounds are inclusive, as Prometheus' `le`). A
//! [`HistogramSnapshot`]'s buckets are cumulative and its last one (`+Inf`) is its count, even
//! while observations race with the snapshot; only its sum may miss those observations.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Durations counted per bucket, with their sum.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// Observations per bucket, not cumulative; the last one holds those above every bound.
    counts: Box<[AtomicU64]>,
    /// Sum of the observations in nanoseconds (wraps after 584 years).
    sum_nanos: AtomicU64,
}

impl Histogram {
    /// An empty histogram with these bucket upper bounds, in seconds, strictly ascending.
    pub fn new(bounds: &'static [f64]) -> Self {
        debug_assert!(
            bounds.is_sorted_by(|a, b| a < b),
            "{bounds:?} not ascending"
        );
        Self {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_nanos: AtomicU64::new(0),
        }
    }

    /// Counts one observation of `elapsed`.
    pub fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let bucket = self.bounds.partition_point(|&bound| bound < seconds);
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The counts and sum so far.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut total = 0;
        let cumulative = self
            .counts
            .iter()
            .map(|count| {
                total += count.load(Ordering::Relaxed);
                total
            })
            .collect();
        HistogramSnapshot {
            bounds: self.bounds,
            cumulative,
            sum: self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

/// A [`Histogram`] read at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// Bucket upper bounds in seconds, ascending.
    pub bounds: &'static [f64],
    /// Observations at or below each bound, then all observations (the `+Inf` bucket): one
    /// more entry than `bounds`, never decreasing.
    pub cumulative: Vec<u64>,
    /// Sum of the observations in seconds.
    pub sum: f64,
}

impl HistogramSnapshot {
    /// Number of observations.
    pub fn count(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or_default()
    }
}

/// `N` bounds from `start`, each `factor` times the previous one, computed like
/// Prometheus' Go client's `ExponentialBuckets` so that the bounds are the same numbers.
pub const fn exponential<const N: usize>(start: f64, factor: f64) -> [f64; N] {
    let mut bounds = [0.0; N];
    let mut bound = start;
    let mut i = 0;
    while i < N {
        bounds[i] = bound;
        bound *= factor;
        i += 1;
    }
    bounds
}

/// Bounds of `controller_runtime_reconcile_time_seconds`, controller-runtime's: 5 ms to 60 s.
pub const RECONCILE_TIME_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// Bounds of `workqueue_queue_duration_seconds` and `workqueue_work_duration_seconds`,
/// controller-runtime's `ExponentialBuckets(10e-9, 10, 12)`: 10 ns to 1000 s.
pub const WORKQUEUE_BUCKETS: &[f64] = &exponential::<12>(10e-9, 10.0);

/// Bounds of `kubewasm_guest_instantiate_seconds` and `kubewasm_guest_call_seconds`: 10 µs to
/// 60 s, in steps of 1, 2.5 and 5 up to 10 s.
pub const GUEST_CALL_BUCKETS: &[f64] = &[
    1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: &[f64] = &[0.001, 0.01, 0.1];

    #[test]
    fn observations_land_in_the_first_bucket_whose_bound_they_do_not_exceed() {
        let histogram = Histogram::new(BOUNDS);
        for (nanos, cumulative) in [
            (0, [1, 1, 1, 1]),
            (1_000_000, [2, 2, 2, 2]),
            (1_000_001, [2, 3, 3, 3]),
            (5_000_000, [2, 4, 4, 4]),
            (10_000_000, [2, 5, 5, 5]),
            (100_000_000, [2, 5, 6, 6]),
            (100_000_001, [2, 5, 6, 7]),
            (3_600_000_000_000, [2, 5, 6, 8]),
        ] {
            histogram.observe(Duration::from_nanos(nanos));
            assert_eq!(
                histogram.snapshot().cumulative,
                cumulative,
                "after {nanos} ns"
            );
        }
    }

    #[test]
    fn snapshot_is_cumulative_with_the_count_last_and_the_sum_in_seconds() {
        let histogram = Histogram::new(BOUNDS);
        let empty = histogram.snapshot();
        assert_eq!((empty.count(), empty.sum), (0, 0.0));
        assert_eq!(empty.cumulative, [0; 4]);
        for micros in [500, 500, 20_000, 250_000, 250_000, 2_000] {
            histogram.observe(Duration::from_micros(micros));
        }
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.bounds, BOUNDS);
        assert_eq!(snapshot.cumulative, [2, 3, 4, 6]);
        assert_eq!(snapshot.count(), 6);
        assert_eq!(snapshot.sum, 0.523);
    }

    #[test]
    fn concurrent_observations_are_all_counted() {
        let histogram = Histogram::new(BOUNDS);
        std::thread::scope(|scope| {
            for thread in 0..4u32 {
                let histogram = &histogram;
                scope.spawn(move || {
                    for i in 0..10_000u32 {
                        histogram.observe(Duration::from_micros(u64::from(thread * i % 200_000)));
                    }
                });
            }
        });
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.count(), 40_000);
        assert!(snapshot.cumulative.is_sorted());
    }

    #[test]
    fn exponential_bounds_match_the_go_client() {
        let bounds: [f64; 12] = exponential(10e-9, 10.0);
        assert_eq!(bounds[0], 1e-8);
        assert_eq!(bounds[3], 9.999999999999999e-6);
        assert_eq!(bounds[8], 1.0);
        assert_eq!(bounds[11], 1000.0);
    }
}
