//! The host's metrics in the Prometheus text exposition format (version 0.0.4), named and
//! labelled like controller-runtime's, with `controller` and the workqueue's `name` being the
//! guest's name, plus kubewasm's own `kubewasm_*` metrics.
//!
//! Guarantees: every family is written once, with its `HELP` and `TYPE` lines, and all its
//! samples together; label values are escaped (`\`, `"` and line feeds), so any guest name or
//! label selector yields a valid exposition. Histograms have controller-runtime's bucket bounds,
//! written as its Go client writes them (`le="0.005"`, `le="1e-08"`), cumulative up to
//! `le="+Inf"`, which equals `_count`.

use std::collections::BTreeMap;
use std::fmt::{Display, Write};
use std::sync::atomic::Ordering;

use crate::cluster::selection::Selection;
use crate::cluster::transform::Transform;
use crate::control::controller::Finalizing;
use crate::control::queue::QueueStats;
use crate::control::tally::Tally;
use crate::histogram::HistogramSnapshot;
use crate::manage::host::Observer;
use crate::manage::stale_finalizers::StaleCount;

/// The content type of [`Snapshot::render`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// One guest's numbers at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct GuestSnapshot {
    /// The guest's name.
    pub name: String,
    /// Where its module comes from: a path or an OCI reference.
    pub module: String,
    /// Its reconcile counters and module.
    pub tally: Tally,
    /// Its workqueue.
    pub queue: QueueStats,
    /// Workers it runs.
    pub max_concurrency: u32,
    /// Workers reconciling a key now.
    pub active_workers: usize,
    /// Applies not sent because the cluster already matched.
    pub writes_elided: u64,
    /// Events dropped over their object's rate.
    pub events_dropped: u64,
    /// Objects being deleted that wait for its `finalize`.
    pub finalizing: Finalizing,
    /// Time of each reconcile, from dequeue until the key is done.
    pub reconcile_time: HistogramSnapshot,
    /// Time keys waited in the workqueue before being handed out.
    pub queue_duration: HistogramSnapshot,
    /// Time from a key's hand-out until the worker marked it done.
    pub work_duration: HistogramSnapshot,
    /// Time to set up a fresh instance for a call.
    pub instantiate: HistogramSnapshot,
    /// Time of the guest's export calls.
    pub call: HistogramSnapshot,
    /// Its share of the keys, when sharded.
    pub shard: Option<ShardSnapshot>,
}

/// A sharded guest's share on this replica, and what its sharder did here (only the leader
/// shards).
#[derive(Debug, Clone, PartialEq)]
pub struct ShardSnapshot {
    /// This replica's member name.
    pub member: String,
    /// Primary objects labelled for this member and cached here.
    pub objects: usize,
    /// Keys this replica handed over to other members.
    pub handovers: u64,
    /// Live members, as the sharder last saw them.
    pub members: u64,
    /// Objects the sharder labelled for a member: new, or of a member gone.
    pub assigned: u64,
    /// Drains the sharder asked for: keys moving between live members.
    pub moves: u64,
    /// Time from asking for a drain to labelling for the new member.
    pub handover: HistogramSnapshot,
    /// Label writes of the sharder that failed.
    pub failed: u64,
    /// Objects whose last label write failed, waiting out their backoff.
    pub backing_off: u64,
    /// Drains asked for longer than a minute ago that their holder has not served.
    pub drains_stuck: u64,
    /// Label writes of the sharder that met a newer version of their object.
    pub conflicts: u64,
    /// Keys that waited for this replica's watches to show their children.
    pub children_waits: u64,
}

/// Objects in one informer's cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheSnapshot {
    /// What the informer watches.
    pub selection: Selection,
    /// What it drops from the objects it caches.
    pub transform: Transform,
    /// Objects it holds.
    pub objects: usize,
    /// Entries of its indexes: by controller, and by each indexed label key.
    pub index_entries: usize,
    /// Lists it completed: the first and every relist.
    pub lists: u64,
}

/// Module loads, reloads, rejections and unloads so far.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoadSnapshot {
    /// Modules loaded, at start-up or on reload.
    pub loaded: u64,
    /// Modules replaced while running.
    pub reloaded: u64,
    /// Changed modules rejected.
    pub rejected: u64,
    /// Guests unloaded because their file was removed.
    pub unloaded: u64,
    /// Modules of controller objects refused, and rollbacks, by reason.
    pub refused: Vec<(&'static str, u64)>,
    /// SelfSubjectAccessReviews sent about the host's own access.
    pub access_reviews: u64,
}

/// Objects carrying the finalizer of a guest no longer running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleFinalizerSnapshot {
    /// The guest that declared the finalizer.
    pub guest: String,
    /// The finalizer.
    pub finalizer: String,
    /// How many objects carry it, and how many of them are being deleted.
    pub count: StaleCount,
}

/// Everything the metrics and status endpoints show, read at one moment.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// The running guests, in module-path order.
    pub guests: Vec<GuestSnapshot>,
    /// The running informers.
    pub caches: Vec<CacheSnapshot>,
    /// Module load counters.
    pub loads: LoadSnapshot,
    /// Finalizers of guests no longer running, still on objects.
    pub stale_finalizers: Vec<StaleFinalizerSnapshot>,
    /// Under leader election: the Lease's name and whether this process holds it.
    pub leader: Option<(String, bool)>,
}

