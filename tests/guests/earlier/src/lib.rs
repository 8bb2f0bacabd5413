//! Test fixture: a guest of contract 0.1.0, which the host still loads with that version's
//! rules. It reconciles PodSets labelled `kubewasm.dev/fixture=earlier`: each reconcile applies,
//! owned, a ConfigMap of the PodSet's name (0.1.0 adopts an existing one), then stamps the
//! PodSet's status with a `Heartbeat` condition (0.1.0 forces status applies). The ConfigMap's
//! `data.read` holds what 0.1.0's cache reads found: the PodSet's uid by `get`, and how many
//! PodSets of the fixture `list` found in its namespace.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

wit_bindgen::generate!({ path: "../../../wit/0.1.0", world: "controller" });

use exports::kubewasm::controller::guest::Guest;
use kubewasm::controller::cache;
use kubewasm::controller::types::{
    ControllerMetadata, Gvk, ObjectKey, Outcome, ReconcileError, Request, Selection,
};
use kubewasm::controller::writes::{self, ApplyOptions};

struct Earlier;

fn apply(object: Value, owned: bool) -> Result<(), ReconcileError> {
    let options = ApplyOptions { owned, force: true };
    writes::apply(&object.to_string(), options)
        .map(drop)
        .map_err(|e| ReconcileError::Transient(format!("apply: {e:?}")))
}

impl Guest for Earlier {
    fn metadata() -> ControllerMetadata {
        ControllerMetadata {
            name: "earlier".into(),
            primary: Selection {
                kind: Gvk {
                    group: "kubewasm.dev".into(),
                    version: "v1alpha1".into(),
                    kind: "PodSet".into(),
                },
                namespace: None,
                label_selector: Some("kubewasm.dev/fixture=earlier".into()),
            },
            owns: vec![Gvk {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
            }],
            watches: Vec::new(),
            finalizer: None,
            max_concurrency: 1,
            resync_seconds: None,
        }
    }

    fn reconcile(request: Request) -> Result<Outcome, ReconcileError> {
        if request.object.is_none() {
            return Ok(Outcome::Done);
        }
        let name = request.key.name;
        let podset = Gvk {
            group: "kubewasm.dev".into(),
            version: "v1alpha1".into(),
            kind: "PodSet".into(),
        };
        let namespace = request.key.namespace.as_deref();
        let read = |e| ReconcileError::Transient(format!("cache: {e:?}"));
        let got = cache::get(&podset, namespace, &name).map_err(read)?;
        let uid = got
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .and_then(|object| object["metadata"]["uid"].as_str().map(str::to_owned))
            .unwrap_or_default();
        let listed = cache::list(&podset, namespace, Some("kubewasm.dev/fixture=earlier"))
            .map_err(read)?
            .len();
        apply(
            json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name },
                    "data": { "from": "earlier", "read": format!("{uid} {listed}") } }),
            true,
        )?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let status = json!({
            "apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet",
            "metadata": { "name": name },
            "status": { "conditions": [{
                "type": "Heartbeat", "status": "True", "reason": "Reconciled",
                "message": now.as_secs().to_string(),
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }] },
        });
        writes::apply_status(&status.to_string())
            .map_err(|e| ReconcileError::Transient(format!("apply-status: {e:?}")))?;
        Ok(Outcome::Done)
    }

    fn finalize(_: Request) -> Result<Outcome, ReconcileError> {
        Ok(Outcome::Done)
    }

    fn map_keys(_: Gvk, _: String) -> Vec<ObjectKey> {
        Vec::new()
    }
}

// Native builds (`cargo test --workspace`) cannot link the component's export names.
#[cfg(target_arch = "wasm32")]
export!(Earlier);
