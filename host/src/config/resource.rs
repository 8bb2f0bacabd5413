//! The `WasmController` custom resource (`kubewasm.dev/v1alpha1`) as Rust types: its spec, its
//! status, and the CustomResourceDefinition generated from them, which
//! `deploy/crds/wasmcontrollers.yaml` holds (a test fails when the file and the types differ;
//! `KUBEWASM_WRITE_CRD=1 cargo test -p kubewasm crd` writes it again).
//!
//! The schema is what the API server enforces; what it cannot express (the host's maxima, a
//! grant's namespaces, durations) is validated by [`crate::config::controller::parse_spec`],
//! which reads the same fields.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A duration such as `5m` or `1h30m`.
const DURATION: &str = "^([0-9]+(ms|s|m|h))+$";

/// One controller run by kubewasm: its module (from an OCI registry, a ConfigMap, a Secret or,
/// where the host allows it, a file), what it may touch, its limits and its revision policy.
/// Namespaced: a WasmController watches and writes only its own namespace, unless it lives in
/// one of the namespaces the host names as cluster-wide (`controllers.clusterNamespaces`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "kubewasm.dev",
    version = "v1alpha1",
    kind = "WasmController",
    plural = "wasmcontrollers",
    namespaced,
    status = "WasmControllerStatus",
    shortname = "wasmctl",
    category = "kubewasm",
    doc = "One controller run by kubewasm: its module, what it may touch, its limits and its revision policy.",
    printcolumn = r#"{"name": "Controller", "type": "string", "jsonPath": ".status.controllerName"}"#,
    printcolumn = r#"{"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name": "Reason", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name": "Digest", "type": "string", "jsonPath": ".status.digest", "priority": 1}"#,
    printcolumn = r#"{"name": "Contract", "type": "string", "jsonPath": ".status.contract", "priority": 1}"#,
    printcolumn = r#"{"name": "Replica", "type": "string", "jsonPath": ".status.replica", "priority": 1}"#,
    printcolumn = r#"{"name": "Paused", "type": "boolean", "jsonPath": ".spec.paused"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WasmControllerSpec {
    /// Where the component comes from; exactly one source.
    pub module: ModuleSource,
    /// The controller's name in metrics, logs, Events and its field manager; default:
    /// <namespace>.<the name the module declares> for a controller confined to its namespace,
    /// else the name the module declares. Where two objects set one name, the older one runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub controller_name: Option<String>,
    /// Stops the controller: its guest is unloaded and informers no other guest uses stop;
    /// unpausing fetches and loads the module again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// Namespaces to watch. Outside the host's cluster-wide namespaces, only this object's own
    /// namespace may be named; empty means that namespace alone there, and every namespace in
    /// a cluster-wide one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256), inner(length(max = 63)))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub namespaces: Option<Vec<String>>,
    /// Replaces the concurrency the module declares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub max_concurrency: Option<i32>,
    /// Replaces the resync period the module declares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub resync_seconds: Option<i32>,
    /// The limits of the controller's instances and calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsSpec>,
    /// RBAC-like rules of what the controller may touch; absent: anything on the kinds it
    /// declares. Never more than the host's own RBAC allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub grants: Option<Vec<GrantSpec>>,
    /// The retries of its workqueue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueSpec>,
    /// Fields removed from the objects it reads before they are cached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheSpec>,
    /// Automatic rollback, on unless disabled: a new revision that fails to load, or whose own
    /// reconciles fail `failures` times in a row within `window`, is replaced by the last good
    /// one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<RollbackSpec>,
    /// How many replaced revisions status keeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100), extend("default" = 10))]
    pub revision_history_limit: Option<i32>,
}

