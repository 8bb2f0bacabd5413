//! Sharding: several replicas share each guest's keys. Every replica holds a membership Lease
//! (see [`crate::shard::membership`]) that announces the guests it runs with their informers
//! synced (see [`crate::shard::roster`]): a guest's ring is the live members that announce it.
//! The sharder of a guest runs on the member that leads if it announces the guest, else on the
//! first member of the guest's ring (every member decides by the same rule on the Leases it
//! has seen; two may shard at once while their views differ, which the guarantees below
//! survive); it assigns each primary object to a member of the ring by
//! consistent hashing of its key (see [`crate::shard::ring`]) through the label
//! `shard.kubewasm.dev/<guest>=<member>`, and labels each object a primary controls like its
//! owner. A replica watches only the objects labelled for it.
//!
//! Handover, for a key K held by member A that the ring now gives to B:
//! 1. the sharder adds `drain.shard.kubewasm.dev/<guest>` to K;
//! 2. A sees it, and the worker that dequeues K (never while another of A's workers holds it)
//!    removes both labels instead of reconciling: A is done with K, and forgets it;
//! 3. the sharder sees K unassigned, waits (5 s at most) until its watches have listed and shown
//!    the children A named on K as it removed the labels, and labels K's children for B (a
//!    child labelled already on condition that its uid, controller owner and shard label are as
//!    seen, so that other changes of it, as kubelet's, never hold the relabel back); once its
//!    watch shows every child labelled so (a write that met a change is decided again on the
//!    next event), it labels K itself, naming the highest version of its children of each
//!    owned kind (see [`crate::shard::children`]);
//! 4. B's watch delivers K, and B reconciles it once its own watches have shown those versions,
//!    so that it finds every child in its cache.
//!
//! A member whose Lease expires or is released (it stopped after its reconciles ended), or that
//! withdrew the guest (its controller of the guest stopped), holds nothing: its keys are
//! labelled for their new members without drain, once this sharder's watches show the children
//! it named on its Lease as it left (5 s at most, as in step 3). A holder out of the ring whose
//! expiry the Leases seen have not confirmed is taken for gone only once a read of its Lease
//! shows it gone, released or not announcing the guest: Leases seen late never move a key from
//! under a live holder. A key is never labelled or drained for a member out of its guest's
//! ring.
//!
//! Guarantees: every label write of the sharder names the `resourceVersion` it decided on, or
//! for a child's relabel, the uid, controller owner and shard label, so it never acts on a
//! state it has not seen; a key is labelled for a member only while it has no
//! live holder, so no two members hold it; an unassigned key is assigned as soon as the sharder
//! sees it and the ring has a member.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::stream::SelectAll;
use futures::{FutureExt, StreamExt, stream};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;
use kube::api::{DynamicObject, GroupVersionKind};
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cluster::cache::ObjectKey;
use crate::cluster::resources::Resources;
use crate::cluster::selection::Selection;
use crate::shard::children::{self, Left, Seen, Shown};
use crate::shard::membership::{self, Members, ring_of, shards};
use crate::shard::retries::{Retries, sleep_until};
use crate::shard::ring::Ring;
use crate::shard::roster::{self, Roster, holds_nothing};
use crate::shard::stats::ShardStats;
use crate::shard::watches::{self, Tagged};
use crate::shard::write::{AsSeen, Edit, Sent};

/// Label writes in flight at once.
const WRITES_AT_ONCE: usize = 32;

/// How long a key handed over waits for this sharder's watches to show the children its holder
/// named, at most.
const HOLDER_WAIT: Duration = Duration::from_secs(5);

/// How long a drain may wait for its holder before it counts as stuck.
const STUCK: Duration = Duration::from_secs(60);

/// A replica's place in a shard ring.
#[derive(Clone)]
pub struct Sharded {
    /// Its member name.
    pub member: String,
    /// The ring's members.
    pub members: watch::Receiver<Members>,
    /// The guests this member announces.
    pub roster: Arc<Roster>,
    /// The membership Leases, each named `<ring>-<member>`, read to confirm that a holder is
    /// gone or no longer runs a guest.
    pub leases: Api<Lease>,
    /// The ring's name.
    pub ring: String,
}

/// The guest a sharder shards.
pub struct Guest {
    /// Its name.
    pub name: String,
    /// Its primary selections, as declared.
    pub primaries: Vec<Selection>,
    /// Its owned kinds, in each namespace it runs in.
    pub owned: Vec<Selection>,
}

/// The primary kind, and whether it is namespaced.
struct Primary {
    kind: GroupVersionKind,
    namespaced: bool,
}

impl Primary {
    /// Whether `owner` names an object of this kind, whatever its version.
    fn owns(&self, owner: &OwnerReference) -> bool {
        let group = owner
            .api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group);
        owner.kind == self.kind.kind && group == self.kind.group
    }
}

/// One object's labels of the ring, and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Labels {
    shard: Option<String>,
    drain: bool,
    version: String,
    /// The versions named in the annotation of the key's children, if any.
    children: Option<Seen>,
}

/// A child object: its labels, the key of its controller owner of the primary kind, and what
/// a relabel is conditioned on.
#[derive(Debug, Clone)]
struct Child {
    labels: Labels,
    owner: Option<ObjectKey>,
    /// Its uid, and the place and uid of its controller owner among its owners.
    identity: Option<(String, Option<(usize, String)>)>,
}

impl Child {
    /// What a relabel of the child holds on: the child as seen, if it has a shard label.
    fn as_seen(&self) -> Option<AsSeen> {
        let (uid, controller) = self.identity.clone()?;
        Some(AsSeen {
            uid,
            controller,
            shard: self.labels.shard.clone()?,
        })
    }
}

/// Where an object was seen: a primary selection or an owned one, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Source {
    Primary(usize),
    Owned(usize),
}

/// Shards `guest` while this replica is its sharder (see [`membership::sharder_of`]), until `stop` is
/// cancelled.
pub async fn run(
    guest: Guest,
    resources: Arc<Resources>,
    mut sharded: Sharded,
    stats: Arc<ShardStats>,
    stop: CancellationToken,
) {
    loop {
        if !until_sharder(&guest.name, &mut sharded, &stop).await {
            return;
        }
        let started = Sharder::start(&guest, &resources, sharded.clone(), &stats, &stop).await;
        let Some(mut sharder) = started else {
            return;
        };
        tracing::info!(guest = %guest.name, "sharding");
        loop {
            if !sharder.wait().await {
                return;
            }
            if !sharder.catch_up() {
                tracing::info!(guest = %guest.name, "no longer sharding: another member does");
                break;
            }
            sharder.write().await;
            sharder.count_stuck();
        }
    }
}

