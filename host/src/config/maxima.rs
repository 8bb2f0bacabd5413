//! The host's maxima for WasmControllers confined to their namespace: every value a tenant sets
//! that costs the host (memory, deadlines, output, concurrency, its share of the instance pool,
//! its retries, how often its source is read and its keys resynced) has a bound the operator
//! sets in `controllers.maxima`.
//!
//! A spec that sets a value past its bound is refused, naming the field and the bound. A value
//! the spec leaves out, or the module declares (its concurrency, its resync period), is brought
//! within the bound instead, so that any module runs.

use std::time::Duration;

use serde::Deserialize;

use super::duration::millis;
use super::limits::RawLimits;
use super::quantity::byte_size;
use super::queue::RawQueue;
use super::{ConfigError, Limits, ModuleConfig, QueueConfig, parse_duration};

/// The bounds of `controllers.maxima`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Maxima {
    /// The most of each limit; `instances` is the most instances alive at once, the guest's
    /// share of the host's pool.
    pub limits: Limits,
    /// The most workers.
    pub max_concurrency: u32,
    /// The shortest `pollInterval`.
    pub min_poll: Duration,
    /// The shortest resync period.
    pub min_resync: Duration,
    /// The most retries per second.
    pub qps: u32,
    /// The most retries at once.
    pub burst: u32,
    /// The shortest first backoff.
    pub min_base_backoff: Duration,
}

impl Default for Maxima {
    fn default() -> Self {
        Self {
            limits: Limits {
                timeout: Duration::from_secs(60),
                memory_bytes: 128 << 20,
                host_call_timeout: Duration::from_secs(30),
                write_bytes: 3 << 20,
                log_bytes: 1 << 20,
                error_bytes: 64 << 10,
                map_keys: 100_000,
                log_lines_per_second: 1_000,
                instances: 16,
            },
            max_concurrency: 16,
            min_poll: Duration::from_secs(10),
            min_resync: Duration::from_secs(60),
            qps: 50,
            burst: 500,
            min_base_backoff: Duration::from_millis(5),
        }
    }
}

/// `controllers.maxima` as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawMaxima {
    timeout_ms: Option<u64>,
    memory_bytes: Option<serde_yaml::Value>,
    host_call_timeout_ms: Option<u64>,
    write_bytes: Option<serde_yaml::Value>,
    log_bytes: Option<serde_yaml::Value>,
    error_bytes: Option<serde_yaml::Value>,
    map_keys: Option<u32>,
    log_lines_per_second: Option<u32>,
    max_concurrency: Option<u32>,
    instances: Option<u32>,
    poll_interval: Option<String>,
    resync_seconds: Option<u32>,
    qps: Option<u32>,
    burst: Option<u32>,
    base_backoff_ms: Option<u64>,
}

impl RawMaxima {
    /// The maxima, each left out taking its default.
    pub(super) fn validate(self) -> Result<Maxima, ConfigError> {
        let at = |field: &str| format!("controllers.maxima.{field}");
        let d = Maxima::default();
        let l = d.limits;
        let size = |value: Option<serde_yaml::Value>, default: u64, field: &str| {
            value.map_or(Ok(default), |v| {
                byte_size(&v, 1).map_err(|m| super::invalid(at(field), m))
            })
        };
        let count = |value: Option<u32>, default: u32, field: &str| match value {
            Some(0) => Err(super::invalid(at(field), "0 is not at least 1")),
            value => Ok(value.unwrap_or(default)),
        };
        let limits = Limits {
            timeout: millis(self.timeout_ms, l.timeout, at("timeoutMs"))?,
            memory_bytes: size(self.memory_bytes, l.memory_bytes, "memoryBytes")?,
            host_call_timeout: millis(
                self.host_call_timeout_ms,
                l.host_call_timeout,
                at("hostCallTimeoutMs"),
            )?,
            write_bytes: size(self.write_bytes, l.write_bytes, "writeBytes")?,
            log_bytes: size(self.log_bytes, l.log_bytes, "logBytes")?,
            error_bytes: size(self.error_bytes, l.error_bytes, "errorBytes")?,
            map_keys: count(self.map_keys, l.map_keys, "mapKeys")?,
            log_lines_per_second: count(
                self.log_lines_per_second,
                l.log_lines_per_second,
                "logLinesPerSecond",
            )?,
            instances: count(self.instances, l.instances, "instances")?,
        };
        Ok(Maxima {
            limits,
            max_concurrency: count(self.max_concurrency, d.max_concurrency, "maxConcurrency")?,
            min_poll: self
                .poll_interval
                .map(|p| parse_duration(&p).map_err(|m| super::invalid(at("pollInterval"), m)))
                .transpose()?
                .unwrap_or(d.min_poll),
            min_resync: self
                .resync_seconds
                .map_or(d.min_resync, |s| Duration::from_secs(s.into())),
            qps: count(self.qps, d.qps, "qps")?,
            burst: count(self.burst, d.burst, "burst")?,
            min_base_backoff: self
                .base_backoff_ms
                .map_or(d.min_base_backoff, Duration::from_millis),
        })
    }
}

