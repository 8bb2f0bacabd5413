//! The host side of the contract's imports: every call is checked against what the guest
//! declared, then handed to its [`Backend`]; a call that reaches the API server runs under the
//! host-call timeout. Cache reads never wait: they hand the guest the cache's own text (see
//! [`link_cache`]).
//!
//! A write or event names exactly one object: its namespace is dropped for a cluster-scoped kind
//! and must otherwise be a DNS-1123 label, and its name must be one URL path segment of at most
//! 253 bytes (not `.` or `..`, of visible ASCII that a URL path carries, other than `/`, `%`,
//! `?` and `#`); any other is `invalid` and nothing is sent. An event's reason and action have 1
//! to 128 bytes and its note at most 1024, as the API server requires; checked before the event
//! counts into a series, so that such fields take no memory in the host.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use kube::api::GroupVersionKind;
use kube::core::GroupVersion;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use wasmtime::component::Linker;

use crate::cluster::selector::{LabelSelector, is_dns1123_label};
use crate::config::Verb;
use crate::wasm::backend::{
    ApplyRequest, Backend, CALLER, CallError, DeleteRequest, EventRequest, PatchRequest,
};
use crate::wasm::bindings::CACHE_INTERFACE;
use crate::wasm::bindings::kubewasm::controller::{events, log, types, writes};
use crate::wasm::env::{CallContext, GuestEnv};
use crate::wasm::limits::CallLimits;
use crate::wasm::limits::{Spend, check_size};
use crate::wasm::permissions::resource_of;
use crate::wasm::state::CallState;

impl CallContext {
    /// Checks a read of `kind` in `namespace`: the kind must be declared and `verb` granted.
    fn readable(
        &self,
        kind: types::Gvk,
        verb: Verb,
        namespace: Option<&str>,
    ) -> Result<GroupVersionKind, CallError> {
        let kind = GroupVersionKind::from(kind);
        if !self.env.declared.can_read(&kind) {
            return Err(CallError::Denied(format!(
                "{} is not a kind this controller declared",
                describe(&kind)
            )));
        }
        self.granted(&kind, None, &[verb], namespace)?;
        Ok(kind)
    }

    /// Checks a write of `kind` (or its `subresource`) in `namespace`: the kind must be the
    /// primary or an owned one, and every verb granted.
    fn writable(
        &self,
        kind: GroupVersionKind,
        subresource: Option<&str>,
        verbs: &[Verb],
        namespace: Option<&str>,
    ) -> Result<GroupVersionKind, CallError> {
        if !self.env.declared.can_write(&kind) {
            return Err(CallError::Denied(format!(
                "{} is neither the primary kind nor an owned kind of this controller",
                describe(&kind)
            )));
        }
        self.granted(&kind, subresource, verbs, namespace)?;
        Ok(kind)
    }

    fn granted(
        &self,
        kind: &GroupVersionKind,
        subresource: Option<&str>,
        verbs: &[Verb],
        namespace: Option<&str>,
    ) -> Result<(), CallError> {
        let permissions = &self.env.permissions;
        // A namespace named in a call does not narrow a cluster-scoped kind.
        let namespace = if self.env.backend.is_cluster_scoped(kind) {
            None
        } else {
            namespace
        };
        match verbs
            .iter()
            .find(|&&verb| !permissions.allows(kind, subresource, verb, namespace))
        {
            None => Ok(()),
            Some(verb) => {
                let mut resource = resource_of(kind);
                if let Some(subresource) = subresource {
                    resource = format!("{resource}/{subresource}");
                }
                Err(CallError::Denied(format!(
                    "no grant allows {} on {resource} ({}) in {}",
                    verb.as_str(),
                    describe(kind),
                    namespace.map_or("all namespaces".into(), |n| format!("namespace {n}"))
                )))
            }
        }
    }

    /// The namespace a write goes to: the given one, else the reconciled object's.
    fn namespace(&self, given: Option<String>) -> Option<String> {
        given.or_else(|| self.scope.as_ref().and_then(|s| s.namespace.clone()))
    }

