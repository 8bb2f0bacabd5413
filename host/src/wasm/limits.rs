//! Caps on what a guest hands the host: the size of one write, its log output per call, the
//! rate of its output into the host's log across calls, and the size of its results.
//!
//! Guarantees:
//! - A write over [`CallLimits::write_bytes`] is refused with an `invalid`
//!   error before it is parsed; the guest carries on.
//! - A guest never fails because it wrote too much: stdout and stderr keep the first
//!   `log_bytes` of each call and drop the rest; `log` lines beyond `log_bytes` per call are
//!   dropped after a single "log output truncated" note.
//! - At most `log_lines_per_second` lines per guest reach the host's log each second (a burst
//!   of one second's worth), across calls; the lines dropped are counted and summarized at most
//!   once a second. The rate limit only guards the host's log: whatever fits the per-call caps
//!   still reaches the guest's [`Backend`](crate::wasm::backend::Backend), so a deterministic run sees
//!   the same lines every time.
//! - Error messages and `map-keys` results are cut to their caps by the dispatcher.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::rate::TokenBucket;

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Limits applied to every call into a guest; see [`crate::config::Limits`] for what each
/// means and its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLimits {
    /// Wall-clock deadline of one call, including time spent in host imports and WASI waits.
    pub timeout: Duration,
    /// Maximum size of the guest's linear memories, in bytes.
    pub memory_bytes: usize,
    /// Deadline of one host import that talks to the API server.
    pub host_call_timeout: Duration,
    /// Largest JSON of one apply or patch.
    pub write_bytes: usize,
    /// Log output of one call: `log` lines, and stdout and stderr each.
    pub log_bytes: usize,
    /// Longest error message of a reconcile or finalize.
    pub error_bytes: usize,
    /// Most keys one `map-keys` call may return.
    pub map_keys: usize,
    /// Guest output lines per second forwarded to the host's log.
    pub log_lines_per_second: u32,
    /// Instances of the guest alive at once: its share of the host's pool.
    pub instances: u32,
    /// Whether a trap's message keeps the wasm backtrace (off: the trap alone).
    pub backtrace: bool,
}

impl From<crate::config::Limits> for CallLimits {
    /// The limits of a module's configuration; a size beyond the address space is capped to it.
    fn from(limits: crate::config::Limits) -> Self {
        let size = |bytes: u64| usize::try_from(bytes).unwrap_or(usize::MAX);
        Self {
            timeout: limits.timeout,
            memory_bytes: size(limits.memory_bytes),
            host_call_timeout: limits.host_call_timeout,
            write_bytes: size(limits.write_bytes),
            log_bytes: size(limits.log_bytes),
            error_bytes: size(limits.error_bytes),
            map_keys: size(limits.map_keys.into()),
            log_lines_per_second: limits.log_lines_per_second,
            instances: limits.instances,
            backtrace: false,
        }
    }
}

impl Default for CallLimits {
    /// The configuration's defaults.
    fn default() -> Self {
        crate::config::Limits::default().into()
    }
}

/// How much a guest may write to stdout or stderr in one `write`; it writes more in chunks.
const WRITE_PERMIT: usize = 64 * 1024;

/// How often at most the lines dropped by a guest's rate limit are summarized.
pub const SUMMARY_INTERVAL: Duration = Duration::from_secs(1);

/// A request over its cap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} of {size} bytes exceeds the limit of {limit}")]
pub struct Exceeded {
    /// What was too large, e.g. `object` or `patch`.
    pub what: &'static str,
    /// Its size in bytes.
    pub size: usize,
    /// The cap in bytes.
    pub limit: usize,
}

/// Checks that `text` (the JSON of a write) is at most `limit` bytes.
pub fn check_size(what: &'static str, text: &str, limit: usize) -> Result<(), Exceeded> {
    if text.len() > limit {
        Err(Exceeded {
            what,
            size: text.len(),
            limit,
        })
    } else {
        Ok(())
    }
}

