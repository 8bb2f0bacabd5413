//! Priority lanes: keys of an initial list wait behind real changes, as in controller-runtime's
//! priority queue, so one object changed while a host works through a backlog is reconciled
//! next rather than after the whole backlog. Across the guests of a host, while a change waits
//! or runs, the backlog keeps fewer reconciles in flight than the host has CPUs, so that a
//! standby taking over with a change queued does not run it among a crowd of backlog keys; and
//! a backlog starts slow, so that a change arriving just after the takeover finds a worker free.
//! A backlog reconcile's own children, seen while it runs, are not changes that hold it back.

use std::collections::BTreeMap;

use anyhow::{Context, Result, ensure};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kubewasm_tests::ledger::{self, Run};
use kubewasm_tests::prometheus::{self, has};
use kubewasm_tests::{
    HostProcess, WAIT, control_plane, eventually, free_ports, guest_wasm, http_get, module_config,
    with_host,
};
use serde_json::json;

const BACKLOG: usize = 1500;

fn source(name: &str) -> Result<ConfigMap> {
    Ok(serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "kubewasm.dev/fixture": "mirror" } },
        "data": { "value": name },
    }))?)
}

async fn mirrors(config_maps: &Api<ConfigMap>) -> Result<usize> {
    let all = config_maps.list(&ListParams::default()).await?.items;
    let mirrors = all.iter().filter(|c| {
        c.metadata
            .name
            .as_deref()
            .is_some_and(|n| n.ends_with("-mirror"))
    });
    Ok(mirrors.count())
}