    /// The namespace a write or event about `kind` is sent to: none for a cluster-scoped kind,
    /// whose objects have none (as for its permissions, a namespace named does not count), else
    /// `namespace`, which must be a namespace's name (a DNS-1123 label): it goes into the
    /// request's URL as it is, where `?` or `/` would address another resource.
    fn namespace_of(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<String>,
    ) -> Result<Option<String>, CallError> {
        if self.env.backend.is_cluster_scoped(kind) {
            return Ok(None);
        }
        match namespace {
            Some(namespace) if !is_dns1123_label(&namespace) => Err(CallError::Invalid(format!(
                "namespace {namespace:?} is not a namespace's name (a DNS-1123 label)"
            ))),
            namespace => Ok(namespace),
        }
    }

    /// Runs a backend call under the host-call timeout, on a task of its own: if the guest's
    /// deadline ends its call meanwhile, a write already on its way still completes and is
    /// recorded in the cache, so the guest's next reconcile reads it and does not repeat it;
    /// but it is not sent again (see [`CALLER`]), so it never lands after a later write.
    async fn timed<T: Send + 'static, F>(
        &self,
        call: impl FnOnce(Arc<dyn Backend>) -> F,
    ) -> Result<T, CallError>
    where
        F: Future<Output = Result<T, CallError>> + Send + 'static,
    {
        let caller = CancellationToken::new();
        // Cancels `caller` when this call returns or is dropped with the guest's instance.
        let _ended = caller.clone().drop_guard();
        let call = CALLER.scope(caller, call(self.env.backend.clone()));
        let timeout = self.env.host_call_timeout;
        let unanswered =
            || CallError::Unavailable(format!("no answer from the API server within {timeout:?}"));
        match self.writes.spawn(tokio::time::timeout(timeout, call)).await {
            Ok(answer) => answer.unwrap_or_else(|_| Err(unanswered())),
            Err(error) => Err(CallError::Unavailable(format!(
                "the host call failed: {error}"
            ))),
        }
    }

    /// Parses an object written by the guest: its kind, namespace (the reconciled object's if
    /// it names none), name and the object.
    fn intent(
        &self,
        object: &str,
    ) -> Result<(GroupVersionKind, Option<String>, String, Value), CallError> {
        let value: Value = serde_json::from_str(object)
            .map_err(|e| CallError::Invalid(format!("object is not valid JSON: {e}")))?;
        let api_version = value["apiVersion"]
            .as_str()
            .ok_or_else(|| CallError::Invalid("object has no apiVersion".into()))?;
        let kind = value["kind"]
            .as_str()
            .ok_or_else(|| CallError::Invalid("object has no kind".into()))?;
        let gvk = api_version
            .parse::<GroupVersion>()
            .map_err(|e| CallError::Invalid(e.to_string()))?
            .with_kind(kind);
        let name = value["metadata"]["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| CallError::Invalid("object has no metadata.name".into()))?
            .to_owned();
        let given = value["metadata"]["namespace"].as_str().map(str::to_owned);
        Ok((gvk, self.namespace(given), name, value))
    }

    fn owner_reference(&self) -> Result<Value, CallError> {
        let scope = self
            .scope
            .as_ref()
            .ok_or_else(|| CallError::Invalid("owned apply outside a reconcile".into()))?;
        let uid = scope
            .uid
            .as_ref()
            .ok_or_else(|| CallError::Invalid("the reconciled object does not exist".into()))?;
        Ok(serde_json::json!({
            "apiVersion": scope.kind.api_version(),
            "kind": scope.kind.kind,
            "name": scope.name,
            "uid": uid,
            "controller": true,
            "blockOwnerDeletion": true,
        }))
    }

    /// Applies `object` (to its `status` if `status`) with its namespace filled in (see
    /// [`CallContext::namespace_of`]). With `owned`, the reconciled object becomes its controller
    /// owner; an existing object that the reconciled object does not control is refused (409
    /// `AlreadyExists`) unless `adopt` and nothing controls it.
    async fn apply(
        &self,
        object: String,
        owned: bool,
        force: bool,
        adopt: bool,
        status: bool,
    ) -> Result<String, CallError> {
        let (kind, namespace, name, mut object) = self.intent(&object)?;
        let kind = if status {
            self.writable(kind, Some("status"), &[Verb::Patch], namespace.as_deref())?
        } else {
            self.writable(
                kind,
                None,
                &[Verb::Create, Verb::Patch],
                namespace.as_deref(),
            )?
        };
        let namespace = self.namespace_of(&kind, namespace)?;
        check_segment(&name)?;
        let owner = if owned {
            let reference = self.owner_reference()?;
            self.may_control(&kind, namespace.as_deref(), &name, &reference, adopt)?;
            Some(reference)
        } else {
            None
        };
        let metadata = object["metadata"]
            .as_object_mut()
            .ok_or_else(|| CallError::Invalid("metadata is not an object".into()))?;
        match &namespace {
            Some(namespace) => metadata.insert("namespace".into(), namespace.as_str().into()),
            None => metadata.remove("namespace"),
        };
        if let Some(reference) = owner {
            let references = metadata
                .entry("ownerReferences")
                .or_insert_with(|| Value::Array(Vec::new()));
            let references = references.as_array_mut().ok_or_else(|| {
                CallError::Invalid("metadata.ownerReferences is not a list".into())
            })?;
            references.retain(|r| r["uid"] != reference["uid"]);
            references.push(reference);
        }
        let request = ApplyRequest {
            kind,
            namespace,
            name,
            object,
            status,
            force,
        };
        self.timed(|backend| async move { backend.apply(request).await })
            .await
    }
}

