//! Rollbacks: a new revision failing its probation is replaced by the one that ran before it,
//! and a module that cannot be run while nothing runs for the object by the last good one.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::api::DynamicObject;

use crate::config::controller::ControllerSpec;
use crate::manage::refusal::Refusal;
use crate::manage::revisions::{self};

use super::Objects;
use super::follow::created;
use super::{Applied, ControllerKey, Guests, Handled, Loaded, Restored, resumed_probation};

impl Objects {
    /// Runs the last good revision in place of the fetched module, which was rolled back and
    /// nothing runs for it; whether the handling goes on.
    pub(super) async fn restore_rolled_back(
        &self,
        handled: &Handled<'_>,
        guests: &dyn Guests,
    ) -> bool {
        let Handled {
            key,
            object,
            spec,
            generation,
            ..
        } = *handled;
        let bad = format!("sha256:{}", handled.fetched.module_digest);
        match self
            .restore(key, spec, generation, Some(&bad), guests)
            .await
        {
            Ok(None) => false,
            Ok(Some(restored)) => {
                let note = format!(
                    "module {} loaded as controller {} in place of {bad}, which was rolled back",
                    restored.origin, restored.name
                );
                self.event(object, false, "Loaded", "Load", &note).await;
                true
            }
            Err(refusal) => {
                self.refused(key, object, generation, &refusal, guests)
                    .await;
                self.retry(key, spec, &refusal);
                false
            }
        }
    }

    /// Says that the fetched module was rolled back for this spec and another runs, and leaves
    /// it alone until the spec or the module changes.
    pub(super) async fn keep_rolled_back(self: &Arc<Self>, handled: &Handled<'_>) {
        let Handled {
            key,
            object,
            spec,
            generation,
            ..
        } = *handled;
        let why = self
            .states
            .lock()
            .await
            .get(key)
            .and_then(|s| s.history.rolled_back.as_ref())
            .map(|r| r.message.clone())
            .unwrap_or_default();
        let refusal = Refusal {
            reason: "RolledBack",
            message: format!("{} was rolled back: {why}", handled.fetched.origin),
            transient: false,
        };
        self.degraded(key, object, generation, &refusal).await;
        let module_digest = format!("sha256:{}", handled.fetched.module_digest);
        self.remember_refused(key, Some((module_digest, generation)))
            .await;
        self.poll(key, spec);
    }

    /// The running module, as its digest (`sha256:...`) and origin, when it was rolled back for
    /// `generation` and rollback is on: it still has to be replaced.
    pub(super) async fn running_bad(
        &self,
        key: &ControllerKey,
        spec: &ControllerSpec,
        generation: i64,
    ) -> Option<(String, String)> {
        let states = self.states.lock().await;
        let state = states.get(key)?;
        let module = &state.applied.as_ref()?.module;
        let digest = format!("sha256:{}", module.digest);
        (spec.rollback.enabled && state.history.is_bad(&digest, generation))
            .then(|| (digest, module.origin.clone()))
    }

    /// Replaces the running revision, `bad` (its module digest and origin), that the check loop
    /// found failing, with the last good one: a Warning Event says so. When that fails, the bad one keeps running, and the
    /// object is Degraded and retried (or, if it cannot succeed, left until its spec changes).
    /// Whether the reconcile goes on.
    pub(super) async fn roll_back(
        self: &Arc<Self>,
        key: &ControllerKey,
        object: &DynamicObject,
        spec: &ControllerSpec,
        generation: i64,
        (bad, origin): (&str, &str),
        guests: &dyn Guests,
    ) -> bool {
        let memo = Some((bad.to_owned(), generation));
        let (failed_before, why) = {
            let states = self.states.lock().await;
            let state = states.get(key);
            (
                state.is_some_and(|s| s.rollback_failed == memo),
                state
                    .and_then(|s| s.history.rolled_back.as_ref())
                    .map(|r| r.message.clone())
                    .unwrap_or_default(),
            )
        };
        if failed_before {
            return true;
        }
        match self.restore(key, spec, generation, Some(bad), guests).await {
            Ok(None) => false,
            Ok(Some(restored)) => {
                guests.refused("RolledBack");
                let note = format!(
                    "{origin} fails ({why}); rolled back to {} as controller {}",
                    restored.origin, restored.name
                );
                self.event(object, true, "RolledBack", "Rollback", &note)
                    .await;
                tracing::warn!(namespace = %key.0, name = %key.1, bad = %origin, to = %restored.origin, "WasmController rolled back to its last good revision");
                true
            }
            Err(refusal) => {
                let refusal = Refusal {
                    message: format!("{origin} fails ({why}) and runs on: {}", refusal.message),
                    ..refusal
                };
                self.refused(key, object, generation, &refusal, guests)
                    .await;
                if !refusal.transient
                    && let Some(state) = self.states.lock().await.get_mut(key)
                {
                    state.rollback_failed = memo;
                }
                self.retry(key, spec, &refusal);
                false
            }
        }
    }

