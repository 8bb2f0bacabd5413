//! Sharding: replicas started with `--sharded` share a guest's keys. Three hosts converge the
//! sources of the `ledger` guest and the PodSets of the podset example between them; a fourth
//! joins and takes its share; one stopped with SIGTERM hands its keys over; one killed loses its
//! keys once its membership Lease expires; the leader, which runs the sharder, stopped with
//! SIGTERM, leaves the last one to shard and hold every key. Through it all, the reconciles
//! every host logs show that no key was ever reconciled by two hosts at once, every source ends
//! mirrored with its last value, every PodSet has exactly its replicas, no pod was ever created
//! twice, and every pod carries its PodSet's shard label.
//!
//! A sharder whose label writes the cluster refuses backs off per object, and says so.
//!
//! Each guest has a ring of its own: the members that run it. A guest that only a replica that
//! does not lead runs is sharded there, over that replica alone; a guest whose module a replica
//! removes leaves that replica's ring, and its keys move to the others at once.

use std::collections::{BTreeSet, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use kubewasm_tests::podset::{self, install};
use kubewasm_tests::prometheus::{has, scrape, sum};
use kubewasm_tests::shards::{
    LABEL, Labels, Replica, converged, create_sources, holders, holding, never_at_once,
    podsets_labelled, print_logs_if_failed, until_holding, update,
};
use kubewasm_tests::wasmctl::{
    condition, crd_applied, is, mirrored_by, module_config_map, sources, until_condition,
    wasm_controller, watching,
};
use kubewasm_tests::{
    HostProcess, Recorder, WAIT, apply_yaml_text, control_plane, eventually, free_ports,
    guest_wasm, wasm_controllers, with_started_host,
};
use serde_json::json;

const PODSETS: usize = 12;
const PODSET_LABEL: &str = "shard.kubewasm.dev/podset";

#[tokio::test]
async fn replicas_share_keys_hand_over_and_never_reconcile_one_key_at_once() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("shards").await?;
    let config = format!(
        "modules:\n  - path: {}\n    namespaces: [{ns}]\n    limits:\n      logLinesPerSecond: 100000\n  \
         - path: {}\n    namespaces: [{ns}]\n",
        guest_wasm("ledger").display(),
        guest_wasm("podset").display(),
        ns = ns.name()
    );
    let (podsets, pods, recorder) = install(&client, ns.name()).await?;
    let args = [
        "--sharded",
        "--leader-election-namespace",
        ns.name(),
        "--leader-election-id",
        "ledger-ring",
        "--leader-elect-lease-duration",
        "4s",
        "--leader-elect-renew-deadline",
        "3s",
        "--leader-elect-retry-period",
        "1s",
    ];
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    let mut replicas = Vec::new();
    for name in ["shard-a", "shard-b", "shard-c"] {
        replicas.push(Replica::start(name, &config, &args).await?);
    }
    let mut owners = Vec::new();
    for i in 0..PODSETS {
        owners.push(podset::create(&podsets, &format!("ps-{i}"), 2).await?);
    }
    let labels = Labels::record(config_maps.clone(), LABEL);
    let cluster = Cluster {
        config_maps,
        podsets,
        pods,
        recorder,
        owners,
        seen: Mutex::new(HashSet::new()),
        labels,
    };
    let result = exercise(cluster, &config, &args, &mut replicas).await;
    print_logs_if_failed(result, &replicas)
}

/// The objects the replicas reconcile, and every pod seen.
struct Cluster {
    config_maps: Api<ConfigMap>,
    podsets: Api<DynamicObject>,
    pods: Api<Pod>,
    recorder: Recorder,
    /// The PodSets' uids.
    owners: Vec<String>,
    seen: Mutex<HashSet<String>>,
    /// Every shard label each source was seen with.
    labels: Labels,
}

