//! The host: loads the configured modules, starts one controller per module on shared
//! informers, reloads a module when its file changes, and on shutdown stops taking keys and lets
//! reconciles in flight finish.
//!
//! A reload compiles and validates the new module (world, version, metadata, grants) while the
//! old one keeps running, then:
//! - if it declares the same kinds, mappings, finalizer, concurrency and resync period, swaps it
//!   in place: reconciles in flight finish on the old code, every key is enqueued again;
//! - otherwise drains the old controller (in-flight reconciles finish) and starts a new one,
//!   which acquires the informers it needs and releases the ones nobody else uses.
//!
//! A new declaration of the same primary selection takes over the old finalizer: the new
//! controller replaces it on each object with its own, or removes it if it declares none, and
//! finalizes an object deleted before that. A guest unloaded, or replaced by one of another
//! primary selection, leaves its finalizer on its objects: they are watched, logged and counted
//! (see [`crate::manage::stale_finalizers`]) until a guest with that finalizer runs again.
//!
//! An invalid module is rejected with an error in the log and the previous one keeps running; a
//! removed file unloads its guest.
//!
//! Reloads run one at a time, and nothing else waits for them: metrics and status read the guest
//! table at any time (a guest that drains is listed until its successor starts), and shutdown
//! abandons a reload in progress and drains every guest at once.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::GroupVersionKind;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::cluster::gate::Gate;
use crate::cluster::resources::Resources;
use crate::cluster::watch::{Informer, Informers};
use crate::config::{Config, ModuleConfig, QueueConfig};
use crate::control::controller::{Controller, Settings};
use crate::control::replica::Replica;
use crate::manage::access;
use crate::manage::names::{GuestKey, Names, default_name};
use crate::manage::objects::{self, Guests, Loaded};
use crate::manage::reload;
use crate::manage::stale_finalizers::StaleFinalizers;
use crate::wasm::declaration::Metadata;
use crate::wasm::limits::CallLimits;
use crate::wasm::module::{self, LoadError, Module};
use crate::wasm::module_bytes::{KeyedLocks, ModuleBytes};
use crate::wasm::module_store::ModuleStore;
use crate::wasm::permissions::{self, Permissions, Requirement};
use crate::wasm::runtime::Runtime;

mod error;
mod guests;

pub use error::HostError;

/// Counters of module loads.
#[derive(Debug, Default)]
pub struct LoadCounters {
    /// Modules loaded, at start-up or on reload.
    pub loaded: AtomicU64,
    /// Modules replaced while running.
    pub reloaded: AtomicU64,
    /// Changed modules rejected; the previous version kept running.
    pub rejected: AtomicU64,
    /// Guests unloaded because their file was removed or their controller object deleted or
    /// paused.
    pub unloaded: AtomicU64,
    /// Modules of controller objects refused, and rollbacks, by reason.
    pub refused: Mutex<BTreeMap<&'static str, u64>>,
}

/// The running host.
pub struct Host {
    shared: Arc<Shared>,
    /// Keeps the file watcher alive.
    _watcher: Option<notify::RecommendedWatcher>,
}

struct Shared {
    runtime: Runtime,
    resources: Arc<Resources>,
    informers: Arc<Informers>,
    queue: QueueConfig,
    modules: Vec<ModuleConfig>,
    /// Running guests by key; a guest whose file or object is gone has no entry. Locked only
    /// briefly, never across an await.
    guests: Mutex<BTreeMap<GuestKey, Arc<Controller>>>,
    /// Held for a whole rescan of the module files, so rescans never interleave.
    rescanning: tokio::sync::Mutex<()>,
    /// One load, swap or unload at a time per guest, and none waits for another guest's: a
    /// guest that drains slowly holds up only its own next load.
    loading: KeyedLocks<GuestKey>,
    /// Which guest holds each controller name.
    names: Names,
    /// What the API server must allow the host for each object's guest, reviewed again from
    /// time to time.
    needs: Mutex<BTreeMap<GuestKey, Vec<Requirement>>>,
    /// The host's own access, its answers shared by every guest.
    access: access::Access,
    tasks: TaskTracker,
    counters: LoadCounters,
    /// Set, under the guest table's lock, once shutdown has begun; no guest is started after it.
    stopping: AtomicBool,
    /// Cancelled once shutdown has begun: ends the reload task, and a reload in progress.
    closing: CancellationToken,
    /// Objects carrying the finalizers of guests no longer running.
    stale_finalizers: Arc<Mutex<Vec<Arc<StaleFinalizers>>>>,
    /// How this replica runs among its peers.
    replica: Replica,
}

