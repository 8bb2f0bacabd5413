//! One running guest: its informers and triggers feed its workqueue, and its workers hand each
//! key to the guest's current module.
//!
//! Guarantees: a key is reconciled by at most one worker at a time; a failed reconcile is
//! retried with per-key exponential backoff, reset on success; a finalizer the guest declares
//! is added before its first reconcile of an object and removed only after `finalize` succeeds,
//! from the object as `finalize` left it; an object that leaves a label-selected primary's
//! selection, seen leaving or found outside it at start in a namespace the guest runs in, has
//! the finalizer removed without `finalize`: it is no longer the guest's; a finalizer that an
//! earlier module of the guest declared on the same primary selection while the host ran is
//! replaced by the current one;
//! replacing the module is atomic at the next dequeue and re-enqueues every key; behind a closed
//! gate (a standby) keys are queued but none is reconciled until the gate opens.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::api::GroupVersionKind;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::cluster::cache::{CachedObject, Change, ObjectKey};
use crate::cluster::gate::Gate;
use crate::cluster::membership;
use crate::cluster::selection::Selection;
use crate::cluster::selector::LabelSelector;
use crate::cluster::view::View;
use crate::cluster::watch::{Informer, Informers, Resources, Subscription};
use crate::config::{DropRule, Grant, QueueConfig};
use crate::control::apply::{self, ClusterBackend};
use crate::control::queue::WorkQueue;
use crate::control::sharder::{self, Replica, ShardStats};
use crate::control::tally::{Blame, Streak, Tally};
use crate::control::trigger;
use crate::histogram::{Histogram, RECONCILE_TIME_BUCKETS};
use crate::wasm::backend::{Backend, CallError, Scope};
use crate::wasm::bindings::types::{self, Reason};
use crate::wasm::declaration::{Mapping, Metadata};
use crate::wasm::dispatch::{self, Entry, Failure, Outcome};
use crate::wasm::env::{CallTimes, GuestEnv};
use crate::wasm::module::Module;
use crate::wasm::permissions::Permissions;
use crate::wasm::runtime::Runtime;
use crate::wasm::state::Limits;

/// Pause before a call the host had no room for is made again.
const BUSY_PAUSE: Duration = Duration::from_millis(100);

/// Pause before a failed list of the objects outside the selection is made again.
const SWEEP_RETRY: Duration = Duration::from_secs(5);

/// How the operator runs a guest, on top of what the module declares.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The controller's name.
    pub name: String,
    /// Workers reconciling at once.
    pub max_concurrency: u32,
    /// Resync period, if any.
    pub resync: Option<Duration>,
    /// Namespaces the guest's primary and owned objects are watched in; empty means the
    /// namespace the module declares (or all).
    pub namespaces: Vec<String>,
    /// Per-call limits.
    pub limits: Limits,
    /// Backoff of failed keys.
    pub queue: QueueConfig,
    /// What the operator granted; `None`: everything on the declared kinds.
    pub grants: Option<Vec<Grant>>,
    /// Fields dropped from the objects it reads before they are cached.
    pub drops: Vec<DropRule>,
    /// Finalizers an earlier module of this guest put on the same primary objects: the host
    /// replaces them with the current one (or removes them) as it reconciles each object, and
    /// finalizes an object being deleted that carries only one of them.
    pub retired_finalizers: Vec<String>,
}

/// Counters of a guest's reconciles. Every reconcile is timed once and counted once as
/// succeeded, requeued or failed.
#[derive(Debug)]
pub struct Counters {
    /// Reconciles that returned done, and keys left alone because their object is being deleted
    /// without the guest's finalizer.
    pub succeeded: AtomicU64,
    /// Reconciles that asked to be requeued after a delay.
    pub requeued: AtomicU64,
    /// Reconciles that failed, for any reason.
    pub failed: AtomicU64,
    /// Reconciles that trapped, other than by running out of memory.
    pub traps: AtomicU64,
    /// Reconciles that ran past their deadline.
    pub timeouts: AtomicU64,
    /// Reconciles that ran out of memory.
    pub out_of_memory: AtomicU64,
    /// The current run of failed reconciles and the last error.
    pub streak: Streak,
    /// Time of each reconcile: the whole processing of a dequeued key, finalizers included.
    pub reconcile_time: Histogram,
}

impl Default for Counters {
    /// Nothing counted yet.
    fn default() -> Self {
        Self {
            succeeded: AtomicU64::default(),
            requeued: AtomicU64::default(),
            failed: AtomicU64::default(),
            traps: AtomicU64::default(),
            timeouts: AtomicU64::default(),
            out_of_memory: AtomicU64::default(),
            streak: Streak::default(),
            reconcile_time: Histogram::new(RECONCILE_TIME_BUCKETS),
        }
    }
}

/// A running guest.
pub struct Controller {
    settings: Settings,
    runtime: Runtime,
    module: RwLock<Arc<Module>>,
    env: Arc<GuestEnv>,
    backend: Arc<ClusterBackend>,
    queue: Arc<WorkQueue<ObjectKey, Reason>>,
    /// The primary selection in each namespace it runs in.
    primaries: Vec<View>,
    /// Every informer the guest reads: workers start once all of them have listed.
    readable: Vec<Arc<Informer>>,
    subscriptions: Mutex<Vec<Subscription>>,
    /// Cancelled when the controller shuts down; ends its resync task.
    stop: CancellationToken,
    /// Watched objects waiting for the guest's `map-keys`: each at most once however often it
    /// changed, mapped by at most `max_concurrency` calls at once, dropped at shutdown.
    unmapped: WorkQueue<WatchedKey>,
    /// The states to map of each queued watched object.
    unmapped_states: Mutex<HashMap<WatchedKey, Unmapped>>,
    counters: Counters,
    /// Objects being deleted that still carry the guest's finalizer, with their uid and the Unix
    /// second of their deletionTimestamp: each key from when it is processed so until it is
    /// processed otherwise. An object that left the guest's selection is no longer counted.
    finalizing: Mutex<HashMap<ObjectKey, (Option<String>, i64)>>,
    /// Keys of objects that went from the cache still carrying the guest's finalizers: each may
    /// have left a label selector, and is looked up live once. Filled only when the primary
    /// selection has a label selector.
    gone_holding: Arc<Mutex<HashSet<ObjectKey>>>,
    /// Open while this replica may reconcile.
    gate: Gate,
    /// This replica's share of the keys, when sharded.
    share: Option<Arc<Share>>,
    /// The primary selections as declared: without the share's label.
    declared: Vec<Selection>,
    /// What the sharder did, while this replica shards the guest.
    shard_stats: Arc<ShardStats>,
}

