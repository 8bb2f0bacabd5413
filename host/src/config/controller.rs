//! WasmController objects: the spec of one controller, validated as the configuration file's
//! entries are, and confined to its namespace.
//!
//! A WasmController outside the host's cluster-wide namespaces runs only in its own namespace:
//! its `namespaces` may name only that one (empty means it), the kinds it watches in every
//! namespace are watched in that one, and each grant is limited to it (a grant without
//! namespaces is given it; one naming another is refused). Without grants it
//! may do anything on the kinds it declares, in that namespace only. A cluster-scoped kind is
//! never covered by a namespaced grant, so such a controller cannot declare one. In a
//! cluster-wide namespace, the spec is taken as a file entry would be.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::maxima::{Maxima, Set};
use super::overrides::{validate_overrides, with_overrides};
use super::{
    ConfigError, Grant, ImageSource, KeyRef, ModuleConfig, QueueConfig, Source, Verb, invalid,
    parse_duration,
};
use crate::cluster::selector::is_dns1123_subdomain;

/// API group, version and kind of the controller objects.
pub const GROUP: &str = "kubewasm.dev";
/// Their version.
pub const VERSION: &str = "v1alpha1";
/// Their kind.
pub const KIND: &str = "WasmController";
/// Their resource.
pub const PLURAL: &str = "wasmcontrollers";

/// How often the host's access is reviewed again when the configuration does not say.
pub const DEFAULT_REVIEW_INTERVAL: Duration = Duration::from_secs(300);
/// How often, at most, a controller's reconcile counters alone are written to its status when
/// the configuration does not say.
pub const DEFAULT_COUNTERS_INTERVAL: Duration = Duration::from_secs(60);
/// How many replaced revisions status keeps when the spec does not say.
pub const DEFAULT_HISTORY_LIMIT: u32 = 10;
/// How often a tag is resolved again when the spec does not say.
pub const DEFAULT_POLL: Duration = Duration::from_secs(300);
/// How often a ConfigMap, Secret or file source is read again when the spec does not say.
pub const DEFAULT_READ: Duration = Duration::from_secs(30);

/// How many namespaces of one kind get informers of their own when the config does not say.
pub const DEFAULT_NAMESPACE_INFORMERS: usize = 32;

/// How the host treats controller objects.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ControllersConfig {
    /// Whether the host watches WasmController objects.
    pub watch: bool,
    /// The namespaces whose WasmControllers it watches; empty: every namespace.
    pub namespaces: Vec<String>,
    /// Namespaces whose WasmControllers may watch and write every namespace.
    pub cluster_namespaces: Vec<String>,
    /// Whether a spec may name a file on the host.
    pub allow_paths: bool,
    /// Registries spoken to in plain HTTP, besides loopback ones.
    pub insecure_registries: Vec<String>,
    /// The largest module accepted, in bytes.
    pub max_module_bytes: u64,
    /// The bounds of what a confined WasmController may set.
    pub maxima: Maxima,
    /// How often the host asks the API server again whether it may do what each controller
    /// may; `None` never.
    pub review_interval: Option<Duration>,
    /// How often, at most, a controller's status is written while only its reconcile counters
    /// move; a new outcome, error or condition is written at once.
    pub counters_interval: Duration,
    /// How many namespaces get informers of their own for one kind, label selector and
    /// transform before the host serves the others from one informer of every namespace; 0:
    /// every namespace keeps its own.
    pub namespace_informers: usize,
}

/// The automatic rollback of a new revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rollback {
    /// Whether a failing new revision is replaced by the last good one.
    pub enabled: bool,
    /// Consecutive failed reconciles that make a revision bad.
    pub failures: u32,
    /// Within how long of its start.
    pub window: Duration,
}

impl Default for Rollback {
    fn default() -> Self {
        Self {
            enabled: true,
            failures: 5,
            window: Duration::from_secs(600),
        }
    }
}

/// A validated WasmController spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerSpec {
    /// The module, its source and its overrides, confined as the module doc says.
    pub module: ModuleConfig,
    /// Whether the controller is stopped.
    pub paused: bool,
    /// The automatic rollback.
    pub rollback: Rollback,
    /// How many replaced revisions status keeps.
    pub history_limit: u32,
    /// How often the source is read again (a tag resolved again) and a new module rolled out;
    /// `None` never, as for an image by digest.
    pub poll: Option<Duration>,
}

