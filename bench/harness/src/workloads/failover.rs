//! Leader failover (kubewasm only). One host runs the podset example in each of its languages
//! (Rust, JavaScript, Python, Go), each as a guest of its own, `podset-<language>`, reconciling
//! a namespace of its own; together they cache N objects, half PodSets of one replica and half
//! their pods. Hosts are candidates for one Lease with client-go's default timings (15 s lease,
//! 10 s renew deadline, 2 s retry period), and all start from the compile cache.
//!
//! Each way of failing over starts a fresh leader and waits until it has handled every object
//! and is idle. Then, at the signal, the leader is stopped and one PodSet of each guest is given
//! one replica more. Measured from the signal: the new leader's `became leader` (the Lease
//! acquired, by its log's timestamp). From the acquisition, for each guest: its first reconcile,
//! by its first write (the changed PodSet's new pod, seen by a watch: a warm standby queued the
//! change ahead of its backlog, a cold host lists the PodSet first, by name, and no other
//! PodSet needs a write) and by the host's
//! `controller_runtime_reconcile_total` leaving 0 (read every 5 ms once the log shows the
//! acquisition, late by as long as the busy host takes to answer). From the signal: each changed
//! PodSet's status showing the new replica for its new generation (a watch: the change
//! reconciled end to end). From the acquisition: the new leader having reconciled every PodSet
//! again with its queues empty. CPU seconds and peak RSS of the old leader at the signal, of a
//! warm standby at the signal, and of the new leader at the end. The ways:
//!
//! - warm, SIGTERM: a standby with the same configuration has loaded its modules, listed its
//!   caches, queued every key and gone idle; the leader finishes its reconciles in flight and
//!   releases the Lease;
//! - warm, SIGKILL: the same, but the standby waits out the Lease;
//! - cold, SIGTERM: no standby; a new host starts once the leader has exited, as a restarted
//!   pod, and loads its modules and lists its caches after the signal;
//! - cold, SIGKILL: no standby; a new host starts right after the kill. It waits out the Lease
//!   too, and loads and lists meanwhile.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::bench::{Bench, report_unclean};
use crate::controllers::{
    Controllers, Election, HostModule, LEASE_DURATION, RunOptions, free_loopback_address,
};
use crate::load;
use crate::procfs::Usage;
use crate::stats::millis;
use kubewasm_tests::prometheus::{self, has};
use kubewasm_tests::{Language, http_get, podset};

/// The Lease the hosts are candidates for.
const LEASE: &str = "kubewasm-bench-failover";
/// The host's log message once it holds the Lease.
const BECAME_LEADER: &str = "became leader";
/// The PodSet of each guest that is changed at the signal.
const CHANGED: &str = "ps-00000";
/// How often the new leader's log, then its metrics, are read after the signal.
const FAST_POLL: Duration = Duration::from_millis(5);
/// CPU seconds a host may spend in a second and count as idle.
const IDLE_CPU_SECONDS: f64 = 0.02;
/// PodSets created at the same time.
const CREATE_CONCURRENCY: usize = 32;

/// Whether a standby ran before the signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Standby {
    /// A standby with the same configuration, loaded, listed and idle.
    Warm,
    /// None: the new host starts after the signal.
    Cold,
}

impl Standby {
    /// The name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Self::Warm => "warm",
            Self::Cold => "cold",
        }
    }
}

/// How the leader is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Stop {
    /// It finishes its reconciles in flight and releases the Lease.
    #[serde(rename = "SIGTERM")]
    Term,
    /// It vanishes; its Lease expires.
    #[serde(rename = "SIGKILL")]
    Kill,
}

impl Stop {
    /// The name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Self::Term => "SIGTERM",
            Self::Kill => "SIGKILL",
        }
    }
}

/// The ways of failing over, in the order they run.
const WAYS: [(Standby, Stop); 4] = [
    (Standby::Warm, Stop::Term),
    (Standby::Warm, Stop::Kill),
    (Standby::Cold, Stop::Term),
    (Standby::Cold, Stop::Kill),
];

/// One guest's figures in one failover.
#[derive(Debug, Clone, Serialize)]
pub struct GuestFailover {
    /// `rust`, `js`, `python` or `go`.
    pub language: &'static str,
    /// From the Lease acquired to the new leader's first write in the guest's namespace: the
    /// pod its reconcile of the changed PodSet creates, seen by a watch; the first reconcile
    /// that writes anything.
    pub first_write_ms: f64,
    /// From the Lease acquired to the host's /metrics first showing a finished reconcile of the
    /// guest; late by as long as the busy host takes to answer.
    pub first_reconcile_on_metrics_ms: f64,
    /// From the signal to its changed PodSet's status showing the new replica.
    pub effect_ms: f64,
}

