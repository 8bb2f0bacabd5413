//! The imports of contract 0.1.0, served by the current ones with 0.1.0's rules: an owned
//! apply adopts an existing object that nothing controls, and a status apply is always forced.

use crate::wasm::bindings::kubewasm::controller::{events, log, types, writes};
use crate::wasm::bindings::v0_1::kubewasm::controller::{
    events as old_events, log as old_log, types as old, writes as old_writes,
};
use crate::wasm::bindings::{CACHE_INTERFACE_0_1, same_cases, same_record};
use crate::wasm::state::CallState;
use wasmtime::component::Linker;

use events::{Event, EventType};
use log::Level;
use old::{ApiStatus as OldStatus, Error as OldError};
use old_events::{Event as OldEvent, EventType as OldEventType};
use old_log::Level as OldLevel;
use old_writes::{PatchType as OldPatchType, Preconditions as OldPreconditions};
use types::{ApiStatus, Error};
use writes::{PatchType, Preconditions};

same_record!(ApiStatus => OldStatus { code, reason, message });
same_cases!(Error => OldError {} { Api, Denied, Invalid, Unavailable });
same_record!(OldPreconditions => Preconditions { uid, resource_version });
same_cases!(OldPatchType => PatchType { Merge, Json } {});
same_cases!(OldEventType => EventType { Normal, Warning } {});
same_cases!(OldLevel => Level { Trace, Debug, Info, Warn, Error } {});
same_record!(OldEvent => Event {
    regarding_kind, regarding_namespace, regarding_name, event_type, reason, action, note
});

/// A current answer as 0.1.0's.
fn older<T>(answer: wasmtime::Result<Result<T, Error>>) -> wasmtime::Result<Result<T, OldError>> {
    answer.map(|result| result.map_err(Into::into))
}

impl old::Host for CallState {}

/// Links the `cache` imports of contract 0.1.0, served by the current ones as
/// [`imports::link_cache`](crate::wasm::imports::link_cache) serves them.
pub fn link_cache(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    let mut cache = linker.instance(CACHE_INTERFACE_0_1)?;
    cache.func_wrap(
        "get",
        |mut store, (kind, ns, name): (old::Gvk, Option<String>, String)| {
            Ok((older(store.data_mut().get(kind.into(), ns, name))?,))
        },
    )?;
    cache.func_wrap(
        "list",
        |mut store, (kind, ns, selector): (old::Gvk, Option<String>, Option<String>)| {
            Ok((older(store.data_mut().list(kind.into(), ns, selector))?,))
        },
    )?;
    Ok(())
}

impl old_writes::Host for CallState {
    async fn apply(
        &mut self,
        object: String,
        options: old_writes::ApplyOptions,
    ) -> wasmtime::Result<Result<String, OldError>> {
        let options = writes::ApplyOptions {
            owned: options.owned,
            force: options.force,
            adopt: true,
        };
        older(writes::Host::apply(self, object, options).await)
    }

    async fn apply_status(&mut self, object: String) -> wasmtime::Result<Result<String, OldError>> {
        let options = writes::StatusOptions { force: true };
        older(writes::Host::apply_status(self, object, options).await)
    }

    async fn delete(
        &mut self,
        kind: old::Gvk,
        namespace: Option<String>,
        name: String,
        preconditions: OldPreconditions,
    ) -> wasmtime::Result<Result<(), OldError>> {
        let preconditions = preconditions.into();
        older(writes::Host::delete(self, kind.into(), namespace, name, preconditions).await)
    }

    async fn patch(
        &mut self,
        kind: old::Gvk,
        namespace: Option<String>,
        name: String,
        patch_type: OldPatchType,
        patch: String,
    ) -> wasmtime::Result<Result<String, OldError>> {
        let patch_type = patch_type.into();
        older(writes::Host::patch(self, kind.into(), namespace, name, patch_type, patch).await)
    }
}

impl old_events::Host for CallState {
    async fn record_event(&mut self, event: OldEvent) -> wasmtime::Result<Result<(), OldError>> {
        older(events::Host::record_event(self, event.into()).await)
    }
}

impl old_log::Host for CallState {
    async fn log(
        &mut self,
        level: OldLevel,
        message: String,
        fields: Vec<(String, String)>,
    ) -> wasmtime::Result<()> {
        log::Host::log(self, level.into(), message, fields).await
    }
}
