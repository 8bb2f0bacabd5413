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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::cluster::cache::{CachedObject, ObjectKey};
use crate::cluster::gate::Gate;
use crate::cluster::selection::Selection;
use crate::cluster::view::View;
use crate::cluster::watch::{Informer, Subscription};
use crate::config::{DropRule, Grant, QueueConfig};
use crate::control::apply::ClusterBackend;
use crate::control::finalizer::{self, FinalizerError, Step};
use crate::control::queue::WorkQueue;
use crate::control::tally::{Blame, Counters, Tally};
use crate::shard::roster::Entry as Announcement;
use crate::shard::share::Share;
use crate::shard::stats::ShardStats;
use crate::wasm::backend::Scope;
use crate::wasm::bindings::types::{self, Reason};
use crate::wasm::dispatch::{self, Entry, Failure, Outcome};
use crate::wasm::env::{CallTimes, GuestEnv};
use crate::wasm::limits::CallLimits;
use crate::wasm::module::Module;
use crate::wasm::runtime::Runtime;

mod finalizers;
mod handover;
mod mapping;
mod wiring;

pub use finalizers::Finalizing;

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
    pub limits: CallLimits,
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
    /// Each owned kind in each namespace it runs in.
    owned: Vec<View>,
    /// Every informer the guest reads: workers start once all of them have listed.
    readable: Vec<Arc<Informer>>,
    subscriptions: Mutex<Vec<Subscription>>,
    /// Cancelled when the controller shuts down; ends its resync task.
    stop: CancellationToken,
    /// Watched objects waiting for the guest's `map-keys`: each at most once however often it
    /// changed, mapped by at most `max_concurrency` calls at once, dropped at shutdown.
    unmapped: WorkQueue<mapping::WatchedKey>,
    /// The states to map of each queued watched object.
    unmapped_states: Mutex<HashMap<mapping::WatchedKey, mapping::Unmapped>>,
    counters: Counters,
    /// Objects being deleted that still carry the guest's finalizer, with their uid and the Unix
    /// second of their deletionTimestamp: each key from when it is processed so until it is
    /// processed otherwise. An object that left the guest's selection is no longer counted.
    finalizing: Mutex<HashMap<ObjectKey, (Option<String>, i64)>>,
    /// Keys of objects that went from the cache still carrying the guest's finalizers: each may
    /// have left a label selector, and is looked up live once. Filled only when the primary
    /// selection has a label selector.
    gone_holding: Arc<Mutex<HashSet<ObjectKey>>>,
    /// Open while this replica may reconcile; when sharded, once the guest is announced.
    gate: Gate,
    /// When sharded: the guest's announcement in its ring, left once the workers end.
    entry: Mutex<Option<Announcement>>,
    /// This replica's share of the keys, when sharded.
    share: Option<Arc<Share>>,
    /// The primary selections as declared: without the share's label.
    declared: Vec<Selection>,
    /// What the sharder did, while this replica shards the guest.
    shard_stats: Arc<ShardStats>,
}

