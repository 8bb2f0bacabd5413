//! Why the host refuses to run a WasmController's module: a reason for conditions, Events and
//! metrics, a message, and whether trying again may succeed without a change.

use crate::wasm::oci::OciError;

/// A module the host refused, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// A CamelCase reason for conditions and Events.
    pub reason: &'static str,
    /// What is wrong.
    pub message: String,
    /// Whether trying again later may succeed without a change.
    pub transient: bool,
}

impl From<OciError> for Refusal {
    /// The refusal of a module that could not be pulled.
    fn from(error: OciError) -> Self {
        Self {
            reason: error.reason(),
            transient: error.is_transient(),
            message: error.to_string(),
        }
    }
}
