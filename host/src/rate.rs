//! Token buckets: a rate with a burst, refilled continuously. The guest log limit, the
//! workqueue's retry bucket and the Event spam filter all count with one.

use std::time::{Duration, Instant};

/// A token bucket holding up to `burst` tokens and earning `rate` per second; full until first
/// used. The rate and burst are given at each use, so a changed setting applies at once.
#[derive(Debug, Clone, Default)]
pub struct TokenBucket {
    /// Tokens as of `refilled`; negative when tokens were reserved ahead.
    tokens: f64,
    /// When tokens were last counted; `None` while the bucket is full and unused.
    refilled: Option<Instant>,
}

impl TokenBucket {
    /// Takes one token if the bucket holds one at `now`.
    pub fn try_take(&mut self, rate: f64, burst: f64, now: Instant) -> bool {
        self.refill(rate, burst, now);
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }

    /// Takes one token, borrowing it ahead when the bucket is empty; returns how long after
    /// `now` that token is earned (zero when the bucket held one).
    pub fn reserve(&mut self, rate: f64, burst: f64, now: Instant) -> Duration {
        self.refill(rate, burst, now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / rate)
        }
    }

    /// Whether the bucket is full at `now`: forgetting it changes nothing.
    pub fn is_full(&self, rate: f64, burst: f64, now: Instant) -> bool {
        self.refilled.is_none_or(|then| {
            self.tokens + now.saturating_duration_since(then).as_secs_f64() * rate >= burst
        })
    }

    fn refill(&mut self, rate: f64, burst: f64, now: Instant) {
        self.tokens = match self.refilled {
            None => burst,
            Some(then) => {
                let earned = now.saturating_duration_since(then).as_secs_f64() * rate;
                (self.tokens + earned).min(burst)
            }
        };
        self.refilled = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_starts_full_refills_at_its_rate_and_never_holds_more_than_its_burst() {
        let start = Instant::now();
        let mut bucket = TokenBucket::default();
        assert!(bucket.is_full(2.0, 3.0, start));
        assert!((0..3).all(|_| bucket.try_take(2.0, 3.0, start)));
        assert!(!bucket.try_take(2.0, 3.0, start));
        assert!(bucket.try_take(2.0, 3.0, start + Duration::from_millis(500)));
        assert!(bucket.is_full(2.0, 3.0, start + Duration::from_secs(60)));
        assert!((0..3).all(|_| bucket.try_take(2.0, 3.0, start + Duration::from_secs(60))));
    }

    #[test]
    fn a_reservation_borrows_ahead_and_says_when_its_token_is_earned() {
        let start = Instant::now();
        let mut bucket = TokenBucket::default();
        assert_eq!(bucket.reserve(10.0, 1.0, start), Duration::ZERO);
        assert_eq!(bucket.reserve(10.0, 1.0, start), Duration::from_millis(100));
        assert_eq!(bucket.reserve(10.0, 1.0, start), Duration::from_millis(200));
        assert!(!bucket.try_take(10.0, 1.0, start + Duration::from_millis(200)));
    }
}
