//! What the host tells of a WasmController object: its status (conditions, revisions, the
//! reconcile counters and the last error) and its Events.

use std::hash::{Hash as _, Hasher as _};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::cluster::leader;
use crate::config::controller::{self, ControllerSpec};
use crate::config::resource::{Declaration, LastError, Reconciles, WasmControllerStatus};
use crate::control::apply::event_name;
use crate::control::tally::Tally;
use crate::manage::refusal::Refusal;
use crate::manage::revisions::{History, Probation};
use crate::wasm::declaration::Mapping;

use super::Objects;
use super::{
    Applied, CHECK_EVERY, ControllerKey, FIELD_MANAGER, Guests, Handled, Loaded, REPORTER, State,
    TALLY_MANAGER, resumed_probation,
};

impl Objects {
    /// Writes that the fetched module runs (Ready), and polls its source again.
    pub(super) async fn confirm(self: &Arc<Self>, handled: Handled<'_>) {
        let Handled {
            key,
            object,
            spec,
            generation,
            fetched,
        } = handled;
        self.work.forget(key);
        let mut states = self.states.lock().await;
        let mut running = None;
        if let Some(state) = states.get_mut(key)
            && let Some(applied) = &mut state.applied
        {
            // A tag may move to another manifest of the same module.
            if let Some(image) = fetched.image {
                applied.image = Some(image);
            }
            let applied = &*applied;
            let message = format!("controller {} runs {}", applied.name, applied.module.origin);
            state.warned = None;
            running = status_patch(
                object,
                generation,
                state,
                vec![
                    condition("Ready", true, "Running", &message, generation),
                    condition("Progressing", false, "Running", &message, generation),
                    condition("Degraded", false, "Running", &message, generation),
                ],
            );
        }
        drop(states);
        // A poll that finds the module running writes nothing the object does not hold.
        let status = object.data.get("status").unwrap_or(&Value::Null);
        self.write_status(running.filter(|r| !holds(status, &r.patch["status"])))
            .await;
        self.poll(key, spec);
    }

    /// Records on the object that a module was loaded, unless nothing changed.
    pub(super) async fn loaded(
        &self,
        object: &DynamicObject,
        loaded: Loaded,
        origin: &str,
        name: &str,
    ) {
        let note = match loaded {
            Loaded::Started => "loaded",
            Loaded::Swapped => "swapped in place; every key is reconciled again",
            Loaded::Replaced => "restarted with the new declaration or settings",
            Loaded::Unchanged | Loaded::Stopping => return,
        };
        let reason = match loaded {
            Loaded::Started => "Loaded",
            Loaded::Swapped => "Swapped",
            _ => "Replaced",
        };
        self.event(
            object,
            false,
            reason,
            "Load",
            &format!("module {origin} {note} as controller {name}"),
        )
        .await;
    }

    /// Records that `applied` runs for `key`: a new revision when its module is new, on
    /// probation when another ran before it and the spec's rollback is on. A revision that
    /// another host started (before a restart or a failover) goes on with what is left of its
    /// probation. `tally` is the guest's as it started.
    pub(super) async fn ran(
        &self,
        key: &ControllerKey,
        applied: Applied,
        tally: Option<&Tally>,
        spec: &ControllerSpec,
    ) {
        let mut states = self.states.lock().await;
        let state = states.entry(key.clone()).or_default();
        let revision = applied.revision();
        let running = state
            .history
            .revisions
            .first()
            .filter(|r| r.replaced.is_none());
        if running.is_none_or(|r| r.module_digest != revision.module_digest) {
            let before = running.is_some() || state.applied.is_some();
            state
                .history
                .started(revision, &Timestamp::now().to_string(), spec.history_limit);
            state.probation = tally
                .filter(|_| before && spec.rollback.enabled)
                .map(|t| Probation::new(Instant::now(), t, spec.rollback));
        } else if state.applied.is_none() {
            state.probation = resumed_probation(&state.history, tally, spec);
        }
        state.applied = Some(applied);
        state.refused = None;
    }

    /// Records on the object that its module was refused: a count, a log line, a Warning Event
    /// (unless the last one said the same) and conditions that say whether an earlier module
    /// still runs.
    pub(super) async fn refused(
        &self,
        key: &ControllerKey,
        object: &DynamicObject,
        generation: i64,
        refusal: &Refusal,
        guests: &dyn Guests,
    ) {
        guests.refused(refusal.reason);
        let said = (refusal.reason.to_owned(), refusal.message.clone());
        let repeated = {
            let mut states = self.states.lock().await;
            let state = states.entry(key.clone()).or_default();
            tracing::error!(namespace = %key.0, name = %key.1, reason = refusal.reason, message = %refusal.message, running = state.applied.is_some(), "WasmController refused");
            state.warned.replace(said.clone()) == Some(said)
        };
        if !repeated {
            self.event(object, true, refusal.reason, "Load", &refusal.message)
                .await;
        }
        self.degraded(key, object, generation, refusal).await;
    }

