//! A write whose answer is lost is not made twice.
//!
//! The host reaches the API server through a relay that cuts it off just after a request left:
//! the API server creates the pod the PodSet guest asked for, but the answer, and the watch
//! event that would tell the host's informer, never arrive, and then the connections drop. The
//! guest must not end up creating a second pod in its place: each round deletes one pod, and in
//! the end exactly one replacement per deleted pod may have existed.
//!
//! The relay partitions only the host; the test's own clients reach the API server directly.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, Result};
use kube::api::{DeleteParams, PostParams};
use kubewasm_tests::podset::{converged, install, live_pods, podset};
use kubewasm_tests::relay::Relay;
use kubewasm_tests::{
    HostProcess, Language, WAIT, control_plane, eventually, example_config, with_started_host,
};

const REPLICAS: usize = 3;
const ROUNDS: usize = 3;
const SETTLE: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_pod_created_while_the_answer_is_lost_is_not_created_again() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("partition").await?;
    let (podsets, pods, recorder) = install(&client, ns.name()).await?;
    let created = podsets
        .create(&PostParams::default(), &podset("web", REPLICAS as u32)?)
        .await?;
    let owners = [created.metadata.uid.context("created objects have a uid")?];
    let relay = Relay::start(plane.kubeconfig()).await?;
    let config = example_config("podset", Language::Rust, ns.name());
    let host = HostProcess::start_via(ns.name(), &config, relay.kubeconfig(), &[])?;
    let seen = Mutex::new(HashSet::new());
    with_started_host(host, async |host| {
        converged(&podsets, &pods, &owners, REPLICAS, &seen).await?;
        for _ in 0..ROUNDS {
            relay.partition_at_next_request(Duration::from_secs(1), Duration::from_secs(2));
            let live = live_pods(&pods, &owners, &seen).await?;
            let name = live[0][0]
                .metadata
                .name
                .clone()
                .context("pods have names")?;
            pods.delete(&name, &DeleteParams::default()).await?;
            eventually("the partition to start and end", WAIT, || async {
                Ok(relay.healed().then_some(()))
            })
            .await?;
            converged(&podsets, &pods, &owners, REPLICAS, &seen).await?;
            // The host's watches back off for up to 4 s while the API server is down: let them
            // come back, so that the next round's first request is the guest's.
            tokio::time::sleep(SETTLE).await;
        }
        anyhow::ensure!(
            host.log().contains("write failed; sending it again"),
            "the host never sent a write again: no answer was lost"
        );
        // Let the recorder's watch catch up with the last creations.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mut seen = seen.lock().expect("seen lock").clone();
        seen.extend(recorder.controlled_uids());
        anyhow::ensure!(
            seen.len() == REPLICAS + ROUNDS,
            "{} pods were created for a PodSet of {REPLICAS} and {ROUNDS} deleted pods",
            seen.len()
        );
        Ok(())
    })
    .await
}
