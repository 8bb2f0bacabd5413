//! Bytes per cached object: the informer caches of kubewasm, kube-rs and controller-runtime
//! hold the same namespace's ConfigMaps or Pods side by side, and each process's RSS growth per
//! object is read once the objects are cached and the process has settled.
//!
//! Every cache starts on the empty namespace (its baseline), the objects are created and reach
//! the caches through their watches ("watched"), then every process starts again and lists
//! them ("listed"). The natives run in their cache-only modes (`bench-native --cache`,
//! `bench-controller-runtime -cache`): a kube-rs reflector `Store` and a controller-runtime
//! informer, each as it comes by default and with `managedFields` stripped, the memory advice
//! both projects give. kubewasm runs the `bench-cache-guest`, which owns both kinds and so has
//! the host cache them, and reconciles nothing.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::bench::{Bench, report_unclean};
use crate::controllers::{Controllers, Implementation, free_loopback_address};
use crate::load;
use crate::procfs::Usage;
use kubewasm_tests::prometheus::{self, has};

/// How long a process is left alone once its cache holds every object, before its memory is
/// read: the allocators return what the list or the watch left behind.
const SETTLE: Duration = Duration::from_secs(5);
/// Objects created at the same time.
const CREATE_CONCURRENCY: usize = 32;

/// The kind of the cached objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    /// ConfigMaps with 1 KiB of data in 8 keys, 5 labels and 2 annotations.
    Configmaps,
    /// Pods with two containers and a full spec, about 4 KiB as the API server serves them.
    Pods,
}

impl Shape {
    /// The name the cache-only modes take.
    pub fn name(self) -> &'static str {
        match self {
            Self::Configmaps => "configmaps",
            Self::Pods => "pods",
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Self::Configmaps => "ConfigMap",
            Self::Pods => "Pod",
        }
    }
}

/// One cache under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Cacher {
    pub implementation: Implementation,
    /// Whether `managedFields` are dropped before objects are cached; kubewasm always keeps
    /// only its own field managers' entries.
    pub strip_managed_fields: bool,
}

impl Cacher {
    /// kubewasm, then each native as it comes and with `managedFields` stripped.
    pub const ALL: [Cacher; 5] = [
        Cacher::new(Implementation::Kubewasm, false),
        Cacher::new(Implementation::KubeRs, false),
        Cacher::new(Implementation::KubeRs, true),
        Cacher::new(Implementation::ControllerRuntime, false),
        Cacher::new(Implementation::ControllerRuntime, true),
    ];

    const fn new(implementation: Implementation, strip_managed_fields: bool) -> Self {
        Self {
            implementation,
            strip_managed_fields,
        }
    }

    /// The name in tables: the implementation, with `-stripped` when managedFields are dropped.
    pub fn name(&self) -> String {
        match self.strip_managed_fields {
            true => format!("{}-stripped", self.implementation.name()),
            false => self.implementation.name().to_owned(),
        }
    }
}

/// What one cache measured.
#[derive(Debug, Clone, Serialize)]
pub struct CacheFigures {
    pub cacher: Cacher,
    /// On the empty namespace, settled.
    pub empty: Usage,
    /// Holding every object, which arrived through the watch, settled.
    pub watched: Usage,
    /// A fresh process holding every object, which it listed, settled.
    pub listed: Usage,
    /// RSS growth per object from `empty` to `watched`.
    pub watched_bytes_per_object: f64,
    /// RSS growth per object from `empty` to `listed`.
    pub listed_bytes_per_object: f64,
}

/// One size of one shape, every cache side by side.
#[derive(Debug, Clone, Serialize)]
pub struct CacheRun {
    pub shape: Shape,
    pub objects: usize,
    /// One object's JSON as the API server serves it, managedFields included.
    pub object_bytes: usize,
    /// The same without managedFields.
    pub object_bytes_without_managed_fields: usize,
    pub caches: Vec<CacheFigures>,
}

