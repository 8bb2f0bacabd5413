//! A guest's environment: what every call of one guest shares (its declaration, backend,
//! permissions, log rate limit and call times), and the context of one call.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use tokio_util::task::TaskTracker;

use crate::histogram::{GUEST_CALL_BUCKETS, Histogram};
use crate::wasm::backend::{Backend, Scope};
use crate::wasm::declaration::Declared;
use crate::wasm::limits::RateLimit;
use crate::wasm::permissions::Permissions;

/// What every call of one guest shares.
pub struct GuestEnv {
    /// The guest's name, used in logs.
    pub name: String,
    /// What the guest declared.
    pub declared: Declared,
    /// Where checked calls go.
    pub backend: Arc<dyn Backend>,
    /// Deadline of one backend call that may reach the API server.
    pub host_call_timeout: Duration,
    /// What the operator granted.
    pub permissions: Permissions,
    /// Calls refused because the kind was not declared or the verb not granted.
    pub denied: AtomicU64,
    /// The rate limit of the guest's lines into the host's log, across its calls.
    pub output: RateLimit,
    /// How long its calls take, recorded by [`crate::wasm::dispatch`].
    pub times: CallTimes,
    /// One permit per instance the guest may hold at once (its share of the host's pool),
    /// taken before the pool's own.
    pub share: Arc<tokio::sync::Semaphore>,
}

impl GuestEnv {
    /// The environment of guest `name`, with no call denied or timed yet.
    pub fn new(
        name: &str,
        declared: Declared,
        backend: Arc<dyn Backend>,
        host_call_timeout: Duration,
        permissions: Permissions,
    ) -> Self {
        Self {
            name: name.to_owned(),
            declared,
            backend,
            host_call_timeout,
            permissions,
            denied: AtomicU64::new(0),
            output: RateLimit::default(),
            times: CallTimes::default(),
            share: Arc::new(tokio::sync::Semaphore::new(
                tokio::sync::Semaphore::MAX_PERMITS,
            )),
        }
    }

    /// This environment with at most `instances` instances of the guest alive at once.
    #[must_use]
    pub fn with_instances(mut self, instances: u32) -> Self {
        let permits = usize::try_from(instances)
            .unwrap_or(usize::MAX)
            .clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
        self.share = Arc::new(tokio::sync::Semaphore::new(permits));
        self
    }
}

/// The guest's view of the host during one call.
pub struct CallContext {
    /// Shared by every call of the guest.
    pub env: Arc<GuestEnv>,
    /// The object being reconciled, if the call is a reconcile or finalize.
    pub scope: Option<Scope>,
    /// The backend calls of the guest's call, each on a task of its own: a write on its way
    /// when the call ends (its deadline passed) is awaited before the call's failure is
    /// reported, so that a retry reads it in the cache.
    pub writes: TaskTracker,
}

impl CallContext {
    /// The context of one call of the guest of `env`, on `scope` if it is a reconcile or
    /// finalize.
    pub fn new(env: Arc<GuestEnv>, scope: Option<Scope>) -> Self {
        Self {
            env,
            scope,
            writes: TaskTracker::new(),
        }
    }
}

#[cfg(test)]
impl CallContext {
    /// A context for unit tests: a ConfigMap controller named `name` on an empty fixture, with no
    /// grants configured and no reconcile in progress.
    pub(crate) fn for_tests(name: &str) -> Self {
        let env = GuestEnv::new(
            name,
            Declared {
                primary: kube::api::GroupVersionKind::gvk("", "v1", "ConfigMap"),
                owns: Vec::new(),
                watches: Vec::new(),
            },
            Arc::new(crate::wasm::offline::OfflineBackend::default()),
            Duration::from_secs(1),
            Permissions::new(None),
        );
        Self::new(Arc::new(env), None)
    }
}

impl CallContext {
    /// The key being reconciled, `namespace/name` or `name`; empty outside a reconcile.
    pub fn key(&self) -> String {
        self.scope
            .as_ref()
            .map(|s| match &s.namespace {
                Some(ns) => format!("{ns}/{}", s.name),
                None => s.name.clone(),
            })
            .unwrap_or_default()
    }
}

/// How long one guest's calls take.
#[derive(Debug)]
pub struct CallTimes {
    /// Creating the store and instantiating the component, for each call that got an instance.
    pub instantiate: Histogram,
    /// The export call, until it returned, trapped or ran past its deadline.
    pub call: Histogram,
}

impl Default for CallTimes {
    /// Nothing recorded yet.
    fn default() -> Self {
        Self {
            instantiate: Histogram::new(GUEST_CALL_BUCKETS),
            call: Histogram::new(GUEST_CALL_BUCKETS),
        }
    }
}