/// `text` cut to at most `limit` bytes at a character boundary, with a note of how much was
/// cut appended; `text` itself when it fits.
pub fn truncate(mut text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = text.len() - end;
    text.truncate(end);
    text.push_str(&format!("… ({cut} more bytes cut)"));
    text
}

/// What a guest wrote to one stream in one call, up to a capacity.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Captured {
    /// The first bytes written, at most the capacity.
    pub bytes: Vec<u8>,
    /// How many bytes were written beyond the capacity and dropped.
    pub dropped: usize,
}

/// A guest's stdout or stderr for one call: keeps the first `capacity` bytes and drops the
/// rest, while every write succeeds.
#[derive(Debug, Clone)]
pub struct Capture {
    capacity: usize,
    captured: Arc<Mutex<Captured>>,
}

impl Capture {
    /// An empty capture keeping at most `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            captured: Arc::default(),
        }
    }

    /// What was written so far.
    pub fn contents(&self) -> Captured {
        self.captured
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn keep(&self, bytes: &[u8]) {
        let mut captured = self.captured.lock().unwrap_or_else(PoisonError::into_inner);
        let room = self.capacity.saturating_sub(captured.bytes.len());
        let kept = bytes.len().min(room);
        captured.bytes.extend_from_slice(&bytes[..kept]);
        captured.dropped += bytes.len() - kept;
    }
}

#[async_trait::async_trait]
impl OutputStream for Capture {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.keep(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT)
    }
}

