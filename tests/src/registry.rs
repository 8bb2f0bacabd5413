//! A real OCI registry on loopback: the CNCF distribution registry built by
//! `deploy/local/registry/build` (from the Go module proxy on first use, then cached).
//!
//! Each [`Registry`] serves plain HTTP on `127.0.0.1` at a port of its own and stores blobs and
//! manifests on the filesystem in a folder it owns, beside its configuration and its log.
//! Manifests may be deleted. It reaches no network: trace export is off and nothing else in its
//! configuration talks to another service. The process runs with a parent-death signal, so it
//! never outlives the test process, and dropping a `Registry` kills it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Once, OnceLock, mpsc};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::{built_by, free_ports, host_binary, http_get};

/// How a registry's folder in the temporary folder is named: this, the test process's id, `-`
/// and a random part.
const FOLDER_PREFIX: &str = "kubewasm-registry-";

/// How long a start waits for `/v2/` to answer: an upper bound for a loaded machine.
const READY: Duration = Duration::from_secs(60);

/// The `registry` built by `deploy/local/registry/build`; the `htpasswd` helper lies beside it.
pub fn registry_binary() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| built_by("deploy/local/registry/build", &[]))
        .clone()
}

/// Pushes `module` as `reference` with `kubewasm push`, anonymously; returns the pinned
/// reference.
pub fn push(module: &Path, reference: &str) -> anyhow::Result<String> {
    push_by(&host_binary(), module, reference)
}

/// [`push`] with the `kubewasm` binary `program`.
pub fn push_by(program: &Path, module: &Path, reference: &str) -> anyhow::Result<String> {
    let output = Command::new(program)
        .arg("push")
        .arg(module)
        .arg(reference)
        .env("DOCKER_CONFIG", "/nonexistent")
        .output()?;
    anyhow::ensure!(
        output.status.success(),
        "push: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8(output.stdout)?.trim().to_owned())
}

/// Pushes `module` as `reference` with `kubewasm push` as `user` with `password`; returns the
/// pinned reference.
pub fn push_as(
    module: &Path,
    reference: &str,
    user: &str,
    password: &str,
) -> anyhow::Result<String> {
    use std::io::Write as _;
    let mut child = Command::new(host_binary())
        .arg("push")
        .arg(module)
        .arg(reference)
        .args(["--username", user])
        .env("DOCKER_CONFIG", "/nonexistent")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(format!("{password}\n").as_bytes())?;
    let output = child.wait_with_output()?;
    anyhow::ensure!(
        output.status.success(),
        "push: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8(output.stdout)?.trim().to_owned())
}

/// A `kubernetes.io/dockerconfigjson` Secret `name` holding `user` and `password` for the
/// registry at `address`.
pub fn pull_secret(name: &str, address: &str, user: &str, password: &str) -> serde_json::Value {
    let auth = basic_authorization(user, password);
    let auth = auth.trim_start_matches("Basic ");
    let config = serde_json::json!({ "auths": { address: { "auth": auth } } });
    serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": name },
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": { ".dockerconfigjson": config.to_string() },
    })
}

/// The value of an `Authorization` header carrying `user` and `password` as basic credentials.
pub fn basic_authorization(user: &str, password: &str) -> String {
    // Kubernetes encodes bytes as base64: ByteString serializes to exactly that string.
    let encoded = serde_json::to_value(k8s_openapi::ByteString(
        format!("{user}:{password}").into_bytes(),
    ))
    .expect("bytes serialize");
    format!(
        "Basic {}",
        encoded.as_str().expect("bytes serialize to a string")
    )
}

/// The SHA-256 of `bytes` in lowercase hex, as digests name blobs.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let digest = <sha2::Sha256 as sha2::Digest>::digest(bytes);
    digest.iter().fold(String::new(), |mut hex, b| {
        let _ = write!(hex, "{b:02x}");
        hex
    })
}

