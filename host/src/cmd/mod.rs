//! The commands of the `kubewasm` binary: `run`, and the guest author's `check`, `render`,
//! `rbac`, `new` and `push`, each with its command line in [`cli`].

use std::fmt::Display;
use std::process::ExitCode;

pub mod cases;
pub mod changes;
pub mod check;
pub mod cli;
pub mod push;
pub mod rbac;
pub mod render;
pub mod run;
pub mod scaffold;
pub mod source;

/// Prints `error: {error}` on stderr; the exit code of a guest author's command that failed.
fn fail(error: impl Display) -> ExitCode {
    eprintln!("error: {error}");
    ExitCode::FAILURE
}
