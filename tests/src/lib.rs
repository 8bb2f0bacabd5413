//! Test harness: a real local control plane shared by every test in one test binary.
//!
//! The first call to [`control_plane`] starts etcd, kube-apiserver and kube-controller-manager
//! through `deploy/local/cluster run --stdin` (building them first if the cache is cold). The
//! control plane lives as long as the test process: it watches the pipe to our process and stops
//! when the pipe closes, also when the test binary panics or is killed.
//!
//! Set `KUBEWASM_TEST_KUBECONFIG` to reuse a control plane that is already running (for example
//! one started with `deploy/local/cluster up`). A test binary whose control plane needs more
//! kube-apiserver flags starts it with [`control_plane_with`]; a reused one must have been
//! started with them (`KUBEWASM_APISERVER_ARGS`, see `deploy/local/README.md`).
#![warn(missing_docs)]

pub mod delay;
pub mod ledger;
pub mod podset;
pub mod prometheus;
pub mod registry;
pub mod relay;
pub mod ring;
pub mod rogue;
pub mod shards;
pub mod wasmctl;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use tempfile::TempDir;

/// A running control plane.
pub struct ControlPlane {
    kubeconfig: PathBuf,
    /// The flags added to kube-apiserver's command line when it was started.
    apiserver_args: Vec<String>,
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

    /// Kills `component` (`etcd` or `kube-apiserver`) as a crash would and starts it again with
    /// the same flags and data; returns once the API server is ready. Every test of the process
    /// shares the control plane: only a test binary of its own may call this.
    pub async fn restart(&self, component: &str) -> Result<()> {
        let dir = self
            .kubeconfig
            .parent()
            .context("kubeconfig has a folder")?;
        let script = repo_root().join("deploy/local/cluster");
        let status = tokio::process::Command::new(&script)
            .args(["restart", component, "--dir"])
            .arg(dir)
            .status()
            .await
            .with_context(|| format!("running {}", script.display()))?;
        anyhow::ensure!(status.success(), "restarting {component}: {status}");
        Ok(())
    }

    /// Compacts etcd's history up to its current revision, as the API server does every five
    /// minutes, and returns that revision. A watch from an earlier resourceVersion that etcd
    /// serves (one the API server's watch cache does not) is then answered with 410 Gone.
    pub async fn compact_etcd(&self) -> Result<u64> {
        let dir = self
            .kubeconfig
            .parent()
            .context("kubeconfig has a folder")?;
        let url = std::fs::read_to_string(dir.join("etcd-url"))
            .context("reading etcd's URL from the control plane's folder")?;
        let address = url
            .trim()
            .strip_prefix("http://")
            .with_context(|| format!("etcd's URL {url:?} is not http"))?;
        // The range of the empty key reads nothing but the header, which holds the revision.
        let (status, body) =
            http(address, "POST", "/v3/kv/range", &[], r#"{"key":"AA=="}"#).await?;
        anyhow::ensure!(status == 200, "etcd's range answers {status}: {body}");
        let header: serde_json::Value = serde_json::from_str(&body)?;
        let revision: u64 = header["header"]["revision"]
            .as_str()
            .with_context(|| format!("no revision in {body}"))?
            .parse()?;
        let request = serde_json::json!({ "revision": revision.to_string(), "physical": true });
        let (status, body) = http(
            address,
            "POST",
            "/v3/kv/compaction",
            &[],
            &request.to_string(),
        )
        .await?;
        // The API server's own compaction may have got there first.
        anyhow::ensure!(
            status == 200 || body.contains("required revision has been compacted"),
            "etcd's compaction answers {status}: {body}"
        );
        Ok(revision)
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

static PLANE: OnceLock<ControlPlane> = OnceLock::new();

/// The control plane of this test process, started on first use.
///
/// # Panics
/// When the control plane cannot be built or started; the message carries its log's tail.
pub fn control_plane() -> &'static ControlPlane {
    control_plane_with(&[])
}

/// The control plane of this test process, started on first use with `apiserver_args` added to
/// kube-apiserver's command line. Every test of a binary that needs them calls this before
/// anything else starts the control plane.
///
/// # Panics
/// When the control plane cannot be started, or was started with other flags.
pub fn control_plane_with(apiserver_args: &[&str]) -> &'static ControlPlane {
    let plane = PLANE.get_or_init(|| {
        start(apiserver_args).unwrap_or_else(|error| panic!("control plane: {error:#}"))
    });
    assert!(
        apiserver_args.is_empty() || plane.apiserver_args == apiserver_args,
        "the control plane was started with kube-apiserver flags {:?}, not {apiserver_args:?}",
        plane.apiserver_args
    );
    plane
}

fn start(apiserver_args: &[&str]) -> Result<ControlPlane> {
    let apiserver_args = apiserver_args.iter().map(|a| a.to_string()).collect();
    if let Some(kubeconfig) = std::env::var_os("KUBEWASM_TEST_KUBECONFIG") {
        return Ok(ControlPlane {
            kubeconfig: kubeconfig.into(),
            apiserver_args,
            _supervisor: None,
        });
    }
    let dir = std::env::temp_dir().join(format!("kubewasm-test-{}", std::process::id()));
    ControlPlane::start_with(&dir, &apiserver_args)
}

impl ControlPlane {
    /// Starts a control plane in `dir` with `deploy/local/cluster run --stdin` (building it
    /// first when its cache is cold) and waits until it is ready. It stops when this value
    /// drops or the process exits, also when the process is killed.
    pub fn start(dir: &Path) -> Result<Self> {
        Self::start_with(dir, &[])
    }