/// Pushes `layer` with `config` (each a media type and bytes) as `reference` on a loopback
/// registry, as a tool other than kubewasm might: nothing is checked.
pub async fn push_raw(
    reference: &str,
    config: (&str, Vec<u8>),
    layer: (&str, Vec<u8>),
) -> anyhow::Result<()> {
    use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
    use oci_client::manifest::OciImageManifest;
    use oci_client::secrets::RegistryAuth;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = oci_client::Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..ClientConfig::default()
    });
    let reference: oci_client::Reference = reference.parse()?;
    let layers = [ImageLayer::new(layer.1, layer.0.into(), None)];
    let config = Config::new(config.1, config.0.into(), None);
    let manifest = OciImageManifest::build(&layers, &config, None);
    client
        .push(
            &reference,
            &layers,
            config,
            &RegistryAuth::Anonymous,
            Some(manifest),
        )
        .await?;
    Ok(())
}

/// The anonymous registry of this test process, started on first use. It stops when the process
/// exits; its folder stays until a later test process starts a registry.
pub fn shared() -> &'static Registry {
    static SHARED: OnceLock<Registry> = OnceLock::new();
    SHARED.get_or_init(Registry::start)
}

/// A running registry; dropping it kills the process and removes its folder.
pub struct Registry {
    /// Holds `config.yml`, `registry.log`, `storage/` and, with authentication, `htpasswd`.
    dir: TempDir,
    port: u16,
    /// Whether `/v2/` asks for credentials (401) rather than answering 200.
    authenticated: bool,
    child: Option<Child>,
}

impl Registry {
    /// Starts an anonymous registry and returns once `/v2/` answers 200.
    ///
    /// # Panics
    /// When it cannot be built or started; the message carries its log.
    pub fn start() -> Registry {
        Self::launch(None)
    }

    /// Starts a registry that admits only `user` with `password` (HTTP basic authentication
    /// against an htpasswd file) and returns once `/v2/` answers 401 to a request without them.
    ///
    /// # Panics
    /// When it cannot be built or started; the message carries its log.
    pub fn start_with_auth(user: &str, password: &str) -> Registry {
        Self::launch(Some((user, password)))
    }

    fn launch(credentials: Option<(&str, &str)>) -> Registry {
        static SWEPT: Once = Once::new();
        SWEPT.call_once(sweep_folders);
        let dir = tempfile::Builder::new()
            .prefix(&format!("{FOLDER_PREFIX}{}-", std::process::id()))
            .tempdir()
            .expect("creating the registry's folder");
        let [port] = free_ports().expect("picking a free port");
        let mut config = serde_json::json!({
            "version": "0.1",
            "log": { "level": "info", "formatter": "text" },
            "storage": {
                "filesystem": { "rootdirectory": dir.path().join("storage") },
                "delete": { "enabled": true },
                "redirect": { "disable": true },
            },
            "http": { "addr": format!("127.0.0.1:{port}") },
        });
        if let Some((user, password)) = credentials {
            let path = dir.path().join("htpasswd");
            std::fs::write(&path, htpasswd_line(user, password)).expect("writing htpasswd");
            config["auth"] = serde_json::json!({
                "htpasswd": { "realm": "kubewasm-tests", "path": path },
            });
        }
        let text = serde_yaml::to_string(&config).expect("configuration serializes");
        std::fs::write(dir.path().join("config.yml"), text).expect("writing config.yml");
        let mut registry = Registry {
            dir,
            port,
            authenticated: credentials.is_some(),
            child: None,
        };
        registry.restart();
        registry
    }

    /// `127.0.0.1:PORT`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `127.0.0.1:PORT/<repo_and_tag>`: an image reference to this registry.
    pub fn reference(&self, repo_and_tag: &str) -> String {
        format!("{}/{repo_and_tag}", self.address())
    }

