//! kubewasm: a Kubernetes controller host that runs reconcile logic as sandboxed WebAssembly
//! components.
#![warn(missing_docs)]

pub mod queue;
