//! The artifacts in deploy/: the kustomize overlay of the example guests applies (server-side, dry
//! run first) and yields a host with the expected shape and permissions; the Helm chart, with
//! ConfigMap or image modules and with its ServiceMonitor, and the kustomize ServiceMonitor
//! component pass a server-side dry run; kustomize and Helm render the same host, whose
//! ClusterRole is what `kubewasm rbac` prints for its configuration and modules.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::PostParams;
use kube::{Api, Client};
use kubewasm_tests::{ControlPlane, control_plane, helm, host_binary, kubectl, repo_root};
use serde_json::{Value, json};

const NAMESPACE: &str = "kubewasm-system";
const SERVICE_ACCOUNT: &str = "system:serviceaccount:kubewasm-system:kubewasm";
const MODULES: [&str; 2] = ["podset", "website"];

#[tokio::test]
async fn kustomize_examples_apply_and_have_the_expected_shape() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let rendered = run(Command::new(kubectl()).arg("kustomize").arg(examples()))?;
    // A dry run does not create the namespace that the other objects are created in.
    let namespace = documents(&rendered)?
        .into_iter()
        .find(|o| o["kind"] == "Namespace")
        .context("the overlay has a Namespace")?;
    apply(plane, &serde_json::to_string(&namespace)?, false)?;
    apply(plane, &rendered, true)?;
    apply(plane, &rendered, false)?;

    let deployment = Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .get("kubewasm")
        .await?;
    let deployment = serde_json::to_value(deployment)?;
    let spec = &deployment["spec"];
    ensure!(spec["replicas"] == 2, "2 replicas: {}", spec["replicas"]);
    let pod = &spec["template"]["spec"];
    ensure!(pod["serviceAccountName"] == "kubewasm");
    ensure!(pod["automountServiceAccountToken"] == true);
    let security = &pod["securityContext"];
    ensure!(
        security["runAsNonRoot"] == true
            && security["runAsUser"] == 65532
            && security["runAsGroup"] == 65532
            && security["seccompProfile"]["type"] == "RuntimeDefault",
        "pod security context: {security}"
    );
    let container = &pod["containers"][0];
    let security = &container["securityContext"];
    ensure!(
        security["readOnlyRootFilesystem"] == true
            && security["allowPrivilegeEscalation"] == false
            && security["capabilities"]["drop"] == json!(["ALL"]),
        "container security context: {security}"
    );
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        let get = &container[probe]["httpGet"];
        ensure!(
            get["path"] == path && get["port"] == "health",
            "{probe}: {get}"
        );
    }
    ensure!(
        container["ports"]
            .as_array()
            .is_some_and(|ports| ports.contains(&json!({
                "name": "health", "containerPort": 8081, "protocol": "TCP"
            }))),
        "the health port is 8081: {}",
        container["ports"]
    );
    let args = container["args"].as_array().context("args")?;
    for arg in ["--leader-elect", "--health-probe-bind-address=:8081"] {
        ensure!(args.contains(&json!(arg)), "{arg} in {args:?}");
    }

    let volumes = by_name(&pod["volumes"]);
    let config_name = volumes["config"]["configMap"]["name"]
        .as_str()
        .context("the config volume is a ConfigMap")?;
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE);
    let config = config_maps.get(config_name).await?;
    let text = config
        .data
        .unwrap_or_default()
        .remove("kubewasm.yaml")
        .context("the config ConfigMap holds kubewasm.yaml")?;
    let paths: Vec<Value> = serde_yaml::from_str::<Value>(&text)?["modules"]
        .as_array()
        .context("modules")?
        .iter()
        .map(|m| m["path"].clone())
        .collect();
    ensure!(
        paths == MODULES.map(|m| json!(format!("/modules/{m}.wasm"))),
        "module paths: {paths:?}"
    );
    let sources = &volumes["modules"]["projected"]["sources"];
    ensure!(
        *sources
            == json!(
                MODULES.map(|m| json!({"configMap": {"name": format!("kubewasm-module-{m}")}}))
            ),
        "one projected ConfigMap per module: {sources}"
    );
    for module in MODULES {
        let stored = config_maps
            .get(&format!("kubewasm-module-{module}"))
            .await?
            .binary_data
            .unwrap_or_default()
            .remove(&format!("{module}.wasm"))
            .with_context(|| format!("binaryData {module}.wasm"))?;
        let built = std::fs::read(examples().join(format!("{module}.wasm")))?;
        ensure!(
            stored.0 == built,
            "the ConfigMap holds {module}.wasm as built"
        );
    }
    ensure!(
        volumes["compile-cache"]["emptyDir"].is_object(),
        "the compile cache is an emptyDir"
    );

    let service = Api::<Service>::namespaced(client.clone(), NAMESPACE)
        .get("kubewasm-metrics")
        .await?;
    let ports = serde_json::to_value(service.spec.and_then(|s| s.ports))?;
    ensure!(
        ports[0]["name"] == "metrics" && ports[0]["port"] == 8080,
        "metrics Service ports: {ports}"
    );
    let binding = Api::<ClusterRoleBinding>::all(client.clone())
        .get("kubewasm")
        .await?;
    ensure!(binding.role_ref.kind == "ClusterRole" && binding.role_ref.name == "kubewasm");

    permissions(&client, &text).await
}

