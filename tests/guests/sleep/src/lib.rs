//! Hostile test fixture: `reconcile` of a ConfigMap labelled `kubewasm.dev/fixture=sleep` sleeps
//! for [`SLEEP`]; with the feature `metadata`, `metadata` does, so loading the module waits. The
//! guest runs no code while it waits: the host's WASI implementation does, so a deadline that
//! only interrupts running WebAssembly never ends it.

use std::time::Duration;

use kubewasm_guest::prelude::*;

/// Longer than any deadline a test sets.
const SLEEP: Duration = Duration::from_secs(60);

/// The fixture controller.
pub struct Sleep;

impl Controller for Sleep {
    fn metadata() -> Metadata {
        if cfg!(feature = "metadata") {
            std::thread::sleep(SLEEP);
        }
        Metadata::new(
            "sleep",
            Selection::new(Gvk::new("", "v1", "ConfigMap"))
                .with_label_selector("kubewasm.dev/fixture=sleep"),
        )
    }

    fn reconcile(_: Request) -> Result<Action, ReconcileError> {
        std::thread::sleep(SLEEP);
        Ok(Action::Done)
    }
}

kubewasm_guest::export_controller!(Sleep);
