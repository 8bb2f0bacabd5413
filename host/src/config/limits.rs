//! Per-module resource limits: their defaults and minima, and `limits` as written in the file
//! or a spec.

use std::time::Duration;

use serde::Deserialize;

use super::duration::millis;
use super::quantity::byte_size;
use super::{ConfigError, invalid};

/// Default wall-clock deadline of one reconcile call: generous for a reconcile, which mostly
/// waits on API calls, yet bounded so a stuck guest cannot hold a worker forever.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Default cap on an instance's linear memory (64 MiB): ample for parsing and rewriting the JSON
/// of large objects and lists, small enough to run many modules side by side.
pub const DEFAULT_MEMORY_BYTES: u64 = 64 * 1024 * 1024;

/// Default timeout of each API call the host makes on a guest's behalf: half the reconcile
/// deadline, so a slow API server surfaces as a call error the guest can handle rather than as
/// a killed reconcile.
pub const DEFAULT_HOST_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Default cap on the JSON of one apply or patch (1 MiB): the API server caps a ConfigMap's or
/// Secret's data at 1 MiB and etcd refuses requests over 1.5 MiB, so a larger write is a bug.
pub const DEFAULT_WRITE_BYTES: u64 = 1024 * 1024;

/// Default cap on the log output of one call (64 KiB): hundreds of ordinary lines, yet one call
/// cannot push megabytes into the host's log.
pub const DEFAULT_LOG_BYTES: u64 = 64 * 1024;

/// Default cap on the error message of a reconcile or finalize (32 KiB): the longest message a
/// status condition (`metav1.Condition`) holds, so an error fits one uncut.
pub const DEFAULT_ERROR_BYTES: u64 = 32 * 1024;

/// Default cap on the keys one `map-keys` call returns: more primaries than one watched object
/// plausibly maps to, few enough that one call cannot flood the workqueue.
pub const DEFAULT_MAP_KEYS: u32 = 10_000;

/// Default rate of guest output lines (the `log` import, stdout and stderr) forwarded to the
/// host's log: far above what a healthy controller logs, low enough that one guest cannot drown
/// the host's own lines.
pub const DEFAULT_LOG_LINES_PER_SECOND: u32 = 100;

/// Smallest accepted `limits.memoryBytes` (1 MiB); less cannot hold a component's stack and
/// heap.
pub const MIN_MEMORY_BYTES: u64 = 1024 * 1024;

/// Smallest accepted `writeBytes`, `logBytes` and `errorBytes` (1 KiB); less would refuse
/// ordinary objects, lines and messages.
pub const MIN_CAP_BYTES: u64 = 1024;

/// Per-module resource limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock deadline of one reconcile call; at least 1 ms.
    pub timeout: Duration,
    /// Maximum linear memory of one instance; at least [`MIN_MEMORY_BYTES`].
    pub memory_bytes: u64,
    /// Timeout of each API call made on the guest's behalf; at least 1 ms.
    pub host_call_timeout: Duration,
    /// Largest JSON of one apply or patch; at least [`MIN_CAP_BYTES`].
    pub write_bytes: u64,
    /// Log output of one call: the `log` import's lines, and stdout and stderr each; at least
    /// [`MIN_CAP_BYTES`].
    pub log_bytes: u64,
    /// Longest error message of a reconcile or finalize; at least [`MIN_CAP_BYTES`].
    pub error_bytes: u64,
    /// Most keys one `map-keys` call may return; at least 1.
    pub map_keys: u32,
    /// Guest output lines per second forwarded to the host's log; at least 1.
    pub log_lines_per_second: u32,
    /// Instances of the guest alive at once, its share of the host's pool: the whole pool
    /// (`u32::MAX`) but for a confined WasmController (see [`maxima`](super::maxima)).
    pub instances: u32,
}

impl Default for Limits {
    /// The `DEFAULT_*` constants of this module.
    fn default() -> Self {
        Self {
            timeout: DEFAULT_TIMEOUT,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            host_call_timeout: DEFAULT_HOST_CALL_TIMEOUT,
            write_bytes: DEFAULT_WRITE_BYTES,
            log_bytes: DEFAULT_LOG_BYTES,
            error_bytes: DEFAULT_ERROR_BYTES,
            map_keys: DEFAULT_MAP_KEYS,
            log_lines_per_second: DEFAULT_LOG_LINES_PER_SECOND,
            instances: u32::MAX,
        }
    }
}

/// `limits` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawLimits {
    pub(super) timeout_ms: Option<u64>,
    /// A number of bytes or a quantity string, as the other byte sizes; checked by [`byte_size`].
    pub(super) memory_bytes: Option<serde_yaml::Value>,
    pub(super) host_call_timeout_ms: Option<u64>,
    pub(super) write_bytes: Option<serde_yaml::Value>,
    pub(super) log_bytes: Option<serde_yaml::Value>,
    pub(super) error_bytes: Option<serde_yaml::Value>,
    pub(super) map_keys: Option<u32>,
    pub(super) log_lines_per_second: Option<u32>,
}

/// `raw`, the `limits` at `at`, each field it leaves out at its default.
pub(super) fn validate_limits(raw: RawLimits, at: &str) -> Result<Limits, ConfigError> {
    let size = |value: Option<serde_yaml::Value>, default, minimum, name: &str| match value {
        None => Ok(default),
        Some(value) => byte_size(&value, minimum).map_err(|m| invalid(format!("{at}.{name}"), m)),
    };
    let count = |value: Option<u32>, default, name: &str| match value {
        None => Ok(default),
        Some(0) => Err(invalid(format!("{at}.{name}"), "0 is not at least 1")),
        Some(n) => Ok(n),
    };
    Ok(Limits {
        timeout: millis(raw.timeout_ms, DEFAULT_TIMEOUT, format!("{at}.timeoutMs"))?,
        memory_bytes: size(
            raw.memory_bytes,
            DEFAULT_MEMORY_BYTES,
            MIN_MEMORY_BYTES,
            "memoryBytes",
        )?,
        host_call_timeout: millis(
            raw.host_call_timeout_ms,
            DEFAULT_HOST_CALL_TIMEOUT,
            format!("{at}.hostCallTimeoutMs"),
        )?,
        write_bytes: size(
            raw.write_bytes,
            DEFAULT_WRITE_BYTES,
            MIN_CAP_BYTES,
            "writeBytes",
        )?,
        log_bytes: size(raw.log_bytes, DEFAULT_LOG_BYTES, MIN_CAP_BYTES, "logBytes")?,
        error_bytes: size(
            raw.error_bytes,
            DEFAULT_ERROR_BYTES,
            MIN_CAP_BYTES,
            "errorBytes",
        )?,
        map_keys: count(raw.map_keys, DEFAULT_MAP_KEYS, "mapKeys")?,
        log_lines_per_second: count(
            raw.log_lines_per_second,
            DEFAULT_LOG_LINES_PER_SECOND,
            "logLinesPerSecond",
        )?,
        instances: u32::MAX,
    })
}