impl Cluster {
    /// Waits until every source and every PodSet is labelled for one of `members`, every
    /// source's child holds `value`, every PodSet has `replicas` live pods and says so, and
    /// every pod is labelled for its PodSet's member.
    async fn converged(
        &self,
        value: &str,
        replicas: usize,
        members: &BTreeSet<String>,
    ) -> Result<()> {
        converged(&self.config_maps, LABEL, value, members).await?;
        podset::converged(
            &self.podsets,
            &self.pods,
            &self.owners,
            replicas,
            &self.seen,
        )
        .await?;
        podsets_labelled((&self.podsets, &self.pods), PODSET_LABEL, members).await
    }

    /// Sets every PodSet's replicas.
    async fn scale(&self, replicas: usize) -> Result<()> {
        for i in 0..PODSETS {
            let patch = json!({ "spec": { "replicas": replicas } });
            self.podsets
                .patch(
                    &format!("ps-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
        }
        Ok(())
    }
}

async fn exercise(
    cluster: Cluster,
    config: &str,
    args: &[&str],
    replicas: &mut Vec<Replica>,
) -> Result<()> {
    let config_maps = &cluster.config_maps;
    create_sources(config_maps).await?;
    let members = |replicas: &[Replica]| -> BTreeSet<String> {
        replicas
            .iter()
            .filter(|r| r.process.is_some())
            .map(|r| r.member.clone())
            .collect()
    };
    cluster.converged("v0", 2, &members(replicas)).await?;
    let holders = holders(config_maps, LABEL).await?;
    ensure!(
        holders.values().collect::<BTreeSet<_>>().len() == 3,
        "the sources are not shared by the three replicas: {holders:?}"
    );

    // A fourth replica joins: it takes its share, and the keys it takes are drained first.
    replicas.push(Replica::start("shard-d", config, args).await?);
    let joined = replicas[3].member.clone();
    until_holding(config_maps, LABEL, &joined).await?;
    update(config_maps, "v1").await?;
    cluster.scale(3).await?;
    cluster.converged("v1", 3, &members(replicas)).await?;

    // One stops with SIGTERM: its keys go to the others at once.
    replicas[1].terminate().await?;
    update(config_maps, "v2").await?;
    cluster.converged("v2", 3, &members(replicas)).await?;

    // One is killed: its keys move once its Lease expires.
    replicas[2].kill().await?;
    update(config_maps, "v3").await?;
    cluster.scale(1).await?;
    cluster.converged("v3", 1, &members(replicas)).await?;

    // The leader stops: the last replica leads, shards, and takes every key.
    let leader = replicas
        .iter()
        .position(|r| r.process.is_some() && r.log().contains("became leader"))
        .context("a running replica leads")?;
    ensure!(leader != 3, "the replica that joined last leads");
    replicas[leader].terminate().await?;
    update(config_maps, "v4").await?;
    cluster.scale(2).await?;
    cluster.converged("v4", 2, &members(replicas)).await?;
    ensure!(
        replicas[3].log().contains("became leader"),
        "the last replica took the sharder over"
    );
    cluster.labels.held_within_lease(replicas, 4)?;

    for replica in replicas.iter_mut() {
        if replica.process.is_some() {
            replica.terminate().await?;
        }
    }
    // Each PodSet's pods were created 2, then 1, then none, then 1 more: any more is a pod
    // created twice.
    podset::created_once(&cluster.seen, &cluster.recorder, PODSETS, 2 + 1 + 1, 0).await?;
    never_at_once(replicas, 5)
}

/// A policy that refuses to label a mirror source in `namespace` for any member, as an
/// admission policy of a cluster's own might.
fn refusing_shard_labels(namespace: &str) -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: no-shard-labels-{namespace}}}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [UPDATE]
      resources: [configmaps]
  validations:
  - expression: >-
      !has(object.metadata.labels) || !('kubewasm.dev/fixture' in object.metadata.labels) ||
      !object.metadata.labels.exists(k, k.startsWith('shard.kubewasm.dev/'))
    reason: Forbidden
    message: no shard labels here
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: no-shard-labels-{namespace}}}
spec:
  policyName: no-shard-labels-{namespace}
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {{kubernetes.io/metadata.name: {namespace}}}
"#
    )
}

