//! Density (kubewasm only): N WasmControllers, each confined to a namespace of its own holding a
//! few sources, all run by one host. In every ten controllers, six take the copy guest (four from
//! the local registry, one digest, two from a ConfigMap in their namespace, as teams would ship
//! it) and four the podset example, once in each of its languages, from the registry: their
//! namespaces hold PodSets of one replica instead of ConfigMaps.
//!
//! The host starts with an empty compile cache (cold); the clock stops when every
//! WasmController is Ready, as written by this host, every child shows its source's data and
//! every PodSet its replica. Then an idle window: the host's memory and CPU, and the API
//! server's requests and open watches, each less what the control plane does without the host
//! (measured before it started). Then updates spread over every copy guest's sources at a fixed
//! rate, and their latency. Last, the host is stopped and a new one started on the same objects
//! and the same compile cache (warm), timed until every WasmController is Ready as written by
//! it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde::Serialize;
use serde_json::json;
use tokio::time::Instant;

use kubewasm_tests::prometheus::has;
use kubewasm_tests::registry::{self, Registry};
use kubewasm_tests::{Language, podset};

use crate::bench::{Bench, report_unclean};
use crate::cli::Plan;
use crate::controllers::{Controllers, RunOptions};
use crate::load::{self, Source};
use crate::procfs::Usage;
use crate::report::{self, Ratio, Target};
use crate::stats::Latencies;
use crate::workloads::churn;
use crate::workloads::failover::{create_podsets, reconciled, until};

/// The label on every WasmController of a density run, valued with its controller count.
const RUN_LABEL: &str = "bench.kubewasm.dev/density";
/// Requests in flight while namespaces, sources and WasmControllers are created.
const SETUP_CONCURRENCY: usize = 16;
/// Two of the host's default `statusCountersInterval` (counters that only moved are written at
/// the object's own moment of the interval after the one they moved in), and a margin.
const COUNTERS_SETTLE: Duration = Duration::from_secs(125);
/// Updates per second of one source at most, so that each update is measured alone rather than
/// queued behind the last: with few controllers, each copy guest gets more sources (see
/// [`copy_sources`]).
const SOURCE_RATE: u32 = 2;
/// How long the control plane is watched without the host, for the baseline of its requests.
const BASELINE: Duration = Duration::from_secs(20);

/// One density run.
#[derive(Debug, Clone, Serialize)]
pub struct Density {
    /// WasmControllers, each in a namespace of its own.
    pub controllers: usize,
    /// Controllers by module: `copy`, `copy (ConfigMap)`, `podset (<language>)`.
    pub modules: BTreeMap<String, usize>,
    /// Sources in each copy guest's namespace.
    pub sources_per_controller: usize,
    /// Sources (ConfigMaps and PodSets) in all namespaces.
    pub sources: usize,
    /// From the host's start, with an empty compile cache, to every WasmController Ready and
    /// every child converged.
    pub cold_seconds: f64,
    /// From a new host's start, on the same objects and compile cache, to every WasmController
    /// Ready as written by it.
    pub warm_seconds: f64,
    /// The host once converged.
    pub converged: Usage,
    /// The host at the end of the idle window.
    pub idle: Usage,
    /// Where its resident memory lay then, by kind of mapping, in bytes.
    pub memory: BTreeMap<String, u64>,
    pub idle_seconds: f64,
    /// The host's CPU in the idle window, in percent of one core.
    pub idle_cpu_percent: f64,
    /// API requests per second in the idle window, less the control plane's own.
    pub idle_requests_per_second: f64,
    /// The same, by verb and resource, where not zero.
    pub idle_requests: BTreeMap<String, f64>,
    /// Watches open on the API server while the host runs, less those open before it started.
    pub watches: f64,
    /// Updates per second sent, spread over every copy guest's sources (at most
    /// [`SOURCE_RATE`] per source): the plan's rate at every controller count.
    pub rate_per_second: f64,
    pub latency: Latencies,
    /// Sources whose last update never reached their child.
    pub lost: usize,
}

