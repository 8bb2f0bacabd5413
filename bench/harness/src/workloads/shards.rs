//! Sharded convergence (kubewasm only): the sources exist, N hosts start with `--sharded` on one
//! ring (the copy guest, one module each), and the clock stops when the last child shows its
//! source's data. One host without sharding, on the same sources, is the baseline. Each host is
//! reported on its own: its CPU seconds, its memory and the sources it cached, so that the share
//! of the work each replica did reads apart from the control plane's, which runs on the same
//! machine.
//!
//! The hosts start at the same time on sources no member holds yet: the clock includes the
//! election of the ring's leader, each member's joining once warm, the sharder labelling every
//! source for a member, and the handovers of keys to the members that joined after the first.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::ListParams;
use serde::Serialize;
use tokio::time::Instant;

use kubewasm_tests::prometheus::{self, has};

use crate::bench::{Bench, report_unclean};
use crate::controllers::{
    Controllers, Election, HostModule, LEASE_DURATION, RunOptions, free_loopback_address,
};
use crate::host_metrics::HostCounters;
use crate::load::{self, Source};
use crate::observer::poll;
use crate::procfs::Usage;

/// One convergence by `replicas` hosts, sharded or (one host) not.
#[derive(Debug, Clone, Serialize)]
pub struct ShardedConvergence {
    /// Hosts that shared the sources.
    pub replicas: usize,
    /// Whether they ran with `--sharded`.
    pub sharded: bool,
    pub objects: usize,
    /// From the start of the hosts to the last child.
    pub seconds: f64,
    pub objects_per_second: f64,
    /// From the start of the hosts to the first child.
    pub first_child_seconds: f64,
    /// Each host at convergence.
    pub hosts: Vec<ShardHost>,
    /// The ring leader's sharder: sources labelled for a member (new ones, or a member's gone).
    pub assignments: u64,
    /// The ring leader's sharder: keys drained from one live member for another.
    pub moves: u64,
    /// CPU seconds etcd and kube-apiserver spent in the same time.
    pub control_plane_cpu_seconds: f64,
    /// Sharded runs of 2 hosts or more: from the SIGKILL of a member after convergence until
    /// no source is labelled for it (its Lease expires first), and how many sources it held.
    pub kill: Option<Kill>,
}

/// A member killed after convergence.
#[derive(Debug, Clone, Serialize)]
pub struct Kill {
    /// Sources labelled for it when it was killed.
    pub held: usize,
    /// From the SIGKILL until the last of them was labelled for another member.
    pub ownerless_seconds: f64,
    /// The Lease's duration.
    pub lease_seconds: f64,
}

/// One host of a convergence.
#[derive(Debug, Clone, Serialize)]
pub struct ShardHost {
    /// The process at convergence.
    pub usage: Usage,
    /// Sources labelled for its member and cached by it; every source unsharded.
    pub sources_cached: u64,
    /// Every object its informers cached: its sources and their children.
    pub objects_cached: u64,
    /// Its reconciles.
    pub counters: HostCounters,
}

/// Converges `objects` sources with one host unsharded, then with each count of `replicas`
/// sharded.
pub async fn run(
    bench: &Bench,
    objects: usize,
    replicas: &[usize],
) -> Result<Vec<ShardedConvergence>> {
    let namespace = format!("shards-{objects}");
    let sources = bench.sources(&namespace, objects).await?;
    let mut results = Vec::new();
    let runs = std::iter::once((1, false)).chain(replicas.iter().map(|&n| (n, true)));
    for (count, sharded) in runs {
        load::delete_children(&bench.client, &namespace, &bench.observer).await?;
        // Let the deletion's events drain before the clock starts.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let result = converge(bench, &namespace, &sources, count, sharded).await?;
        println!(
            "shards {objects:>6} {count} host(s){} {:>8.2} s {:>8.0} objects/s, peak RSS {}",
            if sharded { " sharded" } else { "        " },
            result.seconds,
            result.objects_per_second,
            result
                .hosts
                .iter()
                .map(|h| format!("{:.1} MiB", h.usage.peak_rss_bytes as f64 / 1048576.0))
                .collect::<Vec<_>>()
                .join(", ")
        );
        results.push(result);
    }
    load::delete_namespaces(&bench.client, &[namespace]).await?;
    Ok(results)
}

/// A host of a run and where it serves its metrics.
struct Host {
    process: Controllers,
    metrics: SocketAddr,
}