/// Where the component comes from; exactly one source.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "[has(self.image), has(self.configMap), has(self.secret), has(self.path)].filter(x, x).size() == 1",
        "message": "set exactly one of image, configMap, secret and path",
    },
    {
        "rule": "!has(self.imagePullSecret) || has(self.image)",
        "message": "imagePullSecret applies only to an image",
    },
]))]
pub struct ModuleSource {
    /// An OCI reference to a WebAssembly artifact: registry/repository:tag, or @sha256:... to
    /// pin a digest. A tag is resolved again every pollInterval and a new digest rolled out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub image: Option<String>,
    /// A kubernetes.io/dockerconfigjson Secret of this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub image_pull_secret: Option<String>,
    /// How often the source is read again, such as 5m, and a changed module rolled out: a tag
    /// resolved again (default 5m), a ConfigMap, Secret or path read again (default 30s). 0s
    /// never; an image by digest never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION))]
    pub poll_interval: Option<String>,
    /// A key of a ConfigMap of this namespace (binaryData or data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<KeySelector>,
    /// A key of a Secret of this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<KeySelector>,
    /// A file on the host's filesystem; only where the host allows paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub path: Option<String>,
}

/// A key of an object of this namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct KeySelector {
    /// The object's name.
    #[schemars(length(max = 253))]
    pub name: String,
    /// The key.
    #[schemars(length(max = 253))]
    pub key: String,
}

/// A number of bytes, or a quantity such as `64Mi`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(untagged)]
pub enum ByteSize {
    /// A number of bytes.
    Number(serde_json::Number),
    /// A quantity.
    Quantity(String),
}

impl JsonSchema for ByteSize {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ByteSize".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "x-kubernetes-int-or-string": true })
    }
}

/// The limits of the controller's instances and calls.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LimitsSpec {
    /// The wall-clock deadline of one reconcile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_ms: Option<i64>,
    /// The deadline of one API call made for the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub host_call_timeout_ms: Option<i64>,
    /// The linear memory of one instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<ByteSize>,
    /// The JSON of one apply or patch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_bytes: Option<ByteSize>,
    /// The log output of one call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_bytes: Option<ByteSize>,
    /// The error message of a reconcile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_bytes: Option<ByteSize>,
    /// The keys one map-keys call may return.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub map_keys: Option<i32>,
    /// The guest's lines per second into the host's log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub log_lines_per_second: Option<i32>,
}

/// A rule of what the controller may touch, as in RBAC.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrantSpec {
    /// API groups (`""` is the core group, `*` any).
    pub api_groups: Vec<String>,
    /// Resources by their plural, with `/subresource` where needed (`*` any).
    pub resources: Vec<String>,
    /// Verbs (`*` any).
    pub verbs: Vec<String>,
    /// Namespaces; empty: every namespace the controller runs in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
}

/// The retries of the controller's workqueue; what it leaves out is the host's.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueSpec {
    /// The backoff after a key's first failure, doubling after each further one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub base_backoff_ms: Option<i64>,
    /// The longest backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_backoff_seconds: Option<i64>,
    /// Retries per second, all keys together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub qps: Option<i32>,
    /// Retries allowed at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub burst: Option<i32>,
}

/// Fields removed from the objects the controller reads before they are cached.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct CacheSpec {
    /// The rules, each of some kinds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drop: Vec<DropSpec>,
}

/// Fields removed from every object of the matching kinds.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DropSpec {
    /// API groups it applies to; empty: every group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// Kinds it applies to; empty: every kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
    /// JSON pointers to the fields removed.
    pub fields: Vec<String>,
}

/// Automatic rollback of a new revision.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollbackSpec {
    /// Whether a failing new revision is replaced by the last good one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub enabled: Option<bool>,
    /// The module's own failed reconciles in a row that make a revision bad.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = 5))]
    pub failures: Option<i32>,
    /// Within how long of its start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION), extend("default" = "10m"))]
    pub window: Option<String>,
}

