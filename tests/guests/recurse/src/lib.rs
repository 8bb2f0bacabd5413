//! Hostile test fixture: `reconcile` of a ConfigMap labelled `kubewasm.dev/fixture=recurse`
//! recurses until the stack is exhausted.

use kubewasm_guest::prelude::*;

/// The fixture controller.
pub struct Recurse;

impl Controller for Recurse {
    fn metadata() -> Metadata {
        Metadata::new(
            "recurse",
            Selection::new(Gvk::new("", "v1", "ConfigMap"))
                .with_label_selector("kubewasm.dev/fixture=recurse"),
        )
    }

    fn reconcile(_: Request) -> Result<Action, ReconcileError> {
        descend(0);
        Ok(Action::Done)
    }
}

/// Goes one level deeper with a frame the optimizer cannot elide; returns only at a depth no
/// stack reaches.
fn descend(depth: u64) -> u64 {
    if depth == u64::MAX {
        return 0;
    }
    let frame = std::hint::black_box([depth; 16]);
    descend(frame[1] + 1) + frame[0]
}

kubewasm_guest::export_controller!(Recurse);
