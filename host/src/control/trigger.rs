//! Triggers: which primary keys a change enqueues. Both the old and the new state of an object
//! count, so a child that moves to another owner or loses its label enqueues both sides, and a
//! deletion enqueues too.

use kube::api::GroupVersionKind;
use kube::core::GroupVersion;

use crate::cluster::cache::{CachedObject, Change, ObjectKey};
use crate::wasm::bindings::types::{Changes, Reason};

/// Which updates of a primary object are reconciled.
#[derive(Debug, Clone)]
pub struct Updates {
    /// What the guest declared (`reconcile-on`).
    pub on: Changes,
    /// The guest's finalizer: an update that leaves a live object without it is reconciled,
    /// so the host adds it again.
    pub finalizer: Option<String>,
}

impl Updates {
    /// Whether the update from `old` to `new` is reconciled: it changes what the guest named,
    /// replaces the object by a new one of the same name (a relist after the watch missed a
    /// deletion and a creation), starts the deletion, or leaves a live object without the
    /// guest's finalizer.
    fn matter(&self, old: &CachedObject, new: &CachedObject) -> bool {
        self.on.contains(Changes::ANY)
            || old.uid() != new.uid()
            || old.deleting() != new.deleting()
            || self
                .finalizer
                .as_ref()
                .is_some_and(|finalizer| !new.deleting() && !new.has_finalizer(finalizer))
            || (self.on.contains(Changes::GENERATION) && old.generation() != new.generation())
            || (self.on.contains(Changes::LABELS) && !old.labels().eq(new.labels()))
            || (self.on.contains(Changes::ANNOTATIONS) && old.annotations() != new.annotations())
    }
}

/// The key of a changed primary object and why it changed; `None` for an update that `updates`
/// does not reconcile.
pub fn primary(change: &Change, updates: &Updates) -> Option<(ObjectKey, Reason)> {
    match (&change.old, &change.new) {
        (None, Some(new)) => Some((new.key(), Reason::Added)),
        (Some(old), Some(new)) => updates
            .matter(old, new)
            .then(|| (new.key(), Reason::Changed)),
        (Some(old), None) => Some((old.key(), Reason::Deleted)),
        (None, None) => None,
    }
}

/// Keys of the primary objects that own the changed object: only its controller owner when
/// `controller_only` (Owns), every owner of the primary kind otherwise (Watches by owner). An
/// owner reference matches on group and kind, whatever its version, as controller-runtime
/// matches: the API server serves one object under every version of its kind. An owner is in
/// the object's namespace if the primary kind is `namespaced`, else in none.
pub fn owners(
    change: &Change,
    primary: &GroupVersionKind,
    controller_only: bool,
    namespaced: bool,
) -> Vec<ObjectKey> {
    keys(change, |object| {
        object
            .owners()
            .filter(|o| !controller_only || o.controller)
            .filter(|o| o.kind == primary.kind && in_group(o.api_version, &primary.group))
            .map(|o| ObjectKey {
                namespace: namespace_of(object, namespaced),
                name: o.name.to_owned(),
            })
            .collect()
    })
}

/// Whether an `apiVersion` is of `group`.
fn in_group(api_version: &str, group: &str) -> bool {
    api_version
        .parse::<GroupVersion>()
        .is_ok_and(|version| version.group == group)
}

/// Keys named by the value of `label` on the changed object: in its namespace if the primary
/// kind is `namespaced`, else in none.
pub fn labelled(change: &Change, label: &str, namespaced: bool) -> Vec<ObjectKey> {
    keys(change, |object| {
        object
            .label(label)
            .map(|name| ObjectKey {
                namespace: namespace_of(object, namespaced),
                name: name.to_owned(),
            })
            .into_iter()
            .collect()
    })
}

/// The namespace of a primary key found through `object`.
fn namespace_of(object: &CachedObject, namespaced: bool) -> Option<String> {
    object.namespace().filter(|_| namespaced).map(str::to_owned)
}