    /// Writes the conditions of a refusal: Degraded, Progressing while it is transient, and
    /// Ready while an earlier module still runs.
    pub(super) async fn degraded(
        &self,
        key: &ControllerKey,
        object: &DynamicObject,
        generation: i64,
        refusal: &Refusal,
    ) {
        let mut states = self.states.lock().await;
        let state = states.entry(key.clone()).or_default();
        let ready = match &state.applied {
            Some(applied) => condition(
                "Ready",
                true,
                "Running",
                &format!(
                    "controller {} runs {}; the spec's module does not",
                    applied.name, applied.module.origin
                ),
                generation,
            ),
            None => condition("Ready", false, refusal.reason, &refusal.message, generation),
        };
        let conditions = [
            ready,
            condition(
                "Progressing",
                refusal.transient,
                refusal.reason,
                &refusal.message,
                generation,
            ),
            condition(
                "Degraded",
                true,
                refusal.reason,
                &refusal.message,
                generation,
            ),
        ];
        let patch = status_patch(object, generation, state, conditions.into());
        drop(states);
        self.write_status(patch).await;
    }

    /// Writes the reconcile counters and last error of `key`'s status, if the object still has
    /// `uid`; whether they were written (not while this replica may not write).
    pub(super) async fn write_tally(
        &self,
        key: &ControllerKey,
        uid: Option<String>,
        counters: WasmControllerStatus,
    ) -> bool {
        let patch = json!({
            "apiVersion": format!("{}/{}", controller::GROUP, controller::VERSION),
            "kind": controller::KIND,
            "metadata": { "uid": uid },
            "status": counters,
        });
        if !self.gate.is_open() {
            return false;
        }
        let params = PatchParams::apply(TALLY_MANAGER).force();
        let written = self
            .api(&key.0)
            .patch_status(&key.1, &params, &Patch::Apply(&patch))
            .await;
        if let Err(error) = &written {
            tracing::debug!(namespace = %key.0, name = %key.1, %error, "writing a WasmController's reconcile counters");
        }
        written.is_ok()
    }

    /// Writes a status that [`status_patch()`] made, with no lock held: a slow API server delays only
    /// this object.
    pub(super) async fn write_status(&self, status: Option<StatusPatch>) {
        let Some(StatusPatch {
            namespace,
            name,
            patch,
        }) = status
        else {
            return;
        };
        if !self.gate.is_open() {
            return;
        }
        let params = PatchParams::apply(FIELD_MANAGER).force();
        if let Err(error) = self
            .api(&namespace)
            .patch_status(&name, &params, &Patch::Apply(&patch))
            .await
        {
            tracing::warn!(%namespace, %name, %error, "writing a WasmController's status");
        }
    }

    /// Records an Event on the controller object.
    pub(super) async fn event(
        &self,
        object: &DynamicObject,
        warning: bool,
        reason: &str,
        action: &str,
        note: &str,
    ) {
        let (Some(namespace), Some(name)) = (&object.metadata.namespace, &object.metadata.name)
        else {
            return;
        };
        let mut note = note.to_owned();
        // The API server refuses notes over 1 KiB.
        if note.len() > 1024 {
            let mut end = 1000;
            while !note.is_char_boundary(end) {
                end -= 1;
            }
            note.truncate(end);
            note.push_str(" [cut]");
        }
        let now = MicroTime(Timestamp::now());
        let event: Result<Event, _> = serde_json::from_value(json!({
            "metadata": { "name": event_name(name), "namespace": namespace },
            "eventTime": now,
            "reportingController": REPORTER,
            "reportingInstance": leader::replica_name(),
            "action": action,
            "reason": reason,
            "note": note,
            "type": if warning { "Warning" } else { "Normal" },
            "regarding": {
                "apiVersion": format!("{}/{}", controller::GROUP, controller::VERSION),
                "kind": controller::KIND,
                "namespace": namespace,
                "name": name,
                "uid": object.metadata.uid,
            },
        }));
        let Ok(event) = event else {
            return;
        };
        if !self.gate.is_open() {
            return;
        }
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        if let Err(error) = api.create(&PostParams::default(), &event).await {
            tracing::warn!(%namespace, %name, %error, "recording an Event on a WasmController");
        }
    }

