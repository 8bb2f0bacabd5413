//! One reconcile: the source's child, with a controller owner reference to the source, applied
//! by server-side apply with force and field manager [`FIELD_MANAGER`].

use std::sync::Arc;
use std::time::Duration;

use bench_copy_logic::{child, child_name};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

/// The field manager of every apply.
pub const FIELD_MANAGER: &str = "bench-native";

/// How long a failed reconcile waits before it is retried.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// What every reconcile shares.
pub struct Context {
    /// ConfigMaps in the reconciled namespace.
    pub api: Api<ConfigMap>,
    /// What a successful reconcile returns: a requeue after the resync period, or none.
    pub on_success: Action,
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The source has no uid to own the child by.
    #[error("source {0} has no uid")]
    NoUid(String),
    /// The source could not be turned into JSON.
    #[error("source {0}: {1}")]
    Json(String, serde_json::Error),
    /// The API server refused the apply or could not be reached.
    #[error("applying the child of {0}: {1}")]
    Apply(String, kube::Error),
}

/// Applies the child of `source`; a source being deleted is left to the garbage collector.
pub async fn reconcile(source: Arc<ConfigMap>, context: Arc<Context>) -> Result<Action, Error> {
    if source.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let name = source.name_any();
    let mut owner = source
        .controller_owner_ref(&())
        .ok_or_else(|| Error::NoUid(name.clone()))?;
    owner.block_owner_deletion = Some(true);
    let source_json =
        serde_json::to_value(source.as_ref()).map_err(|e| Error::Json(name.clone(), e))?;
    let mut child = child(&source_json);
    child["metadata"]["ownerReferences"] = json!([owner]);
    context
        .api
        .patch(
            &child_name(&name),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&child),
        )
        .await
        .map_err(|e| Error::Apply(name, e))?;
    Ok(context.on_success.clone())
}

/// Retries a failed reconcile after [`RETRY_AFTER`].
pub fn error_policy(_source: Arc<ConfigMap>, _error: &Error, _context: Arc<Context>) -> Action {
    Action::requeue(RETRY_AFTER)
}
