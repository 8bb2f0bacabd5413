//! Controller objects: the host watches WasmController objects and runs each one's module as a
//! guest, with the guarantees of file reload (see [`crate::control::host`]): a module is fetched,
//! compiled and validated while the running one keeps running, a bad one is refused and the
//! running one kept, and a swap loses no key.
//!
//! Objects are handled one at a time, each whenever it changes, when a failed fetch is retried
//! (a transient failure, such as a registry down, with backoff from 1 s to 5 min) and, for an
//! image by tag, every poll interval, when the tag is resolved again and a new digest rolled out.
//! Each transition is an Event on the object, and its status says what runs: conditions
//! `Ready`, `Progressing` and `Degraded`, the digest, the contract and the declaration.
//! Deleting the object, or pausing it, unloads its guest.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::runtime::watcher;
use oci_client::secrets::RegistryAuth;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::cluster::leader;
use crate::config::controller::{self, ControllerSpec, ControllersConfig};
use crate::config::{KeyRef, ModuleConfig, QueueConfig, Source};
use crate::control::apply::event_name;
use crate::wasm::declaration::Mapping;
use crate::wasm::module::Module;
use crate::wasm::oci::{self, Registries, RegistrySettings};
use crate::wasm::store::ModuleStore;

/// The field manager of the status the host writes.
const FIELD_MANAGER: &str = "kubewasm-host";
/// Who reports the Events on controller objects.
const REPORTER: &str = "kubewasm.dev/host";
/// First and largest delay before a failed fetch is tried again.
const BACKOFF: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(300));

/// An object's namespace and name.
pub type ObjectKey = (String, String);

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

/// A module the host refused, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// A CamelCase reason for conditions and Events.
    pub reason: &'static str,
    /// What is wrong.
    pub message: String,
    /// Whether trying again later may succeed without a change.
    pub transient: bool,
}

/// The guests of controller objects, as the host runs them.
#[async_trait]
pub trait Guests: Send + Sync {
    /// Runs `bytes` from `origin` with `config` for the object `key`, in place of what runs
    /// for it; what runs then.
    async fn run(
        &self,
        key: &ObjectKey,
        origin: String,
        bytes: Vec<u8>,
        config: &ModuleConfig,
    ) -> Result<(Loaded, Arc<Module>, String), Refusal>;
    /// Stops the guest of the object `key`; whether one ran.
    async fn stop(&self, key: &ObjectKey) -> bool;
}

/// A module fetched for an object.
struct Fetched {
    origin: String,
    bytes: Option<Vec<u8>>,
    module_digest: String,
    /// For an image: the reference pinned to its manifest's digest, and that digest.
    image: Option<(String, String)>,
}

/// What runs for an object.
struct Applied {
    config: ModuleConfig,
    module: Arc<Module>,
    name: String,
    image: Option<(String, String)>,
}

/// Watches controller objects and runs their modules until `closing` is cancelled.
pub fn spawn(
    guests: Weak<dyn Guests>,
    client: Client,
    settings: ControllersConfig,
    queue: QueueConfig,
    store: ModuleStore,
    tasks: &TaskTracker,
    closing: CancellationToken,
) {
    let registries = Registries::new(
        RegistrySettings {
            insecure: settings.insecure_registries.clone(),
            max_module_bytes: settings.max_module_bytes,
        },
        store,
    );
    let (sender, receiver) = mpsc::unbounded_channel();
    let objects = Arc::new(Objects {
        client,
        settings,
        queue,
        registries,
        latest: Mutex::default(),
        applied: tokio::sync::Mutex::default(),
        timers: Mutex::default(),
        failures: Mutex::default(),
        sender,
        tasks: tasks.clone(),
        closing: closing.clone(),
    });
    let watching = objects.clone();
    tasks.spawn(async move {
        tokio::select! {
            () = watching.watch() => {}
            () = closing.cancelled() => {}
        }
    });
    let closing = objects.closing.clone();
    tasks.spawn(async move {
        tokio::select! {
            () = objects.work(receiver, guests) => {}
            () = closing.cancelled() => {}
        }
    });
}

