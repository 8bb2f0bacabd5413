//! The host as WasmController objects see it: a module run, stopped, reviewed or counted
//! for an object.

use std::sync::Arc;

use async_trait::async_trait;

use crate::config::ModuleConfig;
use crate::control::tally::Tally;
use crate::manage::names::GuestKey;
use crate::manage::objects::{ControllerKey, Guests, Loaded};
use crate::manage::refusal::Refusal;
use crate::wasm::module::Module;
use crate::wasm::module_bytes::ModuleBytes;

use super::{HostError, Shared};

#[async_trait]
impl Guests for Shared {
    async fn run(
        &self,
        key: &ControllerKey,
        created: &str,
        origin: String,
        bytes: ModuleBytes,
        config: &ModuleConfig,
    ) -> Result<(Loaded, Arc<Module>, String), Refusal> {
        let key = GuestKey::from(key);
        self.names.created(&key, created);
        match self.put(key.clone(), origin, bytes, config).await {
            Ok(loaded) => {
                let controller = self.guest(&key).ok_or(Refusal {
                    reason: "Stopping",
                    message: "the host is shutting down".into(),
                    transient: true,
                })?;
                Ok((loaded, controller.module(), controller.name().to_owned()))
            }
            Err(error) => Err(Refusal {
                reason: error.reason(),
                message: error.to_string(),
                // What the host may do, which kinds exist and which names are taken change
                // without the object.
                transient: matches!(
                    error,
                    HostError::DuplicateName { .. }
                        | HostError::NotPermitted { .. }
                        | HostError::AccessReview(_)
                        | HostError::Unresolved { .. }
                ),
            }),
        }
    }

    async fn stop(&self, key: &ControllerKey) -> bool {
        let key = GuestKey::from(key);
        let stopped = self.unload(&key).await;
        self.names.forget(&key);
        self.needs.lock().expect("needs lock").remove(&key);
        stopped
    }

    fn running(&self, key: &ControllerKey) -> bool {
        self.guest(&GuestKey::from(key)).is_some()
    }

    async fn review(&self, key: &ControllerKey) -> Result<(), Refusal> {
        let key = GuestKey::from(key);
        let Some(controller) = self.guest(&key) else {
            return Ok(());
        };
        let needs = self.needs.lock().expect("needs lock").get(&key).cloned();
        let origin = controller.module().origin.clone();
        let permitted = self
            .permitted(controller.name(), &origin, &needs.unwrap_or_default())
            .await;
        match permitted {
            Ok(()) | Err(HostError::AccessReview(_)) => Ok(()),
            Err(error) => {
                tracing::warn!(guest = %controller.name(), %error, "the host may no longer do what the guest may; stopping it");
                self.unload(&key).await;
                Err(Refusal {
                    reason: error.reason(),
                    message: error.to_string(),
                    transient: true,
                })
            }
        }
    }

    fn tally(&self, key: &ControllerKey) -> Option<Tally> {
        let key = GuestKey::from(key);
        self.guest(&key).map(|c| c.tally())
    }

    fn refused(&self, reason: &'static str) {
        let mut refused = self.counters.refused.lock().expect("refusals lock");
        *refused.entry(reason).or_default() += 1;
    }
}