impl CallContext {
    /// Whether an owned apply may make `reference` the controller of the object `name`, as the
    /// cache holds it: it does not exist, it is already controlled by `reference`'s object, or
    /// `adopt`, nothing controls it and neither it nor the reconciled object is being deleted.
    fn may_control(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        name: &str,
        reference: &Value,
        adopt: bool,
    ) -> Result<(), CallError> {
        let Some(existing) = self.env.backend.get(kind, namespace, name)? else {
            return Ok(());
        };
        let existing: Value = serde_json::from_str(&existing)
            .map_err(|e| CallError::Invalid(format!("cached object is not JSON: {e}")))?;
        let controller = existing["metadata"]["ownerReferences"]
            .as_array()
            .and_then(|references| references.iter().find(|r| r["controller"] == true));
        let refused = |why: String| CallError::Api {
            code: 409,
            reason: "AlreadyExists".into(),
            message: format!("{} {name} already exists and {why}", describe(kind)),
        };
        let owner = format!(
            "{} {}",
            reference["kind"].as_str().unwrap_or_default(),
            reference["name"].as_str().unwrap_or_default()
        );
        match controller {
            Some(controller) if controller["uid"] == reference["uid"] => Ok(()),
            Some(controller) => Err(refused(format!(
                "is controlled by {} {}",
                controller["kind"].as_str().unwrap_or("an object"),
                controller["name"].as_str().unwrap_or_default()
            ))),
            // As controller-runtime's adoption: neither side may be going away.
            None if adopt && !existing["metadata"]["deletionTimestamp"].is_null() => {
                Err(refused("is being deleted: it is not adopted".into()))
            }
            None if adopt && self.scope.as_ref().is_some_and(|s| s.deleting) => Err(refused(
                format!("is not controlled by {owner}, which is being deleted and adopts nothing"),
            )),
            None if adopt => Ok(()),
            None => Err(refused(format!(
                "is not controlled by {owner}: apply with `adopt` to take it over"
            ))),
        }
    }
}

/// Refuses a list the guest could not hold in `memory_bytes` (its text and, per object, a
/// pointer and a length) before any of it is copied into the guest.
fn fits_in_guest(objects: &[Arc<str>], memory_bytes: usize) -> Result<(), CallError> {
    let size: usize = objects.iter().map(|json| json.len() + 8).sum();
    if size <= memory_bytes {
        return Ok(());
    }
    Err(CallError::Invalid(format!(
        "the list of {} objects takes {size} bytes, more than the guest's memory limit of \
         {memory_bytes} bytes: narrow it with a namespace or a label selector",
        objects.len()
    )))
}

/// Longest reason and action of an Event, as the API server takes them.
const EVENT_WORD_BYTES: usize = 128;
/// Longest note of an Event, as the API server takes it.
const EVENT_NOTE_BYTES: usize = 1024;
/// Longest name of an object.
const NAME_BYTES: usize = 253;