/// Waits until this replica shards `guest`: `false` when `stop` is cancelled first or the
/// members are no longer published.
async fn until_sharder(guest: &str, sharded: &mut Sharded, stop: &CancellationToken) -> bool {
    loop {
        if shards(&sharded.members.borrow_and_update(), guest, &sharded.member) {
            return true;
        }
        tokio::select! {
            changed = sharded.members.changed() => if changed.is_err() { return false },
            () = stop.cancelled() => return false,
        }
    }
}

/// The events of one selection's metadata watch, each with where it was seen.
type Events = Tagged<Source>;

/// The sharder of one guest, once it watches every selection of the guest.
struct Sharder {
    /// The guest's name.
    guest: String,
    resources: Arc<Resources>,
    /// This replica's place in the ring: the members, and the Leases to read.
    sharded: Sharded,
    stats: Arc<ShardStats>,
    stop: CancellationToken,
    events: SelectAll<Events>,
    /// The kind of each source.
    kinds: HashMap<Source, GroupVersionKind>,
    state: State,
}

impl Sharder {
    /// Resolves the kind of every selection of `guest`, primaries first, and watches it.
    /// `None` when `stop` is cancelled first, or when the guest has no primary selection.
    async fn start(
        guest: &Guest,
        resources: &Arc<Resources>,
        sharded: Sharded,
        stats: &Arc<ShardStats>,
        stop: &CancellationToken,
    ) -> Option<Self> {
        let mut streams = Vec::new();
        let sources = guest
            .primaries
            .iter()
            .enumerate()
            .map(|(i, s)| (Source::Primary(i), s))
            .chain(
                guest
                    .owned
                    .iter()
                    .enumerate()
                    .map(|(i, s)| (Source::Owned(i), s)),
            );
        let mut kinds = HashMap::new();
        let mut primary = None;
        for (source, selection) in sources {
            let (resource, namespaced) =
                watches::resolve(&guest.name, resources, &selection.kind, stop).await?;
            if matches!(source, Source::Primary(_)) {
                primary = Some(Primary {
                    kind: selection.kind.clone(),
                    namespaced,
                });
            }
            let client = resources.client().clone();
            streams.push(watches::events(
                client, &resource, namespaced, selection, source,
            ));
            kinds.insert(source, selection.kind.clone());
        }
        let primary = primary?;
        let owned = guest.owned.clone();
        Some(Self {
            guest: guest.name.clone(),
            resources: resources.clone(),
            sharded,
            stats: stats.clone(),
            stop: stop.clone(),
            events: stream::select_all(streams),
            kinds,
            state: State::new(&guest.name, primary, owned),
        })
    }

    /// Waits for an event, a change of the ring's members, or, while writes failed, the retry
    /// pause; applies the event. `false` when the sharder is to end: `stop` is cancelled, the
    /// members are no longer published, or the watches ended.
    async fn wait(&mut self) -> bool {
        tokio::select! {
            event = self.events.next() => match event {
                Some((source, Ok(event))) => self.state.apply(source, event),
                Some((_, Err(error))) => tracing::debug!(guest = %self.guest, %error, "sharder: watching"),
                None => return false,
            },
            changed = self.sharded.members.changed() => if changed.is_err() { return false },
            () = sleep_until(self.state.next_due()) => {}
            () = sleep_until(self.state.next_stuck()) => {}
            () = self.stop.cancelled() => return false,
        }
        true
    }

    /// Takes the guest's ring as it is now, then every event that is ready; `false` when this
    /// replica no longer shards the guest.
    fn catch_up(&mut self) -> bool {
        let members = self.sharded.members.borrow_and_update();
        if !shards(&members, &self.guest, &self.sharded.member) {
            return false;
        }
        self.state.ring(&members, &self.guest, &self.stats);
        drop(members);
        // Take what else is ready before writing.
        while let Some(Some((source, event))) = self.events.next().now_or_never() {
            if let Ok(event) = event {
                self.state.apply(source, event);
            }
        }
        true
    }

    /// Decides and sends the label writes, children first; a failed write's object is decided
    /// again after its backoff, one written or left to the next event ends its backoff.
    async fn write(&mut self) {
        loop {
            // Children first: a key's new member finds them labelled for it when it gets it.
            let (children, keys) = self.state.decide(&self.stats);
            self.send(children, keys).await;
            // Holders out of the ring whose Lease a read shows gone: their keys move now.
            if !self.confirm().await {
                return;
            }
        }
    }

    /// Reads the Lease of each holder out of the guest's ring that the Leases seen do not
    /// show gone; true when one shows it gone, or no longer running the guest.
    async fn confirm(&mut self) -> bool {
        let mut confirmed = false;
        for holder in std::mem::take(&mut self.state.unsure) {
            let name = membership::lease_name(&self.sharded.ring, &holder);
            match self.sharded.leases.get_opt(&name).await {
                Ok(lease) if holds_nothing(lease.as_ref(), &holder, &self.guest) => {
                    tracing::info!(guest = %self.guest, %holder, "sharder: a holder out of the ring is gone, or no longer runs the guest");
                    let annotations = lease.as_ref().and_then(|l| l.metadata.annotations.as_ref());
                    let left = roster::left(annotations).remove(&self.guest);
                    if let Some(named) = left.as_ref().and_then(Left::value) {
                        tracing::info!(guest = %self.guest, %holder, children = %named, "sharder: the holder left naming the children of its keys; they move once shown");
                    }
                    self.state.gone(&holder, left);
                    confirmed = true;
                }
                // The Leases seen lag, or the read failed: its keys are decided again after a
                // backoff, unless a change of the members comes first.
                Ok(_) => self.state.recheck(&holder, Instant::now()),
                Err(error) => {
                    tracing::warn!(guest = %self.guest, %holder, %error, "sharder: reading the Lease of a holder out of the ring");
                    self.state.recheck(&holder, Instant::now());
                }
            }
        }
        confirmed
    }

    /// Sends the writes of `children`, then those of `keys`.
    async fn send(&mut self, children: Vec<Write>, keys: Vec<Write>) {
        let decided: HashMap<_, u64> = (children.iter())
            .filter_map(|w| Some(((w.source, w.key.clone()), w.edit.version.parse().ok()?)))
            .collect();
        for writes in [children, keys] {
            let sent: Vec<_> = stream::iter(writes)
                .map(|write| {
                    let kind = &self.kinds[&write.source];
                    write.send(&self.resources, kind, &self.state.label)
                })
                .buffer_unordered(WRITES_AT_ONCE)
                .collect()
                .await;
            let mut failed = Vec::new();
            for (object, outcome) in sent {
                // A child answered is decided again once the watch shows what the answer implies.
                let awaited = match &outcome {
                    Sent::Written(version) => version.or(decided.get(&object).map(|v| v + 1)),
                    Sent::Conflict => decided.get(&object).map(|v| v + 1),
                    Sent::Gone | Sent::Failed(_) => None,
                };
                if let (Source::Owned(i), Some(version)) = (object.0, awaited) {
                    self.state.sent.insert((i, object.1.clone()), version);
                }
                match outcome {
                    Sent::Failed(error) => failed.push((object, error)),
                    Sent::Conflict => {
                        tracing::debug!(guest = %self.guest, key = %object.1, "sharder: a label write met a change");
                        self.stats.conflicts.fetch_add(1, Ordering::Relaxed);
                        self.state.retries.succeeded(&object);
                    }
                    Sent::Written(_) | Sent::Gone => self.state.retries.succeeded(&object),
                }
            }
            self.retry(failed);
        }
    }

