//! The PodSet example built in each language, side by side in one run: component size, compile
//! time, linear memory of an instance, and reconcile latency through [`dispatch::call`].
//!
//! `cargo bench -p kubewasm --bench languages [-- LANGUAGE...]` with languages among `rust`,
//! `js`, `python` and `go` (default: all). Rust is the workspace crate `podset`; the others are
//! built by `examples/podset/<language>/build`, which prints the component's path last.
//!
//! Every language runs on the same fixture as the dispatch benchmark: a PodSet of about 4 KiB
//! and its three Pending pods, reconciled as in a resync, where the only write is the status.
//! Each reconcile is checked to make exactly that write, so every port is seen to decide the
//! same. The memory limit is raised to 1 GiB so memory is measured, not capped; the host's
//! default is 64 MiB.
//!
//! - compile: one cold compile (no compile cache) and validation, `module::load`;
//! - memory: the instance's linear memories after instantiation, and after one reconcile;
//! - instantiate and reconcile: median and 99th percentile over the rounds that fit in
//!   [`BUDGET`] (at most [`ROUNDS`]), a fresh instance each, as the host runs every call.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    assert_status_only, guest_env, machine, percentile, podset_fixture, resync_request,
    rust_podset, workspace,
};
use kubewasm::wasm::dispatch::{self, Entry, Outcome};
use kubewasm::wasm::env::CallContext;
use kubewasm::wasm::limits::CallLimits;
use kubewasm::wasm::module;
use kubewasm::wasm::runtime::Runtime;
use serde_json::json;

const LANGUAGES: [&str; 4] = ["rust", "js", "python", "go"];
/// Measuring one language stops after this long even if fewer than [`ROUNDS`] rounds ran.
const BUDGET: Duration = Duration::from_secs(20);
const ROUNDS: usize = 2000;
const WARMUP_ROUNDS: usize = 5;

fn main() {
    let requested: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    let languages: Vec<&str> = if requested.is_empty() {
        LANGUAGES.to_vec()
    } else {
        for language in &requested {
            assert!(
                LANGUAGES.contains(&language.as_str()),
                "unknown language {language}; expected one of {LANGUAGES:?}"
            );
        }
        LANGUAGES
            .into_iter()
            .filter(|language| requested.iter().any(|r| r == language))
            .collect()
    };
    println!("kubewasm languages benchmark");
    println!("machine: {}", machine());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    let rows: Vec<Row> = languages
        .iter()
        .map(|language| {
            let wasm = build(language);
            println!("{language:<8} {}", wasm.display());
            runtime.block_on(measure(language, wasm))
        })
        .collect();
    println!();
    println!(
        "{:<8}{:>10}{:>12}{:>12}{:>12}{:>14}{:>12}{:>14}{:>12}",
        "language",
        "size KiB",
        "compile ms",
        "memory MiB",
        "after MiB",
        "instantiate",
        "p99 µs",
        "reconcile µs",
        "p99 µs"
    );
    for row in &rows {
        println!(
            "{:<8}{:>10.0}{:>12.0}{:>12.1}{:>12.1}{:>14.1}{:>12.1}{:>14.1}{:>12.1}",
            row.language,
            row.size as f64 / 1024.0,
            row.compile.as_secs_f64() * 1e3,
            mib(row.memory_instantiated),
            mib(row.memory_reconciled),
            row.instantiate[0],
            row.instantiate[1],
            row.reconcile[0],
            row.reconcile[1],
        );
    }
    let json: Vec<_> = rows
        .iter()
        .map(|row| {
            json!({
                "language": row.language,
                "size_bytes": row.size,
                "compile_ms": row.compile.as_secs_f64() * 1e3,
                "memory_instantiated_bytes": row.memory_instantiated,
                "memory_reconciled_bytes": row.memory_reconciled,
                "instantiate_us": {"median": row.instantiate[0], "p99": row.instantiate[1]},
                "reconcile_us": {"median": row.reconcile[0], "p99": row.reconcile[1]},
                "rounds": row.rounds,
            })
        })
        .collect();
    println!("json: {}", serde_json::Value::from(json));
}

