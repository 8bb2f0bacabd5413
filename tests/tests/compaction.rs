//! A watch resumed from a resourceVersion that etcd has compacted away is answered with 410 Gone,
//! and the host lists again while PodSets churn, with no pod lost and none created twice.
//!
//! The API server runs with the watch cache off for pods (`--watch-cache-sizes=pods#0`), so that
//! a pod watch is served by etcd: with the cache on, a watch resumes from the cache's window,
//! which compaction does not touch. The host reaches the API server through a relay. Each round
//! cuts the host off; meanwhile one pod of every PodSet is deleted, a new PodSet is created and
//! etcd is compacted to its current revision. The test's own watch from before the cut is then
//! answered with 410: the revision the host's pod watch will resume from is gone. Once the host is
//! reconnected, it resumes its watch, is answered with 410 (its log says so) and lists the pods
//! again (`kubewasm_cache_lists_total` rises), while another pod of every PodSet is deleted.
//!
//! In the end every pod that ever existed is accounted for, as in `faults.rs`: each PodSet's
//! replicas plus one replacement per deleted pod; any more is a duplicate. The run has a process
//! (and so a control plane) of its own, for the flag and because it compacts etcd.
//! `tests/run` runs 2 rounds; `KUBEWASM_FAULT_ROUNDS=20` runs 20.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{Context, Result};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kubewasm_tests::podset::{
    converged, create, created_once, delete_one_each, fault_rounds, install,
};
use kubewasm_tests::prometheus::{has, scrape, sum};
use kubewasm_tests::relay::Relay;
use kubewasm_tests::{
    HostProcess, Language, WAIT, control_plane_with, eventually, example_config, free_ports,
    with_started_host,
};

const PODSETS: usize = 4;
const REPLICAS: usize = 3;
/// What the host logs when a watch is answered with 410 Gone.
const EXPIRED: &str = "watch expired (410 Gone)";

/// Pod lists the host's informers have completed so far.
async fn pod_lists(metrics: &str) -> Result<f64> {
    let text = scrape(metrics.parse()?).await?;
    Ok(sum(&text, "kubewasm_cache_lists_total", |labels| {
        has(labels, "kind", "Pod")
    }))
}

/// Pod watches the host's log says were answered with 410 Gone.
fn pod_watches_expired(log: &str) -> usize {
    log.lines()
        .filter(|line| line.contains(EXPIRED) && line.contains(r#"kind: "Pod""#))
        .count()
}

/// Whether the API server answers a watch of `pods` from `version` with 410 Gone.
async fn gone(pods: &Api<Pod>, version: &str) -> Result<bool> {
    match pods
        .watch(&WatchParams::default().timeout(1), version)
        .await
    {
        Err(kube::Error::Api(status)) => Ok(status.code == 410),
        Err(error) => Err(error.into()),
        Ok(events) => Ok(matches!(
            events.boxed().next().await,
            Some(Ok(WatchEvent::Error(status))) if status.code == 410
        )),
    }
}

#[tokio::test]
async fn a_pod_watch_compacted_away_is_listed_again_with_no_pod_lost_or_duplicated() -> Result<()> {
    let rounds = fault_rounds(2)?;
    let plane = control_plane_with(&["--watch-cache-sizes=pods#0"]);
    let client = plane.client().await?;
    let ns = plane.namespace("compaction").await?;
    let (podsets, pods, recorder) = install(&client, ns.name()).await?;
    let mut owners = Vec::new();
    for i in 0..PODSETS {
        owners.push(create(&podsets, &format!("set-{i}"), REPLICAS).await?);
    }
    let relay = Relay::start(plane.kubeconfig()).await?;
    let [port] = free_ports()?;
    let metrics = format!("127.0.0.1:{port}");
    let config = example_config("podset", Language::Rust, ns.name());
    let args = ["--metrics-bind-address", metrics.as_str()];
    let host = HostProcess::start_via(ns.name(), &config, relay.kubeconfig(), &args)?;
    let seen = Mutex::new(HashSet::new());
    with_started_host(host, async |host| {
        converged(&podsets, &pods, &owners, REPLICAS, &seen).await?;
        let mut deleted = 0;
        for round in 0..rounds {
            let before = pods
                .list(&ListParams::default().limit(1))
                .await?
                .metadata
                .resource_version
                .context("lists have a resourceVersion")?;
            let expired = pod_watches_expired(&host.log());
            let lists = pod_lists(&metrics).await?;
            relay.disconnect();
            deleted += delete_one_each(&pods, &owners, &seen).await?;
            owners.push(create(&podsets, &format!("new-{round}"), REPLICAS).await?);
            let revision = plane.compact_etcd().await?;
            anyhow::ensure!(
                gone(&pods, &before).await?,
                "a pod watch from {before} is not answered with 410 Gone once etcd is \
                 compacted to {revision}: the API server serves it from a watch cache"
            );
            relay.reconnect();
            let reconnected = Instant::now();
            deleted += delete_one_each(&pods, &owners, &seen).await?;
            converged(&podsets, &pods, &owners, REPLICAS, &seen).await?;
            let converged_after = reconnected.elapsed();
            eventually(
                "the host's pod watch to be answered with 410",
                WAIT,
                || async { Ok((pod_watches_expired(&host.log()) > expired).then_some(())) },
            )
            .await?;
            let relists = eventually("the host to list the pods again", WAIT, || async {
                let listed = pod_lists(&metrics).await?;
                Ok((listed > lists).then_some(listed - lists))
            })
            .await?;
            eprintln!(
                "round {round}: etcd compacted to {revision}, the host's pod watch expired; \
                 converged {:.1} s after it was reconnected, {relists} pod relists",
                converged_after.as_secs_f64()
            );
        }
        let created = created_once(&seen, &recorder, owners.len(), REPLICAS, deleted).await?;
        eprintln!(
            "{} PodSets converged: {deleted} pods deleted, {created} pods created, 0 lost, \
             0 duplicates",
            owners.len()
        );
        Ok(())
    })
    .await
}
