//! The commands of the `kubewasm` binary: `run`'s command line, and the guest author's
//! `check`, `render`, `rbac` and `new`.

pub mod check;
pub mod cli;
pub mod rbac;
pub mod render;
pub mod scaffold;
