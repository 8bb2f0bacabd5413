//! Everything a run measured, the ratios against the targets, and how they are printed.

use serde::Serialize;
use serde_json::Value;

use crate::cli::Plan;
use crate::controllers::{CONCURRENCY, Implementation};
use crate::machine::{Machine, Versions};
use crate::procfs::Usage;
use crate::workloads::cache::CacheRun;
use crate::workloads::churn::Churn;
use crate::workloads::convergence::{CEILING_CONCURRENCY, Convergence};
use crate::workloads::density::{self, Density};
use crate::workloads::failover::{Failover, Standby, Stop};
use crate::workloads::idle::IdleResync;
use crate::workloads::reload::HotReload;
use crate::workloads::scale::{MIB, Scale};
use crate::workloads::shards::ShardedConvergence;

/// The JSON document of a run.
#[derive(Debug, Serialize)]
pub struct Results {
    /// The harness's command line.
    pub command: String,
    pub machine: Machine,
    pub versions: Versions,
    pub plan: Plan,
    /// The figures of the dispatch micro-benchmark.
    pub dispatch: Option<Value>,
    /// The figures of the namespace micro-benchmark.
    pub namespace: Option<Value>,
    pub convergence: Vec<Convergence>,
    pub churn: Vec<Churn>,
    pub idle_resync: Vec<IdleResync>,
    pub hot_reload: Option<HotReload>,
    pub scale: Vec<Scale>,
    pub cache: Vec<CacheRun>,
    pub failover: Vec<Failover>,
    pub shards: Vec<ShardedConvergence>,
    pub density: Vec<Density>,
    /// Workloads that failed, with their error.
    pub errors: Vec<String>,
    pub ratios: Vec<Ratio>,
}

/// A figure compared with its target, or shown for context.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    pub name: String,
    pub value: f64,
    /// `x` (a ratio), `%`, `MiB`, `µs`, `ms` or `count`.
    pub unit: &'static str,
    pub target: Option<Target>,
    /// Whether the value meets the target; none without one.
    pub met: Option<bool>,
}

/// A bound a figure must keep.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    AtMost(f64),
    AtLeast(f64),
}

impl Ratio {
    pub fn new(name: String, value: f64, unit: &'static str, target: Option<Target>) -> Self {
        let met = target.map(|target| match target {
            Target::AtMost(bound) => value <= bound,
            Target::AtLeast(bound) => value >= bound,
        });
        Self {
            name,
            value,
            unit,
            target,
            met,
        }
    }
}

