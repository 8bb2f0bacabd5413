//! Children stay with their key across a handover, on the real control plane.
//!
//! A member's caches of a guest's primary and owned kinds are fed by separate watches, which
//! may lag one another: a key handed over to a member can reach it before the children the
//! sharder labelled for it. A guest that counts its children (PodSet) would then see none and
//! create extras. The sharder names, on the key, the version of each owned kind's watch that
//! showed every child labelled; the member reconciles the key only once its own watch of that
//! kind has got that far.
//!
//! Under handovers, while every pod changes about five times a second as kubelet's status
//! writes change pods, and the sharder's relabels of pods reach the API server 200 ms late, the
//! relabels still land (a write conditioned on the pod's whole version would nearly always meet
//! a newer one), the PodSets move and move back, and no PodSet ever gets a pod beyond its
//! replicas.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use kubewasm_tests::delay::{Delays, Rule};
use kubewasm_tests::ledger::word;
use kubewasm_tests::podset::{self, install};
use kubewasm_tests::prometheus::{scrape, sum};
use kubewasm_tests::ring;
use kubewasm_tests::{HostProcess, WAIT, control_plane, eventually, free_ports, module_config};
use serde_json::json;

const LABEL: &str = "shard.kubewasm.dev/podset";
const CHILDREN: &str = "children.shard.kubewasm.dev/podset";
/// How late the host's watch of pods delivers each event.
const LAG: Duration = Duration::from_secs(3);

/// The host's arguments to be a member of `ring`, whose Leases live in `namespace`, with the
/// lease duration, renew deadline and retry period of `times`.
fn member_args<'a>(namespace: &'a str, ring: &'a str, times: [&'a str; 3]) -> Vec<&'a str> {
    let [lease, renew, retry] = times;
    vec![
        "--sharded",
        "--leader-election-namespace",
        namespace,
        "--leader-election-id",
        ring,
        "--leader-elect-lease-duration",
        lease,
        "--leader-elect-renew-deadline",
        renew,
        "--leader-elect-retry-period",
        retry,
    ]
}

/// The member name `host` joined its ring with.
async fn joined(host: &HostProcess) -> Result<String> {
    eventually("the host to join the ring", WAIT, || async {
        Ok(host.log().lines().find_map(|line| {
            line.contains("joined the shard ring")
                .then(|| word(line, "member="))
                .flatten()
        }))
    })
    .await
}

/// Stops `host`, named `what`, with SIGTERM while the test runs on: it releases its Lease
/// through the proxies the test keeps.
async fn terminate(host: &HostProcess, what: &str) -> Result<()> {
    host.signal("TERM")?;
    eventually(&format!("{what} to release its Lease"), WAIT, || async {
        let log = host.log();
        Ok(log.contains("released the membership Lease").then_some(()))
    })
    .await
    .map(|_| ())
}

/// A pod of the PodSet `owner` (uid `uid`), labelled for `member`, as an earlier member left it.
fn child(name: &str, owner: &str, uid: &str, member: &str) -> Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": { "app": owner, LABEL: member },
            "ownerReferences": [{
                "apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet", "name": owner,
                "uid": uid, "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": { "containers": [{ "name": "pause", "image": "registry.k8s.io/pause:3.10" }] },
    }))?)
}

