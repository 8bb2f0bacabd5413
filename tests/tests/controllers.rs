//! Controllers as Kubernetes objects: WasmControllers whose modules come from a real OCI
//! registry, run by a host that watches them, on the local control plane.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kubewasm_tests::podset::{self, install};
use kubewasm_tests::registry::{self, Registry, push, push_raw, sha256_hex};
use kubewasm_tests::wasmctl::{
    condition, crd_applied, digest_of, event_reasons, is, mirrored_by, names, sources,
    until_condition, wasm_controller, watching,
};
use kubewasm_tests::{
    HostProcess, Language, TestNamespace, WAIT, apply_yaml_text, control_plane, eventually,
    example_wasm, free_ports, guest_wasm, guest_wasm_with, host_binary, http_get,
    service_account_token, token_kubeconfig, wasm_controllers, with_host_args, with_started_host,
};
use serde_json::{Value, json};

/// The host configuration: no module files, the WasmControllers of `namespace` watched (so that
/// hosts of tests side by side leave each other's alone), every one confined to its namespace.
fn config(namespace: &str) -> String {
    watching(&[namespace])
}

/// [`config()`], with reconcile counters that move written to status within a second.
fn counting(namespace: &str) -> String {
    format!("{}  statusCountersInterval: 1s\n", config(namespace))
}

/// A client of the control plane, where the WasmController CRD is applied, and a namespace of
/// the test's own, named after `prefix`.
async fn cluster(prefix: &str) -> Result<(Client, TestNamespace)> {
    let client = crd_applied().await?;
    Ok((client, control_plane().namespace(prefix).await?))
}

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

