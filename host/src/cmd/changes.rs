//! What each write of a rendered call did to the objects it was rendered against, as
//! `kubewasm render --diff` prints it: whether it created, changed, left as it was, deleted or
//! was refused its object, and every field it changed, with its value before and after.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use kube::api::GroupVersionKind;
use serde_json::Value;

use crate::wasm::offline::{Effect, Write};

/// One field a write changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Where it is: `spec.replicas`, `spec.containers[0].image`,
    /// `metadata.labels["app.kubernetes.io/name"]`.
    pub path: String,
    /// Its value before the write; `None` when it was absent.
    pub before: Option<Value>,
    /// Its value after; `None` when the write removed it.
    pub after: Option<Value>,
}

/// The fields whose values differ between `before` and `after`, leaves only, in key order
/// (a list of another length counts as one field). The resourceVersion every write sets is
/// left out.
pub fn fields(before: &Value, after: &Value) -> Vec<Field> {
    let mut fields = Vec::new();
    diff("", Some(before), Some(after), &mut fields);
    fields.retain(|field| field.path != "metadata.resourceVersion");
    fields
}

/// `Some` for an object or nothing, with the object's fields if any.
fn object(value: Option<&Value>) -> Option<Option<&serde_json::Map<String, Value>>> {
    match value {
        None => Some(None),
        Some(Value::Object(map)) => Some(Some(map)),
        Some(_) => None,
    }
}

fn diff(path: &str, before: Option<&Value>, after: Option<&Value>, fields: &mut Vec<Field>) {
    if let (Some(b), Some(a)) = (object(before), object(after))
        && (b.is_some() || a.is_some())
    {
        let keys: BTreeSet<&String> = b.iter().chain(a.iter()).flat_map(|m| m.keys()).collect();
        if keys.is_empty() && before != after {
            // An empty object that appears or goes.
            fields.push(Field {
                path: path.to_owned(),
                before: before.cloned(),
                after: after.cloned(),
            });
        }
        for key in keys {
            let (b, a) = (b.and_then(|m| m.get(key)), a.and_then(|m| m.get(key)));
            diff(&child(path, key), b, a, fields);
        }
        return;
    }
    if let (Some(Value::Array(b)), Some(Value::Array(a))) = (before, after)
        && b.len() == a.len()
    {
        for (index, (b, a)) in b.iter().zip(a).enumerate() {
            diff(&format!("{path}[{index}]"), Some(b), Some(a), fields);
        }
        return;
    }
    if before != after {
        fields.push(Field {
            path: path.to_owned(),
            before: before.cloned(),
            after: after.cloned(),
        });
    }
}

/// The path of `key` under `path`: dotted when the key is a plain word, else quoted.
fn child(path: &str, key: &str) -> String {
    let plain =
        !key.is_empty() && (key.chars()).all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (path.is_empty(), plain) {
        (true, true) => key.to_owned(),
        (false, true) => format!("{path}.{key}"),
        (_, false) => format!("{path}[{}]", Value::String(key.to_owned())),
    }
}

/// One block per write: `<write> <apiVersion> <Kind> <namespace>/<name>: <what it did>`, then,
/// for an object it changed, one line per field: `  <path>: <before> -> <after>`, values as
/// JSON and `(none)` for an absent one.
pub fn to_text<'a>(writes: impl IntoIterator<Item = (&'a Write, &'a Effect)>) -> String {
    let mut text = String::new();
    for (write, effect) in writes {
        let what = match effect {
            Effect::Created => "creates".to_owned(),
            Effect::Updated { before, after } => {
                let changed = fields(before, after);
                if changed.is_empty() {
                    "unchanged".to_owned()
                } else {
                    let mut lines = "changes".to_owned();
                    for field in changed {
                        let (b, a) = (shown(field.before.as_ref()), shown(field.after.as_ref()));
                        let _ = write!(lines, "\n  {}: {b} -> {a}", field.path);
                    }
                    lines
                }
            }
            Effect::Deleted => "deletes".to_owned(),
            Effect::Refused(error) => format!("refused: {error}"),
            Effect::Recorded => "records".to_owned(),
        };
        let _ = writeln!(text, "{}: {what}", described(write));
    }
    text
}

fn shown(value: Option<&Value>) -> String {
    value.map_or_else(|| "(none)".to_owned(), Value::to_string)
}