/// Which values a spec sets itself, as opposed to the defaults it leaves them at.
#[derive(Debug, Default)]
pub(super) struct Set {
    limits: [bool; 8],
    max_concurrency: bool,
    queue: [bool; 3],
}

impl Set {
    /// What `limits`, `max_concurrency` and `queue` of a spec set.
    pub(super) fn of(
        limits: Option<&RawLimits>,
        max_concurrency: Option<u32>,
        queue: Option<&RawQueue>,
    ) -> Self {
        Self {
            limits: limits.map_or([false; 8], |l| {
                [
                    l.timeout_ms.is_some(),
                    l.memory_bytes.is_some(),
                    l.host_call_timeout_ms.is_some(),
                    l.write_bytes.is_some(),
                    l.log_bytes.is_some(),
                    l.error_bytes.is_some(),
                    l.map_keys.is_some(),
                    l.log_lines_per_second.is_some(),
                ]
            }),
            max_concurrency: max_concurrency.is_some(),
            queue: queue.map_or([false; 3], |q| {
                [
                    q.base_backoff_ms.is_some(),
                    q.qps.is_some(),
                    q.burst.is_some(),
                ]
            }),
        }
    }
}

/// A check of one value against its bound: refused when the spec set it, else brought within.
struct Bound<'a> {
    set: &'a Set,
    refusals: Vec<String>,
}

impl Bound<'_> {
    /// `value` at most `maximum`: refused as `field` when `set`, else lowered to it.
    fn at_most<T: PartialOrd + Copy>(
        &mut self,
        set: bool,
        field: &str,
        value: &mut T,
        maximum: T,
        show: impl Fn(T) -> String,
    ) {
        if *value <= maximum {
            return;
        }
        if set {
            self.refusals.push(format!(
                "spec.{field}: {} is over the host's maximum of {}",
                show(*value),
                show(maximum)
            ));
        } else {
            *value = maximum;
        }
    }
}

impl Maxima {
    /// Brings `module` (a confined spec's, polled every `poll`) within the maxima; refuses,
    /// naming every field past its bound, what the spec itself set past one.
    pub(super) fn enforce(
        &self,
        module: &mut ModuleConfig,
        poll: Option<Duration>,
        set: &Set,
    ) -> Result<(), ConfigError> {
        let mut bound = Bound {
            set,
            refusals: Vec::new(),
        };
        self.limit(&mut bound, &mut module.limits);
        let mut concurrency = module.max_concurrency.unwrap_or(0);
        let s = bound.set.max_concurrency;
        bound.at_most(
            s,
            "maxConcurrency",
            &mut concurrency,
            self.max_concurrency,
            num,
        );
        if let Some(resync) = module.resync_seconds
            && u64::from(resync) < self.min_resync.as_secs()
        {
            bound.refusals.push(format!(
                "spec.resyncSeconds: {resync} is under the host's minimum of {}",
                self.min_resync.as_secs()
            ));
        }
        if let Some(poll) = poll
            && poll < self.min_poll
        {
            bound.refusals.push(format!(
                "spec.module.pollInterval: {poll:?} is under the host's minimum of {:?}",
                self.min_poll
            ));
        }
        if let Some(queue) = &mut module.queue {
            self.retry(&mut bound, queue);
        }
        if !bound.refusals.is_empty() {
            return Err(ConfigError::OverMaximum(bound.refusals.join("; ")));
        }
        module.maxima = Some(*self);
        Ok(())
    }

