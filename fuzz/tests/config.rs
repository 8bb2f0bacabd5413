//! Fuzz targets of the configuration: the YAML file and the spec of a WasmController.
//!
//! Any input is either refused with an error that names where it is wrong, or accepted as a
//! configuration that keeps every documented bound; nothing panics. Under `cargo test` each
//! target runs random inputs for a few seconds; `fuzz/run TARGET` runs it coverage-guided.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use kubewasm::cluster::selector::is_dns1123_label;
use kubewasm::config::controller::{ControllersConfig, parse_spec};
use kubewasm::config::{
    Config, ConfigError, Grant, MAX_CONCURRENCY, MIN_CAP_BYTES, MIN_MEMORY_BYTES, ModuleConfig,
    QueueConfig,
};
use kubewasm_fuzz::{Draw, test_time};
use serde_json::{Value, json};

/// How long each target runs under `cargo test` by default.
const TEST_TIME: Duration = Duration::from_secs(3);

/// What a field holds, so that most generated documents have the right shape and reach the
/// validation behind it.
#[derive(Clone, Copy)]
enum Shape {
    Name,
    Number,
    Quantity,
    Duration,
    Flag,
    Words(&'static [&'static str]),
    Path,
    Text,
    Section(&'static [&'static str]),
    Sections(&'static [&'static str]),
}

/// Every field of the file and of a spec, by name.
const FIELDS: &[(&str, Shape)] = &[
    ("modules", Shape::Sections(MODULE)),
    ("path", Shape::Path),
    ("name", Shape::Name),
    ("maxConcurrency", Shape::Number),
    ("resyncSeconds", Shape::Number),
    ("namespaces", Shape::Words(NAMESPACES)),
    ("limits", Shape::Section(LIMITS)),
    ("timeoutMs", Shape::Number),
    ("memoryBytes", Shape::Quantity),
    ("hostCallTimeoutMs", Shape::Number),
    ("writeBytes", Shape::Quantity),
    ("logBytes", Shape::Quantity),
    ("errorBytes", Shape::Quantity),
    ("mapKeys", Shape::Number),
    ("logLinesPerSecond", Shape::Number),
    ("cache", Shape::Section(&["drop"])),
    ("drop", Shape::Sections(&["apiGroups", "kinds", "fields"])),
    ("apiGroups", Shape::Words(&["", "*", "apps", "example.com"])),
    ("kinds", Shape::Words(&["*", "ConfigMap", "Deployment"])),
    (
        "fields",
        Shape::Words(&["/status", "/metadata/annotations/a~1b", "/spec/~0"]),
    ),
    (
        "grants",
        Shape::Sections(&["apiGroups", "resources", "verbs", "namespaces"]),
    ),
    (
        "resources",
        Shape::Words(&["*", "pods", "pods/status", "*/scale", "configmaps"]),
    ),
    ("verbs", Shape::Words(VERBS)),
    (
        "queue",
        Shape::Section(&["baseBackoffMs", "maxBackoffSeconds", "qps", "burst"]),
    ),
    ("baseBackoffMs", Shape::Number),
    ("maxBackoffSeconds", Shape::Number),
    ("qps", Shape::Number),
    ("burst", Shape::Number),
    ("metrics", Shape::Section(&["bindAddress"])),
    ("bindAddress", Shape::Text),
    ("health", Shape::Section(&["healthProbeBindAddress"])),
    ("healthProbeBindAddress", Shape::Text),
    ("leaderElection", Shape::Section(ELECTION)),
    ("leaderElect", Shape::Flag),
    ("resourceNamespace", Shape::Name),
    ("resourceName", Shape::Name),
    ("leaseDuration", Shape::Duration),
    ("renewDeadline", Shape::Duration),
    ("retryPeriod", Shape::Duration),
    ("controllers", Shape::Section(CONTROLLERS)),
    ("watch", Shape::Flag),
    ("clusterNamespaces", Shape::Words(NAMESPACES)),
    ("allowPaths", Shape::Flag),
    ("registries", Shape::Section(&["insecure", "maxModuleSize"])),
    (
        "insecure",
        Shape::Words(&["localhost:5000", "registry.local"]),
    ),
    ("maxModuleSize", Shape::Quantity),
    ("module", Shape::Section(SOURCE)),
    ("image", Shape::Text),
    ("imagePullSecret", Shape::Name),
    ("pollInterval", Shape::Duration),
    ("configMap", Shape::Section(&["name", "key"])),
    ("secret", Shape::Section(&["name", "key"])),
    ("key", Shape::Name),
    ("controllerName", Shape::Name),
    ("paused", Shape::Flag),
    (
        "rollback",
        Shape::Section(&["enabled", "failures", "window"]),
    ),
    ("enabled", Shape::Flag),
    ("failures", Shape::Number),
    ("window", Shape::Duration),
    ("revisionHistoryLimit", Shape::Number),
];

