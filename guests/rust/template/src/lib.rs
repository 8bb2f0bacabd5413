//! A minimal kubewasm controller guest. It reconciles ConfigMaps labelled
//! `kubewasm.dev/template=true` and only logs what it sees; replace the body of `reconcile`
//! with your own logic.

use kubewasm_guest::prelude::*;
use kubewasm_guest::{log, meta};

/// The controller; all logic lives in its [`Controller`] impl.
pub struct Template;

impl Controller for Template {
    fn metadata() -> Metadata {
        Metadata::new(
            "template",
            Selection::new(Gvk::new("", "v1", "ConfigMap"))
                .with_label_selector("kubewasm.dev/template=true"),
        )
        .max_concurrency(2)
    }

    fn reconcile(req: Request) -> Result<Action, ReconcileError> {
        let Some(object) = &req.object else {
            // Deleted: owned objects are garbage-collected by Kubernetes.
            return Ok(Action::Done);
        };
        let keys = object
            .get("data")
            .and_then(serde_json::Value::as_object)
            .map_or(0, serde_json::Map::len)
            .to_string();
        log::info(
            "reconciled",
            &[
                ("key", &req.key.to_string()),
                (
                    "resourceVersion",
                    meta::resource_version(object).unwrap_or(""),
                ),
                ("dataKeys", &keys),
            ],
        );
        Ok(Action::Done)
    }
}

kubewasm_guest::export_controller!(Template);