/// A sharded guest's share of the keys: the objects labelled for its member.
///
/// A key leaves the share in one of two ways: the object is deleted, and is reconciled as
/// gone; or the sharder asks for it with the drain label, and the worker that dequeues it
/// (the only one, by the queue's exclusion) removes the shard and drain labels instead of
/// reconciling. From then on the key is not this replica's: its leaving the cache is no
/// deletion, and nothing queued for it runs.
pub struct Share {
    member: String,
    /// `shard.kubewasm.dev/<guest>`.
    label: String,
    /// `drain.shard.kubewasm.dev/<guest>`.
    drain: String,
    /// Keys handed over whose leaving the cache is still to come.
    released: Mutex<HashSet<ObjectKey>>,
    /// Keys deleted while in the share, still to be reconciled as gone.
    gone: Mutex<HashSet<ObjectKey>>,
    /// Keys handed over so far.
    handovers: AtomicU64,
}

impl Share {
    fn new(guest: &str, member: &str) -> Self {
        Self {
            member: member.to_owned(),
            label: membership::shard_label(guest),
            drain: membership::drain_label(guest),
            released: Mutex::default(),
            gone: Mutex::default(),
            handovers: AtomicU64::new(0),
        }
    }

    /// Whether `change` of the primary selection ends with the object outside it (deleted,
    /// relabelled or handed over), and whether that counts as leaving the share: false for a
    /// key this replica handed over, which is then forgotten.
    fn left(&self, change: &Change, selection: &Selection) -> Option<bool> {
        let old = change.old.as_ref()?;
        if change
            .new
            .as_ref()
            .is_some_and(|new| selection.selects(new))
        {
            return None;
        }
        let key = old.key();
        if self.released.lock().expect("released lock").remove(&key) {
            return Some(false);
        }
        self.gone.lock().expect("gone lock").insert(key);
        Some(true)
    }
}

/// Objects being deleted that still wait for a guest's `finalize`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Finalizing {
    /// How many.
    pub objects: usize,
    /// Seconds since the oldest of them was deleted; 0 when there is none.
    pub oldest_seconds: u64,
}

/// A watched object: its kind and key.
type WatchedKey = (GroupVersionKind, ObjectKey);

/// What `map-keys` is to see of one changed watched object: its state before its first change
/// since it was last mapped and its latest state (or its last, once deleted), and whether each
/// change was part of an initial list.
struct Unmapped {
    states: Vec<Arc<CachedObject>>,
    initial: bool,
}

impl Unmapped {
    /// Notes `change`, keeping the earliest and the latest state.
    fn note(&mut self, change: &Change) {
        for state in change.old.iter().chain(&change.new) {
            if self.states.iter().any(|s| Arc::ptr_eq(s, state)) {
                continue;
            }
            if self.states.len() == 2 {
                self.states.pop();
            }
            self.states.push(state.clone());
        }
        self.initial &= change.initial;
    }
}

