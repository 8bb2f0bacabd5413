//! The PodSet example's custom resource, as the tests create and read it.

use anyhow::Result;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Api, Client};
use serde_json::json;

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
