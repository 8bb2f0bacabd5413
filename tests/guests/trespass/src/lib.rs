//! Hostile test fixture: `reconcile` of a ConfigMap labelled `kubewasm.dev/fixture=trespass`
//! applies a Secret, a kind it did not declare, and a ConfigMap of [`OVERSIZED`] bytes, larger
//! than any write the host accepts by default; it fails with what the host answered to each.

use kubewasm_guest::prelude::*;
use serde_json::json;

/// Bytes of the oversized ConfigMap's `data.value`.
pub const OVERSIZED: usize = 2 << 20;

/// The fixture controller.
pub struct Trespass;

impl Controller for Trespass {
    fn metadata() -> Metadata {
        Metadata::new(
            "trespass",
            Selection::new(Gvk::new("", "v1", "ConfigMap"))
                .with_label_selector("kubewasm.dev/fixture=trespass"),
        )
    }

    fn reconcile(req: Request) -> Result<Action, ReconcileError> {
        if req.object.is_none() {
            return Ok(Action::Done);
        }
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": format!("{}-loot", req.name()) },
            "stringData": { "token": "stolen" },
        });
        let oversized = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": format!("{}-huge", req.name()) },
            "data": { "value": "x".repeat(OVERSIZED) },
        });
        let outcome = |result: kubewasm_guest::Result<serde_json::Value>| match result {
            Ok(_) => "applied".to_owned(),
            Err(error) => error.to_string(),
        };
        let secret = outcome(kubewasm_guest::apply(&secret, ApplyOptions::not_owned()));
        let oversized = outcome(kubewasm_guest::apply(&oversized, ApplyOptions::not_owned()));
        Err(ReconcileError::transient(format!(
            "secret: {secret}; oversized ConfigMap: {oversized}"
        )))
    }
}

kubewasm_guest::export_controller!(Trespass);
