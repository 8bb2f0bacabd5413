//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's rules and default
//! timings, so that only one replica of the host reconciles.
//!
//! Guarantees:
//! - the Lease is taken only when it is absent, has no holder, or its record has not changed
//!   for `leaseDurationSeconds` as measured by this process's monotonic clock since it first
//!   saw that record (remote timestamps are never compared with the local clock);
//! - every write is a create or a replace at the observed `resourceVersion`: of two candidates
//!   racing for one record, exactly one wins, the other sees 409 and tries again after the
//!   retry period;
//! - the leader renews every retry period; [`Leadership::lost`] resolves as soon as a renewal
//!   reads another holder or finds the Lease deleted, and when no renewal has succeeded within
//!   the renew deadline, at most renew deadline plus retry period after the last renewal:
//!   before another candidate may take the Lease over, as long as that is shorter than the
//!   lease duration (12 s against 15 s by default);
//! - [`Leadership::release`] stops renewing and empties the holder with a one-second duration,
//!   so a standby takes over at once; a renewal cancelled in flight may still land, so a
//!   conflicting release reads the Lease again and retries;
//! - a candidate watches the Lease and tries again on every change of it, and when the record
//!   it last saw expires, besides every retry period: a released Lease is taken within a round
//!   trip, an expired one as soon as it expires.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::StreamExt;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, timeout};
use tokio_util::sync::CancellationToken;

/// Where the in-cluster service account names the pod's namespace.
const NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Why leadership was not obtained or not released.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// Shutdown was asked for before this process became leader.
    #[error("shut down before becoming leader")]
    Cancelled,
    /// The Lease could not be read or written.
    #[error("Lease {namespace}/{name}: {source}")]
    Api {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// How long a Lease record stays valid, how long its holder keeps trying to renew it, and how
/// often candidates try: client-go's defaults (15 s, 10 s, 2 s) unless configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTimings {
    /// How long a record stays valid without renewal.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives leadership up.
    pub renew_deadline: Duration,
    /// How often candidates try to acquire, and the leader renews.
    pub retry_period: Duration,
}

impl Default for LeaseTimings {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl LeaseTimings {
    /// client-go's rules: the leader gives up (renew deadline) before a standby may take over
    /// (lease duration), and retries more than once within the renew deadline (its jitter
    /// factor is 1.2).
    pub fn validate(&self) -> Result<(), String> {
        let Self {
            lease_duration,
            renew_deadline,
            retry_period,
        } = *self;
        if retry_period.is_zero() {
            return Err("the retry period must be longer than 0".into());
        }
        if lease_duration <= renew_deadline {
            return Err(format!(
                "the lease duration {lease_duration:?} must be longer than the renew deadline \
                 {renew_deadline:?}"
            ));
        }
        if renew_deadline.as_secs_f64() <= 1.2 * retry_period.as_secs_f64() {
            return Err(format!(
                "the renew deadline {renew_deadline:?} must be longer than 1.2 times the retry \
                 period {retry_period:?}"
            ));
        }
        Ok(())
    }
}

/// Which Lease to hold, under which identity, with which timings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionConfig {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This candidate's identity, unique among the candidates.
    pub identity: String,
    /// How long records stay valid, and how often and how long renewals are tried.
    pub timings: LeaseTimings,
    /// Labels of the Lease when this candidate creates it.
    pub labels: BTreeMap<String, String>,
}

impl ElectionConfig {
    /// The Lease `namespace/name` with `timings` and [`default_identity`].
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        timings: LeaseTimings,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            identity: default_identity(),
            timings,
            labels: BTreeMap::new(),
        }
    }
}

/// This replica's name, as Events report it: `$POD_NAME`, else `$HOSTNAME`, else the kernel's
/// host name (never the same for two pods, whatever the environment sets), else `kubewasm`.
pub fn replica_name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        let kernel = || std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
        first_name([
            std::env::var("POD_NAME").ok(),
            std::env::var("HOSTNAME").ok(),
            kernel(),
        ])
    })
}