fn keys(change: &Change, of: impl Fn(&CachedObject) -> Vec<ObjectKey>) -> Vec<ObjectKey> {
    let mut keys: Vec<ObjectKey> = change
        .old
        .iter()
        .chain(&change.new)
        .flat_map(|o| of(o))
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use serde_json::json;

    fn pod(owners: serde_json::Value, labels: serde_json::Value) -> Arc<CachedObject> {
        Arc::new(CachedObject::new(
            serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": { "namespace": "ns", "name": "p", "resourceVersion": "1",
                              "ownerReferences": owners, "labels": labels }
            }))
            .unwrap(),
        ))
    }

    fn owner(kind: &str, name: &str, controller: bool) -> serde_json::Value {
        json!({ "apiVersion": "kubewasm.dev/v1alpha1", "kind": kind, "name": name, "uid": name, "controller": controller })
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    #[test]
    fn primary_reasons() {
        let p = pod(json!([]), json!({}));
        let added = Change {
            old: None,
            new: Some(p.clone()),
            initial: false,
        };
        let changed = Change {
            old: Some(p.clone()),
            new: Some(p.clone()),
            initial: false,
        };
        let deleted = Change {
            old: Some(p),
            new: None,
            initial: false,
        };
        let every = Updates {
            on: Changes::ANY,
            finalizer: None,
        };
        assert_eq!(primary(&added, &every).unwrap().1, Reason::Added);
        assert_eq!(primary(&changed, &every).unwrap().1, Reason::Changed);
        assert_eq!(
            primary(&deleted, &every).unwrap(),
            (key("p"), Reason::Deleted)
        );
    }

    fn site(metadata: serde_json::Value, status: &str) -> Arc<CachedObject> {
        let mut metadata = metadata;
        metadata["namespace"] = json!("ns");
        metadata["name"] = json!("p");
        Arc::new(CachedObject::new(
            serde_json::from_value(json!({
                "apiVersion": "kubewasm.dev/v1", "kind": "Website",
                "metadata": metadata, "status": { "stamp": status },
            }))
            .unwrap(),
        ))
    }

    fn update(old: &Arc<CachedObject>, new: &Arc<CachedObject>) -> Change {
        Change {
            old: Some(old.clone()),
            new: Some(new.clone()),
            initial: false,
        }
    }

    #[test]
    fn an_update_is_reconciled_only_if_it_changes_what_the_guest_named() {
        let finalizer = "kubewasm.dev/cleanup";
        let base = json!({ "generation": 1, "labels": { "a": "1" }, "finalizers": [finalizer] });
        let old = site(base.clone(), "t1");
        let status_only = site(base.clone(), "t2");
        let mut spec = base.clone();
        spec["generation"] = json!(2);
        let spec = site(spec, "t1");
        let mut labelled = base.clone();
        labelled["labels"]["a"] = json!("2");
        let labelled = site(labelled, "t1");
        let mut annotated = base.clone();
        annotated["annotations"] = json!({ "note": "x" });
        let annotated = site(annotated, "t1");
        let mut deleting = base.clone();
        deleting["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let deleting = site(deleting, "t1");
        let mut stripped = base.clone();
        stripped["finalizers"] = json!([]);
        let stripped = site(stripped, "t1");
        let mut emptied = base.clone();
        emptied["annotations"] = json!({});
        let emptied = site(emptied, "t1");
        let mut recreated = base.clone();
        recreated["uid"] = json!("another");
        let recreated = site(recreated, "t1");

        let reconciled = |on: Changes, new: &Arc<CachedObject>| {
            let updates = Updates {
                on,
                finalizer: Some(finalizer.into()),
            };
            primary(&update(&old, new), &updates).is_some()
        };
        let generation = Changes::GENERATION;
        assert!(!reconciled(generation, &status_only));
        assert!(reconciled(generation, &spec));
        assert!(!reconciled(generation, &labelled));
        assert!(reconciled(generation | Changes::LABELS, &labelled));
        assert!(!reconciled(generation | Changes::LABELS, &annotated));
        assert!(reconciled(Changes::ANNOTATIONS, &annotated));
        assert!(!reconciled(Changes::ANNOTATIONS, &emptied));
        assert!(reconciled(Changes::ANY, &status_only));
        // What the host acts on whatever the guest named.
        assert!(reconciled(Changes::empty(), &deleting));
        assert!(reconciled(Changes::empty(), &stripped));
        assert!(reconciled(Changes::empty(), &recreated));
        assert!(!reconciled(Changes::empty(), &spec));
    }

    #[test]
    fn owns_enqueues_the_controller_of_the_primary_kind_before_and_after() {
        let kind = GroupVersionKind::gvk("kubewasm.dev", "v1alpha1", "PodSet");
        let before = pod(
            json!([owner("PodSet", "a", true), owner("PodSet", "b", false)]),
            json!({}),
        );
        let after = pod(
            json!([owner("PodSet", "c", true), owner("Other", "d", true)]),
            json!({}),
        );
        let change = Change {
            old: Some(before),
            new: Some(after),
            initial: false,
        };
        assert_eq!(owners(&change, &kind, true, true), [key("a"), key("c")]);
        assert_eq!(
            owners(&change, &kind, false, true),
            [key("a"), key("b"), key("c")]
        );
    }

    #[test]
    fn owners_match_on_group_and_kind_whatever_the_version() {
        // Children written while the CRD served v1alpha1 stay owned once the guest reads v1.
        let change = Change {
            old: None,
            new: Some(pod(json!([owner("PodSet", "a", true)]), json!({}))),
            initial: false,
        };
        let served = GroupVersionKind::gvk("kubewasm.dev", "v1", "PodSet");
        assert_eq!(owners(&change, &served, true, true), [key("a")]);
        let other_group = GroupVersionKind::gvk("other.dev", "v1alpha1", "PodSet");
        assert!(owners(&change, &other_group, true, true).is_empty());
    }

    #[test]
    fn the_owner_of_a_cluster_scoped_kind_has_no_namespace() {
        let change = Change {
            old: None,
            new: Some(pod(
                json!([owner("PodSet", "a", true)]),
                json!({ "site": "s" }),
            )),
            initial: false,
        };
        let kind = GroupVersionKind::gvk("kubewasm.dev", "v1alpha1", "PodSet");
        let cluster = |name: &str| ObjectKey {
            namespace: None,
            name: name.into(),
        };
        assert_eq!(owners(&change, &kind, true, false), [cluster("a")]);
        assert_eq!(labelled(&change, "site", false), [cluster("s")]);
    }

    #[test]
    fn label_mapping_uses_both_states() {
        let change = Change {
            old: Some(pod(json!([]), json!({ "site": "old" }))),
            new: Some(pod(json!([]), json!({ "site": "new", "other": "x" }))),
            initial: false,
        };
        assert_eq!(labelled(&change, "site", true), [key("new"), key("old")]);
        assert!(labelled(&change, "missing", true).is_empty());
    }
}
