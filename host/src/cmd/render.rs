//! One reconcile or finalize of an object against fixture objects, without a cluster, through
//! the host's own call path: [`dispatch::call`] with the host's limits and declared-kind checks,
//! and a [`OfflineBackend`] in place of the cluster.
//!
//! The guest reads the objects as the host's cache would hold them: without
//! `metadata.managedFields`, and each with a `metadata.uid` (an object without one gets a stable
//! uid derived from its kind, namespace and name, as the API server gives every object one). On
//! a [`Runtime::deterministic`] runtime the same module, objects and entry give the same
//! [`Rendered`], and [`Rendered::to_yaml`] the same text byte for byte.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use kube::api::GroupVersionKind;
use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::Value;

use crate::cluster::selection::kind_of;
use crate::cmd::changes;
use crate::cmd::source::{ModuleSource, SourceError};
use crate::cmd::{fail, out};
use crate::wasm::backend::{
    ApplyRequest, DeleteRequest, EventRequest, LogLine, PatchRequest, Scope,
};
use crate::wasm::bindings::kubewasm::controller::log::Level;
use crate::wasm::bindings::types;
use crate::wasm::declaration::Metadata;
use crate::wasm::dispatch::{self, Entry, Failure, Outcome};
use crate::wasm::env::GuestEnv;
use crate::wasm::limits::CallLimits;
use crate::wasm::module::{self, LoadError, Module};
use crate::wasm::oci::RegistrySettings;
use crate::wasm::offline::{Effect, OfflineBackend, Write};
use crate::wasm::permissions::Permissions;
use crate::wasm::runtime::{Runtime, RuntimeError};

/// Why a call could not be rendered. A guest that fails is not an error: its failure is the
/// [`Rendered::result`].
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The WebAssembly runtime could not be created.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The module could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The module could not be read or pulled.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A file or folder of objects could not be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not YAML.
    #[error("{}: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The YAML error, with its location.
        #[source]
        source: serde_yaml::Error,
    },
    /// A document is not a Kubernetes object.
    #[error("{at}: {message}")]
    Object {
        /// Where the object comes from, e.g. `pods.yaml, document 2`.
        at: String,
        /// What is wrong.
        message: String,
    },
    /// The file of the object to reconcile does not hold exactly one object.
    #[error("{} holds {count} objects; expected the one object to reconcile", path.display())]
    NotOne {
        /// The file.
        path: PathBuf,
        /// How many objects it holds.
        count: usize,
    },
    /// The host never hands this object to this module.
    #[error("the host never calls {module} with this object: {message}")]
    NotPrimary {
        /// The module's name.
        module: String,
        /// Why.
        message: String,
    },
    /// `finalize` was asked for, but the module declares no finalizer.
    #[error("module {0} declares no finalizer, so the host never calls its finalize")]
    NoFinalizer(String),
}

/// What one call did.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// The writes the guest asked for, in order, as the backend received them: applies carry the
    /// full intent, including the owner reference the host adds.
    pub writes: Vec<Write>,
    /// What each write did to the objects of the cache, in the order of `writes`.
    pub effects: Vec<Effect>,
    /// The guest's log lines in order (see [`LogLine`]), then what it wrote to stdout and
    /// stderr.
    pub logs: Vec<LogLine>,
    /// How the call ended.
    pub result: Result<Outcome, Failure>,
}

impl Rendered {
    /// Applies of objects (not of their status), in order.
    pub fn applies(&self) -> impl Iterator<Item = &ApplyRequest> {
        self.writes.iter().filter_map(|write| match write {
            Write::Apply(apply) if !apply.status => Some(apply),
            _ => None,
        })
    }

    /// Applies of the `status` subresource, in order.
    pub fn status_applies(&self) -> impl Iterator<Item = &ApplyRequest> {
        self.writes.iter().filter_map(|write| match write {
            Write::Apply(apply) if apply.status => Some(apply),
            _ => None,
        })
    }

