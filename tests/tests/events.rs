//! Events: a guest that records the same event on every reconcile keeps one Event object whose
//! series counts the repeats, as client-go's event recorder does.

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use kubewasm_tests::{WAIT, control_plane, eventually, guest_wasm_with, mirrored, with_host};

#[tokio::test]
async fn an_event_recorded_on_every_reconcile_is_one_event_with_a_count() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("events").await?;
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    let events = Api::<Event>::namespaced(client.clone(), ns.name());
    let config = format!(
        "modules:\n  - path: {}\n    namespaces: [{}]\n    resyncSeconds: 1\n",
        guest_wasm_with("mirror", &["events"]).display(),
        ns.name()
    );
    with_host(ns.name(), &config, async |_| {
        mirrored(&config_maps, "source").await?;
        let mirrored_events = async || -> Result<Vec<Event>> {
            let all = events.list(&ListParams::default()).await?.items;
            Ok(all
                .into_iter()
                .filter(|e| {
                    e.reason.as_deref() == Some("Mirrored")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("source")
                })
                .collect())
        };
        // A reconcile a second: the series is written at its 2nd, 4th and 8th occurrence.
        let count = eventually("the event's series to count 8", WAIT, || async {
            let found = mirrored_events().await?;
            let count = found
                .iter()
                .filter_map(|e| e.series.as_ref().map(|s| s.count))
                .max();
            Ok(count.filter(|c| *c >= 8).map(|c| (c, found.len())))
        })
        .await?;
        let found = mirrored_events().await?;
        anyhow::ensure!(
            found.len() == 1,
            "{} Event objects for one repeated event (series count {})",
            found.len(),
            count.0
        );
        let event = found.first().context("one event")?;
        anyhow::ensure!(event.note.as_deref() == Some("the mirror is up to date"));
        Ok(())
    })
    .await
}
