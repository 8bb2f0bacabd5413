//! Hostile test fixture: `reconcile` of a ConfigMap labelled `kubewasm.dev/fixture=spin` loops
//! forever without calling the host, so only the deadline ends it.

use kubewasm_guest::prelude::*;

/// The fixture controller.
pub struct Spin;

impl Controller for Spin {
    fn metadata() -> Metadata {
        Metadata::new(
            "spin",
            Selection::new(Gvk::new("", "v1", "ConfigMap"))
                .with_label_selector("kubewasm.dev/fixture=spin"),
        )
    }

    fn reconcile(_: Request) -> Result<Action, ReconcileError> {
        let mut turns: u64 = 0;
        loop {
            turns = std::hint::black_box(turns.wrapping_add(1));
        }
    }
}

kubewasm_guest::export_controller!(Spin);