/// The first non-blank of `names`, trimmed, else `kubewasm`.
fn first_name(names: impl IntoIterator<Item = Option<String>>) -> String {
    names
        .into_iter()
        .flatten()
        .map(|name| name.trim().to_owned())
        .find(|name| !name.is_empty())
        .unwrap_or_else(|| "kubewasm".to_owned())
}

/// [`replica_name`] followed by `_` and a random suffix: unique per process even when replicas
/// share a host name.
pub fn default_identity() -> String {
    let suffix = RandomState::new().hash_one(std::process::id());
    format!("{}_{suffix:016x}", replica_name())
}

/// The namespace of the in-cluster service account, else `default`.
pub fn default_namespace() -> String {
    std::fs::read_to_string(NAMESPACE_FILE)
        .ok()
        .map(|ns| ns.trim().to_owned())
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "default".to_owned())
}

/// A candidate for the Lease.
#[derive(Clone)]
pub struct LeaderElector {
    api: Api<Lease>,
    config: ElectionConfig,
}

/// How one acquire-or-renew ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    /// This process holds the Lease.
    Held,
    /// Another candidate holds a Lease that has not expired.
    Taken,
    /// No answer, an error or a conflicting write: try again.
    Failed,
}

/// The last Lease record seen and when, by this process's clock, it was first seen.
struct Observed {
    spec: LeaseSpec,
    at: Instant,
}

impl Observed {
    /// When the record expires unless it changes, by this process's clock.
    fn expiry(&self) -> Instant {
        expiry(&self.spec, self.at)
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl LeaderElector {
    /// A candidate using `client`.
    pub fn new(client: Client, config: ElectionConfig) -> Self {
        Self {
            api: Api::namespaced(client, &config.namespace),
            config,
        }
    }

    /// The election's configuration.
    pub fn config(&self) -> &ElectionConfig {
        &self.config
    }

    /// The client it writes the Lease with.
    pub fn client(&self) -> kube::Client {
        self.api.clone().into_client()
    }

    /// Tries until this process holds the Lease, then renews it in the background: every retry
    /// period, on every change of the Lease and when the record last seen expires. Fails only
    /// with [`LeaderError::Cancelled`] once `shutdown` is cancelled; API errors are logged and
    /// retried.
    pub async fn run_until_leading(
        &self,
        shutdown: &CancellationToken,
    ) -> Result<Leadership, LeaderError> {
        let changed = Arc::new(Notify::new());
        let watch = tokio::spawn(self.clone().watch(changed.clone()));
        let _stop_watching = AbortOnDrop(watch);
        let mut observed = None;
        loop {
            let attempt = self.attempt(&mut observed, self.config.timings.renew_deadline);
            let attempt = tokio::select! {
                attempt = attempt => attempt,
                () = shutdown.cancelled() => return Err(LeaderError::Cancelled),
            };
            if attempt == Attempt::Held {
                return Ok(self.lead(observed));
            }
            // Held by another: try again when its record expires, if that comes first. After a
            // failure, only after the retry period, so as not to hammer a failing API server.
            let retry = self.config.timings.retry_period;
            let wait = match (&observed, attempt) {
                (Some(seen), Attempt::Taken) => {
                    retry.min(seen.expiry().saturating_duration_since(Instant::now()))
                }
                _ => retry,
            };
            tokio::select! {
                () = sleep(wait) => {}
                () = changed.notified() => {}
                () = shutdown.cancelled() => return Err(LeaderError::Cancelled),
            }
        }
    }

    /// Notifies `changed` of every change of the Lease, until aborted.
    async fn watch(self, changed: Arc<Notify>) {
        let config =
            watcher::Config::default().fields(&format!("metadata.name={}", self.config.name));
        let events = watcher(self.api.clone(), config).default_backoff();
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => changed.notify_one(),
                Ok(_) => {}
                Err(error) => {
                    tracing::debug!(lease = %self.lease_name(), %error, "watching the Lease")
                }
            }
        }
    }