    /// Patches, in order.
    pub fn patches(&self) -> impl Iterator<Item = &PatchRequest> {
        self.writes.iter().filter_map(|write| match write {
            Write::Patch(patch) => Some(patch),
            _ => None,
        })
    }

    /// Deletes, in order.
    pub fn deletes(&self) -> impl Iterator<Item = &DeleteRequest> {
        self.writes.iter().filter_map(|write| match write {
            Write::Delete(delete) => Some(delete),
            _ => None,
        })
    }

    /// Events, in order.
    pub fn events(&self) -> impl Iterator<Item = &EventRequest> {
        self.writes.iter().filter_map(|write| match write {
            Write::Event(event) => Some(event),
            _ => None,
        })
    }

    /// The writes, log lines and result as YAML: a `writes` list of one-key maps (`apply`,
    /// `applyStatus`, `patch`, `delete`, `event`), a `logs` list and a `result` with its
    /// `outcome` (`done`, `requeue-after`, `transient-error`, `permanent-error`, `timeout`,
    /// `out-of-memory` or `trap`). Object keys are sorted.
    pub fn to_yaml(&self) -> String {
        let view = View {
            writes: self.writes.iter().map(WriteView::of).collect(),
            logs: self.logs.iter().map(LogView).collect(),
            result: ResultView::of(&self.result),
        };
        serde_yaml::to_string(&view).expect("a rendering serializes to YAML")
    }

    /// What each write did to the objects of the cache (see [`changes::to_text`]), then the
    /// result: `result: <outcome>`, with its message or delay.
    pub fn to_diff(&self) -> String {
        let mut text = changes::to_text(self.writes.iter().zip(&self.effects));
        let result = serde_json::to_value(ResultView::of(&self.result)).unwrap_or_default();
        text += &format!("result: {}", result["outcome"].as_str().unwrap_or_default());
        if let Some(message) = result["message"].as_str() {
            text += &format!(": {message}");
        }
        if let Some(milliseconds) = result["milliseconds"].as_u64() {
            text += &format!(" {milliseconds} ms");
        }
        text + "\n"
    }
}

/// `kubewasm render`: prints as YAML what one reconcile (or, with `finalize`, one finalize) of
/// the object in the file `object` renders, against the objects of `cache`, or with `diff`
/// what each write did to them; a trap's message keeps the wasm backtrace if `backtrace`. Fails when the call cannot be made; a guest that fails is
/// rendered.
pub async fn command(
    module: &str,
    (object, cache): (&Path, &[PathBuf]),
    (finalize, diff, backtrace): (bool, bool, bool),
    loading: (RegistrySettings, Option<PathBuf>),
) -> ExitCode {
    let entry = if finalize {
        Entry::Finalize
    } else {
        Entry::Reconcile
    };
    let source = ModuleSource::parse(module);
    match render_files(&source, (object, cache), (entry, backtrace), loading).await {
        Ok(rendered) if diff => out(rendered.to_diff()),
        Ok(rendered) => out(rendered.to_yaml()),
        Err(error) => return fail(error),
    }
    ExitCode::SUCCESS
}

/// Loads the module (a file, or an artifact pulled as the host pulls it), then calls `entry`
/// with the one object in the file `object` and the objects of the files and folders of
/// `cache`, on a deterministic runtime with the host's default limits. With a compile cache
/// folder in `loading`, a module compiled before is read from it.
pub async fn render_files(
    source: &ModuleSource,
    (object, cache): (&Path, &[PathBuf]),
    (entry, backtrace): (Entry, bool),
    loading: (RegistrySettings, Option<PathBuf>),
) -> Result<Rendered, RenderError> {
    let (runtime, module) = load(source, loading).await?;
    let limits = call_limits(backtrace);
    let mut objects = read_objects(object)?;
    if objects.len() != 1 {
        return Err(RenderError::NotOne {
            path: object.to_owned(),
            count: objects.len(),
        });
    }
    let object = objects.remove(0);
    let mut cached = Vec::new();
    for path in cache {
        cached.extend(read_objects(path)?);
    }
    let backend = Arc::new(OfflineBackend::new(cached));
    call(&runtime, &module, &backend, &limits, entry, object).await
}

