//! Command-line arguments and the plan of a run they select.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use serde::Serialize;

use crate::controllers::Implementation;

/// Benchmarks kubewasm against a native kube-rs controller and a controller-runtime controller
/// on a local control plane of its own. Prints a table of ratios against the targets and writes
/// every number as JSON. Usually run through `bench/run`, which builds what it needs.
#[derive(Debug, Parser)]
#[command(name = "kubewasm-bench")]
pub struct Args {
    /// Objects of the cold convergence runs, comma-separated [default: 1000,10000; quick: 300].
    #[arg(long, value_delimiter = ',')]
    pub objects: Option<Vec<usize>>,
    /// A smoke run of a few minutes: small sizes and short windows; explicit sizes still win.
    #[arg(long)]
    pub quick: bool,
    /// Where the results are written as JSON.
    #[arg(long, default_value = "target/bench/results.json")]
    pub out: PathBuf,
    /// Work folder for the control plane, configurations and logs; emptied first.
    #[arg(long, default_value = "target/bench/work")]
    pub work: PathBuf,
    /// Source updates per second of the churn runs, comma-separated [default: 10,100,300;
    /// quick: 20,100].
    #[arg(long, value_delimiter = ',')]
    pub churn_rates: Option<Vec<u32>>,
    /// Seconds of each churn run [default: 30; quick: 8].
    #[arg(long)]
    pub churn_seconds: Option<u64>,
    /// Sources updated round-robin by the churn runs [default: 100; quick: 50].
    #[arg(long)]
    pub churn_sources: Option<usize>,
    /// Resync period of the idle resync runs; the idle window is twice as long plus 2 s
    /// [default: 15; quick: 3].
    #[arg(long)]
    pub resync_seconds: Option<u32>,
    /// Controllers of the scale runs, comma-separated: guests of one host against as many
    /// processes [default: 1,10,100; quick: 1,10].
    #[arg(long, value_delimiter = ',')]
    pub scale: Option<Vec<usize>>,
    /// Idle seconds of each scale run after convergence [default: 30; quick: 5].
    #[arg(long)]
    pub scale_idle_seconds: Option<u64>,
    /// Module swaps during the hot reload run [default: 10; quick: 4].
    #[arg(long)]
    pub swaps: Option<usize>,
    /// An update slower than this is late [default: 1000].
    #[arg(long, default_value_t = 1000)]
    pub late_ms: u64,
    /// ConfigMaps of the cache runs, comma-separated [default: 10000,100000; quick: 1000].
    #[arg(long, value_delimiter = ',')]
    pub cache_configmaps: Option<Vec<usize>>,
    /// Pods of the cache runs, comma-separated [default: 10000; quick: 1000].
    #[arg(long, value_delimiter = ',')]
    pub cache_pods: Option<Vec<usize>>,
    /// Objects the failover runs cache, half PodSets and half their pods, comma-separated
    /// [default: 10000; quick: 1000].
    #[arg(long, value_delimiter = ',')]
    pub failover_objects: Option<Vec<usize>>,
    /// Sources of the sharded convergence runs, comma-separated [default: 10000; quick: 1000].
    #[arg(long, value_delimiter = ',')]
    pub shard_objects: Option<Vec<usize>>,
    /// Sharded hosts of each sharded convergence run, comma-separated; one unsharded host runs
    /// first as the baseline [default: 1,2,3; quick: 1,2].
    #[arg(long, value_delimiter = ',')]
    pub shard_replicas: Option<Vec<usize>>,
    /// WasmControllers of the density runs, comma-separated: each in a namespace of its own, all
    /// run by one host [default: 1,100,1000; quick: 1,20].
    #[arg(long, value_delimiter = ',')]
    pub density: Option<Vec<usize>>,
    /// Idle seconds of each density run after convergence [default: 60; quick: 10].
    #[arg(long)]
    pub density_idle_seconds: Option<u64>,
    /// Sources in each density run's namespaces.
    #[arg(long, default_value_t = 5)]
    pub density_sources: usize,
    /// Updates per second of each density run's latency window, spread over every controller; a
    /// source takes at most two a second, so few controllers take fewer.
    #[arg(long, default_value_t = 100)]
    pub density_rate: u32,
    /// Bytes of payload in each source's data.
    #[arg(long, default_value_t = 256)]
    pub payload_bytes: usize,
    /// Workloads to run, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Workload::ALL)]
    pub workloads: Vec<Workload>,
    /// Controllers to compare, comma-separated; the null writer always runs.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Implementation::CONTROLLERS)]
    pub implementations: Vec<Implementation>,
    /// The release kubewasm binary.
    #[arg(long, default_value = "target/release/kubewasm")]
    pub kubewasm: PathBuf,
    /// The copy guest.
    #[arg(
        long,
        default_value = "target/wasm32-wasip2/release/bench_copy_guest.wasm"
    )]
    pub guest: PathBuf,
    /// The cache-only guest.
    #[arg(
        long,
        default_value = "target/wasm32-wasip2/release/bench_cache_guest.wasm"
    )]
    pub cache_guest: PathBuf,
    /// The podset example's guest in Rust.
    #[arg(long, default_value = "target/wasm32-wasip2/release/podset.wasm")]
    pub podset_rust: PathBuf,
    /// The podset example's guest in JavaScript (printed by examples/podset/js/build).
    #[arg(long, default_value = "target/guests/js/podset.wasm")]
    pub podset_js: PathBuf,
    /// The podset example's guest in Python (printed by examples/podset/python/build).
    #[arg(long, default_value = "target/guests/python/podset.wasm")]
    pub podset_python: PathBuf,
    /// The podset example's guest in Go (printed by examples/podset/go/build).
    #[arg(long, default_value = "target/guests/go/podset.wasm")]
    pub podset_go: PathBuf,
    /// The release bench-native binary.
    #[arg(long, default_value = "target/release/bench-native")]
    pub native: PathBuf,
    /// The controller-runtime binary (printed by bench/controller-runtime/build); needed
    /// when controller-runtime is among the implementations.
    #[arg(long)]
    pub controller_runtime: Option<PathBuf>,
}

