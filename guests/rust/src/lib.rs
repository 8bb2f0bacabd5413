//! Rust SDK for kubewasm controller guests.
//!
//! A guest is a WebAssembly component that exports the `guest` interface of the
//! `kubewasm:controller` WIT world. With this crate an author implements [`Controller`] and
//! exports it with [`export_controller!`]:
//!
//! ```no_run
//! use kubewasm_guest::prelude::*;
//!
//! struct Hello;
//!
//! impl Controller for Hello {
//!     fn metadata() -> Metadata {
//!         Metadata::new("hello", Gvk::new("", "v1", "ConfigMap"))
//!     }
//!
//!     fn reconcile(req: Request) -> Result<Action, ReconcileError> {
//!         kubewasm_guest::log::info("reconciling", &[("name", req.name())]);
//!         Ok(Action::Done)
//!     }
//! }
//!
//! kubewasm_guest::export_controller!(Hello);
//! ```
//!
//! What the host guarantees:
//! - [`Controller::metadata`] is called once when the module is loaded.
//! - Every [`Controller::reconcile`] / [`Controller::finalize`] call runs in a fresh instance:
//!   nothing (statics, caches, counters) survives from one call to the next.
//! - Reads ([`cache`]) come from the host's informer cache and never reach the API server.
//! - Writes ([`apply`], [`patch_merge`], [`delete`], ...) are executed by the host with the field
//!   manager `kubewasm-<name>`; an apply that would change nothing is not sent.
//! - When [`Metadata::finalizer`] is set the host adds and removes the finalizer itself.
//!
//! Calls into the host panic when the crate is compiled for a non-wasm target (wit-bindgen emits
//! stubs there), so native unit tests should cover pure logic only; the helpers in [`owner`],
//! [`conditions`], [`selector`] and [`meta`] are pure and work everywhere.
#![warn(missing_docs)]

/// Raw bindings generated from `wit/controller.wit`.
///
/// Prefer the typed API of this crate; the generated records that authors need are re-exported
/// at the crate root.
#[allow(unsafe_code, missing_docs, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "controller",
        pub_export_macro: true,
        export_macro_name: "__export_controller",
        default_bindings_module: "$crate::bindings",
        additional_derives: [PartialEq, Eq, Hash],
    });
}

pub mod cache;
pub mod conditions;
mod controller;
mod error;
mod events;
pub mod log;
pub mod meta;
mod names;
pub mod owner;
pub mod selector;
mod types;
mod writes;

pub use bindings::kubewasm::controller::types::{
    ApiStatus, Changes, ControllerMetadata as Metadata, Gvk, Mapping, ObjectKey, Reason, Selection,
    Watch,
};
pub use controller::{Action, Controller, Request};
pub use error::{Error, IgnoreNotFound, ReconcileError, Result};
pub use events::{EventType, event};
pub use names::generate_name;
pub use writes::{
    ApplyOptions, Preconditions, StatusOptions, apply, apply_status, apply_status_with, delete,
    patch_json, patch_merge,
};

/// The k8s-openapi crate this SDK was built with (feature `k8s-openapi`), so guests use the same
/// version without depending on it themselves.
#[cfg(feature = "k8s-openapi")]
pub use k8s_openapi;

/// The names most guests need: `use kubewasm_guest::prelude::*;`.
pub mod prelude {
    pub use crate::{
        Action, ApplyOptions, Changes, Controller, Error, EventType, Gvk, IgnoreNotFound, Mapping,
        Metadata, ObjectKey, Preconditions, Reason, ReconcileError, Request, Selection,
        StatusOptions, export_controller,
    };
}

/// Exports a type implementing [`Controller`] as the component's `guest` interface.
///
/// Invoke it exactly once, at the top level of the guest crate (a `cdylib` built for
/// `wasm32-wasip2`). The guest crate does not need to depend on `wit-bindgen` itself.
///
/// On non-wasm targets it only checks that the type implements [`Controller`]: the component
/// export names (`kubewasm:controller/guest@0.2.1#reconcile`) are not valid native symbols, and
/// leaving them out lets the same crate build natively as a `cdylib` for `cargo test`.
#[macro_export]
macro_rules! export_controller {
    ($ty:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            type __KubewasmGuestAdapter = $crate::__private::Adapter<$ty>;
            $crate::bindings::__export_controller!(
                __KubewasmGuestAdapter with_types_in $crate::bindings
            );
        };
        #[cfg(not(target_arch = "wasm32"))]
        const _: () = $crate::__private::assert_controller::<$ty>();
    };
}

#[doc(hidden)]
pub mod __private {
    pub use crate::controller::Adapter;

    /// Fails to compile unless `T` implements [`Controller`](crate::Controller).
    pub const fn assert_controller<T: crate::Controller>() {}
}