struct Objects {
    client: Client,
    settings: ControllersConfig,
    queue: QueueConfig,
    registries: Registries,
    /// The latest version of every object seen, by key.
    latest: Mutex<BTreeMap<ObjectKey, DynamicObject>>,
    /// What runs for each object.
    applied: tokio::sync::Mutex<HashMap<ObjectKey, Applied>>,
    /// The newest timer of each object: an older one that fires does nothing.
    timers: Mutex<HashMap<ObjectKey, u64>>,
    /// Consecutive transient failures of each object, for its backoff.
    failures: Mutex<HashMap<ObjectKey, u32>>,
    sender: mpsc::UnboundedSender<ObjectKey>,
    tasks: TaskTracker,
    closing: CancellationToken,
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

    /// Follows every controller object, and queues each one that changes or goes.
    async fn watch(&self) {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource());
        let mut events = watcher::watcher(api, watcher::Config::default()).boxed();
        let mut listing: Option<BTreeMap<ObjectKey, DynamicObject>> = None;
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
                    let gone: Vec<ObjectKey> = latest
                        .keys()
                        .filter(|k| !listed.contains_key(*k))
                        .cloned()
                        .collect();
                    let changed: Vec<ObjectKey> = listed
                        .iter()
                        .filter(|(k, o)| {
                            latest.get(*k).is_none_or(|l| {
                                l.metadata.resource_version != o.metadata.resource_version
                            })
                        })
                        .map(|(k, _)| k.clone())
                        .collect();
                    *latest = listed;
                    drop(latest);
                    for key in gone.into_iter().chain(changed) {
                        let _ = self.sender.send(key);
                    }
                }
                Ok(watcher::Event::Apply(object)) => {
                    if let Some(key) = key(&object) {
                        self.latest
                            .lock()
                            .expect("objects lock")
                            .insert(key.clone(), object);
                        let _ = self.sender.send(key);
                    }
                }
                Ok(watcher::Event::Delete(object)) => {
                    if let Some(key) = key(&object) {
                        self.latest.lock().expect("objects lock").remove(&key);
                        let _ = self.sender.send(key);
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "watching WasmController objects; retrying");
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            }
        }
    }

    /// Handles queued objects one at a time, each key once however often it was queued.
    async fn work(
        self: &Arc<Self>,
        mut receiver: mpsc::UnboundedReceiver<ObjectKey>,
        guests: Weak<dyn Guests>,
    ) {
        while let Some(first) = receiver.recv().await {
            let mut keys = vec![first];
            while let Ok(key) = receiver.try_recv() {
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
            for key in keys {
                let Some(guests) = guests.upgrade() else {
                    return;
                };
                self.reconcile(&key, guests.as_ref()).await;
            }
        }
    }

    /// Queues `key` again after `delay`, replacing any timer set before.
    fn after(self: &Arc<Self>, key: &ObjectKey, delay: Duration) {
        let token = {
            let mut timers = self.timers.lock().expect("timers lock");
            let token = timers.entry(key.clone()).or_default();
            *token += 1;
            *token
        };
        let (key, objects, closing) = (key.clone(), Arc::downgrade(self), self.closing.clone());
        self.tasks.spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = closing.cancelled() => return,
            }
            let Some(objects) = objects.upgrade() else {
                return;
            };
            let current = objects
                .timers
                .lock()
                .expect("timers lock")
                .get(&key)
                .is_some_and(|t| *t == token);
            if current {
                let _ = objects.sender.send(key);
            }
        });
    }

    async fn reconcile(self: &Arc<Self>, key: &ObjectKey, guests: &dyn Guests) {
        let object = self.latest.lock().expect("objects lock").get(key).cloned();
        let Some(object) = object else {
            if guests.stop(key).await {
                tracing::info!(namespace = %key.0, name = %key.1, "WasmController deleted; its guest is unloaded");
            }
            self.applied.lock().await.remove(key);
            return;
        };
        let generation = object.metadata.generation.unwrap_or_default();
        let spec = object.data.get("spec").cloned().unwrap_or(Value::Null);
        let spec = match controller::parse_spec(&spec, &key.0, &self.settings, &self.queue) {
            Ok(spec) => spec,
            Err(error) => {
                let refusal = Refusal {
                    reason: "InvalidSpec",
                    message: error.to_string(),
                    transient: false,
                };
                self.refused(key, &object, generation, &refusal).await;
                return;
            }
        };
        if spec.paused {
            if guests.stop(key).await {
                self.event(
                    &object,
                    false,
                    "Paused",
                    "Stop",
                    "the controller is paused; its guest is unloaded",
                )
                .await;
            }
            self.applied.lock().await.remove(key);
            self.status(
                &object,
                generation,
                None,
                &[
                    condition("Ready", false, "Paused", "spec.paused is true", generation),
                    condition(
                        "Progressing",
                        false,
                        "Paused",
                        "spec.paused is true",
                        generation,
                    ),
                    condition(
                        "Degraded",
                        false,
                        "Paused",
                        "spec.paused is true",
                        generation,
                    ),
                ],
            )
            .await;
            return;
        }
        let running = self
            .applied
            .lock()
            .await
            .get(key)
            .map(|a| (a.module.digest.clone(), a.config.clone()));
        let fetched = match self
            .fetch(&spec, &key.0, running.as_ref().map(|r| r.0.as_str()))
            .await
        {
            Ok(fetched) => fetched,
            Err(refusal) => {
                self.refused(key, &object, generation, &refusal).await;
                if refusal.transient {
                    let failures = {
                        let mut failures = self.failures.lock().expect("failures lock");
                        let n = failures.entry(key.clone()).or_default();
                        *n = n.saturating_add(1);
                        *n
                    };
                    self.after(key, backoff(failures));
                } else {
                    self.poll(key, &spec);
                }
                return;
            }
        };
        self.failures.lock().expect("failures lock").remove(key);
        let unchanged = running.as_ref().is_some_and(|(digest, config)| {
            *digest == fetched.module_digest && *config == spec.module
        });
        if !unchanged {
            let Some(bytes) = fetched.bytes else {
                unreachable!("a changed module is fetched");
            };
            match guests
                .run(key, fetched.origin.clone(), bytes, &spec.module)
                .await
            {
                Ok((Loaded::Stopping, _, _)) => return,
                Ok((loaded, module, name)) => {
                    let (reason, note) = match loaded {
                        Loaded::Started => ("Loaded", "loaded"),
                        Loaded::Swapped => {
                            ("Swapped", "swapped in place; every key is reconciled again")
                        }
                        Loaded::Replaced => {
                            ("Replaced", "restarted with the new declaration or settings")
                        }
                        Loaded::Unchanged | Loaded::Stopping => ("Unchanged", "unchanged"),
                    };
                    if loaded != Loaded::Unchanged {
                        self.event(
                            &object,
                            false,
                            reason,
                            "Load",
                            &format!("module {} {note} as controller {name}", fetched.origin),
                        )
                        .await;
                    }
                    self.applied.lock().await.insert(
                        key.clone(),
                        Applied {
                            config: spec.module.clone(),
                            module,
                            name,
                            image: fetched.image.clone(),
                        },
                    );
                }
                Err(refusal) => {
                    self.refused(key, &object, generation, &refusal).await;
                    self.poll(key, &spec);
                    return;
                }
            }
        }
        let applied = self.applied.lock().await;
        if let Some(applied) = applied.get(key) {
            let message = format!("controller {} runs {}", applied.name, applied.module.origin);
            self.status(
                &object,
                generation,
                Some(applied),
                &[
                    condition("Ready", true, "Running", &message, generation),
                    condition("Progressing", false, "Running", &message, generation),
                    condition("Degraded", false, "Running", &message, generation),
                ],
            )
            .await;
        }
        drop(applied);
        self.poll(key, &spec);
    }

    /// Queues an image by tag again after its poll interval.
    fn poll(self: &Arc<Self>, key: &ObjectKey, spec: &ControllerSpec) {
        if let Source::Image(image) = &spec.module.source
            && let Some(poll) = image.poll
        {
            self.after(key, poll);
        }
    }

    /// Records on the object that its module was refused: an Event, and conditions that say
    /// whether an earlier module still runs.
    async fn refused(
        &self,
        key: &ObjectKey,
        object: &DynamicObject,
        generation: i64,
        refusal: &Refusal,
    ) {
        let applied = self.applied.lock().await;
        let running = applied.get(key);
        tracing::error!(namespace = %key.0, name = %key.1, reason = refusal.reason, message = %refusal.message, running = running.is_some(), "WasmController refused");
        self.event(object, true, refusal.reason, "Load", &refusal.message)
            .await;
        let conditions = match running {
            Some(applied) => [
                condition(
                    "Ready",
                    true,
                    "Running",
                    &format!(
                        "the previous module {} keeps running",
                        applied.module.origin
                    ),
                    generation,
                ),
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
            ],
            None => [
                condition("Ready", false, refusal.reason, &refusal.message, generation),
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
            ],
        };
        self.status(object, generation, running, &conditions).await;
    }

    /// Fetches the module `spec` names. For an image whose module is the `running` one, the
    /// layer is not fetched.
    async fn fetch(
        &self,
        spec: &ControllerSpec,
        namespace: &str,
        running: Option<&str>,
    ) -> Result<Fetched, Refusal> {
        match &spec.module.source {
            Source::Image(image) => {
                let failed = |error: oci::OciError| Refusal {
                    reason: error.reason(),
                    transient: error.is_transient(),
                    message: error.to_string(),
                };
                let reference = oci::parse_reference(&image.reference).map_err(failed)?;
                let auth = match &image.pull_secret {
                    Some(name) => {
                        self.pull_credentials(namespace, name, reference.resolve_registry())
                            .await?
                    }
                    None => RegistryAuth::Anonymous,
                };
                let artifact = self
                    .registries
                    .resolve(&reference, &auth)
                    .await
                    .map_err(failed)?;
                let module_digest = artifact.module_digest().to_owned();
                let image = Some((artifact.pinned(), artifact.manifest_digest.clone()));
                let bytes = if running == Some(module_digest.as_str()) {
                    None
                } else {
                    Some(
                        self.registries
                            .fetch(&artifact, &auth)
                            .await
                            .map_err(failed)?,
                    )
                };
                Ok(Fetched {
                    origin: artifact.pinned(),
                    bytes,
                    module_digest,
                    image,
                })
            }
            Source::ConfigMap(key_ref) => {
                let bytes = self
                    .key_bytes::<ConfigMap>(namespace, key_ref, "ConfigMap", |map, key| {
                        map.binary_data
                            .and_then(|mut d| d.remove(key))
                            .map(|b| b.0)
                            .or_else(|| {
                                map.data
                                    .and_then(|mut d| d.remove(key))
                                    .map(String::into_bytes)
                            })
                    })
                    .await?;
                self.sized(format!("configmap/{}/{}", key_ref.name, key_ref.key), bytes)
            }
            Source::Secret(key_ref) => {
                let bytes = self
                    .key_bytes::<Secret>(namespace, key_ref, "Secret", |secret, key| {
                        secret.data.and_then(|mut d| d.remove(key)).map(|b| b.0)
                    })
                    .await?;
                self.sized(format!("secret/{}/{}", key_ref.name, key_ref.key), bytes)
            }
            Source::File(path) => {
                let bytes = tokio::fs::read(path).await.map_err(|e| Refusal {
                    reason: "SourceUnreadable",
                    message: format!("reading {}: {e}", path.display()),
                    transient: true,
                })?;
                self.sized(path.display().to_string(), bytes)
            }
        }
    }

    /// The value of `key_ref` in the object of kind `kind` in `namespace`, which `value` reads.
    async fn key_bytes<K>(
        &self,
        namespace: &str,
        key_ref: &KeyRef,
        kind: &str,
        value: impl FnOnce(K, &str) -> Option<Vec<u8>>,
    ) -> Result<Vec<u8>, Refusal>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let not_found = |message: String| Refusal {
            reason: "SourceNotFound",
            message,
            transient: false,
        };
        let api: Api<K> = Api::namespaced(self.client.clone(), namespace);
        let object = api.get_opt(&key_ref.name).await.map_err(|e| Refusal {
            reason: "SourceUnreadable",
            message: format!("reading {kind} {}: {e}", key_ref.name),
            transient: true,
        })?;
        let object =
            object.ok_or_else(|| not_found(format!("{kind} {} not found", key_ref.name)))?;
        value(object, &key_ref.key).ok_or_else(|| {
            not_found(format!(
                "{kind} {} has no key {}",
                key_ref.name, key_ref.key
            ))
        })
    }

    /// A module read from an object or a file, under the size limit.
    fn sized(&self, origin: String, bytes: Vec<u8>) -> Result<Fetched, Refusal> {
        let limit = self.settings.max_module_bytes;
        if bytes.len() as u64 > limit {
            return Err(Refusal {
                reason: "ModuleTooLarge",
                message: format!(
                    "{origin}: the module is {} bytes, over the limit of {limit}",
                    bytes.len()
                ),
                transient: false,
            });
        }
        Ok(Fetched {
            origin,
            module_digest: crate::wasm::module::sha256_hex(&bytes),
            bytes: Some(bytes),
            image: None,
        })
    }

    /// The credentials the `kubernetes.io/dockerconfigjson` Secret `name` holds for `registry`.
    async fn pull_credentials(
        &self,
        namespace: &str,
        name: &str,
        registry: &str,
    ) -> Result<RegistryAuth, Refusal> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let refused = |message: String| Refusal {
            reason: "PullSecretInvalid",
            message,
            transient: false,
        };
        let secret = api.get_opt(name).await.map_err(|e| Refusal {
            reason: "PullSecretUnreadable",
            message: format!("reading Secret {name}: {e}"),
            transient: true,
        })?;
        let secret =
            secret.ok_or_else(|| refused(format!("the imagePullSecret {name} is not found")))?;
        let config = secret
            .data
            .and_then(|mut d| d.remove(".dockerconfigjson"))
            .ok_or_else(|| {
                refused(format!(
                    "Secret {name} has no .dockerconfigjson (type kubernetes.io/dockerconfigjson)"
                ))
            })?;
        oci::credentials(&config.0, registry).map_err(|e| refused(format!("Secret {name}: {e}")))
    }

    /// Writes the status: the conditions (a condition keeps its transition time while its
    /// status is unchanged) and, when a module runs, what it is.
    async fn status(
        &self,
        object: &DynamicObject,
        generation: i64,
        applied: Option<&Applied>,
        conditions: &[Value],
    ) {
        let (Some(namespace), Some(name)) = (&object.metadata.namespace, &object.metadata.name)
        else {
            return;
        };
        let previous = object
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array);
        let conditions: Vec<Value> = conditions
            .iter()
            .map(|c| {
                let mut c = c.clone();
                if let Some(old) = previous.and_then(|p| p.iter().find(|o| o["type"] == c["type"]))
                    && old["status"] == c["status"]
                    && let Some(time) = old.get("lastTransitionTime")
                {
                    c["lastTransitionTime"] = time.clone();
                }
                c
            })
            .collect();
        let mut status = json!({
            "observedGeneration": generation,
            "conditions": conditions,
            "replica": leader::replica_name(),
        });
        if let Some(applied) = applied {
            let metadata = &applied.module.metadata;
            let kind = |k: &GroupVersionKind| format!("{} {}", k.api_version(), k.kind);
            status["controllerName"] = json!(applied.name);
            status["moduleDigest"] = json!(format!("sha256:{}", applied.module.digest));
            status["digest"] = match &applied.image {
                Some((_, digest)) => json!(digest),
                None => json!(format!("sha256:{}", applied.module.digest)),
            };
            if let Some((pinned, _)) = &applied.image {
                status["image"] = json!(pinned);
            }
            status["contract"] = json!(applied.module.pre.interface());
            status["declaration"] = json!({
                "primary": kind(&metadata.primary.kind),
                "owns": metadata.owns.iter().map(kind).collect::<Vec<_>>(),
                "watches": metadata.watches.iter().map(|w| {
                    let by = match &w.mapping {
                        Mapping::Owner => "owner".to_owned(),
                        Mapping::Label(label) => format!("label {label}"),
                        Mapping::Guest => "map-keys".to_owned(),
                    };
                    format!("{} by {by}", kind(&w.selection.kind))
                }).collect::<Vec<_>>(),
            });
            if let Some(finalizer) = &metadata.finalizer {
                status["declaration"]["finalizer"] = json!(finalizer);
            }
        }
        let patch = json!({
            "apiVersion": format!("{}/{}", controller::GROUP, controller::VERSION),
            "kind": controller::KIND,
            "status": status,
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        if let Err(error) = self
            .api(namespace)
            .patch_status(name, &params, &Patch::Apply(&patch))
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
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        if let Err(error) = api.create(&PostParams::default(), &event).await {
            tracing::warn!(%namespace, %name, %error, "recording an Event on a WasmController");
        }
    }
}

fn key(object: &DynamicObject) -> Option<ObjectKey> {
    Some((
        object.metadata.namespace.clone()?,
        object.metadata.name.clone()?,
    ))
}

/// The delay before the `failures`th retry: doubling from 1 s, at most 5 min.
fn backoff(failures: u32) -> Duration {
    BACKOFF
        .0
        .saturating_mul(1 << failures.saturating_sub(1).min(16))
        .min(BACKOFF.1)
}

fn condition(kind: &str, status: bool, reason: &str, message: &str, generation: i64) -> Value {
    json!({
        "type": kind,
        "status": if status { "True" } else { "False" },
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": Timestamp::now().to_string(),
    })
}
