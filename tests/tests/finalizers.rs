//! A guest's finalizer on the real control plane: added before the guest's first reconcile,
//! removed once `finalize` succeeds, also when `finalize` writes the object itself; an object
//! whose `finalize` keeps failing is reported, with the reason, in the log and the metrics.
//! An object that leaves the guest's selection is released without `finalize`, also while the
//! host is down; a renamed finalizer replaces the old one; an unloaded guest's finalizer stays,
//! reported, until the guest is loaded again.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kubewasm_tests::prometheus::{scrape, sum};
use kubewasm_tests::{
    WAIT, control_plane, eventually, free_ports, guest_wasm, guest_wasm_with, module_config,
    namespaced_config, with_host, with_host_args,
};
use serde_json::json;
use tempfile::TempDir;

/// Creates the ConfigMap `name` for the stamp guest and waits until it carries its finalizer.
async fn create_finalized(config_maps: &Api<ConfigMap>, name: &str) -> Result<()> {
    create_held(config_maps, name, &[]).await
}

/// Like [`create_finalized`], with the finalizers `held` of someone else too.
async fn create_held(config_maps: &Api<ConfigMap>, name: &str, held: &[&str]) -> Result<()> {
    let object: ConfigMap = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": { "kubewasm.dev/fixture": "stamp" },
            "finalizers": held,
        },
    }))?;
    config_maps.create(&PostParams::default(), &object).await?;
    eventually("the guest's finalizer on the object", WAIT, || async {
        let object = config_maps.get(name).await?;
        let finalizers = object.metadata.finalizers.unwrap_or_default();
        Ok(finalizers
            .contains(&"kubewasm.dev/stamp".to_owned())
            .then_some(()))
    })
    .await
}

/// The finalizers of the ConfigMap `name`, or `None` once it is gone.
async fn finalizers(config_maps: &Api<ConfigMap>, name: &str) -> Result<Option<Vec<String>>> {
    let object = config_maps.get_opt(name).await?;
    Ok(object.map(|o| o.metadata.finalizers.unwrap_or_default()))
}

/// Waits until the ConfigMap `name` is gone, as `what` says.
async fn gone(config_maps: &Api<ConfigMap>, name: &str, what: &str) -> Result<()> {
    eventually(what, RELEASE, || async {
        Ok(finalizers(config_maps, name).await?.is_none().then_some(()))
    })
    .await
}

/// The stamp guest's module, copied to a folder of its own where a test can replace it, and a
/// host configuration running it for the objects of `namespace`.
fn replaceable_stamp(namespace: &str) -> Result<(TempDir, PathBuf, String)> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("stamp.wasm");
    install(&guest_wasm("stamp"), &path)?;
    let config = namespaced_config(&path, namespace);
    Ok((dir, path, config))
}

/// Moves the ConfigMap `name` out of the stamp guest's label selection.
async fn relabel(config_maps: &Api<ConfigMap>, name: &str) -> Result<()> {
    let elsewhere = json!({ "metadata": { "labels": { "kubewasm.dev/fixture": "elsewhere" } } });
    config_maps
        .patch(name, &PatchParams::default(), &Patch::Merge(&elsewhere))
        .await?;
    Ok(())
}

/// Waits until the ConfigMap `name` no longer carries the stamp guest's finalizer, and checks
/// that `finalize` was not called for it.
async fn released_unfinalized(config_maps: &Api<ConfigMap>, name: &str) -> Result<()> {
    eventually("the object released by the guest", WAIT, || async {
        let finalizers = finalizers(config_maps, name).await?.unwrap_or_default();
        Ok((!finalizers.contains(&"kubewasm.dev/stamp".to_owned())).then_some(()))
    })
    .await?;
    let object = config_maps.get(name).await?;
    let annotations = object.metadata.annotations.unwrap_or_default();
    anyhow::ensure!(
        !annotations.contains_key("kubewasm.dev/finalized-at"),
        "{name} was finalized though it was not deleted"
    );
    Ok(())
}

/// Copies `module` to `path` in one rename, as deployment tools replace files.
fn install(module: &Path, path: &Path) -> Result<()> {
    let staged = path.with_extension("staged");
    std::fs::copy(module, &staged)?;
    std::fs::rename(&staged, path)?;
    Ok(())
}

