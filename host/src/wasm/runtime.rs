//! The WebAssembly runtime: one engine per process, one linker per contract version, and a
//! fresh store per call with a wall-clock deadline and a memory limit.
//!
//! This is the only module that configures wasmtime. The engine interrupts guests with epochs
//! ticked by a background thread that holds only a weak reference to the engine, so dropping
//! the runtime stops the thread. Guests get WASI with no filesystem, network, environment,
//! arguments or stdin, and at most [`MAX_RANDOM_BYTES`] of randomness per call to
//! `get-random-bytes`; their stdout and stderr are captured up to the call's log cap (see
//! [`crate::wasm::limits`]). Each store carries a [`CallState`]. A deterministic runtime also stops
//! their wall clock and seeds their random sources, so that the same call on the same inputs
//! behaves the same every time.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use wasmtime::component::{Component, Linker};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, StoreLimits,
    StoreLimitsBuilder, UpdateDeadline,
};
use wasmtime_wasi::{Deterministic, HostWallClock, WasiCtx};

use crate::wasm::bindings::{GuestPre, kubewasm, v0_1};
use crate::wasm::compile_cache::CompileCache;
use crate::wasm::env::CallContext;
use crate::wasm::evict::Named;
use crate::wasm::limits::CallLimits;
use crate::wasm::limits::Capture;
use crate::wasm::module_bytes::KeyedLocks;
use crate::wasm::state::CallState;
use crate::wasm::{imports, imports_0_1};

/// How often the epoch advances: the granularity of deadlines and of yielding to other tasks.
pub const TICK: Duration = Duration::from_millis(5);

/// The most randomness one `get-random-bytes` call may ask for (64 KiB): seeds and keys need a
/// few dozen bytes, and the host allocates what is asked for before handing it over.
pub const MAX_RANDOM_BYTES: u64 = 64 * 1024;

// Instances, tables and memories one store may create: a component built by `cargo` for
// `wasm32-wasip2` uses a handful of each.
const INSTANCES: usize = 32;
const TABLES: usize = 64;
const MEMORIES: usize = 8;

/// Guest instances alive at once across the host (the pooling allocator's component instances;
/// each may hold up to 4 core instances, 2 memories and 4 tables of the pool). A call waits for
/// one of them before its deadline starts.
pub const HOST_INSTANCES: u32 = 1_000;

/// Elements of one table: the pooling allocator's default, applied to on-demand allocation too.
const TABLE_ELEMENTS: usize = 20_000;

/// The wall-clock time guests of a deterministic runtime see, since the Unix epoch:
/// 2026-01-01T00:00:00Z.
pub const FIXED_WALL_CLOCK: Duration = Duration::from_secs(1_767_225_600);

/// How many bytes the random sources of a deterministic runtime yield before repeating.
const RANDOM_CYCLE: usize = 4096;

/// `wasi:random/insecure-seed` of a deterministic runtime: "kubewasm" twice, in ASCII.
const INSECURE_SEED: u128 = 0x6b75_6265_7761_736d_6b75_6265_7761_736d;

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

/// Links the imports of every contract version the host loads: the generated ones, and the
/// caches linked by hand (see [`imports::link_cache`]).
fn link_contracts(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    kubewasm::controller::types::add_to_linker::<_, HasSelf<_>>(linker, this)?;
    kubewasm::controller::writes::add_to_linker::<_, HasSelf<_>>(linker, this)?;
    kubewasm::controller::events::add_to_linker::<_, HasSelf<_>>(linker, this)?;
    kubewasm::controller::log::add_to_linker::<_, HasSelf<_>>(linker, this)?;
    v0_1::kubewasm::controller::types::add_to_linker::<_, HasSelf<_>>(linker, this)?;
    v0_1::kubewasm::controller::writes::add_to_linker::<_, HasSelf<_>>(linker, this)?;
    v0_1::kubewasm::controller::events::add_to_linker::<_, HasSelf<_>>(linker, this)?;
    v0_1::kubewasm::controller::log::add_to_linker::<_, HasSelf<_>>(linker, this)?;
    imports::link_cache(linker)?;
    imports_0_1::link_cache(linker)
}

