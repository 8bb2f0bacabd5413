//! Constructors and conversions for the generated WIT records.

use std::fmt;
use std::time::Duration;

use crate::{Changes, Gvk, Mapping, Metadata, ObjectKey, Selection, Watch};

impl Gvk {
    /// A kind from its group (`""` for the core group), version and kind.
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        kind: impl Into<String>,
    ) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// A kind from an `apiVersion` (`apps/v1`, or `v1` for the core group) and a kind.
    pub fn from_api_version(api_version: &str, kind: impl Into<String>) -> Self {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        Self::new(group, version, kind)
    }

    /// The kind of a k8s-openapi resource type, e.g. `Gvk::of::<Pod>()`.
    #[cfg(feature = "k8s-openapi")]
    pub fn of<K: k8s_openapi::Resource>() -> Self {
        Self::new(K::GROUP, K::VERSION, K::KIND)
    }

    /// The `apiVersion` of objects of this kind: `group/version`, or `version` for the core
    /// group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

impl fmt::Display for Gvk {
    /// `apps/v1, Kind=Deployment`, as the API machinery prints kinds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, Kind={}", self.api_version(), self.kind)
    }
}

impl ObjectKey {
    /// The key of a namespaced object.
    pub fn namespaced(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// The key of a cluster-scoped object.
    pub fn cluster(name: impl Into<String>) -> Self {
        Self {
            namespace: None,
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectKey {
    /// `namespace/name`, or `name` for a cluster-scoped object.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{namespace}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

impl Selection {
    /// Every object of `kind`, in all namespaces.
    pub fn new(kind: Gvk) -> Self {
        Self {
            kind,
            namespace: None,
            label_selector: None,
        }
    }

    /// Only objects in `namespace`.
    #[must_use]
    pub fn in_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only objects matching `selector`, in the API server's syntax (`app=web,tier in (a,b)`).
    #[must_use]
    pub fn with_label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }
}

impl From<Gvk> for Selection {
    fn from(kind: Gvk) -> Self {
        Self::new(kind)
    }
}

impl Metadata {
    /// A controller named `name` (lowercase letters, digits and `-`) reconciling `primary`, with
    /// no owned or watched kinds, no finalizer, a concurrency of 1, no resync, and every update
    /// of a primary object reconciled.
    pub fn new(name: impl Into<String>, primary: impl Into<Selection>) -> Self {
        Self {
            name: name.into(),
            primary: primary.into(),
            owns: Vec::new(),
            watches: Vec::new(),
            finalizer: None,
            max_concurrency: 1,
            resync_seconds: None,
            reconcile_on: Changes::ANY,
        }
    }

    /// Reconciles an update of a primary object only if it changes one of `changes`, e.g.
    /// `Changes::GENERATION | Changes::LABELS`. Creation, deletion and the start of a deletion,
    /// resync, reload, and changes of owned and watched objects are reconciled whatever it
    /// says; so a guest that writes a timestamp into its primary's status with
    /// `Changes::GENERATION` does not reconcile it again for that write.
    #[must_use]
    pub fn reconcile_on(mut self, changes: Changes) -> Self {
        self.reconcile_on = changes;
        self
    }

    /// Adds a kind this controller creates and owns; a change to one enqueues its controller
    /// owner.
    #[must_use]
    pub fn owns(mut self, kind: Gvk) -> Self {
        self.owns.push(kind);
        self
    }

    /// Adds a watched kind whose changes enqueue keys through `mapping`.
    #[must_use]
    pub fn watch(mut self, selection: impl Into<Selection>, mapping: Mapping) -> Self {
        self.watches.push(Watch {
            selection: selection.into(),
            mapping,
        });
        self
    }

    /// Sets the finalizer the host adds to every primary object and removes once
    /// [`Controller::finalize`](crate::Controller::finalize) returns done.
    #[must_use]
    pub fn finalizer(mut self, finalizer: impl Into<String>) -> Self {
        self.finalizer = Some(finalizer.into());
        self
    }

    /// Sets how many keys may be reconciled at the same time (values below 1 become 1).
    #[must_use]
    pub fn max_concurrency(mut self, max: u32) -> Self {
        self.max_concurrency = max.max(1);
        self
    }

    /// Enqueues every primary object again after `period` without a change (whole seconds,
    /// rounded down, at least 1).
    #[must_use]
    pub fn resync_every(mut self, period: Duration) -> Self {
        self.resync_seconds = Some(u32::try_from(period.as_secs()).unwrap_or(u32::MAX).max(1));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_versions_round_trip() {
        let deployment = Gvk::from_api_version("apps/v1", "Deployment");
        assert_eq!(deployment, Gvk::new("apps", "v1", "Deployment"));
        assert_eq!(deployment.api_version(), "apps/v1");
        assert_eq!(deployment.to_string(), "apps/v1, Kind=Deployment");
        let pod = Gvk::from_api_version("v1", "Pod");
        assert_eq!(pod.group, "");
        assert_eq!(pod.api_version(), "v1");
    }

    #[cfg(feature = "k8s-openapi")]
    #[test]
    fn gvk_of_k8s_openapi_types() {
        use k8s_openapi::api::apps::v1::Deployment;
        use k8s_openapi::api::core::v1::Pod;
        assert_eq!(Gvk::of::<Pod>(), Gvk::new("", "v1", "Pod"));
        assert_eq!(
            Gvk::of::<Deployment>(),
            Gvk::new("apps", "v1", "Deployment")
        );
    }

    #[test]
    fn metadata_builder() {
        let meta = Metadata::new("x", Gvk::new("a.io", "v1", "Thing"))
            .owns(Gvk::new("", "v1", "Pod"))
            .watch(
                Selection::new(Gvk::new("", "v1", "Secret")).in_namespace("ns"),
                Mapping::Label("thing".into()),
            )
            .finalizer("a.io/cleanup")
            .max_concurrency(0)
            .resync_every(Duration::from_millis(1500));
        assert_eq!(meta.max_concurrency, 1);
        assert_eq!(meta.resync_seconds, Some(1));
        assert_eq!(meta.owns.len(), 1);
        assert_eq!(meta.watches[0].selection.namespace.as_deref(), Some("ns"));
        assert_eq!(meta.finalizer.as_deref(), Some("a.io/cleanup"));
        assert_eq!(ObjectKey::namespaced("ns", "n").to_string(), "ns/n");
        assert_eq!(ObjectKey::cluster("n").to_string(), "n");
    }
}
