//! The WIT contract as Rust types: the current version (`wit/controller.wit`) and every earlier
//! version the host still loads (`wit/<version>/`), the only `bindgen!`s in the host.
//!
//! The rest of the host speaks the current version. A module is pre-linked as the version whose
//! `guest` interface it exports ([`GuestPre`]); calls into an earlier version's guest convert
//! requests and results here, and its imports are served by the current version's (see
//! [`imports`](crate::wasm::imports)).
//!
//! Generated imports are async (they may call the API server) and trappable (a host failure
//! that is not the guest's business, such as a deadline, ends the call); the `cache` interface
//! of every version is linked by hand instead
//! ([`imports::link_cache`](crate::wasm::imports::link_cache)), so its generated trait is not
//! implemented. Exports are async so that a long guest computation yields to other tasks at
//! every epoch tick.
#![allow(missing_docs)]

use wasmtime::AsContextMut;
use wasmtime::component::InstancePre;

wasmtime::component::bindgen!({
    path: "../wit",
    world: "controller",
    imports: { default: async | trappable },
    exports: { default: async },
});

/// Contract 0.1.0: `apply-status` is always forced, owned applies adopt an existing object that
/// nothing controls, and every update of a primary object is reconciled.
pub mod v0_1 {
    wasmtime::component::bindgen!({
        path: "../wit/0.1.0",
        world: "controller",
        imports: { default: async | trappable },
        exports: { default: async },
    });

    pub use self::kubewasm::controller::types;
}

pub use self::kubewasm::controller::types;

/// The exported interface's name, with the contract version a new module implements.
pub const GUEST_INTERFACE: &str = "kubewasm:controller/guest@0.2.1";

/// What every version's `guest` interface name starts with.
const GUEST_PREFIX: &str = "kubewasm:controller/guest@";

/// The imported cache interface of the current contract version.
pub const CACHE_INTERFACE: &str = "kubewasm:controller/cache@0.2.1";

/// Every `guest` interface the host loads, newest first: the current contract version and
/// the earlier ones it is compatible with (0.2.0, which lacks only `list-controlled`, links
/// against the current imports as it is), then 0.1.0.
pub const GUEST_INTERFACES: [&str; 3] = [
    GUEST_INTERFACE,
    "kubewasm:controller/guest@0.2.0",
    GUEST_INTERFACE_0_1,
];

/// The imported cache interface of contract 0.1.0.
pub const CACHE_INTERFACE_0_1: &str = "kubewasm:controller/cache@0.1.0";

/// The exported interface of contract 0.1.0, which the host still loads.
pub const GUEST_INTERFACE_0_1: &str = "kubewasm:controller/guest@0.1.0";

/// A pre-linked module, of the contract version whose `guest` interface it exports, and that
/// interface's name as the module exports it.
pub enum GuestPre<T: 'static> {
    Current(ControllerPre<T>, &'static str),
    V0_1(v0_1::ControllerPre<T>),
}

impl<T: Send + 'static> GuestPre<T> {
    /// Checks the component's exports against the version whose `guest` interface it exports,
    /// one of [`GUEST_INTERFACES`]: 0.1.0 is pre-linked as itself, 0.2.0 as the current version
    /// (exports and imports are looked up as the component model's semver rules say). Refuses
    /// a `guest` interface of any other version; a component without one is checked against
    /// the current version, whose error names what is missing.
    pub fn new(pre: InstancePre<T>) -> wasmtime::Result<Self> {
        let component = pre.component();
        let exported = component.component_type();
        let exported: Vec<&str> = exported
            .exports(component.engine())
            .map(|(n, _)| n)
            .collect();
        let known = GUEST_INTERFACES.into_iter().find(|i| exported.contains(i));
        if let (None, Some(unknown)) =
            (known, exported.iter().find(|e| e.starts_with(GUEST_PREFIX)))
        {
            wasmtime::bail!(
                "the component exports {unknown}, a version this host does not implement"
            );
        }
        let interface = known.unwrap_or(GUEST_INTERFACE);
        Ok(if interface == GUEST_INTERFACE_0_1 {
            Self::V0_1(v0_1::ControllerPre::new(pre)?)
        } else {
            Self::Current(ControllerPre::new(pre)?, interface)
        })
    }

    /// The `guest` interface the module exports, with its contract version.
    pub fn interface(&self) -> &'static str {
        match self {
            Self::Current(_, interface) => interface,
            Self::V0_1(_) => GUEST_INTERFACE_0_1,
        }
    }

    /// A fresh instance in `store`.
    pub async fn instantiate(
        &self,
        store: impl AsContextMut<Data = T>,
    ) -> wasmtime::Result<GuestInstance> {
        Ok(match self {
            Self::Current(pre, _) => GuestInstance::Current(pre.instantiate_async(store).await?),
            Self::V0_1(pre) => GuestInstance::V0_1(pre.instantiate_async(store).await?),
        })
    }
}

/// An instance of a module; its exports take and return the current version's types.
pub enum GuestInstance {
    Current(Controller),
    V0_1(v0_1::Controller),
}