/// The host state of an import: the call's own.
fn this(state: &mut CallState) -> &mut CallState {
    state
}

/// The engine and linker shared by every module.
///
/// **Warning:** the epoch ticker is a thread; create one runtime per process.
#[derive(Clone)]
pub struct Runtime {
    engine: Engine,
    linker: Arc<Linker<CallState>>,
    deterministic: bool,
    cache: Option<CompileCache>,
    /// Pre-linked components of live modules, by digest (see [`Runtime::linked`]).
    linked: Arc<Mutex<HashMap<String, Weak<GuestPre<CallState>>>>>,
    /// A lock per digest being linked (see [`Runtime::linking`]).
    linking: KeyedLocks,
    /// The turn to compile (see [`Runtime::compile_turn`]).
    compiling: Arc<tokio::sync::Mutex<()>>,
    /// One permit per instance the pool holds; taken for every call, in arrival order.
    slots: Arc<tokio::sync::Semaphore>,
}

/// A component ready to be linked.
pub struct Compiled {
    /// The component.
    pub component: Component,
    /// Whether it was read from the compile cache instead of compiled.
    pub cached: bool,
}

impl Runtime {
    /// Creates the engine (pooling allocator when the system allows it, on-demand otherwise),
    /// links WASI and the controller imports, and starts the epoch ticker.
    pub fn new() -> Result<Self, RuntimeError> {
        Self::build(false, true)
    }

    /// As [`Runtime::new`] but with epoch interruption off: running guest code is never
    /// interrupted, only the wall-clock timeout of [`within_deadline`] ends a call. For
    /// measuring what epochs cost, never for running guests.
    pub fn without_deadlines() -> Result<Self, RuntimeError> {
        Self::build(false, false)
    }

    /// As [`Runtime::new`], except that every store gives guests a wall clock stopped at
    /// [`FIXED_WALL_CLOCK`] and random sources (secure, insecure and the insecure seed) that
    /// yield the same values in every call. The monotonic clock keeps running, so deadlines and
    /// sleeps behave as usual. For rendering and tests, not for running controllers.
    pub fn deterministic() -> Result<Self, RuntimeError> {
        Self::build(true, true)
    }

    fn build(deterministic: bool, epochs: bool) -> Result<Self, RuntimeError> {
        Self::sized(deterministic, epochs, HOST_INSTANCES)
    }

    /// As [`Runtime::new`], with room for `instances` instances instead of [`HOST_INSTANCES`].
    #[cfg(test)]
    pub(crate) fn with_instances(instances: u32) -> Result<Self, RuntimeError> {
        Self::sized(false, true, instances)
    }

    fn sized(deterministic: bool, epochs: bool, instances: u32) -> Result<Self, RuntimeError> {
        let engine = match Engine::new(&config(true, epochs, instances)) {
            Ok(engine) => engine,
            Err(error) => {
                tracing::warn!(%error, "pooling allocator unavailable; using on-demand allocation");
                Engine::new(&config(false, epochs, instances)).map_err(RuntimeError::Engine)?
            }
        };
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(RuntimeError::Link)?;
        link_contracts(&mut linker).map_err(RuntimeError::Link)?;
        if epochs {
            spawn_ticker(&engine);
        }
        Ok(Self {
            engine,
            linker: Arc::new(linker),
            deterministic,
            cache: None,
            linked: Arc::default(),
            linking: KeyedLocks::default(),
            compiling: Arc::default(),
            slots: Arc::new(tokio::sync::Semaphore::new(instances as usize)),
        })
    }

    /// Waits for room for one more instance: every call holds one for as long as its store
    /// lives. Calls are let in in the order they asked.
    pub async fn slot(&self) -> tokio::sync::OwnedSemaphorePermit {
        self.slots
            .clone()
            .acquire_owned()
            .await
            .expect("the slots are never closed")
    }

