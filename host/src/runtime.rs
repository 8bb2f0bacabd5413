//! The WebAssembly runtime: one engine per process, one linker per contract version, and a
//! fresh store per call with a wall-clock deadline and a memory limit.
//!
//! This is the only module that configures wasmtime. The engine interrupts guests with epochs
//! ticked by a background thread that holds only a weak reference to the engine, so dropping
//! the runtime stops the thread. Guests get WASI with no filesystem, network, environment or
//! arguments; their stdout and stderr are captured into bounded buffers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, StoreLimits,
    StoreLimitsBuilder, UpdateDeadline,
};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings::Controller;
use crate::imports::CallContext;

/// How often the epoch advances: the granularity of deadlines and of yielding to other tasks.
pub const TICK: Duration = Duration::from_millis(5);

/// How many bytes of a guest's stdout and stderr are kept per call.
pub const OUTPUT_CAPACITY: usize = 64 * 1024;

/// Errors of the runtime itself.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The engine could not be created with the requested configuration.
    #[error("creating the WebAssembly engine: {0}")]
    Engine(#[source] wasmtime::Error),
    /// The host imports could not be linked.
    #[error("linking host imports: {0}")]
    Link(#[source] wasmtime::Error),
}

/// Limits applied to every call into a guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock deadline of one call, including time spent in host imports.
    pub timeout: Duration,
    /// Maximum size of the guest's linear memories, in bytes.
    pub memory_bytes: usize,
    /// Deadline of one host import that talks to the API server.
    pub host_call_timeout: Duration,
}

/// What a store carries for one call: WASI state, limits and the guest's view of the host.
pub struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: StoreLimits,
    /// The guest's context: its cache, its writer, its permissions and the request's scope.
    pub context: CallContext,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
}

impl CallState {
    /// What the guest wrote to stdout and stderr, each cut at [`OUTPUT_CAPACITY`].
    pub fn output(&self) -> (bytes::Bytes, bytes::Bytes) {
        (self.stdout.contents(), self.stderr.contents())
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

/// The engine and linker shared by every module.
///
/// **Warning:** the epoch ticker is a thread; create one runtime per process.
#[derive(Clone)]
pub struct Runtime {
    engine: Engine,
    linker: Arc<Linker<CallState>>,
}

impl Runtime {
    /// Creates the engine (pooling allocator when the system allows it, on-demand otherwise),
    /// links WASI and the controller imports, and starts the epoch ticker.
    pub fn new() -> Result<Self, RuntimeError> {
        let engine = match Engine::new(&config(true)) {
            Ok(engine) => engine,
            Err(error) => {
                tracing::warn!(%error, "pooling allocator unavailable; using on-demand allocation");
                Engine::new(&config(false)).map_err(RuntimeError::Engine)?
            }
        };
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(RuntimeError::Link)?;
        Controller::add_to_linker::<_, wasmtime::component::HasSelf<_>>(&mut linker, |state| state)
            .map_err(RuntimeError::Link)?;
        spawn_ticker(&engine);
        Ok(Self {
            engine,
            linker: Arc::new(linker),
        })
    }

    /// The linker with every import a guest may use.
    pub fn linker(&self) -> &Linker<CallState> {
        &self.linker
    }

    /// Compiles component bytes. CPU-heavy: call it off the async executor.
    pub fn compile(&self, bytes: &[u8]) -> wasmtime::Result<Component> {
        Component::new(&self.engine, bytes)
    }

    /// A store for one call. The deadline starts now; every epoch tick before it yields to
    /// other tasks, the first tick after it traps.
    pub fn store(&self, context: CallContext, limits: &Limits) -> Store<CallState> {
        let stdout = MemoryOutputPipe::new(OUTPUT_CAPACITY);
        let stderr = MemoryOutputPipe::new(OUTPUT_CAPACITY);
        let wasi = WasiCtx::builder()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .build();
        let state = CallState {
            wasi,
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new()
                .memory_size(limits.memory_bytes)
                .instances(32)
                .tables(64)
                .memories(8)
                .trap_on_grow_failure(true)
                .build(),
            context,
            stdout,
            stderr,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limits);
        let deadline = Instant::now() + limits.timeout;
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            if Instant::now() >= deadline {
                Ok(UpdateDeadline::Interrupt)
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });
        store
    }

    /// A store for one call without the safeguards of [`Runtime::store`], to measure what they
    /// cost: no memory limit, no deadline (the epoch deadline lies beyond any run), and stdout
    /// and stderr discarded instead of captured. Not for running guests: nothing bounds them.
    pub fn bare_store(&self, context: CallContext) -> Store<CallState> {
        let state = CallState {
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
            limits: StoreLimits::default(),
            context,
            stdout: MemoryOutputPipe::new(0),
            stderr: MemoryOutputPipe::new(0),
        };
        let mut store = Store::new(&self.engine, state);
        store.set_epoch_deadline(u64::MAX / 2);
        store
    }
}

fn config(pooling: bool) -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    // Synchronous component calls are several times slower with concurrency support on, and
    // the contract has no async functions.
    config.concurrency_support(false);
    if pooling {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(1_000)
            .total_core_instances(4_000)
            .total_memories(2_000)
            .total_tables(4_000)
            .total_stacks(1_000)
            .max_memory_size(1 << 30);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    config
}

fn spawn_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("kubewasm-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(TICK);
            }
        })
        .expect("spawning the epoch thread");
}