/// The fields a section needs (of the sections that have them).
const REQUIRED: &[&str] = &[
    "modules",
    "module",
    "path",
    "apiGroups",
    "resources",
    "verbs",
    "fields",
];

const FILE: &[&str] = &[
    "modules",
    "controllers",
    "queue",
    "metrics",
    "health",
    "leaderElection",
];
const MODULE: &[&str] = &[
    "path",
    "name",
    "maxConcurrency",
    "resyncSeconds",
    "namespaces",
    "limits",
    "grants",
    "queue",
    "cache",
];
const SPEC: &[&str] = &[
    "module",
    "controllerName",
    "paused",
    "maxConcurrency",
    "resyncSeconds",
    "namespaces",
    "limits",
    "grants",
    "queue",
    "cache",
    "rollback",
    "revisionHistoryLimit",
];
const SOURCE: &[&str] = &[
    "image",
    "imagePullSecret",
    "pollInterval",
    "configMap",
    "secret",
    "path",
];
const LIMITS: &[&str] = &[
    "timeoutMs",
    "memoryBytes",
    "hostCallTimeoutMs",
    "writeBytes",
    "logBytes",
    "errorBytes",
    "mapKeys",
    "logLinesPerSecond",
];
const ELECTION: &[&str] = &[
    "leaderElect",
    "resourceNamespace",
    "resourceName",
    "leaseDuration",
    "renewDeadline",
    "retryPeriod",
];
const CONTROLLERS: &[&str] = &[
    "watch",
    "namespaces",
    "clusterNamespaces",
    "allowPaths",
    "registries",
];

const NAMESPACES: &[&str] = &["team-a", "team-b", "kube-system"];
const VERBS: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "*",
];

/// Names of namespaces and objects.
const NAMES: &[&str] = &["podset", "team-a", "team-b", "kube-system", "a", "a.b"];

/// Values of lists: groups, resources, verbs, kinds, field paths, namespaces, registries.
const WORDS: &[&str] = &[
    "",
    "*",
    "apps",
    "pods",
    "pods/status",
    "*/scale",
    "configmaps",
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "ConfigMap",
    "Deployment",
    "/status",
    "/metadata/annotations/a~1b",
    "/metadata/name",
    "/spec/~2",
    "team-a",
    "team-b",
    "team-a",
    "localhost:5000",
];

/// Free text: addresses and references.
const TEXT: &[&str] = &[
    ":8080",
    "127.0.0.1:9090",
    "[::1]:80",
    "0",
    "localhost:5000/podset:v1",
    "localhost:5000/podset@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "localhost:5000/podset:v1@sha256:00",
];

const QUANTITIES: &[&str] = &[
    "64Mi", "1Ki", "1023", "1Mi", "0.5Ki", "1e6", "1.5Gi", "16Ei",
];
const DURATIONS: &[&str] = &[
    "15s", "500ms", "1h2m", "0s", "1.5s", "-1s", "1us", "9999999h",
];

fn shape(field: &str) -> Option<Shape> {
    FIELDS
        .iter()
        .find(|(name, _)| *name == field)
        .map(|(_, shape)| *shape)
}

/// A generator of documents whose fields deviate from their shape and valid values once in
/// `noise` choices (never when 0), so that some documents are valid and reach every bound.
struct Doc<'d, 'a> {
    draw: &'d mut Draw<'a>,
    noise: usize,
}