impl Host {
    /// Loads every module of `config` and starts its controller, then watches the modules'
    /// folders for changes when `watch` is set. Fails without starting anything if one module
    /// is invalid. Informers run and modules load at once; reconciles wait until the
    /// `replica`'s gate opens, and the status of controller objects until `writer` opens.
    pub async fn start(
        config: &Config,
        client: Client,
        runtime: Runtime,
        store: ModuleStore,
        watch: bool,
        replica: Replica,
        writer: Gate,
    ) -> Result<Self, HostError> {
        let resources = Arc::new(Resources::new(client.clone()));
        let shared = Arc::new(Shared {
            runtime,
            informers: Arc::new(Informers::new(
                resources.clone(),
                config.controllers.namespace_informers,
            )),
            resources,
            queue: config.queue,
            modules: config.modules.clone(),
            guests: Mutex::default(),
            rescanning: tokio::sync::Mutex::default(),
            loading: KeyedLocks::default(),
            names: Names::default(),
            needs: Mutex::default(),
            access: access::Access::new(client),
            tasks: TaskTracker::new(),
            counters: LoadCounters::default(),
            stopping: AtomicBool::new(false),
            closing: CancellationToken::new(),
            stale_finalizers: Arc::default(),
            replica,
        });
        shared.load_files(config).await?;
        let watcher = if watch {
            Some(shared.clone().watch_files(config).await?)
        } else {
            None
        };
        if config.controllers.watch {
            let guests: Arc<dyn Guests> = shared.clone();
            objects::spawn(
                Arc::downgrade(&guests),
                shared.resources.client().clone(),
                config,
                store,
                &shared.tasks,
                shared.closing.clone(),
                writer,
            );
        }
        Ok(Self {
            shared,
            _watcher: watcher,
        })
    }

    /// The running controllers, in module-path order.
    pub fn controllers(&self) -> Vec<Arc<Controller>> {
        self.shared.controllers()
    }

    /// Counters of module loads, reloads, rejections and unloads.
    pub fn load_counters(&self) -> &LoadCounters {
        &self.shared.counters
    }

    /// Whether every informer has completed its first list.
    pub fn is_synced(&self) -> bool {
        self.shared
            .informers
            .running()
            .iter()
            .all(|i| i.is_synced())
    }

    /// A handle that reads the host's state for metrics and status, usable while the host runs.
    pub fn observer(&self) -> Observer {
        Observer(self.shared.clone())
    }

    /// Checks every module file now, as a change notification would.
    pub async fn rescan(&self) {
        self.shared.rescan().await;
    }

    /// Runs until `shutdown` is cancelled, then drains: a reload in progress is abandoned, no
    /// new key is taken, reconciles in flight finish (each is bounded by its deadline).
    pub async fn run(self, shutdown: CancellationToken) {
        shutdown.cancelled().await;
        tracing::info!("shutting down: finishing reconciles in flight");
        let guests = {
            let mut guests = self.shared.guests.lock().expect("guest table lock");
            // Set under the guest table's lock: a reload still running starts nothing after it.
            self.shared.stopping.store(true, Ordering::SeqCst);
            std::mem::take(&mut *guests)
        };
        self.shared.closing.cancel();
        // Every controller stops taking keys at once; then all drain together.
        futures::future::join_all(guests.values().map(|c| c.shut_down())).await;
        drop(self._watcher);
        self.shared.tasks.close();
        // The reload task holds no strong reference and ends once `closing` is cancelled.
        self.shared.tasks.wait().await;
        tracing::info!("stopped");
    }
}

