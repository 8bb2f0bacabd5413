//! `kubewasm-bench`: kubewasm against a native kube-rs controller and a Go controller-runtime
//! controller, all running the same "copy" logic, on one local control plane in one run.
//! See `docs/benchmarks.md`.

mod apiserver;
mod bench;
mod cli;
mod cluster;
mod controllers;
mod host_metrics;
mod load;
mod machine;
mod observer;
mod procfs;
mod report;
mod sequence;
mod stats;
mod workloads;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Parser;
use kubewasm_tests::Language;

use crate::bench::Bench;
use crate::cli::{Args, Plan, Workload};
use crate::cluster::ControlPlane;
use crate::controllers::{Binaries, Implementation, Launcher};
use crate::machine::{Machine, Versions};
use crate::observer::Observer;
use crate::report::Results;
use crate::sequence::Run;

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let plan = Plan::from(&args);
    let repo = repo_root();
    let binaries = Binaries {
        kubewasm: existing(&repo, &args.kubewasm)?,
        guest: existing(&repo, &args.guest)?,
        cache_guest: existing(&repo, &args.cache_guest)?,
        native: existing(&repo, &args.native)?,
        controller_runtime: args
            .controller_runtime
            .as_deref()
            .map(|path| existing(&repo, path))
            .transpose()?,
        podset: if plan.runs(Workload::Failover) || plan.runs(Workload::Density) {
            [
                (Language::Rust, &args.podset_rust),
                (Language::JavaScript, &args.podset_js),
                (Language::Python, &args.podset_python),
                (Language::Go, &args.podset_go),
            ]
            .into_iter()
            .map(|(language, path)| Ok((language, existing(&repo, path)?)))
            .collect::<Result<_>>()?
        } else {
            Vec::new()
        },
    };
    let work = repo.join(&args.work);
    if work.exists() {
        std::fs::remove_dir_all(&work).with_context(|| format!("emptying {}", work.display()))?;
    }
    std::fs::create_dir_all(&work)?;
    anyhow::ensure!(
        binaries.controller_runtime.is_some()
            || !plan
                .implementations
                .contains(&Implementation::ControllerRuntime),
        "--controller-runtime is needed to benchmark controller-runtime"
    );
    let out = repo.join(&args.out);
    let machine = Machine::this();

    let plane = tokio::task::block_in_place(|| ControlPlane::start(&work.join("cluster")))?;
    let client = plane.client().await?;
    let versions = Versions::of(&repo, apiserver::version(&client).await?);
    let observer = Arc::new(Observer::start(client.clone()).await?);
    let launcher = Launcher::new(binaries, plane.kubeconfig(), &work);
    let bench = Bench {
        plan: plan.clone(),
        plane,
        client,
        observer,
        launcher,
    };
    let results = Results {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        machine,
        versions,
        plan,
        dispatch: None,
        namespace: None,
        convergence: Vec::new(),
        churn: Vec::new(),
        idle_resync: Vec::new(),
        hot_reload: None,
        scale: Vec::new(),
        cache: Vec::new(),
        failover: Vec::new(),
        shards: Vec::new(),
        density: Vec::new(),
        errors: Vec::new(),
        ratios: Vec::new(),
    };

    let mut run = Run::new(results, out);
    run.all(&bench, &repo, &work).await?;
    run.finish()
}

/// `path` resolved against the repository, if it exists.
fn existing(repo: &Path, path: &Path) -> Result<PathBuf> {
    let path = repo.join(path);
    anyhow::ensure!(
        path.exists(),
        "{} does not exist; bench/run builds it",
        path.display()
    );
    Ok(path)
}

/// The repository's root folder: relative paths of the arguments resolve against it.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("bench/harness is two levels below the root")
        .to_path_buf()
}
