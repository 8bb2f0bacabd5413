//! The Kubernetes ReplicaSet controller rebuilt as a kubewasm guest.
//!
//! A `PodSet` (`kubewasm.dev/v1alpha1`) keeps `spec.replicas` pods built from `spec.template`
//! running: it adopts orphan pods matching `spec.selector`, creates missing pods, deletes surplus
//! ones (unscheduled, pending and unready pods first, then the newest) and reports
//! `status.replicas`, `status.readyReplicas` and a `ReplicaFailure` condition. The decisions are
//! made by the pure functions of [`logic`].

use std::collections::BTreeSet;

use kubewasm_guest::k8s_openapi::api::core::v1::Pod;
use kubewasm_guest::prelude::*;
use kubewasm_guest::{
    apply, apply_status, cache, delete, event, generate_name, log, meta, owner, patch_json,
};
use serde::Deserialize;
use serde_json::Value;

pub mod logic;

use logic::{Failure, PodSet, PodView};

/// The PodSet controller.
pub struct PodSetController;

impl Controller for PodSetController {
    fn metadata() -> Metadata {
        Metadata::new("podset", logic::podset_kind())
            .owns(Gvk::of::<Pod>())
            // Orphans have no owner to enqueue; `map_keys` finds the PodSets that would adopt
            // them, as the ReplicaSet controller does on pod events.
            .watch(Gvk::of::<Pod>(), Mapping::Guest)
            .max_concurrency(4)
    }

    fn map_keys(_kind: Gvk, pod: Value) -> Vec<ObjectKey> {
        // Controlled pods reach their PodSet through `owns`; deleting pods are not adopted.
        if owner::controller_ref(&pod).is_some() || meta::is_deleting(&pod) {
            return Vec::new();
        }
        match cache::list::<Value>(&logic::podset_kind(), meta::namespace(&pod), None) {
            Ok(podsets) => {
                let podsets: Vec<PodSet> = podsets
                    .iter()
                    .filter_map(|podset| PodSet::deserialize(podset).ok())
                    .collect();
                logic::adopters(&podsets, &meta::labels(&pod))
            }
            Err(error) => {
                log::warn("cannot list PodSets", &[("error", &error.to_string())]);
                Vec::new()
            }
        }
    }

    fn reconcile(req: Request) -> Result<Action, ReconcileError> {
        // Gone: the garbage collector deletes the pods it owned.
        let Some(podset) = req.object_as::<PodSet>()? else {
            return Ok(Action::Done);
        };
        if podset.metadata.deletion_timestamp.is_some() {
            return Ok(Action::Done);
        }
        let pod_kind = Gvk::of::<Pod>();
        let namespace = req.namespace();
        let pods = read_pods(&podset, namespace)?;

        let plan = match logic::plan(&podset, &pods) {
            Ok(plan) => plan,
            Err(invalid) => {
                let failure = Failure {
                    reason: "InvalidSpec",
                    message: invalid.to_string(),
                };
                let live = logic::controlled_pods(
                    podset.metadata.uid.as_deref().unwrap_or_default(),
                    &pods,
                );
                write_status(&podset, &logic::status(&podset, &live, 0, Some(&failure)))?;
                return Err(ReconcileError::permanent(invalid));
            }
        };

        for pod in &plan.adopt {
            patch_json(
                &pod_kind,
                namespace,
                &pod.name,
                &logic::adoption_patch(&podset, pod),
            )
            .map_err(|e| ReconcileError::from(e).context(format!("adopting pod {}", pod.name)))?;
            log::info("adopted pod", &[("pod", &pod.name)]);
        }

        let mut failure: Option<(Failure, kubewasm_guest::Error)> = None;
        let mut taken: BTreeSet<String> = pods.iter().map(|pod| pod.name.clone()).collect();
        let base = format!("{}-", req.name());
        let mut created = 0;
        for _ in 0..plan.create {
            let name = free_name(&base, namespace, &mut taken)?;
            match apply(
                &logic::pod_manifest(&podset, &name),
                ApplyOptions::default(),
            ) {
                Ok(_) => {
                    created += 1;
                    record(
                        &req,
                        EventType::Normal,
                        "SuccessfulCreate",
                        "Create",
                        &format!("Created pod: {name}"),
                    );
                }
                Err(error) => {
                    let message = format!("Error creating pod {name}: {error}");
                    record(&req, EventType::Warning, "FailedCreate", "Create", &message);
                    failure = Some((
                        Failure {
                            reason: "FailedCreate",
                            message,
                        },
                        error,
                    ));
                    // Like the ReplicaSet controller's slow start: stop at the first failure.
                    break;
                }
            }
        }

        let mut deleted = BTreeSet::new();
        for pod in &plan.delete {
            match delete(
                &pod_kind,
                namespace,
                &pod.name,
                Preconditions::uid(&pod.uid),
            )
            .ignore_not_found()
            {
                Ok(_) => {
                    deleted.insert(pod.uid.clone());
                    record(
                        &req,
                        EventType::Normal,
                        "SuccessfulDelete",
                        "Delete",
                        &format!("Deleted pod: {}", pod.name),
                    );
                }
                Err(error) => {
                    let message = format!("Error deleting pod {}: {error}", pod.name);
                    record(&req, EventType::Warning, "FailedDelete", "Delete", &message);
                    failure.get_or_insert((
                        Failure {
                            reason: "FailedDelete",
                            message,
                        },
                        error,
                    ));
                }
            }
        }

        let live: Vec<PodView> = plan
            .owned
            .into_iter()
            .filter(|pod| !deleted.contains(&pod.uid))
            .collect();
        let status = logic::status(&podset, &live, created, failure.as_ref().map(|(f, _)| f));
        write_status(&podset, &status)?;
        match failure {
            Some((_, error)) => Err(error.into()),
            None => Ok(Action::Done),
        }
    }
}

