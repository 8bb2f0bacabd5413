//! The artifacts in deploy/: the kustomize overlay of the example guests applies (server-side, dry
//! run first, after the WasmController CRD) and yields a host with the expected shape and
//! permissions, and the host run as its service account with its configuration runs the
//! overlay's WasmControllers from a real registry; the Helm chart, with and without module files
//! and with its ServiceMonitor, and the kustomize ServiceMonitor component pass a server-side dry
//! run; kustomize and Helm render the same host and CRD, the chart's CRD is deploy/crds', and the
//! ClusterRole is what `kubewasm rbac` prints for the WasmControllers' modules and grants.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{DynamicObject, ListParams, PostParams};
use kube::config::Kubeconfig;
use kube::{Api, Client};
use kubewasm_tests::registry::{Registry, push};
use kubewasm_tests::{
    ControlPlane, HostProcess, WAIT, apply_yaml_text, control_plane, eventually, guest_wasm, helm,
    host_binary, kubectl, podset, repo_root, wasm_controllers, with_started_host,
};
use serde_json::{Value, json};

const NAMESPACE: &str = "kubewasm-system";
const SERVICE_ACCOUNT: &str = "system:serviceaccount:kubewasm-system:kubewasm";
const MODULES: [&str; 2] = ["podset", "website"];
/// The CRD of deploy/crds, in the kustomize base and the chart's `crds/`.
const CRD: &str = "wasmcontrollers.kubewasm.dev";

#[tokio::test]
async fn kustomize_examples_apply_and_run_as_the_service_account() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    install_crd(plane)?;
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
    // The root file system is read-only: compiled and pulled modules go to the emptyDir.
    for arg in [
        "--leader-elect",
        "--health-probe-bind-address=:8081",
        "--compile-cache-dir=/var/cache/kubewasm/compiled",
        "--module-store-dir=/var/cache/kubewasm/modules",
    ] {
        ensure!(args.contains(&json!(arg)), "{arg} in {args:?}");
    }
    let mounts = by_name(&container["volumeMounts"]);
    ensure!(
        mounts["compile-cache"]["mountPath"] == "/var/cache/kubewasm",
        "the cache volume is at /var/cache/kubewasm: {}",
        mounts["compile-cache"]
    );

    let volumes = by_name(&pod["volumes"]);
    ensure!(
        volumes["compile-cache"]["emptyDir"].is_object(),
        "the cache is an emptyDir"
    );
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
    let parsed: Value = serde_yaml::from_str(&text)?;
    ensure!(
        parsed["controllers"]["watch"] == true
            && parsed["controllers"]["clusterNamespaces"] == json!([NAMESPACE])
            && parsed["modules"].as_array().is_none_or(Vec::is_empty),
        "the host runs WasmControllers, those of {NAMESPACE} cluster-wide, and no module file: \
         {parsed}"
    );

    // The example guests are WasmControllers in the host's namespace, by image.
    let controllers = wasm_controllers(&client, NAMESPACE);
    let listed = controllers.list(&ListParams::default()).await?.items;
    let images: BTreeMap<String, Value> = listed
        .iter()
        .map(|c| {
            (
                c.metadata.name.clone().unwrap_or_default(),
                c.data["spec"]["module"]["image"].clone(),
            )
        })
        .collect();
    let expected: BTreeMap<String, Value> = MODULES
        .iter()
        .map(|m| {
            (
                m.to_string(),
                json!(format!("registry.example.com/kubewasm/{m}:0.1.0")),
            )
        })
        .collect();
    ensure!(
        images == expected,
        "the WasmControllers' images: {images:?}"
    );

    let service = Api::<Service>::namespaced(client.clone(), NAMESPACE)
        .get("kubewasm-metrics")
        .await?;
    let ports = serde_json::to_value(service.spec.and_then(|s| s.ports))?;
    ensure!(
        ports[0]["name"] == "metrics" && ports[0]["port"] == 8080,
        "metrics Service ports: {ports}"
    );
    for name in ["kubewasm", "kubewasm-wasmcontrollers"] {
        let binding = Api::<ClusterRoleBinding>::all(client.clone())
            .get(name)
            .await?;
        ensure!(
            binding.role_ref.kind == "ClusterRole" && binding.role_ref.name == name,
            "{name} binds its ClusterRole: {:?}",
            binding.role_ref
        );
    }

    permissions(&client, &listed).await?;
    runs_as_the_service_account(plane, &client, &text).await
}

