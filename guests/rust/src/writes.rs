//! Writes, executed by the host with the field manager `kubewasm-<name>`.

use serde::Serialize;
use serde_json::Value;

use crate::bindings::kubewasm::controller::writes as wit;
pub use crate::bindings::kubewasm::controller::writes::{
    ApplyOptions, Preconditions, StatusOptions,
};
use crate::{Error, Gvk, Result};

impl Default for ApplyOptions {
    /// `owned: true, force: true, adopt: false`: the reconciled object becomes the controller
    /// owner and conflicting fields are taken over; an existing object that it does not control
    /// is refused with [`Error::is_already_exists`].
    fn default() -> Self {
        Self {
            owned: true,
            force: true,
            adopt: false,
        }
    }
}

impl ApplyOptions {
    /// `owned: false, force: true`: for objects outside the reconciled object's owner tree.
    pub fn not_owned() -> Self {
        Self {
            owned: false,
            ..Self::default()
        }
    }

    /// Also takes control of an existing object that has no controller owner (an owned apply
    /// refuses it otherwise). An object controlled by another owner is still refused.
    #[must_use]
    pub fn adopt(self) -> Self {
        Self {
            adopt: true,
            ..self
        }
    }
}

impl Default for StatusOptions {
    /// `force: false`: a status field another manager owns is a conflict, not taken over.
    fn default() -> Self {
        Self { force: false }
    }
}

impl StatusOptions {
    /// Takes over status fields another manager owns instead of failing with a conflict.
    pub fn forced() -> Self {
        Self { force: true }
    }
}

impl Default for Preconditions {
    /// No preconditions.
    fn default() -> Self {
        Self {
            uid: None,
            resource_version: None,
        }
    }
}

impl Preconditions {
    /// Delete only the object with this uid (not a newer object with the same name).
    pub fn uid(uid: impl Into<String>) -> Self {
        Self {
            uid: Some(uid.into()),
            resource_version: None,
        }
    }

    /// Delete only if the object still has this resourceVersion.
    pub fn resource_version(resource_version: impl Into<String>) -> Self {
        Self {
            uid: None,
            resource_version: Some(resource_version.into()),
        }
    }
}

fn to_json<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(Error::from)
}

fn from_json(text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(Error::from)
}

/// Server-side apply of `object`, which must carry `apiVersion`, `kind` and `metadata.name`;
/// `metadata.namespace` defaults to the reconciled object's namespace. Only include the fields
/// this controller manages. Returns the object as the API server holds it afterwards; an apply
/// that would change nothing is not sent.
pub fn apply<T: Serialize + ?Sized>(object: &T, options: ApplyOptions) -> Result<Value> {
    from_json(&wit::apply(&to_json(object)?, options)?)
}

/// Server-side apply of the `status` subresource of `object` (`apiVersion`, `kind`,
/// `metadata.name` and `status`), with the same rules as [`apply`], not forced: a status field
/// another manager owns fails with a 409 conflict ([`apply_status_with`] can force).
pub fn apply_status<T: Serialize + ?Sized>(object: &T) -> Result<Value> {
    apply_status_with(object, StatusOptions::default())
}

/// [`apply_status`] with `options`.
pub fn apply_status_with<T: Serialize + ?Sized>(
    object: &T,
    options: StatusOptions,
) -> Result<Value> {
    from_json(&wit::apply_status(&to_json(object)?, options)?)
}

/// Deletes an object with background propagation. An object that is already gone yields a
/// 404 [`Error::Api`] (see [`IgnoreNotFound`](crate::IgnoreNotFound)); a failed precondition a
/// 409.
pub fn delete(
    kind: &Gvk,
    namespace: Option<&str>,
    name: &str,
    preconditions: Preconditions,
) -> Result<()> {
    Ok(wit::delete(kind, namespace, name, &preconditions)?)
}

/// Applies an RFC 7386 JSON merge patch (`null` removes a key) and returns the patched object.
pub fn patch_merge<T: Serialize + ?Sized>(
    kind: &Gvk,
    namespace: Option<&str>,
    name: &str,
    patch: &T,
) -> Result<Value> {
    send_patch(kind, namespace, name, wit::PatchType::Merge, patch)
}

/// Applies an RFC 6902 JSON patch (an array of operations) and returns the patched object.
///
/// A `replace` of `/metadata/resourceVersion` with the resourceVersion the guest read turns the
/// patch into an optimistic-concurrency write: it fails with a 409 if the object changed since.
pub fn patch_json<T: Serialize + ?Sized>(
    kind: &Gvk,
    namespace: Option<&str>,
    name: &str,
    patch: &T,
) -> Result<Value> {
    send_patch(kind, namespace, name, wit::PatchType::Json, patch)
}

fn send_patch<T: Serialize + ?Sized>(
    kind: &Gvk,
    namespace: Option<&str>,
    name: &str,
    patch_type: wit::PatchType,
    patch: &T,
) -> Result<Value> {
    let patched = wit::patch(kind, namespace, name, patch_type, &to_json(patch)?)?;
    from_json(&patched)
}