impl Controller {
    /// Starts a guest: acquires the informers its module declares, subscribes its triggers and
    /// spawns its workers into `tasks`, which reconcile once the `replica`'s gate opens. A
    /// sharded replica reconciles only the primary objects labelled for its member, reads only
    /// the owned objects labelled so, and shards the guest's objects while it leads.
    pub fn start(
        runtime: Runtime,
        resources: Arc<Resources>,
        informers: &Informers,
        module: Arc<Module>,
        settings: Settings,
        tasks: &TaskTracker,
        replica: &Replica,
    ) -> Arc<Self> {
        let share = replica
            .sharded
            .as_ref()
            .map(|sharded| Arc::new(Share::new(&settings.name, &sharded.member)));
        let plan = Plan::new(&module.metadata, &settings.namespaces, share.as_deref());
        let declared = Plan::new(&module.metadata, &settings.namespaces, None);
        let all = plan.all();
        let view = |selection: &Selection| {
            let transform = DropRule::transform(&settings.drops, &selection.kind);
            View::new(selection, &all, &transform, informers)
        };
        let primaries: Vec<View> = plan.primaries.iter().map(view).collect();
        let owned: Vec<View> = plan.owned.iter().map(view).collect();
        let watched: Vec<(View, Mapping)> = plan
            .watched
            .iter()
            .map(|(selection, mapping)| (view(selection), mapping.clone()))
            .collect();
        let mut readable: Vec<Arc<Informer>> = Vec::new();
        for view in primaries
            .iter()
            .chain(&owned)
            .chain(watched.iter().map(|(v, _)| v))
        {
            if !readable.iter().any(|i| Arc::ptr_eq(i, view.informer())) {
                readable.push(view.informer().clone());
            }
        }
        let backend = Arc::new(ClusterBackend::new(
            resources.clone(),
            &settings.name,
            readable.clone(),
            settings.limits.host_call_timeout,
            share.as_ref().map(|s| {
                let primary = module.metadata.primary.kind.clone();
                (s.label.clone(), s.member.clone(), primary)
            }),
        ));
        let env = Arc::new(
            GuestEnv::new(
                &settings.name,
                module.metadata.declared(),
                backend.clone(),
                settings.limits.host_call_timeout,
                Permissions::new(settings.grants.clone()),
            )
            .with_instances(settings.limits.instances),
        );
        let maps_keys = watched.iter().any(|(_, m)| *m == Mapping::Guest);
        let queue_config = settings.queue;
        let controller = Arc::new(Self {
            queue: Arc::new(WorkQueue::new(settings.queue, replica.lanes.clone())),
            settings,
            runtime,
            module: RwLock::new(module.clone()),
            env,
            backend,
            primaries,
            readable: readable.clone(),
            subscriptions: Mutex::default(),
            stop: CancellationToken::new(),
            unmapped: WorkQueue::new(queue_config, replica.lanes.clone()),
            unmapped_states: Mutex::default(),
            counters: Counters::default(),
            finalizing: Mutex::default(),
            gone_holding: Arc::default(),
            gate: replica.gate.clone(),
            share: share.clone(),
            declared: declared.primaries.clone(),
            shard_stats: Arc::default(),
        });
        if let Some(sharded) = &replica.sharded {
            let guest = sharder::Guest {
                name: controller.settings.name.clone(),
                primaries: declared.primaries,
                owned: declared.owned,
            };
            tasks.spawn(sharder::run(
                guest,
                resources,
                sharded.members.clone(),
                sharded.sharding.clone(),
                controller.shard_stats.clone(),
                controller.stop.clone(),
            ));
        }
        let primary_kind = module.metadata.primary.kind.clone();
        let mut subscriptions = Vec::new();
        let updates = trigger::Updates {
            on: module.metadata.reconcile_on,
            finalizer: module.metadata.finalizer.clone(),
        };
        let watch_leaving = controller.selects_by_label();
        let ours = controller.finalizers();
        for view in &controller.primaries {
            let queue = controller.queue.clone();
            let updates = updates.clone();
            let gone_holding = controller.gone_holding.clone();
            let ours = ours.clone();
            let selection = view.selection().clone();
            let share = share.clone();
            let manager = apply::field_manager(&controller.settings.name);
            subscriptions.push(view.subscribe(Arc::new(move |change: &Change| {
                if let Some(share) = &share {
                    if let Some(new) = &change.new
                        && new.label(&share.drain).is_some()
                    {
                        // Asked to hand the key over: the next worker to take it does.
                        queue.add(new.key(), Reason::Changed);
                        return;
                    }
                    if share.left(change, &selection) == Some(false) {
                        return;
                    }
                }
                // Gone, or still cached but outside the selection.
                if watch_leaving
                    && change
                        .new
                        .as_ref()
                        .is_none_or(|new| !selection.selects(new))
                    && let Some(old) = &change.old
                    && old.finalizers().any(|f| ours.iter().any(|o| o == f))
                {
                    gone_holding.lock().expect("gone lock").insert(old.key());
                }
                if let Some((key, reason)) = trigger::primary(change, &updates) {
                    enqueue_change(&queue, change, &manager, key, reason);
                }
            })));
        }
        *controller.subscriptions.lock().expect("subscriptions lock") = subscriptions;
        tasks.spawn(
            controller
                .clone()
                .subscribe_children(primary_kind, owned, watched),
        );
        for _ in 0..controller.settings.max_concurrency {
            let worker = controller.clone();
            tasks.spawn(async move { worker.work().await });
            if maps_keys {
                let mapper = controller.clone();
                tasks.spawn(async move { mapper.map().await });
            }
        }
        if controller.finalizes(module.metadata.finalizer.as_deref())
            && controller.selects_by_label()
        {
            tasks.spawn(controller.clone().sweep_unselected());
        }
        if let Some(period) = controller.settings.resync {
            let weak = Arc::downgrade(&controller);
            tasks.spawn(resync(weak, controller.stop.clone(), period));
        }
        controller
    }

    /// Subscribes the triggers of owned and watched kinds once every primary informer has
    /// listed. They name keys of the primary kind, in the changed object's namespace or, for a
    /// cluster-scoped primary kind, in none: discovery has told the scope by then. A
    /// subscription replays what its informer already holds, so no change is missed.
    async fn subscribe_children(
        self: Arc<Self>,
        primary: GroupVersionKind,
        owned: Vec<View>,
        watched: Vec<(View, Mapping)>,
    ) {
        for view in &self.primaries {
            tokio::select! {
                () = view.informer().synced() => {}
                () = self.stop.cancelled() => return,
            }
        }
        let namespaced = !self.backend.is_cluster_scoped(&primary);
        let mut subscriptions = Vec::new();
        for view in owned {
            let queue = self.queue.clone();
            let kind = primary.clone();
            let manager = apply::field_manager(&self.settings.name);
            subscriptions.push(view.subscribe(Arc::new(move |change: &Change| {
                for key in trigger::owners(change, &kind, true, namespaced) {
                    enqueue_change(&queue, change, &manager, key, Reason::OwnedChanged);
                }
            })));
        }
        for (view, mapping) in watched {
            let kind = view.selection().kind.clone();
            let handler = self.watch_handler(kind, mapping, primary.clone(), namespaced);
            subscriptions.push(view.subscribe(handler));
        }
        // Under the lock that shut_down clears them with: none outlives a stopped controller.
        let mut current = self.subscriptions.lock().expect("subscriptions lock");
        if !self.stop.is_cancelled() {
            current.extend(subscriptions);
        }
    }

    /// The trigger of a watch of kind `watched`, by its mapping.
    fn watch_handler(
        self: &Arc<Self>,
        watched: GroupVersionKind,
        mapping: Mapping,
        primary: GroupVersionKind,
        namespaced: bool,
    ) -> crate::cluster::watch::Handler {
        let queue = self.queue.clone();
        match mapping {
            Mapping::Owner => Arc::new(move |change: &Change| {
                for key in trigger::owners(change, &primary, false, namespaced) {
                    enqueue(&queue, change.initial, key, Reason::WatchedChanged);
                }
            }),
            Mapping::Label(label) => Arc::new(move |change: &Change| {
                for key in trigger::labelled(change, &label, namespaced) {
                    enqueue(&queue, change.initial, key, Reason::WatchedChanged);
                }
            }),
            Mapping::Guest => {
                let weak = Arc::downgrade(self);
                Arc::new(move |change: &Change| {
                    if let Some(controller) = weak.upgrade() {
                        controller.to_map(&watched, change);
                    }
                })
            }
        }
    }

    /// Queues the changed watched object, of kind `kind`, for `map-keys`.
    fn to_map(&self, kind: &GroupVersionKind, change: &Change) {
        let Some(object) = change.new.as_ref().or(change.old.as_ref()) else {
            return;
        };
        let key = (kind.clone(), object.key());
        let mut unmapped = self.unmapped_states.lock().expect("unmapped lock");
        let entry = unmapped.entry(key.clone()).or_insert(Unmapped {
            states: Vec::new(),
            initial: true,
        });
        entry.note(change);
        let initial = entry.initial;
        drop(unmapped);
        enqueue(&self.unmapped, initial, key, ());
    }

