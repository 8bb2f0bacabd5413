//! A sharded guest's share of the keys on one replica: the objects labelled for its member.
//!
//! A key leaves the share in one of two ways: the object is deleted, and is reconciled as
//! gone; or the sharder asks for it with the drain label, and the worker that dequeues it
//! (the only one, by the queue's exclusion) removes the shard and drain labels instead of
//! reconciling. From then on the key is not this replica's: its leaving the cache is no
//! deletion, and nothing queued for it runs.
//!
//! A removal that got no answer may have landed: the key stays handed over, and while the cache
//! shows the version it was handed over from, the removal is sent again (one that landed makes
//! the retry conflict, and the cache then catches up); a conflict leaves the key as it was. A
//! key handed over that the cache shows at another version came back, or was changed before the
//! removal landed: it is taken as the share's again (handed over anew if drained). A key that
//! leaves the share before this replica may reconcile (its gate closed) was never reconciled
//! here: its leaving is no deletion.
//!
//! A key that enters the share with an object created over [`ARRIVAL_AGE`] ago was moved here
//! from another member (or labelled late): it is no real change, and takes the low lane.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;

use crate::cluster::cache::{CachedObject, Change, ObjectKey};
use crate::cluster::selection::Selection;
use crate::cluster::selector::LabelSelector;
use crate::shard::children::{self, Seen};
use crate::shard::membership;

/// How old an object entering the share must be to count as moved here rather than new.
pub const ARRIVAL_AGE: std::time::Duration = std::time::Duration::from_secs(30);

/// One guest's share of the keys on this replica.
pub struct Share {
    member: String,
    /// `shard.kubewasm.dev/<guest>`.
    label: String,
    /// `drain.shard.kubewasm.dev/<guest>`.
    drain: String,
    /// `children.shard.kubewasm.dev/<guest>`.
    children: String,
    /// Keys handed over whose leaving the cache is still to come.
    released: Mutex<HashMap<ObjectKey, Released>>,
    /// Set once this replica may reconcile the guest's keys.
    open: AtomicBool,
    /// Keys deleted while in the share, still to be reconciled as gone.
    gone: Mutex<HashSet<ObjectKey>>,
    /// Keys handed over so far.
    handovers: AtomicU64,
    /// Keys waiting for this replica's watches to show their children: since when, and whether
    /// the wait was warned of.
    waiting: Mutex<HashMap<ObjectKey, (Instant, bool)>>,
}

/// A key handed over: the version it was handed over from, and whether the write that removed
/// its labels got no answer (it may or may not have landed).
#[derive(Debug, Clone, Default)]
struct Released {
    version: Option<String>,
    unanswered: bool,
}

/// What a worker does with a dequeued key of a sharded guest.
#[derive(Debug, Clone, Copy)]
pub enum Claim<'a> {
    /// Reconcile it: it is in the share, or was deleted while in it.
    Ours,
    /// Hand it over, cached as this: the sharder drains it, or its last handover may not have
    /// landed.
    HandOver(&'a CachedObject),
    /// Drop it: handed over already, and the cache has not caught up.
    Released,
    /// Drop it: not in the share, or handed over; another replica's.
    Elsewhere,
}

impl Share {
    /// The share of `guest` for `member`.
    pub fn new(guest: &str, member: &str) -> Self {
        Self {
            member: member.to_owned(),
            label: membership::shard_label(guest),
            drain: membership::drain_label(guest),
            children: children::annotation(guest),
            released: Mutex::default(),
            open: AtomicBool::new(false),
            gone: Mutex::default(),
            handovers: AtomicU64::new(0),
            waiting: Mutex::default(),
        }
    }

    /// The member this replica reconciles under.
    pub fn member(&self) -> &str {
        &self.member
    }

    /// The shard label, whose value names the member an object is for.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The drain label, by which the sharder asks for an object back.
    pub fn drain(&self) -> &str {
        &self.drain
    }

    /// `selector` narrowed to the objects labelled for this member.
    pub fn narrow(&self, selector: Option<&LabelSelector>) -> LabelSelector {
        selector
            .cloned()
            .unwrap_or_default()
            .and_equal(&self.label, &self.member)
    }

    /// Whether `labels` label an object for this member.
    pub fn labels_ours(&self, labels: &BTreeMap<String, String>) -> bool {
        labels.get(&self.label) == Some(&self.member)
    }