    /// Like [`ControlPlane::start`], with `apiserver_args` added to kube-apiserver's command
    /// line.
    pub fn start_with(dir: &Path, apiserver_args: &[String]) -> Result<Self> {
        let script = repo_root().join("deploy/local/cluster");
        let mut child = Command::new(&script)
            .args(["run", "--stdin", "--dir"])
            .arg(dir)
            .env("KUBEWASM_APISERVER_ARGS", apiserver_args.join(" "))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("running {}", script.display()))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        for line in BufReader::new(stdout).lines() {
            if let Some(path) = line?.strip_prefix("ready ") {
                return Ok(Self {
                    kubeconfig: PathBuf::from(path),
                    apiserver_args: apiserver_args.to_vec(),
                    _supervisor: Some(child),
                });
            }
        }
        let status = child.wait()?;
        bail!(
            "{} exited with {status} before it was ready",
            script.display()
        )
    }
}

/// How long a test waits for the cluster to converge: an upper bound for a loaded two-core
/// machine, not an expectation; a passing check returns as soon as it holds.
pub const WAIT: Duration = Duration::from_secs(180);

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

/// The workspace's target folder.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
}

/// Runs cargo in the repository. Guests are built as the workspace builds them, also from a test
/// binary that a fuzzer built with another toolchain (`rustup run`) and instrumentation flags:
/// those are left out, and the toolchain is the repository's.
fn cargo(args: &[&str]) {
    let overridden = std::env::var_os("RUSTUP_TOOLCHAIN").is_some();
    let cargo = match std::env::var("CARGO") {
        Ok(cargo) if !overridden => cargo,
        _ => "cargo".into(),
    };
    let status = Command::new(cargo)
        .args(args)
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTFLAGS")
        .env_remove("RUSTDOCFLAGS")
        .current_dir(repo_root())
        .status()
        .unwrap_or_else(|error| panic!("running cargo {args:?}: {error}"));
    assert!(status.success(), "cargo {args:?} failed with {status}");
}

/// Builds the guest crate `package` for `wasm32-wasip2` (once per test process) and returns
/// the path of a copy of the component that no later build overwrites.
pub fn guest_wasm(package: &str) -> PathBuf {
    guest_wasm_with(package, &[])
}

/// Appends a custom section (id 0) named `name` holding `payload` to a WebAssembly binary;
/// custom sections may appear anywhere in a module or component and change nothing it does.
pub fn append_custom_section(binary: &mut Vec<u8>, name: &str, payload: &[u8]) {
    let mut content = leb128(name.len());
    content.extend_from_slice(name.as_bytes());
    content.extend_from_slice(payload);
    binary.push(0);
    binary.extend(leb128(content.len()));
    binary.extend(content);
}

/// Unsigned LEB128.
fn leb128(mut value: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            bytes.push(byte);
            return bytes;
        }
        bytes.push(byte | 0x80);
    }
}

