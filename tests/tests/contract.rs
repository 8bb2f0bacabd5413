//! What contract 0.2.0 lets a guest ask for, on the real control plane, with the heartbeat
//! fixture (`tests/guests/heartbeat`), which stamps its PodSet's status on every reconcile:
//! - `reconcile-on`: a guest that reconciles on generation and annotations is not woken by its
//!   own status writes, and still is by a spec change; one that reconciles on every update loops;
//! - adoption: an owned apply does not take over an existing object that the reconciled object
//!   does not control, unless the guest asks to adopt, and never one another object controls;
//! - status applies are forced only when the guest asks.
//!
//! A guest of contract 0.1.0 (`tests/guests/earlier`) keeps that version's rules: its owned
//! applies adopt, its status applies are forced, and it reconciles every update; it reads the
//! cache through that version's imports.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kubewasm_tests::podset::{install, podset};
use kubewasm_tests::prometheus::{has, scrape, sum};
use kubewasm_tests::{
    HostProcess, WAIT, control_plane, eventually, free_ports, guest_wasm, guest_wasm_with,
    with_started_host,
};
use serde_json::{Value, json};

/// Starts the heartbeat guest (with `features`) for `namespace`; returns the host and the
/// address of its metrics.
fn start(namespace: &str, features: &[&str]) -> Result<(HostProcess, String)> {
    start_guest(namespace, &guest_wasm_with("heartbeat", features))
}

/// Starts the guest at `wasm` for `namespace`; returns the host and the address of its metrics.
fn start_guest(namespace: &str, wasm: &Path) -> Result<(HostProcess, String)> {
    let [port] = free_ports()?;
    let metrics = format!("127.0.0.1:{port}");
    let config = format!(
        "modules:\n  - path: {}\n    namespaces: [{namespace}]\n",
        wasm.display()
    );
    let args = ["--metrics-bind-address", metrics.as_str()];
    Ok((HostProcess::start_with(namespace, &config, &args)?, metrics))
}

/// Reconciles of the heartbeat guest that ended with `result` so far.
async fn reconciles(metrics: &str, result: &str) -> Result<f64> {
    let text = scrape(metrics.parse()?).await?;
    Ok(sum(&text, "controller_runtime_reconcile_total", |labels| {
        has(labels, "result", result)
    }))
}

/// Creates the PodSet `name` for the heartbeat guest, with `annotations`.
async fn create(podsets: &Api<DynamicObject>, name: &str, annotations: Value) -> Result<String> {
    create_for(podsets, "heartbeat", name, annotations).await
}

/// Creates the PodSet `name` for the fixture `fixture`, with `annotations`.
async fn create_for(
    podsets: &Api<DynamicObject>,
    fixture: &str,
    name: &str,
    annotations: Value,
) -> Result<String> {
    let mut object = podset(name, 0)?;
    object.metadata.labels = Some(BTreeMap::from([(
        "kubewasm.dev/fixture".to_owned(),
        fixture.to_owned(),
    )]));
    object.metadata.annotations = serde_json::from_value(annotations)?;
    let created = podsets.create(&PostParams::default(), &object).await?;
    created.metadata.uid.context("created objects have a uid")
}

/// Sets annotations of the PodSet `name`.
async fn annotate(podsets: &Api<DynamicObject>, name: &str, annotations: Value) -> Result<()> {
    let patch = json!({ "metadata": { "annotations": annotations } });
    podsets
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// The PodSet's `Heartbeat` condition, once it has one.
async fn heartbeat(podsets: &Api<DynamicObject>, name: &str) -> Result<Option<Value>> {
    let object = podsets.get(name).await?;
    Ok(object.data["status"]["conditions"]
        .as_array()
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == "Heartbeat"))
        .cloned())
}

/// Takes the PodSet's `Heartbeat` condition over as another field manager, `intruder`, with a
/// forced status apply of other values (message `intruder`).
async fn intrude(podsets: &Api<DynamicObject>, name: &str) -> Result<()> {
    let intruder = json!({
        "apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet",
        "metadata": { "name": name },
        "status": { "conditions": [{
            "type": "Heartbeat", "status": "False", "reason": "Intruded",
            "message": "intruder", "lastTransitionTime": "2026-01-02T00:00:00Z",
        }] },
    });
    let params = PatchParams::apply("intruder").force();
    podsets
        .patch_status(name, &params, &Patch::Apply(&intruder))
        .await?;
    Ok(())
}

/// Waits for a Heartbeat condition of the PodSet `name` for which `accept` holds.
async fn heartbeat_where(
    podsets: &Api<DynamicObject>,
    name: &str,
    what: &str,
    accept: impl Fn(&Value) -> bool,
) -> Result<Value> {
    eventually(what, WAIT, || async {
        Ok(heartbeat(podsets, name).await?.filter(|c| accept(c)))
    })
    .await
}

