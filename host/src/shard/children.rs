//! What a watch must have shown before a key's children are all known: for each owned kind, the
//! highest resourceVersion among the key's children, in the annotation
//! `children.shard.kubewasm.dev/<guest>` (`Pod.v1=4121,Secret.v1=3990`). A member handing the key
//! over writes the children its cache holds (its own creations among them, before any watch
//! shows them), and the sharder labels the key for its next member once its own watches have
//! shown those versions (or a few seconds have passed); the sharder writes the children as its
//! watch showed them labelled for that member, and the member reconciles the key once its own
//! watches have shown those. Watches of the primary and owned kinds are separate streams that
//! may lag one another: so a guest that counts its children never sees a partial set.
//!
//! resourceVersions are compared as integers (comparable since Kubernetes v1.35); a kind whose
//! version is not an integer is left out, and waits for nothing.

use std::collections::BTreeMap;

use kube::Resource;
use kube::api::GroupVersionKind;
use kube::runtime::watcher;

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

    /// Raises every version to the one `other` names for its kind.
    pub fn merge(&mut self, other: &Seen) {
        for (tag, version) in &other.0 {
            let entry = self.0.entry(tag.clone()).or_default();
            *entry = (*entry).max(*version);
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

/// The versions a member names as it leaves a guest, by namespace of the children (empty for
/// cluster-scoped ones): `team-a:Pod.v1=41,Secret.v1=3;team-b:Pod.v1=50`. A key waits only for
/// the children of its own namespace, which its owned watches there show.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Left(BTreeMap<String, Seen>);

impl Left {
    /// Raises the version of `kind` in `namespace` to `version`, if that is an integer.
    pub fn raise(&mut self, namespace: Option<&str>, kind: &GroupVersionKind, version: &str) {
        let namespace = namespace.unwrap_or_default().to_owned();
        self.0.entry(namespace).or_default().raise(kind, version);
    }

    /// Raises every version to the one `other` names.
    pub fn merge(&mut self, other: &Left) {
        for (namespace, seen) in &other.0 {
            self.0.entry(namespace.clone()).or_default().merge(seen);
        }
    }

    /// The versions a key in `namespace` waits for: of that namespace, or of all for a
    /// cluster-scoped key, whose children may be anywhere.
    pub fn of(&self, namespace: Option<&str>) -> Seen {
        let mut seen = Seen::default();
        let all = self.0.iter();
        for (_, named) in all.filter(|(n, _)| namespace.is_none_or(|ns| ns == n.as_str())) {
            seen.merge(named);
        }
        seen
    }

    /// The annotation's value; `None` when no kind has a version.
    pub fn value(&self) -> Option<String> {
        let entries: Vec<String> = (self.0.iter())
            .filter_map(|(namespace, seen)| Some(format!("{namespace}:{}", seen.value()?)))
            .collect();
        (!entries.is_empty()).then(|| entries.join(";"))
    }

    /// Reads an annotation's value; entries that do not read as `namespace:versions` are left
    /// out.
    pub fn parse(value: &str) -> Self {
        let entries = value.split(';').filter_map(|entry| {
            let (namespace, seen) = entry.trim().split_once(':')?;
            Some((namespace.to_owned(), Seen::parse(seen)))
        });
        Self(entries.collect())
    }
}

/// What one watch of an owned kind has shown, as its events arrive.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shown {
    /// Whether its first list is done.
    pub listed: bool,
    /// The highest version among the items of the list in progress.
    listing: u64,
    /// The highest version shown by a list done or an event since.
    pub version: u64,
}

impl Shown {
    /// Notes the version `event` shows: a list's items only once the list is done, since they
    /// come in name order rather than version order.
    pub fn note<K: Resource>(&mut self, event: &watcher::Event<K>) {
        let version = |object: &K| -> u64 {
            let version = object.meta().resource_version.as_deref();
            version.and_then(|v| v.parse().ok()).unwrap_or(0)
        };
        match event {
            watcher::Event::Init => self.listing = 0,
            watcher::Event::InitApply(o) => self.listing = self.listing.max(version(o)),
            watcher::Event::InitDone => {
                self.version = self.version.max(self.listing);
                self.listed = true;
            }
            watcher::Event::Apply(o) | watcher::Event::Delete(o) => {
                self.version = self.version.max(version(o));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_member_left_reads_back_by_namespace() {
        let pod = GroupVersionKind::gvk("", "v1", "Pod");
        let mut left = Left::default();
        assert_eq!(left.value(), None);
        left.raise(Some("a"), &pod, "41");
        left.raise(Some("b"), &pod, "50");
        left.raise(None, &pod, "7");
        let value = left.value().unwrap();
        assert_eq!(value, ":Pod.v1=7;a:Pod.v1=41;b:Pod.v1=50");
        let read = Left::parse(&value);
        assert_eq!(read, left);
        assert_eq!(
            read.of(Some("a")).version(&pod),
            Some(41),
            "its own namespace"
        );
        assert_eq!(read.of(Some("c")).version(&pod), None);
        assert_eq!(
            read.of(None).version(&pod),
            Some(50),
            "cluster-scoped: every one"
        );
        assert_eq!(
            Left::parse("junk;a:Pod.v1=3").of(None).version(&pod),
            Some(3)
        );
    }

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

    #[test]
    fn a_watch_shows_a_list_once_done_and_each_event_at_once() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let object = |version: &str| ConfigMap {
            metadata: kube::api::ObjectMeta {
                resource_version: Some(version.to_owned()),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut shown = Shown::default();
        shown.note(&watcher::Event::<ConfigMap>::Init);
        shown.note(&watcher::Event::InitApply(object("30")));
        shown.note(&watcher::Event::InitApply(object("12")));
        assert!(!shown.listed);
        assert_eq!(shown.version, 0, "a list in progress shows nothing yet");
        shown.note(&watcher::Event::<ConfigMap>::InitDone);
        assert!(shown.listed);
        assert_eq!(shown.version, 30);
        shown.note(&watcher::Event::Apply(object("41")));
        shown.note(&watcher::Event::Delete(object("35")));
        assert_eq!(shown.version, 41);
    }
}