/// The service account may do what the configuration grants the modules, create events and
/// hold its Lease, and nothing beyond.
async fn permissions(client: &Client, config: &str) -> Result<()> {
    let mut allowed = vec![
        ("events.k8s.io", "events", "create", ""),
        ("coordination.k8s.io", "leases", "get", NAMESPACE),
        ("coordination.k8s.io", "leases", "create", NAMESPACE),
        ("coordination.k8s.io", "leases", "update", NAMESPACE),
    ];
    let config: Value = serde_yaml::from_str(config)?;
    let mut granted = Vec::new();
    for grant in config["modules"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["grants"].as_array().into_iter().flatten())
    {
        for group in strings(&grant["apiGroups"]) {
            for resource in strings(&grant["resources"]) {
                for verb in strings(&grant["verbs"]) {
                    granted.push((group.to_owned(), resource.to_owned(), verb.to_owned()));
                }
            }
        }
    }
    ensure!(!granted.is_empty(), "the configuration grants something");
    allowed.extend(
        granted
            .iter()
            .map(|(g, r, v)| (g.as_str(), r.as_str(), v.as_str(), "")),
    );
    for (group, resource, verb, namespace) in allowed {
        ensure!(
            can(client, group, resource, verb, namespace).await?,
            "the service account may {verb} {resource} ({group}) in {namespace:?}"
        );
    }
    let denied = [
        ("", "secrets", "get", ""),
        ("kubewasm.dev", "websites", "delete", ""),
        ("kubewasm.dev", "podsets", "patch", ""),
        ("coordination.k8s.io", "leases", "update", "default"),
    ];
    for (group, resource, verb, namespace) in denied {
        ensure!(
            !can(client, group, resource, verb, namespace).await?,
            "the service account may not {verb} {resource} ({group}) in {namespace:?}"
        );
    }
    Ok(())
}