/// Runs each controller count of the plan, smallest first, on one registry.
pub async fn run(bench: &Bench, repo: &Path) -> Result<Vec<Density>> {
    let client = &bench.client;
    kubewasm_tests::apply_yaml(client, &repo.join("deploy/crds/wasmcontrollers.yaml"), None)
        .await?;
    kubewasm_tests::apply_yaml(client, &repo.join("examples/podset/crd.yaml"), None).await?;
    let registry = Registry::start();
    let images = Images::push(bench, &registry)?;
    let mut counts = bench.plan.density.clone();
    counts.sort_unstable();
    let mut results = Vec::new();
    for count in counts {
        let result = measure(bench, &images, count).await?;
        println!(
            "density {count:>5} controllers: cold {:>6.1} s, warm {:>6.1} s, rss {:>7.1} MiB, \
             idle cpu {:.2}%, idle requests {:.2}/s, watches {:.0}, p99 {:.1} ms",
            result.cold_seconds,
            result.warm_seconds,
            result.idle.rss_bytes as f64 / MIB,
            result.idle_cpu_percent,
            result.idle_requests_per_second,
            result.watches,
            result.latency.p99_ms,
        );
        results.push(result);
    }
    Ok(results)
}

/// Bytes in a MiB.
const MIB: f64 = 1024.0 * 1024.0;

/// What the controller of one namespace runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tenant {
    /// The copy guest from the registry, copying its ConfigMap sources to children.
    Copy,
    /// The copy guest from the ConfigMap `module` of its namespace.
    CopyFromConfigMap,
    /// The podset example in one language from the registry, keeping its PodSets' pods.
    PodSet(Language),
}

impl Tenant {
    /// The tenant of the namespace at `index`: in every ten, four copy guests from the registry
    /// (the first of them alone when one controller runs), two from a ConfigMap and the podset
    /// example once in each language.
    fn of(index: usize) -> Self {
        match index % 10 {
            3 => Self::PodSet(Language::Rust),
            4 | 9 => Self::CopyFromConfigMap,
            5 => Self::PodSet(Language::JavaScript),
            6 => Self::PodSet(Language::Python),
            7 => Self::PodSet(Language::Go),
            _ => Self::Copy,
        }
    }

    /// Whether it takes the copy guest.
    fn copies(self) -> bool {
        matches!(self, Self::Copy | Self::CopyFromConfigMap)
    }

    fn name(self) -> String {
        match self {
            Self::Copy => "copy".to_owned(),
            Self::CopyFromConfigMap => "copy (ConfigMap)".to_owned(),
            Self::PodSet(language) => format!("podset ({})", language.dir()),
        }
    }
}

/// The modules in the registry, pinned to their digests.
struct Images {
    copy: String,
    podset: Vec<(Language, String)>,
}

impl Images {
    /// Pushes the copy guest and the podset example in each language to `registry`.
    fn push(bench: &Bench, registry: &Registry) -> Result<Self> {
        let binaries = bench.launcher.binaries();
        let push = |module: &Path, name: &str| {
            registry::push_by(&binaries.kubewasm, module, &registry.reference(name))
        };
        for language in [
            Language::Rust,
            Language::JavaScript,
            Language::Python,
            Language::Go,
        ] {
            anyhow::ensure!(
                binaries.podset.iter().any(|(l, _)| *l == language),
                "the podset guest in {} was not given",
                language.dir()
            );
        }
        Ok(Self {
            copy: push(&binaries.guest, "copy:density")?,
            podset: binaries
                .podset
                .iter()
                .map(|(language, module)| {
                    Ok((
                        *language,
                        push(module, &format!("podset-{}:density", language.dir()))?,
                    ))
                })
                .collect::<Result<_>>()?,
        })
    }

    /// The image of `tenant`, if it takes one from the registry.
    fn of(&self, tenant: Tenant) -> Option<&str> {
        match tenant {
            Tenant::Copy => Some(&self.copy),
            Tenant::CopyFromConfigMap => None,
            Tenant::PodSet(language) => self
                .podset
                .iter()
                .find(|(l, _)| *l == language)
                .map(|(_, image)| image.as_str()),
        }
    }
}

