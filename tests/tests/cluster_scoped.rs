//! A cluster-scoped primary whose children live in namespaces: the key of a child's owner has
//! no namespace, so a change to a child in any namespace reaches the owner itself.

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::{Api, Client};
use kubewasm_tests::{
    WAIT, apply_yaml, control_plane, eventually, guest_wasm, repo_root, with_host,
};
use serde_json::json;

/// How long a changed child may stay changed before its owner puts it back.
const REPAIR: Duration = Duration::from_secs(60);

/// The value of the child `tenant-t1` in `namespace`, if it exists.
async fn child(client: &Client, namespace: &str) -> Result<Option<String>> {
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    Ok(config_maps
        .get_opt("tenant-t1")
        .await?
        .and_then(|c| c.data?.get("value").cloned()))
}

async fn value_is(client: &Client, namespace: &str, value: &str, within: Duration) -> Result<()> {
    eventually(
        &format!("tenant-t1 in {namespace} to hold {value:?}"),
        within,
        || async { Ok((child(client, namespace).await?.as_deref() == Some(value)).then_some(())) },
    )
    .await
}

#[tokio::test]
async fn a_cluster_scoped_owner_is_triggered_by_its_children_in_every_namespace() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let (a, b) = (
        plane.namespace("tenant-a").await?,
        plane.namespace("tenant-b").await?,
    );
    apply_yaml(
        &client,
        &repo_root().join("tests/fixtures/tenant-crd.yaml"),
        None,
    )
    .await?;
    let tenants = Api::<DynamicObject>::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("kubewasm.dev", "v1", "Tenant"),
            "tenants",
        ),
    );
    let config = format!("modules:\n  - path: {}\n", guest_wasm("tenant").display());
    with_host("tenant", &config, async |_| {
        let tenant: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kubewasm.dev/v1", "kind": "Tenant",
            "metadata": { "name": "t1" },
            "spec": { "namespaces": [a.name(), b.name()], "value": "v1" },
        }))?;
        eventually("the Tenant to be created", WAIT, || async {
            Ok(tenants.create(&PostParams::default(), &tenant).await.ok())
        })
        .await?;
        value_is(&client, a.name(), "v1", WAIT).await?;
        value_is(&client, b.name(), "v1", WAIT).await?;

        // A hand edit of the child in one namespace, a deletion in the other.
        let tampered = json!({ "data": { "value": "tampered" } });
        Api::<ConfigMap>::namespaced(client.clone(), a.name())
            .patch(
                "tenant-t1",
                &PatchParams::default(),
                &Patch::Merge(&tampered),
            )
            .await?;
        Api::<ConfigMap>::namespaced(client.clone(), b.name())
            .delete("tenant-t1", &DeleteParams::default())
            .await?;
        value_is(&client, a.name(), "v1", REPAIR).await?;
        value_is(&client, b.name(), "v1", REPAIR).await
    })
    .await
}
