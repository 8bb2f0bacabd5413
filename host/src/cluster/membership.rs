//! Membership of a shard ring: each replica holds a Lease of its own, labelled with the ring's
//! name, and the ring's members are the holders whose Lease has not expired.
//!
//! Guarantees: a member's Lease is held with the leader election's rules (see
//! [`crate::cluster::leader`]), so a member that cannot renew stops before another replica may
//! count it gone; [`watch`] reports a member gone once its Lease is released, deleted, or has
//! not changed for its duration by this process's clock, and reports no member twice.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::watch as channel;
use tokio::time::Instant;

use crate::cluster::leader::{self, ElectionConfig, LeaseTimings};

/// The label naming the ring a membership Lease belongs to.
pub const RING_LABEL: &str = "shard.kubewasm.dev/ring";

/// The label that assigns an object to a member of `controller`'s ring:
/// `shard.kubewasm.dev/<controller>=<member>`.
pub fn shard_label(controller: &str) -> String {
    format!("shard.kubewasm.dev/{controller}")
}

/// The label that asks the member holding an object of `controller` to hand it over:
/// `drain.shard.kubewasm.dev/<controller>`. The member removes it with the shard label.
pub fn drain_label(controller: &str) -> String {
    format!("drain.shard.kubewasm.dev/{controller}")
}

/// How often expiries are checked between changes.
const TICK: Duration = Duration::from_millis(250);

/// This replica's name in rings: [`leader::replica_name`] as a label value (at most 54
/// characters of it), a `-` and 8 random hex digits.
pub fn member_name() -> String {
    let name: String = leader::replica_name()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(54)
        .collect();
    let name = name.trim_matches('-');
    let suffix = RandomState::new().hash_one(std::process::id()) as u32;
    if name.is_empty() {
        format!("kubewasm-{suffix:08x}")
    } else {
        format!("{name}-{suffix:08x}")
    }
}

/// The election of `member`'s own Lease in `ring`: `<ring>-<member>` in `namespace`.
pub fn election(
    namespace: &str,
    ring: &str,
    member: &str,
    timings: LeaseTimings,
) -> ElectionConfig {
    let mut config = ElectionConfig::new(namespace, format!("{ring}-{member}"), timings);
    config.identity = member.to_owned();
    config.labels = BTreeMap::from([(RING_LABEL.to_owned(), ring.to_owned())]);
    config
}

/// The live members of `ring` in `namespace`, kept up to date until the receiver is dropped.
pub fn watch(client: Client, namespace: &str, ring: &str) -> channel::Receiver<BTreeSet<String>> {
    let (sender, receiver) = channel::channel(BTreeSet::new());
    let api: Api<Lease> = Api::namespaced(client, namespace);
    let config = watcher::Config::default().labels(&format!("{RING_LABEL}={ring}"));
    let ring = ring.to_owned();
    tokio::spawn(async move {
        let events = watcher(api, config).default_backoff();
        let mut events = std::pin::pin!(events);
        let mut leases = Leases::default();
        let mut ticks = tokio::time::interval(TICK);
        loop {
            tokio::select! {
                event = events.next() => match event {
                    Some(Ok(event)) => leases.apply(event, Instant::now()),
                    Some(Err(error)) => tracing::debug!(%ring, %error, "watching membership Leases"),
                    None => return,
                },
                _ = ticks.tick() => {}
                () = sender.closed() => return,
            }
            let live = leases.live(Instant::now());
            sender.send_if_modified(|members| {
                let changed = *members != live;
                if changed {
                    tracing::info!(%ring, members = ?live, "ring members changed");
                    *members = live;
                }
                changed
            });
        }
    });
    receiver
}

/// Membership Leases by name, each with when its record was first seen.
#[derive(Default)]
struct Leases {
    seen: BTreeMap<String, (LeaseSpec, Instant)>,
    /// The Leases of a list in progress.
    listing: Option<BTreeMap<String, (LeaseSpec, Instant)>>,
}

impl Leases {
    fn apply(&mut self, event: watcher::Event<Lease>, now: Instant) {
        match event {
            watcher::Event::Init => self.listing = Some(BTreeMap::new()),
            watcher::Event::InitApply(lease) => {
                let name = lease.metadata.name.clone().unwrap_or_default();
                let spec = lease.spec.unwrap_or_default();
                let at = self.first_seen(&name, &spec, now);
                if let Some(listing) = &mut self.listing {
                    listing.insert(name, (spec, at));
                }
            }
            watcher::Event::InitDone => {
                if let Some(listing) = self.listing.take() {
                    self.seen = listing;
                }
            }
            watcher::Event::Apply(lease) => {
                let name = lease.metadata.name.clone().unwrap_or_default();
                let spec = lease.spec.unwrap_or_default();
                let at = self.first_seen(&name, &spec, now);
                self.seen.insert(name, (spec, at));
            }
            watcher::Event::Delete(lease) => {
                self.seen.remove(&lease.metadata.name.unwrap_or_default());
            }
        }
    }

    /// When `spec` was first seen as the record of `name`: now, unless it is unchanged.
    fn first_seen(&self, name: &str, spec: &LeaseSpec, now: Instant) -> Instant {
        match self.seen.get(name) {
            Some((seen, at)) if seen == spec => *at,
            _ => now,
        }
    }

    /// The holders of unexpired Leases.
    fn live(&self, now: Instant) -> BTreeSet<String> {
        self.seen
            .values()
            .filter(|(spec, at)| !leader::expired(spec, *at, now))
            .filter_map(|(spec, _)| spec.holder_identity.clone())
            .filter(|holder| !holder.is_empty())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn lease(name: &str, holder: &str, seconds: i32, renewals: i32) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                lease_duration_seconds: Some(seconds),
                lease_transitions: Some(renewals),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn members_are_holders_of_unexpired_leases() {
        let start = Instant::now();
        let mut leases = Leases::default();
        leases.apply(watcher::Event::Apply(lease("r-a", "a", 15, 0)), start);
        leases.apply(watcher::Event::Apply(lease("r-b", "b", 15, 0)), start);
        leases.apply(watcher::Event::Apply(lease("r-c", "", 1, 0)), start);
        assert_eq!(leases.live(start), BTreeSet::from(["a".into(), "b".into()]));
        // a renews; b does not.
        let later = start + Duration::from_secs(10);
        leases.apply(watcher::Event::Apply(lease("r-a", "a", 15, 1)), later);
        leases.apply(watcher::Event::Apply(lease("r-b", "b", 15, 0)), later);
        let expired = start + Duration::from_secs(15);
        assert_eq!(leases.live(expired), BTreeSet::from(["a".into()]));
        leases.apply(watcher::Event::Delete(lease("r-a", "a", 15, 1)), expired);
        assert!(leases.live(expired).is_empty());
    }

    #[test]
    fn member_names_are_label_values() {
        let name = member_name();
        assert!(name.len() <= 63, "{name}");
        assert!(
            crate::cluster::selector::validate_value(&name).is_ok(),
            "{name}"
        );
        assert!(crate::cluster::selector::is_dns1123_label(&name), "{name}");
    }
}