#[tokio::test]
async fn a_key_handed_over_is_reconciled_only_once_its_children_are_cached() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("children").await?;
    let (podsets, pods, recorder) = install(&client, ns.name()).await?;
    let ring_name = "children-ring";
    ring::lead(
        &Api::<Lease>::namespaced(client.clone(), ns.name()),
        ring_name,
        "podset",
    )
    .await?;
    let pod_watches = Rule {
        method: "GET",
        contains: vec!["/pods?".into(), "watch=".into()],
        answers: LAG,
        ..Rule::default()
    };
    let delays = Delays::start(plane.kubeconfig(), vec![pod_watches]).await?;
    let config = module_config("podset", ns.name());
    let args = member_args(ns.name(), ring_name, ["20s", "15s", "5s"]);
    let host = HostProcess::start_via("children", &config, delays.kubeconfig(), &args)?;
    let checked = async {
        let member = joined(&host).await?;
        eventually("the host to watch pods", WAIT, || async {
            Ok((delays.matched(0) > 0).then_some(()))
        })
        .await?;
        // The PodSet and its pods as the member that held it left them; the test, as the
        // sharder, hands it to the host once the pods are labelled for it.
        let uid = podset::create(&podsets, "ps", 2).await?;
        let mut seen = 0u64;
        for name in ["ps-a", "ps-b"] {
            let pod = pods
                .create(&PostParams::default(), &child(name, "ps", &uid, &member)?)
                .await?;
            let version = pod
                .meta()
                .resource_version
                .as_deref()
                .context("a version")?;
            seen = seen.max(version.parse()?);
        }
        let handed = json!({ "metadata": {
            "labels": { LABEL: member },
            "annotations": BTreeMap::from([(CHILDREN, format!("Pod.v1={seen}"))]),
        }});
        podsets
            .patch("ps", &PatchParams::default(), &Patch::Merge(&handed))
            .await?;
        eventually("the host to reconcile ps", WAIT, || async {
            let podset = podsets.get("ps").await?;
            let status = podset.data.get("status");
            let observed = status.and_then(|s| s.get("observedGeneration"));
            Ok(observed.is_some().then_some(()))
        })
        .await?;
        tokio::time::sleep(LAG + Duration::from_secs(2)).await;
        let created = recorder.controlled_by(&uid);
        ensure!(
            created == 2,
            "{created} pods of ps exist: the host reconciled ps before its watch showed the 2 \
             pods labelled for it"
        );
        ensure!(
            host.log().contains("waiting for its children"),
            "the host did not say it waited for the children"
        );
        anyhow::Ok(())
    };
    let outcome = checked.await;
    if outcome.is_err() {
        eprintln!("--- the host's log:\n{}", host.log());
    }
    terminate(&host, "the host").await?;
    outcome
}