    /// The versions the sharder saw `object`'s children at when it labelled it for its member
    /// (see [`crate::shard::children`]), if it named any.
    pub fn children(&self, object: &CachedObject) -> Option<Seen> {
        // Searched first: most objects carry none, and need no parse.
        if !object.json().contains(self.children.as_str()) {
            return None;
        }
        let value = metadata(object)?.annotations?.remove(&self.children)?;
        Some(Seen::parse(&value))
    }

    /// Notes that `key` waits for its children; returns how long it has waited (zero for a
    /// wait that starts now).
    pub fn wait_for_children(&self, key: &ObjectKey) -> Duration {
        let mut waiting = self.waiting.lock().expect("waiting lock");
        let now = Instant::now();
        let (since, _) = waiting.entry(key.clone()).or_insert((now, false));
        now - *since
    }

    /// Whether the wait of `key` for its children is to be warned of: once per wait.
    pub fn warn_children(&self, key: &ObjectKey) -> bool {
        let mut waiting = self.waiting.lock().expect("waiting lock");
        waiting
            .get_mut(key)
            .is_some_and(|(_, warned)| !std::mem::replace(warned, true))
    }

    /// Ends the wait of `key` for its children, if it waited: they are cached, or it is no longer
    /// this replica's.
    pub fn end_children_wait(&self, key: &ObjectKey) {
        let mut waiting = self.waiting.lock().expect("waiting lock");
        if !waiting.is_empty() {
            waiting.remove(key);
        }
    }

    /// The annotation naming the versions of a key's children.
    pub fn children_annotation(&self) -> &str {
        &self.children
    }

    /// Whether `object` is asked back by the sharder.
    pub fn draining(&self, object: &CachedObject) -> bool {
        object.label(&self.drain).is_some()
    }

    /// What to do with `key`, dequeued while the cache holds `object` for it.
    pub fn claim<'a>(&self, key: &ObjectKey, object: Option<&'a CachedObject>) -> Claim<'a> {
        let mut released = self.released.lock().expect("released lock");
        if let Some(handed) = released.get(key) {
            match object {
                None => return Claim::Released,
                Some(cached) if cached.resource_version() == handed.version.as_deref() => {
                    return if handed.unanswered {
                        Claim::HandOver(cached)
                    } else {
                        Claim::Released
                    };
                }
                // Another version, labelled for this member: came back, or changed first.
                Some(_) => {
                    released.remove(key);
                }
            }
        }
        drop(released);
        match object {
            Some(cached) if self.draining(cached) => Claim::HandOver(cached),
            Some(_) => Claim::Ours,
            None if self.gone.lock().expect("gone lock").contains(key) => Claim::Ours,
            None => Claim::Elsewhere,
        }
    }

    /// Whether `change` of the primary selection ends with the object outside it (deleted,
    /// relabelled or handed over), and whether that counts as leaving the share: false for a
    /// key this replica handed over, which is then forgotten.
    pub fn left(&self, change: &Change, selection: &Selection) -> Option<bool> {
        let old = change.old.as_ref()?;
        if change
            .new
            .as_ref()
            .is_some_and(|new| selection.selects(new))
        {
            return None;
        }
        let key = old.key();
        // Handed over from the version that leaves; one that changed since is no handover.
        let handed = (self.released.lock().expect("released lock")).remove(&key);
        let handed_over = handed.is_some_and(|h| h.version.as_deref() == old.resource_version());
        if handed_over || !self.open.load(Ordering::Relaxed) {
            return Some(false);
        }
        self.gone.lock().expect("gone lock").insert(key);
        Some(true)
    }

    /// Whether `change` brings into the share an object created over [`ARRIVAL_AGE`] ago: moved
    /// here from another member, not new.
    pub fn arrived(&self, change: &Change) -> bool {
        !change.initial
            && change.old.is_none()
            && change.new.as_deref().and_then(created).is_some_and(|at| {
                // A clock behind the API server's makes no new object look old.
                let age = Timestamp::now().duration_since(at);
                age.is_positive() && age.unsigned_abs() > ARRIVAL_AGE
            })
    }

    /// Notes that this replica may reconcile the guest's keys from now on.
    pub fn open(&self) {
        self.open.store(true, Ordering::Relaxed);
    }

    /// Notes `key`, cached as `object`, as handed over before the write that hands it over is
    /// sent, so that its leaving the cache is not taken for a deletion. A write sent again
    /// after one that got no answer keeps that mark until one is answered.
    pub fn release(&self, key: &ObjectKey, object: &CachedObject) {
        let mut released = self.released.lock().expect("released lock");
        let handed = released.entry(key.clone()).or_default();
        handed.version = object.resource_version().map(str::to_owned);
    }

    /// Notes that the write handing `key` over was answered and landed.
    pub fn answered(&self, key: &ObjectKey) {
        if let Some(handed) = self.released.lock().expect("released lock").get_mut(key) {
            handed.unanswered = false;
        }
    }

    /// Notes that the write handing `key` over got no answer: it may have landed, so the key
    /// stays handed over, and the write is sent again while the cache shows the version it
    /// was handed over from.
    pub fn unanswered(&self, key: &ObjectKey) {
        if let Some(handed) = self.released.lock().expect("released lock").get_mut(key) {
            handed.unanswered = true;
        }
    }

    /// Takes `key` back after its handover did not happen (the write was refused, or the
    /// object was deleted meanwhile).
    pub fn keep(&self, key: &ObjectKey) {
        self.released.lock().expect("released lock").remove(key);
    }

    /// Counts a handover done.
    pub fn handed_over(&self) {
        self.handovers.fetch_add(1, Ordering::Relaxed);
    }

    /// Keys handed over so far.
    pub fn handovers(&self) -> u64 {
        self.handovers.load(Ordering::Relaxed)
    }

    /// Notes `key` as deleted while in the share, to be reconciled as gone.
    pub fn mark_gone(&self, key: &ObjectKey) {
        self.gone.lock().expect("gone lock").insert(key.clone());
    }

    /// Ends the record of `key` as deleted, once reconciled.
    pub fn settle(&self, key: &ObjectKey) {
        self.gone.lock().expect("gone lock").remove(key);
    }
}

