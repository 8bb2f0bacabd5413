//! Sharded hosts in tests: the replicas of a ring, the `ledger` guest's sources, and what a
//! watch saw of their shard labels.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::ledger::{self, word};
use crate::{HostProcess, WAIT, eventually, is_controlled_by};

/// The sources of the `ledger` guest.
pub const SOURCES: usize = 24;
/// The shard label of the `ledger` guest run from a module file.
pub const LABEL: &str = "shard.kubewasm.dev/ledger";

/// One host, its member name and the log it left.
pub struct Replica {
    /// Its name in the test.
    pub name: &'static str,
    /// The process, while it runs.
    pub process: Option<HostProcess>,
    /// Its member name.
    pub member: String,
    /// The whole log once the process has ended, and when it was killed, if it was.
    pub ended: Option<(String, Option<u128>)>,
    /// When it was sent SIGTERM or SIGKILL: it reconciles nothing from then on.
    pub stopped_at: Option<u128>,
}

impl Replica {
    /// Starts the host `name` with `config` and `args`, and waits until it joins its ring.
    pub async fn start(name: &'static str, config: &str, args: &[&str]) -> Result<Self> {
        let process = HostProcess::start_with(name, config, args)?;
        let member = eventually(&format!("{name} to join the ring"), WAIT, || async {
            Ok(process.log().lines().find_map(|line| {
                line.contains("joined the shard ring")
                    .then(|| word(line, "member="))
                    .flatten()
            }))
        })
        .await?;
        Ok(Self {
            name,
            process: Some(process),
            member,
            ended: None,
            stopped_at: None,
        })
    }

    /// Its log so far, or the whole log once it ended.
    pub fn log(&self) -> String {
        match (&self.ended, &self.process) {
            (Some((log, _)), _) => log.clone(),
            (None, Some(process)) => process.log(),
            (None, None) => String::new(),
        }
    }

    /// Stops the host with SIGTERM and keeps its log.
    pub async fn terminate(&mut self) -> Result<()> {
        let process = self.process.as_ref().context("the host runs")?;
        self.stopped_at = Some(now());
        process.signal("TERM")?;
        let log = eventually(&format!("{} to stop", self.name), WAIT, || async {
            let log = process.log();
            Ok(log.contains("released the membership Lease").then_some(log))
        })
        .await?;
        self.ended = Some((log, None));
        self.process = None;
        Ok(())
    }

    /// Kills the host with SIGKILL and keeps its log.
    pub async fn kill(&mut self) -> Result<()> {
        let process = self.process.take().context("the host runs")?;
        process.signal("KILL")?;
        let killed = now();
        self.stopped_at = Some(killed);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        self.ended = Some((process.log(), Some(killed)));
        Ok(())
    }
}

/// The wall clock, in nanoseconds since the epoch.
pub fn now() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
}

/// `result`, with the log of every replica printed if it is a failure.
pub fn print_logs_if_failed(result: Result<()>, replicas: &[Replica]) -> Result<()> {
    if result.is_err() {
        for replica in replicas {
            eprintln!(
                "--- {} ({}):\n{}",
                replica.name,
                replica.member,
                replica.log()
            );
        }
    }
    result
}

/// Creates the sources of the `ledger` guest, each with the value `v0`.
pub async fn create_sources(config_maps: &Api<ConfigMap>) -> Result<()> {
    for i in 0..SOURCES {
        let source: ConfigMap = serde_json::from_value(json!({
            "metadata": {
                "name": format!("source-{i}"),
                "labels": { "kubewasm.dev/fixture": "ledger" },
            },
            "data": { "value": "v0" },
        }))?;
        config_maps.create(&PostParams::default(), &source).await?;
    }
    Ok(())
}