/// Refuses an Event that names no object (see [`check_segment`]), or whose reason or action is
/// empty or longer than [`EVENT_WORD_BYTES`], or note longer than [`EVENT_NOTE_BYTES`], as the
/// API server does. Checked before the event is counted into a series, so that such fields take
/// no memory in the host.
fn check_event(event: &EventRequest) -> Result<(), CallError> {
    check_segment(&event.name)?;
    for (field, value) in [("reason", &event.reason), ("action", &event.action)] {
        if value.is_empty() || value.len() > EVENT_WORD_BYTES {
            return Err(CallError::Invalid(format!(
                "an event's {field} must have 1 to {EVENT_WORD_BYTES} bytes, not {}",
                value.len()
            )));
        }
    }
    if event.note.len() > EVENT_NOTE_BYTES {
        return Err(CallError::Invalid(format!(
            "an event's note must have at most {EVENT_NOTE_BYTES} bytes, not {}",
            event.note.len()
        )));
    }
    Ok(())
}

/// Refuses a name longer than [`NAME_BYTES`], or not one segment of the request's URL path,
/// where it goes as it is: `x/status` would address the status subresource, `..` the
/// collection, `?`, `#` and `%` would change the URL, and a space, a character beyond ASCII or
/// one such as `<` or `` ` `` cannot be in it. A name must not be empty, `.` or `..`, and be of
/// visible ASCII that a URL path carries as it is, other than `/`, `%`, `?` and `#`.
fn check_segment(name: &str) -> Result<(), CallError> {
    if name.len() > NAME_BYTES {
        return Err(CallError::Invalid(format!(
            "a name has at most {NAME_BYTES} bytes, not {}",
            name.len()
        )));
    }
    let segment = !matches!(name, "" | "." | "..")
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b"/%?#".contains(&b))
        && http::uri::PathAndQuery::try_from(format!("/{name}")).is_ok();
    if segment {
        return Ok(());
    }
    Err(CallError::Invalid(format!(
        "name {name:?} is not one URL path segment: it must not be empty, `.` or `..`, and be of \
         visible ASCII that a URL path carries, other than `/`, `%`, `?` and `#`"
    )))
}

fn describe(kind: &GroupVersionKind) -> String {
    format!("{}/{}", kind.api_version(), kind.kind)
}

fn to_wit(error: CallError) -> types::Error {
    match error {
        CallError::Api {
            code,
            reason,
            message,
        } => types::Error::Api(types::ApiStatus {
            code,
            reason,
            message,
        }),
        CallError::Denied(message) => types::Error::Denied(message),
        CallError::Invalid(message) => types::Error::Invalid(message),
        CallError::Unavailable(message) => types::Error::Unavailable(message),
    }
}

/// Whether `result` is the API server's trouble rather than the guest's request: a conflict,
/// throttling, a server error, or no answer in time.
fn cluster_trouble<T>(result: &Result<T, CallError>) -> bool {
    match result {
        Err(CallError::Api { code, .. }) => *code == 409 || *code == 429 || *code >= 500,
        Err(CallError::Unavailable(_)) => true,
        _ => false,
    }
}

fn answer<T>(
    result: Result<T, CallError>,
    env: &GuestEnv,
    limits: &CallLimits,
    call: &str,
) -> wasmtime::Result<Result<T, types::Error>> {
    match &result {
        Err(error @ CallError::Denied(_)) => {
            env.denied.fetch_add(1, Ordering::Relaxed);
            // Within the guest's log rate, so a guest looping on a denied call cannot flood
            // the host's log; the counter keeps every denial.
            if env.output.forward(&env.name, limits.log_lines_per_second) {
                tracing::warn!(guest = %env.name, call, %error, "host call denied");
            }
        }
        Err(error) => tracing::debug!(guest = %env.name, call, %error, "host call failed"),
        Ok(_) => {}
    }
    Ok(result.map_err(to_wit))
}

impl CallState {
    /// Refuses a write whose JSON is larger than the call's `write_bytes`.
    fn write_size(&self, what: &'static str, json: &str) -> Result<(), CallError> {
        check_size(what, json, self.limits.write_bytes)
            .map_err(|exceeded| CallError::Invalid(exceeded.to_string()))
    }

    /// Takes a `log` line of `size` bytes from the call's budget; says once that output was
    /// truncated when the budget runs out.
    fn log_fits(&mut self, size: usize) -> bool {
        match self.log_budget.spend(size) {
            Spend::Keep => true,
            Spend::Drop => false,
            Spend::Truncate => {
                let (guest, key) = (&self.context.env.name, self.context.key());
                let message = format!(
                    "log output truncated: more than {} bytes in one call",
                    self.limits.log_bytes
                );
                tracing::warn!(target: "guest", %guest, %key, "{message}");
                self.context.env.backend.log(crate::wasm::backend::LogLine {
                    level: log::Level::Warn,
                    message,
                    fields: Vec::new(),
                });
                false
            }
        }
    }
}