    /// Counts the drains its holder has left unserved for [`STUCK`], and says so when the
    /// first of them appears. A holder that runs the guest (one that does not is out of the
    /// ring, and its keys move without drain) may be reconciling the key still: the key is
    /// never moved from under it.
    fn count_stuck(&self) {
        let now = Instant::now();
        let stuck: Vec<_> = (self.state.draining.iter())
            .filter(|(_, asked)| now >= **asked + STUCK)
            .map(|(key, _)| key)
            .collect();
        let before = self
            .stats
            .drains_stuck
            .swap(stuck.len() as u64, Ordering::Relaxed);
        if before == 0
            && let Some(key) = stuck.first()
        {
            let holder = self
                .state
                .primaries
                .get(key)
                .and_then(|(_, l)| l.shard.clone());
            tracing::warn!(guest = %self.guest, stuck = stuck.len(), first = %key, ?holder, "sharder: drains unserved for over {STUCK:?}");
        }
    }

    /// Puts each failed write's object in backoff, and reports the failures in one line and
    /// in the stats: a refusal (say, no RBAC to patch a kind) fails every write.
    fn retry(&mut self, failed: Vec<((Source, ObjectKey), String)>) {
        let now = Instant::now();
        let mut longest = Duration::ZERO;
        for (object, _) in &failed {
            longest = longest.max(self.state.retries.failed(object.clone(), now));
            self.state.dirty.insert(object.clone());
        }
        let first = failed.first().map(|((_, key), error)| (key, error));
        if let Some((key, error)) = first {
            tracing::warn!(guest = %self.guest, failed = failed.len(), first = %key, %error, retry_in = ?longest, "sharder: writing shard labels");
        }
        let backing_off = self.state.retries.len(&self.state.dirty);
        self.stats
            .record(failed.len(), first.map(|(_, e)| e.clone()), backing_off);
    }
}

/// A label write the sharder decided on.
struct Write {
    source: Source,
    key: ObjectKey,
    edit: Edit,
}

impl Write {
    /// Sends the write; returns the object written and how the write ended.
    async fn send(
        self,
        resources: &Resources,
        kind: &GroupVersionKind,
        label: &str,
    ) -> ((Source, ObjectKey), Sent) {
        let sent = self.edit.send(resources, kind, &self.key, label).await;
        ((self.source, self.key), sent)
    }
}

/// What the sharder knows of one guest's objects.
struct State {
    label: String,
    drain: String,
    /// The annotation naming the versions a key's children were seen at.
    seen: String,
    primary: Primary,
    /// Each owned source's selection.
    owned: Vec<Selection>,
    /// What each owned source's watch has shown.
    shown: Vec<Shown>,
    /// Keys unassigned held back until this sharder's watches show their children: by key, its
    /// primary source and since when.
    held: HashMap<ObjectKey, (usize, Instant)>,
    ring: Ring,
    /// The guest's ring: the live members that announce it.
    live: BTreeSet<String>,
    /// Members out of the ring known to hold nothing of the guest: their Lease expired (a read
    /// confirmed it), or a read of it showed them gone or not running the guest.
    gone: HashSet<String>,
    /// The versions of the children of their keys that members gone named as they left.
    left: HashMap<String, Left>,
    /// Holders out of the ring not known to hold nothing: their Lease is to be read.
    unsure: BTreeSet<String>,
    /// Primary objects by key, with the selection they were seen in.
    primaries: HashMap<ObjectKey, (usize, Labels)>,
    /// Children by source and key.
    children: HashMap<(usize, ObjectKey), Child>,
    /// Children whose write was answered, with the version the watch must show before they
    /// are decided again: the version written, or any newer than the one decided on.
    sent: HashMap<(usize, ObjectKey), u64>,
    /// Children of each primary key.
    owned_by: HashMap<ObjectKey, HashSet<(usize, ObjectKey)>>,
    /// Keys to decide on.
    dirty: BTreeSet<(Source, ObjectKey)>,
    /// Keys whose children are being labelled for their next member: decided again when one of
    /// their children changes, goes, or ends its backoff, rather than at every wake.
    awaiting: HashSet<ObjectKey>,
    /// Lists in progress, by source: the keys listed so far.
    listing: HashMap<Source, HashSet<ObjectKey>>,
    /// When a drain was asked for, by key.
    draining: HashMap<ObjectKey, Instant>,
    /// Objects whose last label write failed.
    retries: Retries<(Source, ObjectKey)>,
}

impl State {
    fn new(guest: &str, primary: Primary, owned: Vec<Selection>) -> Self {
        Self {
            label: membership::shard_label(guest),
            drain: membership::drain_label(guest),
            seen: children::annotation(guest),
            primary,
            shown: vec![Shown::default(); owned.len()],
            owned,
            held: HashMap::new(),
            ring: Ring::default(),
            live: BTreeSet::new(),
            gone: HashSet::new(),
            left: HashMap::new(),
            unsure: BTreeSet::new(),
            primaries: HashMap::new(),
            children: HashMap::new(),
            sent: HashMap::new(),
            owned_by: HashMap::new(),
            dirty: BTreeSet::new(),
            awaiting: HashSet::new(),
            listing: HashMap::new(),
            draining: HashMap::new(),
            retries: Retries::default(),
        }
    }

    /// When the first backoff of an object to decide ends; none while the ring has no member,
    /// as nothing is decided then.
    fn next_due(&self) -> Option<Instant> {
        if self.live.is_empty() {
            return None;
        }
        let held = (self.held.iter())
            .filter(|(key, (source, _))| {
                self.dirty
                    .contains(&(Source::Primary(*source), (*key).clone()))
            })
            .map(|(_, (_, since))| *since + HOLDER_WAIT)
            .min();
        self.retries
            .next_due(&self.dirty)
            .into_iter()
            .chain(held)
            .min()
    }