/// The metadata the share reads from an object's JSON, which the compact cache keeps no field
/// for.
#[derive(Deserialize)]
struct Metadata {
    #[serde(rename = "creationTimestamp")]
    created: Option<Timestamp>,
    annotations: Option<BTreeMap<String, String>>,
}

/// The metadata of `object`, read from its JSON.
fn metadata(object: &CachedObject) -> Option<Metadata> {
    #[derive(Deserialize)]
    struct Object {
        metadata: Metadata,
    }
    let object: Object = serde_json::from_str(object.json()).ok()?;
    Some(object.metadata)
}

/// When `object` was created.
fn created(object: &CachedObject) -> Option<Timestamp> {
    metadata(object)?.created
}

#[cfg(test)]
mod tests {
    use kube::api::DynamicObject;

    use super::*;

    /// The object `name`, labelled for member `m1` of the guest `g`, and drained if `draining`.
    fn cached(name: &str, version: &str, draining: bool) -> CachedObject {
        let mut labels = serde_json::json!({ "shard.kubewasm.dev/g": "m1" });
        if draining {
            labels["drain.shard.kubewasm.dev/g"] = "true".into();
        }
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name, "namespace": "ns", "resourceVersion": version, "labels": labels,
            },
        }))
        .unwrap();
        CachedObject::new(object)
    }

    fn left(share: &Share, old: &CachedObject) -> Option<bool> {
        let change = Change {
            old: Some(std::sync::Arc::new(old.clone())),
            new: None,
            initial: false,
        };
        let selection = Selection {
            kind: kube::api::GroupVersionKind::gvk("", "v1", "ConfigMap"),
            namespace: Some("ns".into()),
            selector: Some(share.narrow(None)),
        };
        share.left(&change, &selection)
    }

    #[test]
    fn a_handover_without_answer_is_sent_again_while_draining_and_its_leaving_is_no_deletion() {
        let share = Share::new("g", "m1");
        share.open();
        let drained = cached("a", "1", true);
        let key = drained.key();
        assert!(matches!(
            share.claim(&key, Some(&drained)),
            Claim::HandOver(_)
        ));
        share.release(&key, &drained);
        share.unanswered(&key);
        // The cache has not caught up: the removal is sent again.
        assert!(matches!(
            share.claim(&key, Some(&drained)),
            Claim::HandOver(_)
        ));
        // It had landed: the object leaves the share without being reconciled as gone.
        assert_eq!(left(&share, &drained), Some(false));
        assert!(matches!(share.claim(&key, None), Claim::Elsewhere));
    }

    #[test]
    fn a_key_that_leaves_before_the_share_opens_is_no_deletion() {
        let share = Share::new("g", "m1");
        let object = cached("a", "1", false);
        assert_eq!(left(&share, &object), Some(false));
        assert!(matches!(share.claim(&object.key(), None), Claim::Elsewhere));
        share.open();
        assert_eq!(left(&share, &object), Some(true));
        assert!(matches!(share.claim(&object.key(), None), Claim::Ours));
    }

    #[test]
    fn a_key_handed_over_that_comes_back_drained_is_handed_over_again() {
        let share = Share::new("g", "m1");
        share.open();
        let drained = cached("a", "1", true);
        let key = drained.key();
        share.release(&key, &drained);
        share.answered(&key);
        let again = cached("a", "7", true);
        assert!(matches!(
            share.claim(&key, Some(&again)),
            Claim::HandOver(_)
        ));
    }

    #[test]
    fn an_object_entering_the_share_arrived_if_created_long_ago() {
        let share = Share::new("g", "m1");
        let entering = |created: Timestamp| {
            let mut object = cached("a", "1", false).parse();
            object["metadata"]["creationTimestamp"] = created.to_string().into();
            Change {
                old: None,
                new: Some(std::sync::Arc::new(CachedObject::new(
                    serde_json::from_value(object).unwrap(),
                ))),
                initial: false,
            }
        };
        let old = Timestamp::now() - std::time::Duration::from_secs(3600);
        assert!(share.arrived(&entering(old)));
        assert!(!share.arrived(&entering(Timestamp::now())), "a new object");
        let listed = Change {
            initial: true,
            ..entering(old)
        };
        assert!(!share.arrived(&listed), "listed at start");
    }

    #[test]
    fn a_key_deleted_at_another_version_than_it_was_handed_over_from_is_a_deletion() {
        let share = Share::new("g", "m1");
        share.open();
        let drained = cached("a", "1", true);
        let key = drained.key();
        share.release(&key, &drained);
        // The sharder took the drain back (the removal met a conflict), then it was deleted.
        let kept = cached("a", "3", false);
        assert_eq!(left(&share, &kept), Some(true));
        assert!(matches!(share.claim(&key, None), Claim::Ours));
    }

    #[test]
    fn a_handover_answered_waits_for_the_cache() {
        let share = Share::new("g", "m1");
        share.open();
        let drained = cached("a", "1", true);
        let key = drained.key();
        share.release(&key, &drained);
        assert!(matches!(share.claim(&key, Some(&drained)), Claim::Released));
        assert!(matches!(share.claim(&key, None), Claim::Released));
    }

    #[test]
    fn a_key_handed_over_that_comes_back_unseen_is_in_the_share_again() {
        let share = Share::new("g", "m1");
        share.open();
        let drained = cached("a", "1", true);
        let key = drained.key();
        share.release(&key, &drained);
        // A relist shows it labelled for this member again, without drain.
        let back = cached("a", "5", false);
        assert!(matches!(share.claim(&key, Some(&back)), Claim::Ours));
        assert!(matches!(share.claim(&key, Some(&back)), Claim::Ours));
        assert_eq!(left(&share, &back), Some(true), "its deletion is one again");
    }

    #[test]
    fn a_wait_for_children_is_counted_from_its_start_and_warned_of_once() {
        let share = Share::new("g", "m1");
        let key = ObjectKey {
            namespace: Some("team".to_owned()),
            name: "p".to_owned(),
        };
        assert!(share.wait_for_children(&key).is_zero(), "a wait starts");
        std::thread::sleep(Duration::from_millis(5));
        assert!(
            !share.wait_for_children(&key).is_zero(),
            "the same wait goes on"
        );
        assert!(share.warn_children(&key));
        assert!(!share.warn_children(&key), "warned of once");
        share.end_children_wait(&key);
        assert!(!share.warn_children(&key), "no wait, nothing to warn of");
        assert!(share.wait_for_children(&key).is_zero(), "a new wait starts");
    }
}