/// Sets every source's value.
pub async fn update(config_maps: &Api<ConfigMap>, value: &str) -> Result<()> {
    for i in 0..SOURCES {
        let patch = json!({ "data": { "value": value } });
        config_maps
            .patch(
                &format!("source-{i}"),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
    }
    Ok(())
}

/// The member each source is labelled for by the shard label `label`.
pub async fn holders(
    config_maps: &Api<ConfigMap>,
    label: &str,
) -> Result<BTreeMap<String, String>> {
    let sources = config_maps
        .list(&kube::api::ListParams::default().labels("kubewasm.dev/fixture=ledger"))
        .await?;
    Ok(sources
        .items
        .into_iter()
        .filter_map(|s| {
            let name = s.metadata.name?;
            let holder = s.metadata.labels?.get(label)?.clone();
            Some((name, holder))
        })
        .collect())
}

/// Waits until `member` holds a source by the shard label `label`.
pub async fn until_holding(config_maps: &Api<ConfigMap>, label: &str, member: &str) -> Result<()> {
    eventually(&format!("{member} to hold sources"), WAIT, || async {
        let holders = holders(config_maps, label).await?;
        Ok(holders.values().any(|m| m == member).then_some(()))
    })
    .await
}

/// How many members hold sources by the shard label `label`.
pub async fn holding(config_maps: &Api<ConfigMap>, label: &str) -> Result<usize> {
    let holders = holders(config_maps, label).await?;
    Ok(holders.values().collect::<BTreeSet<_>>().len())
}

/// Waits until every source is labelled (by `label`) for one of `members` and its child holds
/// `value`.
pub async fn converged(
    config_maps: &Api<ConfigMap>,
    label: &str,
    value: &str,
    members: &BTreeSet<String>,
) -> Result<()> {
    eventually(
        &format!("every source mirrored with {value}"),
        WAIT,
        || async {
            let holders = holders(config_maps, label).await?;
            let held = holders.len() == SOURCES && holders.values().all(|m| members.contains(m));
            if !held {
                return Ok(None);
            }
            for i in 0..SOURCES {
                let child = config_maps.get_opt(&format!("source-{i}-ledger")).await?;
                let mirrored = child
                    .and_then(|c| c.data)
                    .and_then(|d| d.get("value").cloned());
                if mirrored.as_deref() != Some(value) {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        },
    )
    .await
}

/// Waits until every PodSet of `podsets` is labelled by `label` for one of `members`, and every
/// pod of `pods` it controls for the same member.
pub async fn podsets_labelled(
    (podsets, pods): (&Api<DynamicObject>, &Api<Pod>),
    label: &str,
    members: &BTreeSet<String>,
) -> Result<()> {
    eventually(
        "every PodSet and pod labelled for a member",
        WAIT,
        || async {
            let listed = podsets.list(&ListParams::default()).await?.items;
            let pods = pods.list(&ListParams::default()).await?.items;
            for podset in &listed {
                let Some(member) = podset.labels().get(label) else {
                    return Ok(None);
                };
                let uid = podset.uid().context("a PodSet has a uid")?;
                let followed = (pods.iter())
                    .filter(|pod| is_controlled_by(*pod, &uid))
                    .all(|pod| pod.labels().get(label) == Some(member));
                if !members.contains(member) || !followed {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        },
    )
    .await
}

/// Checks, from every replica's log, that no two replicas reconciled one source at once.
pub fn never_at_once(replicas: &[Replica], least: usize) -> Result<()> {
    // Per source: (start, end, replica).
    let mut runs: BTreeMap<String, Vec<(u128, u128, &str)>> = BTreeMap::new();
    let mut total = 0;
    for replica in replicas {
        let (log, killed) = replica.ended.as_ref().context("every replica ended")?;
        let ledger = ledger::runs(log).with_context(|| format!("{}'s log", replica.name))?;
        for run in ledger {
            let end = match run.end {
                Some(end) => {
                    total += 1;
                    end
                }
                None => killed.with_context(|| {
                    format!(
                        "{} never ended its reconcile of {}",
                        replica.name, run.source
                    )
                })?,
            };
            runs.entry(run.source)
                .or_default()
                .push((run.start, end, replica.name));
        }
    }
    ensure!(
        total >= SOURCES * least,
        "only {total} reconciles were logged"
    );
    for (source, mut spans) in runs {
        spans.sort();
        for pair in spans.windows(2) {
            let ((_, end, first), (start, _, second)) = (pair[0], pair[1]);
            ensure!(
                first == second || start >= end,
                "{source} was reconciled by {first} and {second} at once"
            );
        }
    }
    eprintln!("{total} reconciles, none of one source by two replicas at once");
    Ok(())
}

/// When a source was seen, its name and its shard label.
pub type Seen = (u128, String, Option<String>);

/// The shard label of every source, as a watch saw each change, by the wall clock.
pub struct Labels {
    /// Every label seen, in order.
    seen: std::sync::Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Labels {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Labels {
    /// Records the shard label `label` of every source of `config_maps` from now on.
    pub fn record(config_maps: Api<ConfigMap>, label: &str) -> Self {
        use futures::StreamExt;
        use kube::runtime::watcher::{self, Event};
        let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
        let (record, shard) = (seen.clone(), label.to_owned());
        let config = watcher::Config::default().labels("kubewasm.dev/fixture=ledger");
        let task = tokio::spawn(async move {
            let mut events = watcher::watcher(config_maps, config).boxed();
            while let Some(event) = events.next().await {
                if let Ok(Event::Apply(source) | Event::InitApply(source)) = event {
                    let label = source.labels().get(&shard).cloned();
                    let name = source.name_any();
                    record
                        .lock()
                        .expect("labels lock")
                        .push((now(), name, label));
                }
            }
        });
        Self { seen, task }
    }

    /// Whether a source was ever seen labelled for `member`.
    pub fn any_for(&self, member: &str) -> bool {
        let seen = self.seen.lock().expect("labels lock");
        seen.iter()
            .any(|(_, _, label)| label.as_deref() == Some(member))
    }

    /// Checks that no source went without a live holder for longer than a member's Lease of
    /// `lease_seconds` plus 5 s (a member killed holds its keys until its Lease expires and the
    /// sharder confirms it), until now; prints the longest time.
    pub fn held_within_lease(&self, replicas: &[Replica], lease_seconds: u64) -> Result<()> {
        let (longest, source) = self.longest_ownerless(replicas, now());
        eprintln!(
            "longest time a source had no live holder: {:.1} s ({source})",
            longest as f64 / 1e9
        );
        ensure!(
            longest <= u128::from(lease_seconds + 5) * 1_000_000_000,
            "{source} had no live holder for {:.1} s: more than the Lease's {lease_seconds} s and 5 s",
            longest as f64 / 1e9
        );
        Ok(())
    }

    /// The longest time, until `until`, that a source was labelled for no member or for one
    /// already stopped, and which source.
    pub fn longest_ownerless(&self, replicas: &[Replica], until: u128) -> (u128, String) {
        let stopped: BTreeMap<&str, u128> = replicas
            .iter()
            .filter_map(|r| Some((r.member.as_str(), r.stopped_at?)))
            .collect();
        let seen = self.seen.lock().expect("labels lock").clone();
        let mut by_source: BTreeMap<String, Vec<(u128, Option<String>)>> = BTreeMap::new();
        for (at, name, label) in seen {
            by_source.entry(name).or_default().push((at, label));
        }
        let mut longest = (0, String::new());
        for (source, changes) in by_source {
            let mut ownerless_since: Option<u128> = None;
            let ends = changes.iter().skip(1).map(|(at, _)| *at).chain([until]);
            for ((at, label), end) in changes.iter().zip(ends) {
                // From when this label stops naming a live holder, within [at, end).
                let from = match label {
                    None => Some(*at),
                    Some(member) => (stopped.get(member.as_str()))
                        .filter(|stop| **stop < end)
                        .map(|stop| (*stop).max(*at)),
                };
                match from {
                    Some(from) => {
                        // Held until `from`: the time without a holder starts there.
                        if from > *at {
                            ownerless_since = None;
                        }
                        let since = *ownerless_since.get_or_insert(from);
                        if end - since > longest.0 {
                            longest = (end - since, source.clone());
                        }
                    }
                    None => ownerless_since = None,
                }
            }
        }
        longest
    }
}