    /// Keeps compiled modules in `dir` across restarts (see [`CompileCache`]).
    pub fn with_compile_cache(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.cache = Some(CompileCache::new(dir, &self.engine));
        self
    }

    /// Keeps compiled modules in `dir`, if given (see [`CompileCache`]).
    #[must_use]
    pub fn with_compile_cache_in(self, dir: Option<std::path::PathBuf>) -> Self {
        match dir {
            Some(dir) => self.with_compile_cache(dir),
            None => self,
        }
    }

    /// Bounds the compile cache to `max_bytes`, never removing the modules `named`.
    #[must_use]
    pub fn with_compile_cache_bound(mut self, max_bytes: u64, named: Named) -> Self {
        self.cache = self.cache.map(|c| c.bounded(max_bytes, named));
        self
    }

    /// The linker with every import a guest may use.
    pub fn linker(&self) -> &Linker<CallState> {
        &self.linker
    }

    /// Waits for the turn to compile the bytes with SHA-256 `digest`, unless the compile cache
    /// holds them: compilations run one at a time, in the order asked (each already uses every
    /// core), so that the host's peak memory is that of its largest compilation, not their sum.
    /// Hold the turn through [`Runtime::compile`].
    pub async fn compile_turn(&self, digest: &str) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        if self.cache.as_ref().is_some_and(|cache| cache.holds(digest)) {
            return None;
        }
        Some(self.compiling.clone().lock_owned().await)
    }

    /// Compiles component bytes whose SHA-256 is `digest`, or reads them from the compile
    /// cache, and hands the memory a compilation freed back to the system. CPU-heavy: call it
    /// off the async executor, holding [`Runtime::compile_turn`]. A failure to write the cache
    /// is logged and costs only a later compilation.
    pub fn compile(&self, bytes: &[u8], digest: &str) -> wasmtime::Result<Compiled> {
        if let Some(component) = self
            .cache
            .as_ref()
            .and_then(|c| c.get(&self.engine, digest))
        {
            return Ok(Compiled {
                component,
                cached: true,
            });
        }
        let compiled = Component::new(&self.engine, bytes).map(|c| self.cached_copy(digest, c));
        release_free_memory();
        Ok(Compiled {
            component: compiled?,
            cached: false,
        })
    }

    /// `component` as read back from the compile cache once written there: its linear memories
    /// then start from the entry's pages, mapped copy on write, rather than from a sealed
    /// in-memory file made for this process. `component` itself without a cache, or when it
    /// cannot be written.
    fn cached_copy(&self, digest: &str, component: Component) -> Component {
        let Some(cache) = &self.cache else {
            return component;
        };
        match cache.put(digest, &component) {
            Ok(()) => cache.get(&self.engine, digest).unwrap_or(component),
            Err(error) => {
                tracing::warn!(%error, "compiled module not cached");
                component
            }
        }
    }

    /// The pre-linked component of the bytes with SHA-256 `digest`, while a module loaded from
    /// them is alive: modules of the same bytes share one copy of the compiled code.
    pub fn linked(&self, digest: &str) -> Option<Arc<GuestPre<CallState>>> {
        let linked = self.linked.lock().expect("linked lock");
        linked.get(digest).and_then(Weak::upgrade)
    }

    /// Held while the bytes with SHA-256 `digest` are compiled and linked: a load of the same
    /// bytes waits, then finds them [`Runtime::linked`].
    pub async fn linking(&self, digest: &str) -> tokio::sync::OwnedMutexGuard<()> {
        self.linking.lock(digest.to_owned()).await
    }

    /// Offers `pre`, linked from the bytes with SHA-256 `digest`, to later loads of the same
    /// bytes for as long as a module holds it.
    pub fn share(&self, digest: &str, pre: &Arc<GuestPre<CallState>>) {
        let mut linked = self.linked.lock().expect("linked lock");
        linked.retain(|_, pre| pre.strong_count() > 0);
        linked.insert(digest.to_owned(), Arc::downgrade(pre));
    }

    /// A store for one call. The deadline starts now; every epoch tick before it yields to
    /// other tasks, the first tick after it traps.
    pub fn store(&self, context: CallContext, limits: &CallLimits) -> Store<CallState> {
        let stdout = Capture::new(limits.log_bytes);
        let stderr = Capture::new(limits.log_bytes);
        let mut wasi = WasiCtx::builder();
        // wasmtime-wasi 48 grants none of this by default (no preopens, environment or
        // arguments are added here either); denied explicitly so that a changed default cannot
        // grant it.
        wasi.stdin(tokio::io::empty())
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }))
            .max_random_size(MAX_RANDOM_BYTES);
        if self.deterministic {
            wasi.wall_clock(FixedWallClock)
                .secure_random(Deterministic::new(random_bytes(1)))
                .insecure_random(Deterministic::new(random_bytes(2)))
                .insecure_random_seed(INSECURE_SEED);
        }
        let memory = StoreLimitsBuilder::new()
            .memory_size(limits.memory_bytes)
            .table_elements(TABLE_ELEMENTS)
            .instances(INSTANCES)
            .tables(TABLES)
            .memories(MEMORIES)
            .trap_on_grow_failure(true)
            .build();
        let state = CallState::new(context, *limits, wasi.build(), memory, (stdout, stderr));
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limiter);
        // A deadline beyond what the clock can count never comes.
        let deadline = Instant::now().checked_add(limits.timeout);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                Ok(UpdateDeadline::Interrupt)
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });
        store
    }

    /// A store for one call without the safeguards of [`Runtime::store`], to measure what they
    /// cost: no memory limit, no deadline (the epoch deadline lies beyond any run), and stdout
    /// and stderr discarded instead of captured. The caps of the imports stay at their
    /// defaults. Not for running guests: nothing bounds them.
    pub fn bare_store(&self, context: CallContext) -> Store<CallState> {
        let state = CallState::new(
            context,
            CallLimits::default(),
            WasiCtx::builder().build(),
            StoreLimits::default(),
            (Capture::new(0), Capture::new(0)),
        );
        let mut store = Store::new(&self.engine, state);
        store.set_epoch_deadline(u64::MAX / 2);
        store
    }
}