/// A finalizer of someone other than the guest, which keeps a finalized object for the test.
const HOLD: &str = "kubewasm.dev/hold";

/// How long a deleted object may stay Terminating once its guest has finalized it.
const RELEASE: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_guest_that_writes_its_own_object_in_finalize_lets_it_go() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("stamp").await?;
    let config_maps = Api::<ConfigMap>::namespaced(client, ns.name());
    with_host(ns.name(), &module_config("stamp", ns.name()), async |_| {
        create_finalized(&config_maps, "stamped").await?;

        config_maps
            .delete("stamped", &DeleteParams::default())
            .await?;
        // Each finalize changes the object: removing the finalizer with the resourceVersion read
        // before finalize would conflict, again and again.
        gone(&config_maps, "stamped", "the finalized object to be gone").await
    })
    .await
}

#[tokio::test]
async fn an_object_whose_finalize_keeps_failing_is_reported_in_the_log_and_the_metrics()
-> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("stuck").await?;
    let config_maps = Api::<ConfigMap>::namespaced(client, ns.name());
    let [port] = free_ports()?;
    let address = format!("127.0.0.1:{port}");
    let config = namespaced_config(&guest_wasm_with("stamp", &["stuck"]), ns.name());
    let args = ["--metrics-bind-address", address.as_str()];
    let finalizing = async |name: &str| -> Result<f64> {
        Ok(sum(&scrape(address.parse()?).await?, name, |_| true))
    };
    with_host_args(ns.name(), &config, &args, async |host| {
        create_finalized(&config_maps, "blocked").await?;
        config_maps
            .delete("blocked", &DeleteParams::default())
            .await?;

        eventually("the stuck object in the metrics", WAIT, || async {
            let objects = finalizing("kubewasm_guest_finalizing_objects").await?;
            let oldest = finalizing("kubewasm_guest_finalizing_oldest_seconds").await?;
            Ok((objects == 1.0 && oldest >= 2.0).then_some(()))
        })
        .await?;
        let log = host.log();
        let said = log.lines().any(|line| {
            line.contains("terminating for") && line.contains("the clean-up is blocked")
        });
        anyhow::ensure!(said, "no log line says why the object stays Terminating");

        // Released by hand: no longer counted.
        let release = json!({ "metadata": { "finalizers": null } });
        config_maps
            .patch("blocked", &PatchParams::default(), &Patch::Merge(&release))
            .await?;
        eventually("the released object out of the metrics", WAIT, || async {
            let objects = finalizing("kubewasm_guest_finalizing_objects").await?;
            Ok((objects == 0.0).then_some(()))
        })
        .await
    })
    .await
}

#[tokio::test]
async fn an_object_that_leaves_the_selection_is_released_without_finalize() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("leave").await?;
    let config_maps = Api::<ConfigMap>::namespaced(client, ns.name());
    let config = module_config("stamp", ns.name());
    with_host(ns.name(), &config, async |_| {
        create_finalized(&config_maps, "leaver").await?;
        relabel(&config_maps, "leaver").await?;
        released_unfinalized(&config_maps, "leaver").await?;

        create_finalized(&config_maps, "away").await
    })
    .await?;
    // It leaves while no host runs: the next one finds it, though its informer never lists it.
    relabel(&config_maps, "away").await?;
    with_host(ns.name(), &config, async |_| {
        released_unfinalized(&config_maps, "away").await
    })
    .await?;

    // Released, a deleted object goes at once.
    for name in ["leaver", "away"] {
        config_maps.delete(name, &DeleteParams::default()).await?;
        gone(&config_maps, name, "the released object to be gone").await?;
    }
    Ok(())
}

