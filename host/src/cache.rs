//! The informer cache: the objects of one watch, kept as the JSON text guests read, with the
//! metadata the host needs parsed once per change.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use kube::api::DynamicObject;

use crate::selector::LabelSelector;

/// An owner reference, as far as the host needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// `apiVersion` of the owner.
    pub api_version: String,
    /// Kind of the owner.
    pub kind: String,
    /// Name of the owner.
    pub name: String,
    /// Uid of the owner.
    pub uid: String,
    /// Whether this owner is the controller.
    pub controller: bool,
}

/// One cached object: its serialized form and its parsed metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedObject {
    /// The object as JSON, without `metadata.managedFields`.
    pub json: Arc<str>,
    /// Namespace; `None` when cluster-scoped.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// Uid.
    pub uid: Option<String>,
    /// resourceVersion.
    pub resource_version: Option<String>,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Owner references.
    pub owners: Vec<Owner>,
    /// Finalizers.
    pub finalizers: Vec<String>,
    /// Whether deletion has started.
    pub deleting: bool,
    /// The parsed object; the host compares intents against it.
    pub value: Arc<serde_json::Value>,
}

impl CachedObject {
    /// Builds the cached form of an object, dropping its managed fields.
    pub fn new(mut object: DynamicObject) -> Self {
        object.metadata.managed_fields = None;
        let meta = &object.metadata;
        let owners = meta
            .owner_references
            .iter()
            .flatten()
            .map(|o| Owner {
                api_version: o.api_version.clone(),
                kind: o.kind.clone(),
                name: o.name.clone(),
                uid: o.uid.clone(),
                controller: o.controller == Some(true),
            })
            .collect();
        let value = serde_json::to_value(&object).expect("an object from the API serializes");
        Self {
            json: value.to_string().into(),
            namespace: meta.namespace.clone(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            labels: meta.labels.clone().unwrap_or_default(),
            owners,
            finalizers: meta.finalizers.clone().unwrap_or_default(),
            deleting: meta.deletion_timestamp.is_some(),
            value: Arc::new(value),
        }
    }

    /// The object's key.
    pub fn key(&self) -> ObjectKey {
        ObjectKey {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }

    /// The controller owner reference, if any.
    pub fn controller(&self) -> Option<&Owner> {
        self.owners.iter().find(|o| o.controller)
    }
}

/// The name of an object: what a workqueue holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Namespace; `None` when cluster-scoped.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{namespace}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// A change seen by an informer.
#[derive(Debug, Clone)]
pub struct Change {
    /// The object before, if it existed.
    pub old: Option<Arc<CachedObject>>,
    /// The object after, if it still exists.
    pub new: Option<Arc<CachedObject>>,
}

/// The objects of one watch, ordered by namespace then name.
#[derive(Debug, Default)]
pub struct Store {
    objects: RwLock<BTreeMap<ObjectKey, Arc<CachedObject>>>,
}

impl Store {
    /// The object with this key.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        self.read().get(key).cloned()
    }

    /// Objects in `namespace` (or all) matching `selector` (or all).
    pub fn list(
        &self,
        namespace: Option<&str>,
        selector: Option<&LabelSelector>,
    ) -> Vec<Arc<CachedObject>> {
        let objects = self.read();
        let matches = |o: &&Arc<CachedObject>| selector.is_none_or(|s| s.matches(&o.labels));
        match namespace {
            Some(namespace) => {
                let start = ObjectKey {
                    namespace: Some(namespace.to_owned()),
                    name: String::new(),
                };
                objects
                    .range(start..)
                    .take_while(|(k, _)| k.namespace.as_deref() == Some(namespace))
                    .map(|(_, o)| o)
                    .filter(matches)
                    .cloned()
                    .collect()
            }
            None => objects.values().filter(matches).cloned().collect(),
        }
    }

    /// Every key.
    pub fn keys(&self) -> Vec<ObjectKey> {
        self.read().keys().cloned().collect()
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Inserts or replaces an object; returns the change, or `None` when the resourceVersion
    /// is the one already cached.
    pub fn upsert(&self, object: CachedObject) -> Option<Change> {
        let object = Arc::new(object);
        let mut objects = self.objects.write().expect("cache lock");
        let old = objects.insert(object.key(), object.clone());
        if old
            .as_ref()
            .is_some_and(|o| o.resource_version == object.resource_version)
        {
            return None;
        }
        Some(Change {
            old,
            new: Some(object),
        })
    }

    /// Removes an object; returns the change if it was cached.
    pub fn remove(&self, key: &ObjectKey) -> Option<Change> {
        let old = self.objects.write().expect("cache lock").remove(key)?;
        Some(Change {
            old: Some(old),
            new: None,
        })
    }

    /// Replaces the whole content after a (re)list; returns every change it implies.
    pub fn replace(&self, objects: Vec<CachedObject>) -> Vec<Change> {
        let mut fresh: BTreeMap<ObjectKey, Arc<CachedObject>> = objects
            .into_iter()
            .map(|o| (o.key(), Arc::new(o)))
            .collect();
        let mut current = self.objects.write().expect("cache lock");
        let mut changes = Vec::new();
        for (key, old) in current.iter() {
            match fresh.get(key) {
                None => changes.push(Change {
                    old: Some(old.clone()),
                    new: None,
                }),
                Some(new) if new.resource_version != old.resource_version => changes.push(Change {
                    old: Some(old.clone()),
                    new: Some(new.clone()),
                }),
                Some(_) => {}
            }
        }
        for (key, new) in &fresh {
            if !current.contains_key(key) {
                changes.push(Change {
                    old: None,
                    new: Some(new.clone()),
                });
            }
        }
        std::mem::swap(&mut *current, &mut fresh);
        changes
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<ObjectKey, Arc<CachedObject>>> {
        self.objects.read().expect("cache lock")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(namespace: &str, name: &str, version: &str, labels: &[(&str, &str)]) -> CachedObject {
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        CachedObject::new(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {
                    "namespace": namespace, "name": name, "resourceVersion": version,
                    "labels": labels,
                    "managedFields": [{ "manager": "someone", "operation": "Apply" }]
                }
            }))
            .unwrap(),
        )
    }

    #[test]
    fn managed_fields_are_dropped() {
        let cached = object("a", "x", "1", &[]);
        assert!(!cached.json.contains("managedFields"));
        assert_eq!(cached.value["metadata"]["name"], "x");
    }

    #[test]
    fn upsert_reports_changes_but_not_repeats() {
        let store = Store::default();
        let first = store.upsert(object("a", "x", "1", &[])).unwrap();
        assert!(first.old.is_none());
        assert!(store.upsert(object("a", "x", "1", &[])).is_none());
        let second = store.upsert(object("a", "x", "2", &[])).unwrap();
        assert_eq!(second.old.unwrap().resource_version.as_deref(), Some("1"));
        let gone = store
            .remove(&ObjectKey {
                namespace: Some("a".into()),
                name: "x".into(),
            })
            .unwrap();
        assert!(gone.new.is_none());
        assert!(store.is_empty());
    }

    #[test]
    fn list_filters_by_namespace_and_labels() {
        let store = Store::default();
        store.upsert(object("a", "x", "1", &[("app", "web")]));
        store.upsert(object("a", "y", "1", &[("app", "db")]));
        store.upsert(object("b", "z", "1", &[("app", "web")]));
        let web: LabelSelector = "app=web".parse().unwrap();
        let names = |objects: Vec<Arc<CachedObject>>| {
            objects.iter().map(|o| o.name.clone()).collect::<Vec<_>>()
        };
        assert_eq!(names(store.list(Some("a"), None)), ["x", "y"]);
        assert_eq!(names(store.list(None, Some(&web))), ["x", "z"]);
        assert_eq!(names(store.list(Some("b"), Some(&web))), ["z"]);
        assert!(store.list(Some("c"), None).is_empty());
    }

    #[test]
    fn replace_emits_adds_updates_and_deletes() {
        let store = Store::default();
        store.upsert(object("a", "kept", "1", &[]));
        store.upsert(object("a", "changed", "1", &[]));
        store.upsert(object("a", "gone", "1", &[]));
        let changes = store.replace(vec![
            object("a", "kept", "1", &[]),
            object("a", "changed", "2", &[]),
            object("a", "new", "1", &[]),
        ]);
        let mut summary: Vec<_> = changes
            .iter()
            .map(|c| match (&c.old, &c.new) {
                (None, Some(n)) => format!("add {}", n.name),
                (Some(o), None) => format!("delete {}", o.name),
                (Some(o), Some(_)) => format!("update {}", o.name),
                (None, None) => unreachable!(),
            })
            .collect();
        summary.sort();
        assert_eq!(summary, ["add new", "delete gone", "update changed"]);
        assert_eq!(store.len(), 3);
    }
}