async fn measure(bench: &Bench, images: &Images, count: usize) -> Result<Density> {
    let namespaces: Vec<String> = (0..count).map(|i| format!("density-{count}-{i}")).collect();
    let sources = create(bench, images, &namespaces).await?;
    let label = format!("density-{count}");
    let baseline = ApiServer::read(bench).await?;
    tokio::time::sleep(BASELINE).await;
    let baseline = ApiServer::read(bench).await?.since(&baseline, BASELINE);

    let cold_replica = format!("{label}-cold");
    let options = |replica: &str| RunOptions {
        compile_cache: Some(bench.launcher.work().join(&label).join("compiled")),
        replica: Some(replica.to_owned()),
        ..RunOptions::default()
    };
    let dir = bench.launcher.folder(&format!("{label}-cold"))?;
    let start = Instant::now();
    let mut host = bench
        .launcher
        .controllers_host(&dir, &options(&cold_replica))?;
    ready(bench, count, &cold_replica, &mut host).await?;
    for (index, namespace) in namespaces.iter().enumerate() {
        if let Tenant::PodSet(_) = Tenant::of(index) {
            podsets_converged(bench, namespace, &mut host).await?;
            continue;
        }
        let mine: Vec<Source> = sources
            .iter()
            .filter(|s| &s.namespace == namespace)
            .cloned()
            .collect();
        bench.converged(namespace, &mine, Some(&mut host)).await?;
    }
    let cold_seconds = start.elapsed().as_secs_f64();
    // The counters of the reconciles that followed each first success are written once the
    // host's interval for counters has passed: idle is what comes after.
    tokio::time::sleep(COUNTERS_SETTLE).await;
    let converged = host.usage()?;

    let idle_window = Duration::from_secs(bench.plan.density_idle_seconds);
    let before = ApiServer::read(bench).await?;
    tokio::time::sleep(idle_window).await;
    host.check_running()?;
    let after = ApiServer::read(bench).await?;
    let idle = host.usage()?;
    let memory = host.memory_breakdown()?;
    let requests = after.since(&before, idle_window).less(&baseline);

    let podsets = (0..count).filter(|i| !Tenant::of(*i).copies()).count();
    let sources_in_all = sources.len() + podsets * bench.plan.density_sources;
    let mut churned = interleaved(sources);
    let rate = bench
        .plan
        .density_rate
        .min(SOURCE_RATE * churned.len() as u32);
    let window = Duration::from_secs(bench.plan.churn_seconds);
    let load = churn::generate(bench, &mut churned, rate, window, false).await?;
    host.check_running()?;
    report_unclean(&host.stop().await?);

    let warm_replica = format!("{label}-warm");
    let dir = bench.launcher.folder(&format!("{label}-warm"))?;
    let start = Instant::now();
    let mut host = bench
        .launcher
        .controllers_host(&dir, &options(&warm_replica))?;
    ready(bench, count, &warm_replica, &mut host).await?;
    let warm_seconds = start.elapsed().as_secs_f64();
    report_unclean(&host.stop().await?);
    load::delete_namespaces(&bench.client, &namespaces).await?;

    let mut modules = BTreeMap::new();
    for index in 0..count {
        *modules.entry(Tenant::of(index).name()).or_default() += 1;
    }
    Ok(Density {
        controllers: count,
        modules,
        sources_per_controller: copy_sources(&bench.plan, count),
        sources: sources_in_all,
        cold_seconds,
        warm_seconds,
        converged,
        idle,
        memory,
        idle_seconds: idle_window.as_secs_f64(),
        idle_cpu_percent: 100.0 * (idle.cpu_seconds - converged.cpu_seconds)
            / idle_window.as_secs_f64(),
        idle_requests_per_second: requests.requests.values().sum(),
        idle_requests: requests.requests,
        watches: after.watches - baseline.watches,
        rate_per_second: load.sent_per_second,
        latency: Latencies::of(load.latencies),
        lost: load.lost,
    })
}

/// Sources in each copy guest's namespace: as many as the plan says, or more where fewer could
/// not take the plan's update rate at [`SOURCE_RATE`] each. Every run, one controller alone
/// included, is then measured under the same load on the control plane: the latency with many
/// controllers differs from that of one alone by what sharing the host costs, not by the load.
fn copy_sources(plan: &Plan, count: usize) -> usize {
    let copies = (0..count)
        .filter(|i| Tenant::of(*i).copies())
        .count()
        .max(1);
    let needed = (plan.density_rate as usize).div_ceil(SOURCE_RATE as usize * copies);
    plan.density_sources.max(needed)
}

