//! Calls into a guest: a fresh instance of the pre-linked module for every call, under the
//! guest's limits. A trap, a missed deadline or exhausted memory fails only that call; the
//! deadline is wall-clock time, so it also ends a guest waiting in a WASI sleep or poll. Error
//! messages are cut at the limits' `error_bytes` and `map-keys` results at `map_keys`; what the
//! guest wrote to stdout and stderr reaches the host's log under the guest's rate limit. Every
//! call records its instantiation and export call times in the guest's [`CallTimes`](crate::wasm::env::CallTimes).

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::Store;

use crate::wasm::backend::{LogLine, Scope};
use crate::wasm::bindings::GuestInstance;
use crate::wasm::bindings::kubewasm::controller::log::Level;
use crate::wasm::bindings::types;
use crate::wasm::env::{CallContext, GuestEnv};
use crate::wasm::limits::CallLimits;
use crate::wasm::limits::truncate;
use crate::wasm::module::Module;
use crate::wasm::runtime::{Runtime, within_deadline};
use crate::wasm::state::CallState;

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
    /// The host had no room for the guest's instance: not the guest's failure; retry.
    #[error("host at capacity: {0}")]
    Busy(String),
}

/// Whose failure a failed reconcile is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    /// The module's own: it trapped, ran out of time or memory, or failed with no trouble of
    /// the API server's.
    Module,
    /// The API server refused, throttled or failed one of its calls, or a write the host made
    /// for it.
    Cluster,
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

/// Calls `reconcile` or `finalize` in a fresh instance of `module`; a failure comes with
/// whose it is: the cluster's when the guest failed after the API server refused, throttled or
/// failed one of its writes, else the module's.
pub async fn call(
    runtime: &Runtime,
    module: &Module,
    env: &Arc<GuestEnv>,
    limits: &CallLimits,
    scope: Scope,
    entry: Entry,
    request: types::Request,
) -> (Result<Outcome, Failure>, Blame) {
    let finalize = entry == Entry::Finalize;
    let export = async |guest: &GuestInstance, store: &mut Store<CallState>| {
        let answer = guest.reconcile(&mut *store, &request, finalize).await?;
        Ok((answer, store.data().cluster_trouble))
    };
    let result = in_fresh_instance(runtime, module, env, limits, Some(scope), export).await;
    let cut = |message| truncate(message, limits.error_bytes);
    let (answer, trouble) = match result {
        Ok(answered) => answered,
        Err(failure) => return (Err(failure), Blame::Module),
    };
    let blame = if trouble {
        Blame::Cluster
    } else {
        Blame::Module
    };
    let result = match answer {
        Ok(types::Outcome::Done) => Ok(Outcome::Done),
        Ok(types::Outcome::RequeueAfter(ms)) => {
            Ok(Outcome::RequeueAfter(Duration::from_millis(ms)))
        }
        Err(types::ReconcileError::Transient(message)) => Err(Failure::Transient(cut(message))),
        Err(types::ReconcileError::Permanent(message)) => Err(Failure::Permanent(cut(message))),
    };
    (result, blame)
}

/// Calls `map-keys` in a fresh instance of `module`. Keys beyond the limit's `map_keys` are
/// dropped with a warning.
pub async fn map_keys(
    runtime: &Runtime,
    module: &Module,
    env: &Arc<GuestEnv>,
    limits: &CallLimits,
    kind: types::Gvk,
    object: &str,
) -> Result<Vec<types::ObjectKey>, Failure> {
    let export = async |guest: &GuestInstance, store: &mut Store<CallState>| {
        guest.map_keys(store, &kind, object).await
    };
    let mut keys = in_fresh_instance(runtime, module, env, limits, None, export).await?;
    if keys.len() > limits.map_keys {
        tracing::warn!(
            guest = %env.name, returned = keys.len(), limit = limits.map_keys,
            "map-keys returned more keys than its limit; the keys beyond it are dropped"
        );
        keys.truncate(limits.map_keys);
    }
    Ok(keys)
}

/// Runs `export` in a fresh instance of `module` within the deadline of `limits`, records the
/// instantiation and call times, and forwards what the guest wrote to stdout and stderr.
async fn in_fresh_instance<T>(
    runtime: &Runtime,
    module: &Module,
    env: &Arc<GuestEnv>,
    limits: &CallLimits,
    scope: Option<Scope>,
    export: impl AsyncFnOnce(&GuestInstance, &mut Store<CallState>) -> wasmtime::Result<T>,
) -> Result<T, Failure> {
    // Held until the store is dropped; waiting for them does not count against the deadline.
    // The guest's own share first: a guest that holds all of it waits without holding the pool.
    let _share = env
        .share
        .clone()
        .acquire_owned()
        .await
        .expect("a guest's share is never closed");
    let _slot = runtime.slot().await;
    let start = Instant::now();
    let context = CallContext::new(env.clone(), scope);
    let writes = context.writes.clone();
    let mut store = runtime.store(context, limits);
    let mut instantiated = None;
    let result = within_deadline(limits, start, async {
        let instance = module.pre.instantiate(&mut store).await?;
        instantiated = Some(Instant::now());
        env.times.instantiate.observe(start.elapsed());
        export(&instance, &mut store).await
    })
    .await;
    if let Some(instantiated) = instantiated {
        env.times.call.observe(instantiated.elapsed());
    }
    // A write the deadline left on its way lands, or fails, within the host-call timeout.
    writes.close();
    writes.wait().await;
    forward_output(&store);
    result.map_err(|error| classify(error, limits, store.data().memory_exhausted()))
}

