//! Membership of a shard ring: each replica holds a Lease of its own, labelled with the ring's
//! name, and the ring's members are the holders whose Lease has not expired.
//!
//! Guarantees: a member's Lease is held with the leader election's rules (see
//! [`crate::cluster::leader`]), so a member that cannot renew stops before another replica may
//! count it gone; [`watch`] reports a member gone once its Lease is released, deleted, or has
//! not changed for its duration by this process's clock and a read from the API server shows
//! the version the watch last showed (a stalled watch never makes a live member look gone), and
//! reports no member twice. A Lease left unchanged for twice its duration (a replica gone for
//! good), or 30 s if it names the children its member left, is deleted, at the version seen: a
//! Lease renewed meanwhile stays.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::{DeleteParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::watch as channel;
use tokio::time::Instant;

use crate::cluster::leader::{self, ElectionConfig, LeaseTimings};
use crate::shard::roster;

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

/// A member of a ring, as its Lease says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Member {
    /// False once its Lease is known to have expired (a read confirmed it): it holds nothing.
    pub live: bool,
    /// The guests it runs with their informers synced (see [`crate::shard::roster`]).
    pub guests: BTreeSet<String>,
    /// Whether it leads, and so shards every guest it runs.
    pub leads: bool,
}

/// The members of a ring by name: the live ones, and those whose Lease a read confirmed expired.
pub type Members = BTreeMap<String, Member>;

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

/// The name of `member`'s own Lease in `ring`.
pub fn lease_name(ring: &str, member: &str) -> String {
    format!("{ring}-{member}")
}

/// The election of `member`'s own Lease in `ring`: [`lease_name`] in `namespace`.
pub fn election(
    namespace: &str,
    ring: &str,
    member: &str,
    timings: LeaseTimings,
) -> ElectionConfig {
    let mut config = ElectionConfig::new(namespace, lease_name(ring, member), timings);
    config.identity = member.to_owned();
    config.labels = BTreeMap::from([(RING_LABEL.to_owned(), ring.to_owned())]);
    config
}

/// The live members of `ring` in `namespace`, kept up to date until the receiver is dropped.
pub fn watch(client: Client, namespace: &str, ring: &str) -> channel::Receiver<Members> {
    let (sender, receiver) = channel::channel(Members::new());
    let api: Api<Lease> = Api::namespaced(client, namespace);
    let config = watcher::Config::default().labels(&format!("{RING_LABEL}={ring}"));
    let ring = ring.to_owned();
    tokio::spawn(async move {
        let events = watcher(api.clone(), config).default_backoff();
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
            for name in leases.unconfirmed(Instant::now()) {
                // A watch that stalled shows an old record: only a read tells a Lease expired.
                match api.get_opt(&name).await {
                    Ok(Some(lease)) => leases.confirm(&name, lease, Instant::now()),
                    Ok(None) => {
                        leases.seen.remove(&name);
                    }
                    Err(error) => {
                        tracing::warn!(%ring, lease = %name, %error, "reading a membership Lease that looks expired");
                        leases.retry_later(&name, Instant::now());
                    }
                }
            }
            for (name, version) in leases.abandoned(Instant::now()) {
                let preconditions = Preconditions {
                    resource_version: Some(version),
                    uid: None,
                };
                let params = DeleteParams::default().preconditions(preconditions);
                // Forgotten only once gone: a Lease seen again after a relist would count as
                // live for another duration. One that may not be deleted is left alone.
                match api.delete(&name, &params).await {
                    Ok(_) => {
                        tracing::info!(%ring, lease = %name, "deleted the Lease of a member gone");
                        leases.seen.remove(&name);
                    }
                    Err(kube::Error::Api(status)) if status.code == 404 => {
                        leases.seen.remove(&name);
                    }
                    // Changed meanwhile: its watch event brings the new record.
                    Err(kube::Error::Api(status)) if status.code == 409 => {}
                    Err(error) => {
                        tracing::warn!(%ring, lease = %name, %error, "deleting the Lease of a member gone");
                        leases.kept.insert(name);
                    }
                }
            }
            let live = leases.members(Instant::now());
            sender.send_if_modified(|members| {
                let changed = *members != live;
                if changed {
                    let names: Vec<_> = live
                        .iter()
                        .filter(|(_, m)| m.live)
                        .map(|(n, _)| n)
                        .collect();
                    tracing::info!(%ring, members = ?names, "ring members changed");
                    *members = live;
                }
                changed
            });
        }
    });
    receiver
}