    /// Remembers that the module and spec `refused` were refused for good.
    pub(super) async fn remember_refused(
        &self,
        key: &ControllerKey,
        refused: Option<(String, i64)>,
    ) {
        if let Some(state) = self.states.lock().await.get_mut(key) {
            state.refused = refused;
        }
    }
}

/// A status patch of one object.
pub(super) struct StatusPatch {
    namespace: String,
    name: String,
    patch: Value,
}

/// The status of `object` for `state`: the conditions (a condition keeps its transition time
/// while its status is unchanged) and, when a module runs, what it is.
pub(super) fn status_patch(
    object: &DynamicObject,
    generation: i64,
    state: &State,
    conditions: Vec<Condition>,
) -> Option<StatusPatch> {
    let (Some(namespace), Some(name)) = (&object.metadata.namespace, &object.metadata.name) else {
        return None;
    };
    let previous: Vec<Condition> = object
        .data
        .pointer("/status/conditions")
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default();
    let conditions = conditions
        .into_iter()
        .map(|mut c| {
            if let Some(old) = previous.iter().find(|o| o.type_ == c.type_)
                && old.status == c.status
            {
                c.last_transition_time = old.last_transition_time.clone();
            }
            c
        })
        .collect();
    // What another writer recorded (a replica that acted before this one) is kept.
    let written = History::from_status(object.data.get("status"));
    let history = state.history.merged(&written, state.history_limit);
    let mut status = WasmControllerStatus {
        observed_generation: Some(generation),
        conditions: Some(conditions),
        replica: Some(leader::replica_name().to_owned()),
        revisions: Some(history.revisions),
        rolled_back: history.rolled_back,
        ..WasmControllerStatus::default()
    };
    if let Some(applied) = &state.applied {
        running_status(&mut status, applied);
    }
    // The object's UID: a status meant for an object deleted meanwhile is refused by the API
    // server rather than written on one created again under its name.
    let patch = json!({
        "apiVersion": format!("{}/{}", controller::GROUP, controller::VERSION),
        "kind": controller::KIND,
        "metadata": { "uid": object.metadata.uid },
        "status": status,
    });
    Some(StatusPatch {
        namespace: namespace.clone(),
        name: name.clone(),
        patch,
    })
}

/// Fills in `status` what runs: `applied`.
pub(super) fn running_status(status: &mut WasmControllerStatus, applied: &Applied) {
    let metadata = &applied.module.metadata;
    let kind = |k: &GroupVersionKind| format!("{} {}", k.api_version(), k.kind);
    let module_digest = format!("sha256:{}", applied.module.digest);
    status.controller_name = Some(applied.name.clone());
    status.digest = Some(
        applied
            .image
            .as_ref()
            .map_or_else(|| module_digest.clone(), |(_, digest)| digest.clone()),
    );
    status.module_digest = Some(module_digest);
    status.image = applied.image.as_ref().map(|(pinned, _)| pinned.clone());
    status.contract = Some(applied.module.pre.interface().to_owned());
    let watches = metadata.watches.iter().map(|w| {
        let by = match &w.mapping {
            Mapping::Owner => "owner".to_owned(),
            Mapping::Label(label) => format!("label {label}"),
            Mapping::Guest => "map-keys".to_owned(),
        };
        format!("{} by {by}", kind(&w.selection.kind))
    });
    status.declaration = Some(Declaration {
        primary: kind(&metadata.primary.kind),
        owns: metadata.owns.iter().map(kind).collect(),
        watches: watches.collect(),
        finalizer: metadata.finalizer.clone(),
    });
}

/// The image pinned to a digest that `object`'s status records as running.
pub(super) fn recorded_image(object: Option<&DynamicObject>) -> Option<&str> {
    object?.data.pointer("/status/image")?.as_str()
}

/// The reconcile counters and last error of `tally`, as status writes them; the time of the last
/// error is when `state` first saw it.
pub(super) fn tally_status(tally: &Tally, state: &mut State) -> WasmControllerStatus {
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let mut counters = WasmControllerStatus {
        reconciles: Some(Reconciles {
            succeeded: count(tally.succeeded),
            requeued: count(tally.requeued),
            failed: count(tally.failed),
            consecutive_failures: count(tally.consecutive_failures),
        }),
        ..WasmControllerStatus::default()
    };
    if let Some(error) = &tally.last_error {
        let seen = state
            .last_error
            .take()
            .filter(|(_, e)| e == error)
            .unwrap_or_else(|| (Timestamp::now().to_string(), error.clone()));
        counters.last_error = Some(LastError {
            message: seen.1.clone(),
            time: seen.0.clone(),
        });
        state.last_error = Some(seen);
    }
    // Only while failing: without it, the apply gives the condition up and it is gone.
    if let Some((since, error)) = &tally.shard_labels_failing {
        let message = format!("the sharder cannot label this controller's objects: {error}");
        let mut failing = condition("ShardLabels", false, "WriteFailed", &message, 0);
        failing.observed_generation = None;
        failing.last_transition_time = Time(*since);
        counters.conditions = Some(vec![failing]);
    }
    counters
}