impl Doc<'_, '_> {
    fn deviate(&mut self) -> bool {
        self.noise > 0 && self.draw.one_in(self.noise)
    }

    /// One of `valid`, or now and then any string.
    fn word(&mut self, valid: &[&str]) -> Value {
        if self.deviate() {
            json!(self.draw.string(&[]))
        } else {
            json!(self.draw.pick(valid))
        }
    }

    /// A value for `field`, of its shape unless it deviates.
    fn value(&mut self, field: &str, depth: usize) -> Value {
        let shape = shape(field).filter(|_| depth > 0);
        let Some(shape) = shape.filter(|_| !self.deviate()) else {
            let keys: Vec<&str> = FIELDS.iter().map(|(name, _)| *name).collect();
            return self.draw.json(2, &keys, WORDS);
        };
        match shape {
            Shape::Name => self.word(NAMES),
            Shape::Number if self.deviate() => self.draw.number(),
            Shape::Number => json!(self.draw.below(1000) + 1),
            Shape::Quantity if self.draw.one_in(2) => json!(self.draw.below(1 << 30) + 1),
            Shape::Quantity => self.word(QUANTITIES),
            Shape::Duration => self.word(DURATIONS),
            Shape::Flag => json!(self.draw.one_in(2)),
            Shape::Words(words) => {
                let n = self.draw.below(4) + usize::from(!self.deviate());
                Value::Array((0..n).map(|_| self.word(words)).collect())
            }
            Shape::Path => self.word(&["a.wasm", "b.wasm", "./c.wasm", "../d.wasm", "/e.wasm"]),
            Shape::Text => self.word(TEXT),
            Shape::Section(fields) => self.section(fields, depth - 1),
            Shape::Sections(fields) => {
                let n = self.draw.below(3) + 1;
                Value::Array((0..n).map(|_| self.section(fields, depth - 1)).collect())
            }
        }
    }

    /// A mapping of `fields`: those a section requires, and each other one half the time; when
    /// it deviates, one is left out or another section's field comes in.
    fn section(&mut self, fields: &[&str], depth: usize) -> Value {
        let mut map = serde_json::Map::new();
        for field in fields {
            let wanted = REQUIRED.contains(field) || self.draw.one_in(2);
            if wanted != self.deviate() {
                let value = self.value(field, depth);
                map.insert(field.to_string(), value);
            }
        }
        if self.deviate() {
            let field = FIELDS[self.draw.below(FIELDS.len())].0;
            let value = self.value(field, depth);
            map.insert(field.to_string(), value);
        }
        Value::Object(map)
    }
}

/// A generated document with `fields` at its top, and how far it deviates.
fn document(draw: &mut Draw, fields: &[&str]) -> Value {
    let noise = *draw.pick(&[0, 64, 16, 4]);
    Doc { draw, noise }.section(fields, 4)
}

/// YAML of a generated file, sometimes with YAML markup spliced in.
fn yaml(draw: &mut Draw) -> String {
    let value = document(draw, FILE);
    let mut text = serde_yaml::to_string(&value).expect("a JSON value renders as YAML");
    while draw.one_in(4) {
        let at = draw.below(text.len() + 1);
        if text.is_char_boundary(at) {
            let markup = draw.pick(&["&x ", "*x", "<<: *x\n", "!!binary ", "\t", "---\n", "? "]);
            text.insert_str(at, markup);
        }
    }
    text
}

fn sorted_distinct_labels(names: &[String]) -> bool {
    names.windows(2).all(|w| w[0] < w[1]) && names.iter().all(|n| is_dns1123_label(n))
}

