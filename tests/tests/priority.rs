//! Priority lanes: keys of an initial list wait behind real changes, as in controller-runtime's
//! priority queue, so one object changed while a host works through a backlog is reconciled
//! next rather than after the whole backlog.

use anyhow::Result;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, PostParams};
use kubewasm_tests::{WAIT, control_plane, eventually, module_config, with_host};
use serde_json::json;

const BACKLOG: usize = 1500;

fn source(name: &str) -> Result<ConfigMap> {
    Ok(serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "kubewasm.dev/fixture": "mirror" } },
        "data": { "value": name },
    }))?)
}

async fn mirrors(config_maps: &Api<ConfigMap>) -> Result<usize> {
    let all = config_maps.list(&ListParams::default()).await?.items;
    let mirrors = all.iter().filter(|c| {
        c.metadata
            .name
            .as_deref()
            .is_some_and(|n| n.ends_with("-mirror"))
    });
    Ok(mirrors.count())
}

#[tokio::test]
async fn a_change_is_reconciled_before_the_backlog_of_the_initial_list() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("priority").await?;
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    futures::stream::iter(0..BACKLOG)
        .map(|i| {
            let config_maps = config_maps.clone();
            async move {
                let source = source(&format!("listed-{i}"))?;
                config_maps.create(&PostParams::default(), &source).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<()>()
        .await?;
    // One worker: the backlog is worked through one key at a time.
    let config = format!(
        "{}    maxConcurrency: 1\n",
        module_config("mirror", ns.name())
    );
    with_host(ns.name(), &config, async |_| {
        eventually("the host to start on the backlog", WAIT, || async {
            Ok((mirrors(&config_maps).await? > 0).then_some(()))
        })
        .await?;
        config_maps
            .create(&PostParams::default(), &source("changed")?)
            .await?;
        eventually("the changed source to be mirrored", WAIT, || async {
            Ok(config_maps.get_opt("changed-mirror").await?)
        })
        .await?;
        let done = mirrors(&config_maps).await?;
        eprintln!("the change was mirrored after {done} of {BACKLOG} listed sources");
        anyhow::ensure!(
            done < BACKLOG / 2,
            "the change waited behind the initial list: mirrored after {done} of {BACKLOG}"
        );
        Ok(())
    })
    .await
}
