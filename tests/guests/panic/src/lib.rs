//! Hostile test fixture: `reconcile` of a ConfigMap labelled `kubewasm.dev/fixture=panic`
//! panics, unless the ConfigMap's `data.calm` is `"true"`: then it succeeds, so a test can
//! watch the guest recover.

use kubewasm_guest::prelude::*;

/// The fixture controller.
pub struct Panic;

impl Controller for Panic {
    fn metadata() -> Metadata {
        Metadata::new(
            "panic",
            Selection::new(Gvk::new("", "v1", "ConfigMap"))
                .with_label_selector("kubewasm.dev/fixture=panic"),
        )
    }

    fn reconcile(req: Request) -> Result<Action, ReconcileError> {
        let calm = req
            .object
            .as_ref()
            .is_none_or(|object| object["data"]["calm"] == "true");
        assert!(calm, "fixture panic while reconciling {}", req.name());
        Ok(Action::Done)
    }
}

kubewasm_guest::export_controller!(Panic);