/// The host's default limits of a call; a trap's message keeps the wasm backtrace if
/// `backtrace`.
pub fn call_limits(backtrace: bool) -> CallLimits {
    CallLimits {
        backtrace,
        ..CallLimits::default()
    }
}

/// A deterministic runtime and the module (a file, or an artifact pulled as the host pulls
/// it) loaded on it with the host's default limits, through the compile cache folder of
/// `loading` if any.
pub async fn load(
    source: &ModuleSource,
    (registries, compiled): (RegistrySettings, Option<PathBuf>),
) -> Result<(Runtime, Arc<Module>), RenderError> {
    let runtime = Runtime::deterministic()?.with_compile_cache_in(compiled);
    let limits = CallLimits::from(crate::config::Limits::default());
    let (origin, bytes) = source.read(registries).await?;
    let module = module::load_bytes(&runtime, origin, bytes, &limits).await?;
    Ok((runtime, module))
}

/// Stores `object` in `backend` (as a change made outside the guest) and calls `entry` with
/// it, as the host would once its cache holds it. The result holds exactly the writes and log
/// lines of this call.
pub async fn call(
    runtime: &Runtime,
    module: &Module,
    backend: &Arc<OfflineBackend>,
    limits: &CallLimits,
    entry: Entry,
    object: Value,
) -> Result<Rendered, RenderError> {
    let at = "the object to reconcile";
    validate(&object).map_err(|message| RenderError::Object {
        at: at.into(),
        message,
    })?;
    let object = as_cached(object);
    let metadata = &module.metadata;
    check_primary(metadata, &object)?;
    if entry == Entry::Finalize && metadata.finalizer.is_none() {
        return Err(RenderError::NoFinalizer(metadata.name.clone()));
    }
    let namespace = object["metadata"]["namespace"].as_str().map(str::to_owned);
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let scope = Scope {
        kind: metadata.primary.kind.clone(),
        namespace: namespace.clone(),
        name: name.clone(),
        uid: object["metadata"]["uid"].as_str().map(str::to_owned),
        deleting: !object["metadata"]["deletionTimestamp"].is_null(),
    };
    let request = types::Request {
        key: types::ObjectKey { namespace, name },
        reason: match entry {
            Entry::Reconcile => types::Reason::Added,
            Entry::Finalize => types::Reason::Changed,
        },
        attempt: 1,
        object: Some(object.to_string()),
    };
    backend.put(object);
    backend.take_writes();
    backend.take_logs();
    let env = Arc::new(GuestEnv::new(
        &metadata.name,
        metadata.declared(),
        backend.clone(),
        limits.host_call_timeout,
        Permissions::new(None),
    ));
    let (result, _) = dispatch::call(runtime, module, &env, limits, scope, entry, request).await;
    let (writes, effects) = backend.take_effects().into_iter().unzip();
    Ok(Rendered {
        writes,
        effects,
        logs: backend.take_logs(),
        result,
    })
}

/// The objects of a YAML (or JSON) file, in order, or of every `.yaml`, `.yml` and `.json` file
/// of a folder (not its subfolders), by file name. A file may hold several documents; empty
/// documents are skipped and the `items` of a list (`kind: List`, `PodList`, ...) are taken one
/// by one. Objects are returned [as cached](as_cached).
pub fn read_objects(path: &Path) -> Result<Vec<Value>, RenderError> {
    let read_error = |source| RenderError::Read {
        path: path.to_owned(),
        source,
    };
    if !path.is_dir() {
        return read_file(path);
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).map_err(read_error)? {
        let file = entry.map_err(read_error)?.path();
        let is_objects = file
            .extension()
            .is_some_and(|ext| ext == "yaml" || ext == "yml" || ext == "json");
        if is_objects && file.is_file() {
            files.push(file);
        }
    }
    files.sort();
    let mut objects = Vec::new();
    for file in files {
        objects.extend(read_file(&file)?);
    }
    Ok(objects)
}

