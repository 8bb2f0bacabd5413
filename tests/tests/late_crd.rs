//! A guest whose primary kind is a CRD installed after the host started: the host waits for the
//! kind to be served, then reconciles as usual. This binary has a control plane of its own, so
//! the CRD is absent when the host starts.

use anyhow::Result;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Api, Client};
use kubewasm_tests::{
    HostProcess, WAIT, apply_yaml, control_plane, eventually, is_controlled_by, module_config,
    repo_root, with_host,
};
use serde_json::json;

#[tokio::test]
async fn a_crd_installed_after_the_host_started_is_picked_up() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("late").await?;
    with_host(
        ns.name(),
        &module_config("podset", ns.name()),
        async |host| exercise(&client, ns.name(), host).await,
    )
    .await
}

async fn exercise(client: &Client, namespace: &str, host: &HostProcess) -> Result<()> {
    eventually(
        "the host to report the kind as not served",
        WAIT,
        || async { Ok(host.log().contains("kind not served yet").then_some(())) },
    )
    .await?;

    apply_yaml(client, &repo_root().join("examples/podset/crd.yaml"), None).await?;
    let gvk = GroupVersionKind::gvk("kubewasm.dev", "v1alpha1", "PodSet");
    let podsets: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::from_gvk_with_plural(&gvk, "podsets"),
    );
    // The CRD is served once it is established; until then creating a PodSet fails.
    let podset: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet",
        "metadata": { "name": "late" },
        "spec": {
            "replicas": 2,
            "selector": { "matchLabels": { "app": "late" } },
            "template": {
                "metadata": { "labels": { "app": "late" } },
                "spec": { "containers": [{ "name": "pause", "image": "registry.k8s.io/pause:3.10" }] }
            }
        }
    }))?;
    let created = eventually("the PodSet kind to be served", WAIT, || async {
        Ok(Some(podsets.create(&PostParams::default(), &podset).await?))
    })
    .await?;
    let uid = created.metadata.uid.expect("created objects have a uid");

    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
    eventually("two pods owned by the late PodSet", WAIT, || async {
        let owned = pods
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|p| is_controlled_by(p, &uid))
            .count();
        Ok((owned == 2).then_some(()))
    })
    .await?;
    Ok(())
}
