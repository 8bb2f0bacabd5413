//! The informer cache: the objects of one watch, kept as the JSON text guests read, with the
//! metadata the host needs parsed once per change.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::{Arc, LazyLock, RwLock};

use kube::api::{DynamicObject, GroupVersionKind};
use kube::core::GroupVersion;

use crate::cluster::selector::LabelSelector;

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

/// The prefix of the field managers of the host's guests: their `managedFields` entries are
/// kept, every other entry is dropped.
pub const FIELD_MANAGER_PREFIX: &str = "kubewasm-";

/// The fields one of the host's field managers set with its last server-side apply of an
/// object or of one of its subresources, from the object's `managedFields`.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The field manager.
    pub manager: String,
    /// The subresource applied to, such as `status`; `None` for the object itself.
    pub subresource: Option<String>,
    /// The fields, as the JSON text of `fieldsV1` (see [`crate::cluster::managed`]).
    pub fields: Box<str>,
}

impl Applied {
    /// The fields as a JSON tree.
    pub fn fields(&self) -> serde_json::Value {
        serde_json::from_str(&self.fields).expect("the cache holds valid JSON")
    }
}

/// One cached object: its serialized form and the metadata the host indexes and compares, and
/// no other copy of it.
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
    /// `deletionTimestamp`, in Unix seconds.
    pub deleted_at: Option<i64>,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// A digest of the annotations, to tell a change of them; absent and empty are alike.
    pub annotations: u64,
    /// What the host's field managers last applied to it.
    pub applied: Vec<Applied>,
}

