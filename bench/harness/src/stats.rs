//! Summaries of latency samples.

use std::time::Duration;

use serde::Serialize;

/// Nearest-rank percentiles of a set of latencies, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Latencies {
    /// How many samples.
    pub count: usize,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest sample.
    pub max_ms: f64,
}

impl Latencies {
    /// Summarises `samples`; all zero when there are none.
    pub fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        Self {
            count: samples.len(),
            p50_ms: percentile(&samples, 0.5),
            p99_ms: percentile(&samples, 0.99),
            max_ms: samples.last().map_or(0.0, |max| millis(*max)),
        }
    }
}

/// The nearest-rank percentile of sorted samples, in milliseconds; 0 for no samples.
fn percentile(sorted: &[Duration], fraction: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (fraction * sorted.len() as f64).ceil() as usize;
    millis(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// A duration in milliseconds.
pub fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let samples = (1..=100).rev().map(Duration::from_millis).collect();
        let summary = Latencies::of(samples);
        assert_eq!(summary.count, 100);
        assert_eq!(summary.p50_ms, 50.0);
        assert_eq!(summary.p99_ms, 99.0);
        assert_eq!(summary.max_ms, 100.0);
    }

    #[test]
    fn no_samples_summarise_to_zero() {
        let summary = Latencies::of(Vec::new());
        assert_eq!((summary.count, summary.p99_ms), (0, 0.0));
    }
}
