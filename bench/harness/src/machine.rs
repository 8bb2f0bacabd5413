//! The machine and the versions a run measured.

use std::path::Path;
use std::process::Command;

use serde::Serialize;

/// Where a run ran.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub nproc: usize,
    pub cpu_model: String,
    pub memory_bytes: u64,
    pub kernel: String,
    /// One-minute load average when the run started: other work skews every figure.
    pub load_average: String,
}

/// What was measured.
#[derive(Debug, Clone, Serialize)]
pub struct Versions {
    pub kube_apiserver: String,
    pub rustc: String,
    pub go: String,
    pub wasmtime: String,
    pub kube_rs: String,
    pub controller_runtime: String,
}

impl Machine {
    /// This machine.
    pub fn this() -> Self {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let cpuinfo = read("/proc/cpuinfo");
        let meminfo = read("/proc/meminfo");
        Self {
            nproc: std::thread::available_parallelism().map_or(0, usize::from),
            cpu_model: cpuinfo
                .lines()
                .find_map(|line| line.strip_prefix("model name")?.split_once(':'))
                .map_or_else(
                    || "unknown".to_owned(),
                    |(_, model)| model.trim().to_owned(),
                ),
            memory_bytes: meminfo
                .lines()
                .find_map(|line| line.strip_prefix("MemTotal:"))
                .and_then(|kib| kib.split_whitespace().next()?.parse::<u64>().ok())
                .map_or(0, |kib| kib * 1024),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
            load_average: read("/proc/loadavg")
                .split_whitespace()
                .next()
                .unwrap_or("unknown")
                .to_owned(),
        }
    }
}

impl Versions {
    /// The versions of the toolchains on the `PATH` and of the libraries the repository at
    /// `repo` pins.
    pub fn of(repo: &Path, kube_apiserver: String) -> Self {
        let lock = std::fs::read_to_string(repo.join("Cargo.lock")).unwrap_or_default();
        let go_mod = std::fs::read_to_string(repo.join("bench/controller-runtime/go.mod"))
            .unwrap_or_default();
        Self {
            kube_apiserver,
            rustc: first_line("rustc", &["--version"]),
            go: first_line("go", &["version"]),
            wasmtime: locked(&lock, "wasmtime"),
            kube_rs: locked(&lock, "kube"),
            controller_runtime: go_mod
                .lines()
                .find_map(|line| line.trim().strip_prefix("sigs.k8s.io/controller-runtime "))
                .unwrap_or("unknown")
                .trim()
                .to_owned(),
        }
    }
}

/// The first line `program args` prints, or `unknown`.
fn first_line(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.lines().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The version of `package` in the text of a `Cargo.lock`, or `unknown`.
fn locked(lock: &str, package: &str) -> String {
    let entry = format!("name = \"{package}\"\nversion = \"");
    lock.split_once(&entry)
        .and_then(|(_, rest)| rest.split_once('"'))
        .map_or_else(|| "unknown".to_owned(), |(version, _)| version.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_locked_version_is_found_by_exact_name() {
        let lock = "[[package]]\nname = \"kube-client\"\nversion = \"5.0.1\"\n\n[[package]]\nname = \"kube\"\nversion = \"5.0.0\"\n";
        assert_eq!(locked(lock, "kube"), "5.0.0");
        assert_eq!(locked(lock, "kube-client"), "5.0.1");
        assert_eq!(locked(lock, "wasmtime"), "unknown");
    }
}
