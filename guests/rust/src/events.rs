//! Kubernetes Events about objects.

use crate::bindings::kubewasm::controller::events as wit;
pub use crate::bindings::kubewasm::controller::events::EventType;
use crate::{Gvk, ObjectKey, Result};

/// Records an event about the object `key` of `kind` (its uid is filled in from the cache).
///
/// `reason` is short CamelCase (`SuccessfulCreate`), `action` what the controller did
/// (`Create`), `note` human-readable text. Events are best effort: repeated ones may be merged
/// or dropped, so callers usually ignore the result.
pub fn event(
    kind: &Gvk,
    key: &ObjectKey,
    event_type: EventType,
    reason: &str,
    action: &str,
    note: &str,
) -> Result<()> {
    Ok(wit::record_event(&wit::Event {
        regarding_kind: kind.clone(),
        regarding_namespace: key.namespace.clone(),
        regarding_name: key.name.clone(),
        event_type,
        reason: reason.to_owned(),
        action: action.to_owned(),
        note: note.to_owned(),
    })?)
}
