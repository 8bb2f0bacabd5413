//! The store's secondary indexes: its objects by their controller's uid, and by the value of
//! each label key guests select on with an equality. Each entry is a pointer to the cached
//! object and the position of the indexed string in it, so an index costs 16 bytes per entry
//! and its tree's nodes, never a copy of the string.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

use super::{CachedObject, Entry};

/// Label keys a store indexes at most: the first ones guests select on with an equality, kept
/// for the store's life. A selection on any other key is answered by a scan, as before there
/// was an index. Bounds what selections can make a store hold: at most this many entries per
/// object, each 16 bytes and its share of the tree's nodes (34 bytes in all, measured by
/// `cargo bench -p kubewasm --bench namespace`).
pub const MAX_LABEL_INDEXES: usize = 8;

/// An object in an index: ordered by the string at `part` of its spans, then by its key.
#[derive(Debug, Clone)]
struct Indexed {
    object: Arc<CachedObject>,
    part: u32,
}

impl Indexed {
    fn new(object: &Arc<CachedObject>, part: usize) -> Self {
        Self {
            object: object.clone(),
            part: u32::try_from(part).expect("fewer than 2^32 spans"),
        }
    }
}

/// The indexed string, the namespace and the name of an entry, or a bound of a search.
trait Sought {
    fn parts(&self) -> (&str, Option<&str>, &str);
}

impl Sought for Indexed {
    fn parts(&self) -> (&str, Option<&str>, &str) {
        let object = &self.object;
        (
            object.part(self.part as usize),
            object.namespace(),
            object.name(),
        )
    }
}

/// The first entry with `value` in `namespace` (or in any, the lowest namespace being none).
struct Lowest<'a> {
    value: &'a str,
    namespace: Option<&'a str>,
}

impl Sought for Lowest<'_> {
    fn parts(&self) -> (&str, Option<&str>, &str) {
        (self.value, self.namespace, "")
    }
}

impl PartialEq for dyn Sought + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn Sought + '_ {}

impl PartialOrd for dyn Sought + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn Sought + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        self.parts().cmp(&other.parts())
    }
}

impl<'a> Borrow<dyn Sought + 'a> for Indexed {
    fn borrow(&self) -> &(dyn Sought + 'a) {
        self
    }
}

impl PartialEq for Indexed {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for Indexed {}

impl PartialOrd for Indexed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Indexed {
    fn cmp(&self, other: &Self) -> Ordering {
        self.parts().cmp(&other.parts())
    }
}

/// Objects ordered by one string of theirs, then by key.
#[derive(Debug, Default)]
struct Index(BTreeSet<Indexed>);

impl Index {
    fn insert(&mut self, object: &Arc<CachedObject>, part: Option<usize>) {
        if let Some(part) = part {
            self.0.replace(Indexed::new(object, part));
        }
    }

    fn remove(&mut self, object: &Arc<CachedObject>, part: Option<usize>) {
        if let Some(part) = part {
            self.0.remove(&Indexed::new(object, part) as &dyn Sought);
        }
    }

    /// The objects whose string is `value`, in `namespace` or in all, in key order.
    fn matching<'a>(
        &'a self,
        value: &'a str,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Arc<CachedObject>> {
        let lowest = Lowest { value, namespace };
        self.0
            .range::<dyn Sought, _>((Bound::Included(&lowest as &dyn Sought), Bound::Unbounded))
            .map(|indexed| (indexed.parts(), &indexed.object))
            .take_while(move |((v, ns, _), _)| {
                *v == value && namespace.is_none_or(|n| *ns == Some(n))
            })
            .map(|(_, object)| object)
    }
}

/// Every index of one store, kept in step with its objects.
#[derive(Debug, Default)]
pub(super) struct Indexes {
    /// Objects with a controller reference, by its uid.
    controlled: Index,
    /// Objects carrying each indexed label key, by its value.
    labels: Vec<(Box<str>, Index)>,
}

impl Indexes {
    /// Indexes `object`, which the store now holds.
    pub(super) fn insert(&mut self, object: &Arc<CachedObject>) {
        self.controlled.insert(object, object.controller_uid_part());
        for (key, index) in &mut self.labels {
            index.insert(object, object.label_part(key));
        }
    }

    /// Forgets `object`, which the store no longer holds.
    pub(super) fn remove(&mut self, object: &Arc<CachedObject>) {
        self.controlled.remove(object, object.controller_uid_part());
        for (key, index) in &mut self.labels {
            index.remove(object, object.label_part(key));
        }
    }

    /// Indexes `objects` anew, the store's whole content, with the same label keys.
    pub(super) fn rebuild(&mut self, objects: &BTreeSet<Entry>) {
        let keys = self
            .labels
            .drain(..)
            .map(|(key, _)| key)
            .collect::<Vec<_>>();
        *self = Self::default();
        self.labels = keys
            .into_iter()
            .map(|key| (key, Index::default()))
            .collect();
        for Entry(object) in objects {
            self.insert(object);
        }
    }

    /// The objects whose controller has `uid`, in `namespace` or in all, in key order.
    pub(super) fn controlled<'a>(
        &'a self,
        uid: &'a str,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Arc<CachedObject>> {
        self.controlled.matching(uid, namespace)
    }

    /// The objects with the label `key=value`, in `namespace` or in all, in key order; `None`
    /// when `key` is not indexed.
    pub(super) fn labelled<'a>(
        &'a self,
        key: &str,
        value: &'a str,
        namespace: Option<&'a str>,
    ) -> Option<impl Iterator<Item = &'a Arc<CachedObject>>> {
        let (_, index) = self.labels.iter().find(|(k, _)| **k == *key)?;
        Some(index.matching(value, namespace))
    }

    /// Whether `key` is indexed.
    pub(super) fn indexes(&self, key: &str) -> bool {
        self.labels.iter().any(|(k, _)| **k == *key)
    }

    /// Whether another label key may be indexed.
    pub(super) fn has_room(&self) -> bool {
        self.labels.len() < MAX_LABEL_INDEXES
    }

    /// Starts indexing `key` over `objects`, the store's whole content, if fewer than
    /// [`MAX_LABEL_INDEXES`] keys are; returns whether `key` is indexed.
    pub(super) fn index_label(&mut self, key: &str, objects: &BTreeSet<Entry>) -> bool {
        if self.indexes(key) {
            return true;
        }
        if !self.has_room() {
            return false;
        }
        let mut index = Index::default();
        for Entry(object) in objects {
            index.insert(object, object.label_part(key));
        }
        self.labels.push((key.into(), index));
        true
    }

    /// Entries over every index: the objects each indexes, added up.
    pub(super) fn entries(&self) -> usize {
        self.controlled.0.len() + self.labels.iter().map(|(_, i)| i.0.len()).sum::<usize>()
    }
}
