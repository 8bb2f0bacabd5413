//! The commands of the `kubewasm` binary: `run`, and the guest author's `check`, `render`,
//! `test`, `rbac`, `new` and `push`, each with its command line in [`cli`].

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

/// Writes `text` on stdout. A reader that went away (`kubewasm check m.wasm | head`) ends the
/// process with 141, as a process killed by SIGPIPE, rather than a panic.
fn out(text: impl Display) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = write!(stdout, "{text}").and_then(|()| stdout.flush()) {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        eprintln!("error: writing to stdout: {error}");
        std::process::exit(1);
    }
}

/// Prints `error: {error}` on stderr; the exit code of a guest author's command that failed.
fn fail(error: impl Display) -> ExitCode {
    eprintln!("error: {error}");
    ExitCode::FAILURE
}