/// Changes every pod of `pods` as kubelet's status writes do, one after another, until `stop`;
/// counts the passes over all pods in `passes`. Returns how many writes landed.
async fn beat(pods: Api<Pod>, stop: Arc<AtomicBool>, passes: Arc<AtomicU64>) -> Result<u64> {
    let mut writes = 0;
    for beat in 0u64.. {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        // A failed list (the API server busy) skips a beat rather than ending the writer.
        let listed = pods.list(&ListParams::default()).await;
        for pod in listed.map(|l| l.items).unwrap_or_default() {
            let name = pod.metadata.name.unwrap_or_default();
            let patch = json!({ "metadata": { "annotations": { "test.kubewasm.dev/beat": beat.to_string() } } });
            if pods
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .is_ok()
            {
                writes += 1;
            }
        }
        passes.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(writes)
}

/// Waits until every PodSet of `podsets` is labelled for a member and every pod for its owner's
/// member; returns the members that hold PodSets.
async fn settled(podsets: &Api<DynamicObject>, pods: &Api<Pod>) -> Result<BTreeSet<String>> {
    eventually("every pod to be labelled like its PodSet", WAIT, || async {
        let holders: BTreeMap<String, String> = (podsets.list(&ListParams::default()).await?.items)
            .into_iter()
            .filter_map(|p| Some((p.metadata.uid.clone()?, p.labels().get(LABEL)?.clone())))
            .collect();
        let pods = pods.list(&ListParams::default()).await?.items;
        let labelled = pods.iter().all(|pod| {
            let owner = pod.metadata.owner_references.iter().flatten().next();
            owner.is_some_and(|o| holders.get(&o.uid) == pod.labels().get(LABEL))
        });
        let every = holders.len() == PODSETS && labelled;
        Ok(every.then(|| holders.into_values().collect()))
    })
    .await
}

/// Prints the labels and both hosts' logs, for a failed test's output.
async fn print_failure(
    podsets: &Api<DynamicObject>,
    pods: &Api<Pod>,
    first: &HostProcess,
    second: Option<&HostProcess>,
) {
    if let Err(error) = print_labels(podsets, pods).await {
        eprintln!("--- listing the labels: {error}");
    }
    eprintln!("--- the first host's log:\n{}", first.log());
    if let Some(second) = second {
        eprintln!("--- the second host's log:\n{}", second.log());
    }
}

/// Prints each PodSet's and pod's shard label and version, for a failed test's output.
async fn print_labels(podsets: &Api<DynamicObject>, pods: &Api<Pod>) -> Result<()> {
    for podset in podsets.list(&ListParams::default()).await?.items {
        let seen = podset.annotations().get(CHILDREN).cloned();
        let (name, version) = (podset.name_any(), podset.resource_version());
        eprintln!(
            "{name}@{version:?}: {:?} {seen:?}",
            podset.labels().get(LABEL)
        );
    }
    for pod in pods.list(&ListParams::default()).await?.items {
        let owner = pod.owner_references().first().map(|o| o.name.clone());
        let (name, version) = (pod.name_any(), pod.resource_version());
        eprintln!(
            "{name}@{version:?} of {owner:?}: {:?}",
            pod.labels().get(LABEL)
        );
    }
    Ok(())
}

/// PodSets enough that two members almost never hash them all to one.
const PODSETS: usize = 12;
const REPLICAS: usize = 3;

#[tokio::test]
async fn children_follow_their_key_while_every_pod_changes_and_relabels_conflict() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("churn").await?;
    let (podsets, pods, recorder) = install(&client, ns.name()).await?;
    let mut owners = Vec::new();
    for i in 0..PODSETS {
        owners.push(podset::create(&podsets, &format!("ps-{i}"), REPLICAS).await?);
    }
    // The first host's writes of pods reach the API server late, so that its sharder's relabels
    // of pods the writer changed meanwhile meet a conflict.
    let late_writes = Rule {
        method: "PATCH",
        contains: vec![format!("/namespaces/{}/pods/", ns.name())],
        requests: Duration::from_millis(200),
        ..Rule::default()
    };
    let delays = Delays::start(plane.kubeconfig(), vec![late_writes]).await?;
    let config = module_config("podset", ns.name());
    let [metrics] = free_ports()?.map(|port| format!("127.0.0.1:{port}"));
    let args = member_args(ns.name(), "churn-ring", ["15s", "10s", "2s"]);
    let with_metrics = [args.clone(), vec!["--metrics-bind-address", &metrics]].concat();
    let first = HostProcess::start_via("churn-1", &config, delays.kubeconfig(), &with_metrics)?;
    let seen = Mutex::new(HashSet::new());
    let stop = Arc::new(AtomicBool::new(false));
    let mut second = None;
    let checked = async {
        let member = joined(&first).await?;
        podset::converged(&podsets, &pods, &owners, REPLICAS, &seen).await?;
        let passes = Arc::new(AtomicU64::new(0));
        let writer = tokio::spawn(beat(pods.clone(), stop.clone(), passes.clone()));
        // The pods change all along the handovers.
        eventually("the writer to change every pod 3 times", WAIT, || async {
            Ok((passes.load(Ordering::SeqCst) >= 3).then_some(()))
        })
        .await?;
        // A second member takes about half the PodSets, then leaves them to the first again.
        let joining = HostProcess::start_with("churn-2", &config, &args)?;
        let other = joined(&joining).await?;
        second = Some(joining);
        eventually("the second member to hold PodSets", WAIT, || async {
            let holders = settled(&podsets, &pods).await?;
            Ok(holders.contains(&other).then_some(()))
        })
        .await?;
        podset::converged(&podsets, &pods, &owners, REPLICAS, &seen).await?;
        terminate(
            second.as_ref().context("the second host")?,
            "the second host",
        )
        .await?;
        eventually("the first member to hold every PodSet", WAIT, || async {
            let holders = settled(&podsets, &pods).await?;
            Ok((holders == BTreeSet::from([member.clone()])).then_some(()))
        })
        .await?;
        stop.store(true, Ordering::SeqCst);
        let writes = writer.await??;
        podset::converged(&podsets, &pods, &owners, REPLICAS, &seen).await?;
        let created = podset::created_once(&seen, &recorder, PODSETS, REPLICAS, 0).await?;
        let text = scrape(metrics.parse()?).await?;
        let conflicts = sum(&text, "kubewasm_shard_label_write_conflicts_total", |_| {
            true
        });
        println!(
            "{created} pods created for {PODSETS} PodSets of {REPLICAS}; {writes} pod writes \
             beside; {conflicts} shard label writes met a conflict"
        );
        anyhow::Ok(())
    };
    let outcome = checked.await;
    stop.store(true, Ordering::SeqCst);
    if outcome.is_err() {
        print_failure(&podsets, &pods, &first, second.as_ref()).await;
    }
    terminate(&first, "the first host").await?;
    outcome
}

