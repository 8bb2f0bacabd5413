//! Controller objects: the host watches WasmController objects and runs each one's module as a
//! guest, with the guarantees of file reload (see [`crate::manage::host`]): a module is fetched,
//! compiled and validated while the running one keeps running, a bad one is refused and the
//! running one kept, and a swap loses no key.
//!
//! Objects are handled side by side, each one at a time, when it comes, goes or changes other
//! than in its status, when a failed fetch is retried (a transient failure, such as a registry down, with
//! backoff from 1 s to 5 min) and every poll interval, when its source is read again (a tag
//! resolved again) and a changed module rolled out. Each transition is an Event on the object
//! (a refusal retried is recorded again only when it says something new), and its status says
//! what runs: conditions `Ready`, `Progressing` and `Degraded`, the digest, the contract and the
//! declaration, the revisions that ran (see [`crate::manage::revisions`]) and, every few
//! seconds while they change, the reconcile counters and the last error. Deleting the object, or
//! pausing it, unloads its guest.
//!
//! Automatic rollback, unless the spec turns it off: a new revision whose reconciles fail too
//! often too soon is replaced by the one that ran before it, and a module that cannot be fetched
//! or loaded while nothing runs for the object (after a restart, say) is replaced by the last
//! good revision its status names, read from the module store or pulled by digest. Either is a
//! Warning Event and a `Degraded` condition naming the bad digest. A new revision's probation
//! survives a restart or failover of the host: it is timed from the start status records. When
//! the last good revision cannot be run, the failing one runs on, `Degraded` says why
//! (`RollbackFailed`), and the rollback is retried.
//!
//! A standby fetches and loads every object's module, but writes no status and no Event: the
//! leader does. Once the host's gate opens every object is handled again, which writes its
//! status as this replica runs it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::runtime::watcher;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::cluster::gate::Gate;
use crate::cluster::leader;
use crate::config::controller::{self, ControllerSpec, ControllersConfig};
use crate::config::resource::{Declaration, LastError, Reconciles, WasmControllerStatus};
use crate::config::{Config, ModuleConfig, QueueConfig, Source};
use crate::control::apply::event_name;
use crate::control::queue::{Lanes, WorkQueue};
use crate::control::tally::Tally;
use crate::manage::refusal::Refusal;
use crate::manage::revisions::{self, History, Probation, Revision};
use crate::manage::sources::{Fetched, Sources};
use crate::wasm::declaration::Mapping;
use crate::wasm::module::Module;
use crate::wasm::module_store::ModuleStore;
use crate::wasm::oci::{Registries, RegistrySettings};

/// The field manager of the status the host writes.
const FIELD_MANAGER: &str = "kubewasm-host";
/// The field manager of the reconcile counters and last error in status.
const TALLY_MANAGER: &str = "kubewasm-host-tally";
/// How often running guests are checked for a failing new revision.
const CHECK_EVERY: Duration = Duration::from_secs(1);
/// How often, at most, changed reconcile counters are written to an object's status.
const TALLY_EVERY: Duration = Duration::from_secs(10);
/// Who reports the Events on controller objects.
const REPORTER: &str = "kubewasm.dev/host";
/// The retries of a failed fetch: backoff doubling from 1 s to 5 minutes per object, with no
/// shared bucket to speak of.
const RETRIES: QueueConfig = QueueConfig {
    base_delay: Duration::from_secs(1),
    max_delay: Duration::from_secs(300),
    qps: 1_000_000,
    burst: 1_000_000,
};

/// A WasmController object's namespace and name.
pub type ControllerKey = (String, String);

/// What loading a module did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loaded {
    /// The same module already ran with the same settings: nothing changed.
    Unchanged,
    /// The guest started.
    Started,
    /// The guest's module was swapped in place; every key was enqueued again.
    Swapped,
    /// The guest was drained and started again with the new declaration or settings.
    Replaced,
    /// Shutdown has begun: nothing was started.
    Stopping,
}

/// The guests of controller objects, as the host runs them.
#[async_trait]
pub trait Guests: Send + Sync {
    /// Runs `bytes` from `origin` with `config` for the object `key`, created at `created`
    /// (its claim to its controller name), in place of what runs for it; what runs then.
    async fn run(
        &self,
        key: &ControllerKey,
        created: &str,
        origin: String,
        bytes: Vec<u8>,
        config: &ModuleConfig,
    ) -> Result<(Loaded, Arc<Module>, String), Refusal>;
    /// Stops the guest of the object `key`; whether one ran.
    async fn stop(&self, key: &ControllerKey) -> bool;
    /// Whether a guest runs for the object `key`: the host stops one whose name an older
    /// object's guest claims.
    fn running(&self, key: &ControllerKey) -> bool;
    /// Asks the API server again whether the host may do all that the guest of the object
    /// `key` may; stops the guest, and says why, when it may not.
    async fn review(&self, key: &ControllerKey) -> Result<(), Refusal>;
    /// How the reconciles of the object `key`'s guest ended, if one runs.
    fn tally(&self, key: &ControllerKey) -> Option<Tally>;
    /// Counts a refused module of a controller object, by reason.
    fn refused(&self, reason: &'static str);
}

/// What runs for an object.
struct Applied {
    config: ModuleConfig,
    module: Arc<Module>,
    name: String,
    image: Option<(String, String)>,
    /// The generation of the spec it runs for.
    generation: i64,
}

impl Applied {
    /// Its revision, as status records it.
    fn revision(&self) -> Revision {
        let module_digest = format!("sha256:{}", self.module.digest);
        Revision {
            digest: self
                .image
                .as_ref()
                .map_or_else(|| module_digest.clone(), |(_, digest)| digest.clone()),
            image: self.image.as_ref().map(|(pinned, _)| pinned.clone()),
            module_digest,
            started: String::new(),
            replaced: None,
            reason: None,
            message: None,
        }
    }
}

/// What the host knows of one object.
#[derive(Default)]
struct State {
    /// The object's UID: one created again under its name starts over.
    uid: Option<String>,
    /// What runs for it.
    applied: Option<Applied>,
    /// Its revisions, read from its status when first seen.
    history: History,
    /// The probation of the revision running, while it is new.
    probation: Option<Probation>,
    /// The counters last written to its status, and when.
    tally_written: Option<(WasmControllerStatus, Instant)>,
    /// When its guest's last error was first seen, and the error.
    last_error: Option<(String, String)>,
    /// The module last refused for good (`sha256:...`) and the generation of the spec: the
    /// same module is not fetched, loaded and reported again until the spec changes.
    refused: Option<(String, i64)>,
    /// The failing module (`sha256:...`) and spec generation whose rollback failed for good: it
    /// runs on, and the rollback is not tried again until either changes.
    rollback_failed: Option<(String, i64)>,
    /// The reason and message of the last Warning Event of a refusal, until the module runs:
    /// a refusal retried is not recorded again while it says the same.
    warned: Option<(String, String)>,
    /// Whether this replica read the object's history from the API server since it may act
    /// (write, judge probation): until then it acts on none.
    acting: bool,
    /// How many replaced revisions its status keeps.
    history_limit: u32,
}

/// An object being handled, its spec, and the module fetched for it.
struct Handled<'a> {
    key: &'a ControllerKey,
    object: &'a DynamicObject,
    spec: &'a ControllerSpec,
    generation: i64,
    fetched: Fetched,
}

