//! The management layer: the host that runs every guest. It loads modules from files and from
//! WasmController objects (their sources, names, access checks, refusals and revisions), starts
//! a controller per module on shared informers, swaps or replaces it when its module changes,
//! and watches the finalizers an unloaded guest left behind.

pub mod access;
pub mod host;
pub mod names;
pub mod objects;
pub mod refusal;
pub mod reload;
pub mod revisions;
pub mod source_changes;
pub mod sources;
pub mod stale_finalizers;