impl Snapshot {
    /// Reads the host's current state; never waits for a reload.
    pub fn collect(observer: &Observer) -> Self {
        let guests = observer
            .controllers()
            .iter()
            .map(|c| GuestSnapshot {
                name: c.name().to_owned(),
                module: c.module().origin.clone(),
                tally: c.tally(),
                queue: c.queue().stats(),
                max_concurrency: c.max_concurrency(),
                active_workers: c.queue().in_flight(),
                writes_elided: c.writes_elided(),
                events_dropped: c.events_dropped(),
                finalizing: c.finalizing(),
                reconcile_time: c.counters().reconcile_time.snapshot(),
                queue_duration: c.queue().queue_duration().snapshot(),
                work_duration: c.queue().work_duration().snapshot(),
                instantiate: c.call_times().instantiate.snapshot(),
                call: c.call_times().call.snapshot(),
                shard: c.member().map(|member| {
                    let stats = c.shard_stats();
                    let load =
                        |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed);
                    ShardSnapshot {
                        member: member.to_owned(),
                        objects: c.held(),
                        handovers: c.handovers().unwrap_or_default(),
                        members: load(&stats.members),
                        assigned: load(&stats.assigned),
                        moves: load(&stats.moves),
                        handover: stats.handover.snapshot(),
                        failed: load(&stats.failed),
                        backing_off: load(&stats.backing_off),
                        drains_stuck: load(&stats.drains_stuck),
                        conflicts: load(&stats.conflicts),
                        children_waits: load(&stats.children_waits),
                    }
                }),
            })
            .collect();
        let mut caches: Vec<_> = observer
            .informers()
            .iter()
            .map(|i| CacheSnapshot {
                selection: i.selection().clone(),
                transform: i.transform().clone(),
                objects: i.store().len(),
                index_entries: i.store().index_entries(),
                lists: i.store().lists(),
            })
            .collect();
        caches.sort_by_cached_key(cache_labels);
        let counters = observer.load_counters();
        let load = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed);
        Self {
            guests,
            caches,
            loads: LoadSnapshot {
                loaded: load(&counters.loaded),
                reloaded: load(&counters.reloaded),
                rejected: load(&counters.rejected),
                unloaded: load(&counters.unloaded),
                refused: counters
                    .refused
                    .lock()
                    .expect("refusals lock")
                    .iter()
                    .map(|(reason, n)| (*reason, *n))
                    .collect(),
                access_reviews: observer.access_reviews(),
            },
            stale_finalizers: stale_finalizers(observer),
            leader: None,
        }
    }

    /// The exposition, in [`CONTENT_TYPE`]: the per-guest families, the shards', the module
    /// loads', the stale finalizers', the caches' and the leader's, in that order.
    pub fn render(&self) -> String {
        let mut out = Exposition::default();
        self.render_reconciles(&mut out);
        self.render_workqueues(&mut out);
        self.render_guest_faults(&mut out);
        self.render_guest_writes(&mut out);
        self.render_guest_finalizing(&mut out);
        self.render_guest_health(&mut out);
        self.render_guest_calls(&mut out);
        self.render_shards(&mut out);
        self.render_loads(&mut out);
        self.render_stale_finalizers(&mut out);
        self.render_caches(&mut out);
        self.render_leader(&mut out);
        out.0
    }
}

impl Snapshot {
    /// controller-runtime's `controller_runtime_*` families, labelled `controller`.
    fn render_reconciles(&self, out: &mut Exposition) {
        let guests = &self.guests;
        out.family(
            "controller_runtime_reconcile_total",
            Kind::Counter,
            "Total number of reconciliations per controller",
        );
        for guest in guests {
            let h = &guest.tally;
            for (result, value) in [
                ("success", h.succeeded),
                ("error", h.failed),
                ("requeue", 0),
                ("requeue_after", h.requeued),
            ] {
                out.sample(
                    "controller_runtime_reconcile_total",
                    &[("controller", &guest.name), ("result", result)],
                    value,
                );
            }
        }
        out.per_guest(
            guests,
            "controller_runtime_reconcile_errors_total",
            Kind::Counter,
            "Total number of reconciliation errors per controller",
            "controller",
            |g| g.tally.failed,
        );
        out.per_guest_histogram(
            guests,
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            "controller",
            |g| &g.reconcile_time,
        );
        out.per_guest(
            guests,
            "controller_runtime_max_concurrent_reconciles",
            Kind::Gauge,
            "Maximum number of concurrent reconciles per controller",
            "controller",
            |g| g.max_concurrency,
        );
        out.per_guest(
            guests,
            "controller_runtime_active_workers",
            Kind::Gauge,
            "Number of currently used workers per controller",
            "controller",
            |g| g.active_workers,
        );
    }

