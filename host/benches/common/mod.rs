//! What the benchmarks share: the PodSet fixture, the guests' paths, percentiles and a
//! description of the machine.
#![allow(dead_code, reason = "each benchmark uses a part")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use kube::api::GroupVersionKind;
use kubewasm::wasm::backend::{Backend, Scope};
use kubewasm::wasm::bindings::types;
use kubewasm::wasm::env::GuestEnv;
use kubewasm::wasm::limits::CallLimits;
use kubewasm::wasm::module::Module;
use kubewasm::wasm::offline::{OfflineBackend, Write};
use kubewasm::wasm::permissions::Permissions;
use serde_json::{Value, json};

pub const NAMESPACE: &str = "bench";
pub const PODSET_UID: &str = "podset-uid";
pub const PODS: usize = 3;
/// The PodSet is padded with template annotations until its JSON is at least this long.
pub const PODSET_BYTES: usize = 4096;

/// A fixture of one PodSet of about 4 KiB and the pods it controls, as many as its
/// `spec.replicas`, all Pending, so that a reconcile lists the pods and writes nothing but the
/// PodSet's status.
pub fn podset_fixture() -> OfflineBackend {
    let podset = podset();
    let pods: Vec<Value> = (0..PODS).map(|index| pod(&podset, index)).collect();
    OfflineBackend::new(std::iter::once(podset).chain(pods).collect())
}

/// The scope of a call about the fixture's PodSet.
fn podset_scope(kind: GroupVersionKind) -> Scope {
    Scope {
        kind,
        namespace: Some(NAMESPACE.into()),
        name: "web".into(),
        uid: Some(PODSET_UID.into()),
        deleting: false,
    }
}

/// The environment of `module`'s calls on `backend`, with every kind and verb allowed, and the
/// scope of a call about the fixture's PodSet.
pub fn guest_env(
    module: &Module,
    backend: Arc<OfflineBackend>,
    limits: &CallLimits,
) -> (Arc<GuestEnv>, Scope) {
    let env = GuestEnv::new(
        &module.metadata.name,
        module.metadata.declared(),
        backend,
        limits.host_call_timeout,
        Permissions::new(None),
    );
    let scope = podset_scope(module.metadata.primary.kind.clone());
    (Arc::new(env), scope)
}

/// Asserts that the reconcile of `guest` wrote the PodSet's status and nothing else.
pub fn assert_status_only(guest: &str, backend: &OfflineBackend) {
    let writes = backend.take_writes();
    assert!(
        matches!(writes.as_slice(), [Write::Apply(apply)] if apply.status),
        "{guest}: expected one status apply, got {writes:?}"
    );
}

/// The workspace's root folder.
pub fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the host crate is inside the workspace")
}

/// The workspace's target folder; a relative `CARGO_TARGET_DIR` is taken from the workspace
/// root, where cargo runs.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace().join("target"), |dir| workspace().join(dir))
}

/// The Rust podset guest, built with cargo if it is not there.
pub fn rust_podset() -> PathBuf {
    let wasm = target_dir().join("wasm32-wasip2/release/podset.wasm");
    if !wasm.exists() {
        eprintln!("building {}", wasm.display());
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .current_dir(workspace())
            .args([
                "build",
                "--release",
                "--target",
                "wasm32-wasip2",
                "-p",
                "podset",
            ])
            .status()
            .expect("running cargo");
        assert!(status.success(), "building the podset guest failed");
    }
    wasm
}

/// "nproc N, CPU model, load average L": other work on the machine skews the figures.
pub fn machine() -> String {
    format!(
        "nproc {}, {}, load average {}",
        nproc(),
        cpu_model(),
        load_average()
    )
}

/// A request to reconcile the PodSet as the backend holds it now.
pub fn resync_request(backend: &OfflineBackend, scope: &Scope) -> types::Request {
    let podset = backend
        .get(&scope.kind, scope.namespace.as_deref(), &scope.name)
        .expect("the fixture answers")
        .expect("the PodSet exists");
    types::Request {
        key: types::ObjectKey {
            namespace: scope.namespace.clone(),
            name: scope.name.clone(),
        },
        reason: types::Reason::Resync,
        attempt: 1,
        object: Some(podset.to_string()),
    }
}

/// Nearest-rank percentile of sorted samples, in microseconds.
pub fn percentile(sorted: &[Duration], fraction: f64) -> f64 {
    let rank = (fraction * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1e6
}

/// A PodSet padded to [`PODSET_BYTES`] with template labels and annotations.
pub fn podset() -> Value {
    let labels: serde_json::Map<String, Value> = std::iter::once(("app".into(), json!("web")))
        .chain((0..8).map(|i| {
            (
                format!("bench.kubewasm.dev/label-{i}"),
                json!(format!("value-{i}")),
            )
        }))
        .collect();
    let mut podset = json!({
        "apiVersion": "kubewasm.dev/v1alpha1",
        "kind": "PodSet",
        "metadata": {
            "name": "web",
            "namespace": NAMESPACE,
            "uid": PODSET_UID,
            "resourceVersion": "1",
            "generation": 1,
            "creationTimestamp": "2025-01-01T00:00:00Z",
        },
        "spec": {
            "replicas": PODS,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": labels, "annotations": {}},
                "spec": {"containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    });
    let mut index = 0;
    while podset.to_string().len() < PODSET_BYTES {
        let key = format!("bench.kubewasm.dev/annotation-{index:02}");
        podset["spec"]["template"]["metadata"]["annotations"][key.as_str()] = json!("x".repeat(64));
        index += 1;
    }
    podset
}

/// Pod `index` of the PodSet, created from its template and controlled by it.
pub fn pod(podset: &Value, index: usize) -> Value {
    let template = &podset["spec"]["template"];
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("web-{index}"),
            "namespace": NAMESPACE,
            "uid": format!("pod-uid-{index}"),
            "resourceVersion": "1",
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "labels": template["metadata"]["labels"],
            "annotations": template["metadata"]["annotations"],
            "ownerReferences": [{
                "apiVersion": "kubewasm.dev/v1alpha1",
                "kind": "PodSet",
                "name": "web",
                "uid": PODSET_UID,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": template["spec"],
        "status": {"phase": "Pending"},
    })
}

fn nproc() -> String {
    Command::new("nproc")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map_or_else(|| "unknown".into(), |n| n.trim().to_owned())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("model name")?.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU model".into())
}

/// The one-minute load average: other work on the machine skews the figures.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|loads| loads.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into())
}
