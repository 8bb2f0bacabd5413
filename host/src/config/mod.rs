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

use kube::api::GroupVersionKind;

use crate::cluster::selector::is_dns1123_label;
use crate::cluster::transform::{FieldPath, Transform};

pub mod controller;
mod duration;
mod file;
mod grant;
mod limits;
pub mod maxima;
mod overrides;
mod quantity;
mod queue;
pub mod resource;

pub use duration::parse_duration;
pub use file::DEFAULT_MAX_MODULE_BYTES;
pub use grant::{Grant, Verb};
pub use limits::{
    DEFAULT_ERROR_BYTES, DEFAULT_HOST_CALL_TIMEOUT, DEFAULT_LOG_BYTES,
    DEFAULT_LOG_LINES_PER_SECOND, DEFAULT_MAP_KEYS, DEFAULT_MEMORY_BYTES, DEFAULT_TIMEOUT,
    DEFAULT_WRITE_BYTES, Limits, MIN_CAP_BYTES, MIN_MEMORY_BYTES,
};
pub use quantity::{QuantityError, parse_quantity};
pub use queue::QueueConfig;

use controller::ControllersConfig;

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
        file::parse(&text, base_dir).map_err(|error| match error {
            ConfigError::Parse { path: None, source } => ConfigError::Parse {
                path: Some(path.to_owned()),
                source,
            },
            other => other,
        })
    }

    /// Parses and validates `text`; relative module paths resolve against `base_dir`.
    pub fn from_yaml(text: &str, base_dir: &Path) -> Result<Config, ConfigError> {
        file::parse(text, base_dir)
    }
}

/// The error of a field `field` whose value is wrong as `message` says.
fn invalid(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        message: message.into(),
    }
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

#[cfg(test)]
mod tests;
