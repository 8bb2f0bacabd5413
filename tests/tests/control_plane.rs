//! The local control plane behaves like a real cluster in everything kubewasm relies on.

use anyhow::Result;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams, WatchEvent, WatchParams,
};
use kube::{Api, Client};
use kubewasm_tests::{WAIT, control_plane, eventually};
use serde_json::json;

async fn install_widget_crd(client: &Client) -> Result<ApiResource> {
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": { "name": "widgets.smoke.kubewasm.dev" },
        "spec": {
            "group": "smoke.kubewasm.dev",
            "scope": "Namespaced",
            "names": { "plural": "widgets", "singular": "widget", "kind": "Widget" },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": { "status": {} },
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": { "type": "object", "properties": {
                            "size": { "type": "integer" },
                            "color": { "type": "string" }
                        }},
                        "status": { "type": "object", "properties": {
                            "ready": { "type": "boolean" }
                        }}
                    }
                }}
            }]
        }
    }))?;
    crds.patch(
        "widgets.smoke.kubewasm.dev",
        &PatchParams::apply("kubewasm-tests").force(),
        &Patch::Apply(&crd),
    )
    .await?;
    eventually("the Widget CRD to be established", WAIT, || async {
        let crd = crds.get("widgets.smoke.kubewasm.dev").await?;
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        Ok(established.then_some(()))
    })
    .await?;
    let gvk = GroupVersionKind::gvk("smoke.kubewasm.dev", "v1", "Widget");
    Ok(ApiResource::from_gvk_with_plural(&gvk, "widgets"))
}

fn widget(name: &str, size: i64) -> Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "smoke.kubewasm.dev/v1",
        "kind": "Widget",
        "metadata": { "name": name },
        "spec": { "size": size }
    }))?)
}

#[tokio::test]
async fn custom_resources_apply_status_and_conflicts() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("smoke-cr").await?;
    let resource = install_widget_crd(&client).await?;
    let widgets = Api::<DynamicObject>::namespaced_with(client.clone(), ns.name(), &resource);

    // Watch from the list's resourceVersion, then create: the watch sees the new object.
    let list = widgets.list(&ListParams::default()).await?;
    assert!(list.items.is_empty());
    let version = list.metadata.resource_version.unwrap_or_default();
    let mut events = widgets
        .watch(&WatchParams::default().timeout(30), &version)
        .await?
        .boxed();
    widgets
        .create(&PostParams::default(), &widget("first", 1)?)
        .await?;
    let added = loop {
        match events.try_next().await? {
            Some(WatchEvent::Added(object)) => break object,
            Some(WatchEvent::Bookmark(_)) => continue,
            other => anyhow::bail!("unexpected watch event {other:?}"),
        }
    };
    assert_eq!(added.metadata.name.as_deref(), Some("first"));
    assert_eq!(widgets.list(&ListParams::default()).await?.items.len(), 1);

    // Server-side apply records the field manager and owns the fields it set.
    let applied = widgets
        .patch(
            "second",
            &PatchParams::apply("smoke-manager"),
            &Patch::Apply(widget("second", 2)?),
        )
        .await?;
    let managers: Vec<_> = applied
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(managers, ["smoke-manager"]);
    assert_eq!(applied.data["spec"]["size"], 2);

    // A second manager that sets the same field conflicts unless it forces.
    let conflict = widgets
        .patch(
            "second",
            &PatchParams::apply("other-manager"),
            &Patch::Apply(widget("second", 3)?),
        )
        .await
        .expect_err("a second manager setting the same field must conflict");
    assert!(
        matches!(conflict, kube::Error::Api(ref s) if s.code == 409),
        "{conflict:?}"
    );

    // The status subresource is written separately from the spec.
    let status = json!({
        "apiVersion": "smoke.kubewasm.dev/v1", "kind": "Widget",
        "metadata": { "name": "second" },
        "status": { "ready": true }
    });
    let with_status = widgets
        .patch_status(
            "second",
            &PatchParams::apply("smoke-manager"),
            &Patch::Apply(&status),
        )
        .await?;
    assert_eq!(with_status.data["status"]["ready"], true);
    assert_eq!(with_status.data["spec"]["size"], 2);

    // An update carrying a stale resourceVersion is refused with 409.
    let mut stale = applied.clone();
    stale.data["spec"]["size"] = json!(5);
    let error = widgets
        .replace("second", &PostParams::default(), &stale)
        .await
        .expect_err("a stale resourceVersion must conflict");
    assert!(
        matches!(error, kube::Error::Api(ref s) if s.code == 409 && s.reason == "Conflict"),
        "{error:?}"
    );
    Ok(())
}

#[tokio::test]
async fn garbage_collection_and_namespace_deletion() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("smoke-gc").await?;
    let maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());

    let owner = maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": "owner" } }))?,
        )
        .await?;
    let child: ConfigMap = serde_json::from_value(json!({
        "metadata": {
            "name": "child",
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                "uid": owner.metadata.uid, "controller": true, "blockOwnerDeletion": true
            }]
        }
    }))?;
    maps.create(&PostParams::default(), &child).await?;
    maps.delete("owner", &DeleteParams::background()).await?;
    eventually(
        "the garbage collector to delete the child",
        WAIT,
        || async { Ok(maps.get_opt("child").await?.is_none().then_some(())) },
    )
    .await?;

    // A namespace with content goes away entirely once the namespace controller empties it.
    let doomed = plane.namespace("smoke-doomed").await?;
    Api::<ConfigMap>::namespaced(client.clone(), doomed.name())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": "content" } }))?,
        )
        .await?;
    let namespaces = Api::<Namespace>::all(client.clone());
    namespaces
        .delete(doomed.name(), &DeleteParams::background())
        .await?;
    eventually("the namespace to disappear", WAIT, || async {
        Ok(namespaces
            .get_opt(doomed.name())
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn version_is_the_pinned_release() -> Result<()> {
    let client = control_plane().client().await?;
    let version = client.apiserver_version().await?;
    assert_eq!(version.git_version, "v1.36.3");
    Ok(())
}
