//! Hostile test fixture: `reconcile` of a ConfigMap labelled `kubewasm.dev/fixture=chatty`
//! writes [`LINES`] lines to stdout and as many through the `log` import, far beyond what the
//! host forwards, then succeeds and asks to run again a second later.

use std::time::Duration;

use kubewasm_guest::prelude::*;

/// Lines written to each of stdout and the log per reconcile.
pub const LINES: u32 = 5_000;

/// The fixture controller.
pub struct Chatty;

impl Controller for Chatty {
    fn metadata() -> Metadata {
        Metadata::new(
            "chatty",
            Selection::new(Gvk::new("", "v1", "ConfigMap"))
                .with_label_selector("kubewasm.dev/fixture=chatty"),
        )
    }

    fn reconcile(req: Request) -> Result<Action, ReconcileError> {
        for line in 0..LINES {
            println!("chatty stdout line {line} about {}", req.name());
            kubewasm_guest::log::info("chatty log line", &[("line", &line.to_string())]);
        }
        Ok(Action::RequeueAfter(Duration::from_secs(1)))
    }
}

kubewasm_guest::export_controller!(Chatty);
