//! Hot reload: a changed module is swapped in (in place, or by restarting its controller when
//! its declaration changed) and every key reconciled again; an invalid one is rejected while the
//! previous version keeps running; a removed file unloads the guest; the layout of a ConfigMap
//! volume is followed; compiled modules are reused across restarts; and no reconcile is lost
//! while modules are swapped under load. The host's endpoints answer while a module loads and
//! while a guest drains.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kubewasm_tests::prometheus::{scrape, sum};
use kubewasm_tests::{
    HostProcess, WAIT, control_plane, eventually, free_ports, guest_wasm, guest_wasm_with,
    http_get, with_host, with_host_args,
};
use serde_json::json;
use tempfile::TempDir;

/// Long enough after a module file changed for the host to be loading it: past the quiet time
/// that ends a burst of file events.
const BUSY: Duration = Duration::from_secs(2);

fn build(version: &str) -> PathBuf {
    match version {
        "v1" => guest_wasm_with("mirror", &[]),
        other => guest_wasm_with("mirror", &[other]),
    }
}

/// Replaces `path` with the `version` build in one rename, as deployment tools do.
fn install(path: &Path, version: &str) -> Result<()> {
    replace(path, &build(version))
}

/// Replaces `path` with a copy of `module` in one rename.
fn replace(path: &Path, module: &Path) -> Result<()> {
    let staged = path.with_extension("staged");
    std::fs::copy(module, &staged)?;
    std::fs::rename(&staged, path)?;
    Ok(())
}

/// A folder of its own for one test's module files.
fn module_dir(name: &str) -> Result<TempDir> {
    Ok(tempfile::Builder::new()
        .prefix(&format!("kubewasm-reload-{name}-"))
        .tempdir()?)
}

fn config(path: &Path, namespace: &str) -> String {
    format!(
        "modules:\n  - path: {}\n    namespaces: [{namespace}]\n",
        path.display()
    )
}

/// Creates or updates the source ConfigMap `name` with `value`.
async fn source(config_maps: &Api<ConfigMap>, name: &str, value: &str) -> Result<()> {
    let object = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": name, "labels": { "kubewasm.dev/fixture": "mirror" } },
        "data": { "value": value },
    });
    config_maps
        .patch(name, &PatchParams::apply("tests"), &Patch::Apply(&object))
        .await?;
    Ok(())
}

/// Waits until every source named in `names` is mirrored with `value` by `version`.
async fn mirrored(
    config_maps: &Api<ConfigMap>,
    names: &[String],
    value: impl Fn(&str) -> String,
    version: &str,
) -> Result<()> {
    eventually(
        &format!("{} mirrors by {version}", names.len()),
        WAIT,
        || async {
            let mirrors = config_maps.list(&ListParams::default()).await?.items;
            let done = names.iter().all(|name| {
                mirrors.iter().any(|m| {
                    m.metadata.name.as_deref() == Some(&format!("{name}-mirror"))
                        && m.data.as_ref().is_some_and(|d| {
                            d.get("value") == Some(&value(name))
                                && d.get("version").map(String::as_str) == Some(version)
                        })
                })
            });
            Ok(done.then_some(()))
        },
    )
    .await
}

async fn log_says(host: &HostProcess, what: &str, times: usize) -> Result<()> {
    eventually(
        &format!("the log to say {what:?} {times} time(s)"),
        WAIT,
        || async { Ok((host.log().matches(what).count() >= times).then_some(())) },
    )
    .await
}