    /// client-go's `workqueue_*` families, labelled `name`.
    fn render_workqueues(&self, out: &mut Exposition) {
        let guests = &self.guests;
        out.per_guest(
            guests,
            "workqueue_depth",
            Kind::Gauge,
            "Current depth of workqueue",
            "name",
            |g| g.queue.depth,
        );
        out.per_guest(
            guests,
            "workqueue_adds_total",
            Kind::Counter,
            "Total number of adds handled by workqueue",
            "name",
            |g| g.queue.adds_total,
        );
        out.per_guest(
            guests,
            "workqueue_retries_total",
            Kind::Counter,
            "Total number of retries handled by workqueue",
            "name",
            |g| g.queue.retries_total,
        );
        out.per_guest_histogram(
            guests,
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            "name",
            |g| &g.queue_duration,
        );
        out.per_guest_histogram(
            guests,
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            "name",
            |g| &g.work_duration,
        );
        out.per_guest(
            guests,
            "workqueue_unfinished_work_seconds",
            Kind::Gauge,
            "How many seconds of work has been done that is in progress",
            "name",
            |g| g.queue.unfinished_work_seconds,
        );
        out.per_guest(
            guests,
            "workqueue_longest_running_processor_seconds",
            Kind::Gauge,
            "How many seconds has the longest running processor for workqueue been running",
            "name",
            |g| g.queue.longest_running_processor_seconds,
        );
    }

    /// Reconciles that trapped, timed out or ran out of memory, and host calls refused.
    fn render_guest_faults(&self, out: &mut Exposition) {
        let guests = &self.guests;
        out.per_guest(
            guests,
            "kubewasm_guest_traps_total",
            Kind::Counter,
            "Reconciles that trapped",
            "controller",
            |g| g.tally.traps,
        );
        out.per_guest(
            guests,
            "kubewasm_guest_timeouts_total",
            Kind::Counter,
            "Reconciles that ran past their deadline",
            "controller",
            |g| g.tally.timeouts,
        );
        out.per_guest(
            guests,
            "kubewasm_guest_out_of_memory_total",
            Kind::Counter,
            "Reconciles that ran out of memory",
            "controller",
            |g| g.tally.out_of_memory,
        );
        out.per_guest(
            guests,
            "kubewasm_host_calls_denied_total",
            Kind::Counter,
            "Host calls refused: kind not declared or verb not granted",
            "controller",
            |g| g.tally.denied,
        );
    }

    /// Applies the host did not send and events it dropped.
    fn render_guest_writes(&self, out: &mut Exposition) {
        let guests = &self.guests;
        out.per_guest(
            guests,
            "kubewasm_writes_elided_total",
            Kind::Counter,
            "Applies not sent because the cluster already matched",
            "controller",
            |g| g.writes_elided,
        );
        out.per_guest(
            guests,
            "kubewasm_events_dropped_total",
            Kind::Counter,
            "Events dropped because their object started too many new ones",
            "controller",
            |g| g.events_dropped,
        );
    }

    /// Objects being deleted that wait for a guest's `finalize`.
    fn render_guest_finalizing(&self, out: &mut Exposition) {
        let guests = &self.guests;
        out.per_guest(
            guests,
            "kubewasm_guest_finalizing_objects",
            Kind::Gauge,
            "Objects being deleted that still wait for the guest's finalize",
            "controller",
            |g| g.finalizing.objects,
        );
        out.per_guest(
            guests,
            "kubewasm_guest_finalizing_oldest_seconds",
            Kind::Gauge,
            "Seconds since the oldest object still waiting for the guest's finalize was deleted",
            "controller",
            |g| g.finalizing.oldest_seconds,
        );
    }

    /// Guest log lines kept out of the host's log, and whether a guest's reconciles keep failing.
    fn render_guest_health(&self, out: &mut Exposition) {
        let guests = &self.guests;
        out.per_guest(
            guests,
            "kubewasm_guest_log_lines_dropped_total",
            Kind::Counter,
            "Guest log lines the rate limit kept out of the host's log",
            "controller",
            |g| g.tally.output_dropped,
        );
        out.per_guest(
            guests,
            "kubewasm_guest_consecutive_failures",
            Kind::Gauge,
            "Failed reconciles since the guest's last successful one",
            "controller",
            |g| g.tally.consecutive_failures,
        );
        out.per_guest(
            guests,
            "kubewasm_guest_failing",
            Kind::Gauge,
            "1 while the guest's reconciles fail on every key it holds (or five keys), else 0",
            "controller",
            |g| u64::from(g.tally.failing),
        );
    }

    /// Times to instantiate a guest and of its export calls.
    fn render_guest_calls(&self, out: &mut Exposition) {
        let guests = &self.guests;
        out.per_guest_histogram(
            guests,
            "kubewasm_guest_instantiate_seconds",
            "Time to create a store and instantiate the guest's component for one call",
            "controller",
            |g| &g.instantiate,
        );
        out.per_guest_histogram(
            guests,
            "kubewasm_guest_call_seconds",
            "Time of one call of a guest export (reconcile, finalize or map-keys)",
            "controller",
            |g| &g.call,
        );
    }

