//! Controllers as Kubernetes objects: WasmControllers whose modules come from a real OCI
//! registry, run by a host that watches them, on the local control plane.

use std::collections::HashSet;
use std::sync::Mutex;

use anyhow::{Context, Result, ensure};
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kubewasm_tests::podset::{self, install};
use kubewasm_tests::registry;
use kubewasm_tests::{
    HostProcess, Language, WAIT, apply_yaml, apply_yaml_text, control_plane, eventually,
    example_wasm, free_ports, host_binary, http_get, repo_root, service_account_token,
    token_kubeconfig, with_host_args, with_started_host,
};
use serde_json::{Value, json};

/// The host configuration: no module files, WasmControllers watched, every one confined to its
/// namespace.
const CONFIG: &str = "controllers:\n  watch: true\n";

/// The informers the host at `metrics` runs, as `kind namespace` (namespace empty: every one).
async fn informers(metrics: &str) -> Result<Vec<String>> {
    let (_, text) = http_get(metrics, "/metrics").await?;
    Ok(text
        .lines()
        .filter_map(|l| l.strip_prefix("kubewasm_cache_objects{"))
        .map(|labels| {
            let label = |name: &str| {
                labels
                    .split(&format!("{name}=\""))
                    .nth(1)
                    .and_then(|v| v.split('"').next())
                    .unwrap_or_default()
                    .to_owned()
            };
            format!("{} {}", label("kind"), label("namespace"))
        })
        .collect())
}

fn controllers(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("kubewasm.dev", "v1alpha1", "WasmController");
    Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::from_gvk_with_plural(&gvk, "wasmcontrollers"),
    )
}

/// Pushes `module` as `reference` with `kubewasm push`; returns the pinned reference.
fn push(module: &std::path::Path, reference: &str) -> Result<String> {
    let output = std::process::Command::new(host_binary())
        .args(["push", module.to_str().context("a UTF-8 path")?, reference])
        .env("DOCKER_CONFIG", "/nonexistent")
        .output()?;
    ensure!(
        output.status.success(),
        "push: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8(output.stdout)?.trim().to_owned())
}

/// The condition `kind` of a WasmController's status, once its observed generation is current.
fn condition(object: &DynamicObject, kind: &str) -> Option<Value> {
    let status = object.data.get("status")?;
    let generation = object.metadata.generation?;
    (status["observedGeneration"] == json!(generation)).then_some(())?;
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .cloned()
}

#[tokio::test]
async fn a_confined_wasm_controller_from_a_registry_runs_in_its_namespace_until_deleted()
-> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    apply_yaml(
        &client,
        &repo_root().join("deploy/crds/wasmcontrollers.yaml"),
        None,
    )
    .await?;
    let ns = plane.namespace("wasmctl").await?;
    let (podsets, pods, _recorder) = install(&client, ns.name()).await?;
    let module = example_wasm("podset", Language::Rust);
    let pinned = push(
        &module,
        &registry::shared().reference("controllers/podset:v1"),
    )?;
    let (_, digest) = pinned.split_once('@').context("a pinned reference")?;

    let [port] = free_ports()?;
    let metrics = format!("127.0.0.1:{port}");
    let args = ["--metrics-bind-address", metrics.as_str()];
    with_host_args("controllers-registry", CONFIG, &args, async |host| {
        let api = controllers(&client, ns.name());
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kubewasm.dev/v1alpha1", "kind": "WasmController",
            "metadata": { "name": "podset" },
            "spec": { "module": { "image": registry::shared().reference("controllers/podset:v1") } },
        }))?;
        api.create(&PostParams::default(), &object).await?;
        let ready = eventually("the WasmController to be Ready", WAIT, || async {
            let object = api.get("podset").await?;
            Ok(condition(&object, "Ready")
                .filter(|c| c["status"] == "True")
                .map(|_| object))
        })
        .await?;
        let status = &ready.data["status"];
        assert_eq!(status["digest"], digest, "{status}");
        assert_eq!(status["image"], pinned.as_str(), "{status}");
        assert_eq!(status["contract"], "kubewasm:controller/guest@0.2.0");
        assert_eq!(status["declaration"]["primary"], "kubewasm.dev/v1alpha1 PodSet");
        assert!(status["controllerName"].is_string(), "{status}");
        assert_eq!(condition(&ready, "Degraded").unwrap()["status"], "False");

        let uid = podset::create(&podsets, "web", 2).await?;
        let seen = Mutex::new(HashSet::new());
        podset::converged(&podsets, &pods, &[uid], 2, &seen).await?;
        // Confined: the Pods it watches are watched in its namespace only.
        let mut running = informers(&metrics).await?;
        running.sort();
        let own = |kind: &str| format!("{kind} {}", ns.name());
        assert_eq!(running, [own("Pod"), own("PodSet")]);

        api.delete("podset", &DeleteParams::default()).await?;
        eventually("the guest to be unloaded", WAIT, || async {
            Ok(host.log().contains("its guest is unloaded").then_some(()))
        })
        .await?;
        eventually("its informers to stop", WAIT, || async {
            Ok(informers(&metrics).await?.is_empty().then_some(()))
        })
        .await?;
        Ok(())
    })
    .await
}

