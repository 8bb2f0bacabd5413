//! The order of a run's workloads, and the recording of what each one measured: a failed
//! workload is recorded and the run goes on, and the JSON file is rewritten after each.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::bench::Bench;
use crate::cli::Workload;
use crate::controllers::Implementation;
use crate::report::{self, Results};
use crate::workloads::cache::{self, Cacher, Shape};
use crate::workloads::{churn, convergence, density, failover, idle, micro, reload, scale, shards};

/// A run in progress.
pub struct Run {
    /// What it measured so far.
    pub results: Results,
    /// Where the JSON goes.
    pub out: PathBuf,
}

impl Run {
    /// A run recording into `results` and `out`.
    pub fn new(results: Results, out: PathBuf) -> Self {
        Self { results, out }
    }

    /// Runs every workload of the plan.
    pub async fn all(&mut self, bench: &Bench, repo: &Path, work: &Path) -> Result<()> {
        let plan = &bench.plan;
        // First, while nothing else runs on the machine but an idle control plane.
        if plan.runs(Workload::Dispatch) {
            let log = work.join("dispatch.txt");
            let figures = tokio::task::block_in_place(|| micro::run(repo, "dispatch", &log));
            self.keep("dispatch", figures, |r, figures| r.dispatch = Some(figures))?;
        }
        if plan.runs(Workload::Namespace) {
            let log = work.join("namespace.txt");
            let figures = tokio::task::block_in_place(|| micro::run(repo, "namespace", &log));
            self.keep("namespace", figures, |r, figures| {
                r.namespace = Some(figures)
            })?;
        }
        let controllers = &plan.implementations;
        // Both variants of the guest compiled: every kubewasm host starts from the compile cache.
        let mut variants = None;
        if controllers.contains(&Implementation::Kubewasm) {
            let primed = reload::prime(bench).await;
            self.keep("priming the compile cache", primed, |_, primed| {
                variants = Some(primed)
            })?;
            anyhow::ensure!(
                variants.is_some(),
                "the copy guest does not load; see the work folder"
            );
        }
        if plan.runs(Workload::Convergence) {
            for &objects in &plan.objects {
                let runs = convergence::run(bench, objects, controllers).await;
                self.keep(&format!("convergence {objects}"), runs, |r, runs| {
                    r.convergence.extend(runs)
                })?;
            }
        }
        if plan.runs(Workload::Churn) {
            for &implementation in std::iter::once(&Implementation::NullWriter).chain(controllers) {
                let runs = churn::run(bench, implementation).await;
                self.keep(
                    &format!("churn {}", implementation.name()),
                    runs,
                    |r, runs| r.churn.extend(runs),
                )?;
            }
        }
        if plan.runs(Workload::Idle) {
            for &implementation in controllers {
                let run = idle::run(bench, implementation).await;
                self.keep(&format!("idle {}", implementation.name()), run, |r, run| {
                    r.idle_resync.push(run)
                })?;
            }
        }
        if let (true, Some(variants)) = (plan.runs(Workload::Reload), &variants) {
            let run = reload::run(bench, variants).await;
            self.keep("hot reload", run, |r, run| r.hot_reload = Some(run))?;
        }
        if plan.runs(Workload::Scale) {
            for &implementation in controllers {
                let runs = scale::run(bench, implementation).await;
                self.keep(
                    &format!("scale {}", implementation.name()),
                    runs,
                    |r, runs| r.scale.extend(runs),
                )?;
            }
        }
        if plan.runs(Workload::Cache) {
            let cachers: Vec<Cacher> = Cacher::ALL
                .into_iter()
                .filter(|c| controllers.contains(&c.implementation))
                .collect();
            let sizes = (plan
                .cache_configmaps
                .iter()
                .map(|&n| (Shape::Configmaps, n)))
            .chain(plan.cache_pods.iter().map(|&n| (Shape::Pods, n)));
            for (shape, objects) in sizes {
                let run = cache::run(bench, shape, objects, &cachers).await;
                self.keep(
                    &format!("cache {} {objects}", shape.name()),
                    run,
                    |r, run| r.cache.push(run),
                )?;
            }
        }
        if plan.runs(Workload::Failover) && controllers.contains(&Implementation::Kubewasm) {
            for &objects in &plan.failover_objects {
                let runs = failover::run(bench, objects).await;
                self.keep(&format!("failover {objects}"), runs, |r, runs| {
                    r.failover.extend(runs)
                })?;
            }
        }
        if plan.runs(Workload::Shards) && controllers.contains(&Implementation::Kubewasm) {
            for &objects in &plan.shard_objects {
                let runs = shards::run(bench, objects, &plan.shard_replicas).await;
                self.keep(&format!("shards {objects}"), runs, |r, runs| {
                    r.shards.extend(runs)
                })?;
            }
        }
        if plan.runs(Workload::Density) && controllers.contains(&Implementation::Kubewasm) {
            let runs = density::run(bench, repo).await;
            self.keep("density", runs, |r, runs| r.density.extend(runs))?;
        }
        Ok(())
    }

    /// Prints the figures and ratios as Markdown and writes them next to the JSON; fails if a
    /// workload failed.
    pub fn finish(self) -> Result<()> {
        let markdown = report::markdown(&self.results);
        let markdown_out = self.out.with_extension("md");
        std::fs::write(&markdown_out, &markdown)?;
        println!("\n{markdown}");
        println!(
            "results: {} and {}",
            self.out.display(),
            markdown_out.display()
        );
        let failed = self.results.errors.len();
        anyhow::ensure!(failed == 0, "{failed} workloads failed");
        Ok(())
    }

    /// Stores what a workload measured with `store`, or records its error; then writes the
    /// results so far with their ratios.
    fn keep<T>(
        &mut self,
        workload: &str,
        outcome: Result<T>,
        store: impl FnOnce(&mut Results, T),
    ) -> Result<()> {
        match outcome {
            Ok(value) => store(&mut self.results, value),
            Err(error) => {
                eprintln!("error: {workload}: {error:#}");
                self.results.errors.push(format!("{workload}: {error:#}"));
            }
        }
        self.save()
    }

    fn save(&mut self) -> Result<()> {
        self.results.ratios = report::ratios(&self.results);
        if let Some(dir) = self.out.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let json = serde_json::to_string_pretty(&self.results)? + "\n";
        std::fs::write(&self.out, json).with_context(|| format!("writing {}", self.out.display()))
    }
}
