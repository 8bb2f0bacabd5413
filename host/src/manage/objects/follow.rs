//! How WasmController objects reach the queue: the watch of every object, the requeues when
//! the host's gate opens or a guest stops, and the periodic checks of probation and access.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;

use crate::config::resource::WasmControllerStatus;

use super::Objects;
use super::status::{Slots, recorded_image, tally_due, tally_status};
use super::{CHECK_EVERY, ControllerKey, Guests, TALLY_RETRY, jittered, key, named, resource};

impl Objects {
    /// Follows every controller object in the configured namespaces (or all), and queues each
    /// one that comes, goes, or changes other than in its status.
    pub(super) async fn watch(&self) {
        let apis: Vec<(Option<&str>, Api<DynamicObject>)> = if self.settings.namespaces.is_empty() {
            vec![(None, Api::all_with(self.client.clone(), &resource()))]
        } else {
            self.settings
                .namespaces
                .iter()
                .map(|namespace| (Some(namespace.as_str()), self.api(namespace)))
                .collect()
        };
        let watches = apis.into_iter().map(|(namespace, api)| {
            self.follow(namespace, watcher::watcher(api, watcher::Config::default()))
        });
        futures::future::join_all(watches).await;
    }

    /// Follows the objects of one watch, of `namespace` or all.
    pub(super) async fn follow(
        &self,
        namespace: Option<&str>,
        events: impl futures::Stream<Item = watcher::Result<watcher::Event<DynamicObject>>>,
    ) {
        let mut events = std::pin::pin!(events);
        let mut listing: Option<BTreeMap<ControllerKey, DynamicObject>> = None;
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Init) => listing = Some(BTreeMap::new()),
                Ok(watcher::Event::InitApply(object)) => {
                    if let (Some(listing), Some(key)) = (listing.as_mut(), key(&object)) {
                        listing.insert(key, object);
                    }
                }
                Ok(watcher::Event::InitDone) => {
                    let listed = listing.take().unwrap_or_default();
                    let mut latest = self.latest.lock().expect("objects lock");
                    let gone: Vec<ControllerKey> = latest
                        .keys()
                        .filter(|k| namespace.is_none_or(|n| k.0 == n) && !listed.contains_key(*k))
                        .cloned()
                        .collect();
                    let changed: Vec<ControllerKey> = listed
                        .iter()
                        .filter(|(k, o)| changed(latest.get(*k), o))
                        .map(|(k, _)| k.clone())
                        .collect();
                    for key in &gone {
                        latest.remove(key);
                    }
                    latest.extend(listed);
                    drop(latest);
                    for key in gone.into_iter().chain(changed) {
                        self.work.add(key, ());
                    }
                }
                Ok(watcher::Event::Apply(object)) => {
                    if let Some(key) = key(&object) {
                        let old = self
                            .latest
                            .lock()
                            .expect("objects lock")
                            .insert(key.clone(), object.clone());
                        // The host's own status writes, for one, change nothing that runs; but a
                        // standby follows the image the acting replica records.
                        let follow = !self.gate.is_open()
                            && recorded_image(old.as_ref()) != recorded_image(Some(&object));
                        if changed(old.as_ref(), &object) || follow {
                            self.work.add(key, ());
                        }
                    }
                }
                Ok(watcher::Event::Delete(object)) => {
                    if let Some(key) = key(&object) {
                        self.latest.lock().expect("objects lock").remove(&key);
                        self.work.add(key, ());
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "watching WasmController objects; retrying");
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            }
        }
    }

    /// Queues every object seen.
    pub(super) fn requeue_all(&self) {
        let keys: Vec<_> = self
            .latest
            .lock()
            .expect("objects lock")
            .keys()
            .cloned()
            .collect();
        for key in keys {
            self.work.add(key, ());
        }
    }

    /// Queues every object whose guest the host stopped, for [`Self::forget_stopped`].
    pub(super) async fn requeue_stopped(&self, guests: &dyn Guests) {
        let states = self.states.lock().await;
        for (key, state) in states.iter() {
            if state.applied.is_some() && !guests.running(key) {
                self.work.add(key.clone(), ());
            }
        }
    }

    /// Queues every object for which nothing runs: a controller stopped, and its name may be
    /// what another waits for.
    pub(super) async fn requeue_idle(&self) {
        let states = self.states.lock().await;
        for (key, state) in states.iter() {
            if state.applied.is_none() {
                self.work.add(key.clone(), ());
            }
        }
    }

    /// Every second: rolls back each new revision whose reconciles fail too often, queues each
    /// object whose guest was stopped by another's claim to its name, and writes each object's
    /// changed reconcile counters as [`tally_due()`] says.
    pub(super) async fn check(self: &Arc<Self>, guests: Weak<dyn Guests>) {
        let mut ticks = tokio::time::interval(CHECK_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let origin = Instant::now();
        let mut before = origin;
        loop {
            ticks.tick().await;
            let Some(guests) = guests.upgrade() else {
                return;
            };
            let now = Instant::now();
            let mut bad = Vec::new();
            let mut tallies = Vec::new();
            let mut states = self.states.lock().await;
            for (key, state) in states.iter_mut() {
                let Some(applied) = &state.applied else {
                    continue;
                };
                let Some(tally) = guests.tally(key) else {
                    // Its guest was stopped behind its back (an older object took the name):
                    // handled again, to say so.
                    bad.push(key.clone());
                    continue;
                };
                // Only a replica that may act judges, on the history it read then: a standby
                // runs no reconciles, and its verdict would be on nothing.
                let judging = self.gate.is_open() && state.acting;
                if let Some(probation) = state.probation.as_ref().filter(|_| judging) {
                    if let Some(message) = probation.verdict(&tally, now) {
                        let revision = applied.revision();
                        tracing::warn!(namespace = %key.0, name = %key.1, revision = %revision.digest, %message, "a new revision fails; rolling it back");
                        state.history.rolled_back(
                            &revision,
                            applied.generation,
                            &message,
                            &Timestamp::now().to_string(),
                        );
                        state.probation = None;
                        bad.push(key.clone());
                    } else if probation.passed(now) {
                        state.probation = None;
                    }
                }
                let counters = tally_status(&tally, state);
                let slots = Slots::of(key, origin, self.settings.counters_interval);
                let retry = state.tally_retry.is_none_or(|at| now >= at);
                let checks = (before, now);
                if retry && tally_due(state.tally_written.as_ref(), &counters, checks, &slots) {
                    let previous = state.tally_written.replace((counters.clone(), now));
                    tallies.push((key.clone(), state.uid.clone(), counters, previous));
                }
            }
            self.sources.registries().store().name(named(&states));
            drop(states);
            before = now;
            for key in bad {
                self.work.add(key, ());
            }
            for (key, uid, counters, previous) in tallies {
                if !self.write_tally(&key, uid, counters.clone()).await {
                    self.unwritten(&key, &counters, previous).await;
                }
            }
        }
    }

    /// Takes `counters` of `key` as not written, unless newer ones were since: `previous` is
    /// what status holds, and the counters are tried again after [`TALLY_RETRY`].
    async fn unwritten(
        &self,
        key: &ControllerKey,
        counters: &WasmControllerStatus,
        previous: Option<(WasmControllerStatus, Instant)>,
    ) {
        let mut states = self.states.lock().await;
        if let Some(state) = states.get_mut(key)
            && state
                .tally_written
                .as_ref()
                .is_some_and(|(w, _)| w == counters)
        {
            state.tally_written = previous;
            state.tally_retry = Some(Instant::now() + TALLY_RETRY);
        }
    }

    /// Every `every` (jittered): asks the API server again whether the host may do what each
    /// running guest may, as RBAC changes without the objects; a guest it may not is stopped,
    /// and its object handled again, which refuses it as `NotPermitted` until it may.
    pub(super) async fn review(self: &Arc<Self>, guests: Weak<dyn Guests>, every: Duration) {
        loop {
            tokio::time::sleep(jittered(every)).await;
            let Some(guests) = guests.upgrade() else {
                return;
            };
            let running: Vec<ControllerKey> = {
                let states = self.states.lock().await;
                states
                    .iter()
                    .filter(|(_, s)| s.applied.is_some())
                    .map(|(k, _)| k.clone())
                    .collect()
            };
            for key in running {
                if let Err(refusal) = guests.review(&key).await {
                    tracing::warn!(namespace = %key.0, name = %key.1, reason = refusal.reason, message = %refusal.message, "WasmController stopped: the host may no longer do what it may");
                    self.work.add(key, ());
                }
            }
        }
    }
}

/// Whether an object changed from `old` to `new` in what its controller depends on: its spec
/// (the generation), labels or annotations, identity or deletion; not its status alone.
pub(super) fn changed(old: Option<&DynamicObject>, new: &DynamicObject) -> bool {
    let Some(old) = old else {
        return true;
    };
    let (old, new) = (&old.metadata, &new.metadata);
    old.uid != new.uid
        || old.generation != new.generation
        || old.labels != new.labels
        || old.annotations != new.annotations
        || old.deletion_timestamp != new.deletion_timestamp
}

/// When `object` was created, as its claim to its controller name.
pub(super) fn created(object: &DynamicObject) -> String {
    object
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default()
}