/// How long a Lease that names the children its member left stays at least, unchanged, before
/// it is deleted: sharders read it before they move that member's keys.
const LEFT_KEPT: Duration = Duration::from_secs(30);

/// How long after a failed read a Lease that looks expired is read again.
const CONFIRM_RETRY: Duration = Duration::from_secs(1);

/// A membership Lease's record as the watch or a read showed it.
#[derive(Debug, Clone)]
struct Seen {
    spec: LeaseSpec,
    /// What its annotations announce.
    member: Member,
    /// When this record was first seen.
    at: Instant,
    version: String,
    /// Whether a read showed this version once it had expired: the member is gone.
    confirmed: bool,
    /// When the last read of it failed.
    failed_at: Option<Instant>,
    /// Whether it names the children of the keys its member held as it left a guest.
    names_left: bool,
}

/// Membership Leases by name.
#[derive(Default)]
struct Leases {
    seen: BTreeMap<String, Seen>,
    /// The Leases of a list in progress.
    listing: Option<BTreeMap<String, Seen>>,
    /// Leases whose deletion failed other than by a conflict: not tried again.
    kept: BTreeSet<String>,
}

impl Leases {
    fn apply(&mut self, event: watcher::Event<Lease>, now: Instant) {
        match event {
            watcher::Event::Init => self.listing = Some(BTreeMap::new()),
            watcher::Event::InitApply(lease) => {
                let (name, seen) = self.seen_now(lease, now);
                if let Some(listing) = &mut self.listing {
                    listing.insert(name, seen);
                }
            }
            watcher::Event::InitDone => {
                if let Some(listing) = self.listing.take() {
                    self.seen = listing;
                }
            }
            watcher::Event::Apply(lease) => {
                let (name, seen) = self.seen_now(lease, now);
                self.seen.insert(name, seen);
            }
            watcher::Event::Delete(lease) => {
                self.seen.remove(&lease.metadata.name.unwrap_or_default());
            }
        }
    }

    /// The name of `lease`, and its record with when it was first seen: now, unless the record
    /// is unchanged.
    fn seen_now(&self, lease: Lease, now: Instant) -> (String, Seen) {
        let name = lease.metadata.name.unwrap_or_default();
        let version = lease.metadata.resource_version.unwrap_or_default();
        let spec = lease.spec.unwrap_or_default();
        let annotations = lease.metadata.annotations.as_ref();
        let (guests, leads) = roster::announced(annotations);
        let names_left = !roster::left(annotations).is_empty();
        let member = Member {
            live: true,
            guests,
            leads,
        };
        let seen = match self.seen.get(&name) {
            Some(seen) if seen.spec == spec => Seen {
                // A confirmation holds for the version it read.
                confirmed: seen.confirmed && seen.version == version,
                version,
                member,
                names_left,
                ..seen.clone()
            },
            _ => Seen {
                spec,
                member,
                at: now,
                version,
                confirmed: false,
                failed_at: None,
                names_left,
            },
        };
        (name, seen)
    }

    /// The holders of Leases, each live unless known to have expired: expired by the watch and
    /// confirmed by a read.
    fn members(&self, now: Instant) -> Members {
        let member = |seen: &Seen| Member {
            live: !seen.confirmed || !leader::expired(&seen.spec, seen.at, now),
            ..seen.member.clone()
        };
        self.seen
            .values()
            .filter_map(|seen| Some((seen.spec.holder_identity.clone()?, member(seen))))
            .filter(|(holder, _)| !holder.is_empty())
            .collect()
    }