/// A workload of the benchmark, in the order a run measures them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// The host's dispatch micro-benchmark.
    Dispatch,
    /// The host's micro-benchmark of a reconcile against the size of its namespace.
    Namespace,
    /// Cold convergence of each object count.
    Convergence,
    /// Update latency at fixed rates.
    Churn,
    /// Writes while idle with a resync period.
    Idle,
    /// kubewasm module swaps under churn.
    Reload,
    /// Many guests against many processes.
    Scale,
    /// Bytes per cached object, every informer cache side by side.
    Cache,
    /// kubewasm leader failover, from a warm standby and from a cold start.
    Failover,
    /// kubewasm convergence with the keys shared by sharded replicas.
    Shards,
    /// kubewasm with many WasmControllers, each confined to a namespace of its own.
    Density,
}

impl Workload {
    /// Every workload.
    pub const ALL: [Workload; 11] = [
        Self::Dispatch,
        Self::Namespace,
        Self::Convergence,
        Self::Churn,
        Self::Idle,
        Self::Reload,
        Self::Scale,
        Self::Cache,
        Self::Failover,
        Self::Shards,
        Self::Density,
    ];
}

/// The sizes and windows of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// Whether the quick defaults apply.
    pub quick: bool,
    /// Sources of each cold convergence run.
    pub objects: Vec<usize>,
    /// Bytes of payload in each source.
    pub payload_bytes: usize,
    /// Updates per second of each churn run.
    pub churn_rates: Vec<u32>,
    /// Length of each churn run.
    pub churn_seconds: u64,
    /// Sources of the churn and hot reload runs.
    pub churn_sources: usize,
    /// Sources of the idle resync runs.
    pub idle_sources: usize,
    /// Resync period of the idle resync runs.
    pub resync_seconds: u32,
    /// Controller counts of the scale runs.
    pub scale: Vec<usize>,
    /// Sources per controller in the scale runs.
    pub scale_sources: usize,
    /// Idle window of each scale run.
    pub scale_idle_seconds: u64,
    /// Module swaps of the hot reload run.
    pub swaps: usize,
    /// Time between two swaps.
    pub swap_interval_ms: u64,
    /// Latency above which an update of the hot reload run is late.
    pub late_ms: u64,
    /// ConfigMaps of each cache run.
    pub cache_configmaps: Vec<usize>,
    /// Pods of each cache run.
    pub cache_pods: Vec<usize>,
    /// Cached objects of each failover run.
    pub failover_objects: Vec<usize>,
    /// Sources of each sharded convergence run.
    pub shard_objects: Vec<usize>,
    /// Sharded hosts of each sharded convergence run.
    pub shard_replicas: Vec<usize>,
    /// WasmControllers of each density run.
    pub density: Vec<usize>,
    /// Sources in each density run's namespaces.
    pub density_sources: usize,
    /// Idle window of each density run.
    pub density_idle_seconds: u64,
    /// Updates per second, spread over every controller, of each density run.
    pub density_rate: u32,
    /// The workloads to run.
    pub workloads: Vec<Workload>,
    /// The controllers to compare.
    pub implementations: Vec<Implementation>,
}

