//! Host overhead of one reconcile: [`dispatch::call`] against a bare call of the same
//! pre-linked component.
//!
//! The guest is the example `podset` controller, `target/wasm32-wasip2/release/podset.wasm`
//! under the workspace (or under `CARGO_TARGET_DIR`), built with cargo when absent. A
//! [`OfflineBackend`] holds one PodSet of about 4 KiB and the pods it controls, as many as its
//! `spec.replicas`, all Pending, so that every reconcile lists the pods and writes nothing but
//! the PodSet's status. The PodSet handed to the guest is the one after a first reconcile, with
//! its status, as in a resync.
//!
//! Each round times every path once. What ran just before a sample shows in it (an
//! instantiation right after a reconcile is several microseconds slower than one right after
//! another instantiation), so the rounds go through every order of the paths in turn and each
//! path follows each other one equally often:
//!
//! - (a) host: `dispatch::call`, i.e. a store from `Runtime::store`, instantiation from the
//!   pre-linked component, `reconcile`, forwarding of the guest's output and mapping of the
//!   result;
//! - (b) bare: a store from `Runtime::bare_store`, instantiation and `reconcile`. It excludes
//!   the memory limiter (consulted whenever an instance, memory or table is created or grows),
//!   the deadline (a clock read when the store is made, then a callback with another clock read
//!   and a yield to the executor whenever an epoch tick lands in the call), the capture of
//!   stdout and stderr (discarded instead) and its forwarding, and `dispatch::call`'s mapping
//!   of the result. It keeps the rest: the same engine, so the same epoch checks compiled into
//!   the guest, the same instance allocator and asynchronous calls; the same linker, so a WASI
//!   context in the store and every import through the permission checks and the host-call
//!   timeout to the same backend;
//! - (b') as (b), with a store from `Runtime::store`: (b') - (b) is what the store's safeguards
//!   cost with the same instantiation and call code, and (a) - (b') what `dispatch::call` adds
//!   around it (forwarding the output, mapping the result, and its own compiled code);
//! - (c) instantiate only: the store (host or bare) and instantiation, without a call.
//!
//! Every sample ends after the store is dropped. Medians and 99th percentiles are nearest-rank
//! over all measured rounds; the overhead rows are differences of those figures.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    PODS, assert_status_only, guest_env, machine, percentile, pod, podset, podset_fixture,
    resync_request, rust_podset,
};
use kubewasm::wasm::backend::Scope;
use kubewasm::wasm::bindings::types;
use kubewasm::wasm::dispatch::{self, Entry, Outcome};
use kubewasm::wasm::env::{CallContext, GuestEnv};
use kubewasm::wasm::limits::CallLimits;
use kubewasm::wasm::module::{self, Module};
use kubewasm::wasm::offline::OfflineBackend;
use kubewasm::wasm::runtime::Runtime;
use kubewasm::wasm::state::CallState;
use serde_json::{Value, json};
use wasmtime::Store;

/// How many orders the paths can run in.
const ORDERS: usize = factorial(PATHS.len());
const WARMUP_ROUNDS: usize = 2 * ORDERS;
const MAX_ROUNDS: usize = 330 * ORDERS;
/// Measuring stops after this long even if fewer than [`MAX_ROUNDS`] rounds ran.
const BUDGET: Duration = Duration::from_secs(45);

const PATHS: [&str; 5] = [
    "(a) host: dispatch::call",
    "(b) bare: store + instantiate + reconcile",
    "(b') as (b) with the host store",
    "(c) instantiate only, host store",
    "(c) instantiate only, bare store",
];

fn main() {
    let wasm = rust_podset();
    let podset = podset();
    println!("kubewasm dispatch benchmark");
    println!("machine: {}", machine());
    println!("guest:   {}", wasm.display());
    println!(
        "fixture: PodSet of {} bytes, {PODS} pods of {} bytes",
        podset.to_string().len(),
        pod(&podset, 0).to_string().len()
    );
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime")
        .block_on(run(&wasm, Arc::new(podset_fixture())));
}

