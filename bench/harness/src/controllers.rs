//! The controllers under test, run as processes: kubewasm hosts, native kube-rs controllers and
//! controller-runtime controllers, all with concurrency 4.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde_json::json;
use tokio::process::{Child, Command};

use crate::procfs::{self, Usage};
use kubewasm_tests::Language;

/// Reconciles each implementation runs at the same time.
pub const CONCURRENCY: u32 = 4;
/// How long a Lease record stays valid without renewal, client-go's default.
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How long a leader tries to renew before it stops, client-go's default.
const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// How often candidates try to take the Lease and the leader renews it, client-go's default.
const RETRY_PERIOD: Duration = Duration::from_secs(2);
/// How long a controller may take to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// Who writes the children.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Implementation {
    /// The harness itself, applying children as a controller would: the write ceiling.
    #[value(skip)]
    NullWriter,
    /// The copy guest in a kubewasm host.
    Kubewasm,
    /// `bench-native`, a kube-rs `Controller` built from the same logic crate.
    KubeRs,
    /// The Go controller-runtime controller.
    ControllerRuntime,
}

impl Implementation {
    /// The implementations that run as controller processes.
    pub const CONTROLLERS: [Implementation; 3] =
        [Self::Kubewasm, Self::KubeRs, Self::ControllerRuntime];

    /// The name used in namespaces, tables and the JSON output.
    pub fn name(self) -> &'static str {
        match self {
            Self::NullWriter => "null-writer",
            Self::Kubewasm => "kubewasm",
            Self::KubeRs => "kube-rs",
            Self::ControllerRuntime => "controller-runtime",
        }
    }
}

/// The programs under test.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// The release `kubewasm` binary.
    pub kubewasm: PathBuf,
    /// The copy guest component.
    pub guest: PathBuf,
    /// The cache-only guest component.
    pub cache_guest: PathBuf,
    /// The release `bench-native` binary.
    pub native: PathBuf,
    /// The controller-runtime binary, if it takes part.
    pub controller_runtime: Option<PathBuf>,
    /// The podset example's component in each language, when the failover or density workload
    /// runs.
    pub podset: Vec<(Language, PathBuf)>,
}

/// One module of a kubewasm host.
pub struct HostModule {
    /// The component file.
    pub path: PathBuf,
    /// The controller's name.
    pub name: String,
    /// The one namespace it reconciles.
    pub namespace: String,
}

/// How controllers run.
#[derive(Default)]
pub struct RunOptions {
    /// Resync period; 0 for none.
    pub resync_seconds: u32,
    /// kubewasm only: watch the module files and swap changed modules in place.
    pub reload: bool,
    /// kubewasm only: where to serve /metrics, if anywhere.
    pub metrics: Option<SocketAddr>,
    /// kubewasm only: take part in leader election on this Lease with client-go's default
    /// timings, and serve the health probes next to /metrics.
    pub election: Option<Election>,
    /// kubewasm only: the compile cache, if not the launcher's.
    pub compile_cache: Option<PathBuf>,
    /// kubewasm only: the replica name (`POD_NAME`) the host writes into status.
    pub replica: Option<String>,
}

/// A Lease that candidates for leadership share.
#[derive(Debug, Clone)]
pub struct Election {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// Whether the candidates share the keys (`--sharded`): each holds a membership Lease
    /// named after this one, and the leader assigns the keys.
    pub sharded: bool,
}

/// Starts controllers with their configuration and logs in folders under a work folder.
pub struct Launcher {
    binaries: Binaries,
    kubeconfig: PathBuf,
    work: PathBuf,
    compile_cache: PathBuf,
}

impl Launcher {
    /// A launcher writing under `work`; kubewasm hosts keep compiled modules in
    /// `work/compiled`.
    pub fn new(binaries: Binaries, kubeconfig: &Path, work: &Path) -> Self {
        Self {
            binaries,
            kubeconfig: kubeconfig.to_path_buf(),
            work: work.to_path_buf(),
            compile_cache: work.join("compiled"),
        }
    }

    /// The work folder.
    pub fn work(&self) -> &Path {
        &self.work
    }

    /// The programs under test.
    pub fn binaries(&self) -> &Binaries {
        &self.binaries
    }