/// Whether `held` has every field of `wanted` with its value (lists whole).
fn holds(held: &Value, wanted: &Value) -> bool {
    match (held, wanted) {
        (Value::Object(held), Value::Object(wanted)) => wanted
            .iter()
            .all(|(key, value)| held.get(key).is_some_and(|h| holds(h, value))),
        _ => held == wanted,
    }
}

/// Whether `counters` are to be written at the check at `now`, the one before it having been at
/// `before`, and `written` being the last written and when: at once when a reader would see more
/// than numbers move (a kind of outcome seen first or no more, a failing streak starting or
/// ending, another last error or condition), else at the object's moment of the interval (one
/// of its `slots`), at most once an interval.
pub(super) fn tally_due(
    written: Option<&(WasmControllerStatus, Instant)>,
    counters: &WasmControllerStatus,
    (before, now): (Instant, Instant),
    slots: &Slots,
) -> bool {
    let Some((written, at)) = written else {
        return true;
    };
    written != counters
        && (news(written, counters)
            || (slots.passed(before, now) && now.duration_since(*at) >= slots.least()))
}

/// The moments at which one object's counters that only moved may be written: one per interval,
/// at a phase of the object's own, so that objects whose counters start moving together (a
/// thousand of them, after a quiet hour) write them spread over the interval, not all at once.
pub(super) struct Slots {
    /// Where the phases are counted from.
    origin: Instant,
    /// The interval.
    every: Duration,
    /// The object's moment in each interval.
    phase: Duration,
}

impl Slots {
    /// The slots of `key`, every `every` from `origin`, at a phase a hash of `key` spreads
    /// evenly over the interval.
    pub(super) fn of(key: &ControllerKey, origin: Instant, every: Duration) -> Self {
        let mut hasher = std::hash::DefaultHasher::new();
        key.hash(&mut hasher);
        let phase = every.mul_f64(hasher.finish() as f64 / (u64::MAX as f64 + 1.0));
        Self {
            origin,
            every,
            phase,
        }
    }

    /// The least time between two writes at the slots: the interval, less what the checks'
    /// ticks may add to one write's moment and not to the next's.
    fn least(&self) -> Duration {
        self.every.saturating_sub(2 * CHECK_EVERY)
    }

    /// Whether one of the slots lies in (`since`, `now`].
    fn passed(&self, since: Instant, now: Instant) -> bool {
        self.index(now) > self.index(since)
    }

    /// How many slots lie in [`origin`, `at`].
    fn index(&self, at: Instant) -> u128 {
        let shifted = at.saturating_duration_since(self.origin) + self.every - self.phase;
        shifted.as_nanos() / self.every.as_nanos().max(1)
    }
}

/// Whether `new` says more than `old` with its numbers moved.
fn news(old: &WasmControllerStatus, new: &WasmControllerStatus) -> bool {
    let started = |count: fn(&Reconciles) -> i64| {
        let count = |s: &WasmControllerStatus| s.reconciles.as_ref().map_or(0, count);
        (count(old) == 0) != (count(new) == 0)
    };
    let error = |s: &WasmControllerStatus| s.last_error.as_ref().map(|e| e.message.clone());
    started(|r| r.succeeded)
        || started(|r| r.requeued)
        || started(|r| r.failed)
        || started(|r| r.consecutive_failures)
        || error(old) != error(new)
        || old.conditions != new.conditions
}