async fn run(wasm: &Path, backend: Arc<OfflineBackend>) {
    let runtime = Runtime::new().expect("a WebAssembly runtime");
    let limits = CallLimits::default();
    let module = module::load(&runtime, wasm, &limits)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (env, scope) = guest_env(&module, backend.clone(), &limits);
    let request = resync_request(&backend, &scope);
    let mut bench = Bench {
        runtime,
        module,
        env,
        backend,
        limits,
        request,
        scope,
    };
    // The first reconcile writes the status; the measured ones see it, as in a resync.
    bench.host().await;
    bench.request = resync_request(&bench.backend, &bench.scope);

    let mut samples: [Vec<Duration>; PATHS.len()] = Default::default();
    let mut order: [usize; PATHS.len()] = std::array::from_fn(|path| path);
    let mut rounds = 0;
    let mut measuring = None;
    while rounds < WARMUP_ROUNDS + MAX_ROUNDS
        && measuring.is_none_or(|start: Instant| start.elapsed() < BUDGET)
    {
        if rounds == WARMUP_ROUNDS {
            measuring = Some(Instant::now());
        }
        for &path in &order {
            let elapsed = match path {
                0 => bench.host().await,
                1 => bench.reconcile(StoreKind::Bare).await,
                2 => bench.reconcile(StoreKind::Host).await,
                3 => bench.instantiate(StoreKind::Host).await,
                _ => bench.instantiate(StoreKind::Bare).await,
            };
            if measuring.is_some() {
                samples[path].push(elapsed);
            }
        }
        next_order(&mut order);
        rounds += 1;
    }
    println!(
        "rounds:  {} measured after {WARMUP_ROUNDS} warm-up rounds, each in one order of the paths",
        rounds - WARMUP_ROUNDS
    );
    println!();
    report(samples);
    epoch_cost(wasm, &bench).await;
}

/// What epoch interruption costs a reconcile: path (b) on the host's engine against the same
/// path on an engine without epochs (no deadline checks compiled into the guest's code),
/// alternated so both see the same conditions.
async fn epoch_cost(wasm: &Path, with_epochs: &Bench) {
    let runtime = Runtime::without_deadlines().expect("a WebAssembly runtime");
    let module = module::load(&runtime, wasm, &with_epochs.limits)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let without_epochs = Bench {
        runtime,
        module,
        env: with_epochs.env.clone(),
        backend: with_epochs.backend.clone(),
        limits: with_epochs.limits,
        scope: with_epochs.scope.clone(),
        request: with_epochs.request.clone(),
    };
    let mut with = Vec::new();
    let mut without = Vec::new();
    let start = Instant::now();
    let mut round = 0usize;
    while start.elapsed() < BUDGET / 3 {
        let first_with = round.is_multiple_of(2);
        for epochs in [first_with, !first_with] {
            if epochs {
                with.push(with_epochs.reconcile(StoreKind::Bare).await);
            } else {
                without.push(without_epochs.reconcile(StoreKind::Bare).await);
            }
        }
        round += 1;
    }
    with.sort();
    without.sort();
    let (with_median, without_median) = (percentile(&with, 0.5), percentile(&without, 0.5));
    println!();
    println!("epoch interruption, path (b), {} rounds:", with.len());
    println!("{:<46} {:>10.1}", "  median µs with epochs", with_median);
    println!(
        "{:<46} {:>10.1}",
        "  median µs without epochs", without_median
    );
    println!(
        "{:<46} {:>10.1} ({:.2}x)",
        "  cost of epochs",
        with_median - without_median,
        with_median / without_median
    );
}

/// Which of the runtime's stores a path uses.
#[derive(Clone, Copy)]
enum StoreKind {
    /// `Runtime::store`, with the call's safeguards.
    Host,
    /// `Runtime::bare_store`, without them.
    Bare,
}

/// Everything one timed path needs.
struct Bench {
    runtime: Runtime,
    module: Arc<Module>,
    env: Arc<GuestEnv>,
    backend: Arc<OfflineBackend>,
    limits: CallLimits,
    scope: Scope,
    request: types::Request,
}