/// Why a call failed: its deadline passed, the host's pool of instances had none left of what
/// the instance needs, a memory could not grow (as the store's limiter recorded:
/// `memory_exhausted`), or it trapped otherwise.
fn classify(error: wasmtime::Error, limits: &CallLimits, memory_exhausted: bool) -> Failure {
    if error.downcast_ref::<wasmtime::Trap>() == Some(&wasmtime::Trap::Interrupt) {
        return Failure::Timeout(limits.timeout);
    }
    if let Some(full) = error
        .chain()
        .find_map(|e| e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>())
    {
        return Failure::Busy(full.to_string());
    }
    let message = truncate(trap_message(&error, limits.backtrace), limits.error_bytes);
    if memory_exhausted {
        Failure::OutOfMemory(format!(
            "the limit is {} bytes: {message}",
            limits.memory_bytes
        ))
    } else {
        Failure::Trap(message)
    }
}

/// The message of a trap, with the wasm backtrace wasmtime puts before it only if `backtrace`:
/// frames of the guest's runtime (a dozen for a Python exception) hide what trapped. The
/// message is cut like the guest's own error messages.
fn trap_message(error: &wasmtime::Error, backtrace: bool) -> String {
    let full = format!("{error:#}");
    match error.downcast_ref::<wasmtime::WasmBacktrace>() {
        Some(frames) if !backtrace => {
            (full.strip_prefix(&format!("{frames}: "))).map_or_else(|| full.clone(), str::to_owned)
        }
        _ => full,
    }
}

/// Hands what the guest wrote to stdout and stderr to the host's log, line by line under the
/// guest's rate limit, and whole to the backend; notes output dropped beyond the call's cap.
fn forward_output(store: &Store<CallState>) {
    let state = store.data();
    let env = &state.context.env;
    let (guest, key) = (&env.name, state.context.key());
    let per_second = state.limits.log_lines_per_second;
    let (stdout, stderr) = state.output();
    for (stream, captured) in [("stdout", stdout), ("stderr", stderr)] {
        if captured.bytes.is_empty() {
            continue;
        }
        let text = String::from_utf8_lossy(&captured.bytes).trim().to_owned();
        for line in text.lines().filter(|line| !line.trim().is_empty()) {
            if env.output.forward(guest, per_second) {
                tracing::info!(target: "guest", %guest, %key, stream, "{line}");
            }
        }
        if captured.dropped > 0 {
            tracing::warn!(
                target: "guest", %guest, %key, stream,
                "{stream} truncated: {} bytes beyond the limit of {} dropped",
                captured.dropped, state.limits.log_bytes
            );
        }
        env.backend.log(LogLine {
            level: Level::Info,
            message: text,
            fields: vec![("stream".into(), stream.into())],
        });
    }
    env.output.report(guest, per_second, Instant::now());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A core module whose `grow` asks for 64 MiB more and whose `trap` traps, run in a store
    /// of the host with a 1 MiB memory limit; returns how `export` failed.
    async fn fail(export: &str, backtrace: bool) -> Failure {
        let runtime = Runtime::new().unwrap();
        let context = CallContext::for_tests("classify");
        let limits = CallLimits {
            memory_bytes: 1 << 20,
            backtrace,
            ..CallLimits::default()
        };
        let mut store = runtime.store(context, &limits);
        let wat = r#"(module
            (memory 1)
            (func (export "grow") (drop (memory.grow (i32.const 1024))))
            (func (export "trap") unreachable))"#;
        let module = wasmtime::Module::new(store.engine(), wat::parse_str(wat).unwrap()).unwrap();
        let instance = wasmtime::Instance::new_async(&mut store, &module, &[])
            .await
            .unwrap();
        let function = instance
            .get_typed_func::<(), ()>(&mut store, export)
            .unwrap();
        let error = function.call_async(&mut store, ()).await.unwrap_err();
        classify(error, &limits, store.data().memory_exhausted())
    }

    #[tokio::test]
    async fn a_refused_memory_grow_is_out_of_memory_and_other_traps_are_traps() {
        let failure = fail("grow", false).await;
        assert!(
            matches!(&failure, Failure::OutOfMemory(m) if m.starts_with("the limit is 1048576 bytes")),
            "{failure:?}"
        );
        let failure = fail("trap", false).await;
        assert!(
            matches!(&failure, Failure::Trap(m) if m.starts_with("wasm trap: wasm `unreachable`")),
            "the trap alone: {failure:?}"
        );
        let failure = fail("trap", true).await;
        assert!(
            matches!(&failure, Failure::Trap(m) if m.starts_with("error while executing at wasm backtrace:")
                && m.ends_with("wasm trap: wasm `unreachable` instruction executed")),
            "on request, with the backtrace: {failure:?}"
        );
    }

    #[tokio::test]
    async fn an_instance_the_pool_has_no_room_for_is_the_host_at_capacity_not_a_trap() {
        // Room for one component instance: 4 core instances.
        let runtime = Runtime::with_instances(1).unwrap();
        let limits = CallLimits::default();
        let mut held = Vec::new();
        let error = loop {
            let mut store = runtime.store(CallContext::for_tests("capacity"), &limits);
            let module = wat::parse_str("(module)").unwrap();
            let module = wasmtime::Module::new(store.engine(), module).unwrap();
            match wasmtime::Instance::new_async(&mut store, &module, &[]).await {
                Ok(_) => held.push(store),
                Err(error) => break error,
            }
        };
        assert_eq!(held.len(), 4);
        let failure = classify(error, &limits, false);
        assert!(
            matches!(&failure, Failure::Busy(m) if m.contains("limit of 4")),
            "{failure:?}"
        );
    }
}
