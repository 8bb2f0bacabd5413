//! How a controller is put together: the selections it reads in each namespace, the views and
//! informers behind them, its writer and environment, the triggers that queue its keys, and
//! the tasks it runs (workers, `map-keys`, the sweep of objects that left its selection, the
//! resync and, on a sharded replica that leads, the sharder).

use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use kube::api::GroupVersionKind;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Controller, Settings};
use crate::cluster::cache::{Change, ObjectKey};
use crate::cluster::gate::Gate;
use crate::cluster::resources::Resources;
use crate::cluster::selection::Selection;
use crate::cluster::selector::LabelSelector;
use crate::cluster::view::{Servers, View};
use crate::cluster::watch::{Informer, Informers};
use crate::config::DropRule;
use crate::control::apply::{self, ClusterBackend};
use crate::control::queue::WorkQueue;
use crate::control::replica::Replica;
use crate::control::tally::Counters;
use crate::control::trigger;
use crate::shard::sharder;
use crate::shard::share::Share;
use crate::wasm::backend::Backend;
use crate::wasm::bindings::types::Reason;
use crate::wasm::declaration::{Mapping, Metadata};
use crate::wasm::env::GuestEnv;
use crate::wasm::module::Module;
use crate::wasm::permissions::Permissions;

/// The views of a guest's selections: primaries, owned kinds and watches with their mappings.
struct Views {
    primaries: Vec<View>,
    owned: Vec<View>,
    watched: Vec<(View, Mapping)>,
}

impl Views {
    /// The views of `plan`, each dropping `drops` from what it caches.
    fn new(plan: &Plan, drops: &[DropRule], informers: &Informers) -> Self {
        let all = plan.all();
        let servers = Servers::new(informers);
        let view = |selection: &Selection| {
            let transform = DropRule::transform(drops, &selection.kind);
            View::new(selection, &all, &transform, &servers)
        };
        Self {
            primaries: plan.primaries.iter().map(view).collect(),
            owned: plan.owned.iter().map(view).collect(),
            watched: plan
                .watched
                .iter()
                .map(|(selection, mapping)| (view(selection), mapping.clone()))
                .collect(),
        }
    }

    /// Every informer behind the views, once each.
    fn informers(&self) -> Vec<Arc<Informer>> {
        let mut readable: Vec<Arc<Informer>> = Vec::new();
        let watched = self.watched.iter().map(|(v, _)| v);
        for view in self.primaries.iter().chain(&self.owned).chain(watched) {
            if !readable.iter().any(|i| Arc::ptr_eq(i, view.informer())) {
                readable.push(view.informer().clone());
            }
        }
        readable
    }
}