/// The service account may do what the WasmControllers grant their modules, follow and report
/// on WasmControllers, read the Secrets and ConfigMaps they name, create events, review its own
/// access and hold its Lease, and nothing beyond.
async fn permissions(client: &Client, controllers: &[DynamicObject]) -> Result<()> {
    let mut allowed = vec![
        ("kubewasm.dev", "wasmcontrollers", "list", ""),
        ("kubewasm.dev", "wasmcontrollers", "watch", ""),
        ("kubewasm.dev", "wasmcontrollers/status", "get", ""),
        ("kubewasm.dev", "wasmcontrollers/status", "patch", ""),
        ("", "secrets", "get", ""),
        ("", "configmaps", "get", ""),
        ("events.k8s.io", "events", "create", ""),
        (
            "authorization.k8s.io",
            "selfsubjectaccessreviews",
            "create",
            "",
        ),
        ("coordination.k8s.io", "leases", "get", NAMESPACE),
        ("coordination.k8s.io", "leases", "create", NAMESPACE),
        ("coordination.k8s.io", "leases", "update", NAMESPACE),
    ];
    let mut granted = Vec::new();
    for grant in controllers
        .iter()
        .flat_map(|c| c.data["spec"]["grants"].as_array().into_iter().flatten())
    {
        for group in strings(&grant["apiGroups"]) {
            for resource in strings(&grant["resources"]) {
                for verb in strings(&grant["verbs"]) {
                    granted.push((group.to_owned(), resource.to_owned(), verb.to_owned()));
                }
            }
        }
    }
    ensure!(!granted.is_empty(), "the WasmControllers grant something");
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
        // It reads the Secrets that objects name; it never lists them.
        ("", "secrets", "list", ""),
        ("", "secrets", "watch", ""),
        // WasmControllers are written by their users; the host writes only their status.
        ("kubewasm.dev", "wasmcontrollers", "create", ""),
        ("kubewasm.dev", "wasmcontrollers", "patch", ""),
        ("kubewasm.dev", "wasmcontrollers", "update", ""),
        ("kubewasm.dev", "wasmcontrollers", "delete", ""),
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

/// Runs the host with the overlay's configuration `config` as the overlay's service account (a
/// token from the TokenRequest API), after pointing the WasmControllers at a real registry with
/// kustomize's `images:`: both load, report Ready with the pushed digests and an Event, and
/// their guests reconcile a PodSet and a Website.
async fn runs_as_the_service_account(
    plane: &ControlPlane,
    client: &Client,
    config: &str,
) -> Result<()> {
    let registry = Registry::start();
    let mut pushed = BTreeMap::new();
    for module in MODULES {
        let reference = registry.reference(&format!("kubewasm/{module}:0.1.0"));
        pushed.insert(module, push(&guest_wasm(module), &reference)?);
    }

    // An overlay of the examples that sets the images, as a user's would.
    let overlay = tempfile::tempdir()?;
    let to_repo = relative_to(overlay.path(), &repo_root())?;
    let images: String = MODULES
        .iter()
        .map(|m| {
            format!(
                "  - name: registry.example.com/kubewasm/{m}\n    newName: {}\n",
                registry.reference(&format!("kubewasm/{m}"))
            )
        })
        .collect();
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        format!(
            "resources: [{}/deploy/kustomize/examples]\nimages:\n{images}",
            to_repo.display()
        ),
    )?;
    let rendered = run(Command::new(kubectl()).arg("kustomize").arg(overlay.path()))?;
    let objects: Vec<Value> = documents(&rendered)?
        .into_iter()
        .filter(|o| o["kind"] == "WasmController")
        .collect();
    for object in &objects {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let image = &object["spec"]["module"]["image"];
        ensure!(
            *image == json!(registry.reference(&format!("kubewasm/{name}:0.1.0"))),
            "`images:` sets the module image of {name}: {image}"
        );
    }
    ensure!(objects.len() == MODULES.len(), "{objects:?}");
    let text = objects
        .iter()
        .map(serde_json::to_string)
        .collect::<Result<Vec<_>, _>>()?
        .join("\n---\n");
    apply(plane, &text, false)?;

    let token = token(client).await?;
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, token_kubeconfig(plane, &token)?)?;
    let host = HostProcess::start_via("deploy-examples", config, &kubeconfig, &[])?;
    let ns = plane.namespace("examples").await?;
    with_started_host(host, async |host| {
        let controllers = wasm_controllers(client, NAMESPACE);
        for module in MODULES {
            let pinned = &pushed[module];
            let (_, digest) = pinned.split_once('@').context("a pinned reference")?;
            let status = eventually(&format!("WasmController {module} Ready"), WAIT, || async {
                let object = controllers.get(module).await?;
                let current = object.data["status"]["observedGeneration"]
                    == json!(object.metadata.generation);
                let ready = object.data["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True");
                Ok((current && ready).then(|| object.data["status"].clone()))
            })
            .await?;
            ensure!(
                status["digest"] == digest && status["image"] == pinned.as_str(),
                "{module} runs what was pushed, {pinned}: {status}"
            );
        }
        let events = Api::<Event>::namespaced(client.clone(), NAMESPACE);
        eventually("an Event on each WasmController", WAIT, || async {
            let listed = events.list(&ListParams::default()).await?.items;
            let recorded = MODULES.iter().all(|m| {
                listed.iter().any(|e| {
                    e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(m)
                        && e.reason.as_deref() == Some("Loaded")
                })
            });
            Ok(recorded.then_some(()))
        })
        .await?;

        // The guests act in another namespace: the WasmControllers are cluster-wide.
        let podsets = podset::podsets(client, ns.name());
        let pods = Api::<Pod>::namespaced(client.clone(), ns.name());
        let uid = podset::create(&podsets, "web", 2).await?;
        podset::converged(&podsets, &pods, &[uid], 2, &Mutex::new(HashSet::new())).await?;
        let website =
            std::fs::read_to_string(repo_root().join("examples/website/samples/website.yaml"))?;
        let hello = website.split("\n---\n").next().context("a Website")?;
        apply_yaml_text(client, hello, Some(ns.name())).await?;
        let deployments = Api::<Deployment>::namespaced(client.clone(), ns.name());
        let services = Api::<Service>::namespaced(client.clone(), ns.name());
        eventually("the Website's Deployment and Service", WAIT, || async {
            let found = deployments.get_opt("hello").await?.is_some()
                && services.get_opt("hello").await?.is_some();
            Ok(found.then_some(()))
        })
        .await?;
        ensure!(
            !host.log().contains("forbidden"),
            "the host was refused nothing:\n{}",
            host.log()
        );
        Ok(())
    })
    .await
}