/// Whether the host's service account may `verb` `resource` (`plural[/subresource]`) in
/// `namespace` (empty: every namespace).
async fn can(
    client: &Client,
    group: &str,
    resource: &str,
    verb: &str,
    namespace: &str,
) -> Result<bool> {
    let (resource, subresource) = match resource.split_once('/') {
        Some((resource, sub)) => (resource, Some(sub.to_owned())),
        None => (resource, None),
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(SERVICE_ACCOUNT.into()),
            groups: Some(vec!["system:serviceaccounts".into()]),
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.into()),
                resource: Some(resource.into()),
                subresource,
                verb: Some(verb.into()),
                namespace: Some(namespace.into()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let review = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(review.status.is_some_and(|s| s.allowed))
}

#[tokio::test]
async fn helm_chart_passes_a_server_side_dry_run() -> Result<()> {
    let plane = control_plane();
    let ns = plane.namespace("helm").await?;
    run(Command::new(helm())
        .args(["lint", "--strict", "--values"])
        .arg(example_values())
        .arg(chart()))?;

    let with_config_maps = render_chart("kubewasm-dry-run", ns.name(), &[])?;
    apply(plane, &with_config_maps, true)?;

    let image = "ghcr.io/kubewasm/example-modules:0.1.0";
    let with_image = render_chart(
        "kubewasm-dry-run",
        ns.name(),
        &[
            "--set",
            "modules.configMaps=null",
            "--set",
            &format!("modules.image.reference={image}"),
        ],
    )?;
    let applied = documents(&apply(plane, &with_image, true)?)?;
    let deployment = applied
        .iter()
        .flat_map(|o| o["items"].as_array().into_iter().flatten())
        .find(|o| o["kind"] == "Deployment")
        .context("the dry run returns the Deployment")?;
    let volumes = by_name(&deployment["spec"]["template"]["spec"]["volumes"]);
    ensure!(
        volumes["modules"]["image"]["reference"] == image,
        "the API server keeps the image volume: {}",
        volumes["modules"]
    );

    let both = Command::new(helm())
        .args(["template", "kubewasm", "--values"])
        .arg(example_values())
        .args(["--set", &format!("modules.image.reference={image}")])
        .arg(chart())
        .output()?;
    ensure!(
        !both.status.success() && String::from_utf8_lossy(&both.stderr).contains("not both"),
        "ConfigMaps and an image together are refused"
    );
    Ok(())
}

#[tokio::test]
async fn service_monitors_pass_a_server_side_dry_run() -> Result<()> {
    let plane = control_plane();
    let ns = plane.namespace("monitor").await?;
    let crd = repo_root().join("tests/fixtures/servicemonitor-crd.yaml");
    run(Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(plane.kubeconfig())
        .args(["apply", "--server-side", "-f"])
        .arg(&crd))?;
    run(Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(plane.kubeconfig())
        .args([
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/servicemonitors.monitoring.coreos.com",
        ]))?;

    // An overlay of the base with the component, in the test's namespace.
    let overlay = tempfile::tempdir()?;
    let to_repo = relative_to(overlay.path(), &repo_root())?;
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: {ns}
resources: [{to_repo}/deploy/kustomize/base]
components: [{to_repo}/deploy/kustomize/components/servicemonitor]
",
            ns = ns.name(),
            to_repo = to_repo.display()
        ),
    )?;
    let kustomized = run(Command::new(kubectl()).arg("kustomize").arg(overlay.path()))?;
    let charted = render_chart(
        "kubewasm-monitored",
        ns.name(),
        &["--set", "serviceMonitor.enabled=true"],
    )?;
    for rendered in [kustomized, charted] {
        scrapes_the_metrics_service(&documents(&rendered)?)?;
        apply(plane, &rendered, true)?;
    }
    Ok(())
}

/// The ServiceMonitor among `objects` selects the metrics Service by its labels and scrapes its
/// `metrics` port.
fn scrapes_the_metrics_service(objects: &[Value]) -> Result<()> {
    let find = |kind: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind)
            .with_context(|| format!("a {kind}"))
    };
    let monitor = find("ServiceMonitor")?;
    let service = find("Service")?;
    let labels = &service["metadata"]["labels"];
    let selected = monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .context("matchLabels")?;
    ensure!(
        selected.iter().all(|(key, value)| labels[key] == *value),
        "the ServiceMonitor selects {selected:?}, the Service has {labels}"
    );
    let port = &monitor["spec"]["endpoints"][0]["port"];
    ensure!(
        service["spec"]["ports"]
            .as_array()
            .is_some_and(|ports| ports.iter().any(|p| p["name"] == *port)),
        "the Service has the scraped port {port}"
    );
    Ok(())
}

