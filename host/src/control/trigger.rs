//! Triggers: which primary keys a change enqueues. Both the old and the new state of an object
//! count, so a child that moves to another owner or loses its label enqueues both sides, and a
//! deletion enqueues too.

use kube::api::GroupVersionKind;
use kube::core::GroupVersion;

use crate::cluster::cache::{CachedObject, Change, ObjectKey};
use crate::wasm::bindings::types::Reason;

/// The key of a changed primary object and why it changed.
pub fn primary(change: &Change) -> Option<(ObjectKey, Reason)> {
    match (&change.old, &change.new) {
        (None, Some(new)) => Some((new.key(), Reason::Added)),
        (Some(_), Some(new)) => Some((new.key(), Reason::Changed)),
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
            .owners
            .iter()
            .filter(|o| !controller_only || o.controller)
            .filter(|o| o.kind == primary.kind && in_group(&o.api_version, &primary.group))
            .map(|o| ObjectKey {
                namespace: namespace_of(object, namespaced),
                name: o.name.clone(),
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
            .labels
            .get(label)
            .map(|name| ObjectKey {
                namespace: namespace_of(object, namespaced),
                name: name.clone(),
            })
            .into_iter()
            .collect()
    })
}

/// The namespace of a primary key found through `object`.
fn namespace_of(object: &CachedObject, namespaced: bool) -> Option<String> {
    object.namespace.clone().filter(|_| namespaced)
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
        assert_eq!(primary(&added).unwrap().1, Reason::Added);
        assert_eq!(primary(&changed).unwrap().1, Reason::Changed);
        assert_eq!(primary(&deleted).unwrap(), (key("p"), Reason::Deleted));
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
