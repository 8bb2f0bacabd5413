//! Test fixture: a cluster-scoped `Tenant` (`kubewasm.dev/v1`, `tests/fixtures/tenant-crd.yaml`)
//! owns a ConfigMap `tenant-<name>` in each namespace of its `spec.namespaces`, holding its
//! `spec.value`. A change to one of them must reach the Tenant, whose key has no namespace.

use kubewasm_guest::apply;
use kubewasm_guest::prelude::*;
use serde_json::json;

/// The fixture controller.
pub struct Tenant;

impl Controller for Tenant {
    fn metadata() -> Metadata {
        Metadata::new(
            "tenant",
            Selection::new(Gvk::new("kubewasm.dev", "v1", "Tenant")),
        )
        .owns(Gvk::new("", "v1", "ConfigMap"))
    }

    fn reconcile(req: Request) -> Result<Action, ReconcileError> {
        let Some(tenant) = &req.object else {
            return Ok(Action::Done);
        };
        let value = tenant["spec"]["value"].as_str().unwrap_or_default();
        let namespaces = tenant["spec"]["namespaces"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for namespace in namespaces.iter().filter_map(|n| n.as_str()) {
            let child = json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": { "name": format!("tenant-{}", req.name()), "namespace": namespace },
                "data": { "value": value },
            });
            apply(&child, ApplyOptions::default())
                .map_err(|e| ReconcileError::from(e).context("applying a tenant's ConfigMap"))?;
        }
        Ok(Action::Done)
    }
}

kubewasm_guest::export_controller!(Tenant);
