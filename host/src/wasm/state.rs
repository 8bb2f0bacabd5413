//! What a store carries for one call: the guest's context, the call's limits, its WASI state,
//! its captured output, and a resource limiter that records whether a memory could not grow, so
//! that running out of memory is told apart from other traps.

use std::time::Duration;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, StoreLimits};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::wasm::env::CallContext;
use crate::wasm::limits::{Capture, Captured, LogBudget};

/// Limits applied to every call into a guest; see [`crate::config::Limits`] for what each
/// means and its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
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
}

impl From<crate::config::Limits> for Limits {
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
        }
    }
}

impl Default for Limits {
    /// The configuration's defaults.
    fn default() -> Self {
        crate::config::Limits::default().into()
    }
}

/// What a store carries for one call: WASI state, limits and the guest's view of the host.
pub struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    /// The store's resource limiter.
    pub(crate) limiter: Limiter,
    /// The guest's context: its cache, its writer, its permissions and the request's scope.
    pub context: CallContext,
    /// The limits of this call.
    pub limits: Limits,
    /// What the `log` import may still write in this call.
    pub log_budget: LogBudget,
    /// Whether the API server refused, throttled or failed a write of this call: a failure of
    /// the call is then the cluster's, not the module's.
    pub cluster_trouble: bool,
    stdout: Capture,
    stderr: Capture,
}

impl CallState {
    /// The state of a call in `context` under `limits`, with `wasi`, the store's `memory`
    /// limits, and the captures of its stdout and stderr.
    pub(crate) fn new(
        context: CallContext,
        limits: Limits,
        wasi: WasiCtx,
        memory: StoreLimits,
        (stdout, stderr): (Capture, Capture),
    ) -> Self {
        Self {
            wasi,
            table: ResourceTable::new(),
            limiter: Limiter {
                limits: memory,
                memory_exhausted: false,
                memory_bytes: 0,
            },
            context,
            limits,
            log_budget: LogBudget::new(limits.log_bytes),
            cluster_trouble: false,
            stdout,
            stderr,
        }
    }

    /// What the guest wrote to stdout and stderr, each cut at the call's `log_bytes`.
    pub fn output(&self) -> (Captured, Captured) {
        (self.stdout.contents(), self.stderr.contents())
    }

    /// Whether the guest asked for more memory than its limit allows, or a memory could not
    /// grow for another reason, during this call.
    pub fn memory_exhausted(&self) -> bool {
        self.limiter.memory_exhausted
    }

    /// Bytes of linear memory the store's instances hold: every memory's initial size plus
    /// every growth granted so far. Memories never shrink, so this is also the peak.
    pub fn memory_bytes(&self) -> usize {
        self.limiter.memory_bytes
    }
}

/// A store's resource limiter: [`StoreLimits`], remembering whether a memory could not grow.
pub(crate) struct Limiter {
    limits: StoreLimits,
    memory_exhausted: bool,
    memory_bytes: usize,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let grow = self.limits.memory_growing(current, desired, maximum);
        if matches!(grow, Ok(true)) {
            // Creating a memory asks for its initial size with `current` 0.
            self.memory_bytes += desired.saturating_sub(current);
        } else {
            self.memory_exhausted = true;
        }
        grow
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.memory_exhausted = true;
        self.limits.memory_grow_failed(error)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }

    fn tables(&self) -> usize {
        self.limits.tables()
    }

    fn memories(&self) -> usize {
        self.limits.memories()
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}