/// The pods the PodSet controls and the orphans its selector may adopt, in name order: read
/// from the host's indexes (the selector's through one of its equalities), so a reconcile
/// costs its own pods, not its namespace. A selector with no string form (it fails validation
/// in the plan anyway) reads the namespace; one with no equality is scanned by the host.
fn read_pods(podset: &PodSet, namespace: Option<&str>) -> Result<Vec<PodView>, ReconcileError> {
    let pod_kind = Gvk::of::<Pod>();
    let uid = podset.metadata.uid.as_deref().unwrap_or_default();
    let mut pods: Vec<Value> = cache::list_controlled(&pod_kind, namespace, uid)?;
    let selector = podset.spec.selector.to_query().ok();
    pods.extend(cache::list::<Value>(
        &pod_kind,
        namespace,
        selector.as_deref(),
    )?);
    let mut pods: Vec<PodView> = pods.iter().filter_map(PodView::from_value).collect();
    pods.sort_by(|a, b| a.name.cmp(&b.name));
    pods.dedup_by(|a, b| a.name == b.name);
    Ok(pods)
}

/// A generated pod name that no pod has: neither one read for this reconcile nor any other in
/// the cache, since an apply to a taken name would change that pod.
fn free_name(
    base: &str,
    namespace: Option<&str>,
    taken: &mut BTreeSet<String>,
) -> Result<String, ReconcileError> {
    loop {
        let name = generate_name(base);
        if taken.insert(name.clone())
            && cache::get::<Value>(&Gvk::of::<Pod>(), namespace, &name)?.is_none()
        {
            return Ok(name);
        }
    }
}

fn write_status(podset: &PodSet, status: &logic::PodSetStatus) -> Result<(), ReconcileError> {
    apply_status(&logic::status_object(podset, status))
        .map(drop)
        .map_err(|e| ReconcileError::from(e).context("updating status"))
}

/// Records an event about the PodSet; events are best effort, so failures are only logged.
fn record(req: &Request, event_type: EventType, reason: &str, action: &str, note: &str) {
    if let Err(error) = event(
        &logic::podset_kind(),
        &req.key,
        event_type,
        reason,
        action,
        note,
    ) {
        log::debug(
            "could not record event",
            &[("reason", reason), ("error", &error.to_string())],
        );
    }
}

kubewasm_guest::export_controller!(PodSetController);