/// The ratios of `results`: the issue's targets first, then context.
pub fn ratios(results: &Results) -> Vec<Ratio> {
    use Implementation::{ControllerRuntime, KubeRs, Kubewasm, NullWriter};
    let mut targets = Vec::new();
    let mut context = Vec::new();
    for &objects in &results.plan.objects {
        let find = |implementation, concurrency| {
            results.convergence.iter().find(|c| {
                c.implementation == implementation
                    && c.objects == objects
                    && c.concurrency == concurrency
            })
        };
        let c = CONCURRENCY as usize;
        let Some(kubewasm) = find(Kubewasm, c) else {
            continue;
        };
        for (other, bound) in [(KubeRs, 1.05), (ControllerRuntime, 1.0)] {
            if let Some(other_run) = find(other, c) {
                targets.push(Ratio::new(
                    format!("convergence {objects}: time kubewasm / {}", other.name()),
                    kubewasm.seconds / other_run.seconds,
                    "x",
                    Some(Target::AtMost(bound)),
                ));
                if let (Some(own), Some(theirs)) = (kubewasm.usage, other_run.usage) {
                    let bound = match other {
                        KubeRs => 0.6,
                        _ => 0.4,
                    };
                    targets.push(Ratio::new(
                        format!(
                            "convergence {objects}: peak RSS kubewasm / {}",
                            other.name()
                        ),
                        own.peak_rss_bytes as f64 / theirs.peak_rss_bytes as f64,
                        "x",
                        Some(Target::AtMost(bound)),
                    ));
                    context.push(Ratio::new(
                        format!("convergence {objects}: CPU kubewasm / {}", other.name()),
                        own.cpu_seconds / theirs.cpu_seconds,
                        "x",
                        None,
                    ));
                }
            }
        }
        if let Some(null) = find(NullWriter, c) {
            targets.push(Ratio::new(
                format!("convergence {objects}: kubewasm / null writer (c={c}) throughput"),
                100.0 * kubewasm.objects_per_second / null.objects_per_second,
                "%",
                Some(Target::AtLeast(80.0)),
            ));
        }
        if let Some(null) = find(NullWriter, c) {
            context.push(Ratio::new(
                format!(
                    "convergence {objects}: kubewasm / null writer (c={c}) throughput after the first child"
                ),
                100.0 * kubewasm.steady_objects_per_second / null.steady_objects_per_second,
                "%",
                None,
            ));
        }
        if let Some(ceiling) = find(NullWriter, CEILING_CONCURRENCY) {
            context.push(Ratio::new(
                format!(
                    "convergence {objects}: kubewasm / null writer (c={CEILING_CONCURRENCY}) throughput"
                ),
                100.0 * kubewasm.objects_per_second / ceiling.objects_per_second,
                "%",
                None,
            ));
        }
    }
    for idle in &results.idle_resync {
        let target = (idle.implementation == Kubewasm).then_some(Target::AtMost(0.0));
        let row = Ratio::new(
            format!("idle resync: writes of {}", idle.implementation.name()),
            idle.writes as f64,
            "count",
            target,
        );
        if target.is_some() {
            &mut targets
        } else {
            &mut context
        }
        .push(row);
    }
    for implementation in Implementation::CONTROLLERS {
        let runs: Vec<&Scale> = results
            .scale
            .iter()
            .filter(|s| s.implementation == implementation)
            .collect();
        if let (Some(first), Some(last)) = (runs.first(), runs.last())
            && last.controllers > first.controllers
        {
            let per_extra = |bytes: fn(&Usage) -> u64| {
                (bytes(&last.usage) as f64 - bytes(&first.usage) as f64)
                    / (last.controllers - first.controllers) as f64
                    / MIB
            };
            let scale = format!("scale {}..{}", first.controllers, last.controllers);
            if implementation == Kubewasm {
                targets.push(Ratio::new(
                    format!("{scale}: extra RSS per extra idle guest of kubewasm"),
                    per_extra(|u| u.rss_bytes),
                    "MiB",
                    Some(Target::AtMost(1.0)),
                ));
                context.push(Ratio::new(
                    format!("{scale}: extra anonymous RSS per extra idle guest of kubewasm"),
                    per_extra(|u| u.rss_anon_bytes),
                    "MiB",
                    None,
                ));
                context.push(Ratio::new(
                    format!("{scale}: extra file-backed RSS per extra idle guest of kubewasm"),
                    per_extra(|u| u.rss_file_bytes),
                    "MiB",
                    None,
                ));
                context.push(Ratio::new(
                    format!("{scale}: extra PSS per extra idle guest of kubewasm"),
                    per_extra(|u| u.pss_bytes),
                    "MiB",
                    None,
                ));
            } else {
                for (what, bytes) in [
                    ("RSS", per_extra(|u| u.rss_bytes)),
                    ("PSS", per_extra(|u| u.pss_bytes)),
                ] {
                    context.push(Ratio::new(
                        format!(
                            "{scale}: extra {what} per extra idle process of {}",
                            implementation.name()
                        ),
                        bytes,
                        "MiB",
                        None,
                    ));
                }
            }
        }
    }
    for run in &results.cache {
        let figures = |name: &str| run.caches.iter().find(|c| c.cacher.name() == name);
        let Some(kubewasm) = figures(Kubewasm.name()) else {
            continue;
        };
        let what = format!("cache {} {}", run.shape.name(), run.objects);
        for other in [
            "kube-rs",
            "kube-rs-stripped",
            "controller-runtime",
            "controller-runtime-stripped",
        ] {
            let Some(theirs) = figures(other) else {
                continue;
            };
            let target = (other == "kube-rs").then_some(Target::AtMost(0.5));
            let (watched, listed) = (
                Ratio::new(
                    format!("{what}: bytes per object kubewasm / {other}, watched"),
                    kubewasm.watched_bytes_per_object / theirs.watched_bytes_per_object,
                    "x",
                    target,
                ),
                Ratio::new(
                    format!("{what}: bytes per object kubewasm / {other}, listed"),
                    kubewasm.listed_bytes_per_object / theirs.listed_bytes_per_object,
                    "x",
                    target,
                ),
            );
            match target {
                Some(_) => targets.extend([watched, listed]),
                None => context.extend([watched, listed]),
            }
        }
        context.push(Ratio::new(
            format!("{what}: RSS of kubewasm holding them, listed"),
            kubewasm.listed.rss_bytes as f64 / MIB,
            "MiB",
            None,
        ));
    }
    if let Some(overhead) = results
        .dispatch
        .as_ref()
        .and_then(|d| d["overhead"]["median_us"].as_f64())
    {
        targets.push(Ratio::new(
            "dispatch: host overhead per reconcile, 4 KiB object, fresh instance (median)".into(),
            overhead,
            "µs",
            Some(Target::AtMost(30.0)),
        ));
    }
    if let Some(ratio) = results
        .namespace
        .as_ref()
        .and_then(|n| n["ratio_10000"].as_f64())
    {
        targets.push(Ratio::new(
            "namespace: podset reconcile with 10000 other pods in its namespace / with none (median)"
                .into(),
            ratio,
            "x",
            Some(Target::AtMost(1.2)),
        ));
    }
    if let Some(reload) = &results.hot_reload {
        targets.push(Ratio::new(
            "hot reload: longest swap of a compiled module".into(),
            reload.swap_ms.iter().copied().fold(0.0, f64::max),
            "ms",
            Some(Target::AtMost(50.0)),
        ));
        targets.push(Ratio::new(
            "hot reload: sources whose last update was lost".into(),
            reload.lost as f64,
            "count",
            Some(Target::AtMost(0.0)),
        ));
    }
    for run in &results.failover {
        let how = match run.standby {
            Standby::Warm => "warm standby",
            Standby::Cold => "cold start",
        };
        let what = format!("failover {}, {how}, {}", run.objects, run.stop.name());
        let lease_ms = 1e3 * run.lease_duration_seconds as f64;
        let warm = run.standby == Standby::Warm;
        let (first, effect) = (
            Ratio::new(
                format!("{what}: Lease acquired to the first reconcile's write in every guest"),
                run.first_write_ms,
                "ms",
                warm.then_some(Target::AtMost(1000.0)),
            ),
            Ratio::new(
                format!("{what}: signal to the change reconciled in every guest"),
                run.effect_ms,
                "ms",
                warm.then_some(Target::AtMost(match run.stop {
                    Stop::Term => 2000.0,
                    Stop::Kill => lease_ms + 1000.0,
                })),
            ),
        );
        match warm {
            true => targets.extend([first, effect]),
            false => context.extend([first, effect]),
        }
        // The backlog pass: 5,000 PodSets in at most 30 s, whatever the way.
        targets.push(Ratio::new(
            format!("{what}: Lease acquired to every PodSet reconciled again, per 1000 PodSets"),
            run.handled_all_ms * 1000.0 / run.podsets.max(1) as f64,
            "ms",
            Some(Target::AtMost(6000.0)),
        ));
        context.push(Ratio::new(
            format!(
                "{what}: signal to the Lease acquired (lease {} s)",
                run.lease_duration_seconds
            ),
            run.acquired_ms,
            "ms",
            None,
        ));
        if warm
            && let Some(cold) = results.failover.iter().find(|c| {
                c.standby == Standby::Cold && c.stop == run.stop && c.objects == run.objects
            })
        {
            context.push(Ratio::new(
                format!(
                    "failover {}, {}: signal to the change reconciled, warm / cold",
                    run.objects,
                    run.stop.name()
                ),
                run.effect_ms / cold.effect_ms,
                "x",
                None,
            ));
        }
    }
    for run in results.shards.iter().filter(|r| r.sharded) {
        let what = format!("shards {}, {} sharded replicas", run.objects, run.replicas);
        let most = run
            .hosts
            .iter()
            .map(|h| h.sources_cached)
            .max()
            .unwrap_or(0);
        targets.push(Ratio::new(
            format!("{what}: the largest share of the sources one replica caches, x replicas"),
            most as f64 * run.replicas as f64 / run.objects as f64,
            "x",
            Some(Target::AtMost(1.25)),
        ));
        if let Some(kill) = &run.kill {
            targets.push(Ratio::new(
                format!(
                    "{what}: time a killed member's sources had no live owner / (its Lease + 5 s)"
                ),
                kill.ownerless_seconds / (kill.lease_seconds + 5.0),
                "x",
                Some(Target::AtMost(1.0)),
            ));
        }
        context.push(Ratio::new(
            format!("{what}: the sharder's label writes of sources per source"),
            (run.assignments + run.moves) as f64 / run.objects as f64,
            "x",
            None,
        ));
        let Some(single) = results
            .shards
            .iter()
            .find(|s| !s.sharded && s.objects == run.objects)
        else {
            continue;
        };
        let peak = |r: &ShardedConvergence| {
            r.hosts
                .iter()
                .map(|h| h.usage.peak_rss_bytes)
                .max()
                .unwrap_or(0) as f64
        };
        let cpu = |r: &ShardedConvergence| r.hosts.iter().map(|h| h.usage.cpu_seconds).sum::<f64>();
        context.extend([
            Ratio::new(
                format!("{what}: convergence time / one unsharded host"),
                run.seconds / single.seconds,
                "x",
                None,
            ),
            Ratio::new(
                format!("{what}: the largest replica peak RSS / one unsharded host"),
                peak(run) / peak(single),
                "x",
                None,
            ),
            Ratio::new(
                format!("{what}: CPU of every replica / one unsharded host"),
                cpu(run) / cpu(single),
                "x",
                None,
            ),
        ]);
    }
    for rate in results.churn.iter().map(|c| c.rate_per_second) {
        let p99 = |implementation| {
            results
                .churn
                .iter()
                .find(|c| c.implementation == implementation && c.rate_per_second == rate)
                .map(|c| c.latency.p99_ms)
        };
        for other in [KubeRs, ControllerRuntime] {
            if let (Some(own), Some(theirs)) = (p99(Kubewasm), p99(other)) {
                let name = format!("churn {rate}/s: p99 latency kubewasm / {}", other.name());
                if !context.iter().any(|r: &Ratio| r.name == name) {
                    context.push(Ratio::new(name, own / theirs, "x", None));
                }
            }
        }
    }
    let kube_rs_per_process = results
        .scale
        .iter()
        .filter(|s| s.implementation == KubeRs && !s.extrapolated)
        .max_by_key(|s| s.processes)
        .map(|s| s.usage.rss_bytes as f64 / s.processes as f64);
    density::ratios(&results.density, kube_rs_per_process, &mut targets);
    targets.extend(context);
    targets
}

