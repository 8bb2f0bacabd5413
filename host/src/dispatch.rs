//! Calls into a guest: a fresh instance of the pre-linked module for every call, under the
//! guest's limits. A trap, a missed deadline or exhausted memory fails only that call.

use std::sync::Arc;
use std::time::Duration;

use crate::backend::Scope;
use crate::bindings::types;
use crate::imports::{CallContext, GuestEnv};
use crate::module::Module;
use crate::runtime::{CallState, Limits, Runtime};

/// Why a call into a guest did not return a result. These are guest failures: the host and
/// every other guest carry on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// The guest returned a transient error: retry with backoff.
    #[error("transient error: {0}")]
    Transient(String),
    /// The guest returned a permanent error: do not retry until the object changes.
    #[error("permanent error: {0}")]
    Permanent(String),
    /// The call ran past its deadline.
    #[error("deadline of {0:?} exceeded")]
    Timeout(Duration),
    /// The guest tried to grow its memory past the limit.
    #[error("memory limit exceeded: {0}")]
    OutOfMemory(String),
    /// The guest trapped (a panic, an unreachable, a bad memory access, ...).
    #[error("trapped: {0}")]
    Trap(String),
}

/// How a successful call ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing more to do.
    Done,
    /// Reconcile again after this delay.
    RequeueAfter(Duration),
}

/// Which export to call with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// `reconcile`.
    Reconcile,
    /// `finalize`.
    Finalize,
}

/// Calls `reconcile` or `finalize` in a fresh instance of `module`.
pub async fn call(
    runtime: &Runtime,
    module: &Module,
    env: &Arc<GuestEnv>,
    limits: &Limits,
    scope: Scope,
    entry: Entry,
    request: types::Request,
) -> Result<Outcome, Failure> {
    let context = CallContext {
        env: env.clone(),
        scope: Some(scope),
    };
    let mut store = runtime.store(context, limits);
    let result = async {
        let instance = module.pre.instantiate_async(&mut store).await?;
        let guest = instance.kubewasm_controller_guest();
        match entry {
            Entry::Reconcile => guest.call_reconcile(&mut store, &request).await,
            Entry::Finalize => guest.call_finalize(&mut store, &request).await,
        }
    }
    .await;
    forward_output(&store, env);
    match result {
        Ok(Ok(types::Outcome::Done)) => Ok(Outcome::Done),
        Ok(Ok(types::Outcome::RequeueAfter(ms))) => {
            Ok(Outcome::RequeueAfter(Duration::from_millis(ms)))
        }
        Ok(Err(types::ReconcileError::Transient(message))) => Err(Failure::Transient(message)),
        Ok(Err(types::ReconcileError::Permanent(message))) => Err(Failure::Permanent(message)),
        Err(error) => Err(classify(error, limits)),
    }
}

/// Calls `map-keys` in a fresh instance of `module`.
pub async fn map_keys(
    runtime: &Runtime,
    module: &Module,
    env: &Arc<GuestEnv>,
    limits: &Limits,
    kind: types::Gvk,
    object: &str,
) -> Result<Vec<types::ObjectKey>, Failure> {
    let context = CallContext {
        env: env.clone(),
        scope: None,
    };
    let mut store = runtime.store(context, limits);
    let result = async {
        let instance = module.pre.instantiate_async(&mut store).await?;
        instance
            .kubewasm_controller_guest()
            .call_map_keys(&mut store, &kind, object)
            .await
    }
    .await;
    forward_output(&store, env);
    result.map_err(|error| classify(error, limits))
}

fn classify(error: wasmtime::Error, limits: &Limits) -> Failure {
    if error.downcast_ref::<wasmtime::Trap>() == Some(&wasmtime::Trap::Interrupt) {
        return Failure::Timeout(limits.timeout);
    }
    let message = format!("{error:#}");
    if message.contains("memory") && message.contains("grow") {
        Failure::OutOfMemory(message)
    } else {
        Failure::Trap(message)
    }
}

fn forward_output(store: &wasmtime::Store<CallState>, env: &GuestEnv) {
    let (stdout, stderr) = store.data().output();
    for (stream, bytes) in [("stdout", stdout), ("stderr", stderr)] {
        if !bytes.is_empty() {
            let text = String::from_utf8_lossy(&bytes);
            tracing::info!(target: "guest", guest = %env.name, stream, "{}", text.trim_end());
        }
    }
}