impl Controller {
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
            shard_labels_failing: self.shard_stats.failing(),
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
        // The workers have ended: the guest may be withdrawn, and its keys moved at once,
        // with the children this replica made.
        let entry = self.entry.lock().expect("entry lock").take();
        if let Some(entry) = entry {
            entry.leave(&self.children_held());
        }
        self.subscriptions
            .lock()
            .expect("subscriptions lock")
            .clear();
    }

    /// The cached primary object with this key.
    pub(super) fn primary(&self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
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
        self.queue.serve(self.settings.max_concurrency as usize);
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

    /// Processes one dequeued key: claims it and waits for its children (sharded), takes the
    /// finalizer protocol's step before the call, calls the guest and settles how the key goes
    /// on.
    async fn process(&self, key: &ObjectKey, reason: Reason) {
        let module = self.module();
        let kind = &module.metadata.primary.kind;
        let cached = self.primary(key);
        if !self.claim(kind, key, cached.as_deref()).await
            || !self.children_cached(key, cached.as_deref(), reason)
        {
            return;
        }
        let finalizer = module.metadata.finalizer.as_deref();
        self.note_finalizing(key, cached.as_deref(), finalizer);
        let gone_holding = self.gone_holding.lock().expect("gone lock").remove(key);
        let step = finalizer::plan(cached.as_deref(), self.ours(finalizer), gone_holding);
        let (entry, object) = match self.prepare(&module, key, step, cached).await {
            Ok(Some(prepared)) => prepared,
            Ok(None) => {
                self.counters.succeeded.fetch_add(1, Ordering::Relaxed);
                self.queue.forget(key);
                return;
            }
            Err(error) => return self.retry(key, &error),
        };
        let (result, blame) = self
            .call(&module, key, reason, entry, object.as_ref())
            .await;
        match result {
            Ok(outcome) => {
                let settled = self.succeeded(key, entry, object, finalizer, outcome).await;
                if let Err(error) = settled {
                    self.retry(key, &error);
                }
            }
            Err(failure) => self.failed(key, entry, failure, blame),
        }
    }

    /// Takes `step` for `key`, cached as `object`: returns the entry to call and the object to
    /// call it with, or `None` when the guest is not to be called (the object is let go).
    async fn prepare(
        &self,
        module: &Module,
        key: &ObjectKey,
        step: Step,
        object: Option<Arc<CachedObject>>,
    ) -> Result<Option<(Entry, Option<Arc<CachedObject>>)>, FinalizerError> {
        let kind = &module.metadata.primary.kind;
        let finalizer = module.metadata.finalizer.as_deref();
        match (step, &object) {
            (Step::LetGo { release }, Some(cached)) => {
                // Not the guest's to finalize; a retired finalizer of a guest that no longer
                // declares one goes without `finalize`.
                if release {
                    let released = self.release(cached, finalizer).await;
                    released.map_err(|source| FinalizerError::LetGo { source })?;
                }
                return Ok(None);
            }
            (Step::Finalize, _) => return Ok(Some((Entry::Finalize, object))),
            (Step::Add(wanted), Some(cached)) => {
                let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
                let set = self.backend.set_finalizers(kind, cached, &wanted).await;
                set.map_err(|source| FinalizerError::Add {
                    finalizer: finalizer.map(str::to_owned),
                    source,
                })?;
                // The guest sees the object with its finalizer, as recorded by the write.
                return Ok(Some((Entry::Reconcile, self.primary(key).or(object))));
            }
            (Step::ReleaseUnselected, _) => {
                if let Err(source) = self.release_unselected(key, finalizer).await {
                    self.gone_holding
                        .lock()
                        .expect("gone lock")
                        .insert(key.clone());
                    return Err(FinalizerError::ReleaseUnselected { source });
                }
            }
            _ => {}
        }
        Ok(Some((Entry::Reconcile, object)))
    }

    /// Calls the guest's `entry` for `key`, with `object` as cached.
    async fn call(
        &self,
        module: &Module,
        key: &ObjectKey,
        reason: Reason,
        entry: Entry,
        object: Option<&Arc<CachedObject>>,
    ) -> (Result<Outcome, Failure>, Blame) {
        let request = types::Request {
            key: types::ObjectKey {
                namespace: key.namespace.clone(),
                name: key.name.clone(),
            },
            reason,
            attempt: self.queue.num_requeues(key) + 1,
            object: object.map(|o| o.json().to_string()),
        };
        let scope = Scope {
            kind: module.metadata.primary.kind.clone(),
            namespace: key.namespace.clone(),
            name: key.name.clone(),
            uid: object.and_then(|o| o.uid().map(str::to_owned)),
            deleting: object.is_some_and(|o| o.deleting()),
        };
        let limits = &self.settings.limits;
        dispatch::call(
            &self.runtime,
            module,
            &self.env,
            limits,
            scope,
            entry,
            request,
        )
        .await
    }

    /// Settles a call that returned `outcome`. After `finalize`, the guest's finalizers are
    /// removed from the object as `finalize` left it, where the guest's own writes are
    /// recorded; from the one `finalize` was given if the cache no longer holds it (it left the
    /// selection) or holds another object of that name.
    async fn succeeded(
        &self,
        key: &ObjectKey,
        entry: Entry,
        object: Option<Arc<CachedObject>>,
        finalizer: Option<&str>,
        outcome: Outcome,
    ) -> Result<(), FinalizerError> {
        if let Outcome::RequeueAfter(delay) = outcome {
            self.counters.requeued.fetch_add(1, Ordering::Relaxed);
            self.counters.streak.succeeded(&self.settings.name);
            self.queue.forget(key);
            self.queue.add_after(key.clone(), Reason::Requeue, delay);
            return Ok(());
        }
        if entry == Entry::Finalize
            && let Some(finalized) = &object
        {
            let fresh = self.primary(key).filter(|f| f.uid() == finalized.uid());
            let object = fresh.unwrap_or_else(|| finalized.clone());
            if self.ours(finalizer).held_by(&object) {
                let released = self.release(&object, finalizer).await;
                released.map_err(|source| FinalizerError::Remove {
                    finalizer: finalizer.map(str::to_owned),
                    source,
                })?;
                self.note_finalizing(key, None, None);
            }
        }
        self.counters.succeeded.fetch_add(1, Ordering::Relaxed);
        self.counters.streak.succeeded(&self.settings.name);
        self.queue.forget(key);
        self.settled(key);
        Ok(())
    }

    /// Settles a call that failed: a permanent failure waits for a change, a busy host is
    /// retried without counting, anything else is retried with backoff.
    fn failed(&self, key: &ObjectKey, entry: Entry, failure: Failure, blame: Blame) {
        match failure {
            Failure::Permanent(message) => {
                self.counters.failed.fetch_add(1, Ordering::Relaxed);
                self.counters
                    .streak
                    .failed(&self.settings.name, key, (&message, blame), || self.held());
                tracing::error!(guest = %self.settings.name, %key, %message, "reconcile failed permanently; waiting for a change");
                self.queue.forget(key);
                self.settled(key);
            }
            Failure::Busy(message) => {
                // The guest did nothing wrong: retried without counting a failure or an attempt.
                self.queue
                    .add_after(key.clone(), Reason::Requeue, BUSY_PAUSE);
                tracing::warn!(guest = %self.settings.name, %key, retry_in = ?BUSY_PAUSE, "host at capacity, reconcile not started: {message}");
            }
            failure if entry == Entry::Finalize => {
                self.count(&failure);
                let terminating = self.terminating(key);
                let error = FinalizerError::Finalize {
                    terminating,
                    source: failure,
                };
                self.retry(key, &error);
            }
            failure => {
                self.count(&failure);
                self.retry_blaming(key, &failure.to_string(), blame);
            }
        }
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

    /// Retries `key` with backoff after a step of the finalizer protocol failed: a write the
    /// host made for it, counted as the cluster's failure.
    fn retry(&self, key: &ObjectKey, error: &FinalizerError) {
        self.retry_blaming(key, &error.to_string(), Blame::Cluster);
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

    /// How many primary objects the guest holds: on a sharded replica, its share.
    pub fn held(&self) -> usize {
        self.primaries.iter().map(View::count).sum()
    }
}
