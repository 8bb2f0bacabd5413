//! The informer cache: the objects of one watch, each kept once as the JSON text guests read,
//! with where in that text the metadata the host indexes is, and the few values it compares.

use std::borrow::{Borrow, Cow};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::ops::Bound;
use std::sync::{Arc, LazyLock, RwLock};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::api::DynamicObject;
use serde::Deserialize;

use crate::cluster::managed::IntentDigest;
use crate::cluster::selector::{LabelSelector, Labels};
use crate::cluster::transform::Transform;

use self::index::Indexes;
pub use self::index::MAX_LABEL_INDEXES;

/// An owner reference, as far as the host needs it: a view into the cached object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner<'a> {
    /// `apiVersion` of the owner.
    pub api_version: &'a str,
    /// Kind of the owner.
    pub kind: &'a str,
    /// Name of the owner.
    pub name: &'a str,
    /// Uid of the owner.
    pub uid: &'a str,
    /// Whether this owner is the controller.
    pub controller: bool,
}

/// The prefix of the field managers of the host's guests: their `managedFields` entries are
/// kept, every other entry is dropped.
pub const FIELD_MANAGER_PREFIX: &str = "kubewasm-";

/// The fields one of the host's field managers set with its last server-side apply of an
/// object or of one of its subresources.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The field manager.
    pub manager: Box<str>,
    /// The subresource applied to, such as `status`; `None` for the object itself.
    pub subresource: Option<Box<str>>,
    /// The fields.
    pub fields: AppliedFields,
}

/// How the host knows the fields of an [`Applied`].
#[derive(Debug, Clone, PartialEq)]
pub enum AppliedFields {
    /// As the API server recorded them in the object's `managedFields`: the JSON text of
    /// `fieldsV1` (see [`crate::cluster::managed`]).
    Recorded(Box<str>),
    /// As the digest ([`crate::cluster::managed::digest`]) of the intent whose apply by this
    /// manager answered with this very version of the object; the host sent it, so applying it
    /// again to this version changes nothing.
    Sent(IntentDigest),
}

/// Where one string of an object's metadata is kept: in its JSON text, or, at and past the
/// text's end, among the strings that text escapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: u32,
    len: u32,
}

/// A string of the cached JSON text, borrowed from it unless the text escapes it.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }
        }
        deserializer.deserialize_str(Visit)
    }
}

/// The metadata strings the host indexes, read from the cached JSON text itself.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Document<'a> {
    #[serde(borrow)]
    metadata: MetadataText<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct MetadataText<'a> {
    #[serde(borrow)]
    namespace: Option<Text<'a>>,
    #[serde(borrow)]
    name: Option<Text<'a>>,
    #[serde(borrow)]
    uid: Option<Text<'a>>,
    #[serde(borrow)]
    resource_version: Option<Text<'a>>,
    #[serde(borrow)]
    labels: BTreeMap<Text<'a>, Text<'a>>,
    #[serde(borrow)]
    finalizers: Vec<Text<'a>>,
    #[serde(borrow)]
    owner_references: Vec<OwnerText<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnerText<'a> {
    #[serde(borrow)]
    api_version: Text<'a>,
    #[serde(borrow)]
    kind: Text<'a>,
    #[serde(borrow)]
    name: Text<'a>,
    #[serde(borrow)]
    uid: Text<'a>,
    #[serde(default)]
    controller: Option<bool>,
}

/// The fixed spans of [`CachedObject::spans`], before the labels.
const NAMESPACE: usize = 0;
const NAME: usize = 1;
const UID: usize = 2;
const VERSION: usize = 3;
const LABELS: usize = 4;

/// One cached object: its JSON text, where in it the metadata the host indexes is, and the
/// few values the host compares; no second copy of it but the rare strings the text escapes.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedObject {
    json: Arc<str>,
    /// Namespace, name, uid and resourceVersion (empty when absent), then each label's key and
    /// value, each finalizer, and each owner's apiVersion, kind, name and uid.
    spans: Box<[Span]>,
    /// The strings of `spans` that the JSON text escapes, one after another: empty, without an
    /// allocation, for nearly every object, since names, labels, finalizers and uids are never
    /// escaped.
    unescaped: Box<str>,
    /// Which of namespace, uid and resourceVersion are present: bits 0, 1 and 2.
    present: u8,
    labels: u32,
    finalizers: u32,
    /// Index of the controller owner among the owners; the API server allows at most one.
    controller: Option<u32>,
    deleted_at: Option<i64>,
    generation: Option<i64>,
    annotations: u64,
    applied: Box<[Applied]>,
}

