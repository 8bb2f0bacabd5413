//! The guest's `map-keys`: changed objects of kinds it watches with its own mapping wait, each
//! once however often it changed, to be mapped to keys of its primary kind.

use std::sync::Arc;

use kube::api::GroupVersionKind;

use super::wiring::enqueue;
use super::{BUSY_PAUSE, Controller};
use crate::cluster::cache::{CachedObject, Change, ObjectKey};
use crate::control::trigger;
use crate::wasm::bindings::types::{self, Reason};
use crate::wasm::declaration::Mapping;
use crate::wasm::dispatch::{self, Failure};

/// A watched object: its kind and key.
pub(super) type WatchedKey = (GroupVersionKind, ObjectKey);

/// What `map-keys` is to see of one changed watched object: its state before its first change
/// since it was last mapped and its latest state (or its last, once deleted), and whether each
/// change was part of an initial list.
pub(super) struct Unmapped {
    states: Vec<Arc<CachedObject>>,
    initial: bool,
}

impl Unmapped {
    /// Notes `change`, keeping the earliest and the latest state.
    fn note(&mut self, change: &Change) {
        for state in change.old.iter().chain(&change.new) {
            if self.states.iter().any(|s| Arc::ptr_eq(s, state)) {
                continue;
            }
            if self.states.len() == 2 {
                self.states.pop();
            }
            self.states.push(state.clone());
        }
        self.initial &= change.initial;
    }
}

impl Controller {
    /// The trigger of a watch of kind `watched`, by its mapping.
    pub(super) fn watch_handler(
        self: &Arc<Self>,
        watched: GroupVersionKind,
        mapping: Mapping,
        primary: GroupVersionKind,
        namespaced: bool,
    ) -> crate::cluster::watch::Handler {
        let queue = self.queue.clone();
        match mapping {
            Mapping::Owner => Arc::new(move |change: &Change| {
                for key in trigger::owners(change, &primary, false, namespaced) {
                    enqueue(&queue, change.initial, key, Reason::WatchedChanged);
                }
            }),
            Mapping::Label(label) => Arc::new(move |change: &Change| {
                for key in trigger::labelled(change, &label, namespaced) {
                    enqueue(&queue, change.initial, key, Reason::WatchedChanged);
                }
            }),
            Mapping::Guest => {
                let weak = Arc::downgrade(self);
                Arc::new(move |change: &Change| {
                    if let Some(controller) = weak.upgrade() {
                        controller.to_map(&watched, change);
                    }
                })
            }
        }
    }

    /// Queues the changed watched object, of kind `kind`, for `map-keys`.
    fn to_map(&self, kind: &GroupVersionKind, change: &Change) {
        let Some(object) = change.new.as_ref().or(change.old.as_ref()) else {
            return;
        };
        let key = (kind.clone(), object.key());
        let mut unmapped = self.unmapped_states.lock().expect("unmapped lock");
        let entry = unmapped.entry(key.clone()).or_insert(Unmapped {
            states: Vec::new(),
            initial: true,
        });
        entry.note(change);
        let initial = entry.initial;
        drop(unmapped);
        enqueue(&self.unmapped, initial, key, ());
    }

    /// Maps queued watched objects until the controller stops; a call in flight is dropped then.
    pub(super) async fn map(&self) {
        self.unmapped.serve(self.settings.max_concurrency as usize);
        // `map-keys` may call the host: a standby calls nothing.
        tokio::select! {
            () = self.gate.opened() => {}
            () = self.stop.cancelled() => return,
        }
        while let Some(item) = self.unmapped.next().await {
            let unmapped = self
                .unmapped_states
                .lock()
                .expect("unmapped lock")
                .remove(&item.key);
            if let Some(Unmapped { states, initial }) = unmapped {
                tokio::select! {
                    () = self.map_keys(&item.key.0, states, initial) => {}
                    () = self.stop.cancelled() => {
                        // Out of flight, so that it holds no room in the host's lanes.
                        self.unmapped.done(&item.key);
                        return;
                    }
                }
            }
            self.unmapped.done(&item.key);
        }
    }

    async fn map_keys(
        &self,
        kind: &GroupVersionKind,
        objects: Vec<Arc<CachedObject>>,
        initial: bool,
    ) {
        let module = self.module();
        let kind = types::Gvk::from(kind.clone());
        for object in objects {
            // A call the host had no room for is made again, so no trigger is lost.
            let mapped = loop {
                let mapped = dispatch::map_keys(
                    &self.runtime,
                    &module,
                    &self.env,
                    &self.settings.limits,
                    kind.clone(),
                    object.json(),
                )
                .await;
                if !matches!(mapped, Err(Failure::Busy(_))) {
                    break mapped;
                }
                tokio::time::sleep(BUSY_PAUSE).await;
            };
            match mapped {
                Ok(keys) => {
                    for key in keys {
                        let key = ObjectKey {
                            namespace: key.namespace,
                            name: key.name,
                        };
                        enqueue(&self.queue, initial, key, Reason::WatchedChanged);
                    }
                }
                Err(failure) => {
                    tracing::warn!(guest = %self.settings.name, object = %object.key(), %failure, "map-keys failed")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::cache::Change;

    fn pod(version: &str) -> Arc<CachedObject> {
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "a", "resourceVersion": version},
        });
        Arc::new(CachedObject::new(serde_json::from_value(pod).unwrap()))
    }

    #[test]
    fn a_watched_object_changed_many_times_is_mapped_once_with_its_first_and_last_state() {
        let states: Vec<_> = (1..=1000).map(|v| pod(&v.to_string())).collect();
        let mut unmapped = Unmapped {
            states: Vec::new(),
            initial: true,
        };
        unmapped.note(&Change {
            old: None,
            new: Some(states[0].clone()),
            initial: true,
        });
        for pair in states.windows(2) {
            unmapped.note(&Change {
                old: Some(pair[0].clone()),
                new: Some(pair[1].clone()),
                initial: false,
            });
        }
        unmapped.note(&Change {
            old: states.last().cloned(),
            new: None,
            initial: false,
        });
        let versions: Vec<_> = unmapped.states.iter().map(|s| s.version()).collect();
        assert_eq!(versions, [Some(1), Some(1000)]);
        assert!(!unmapped.initial, "a real change among them is not initial");
    }
}