#[test]
fn kustomize_and_helm_render_the_same_host() -> Result<()> {
    let kustomized = documents(&run(Command::new(kubectl())
        .arg("kustomize")
        .arg(examples()))?)?;
    let charted = documents(&render_chart("kubewasm", NAMESPACE, &[])?)?;

    let charted = essentials(&charted, &BTreeMap::new());
    // The ConfigMaps the chart expects to exist: the modules, created apart from the release.
    let module_config_maps: Vec<String> =
        charted[&("Deployment".into(), "kubewasm".into())]["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|v| v["projected"]["sources"].as_array().into_iter().flatten())
            .filter_map(|s| s["configMap"]["name"].as_str().map(str::to_owned))
            .collect();
    ensure!(
        !module_config_maps.is_empty(),
        "the example values project ConfigMaps"
    );
    // kustomize names the configuration after its content.
    let renames: BTreeMap<String, String> = kustomized
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str())
        .filter(|name| name.starts_with("kubewasm-config-"))
        .map(|name| (name.to_owned(), "kubewasm-config".to_owned()))
        .collect();
    ensure!(renames.len() == 1, "one hashed configuration: {renames:?}");
    let mut kustomized = essentials(&kustomized, &renames);
    kustomized.retain(|(kind, name), _| {
        kind != "Namespace"
            && kind != "CustomResourceDefinition"
            && !(kind == "ConfigMap" && module_config_maps.contains(name))
    });

    let keys = |objects: &BTreeMap<(String, String), Value>| -> Vec<(String, String)> {
        objects.keys().cloned().collect()
    };
    ensure!(
        keys(&kustomized) == keys(&charted),
        "kustomize renders {:?}, helm {:?}",
        keys(&kustomized),
        keys(&charted)
    );
    for (key, object) in &kustomized {
        let other = &charted[key];
        if object != other {
            bail!(
                "{key:?} differs\nkustomize: {}\nhelm: {}",
                serde_json::to_string_pretty(object)?,
                serde_json::to_string_pretty(other)?
            );
        }
    }
    Ok(())
}

#[test]
fn the_cluster_role_is_what_kubewasm_rbac_prints() -> Result<()> {
    let dir = examples();
    let printed = run(Command::new(host_binary())
        .arg("rbac")
        .arg("--config")
        .arg(dir.join("kubewasm.yaml"))
        .args(MODULES.map(|m| dir.join(format!("{m}.wasm")))))?;
    let committed = std::fs::read_to_string(dir.join("clusterrole.yaml"))?;
    ensure!(
        printed == committed,
        "clusterrole.yaml is not what `kubewasm rbac` prints:\n{printed}"
    );
    Ok(())
}

