//! A guest's finalizer on the real control plane: added before the guest's first reconcile,
//! removed once `finalize` succeeds, also when `finalize` writes the object itself; an object
//! whose `finalize` keeps failing is reported, with the reason, in the log and the metrics.

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kubewasm_tests::prometheus::{scrape, sum};
use kubewasm_tests::{
    WAIT, control_plane, eventually, free_ports, guest_wasm_with, module_config, with_host,
    with_host_args,
};
use serde_json::json;

/// Creates the ConfigMap `name` for the stamp guest and waits until it carries its finalizer.
async fn create_finalized(config_maps: &Api<ConfigMap>, name: &str) -> Result<()> {
    let object: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "kubewasm.dev/fixture": "stamp" } },
    }))?;
    config_maps.create(&PostParams::default(), &object).await?;
    eventually("the guest's finalizer on the object", WAIT, || async {
        let object = config_maps.get(name).await?;
        let finalizers = object.metadata.finalizers.unwrap_or_default();
        Ok(finalizers
            .contains(&"kubewasm.dev/stamp".to_owned())
            .then_some(()))
    })
    .await
}

/// How long a deleted object may stay Terminating once its guest has finalized it.
const RELEASE: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_guest_that_writes_its_own_object_in_finalize_lets_it_go() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("stamp").await?;
    let config_maps = Api::<ConfigMap>::namespaced(client, ns.name());
    with_host(ns.name(), &module_config("stamp", ns.name()), async |_| {
        create_finalized(&config_maps, "stamped").await?;

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

#[tokio::test]
async fn an_object_whose_finalize_keeps_failing_is_reported_in_the_log_and_the_metrics()
-> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("stuck").await?;
    let config_maps = Api::<ConfigMap>::namespaced(client, ns.name());
    let [port] = free_ports()?;
    let address = format!("127.0.0.1:{port}");
    let config = format!(
        "modules:\n  - path: {}\n    namespaces: [{}]\n",
        guest_wasm_with("stamp", &["stuck"]).display(),
        ns.name()
    );
    let args = ["--metrics-bind-address", address.as_str()];
    let finalizing = async |name: &str| -> Result<f64> {
        Ok(sum(&scrape(address.parse()?).await?, name, |_| true))
    };
    with_host_args(ns.name(), &config, &args, async |host| {
        create_finalized(&config_maps, "blocked").await?;
        config_maps
            .delete("blocked", &DeleteParams::default())
            .await?;

        eventually("the stuck object in the metrics", WAIT, || async {
            let objects = finalizing("kubewasm_guest_finalizing_objects").await?;
            let oldest = finalizing("kubewasm_guest_finalizing_oldest_seconds").await?;
            Ok((objects == 1.0 && oldest >= 2.0).then_some(()))
        })
        .await?;
        let log = host.log();
        let said = log.lines().any(|line| {
            line.contains("terminating for") && line.contains("the clean-up is blocked")
        });
        anyhow::ensure!(said, "no log line says why the object stays Terminating");

        // Released by hand: no longer counted.
        let release = json!({ "metadata": { "finalizers": null } });
        config_maps
            .patch("blocked", &PatchParams::default(), &Patch::Merge(&release))
            .await?;
        eventually("the released object out of the metrics", WAIT, || async {
            let objects = finalizing("kubewasm_guest_finalizing_objects").await?;
            Ok((objects == 0.0).then_some(()))
        })
        .await
    })
    .await
}
