//! The guests a member announces: a member is in a guest's ring only while it runs the guest
//! with its informers synced. The names are written on the member's own Lease, in the
//! annotation `shard.kubewasm.dev/guests` (comma-separated), with `shard.kubewasm.dev/leads`
//! while the replica leads.
//!
//! Guarantees: a guest is announced only once one of its controllers has every informer
//! synced, and withdrawn only once none of its controllers runs (their workers ended), so the
//! sharder may move a withdrawn guest's keys without drain. A guest withdrawn is announced
//! again only after [`QUARANTINE`], so that a sharder that has not yet seen the withdrawal
//! moves no key from under a new controller of it. A controller reconciles only once its guest
//! is announced: its [`Entry::announced`] gate opens once the Lease says so and no write in
//! flight says otherwise. A controller that replaces another of the same guest (see
//! [`Roster::hold`]) finds it announced and keeps it, for [`GRACE`] at most until it is synced.
//! A write that fails may have landed: the guests it drops count as withdrawn.
//!
//! A member that stops running a guest names, in `left.shard.kubewasm.dev/<guest>` on its
//! Lease (written with the withdrawal, or as the Lease is released), the highest version of
//! each owned kind among the children of the keys it held (see [`crate::shard::children`]):
//! its keys move without drain, and the sharder labels them for their next member only once
//! its own watches show those children, the last it made among them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::PostParams;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cluster::gate::Gate;
use crate::shard::children::Left;
use crate::shard::retries::sleep_until;

/// The annotation of a membership Lease naming the guests its member announces.
pub const GUESTS_ANNOTATION: &str = "shard.kubewasm.dev/guests";

/// The annotation of a membership Lease whose member leads: it shards the guests it runs.
pub const LEADS_ANNOTATION: &str = "shard.kubewasm.dev/leads";

/// The prefix of the annotations of a membership Lease that name, for a guest its member no
/// longer runs, the versions of the children of the keys it held.
pub const LEFT_ANNOTATIONS: &str = "left.shard.kubewasm.dev/";

/// How long a withdrawn guest waits before it is announced again.
pub const QUARANTINE: Duration = Duration::from_secs(10);

/// How long an announced guest stays so with no synced controller (one replacing another
/// lists its informers): then it is withdrawn.
pub const GRACE: Duration = Duration::from_secs(30);

/// The longest pause between two failed writes of the announcement.
const RETRY_MAX: Duration = Duration::from_secs(30);

/// The guests a member announces; shared by its controllers and its publisher.
#[derive(Default)]
pub struct Roster {
    names: Mutex<Names>,
    changed: Notify,
}

/// What is announced and what the controllers want announced.
#[derive(Default)]
struct Names {
    guests: BTreeMap<String, Guest>,
    leads: bool,
    /// What the Lease says, as last written.
    written: BTreeSet<String>,
    written_leads: bool,
    /// What a write in flight says.
    writing: Option<BTreeSet<String>>,
    /// Whether the Lease may say other than `written`: a write failed.
    unsure: bool,
}

/// The guests a write announces, and whether it says the member leads.
type Announcement = (BTreeSet<String>, bool);

/// One guest's controllers on this replica.
#[derive(Default)]
struct Guest {
    /// Controllers running it, and holds across a replacement.
    holders: usize,
    /// Holds across a replacement.
    holds: usize,
    /// Controllers with every informer synced.
    ready: usize,
    /// Since when no controller of it is synced, while one runs.
    unready_since: Option<Instant>,
    /// When it was last withdrawn.
    withdrawn: Option<Instant>,
    /// The children of the keys its controllers held as they left: written while it is not
    /// announced. Versions only rise, so what an earlier leave named is kept.
    left: Left,
    /// Gates of ready controllers, opened once the guest is announced.
    waiting: Vec<Gate>,
}

/// One controller's place in its guest's announcement.
pub struct Entry {
    roster: Arc<Roster>,
    guest: String,
    ready: bool,
    announced: Gate,
}

/// Keeps a guest announced while its controller is replaced by another.
pub struct Hold {
    roster: Arc<Roster>,
    guest: String,
}

impl Roster {
    /// Enters a controller of `guest`: not ready yet.
    pub fn enter(self: &Arc<Self>, guest: &str) -> Entry {
        self.update(|names| {
            let guest = names.guests.entry(guest.to_owned()).or_default();
            guest.holders += 1;
            if guest.ready == 0 {
                guest.unready_since.get_or_insert_with(Instant::now);
            }
        });
        Entry {
            roster: self.clone(),
            guest: guest.to_owned(),
            ready: false,
            announced: Gate::closed(),
        }
    }

