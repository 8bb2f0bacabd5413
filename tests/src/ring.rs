//! A test that plays a shard ring's leader and sharder: it holds the ring's leader Lease and
//! a membership Lease that announces the guests and says it leads, so that a host in the ring
//! never shards them, and the test labels the objects itself.

use std::collections::BTreeMap;

use anyhow::Result;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;

/// A Lease held for an hour by `holder`; a member of `ring` announcing `guests` if given.
fn lease(name: &str, holder: &str, member: Option<(&str, &str)>) -> Lease {
    let now = MicroTime(Timestamp::now());
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: member.map(|(ring, _)| {
                BTreeMap::from([("shard.kubewasm.dev/ring".to_owned(), ring.to_owned())])
            }),
            annotations: member.map(|(_, guests)| {
                BTreeMap::from([
                    ("shard.kubewasm.dev/guests".to_owned(), guests.to_owned()),
                    ("shard.kubewasm.dev/leads".to_owned(), "true".to_owned()),
                ])
            }),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            lease_duration_seconds: Some(3600),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            ..LeaseSpec::default()
        }),
    }
}

/// Makes the test the leader of `ring`, in the namespace of `leases`, as a member named `test`
/// that announces `guests` (comma-separated).
pub async fn lead(leases: &Api<Lease>, ring: &str, guests: &str) -> Result<()> {
    let params = PostParams::default();
    leases.create(&params, &lease(ring, "test", None)).await?;
    let member = lease(&format!("{ring}-test"), "test", Some((ring, guests)));
    leases.create(&params, &member).await?;
    Ok(())
}