/// PATCH requests on ConfigMaps the API server refused with 403, from its `/metrics`.
async fn refused_patches(client: &kube::Client) -> Result<u64> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let metrics = client.request_text(request).await?;
    let refused = sum(&metrics, "apiserver_request_total", |labels| {
        has(labels, "verb", "PATCH")
            && has(labels, "resource", "configmaps")
            && has(labels, "code", "403")
    });
    Ok(refused as u64)
}

/// A sharder whose label writes the cluster refuses sends each object's write again after a
/// pause that doubles (1 s to 5 min), not every second; says so in its metrics and in the
/// WasmController's `ShardLabels` condition; and labels every object once the cluster lets it.
#[tokio::test]
async fn refused_label_writes_back_off_per_object_and_show_until_they_land() -> Result<()> {
    const SOURCES: usize = 4;
    const WINDOW: Duration = Duration::from_secs(24);
    let client = crd_applied().await?;
    let ns = control_plane().namespace("refused").await?;
    apply_yaml_text(&client, &refusing_shard_labels(ns.name()), None).await?;
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    let names: Vec<String> = (0..SOURCES).map(|i| format!("source-{i}")).collect();
    sources(&config_maps, &names).await?;
    // The policy is in force once a shard label is refused.
    let probe = json!({ "metadata": { "labels": { "shard.kubewasm.dev/probe": "x" } } });
    eventually("the policy to refuse shard labels", WAIT, || async {
        let patched = config_maps
            .patch(&names[0], &PatchParams::default(), &Patch::Merge(&probe))
            .await;
        Ok(matches!(patched, Err(kube::Error::Api(s)) if s.code == 403).then_some(()))
    })
    .await?;
    let module = json!({ "configMap": { "name": "mirror", "key": "module.wasm" } });
    let [metrics] = free_ports()?.map(|port| format!("127.0.0.1:{port}"));
    let args = [
        "--sharded",
        "--leader-election-namespace",
        ns.name(),
        "--metrics-bind-address",
        &metrics,
    ];
    let host = HostProcess::start_with("shard-refused", &watching(&[ns.name()]), &args)?;
    with_started_host(host, async |_| {
        module_config_map(&client, ns.name(), "mirror", &guest_wasm("mirror")).await?;
        let api = wasm_controllers(&client, ns.name());
        api.create(
            &PostParams::default(),
            &wasm_controller("mirror", json!({ "module": module }))?,
        )
        .await?;
        let address = metrics.parse()?;
        let backing_off = || async {
            let text = scrape(address).await?;
            anyhow::Ok(sum(&text, "kubewasm_shard_objects_backing_off", |_| true) as usize)
        };
        eventually("every source to back off", WAIT, || async {
            Ok((backing_off().await? == SOURCES).then_some(()))
        })
        .await?;
        let before = refused_patches(&client).await?;
        tokio::time::sleep(WINDOW).await;
        let sent = refused_patches(&client).await? - before;
        println!("{sent} refused label writes of {SOURCES} sources in {WINDOW:?}");
        // Sent again 1, 2, 4, 8, 16 s after each failure: at most 5 a source in 24 s, where a
        // write a second would be 24.
        ensure!(
            (1..=5 * SOURCES as u64).contains(&sent),
            "{sent} refused label writes of {SOURCES} sources in {WINDOW:?}"
        );
        let failing =
            until_condition(&api, "mirror", "ShardLabels", is("False", "WriteFailed")).await?;
        let message = condition(&failing, "ShardLabels").unwrap_or_default()["message"].to_string();
        ensure!(
            message.contains("no shard labels here"),
            "the condition names the refusal: {message}"
        );
        // Allowed again: every source is labelled and mirrored, and the condition is gone.
        let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
        let binding = format!("no-shard-labels-{}", ns.name());
        bindings.delete(&binding, &DeleteParams::default()).await?;
        mirrored_by(&config_maps, &names, "v1").await?;
        eventually("the ShardLabels condition to go", WAIT, || async {
            let object = api.get("mirror").await?;
            let gone = object.data["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().all(|c| c["type"] != "ShardLabels"));
            Ok(gone.then_some(()))
        })
        .await?;
        ensure!(backing_off().await? == 0, "no source backs off any more");
        Ok(())
    })
    .await
}

/// Copies the modules `guests` into a folder of their own; returns the folder and the
/// configuration that runs them in `namespace`.
fn modules_of(guests: &[&str], namespace: &str) -> Result<(tempfile::TempDir, String)> {
    let dir = tempfile::tempdir()?;
    let mut config = String::from("modules:\n");
    for guest in guests {
        let path = dir.path().join(format!("{guest}.wasm"));
        std::fs::copy(guest_wasm(guest), &path)?;
        config.push_str(&format!(
            "  - path: {}\n    namespaces: [{namespace}]\n    limits:\n      logLinesPerSecond: 100000\n",
            path.display()
        ));
    }
    Ok((dir, config))
}

#[tokio::test]
async fn each_guest_is_sharded_over_the_members_that_run_it() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("rings").await?;
    let (podsets, pods, recorder) = install(&client, ns.name()).await?;
    let args = [
        "--sharded",
        "--leader-election-namespace",
        ns.name(),
        "--leader-election-id",
        "guest-rings",
        "--leader-elect-lease-duration",
        "4s",
        "--leader-elect-renew-deadline",
        "3s",
        "--leader-elect-retry-period",
        "1s",
    ];
    // The first replica leads and runs the ledger only; the second runs both guests.
    let (_a_dir, a_config) = modules_of(&["ledger"], ns.name())?;
    let (b_dir, b_config) = modules_of(&["ledger", "podset"], ns.name())?;
    let mut replicas = vec![Replica::start("ring-a", &a_config, &args).await?];
    eventually("ring-a to lead", WAIT, || async {
        Ok(replicas[0].log().contains("became leader").then_some(()))
    })
    .await?;
    replicas.push(Replica::start("ring-b", &b_config, &args).await?);
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    let result = rings(
        &config_maps,
        (&podsets, &pods, &recorder),
        b_dir.path(),
        &mut replicas,
    )
    .await;
    print_logs_if_failed(result, &replicas)
}

