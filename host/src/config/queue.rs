//! The workqueue's backoff after a failed reconcile: `queue` of the file, of a module entry and
//! of a spec.

use std::time::Duration;

use serde::Deserialize;

use super::duration::millis;
use super::{ConfigError, invalid};

/// Per-key exponential backoff of every controller's workqueue after a failed reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueConfig {
    /// Delay after the first failure; doubles with every further failure (default 5 ms).
    pub base_delay: Duration,
    /// Upper bound of the backoff delay (default 1000 s).
    pub max_delay: Duration,
    /// Retries per second the bucket shared by every key allows (default 10).
    pub qps: u32,
    /// Retries the bucket allows at once (default 100).
    pub burst: u32,
}

impl Default for QueueConfig {
    /// client-go's `DefaultControllerRateLimiter`: a 5 ms backoff doubling up to 1000 s, and a
    /// bucket of 10 retries per second with a burst of 100.
    fn default() -> Self {
        Self {
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_secs(1000),
            qps: 10,
            burst: 100,
        }
    }
}

/// `queue` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawQueue {
    pub(super) base_backoff_ms: Option<u64>,
    pub(super) max_backoff_seconds: Option<u64>,
    pub(super) qps: Option<u32>,
    pub(super) burst: Option<u32>,
}

/// The queue settings of `raw` at `at`, each field it leaves out taken from `defaults`.
pub(super) fn validate_queue(
    raw: RawQueue,
    defaults: &QueueConfig,
    at: &str,
) -> Result<QueueConfig, ConfigError> {
    let base_delay = millis(
        raw.base_backoff_ms,
        defaults.base_delay,
        format!("{at}.baseBackoffMs"),
    )?;
    let max_delay = match raw.max_backoff_seconds {
        None => defaults.max_delay,
        Some(0) => {
            return Err(invalid(
                format!("{at}.maxBackoffSeconds"),
                "0 is not at least 1",
            ));
        }
        Some(s) => Duration::from_secs(s),
    };
    if max_delay < base_delay {
        return Err(invalid(
            format!("{at}.maxBackoffSeconds"),
            format!(
                "{} s is less than baseBackoffMs ({} ms)",
                max_delay.as_secs(),
                base_delay.as_millis()
            ),
        ));
    }
    let count = |value: Option<u32>, default: u32, name: &str| match value {
        None => Ok(default),
        Some(0) => Err(invalid(format!("{at}.{name}"), "0 is not at least 1")),
        Some(n) => Ok(n),
    };
    Ok(QueueConfig {
        base_delay,
        max_delay,
        qps: count(raw.qps, defaults.qps, "qps")?,
        burst: count(raw.burst, defaults.burst, "burst")?,
    })
}