/// What [`decide`] decides on, once an object's module is fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Facts {
    /// The digest (hex) of the module fetched.
    fetched: String,
    /// The digest (hex) of the module that runs, and whether it runs with the spec's settings.
    running: Option<(String, bool)>,
    /// Whether the fetched module was refused for good for this spec.
    refused_before: bool,
    /// Whether the fetched module was rolled back for this spec (and rollback is on).
    rolled_back: bool,
    /// Whether rolling the fetched module back failed for good for this spec.
    failed_for_good: bool,
}

/// What an object's handling does once its module is fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Nothing: it was refused for good, or runs on because its rollback failed for good.
    Skip,
    /// Roll back the running module, which is the fetched one, found failing meanwhile.
    RollBack,
    /// Run the last good revision: the fetched module was rolled back and nothing runs.
    Restore,
    /// Say that the fetched module was rolled back; another runs.
    KeepRolledBack,
    /// Run the fetched module: it is new, or runs with other settings.
    Run,
    /// It runs already as the spec says: write that it is Ready.
    Confirm,
}

/// What to do with a fetched module, given `facts`: a refusal for good stands until the spec or
/// the module changes; a module rolled back for this spec never runs again (the last good
/// revision runs instead); anything else runs, unless it runs already as the spec says.
fn decide(facts: &Facts) -> Step {
    if facts.refused_before {
        return Step::Skip;
    }
    let running_fetched = facts.running.as_ref().filter(|(d, _)| *d == facts.fetched);
    if facts.rolled_back {
        return match (&facts.running, running_fetched) {
            (_, Some(_)) if facts.failed_for_good => Step::Skip,
            (_, Some(_)) => Step::RollBack,
            (None, None) => Step::Restore,
            (Some(_), None) => Step::KeepRolledBack,
        };
    }
    match running_fetched {
        Some((_, true)) => Step::Confirm,
        _ => Step::Run,
    }
}

/// A revision run again for an object.
struct Restored {
    origin: String,
    name: String,
    /// Whether it is the one that ran last (after a restart, say), not an older one.
    resumed: bool,
}

/// Watches controller objects as `config` says and runs their modules until `closing` is
/// cancelled; writes nothing until `gate` opens.
pub fn spawn(
    guests: Weak<dyn Guests>,
    client: Client,
    config: &Config,
    store: ModuleStore,
    tasks: &TaskTracker,
    closing: CancellationToken,
    gate: Gate,
) {
    let (settings, queue) = (config.controllers.clone(), config.queue);
    let registries = Registries::new(
        RegistrySettings {
            insecure: settings.insecure_registries.clone(),
            max_module_bytes: settings.max_module_bytes,
        },
        store,
    );
    let sources = Sources::new(
        client.clone(),
        registries,
        settings.max_module_bytes,
        gate.clone(),
    );
    let objects = Arc::new(Objects {
        client,
        settings,
        queue,
        sources,
        latest: Mutex::default(),
        states: tokio::sync::Mutex::default(),
        work: WorkQueue::new(RETRIES, Lanes::new(1)),
        tasks: tasks.clone(),
        closing: closing.clone(),
        gate,
    });
    let watching = objects.clone();
    tasks.spawn(async move {
        tokio::select! {
            () = watching.watch() => {}
            () = closing.cancelled() => {}
        }
    });
    let (checking, checked, closing) = (objects.clone(), guests.clone(), objects.closing.clone());
    tasks.spawn(async move {
        tokio::select! {
            () = checking.check(checked) => {}
            () = closing.cancelled() => {}
        }
    });
    let (opening, closing) = (objects.clone(), objects.closing.clone());
    tasks.spawn(async move {
        tokio::select! {
            () = opening.gate.opened() => opening.requeue_all(),
            () = closing.cancelled() => {}
        }
    });
    if let Some(every) = objects.settings.review_interval {
        let (reviewing, reviewed, closing) =
            (objects.clone(), guests.clone(), objects.closing.clone());
        tasks.spawn(async move {
            tokio::select! {
                () = reviewing.review(reviewed, every) => {}
                () = closing.cancelled() => {}
            }
        });
    }
    let closing = objects.closing.clone();
    tasks.spawn(async move {
        tokio::select! {
            () = objects.work(guests) => {}
            () = closing.cancelled() => {}
        }
    });
}

struct Objects {
    client: Client,
    settings: ControllersConfig,
    queue: QueueConfig,
    sources: Sources,
    /// The latest version of every object seen, by key.
    latest: Mutex<BTreeMap<ControllerKey, DynamicObject>>,
    /// What runs for each object, and its revisions.
    states: tokio::sync::Mutex<HashMap<ControllerKey, State>>,
    /// The objects to handle: each one at a time, again after a change, a poll interval or
    /// its backoff after a transient failure.
    work: WorkQueue<ControllerKey>,
    tasks: TaskTracker,
    closing: CancellationToken,
    /// Status and Events wait until it opens: a standby loads modules but writes nothing.
    gate: Gate,
}

fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(controller::GROUP, controller::VERSION, controller::KIND),
        controller::PLURAL,
    )
}

