//! The revisions of a controller object: the modules that ran for it, newest first, as its
//! status keeps them, and the probation of a new one.
//!
//! A revision that starts after another is on probation for the rollback window: if its
//! reconciles fail `failures` times in a row in that time, it is bad, and the one before it runs
//! again. A bad revision is remembered with the generation of the spec it ran for, and not
//! loaded again for that generation; a new digest under the same tag, or a new spec, is.

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::config::controller::Rollback;
use crate::control::tally::Tally;

/// Why a revision stopped running: a newer one replaced it.
pub const SUPERSEDED: &str = "Superseded";
/// Why a revision stopped running: it failed, and the last good one runs again.
pub const ROLLED_BACK: &str = "RolledBack";
/// Why a revision stopped running: the controller was paused.
pub const PAUSED: &str = "Paused";

pub use crate::config::resource::{Revision, RolledBack};

/// The revisions of one object, newest first, and the last one rolled back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    /// Newest first; the first runs while `running` is set.
    pub revisions: Vec<Revision>,
    /// The last bad revision.
    pub rolled_back: Option<RolledBack>,
}

impl History {
    /// The history an object's `status` records; entries that do not parse are left out.
    pub fn from_status(status: Option<&Value>) -> Self {
        let revisions = status
            .and_then(|s| s.get("revisions"))
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(|r| serde_json::from_value(r.clone()).ok())
                    .collect()
            })
            .unwrap_or_default();
        let rolled_back = status
            .and_then(|s| s.get("rolledBack"))
            .and_then(|r| serde_json::from_value(r.clone()).ok());
        Self {
            revisions,
            rolled_back,
        }
    }

    /// Records that `revision` started at `now`: the one running before it, if any, was
    /// superseded. Keeps the running one and at most `limit` replaced ones.
    pub fn started(&mut self, mut revision: Revision, now: &str, limit: u32) {
        self.stop_running(now, SUPERSEDED, None);
        revision.started = now.to_owned();
        revision.replaced = None;
        revision.reason = None;
        revision.message = None;
        self.revisions.insert(0, revision);
        self.revisions.truncate(1 + limit as usize);
    }

    /// Records that the running revision, `bad`, was rolled back at `now` for `message`, and
    /// remembers it as bad for the spec's `generation`.
    pub fn rolled_back(&mut self, bad: &Revision, generation: i64, message: &str, now: &str) {
        if self
            .revisions
            .first()
            .is_some_and(|r| r.replaced.is_none() && r.module_digest == bad.module_digest)
        {
            self.stop_running(now, ROLLED_BACK, Some(message));
        }
        self.rolled_back = Some(RolledBack {
            digest: bad.digest.clone(),
            module_digest: bad.module_digest.clone(),
            observed_generation: generation,
            message: message.to_owned(),
        });
    }

    /// Whether the module `module_digest` (`sha256:...`) was rolled back for `generation`.
    pub fn is_bad(&self, module_digest: &str, generation: i64) -> bool {
        self.rolled_back.as_ref().is_some_and(|r| {
            r.module_digest == module_digest && r.observed_generation == generation
        })
    }

    /// The newest revision that ran, other than `except` (a `sha256:...` module digest), and
    /// was not rolled back.
    pub fn last_good(&self, except: &str) -> Option<&Revision> {
        self.revisions.iter().find(|r| {
            r.module_digest != except
                && r.reason.as_deref() != Some(ROLLED_BACK)
                && self
                    .rolled_back
                    .as_ref()
                    .is_none_or(|b| b.module_digest != r.module_digest)
        })
    }

    /// How long ago, at `now`, the running revision started, when it replaced a module that ran
    /// before it: a new revision whose probation another host began (before a restart or a
    /// failover). `None` when it is the first, or its start does not parse.
    pub fn running_since(&self, now: Timestamp) -> Option<Duration> {
        let [running, before, ..] = self.revisions.as_slice() else {
            return None;
        };
        // Replacing one rolled back, it is the good one that ran before: not new.
        if running.replaced.is_some()
            || running.module_digest == before.module_digest
            || before.reason.as_deref() == Some(ROLLED_BACK)
        {
            return None;
        }
        let started: Timestamp = running.started.parse().ok()?;
        Duration::try_from(now.duration_since(started)).ok()
    }

    /// This history with what `other` (the object's status, as another writer left it)
    /// records that this one does not: its revisions, newest first, and its rollback when this
    /// one has none; at most `limit` replaced revisions are kept.
    pub fn merged(&self, other: &History, limit: u32) -> History {
        let mut revisions = self.revisions.clone();
        for theirs in &other.revisions {
            let known = revisions
                .iter()
                .any(|r| r.module_digest == theirs.module_digest && r.started == theirs.started);
            if !known {
                revisions.push(theirs.clone());
            }
        }
        // Newest first; a start that does not parse goes last. The sort is stable.
        let started = |r: &Revision| r.started.parse::<Timestamp>().ok();
        revisions.sort_by_key(|r| std::cmp::Reverse(started(r)));
        revisions.truncate(1 + limit as usize);
        History {
            revisions,
            rolled_back: self
                .rolled_back
                .clone()
                .or_else(|| other.rolled_back.clone()),
        }
    }

    /// Marks the running revision stopped, if one runs.
    fn stop_running(&mut self, now: &str, reason: &str, message: Option<&str>) {
        if let Some(running) = self.revisions.first_mut()
            && running.replaced.is_none()
        {
            running.replaced = Some(now.to_owned());
            running.reason = Some(reason.to_owned());
            running.message = message.map(str::to_owned);
        }
    }
}

