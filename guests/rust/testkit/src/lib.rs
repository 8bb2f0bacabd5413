//! Runs a kubewasm guest component on fixture objects in a plain `cargo test`, through the
//! host's own call path: the component is loaded and checked as the host loads it, and each
//! reconcile goes through the host's dispatch, limits and declared-kind checks, against an
//! in-memory [`OfflineBackend`] instead of a cluster.
//!
//! ```no_run
//! use kubewasm_testkit::{Harness, Outcome, build};
//! use serde_json::json;
//!
//! let harness = Harness::new(build(env!("CARGO_MANIFEST_DIR")))
//!     .with_objects([json!({"apiVersion": "v1", "kind": "Pod",
//!                           "metadata": {"name": "orphan", "namespace": "default"}})]);
//! let rendered = harness.reconcile(&json!({
//!     "apiVersion": "example.com/v1", "kind": "Greeting",
//!     "metadata": {"name": "hello", "namespace": "default"},
//! }));
//! assert_eq!(rendered.result, Ok(Outcome::Done));
//! assert_eq!(rendered.applies().count(), 1);
//! ```
//!
//! Guarantees:
//!
//! - Guests run on a deterministic runtime (a stopped wall clock, seeded random sources): the
//!   same objects give the same writes, names and timestamps on every run.
//! - Objects are held as the host's cache holds them; one without `metadata.uid` gets a stable
//!   uid. The writes of a call are applied to the fixture, so a later call reads them.
//! - A component is compiled once per test process, however many harnesses use it.
//!
//! The harness blocks on its own Tokio runtime: use it from `#[test]`, not `#[tokio::test]`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use kube::api::GroupVersionKind;
use kube::core::GroupVersion;
use kubewasm::wasm::backend::Backend;
use kubewasm::wasm::declaration::Metadata;
use kubewasm::wasm::dispatch::Entry;
use kubewasm::wasm::limits::CallLimits;
use kubewasm::wasm::module::{self, Module};
use kubewasm::wasm::runtime::Runtime;
use serde_json::Value;

pub use kubewasm::cmd::render::Rendered;
pub use kubewasm::wasm::backend::{
    ApplyRequest, DeleteRequest, EventRequest, LogLine, PatchRequest,
};
pub use kubewasm::wasm::bindings::kubewasm::controller::log::Level;
pub use kubewasm::wasm::dispatch::{Failure, Outcome};
pub use kubewasm::wasm::offline::{OfflineBackend, Write};

/// A guest component and the fixture objects it runs against.
pub struct Harness {
    module: Arc<Module>,
    backend: Arc<OfflineBackend>,
    limits: CallLimits,
    tokio: tokio::runtime::Runtime,
}

impl Harness {
    /// Loads the component at `wasm` (compiled once per process) with the host's default
    /// limits and no objects.
    ///
    /// # Panics
    ///
    /// If the component does not load as the host would load it; the message says why.
    pub fn new(wasm: impl AsRef<Path>) -> Self {
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a Tokio runtime");
        let limits = CallLimits::from(kubewasm::config::Limits::default());
        let module = tokio.block_on(load(wasm.as_ref(), &limits));
        Self {
            module,
            backend: Arc::new(OfflineBackend::default()),
            limits,
            tokio,
        }
    }

    /// Adds `objects` (Kubernetes JSON with `apiVersion`, `kind` and `metadata.name`) to the
    /// fixture, replacing those of the same kind, namespace and name.
    ///
    /// # Panics
    ///
    /// If an object has no `apiVersion`, `kind` or `metadata.name`.
    pub fn with_objects(self, objects: impl IntoIterator<Item = Value>) -> Self {
        for object in objects {
            self.put(object);
        }
        self
    }

    /// Adds the objects of a YAML or JSON file, or of every such file of a folder (see
    /// [`kubewasm::cmd::render::read_objects`]).
    ///
    /// # Panics
    ///
    /// If the file cannot be read or holds something else than Kubernetes objects.
    pub fn with_files(self, path: impl AsRef<Path>) -> Self {
        let objects =
            kubewasm::cmd::render::read_objects(path.as_ref()).unwrap_or_else(|e| panic!("{e}"));
        self.with_objects(objects)
    }