/// One failover.
#[derive(Debug, Clone, Serialize)]
pub struct Failover {
    pub standby: Standby,
    pub stop: Stop,
    /// Objects the hosts cache: PodSets and their pods.
    pub objects: usize,
    pub podsets: usize,
    pub lease_duration_seconds: u64,
    /// From the signal to the new leader's `became leader`.
    pub acquired_ms: f64,
    /// From the Lease acquired to the first write of the slowest guest.
    pub first_write_ms: f64,
    /// From the Lease acquired to /metrics showing a finished reconcile of the slowest guest.
    pub first_reconcile_on_metrics_ms: f64,
    /// From the signal to the change showing in the slowest guest's PodSet.
    pub effect_ms: f64,
    pub guests: Vec<GuestFailover>,
    /// From the Lease acquired to every PodSet reconciled again by the new leader.
    pub handled_all_ms: f64,
    /// The old leader at the signal.
    pub old_leader: Usage,
    /// The warm standby at the signal.
    pub standby_at_signal: Option<Usage>,
    /// The new leader once it has handled every object.
    pub new_leader: Usage,
    /// After SIGTERM: whether the old leader exited cleanly.
    pub clean_exit: Option<bool>,
}

/// A guest of the hosts: its language's podset component and the namespace it reconciles.
struct Guest {
    language: Language,
    module: PathBuf,
    namespace: String,
    podsets: Api<DynamicObject>,
    /// How many PodSets its namespace holds.
    count: usize,
}

impl Guest {
    fn name(&self) -> String {
        format!("podset-{}", self.language.dir())
    }
}