    /// When the first drain not yet stuck becomes so; none while none waits.
    fn next_stuck(&self) -> Option<Instant> {
        let now = Instant::now();
        (self.draining.values())
            .map(|asked| *asked + STUCK)
            .filter(|at| *at > now)
            .min()
    }

    /// Takes the ring of `guest` among `members`; every primary is decided again when it, or
    /// what is known of those out of it, changed.
    fn ring(&mut self, members: &Members, guest: &str, stats: &ShardStats) {
        let ring = ring_of(members, guest);
        let expired = members.iter().filter(|(_, m)| !m.live).map(|(n, _)| n);
        let mut gone: HashSet<String> = expired.cloned().collect();
        // A read's verdict holds until the member is seen in the ring again.
        gone.extend(self.gone.iter().filter(|m| !ring.contains(*m)).cloned());
        if ring == self.live && gone == self.gone {
            return;
        }
        self.gone = gone;
        self.left.retain(|member, _| self.gone.contains(member));
        self.set_ring(ring, stats);
    }

    /// Notes that `holder` holds nothing of the guest, and left the children of its keys at the
    /// versions `left` names, if it says; its keys are decided again.
    fn gone(&mut self, holder: &str, left: Option<Left>) {
        self.gone.insert(holder.to_owned());
        if let Some(left) = left {
            self.left.insert(holder.to_owned(), left);
        }
        for object in self.held_by(holder) {
            // Moved at once, whatever backoff its rechecks left.
            self.retries.waiting.remove(&object);
            self.dirty.insert(object);
        }
    }

    /// Decides the keys of `holder`, whose Lease was not shown to hold nothing, again after a
    /// backoff of their own.
    fn recheck(&mut self, holder: &str, now: Instant) {
        for object in self.held_by(holder) {
            self.retries.failed(object.clone(), now);
            self.dirty.insert(object);
        }
    }

    /// The primary objects labelled for `holder`.
    fn held_by(&self, holder: &str) -> Vec<(Source, ObjectKey)> {
        (self.primaries.iter())
            .filter(|(_, (_, labels))| labels.shard.as_deref() == Some(holder))
            .map(|(key, (i, _))| (Source::Primary(*i), key.clone()))
            .collect()
    }

    /// Takes `members` as the guest's ring; every primary is decided again.
    fn set_ring(&mut self, members: BTreeSet<String>, stats: &ShardStats) {
        self.ring = Ring::new(members.iter().map(String::as_str));
        stats.members.store(members.len() as u64, Ordering::Relaxed);
        self.live = members;
        let all: Vec<_> = self
            .primaries
            .iter()
            .map(|(key, (i, _))| (Source::Primary(*i), key.clone()))
            .collect();
        self.dirty.extend(all);
    }

    fn labels(&self, meta: &kube::api::ObjectMeta) -> Labels {
        let labels = meta.labels.as_ref();
        Labels {
            shard: labels.and_then(|l| l.get(&self.label)).cloned(),
            drain: labels.is_some_and(|l| l.contains_key(&self.drain)),
            version: meta.resource_version.clone().unwrap_or_default(),
            children: (meta.annotations.as_ref())
                .and_then(|a| a.get(&self.seen))
                .map(|named| Seen::parse(named)),
        }
    }

    fn apply(&mut self, source: Source, event: watcher::Event<PartialObjectMeta<DynamicObject>>) {
        if let Source::Owned(i) = source {
            self.shown[i].note(&event);
        }
        match event {
            watcher::Event::Init => {
                self.listing.insert(source, HashSet::new());
            }
            watcher::Event::InitApply(object) => {
                let key = key_of(&object.metadata);
                if let Some(listed) = self.listing.get_mut(&source) {
                    listed.insert(key);
                }
                self.upsert(source, &object.metadata);
            }
            watcher::Event::InitDone => {
                let listed = self.listing.remove(&source).unwrap_or_default();
                let gone: Vec<ObjectKey> = match source {
                    Source::Primary(i) => self
                        .primaries
                        .iter()
                        .filter(|(k, (s, _))| *s == i && !listed.contains(*k))
                        .map(|(k, _)| k.clone())
                        .collect(),
                    Source::Owned(i) => self
                        .children
                        .keys()
                        .filter(|(s, k)| *s == i && !listed.contains(k))
                        .map(|(_, k)| k.clone())
                        .collect(),
                };
                for key in gone {
                    self.remove(source, &key);
                }
            }
            watcher::Event::Apply(object) => self.upsert(source, &object.metadata),
            watcher::Event::Delete(object) => self.remove(source, &key_of(&object.metadata)),
        }
    }

    fn upsert(&mut self, source: Source, meta: &kube::api::ObjectMeta) {
        let key = key_of(meta);
        let labels = self.labels(meta);
        match source {
            Source::Primary(i) => {
                let changed = self
                    .primaries
                    .get(&key)
                    .is_none_or(|(_, old)| old.shard != labels.shard || old.drain != labels.drain);
                self.primaries.insert(key.clone(), (i, labels));
                self.dirty.insert((source, key.clone()));
                if changed {
                    let children = self.owned_by.get(&key).cloned().unwrap_or_default();
                    self.dirty
                        .extend(children.into_iter().map(|(i, k)| (Source::Owned(i), k)));
                }
            }
            Source::Owned(i) => {
                let controller = (meta.owner_references.iter().flatten().enumerate())
                    .find(|(_, o)| o.controller == Some(true) && self.primary.owns(o));
                let owner = controller.map(|(_, o)| ObjectKey {
                    namespace: key.namespace.clone().filter(|_| self.primary.namespaced),
                    name: o.name.clone(),
                });
                let controller = controller.map(|(at, o)| (at, o.uid.clone()));
                let identity = meta.uid.clone().map(|uid| (uid, controller));
                let slot = (i, key.clone());
                if let Some(old) = self.children.get(&slot).and_then(|c| c.owner.clone()) {
                    // The owner it leaves may await it no more.
                    self.wake_owner(&slot);
                    self.unlink(&old, &slot);
                }
                if let Some(owner) = &owner {
                    self.owned_by
                        .entry(owner.clone())
                        .or_default()
                        .insert(slot.clone());
                }
                let child = Child {
                    labels,
                    owner,
                    identity,
                };
                let shown = child.labels.version.parse::<u64>().ok();
                if shown.zip(self.sent.get(&slot)).is_none_or(|(s, v)| s >= *v) {
                    self.sent.remove(&slot);
                }
                self.children.insert(slot.clone(), child);
                self.dirty.insert((source, key));
                self.wake_owner(&slot);
            }
        }
    }

    /// Marks the owner of the child in `slot` to decide, if it awaits its children.
    fn wake_owner(&mut self, slot: &(usize, ObjectKey)) {
        if let Some(owner) = self.awaiting_owner(slot) {
            self.dirty.insert(owner);
        }
    }