    /// The sharded guests' families; none without sharding.
    fn render_shards(&self, out: &mut Exposition) {
        let sharded: Vec<(&str, &ShardSnapshot)> = self
            .guests
            .iter()
            .filter_map(|g| Some((g.name.as_str(), g.shard.as_ref()?)))
            .collect();
        if sharded.is_empty() {
            return;
        }
        let name = "kubewasm_shard_objects";
        out.family(
            name,
            Kind::Gauge,
            "Primary objects labelled for this replica's member and cached here",
        );
        for (guest, shard) in &sharded {
            let labels = [("controller", *guest), ("member", shard.member.as_str())];
            out.sample(name, &labels, shard.objects);
        }
        render_shard_counts(out, &sharded);
        let name = "kubewasm_shard_handover_seconds";
        out.family(
            name,
            Kind::Histogram,
            "Time from this replica's sharder asking for a drain to labelling the key for its new member",
        );
        for (guest, shard) in &sharded {
            out.histogram(name, &[("controller", guest)], &shard.handover);
        }
    }

    /// The module load counters, then the refusals by reason.
    fn render_loads(&self, out: &mut Exposition) {
        let loads = &self.loads;
        for (name, help, value) in [
            (
                "kubewasm_module_loads_total",
                "Modules loaded, at start-up or on reload",
                loads.loaded,
            ),
            (
                "kubewasm_module_reloads_total",
                "Modules replaced while running",
                loads.reloaded,
            ),
            (
                "kubewasm_module_rejections_total",
                "Changed modules rejected; the previous version kept running",
                loads.rejected,
            ),
            (
                "kubewasm_module_unloads_total",
                "Guests unloaded because their module file was removed",
                loads.unloaded,
            ),
            (
                "kubewasm_access_reviews_total",
                "SelfSubjectAccessReviews sent about the host's own access, its answers shared by every guest",
                loads.access_reviews,
            ),
        ] {
            out.family(name, Kind::Counter, help);
            out.sample(name, &[], value);
        }
        let name = "kubewasm_controller_object_refusals_total";
        out.family(
            name,
            Kind::Counter,
            "Modules of WasmControllers refused, and rollbacks (RolledBack), by reason",
        );
        for (reason, value) in &loads.refused {
            out.sample(name, &[("reason", reason)], *value);
        }
    }

    /// Objects carrying the finalizer of a guest no longer running, and those of them being
    /// deleted.
    fn render_stale_finalizers(&self, out: &mut Exposition) {
        type Stale = (&'static str, &'static str, fn(&StaleCount) -> usize);
        let stale: [Stale; 2] = [
            (
                "kubewasm_unloaded_finalizer_objects",
                "Objects carrying the finalizer of a guest no longer running",
                |count| count.objects,
            ),
            (
                "kubewasm_unloaded_finalizer_terminating_objects",
                "Objects being deleted that stay Terminating: they wait for the finalizer of a guest no longer running",
                |count| count.terminating,
            ),
        ];
        for (name, help, value) in stale {
            out.family(name, Kind::Gauge, help);
            for stale in &self.stale_finalizers {
                let labels = [
                    ("controller", stale.guest.as_str()),
                    ("finalizer", stale.finalizer.as_str()),
                ];
                out.sample(name, &labels, value(&stale.count));
            }
        }
    }

    /// The informers' objects and completed lists, labelled with what each watches.
    fn render_caches(&self, out: &mut Exposition) {
        type Family = (&'static str, Kind, &'static str, fn(&CacheSnapshot) -> u64);
        let caches: [Family; 3] = [
            (
                "kubewasm_cache_objects",
                Kind::Gauge,
                "Objects in an informer's cache",
                |cache| cache.objects as u64,
            ),
            (
                "kubewasm_cache_index_entries",
                Kind::Gauge,
                "Entries of an informer cache's indexes: one per object with a controller, and one per object and indexed label key it carries",
                |cache| cache.index_entries as u64,
            ),
            (
                "kubewasm_cache_lists_total",
                Kind::Counter,
                "Lists an informer completed: the first, and a relist after each 410 Gone",
                |cache| cache.lists,
            ),
        ];
        for (name, kind, help, value) in caches {
            out.family(name, kind, help);
            for cache in &self.caches {
                let [group, version, kind, namespace, selector, drops] = cache_labels(cache);
                out.sample(
                    name,
                    &[
                        ("group", &group),
                        ("version", &version),
                        ("kind", &kind),
                        ("namespace", &namespace),
                        ("selector", &selector),
                        ("drops", &drops),
                    ],
                    value(cache),
                );
            }
        }
    }

    /// Under leader election, whether this process holds the Lease; nothing otherwise.
    fn render_leader(&self, out: &mut Exposition) {
        if let Some((lease, leading)) = &self.leader {
            let name = "leader_election_master_status";
            out.family(
                name,
                Kind::Gauge,
                "1 while this process holds the leader Lease `name`, 0 while it is a standby",
            );
            out.sample(name, &[("name", lease)], u64::from(*leading));
        }
    }
}

