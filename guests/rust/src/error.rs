//! Errors of host calls ([`Error`]) and of reconciles ([`ReconcileError`]).

use std::fmt;

use crate::ApiStatus;
use crate::bindings::kubewasm::controller::types as wit;
use crate::selector::SelectorError;

/// The result of a host call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a host call (cache read, write, event) failed.
///
/// The first four variants are the WIT `error` variant; [`Error::Json`] is raised inside the
/// guest when a document does not (de)serialise.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The API server refused the request (status code, reason, message).
    Api(ApiStatus),
    /// This guest may not do this: the kind, verb or namespace is not declared or not granted.
    Denied(String),
    /// The request was malformed: invalid JSON, a missing field, a wrong kind.
    Invalid(String),
    /// The API server could not be reached in time; retrying later may succeed.
    Unavailable(String),
    /// A JSON document could not be converted to or from the requested Rust type.
    Json(String),
}

impl Error {
    /// The HTTP status code, for [`Error::Api`].
    pub fn status_code(&self) -> Option<u16> {
        match self {
            Error::Api(status) => Some(status.code),
            _ => None,
        }
    }

    /// The API server answered 404: the object (or its namespace) does not exist.
    pub fn is_not_found(&self) -> bool {
        self.status_code() == Some(404)
    }

    /// The API server answered 409: a conflicting write, a failed precondition
    /// (uid / resourceVersion) or an object that already exists.
    pub fn is_conflict(&self) -> bool {
        self.status_code() == Some(409)
    }

    /// A 409 `AlreadyExists`: a create of a name that is taken, or an owned apply of an
    /// existing object that the reconciled object does not control (see
    /// [`ApplyOptions::adopt`](crate::ApplyOptions::adopt)).
    pub fn is_already_exists(&self) -> bool {
        matches!(self, Error::Api(status) if status.code == 409 && status.reason == "AlreadyExists")
    }

    /// Whether retrying the same call later may succeed.
    ///
    /// `false` for [`Error::Denied`], [`Error::Invalid`], [`Error::Json`] and for API statuses
    /// that describe a bad request (400, 405, 406, 413, 415, 422); `true` otherwise (conflicts,
    /// not found, throttling, server errors, unreachable API server).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Api(status) => !matches!(status.code, 400 | 405 | 406 | 413 | 415 | 422),
            Error::Unavailable(_) => true,
            Error::Denied(_) | Error::Invalid(_) | Error::Json(_) => false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Api(status) => write!(
                f,
                "API server answered {} {}: {}",
                status.code, status.reason, status.message
            ),
            Error::Denied(message) => write!(f, "denied: {message}"),
            Error::Invalid(message) => write!(f, "invalid request: {message}"),
            Error::Unavailable(message) => write!(f, "API server unavailable: {message}"),
            Error::Json(message) => write!(f, "JSON: {message}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<wit::Error> for Error {
    fn from(error: wit::Error) -> Self {
        match error {
            wit::Error::Api(status) => Error::Api(status),
            wit::Error::Denied(message) => Error::Denied(message),
            wit::Error::Invalid(message) => Error::Invalid(message),
            wit::Error::Unavailable(message) => Error::Unavailable(message),
        }
    }
}

impl From<serde_json::Error> for Error {
    fn from(error: serde_json::Error) -> Self {
        Error::Json(error.to_string())
    }
}

/// Turns a 404 into `Ok(None)`, e.g. `delete(..).ignore_not_found()?`.
pub trait IgnoreNotFound<T> {
    /// `Ok(Some(value))` on success, `Ok(None)` on a 404, the error otherwise.
    fn ignore_not_found(self) -> Result<Option<T>>;
}

impl<T> IgnoreNotFound<T> for Result<T> {
    fn ignore_not_found(self) -> Result<Option<T>> {
        match self {
            Ok(value) => Ok(Some(value)),
            Err(error) if error.is_not_found() => Ok(None),
            Err(error) => Err(error),
        }
    }
}

/// How a failed reconcile ends.
///
/// `?` converts an [`Error`] into [`ReconcileError::Transient`] when [`Error::is_transient`],
/// and into [`ReconcileError::Permanent`] otherwise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReconcileError {
    /// Retry with per-key exponential backoff.
    Transient(String),
    /// Do not retry until the object changes; the host logs and counts the error.
    Permanent(String),
}

