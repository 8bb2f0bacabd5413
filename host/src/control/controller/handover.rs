//! A sharded guest's keys on this replica: whether a dequeued key is this replica's to
//! reconcile, whether its cache holds the key's children yet, and the handover of a key the
//! sharder moves to another member.

use std::sync::atomic::Ordering;
use std::time::Duration;

use kube::api::GroupVersionKind;

use super::Controller;
use crate::cluster::cache::{CachedObject, ObjectKey};
use crate::shard::children::{Left, Seen};
use crate::shard::share::{Claim, Share};
use crate::shard::stats::ShardStats;
use crate::wasm::backend::CallError;
use crate::wasm::bindings::types::Reason;

/// Pause before a key whose children this replica's watches have not shown yet is looked at
/// again.
const CHILDREN_PAUSE: Duration = Duration::from_millis(100);

/// How long a key waits for its children before it is looked at only once a second. A watch
/// with no change to show advances by a bookmark about once a minute.
const CHILDREN_SLOW: Duration = Duration::from_secs(2);

/// How long a key waits for its children at most. A watch shows every version that exists
/// within about a minute (a bookmark, if nothing else), so a version not shown by then is none
/// a sharder wrote: whoever may write the key (its tenant) cannot hold it back for longer.
const CHILDREN_STALLED: Duration = Duration::from_secs(90);

impl Controller {
    /// Whether this replica reconciles `key`, cached as `object`: always when not sharded.
    /// Otherwise a key the sharder drains is handed over here, and one handed over or never in
    /// the share is dropped; neither is reconciled.
    pub(super) async fn claim(
        &self,
        kind: &GroupVersionKind,
        key: &ObjectKey,
        object: Option<&CachedObject>,
    ) -> bool {
        let Some(share) = &self.share else {
            return true;
        };
        let claim = share.claim(key, object);
        if !matches!(claim, Claim::Ours) {
            share.end_children_wait(key);
        }
        match claim {
            Claim::Ours => true,
            Claim::HandOver(object) => {
                self.hand_over(share, kind, key, object).await;
                false
            }
            Claim::Released => {
                self.queue.forget(key);
                false
            }
            Claim::Elsewhere => {
                self.note_finalizing(key, None, None);
                self.queue.forget(key);
                false
            }
        }
    }