/// Reads a running host's guests, informers and counters; cheap to clone. After shutdown it sees
/// no guests.
#[derive(Clone)]
pub struct Observer(Arc<Shared>);

impl Observer {
    /// The running controllers, in module-path order. Never waits for a reload: a guest being
    /// replaced is listed until its successor starts.
    pub fn controllers(&self) -> Vec<Arc<Controller>> {
        self.0.controllers()
    }

    /// Counters of module loads, reloads, rejections and unloads.
    pub fn load_counters(&self) -> &LoadCounters {
        &self.0.counters
    }

    /// SelfSubjectAccessReviews sent about the host's own access.
    pub fn access_reviews(&self) -> u64 {
        self.0.access.reviews()
    }

    /// The informers currently running.
    pub fn informers(&self) -> Vec<Arc<Informer>> {
        self.0.informers.running()
    }

    /// Objects carrying the finalizers of guests no longer running, by guest and finalizer.
    pub fn stale_finalizers(&self) -> Vec<Arc<StaleFinalizers>> {
        self.0
            .stale_finalizers
            .lock()
            .expect("stale finalizers lock")
            .clone()
    }
}

impl Shared {
    /// Loads every module file of `config` and starts its controller; fails without starting
    /// anything if one module is invalid or two claim one name.
    async fn load_files(&self, config: &Config) -> Result<(), HostError> {
        let mut loaded: Vec<(GuestKey, Settings, Arc<Module>)> = Vec::new();
        for module_config in &config.modules {
            let path = module_config
                .file()
                .expect("the configuration's modules are files");
            let bytes = read(path).await?;
            let key = GuestKey::File(path.to_owned());
            let (module, settings, _) = self
                .prepare(
                    &key,
                    path.display().to_string(),
                    ModuleBytes::new(bytes),
                    module_config,
                )
                .await?;
            if let Some((holder, _, _)) = loaded.iter().find(|(_, s, _)| s.name == settings.name) {
                return Err(HostError::DuplicateName {
                    name: settings.name,
                    holder: holder.to_string(),
                });
            }
            loaded.push((key, settings, module));
        }
        for (key, settings, module) in loaded {
            self.names.hold(&settings.name, &key);
            log_loaded(&settings.name, &module, "module loaded");
            self.install(key, module, settings);
        }
        Ok(())
    }

    /// Watches the folders of `config`'s module files and rescans them on every change, until
    /// shutdown; the returned watcher must be kept.
    async fn watch_files(
        self: Arc<Self>,
        config: &Config,
    ) -> Result<notify::RecommendedWatcher, HostError> {
        let (changes, watcher) = reload::watch(config.modules.iter().filter_map(|m| m.file()))
            .map_err(HostError::Watch)?;
        let weak = Arc::downgrade(&self);
        let closing = self.closing.clone();
        self.tasks.spawn(async move {
            let reloads = reload::debounced(changes, || {
                let weak = weak.clone();
                async move {
                    if let Some(shared) = weak.upgrade() {
                        shared.rescan().await;
                    }
                }
            });
            tokio::select! {
                () = reloads => {}
                () = closing.cancelled() => {}
            }
        });
        // A module changed while the first ones loaded has no event of its own.
        self.rescan().await;
        Ok(watcher)
    }
}

impl Shared {
    fn controllers(&self) -> Vec<Arc<Controller>> {
        let guests = self.guests.lock().expect("guest table lock");
        guests.values().cloned().collect()
    }

    /// The guest known by `key`.
    fn guest(&self, key: &GuestKey) -> Option<Arc<Controller>> {
        self.guests
            .lock()
            .expect("guest table lock")
            .get(key)
            .cloned()
    }

