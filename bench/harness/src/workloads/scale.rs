//! Many controllers: K namespaces with a few sources each, reconciled by one kubewasm host with
//! K guests, or by K native processes. Usage is taken after convergence and an idle window.

use std::time::Duration;

use anyhow::Result;
use serde::Serialize;
use tokio::time::Instant;

use crate::bench::{Bench, report_unclean};
use crate::controllers::{Implementation, RunOptions};
use crate::load::{self, Source};
use crate::procfs::{self, Usage};

/// The share of available memory K processes may be expected to take before they are
/// extrapolated instead of run.
const MEMORY_SHARE: f64 = 0.5;

/// One run of K controllers.
#[derive(Debug, Clone, Serialize)]
pub struct Scale {
    pub implementation: Implementation,
    /// Controllers: guests of one host, or processes.
    pub controllers: usize,
    pub processes: usize,
    pub sources_per_controller: usize,
    /// From the start of the processes to the last child.
    pub converge_seconds: f64,
    /// Every process at the end of the idle window.
    pub usage: Usage,
    /// CPU seconds of every process in the idle window.
    pub idle_cpu_seconds: f64,
    pub idle_seconds: f64,
    /// Figures projected from the smaller runs, because K processes would not fit in memory.
    pub extrapolated: bool,
}

/// Runs each controller count of the plan, smallest first.
pub async fn run(bench: &Bench, implementation: Implementation) -> Result<Vec<Scale>> {
    let mut counts = bench.plan.scale.clone();
    counts.sort_unstable();
    let mut results: Vec<Scale> = Vec::new();
    for count in counts {
        let result = match too_big(implementation, &results, count)? {
            Some(projected) => projected,
            None => measure(bench, implementation, count).await?,
        };
        println!(
            "scale {:<20} {count:>4} controllers in {:>4} processes: rss {:>8.1} MiB, idle cpu {:.2} s{}",
            implementation.name(),
            result.processes,
            result.usage.rss_bytes as f64 / MIB,
            result.idle_cpu_seconds,
            if result.extrapolated {
                " (extrapolated)"
            } else {
                ""
            }
        );
        results.push(result);
    }
    Ok(results)
}

/// Bytes in a MiB.
pub const MIB: f64 = 1024.0 * 1024.0;

/// A projection of `count` processes from the two largest runs so far, if running them would
/// take more than [`MEMORY_SHARE`] of the available memory.
fn too_big(implementation: Implementation, done: &[Scale], count: usize) -> Result<Option<Scale>> {
    let [.., smaller, larger] = done else {
        return Ok(None);
    };
    if implementation == Implementation::Kubewasm {
        return Ok(None);
    }
    let per_process = larger.usage.peak_rss_bytes as f64 / larger.processes as f64;
    if per_process * count as f64 <= MEMORY_SHARE * procfs::memory_available()? as f64 {
        return Ok(None);
    }
    let extra =
        (count - larger.controllers) as f64 / (larger.controllers - smaller.controllers) as f64;
    let project = |small: f64, large: f64| large + (large - small) * extra;
    let bytes = |field: fn(&Usage) -> u64| {
        project(field(&smaller.usage) as f64, field(&larger.usage) as f64) as u64
    };
    Ok(Some(Scale {
        implementation,
        controllers: count,
        processes: count,
        sources_per_controller: larger.sources_per_controller,
        converge_seconds: larger.converge_seconds,
        usage: Usage {
            rss_bytes: bytes(|u| u.rss_bytes),
            peak_rss_bytes: bytes(|u| u.peak_rss_bytes),
            rss_anon_bytes: bytes(|u| u.rss_anon_bytes),
            rss_file_bytes: bytes(|u| u.rss_file_bytes),
            pss_bytes: bytes(|u| u.pss_bytes),
            cpu_seconds: project(smaller.usage.cpu_seconds, larger.usage.cpu_seconds),
        },
        idle_cpu_seconds: project(smaller.idle_cpu_seconds, larger.idle_cpu_seconds),
        idle_seconds: larger.idle_seconds,
        extrapolated: true,
    }))
}

async fn measure(bench: &Bench, implementation: Implementation, count: usize) -> Result<Scale> {
    let namespaces: Vec<String> = (0..count)
        .map(|index| format!("scale-{}-{count}-{index}", implementation.name()))
        .collect();
    let mut sources: Vec<Vec<Source>> = Vec::new();
    for namespace in &namespaces {
        sources.push(bench.sources(namespace, bench.plan.scale_sources).await?);
    }
    let start = Instant::now();
    let label = format!("scale-{count}");
    let mut controllers =
        bench
            .launcher
            .start(implementation, &label, &namespaces, &RunOptions::default())?;
    let mut done = start;
    for (namespace, sources) in namespaces.iter().zip(&sources) {
        let span = bench
            .converged(namespace, sources, Some(&mut controllers))
            .await?;
        done = done.max(span.last);
    }
    let converged = controllers.usage()?;
    let idle = Duration::from_secs(bench.plan.scale_idle_seconds);
    tokio::time::sleep(idle).await;
    controllers.check_running()?;
    let usage = controllers.usage()?;
    let processes = controllers.processes();
    report_unclean(&controllers.stop().await?);
    load::delete_namespaces(&bench.client, &namespaces).await?;
    Ok(Scale {
        implementation,
        controllers: count,
        processes,
        sources_per_controller: bench.plan.scale_sources,
        converge_seconds: (done - start).as_secs_f64(),
        usage,
        idle_cpu_seconds: usage.cpu_seconds - converged.cpu_seconds,
        idle_seconds: idle.as_secs_f64(),
        extrapolated: false,
    })
}
