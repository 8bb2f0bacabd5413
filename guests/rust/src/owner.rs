//! Owner references of objects held as [`serde_json::Value`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{ObjectKey, meta};

/// One entry of `metadata.ownerReferences`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    /// API version of the owner.
    pub api_version: String,
    /// Kind of the owner.
    pub kind: String,
    /// Name of the owner (same namespace as the owned object, or cluster-scoped).
    pub name: String,
    /// Uid of the owner.
    pub uid: String,
    /// Whether this owner is the managing controller; at most one reference has `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
    /// Whether the owner's foreground deletion waits for this object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_owner_deletion: Option<bool>,
}

/// `metadata.ownerReferences` of `object`; malformed entries are skipped.
pub fn owner_references(object: &Value) -> Vec<OwnerReference> {
    object
        .get("metadata")
        .and_then(|metadata| metadata.get("ownerReferences"))
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| OwnerReference::deserialize(r).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The controller owner reference of `object` (the one with `controller: true`), if any.
pub fn controller_ref(object: &Value) -> Option<OwnerReference> {
    owner_references(object)
        .into_iter()
        .find(|r| r.controller == Some(true))
}

/// The key of `object`'s controller owner: its name, in `object`'s namespace. Handy in
/// [`Controller::map_keys`](crate::Controller::map_keys).
pub fn controller_owner_of(object: &Value) -> Option<ObjectKey> {
    let owner = controller_ref(object)?;
    Some(ObjectKey {
        namespace: meta::namespace(object).map(str::to_owned),
        name: owner.name,
    })
}

/// Whether `child`'s controller owner reference points at the object with uid `owner_uid`.
pub fn is_controlled_by(child: &Value, owner_uid: &str) -> bool {
    controller_ref(child).is_some_and(|r| r.uid == owner_uid)
}

/// A controller owner reference to `owner` (`controller` and `blockOwnerDeletion` true), as the
/// host adds it for `owned` applies; `None` if `owner` lacks apiVersion, kind, name or uid.
pub fn controller_reference_to(owner: &Value) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: owner.get("apiVersion")?.as_str()?.to_owned(),
        kind: owner.get("kind")?.as_str()?.to_owned(),
        name: meta::name(owner)?.to_owned(),
        uid: meta::uid(owner)?.to_owned(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn owner() -> Value {
        json!({"apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet",
               "metadata": {"name": "web", "namespace": "ns", "uid": "u1"}})
    }

    #[test]
    fn finds_the_controller() {
        let reference = controller_reference_to(&owner()).unwrap();
        let child = json!({"metadata": {"namespace": "ns", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "u0"},
            {"bogus": true},
            reference,
        ]}});
        assert_eq!(owner_references(&child).len(), 2);
        assert_eq!(controller_ref(&child).unwrap().name, "web");
        assert_eq!(
            controller_owner_of(&child),
            Some(ObjectKey::namespaced("ns", "web"))
        );
        assert!(is_controlled_by(&child, "u1"));
        assert!(!is_controlled_by(&child, "u0"));
    }

    #[test]
    fn orphans_have_no_controller() {
        let orphan = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "u0", "controller": false}
        ]}});
        assert_eq!(controller_ref(&orphan), None);
        assert_eq!(controller_owner_of(&json!({})), None);
        assert_eq!(controller_reference_to(&json!({"kind": "X"})), None);
    }

    #[test]
    fn serialises_in_api_shape() {
        let reference = controller_reference_to(&owner()).unwrap();
        assert_eq!(
            serde_json::to_value(reference).unwrap(),
            json!({"apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet", "name": "web",
                   "uid": "u1", "controller": true, "blockOwnerDeletion": true})
        );
    }
}
