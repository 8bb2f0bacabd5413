//! Cold convergence: the sources exist, the controller starts, and the clock stops when the
//! last child shows its source's data. The null writer applies the children itself instead.

use std::time::Duration;

use anyhow::Result;
use serde::Serialize;
use tokio::time::Instant;

use crate::bench::{Bench, report_unclean};
use crate::controllers::{CONCURRENCY, Implementation, RunOptions, free_loopback_address};
use crate::host_metrics::HostCounters;
use crate::load::{self, Source};
use crate::procfs::{self, CpuTimes, Usage};

/// Requests the null writer keeps in flight for the machine's write ceiling.
pub const CEILING_CONCURRENCY: usize = 32;

/// One cold convergence.
#[derive(Debug, Clone, Serialize)]
pub struct Convergence {
    pub implementation: Implementation,
    pub objects: usize,
    /// Requests in flight (the null writer) or reconciles at once (controllers).
    pub concurrency: usize,
    /// From the start of the controller process (or the first write) to the last child.
    pub seconds: f64,
    pub objects_per_second: f64,
    /// From the start to the first child: process start, connection, initial lists.
    pub first_child_seconds: f64,
    /// Children per second from the first to the last: the rate once started.
    pub steady_objects_per_second: f64,
    /// The controller process at convergence; none for the null writer.
    pub usage: Option<Usage>,
    /// CPU seconds etcd and kube-apiserver spent in the same time.
    pub control_plane_cpu_seconds: f64,
    /// CPU seconds the harness (load generator and watch) spent in the same time.
    pub harness_cpu_seconds: f64,
    /// How busy the machine's CPUs were in the same time, in percent.
    pub machine_busy_percent: f64,
    /// Children without a controller owner reference to their source.
    pub unowned: usize,
    /// Whether the controller exited cleanly on SIGTERM.
    pub clean_exit: bool,
    /// kubewasm only: the host's reconcile counters at convergence.
    pub host: Option<HostCounters>,
}

/// Converges `objects` sources with the null writer at concurrency 4 and at the ceiling
/// concurrency, then with each of `controllers`.
pub async fn run(
    bench: &Bench,
    objects: usize,
    controllers: &[Implementation],
) -> Result<Vec<Convergence>> {
    let namespace = format!("conv-{objects}");
    let sources = bench.sources(&namespace, objects).await?;
    let mut results = Vec::new();
    let runs = [
        (Implementation::NullWriter, CONCURRENCY as usize),
        (Implementation::NullWriter, CEILING_CONCURRENCY),
    ]
    .into_iter()
    .chain(controllers.iter().map(|&i| (i, CONCURRENCY as usize)));
    for (implementation, concurrency) in runs {
        load::delete_children(&bench.client, &namespace, &bench.observer).await?;
        // Let the deletion's events drain before the clock starts.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let result = converge(bench, implementation, concurrency, &namespace, &sources).await?;
        println!(
            "convergence {objects:>6} {:<20} c={concurrency:<3} {:>8.2} s {:>8.0} objects/s",
            implementation.name(),
            result.seconds,
            result.objects_per_second
        );
        results.push(result);
    }
    load::delete_namespaces(&bench.client, &[namespace]).await?;
    Ok(results)
}

/// The CPU counters read when the last child shows.
struct Busy {
    plane: Usage,
    harness: Usage,
    machine: CpuTimes,
}

impl Busy {
    fn now(bench: &Bench) -> Result<Self> {
        Ok(Self {
            plane: bench.plane.usage()?,
            harness: procfs::usage(std::process::id())?,
            machine: CpuTimes::now()?,
        })
    }
}

async fn converge(
    bench: &Bench,
    implementation: Implementation,
    concurrency: usize,
    namespace: &str,
    sources: &[Source],
) -> Result<Convergence> {
    let plane = bench.plane.usage()?;
    let harness = procfs::usage(std::process::id())?;
    let machine = CpuTimes::now()?;
    let start = Instant::now();
    let (done, busy, usage, clean_exit, host) = if implementation == Implementation::NullWriter {
        load::write_children(&bench.client, namespace, sources, concurrency).await?;
        let done = bench.converged(namespace, sources, None).await?;
        (done, Busy::now(bench)?, None, true, None)
    } else {
        let label = format!("conv-{}", sources.len());
        let namespaces = [namespace.to_owned()];
        let metrics = match implementation {
            Implementation::Kubewasm => Some(free_loopback_address()?),
            _ => None,
        };
        let options = RunOptions {
            metrics,
            ..RunOptions::default()
        };
        let mut controllers =
            bench
                .launcher
                .start(implementation, &label, &namespaces, &options)?;
        let done = bench
            .converged(namespace, sources, Some(&mut controllers))
            .await?;
        let busy = Busy::now(bench)?;
        let usage = controllers.usage()?;
        let host = match metrics {
            Some(address) => Some(HostCounters::read(address).await?),
            None => None,
        };
        let clean = report_unclean(&controllers.stop().await?);
        (done, busy, Some(usage), clean, host)
    };
    let seconds = (done.last - start).as_secs_f64();
    let steady = (done.last - done.first).as_secs_f64();
    Ok(Convergence {
        implementation,
        objects: sources.len(),
        concurrency,
        seconds,
        objects_per_second: sources.len() as f64 / seconds,
        first_child_seconds: (done.first - start).as_secs_f64(),
        steady_objects_per_second: (sources.len() - 1) as f64 / steady,
        usage,
        control_plane_cpu_seconds: busy.plane.cpu_seconds - plane.cpu_seconds,
        harness_cpu_seconds: busy.harness.cpu_seconds - harness.cpu_seconds,
        machine_busy_percent: busy.machine.busy_percent_since(&machine),
        unowned: bench.observer.unowned(namespace, sources),
        clean_exit,
        host,
    })
}
