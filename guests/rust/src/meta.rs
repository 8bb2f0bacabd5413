//! Accessors for `metadata` fields of objects held as [`serde_json::Value`].
//!
//! Missing or mistyped fields read as absent; none of these functions panic.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::ObjectKey;

fn str_field<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// `metadata.name`.
pub fn name(object: &Value) -> Option<&str> {
    str_field(object, "name")
}

/// `metadata.namespace`; `None` for cluster-scoped objects.
pub fn namespace(object: &Value) -> Option<&str> {
    str_field(object, "namespace")
}

/// `metadata.uid`.
pub fn uid(object: &Value) -> Option<&str> {
    str_field(object, "uid")
}

/// `metadata.resourceVersion`.
pub fn resource_version(object: &Value) -> Option<&str> {
    str_field(object, "resourceVersion")
}

/// `metadata.creationTimestamp` (RFC 3339).
pub fn creation_timestamp(object: &Value) -> Option<&str> {
    str_field(object, "creationTimestamp")
}

/// `metadata.generation`.
pub fn generation(object: &Value) -> Option<i64> {
    object.get("metadata")?.get("generation")?.as_i64()
}

/// Whether `metadata.deletionTimestamp` is set: the object is being deleted.
pub fn is_deleting(object: &Value) -> bool {
    str_field(object, "deletionTimestamp").is_some()
}

/// `metadata.labels`; entries whose value is not a string are skipped.
pub fn labels(object: &Value) -> BTreeMap<String, String> {
    object
        .get("metadata")
        .and_then(|metadata| metadata.get("labels"))
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// The object's key (namespace and name), if it has a name.
pub fn key(object: &Value) -> Option<ObjectKey> {
    Some(ObjectKey {
        namespace: namespace(object).map(str::to_owned),
        name: name(object)?.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_metadata() {
        let pod = json!({"metadata": {
            "name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7", "generation": 3,
            "creationTimestamp": "2024-01-01T00:00:00Z",
            "labels": {"app": "web", "bad": 1}
        }});
        assert_eq!(name(&pod), Some("p"));
        assert_eq!(namespace(&pod), Some("ns"));
        assert_eq!(uid(&pod), Some("u"));
        assert_eq!(resource_version(&pod), Some("7"));
        assert_eq!(generation(&pod), Some(3));
        assert_eq!(creation_timestamp(&pod), Some("2024-01-01T00:00:00Z"));
        assert!(!is_deleting(&pod));
        assert_eq!(labels(&pod), BTreeMap::from([("app".into(), "web".into())]));
        assert_eq!(key(&pod), Some(ObjectKey::namespaced("ns", "p")));
        assert_eq!(key(&json!({})), None);
        assert!(labels(&json!(null)).is_empty());
    }
}
