//! The WIT contract (`wit/controller.wit`) as Rust types: the only `bindgen!` in the host.
//!
//! Imports are async (they may call the API server) and trappable (a host failure that is not
//! the guest's business, such as a deadline, ends the call). Exports are async so that a long
//! guest computation yields to other tasks at every epoch tick.
#![allow(missing_docs)]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "controller",
    imports: { default: async | trappable },
    exports: { default: async },
});

pub use self::kubewasm::controller::types;

/// The exported interface's name, with the contract version a module must implement.
pub const GUEST_INTERFACE: &str = "kubewasm:controller/guest@0.1.0";

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