/// A new revision on probation: bad if its reconciles fail too often, too soon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probation {
    started: Instant,
    /// Failed reconciles counted before it started.
    failed_before: u64,
    rollback: Rollback,
}

impl Probation {
    /// A revision that started at `started` on a guest whose tally was `before`.
    pub fn new(started: Instant, before: &Tally, rollback: Rollback) -> Self {
        Self {
            started,
            failed_before: before.failed,
            rollback,
        }
    }

    /// Follows the spec's rollback as it changes.
    pub fn set_rollback(&mut self, rollback: Rollback) {
        self.rollback = rollback;
    }

    /// Whether the probation is over at `now`: the revision is good.
    pub fn passed(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.started) >= self.rollback.window
    }

    /// Why the revision is bad, given the guest's `tally` at `now`: within the window, the
    /// module's own reconciles failed `failures` times or more in a row, all of them its own,
    /// on every key the guest holds or on several distinct keys. Failures the API server
    /// caused (conflicts, throttling, its errors and timeouts) do not count: they are the
    /// cluster's, not the module's.
    pub fn verdict(&self, tally: &Tally, now: Instant) -> Option<String> {
        let failures = u64::from(self.rollback.failures);
        let own = tally.failed.saturating_sub(self.failed_before);
        if self.passed(now)
            || !tally.module_failing
            || tally.module_failures < failures
            || own < failures
        {
            return None;
        }
        let mut message = format!(
            "its reconciles failed {} times in a row within {} of its start",
            tally.module_failures,
            human(self.rollback.window)
        );
        if let Some(error) = &tally.last_error {
            message.push_str(&format!("; the last: {error}"));
        }
        Some(message)
    }
}