    /// Starts a controller for `key` in place of any other, unless shutdown has begun; whether
    /// it started.
    /// A finalizer the same guest left on the same primary selection when it stopped is taken
    /// over (see [`Settings::retired_finalizers`]); one the new guest declares on its kind is
    /// no longer watched as left behind.
    fn install(&self, key: GuestKey, module: Arc<Module>, mut settings: Settings) -> bool {
        let mut guests = self.guests.lock().expect("guest table lock");
        if self.stopping.load(Ordering::SeqCst) {
            return false;
        }
        let metadata = &module.metadata;
        let mut stale = self.stale_finalizers.lock().expect("stale finalizers lock");
        for stale in stale.iter() {
            let left = stale.finalizer();
            if stale.same_selection(&settings.name, &metadata.primary, &settings.namespaces)
                && metadata.finalizer.as_deref() != Some(left)
                && !settings.retired_finalizers.iter().any(|r| r == left)
            {
                settings.retired_finalizers.push(left.to_owned());
            }
        }
        let kind = metadata.primary.kind.clone();
        let controller = self.start_controller(module, settings);
        let finalizers = controller.finalizers();
        stale.retain(|o| o.kind() != &kind || !finalizers.iter().any(|f| f == o.finalizer()));
        guests.insert(key, controller);
        true
    }

    /// Watches the objects that keep the finalizers of `controller`, which stopped, until a
    /// guest with one of them runs or no object carries it.
    fn leave_finalizers(&self, controller: &Controller) {
        for finalizer in controller.finalizers() {
            let stale = StaleFinalizers::watch(controller, &finalizer);
            let emptied = stale.emptied();
            self.stale_finalizers
                .lock()
                .expect("stale finalizers lock")
                .push(stale.clone());
            let (list, closing) = (self.stale_finalizers.clone(), self.closing.clone());
            let weak = Arc::downgrade(&stale);
            self.tasks.spawn(async move {
                let emptied = tokio::select! {
                    emptied = emptied => emptied,
                    () = closing.cancelled() => return,
                };
                if !emptied {
                    return;
                }
                list.lock()
                    .expect("stale finalizers lock")
                    .retain(|o| !std::ptr::eq(Arc::as_ptr(o), weak.as_ptr()));
            });
        }
    }

    /// Removes `controller` from the guest table, if it is still the one running for `key`.
    fn remove(&self, key: &GuestKey, controller: &Arc<Controller>) {
        let mut guests = self.guests.lock().expect("guest table lock");
        if guests.get(key).is_some_and(|c| Arc::ptr_eq(c, controller)) {
            guests.remove(key);
        }
    }

    /// Loads and validates the module `bytes` from `origin`, and checks its grants; for a
    /// controller object, also that the host's own RBAC allows all it may do, every write the
    /// host makes for it included (its finalizer, and the shard labels of a sharded host).
    /// Returns what the API server must allow it (for an object), to be reviewed again.
    async fn prepare(
        &self,
        key: &GuestKey,
        origin: String,
        bytes: ModuleBytes,
        config: &ModuleConfig,
    ) -> Result<(Arc<Module>, Settings, Vec<Requirement>), HostError> {
        let limits = CallLimits::from(config.limits);
        let mut module = module::load_bytes(&self.runtime, origin, bytes, &limits).await?;
        let cluster_scoped = match key {
            GuestKey::Object { .. } => self.cluster_scoped(&module).await?,
            GuestKey::File(_) => Vec::new(),
        };
        if config.confined {
            if !cluster_scoped.is_empty() {
                return Err(HostError::ClusterScoped {
                    origin: module.origin.clone(),
                    kinds: cluster_scoped.iter().map(kind_name).collect(),
                });
            }
            module = confine(&module, &config.namespaces);
            self.informers.ask_reach(kinds(&module.metadata)).await;
        }
        let settings = settings(config, &module.metadata, limits, self.queue);
        let sharded = self.replica.sharded.is_some();
        let mut needed = permissions::required(&module.metadata, &settings.namespaces);
        if sharded {
            needed.extend(permissions::shard_labels(
                &module.metadata,
                &settings.namespaces,
            ));
        }
        let missing = Permissions::new(settings.grants.clone()).missing(&needed);
        if !missing.is_empty() {
            return Err(HostError::NotGranted {
                guest: settings.name,
                origin: module.origin.clone(),
                missing,
            });
        }
        let GuestKey::Object { .. } = key else {
            return Ok((module, settings, Vec::new()));
        };
        let mut needs = permissions::needs(&module.metadata, config);
        if sharded {
            needs.extend(permissions::shard_labels(
                &module.metadata,
                &settings.namespaces,
            ));
        }
        let needs = permissions::cluster_wide(needs, &cluster_scoped);
        self.permitted(&settings.name, &module.origin, &needs)
            .await?;
        Ok((module, settings, needs))
    }