#[tokio::test]
async fn changed_invalid_and_removed_modules() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("reload").await?;
    let tmp = module_dir("files")?;
    let dir = tmp.path();
    let module = dir.join("mirror.wasm");
    install(&module, "v1")?;
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    with_host(ns.name(), &config(&module, ns.name()), async |host| {
        let names: Vec<String> = (0..5).map(|i| format!("s{i}")).collect();
        for name in &names {
            source(&config_maps, name, name).await?;
        }
        let same = |name: &str| name.to_owned();
        mirrored(&config_maps, &names, same, "v1").await?;

        // New code, same declaration: swapped in place; every key is reconciled again although
        // no object changed.
        install(&module, "v2")?;
        log_says(host, "module swapped in place", 1).await?;
        mirrored(&config_maps, &names, same, "v2").await?;

        // A new declaration: the controller is restarted on it.
        install(&module, "v3")?;
        log_says(host, "module replaced with a new declaration", 1).await?;
        mirrored(&config_maps, &names, same, "v3").await?;

        // A truncated module is rejected and v3 keeps reconciling.
        let bytes = std::fs::read(build("v2"))?;
        std::fs::write(&module, &bytes[..bytes.len() / 2])?;
        log_says(
            host,
            "module change rejected; the previous version keeps running",
            1,
        )
        .await?;
        let more = vec!["after-rejection".to_owned()];
        source(&config_maps, &more[0], "x").await?;
        mirrored(&config_maps, &more, |_| "x".into(), "v3").await?;

        // Removing the file unloads the guest; restoring it loads it again, and the source
        // created in between is reconciled then.
        let stopped = "informer stopped: no guest needs it";
        let stopped_before = host.log().matches(stopped).count();
        std::fs::remove_file(&module)?;
        log_says(host, "module file removed; unloading the guest", 1).await?;
        // Its informer (every ConfigMap of the namespace, which serves both its labelled sources
        // and the ConfigMaps it owns) is no longer needed.
        log_says(host, stopped, stopped_before + 1).await?;
        let orphan = vec!["while-removed".to_owned()];
        source(&config_maps, &orphan[0], "y").await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        ensure!(
            config_maps.get_opt("while-removed-mirror").await?.is_none(),
            "an unloaded guest reconciles nothing"
        );
        install(&module, "v1")?;
        mirrored(&config_maps, &orphan, |_| "y".into(), "v1").await?;
        mirrored(&config_maps, &names, same, "v1").await?;
        Ok(())
    })
    .await
}

/// The layout kubelet gives a ConfigMap volume: `mirror.wasm -> ..data/mirror.wasm`,
/// `..data -> ..<timestamp>`, updated by swapping `..data` in one rename.
struct ConfigMapVolume {
    dir: TempDir,
    generation: u32,
}

impl ConfigMapVolume {
    fn new(dir: TempDir, version: &str) -> Result<Self> {
        let mut volume = Self { dir, generation: 0 };
        volume.update(version)?;
        std::os::unix::fs::symlink("..data/mirror.wasm", volume.dir.path().join("mirror.wasm"))?;
        Ok(volume)
    }

    fn update(&mut self, version: &str) -> Result<()> {
        let old = format!("..gen_{}", self.generation);
        self.generation += 1;
        let new = format!("..gen_{}", self.generation);
        std::fs::create_dir(self.dir.path().join(&new))?;
        std::fs::copy(
            build(version),
            self.dir.path().join(&new).join("mirror.wasm"),
        )?;
        let staged = self.dir.path().join("..data_tmp");
        std::os::unix::fs::symlink(&new, &staged)?;
        std::fs::rename(&staged, self.dir.path().join("..data"))?;
        let _ = std::fs::remove_dir_all(self.dir.path().join(old));
        Ok(())
    }
}

