//! `kubewasm push`: publishes a module to an OCI registry in the CNCF layout for WebAssembly
//! artifacts, after checking that it is a component exporting the contract.

use std::path::Path;

use oci_client::secrets::RegistryAuth;

use crate::cmd::source::{self, SourceError};
use crate::wasm::module_store::ModuleStore;
use crate::wasm::oci::{self, Registries, RegistrySettings};

/// Pushes the module at `module` as `reference`, with `auth` or else the local Docker config's
/// credentials for the registry; returns the reference pinned to the pushed manifest's digest.
pub async fn push(
    module: &Path,
    reference: &str,
    auth: Option<RegistryAuth>,
    settings: RegistrySettings,
) -> Result<String, SourceError> {
    let reference = oci::parse_reference(reference)?;
    let auth = match auth {
        Some(auth) => auth,
        None => source::local_credentials(reference.resolve_registry())?,
    };
    let bytes = tokio::fs::read(module)
        .await
        .map_err(|source| SourceError::Read {
            path: module.to_owned(),
            source,
        })?;
    let registries = Registries::new(settings, ModuleStore::none());
    let created = k8s_openapi::jiff::Timestamp::now().to_string();
    let digest = registries.push(&reference, bytes, &auth, created).await?;
    Ok(format!(
        "{}/{}@{digest}",
        reference.registry(),
        reference.repository()
    ))
}
