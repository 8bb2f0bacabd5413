//! Idle resync: a converged controller with a resync period is left alone for twice that
//! period, and the API server counts the ConfigMap writes it receives meanwhile. For kubewasm
//! the host's own metrics show that the resyncs did happen and that their applies were elided.

use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use crate::apiserver;
use crate::bench::{Bench, report_unclean};
use crate::controllers::{Implementation, RunOptions, free_loopback_address};
use crate::host_metrics::HostCounters;
use crate::load;

/// One idle resync run.
#[derive(Debug, Clone, Serialize)]
pub struct IdleResync {
    pub implementation: Implementation,
    pub sources: usize,
    pub resync_seconds: u32,
    pub idle_seconds: f64,
    /// Mutating ConfigMap requests the API server served in the idle window.
    pub writes: u64,
    /// kubewasm only: the host's reconcile counters over the idle window, showing that the
    /// resyncs ran and their applies were elided.
    pub host: Option<HostCounters>,
}

/// Measures the idle writes of one controller.
pub async fn run(bench: &Bench, implementation: Implementation) -> Result<IdleResync> {
    let namespace = format!("idle-{}", implementation.name());
    let sources = bench.sources(&namespace, bench.plan.idle_sources).await?;
    let metrics = match implementation {
        Implementation::Kubewasm => Some(free_loopback_address()?),
        _ => None,
    };
    let options = RunOptions {
        resync_seconds: bench.plan.resync_seconds,
        metrics,
        ..RunOptions::default()
    };
    let mut controllers = bench.launcher.start(
        implementation,
        "idle",
        std::slice::from_ref(&namespace),
        &options,
    )?;
    bench
        .converged(&namespace, &sources, Some(&mut controllers))
        .await?;
    // Let the reconciles that the controller's own writes trigger finish.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let window = bench.plan.idle_window();
    let writes = apiserver::configmap_writes(&bench.client).await?;
    let counters = match metrics {
        Some(address) => Some(HostCounters::read(address).await?),
        None => None,
    };
    tokio::time::sleep(window).await;
    let writes = apiserver::configmap_writes(&bench.client).await? - writes;
    let host = match (metrics, counters) {
        (Some(address), Some(before)) => Some(HostCounters::read(address).await?.since(&before)),
        _ => None,
    };
    controllers.check_running()?;
    report_unclean(&controllers.stop().await?);
    load::delete_namespaces(&bench.client, &[namespace]).await?;
    let result = IdleResync {
        implementation,
        sources: sources.len(),
        resync_seconds: bench.plan.resync_seconds,
        idle_seconds: window.as_secs_f64(),
        writes,
        host,
    };
    println!(
        "idle resync {:<20} {} writes in {:.0} s{}",
        implementation.name(),
        result.writes,
        result.idle_seconds,
        host.map_or_else(String::new, |h| format!(
            " ({} reconciles, {} applies elided)",
            h.reconciles, h.writes_elided
        ))
    );
    Ok(result)
}
