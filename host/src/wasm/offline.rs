//! An in-memory [`Backend`] for running a guest without a cluster: reads are served from
//! fixture objects, writes are recorded and applied to those objects only, and the guest's log
//! lines are recorded.
//!
//! Writes approximate the API server closely enough for a guest to read its own writes:
//!
//! - apply is a JSON merge (RFC 7386) of the intent into the stored object, not a server-side
//!   apply: there are no field managers, so fields the intent omits are kept, lists are replaced
//!   rather than merged by key, and `null` removes a field. An apply of the main resource
//!   ignores `status`; an apply of the `status` subresource merges only `status` and answers 404
//!   when the object does not exist, as for every kind with a status subresource;
//! - a patch that sets `metadata.resourceVersion` to anything but the stored one answers 409
//!   Conflict, as the API server's optimistic concurrency does;
//! - a delete removes the object at once: finalizers are not honoured and no defaulting,
//!   validation or admission happens.
//!
//! Everything is deterministic: there is no clock and no randomness. Every successful apply or
//! patch sets `metadata.resourceVersion` from a counter that starts above the highest numeric
//! resourceVersion of the fixture, and an object created by apply without a uid gets
//! `fixture-<resourceVersion>` as uid.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use kube::api::GroupVersionKind;
use serde_json::Value;

use crate::cluster::cache::ObjectKey;
use crate::cluster::selection::kind_of;
use crate::cluster::selector::LabelSelector;
use crate::wasm::backend::{
    ApplyRequest, Backend, CallError, DeleteRequest, EventRequest, LogLine, PatchRequest,
};

/// A write a guest asked for, as the backend received it.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// A server-side apply.
    Apply(ApplyRequest),
    /// A patch.
    Patch(PatchRequest),
    /// A delete.
    Delete(DeleteRequest),
    /// An event.
    Event(EventRequest),
}

/// A [`Backend`] holding objects in memory and recording every write.
#[derive(Debug, Default)]
pub struct OfflineBackend {
    state: Mutex<State>,
    cluster_scoped: Vec<GroupVersionKind>,
}

/// What a write did to the object it names, as the backend answered it.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// It created the object.
    Created,
    /// It wrote the object, which was `before` and is `after` (with a new resourceVersion,
    /// whether or not anything else changed).
    Updated {
        /// The object before the write.
        before: Value,
        /// The object after it.
        after: Value,
    },
    /// It removed the object.
    Deleted,
    /// It was refused, with the answer's message.
    Refused(String),
    /// It recorded an Event.
    Recorded,
}

#[derive(Debug, Default)]
struct State {
    /// Objects by kind, then by namespace and name; kinds in order of first appearance.
    kinds: Vec<(GroupVersionKind, BTreeMap<ObjectKey, Stored>)>,
    /// The last resourceVersion handed out.
    revision: u64,
    /// Every write, with what it did.
    writes: Vec<(Write, Effect)>,
    logs: Vec<LogLine>,
}

#[derive(Debug)]
struct Stored {
    value: Value,
    json: Arc<str>,
    labels: BTreeMap<String, String>,
}

impl Stored {
    fn new(value: Value) -> Self {
        let labels = value["metadata"]["labels"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_owned())))
            .collect();
        Self {
            json: value.to_string().into(),
            labels,
            value,
        }
    }
}

impl State {
    fn objects(&self, kind: &GroupVersionKind) -> Option<&BTreeMap<ObjectKey, Stored>> {
        self.kinds
            .iter()
            .find(|(k, _)| k == kind)
            .map(|(_, objects)| objects)
    }

    fn objects_mut(&mut self, kind: &GroupVersionKind) -> &mut BTreeMap<ObjectKey, Stored> {
        let index = match self.kinds.iter().position(|(k, _)| k == kind) {
            Some(index) => index,
            None => {
                self.kinds.push((kind.clone(), BTreeMap::new()));
                self.kinds.len() - 1
            }
        };
        &mut self.kinds[index].1
    }

    fn stored(&self, kind: &GroupVersionKind, key: &ObjectKey) -> Option<&Stored> {
        self.objects(kind)?.get(key)
    }