impl CachedObject {
    /// Builds the cached form of an object, dropping its managed fields but for what the
    /// host's field managers applied.
    pub fn new(mut object: DynamicObject) -> Self {
        let applied = host_applies(object.metadata.managed_fields.take());
        let json = serde_json::to_string(&object).expect("an object from the API serializes");
        let Document { metadata: text } =
            serde_json::from_str(&json).expect("an object's own JSON reads back");
        let (spans, unescaped) = spans(&json, &text);
        let present = u8::from(text.namespace.is_some())
            | u8::from(text.uid.is_some()) << 1
            | u8::from(text.resource_version.is_some()) << 2;
        let count = |n: usize| u32::try_from(n).expect("fewer than 2^32 entries");
        let meta = &object.metadata;
        Self {
            spans,
            unescaped,
            present,
            labels: count(text.labels.len()),
            finalizers: count(text.finalizers.len()),
            controller: text
                .owner_references
                .iter()
                .position(|o| o.controller == Some(true))
                .map(count),
            deleted_at: meta.deletion_timestamp.as_ref().map(|t| t.0.as_second()),
            generation: meta.generation,
            annotations: digest(meta.annotations.iter().flatten()),
            applied,
            json: json.into(),
        }
    }

    /// This object as the host's apply of `intent`, by `manager` to `subresource`, answered
    /// it: the manager's recorded fields there give way to the intent's digest, which tells
    /// the same apply sent again from any other at once and costs 16 bytes.
    pub fn sent(mut self, manager: &str, subresource: Option<&str>, intent: IntentDigest) -> Self {
        let mut applied = Vec::from(self.applied);
        applied.retain(|a| !(*a.manager == *manager && a.subresource.as_deref() == subresource));
        applied.push(Applied {
            manager: manager.into(),
            subresource: subresource.map(Into::into),
            fields: AppliedFields::Sent(intent),
        });
        self.applied = applied.into();
        self
    }

    /// This object with the fields `transform` drops removed; what the host applied stays
    /// recorded. A copy sharing the JSON when `transform` drops nothing.
    pub fn transformed(&self, transform: &Transform) -> Self {
        if transform.is_empty() {
            return self.clone();
        }
        let mut object: DynamicObject =
            serde_json::from_str(&self.json).expect("the cached JSON is an object");
        transform.apply(&mut object);
        Self {
            applied: self.applied.clone(),
            ..Self::new(object)
        }
    }

    /// The object as JSON, without `metadata.managedFields`: what guests read.
    pub fn json(&self) -> &Arc<str> {
        &self.json
    }

    /// The string at `index` of [`Self::spans`].
    fn part(&self, index: usize) -> &str {
        let Span { start, len } = self.spans[index];
        let (start, len) = (start as usize, len as usize);
        match start.checked_sub(self.json.len()) {
            None => &self.json[start..start + len],
            Some(start) => &self.unescaped[start..start + len],
        }
    }

    /// Namespace; `None` when cluster-scoped.
    pub fn namespace(&self) -> Option<&str> {
        (self.present & 1 != 0).then(|| self.part(NAMESPACE))
    }

    /// Name.
    pub fn name(&self) -> &str {
        self.part(NAME)
    }

    /// Uid.
    pub fn uid(&self) -> Option<&str> {
        (self.present & 2 != 0).then(|| self.part(UID))
    }

    /// resourceVersion.
    pub fn resource_version(&self) -> Option<&str> {
        (self.present & 4 != 0).then(|| self.part(VERSION))
    }

    /// The labels, in key order.
    pub fn labels(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + Clone {
        (0..self.labels as usize)
            .map(|i| (self.part(LABELS + 2 * i), self.part(LABELS + 2 * i + 1)))
    }

    /// The value of the label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.label_part(key).map(|part| self.part(part))
    }

    /// Where the value of the label `key` is among the spans.
    fn label_part(&self, key: &str) -> Option<usize> {
        // Labels are kept in key order.
        let (mut low, mut high) = (0, self.labels as usize);
        while low < high {
            let middle = low + (high - low) / 2;
            match self.part(LABELS + 2 * middle).cmp(key) {
                Ordering::Less => low = middle + 1,
                Ordering::Greater => high = middle,
                Ordering::Equal => return Some(LABELS + 2 * middle + 1),
            }
        }
        None
    }