    /// Fails unless the API server allows the host's identity all of `needs`, what guest
    /// `name` from `origin` may do.
    async fn permitted(
        &self,
        name: &str,
        origin: &str,
        needs: &[Requirement],
    ) -> Result<(), HostError> {
        let denied = self
            .access
            .denied(needs)
            .await
            .map_err(HostError::AccessReview)?;
        if denied.is_empty() {
            return Ok(());
        }
        Err(HostError::NotPermitted {
            guest: name.to_owned(),
            origin: origin.to_owned(),
            denied,
        })
    }

    /// The cluster-scoped kinds among those `module` declares (primary, owned, watched).
    async fn cluster_scoped(&self, module: &Module) -> Result<Vec<GroupVersionKind>, HostError> {
        let mut scoped = Vec::new();
        for kind in kinds(&module.metadata) {
            let (_, namespaced) =
                self.resources
                    .resolve(kind)
                    .await
                    .map_err(|source| HostError::Unresolved {
                        origin: module.origin.clone(),
                        kind: kind_name(kind),
                        source,
                    })?;
            if !namespaced && !scoped.contains(kind) {
                scoped.push(kind.clone());
            }
        }
        Ok(scoped)
    }

    fn start_controller(&self, module: Arc<Module>, settings: Settings) -> Arc<Controller> {
        self.counters.loaded.fetch_add(1, Ordering::Relaxed);
        Controller::start(
            self.runtime.clone(),
            self.resources.clone(),
            &self.informers,
            module,
            settings,
            &self.tasks,
            &self.replica,
        )
    }

    /// Brings every guest in line with its module file, one rescan at a time.
    async fn rescan(&self) {
        let _rescanning = self.rescanning.lock().await;
        for config in &self.modules {
            if self.stopping.load(Ordering::SeqCst) {
                return;
            }
            self.reconcile_module(config).await;
        }
    }

