//! Selections: the objects of one kind in one namespace or all, optionally narrowed by a label
//! selector. Informers are keyed by their selection, and a guest declares its kinds as
//! selections.

use kube::api::GroupVersionKind;
use kube::core::GroupVersion;

use crate::cluster::cache::CachedObject;
use crate::cluster::selector::LabelSelector;

/// A set of objects of one kind, as declared by a guest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Selection {
    /// The kind.
    pub kind: GroupVersionKind,
    /// One namespace, or all.
    pub namespace: Option<String>,
    /// A label selector, in canonical form.
    pub selector: Option<LabelSelector>,
}

impl Selection {
    /// The same selection in every namespace.
    pub fn everywhere(&self) -> Selection {
        Selection {
            namespace: None,
            ..self.clone()
        }
    }

    /// Whether an object of this kind falls in the namespace and label selector. Cluster-scoped
    /// objects are in no namespace, so a namespace does not exclude them.
    pub fn selects(&self, object: &CachedObject) -> bool {
        (object.namespace().is_none()
            || self.namespace.is_none()
            || self.namespace.as_deref() == object.namespace())
            && self.selector.as_ref().is_none_or(|s| s.matches(object))
    }
}

/// The kind of a Kubernetes object from its `apiVersion` and `kind`, if it has both.
pub fn kind_of(object: &serde_json::Value) -> Option<GroupVersionKind> {
    let version: GroupVersion = object["apiVersion"].as_str()?.parse().ok()?;
    Some(version.with_kind(object["kind"].as_str()?))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_kind_of_an_object_is_read_from_its_api_version_and_kind() {
        let kind = kind_of(&json!({"apiVersion": "apps/v1", "kind": "Deployment"})).unwrap();
        assert_eq!(kind, GroupVersionKind::gvk("apps", "v1", "Deployment"));
        let core = kind_of(&json!({"apiVersion": "v1", "kind": "Pod"})).unwrap();
        assert_eq!(core, GroupVersionKind::gvk("", "v1", "Pod"));
        assert!(kind_of(&json!({"kind": "Pod"})).is_none());
        assert!(kind_of(&json!({"apiVersion": "v1"})).is_none());
    }
}
