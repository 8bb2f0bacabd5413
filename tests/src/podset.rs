//! The PodSet example's custom resource, as the tests create and read it.

use std::collections::HashSet;
use std::sync::Mutex;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use kube::{Api, Client};
use serde_json::json;

use crate::{Recorder, WAIT, apply_yaml, eventually, is_controlled_by, repo_root};

/// Installs the PodSet CRD; the PodSets and the pods of `namespace`, and a recorder of every pod
/// created in it from now on.
pub async fn install(
    client: &Client,
    namespace: &str,
) -> Result<(Api<DynamicObject>, Api<Pod>, Recorder)> {
    apply_yaml(client, &repo_root().join("examples/podset/crd.yaml"), None).await?;
    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
    let recorder = Recorder::start(pods.clone()).await?;
    Ok((podsets(client, namespace), pods, recorder))
}

/// The PodSets of `namespace`.
pub fn podsets(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("kubewasm.dev", "v1alpha1", "PodSet");
    Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::from_gvk_with_plural(&gvk, "podsets"),
    )
}

/// A PodSet `name` of `replicas` pods labelled `app=<name>`.
pub fn podset(name: &str, replicas: u32) -> Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet",
        "metadata": { "name": name },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{ "name": "pause", "image": "registry.k8s.io/pause:3.10" }] }
            }
        }
    }))?)
}

/// Creates the PodSet `name` of `replicas` in `podsets`; returns its uid.
pub async fn create(podsets: &Api<DynamicObject>, name: &str, replicas: usize) -> Result<String> {
    let created = podsets
        .create(&PostParams::default(), &podset(name, replicas as u32)?)
        .await?;
    created.metadata.uid.context("created objects have a uid")
}

/// Live pods controlled by each owner uid, in the order of `owners`; adds every controlled
/// pod's uid to `seen`.
pub async fn live_pods(
    pods: &Api<Pod>,
    owners: &[String],
    seen: &Mutex<HashSet<String>>,
) -> Result<Vec<Vec<Pod>>> {
    let items = pods.list(&ListParams::default()).await?.items;
    let mut seen = seen.lock().expect("seen lock");
    for pod in &items {
        if owners.iter().any(|uid| is_controlled_by(pod, uid)) {
            seen.extend(pod.metadata.uid.clone());
        }
    }
    Ok(owners
        .iter()
        .map(|uid| {
            items
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none() && is_controlled_by(*p, uid))
                .cloned()
                .collect()
        })
        .collect())
}

/// Deletes one live pod of every owner in `owners`; returns how many deletions the API server
/// took. Adds every controlled pod's uid to `seen`.
pub async fn delete_one_each(
    pods: &Api<Pod>,
    owners: &[String],
    seen: &Mutex<HashSet<String>>,
) -> Result<usize> {
    let mut deleted = 0;
    for owned in live_pods(pods, owners, seen).await? {
        let Some(name) = owned.first().and_then(|p| p.metadata.name.clone()) else {
            continue;
        };
        if pods.delete(&name, &DeleteParams::default()).await.is_ok() {
            deleted += 1;
        }
    }
    Ok(deleted)
}

/// Rounds of a fault scenario: `KUBEWASM_FAULT_ROUNDS`, else `default` (the short form).
pub fn fault_rounds(default: usize) -> Result<usize> {
    match std::env::var("KUBEWASM_FAULT_ROUNDS") {
        Ok(rounds) => rounds.parse().context("KUBEWASM_FAULT_ROUNDS"),
        Err(_) => Ok(default),
    }
}

/// Checks that every pod that ever existed is accounted for: each of `podsets` PodSets'
/// `replicas` plus one replacement per `deleted` pod; any more is a duplicate. Pods are counted
/// by uid, as `seen` and the recorder's watch saw them, once the watch has had 2 s to catch up
/// with the last creations. Returns how many pods were created.
pub async fn created_once(
    seen: &Mutex<HashSet<String>>,
    recorder: &Recorder,
    podsets: usize,
    replicas: usize,
    deleted: usize,
) -> Result<usize> {
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let expected = podsets * replicas + deleted;
    let mut seen = seen.lock().expect("seen lock").clone();
    seen.extend(recorder.controlled_uids());
    let created = seen.len();
    anyhow::ensure!(
        created == expected,
        "{created} pods were created for {podsets} PodSets of {replicas} and {deleted} deleted \
         pods: {} duplicates",
        created as i64 - expected as i64
    );
    Ok(created)
}

/// Waits until every PodSet of `podsets` has exactly `replicas` live pods and says so in its
/// status; adds every controlled pod's uid to `seen` on the way.
pub async fn converged(
    podsets: &Api<DynamicObject>,
    pods: &Api<Pod>,
    owners: &[String],
    replicas: usize,
    seen: &Mutex<HashSet<String>>,
) -> Result<()> {
    eventually("every PodSet to have its replicas", WAIT, || async {
        let counts = live_pods(pods, owners, seen).await?;
        if counts.iter().any(|owned| owned.len() != replicas) {
            return Ok(None);
        }
        let listed = podsets.list(&ListParams::default()).await?.items;
        let reported = listed
            .iter()
            .all(|p| p.data["status"]["replicas"] == json!(replicas));
        Ok(reported.then_some(()))
    })
    .await
}
