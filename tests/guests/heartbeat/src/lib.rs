//! Test fixture: reconciles PodSets labelled `kubewasm.dev/fixture=heartbeat`. Every reconcile
//! applies, owned, a ConfigMap of the PodSet's name holding its generation, then stamps the
//! PodSet's status with a `Heartbeat` condition whose message is the time in nanoseconds, so
//! every reconcile changes the status.
//!
//! It reconciles an update only if it changes the generation or the annotations, so its own
//! status writes do not enqueue the PodSet again; with the feature `every-update` it reconciles
//! every update, and its status writes loop.
//!
//! Annotations of the PodSet switch what it asks the host for: `kubewasm.dev/adopt: "true"` takes
//! over an existing ConfigMap that nothing controls; `kubewasm.dev/force-status: "true"` forces
//! the status apply. A ConfigMap it may not take over is reported with a Warning event
//! `ErrResourceExists`, as Kubernetes' sample-controller does, and fails the reconcile.

use std::time::{SystemTime, UNIX_EPOCH};

use kubewasm_guest::prelude::*;
use kubewasm_guest::{apply, apply_status_with, event, meta};
use serde_json::{Value, json};

/// The fixture controller.
pub struct Heartbeat;

fn podset() -> Gvk {
    Gvk::new("kubewasm.dev", "v1alpha1", "PodSet")
}

fn annotated(object: &Value, annotation: &str) -> bool {
    object["metadata"]["annotations"][annotation] == "true"
}

impl Controller for Heartbeat {
    fn metadata() -> Metadata {
        let on = if cfg!(feature = "every-update") {
            Changes::ANY
        } else {
            Changes::GENERATION | Changes::ANNOTATIONS
        };
        Metadata::new(
            "heartbeat",
            Selection::new(podset()).with_label_selector("kubewasm.dev/fixture=heartbeat"),
        )
        .owns(Gvk::new("", "v1", "ConfigMap"))
        .reconcile_on(on)
    }

    fn reconcile(req: Request) -> Result<Action, ReconcileError> {
        let Some(set) = &req.object else {
            return Ok(Action::Done);
        };
        let mut options = ApplyOptions::default();
        if annotated(set, "kubewasm.dev/adopt") {
            options = options.adopt();
        }
        let config_map = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": req.name() },
            "data": { "generation": meta::generation(set).unwrap_or_default().to_string() },
        });
        if let Err(error) = apply(&config_map, options) {
            if error.is_already_exists() {
                let _ = event(
                    &podset(),
                    &req.key,
                    EventType::Warning,
                    "ErrResourceExists",
                    "Apply",
                    &error.to_string(),
                );
            }
            return Err(ReconcileError::from(error).context("applying the ConfigMap"));
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let status = json!({
            "apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet",
            "metadata": { "name": req.name() },
            "status": { "conditions": [{
                "type": "Heartbeat", "status": "True", "reason": "Reconciled",
                "message": now.as_nanos().to_string(),
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }] },
        });
        let options = if annotated(set, "kubewasm.dev/force-status") {
            StatusOptions::forced()
        } else {
            StatusOptions::default()
        };
        apply_status_with(&status, options)
            .map_err(|e| ReconcileError::from(e).context("stamping the status"))?;
        Ok(Action::Done)
    }
}

kubewasm_guest::export_controller!(Heartbeat);
