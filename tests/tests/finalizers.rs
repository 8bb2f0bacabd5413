//! A guest's finalizer on the real control plane: added before the guest's first reconcile,
//! removed once `finalize` succeeds, also when `finalize` writes the object itself.

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use kubewasm_tests::{WAIT, control_plane, eventually, module_config, with_host};
use serde_json::json;

/// How long a deleted object may stay Terminating once its guest has finalized it.
const RELEASE: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_guest_that_writes_its_own_object_in_finalize_lets_it_go() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("stamp").await?;
    let config_maps = Api::<ConfigMap>::namespaced(client, ns.name());
    with_host(ns.name(), &module_config("stamp", ns.name()), async |_| {
        let object: ConfigMap = serde_json::from_value(json!({
            "metadata": { "name": "stamped", "labels": { "kubewasm.dev/fixture": "stamp" } },
        }))?;
        config_maps.create(&PostParams::default(), &object).await?;
        eventually("the guest's finalizer on the object", WAIT, || async {
            let object = config_maps.get("stamped").await?;
            let finalizers = object.metadata.finalizers.unwrap_or_default();
            Ok(finalizers
                .contains(&"kubewasm.dev/stamp".to_owned())
                .then_some(()))
        })
        .await?;

        config_maps
            .delete("stamped", &DeleteParams::default())
            .await?;
        // Each finalize changes the object: removing the finalizer with the resourceVersion read
        // before finalize would conflict, again and again.
        eventually("the finalized object to be gone", RELEASE, || async {
            let object = config_maps.get_opt("stamped").await?;
            Ok(object.is_none().then_some(()))
        })
        .await
    })
    .await
}
