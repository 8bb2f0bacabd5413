//! The API writer: executes a guest's checked writes against the cluster with the guest's own
//! field manager, and serves its reads from the informers it declared.
//!
//! A successful write is recorded in the guest's informers at once (see
//! [`crate::cluster::cache::Store::record_write`]): the next reconcile reads it even if the watch has not
//! delivered it yet, so a controller that creates objects does not create them twice.
//!
//! A write that may be sent twice safely (an apply, a merge patch, a delete) is sent again while
//! the API server cannot be reached or asks for a retry, up to the host-call timeout. A write
//! whose answer was lost may have taken effect: sending it again learns the outcome and records
//! it, where failing would leave the guest acting on a cache that lacks it, creating a second
//! object under a new name.
//!
//! An apply is not sent when it would change nothing: every field of the intent has the same
//! value in the cached object, and the fields the guest's field manager owns there, as the
//! object's `managedFields` record its last apply, are exactly the intent's fields (see
//! [`crate::cluster::managed`]), so no field would be released or taken. The cached version that
//! answered the host's own apply (also when it is the version the cache held, as after an apply
//! that changed nothing) keeps, instead of that manager's fields, the digest of the intent sent,
//! which the same intent matches. Nothing else is remembered of past applies: the check holds
//! after a restart, and an object deleted and created again, which records no apply of the
//! guest, is applied again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use either::Either;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{
    DeleteParams, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, Patch, PatchParams,
    PostParams, Preconditions, PropagationPolicy,
};
use serde_json::Value;
use tokio::time::Instant;

use crate::cluster::cache::{AppliedFields, CachedObject, FIELD_MANAGER_PREFIX, ObjectKey, Store};
use crate::cluster::leader;
use crate::cluster::managed::{self, IntentDigest};
use crate::cluster::resources::Resources;
use crate::cluster::selection::Selection;
use crate::cluster::selector::LabelSelector;
use crate::cluster::watch::Informer;
use crate::control::events::{Correlator, Decision, EventKey};
use crate::shard::write::SHARDER_FIELD_MANAGER;
use crate::wasm::backend::{
    ApplyRequest, Backend, CallError, DeleteRequest, EventRequest, PatchRequest, caller_gone,
};

/// Runs one guest's calls against the cluster.
pub struct ClusterBackend {
    resources: Arc<Resources>,
    field_manager: String,
    controller: String,
    informers: Vec<Arc<Informer>>,
    /// The guest's selections, when an informer serves more than they select (one of every
    /// namespace serving a namespace's): reads are narrowed to the objects one of them selects.
    narrowed: Option<Vec<Selection>>,
    patience: Duration,
    elided: AtomicU64,
    events: Mutex<Correlator>,
    /// When sharded, the shard label, this member's name and the primary kind: the label is
    /// set on every object of another kind the guest applies with a controller owner.
    shard: Option<(String, String, GroupVersionKind)>,
}

/// First pause before a write is sent again; it doubles up to [`MAX_RESEND_PAUSE`].
const FIRST_RESEND_PAUSE: Duration = Duration::from_millis(50);
const MAX_RESEND_PAUSE: Duration = Duration::from_secs(1);
/// Objects per page of a metadata list.
const LIST_PAGE: u32 = 500;

impl ClusterBackend {
    /// A backend for the guest `controller`, reading what its `selections` select from
    /// `informers`, that sends an idempotent write again for up to `patience` while the API
    /// server cannot answer it. With `shard` (label, member, primary kind), every object not of
    /// the primary kind applied with a controller owner carries that label, so that it stays in
    /// the owner's shard.
    pub fn new(
        resources: Arc<Resources>,
        controller: &str,
        (informers, selections): (Vec<Arc<Informer>>, Vec<Selection>),
        patience: Duration,
        shard: Option<(String, String, GroupVersionKind)>,
    ) -> Self {
        let wider = informers
            .iter()
            .any(|i| !selections.contains(i.selection()));
        Self {
            resources,
            field_manager: field_manager(controller),
            controller: controller.to_owned(),
            informers,
            narrowed: wider.then_some(selections),
            patience,
            elided: AtomicU64::new(0),
            events: Mutex::default(),
            shard,
        }
    }