    async fn reconcile_module(&self, config: &ModuleConfig) {
        let path = config
            .file()
            .expect("the configuration's modules are files");
        let key = GuestKey::File(path.to_owned());
        let _loading = self.loading.lock(key.clone()).await;
        let current = self.guest(&key);
        let bytes = match tokio::fs::read(path).await {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                if let Some(controller) = current {
                    tracing::info!(guest = %controller.name(), path = %path.display(), "module file removed; unloading the guest");
                    self.unload_locked(&key).await;
                }
                return;
            }
            Err(error) => {
                tracing::error!(path = %path.display(), %error, "cannot read module; keeping what runs");
                return;
            }
        };
        let bytes = ModuleBytes::new(bytes);
        let digest = bytes.digest();
        if current
            .as_ref()
            .is_some_and(|c| c.module().digest == digest)
        {
            return;
        }
        tracing::info!(path = %path.display(), %digest, "module changed; loading it");
        if let Err(error) = self
            .put_locked(key, path.display().to_string(), bytes, config)
            .await
        {
            match &current {
                Some(c) => {
                    tracing::error!(guest = %c.name(), %error, "module change rejected; the previous version keeps running")
                }
                None => tracing::error!(path = %path.display(), %error, "module rejected"),
            }
        }
    }

    /// Runs the module `bytes` from `origin` for `key` with `config`, one load of `key` at a
    /// time.
    async fn put(
        &self,
        key: GuestKey,
        origin: String,
        bytes: ModuleBytes,
        config: &ModuleConfig,
    ) -> Result<Loaded, HostError> {
        let _loading = self.loading.lock(key.clone()).await;
        if self.stopping.load(Ordering::SeqCst) {
            return Ok(Loaded::Stopping);
        }
        self.put_locked(key, origin, bytes, config).await
    }

    /// Stops the guest of `key`, if one runs; whether one did. One load of `key` at a time.
    async fn unload(&self, key: &GuestKey) -> bool {
        let _loading = self.loading.lock(key.clone()).await;
        self.unload_locked(key).await
    }

    async fn unload_locked(&self, key: &GuestKey) -> bool {
        let Some(controller) = self.guest(key) else {
            return false;
        };
        controller.shut_down().await;
        self.remove(key, &controller);
        self.names.release(key, controller.name());
        self.leave_finalizers(&controller);
        self.counters.unloaded.fetch_add(1, Ordering::Relaxed);
        tracing::info!(guest = %controller.name(), "guest unloaded");
        true
    }

    /// Claims the controller name `name` for `key`: the younger guest that held it, to be
    /// stopped, if any.
    fn claim_name(&self, key: &GuestKey, name: &str) -> Result<Option<GuestKey>, HostError> {
        self.names
            .claim(key, name)
            .map_err(|holder| HostError::DuplicateName {
                name: name.to_owned(),
                holder: holder.to_string(),
            })
    }

    /// Stops the guest of `key`, whose name an older claim took.
    async fn yield_name(&self, key: &GuestKey, name: &str) {
        let _loading = self.loading.lock(key.clone()).await;
        if self.unload_locked(key).await {
            tracing::warn!(guest = %name, holder = %key, "the controller name is taken by an older object's guest; this one is stopped");
        }
    }

    /// Loads the module and puts it in place of what runs for `key`: swapped in place when the
    /// declaration and settings are the same, else the old guest drained and a new one started.
    /// A module that does not load, or whose name an older claim holds, leaves what runs
    /// alone. The caller holds `key`'s load lock.
    async fn put_locked(
        &self,
        key: GuestKey,
        origin: String,
        bytes: ModuleBytes,
        config: &ModuleConfig,
    ) -> Result<Loaded, HostError> {
        let current = self.guest(&key);
        let started = Instant::now();
        let (module, settings) = self.admit(&key, origin, bytes, config).await?;
        if let Some(old) = current.as_ref().map(|c| c.name().to_owned())
            && old != settings.name
        {
            self.names.release(&key, &old);
        }
        match current {
            Some(controller)
                if controller.module().digest == module.digest
                    && same_settings(controller.settings(), &settings) =>
            {
                Ok(Loaded::Unchanged)
            }
            Some(controller)
                if same_settings(controller.settings(), &settings)
                    && controller.can_swap_to(&module) =>
            {
                controller.swap_module(module.clone());
                self.counters.reloaded.fetch_add(1, Ordering::Relaxed);
                log_reloaded(
                    &settings.name,
                    &module,
                    started.elapsed(),
                    "module swapped in place",
                );
                Ok(Loaded::Swapped)
            }
            Some(controller) => Ok(self
                .replace(&controller, key, module, settings, started)
                .await),
            None => {
                if !self.install(key, module.clone(), settings.clone()) {
                    return Ok(Loaded::Stopping);
                }
                log_loaded(&settings.name, &module, "module loaded");
                Ok(Loaded::Started)
            }
        }
    }

    /// Loads the module for `key` and claims its name: a younger guest holding the name is
    /// stopped, and the module's needs are kept for access reviews. A module that does not
    /// load, or whose name an older claim holds, is counted as rejected.
    async fn admit(
        &self,
        key: &GuestKey,
        origin: String,
        bytes: ModuleBytes,
        config: &ModuleConfig,
    ) -> Result<(Arc<Module>, Settings), HostError> {
        let prepared = self
            .prepare(key, origin, bytes, config)
            .await
            .and_then(|prepared| Ok((self.claim_name(key, &prepared.1.name)?, prepared)));
        let (yielding, (module, settings, needs)) = prepared.inspect_err(|_| {
            self.counters.rejected.fetch_add(1, Ordering::Relaxed);
        })?;
        if let Some(younger) = yielding {
            self.yield_name(&younger, &settings.name).await;
        }
        self.needs
            .lock()
            .expect("needs lock")
            .insert(key.clone(), needs);
        Ok((module, settings))
    }

    /// Drains `controller` and starts `module` for `key` in its place. On the same primary
    /// selection and namespaces the new guest takes over the old finalizers; otherwise the old
    /// guest's objects are watched as stale finalizers.
    async fn replace(
        &self,
        controller: &Controller,
        key: GuestKey,
        module: Arc<Module>,
        mut settings: Settings,
        started: Instant,
    ) -> Loaded {
        // The old guest stays listed while it drains, and announced in its ring: the new one
        // takes its keys over.
        let _announced = self
            .replica
            .sharded
            .as_ref()
            .map(|s| s.roster.hold(controller.name()));
        controller.shut_down().await;
        let old = controller.module();
        if old.metadata.primary == module.metadata.primary
            && controller.settings().namespaces == settings.namespaces
        {
            let current = module.metadata.finalizer.as_deref();
            settings.retired_finalizers = controller
                .finalizers()
                .into_iter()
                .filter(|f| Some(f.as_str()) != current)
                .collect();
        } else {
            self.leave_finalizers(controller);
        }
        let name = settings.name.clone();
        if !self.install(key, module.clone(), settings) {
            return Loaded::Stopping;
        }
        self.counters.reloaded.fetch_add(1, Ordering::Relaxed);
        log_reloaded(
            &name,
            &module,
            started.elapsed(),
            "module replaced with a new declaration",
        );
        Loaded::Replaced
    }
}

