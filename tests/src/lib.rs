//! Test harness: a real local control plane shared by every test in one test binary.
//!
//! The first call to [`control_plane`] starts etcd, kube-apiserver and kube-controller-manager
//! through `deploy/local/cluster run --stdin` (building them first if the cache is cold). The
//! control plane lives as long as the test process: it watches the pipe to our process and stops
//! when the pipe closes, also when the test binary panics or is killed.
//!
//! Set `KUBEWASM_TEST_KUBECONFIG` to reuse a control plane that is already running (for example
//! one started with `deploy/local/cluster up`).
#![warn(missing_docs)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

/// A running control plane.
pub struct ControlPlane {
    kubeconfig: PathBuf,
    /// Held for its stdin: dropping it (or exiting) closes the pipe and stops the control plane.
    _supervisor: Option<Child>,
}

impl ControlPlane {
    /// Path of the admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A new admin client. Every test makes its own: a client is bound to the runtime that
    /// created it, and each `#[tokio::test]` has its own runtime.
    pub async fn client(&self) -> Result<Client> {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)?;
        let config =
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        Ok(Client::try_from(config)?)
    }

    /// Creates a namespace unique to this test, deleted again when the returned guard drops.
    pub async fn namespace(&self, prefix: &str) -> Result<TestNamespace> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "{prefix}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let client = self.client().await?;
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name }
        }))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("creating namespace {name}"))?;
        Ok(TestNamespace {
            name,
            kubeconfig: self.kubeconfig.clone(),
        })
    }
}

/// A namespace owned by one test. Dropping it deletes the namespace (best effort).
pub struct TestNamespace {
    name: String,
    kubeconfig: PathBuf,
}

impl TestNamespace {
    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let name = self.name.clone();
        let kubeconfig = self.kubeconfig.clone();
        // A fresh thread and runtime: the test's runtime may already be shutting down.
        let deleted = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let kubeconfig = Kubeconfig::read_from(&kubeconfig)?;
                let config =
                    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                        .await?;
                let api = Api::<Namespace>::all(Client::try_from(config)?);
                api.delete(&name, &DeleteParams::background()).await?;
                anyhow::Ok(())
            })
        })
        .join();
        if let Ok(Err(error)) = deleted {
            eprintln!("warning: deleting test namespace {}: {error:#}", self.name);
        }
    }
}

/// The repository's root folder.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The control plane of this test process, started on first use.
///
/// # Panics
/// When the control plane cannot be built or started; the message carries its log's tail.
pub fn control_plane() -> &'static ControlPlane {
    static PLANE: OnceLock<ControlPlane> = OnceLock::new();
    PLANE.get_or_init(|| start().unwrap_or_else(|error| panic!("control plane: {error:#}")))
}

fn start() -> Result<ControlPlane> {
    if let Some(kubeconfig) = std::env::var_os("KUBEWASM_TEST_KUBECONFIG") {
        return Ok(ControlPlane {
            kubeconfig: kubeconfig.into(),
            _supervisor: None,
        });
    }
    let dir = std::env::temp_dir().join(format!("kubewasm-test-{}", std::process::id()));
    let script = repo_root().join("deploy/local/cluster");
    let mut child = Command::new(&script)
        .args(["run", "--stdin", "--dir"])
        .arg(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("running {}", script.display()))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut lines = BufReader::new(stdout).lines();
    let kubeconfig = loop {
        match lines.next() {
            Some(line) => {
                if let Some(path) = line?.strip_prefix("ready ") {
                    break PathBuf::from(path);
                }
            }
            None => {
                let status = child.wait()?;
                bail!(
                    "{} exited with {status} before it was ready",
                    script.display()
                );
            }
        }
    };
    Ok(ControlPlane {
        kubeconfig,
        _supervisor: Some(child),
    })
}

/// Polls `check` every 100 ms until it returns `Some`, or fails after `timeout` with `what`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last_error = None;
    loop {
        match check().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(error) => last_error = Some(error),
        }
        if tokio::time::Instant::now() >= deadline {
            match last_error {
                Some(error) => bail!("timed out after {timeout:?} waiting for {what}: {error:#}"),
                None => bail!("timed out after {timeout:?} waiting for {what}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