/// Waits for a Warning `reason` about the PodSet `name`; returns its note.
async fn warning(client: &Client, namespace: &str, name: &str, reason: &str) -> Result<String> {
    let events = Api::<Event>::namespaced(client.clone(), namespace);
    eventually(&format!("a {reason} event about {name}"), WAIT, || async {
        let listed = events.list(&ListParams::default()).await?;
        Ok(listed.items.into_iter().find_map(|e| {
            let about = e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name);
            (about && e.reason.as_deref() == Some(reason)).then(|| e.note.unwrap_or_default())
        }))
    })
    .await
}

/// The uid of the controller owner of a ConfigMap.
fn controller_of(config_map: &ConfigMap) -> Option<String> {
    config_map
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.clone())
}

/// How long the tests watch a quiet guest for reconciles it should not run.
const QUIET: Duration = Duration::from_secs(3);

#[tokio::test]
async fn a_guest_reconciling_on_generation_is_not_woken_by_its_own_status_writes() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("reconcile-on").await?;
    let (podsets, _, _) = install(&client, ns.name()).await?;
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());

    // Every update reconciled: each status write wakes the guest again.
    let (host, metrics) = start(ns.name(), &["every-update"])?;
    with_started_host(host, async |_| {
        create(&podsets, "looping", json!({})).await?;
        heartbeat_where(&podsets, "looping", "a first heartbeat", |_| true).await?;
        let before = reconciles(&metrics, "success").await?;
        tokio::time::sleep(QUIET).await;
        let after = reconciles(&metrics, "success").await?;
        anyhow::ensure!(
            after - before >= 5.0,
            "a guest reconciling every update ran {} reconciles in {QUIET:?}: its status writes \
             should wake it again and again",
            after - before
        );
        Ok(())
    })
    .await?;

    let (host, metrics) = start(ns.name(), &[])?;
    with_started_host(host, async |_| {
        create(&podsets, "quiet", json!({})).await?;
        heartbeat_where(&podsets, "quiet", "a first heartbeat", |_| true).await?;
        // Settled: the reconciles of the creation and of the owned ConfigMap's creation.
        let settled = eventually("the reconciles to settle", WAIT, || async {
            let before = reconciles(&metrics, "success").await?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let after = reconciles(&metrics, "success").await?;
            Ok((after == before).then_some(after))
        })
        .await?;
        tokio::time::sleep(QUIET).await;
        let after = reconciles(&metrics, "success").await?;
        anyhow::ensure!(
            after == settled,
            "{} reconciles in {QUIET:?} with nothing changed but the guest's own status",
            after - settled
        );

        // A spec change bumps the generation: reconciled. The heartbeat to tell it by is the
        // last one before it, not the first: the owned ConfigMap's creation wrote another.
        let settled_heartbeat = heartbeat(&podsets, "quiet").await?.context("a heartbeat")?;
        let patch = json!({ "spec": { "replicas": 1 } });
        podsets
            .patch("quiet", &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        heartbeat_where(
            &podsets,
            "quiet",
            "a heartbeat after the spec change",
            |c| c["message"] != settled_heartbeat["message"],
        )
        .await?;
        let data = config_maps.get("quiet").await?.data.unwrap_or_default();
        anyhow::ensure!(
            data.get("generation").map(String::as_str) == Some("2"),
            "the owned ConfigMap holds {data:?}, not generation 2"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_owned_apply_takes_over_an_existing_object_only_when_the_guest_adopts_it() -> Result<()>
{
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("adopt").await?;
    let (podsets, _, _) = install(&client, ns.name()).await?;
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    let foreign: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "adoptee" }, "data": { "owner": "someone" },
    }))?;
    config_maps.create(&PostParams::default(), &foreign).await?;

    let (host, _) = start(ns.name(), &[])?;
    with_started_host(host, async |_| {
        let uid = create(&podsets, "adoptee", json!({})).await?;
        let note = warning(&client, ns.name(), "adoptee", "ErrResourceExists").await?;
        anyhow::ensure!(
            note.contains("is not controlled by PodSet adoptee"),
            "unexpected note: {note}"
        );
        let untouched = config_maps.get("adoptee").await?;
        anyhow::ensure!(
            controller_of(&untouched).is_none()
                && untouched
                    .data
                    .as_ref()
                    .and_then(|d| d.get("generation"))
                    .is_none(),
            "the ConfigMap nobody controls was taken over: {:?}",
            untouched.metadata
        );

        annotate(&podsets, "adoptee", json!({ "kubewasm.dev/adopt": "true" })).await?;
        eventually("the adopted ConfigMap", WAIT, || async {
            let adopted = config_maps.get("adoptee").await?;
            Ok((controller_of(&adopted).as_deref() == Some(uid.as_str())).then_some(()))
        })
        .await?;

        // Controlled by the PodSet `adoptee`: no other PodSet takes it, adopting or not.
        let taken: ConfigMap = serde_json::from_value(json!({
            "metadata": { "name": "taken", "ownerReferences": [{
                "apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet", "name": "adoptee",
                "uid": uid, "controller": true,
            }] },
        }))?;
        config_maps.create(&PostParams::default(), &taken).await?;
        create(&podsets, "taken", json!({ "kubewasm.dev/adopt": "true" })).await?;
        let note = warning(&client, ns.name(), "taken", "ErrResourceExists").await?;
        anyhow::ensure!(
            note.contains("is controlled by PodSet adoptee"),
            "unexpected note: {note}"
        );
        let kept = config_maps.get("taken").await?;
        anyhow::ensure!(
            controller_of(&kept).as_deref() == Some(uid.as_str()),
            "the ConfigMap changed controller: {:?}",
            kept.metadata.owner_references
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_status_apply_takes_over_another_managers_fields_only_when_forced() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("status-force").await?;
    let (podsets, _, _) = install(&client, ns.name()).await?;

    let (host, metrics) = start(ns.name(), &[])?;
    with_started_host(host, async |_| {
        create(&podsets, "contested", json!({})).await?;
        heartbeat_where(&podsets, "contested", "a first heartbeat", |_| true).await?;
        // Another manager takes the condition's fields over.
        intrude(&podsets, "contested").await?;
        let errors = reconciles(&metrics, "error").await?;
        annotate(&podsets, "contested", json!({ "kubewasm.dev/poke": "1" })).await?;
        eventually("a reconcile failing on the conflict", WAIT, || async {
            Ok((reconciles(&metrics, "error").await? > errors).then_some(()))
        })
        .await?;
        let kept = heartbeat(&podsets, "contested").await?;
        anyhow::ensure!(
            kept.as_ref().is_some_and(|c| c["message"] == "intruder"),
            "an apply-status without force took the fields over: {kept:?}"
        );

        annotate(
            &podsets,
            "contested",
            json!({ "kubewasm.dev/force-status": "true" }),
        )
        .await?;
        heartbeat_where(&podsets, "contested", "the forced heartbeat", |c| {
            c["reason"] == "Reconciled"
        })
        .await?;
        Ok(())
    })
    .await
}

#[test]
fn the_cache_imports_of_every_contract_version_link() -> Result<()> {
    for (guest, contract) in [
        ("echo", "0.2.1"),
        ("previous", "0.2.0"),
        ("earlier", "0.1.0"),
    ] {
        let output = std::process::Command::new(kubewasm_tests::host_binary())
            .arg("check")
            .arg(guest_wasm(guest))
            .output()?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        ensure!(
            output.status.success(),
            "{guest}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        ensure!(
            stdout.contains(&format!("kubewasm:controller/guest@{contract}")),
            "{guest}: {stdout}"
        );
    }
    Ok(())
}

/// A module built against contract 0.2.0 is served by the current imports: its cache reads and
/// writes work as they did, rendered offline through the host's own call path.
#[test]
fn a_guest_of_contract_0_2_0_runs_on_the_current_imports() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let config_map = |name: &str| {
        json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": name, "namespace": "shop", "resourceVersion": "1",
            "labels": { "kubewasm.dev/fixture": "previous" } } })
    };
    let object = dir.path().join("object.json");
    std::fs::write(&object, config_map("one").to_string())?;
    let cache = dir.path().join("cache.json");
    let items = json!({ "apiVersion": "v1", "kind": "List",
                        "items": [config_map("one"), config_map("two")] });
    std::fs::write(&cache, items.to_string())?;
    let output = std::process::Command::new(kubewasm_tests::host_binary())
        .arg("render")
        .arg(guest_wasm("previous"))
        .arg("--object")
        .arg(&object)
        .arg("--cache")
        .arg(&cache)
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    ensure!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    ensure!(stdout.contains("listed: '2'"), "{stdout}");
    Ok(())
}

