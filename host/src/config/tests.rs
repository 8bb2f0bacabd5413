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
                counters_interval: controller::DEFAULT_COUNTERS_INTERVAL,
                namespace_informers: controller::DEFAULT_NAMESPACE_INFORMERS,
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
    let config = parse("modules: [{path: a.wasm, limits: {timeoutMs: 1}, grants: []}]").unwrap();
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
    let text =
        "modules: [{path: a.wasm}, {path: ./sub/b.wasm}, {path: ../c.wasm}, {path: /abs/d.wasm}]";
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
fn drop_rules_apply_to_the_kinds_and_groups_they_name() {
    let config = parse(FULL).unwrap();
    let drops = &config.modules[0].drops;
    let kind = |group: &str, kind: &str| GroupVersionKind::gvk(group, "v1", kind);
    let dropped = |k: &GroupVersionKind| DropRule::transform(drops, k).to_string();
    let last_applied = "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration";
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
    assert!(DropRule::transform(&config.modules[1].drops, &kind("apps", "Deployment")).is_empty());
}

#[test]
fn an_unknown_field_of_a_module_entry_is_refused_naming_it() {
    assert_eq!(
        parse_error("modules: [{path: a.wasm, nmae: x}]"),
        "cannot parse configuration: modules[0]: unknown field `nmae`, expected one of `path`, \
         `name`, `maxConcurrency`, `resyncSeconds`, `namespaces`, `limits`, `grants`, `queue`, \
         `cache` at line 1 column 26"
    );
}

#[test]
fn a_known_field_of_the_wrong_type_is_refused_with_its_path() {
    assert_eq!(
        parse_error("modules: [{path: a.wasm, maxConcurrency: four}]"),
        "cannot parse configuration: modules[0].maxConcurrency: invalid type: string \"four\", \
         expected u32 at line 1 column 42"
    );
    assert_eq!(
        parse_error("modules: [{path: a.wasm, limits: {mapKeys: -1}}]"),
        "cannot parse configuration: modules[0].limits.mapKeys: invalid type: integer `-1`, \
         expected u32 at line 1 column 44"
    );
}

#[test]
fn null_is_absent_and_plain_scalars_read_as_strings() {
    let text = "modules: [{path: a.wasm, maxConcurrency: ~, limits: ~, namespaces: [123]}]";
    let module = &parse(text).unwrap().modules[0];
    assert_eq!(module.max_concurrency, None);
    assert_eq!(module.limits, Limits::default());
    assert_eq!(module.namespaces, ["123"]);
}

#[test]
fn the_status_counters_interval_is_read_and_checked() {
    let config = parse("controllers: {watch: true, statusCountersInterval: 15s}").unwrap();
    assert_eq!(
        config.controllers.counters_interval,
        Duration::from_secs(15)
    );
    let (field, _) = invalid_at("controllers: {watch: true, statusCountersInterval: soon}");
    assert_eq!(field, "controllers.statusCountersInterval");
}

#[test]
fn the_namespace_informers_per_kind_are_read() {
    let config = parse("controllers: {watch: true}").unwrap();
    assert_eq!(
        config.controllers.namespace_informers,
        controller::DEFAULT_NAMESPACE_INFORMERS
    );
    let config = parse("controllers: {watch: true, namespaceInformersPerKind: 0}").unwrap();
    assert_eq!(config.controllers.namespace_informers, 0);
    assert!(parse("controllers: {watch: true, namespaceInformersPerKind: -1}").is_err());
}
