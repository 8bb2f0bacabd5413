//! The micro-benchmarks of the host crate, run by cargo: `dispatch` (host overhead of one
//! reconcile of a 4 KiB object with a fresh instance, against a bare wasmtime call of the same
//! component) and `namespace` (a podset reconcile against the number of other pods in its
//! namespace, and what the cache's indexes cost).

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};
use serde_json::Value;

/// Runs the benchmark `bench` of the host crate from the repository at `repo`, keeping its full
/// output in `log`, and returns the figures of its `json:` line with its report as `report`.
pub fn run(repo: &Path, bench: &str, log: &Path) -> Result<Value> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(repo)
        .args(["bench", "-p", "kubewasm", "--bench", bench])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo bench")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    std::fs::write(log, stdout.as_bytes())?;
    anyhow::ensure!(
        output.status.success(),
        "cargo bench -p kubewasm --bench {bench} failed with {}",
        output.status
    );
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix("json: "))
        .with_context(|| format!("the {bench} benchmark printed no json: line"))?;
    let mut figures: Value = serde_json::from_str(line)?;
    figures["report"] = stdout
        .lines()
        .filter(|line| !line.starts_with("json: "))
        .collect::<Vec<_>>()
        .join("\n")
        .into();
    Ok(figures)
}