    /// A fresh folder for the run `label`.
    pub fn folder(&self, label: &str) -> Result<PathBuf> {
        let dir = self.work.join(label);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// Starts `implementation` for `namespaces`: one kubewasm host with one module per
    /// namespace (the copy guest under the names `copy-0`, `copy-1`, ...), or one native process
    /// per namespace.
    pub fn start(
        &self,
        implementation: Implementation,
        label: &str,
        namespaces: &[String],
        options: &RunOptions,
    ) -> Result<Controllers> {
        let dir = self.folder(&format!("{label}-{}", implementation.name()))?;
        match implementation {
            Implementation::NullWriter => bail!("the null writer is not a process"),
            Implementation::Kubewasm => {
                let modules = namespaces
                    .iter()
                    .enumerate()
                    .map(|(index, namespace)| {
                        // Module paths must differ; links keep one digest, so one compiled entry.
                        let path = dir.join(format!("copy-{index}.wasm"));
                        link_or_copy(&self.binaries.guest, &path)?;
                        Ok(HostModule {
                            path,
                            name: format!("copy-{index}"),
                            namespace: namespace.clone(),
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                self.host(&dir, &modules, options)
            }
            Implementation::KubeRs | Implementation::ControllerRuntime => {
                let binary = match implementation {
                    Implementation::KubeRs => &self.binaries.native,
                    _ => self
                        .binaries
                        .controller_runtime
                        .as_ref()
                        .context("no --controller-runtime binary")?,
                };
                let processes = namespaces
                    .iter()
                    .enumerate()
                    .map(|(index, namespace)| {
                        let mut command = Command::new(binary);
                        command
                            .arg("--kubeconfig")
                            .arg(&self.kubeconfig)
                            .args(["--namespace", namespace])
                            .args(["--concurrency", &CONCURRENCY.to_string()])
                            .args(["--resync-seconds", &options.resync_seconds.to_string()])
                            .env("RUST_LOG", "warn");
                        Process::spawn(command, dir.join(format!("{index}.log")))
                    })
                    .collect::<Result<_>>()?;
                Ok(Controllers { processes })
            }
        }
    }

    /// Starts one cache-only process for `namespace`, holding `kind` (`configmaps` or `pods`):
    /// a kubewasm host running the cache guest and serving metrics at `metrics`, or a native
    /// process in its cache mode, which prints `cached N`.
    pub fn start_cache(
        &self,
        label: &str,
        namespace: &str,
        kind: &str,
        implementation: Implementation,
        strip_managed_fields: bool,
        metrics: Option<SocketAddr>,
    ) -> Result<Controllers> {
        let dir = self.folder(label)?;
        let mut command = match implementation {
            Implementation::NullWriter => bail!("the null writer is not a process"),
            Implementation::Kubewasm => {
                let module = HostModule {
                    path: self.binaries.cache_guest.clone(),
                    name: "cache".into(),
                    namespace: namespace.to_owned(),
                };
                let options = RunOptions {
                    metrics,
                    ..RunOptions::default()
                };
                return self.host(&dir, &[module], &options);
            }
            Implementation::KubeRs => {
                let mut command = Command::new(&self.binaries.native);
                command.args(["--cache", kind]);
                if strip_managed_fields {
                    command.arg("--strip-managed-fields");
                }
                command
            }
            Implementation::ControllerRuntime => {
                let binary = self
                    .binaries
                    .controller_runtime
                    .as_ref()
                    .context("no --controller-runtime binary")?;
                let mut command = Command::new(binary);
                command.args(["-cache", kind]);
                if strip_managed_fields {
                    command.arg("-strip-managed-fields");
                }
                command
            }
        };
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--namespace", namespace])
            .env("RUST_LOG", "warn");
        Ok(Controllers {
            processes: vec![Process::spawn(command, dir.join("cache.log"))?],
        })
    }

    /// Starts one kubewasm host in `dir` running `modules`.
    pub fn host(
        &self,
        dir: &Path,
        modules: &[HostModule],
        options: &RunOptions,
    ) -> Result<Controllers> {
        let modules: Vec<_> = modules
            .iter()
            .map(|module| {
                let mut entry = json!({
                    "path": module.path,
                    "name": module.name,
                    "namespaces": [module.namespace],
                    "maxConcurrency": CONCURRENCY,
                });
                if options.resync_seconds > 0 {
                    entry["resyncSeconds"] = json!(options.resync_seconds);
                }
                entry
            })
            .collect();
        self.host_with(dir, &json!({ "modules": modules }), options)
    }

    /// Starts one kubewasm host in `dir` running every WasmController of the cluster, each
    /// confined to its namespace, and no module file.
    pub fn controllers_host(&self, dir: &Path, options: &RunOptions) -> Result<Controllers> {
        self.host_with(dir, &json!({ "controllers": { "watch": true } }), options)
    }

    /// Starts one kubewasm host in `dir` with the configuration `config`.
    fn host_with(
        &self,
        dir: &Path,
        config: &serde_json::Value,
        options: &RunOptions,
    ) -> Result<Controllers> {
        // JSON is YAML.
        let path = dir.join("config.yaml");
        std::fs::write(&path, config.to_string())?;
        let metrics = options
            .metrics
            .map_or_else(|| "0".to_owned(), |address| address.to_string());
        let mut command = Command::new(&self.binaries.kubewasm);
        command
            .args(["--log-format", "json", "run", "--kubeconfig"])
            .arg(&self.kubeconfig)
            .arg("--config")
            .arg(&path)
            .arg("--compile-cache-dir")
            .arg(
                options
                    .compile_cache
                    .as_ref()
                    .unwrap_or(&self.compile_cache),
            )
            .args(["--metrics-bind-address", &metrics]);
        if !options.reload {
            command.arg("--no-reload");
        }
        if let Some(replica) = &options.replica {
            command.env("POD_NAME", replica);
        }
        match &options.election {
            Some(election) => {
                anyhow::ensure!(
                    options.metrics.is_some(),
                    "leader election serves its probes next to /metrics"
                );
                let seconds = |duration: Duration| format!("{}s", duration.as_secs());
                command
                    .args(["--health-probe-bind-address", &metrics])
                    .arg(if election.sharded {
                        "--sharded"
                    } else {
                        "--leader-elect"
                    })
                    .arg("--leader-election-namespace")
                    .arg(&election.namespace)
                    .args(["--leader-election-id", &election.name])
                    .args(["--leader-elect-lease-duration", &seconds(LEASE_DURATION)])
                    .args(["--leader-elect-renew-deadline", &seconds(RENEW_DEADLINE)])
                    .args(["--leader-elect-retry-period", &seconds(RETRY_PERIOD)])
                    // The binary logs its leadership under its own target, `kubewasm`.
                    .env("RUST_LOG", "warn,kubewasm=info");
            }
            None => {
                command
                    .args(["--health-probe-bind-address", "0"])
                    .env("RUST_LOG", "warn,kubewasm::manage::host=info");
            }
        }
        Ok(Controllers {
            processes: vec![Process::spawn(command, dir.join("host.log"))?],
        })
    }
}

/// Hard-links `from` to `to`, or copies it where links are not possible.
pub fn link_or_copy(from: &Path, to: &Path) -> Result<()> {
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to)
            .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    }
    Ok(())
}

/// Running controller processes; dropping them kills them.
pub struct Controllers {
    processes: Vec<Process>,
}

struct Process {
    child: Child,
    pid: u32,
    log: PathBuf,
}

impl Process {
    fn spawn(mut command: Command, log: PathBuf) -> Result<Self> {
        let output = std::fs::File::create(&log)?;
        let child = command
            .stdin(Stdio::null())
            .stdout(output.try_clone()?)
            .stderr(output)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {:?}", command.as_std().get_program()))?;
        let pid = child.id().context("a started process has a pid")?;
        Ok(Self { child, pid, log })
    }
}

impl Controllers {
    /// How many processes run.
    pub fn processes(&self) -> usize {
        self.processes.len()
    }

    /// The summed usage of every process.
    pub fn usage(&self) -> Result<Usage> {
        self.processes.iter().map(|p| procfs::usage(p.pid)).sum()
    }

    /// Where the first process's resident memory lies, by kind of mapping.
    pub fn memory_breakdown(&self) -> Result<BTreeMap<String, u64>> {
        procfs::breakdown(self.processes[0].pid)
    }

    /// The log of the first process.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.processes[0].log).unwrap_or_default()
    }

    /// Fails, with the end of its log, if a process has exited.
    pub fn check_running(&mut self) -> Result<()> {
        for process in &mut self.processes {
            if let Some(status) = process.child.try_wait()? {
                bail!(
                    "{} exited with {status}:\n{}",
                    process.log.display(),
                    log_tail(&process.log)
                );
            }
        }
        Ok(())
    }

    /// Sends SIGTERM to every process and waits for them; returns the logs of those that did
    /// not exit cleanly and promptly (those are killed).
    pub async fn stop(self) -> Result<Vec<String>> {
        self.terminate()?;
        self.stopped().await
    }

    /// Sends SIGTERM to every process, without waiting for them.
    pub fn terminate(&self) -> Result<()> {
        let pids: Vec<String> = self.processes.iter().map(|p| p.pid.to_string()).collect();
        let status = std::process::Command::new("kill")
            .arg("-TERM")
            .args(&pids)
            .status()?;
        anyhow::ensure!(status.success(), "kill -TERM failed");
        Ok(())
    }

    /// Sends SIGKILL to every process, without waiting for them.
    pub fn kill(&mut self) -> Result<()> {
        for process in &mut self.processes {
            process.child.start_kill()?;
        }
        Ok(())
    }

    /// Waits until every killed process is gone.
    pub async fn reap(mut self) -> Result<()> {
        for process in &mut self.processes {
            process.child.wait().await?;
        }
        Ok(())
    }

    /// Waits for every process to exit after SIGTERM; returns the logs of those that did not
    /// exit cleanly and promptly (those are killed).
    pub async fn stopped(mut self) -> Result<Vec<String>> {
        let mut unclean = Vec::new();
        for process in &mut self.processes {
            let exit: Option<ExitStatus> = tokio::time::timeout(STOP_TIMEOUT, process.child.wait())
                .await
                .ok()
                .transpose()?;
            if exit.is_none_or(|status| !status.success()) {
                let _ = process.child.kill().await;
                unclean.push(format!(
                    "{} {}:\n{}",
                    process.log.display(),
                    exit.map_or_else(
                        || "did not exit after SIGTERM".to_owned(),
                        |s| format!("exited with {s}")
                    ),
                    log_tail(&process.log)
                ));
            }
        }
        Ok(unclean)
    }
}

/// The last lines of a log file.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// A loopback address nothing listens on right now.
pub fn free_loopback_address() -> Result<SocketAddr> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}