/// Runs `call`, a call into a guest of a store made with `limits`, under their wall-clock
/// deadline counted from `start`. Past it, `call` is dropped with the instance it runs and fails
/// as an epoch interruption does ([`wasmtime::Trap::Interrupt`]). Epochs only interrupt running
/// WebAssembly; this also ends a guest that waits in the host, in a WASI sleep or poll.
pub async fn within_deadline<T>(
    limits: &CallLimits,
    start: Instant,
    call: impl Future<Output = wasmtime::Result<T>>,
) -> wasmtime::Result<T> {
    tokio::time::timeout(limits.timeout.saturating_sub(start.elapsed()), call)
        .await
        .unwrap_or_else(|_| Err(wasmtime::Trap::Interrupt.into()))
}

/// The wall clock of a deterministic runtime.
struct FixedWallClock;

impl HostWallClock for FixedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn now(&self) -> Duration {
        FIXED_WALL_CLOCK
    }
}

/// [`RANDOM_CYCLE`] bytes of the splitmix64 sequence starting at `seed`.
fn random_bytes(mut seed: u64) -> Vec<u8> {
    (0..RANDOM_CYCLE / 8)
        .flat_map(|_| splitmix64(&mut seed).to_le_bytes())
        .collect()
}

/// The next value of Vigna's splitmix64 generator.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Hands the allocator's free pages back to the system. Compiling a large module frees hundreds
/// of MiB across the allocator's arenas, which it would keep otherwise: a host that had compiled
/// the podset example in JavaScript, Python and Go held 466 MiB more resident for good.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn release_free_memory() {
    // SAFETY: `malloc_trim` takes no pointers; it only releases pages of free chunks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Other allocators hand free pages back on their own.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_memory() {}