#[tokio::test]
async fn a_guest_of_contract_0_1_keeps_its_rules() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("earlier").await?;
    let (podsets, _, _) = install(&client, ns.name()).await?;
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    let foreign: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "legacy" }, "data": { "owner": "someone" },
    }))?;
    config_maps.create(&PostParams::default(), &foreign).await?;

    let (host, _) = start_guest(ns.name(), &guest_wasm("earlier"))?;
    with_started_host(host, async |_| {
        let uid = create_for(&podsets, "earlier", "legacy", json!({})).await?;
        let adopted = eventually("the adopted ConfigMap", WAIT, || async {
            let adopted = config_maps.get("legacy").await?;
            Ok((controller_of(&adopted).as_deref() == Some(uid.as_str())).then_some(adopted))
        })
        .await?;
        // 0.1.0's cache reads found the PodSet by name and by label.
        let read = adopted.data.unwrap_or_default().remove("read");
        assert_eq!(read, Some(format!("{uid} 1")));
        heartbeat_where(&podsets, "legacy", "a first heartbeat", |_| true).await?;
        // Another manager takes the condition over; its write is an update, which 0.1.0
        // reconciles, and the forced status apply takes the fields back.
        intrude(&podsets, "legacy").await?;
        heartbeat_where(&podsets, "legacy", "the heartbeat taken back", |c| {
            c["reason"] == "Reconciled"
        })
        .await?;
        Ok(())
    })
    .await
}
