//! Objects that still carry the finalizer of a guest the host no longer runs.
//!
//! Unloading a guest keeps its finalizer on its objects: removing it would skip the clean-up
//! the guest promised, and a guest loaded again finalizes them. So a deleted object stays
//! Terminating, and the host says why: it keeps watching the guest's primary selection, logs a
//! warning for each object that starts terminating (and for those already terminating), and
//! counts them in the metrics, until a guest with that finalizer runs again or no object
//! carries it.

use std::sync::Arc;
use std::time::Duration;

use kube::api::GroupVersionKind;
use tokio::sync::Notify;

use crate::cluster::cache::{CachedObject, Change};
use crate::cluster::selection::Selection;
use crate::cluster::view::View;
use crate::cluster::watch::Subscription;
use crate::control::controller::Controller;

/// Shortest time between two counts of a selection that keeps changing.
const RECOUNT: Duration = Duration::from_secs(1);

/// The objects of one unloaded guest's primary selection that carry its finalizer.
pub struct StaleFinalizers {
    guest: String,
    finalizer: String,
    /// The guest's primary selection as declared, and the namespaces it ran in.
    primary: Selection,
    namespaces: Vec<String>,
    views: Vec<View>,
    /// Notified on every change of the selection.
    changed: Arc<Notify>,
    _subscriptions: Vec<Subscription>,
}

/// How many objects carry an unloaded guest's finalizer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StaleCount {
    /// All of them.
    pub objects: usize,
    /// Those being deleted, which stay Terminating.
    pub terminating: usize,
}

impl StaleFinalizers {
    /// Watches the objects of the primary selection of `controller`, which stopped, that carry
    /// `finalizer`, and logs how many there are.
    pub fn watch(controller: &Controller, finalizer: &str) -> Arc<Self> {
        let guest = controller.name();
        let views = controller.primaries().to_vec();
        let changed = Arc::new(Notify::new());
        let subscriptions = views
            .iter()
            .map(|view| {
                let (guest, finalizer, changed) =
                    (guest.to_owned(), finalizer.to_owned(), changed.clone());
                view.subscribe(Arc::new(move |change: &Change| {
                    changed.notify_one();
                    let Some(new) = &change.new else { return };
                    let was = change
                        .old
                        .as_ref()
                        .is_some_and(|old| waits(old, &finalizer));
                    if waits(new, &finalizer) && !was {
                        tracing::warn!(
                            guest, finalizer, object = %new.key(),
                            "object is being deleted but stays Terminating: its finalizer belongs to a guest that is no longer loaded; load the guest again, or remove the finalizer from the object"
                        );
                    }
                }))
            })
            .collect();
        let stale = Arc::new(Self {
            guest: guest.to_owned(),
            finalizer: finalizer.to_owned(),
            primary: controller.module().metadata.primary.clone(),
            namespaces: controller.settings().namespaces.clone(),
            views,
            changed,
            _subscriptions: subscriptions,
        });
        let count = stale.count();
        if count.objects > 0 {
            tracing::warn!(
                guest,
                finalizer,
                objects = count.objects,
                terminating = count.terminating,
                "guest unloaded while objects carry its finalizer; a deleted one stays Terminating until the guest is loaded again"
            );
        }
        stale
    }

    /// The guest that declared the finalizer.
    pub fn guest(&self) -> &str {
        &self.guest
    }

    /// The finalizer.
    pub fn finalizer(&self) -> &str {
        &self.finalizer
    }

    /// The primary kind whose objects carry it.
    pub fn kind(&self) -> &GroupVersionKind {
        &self.primary.kind
    }

    /// Whether a guest named `guest`, declaring `primary` and run in `namespaces`, selects
    /// exactly the objects these are watched on.
    pub fn same_selection(&self, guest: &str, primary: &Selection, namespaces: &[String]) -> bool {
        self.guest == guest && &self.primary == primary && self.namespaces == namespaces
    }

    /// How many objects carry the finalizer now.
    pub fn count(&self) -> StaleCount {
        let mut count = StaleCount::default();
        for view in &self.views {
            for object in view.objects() {
                if object.has_finalizer(&self.finalizer) {
                    count.objects += 1;
                    count.terminating += usize::from(object.deleting());
                }
            }
        }
        count
    }

    /// Resolves with `true` once no object of the selection carries the finalizer, or with
    /// `false` once the watch is dropped; holds no strong reference to it meanwhile. Counts at
    /// most once per [`RECOUNT`].
    pub fn emptied(self: &Arc<Self>) -> impl Future<Output = bool> + Send + 'static {
        let weak = Arc::downgrade(self);
        let changed = self.changed.clone();
        async move {
            loop {
                let notified = changed.notified();
                match weak.upgrade() {
                    None => return false,
                    Some(stale) if stale.count().objects == 0 => return true,
                    Some(_) => {}
                }
                notified.await;
                tokio::time::sleep(RECOUNT).await;
            }
        }
    }
}

impl Drop for StaleFinalizers {
    /// Wakes the [`StaleFinalizers::emptied`] future, which then ends.
    fn drop(&mut self) {
        self.changed.notify_one();
    }
}

/// Whether `object` is being deleted and waits for `finalizer`.
fn waits(object: &CachedObject, finalizer: &str) -> bool {
    object.deleting() && object.has_finalizer(finalizer)
}