    /// Finalizers, in order.
    pub fn finalizers(&self) -> impl ExactSizeIterator<Item = &str> + Clone {
        let first = LABELS + 2 * self.labels as usize;
        (first..first + self.finalizers as usize).map(|i| self.part(i))
    }

    /// Whether the object carries `finalizer`.
    pub fn has_finalizer(&self, finalizer: &str) -> bool {
        self.finalizers().any(|f| f == finalizer)
    }

    /// Where the first owner reference is among the spans.
    fn owners_part(&self) -> usize {
        LABELS + 2 * self.labels as usize + self.finalizers as usize
    }

    /// Where the controller owner's uid is among the spans.
    fn controller_uid_part(&self) -> Option<usize> {
        let controller = self.controller? as usize;
        Some(self.owners_part() + 4 * controller + 3)
    }

    /// Owner references, in order.
    pub fn owners(&self) -> impl ExactSizeIterator<Item = Owner<'_>> + Clone {
        let first = self.owners_part();
        let count = (self.spans.len() - first) / 4;
        (0..count).map(move |i| {
            let part = |field: usize| self.part(first + 4 * i + field);
            Owner {
                api_version: part(0),
                kind: part(1),
                name: part(2),
                uid: part(3),
                controller: self.controller == u32::try_from(i).ok(),
            }
        })
    }

    /// The controller owner reference, if any.
    pub fn controller(&self) -> Option<Owner<'_>> {
        self.owners().find(|o| o.controller)
    }

    /// Whether deletion has started.
    pub fn deleting(&self) -> bool {
        self.deleted_at.is_some()
    }

    /// `deletionTimestamp`, in Unix seconds.
    pub fn deleted_at(&self) -> Option<i64> {
        self.deleted_at
    }

    /// `metadata.generation`.
    pub fn generation(&self) -> Option<i64> {
        self.generation
    }

    /// A digest of the annotations, to tell a change of them; absent and empty are alike.
    pub fn annotations(&self) -> u64 {
        self.annotations
    }

    /// What the host's field managers last applied to the object.
    pub fn applied(&self) -> &[Applied] {
        &self.applied
    }

    /// The object's key.
    pub fn key(&self) -> ObjectKey {
        ObjectKey {
            namespace: self.namespace().map(str::to_owned),
            name: self.name().to_owned(),
        }
    }

    /// The object as a JSON tree, parsed from its text.
    pub fn parse(&self) -> serde_json::Value {
        serde_json::from_str(&self.json).expect("the cache holds valid JSON")
    }

    /// The resourceVersion as an integer, when it is one.
    pub fn version(&self) -> Option<u64> {
        self.resource_version()?.parse().ok()
    }
}

/// The server-side applies of the host's field managers among `managed_fields`: every other
/// entry is dropped.
fn host_applies(managed_fields: Option<Vec<ManagedFieldsEntry>>) -> Box<[Applied]> {
    managed_fields
        .into_iter()
        .flatten()
        .filter(|entry| entry.operation.as_deref() == Some("Apply"))
        .filter_map(|entry| {
            let manager = entry
                .manager
                .filter(|m| m.starts_with(FIELD_MANAGER_PREFIX))?;
            Some(Applied {
                manager: manager.into(),
                subresource: entry.subresource.filter(|s| !s.is_empty()).map(Into::into),
                fields: AppliedFields::Recorded(entry.fields_v1?.0.to_string().into()),
            })
        })
        .collect()
}

/// Where the strings of `text` are in `json`, the object's JSON text it was read from, in the
/// order of [`CachedObject::spans`]; and the strings `json` escapes, which those spans point
/// past its end into.
fn spans(json: &str, text: &MetadataText) -> (Box<[Span]>, Box<str>) {
    let mut unescaped = String::new();
    let mut span = |text: Option<&Text>| {
        let (start, len) = match text.map(|t| &t.0) {
            None => (0, 0),
            Some(Cow::Borrowed(part)) => {
                (part.as_ptr() as usize - json.as_ptr() as usize, part.len())
            }
            Some(Cow::Owned(part)) => {
                unescaped.push_str(part);
                (json.len() + unescaped.len() - part.len(), part.len())
            }
        };
        let offset = |n: usize| u32::try_from(n).expect("an object's JSON is under 4 GiB");
        Span {
            start: offset(start),
            len: offset(len),
        }
    };
    let fixed = [
        &text.namespace,
        &text.name,
        &text.uid,
        &text.resource_version,
    ]
    .map(|part| span(part.as_ref()));
    let labels = text.labels.iter().flat_map(|(k, v)| [k, v]);
    let finalizers = text.finalizers.iter();
    let owners = text
        .owner_references
        .iter()
        .flat_map(|o| [&o.api_version, &o.kind, &o.name, &o.uid]);
    let spans = fixed
        .into_iter()
        .chain(
            labels
                .chain(finalizers)
                .chain(owners)
                .map(|t| span(Some(t))),
        )
        .collect();
    (spans, unescaped.into())
}