async fn converge(
    bench: &Bench,
    namespace: &str,
    sources: &[Source],
    count: usize,
    sharded: bool,
) -> Result<ShardedConvergence> {
    let kind = if sharded { "sharded" } else { "single" };
    let ring = format!("shards-{}-{count}-{kind}", sources.len());
    let module = HostModule {
        path: bench.launcher.binaries().guest.clone(),
        name: "copy".to_owned(),
        namespace: namespace.to_owned(),
    };
    let plane = bench.plane.usage()?;
    let start = Instant::now();
    let mut hosts = Vec::new();
    for index in 0..count {
        let metrics = free_loopback_address()?;
        let options = RunOptions {
            metrics: Some(metrics),
            election: sharded.then(|| Election {
                namespace: namespace.to_owned(),
                name: ring.clone(),
                sharded: true,
            }),
            ..RunOptions::default()
        };
        let folder = bench.launcher.folder(&format!("{ring}-{index}"))?;
        let process = bench
            .launcher
            .host(&folder, std::slice::from_ref(&module), &options)?;
        hosts.push(Host { process, metrics });
    }
    let timeout = Duration::from_secs(120) + Duration::from_millis(100) * sources.len() as u32;
    // A bound for a loaded machine, not an expectation.
    let done = poll(&format!("children in {namespace}"), timeout, || {
        for host in &mut hosts {
            host.process.check_running()?;
        }
        Ok(bench.observer.converged(namespace, sources))
    })
    .await?;
    let plane = bench.plane.usage()?.cpu_seconds - plane.cpu_seconds;
    let (mut reports, mut assignments, mut moves) = (Vec::new(), 0, 0);
    for host in &mut hosts {
        let usage = host.process.usage()?;
        let text = prometheus::scrape(host.metrics).await?;
        let copy = |labels: &[(&str, &str)]| has(labels, "controller", "copy");
        // Only the ring's leader shards; the others serve 0.
        assignments += prometheus::sum(&text, "kubewasm_shard_assignments_total", copy) as u64;
        moves += prometheus::sum(&text, "kubewasm_shard_moves_total", copy) as u64;
        reports.push(ShardHost {
            usage,
            sources_cached: if sharded {
                prometheus::sum(&text, "kubewasm_shard_objects", copy) as u64
            } else {
                sources.len() as u64
            },
            objects_cached: prometheus::sum(&text, "kubewasm_cache_objects", |_| true) as u64,
            counters: HostCounters::parse(&text),
        });
    }
    let kill = if sharded && count > 1 {
        Some(kill_one(&bench.client, namespace, &mut hosts[0]).await?)
    } else {
        None
    };
    for host in hosts {
        report_unclean(&host.process.stop().await?);
    }
    let held: u64 = reports.iter().map(|h| h.sources_cached).sum();
    anyhow::ensure!(
        held as usize == sources.len(),
        "the hosts of {ring} held {held} of {} sources at convergence",
        sources.len()
    );
    let seconds = (done.last - start).as_secs_f64();
    Ok(ShardedConvergence {
        replicas: count,
        sharded,
        objects: sources.len(),
        seconds,
        objects_per_second: sources.len() as f64 / seconds,
        first_child_seconds: (done.first - start).as_secs_f64(),
        hosts: reports,
        assignments,
        moves,
        control_plane_cpu_seconds: plane,
        kill,
    })
}

/// Kills `host` with SIGKILL and measures how long its sources stay labelled for it.
async fn kill_one(client: &kube::Client, namespace: &str, host: &mut Host) -> Result<Kill> {
    // The host logs JSON lines.
    let log = host.process.log();
    let joined = (log.lines())
        .filter(|line| line.contains("joined the shard ring"))
        .find_map(|line| serde_json::from_str::<serde_json::Value>(line).ok());
    let member = joined
        .as_ref()
        .and_then(|line| line["fields"]["member"].as_str())
        .context("the killed host's member name")?
        .to_owned();
    let api = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    let labelled = ListParams::default().labels(&format!("shard.kubewasm.dev/copy={member}"));
    let held = api.list_metadata(&labelled).await?.items.len();
    let killed = Instant::now();
    host.process.kill()?;
    let first = labelled.limit(1);
    let timeout = Duration::from_secs(120);
    while !api.list_metadata(&first).await?.items.is_empty() {
        anyhow::ensure!(
            killed.elapsed() < timeout,
            "{member}'s sources stayed its for {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ownerless_seconds = killed.elapsed().as_secs_f64();
    println!(
        "shards: {held} sources of a member killed, labelled anew in {ownerless_seconds:.1} s"
    );
    Ok(Kill {
        held,
        ownerless_seconds,
        lease_seconds: LEASE_DURATION.as_secs_f64(),
    })
}
