//! The Website example, run by the `kubewasm` host against the local control plane: children
//! with owner references, status, drift correction, and a finalizer that cleans up outside the
//! owner tree before garbage collection removes the children.

use anyhow::{Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::{Api, Client, Resource};
use kubewasm_tests::{
    WAIT, apply_yaml, control_plane, eventually, is_controlled_by, module_config, repo_root,
    with_host,
};
use serde_json::json;

fn websites(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("kubewasm.dev", "v1alpha1", "Website");
    Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::from_gvk_with_plural(&gvk, "websites"),
    )
}

/// The object if it exists, is controlled by `uid` and is not being deleted.
async fn live_child<K>(api: &Api<K>, name: &str, uid: &str) -> Result<Option<K>>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(api
        .get_opt(name)
        .await?
        .filter(|o| o.meta().deletion_timestamp.is_none() && is_controlled_by(o, uid)))
}

#[tokio::test]
async fn website_children_status_drift_and_finalizer() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("website").await?;
    apply_yaml(
        &client,
        &repo_root().join("examples/website/crd.yaml"),
        None,
    )
    .await?;
    with_host(
        ns.name(),
        &module_config("website", ns.name()),
        async |_| exercise(&client, ns.name()).await,
    )
    .await
}

async fn exercise(client: &Client, namespace: &str) -> Result<()> {
    let websites = websites(client, namespace);
    let deployments = Api::<Deployment>::namespaced(client.clone(), namespace);
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    let services = Api::<Service>::namespaced(client.clone(), namespace);

    let site: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubewasm.dev/v1alpha1", "kind": "Website",
        "metadata": { "name": "hello" },
        "spec": { "replicas": 2, "content": "<h1>one</h1>", "port": 8080 }
    }))?;
    let created = websites.create(&PostParams::default(), &site).await?;
    let uid = created
        .metadata
        .uid
        .clone()
        .expect("created objects have a uid");

    // Children, owned by the Website, built from its spec.
    eventually("the three children", WAIT, || async {
        let deployment = live_child(&deployments, "hello", &uid).await?;
        let content = live_child(&config_maps, "hello-content", &uid).await?;
        let service = live_child(&services, "hello", &uid).await?;
        let ready = deployment.is_some_and(|d| d.spec.and_then(|s| s.replicas) == Some(2))
            && content.is_some_and(|c| {
                c.data.and_then(|d| d.get("index.html").cloned()).as_deref() == Some("<h1>one</h1>")
            })
            && service.is_some_and(|s| {
                s.spec
                    .and_then(|s| s.ports)
                    .is_some_and(|ports| ports.iter().any(|p| p.port == 8080))
            });
        Ok(ready.then_some(()))
    })
    .await?;

    // The finalizer, the status, and the index entry outside the owner tree.
    eventually(
        "Ready status for generation 1 and the finalizer",
        WAIT,
        || async {
            let site = websites.get("hello").await?;
            let status = &site.data["status"];
            let ready = status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            let finalized = site
                .metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == "kubewasm.dev/website-index");
            Ok((ready
                && finalized
                && status["observedGeneration"] == json!(site.metadata.generation)
                && status["url"] == format!("http://hello.{namespace}.svc:8080"))
            .then_some(()))
        },
    )
    .await?;
    eventually("the index entry", WAIT, || async {
        let index = config_maps.get_opt("website-index").await?;
        let url = index
            .and_then(|i| i.data)
            .and_then(|d| d.get("hello").cloned());
        Ok((url == Some(format!("http://hello.{namespace}.svc:8080"))).then_some(()))
    })
    .await?;

    // A spec change reaches the children and bumps observedGeneration.
    let patch = json!({ "spec": { "replicas": 3, "content": "<h1>two</h1>" } });
    let updated = websites
        .patch("hello", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let generation = updated.metadata.generation;
    eventually(
        "the children and status to follow the new spec",
        WAIT,
        || async {
            let deployment = live_child(&deployments, "hello", &uid).await?;
            let content = live_child(&config_maps, "hello-content", &uid).await?;
            let site = websites.get("hello").await?;
            let ok = deployment.is_some_and(|d| d.spec.and_then(|s| s.replicas) == Some(3))
                && content.is_some_and(|c| {
                    c.data.and_then(|d| d.get("index.html").cloned()).as_deref()
                        == Some("<h1>two</h1>")
                })
                && site.data["status"]["observedGeneration"] == json!(generation);
            Ok(ok.then_some(()))
        },
    )
    .await?;

    // A deleted child is recreated.
    let old_service = services.get("hello").await?.metadata.uid;
    services.delete("hello", &DeleteParams::default()).await?;
    eventually("the Service to be recreated", WAIT, || async {
        let service = live_child(&services, "hello", &uid).await?;
        Ok(service
            .filter(|s| s.metadata.uid != old_service)
            .map(|_| ()))
    })
    .await?;

    // A hand edit of a child is reverted.
    let scale = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "hello" },
        "spec": { "replicas": 7 }
    });
    deployments
        .patch(
            "hello",
            &PatchParams::apply("someone-by-hand").force(),
            &Patch::Apply(&scale),
        )
        .await?;
    eventually("the Deployment to be scaled back to 3", WAIT, || async {
        let deployment = live_child(&deployments, "hello", &uid).await?;
        Ok(deployment
            .is_some_and(|d| d.spec.and_then(|s| s.replicas) == Some(3))
            .then_some(()))
    })
    .await?;

    // Deleting the Website runs the finalizer (the index entry goes), then the garbage
    // collector removes the children.
    websites
        .delete("hello", &DeleteParams::background())
        .await?;
    eventually("the Website to be gone", WAIT, || async {
        Ok(websites.get_opt("hello").await?.is_none().then_some(()))
    })
    .await?;
    let index = config_maps.get("website-index").await?;
    ensure!(
        !index.data.unwrap_or_default().contains_key("hello"),
        "the finalizer removed the index entry"
    );
    eventually("the children to be garbage-collected", WAIT, || async {
        let left = live_child(&deployments, "hello", &uid).await?.is_some()
            || live_child(&config_maps, "hello-content", &uid)
                .await?
                .is_some()
            || live_child(&services, "hello", &uid).await?.is_some();
        Ok((!left).then_some(()))
    })
    .await?;
    Ok(())
}