impl ReconcileError {
    /// A transient error with this message.
    pub fn transient(message: impl fmt::Display) -> Self {
        ReconcileError::Transient(message.to_string())
    }

    /// A permanent error with this message.
    pub fn permanent(message: impl fmt::Display) -> Self {
        ReconcileError::Permanent(message.to_string())
    }

    /// The same error with `context: ` prepended to its message.
    #[must_use]
    pub fn context(self, context: impl fmt::Display) -> Self {
        match self {
            ReconcileError::Transient(m) => ReconcileError::Transient(format!("{context}: {m}")),
            ReconcileError::Permanent(m) => ReconcileError::Permanent(format!("{context}: {m}")),
        }
    }

    /// Whether the host will retry with backoff.
    pub fn is_transient(&self) -> bool {
        matches!(self, ReconcileError::Transient(_))
    }
}

impl fmt::Display for ReconcileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReconcileError::Transient(message) => write!(f, "transient: {message}"),
            ReconcileError::Permanent(message) => write!(f, "permanent: {message}"),
        }
    }
}

impl std::error::Error for ReconcileError {}

impl From<Error> for ReconcileError {
    fn from(error: Error) -> Self {
        if error.is_transient() {
            ReconcileError::Transient(error.to_string())
        } else {
            ReconcileError::Permanent(error.to_string())
        }
    }
}

impl From<serde_json::Error> for ReconcileError {
    fn from(error: serde_json::Error) -> Self {
        Error::from(error).into()
    }
}

impl From<SelectorError> for ReconcileError {
    fn from(error: SelectorError) -> Self {
        ReconcileError::Permanent(error.to_string())
    }
}

impl From<ReconcileError> for wit::ReconcileError {
    fn from(error: ReconcileError) -> Self {
        match error {
            ReconcileError::Transient(message) => wit::ReconcileError::Transient(message),
            ReconcileError::Permanent(message) => wit::ReconcileError::Permanent(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str) -> Error {
        Error::Api(ApiStatus {
            code,
            reason: reason.into(),
            message: "m".into(),
        })
    }

    #[test]
    fn classifies_api_statuses() {
        assert!(api(404, "NotFound").is_not_found());
        assert!(api(409, "Conflict").is_conflict());
        assert!(!api(409, "Conflict").is_not_found());
        assert!(api(409, "Conflict").is_transient());
        assert!(api(503, "ServiceUnavailable").is_transient());
        assert!(!api(422, "Invalid").is_transient());
        assert!(!Error::Denied("no".into()).is_transient());
        assert!(Error::Unavailable("timeout".into()).is_transient());
    }

    #[test]
    fn converts_into_reconcile_errors() {
        assert!(ReconcileError::from(api(409, "Conflict")).is_transient());
        assert!(!ReconcileError::from(api(422, "Invalid")).is_transient());
        assert_eq!(
            ReconcileError::from(api(404, "NotFound")).context("get pod"),
            ReconcileError::Transient("get pod: API server answered 404 NotFound: m".into())
        );
    }

    #[test]
    fn ignores_not_found_only() {
        assert_eq!(
            Err::<(), _>(api(404, "NotFound")).ignore_not_found(),
            Ok(None)
        );
        assert_eq!(Ok::<_, Error>(1).ignore_not_found(), Ok(Some(1)));
        assert!(
            Err::<(), _>(api(409, "Conflict"))
                .ignore_not_found()
                .is_err()
        );
    }
}
