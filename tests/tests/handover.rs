//! Handovers whose answer is lost, on the real control plane.
//!
//! The test plays the sharder: it holds the leader Lease of the ring and announces itself as a
//! member that leads and runs the `ledger` guest, so the one host never shards; the test labels
//! a source for the host's member and asks for it back with the drain label. The host reaches
//! the API server through a relay that loses every answer from just after the drain reached it
//! (the source's reconcile is held for 4 s, so that the handover is the host's next write):
//! the removal of the labels lands, but neither its answer nor the watch event of it arrives,
//! and then the host is cut off for a while, and watches again.
//!
//! 1. The host must not take the source's leaving its cache for a deletion: no reconcile of it
//!    runs once the drain was asked for.
//! 2. When the source is labelled for the host again while it is cut off, and etcd is compacted
//!    so that its watch is answered with 410 and it lists again (the leaving and the return are
//!    never seen), the host must take the source back and reconcile it.
//!
//! The API server runs with the watch cache off for ConfigMaps, so that a watch resumed from a
//! compacted revision is answered with 410.

use std::time::Duration;

use anyhow::{Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use kubewasm_tests::ledger::{self, word};
use kubewasm_tests::relay::Relay;
use kubewasm_tests::ring;
use kubewasm_tests::{HostProcess, WAIT, control_plane_with, eventually, module_config};
use serde_json::json;

const RING: &str = "handover-ring";
const LABEL: &str = "shard.kubewasm.dev/ledger";
const DRAIN: &str = "drain.shard.kubewasm.dev/ledger";
const SOURCE: &str = "source-0";
/// How long a held reconcile lasts.
const HOLD: Duration = Duration::from_secs(4);
/// What the host logs when a handover's write fails.
const FAILED: &str = "handing the key over failed";
/// What the host logs when a watch is answered with 410 Gone.
const EXPIRED: &str = "watch expired (410 Gone)";

/// The reconciles of the source the host's log records.
fn runs(host: &HostProcess) -> Result<usize> {
    let runs = ledger::runs(&host.log())?;
    Ok(runs.iter().filter(|r| r.source.ends_with(SOURCE)).count())
}

/// Sets the source's labels (a null removes one) and data.
async fn set(
    sources: &Api<ConfigMap>,
    labels: serde_json::Value,
    data: serde_json::Value,
) -> Result<()> {
    let patch = json!({ "metadata": { "labels": labels }, "data": data });
    sources
        .patch(SOURCE, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Waits until the source's mirror holds `value`.
async fn mirrored(sources: &Api<ConfigMap>, value: &str) -> Result<()> {
    eventually(
        &format!("the source mirrored with {value}"),
        WAIT,
        || async {
            let mirror = sources.get_opt(&format!("{SOURCE}-ledger")).await?;
            let held = mirror
                .and_then(|m| m.data)
                .and_then(|d| d.get("value").cloned());
            Ok((held.as_deref() == Some(value)).then_some(()))
        },
    )
    .await
}

/// Holds the next reconcile of the source for [`HOLD`] with `value`, asks for the source back
/// once that reconcile runs, and loses the host's answers from just after the drain reached
/// it for `lost`, then cuts it off for `down`. Returns once the labels are removed.
async fn hand_over_unanswered(
    sources: &Api<ConfigMap>,
    host: &HostProcess,
    relay: &Relay,
    value: &str,
    (lost, down): (Duration, Duration),
) -> Result<()> {
    let before = runs(host)?;
    let hold = HOLD.as_millis().to_string();
    set(
        sources,
        json!({}),
        json!({ "value": value, "holdMs": hold }),
    )
    .await?;
    eventually("the held reconcile to start", WAIT, || async {
        let started = host
            .log()
            .lines()
            .filter(|l| l.contains(" ledger ") && l.contains("event=start"))
            .filter(|l| word(l, "source=").is_some_and(|s| s.ends_with(SOURCE)))
            .count();
        Ok((started > before).then_some(()))
    })
    .await?;
    set(sources, json!({ DRAIN: "true" }), json!({})).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    relay.partition_at_next_request(lost, down);
    eventually("the host to remove the labels", WAIT, || async {
        let source = sources.get(SOURCE).await?;
        let labels = source.labels();
        Ok((!labels.contains_key(LABEL) && !labels.contains_key(DRAIN)).then_some(()))
    })
    .await
}

#[tokio::test]
async fn a_handover_whose_answer_is_lost_is_no_deletion_and_a_return_unseen_is_taken_back()
-> Result<()> {
    let plane = control_plane_with(&["--watch-cache-sizes=configmaps#0"]);
    let client = plane.client().await?;
    let ns = plane.namespace("handover").await?;
    // The test leads the ring and runs the ledger in it: the host never shards.
    let leases = Api::<Lease>::namespaced(client.clone(), ns.name());
    ring::lead(&leases, RING, "ledger").await?;
    let sources = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    let source: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": SOURCE, "labels": { "kubewasm.dev/fixture": "ledger" } },
        "data": { "value": "v0" },
    }))?;
    sources.create(&PostParams::default(), &source).await?;

    let relay = Relay::start(plane.kubeconfig()).await?;
    let config = module_config("ledger", ns.name());
    let args = [
        "--sharded",
        "--leader-election-namespace",
        ns.name(),
        "--leader-election-id",
        RING,
        "--leader-elect-lease-duration",
        "20s",
        "--leader-elect-renew-deadline",
        "15s",
        "--leader-elect-retry-period",
        "5s",
    ];
    let process = HostProcess::start_via(ns.name(), &config, relay.kubeconfig(), &args)?;
    let host = &process;
    let checked = async {
        let member = eventually("the host to join the ring", WAIT, || async {
            Ok(host.log().lines().find_map(|line| {
                line.contains("joined the shard ring")
                    .then(|| word(line, "member="))
                    .flatten()
            }))
        })
        .await?;
        set(&sources, json!({ LABEL: member }), json!({})).await?;
        mirrored(&sources, "v0").await?;

        // 1. The handover lands unanswered; the host lists again and sees the source gone.
        let lost = (HOLD, Duration::from_secs(2));
        hand_over_unanswered(&sources, host, &relay, "v1", lost).await?;
        let handed_over = runs(host)?;
        eventually("the partition to end", WAIT, || async {
            Ok(relay.healed().then_some(()))
        })
        .await?;
        eventually("the host to retry the handover", WAIT, || async {
            Ok(host.log().contains(FAILED).then_some(()))
        })
        .await?;
        // The host's watches back off for up to 4 s once cut off, then list.
        tokio::time::sleep(Duration::from_secs(10)).await;
        ensure!(
            runs(host)? == handed_over,
            "the host reconciled the source it handed over (as deleted?):\n{}",
            host.log()
        );
        eprintln!("a handover whose answer was lost: no reconcile after it");

        // 2. Given back while the host is cut off, and the watch compacted away.
        // A value of its own, so that the reconcile of the return is seen to end first.
        let back = json!({ "value": "v1b", "holdMs": "0" });
        set(&sources, json!({ LABEL: member }), back).await?;
        mirrored(&sources, "v1b").await?;
        let expired = host.log().matches(EXPIRED).count();
        let cut = (HOLD, Duration::from_secs(4));
        hand_over_unanswered(&sources, host, &relay, "v2", cut).await?;
        set(
            &sources,
            json!({ LABEL: member }),
            json!({ "value": "v3", "holdMs": "0" }),
        )
        .await?;
        plane.compact_etcd().await?;
        eventually("the partition to end", WAIT, || async {
            Ok(relay.healed().then_some(()))
        })
        .await?;
        eventually("the host's watch to be answered with 410", WAIT, || async {
            Ok((host.log().matches(EXPIRED).count() > expired).then_some(()))
        })
        .await?;
        mirrored(&sources, "v3").await?;
        let source = sources.get(SOURCE).await?;
        ensure!(
            source.labels().get(LABEL) == Some(&member),
            "the source is labelled for the host"
        );
        eprintln!("a return the host never saw: taken back and reconciled");
        anyhow::Ok(())
    };
    if let Err(error) = checked.await {
        eprintln!("--- the host's log:\n{}", host.log());
        return Err(error);
    }
    // Stopped while this task keeps relaying: it releases its Lease through the relay.
    host.signal("TERM")?;
    eventually("the host to release its Lease", WAIT, || async {
        Ok(host
            .log()
            .contains("released the membership Lease")
            .then_some(()))
    })
    .await
    .map(|_| ())
}