    /// Keeps `guest` announced, if it is, until the hold is dropped.
    pub fn hold(self: &Arc<Self>, guest: &str) -> Hold {
        self.update(|names| {
            let guest = names.guests.entry(guest.to_owned()).or_default();
            guest.holders += 1;
            guest.holds += 1;
        });
        Hold {
            roster: self.clone(),
            guest: guest.to_owned(),
        }
    }

    /// Says whether this replica leads.
    pub fn set_leads(&self, leads: bool) {
        self.update(|names| names.leads = leads);
    }

    /// Writes the announcement on the Lease `lease` until `stop` is cancelled: at once and on
    /// every change; a failed write is retried after a pause that doubles up to 30 s.
    pub async fn publish(self: Arc<Self>, api: Api<Lease>, lease: String, stop: CancellationToken) {
        let mut pause = Duration::from_secs(1);
        loop {
            let notified = self.changed.notified();
            let (next, wake) = self.begin(Instant::now());
            if let Some((wanted, leads)) = next {
                let left = self.left(Some(&wanted));
                match write(&api, &lease, &wanted, leads, &left).await {
                    Ok(()) => {
                        self.written(wanted, leads, Instant::now());
                        pause = Duration::from_secs(1);
                        continue;
                    }
                    Err(error) => {
                        self.failed(&wanted, Instant::now());
                        tracing::warn!(%lease, %error, retry_in = ?pause, "announcing the guests this member runs");
                        tokio::select! {
                            () = tokio::time::sleep(pause) => {}
                            () = stop.cancelled() => return,
                        }
                        pause = (pause * 2).min(RETRY_MAX);
                        continue;
                    }
                }
            }
            tokio::select! {
                () = notified => {}
                () = sleep_until(wake) => {}
                () = stop.cancelled() => return,
            }
        }
    }

    /// The annotations naming, for each guest this member left that `announced` (if given)
    /// leaves out, the versions of the children of the keys it held.
    pub fn left(&self, announced: Option<&BTreeSet<String>>) -> BTreeMap<String, String> {
        let names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        let out = |name: &String| announced.is_none_or(|a| !a.contains(name));
        (names.guests.iter())
            .filter(|(name, _)| out(name))
            .filter_map(|(name, guest)| {
                Some((format!("{LEFT_ANNOTATIONS}{name}"), guest.left.value()?))
            })
            .collect()
    }

    fn update(&self, change: impl FnOnce(&mut Names)) {
        change(&mut self.names.lock().unwrap_or_else(PoisonError::into_inner));
        self.changed.notify_one();
    }

    /// What to write at `now`, if the Lease may say otherwise (noted as the write in flight,
    /// under the same lock), and when a guest waiting out its quarantine or grace is due.
    fn begin(&self, now: Instant) -> (Option<Announcement>, Option<Instant>) {
        let mut names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        let (wanted, wake) = names.wanted(now);
        let leads = names.leads;
        let differs = names.unsure || names.written != wanted || names.written_leads != leads;
        if !differs {
            return (None, wake);
        }
        names.writing = Some(wanted.clone());
        (Some((wanted, leads)), wake)
    }

    /// Takes in that a write of `wanted` failed at `now`: it may have landed.
    fn failed(&self, wanted: &BTreeSet<String>, now: Instant) {
        let mut names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        names.failed_now(wanted, now);
    }

    /// Takes in that the Lease says `written` and `leads` since `now`.
    fn written(&self, written: BTreeSet<String>, leads: bool, now: Instant) {
        let mut names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        names.written_now(written, leads, now);
    }
}

impl Names {
    /// The guests to announce at `now`: those announced that still run, and those with a
    /// synced controller that are not in quarantine; and when the first quarantine ends.
    fn wanted(&self, now: Instant) -> (BTreeSet<String>, Option<Instant>) {
        let mut wanted = BTreeSet::new();
        let mut wake: Option<Instant> = None;
        let mut wake_at = |until: Instant| wake = Some(wake.map_or(until, |w| w.min(until)));
        for (name, guest) in &self.guests {
            if guest.holders == 0 {
                continue;
            }
            if self.written.contains(name) {
                // Kept while a controller is synced, or one replaces another, or for a grace.
                let until = guest.unready_since.map(|since| since + GRACE);
                let kept = guest.ready > 0 || guest.holds > 0 || until.is_none_or(|u| u > now);
                if kept {
                    wanted.insert(name.clone());
                    until
                        .filter(|u| *u > now && guest.ready == 0)
                        .map(&mut wake_at);
                }
                continue;
            }
            if guest.ready == 0 {
                continue;
            }
            match guest.withdrawn.map(|at| at + QUARANTINE) {
                Some(until) if until > now => wake_at(until),
                _ => {
                    wanted.insert(name.clone());
                }
            }
        }
        (wanted, wake)
    }