impl Objects {
    fn api(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &resource())
    }

    /// Follows every controller object in the configured namespaces (or all), and queues each
    /// one that comes, goes, or changes other than in its status.
    async fn watch(&self) {
        let apis: Vec<(Option<&str>, Api<DynamicObject>)> = if self.settings.namespaces.is_empty() {
            vec![(None, Api::all_with(self.client.clone(), &resource()))]
        } else {
            self.settings
                .namespaces
                .iter()
                .map(|namespace| (Some(namespace.as_str()), self.api(namespace)))
                .collect()
        };
        let watches = apis.into_iter().map(|(namespace, api)| {
            self.follow(namespace, watcher::watcher(api, watcher::Config::default()))
        });
        futures::future::join_all(watches).await;
    }

    /// Follows the objects of one watch, of `namespace` or all.
    async fn follow(
        &self,
        namespace: Option<&str>,
        events: impl futures::Stream<Item = watcher::Result<watcher::Event<DynamicObject>>>,
    ) {
        let mut events = std::pin::pin!(events);
        let mut listing: Option<BTreeMap<ControllerKey, DynamicObject>> = None;
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Init) => listing = Some(BTreeMap::new()),
                Ok(watcher::Event::InitApply(object)) => {
                    if let (Some(listing), Some(key)) = (listing.as_mut(), key(&object)) {
                        listing.insert(key, object);
                    }
                }
                Ok(watcher::Event::InitDone) => {
                    let listed = listing.take().unwrap_or_default();
                    let mut latest = self.latest.lock().expect("objects lock");
                    let gone: Vec<ControllerKey> = latest
                        .keys()
                        .filter(|k| namespace.is_none_or(|n| k.0 == n) && !listed.contains_key(*k))
                        .cloned()
                        .collect();
                    let changed: Vec<ControllerKey> = listed
                        .iter()
                        .filter(|(k, o)| changed(latest.get(*k), o))
                        .map(|(k, _)| k.clone())
                        .collect();
                    for key in &gone {
                        latest.remove(key);
                    }
                    latest.extend(listed);
                    drop(latest);
                    for key in gone.into_iter().chain(changed) {
                        self.work.add(key, ());
                    }
                }
                Ok(watcher::Event::Apply(object)) => {
                    if let Some(key) = key(&object) {
                        let old = self
                            .latest
                            .lock()
                            .expect("objects lock")
                            .insert(key.clone(), object.clone());
                        // The host's own status writes, for one, change nothing that runs; but a
                        // standby follows the image the acting replica records.
                        let follow = !self.gate.is_open()
                            && recorded_image(old.as_ref()) != recorded_image(Some(&object));
                        if changed(old.as_ref(), &object) || follow {
                            self.work.add(key, ());
                        }
                    }
                }
                Ok(watcher::Event::Delete(object)) => {
                    if let Some(key) = key(&object) {
                        self.latest.lock().expect("objects lock").remove(&key);
                        self.work.add(key, ());
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "watching WasmController objects; retrying");
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            }
        }
    }

    /// Handles queued objects side by side, each in a task of its own, so that a slow registry
    /// holds up only the objects that name it. The queue hands an object out once at a time:
    /// queued again meanwhile, it is handled once more when it is done.
    async fn work(self: &Arc<Self>, guests: Weak<dyn Guests>) {
        self.work.serve();
        while let Some(item) = self.work.next().await {
            let Some(guests) = guests.upgrade() else {
                return;
            };
            let (objects, closing) = (self.clone(), self.closing.clone());
            self.tasks.spawn(async move {
                let done = Done(objects.clone(), item.key);
                tokio::select! {
                    () = objects.reconcile(&done.1, guests.as_ref()) => {}
                    () = closing.cancelled() => {}
                }
            });
        }
    }

    /// Queues every object seen.
    fn requeue_all(&self) {
        let keys: Vec<_> = self
            .latest
            .lock()
            .expect("objects lock")
            .keys()
            .cloned()
            .collect();
        for key in keys {
            self.work.add(key, ());
        }
    }

    /// Queues `key` again after `delay`; of two delays, the earlier one holds.
    fn after(&self, key: &ControllerKey, delay: Duration) {
        self.work.add_after(key.clone(), (), delay);
    }

    /// Handles the object `key` once: what it asks for is decided by [`decide`] on what runs,
    /// what was refused or rolled back before, and what its source holds now, then done.
    async fn reconcile(self: &Arc<Self>, key: &ControllerKey, guests: &dyn Guests) {
        let object = self.latest.lock().expect("objects lock").get(key).cloned();
        let Some(object) = object else {
            self.gone(key, guests).await;
            return;
        };
        self.adopt(key, &object, guests).await;
        self.forget_stopped(key, guests).await;
        let generation = object.metadata.generation.unwrap_or_default();
        let spec = match self.spec(key, &object) {
            Ok(spec) => spec,
            Err(refusal) => {
                self.refused(key, &object, generation, &refusal, guests)
                    .await;
                return;
            }
        };
        if spec.paused {
            if self.pause(key, &object, generation, guests).await {
                self.requeue_idle().await;
            }
            return;
        }
        self.refresh(key, &spec, generation).await;
        self.take_over(key, &spec, guests).await;
        // The check loop found the running revision failing: the last good one runs instead.
        if let Some((bad, origin)) = self.running_bad(key, &spec, generation).await
            && !self
                .roll_back(key, &object, &spec, generation, (&bad, &origin), guests)
                .await
        {
            return;
        }
        let running = self.running(key).await;
        // The running module's bytes are needed again when its settings change.
        let reusable = running
            .as_ref()
            .filter(|(_, config)| *config == spec.module)
            .map(|(digest, _)| digest.as_str());
        let recorded = object.data.pointer("/status/image").and_then(Value::as_str);
        let fetched = match self.sources.fetch(key, &spec, recorded, reusable).await {
            Ok(fetched) => fetched,
            Err(refusal) => {
                self.restore_idle(key, &object, &spec, None, &refusal, guests)
                    .await;
                self.refused(key, &object, generation, &refusal, guests)
                    .await;
                self.retry(key, &spec, &refusal);
                return;
            }
        };
        let facts = self.facts(key, &spec, generation, &fetched, running).await;
        let handled = Handled {
            key,
            object: &object,
            spec: &spec,
            generation,
            fetched,
        };
        self.take(decide(&facts), handled, guests).await;
    }

    /// Stops what ran for `key`, whose object is gone, and forgets it.
    async fn gone(&self, key: &ControllerKey, guests: &dyn Guests) {
        let stopped = guests.stop(key).await;
        self.states.lock().await.remove(key);
        self.work.forget(key);
        self.sources.forget(key);
        if stopped {
            tracing::info!(namespace = %key.0, name = %key.1, "WasmController deleted; its guest is unloaded");
            self.requeue_idle().await;
        }
    }

    /// The validated spec of `object`, or why it is refused.
    fn spec(&self, key: &ControllerKey, object: &DynamicObject) -> Result<ControllerSpec, Refusal> {
        let spec = object.data.get("spec").cloned().unwrap_or(Value::Null);
        controller::parse_spec(&spec, &key.0, &self.settings, &self.queue).map_err(|error| {
            Refusal {
                reason: match error {
                    crate::config::ConfigError::OverMaximum(_) => "OverMaximum",
                    _ => "InvalidSpec",
                },
                message: error.to_string(),
                transient: false,
            }
        })
    }

    /// The module that runs for `key` (its digest, hex) and the settings it runs with.
    async fn running(&self, key: &ControllerKey) -> Option<(String, ModuleConfig)> {
        let states = self.states.lock().await;
        let applied = states.get(key)?.applied.as_ref()?;
        Some((applied.module.digest.clone(), applied.config.clone()))
    }

    /// What [`decide`] needs to know of `key` once `fetched` was fetched for `spec`.
    async fn facts(
        &self,
        key: &ControllerKey,
        spec: &ControllerSpec,
        generation: i64,
        fetched: &Fetched,
        running: Option<(String, ModuleConfig)>,
    ) -> Facts {
        let module_digest = format!("sha256:{}", fetched.module_digest);
        let memo = Some((module_digest.clone(), generation));
        let states = self.states.lock().await;
        let state = states.get(key);
        Facts {
            fetched: fetched.module_digest.clone(),
            running: running.map(|(digest, config)| (digest, config == spec.module)),
            refused_before: state.is_some_and(|s| s.refused == memo),
            rolled_back: state.is_some_and(|s| {
                spec.rollback.enabled && s.history.is_bad(&module_digest, generation)
            }),
            failed_for_good: state.is_some_and(|s| s.rollback_failed == memo),
        }
    }

    /// Does what [`decide`] chose for the object `handled` is about.
    async fn take(self: &Arc<Self>, step: Step, handled: Handled<'_>, guests: &dyn Guests) {
        let Handled { key, spec, .. } = handled;
        if step != Step::Run && step != Step::Confirm {
            self.work.forget(key);
        }
        match step {
            Step::Skip => self.poll(key, spec),
            Step::RollBack => {
                let bad = format!("sha256:{}", handled.fetched.module_digest);
                let origin = handled.fetched.origin.clone();
                if self
                    .roll_back(
                        key,
                        handled.object,
                        spec,
                        handled.generation,
                        (&bad, &origin),
                        guests,
                    )
                    .await
                {
                    self.keep_rolled_back(&handled).await;
                }
            }
            Step::Restore => {
                if self.restore_rolled_back(&handled, guests).await {
                    self.keep_rolled_back(&handled).await;
                }
            }
            Step::KeepRolledBack => self.keep_rolled_back(&handled).await,
            Step::Run => {
                if self.run_fetched(&handled, guests).await {
                    self.confirm(handled).await;
                }
            }
            Step::Confirm => self.confirm(handled).await,
        }
    }

    /// Runs the last good revision in place of the fetched module, which was rolled back and
    /// nothing runs for it; whether the handling goes on.
    async fn restore_rolled_back(&self, handled: &Handled<'_>, guests: &dyn Guests) -> bool {
        let Handled {
            key,
            object,
            spec,
            generation,
            ..
        } = *handled;
        let bad = format!("sha256:{}", handled.fetched.module_digest);
        match self
            .restore(key, spec, generation, Some(&bad), guests)
            .await
        {
            Ok(None) => false,
            Ok(Some(restored)) => {
                let note = format!(
                    "module {} loaded as controller {} in place of {bad}, which was rolled back",
                    restored.origin, restored.name
                );
                self.event(object, false, "Loaded", "Load", &note).await;
                true
            }
            Err(refusal) => {
                self.refused(key, object, generation, &refusal, guests)
                    .await;
                self.retry(key, spec, &refusal);
                false
            }
        }
    }

    /// Says that the fetched module was rolled back for this spec and another runs, and leaves
    /// it alone until the spec or the module changes.
    async fn keep_rolled_back(self: &Arc<Self>, handled: &Handled<'_>) {
        let Handled {
            key,
            object,
            spec,
            generation,
            ..
        } = *handled;
        let why = self
            .states
            .lock()
            .await
            .get(key)
            .and_then(|s| s.history.rolled_back.as_ref())
            .map(|r| r.message.clone())
            .unwrap_or_default();
        let refusal = Refusal {
            reason: "RolledBack",
            message: format!("{} was rolled back: {why}", handled.fetched.origin),
            transient: false,
        };
        self.degraded(key, object, generation, &refusal).await;
        let module_digest = format!("sha256:{}", handled.fetched.module_digest);
        self.remember_refused(key, Some((module_digest, generation)))
            .await;
        self.poll(key, spec);
    }

    /// Runs the fetched module in place of what runs; whether it runs.
    async fn run_fetched(self: &Arc<Self>, handled: &Handled<'_>, guests: &dyn Guests) -> bool {
        let Handled {
            key,
            object,
            spec,
            generation,
            ..
        } = *handled;
        let fetched = &handled.fetched;
        let Some(bytes) = fetched.bytes.clone() else {
            unreachable!("a changed module is fetched");
        };
        let origin = fetched.origin.clone();
        let ran = guests
            .run(key, &created(object), origin, bytes, &spec.module)
            .await;
        match ran {
            Ok((Loaded::Stopping, _, _)) => false,
            Ok((loaded, module, name)) => {
                self.requeue_stopped(guests).await;
                self.loaded(object, loaded, &fetched.origin, &name).await;
                let applied = Applied {
                    config: spec.module.clone(),
                    module,
                    name,
                    image: fetched.image.clone(),
                    generation,
                };
                let tally = guests.tally(key);
                self.ran(key, applied, tally.as_ref(), spec).await;
                true
            }
            Err(refusal) => {
                let bad = format!("sha256:{}", fetched.module_digest);
                self.restore_idle(key, object, spec, Some(&bad), &refusal, guests)
                    .await;
                self.refused(key, object, generation, &refusal, guests)
                    .await;
                if !refusal.transient {
                    self.remember_refused(key, Some((bad, generation))).await;
                }
                self.retry(key, spec, &refusal);
                false
            }
        }
    }

    /// Writes that the fetched module runs (Ready), and polls its source again.
    async fn confirm(self: &Arc<Self>, handled: Handled<'_>) {
        let Handled {
            key,
            object,
            spec,
            generation,
            fetched,
        } = handled;
        self.work.forget(key);
        let mut states = self.states.lock().await;
        let mut running = None;
        if let Some(state) = states.get_mut(key)
            && let Some(applied) = &mut state.applied
        {
            // A tag may move to another manifest of the same module.
            if let Some(image) = fetched.image {
                applied.image = Some(image);
            }
            let applied = &*applied;
            let message = format!("controller {} runs {}", applied.name, applied.module.origin);
            state.warned = None;
            running = status(
                object,
                generation,
                state,
                vec![
                    condition("Ready", true, "Running", &message, generation),
                    condition("Progressing", false, "Running", &message, generation),
                    condition("Degraded", false, "Running", &message, generation),
                ],
            );
        }
        drop(states);
        self.write_status(running).await;
        self.poll(key, spec);
    }

    /// Starts the host's state of `object`, from its status, when first seen. An object of the
    /// same name that was deleted and created again while the host did not look starts over:
    /// the old one's guest is stopped and its revisions forgotten.
    async fn adopt(&self, key: &ControllerKey, object: &DynamicObject, guests: &dyn Guests) {
        let uid = object.metadata.uid.clone();
        let recreated = self
            .states
            .lock()
            .await
            .get(key)
            .is_some_and(|s| s.uid != uid);
        if recreated {
            tracing::info!(namespace = %key.0, name = %key.1, "WasmController created again; the guest of the one before is unloaded");
            guests.stop(key).await;
            self.states.lock().await.remove(key);
        }
        self.states
            .lock()
            .await
            .entry(key.clone())
            .or_insert_with(|| State {
                uid,
                history: History::from_status(object.data.get("status")),
                history_limit: controller::DEFAULT_HISTORY_LIMIT,
                ..State::default()
            });
    }

    /// Keeps what runs for `key` current with a new generation of a spec that leaves its
    /// module's settings as they are: a verdict on it is for the new generation, and its
    /// probation follows the spec's rollback.
    async fn refresh(&self, key: &ControllerKey, spec: &ControllerSpec, generation: i64) {
        let mut states = self.states.lock().await;
        let Some(state) = states.get_mut(key) else {
            return;
        };
        state.history_limit = spec.history_limit;
        if let Some(applied) = &mut state.applied
            && applied.config == spec.module
        {
            // A revision rolled back for the settings that run stays bad for them.
            if let Some(rolled_back) = &mut state.history.rolled_back
                && rolled_back.observed_generation == applied.generation
            {
                rolled_back.observed_generation = generation;
            }
            applied.generation = generation;
        }
        if spec.rollback.enabled {
            if let Some(probation) = &mut state.probation {
                probation.set_rollback(spec.rollback);
            }
        } else {
            state.probation = None;
        }
    }

    /// Reads the history of `key` from the API server, once this replica may act (it leads,
    /// or just took over), so that no replica acts on a history it read while another acted:
    /// what the last writer recorded (revisions, a rollback) survives a failover. The running
    /// revision's probation goes on from the start the history records; one the history does
    /// not know starts now, on probation.
    async fn take_over(&self, key: &ControllerKey, spec: &ControllerSpec, guests: &dyn Guests) {
        let acting = self.states.lock().await.get(key).is_some_and(|s| s.acting);
        if acting || !self.gate.is_open() {
            return;
        }
        // Through the status subresource, which the host may read (`get` on
        // `wasmcontrollers/status`) where it may only list and watch the objects.
        let fresh = match self.api(&key.0).get_status(&key.1).await {
            Ok(fresh) => fresh,
            Err(kube::Error::Api(status)) if status.code == 404 => return,
            Err(error) => {
                tracing::warn!(namespace = %key.0, name = %key.1, %error, "reading a WasmController's history; acting on none until it is read");
                return;
            }
        };
        let tally = guests.tally(key);
        let mut states = self.states.lock().await;
        let Some(state) = states.get_mut(key).filter(|s| s.uid == fresh.metadata.uid) else {
            return;
        };
        state.history = History::from_status(fresh.data.get("status"));
        state.acting = true;
        let Some(applied) = &state.applied else {
            return;
        };
        let revision = applied.revision();
        let recorded = state
            .history
            .revisions
            .first()
            .is_some_and(|r| r.replaced.is_none() && r.module_digest == revision.module_digest);
        state.probation = if recorded {
            resumed_probation(&state.history, tally.as_ref(), spec)
        } else {
            let before = !state.history.revisions.is_empty();
            state
                .history
                .started(revision, &Timestamp::now().to_string(), spec.history_limit);
            tally
                .filter(|_| before && spec.rollback.enabled)
                .map(|t| Probation::new(Instant::now(), &t, spec.rollback))
        };
    }

    /// The running module, as its digest (`sha256:...`) and origin, when it was rolled back for
    /// `generation` and rollback is on: it still has to be replaced.
    async fn running_bad(
        &self,
        key: &ControllerKey,
        spec: &ControllerSpec,
        generation: i64,
    ) -> Option<(String, String)> {
        let states = self.states.lock().await;
        let state = states.get(key)?;
        let module = &state.applied.as_ref()?.module;
        let digest = format!("sha256:{}", module.digest);
        (spec.rollback.enabled && state.history.is_bad(&digest, generation))
            .then(|| (digest, module.origin.clone()))
    }

    /// Replaces the running revision, `bad` (its module digest and origin), that the check loop
    /// found failing, with the last good one: a Warning Event says so. When that fails, the bad one keeps running, and the
    /// object is Degraded and retried (or, if it cannot succeed, left until its spec changes).
    /// Whether the reconcile goes on.
    async fn roll_back(
        self: &Arc<Self>,
        key: &ControllerKey,
        object: &DynamicObject,
        spec: &ControllerSpec,
        generation: i64,
        (bad, origin): (&str, &str),
        guests: &dyn Guests,
    ) -> bool {
        let memo = Some((bad.to_owned(), generation));
        let (failed_before, why) = {
            let states = self.states.lock().await;
            let state = states.get(key);
            (
                state.is_some_and(|s| s.rollback_failed == memo),
                state
                    .and_then(|s| s.history.rolled_back.as_ref())
                    .map(|r| r.message.clone())
                    .unwrap_or_default(),
            )
        };
        if failed_before {
            return true;
        }
        match self.restore(key, spec, generation, Some(bad), guests).await {
            Ok(None) => false,
            Ok(Some(restored)) => {
                guests.refused("RolledBack");
                let note = format!(
                    "{origin} fails ({why}); rolled back to {} as controller {}",
                    restored.origin, restored.name
                );
                self.event(object, true, "RolledBack", "Rollback", &note)
                    .await;
                tracing::warn!(namespace = %key.0, name = %key.1, bad = %origin, to = %restored.origin, "WasmController rolled back to its last good revision");
                true
            }
            Err(refusal) => {
                let refusal = Refusal {
                    message: format!("{origin} fails ({why}) and runs on: {}", refusal.message),
                    ..refusal
                };
                self.refused(key, object, generation, &refusal, guests)
                    .await;
                if !refusal.transient
                    && let Some(state) = self.states.lock().await.get_mut(key)
                {
                    state.rollback_failed = memo;
                }
                self.retry(key, spec, &refusal);
                false
            }
        }
    }

    /// When nothing runs for `key` and its rollback is on, runs the last good revision in place
    /// of the module the spec names (`bad`, `sha256:...`, when it was fetched), which `refusal`
    /// refused. The revision that ran last resumes (after a restart, say) with a Normal Event;
    /// an older one is a rollback, with a Warning Event.
    async fn restore_idle(
        &self,
        key: &ControllerKey,
        object: &DynamicObject,
        spec: &ControllerSpec,
        bad: Option<&str>,
        refusal: &Refusal,
        guests: &dyn Guests,
    ) {
        let idle = self
            .states
            .lock()
            .await
            .get(key)
            .is_some_and(|s| s.applied.is_none());
        if !idle || !spec.rollback.enabled {
            return;
        }
        let generation = object.metadata.generation.unwrap_or_default();
        let restored = match self.restore(key, spec, generation, bad, guests).await {
            Ok(Some(restored)) => restored,
            Ok(None) => return,
            Err(failed) => {
                tracing::warn!(namespace = %key.0, name = %key.1, reason = failed.reason, message = %failed.message, "no earlier revision runs in place of a refused module");
                return;
            }
        };
        let what = bad.unwrap_or("the module the spec names");
        if restored.resumed {
            let note = format!(
                "{what} does not run ({}); module {} ran before and runs again as controller {}",
                refusal.reason, restored.origin, restored.name
            );
            self.event(object, false, "Loaded", "Load", &note).await;
        } else {
            guests.refused("RolledBack");
            let note = format!(
                "{what} does not run ({}); rolled back to {} as controller {}",
                refusal.reason, restored.origin, restored.name
            );
            self.event(object, true, "RolledBack", "Rollback", &note)
                .await;
        }
        tracing::warn!(namespace = %key.0, name = %key.1, what, reason = refusal.reason, to = %restored.origin, generation, "an earlier revision of a WasmController runs in place of its refused module");
    }

    /// Forgets what ran for `key` when the host stopped its guest (an older object's guest
    /// took its name): it is loaded again, or refused with the reason.
    async fn forget_stopped(&self, key: &ControllerKey, guests: &dyn Guests) {
        let mut states = self.states.lock().await;
        if let Some(state) = states.get_mut(key)
            && state.applied.is_some()
            && !guests.running(key)
        {
            state.applied = None;
            state.probation = None;
        }
    }

    /// Queues every object whose guest the host stopped, for [`Self::forget_stopped`].
    async fn requeue_stopped(&self, guests: &dyn Guests) {
        let states = self.states.lock().await;
        for (key, state) in states.iter() {
            if state.applied.is_some() && !guests.running(key) {
                self.work.add(key.clone(), ());
            }
        }
    }

    /// Queues every object for which nothing runs: a controller stopped, and its name may be
    /// what another waits for.
    async fn requeue_idle(&self) {
        let states = self.states.lock().await;
        for (key, state) in states.iter() {
            if state.applied.is_none() {
                self.work.add(key.clone(), ());
            }
        }
    }

    /// Remembers that the module and spec `refused` were refused for good.
    async fn remember_refused(&self, key: &ControllerKey, refused: Option<(String, i64)>) {
        if let Some(state) = self.states.lock().await.get_mut(key) {
            state.refused = refused;
        }
    }

    /// Unloads the object's guest, for its paused spec; whether one ran.
    async fn pause(
        &self,
        key: &ControllerKey,
        object: &DynamicObject,
        generation: i64,
        guests: &dyn Guests,
    ) -> bool {
        let stopped = guests.stop(key).await;
        if stopped {
            self.event(
                object,
                false,
                "Paused",
                "Stop",
                "the controller is paused; its guest is unloaded",
            )
            .await;
        }
        let mut states = self.states.lock().await;
        let Some(state) = states.get_mut(key) else {
            return stopped;
        };
        state.applied = None;
        state.probation = None;
        let now = Timestamp::now().to_string();
        if state
            .history
            .revisions
            .first()
            .is_some_and(|r| r.replaced.is_none())
        {
            state.history.revisions[0].replaced = Some(now);
            state.history.revisions[0].reason = Some(revisions::PAUSED.to_owned());
        }
        let paused = |kind| condition(kind, false, "Paused", "spec.paused is true", generation);
        let patch = status(
            object,
            generation,
            state,
            vec![paused("Ready"), paused("Progressing"), paused("Degraded")],
        );
        drop(states);
        self.write_status(patch).await;
        stopped
    }

    /// Records on the object that a module was loaded, unless nothing changed.
    async fn loaded(&self, object: &DynamicObject, loaded: Loaded, origin: &str, name: &str) {
        let note = match loaded {
            Loaded::Started => "loaded",
            Loaded::Swapped => "swapped in place; every key is reconciled again",
            Loaded::Replaced => "restarted with the new declaration or settings",
            Loaded::Unchanged | Loaded::Stopping => return,
        };
        let reason = match loaded {
            Loaded::Started => "Loaded",
            Loaded::Swapped => "Swapped",
            _ => "Replaced",
        };
        self.event(
            object,
            false,
            reason,
            "Load",
            &format!("module {origin} {note} as controller {name}"),
        )
        .await;
    }

    /// Records that `applied` runs for `key`: a new revision when its module is new, on
    /// probation when another ran before it and the spec's rollback is on. A revision that
    /// another host started (before a restart or a failover) goes on with what is left of its
    /// probation. `tally` is the guest's as it started.
    async fn ran(
        &self,
        key: &ControllerKey,
        applied: Applied,
        tally: Option<&Tally>,
        spec: &ControllerSpec,
    ) {
        let mut states = self.states.lock().await;
        let state = states.entry(key.clone()).or_default();
        let revision = applied.revision();
        let running = state
            .history
            .revisions
            .first()
            .filter(|r| r.replaced.is_none());
        if running.is_none_or(|r| r.module_digest != revision.module_digest) {
            let before = running.is_some() || state.applied.is_some();
            state
                .history
                .started(revision, &Timestamp::now().to_string(), spec.history_limit);
            state.probation = tally
                .filter(|_| before && spec.rollback.enabled)
                .map(|t| Probation::new(Instant::now(), t, spec.rollback));
        } else if state.applied.is_none() {
            state.probation = resumed_probation(&state.history, tally, spec);
        }
        state.applied = Some(applied);
        state.refused = None;
    }

    /// Runs the last good revision for `key`, for the spec's `generation`, in place of the module
    /// `bad` (`sha256:...`; `None`: one that could not be fetched); what runs then, or `None`
    /// when shutdown has begun.
    async fn restore(
        &self,
        key: &ControllerKey,
        spec: &ControllerSpec,
        generation: i64,
        bad: Option<&str>,
        guests: &dyn Guests,
    ) -> Result<Option<Restored>, Refusal> {
        let good = self
            .states
            .lock()
            .await
            .get(key)
            .and_then(|s| s.history.last_good(bad.unwrap_or_default()).cloned());
        let good = good.ok_or_else(|| Refusal {
            reason: "RollbackFailed",
            message: "no good revision that ran before it is recorded (see revisionHistoryLimit)"
                .into(),
            transient: false,
        })?;
        // Why the last good revision does not run, from the refusal `r` of `what` it was.
        let failed = |what: &str, r: Refusal| Refusal {
            reason: "RollbackFailed",
            message: format!(
                "its last good revision {} {what}: {}",
                good.digest, r.message
            ),
            transient: r.transient,
        };
        let origin = good
            .image
            .clone()
            .unwrap_or_else(|| good.module_digest.clone());
        let bytes = self
            .sources
            .revision_bytes(&good, spec, &key.0)
            .await
            .map_err(|r| failed("cannot be fetched", r))?;
        let created = self
            .latest
            .lock()
            .expect("objects lock")
            .get(key)
            .map(created)
            .unwrap_or_default();
        let (loaded, module, name) = guests
            .run(key, &created, origin.clone(), bytes, &spec.module)
            .await
            .map_err(|r| failed("does not load", r))?;
        if loaded == Loaded::Stopping {
            return Ok(None);
        }
        let tally = guests.tally(key);
        // The revision that ran last, before a restart or a pause: not a rollback.
        let last = good.replaced.is_none();
        let resumed = last || good.reason.as_deref() == Some(revisions::PAUSED);
        let applied = Applied {
            config: spec.module.clone(),
            module,
            name: name.clone(),
            image: good.image.clone().map(|image| (image, good.digest.clone())),
            generation,
        };
        let mut states = self.states.lock().await;
        let state = states.entry(key.clone()).or_default();
        if last {
            state.probation = resumed_probation(&state.history, tally.as_ref(), spec);
        } else {
            state
                .history
                .started(good, &Timestamp::now().to_string(), spec.history_limit);
            state.probation = None;
        }
        state.applied = Some(applied);
        Ok(Some(Restored {
            origin,
            name,
            resumed,
        }))
    }

    /// Queues `key` again after a refusal: with backoff when it is transient, else at the next
    /// poll of its source.
    fn retry(&self, key: &ControllerKey, spec: &ControllerSpec, refusal: &Refusal) {
        if !refusal.transient {
            self.poll(key, spec);
            return;
        }
        self.work.add_rate_limited(key.clone(), ());
    }

    /// Queues `key` again after its source's poll interval.
    /// A standby does not resolve a tag again: it follows what the acting replica records
    /// (see [`Self::follow`]). Each interval is stretched or shrunk at random by up to 10%, so
    /// that objects created together do not poll together.
    fn poll(&self, key: &ControllerKey, spec: &ControllerSpec) {
        let tag =
            matches!(&spec.module.source, Source::Image(i) if !i.reference.contains("@sha256:"));
        if tag && !self.gate.is_open() {
            return;
        }
        if let Some(poll) = spec.poll {
            self.after(key, jittered(poll));
        }
    }

    /// Records on the object that its module was refused: a count, a log line, a Warning Event
    /// (unless the last one said the same) and conditions that say whether an earlier module
    /// still runs.
    async fn refused(
        &self,
        key: &ControllerKey,
        object: &DynamicObject,
        generation: i64,
        refusal: &Refusal,
        guests: &dyn Guests,
    ) {
        guests.refused(refusal.reason);
        let said = (refusal.reason.to_owned(), refusal.message.clone());
        let repeated = {
            let mut states = self.states.lock().await;
            let state = states.entry(key.clone()).or_default();
            tracing::error!(namespace = %key.0, name = %key.1, reason = refusal.reason, message = %refusal.message, running = state.applied.is_some(), "WasmController refused");
            state.warned.replace(said.clone()) == Some(said)
        };
        if !repeated {
            self.event(object, true, refusal.reason, "Load", &refusal.message)
                .await;
        }
        self.degraded(key, object, generation, refusal).await;
    }

    /// Writes the conditions of a refusal: Degraded, Progressing while it is transient, and
    /// Ready while an earlier module still runs.
    async fn degraded(
        &self,
        key: &ControllerKey,
        object: &DynamicObject,
        generation: i64,
        refusal: &Refusal,
    ) {
        let mut states = self.states.lock().await;
        let state = states.entry(key.clone()).or_default();
        let ready = match &state.applied {
            Some(applied) => condition(
                "Ready",
                true,
                "Running",
                &format!(
                    "controller {} runs {}; the spec's module does not",
                    applied.name, applied.module.origin
                ),
                generation,
            ),
            None => condition("Ready", false, refusal.reason, &refusal.message, generation),
        };
        let conditions = [
            ready,
            condition(
                "Progressing",
                refusal.transient,
                refusal.reason,
                &refusal.message,
                generation,
            ),
            condition(
                "Degraded",
                true,
                refusal.reason,
                &refusal.message,
                generation,
            ),
        ];
        let patch = status(object, generation, state, conditions.into());
        drop(states);
        self.write_status(patch).await;
    }

    /// Every second: rolls back each new revision whose reconciles fail too often, and writes
    /// each object's changed reconcile counters at most every [`TALLY_EVERY`].
    async fn check(self: &Arc<Self>, guests: Weak<dyn Guests>) {
        let mut ticks = tokio::time::interval(CHECK_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let Some(guests) = guests.upgrade() else {
                return;
            };
            let now = Instant::now();
            let mut bad = Vec::new();
            let mut tallies = Vec::new();
            let mut states = self.states.lock().await;
            for (key, state) in states.iter_mut() {
                let Some(applied) = &state.applied else {
                    continue;
                };
                let Some(tally) = guests.tally(key) else {
                    continue;
                };
                // Only a replica that may act judges, on the history it read then: a standby
                // runs no reconciles, and its verdict would be on nothing.
                let judging = self.gate.is_open() && state.acting;
                if let Some(probation) = state.probation.as_ref().filter(|_| judging) {
                    if let Some(message) = probation.verdict(&tally, now) {
                        let revision = applied.revision();
                        tracing::warn!(namespace = %key.0, name = %key.1, revision = %revision.digest, %message, "a new revision fails; rolling it back");
                        state.history.rolled_back(
                            &revision,
                            applied.generation,
                            &message,
                            &Timestamp::now().to_string(),
                        );
                        state.probation = None;
                        bad.push(key.clone());
                    } else if probation.passed(now) {
                        state.probation = None;
                    }
                }
                let counters = tally_status(&tally, state);
                if state
                    .tally_written
                    .as_ref()
                    .is_none_or(|(w, at)| *w != counters && now - *at >= TALLY_EVERY)
                {
                    state.tally_written = Some((counters.clone(), now));
                    tallies.push((key.clone(), state.uid.clone(), counters));
                }
            }
            self.sources.registries().store().name(named(&states));
            drop(states);
            for key in bad {
                self.work.add(key, ());
            }
            for (key, uid, counters) in tallies {
                self.write_tally(&key, uid, counters).await;
            }
        }
    }

    /// Every `every` (jittered): asks the API server again whether the host may do what each
    /// running guest may, as RBAC changes without the objects; a guest it may not is stopped,
    /// and its object handled again, which refuses it as `NotPermitted` until it may.
    async fn review(self: &Arc<Self>, guests: Weak<dyn Guests>, every: Duration) {
        loop {
            tokio::time::sleep(jittered(every)).await;
            let Some(guests) = guests.upgrade() else {
                return;
            };
            let running: Vec<ControllerKey> = {
                let states = self.states.lock().await;
                states
                    .iter()
                    .filter(|(_, s)| s.applied.is_some())
                    .map(|(k, _)| k.clone())
                    .collect()
            };
            for key in running {
                if let Err(refusal) = guests.review(&key).await {
                    tracing::warn!(namespace = %key.0, name = %key.1, reason = refusal.reason, message = %refusal.message, "WasmController stopped: the host may no longer do what it may");
                    self.work.add(key, ());
                }
            }
        }
    }

    /// Writes the reconcile counters and last error of `key`'s status, if the object still has
    /// `uid`.
    async fn write_tally(
        &self,
        key: &ControllerKey,
        uid: Option<String>,
        counters: WasmControllerStatus,
    ) {
        let patch = json!({
            "apiVersion": format!("{}/{}", controller::GROUP, controller::VERSION),
            "kind": controller::KIND,
            "metadata": { "uid": uid },
            "status": counters,
        });
        if !self.gate.is_open() {
            return;
        }
        let params = PatchParams::apply(TALLY_MANAGER).force();
        if let Err(error) = self
            .api(&key.0)
            .patch_status(&key.1, &params, &Patch::Apply(&patch))
            .await
        {
            tracing::debug!(namespace = %key.0, name = %key.1, %error, "writing a WasmController's reconcile counters");
        }
    }

    /// Writes a status that [`status()`] made, with no lock held: a slow API server delays only
    /// this object.
    async fn write_status(&self, status: Option<StatusPatch>) {
        let Some(StatusPatch {
            namespace,
            name,
            patch,
        }) = status
        else {
            return;
        };
        if !self.gate.is_open() {
            return;
        }
        let params = PatchParams::apply(FIELD_MANAGER).force();
        if let Err(error) = self
            .api(&namespace)
            .patch_status(&name, &params, &Patch::Apply(&patch))
            .await
        {
            tracing::warn!(%namespace, %name, %error, "writing a WasmController's status");
        }
    }

    /// Records an Event on the controller object.
    async fn event(
        &self,
        object: &DynamicObject,
        warning: bool,
        reason: &str,
        action: &str,
        note: &str,
    ) {
        let (Some(namespace), Some(name)) = (&object.metadata.namespace, &object.metadata.name)
        else {
            return;
        };
        let mut note = note.to_owned();
        // The API server refuses notes over 1 KiB.
        if note.len() > 1024 {
            let mut end = 1000;
            while !note.is_char_boundary(end) {
                end -= 1;
            }
            note.truncate(end);
            note.push_str(" [cut]");
        }
        let now = MicroTime(Timestamp::now());
        let event: Result<Event, _> = serde_json::from_value(json!({
            "metadata": { "name": event_name(name), "namespace": namespace },
            "eventTime": now,
            "reportingController": REPORTER,
            "reportingInstance": leader::replica_name(),
            "action": action,
            "reason": reason,
            "note": note,
            "type": if warning { "Warning" } else { "Normal" },
            "regarding": {
                "apiVersion": format!("{}/{}", controller::GROUP, controller::VERSION),
                "kind": controller::KIND,
                "namespace": namespace,
                "name": name,
                "uid": object.metadata.uid,
            },
        }));
        let Ok(event) = event else {
            return;
        };
        if !self.gate.is_open() {
            return;
        }
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        if let Err(error) = api.create(&PostParams::default(), &event).await {
            tracing::warn!(%namespace, %name, %error, "recording an Event on a WasmController");
        }
    }
}