/// The write and the object it names.
fn described(write: &Write) -> String {
    let (verb, kind, namespace, name) = match write {
        Write::Apply(a) => {
            let verb = if a.status { "applyStatus" } else { "apply" };
            (verb.to_owned(), &a.kind, &a.namespace, &a.name)
        }
        Write::Patch(p) => {
            let verb = if p.json_patch {
                "patch (json)"
            } else {
                "patch (merge)"
            };
            (verb.to_owned(), &p.kind, &p.namespace, &p.name)
        }
        Write::Delete(d) => ("delete".to_owned(), &d.kind, &d.namespace, &d.name),
        Write::Event(e) => {
            let severity = if e.warning { "Warning" } else { "Normal" };
            let verb = format!("event {severity} {} on", e.reason);
            (verb, &e.kind, &e.namespace, &e.name)
        }
    };
    let object = match namespace {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.clone(),
    };
    format!("{verb} {} {} {object}", api_version(kind), kind.kind)
}

fn api_version(kind: &GroupVersionKind) -> String {
    if kind.group.is_empty() {
        kind.version.clone()
    } else {
        format!("{}/{}", kind.group, kind.version)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::wasm::backend::{ApplyRequest, DeleteRequest};

    #[test]
    fn fields_name_each_changed_leaf_with_its_values() {
        let before = json!({
            "metadata": { "name": "a", "resourceVersion": "1",
                          "labels": { "app.kubernetes.io/name": "x", "keep": "y" } },
            "spec": { "replicas": 2, "containers": [{ "image": "old" }], "ports": [1] },
        });
        let after = json!({
            "metadata": { "name": "a", "resourceVersion": "2",
                          "labels": { "app.kubernetes.io/name": "z", "keep": "y" } },
            "spec": { "replicas": 3, "containers": [{ "image": "new" }], "ports": [1, 2] },
            "status": { "ready": true },
        });
        let field = |path: &str, before: Option<Value>, after: Option<Value>| Field {
            path: path.into(),
            before,
            after,
        };
        assert_eq!(
            fields(&before, &after),
            [
                field(
                    r#"metadata.labels["app.kubernetes.io/name"]"#,
                    Some(json!("x")),
                    Some(json!("z"))
                ),
                field(
                    "spec.containers[0].image",
                    Some(json!("old")),
                    Some(json!("new"))
                ),
                field("spec.ports", Some(json!([1])), Some(json!([1, 2]))),
                field("spec.replicas", Some(json!(2)), Some(json!(3))),
                field("status.ready", None, Some(json!(true))),
            ]
        );
        assert!(fields(&before, &before).is_empty());
        let empty = fields(&json!({}), &json!({ "spec": {} }));
        assert_eq!(empty, [field("spec", None, Some(json!({})))]);
    }

    #[test]
    fn each_write_says_what_it_did_to_its_object() {
        let pod = GroupVersionKind::gvk("", "v1", "Pod");
        let apply = |status| {
            Write::Apply(ApplyRequest {
                kind: pod.clone(),
                namespace: Some("team-a".into()),
                name: "p".into(),
                object: json!({}),
                status,
                force: true,
            })
        };
        let delete = Write::Delete(DeleteRequest {
            kind: GroupVersionKind::gvk("apps", "v1", "Deployment"),
            namespace: None,
            name: "d".into(),
            uid: None,
            resource_version: None,
        });
        let object = json!({ "metadata": { "resourceVersion": "1" }, "spec": { "n": 1 } });
        let mut changed = object.clone();
        changed["spec"]["n"] = json!(2);
        changed["metadata"]["resourceVersion"] = json!("2");
        let writes = [
            (apply(false), Effect::Created),
            (
                apply(false),
                Effect::Updated {
                    before: object.clone(),
                    after: object.clone(),
                },
            ),
            (
                apply(true),
                Effect::Updated {
                    before: object,
                    after: changed,
                },
            ),
            (delete.clone(), Effect::Deleted),
            (delete, Effect::Refused("API server answered 404".into())),
        ];
        let text = to_text(writes.iter().map(|(w, e)| (w, e)));
        assert_eq!(
            text,
            "apply v1 Pod team-a/p: creates\n\
             apply v1 Pod team-a/p: unchanged\n\
             applyStatus v1 Pod team-a/p: changes\n  spec.n: 1 -> 2\n\
             delete apps/v1 Deployment d: deletes\n\
             delete apps/v1 Deployment d: refused: API server answered 404\n"
        );
    }
}
