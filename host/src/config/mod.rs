//! The host's YAML configuration file: which modules to run, their limits and grants, and the
//! workqueue's backoff.
//!
//! ```yaml
//! modules:
//!   - path: podset.wasm          # required; relative paths resolve against the file's folder
//!     name: podset               # optional DNS-1123 label overriding the declared name
//!     maxConcurrency: 4          # optional, 1..=1024, overrides the declared value
//!     resyncSeconds: 300         # optional, >= 1, overrides the declared value
//!     namespaces: [team-a]       # optional; empty or absent = every namespace
//!     limits:                    # optional; every field optional
//!       timeoutMs: 10000         # >= 1
//!       memoryBytes: 64Mi        # >= 1 MiB; a number of bytes or a Kubernetes quantity
//!       hostCallTimeoutMs: 5000  # >= 1
//!       writeBytes: 1Mi          # >= 1Ki; JSON of one apply or patch
//!       logBytes: 64Ki           # >= 1Ki; log output of one call
//!       errorBytes: 32Ki         # >= 1Ki; error message of reconcile or finalize
//!       mapKeys: 10000           # >= 1; keys one map-keys call may return
//!       logLinesPerSecond: 100   # >= 1; guest output lines per second into the host's log
//!     cache:                     # optional; what the module never reads of the objects it reads
//!       drop:                    # fields removed before objects are cached; absent = none
//!         - apiGroups: [""]      # optional; absent = every group
//!           kinds: [ConfigMap]   # optional; absent = every kind
//!           fields:              # JSON pointers; no metadata but annotations
//!             - /metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration
//!             - /status
//!     grants:                    # optional; absent = only the kinds the module declares
//!       - apiGroups: [""]
//!         resources: [pods]
//!         verbs: [get, list, watch]
//!         namespaces: []         # empty = every namespace
//! queue:                         # optional
//!   baseBackoffMs: 5
//!   maxBackoffSeconds: 1000
//! metrics:                       # optional; `run --metrics-bind-address` wins
//!   bindAddress: ":8080"         # HOST:PORT, :PORT for every interface, or "0" for none
//! health:                        # optional; `run --health-probe-bind-address` wins
//!   healthProbeBindAddress: ":8081"
//! leaderElection:                # optional; the `run --leader-elect*` flags win
//!   leaderElect: true
//!   resourceNamespace: kubewasm-system
//!   resourceName: kubewasm-leader
//! ```
//!
//! Unknown fields are errors, so typos do not silently fall back to defaults.

use std::collections::BTreeSet;
use std::net::{AddrParseError, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::Deserialize;

use kube::api::GroupVersionKind;

use crate::cluster::selector::{is_dns1123_label, is_dns1123_subdomain};
use crate::cluster::transform::{FieldPath, Transform};

/// Default wall-clock deadline of one reconcile call: generous for a reconcile, which mostly
/// waits on API calls, yet bounded so a stuck guest cannot hold a worker forever.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Default cap on an instance's linear memory (64 MiB): ample for parsing and rewriting the JSON
/// of large objects and lists, small enough to run many modules side by side.
pub const DEFAULT_MEMORY_BYTES: u64 = 64 * 1024 * 1024;

/// Default timeout of each API call the host makes on a guest's behalf: half the reconcile
/// deadline, so a slow API server surfaces as a call error the guest can handle rather than as
/// a killed reconcile.
pub const DEFAULT_HOST_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Default cap on the JSON of one apply or patch (1 MiB): the API server caps a ConfigMap's or
/// Secret's data at 1 MiB and etcd refuses requests over 1.5 MiB, so a larger write is a bug.
pub const DEFAULT_WRITE_BYTES: u64 = 1024 * 1024;

/// Default cap on the log output of one call (64 KiB): hundreds of ordinary lines, yet one call
/// cannot push megabytes into the host's log.
pub const DEFAULT_LOG_BYTES: u64 = 64 * 1024;

/// Default cap on the error message of a reconcile or finalize (32 KiB): the longest message a
/// status condition (`metav1.Condition`) holds, so an error fits one uncut.
pub const DEFAULT_ERROR_BYTES: u64 = 32 * 1024;

/// Default cap on the keys one `map-keys` call returns: more primaries than one watched object
/// plausibly maps to, few enough that one call cannot flood the workqueue.
pub const DEFAULT_MAP_KEYS: u32 = 10_000;

/// Default rate of guest output lines (the `log` import, stdout and stderr) forwarded to the
/// host's log: far above what a healthy controller logs, low enough that one guest cannot drown
/// the host's own lines.
pub const DEFAULT_LOG_LINES_PER_SECOND: u32 = 100;

/// Smallest accepted `limits.memoryBytes` (1 MiB); less cannot hold a component's stack and
/// heap.
pub const MIN_MEMORY_BYTES: u64 = 1024 * 1024;

/// Smallest accepted `writeBytes`, `logBytes` and `errorBytes` (1 KiB); less would refuse
/// ordinary objects, lines and messages.
pub const MIN_CAP_BYTES: u64 = 1024;

/// Largest accepted `maxConcurrency`.
pub const MAX_CONCURRENCY: u32 = 1024;

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file that was read.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The text is not YAML of the expected shape (syntax error, unknown field, wrong type).
    #[error("cannot parse {}: {source}", path.as_deref().map_or("configuration".into(), |p| p.display().to_string()))]
    Parse {
        /// The file, or `None` for [`Config::from_yaml`].
        path: Option<PathBuf>,
        /// The YAML error, including the field path and location.
        source: serde_yaml::Error,
    },
    /// A field has a value outside its allowed range or format.
    #[error("{field}: {message}")]
    Invalid {
        /// Path of the offending field, e.g. `modules[1].limits.memoryBytes`.
        field: String,
        /// What is wrong, quoting the bad value.
        message: String,
    },
    /// A confined WasmController's spec sets values past the host's maxima: each field, its
    /// value and its bound.
    #[error("{0}")]
    OverMaximum(String),
}

/// Per-key exponential backoff of every controller's workqueue after a failed reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueConfig {
    /// Delay after the first failure; doubles with every further failure (default 5 ms).
    pub base_delay: Duration,
    /// Upper bound of the backoff delay (default 1000 s).
    pub max_delay: Duration,
    /// Retries per second the bucket shared by every key allows (default 10).
    pub qps: u32,
    /// Retries the bucket allows at once (default 100).
    pub burst: u32,
}

impl Default for QueueConfig {
    /// client-go's `DefaultControllerRateLimiter`: a 5 ms backoff doubling up to 1000 s, and a
    /// bucket of 10 retries per second with a burst of 100.
    fn default() -> Self {
        Self {
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_secs(1000),
            qps: 10,
            burst: 100,
        }
    }
}

pub mod controller;
pub mod maxima;
pub mod resource;

use controller::ControllersConfig;

/// A validated host configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The modules to run, in file order, with distinct paths and names; at least one unless
    /// the host watches controller objects.
    pub modules: Vec<ModuleConfig>,
    /// How the host treats WasmController objects.
    pub controllers: ControllersConfig,
    /// Backoff of every controller's workqueue (client-go's defaults when absent).
    pub queue: QueueConfig,
    /// Settings of the host process that `kubewasm run` flags override.
    pub manager: ManagerConfig,
}

/// Settings of the host process, each also a `kubewasm run` flag; `None` leaves it to the flag
/// or the flag's default.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ManagerConfig {
    /// `metrics.bindAddress`: where /metrics and /status are served.
    pub metrics_bind_address: Option<BindAddress>,
    /// `health.healthProbeBindAddress`: where /healthz and /readyz are served.
    pub health_probe_bind_address: Option<BindAddress>,
    /// `leaderElection.leaderElect`: whether to reconcile only while holding the Lease.
    pub leader_elect: Option<bool>,
    /// `leaderElection.resourceNamespace`: the Lease's namespace, a DNS-1123 label.
    pub leader_election_namespace: Option<String>,
    /// `leaderElection.resourceName`: the Lease's name, a DNS-1123 subdomain.
    pub leader_election_id: Option<String>,
    /// `leaderElection.leaseDuration`, such as `15s`.
    pub lease_duration: Option<Duration>,
    /// `leaderElection.renewDeadline`, such as `10s`.
    pub renew_deadline: Option<Duration>,
    /// `leaderElection.retryPeriod`, such as `2s`.
    pub retry_period: Option<Duration>,
}

/// A duration in Go's syntax, as Kubernetes components take them: numbers with units
/// (`ns`, `us` or `µs`, `ms`, `s`, `m`, `h`), such as `15s`, `1.5s` or `1m30s`; `0` alone.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let invalid = || format!("{text:?} is not a duration such as 15s, 500ms or 1m30s");
    if text.is_empty() {
        return Err(invalid());
    }
    let mut rest = text;
    let mut seconds = 0.0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(invalid)?;
        let number: f64 = rest[..number_end].parse().map_err(|_| invalid())?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(invalid()),
        };
        seconds += number * scale;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(seconds).map_err(|_| invalid())
}

/// An address to listen on, or none (`0`). `:PORT` means every IPv4 interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindAddress(pub Option<SocketAddr>);

