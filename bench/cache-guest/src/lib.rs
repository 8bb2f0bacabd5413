//! The benchmark's cache-only guest: the host keeps every ConfigMap and Pod of the module's
//! namespaces in its informer caches, and the guest reconciles nothing.
//!
//! Its primary is ConfigMaps labelled `bench.kubewasm.dev/role=cache-primary`, which the
//! benchmark never creates; it owns ConfigMaps and Pods, so the host watches both kinds
//! without a selector. The benchmark's objects have no owner, so no change of theirs queues a
//! key.

use kubewasm_guest::prelude::*;

/// The label selector of primaries no benchmark object carries.
pub const PRIMARY_SELECTOR: &str = "bench.kubewasm.dev/role=cache-primary";

/// The cache-only controller.
pub struct Cache;

impl Controller for Cache {
    fn metadata() -> Metadata {
        Metadata::new(
            "cache",
            Selection::new(Gvk::new("", "v1", "ConfigMap")).with_label_selector(PRIMARY_SELECTOR),
        )
        .owns(Gvk::new("", "v1", "ConfigMap"))
        .owns(Gvk::new("", "v1", "Pod"))
    }

    fn reconcile(_: Request) -> Result<Action, ReconcileError> {
        Ok(Action::Done)
    }
}

kubewasm_guest::export_controller!(Cache);
