//! Test fixture: keeps the finalizer `kubewasm.dev/stamp` on every ConfigMap labelled
//! `kubewasm.dev/fixture=stamp`, and in `finalize` stamps the ConfigMap itself with an annotation
//! holding the time, as a controller recording its clean-up in its own object does. Every
//! `finalize` changes the object, so the host must remove the finalizer from the object as the
//! guest left it, not as it was before `finalize`.
//!
//! With the feature `stuck`, `finalize` fails instead, as a clean-up blocked by something outside
//! the guest does: the object stays Terminating. With the feature `renamed`, its finalizer is
//! `kubewasm.dev/stamp-renamed`, as in a new version of a controller that renamed it.

use std::time::{SystemTime, UNIX_EPOCH};

use kubewasm_guest::patch_merge;
use kubewasm_guest::prelude::*;
use serde_json::json;

/// The finalizer it keeps on its objects.
const FINALIZER: &str = if cfg!(feature = "renamed") {
    "kubewasm.dev/stamp-renamed"
} else {
    "kubewasm.dev/stamp"
};

/// The fixture controller.
pub struct Stamp;

impl Controller for Stamp {
    fn metadata() -> Metadata {
        Metadata::new(
            "stamp",
            Selection::new(Gvk::new("", "v1", "ConfigMap"))
                .with_label_selector("kubewasm.dev/fixture=stamp"),
        )
        .finalizer(FINALIZER)
    }

    fn reconcile(_: Request) -> Result<Action, ReconcileError> {
        Ok(Action::Done)
    }

    fn finalize(req: Request) -> Result<Action, ReconcileError> {
        if cfg!(feature = "stuck") {
            return Err(ReconcileError::transient("the clean-up is blocked"));
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let stamp = json!({ "metadata": { "annotations": { "kubewasm.dev/finalized-at": now.to_string() } } });
        patch_merge(
            &Gvk::new("", "v1", "ConfigMap"),
            req.namespace(),
            req.name(),
            &stamp,
        )
        .map_err(|e| ReconcileError::from(e).context("stamping the object"))?;
        Ok(Action::Done)
    }
}

kubewasm_guest::export_controller!(Stamp);