/// Fails over every way with `objects` objects cached.
pub async fn run(bench: &Bench, objects: usize) -> Result<Vec<Failover>> {
    let modules = &bench.launcher.binaries().podset;
    anyhow::ensure!(!modules.is_empty(), "no podset guests were given");
    let count = objects / (2 * modules.len());
    anyhow::ensure!(count > 0, "{objects} objects are too few for the guests");
    let client = &bench.client;
    let crd = kubewasm_tests::repo_root().join("examples/podset/crd.yaml");
    kubewasm_tests::apply_yaml(client, &crd, None).await?;
    let election = Election {
        namespace: format!("failover-{objects}"),
        name: LEASE.to_owned(),
        sharded: false,
    };
    load::create_namespace(client, &election.namespace).await?;
    let mut guests = Vec::new();
    for (language, module) in modules {
        let namespace = format!("failover-{objects}-{}", language.dir());
        load::create_namespace(client, &namespace).await?;
        guests.push(Guest {
            language: *language,
            module: module.clone(),
            podsets: podset::podsets(client, &namespace),
            namespace,
            count,
        });
    }
    let started = Instant::now();
    for guest in &guests {
        create_podsets(&guest.podsets, &guest.namespace, guest.count).await?;
    }
    eprintln!(
        "failover: created {} PodSets in {:.1} s",
        count * guests.len(),
        started.elapsed().as_secs_f64()
    );
    // A first host, not elected, compiles the modules into the compile cache and creates the
    // pods, so that every measured leader starts from the cache on converged objects.
    let started = Instant::now();
    let mut setup = Host::start(bench, &format!("failover-{objects}-setup"), &guests, None)?;
    setup.converged(&guests).await?;
    report_unclean(&setup.process.stop().await?);
    eprintln!(
        "failover: modules compiled and pods created in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let mut results = Vec::new();
    for (standby, stop) in WAYS {
        let result = measure(bench, &guests, &election, standby, stop).await?;
        println!(
            "failover {objects} {} {}: Lease acquired after {:.1} ms, first write {:.1} ms later \
             (/metrics {:.1} ms), change reconciled {:.1} ms after the signal, every PodSet \
             again {:.0} ms after acquiring",
            standby.name(),
            stop.name(),
            result.acquired_ms,
            result.first_write_ms,
            result.first_reconcile_on_metrics_ms,
            result.effect_ms,
            result.handled_all_ms
        );
        results.push(result);
    }
    let namespaces: Vec<String> = guests
        .iter()
        .map(|g| g.namespace.clone())
        .chain([election.namespace])
        .collect();
    load::delete_namespaces(client, &namespaces).await?;
    Ok(results)
}

/// One failover: a fresh leader, a warm standby or none, the signal and the takeover.
async fn measure(
    bench: &Bench,
    guests: &[Guest],
    election: &Election,
    standby: Standby,
    stop: Stop,
) -> Result<Failover> {
    let count: usize = guests.iter().map(|g| g.count).sum();
    let objects = 2 * count;
    let label = format!(
        "failover-{objects}-{}-{}",
        standby.name(),
        stop.name().to_lowercase()
    );
    let mut leader = Host::start(bench, &format!("{label}-a"), guests, Some(election))?;
    leader.leading().await?;
    leader.converged(guests).await?;
    leader.settled().await?;
    let mut candidate = None;
    if standby == Standby::Warm {
        let cached = cached_objects(&bench.client, guests).await?;
        let mut host = Host::start(bench, &format!("{label}-b"), guests, Some(election))?;
        host.warm(guests, cached).await?;
        host.settled().await?;
        anyhow::ensure!(
            host.acquired().is_none(),
            "the standby led while the leader ran"
        );
        candidate = Some(host);
    }
    let mut changes = Vec::new();
    for guest in guests {
        changes.push(Change::watch(&bench.client, guest).await?);
    }
    let old_leader = leader.process.usage()?;
    let standby_at_signal = candidate
        .as_ref()
        .map(|host| host.process.usage())
        .transpose()?;

    let (signalled, signalled_at) = (Instant::now(), Timestamp::now());
    match stop {
        Stop::Term => leader.process.terminate()?,
        Stop::Kill => leader.process.kill()?,
    }
    futures::future::try_join_all(changes.iter().map(Change::send)).await?;
    let old_exit = async {
        match stop {
            Stop::Term => Ok(Some(report_unclean(&leader.process.stopped().await?))),
            Stop::Kill => leader.process.reap().await.map(|()| None),
        }
    };
    let (clean_exit, mut new, takeover) = match candidate {
        Some(mut host) => {
            let (clean_exit, takeover) =
                tokio::join!(old_exit, host.take_over(guests, signalled, signalled_at));
            (clean_exit?, host, takeover)
        }
        None => {
            let clean_exit = old_exit.await?;
            let mut host = Host::start(bench, &format!("{label}-b"), guests, Some(election))?;
            let takeover = host.take_over(guests, signalled, signalled_at).await;
            (clean_exit, host, takeover)
        }
    };
    let (acquired, scraped) = takeover?;
    let mut seen = Vec::new();
    for change in changes {
        let (written, reconciled) = change.seen().await?;
        seen.push((written - signalled, reconciled - signalled));
    }
    new.handled(guests, Duration::from_millis(100)).await?;
    let handled_all = signalled.elapsed();
    let new_leader = new.process.usage()?;
    new.converged(guests).await?;
    report_unclean(&new.process.stop().await?);

    let acquired_ms = millis(acquired);
    let guest_figures: Vec<GuestFailover> = guests
        .iter()
        .zip(scraped.iter().zip(&seen))
        .map(|(guest, (scraped, (written, reconciled)))| GuestFailover {
            language: guest.language.dir(),
            first_write_ms: millis(*written) - acquired_ms,
            first_reconcile_on_metrics_ms: millis(*scraped) - acquired_ms,
            effect_ms: millis(*reconciled),
        })
        .collect();
    let slowest = |figure: fn(&GuestFailover) -> f64| {
        guest_figures
            .iter()
            .map(figure)
            .fold(f64::NEG_INFINITY, f64::max)
    };
    Ok(Failover {
        standby,
        stop,
        objects,
        podsets: count,
        lease_duration_seconds: LEASE_DURATION.as_secs(),
        acquired_ms,
        first_write_ms: slowest(|g| g.first_write_ms),
        first_reconcile_on_metrics_ms: slowest(|g| g.first_reconcile_on_metrics_ms),
        effect_ms: slowest(|g| g.effect_ms),
        guests: guest_figures,
        handled_all_ms: millis(handled_all) - acquired_ms,
        old_leader,
        standby_at_signal,
        new_leader,
        clean_exit,
    })
}

/// Creates `count` PodSets `ps-00000`, ... of one replica each through `api` (of `namespace`),
/// once it serves them.
pub(crate) async fn create_podsets(
    api: &Api<DynamicObject>,
    namespace: &str,
    count: usize,
) -> Result<()> {
    until(
        "the PodSet CRD to be served",
        Duration::from_secs(60),
        Duration::from_millis(200),
        async || Ok(api.list(&ListParams::default().limit(1)).await.ok()),
    )
    .await?;
    let params = &PostParams::default();
    futures::stream::iter(0..count)
        .map(|index| async move {
            let podset = podset::podset(&format!("ps-{index:05}"), 1)?;
            load::retry(|| api.create(params, &podset))
                .await
                .with_context(|| format!("creating PodSet {index} in {namespace}"))?;
            anyhow::Ok(())
        })
        .buffer_unordered(CREATE_CONCURRENCY)
        .try_collect::<()>()
        .await
}

/// The PodSets and pods of the guests' namespaces.
async fn cached_objects(client: &Client, guests: &[Guest]) -> Result<usize> {
    let mut objects = 0;
    for guest in guests {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &guest.namespace);
        objects += guest
            .podsets
            .list(&ListParams::default())
            .await?
            .items
            .len();
        objects += pods.list(&ListParams::default()).await?.items.len();
    }
    Ok(objects)
}