    /// Whether the Lease says `guest` is announced, and no write in flight says otherwise.
    fn announces(&self, guest: &str) -> bool {
        self.written.contains(guest) && self.writing.as_ref().is_none_or(|w| w.contains(guest))
    }

    /// Takes in that a write of `wanted` failed at `now`: it may have landed, so a guest it
    /// drops counts as withdrawn then, one it adds as not announced, and the next write is
    /// made whatever the Lease was last known to say.
    fn failed_now(&mut self, wanted: &BTreeSet<String>, now: Instant) {
        for name in self.written.difference(wanted) {
            if let Some(guest) = self.guests.get_mut(name) {
                guest.withdrawn = Some(now);
            }
        }
        self.written = self.written.intersection(wanted).cloned().collect();
        self.unsure = true;
        self.writing = None;
    }

    /// Takes in that the Lease says `written` and `leads` since `now`: a guest no longer
    /// written is withdrawn then, and the gates of those written open.
    fn written_now(&mut self, written: BTreeSet<String>, leads: bool, now: Instant) {
        for name in self.written.difference(&written) {
            if let Some(guest) = self.guests.get_mut(name) {
                guest.withdrawn = Some(now);
            }
        }
        for name in &written {
            if let Some(guest) = self.guests.get_mut(name) {
                guest.waiting.drain(..).for_each(|gate| gate.let_through());
            }
        }
        // A guest no longer run is remembered while written, and through its quarantine.
        self.guests.retain(|name, guest| {
            guest.holders > 0
                || written.contains(name)
                || guest.withdrawn.is_some_and(|at| now < at + QUARANTINE)
        });
        self.written = written;
        self.writing = None;
        self.written_leads = leads;
        self.unsure = false;
    }
}

impl Entry {
    /// Says that the controller has every informer synced: its guest may be announced.
    pub fn ready(&mut self) {
        if std::mem::replace(&mut self.ready, true) {
            return;
        }
        let gate = self.announced.clone();
        self.roster.update(|names| {
            let announced = names.announces(&self.guest);
            let guest = names.guests.entry(self.guest.clone()).or_default();
            guest.ready += 1;
            guest.unready_since = None;
            if announced {
                gate.let_through();
            } else {
                guest.waiting.push(gate);
            }
        });
    }

    /// Opens once the Lease announces the guest, after [`Entry::ready`].
    pub fn announced(&self) -> Gate {
        self.announced.clone()
    }

    /// Leaves, once the controller's workers have ended, naming `children`: the versions of
    /// the children of the keys it held, written with the guest's withdrawal.
    pub fn leave(self, children: &Left) {
        self.roster.update(|names| {
            if let Some(guest) = names.guests.get_mut(&self.guest) {
                guest.left.merge(children);
            }
        });
    }
}

/// Leaving: once the controller's workers have ended (they hold it), the guest is withdrawn
/// unless another controller of it runs or holds it.
impl Drop for Entry {
    fn drop(&mut self) {
        let ready = self.ready;
        self.roster.update(|names| {
            if let Some(guest) = names.guests.get_mut(&self.guest) {
                guest.holders = guest.holders.saturating_sub(1);
                if ready {
                    guest.ready = guest.ready.saturating_sub(1);
                    if guest.ready == 0 {
                        guest.unready_since = Some(Instant::now());
                    }
                }
            }
        });
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.roster.update(|names| {
            if let Some(guest) = names.guests.get_mut(&self.guest) {
                guest.holders = guest.holders.saturating_sub(1);
                guest.holds = guest.holds.saturating_sub(1);
            }
        });
    }
}

