//! Selections: the objects of one kind in one namespace or all, optionally narrowed by a label
//! selector. Informers are keyed by their selection, and a guest declares its kinds as
//! selections.

use kube::api::GroupVersionKind;

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
    /// Whether an object of this kind falls in the namespace and label selector. Cluster-scoped
    /// objects are in no namespace, so a namespace does not exclude them.
    pub fn selects(&self, object: &CachedObject) -> bool {
        (object.namespace().is_none()
            || self.namespace.is_none()
            || self.namespace.as_deref() == object.namespace())
            && self.selector.as_ref().is_none_or(|s| s.matches(object))
    }
}