impl types::Host for CallState {}

impl CallState {
    /// The `get` import: the object's text as the cache holds it.
    pub(crate) fn get(
        &mut self,
        kind: types::Gvk,
        namespace: Option<String>,
        name: String,
    ) -> wasmtime::Result<Result<Option<Arc<str>>, types::Error>> {
        let context = &self.context;
        let result = context
            .readable(kind, Verb::Get, namespace.as_deref())
            .and_then(|kind| context.env.backend.get(&kind, namespace.as_deref(), &name));
        answer(result, &context.env, &self.limits, "get")
    }

    /// The `list` import: the texts as the cache holds them, refused if they do not fit in the
    /// guest's memory.
    pub(crate) fn list(
        &mut self,
        kind: types::Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> wasmtime::Result<Result<Vec<Arc<str>>, types::Error>> {
        let context = &self.context;
        let result = context
            .readable(kind, Verb::List, namespace.as_deref())
            .and_then(|kind| {
                let selector = label_selector
                    .as_deref()
                    .map(str::parse::<LabelSelector>)
                    .transpose()
                    .map_err(|e| CallError::Invalid(e.to_string()))?;
                let objects =
                    context
                        .env
                        .backend
                        .list(&kind, namespace.as_deref(), selector.as_ref())?;
                fits_in_guest(&objects, self.limits.memory_bytes)?;
                Ok(objects)
            });
        answer(result, &context.env, &self.limits, "list")
    }

    /// The `list-controlled` import: as `list`, the objects whose controller has `uid`.
    pub(crate) fn list_controlled(
        &mut self,
        kind: types::Gvk,
        namespace: Option<String>,
        uid: String,
    ) -> wasmtime::Result<Result<Vec<Arc<str>>, types::Error>> {
        let context = &self.context;
        let result = context
            .readable(kind, Verb::List, namespace.as_deref())
            .and_then(|kind| {
                let backend = &context.env.backend;
                let objects = backend.list_controlled(&kind, namespace.as_deref(), &uid)?;
                fits_in_guest(&objects, self.limits.memory_bytes)?;
                Ok(objects)
            });
        answer(result, &context.env, &self.limits, "list-controlled")
    }
}

/// Links the `cache` imports of the current contract version (see
/// [`imports_0_1::link_cache`](crate::wasm::imports_0_1::link_cache) for 0.1.0's). They are
/// linked by hand rather than through the generated trait, whose strings are owned: an object's
/// text goes from the cache straight into the guest's memory, and a call holds on the host,
/// besides the cache, one pointer per object it returns.
pub fn link_cache(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    let mut cache = linker.instance(CACHE_INTERFACE)?;
    cache.func_wrap(
        "get",
        |mut store, (kind, ns, name): (types::Gvk, Option<String>, String)| {
            Ok((store.data_mut().get(kind, ns, name)?,))
        },
    )?;
    cache.func_wrap(
        "list",
        |mut store, (kind, ns, selector): (types::Gvk, Option<String>, Option<String>)| {
            Ok((store.data_mut().list(kind, ns, selector)?,))
        },
    )?;
    cache.func_wrap(
        "list-controlled",
        |mut store, (kind, ns, uid): (types::Gvk, Option<String>, String)| {
            Ok((store.data_mut().list_controlled(kind, ns, uid)?,))
        },
    )?;
    Ok(())
}

impl writes::Host for CallState {
    async fn apply(
        &mut self,
        object: String,
        options: writes::ApplyOptions,
    ) -> wasmtime::Result<Result<String, types::Error>> {
        let result = match self.write_size("object", &object) {
            Ok(()) => {
                let writes::ApplyOptions {
                    owned,
                    force,
                    adopt,
                } = options;
                self.context.apply(object, owned, force, adopt, false).await
            }
            Err(error) => Err(error),
        };
        self.cluster_trouble |= cluster_trouble(&result);
        answer(result, &self.context.env, &self.limits, "apply")
    }