#[tokio::test]
async fn a_confined_wasm_controller_from_a_registry_runs_in_its_namespace_until_deleted()
-> Result<()> {
    let (client, ns) = cluster("wasmctl").await?;
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
    with_host_args("controllers-registry", &config(ns.name()), &args, async |host| {
        let api = wasm_controllers(&client, ns.name());
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
        assert_eq!(status["contract"], "kubewasm:controller/guest@0.2.1");
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
    let (client, ns) = cluster("wasmrbac").await?;
    let (podsets, pods, _recorder) = install(&client, ns.name()).await?;
    let reference = registry::shared().reference("controllers/podset:rbac");
    push(&example_wasm("podset", Language::Rust), &reference)?;
    let token = service_account_token(&client, ns.name(), "host").await?;
    apply_yaml_text(&client, &host_rbac(ns.name()), None).await?;
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    token_kubeconfig(&kubeconfig, &token)?;

    // The host's access is reviewed again every 2 seconds.
    let reviewed = format!("{}  accessReviewInterval: 2s\n", config(ns.name()));
    let host = HostProcess::start_via("controllers-rbac", &reviewed, &kubeconfig, &[])?;
    with_started_host(host, async |host| {
        let api = wasm_controllers(&client, ns.name());
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
            "rules": [
                { "apiGroups": [""], "resources": ["pods"], "verbs": ["create", "patch", "delete"] },
                { "apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"] },
            ],
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

        // The grant taken back: the controller stops at the next review, and says why.
        let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> =
            Api::namespaced(client.clone(), ns.name());
        bindings
            .delete("host-writes", &DeleteParams::default())
            .await?;
        let stopped = until_condition(&api, "podset", "Ready", |c| c["status"] == "False").await?;
        let ready = condition(&stopped, "Ready").unwrap_or_default();
        ensure!(ready["reason"] == "NotPermitted", "{ready}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_tag_rolls_out_new_digests_refuses_a_broken_one_and_rolls_back_a_failing_one()
-> Result<()> {
    let (client, ns) = cluster("wasmrev").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let registry = Registry::start();
    let tag = registry.reference("mirror:live");
    let v1 = digest_of(&push(&guest_wasm("mirror"), &tag)?)?;

    with_host_args(
        "controllers-revisions",
        &counting(ns.name()),
        &[],
        async |_host| {
            let api = wasm_controllers(&client, ns.name());
            let spec = json!({
                "module": { "image": tag, "pollInterval": "1s" },
                "rollback": { "failures": 3, "window": "5m" },
            });
            api.create(&PostParams::default(), &wasm_controller("mirror", spec)?)
                .await?;
            let ready = until_condition(&api, "mirror", "Ready", is("True", "Running")).await?;
            assert_eq!(ready.data["status"]["digest"], v1.as_str());
            let first = names("first", 0..10);
            sources(&config_maps, &first).await?;
            mirrored_by(&config_maps, &first, "v1").await?;
            // A change of settings alone restarts the guest with the same module.
            let patch = json!({ "spec": { "maxConcurrency": 2 } });
            api.patch("mirror", &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            until_condition(&api, "mirror", "Ready", is("True", "Running")).await?;
            ensure!(
                event_reasons(&client, ns.name(), "mirror")
                    .await?
                    .contains(&"Replaced".to_owned())
            );

            // A new digest under the same tag: swapped in place, every key reconciled by it.
            let v2 = digest_of(&push(&guest_wasm_with("mirror", &["v2"]), &tag)?)?;
            mirrored_by(&config_maps, &first, "v2").await?;
            let object = eventually("the status to name v2", WAIT, || async {
                let object = api.get("mirror").await?;
                Ok((object.data["status"]["digest"] == v2.as_str()).then_some(object))
            })
            .await?;
            let revisions = &object.data["status"]["revisions"];
            assert_eq!(revisions[0]["digest"], v2.as_str(), "{revisions}");
            assert!(revisions[0].get("replaced").is_none(), "{revisions}");
            assert_eq!(revisions[1]["digest"], v1.as_str(), "{revisions}");
            assert_eq!(revisions[1]["reason"], "Superseded", "{revisions}");
            ensure!(
                event_reasons(&client, ns.name(), "mirror")
                    .await?
                    .contains(&"Swapped".to_owned())
            );

            // A layer that is no component, under the contract's config: refused, v2 keeps running.
            let mut broken = b"\0asm\x0d\0\x01\0".to_vec();
            broken.extend_from_slice(b"not a component");
            let config = json!({
                "architecture": "wasm", "os": "wasip2",
                "component": { "exports": ["kubewasm:controller/guest@0.2.0"], "imports": [] },
            });
            push_raw(
                &tag,
                (
                    "application/vnd.wasm.config.v0+json",
                    serde_json::to_vec(&config)?,
                ),
                ("application/wasm", broken),
            )
            .await?;
            let degraded =
                until_condition(&api, "mirror", "Degraded", is("True", "NotAComponent")).await?;
            assert_eq!(condition(&degraded, "Ready").unwrap()["status"], "True");
            assert_eq!(degraded.data["status"]["digest"], v2.as_str());
            let second = names("second", 0..3);
            sources(&config_maps, &second).await?;
            mirrored_by(&config_maps, &second, "v2").await?;

            // A build whose every reconcile fails: rolled back to v2 after 3 failures in a row.
            let bad = digest_of(&push(&guest_wasm_with("mirror", &["fails"]), &tag)?)?;
            let third = names("third", 0..5);
            sources(&config_maps, &third).await?;
            let rolled =
                until_condition(&api, "mirror", "Degraded", is("True", "RolledBack")).await?;
            let status = &rolled.data["status"];
            let message = condition(&rolled, "Degraded").unwrap()["message"].to_string();
            assert!(
                message.contains(&bad),
                "the condition names the bad digest: {message}"
            );
            assert_eq!(status["rolledBack"]["digest"], bad.as_str(), "{status}");
            assert_eq!(status["digest"], v2.as_str(), "{status}");
            assert_eq!(status["revisions"][1]["digest"], bad.as_str(), "{status}");
            assert_eq!(status["revisions"][1]["reason"], "RolledBack", "{status}");
            assert_eq!(condition(&rolled, "Ready").unwrap()["status"], "True");
            mirrored_by(&config_maps, &third, "v2").await?;
            ensure!(
                event_reasons(&client, ns.name(), "mirror")
                    .await?
                    .contains(&"RolledBack".to_owned())
            );
            // The counters reach status.
            eventually("the reconcile counters in status", WAIT, || async {
                let object = api.get("mirror").await?;
                let failed = object.data["status"]["reconciles"]["failed"].as_i64();
                let error = object.data["status"]["lastError"]["message"].to_string();
                Ok((failed >= Some(3) && error.contains("fails every reconcile")).then_some(()))
            })
            .await?;
            Ok(())
        },
    )
    .await
}

#[tokio::test]
async fn a_registry_down_leaves_the_running_revision_and_a_restarted_host_runs_the_last_good()
-> Result<()> {
    let (client, ns) = cluster("wasmdown").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let mut registry = Registry::start();
    let tag = registry.reference("mirror:live");
    let v1 = digest_of(&push(&guest_wasm("mirror"), &tag)?)?;
    let api = wasm_controllers(&client, ns.name());

    with_host_args("controllers-down", &config(ns.name()), &[], async |_host| {
        let spec = json!({ "module": { "image": tag, "pollInterval": "1s" } });
        api.create(&PostParams::default(), &wasm_controller("mirror", spec)?)
            .await?;
        until_condition(&api, "mirror", "Ready", is("True", "Running")).await?;
        registry.stop();
        let down = until_condition(
            &api,
            "mirror",
            "Degraded",
            is("True", "RegistryUnreachable"),
        )
        .await?;
        assert_eq!(condition(&down, "Ready").unwrap()["status"], "True");
        assert_eq!(condition(&down, "Progressing").unwrap()["status"], "True");
        let during = names("during", 0..3);
        sources(&config_maps, &during).await?;
        mirrored_by(&config_maps, &during, "v1").await?;
        Ok(())
    })
    .await?;

    // A new host, the registry still down: the last good revision runs from the module store.
    with_host_args(
        "controllers-down-restarted",
        &config(ns.name()),
        &[],
        async |_host| {
            let after = names("after", 0..3);
            sources(&config_maps, &after).await?;
            mirrored_by(&config_maps, &after, "v1").await?;
            let object =
                until_condition(&api, "mirror", "Ready", |c| c["status"] == "True").await?;
            assert_eq!(object.data["status"]["digest"], v1.as_str());
            registry.restart();
            until_condition(&api, "mirror", "Degraded", is("False", "Running")).await?;
            Ok(())
        },
    )
    .await
}

#[tokio::test]
async fn wasm_controllers_with_bad_sources_are_refused_and_good_ones_run() -> Result<()> {
    let (client, ns) = cluster("wasmbad").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns.name());
    let mirror = guest_wasm("mirror");
    let registry = registry::shared();
    push(&mirror, &registry.reference("bad/mirror:v1"))?;
    // An artifact that is not a component: an image config.
    push_raw(
        &registry.reference("bad/image:v1"),
        ("application/vnd.oci.image.config.v1+json", b"{}".to_vec()),
        (
            "application/vnd.oci.image.layer.v1.tar",
            b"not a tar".to_vec(),
        ),
    )
    .await?;
    // A registry that needs credentials, and a Secret that holds them.
    let (user, password) = ("puller", "pa55word");
    let private = Registry::start_with_auth(user, password);
    let private_reference = private.reference("private/mirror:v1");
    let mut pushing = std::process::Command::new(host_binary())
        .args([
            "push",
            mirror.to_str().context("a UTF-8 path")?,
            &private_reference,
        ])
        .args(["--username", user])
        .env("DOCKER_CONFIG", "/nonexistent")
        .stdin(std::process::Stdio::piped())
        .spawn()?;
    std::io::Write::write_all(
        &mut pushing.stdin.take().context("stdin")?,
        password.as_bytes(),
    )?;
    ensure!(pushing.wait()?.success(), "pushing with credentials");
    let auth = registry::basic_authorization(user, password);
    let docker_config = json!({
        "auths": { private.address(): { "auth": auth.trim_start_matches("Basic ") } },
    });
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": "pull" },
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": { ".dockerconfigjson": docker_config.to_string() },
    }))?;
    secrets.create(&PostParams::default(), &secret).await?;
    // The module in a ConfigMap.
    let module: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "module" },
        "binaryData": { "mirror.wasm": k8s_openapi::ByteString(std::fs::read(&mirror)?) },
    }))?;
    config_maps.create(&PostParams::default(), &module).await?;

    let small = format!(
        "{}  registries:\n    maxModuleSize: 150Ki\n",
        config(ns.name())
    );
    let [port] = free_ports()?;
    let metrics = format!("127.0.0.1:{port}");
    let args = ["--metrics-bind-address", metrics.as_str()];
    with_host_args("controllers-bad", &small, &args, async |_host| {
        let api = wasm_controllers(&client, ns.name());
        let zeros = "0".repeat(64);
        let cases = [
            (
                "missing",
                json!({ "image": registry.reference(&format!("bad/mirror@sha256:{zeros}")) }),
                "ArtifactNotFound",
            ),
            (
                "anonymous",
                json!({ "image": private_reference }),
                "RegistryUnauthorized",
            ),
            (
                "large",
                json!({ "image": registry.reference("bad/mirror:v1") }),
                "ModuleTooLarge",
            ),
            (
                "nosecret",
                json!({ "image": private_reference, "imagePullSecret": "absent" }),
                "PullSecretInvalid",
            ),
            (
                "badref",
                json!({ "image": "Not A/Reference::x" }),
                "InvalidReference",
            ),
            (
                "unknown",
                json!({ "image": "registry.invalid/team/mirror:v1" }),
                "RegistryUnreachable",
            ),
            (
                "mediatype",
                json!({ "image": registry.reference("bad/image:v1") }),
                "WrongMediaType",
            ),
        ];
        for (name, module, _) in &cases {
            let spec = json!({ "module": module, "controllerName": name });
            api.create(&PostParams::default(), &wasm_controller(name, spec)?)
                .await?;
        }
        for (name, _, reason) in &cases {
            let refused = until_condition(&api, name, "Ready", is("False", reason)).await?;
            let degraded = condition(&refused, "Degraded").unwrap();
            assert_eq!(degraded["status"], "True", "{name}: {degraded}");
            ensure!(
                event_reasons(&client, ns.name(), name)
                    .await?
                    .contains(&(*reason).to_owned())
            );
            let (_, text) = http_get(&metrics, "/metrics").await?;
            let sample =
                format!("kubewasm_controller_object_refusals_total{{reason=\"{reason}\"}} ");
            ensure!(text.contains(&sample), "{sample} in:\n{text}");
        }
        Ok(())
    })
    .await?;

    with_host_args("controllers-good", &config(ns.name()), &[], async |host| {
        let api = wasm_controllers(&client, ns.name());
        let bad = [
            "missing",
            "anonymous",
            "large",
            "nosecret",
            "badref",
            "unknown",
            "mediatype",
        ];
        for name in bad {
            api.delete(name, &DeleteParams::default()).await?;
        }
        let spec = json!({
            "module": { "image": private_reference, "imagePullSecret": "pull" },
            "controllerName": "mirror",
        });
        api.create(&PostParams::default(), &wasm_controller("private", spec)?)
            .await?;
        until_condition(&api, "private", "Ready", is("True", "Running")).await?;
        // A second controller of the same name is refused; the first, older, keeps running
        // (creation times are in seconds: one created in the same second could be older).
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let spec = json!({
            "module": { "configMap": { "name": "module", "key": "mirror.wasm" } },
            "controllerName": "mirror",
        });
        api.create(&PostParams::default(), &wasm_controller("duplicate", spec)?)
            .await?;
        until_condition(&api, "duplicate", "Ready", is("False", "DuplicateName")).await?;
        let names = names("source", 0..3);
        sources(&config_maps, &names).await?;
        mirrored_by(&config_maps, &names, "v1").await?;
        // Once the name is free, the module from the ConfigMap runs.
        api.delete("private", &DeleteParams::default()).await?;
        let object = until_condition(&api, "duplicate", "Ready", is("True", "Running")).await?;
        let digest = format!("sha256:{}", sha256_hex(&std::fs::read(&mirror)?));
        assert_eq!(object.data["status"]["digest"], digest.as_str());
        ensure!(host.log().contains("DuplicateName"));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_javascript_podset_runs_from_a_registry() -> Result<()> {
    let (client, ns) = cluster("wasmjs").await?;
    let (podsets, pods, _recorder) = install(&client, ns.name()).await?;
    let module = example_wasm("podset", Language::JavaScript);
    let size = std::fs::metadata(&module)?.len();
    ensure!(size > 10 << 20, "the JavaScript podset is {size} bytes");
    let reference = registry::shared().reference("controllers/podset-js:v1");
    let pinned = push(&module, &reference)?;
    with_host_args("controllers-js", &config(ns.name()), &[], async |_host| {
        let api = wasm_controllers(&client, ns.name());
        let spec = json!({ "module": { "image": reference } });
        api.create(&PostParams::default(), &wasm_controller("podset", spec)?)
            .await?;
        let ready = until_condition(&api, "podset", "Ready", is("True", "Running")).await?;
        assert_eq!(ready.data["status"]["image"], pinned.as_str());
        let uid = podset::create(&podsets, "web", 3).await?;
        let seen = Mutex::new(HashSet::new());
        podset::converged(&podsets, &pods, &[uid], 3, &seen).await?;
        Ok(())
    })
    .await
}

/// How many requests for manifests of `repository` the registry's log shows.
fn manifest_requests(registry: &Registry, repository: &str) -> usize {
    let path = format!("/v2/{repository}/manifests/");
    registry.log().lines().filter(|l| l.contains(&path)).count()
}

/// How many Events on the WasmController `name` have `reason`.
async fn events_with(client: &Client, namespace: &str, name: &str, reason: &str) -> Result<usize> {
    Ok(event_reasons(client, namespace, name)
        .await?
        .iter()
        .filter(|r| *r == reason)
        .count())
}

#[tokio::test]
async fn a_running_controller_is_not_fetched_again_for_its_own_status_writes() -> Result<()> {
    let (client, ns) = cluster("wasmquiet").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let registry = Registry::start();
    // By digest: never resolved again on a timer.
    let pinned = push(
        &guest_wasm_with("mirror", &["fails"]),
        &registry.reference("mirror:fails"),
    )?;

    with_host_args(
        "controllers-quiet",
        &counting(ns.name()),
        &[],
        async |_host| {
            let api = wasm_controllers(&client, ns.name());
            let spec = json!({ "module": { "image": pinned } });
            api.create(&PostParams::default(), &wasm_controller("mirror", spec)?)
                .await?;
            until_condition(&api, "mirror", "Ready", is("True", "Running")).await?;
            let fetched = manifest_requests(&registry, "mirror");
            // Failing reconciles keep the counters changing, so the host writes them to status
            // again and again; each write is a watch event on the object.
            sources(&config_maps, &names("failing", 0..5)).await?;
            let seen = Mutex::new(HashSet::new());
            eventually("three writes of the counters", WAIT, || async {
                let object = api.get("mirror").await?;
                let mut seen = seen.lock().expect("seen lock");
                if let Some(failed) = object.data["status"]["reconciles"]["failed"].as_i64() {
                    seen.insert(failed);
                }
                Ok((seen.len() >= 3).then_some(()))
            })
            .await?;
            assert_eq!(
                manifest_requests(&registry, "mirror"),
                fetched,
                "the running module was fetched again for a status write"
            );
            Ok(())
        },
    )
    .await
}

#[tokio::test]
async fn counters_that_only_move_reach_status_once_an_interval_and_a_first_failure_at_once()
-> Result<()> {
    let (client, ns) = cluster("wasmcoalesce").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let registry = Registry::start();
    let pinned = push(
        &guest_wasm_with("mirror", &["fails"]),
        &registry.reference("mirror:fails"),
    )?;
    let every = Duration::from_secs(30);
    let config = format!("{}  statusCountersInterval: 30s\n", config(ns.name()));

    with_host_args("controllers-coalesce", &config, &[], async |_host| {
        let api = wasm_controllers(&client, ns.name());
        let spec = json!({ "module": { "image": pinned } });
        api.create(&PostParams::default(), &wasm_controller("mirror", spec)?)
            .await?;
        until_condition(&api, "mirror", "Ready", is("True", "Running")).await?;
        // Each failed reconcile moves the counters; retries keep failing for the whole test.
        sources(&config_maps, &names("failing", 0..5)).await?;
        let failed = async || -> Result<Option<i64>> {
            let object = api.get("mirror").await?;
            Ok(object.data["status"]["reconciles"]["failed"].as_i64())
        };
        let first = eventually(
            "the first failure in status",
            Duration::from_secs(30),
            || async { Ok(failed().await?.filter(|n| *n > 0)) },
        )
        .await?;
        let since = Instant::now();
        // The failures that follow change nothing but numbers: no write for an interval.
        // A margin for the host's check tick and the write's own time before it shows here.
        while since.elapsed() < every - Duration::from_secs(10) {
            assert_eq!(
                failed().await?,
                Some(first),
                "counters written again {:?} after the first failure",
                since.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        // Then the failures since reach status, at the object's own moment of an interval: at
        // most an interval later.
        eventually("the counters of the interval", 2 * every, || async {
            Ok(failed().await?.filter(|n| *n > first))
        })
        .await?;
        Ok(())
    })
    .await
}

/// `count` namespaces of the test's own, named after `prefix`, and the mirror guest pushed as
/// `controllers/mirror:TAG`, by its pinned reference.
async fn mirrored_namespaces(
    prefix: &str,
    count: usize,
    tag: &str,
) -> Result<(Vec<TestNamespace>, String)> {
    let mut namespaces = Vec::new();
    for index in 0..count {
        namespaces.push(
            control_plane()
                .namespace(&format!("{prefix}{index}"))
                .await?,
        );
    }
    let reference = registry::shared().reference(&format!("controllers/mirror:{tag}"));
    Ok((namespaces, push(&guest_wasm("mirror"), &reference)?))
}

/// Creates the WasmController `mirror` of the module `pinned` in `namespace` and waits until it
/// runs.
async fn mirror_running(client: &Client, namespace: &str, pinned: &str) -> Result<()> {
    let api = wasm_controllers(client, namespace);
    let spec = json!({ "module": { "image": pinned } });
    api.create(&PostParams::default(), &wasm_controller("mirror", spec)?)
        .await?;
    until_condition(&api, "mirror", "Ready", is("True", "Running")).await?;
    Ok(())
}

/// A free loopback address for a host's metrics.
fn metrics_address() -> Result<String> {
    let [port] = free_ports()?;
    Ok(format!("127.0.0.1:{port}"))
}

#[tokio::test]
async fn guests_in_many_namespaces_share_the_hosts_access_reviews() -> Result<()> {
    let client = crd_applied().await?;
    let (namespaces, pinned) = mirrored_namespaces("wasmaccess", 6, "access").await?;
    let names: Vec<&str> = namespaces.iter().map(|ns| ns.name()).collect();
    let metrics = metrics_address()?;
    let args = ["--metrics-bind-address", metrics.as_str()];
    let reviews = async || -> Result<f64> {
        let text = kubewasm_tests::prometheus::scrape(metrics.parse()?).await?;
        Ok(kubewasm_tests::prometheus::sum(
            &text,
            "kubewasm_access_reviews_total",
            |_| true,
        ))
    };
    let run = async |namespace: &str| mirror_running(&client, namespace, &pinned).await;

    with_host_args(
        "controllers-access",
        &watching(&names),
        &args,
        async |_host| {
            run(names[0]).await?;
            let one = reviews().await?;
            ensure!(one > 0.0, "the first guest's needs were reviewed");
            futures::future::try_join_all(names[1..].iter().map(|n| run(n))).await?;
            // The same needs in five more namespaces: the host's identity may do them in every
            // namespace, so one review per verb answers all (asked again once its answers age,
            // 10 s). One review per guest would make six times the first guest's.
            let six = reviews().await?;
            ensure!(
                six < 3.0 * one,
                "{six} reviews for six guests, {one} for the first alone"
            );
            Ok(())
        },
    )
    .await
}

/// Past `controllers.namespaceInformersPerKind` namespaces, confined guests of a kind are served
/// by one informer of every namespace, each still triggered by and reading its own namespace.
#[tokio::test]
async fn confined_guests_past_the_per_kind_count_share_one_informer_of_every_namespace()
-> Result<()> {
    let client = crd_applied().await?;
    let keys = names("key", 0..2);
    let (namespaces, pinned) = mirrored_namespaces("wasmwide", 4, "wide").await?;
    let names: Vec<&str> = namespaces.iter().map(|ns| ns.name()).collect();
    let metrics = metrics_address()?;
    let args = ["--metrics-bind-address", metrics.as_str()];
    let config = format!("{}  namespaceInformersPerKind: 2\n", watching(&names));

    let run = async |namespace: &str| -> Result<()> {
        mirror_running(&client, namespace, &pinned).await?;
        let config_maps = Api::<ConfigMap>::namespaced(client.clone(), namespace);
        sources(&config_maps, &keys).await?;
        mirrored_by(&config_maps, &keys, "v1").await
    };

    with_host_args("controllers-wide", &config, &args, async |_host| {
        // All at once, as a host starting with them finds them.
        futures::future::try_join_all(names.iter().map(|n| run(n))).await?;
        let running: Vec<String> = informers(&metrics)
            .await?
            .into_iter()
            .filter(|i| i.starts_with("ConfigMap "))
            .collect();
        let own = running.iter().filter(|i| *i != "ConfigMap ").count();
        ensure!(
            running.iter().any(|i| i == "ConfigMap ") && own <= 2,
            "ConfigMap informers: {running:?}"
        );

        // A change in a namespace the wide informer serves reaches its guest.
        let last = Api::<ConfigMap>::namespaced(client.clone(), names[3]);
        let patch = json!({ "data": { "value": "changed" } });
        last.patch(&keys[0], &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        let mirror = format!("{}-mirror", keys[0]);
        eventually("the change mirrored", WAIT, || async {
            let data = last.get(&mirror).await?.data.unwrap_or_default();
            Ok((data.get("value").map(String::as_str) == Some("changed")).then_some(()))
        })
        .await
    })
    .await
}

#[tokio::test]
async fn a_config_map_source_is_loaded_once_it_exists_and_swapped_as_soon_as_it_changes()
-> Result<()> {
    let (client, ns) = cluster("wasmcm").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let module = |path: std::path::PathBuf| -> Result<ConfigMap> {
        Ok(serde_json::from_value(json!({
            "metadata": { "name": "module" },
            "binaryData": { "mirror.wasm": k8s_openapi::ByteString(std::fs::read(path)?) },
        }))?)
    };

    with_host_args("controllers-configmap", &config(ns.name()), &[], async |_host| {
        let api = wasm_controllers(&client, ns.name());
        let spec = json!({
            "module": { "configMap": { "name": "module", "key": "mirror.wasm" }, "pollInterval": "1h" },
        });
        api.create(&PostParams::default(), &wasm_controller("mirror", spec)?)
            .await?;
        // Read when it changes, by a watch of ConfigMaps, not every pollInterval.
        until_condition(&api, "mirror", "Ready", is("False", "SourceNotFound")).await?;
        config_maps
            .create(&PostParams::default(), &module(guest_wasm("mirror"))?)
            .await?;
        until_condition(&api, "mirror", "Ready", is("True", "Running")).await?;
        let keys = names("key", 0..3);
        sources(&config_maps, &keys).await?;
        mirrored_by(&config_maps, &keys, "v1").await?;

        let v2 = guest_wasm_with("mirror", &["v2"]);
        config_maps
            .replace("module", &PostParams::default(), &module(v2.clone())?)
            .await?;
        mirrored_by(&config_maps, &keys, "v2").await?;
        let digest = format!("sha256:{}", sha256_hex(&std::fs::read(&v2)?));
        // Ready was True before the swap too: the status names the new digest once written.
        eventually("the status to name the new module's digest", WAIT, || async {
            let object = api.get("mirror").await?;
            let ready = condition(&object, "Ready").is_some_and(|c| is("True", "Running")(&c));
            Ok((ready && object.data["status"]["digest"] == digest.as_str()).then_some(()))
        })
        .await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_new_revision_is_rolled_back_once_across_a_restart_a_spec_change_and_a_registry_outage()
-> Result<()> {
    let (client, ns) = cluster("wasmprobe").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let mut registry = Registry::start();
    let tag = registry.reference("mirror:live");
    let v1 = digest_of(&push(&guest_wasm("mirror"), &tag)?)?;
    let api = wasm_controllers(&client, ns.name());

    with_host_args(
        "controllers-probe",
        &config(ns.name()),
        &[],
        async |_host| {
            let spec = json!({
                "module": { "image": tag, "pollInterval": "1s" },
                "rollback": { "failures": 3, "window": "10m" },
            });
            api.create(&PostParams::default(), &wasm_controller("mirror", spec)?)
                .await?;
            until_condition(&api, "mirror", "Ready", is("True", "Running")).await?;
            Ok(())
        },
    )
    .await?;
    // A build that fails every reconcile starts, but nothing has failed yet when its host stops.
    let bad = digest_of(&push(&guest_wasm_with("mirror", &["fails"]), &tag)?)?;
    with_host_args(
        "controllers-probe-a",
        &config(ns.name()),
        &[],
        async |_host| {
            eventually("the failing build to run", WAIT, || async {
                let object = api.get("mirror").await?;
                Ok((object.data["status"]["digest"] == bad.as_str()).then_some(()))
            })
            .await?;
            Ok(())
        },
    )
    .await?;

    // Another host, with a module store of its own, goes on with the new revision's probation.
    let store = tempfile::tempdir()?;
    let store_dir = store.path().to_str().context("a UTF-8 path")?;
    let args = ["--module-store-dir", store_dir];
    with_host_args(
        "controllers-probe-b",
        &config(ns.name()),
        &args,
        async |_host| {
            // A change of the spec that leaves the module as it is.
            let patch = json!({ "spec": { "revisionHistoryLimit": 5 } });
            api.patch("mirror", &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            let object = until_condition(&api, "mirror", "Ready", is("True", "Running")).await?;
            assert_eq!(object.data["status"]["digest"], bad.as_str());
            // The last good revision is neither in this host's store nor reachable.
            registry.stop();
            let failing = names("failing", 0..3);
            sources(&config_maps, &failing).await?;
            let stuck =
                until_condition(&api, "mirror", "Degraded", is("True", "RollbackFailed")).await?;
            let message = condition(&stuck, "Degraded").unwrap()["message"].to_string();
            assert!(message.contains(&bad), "{message}");
            assert_eq!(stuck.data["status"]["digest"], bad.as_str());
            registry.restart();
            let rolled =
                until_condition(&api, "mirror", "Degraded", is("True", "RolledBack")).await?;
            let status = &rolled.data["status"];
            assert_eq!(status["digest"], v1.as_str(), "{status}");
            assert_eq!(status["rolledBack"]["digest"], bad.as_str(), "{status}");
            mirrored_by(&config_maps, &failing, "v1").await?;
            let after = names("after", 0..3);
            sources(&config_maps, &after).await?;
            mirrored_by(&config_maps, &after, "v1").await?;
            let object = api.get("mirror").await?;
            assert_eq!(object.data["status"]["digest"], v1.as_str());
            assert_eq!(
                events_with(&client, ns.name(), "mirror", "RolledBack").await?,
                1,
                "{:?}",
                event_reasons(&client, ns.name(), "mirror").await?
            );
            Ok(())
        },
    )
    .await
}

#[tokio::test]
async fn a_paused_controller_stops_until_resumed_and_wrong_worlds_are_refused() -> Result<()> {
    let (client, ns) = cluster("wasmpause").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let mut registry = Registry::start();
    let mirror = registry.reference("mirror:v1");
    push(&guest_wasm("mirror"), &mirror)?;
    // An artifact whose config names another version of the contract, and one whose config
    // names this contract but whose layer is a component of another world.
    let world = |export: &str| {
        serde_json::to_vec(&json!({
            "architecture": "wasm", "os": "wasip2",
            "component": { "exports": [export], "imports": [] },
        }))
    };
    let future = registry.reference("future:v1");
    push_raw(
        &future,
        (
            "application/vnd.wasm.config.v0+json",
            world("kubewasm:controller/guest@9.0.0")?,
        ),
        ("application/wasm", std::fs::read(guest_wasm("mirror"))?),
    )
    .await?;
    let impostor = registry.reference("impostor:v1");
    push_raw(
        &impostor,
        (
            "application/vnd.wasm.config.v0+json",
            world("kubewasm:controller/guest@0.2.0")?,
        ),
        ("application/wasm", std::fs::read(guest_wasm("impostor"))?),
    )
    .await?;

    with_host_args(
        "controllers-pause",
        &config(ns.name()),
        &[],
        async |_host| {
            let api = wasm_controllers(&client, ns.name());
            for (name, image) in [("future", &future), ("impostor", &impostor)] {
                let spec = json!({ "module": { "image": image }, "controllerName": name });
                api.create(&PostParams::default(), &wasm_controller(name, spec)?)
                    .await?;
            }
            let spec = json!({ "module": { "image": mirror } });
            api.create(&PostParams::default(), &wasm_controller("mirror", spec)?)
                .await?;
            until_condition(&api, "mirror", "Ready", is("True", "Running")).await?;
            let refused =
                until_condition(&api, "future", "Ready", is("False", "WrongWorld")).await?;
            let message = condition(&refused, "Ready").unwrap()["message"].to_string();
            assert!(message.contains("guest@9.0.0"), "{message}");
            // Refused from its config: its layer was never pulled.
            let layer = format!(
                "GET /v2/future/blobs/sha256:{}",
                sha256_hex(&std::fs::read(guest_wasm("mirror"))?)
            );
            assert!(!registry.log().contains(&layer), "{}", registry.log());
            let refused =
                until_condition(&api, "impostor", "Ready", |c| c["status"] == "False").await?;
            let message = condition(&refused, "Ready").unwrap()["message"].to_string();
            assert!(message.contains("kubewasm:controller"), "{message}");

            let before = names("before", 0..2);
            sources(&config_maps, &before).await?;
            mirrored_by(&config_maps, &before, "v1").await?;
            let pause = |paused: bool| json!({ "spec": { "paused": paused } });
            api.patch(
                "mirror",
                &PatchParams::default(),
                &Patch::Merge(&pause(true)),
            )
            .await?;
            let paused = until_condition(&api, "mirror", "Ready", is("False", "Paused")).await?;
            assert_eq!(
                paused.data["status"]["revisions"][0]["reason"], "Paused",
                "{}",
                paused.data["status"]
            );
            ensure!(events_with(&client, ns.name(), "mirror", "Paused").await? == 1);
            // Keys that change while it is paused wait for it.
            let during = names("during", 0..2);
            sources(&config_maps, &during).await?;
            tokio::time::sleep(Duration::from_secs(2)).await;
            for name in &during {
                let mirror = config_maps.get_opt(&format!("{name}-mirror")).await?;
                ensure!(mirror.is_none(), "{name} was mirrored while paused");
            }
            // Resumed while its registry is down: the module that ran resumes from the store.
            registry.stop();
            api.patch(
                "mirror",
                &PatchParams::default(),
                &Patch::Merge(&pause(false)),
            )
            .await?;
            let resumed = until_condition(&api, "mirror", "Degraded", |c| {
                c["status"] == "True" && c["reason"] == "RegistryUnreachable"
            })
            .await?;
            assert_eq!(condition(&resumed, "Ready").unwrap()["status"], "True");
            mirrored_by(&config_maps, &during, "v1").await?;
            let reasons = event_reasons(&client, ns.name(), "mirror").await?;
            ensure!(
                !reasons.contains(&"RolledBack".to_owned()),
                "resuming is no rollback: {reasons:?}"
            );
            registry.restart();
            until_condition(&api, "mirror", "Degraded", is("False", "Running")).await?;
            Ok(())
        },
    )
    .await
}

#[tokio::test]
async fn a_wasm_controller_created_again_under_its_name_starts_over() -> Result<()> {
    let (client, ns) = cluster("wasmagain").await?;
    let registry = registry::shared();
    let v1 = push(
        &guest_wasm("mirror"),
        &registry.reference("again/mirror:v1"),
    )?;
    let v2 = push(
        &guest_wasm_with("mirror", &["v2"]),
        &registry.reference("again/mirror:v2"),
    )?;

    with_host_args("controllers-again", &config(ns.name()), &[], async |host| {
        let api = wasm_controllers(&client, ns.name());
        let spec = |image: &str| json!({ "module": { "image": image } });
        api.create(
            &PostParams::default(),
            &wasm_controller("mirror", spec(&v1))?,
        )
        .await?;
        until_condition(&api, "mirror", "Ready", is("True", "Running")).await?;
        // Deleted and created again while the host does not look: it sees both at once.
        host.signal("STOP")?;
        let deleted = async {
            api.delete("mirror", &DeleteParams::default()).await?;
            eventually("the WasmController to go", WAIT, || async {
                Ok(api.get_opt("mirror").await?.is_none().then_some(()))
            })
            .await?;
            api.create(
                &PostParams::default(),
                &wasm_controller("mirror", spec(&v2))?,
            )
            .await?;
            anyhow::Ok(())
        }
        .await;
        host.signal("CONT")?;
        deleted?;
        let object = until_condition(&api, "mirror", "Ready", is("True", "Running")).await?;
        let status = &object.data["status"];
        assert_eq!(status["image"], v2.as_str(), "{status}");
        let revisions = status["revisions"].as_array().context("revisions")?;
        assert_eq!(revisions.len(), 1, "the old object's revisions: {status}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_registry_that_never_answers_holds_up_no_other_wasm_controller() -> Result<()> {
    let (client, ns) = cluster("wasmhang").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    // A registry that accepts connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0")?;
    let hanging = format!("{}/hang/mirror:v1", silent.local_addr()?);
    let (connected, asked) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in silent.incoming().flatten() {
            held.push(stream);
            let _ = connected.send(());
        }
    });
    let mirror = registry::shared().reference("hang/mirror:v1");
    push(&guest_wasm("mirror"), &mirror)?;

    with_host_args("controllers-hang", &config(ns.name()), &[], async |_host| {
        let api = wasm_controllers(&client, ns.name());
        let spec = json!({ "module": { "image": hanging }, "controllerName": "silent" });
        api.create(&PostParams::default(), &wasm_controller("silent", spec)?)
            .await?;
        tokio::task::spawn_blocking(move || asked.recv_timeout(WAIT))
            .await?
            .context("the host to ask the silent registry")?;
        let spec = json!({ "module": { "image": mirror } });
        api.create(&PostParams::default(), &wasm_controller("mirror", spec)?)
            .await?;
        // Well within the 60 s a request to the silent registry waits for an answer.
        let soon = Duration::from_secs(20);
        eventually("mirror to run while silent waits", soon, || async {
            let object = api.get("mirror").await?;
            Ok(condition(&object, "Ready")
                .filter(|c| c["status"] == "True")
                .map(|_| ()))
        })
        .await?;
        let keys = names("key", 0..2);
        sources(&config_maps, &keys).await?;
        mirrored_by(&config_maps, &keys, "v1").await?;
        Ok(())
    })
    .await
}