#[tokio::test]
async fn a_configmap_volume_update_is_followed() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("volume").await?;
    let mut volume = ConfigMapVolume::new(module_dir("volume")?, "v1")?;
    let module = volume.dir.path().join("mirror.wasm");
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    with_host(ns.name(), &config(&module, ns.name()), async |host| {
        let names = vec!["page".to_owned()];
        source(&config_maps, "page", "p").await?;
        mirrored(&config_maps, &names, |_| "p".into(), "v1").await?;
        volume.update("v2")?;
        log_says(host, "module swapped in place", 1).await?;
        mirrored(&config_maps, &names, |_| "p".into(), "v2").await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_restart_reads_compiled_modules_from_the_cache() -> Result<()> {
    let plane = control_plane();
    let ns = plane.namespace("cache").await?;
    let tmp = module_dir("cache")?;
    let dir = tmp.path();
    let module = dir.join("mirror.wasm");
    install(&module, "v1")?;
    let cache = dir.join("compiled");
    let cache_arg = cache.to_str().context("a UTF-8 path")?;
    let args = ["--compile-cache-dir", cache_arg];
    for (run, from_cache) in [("first", false), ("second", true)] {
        let host = HostProcess::start_with(
            &format!("{}-{run}", ns.name()),
            &config(&module, ns.name()),
            &args,
        )?;
        let expected = format!("from_cache={from_cache}");
        let loaded = eventually("the module to load", WAIT, || async {
            let log = host.log();
            Ok(log
                .lines()
                .find(|l| l.contains("module loaded"))
                .map(str::to_owned))
        })
        .await?;
        ensure!(loaded.contains(&expected), "{run} start: {loaded}");
        ensure!(host.stop()?, "the host exits cleanly on SIGTERM");
    }
    Ok(())
}

#[tokio::test]
async fn no_reconcile_is_lost_while_modules_are_swapped_under_load() -> Result<()> {
    const SOURCES: usize = 30;
    const ROUNDS: usize = 6;
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("churn").await?;
    let tmp = module_dir("churn")?;
    let dir = tmp.path();
    let module = dir.join("mirror.wasm");
    install(&module, "v1")?;
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    let names: Vec<String> = (0..SOURCES).map(|i| format!("c{i}")).collect();
    with_host(ns.name(), &config(&module, ns.name()), async |host| {
        // The host is running (and watching) once the first version has converged.
        for name in &names {
            source(&config_maps, name, "initial").await?;
        }
        mirrored(&config_maps, &names, |_| "initial".into(), "v1").await?;
        for round in 0..ROUNDS {
            let version = if round.is_multiple_of(2) { "v2" } else { "v1" };
            // Every source changes while the module is being replaced.
            let updates = async {
                for name in &names {
                    source(&config_maps, name, &format!("{name}-{round}")).await?;
                }
                anyhow::Ok(())
            };
            let (updated, installed) = tokio::join!(updates, async { install(&module, version) });
            updated?;
            installed?;
            log_says(host, "module swapped in place", round + 1).await?;
        }
        let last = ROUNDS - 1;
        let version = if last.is_multiple_of(2) { "v2" } else { "v1" };
        mirrored(
            &config_maps,
            &names,
            |name| format!("{name}-{last}"),
            version,
        )
        .await?;
        Ok(())
    })
    .await
}

/// Whether `/metrics` and `/status` of the host at `address` both answer before `host` logs
/// `done`: they must not wait for a module that loads or a guest that drains.
async fn answers_before(host: &HostProcess, address: &str, done: &str) -> Result<()> {
    for path in ["/metrics", "/status"] {
        let (code, _) = http_get(address, path).await?;
        ensure!(code == 200, "{path} answered {code}");
        ensure!(
            !host.log().contains(done),
            "{path} answered only once the host logged {done:?}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn metrics_and_status_answer_while_a_module_loads_and_while_a_guest_drains() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("reload-busy").await?;
    let tmp = module_dir("busy")?;
    let module = tmp.path().join("guest.wasm");
    std::fs::copy(guest_wasm("sleep"), &module)?;
    let [port] = free_ports()?;
    let address = format!("127.0.0.1:{port}");
    // Loading the module and each reconcile take up to this deadline.
    let config = format!(
        "{}    limits: {{timeoutMs: 6000}}\n",
        config(&module, ns.name())
    );
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    let sleeping_metadata = guest_wasm_with("sleep", &["metadata"]);
    let args = ["--metrics-bind-address", address.as_str()];
    with_host_args(ns.name(), &config, &args, async |host| {
        // A reconcile sleeps to its deadline: replacing the guest drains it for up to 6 s.
        let sleeper = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": "sleeper", "labels": { "kubewasm.dev/fixture": "sleep" } },
        });
        config_maps
            .create(&PostParams::default(), &serde_json::from_value(sleeper)?)
            .await?;
        eventually("a reconcile to be running", WAIT, || async {
            let text = scrape(address.parse()?).await?;
            let running = sum(&text, "workqueue_longest_running_processor_seconds", |_| {
                true
            });
            Ok((running > 0.0).then_some(()))
        })
        .await?;

        // A module whose metadata sleeps: it loads for 6 s, then is rejected.
        replace(&module, &sleeping_metadata)?;
        tokio::time::sleep(BUSY).await;
        answers_before(host, &address, "module change rejected").await?;
        log_says(host, "module change rejected", 1).await?;

        // A module with a new declaration: the sleeping guest drains before it starts.
        install(&module, "v1")?;
        tokio::time::sleep(BUSY).await;
        answers_before(host, &address, "module replaced with a new declaration").await?;
        log_says(host, "module replaced with a new declaration", 1).await?;

        // Shutdown abandons a module still loading, and the host exits cleanly.
        replace(&module, &sleeping_metadata)?;
        tokio::time::sleep(BUSY).await;
        Ok(())
    })
    .await
}