/// Every workload's figures, then the ratios, as Markdown: printed at the end of a run and
/// written next to the JSON, ready for `docs/benchmarks.md`.
pub fn markdown(results: &Results) -> String {
    let (m, v) = (&results.machine, &results.versions);
    let mut out = format!(
        "Command: `{}`\n\nMachine: {} CPUs ({}), {:.1} GiB memory, Linux {}, load average {} at \
         the start.\n\nVersions: kube-apiserver {}, {}, {}, wasmtime {}, kube-rs {}, \
         controller-runtime {}.\n",
        results.command,
        m.nproc,
        m.cpu_model,
        m.memory_bytes as f64 / MIB / 1024.0,
        m.kernel,
        m.load_average,
        v.kube_apiserver,
        v.rustc,
        v.go,
        v.wasmtime,
        v.kube_rs,
        v.controller_runtime
    );
    let mib = |bytes: u64| format!("{:.1}", bytes as f64 / MIB);
    let count = |n: Option<u64>| n.map_or("-".into(), |n| n.to_string());

    section(&mut out, "Cold convergence");
    table(
        &mut out,
        &[
            ">objects",
            "implementation",
            ">concurrency",
            ">seconds",
            ">objects/s",
            ">first child s",
            ">objects/s after the first",
            ">peak RSS MiB",
            ">CPU s",
            ">control plane CPU s",
            ">harness CPU s",
            ">machine busy",
            ">reconciles",
            ">mean reconcile ms",
        ],
        results.convergence.iter().map(|c| {
            vec![
                c.objects.to_string(),
                c.implementation.name().into(),
                c.concurrency.to_string(),
                format!("{:.2}", c.seconds),
                format!("{:.0}", c.objects_per_second),
                format!("{:.2}", c.first_child_seconds),
                format!("{:.0}", c.steady_objects_per_second),
                c.usage.map_or("-".into(), |u| mib(u.peak_rss_bytes)),
                c.usage
                    .map_or("-".into(), |u| format!("{:.2}", u.cpu_seconds)),
                format!("{:.1}", c.control_plane_cpu_seconds),
                format!("{:.1}", c.harness_cpu_seconds),
                format!("{:.0}%", c.machine_busy_percent),
                c.host.map_or("-".into(), |h| h.reconciles.to_string()),
                c.host.map_or("-".into(), |h| {
                    format!(
                        "{:.2}",
                        1e3 * h.reconcile_seconds / h.reconciles.max(1) as f64
                    )
                }),
            ]
        }),
    );
    section(&mut out, "Bytes per cached object");
    table(
        &mut out,
        &[
            "kind",
            ">objects",
            ">object bytes (without managedFields)",
            "cache",
            ">empty RSS MiB",
            ">watched RSS MiB",
            ">listed RSS MiB",
            ">listed peak RSS MiB",
            ">bytes/object watched",
            ">bytes/object listed",
        ],
        results.cache.iter().flat_map(|run| {
            run.caches.iter().map(move |c| {
                vec![
                    run.shape.name().into(),
                    run.objects.to_string(),
                    format!(
                        "{} ({})",
                        run.object_bytes, run.object_bytes_without_managed_fields
                    ),
                    c.cacher.name(),
                    mib(c.empty.rss_bytes),
                    mib(c.watched.rss_bytes),
                    mib(c.listed.rss_bytes),
                    mib(c.listed.peak_rss_bytes),
                    format!("{:.0}", c.watched_bytes_per_object),
                    format!("{:.0}", c.listed_bytes_per_object),
                ]
            })
        }),
    );
    section(&mut out, "Churn: latency from a source update to its child");
    table(
        &mut out,
        &[
            "implementation",
            ">updates/s",
            ">sent/s",
            ">p50 ms",
            ">p99 ms",
            ">max ms",
            ">lost",
        ],
        results.churn.iter().map(|c| {
            vec![
                c.implementation.name().into(),
                c.rate_per_second.to_string(),
                format!("{:.1}", c.sent_per_second),
                format!("{:.1}", c.latency.p50_ms),
                format!("{:.1}", c.latency.p99_ms),
                format!("{:.1}", c.latency.max_ms),
                c.lost.to_string(),
            ]
        }),
    );
    section(&mut out, "Idle resync");
    table(
        &mut out,
        &[
            "implementation",
            ">sources",
            ">resync s",
            ">idle s",
            ">writes",
            ">reconciles",
            ">applies elided",
        ],
        results.idle_resync.iter().map(|i| {
            vec![
                i.implementation.name().into(),
                i.sources.to_string(),
                i.resync_seconds.to_string(),
                format!("{:.0}", i.idle_seconds),
                i.writes.to_string(),
                count(i.host.map(|h| h.reconciles)),
                count(i.host.map(|h| h.writes_elided)),
            ]
        }),
    );
    if let Some(r) = &results.hot_reload {
        section(
            &mut out,
            &format!(
                "Hot reload under churn ({}/s over {} sources)",
                r.rate_per_second, r.sources
            ),
        );
        out.push_str(&format!(
            "{} of {} swaps done in place ({} other reloads). Swap as the host logs it, ms: \
             {:?}. From the rename to the reload counter moving, ms: {:?}. Update latency p50 \
             {:.1} ms, p99 {:.1} ms, max {:.1} ms; {} late (> {} ms), {} lost.\n",
            r.swapped_in_place,
            r.swaps,
            r.other_reloads,
            rounded(&r.swap_ms),
            rounded(&r.rename_to_swapped_ms),
            r.latency.p50_ms,
            r.latency.p99_ms,
            r.latency.max_ms,
            r.late,
            r.late_ms,
            r.lost
        ));
    }
    section(
        &mut out,
        "Many controllers, after convergence and an idle window",
    );
    table(
        &mut out,
        &[
            "implementation",
            ">controllers",
            ">processes",
            ">RSS MiB",
            ">anonymous MiB",
            ">file MiB",
            ">PSS MiB",
            ">peak RSS MiB",
            ">idle CPU s",
            "",
        ],
        results.scale.iter().map(|s| {
            vec![
                s.implementation.name().into(),
                s.controllers.to_string(),
                s.processes.to_string(),
                mib(s.usage.rss_bytes),
                mib(s.usage.rss_anon_bytes),
                mib(s.usage.rss_file_bytes),
                mib(s.usage.pss_bytes),
                mib(s.usage.peak_rss_bytes),
                format!("{:.2}", s.idle_cpu_seconds),
                if s.extrapolated { "extrapolated" } else { "" }.into(),
            ]
        }),
    );
    if !results.failover.is_empty() {
        section(
            &mut out,
            "Failover: the podset example in four languages, one guest each",
        );
        table(
            &mut out,
            &[
                ">objects",
                "standby",
                "signal",
                ">lease s",
                ">signal to Lease acquired ms",
                ">acquired to first write ms",
                ">acquired to a reconcile on /metrics ms",
                ">signal to change reconciled ms",
                ">acquired to every PodSet again ms",
                ">old leader CPU s",
                ">old leader peak RSS MiB",
                ">standby CPU s at the signal",
                ">standby RSS MiB at the signal",
                ">new leader CPU s",
                ">new leader peak RSS MiB",
            ],
            results.failover.iter().map(|f| {
                vec![
                    f.objects.to_string(),
                    f.standby.name().into(),
                    f.stop.name().into(),
                    f.lease_duration_seconds.to_string(),
                    format!("{:.1}", f.acquired_ms),
                    format!("{:.1}", f.first_write_ms),
                    format!("{:.1}", f.first_reconcile_on_metrics_ms),
                    format!("{:.1}", f.effect_ms),
                    format!("{:.0}", f.handled_all_ms),
                    format!("{:.2}", f.old_leader.cpu_seconds),
                    mib(f.old_leader.peak_rss_bytes),
                    f.standby_at_signal
                        .map_or("-".into(), |u| format!("{:.2}", u.cpu_seconds)),
                    f.standby_at_signal.map_or("-".into(), |u| mib(u.rss_bytes)),
                    format!("{:.2}", f.new_leader.cpu_seconds),
                    mib(f.new_leader.peak_rss_bytes),
                ]
            }),
        );
        out.push('\n');
        table(
            &mut out,
            &[
                ">objects",
                "standby",
                "signal",
                "guest",
                ">acquired to first write ms",
                ">acquired to a reconcile on /metrics ms",
                ">signal to change reconciled ms",
            ],
            results.failover.iter().flat_map(|f| {
                f.guests.iter().map(move |g| {
                    vec![
                        f.objects.to_string(),
                        f.standby.name().into(),
                        f.stop.name().into(),
                        g.language.into(),
                        format!("{:.1}", g.first_write_ms),
                        format!("{:.1}", g.first_reconcile_on_metrics_ms),
                        format!("{:.1}", g.effect_ms),
                    ]
                })
            }),
        );
    }
    if !results.shards.is_empty() {
        section(
            &mut out,
            "Sharded convergence: the copy guest on N replicas",
        );
        table(
            &mut out,
            &[
                ">sources",
                ">replicas",
                "sharded",
                ">seconds",
                ">objects/s",
                ">first child s",
                ">assignments",
                ">moves",
                ">control plane CPU s",
                ">killed member's sources",
                ">without owner s",
            ],
            results.shards.iter().map(|r| {
                vec![
                    r.objects.to_string(),
                    r.replicas.to_string(),
                    if r.sharded { "yes" } else { "no" }.into(),
                    format!("{:.2}", r.seconds),
                    format!("{:.0}", r.objects_per_second),
                    format!("{:.2}", r.first_child_seconds),
                    r.assignments.to_string(),
                    r.moves.to_string(),
                    format!("{:.2}", r.control_plane_cpu_seconds),
                    r.kill.as_ref().map_or("-".into(), |k| k.held.to_string()),
                    (r.kill.as_ref()).map_or("-".into(), |k| format!("{:.1}", k.ownerless_seconds)),
                ]
            }),
        );
        out.push('\n');
        table(
            &mut out,
            &[
                ">sources",
                ">replicas",
                "sharded",
                ">replica",
                ">sources cached",
                ">objects cached",
                ">reconciles",
                ">CPU s",
                ">RSS MiB",
                ">peak RSS MiB",
            ],
            results.shards.iter().flat_map(|r| {
                r.hosts.iter().enumerate().map(move |(index, h)| {
                    vec![
                        r.objects.to_string(),
                        r.replicas.to_string(),
                        if r.sharded { "yes" } else { "no" }.into(),
                        index.to_string(),
                        h.sources_cached.to_string(),
                        h.objects_cached.to_string(),
                        h.counters.reconciles.to_string(),
                        format!("{:.2}", h.usage.cpu_seconds),
                        mib(h.usage.rss_bytes),
                        mib(h.usage.peak_rss_bytes),
                    ]
                })
            }),
        );
    }
    if !results.density.is_empty() {
        section(&mut out, "Density");
        density::table(&mut out, &results.density);
    }
    if let Some(report) = results.dispatch.as_ref().and_then(|d| d["report"].as_str()) {
        section(&mut out, "Dispatch micro-benchmark");
        out.push_str(&format!("```text\n{}\n```\n", report.trim_end()));
    }
    if let Some(report) = results
        .namespace
        .as_ref()
        .and_then(|n| n["report"].as_str())
    {
        section(&mut out, "Namespace micro-benchmark");
        out.push_str(&format!("```text\n{}\n```\n", report.trim_end()));
    }
    section(&mut out, "Ratios");
    table(
        &mut out,
        &["figure", ">measured", ">target", "met"],
        results.ratios.iter().map(|ratio| {
            let target = ratio.target.map_or("-".into(), |target| match target {
                Target::AtMost(bound) => format!("<= {}", number(bound, ratio.unit)),
                Target::AtLeast(bound) => format!(">= {}", number(bound, ratio.unit)),
            });
            let met = match ratio.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "-",
            };
            vec![
                ratio.name.clone(),
                number(ratio.value, ratio.unit),
                target,
                met.into(),
            ]
        }),
    );
    for error in &results.errors {
        out.push_str(&format!(
            "\nFailed: {}\n",
            error.lines().next().unwrap_or_default()
        ));
    }
    out
}