impl FromStr for BindAddress {
    type Err = AddrParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text == "0" {
            return Ok(Self(None));
        }
        let address = match text.strip_prefix(':') {
            Some(port) => format!("0.0.0.0:{port}").parse(),
            None => text.parse(),
        };
        address.map(|a| Self(Some(a)))
    }
}

/// Where a module's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A `.wasm` file; in the configuration file, resolved against its folder, without `.`
    /// segments (`..` is kept; existence is not checked here).
    File(PathBuf),
    /// An artifact in an OCI registry.
    Image(ImageSource),
    /// A key of a ConfigMap in the controller object's namespace.
    ConfigMap(KeyRef),
    /// A key of a Secret in the controller object's namespace.
    Secret(KeyRef),
}

/// An OCI artifact and how it is followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSource {
    /// The reference, by tag, digest or both.
    pub reference: String,
    /// A `kubernetes.io/dockerconfigjson` Secret of the object's namespace.
    pub pull_secret: Option<String>,
}

/// A key of a ConfigMap or Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRef {
    /// The object's name.
    pub name: String,
    /// The key.
    pub key: String,
}

/// One module to load, with the overrides of what the module declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleConfig {
    /// Where the module comes from; always a file in the configuration file.
    pub source: Source,
    /// Replaces the module's declared name; a DNS-1123 label.
    pub name: Option<String>,
    /// Replaces the module's declared max-concurrency; within `1..=MAX_CONCURRENCY`.
    pub max_concurrency: Option<u32>,
    /// Replaces the module's declared resync period; at least 1 second.
    pub resync_seconds: Option<u32>,
    /// Namespaces the primary watch is restricted to, sorted, distinct DNS-1123 labels; empty
    /// means every namespace.
    pub namespaces: Vec<String>,
    /// Resource limits of the module's instances.
    pub limits: Limits,
    /// `None`: the module may only touch the kinds it declares. `Some`: exactly these rules.
    pub grants: Option<Vec<Grant>>,
    /// Its workqueue's retry settings; each field it leaves out is the host-wide `queue`'s.
    pub queue: Option<QueueConfig>,
    /// `cache.drop`: fields removed from the objects it reads before they are cached.
    pub drops: Vec<DropRule>,
    /// Whether it is confined to `namespaces`, as a WasmController outside the cluster-wide
    /// namespaces is: its watches of every namespace are narrowed to them.
    pub confined: bool,
    /// For a confined WasmController: the host's maxima, which also bound what its module
    /// declares (its concurrency, its resync period).
    pub maxima: Option<maxima::Maxima>,
}

/// A rule of `cache.drop`: fields removed from every object of the matching kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropRule {
    /// API groups it applies to (`""` is the core group, `*` any group); empty means every
    /// group.
    pub api_groups: Vec<String>,
    /// Kinds it applies to, such as `Deployment` (`*` any kind); empty means every kind.
    pub kinds: Vec<String>,
    /// The fields dropped; non-empty.
    pub fields: Vec<FieldPath>,
}

impl DropRule {
    /// Whether it applies to objects of `kind`.
    pub fn matches(&self, kind: &GroupVersionKind) -> bool {
        let any = |names: &[String], name: &str| {
            names.is_empty() || names.iter().any(|n| n == "*" || n == name)
        };
        any(&self.api_groups, &kind.group) && any(&self.kinds, &kind.kind)
    }

    /// What the rules among `drops` that match `kind` drop from its objects.
    pub fn transform(drops: &[DropRule], kind: &GroupVersionKind) -> Transform {
        Transform::new(
            drops
                .iter()
                .filter(|d| d.matches(kind))
                .flat_map(|d| d.fields.iter().cloned()),
        )
    }
}

/// Per-module resource limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock deadline of one reconcile call; at least 1 ms.
    pub timeout: Duration,
    /// Maximum linear memory of one instance; at least [`MIN_MEMORY_BYTES`].
    pub memory_bytes: u64,
    /// Timeout of each API call made on the guest's behalf; at least 1 ms.
    pub host_call_timeout: Duration,
    /// Largest JSON of one apply or patch; at least [`MIN_CAP_BYTES`].
    pub write_bytes: u64,
    /// Log output of one call: the `log` import's lines, and stdout and stderr each; at least
    /// [`MIN_CAP_BYTES`].
    pub log_bytes: u64,
    /// Longest error message of a reconcile or finalize; at least [`MIN_CAP_BYTES`].
    pub error_bytes: u64,
    /// Most keys one `map-keys` call may return; at least 1.
    pub map_keys: u32,
    /// Guest output lines per second forwarded to the host's log; at least 1.
    pub log_lines_per_second: u32,
    /// Instances of the guest alive at once, its share of the host's pool: the whole pool
    /// (`u32::MAX`) but for a confined WasmController (see [`maxima`]).
    pub instances: u32,
}

impl Default for Limits {
    /// The `DEFAULT_*` constants of this module.
    fn default() -> Self {
        Self {
            timeout: DEFAULT_TIMEOUT,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            host_call_timeout: DEFAULT_HOST_CALL_TIMEOUT,
            write_bytes: DEFAULT_WRITE_BYTES,
            log_bytes: DEFAULT_LOG_BYTES,
            error_bytes: DEFAULT_ERROR_BYTES,
            map_keys: DEFAULT_MAP_KEYS,
            log_lines_per_second: DEFAULT_LOG_LINES_PER_SECOND,
            instances: u32::MAX,
        }
    }
}

/// An API verb a [`Grant`] can allow, as in Kubernetes RBAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verb {
    /// `get`
    Get,
    /// `list`
    List,
    /// `watch`
    Watch,
    /// `create`
    Create,
    /// `update`
    Update,
    /// `patch`
    Patch,
    /// `delete`
    Delete,
    /// `deletecollection`
    DeleteCollection,
    /// `*`: every verb.
    All,
}

impl Verb {
    const EVERY: [Verb; 9] = [
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Create,
        Verb::Update,
        Verb::Patch,
        Verb::Delete,
        Verb::DeleteCollection,
        Verb::All,
    ];

    /// The verb as written in the configuration and in RBAC rules.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
            Verb::All => "*",
        }
    }
}

/// An RBAC-like rule: the verbs allowed on the resources of the API groups, in the namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// API groups (`""` is the core group, `*` any group); non-empty.
    pub api_groups: Vec<String>,
    /// Resources as plural names (`pods`), subresources (`pods/status`, `*/scale`) or `*`;
    /// non-empty.
    pub resources: Vec<String>,
    /// Allowed verbs, sorted and distinct; non-empty.
    pub verbs: Vec<Verb>,
    /// Namespaces the rule applies to, sorted, distinct DNS-1123 labels; empty means every
    /// namespace and cluster-scoped objects.
    pub namespaces: Vec<String>,
}

impl Grant {
    /// Whether this rule allows `verb` on `resource` (`plural` or `plural/subresource`) of
    /// `api_group` in `namespace` (`None`: cluster-scoped, or across all namespaces), with RBAC's
    /// matching: `*` matches any group, resource or verb, `*/sub` any resource's subresource
    /// `sub`. A rule restricted to namespaces never allows `namespace: None`.
    pub fn permits(
        &self,
        api_group: &str,
        resource: &str,
        verb: Verb,
        namespace: Option<&str>,
    ) -> bool {
        let group_ok = self.api_groups.iter().any(|g| g == "*" || g == api_group);
        let resource_ok = self.resources.iter().any(|r| {
            r == "*"
                || r == resource
                || r.strip_prefix("*/").is_some_and(|sub| {
                    resource
                        .split_once('/')
                        .is_some_and(|(_, requested)| requested == sub)
                })
        });
        let verb_ok = self.verbs.iter().any(|&v| v == Verb::All || v == verb);
        let namespace_ok = self.namespaces.is_empty()
            || namespace.is_some_and(|ns| self.namespaces.iter().any(|n| n == ns));
        group_ok && resource_ok && verb_ok && namespace_ok
    }
}

impl ModuleConfig {
    /// A module from `source` with every setting at its default.
    pub fn from_source(source: Source) -> Self {
        Self {
            source,
            name: None,
            max_concurrency: None,
            resync_seconds: None,
            namespaces: Vec::new(),
            limits: Limits::default(),
            grants: None,
            queue: None,
            drops: Vec::new(),
            confined: false,
            maxima: None,
        }
    }

    /// The module's file, when it is one.
    pub fn file(&self) -> Option<&Path> {
        match &self.source {
            Source::File(path) => Some(path),
            _ => None,
        }
    }
}

