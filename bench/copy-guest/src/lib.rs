//! The benchmark's copy controller as a kubewasm guest: each source ConfigMap is applied as its
//! child ([`bench_copy_logic::child`]), owned by the source, with field manager
//! `kubewasm-copy`.
//!
//! The host elides applies the cache already shows, so a reconcile of an unchanged source
//! sends no write.

use bench_copy_logic::{SOURCE_SELECTOR, child};
use kubewasm_guest::prelude::*;
use kubewasm_guest::{apply, meta};

/// The core ConfigMap kind, the primary and the owned kind.
fn config_map() -> Gvk {
    Gvk::new("", "v1", "ConfigMap")
}

/// The copy controller.
pub struct Copy;

impl Controller for Copy {
    fn metadata() -> Metadata {
        Metadata::new(
            "copy",
            Selection::new(config_map()).with_label_selector(SOURCE_SELECTOR),
        )
        .owns(config_map())
        .max_concurrency(4)
    }

    fn reconcile(req: Request) -> Result<Action, ReconcileError> {
        // Gone or going: the garbage collector deletes the child it owns.
        let Some(source) = &req.object else {
            return Ok(Action::Done);
        };
        if meta::is_deleting(source) {
            return Ok(Action::Done);
        }
        apply(&child(source), ApplyOptions::default())?;
        Ok(Action::Done)
    }
}

kubewasm_guest::export_controller!(Copy);
