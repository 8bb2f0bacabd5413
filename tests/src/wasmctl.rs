//! WasmControllers in tests: the objects, their conditions, and the mirror fixture's sources and
//! mirrors that show which build of a module reconciled.

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::{WAIT, apply_yaml, control_plane, eventually, repo_root};

/// The host configuration: no module files, the WasmControllers of `namespaces` watched (so
/// that hosts of tests side by side leave each other's alone), every one confined to its
/// namespace, and allowed to read its source every second.
pub fn watching(namespaces: &[&str]) -> String {
    format!(
        "controllers:\n  watch: true\n  namespaces: [{}]\n  maxima:\n    pollInterval: 1s\n",
        namespaces.join(", ")
    )
}

/// Applies the WasmController CRD to the test control plane and returns a client of it.
pub async fn crd_applied() -> Result<Client> {
    let client = control_plane().client().await?;
    apply_yaml(
        &client,
        &repo_root().join("deploy/crds/wasmcontrollers.yaml"),
        None,
    )
    .await?;
    Ok(client)
}

/// A WasmController `name` with `spec`.
pub fn wasm_controller(name: &str, spec: Value) -> Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "kubewasm.dev/v1alpha1", "kind": "WasmController",
        "metadata": { "name": name },
        "spec": spec,
    }))?)
}

/// The condition `kind` of a WasmController's status, once its observed generation is current.
pub fn condition(object: &DynamicObject, kind: &str) -> Option<Value> {
    let status = object.data.get("status")?;
    let generation = object.metadata.generation?;
    (status["observedGeneration"] == json!(generation)).then_some(())?;
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .cloned()
}

/// Waits until the condition `kind` of the WasmController `name` is current and `wanted`.
pub async fn until_condition(
    api: &Api<DynamicObject>,
    name: &str,
    kind: &str,
    wanted: impl Fn(&Value) -> bool,
) -> Result<DynamicObject> {
    eventually(&format!("{name}'s {kind} condition"), WAIT, || async {
        let object = api.get(name).await?;
        Ok(condition(&object, kind)
            .filter(|c| wanted(c))
            .map(|_| object))
    })
    .await
}

/// Whether `c` has `status` and `reason`.
pub fn is(status: &'static str, reason: &'static str) -> impl Fn(&Value) -> bool {
    move |c| c["status"] == status && c["reason"] == reason
}

/// Sources for the mirror fixture.
pub async fn sources(config_maps: &Api<ConfigMap>, names: &[String]) -> Result<()> {
    for name in names {
        let source: ConfigMap = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "kubewasm.dev/fixture": "mirror" } },
            "data": { "value": name },
        }))?;
        config_maps.create(&PostParams::default(), &source).await?;
    }
    Ok(())
}

/// Waits until each source in `names` has its mirror written by the `version` build.
pub async fn mirrored_by(
    config_maps: &Api<ConfigMap>,
    names: &[String],
    version: &str,
) -> Result<()> {
    eventually(
        &format!("{names:?} mirrored by {version}"),
        WAIT,
        || async {
            for name in names {
                let mirror = config_maps.get_opt(&format!("{name}-mirror")).await?;
                let data = mirror.and_then(|m| m.data).unwrap_or_default();
                if data.get("version").map(String::as_str) != Some(version) {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        },
    )
    .await
}

/// The reasons of the Events on the WasmController `name`.
pub async fn event_reasons(client: &Client, namespace: &str, name: &str) -> Result<Vec<String>> {
    Ok(events_about(client, namespace, name)
        .await?
        .into_iter()
        .filter_map(|e| e.reason)
        .collect())
}

/// The Events on the WasmController `name`.
pub async fn events_about(client: &Client, namespace: &str, name: &str) -> Result<Vec<Event>> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    Ok(events
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect())
}

/// `prefix-0`, `prefix-1`, ... over `range`.
pub fn names(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}-{i}")).collect()
}

/// The manifest digest a pinned reference names.
pub fn digest_of(pinned: &str) -> Result<String> {
    Ok(pinned
        .split_once('@')
        .context("a pinned reference")?
        .1
        .to_owned())
}

/// Creates the ConfigMap `name` in `namespace` holding the module at `path` under the key
/// `module.wasm`.
pub async fn module_config_map(
    client: &Client,
    namespace: &str,
    name: &str,
    path: &std::path::Path,
) -> Result<()> {
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let object: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": name },
        "binaryData": { "module.wasm": k8s_openapi::ByteString(std::fs::read(path)?) },
    }))?;
    config_maps.create(&PostParams::default(), &object).await?;
    Ok(())
}