/// Whether a guest running with `running` would run the same with `new`: everything but the
/// finalizers it took over, which a running guest keeps.
fn same_settings(running: &Settings, new: &Settings) -> bool {
    Settings {
        retired_finalizers: Vec::new(),
        ..running.clone()
    } == Settings {
        retired_finalizers: Vec::new(),
        ..new.clone()
    }
}

/// Reads a configured module file.
async fn read(path: &std::path::Path) -> Result<Vec<u8>, HostError> {
    tokio::fs::read(path).await.map_err(|source| {
        HostError::Load(LoadError::Read {
            origin: path.display().to_string(),
            source,
        })
    })
}

/// `module` with each watch in every namespace narrowed to `namespaces`; the caller refused
/// cluster-scoped kinds.
fn confine(module: &Arc<Module>, namespaces: &[String]) -> Arc<Module> {
    let mut watches = Vec::new();
    for watch in &module.metadata.watches {
        if watch.selection.namespace.is_some() {
            watches.push(watch.clone());
            continue;
        }
        watches.extend(namespaces.iter().map(|namespace| {
            let mut narrowed = watch.clone();
            narrowed.selection.namespace = Some(namespace.clone());
            narrowed
        }));
    }
    let mut confined = Module::clone(module);
    confined.metadata.watches = watches;
    Arc::new(confined)
}

/// The kinds `metadata` declares: primary, owned and watched.
fn kinds(metadata: &Metadata) -> impl Iterator<Item = &GroupVersionKind> {
    std::iter::once(&metadata.primary.kind)
        .chain(&metadata.owns)
        .chain(metadata.watches.iter().map(|w| &w.selection.kind))
}

/// `kind` as messages name it: `group/version Kind`.
fn kind_name(kind: &GroupVersionKind) -> String {
    format!("{} {}", kind.api_version(), kind.kind)
}

fn log_loaded(guest: &str, module: &Module, message: &str) {
    tracing::info!(guest, module = %module.origin, digest = %module.digest, from_cache = module.from_cache, "{message}");
}

