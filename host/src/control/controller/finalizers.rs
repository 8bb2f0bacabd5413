//! The controller's side of the finalizer protocol (decided in [`crate::control::finalizer`]):
//! the writes that add and remove the guest's finalizers, the objects that left a
//! label-selected primary selection while carrying them, and the count of objects waiting for
//! `finalize`.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use super::{Controller, SWEEP_RETRY};
use crate::cluster::cache::{CachedObject, ObjectKey};
use crate::cluster::selection::Selection;
use crate::control::finalizer::Ours;
use crate::wasm::backend::CallError;
use crate::wasm::bindings::types::Reason;

/// Objects being deleted that still wait for a guest's `finalize`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Finalizing {
    /// How many.
    pub objects: usize,
    /// Seconds since the oldest of them was deleted; 0 when there is none.
    pub oldest_seconds: u64,
}

impl Controller {
    /// The finalizers the guest keeps, with `finalizer` the current module's.
    pub(super) fn ours<'a>(&'a self, finalizer: Option<&'a str>) -> Ours<'a> {
        Ours {
            finalizer,
            retired: &self.settings.retired_finalizers,
        }
    }

    /// Objects being deleted that wait for the guest's `finalize`.
    pub fn finalizing(&self) -> Finalizing {
        let finalizing = self.finalizing.lock().expect("finalizing lock");
        let now = Timestamp::now().as_second();
        Finalizing {
            objects: finalizing.len(),
            oldest_seconds: finalizing
                .values()
                .map(|(_, deleted)| *deleted)
                .min()
                .map_or(0, |deleted| u64::try_from(now - deleted).unwrap_or(0)),
        }
    }

    /// Seconds since the object with `key` was deleted, as last noted; 0 if not noted.
    pub(super) fn terminating(&self, key: &ObjectKey) -> i64 {
        let deleted = self
            .finalizing
            .lock()
            .expect("finalizing lock")
            .get(key)
            .map(|(_, deleted)| *deleted);
        deleted.map_or(0, |d| Timestamp::now().as_second() - d)
    }

    /// Notes whether `object`, the primary with `key`, is being deleted and waits for the
    /// guest's `finalizer`.
    pub(super) fn note_finalizing(
        &self,
        key: &ObjectKey,
        object: Option<&CachedObject>,
        finalizer: Option<&str>,
    ) {
        let deleted = object
            .filter(|o| finalizer.is_some() && self.ours(finalizer).held_by(o))
            .and_then(|o| Some((o.uid().map(str::to_owned), o.deleted_at()?)));
        let mut finalizing = self.finalizing.lock().expect("finalizing lock");
        match deleted {
            Some((uid, at)) => {
                let entry = finalizing.entry(key.clone()).or_insert((uid.clone(), at));
                if entry.0 != uid {
                    *entry = (uid, at);
                }
            }
            None => {
                finalizing.remove(key);
            }
        }
    }

    /// Removes the guest's finalizer and those it retired from `object`.
    pub(super) async fn release(
        &self,
        object: &CachedObject,
        finalizer: Option<&str>,
    ) -> Result<(), CallError> {
        let kept = self.ours(finalizer).others(object);
        let kind = &self.module().metadata.primary.kind;
        self.backend.set_finalizers(kind, object, &kept).await
    }

    /// Whether the guest's primary selection has a label selector, which an object can leave.
    pub(super) fn selects_by_label(&self) -> bool {
        self.declared.iter().any(|s| s.selector.is_some())
    }

    /// Releases the object with `key`, gone from the cache, if it still exists in a namespace
    /// the guest runs in, outside its label selector, carrying its finalizers: it is no longer
    /// the guest's, and no `finalize` is called for it.
    pub(super) async fn release_unselected(
        &self,
        key: &ObjectKey,
        finalizer: Option<&str>,
    ) -> Result<(), CallError> {
        let scoped: Vec<&Selection> = self
            .declared
            .iter()
            .filter(|s| {
                s.namespace.is_none() || key.namespace.is_none() || s.namespace == key.namespace
            })
            .collect();
        if scoped.is_empty() {
            return Ok(());
        }
        let kind = &self.module().metadata.primary.kind;
        let live = self
            .backend
            .live(kind, key.namespace.as_deref(), &key.name)
            .await?;
        let Some(live) = live else {
            return Ok(());
        };
        if scoped.iter().any(|s| s.selects(&live)) || !self.ours(finalizer).held_by(&live) {
            return Ok(());
        }
        tracing::info!(guest = %self.settings.name, %key, "object left the guest's selection; removing its finalizer without finalize");
        self.release(&live, finalizer).await
    }

    /// Queues, as deleted, each object outside the guest's label-selected primary selection
    /// that carries its finalizers: it left the selection while no host watched it, and its
    /// reconcile releases it. Runs once the primaries have listed; a failed list is retried.
    pub(super) async fn sweep_unselected(self: Arc<Self>) {
        for view in &self.primaries {
            tokio::select! {
                () = view.informer().synced() => {}
                () = self.stop.cancelled() => return,
            }
        }
        let metadata = self.module().metadata.clone();
        let finalizer = metadata.finalizer.as_deref();
        for selection in &self.declared {
            loop {
                let swept = self
                    .backend
                    .each_metadata(&selection.kind, selection.namespace.as_deref(), |meta| {
                        let carries = meta
                            .finalizers
                            .iter()
                            .flatten()
                            .any(|f| self.ours(finalizer).is_ours(f));
                        let labels = meta.labels.unwrap_or_default();
                        let selected = selection
                            .selector
                            .as_ref()
                            .is_none_or(|s| s.matches(&labels));
                        // Sharded, each member sweeps the objects labelled for it.
                        let ours = self.share.as_ref().is_none_or(|s| s.labels_ours(&labels));
                        if carries
                            && !selected
                            && ours
                            && let Some(name) = meta.name
                        {
                            let key = ObjectKey {
                                namespace: meta.namespace,
                                name,
                            };
                            let mut gone = self.gone_holding.lock().expect("gone lock");
                            gone.insert(key.clone());
                            drop(gone);
                            if let Some(share) = &self.share {
                                share.mark_gone(&key);
                            }
                            self.queue.add(key, Reason::Deleted);
                        }
                    })
                    .await;
                let Err(error) = swept else { break };
                tracing::warn!(guest = %self.settings.name, %error, retry_in = ?SWEEP_RETRY, "listing objects outside the selection that carry the guest's finalizer");
                tokio::select! {
                    () = tokio::time::sleep(SWEEP_RETRY) => {}
                    () = self.stop.cancelled() => return,
                }
            }
        }
    }
}
