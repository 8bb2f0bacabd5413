//! The PodSet example, run by the `kubewasm` host against the local control plane.

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams,
};
use kube::{Api, Client};
use kubewasm_tests::{HostProcess, apply_yaml, control_plane, eventually, guest_wasm, repo_root};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

fn podsets(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("kubewasm.dev", "v1alpha1", "PodSet");
    Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::from_gvk_with_plural(&gvk, "podsets"),
    )
}

/// Live (not terminating) pods controlled by the PodSet with this uid.
async fn owned_pods(pods: &Api<Pod>, uid: &str) -> Result<Vec<Pod>> {
    Ok(pods
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.uid == uid && o.controller == Some(true))
        })
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

fn host_config(namespace: &str) -> String {
    format!(
        "modules:\n  - path: {}\n    namespaces: [{namespace}]\n",
        guest_wasm("podset").display()
    )
}

#[tokio::test]
async fn podset_keeps_its_replicas() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("podset").await?;
    apply_yaml(&client, &repo_root().join("examples/podset/crd.yaml"), None).await?;
    let host = HostProcess::start(ns.name(), &host_config(ns.name()))?;
    let result = exercise(&client, ns.name()).await;
    if result.is_err() {
        eprintln!("host log:\n{}", host.log());
    }
    result?;
    assert!(host.stop()?, "the host exits cleanly on SIGTERM");
    Ok(())
}

async fn exercise(client: &Client, namespace: &str) -> Result<()> {
    let podsets = podsets(client, namespace);
    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
    let podset: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet",
        "metadata": { "name": "web" },
        "spec": {
            "replicas": 3,
            "selector": { "matchLabels": { "app": "web" } },
            "template": {
                "metadata": { "labels": { "app": "web" } },
                "spec": { "containers": [{ "name": "pause", "image": "registry.k8s.io/pause:3.10" }] }
            }
        }
    }))?;
    let created = podsets.create(&PostParams::default(), &podset).await?;
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