/// Starts a `###` section.
pub fn section(out: &mut String, title: &str) {
    out.push_str(&format!("\n### {title}\n\n"));
}

/// A Markdown table; a column whose name starts with `>` is right-aligned.
pub fn table(out: &mut String, columns: &[&str], rows: impl IntoIterator<Item = Vec<String>>) {
    let names: Vec<&str> = columns.iter().map(|c| c.trim_start_matches('>')).collect();
    let rules: Vec<&str> = columns
        .iter()
        .map(|c| if c.starts_with('>') { "---:" } else { "---" })
        .collect();
    out.push_str(&format!(
        "| {} |\n| {} |\n",
        names.join(" | "),
        rules.join(" | ")
    ));
    for row in rows {
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
}

/// A value with its unit, rounded for the table.
fn number(value: f64, unit: &str) -> String {
    match unit {
        "x" => format!("{value:.2}x"),
        "%" => format!("{value:.0}%"),
        "count" => format!("{value:.0}"),
        _ => format!("{value:.1} {unit}"),
    }
}

fn rounded(values: &[f64]) -> Vec<f64> {
    values.iter().map(|v| (v * 10.0).round() / 10.0).collect()
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::Args;
    use crate::host_metrics::HostCounters;
    use crate::workloads::cache::{CacheFigures, Cacher, Shape};
    use crate::workloads::failover::GuestFailover;
    use crate::workloads::shards::{Kill, ShardHost};

    fn convergence(
        implementation: Implementation,
        concurrency: usize,
        seconds: f64,
    ) -> Convergence {
        Convergence {
            implementation,
            objects: 300,
            concurrency,
            seconds,
            objects_per_second: 300.0 / seconds,
            first_child_seconds: 0.1,
            steady_objects_per_second: 299.0 / (seconds - 0.1),
            usage: None,
            control_plane_cpu_seconds: 1.0,
            harness_cpu_seconds: 0.5,
            machine_busy_percent: 90.0,
            unowned: 0,
            clean_exit: true,
            host: None,
        }
    }

    fn scale(controllers: usize, rss_mib: u64) -> Scale {
        Scale {
            implementation: Implementation::Kubewasm,
            controllers,
            processes: 1,
            sources_per_controller: 3,
            converge_seconds: 1.0,
            usage: Usage {
                rss_bytes: rss_mib << 20,
                peak_rss_bytes: rss_mib << 20,
                rss_anon_bytes: (rss_mib - 10) << 20,
                rss_file_bytes: 10 << 20,
                pss_bytes: (rss_mib - 5) << 20,
                cpu_seconds: 0.5,
            },
            idle_cpu_seconds: 0.1,
            idle_seconds: 5.0,
            extrapolated: false,
        }
    }

    fn results() -> Results {
        let args = Args::parse_from(["kubewasm-bench", "--quick"]);
        Results {
            command: "kubewasm-bench --quick".into(),
            machine: Machine::this(),
            versions: Versions {
                kube_apiserver: "v1.36.3".into(),
                rustc: "rustc".into(),
                go: "go".into(),
                wasmtime: "48".into(),
                kube_rs: "5".into(),
                controller_runtime: "v0.24".into(),
            },
            plan: Plan::from(&args),
            dispatch: None,
            namespace: None,
            convergence: vec![
                convergence(Implementation::NullWriter, 4, 1.0),
                convergence(Implementation::Kubewasm, 4, 1.1),
                convergence(Implementation::KubeRs, 4, 1.0),
                convergence(Implementation::ControllerRuntime, 4, 2.2),
            ],
            churn: Vec::new(),
            idle_resync: Vec::new(),
            hot_reload: None,
            scale: vec![scale(1, 20), scale(10, 38)],
            cache: vec![cache_run()],
            failover: Vec::new(),
            shards: Vec::new(),
            density: Vec::new(),
            errors: Vec::new(),
            ratios: Vec::new(),
        }
    }

    /// 1000 ConfigMaps: kubewasm grows by 2000 bytes per object, kube-rs by 8000 watched and
    /// 4000 listed.
    fn cache_run() -> CacheRun {
        let figures = |implementation, watched: u64, listed: u64| {
            let usage = |rss_bytes| Usage {
                rss_bytes,
                ..Usage::default()
            };
            CacheFigures {
                cacher: Cacher {
                    implementation,
                    strip_managed_fields: false,
                },
                empty: usage(10_000_000),
                watched: usage(10_000_000 + 1000 * watched),
                listed: usage(10_000_000 + 1000 * listed),
                watched_bytes_per_object: watched as f64,
                listed_bytes_per_object: listed as f64,
            }
        };
        CacheRun {
            shape: Shape::Configmaps,
            objects: 1000,
            object_bytes: 2400,
            object_bytes_without_managed_fields: 1700,
            caches: vec![
                figures(Implementation::Kubewasm, 2000, 2000),
                figures(Implementation::KubeRs, 8000, 4000),
            ],
        }
    }

    fn failover(standby: Standby, effect_ms: f64) -> Failover {
        let guest = |language, effect_ms| GuestFailover {
            language,
            first_write_ms: 20.0,
            first_reconcile_on_metrics_ms: 60.0,
            effect_ms,
        };
        Failover {
            standby,
            stop: Stop::Term,
            objects: 1000,
            podsets: 500,
            lease_duration_seconds: 15,
            acquired_ms: 30.0,
            first_write_ms: 20.0,
            first_reconcile_on_metrics_ms: 60.0,
            effect_ms,
            guests: vec![guest("rust", effect_ms / 2.0), guest("python", effect_ms)],
            handled_all_ms: 900.0,
            old_leader: Usage::default(),
            standby_at_signal: (standby == Standby::Warm).then(Usage::default),
            new_leader: Usage::default(),
            clean_exit: Some(true),
        }
    }

    #[test]
    fn a_warm_failover_is_held_to_the_targets_and_compared_with_a_cold_one() {
        let mut results = results();
        results.failover = vec![
            failover(Standby::Warm, 2500.0),
            failover(Standby::Cold, 5000.0),
        ];
        let ratios = ratios(&results);
        let effect = find(
            &ratios,
            "failover 1000, warm standby, SIGTERM: signal to the change reconciled in every guest",
        );
        assert_eq!((effect.value, effect.met), (2500.0, Some(false)));
        let first = find(
            &ratios,
            "failover 1000, warm standby, SIGTERM: Lease acquired to the first reconcile's write in every guest",
        );
        assert_eq!(first.met, Some(true));
        let cold = find(
            &ratios,
            "failover 1000, cold start, SIGTERM: signal to the change reconciled in every guest",
        );
        assert_eq!(cold.met, None);
        let against = find(
            &ratios,
            "failover 1000, SIGTERM: signal to the change reconciled, warm / cold",
        );
        assert_eq!(against.value, 0.5);
        results.ratios = ratios;
        let text = markdown(&results);
        assert!(
            text.contains("| 1000 | warm | SIGTERM | python | 20.0 | 60.0 | 2500.0 |"),
            "{text}"
        );
    }

    fn sharded(replicas: usize, sharded: bool, shares: &[u64], seconds: f64) -> ShardedConvergence {
        let host = |sources_cached: u64| ShardHost {
            usage: Usage {
                peak_rss_bytes: 10 * sources_cached,
                cpu_seconds: sources_cached as f64 / 100.0,
                ..Usage::default()
            },
            sources_cached,
            objects_cached: 2 * sources_cached,
            counters: HostCounters {
                reconciles: sources_cached,
                writes_elided: 0,
                reconcile_seconds: 0.0,
            },
        };
        ShardedConvergence {
            replicas,
            sharded,
            objects: 1000,
            seconds,
            objects_per_second: 1000.0 / seconds,
            first_child_seconds: 1.0,
            hosts: shares.iter().map(|&s| host(s)).collect(),
            assignments: 1000,
            moves: 0,
            control_plane_cpu_seconds: 3.0,
            kill: (sharded && replicas > 1).then_some(Kill {
                held: 500,
                ownerless_seconds: 16.0,
                lease_seconds: 15.0,
            }),
        }
    }

    #[test]
    fn each_sharded_run_is_held_to_its_share_and_compared_with_one_unsharded_host() {
        let mut results = results();
        results.shards = vec![
            sharded(1, false, &[1000], 10.0),
            sharded(2, true, &[480, 520], 8.0),
            sharded(3, true, &[200, 300, 500], 12.0),
        ];
        let ratios = ratios(&results);
        let even = find(
            &ratios,
            "shards 1000, 2 sharded replicas: the largest share of the sources one replica caches, x replicas",
        );
        assert_eq!((even.value, even.met), (1.04, Some(true)));
        let uneven = find(
            &ratios,
            "shards 1000, 3 sharded replicas: the largest share of the sources one replica caches, x replicas",
        );
        assert_eq!((uneven.value, uneven.met), (1.5, Some(false)));
        let rss = find(
            &ratios,
            "shards 1000, 2 sharded replicas: the largest replica peak RSS / one unsharded host",
        );
        assert_eq!(rss.value, 0.52);
        let time = find(
            &ratios,
            "shards 1000, 3 sharded replicas: convergence time / one unsharded host",
        );
        assert_eq!(time.value, 1.2);
        let kill = find(
            &ratios,
            "shards 1000, 2 sharded replicas: time a killed member's sources had no live owner / (its Lease + 5 s)",
        );
        assert_eq!((kill.value, kill.met), (0.8, Some(true)));
        results.ratios = ratios;
        let text = markdown(&results);
        assert!(
            text.contains("| 1000 | 3 | yes | 2 | 500 | 1000 | 500 |"),
            "{text}"
        );
    }

    fn find<'a>(ratios: &'a [Ratio], name: &str) -> &'a Ratio {
        ratios
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no ratio {name:?} in {ratios:#?}"))
    }

    #[test]
    fn ratios_compare_kubewasm_with_each_target() {
        let ratios = ratios(&results());
        let kube_rs = find(&ratios, "convergence 300: time kubewasm / kube-rs");
        assert!((kube_rs.value - 1.1).abs() < 1e-9);
        assert_eq!(kube_rs.met, Some(false));
        let go = find(
            &ratios,
            "convergence 300: time kubewasm / controller-runtime",
        );
        assert!((go.value - 0.5).abs() < 1e-9);
        assert_eq!(go.met, Some(true));
        let null = find(
            &ratios,
            "convergence 300: kubewasm / null writer (c=4) throughput",
        );
        assert!((null.value - 100.0 / 1.1).abs() < 1e-9);
        assert_eq!(null.met, Some(true));
        let rss = find(
            &ratios,
            "scale 1..10: extra RSS per extra idle guest of kubewasm",
        );
        assert_eq!((rss.value, rss.met), (2.0, Some(false)));
        let watched = find(
            &ratios,
            "cache configmaps 1000: bytes per object kubewasm / kube-rs, watched",
        );
        assert_eq!((watched.value, watched.met), (0.25, Some(true)));
        let listed = find(
            &ratios,
            "cache configmaps 1000: bytes per object kubewasm / kube-rs, listed",
        );
        assert_eq!((listed.value, listed.met), (0.5, Some(true)));
    }

    #[test]
    fn markdown_holds_a_row_per_run_and_ratio() {
        let mut results = results();
        results.ratios = ratios(&results);
        let text = markdown(&results);
        assert!(
            text.contains(
                "| 300 | kubewasm | 4 | 1.10 | 273 | 0.10 | 299 | - | - | 1.0 | 0.5 | 90% | - | - |"
            ),
            "{text}"
        );
        assert!(
            text.contains("| configmaps | 1000 | 2400 (1700) | kube-rs | 9.5 | 17.2 | 13.4 | 0.0 | 8000 | 4000 |"),
            "{text}"
        );
        assert!(text.contains("| scale 1..10: extra RSS per extra idle guest of kubewasm | 2.0 MiB | <= 1.0 MiB | **no** |"), "{text}");
    }
}
