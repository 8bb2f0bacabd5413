//! kubewasm: a Kubernetes controller host that runs reconcile logic as sandboxed WebAssembly
//! components.
#![warn(missing_docs)]

pub mod apply;
pub mod backend;
pub mod bindings;
pub mod cache;
pub mod check;
pub mod cli;
pub mod compile_cache;
pub mod config;
pub mod controller;
pub mod dispatch;
pub mod fixture;
pub mod health;
pub mod histogram;
pub mod host;
pub mod imports;
pub mod leader;
pub mod limits;
pub mod metrics;
pub mod module;
pub mod permissions;
pub mod queue;
pub mod rbac;
pub mod reload;
pub mod render;
pub mod runtime;
pub mod scaffold;
pub mod selector;
pub mod serve;
pub mod trigger;
pub mod view;
pub mod watch;
