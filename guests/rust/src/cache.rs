//! Reads from the host's informer cache.
//!
//! Reads never reach the API server and only cover the kinds the controller declared (primary,
//! owned and watched). Cached objects have `metadata.managedFields` stripped. Objects are
//! deserialised into any [`DeserializeOwned`] type: [`serde_json::Value`], a k8s-openapi type or
//! a custom struct.

use serde::de::DeserializeOwned;

use crate::bindings::kubewasm::controller::cache as wit;
use crate::{Error, Gvk, Result};

/// The object `namespace/name` of `kind`, or `None` if the cache does not hold it.
/// `namespace` is `None` for a cluster-scoped kind.
pub fn get<T: DeserializeOwned>(
    kind: &Gvk,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<T>> {
    wit::get(kind, namespace, name)?
        .map(|text| serde_json::from_str(&text).map_err(Error::from))
        .transpose()
}

/// Every cached object of `kind` in `namespace` (`None`: all namespaces), optionally filtered by
/// a label selector in the API server's syntax (`app=web,tier in (a,b),!legacy`).
/// Ordered by namespace, then name.
pub fn list<T: DeserializeOwned>(
    kind: &Gvk,
    namespace: Option<&str>,
    label_selector: Option<&str>,
) -> Result<Vec<T>> {
    wit::list(kind, namespace, label_selector)?
        .iter()
        .map(|text| serde_json::from_str(text).map_err(Error::from))
        .collect()
}

/// Every cached object of `kind` in `namespace` (`None`: all namespaces) whose controller
/// reference (the `ownerReferences` entry with `controller: true`) has `controller_uid`: the
/// objects that owner controls, e.g. the pods of a ReplicaSet. Ordered by namespace, then name.
/// Served from the host's index, so it costs the objects found, however many others the
/// namespace holds.
pub fn list_controlled<T: DeserializeOwned>(
    kind: &Gvk,
    namespace: Option<&str>,
    controller_uid: &str,
) -> Result<Vec<T>> {
    wit::list_controlled(kind, namespace, controller_uid)?
        .iter()
        .map(|text| serde_json::from_str(text).map_err(Error::from))
        .collect()
}

/// [`get`] for a k8s-openapi resource type, e.g. `get_resource::<Pod>(Some("ns"), "web-0")`.
#[cfg(feature = "k8s-openapi")]
pub fn get_resource<K>(namespace: Option<&str>, name: &str) -> Result<Option<K>>
where
    K: k8s_openapi::Resource + DeserializeOwned,
{
    get(&Gvk::of::<K>(), namespace, name)
}

/// [`list`] for a k8s-openapi resource type, e.g. `list_resources::<Pod>(Some("ns"), None)`.
#[cfg(feature = "k8s-openapi")]
pub fn list_resources<K>(namespace: Option<&str>, label_selector: Option<&str>) -> Result<Vec<K>>
where
    K: k8s_openapi::Resource + DeserializeOwned,
{
    list(&Gvk::of::<K>(), namespace, label_selector)
}

/// [`list_controlled`] for a k8s-openapi resource type, e.g.
/// `list_controlled_resources::<Pod>(Some("ns"), replica_set_uid)`.
#[cfg(feature = "k8s-openapi")]
pub fn list_controlled_resources<K>(namespace: Option<&str>, controller_uid: &str) -> Result<Vec<K>>
where
    K: k8s_openapi::Resource + DeserializeOwned,
{
    list_controlled(&Gvk::of::<K>(), namespace, controller_uid)
}
