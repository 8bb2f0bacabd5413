//! The module a command names: a file, or an artifact in an OCI registry, pulled as the host
//! pulls it (layout, world and size checked before the layer is fetched, the digest verified).

use std::path::{Path, PathBuf};

use oci_client::secrets::RegistryAuth;

use crate::wasm::module_bytes::ModuleBytes;
use crate::wasm::module_store::ModuleStore;
use crate::wasm::oci::{self, OciError, Registries, RegistrySettings};

/// Where a command's module comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModuleSource {
    /// A file.
    File(PathBuf),
    /// An OCI reference.
    Artifact(String),
}

/// Why a command's module could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The file could not be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The artifact could not be pulled.
    #[error(transparent)]
    Pull(#[from] OciError),
    /// The local registry credentials could not be read.
    #[error("{}: {message}", path.display())]
    Credentials {
        /// The Docker config file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl ModuleSource {
    /// A file when `text` names one that exists or does not look like a reference (so a
    /// missing file is reported as such), else an OCI reference.
    pub fn parse(text: &str) -> Self {
        if Path::new(text).exists() || !oci::looks_like_reference(text) {
            Self::File(PathBuf::from(text))
        } else {
            Self::Artifact(text.to_owned())
        }
    }

    /// The file, if the module is one.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Self::File(path) => Some(path),
            Self::Artifact(_) => None,
        }
    }

    /// Reads the module: where it comes from, as shown to the user, and its bytes. An artifact
    /// is pulled with the credentials of the local Docker config, if it has some for the
    /// registry, and kept in the default module store.
    pub async fn read(
        &self,
        settings: RegistrySettings,
    ) -> Result<(String, ModuleBytes), SourceError> {
        match self {
            Self::File(path) => {
                let bytes = tokio::fs::read(path)
                    .await
                    .map_err(|source| SourceError::Read {
                        path: path.clone(),
                        source,
                    })?;
                Ok((path.display().to_string(), ModuleBytes::new(bytes)))
            }
            Self::Artifact(text) => {
                let reference = oci::parse_reference(text)?;
                let auth = local_credentials(reference.resolve_registry())?;
                let store =
                    ModuleStore::default_dir().map_or_else(ModuleStore::none, ModuleStore::new);
                let registries = Registries::new(settings, store);
                let artifact = registries.resolve(&reference, &auth, None).await?;
                let bytes = registries.fetch(&artifact, &auth).await?;
                Ok((artifact.pinned(), bytes))
            }
        }
    }
}

/// The credentials the local Docker config (`$DOCKER_CONFIG/config.json`, else
/// `~/.docker/config.json`) holds for `registry`; anonymous without one. Credential helpers
/// are not run: only `auths` entries are read.
pub fn local_credentials(registry: &str) -> Result<RegistryAuth, SourceError> {
    let Some(path) = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".docker")))
        .map(|dir| dir.join("config.json"))
    else {
        return Ok(RegistryAuth::Anonymous);
    };
    let text = match std::fs::read(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(RegistryAuth::Anonymous);
        }
        Err(error) => {
            return Err(SourceError::Credentials {
                path,
                message: error.to_string(),
            });
        }
    };
    oci::credentials(&text, registry).map_err(|error| SourceError::Credentials {
        path,
        message: error.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_file_is_a_file_even_when_it_reads_as_a_reference() {
        let dir = tempfile::tempdir().unwrap();
        let odd = dir.path().join("registry.local:5000");
        std::fs::create_dir_all(&odd).unwrap();
        let file = odd.join("podset.wasm");
        std::fs::write(&file, b"").unwrap();
        let text = file.display().to_string();
        assert_eq!(ModuleSource::parse(&text), ModuleSource::File(file));
        assert_eq!(
            ModuleSource::parse("registry.local:5000/podset:v1"),
            ModuleSource::Artifact("registry.local:5000/podset:v1".into())
        );
        assert_eq!(
            ModuleSource::parse("missing.wasm"),
            ModuleSource::File("missing.wasm".into())
        );
    }
}