impl Plan {
    /// The plan `args` ask for: explicit values, else the quick or the full defaults.
    pub fn from(args: &Args) -> Self {
        let quick = args.quick;
        Self {
            quick,
            objects: args
                .objects
                .clone()
                .unwrap_or_else(|| pick(quick, vec![300], vec![1000, 10_000])),
            payload_bytes: args.payload_bytes,
            churn_rates: args
                .churn_rates
                .clone()
                .unwrap_or_else(|| pick(quick, vec![20, 100], vec![10, 100, 300])),
            churn_seconds: args.churn_seconds.unwrap_or(pick(quick, 8, 30)),
            churn_sources: args.churn_sources.unwrap_or(pick(quick, 50, 100)),
            idle_sources: pick(quick, 50, 100),
            resync_seconds: args.resync_seconds.unwrap_or(pick(quick, 3, 15)),
            scale: args
                .scale
                .clone()
                .unwrap_or_else(|| pick(quick, vec![1, 10], vec![1, 10, 100])),
            scale_sources: pick(quick, 3, 5),
            scale_idle_seconds: args.scale_idle_seconds.unwrap_or(pick(quick, 5, 30)),
            swaps: args.swaps.unwrap_or(pick(quick, 4, 10)),
            swap_interval_ms: pick(quick, 1500, 2500),
            late_ms: args.late_ms,
            cache_configmaps: args
                .cache_configmaps
                .clone()
                .unwrap_or_else(|| pick(quick, vec![1000], vec![10_000, 100_000])),
            cache_pods: args
                .cache_pods
                .clone()
                .unwrap_or_else(|| pick(quick, vec![1000], vec![10_000])),
            failover_objects: args
                .failover_objects
                .clone()
                .unwrap_or_else(|| pick(quick, vec![1000], vec![10_000])),
            shard_objects: args
                .shard_objects
                .clone()
                .unwrap_or_else(|| pick(quick, vec![1000], vec![10_000])),
            shard_replicas: args
                .shard_replicas
                .clone()
                .unwrap_or_else(|| pick(quick, vec![1, 2], vec![1, 2, 3])),
            density: args
                .density
                .clone()
                .unwrap_or_else(|| pick(quick, vec![1, 20], vec![1, 100, 1000])),
            density_sources: args.density_sources,
            density_idle_seconds: args.density_idle_seconds.unwrap_or(pick(quick, 10, 60)),
            density_rate: args.density_rate,
            workloads: args.workloads.clone(),
            implementations: args.implementations.clone(),
        }
    }

    /// Whether the run measures `workload`.
    pub fn runs(&self, workload: Workload) -> bool {
        self.workloads.contains(&workload)
    }

    /// The idle window of the idle resync runs: every key resyncs at least twice in it.
    pub fn idle_window(&self) -> Duration {
        Duration::from_secs(2 * u64::from(self.resync_seconds) + 2)
    }
}

/// `quick_value` for a quick run, else `full_value`.
fn pick<T>(quick: bool, quick_value: T, full_value: T) -> T {
    if quick { quick_value } else { full_value }
}