/// What must agree between renderings, by kind and name: every object without its labels and
/// annotations, names renamed by `renames`; the configuration parsed; a Deployment's pod spec
/// with its volumes sorted, without selectors (Helm adds the release's label to them).
fn essentials(
    objects: &[Value],
    renames: &BTreeMap<String, String>,
) -> BTreeMap<(String, String), Value> {
    let rename = |value: &mut Value| {
        if let Some(new) = value.as_str().and_then(|name| renames.get(name)) {
            *value = json!(new);
        }
    };
    let mut found = BTreeMap::new();
    for object in objects {
        let mut object = object.clone();
        let Some(map) = object["metadata"].as_object_mut() else {
            continue;
        };
        map.remove("labels");
        map.remove("annotations");
        rename(&mut object["metadata"]["name"]);
        match object["kind"].as_str() {
            Some("ConfigMap") => {
                if let Some(text) = object["data"]["kubewasm.yaml"].as_str() {
                    let parsed: Value = serde_yaml::from_str(text).unwrap_or(Value::Null);
                    object["data"]["kubewasm.yaml"] = parsed;
                }
            }
            Some("Deployment") => {
                let spec = object["spec"].as_object_mut().expect("a Deployment spec");
                spec.remove("selector");
                let template = &mut spec["template"];
                if let Some(template) = template.as_object_mut() {
                    template.remove("metadata");
                }
                if let Some(volumes) = template["spec"]["volumes"].as_array_mut() {
                    for name in volumes
                        .iter_mut()
                        .filter_map(|v| v.pointer_mut("/configMap/name"))
                    {
                        rename(name);
                    }
                    volumes.sort_by_key(|v| v["name"].as_str().unwrap_or_default().to_owned());
                }
            }
            Some("Service") => {
                if let Some(spec) = object["spec"].as_object_mut() {
                    spec.remove("selector");
                }
            }
            _ => {}
        }
        let key = (
            object["kind"].as_str().unwrap_or_default().to_owned(),
            object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
        found.insert(key, object);
    }
    found
}

/// The examples overlay, with its modules built by its `build` script (once per test process).
fn examples() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = repo_root().join("deploy/kustomize/examples");
        let status = Command::new(dir.join("build"))
            .status()
            .expect("running deploy/kustomize/examples/build");
        assert!(
            status.success(),
            "deploy/kustomize/examples/build: {status}"
        );
        dir
    })
}

fn chart() -> PathBuf {
    repo_root().join("deploy/helm/kubewasm")
}

fn example_values() -> PathBuf {
    repo_root().join("deploy/helm/examples/values.yaml")
}

/// `helm template` of the chart with the example values as `release` in `namespace`.
fn render_chart(release: &str, namespace: &str, args: &[&str]) -> Result<String> {
    run(Command::new(helm())
        .args(["template", release, "--namespace", namespace, "--values"])
        .arg(example_values())
        .args(args)
        .arg(chart()))
}

/// `kubectl apply --server-side` of `yaml` (a dry run with `dry_run`); returns the applied
/// objects as JSON.
fn apply(plane: &ControlPlane, yaml: &str, dry_run: bool) -> Result<String> {
    let mut command = Command::new(kubectl());
    command.arg("--kubeconfig").arg(plane.kubeconfig()).args([
        "apply",
        "--server-side",
        "-o",
        "json",
        "-f",
        "-",
    ]);
    if dry_run {
        command.arg("--dry-run=server");
    }
    run_with_input(&mut command, yaml)
}

fn run(command: &mut Command) -> Result<String> {
    run_with_input(command, "")
}

/// Runs `command` with `input` on its standard input; fails with its standard error unless it
/// exits successfully.
fn run_with_input(command: &mut Command, input: &str) -> Result<String> {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {command:?}"))?;
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(input.as_bytes())?;
    let output = child.wait_with_output()?;
    ensure!(
        output.status.success(),
        "{command:?} failed with {}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8(output.stdout)?)
}

/// The non-empty documents of a YAML (or JSON) stream.
fn documents(text: &str) -> Result<Vec<Value>> {
    use serde::Deserialize;
    let mut found = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value = Value::deserialize(document)?;
        if !value.is_null() {
            found.push(value);
        }
    }
    Ok(found)
}

/// The items of a list of named objects, by name.
fn by_name(list: &Value) -> BTreeMap<String, Value> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| Some((item["name"].as_str()?.to_owned(), item.clone())))
        .collect()
}

fn strings(list: &Value) -> Vec<&str> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// The path of `to` relative to `from` (both absolute): kustomize accepts only relative paths.
fn relative_to(from: &Path, to: &Path) -> Result<PathBuf> {
    let from = from.canonicalize()?;
    let to = to.canonicalize()?;
    let common = from
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut path = PathBuf::new();
    for _ in from.components().skip(common) {
        path.push("..");
    }
    path.extend(to.components().skip(common));
    Ok(path)
}
