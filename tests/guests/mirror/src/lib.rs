//! Test fixture: for every ConfigMap labelled `kubewasm.dev/fixture=mirror`, keeps an owned
//! ConfigMap `<name>-mirror` whose `data.value` equals the source's.
//!
//! The mirror also carries `data.version`: `v1`, or `v2` and `v3` when built with those
//! features, so tests can tell which build reconciled; `v3` also declares a higher concurrency,
//! a different declaration.
//!
//! Built with the `fails` feature every reconcile fails, as a bad release of a controller might.
//!
//! Built with the `events` feature it records the same `Mirrored` event about the source on
//! every reconcile, as a guest following the sample-controller does.
//!
//! The apply does not force conflicts, so while another field manager owns `data.value` of the
//! mirror the API server answers 409 Conflict, and the reconcile fails as a transient error. It
//! adopts a mirror that someone else created and nothing controls.

use kubewasm_guest::prelude::*;
use kubewasm_guest::{apply, event};
use serde_json::json;

/// Which build this is.
const VERSION: &str = if cfg!(feature = "v3") {
    "v3"
} else if cfg!(feature = "v2") {
    "v2"
} else {
    "v1"
};

/// The fixture controller.
pub struct Mirror;

impl Controller for Mirror {
    fn metadata() -> Metadata {
        let config_map = Gvk::new("", "v1", "ConfigMap");
        Metadata::new(
            "mirror",
            Selection::new(config_map.clone()).with_label_selector("kubewasm.dev/fixture=mirror"),
        )
        .owns(config_map)
        .max_concurrency(if cfg!(feature = "v3") { 2 } else { 1 })
    }

    fn reconcile(req: Request) -> Result<Action, ReconcileError> {
        let Some(source) = &req.object else {
            return Ok(Action::Done);
        };
        if cfg!(feature = "fails") {
            return Err(ReconcileError::transient(
                "this build fails every reconcile",
            ));
        }
        let value = source["data"]["value"].as_str().unwrap_or_default();
        let mirror = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": format!("{}-mirror", req.name()) },
            "data": { "value": value, "version": VERSION },
        });
        let options = ApplyOptions {
            force: false,
            ..ApplyOptions::default()
        }
        .adopt();
        apply(&mirror, options)
            .map_err(|e| ReconcileError::from(e).context("applying the mirror"))?;
        if cfg!(feature = "events") {
            event(
                &Gvk::new("", "v1", "ConfigMap"),
                &req.key,
                EventType::Normal,
                "Mirrored",
                "Mirror",
                "the mirror is up to date",
            )
            .map_err(|e| ReconcileError::from(e).context("recording the event"))?;
        }
        Ok(Action::Done)
    }
}

kubewasm_guest::export_controller!(Mirror);
