//! The fields a field manager owns, as the API server records them in an object's
//! `metadata.managedFields` (`fieldsV1`), compared with an intent of server-side apply.
//!
//! `fieldsV1` is a tree that describes itself: `f:<name>` is a member of an object, `k:<json>`
//! the item of a keyed list whose key fields have those values, `v:<json>` an item of a set,
//! `i:<index>` an item by position, and `.` the node itself. A node without children owns the
//! whole value below it: an atomic field (a label selector, a list of arguments) or a leaf.
//!
//! Guarantee: [`owns_exactly`] is true only if every field the tree names is set in the intent
//! and every field the intent sets is named by the tree, so an apply of the intent by that
//! manager releases no field. What it cannot match (a `null` in the intent, a list the tree does
//! not key, two items one key names) counts as a difference.
//!
//! **Warning:** a childless node is taken to own its whole value. That is exact for atomic
//! fields and leaves; for a map entry the API server recorded as `{}`, fields added below it
//! are not seen as new. Their values must still match the object for an apply to be elided.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The digest of an apply intent: the first 16 bytes of the SHA-256 of its JSON text.
pub type IntentDigest = [u8; 16];

/// The digest of `intent`. Equal intents have equal digests, as serde_json writes object
/// members sorted (its `preserve_order` feature is off); an intent that means the same but
/// reads otherwise (`1.0` for `1`) has another, and is sent. Two intents with one digest take
/// about 2^64 tries to find, by whoever writes both: the guest itself.
pub fn digest(intent: &Value) -> IntentDigest {
    let text = serde_json::to_vec(intent).expect("a JSON value serializes");
    let full = Sha256::digest(text);
    let mut digest = IntentDigest::default();
    let len = digest.len();
    digest.copy_from_slice(&full[..len]);
    digest
}

/// Members of an apply intent that name the object rather than set a field, and are never
/// owned: at the top, and in `metadata`.
const IDENTITY: [&str; 2] = ["apiVersion", "kind"];
const METADATA_IDENTITY: [&str; 7] = [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "selfLink",
];

/// Whether the `fieldsV1` tree `owned` names exactly the fields `intent` sets.
pub fn owns_exactly(owned: &Value, intent: &Value) -> bool {
    let (Value::Object(tree), Value::Object(members)) = (owned, intent) else {
        return false;
    };
    // At the top, a tree without children owns nothing.
    named_are_set(tree, intent)
        && members.iter().all(|(name, value)| {
            if IDENTITY.contains(&name.as_str()) {
                return true;
            }
            let Value::Object(metadata) = value else {
                return member_is_named(name, value, Some(tree));
            };
            if name != "metadata" {
                return member_is_named(name, value, Some(tree));
            }
            let metadata_tree = tree.get("f:metadata").and_then(Value::as_object);
            metadata
                .iter()
                .filter(|(name, _)| !METADATA_IDENTITY.contains(&name.as_str()))
                .all(|(name, value)| member_is_named(name, value, metadata_tree))
        })
}

/// Whether every field the tree `owned` names is set in `value`.
fn named_are_set(owned: &Map<String, Value>, value: &Value) -> bool {
    owned.iter().all(|(key, child)| {
        let Value::Object(child) = child else {
            return false;
        };
        key == "." || member(key, value).is_some_and(|found| named_are_set(child, found))
    })
}

/// Whether the member `name` of an object, holding `value`, and every field below it are
/// named by the object's tree `owned`.
fn member_is_named(name: &str, value: &Value, owned: Option<&Map<String, Value>>) -> bool {
    match owned.and_then(|owned| owned.get(&format!("f:{name}"))) {
        Some(tree) => set_are_named(value, tree),
        // An empty map or list sets no field: the API server may record none for it.
        None => match value {
            Value::Object(members) => members.is_empty(),
            Value::Array(items) => items.is_empty(),
            _ => false,
        },
    }
}

/// Whether every field set in `value` is named by the tree `owned`.
fn set_are_named(value: &Value, owned: &Value) -> bool {
    let Value::Object(owned) = owned else {
        return false;
    };
    if value.is_null() {
        return false;
    }
    // A node without children owns everything below it: an atomic field or a leaf.
    if owned.keys().all(|k| k == ".") {
        return true;
    }
    match value {
        Value::Object(members) => members
            .iter()
            .all(|(name, v)| member_is_named(name, v, Some(owned))),
        Value::Array(items) => items.iter().enumerate().all(|(index, item)| {
            let mut trees = owned.iter().filter(|(key, _)| names_item(key, index, item));
            match (trees.next(), trees.next()) {
                (Some((_, tree)), None) => set_are_named(item, tree),
                // None, or several: not told apart.
                _ => false,
            }
        }),
        _ => false,
    }
}

/// The part of `value` that the key `key` of a `fieldsV1` tree names, if exactly one does.
fn member<'a>(key: &str, value: &'a Value) -> Option<&'a Value> {
    if let Some(name) = key.strip_prefix("f:") {
        return value.as_object()?.get(name);
    }
    let mut items = value
        .as_array()?
        .iter()
        .enumerate()
        .filter(|(index, item)| names_item(key, *index, item))
        .map(|(_, item)| item);
    match (items.next(), items.next()) {
        (Some(item), None) => Some(item),
        _ => None,
    }
}

