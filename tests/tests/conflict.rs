//! A write the API server refuses with 409 Conflict fails the reconcile, which the host retries
//! with backoff until the write goes through; the host never forces a write the guest did not
//! ask to force.

use anyhow::{Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use kubewasm_tests::{HostProcess, WAIT, control_plane, eventually, module_config, with_host};
use serde_json::json;

/// Server-side applies the ConfigMap `name` as `manager`, with `fields` (labels, data) added.
async fn apply_as(
    config_maps: &Api<ConfigMap>,
    manager: &str,
    name: &str,
    fields: serde_json::Value,
) -> Result<()> {
    let mut object = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": name },
    });
    json_patch::merge(&mut object, &fields);
    config_maps
        .patch(name, &PatchParams::apply(manager), &Patch::Apply(&object))
        .await?;
    Ok(())
}

async fn mirror_value(config_maps: &Api<ConfigMap>) -> Result<Option<String>> {
    Ok(config_maps
        .get_opt("source-mirror")
        .await?
        .and_then(|c| c.data)
        .and_then(|d| d.get("value").cloned()))
}

#[tokio::test]
async fn a_conflicting_write_is_retried_until_it_succeeds() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("conflict").await?;
    with_host(
        ns.name(),
        &module_config("mirror", ns.name()),
        async |host| exercise(&client, ns.name(), host).await,
    )
    .await
}

async fn exercise(client: &Client, namespace: &str, host: &HostProcess) -> Result<()> {
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    // Another manager owns the field the guest wants to set, with a different value.
    apply_as(
        &config_maps,
        "intruder",
        "source-mirror",
        json!({ "data": { "value": "theirs" } }),
    )
    .await?;
    apply_as(
        &config_maps,
        "tests",
        "source",
        json!({
            "metadata": { "labels": { "kubewasm.dev/fixture": "mirror" } },
            "data": { "value": "ours" },
        }),
    )
    .await?;

    // Each attempt is refused with 409 and retried with backoff.
    let key = format!("key={namespace}/source");
    eventually("three conflicting attempts", WAIT, || async {
        let failures = host
            .log()
            .lines()
            .filter(|l| l.contains("reconcile failed") && l.contains("409 Conflict"))
            .filter(|l| l.contains(&key))
            .count();
        Ok((failures >= 3).then_some(()))
    })
    .await?;
    ensure!(
        mirror_value(&config_maps).await?.as_deref() == Some("theirs"),
        "the host did not force the guest's apply"
    );

    // Once the other manager lets go of the field, a retry succeeds.
    apply_as(&config_maps, "intruder", "source-mirror", json!({})).await?;
    eventually("the mirror to hold the source's value", WAIT, || async {
        Ok((mirror_value(&config_maps).await?.as_deref() == Some("ours")).then_some(()))
    })
    .await?;
    let mirror = config_maps.get("source-mirror").await?;
    let managers: Vec<_> = mirror
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    ensure!(
        managers.iter().any(|m| m == "kubewasm-mirror"),
        "the guest's field manager owns the value: {managers:?}"
    );
    Ok(())
}