/// Whether a PodSet's status shows its spec reconciled: its replicas, for its generation.
pub(crate) fn reconciled(podset: &DynamicObject) -> bool {
    let status = &podset.data["status"];
    podset.metadata.generation.is_some()
        && status["observedGeneration"].as_i64() == podset.metadata.generation
        && status["replicas"] == podset.data["spec"]["replicas"]
}

/// A guest's PodSet [`CHANGED`] given one replica more at the signal, watched from before.
struct Change {
    podsets: Api<DynamicObject>,
    replicas: i64,
    /// When a pod of the PodSet that was not there before showed: the new leader's first
    /// write.
    written: JoinHandle<Result<Instant>>,
    /// When the PodSet's status showed the new replica: the change reconciled.
    reconciled: JoinHandle<Result<Instant>>,
}

impl Change {
    /// Watches the guest's PodSet and its pods; returns once both watches have listed.
    async fn watch(client: &Client, guest: &Guest) -> Result<Self> {
        let podsets = guest.podsets.clone();
        let current = podsets.get(CHANGED).await?;
        let replicas = current.data["spec"]["replicas"]
            .as_i64()
            .context("a PodSet has replicas")?
            + 1;
        let reconciled = watch_for(
            podsets.clone(),
            watcher::Config::default().fields(&format!("metadata.name={CHANGED}")),
            move |podset: &DynamicObject, _| {
                podset.data["spec"]["replicas"] == replicas && reconciled(podset)
            },
        )
        .await?;
        // The podset example labels its pods `app=<PodSet>`.
        let mut listed = HashSet::new();
        let written = watch_for(
            Api::<Pod>::namespaced(client.clone(), &guest.namespace),
            watcher::Config::default().labels(&format!("app={CHANGED}")),
            move |pod: &Pod, after_list| {
                if after_list {
                    return !listed.contains(&pod.uid());
                }
                listed.insert(pod.uid());
                false
            },
        )
        .await?;
        Ok(Self {
            podsets,
            replicas,
            written,
            reconciled,
        })
    }

    /// Asks for the new replica.
    async fn send(&self) -> Result<()> {
        let patch = json!({ "spec": { "replicas": self.replicas } });
        self.podsets
            .patch(CHANGED, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    /// When the new leader's first write and the change reconciled showed.
    async fn seen(self) -> Result<(Instant, Instant)> {
        let timeout = LEASE_DURATION + Duration::from_secs(300);
        let written = tokio::time::timeout(timeout, self.written)
            .await
            .with_context(|| format!("no pod of {CHANGED} was created"))???;
        let reconciled = tokio::time::timeout(timeout, self.reconciled)
            .await
            .with_context(|| format!("the change of {CHANGED} never showed"))???;
        Ok((written, reconciled))
    }
}

/// Watches `api` in a task until an object satisfies `found`, which is told whether the watch
/// has listed; resolves once it has listed, to the task, which returns when it found one.
async fn watch_for<K>(
    api: Api<K>,
    config: watcher::Config,
    mut found: impl FnMut(&K, bool) -> bool + Send + 'static,
) -> Result<JoinHandle<Result<Instant>>>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let (listed, mut watching) = tokio::sync::watch::channel(false);
    let events = watcher::watcher(api, config).default_backoff();
    let task = tokio::spawn(async move {
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            let at = Instant::now();
            // The watch lists again after an error.
            let Ok(event) = event else {
                continue;
            };
            match event {
                Event::InitDone => {
                    listed.send_replace(true);
                }
                Event::Apply(object) | Event::InitApply(object)
                    if found(&object, *listed.borrow()) =>
                {
                    return Ok(at);
                }
                _ => {}
            }
        }
        bail!("a watch ended")
    });
    watching.wait_for(|listed| *listed).await?;
    Ok(task)
}