/// Like [`guest_wasm`], with cargo `features` enabled.
pub fn guest_wasm_with(package: &str, features: &[&str]) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT.lock().expect("build lock");
    let mut name = package.to_owned();
    for feature in features {
        name = format!("{name}-{feature}");
    }
    let copy = target_dir()
        .join("kubewasm-test-guests")
        .join(format!("{}-{name}.wasm", std::process::id()));
    if !built.contains(&copy) {
        let mut args = vec![
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "-p",
            package,
        ];
        let features = features.join(",");
        if !features.is_empty() {
            args.extend(["--features", &features]);
        }
        cargo(&args);
        let output = target_dir()
            .join("wasm32-wasip2/release")
            .join(format!("{}.wasm", package.replace('-', "_")));
        std::fs::create_dir_all(copy.parent().expect("a folder"))
            .and_then(|()| std::fs::copy(&output, &copy))
            .unwrap_or_else(|error| panic!("copying {}: {error}", output.display()));
        built.push(copy.clone());
    }
    copy
}

/// A host configuration running the guest crate `package` for the objects of `namespace`.
pub fn module_config(package: &str, namespace: &str) -> String {
    namespaced_config(&guest_wasm(package), namespace)
}

/// A host configuration running the module at `path` for the objects of `namespace`.
pub fn namespaced_config(path: &Path, namespace: &str) -> String {
    format!(
        "modules:\n  - path: {}\n    namespaces: [{namespace}]\n",
        path.display()
    )
}

/// A language the examples are written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    /// `examples/<example>/rust`, a crate of the workspace.
    Rust,
    /// `examples/<example>/js`.
    JavaScript,
    /// `examples/<example>/python`.
    Python,
    /// `examples/<example>/go`.
    Go,
}

impl Language {
    /// The folder of an example's port in this language.
    pub fn dir(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::JavaScript => "js",
            Language::Python => "python",
            Language::Go => "go",
        }
    }
}

/// Builds the `example` guest written in `language` from source (once per test process) and
/// returns the component's path. Rust examples are the workspace crate named `example`; the
/// others are built by their `examples/<example>/<dir>/build` script.
pub fn example_wasm(example: &str, language: Language) -> PathBuf {
    static BUILT: Mutex<Vec<(String, Language, PathBuf)>> = Mutex::new(Vec::new());
    if language == Language::Rust {
        return guest_wasm(example);
    }
    let mut built = BUILT.lock().expect("build lock");
    if let Some((_, _, path)) = built
        .iter()
        .find(|(name, lang, _)| name == example && *lang == language)
    {
        return path.clone();
    }
    let path = built_by(&format!("examples/{example}/{}/build", language.dir()), &[]);
    built.push((example.to_owned(), language, path.clone()));
    path
}

/// A host configuration running the `example` guest written in `language` for the objects of
/// `namespace`.
pub fn example_config(example: &str, language: Language, namespace: &str) -> String {
    namespaced_config(&example_wasm(example, language), namespace)
}

/// The `kubectl` built with the control plane by `deploy/local/cluster build`.
pub fn kubectl() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| built_by("deploy/local/cluster", &["build"]).join("kubectl"))
        .clone()
}

/// The `helm` built by `deploy/local/helm/build` (from the Go module proxy on first use, then
/// cached).
pub fn helm() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| built_by("deploy/local/helm/build", &[]))
        .clone()
}

/// Runs a build script of the repository (its stderr passed through) and returns the path it
/// prints last.
///
/// # Panics
/// When the script cannot run or fails.
pub fn built_by(script: &str, args: &[&str]) -> PathBuf {
    let output = Command::new(repo_root().join(script))
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|error| panic!("running {script}: {error}"));
    assert!(
        output.status.success(),
        "{script} failed with {}",
        output.status
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    PathBuf::from(stdout.lines().last().unwrap_or_default())
}

/// Builds the `kubewasm` binary (once per test process) and returns its path.
pub fn host_binary() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            cargo(&["build", "-p", "kubewasm", "--bin", "kubewasm"]);
            target_dir().join("debug/kubewasm")
        })
        .clone()
}

/// A `kubewasm run` process. Dropping it kills the process.
pub struct HostProcess {
    child: Child,
    log: PathBuf,
    _dir: TempDir,
}

impl HostProcess {
    /// Starts the host with `config` (YAML) against the test control plane. Its log is written
    /// next to the config, in a folder named after `name`.
    pub fn start(name: &str, config: &str) -> Result<Self> {
        Self::start_with(name, config, &[])
    }