/// Creates each namespace with its sources (ConfigMaps or PodSets), its module ConfigMap where it
/// takes one, and its WasmController; returns the copy guests' sources.
async fn create(bench: &Bench, images: &Images, namespaces: &[String]) -> Result<Vec<Source>> {
    let module = std::fs::read(&bench.launcher.binaries().guest)?;
    let count = namespaces.len();
    let copy_sources = copy_sources(&bench.plan, count);
    let made: Vec<Vec<Source>> = futures::stream::iter(namespaces.iter().enumerate())
        .map(|(index, namespace)| {
            let module = &module;
            async move {
                let tenant = Tenant::of(index);
                let sources = match tenant {
                    Tenant::PodSet(_) => {
                        load::create_namespace(&bench.client, namespace).await?;
                        let api = podset::podsets(&bench.client, namespace);
                        create_podsets(&api, namespace, bench.plan.density_sources).await?;
                        Vec::new()
                    }
                    _ => bench.sources(namespace, copy_sources).await?,
                };
                let source = match images.of(tenant) {
                    Some(image) => json!({ "image": image }),
                    None => {
                        module_config_map(bench, namespace, module).await?;
                        json!({ "configMap": { "name": "module", "key": "module.wasm" } })
                    }
                };
                let controller: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "kubewasm.dev/v1alpha1",
                    "kind": "WasmController",
                    "metadata": { "name": "density", "labels": { RUN_LABEL: count.to_string() } },
                    "spec": { "module": source },
                }))?;
                wasm_controllers(bench, Some(namespace))
                    .create(&PostParams::default(), &controller)
                    .await
                    .with_context(|| format!("creating the WasmController of {namespace}"))?;
                anyhow::Ok(sources)
            }
        })
        .buffer_unordered(SETUP_CONCURRENCY)
        .try_collect()
        .await?;
    Ok(made.into_iter().flatten().collect())
}

/// Waits until every PodSet of `namespace` shows its replica; fails early when the host exits.
async fn podsets_converged(bench: &Bench, namespace: &str, host: &mut Controllers) -> Result<()> {
    let api = podset::podsets(&bench.client, namespace);
    let timeout = Duration::from_secs(120);
    until(
        &format!("the PodSets of {namespace}"),
        timeout,
        Duration::from_millis(100),
        async || {
            host.check_running()?;
            let listed = api.list(&ListParams::default()).await?.items;
            let all = listed.len() == bench.plan.density_sources;
            Ok((all && listed.iter().all(reconciled)).then_some(()))
        },
    )
    .await
}

/// `sources` ordered so that round-robin updates reach every namespace before a second source
/// of any: the first source of each namespace, then the second of each, and so on.
fn interleaved(mut sources: Vec<Source>) -> Vec<Source> {
    sources.sort_by(|a, b| (&a.name, &a.namespace).cmp(&(&b.name, &b.namespace)));
    sources
}

/// Creates the ConfigMap `module` in `namespace` holding `module` under `module.wasm`.
async fn module_config_map(bench: &Bench, namespace: &str, module: &[u8]) -> Result<()> {
    let object: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "module" },
        "binaryData": { "module.wasm": k8s_openapi::ByteString(module.to_vec()) },
    }))?;
    Api::<ConfigMap>::namespaced(bench.client.clone(), namespace)
        .create(&PostParams::default(), &object)
        .await?;
    Ok(())
}

/// The WasmControllers of `namespace`, or of every namespace.
fn wasm_controllers(bench: &Bench, namespace: Option<&str>) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("kubewasm.dev", "v1alpha1", "WasmController");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "wasmcontrollers");
    match namespace {
        Some(namespace) => Api::namespaced_with(bench.client.clone(), namespace, &resource),
        None => Api::all_with(bench.client.clone(), &resource),
    }
}