impl Controller {
    /// Starts a guest: acquires the informers its module declares, subscribes its triggers and
    /// spawns its workers into `tasks`, which reconcile once the `replica`'s gate opens. A
    /// sharded replica reconciles only the primary objects labelled for its member, reads only
    /// the owned objects labelled so, and shards the guest's objects while it leads.
    pub fn start(
        runtime: crate::wasm::runtime::Runtime,
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
        let views = Views::new(&plan, &settings.drops, informers);
        let readable = views.informers();
        let read = (readable.clone(), plan.all());
        let backend = writer(&resources, &settings, &module, read, share.as_deref());
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
        let name = settings.name.clone();
        let controller = Arc::new(Self {
            queue: Arc::new(WorkQueue::new(settings.queue, replica.lanes.clone())),
            unmapped: WorkQueue::new(settings.queue, replica.lanes.clone()),
            settings,
            runtime,
            module: RwLock::new(module.clone()),
            env,
            backend,
            primaries: views.primaries,
            owned: views.owned.clone(),
            readable,
            subscriptions: Mutex::default(),
            stop: CancellationToken::new(),
            unmapped_states: Mutex::default(),
            counters: Counters::default(),
            finalizing: Mutex::default(),
            gone_holding: Arc::default(),
            gate: gate_of(replica),
            entry: Mutex::new(replica.sharded.as_ref().map(|s| s.roster.enter(&name))),
            share,
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
                sharded.clone(),
                controller.shard_stats.clone(),
                controller.stop.clone(),
            ));
            tasks.spawn(controller.clone().announce(replica.gate.clone()));
        }
        controller.subscribe_primaries(&module);
        let primary = module.metadata.primary.kind.clone();
        let children = controller
            .clone()
            .subscribe_children(primary, views.owned, views.watched);
        tasks.spawn(children);
        controller.spawn_tasks(tasks, &module);
        controller
    }

    /// On a sharded replica: once `joined` opens and every informer the guest reads has listed,
    /// announces the guest in its ring and opens the workers' gate once the announcement is
    /// written, so that the sharder gives this member keys only once it can reconcile them.
    async fn announce(self: Arc<Self>, joined: Gate) {
        let synced = async {
            joined.opened().await;
            for informer in &self.readable {
                informer.synced().await;
            }
        };
        tokio::select! {
            () = synced => {}
            () = self.stop.cancelled() => return,
        }
        let announced = {
            let mut entry = self.entry.lock().expect("entry lock");
            let Some(entry) = entry.as_mut() else {
                return;
            };
            entry.ready();
            entry.announced()
        };
        tokio::select! {
            () = announced.opened() => {
                if let Some(share) = &self.share {
                    share.open();
                }
                self.gate.let_through();
            }
            () = self.stop.cancelled() => {}
        }
    }

    /// Subscribes the trigger of each primary view: a change queues its key, a drained object
    /// queues its handover, and an object that leaves the selection carrying the guest's
    /// finalizers is noted to be looked up live.
    fn subscribe_primaries(&self, module: &Module) {
        let updates = trigger::Updates {
            on: module.metadata.reconcile_on,
            finalizer: module.metadata.finalizer.clone(),
        };
        let watch_leaving = self.selects_by_label();
        let ours = self.finalizers();
        let mut subscriptions = Vec::new();
        for view in &self.primaries {
            let queue = self.queue.clone();
            let updates = updates.clone();
            let gone_holding = self.gone_holding.clone();
            let ours = ours.clone();
            let selection = view.selection().clone();
            let share = self.share.clone();
            let manager = apply::field_manager(&self.settings.name);
            subscriptions.push(view.subscribe(Arc::new(move |change: &Change| {
                if let Some(share) = &share {
                    if let Some(new) = &change.new
                        && share.draining(new)
                    {
                        // Asked to hand the key over: the next worker to take it does.
                        queue.add(new.key(), Reason::Changed);
                        return;
                    }
                    if share.left(change, &selection) == Some(false) {
                        return;
                    }
                    if share.arrived(change) {
                        // Moved here from another member: no real change goes after it.
                        if let Some((key, reason)) = trigger::primary(change, &updates) {
                            queue.add_low(key, reason);
                        }
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
        *self.subscriptions.lock().expect("subscriptions lock") = subscriptions;
    }

    /// Spawns the workers, a `map-keys` task beside each if the guest maps keys, the sweep of
    /// objects outside a label selector if the guest finalizes, and the resync.
    fn spawn_tasks(self: &Arc<Self>, tasks: &TaskTracker, module: &Module) {
        let maps_keys = module
            .metadata
            .watches
            .iter()
            .any(|w| w.mapping == Mapping::Guest);
        for _ in 0..self.settings.max_concurrency {
            let worker = self.clone();
            tasks.spawn(async move { worker.work().await });
            if maps_keys {
                let mapper = self.clone();
                tasks.spawn(async move { mapper.map().await });
            }
        }
        if self.ours(module.metadata.finalizer.as_deref()).any() && self.selects_by_label() {
            tasks.spawn(self.clone().sweep_unselected());
        }
        if let Some(period) = self.settings.resync {
            let weak = Arc::downgrade(self);
            tasks.spawn(resync(weak, self.stop.clone(), period));
        }
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
}

/// The writer of the guest named in `settings`, reading its selections through their
/// informers (`read`); sharded, it labels what the guest creates for `share`'s member.
fn writer(
    resources: &Arc<Resources>,
    settings: &Settings,
    module: &Module,
    read: (Vec<Arc<Informer>>, Vec<Selection>),
    share: Option<&Share>,
) -> Arc<ClusterBackend> {
    Arc::new(ClusterBackend::new(
        resources.clone(),
        &settings.name,
        read,
        settings.limits.host_call_timeout,
        share.map(|s| {
            let primary = module.metadata.primary.kind.clone();
            (s.label().to_owned(), s.member().to_owned(), primary)
        }),
    ))
}

/// The gate of a controller's workers: the `replica`'s own, or, when sharded, one of the
/// controller's, opened once its guest is announced (see [`Controller::announce`]).
fn gate_of(replica: &Replica) -> Gate {
    match &replica.sharded {
        Some(_) => Gate::closed(),
        None => replica.gate.clone(),
    }
}

/// Queues `key`: in the low-priority lane when it comes of an `initial` list, so that real
/// changes are handled first.
pub(super) fn enqueue<K, R>(queue: &WorkQueue<K, R>, initial: bool, key: K, reason: R)
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
                Some(share) => Some(share.narrow(selector)),
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