/// The bounds the configuration documents for every module it accepts.
fn check_module(module: &ModuleConfig) {
    if let Some(name) = &module.name {
        assert!(is_dns1123_label(name), "name {name:?}");
    }
    if let Some(n) = module.max_concurrency {
        assert!((1..=MAX_CONCURRENCY).contains(&n), "maxConcurrency {n}");
    }
    assert_ne!(module.resync_seconds, Some(0));
    assert!(
        sorted_distinct_labels(&module.namespaces),
        "{:?}",
        module.namespaces
    );
    let limits = &module.limits;
    assert!(limits.timeout >= Duration::from_millis(1));
    assert!(limits.host_call_timeout >= Duration::from_millis(1));
    assert!(limits.memory_bytes >= MIN_MEMORY_BYTES);
    for cap in [limits.write_bytes, limits.log_bytes, limits.error_bytes] {
        assert!(cap >= MIN_CAP_BYTES, "cap {cap}");
    }
    assert!(limits.map_keys >= 1 && limits.log_lines_per_second >= 1);
    for grant in module.grants.iter().flatten() {
        check_grant(grant);
    }
    for drop in &module.drops {
        assert!(!drop.fields.is_empty());
    }
}

fn check_grant(grant: &Grant) {
    assert!(!grant.api_groups.is_empty() && !grant.resources.is_empty());
    assert!(!grant.verbs.is_empty());
    assert!(
        grant.verbs.windows(2).all(|w| w[0] < w[1]),
        "{:?}",
        grant.verbs
    );
    assert!(
        sorted_distinct_labels(&grant.namespaces),
        "{:?}",
        grant.namespaces
    );
}

/// A refusal says where: the file's parse error has a position, a field error a field.
fn check_refusal(error: &ConfigError) {
    let message = error.to_string();
    assert!(!message.trim().is_empty());
    if let ConfigError::Invalid { field, .. } = error {
        assert!(!field.is_empty(), "{message}");
    }
}

fn check_config(text: &str) {
    match Config::from_yaml(text, Path::new("/config")) {
        Ok(config) => {
            let paths: BTreeSet<_> = config.modules.iter().map(|m| m.file()).collect();
            assert_eq!(paths.len(), config.modules.len(), "paths are distinct");
            let names: Vec<_> = config
                .modules
                .iter()
                .filter_map(|m| m.name.as_ref())
                .collect();
            let distinct: BTreeSet<_> = names.iter().collect();
            assert_eq!(distinct.len(), names.len(), "names are distinct");
            config.modules.iter().for_each(check_module);
            assert!(sorted_distinct_labels(&config.controllers.namespaces));
        }
        Err(error) => check_refusal(&error),
    }
}

#[test]
fn config_text() {
    bolero::check!()
        .with_test_time(test_time(TEST_TIME))
        .for_each(|bytes: &[u8]| check_config(&String::from_utf8_lossy(bytes)));
}

#[test]
fn config_structured() {
    bolero::check!()
        .with_test_time(test_time(TEST_TIME))
        .for_each(|bytes: &[u8]| check_config(&yaml(&mut Draw::new(bytes))));
}

#[test]
fn controller_spec() {
    bolero::check!()
        .with_test_time(test_time(TEST_TIME))
        .for_each(|bytes: &[u8]| {
            let mut draw = Draw::new(bytes);
            // The object's namespace, which the API server has validated.
            let namespace = *draw.pick(&["team-a", "kube-system", "a"]);
            let settings = ControllersConfig {
                watch: true,
                cluster_namespaces: vec!["kube-system".into()],
                allow_paths: draw.one_in(2),
                max_module_bytes: 1 << 20,
                ..ControllersConfig::default()
            };
            let mut spec = document(&mut draw, SPEC);
            if !draw.one_in(8) {
                spec["module"] = document(&mut draw, SOURCE);
            }
            match parse_spec(&spec, namespace, &settings, &QueueConfig::default()) {
                Ok(parsed) => {
                    check_module(&parsed.module);
                    assert!(parsed.rollback.failures >= 1);
                    if namespace != "kube-system" {
                        // Confined to its own namespace: the watch and every grant.
                        assert!(parsed.module.confined);
                        assert_eq!(parsed.module.namespaces, [namespace]);
                        for grant in parsed.module.grants.iter().flatten() {
                            assert_eq!(grant.namespaces, [namespace], "{spec}");
                        }
                    }
                }
                Err(error) => check_refusal(&error),
            }
        });
}