fn read_file(path: &Path) -> Result<Vec<Value>, RenderError> {
    use serde::Deserialize;

    let text = std::fs::read_to_string(path).map_err(|source| RenderError::Read {
        path: path.to_owned(),
        source,
    })?;
    let mut objects = Vec::new();
    for (index, document) in serde_yaml::Deserializer::from_str(&text).enumerate() {
        let value = Value::deserialize(document).map_err(|source| RenderError::Parse {
            path: path.to_owned(),
            source,
        })?;
        let at = || format!("{}, document {}", path.display(), index + 1);
        let is_list = value["kind"].as_str().is_some_and(|k| k.ends_with("List"))
            && value["items"].is_array();
        let documents = match value {
            Value::Null => Vec::new(),
            mut list if is_list => match list["items"].take() {
                Value::Array(items) => items,
                _ => Vec::new(),
            },
            object => vec![object],
        };
        for object in documents {
            objects.push(fixture(object, &at())?);
        }
    }
    Ok(objects)
}

/// `object`, read `at` (such as `pods.yaml, document 2`), [as cached](as_cached); an error if
/// it lacks an `apiVersion`, a `kind` or a `metadata.name`.
pub fn fixture(object: Value, at: &str) -> Result<Value, RenderError> {
    validate(&object).map_err(|message| RenderError::Object {
        at: at.to_owned(),
        message,
    })?;
    Ok(as_cached(object))
}

/// `Ok` if `object` has an `apiVersion`, a `kind` and a non-empty `metadata.name`.
fn validate(object: &Value) -> Result<(), String> {
    if !object.is_object() {
        return Err("not a mapping".into());
    }
    if kind_of(object).is_none() {
        return Err("no valid apiVersion and kind".into());
    }
    match object["metadata"]["name"].as_str() {
        Some(name) if !name.is_empty() => Ok(()),
        _ => Err("no metadata.name".into()),
    }
}

/// `object` as the host's cache holds it: without `metadata.managedFields`, and with a
/// `metadata.uid`, which is, when missing, a UUID derived from the object's `apiVersion`,
/// `kind`, namespace and name (the same object always gets the same uid).
pub fn as_cached(mut object: Value) -> Value {
    use sha2::Digest;

    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return object;
    };
    metadata.remove("managedFields");
    if metadata
        .get("uid")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        let identity = format!(
            "{}\n{}\n{}\n{}",
            object["apiVersion"].as_str().unwrap_or_default(),
            object["kind"].as_str().unwrap_or_default(),
            object["metadata"]["namespace"].as_str().unwrap_or_default(),
            object["metadata"]["name"].as_str().unwrap_or_default(),
        );
        let hex: String = sha2::Sha256::digest(identity.as_bytes())
            .iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect();
        let uid = format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        );
        object["metadata"]["uid"] = Value::String(uid);
    }
    object
}

/// `Ok` if the host would hand `object` to the module: it is of the primary kind, in the
/// declared namespace (if any) and matches the declared label selector (if any).
fn check_primary(metadata: &Metadata, object: &Value) -> Result<(), RenderError> {
    let primary = &metadata.primary;
    let not_primary = |message: String| RenderError::NotPrimary {
        module: metadata.name.clone(),
        message,
    };
    let kind = kind_of(object).expect("the object was validated");
    if kind != primary.kind {
        return Err(not_primary(format!(
            "it is a {}, and the module's primary kind is {}",
            describe(&kind),
            describe(&primary.kind)
        )));
    }
    let namespace = object["metadata"]["namespace"].as_str();
    if let Some(declared) = &primary.namespace
        && namespace != Some(declared.as_str())
    {
        return Err(not_primary(format!(
            "it is not in namespace {declared}, the only one the module watches"
        )));
    }
    if let Some(selector) = &primary.selector {
        let labels: BTreeMap<String, String> = object["metadata"]["labels"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_owned())))
            .collect();
        if !selector.matches(&labels) {
            return Err(not_primary(format!(
                "its labels do not match the module's selector {selector}"
            )));
        }
    }
    Ok(())
}