/// Measures every cache of `cachers` on `objects` objects of `shape`.
pub async fn run(
    bench: &Bench,
    shape: Shape,
    objects: usize,
    cachers: &[Cacher],
) -> Result<CacheRun> {
    let namespace = format!("cache-{}-{objects}", shape.name());
    load::create_namespace(&bench.client, &namespace).await?;
    let label = format!("cache-{}-{objects}", shape.name());
    // A first kubewasm host compiles the cache guest into the compile cache, so that every
    // measured host starts from it, as a restarted host does.
    if let Some(&kubewasm) = cachers
        .iter()
        .find(|c| c.implementation == Implementation::Kubewasm)
    {
        let primed = start_all(bench, &label, &namespace, shape, &[kubewasm], 0).await?;
        stop_all(primed).await?;
    }
    let mut running = start_all(bench, &label, &namespace, shape, cachers, 0).await?;
    let empty = usages(&running)?;

    let started = Instant::now();
    let sizes = create(bench, &namespace, shape, objects).await?;
    eprintln!(
        "cache: created {objects} {} in {:.1} s",
        shape.name(),
        started.elapsed().as_secs_f64()
    );
    wait_all(&mut running, &namespace, shape, objects).await?;
    tokio::time::sleep(SETTLE).await;
    let watched = usages(&running)?;
    stop_all(running).await?;

    let running = start_all(bench, &label, &namespace, shape, cachers, objects).await?;
    let listed = usages(&running)?;
    stop_all(running).await?;
    load::delete_namespaces(&bench.client, &[namespace]).await?;

    let per_object = |from: &Usage, to: &Usage| {
        (to.rss_bytes as f64 - from.rss_bytes as f64) / objects.max(1) as f64
    };
    let caches = cachers
        .iter()
        .zip(empty.into_iter().zip(watched).zip(listed))
        .map(|(&cacher, ((empty, watched), listed))| CacheFigures {
            cacher,
            watched_bytes_per_object: per_object(&empty, &watched),
            listed_bytes_per_object: per_object(&empty, &listed),
            empty,
            watched,
            listed,
        })
        .collect::<Vec<_>>();
    for figures in &caches {
        println!(
            "cache {:<9} {objects:>6} {:<29} {:>6.0} B/object watched, {:>6.0} B/object listed",
            shape.name(),
            figures.cacher.name(),
            figures.watched_bytes_per_object,
            figures.listed_bytes_per_object,
        );
    }
    Ok(CacheRun {
        shape,
        objects,
        object_bytes: sizes.0,
        object_bytes_without_managed_fields: sizes.1,
        caches,
    })
}

/// A cache process and where it tells how many objects it holds.
struct Running {
    cacher: Cacher,
    process: Controllers,
    metrics: Option<SocketAddr>,
}

