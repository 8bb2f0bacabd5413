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
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::cluster::gate::Gate;
use crate::config::controller::{self, ControllerSpec, ControllersConfig};
use crate::config::resource::WasmControllerStatus;
use crate::config::{Config, ModuleConfig, QueueConfig, Source};
use crate::control::queue::{Lanes, WorkQueue};
use crate::control::tally::Tally;
use crate::manage::refusal::Refusal;
use crate::manage::revisions::{self, History, Probation, Revision};
use crate::manage::sources::{Fetched, Sources};
use crate::wasm::module::Module;
use crate::wasm::module_bytes::ModuleBytes;
use crate::wasm::module_store::ModuleStore;
use crate::wasm::oci::{Registries, RegistrySettings};

mod follow;
mod rollback;
mod status;

use follow::created;
use status::{condition, status_patch};

/// The field manager of the status the host writes.
const FIELD_MANAGER: &str = "kubewasm-host";
/// The field manager of the reconcile counters and last error in status.
const TALLY_MANAGER: &str = "kubewasm-host-tally";
/// How often running guests are checked for a failing new revision.
const CHECK_EVERY: Duration = Duration::from_secs(1);
/// How long after a failed write of the reconcile counters they are tried again.
const TALLY_RETRY: Duration = Duration::from_secs(10);
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
        bytes: ModuleBytes,
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
    /// Not before when counters are written again, after a failed write.
    tally_retry: Option<Instant>,
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
    let closing = &objects.closing;
    let watching = objects.clone();
    spawn_until(tasks, closing, async move { watching.watch().await });
    let (checking, checked) = (objects.clone(), guests.clone());
    spawn_until(tasks, closing, async move { checking.check(checked).await });
    let opening = objects.clone();
    spawn_until(tasks, closing, async move {
        opening.gate.opened().await;
        opening.requeue_all();
    });
    if let Some(every) = objects.settings.review_interval {
        let (reviewing, reviewed) = (objects.clone(), guests.clone());
        spawn_until(tasks, closing, async move {
            reviewing.review(reviewed, every).await;
        });
    }
    let changing = objects.clone();
    spawn_until(tasks, closing, async move {
        let changed = |key: &ControllerKey| changing.work.add(key.clone(), ());
        let changes = changing.sources.changes();
        changes.run(changing.client.clone(), changed).await;
    });
    let working = objects.clone();
    spawn_until(tasks, closing, async move { working.work(guests).await });
}

/// Runs `work` in `tasks` until it ends or `closing` is cancelled.
fn spawn_until(
    tasks: &TaskTracker,
    closing: &CancellationToken,
    work: impl Future<Output = ()> + Send + 'static,
) {
    let closing = closing.clone();
    tasks.spawn(async move {
        tokio::select! {
            () = work => {}
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

    /// Handles queued objects side by side, each in a task of its own, so that a slow registry
    /// holds up only the objects that name it. The queue hands an object out once at a time:
    /// queued again meanwhile, it is handled once more when it is done.
    async fn work(self: &Arc<Self>, guests: Weak<dyn Guests>) {
        self.work.serve(usize::MAX);
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
    async fn take(self: &Arc<Self>, step: Step, mut handled: Handled<'_>, guests: &dyn Guests) {
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
                // Moved, not copied: a thousand objects loading one large module at once each
                // hold its bytes.
                let Some(bytes) = handled.fetched.bytes.take() else {
                    unreachable!("a changed module is fetched");
                };
                if self.run_fetched(&handled, bytes, guests).await {
                    self.confirm(handled).await;
                }
            }
            Step::Confirm => self.confirm(handled).await,
        }
    }

    /// Runs the fetched module, `bytes`, in place of what runs; whether it runs.
    async fn run_fetched(
        self: &Arc<Self>,
        handled: &Handled<'_>,
        bytes: ModuleBytes,
        guests: &dyn Guests,
    ) -> bool {
        let Handled {
            key,
            object,
            spec,
            generation,
            ..
        } = *handled;
        let fetched = &handled.fetched;
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
        let patch = status_patch(
            object,
            generation,
            state,
            vec![paused("Ready"), paused("Progressing"), paused("Degraded")],
        );
        drop(states);
        self.write_status(patch).await;
        stopped
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

    /// Queues `key` again after its source's poll interval, unless a watch of its ConfigMap
    /// queues it when that changes. A standby does not resolve a tag again: it follows what the
    /// acting replica records (see [`Self::follow`]). Each interval is stretched or shrunk at
    /// random by up to 10%, so that objects created together do not poll together.
    fn poll(&self, key: &ControllerKey, spec: &ControllerSpec) {
        if self.sources.changes().follows(key) {
            return;
        }
        let tag =
            matches!(&spec.module.source, Source::Image(i) if !i.reference.contains("@sha256:"));
        if tag && !self.gate.is_open() {
            return;
        }
        if let Some(poll) = spec.poll {
            self.after(key, jittered(poll));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tally_says_shard_labels_fail_only_while_they_do_and_keeps_since_when() {
        let mut tally = Tally {
            loaded_at: std::time::SystemTime::UNIX_EPOCH,
            digest: String::new(),
            succeeded: 1,
            requeued: 0,
            failed: 0,
            traps: 0,
            timeouts: 0,
            out_of_memory: 0,
            denied: 0,
            output_dropped: 0,
            consecutive_failures: 0,
            failing: false,
            module_failures: 0,
            module_failing: false,
            last_error: None,
            shard_labels_failing: None,
        };
        let mut state = State::default();
        assert_eq!(status::tally_status(&tally, &mut state).conditions, None);
        let since = Timestamp::from_second(1_800_000_000).unwrap();
        tally.shard_labels_failing = Some((since, "forbidden".into()));
        let conditions = status::tally_status(&tally, &mut state).conditions;
        let [failing] = conditions.as_deref().expect("a condition") else {
            panic!("one condition: {conditions:?}");
        };
        assert_eq!(
            (failing.type_.as_str(), failing.status.as_str()),
            ("ShardLabels", "False")
        );
        assert_eq!(failing.reason, "WriteFailed");
        assert!(
            failing.message.ends_with(": forbidden"),
            "{}",
            failing.message
        );
        assert_eq!(failing.last_transition_time.0, since);
    }

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