    /// Starts the renewal task.
    fn lead(&self, mut observed: Option<Observed>) -> Leadership {
        let lost = CancellationToken::new();
        let stop = CancellationToken::new();
        let elector = self.clone();
        let renewal = tokio::spawn({
            let (lost, stop) = (lost.clone(), stop.clone());
            async move {
                loop {
                    tokio::select! {
                        () = sleep(elector.config.timings.retry_period) => {}
                        () = stop.cancelled() => return,
                    }
                    let renewed = tokio::select! {
                        renewed = elector.renew(&mut observed) => renewed,
                        () = stop.cancelled() => return,
                    };
                    if !renewed {
                        lost.cancel();
                        return;
                    }
                }
            }
        });
        Leadership {
            elector: self.clone(),
            lost,
            stop,
            renewal,
        }
    }

    /// Tries every retry period until one renewal succeeds (true), or the renew deadline
    /// passes or another candidate holds the Lease (false).
    async fn renew(&self, observed: &mut Option<Observed>) -> bool {
        let deadline = Instant::now() + self.config.timings.renew_deadline;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.attempt(observed, left).await {
                Attempt::Held => return true,
                Attempt::Taken => {
                    let holder = observed
                        .as_ref()
                        .and_then(|o| o.spec.holder_identity.clone());
                    tracing::warn!(lease = %self.lease_name(), ?holder, "another candidate holds the Lease");
                    return false;
                }
                Attempt::Failed => {}
            }
            if Instant::now() + self.config.timings.retry_period >= deadline {
                tracing::warn!(lease = %self.lease_name(), "the Lease was not renewed within the renew deadline");
                return false;
            }
            sleep(self.config.timings.retry_period).await;
        }
    }

    /// One acquire-or-renew within `limit`.
    async fn attempt(&self, observed: &mut Option<Observed>, limit: Duration) -> Attempt {
        match timeout(limit, self.try_acquire_or_renew(observed)).await {
            Ok(Ok(attempt)) => attempt,
            Ok(Err(error)) => {
                tracing::warn!(error = %self.error(error), "leader election");
                Attempt::Failed
            }
            Err(_) => {
                tracing::warn!(
                    lease = %self.lease_name(),
                    "leader election: no answer within {limit:?}"
                );
                Attempt::Failed
            }
        }
    }

    async fn try_acquire_or_renew(
        &self,
        observed: &mut Option<Observed>,
    ) -> Result<Attempt, kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            let ours = observed
                .as_ref()
                .is_some_and(|o| o.spec.holder_identity.as_deref() == Some(&self.config.identity));
            if ours {
                // Deleted under its holder: others may have counted it gone already.
                tracing::warn!(lease = %self.lease_name(), "the Lease was deleted while held");
                return Ok(Attempt::Taken);
            }
            let spec = next_record(None, &self.config, Timestamp::now());
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    labels: (!self.config.labels.is_empty()).then(|| self.config.labels.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec.clone()),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => {
                    *observed = Some(Observed {
                        spec,
                        at: Instant::now(),
                    });
                    Ok(Attempt::Held)
                }
                Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(Attempt::Failed),
                Err(error) => Err(error),
            };
        };
        let spec = lease.spec.take().unwrap_or_default();
        let now = Instant::now();
        let seen_at = match observed {
            Some(seen) if seen.spec == spec => seen.at,
            _ => now,
        };
        *observed = Some(Observed {
            spec: spec.clone(),
            at: seen_at,
        });
        if !may_take(&spec, &self.config.identity, seen_at, now) {
            tracing::debug!(holder = ?spec.holder_identity, "the Lease is held by another candidate");
            return Ok(Attempt::Taken);
        }
        let next = next_record(Some(&spec), &self.config, Timestamp::now());
        lease.spec = Some(next.clone());
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                *observed = Some(Observed {
                    spec: next,
                    at: Instant::now(),
                });
                Ok(Attempt::Held)
            }
            Err(kube::Error::Api(status)) if status.is_conflict() => Ok(Attempt::Failed),
            Err(error) => Err(error),
        }
    }

    fn lease_name(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    fn error(&self, source: kube::Error) -> LeaderError {
        LeaderError::Api {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            source,
        }
    }
}