/// Waits until every one of the `count` WasmControllers of the run is Ready as `replica`
/// wrote it; fails early when the host exits.
async fn ready(bench: &Bench, count: usize, replica: &str, host: &mut Controllers) -> Result<()> {
    let api = wasm_controllers(bench, None);
    let selector = ListParams::default().labels(&format!("{RUN_LABEL}={count}"));
    let deadline =
        Instant::now() + Duration::from_secs(120) + Duration::from_millis(200) * count as u32;
    loop {
        host.check_running()?;
        let listed = api.list(&selector).await?;
        let ready = listed.items.iter().filter(|o| ready_as(o, replica)).count();
        if ready == count {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{ready} of {count} WasmControllers Ready as {replica} in time"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Whether `object`'s status, as `replica` wrote it, says Ready.
fn ready_as(object: &DynamicObject, replica: &str) -> bool {
    let status = &object.data["status"];
    status["replica"] == replica
        && status["conditions"].as_array().is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// What the API server's metrics say at one moment, or over a window.
struct ApiServer {
    /// Requests served, or per second over a window, by `verb resource[/subresource]`.
    requests: BTreeMap<String, f64>,
    /// Watches open.
    watches: f64,
}

impl ApiServer {
    /// Reads `/metrics` of the API server.
    async fn read(bench: &Bench) -> Result<Self> {
        let request = http::Request::get("/metrics").body(Vec::new())?;
        let text = bench.client.request_text(request).await?;
        Ok(Self::parse(&text))
    }

    fn parse(text: &str) -> Self {
        let mut requests = BTreeMap::new();
        let mut watches = 0.0;
        for (name, labels, value) in text.lines().filter_map(sample) {
            let label = |key: &str| {
                labels
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map_or("", |(_, v)| *v)
            };
            if name == "apiserver_request_total" {
                let resource = match label("subresource") {
                    "" => label("resource").to_owned(),
                    sub => format!("{}/{sub}", label("resource")),
                };
                *requests
                    .entry(format!("{} {resource}", label("verb")))
                    .or_insert(0.0) += value;
            } else if name == "apiserver_longrunning_requests" && has(&labels, "verb", "WATCH") {
                watches += value;
            }
        }
        Self { requests, watches }
    }

    /// The requests per second from `earlier` to `self`, `window` apart; the watches of `self`.
    fn since(&self, earlier: &Self, window: Duration) -> Self {
        let requests = self
            .requests
            .iter()
            .map(|(key, n)| {
                let before = earlier.requests.get(key).copied().unwrap_or(0.0);
                (key.clone(), (n - before) / window.as_secs_f64())
            })
            .filter(|(_, rate)| *rate > 0.0)
            .collect();
        Self {
            requests,
            watches: self.watches,
        }
    }

    /// The rates of `self` less those of `baseline`, where more.
    fn less(&self, baseline: &Self) -> Self {
        let requests = self
            .requests
            .iter()
            .map(|(key, rate)| {
                (
                    key.clone(),
                    rate - baseline.requests.get(key).copied().unwrap_or(0.0),
                )
            })
            .filter(|(_, rate)| *rate > 0.0)
            .collect();
        Self {
            requests,
            watches: self.watches - baseline.watches,
        }
    }
}

/// A metric's labels, as `(name, value)` pairs.
type Labels<'a> = Vec<(&'a str, &'a str)>;

/// A sample of a Prometheus text line: its name, labels and value.
fn sample(line: &str) -> Option<(&str, Labels<'_>, f64)> {
    if line.starts_with('#') {
        return None;
    }
    let (head, value) = line.rsplit_once(' ')?;
    let value = value.parse().ok()?;
    let Some((name, labels)) = head.split_once('{') else {
        return Some((head, Vec::new(), value));
    };
    let labels = labels
        .trim_end_matches('}')
        .split(',')
        .filter_map(|label| {
            let (key, value) = label.split_once('=')?;
            Some((key, value.trim_matches('"')))
        })
        .collect();
    Some((name, labels, value))
}

/// The density targets of `runs`: readiness from the compile cache, memory (alone and against
/// as many kube-rs processes of `kube_rs_per_process` bytes each), idle CPU and API requests,
/// and update latency against one controller alone.
pub fn ratios(runs: &[Density], kube_rs_per_process: Option<f64>, targets: &mut Vec<Ratio>) {
    let alone = runs.iter().find(|r| r.controllers == 1);
    for run in runs.iter().filter(|r| r.controllers > 1) {
        let n = run.controllers;
        let mut push = |figure: &str, value: f64, unit, bound| {
            targets.push(Ratio::new(
                format!("density {n}: {figure}"),
                value,
                unit,
                Some(Target::AtMost(bound)),
            ));
        };
        push("Ready from the compile cache", run.warm_seconds, "s", 60.0);
        let rss = run.idle.rss_bytes as f64;
        push("host RSS", rss / MIB, "MiB", 1024.0);
        if let Some(per_process) = kube_rs_per_process {
            let processes = per_process * n as f64;
            push(
                "host RSS / as many kube-rs processes",
                rss / processes,
                "x",
                0.1,
            );
        }
        push("idle API requests", run.idle_requests_per_second, "/s", 1.0);
        push("idle CPU of one core", run.idle_cpu_percent, "%", 2.0);
        if let Some(alone) = alone.filter(|a| a.latency.p99_ms > 0.0) {
            let ratio = run.latency.p99_ms / alone.latency.p99_ms;
            push("p99 update latency / one controller alone", ratio, "x", 2.0);
        }
    }
}

/// The density runs as a Markdown table, and each run's idle API requests.
pub fn table(out: &mut String, runs: &[Density]) {
    let mib = |bytes: u64| format!("{:.1}", bytes as f64 / MIB);
    report::table(
        out,
        &[
            ">controllers",
            ">sources",
            ">cold s",
            ">warm s",
            ">RSS MiB",
            ">PSS MiB",
            ">anon MiB",
            ">idle CPU",
            ">idle requests/s",
            ">watches",
            ">updates/s",
            ">p50 ms",
            ">p99 ms",
            ">lost",
        ],
        runs.iter().map(|r| {
            vec![
                r.controllers.to_string(),
                r.sources.to_string(),
                format!("{:.1}", r.cold_seconds),
                format!("{:.1}", r.warm_seconds),
                mib(r.idle.rss_bytes),
                mib(r.idle.pss_bytes),
                mib(r.idle.rss_anon_bytes),
                format!("{:.2}%", r.idle_cpu_percent),
                format!("{:.2}", r.idle_requests_per_second),
                format!("{:.0}", r.watches),
                format!("{:.0}", r.rate_per_second),
                format!("{:.1}", r.latency.p50_ms),
                format!("{:.1}", r.latency.p99_ms),
                r.lost.to_string(),
            ]
        }),
    );
    for run in runs {
        let modules: Vec<String> = run
            .modules
            .iter()
            .map(|(module, count)| format!("{module} {count}"))
            .collect();
        out.push_str(&format!(
            "\nModules of {} controllers: {}.\n",
            run.controllers,
            modules.join(", ")
        ));
        let requests: Vec<String> = run
            .idle_requests
            .iter()
            .map(|(request, rate)| format!("{request} {rate:.2}/s"))
            .collect();
        out.push_str(&format!(
            "\nIdle requests with {} controllers: {}.\n",
            run.controllers,
            if requests.is_empty() {
                "none".to_owned()
            } else {
                requests.join(", ")
            }
        ));
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cli::Args;

    #[test]
    fn one_controller_alone_gets_the_sources_to_take_the_whole_rate() {
        let plan = Plan::from(&Args::parse_from(["kubewasm-bench"]));
        assert_eq!((plan.density_rate, plan.density_sources), (100, 5));
        // One copy guest: 50 sources at two updates a second each.
        assert_eq!(copy_sources(&plan, 1), 50);
        // Six copy guests in ten: 600 of 1 000 take 100/s with the plan's five each.
        assert_eq!(copy_sources(&plan, 1000), 5);
        assert_eq!(copy_sources(&plan, 10), 9);
    }

    #[test]
    fn requests_are_summed_by_verb_and_resource_and_watches_counted() {
        let text = "\
# HELP apiserver_request_total x
apiserver_request_total{code=\"200\",resource=\"configmaps\",subresource=\"\",verb=\"GET\"} 3
apiserver_request_total{code=\"404\",resource=\"configmaps\",subresource=\"\",verb=\"GET\"} 1
apiserver_request_total{code=\"200\",resource=\"wasmcontrollers\",subresource=\"status\",verb=\"APPLY\"} 7
apiserver_longrunning_requests{resource=\"configmaps\",verb=\"WATCH\"} 5
apiserver_longrunning_requests{resource=\"pods\",verb=\"CONNECT\"} 2
";
        let read = ApiServer::parse(text);
        assert_eq!(read.requests["GET configmaps"], 4.0);
        assert_eq!(read.requests["APPLY wasmcontrollers/status"], 7.0);
        assert_eq!(read.watches, 5.0);
        let later = ApiServer::parse(&text.replace("} 3", "} 13"));
        let rates = later.since(&read, Duration::from_secs(5));
        assert_eq!(rates.requests.len(), 1);
        assert_eq!(rates.requests["GET configmaps"], 2.0);
    }
}