impl CachedObject {
    /// Builds the cached form of an object, dropping its managed fields but for what the
    /// host's field managers applied.
    pub fn new(mut object: DynamicObject) -> Self {
        let applied = object
            .metadata
            .managed_fields
            .take()
            .into_iter()
            .flatten()
            .filter(|entry| entry.operation.as_deref() == Some("Apply"))
            .filter_map(|entry| {
                let manager = entry
                    .manager
                    .filter(|m| m.starts_with(FIELD_MANAGER_PREFIX))?;
                Some(Applied {
                    manager,
                    subresource: entry.subresource.filter(|s| !s.is_empty()),
                    fields: entry.fields_v1?.0.to_string().into(),
                })
            })
            .collect();
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
        let json = serde_json::to_string(&object).expect("an object from the API serializes");
        Self {
            json: json.into(),
            namespace: meta.namespace.clone(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            labels: meta.labels.clone().unwrap_or_default(),
            owners,
            finalizers: meta.finalizers.clone().unwrap_or_default(),
            deleting: meta.deletion_timestamp.is_some(),
            deleted_at: meta.deletion_timestamp.as_ref().map(|t| t.0.as_second()),
            generation: meta.generation,
            annotations: digest(meta.annotations.iter().flatten()),
            applied,
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

    /// The object as a JSON tree, parsed from its text.
    pub fn parse(&self) -> serde_json::Value {
        serde_json::from_str(&self.json).expect("the cache holds valid JSON")
    }

    /// The resourceVersion as an integer, when it is one.
    pub fn version(&self) -> Option<u64> {
        self.resource_version.as_deref()?.parse().ok()
    }
}

/// A digest of key-value pairs in order: equal for equal maps within one process, keyed with
/// one random key per process so that nobody who writes annotations can make two collide.
fn digest<'a>(entries: impl Iterator<Item = (&'a String, &'a String)>) -> u64 {
    static KEY: LazyLock<RandomState> = LazyLock::new(RandomState::new);
    let mut hasher = KEY.build_hasher();
    for (key, value) in entries {
        (key, value).hash(&mut hasher);
    }
    hasher.finish()
}

/// The kind of a Kubernetes object from its `apiVersion` and `kind`, if it has both.
pub fn kind_of(object: &serde_json::Value) -> Option<GroupVersionKind> {
    let version: GroupVersion = object["apiVersion"].as_str()?.parse().ok()?;
    Some(version.with_kind(object["kind"].as_str()?))
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
    /// Part of an informer's first list, or of the cache replayed to a new subscriber: a key
    /// the subscriber has not seen yet rather than a change of the cluster.
    pub initial: bool,
}

/// The objects of one watch, ordered by namespace then name.
///
/// Besides the watch's own events, the store takes the results of the host's writes
/// ([`Store::record_write`], [`Store::record_delete`]) so that a guest reads its own writes at
/// once instead of after the watch catches up. A recorded write never hides a newer state, and
/// no older state hides it:
/// - a write is recorded only if its resourceVersion is above every one the watch and the last
///   list have shown, so every later change of the object, its deletion included, is still to
///   come;
/// - a watch event older than the cached version of the same object is ignored;
/// - a list whose snapshot is older than a recorded write or delete (a relist in flight while
///   the host wrote) keeps the write and the delete.
///
/// resourceVersions are compared as integers, which is what etcd-backed API servers hand out; a
/// non-numeric one is never recorded.
#[derive(Debug, Default)]
pub struct Store {
    inner: RwLock<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    objects: BTreeMap<ObjectKey, Arc<CachedObject>>,
    /// Highest resourceVersion the watch or a list has shown.
    watermark: u64,
    /// Lists completed: the first and every relist.
    lists: u64,
    /// Objects the host deleted whose watch event has not arrived yet, by key.
    tombstones: BTreeMap<ObjectKey, Tombstone>,
}

/// An object the host deleted: its uid and the last version the store held of it.
#[derive(Debug, Clone)]
struct Tombstone {
    uid: String,
    version: Option<u64>,
}

impl Inner {
    fn advance(&mut self, version: Option<u64>) {
        if let Some(version) = version {
            self.watermark = self.watermark.max(version);
        }
    }

    fn is_tombstoned(&self, object: &CachedObject) -> bool {
        self.tombstones
            .get(&object.key())
            .is_some_and(|t| object.uid.as_ref() == Some(&t.uid))
    }
}

impl Store {
    /// The object with this key.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        self.read().objects.get(key).cloned()
    }

    /// Objects in `namespace` (or all) matching `selector` (or all).
    pub fn list(
        &self,
        namespace: Option<&str>,
        selector: Option<&LabelSelector>,
    ) -> Vec<Arc<CachedObject>> {
        let inner = self.read();
        let matches = |o: &&Arc<CachedObject>| selector.is_none_or(|s| s.matches(&o.labels));
        match namespace {
            Some(namespace) => {
                let start = ObjectKey {
                    namespace: Some(namespace.to_owned()),
                    name: String::new(),
                };
                inner
                    .objects
                    .range(start..)
                    .take_while(|(k, _)| k.namespace.as_deref() == Some(namespace))
                    .map(|(_, o)| o)
                    .filter(matches)
                    .cloned()
                    .collect()
            }
            None => inner.objects.values().filter(matches).cloned().collect(),
        }
    }

    /// Every key.
    pub fn keys(&self) -> Vec<ObjectKey> {
        self.read().objects.keys().cloned().collect()
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.read().objects.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.read().objects.is_empty()
    }

    /// Lists completed: the first and every relist.
    pub fn lists(&self) -> u64 {
        self.read().lists
    }

    /// Notes a bookmark: the watch has shown every change up to `version`.
    pub fn bookmark(&self, version: &str) {
        self.write().advance(version.parse().ok());
    }

    /// Inserts or replaces an object delivered by the watch; returns the change, or `None` when
    /// the cache already holds this version or a newer one, or the host already deleted the
    /// object.
    pub fn upsert(&self, object: CachedObject) -> Option<Change> {
        let mut inner = self.write();
        inner.advance(object.version());
        if inner.is_tombstoned(&object) {
            return None;
        }
        let key = object.key();
        // resourceVersions order every change of a key, whatever the incarnation: an event
        // older than what the store holds is stale.
        if let Some(cached) = inner.objects.get(&key)
            && ((cached.uid == object.uid && cached.resource_version == object.resource_version)
                || cached
                    .version()
                    .zip(object.version())
                    .is_some_and(|(c, o)| c > o))
        {
            return None;
        }
        let object = Arc::new(object);
        let old = inner.objects.insert(key, object.clone());
        Some(Change {
            old,
            new: Some(object),
            initial: false,
        })
    }

    /// Removes an object whose deletion the watch delivered; returns the change if it was
    /// cached. A cached object with the same name but another uid is a newer incarnation and
    /// stays.
    pub fn remove(&self, deleted: &CachedObject) -> Option<Change> {
        let mut inner = self.write();
        inner.advance(deleted.version());
        let key = deleted.key();
        if inner.is_tombstoned(deleted) || deleted.uid.is_none() {
            inner.tombstones.remove(&key);
        }
        let cached = inner.objects.get(&key)?;
        if cached.uid.is_some() && deleted.uid.is_some() && cached.uid != deleted.uid {
            return None;
        }
        let old = inner.objects.remove(&key)?;
        Some(Change {
            old: Some(old),
            new: None,
            initial: false,
        })
    }

    /// Replaces the whole content with a list's snapshot taken at `version`; returns every
    /// change it implies. Writes and deletes the host recorded after the snapshot are kept: the
    /// watch that follows the list delivers them.
    pub fn replace(&self, objects: Vec<CachedObject>, version: &str) -> Vec<Change> {
        let version = version.parse::<u64>().ok();
        let mut inner = self.write();
        let mut tombstones = BTreeMap::new();
        let mut fresh = BTreeMap::new();
        for object in objects {
            let key = object.key();
            if let Some(tombstone) = inner.tombstones.get(&key)
                && object.uid.as_ref() == Some(&tombstone.uid)
            {
                // A uid never comes back: the snapshot predates the host's delete.
                tombstones.insert(key, tombstone.clone());
                continue;
            }
            fresh.insert(key, Arc::new(object));
        }
        let newer = |cached: &CachedObject| {
            cached
                .version()
                .zip(version)
                .is_some_and(|(cached, listed)| cached > listed)
        };
        let initial = inner.lists == 0;
        // Only a recorded write is newer than a list that followed the watch it replaces.
        for (key, cached) in &inner.objects {
            if newer(cached) {
                fresh.insert(key.clone(), cached.clone());
            }
        }
        let mut changes = Vec::new();
        for (key, old) in &inner.objects {
            match fresh.get(key) {
                None => changes.push(Change {
                    old: Some(old.clone()),
                    new: None,
                    initial,
                }),
                Some(new)
                    if !Arc::ptr_eq(new, old) && new.resource_version != old.resource_version =>
                {
                    changes.push(Change {
                        old: Some(old.clone()),
                        new: Some(new.clone()),
                        initial,
                    })
                }
                Some(_) => {}
            }
        }
        for (key, new) in &fresh {
            if !inner.objects.contains_key(key) {
                changes.push(Change {
                    old: None,
                    new: Some(new.clone()),
                    initial,
                });
            }
        }
        inner.advance(version);
        for object in fresh.values() {
            inner.advance(object.version());
        }
        // A deleted object the snapshot never saw was written after it: its deletion is still
        // to come on the watch.
        for (key, tombstone) in &inner.tombstones {
            if tombstone
                .version
                .zip(version)
                .is_some_and(|(t, listed)| t > listed)
            {
                tombstones
                    .entry(key.clone())
                    .or_insert_with(|| tombstone.clone());
            }
        }
        inner.objects = fresh;
        inner.tombstones = tombstones;
        inner.lists += 1;
        changes
    }

    /// Records the object a write of the host returned, if it is newer than anything the watch
    /// and the last list have shown; returns the change.
    pub fn record_write(&self, object: CachedObject) -> Option<Change> {
        let version = object.version()?;
        let mut inner = self.write();
        if version <= inner.watermark || inner.is_tombstoned(&object) {
            return None;
        }
        let key = object.key();
        let old = inner.objects.get(&key).cloned();
        if old
            .as_ref()
            .and_then(|o| o.version())
            .is_some_and(|cached| cached >= version)
        {
            return None;
        }
        let object = Arc::new(object);
        inner.objects.insert(key, object.clone());
        Some(Change {
            old,
            new: Some(object),
            initial: false,
        })
    }

    /// Records that the host deleted the object with `key` and `uid` (it is gone, not merely
    /// terminating), unless the store does not hold it; returns the change. Watch events and
    /// list items of that object are ignored until its deletion arrives.
    pub fn record_delete(&self, key: &ObjectKey, uid: &str) -> Option<Change> {
        let mut inner = self.write();
        let cached = inner.objects.get(key)?;
        if cached.uid.as_deref() != Some(uid) {
            return None;
        }
        // Only a store that held the object keeps a tombstone: its watch delivers the deletion,
        // which removes the tombstone again.
        let tombstone = Tombstone {
            uid: uid.to_owned(),
            version: cached.version(),
        };
        inner.tombstones.insert(key.clone(), tombstone);
        let old = inner.objects.remove(key)?;
        Some(Change {
            old: Some(old),
            new: None,
            initial: false,
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().expect("cache lock")
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().expect("cache lock")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_kind_of_an_object_is_read_from_its_api_version_and_kind() {
        let kind = kind_of(&json!({"apiVersion": "apps/v1", "kind": "Deployment"})).unwrap();
        assert_eq!(kind, GroupVersionKind::gvk("apps", "v1", "Deployment"));
        let core = kind_of(&json!({"apiVersion": "v1", "kind": "Pod"})).unwrap();
        assert_eq!(core, GroupVersionKind::gvk("", "v1", "Pod"));
        assert!(kind_of(&json!({"kind": "Pod"})).is_none());
        assert!(kind_of(&json!({"apiVersion": "v1"})).is_none());
    }

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

    fn with_uid(namespace: &str, name: &str, version: &str, uid: &str) -> CachedObject {
        CachedObject::new(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": { "namespace": namespace, "name": name, "resourceVersion": version, "uid": uid }
            }))
            .unwrap(),
        )
    }

    fn key(namespace: &str, name: &str) -> ObjectKey {
        ObjectKey {
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    #[test]
    fn a_recorded_write_is_read_at_once_and_its_watch_event_is_no_change() {
        let store = Store::default();
        store.replace(vec![with_uid("a", "x", "10", "u1")], "10");
        let change = store.record_write(with_uid("a", "y", "12", "u2"));
        assert!(change.is_some_and(|c| c.old.is_none()));
        assert_eq!(store.get(&key("a", "y")).unwrap().version(), Some(12));
        assert!(store.upsert(with_uid("a", "y", "12", "u2")).is_none());
        assert!(store.upsert(with_uid("a", "y", "13", "u2")).is_some());
    }

    #[test]
    fn a_write_the_watch_or_a_list_has_passed_is_not_recorded() {
        let store = Store::default();
        store.replace(Vec::new(), "3");
        store.upsert(with_uid("a", "x", "20", "u1"));
        // The watch delivered version 20 of x; a write returning version 15 of y is older than
        // what the watch has shown, so y may already be deleted again.
        assert!(store.record_write(with_uid("a", "y", "15", "u2")).is_none());
        assert!(store.get(&key("a", "y")).is_none());
        // Nor does a recorded write replace a newer cached version.
        store.upsert(with_uid("a", "z", "30", "u3"));
        assert!(store.record_write(with_uid("a", "z", "25", "u3")).is_none());
        assert_eq!(store.get(&key("a", "z")).unwrap().version(), Some(30));
        // A list at 40 without y has seen y's deletion, whose event will never come.
        store.replace(Vec::new(), "40");
        assert!(store.record_write(with_uid("a", "y", "35", "u2")).is_none());
        assert!(store.record_write(with_uid("a", "y", "41", "u2")).is_some());
    }

    #[test]
    fn writes_recorded_while_a_list_is_in_flight_outlive_its_older_snapshot() {
        let store = Store::default();
        store.replace(vec![with_uid("a", "x", "5", "u1")], "5");
        // A relist starts and its snapshot is taken at version 6; then the host creates y and
        // updates x, and both writes are recorded before the list's response arrives.
        store.record_write(with_uid("a", "y", "8", "u2"));
        store.record_write(with_uid("a", "x", "9", "u1"));
        let changes = store.replace(vec![with_uid("a", "x", "5", "u1")], "6");
        assert!(changes.is_empty(), "{changes:?}");
        assert_eq!(store.get(&key("a", "y")).unwrap().version(), Some(8));
        assert_eq!(store.get(&key("a", "x")).unwrap().version(), Some(9));
        // The watch that follows the list delivers both writes: no change.
        assert!(store.upsert(with_uid("a", "y", "8", "u2")).is_none());
        assert!(store.upsert(with_uid("a", "x", "9", "u1")).is_none());
    }

    #[test]
    fn a_snapshot_newer_than_a_recorded_write_wins() {
        let store = Store::default();
        store.replace(vec![with_uid("a", "x", "5", "u1")], "5");
        store.record_write(with_uid("a", "y", "8", "u2"));
        store.record_write(with_uid("a", "x", "9", "u1"));
        // Someone deleted y and recreated x after the host's writes; the list saw it all.
        let changes = store.replace(vec![with_uid("a", "x", "11", "u3")], "12");
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert!(store.get(&key("a", "y")).is_none());
        assert_eq!(
            store.get(&key("a", "x")).unwrap().uid.as_deref(),
            Some("u3")
        );
    }

    #[test]
    fn a_delete_recorded_while_a_list_is_in_flight_outlives_its_older_snapshot() {
        let store = Store::default();
        store.replace(vec![with_uid("a", "x", "5", "u1")], "5");
        store.record_delete(&key("a", "x"), "u1").unwrap();
        // The snapshot was taken before the delete: x is in it.
        let changes = store.replace(vec![with_uid("a", "x", "5", "u1")], "6");
        assert!(changes.is_empty(), "{changes:?}");
        assert!(store.get(&key("a", "x")).is_none());
        // Its watch delivers the deletion, which ends the tombstone.
        assert!(store.remove(&with_uid("a", "x", "7", "u1")).is_none());
        assert!(store.upsert(with_uid("a", "x", "8", "u2")).is_some());
    }

    #[test]
    fn an_older_watch_event_does_not_hide_a_recorded_write() {
        let store = Store::default();
        store.replace(vec![with_uid("a", "x", "5", "u1")], "5");
        store.record_write(with_uid("a", "x", "9", "u1"));
        // Someone else's change at 7 was still on its way in the watch.
        assert!(store.upsert(with_uid("a", "x", "7", "u1")).is_none());
        assert_eq!(store.get(&key("a", "x")).unwrap().version(), Some(9));
        // So is a late event of an older incarnation; a newer incarnation is cached.
        assert!(store.upsert(with_uid("a", "x", "8", "u0")).is_none());
        assert!(store.upsert(with_uid("a", "x", "10", "u2")).is_some());
    }

    #[test]
    fn the_late_deletion_of_an_older_incarnation_keeps_the_tombstone_of_the_newer() {
        let store = Store::default();
        store.replace(vec![with_uid("a", "x", "5", "u0")], "5");
        // The host deletes x, creates it again and deletes it again, ahead of the watch.
        store.record_delete(&key("a", "x"), "u0");
        store.record_write(with_uid("a", "x", "9", "u1"));
        store.record_delete(&key("a", "x"), "u1");
        assert!(store.remove(&with_uid("a", "x", "8", "u0")).is_none());
        assert!(store.upsert(with_uid("a", "x", "9", "u1")).is_none());
        assert!(store.get(&key("a", "x")).is_none());
    }

    #[test]
    fn a_relist_older_than_a_recorded_create_and_delete_keeps_the_delete() {
        let store = Store::default();
        store.replace(Vec::new(), "5");
        store.record_write(with_uid("a", "x", "9", "u1"));
        store.record_delete(&key("a", "x"), "u1");
        // The snapshot, taken at 8, never saw x; the watch from 8 delivers its creation.
        assert!(store.replace(Vec::new(), "8").is_empty());
        assert!(store.upsert(with_uid("a", "x", "9", "u1")).is_none());
        assert!(store.get(&key("a", "x")).is_none());
        assert!(store.remove(&with_uid("a", "x", "10", "u1")).is_none());
        assert!(store.upsert(with_uid("a", "x", "11", "u2")).is_some());
    }

    #[test]
    fn non_numeric_versions_are_never_recorded() {
        let store = Store::default();
        assert!(
            store
                .record_write(with_uid("a", "y", "abc", "u2"))
                .is_none()
        );
    }

    #[test]
    fn a_recorded_delete_hides_late_updates_until_the_deletion_arrives() {
        let store = Store::default();
        store.replace(vec![with_uid("a", "x", "5", "u1")], "5");
        assert!(store.record_delete(&key("a", "x"), "u1").is_some());
        assert!(store.get(&key("a", "x")).is_none());
        // A modification queued in the watch before the deletion does not bring it back.
        assert!(store.upsert(with_uid("a", "x", "6", "u1")).is_none());
        assert!(store.get(&key("a", "x")).is_none());
        assert!(store.remove(&with_uid("a", "x", "7", "u1")).is_none());
        // A new object with the same name is cached as usual.
        assert!(store.upsert(with_uid("a", "x", "8", "u2")).is_some());
    }

    #[test]
    fn a_deletion_of_an_old_incarnation_keeps_the_new_one() {
        let store = Store::default();
        store.replace(vec![with_uid("a", "x", "5", "u1")], "5");
        store.record_delete(&key("a", "x"), "u1");
        store.record_write(with_uid("a", "x", "9", "u2"));
        assert!(store.remove(&with_uid("a", "x", "7", "u1")).is_none());
        assert_eq!(
            store.get(&key("a", "x")).unwrap().uid.as_deref(),
            Some("u2")
        );
    }

    #[test]
    fn the_compared_metadata_is_read_once_from_the_object() {
        let parsed = |metadata: serde_json::Value| {
            CachedObject::new(
                serde_json::from_value(serde_json::json!({
                    "apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
                }))
                .unwrap(),
            )
        };
        let deleted = parsed(serde_json::json!({
            "name": "x", "generation": 3, "deletionTimestamp": "2026-01-02T03:04:05Z",
        }));
        assert!(deleted.deleting);
        assert_eq!(deleted.deleted_at, Some(1_767_323_045));
        assert_eq!(deleted.generation, Some(3));
        let bare = parsed(serde_json::json!({ "name": "x" }));
        let empty = parsed(serde_json::json!({ "name": "x", "annotations": {} }));
        let one = parsed(serde_json::json!({ "name": "x", "annotations": { "a": "1" } }));
        let other = parsed(serde_json::json!({ "name": "x", "annotations": { "a": "2" } }));
        assert_eq!(bare.annotations, empty.annotations);
        assert_ne!(bare.annotations, one.annotations);
        assert_ne!(one.annotations, other.annotations);
        assert_eq!(
            (bare.deleting, bare.deleted_at, bare.generation),
            (false, None, None)
        );
    }

    #[test]
    fn managed_fields_are_dropped() {
        let cached = object("a", "x", "1", &[]);
        assert!(!cached.json.contains("managedFields"));
        assert_eq!(cached.parse()["metadata"]["name"], "x");
    }

    #[test]
    fn upsert_reports_changes_but_not_repeats() {
        let store = Store::default();
        let first = store.upsert(object("a", "x", "1", &[])).unwrap();
        assert!(first.old.is_none());
        assert!(store.upsert(object("a", "x", "1", &[])).is_none());
        let second = store.upsert(object("a", "x", "2", &[])).unwrap();
        assert_eq!(second.old.unwrap().resource_version.as_deref(), Some("1"));
        let gone = store.remove(&object("a", "x", "3", &[])).unwrap();
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
        let changes = store.replace(
            vec![
                object("a", "kept", "1", &[]),
                object("a", "changed", "2", &[]),
                object("a", "new", "1", &[]),
            ],
            "2",
        );
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