    /// Records `write` of the object `key` of `kind`, which was `before` it, with what it did
    /// as `done` tells.
    fn record<T>(
        &mut self,
        write: Write,
        (kind, key): (&GroupVersionKind, &ObjectKey),
        before: Option<Value>,
        done: &Result<T, CallError>,
    ) {
        let effect = match (done, before) {
            (Err(error), _) => Effect::Refused(error.to_string()),
            (Ok(_), None) => Effect::Created,
            (Ok(_), Some(before)) => match self.stored(kind, key) {
                Some(after) => Effect::Updated {
                    before,
                    after: after.value.clone(),
                },
                None => Effect::Deleted,
            },
        };
        self.writes.push((write, effect));
    }

    /// Stores `object` at the next resourceVersion and returns it serialized; 422 when the
    /// write left it without a `metadata` object.
    fn store(
        &mut self,
        kind: &GroupVersionKind,
        key: ObjectKey,
        mut object: Value,
    ) -> Result<String, CallError> {
        if !object.get("metadata").is_some_and(Value::is_object) {
            return Err(api_error(
                422,
                "Invalid",
                "metadata must be an object".into(),
            ));
        }
        self.revision += 1;
        object["metadata"]["resourceVersion"] = Value::String(self.revision.to_string());
        let stored = Stored::new(object);
        let json = stored.json.to_string();
        self.objects_mut(kind).insert(key, stored);
        Ok(json)
    }
}

impl OfflineBackend {
    /// Holds `objects` (Kubernetes JSON with `apiVersion`, `kind` and `metadata.name`); a later
    /// object replaces an earlier one of the same kind, namespace and name.
    ///
    /// # Panics
    ///
    /// If an object has no `apiVersion`, `kind` or `metadata.name`.
    pub fn new(objects: Vec<Value>) -> Self {
        let backend = Self::default();
        for object in objects {
            backend.put(object);
        }
        backend
    }

    /// Treats `kind` as cluster-scoped for permission checks; every other kind is namespaced.
    pub fn with_cluster_scoped(mut self, kind: GroupVersionKind) -> Self {
        self.cluster_scoped.push(kind);
        self
    }