    /// Maps queued watched objects until the controller stops; a call in flight is dropped then.
    async fn map(&self) {
        self.unmapped.serve();
        // `map-keys` may call the host: a standby calls nothing.
        tokio::select! {
            () = self.gate.opened() => {}
            () = self.stop.cancelled() => return,
        }
        while let Some(item) = self.unmapped.next().await {
            let unmapped = self
                .unmapped_states
                .lock()
                .expect("unmapped lock")
                .remove(&item.key);
            if let Some(Unmapped { states, initial }) = unmapped {
                tokio::select! {
                    () = self.map_keys(&item.key.0, states, initial) => {}
                    () = self.stop.cancelled() => {
                        // Out of flight, so that it holds no room in the host's lanes.
                        self.unmapped.done(&item.key);
                        return;
                    }
                }
            }
            self.unmapped.done(&item.key);
        }
    }

    async fn map_keys(
        &self,
        kind: &GroupVersionKind,
        objects: Vec<Arc<CachedObject>>,
        initial: bool,
    ) {
        let module = self.module();
        let kind = types::Gvk::from(kind.clone());
        for object in objects {
            // A call the host had no room for is made again, so no trigger is lost.
            let mapped = loop {
                let mapped = dispatch::map_keys(
                    &self.runtime,
                    &module,
                    &self.env,
                    &self.settings.limits,
                    kind.clone(),
                    object.json(),
                )
                .await;
                if !matches!(mapped, Err(Failure::Busy(_))) {
                    break mapped;
                }
                tokio::time::sleep(BUSY_PAUSE).await;
            };
            match mapped {
                Ok(keys) => {
                    for key in keys {
                        let key = ObjectKey {
                            namespace: key.namespace,
                            name: key.name,
                        };
                        enqueue(&self.queue, initial, key, Reason::WatchedChanged);
                    }
                }
                Err(failure) => {
                    tracing::warn!(guest = %self.settings.name, object = %object.key(), %failure, "map-keys failed")
                }
            }
        }
    }

    /// The guest's name.
    pub fn name(&self) -> &str {
        &self.settings.name
    }

    /// How the operator runs it.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Its primary selection, in each namespace it runs in.
    pub fn primaries(&self) -> &[View] {
        &self.primaries
    }

    /// The finalizers it keeps on its objects: the current module's, then retired ones.
    pub fn finalizers(&self) -> Vec<String> {
        let current = self.module().metadata.finalizer.clone();
        current
            .into_iter()
            .chain(self.settings.retired_finalizers.iter().cloned())
            .collect()
    }

    /// Workers it runs, each reconciling one key at a time.
    pub fn max_concurrency(&self) -> u32 {
        self.settings.max_concurrency
    }

    /// The module currently answering reconciles.
    pub fn module(&self) -> Arc<Module> {
        self.module.read().expect("module lock").clone()
    }

    /// Its reconcile counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Its workqueue.
    pub fn queue(&self) -> &WorkQueue<ObjectKey, Reason> {
        &self.queue
    }

    /// A snapshot of its tally: the module answering reconciles and how they ended.
    pub fn tally(&self) -> Tally {
        let module = self.module();
        let count = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let counters = &self.counters;
        let (module_failures, module_failing) = counters.streak.module_failures(|| self.held());
        Tally {
            loaded_at: module.loaded_at,
            digest: module.digest.clone(),
            succeeded: count(&counters.succeeded),
            requeued: count(&counters.requeued),
            failed: count(&counters.failed),
            traps: count(&counters.traps),
            timeouts: count(&counters.timeouts),
            out_of_memory: count(&counters.out_of_memory),
            denied: self.calls_denied(),
            output_dropped: self.env.output.dropped(),
            consecutive_failures: counters.streak.failures(),
            failing: counters.streak.is_failing(),
            module_failures,
            module_failing,
            last_error: counters.streak.last_error(),
        }
    }

    /// How long its instantiations and export calls take.
    pub fn call_times(&self) -> &CallTimes {
        &self.env.times
    }

    /// Host calls refused because the kind was not declared or the verb not granted.
    pub fn calls_denied(&self) -> u64 {
        self.env.denied.load(Ordering::Relaxed)
    }

    /// Applies that were not sent because the cluster already matched.
    pub fn writes_elided(&self) -> u64 {
        self.backend.elided()
    }

    /// Events dropped over their object's rate.
    pub fn events_dropped(&self) -> u64 {
        self.backend.events_dropped()
    }

    /// Objects being deleted that wait for the guest's `finalize`.
    pub fn finalizing(&self) -> Finalizing {
        let finalizing = self.finalizing.lock().expect("finalizing lock");
        let now = Timestamp::now().as_second();
        Finalizing {
            objects: finalizing.len(),
            oldest_seconds: finalizing
                .values()
                .map(|(_, deleted)| *deleted)
                .min()
                .map_or(0, |deleted| u64::try_from(now - deleted).unwrap_or(0)),
        }
    }

    /// Whether every informer the guest reads has listed once.
    pub fn is_synced(&self) -> bool {
        self.readable.iter().all(|i| i.is_synced())
    }

    /// Whether `module` can replace the current one in place: it declares exactly the same
    /// kinds, mappings, finalizer, concurrency and resync period.
    pub fn can_swap_to(&self, module: &Module) -> bool {
        self.module().metadata == module.metadata
    }

    /// Makes `module` answer every reconcile from the next dequeue on, and enqueues every key
    /// again with [`Reason::Reload`]. Reconciles in flight finish on the module they started
    /// with. The caller checks [`Controller::can_swap_to`] first.
    pub fn swap_module(&self, module: Arc<Module>) {
        *self.module.write().expect("module lock") = module;
        for view in &self.primaries {
            for key in view.keys() {
                self.queue.add_low(key, Reason::Reload);
            }
        }
    }