/// Reports an object's handling done when dropped, also by a panic, so that the object is
/// handled again when it was queued meanwhile.
struct Done(Arc<Objects>, ControllerKey);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.work.done(&self.1);
    }
}

/// A status patch of one object.
struct StatusPatch {
    namespace: String,
    name: String,
    patch: Value,
}

/// The status of `object` for `state`: the conditions (a condition keeps its transition time
/// while its status is unchanged) and, when a module runs, what it is.
fn status(
    object: &DynamicObject,
    generation: i64,
    state: &State,
    conditions: Vec<Condition>,
) -> Option<StatusPatch> {
    let (Some(namespace), Some(name)) = (&object.metadata.namespace, &object.metadata.name) else {
        return None;
    };
    let previous: Vec<Condition> = object
        .data
        .pointer("/status/conditions")
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default();
    let conditions = conditions
        .into_iter()
        .map(|mut c| {
            if let Some(old) = previous.iter().find(|o| o.type_ == c.type_)
                && old.status == c.status
            {
                c.last_transition_time = old.last_transition_time.clone();
            }
            c
        })
        .collect();
    // What another writer recorded (a replica that acted before this one) is kept.
    let written = History::from_status(object.data.get("status"));
    let history = state.history.merged(&written, state.history_limit);
    let mut status = WasmControllerStatus {
        observed_generation: Some(generation),
        conditions: Some(conditions),
        replica: Some(leader::replica_name().to_owned()),
        revisions: Some(history.revisions),
        rolled_back: history.rolled_back,
        ..WasmControllerStatus::default()
    };
    if let Some(applied) = &state.applied {
        running_status(&mut status, applied);
    }
    // The object's UID: a status meant for an object deleted meanwhile is refused by the API
    // server rather than written on one created again under its name.
    let patch = json!({
        "apiVersion": format!("{}/{}", controller::GROUP, controller::VERSION),
        "kind": controller::KIND,
        "metadata": { "uid": object.metadata.uid },
        "status": status,
    });
    Some(StatusPatch {
        namespace: namespace.clone(),
        name: name.clone(),
        patch,
    })
}

