//! `kubewasm push`: publishes a module to an OCI registry in the CNCF layout for WebAssembly
//! artifacts, after checking that it is a component exporting the contract.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use oci_client::secrets::RegistryAuth;

use crate::cmd::cli::RegistryArgs;
use crate::cmd::source::{self, SourceError};
use crate::cmd::{fail, out};
use crate::wasm::module_store::ModuleStore;
use crate::wasm::oci::{self, Registries, RegistrySettings};

/// `kubewasm push`: pushes `module` as `reference` and prints the reference pinned to its
/// digest. With `username`, the password is read from standard input first; failing to read
/// it is reported through anyhow, as the binary reports it.
pub async fn command(
    module: &Path,
    reference: &str,
    username: Option<String>,
    registries: &RegistryArgs,
) -> anyhow::Result<ExitCode> {
    let auth = match username {
        Some(username) => Some(RegistryAuth::Basic(username, password()?)),
        None => None,
    };
    match push(module, reference, auth, registries.settings()).await {
        Ok(pinned) => out(format_args!("{pinned}\n")),
        Err(error) => return Ok(fail(error)),
    }
    Ok(ExitCode::SUCCESS)
}

/// The first line of standard input, without its line ending.
fn password() -> anyhow::Result<String> {
    let mut password = String::new();
    std::io::stdin()
        .read_line(&mut password)
        .context("reading the password from standard input")?;
    Ok(password.trim_end_matches(['\r', '\n']).to_owned())
}

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