    /// Stops taking keys and waits for reconciles in flight to finish; drops its watches.
    pub async fn shut_down(&self) {
        self.stop.cancel();
        self.unmapped.shut_down();
        self.queue.shut_down_and_drain().await;
        self.subscriptions
            .lock()
            .expect("subscriptions lock")
            .clear();
    }

    /// The cached primary object with this key.
    fn primary(&self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        self.primaries.iter().find_map(|v| v.get(key))
    }

    async fn work(self: Arc<Self>) {
        // Reconciling against a partly listed cache would see owned objects as missing. A kind
        // that is never served keeps the workers waiting until the controller shuts down.
        for informer in &self.readable {
            tokio::select! {
                () = informer.synced() => {}
                () = self.stop.cancelled() => return,
            }
        }
        // Counted before the gate opens, so that every guest's urgent keys hold the backlog
        // back from the moment a standby leads.
        self.queue.serve();
        tokio::select! {
            () = self.gate.opened() => {}
            () = self.stop.cancelled() => return,
        }
        while let Some(item) = self.queue.next().await {
            let start = Instant::now();
            self.process(&item.key, item.reason).await;
            self.counters.reconcile_time.observe(start.elapsed());
            self.queue.done(&item.key);
        }
    }

    async fn process(&self, key: &ObjectKey, reason: Reason) {
        let module = self.module();
        let metadata = &module.metadata;
        let mut object = self.primary(key);
        if let Some(share) = &self.share {
            if share.released.lock().expect("released lock").contains(key) {
                // Handed over already; the cache has not caught up.
                self.queue.forget(key);
                return;
            }
            match &object {
                Some(cached) if cached.label(&share.drain).is_some() => {
                    self.hand_over(share, &metadata.primary.kind, key, cached)
                        .await;
                    return;
                }
                Some(_) => {}
                // Not in the share, or handed over: another replica's.
                None if !share.gone.lock().expect("gone lock").contains(key) => {
                    self.note_finalizing(key, None, None);
                    self.queue.forget(key);
                    return;
                }
                None => {}
            }
        }
        let mut entry = Entry::Reconcile;
        let finalizer = metadata.finalizer.as_deref();
        self.note_finalizing(key, object.as_deref(), finalizer);
        let gone_holding = self.gone_holding.lock().expect("gone lock").remove(key);
        match object.clone() {
            Some(cached) if self.finalizes(finalizer) => {
                let held = self.holds(&cached, finalizer);
                if cached.deleting() && (!held || finalizer.is_none()) {
                    // Not the guest's to finalize; a retired finalizer of a guest that no
                    // longer declares one goes without `finalize`.
                    if held && let Err(error) = self.release(&cached, finalizer).await {
                        self.retry(key, &format!("removing retired finalizers: {error}"));
                        return;
                    }
                    self.counters.succeeded.fetch_add(1, Ordering::Relaxed);
                    self.queue.forget(key);
                    return;
                }
                if cached.deleting() {
                    entry = Entry::Finalize;
                } else {
                    let wanted = self.wanted_finalizers(&cached, finalizer);
                    if !cached.finalizers().eq(wanted.iter().map(String::as_str)) {
                        let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
                        let set = self
                            .backend
                            .set_finalizers(&metadata.primary.kind, &cached, &wanted)
                            .await;
                        if let Err(error) = set {
                            self.retry(key, &format!("adding finalizer {finalizer:?}: {error}"));
                            return;
                        }
                        // The guest sees the object with its finalizer, as recorded by the write.
                        object = self.primary(key).or(object);
                    }
                }
            }
            None if gone_holding => {
                if let Err(error) = self.release_unselected(key, finalizer).await {
                    self.gone_holding
                        .lock()
                        .expect("gone lock")
                        .insert(key.clone());
                    self.retry(
                        key,
                        &format!("releasing an object that left the selection: {error}"),
                    );
                    return;
                }
            }
            _ => {}
        }
        let request = types::Request {
            key: types::ObjectKey {
                namespace: key.namespace.clone(),
                name: key.name.clone(),
            },
            reason,
            attempt: self.queue.num_requeues(key) + 1,
            object: object.as_ref().map(|o| o.json().to_string()),
        };
        let scope = Scope {
            kind: metadata.primary.kind.clone(),
            namespace: key.namespace.clone(),
            name: key.name.clone(),
            uid: object.as_ref().and_then(|o| o.uid().map(str::to_owned)),
            deleting: object.as_ref().is_some_and(|o| o.deleting()),
        };
        let (result, blame) = dispatch::call(
            &self.runtime,
            &module,
            &self.env,
            &self.settings.limits,
            scope,
            entry,
            request,
        )
        .await;
        match result {
            Ok(Outcome::Done) => {
                // The object as `finalize` left it, where the guest's own writes are recorded;
                // the one `finalize` was given if the cache no longer holds it (it left the
                // selection) or holds another object of that name.
                if entry == Entry::Finalize
                    && let Some(finalized) = &object
                    && let Some(object) = self
                        .primary(key)
                        .filter(|fresh| fresh.uid() == finalized.uid())
                        .or_else(|| Some(finalized.clone()))
                    && self.holds(&object, finalizer)
                {
                    if let Err(error) = self.release(&object, finalizer).await {
                        self.retry(key, &format!("removing finalizer {finalizer:?}: {error}"));
                        return;
                    }
                    self.note_finalizing(key, None, None);
                }
                self.counters.succeeded.fetch_add(1, Ordering::Relaxed);
                self.counters.streak.succeeded(&self.settings.name);
                self.queue.forget(key);
                self.settled(key);
            }
            Ok(Outcome::RequeueAfter(delay)) => {
                self.counters.requeued.fetch_add(1, Ordering::Relaxed);
                self.counters.streak.succeeded(&self.settings.name);
                self.queue.forget(key);
                self.queue.add_after(key.clone(), Reason::Requeue, delay);
            }
            Err(Failure::Permanent(message)) => {
                self.counters.failed.fetch_add(1, Ordering::Relaxed);
                self.counters
                    .streak
                    .failed(&self.settings.name, key, (&message, blame), || self.held());
                tracing::error!(guest = %self.settings.name, %key, %message, "reconcile failed permanently; waiting for a change");
                self.queue.forget(key);
                self.settled(key);
            }
            Err(Failure::Busy(message)) => {
                // The guest did nothing wrong: retried without counting a failure or an attempt.
                self.queue
                    .add_after(key.clone(), Reason::Requeue, BUSY_PAUSE);
                tracing::warn!(guest = %self.settings.name, %key, retry_in = ?BUSY_PAUSE, "host at capacity, reconcile not started: {message}");
            }
            Err(failure) if entry == Entry::Finalize => {
                self.count(&failure);
                let deleted = self
                    .finalizing
                    .lock()
                    .expect("finalizing lock")
                    .get(key)
                    .map(|(_, deleted)| *deleted);
                let terminating = deleted.map_or(0, |d| Timestamp::now().as_second() - d);
                self.retry(
                    key,
                    &format!("finalize failed; the object stays terminating (terminating for {terminating}s): {failure}"),
                );
            }
            Err(failure) => {
                self.count(&failure);
                self.retry_blaming(key, &failure.to_string(), blame);
            }
        }
    }