pub(super) fn condition(
    kind: &str,
    status: bool,
    reason: &str,
    message: &str,
    generation: i64,
) -> Condition {
    Condition {
        type_: kind.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation: Some(generation),
        last_transition_time: Time(Timestamp::now()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(succeeded: i64, failed: i64, error: Option<&str>) -> WasmControllerStatus {
        WasmControllerStatus {
            reconciles: Some(Reconciles {
                succeeded,
                requeued: 0,
                failed,
                consecutive_failures: failed,
            }),
            last_error: error.map(|message| LastError {
                message: message.to_owned(),
                time: "2026-11-29T00:00:00Z".to_owned(),
            }),
            ..WasmControllerStatus::default()
        }
    }

    #[test]
    fn a_status_holds_a_patch_whose_every_field_it_has() {
        let held = json!({"a": 1, "b": {"c": [1, 2], "d": "x"}, "e": true});
        assert!(holds(&held, &json!({"b": {"c": [1, 2]}})));
        assert!(holds(&held, &json!({})));
        assert!(!holds(&held, &json!({"b": {"c": [1]}})));
        assert!(!holds(&held, &json!({"b": {"d": "y"}})));
        assert!(!holds(&held, &json!({"f": null})));
        assert!(!holds(&Value::Null, &json!({"a": 1})));
    }

    /// The slots of an object whose phase is `phase` of a minute.
    fn slots(origin: Instant, phase: u64) -> Slots {
        Slots {
            origin,
            every: Duration::from_secs(60),
            phase: Duration::from_secs(phase),
        }
    }

    #[test]
    fn counters_that_only_move_are_written_at_the_objects_slot_once_an_interval() {
        let origin = Instant::now();
        let slots = slots(origin, 30);
        let secs = |s: u64| origin + Duration::from_secs(s);
        // Checks every second: the one at `s` follows the one at `s - 1`.
        let check = |s: u64| (secs(s - 1), secs(s));
        let moved = counters(9, 0, None);
        // Written at the slot at 90 s: not again before the next one, at 150 s.
        let written = (counters(3, 0, None), secs(90));
        assert!(!tally_due(Some(&written), &moved, check(149), &slots));
        assert!(tally_due(Some(&written), &moved, check(150), &slots));
        assert!(!tally_due(Some(&written), &moved, check(151), &slots));
        assert!(!tally_due(Some(&written), &written.0, check(150), &slots));
        // A late check still finds the slot it passed.
        assert!(tally_due(
            Some(&written),
            &moved,
            (secs(148), secs(152)),
            &slots
        ));
        // Quiet for an hour, then moving: written at the slot, not at once.
        let quiet = (counters(3, 0, None), secs(30));
        assert!(!tally_due(Some(&quiet), &moved, check(3600), &slots));
        assert!(tally_due(Some(&quiet), &moved, check(3630), &slots));
        // Written anew (a first failure, say) within the interval before a slot: not at it.
        let anew = (counters(3, 0, None), secs(3580));
        assert!(!tally_due(Some(&anew), &moved, check(3630), &slots));
        assert!(tally_due(Some(&anew), &moved, check(3690), &slots));
        // Written at the tick's end after one slot, then at its start after the next.
        let late = (counters(3, 0, None), secs(3631));
        assert!(tally_due(Some(&late), &moved, check(3690), &slots));
    }

    #[test]
    fn a_thousand_objects_slots_spread_over_the_interval() {
        let (origin, every) = (Instant::now(), Duration::from_secs(60));
        let mut per_second = [0usize; 60];
        for index in 0..1000 {
            let key = (format!("team-{index}"), "density".to_owned());
            let phase = Slots::of(&key, origin, every).phase;
            assert!(phase < every);
            per_second[phase.as_secs() as usize] += 1;
        }
        // 16.7 a second on average.
        let most = per_second.iter().max().copied().unwrap_or_default();
        assert!(
            most <= 40,
            "{most} objects write in one second: {per_second:?}"
        );
    }

    #[test]
    fn what_a_reader_would_see_anew_is_written_at_once() {
        let at = Instant::now();
        let (soon, slots) = ((at, at + Duration::from_secs(1)), slots(at, 30));
        let due = |old: WasmControllerStatus, new: WasmControllerStatus| {
            tally_due(Some(&(old, at)), &new, soon, &slots)
        };
        assert!(tally_due(None, &counters(0, 0, None), soon, &slots));
        assert!(
            due(counters(0, 0, None), counters(1, 0, None)),
            "a first success"
        );
        assert!(
            due(counters(3, 0, None), counters(3, 1, Some("x"))),
            "a first failure"
        );
        assert!(
            due(counters(3, 2, Some("x")), counters(3, 3, Some("y"))),
            "another error"
        );
        let mut recovered = counters(4, 2, Some("x"));
        recovered.reconciles.as_mut().unwrap().consecutive_failures = 0;
        assert!(due(counters(3, 2, Some("x")), recovered), "a streak ended");
        let mut failing = counters(3, 2, Some("x"));
        failing.conditions = Some(vec![condition("ShardLabels", false, "WriteFailed", "y", 0)]);
        assert!(due(counters(3, 2, Some("x")), failing), "a condition");
        assert!(
            !due(counters(3, 2, Some("x")), counters(3, 5, Some("x"))),
            "more of the same"
        );
    }
}
