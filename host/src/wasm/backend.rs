//! What a guest's host calls are executed against, once they passed the permission checks.
//!
//! The host runs guests against the cluster ([`crate::control::apply::ClusterBackend`]); other
//! implementations can run the same guest against fixtures.

use std::sync::Arc;

use async_trait::async_trait;
use kube::api::GroupVersionKind;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::cluster::selector::LabelSelector;
use crate::wasm::bindings::kubewasm::controller::log::Level;

tokio::task_local! {
    /// Around a backend call made for a guest: cancelled once the guest's call has ended (at
    /// its deadline, say), after which a write is no longer sent again.
    pub static CALLER: CancellationToken;
}

/// Whether the guest call that a backend call runs for has ended; `false` outside one.
pub fn caller_gone() -> bool {
    CALLER
        .try_with(CancellationToken::is_cancelled)
        .unwrap_or(false)
}

/// Why a host call failed, as the guest sees it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The API server refused the request.
    #[error("API server answered {code} {reason}: {message}")]
    Api {
        /// HTTP status code.
        code: u16,
        /// Machine-readable reason, e.g. `Conflict`.
        reason: String,
        /// Human-readable message.
        message: String,
    },
    /// The guest may not do this.
    #[error("denied: {0}")]
    Denied(String),
    /// The request is malformed.
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The API server could not be reached in time.
    #[error("unavailable: {0}")]
    Unavailable(String),
}

impl CallError {
    /// Whether the request got no answer that says it did not take effect: the API server
    /// was not reached in time, or failed (a 5xx), so it may have.
    pub fn unanswered(&self) -> bool {
        match self {
            CallError::Unavailable(_) => true,
            CallError::Api { code, .. } => *code >= 500,
            CallError::Denied(_) | CallError::Invalid(_) => false,
        }
    }
}

impl From<kube::Error> for CallError {
    fn from(error: kube::Error) -> Self {
        match error {
            kube::Error::Api(status) => CallError::Api {
                code: status.code,
                reason: status.reason.clone(),
                message: status.message.clone(),
            },
            other => CallError::Unavailable(other.to_string()),
        }
    }
}

/// The object a reconcile is about: the owner of what it applies with `owned`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// Kind of the primary object.
    pub kind: GroupVersionKind,
    /// Namespace of the primary object; `None` when cluster-scoped.
    pub namespace: Option<String>,
    /// Name of the primary object.
    pub name: String,
    /// Uid of the primary object, when it exists.
    pub uid: Option<String>,
    /// Whether the primary object is being deleted.
    pub deleting: bool,
}

/// A server-side apply asked for by a guest, already checked and completed by the host.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyRequest {
    /// Kind of the object.
    pub kind: GroupVersionKind,
    /// Namespace of the object.
    pub namespace: Option<String>,
    /// Name of the object.
    pub name: String,
    /// The full intent, including the owner reference the host added.
    pub object: Value,
    /// Apply to the `status` subresource.
    pub status: bool,
    /// Take over conflicting fields.
    pub force: bool,
}

/// A patch asked for by a guest.
#[derive(Debug, Clone, PartialEq)]
pub struct PatchRequest {
    /// Kind of the object.
    pub kind: GroupVersionKind,
    /// Namespace of the object.
    pub namespace: Option<String>,
    /// Name of the object.
    pub name: String,
    /// The patch document.
    pub patch: Value,
    /// `true` for an RFC 6902 JSON patch, `false` for an RFC 7386 merge patch.
    pub json_patch: bool,
}

/// A delete asked for by a guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteRequest {
    /// Kind of the object.
    pub kind: GroupVersionKind,
    /// Namespace of the object.
    pub namespace: Option<String>,
    /// Name of the object.
    pub name: String,
    /// Only delete the object with this uid.
    pub uid: Option<String>,
    /// Only delete the object at this resourceVersion.
    pub resource_version: Option<String>,
}

/// An event asked for by a guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRequest {
    /// Kind of the object the event is about.
    pub kind: GroupVersionKind,
    /// Namespace of that object.
    pub namespace: Option<String>,
    /// Name of that object.
    pub name: String,
    /// `true` for a warning, `false` for a normal event.
    pub warning: bool,
    /// CamelCase reason.
    pub reason: String,
    /// What the controller did.
    pub action: String,
    /// Human-readable text.
    pub note: String,
}

/// A line a guest logged through the `log` import, what it wrote to stdout or stderr (at
/// [`Level::Info`], with a `stream` field), or the host's note that its log output was cut at
/// the call's limit (at [`Level::Warn`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Severity.
    pub level: Level,
    /// The message.
    pub message: String,
    /// Key/value fields, in the order the guest gave them.
    pub fields: Vec<(String, String)>,
}

/// Executes checked host calls for one guest.
#[async_trait]
pub trait Backend: Send + Sync {
    /// The cached object, serialized, or `None`.
    fn get(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<str>>, CallError>;

    /// Cached objects of a kind, ordered by namespace then name.
    fn list(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        selector: Option<&LabelSelector>,
    ) -> Result<Vec<Arc<str>>, CallError>;

    /// Cached objects of a kind whose controller reference has `uid`, ordered by namespace then
    /// name.
    fn list_controlled(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        uid: &str,
    ) -> Result<Vec<Arc<str>>, CallError>;

    /// Server-side apply; returns the object afterwards.
    async fn apply(&self, request: ApplyRequest) -> Result<String, CallError>;

    /// Patch; returns the object afterwards.
    async fn patch(&self, request: PatchRequest) -> Result<String, CallError>;

    /// Delete.
    async fn delete(&self, request: DeleteRequest) -> Result<(), CallError>;

    /// Record an event.
    async fn event(&self, request: EventRequest) -> Result<(), CallError>;

    /// Whether `kind` is known to be cluster-scoped; `false` when it is namespaced or unknown.
    /// Permissions of a cluster-scoped kind are checked for all namespaces, whatever namespace a
    /// call names.
    fn is_cluster_scoped(&self, _kind: &GroupVersionKind) -> bool {
        false
    }

    /// Receives every line the guest logs, besides the host's own log; ignores it by default.
    fn log(&self, _line: LogLine) {}
}
