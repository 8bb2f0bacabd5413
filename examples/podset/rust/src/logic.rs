//! The pure decision logic of the PodSet controller: which pods belong to a PodSet, which
//! orphans to adopt, how many pods to create, which to delete, and the resulting status.
//! Nothing here calls the host, so it is unit-tested natively.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use kubewasm_guest::conditions::{Condition, ConditionStatus, remove_condition, set_condition};
use kubewasm_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubewasm_guest::owner::{self, OwnerReference};
use kubewasm_guest::selector::{LabelSelector, SelectorError};
use kubewasm_guest::{Gvk, ObjectKey, meta};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// API group of the PodSet kind.
pub const GROUP: &str = "kubewasm.dev";
/// API version of the PodSet kind.
pub const VERSION: &str = "v1alpha1";
/// The PodSet kind.
pub const KIND: &str = "PodSet";
/// The condition set while creating or deleting pods fails, as on ReplicaSets.
pub const REPLICA_FAILURE: &str = "ReplicaFailure";
/// Most pods created or deleted by one reconcile, like the ReplicaSet controller's burst limit.
pub const MAX_BURST: usize = 500;

/// The PodSet kind as a [`Gvk`].
pub fn podset_kind() -> Gvk {
    Gvk::new(GROUP, VERSION, KIND)
}

/// A PodSet as read from the cache.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PodSet {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// Desired state.
    #[serde(default)]
    pub spec: PodSetSpec,
    /// Observed state, as last written by this controller.
    #[serde(default)]
    pub status: Option<PodSetStatus>,
}

/// Desired state of a PodSet.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSetSpec {
    /// Number of pods to keep running (default 1, negative values count as 0).
    #[serde(default = "one")]
    pub replicas: i32,
    /// Which pods count towards `replicas` when adopting orphans; must match the template.
    #[serde(default)]
    pub selector: LabelSelector,
    /// What new pods look like.
    #[serde(default)]
    pub template: PodTemplate,
}

fn one() -> i32 {
    1
}

impl Default for PodSetSpec {
    fn default() -> Self {
        Self {
            replicas: 1,
            selector: LabelSelector::default(),
            template: PodTemplate::default(),
        }
    }
}

/// The pod template: labels, annotations and a pod spec kept as raw JSON.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PodTemplate {
    /// Labels and annotations of new pods.
    #[serde(default)]
    pub metadata: TemplateMetadata,
    /// The pod spec, passed through untouched.
    #[serde(default)]
    pub spec: Value,
}

