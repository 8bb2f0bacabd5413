//! The reconcile decision of the benchmark's "copy" controller, shared by every implementation
//! written in Rust (the kubewasm guest and the native kube-rs controller).
//!
//! A source is a ConfigMap labelled [`ROLE_LABEL`]`=`[`SOURCE_ROLE`]. Its child is the ConfigMap
//! `<source>-copy` in the same namespace, labelled [`ROLE_LABEL`]`=`[`COPY_ROLE`] and
//! [`SOURCE_LABEL`]`=<source>`, whose `data` equals the source's. The controller owner reference
//! is not part of [`child`]: each implementation adds it its own way.

use serde_json::{Map, Value, json};

/// The label that tells sources and children apart.
pub const ROLE_LABEL: &str = "bench.kubewasm.dev/role";

/// [`ROLE_LABEL`]'s value on a source.
pub const SOURCE_ROLE: &str = "source";

/// [`ROLE_LABEL`]'s value on a child.
pub const COPY_ROLE: &str = "copy";

/// The label on a child that names its source.
pub const SOURCE_LABEL: &str = "bench.kubewasm.dev/source";

/// The label selector of sources, in the API server's syntax.
pub const SOURCE_SELECTOR: &str = "bench.kubewasm.dev/role=source";

/// The label selector of children, in the API server's syntax.
pub const COPY_SELECTOR: &str = "bench.kubewasm.dev/role=copy";

/// The name of the child of the source named `source`.
pub fn child_name(source: &str) -> String {
    format!("{source}-copy")
}

/// The child manifest of `source` (a ConfigMap as JSON), ready for a server-side apply.
///
/// It carries `apiVersion`, `kind`, `metadata.{name, namespace, labels}` and, when the source
/// has a non-empty `data`, the same `data`; without it the child has none, so an apply removes
/// keys the source dropped. The result depends on nothing but the source's name, namespace and
/// `data`.
pub fn child(source: &Value) -> Value {
    let metadata = &source["metadata"];
    let name = metadata["name"].as_str().unwrap_or_default();
    let mut child_metadata = Map::new();
    child_metadata.insert("name".into(), child_name(name).into());
    if let Some(namespace) = metadata["namespace"].as_str() {
        child_metadata.insert("namespace".into(), namespace.into());
    }
    child_metadata.insert(
        "labels".into(),
        json!({ ROLE_LABEL: COPY_ROLE, SOURCE_LABEL: name }),
    );
    let mut child = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": child_metadata,
    });
    if let Some(data) = source["data"].as_object().filter(|data| !data.is_empty()) {
        child["data"] = Value::Object(data.clone());
    }
    child
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(data: Value) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "s1",
                "namespace": "bench",
                "uid": "u-1",
                "resourceVersion": "7",
                "labels": { ROLE_LABEL: SOURCE_ROLE, "other": "x" },
                "annotations": { "a": "b" },
            },
            "data": data,
        })
    }

    #[test]
    fn child_copies_every_data_key_under_the_child_name() {
        let child = child(&source(json!({ "a": "1", "b": "two" })));
        let expected = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "s1-copy",
                "namespace": "bench",
                "labels": { ROLE_LABEL: COPY_ROLE, SOURCE_LABEL: "s1" },
            },
            "data": { "a": "1", "b": "two" },
        });
        assert_eq!(child, expected);
    }

    #[test]
    fn child_of_a_source_without_data_has_no_data() {
        for data in [Value::Null, json!({})] {
            let child = child(&source(data));
            assert_eq!(child.get("data"), None, "{child}");
            assert_eq!(child["metadata"]["name"], "s1-copy");
        }
    }

    #[test]
    fn child_keeps_no_source_metadata_but_name_and_namespace() {
        let child = child(&source(json!({ "k": "v" })));
        let metadata = child["metadata"].as_object().expect("metadata");
        let mut keys: Vec<&str> = metadata.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["labels", "name", "namespace"]);
    }

    #[test]
    fn selectors_match_the_role_labels() {
        assert_eq!(SOURCE_SELECTOR, format!("{ROLE_LABEL}={SOURCE_ROLE}"));
        assert_eq!(COPY_SELECTOR, format!("{ROLE_LABEL}={COPY_ROLE}"));
    }
}
