//! Test fixture: a guest of contract 0.2.0, which lacks `list-controlled` and links against the
//! current imports as it is. It reconciles ConfigMaps labelled `kubewasm.dev/fixture=previous`:
//! each reconcile lists them in its namespace through the cache and writes how many it found
//! into the ConfigMap's `data.listed`.

use serde_json::json;

wit_bindgen::generate!({ path: "../../../wit/0.2.0", world: "controller" });

use exports::kubewasm::controller::guest::Guest;
use kubewasm::controller::cache;
use kubewasm::controller::types::{
    Changes, ControllerMetadata, Gvk, ObjectKey, Outcome, ReconcileError, Request, Selection,
};
use kubewasm::controller::writes::{self, ApplyOptions};

struct Previous;

const SELECTOR: &str = "kubewasm.dev/fixture=previous";

fn config_map() -> Gvk {
    Gvk {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
    }
}

impl Guest for Previous {
    fn metadata() -> ControllerMetadata {
        ControllerMetadata {
            name: "previous".into(),
            primary: Selection {
                kind: config_map(),
                namespace: None,
                label_selector: Some(SELECTOR.into()),
            },
            owns: Vec::new(),
            watches: Vec::new(),
            finalizer: None,
            max_concurrency: 1,
            resync_seconds: None,
            reconcile_on: Changes::GENERATION | Changes::LABELS,
        }
    }

    fn reconcile(request: Request) -> Result<Outcome, ReconcileError> {
        if request.object.is_none() {
            return Ok(Outcome::Done);
        }
        let namespace = request.key.namespace.as_deref();
        let listed = cache::list(&config_map(), namespace, Some(SELECTOR))
            .map_err(|e| ReconcileError::Transient(format!("cache: {e:?}")))?
            .len();
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": request.key.name },
            "data": { "listed": listed.to_string() },
        });
        let options = ApplyOptions {
            owned: false,
            force: true,
            adopt: false,
        };
        writes::apply(&object.to_string(), options)
            .map(drop)
            .map_err(|e| ReconcileError::Transient(format!("apply: {e:?}")))?;
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
export!(Previous);