    /// When nothing runs for `key` and its rollback is on, runs the last good revision in place
    /// of the module the spec names (`bad`, `sha256:...`, when it was fetched), which `refusal`
    /// refused. The revision that ran last resumes (after a restart, say) with a Normal Event;
    /// an older one is a rollback, with a Warning Event.
    pub(super) async fn restore_idle(
        &self,
        key: &ControllerKey,
        object: &DynamicObject,
        spec: &ControllerSpec,
        bad: Option<&str>,
        refusal: &Refusal,
        guests: &dyn Guests,
    ) {
        let idle = self
            .states
            .lock()
            .await
            .get(key)
            .is_some_and(|s| s.applied.is_none());
        if !idle || !spec.rollback.enabled {
            return;
        }
        let generation = object.metadata.generation.unwrap_or_default();
        let restored = match self.restore(key, spec, generation, bad, guests).await {
            Ok(Some(restored)) => restored,
            Ok(None) => return,
            Err(failed) => {
                tracing::warn!(namespace = %key.0, name = %key.1, reason = failed.reason, message = %failed.message, "no earlier revision runs in place of a refused module");
                return;
            }
        };
        let what = bad.unwrap_or("the module the spec names");
        if restored.resumed {
            let note = format!(
                "{what} does not run ({}); module {} ran before and runs again as controller {}",
                refusal.reason, restored.origin, restored.name
            );
            self.event(object, false, "Loaded", "Load", &note).await;
        } else {
            guests.refused("RolledBack");
            let note = format!(
                "{what} does not run ({}); rolled back to {} as controller {}",
                refusal.reason, restored.origin, restored.name
            );
            self.event(object, true, "RolledBack", "Rollback", &note)
                .await;
        }
        tracing::warn!(namespace = %key.0, name = %key.1, what, reason = refusal.reason, to = %restored.origin, generation, "an earlier revision of a WasmController runs in place of its refused module");
    }

    /// Runs the last good revision for `key`, for the spec's `generation`, in place of the module
    /// `bad` (`sha256:...`; `None`: one that could not be fetched); what runs then, or `None`
    /// when shutdown has begun.
    pub(super) async fn restore(
        &self,
        key: &ControllerKey,
        spec: &ControllerSpec,
        generation: i64,
        bad: Option<&str>,
        guests: &dyn Guests,
    ) -> Result<Option<Restored>, Refusal> {
        let good = self
            .states
            .lock()
            .await
            .get(key)
            .and_then(|s| s.history.last_good(bad.unwrap_or_default()).cloned());
        let good = good.ok_or_else(|| Refusal {
            reason: "RollbackFailed",
            message: "no good revision that ran before it is recorded (see revisionHistoryLimit)"
                .into(),
            transient: false,
        })?;
        // Why the last good revision does not run, from the refusal `r` of `what` it was.
        let failed = |what: &str, r: Refusal| Refusal {
            reason: "RollbackFailed",
            message: format!(
                "its last good revision {} {what}: {}",
                good.digest, r.message
            ),
            transient: r.transient,
        };
        let origin = good
            .image
            .clone()
            .unwrap_or_else(|| good.module_digest.clone());
        let bytes = self
            .sources
            .revision_bytes(&good, spec, &key.0)
            .await
            .map_err(|r| failed("cannot be fetched", r))?;
        let created = self
            .latest
            .lock()
            .expect("objects lock")
            .get(key)
            .map(created)
            .unwrap_or_default();
        let (loaded, module, name) = guests
            .run(key, &created, origin.clone(), bytes, &spec.module)
            .await
            .map_err(|r| failed("does not load", r))?;
        if loaded == Loaded::Stopping {
            return Ok(None);
        }
        let tally = guests.tally(key);
        // The revision that ran last, before a restart or a pause: not a rollback.
        let last = good.replaced.is_none();
        let resumed = last || good.reason.as_deref() == Some(revisions::PAUSED);
        let applied = Applied {
            config: spec.module.clone(),
            module,
            name: name.clone(),
            image: good.image.clone().map(|image| (image, good.digest.clone())),
            generation,
        };
        let mut states = self.states.lock().await;
        let state = states.entry(key.clone()).or_default();
        if last {
            state.probation = resumed_probation(&state.history, tally.as_ref(), spec);
        } else {
            state
                .history
                .started(good, &Timestamp::now().to_string(), spec.history_limit);
            state.probation = None;
        }
        state.applied = Some(applied);
        Ok(Some(Restored {
            origin,
            name,
            resumed,
        }))
    }
}