impl Config {
    /// Reads and validates the file at `path`; relative module paths resolve against its folder.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_owned(),
            source,
        })?;
        let base_dir = path.parent().unwrap_or(Path::new(""));
        parse(&text, base_dir).map_err(|error| match error {
            ConfigError::Parse { path: None, source } => ConfigError::Parse {
                path: Some(path.to_owned()),
                source,
            },
            other => other,
        })
    }

    /// Parses and validates `text`; relative module paths resolve against `base_dir`.
    pub fn from_yaml(text: &str, base_dir: &Path) -> Result<Config, ConfigError> {
        parse(text, base_dir)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawConfig {
    #[serde(default)]
    modules: Vec<RawModule>,
    controllers: Option<RawControllers>,
    queue: Option<RawQueue>,
    metrics: Option<RawMetrics>,
    health: Option<RawHealth>,
    leader_election: Option<RawLeaderElection>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawControllers {
    #[serde(default)]
    watch: bool,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default)]
    cluster_namespaces: Vec<String>,
    #[serde(default)]
    allow_paths: bool,
    registries: Option<RawRegistries>,
    maxima: Option<maxima::RawMaxima>,
    access_review_interval: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawRegistries {
    #[serde(default)]
    insecure: Vec<String>,
    max_module_size: Option<serde_yaml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawMetrics {
    bind_address: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawHealth {
    health_probe_bind_address: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawLeaderElection {
    leader_elect: Option<bool>,
    resource_namespace: Option<String>,
    resource_name: Option<String>,
    lease_duration: Option<String>,
    renew_deadline: Option<String>,
    retry_period: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawModule {
    path: PathBuf,
    name: Option<String>,
    max_concurrency: Option<u32>,
    resync_seconds: Option<u32>,
    namespaces: Option<Vec<String>>,
    limits: Option<RawLimits>,
    grants: Option<Vec<RawGrant>>,
    queue: Option<RawQueue>,
    cache: Option<RawCache>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawCache {
    #[serde(default)]
    drop: Vec<RawDrop>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawDrop {
    #[serde(default)]
    api_groups: Vec<String>,
    #[serde(default)]
    kinds: Vec<String>,
    fields: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawLimits {
    timeout_ms: Option<u64>,
    /// A number of bytes or a quantity string, as the other byte sizes; checked by [`byte_size`].
    memory_bytes: Option<serde_yaml::Value>,
    host_call_timeout_ms: Option<u64>,
    write_bytes: Option<serde_yaml::Value>,
    log_bytes: Option<serde_yaml::Value>,
    error_bytes: Option<serde_yaml::Value>,
    map_keys: Option<u32>,
    log_lines_per_second: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawGrant {
    api_groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
    #[serde(default)]
    namespaces: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawQueue {
    base_backoff_ms: Option<u64>,
    max_backoff_seconds: Option<u64>,
    qps: Option<u32>,
    burst: Option<u32>,
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

fn parse(text: &str, base_dir: &Path) -> Result<Config, ConfigError> {
    // An empty document (or one of only comments) deserializes as `None`.
    let raw: Option<RawConfig> =
        serde_yaml::from_str(text).map_err(|source| ConfigError::Parse { path: None, source })?;
    let raw = raw.unwrap_or(RawConfig {
        modules: Vec::new(),
        controllers: None,
        queue: None,
        metrics: None,
        health: None,
        leader_election: None,
    });
    let controllers = validate_controllers(raw.controllers)?;
    if raw.modules.is_empty() && !controllers.watch {
        return Err(invalid(
            "modules",
            "at least one module is required, unless controllers.watch is true",
        ));
    }
    let queue = match raw.queue {
        Some(queue) => validate_queue(queue, &QueueConfig::default(), "queue")?,
        None => QueueConfig::default(),
    };
    let mut modules: Vec<ModuleConfig> = Vec::with_capacity(raw.modules.len());
    for (i, module) in raw.modules.into_iter().enumerate() {
        let module = validate_module(module, &format!("modules[{i}]"), base_dir, &queue)?;
        if let Some(j) = modules.iter().position(|m| m.source == module.source) {
            return Err(invalid(
                format!("modules[{i}].path"),
                format!(
                    "{:?} is also the path of modules[{j}]",
                    module.file().unwrap_or(Path::new(""))
                ),
            ));
        }
        if let Some(name) = &module.name
            && let Some(j) = modules.iter().position(|m| m.name.as_ref() == Some(name))
        {
            return Err(invalid(
                format!("modules[{i}].name"),
                format!("{name:?} is also the name of modules[{j}]"),
            ));
        }
        modules.push(module);
    }
    let manager = validate_manager(raw.metrics, raw.health, raw.leader_election)?;
    Ok(Config {
        modules,
        controllers,
        queue,
        manager,
    })
}

/// The default of `controllers.registries.maxModuleSize`: 256Mi.
pub const DEFAULT_MAX_MODULE_BYTES: u64 = 256 << 20;

fn validate_controllers(raw: Option<RawControllers>) -> Result<ControllersConfig, ConfigError> {
    let Some(raw) = raw else {
        return Ok(ControllersConfig {
            max_module_bytes: DEFAULT_MAX_MODULE_BYTES,
            review_interval: Some(controller::DEFAULT_REVIEW_INTERVAL),
            ..ControllersConfig::default()
        });
    };
    let cluster_namespaces =
        namespace_list(raw.cluster_namespaces, "controllers.clusterNamespaces")?;
    let namespaces = namespace_list(raw.namespaces, "controllers.namespaces")?;
    let registries = raw.registries.unwrap_or(RawRegistries {
        insecure: Vec::new(),
        max_module_size: None,
    });
    let max_module_bytes = match &registries.max_module_size {
        Some(value) => byte_size(value, MIN_CAP_BYTES)
            .map_err(|e| invalid("controllers.registries.maxModuleSize", e))?,
        None => DEFAULT_MAX_MODULE_BYTES,
    };
    Ok(ControllersConfig {
        watch: raw.watch,
        namespaces,
        cluster_namespaces,
        allow_paths: raw.allow_paths,
        insecure_registries: registries.insecure,
        max_module_bytes,
        maxima: raw.maxima.unwrap_or_default().validate()?,
        review_interval: match raw.access_review_interval {
            None => Some(controller::DEFAULT_REVIEW_INTERVAL),
            Some(text) => Some(
                parse_duration(&text)
                    .map_err(|e| invalid("controllers.accessReviewInterval", e))?,
            )
            .filter(|d| !d.is_zero()),
        },
    })
}

fn validate_manager(
    metrics: Option<RawMetrics>,
    health: Option<RawHealth>,
    election: Option<RawLeaderElection>,
) -> Result<ManagerConfig, ConfigError> {
    let address = |text: Option<String>, field: &str| {
        text.map(|text| {
            text.parse::<BindAddress>()
                .map_err(|_| invalid(field, format!("{text:?} is not HOST:PORT, :PORT or \"0\"")))
        })
        .transpose()
    };
    let election = election.unwrap_or(RawLeaderElection {
        leader_elect: None,
        resource_namespace: None,
        resource_name: None,
        lease_duration: None,
        renew_deadline: None,
        retry_period: None,
    });
    let duration = |text: &Option<String>, field: &str| {
        text.as_deref()
            .map(parse_duration)
            .transpose()
            .map_err(|message| invalid(format!("leaderElection.{field}"), message))
    };
    let lease_duration = duration(&election.lease_duration, "leaseDuration")?;
    let renew_deadline = duration(&election.renew_deadline, "renewDeadline")?;
    let retry_period = duration(&election.retry_period, "retryPeriod")?;
    if let Some(namespace) = &election.resource_namespace
        && !is_dns1123_label(namespace)
    {
        return Err(invalid(
            "leaderElection.resourceNamespace",
            format!("{namespace:?} is not a valid namespace name (a DNS-1123 label)"),
        ));
    }
    if let Some(name) = &election.resource_name
        && !is_dns1123_subdomain(name)
    {
        return Err(invalid(
            "leaderElection.resourceName",
            format!("{name:?} is not a valid Lease name (a DNS-1123 subdomain)"),
        ));
    }
    Ok(ManagerConfig {
        metrics_bind_address: address(metrics.and_then(|m| m.bind_address), "metrics.bindAddress")?,
        health_probe_bind_address: address(
            health.and_then(|h| h.health_probe_bind_address),
            "health.healthProbeBindAddress",
        )?,
        leader_elect: election.leader_elect,
        leader_election_namespace: election.resource_namespace,
        leader_election_id: election.resource_name,
        lease_duration,
        renew_deadline,
        retry_period,
    })
}

fn validate_module(
    raw: RawModule,
    at: &str,
    base_dir: &Path,
    queue: &QueueConfig,
) -> Result<ModuleConfig, ConfigError> {
    if raw.path.extension().is_none_or(|ext| ext != "wasm") {
        return Err(invalid(
            format!("{at}.path"),
            format!("{:?} is not a .wasm file", raw.path),
        ));
    }
    // Collecting the components drops `.` segments: `dir/./a.wasm` becomes `dir/a.wasm`.
    let source = Source::File(base_dir.join(&raw.path).components().collect());
    let overrides = Overrides {
        name: raw.name,
        max_concurrency: raw.max_concurrency,
        resync_seconds: raw.resync_seconds,
        namespaces: raw.namespaces,
        limits: raw.limits,
        grants: raw.grants,
        queue: raw.queue,
        cache: raw.cache,
    };
    validate_overrides(source, overrides, at, "name", queue)
}

/// What a module entry, or a controller object's spec, overrides of a module's declaration.
struct Overrides {
    name: Option<String>,
    max_concurrency: Option<u32>,
    resync_seconds: Option<u32>,
    namespaces: Option<Vec<String>>,
    limits: Option<RawLimits>,
    grants: Option<Vec<RawGrant>>,
    queue: Option<RawQueue>,
    cache: Option<RawCache>,
}

/// Validates `raw` (the name's field is `name_field` under `at`) for a module from `source`.
fn validate_overrides(
    source: Source,
    raw: Overrides,
    at: &str,
    name_field: &str,
    queue: &QueueConfig,
) -> Result<ModuleConfig, ConfigError> {
    if let Some(name) = &raw.name
        && !is_dns1123_label(name)
    {
        return Err(invalid(
            format!("{at}.{name_field}"),
            format!(
                "{name:?} is not a DNS-1123 label (at most 63 lowercase letters, digits and '-', \
                 starting and ending with a letter or digit)"
            ),
        ));
    }
    if let Some(n) = raw.max_concurrency
        && !(1..=MAX_CONCURRENCY).contains(&n)
    {
        return Err(invalid(
            format!("{at}.maxConcurrency"),
            format!("{n} is outside 1..={MAX_CONCURRENCY}"),
        ));
    }
    if raw.resync_seconds == Some(0) {
        return Err(invalid(
            format!("{at}.resyncSeconds"),
            "0 is not at least 1",
        ));
    }
    let namespaces = namespace_list(
        raw.namespaces.unwrap_or_default(),
        &format!("{at}.namespaces"),
    )?;
    let limits = match raw.limits {
        Some(limits) => validate_limits(limits, &format!("{at}.limits"))?,
        None => Limits::default(),
    };
    let grants = match raw.grants {
        Some(grants) => Some(
            grants
                .into_iter()
                .enumerate()
                .map(|(i, grant)| validate_grant(grant, &format!("{at}.grants[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        None => None,
    };
    let queue = raw
        .queue
        .map(|raw| validate_queue(raw, queue, &format!("{at}.queue")))
        .transpose()?;
    let drops = raw
        .cache
        .map_or_else(Vec::new, |c| c.drop)
        .into_iter()
        .enumerate()
        .map(|(i, drop)| validate_drop(drop, &format!("{at}.cache.drop[{i}]")))
        .collect::<Result<_, _>>()?;
    Ok(ModuleConfig {
        source,
        name: raw.name,
        max_concurrency: raw.max_concurrency,
        resync_seconds: raw.resync_seconds,
        namespaces,
        limits,
        grants,
        queue,
        drops,
        confined: false,
        maxima: None,
    })
}

fn validate_drop(raw: RawDrop, at: &str) -> Result<DropRule, ConfigError> {
    if raw.fields.is_empty() {
        return Err(invalid(
            format!("{at}.fields"),
            "at least one field is required",
        ));
    }
    if let Some(i) = raw.kinds.iter().position(String::is_empty) {
        return Err(invalid(
            format!("{at}.kinds[{i}]"),
            "a kind must not be empty",
        ));
    }
    let fields = raw
        .fields
        .iter()
        .enumerate()
        .map(|(i, field)| {
            field
                .parse()
                .map_err(|message| invalid(format!("{at}.fields[{i}]"), message))
        })
        .collect::<Result<_, _>>()?;
    Ok(DropRule {
        api_groups: raw.api_groups,
        kinds: raw.kinds,
        fields,
    })
}

/// Sorted, distinct DNS-1123 labels.
fn namespace_list(namespaces: Vec<String>, at: &str) -> Result<Vec<String>, ConfigError> {
    let mut seen = BTreeSet::new();
    for (i, namespace) in namespaces.into_iter().enumerate() {
        if !is_dns1123_label(&namespace) {
            return Err(invalid(
                format!("{at}[{i}]"),
                format!("{namespace:?} is not a valid namespace name (a DNS-1123 label)"),
            ));
        }
        if !seen.insert(namespace.clone()) {
            return Err(invalid(
                format!("{at}[{i}]"),
                format!("{namespace:?} is listed twice"),
            ));
        }
    }
    Ok(seen.into_iter().collect())
}

fn millis(value: Option<u64>, default: Duration, field: String) -> Result<Duration, ConfigError> {
    match value {
        None => Ok(default),
        Some(0) => Err(invalid(field, "0 is not at least 1")),
        Some(ms) => Ok(Duration::from_millis(ms)),
    }
}

fn validate_limits(raw: RawLimits, at: &str) -> Result<Limits, ConfigError> {
    let size = |value: Option<serde_yaml::Value>, default, minimum, name: &str| match value {
        None => Ok(default),
        Some(value) => byte_size(&value, minimum).map_err(|m| invalid(format!("{at}.{name}"), m)),
    };
    let count = |value: Option<u32>, default, name: &str| match value {
        None => Ok(default),
        Some(0) => Err(invalid(format!("{at}.{name}"), "0 is not at least 1")),
        Some(n) => Ok(n),
    };
    Ok(Limits {
        timeout: millis(raw.timeout_ms, DEFAULT_TIMEOUT, format!("{at}.timeoutMs"))?,
        memory_bytes: size(
            raw.memory_bytes,
            DEFAULT_MEMORY_BYTES,
            MIN_MEMORY_BYTES,
            "memoryBytes",
        )?,
        host_call_timeout: millis(
            raw.host_call_timeout_ms,
            DEFAULT_HOST_CALL_TIMEOUT,
            format!("{at}.hostCallTimeoutMs"),
        )?,
        write_bytes: size(
            raw.write_bytes,
            DEFAULT_WRITE_BYTES,
            MIN_CAP_BYTES,
            "writeBytes",
        )?,
        log_bytes: size(raw.log_bytes, DEFAULT_LOG_BYTES, MIN_CAP_BYTES, "logBytes")?,
        error_bytes: size(
            raw.error_bytes,
            DEFAULT_ERROR_BYTES,
            MIN_CAP_BYTES,
            "errorBytes",
        )?,
        map_keys: count(raw.map_keys, DEFAULT_MAP_KEYS, "mapKeys")?,
        log_lines_per_second: count(
            raw.log_lines_per_second,
            DEFAULT_LOG_LINES_PER_SECOND,
            "logLinesPerSecond",
        )?,
        instances: u32::MAX,
    })
}

/// A byte size as a plain number or a quantity string, at least `minimum`.
fn byte_size(value: &serde_yaml::Value, minimum: u64) -> Result<u64, String> {
    let (bytes, shown) = match value {
        serde_yaml::Value::Number(n) => {
            // YAML reads `1e9` as a float; accept it when it is a whole number of bytes.
            let whole = n.as_u64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(f))
                    .map(|f| f as u64)
            });
            match whole {
                Some(bytes) => (bytes, n.to_string()),
                None => return Err(format!("{n} is not a whole, non-negative number of bytes")),
            }
        }
        serde_yaml::Value::String(s) => (parse_quantity(s)?, format!("{s:?}")),
        other => {
            let found = match other {
                serde_yaml::Value::Bool(b) => b.to_string(),
                serde_yaml::Value::Sequence(_) => "a list".to_owned(),
                serde_yaml::Value::Mapping(_) => "a mapping".to_owned(),
                _ => "a tagged value".to_owned(),
            };
            return Err(format!(
                "expected a number of bytes or a quantity such as \"64Mi\", found {found}"
            ));
        }
    };
    if bytes < minimum {
        return Err(format!(
            "{shown} is below the minimum of {} ({minimum} bytes)",
            binary_quantity(minimum)
        ));
    }
    Ok(bytes)
}

/// `bytes` in the largest binary unit that divides it: `1Mi`, `1Ki`, `1000`.
fn binary_quantity(bytes: u64) -> String {
    ["Ei", "Pi", "Ti", "Gi", "Mi", "Ki"]
        .iter()
        .zip((1..=6).rev())
        .find(|&(_, power)| bytes != 0 && bytes.is_multiple_of(1u64 << (10 * power)))
        .map_or_else(
            || bytes.to_string(),
            |(unit, power)| format!("{}{unit}", bytes >> (10 * power)),
        )
}

/// Why [`parse_quantity`] refused a text; each variant holds the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Not a quantity.
    #[error("{0:?} is not a quantity")]
    Invalid(String),
    /// A quantity below zero.
    #[error("{0:?} is negative")]
    Negative(String),
    /// A quantity that is not a whole number of bytes.
    #[error("{0:?} is not a whole number of bytes")]
    Fraction(String),
    /// A quantity of more than `u64::MAX` bytes.
    #[error("{0:?} is too large")]
    TooLarge(String),
}

impl From<QuantityError> for String {
    fn from(error: QuantityError) -> Self {
        error.to_string()
    }
}

/// A Kubernetes quantity as a whole number of bytes, read as apimachinery's `ParseQuantity`
/// reads it: an optional sign, a decimal number (`128`, `1.5`, `.5`, `1.`, or no digits at all
/// for zero), and a binary suffix (`Ki` … `Ei`), a decimal suffix (`n`, `u`, `m`, `k`, `M`, `G`,
/// `T`, `P`, `E`) or a decimal exponent (`e6`, `E-3`, read as an int64 cut to an int32).
/// Its value is apimachinery's: rounded up to a multiple of 10^-9, and at most 2^63 - 1 with a
/// binary suffix. Of those values, only whole, non-negative byte counts that fit a u64 are
/// accepted; the others are refused with the first that applies of
/// [`QuantityError::Negative`], [`QuantityError::Fraction`] and [`QuantityError::TooLarge`].
pub fn parse_quantity(text: &str) -> Result<u64, QuantityError> {
    let invalid = || QuantityError::Invalid(text.to_owned());
    let (negative, number, fraction, suffix) = split_quantity(text).ok_or_else(invalid)?;
    let decimal = |exponent: i32| (exponent, 0);
    let (exponent, power) = match suffix {
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "" => decimal(0),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        // apimachinery keeps the low 32 bits of the exponent.
        _ => match suffix.strip_prefix(['e', 'E']).map(str::parse::<i64>) {
            Some(Ok(exponent)) => decimal(exponent as i32),
            _ => return Err(invalid()),
        },
    };
    let digits = format!("{number}{fraction}");
    // apimachinery needs digits where it computes with big numbers: below 10^-9 or from Pi on.
    if digits.is_empty() && (exponent < -9 || power >= 50) {
        return Err(invalid());
    }
    // The value is digits × 2^power × 10^-scale, the scale an int32 that may wrap around, as
    // apimachinery's.
    let scale = (fraction.len() as i32).wrapping_sub(exponent);
    let Some(mut value) = Decimal::new(&digits, power, -i64::from(scale)) else {
        return Ok(0);
    };
    if negative {
        return Err(QuantityError::Negative(text.to_owned()));
    }
    value.round_up_to_nanos();
    if power > 0 && value.exceeds(i64::MAX as u128) {
        return Ok(i64::MAX as u64);
    }
    if value.exponent < 0 {
        return Err(QuantityError::Fraction(text.to_owned()));
    }
    value
        .whole()
        .and_then(|v| u64::try_from(v).ok())
        .ok_or_else(|| QuantityError::TooLarge(text.to_owned()))
}

/// `text` split as apimachinery splits a quantity: whether it is negative, the digits before
/// and after the dot, and the suffix (`[eEinumkKMGTP]*[-+]?[0-9]*`); `None` if it is not one.
fn split_quantity(text: &str) -> Option<(bool, &str, &str, &str)> {
    if text.is_empty() {
        return None;
    }
    let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (negative, rest) = match text.strip_prefix(['+', '-']) {
        Some(rest) => (text.starts_with('-'), rest),
        None => (false, text),
    };
    let (number, rest) = rest.split_at(digits(rest));
    let (fraction, suffix) = match rest.strip_prefix('.') {
        Some(rest) => rest.split_at(digits(rest)),
        None => ("", rest),
    };
    let letters = suffix.trim_start_matches(|c: char| "eEinumkKMGTP".contains(c));
    let signed = letters.strip_prefix(['+', '-']).unwrap_or(letters);
    signed
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then_some((negative, number, fraction, suffix))
}

/// A positive decimal number: `digits` × 10^`exponent`, `digits` without leading or trailing
/// zeros.
struct Decimal {
    digits: Vec<u8>,
    exponent: i64,
}

impl Decimal {
    /// `digits` (ASCII) × 2^`power` × 10^`exponent`, or `None` if that is zero.
    fn new(digits: &str, power: u32, exponent: i64) -> Option<Self> {
        let mut value: Vec<u8> = digits.bytes().map(|b| b - b'0').collect();
        let factor = 1u64 << power;
        let mut carry = 0;
        for digit in value.iter_mut().rev() {
            let product = u64::from(*digit) * factor + carry;
            *digit = (product % 10) as u8;
            carry = product / 10;
        }
        while carry > 0 {
            value.insert(0, (carry % 10) as u8);
            carry /= 10;
        }
        let first = value.iter().position(|&d| d != 0)?;
        value.drain(..first);
        let mut decimal = Self {
            digits: value,
            exponent,
        };
        decimal.trim();
        Some(decimal)
    }

    fn trim(&mut self) {
        while self.digits.last() == Some(&0) {
            self.digits.pop();
            self.exponent += 1;
        }
    }

    /// Rounds up (away from zero) to a multiple of 10^-9, as apimachinery does.
    fn round_up_to_nanos(&mut self) {
        if self.exponent >= -9 {
            return;
        }
        // Keeps the digits at 10^-9 and above and adds 10^-9: the dropped ones are not all zero.
        let kept = (self.digits.len() as i64 + self.exponent + 9).max(0) as usize;
        self.digits.truncate(kept);
        self.exponent = -9;
        let nines = self.digits.iter().rev().take_while(|&&d| d == 9).count();
        self.digits.truncate(self.digits.len() - nines);
        self.exponent += nines as i64;
        match self.digits.last_mut() {
            Some(last) => *last += 1,
            None => self.digits.push(1),
        }
        self.trim();
    }

    /// The value if it is a whole number that fits a u128.
    fn whole(&self) -> Option<u128> {
        let zeros = u32::try_from(self.exponent).ok()?;
        let digits = self
            .digits
            .iter()
            .try_fold(0u128, |n, &d| n.checked_mul(10)?.checked_add(u128::from(d)))?;
        10u128.checked_pow(zeros)?.checked_mul(digits)
    }

    /// Whether the value is more than `bound`.
    fn exceeds(&self, bound: u128) -> bool {
        // The whole part; a fraction makes the value exceed a whole part equal to the bound.
        let whole_digits = self.digits.len() as i64 + self.exponent;
        let floor = Self {
            digits: self.digits[..whole_digits.clamp(0, self.digits.len() as i64) as usize]
                .to_vec(),
            exponent: self.exponent.max(0),
        };
        match floor.whole() {
            Some(floor) => floor > bound || floor == bound && self.exponent < 0,
            None => true,
        }
    }
}

const VERBS: &str = "get, list, watch, create, update, patch, delete, deletecollection, *";

fn validate_grant(raw: RawGrant, at: &str) -> Result<Grant, ConfigError> {
    let non_empty = |list: &[String], name: &str| {
        if list.is_empty() {
            Err(invalid(format!("{at}.{name}"), "must not be empty"))
        } else {
            Ok(())
        }
    };
    non_empty(&raw.api_groups, "apiGroups")?;
    non_empty(&raw.resources, "resources")?;
    non_empty(&raw.verbs, "verbs")?;
    for (i, group) in raw.api_groups.iter().enumerate() {
        if !(group.is_empty() || group == "*" || is_dns1123_subdomain(group)) {
            return Err(invalid(
                format!("{at}.apiGroups[{i}]"),
                format!(
                    "{group:?} is not an API group (\"\" for core, \"*\", or a DNS subdomain such as apps)"
                ),
            ));
        }
    }
    for (i, resource) in raw.resources.iter().enumerate() {
        let (plural, sub) = match resource.split_once('/') {
            Some((plural, sub)) => (plural, Some(sub)),
            None => (resource.as_str(), None),
        };
        let plural_ok = plural == "*" || is_dns1123_label(plural);
        if !plural_ok || sub.is_some_and(|s| !is_dns1123_label(s)) {
            return Err(invalid(
                format!("{at}.resources[{i}]"),
                format!(
                    "{resource:?} is not a resource (a lowercase plural such as pods, optionally \
                     with /subresource, or *)"
                ),
            ));
        }
    }
    let mut verbs = BTreeSet::new();
    for (i, verb) in raw.verbs.iter().enumerate() {
        let parsed = Verb::EVERY
            .into_iter()
            .find(|v| v.as_str() == verb)
            .ok_or_else(|| {
                invalid(
                    format!("{at}.verbs[{i}]"),
                    format!("{verb:?} is not a verb (one of {VERBS})"),
                )
            })?;
        verbs.insert(parsed);
    }
    let namespaces = namespace_list(raw.namespaces, &format!("{at}.namespaces"))?;
    Ok(Grant {
        api_groups: raw.api_groups,
        resources: raw.resources,
        verbs: verbs.into_iter().collect(),
        namespaces,
    })
}

/// The queue settings of `raw` at `at`, each field it leaves out taken from `defaults`.
fn validate_queue(
    raw: RawQueue,
    defaults: &QueueConfig,
    at: &str,
) -> Result<QueueConfig, ConfigError> {
    let base_delay = millis(
        raw.base_backoff_ms,
        defaults.base_delay,
        format!("{at}.baseBackoffMs"),
    )?;
    let max_delay = match raw.max_backoff_seconds {
        None => defaults.max_delay,
        Some(0) => {
            return Err(invalid(
                format!("{at}.maxBackoffSeconds"),
                "0 is not at least 1",
            ));
        }
        Some(s) => Duration::from_secs(s),
    };
    if max_delay < base_delay {
        return Err(invalid(
            format!("{at}.maxBackoffSeconds"),
            format!(
                "{} s is less than baseBackoffMs ({} ms)",
                max_delay.as_secs(),
                base_delay.as_millis()
            ),
        ));
    }
    let count = |value: Option<u32>, default: u32, name: &str| match value {
        None => Ok(default),
        Some(0) => Err(invalid(format!("{at}.{name}"), "0 is not at least 1")),
        Some(n) => Ok(n),
    };
    Ok(QueueConfig {
        base_delay,
        max_delay,
        qps: count(raw.qps, defaults.qps, "qps")?,
        burst: count(raw.burst, defaults.burst, "burst")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = r#"
# kubewasm host configuration
modules:
  - path: podset.wasm          # required: a .wasm component file
    name: podset
    maxConcurrency: 4
    resyncSeconds: 300
    namespaces: [team-b, team-a]
    limits:
      timeoutMs: 20000
      memoryBytes: 67108864
      hostCallTimeoutMs: 2500
      writeBytes: 512Ki
      logBytes: 4096
      errorBytes: 2Ki
      mapKeys: 50
      logLinesPerSecond: 7
    grants:
      - apiGroups: [""]
        resources: [pods]
        verbs: [get, list, watch, create, update, patch, delete]
        namespaces: []
      - apiGroups: [apps, "*"]
        resources: ["*/scale", deployments/status]
        verbs: ["*", get]
        namespaces: [team-a]
    queue:
      qps: 5
    cache:
      drop:
        - fields: [/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration]
        - apiGroups: [apps]
          kinds: [Deployment, StatefulSet]
          fields: [/status, /spec/template/metadata/annotations]
        - apiGroups: ["*"]
          kinds: [Secret]
          fields: [/data/ca.crt]
  - path: /opt/modules/other.wasm
    limits:
      memoryBytes: 128Mi
queue:
  baseBackoffMs: 10
  maxBackoffSeconds: 300
  qps: 20
  burst: 50
"#;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_yaml(text, Path::new("/etc/kubewasm"))
    }

    fn invalid_at(text: &str) -> (String, String) {
        match parse(text) {
            Err(ConfigError::Invalid { field, message }) => (field, message),
            other => panic!("expected Invalid for {text:?}, got {other:?}"),
        }
    }

    fn parse_error(text: &str) -> String {
        match parse(text) {
            Err(error @ ConfigError::Parse { .. }) => error.to_string(),
            other => panic!("expected Parse for {text:?}, got {other:?}"),
        }
    }

    #[test]
    fn durations_are_read_in_go_syntax() {
        let ok = |text: &str| parse_duration(text).unwrap();
        assert_eq!(ok("15s"), Duration::from_secs(15));
        assert_eq!(ok("1.5s"), Duration::from_millis(1500));
        assert_eq!(ok("1m30s"), Duration::from_secs(90));
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("2h"), Duration::from_secs(7200));
        assert_eq!(ok("0"), Duration::ZERO);
        for text in ["", "2", "s", "1x", "-1s", "1..5s", "1e3s"] {
            let error = parse_duration(text).unwrap_err();
            assert!(error.contains("is not a duration"), "{text}: {error}");
        }
    }

    #[test]
    fn full_example_parses() {
        let config = parse(FULL).unwrap();
        assert_eq!(
            config.modules[0],
            ModuleConfig {
                source: Source::File(PathBuf::from("/etc/kubewasm/podset.wasm")),
                name: Some("podset".into()),
                max_concurrency: Some(4),
                resync_seconds: Some(300),
                namespaces: vec!["team-a".into(), "team-b".into()],
                limits: Limits {
                    timeout: Duration::from_secs(20),
                    memory_bytes: 64 << 20,
                    host_call_timeout: Duration::from_millis(2500),
                    write_bytes: 512 << 10,
                    log_bytes: 4096,
                    error_bytes: 2048,
                    map_keys: 50,
                    log_lines_per_second: 7,
                    instances: u32::MAX,
                },
                grants: Some(vec![
                    Grant {
                        api_groups: vec!["".into()],
                        resources: vec!["pods".into()],
                        verbs: vec![
                            Verb::Get,
                            Verb::List,
                            Verb::Watch,
                            Verb::Create,
                            Verb::Update,
                            Verb::Patch,
                            Verb::Delete,
                        ],
                        namespaces: vec![],
                    },
                    Grant {
                        api_groups: vec!["apps".into(), "*".into()],
                        resources: vec!["*/scale".into(), "deployments/status".into()],
                        verbs: vec![Verb::Get, Verb::All],
                        namespaces: vec!["team-a".into()],
                    },
                ]),
                // Its own rate, the host-wide backoff and burst.
                queue: Some(QueueConfig {
                    base_delay: Duration::from_millis(10),
                    max_delay: Duration::from_secs(300),
                    qps: 5,
                    burst: 50,
                }),
                drops: vec![
                    DropRule {
                        api_groups: vec![],
                        kinds: vec![],
                        fields: vec![
                            "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration"
                                .parse()
                                .unwrap()
                        ],
                    },
                    DropRule {
                        api_groups: vec!["apps".into()],
                        kinds: vec!["Deployment".into(), "StatefulSet".into()],
                        fields: vec![
                            "/status".parse().unwrap(),
                            "/spec/template/metadata/annotations".parse().unwrap()
                        ],
                    },
                    DropRule {
                        api_groups: vec!["*".into()],
                        kinds: vec!["Secret".into()],
                        fields: vec!["/data/ca.crt".parse().unwrap()],
                    },
                ],
                confined: false,
                maxima: None,
            }
        );
        assert_eq!(
            config.modules[1].source,
            Source::File(PathBuf::from("/opt/modules/other.wasm"))
        );
        assert_eq!(config.modules[1].limits.memory_bytes, 128 << 20);
        assert_eq!(
            config.queue,
            QueueConfig {
                base_delay: Duration::from_millis(10),
                max_delay: Duration::from_secs(300),
                qps: 20,
                burst: 50,
            }
        );
    }

    #[test]
    fn minimal_config_gets_defaults() {
        let config = parse("modules: [{path: a.wasm}]").unwrap();
        assert_eq!(
            config,
            Config {
                controllers: ControllersConfig {
                    max_module_bytes: DEFAULT_MAX_MODULE_BYTES,
                    review_interval: Some(controller::DEFAULT_REVIEW_INTERVAL),
                    ..ControllersConfig::default()
                },
                modules: vec![ModuleConfig {
                    source: Source::File(PathBuf::from("/etc/kubewasm/a.wasm")),
                    name: None,
                    max_concurrency: None,
                    resync_seconds: None,
                    namespaces: vec![],
                    limits: Limits {
                        timeout: Duration::from_secs(10),
                        memory_bytes: 64 * 1024 * 1024,
                        host_call_timeout: Duration::from_secs(5),
                        write_bytes: 1024 * 1024,
                        log_bytes: 64 * 1024,
                        error_bytes: 32 * 1024,
                        map_keys: 10_000,
                        log_lines_per_second: 100,
                        instances: u32::MAX,
                    },
                    grants: None,
                    queue: None,
                    drops: vec![],
                    confined: false,
                    maxima: None,
                }],
                manager: ManagerConfig::default(),
                queue: QueueConfig {
                    base_delay: Duration::from_millis(5),
                    max_delay: Duration::from_secs(1000),
                    qps: 10,
                    burst: 100,
                },
            }
        );
        // Partial limits keep the defaults of the fields left out; empty grants stay explicit.
        let config =
            parse("modules: [{path: a.wasm, limits: {timeoutMs: 1}, grants: []}]").unwrap();
        let module = &config.modules[0];
        assert_eq!(module.limits.timeout, Duration::from_millis(1));
        assert_eq!(module.limits.memory_bytes, DEFAULT_MEMORY_BYTES);
        assert_eq!(module.limits.host_call_timeout, DEFAULT_HOST_CALL_TIMEOUT);
        assert_eq!(module.limits.write_bytes, DEFAULT_WRITE_BYTES);
        assert_eq!(module.grants, Some(vec![]));
        // YAML reads `1e9` as a float; whole floats are accepted.
        let config = parse("modules: [{path: a.wasm, limits: {memoryBytes: 1e9}}]").unwrap();
        assert_eq!(config.modules[0].limits.memory_bytes, 1_000_000_000);
    }

    #[test]
    fn relative_paths_resolve_against_the_config_folder() {
        let text = "modules: [{path: a.wasm}, {path: ./sub/b.wasm}, {path: ../c.wasm}, {path: /abs/d.wasm}]";
        let paths: Vec<String> = Config::from_yaml(text, Path::new("/etc/kubewasm"))
            .unwrap()
            .modules
            .into_iter()
            .map(|m| m.file().unwrap().display().to_string())
            .collect();
        assert_eq!(
            paths,
            [
                "/etc/kubewasm/a.wasm",
                "/etc/kubewasm/sub/b.wasm",
                "/etc/kubewasm/../c.wasm",
                "/abs/d.wasm"
            ]
        );
        let config = Config::from_yaml("modules: [{path: ./a.wasm}]", Path::new("")).unwrap();
        assert_eq!(
            config.modules[0].file().unwrap().display().to_string(),
            "./a.wasm"
        );
    }

    #[test]
    fn load_reads_the_file_and_resolves_against_its_folder() {
        let dir = std::env::temp_dir().join(format!("kubewasm-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("kubewasm.yaml");
        std::fs::write(&file, "modules:\n  - path: podset.wasm\n").unwrap();
        let loaded = Config::load(&file);
        std::fs::write(&file, "modules:\n  - path: podset.wasm\n    nmae: x\n").unwrap();
        let unknown = Config::load(&file);
        std::fs::remove_dir_all(&dir).unwrap();

        assert_eq!(
            loaded.unwrap().modules[0].file(),
            Some(dir.join("podset.wasm").as_path())
        );
        let message = unknown.unwrap_err().to_string();
        assert!(
            message.starts_with(&format!("cannot parse {}: ", file.display())),
            "{message}"
        );
        assert!(message.contains("unknown field `nmae`"), "{message}");

        let missing = dir.join("missing.yaml");
        match Config::load(&missing) {
            Err(ConfigError::Io { path, source }) => {
                assert_eq!(path, missing);
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            }
            other => panic!("expected Io, got {other:?}"),
        }
    }

    #[test]
    fn yaml_shape_errors_are_parse_errors() {
        let message = parse_error("modules: [{path: a.wasm, maxConcurency: 3}]");
        assert!(
            message.contains("unknown field `maxConcurency`"),
            "{message}"
        );
        assert!(
            message.starts_with("cannot parse configuration: "),
            "{message}"
        );
        let message = parse_error("modules: [{path: a.wasm, limits: {timeout: 3}}]");
        assert!(message.contains("unknown field `timeout`"), "{message}");
        let message = parse_error("modules: [{path: a.wasm, limits: {writeByte: 3}}]");
        assert!(message.contains("unknown field `writeByte`"), "{message}");
        let message = parse_error("modules: [{path: a.wasm, limits: {mapKeys: -1}}]");
        assert!(message.contains("mapKeys"), "{message}");
        let message = parse_error("modules: [{path: a.wasm}]\nqueue: {baseBackof: 1}");
        assert!(message.contains("unknown field `baseBackof`"), "{message}");
        let message = parse_error("module: [{path: a.wasm}]");
        assert!(message.contains("unknown field `module`"), "{message}");
        let message = parse_error("modules: [{name: a}]");
        assert!(message.contains("missing field `path`"), "{message}");
        let message = parse_error("modules: [{path: a.wasm, maxConcurrency: -1}]");
        assert!(message.contains("maxConcurrency"), "{message}");
        let message =
            parse_error("modules: [{path: a.wasm, grants: [{resources: [pods], verbs: [get]}]}]");
        assert!(message.contains("missing field `apiGroups`"), "{message}");
        parse_error("modules: [path: a.wasm");
    }

    #[test]
    fn validation_errors_name_the_field_and_value() {
        let cases: &[(&str, &str, &str)] = &[
            ("", "modules", "at least one module is required"),
            (
                "# only a comment\n",
                "modules",
                "at least one module is required",
            ),
            ("modules: []", "modules", "at least one module is required"),
            (
                "modules: [{path: a.wasm}, {path: b.wasm, limits: {memoryBytes: 64Q}}]",
                "modules[1].limits.memoryBytes",
                "\"64Q\" is not a quantity",
            ),
            (
                "modules: [{path: a.wasm, limits: {memoryBytes: 512Ki}}]",
                "modules[0].limits.memoryBytes",
                "\"512Ki\" is below the minimum of 1Mi (1048576 bytes)",
            ),
            (
                "modules: [{path: a.wasm, limits: {memoryBytes: 1000}}]",
                "modules[0].limits.memoryBytes",
                "1000 is below the minimum of 1Mi (1048576 bytes)",
            ),
            (
                "modules: [{path: a.wasm, limits: {memoryBytes: -5}}]",
                "modules[0].limits.memoryBytes",
                "-5 is not a whole, non-negative number of bytes",
            ),
            (
                "modules: [{path: a.wasm, limits: {memoryBytes: [1]}}]",
                "modules[0].limits.memoryBytes",
                "expected a number of bytes or a quantity such as \"64Mi\", found a list",
            ),
            (
                "modules: [{path: a.wasm, limits: {memoryBytes: 1.0e6}}]",
                "modules[0].limits.memoryBytes",
                "1000000.0 is below the minimum of 1Mi",
            ),
            (
                "modules: [{path: a.wasm, limits: {memoryBytes: 1.5}}]",
                "modules[0].limits.memoryBytes",
                "1.5 is not a whole, non-negative number of bytes",
            ),
            (
                "modules: [{path: a.wasm, limits: {memoryBytes: true}}]",
                "modules[0].limits.memoryBytes",
                "expected a number of bytes or a quantity such as \"64Mi\", found true",
            ),
            (
                "modules: [{path: a.wasm, limits: {timeoutMs: 0}}]",
                "modules[0].limits.timeoutMs",
                "0 is not at least 1",
            ),
            (
                "modules: [{path: a.wasm, limits: {hostCallTimeoutMs: 0}}]",
                "modules[0].limits.hostCallTimeoutMs",
                "0 is not at least 1",
            ),
            (
                "modules: [{path: a.wasm, limits: {writeBytes: 1000}}]",
                "modules[0].limits.writeBytes",
                "1000 is below the minimum of 1Ki (1024 bytes)",
            ),
            (
                "modules: [{path: a.wasm, limits: {logBytes: 1k}}]",
                "modules[0].limits.logBytes",
                "\"1k\" is below the minimum of 1Ki (1024 bytes)",
            ),
            (
                "modules: [{path: a.wasm, limits: {errorBytes: 2X}}]",
                "modules[0].limits.errorBytes",
                "\"2X\" is not a quantity",
            ),
            (
                "modules: [{path: a.wasm, limits: {mapKeys: 0}}]",
                "modules[0].limits.mapKeys",
                "0 is not at least 1",
            ),
            (
                "modules: [{path: a.wasm, limits: {logLinesPerSecond: 0}}]",
                "modules[0].limits.logLinesPerSecond",
                "0 is not at least 1",
            ),
            (
                "modules: [{path: a.wasm, name: Pod_Set}]",
                "modules[0].name",
                "\"Pod_Set\" is not a DNS-1123 label",
            ),
            (
                "modules: [{path: a.wasm}, {path: ./a.wasm}]",
                "modules[1].path",
                "\"/etc/kubewasm/a.wasm\" is also the path of modules[0]",
            ),
            (
                "modules: [{path: a.wasm, name: x}, {path: b.wasm}, {path: c.wasm, name: x}]",
                "modules[2].name",
                "\"x\" is also the name of modules[0]",
            ),
            (
                "modules: [{path: a.wat}]",
                "modules[0].path",
                "\"a.wat\" is not a .wasm file",
            ),
            (
                "modules: [{path: wasm}]",
                "modules[0].path",
                "\"wasm\" is not a .wasm file",
            ),
            (
                "modules: [{path: a.wasm, maxConcurrency: 0}]",
                "modules[0].maxConcurrency",
                "0 is outside 1..=1024",
            ),
            (
                "modules: [{path: a.wasm, maxConcurrency: 1025}]",
                "modules[0].maxConcurrency",
                "1025 is outside 1..=1024",
            ),
            (
                "modules: [{path: a.wasm, resyncSeconds: 0}]",
                "modules[0].resyncSeconds",
                "0 is not at least 1",
            ),
            (
                "modules: [{path: a.wasm, namespaces: [ok, Team_A]}]",
                "modules[0].namespaces[1]",
                "\"Team_A\" is not a valid namespace name",
            ),
            (
                "modules: [{path: a.wasm, namespaces: [a, b, a]}]",
                "modules[0].namespaces[2]",
                "\"a\" is listed twice",
            ),
            (
                "modules: [{path: a.wasm, grants: [{apiGroups: [''], resources: [pods], verbs: [get, fetch]}]}]",
                "modules[0].grants[0].verbs[1]",
                "\"fetch\" is not a verb (one of get, list, watch, create, update, patch, delete, deletecollection, *)",
            ),
            (
                "modules: [{path: a.wasm, grants: [{apiGroups: [''], resources: [pods], verbs: [Get]}]}]",
                "modules[0].grants[0].verbs[0]",
                "\"Get\" is not a verb",
            ),
            (
                "modules: [{path: a.wasm, grants: [{apiGroups: [''], resources: [pods], verbs: []}]}]",
                "modules[0].grants[0].verbs",
                "must not be empty",
            ),
            (
                "modules: [{path: a.wasm, grants: [{apiGroups: [], resources: [pods], verbs: [get]}]}]",
                "modules[0].grants[0].apiGroups",
                "must not be empty",
            ),
            (
                "modules: [{path: a.wasm, grants: [{apiGroups: [''], resources: [], verbs: [get]}]}]",
                "modules[0].grants[0].resources",
                "must not be empty",
            ),
            (
                "modules: [{path: a.wasm, grants: [{apiGroups: [Apps], resources: [pods], verbs: [get]}]}]",
                "modules[0].grants[0].apiGroups[0]",
                "\"Apps\" is not an API group",
            ),
            (
                "modules: [{path: a.wasm}, {path: b.wasm, grants: [{apiGroups: [''], resources: [pods, Pods], verbs: [get]}]}]",
                "modules[1].grants[0].resources[1]",
                "\"Pods\" is not a resource",
            ),
            (
                "modules: [{path: a.wasm, grants: [{apiGroups: [''], resources: [pods/a/b], verbs: [get]}]}]",
                "modules[0].grants[0].resources[0]",
                "\"pods/a/b\" is not a resource",
            ),
            (
                "modules: [{path: a.wasm, grants: [{apiGroups: [''], resources: [pods], verbs: [get], namespaces: [-x]}]}]",
                "modules[0].grants[0].namespaces[0]",
                "\"-x\" is not a valid namespace name",
            ),
            (
                "modules: [{path: a.wasm}]\nqueue: {baseBackoffMs: 0}",
                "queue.baseBackoffMs",
                "0 is not at least 1",
            ),
            (
                "modules: [{path: a.wasm}]\nqueue: {maxBackoffSeconds: 0}",
                "queue.maxBackoffSeconds",
                "0 is not at least 1",
            ),
            (
                "modules: [{path: a.wasm}]\nqueue: {baseBackoffMs: 5000, maxBackoffSeconds: 2}",
                "queue.maxBackoffSeconds",
                "2 s is less than baseBackoffMs (5000 ms)",
            ),
            (
                "modules: [{path: a.wasm, cache: {drop: [{fields: [/status, /metadata/labels]}]}}]",
                "modules[0].cache.drop[0].fields[1]",
                "\"/metadata/labels\": the host reads it",
            ),
            (
                "modules: [{path: a.wasm, cache: {drop: [{fields: [/status]}, {fields: [status]}]}}]",
                "modules[0].cache.drop[1].fields[0]",
                "\"status\" is not a JSON pointer",
            ),
            (
                "modules: [{path: a.wasm, cache: {drop: [{kinds: [Pod], fields: []}]}}]",
                "modules[0].cache.drop[0].fields",
                "at least one field is required",
            ),
            (
                "modules: [{path: a.wasm, cache: {drop: [{kinds: [\"\"], fields: [/status]}]}}]",
                "modules[0].cache.drop[0].kinds[0]",
                "a kind must not be empty",
            ),
        ];
        for &(text, field, message) in cases {
            let (f, m) = invalid_at(text);
            assert_eq!(f, field, "{text:?}: {m}");
            assert!(m.contains(message), "{text:?}: {m:?} lacks {message:?}");
        }
        assert_eq!(
            parse("modules: [{path: a.wasm, limits: {memoryBytes: 64Q}}]")
                .unwrap_err()
                .to_string(),
            "modules[0].limits.memoryBytes: \"64Q\" is not a quantity"
        );
        assert_eq!(
            parse("modules: [{path: a.wasm, name: Pod_Set}]")
                .unwrap_err()
                .to_string(),
            "modules[0].name: \"Pod_Set\" is not a DNS-1123 label (at most 63 lowercase letters, \
             digits and '-', starting and ending with a letter or digit)"
        );
    }

    #[test]
    fn quantities() {
        let ok: &[(&str, u64)] = &[
            ("0", 0),
            ("1048576", 1 << 20),
            ("1Ki", 1 << 10),
            ("64Mi", 64 << 20),
            ("2Gi", 2 << 30),
            ("1Ti", 1 << 40),
            ("1Pi", 1 << 50),
            ("1Ei", 1 << 60),
            ("1.5Gi", 3 << 29),
            ("0.5Ki", 512),
            (".5Ki", 512),
            ("1.Ki", 1024),
            ("128k", 128_000),
            ("100M", 100_000_000),
            ("1G", 1_000_000_000),
            ("1T", 1_000_000_000_000),
            ("1P", 1_000_000_000_000_000),
            ("1E", 1_000_000_000_000_000_000),
            ("129e6", 129_000_000),
            ("1E3", 1_000),
            ("1.5e3", 1_500),
        ];
        for &(text, bytes) in ok {
            assert_eq!(parse_quantity(text), Ok(bytes), "{text:?}");
        }
        let bad: &[(&str, &str)] = &[
            ("", "is not a quantity"),
            ("1..2", "is not a quantity"),
            ("64Q", "is not a quantity"),
            ("64mi", "is not a quantity"),
            ("64 Mi", "is not a quantity"),
            ("-1Mi", "is negative"),
            ("1e", "is not a quantity"),
            ("1e-3", "is not a whole number of bytes"),
            ("0x10", "is not a quantity"),
            ("0.1", "is not a whole number of bytes"),
            ("1.0001Ki", "is not a whole number of bytes"),
            ("1e20", "is too large"),
            ("1e99", "is too large"),
            ("99999999999999999999999999999999999999999", "is too large"),
        ];
        for &(text, reason) in bad {
            let error = parse_quantity(text).unwrap_err().to_string();
            assert!(
                error.contains(reason),
                "{text:?}: {error:?} lacks {reason:?}"
            );
        }
    }

    /// Each found by the differential tests against apimachinery's `ParseQuantity`.
    #[test]
    fn quantities_as_apimachinery_reads_them() {
        let max = i64::MAX as u64;
        let ok: &[(&str, u64)] = &[
            // Signs, and numbers without digits before or after the dot, or at all.
            ("+1", 1),
            ("+1Ki", 1024),
            ("-0", 0),
            ("-0.0", 0),
            ("1.", 1),
            (".", 0),
            ("-.", 0),
            ("+", 0),
            ("Mi", 0),
            ("Ti", 0),
            // Suffixes below one.
            ("1000m", 1),
            ("1000000u", 1),
            ("5000000000n", 5),
            ("n", 0),
            // Signed exponents, read as an int64 cut to an int32.
            ("1000e-3", 1),
            ("1e+3", 1000),
            ("1E+3", 1000),
            ("1e4294967296", 1),
            ("1e4294967299", 1000),
            // Rounded up to a multiple of 10^-9.
            ("0.9999999999", 1),
            ("1.9999999999999999999Ki", 2048),
            // Binary quantities capped at 2^63 - 1.
            ("8Ei", max),
            ("15Ei", max),
            ("16Ei", max),
            ("7.9999999999999999999999Ei", max),
            ("18446744073709551615", u64::MAX),
        ];
        for &(text, bytes) in ok {
            assert_eq!(parse_quantity(text), Ok(bytes), "{text:?}");
        }
        type Refusal = fn(String) -> QuantityError;
        let refused: &[(&str, Refusal)] = &[
            ("-1Mi", QuantityError::Negative),
            ("-0.5", QuantityError::Negative),
            ("-0.0000000001", QuantityError::Negative),
            ("1500m", QuantityError::Fraction),
            ("1e-3", QuantityError::Fraction),
            ("0.0000000001", QuantityError::Fraction),
            ("1e9223372036854775807", QuantityError::Fraction),
            ("1e2147483647", QuantityError::TooLarge),
            // The scale wraps around: 15 × 10^2147483647.
            ("1.5e-2147483648", QuantityError::TooLarge),
            ("18446744073709551616", QuantityError::TooLarge),
            // No digits, where apimachinery needs them.
            ("Pi", QuantityError::Invalid),
            ("e-10", QuantityError::Invalid),
            ("1e9223372036854775808", QuantityError::Invalid),
            ("", QuantityError::Invalid),
        ];
        for &(text, refusal) in refused {
            assert_eq!(
                parse_quantity(text),
                Err(refusal(text.to_owned())),
                "{text:?}"
            );
        }
    }

    #[test]
    fn grants_match_like_rbac() {
        let grant =
            |groups: &[&str], resources: &[&str], verbs: &[Verb], namespaces: &[&str]| Grant {
                api_groups: groups.iter().map(|s| s.to_string()).collect(),
                resources: resources.iter().map(|s| s.to_string()).collect(),
                verbs: verbs.to_vec(),
                namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            };
        let pods = grant(&[""], &["pods"], &[Verb::Get, Verb::List], &[]);
        assert!(pods.permits("", "pods", Verb::Get, Some("a")));
        assert!(pods.permits("", "pods", Verb::List, None));
        assert!(!pods.permits("", "pods", Verb::Delete, Some("a")));
        assert!(!pods.permits("apps", "pods", Verb::Get, Some("a")));
        assert!(!pods.permits("", "pods/status", Verb::Get, Some("a")));
        assert!(!pods.permits("", "services", Verb::Get, Some("a")));

        let scoped = grant(
            &["*"],
            &["*/scale", "deployments"],
            &[Verb::All],
            &["team-a"],
        );
        assert!(scoped.permits(
            "apps",
            "deployments",
            Verb::DeleteCollection,
            Some("team-a")
        ));
        assert!(scoped.permits("x.io", "widgets/scale", Verb::Patch, Some("team-a")));
        assert!(!scoped.permits("apps", "deployments/status", Verb::Patch, Some("team-a")));
        assert!(!scoped.permits("apps", "deployments", Verb::Get, Some("team-b")));
        assert!(!scoped.permits("apps", "deployments", Verb::Get, None));

        let everything = grant(&["*"], &["*"], &[Verb::All], &[]);
        assert!(everything.permits("", "nodes", Verb::Watch, None));
        assert!(everything.permits("", "pods/log", Verb::Get, Some("x")));
        assert!(!pods.permits("", "pods", Verb::All, None));
    }

    #[test]
    fn drop_rules_apply_to_the_kinds_and_groups_they_name() {
        let config = parse(FULL).unwrap();
        let drops = &config.modules[0].drops;
        let kind = |group: &str, kind: &str| GroupVersionKind::gvk(group, "v1", kind);
        let dropped = |k: &GroupVersionKind| DropRule::transform(drops, k).to_string();
        let last_applied =
            "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration";
        assert_eq!(dropped(&kind("", "ConfigMap")), last_applied);
        assert_eq!(dropped(&kind("example.com", "Deployment")), last_applied);
        assert_eq!(
            dropped(&kind("apps", "Deployment")),
            format!("{last_applied}, /spec/template/metadata/annotations, /status")
        );
        assert_eq!(
            dropped(&kind("", "Secret")),
            format!("/data/ca.crt, {last_applied}")
        );
        assert!(
            DropRule::transform(&config.modules[1].drops, &kind("apps", "Deployment")).is_empty()
        );
    }

    #[test]
    fn verbs_render_as_written() {
        let rendered: Vec<&str> = Verb::EVERY.iter().map(|v| v.as_str()).collect();
        assert_eq!(rendered.join(", "), VERBS);
    }
}