/// The sharded guests' counters and gauges of their sharders, labelled `controller`.
fn render_shard_counts(out: &mut Exposition, sharded: &[(&str, &ShardSnapshot)]) {
    type Count = (&'static str, Kind, &'static str, fn(&ShardSnapshot) -> u64);
    let counts: [Count; 9] = [
        (
            "kubewasm_shard_handovers_total",
            Kind::Counter,
            "Keys this replica handed over to another member after a drain",
            |s| s.handovers,
        ),
        (
            "kubewasm_shard_members",
            Kind::Gauge,
            "Members of the guest's ring, as this replica's sharder last saw them (0 unless it shards the guest)",
            |s| s.members,
        ),
        (
            "kubewasm_shard_assignments_total",
            Kind::Counter,
            "Objects this replica's sharder labelled for a member: new ones and those of members gone",
            |s| s.assigned,
        ),
        (
            "kubewasm_shard_moves_total",
            Kind::Counter,
            "Drains this replica's sharder asked for: keys moving between live members",
            |s| s.moves,
        ),
        (
            "kubewasm_shard_label_write_failures_total",
            Kind::Counter,
            "Shard label writes of this replica's sharder that failed (a conflict or a missing object aside)",
            |s| s.failed,
        ),
        (
            "kubewasm_shard_objects_backing_off",
            Kind::Gauge,
            "Objects whose last shard label write failed, waiting to be sent again (1 s doubling to 5 min)",
            |s| s.backing_off,
        ),
        (
            "kubewasm_shard_drains_stuck",
            Kind::Gauge,
            "Drains this replica's sharder asked for over a minute ago that the holder, which runs the guest, has not served",
            |s| s.drains_stuck,
        ),
        (
            "kubewasm_shard_label_write_conflicts_total",
            Kind::Counter,
            "Shard label writes of this replica's sharder that met a newer version of their object, decided again on it",
            |s| s.conflicts,
        ),
        (
            "kubewasm_shard_children_waits_total",
            Kind::Counter,
            "Keys handed to this replica that waited for its watches to show the children the sharder labelled for it",
            |s| s.children_waits,
        ),
    ];
    for (name, kind, help, value) in counts {
        out.family(name, kind, help);
        for (guest, shard) in sharded {
            out.sample(name, &[("controller", guest)], value(shard));
        }
    }
}

/// The objects left with each unloaded guest's finalizer, summed per guest and finalizer (one
/// pair may have been left on several selections).
fn stale_finalizers(observer: &Observer) -> Vec<StaleFinalizerSnapshot> {
    let mut summed: BTreeMap<(String, String), StaleCount> = BTreeMap::new();
    for stale in observer.stale_finalizers() {
        let key = (stale.guest().to_owned(), stale.finalizer().to_owned());
        let count = stale.count();
        let sum = summed.entry(key).or_default();
        sum.objects += count.objects;
        sum.terminating += count.terminating;
    }
    summed
        .into_iter()
        .map(|((guest, finalizer), count)| StaleFinalizerSnapshot {
            guest,
            finalizer,
            count,
        })
        .collect()
}

/// An informer's labels; empty for the core group, every namespace, no selector and no
/// transform.
fn cache_labels(cache: &CacheSnapshot) -> [String; 6] {
    let selection = &cache.selection;
    [
        selection.kind.group.clone(),
        selection.kind.version.clone(),
        selection.kind.kind.clone(),
        selection.namespace.clone().unwrap_or_default(),
        selection
            .selector
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
        cache.transform.to_string(),
    ]
}

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Text being written.
#[derive(Default)]
struct Exposition(String);

impl Exposition {
    fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        let help = help.replace('\\', r"\\").replace('\n', r"\n");
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.0.push_str(name);
        for (i, (label, value)) in labels.iter().enumerate() {
            self.0.push(if i == 0 { '{' } else { ',' });
            let _ = write!(self.0, "{label}=\"{}\"", escape(value));
        }
        if !labels.is_empty() {
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }

    /// A family with one sample per guest, labelled with its name as `label`.
    fn per_guest<V: Display>(
        &mut self,
        guests: &[GuestSnapshot],
        name: &str,
        kind: Kind,
        help: &str,
        label: &str,
        value: impl Fn(&GuestSnapshot) -> V,
    ) {
        self.family(name, kind, help);
        for guest in guests {
            self.sample(name, &[(label, &guest.name)], value(guest));
        }
    }

    /// A histogram family with one series per guest, labelled with its name as `label`: the
    /// cumulative buckets, `+Inf` last, then `_sum` and `_count`.
    fn per_guest_histogram(
        &mut self,
        guests: &[GuestSnapshot],
        name: &str,
        help: &str,
        label: &str,
        value: impl Fn(&GuestSnapshot) -> &HistogramSnapshot,
    ) {
        self.family(name, Kind::Histogram, help);
        for guest in guests {
            self.histogram(name, &[(label, &guest.name)], value(guest));
        }
    }

    /// The samples of one histogram of family `name` with `labels`: cumulative buckets up to
    /// `+Inf`, the sum and the count.
    fn histogram(&mut self, name: &str, labels: &[(&str, &str)], histogram: &HistogramSnapshot) {
        let [bucket, sum, count] =
            ["bucket", "sum", "count"].map(|suffix| format!("{name}_{suffix}"));
        let bounds = histogram.bounds.iter().copied().chain([f64::INFINITY]);
        for (bound, cumulative) in bounds.zip(&histogram.cumulative) {
            let le = go_float(bound);
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket, &with_le, cumulative);
        }
        self.sample(&sum, labels, histogram.sum);
        self.sample(&count, labels, histogram.count());
    }
}