fn log_reloaded(guest: &str, module: &Module, took: Duration, message: &str) {
    tracing::info!(guest, module = %module.origin, digest = %module.digest, from_cache = module.from_cache, took = ?took, "{message}");
}

fn settings(
    config: &ModuleConfig,
    metadata: &Metadata,
    limits: CallLimits,
    queue: QueueConfig,
) -> Settings {
    let mut max_concurrency = config.max_concurrency.unwrap_or(metadata.max_concurrency);
    let mut resync = config
        .resync_seconds
        .map(|s| Duration::from_secs(s.into()))
        .or(metadata.resync);
    // What a confined WasmController's module declares is brought within the host's maxima.
    if let Some(maxima) = &config.maxima {
        max_concurrency = max_concurrency.min(maxima.max_concurrency);
        resync = resync.map(|r| r.max(maxima.min_resync));
    }
    Settings {
        name: config
            .name
            .clone()
            .unwrap_or_else(|| default_name(config, &metadata.name)),
        max_concurrency,
        resync,
        namespaces: config.namespaces.clone(),
        limits,
        queue: config.queue.unwrap_or(queue),
        grants: config.grants.clone(),
        drops: config.drops.clone(),
        retired_finalizers: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use kube::api::GroupVersionKind;

    use super::*;
    use crate::cluster::selection::Selection;

    /// A ConfigMap controller named `declared`, with 3 workers and a 600 s resync.
    fn declared() -> Metadata {
        Metadata {
            name: "declared".into(),
            primary: Selection {
                kind: GroupVersionKind::gvk("", "v1", "ConfigMap"),
                namespace: None,
                selector: None,
            },
            owns: Vec::new(),
            watches: Vec::new(),
            finalizer: None,
            max_concurrency: 3,
            resync: Some(Duration::from_secs(600)),
            reconcile_on: crate::wasm::bindings::types::Changes::ANY,
        }
    }

    /// The settings of the first module of the configuration `yaml`, declared by [`declared`].
    fn settings_of(yaml: &str) -> Settings {
        let config = Config::from_yaml(yaml, Path::new("/modules")).unwrap();
        settings(
            &config.modules[0],
            &declared(),
            CallLimits::default(),
            QueueConfig::default(),
        )
    }

    #[test]
    fn the_configuration_overrides_what_the_module_declares() {
        let settings = settings_of(
            "modules:\n  - path: a.wasm\n    name: renamed\n    maxConcurrency: 7\n    resyncSeconds: 30\n    namespaces: [a]\n",
        );
        assert_eq!(settings.name, "renamed");
        assert_eq!(settings.max_concurrency, 7);
        assert_eq!(settings.resync, Some(Duration::from_secs(30)));
        assert_eq!(settings.namespaces, ["a"]);
    }

    #[test]
    fn without_configuration_the_declaration_holds() {
        let settings = settings_of("modules:\n  - path: a.wasm\n");
        assert_eq!(settings.name, "declared");
        assert_eq!(settings.max_concurrency, 3);
        assert_eq!(settings.resync, Some(Duration::from_secs(600)));
        assert!(settings.namespaces.is_empty());
        assert_eq!(settings.grants, None);
    }

    #[tokio::test]
    async fn a_module_that_does_not_load_starts_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bad.wasm"), "not a component").unwrap();
        let config = Config::from_yaml("modules:\n  - path: bad.wasm\n", dir.path()).unwrap();
        // Nothing listens there: the host must fail before it reaches the API server.
        let client = Resources::unreachable().client().clone();
        let error = Host::start(
            &config,
            client,
            Runtime::new().unwrap(),
            ModuleStore::none(),
            false,
            Replica::alone(),
            Gate::open(),
        )
        .await
        .err()
        .expect("the module is refused");
        assert!(
            matches!(&error, HostError::Load(LoadError::Compile { origin, .. }) if origin.ends_with("bad.wasm")),
            "{error}"
        );
    }
}