    /// Like [`HostProcess::start`], with more arguments to `kubewasm run`. The metrics and health
    /// probe listeners are off unless `args` set their addresses, so that hosts run side by side.
    pub fn start_with(name: &str, config: &str, args: &[&str]) -> Result<Self> {
        Self::start_via(name, config, control_plane().kubeconfig(), args)
    }

    /// Like [`HostProcess::start_with`], reaching the API server with `kubeconfig`.
    pub fn start_via(name: &str, config: &str, kubeconfig: &Path, args: &[&str]) -> Result<Self> {
        let mut command = Command::new(host_binary());
        command.arg("run").arg("--kubeconfig").arg(kubeconfig);
        Self::spawn(host_dir(name)?, command, config, args)
    }

    /// Starts the host as a pod runs it: without a kubeconfig, with KUBERNETES_SERVICE_HOST
    /// and KUBERNETES_SERVICE_PORT naming the test API server, and `token`, the cluster's CA
    /// and `namespace` in /var/run/secrets/kubernetes.io/serviceaccount, mounted in a mount
    /// namespace of its own (needs root, as kubelet does).
    pub fn start_in_cluster(
        name: &str,
        config: &str,
        args: &[&str],
        token: &str,
        namespace: &str,
    ) -> Result<Self> {
        let scratch = host_dir(name)?;
        let account = scratch.path().join("serviceaccount");
        std::fs::create_dir(&account)?;
        let (server, ca) = cluster_endpoint()?;
        std::fs::write(account.join("token"), token)?;
        std::fs::write(account.join("ca.crt"), ca)?;
        std::fs::write(account.join("namespace"), namespace)?;
        let authority = server
            .strip_prefix("https://")
            .with_context(|| format!("{server} is not an https URL"))?;
        let (host, port) = authority
            .rsplit_once(':')
            .with_context(|| format!("{server} names no port"))?;
        let mut command = Command::new("unshare");
        command
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(
                "mount -t tmpfs tmpfs /var/run && \
                 mkdir -p /var/run/secrets/kubernetes.io/serviceaccount && \
                 cp \"$0\"/* /var/run/secrets/kubernetes.io/serviceaccount/ && exec \"$@\"",
            )
            .arg(&account)
            .arg(host_binary())
            .arg("run")
            .env_remove("KUBECONFIG")
            .env("HOME", scratch.path())
            .env("KUBERNETES_SERVICE_HOST", host)
            .env("KUBERNETES_SERVICE_PORT", port);
        Self::spawn(scratch, command, config, args)
    }

    /// Runs `command` (which ends in `kubewasm run`) with the configuration and log in `dir`.
    fn spawn(dir: TempDir, mut command: Command, config: &str, args: &[&str]) -> Result<Self> {
        let config_path = dir.path().join("config.yaml");
        std::fs::write(&config_path, config)?;
        let log = dir.path().join("host.log");
        let output = std::fs::File::create(&log)?;
        let child = command
            .arg("--config")
            .arg(&config_path)
            .args(listeners_off(args))
            .args(args)
            .env("RUST_LOG", "info,kubewasm=debug")
            .stdin(Stdio::null())
            .stdout(output.try_clone()?)
            .stderr(output)
            .spawn()
            .context("starting kubewasm")?;
        Ok(Self {
            child,
            log,
            _dir: dir,
        })
    }

    /// The host's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The highest resident set size of the process so far, in bytes (`VmHWM`).
    pub fn peak_rss(&self) -> Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .context("VmHWM in /proc/PID/status")?;
        Ok(kib * 1024)
    }

    /// Sends `signal` (such as `STOP` or `CONT`) to the process.
    pub fn signal(&self, signal: &str) -> Result<()> {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()?;
        anyhow::ensure!(status.success(), "kill -{signal} failed");
        Ok(())
    }

    /// Sends SIGTERM and waits for the process to exit; returns whether it exited cleanly, and
    /// prints its exit status and log when it did not.
    pub fn stop(mut self) -> Result<bool> {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        anyhow::ensure!(status.success(), "kill -TERM failed");
        let exit = self.child.wait()?;
        if !exit.success() {
            eprintln!("host {exit} on SIGTERM; its log:\n{}", self.log());
        }
        Ok(exit.success())
    }
}

