//! A failure scenario of a sharded ring on the real control plane. The hosts run the `ledger`
//! and `podset` guests from WasmControllers pulled from a real registry, while PodSets are
//! scaled up and down without pause. One host's registry settings refuse the modules (larger
//! than it accepts): it joins the ring's membership but runs neither guest, and is given no
//! key; started first, it leads. A host is killed, one joins, the member that shards (the first
//! of the guests' rings, as the leader runs neither guest) stops with SIGTERM, then the leader.
//!
//! Through it all: the hosts' logs show no source reconciled by two hosts at once; every source
//! ends mirrored with its last value and every PodSet with the replicas last asked of it (no
//! change lost); no PodSet ever got more pods than its first replicas and every increase asked
//! of it allow; no source or PodSet is ever labelled for the host that runs no guest; the
//! sharder's successor reads what it left; and the longest time a source had no live holder,
//! printed, stays within the Lease's 4 s and 5 s.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::{Api, ResourceExt};
use kubewasm_tests::podset::{self, install};
use kubewasm_tests::registry::{self, push};
use kubewasm_tests::shards::{
    Labels, Replica, converged, create_sources, never_at_once, podsets_labelled,
    print_logs_if_failed, until_holding, update,
};
use kubewasm_tests::wasmctl::{crd_applied, watching};
use kubewasm_tests::{Recorder, WAIT, eventually, guest_wasm, wasm_controllers};
use serde_json::json;

const PODSETS: usize = 12;

/// The PodSets and what was asked of them.
struct PodSets {
    api: Api<DynamicObject>,
    pods: Api<Pod>,
    recorder: Recorder,
    /// The PodSets' uids.
    owners: Vec<String>,
    /// The podset guest's shard label.
    label: String,
    /// Every pod uid seen.
    seen: Mutex<HashSet<String>>,
    /// Of each PodSet: the replicas last asked, and the pods that may have been created for
    /// it: its first replicas and every increase.
    asked: Mutex<BTreeMap<usize, (usize, usize)>>,
    /// Every member a PodSet was seen labelled for.
    holders: Arc<Mutex<BTreeSet<String>>>,
    watch: tokio::task::JoinHandle<()>,
}

impl Drop for PodSets {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

impl PodSets {
    async fn create(
        (api, pods, recorder): (Api<DynamicObject>, Api<Pod>, Recorder),
        label: String,
    ) -> Result<Self> {
        let mut owners = Vec::new();
        for i in 0..PODSETS {
            owners.push(podset::create(&api, &format!("ps-{i}"), 2).await?);
        }
        let holders = Arc::new(Mutex::new(BTreeSet::new()));
        let watch = tokio::spawn(record_holders(api.clone(), label.clone(), holders.clone()));
        Ok(Self {
            api,
            pods,
            recorder,
            owners,
            label,
            seen: Mutex::new(HashSet::new()),
            asked: Mutex::new((0..PODSETS).map(|i| (i, (2, 2))).collect()),
            holders,
            watch,
        })
    }

    /// Asks PodSet `i` for `replicas`.
    async fn scale(&self, i: usize, replicas: usize) -> Result<()> {
        let patch = json!({ "spec": { "replicas": replicas } });
        let name = format!("ps-{i}");
        (self.api)
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        let mut asked = self.asked.lock().expect("asked lock");
        let (last, allowed) = asked.entry(i).or_default();
        *allowed += replicas.saturating_sub(*last);
        *last = replicas;
        Ok(())
    }