fn describe(kind: &GroupVersionKind) -> String {
    format!("{} {}", kind.api_version(), kind.kind)
}

#[derive(Serialize)]
struct View<'a> {
    writes: Vec<WriteView<'a>>,
    logs: Vec<LogView<'a>>,
    result: ResultView,
}

/// One write as a one-key map.
#[derive(Serialize)]
#[serde(untagged)]
enum WriteView<'a> {
    Apply {
        apply: ApplyView<'a>,
    },
    ApplyStatus {
        #[serde(rename = "applyStatus")]
        apply_status: StatusView<'a>,
    },
    Patch {
        patch: PatchView<'a>,
    },
    Delete {
        delete: DeleteView<'a>,
    },
    Event {
        event: EventView<'a>,
    },
}

impl<'a> WriteView<'a> {
    fn of(write: &'a Write) -> Self {
        match write {
            Write::Apply(apply) if apply.status => WriteView::ApplyStatus {
                apply_status: StatusView {
                    object: &apply.object,
                },
            },
            Write::Apply(apply) => WriteView::Apply {
                apply: ApplyView {
                    force: apply.force,
                    object: &apply.object,
                },
            },
            Write::Patch(patch) => WriteView::Patch {
                patch: PatchView {
                    target: ObjectRef::of(&patch.kind, &patch.namespace, &patch.name),
                    patch_type: if patch.json_patch { "json" } else { "merge" },
                    patch: &patch.patch,
                },
            },
            Write::Delete(delete) => WriteView::Delete {
                delete: DeleteView {
                    target: ObjectRef::of(&delete.kind, &delete.namespace, &delete.name),
                    uid: delete.uid.as_deref(),
                    resource_version: delete.resource_version.as_deref(),
                },
            },
            Write::Event(event) => WriteView::Event {
                event: EventView {
                    regarding: ObjectRef::of(&event.kind, &event.namespace, &event.name),
                    event_type: if event.warning { "Warning" } else { "Normal" },
                    reason: &event.reason,
                    action: &event.action,
                    note: &event.note,
                },
            },
        }
    }
}

#[derive(Serialize)]
struct ApplyView<'a> {
    force: bool,
    object: &'a Value,
}

#[derive(Serialize)]
struct StatusView<'a> {
    object: &'a Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ObjectRef<'a> {
    api_version: String,
    kind: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
    name: &'a str,
}

impl<'a> ObjectRef<'a> {
    fn of(kind: &'a GroupVersionKind, namespace: &'a Option<String>, name: &'a str) -> Self {
        Self {
            api_version: kind.api_version(),
            kind: &kind.kind,
            namespace: namespace.as_deref(),
            name,
        }
    }
}

#[derive(Serialize)]
struct PatchView<'a> {
    #[serde(flatten)]
    target: ObjectRef<'a>,
    #[serde(rename = "type")]
    patch_type: &'static str,
    patch: &'a Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeleteView<'a> {
    #[serde(flatten)]
    target: ObjectRef<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_version: Option<&'a str>,
}

#[derive(Serialize)]
struct EventView<'a> {
    regarding: ObjectRef<'a>,
    #[serde(rename = "type")]
    event_type: &'static str,
    reason: &'a str,
    action: &'a str,
    note: &'a str,
}

/// A log line as a map: `level`, `message` and, when there are any, `fields` in the guest's
/// order.
struct LogView<'a>(&'a LogLine);

