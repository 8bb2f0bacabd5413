//! The API resources behind kinds: each kind resolved through discovery once, remembered with
//! whether it is namespaced, and API handles for it.

use std::collections::HashMap;
#[cfg(test)]
use std::sync::Arc;
use std::sync::RwLock;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::discovery::{self, Scope};
use kube::{Api, Client};

/// The API resources behind kinds, resolved through discovery and remembered.
pub struct Resources {
    client: Client,
    known: RwLock<HashMap<GroupVersionKind, (ApiResource, bool)>>,
}

impl Resources {
    /// An empty registry.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            known: RwLock::default(),
        }
    }

    /// The resource of `kind` and whether it is namespaced.
    pub async fn resolve(
        &self,
        kind: &GroupVersionKind,
    ) -> Result<(ApiResource, bool), kube::Error> {
        if let Some(known) = self.known.read().expect("resources lock").get(kind) {
            return Ok(known.clone());
        }
        let (resource, capabilities) = discovery::pinned_kind(&self.client, kind).await?;
        let resolved = (resource, capabilities.scope == Scope::Namespaced);
        self.known
            .write()
            .expect("resources lock")
            .insert(kind.clone(), resolved.clone());
        Ok(resolved)
    }

    /// Whether `kind` was resolved and is namespaced; `None` until discovery resolved it.
    pub fn namespaced(&self, kind: &GroupVersionKind) -> Option<bool> {
        let known = self.known.read().expect("resources lock");
        known.get(kind).map(|(_, namespaced)| *namespaced)
    }

    /// An API handle for `kind` in `namespace` (ignored for cluster-scoped kinds).
    pub async fn api(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
    ) -> Result<Api<DynamicObject>, kube::Error> {
        let (resource, namespaced) = self.resolve(kind).await?;
        Ok(match namespace {
            Some(namespace) if namespaced => {
                Api::namespaced_with(self.client.clone(), namespace, &resource)
            }
            _ => Api::all_with(self.client.clone(), &resource),
        })
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Resources whose requests never reach an API server: nothing listens at their address.
    #[cfg(test)]
    pub fn unreachable() -> Arc<Self> {
        let config = kube::Config::new("https://127.0.0.1:9".parse().expect("a valid address"));
        let client = Client::try_from(config).expect("a client of a valid address");
        Arc::new(Self::new(client))
    }
}