/// Starts every cache, waits until each holds `objects` objects, and lets them settle.
async fn start_all(
    bench: &Bench,
    label: &str,
    namespace: &str,
    shape: Shape,
    cachers: &[Cacher],
    objects: usize,
) -> Result<Vec<Running>> {
    let mut running = cachers
        .iter()
        .map(|&cacher| {
            let metrics = match cacher.implementation {
                Implementation::Kubewasm => Some(free_loopback_address()?),
                _ => None,
            };
            let process = bench.launcher.start_cache(
                &format!("{label}-{}", cacher.name()),
                namespace,
                shape.name(),
                cacher.implementation,
                cacher.strip_managed_fields,
                metrics,
            )?;
            Ok(Running {
                cacher,
                process,
                metrics,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    wait_all(&mut running, namespace, shape, objects).await?;
    tokio::time::sleep(SETTLE).await;
    Ok(running)
}

/// Waits until every cache has listed and holds `objects` objects.
async fn wait_all(
    running: &mut [Running],
    namespace: &str,
    shape: Shape,
    objects: usize,
) -> Result<()> {
    let timeout = Duration::from_secs(120) + Duration::from_millis(10) * objects as u32;
    let deadline = Instant::now() + timeout;
    for cache in running.iter_mut() {
        loop {
            cache.process.check_running()?;
            let held = match cache.metrics {
                Some(address) => host_holds(address, namespace, shape).await,
                None => native_holds(&cache.process.log()),
            };
            if held == Some(objects) {
                break;
            }
            if Instant::now() >= deadline {
                bail!(
                    "timed out after {timeout:?} waiting for {} to cache {objects} {} (it holds \
                     {held:?}):\n{}",
                    cache.cacher.name(),
                    shape.name(),
                    cache.process.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

/// The objects a kubewasm host's cache of `shape` in `namespace` holds once it has listed.
async fn host_holds(address: SocketAddr, namespace: &str, shape: Shape) -> Option<usize> {
    let metrics = prometheus::scrape(address).await.ok()?;
    let ours = |labels: &[(&str, &str)]| {
        has(labels, "kind", shape.kind()) && has(labels, "namespace", namespace)
    };
    let lists = prometheus::sum(&metrics, "kubewasm_cache_lists_total", ours);
    (lists >= 1.0).then(|| prometheus::sum(&metrics, "kubewasm_cache_objects", ours) as usize)
}

/// The objects a native cache holds: the last `cached N` line it printed, once it has listed.
fn native_holds(log: &str) -> Option<usize> {
    log.lines()
        .rev()
        .find_map(|line| line.strip_prefix("cached ")?.trim().parse().ok())
}

fn usages(running: &[Running]) -> Result<Vec<Usage>> {
    running.iter().map(|r| r.process.usage()).collect()
}

async fn stop_all(running: Vec<Running>) -> Result<()> {
    for cache in running {
        report_unclean(&cache.process.stop().await?);
    }
    Ok(())
}

/// Creates `count` objects of `shape` named `obj-000000`, ...; returns the size of the first
/// as served, with and without managedFields.
async fn create(
    bench: &Bench,
    namespace: &str,
    shape: Shape,
    count: usize,
) -> Result<(usize, usize)> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", shape.kind()));
    let api: Api<DynamicObject> = Api::namespaced_with(bench.client.clone(), namespace, &resource);
    let params = PostParams {
        field_manager: Some("bench-load".into()),
        ..PostParams::default()
    };
    futures::stream::iter(0..count)
        .map(|index| {
            let (api, params) = (&api, &params);
            async move {
                let object: DynamicObject = serde_json::from_value(object(shape, index))?;
                // Sent again when the connection drops: a create whose answer was lost is
                // found to exist.
                match crate::load::retry(|| api.create(params, &object)).await {
                    Ok(_) => anyhow::Ok(()),
                    Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
                    Err(error) => {
                        Err(error).with_context(|| format!("creating {} {index}", shape.name()))
                    }
                }
            }
        })
        .buffer_unordered(CREATE_CONCURRENCY)
        .try_collect::<()>()
        .await?;
    let first = api.get(&name(0)).await?;
    let mut served = serde_json::to_value(&first)?;
    let with = serde_json::to_string(&served)?.len();
    if let Some(meta) = served["metadata"].as_object_mut() {
        meta.remove("managedFields");
    }
    Ok((with, serde_json::to_string(&served)?.len()))
}

fn name(index: usize) -> String {
    format!("obj-{index:06}")
}

/// The object number `index` of `shape`.
fn object(shape: Shape, index: usize) -> Value {
    let team = ["payments", "search", "checkout", "identity"][index % 4];
    let labels = json!({
        "app.kubernetes.io/name": "shop",
        "app.kubernetes.io/instance": format!("shop-{}", index % 50),
        "app.kubernetes.io/component": "backend",
        "app.kubernetes.io/part-of": "storefront",
        "team": team,
    });
    let annotations = json!({
        "example.com/revision": (index % 1000).to_string(),
        "example.com/contact": format!("{team}-oncall@example.com"),
    });
    let metadata = json!({ "name": name(index), "labels": labels, "annotations": annotations });
    match shape {
        Shape::Configmaps => {
            // 8 values of 128 bytes: 1 KiB of data, different in every object.
            let data: serde_json::Map<String, Value> = (0..8)
                .map(|key| {
                    let seed = format!("{index:06}-{key}-");
                    let value: String = seed.chars().cycle().take(128).collect();
                    (format!("setting-{key}.properties"), Value::String(value))
                })
                .collect();
            json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data })
        }
        Shape::Pods => json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": pod_spec(index),
        }),
    }
}

/// A pod spec as a Deployment of a web service renders one: an application container and a
/// sidecar, with environment, resources, probes, mounts, volumes and scheduling constraints.
fn pod_spec(index: usize) -> Value {
    let env: Vec<Value> = (0..8)
        .map(|i| json!({ "name": format!("SETTING_{i}"), "value": format!("value-{index}-{i}") }))
        .chain([
            json!({ "name": "POD_NAME", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } }),
            json!({ "name": "POD_IP", "valueFrom": { "fieldRef": { "fieldPath": "status.podIP" } } }),
        ])
        .collect();
    let probe = |path: &str, delay: u32| {
        json!({
            "httpGet": { "path": path, "port": "http" },
            "initialDelaySeconds": delay, "periodSeconds": 10, "timeoutSeconds": 2,
            "failureThreshold": 3
        })
    };
    json!({
        "serviceAccountName": "shop",
        "terminationGracePeriodSeconds": 30,
        "nodeSelector": { "kubernetes.io/os": "linux" },
        "tolerations": [
            { "key": "dedicated", "operator": "Equal", "value": "shop", "effect": "NoSchedule" }
        ],
        "affinity": { "podAntiAffinity": { "preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100,
            "podAffinityTerm": {
                "topologyKey": "kubernetes.io/hostname",
                "labelSelector": { "matchLabels": { "app.kubernetes.io/name": "shop" } }
            }
        }]}},
        "securityContext": { "runAsNonRoot": true, "runAsUser": 10001, "fsGroup": 10001 },
        "containers": [
            {
                "name": "app",
                "image": "registry.example.com/shop/backend:1.42.0",
                "args": ["--config=/etc/shop/config.yaml", "--listen=:8080"],
                "ports": [
                    { "name": "http", "containerPort": 8080 },
                    { "name": "metrics", "containerPort": 9090 }
                ],
                "env": env,
                "resources": {
                    "requests": { "cpu": "250m", "memory": "256Mi" },
                    "limits": { "cpu": "1", "memory": "512Mi" }
                },
                "livenessProbe": probe("/healthz", 10),
                "readinessProbe": probe("/readyz", 5),
                "volumeMounts": [
                    { "name": "config", "mountPath": "/etc/shop", "readOnly": true },
                    { "name": "tls", "mountPath": "/etc/tls", "readOnly": true },
                    { "name": "cache", "mountPath": "/var/cache/shop" }
                ],
                "securityContext": {
                    "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                    "capabilities": { "drop": ["ALL"] }
                }
            },
            {
                "name": "proxy",
                "image": "registry.example.com/mesh/proxy:2.7.1",
                "args": ["proxy", "sidecar", "--log-level=warn"],
                "ports": [{ "name": "proxy", "containerPort": 15001 }],
                "resources": {
                    "requests": { "cpu": "50m", "memory": "64Mi" },
                    "limits": { "cpu": "500m", "memory": "128Mi" }
                },
                "readinessProbe": probe("/ready", 1),
                "volumeMounts": [{ "name": "tls", "mountPath": "/etc/tls", "readOnly": true }]
            }
        ],
        "volumes": [
            { "name": "config", "configMap": { "name": "shop-config" } },
            { "name": "tls", "secret": { "secretName": "shop-tls" } },
            { "name": "cache", "emptyDir": { "sizeLimit": "1Gi" } }
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_native_holds_what_it_printed_last() {
        assert_eq!(native_holds(""), None);
        assert_eq!(native_holds("cached 0\ncached 10\n"), Some(10));
        assert_eq!(native_holds("cached 3\nwarning: retry\n"), Some(3));
    }

    #[test]
    fn config_maps_carry_a_kibibyte_of_data_five_labels_and_two_annotations() {
        let object = object(Shape::Configmaps, 7);
        let data = object["data"].as_object().unwrap();
        let bytes: usize = data.values().map(|v| v.as_str().unwrap().len()).sum();
        assert_eq!(bytes, 1024);
        assert_eq!(object["metadata"]["labels"].as_object().unwrap().len(), 5);
        assert_eq!(
            object["metadata"]["annotations"].as_object().unwrap().len(),
            2
        );
        assert_ne!(object["data"], super::object(Shape::Configmaps, 8)["data"]);
    }
}