impl Serialize for LogView<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let line = self.0;
        let level = match line.level {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("level", level)?;
        map.serialize_entry("message", &line.message)?;
        if !line.fields.is_empty() {
            map.serialize_entry("fields", &Fields(&line.fields))?;
        }
        map.end()
    }
}

struct Fields<'a>(&'a [(String, String)]);

impl Serialize for Fields<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(key, value)| (key, value)))
    }
}

#[derive(Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
enum ResultView {
    Done,
    RequeueAfter { milliseconds: u64 },
    TransientError { message: String },
    PermanentError { message: String },
    Timeout { message: String },
    OutOfMemory { message: String },
    Trap { message: String },
    HostAtCapacity { message: String },
}

impl ResultView {
    fn of(result: &Result<Outcome, Failure>) -> Self {
        match result {
            Ok(Outcome::Done) => ResultView::Done,
            Ok(Outcome::RequeueAfter(delay)) => ResultView::RequeueAfter {
                milliseconds: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            },
            Err(Failure::Transient(message)) => ResultView::TransientError {
                message: message.clone(),
            },
            Err(Failure::Permanent(message)) => ResultView::PermanentError {
                message: message.clone(),
            },
            Err(failure @ Failure::Timeout(_)) => ResultView::Timeout {
                message: failure.to_string(),
            },
            Err(Failure::OutOfMemory(message)) => ResultView::OutOfMemory {
                message: message.clone(),
            },
            Err(Failure::Trap(message)) => ResultView::Trap {
                message: message.clone(),
            },
            Err(Failure::Busy(message)) => ResultView::HostAtCapacity {
                message: message.clone(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn kind(group: &str, version: &str, kind: &str) -> GroupVersionKind {
        GroupVersionKind::gvk(group, version, kind)
    }

    /// One write of each kind, two log lines and a requeue.
    fn every_write_log_and_result() -> Rendered {
        let pod = kind("", "v1", "Pod");
        Rendered {
            writes: vec![
                Write::Apply(ApplyRequest {
                    kind: pod.clone(),
                    namespace: Some("a".into()),
                    name: "p".into(),
                    object: json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p"}}),
                    status: false,
                    force: false,
                }),
                Write::Apply(ApplyRequest {
                    kind: pod.clone(),
                    namespace: Some("a".into()),
                    name: "p".into(),
                    object: json!({"status": {"phase": "Running"}}),
                    status: true,
                    force: true,
                }),
                Write::Patch(PatchRequest {
                    kind: kind("apps", "v1", "Deployment"),
                    namespace: None,
                    name: "d".into(),
                    patch: json!({"spec": {"replicas": 2}}),
                    json_patch: false,
                }),
                Write::Delete(DeleteRequest {
                    kind: pod.clone(),
                    namespace: Some("a".into()),
                    name: "p".into(),
                    uid: Some("u".into()),
                    resource_version: None,
                }),
                Write::Event(EventRequest {
                    kind: pod,
                    namespace: Some("a".into()),
                    name: "p".into(),
                    warning: true,
                    reason: "Failed".into(),
                    action: "Delete".into(),
                    note: "gone".into(),
                }),
            ],
            effects: Vec::new(),
            logs: vec![
                LogLine {
                    level: Level::Warn,
                    message: "careful".into(),
                    fields: vec![("z".into(), "1".into()), ("a".into(), "2".into())],
                },
                LogLine {
                    level: Level::Debug,
                    message: "plain".into(),
                    fields: Vec::new(),
                },
            ],
            result: Ok(Outcome::RequeueAfter(Duration::from_secs(30))),
        }
    }

    /// [`every_write_log_and_result`] as YAML.
    const EVERY_WRITE_LOG_AND_RESULT: &str = "writes:
- apply:
    force: false
    object:
      apiVersion: v1
      kind: Pod
      metadata:
        name: p
- applyStatus:
    object:
      status:
        phase: Running
- patch:
    apiVersion: apps/v1
    kind: Deployment
    name: d
    type: merge
    patch:
      spec:
        replicas: 2
- delete:
    apiVersion: v1
    kind: Pod
    namespace: a
    name: p
    uid: u
- event:
    regarding:
      apiVersion: v1
      kind: Pod
      namespace: a
      name: p
    type: Warning
    reason: Failed
    action: Delete
    note: gone
logs:
- level: warn
  message: careful
  fields:
    z: '1'
    a: '2'
- level: debug
  message: plain
result:
  outcome: requeue-after
  milliseconds: 30000
";

    #[test]
    fn every_write_log_and_result_renders_as_documented() {
        let rendered = every_write_log_and_result();
        assert_eq!(rendered.to_yaml(), EVERY_WRITE_LOG_AND_RESULT);
        assert_eq!(rendered.applies().count(), 1);
        assert_eq!(rendered.status_applies().count(), 1);
        assert_eq!(rendered.patches().count(), 1);
        assert_eq!(rendered.deletes().count(), 1);
        assert_eq!(rendered.events().count(), 1);
    }

    #[test]
    fn failures_render_with_their_message() {
        let yaml = |failure| {
            Rendered {
                writes: Vec::new(),
                effects: Vec::new(),
                logs: Vec::new(),
                result: Err(failure),
            }
            .to_yaml()
        };
        assert!(
            yaml(Failure::Transient("later".into()))
                .ends_with("outcome: transient-error\n  message: later\n")
        );
        assert!(
            yaml(Failure::Timeout(Duration::from_secs(10)))
                .ends_with("outcome: timeout\n  message: deadline of 10s exceeded\n")
        );
        assert!(yaml(Failure::OutOfMemory("grow".into())).contains("outcome: out-of-memory\n"));
        assert!(yaml(Failure::Trap("unreachable".into())).contains("outcome: trap\n"));
    }

    #[test]
    fn objects_get_a_stable_uid_and_lose_their_managed_fields() {
        let object = json!({"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": "p", "namespace": "a", "managedFields": []}});
        let cached = as_cached(object.clone());
        assert!(cached["metadata"].get("managedFields").is_none());
        let uid = cached["metadata"]["uid"].as_str().unwrap();
        assert_eq!(uid.len(), 36);
        assert_eq!(as_cached(object.clone())["metadata"]["uid"], uid);
        let mut elsewhere = object.clone();
        elsewhere["metadata"]["namespace"] = json!("b");
        assert_ne!(as_cached(elsewhere)["metadata"]["uid"], uid);
        let mut given = object;
        given["metadata"]["uid"] = json!("given");
        assert_eq!(as_cached(given)["metadata"]["uid"], "given");
    }

    #[test]
    fn files_hold_documents_and_lists_of_objects() {
        let dir = std::env::temp_dir().join(format!("kubewasm-render-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("objects.yaml");
        std::fs::write(
            &file,
            "---
apiVersion: v1
kind: PodList
items:
- {apiVersion: v1, kind: Pod, metadata: {name: a}}
- {apiVersion: v1, kind: Pod, metadata: {name: b}}
---
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c}
",
        )
        .unwrap();
        let names: Vec<Value> = read_objects(&file)
            .unwrap()
            .iter()
            .map(|object| object["metadata"]["name"].clone())
            .collect();
        assert_eq!(names, [json!("a"), json!("b"), json!("c")]);

        std::fs::write(&file, "apiVersion: v1\nkind: Pod\nmetadata: {}\n").unwrap();
        let error = read_objects(&file).unwrap_err().to_string();
        assert!(
            error.ends_with("objects.yaml, document 1: no metadata.name"),
            "{error}"
        );
        std::fs::write(&file, "- just\n- a list\n").unwrap();
        let error = read_objects(&dir).unwrap_err().to_string();
        assert!(error.ends_with("document 1: not a mapping"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
