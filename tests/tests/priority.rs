//! Priority lanes: keys of an initial list wait behind real changes, as in controller-runtime's
//! priority queue, so one object changed while a host works through a backlog is reconciled
//! next rather than after the whole backlog. Across the guests of a host, while a change waits
//! or runs, the backlog keeps fewer reconciles in flight than the host has CPUs, so that a
//! standby taking over with a change queued does not run it among a crowd of backlog keys; and
//! a backlog starts slow, so that a change arriving just after the takeover finds a worker free.
//! A backlog reconcile's own children, seen while it runs, are not changes that hold it back.
//! Changes waiting for a guest's own busy workers hold no other guest's backlog back.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

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
    let copies = tempfile::tempdir()?;
    let config = ledger_guests(
        copies.path(),
        &[
            ("ledger-a", first.name(), workers),
            ("ledger-b", second.name(), workers),
        ],
    )?;
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

/// The configuration of guests of the ledger module, each `(name, namespace, workers)` from a
/// copy of its own in `dir`.
fn ledger_guests(dir: &Path, guests: &[(&str, &str, usize)]) -> Result<String> {
    let mut config = "modules:\n".to_owned();
    for (name, ns, workers) in guests {
        let path = dir.join(format!("{name}.wasm"));
        std::fs::copy(guest_wasm("ledger"), &path)?;
        config += &format!(
            "  - path: {}\n    name: {name}\n    namespaces: [{ns}]\n    maxConcurrency: {workers}\n    \
             limits:\n      logLinesPerSecond: 100000\n",
            path.display()
        );
    }
    Ok(config)
}

/// The CPUs the host of the busy-guest test counts: more than a CI machine has, so that the
/// room a busy guest leaves the backlog can be told from one reconcile.
const COUNTED_CPUS: usize = 8;

#[tokio::test]
async fn a_busy_single_worker_guest_leaves_another_guests_backlog_the_cpus_it_does_not_use()
-> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let busy = plane.namespace("lanes-busy").await?;
    let backlog = plane.namespace("lanes-backlog").await?;
    let copies = tempfile::tempdir()?;
    let config = ledger_guests(
        copies.path(),
        &[
            ("busy", busy.name(), 1),
            ("backlog", backlog.name(), COUNTED_CPUS),
        ],
    )?;
    let [busy_api, backlog_api] =
        [busy.name(), backlog.name()].map(|ns| Api::<ConfigMap>::namespaced(client.clone(), ns));
    // Reconciles of 300 ms: the backlog takes 5 s one at a time, under 1 s beside the busy one.
    let listed = 2 * LISTED;
    list_sources(&backlog_api, listed, Some(300)).await?;
    list_sources(&busy_api, COUNTED_CPUS, Some(300)).await?;
    let stop = AtomicBool::new(false);
    let changes = change_without_pause(&busy_api, &stop);
    let cpus = COUNTED_CPUS.to_string();
    let run = async {
        let host = HostProcess::start_with(busy.name(), &config, &["--cpus", &cpus])?;
        let seen = eventually(
            "the backlog guest to reconcile every source",
            WAIT,
            || async { Ok((ledgered(&backlog_api, "listed").await? == listed).then_some(())) },
        )
        .await;
        if seen.is_err() {
            eprintln!("host's log:\n{}", host.log());
        }
        seen.and(ledger::runs(&host.log()))
    };
    let run = async {
        // The changes stop however the run ends.
        let runs = run.await;
        stop.store(true, Ordering::SeqCst);
        runs
    };
    let (runs, changed) = tokio::join!(run, changes);
    let runs = runs?;
    ensure!(
        changed > 0,
        "no change of the busy guest's sources was accepted"
    );
    backlog_beside_busy(&runs, backlog.name(), busy.name())
}

/// Changes the busy guest's sources, one after another every 20 ms, until `stop`: every one
/// is changed again while its one worker reconciles another. A change the loaded API server
/// refuses is skipped. Returns how many were accepted.
async fn change_without_pause(config_maps: &Api<ConfigMap>, stop: &AtomicBool) -> usize {
    let mut accepted = 0;
    for step in 0usize.. {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let name = format!("listed-{}", step % COUNTED_CPUS);
        let source = ledger_source(&name, &format!("changed-{step}"), Some(300));
        let params = PatchParams::apply("tests");
        match config_maps
            .patch(&name, &params, &Patch::Apply(&source))
            .await
        {
            Ok(_) => accepted += 1,
            Err(error) => eprintln!("changing {name}: {error}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    accepted
}

/// Checks that the second half of the backlog guest's reconciles (sources of `backlog`), past
/// the ramp from idle, reached at least half the counted CPUs at once while a reconcile of the
/// busy guest (sources of `busy`) ran.
fn backlog_beside_busy(runs: &[Run], backlog: &str, busy: &str) -> Result<()> {
    let of = |ns: &str| -> Vec<&Run> {
        let prefix = format!("{ns}/");
        runs.iter()
            .filter(|r| r.source.starts_with(&prefix))
            .collect()
    };
    let (mut backlog, busy) = (of(backlog), of(busy));
    backlog.sort_by_key(|run| run.start);
    let crowd = (backlog[backlog.len() / 2..].iter())
        .filter(|run| busy.iter().any(|b| b.spans(run.start)))
        .map(|run| {
            backlog
                .iter()
                .filter(|other| other.spans(run.start))
                .count()
        })
        .max()
        .unwrap_or(0);
    eprintln!(
        "at most {crowd} backlog reconciles at once beside the busy guest's, in the second half \
         of {}, of {COUNTED_CPUS} CPUs counted; {} reconciles of the busy guest",
        backlog.len(),
        busy.len()
    );
    ensure!(
        crowd >= COUNTED_CPUS / 2,
        "at most {crowd} backlog reconciles ran at once while the busy guest's one worker \
         reconciled: its changes waiting for that worker held the backlog of another guest"
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