impl Bench {
    async fn host(&self) -> Duration {
        let (scope, request) = (self.scope.clone(), self.request.clone());
        let start = Instant::now();
        let (outcome, _) = dispatch::call(
            &self.runtime,
            &self.module,
            &self.env,
            &self.limits,
            scope,
            Entry::Reconcile,
            request,
        )
        .await;
        let elapsed = start.elapsed();
        assert_eq!(outcome, Ok(Outcome::Done));
        self.check_writes();
        elapsed
    }

    async fn reconcile(&self, kind: StoreKind) -> Duration {
        let (scope, request) = (self.scope.clone(), self.request.clone());
        let start = Instant::now();
        let result = async {
            let mut store = self.store(kind, scope);
            let instance = self.module.pre.instantiate(&mut store).await?;
            instance.reconcile(&mut store, &request, false).await
        }
        .await;
        let elapsed = start.elapsed();
        assert!(
            matches!(result, Ok(Ok(types::Outcome::Done))),
            "reconcile failed: {result:?}"
        );
        self.check_writes();
        elapsed
    }

    async fn instantiate(&self, kind: StoreKind) -> Duration {
        let scope = self.scope.clone();
        let start = Instant::now();
        let mut store = self.store(kind, scope);
        self.module
            .pre
            .instantiate(&mut store)
            .await
            .expect("the guest instantiates");
        drop(store);
        start.elapsed()
    }

    fn store(&self, kind: StoreKind, scope: Scope) -> Store<CallState> {
        let context = CallContext::new(self.env.clone(), Some(scope));
        match kind {
            StoreKind::Host => self.runtime.store(context, &self.limits),
            StoreKind::Bare => self.runtime.bare_store(context),
        }
    }

    /// Asserts that the reconcile wrote the PodSet's status and nothing else.
    fn check_writes(&self) {
        assert_status_only(&self.module.metadata.name, &self.backend);
    }
}

fn report(mut samples: [Vec<Duration>; PATHS.len()]) {
    let stats = samples.each_mut().map(|samples| {
        samples.sort_unstable();
        [percentile(samples, 0.5), percentile(samples, 0.99)]
    });
    println!("{:<44}{:>12}{:>12}", "path", "median µs", "p99 µs");
    for (path, [median, p99]) in PATHS.iter().zip(stats) {
        println!("{path:<44}{median:>12.1}{p99:>12.1}");
    }
    let [host, bare, host_store, ..] = stats;
    let difference = |label: &str, [median, p99]: [f64; 2], [less_median, less_p99]: [f64; 2]| {
        println!(
            "{label:<44}{:>12.1}{:>12.1}",
            median - less_median,
            p99 - less_p99
        );
    };
    difference("overhead (a) - (b)", host, bare);
    println!(
        "{:<44}{:>11.2}x{:>11.2}x",
        "ratio (a) / (b)",
        host[0] / bare[0],
        host[1] / bare[1]
    );
    difference("  of which store safeguards (b') - (b)", host_store, bare);
    difference("  of which dispatch::call (a) - (b')", host, host_store);
    // One line for tools (`bench/harness`): the same figures as JSON.
    let paths: Vec<Value> = PATHS
        .iter()
        .zip(stats)
        .map(|(path, [median, p99])| json!({"path": path, "median_us": median, "p99_us": p99}))
        .collect();
    let overhead = json!({"median_us": host[0] - bare[0], "p99_us": host[1] - bare[1]});
    println!("json: {}", json!({"paths": paths, "overhead": overhead}));
}

const fn factorial(n: usize) -> usize {
    if n <= 1 { 1 } else { n * factorial(n - 1) }
}

/// Advances `order` to the next permutation in lexicographic order, from the last back to the
/// first, so that [`ORDERS`] consecutive rounds run every order once.
fn next_order(order: &mut [usize]) {
    match order.windows(2).rposition(|pair| pair[0] < pair[1]) {
        Some(pivot) => {
            let successor = order
                .iter()
                .rposition(|&path| path > order[pivot])
                .expect("an element after the pivot is greater");
            order.swap(pivot, successor);
            order[pivot + 1..].reverse();
        }
        None => order.reverse(),
    }
}
