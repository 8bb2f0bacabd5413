//! The PodSet example, run by the `kubewasm` host against the local control plane.

use std::time::Duration;

use anyhow::Result;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kubewasm_tests::podset::{install, podset, podsets};
use kubewasm_tests::{
    HostProcess, Language, WAIT, apply_yaml, control_plane, eventually, example_config,
    is_controlled_by, repo_root, with_host,
};
use serde_json::json;

/// Live (not terminating) pods controlled by the PodSet with this uid.
async fn owned_pods(pods: &Api<Pod>, uid: &str) -> Result<Vec<Pod>> {
    Ok(pods
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && is_controlled_by(p, uid))
        .collect())
}

async fn wait_for_pods(pods: &Api<Pod>, uid: &str, count: usize) -> Result<Vec<Pod>> {
    eventually(&format!("{count} owned pods"), WAIT, || async {
        let owned = owned_pods(pods, uid).await?;
        Ok((owned.len() == count).then_some(owned))
    })
    .await
}

async fn scale(podsets: &Api<DynamicObject>, replicas: u32) -> Result<()> {
    let patch = json!({ "spec": { "replicas": replicas } });
    podsets
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// The same tests, run against the PodSet example built from each language's port.
macro_rules! podset_tests {
    ($($module:ident => $language:expr),* $(,)?) => {$(
        mod $module {
            use super::*;

            #[tokio::test]
            async fn podset_keeps_its_replicas() -> Result<()> {
                super::podset_keeps_its_replicas($language).await
            }

            #[tokio::test]
            async fn a_host_killed_midway_and_restarted_creates_no_duplicate() -> Result<()> {
                super::a_host_killed_midway_and_restarted_creates_no_duplicate($language).await
            }

            #[tokio::test]
            async fn five_hundred_podsets_converge_without_duplicates() -> Result<()> {
                super::five_hundred_podsets_converge_without_duplicates($language).await
            }
        }
    )*};
}

podset_tests!(rust => Language::Rust, go => Language::Go, python => Language::Python, js => Language::JavaScript);

async fn podset_keeps_its_replicas(language: Language) -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("podset").await?;
    apply_yaml(&client, &repo_root().join("examples/podset/crd.yaml"), None).await?;
    with_host(
        ns.name(),
        &example_config("podset", language, ns.name()),
        async |_| exercise(&client, ns.name()).await,
    )
    .await
}

async fn exercise(client: &Client, namespace: &str) -> Result<()> {
    let podsets = podsets(client, namespace);
    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
    let created = podsets
        .create(&PostParams::default(), &podset("web", 3)?)
        .await?;
    let uid = created
        .metadata
        .uid
        .clone()
        .expect("created objects have a uid");

    wait_for_pods(&pods, &uid, 3).await?;
    eventually("status.replicas = 3", WAIT, || async {
        let podset = podsets.get("web").await?;
        Ok((podset.data["status"]["replicas"] == 3).then_some(()))
    })
    .await?;

    scale(&podsets, 5).await?;
    wait_for_pods(&pods, &uid, 5).await?;
    scale(&podsets, 2).await?;
    let remaining = wait_for_pods(&pods, &uid, 2).await?;

    // A deleted pod is replaced.
    let victim = remaining[0].metadata.name.clone().expect("pods have names");
    pods.delete(&victim, &DeleteParams::default()).await?;
    let replaced = wait_for_pods(&pods, &uid, 2).await?;
    assert!(
        replaced
            .iter()
            .all(|p| p.metadata.name.as_deref() != Some(victim.as_str()))
    );

    // A matching pod without a controller is adopted, and the surplus removed.
    let stray: Pod = serde_json::from_value(json!({
        "metadata": { "name": "stray", "labels": { "app": "web" } },
        "spec": { "containers": [{ "name": "pause", "image": "registry.k8s.io/pause:3.10" }] }
    }))?;
    pods.create(&PostParams::default(), &stray).await?;
    eventually("the stray pod to be adopted or removed", WAIT, || async {
        let owned = owned_pods(&pods, &uid).await?;
        let stray = pods.get_opt("stray").await?;
        let stray_settled = match &stray {
            None => true,
            Some(pod) => {
                pod.metadata.deletion_timestamp.is_some()
                    || owned
                        .iter()
                        .any(|p| p.metadata.name.as_deref() == Some("stray"))
            }
        };
        Ok((owned.len() == 2 && stray_settled).then_some(()))
    })
    .await?;

    // Deleting the PodSet lets the garbage collector remove its pods.
    podsets.delete("web", &DeleteParams::background()).await?;
    eventually("the pods to be garbage-collected", WAIT, || async {
        Ok(owned_pods(&pods, &uid).await?.is_empty().then_some(()))
    })
    .await?;
    Ok(())
}

