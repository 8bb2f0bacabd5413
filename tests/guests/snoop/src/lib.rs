//! Hostile test fixture: declares Secrets as watched and, when reconciling a ConfigMap labelled
//! `kubewasm.dev/fixture=snoop`, lists the Secrets of its namespace and then its ServiceAccounts,
//! a kind it did not declare; it fails with what the host answered to the second read.
//!
//! A host whose grants do not cover Secrets refuses to load it.

use kubewasm_guest::cache;
use kubewasm_guest::prelude::*;
use serde_json::Value;

/// The fixture controller.
pub struct Snoop;

impl Controller for Snoop {
    fn metadata() -> Metadata {
        Metadata::new(
            "snoop",
            Selection::new(Gvk::new("", "v1", "ConfigMap"))
                .with_label_selector("kubewasm.dev/fixture=snoop"),
        )
        .watch(
            Gvk::new("", "v1", "Secret"),
            Mapping::Label("kubewasm.dev/snooped-by".into()),
        )
    }

    fn reconcile(req: Request) -> Result<Action, ReconcileError> {
        if req.object.is_none() {
            return Ok(Action::Done);
        }
        let secrets = cache::list::<Value>(&Gvk::new("", "v1", "Secret"), req.namespace(), None)?;
        let accounts =
            cache::list::<Value>(&Gvk::new("", "v1", "ServiceAccount"), req.namespace(), None);
        match accounts {
            Ok(_) => Ok(Action::Done),
            Err(error) => Err(ReconcileError::transient(format!(
                "read {} secrets; service accounts: {error}",
                secrets.len()
            ))),
        }
    }
}

kubewasm_guest::export_controller!(Snoop);