    /// Kills the registry as a crash would: nothing answers on its port until
    /// [`Registry::restart`].
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the registry again (killing it first if it runs) on the same port with the same
    /// storage and credentials, so everything pushed before is still there, and returns once
    /// `/v2/` answers.
    ///
    /// # Panics
    /// When it does not answer in time; the message carries its log.
    pub fn restart(&mut self) {
        self.stop();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("opening the registry's log");
        let mut command = Command::new("setpriv");
        command
            .args(["--pdeathsig", "TERM", "--"])
            .arg(registry_binary())
            .arg("serve")
            .arg(self.dir.path().join("config.yml"))
            // The default exporter sends traces to localhost:4318.
            .env("OTEL_TRACES_EXPORTER", "none")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("duplicating the log's handle"))
            .stderr(log);
        let child = spawn_from_lasting_thread(command).expect("running setpriv for the registry");
        self.child = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let expected = if self.authenticated { 401 } else { 200 };
        let deadline = Instant::now() + READY;
        loop {
            let child = self.child.as_mut().expect("the registry was started");
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "the registry exited with {status} before /v2/ answered; its log:\n{}",
                    self.log()
                );
            }
            let last = match v2_status(&self.address()) {
                Ok(status) if status == expected => return,
                Ok(status) => format!("/v2/ answered {status}"),
                Err(error) => format!("{error:#}"),
            };
            if Instant::now() >= deadline {
                panic!(
                    "the registry at {} did not answer /v2/ with {expected} within {READY:?} \
                     ({last}); its log:\n{}",
                    self.address(),
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("registry.log")
    }

    /// How many requests with `method` to a path starting with `prefix` (such as
    /// `/v2/mirror/manifests/`) the registry's access log shows.
    pub fn requests(&self, method: &str, prefix: &str) -> usize {
        let request = format!("\"{method} {prefix}");
        self.log().lines().filter(|l| l.contains(&request)).count()
    }

    /// What the registry logged, its access lines among it (one per request).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Removes the folders of registries whose test process is gone: nothing drops the shared
/// registry, and a killed process drops nothing.
fn sweep_folders() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|name| name.strip_prefix(FOLDER_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok());
        if let Some(pid) = pid
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The htpasswd line for `user` with `password`, hashed with bcrypt by the helper built beside
/// the registry.
fn htpasswd_line(user: &str, password: &str) -> String {
    let helper = registry_binary().with_file_name("htpasswd");
    let output = Command::new(&helper)
        .args([user, password])
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|error| panic!("running {}: {error}", helper.display()));
    assert!(
        output.status.success(),
        "{} failed with {}",
        helper.display(),
        output.status
    );
    String::from_utf8(output.stdout).expect("htpasswd prints UTF-8")
}

/// The status of `GET /v2/` at `address`, from a thread and runtime of its own: the caller may
/// be inside a test's runtime.
fn v2_status(address: &str) -> anyhow::Result<u16> {
    let address = address.to_owned();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async { Ok(http_get(&address, "/v2/").await?.0) })
    })
    .join()
    .expect("the probe thread does not panic")
}

/// Spawns `command` from a thread that lives as long as the process. A parent-death signal
/// fires when the thread that started the child ends, not the process, and every test runs in
/// a thread of its own that ends with it.
fn spawn_from_lasting_thread(command: Command) -> std::io::Result<Child> {
    type Request = (Command, mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: OnceLock<mpsc::Sender<Request>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (requests, received) = mpsc::channel::<Request>();
        std::thread::spawn(move || {
            for (mut command, answer) in received {
                let _ = answer.send(command.spawn());
            }
        });
        requests
    });
    let (answer, answered) = mpsc::channel();
    spawner
        .send((command, answer))
        .expect("the spawner thread runs");
    answered.recv().expect("the spawner thread answers")
}

#[cfg(test)]
mod tests {
    #[test]
    fn basic_authorization_is_base64() {
        assert_eq!(
            super::basic_authorization("user", "pass"),
            "Basic dXNlcjpwYXNz"
        );
    }
}