/// Held leadership: renewed in the background until lost or released.
pub struct Leadership {
    elector: LeaderElector,
    lost: CancellationToken,
    stop: CancellationToken,
    renewal: JoinHandle<()>,
}

impl Leadership {
    /// Resolves once leadership is lost: no renewal succeeded within the renew deadline. From
    /// then on another candidate may hold the Lease, so the caller must stop reconciling.
    pub async fn lost(&self) {
        self.lost.cancelled().await;
    }

    /// Stops renewing and, unless leadership was lost, empties the Lease's holder so that a
    /// standby takes over at once; the same write sets `annotations` on the Lease.
    pub async fn release(self, annotations: &BTreeMap<String, String>) -> Result<(), LeaderError> {
        /// Conflicts a release survives: a cancelled renewal lands at most once.
        const ATTEMPTS: u32 = 3;
        self.stop.cancel();
        // The task ends at its next await point; it never panics.
        let _ = self.renewal.await;
        if self.lost.is_cancelled() {
            return Ok(());
        }
        let elector = &self.elector;
        let api = &elector.api;
        let name = &elector.config.name;
        let mut attempt = 1;
        loop {
            let mut lease = api.get(name).await.map_err(|e| elector.error(e))?;
            let spec = lease.spec.take().unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(elector.config.identity.as_str()) {
                return Ok(());
            }
            lease.spec = Some(released(&spec, Timestamp::now()));
            (lease.metadata.annotations.get_or_insert_default()).extend(annotations.clone());
            match api.replace(name, &PostParams::default(), &lease).await {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(status)) if status.is_conflict() && attempt < ATTEMPTS => {
                    attempt += 1;
                }
                Err(error) => return Err(elector.error(error)),
            }
        }
    }
}

/// Whether the record `spec`, unchanged since `seen_at`, has expired at `now`: its
/// `leaseDurationSeconds` (0 when absent) have passed on this process's clock.
pub fn expired(spec: &LeaseSpec, seen_at: Instant, now: Instant) -> bool {
    now >= expiry(spec, seen_at)
}

/// When the record `spec`, unchanged since `seen_at`, expires: its `leaseDurationSeconds` (0
/// when absent) later.
fn expiry(spec: &LeaseSpec, seen_at: Instant) -> Instant {
    let seconds = u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0);
    seen_at + Duration::from_secs(seconds)
}

/// Whether `identity` may write the record `spec`: it holds it already, nobody holds it, or the
/// holder let it expire.
fn may_take(spec: &LeaseSpec, identity: &str, seen_at: Instant, now: Instant) -> bool {
    match spec.holder_identity.as_deref() {
        None | Some("") => true,
        Some(holder) if holder == identity => true,
        Some(_) => expired(spec, seen_at, now),
    }
}

/// The record `config.identity` writes over `previous` at `now`: a renewal keeps the acquire
/// time and transitions; a new Lease starts at 0 transitions; a takeover counts one more.
fn next_record(previous: Option<&LeaseSpec>, config: &ElectionConfig, now: Timestamp) -> LeaseSpec {
    let duration = i32::try_from(config.timings.lease_duration.as_secs()).unwrap_or(i32::MAX);
    let renewing = previous.filter(|p| p.holder_identity.as_deref() == Some(&config.identity));
    let (acquire_time, transitions) = match (renewing, previous) {
        (Some(own), _) => (own.acquire_time.clone(), own.lease_transitions.unwrap_or(0)),
        (None, Some(other)) => (
            Some(MicroTime(now)),
            other.lease_transitions.unwrap_or(0).saturating_add(1),
        ),
        (None, None) => (Some(MicroTime(now)), 0),
    };
    LeaseSpec {
        holder_identity: Some(config.identity.clone()),
        lease_duration_seconds: Some(duration),
        acquire_time,
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    }
}