    /// The names of held Leases expired by the watch that a read has yet to confirm, except
    /// those whose last read failed less than [`CONFIRM_RETRY`] ago.
    fn unconfirmed(&self, now: Instant) -> Vec<String> {
        self.seen
            .iter()
            .filter(|(_, seen)| {
                !seen.confirmed
                    && seen
                        .spec
                        .holder_identity
                        .as_deref()
                        .is_some_and(|h| !h.is_empty())
                    && leader::expired(&seen.spec, seen.at, now)
                    && seen.failed_at.is_none_or(|at| now >= at + CONFIRM_RETRY)
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Takes in a read of the Lease `name`: the same version as seen confirms it expired,
    /// another is a new record.
    fn confirm(&mut self, name: &str, lease: Lease, now: Instant) {
        let version = lease
            .metadata
            .resource_version
            .as_deref()
            .unwrap_or_default();
        match self.seen.get_mut(name) {
            Some(seen) if seen.version == version => seen.confirmed = true,
            _ => {
                let (name, seen) = self.seen_now(lease, now);
                self.seen.insert(name, seen);
            }
        }
    }

    /// Notes that a read of the Lease `name` failed at `now`.
    fn retry_later(&mut self, name: &str, now: Instant) {
        if let Some(seen) = self.seen.get_mut(name) {
            seen.failed_at = Some(now);
        }
    }

    /// The names and versions of Leases unchanged for twice their duration (at least 2 s, and
    /// [`LEFT_KEPT`] when they name the children left by their member).
    fn abandoned(&self, now: Instant) -> Vec<(String, String)> {
        self.seen
            .iter()
            .filter(|(name, _)| !self.kept.contains(*name))
            .filter(|(_, seen)| {
                let seconds = seen.spec.lease_duration_seconds.unwrap_or(0).max(1);
                let twice = Duration::from_secs(2 * u64::try_from(seconds).unwrap_or(1));
                let kept = if seen.names_left {
                    twice.max(LEFT_KEPT)
                } else {
                    twice
                };
                now >= seen.at + kept
            })
            .map(|(name, seen)| (name.clone(), seen.version.clone()))
            .collect()
    }
}

/// Whether `member` shards `guest` while the members are `members` (see [`sharder_of`]).
pub fn shards(members: &Members, guest: &str, member: &str) -> bool {
    sharder_of(members, guest).as_deref() == Some(member)
}

/// The member that shards `guest`: the one that leads if it announces the guest, else the
/// first of the guest's ring. Every member decides by this rule on the Leases it has seen.
pub fn sharder_of(members: &Members, guest: &str) -> Option<String> {
    let ring = ring_of(members, guest);
    let leader = (ring.iter()).find(|name| members.get(*name).is_some_and(|m| m.leads));
    leader.or(ring.first()).cloned()
}

/// The members of `guest`'s ring: the live ones that announce it.
pub fn ring_of(members: &Members, guest: &str) -> BTreeSet<String> {
    members
        .iter()
        .filter(|(_, m)| m.live && m.guests.contains(guest))
        .map(|(name, _)| name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn holders(members: Members) -> BTreeSet<String> {
        (members.into_iter())
            .filter_map(|(name, member)| member.live.then_some(name))
            .collect()
    }

    /// A Lease record; each renewal is a new version.
    fn lease(name: &str, holder: &str, seconds: i32, renewals: i32) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some(renewals.to_string()),
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
        assert_eq!(
            holders(leases.members(start)),
            BTreeSet::from(["a".into(), "b".into()])
        );
        // a renews; b does not.
        let later = start + Duration::from_secs(10);
        leases.apply(watcher::Event::Apply(lease("r-a", "a", 15, 1)), later);
        leases.apply(watcher::Event::Apply(lease("r-b", "b", 15, 0)), later);
        let expired = start + Duration::from_secs(15);
        leases.confirm("r-b", lease("r-b", "b", 15, 0), expired);
        assert_eq!(
            holders(leases.members(expired)),
            BTreeSet::from(["a".into()])
        );
        let names =
            |at| -> Vec<String> { leases.abandoned(at).into_iter().map(|(n, _)| n).collect() };
        assert_eq!(names(expired), ["r-c"], "a released Lease, after 2 s");
        let abandoned = start + Duration::from_secs(30);
        let names: Vec<_> = leases
            .abandoned(abandoned)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            names,
            ["r-b", "r-c"],
            "a released Lease and one not renewed for 30 s"
        );
        leases.apply(watcher::Event::Delete(lease("r-a", "a", 15, 1)), expired);
        assert!(holders(leases.members(expired)).is_empty());
    }

    #[test]
    fn a_released_lease_naming_the_children_its_member_left_is_kept_for_sharders_to_read() {
        let start = Instant::now();
        let mut leases = Leases::default();
        let mut released = lease("r-d", "", 1, 3);
        let note = format!("{}g", roster::LEFT_ANNOTATIONS);
        let value = "team:Pod.v1=9".to_owned();
        released.metadata.annotations = Some(BTreeMap::from([(note, value)]));
        leases.apply(watcher::Event::Apply(released), start);
        assert!(leases.abandoned(start + Duration::from_secs(2)).is_empty());
        assert_eq!(leases.abandoned(start + LEFT_KEPT).len(), 1);
    }

    #[test]
    fn a_lease_that_looks_expired_counts_gone_only_once_a_read_shows_the_same_version() {
        let start = Instant::now();
        let mut leases = Leases::default();
        leases.apply(watcher::Event::Apply(lease("r-b", "b", 15, 0)), start);
        let expired = start + Duration::from_secs(15);
        let b = BTreeSet::from(["b".to_owned()]);
        assert_eq!(
            holders(leases.members(expired)),
            b,
            "the watch may have stalled"
        );
        assert_eq!(leases.unconfirmed(expired), ["r-b"]);
        // The read shows a renewal the watch has not: b is live for another duration.
        leases.confirm("r-b", lease("r-b", "b", 15, 1), expired);
        assert!(leases.unconfirmed(expired).is_empty());
        assert_eq!(
            holders(leases.members(expired + Duration::from_secs(14))),
            b
        );
        let later = expired + Duration::from_secs(15);
        assert_eq!(leases.unconfirmed(later), ["r-b"]);
        // A failed read keeps b and waits before reading again.
        leases.retry_later("r-b", later);
        assert!(leases.unconfirmed(later).is_empty());
        assert_eq!(holders(leases.members(later)), b);
        let retry = later + CONFIRM_RETRY;
        assert_eq!(leases.unconfirmed(retry), ["r-b"]);
        leases.confirm("r-b", lease("r-b", "b", 15, 1), retry);
        assert!(holders(leases.members(retry)).is_empty());
        assert!(leases.unconfirmed(retry).is_empty());
        // The watch catching up with the version read changes nothing.
        leases.apply(watcher::Event::Apply(lease("r-b", "b", 15, 1)), retry);
        assert!(holders(leases.members(retry)).is_empty());
    }

    #[test]
    fn a_member_runs_the_guests_its_lease_announces() {
        let now = Instant::now();
        let mut leases = Leases::default();
        let mut record = lease("r-a", "a", 15, 0);
        leases.apply(watcher::Event::Apply(record.clone()), now);
        let live = Member {
            live: true,
            ..Member::default()
        };
        assert_eq!(leases.members(now)["a"], live);
        record.metadata.annotations = Some(BTreeMap::from([(
            roster::GUESTS_ANNOTATION.to_owned(),
            "g1,g2".to_owned(),
        )]));
        record.metadata.resource_version = Some("7".into());
        leases.apply(watcher::Event::Apply(record), now + Duration::from_secs(14));
        let member = &leases.members(now + Duration::from_secs(14))["a"];
        assert_eq!(member.guests, BTreeSet::from(["g1".into(), "g2".into()]));
        assert!(
            !leases.unconfirmed(now + Duration::from_secs(15)).is_empty(),
            "an announcement is no renewal"
        );
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
