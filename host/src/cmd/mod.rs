//! The commands of the `kubewasm` binary: `run`'s command line, and the guest author's
//! `check`, `render`, `rbac`, `new` and `push`.

pub mod check;
pub mod cli;
pub mod push;
pub mod rbac;
pub mod render;
pub mod scaffold;
pub mod source;