/// A token of the overlay's service account from the TokenRequest API, valid for an hour.
async fn token(client: &Client) -> Result<String> {
    let request: TokenRequest = serde_json::from_value(json!({
        "spec": { "audiences": [], "expirationSeconds": 3600 },
    }))?;
    Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE)
        .create_token_request("kubewasm", &PostParams::default(), &request)
        .await?
        .status
        .and_then(|status| status.token)
        .context("the TokenRequest has no token")
}

/// A kubeconfig reaching the test API server with `token`.
fn token_kubeconfig(plane: &ControlPlane, token: &str) -> Result<String> {
    let admin = Kubeconfig::read_from(plane.kubeconfig())?;
    let cluster = admin
        .clusters
        .first()
        .and_then(|c| c.cluster.clone())
        .context("the kubeconfig has no cluster")?;
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "test", "cluster": {
            "server": cluster.server,
            "certificate-authority": cluster.certificate_authority,
        }}],
        "users": [{ "name": "kubewasm", "user": { "token": token } }],
        "contexts": [{ "name": "kubewasm", "context": {
            "cluster": "test", "user": "kubewasm", "namespace": NAMESPACE,
        }}],
        "current-context": "kubewasm",
    });
    Ok(serde_yaml::to_string(&config)?)
}

/// Applies deploy/crds as the README says, before objects of its kind, and waits until the
/// API server serves it.
fn install_crd(plane: &ControlPlane) -> Result<()> {
    run(Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(plane.kubeconfig())
        .args(["apply", "--server-side", "-k"])
        .arg(repo_root().join("deploy/crds")))?;
    run(Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(plane.kubeconfig())
        .args([
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            &format!("crd/{CRD}"),
        ]))?;
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
    install_crd(plane)?;
    run(Command::new(helm())
        .args(["lint", "--strict", "--values"])
        .arg(example_values())
        .arg(chart()))?;

    let examples = render_chart("kubewasm-dry-run", ns.name(), &[])?;
    let applied = documents(&apply(plane, &examples, true)?)?;
    let items: Vec<&Value> = applied
        .iter()
        .flat_map(|o| o["items"].as_array().into_iter().flatten())
        .collect();
    let controllers: Vec<&str> = items
        .iter()
        .filter(|o| o["kind"] == "WasmController")
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    ensure!(
        controllers == MODULES,
        "the API server accepts the example WasmControllers: {controllers:?}"
    );

    // Module files from an image, beside the WasmControllers.
    let image = "ghcr.io/kubewasm/example-modules:0.1.0";
    let with_image = render_chart(
        "kubewasm-dry-run",
        ns.name(),
        &[
            "--set",
            "config.modules[0].path=/modules/podset.wasm",
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

    // Module files only, from ConfigMaps: no WasmController RBAC.
    let files_only = render_chart(
        "kubewasm-dry-run",
        ns.name(),
        &[
            "--set",
            "config.controllers=null",
            "--set",
            "config.modules[0].path=/modules/podset.wasm",
            "--set",
            "modules.configMaps[0]=kubewasm-module-podset",
        ],
    )?;
    let objects = documents(&files_only)?;
    ensure!(
        !objects
            .iter()
            .any(|o| o["metadata"]["name"] == "kubewasm-dry-run-wasmcontrollers"),
        "without controllers.watch the host gets no WasmController RBAC"
    );
    apply(plane, &files_only, true)?;

    let refused = |args: &[&str], because: &str| -> Result<()> {
        let output = Command::new(helm())
            .arg("template")
            .arg("kubewasm")
            .args(args)
            .arg(chart())
            .output()?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        ensure!(
            !output.status.success() && stderr.contains(because),
            "helm template {args:?} is refused with {because:?}: {stderr}"
        );
        Ok(())
    };
    refused(&[], "set controllers.watch")?;
    refused(
        &["--set", "config.modules[0].path=/modules/podset.wasm"],
        "where /modules comes from",
    )?;
    let both = [
        "--set",
        "config.modules[0].path=/modules/podset.wasm",
        "--set",
        "modules.configMaps[0]=kubewasm-module-podset",
        "--set",
        &format!("modules.image.reference={image}"),
    ];
    refused(&both, "not both")?;
    Ok(())
}

#[test]
fn the_chart_installs_the_crd_of_deploy_crds() -> Result<()> {
    let source = std::fs::read(repo_root().join("deploy/crds/wasmcontrollers.yaml"))?;
    let copy = std::fs::read(chart().join("crds/wasmcontrollers.yaml"))?;
    ensure!(
        source == copy,
        "deploy/helm/kubewasm/crds/wasmcontrollers.yaml is not deploy/crds' (a symbolic link)"
    );
    let listed = std::fs::read_dir(chart().join("crds"))?
        .map(|entry| Ok(entry?.file_name()))
        .collect::<Result<Vec<_>>>()?;
    ensure!(
        listed == ["wasmcontrollers.yaml"],
        "the chart's crds/: {listed:?}"
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
    same_host(&examples(), &[])?;
    // Sharded: the kustomize component on the examples, the chart's sharding value.
    same_host(
        &repo_root().join("deploy/kustomize/examples-sharded"),
        &["--set", "sharding.enabled=true", "--set", "replicas=3"],
    )
    .context("sharded")
}

/// The kustomize overlay `overlay` and the chart with the example values and `args` render the
/// same host and CRD.
fn same_host(overlay: &Path, args: &[&str]) -> Result<()> {
    let kustomized = documents(&run(Command::new(kubectl()).arg("kustomize").arg(overlay))?)?;
    let mut args = args.to_vec();
    args.push("--include-crds");
    let charted = documents(&render_chart("kubewasm", NAMESPACE, &args)?)?;

    let charted = essentials(&charted, &BTreeMap::new());
    // kustomize names the configuration after its content.
    let renames: BTreeMap<String, String> = kustomized
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str())
        .filter(|name| name.starts_with("kubewasm-config-"))
        .map(|name| (name.to_owned(), "kubewasm-config".to_owned()))
        .collect();
    ensure!(renames.len() == 1, "one hashed configuration: {renames:?}");
    let mut kustomized = essentials(&kustomized, &renames);
    // The Namespace, and the examples' own CRDs, are created apart from a Helm release.
    kustomized.retain(|(kind, name), _| {
        kind != "Namespace" && !(kind == "CustomResourceDefinition" && name != CRD)
    });
    ensure!(
        charted.contains_key(&("CustomResourceDefinition".into(), CRD.into())),
        "the chart installs {CRD}"
    );

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

/// The ClusterRole of the overlay is what `kubewasm rbac` prints for a file configuration that
/// runs each WasmController's module with its grants: what the host, which takes the spec of a
/// WasmController in a cluster-wide namespace as it takes a file entry, needs for them.
#[test]
fn the_cluster_role_is_what_kubewasm_rbac_prints() -> Result<()> {
    let dir = examples();
    let controllers = documents(&std::fs::read_to_string(dir.join("wasmcontrollers.yaml"))?)?;
    let mut modules = Vec::new();
    for controller in &controllers {
        let name = controller["metadata"]["name"].as_str().context("a name")?;
        let spec = &controller["spec"];
        let keys: Vec<&String> = spec.as_object().context("a spec")?.keys().collect();
        ensure!(
            keys == ["grants", "module"],
            "{name}: a spec of module and grants alone, as the entry below: {keys:?}"
        );
        modules.push(json!({
            "path": guest_wasm(name),
            "grants": spec["grants"],
        }));
    }
    let names: Vec<&str> = controllers
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str())
        .collect();
    ensure!(names == MODULES, "the WasmControllers: {names:?}");
    let config = tempfile::tempdir()?;
    let path = config.path().join("kubewasm.yaml");
    std::fs::write(
        &path,
        serde_yaml::to_string(&json!({ "modules": modules }))?,
    )?;
    let printed = run(Command::new(host_binary())
        .arg("rbac")
        .arg("--config")
        .arg(&path))?;
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

/// The examples overlay.
fn examples() -> PathBuf {
    repo_root().join("deploy/kustomize/examples")
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