/// What was measured for one language.
struct Row {
    language: String,
    size: u64,
    compile: Duration,
    memory_instantiated: usize,
    memory_reconciled: usize,
    /// Median and 99th percentile, in microseconds.
    instantiate: [f64; 2],
    reconcile: [f64; 2],
    rounds: usize,
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The podset component of `language`, built from source.
fn build(language: &str) -> PathBuf {
    if language == "rust" {
        return rust_podset();
    }
    let script = workspace().join(format!("examples/podset/{language}/build"));
    let output = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|error| panic!("running {}: {error}", script.display()));
    assert!(
        output.status.success(),
        "{} failed with {}",
        script.display(),
        output.status
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    PathBuf::from(stdout.lines().last().unwrap_or_default())
}

async fn measure(language: &str, wasm: PathBuf) -> Row {
    let size = std::fs::metadata(&wasm)
        .unwrap_or_else(|e| panic!("{}: {e}", wasm.display()))
        .len();
    let runtime = Runtime::new().expect("a WebAssembly runtime");
    let limits = CallLimits {
        memory_bytes: 1 << 30,
        ..CallLimits::default()
    };
    let start = Instant::now();
    let module = module::load(&runtime, &wasm, &limits)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let compile = start.elapsed();

    let backend = Arc::new(podset_fixture());
    let (env, scope) = guest_env(&module, backend.clone(), &limits);
    let context = || CallContext::new(env.clone(), Some(scope.clone()));
    let call = async || {
        let request = resync_request(&backend, &scope);
        let start = Instant::now();
        let (outcome, _) = dispatch::call(
            &runtime,
            &module,
            &env,
            &limits,
            scope.clone(),
            Entry::Reconcile,
            request,
        )
        .await;
        let elapsed = start.elapsed();
        assert_eq!(outcome, Ok(Outcome::Done), "{language}: reconcile failed");
        assert_status_only(language, &backend);
        elapsed
    };
    // The first reconcile writes the status; the measured ones see it, as in a resync.
    call().await;

    let (memory_instantiated, memory_reconciled) = {
        let mut store = runtime.store(context(), &limits);
        let instance = module
            .pre
            .instantiate(&mut store)
            .await
            .expect("the guest instantiates");
        let instantiated = store.data().memory_bytes();
        let result = instance
            .reconcile(&mut store, &resync_request(&backend, &scope), false)
            .await;
        assert!(result.is_ok(), "{language}: reconcile trapped: {result:?}");
        assert_status_only(language, &backend);
        (instantiated, store.data().memory_bytes())
    };

    let mut instantiate = Vec::new();
    let mut reconcile = Vec::new();
    let mut rounds = 0;
    let started = Instant::now();
    while rounds < WARMUP_ROUNDS + ROUNDS && started.elapsed() < BUDGET {
        let start = Instant::now();
        let store = {
            let mut store = runtime.store(context(), &limits);
            module
                .pre
                .instantiate(&mut store)
                .await
                .expect("the guest instantiates");
            store
        };
        drop(store);
        let instantiated = start.elapsed();
        let reconciled = call().await;
        if rounds >= WARMUP_ROUNDS {
            instantiate.push(instantiated);
            reconcile.push(reconciled);
        }
        rounds += 1;
    }
    instantiate.sort_unstable();
    reconcile.sort_unstable();
    let stats = |samples: &[Duration]| [percentile(samples, 0.5), percentile(samples, 0.99)];
    Row {
        language: language.to_owned(),
        size,
        compile,
        memory_instantiated,
        memory_reconciled,
        instantiate: stats(&instantiate),
        reconcile: stats(&reconcile),
        rounds: reconcile.len(),
    }
}