    /// The owner of the child in `slot`, if it awaits its children.
    fn awaiting_owner(&self, slot: &(usize, ObjectKey)) -> Option<(Source, ObjectKey)> {
        let owner = self.children.get(slot)?.owner.as_ref()?;
        let (i, _) = self
            .primaries
            .get(owner)
            .filter(|_| self.awaiting.contains(owner))?;
        Some((Source::Primary(*i), owner.clone()))
    }

    fn unlink(&mut self, owner: &ObjectKey, slot: &(usize, ObjectKey)) {
        if let Some(children) = self.owned_by.get_mut(owner) {
            children.remove(slot);
            if children.is_empty() {
                self.owned_by.remove(owner);
            }
        }
    }

    fn remove(&mut self, source: Source, key: &ObjectKey) {
        self.retries.succeeded(&(source, key.clone()));
        match source {
            Source::Primary(_) => {
                self.primaries.remove(key);
                self.draining.remove(key);
                self.held.remove(key);
                self.awaiting.remove(key);
            }
            Source::Owned(i) => {
                let slot = (i, key.clone());
                self.sent.remove(&slot);
                self.wake_owner(&slot);
                if let Some(owner) = self.children.remove(&slot).and_then(|c| c.owner) {
                    self.unlink(&owner, &slot);
                }
            }
        }
    }

    /// The writes that bring every dirty object in line with the ring: those of children, then
    /// those of primary objects.
    fn decide(&mut self, stats: &ShardStats) -> (Vec<Write>, Vec<Write>) {
        let (mut children, mut keys) = (Vec::new(), Vec::new());
        if self.live.is_empty() {
            return (children, keys);
        }
        let now = Instant::now();
        let (waiting, due): (BTreeSet<_>, BTreeSet<_>) = std::mem::take(&mut self.dirty)
            .into_iter()
            .partition(|object| self.retries.waits(object, now));
        self.dirty = waiting;
        let mut due = due;
        // A child whose backoff ended wakes the key awaiting it.
        let owners: Vec<_> = (due.iter())
            .filter(|object| self.retries.waiting.contains_key(*object))
            .filter_map(|(source, key)| match source {
                Source::Owned(i) => self.awaiting_owner(&(*i, key.clone())),
                Source::Primary(_) => None,
            })
            .collect();
        due.extend(owners);
        for (source, key) in due {
            let write = match source {
                Source::Primary(_) => self.decide_primary(&key, stats, &mut children),
                Source::Owned(i) => self.decide_child(i, &key),
            };
            let Some(edit) = write else {
                continue;
            };
            let write = Write { source, key, edit };
            match source {
                Source::Primary(_) => keys.push(write),
                Source::Owned(_) => children.push(write),
            }
        }
        (children, keys)
    }

    /// The write of the primary object `key`; when it assigns the key, the writes that label
    /// its children for the same member go to `children`.
    fn decide_primary(
        &mut self,
        key: &ObjectKey,
        stats: &ShardStats,
        children: &mut Vec<Write>,
    ) -> Option<Edit> {
        self.awaiting.remove(key);
        let (source, labels) = self.primaries.get(key).map(|(s, l)| (*s, l.clone()))?;
        let target = self.ring.owner(&key.to_string())?.to_owned();
        let target = target.as_str();
        let mut edit = Edit::default();
        let write = &mut edit.labels;
        match labels.shard.as_deref() {
            Some(holder) if !self.live.contains(holder) && !self.gone.contains(holder) => {
                // Out of the ring by the Leases seen, which may lag: a read of its Lease
                // settles it before the key moves without drain.
                self.unsure.insert(holder.to_owned());
                self.held.remove(key);
                return None;
            }
            Some(holder) if self.live.contains(holder) => {
                self.held.remove(key);
                if holder == target {
                    if !labels.drain {
                        return None;
                    }
                    write.insert(self.drain.clone(), Value::Null);
                    self.draining.remove(key);
                } else if labels.drain {
                    return None;
                } else {
                    write.insert(self.drain.clone(), Value::from("true"));
                    self.draining.insert(key.clone(), Instant::now());
                    stats.moves.fetch_add(1, Ordering::Relaxed);
                }
            }
            // Unassigned, handed over, or held by a member that is gone.
            holder => {
                let left = holder.and_then(|h| self.left.get(h)).cloned();
                if self.children_unseen(key, source, labels.children.as_ref(), left.as_ref()) {
                    return None;
                }
                let sent = children.len();
                let waiting = self.label_children(key, target, children);
                if children.len() > sent || !waiting.is_empty() {
                    // Decided again once the watch shows the children labelled (or one ends
                    // its backoff, staying to decide so that its end wakes the sharder): the
                    // member gets the key only with every child in its cache.
                    let object = (Source::Primary(source), key.clone());
                    self.retries.waiting.remove(&object);
                    self.awaiting.insert(key.clone());
                    self.dirty.extend(waiting);
                    return None;
                }
                write.insert(self.label.clone(), Value::from(target));
                if labels.drain {
                    write.insert(self.drain.clone(), Value::Null);
                }
                let seen = self.seen_children(key).value();
                (edit.annotations).insert(self.seen.clone(), seen.map_or(Value::Null, Value::from));
                stats.assigned.fetch_add(1, Ordering::Relaxed);
                self.held.remove(key);
                if let Some(asked) = self.draining.remove(key) {
                    stats.handover.observe(asked.elapsed());
                }
            }
        }
        edit.version.clone_from(&labels.version);
        Some(edit)
    }

    /// Whether `key`, seen in the primary source `source`, is held back: this sharder's watches
    /// of the owned kinds have not all listed, or have yet to show the versions its holder
    /// named on it as it handed it over (`named`), or on its Lease as it left the guest (`left`,
    /// by namespace): the children it made itself, which it knew before any watch showed them.
    /// A key held back is decided again on the next event, and held at most [`HOLDER_WAIT`] from
    /// when it began to wait until it is labelled: a watch that never lists, or that relisted
    /// with nothing newer to show, would hold it forever.
    fn children_unseen(
        &mut self,
        key: &ObjectKey,
        source: usize,
        named: Option<&Seen>,
        left: Option<&Left>,
    ) -> bool {
        let behind = self
            .owned
            .iter()
            .zip(&self.shown)
            .any(|(selection, shown)| {
                let here = selection.namespace.is_none() || selection.namespace == key.namespace;
                let named = named
                    .filter(|_| here)
                    .and_then(|n| n.version(&selection.kind));
                // What the holder left in the namespaces this watch shows (a cluster-scoped
                // key's children may be in any).
                let namespace = selection.namespace.as_deref().or(key.namespace.as_deref());
                let left = (left.filter(|_| here || key.namespace.is_none()))
                    .and_then(|l| l.of(namespace).version(&selection.kind));
                !shown.listed || named.max(left) > Some(shown.version)
            });
        if !behind {
            return false;
        }
        let now = Instant::now();
        let (_, since) = *self.held.entry(key.clone()).or_insert((source, now));
        if now >= since + HOLDER_WAIT {
            return false;
        }
        self.dirty.insert((Source::Primary(source), key.clone()));
        true
    }

