//! What a store carries for one call: the guest's context, the call's limits, its WASI state,
//! its captured output, and a resource limiter that records whether a memory could not grow, so
//! that running out of memory is told apart from other traps.

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, StoreLimits};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::wasm::env::CallContext;
use crate::wasm::limits::{CallLimits, Capture, Captured, LogBudget};

/// What a store carries for one call: WASI state, limits and the guest's view of the host.
pub struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    /// The store's resource limiter.
    pub(crate) limiter: Limiter,
    /// The guest's context: its cache, its writer, its permissions and the request's scope.
    pub context: CallContext,
    /// The limits of this call.
    pub limits: CallLimits,
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
        limits: CallLimits,
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
