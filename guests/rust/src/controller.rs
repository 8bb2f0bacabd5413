//! The [`Controller`] trait and the adapter that exports it through the generated bindings.

use std::marker::PhantomData;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::bindings::exports::kubewasm::controller::guest::Guest;
use crate::bindings::kubewasm::controller::types as wit;
use crate::{Error, Gvk, Metadata, ObjectKey, Reason, ReconcileError};

/// The reconcile logic of one controller.
///
/// All functions are associated functions: the host creates a fresh instance for every call, so
/// there is no state to keep in `self` between calls.
pub trait Controller {
    /// Declares the controller: its name, primary kind, owned and watched kinds, finalizer and
    /// concurrency. Called once when the module is loaded; must be deterministic.
    fn metadata() -> Metadata;

    /// Brings the world in line with the primary object named by `req`.
    ///
    /// `req.object` is `None` when the object no longer exists. Returning an error makes the
    /// host retry with backoff ([`ReconcileError::Transient`]) or give up until the object
    /// changes ([`ReconcileError::Permanent`]).
    fn reconcile(req: Request) -> Result<Action, ReconcileError>;

    /// Cleans up before a primary object carrying the controller's finalizer is deleted.
    ///
    /// Only called when [`Metadata::finalizer`] is set; the host removes the finalizer once this
    /// returns [`Action::Done`]. The default does nothing and returns [`Action::Done`].
    fn finalize(req: Request) -> Result<Action, ReconcileError> {
        let _ = req;
        Ok(Action::Done)
    }

    /// Maps a changed object of a kind watched with [`Mapping::Guest`](crate::Mapping::Guest) to
    /// the primary keys to reconcile. The default maps to nothing.
    fn map_keys(kind: Gvk, object: Value) -> Vec<ObjectKey> {
        let _ = (kind, object);
        Vec::new()
    }
}

/// How a successful reconcile ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing more to do until the next change.
    Done,
    /// Reconcile this key again after the given delay (millisecond precision).
    RequeueAfter(Duration),
}

impl From<Action> for wit::Outcome {
    fn from(action: Action) -> Self {
        match action {
            Action::Done => wit::Outcome::Done,
            Action::RequeueAfter(delay) => {
                wit::Outcome::RequeueAfter(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX))
            }
        }
    }
}

/// One reconcile request, with the primary object already parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// Namespace and name of the primary object.
    pub key: ObjectKey,
    /// Why the key was queued (the first reason wins when several arrive).
    pub reason: Reason,
    /// 1 on the first try, counting up while reconciles of this key keep failing.
    pub attempt: u32,
    /// The primary object as the cache holds it now (without `metadata.managedFields`), or
    /// `None` when it no longer exists.
    pub object: Option<Value>,
}

impl Request {
    /// The namespace of the primary object; `None` for a cluster-scoped kind.
    pub fn namespace(&self) -> Option<&str> {
        self.key.namespace.as_deref()
    }

    /// The name of the primary object.
    pub fn name(&self) -> &str {
        &self.key.name
    }

    /// The primary object deserialised into `T` (a k8s-openapi type, a custom struct, ...);
    /// `Ok(None)` when the object no longer exists, [`Error::Json`] when it does not fit `T`.
    pub fn object_as<T: DeserializeOwned>(&self) -> Result<Option<T>, Error> {
        self.object
            .as_ref()
            .map(|object| T::deserialize(object).map_err(Error::from))
            .transpose()
    }
}

impl TryFrom<wit::Request> for Request {
    type Error = ReconcileError;

    fn try_from(raw: wit::Request) -> Result<Self, ReconcileError> {
        let object = raw
            .object
            .map(|text| serde_json::from_str(&text))
            .transpose()
            .map_err(|e| ReconcileError::Permanent(format!("primary object is not JSON: {e}")))?;
        Ok(Self {
            key: raw.key,
            reason: raw.reason,
            attempt: raw.attempt,
            object,
        })
    }
}

/// Exports `T` through the generated `Guest` trait; used by [`export_controller!`](crate::export_controller).
pub struct Adapter<T>(PhantomData<fn() -> T>);

fn run(
    raw: wit::Request,
    f: impl FnOnce(Request) -> Result<Action, ReconcileError>,
) -> Result<wit::Outcome, wit::ReconcileError> {
    Request::try_from(raw)
        .and_then(f)
        .map(Into::into)
        .map_err(Into::into)
}

impl<T: Controller> Guest for Adapter<T> {
    fn metadata() -> Metadata {
        T::metadata()
    }

    fn reconcile(request: wit::Request) -> Result<wit::Outcome, wit::ReconcileError> {
        run(request, T::reconcile)
    }

    fn finalize(request: wit::Request) -> Result<wit::Outcome, wit::ReconcileError> {
        run(request, T::finalize)
    }

    fn map_keys(kind: Gvk, object: String) -> Vec<ObjectKey> {
        match serde_json::from_str(&object) {
            Ok(object) => T::map_keys(kind, object),
            Err(e) => {
                crate::log::warn(
                    "map-keys received an object that is not JSON",
                    &[("kind", &kind.to_string()), ("error", &e.to_string())],
                );
                Vec::new()
            }
        }
    }
}