    /// The versions the watch showed the children of `key` at, by kind: all labelled for the
    /// member `key` is about to be labelled for.
    fn seen_children(&self, key: &ObjectKey) -> Seen {
        let mut seen = Seen::default();
        for slot @ (i, _) in self.owned_by.get(key).into_iter().flatten() {
            seen.raise(&self.owned[*i].kind, &self.children[slot].labels.version);
        }
        seen
    }

    /// Adds to `writes` those that label the children of `key` not yet labelled for `target`,
    /// as the watch last showed them, but for children whose write failed and that wait out
    /// their backoff, and those whose write was answered and that the watch has not shown since:
    /// returns those. A write that met a change is decided again on the next event.
    fn label_children(
        &self,
        key: &ObjectKey,
        target: &str,
        writes: &mut Vec<Write>,
    ) -> Vec<(Source, ObjectKey)> {
        let now = Instant::now();
        let mut waiting = Vec::new();
        for (i, child_key) in self.owned_by.get(key).into_iter().flatten() {
            let child = &self.children[&(*i, child_key.clone())];
            let Some(edit) = self.label_child(child, target) else {
                continue;
            };
            let object = (Source::Owned(*i), child_key.clone());
            if self.retries.waits(&object, now) || self.unseen(*i, child_key, child) {
                waiting.push(object);
                continue;
            }
            writes.push(Write {
                source: object.0,
                key: object.1,
                edit,
            });
        }
        waiting
    }

    /// Whether a write of `child` was answered and the watch has not shown what it implies.
    fn unseen(&self, source: usize, key: &ObjectKey, child: &Child) -> bool {
        let awaited = self.sent.get(&(source, key.clone()));
        let shown = child.labels.version.parse::<u64>().ok();
        awaited
            .zip(shown)
            .is_some_and(|(awaited, shown)| shown < *awaited)
    }

    fn decide_child(&self, source: usize, key: &ObjectKey) -> Option<Edit> {
        let child = self.children.get(&(source, key.clone()))?;
        if self.unseen(source, key, child) {
            return None;
        }
        let (_, owner) = self.primaries.get(child.owner.as_ref()?)?;
        // A holder gone: the child follows its key when the key is assigned anew.
        let holder = owner
            .shard
            .as_ref()
            .filter(|h| !owner.drain && self.live.contains(*h))?;
        self.label_child(child, holder)
    }

    /// The write that labels `child` for `holder`, unless it is labelled so.
    fn label_child(&self, child: &Child, holder: &str) -> Option<Edit> {
        if child.labels.shard.as_deref() == Some(holder) {
            return None;
        }
        Some(Edit {
            labels: serde_json::Map::from_iter([(self.label.clone(), Value::from(holder))]),
            version: child.labels.version.clone(),
            as_seen: child.as_seen(),
            ..Edit::default()
        })
    }
}