    /// Whether this replica's watches of the owned kinds have shown the versions at which the
    /// sharder saw the children of `key`, cached as `object`, labelled for it (see
    /// [`crate::shard::children`]): whether the cache holds every child. If not, the key is
    /// queued again for `reason` after [`CHILDREN_PAUSE`] (a second after it has waited
    /// [`CHILDREN_SLOW`]), and not reconciled now. A key waits [`CHILDREN_STALLED`] at most,
    /// then is reconciled with a warning: its annotation names a version no sharder wrote.
    pub(super) fn children_cached(
        &self,
        key: &ObjectKey,
        object: Option<&CachedObject>,
        reason: Reason,
    ) -> bool {
        let Some(share) = self.share.as_deref() else {
            return true;
        };
        let behind = object
            .and_then(|o| share.children(o))
            .and_then(|seen| self.children_behind(key, &seen));
        let Some((kind, wanted, shown)) = behind else {
            share.end_children_wait(key);
            return true;
        };
        let waited = share.wait_for_children(key);
        let guest = &self.settings.name;
        if waited >= CHILDREN_STALLED {
            if share.warn_children(key) {
                tracing::warn!(%guest, %key, %kind, wanted, shown, ?waited, "reconciling without the key's children: this replica's watch has not shown the version its annotation names");
            }
            return true;
        }
        if waited.is_zero() {
            (self.shard_stats.children_waits).fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%guest, %key, %kind, wanted, shown, "waiting for its children");
        }
        let pause = if waited < CHILDREN_SLOW {
            CHILDREN_PAUSE
        } else {
            Duration::from_secs(1)
        };
        self.queue.add_after(key.clone(), reason, pause);
        false
    }

    /// The highest version of each owned kind among the children of `object` in this replica's
    /// cache, which holds its own writes before any watch shows them: named as the key is handed
    /// over, so that the sharder labels the key for its next member only once its own watches
    /// show every child this replica made.
    fn children_seen(&self, object: &CachedObject) -> Seen {
        let mut seen = Seen::default();
        let Some(uid) = object.uid() else {
            return seen;
        };
        for view in &self.owned {
            let kind = &view.selection().kind;
            for child in view.informer().store().controlled(uid, object.namespace()) {
                seen.raise(kind, child.resource_version().unwrap_or_default());
            }
        }
        seen
    }

    /// The highest version of each owned kind, by namespace, among the children of every key
    /// this replica holds, as its cache has them (its own writes among them): named on its
    /// Lease as it leaves the guest (see [`crate::shard::roster`]).
    pub(super) fn children_held(&self) -> Left {
        let mut left = Left::default();
        for view in &self.primaries {
            for object in view.keys().iter().filter_map(|key| view.get(key)) {
                let Some(uid) = object.uid() else {
                    continue;
                };
                for owned in &self.owned {
                    let kind = &owned.selection().kind;
                    for child in owned.informer().store().controlled(uid, object.namespace()) {
                        let version = child.resource_version().unwrap_or_default();
                        left.raise(child.namespace(), kind, version);
                    }
                }
            }
        }
        left
    }

    /// The first owned kind whose watch, among those that may hold children of `key`, has not
    /// shown the version `seen` names: its name, the version named and the version shown.
    fn children_behind(&self, key: &ObjectKey, seen: &Seen) -> Option<(String, u64, u64)> {
        self.owned.iter().find_map(|view| {
            let selection = view.selection();
            // The versions are of the key's namespace, or of all for a cluster-scoped key,
            // whose views of single namespaces are not waited for.
            let here = selection.namespace.is_none() || selection.namespace == key.namespace;
            let wanted = seen.version(&selection.kind)?;
            let shown = view.informer().store().watermark();
            (here && shown < wanted).then(|| (selection.kind.kind.clone(), wanted, shown))
        })
    }

    /// Ends the share's record of `key` as deleted, once reconciled.
    pub(super) fn settled(&self, key: &ObjectKey) {
        if let Some(share) = &self.share {
            share.settle(key);
        }
    }

    /// Hands `key` over to the member the sharder moves it to: removes its shard and drain
    /// labels from `object` as cached, after which this replica no longer reconciles it. Called
    /// by the one worker holding the key, so no reconcile of it runs here meanwhile. The write
    /// names the cached version: a stale copy (the key handed over already, and maybe assigned
    /// to another member) never removes the new member's label. A failed write is retried
    /// with the key's backoff, from the cache as it is then; one that got no answer leaves the
    /// key handed over (it may have landed: see [`Share`]), as does a conflict.
    async fn hand_over(
        &self,
        share: &Share,
        kind: &GroupVersionKind,
        key: &ObjectKey,
        object: &CachedObject,
    ) {
        share.release(key, object);
        let labels = [share.label(), share.drain()];
        let children = (
            share.children_annotation(),
            self.children_seen(object).value(),
        );
        match self
            .backend
            .remove_labels(kind, object, &labels, children)
            .await
        {
            Ok(true) => {
                share.answered(key);
                share.handed_over();
                self.note_finalizing(key, None, None);
                self.queue.forget(key);
                tracing::debug!(guest = %self.settings.name, %key, "handed over");
            }
            // Deleted meanwhile: still this replica's, to reconcile as gone.
            Ok(false) => {
                share.keep(key);
                self.queue.forget(key);
            }
            Err(error) => {
                // A conflict: the object changed since it was cached (maybe by a removal that
                // landed unanswered); the cache's next version settles it.
                if error.unanswered() {
                    share.unanswered(key);
                } else if !matches!(error, CallError::Api { code: 409, .. }) {
                    share.keep(key);
                }
                let delay = self.queue.add_rate_limited(key.clone(), Reason::Requeue);
                tracing::warn!(guest = %self.settings.name, %key, retry_in = ?delay, %error, "handing the key over failed");
            }
        }
    }

    /// What the sharder of this guest did on this replica.
    pub fn shard_stats(&self) -> &ShardStats {
        &self.shard_stats
    }

    /// Keys handed over to other members so far; `None` unless sharded.
    pub fn handovers(&self) -> Option<u64> {
        self.share.as_ref().map(|s| s.handovers())
    }

    /// The member name this replica reconciles under, when sharded.
    pub fn member(&self) -> Option<&str> {
        self.share.as_deref().map(Share::member)
    }
}