impl Labels for CachedObject {
    fn label(&self, key: &str) -> Option<&str> {
        CachedObject::label(self, key)
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

impl Change {
    /// Whether `manager`'s server-side apply made this change: the object now holds fields
    /// applied by it, to itself or to a subresource, where it held none. Only the manager's own
    /// apply adds such an entry; another writer's change, even one that takes fields from it,
    /// does not. Other applies of the manager (new fields, new values) are not recognised.
    pub fn applied_by(&self, manager: &str) -> bool {
        let Some(new) = &self.new else {
            return false;
        };
        let entries = |object: &CachedObject| {
            object
                .applied()
                .iter()
                .filter(|applied| &*applied.manager == manager)
                .map(|applied| applied.subresource.clone())
                .collect::<Vec<_>>()
        };
        let before = self.old.as_deref().map(entries).unwrap_or_default();
        entries(new)
            .iter()
            .any(|subresource| !before.contains(subresource))
    }
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
    /// Ordered by key; looked up by [`ObjectKey`] without a second copy of each key.
    objects: BTreeSet<Entry>,
    /// The objects by controller and by indexed labels, in step with `objects`.
    indexes: Indexes,
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

/// A namespace and a name, compared as an [`ObjectKey`] is.
trait Keyed {
    fn parts(&self) -> (Option<&str>, &str);
}

impl Keyed for ObjectKey {
    fn parts(&self) -> (Option<&str>, &str) {
        (self.namespace.as_deref(), &self.name)
    }
}

impl PartialEq for dyn Keyed + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn Keyed + '_ {}

impl PartialOrd for dyn Keyed + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn Keyed + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        self.parts().cmp(&other.parts())
    }
}

impl Keyed for CachedObject {
    fn parts(&self) -> (Option<&str>, &str) {
        (self.namespace(), self.name())
    }
}

/// A cached object in the store's set, ordered by its key.
#[derive(Debug, Clone)]
struct Entry(Arc<CachedObject>);

impl Keyed for Entry {
    fn parts(&self) -> (Option<&str>, &str) {
        self.0.parts()
    }
}

impl<'a> Borrow<dyn Keyed + 'a> for Entry {
    fn borrow(&self) -> &(dyn Keyed + 'a) {
        self
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.parts().cmp(&other.parts())
    }
}

impl Inner {
    fn cached(&self, key: &ObjectKey) -> Option<&Arc<CachedObject>> {
        self.objects.get(key as &dyn Keyed).map(|entry| &entry.0)
    }

    /// Stores `object`, returning what it replaced.
    fn insert(&mut self, object: Arc<CachedObject>) -> Option<Arc<CachedObject>> {
        let old = self
            .objects
            .replace(Entry(object.clone()))
            .map(|entry| entry.0);
        if let Some(old) = &old {
            self.indexes.remove(old);
        }
        self.indexes.insert(&object);
        old
    }

    fn take(&mut self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        let old = self.objects.take(key as &dyn Keyed).map(|entry| entry.0)?;
        self.indexes.remove(&old);
        Some(old)
    }

    /// The objects in `namespace` (or all) matching `selector`, found through the index of
    /// one of its equalities if there is one.
    fn selected(
        &self,
        namespace: Option<&str>,
        selector: &LabelSelector,
    ) -> Option<Vec<Arc<CachedObject>>> {
        let (key, value) = selector
            .equalities()
            .find(|(key, _)| self.indexes.indexes(key))?;
        let found = self.indexes.labelled(key, value, namespace)?;
        Some(
            found
                .filter(|o| selector.matches(o.as_ref()))
                .cloned()
                .collect(),
        )
    }

    fn advance(&mut self, version: Option<u64>) {
        if let Some(version) = version {
            self.watermark = self.watermark.max(version);
        }
    }