    /// Scales one PodSet after another between 1 and 3 replicas until `stop`.
    async fn churn(&self, stop: &AtomicBool) -> Result<()> {
        for step in 0usize.. {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let i = step % PODSETS;
            self.scale(i, 1 + (step / PODSETS + i) % 3).await?;
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        Ok(())
    }

    /// Waits until every PodSet has the replicas last asked of it, live and in its status, and
    /// is labelled, as its pods are, for one of `members`.
    async fn converged(&self, members: &BTreeSet<String>) -> Result<()> {
        eventually(
            "every PodSet to have the replicas last asked",
            WAIT,
            || async {
                let counts = podset::live_pods(&self.pods, &self.owners, &self.seen).await?;
                let asked = self.asked.lock().expect("asked lock").clone();
                let listed = self.api.list(&ListParams::default()).await?.items;
                let done = (0..PODSETS).all(|i| {
                    let wanted = asked[&i].0;
                    let name = format!("ps-{i}");
                    let reported = listed.iter().find(|p| p.name_any() == name);
                    counts[i].len() == wanted
                        && reported.is_some_and(|p| p.data["status"]["replicas"] == json!(wanted))
                });
                Ok(done.then_some(()))
            },
        )
        .await?;
        podsets_labelled((&self.api, &self.pods), &self.label, members).await
    }

    /// Checks that no PodSet had more pods created than the replicas asked of it allow;
    /// returns how many were created and how many were allowed.
    async fn created_at_most_asked(&self) -> Result<(usize, usize)> {
        // The recorder's watch catches up with the last creations.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let asked = self.asked.lock().expect("asked lock").clone();
        let (mut created, mut allowed) = (0, 0);
        for (i, uid) in self.owners.iter().enumerate() {
            let (made, may) = (self.recorder.controlled_by(uid), asked[&i].1);
            ensure!(
                made <= may,
                "ps-{i} had {made} pods created where its replicas allow {may}"
            );
            (created, allowed) = (created + made, allowed + may);
        }
        Ok((created, allowed))
    }

    /// Whether a PodSet was ever seen labelled for `member`.
    fn held_by(&self, member: &str) -> bool {
        self.holders.lock().expect("holders lock").contains(member)
    }
}

/// Records in `holders` every member a PodSet of `api` is seen labelled for by `label`.
async fn record_holders(
    api: Api<DynamicObject>,
    label: String,
    holders: Arc<Mutex<BTreeSet<String>>>,
) {
    let mut events = watcher::watcher(api, watcher::Config::default()).boxed();
    while let Some(event) = events.next().await {
        if let Ok(Event::Apply(podset) | Event::InitApply(podset)) = event
            && let Some(member) = podset.labels().get(&label)
        {
            holders.lock().expect("holders lock").insert(member.clone());
        }
    }
}

/// Creates the WasmControllers of the `ledger` and `podset` guests in `namespace`, from the
/// shared registry.
async fn wasm_controllers_of(client: &kube::Client, namespace: &str) -> Result<()> {
    let api = wasm_controllers(client, namespace);
    for (guest, limits) in [
        ("ledger", json!({ "logLinesPerSecond": 100000 })),
        ("podset", json!({})),
    ] {
        let reference = registry::shared().reference(&format!("faults/{guest}:v1"));
        push(&guest_wasm(guest), &reference)?;
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kubewasm.dev/v1alpha1", "kind": "WasmController",
            "metadata": { "name": guest },
            "spec": { "module": { "image": reference }, "limits": limits },
        }))?;
        api.create(&PostParams::default(), &object).await?;
    }
    Ok(())
}

#[tokio::test]
async fn a_ring_under_podset_churn_survives_a_kill_a_join_an_unfetchable_module_its_sharder_and_leader_leaving()
-> Result<()> {
    let client = crd_applied().await?;
    let plane = kubewasm_tests::control_plane();
    let ns = plane.namespace("faults").await?;
    let installed = install(&client, ns.name()).await?;
    wasm_controllers_of(&client, ns.name()).await?;
    // The ledger logs every reconcile: the tests' hosts allow its tenants as many lines.
    let config = format!("{}    logLinesPerSecond: 100000\n", watching(&[ns.name()]));
    // Refuses every module: its registry settings accept none as large.
    let refusing = format!("{config}  registries:\n    maxModuleSize: 1Ki\n");
    let args = [
        "--sharded",
        "--leader-election-namespace",
        ns.name(),
        "--leader-election-id",
        "faults-ring",
        "--leader-elect-lease-duration",
        "4s",
        "--leader-elect-renew-deadline",
        "3s",
        "--leader-elect-retry-period",
        "1s",
    ];
    // Started first and leading before the others start, the host that runs no guest leads:
    // the sharder is another member.
    // A store of its own: the others' store holds the modules they pulled.
    let store = tempfile::tempdir()?;
    let store_dir = store.path().to_str().context("a UTF-8 path")?;
    let own_store = [&args[..], &["--module-store-dir", store_dir]].concat();
    let mut replicas = vec![Replica::start("faults-e", &refusing, &own_store).await?];
    eventually("faults-e to lead", WAIT, || async {
        Ok(replicas[0].log().contains("became leader").then_some(()))
    })
    .await?;
    for name in ["faults-a", "faults-b", "faults-c"] {
        replicas.push(Replica::start(name, &config, &args).await?);
    }
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    // WasmControllers' guests are named for their namespace.
    let label = |guest: &str| format!("shard.kubewasm.dev/{}.{guest}", ns.name());
    let labels = Labels::record(config_maps.clone(), &label("ledger"));
    let podsets = PodSets::create(installed, label("podset")).await?;
    let sources = (&config_maps, label("ledger"));
    let result = scenario(
        (&sources, &labels, &podsets),
        (&config, &args),
        &mut replicas,
    )
    .await;
    print_logs_if_failed(result, &replicas)
}

/// The members of the replicas that run and fetched their modules.
fn serving(replicas: &[Replica]) -> BTreeSet<String> {
    (replicas.iter())
        .filter(|r| r.process.is_some() && r.name != "faults-e")
        .map(|r| r.member.clone())
        .collect()
}