/// Writes `guests`, `leads` and the notes of the guests `left` on the Lease `lease`, read and
/// replaced at the version read (the verbs the election needs already); a conflict with a
/// renewal reads it again.
async fn write(
    api: &Api<Lease>,
    lease: &str,
    guests: &BTreeSet<String>,
    leads: bool,
    left: &BTreeMap<String, String>,
) -> Result<(), kube::Error> {
    /// Conflicts a write survives: renewals come once per retry period.
    const ATTEMPTS: u32 = 5;
    let mut attempt = 1;
    loop {
        let mut record = api.get(lease).await?;
        let annotations = record.metadata.annotations.get_or_insert_default();
        annotations.remove(GUESTS_ANNOTATION);
        annotations.remove(LEADS_ANNOTATION);
        annotations.retain(|key, _| !key.starts_with(LEFT_ANNOTATIONS));
        annotations.extend(left.clone());
        if !guests.is_empty() {
            let names: Vec<&str> = guests.iter().map(String::as_str).collect();
            annotations.insert(GUESTS_ANNOTATION.to_owned(), names.join(","));
        }
        if leads {
            annotations.insert(LEADS_ANNOTATION.to_owned(), "true".to_owned());
        }
        match api.replace(lease, &PostParams::default(), &record).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.is_conflict() && attempt < ATTEMPTS => {
                attempt += 1;
            }
            Err(error) => return Err(error),
        }
    }
}