with_overrides! {
    /// A WasmController's spec as written.
    struct RawSpec {
        module: RawSource,
        controller_name: Option<String>,
        #[serde(default)]
        paused: bool,
    } + overrides(controller_name) + {
        rollback: Option<RawRollback>,
        revision_history_limit: Option<u32>,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawSource {
    image: Option<String>,
    image_pull_secret: Option<String>,
    poll_interval: Option<String>,
    config_map: Option<RawKeyRef>,
    secret: Option<RawKeyRef>,
    path: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKeyRef {
    name: String,
    key: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRollback {
    enabled: Option<bool>,
    failures: Option<u32>,
    window: Option<String>,
}

/// Validates the `spec` of a WasmController in `namespace`; errors name fields as `spec.…`.
pub fn parse_spec(
    spec: &serde_json::Value,
    namespace: &str,
    settings: &ControllersConfig,
    queue: &QueueConfig,
) -> Result<ControllerSpec, ConfigError> {
    let mut raw: RawSpec =
        serde_json::from_value(spec.clone()).map_err(|e| invalid("spec", e.to_string()))?;
    let overrides = raw.overrides();
    let (source, poll) = source(raw.module, settings)?;
    let confined = !settings.cluster_namespaces.iter().any(|n| n == namespace);
    let set = Set::of(
        overrides.limits.as_ref(),
        overrides.max_concurrency,
        overrides.queue.as_ref(),
    );
    let mut module = validate_overrides(source, overrides, "spec", "controllerName", queue)?;
    if confined {
        confine(&mut module, namespace)?;
        settings.maxima.enforce(&mut module, poll, &set)?;
    }
    let defaults = Rollback::default();
    let rollback = match raw.rollback {
        None => defaults,
        Some(raw) => Rollback {
            enabled: raw.enabled.unwrap_or(defaults.enabled),
            failures: match raw.failures {
                Some(0) => return Err(invalid("spec.rollback.failures", "0 is not at least 1")),
                Some(n) => n,
                None => defaults.failures,
            },
            window: raw
                .window
                .map(|w| parse_duration(&w).map_err(|e| invalid("spec.rollback.window", e)))
                .transpose()?
                .unwrap_or(defaults.window),
        },
    };
    Ok(ControllerSpec {
        module,
        paused: raw.paused,
        rollback,
        history_limit: raw
            .revision_history_limit
            .unwrap_or(DEFAULT_HISTORY_LIMIT)
            .min(100),
        poll,
    })
}

/// Where a spec's fields about its module are, for errors.
const MODULE_AT: &str = "spec.module";

/// The module's source, and how often it is read again.
fn source(
    raw: RawSource,
    settings: &ControllersConfig,
) -> Result<(Source, Option<Duration>), ConfigError> {
    let set = [
        raw.image.is_some(),
        raw.config_map.is_some(),
        raw.secret.is_some(),
        raw.path.is_some(),
    ];
    if set.iter().filter(|s| **s).count() != 1 {
        return Err(invalid(
            MODULE_AT,
            "set exactly one of image, configMap, secret and path",
        ));
    }
    if raw.image.is_none() && raw.image_pull_secret.is_some() {
        return Err(invalid(
            MODULE_AT,
            "imagePullSecret applies only to an image",
        ));
    }
    let poll = poll_interval(&raw)?;
    if let Some(reference) = raw.image {
        return Ok((image(reference, raw.image_pull_secret)?, poll));
    }
    if let Some(raw) = raw.config_map {
        return Ok((Source::ConfigMap(key_ref(raw, "configMap")?), poll));
    }
    if let Some(raw) = raw.secret {
        return Ok((Source::Secret(key_ref(raw, "secret")?), poll));
    }
    let path = raw.path.expect("one source is set");
    Ok((file(path, settings)?, poll))
}

/// How often the source of `raw` is read again: `None` never, as for an image by digest.
fn poll_interval(raw: &RawSource) -> Result<Option<Duration>, ConfigError> {
    let by_digest = raw.image.as_ref().is_some_and(|r| r.contains("@sha256:"));
    let default = if raw.image.is_some() {
        DEFAULT_POLL
    } else {
        DEFAULT_READ
    };
    let poll = match &raw.poll_interval {
        Some(text) => {
            parse_duration(text).map_err(|e| invalid(format!("{MODULE_AT}.pollInterval"), e))?
        }
        None => default,
    };
    Ok(Some(poll).filter(|p| !p.is_zero() && !by_digest))
}

/// An image source, its pull secret an object name.
fn image(reference: String, pull_secret: Option<String>) -> Result<Source, ConfigError> {
    if let Some(secret) = &pull_secret
        && !is_dns1123_subdomain(secret)
    {
        return Err(invalid(
            format!("{MODULE_AT}.imagePullSecret"),
            format!("{secret:?} is not an object name"),
        ));
    }
    Ok(Source::Image(ImageSource {
        reference,
        pull_secret,
    }))
}

/// The key of a ConfigMap or Secret at `field` of the module: an object name and a key.
fn key_ref(raw: RawKeyRef, field: &str) -> Result<KeyRef, ConfigError> {
    if !is_dns1123_subdomain(&raw.name) {
        return Err(invalid(
            format!("{MODULE_AT}.{field}.name"),
            format!("{:?} is not an object name", raw.name),
        ));
    }
    if raw.key.is_empty() {
        return Err(invalid(
            format!("{MODULE_AT}.{field}.key"),
            "must not be empty",
        ));
    }
    Ok(KeyRef {
        name: raw.name,
        key: raw.key,
    })
}

/// A file source: allowed by `settings`, and an absolute path.
fn file(path: PathBuf, settings: &ControllersConfig) -> Result<Source, ConfigError> {
    if !settings.allow_paths {
        return Err(invalid(
            format!("{MODULE_AT}.path"),
            "this host does not load modules from files named by controller objects \
             (controllers.allowPaths)",
        ));
    }
    if !path.is_absolute() {
        return Err(invalid(
            format!("{MODULE_AT}.path"),
            format!("{:?} is not an absolute path", path),
        ));
    }
    Ok(Source::File(path))
}

/// Limits `module` to `namespace`, as the module doc says.
fn confine(module: &mut ModuleConfig, namespace: &str) -> Result<(), ConfigError> {
    if let Some(other) = module.namespaces.iter().find(|n| *n != namespace) {
        return Err(invalid(
            "spec.namespaces",
            format!(
                "{other:?} is not this object's namespace; only WasmControllers in the host's \
                 cluster-wide namespaces may watch other namespaces"
            ),
        ));
    }
    module.namespaces = vec![namespace.to_owned()];
    module.confined = true;
    let grants = module.grants.get_or_insert_with(|| {
        vec![Grant {
            api_groups: vec!["*".into()],
            resources: vec!["*".into()],
            verbs: vec![Verb::All],
            namespaces: Vec::new(),
        }]
    });
    for (i, grant) in grants.iter_mut().enumerate() {
        if let Some(other) = grant.namespaces.iter().find(|n| *n != namespace) {
            return Err(invalid(
                format!("spec.grants[{i}].namespaces"),
                format!("{other:?} is not this object's namespace"),
            ));
        }
        grant.namespaces = vec![namespace.to_owned()];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::{Value, json};

    use super::*;
    use crate::config::Config;

    /// The module of `spec` in `ns`, a cluster-wide namespace: taken as a file entry is.
    fn module(spec: Value) -> Result<ModuleConfig, String> {
        let settings = ControllersConfig {
            allow_paths: true,
            cluster_namespaces: vec!["ns".into()],
            ..ControllersConfig::default()
        };
        parse_spec(&spec, "ns", &settings, &QueueConfig::default())
            .map(|spec| spec.module)
            .map_err(|e| e.to_string())
    }

    /// The error of `spec` with `field` set to `value`.
    fn refused(field: &str, value: Value) -> String {
        module(json!({ "module": { "path": "/m.wasm" }, field: value })).unwrap_err()
    }

    #[test]
    fn an_unknown_field_of_a_spec_is_refused_naming_it() {
        assert_eq!(
            refused("maxConcurency", json!(3)),
            "spec: unknown field `maxConcurency`, expected one of `module`, `controllerName`, \
             `paused`, `maxConcurrency`, `resyncSeconds`, `namespaces`, `limits`, `grants`, \
             `queue`, `cache`, `rollback`, `revisionHistoryLimit`"
        );
        assert_eq!(
            refused("limits", json!({ "timeout": 1 })),
            "spec: unknown field `timeout`, expected one of `timeoutMs`, `memoryBytes`, \
             `hostCallTimeoutMs`, `writeBytes`, `logBytes`, `errorBytes`, `mapKeys`, \
             `logLinesPerSecond`"
        );
    }

    #[test]
    fn a_known_field_of_the_wrong_type_is_refused() {
        assert_eq!(
            refused("maxConcurrency", json!("3")),
            "spec: invalid type: string \"3\", expected u32"
        );
        assert_eq!(
            refused("resyncSeconds", json!(5_000_000_000u64)),
            "spec: invalid value: integer `5000000000`, expected u32"
        );
        assert_eq!(
            refused("namespaces", json!("ns")),
            "spec: invalid type: string \"ns\", expected a sequence"
        );
        let null = module(json!({ "module": { "path": "/m.wasm" }, "maxConcurrency": null }));
        assert_eq!(null.unwrap().max_concurrency, None);
    }

    #[test]
    fn a_spec_overrides_as_a_file_entry_does() {
        let entry = "{path: /m.wasm, name: m, maxConcurrency: 3, resyncSeconds: 60, \
            namespaces: [ns], limits: {timeoutMs: 5, memoryBytes: 2Mi}, queue: {qps: 3}, \
            grants: [{apiGroups: [''], resources: [pods], verbs: [get]}], \
            cache: {drop: [{fields: [/status]}]}}";
        let file = Config::from_yaml(&format!("modules: [{entry}]"), Path::new("/"));
        let spec = module(json!({
            "module": { "path": "/m.wasm" },
            "controllerName": "m",
            "maxConcurrency": 3,
            "resyncSeconds": 60,
            "namespaces": ["ns"],
            "limits": { "timeoutMs": 5, "memoryBytes": "2Mi" },
            "queue": { "qps": 3 },
            "grants": [{ "apiGroups": [""], "resources": ["pods"], "verbs": ["get"] }],
            "cache": { "drop": [{ "fields": ["/status"] }] },
        }))
        .unwrap();
        assert_eq!(file.unwrap().modules[0], spec);
        assert_eq!(spec.name.as_deref(), Some("m"));
        assert_eq!(spec.limits.memory_bytes, 2 << 20);
    }

    #[test]
    fn a_module_source_is_refused_naming_its_field() {
        let cases = [
            (
                json!({}),
                "spec.module: set exactly one of image, configMap, secret and path",
            ),
            (
                json!({ "path": "/m.wasm", "imagePullSecret": "s" }),
                "spec.module: imagePullSecret applies only to an image",
            ),
            (
                json!({ "image": "r/m:1", "pollInterval": "often" }),
                "spec.module.pollInterval: \"often\" is not a duration such as 15s, 500ms or 1m30s",
            ),
            (
                json!({ "image": "r/m:1", "imagePullSecret": "A" }),
                "spec.module.imagePullSecret: \"A\" is not an object name",
            ),
            (
                json!({ "configMap": { "name": "c", "key": "" } }),
                "spec.module.configMap.key: must not be empty",
            ),
            (
                json!({ "secret": { "name": "S", "key": "k" } }),
                "spec.module.secret.name: \"S\" is not an object name",
            ),
            (
                json!({ "path": "m.wasm" }),
                "spec.module.path: \"m.wasm\" is not an absolute path",
            ),
        ];
        for (source, error) in cases {
            assert_eq!(module(json!({ "module": source })).unwrap_err(), error);
        }
        let settings = ControllersConfig::default();
        let spec = json!({ "module": { "path": "/m.wasm" } });
        let error = parse_spec(&spec, "ns", &settings, &QueueConfig::default()).unwrap_err();
        assert!(
            error.to_string().contains("(controllers.allowPaths)"),
            "{error}"
        );
    }

    #[test]
    fn a_source_is_read_again_unless_pinned() {
        let poll = |source: Value| {
            let settings = ControllersConfig {
                allow_paths: true,
                ..ControllersConfig::default()
            };
            let spec = json!({ "module": source });
            parse_spec(&spec, "ns", &settings, &QueueConfig::default())
                .unwrap()
                .poll
        };
        assert_eq!(poll(json!({ "image": "r/m:1" })), Some(DEFAULT_POLL));
        assert_eq!(poll(json!({ "image": "r/m@sha256:00" })), None);
        assert_eq!(poll(json!({ "path": "/m.wasm" })), Some(DEFAULT_READ));
        let never = json!({ "configMap": { "name": "c", "key": "k" }, "pollInterval": "0" });
        assert_eq!(poll(never), None);
    }
}