fn config(pooling: bool, epochs: bool, instances: u32) -> Config {
    let mut config = Config::new();
    config.epoch_interruption(epochs);
    // Synchronous component calls are several times slower with concurrency support on, and
    // the contract has no async functions.
    config.concurrency_support(false);
    if pooling {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(instances)
            .total_core_instances(4 * instances)
            .total_memories(2 * instances)
            .total_tables(4 * instances)
            .total_stacks(instances)
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

#[cfg(test)]
mod tests {
    use wasmtime_wasi::cli::WasiCliView;
    use wasmtime_wasi::filesystem::WasiFilesystemView;
    use wasmtime_wasi::p2::bindings::cli::environment::Host as _;
    use wasmtime_wasi::p2::bindings::filesystem::preopens::Host as _;
    use wasmtime_wasi::p2::bindings::sockets::instance_network::Host as _;
    use wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::Host as _;
    use wasmtime_wasi::p2::bindings::sockets::network::IpAddressFamily;
    use wasmtime_wasi::p2::bindings::sockets::tcp_create_socket::Host as _;
    use wasmtime_wasi::p2::bindings::sockets::udp_create_socket::Host as _;
    use wasmtime_wasi::sockets::WasiSocketsView;

    use super::*;

    #[tokio::test]
    async fn compilations_wait_for_each_other_but_reads_of_the_compile_cache_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = Runtime::new().unwrap().with_compile_cache(dir.path());
        let bytes = |export: &str| {
            wat::parse_str(format!(
                r#"(component (core module $m (func (export "{export}"))))"#
            ))
            .unwrap()
        };
        runtime.compile(&bytes("cached"), "cached").unwrap();
        let turn = runtime.compile_turn("new").await;
        assert!(turn.is_some());
        assert!(runtime.compile_turn("cached").await.is_none());
        let waiting = runtime.compile_turn("other");
        let timeout = Duration::from_millis(100);
        assert!(
            tokio::time::timeout(timeout, waiting).await.is_err(),
            "two turns at once"
        );
        drop(turn);
        assert!(runtime.compile_turn("other").await.is_some());
    }

    #[tokio::test]
    async fn memory_bytes_counts_initial_sizes_and_growth() {
        const PAGE: usize = 64 * 1024;
        let runtime = Runtime::new().unwrap();
        let wat = r#"(component
            (core module $m
                (memory 2)
                (func (export "grow") (drop (memory.grow (i32.const 3)))))
            (core instance $i (instantiate $m))
            (func (export "grow") (canon lift (core func $i "grow"))))"#;
        let component = runtime
            .compile(&wat::parse_str(wat).unwrap(), "memory")
            .unwrap()
            .component;
        let mut store = runtime.store(CallContext::for_tests("memory"), &CallLimits::default());
        let instance = Linker::new(&runtime.engine)
            .instantiate_async(&mut store, &component)
            .await
            .unwrap();
        assert_eq!(store.data().memory_bytes(), 2 * PAGE);

        let grow = instance
            .get_typed_func::<(), ()>(&mut store, "grow")
            .unwrap();
        grow.call_async(&mut store, ()).await.unwrap();
        assert_eq!(store.data().memory_bytes(), 5 * PAGE);
    }

    #[tokio::test]
    async fn guests_get_no_filesystem_network_environment_or_arguments() {
        let runtime = Runtime::new().unwrap();
        let context = CallContext::for_tests("sandbox");
        let mut store = runtime.store(context, &CallLimits::default());
        let state = store.data_mut();

        let mut cli = state.cli();
        assert!(cli.get_environment().unwrap().is_empty());
        assert!(cli.get_arguments().unwrap().is_empty());
        assert_eq!(cli.initial_cwd().unwrap(), None);
        assert!(state.filesystem().get_directories().unwrap().is_empty());

        let mut sockets = state.sockets();
        assert!(sockets.create_tcp_socket(IpAddressFamily::Ipv4).is_err());
        assert!(
            sockets
                .create_udp_socket(IpAddressFamily::Ipv6)
                .await
                .is_err()
        );
        let network = sockets.instance_network().unwrap();
        assert!(
            sockets
                .resolve_addresses(network, "localhost".into())
                .is_err()
        );
    }
}
