//! More reconciles at once than the host has instances: a call waits for an instance, and no
//! guest is told it trapped because other calls hold them all.
//!
//! The host keeps at most 1000 guest instances alive at once. The sleep guest runs 1024 workers
//! over more objects than that, and each reconcile waits in the host until its deadline, so every
//! instance is taken while workers still ask for more.

use anyhow::Result;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use kubewasm_tests::prometheus::{scrape, sum};
use kubewasm_tests::{WAIT, control_plane, eventually, free_ports, guest_wasm, with_host_args};
use serde_json::json;

/// More than the host's instances.
const OBJECTS: usize = 1030;

#[tokio::test]
async fn reconciles_beyond_the_host_s_instances_wait_for_one_and_none_traps() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("capacity").await?;
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    futures::stream::iter(0..OBJECTS)
        .map(|i| {
            let config_maps = config_maps.clone();
            async move {
                let object = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": { "name": format!("s{i}"), "labels": { "kubewasm.dev/fixture": "sleep" } },
                }))?;
                config_maps.create(&PostParams::default(), &object).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(16)
        .try_collect::<()>()
        .await?;
    let [port] = free_ports()?;
    let address = format!("127.0.0.1:{port}");
    let config = format!(
        "modules:\n  - path: {}\n    namespaces: [{}]\n    maxConcurrency: 1024\n    limits: {{timeoutMs: 2000}}\n",
        guest_wasm("sleep").display(),
        ns.name()
    );
    let args = ["--metrics-bind-address", address.as_str()];
    with_host_args(ns.name(), &config, &args, async |_| {
        // Every object had a reconcile that ran to its deadline.
        let text = eventually(
            &format!("{OBJECTS} reconciles to time out"),
            WAIT,
            || async {
                let text = scrape(address.parse()?).await?;
                let timeouts = sum(&text, "kubewasm_guest_timeouts_total", |_| true);
                Ok((timeouts >= OBJECTS as f64).then_some(text))
            },
        )
        .await?;
        let traps = sum(&text, "kubewasm_guest_traps_total", |_| true);
        anyhow::ensure!(traps == 0.0, "{traps} reconciles were told they trapped");
        Ok(())
    })
    .await
}