/// Whether the key `key` of a `fieldsV1` tree names `item`, at `index` of its list. A keyed
/// item matches on the key fields it sets: the API server records the default of a key field
/// the intent leaves out (a port's `protocol`).
fn names_item(key: &str, index: usize, item: &Value) -> bool {
    if let Some(fields) = key.strip_prefix("k:") {
        let (Ok(Value::Object(fields)), Value::Object(item)) =
            (serde_json::from_str::<Value>(fields), item)
        else {
            return false;
        };
        fields
            .iter()
            .all(|(name, v)| item.get(name).is_none_or(|set| set == v))
            && fields.keys().any(|name| item.contains_key(name))
    } else if let Some(set_item) = key.strip_prefix("v:") {
        serde_json::from_str::<Value>(set_item).is_ok_and(|v| v == *item)
    } else if let Some(position) = key.strip_prefix("i:") {
        position.parse() == Ok(index)
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// What the API server recorded for `kubectl apply --server-side` of [`deployment`].
    fn deployment_fields() -> Value {
        json!({"f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {
                ".": {}, "f:args": {}, "f:image": {}, "f:name": {},
                "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                    ".": {}, "f:containerPort": {}, "f:protocol": {}}}}}}}}})
    }

    fn deployment() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "probe", "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "p"}},
                "template": {"metadata": {"labels": {"app": "p"}}, "spec": {"containers": [
                    {"name": "c", "image": "nginx", "args": ["a", "b"],
                     "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}}}})
    }

    /// What the API server recorded for an apply of [`config_map`].
    fn config_map_fields() -> Value {
        json!({"f:data": {"f:e": {}, "f:k": {}}, "f:metadata": {
            "f:annotations": {},
            "f:finalizers": {"v:\"example.com/x\"": {}},
            "f:labels": {"f:a": {}},
            "f:ownerReferences": {"k:{\"uid\":\"u1\"}": {}}}})
    }

    fn config_map() -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "probe", "namespace": "default", "labels": {"a": "b"},
                "annotations": {}, "finalizers": ["example.com/x"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "Secret", "name": "s",
                    "uid": "u1", "controller": true, "blockOwnerDeletion": true}]},
            "data": {"k": "v", "e": ""}})
    }

    #[test]
    fn the_fields_the_api_server_recorded_for_an_intent_are_exactly_its_fields() {
        assert!(owns_exactly(&deployment_fields(), &deployment()));
        assert!(owns_exactly(&config_map_fields(), &config_map()));
        let status = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "probe"},
            "status": {"observedGeneration": 1, "conditions": [{"type": "X", "status": "True"}]}});
        let status_fields = json!({"f:status": {"f:observedGeneration": {}, "f:conditions": {
            "k:{\"type\":\"X\"}": {".": {}, "f:status": {}, "f:type": {}}}}});
        assert!(owns_exactly(&status_fields, &status));
    }

    #[test]
    fn a_field_dropped_from_the_intent_is_a_difference() {
        let mut intent = config_map();
        intent["data"].as_object_mut().unwrap().remove("e");
        assert!(!owns_exactly(&config_map_fields(), &intent));
        let mut intent = deployment();
        intent["spec"]["template"]["spec"]["containers"][0]
            .as_object_mut()
            .unwrap()
            .remove("ports");
        assert!(!owns_exactly(&deployment_fields(), &intent));
    }

    #[test]
    fn a_field_added_to_the_intent_is_a_difference() {
        let mut intent = config_map();
        intent["data"]["new"] = json!("x");
        assert!(!owns_exactly(&config_map_fields(), &intent));
        let mut intent = config_map();
        intent["metadata"]["finalizers"] = json!(["example.com/x", "example.com/y"]);
        assert!(!owns_exactly(&config_map_fields(), &intent));
        let mut intent = deployment();
        intent["spec"]["template"]["spec"]["containers"][0]["name"] = json!("d");
        assert!(!owns_exactly(&deployment_fields(), &intent));
    }

    #[test]
    fn an_atomic_field_is_owned_whole_and_a_null_is_never_matched() {
        let mut intent = deployment();
        intent["spec"]["selector"] = json!({"matchLabels": {"app": "p", "tier": "web"}});
        intent["spec"]["template"]["spec"]["containers"][0]["args"] = json!(["c"]);
        assert!(owns_exactly(&deployment_fields(), &intent));
        let mut intent = config_map();
        intent["data"]["k"] = Value::Null;
        assert!(!owns_exactly(&config_map_fields(), &intent));
    }

    #[test]
    fn nothing_owned_matches_only_an_intent_that_sets_nothing() {
        assert!(!owns_exactly(&json!({}), &config_map()));
        let bare = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        assert!(owns_exactly(&json!({}), &bare));
        assert!(!owns_exactly(&json!("not a tree"), &bare));
    }

    #[test]
    fn a_key_field_the_server_defaulted_matches_an_intent_without_it() {
        // What the API server recorded for ports: [{containerPort: 80}].
        let mut owned = deployment_fields();
        owned["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]["f:ports"] = json!(
            {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
        );
        let mut intent = deployment();
        intent["spec"]["template"]["spec"]["containers"][0]["ports"] =
            json!([{"containerPort": 80}]);
        assert!(owns_exactly(&owned, &intent));
        // Two items that the recorded key could both name are not told apart.
        intent["spec"]["template"]["spec"]["containers"][0]["ports"] =
            json!([{"containerPort": 80}, {"containerPort": 80, "protocol": "UDP"}]);
        assert!(!owns_exactly(&owned, &intent));
    }

    #[test]
    fn an_empty_map_or_list_sets_no_field() {
        let owned = json!({"f:spec": {"f:replicas": {}}});
        let intent = json!({"apiVersion": "kubewasm.dev/v1", "kind": "PodSet",
            "metadata": {"name": "a", "labels": {}, "resourceVersion": "5"},
            "spec": {"replicas": 1, "volumes": []}});
        assert!(owns_exactly(&owned, &intent));
    }
}