#[async_trait::async_trait]
impl Pollable for Capture {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for Capture {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.keep(bytes);
        Poll::Ready(Ok(bytes.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl IsTerminal for Capture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Capture {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

/// What happens to one `log` line under the per-call budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spend {
    /// It fits: forward it.
    Keep,
    /// The first line that does not fit: drop it and say once that output was truncated.
    Truncate,
    /// The budget ran out earlier: drop it silently.
    Drop,
}

/// The bytes of `log` lines one call may still write. Once a line does not fit, every later
/// line is dropped too, so what is kept is a prefix of what the guest logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogBudget {
    remaining: usize,
    exhausted: bool,
}

impl LogBudget {
    /// A budget of `bytes`.
    pub fn new(bytes: usize) -> Self {
        Self {
            remaining: bytes,
            exhausted: false,
        }
    }

    /// Takes a line of `size` bytes from the budget, if it fits.
    pub fn spend(&mut self, size: usize) -> Spend {
        if self.exhausted {
            Spend::Drop
        } else if size <= self.remaining {
            self.remaining -= size;
            Spend::Keep
        } else {
            self.exhausted = true;
            Spend::Truncate
        }
    }
}

/// A token bucket over one guest's lines into the host's log, shared by all its calls.
#[derive(Debug, Default)]
pub struct RateLimit {
    bucket: Mutex<Bucket>,
}

#[derive(Debug, Default)]
struct Bucket {
    tokens: TokenBucket,
    /// Lines dropped since the last summary.
    unreported: u64,
    /// Lines dropped in total.
    dropped: u64,
    reported: Option<Instant>,
}

impl RateLimit {
    /// Whether one more line may go to the host's log at `now`, at `per_second` lines per
    /// second with a burst of as many; a line refused is counted as dropped.
    pub fn admit(&self, per_second: u32, now: Instant) -> bool {
        let mut bucket = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        let rate = f64::from(per_second);
        if bucket.tokens.try_take(rate, rate, now) {
            true
        } else {
            bucket.unreported += 1;
            bucket.dropped += 1;
            false
        }
    }

    /// Whether one more line of `guest` may go to the host's log now; when it may not, logs a
    /// summary of the lines dropped if one is due.
    pub fn forward(&self, guest: &str, per_second: u32) -> bool {
        let now = Instant::now();
        let admitted = self.admit(per_second, now);
        if !admitted {
            self.report(guest, per_second, now);
        }
        admitted
    }

    /// Logs a summary of the lines of `guest` dropped since the last one, if one is due.
    pub fn report(&self, guest: &str, per_second: u32, now: Instant) {
        if let Some(dropped) = self.summary(now) {
            tracing::warn!(
                %guest, dropped,
                "guest output over the rate limit of {per_second} lines per second; \
                 lines dropped since the last report: {dropped}"
            );
        }
    }

    /// How many lines were dropped since the last summary, if any were and the last summary is
    /// at least [`SUMMARY_INTERVAL`] before `now`; the count starts again from zero.
    pub fn summary(&self, now: Instant) -> Option<u64> {
        let mut bucket = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        let due = bucket
            .reported
            .is_none_or(|then| now.saturating_duration_since(then) >= SUMMARY_INTERVAL);
        if bucket.unreported == 0 || !due {
            return None;
        }
        bucket.reported = Some(now);
        Some(std::mem::take(&mut bucket.unreported))
    }

    /// Lines dropped in total.
    pub fn dropped(&self) -> u64 {
        self.bucket
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_over_its_cap_names_both_sizes() {
        assert_eq!(check_size("object", "{}", 2), Ok(()));
        let error = check_size("object", "{\"a\":1}", 4).unwrap_err();
        assert_eq!(
            error.to_string(),
            "object of 7 bytes exceeds the limit of 4"
        );
    }

    #[test]
    fn truncation_keeps_a_prefix_at_a_character_boundary() {
        assert_eq!(truncate("short".into(), 5), "short");
        assert_eq!(truncate("abcdef".into(), 4), "abcd… (2 more bytes cut)");
        // "é" is two bytes: cutting inside it keeps only what precedes it.
        assert_eq!(truncate("aéb".into(), 2), "a… (3 more bytes cut)");
    }

    #[test]
    fn capture_keeps_the_first_bytes_and_counts_the_rest() {
        let mut capture = Capture::new(4);
        assert_eq!(capture.check_write().unwrap(), WRITE_PERMIT);
        capture.write(Bytes::from_static(b"abc")).unwrap();
        capture.write(Bytes::from_static(b"def")).unwrap();
        capture.write(Bytes::from_static(b"ghi")).unwrap();
        assert_eq!(
            capture.contents(),
            Captured {
                bytes: b"abcd".to_vec(),
                dropped: 5
            }
        );
        // Clones share what was captured, as the streams WASI hands out do.
        capture.clone().keep(b"j");
        assert_eq!(capture.contents().dropped, 6);
    }

    #[test]
    fn the_log_budget_keeps_a_prefix_and_notes_truncation_once() {
        let mut budget = LogBudget::new(10);
        assert_eq!(budget.spend(6), Spend::Keep);
        assert_eq!(budget.spend(4), Spend::Keep);
        assert_eq!(budget.spend(1), Spend::Truncate);
        assert_eq!(budget.spend(0), Spend::Drop);
        assert_eq!(budget.spend(1), Spend::Drop);
        // A line too large on its own ends the budget even when smaller ones would fit.
        let mut budget = LogBudget::new(10);
        assert_eq!(budget.spend(11), Spend::Truncate);
        assert_eq!(budget.spend(1), Spend::Drop);
    }

    #[test]
    fn the_rate_limit_allows_a_burst_then_the_rate_and_summarizes_drops() {
        let limit = RateLimit::default();
        let start = Instant::now();
        let admitted = (0..25).filter(|_| limit.admit(10, start)).count();
        assert_eq!(admitted, 10, "a burst of one second's worth");
        assert_eq!(limit.dropped(), 15);
        assert_eq!(limit.summary(start), Some(15));
        assert_eq!(limit.summary(start), None, "nothing new to report");
        // Half a second earns five lines.
        let later = start + Duration::from_millis(500);
        let admitted = (0..8).filter(|_| limit.admit(10, later)).count();
        assert_eq!(admitted, 5);
        assert_eq!(limit.summary(later), None, "at most one summary a second");
        let second = start + SUMMARY_INTERVAL;
        assert_eq!(limit.summary(second), Some(3));
        assert_eq!(limit.dropped(), 18);
        // A long pause refills the bucket only up to its burst.
        let idle = second + Duration::from_secs(60);
        let admitted = (0..20).filter(|_| limit.admit(10, idle)).count();
        assert_eq!(admitted, 10);
    }
}