    /// Ends the share's record of `key` as deleted, once reconciled.
    fn settled(&self, key: &ObjectKey) {
        if let Some(share) = &self.share {
            share.gone.lock().expect("gone lock").remove(key);
        }
    }

    /// Hands `key` over to the member the sharder moves it to: removes its shard and drain
    /// labels from `object` as cached, after which this replica no longer reconciles it. Called
    /// by the one worker holding the key, so no reconcile of it runs here meanwhile. The write
    /// names the cached version: a stale copy (the key handed over already, and maybe assigned
    /// to another member) never removes the new member's label. A failed write is retried
    /// with the key's backoff, from the cache as it is then.
    async fn hand_over(
        &self,
        share: &Share,
        kind: &GroupVersionKind,
        key: &ObjectKey,
        object: &CachedObject,
    ) {
        share
            .released
            .lock()
            .expect("released lock")
            .insert(key.clone());
        let labels = [share.label.as_str(), share.drain.as_str()];
        match self.backend.remove_labels(kind, object, &labels).await {
            Ok(true) => {
                share.handovers.fetch_add(1, Ordering::Relaxed);
                self.note_finalizing(key, None, None);
                self.queue.forget(key);
                tracing::debug!(guest = %self.settings.name, %key, "handed over");
            }
            // Deleted meanwhile: still this replica's, to reconcile as gone.
            Ok(false) => {
                share.released.lock().expect("released lock").remove(key);
                self.queue.forget(key);
            }
            Err(error) => {
                share.released.lock().expect("released lock").remove(key);
                let delay = self.queue.add_rate_limited(key.clone(), Reason::Requeue);
                tracing::warn!(guest = %self.settings.name, %key, retry_in = ?delay, %error, "handing the key over failed");
            }
        }
    }

    /// What the sharder of this guest did on this replica.
    pub fn shard_stats(&self) -> &ShardStats {
        &self.shard_stats
    }

    /// Keys handed over to other members so far; `None` unless sharded.
    pub fn handovers(&self) -> Option<u64> {
        self.share
            .as_ref()
            .map(|s| s.handovers.load(Ordering::Relaxed))
    }

    /// The member name this replica reconciles under, when sharded.
    pub fn member(&self) -> Option<&str> {
        self.share.as_deref().map(|s| s.member.as_str())
    }