    fn limit(&self, bound: &mut Bound<'_>, limits: &mut Limits) {
        let (s, m) = (bound.set.limits, &self.limits);
        let ms = |d: Duration| format!("{}", d.as_millis());
        bound.at_most(s[0], "limits.timeoutMs", &mut limits.timeout, m.timeout, ms);
        let memory = &mut limits.memory_bytes;
        bound.at_most(s[1], "limits.memoryBytes", memory, m.memory_bytes, bytes);
        let call = &mut limits.host_call_timeout;
        bound.at_most(
            s[2],
            "limits.hostCallTimeoutMs",
            call,
            m.host_call_timeout,
            ms,
        );
        let write = &mut limits.write_bytes;
        bound.at_most(s[3], "limits.writeBytes", write, m.write_bytes, bytes);
        bound.at_most(
            s[4],
            "limits.logBytes",
            &mut limits.log_bytes,
            m.log_bytes,
            bytes,
        );
        let error = &mut limits.error_bytes;
        bound.at_most(s[5], "limits.errorBytes", error, m.error_bytes, bytes);
        bound.at_most(
            s[6],
            "limits.mapKeys",
            &mut limits.map_keys,
            m.map_keys,
            num,
        );
        let lines = &mut limits.log_lines_per_second;
        bound.at_most(
            s[7],
            "limits.logLinesPerSecond",
            lines,
            m.log_lines_per_second,
            num,
        );
        limits.instances = limits.instances.min(m.instances);
    }

    fn retry(&self, bound: &mut Bound<'_>, queue: &mut QueueConfig) {
        let s = bound.set.queue;
        if queue.base_delay < self.min_base_backoff {
            if s[0] {
                bound.refusals.push(format!(
                    "spec.queue.baseBackoffMs: {} is under the host's minimum of {}",
                    queue.base_delay.as_millis(),
                    self.min_base_backoff.as_millis()
                ));
            } else {
                queue.base_delay = self.min_base_backoff;
            }
        }
        bound.at_most(s[1], "queue.qps", &mut queue.qps, self.qps, num);
        bound.at_most(s[2], "queue.burst", &mut queue.burst, self.burst, num);
    }
}

fn num<T: std::fmt::Display>(n: T) -> String {
    n.to_string()
}

/// `n` bytes, in the largest binary unit that divides it.
fn bytes(n: u64) -> String {
    for (unit, shift) in [("Gi", 30), ("Mi", 20), ("Ki", 10)] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module() -> ModuleConfig {
        ModuleConfig::from_source(super::super::Source::File("/m.wasm".into()))
    }

    #[test]
    fn what_a_spec_sets_past_a_bound_is_refused_naming_each_field() {
        let maxima = Maxima::default();
        let mut module = module();
        module.limits.memory_bytes = 1 << 30;
        module.limits.timeout = Duration::from_secs(3600);
        module.max_concurrency = Some(1024);
        let set = Set {
            limits: [true, true, false, false, false, false, false, false],
            max_concurrency: true,
            ..Set::default()
        };
        let error = maxima
            .enforce(&mut module, Some(Duration::from_millis(1)), &set)
            .unwrap_err()
            .to_string();
        for expected in [
            "spec.limits.memoryBytes: 1Gi is over the host's maximum of 128Mi",
            "spec.limits.timeoutMs: 3600000 is over the host's maximum of 60000",
            "spec.maxConcurrency: 1024 is over the host's maximum of 16",
            "spec.module.pollInterval: 1ms is under the host's minimum of 10s",
        ] {
            assert!(error.contains(expected), "{error}");
        }
    }

    #[test]
    fn what_a_spec_leaves_out_is_brought_within_the_bounds() {
        let mut maxima = Maxima::default();
        maxima.limits.memory_bytes = 16 << 20;
        let mut module = module();
        maxima
            .enforce(&mut module, Some(Duration::from_secs(300)), &Set::default())
            .unwrap();
        assert_eq!(module.limits.memory_bytes, 16 << 20);
        assert_eq!(module.limits.instances, 16);
        assert_eq!(module.maxima, Some(maxima));
    }

    #[test]
    fn byte_sizes_are_shown_in_binary_units() {
        assert_eq!(bytes(128 << 20), "128Mi");
        assert_eq!(bytes(3 << 30), "3Gi");
        assert_eq!(bytes(1000), "1000");
    }
}