    /// Replaces the host's default limits of each call.
    pub fn with_limits(mut self, limits: CallLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Stores `object` in the fixture, as a change made by someone else than the guest.
    ///
    /// # Panics
    ///
    /// If the object has no `apiVersion`, `kind` or `metadata.name`.
    pub fn put(&self, object: Value) {
        self.backend.put(kubewasm::cmd::render::as_cached(object));
    }

    /// What the component declares.
    pub fn metadata(&self) -> &Metadata {
        &self.module.metadata
    }

    /// Stores `object` in the fixture and reconciles it.
    ///
    /// # Panics
    ///
    /// If `object` is not one the host would hand to the guest (another kind, namespace or
    /// labels than the primary selection). A failing guest does not panic: see
    /// [`Rendered::result`].
    pub fn reconcile(&self, object: &Value) -> Rendered {
        self.call(Entry::Reconcile, object)
    }

    /// Stores `object` in the fixture and calls `finalize` with it, as the host does once an
    /// object carrying the guest's finalizer is being deleted.
    ///
    /// # Panics
    ///
    /// As [`Harness::reconcile`], and if the guest declares no finalizer.
    pub fn finalize(&self, object: &Value) -> Rendered {
        self.call(Entry::Finalize, object)
    }

    fn call(&self, entry: Entry, object: &Value) -> Rendered {
        self.tokio
            .block_on(kubewasm::cmd::render::call(
                runtime(),
                &self.module,
                &self.backend,
                &self.limits,
                entry,
                object.clone(),
            ))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The fixture's object of this `apiVersion`, `kind`, namespace and name, as the guest
    /// would read it now.
    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let kind = kind_of(api_version, kind);
        let found = self
            .backend
            .get(&kind, namespace, name)
            .expect("the fixture answers");
        found.map(|json| serde_json::from_str(&json).expect("the fixture holds JSON"))
    }

    /// The fixture's objects of this `apiVersion` and `kind`, in one namespace or all, ordered
    /// by namespace then name.
    pub fn list(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Vec<Value> {
        let kind = kind_of(api_version, kind);
        let found = self
            .backend
            .list(&kind, namespace, None)
            .expect("the fixture answers");
        found
            .iter()
            .map(|json| serde_json::from_str(json).expect("the fixture holds JSON"))
            .collect()
    }
}

/// The process's deterministic WebAssembly runtime.
fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| Runtime::deterministic().unwrap_or_else(|e| panic!("{e}")))
}

/// The module at `path`, loaded once per process.
async fn load(path: &Path, limits: &CallLimits) -> Arc<Module> {
    static MODULES: Mutex<BTreeMap<PathBuf, Arc<Module>>> = Mutex::new(BTreeMap::new());
    let key = path.canonicalize().unwrap_or_else(|_| path.to_owned());
    if let Some(module) = lock(&MODULES).get(&key) {
        return module.clone();
    }
    let module = module::load(runtime(), path, limits)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    lock(&MODULES).entry(key).or_insert(module).clone()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Builds the guest crate in `crate_dir` for `wasm32-wasip2` in release mode, once per process,
/// and returns the path of its component. Cargo runs as usual: in the crate's workspace, with
/// its `CARGO_TARGET_DIR` if set; its errors are printed.
///
/// # Panics
///
/// If cargo fails or the crate builds no `cdylib`.
pub fn build(crate_dir: impl AsRef<Path>) -> PathBuf {
    static BUILT: Mutex<BTreeMap<PathBuf, PathBuf>> = Mutex::new(BTreeMap::new());
    let manifest = crate_dir.as_ref().join("Cargo.toml");
    let manifest = manifest
        .canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    let mut built = lock(&BUILT);
    if let Some(wasm) = built.get(&manifest) {
        return wasm.clone();
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut child = Command::new(cargo)
        .args(["build", "--quiet", "--release", "--target", "wasm32-wasip2"])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--message-format=json-render-diagnostics")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running cargo: {e}"));
    let stdout = child.stdout.take().expect("cargo's stdout is piped");
    let mut wasm = None;
    for line in BufReader::new(stdout).lines() {
        let message: Value = match line.map(|line| serde_json::from_str(&line)) {
            Ok(Ok(message)) => message,
            _ => continue,
        };
        let is_component = message["reason"] == "compiler-artifact"
            && message["manifest_path"].as_str() == manifest.to_str()
            && message["target"]["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|k| k == "cdylib"));
        if is_component {
            wasm = message["filenames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .find(|file| file.ends_with(".wasm"))
                .map(PathBuf::from);
        }
    }
    let status = child.wait().expect("waiting for cargo");
    assert!(
        status.success(),
        "building {} for wasm32-wasip2 failed",
        manifest.display()
    );
    let wasm = wasm.unwrap_or_else(|| panic!("{} builds no cdylib", manifest.display()));
    built.insert(manifest, wasm.clone());
    wasm
}

/// The kind named by an `apiVersion` (`group/version`, or `version` for the core group) and a
/// `kind`.
fn kind_of(api_version: &str, kind: &str) -> GroupVersionKind {
    let version: GroupVersion = api_version.parse().expect("an apiVersion parses");
    version.with_kind(kind)
}