#[tokio::test]
async fn a_change_is_reconciled_before_the_backlog_of_the_initial_list() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("priority").await?;
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    futures::stream::iter(0..BACKLOG)
        .map(|i| {
            let config_maps = config_maps.clone();
            async move {
                let source = source(&format!("listed-{i}"))?;
                config_maps.create(&PostParams::default(), &source).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<()>()
        .await?;
    // One worker: the backlog is worked through one key at a time.
    let config = format!(
        "{}    maxConcurrency: 1\n",
        module_config("mirror", ns.name())
    );
    with_host(ns.name(), &config, async |_| {
        eventually("the host to start on the backlog", WAIT, || async {
            Ok((mirrors(&config_maps).await? > 0).then_some(()))
        })
        .await?;
        config_maps
            .create(&PostParams::default(), &source("changed")?)
            .await?;
        eventually("the changed source to be mirrored", WAIT, || async {
            Ok(config_maps.get_opt("changed-mirror").await?)
        })
        .await?;
        let done = mirrors(&config_maps).await?;
        eprintln!("the change was mirrored after {done} of {BACKLOG} listed sources");
        anyhow::ensure!(
            done < BACKLOG / 2,
            "the change waited behind the initial list: mirrored after {done} of {BACKLOG}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_backlog_whose_reconciles_apply_children_reaches_every_worker() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("priority-own").await?;
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    let workers = workers()?;
    let listed = 4 * workers;
    list_sources(&config_maps, listed, Some(300)).await?;
    let config = format!(
        "{}    maxConcurrency: {workers}\n    limits:\n      logLinesPerSecond: 100000\n",
        module_config("ledger", ns.name())
    );
    with_host(ns.name(), &config, async |host| {
        let runs = eventually("every source's first reconcile to end", WAIT, || async {
            let runs = ledger::runs(&host.log())?;
            let firsts = first_runs(&runs);
            let ended = firsts.values().filter(|r| r.end.is_some()).count();
            Ok((ended == listed).then_some(runs))
        })
        .await?;
        // Each applies its child at once: the watch shows it while the reconcile runs. Seen so,
        // it is not a change to put before the backlog (and hold the backlog back for).
        let firsts: Vec<&Run> = first_runs(&runs).into_values().collect();
        let crowd = firsts
            .iter()
            .map(|run| firsts.iter().filter(|other| other.spans(run.start)).count())
            .max()
            .unwrap_or(0);
        let cpus = std::thread::available_parallelism()?.get();
        eprintln!("at most {crowd} of {listed} backlog reconciles at once, {workers} workers");
        ensure!(
            crowd == workers,
            "at most {crowd} backlog reconciles ran at once, not every one of {workers} workers \
             on {cpus} CPUs"
        );
        Ok(())
    })
    .await
}

/// Sources of each guest in the takeover test.
const LISTED: usize = 40;

/// The ledger source `name` with `value`, whose reconciles last `hold_ms` (the fixture's 20 ms
/// if `None`).
fn ledger_source(name: &str, value: &str, hold_ms: Option<u64>) -> serde_json::Value {
    let mut data = json!({ "value": value });
    if let Some(hold) = hold_ms {
        data["holdMs"] = json!(hold.to_string());
    }
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": name, "labels": { "kubewasm.dev/fixture": "ledger" } },
        "data": data,
    })
}

/// Applies the ledger sources `listed-0` to `listed-<listed - 1>` with the value `listed`, whose
/// reconciles last `hold_ms`.
async fn list_sources(
    config_maps: &Api<ConfigMap>,
    listed: usize,
    hold_ms: Option<u64>,
) -> Result<()> {
    futures::stream::iter(0..listed)
        .map(|i| async move {
            let name = format!("listed-{i}");
            let source = ledger_source(&name, "listed", hold_ms);
            config_maps
                .patch(&name, &PatchParams::apply("tests"), &Patch::Apply(&source))
                .await?;
            anyhow::Ok(())
        })
        .buffer_unordered(16)
        .try_collect::<()>()
        .await
}

/// How many sources of `config_maps` have their child holding `value`.
async fn ledgered(config_maps: &Api<ConfigMap>, value: &str) -> Result<usize> {
    let all = config_maps.list(&ListParams::default()).await?.items;
    let holds = |c: &&ConfigMap| {
        c.metadata
            .name
            .as_deref()
            .is_some_and(|n| n.ends_with("-ledger"))
            && c.data
                .as_ref()
                .and_then(|d| d.get("value"))
                .map(String::as_str)
                == Some(value)
    };
    Ok(all.iter().filter(holds).count())
}

/// When the takeover test changes a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChangeAt {
    /// While the standby waits: it has the change queued when it wins the Lease.
    Before,
    /// Once the standby leads and has started on its backlog.
    After,
}

/// What the takeover test saw on the standby.
struct Takeover {
    /// Every reconcile the standby ran.
    runs: Vec<Run>,
    /// The changed source, `<namespace>/<name>`.
    change: String,
    /// The wall clock in nanoseconds just before the change was sent.
    sent: u128,
    cpus: usize,
}

/// Workers of each guest in the takeover tests: more than the host has CPUs.
fn workers() -> Result<usize> {
    Ok(std::thread::available_parallelism()?.get() + 2)
}

/// Two guests of the ledger module, each with [`workers`] workers and `listed` sources whose
/// reconciles last `hold_ms`; a leader reconciles them, a warm standby queues them, the leader
/// stops with SIGTERM and the standby takes over. One source of the second guest changes `at`
/// the given time.
async fn takeover(listed: usize, hold_ms: Option<u64>, at: ChangeAt) -> Result<Takeover> {
    let plane = control_plane();
    let client = plane.client().await?;
    let suffix = match at {
        ChangeAt::Before => "before",
        ChangeAt::After => "after",
    };
    let first = plane.namespace(&format!("priority-{suffix}-a")).await?;
    let second = plane.namespace(&format!("priority-{suffix}-b")).await?;
    let cpus = std::thread::available_parallelism()?.get();
    let workers = workers()?;
    // Two guests of the ledger module, each from a path of its own.
    let copies = tempfile::tempdir()?;
    let mut config = "modules:\n".to_owned();
    for (name, ns) in [("ledger-a", first.name()), ("ledger-b", second.name())] {
        let path = copies.path().join(format!("{name}.wasm"));
        std::fs::copy(guest_wasm("ledger"), &path)?;
        config += &format!(
            "  - path: {}\n    name: {name}\n    namespaces: [{ns}]\n    maxConcurrency: {workers}\n    \
             limits:\n      logLinesPerSecond: 100000\n",
            path.display()
        );
    }
    let apis =
        [first.name(), second.name()].map(|ns| Api::<ConfigMap>::namespaced(client.clone(), ns));
    for config_maps in &apis {
        list_sources(config_maps, listed, hold_ms).await?;
    }
    let [standby_port] = free_ports()?;
    let standby_address = format!("127.0.0.1:{standby_port}");
    let election = [
        "--leader-elect",
        "--leader-election-namespace",
        first.name(),
        "--leader-election-id",
        "ledger-leader",
    ];
    let leader = HostProcess::start_with(&format!("{}-leader", first.name()), &config, &election)?;
    for config_maps in &apis {
        let reconciled = eventually("the leader to reconcile every source", WAIT, || async {
            Ok((ledgered(config_maps, "listed").await? == listed).then_some(()))
        })
        .await;
        if let Err(error) = reconciled {
            eprintln!("leader's log:\n{}", leader.log());
            return Err(error);
        }
    }
    let mut args = election.map(str::to_owned).to_vec();
    for flag in ["--metrics-bind-address", "--health-probe-bind-address"] {
        args.extend([flag.to_owned(), standby_address.clone()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let standby = HostProcess::start_with(&format!("{}-standby", first.name()), &config, &args)?;
    let guest_sum = async |metric: &str, guest: &str| -> Result<f64> {
        let metrics = prometheus::scrape(standby_address.parse()?).await?;
        Ok(prometheus::sum(&metrics, metric, |l| has(l, "name", guest)))
    };
    eventually(
        "the standby to be ready and to queue every source",
        WAIT,
        || async {
            let Ok((200, _)) = http_get(&standby_address, "/readyz").await else {
                return Ok(None);
            };
            let queued = [
                guest_sum("workqueue_depth", "ledger-a").await?,
                guest_sum("workqueue_depth", "ledger-b").await?,
            ];
            Ok((queued == [listed as f64; 2]).then_some(()))
        },
    )
    .await?;
    // Last in the order of the initial list: never among the first backlog keys.
    let changed = "listed-9";
    // The change holds its CPU as briefly as the fixture allows.
    let change = async || {
        let sent = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
        apis[1]
            .patch(
                changed,
                &PatchParams::apply("tests"),
                &Patch::Apply(ledger_source(changed, "changed", None)),
            )
            .await?;
        anyhow::Ok(sent.as_nanos())
    };
    let mut sent = 0;
    if at == ChangeAt::Before {
        let adds = guest_sum("workqueue_adds_total", "ledger-b").await?;
        // A change while the standby is warm: the leader reconciles it, the standby queues it.
        sent = change().await?;
        eventually("the leader to reconcile the change", WAIT, || async {
            Ok((ledgered(&apis[1], "changed").await? == 1).then_some(()))
        })
        .await?;
        eventually("the standby to queue the change", WAIT, || async {
            Ok((guest_sum("workqueue_adds_total", "ledger-b").await? > adds).then_some(()))
        })
        .await?;
    }
    ensure!(leader.stop()?, "the leader exits cleanly on SIGTERM");
    if at == ChangeAt::After {
        eventually("the standby to lead", WAIT, || async {
            Ok(standby.log().contains("became leader").then_some(()))
        })
        .await?;
        sent = change().await?;
    }
    let change = format!("{}/{changed}", second.name());
    let runs = eventually(
        "the standby to lead and reconcile every source",
        WAIT,
        || async {
            let runs = ledger::runs(&standby.log())?;
            let ended = runs.iter().filter(|r| r.end.is_some()).count();
            Ok((ended >= 2 * listed).then_some(runs))
        },
    )
    .await;
    let runs = match runs {
        Ok(runs) => runs,
        Err(error) => {
            eprintln!("standby's log:\n{}", standby.log());
            return Err(error);
        }
    };
    ensure!(standby.stop()?, "the new leader exits cleanly on SIGTERM");
    Ok(Takeover {
        runs,
        change,
        sent,
        cpus,
    })
}

#[tokio::test]
async fn a_standby_taking_over_runs_its_queued_change_beside_fewer_backlog_keys_than_cpus()
-> Result<()> {
    let seen = takeover(LISTED, None, ChangeAt::Before).await?;
    beside_the_change(&seen.runs, &seen.change, seen.cpus)
}

#[tokio::test]
async fn a_change_just_after_a_takeover_finds_a_worker_free_of_the_backlog() -> Result<()> {
    // Backlog reconciles of 3 s each, two per worker: old enough at the change to have
    // ended, had the change waited for one.
    let seen = takeover(2 * workers()?, Some(3000), ChangeAt::After).await?;
    let mut firsts = first_runs(&seen.runs);
    let change = firsts
        .remove(seen.change.as_str())
        .context("the standby never reconciled the change")?;
    let before: Vec<&Run> = firsts
        .into_values()
        .filter(|run| run.start < change.start)
        .collect();
    let ended = before
        .iter()
        .filter(|run| run.end.is_some_and(|end| end < change.start))
        .count();
    eprintln!(
        "the change started {} ms after it was sent, after {} backlog reconciles started and {ended} \
         ended",
        change.start.saturating_sub(seen.sent) / 1_000_000,
        before.len(),
    );
    ensure!(
        ended == 0,
        "the change waited for {ended} backlog reconciles to end: the backlog had taken every \
         worker of its guest"
    );
    Ok(())
}

/// The first reconcile of each source.
fn first_runs(runs: &[Run]) -> BTreeMap<&str, &Run> {
    let mut firsts: BTreeMap<&str, &Run> = BTreeMap::new();
    for run in runs {
        let first = firsts.entry(&run.source).or_insert(run);
        if run.start < first.start {
            *first = run;
        }
    }
    firsts
}

/// Checks that every backlog reconcile that started before the `change`'s first reconcile
/// ended started beside fewer other backlog reconciles than `cpus` (one, on a single CPU).
/// The backlog is the first reconcile of every other source.
fn beside_the_change(runs: &[Run], change: &str, cpus: usize) -> Result<()> {
    let mut firsts = first_runs(runs);
    let end = firsts
        .remove(change)
        .context("the standby never reconciled the change")?
        .end
        .context("the change's reconcile never ended")?;
    let backlog: Vec<&Run> = firsts.into_values().collect();
    let most = cpus.saturating_sub(1).max(1);
    let mut crowds = Vec::new();
    for run in backlog.iter().filter(|r| r.start <= end) {
        crowds.push(
            backlog
                .iter()
                .filter(|other| other.spans(run.start))
                .count(),
        );
    }
    let crowd = crowds.iter().copied().max().unwrap_or(0);
    eprintln!(
        "{} backlog reconciles started before the change's ended, at most {crowd} at once",
        crowds.len()
    );
    ensure!(
        crowd <= most,
        "{crowd} backlog reconciles ran at once before the change's ended, more than {most} \
         on {cpus} CPUs"
    );
    Ok(())
}
