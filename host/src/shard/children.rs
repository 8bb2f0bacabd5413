//! What a key's new member must have cached before it reconciles the key: for each owned kind,
//! the resourceVersion at which the sharder's watch showed every child of the key labelled for
//! that member. The sharder writes it on the key with the key's own label, in the annotation
//! `children.shard.kubewasm.dev/<guest>` (`Pod.v1=4121,Secret.v1=3990`). The member's watches of
//! the primary and owned kinds are separate streams that may lag one another; once its watch
//! of each kind has shown the version named, its cache holds every child as labelled for it,
//! so a guest that counts its children never sees a partial set.
//!
//! resourceVersions are compared as integers (comparable since Kubernetes v1.35); a kind whose
//! version is not an integer is left out, and waits for nothing.

use std::collections::BTreeMap;

use kube::api::GroupVersionKind;

use crate::cluster::transform::HOST_ANNOTATIONS;

/// The annotation on `guest`'s keys that names the versions their children were seen at.
pub fn annotation(guest: &str) -> String {
    format!("{HOST_ANNOTATIONS}{guest}")
}

/// The versions a member's watch of each owned kind must have shown, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen(BTreeMap<String, u64>);

/// How `kind` is named in the annotation: `Kind.version.group`, as `kubectl` names resources.
fn tag(kind: &GroupVersionKind) -> String {
    if kind.group.is_empty() {
        format!("{}.{}", kind.kind, kind.version)
    } else {
        format!("{}.{}.{}", kind.kind, kind.version, kind.group)
    }
}

impl Seen {
    /// Raises the version of `kind` to `version`, if that is an integer.
    pub fn raise(&mut self, kind: &GroupVersionKind, version: &str) {
        if let Ok(version) = version.parse::<u64>() {
            let entry = self.0.entry(tag(kind)).or_default();
            *entry = (*entry).max(version);
        }
    }

    /// The annotation's value; `None` when no kind has a version (no children).
    pub fn value(&self) -> Option<String> {
        let entries: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        (!entries.is_empty()).then(|| entries.join(","))
    }

    /// Reads an annotation's value; entries that do not read as `tag=integer` are left out.
    pub fn parse(value: &str) -> Self {
        let entries = value.split(',').filter_map(|entry| {
            let (tag, version) = entry.trim().split_once('=')?;
            Some((tag.to_owned(), version.parse().ok()?))
        });
        Self(entries.collect())
    }

    /// The version a watch of `kind` must have shown, if the annotation names one.
    pub fn version(&self, kind: &GroupVersionKind) -> Option<u64> {
        self.0.get(&tag(kind)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_version_of_each_kind_reads_back_from_the_annotation() {
        let pod = GroupVersionKind::gvk("", "v1", "Pod");
        let deployment = GroupVersionKind::gvk("apps", "v1", "Deployment");
        let mut seen = Seen::default();
        assert_eq!(seen.value(), None, "no children, nothing to wait for");
        seen.raise(&pod, "12");
        seen.raise(&pod, "40");
        seen.raise(&pod, "9");
        seen.raise(&deployment, "7");
        seen.raise(&deployment, "not-a-number");
        let value = seen.value().unwrap();
        assert_eq!(value, "Deployment.v1.apps=7,Pod.v1=40");
        let read = Seen::parse(&value);
        assert_eq!(read, seen);
        assert_eq!(read.version(&pod), Some(40));
        assert_eq!(
            read.version(&GroupVersionKind::gvk("", "v1", "Secret")),
            None
        );
        let torn = Seen::parse("Pod.v1=oops, Secret.v1=3,junk");
        assert_eq!(torn.version(&pod), None);
        assert_eq!(
            torn.version(&GroupVersionKind::gvk("", "v1", "Secret")),
            Some(3)
        );
    }
}
