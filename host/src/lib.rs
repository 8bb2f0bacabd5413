//! kubewasm: a Kubernetes controller host that runs reconcile logic as sandboxed WebAssembly
//! components.
//!
//! The modules follow the data flow, from the cluster to the guest and back:
//! API server -> informer cache -> triggers -> workqueue -> guest call -> writes. They are
//! layered, bottom first in the list below; a file uses only its own folder and the layers
//! listed before it, and no files import each other in a circle. This list is the order
//! `host/tests/layers.rs` checks.
//!
//! 1. [`histogram`]: duration histograms and their bucket bounds, for every layer's metrics.
//! 2. [`rate`]: token buckets, for every rate the host limits.
//! 3. [`cluster`]: what the host knows of Kubernetes: label selectors, selections, informers
//!    and their caches, views, leader election. Nothing here knows WebAssembly.
//! 4. [`shard`]: replicas sharing each guest's keys: membership Leases, the ring, the sharder
//!    that labels objects for members, and a member's share of the keys.
//! 5. [`config`]: the configuration file: modules, limits, grants, the workqueue, the manager.
//! 6. [`wasm`]: the runtime that calls guests: engine, compile cache, limits, the contract,
//!    the declaration model, permissions, the host side of the imports, module loading and
//!    dispatch. Reaches the cluster only through its [`wasm::backend::Backend`].
//! 7. [`control`]: the engine of one guest: triggers, the workqueue, the controller and its
//!    finalizer protocol, the writer against the API server, the tally of reconciles.
//! 8. [`manage`]: the host that runs every guest: modules from files and WasmController
//!    objects, their sources, names, access checks and revisions, reloads, stale finalizers.
//! 9. [`serve`]: the HTTP endpoints: metrics, status and health probes.
//! 10. [`cmd`]: the commands of the `kubewasm` binary.
#![warn(missing_docs)]

pub mod cluster;
pub mod cmd;
pub mod config;
pub mod control;
pub mod histogram;
pub mod manage;
pub mod rate;
pub mod serve;
pub mod shard;
pub mod wasm;