/// The running replica that shards `guest`, as the hosts' logs last say.
async fn sharder_of(replicas: &[Replica], guest: &str) -> Result<usize> {
    eventually(
        &format!("one running host to shard {guest}"),
        WAIT,
        || async { Ok(sharding(replicas, guest)) },
    )
    .await
}

/// The one running replica whose log last says it shards `guest`, if one alone does.
fn sharding(replicas: &[Replica], guest: &str) -> Option<usize> {
    let sharding: Vec<usize> = (0..replicas.len())
        .filter(|&i| replicas[i].process.is_some() && shards(&replicas[i].log(), guest))
        .collect();
    (sharding.len() == 1).then(|| sharding[0])
}

/// Whether the last of `log`'s lines on sharding `guest` says that it shards it.
fn shards(log: &str, guest: &str) -> bool {
    let field = format!("guest={guest}");
    let said = (log.lines())
        .filter(|line| line.contains("kubewasm::shard::sharder: "))
        .filter(|line| line.split_whitespace().any(|word| word == field))
        .filter_map(|line| {
            (line.contains("sharder: sharding "))
                .then_some(true)
                .or(line
                    .contains("sharder: no longer sharding")
                    .then_some(false))
        })
        .next_back();
    said == Some(true)
}

async fn scenario(
    ((config_maps, label), labels, podsets): (&(&Api<ConfigMap>, String), &Labels, &PodSets),
    (config, args): (&str, &[&str]),
    replicas: &mut Vec<Replica>,
) -> Result<()> {
    eventually("faults-e to refuse the modules", WAIT, || async {
        Ok(replicas[0]
            .log()
            .contains("over the limit of 1024")
            .then_some(()))
    })
    .await?;
    create_sources(config_maps).await?;
    converged(config_maps, label, "v0", &serving(replicas)).await?;
    podsets.converged(&serving(replicas)).await?;

    let stop = AtomicBool::new(false);
    let faults = async {
        // A host is killed: its keys move once its Lease expires.
        replicas[3].kill().await?;
        update(config_maps, "v1").await?;
        converged(config_maps, label, "v1", &serving(replicas)).await?;
        // One joins and takes its share, drained first.
        replicas.push(Replica::start("faults-d", config, args).await?);
        until_holding(config_maps, label, &replicas[4].member).await?;
        update(config_maps, "v2").await?;
        converged(config_maps, label, "v2", &serving(replicas)).await?;
        // The member that shards leaves with SIGTERM: the leader if it runs the guest, else
        // the first member of the guest's ring.
        let guest = label.trim_start_matches("shard.kubewasm.dev/");
        let sharder = sharder_of(replicas, guest).await?;
        let leaders = (replicas.iter()).filter(|r| r.log().contains("became leader"));
        let leaders: Vec<_> = leaders.map(|r| r.name).collect();
        eprintln!(
            "{} shards and leaves; led by {leaders:?}",
            replicas[sharder].name
        );
        replicas[sharder].terminate().await?;
        update(config_maps, "v3").await?;
        converged(config_maps, label, "v3", &serving(replicas)).await?;
        // The leader leaves with SIGTERM: its successor runs the guests and shards them.
        replicas[0].terminate().await?;
        eventually("the new leader to shard", WAIT, || async {
            let sharder = sharding(replicas, guest);
            Ok(sharder.filter(|&i| replicas[i].log().contains("became leader")))
        })
        .await?;
        update(config_maps, "v4").await?;
        converged(config_maps, label, "v4", &serving(replicas)).await?;
        anyhow::Ok(())
    };
    let faults = async {
        let done = faults.await;
        stop.store(true, Ordering::SeqCst);
        done
    };
    let (faults, churned) = tokio::join!(faults, podsets.churn(&stop));
    faults?;
    churned?;
    // Every PodSet ends as last asked: no change lost.
    podsets.converged(&serving(replicas)).await?;
    let read = (replicas.iter()).any(|r| r.log().contains("the holder left naming the children"));
    ensure!(
        read,
        "no sharder read what the last sharder left as it stopped"
    );

    labels.held_within_lease(replicas, 4)?;
    let refusing = replicas[0].member.clone();
    ensure!(
        !labels.any_for(&refusing) && !podsets.held_by(&refusing),
        "a source or a PodSet was labelled for the host that runs no guest"
    );
    for replica in replicas.iter_mut() {
        if replica.process.is_some() {
            replica.terminate().await?;
        }
    }
    let (created, allowed) = podsets.created_at_most_asked().await?;
    eprintln!("{created} pods created under churn, where the replicas asked for allow {allowed}");
    never_at_once(replicas, 4)
}