/// What runs for a WasmController, and how it went.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WasmControllerStatus {
    /// The generation of the spec this status is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Progressing` and `Degraded`; on a sharded host, `ShardLabels` while the
    /// sharder's label writes fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Option<Vec<Condition>>,
    /// The name the controller runs under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller_name: Option<String>,
    /// The reference running, pinned to its manifest's digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The digest running; for an image, its manifest's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The SHA-256 of the component's bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module_digest: Option<String>,
    /// The contract the component exports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<String>,
    /// What the module declares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declaration: Option<Declaration>,
    /// How its reconciles ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciles: Option<Reconciles>,
    /// Its last failed reconcile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<LastError>,
    /// The host replica that wrote this status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// Revisions that ran, newest first; the first runs unless it has `replaced`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revisions: Option<Vec<Revision>>,
    /// The last revision rolled back, not loaded again for this generation of the spec; a new
    /// digest, or a change of the spec, is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<RolledBack>,
}

/// What a module declares, as status shows it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct Declaration {
    /// Its primary kind, as `group/version Kind`.
    #[serde(default)]
    pub primary: String,
    /// The kinds it owns.
    #[serde(default)]
    pub owns: Vec<String>,
    /// The kinds it watches, and how they map to keys.
    #[serde(default)]
    pub watches: Vec<String>,
    /// Its finalizer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalizer: Option<String>,
}

/// How a controller's reconciles ended.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reconciles {
    /// Reconciles that succeeded.
    pub succeeded: i64,
    /// Reconciles that asked to be requeued.
    pub requeued: i64,
    /// Reconciles that failed.
    pub failed: i64,
    /// Failed reconciles since the last success.
    pub consecutive_failures: i64,
}

/// A controller's last failed reconcile.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct LastError {
    /// Its error.
    pub message: String,
    /// When it was first seen (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    pub time: String,
}

/// One module that ran for a controller object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Revision {
    /// What pins it: an image's manifest digest, else the module's (`sha256:...`).
    pub digest: String,
    /// For an image: the reference pinned to `digest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The SHA-256 of the module's bytes (`sha256:...`).
    pub module_digest: String,
    /// When it started running (RFC 3339).
    pub started: String,
    /// When it stopped running; `None` while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<String>,
    /// Why it stopped running (Superseded, RolledBack, Paused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What made it stop, for a rollback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The revision that was rolled back last, and the spec it ran for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolledBack {
    /// Its digest, as [`Revision::digest`].
    pub digest: String,
    /// The SHA-256 of its bytes (`sha256:...`).
    pub module_digest: String,
    /// The generation of the spec it ran for.
    pub observed_generation: i64,
    /// Why it was rolled back.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;

    use super::*;

    /// `value` with every whole number written as an integer (the schema's bounds are floats
    /// in the API's types; `minimum: 1`, not `1.0`, is what renderers keep alike).
    fn whole(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Number(n) => {
                if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && n.is_f64()) {
                    *value = serde_json::json!(f as i64);
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(whole),
            serde_json::Value::Object(fields) => fields.values_mut().for_each(whole),
            _ => {}
        }
    }

    /// The CRD file: a comment, then the definition the types generate.
    fn generated() -> String {
        let mut crd = serde_json::to_value(WasmController::crd()).expect("the CRD serializes");
        whole(&mut crd);
        let crd = serde_yaml::to_string(&crd).expect("the CRD serializes");
        format!(
            "# Generated from host/src/config/resource.rs: \
             KUBEWASM_WRITE_CRD=1 cargo test -p kubewasm crd\n{crd}"
        )
    }

    #[test]
    fn the_crd_file_is_the_one_the_types_generate() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../deploy/crds/wasmcontrollers.yaml");
        let generated = generated();
        if std::env::var_os("KUBEWASM_WRITE_CRD").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let file = std::fs::read_to_string(&path).unwrap();
        assert!(
            file == generated,
            "{} differs from the CRD the types generate; write it again with \
             KUBEWASM_WRITE_CRD=1 cargo test -p kubewasm crd",
            path.display()
        );
    }
}
