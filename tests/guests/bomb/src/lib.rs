//! Hostile test fixture: `reconcile` of a ConfigMap labelled `kubewasm.dev/fixture=bomb` keeps
//! allocating and touching mebibytes until its memory cannot grow any more.

use kubewasm_guest::prelude::*;

/// The fixture controller.
pub struct Bomb;

impl Controller for Bomb {
    fn metadata() -> Metadata {
        Metadata::new(
            "bomb",
            Selection::new(Gvk::new("", "v1", "ConfigMap"))
                .with_label_selector("kubewasm.dev/fixture=bomb"),
        )
    }

    fn reconcile(_: Request) -> Result<Action, ReconcileError> {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(vec![1; 1 << 20]);
            std::hint::black_box(&hoard);
        }
    }
}

kubewasm_guest::export_controller!(Bomb);