    async fn apply_status(
        &mut self,
        object: String,
        options: writes::StatusOptions,
    ) -> wasmtime::Result<Result<String, types::Error>> {
        let result = match self.write_size("object", &object) {
            Ok(()) => {
                self.context
                    .apply(object, false, options.force, false, true)
                    .await
            }
            Err(error) => Err(error),
        };
        self.cluster_trouble |= cluster_trouble(&result);
        answer(result, &self.context.env, &self.limits, "apply-status")
    }

    async fn delete(
        &mut self,
        kind: types::Gvk,
        namespace: Option<String>,
        name: String,
        preconditions: writes::Preconditions,
    ) -> wasmtime::Result<Result<(), types::Error>> {
        let context = &self.context;
        let result = async {
            let namespace = context.namespace(namespace);
            let kind =
                context.writable(kind.into(), None, &[Verb::Delete], namespace.as_deref())?;
            let namespace = context.namespace_of(&kind, namespace)?;
            check_segment(&name)?;
            let request = DeleteRequest {
                kind,
                namespace,
                name,
                uid: preconditions.uid,
                resource_version: preconditions.resource_version,
            };
            context
                .timed(|backend| async move { backend.delete(request).await })
                .await
        }
        .await;
        self.cluster_trouble |= cluster_trouble(&result);
        answer(result, &self.context.env, &self.limits, "delete")
    }

    async fn patch(
        &mut self,
        kind: types::Gvk,
        namespace: Option<String>,
        name: String,
        patch_type: writes::PatchType,
        patch: String,
    ) -> wasmtime::Result<Result<String, types::Error>> {
        let size = self.write_size("patch", &patch);
        let context = &self.context;
        let result = async {
            size?;
            let namespace = context.namespace(namespace);
            let kind = context.writable(kind.into(), None, &[Verb::Patch], namespace.as_deref())?;
            let namespace = context.namespace_of(&kind, namespace)?;
            check_segment(&name)?;
            let patch: Value = serde_json::from_str(&patch)
                .map_err(|e| CallError::Invalid(format!("patch is not valid JSON: {e}")))?;
            let request = PatchRequest {
                kind,
                namespace,
                name,
                patch,
                json_patch: matches!(patch_type, writes::PatchType::Json),
            };
            context
                .timed(|backend| async move { backend.patch(request).await })
                .await
        }
        .await;
        self.cluster_trouble |= cluster_trouble(&result);
        answer(result, &self.context.env, &self.limits, "patch")
    }
}

impl events::Host for CallState {
    async fn record_event(
        &mut self,
        event: events::Event,
    ) -> wasmtime::Result<Result<(), types::Error>> {
        let context = &self.context;
        let result = async {
            let namespace = context.namespace(event.regarding_namespace);
            let kind = context.readable(event.regarding_kind, Verb::Get, namespace.as_deref())?;
            let namespace = context.namespace_of(&kind, namespace)?;
            let request = EventRequest {
                kind,
                namespace,
                name: event.regarding_name,
                warning: matches!(event.event_type, events::EventType::Warning),
                reason: event.reason,
                action: event.action,
                note: event.note,
            };
            check_event(&request)?;
            context
                .timed(|backend| async move { backend.event(request).await })
                .await
        }
        .await;
        answer(result, &context.env, &self.limits, "record-event")
    }
}

impl log::Host for CallState {
    async fn log(
        &mut self,
        level: log::Level,
        message: String,
        pairs: Vec<(String, String)>,
    ) -> wasmtime::Result<()> {
        let size = message.len() + pairs.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>();
        if !self.log_fits(size) {
            return Ok(());
        }
        let guest = &self.context.env.name;
        let key = self.context.key();
        let fields = pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        let admitted = self
            .context
            .env
            .output
            .forward(guest, self.limits.log_lines_per_second);
        if admitted {
            match level {
                log::Level::Trace => {
                    tracing::trace!(target: "guest", %guest, %key, %fields, "{message}")
                }
                log::Level::Debug => {
                    tracing::debug!(target: "guest", %guest, %key, %fields, "{message}")
                }
                log::Level::Info => {
                    tracing::info!(target: "guest", %guest, %key, %fields, "{message}")
                }
                log::Level::Warn => {
                    tracing::warn!(target: "guest", %guest, %key, %fields, "{message}")
                }
                log::Level::Error => {
                    tracing::error!(target: "guest", %guest, %key, %fields, "{message}")
                }
            }
        }
        let line = crate::wasm::backend::LogLine {
            level,
            message,
            fields: pairs,
        };
        self.context.env.backend.log(line);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