#[tokio::test]
async fn a_renamed_finalizer_replaces_the_old_one_and_the_new_module_finalizes() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("rename").await?;
    let config_maps = Api::<ConfigMap>::namespaced(client, ns.name());
    let (_dir, path, config) = replaceable_stamp(ns.name())?;
    with_host(ns.name(), &config, async |host| {
        create_finalized(&config_maps, "renamed").await?;
        // Deleted while the old finalizer's clean-up is blocked, and held by someone else too:
        // it still carries the old finalizer, and only that, when the rename comes.
        create_held(&config_maps, "deleting", &[HOLD]).await?;
        install(&guest_wasm_with("stamp", &["stuck"]), &path)?;
        eventually("the blocking module swapped in", WAIT, || async {
            Ok(host.log().contains("module swapped in place").then_some(()))
        })
        .await?;
        config_maps
            .delete("deleting", &DeleteParams::default())
            .await?;
        eventually("the finalize blocked", WAIT, || async {
            Ok(host.log().contains("the clean-up is blocked").then_some(()))
        })
        .await?;
        let waiting = finalizers(&config_maps, "deleting").await?;
        anyhow::ensure!(
            waiting == Some(vec![HOLD.to_owned(), "kubewasm.dev/stamp".to_owned()]),
            "the deleting object does not wait for the old finalizer: {waiting:?}"
        );

        install(&guest_wasm_with("stamp", &["renamed"]), &path)?;
        eventually(
            "the old finalizer replaced by the new one",
            WAIT,
            || async {
                let finalizers = finalizers(&config_maps, "renamed")
                    .await?
                    .unwrap_or_default();
                Ok((finalizers == ["kubewasm.dev/stamp-renamed"]).then_some(()))
            },
        )
        .await?;
        // The new module finalized it, and removed the old finalizer.
        eventually(
            "the deleting object finalized by the new module",
            WAIT,
            || async {
                let object = config_maps.get("deleting").await?;
                let stamped = object
                    .metadata
                    .annotations
                    .unwrap_or_default()
                    .contains_key("kubewasm.dev/finalized-at");
                let finalizers = object.metadata.finalizers.unwrap_or_default();
                Ok((stamped && finalizers == [HOLD]).then_some(()))
            },
        )
        .await?;

        config_maps
            .delete("renamed", &DeleteParams::default())
            .await?;
        gone(&config_maps, "renamed", "the finalized object to be gone").await
    })
    .await
}

#[tokio::test]
async fn an_unloaded_guests_finalizer_stays_reported_until_the_guest_is_loaded_again() -> Result<()>
{
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("unload").await?;
    let config_maps = Api::<ConfigMap>::namespaced(client, ns.name());
    let (_dir, path, config) = replaceable_stamp(ns.name())?;
    let [port] = free_ports()?;
    let address = format!("127.0.0.1:{port}");
    let args = ["--metrics-bind-address", address.as_str()];
    let metric = async |name: &str| -> Result<f64> {
        let labelled =
            |labels: &[(&str, &str)]| labels.contains(&("finalizer", "kubewasm.dev/stamp"));
        Ok(sum(&scrape(address.parse()?).await?, name, labelled))
    };
    with_host_args(ns.name(), &config, &args, async |host| {
        create_finalized(&config_maps, "kept").await?;
        std::fs::remove_file(&path)?;
        eventually("the guest unloaded", WAIT, || async {
            let unloads = sum(
                &scrape(address.parse()?).await?,
                "kubewasm_module_unloads_total",
                |_| true,
            );
            Ok((unloads == 1.0).then_some(()))
        })
        .await?;

        // The clean-up it promised is not skipped: deleted, the object waits for the guest.
        config_maps.delete("kept", &DeleteParams::default()).await?;
        eventually("the waiting object in the metrics", WAIT, || async {
            let carrying = metric("kubewasm_unloaded_finalizer_objects").await?;
            let terminating = metric("kubewasm_unloaded_finalizer_terminating_objects").await?;
            Ok((carrying == 1.0 && terminating == 1.0).then_some(()))
        })
        .await?;
        let waiting = finalizers(&config_maps, "kept").await?;
        anyhow::ensure!(
            waiting == Some(vec!["kubewasm.dev/stamp".to_owned()]),
            "the unloaded guest's finalizer was not kept: {waiting:?}"
        );
        let said = host.log().lines().any(|line| {
            line.contains("kept")
                && line.contains("kubewasm.dev/stamp")
                && line.contains("no longer loaded")
        });
        anyhow::ensure!(said, "no log line says why the object stays Terminating");

        // Loaded again, even with its finalizer renamed, the guest takes the old one over and
        // finalizes the object.
        install(&guest_wasm_with("stamp", &["renamed"]), &path)?;
        gone(&config_maps, "kept", "the finalized object to be gone").await?;
        eventually("the finalizer no longer reported", WAIT, || async {
            let text = scrape(address.parse()?).await?;
            Ok((!text.contains("kubewasm_unloaded_finalizer_objects{")).then_some(()))
        })
        .await
    })
    .await
}