    /// How many events were dropped over an object's rate.
    pub fn events_dropped(&self) -> u64 {
        self.events.lock().expect("events lock").dropped()
    }

    /// How many applies were not sent because the cluster already matched them.
    pub fn elided(&self) -> u64 {
        self.elided.load(Ordering::Relaxed)
    }

    /// The cached object with this key, from the informer that saw it last if several hold it.
    fn cached(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<CachedObject>> {
        self.informers
            .iter()
            .filter(|i| &i.selection().kind == kind)
            .filter_map(|i| {
                i.store()
                    .get(&ObjectKey {
                        namespace: namespace.map(str::to_owned),
                        name: name.to_owned(),
                    })
                    .or_else(|| {
                        i.store().get(&ObjectKey {
                            namespace: None,
                            name: name.to_owned(),
                        })
                    })
            })
            .filter(|o| self.selected(kind, o))
            .max_by_key(|o| o.version())
    }

    /// Whether one of the guest's selections of `kind` has `object`, when an informer serves
    /// more.
    fn selected(&self, kind: &GroupVersionKind, object: &CachedObject) -> bool {
        self.narrowed.as_ref().is_none_or(|selections| {
            selections
                .iter()
                .any(|s| &s.kind == kind && s.selects(object))
        })
    }

    /// The informers of `kind`.
    fn of_kind(&self, kind: &GroupVersionKind) -> Vec<&Arc<Informer>> {
        self.informers
            .iter()
            .filter(|i| &i.selection().kind == kind)
            .collect()
    }

    /// Makes a written object visible to this guest's reads at once.
    fn record(informers: &[&Arc<Informer>], object: DynamicObject) -> Arc<str> {
        Self::record_cached(informers, CachedObject::new(object))
    }

    /// Like [`Self::record`], for a written object already in its cached form.
    fn record_cached(informers: &[&Arc<Informer>], object: CachedObject) -> Arc<str> {
        for informer in informers {
            informer.record_write(&object);
        }
        object.json().clone()
    }

    /// Whether applying `request` to `cached` would change nothing: the values of the intent
    /// are all there, and the guest's field manager owns exactly the intent's fields (a manager
    /// without an entry owns none, as after an apply that set no field). The host's own last
    /// apply of this version owns them if it sent the same intent.
    fn unchanged_by(
        &self,
        cached: &CachedObject,
        request: &ApplyRequest,
        intent: IntentDigest,
    ) -> bool {
        let subresource = request.status.then_some("status");
        let owned = cached
            .applied()
            .iter()
            .find(|a| *a.manager == self.field_manager && a.subresource.as_deref() == subresource)
            .map(|a| &a.fields);
        let owns_exactly = match owned {
            Some(AppliedFields::Sent(sent)) => *sent == intent,
            Some(AppliedFields::Recorded(fields)) => managed::owns_exactly(
                &serde_json::from_str(fields).expect("the cache holds valid JSON"),
                &request.object,
            ),
            None => managed::owns_exactly(&Value::Object(serde_json::Map::new()), &request.object),
        };
        owns_exactly && contains(&cached.parse(), &request.object)
    }

    /// Sets the finalizers of `object` as cached to `finalizers`, with its resourceVersion: a
    /// conflict if the object changed since. The patched object is recorded, so the next
    /// reconcile reads it even before the watch delivers it. Only removing finalizers from an
    /// object that is already gone succeeds.
    pub async fn set_finalizers(
        &self,
        kind: &GroupVersionKind,
        object: &CachedObject,
        finalizers: &[&str],
    ) -> Result<(), CallError> {
        let removing = finalizers.iter().all(|f| object.has_finalizer(f));
        let api = self.api(kind, object.namespace()).await?;
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": object.resource_version(), "finalizers": finalizers }
        });
        let params = PatchParams {
            field_manager: Some(self.field_manager.clone()),
            ..PatchParams::default()
        };
        let informers = self.of_kind(kind);
        match api
            .patch(object.name(), &params, &Patch::Merge(&patch))
            .await
        {
            Ok(patched) => {
                Self::record(&informers, patched);
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.code == 404 && removing => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Removes `labels` from `object` and sets the annotation `(key, value)` (removes it for no
    /// value) with a merge patch by the sharder's field manager, at the object's
    /// resourceVersion: a conflict if it changed since (another member may hold it by now).
    /// False when the object is gone.
    pub async fn remove_labels(
        &self,
        kind: &GroupVersionKind,
        object: &CachedObject,
        labels: &[&str],
        (key, value): (&str, Option<String>),
    ) -> Result<bool, CallError> {
        let api = self.api(kind, object.namespace()).await?;
        let removed: serde_json::Map<String, Value> = labels
            .iter()
            .map(|label| ((*label).to_owned(), Value::Null))
            .collect();
        let patch = serde_json::json!({
            "metadata": {
                "resourceVersion": object.resource_version(),
                "labels": removed,
                "annotations": { key: value },
            }
        });
        let params = PatchParams {
            field_manager: Some(SHARDER_FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        match api
            .patch(object.name(), &params, &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    /// The object of `kind` named `name` as the API server has it now, read past the cache.
    pub async fn live(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<CachedObject>, CallError> {
        let api = self.api(kind, namespace).await?;
        Ok(api.get_opt(name).await?.map(CachedObject::new))
    }

    /// Hands the metadata of every object of `kind` in `namespace` (or all) to `each`, listed
    /// page by page past any label selector; nothing is kept.
    pub async fn each_metadata(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        mut each: impl FnMut(ObjectMeta),
    ) -> Result<(), CallError> {
        let api = self.api(kind, namespace).await?;
        let mut params = ListParams::default().limit(LIST_PAGE);
        loop {
            let page = api.list_metadata(&params).await?;
            page.items.into_iter().for_each(|o| each(o.metadata));
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => return Ok(()),
            }
        }
    }

    async fn api(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
    ) -> Result<Api<DynamicObject>, CallError> {
        self.resources
            .api(kind, namespace)
            .await
            .map_err(CallError::from)
    }
}

/// Sends an idempotent write (`send` gets the number of the try, from 1), and again after a
/// pause while it fails in a way a later try may not; the last answer, and whether an earlier
/// try may have taken effect unanswered. A try starts only while the guest call it is for goes
/// on (see [`caller_gone`]) and a fifth of `patience` remains after its pause, time for it to
/// be answered before the host-call timeout cuts it off unrecorded.
async fn resend<T, F>(
    patience: Duration,
    mut send: impl FnMut(u32) -> F,
) -> (Result<T, kube::Error>, bool)
where
    F: Future<Output = Result<T, kube::Error>>,
{
    let started = Instant::now();
    let last_start = patience - patience / 5;
    let mut pause = FIRST_RESEND_PAUSE;
    let mut unanswered = false;
    let mut tries = 1;
    loop {
        let result = send(tries).await;
        let Err(error) = &result else {
            return (result, unanswered);
        };
        let Some(wait) = resend_after(error) else {
            return (result, unanswered);
        };
        // A 504 may come after the write was committed.
        unanswered |= !matches!(error, kube::Error::Api(s) if s.code != 504);
        let wait = wait.max(pause);
        if started.elapsed() + wait >= last_start || caller_gone() {
            return (result, unanswered);
        }
        tracing::debug!(%error, ?wait, "write failed; sending it again");
        tokio::time::sleep(wait).await;
        if caller_gone() {
            return (result, unanswered);
        }
        pause = (pause * 2).min(MAX_RESEND_PAUSE);
        tries += 1;
    }
}

/// How long to wait before sending a write again after `error`, or `None` if sending it again
/// would not help: the API server could not be reached or its answer was lost, or it asked for
/// a retry (429 Too Many Requests, 503 Service Unavailable, 504 Gateway Timeout), after the
/// seconds it named, if any.
fn resend_after(error: &kube::Error) -> Option<Duration> {
    match error {
        kube::Error::HyperError(_) | kube::Error::Service(_) => Some(Duration::ZERO),
        kube::Error::Api(status) if matches!(status.code, 429 | 503 | 504) => {
            Some(Duration::from_secs(
                status
                    .details
                    .as_ref()
                    .map_or(0, |d| u64::from(d.retry_after_seconds)),
            ))
        }
        _ => None,
    }
}

/// Sets the label `label=value` on `object` if it has a controller owner reference.
fn label_owned(object: &mut Value, label: &str, value: &str) {
    let metadata = &mut object["metadata"];
    let controlled = metadata["ownerReferences"]
        .as_array()
        .is_some_and(|owners| owners.iter().any(|o| o["controller"] == true));
    if !controlled {
        return;
    }
    if metadata.get("labels").is_none_or(Value::is_null) {
        metadata["labels"] = Value::Object(serde_json::Map::new());
    }
    if let Some(labels) = metadata["labels"].as_object_mut() {
        labels.insert(label.to_owned(), value.into());
    }
}

/// The field manager of a guest.
pub fn field_manager(controller: &str) -> String {
    format!("{FIELD_MANAGER_PREFIX}{controller}")
}

impl ClusterBackend {
    /// What `read` finds in the stores of every informer of `kind`, in key order; an object
    /// several informers hold is read from the one that saw it last.
    fn gather(
        &self,
        kind: &GroupVersionKind,
        read: impl Fn(&Store) -> Vec<Arc<CachedObject>>,
    ) -> Vec<Arc<str>> {
        let mut found = Vec::new();
        let mut stores = 0;
        for informer in self
            .informers
            .iter()
            .filter(|i| &i.selection().kind == kind)
        {
            found.extend(
                read(informer.store())
                    .into_iter()
                    .filter(|o| self.selected(kind, o)),
            );
            stores += 1;
        }
        if stores > 1 {
            found.sort_by_key(|o| (o.key(), std::cmp::Reverse(o.version())));
            found.dedup_by(|a, b| a.key() == b.key());
        }
        found.into_iter().map(|o| o.json().clone()).collect()
    }
}

#[async_trait]
impl Backend for ClusterBackend {
    fn is_cluster_scoped(&self, kind: &GroupVersionKind) -> bool {
        self.resources.namespaced(kind) == Some(false)
    }

    fn get(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<str>>, CallError> {
        Ok(self.cached(kind, namespace, name).map(|o| o.json().clone()))
    }

    fn list(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        selector: Option<&LabelSelector>,
    ) -> Result<Vec<Arc<str>>, CallError> {
        Ok(self.gather(kind, |store| store.list(namespace, selector)))
    }

    fn list_controlled(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        uid: &str,
    ) -> Result<Vec<Arc<str>>, CallError> {
        Ok(self.gather(kind, |store| store.controlled(uid, namespace)))
    }

    async fn apply(&self, mut request: ApplyRequest) -> Result<String, CallError> {
        if let Some((label, member, primary)) = &self.shard
            && !request.status
            && request.kind != *primary
        {
            label_owned(&mut request.object, label, member);
        }
        let cached = self.cached(&request.kind, request.namespace.as_deref(), &request.name);
        let intent = managed::digest(&request.object);
        if let Some(cached) = cached
            && self.unchanged_by(&cached, &request, intent)
        {
            self.elided.fetch_add(1, Ordering::Relaxed);
            return Ok(cached.json().to_string());
        }
        let api = self
            .api(&request.kind, request.namespace.as_deref())
            .await?;
        let informers = self.of_kind(&request.kind);
        let mut params = PatchParams::apply(&self.field_manager);
        params.force = request.force;
        let patch = Patch::Apply(&request.object);
        let (result, _) = resend(self.patience, |_| async {
            if request.status {
                api.patch_status(&request.name, &params, &patch).await
            } else {
                api.patch(&request.name, &params, &patch).await
            }
        })
        .await;
        let applied = CachedObject::new(result?).sent(
            &self.field_manager,
            request.status.then_some("status"),
            intent,
        );
        Ok(Self::record_cached(&informers, applied).to_string())
    }

    async fn patch(&self, request: PatchRequest) -> Result<String, CallError> {
        let api = self
            .api(&request.kind, request.namespace.as_deref())
            .await?;
        let params = PatchParams {
            field_manager: Some(self.field_manager.clone()),
            ..PatchParams::default()
        };
        let informers = self.of_kind(&request.kind);
        let object = if request.json_patch {
            let patch: json_patch::Patch = serde_json::from_value(request.patch)
                .map_err(|e| CallError::Invalid(format!("not an RFC 6902 JSON patch: {e}")))?;
            api.patch(&request.name, &params, &Patch::Json::<()>(patch))
                .await?
        } else {
            let patch = Patch::Merge(&request.patch);
            resend(self.patience, |_| api.patch(&request.name, &params, &patch))
                .await
                .0?
        };
        Ok(Self::record(&informers, object).to_string())
    }

    async fn delete(&self, request: DeleteRequest) -> Result<(), CallError> {
        let api = self
            .api(&request.kind, request.namespace.as_deref())
            .await?;
        let key = ObjectKey {
            namespace: request.namespace.clone(),
            name: request.name.clone(),
        };
        let uid = request.uid.clone().or_else(|| {
            self.cached(&request.kind, request.namespace.as_deref(), &request.name)
                .and_then(|o| o.uid().map(str::to_owned))
        });
        let informers = self.of_kind(&request.kind);
        let params = |preconditions| DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            preconditions: Some(preconditions),
            ..DeleteParams::default()
        };
        let first = params(Preconditions {
            uid: request.uid.clone(),
            resource_version: request.resource_version.clone(),
        });
        // Sent again, it must not delete an object created under the name since the first try,
        // nor fail because the first try changed the resourceVersion (by setting
        // deletionTimestamp).
        let again = params(Preconditions {
            uid: uid.clone(),
            resource_version: None,
        });
        let send = |tries| {
            let params = if tries == 1 { &first } else { &again };
            api.delete(&request.name, params)
        };
        let deleted = match resend(self.patience, send).await {
            (Ok(deleted), _) => Some(deleted),
            // An earlier try deleted it, and its answer was lost.
            (Err(kube::Error::Api(status)), true) if status.code == 404 => None,
            (Err(error), _) => return Err(error.into()),
        };
        match deleted {
            // Still there: terminating, waiting for finalizers or a grace period.
            Some(Either::Left(object)) if object.metadata.deletion_timestamp.is_some() => {
                Self::record(&informers, object);
            }
            // Gone: some kinds answer with the deleted object, others with a status.
            _ => {
                if let Some(uid) = uid {
                    for informer in &informers {
                        informer.record_delete(&key, &uid);
                    }
                }
            }
        }
        Ok(())
    }

    async fn event(&self, request: EventRequest) -> Result<(), CallError> {
        let uid = self
            .cached(&request.kind, request.namespace.as_deref(), &request.name)
            .and_then(|o| o.uid().map(str::to_owned));
        let namespace = request
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let regarding = format!(
            "{}/{}/{}/{}/{}",
            request.kind.api_version(),
            request.kind.kind,
            namespace,
            request.name,
            uid.as_deref().unwrap_or_default()
        );
        let key: EventKey = (
            regarding,
            request.warning,
            request.reason.clone(),
            request.action.clone(),
            request.note.clone(),
        );
        let decision = self
            .events
            .lock()
            .expect("events lock")
            .observe(&key, Instant::now());
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        match decision {
            Decision::Merged | Decision::Dropped => Ok(()),
            Decision::Count {
                namespace,
                name,
                count,
            } => self.count_event(&key, &namespace, &name, count, now).await,
            Decision::Create => self.create_event(&request, uid, &key, namespace, now).await,
        }
    }
}

impl ClusterBackend {
    /// Counts one more occurrence on the Event `namespace/name` of `key`; a failed patch
    /// makes the next occurrence start a new Event.
    async fn count_event(
        &self,
        key: &EventKey,
        namespace: &str,
        name: &str,
        count: u32,
        now: MicroTime,
    ) -> Result<(), CallError> {
        let api = Api::<Event>::namespaced(self.resources.client().clone(), namespace);
        let series = serde_json::json!({
            "series": { "count": count, "lastObservedTime": now },
        });
        let patched = api
            .patch(name, &PatchParams::default(), &Patch::Merge(&series))
            .await;
        if patched.is_err() {
            // Gone or unwritable: the next occurrence starts a new Event.
            self.events.lock().expect("events lock").created(key, None);
        }
        patched?;
        Ok(())
    }

    /// Creates the Event of `request` about the object with `uid`, and records its name for
    /// `key` so that the next occurrences count on it.
    async fn create_event(
        &self,
        request: &EventRequest,
        uid: Option<String>,
        key: &EventKey,
        namespace: String,
        now: MicroTime,
    ) -> Result<(), CallError> {
        let event: Event = serde_json::from_value(serde_json::json!({
            "metadata": { "name": event_name(&request.name), "namespace": namespace },
            "eventTime": now,
            "reportingController": format!("kubewasm.dev/{}", self.controller),
            "reportingInstance": leader::replica_name(),
            "action": request.action,
            "reason": request.reason,
            "note": request.note,
            "type": if request.warning { "Warning" } else { "Normal" },
            "regarding": {
                "apiVersion": request.kind.api_version(),
                "kind": request.kind.kind,
                "namespace": request.namespace,
                "name": request.name,
                "uid": uid,
            },
        }))
        .map_err(|e| CallError::Invalid(format!("building the event: {e}")))?;
        let api = Api::<Event>::namespaced(self.resources.client().clone(), &namespace);
        let created = api.create(&PostParams::default(), &event).await;
        let name = created.as_ref().ok().and_then(|e| e.metadata.name.clone());
        self.events
            .lock()
            .expect("events lock")
            .created(key, name.map(|name| (namespace, name)));
        created?;
        Ok(())
    }
}

/// A unique event name in client-go's style: the object's name and a hexadecimal timestamp.
pub fn event_name(regarding: &str) -> String {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    format!("{regarding}.{nanos:x}{sequence:x}")
}

/// Whether every field of `intent` has the same value in `actual`. Lists must have the same
/// length and contain their intent items in order.
pub fn contains(actual: &Value, intent: &Value) -> bool {
    match (actual, intent) {
        (Value::Object(actual), Value::Object(intent)) => intent
            .iter()
            .all(|(key, value)| actual.get(key).is_some_and(|a| contains(a, value))),
        (Value::Array(actual), Value::Array(intent)) => {
            actual.len() == intent.len() && actual.iter().zip(intent).all(|(a, i)| contains(a, i))
        }
        (Value::Number(a), Value::Number(i)) => a.as_f64() == i.as_f64(),
        _ => actual == intent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;
    use kube::core::response::StatusDetails;
    use tokio_util::sync::CancellationToken;

    use crate::wasm::backend::CALLER;
    use serde_json::json;

    fn configmap(namespace: &str, name: &str) -> CachedObject {
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "5", "uid": name},
        });
        CachedObject::new(serde_json::from_value(object).unwrap())
    }

    #[tokio::test]
    async fn a_guest_served_by_an_informer_of_every_namespace_reads_only_its_own() {
        let resources = Resources::unreachable();
        let informers = crate::cluster::watch::Informers::new(resources.clone(), 1);
        let kind = GroupVersionKind::gvk("", "v1", "ConfigMap");
        let selection = |namespace: Option<&str>| Selection {
            kind: kind.clone(),
            namespace: namespace.map(str::to_owned),
            selector: None,
        };
        let wide = informers.acquire(&selection(None), &Default::default());
        wide.record_write(&configmap("a", "mine"));
        wide.record_write(&configmap("b", "theirs"));
        let read = (vec![wide], vec![selection(Some("a"))]);
        let backend = ClusterBackend::new(resources, "g", read, Duration::ZERO, None);
        let listed = backend.list(&kind, None, None).unwrap();
        assert_eq!(listed.len(), 1);
        assert!(listed[0].contains("mine"));
        assert!(backend.get(&kind, Some("b"), "theirs").unwrap().is_none());
        assert!(backend.get(&kind, Some("a"), "mine").unwrap().is_some());
    }

    fn answer(code: u16, retry_after_seconds: u32) -> kube::Error {
        let status = Status::failure("refused", "Refused")
            .with_code(code)
            .with_details(
                serde_json::from_value::<StatusDetails>(
                    json!({ "retryAfterSeconds": retry_after_seconds }),
                )
                .expect("status details"),
            );
        kube::Error::Api(status.boxed())
    }

    /// Sends `tries` in turn through [`resend`] with `patience`; how many were sent, the
    /// outcome, whether a try may have taken effect unanswered, and the time it took.
    async fn resent(
        patience: Duration,
        tries: Vec<Result<(), kube::Error>>,
    ) -> (usize, Result<(), kube::Error>, bool, Duration) {
        let started = Instant::now();
        let tries = Mutex::new(tries.into_iter());
        let sent = AtomicU64::new(0);
        let (result, unanswered) = resend(patience, |_| {
            sent.fetch_add(1, Ordering::Relaxed);
            let next = tries.lock().unwrap().next();
            async move { next.unwrap_or(Ok(())) }
        })
        .await;
        let sent = sent.load(Ordering::Relaxed) as usize;
        (sent, result, unanswered, started.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_whose_answer_was_lost_is_sent_again_until_it_is_answered() {
        let lost = || Err(kube::Error::Service("connection closed".into()));
        let (sent, result, unanswered, took) =
            resent(Duration::from_secs(5), vec![lost(), lost(), Ok(())]).await;
        assert_eq!(sent, 3);
        assert!(result.is_ok());
        assert!(
            unanswered,
            "a lost answer may hide a write that took effect"
        );
        assert_eq!(
            took,
            Duration::from_millis(150),
            "pauses of 50 ms, then 100 ms"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_is_sent_again_only_within_the_patience() {
        let tries = (0..100)
            .map(|_| Err(kube::Error::Service("connection refused".into())))
            .collect();
        let (sent, result, _, took) = resent(Duration::from_secs(5), tries).await;
        assert!(result.is_err());
        assert!(took < Duration::from_secs(5), "took {took:?}");
        // Sent at 0, 50, 150, 350 and 750 ms, 1.55 s, then every second up to 3.55 s: a try
        // at 4.55 s could not be answered before the host-call timeout at 5 s.
        assert_eq!(sent, 8);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_is_not_sent_again_once_the_guest_call_it_was_for_has_ended() {
        let caller = CancellationToken::new();
        caller.cancel();
        let lost = || Err(kube::Error::Service("connection closed".into()));
        let (sent, result, unanswered, _) = CALLER
            .scope(caller, resent(Duration::from_secs(5), vec![lost(), Ok(())]))
            .await;
        assert_eq!(sent, 1);
        assert!(result.is_err());
        assert!(unanswered);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_the_api_server_refused_is_not_sent_again() {
        let (sent, result, unanswered, _) =
            resent(Duration::from_secs(5), vec![Err(answer(409, 0))]).await;
        assert_eq!(sent, 1);
        assert!(matches!(result, Err(kube::Error::Api(s)) if s.code == 409));
        assert!(!unanswered);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_the_api_server_asked_to_retry_is_sent_after_the_time_it_named() {
        let (sent, result, unanswered, took) = resent(
            Duration::from_secs(5),
            vec![Err(answer(429, 2)), Err(answer(503, 0))],
        )
        .await;
        assert_eq!(sent, 3);
        assert!(result.is_ok());
        assert!(!unanswered, "a refusal is an answer");
        assert_eq!(took, Duration::from_millis(2100));
        let (sent, result, _, _) = resent(Duration::from_secs(5), vec![Err(answer(429, 10))]).await;
        assert_eq!(sent, 1, "a retry after the patience is not waited for");
        assert!(result.is_err());
    }

    #[test]
    fn intent_contained_in_defaulted_object() {
        let actual = json!({
            "metadata": { "name": "a", "uid": "1", "labels": { "x": "1", "y": "2" } },
            "spec": { "replicas": 2, "template": { "containers": [{ "name": "c", "image": "i", "imagePullPolicy": "Always" }] } }
        });
        let intent = json!({
            "metadata": { "name": "a", "labels": { "x": "1" } },
            "spec": { "replicas": 2, "template": { "containers": [{ "name": "c", "image": "i" }] } }
        });
        assert!(contains(&actual, &intent));
    }

    #[test]
    fn differing_or_missing_fields_are_not_contained() {
        let actual = json!({ "spec": { "replicas": 2, "ports": [{ "port": 80 }] } });
        assert!(!contains(&actual, &json!({ "spec": { "replicas": 3 } })));
        assert!(!contains(&actual, &json!({ "spec": { "paused": true } })));
        assert!(!contains(
            &actual,
            &json!({ "spec": { "ports": [{ "port": 80 }, { "port": 81 }] } })
        ));
        assert!(contains(&json!({ "n": 1.0 }), &json!({ "n": 1 })));
    }
}
