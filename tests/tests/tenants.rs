//! Many teams, one host: WasmControllers of ordinary teams and of a hostile one, each confined to
//! a namespace of its own, on the local control plane with a real registry that requires
//! credentials. Whatever the hostile team tries, it reaches nothing of another team's (their
//! credentials, their modules, their namespaces), cannot exhaust the host, and the other teams'
//! controllers keep converging.

use std::time::Duration;

use anyhow::{Result, bail, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kubewasm_tests::registry::{Registry, pull_secret, push_as};
use kubewasm_tests::rogue::Rogue;
use kubewasm_tests::wasmctl::{
    condition, crd_applied, digest_of, events_about, is, mirrored_by, module_config_map, names,
    sources, until_condition, wasm_controller, watching,
};
use kubewasm_tests::{
    HostProcess, TestNamespace, WAIT, apply_yaml, control_plane, guest_wasm, repo_root,
    wasm_controllers, with_host_args, with_started_host,
};
use serde_json::{Value, json};

/// The user of the private registry: team-a's.
const USER: &str = "team-a";
/// Its password, which must never show outside the Secret that holds it.
const PASSWORD: &str = "pw-of-team-a-7c1e9f";
/// How much the host's peak RSS may grow while the hostile team attacks.
const RSS_GROWTH: u64 = 64 << 20;

/// A client of the control plane, with the WasmController CRD, and one namespace per team,
/// named after `prefixes`.
async fn teams<const N: usize>(prefixes: [&str; N]) -> Result<(Client, [TestNamespace; N])> {
    let client = crd_applied().await?;
    let mut namespaces = Vec::new();
    for prefix in prefixes {
        namespaces.push(control_plane().namespace(prefix).await?);
    }
    let namespaces = namespaces
        .try_into()
        .unwrap_or_else(|_| unreachable!("one namespace per prefix"));
    Ok((client, namespaces))
}

/// The host configuration for the teams of `namespaces`.
fn config(namespaces: &[&TestNamespace]) -> String {
    watching(&namespaces.iter().map(|n| n.name()).collect::<Vec<_>>())
}

/// Creates the WasmController `name` with `module` as its `spec.module` in `namespace`.
async fn create(client: &Client, namespace: &str, name: &str, module: Value) -> Result<()> {
    wasm_controllers(client, namespace)
        .create(
            &PostParams::default(),
            &wasm_controller(name, json!({ "module": module }))?,
        )
        .await?;
    Ok(())
}

/// Creates `secret` (JSON) in `namespace`, or replaces its data.
async fn put_secret(client: &Client, namespace: &str, secret: Value) -> Result<()> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let name = secret["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    secrets
        .patch(
            &name,
            &PatchParams::apply("kubewasm-tests").force(),
            &Patch::Apply(&secret),
        )
        .await?;
    Ok(())
}

/// Checks that the mirror of `namespace` still converges: a new source `name` is mirrored.
async fn still_converges(client: &Client, namespace: &str, name: &str) -> Result<()> {
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let new = vec![name.to_owned()];
    sources(&config_maps, &new).await?;
    mirrored_by(&config_maps, &new, "v1").await
}

/// Fails when `text` holds the registry password.
fn no_password(what: &str, text: &str) -> Result<()> {
    ensure!(
        !text.contains(PASSWORD),
        "{what} shows the registry password"
    );
    Ok(())
}

/// A private registry of team-a's with the mirror fixture pushed as `team-a/mirror:v1`; its
/// pinned reference.
fn private_registry() -> Result<(Registry, String)> {
    let registry = Registry::start_with_auth(USER, PASSWORD);
    let pinned = push_as(
        &guest_wasm("mirror"),
        &registry.reference("team-a/mirror:v1"),
        USER,
        PASSWORD,
    )?;
    Ok((registry, pinned))
}

/// Runs team-a's mirror from `registry` with its pull secret, and waits until it mirrors.
async fn team_a_runs_its_private_mirror(
    client: &Client,
    namespace: &str,
    registry: &Registry,
) -> Result<()> {
    let secret = pull_secret("registry", &registry.address(), USER, PASSWORD);
    put_secret(client, namespace, secret).await?;
    let module = json!({
        "image": registry.reference("team-a/mirror:v1"),
        "imagePullSecret": "registry",
        "pollInterval": "1s",
    });
    create(client, namespace, "mirror", module).await?;
    let api = wasm_controllers(client, namespace);
    until_condition(&api, "mirror", "Ready", is("True", "Running")).await?;
    still_converges(client, namespace, "a-first").await
}

#[tokio::test]
async fn another_teams_private_module_is_refused_without_its_credentials() -> Result<()> {
    let (client, [a, b]) = teams(["team-a", "team-b"]).await?;
    let (registry, pinned) = private_registry()?;
    with_host_args(
        "tenants-credentials",
        &config(&[&a, &b]),
        &[],
        async |host| {
            team_a_runs_its_private_mirror(&client, a.name(), &registry).await?;
            // team-b names the same tag, then the digest team-a's status shows, without
            // credentials, then with credentials the registry does not take.
            let b_api = wasm_controllers(&client, b.name());
            let tag = registry.reference("team-a/mirror:v1");
            create(&client, b.name(), "by-tag", json!({ "image": tag })).await?;
            create(&client, b.name(), "by-digest", json!({ "image": pinned })).await?;
            let wrong = pull_secret("guess", &registry.address(), USER, "guess");
            put_secret(&client, b.name(), wrong).await?;
            let guessed = json!({ "image": tag, "imagePullSecret": "guess" });
            create(&client, b.name(), "by-guess", guessed).await?;
            for name in ["by-tag", "by-digest", "by-guess"] {
                let refused =
                    until_condition(&b_api, name, "Degraded", is("True", "RegistryUnauthorized"))
                        .await?;
                let ready = condition(&refused, "Ready").unwrap_or_default();
                ensure!(ready["status"] == "False", "{name} runs: {ready}");
            }
            still_converges(&client, a.name(), "a-after").await?;
            // team-b's mirror never ran: nothing of its namespace is mirrored.
            let b_maps: Api<ConfigMap> = Api::namespaced(client.clone(), b.name());
            sources(&b_maps, &names("b", 0..1)).await?;
            tokio::time::sleep(Duration::from_secs(2)).await;
            ensure!(
                b_maps.get_opt("b-0-mirror").await?.is_none(),
                "team-b's source was mirrored"
            );

            no_password("the host's log", &host.log())?;
            for (namespace, name) in [(a.name(), "mirror"), (b.name(), "by-guess")] {
                let object = wasm_controllers(&client, namespace).get(name).await?;
                no_password("a status", &object.data.to_string())?;
                let events = events_about(&client, namespace, name).await?;
                no_password("an Event", &serde_json::to_string(&events)?)?;
            }
            Ok(())
        },
    )
    .await
}

#[tokio::test]
async fn a_rotated_pull_secret_is_used_at_the_next_fetch() -> Result<()> {
    let (client, [a]) = teams(["team-a"]).await?;
    let (registry, _) = private_registry()?;
    with_host_args("tenants-rotation", &config(&[&a]), &[], async |_host| {
        let stale = pull_secret("registry", &registry.address(), USER, "the-old-password");
        put_secret(&client, a.name(), stale).await?;
        let module = json!({
            "image": registry.reference("team-a/mirror:v1"),
            "imagePullSecret": "registry",
            "pollInterval": "1s",
        });
        create(&client, a.name(), "mirror", module).await?;
        let api = wasm_controllers(&client, a.name());
        until_condition(
            &api,
            "mirror",
            "Degraded",
            is("True", "RegistryUnauthorized"),
        )
        .await?;
        let rotated = pull_secret("registry", &registry.address(), USER, PASSWORD);
        put_secret(&client, a.name(), rotated).await?;
        until_condition(&api, "mirror", "Ready", is("True", "Running")).await?;
        still_converges(&client, a.name(), "rotated").await
    })
    .await
}

#[tokio::test]
async fn a_confined_controller_declaring_a_cluster_scoped_kind_is_refused() -> Result<()> {
    let (client, [hostile]) = teams(["hostile"]).await?;
    apply_yaml(
        &client,
        &repo_root().join("tests/fixtures/tenant-crd.yaml"),
        None,
    )
    .await?;
    module_config_map(&client, hostile.name(), "tenant", &guest_wasm("tenant")).await?;
    with_host_args("tenants-scope", &config(&[&hostile]), &[], async |_host| {
        let module = json!({ "configMap": { "name": "tenant", "key": "module.wasm" } });
        create(&client, hostile.name(), "tenant", module).await?;
        let api = wasm_controllers(&client, hostile.name());
        let refused =
            until_condition(&api, "tenant", "Degraded", is("True", "ClusterScopedKind")).await?;
        let message = condition(&refused, "Degraded").unwrap_or_default()["message"].to_string();
        ensure!(message.contains("Tenant"), "{message}");
        let ready = condition(&refused, "Ready").unwrap_or_default();
        ensure!(ready["status"] == "False", "the controller runs: {ready}");
        Ok(())
    })
    .await
}

/// The WasmController `name`'s Degraded condition once it has `reason`, failing at once when
/// the host's peak RSS passes `bound` (the host is then killed, before it takes the machine).
async fn refused_within(
    host: &HostProcess,
    api: &Api<DynamicObject>,
    name: &str,
    reason: &str,
    bound: u64,
) -> Result<Value> {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let peak = host.peak_rss()?;
        ensure!(
            peak <= bound,
            "the host's peak RSS reached {} MiB",
            peak >> 20
        );
        let object = api.get(name).await?;
        if let Some(degraded) = condition(&object, "Degraded")
            .filter(|c| c["status"] == "True" && c["reason"] == reason)
        {
            return Ok(degraded);
        }
        if std::time::Instant::now() > deadline {
            bail!(
                "{name} not refused with {reason} within {WAIT:?}: {:?}",
                object.data["status"]
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_registry_that_answers_without_end_costs_the_host_nothing() -> Result<()> {
    let (client, [a, hostile]) = teams(["team-a", "hostile"]).await?;
    let rogue = Rogue::start().await?;
    module_config_map(&client, a.name(), "mirror", &guest_wasm("mirror")).await?;
    with_host_args(
        "tenants-endless",
        &config(&[&a, &hostile]),
        &[],
        async |host| {
            let module = json!({ "configMap": { "name": "mirror", "key": "module.wasm" } });
            create(&client, a.name(), "mirror", module).await?;
            let a_api = wasm_controllers(&client, a.name());
            until_condition(&a_api, "mirror", "Ready", is("True", "Running")).await?;
            still_converges(&client, a.name(), "before").await?;
            let before = host.peak_rss()?;
            let bound = before + RSS_GROWTH;

            let api = wasm_controllers(&client, hostile.name());
            for tag in ["endless", "endless-config", "drip"] {
                let module = json!({ "image": rogue.reference(tag), "pollInterval": "1s" });
                create(&client, hostile.name(), tag, module).await?;
            }
            for tag in ["endless", "endless-config"] {
                let refused = refused_within(host, &api, tag, "AnswerTooLarge", bound).await?;
                ensure!(
                    refused["message"].to_string().contains("over the limit"),
                    "{refused}"
                );
            }
            still_converges(&client, a.name(), "during").await?;
            refused_within(host, &api, "drip", "RegistryUnreachable", bound).await?;
            still_converges(&client, a.name(), "after").await?;
            let peak = host.peak_rss()?;
            println!(
                "host peak RSS: {} MiB before the attack, {} MiB after",
                before >> 20,
                peak >> 20
            );
            ensure!(
                peak <= bound,
                "the peak RSS grew by {} MiB",
                (peak - before) >> 20
            );
            Ok(())
        },
    )
    .await
}

/// Writes `revisions` into the status of the WasmController `name`, as a team allowed to patch
/// the status subresource may.
async fn forge(api: &Api<DynamicObject>, name: &str, revisions: Value) -> Result<()> {
    let patch = json!({ "status": { "revisions": revisions } });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

#[tokio::test]
async fn forged_revisions_name_no_module_the_object_could_not_take_itself() -> Result<()> {
    let (client, [a, hostile]) = teams(["team-a", "forger"]).await?;
    let (registry, pinned) = private_registry()?;
    let store = tempfile::tempdir()?;
    let store_dir = store.path().to_string_lossy().into_owned();
    let args = ["--module-store-dir", store_dir.as_str()];
    let config = config(&[&a, &hostile]);
    let api = wasm_controllers(&client, hostile.name());
    with_host_args("tenants-forged", &config, &args, async |_host| {
        team_a_runs_its_private_mirror(&client, a.name(), &registry).await?;
        let object = wasm_controllers(&client, a.name()).get("mirror").await?;
        let module_digest = object.data["status"]["moduleDigest"].clone();
        // Two objects whose own modules cannot be had, with forged histories naming team-a's
        // module: by its private image, and by its digest alone.
        let missing = json!({ "configMap": { "name": "missing", "key": "module.wasm" } });
        create(
            &client,
            hostile.name(),
            "by-image",
            json!({ "image": pinned }),
        )
        .await?;
        create(&client, hostile.name(), "by-digest", missing).await?;
        // Forged once the host wrote their status, which it would otherwise write over.
        until_condition(&api, "by-image", "Ready", |_| true).await?;
        until_condition(&api, "by-digest", "Degraded", is("True", "SourceNotFound")).await?;
        let revision = |image: Option<&str>| {
            json!([{
                "digest": if image.is_some() { json!(digest_of(&pinned).unwrap_or_default()) }
                    else { module_digest.clone() },
                "image": image,
                "moduleDigest": module_digest,
                "started": "2026-01-01T00:00:00Z",
            }])
        };
        forge(&api, "by-image", revision(Some(&pinned))).await?;
        forge(&api, "by-digest", revision(None)).await?;
        Ok(())
    })
    .await?;
    // A new host (a restart, a failover) reads the forged histories.
    with_host_args("tenants-forged-again", &config, &args, async |_host| {
        let hostile_maps: Api<ConfigMap> = Api::namespaced(client.clone(), hostile.name());
        sources(&hostile_maps, &names("stolen", 0..1)).await?;
        for (name, reason) in [
            ("by-digest", "SourceNotFound"),
            ("by-image", "RegistryUnauthorized"),
        ] {
            until_condition(&api, name, "Degraded", is("True", reason)).await?;
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        for name in ["by-digest", "by-image"] {
            let object = api.get(name).await?;
            let ready = condition(&object, "Ready").unwrap_or_default();
            ensure!(
                ready["status"] == "False",
                "{name} runs team-a's module: {ready}"
            );
        }
        ensure!(
            hostile_maps.get_opt("stolen-0-mirror").await?.is_none(),
            "team-a's module ran in the forger's namespace"
        );
        still_converges(&client, a.name(), "a-after").await
    })
    .await
}

#[tokio::test]
async fn two_teams_run_the_same_module_and_the_older_object_keeps_a_clashing_name() -> Result<()> {
    let (client, [a, b, hostile]) = teams(["team-a", "team-b", "squatter"]).await?;
    for namespace in [&a, &b, &hostile] {
        module_config_map(&client, namespace.name(), "mirror", &guest_wasm("mirror")).await?;
    }
    let module = json!({ "configMap": { "name": "mirror", "key": "module.wasm" } });
    let config = config(&[&a, &b, &hostile]);
    with_host_args("tenants-names", &config, &[], async |_host| {
        for namespace in [&a, &b] {
            create(&client, namespace.name(), "mirror", module.clone()).await?;
        }
        for namespace in [&a, &b] {
            let api = wasm_controllers(&client, namespace.name());
            until_condition(&api, "mirror", "Ready", is("True", "Running")).await?;
            still_converges(&client, namespace.name(), "same-module").await?;
        }
        // Two objects that set the same name: the older one runs, the newer says why not.
        let named = json!({ "module": module, "controllerName": "shared" });
        let b_api = wasm_controllers(&client, b.name());
        b_api
            .create(
                &PostParams::default(),
                &wasm_controller("named", named.clone())?,
            )
            .await?;
        until_condition(&b_api, "named", "Ready", is("True", "Running")).await?;
        // Creation times are in seconds; objects created in the same one are ordered by
        // namespace and name.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let api = wasm_controllers(&client, hostile.name());
        api.create(&PostParams::default(), &wasm_controller("named", named)?)
            .await?;
        until_condition(&api, "named", "Degraded", is("True", "DuplicateName")).await?;
        still_converges(&client, a.name(), "not-squatted").await
    })
    .await?;
    // Another replica, whichever object it handles first, picks the same winner. The loser's
    // conditions are cleared first, so what is read below is that replica's verdict.
    let cleared = json!({ "status": { "conditions": [] } });
    wasm_controllers(&client, hostile.name())
        .patch_status("named", &PatchParams::default(), &Patch::Merge(&cleared))
        .await?;
    let again = HostProcess::start_with("tenants-names-again", &config, &[])?;
    with_started_host(again, async |_host| {
        let api = wasm_controllers(&client, hostile.name());
        let refused =
            until_condition(&api, "named", "Degraded", is("True", "DuplicateName")).await?;
        let message = condition(&refused, "Degraded").unwrap_or_default()["message"].to_string();
        ensure!(
            message.contains(b.name()),
            "the loser does not name the winner: {message}"
        );
        let b_api = wasm_controllers(&client, b.name());
        let object = b_api.get("named").await?;
        let ready = condition(&object, "Ready").unwrap_or_default();
        ensure!(
            ready["status"] == "True",
            "the older object does not run: {ready}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_spec_past_the_hosts_maxima_is_refused_and_one_at_them_runs() -> Result<()> {
    let (client, [a, hostile]) = teams(["team-a", "greedy"]).await?;
    for namespace in [&a, &hostile] {
        module_config_map(&client, namespace.name(), "mirror", &guest_wasm("mirror")).await?;
    }
    let source = json!({ "configMap": { "name": "mirror", "key": "module.wasm" } });
    with_host_args(
        "tenants-maxima",
        &config(&[&a, &hostile]),
        &[],
        async |_host| {
            create(&client, a.name(), "mirror", source.clone()).await?;
            let api = wasm_controllers(&client, hostile.name());
            let mut greedy = source.clone();
            greedy["pollInterval"] = json!("1ms");
            let spec = json!({
                "module": greedy,
                "maxConcurrency": 1024,
                "limits": { "memoryBytes": "8Gi", "timeoutMs": 86_400_000, "errorBytes": "1Gi" },
                "queue": { "qps": 100_000, "baseBackoffMs": 1 },
            });
            api.create(&PostParams::default(), &wasm_controller("greedy", spec)?)
                .await?;
            let refused =
                until_condition(&api, "greedy", "Degraded", is("True", "OverMaximum")).await?;
            let message =
                condition(&refused, "Degraded").unwrap_or_default()["message"].to_string();
            for field in [
                "spec.module.pollInterval",
                "spec.maxConcurrency",
                "spec.limits.memoryBytes",
                "spec.limits.timeoutMs",
                "spec.limits.errorBytes",
                "spec.queue.qps",
                "spec.queue.baseBackoffMs",
            ] {
                ensure!(message.contains(field), "{field} not named: {message}");
            }
            // At the maxima: it runs, and the other team keeps converging.
            let spec = json!({
                "module": source,
                "maxConcurrency": 16,
                "limits": { "memoryBytes": "128Mi", "timeoutMs": 60_000 },
            });
            api.create(&PostParams::default(), &wasm_controller("at-maxima", spec)?)
                .await?;
            until_condition(&api, "at-maxima", "Ready", is("True", "Running")).await?;
            still_converges(&client, a.name(), "beside-maxima").await
        },
    )
    .await
}

#[tokio::test]
async fn a_guest_draining_slowly_holds_up_no_other_teams_load() -> Result<()> {
    let (client, [a, hostile]) = teams(["team-a", "sleeper"]).await?;
    module_config_map(&client, a.name(), "mirror", &guest_wasm("mirror")).await?;
    module_config_map(&client, hostile.name(), "sleep", &guest_wasm("sleep")).await?;
    with_host_args(
        "tenants-drain",
        &config(&[&a, &hostile]),
        &[],
        async |host| {
            let api = wasm_controllers(&client, hostile.name());
            let spec = json!({
                "module": { "configMap": { "name": "sleep", "key": "module.wasm" } },
                "limits": { "timeoutMs": 60_000 },
            });
            api.create(&PostParams::default(), &wasm_controller("sleep", spec)?)
                .await?;
            until_condition(&api, "sleep", "Ready", is("True", "Running")).await?;
            let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), hostile.name());
            let sleeper: ConfigMap = serde_json::from_value(json!({
                "metadata": { "name": "zzz", "labels": { "kubewasm.dev/fixture": "sleep" } },
            }))?;
            config_maps.create(&PostParams::default(), &sleeper).await?;
            // A reconcile sleeps for its whole deadline, so deleting the controller drains for it.
            tokio::time::sleep(Duration::from_secs(2)).await;
            api.delete("sleep", &Default::default()).await?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let started = std::time::Instant::now();
            let module = json!({ "configMap": { "name": "mirror", "key": "module.wasm" } });
            create(&client, a.name(), "mirror", module).await?;
            let a_api = wasm_controllers(&client, a.name());
            until_condition(&a_api, "mirror", "Ready", is("True", "Running")).await?;
            let took = started.elapsed();
            println!("team-a's controller was Ready {took:?} after it was created");
            ensure!(
                took < Duration::from_secs(20),
                "team-a's load waited {took:?}, for the other team's drain"
            );
            ensure!(
                !host.log().contains("its guest is unloaded") || took < Duration::from_secs(20)
            );
            still_converges(&client, a.name(), "beside-a-drain").await
        },
    )
    .await
}

#[tokio::test]
async fn the_apis_conflicts_after_a_rollout_do_not_roll_back_a_good_revision() -> Result<()> {
    let (client, [a]) = teams(["team-a"]).await?;
    let registry = Registry::start();
    let tag = registry.reference("mirror:live");
    kubewasm_tests::registry::push(&guest_wasm("mirror"), &tag)?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), a.name());
    with_host_args("tenants-probation", &config(&[&a]), &[], async |host| {
        let spec = json!({
            "module": { "image": tag, "pollInterval": "1s" },
            "rollback": { "failures": 3, "window": "10m" },
        });
        let api = wasm_controllers(&client, a.name());
        api.create(&PostParams::default(), &wasm_controller("mirror", spec)?)
            .await?;
        until_condition(&api, "mirror", "Ready", is("True", "Running")).await?;
        // One source whose mirror another field manager holds at another value: every apply
        // of it is a 409 Conflict, a key stuck on the API server's answer.
        let taken: ConfigMap = serde_json::from_value(json!({
            "metadata": { "name": "stuck-0-mirror" }, "data": { "value": "someone else's" },
        }))?;
        config_maps
            .patch(
                "stuck-0-mirror",
                &PatchParams::apply("someone-else"),
                &Patch::Apply(&taken),
            )
            .await?;
        still_converges(&client, a.name(), "fine").await?;
        // A new build under the tag; once it runs, a new source whose key fails at once, 5 ms
        // of backoff apart, on the API server's 409.
        let v2 = digest_of(&kubewasm_tests::registry::push(
            &kubewasm_tests::guest_wasm_with("mirror", &["v2"]),
            &tag,
        )?)?;
        let config_maps_ref = &config_maps;
        kubewasm_tests::eventually("the fine source mirrored by v2", WAIT, || async {
            let mirror = config_maps_ref.get_opt("fine-mirror").await?;
            let version = mirror
                .and_then(|m| m.data)
                .and_then(|d| d.get("version").cloned());
            Ok((version.as_deref() == Some("v2")).then_some(()))
        })
        .await?;
        sources(&config_maps, &names("stuck", 0..1)).await?;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let failed = host
            .log()
            .lines()
            .filter(|l| l.contains("reconcile failed") && l.contains("stuck-0"))
            .count();
        ensure!(failed >= 3, "the stuck key failed {failed} times");
        let object = api.get("mirror").await?;
        let status = &object.data["status"];
        ensure!(status["digest"] == v2.as_str(), "v2 does not run: {status}");
        ensure!(
            status.get("rolledBack").is_none(),
            "v2 was rolled back: {status}"
        );
        let reasons = kubewasm_tests::wasmctl::event_reasons(&client, a.name(), "mirror").await?;
        ensure!(!reasons.iter().any(|r| r == "RolledBack"), "{reasons:?}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_tag_is_polled_with_head_requests_only() -> Result<()> {
    let (client, [a]) = teams(["team-a"]).await?;
    let registry = Registry::start();
    let tag = registry.reference("polled:live");
    kubewasm_tests::registry::push(&guest_wasm("mirror"), &tag)?;
    with_host_args("tenants-polling", &config(&[&a]), &[], async |_host| {
        let spec = json!({ "module": { "image": tag, "pollInterval": "1s" } });
        let api = wasm_controllers(&client, a.name());
        api.create(&PostParams::default(), &wasm_controller("mirror", spec)?)
            .await?;
        until_condition(&api, "mirror", "Ready", is("True", "Running")).await?;
        let (gets, heads) = (
            registry.requests("GET", "/v2/polled/manifests/"),
            registry.requests("HEAD", "/v2/polled/manifests/"),
        );
        tokio::time::sleep(Duration::from_secs(6)).await;
        let polled = registry.requests("HEAD", "/v2/polled/manifests/") - heads;
        ensure!(polled >= 3, "{polled} HEAD requests in 6 s of a 1 s poll");
        ensure!(
            registry.requests("GET", "/v2/polled/manifests/") == gets,
            "the manifest was fetched again although it did not change:\n{}",
            registry.log()
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn teams_loading_one_image_at_once_pull_its_layer_once() -> Result<()> {
    let (client, namespaces) = teams(["shared-a", "shared-b", "shared-c", "shared-d"]).await?;
    let registry = Registry::start();
    // A build of its own, so that no earlier test left it in a module store.
    let mut module = std::fs::read(guest_wasm("mirror"))?;
    kubewasm_tests::append_custom_section(
        &mut module,
        "kubewasm-test",
        namespaces[0].name().as_bytes(),
    );
    let layer = format!("sha256:{}", kubewasm_tests::registry::sha256_hex(&module));
    let path = tempfile::NamedTempFile::new()?;
    std::fs::write(path.path(), &module)?;
    let tag = registry.reference("shared/mirror:v1");
    kubewasm_tests::registry::push(path.path(), &tag)?;
    for namespace in &namespaces {
        create(&client, namespace.name(), "mirror", json!({ "image": tag })).await?;
    }
    let watched: Vec<&TestNamespace> = namespaces.iter().collect();
    with_host_args(
        "tenants-shared-image",
        &config(&watched),
        &[],
        async |_host| {
            for namespace in &namespaces {
                let api = wasm_controllers(&client, namespace.name());
                until_condition(&api, "mirror", "Ready", is("True", "Running")).await?;
            }
            let pulls = registry.requests("GET", &format!("/v2/shared/mirror/blobs/{layer}"));
            ensure!(
                pulls == 1,
                "four controllers of one image pulled its layer {pulls} times:\n{}",
                registry.log()
            );
            Ok(())
        },
    )
    .await
}

/// `kubewasm run` arguments electing a leader on the Lease `tenants-leader` in `namespace`.
fn election(namespace: &str) -> [&str; 5] {
    [
        "--leader-elect",
        "--leader-election-namespace",
        namespace,
        "--leader-election-id",
        "tenants-leader",
    ]
}

#[tokio::test]
async fn a_standby_that_takes_over_keeps_the_leaders_rollback() -> Result<()> {
    let (client, [a]) = teams(["team-a"]).await?;
    let registry = Registry::start();
    let tag = registry.reference("mirror:live");
    let v1 = digest_of(&kubewasm_tests::registry::push(
        &guest_wasm("mirror"),
        &tag,
    )?)?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), a.name());
    let (config, args) = (config(&[&a]), election(a.name()));
    let leader = HostProcess::start_with("tenants-failover-leader", &config, &args)?;
    kubewasm_tests::eventually("the first host to lead", WAIT, || async {
        Ok(leader.log().contains("became leader").then_some(()))
    })
    .await?;
    let standby = HostProcess::start_with("tenants-failover-standby", &config, &args)?;
    let api = wasm_controllers(&client, a.name());
    let spec = json!({
        "module": { "image": tag, "pollInterval": "1s" },
        "rollback": { "failures": 3, "window": "20s" },
    });
    api.create(&PostParams::default(), &wasm_controller("mirror", spec)?)
        .await?;
    until_condition(&api, "mirror", "Ready", is("True", "Running")).await?;
    still_converges(&client, a.name(), "first").await?;
    sources(&config_maps, &names("failing", 0..3)).await?;
    // A build that fails every reconcile: the leader rolls it back.
    let bad = digest_of(&kubewasm_tests::registry::push(
        &kubewasm_tests::guest_wasm_with("mirror", &["fails"]),
        &tag,
    )?)?;
    let rolled = until_condition(&api, "mirror", "Degraded", is("True", "RolledBack")).await?;
    ensure!(rolled.data["status"]["rolledBack"]["digest"] == bad.as_str());
    // The standby's own probation of the bad build would have passed by now: it ran nothing.
    tokio::time::sleep(Duration::from_secs(25)).await;
    let stopped = leader.stop()?;
    ensure!(stopped, "the leader exits cleanly on SIGTERM");
    with_started_host(standby, async |standby| {
        kubewasm_tests::eventually("the standby to lead", WAIT, || async {
            Ok(standby.log().contains("became leader").then_some(()))
        })
        .await?;
        let after = names("after", 0..2);
        sources(&config_maps, &after).await?;
        mirrored_by(&config_maps, &after, "v1").await?;
        let object = api.get("mirror").await?;
        let status = &object.data["status"];
        ensure!(
            status["digest"] == v1.as_str(),
            "the rolled back build runs: {status}"
        );
        ensure!(
            status["rolledBack"]["digest"] == bad.as_str(),
            "the rollback is lost: {status}"
        );
        Ok(())
    })
    .await
}