async fn rings(
    config_maps: &Api<ConfigMap>,
    (podsets, pods, recorder): (&Api<DynamicObject>, &Api<Pod>, &Recorder),
    b_dir: &std::path::Path,
    replicas: &mut [Replica],
) -> Result<()> {
    let (a, b) = (replicas[0].member.clone(), replicas[1].member.clone());
    let both = BTreeSet::from([a.clone(), b.clone()]);
    create_sources(config_maps).await?;
    let mut owners = Vec::new();
    for i in 0..PODSETS {
        owners.push(podset::create(podsets, &format!("ps-{i}"), 2).await?);
    }
    let seen = Mutex::new(HashSet::new());
    // The PodSets are sharded by the replica that runs their guest, and are all its.
    podset::converged(podsets, pods, &owners, 2, &seen).await?;
    let labelled = podsets.list(&ListParams::default()).await?.items;
    ensure!(
        labelled
            .iter()
            .all(|p| p.labels().get(PODSET_LABEL) == Some(&b)),
        "every PodSet is labelled for the one replica that runs the podset guest"
    );
    converged(config_maps, LABEL, "v0", &both).await?;
    ensure!(
        holding(config_maps, LABEL).await? == 2,
        "both replicas hold sources"
    );

    // The second replica's ledger module is removed: it leaves the ledger's ring, and the
    // first takes every source.
    std::fs::remove_file(b_dir.join("ledger.wasm"))?;
    update(config_maps, "v1").await?;
    converged(config_maps, LABEL, "v1", &BTreeSet::from([a.clone()])).await?;

    // It comes back: the second replica joins the ledger's ring again and takes its share.
    std::fs::copy(guest_wasm("ledger"), b_dir.join("ledger.wasm"))?;
    until_holding(config_maps, LABEL, &b).await?;
    update(config_maps, "v2").await?;
    converged(config_maps, LABEL, "v2", &both).await?;
    ensure!(
        holding(config_maps, LABEL).await? == 2,
        "both replicas hold sources again"
    );

    for replica in replicas.iter_mut() {
        replica.terminate().await?;
    }
    podset::created_once(&seen, recorder, PODSETS, 2, 0).await?;
    never_at_once(replicas, 3)
}
