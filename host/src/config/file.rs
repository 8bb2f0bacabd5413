//! The configuration file as written (`RawConfig` and its sections) and its validation into a
//! [`Config`].

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::controller::{self, ControllersConfig};
use super::maxima;
use super::overrides::{validate_overrides, with_overrides};
use super::quantity::byte_size;
use super::queue::{RawQueue, validate_queue};
use super::{
    BindAddress, Config, ConfigError, MIN_CAP_BYTES, ManagerConfig, ModuleConfig, QueueConfig,
    Source, invalid, namespace_list, parse_duration,
};
use crate::cluster::selector::{is_dns1123_label, is_dns1123_subdomain};

/// The whole file as written.
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

/// `controllers` as written.
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
    status_counters_interval: Option<String>,
    namespace_informers_per_kind: Option<usize>,
}

/// `controllers.registries` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawRegistries {
    #[serde(default)]
    insecure: Vec<String>,
    max_module_size: Option<serde_yaml::Value>,
}

/// `metrics` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawMetrics {
    bind_address: Option<String>,
}

/// `health` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawHealth {
    health_probe_bind_address: Option<String>,
}

/// `leaderElection` as written.
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

with_overrides! {
    /// An entry of `modules` as written.
    struct RawModule {
        path: PathBuf,
        name: Option<String>,
    } + overrides(name)
}

/// Parses and validates `text`; relative module paths resolve against `base_dir`.
pub(super) fn parse(text: &str, base_dir: &Path) -> Result<Config, ConfigError> {
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
            counters_interval: controller::DEFAULT_COUNTERS_INTERVAL,
            namespace_informers: controller::DEFAULT_NAMESPACE_INFORMERS,
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
        counters_interval: match raw.status_counters_interval {
            None => controller::DEFAULT_COUNTERS_INTERVAL,
            Some(text) => parse_duration(&text)
                .map_err(|e| invalid("controllers.statusCountersInterval", e))?,
        },
        namespace_informers: raw
            .namespace_informers_per_kind
            .unwrap_or(controller::DEFAULT_NAMESPACE_INFORMERS),
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
    mut raw: RawModule,
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
    validate_overrides(source, raw.overrides(), at, "name", queue)
}
