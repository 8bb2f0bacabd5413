//! Churn: with the controller running and converged, sources are updated round-robin at a
//! fixed rate, and each update's latency runs from just before its apply is sent to when the
//! watch shows its child with that update (or a later one). The null writer applies each child
//! itself right after its source.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use serde::Serialize;
use tokio::sync::{Mutex, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::bench::{Bench, report_unclean};
use crate::controllers::{CONCURRENCY, Implementation, RunOptions};
use crate::load::{self, Source};
use crate::observer::poll;
use crate::stats::Latencies;

/// Updates in flight at most; more means the API server cannot keep up with the rate.
const MAX_IN_FLIGHT: usize = 256;
/// How long after the last update every source's last update must have reached its child.
const DRAIN: Duration = Duration::from_secs(60);

/// One churn run at one rate.
#[derive(Debug, Clone, Serialize)]
pub struct Churn {
    pub implementation: Implementation,
    /// The rate asked for.
    pub rate_per_second: u32,
    /// The rate the load generator sent at.
    pub sent_per_second: f64,
    pub sources: usize,
    pub latency: Latencies,
    /// Sources whose last update never reached their child within a minute.
    pub lost: usize,
}

/// What one load window produced.
pub struct Load {
    /// Updates sent per second.
    pub sent_per_second: f64,
    /// Latency of every update that reached its child.
    pub latencies: Vec<Duration>,
    /// Sources whose last update never reached their child.
    pub lost: usize,
}

/// Churns the sources of a fresh namespace at every rate of the plan.
pub async fn run(bench: &Bench, implementation: Implementation) -> Result<Vec<Churn>> {
    let namespace = format!("churn-{}", implementation.name());
    let mut sources = bench.sources(&namespace, bench.plan.churn_sources).await?;
    let mut controllers = match implementation {
        Implementation::NullWriter => {
            load::write_children(&bench.client, &namespace, &sources, CONCURRENCY as usize).await?;
            None
        }
        _ => Some(bench.launcher.start(
            implementation,
            "churn",
            std::slice::from_ref(&namespace),
            &RunOptions::default(),
        )?),
    };
    bench
        .converged(&namespace, &sources, controllers.as_mut())
        .await?;
    let mut results = Vec::new();
    for &rate in &bench.plan.churn_rates {
        let window = Duration::from_secs(bench.plan.churn_seconds);
        let null = implementation == Implementation::NullWriter;
        let load = generate(bench, &mut sources, rate, window, null).await?;
        if let Some(controllers) = controllers.as_mut() {
            controllers.check_running()?;
        }
        let result = Churn {
            implementation,
            rate_per_second: rate,
            sent_per_second: load.sent_per_second,
            sources: sources.len(),
            latency: Latencies::of(load.latencies),
            lost: load.lost,
        };
        println!(
            "churn {:<20} {rate:>5}/s  p50 {:>8.1} ms  p99 {:>8.1} ms  lost {}",
            implementation.name(),
            result.latency.p50_ms,
            result.latency.p99_ms,
            result.lost
        );
        results.push(result);
    }
    if let Some(controllers) = controllers {
        report_unclean(&controllers.stop().await?);
    }
    load::delete_namespaces(&bench.client, &[namespace]).await?;
    Ok(results)
}

/// Updates `sources` (of one namespace or several) round-robin at `rate` per second for
/// `window`, open loop (an update is sent on schedule whether or not earlier ones were answered;
/// updates of one source are sent in order), then waits until every source's last update reached
/// its child. With `null`, the harness applies each child right after its source.
pub async fn generate(
    bench: &Bench,
    sources: &mut Vec<Source>,
    rate: u32,
    window: Duration,
    null: bool,
) -> Result<Load> {
    bench.observer.take_latencies();
    let namespaces: BTreeSet<String> = sources.iter().map(|s| s.namespace.clone()).collect();
    let shared: Arc<Vec<Mutex<Source>>> = Arc::new(sources.drain(..).map(Mutex::new).collect());
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let total = (f64::from(rate) * window.as_secs_f64()) as usize;
    let period = Duration::from_secs_f64(1.0 / f64::from(rate));
    let mut tasks = JoinSet::new();
    let start = Instant::now();
    for update in 0..total {
        tokio::time::sleep_until(start + period * update as u32).await;
        let permit = in_flight.clone().acquire_owned().await?;
        let (client, shared, observer) =
            (bench.client.clone(), shared.clone(), bench.observer.clone());
        tasks.spawn(async move {
            let mut source = shared[update % shared.len()].lock().await;
            let api = Api::<ConfigMap>::namespaced(client, &source.namespace);
            let seq = load::bump(&mut source);
            observer.expect(&source.namespace, &source.name, seq);
            load::apply_source(&api, &source).await?;
            if null {
                load::apply_child(&api, &source).await?;
            }
            drop(permit);
            anyhow::Ok(())
        });
        while let Some(done) = tasks.try_join_next() {
            done??;
        }
    }
    let sending = start.elapsed().max(window);
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    let sent_per_second = total as f64 / sending.as_secs_f64();
    *sources = Arc::try_unwrap(shared)
        .ok()
        .context("every update task has ended")?
        .into_iter()
        .map(Mutex::into_inner)
        .collect();
    let behind = || -> usize { namespaces.iter().map(|n| bench.observer.behind(n)).sum() };
    let drained = poll("updates to reach their children", DRAIN, || {
        Ok((behind() == 0).then_some(()))
    })
    .await;
    let lost = if drained.is_ok() { 0 } else { behind() };
    Ok(Load {
        sent_per_second,
        latencies: bench.observer.take_latencies(),
        lost,
    })
}