/// The guests a Lease's annotations announce, and whether its member leads.
pub fn announced(annotations: Option<&BTreeMap<String, String>>) -> (BTreeSet<String>, bool) {
    let Some(annotations) = annotations else {
        return (BTreeSet::new(), false);
    };
    let guests = annotations
        .get(GUESTS_ANNOTATION)
        .map(|names| {
            names
                .split(',')
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let leads = annotations
        .get(LEADS_ANNOTATION)
        .is_some_and(|v| v == "true");
    (guests, leads)
}

/// The versions of the children of the keys its member held that a Lease's annotations name,
/// by each guest it left.
pub fn left(annotations: Option<&BTreeMap<String, String>>) -> BTreeMap<String, Left> {
    let notes = annotations.into_iter().flatten();
    notes
        .filter_map(|(key, value)| Some((key.strip_prefix(LEFT_ANNOTATIONS)?, value)))
        .map(|(guest, value)| (guest.to_owned(), Left::parse(value)))
        .collect()
}

/// Whether the membership Lease `lease` read now shows that `holder` holds nothing of `guest`:
/// it is gone, released, held by another, or does not announce the guest (withdrawn: its
/// controller's workers ended, and it announces it again only after a quarantine).
pub fn holds_nothing(lease: Option<&Lease>, holder: &str, guest: &str) -> bool {
    let Some(lease) = lease else {
        return true;
    };
    let spec = lease.spec.as_ref();
    let held = spec.and_then(|s| s.holder_identity.as_deref()) == Some(holder);
    let (guests, _) = announced(lease.metadata.annotations.as_ref());
    !held || !guests.contains(guest)
}

#[cfg(test)]
mod tests {
    use kube::api::GroupVersionKind;

    use super::*;

    fn names(roster: &Roster) -> std::sync::MutexGuard<'_, Names> {
        roster.names.lock().unwrap()
    }

    /// A synced controller of the guest `a`, announced at `now`.
    fn running(roster: &Arc<Roster>, now: Instant) -> Entry {
        let mut entry = roster.enter("a");
        entry.ready();
        roster.written(set(&["a"]), false, now);
        entry
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn a_guest_is_announced_once_synced_and_withdrawn_once_no_controller_runs_it() {
        let roster = Arc::new(Roster::default());
        let now = Instant::now();
        let mut entry = roster.enter("a");
        assert!(names(&roster).wanted(now).0.is_empty(), "not synced yet");
        entry.ready();
        assert_eq!(names(&roster).wanted(now).0, set(&["a"]));
        assert!(!entry.announced().is_open(), "not written yet");
        roster.written(set(&["a"]), false, now);
        assert!(entry.announced().is_open());
        drop(entry);
        assert!(names(&roster).wanted(now).0.is_empty());
        roster.written(BTreeSet::new(), false, now);
        assert_eq!(names(&roster).guests["a"].withdrawn, Some(now));
    }

    #[test]
    fn a_guest_left_is_written_with_its_children_while_not_announced() {
        let roster = Arc::new(Roster::default());
        let now = Instant::now();
        let pods = GroupVersionKind::gvk("", "v1", "Pod");
        let mut children = Left::default();
        children.raise(Some("team"), &pods, "41");
        running(&roster, now).leave(&children);
        let note = BTreeMap::from([(format!("{LEFT_ANNOTATIONS}a"), "team:Pod.v1=41".to_owned())]);
        let (wanted, _) = names(&roster).wanted(now);
        assert_eq!(
            roster.left(Some(&wanted)),
            note,
            "written with the withdrawal"
        );
        assert!(
            roster.left(Some(&set(&["a"]))).is_empty(),
            "not while announced"
        );
        assert_eq!(left(Some(&note))["a"], children, "read back");
        roster.written(wanted, false, now);
        let mut again = roster.enter("a");
        again.ready();
        roster.written(set(&["a"]), false, now + QUARANTINE);
        let (wanted, _) = names(&roster).wanted(now + QUARANTINE);
        assert!(
            roster.left(Some(&wanted)).is_empty(),
            "announced again: not written"
        );
        assert_eq!(
            roster.left(None),
            note,
            "versions only rise: kept for the next leave"
        );
    }

    #[test]
    fn a_withdrawn_guest_is_announced_again_only_after_its_quarantine() {
        let roster = Arc::new(Roster::default());
        let now = Instant::now();
        let first = running(&roster, now);
        drop(first);
        roster.written(BTreeSet::new(), false, now);
        let mut second = roster.enter("a");
        second.ready();
        let (wanted, wake) = names(&roster).wanted(now);
        assert!(wanted.is_empty());
        assert_eq!(wake, Some(now + QUARANTINE));
        assert!(!second.announced().is_open());
        assert_eq!(names(&roster).wanted(now + QUARANTINE).0, set(&["a"]));
        roster.written(set(&["a"]), false, now + QUARANTINE);
        assert!(second.announced().is_open());
    }

    #[test]
    fn a_replaced_controller_keeps_its_guest_announced_under_a_hold() {
        let roster = Arc::new(Roster::default());
        let now = Instant::now();
        let old = running(&roster, now);
        let hold = roster.hold("a");
        drop(old);
        let mut new = roster.enter("a");
        drop(hold);
        assert_eq!(
            names(&roster).wanted(now).0,
            set(&["a"]),
            "announced while replaced"
        );
        new.ready();
        assert!(new.announced().is_open(), "the guest is announced already");
    }

    #[test]
    fn a_gate_does_not_open_while_a_write_withdrawing_its_guest_is_in_flight() {
        let roster = Arc::new(Roster::default());
        let now = Instant::now();
        let old = running(&roster, now);
        drop(old);
        let (writing, _) = roster.begin(now);
        assert_eq!(
            writing,
            Some((BTreeSet::new(), false)),
            "the withdrawal is in flight"
        );
        let mut new = roster.enter("a");
        new.ready();
        assert!(!new.announced().is_open());
        roster.written(BTreeSet::new(), false, now);
        assert!(names(&roster).wanted(now).0.is_empty(), "in quarantine");
    }

    #[test]
    fn a_failed_write_counts_the_guests_it_drops_as_withdrawn_and_is_made_again() {
        let roster = Arc::new(Roster::default());
        let now = Instant::now();
        let old = running(&roster, now);
        drop(old);
        roster.failed(&BTreeSet::new(), now);
        assert!(roster.begin(now).0.is_some(), "written again");
        let mut new = roster.enter("a");
        new.ready();
        assert!(!new.announced().is_open());
        assert_eq!(names(&roster).wanted(now).1, Some(now + QUARANTINE));
    }

    #[test]
    fn a_replacement_that_never_syncs_is_withdrawn_after_the_grace() {
        let roster = Arc::new(Roster::default());
        let now = Instant::now();
        let old = running(&roster, now);
        let hold = roster.hold("a");
        drop(old);
        let _new = roster.enter("a");
        drop(hold);
        let (wanted, wake) = names(&roster).wanted(Instant::now());
        assert_eq!(wanted, set(&["a"]));
        let end = wake.expect("the grace ends");
        assert!(names(&roster).wanted(end).0.is_empty());
    }

    #[test]
    fn announcements_are_read_back_from_annotations() {
        let (guests, leads) = announced(None);
        assert!(guests.is_empty() && !leads);
        let annotations = BTreeMap::from([
            (GUESTS_ANNOTATION.to_owned(), "a,b".to_owned()),
            (LEADS_ANNOTATION.to_owned(), "true".to_owned()),
        ]);
        assert_eq!(announced(Some(&annotations)), (set(&["a", "b"]), true));
    }
}