    /// Counts a failure by its kind.
    fn count(&self, failure: &Failure) {
        let counter = match failure {
            Failure::Trap(_) => &self.counters.traps,
            Failure::OutOfMemory(_) => &self.counters.out_of_memory,
            Failure::Timeout(_) => &self.counters.timeouts,
            _ => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Notes whether `object`, the primary with `key`, is being deleted and waits for the
    /// guest's `finalizer`.
    fn note_finalizing(
        &self,
        key: &ObjectKey,
        object: Option<&CachedObject>,
        finalizer: Option<&str>,
    ) {
        let deleted = object
            .filter(|o| finalizer.is_some() && self.holds(o, finalizer))
            .and_then(|o| Some((o.uid().map(str::to_owned), o.deleted_at()?)));
        let mut finalizing = self.finalizing.lock().expect("finalizing lock");
        match deleted {
            Some((uid, at)) => {
                let entry = finalizing.entry(key.clone()).or_insert((uid.clone(), at));
                if entry.0 != uid {
                    *entry = (uid, at);
                }
            }
            None => {
                finalizing.remove(key);
            }
        }
    }

    /// Retries `key` with backoff after a write the host made for it failed: the cluster's
    /// failure.
    fn retry(&self, key: &ObjectKey, message: &str) {
        self.retry_blaming(key, message, Blame::Cluster);
    }

    /// Retries `key` with backoff after a failure that is `blame`'s.
    fn retry_blaming(&self, key: &ObjectKey, message: &str, blame: Blame) {
        self.counters.failed.fetch_add(1, Ordering::Relaxed);
        let delay = self.queue.add_rate_limited(key.clone(), Reason::Requeue);
        tracing::warn!(guest = %self.settings.name, %key, retry_in = ?delay, "reconcile failed: {message}");
        self.counters
            .streak
            .failed(&self.settings.name, key, (message, blame), || self.held());
    }

    /// Whether the guest has a finalizer, or retired one, to keep on its objects.
    fn finalizes(&self, finalizer: Option<&str>) -> bool {
        finalizer.is_some() || !self.settings.retired_finalizers.is_empty()
    }

    /// Whether `object` carries the guest's `finalizer` or one it retired.
    fn holds(&self, object: &CachedObject, finalizer: Option<&str>) -> bool {
        object.finalizers().any(|f| self.is_ours(f, finalizer))
    }

    fn is_ours(&self, candidate: &str, finalizer: Option<&str>) -> bool {
        Some(candidate) == finalizer
            || self
                .settings
                .retired_finalizers
                .iter()
                .any(|r| r == candidate)
    }

    /// The finalizers `object` is to carry while it lives: its own without retired ones, and
    /// the guest's `finalizer`.
    fn wanted_finalizers(&self, object: &CachedObject, finalizer: Option<&str>) -> Vec<String> {
        let retired = &self.settings.retired_finalizers;
        let mut wanted: Vec<String> = object
            .finalizers()
            .filter(|f| !retired.iter().any(|r| r == f))
            .map(str::to_owned)
            .collect();
        if let Some(finalizer) = finalizer
            && !wanted.iter().any(|f| f == finalizer)
        {
            wanted.push(finalizer.to_owned());
        }
        wanted
    }

    /// Removes the guest's finalizer and those it retired from `object`.
    async fn release(
        &self,
        object: &CachedObject,
        finalizer: Option<&str>,
    ) -> Result<(), CallError> {
        let kept: Vec<&str> = object
            .finalizers()
            .filter(|f| !self.is_ours(f, finalizer))
            .collect();
        let kind = &self.module().metadata.primary.kind;
        self.backend.set_finalizers(kind, object, &kept).await
    }

    /// Whether the guest's primary selection has a label selector, which an object can leave.
    fn selects_by_label(&self) -> bool {
        self.declared.iter().any(|s| s.selector.is_some())
    }

    /// Releases the object with `key`, gone from the cache, if it still exists in a namespace
    /// the guest runs in, outside its label selector, carrying its finalizers: it is no longer
    /// the guest's, and no `finalize` is called for it.
    async fn release_unselected(
        &self,
        key: &ObjectKey,
        finalizer: Option<&str>,
    ) -> Result<(), CallError> {
        let scoped: Vec<&Selection> = self
            .declared
            .iter()
            .filter(|s| {
                s.namespace.is_none() || key.namespace.is_none() || s.namespace == key.namespace
            })
            .collect();
        if scoped.is_empty() {
            return Ok(());
        }
        let kind = &self.module().metadata.primary.kind;
        let live = self
            .backend
            .live(kind, key.namespace.as_deref(), &key.name)
            .await?;
        let Some(live) = live else {
            return Ok(());
        };
        if scoped.iter().any(|s| s.selects(&live)) || !self.holds(&live, finalizer) {
            return Ok(());
        }
        tracing::info!(guest = %self.settings.name, %key, "object left the guest's selection; removing its finalizer without finalize");
        self.release(&live, finalizer).await
    }

    /// Queues, as deleted, each object outside the guest's label-selected primary selection
    /// that carries its finalizers: it left the selection while no host watched it, and its
    /// reconcile releases it. Runs once the primaries have listed; a failed list is retried.
    async fn sweep_unselected(self: Arc<Self>) {
        for view in &self.primaries {
            tokio::select! {
                () = view.informer().synced() => {}
                () = self.stop.cancelled() => return,
            }
        }
        let metadata = self.module().metadata.clone();
        let finalizer = metadata.finalizer.as_deref();
        for selection in &self.declared {
            loop {
                let swept = self
                    .backend
                    .each_metadata(&selection.kind, selection.namespace.as_deref(), |meta| {
                        let carries = meta
                            .finalizers
                            .iter()
                            .flatten()
                            .any(|f| self.is_ours(f, finalizer));
                        let labels = meta.labels.unwrap_or_default();
                        let selected = selection
                            .selector
                            .as_ref()
                            .is_none_or(|s| s.matches(&labels));
                        // Sharded, each member sweeps the objects labelled for it.
                        let ours = self
                            .share
                            .as_ref()
                            .is_none_or(|s| labels.get(&s.label) == Some(&s.member));
                        if carries
                            && !selected
                            && ours
                            && let Some(name) = meta.name
                        {
                            let key = ObjectKey {
                                namespace: meta.namespace,
                                name,
                            };
                            let mut gone = self.gone_holding.lock().expect("gone lock");
                            gone.insert(key.clone());
                            drop(gone);
                            if let Some(share) = &self.share {
                                share.gone.lock().expect("gone lock").insert(key.clone());
                            }
                            self.queue.add(key, Reason::Deleted);
                        }
                    })
                    .await;
                let Err(error) = swept else { break };
                tracing::warn!(guest = %self.settings.name, %error, retry_in = ?SWEEP_RETRY, "listing objects outside the selection that carry the guest's finalizer");
                tokio::select! {
                    () = tokio::time::sleep(SWEEP_RETRY) => {}
                    () = self.stop.cancelled() => return,
                }
            }
        }
    }

    /// How many primary objects the guest holds: on a sharded replica, its share.
    pub fn held(&self) -> usize {
        self.primaries.iter().map(View::count).sum()
    }
}

/// Queues `key`: in the low-priority lane when it comes of an `initial` list, so that real
/// changes are handled first.
fn enqueue<K, R>(queue: &WorkQueue<K, R>, initial: bool, key: K, reason: R)
where
    K: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
    R: Clone + Send + Sync + 'static,
{
    if initial {
        queue.add_low(key, reason);
    } else {
        queue.add(key, reason);
    }
}

/// Queues `key` for `change` of a primary or owned object: as [`enqueue`], but a change the
/// guest's field `manager` applied itself, which the watch shows while the reconcile that applied
/// it runs, keeps that reconcile's lane ([`WorkQueue::add_own`]): the backlog's own writes do
/// not turn its keys into changes.
fn enqueue_change(
    queue: &WorkQueue<ObjectKey, Reason>,
    change: &Change,
    manager: &str,
    key: ObjectKey,
    reason: Reason,
) {
    if !change.initial && change.applied_by(manager) {
        queue.add_own(key, reason);
    } else {
        enqueue(queue, change.initial, key, reason);
    }
}

/// The selections a guest reads, each in the namespaces it runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Plan {
    /// Its primary kind and selector, once per namespace.
    primaries: Vec<Selection>,
    /// Its owned kinds, each once per namespace.
    owned: Vec<Selection>,
    /// Its watches as declared, with their mappings.
    watched: Vec<(Selection, Mapping)>,
}

impl Plan {
    /// The plan of `metadata` run in the `configured` namespaces (see [`Metadata::namespaces`]),
    /// its primary and owned kinds narrowed to `share`'s label if sharded.
    fn new(metadata: &Metadata, configured: &[String], share: Option<&Share>) -> Self {
        let namespaces = metadata.namespaces(configured);
        let in_each_namespace = |kind: &GroupVersionKind, selector: Option<&LabelSelector>| {
            let selector = match share {
                Some(share) => Some(
                    selector
                        .cloned()
                        .unwrap_or_default()
                        .and_equal(&share.label, &share.member),
                ),
                None => selector.cloned(),
            };
            namespaces
                .iter()
                .map(|namespace| Selection {
                    kind: kind.clone(),
                    namespace: namespace.clone(),
                    selector: selector.clone(),
                })
                .collect::<Vec<_>>()
        };
        Self {
            primaries: in_each_namespace(
                &metadata.primary.kind,
                metadata.primary.selector.as_ref(),
            ),
            owned: metadata
                .owns
                .iter()
                .flat_map(|kind| in_each_namespace(kind, None))
                .collect(),
            watched: metadata
                .watches
                .iter()
                .map(|w| (w.selection.clone(), w.mapping.clone()))
                .collect(),
        }
    }