/// The record that gives up `previous` at `now`: no holder, a one-second duration, the
/// transitions kept.
fn released(previous: &LeaseSpec, now: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(String::new()),
        lease_duration_seconds: Some(1),
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        lease_transitions: previous.lease_transitions,
        ..LeaseSpec::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(holder: &str, seconds: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            lease_duration_seconds: Some(seconds),
            lease_transitions: Some(3),
            acquire_time: Some(MicroTime(Timestamp::UNIX_EPOCH)),
            renew_time: Some(MicroTime(Timestamp::UNIX_EPOCH)),
            ..LeaseSpec::default()
        }
    }

    fn config(identity: &str) -> ElectionConfig {
        ElectionConfig {
            identity: identity.to_owned(),
            ..ElectionConfig::new("ns", "lease", LeaseTimings::default())
        }
    }

    #[test]
    fn the_replica_name_is_the_first_name_set_and_the_kernel_s_without_hostname() {
        let name = |names: [Option<&str>; 3]| first_name(names.map(|n| n.map(str::to_owned)));
        assert_eq!(name([Some("pod-0"), Some("host"), Some("node\n")]), "pod-0");
        assert_eq!(name([None, Some(" "), Some("node-7\n")]), "node-7");
        assert_eq!(name([None, None, None]), "kubewasm");
    }

    #[test]
    fn a_lease_expires_its_duration_after_it_was_first_seen() {
        let seen = Instant::now();
        let spec = held_by("other", 15);
        assert!(!expired(&spec, seen, seen));
        assert!(!expired(&spec, seen, seen + Duration::from_millis(14_999)));
        assert!(expired(&spec, seen, seen + Duration::from_secs(15)));
        let no_duration = LeaseSpec {
            lease_duration_seconds: None,
            ..spec
        };
        assert!(expired(&no_duration, seen, seen));
    }

    #[test]
    fn a_live_lease_of_another_holder_is_not_taken() {
        let seen = Instant::now();
        let later = seen + Duration::from_secs(5);
        assert!(!may_take(&held_by("other", 15), "me", seen, later));
        assert!(may_take(&held_by("me", 15), "me", seen, later));
        assert!(may_take(&held_by("", 15), "me", seen, later));
        assert!(may_take(&LeaseSpec::default(), "me", seen, later));
        assert!(may_take(&held_by("other", 5), "me", seen, later));
    }

    #[test]
    fn a_takeover_counts_a_transition_and_restarts_the_acquire_time() {
        let now = Timestamp::from_second(1_000).unwrap();
        let next = next_record(Some(&held_by("other", 15)), &config("me"), now);
        assert_eq!(
            next,
            LeaseSpec {
                holder_identity: Some("me".into()),
                lease_duration_seconds: Some(15),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(4),
                ..LeaseSpec::default()
            }
        );
    }

    #[test]
    fn a_renewal_keeps_the_acquire_time_and_transitions() {
        let now = Timestamp::from_second(1_000).unwrap();
        let next = next_record(Some(&held_by("me", 15)), &config("me"), now);
        assert_eq!(next.acquire_time, Some(MicroTime(Timestamp::UNIX_EPOCH)));
        assert_eq!(next.renew_time, Some(MicroTime(now)));
        assert_eq!(next.lease_transitions, Some(3));
    }

    #[test]
    fn a_new_lease_starts_without_transitions() {
        let now = Timestamp::from_second(1_000).unwrap();
        let next = next_record(None, &config("me"), now);
        assert_eq!(next.holder_identity.as_deref(), Some("me"));
        assert_eq!(next.lease_transitions, Some(0));
        assert_eq!(next.acquire_time, Some(MicroTime(now)));
    }

    #[test]
    fn a_released_lease_has_no_holder_and_expires_at_once() {
        let now = Timestamp::from_second(1_000).unwrap();
        let spec = released(&held_by("me", 15), now);
        assert_eq!(spec.holder_identity.as_deref(), Some(""));
        assert_eq!(spec.lease_duration_seconds, Some(1));
        assert_eq!(spec.lease_transitions, Some(3));
        assert!(may_take(&spec, "other", Instant::now(), Instant::now()));
    }

    #[test]
    fn identities_differ_per_candidate() {
        let (a, b) = (default_identity(), default_identity());
        assert_ne!(a, b);
        assert!(a.contains('_'), "{a}");
    }
}