/// Fills in `status` what runs: `applied`.
fn running_status(status: &mut WasmControllerStatus, applied: &Applied) {
    let metadata = &applied.module.metadata;
    let kind = |k: &GroupVersionKind| format!("{} {}", k.api_version(), k.kind);
    let module_digest = format!("sha256:{}", applied.module.digest);
    status.controller_name = Some(applied.name.clone());
    status.digest = Some(
        applied
            .image
            .as_ref()
            .map_or_else(|| module_digest.clone(), |(_, digest)| digest.clone()),
    );
    status.module_digest = Some(module_digest);
    status.image = applied.image.as_ref().map(|(pinned, _)| pinned.clone());
    status.contract = Some(applied.module.pre.interface().to_owned());
    let watches = metadata.watches.iter().map(|w| {
        let by = match &w.mapping {
            Mapping::Owner => "owner".to_owned(),
            Mapping::Label(label) => format!("label {label}"),
            Mapping::Guest => "map-keys".to_owned(),
        };
        format!("{} by {by}", kind(&w.selection.kind))
    });
    status.declaration = Some(Declaration {
        primary: kind(&metadata.primary.kind),
        owns: metadata.owns.iter().map(kind).collect(),
        watches: watches.collect(),
        finalizer: metadata.finalizer.clone(),
    });
}

