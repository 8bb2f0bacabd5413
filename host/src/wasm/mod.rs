//! The WebAssembly layer: everything that calls into a guest. The engine and its compile
//! cache, the limits of a call, the contract's bindings, the model of what a guest declares,
//! the guest's permissions and environment, the host side of its imports (for every contract
//! version it loads) and the state of one call, module loading and
//! dispatch of one call into a fresh instance. It reaches the cluster only through a
//! [`backend::Backend`], so the same guest runs against the cluster or against fixtures.

pub mod backend;
pub mod bindings;
pub mod compile_cache;
pub mod declaration;
pub mod dispatch;
pub mod env;
pub mod evict;
pub mod imports;
pub mod imports_0_1;
pub mod limits;
pub mod module;
pub mod module_bytes;
pub mod module_store;
pub mod oci;
pub mod offline;
pub mod permissions;
pub mod pull;
pub mod registry_error;
pub mod runtime;
pub mod state;
