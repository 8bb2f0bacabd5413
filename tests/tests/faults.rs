//! The fault suite: the PodSet guest keeps its replicas, with no pod lost and none created twice,
//! while the control plane's API server and etcd crash under churn.
//!
//! Each round deletes one pod of every PodSet, crashes a component (etcd every fourth round, the
//! API server otherwise) while the host replaces them, deletes another pod of each as the host's
//! informers recover, and waits for every PodSet to converge. A restarted API server answers a
//! watch from before the crash with 410 Gone when its new watch cache starts later, and a watch
//! that fails is listed again: most rounds relist during writes, and the run prints how many.
//!
//! In the end every pod that ever existed is accounted for: each PodSet's replicas plus one
//! replacement per deleted pod. Any more is a duplicate. Pods are counted by uid as a watch saw
//! them and as each of the test's lists saw them, so a pod that lived only while the watch was
//! reconnecting is still counted if a list saw it.
//!
//! The run has a process (and so a control plane) of its own: it crashes the API server that
//! every test of a process shares. `tests/run` runs the short form, 3 rounds;
//! `KUBEWASM_FAULT_ROUNDS=20 cargo test -p kubewasm-tests --test faults -- --nocapture` runs the
//! full form and prints the time each round took to converge.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Instant;

use anyhow::Result;
use kubewasm_tests::podset::{
    converged, create, created_once, delete_one_each, fault_rounds, install,
};
use kubewasm_tests::prometheus::{scrape, sum};
use kubewasm_tests::{
    Language, WAIT, control_plane, eventually, example_config, free_ports, with_host_args,
};

const PODSETS: usize = 6;
const REPLICAS: usize = 4;

/// Relists the host's informers have completed so far.
async fn lists(metrics: &str) -> Result<f64> {
    let text = scrape(metrics.parse()?).await?;
    Ok(sum(&text, "kubewasm_cache_lists_total", |_| true))
}

#[tokio::test]
async fn podsets_converge_with_no_pod_lost_or_duplicated_through_control_plane_crashes()
-> Result<()> {
    let rounds = fault_rounds(3)?;
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("faults").await?;
    let (podsets, pods, recorder) = install(&client, ns.name()).await?;
    let mut owners = Vec::new();
    for i in 0..PODSETS {
        owners.push(create(&podsets, &format!("set-{i}"), REPLICAS).await?);
    }
    let [port] = free_ports()?;
    let metrics = format!("127.0.0.1:{port}");
    let config = example_config("podset", Language::Rust, ns.name());
    let args = ["--metrics-bind-address", metrics.as_str()];
    let seen = Mutex::new(HashSet::new());
    with_host_args(ns.name(), &config, &args, async |_| {
        converged(&podsets, &pods, &owners, REPLICAS, &seen).await?;
        let mut deleted = 0;
        let mut relists = lists(&metrics).await?;
        for round in 0..rounds {
            let component = if round % 4 == 3 { "etcd" } else { "kube-apiserver" };
            deleted += delete_one_each(&pods, &owners, &seen).await?;
            plane.restart(component).await?;
            let restarted = Instant::now();
            deleted += delete_one_each(&pods, &owners, &seen).await?;
            converged(&podsets, &pods, &owners, REPLICAS, &seen).await?;
            let listed = eventually("the host's metrics", WAIT, || async {
                Ok(lists(&metrics).await.ok())
            })
            .await?;
            eprintln!(
                "round {round}: {component} crashed; converged {:.1} s after it was back, {} relists",
                restarted.elapsed().as_secs_f64(),
                listed - relists
            );
            relists = listed;
        }
        created_once(&seen, &recorder, PODSETS, REPLICAS, deleted).await?;
        Ok(())
    })
    .await
}
