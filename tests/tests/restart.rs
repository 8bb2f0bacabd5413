//! A host over converged state sends no write, whether it applied that state itself and
//! reconciles it again on resync, or was restarted over it: what its guests apply is already in
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
    with_host_args,
};

/// The kinds the Website guest writes.
const WRITTEN: [&str; 4] = ["configmaps", "services", "deployments", "websites"];

/// How long the restarted host is watched for writes once it has reconciled every Website.
const SETTLE: Duration = Duration::from_secs(5);

/// The first host's resync period, in seconds.
const RESYNC_SECONDS: u32 = 2;

/// Successful reconciles of the Website guest, from a host's metrics at `address`.
async fn reconciled(address: &str) -> Option<f64> {
    let Ok((200, text)) = http_get(address, "/metrics").await else {
        return None;
    };
    Some(sum(&text, "controller_runtime_reconcile_total", |labels| {
        has(labels, "controller", "website") && has(labels, "result", "success")
    }))
}

/// Applies the Website guest did not send, from a host's metrics at `address`.
async fn elided(address: &str) -> Result<f64> {
    let (_, text) = http_get(address, "/metrics").await?;
    Ok(sum(&text, "kubewasm_writes_elided_total", |labels| {
        has(labels, "controller", "website")
    }))
}

/// The writes of each of [`WRITTEN`] since `before`, those above zero.
async fn sent_since(client: &kube::Client, before: &[u64]) -> Result<Vec<(&'static str, u64)>> {
    Ok(WRITTEN
        .into_iter()
        .zip(apiserver_writes(client, &WRITTEN).await?)
        .zip(before)
        .map(|((resource, after), before)| (resource, after - before))
        .filter(|(_, sent)| *sent > 0)
        .collect())
}

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
    let resyncing = format!("{config}    resyncSeconds: {RESYNC_SECONDS}\n");
    let samples = repo_root().join("examples/website/samples/website.yaml");
    let [first_metrics] = free_ports()?.map(|port| format!("127.0.0.1:{port}"));
    let first_args = ["--metrics-bind-address", first_metrics.as_str()];
    with_host_args(ns.name(), &resyncing, &first_args, async |_| {
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
        .await?;
        // Converged: the host's own applies are all it knows of these objects. Each resync
        // reconciles every Website again, and every apply must be told unchanged.
        let count = websites.list(&Default::default()).await?.items.len() as f64;
        let (before, start) = (
            apiserver_writes(&client, &WRITTEN).await?,
            reconciled(&first_metrics).await,
        );
        let elided_before = elided(&first_metrics).await?;
        let start = start.unwrap_or_default();
        eventually("two resyncs of every Website", WAIT, || async {
            let now = reconciled(&first_metrics).await.unwrap_or_default();
            Ok((now >= start + 2.0 * count).then_some(()))
        })
        .await?;
        let sent = sent_since(&client, &before).await?;
        ensure!(sent.is_empty(), "the resyncing host sent writes: {sent:?}");
        let elided = elided(&first_metrics).await? - elided_before;
        ensure!(
            elided >= 2.0 * count,
            "only {elided} applies were elided over two resyncs"
        );
        Ok(())
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
                    let reconciled = reconciled(&metrics).await.unwrap_or_default();
                    Ok((reconciled >= count).then_some(()))
                },
            )
            .await?;
            tokio::time::sleep(SETTLE).await;
            let sent = sent_since(&client, &before).await?;
            ensure!(sent.is_empty(), "the restarted host sent writes: {sent:?}");
            Ok(())
        },
    )
    .await
}
