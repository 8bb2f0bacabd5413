//! A host restarted over converged state sends no write: what its guests apply is already in
//! the cluster, owned by their field managers, and the host tells that from its cache. The
//! Website guest owns built-in kinds (ConfigMap, Service, Deployment) and writes its CRD's
//! status.
//!
//! This is the only test of its binary: it counts the API server's writes, and another test
//! writing to the same control plane would be counted too.

use std::time::Duration;

use anyhow::{Result, ensure};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kubewasm_tests::prometheus::{apiserver_writes, has, sum};
use kubewasm_tests::{
    WAIT, apply_yaml, control_plane, eventually, free_ports, http_get, module_config, repo_root,
    with_host, with_host_args,
};

/// The kinds the Website guest writes.
const WRITTEN: [&str; 4] = ["configmaps", "services", "deployments", "websites"];

/// How long the restarted host is watched for writes once it has reconciled every Website.
const SETTLE: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_restarted_host_sends_no_write_over_converged_state() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("restart").await?;
    apply_yaml(
        &client,
        &repo_root().join("examples/website/crd.yaml"),
        None,
    )
    .await?;
    let websites = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        ns.name(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("kubewasm.dev", "v1alpha1", "Website"),
            "websites",
        ),
    );
    let config = module_config("website", ns.name());
    let samples = repo_root().join("examples/website/samples/website.yaml");
    with_host(ns.name(), &config, async |_| {
        apply_yaml(&client, &samples, Some(ns.name())).await?;
        eventually("every Website to be ready", WAIT, || async {
            let list = websites.list(&Default::default()).await?.items;
            let ready = !list.is_empty()
                && list.iter().all(|w| {
                    w.data["status"]["conditions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                });
            Ok(ready.then_some(()))
        })
        .await
    })
    .await?;
    let count = websites.list(&Default::default()).await?.items.len() as f64;

    let before = apiserver_writes(&client, &WRITTEN).await?;
    let [metrics] = free_ports()?.map(|port| format!("127.0.0.1:{port}"));
    let args = ["--metrics-bind-address", metrics.as_str()];
    with_host_args(
        &format!("{}-again", ns.name()),
        &config,
        &args,
        async |_| {
            eventually(
                "the restarted host to reconcile every Website",
                WAIT,
                || async {
                    let Ok((200, text)) = http_get(&metrics, "/metrics").await else {
                        return Ok(None);
                    };
                    let reconciled = sum(&text, "controller_runtime_reconcile_total", |labels| {
                        has(labels, "controller", "website") && has(labels, "result", "success")
                    });
                    Ok((reconciled >= count).then_some(()))
                },
            )
            .await?;
            tokio::time::sleep(SETTLE).await;
            let sent: Vec<(&str, u64)> = WRITTEN
                .into_iter()
                .zip(apiserver_writes(&client, &WRITTEN).await?)
                .zip(&before)
                .map(|((resource, after), before)| (resource, after - before))
                .filter(|(_, sent)| *sent > 0)
                .collect();
            ensure!(sent.is_empty(), "the restarted host sent writes: {sent:?}");
            Ok(())
        },
    )
    .await
}