impl GuestInstance {
    /// Calls `metadata`. A 0.1.0 guest reconciles on every update of its primary objects.
    pub async fn metadata<S: AsContextMut<Data: Send>>(
        &self,
        store: S,
    ) -> wasmtime::Result<types::ControllerMetadata> {
        match self {
            Self::Current(guest) => guest.kubewasm_controller_guest().call_metadata(store).await,
            Self::V0_1(guest) => {
                let declared = guest
                    .kubewasm_controller_guest()
                    .call_metadata(store)
                    .await?;
                Ok(declared.into())
            }
        }
    }

    /// Calls `reconcile`, or `finalize` if `finalize`.
    pub async fn reconcile<S: AsContextMut<Data: Send>>(
        &self,
        store: S,
        request: &types::Request,
        finalize: bool,
    ) -> wasmtime::Result<Result<types::Outcome, types::ReconcileError>> {
        match self {
            Self::Current(guest) => {
                let guest = guest.kubewasm_controller_guest();
                if finalize {
                    guest.call_finalize(store, request).await
                } else {
                    guest.call_reconcile(store, request).await
                }
            }
            Self::V0_1(guest) => {
                let guest = guest.kubewasm_controller_guest();
                let request = request.clone().into();
                let result = if finalize {
                    guest.call_finalize(store, &request).await?
                } else {
                    guest.call_reconcile(store, &request).await?
                };
                Ok(result.map(Into::into).map_err(Into::into))
            }
        }
    }

    /// Calls `map-keys`.
    pub async fn map_keys<S: AsContextMut<Data: Send>>(
        &self,
        store: S,
        kind: &types::Gvk,
        object: &str,
    ) -> wasmtime::Result<Vec<types::ObjectKey>> {
        match self {
            Self::Current(guest) => {
                let guest = guest.kubewasm_controller_guest();
                guest.call_map_keys(store, kind, object).await
            }
            Self::V0_1(guest) => {
                let guest = guest.kubewasm_controller_guest();
                let keys = guest
                    .call_map_keys(store, &kind.clone().into(), object)
                    .await?;
                Ok(keys.into_iter().map(Into::into).collect())
            }
        }
    }
}

impl From<kube::api::GroupVersionKind> for types::Gvk {
    fn from(kind: kube::api::GroupVersionKind) -> Self {
        Self {
            group: kind.group,
            version: kind.version,
            kind: kind.kind,
        }
    }
}

impl From<types::Gvk> for kube::api::GroupVersionKind {
    fn from(kind: types::Gvk) -> Self {
        Self::gvk(&kind.group, &kind.version, &kind.kind)
    }
}

/// `From` between two versions' records of the same fields, each converted with `into`.
macro_rules! same_record {
    ($from:ident => $to:ident { $($field:ident),* $(,)? }) => {
        impl From<$from> for $to {
            fn from(value: $from) -> Self {
                Self { $($field: value.$field.into()),* }
            }
        }
    };
}

/// `From` between two versions' enums or variants of the same cases: `unit` cases, then cases
/// whose payload is converted with `into`.
macro_rules! same_cases {
    ($from:ident => $to:ident { $($case:ident),* } { $($payload:ident),* }) => {
        impl From<$from> for $to {
            fn from(value: $from) -> Self {
                match value {
                    $($from::$case => Self::$case,)*
                    $($from::$payload(inner) => Self::$payload(inner.into()),)*
                }
            }
        }
    };
}

pub(crate) use {same_cases, same_record};

/// Conversions between contract 0.1.0 and the current types, in the directions calls need.
mod convert_0_1 {
    use super::types::{
        Changes, ControllerMetadata, Gvk, Mapping, ObjectKey, Outcome, Reason, ReconcileError,
        Request, Selection, Watch,
    };
    use super::v0_1::types::{
        ControllerMetadata as OldMetadata, Gvk as OldGvk, Mapping as OldMapping,
        ObjectKey as OldKey, Outcome as OldOutcome, Reason as OldReason,
        ReconcileError as OldError, Request as OldRequest, Selection as OldSelection,
        Watch as OldWatch,
    };

    same_record!(OldGvk => Gvk { group, version, kind });
    same_record!(Gvk => OldGvk { group, version, kind });
    same_record!(OldSelection => Selection { kind, namespace, label_selector });
    same_record!(OldWatch => Watch { selection, mapping });
    same_cases!(OldMapping => Mapping { Owner, Guest } { Label });
    same_record!(OldKey => ObjectKey { namespace, name });
    same_record!(ObjectKey => OldKey { namespace, name });
    same_record!(Request => OldRequest { key, reason, attempt, object });
    same_cases!(Reason => OldReason {
        Added, Changed, Deleted, OwnedChanged, WatchedChanged, Resync, Requeue, Reload
    } {});
    same_cases!(OldOutcome => Outcome { Done } { RequeueAfter });
    same_cases!(OldError => ReconcileError {} { Transient, Permanent });

    impl From<OldMetadata> for ControllerMetadata {
        fn from(declared: OldMetadata) -> Self {
            Self {
                name: declared.name,
                primary: declared.primary.into(),
                owns: declared.owns.into_iter().map(Into::into).collect(),
                watches: declared.watches.into_iter().map(Into::into).collect(),
                finalizer: declared.finalizer,
                max_concurrency: declared.max_concurrency,
                resync_seconds: declared.resync_seconds,
                reconcile_on: Changes::ANY,
            }
        }
    }
}