/// The test API server's URL and its CA certificate (PEM), from the admin kubeconfig.
fn cluster_endpoint() -> Result<(String, Vec<u8>)> {
    let kubeconfig = Kubeconfig::read_from(control_plane().kubeconfig())?;
    let cluster = kubeconfig
        .clusters
        .first()
        .and_then(|c| c.cluster.clone())
        .context("the kubeconfig has no cluster")?;
    let server = cluster.server.context("the cluster has no server")?;
    let path = cluster
        .certificate_authority
        .context("the cluster names no certificate-authority file")?;
    let ca = std::fs::read(&path).with_context(|| format!("reading {path}"))?;
    Ok((server, ca))
}

/// A duration as `Debug` prints it, as in the host's log (`5ms`, `1.28s`, `640µs`).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let (number, unit) = text.split_at(text.find(|c: char| c.is_alphabetic() || c == 'µ')?);
    let number: f64 = number.parse().ok()?;
    let seconds = match unit {
        "s" => number,
        "ms" => number / 1e3,
        "µs" => number / 1e6,
        "ns" => number / 1e9,
        _ => return None,
    };
    Some(Duration::from_secs_f64(seconds))
}

/// `N` distinct loopback ports nothing listens on right now.
pub fn free_ports<const N: usize>() -> Result<[u16; N]> {
    let listeners = (0..N)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()?;
    let mut ports = [0; N];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener.local_addr()?.port();
    }
    Ok(ports)
}

/// `GET path` over HTTP/1.1 from `address` (HOST:PORT); the status code and the body.
pub async fn http_get(address: &str, path: &str) -> Result<(u16, String)> {
    http(address, "GET", path, &[], "").await
}

/// Like [`http_get`], with `headers` (name, value) added to the request.
pub async fn http_get_with(
    address: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(u16, String)> {
    http(address, "GET", path, headers, "").await
}

/// `method path` with `headers` and the JSON `body` over HTTP/1.1 to `address` (HOST:PORT); the
/// status code and the body of the answer, which must not be chunked.
async fn http(
    address: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    let length = body.len();
    let headers: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    stream
        .write_all(
            format!(
                "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n{headers}\
                 Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n{body}"
            )
            .as_bytes(),
        )
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .with_context(|| format!("no header end in {response:?}"))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("no status in {head:?}"))?;
    Ok((status, body.to_owned()))
}

/// Creates the ConfigMap `name` labelled for the `mirror` test guest and waits until a host
/// running it has written `<name>-mirror` with the same value.
pub async fn mirrored(config_maps: &Api<ConfigMap>, name: &str) -> Result<()> {
    let source = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": name, "labels": { "kubewasm.dev/fixture": "mirror" } },
        "data": { "value": name },
    });
    config_maps
        .patch(
            name,
            &kube::api::PatchParams::apply("tests"),
            &kube::api::Patch::Apply(&source),
        )
        .await?;
    let mirror = format!("{name}-mirror");
    let found = eventually(&mirror, WAIT, || async {
        Ok(config_maps.get_opt(&mirror).await?)
    })
    .await?;
    let value = found.data.unwrap_or_default().remove("value");
    anyhow::ensure!(value.as_deref() == Some(name), "{mirror} holds {value:?}");
    Ok(())
}

/// Creates the ServiceAccount `name` in `namespace` and returns a token for it from the
/// TokenRequest API, valid for an hour.
pub async fn service_account_token(client: &Client, namespace: &str, name: &str) -> Result<String> {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), namespace);
    let account: ServiceAccount = serde_json::from_value(serde_json::json!({
        "metadata": { "name": name },
    }))?;
    accounts.create(&PostParams::default(), &account).await?;
    let request: TokenRequest = serde_json::from_value(serde_json::json!({
        "spec": { "audiences": [], "expirationSeconds": 3600 },
    }))?;
    let issued = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await?;
    issued
        .status
        .and_then(|status| status.token)
        .context("the TokenRequest has no token")
}