async fn a_host_killed_midway_and_restarted_creates_no_duplicate(language: Language) -> Result<()> {
    const REPLICAS: usize = 40;
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("restart").await?;
    let (podsets, pods, recorder) = install(&client, ns.name()).await?;
    let uid = podsets
        .create(&PostParams::default(), &podset("big", REPLICAS as u32)?)
        .await?
        .metadata
        .uid
        .expect("created objects have a uid");

    let first = HostProcess::start(
        &format!("{}-first", ns.name()),
        &example_config("podset", language, ns.name()),
    )?;
    let midway = eventually("the first host to create a pod", WAIT, || async {
        Ok((recorder.controlled_by(&uid) > 0).then_some(()))
    })
    .await;
    if midway.is_err() {
        eprintln!("first host log:\n{}", first.log());
    }
    midway?;
    // SIGKILL: no chance to finish the reconcile in flight.
    drop(first);
    let killed_at = recorder.controlled_by(&uid);

    with_host(
        ns.name(),
        &example_config("podset", language, ns.name()),
        async |_| {
            wait_for_pods(&pods, &uid, REPLICAS).await?;
            eventually("status.replicas", WAIT, || async {
                let podset = podsets.get("big").await?;
                Ok((podset.data["status"]["replicas"] == REPLICAS).then_some(()))
            })
            .await?;
            eprintln!("{killed_at} of {REPLICAS} pods existed when the first host was killed");
            // Inside the host's run, so that a failure prints its log.
            anyhow::ensure!(
                recorder.controlled_by(&uid) == REPLICAS,
                "{} pods were created for {REPLICAS} replicas",
                recorder.controlled_by(&uid)
            );
            Ok(())
        },
    )
    .await
}

async fn five_hundred_podsets_converge_without_duplicates(language: Language) -> Result<()> {
    const PODSETS: usize = 500;
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("many").await?;
    let (podsets, pods, recorder) = install(&client, ns.name()).await?;
    with_host(
        ns.name(),
        &example_config("podset", language, ns.name()),
        async |_| {
            let start = std::time::Instant::now();
            futures::stream::iter(0..PODSETS)
                .map(|i| {
                    let podsets = podsets.clone();
                    async move {
                        podsets
                            .create(&PostParams::default(), &podset(&format!("p{i}"), 1)?)
                            .await?;
                        anyhow::Ok(())
                    }
                })
                .buffer_unordered(16)
                .collect::<Vec<_>>()
                .await
                .into_iter()
                .collect::<Result<Vec<_>>>()?;
            eventually(
                "every PodSet to report one replica",
                Duration::from_secs(300),
                || async {
                    let ready = podsets
                        .list(&ListParams::default())
                        .await?
                        .items
                        .iter()
                        .filter(|p| p.data["status"]["replicas"] == 1)
                        .count();
                    Ok((ready == PODSETS).then_some(()))
                },
            )
            .await?;
            eprintln!("{PODSETS} PodSets converged in {:?}", start.elapsed());
            let live = pods
                .list(&ListParams::default())
                .await?
                .items
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .count();
            anyhow::ensure!(live == PODSETS, "{live} live pods for {PODSETS} PodSets");
            Ok(())
        },
    )
    .await?;
    anyhow::ensure!(
        recorder.controlled() == PODSETS,
        "{} pods were created for {PODSETS} PodSets of one replica",
        recorder.controlled()
    );
    Ok(())
}