fn key_of(meta: &kube::api::ObjectMeta) -> ObjectKey {
    ObjectKey {
        namespace: meta.namespace.clone(),
        name: meta.name.clone().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::shard::retries::RETRY;

    const LABEL: &str = "shard.kubewasm.dev/g";

    fn object(name: &str) -> (Source, ObjectKey) {
        let key = ObjectKey {
            namespace: Some("team".to_owned()),
            name: name.to_owned(),
        };
        (Source::Owned(0), key)
    }

    fn members(of: &[(&str, &[&str], bool)]) -> Members {
        of.iter()
            .map(|(name, guests, leads)| {
                let guests = guests.iter().map(|g| (*g).to_owned()).collect();
                let member = membership::Member {
                    live: true,
                    guests,
                    leads: *leads,
                };
                ((*name).to_owned(), member)
            })
            .collect()
    }

    #[test]
    fn a_key_of_a_holder_out_of_the_ring_moves_only_once_a_read_shows_it_holds_nothing() {
        let (mut state, stats) = one_member();
        state.upsert(Source::Primary(0), &meta("p", "1", Some("m9")));
        let (_, keys) = state.decide(&stats);
        assert!(
            keys.is_empty(),
            "m9 may be a member the Leases seen do not show yet"
        );
        assert_eq!(state.unsure, BTreeSet::from(["m9".to_owned()]));
        state.unsure.clear();
        // A read that fails, or shows it live: decided again after a backoff.
        let now = Instant::now();
        state.recheck("m9", now);
        assert_eq!(state.next_due(), Some(now + RETRY));
        state.gone("m9", None);
        let (_, keys) = state.decide(&stats);
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].edit.labels[LABEL], "m1");
        // A member whose expiry the Leases confirmed needs no read.
        let (mut state, stats) = one_member();
        let mut members = members(&[("m1", &["g"], false), ("m9", &["g"], false)]);
        members.get_mut("m9").unwrap().live = false;
        state.ring(&members, "g", &stats);
        state.upsert(Source::Primary(0), &meta("p", "1", Some("m9")));
        assert_eq!(state.decide(&stats).1.len(), 1);
    }

    #[test]
    fn a_lease_read_shows_a_holder_holds_nothing_unless_held_and_announcing_the_guest() {
        let lease = |holder: &str, guests: &str| Lease {
            metadata: kube::api::ObjectMeta {
                annotations: Some(
                    [(
                        crate::shard::roster::GUESTS_ANNOTATION.to_owned(),
                        guests.to_owned(),
                    )]
                    .into(),
                ),
                ..Default::default()
            },
            spec: Some(k8s_openapi::api::coordination::v1::LeaseSpec {
                holder_identity: Some(holder.to_owned()),
                ..Default::default()
            }),
        };
        assert!(holds_nothing(None, "m9", "g"));
        assert!(holds_nothing(Some(&lease("", "g")), "m9", "g"), "released");
        assert!(
            holds_nothing(Some(&lease("m9", "h")), "m9", "g"),
            "withdrawn"
        );
        assert!(!holds_nothing(Some(&lease("m9", "g,h")), "m9", "g"));
    }

    #[test]
    fn a_drain_wakes_the_sharder_once_when_it_becomes_stuck() {
        let (mut state, _) = one_member();
        assert_eq!(state.next_stuck(), None);
        let asked = Instant::now();
        state.draining.insert(object("a").1, asked);
        assert_eq!(state.next_stuck(), Some(asked + STUCK));
        state.draining.insert(object("b").1, asked - STUCK);
        assert_eq!(
            state.next_stuck(),
            Some(asked + STUCK),
            "one stuck already wakes nothing"
        );
    }

    #[test]
    fn a_guest_is_sharded_by_the_leader_if_it_runs_it_else_by_the_first_of_its_ring() {
        let mut ring = members(&[
            ("a", &["g"], true),
            ("b", &["g", "h"], false),
            ("c", &["h"], false),
        ]);
        let sharder = |members: &Members, guest| membership::sharder_of(members, guest);
        assert_eq!(sharder(&ring, "g").as_deref(), Some("a"));
        assert_eq!(
            sharder(&ring, "h").as_deref(),
            Some("b"),
            "a does not run h"
        );
        assert_eq!(
            ring_of(&ring, "h"),
            BTreeSet::from(["b".into(), "c".into()])
        );
        assert_eq!(sharder(&ring, "x"), None, "nobody runs x");
        // A member whose Lease expired is in no ring.
        ring.get_mut("b").unwrap().live = false;
        assert_eq!(sharder(&ring, "h").as_deref(), Some("c"));
    }

    #[test]
    fn stats_say_since_when_writes_fail_until_no_object_waits() {
        let stats = ShardStats::default();
        stats.record(3, Some("forbidden".to_owned()), 3);
        let (since, error) = stats.failing().expect("failing");
        assert_eq!(error, "forbidden");
        stats.record(1, Some("still forbidden".to_owned()), 3);
        assert_eq!(stats.failing(), Some((since, "still forbidden".to_owned())));
        // A round with no failure while objects still wait changes nothing.
        stats.record(0, None, 1);
        assert!(stats.failing().is_some());
        stats.record(0, None, 0);
        assert_eq!(stats.failing(), None);
        assert_eq!(stats.failed.load(Ordering::Relaxed), 4);
    }

    #[test]
    fn a_key_its_holder_left_waits_for_the_children_it_named_on_its_lease() {
        let (mut state, stats) = one_member();
        state.upsert(Source::Primary(0), &meta("p", "1", Some("m9")));
        state.decide(&stats);
        state.gone("m9", Some(Left::parse("team:Pod.v1=7;other:Pod.v1=9")));
        let (_, keys) = state.decide(&stats);
        assert!(keys.is_empty(), "the pod m9 made last is not shown yet");
        state.shown[0].version = 7;
        let (_, keys) = state.decide(&stats);
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].edit.labels[LABEL], "m1");
        // A cluster-scoped key waits for what it left in every namespace its watches show.
        let (mut state, stats) = one_member();
        let cluster_scoped = kube::api::ObjectMeta {
            namespace: None,
            ..meta("c", "1", Some("m9"))
        };
        state.upsert(Source::Primary(0), &cluster_scoped);
        state.gone("m9", Some(Left::parse("team:Pod.v1=7")));
        let (_, keys) = state.decide(&stats);
        assert!(keys.is_empty(), "the pod in team is not shown yet");
        state.shown[0].version = 7;
        assert_eq!(state.decide(&stats).1.len(), 1);
    }

    /// The state of a guest whose primary kind is PodSet, with one member `m1` in the ring.
    fn one_member() -> (State, ShardStats) {
        let primary = Primary {
            kind: GroupVersionKind::gvk("example.com", "v1", "PodSet"),
            namespaced: true,
        };
        let pods = GroupVersionKind::gvk("", "v1", "Pod");
        let pods = Selection {
            kind: pods,
            namespace: Some("team".to_owned()),
            selector: None,
        };
        let mut state = State::new("g", primary, vec![pods]);
        let stats = ShardStats::default();
        state.ring(&members(&[("m1", &["g"], false)]), "g", &stats);
        state.shown[0].listed = true;
        (state, stats)
    }

    fn meta(name: &str, version: &str, shard: Option<&str>) -> kube::api::ObjectMeta {
        kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("team".to_owned()),
            resource_version: Some(version.to_owned()),
            labels: shard.map(|member| [(LABEL.to_owned(), member.to_owned())].into()),
            ..Default::default()
        }
    }

    /// A controller owner reference to the PodSet `name` with `uid`.
    fn controller(name: &str, uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: "example.com/v1".to_owned(),
            kind: "PodSet".to_owned(),
            name: name.to_owned(),
            uid: uid.to_owned(),
            controller: Some(true),
            ..Default::default()
        }
    }

    #[test]
    fn a_key_is_labelled_only_once_the_watch_shows_every_child_labelled_for_its_member() {
        let (mut state, stats) = one_member();
        state.upsert(Source::Primary(0), &meta("p", "1", None));
        let owner = controller("p", "owner-uid");
        for child in ["c1", "c2"] {
            let child = kube::api::ObjectMeta {
                owner_references: Some(vec![owner.clone()]),
                ..meta(child, "2", None)
            };
            state.upsert(Source::Owned(0), &child);
        }
        let names = |writes: &[Write]| {
            let mut names: Vec<_> = writes.iter().map(|w| w.key.name.clone()).collect();
            names.sort();
            names
        };
        let (children, keys) = state.decide(&stats);
        assert_eq!(names(&children), ["c1", "c2"]);
        assert!(keys.is_empty(), "the key waits for its children");
        let primary = |state: &State| state.dirty.iter().any(|(s, _)| *s == Source::Primary(0));
        assert!(
            !primary(&state),
            "decided again on its children's events, not at every wake"
        );
        // c2's write met a conflict (it changed meanwhile): its new version is labelled again,
        // and the key still waits.
        let labelled = |name: &str, version: &str| kube::api::ObjectMeta {
            owner_references: Some(vec![owner.clone()]),
            ..meta(name, version, Some("m1"))
        };
        state.upsert(Source::Owned(0), &labelled("c1", "3"));
        assert!(primary(&state), "a child's event wakes the key");
        let changed = kube::api::ObjectMeta {
            owner_references: Some(vec![owner.clone()]),
            ..meta("c2", "4", None)
        };
        state.upsert(Source::Owned(0), &changed);
        // A child whose write failed holds its key back too, and stays to decide.
        let failed = (Source::Owned(0), object("c2").1);
        state.retries.failed(failed.clone(), Instant::now());
        let (children, keys) = state.decide(&stats);
        assert!(children.is_empty() && keys.is_empty());
        assert!(state.dirty.contains(&failed));
        assert!(state.next_due().is_some());
        state.ring(&Members::new(), "g", &stats);
        assert_eq!(state.next_due(), None, "nothing is decided with no member");
        state.ring(&members(&[("m1", &["g"], false)]), "g", &stats);
        state.retries.succeeded(&failed);
        let (children, keys) = state.decide(&stats);
        assert_eq!(names(&children), ["c2"]);
        assert_eq!(children[0].edit.version, "4");
        assert!(keys.is_empty(), "the key waits for c2");
        state.upsert(Source::Owned(0), &labelled("c2", "5"));
        let (children, keys) = state.decide(&stats);
        assert!(children.is_empty());
        assert_eq!(names(&keys), ["p"]);
        assert_eq!(stats.assigned.load(Ordering::Relaxed), 1);
        // The key names the version its children were seen at, for its member to wait for.
        let seen = &keys[0].edit.annotations["children.shard.kubewasm.dev/g"];
        assert_eq!(seen, "Pod.v1=5");
    }

    #[test]
    fn a_child_that_leaves_its_owner_wakes_the_key_awaiting_it() {
        let (mut state, stats) = one_member();
        state.upsert(Source::Primary(0), &meta("p", "1", None));
        let child = kube::api::ObjectMeta {
            owner_references: Some(vec![controller("p", "owner-uid")]),
            ..meta("c1", "2", None)
        };
        state.upsert(Source::Owned(0), &child);
        let (children, keys) = state.decide(&stats);
        assert_eq!(
            (children.len(), keys.len()),
            (1, 0),
            "the key awaits its child"
        );
        // Released by its controller: the key waits for it no more.
        state.upsert(Source::Owned(0), &meta("c1", "3", None));
        let (_, keys) = state.decide(&stats);
        assert_eq!(keys.len(), 1);
    }

    #[test]
    fn a_labelled_child_is_relabelled_on_what_the_sharder_decides_on_and_not_sent_twice() {
        let (mut state, stats) = one_member();
        state.upsert(Source::Primary(0), &meta("p", "1", None));
        let owner = controller("p", "owner-uid");
        let other = OwnerReference {
            controller: None,
            uid: "other".to_owned(),
            ..owner.clone()
        };
        let child = kube::api::ObjectMeta {
            uid: Some("child-uid".to_owned()),
            owner_references: Some(vec![other, owner]),
            ..meta("c", "2", Some("m0"))
        };
        state.upsert(Source::Owned(0), &child);
        let (children, keys) = state.decide(&stats);
        assert!(keys.is_empty());
        let edit = &children[0].edit;
        let as_seen = edit
            .as_seen
            .as_ref()
            .expect("a labelled child is relabelled on condition");
        let patch = serde_json::to_value(edit.relabel(LABEL, as_seen)).unwrap();
        let path = "/metadata/labels/shard.kubewasm.dev~1g";
        assert_eq!(
            patch,
            json!([
                { "op": "test", "path": "/metadata/uid", "value": "child-uid" },
                { "op": "test", "path": "/metadata/ownerReferences/1/uid", "value": "owner-uid" },
                { "op": "test", "path": path, "value": "m0" },
                { "op": "add", "path": path, "value": "m1" },
            ])
        );
        // Landed, and not shown by the watch yet: neither sent again nor taken as labelled.
        state.sent.insert((0, object("c").1), 3);
        let (children, keys) = state.decide(&stats);
        assert!(children.is_empty() && keys.is_empty());
        let relabelled = kube::api::ObjectMeta {
            labels: Some([(LABEL.to_owned(), "m1".to_owned())].into()),
            ..child
        };
        state.upsert(
            Source::Owned(0),
            &kube::api::ObjectMeta {
                resource_version: Some("3".to_owned()),
                ..relabelled
            },
        );
        assert!(state.sent.is_empty());
        let (children, keys) = state.decide(&stats);
        assert!(children.is_empty());
        assert_eq!(keys[0].key.name, "p");
        assert_eq!(
            keys[0].edit.annotations["children.shard.kubewasm.dev/g"],
            "Pod.v1=3"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_handed_over_waits_for_the_watch_to_show_the_children_its_holder_named() {
        let (mut state, stats) = one_member();
        let handed = |version: &str| kube::api::ObjectMeta {
            annotations: Some(
                [(
                    "children.shard.kubewasm.dev/g".to_owned(),
                    "Pod.v1=9".to_owned(),
                )]
                .into(),
            ),
            ..meta("p", version, None)
        };
        state.upsert(Source::Primary(0), &handed("10"));
        state.shown[0].version = 5;
        assert_eq!(
            state.decide(&stats).1.len(),
            0,
            "a child made at 9 is not seen yet"
        );
        assert!(state.dirty.contains(&(Source::Primary(0), object("p").1)));
        state.shown[0].version = 9;
        assert_eq!(
            state.decide(&stats).1.len(),
            1,
            "labelled once the watch shows 9"
        );
        assert!(state.held.is_empty());
        // No key is labelled before the watch of every owned kind has listed.
        let (mut state, stats) = one_member();
        state.shown[0].listed = false;
        state.upsert(Source::Primary(0), &meta("q", "3", None));
        assert_eq!(state.decide(&stats).1.len(), 0);
        state.shown[0].listed = true;
        assert_eq!(state.decide(&stats).1.len(), 1);
        // A watch with nothing newer to show holds the key for a while only.
        let (mut state, stats) = one_member();
        state.upsert(Source::Primary(0), &handed("10"));
        assert_eq!(state.decide(&stats).1.len(), 0);
        let due = state.next_due().expect("woken when the wait ends");
        tokio::time::advance(HOLDER_WAIT).await;
        assert!(due <= Instant::now());
        assert_eq!(state.decide(&stats).1.len(), 1);
        assert!(state.held.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_object_in_backoff_is_decided_once_due_and_no_longer_waits_with_nothing_to_write() {
        let (mut state, stats) = one_member();
        let key = object("p").1;
        state.upsert(Source::Primary(0), &meta("p", "7", None));
        let (_, keys) = state.decide(&stats);
        assert_eq!(keys.len(), 1, "the unassigned key is labelled");
        // The write failed: the object waits out its backoff.
        let failed = (Source::Primary(0), key.clone());
        state.retries.failed(failed.clone(), Instant::now());
        state.dirty.insert(failed.clone());
        assert_eq!(state.decide(&stats).1.len(), 0);
        assert!(state.dirty.contains(&failed));
        tokio::time::advance(RETRY).await;
        assert_eq!(state.decide(&stats).1.len(), 1, "sent again once due");
        // Labelled meanwhile by the write that seemed to fail: nothing to write, no backoff.
        state.retries.failed(failed.clone(), Instant::now());
        state.dirty.insert(failed.clone());
        state.upsert(Source::Primary(0), &meta("p", "8", Some("m1")));
        tokio::time::advance(RETRY * 2).await;
        assert_eq!(state.decide(&stats).1.len(), 0);
        assert_eq!(state.retries.next_due(&state.dirty), None);
    }
}