/// A kubewasm host running every guest, serving its metrics and probes at `address`.
struct Host {
    process: Controllers,
    address: SocketAddr,
}

/// A guest's counters as its host serves them.
struct Counters {
    /// Reconciles finished, whatever their result.
    reconciles: f64,
    /// Keys ready in its queue.
    queued: f64,
}

impl Host {
    /// Starts a host in the folder `label`, a candidate for `election` if given.
    fn start(
        bench: &Bench,
        label: &str,
        guests: &[Guest],
        election: Option<&Election>,
    ) -> Result<Self> {
        let address = free_loopback_address()?;
        let modules: Vec<HostModule> = guests
            .iter()
            .map(|guest| HostModule {
                path: guest.module.clone(),
                name: guest.name(),
                namespace: guest.namespace.clone(),
            })
            .collect();
        let options = RunOptions {
            metrics: Some(address),
            election: election.cloned(),
            ..RunOptions::default()
        };
        let folder = bench.launcher.folder(label)?;
        let process = bench.launcher.host(&folder, &modules, &options)?;
        Ok(Self { process, address })
    }

    /// When its log says it acquired the Lease.
    fn acquired(&self) -> Option<Timestamp> {
        self.process
            .log()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|line| line["fields"]["message"] == BECAME_LEADER)
            .and_then(|line| line["timestamp"].as_str()?.parse().ok())
    }

    /// Waits until it leads.
    async fn leading(&mut self) -> Result<()> {
        until(
            "the leader to lead",
            Duration::from_secs(60),
            Duration::from_millis(50),
            async || {
                self.process.check_running()?;
                Ok(self.acquired())
            },
        )
        .await?;
        Ok(())
    }

    /// Each guest's counters, in the order of `guests`; none while it does not answer.
    async fn counters(&self, guests: &[Guest]) -> Option<Vec<Counters>> {
        let metrics = prometheus::scrape(self.address).await.ok()?;
        Some(
            guests
                .iter()
                .map(|guest| {
                    let name = guest.name();
                    Counters {
                        reconciles: prometheus::sum(
                            &metrics,
                            "controller_runtime_reconcile_total",
                            |labels| has(labels, "controller", &name),
                        ),
                        queued: prometheus::sum(&metrics, "workqueue_depth", |labels| {
                            has(labels, "name", &name)
                        }),
                    }
                })
                .collect(),
        )
    }

    /// Waits, reading its metrics `every` so often, until each guest has finished at least as
    /// many reconciles as it has PodSets and has nothing queued.
    async fn handled(&mut self, guests: &[Guest], every: Duration) -> Result<()> {
        until(
            "every PodSet to be handled",
            handling(guests),
            every,
            async || {
                self.process.check_running()?;
                let Some(counters) = self.counters(guests).await else {
                    return Ok(None);
                };
                let handled = guests
                    .iter()
                    .zip(&counters)
                    .all(|(guest, c)| c.reconciles >= guest.count as f64 && c.queued == 0.0);
                Ok(handled.then_some(()))
            },
        )
        .await
    }

    /// Waits until it has handled every PodSet and every PodSet's status shows its spec.
    async fn converged(&mut self, guests: &[Guest]) -> Result<()> {
        self.handled(guests, Duration::from_secs(1)).await?;
        until(
            "every PodSet to show its spec",
            handling(guests),
            Duration::from_secs(1),
            async || {
                self.process.check_running()?;
                for guest in guests {
                    let listed = guest.podsets.list(&ListParams::default()).await?;
                    if !listed.items.iter().all(reconciled) {
                        return Ok(None);
                    }
                }
                Ok(Some(()))
            },
        )
        .await
    }

    /// Waits until a standby is ready, its caches hold `objects` objects and every PodSet is
    /// queued.
    async fn warm(&mut self, guests: &[Guest], objects: usize) -> Result<()> {
        let timeout = Duration::from_secs(120) + Duration::from_millis(20) * objects as u32;
        until(
            "the standby to be warm",
            timeout,
            Duration::from_millis(200),
            async || {
                self.process.check_running()?;
                let ready = http_get(&self.address.to_string(), "/readyz").await;
                if !matches!(ready, Ok((200, _))) {
                    return Ok(None);
                }
                let Ok(metrics) = prometheus::scrape(self.address).await else {
                    return Ok(None);
                };
                // The guests' pods may share one informer of every namespace's pods.
                let cached = prometheus::sum(&metrics, "kubewasm_cache_objects", |labels| {
                    let ours = guests
                        .iter()
                        .any(|g| has(labels, "namespace", &g.namespace));
                    (has(labels, "kind", "PodSet") && ours)
                        || (has(labels, "kind", "Pod") && (ours || has(labels, "namespace", "")))
                });
                let queued = guests.iter().all(|guest| {
                    let name = guest.name();
                    let depth = prometheus::sum(&metrics, "workqueue_depth", |labels| {
                        has(labels, "name", &name)
                    });
                    depth == guest.count as f64
                });
                Ok((cached >= objects as f64 && queued).then_some(()))
            },
        )
        .await
    }

    /// Waits until it spends less than [`IDLE_CPU_SECONDS`] of CPU in a second.
    async fn settled(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut before = self.process.usage()?.cpu_seconds;
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            self.process.check_running()?;
            let now = self.process.usage()?.cpu_seconds;
            if now - before < IDLE_CPU_SECONDS {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!("the host was still busy after 120 s");
            }
            before = now;
        }
    }

    /// Waits until it leads, then until each guest has finished a reconcile. Returns the time
    /// from `signalled` (at `signalled_at` by the wall clock) to the acquisition by its log, and
    /// to each guest's first reconcile as seen, in the order of `guests`.
    async fn take_over(
        &mut self,
        guests: &[Guest],
        signalled: Instant,
        signalled_at: Timestamp,
    ) -> Result<(Duration, Vec<Duration>)> {
        // A cold host loads and lists after the signal; a bound, not an expectation.
        let timeout = LEASE_DURATION + Duration::from_secs(300);
        let acquired = until("the Lease to be taken", timeout, FAST_POLL, async || {
            self.process.check_running()?;
            Ok(self.acquired())
        })
        .await?;
        let acquired = acquired.duration_since(signalled_at);
        let acquired = Duration::try_from(acquired)
            .with_context(|| format!("the Lease was taken {acquired:?} after the signal"))?;
        let mut first: Vec<Option<Duration>> = vec![None; guests.len()];
        until("every guest to reconcile", timeout, FAST_POLL, async || {
            self.process.check_running()?;
            if let Some(counters) = self.counters(guests).await {
                let at = signalled.elapsed();
                for (seen, counter) in first.iter_mut().zip(counters) {
                    if seen.is_none() && counter.reconciles > 0.0 {
                        *seen = Some(at);
                    }
                }
            }
            Ok(first.iter().copied().collect::<Option<Vec<_>>>())
        })
        .await
        .map(|first| (acquired, first))
    }
}