/// Metadata copied onto new pods.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct TemplateMetadata {
    /// Labels of new pods.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations of new pods.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// Observed state of a PodSet.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSetStatus {
    /// Pods the PodSet controls that are neither terminated nor being deleted.
    #[serde(default)]
    pub replicas: i32,
    /// How many of those are ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The selector in string form, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Conditions; `ReplicaFailure` while pods cannot be created or deleted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// What the controller needs to know about one pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodView {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion`, the precondition of adoption.
    pub resource_version: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.ownerReferences`.
    pub owner_references: Vec<OwnerReference>,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `status.phase` (empty when unknown).
    pub phase: String,
    /// `spec.nodeName` (empty when unscheduled).
    pub node_name: String,
    /// Whether the `Ready` condition is `True`.
    pub ready: bool,
    /// When the pod last became ready (RFC 3339), if ready.
    pub ready_since: Option<String>,
    /// The highest restart count among its containers.
    pub restarts: i64,
    /// `metadata.creationTimestamp` (RFC 3339).
    pub created: Option<String>,
}

impl PodView {
    /// Reads a pod from its JSON; `None` if it has no name or uid.
    pub fn from_value(pod: &Value) -> Option<Self> {
        let status = pod.get("status");
        let ready_condition = status
            .and_then(|s| s.get("conditions"))
            .and_then(Value::as_array)
            .and_then(|conditions| {
                conditions
                    .iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
            });
        let ready = ready_condition
            .and_then(|c| c.get("status"))
            .and_then(Value::as_str)
            == Some("True");
        let str_at = |pointer: &str| pod.pointer(pointer).and_then(Value::as_str);
        let restarts = status
            .and_then(|s| s.get("containerStatuses"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
            .max()
            .unwrap_or(0);
        Some(Self {
            name: meta::name(pod)?.to_owned(),
            uid: meta::uid(pod)?.to_owned(),
            resource_version: meta::resource_version(pod).unwrap_or_default().to_owned(),
            labels: meta::labels(pod),
            owner_references: owner::owner_references(pod),
            deleting: meta::is_deleting(pod),
            phase: str_at("/status/phase").unwrap_or_default().to_owned(),
            node_name: str_at("/spec/nodeName").unwrap_or_default().to_owned(),
            ready,
            ready_since: ready
                .then(|| {
                    ready_condition?
                        .get("lastTransitionTime")?
                        .as_str()
                        .map(str::to_owned)
                })
                .flatten(),
            restarts,
            created: meta::creation_timestamp(pod).map(str::to_owned),
        })
    }

    fn controller(&self) -> Option<&OwnerReference> {
        self.owner_references
            .iter()
            .find(|r| r.controller == Some(true))
    }

    /// Neither terminated (`Succeeded`/`Failed`) nor being deleted.
    pub fn is_active(&self) -> bool {
        !self.deleting && self.phase != "Succeeded" && self.phase != "Failed"
    }
}

/// A PodSet spec the controller refuses to act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidSpec(pub String);

impl fmt::Display for InvalidSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<SelectorError> for InvalidSpec {
    fn from(error: SelectorError) -> Self {
        InvalidSpec(error.to_string())
    }
}

/// Checks what the API server checks for ReplicaSets: a valid, non-empty selector that matches
/// the template's labels.
pub fn validate(spec: &PodSetSpec) -> Result<(), InvalidSpec> {
    if spec.selector.is_empty() {
        return Err(InvalidSpec("spec.selector must not be empty".into()));
    }
    if !spec.selector.matches(&spec.template.metadata.labels)? {
        return Err(InvalidSpec(
            "spec.selector does not match spec.template.metadata.labels".into(),
        ));
    }
    Ok(())
}

/// The active pods controlled by the PodSet with uid `owner_uid`.
pub fn controlled_pods(owner_uid: &str, pods: &[PodView]) -> Vec<PodView> {
    pods.iter()
        .filter(|pod| pod.is_active() && pod.controller().is_some_and(|c| c.uid == owner_uid))
        .cloned()
        .collect()
}

/// The PodSets that would adopt an orphan pod with these `labels`: those not being deleted whose
/// valid selector matches. `podsets` are the PodSets of the pod's namespace.
pub fn adopters(podsets: &[PodSet], labels: &BTreeMap<String, String>) -> Vec<ObjectKey> {
    podsets
        .iter()
        .filter(|podset| podset.metadata.deletion_timestamp.is_none())
        .filter(|podset| {
            validate(&podset.spec).is_ok() && podset.spec.selector.matches(labels) == Ok(true)
        })
        .filter_map(|podset| {
            Some(ObjectKey {
                namespace: podset.metadata.namespace.clone(),
                name: podset.metadata.name.clone()?,
            })
        })
        .collect()
}

/// What one reconcile should do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Active orphans matching the selector, to adopt with [`adoption_patch`].
    pub adopt: Vec<PodView>,
    /// The PodSet's pods once the adoptions succeed (controlled + adopted, all active).
    pub owned: Vec<PodView>,
    /// How many pods to create.
    pub create: usize,
    /// Pods to delete, in order of preference.
    pub delete: Vec<PodView>,
}

/// Decides what to adopt, create and delete, given the PodSet and the pods it may act on: those
/// it controls and those its selector matches (any more pods of its namespace give the same plan).
///
/// Pods controlled by something else are ignored, as are orphans that are being deleted or
/// terminated. At most [`MAX_BURST`] pods are created or deleted at once.
pub fn plan(podset: &PodSet, pods: &[PodView]) -> Result<Plan, InvalidSpec> {
    validate(&podset.spec)?;
    let uid = podset.metadata.uid.as_deref().unwrap_or_default();
    let mut owned = controlled_pods(uid, pods);
    let mut adopt = Vec::new();
    for pod in pods {
        if pod.is_active()
            && pod.controller().is_none()
            && podset.spec.selector.matches(&pod.labels)?
        {
            adopt.push(pod.clone());
        }
    }
    owned.extend(adopt.iter().cloned());
    let want = usize::try_from(podset.spec.replicas).unwrap_or(0);
    let create = want.saturating_sub(owned.len()).min(MAX_BURST);
    let surplus = owned.len().saturating_sub(want).min(MAX_BURST);
    let mut candidates = owned.clone();
    candidates.sort_by(deletion_order);
    candidates.truncate(surplus);
    Ok(Plan {
        adopt,
        owned,
        create,
        delete: candidates,
    })
}

/// `a` is newer than `b`, with a missing time counting as newest (Kubernetes' `afterOrZero`).
fn after_or_zero(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a > b,
        _ => a.is_none(),
    }
}

fn phase_rank(phase: &str) -> u8 {
    match phase {
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

/// Whether `a` should be deleted before `b`, as in Kubernetes' `ActivePods.Less`.
fn delete_first(a: &PodView, b: &PodView) -> bool {
    // Unscheduled before scheduled.
    if a.node_name != b.node_name && (a.node_name.is_empty() || b.node_name.is_empty()) {
        return a.node_name.is_empty();
    }
    // Pending < Unknown < Running.
    if phase_rank(&a.phase) != phase_rank(&b.phase) {
        return phase_rank(&a.phase) < phase_rank(&b.phase);
    }
    // Not ready before ready.
    if a.ready != b.ready {
        return !a.ready;
    }
    // Ready for a shorter time first.
    if a.ready && a.ready_since != b.ready_since {
        return after_or_zero(a.ready_since.as_deref(), b.ready_since.as_deref());
    }
    // More restarts first.
    if a.restarts != b.restarts {
        return a.restarts > b.restarts;
    }
    // Newer first.
    if a.created != b.created {
        return after_or_zero(a.created.as_deref(), b.created.as_deref());
    }
    false
}

/// Deletion preference: [`Ordering::Less`] means `a` goes first. Ties break by name.
pub fn deletion_order(a: &PodView, b: &PodView) -> Ordering {
    if delete_first(a, b) {
        Ordering::Less
    } else if delete_first(b, a) {
        Ordering::Greater
    } else {
        a.name.cmp(&b.name)
    }
}

/// The controller owner reference of a pod adopted by `podset`.
pub fn owner_reference(podset: &PodSet) -> OwnerReference {
    OwnerReference {
        api_version: format!("{GROUP}/{VERSION}"),
        kind: KIND.into(),
        name: podset.metadata.name.clone().unwrap_or_default(),
        uid: podset.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The JSON patch adopting `pod`: adds a controller owner reference to `podset`, with the
/// resourceVersion the cache saw as precondition, so that a concurrent change (another
/// controller adopting it first) fails with 409 Conflict instead of overwriting it.
pub fn adoption_patch(podset: &PodSet, pod: &PodView) -> Value {
    let ours = owner_reference(podset);
    let mut references: Vec<OwnerReference> = pod
        .owner_references
        .iter()
        .filter(|r| r.uid != ours.uid)
        .cloned()
        .collect();
    references.push(ours);
    json!([
        {"op": "replace", "path": "/metadata/resourceVersion", "value": pod.resource_version},
        {"op": "add", "path": "/metadata/ownerReferences", "value": references},
    ])
}

/// The pod to server-side apply for a new replica called `name`. The host adds the controller
/// owner reference (`owned: true`).
pub fn pod_manifest(podset: &PodSet, name: &str) -> Value {
    let template = &podset.spec.template;
    let mut metadata = json!({"name": name});
    if let Some(namespace) = &podset.metadata.namespace {
        metadata["namespace"] = json!(namespace);
    }
    if !template.metadata.labels.is_empty() {
        metadata["labels"] = json!(template.metadata.labels);
    }
    if !template.metadata.annotations.is_empty() {
        metadata["annotations"] = json!(template.metadata.annotations);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template.spec})
}

/// Why creating or deleting pods failed, for the `ReplicaFailure` condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// `FailedCreate`, `FailedDelete` or `InvalidSpec`.
    pub reason: &'static str,
    /// The error.
    pub message: String,
}

/// The status after a reconcile: `live` are the PodSet's pods still there after the deletions,
/// `created` how many pods were created. `ReplicaFailure` is set when `failure` is given and
/// removed otherwise; other conditions are kept.
pub fn status(
    podset: &PodSet,
    live: &[PodView],
    created: usize,
    failure: Option<&Failure>,
) -> PodSetStatus {
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let mut conditions = podset
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let generation = podset.metadata.generation;
    match failure {
        Some(failure) => {
            set_condition(
                &mut conditions,
                REPLICA_FAILURE,
                ConditionStatus::True,
                failure.reason,
                &failure.message,
                generation,
            );
        }
        None => {
            remove_condition(&mut conditions, REPLICA_FAILURE);
        }
    }
    PodSetStatus {
        replicas: count(live.len() + created),
        ready_replicas: count(live.iter().filter(|pod| pod.ready).count()),
        observed_generation: generation,
        selector: podset.spec.selector.to_query().ok(),
        conditions,
    }
}

/// The object to apply to the status subresource.
pub fn status_object(podset: &PodSet, status: &PodSetStatus) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": KIND,
        "metadata": {"name": podset.metadata.name, "namespace": podset.metadata.namespace},
        "status": status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "podset-uid";

    fn podset(replicas: i32) -> PodSet {
        serde_json::from_value(json!({
            "apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet",
            "metadata": {"name": "web", "namespace": "ns", "uid": UID, "generation": 2},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web", "tier": "fe"}},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
                }
            }
        }))
        .unwrap()
    }

    struct PodBuilder(Value);

    impl PodBuilder {
        fn new(name: &str) -> Self {
            PodBuilder(json!({"metadata": {
                "name": name, "uid": format!("uid-{name}"), "resourceVersion": "10",
                "labels": {"app": "web"}, "creationTimestamp": "2024-01-01T00:00:00Z"
            }, "spec": {}, "status": {"phase": "Pending"}}))
        }
        fn controlled_by(mut self, uid: &str) -> Self {
            self.0["metadata"]["ownerReferences"] = json!([{"apiVersion": "kubewasm.dev/v1alpha1",
                "kind": "PodSet", "name": "x", "uid": uid, "controller": true}]);
            self
        }
        fn owned(self) -> Self {
            self.controlled_by(UID)
        }
        fn labels(mut self, labels: Value) -> Self {
            self.0["metadata"]["labels"] = labels;
            self
        }
        fn running(mut self, node: &str, ready_since: Option<&str>) -> Self {
            self.0["spec"]["nodeName"] = json!(node);
            self.0["status"]["phase"] = json!("Running");
            if let Some(since) = ready_since {
                self.0["status"]["conditions"] =
                    json!([{"type": "Ready", "status": "True", "lastTransitionTime": since}]);
            }
            self
        }
        fn phase(mut self, phase: &str) -> Self {
            self.0["status"]["phase"] = json!(phase);
            self
        }
        fn created(mut self, at: &str) -> Self {
            self.0["metadata"]["creationTimestamp"] = json!(at);
            self
        }
        fn restarts(mut self, n: i64) -> Self {
            self.0["status"]["containerStatuses"] =
                json!([{"restartCount": 0}, {"restartCount": n}]);
            self
        }
        fn deleting(mut self) -> Self {
            self.0["metadata"]["deletionTimestamp"] = json!("2024-01-02T00:00:00Z");
            self
        }
        fn build(self) -> PodView {
            PodView::from_value(&self.0).unwrap()
        }
    }

    fn names(pods: &[PodView]) -> Vec<&str> {
        pods.iter().map(|p| p.name.as_str()).collect()
    }

    #[test]
    fn reads_pods() {
        let pod = PodBuilder::new("a")
            .owned()
            .running("node-1", Some("2024-01-01T00:01:00Z"))
            .restarts(3)
            .build();
        assert_eq!(pod.uid, "uid-a");
        assert!(pod.ready && pod.is_active());
        assert_eq!(pod.ready_since.as_deref(), Some("2024-01-01T00:01:00Z"));
        assert_eq!(pod.restarts, 3);
        assert_eq!(pod.controller().unwrap().uid, UID);
        assert!(PodView::from_value(&json!({"metadata": {"name": "no-uid"}})).is_none());
    }

    #[test]
    fn creates_missing_replicas() {
        let pods = [PodBuilder::new("a").owned().build()];
        let plan = plan(&podset(3), &pods).unwrap();
        assert_eq!(plan.create, 2);
        assert!(plan.delete.is_empty() && plan.adopt.is_empty());
        assert_eq!(names(&plan.owned), ["a"]);
    }

    #[test]
    fn ignores_deleting_terminated_and_foreign_pods() {
        let pods = [
            PodBuilder::new("deleting").owned().deleting().build(),
            PodBuilder::new("done").owned().phase("Succeeded").build(),
            PodBuilder::new("failed").owned().phase("Failed").build(),
            PodBuilder::new("foreign").controlled_by("other").build(),
            PodBuilder::new("mine").owned().build(),
        ];
        let plan = plan(&podset(2), &pods).unwrap();
        assert_eq!(names(&plan.owned), ["mine"]);
        assert!(plan.adopt.is_empty());
        assert_eq!(plan.create, 1);
    }

    #[test]
    fn adopts_matching_orphans_only() {
        let pods = [
            PodBuilder::new("orphan").build(),
            PodBuilder::new("other-app")
                .labels(json!({"app": "db"}))
                .build(),
            PodBuilder::new("orphan-deleting").deleting().build(),
            PodBuilder::new("mine").owned().build(),
        ];
        let plan = plan(&podset(2), &pods).unwrap();
        assert_eq!(names(&plan.adopt), ["orphan"]);
        assert_eq!(names(&plan.owned), ["mine", "orphan"]);
        assert_eq!(plan.create, 0);
        assert!(plan.delete.is_empty());
    }

    #[test]
    fn deletes_pending_and_unready_pods_first() {
        let pods = [
            PodBuilder::new("old-ready")
                .owned()
                .running("n1", Some("2024-01-01T00:00:00Z"))
                .build(),
            PodBuilder::new("new-ready")
                .owned()
                .running("n1", Some("2024-01-03T00:00:00Z"))
                .build(),
            PodBuilder::new("unready")
                .owned()
                .running("n1", None)
                .build(),
            PodBuilder::new("pending").owned().build(),
        ];
        let plan = plan(&podset(1), &pods).unwrap();
        assert_eq!(names(&plan.delete), ["pending", "unready", "new-ready"]);
        assert_eq!(plan.create, 0);
    }

    #[test]
    fn deletion_prefers_unscheduled_restarting_and_newer_pods() {
        let scheduled = PodBuilder::new("scheduled").phase("Pending").build();
        let mut unscheduled = scheduled.clone();
        unscheduled.name = "unscheduled".into();
        let mut scheduled = scheduled;
        scheduled.node_name = "n1".into();
        assert_eq!(deletion_order(&unscheduled, &scheduled), Ordering::Less);

        let crashy = PodBuilder::new("crashy").restarts(5).build();
        let calm = PodBuilder::new("calm").build();
        assert_eq!(deletion_order(&crashy, &calm), Ordering::Less);

        let newer = PodBuilder::new("newer")
            .created("2024-02-01T00:00:00Z")
            .build();
        let older = PodBuilder::new("older")
            .created("2024-01-01T00:00:00Z")
            .build();
        assert_eq!(deletion_order(&newer, &older), Ordering::Less);
        assert_eq!(deletion_order(&older, &newer), Ordering::Greater);

        let mut unknown_age = PodBuilder::new("unknown-age").build();
        unknown_age.created = None;
        assert_eq!(deletion_order(&unknown_age, &newer), Ordering::Less);

        let twin = PodBuilder::new("twin").build();
        assert_eq!(deletion_order(&calm, &twin), Ordering::Less);
    }

    #[test]
    fn zero_replicas_deletes_everything() {
        let pods = [
            PodBuilder::new("a").owned().build(),
            PodBuilder::new("b").build(),
        ];
        let plan = plan(&podset(0), &pods).unwrap();
        assert_eq!(names(&plan.adopt), ["b"]);
        assert_eq!(plan.delete.len(), 2);
    }

    #[test]
    fn caps_bursts() {
        let plan = plan(&podset(10_000), &[]).unwrap();
        assert_eq!(plan.create, MAX_BURST);
    }

    #[test]
    fn rejects_invalid_specs() {
        let mut empty = podset(1);
        empty.spec.selector = LabelSelector::default();
        assert!(
            plan(&empty, &[])
                .unwrap_err()
                .0
                .contains("must not be empty")
        );

        let mut mismatch = podset(1);
        mismatch.spec.template.metadata.labels = BTreeMap::from([("app".into(), "db".into())]);
        assert!(
            plan(&mismatch, &[])
                .unwrap_err()
                .0
                .contains("does not match")
        );

        let mut bad: PodSet = podset(1);
        bad.spec.selector = serde_json::from_value(
            json!({"matchExpressions": [{"key": "app", "operator": "Near", "values": ["x"]}]}),
        )
        .unwrap();
        assert!(plan(&bad, &[]).unwrap_err().0.contains("unknown operator"));
    }

    #[test]
    fn finds_adopters_of_orphans() {
        let mut db = podset(1);
        db.metadata.name = Some("db".into());
        db.spec.selector = serde_json::from_value(json!({"matchLabels": {"app": "db"}})).unwrap();
        db.spec.template.metadata.labels = BTreeMap::from([("app".into(), "db".into())]);
        let mut deleting = podset(1);
        deleting.metadata.name = Some("going".into());
        deleting.metadata.deletion_timestamp =
            Some(serde_json::from_value(json!("2024-01-02T00:00:00Z")).unwrap());
        let mut invalid = podset(1);
        invalid.metadata.name = Some("invalid".into());
        invalid.spec.selector = LabelSelector::default();
        let podsets = [podset(1), db, deleting, invalid];
        let web = BTreeMap::from([("app".into(), "web".into())]);
        assert_eq!(
            adopters(&podsets, &web),
            [ObjectKey::namespaced("ns", "web")]
        );
        let other = BTreeMap::from([("app".into(), "cache".into())]);
        assert!(adopters(&podsets, &other).is_empty());
    }

    #[test]
    fn adoption_patch_sets_controller_with_precondition() {
        let mut orphan = PodBuilder::new("orphan").build();
        orphan.owner_references.push(OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "cm".into(),
            uid: "cm-uid".into(),
            controller: None,
            block_owner_deletion: None,
        });
        let patch = adoption_patch(&podset(1), &orphan);
        assert_eq!(
            patch,
            json!([
                {"op": "replace", "path": "/metadata/resourceVersion", "value": "10"},
                {"op": "add", "path": "/metadata/ownerReferences", "value": [
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "cm-uid"},
                    {"apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet", "name": "web",
                     "uid": UID, "controller": true, "blockOwnerDeletion": true}
                ]}
            ])
        );
    }

    #[test]
    fn pod_manifest_copies_the_template() {
        let pod = pod_manifest(&podset(1), "web-abcde");
        assert_eq!(
            pod,
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web-abcde", "namespace": "ns",
                             "labels": {"app": "web", "tier": "fe"}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})
        );
    }

    #[test]
    fn status_counts_live_pods_and_reports_failures() {
        let live = [
            PodBuilder::new("a")
                .owned()
                .running("n", Some("2024-01-01T00:00:00Z"))
                .build(),
            PodBuilder::new("b").owned().build(),
        ];
        let failure = Failure {
            reason: "FailedCreate",
            message: "quota exceeded".into(),
        };
        let mut podset = podset(3);
        let failed = status(&podset, &live, 0, Some(&failure));
        assert_eq!((failed.replicas, failed.ready_replicas), (2, 1));
        assert_eq!(failed.observed_generation, Some(2));
        assert_eq!(failed.selector.as_deref(), Some("app=web"));
        assert_eq!(failed.conditions[0].type_, REPLICA_FAILURE);
        assert_eq!(failed.conditions[0].reason, "FailedCreate");

        podset.status = Some(failed);
        let healed = status(&podset, &live, 1, None);
        assert_eq!(healed.replicas, 3);
        assert!(healed.conditions.is_empty());

        let object = status_object(&podset, &healed);
        assert_eq!(
            object["metadata"],
            json!({"name": "web", "namespace": "ns"})
        );
        assert_eq!(object["status"]["readyReplicas"], json!(1));
        assert!(object["status"].get("conditions").is_none());
    }
}