/// `value` as Go's `strconv.FormatFloat(value, 'g', -1, 64)` writes it, as Prometheus' Go client
/// writes `le`: the shortest digits that read back as `value`, in exponent form (`1e-08`,
/// `1e+06`) below 1e-4 and from 1e6 on; `NaN`, `+Inf` and `-Inf` otherwise.
fn go_float(value: f64) -> String {
    if !value.is_finite() {
        let text = if value.is_nan() {
            "NaN"
        } else if value > 0.0 {
            "+Inf"
        } else {
            "-Inf"
        };
        return text.into();
    }
    let scientific = format!("{value:e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("`{:e}` writes an exponent");
    let exponent: i32 = exponent.parse().expect("`{:e}` writes an integer exponent");
    if value == 0.0 || (-4..6).contains(&exponent) {
        value.to_string()
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    }
}

/// A label value as the text format wants it.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str(r"\\"),
            '"' => out.push_str(r#"\""#),
            '\n' => out.push_str(r"\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use kube::api::GroupVersionKind;

    use super::*;
    use crate::histogram::{
        GUEST_CALL_BUCKETS, Histogram, RECONCILE_TIME_BUCKETS, WORKQUEUE_BUCKETS,
    };
    use crate::shard::stats::HANDOVER_BUCKETS;

    fn histogram(bounds: &'static [f64], seconds: &[f64]) -> HistogramSnapshot {
        let histogram = Histogram::new(bounds);
        for &s in seconds {
            histogram.observe(Duration::from_secs_f64(s));
        }
        histogram.snapshot()
    }

    fn guest(name: &str) -> GuestSnapshot {
        GuestSnapshot {
            name: name.into(),
            module: "/m/mirror.wasm".into(),
            tally: Tally {
                loaded_at: SystemTime::UNIX_EPOCH,
                digest: "ab".into(),
                succeeded: 7,
                requeued: 2,
                failed: 3,
                traps: 1,
                timeouts: 0,
                out_of_memory: 0,
                denied: 4,
                output_dropped: 0,
                consecutive_failures: 1,
                failing: false,
                module_failures: 1,
                module_failing: false,
                last_error: None,
                shard_labels_failing: None,
            },
            queue: QueueStats {
                depth: 5,
                adds_total: 11,
                retries_total: 3,
                unfinished_work_seconds: 0.5,
                longest_running_processor_seconds: 0.25,
            },
            max_concurrency: 2,
            active_workers: 1,
            writes_elided: 6,
            events_dropped: 2,
            finalizing: Finalizing {
                objects: 1,
                oldest_seconds: 40,
            },
            reconcile_time: histogram(RECONCILE_TIME_BUCKETS, &[0.003, 0.005, 0.2, 90.0]),
            queue_duration: histogram(WORKQUEUE_BUCKETS, &[0.0, 1e-5, 2e-5]),
            work_duration: histogram(WORKQUEUE_BUCKETS, &[0.5]),
            instantiate: histogram(GUEST_CALL_BUCKETS, &[2e-5, 3e-5]),
            call: histogram(GUEST_CALL_BUCKETS, &[]),
            shard: None,
        }
    }

    #[test]
    fn a_sharded_guest_reports_its_share_and_what_its_sharder_did() {
        let mut snapshot = snapshot();
        assert!(!snapshot.render().contains("kubewasm_shard_"));
        snapshot.guests[1].shard = Some(ShardSnapshot {
            member: "host-0-1a2b3c4d".into(),
            objects: 3300,
            handovers: 12,
            members: 3,
            assigned: 40,
            moves: 12,
            handover: histogram(HANDOVER_BUCKETS, &[0.02, 0.3]),
            failed: 64,
            backing_off: 32,
            drains_stuck: 2,
            conflicts: 5,
            children_waits: 7,
        });
        let text = snapshot.render();
        for line in [
            r#"kubewasm_shard_objects{controller="podset",member="host-0-1a2b3c4d"} 3300"#,
            r#"kubewasm_shard_handovers_total{controller="podset"} 12"#,
            r#"kubewasm_shard_members{controller="podset"} 3"#,
            r#"kubewasm_shard_moves_total{controller="podset"} 12"#,
            r#"kubewasm_shard_label_write_failures_total{controller="podset"} 64"#,
            r#"kubewasm_shard_objects_backing_off{controller="podset"} 32"#,
            r#"kubewasm_shard_drains_stuck{controller="podset"} 2"#,
            r#"kubewasm_shard_label_write_conflicts_total{controller="podset"} 5"#,
            r#"kubewasm_shard_children_waits_total{controller="podset"} 7"#,
            r#"kubewasm_shard_handover_seconds_bucket{controller="podset",le="+Inf"} 2"#,
            r#"kubewasm_shard_handover_seconds_count{controller="podset"} 2"#,
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from\n{text}"
            );
        }
        assert!(!text.contains(r#"kubewasm_shard_objects{controller="mirror""#));
    }

    fn snapshot() -> Snapshot {
        Snapshot {
            guests: vec![guest("mirror"), guest("podset")],
            caches: vec![CacheSnapshot {
                selection: Selection {
                    kind: GroupVersionKind::gvk("", "v1", "ConfigMap"),
                    namespace: Some("team-a".into()),
                    selector: Some("app in (a,b)".parse().unwrap()),
                },
                transform: Transform::new(["/status".parse().unwrap()]),
                objects: 9,
                index_entries: 12,
                lists: 2,
            }],
            loads: LoadSnapshot {
                loaded: 2,
                reloaded: 1,
                rejected: 0,
                unloaded: 1,
                refused: vec![("NotPermitted", 2)],
                access_reviews: 7,
            },
            stale_finalizers: vec![StaleFinalizerSnapshot {
                guest: "stamp".into(),
                finalizer: "kubewasm.dev/stamp".into(),
                count: StaleCount {
                    objects: 3,
                    terminating: 1,
                },
            }],
            leader: Some(("kubewasm-leader".into(), true)),
        }
    }

    #[test]
    fn samples_carry_controller_runtime_names_and_labels() {
        let text = snapshot().render();
        for line in [
            r#"controller_runtime_reconcile_total{controller="mirror",result="success"} 7"#,
            r#"kubewasm_unloaded_finalizer_objects{controller="stamp",finalizer="kubewasm.dev/stamp"} 3"#,
            r#"kubewasm_unloaded_finalizer_terminating_objects{controller="stamp",finalizer="kubewasm.dev/stamp"} 1"#,
            r#"controller_runtime_reconcile_total{controller="mirror",result="error"} 3"#,
            r#"controller_runtime_reconcile_total{controller="mirror",result="requeue"} 0"#,
            r#"controller_runtime_reconcile_total{controller="podset",result="requeue_after"} 2"#,
            r#"controller_runtime_reconcile_errors_total{controller="mirror"} 3"#,
            r#"controller_runtime_max_concurrent_reconciles{controller="mirror"} 2"#,
            r#"controller_runtime_active_workers{controller="mirror"} 1"#,
            r#"workqueue_depth{name="mirror"} 5"#,
            r#"workqueue_adds_total{name="mirror"} 11"#,
            r#"workqueue_retries_total{name="mirror"} 3"#,
            r#"workqueue_unfinished_work_seconds{name="mirror"} 0.5"#,
            r#"kubewasm_guest_traps_total{controller="mirror"} 1"#,
            r#"kubewasm_host_calls_denied_total{controller="mirror"} 4"#,
            r#"kubewasm_writes_elided_total{controller="mirror"} 6"#,
            r#"kubewasm_events_dropped_total{controller="mirror"} 2"#,
            r#"kubewasm_guest_finalizing_objects{controller="mirror"} 1"#,
            r#"kubewasm_guest_finalizing_oldest_seconds{controller="mirror"} 40"#,
            r#"kubewasm_guest_consecutive_failures{controller="mirror"} 1"#,
            r#"kubewasm_guest_failing{controller="mirror"} 0"#,
            "kubewasm_module_loads_total 2",
            "kubewasm_module_reloads_total 1",
            "kubewasm_access_reviews_total 7",
            r#"kubewasm_cache_objects{group="",version="v1",kind="ConfigMap",namespace="team-a",selector="app in (a,b)",drops="/status"} 9"#,
            r#"kubewasm_cache_lists_total{group="",version="v1",kind="ConfigMap",namespace="team-a",selector="app in (a,b)",drops="/status"} 2"#,
            r#"kubewasm_cache_index_entries{group="",version="v1",kind="ConfigMap",namespace="team-a",selector="app in (a,b)",drops="/status"} 12"#,
            r#"leader_election_master_status{name="kubewasm-leader"} 1"#,
            "# TYPE kubewasm_cache_lists_total counter",
            "# TYPE workqueue_depth gauge",
            "# TYPE controller_runtime_reconcile_total counter",
            "# TYPE controller_runtime_reconcile_time_seconds histogram",
            "# HELP controller_runtime_reconcile_time_seconds Length of time per reconciliation per controller",
            r#"controller_runtime_reconcile_time_seconds_bucket{controller="mirror",le="0.005"} 2"#,
            r#"controller_runtime_reconcile_time_seconds_bucket{controller="mirror",le="0.15"} 2"#,
            r#"controller_runtime_reconcile_time_seconds_bucket{controller="mirror",le="0.2"} 3"#,
            r#"controller_runtime_reconcile_time_seconds_bucket{controller="mirror",le="60"} 3"#,
            r#"controller_runtime_reconcile_time_seconds_bucket{controller="mirror",le="+Inf"} 4"#,
            r#"controller_runtime_reconcile_time_seconds_sum{controller="mirror"} 90.208"#,
            r#"controller_runtime_reconcile_time_seconds_count{controller="mirror"} 4"#,
            "# TYPE workqueue_queue_duration_seconds histogram",
            r#"workqueue_queue_duration_seconds_bucket{name="mirror",le="1e-08"} 1"#,
            r#"workqueue_queue_duration_seconds_bucket{name="mirror",le="1e-06"} 1"#,
            r#"workqueue_queue_duration_seconds_bucket{name="mirror",le="9.999999999999999e-06"} 1"#,
            r#"workqueue_queue_duration_seconds_bucket{name="mirror",le="9.999999999999999e-05"} 3"#,
            r#"workqueue_queue_duration_seconds_bucket{name="mirror",le="1000"} 3"#,
            r#"workqueue_queue_duration_seconds_count{name="podset"} 3"#,
            r#"workqueue_work_duration_seconds_bucket{name="mirror",le="0.1"} 0"#,
            r#"workqueue_work_duration_seconds_bucket{name="mirror",le="1"} 1"#,
            r#"workqueue_work_duration_seconds_sum{name="mirror"} 0.5"#,
            r#"kubewasm_guest_instantiate_seconds_bucket{controller="mirror",le="1e-05"} 0"#,
            r#"kubewasm_guest_instantiate_seconds_bucket{controller="mirror",le="2.5e-05"} 1"#,
            r#"kubewasm_guest_instantiate_seconds_bucket{controller="mirror",le="5e-05"} 2"#,
            r#"kubewasm_guest_instantiate_seconds_bucket{controller="mirror",le="0.00025"} 2"#,
            r#"kubewasm_guest_call_seconds_bucket{controller="mirror",le="+Inf"} 0"#,
            r#"kubewasm_guest_call_seconds_sum{controller="mirror"} 0"#,
            r#"kubewasm_guest_call_seconds_count{controller="mirror"} 0"#,
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
    }

    #[test]
    fn every_family_is_announced_once_and_its_samples_follow_it() {
        let text = snapshot().render();
        let mut announced = Vec::new();
        let (mut current, mut histogram) = (String::new(), false);
        let mut help = None;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                help = rest.split(' ').next();
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert_eq!(help.take(), Some(name), "HELP right before TYPE");
                assert!(!announced.contains(&name), "{name} announced twice");
                announced.push(name);
                (current, histogram) = (name.to_owned(), kind == "histogram");
            } else {
                let name = line.split(['{', ' ']).next().unwrap_or_default();
                let family = match name.rsplit_once('_') {
                    Some((family, "bucket" | "sum" | "count")) if histogram => family,
                    _ => name,
                };
                assert_eq!(family, current, "{line:?} outside its family");
                let value = line.rsplit(' ').next().unwrap_or_default();
                assert!(value.parse::<f64>().is_ok(), "{line:?} has no number");
            }
        }
        assert_eq!(
            announced.iter().filter(|n| n.ends_with("_seconds")).count(),
            8
        );
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn histograms_are_cumulative_up_to_inf_which_is_the_count() {
        let text = snapshot().render();
        for (family, label, bounds) in [
            (
                "controller_runtime_reconcile_time_seconds",
                "controller",
                RECONCILE_TIME_BUCKETS,
            ),
            (
                "workqueue_queue_duration_seconds",
                "name",
                WORKQUEUE_BUCKETS,
            ),
            ("workqueue_work_duration_seconds", "name", WORKQUEUE_BUCKETS),
            (
                "kubewasm_guest_instantiate_seconds",
                "controller",
                GUEST_CALL_BUCKETS,
            ),
            (
                "kubewasm_guest_call_seconds",
                "controller",
                GUEST_CALL_BUCKETS,
            ),
        ] {
            for guest in ["mirror", "podset"] {
                // What follows the guest's label in each line of `family` with this suffix.
                let series = |suffix: &str| -> Vec<&str> {
                    let prefix = format!("{family}_{suffix}{{{label}=\"{guest}\"");
                    text.lines()
                        .filter_map(|line| line.strip_prefix(&prefix))
                        .collect()
                };
                let value = |rest: &str| rest.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap();
                let (les, counts): (Vec<f64>, Vec<f64>) = series("bucket")
                    .iter()
                    .map(|rest| {
                        let le = rest.strip_prefix(",le=\"").unwrap().split('"').next();
                        (le.unwrap().parse::<f64>().unwrap(), value(rest))
                    })
                    .unzip();
                let expected: Vec<f64> = bounds.iter().copied().chain([f64::INFINITY]).collect();
                assert_eq!(les, expected, "{family} {guest}");
                assert!(counts.is_sorted(), "{family} {guest}: {counts:?}");
                let (sums, totals) = (series("sum"), series("count"));
                assert_eq!((sums.len(), totals.len()), (1, 1), "{family} {guest}");
                assert_eq!(
                    counts.last().copied(),
                    Some(value(totals[0])),
                    "{family} {guest}"
                );
            }
        }
    }

    #[test]
    fn bucket_bounds_are_written_like_the_go_client() {
        for (value, text) in [
            (1e-8, "1e-08"),
            (9.999999999999999e-6, "9.999999999999999e-06"),
            (2.5e-5, "2.5e-05"),
            (0.00025, "0.00025"),
            (0.005, "0.005"),
            (1.0, "1"),
            (60.0, "60"),
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (0.0, "0"),
            (f64::INFINITY, "+Inf"),
        ] {
            assert_eq!(go_float(value), text);
        }
    }

    #[test]
    fn label_values_are_escaped() {
        let mut snapshot = snapshot();
        snapshot.guests = vec![guest("a\"b\\c\nd")];
        let text = snapshot.render();
        assert!(
            text.contains(r#"workqueue_depth{name="a\"b\\c\nd"} 5"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"workqueue_queue_duration_seconds_bucket{name="a\"b\\c\nd",le="+Inf"} 3"#
            ),
            "{text}"
        );
        assert_eq!(escape("plain"), "plain");
    }

    #[test]
    fn no_guests_leaves_families_without_samples() {
        let text = Snapshot::default().render();
        assert!(text.contains("# TYPE workqueue_depth gauge\n# HELP"));
        assert!(text.contains("kubewasm_module_loads_total 0\n"));
    }
}
