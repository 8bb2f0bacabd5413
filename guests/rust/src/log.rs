//! Structured logging into the host's logs; the host tags every line with the controller and
//! the key being reconciled.
//!
//! ```no_run
//! kubewasm_guest::log::info("created pod", &[("pod", "web-x7k2p"), ("replicas", "3")]);
//! ```

pub use crate::bindings::kubewasm::controller::log::Level;

/// Writes one line at `level` with key/value `fields`.
pub fn log(level: Level, message: &str, fields: &[(&str, &str)]) {
    let fields: Vec<(String, String)> = fields
        .iter()
        .map(|&(key, value)| (key.to_owned(), value.to_owned()))
        .collect();
    crate::bindings::kubewasm::controller::log::log(level, message, &fields);
}

/// Writes one line at [`Level::Trace`].
pub fn trace(message: &str, fields: &[(&str, &str)]) {
    log(Level::Trace, message, fields);
}

/// Writes one line at [`Level::Debug`].
pub fn debug(message: &str, fields: &[(&str, &str)]) {
    log(Level::Debug, message, fields);
}

/// Writes one line at [`Level::Info`].
pub fn info(message: &str, fields: &[(&str, &str)]) {
    log(Level::Info, message, fields);
}

/// Writes one line at [`Level::Warn`].
pub fn warn(message: &str, fields: &[(&str, &str)]) {
    log(Level::Warn, message, fields);
}

/// Writes one line at [`Level::Error`].
pub fn error(message: &str, fields: &[(&str, &str)]) {
    log(Level::Error, message, fields);
}