/// How long a host may take to handle every PodSet of `guests`: a bound for a loaded machine
/// and the slowest guest, not an expectation.
fn handling(guests: &[Guest]) -> Duration {
    let podsets: usize = guests.iter().map(|g| g.count).sum();
    Duration::from_secs(120) + Duration::from_millis(200) * podsets as u32
}

/// Runs `check` every `every` until it returns `Some` or fails; fails after `timeout` naming
/// `what`.
pub(crate) async fn until<T>(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut check: impl AsyncFnMut() -> Result<Option<T>>,
) -> Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_podset_is_reconciled_when_its_status_shows_its_generation_and_replicas() {
        let podset = |generation: i64, status: Value| -> DynamicObject {
            serde_json::from_value(json!({
                "apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet",
                "metadata": { "name": "ps-00000", "generation": generation },
                "spec": { "replicas": 2 },
                "status": status,
            }))
            .unwrap()
        };
        assert!(reconciled(&podset(
            3,
            json!({ "replicas": 2, "observedGeneration": 3 })
        )));
        assert!(!reconciled(&podset(
            3,
            json!({ "replicas": 1, "observedGeneration": 3 })
        )));
        assert!(!reconciled(&podset(
            4,
            json!({ "replicas": 2, "observedGeneration": 3 })
        )));
        assert!(!reconciled(&podset(3, Value::Null)));
    }
}