    fn is_tombstoned(&self, object: &CachedObject) -> bool {
        self.tombstones
            .get(&object.key())
            .is_some_and(|t| object.uid() == Some(&t.uid))
    }
}

impl Store {
    /// The object with this key.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        self.read().cached(key).cloned()
    }

    /// Objects in `namespace` (or all) matching `selector` (or all), in key order.
    ///
    /// A selector with an equality is answered from the index of its label key, which the
    /// first such list starts while the store indexes fewer than [`MAX_LABEL_INDEXES`] keys:
    /// it costs the objects with that label value, not the namespace. Other selections are
    /// scanned under the read lock only. Starting an index holds the write lock while it walks
    /// the store, once per key and store.
    pub fn list(
        &self,
        namespace: Option<&str>,
        selector: Option<&LabelSelector>,
    ) -> Vec<Arc<CachedObject>> {
        if let Some(selector) = selector {
            let room = {
                let inner = self.read();
                if let Some(found) = inner.selected(namespace, selector) {
                    return found;
                }
                inner.indexes.has_room()
            };
            if let Some((key, _)) = selector.equalities().next().filter(|_| room) {
                let mut inner = self.write();
                let Inner {
                    objects, indexes, ..
                } = &mut *inner;
                if indexes.index_label(key, objects) {
                    return inner.selected(namespace, selector).unwrap_or_default();
                }
            }
        }
        self.scan(namespace, selector)
    }

    /// The objects whose controller reference has `uid`, in `namespace` (or all), in key
    /// order, from the store's index: it costs the objects found.
    pub fn controlled(&self, uid: &str, namespace: Option<&str>) -> Vec<Arc<CachedObject>> {
        let inner = self.read();
        inner.indexes.controlled(uid, namespace).cloned().collect()
    }

    /// Entries over the store's indexes: one per object with a controller, and one per object
    /// and indexed label key it carries.
    pub fn index_entries(&self) -> usize {
        self.read().indexes.entries()
    }

    /// [`Store::list`] by walking the namespace's objects (or all).
    fn scan(
        &self,
        namespace: Option<&str>,
        selector: Option<&LabelSelector>,
    ) -> Vec<Arc<CachedObject>> {
        let inner = self.read();
        let matches = |o: &&Arc<CachedObject>| selector.is_none_or(|s| s.matches(o.as_ref()));
        match namespace {
            Some(namespace) => {
                let start = ObjectKey {
                    namespace: Some(namespace.to_owned()),
                    name: String::new(),
                };
                inner
                    .objects
                    .range::<dyn Keyed, _>((
                        Bound::Included(&start as &dyn Keyed),
                        Bound::Unbounded,
                    ))
                    .map(|entry| &entry.0)
                    .take_while(|o| o.namespace() == Some(namespace))
                    .filter(matches)
                    .cloned()
                    .collect()
            }
            None => inner
                .objects
                .iter()
                .map(|entry| &entry.0)
                .filter(matches)
                .cloned()
                .collect(),
        }
    }