/// The PodSets of `podsets` labelled for `member`, by uid.
async fn held(podsets: &Api<DynamicObject>, member: &str) -> Result<Vec<String>> {
    let listed = podsets.list(&ListParams::default()).await?.items;
    Ok(listed
        .into_iter()
        .filter(|p| p.labels().get(LABEL).map(String::as_str) == Some(member))
        .filter_map(|p| p.metadata.uid)
        .collect())
}

#[tokio::test]
async fn keys_released_without_drain_move_with_the_children_made_last() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("released").await?;
    let (podsets, pods, recorder) = install(&client, ns.name()).await?;
    let mut owners = Vec::new();
    for i in 0..PODSETS {
        owners.push(podset::create(&podsets, &format!("ps-{i}"), 0).await?);
    }
    // The first host leads and shards; its pod watch shows the pods the second host makes in
    // its last reconciles only after it has moved that host's PodSets, which had no pods
    // before, to itself.
    let pod_watches = Rule {
        method: "GET",
        contains: vec!["/pods?".into(), "watch=".into()],
        answers: LAG,
        ..Rule::default()
    };
    let delays = Delays::start(plane.kubeconfig(), vec![pod_watches]).await?;
    let config = module_config("podset", ns.name());
    let args = member_args(ns.name(), "released-ring", ["15s", "10s", "2s"]);
    let first = HostProcess::start_via("released-1", &config, delays.kubeconfig(), &args)?;
    let seen = Mutex::new(HashSet::new());
    let mut second = None;
    let checked = async {
        joined(&first).await?;
        podset::converged(&podsets, &pods, &owners, 0, &seen).await?;
        let joining = HostProcess::start_with("released-2", &config, &args)?;
        let other = joined(&joining).await?;
        let second = second.insert(joining);
        eventually("the second member to hold PodSets", WAIT, || async {
            let holders = settled(&podsets, &pods).await?;
            Ok(holders.contains(&other).then_some(()))
        })
        .await?;
        // Every PodSet grows; the second host leaves with SIGTERM as soon as its PodSets'
        // new pods exist, releasing its Lease: its keys move at once, without drain.
        let theirs = held(&podsets, &other).await?;
        let grow = json!({ "spec": { "replicas": REPLICAS } });
        for i in 0..PODSETS {
            let name = format!("ps-{i}");
            podsets
                .patch(&name, &PatchParams::default(), &Patch::Merge(&grow))
                .await?;
        }
        eventually(
            "the second host to make its PodSets' pods",
            WAIT,
            || async {
                let counts = podset::live_pods(&pods, &theirs, &seen).await?;
                Ok(counts.iter().all(|p| p.len() == REPLICAS).then_some(()))
            },
        )
        .await?;
        terminate(second, "the second host").await?;
        // Its Lease names the pods its PodSets had as it left, and the sharder read it.
        let leases = Api::<Lease>::namespaced(client.clone(), ns.name());
        let lease = leases.get(&format!("released-ring-{other}")).await?;
        let left = lease.annotations().get("left.shard.kubewasm.dev/podset");
        let named = format!("{}:Pod.v1=", ns.name());
        ensure!(
            left.is_some_and(|l| l.starts_with(&named)),
            "the released Lease names no pods: {:?}",
            lease.annotations()
        );
        eventually("the sharder to read what the host left", WAIT, || async {
            let read = first.log().contains("the holder left naming the children");
            Ok(read.then_some(()))
        })
        .await?;
        podset::converged(&podsets, &pods, &owners, REPLICAS, &seen).await?;
        let created = podset::created_once(&seen, &recorder, PODSETS, REPLICAS, 0).await?;
        println!(
            "{created} pods created for {PODSETS} PodSets of {REPLICAS}, {} of them moved \
             without drain",
            theirs.len()
        );
        anyhow::Ok(())
    };
    let outcome = checked.await;
    if outcome.is_err() {
        print_failure(&podsets, &pods, &first, second.as_ref()).await;
    }
    terminate(&first, "the first host").await?;
    outcome
}
