//! Hostile test fixture: `reconcile` of a ConfigMap labelled `kubewasm.dev/fixture=trap`
//! executes the `unreachable` instruction.

use kubewasm_guest::prelude::*;

/// The fixture controller.
pub struct Trap;

impl Controller for Trap {
    fn metadata() -> Metadata {
        Metadata::new(
            "trap",
            Selection::new(Gvk::new("", "v1", "ConfigMap"))
                .with_label_selector("kubewasm.dev/fixture=trap"),
        )
    }

    fn reconcile(_: Request) -> Result<Action, ReconcileError> {
        #[cfg(target_arch = "wasm32")]
        core::arch::wasm32::unreachable();
        #[cfg(not(target_arch = "wasm32"))]
        std::process::abort();
    }
}

kubewasm_guest::export_controller!(Trap);