/// RBAC for a host that runs WasmControllers as the service account `host` of `namespace`, where
/// it may read PodSets and Pods and write PodSets, but not write Pods.
fn host_rbac(namespace: &str) -> String {
    format!(
        "\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {namespace}-host}}
rules:
- apiGroups: [kubewasm.dev]
  resources: [wasmcontrollers]
  verbs: [get, list, watch]
- apiGroups: [kubewasm.dev]
  resources: [wasmcontrollers/status]
  verbs: [get, patch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {namespace}-host}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {namespace}-host}}
subjects: [{{kind: ServiceAccount, name: host, namespace: {namespace}}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: host, namespace: {namespace}}}
rules:
- apiGroups: [kubewasm.dev]
  resources: [podsets, podsets/status, podsets/finalizers]
  verbs: ['*']
- apiGroups: ['']
  resources: [pods]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: host, namespace: {namespace}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: host}}
subjects: [{{kind: ServiceAccount, name: host, namespace: {namespace}}}]
"
    )
}

#[tokio::test]
async fn a_controller_needing_more_than_the_hosts_rbac_is_refused_until_the_host_may() -> Result<()>
{
    let plane = control_plane();
    let client = plane.client().await?;
    apply_yaml(
        &client,
        &repo_root().join("deploy/crds/wasmcontrollers.yaml"),
        None,
    )
    .await?;
    let ns = plane.namespace("wasmrbac").await?;
    let (podsets, pods, _recorder) = install(&client, ns.name()).await?;
    let reference = registry::shared().reference("controllers/podset:rbac");
    push(&example_wasm("podset", Language::Rust), &reference)?;
    let token = service_account_token(&client, ns.name(), "host").await?;
    apply_yaml_text(&client, &host_rbac(ns.name()), None).await?;
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    token_kubeconfig(&kubeconfig, &token)?;

    let host = HostProcess::start_via("controllers-rbac", CONFIG, &kubeconfig, &[])?;
    with_started_host(host, async |host| {
        let api = controllers(&client, ns.name());
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kubewasm.dev/v1alpha1", "kind": "WasmController",
            "metadata": { "name": "podset" },
            "spec": { "module": { "image": reference } },
        }))?;
        api.create(&PostParams::default(), &object).await?;
        let refused = eventually("the WasmController to be refused", WAIT, || async {
            let object = api.get("podset").await?;
            Ok(condition(&object, "Ready").filter(|c| c["reason"] == "NotPermitted"))
        })
        .await?;
        assert_eq!(refused["status"], "False", "{refused}");
        let message = refused["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("pods") && message.contains("create"),
            "the refusal names what the host may not do: {message}"
        );
        let uid = podset::create(&podsets, "web", 2).await?;
        ensure!(
            host.log().contains("NotPermitted"),
            "the refusal is logged:\n{}",
            host.log()
        );

        let role: Value = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": { "name": "host-writes" },
            "rules": [{ "apiGroups": [""], "resources": ["pods"], "verbs": ["create", "patch", "delete"] }],
        });
        let binding: Value = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": { "name": "host-writes" },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "host-writes" },
            "subjects": [{ "kind": "ServiceAccount", "name": "host", "namespace": ns.name() }],
        });
        apply_yaml_text(
            &client,
            &format!("{}\n---\n{}", serde_json::to_string(&role)?, serde_json::to_string(&binding)?),
            Some(ns.name()),
        )
        .await?;
        eventually("the WasmController to be Ready once the host may", WAIT, || async {
            let object = api.get("podset").await?;
            Ok(condition(&object, "Ready").filter(|c| c["status"] == "True"))
        })
        .await?;
        let seen = Mutex::new(HashSet::new());
        podset::converged(&podsets, &pods, &[uid], 2, &seen).await?;
        Ok(())
    })
    .await
}