    /// Stores `object` as given, replacing the one of the same kind, namespace and name: a
    /// change made by someone else than the guest, so it is not recorded as a write. Later
    /// writes get resourceVersions above the object's, when it is numeric.
    ///
    /// # Panics
    ///
    /// If the object has no `apiVersion`, `kind` or `metadata.name`.
    pub fn put(&self, object: Value) {
        let kind = kind_of(&object).expect("a fixture object has an apiVersion and a kind");
        let name = object["metadata"]["name"]
            .as_str()
            .expect("a fixture object has a metadata.name");
        let key = ObjectKey {
            namespace: object["metadata"]["namespace"].as_str().map(str::to_owned),
            name: name.to_owned(),
        };
        let version = object["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|v| v.parse().ok());
        let mut state = self.lock();
        state.revision = state.revision.max(version.unwrap_or(0));
        state.objects_mut(&kind).insert(key, Stored::new(object));
    }

    /// Every write received so far, in order, whether it succeeded or not.
    pub fn writes(&self) -> Vec<Write> {
        self.lock().writes.iter().map(|(w, _)| w.clone()).collect()
    }

    /// Every write received so far, in order; the record starts empty again.
    pub fn take_writes(&self) -> Vec<Write> {
        self.take_effects().into_iter().map(|(w, _)| w).collect()
    }

    /// Every write received so far, in order, with what it did; the record starts empty again.
    pub fn take_effects(&self) -> Vec<(Write, Effect)> {
        std::mem::take(&mut self.lock().writes)
    }

    /// Every line the guest logged so far, in order; the record starts empty again.
    pub fn take_logs(&self) -> Vec<LogLine> {
        std::mem::take(&mut self.lock().logs)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while the state is locked, so a poisoned lock guards consistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn key(namespace: Option<&str>, name: &str) -> ObjectKey {
    ObjectKey {
        namespace: namespace.map(str::to_owned),
        name: name.to_owned(),
    }
}

fn api_error(code: u16, reason: &str, message: String) -> CallError {
    CallError::Api {
        code,
        reason: reason.into(),
        message,
    }
}

fn not_found(kind: &GroupVersionKind, name: &str) -> CallError {
    api_error(404, "NotFound", format!("{} {name:?} not found", kind.kind))
}

/// A 409 Conflict unless the stored object's `field` is `expected` (when given).
fn precondition(object: &Value, field: &str, expected: Option<&str>) -> Result<(), CallError> {
    let actual = object["metadata"][field].as_str();
    match expected {
        Some(expected) if actual != Some(expected) => Err(api_error(
            409,
            "Conflict",
            format!(
                "Precondition failed: {field} in precondition: {expected}, {field} in object meta: {}",
                actual.unwrap_or_default()
            ),
        )),
        _ => Ok(()),
    }
}

impl OfflineBackend {
    /// Stored objects of a kind in `namespace` (all when `None`) that `keep`, ordered by
    /// namespace then name.
    fn listed(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        keep: impl Fn(&Stored) -> bool,
    ) -> Vec<Arc<str>> {
        let state = self.lock();
        let in_namespace =
            |key: &ObjectKey| namespace.is_none_or(|ns| key.namespace.as_deref() == Some(ns));
        state
            .objects(kind)
            .into_iter()
            .flatten()
            .filter(|(key, stored)| in_namespace(key) && keep(stored))
            .map(|(_, stored)| stored.json.clone())
            .collect()
    }
}

#[async_trait]
impl Backend for OfflineBackend {
    fn is_cluster_scoped(&self, kind: &GroupVersionKind) -> bool {
        self.cluster_scoped.contains(kind)
    }

    /// The stored object, serialized, or `None`.
    fn get(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<str>>, CallError> {
        let state = self.lock();
        Ok(state
            .stored(kind, &key(namespace, name))
            .map(|stored| stored.json.clone()))
    }

    /// Stored objects of a kind in `namespace` (all when `None`) whose `metadata.labels`
    /// match `selector`, ordered by namespace then name.
    fn list(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        selector: Option<&LabelSelector>,
    ) -> Result<Vec<Arc<str>>, CallError> {
        Ok(self.listed(kind, namespace, |stored| {
            selector.is_none_or(|s| s.matches(&stored.labels))
        }))
    }

    /// Stored objects of a kind in `namespace` (all when `None`) whose controller reference
    /// (the first owner reference with `controller: true`) has `uid`, ordered by namespace
    /// then name.
    fn list_controlled(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        uid: &str,
    ) -> Result<Vec<Arc<str>>, CallError> {
        Ok(self.listed(kind, namespace, |stored| {
            let owners = stored.value["metadata"]["ownerReferences"].as_array();
            let mut owners = owners.into_iter().flatten();
            owners
                .find(|o| o["controller"] == true)
                .is_some_and(|o| o["uid"] == uid)
        }))
    }

    /// Merges the intent into the stored object (see the module documentation) and returns it.
    async fn apply(&self, request: ApplyRequest) -> Result<String, CallError> {
        let mut state = self.lock();
        let (kind, key) = (
            request.kind.clone(),
            key(request.namespace.as_deref(), &request.name),
        );
        let before = state.stored(&kind, &key).map(|s| s.value.clone());
        let done = apply(&mut state, request.clone(), before.clone());
        state.record(Write::Apply(request), (&kind, &key), before, &done);
        done
    }

    /// Applies the merge or JSON patch to the stored object and returns it; 404 when missing,
    /// 409 when the patched `metadata.resourceVersion` is not the stored one, 422 when a JSON
    /// patch operation fails or the result has no `metadata` object.
    async fn patch(&self, request: PatchRequest) -> Result<String, CallError> {
        let mut state = self.lock();
        let (kind, key) = (
            request.kind.clone(),
            key(request.namespace.as_deref(), &request.name),
        );
        let before = state.stored(&kind, &key).map(|s| s.value.clone());
        let done = patch(&mut state, request.clone());
        state.record(Write::Patch(request), (&kind, &key), before, &done);
        done
    }

    /// Removes the stored object; 404 when missing, 409 when the uid or resourceVersion
    /// precondition does not match.
    async fn delete(&self, request: DeleteRequest) -> Result<(), CallError> {
        let mut state = self.lock();
        let (kind, key) = (
            request.kind.clone(),
            key(request.namespace.as_deref(), &request.name),
        );
        let before = state.stored(&kind, &key).map(|s| s.value.clone());
        let done = delete(&mut state, &request);
        state.record(Write::Delete(request), (&kind, &key), before, &done);
        done
    }

    /// Records the event; always succeeds.
    async fn event(&self, request: EventRequest) -> Result<(), CallError> {
        self.lock()
            .writes
            .push((Write::Event(request), Effect::Recorded));
        Ok(())
    }

    /// Records the line.
    fn log(&self, line: LogLine) {
        self.lock().logs.push(line);
    }
}

/// Applies `request` to the object it names, which is `existing`.
fn apply(
    state: &mut State,
    request: ApplyRequest,
    existing: Option<Value>,
) -> Result<String, CallError> {
    let key = key(request.namespace.as_deref(), &request.name);
    let mut intent = request.object;
    let object = if request.status {
        let mut object = existing.ok_or_else(|| not_found(&request.kind, &request.name))?;
        if let Some(status) = intent.get("status") {
            json_patch::merge(&mut object["status"], status);
        }
        object
    } else {
        if let Some(fields) = intent.as_object_mut() {
            fields.remove("status");
        }
        let created = existing.is_none();
        let mut object = existing.unwrap_or_else(|| Value::Object(Default::default()));
        json_patch::merge(&mut object, &intent);
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
            && created
            && !metadata.contains_key("uid")
        {
            let uid = format!("fixture-{}", state.revision + 1);
            metadata.insert("uid".into(), Value::String(uid));
        }
        object
    };
    state.store(&request.kind, key, object)
}

/// Patches the object `request` names.
fn patch(state: &mut State, request: PatchRequest) -> Result<String, CallError> {
    let key = key(request.namespace.as_deref(), &request.name);
    let stored = state
        .stored(&request.kind, &key)
        .ok_or_else(|| not_found(&request.kind, &request.name))?;
    let mut object = stored.value.clone();
    if request.json_patch {
        let patch: json_patch::Patch = serde_json::from_value(request.patch)
            .map_err(|e| CallError::Invalid(format!("not a JSON patch: {e}")))?;
        json_patch::patch(&mut object, &patch)
            .map_err(|e| api_error(422, "Invalid", e.to_string()))?;
    } else {
        json_patch::merge(&mut object, &request.patch);
    }
    let version = object["metadata"]["resourceVersion"].as_str();
    if version.is_some_and(|v| Some(v) != stored.value["metadata"]["resourceVersion"].as_str()) {
        return Err(api_error(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} {:?}: the object has been modified",
                request.kind.kind, request.name
            ),
        ));
    }
    state.store(&request.kind, key, object)
}

/// Deletes the object `request` names.
fn delete(state: &mut State, request: &DeleteRequest) -> Result<(), CallError> {
    let key = key(request.namespace.as_deref(), &request.name);
    let stored = state
        .stored(&request.kind, &key)
        .ok_or_else(|| not_found(&request.kind, &request.name))?;
    precondition(&stored.value, "uid", request.uid.as_deref())?;
    precondition(
        &stored.value,
        "resourceVersion",
        request.resource_version.as_deref(),
    )?;
    state.objects_mut(&request.kind).remove(&key);
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod_kind() -> GroupVersionKind {
        GroupVersionKind::gvk("", "v1", "Pod")
    }

    fn pod(namespace: &str, name: &str, app: &str) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"),
                         "resourceVersion": "7", "labels": {"app": app}},
            "spec": {"containers": [{"name": "c", "image": "pause"}]},
        })
    }

    fn parse(json: &str) -> Value {
        serde_json::from_str(json).unwrap()
    }

    /// `namespace/name` of each object.
    fn names(objects: Vec<Arc<str>>) -> Vec<String> {
        objects
            .iter()
            .map(|json| {
                let metadata = &parse(json)["metadata"];
                format!(
                    "{}/{}",
                    metadata["namespace"].as_str().unwrap(),
                    metadata["name"].as_str().unwrap()
                )
            })
            .collect()
    }

    fn fixture() -> OfflineBackend {
        OfflineBackend::new(vec![
            pod("b", "x", "web"),
            pod("a", "y", "db"),
            pod("a", "x", "web"),
            json!({"apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet",
                   "metadata": {"name": "x", "namespace": "a"}}),
        ])
    }

    fn apply_request(object: Value, status: bool) -> ApplyRequest {
        ApplyRequest {
            kind: kind_of(&object).unwrap(),
            namespace: object["metadata"]["namespace"].as_str().map(str::to_owned),
            name: object["metadata"]["name"].as_str().unwrap().to_owned(),
            object,
            status,
            force: true,
        }
    }

    fn patch_request(name: &str, patch: Value, json_patch: bool) -> PatchRequest {
        PatchRequest {
            kind: pod_kind(),
            namespace: Some("a".into()),
            name: name.into(),
            patch,
            json_patch,
        }
    }

    fn delete_request(name: &str, uid: Option<&str>, version: Option<&str>) -> DeleteRequest {
        DeleteRequest {
            kind: pod_kind(),
            namespace: Some("a".into()),
            name: name.into(),
            uid: uid.map(str::to_owned),
            resource_version: version.map(str::to_owned),
        }
    }

    fn code(error: CallError) -> u16 {
        match error {
            CallError::Api { code, .. } => code,
            other => panic!("not an API error: {other:?}"),
        }
    }

    #[test]
    fn get_and_list_by_kind_namespace_and_labels() {
        let backend = fixture();
        let found = backend.get(&pod_kind(), Some("a"), "y").unwrap().unwrap();
        assert_eq!(parse(&found)["metadata"]["labels"]["app"], "db");
        assert!(backend.get(&pod_kind(), Some("c"), "y").unwrap().is_none());
        assert!(backend.get(&pod_kind(), None, "y").unwrap().is_none());

        let all = backend.list(&pod_kind(), None, None).unwrap();
        assert_eq!(names(all), ["a/x", "a/y", "b/x"]);
        let in_a = backend.list(&pod_kind(), Some("a"), None).unwrap();
        assert_eq!(names(in_a), ["a/x", "a/y"]);
        let web: LabelSelector = "app=web".parse().unwrap();
        assert_eq!(
            names(backend.list(&pod_kind(), None, Some(&web)).unwrap()),
            ["a/x", "b/x"]
        );
        let podsets = GroupVersionKind::gvk("kubewasm.dev", "v1alpha1", "PodSet");
        assert_eq!(names(backend.list(&podsets, None, None).unwrap()), ["a/x"]);
        let services = GroupVersionKind::gvk("", "v1", "Service");
        assert!(backend.list(&services, None, None).unwrap().is_empty());
    }

    #[tokio::test]
    async fn apply_creates_then_merges_and_is_read_back() {
        let backend = fixture();
        let intent = json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "cm", "namespace": "a"},
                            "data": {"one": "1", "two": "2"}});
        let created = parse(
            &backend
                .apply(apply_request(intent.clone(), false))
                .await
                .unwrap(),
        );
        assert_eq!(created["metadata"]["uid"], "fixture-8");
        assert_eq!(created["metadata"]["resourceVersion"], "8");

        let update = json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "cm", "namespace": "a"},
                            "data": {"two": "II", "three": "3"}, "status": {"ignored": true}});
        let updated = parse(
            &backend
                .apply(apply_request(update.clone(), false))
                .await
                .unwrap(),
        );
        assert_eq!(
            updated["data"],
            json!({"one": "1", "two": "II", "three": "3"})
        );
        assert_eq!(updated["metadata"]["uid"], "fixture-8");
        assert_eq!(updated["metadata"]["resourceVersion"], "9");
        assert!(updated.get("status").is_none());

        let kind = GroupVersionKind::gvk("", "v1", "ConfigMap");
        let read = backend.get(&kind, Some("a"), "cm").unwrap().unwrap();
        assert_eq!(parse(&read), updated);
        assert_eq!(
            backend.writes(),
            [
                Write::Apply(apply_request(intent, false)),
                Write::Apply(apply_request(update, false))
            ]
        );
    }

    #[tokio::test]
    async fn status_apply_merges_only_status_of_an_existing_object() {
        let backend = fixture();
        let mut intent = pod("a", "x", "changed");
        intent["status"] = json!({"phase": "Running"});
        let applied = parse(&backend.apply(apply_request(intent, true)).await.unwrap());
        assert_eq!(applied["status"]["phase"], "Running");
        assert_eq!(applied["metadata"]["labels"]["app"], "web");

        let missing = apply_request(pod("a", "gone", "web"), true);
        assert_eq!(code(backend.apply(missing).await.unwrap_err()), 404);
        assert_eq!(backend.take_writes().len(), 2);
        assert!(backend.writes().is_empty());
    }

    #[tokio::test]
    async fn merge_and_json_patches() {
        let backend = fixture();
        let merge = json!({"metadata": {"labels": {"app": null, "tier": "fe"}}});
        let merged = parse(
            &backend
                .patch(patch_request("x", merge, false))
                .await
                .unwrap(),
        );
        assert_eq!(merged["metadata"]["labels"], json!({"tier": "fe"}));
        assert_eq!(merged["metadata"]["resourceVersion"], "8");

        let add = json!([
            {"op": "replace", "path": "/metadata/resourceVersion", "value": "8"},
            {"op": "add", "path": "/metadata/ownerReferences", "value": [{"uid": "owner"}]},
        ]);
        let patched = parse(
            &backend
                .patch(patch_request("x", add.clone(), true))
                .await
                .unwrap(),
        );
        assert_eq!(patched["metadata"]["ownerReferences"][0]["uid"], "owner");
        assert_eq!(patched["metadata"]["resourceVersion"], "9");
        let web: LabelSelector = "tier=fe".parse().unwrap();
        let listed = backend.list(&pod_kind(), Some("a"), Some(&web)).unwrap();
        assert_eq!(parse(&listed[0]), patched);

        // The same patch again names a stale resourceVersion.
        let stale = backend
            .patch(patch_request("x", add, true))
            .await
            .unwrap_err();
        assert_eq!(code(stale), 409);
        let failing = json!([{"op": "test", "path": "/spec/nodeName", "value": "n1"}]);
        assert_eq!(
            code(
                backend
                    .patch(patch_request("x", failing, true))
                    .await
                    .unwrap_err()
            ),
            422
        );
        let missing = backend
            .patch(patch_request("gone", json!({}), false))
            .await
            .unwrap_err();
        assert_eq!(code(missing), 404);
        assert!(matches!(
            backend
                .patch(patch_request("x", json!({"op": "add"}), true))
                .await,
            Err(CallError::Invalid(_))
        ));
        let unmetadata = json!({"metadata": "gone"});
        assert_eq!(
            code(
                backend
                    .patch(patch_request("x", unmetadata, false))
                    .await
                    .unwrap_err()
            ),
            422
        );
        assert_eq!(
            backend
                .get(&pod_kind(), Some("a"), "x")
                .unwrap()
                .unwrap()
                .as_ref(),
            patched.to_string()
        );
        assert_eq!(backend.writes().len(), 7);
    }

    #[tokio::test]
    async fn delete_checks_existence_and_preconditions() {
        let backend = fixture();
        let wrong_uid = backend
            .delete(delete_request("x", Some("other"), None))
            .await;
        assert_eq!(code(wrong_uid.unwrap_err()), 409);
        let wrong_version = backend.delete(delete_request("x", None, Some("6"))).await;
        assert_eq!(code(wrong_version.unwrap_err()), 409);
        assert!(backend.get(&pod_kind(), Some("a"), "x").unwrap().is_some());

        let request = delete_request("x", Some("uid-x"), Some("7"));
        backend.delete(request.clone()).await.unwrap();
        assert!(backend.get(&pod_kind(), Some("a"), "x").unwrap().is_none());
        assert_eq!(
            code(backend.delete(request.clone()).await.unwrap_err()),
            404
        );
        assert_eq!(backend.writes()[2], Write::Delete(request));
    }

    #[tokio::test]
    async fn events_are_recorded() {
        let backend = fixture();
        let event = EventRequest {
            kind: pod_kind(),
            namespace: Some("a".into()),
            name: "x".into(),
            warning: false,
            reason: "Tested".into(),
            action: "Test".into(),
            note: "a note".into(),
        };
        backend.event(event.clone()).await.unwrap();
        assert_eq!(backend.take_writes(), [Write::Event(event)]);
    }

    #[test]
    fn put_replaces_without_recording_and_logs_are_recorded() {
        let backend = fixture();
        let mut changed = pod("a", "x", "db");
        changed["metadata"]["resourceVersion"] = json!("20");
        backend.put(changed.clone());
        let stored = backend.get(&pod_kind(), Some("a"), "x").unwrap().unwrap();
        assert_eq!(parse(&stored), changed);
        assert!(backend.writes().is_empty());

        let line = LogLine {
            level: crate::wasm::bindings::kubewasm::controller::log::Level::Info,
            message: "hello".into(),
            fields: vec![("k".into(), "v".into())],
        };
        backend.log(line.clone());
        assert_eq!(backend.take_logs(), [line]);
        assert!(backend.take_logs().is_empty());
    }
}