    /// Every selection: primaries, then owned, then watched.
    fn all(&self) -> Vec<Selection> {
        self.primaries
            .iter()
            .chain(&self.owned)
            .chain(self.watched.iter().map(|(s, _)| s))
            .cloned()
            .collect()
    }
}

/// Queues every primary key, low, each period stretched or shrunk at random by up to 10% (as
/// controller-runtime jitters its sync period), so that guests and replicas with one period do
/// not resync in step.
async fn resync(controller: Weak<Controller>, stop: CancellationToken, period: Duration) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(jittered(period, RandomState::new().hash_one(0u8))) => {}
            () = stop.cancelled() => return,
        }
        let Some(controller) = controller.upgrade() else {
            return;
        };
        for view in &controller.primaries {
            for key in view.keys() {
                controller.queue.add_low(key, Reason::Resync);
            }
        }
    }
}

/// `period` times a factor in [0.9, 1.1] that `random` picks.
fn jittered(period: Duration, random: u64) -> Duration {
    let unit = (random >> 11) as f64 / (1u64 << 53) as f64;
    period.mul_f64(0.9 + unit / 5.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wasm::declaration::Watch;

    fn selection(kind: &GroupVersionKind, namespace: Option<&str>) -> Selection {
        Selection {
            kind: kind.clone(),
            namespace: namespace.map(str::to_owned),
            selector: None,
        }
    }

    fn metadata() -> Metadata {
        let podset = GroupVersionKind::gvk("kubewasm.dev", "v1", "PodSet");
        Metadata {
            name: "podset".into(),
            primary: Selection {
                selector: Some("tier=web".parse().unwrap()),
                ..selection(&podset, Some("declared"))
            },
            owns: vec![GroupVersionKind::gvk("", "v1", "Pod")],
            watches: vec![Watch {
                selection: selection(&GroupVersionKind::gvk("", "v1", "Node"), None),
                mapping: Mapping::Guest,
            }],
            finalizer: None,
            max_concurrency: 2,
            resync: None,
            reconcile_on: crate::wasm::bindings::types::Changes::ANY,
        }
    }

    fn pod(version: &str) -> Arc<CachedObject> {
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "a", "resourceVersion": version},
        });
        Arc::new(CachedObject::new(serde_json::from_value(pod).unwrap()))
    }

    #[test]
    fn a_watched_object_changed_many_times_is_mapped_once_with_its_first_and_last_state() {
        let states: Vec<_> = (1..=1000).map(|v| pod(&v.to_string())).collect();
        let mut unmapped = Unmapped {
            states: Vec::new(),
            initial: true,
        };
        unmapped.note(&Change {
            old: None,
            new: Some(states[0].clone()),
            initial: true,
        });
        for pair in states.windows(2) {
            unmapped.note(&Change {
                old: Some(pair[0].clone()),
                new: Some(pair[1].clone()),
                initial: false,
            });
        }
        unmapped.note(&Change {
            old: states.last().cloned(),
            new: None,
            initial: false,
        });
        let versions: Vec<_> = unmapped.states.iter().map(|s| s.version()).collect();
        assert_eq!(versions, [Some(1), Some(1000)]);
        assert!(!unmapped.initial, "a real change among them is not initial");
    }

    #[test]
    fn resync_periods_are_jittered_by_up_to_ten_percent() {
        let period = Duration::from_secs(100);
        assert_eq!(jittered(period, 0), Duration::from_secs(90));
        assert_eq!(jittered(period, 1 << 63), Duration::from_secs(100));
        let longest = jittered(period, u64::MAX);
        assert!(longest <= Duration::from_secs(110) && longest > Duration::from_secs(109));
    }

    #[test]
    fn a_plan_runs_primaries_and_owned_kinds_in_each_configured_namespace() {
        let metadata = metadata();
        let pod = GroupVersionKind::gvk("", "v1", "Pod");
        let plan = Plan::new(&metadata, &["a".into(), "b".into()], None);
        let primaries: Vec<_> = plan
            .primaries
            .iter()
            .map(|s| {
                (
                    s.namespace.as_deref(),
                    s.selector.as_ref().map(ToString::to_string),
                )
            })
            .collect();
        assert_eq!(
            primaries,
            [
                (Some("a"), Some("tier=web".into())),
                (Some("b"), Some("tier=web".into()))
            ]
        );
        assert_eq!(
            plan.owned,
            [selection(&pod, Some("a")), selection(&pod, Some("b"))]
        );
        // Watches keep the namespace they declare.
        assert_eq!(
            plan.watched,
            [(metadata.watches[0].selection.clone(), Mapping::Guest)]
        );
        assert_eq!(plan.all().len(), 5);
    }

    #[test]
    fn without_configured_namespaces_a_plan_uses_the_declared_one() {
        let plan = Plan::new(&metadata(), &[], None);
        assert_eq!(plan.primaries.len(), 1);
        assert_eq!(plan.primaries[0].namespace.as_deref(), Some("declared"));
        assert_eq!(plan.owned[0].namespace.as_deref(), Some("declared"));
        let all = plan.all();
        assert_eq!(
            all.iter().map(|s| s.kind.kind.as_str()).collect::<Vec<_>>(),
            ["PodSet", "Pod", "Node"]
        );
    }
}