/// Writes, at `path`, a kubeconfig for the test control plane that authenticates with `token`,
/// as a host running under a service account does.
pub fn token_kubeconfig(path: &Path, token: &str) -> Result<()> {
    let kubeconfig = Kubeconfig::read_from(control_plane().kubeconfig())?;
    let cluster = kubeconfig
        .clusters
        .first()
        .and_then(|c| c.cluster.clone())
        .context("the kubeconfig has no cluster")?;
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "test", "cluster": {
            "server": cluster.server,
            "certificate-authority": cluster.certificate_authority,
        }}],
        "users": [{ "name": "account", "user": { "token": token } }],
        "contexts": [{ "name": "test", "context": { "cluster": "test", "user": "account" } }],
        "current-context": "test",
    });
    std::fs::write(path, serde_json::to_string(&config)?)?;
    Ok(())
}

/// A folder for one host's configuration and log, removed when dropped.
fn host_dir(name: &str) -> Result<TempDir> {
    Ok(tempfile::Builder::new()
        .prefix(&format!("kubewasm-host-{name}-"))
        .tempdir()?)
}

/// `kubewasm run` arguments turning off the HTTP listeners that `args` do not configure.
fn listeners_off(args: &[&str]) -> Vec<&'static str> {
    ["--metrics-bind-address", "--health-probe-bind-address"]
        .into_iter()
        .filter(|flag| !args.contains(flag))
        .flat_map(|flag| [flag, "0"])
        .collect()
}

/// Runs `kubewasm run` with `config` against the test control plane until it exits by itself,
/// and returns its exit status and everything it printed. Its HTTP listeners are off.
pub fn run_host_to_exit(name: &str, config: &str) -> Result<(std::process::ExitStatus, String)> {
    let dir = host_dir(name)?;
    let config_path = dir.path().join("config.yaml");
    std::fs::write(&config_path, config)?;
    let output = Command::new(host_binary())
        .arg("run")
        .arg("--config")
        .arg(&config_path)
        .arg("--kubeconfig")
        .arg(control_plane().kubeconfig())
        .args(listeners_off(&[]))
        .stdin(Stdio::null())
        .output()
        .context("running kubewasm")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok((output.status, text))
}

/// Starts a host named `name` with `config`, runs `exercise` against it, and stops the host with
/// SIGTERM, failing unless it exits cleanly. Prints the host's log when `exercise` fails.
pub async fn with_host(
    name: &str,
    config: &str,
    exercise: impl AsyncFnOnce(&HostProcess) -> Result<()>,
) -> Result<()> {
    with_host_args(name, config, &[], exercise).await
}

/// Like [`with_host`], with more arguments to `kubewasm run`.
pub async fn with_host_args(
    name: &str,
    config: &str,
    args: &[&str],
    exercise: impl AsyncFnOnce(&HostProcess) -> Result<()>,
) -> Result<()> {
    with_started_host(HostProcess::start_with(name, config, args)?, exercise).await
}

/// Runs `exercise` against `host`, then stops it as [`with_host`] does.
pub async fn with_started_host(
    host: HostProcess,
    exercise: impl AsyncFnOnce(&HostProcess) -> Result<()>,
) -> Result<()> {
    let result = tokio::select! {
        result = exercise(&host) => result,
        () = exited(host.child.id()) => Err(anyhow::anyhow!("the host exited during the test")),
    };
    if result.is_err() {
        eprintln!("host log:\n{}", host.log());
    }
    result?;
    anyhow::ensure!(host.stop()?, "the host exits cleanly on SIGTERM");
    Ok(())
}

/// Resolves once the process `pid`, an unreaped child of this one, has exited: it is then a
/// zombie (or gone, once something reaped it).
async fn exited(pid: u32) {
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next());
        if matches!(state, None | Some('Z' | 'X')) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `object` has a controller owner reference to the owner with `uid`.
pub fn is_controlled_by<K: kube::Resource>(object: &K, uid: &str) -> bool {
    object
        .meta()
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.uid == uid && o.controller == Some(true))
}

