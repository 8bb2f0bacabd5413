//! The local control plane the benchmarks run against, started with
//! `deploy/local/cluster run --stdin`: it stops when the harness exits, also when it is killed,
//! because its standard input is a pipe from the harness.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, bail};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::procfs::{self, Usage};

/// A running control plane.
pub struct ControlPlane {
    dir: PathBuf,
    kubeconfig: PathBuf,
    /// Held for its stdin: closing the pipe stops the control plane.
    _supervisor: Child,
}

impl ControlPlane {
    /// Starts a control plane in `dir` with the repository's `deploy/local/cluster` (building
    /// it first when its cache is cold) and waits until it is ready.
    pub fn start(repo: &Path, dir: &Path) -> Result<Self> {
        let script = repo.join("deploy/local/cluster");
        let mut child = Command::new(&script)
            .args(["run", "--stdin", "--dir"])
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("running {}", script.display()))?;
        let stdout = child.stdout.take().context("stdout is piped")?;
        for line in BufReader::new(stdout).lines() {
            if let Some(path) = line?.strip_prefix("ready ") {
                return Ok(Self {
                    dir: dir.to_path_buf(),
                    kubeconfig: PathBuf::from(path),
                    _supervisor: child,
                });
            }
        }
        let status = child.wait()?;
        bail!(
            "{} exited with {status} before it was ready",
            script.display()
        )
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A new admin client.
    pub async fn client(&self) -> Result<Client> {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)?;
        let config =
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        Ok(Client::try_from(config)?)
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
