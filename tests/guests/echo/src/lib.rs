//! Test fixture: for every ConfigMap labelled `kubewasm.dev/fixture=echo`, keeps an owned
//! ConfigMap `<name>-echo` whose data holds the source as the guest read it, three ways: the
//! request's object (`request`), `cache::get` (`get`) and its item of `cache::list` (`list`),
//! each as JSON text.
//!
//! Built with the feature `b` it is a second guest of the same selections, named `echo-b` and
//! writing `<name>-echo-b`, so two guests can read one kind side by side.

use kubewasm_guest::prelude::*;
use kubewasm_guest::{apply, cache};
use serde_json::{Value, json};

/// The guest's name, and the suffix of the ConfigMaps it writes.
const NAME: &str = if cfg!(feature = "b") {
    "echo-b"
} else {
    "echo"
};

/// The fixture controller.
pub struct Echo;

impl Controller for Echo {
    fn metadata() -> Metadata {
        let config_map = Gvk::new("", "v1", "ConfigMap");
        Metadata::new(
            NAME,
            Selection::new(config_map.clone()).with_label_selector("kubewasm.dev/fixture=echo"),
        )
        .owns(config_map)
    }

    fn reconcile(req: Request) -> Result<Action, ReconcileError> {
        let Some(source) = &req.object else {
            return Ok(Action::Done);
        };
        let kind = Gvk::new("", "v1", "ConfigMap");
        let got = cache::get::<Value>(&kind, req.namespace(), req.name())?;
        let listed =
            cache::list::<Value>(&kind, req.namespace(), Some("kubewasm.dev/fixture=echo"))?
                .into_iter()
                .find(|o| o["metadata"]["name"] == req.name());
        let echo = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": format!("{}-{NAME}", req.name()) },
            "data": {
                "request": source.to_string(),
                "get": got.unwrap_or_default().to_string(),
                "list": listed.unwrap_or_default().to_string(),
            },
        });
        apply(&echo, ApplyOptions::default())
            .map_err(|e| ReconcileError::from(e).context("applying the echo"))?;
        Ok(Action::Done)
    }
}

kubewasm_guest::export_controller!(Echo);