    /// Every key.
    pub fn keys(&self) -> Vec<ObjectKey> {
        self.read()
            .objects
            .iter()
            .map(|entry| entry.0.key())
            .collect()
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

    /// The highest resourceVersion the watch or a list has shown: every change of the selection
    /// up to it is in the store.
    pub fn watermark(&self) -> u64 {
        self.read().watermark
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
        if let Some(cached) = inner.cached(&key)
            && ((cached.uid() == object.uid()
                && cached.resource_version() == object.resource_version())
                || cached
                    .version()
                    .zip(object.version())
                    .is_some_and(|(c, o)| c > o))
        {
            return None;
        }
        let object = Arc::new(object);
        let old = inner.insert(object.clone());
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
        if inner.is_tombstoned(deleted) || deleted.uid().is_none() {
            inner.tombstones.remove(&key);
        }
        let cached = inner.cached(&key)?;
        if cached.uid().is_some() && deleted.uid().is_some() && cached.uid() != deleted.uid() {
            return None;
        }
        let old = inner.take(&key)?;
        Some(Change {
            old: Some(old),
            new: None,
            initial: false,
        })
    }

    /// The cached object that `object` is, if the store holds it at the same uid and
    /// resourceVersion: a list reuses it instead of keeping a second copy.
    pub fn same(&self, object: &DynamicObject) -> Option<Arc<CachedObject>> {
        let meta = &object.metadata;
        let key = ObjectKey {
            namespace: meta.namespace.clone(),
            name: meta.name.clone()?,
        };
        let inner = self.read();
        let cached = inner.cached(&key)?;
        let same = meta.uid.is_some()
            && meta.resource_version.is_some()
            && cached.uid() == meta.uid.as_deref()
            && cached.resource_version() == meta.resource_version.as_deref();
        same.then(|| cached.clone())
    }

    /// Replaces the whole content with a list's snapshot taken at `version`; returns every
    /// change it implies. Writes and deletes the host recorded after the snapshot are kept: the
    /// watch that follows the list delivers them.
    pub fn replace(&self, objects: Vec<Arc<CachedObject>>, version: &str) -> Vec<Change> {
        let version = version.parse::<u64>().ok();
        let mut inner = self.write();
        let mut tombstones = BTreeMap::new();
        let mut fresh = BTreeSet::new();
        for object in objects {
            let key = object.key();
            if let Some(tombstone) = inner.tombstones.get(&key)
                && object.uid() == Some(&tombstone.uid)
            {
                // A uid never comes back: the snapshot predates the host's delete.
                tombstones.insert(key, tombstone.clone());
                continue;
            }
            fresh.replace(Entry(object));
        }
        let newer = |cached: &CachedObject| {
            cached
                .version()
                .zip(version)
                .is_some_and(|(cached, listed)| cached > listed)
        };
        let initial = inner.lists == 0;
        // Only a recorded write is newer than a list that followed the watch it replaces.
        for entry in &inner.objects {
            if newer(&entry.0) {
                fresh.replace(entry.clone());
            }
        }
        let changes = differences(&inner.objects, &fresh, initial);
        inner.advance(version);
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
        inner.indexes.rebuild(&fresh);
        inner.objects = fresh;
        inner.tombstones = tombstones;
        inner.lists += 1;
        changes
    }

    /// Records the object a write of the host returned, if it is newer than anything the watch
    /// and the last list have shown; returns the change.
    ///
    /// An answer with the very version the store holds (an apply that changed nothing) changes
    /// nothing either, but for what the host sent: it is recorded on the cached copy.
    pub fn record_write(&self, object: CachedObject) -> Option<Change> {
        let version = object.version()?;
        let mut inner = self.write();
        let old = inner.cached(&object.key()).cloned();
        if let Some(old) = &old
            && old.uid() == object.uid()
            && old.version() == Some(version)
        {
            let sent = object.applied().iter().filter_map(|a| match a.fields {
                AppliedFields::Sent(intent) => Some((&a.manager, &a.subresource, intent)),
                AppliedFields::Recorded(_) => None,
            });
            let updated = sent.fold((**old).clone(), |cached, (manager, subresource, intent)| {
                cached.sent(manager, subresource.as_deref(), intent)
            });
            if updated != **old {
                inner.insert(Arc::new(updated));
            }
            return None;
        }
        if version <= inner.watermark || inner.is_tombstoned(&object) {
            return None;
        }
        if old
            .as_ref()
            .and_then(|o| o.version())
            .is_some_and(|cached| cached >= version)
        {
            return None;
        }
        let object = Arc::new(object);
        inner.insert(object.clone());
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
        let cached = inner.cached(key)?;
        if cached.uid() != Some(uid) {
            return None;
        }
        // Only a store that held the object keeps a tombstone: its watch delivers the deletion,
        // which removes the tombstone again.
        let tombstone = Tombstone {
            uid: uid.to_owned(),
            version: cached.version(),
        };
        inner.tombstones.insert(key.clone(), tombstone);
        let old = inner.take(key)?;
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

/// What changes from `cached` to `fresh`: deletes and updates in the order of `cached`, then
/// adds in the order of `fresh`. An object at the same resourceVersion is unchanged.
fn differences(cached: &BTreeSet<Entry>, fresh: &BTreeSet<Entry>, initial: bool) -> Vec<Change> {
    let mut changes = Vec::new();
    for Entry(old) in cached {
        match fresh.get(old.as_ref() as &dyn Keyed) {
            None => changes.push(Change {
                old: Some(old.clone()),
                new: None,
                initial,
            }),
            Some(Entry(new))
                if !Arc::ptr_eq(new, old) && new.resource_version() != old.resource_version() =>
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
    for Entry(new) in fresh {
        if !cached.contains(new.as_ref() as &dyn Keyed) {
            changes.push(Change {
                old: None,
                new: Some(new.clone()),
                initial,
            });
        }
    }
    changes
}

mod index;
#[cfg(test)]
mod tests;