/// `window` as the spec writes it: `10m`, `90s`.
fn human(window: Duration) -> String {
    let seconds = window.as_secs();
    if seconds.is_multiple_of(3600) && seconds > 0 {
        format!("{}h", seconds / 3600)
    } else if seconds.is_multiple_of(60) && seconds > 0 {
        format!("{}m", seconds / 60)
    } else {
        format!("{seconds}s")
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use serde_json::json;

    use super::*;

    fn revision(digest: &str) -> Revision {
        Revision {
            digest: format!("sha256:{digest}"),
            image: Some(format!("registry.test/podset@sha256:{digest}")),
            module_digest: format!("sha256:m{digest}"),
            started: String::new(),
            replaced: None,
            reason: None,
            message: None,
        }
    }

    fn tally(failed: u64, consecutive_failures: u64) -> Tally {
        Tally {
            loaded_at: SystemTime::UNIX_EPOCH,
            digest: String::new(),
            succeeded: 0,
            requeued: 0,
            failed,
            traps: 0,
            timeouts: 0,
            out_of_memory: 0,
            denied: 0,
            output_dropped: 0,
            consecutive_failures,
            failing: false,
            module_failures: consecutive_failures,
            module_failing: true,
            last_error: Some("boom".into()),
            shard_labels_failing: None,
        }
    }

    #[test]
    fn a_new_revision_supersedes_the_running_one_and_the_history_is_bounded() {
        let mut history = History::default();
        history.started(revision("a"), "t1", 1);
        history.started(revision("b"), "t2", 1);
        history.started(revision("c"), "t3", 1);
        let digests: Vec<_> = history
            .revisions
            .iter()
            .map(|r| r.digest.as_str())
            .collect();
        assert_eq!(digests, ["sha256:c", "sha256:b"]);
        assert_eq!(history.revisions[0].replaced, None);
        assert_eq!(history.revisions[1].replaced.as_deref(), Some("t3"));
        assert_eq!(history.revisions[1].reason.as_deref(), Some(SUPERSEDED));
        assert_eq!(history.revisions[1].started, "t2");
    }

    #[test]
    fn a_rolled_back_revision_is_bad_for_its_generation_only_and_never_the_last_good() {
        let mut history = History::default();
        history.started(revision("a"), "t1", 10);
        history.started(revision("b"), "t2", 10);
        let bad = history.revisions[0].clone();
        history.rolled_back(&bad, 3, "failed", "t3");
        assert_eq!(history.revisions[0].reason.as_deref(), Some(ROLLED_BACK));
        assert!(history.is_bad("sha256:mb", 3));
        assert!(!history.is_bad("sha256:mb", 4), "a new spec tries it again");
        assert!(!history.is_bad("sha256:ma", 3));
        assert_eq!(history.last_good("sha256:mb").unwrap().digest, "sha256:a");
        // The good one runs again: a revision of its own, and the bad one stays excluded.
        history.started(revision("a"), "t4", 10);
        assert_eq!(history.last_good("sha256:ma"), None);
    }

    #[test]
    fn a_new_revision_started_elsewhere_is_still_new() {
        let now: Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        let mut history = History::default();
        history.started(revision("a"), "2026-01-01T00:00:00Z", 10);
        assert_eq!(
            history.running_since(now),
            None,
            "the first is never on probation"
        );
        history.started(revision("b"), "2026-01-01T00:09:00Z", 10);
        assert_eq!(history.running_since(now), Some(Duration::from_secs(60)));
        // The same module again, after a pause: not new.
        history.revisions[0].replaced = Some("2026-01-01T00:09:30Z".into());
        history.started(revision("b"), "2026-01-01T00:09:40Z", 10);
        assert_eq!(history.running_since(now), None);
        // The good one, run again in place of one rolled back: not new.
        let bad = history.revisions[0].clone();
        history.rolled_back(&bad, 1, "failed", "2026-01-01T00:09:45Z");
        history.started(revision("a"), "2026-01-01T00:09:46Z", 10);
        assert_eq!(history.running_since(now), None);
        history.started(revision("c"), "not a time", 10);
        assert_eq!(history.running_since(now), None);
        history.revisions[0].replaced = Some("2026-01-01T00:09:50Z".into());
        assert_eq!(history.running_since(now), None, "nothing runs");
    }

    #[test]
    fn a_merged_history_keeps_what_another_writer_recorded() {
        let mut ours = History::default();
        ours.started(revision("a"), "2026-01-01T00:00:00Z", 10);
        ours.started(revision("b"), "2026-01-01T00:02:00.5Z", 10);
        let mut theirs = History::default();
        theirs.started(revision("a"), "2026-01-01T00:00:00Z", 10);
        theirs.started(revision("c"), "2026-01-01T00:02:00Z", 10);
        let bad = theirs.revisions[0].clone();
        theirs.rolled_back(&bad, 3, "failed", "2026-01-01T00:03:00Z");
        let merged = ours.merged(&theirs, 10);
        let digests: Vec<_> = merged.revisions.iter().map(|r| r.digest.as_str()).collect();
        assert_eq!(digests, ["sha256:b", "sha256:c", "sha256:a"]);
        assert_eq!(merged.rolled_back, theirs.rolled_back);
        assert_eq!(ours.merged(&theirs, 1).revisions.len(), 2, "bounded");
        assert_eq!(ours.merged(&History::default(), 10), ours);
    }

    #[test]
    fn the_history_round_trips_through_status() {
        let mut history = History::default();
        history.started(revision("a"), "t1", 10);
        history.started(revision("b"), "t2", 10);
        let bad = history.revisions[0].clone();
        history.rolled_back(&bad, 2, "failed", "t3");
        let status = json!({
            "revisions": history.revisions,
            "rolledBack": history.rolled_back,
            "other": 1,
        });
        assert_eq!(History::from_status(Some(&status)), history);
        assert_eq!(History::from_status(None), History::default());
        let garbled = json!({"revisions": [{"digest": 1}], "rolledBack": "x"});
        assert_eq!(History::from_status(Some(&garbled)), History::default());
    }

    #[test]
    fn a_revision_is_bad_after_enough_failures_of_its_own_within_the_window() {
        let rollback = Rollback {
            enabled: true,
            failures: 3,
            window: Duration::from_secs(60),
        };
        let start = Instant::now();
        // Two failures carried over from the previous revision do not count.
        let probation = Probation::new(start, &tally(10, 2), rollback);
        assert_eq!(probation.verdict(&tally(11, 3), start), None);
        let verdict = probation.verdict(&tally(13, 5), start).unwrap();
        assert!(
            verdict.contains("failed 5 times in a row within 1m"),
            "{verdict}"
        );
        assert!(verdict.contains("boom"), "{verdict}");
        // A success in between resets the run.
        assert_eq!(probation.verdict(&tally(13, 1), start), None);
        let later = start + Duration::from_secs(61);
        assert!(probation.passed(later));
        assert_eq!(probation.verdict(&tally(20, 10), later), None);
    }

    #[test]
    fn failures_of_the_cluster_or_of_one_key_among_many_are_no_verdict() {
        let rollback = Rollback {
            enabled: true,
            failures: 3,
            window: Duration::from_secs(60),
        };
        let start = Instant::now();
        let probation = Probation::new(start, &tally(0, 0), rollback);
        // Five 409s or 429s in a row: the API server's answers, not the module's failures.
        let cluster = Tally {
            module_failures: 0,
            module_failing: false,
            ..tally(5, 5)
        };
        assert_eq!(probation.verdict(&cluster, start), None);
        // One key stuck while others idle: its failures are not spread over the guest's keys.
        let one_key = Tally {
            module_failing: false,
            ..tally(5, 5)
        };
        assert_eq!(probation.verdict(&one_key, start), None);
    }
}