/// The probation left to the running revision of `history`, when another host started it
/// (before a restart or a failover) less than the spec's rollback window ago.
fn resumed_probation(
    history: &History,
    tally: Option<&Tally>,
    spec: &ControllerSpec,
) -> Option<Probation> {
    let elapsed = history
        .running_since(Timestamp::now())
        .filter(|elapsed| spec.rollback.enabled && *elapsed < spec.rollback.window)?;
    let started = Instant::now().checked_sub(elapsed)?;
    Some(Probation::new(started, tally?, spec.rollback))
}

/// The image pinned to a digest that `object`'s status records as running.
fn recorded_image(object: Option<&DynamicObject>) -> Option<&str> {
    object?.data.pointer("/status/image")?.as_str()
}

/// Whether an object changed from `old` to `new` in what its controller depends on: its spec
/// (the generation), labels or annotations, identity or deletion; not its status alone.
fn changed(old: Option<&DynamicObject>, new: &DynamicObject) -> bool {
    let Some(old) = old else {
        return true;
    };
    let (old, new) = (&old.metadata, &new.metadata);
    old.uid != new.uid
        || old.generation != new.generation
        || old.labels != new.labels
        || old.annotations != new.annotations
        || old.deletion_timestamp != new.deletion_timestamp
}

/// The reconcile counters and last error of `tally`, as status writes them; the time of the last
/// error is when `state` first saw it.
fn tally_status(tally: &Tally, state: &mut State) -> WasmControllerStatus {
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let mut counters = WasmControllerStatus {
        reconciles: Some(Reconciles {
            succeeded: count(tally.succeeded),
            requeued: count(tally.requeued),
            failed: count(tally.failed),
            consecutive_failures: count(tally.consecutive_failures),
        }),
        ..WasmControllerStatus::default()
    };
    if let Some(error) = &tally.last_error {
        let seen = state
            .last_error
            .take()
            .filter(|(_, e)| e == error)
            .unwrap_or_else(|| (Timestamp::now().to_string(), error.clone()));
        counters.last_error = Some(LastError {
            message: seen.1.clone(),
            time: seen.0.clone(),
        });
        state.last_error = Some(seen);
    }
    counters
}