/// Every object of a kind ever seen in a namespace while it runs, including those created and
/// deleted again between two polls: how a test tells that no duplicate was ever created.
pub struct Recorder {
    /// uid of each object seen, to the uid of its controller owner, if any.
    seen: Arc<Mutex<HashMap<String, Option<String>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    /// Starts watching `api` and returns once the initial list is recorded.
    pub async fn start<K>(api: Api<K>) -> Result<Self>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    {
        use futures::StreamExt;
        use kube::runtime::watcher::{self, Event};
        let seen: Arc<Mutex<HashMap<String, Option<String>>>> = Arc::default();
        let (listed, mut synced) = tokio::sync::watch::channel(false);
        let record = seen.clone();
        let task = tokio::spawn(async move {
            let mut events = watcher::watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = events.next().await {
                let object = match event {
                    Ok(Event::Apply(o) | Event::InitApply(o) | Event::Delete(o)) => o,
                    Ok(Event::InitDone) => {
                        listed.send_replace(true);
                        continue;
                    }
                    _ => continue,
                };
                let meta = object.meta();
                if let Some(uid) = &meta.uid {
                    let owner = meta
                        .owner_references
                        .iter()
                        .flatten()
                        .find(|o| o.controller == Some(true))
                        .map(|o| o.uid.clone());
                    let mut seen = record.lock().expect("recorder lock");
                    let entry = seen.entry(uid.clone()).or_default();
                    if owner.is_some() {
                        *entry = owner;
                    }
                }
            }
        });
        synced.wait_for(|s| *s).await?;
        Ok(Self { seen, task })
    }

    /// How many distinct objects controlled by the owner with `uid` were seen.
    pub fn controlled_by(&self, uid: &str) -> usize {
        let seen = self.seen.lock().expect("recorder lock");
        seen.values().filter(|o| o.as_deref() == Some(uid)).count()
    }

    /// How many distinct objects with a controller owner were seen.
    pub fn controlled(&self) -> usize {
        let seen = self.seen.lock().expect("recorder lock");
        seen.values().filter(|o| o.is_some()).count()
    }

    /// The uids of the objects with a controller owner seen so far.
    pub fn controlled_uids(&self) -> std::collections::HashSet<String> {
        let seen = self.seen.lock().expect("recorder lock");
        seen.iter()
            .filter(|(_, owner)| owner.is_some())
            .map(|(uid, _)| uid.clone())
            .collect()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The WasmControllers of `namespace`.
pub fn wasm_controllers(client: &Client, namespace: &str) -> Api<kube::api::DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk("kubewasm.dev", "v1alpha1", "WasmController");
    Api::namespaced_with(
        client.clone(),
        namespace,
        &kube::api::ApiResource::from_gvk_with_plural(&gvk, "wasmcontrollers"),
    )
}

/// Applies every object of a YAML file (one or more documents) with server-side apply.
pub async fn apply_yaml(client: &Client, path: &Path, namespace: Option<&str>) -> Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    apply_yaml_text(client, &text, namespace)
        .await
        .with_context(|| format!("applying {}", path.display()))
}

/// Applies every object of YAML `text` with server-side apply, each in its own namespace, else
/// in `namespace`.
pub async fn apply_yaml_text(client: &Client, text: &str, namespace: Option<&str>) -> Result<()> {
    use kube::api::{DynamicObject, Patch, PatchParams};
    use kube::discovery::pinned_kind;
    use serde::Deserialize;
    for document in serde_yaml::Deserializer::from_str(text) {
        let object = DynamicObject::deserialize(document)?;
        let types = object
            .types
            .clone()
            .context("object without apiVersion/kind")?;
        let gvk = kube::api::GroupVersionKind::try_from(&types)?;
        let (resource, capabilities) = pinned_kind(client, &gvk).await?;
        let name = object
            .metadata
            .name
            .clone()
            .context("object without a name")?;
        let namespace = object.metadata.namespace.as_deref().or(namespace);
        let api: Api<DynamicObject> = match (capabilities.scope, namespace) {
            (kube::discovery::Scope::Namespaced, Some(ns)) => {
                Api::namespaced_with(client.clone(), ns, &resource)
            }
            _ => Api::all_with(client.clone(), &resource),
        };
        api.patch(
            &name,
            &PatchParams::apply("kubewasm-tests").force(),
            &Patch::Apply(&object),
        )
        .await
        .with_context(|| format!("applying {name}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_custom_section_is_appended_whole() {
        let mut binary = b"\0asm".to_vec();
        append_custom_section(&mut binary, "n", &[7; 200]);
        // id 0, size 202 as LEB128 (0xca 0x01), name length 1, "n", the payload.
        assert_eq!(&binary[4..9], &[0, 0xca, 0x01, 1, b'n']);
        assert_eq!(binary.len(), 4 + 3 + 202);
    }
}
