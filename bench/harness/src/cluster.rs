//! The local control plane the benchmarks run against, started with
//! `deploy/local/cluster run --stdin`: it stops when the harness exits, also when it is killed,
//! because its standard input is a pipe from the harness.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use kube::Client;

use crate::procfs::{self, Usage};

/// A running control plane.
pub struct ControlPlane {
    dir: PathBuf,
    plane: kubewasm_tests::ControlPlane,
}

impl ControlPlane {
    /// Starts a control plane in `dir` (building it first when its cache is cold) and waits
    /// until it is ready.
    pub fn start(dir: &Path) -> Result<Self> {
        Ok(Self {
            dir: dir.to_path_buf(),
            plane: kubewasm_tests::ControlPlane::start(dir)?,
        })
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        self.plane.kubeconfig()
    }

    /// A new admin client.
    pub async fn client(&self) -> Result<Client> {
        self.plane.client().await
    }

    /// CPU and memory of etcd and kube-apiserver together.
    pub fn usage(&self) -> Result<Usage> {
        ["etcd", "kube-apiserver"]
            .iter()
            .map(|name| {
                let file = self.dir.join(format!("{name}.pid"));
                let pid = std::fs::read_to_string(&file)
                    .with_context(|| format!("reading {}", file.display()))?;
                procfs::usage(pid.trim().parse().context("a pid")?)
            })
            .sum()
    }
}