/// When `object` was created, as its claim to its controller name.
fn created(object: &DynamicObject) -> String {
    object
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default()
}

fn key(object: &DynamicObject) -> Option<ControllerKey> {
    Some((
        object.metadata.namespace.clone()?,
        object.metadata.name.clone()?,
    ))
}

/// The module digests (hex) the objects run or their revisions name: kept in the module store
/// and the compile cache whatever their bounds.
fn named(states: &HashMap<ControllerKey, State>) -> HashSet<String> {
    let hex = |digest: &str| digest.strip_prefix("sha256:").unwrap_or(digest).to_owned();
    states
        .values()
        .flat_map(|state| {
            let running = state.applied.as_ref().map(|a| a.module.digest.clone());
            let revisions = state
                .history
                .revisions
                .iter()
                .map(|r| hex(&r.module_digest));
            running.into_iter().chain(revisions)
        })
        .collect()
}

/// `period` stretched or shrunk at random by up to 10%.
fn jittered(period: Duration) -> Duration {
    use std::hash::BuildHasher;
    let random = std::collections::hash_map::RandomState::new().hash_one(0u8);
    let unit = (random >> 11) as f64 / (1u64 << 53) as f64;
    period.mul_f64(0.9 + 0.2 * unit)
}

fn condition(kind: &str, status: bool, reason: &str, message: &str, generation: i64) -> Condition {
    Condition {
        type_: kind.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation: Some(generation),
        last_transition_time: Time(Timestamp::now()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The facts of a fetched module `b`, with `running` (digest, same settings) and the flags.
    fn facts(running: Option<(&str, bool)>, flags: [bool; 3]) -> Facts {
        Facts {
            fetched: "b".into(),
            running: running.map(|(d, same)| (d.to_owned(), same)),
            refused_before: flags[0],
            rolled_back: flags[1],
            failed_for_good: flags[2],
        }
    }

    #[test]
    fn a_new_module_runs_and_one_running_as_the_spec_says_is_confirmed() {
        assert_eq!(decide(&facts(None, [false; 3])), Step::Run);
        assert_eq!(decide(&facts(Some(("a", true)), [false; 3])), Step::Run);
        assert_eq!(
            decide(&facts(Some(("b", false)), [false; 3])),
            Step::Run,
            "new settings"
        );
        assert_eq!(decide(&facts(Some(("b", true)), [false; 3])), Step::Confirm);
    }

    #[test]
    fn a_module_refused_for_good_is_left_until_the_spec_or_module_changes() {
        for running in [None, Some(("a", true)), Some(("b", true))] {
            assert_eq!(decide(&facts(running, [true, false, false])), Step::Skip);
            assert_eq!(decide(&facts(running, [true, true, true])), Step::Skip);
        }
    }

    #[test]
    fn a_module_rolled_back_for_the_spec_never_runs_again() {
        let rolled_back = [false, true, false];
        assert_eq!(decide(&facts(None, rolled_back)), Step::Restore);
        assert_eq!(
            decide(&facts(Some(("a", true)), rolled_back)),
            Step::KeepRolledBack
        );
        assert_eq!(
            decide(&facts(Some(("b", true)), rolled_back)),
            Step::RollBack
        );
        assert_eq!(
            decide(&facts(Some(("b", false)), rolled_back)),
            Step::RollBack
        );
        // Its rollback failed for good: it runs on, left alone until something changes.
        assert_eq!(
            decide(&facts(Some(("b", true)), [false, true, true])),
            Step::Skip
        );
        assert_eq!(decide(&facts(None, [false, true, true])), Step::Restore);
    }
}
