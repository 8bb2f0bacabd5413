//! Where a WasmController's module comes from: an image pulled with the object's own
//! credentials, a key of a ConfigMap or Secret of its namespace, or a file; each read under the
//! host's size bound, and kept in the module store for a rollback by whoever took it.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::Api;
use oci_client::secrets::RegistryAuth;

use crate::cluster::gate::Gate;
use crate::config::controller::ControllerSpec;
use crate::config::{ImageSource, KeyRef, Source};
use crate::manage::refusal::Refusal;
use crate::manage::revisions::Revision;
use crate::manage::source_changes::SourceChanges;
use crate::wasm::module_bytes::ModuleBytes;
use crate::wasm::module_store::Access;
use crate::wasm::oci::{self, Artifact, Registries};

/// An object's namespace and name.
type Key = (String, String);

/// A module fetched for an object.
pub struct Fetched {
    /// Where it came from, as shown: a pinned reference, `configmap/NAME/KEY`, a path.
    pub origin: String,
    /// Its bytes; `None` when it is the module that runs (not fetched again).
    pub bytes: Option<ModuleBytes>,
    /// The SHA-256 of its bytes, hex.
    pub module_digest: String,
    /// For an image: the reference pinned to its manifest's digest, and that digest.
    pub image: Option<(String, String)>,
    /// For an image: its manifest and config as read, for the next resolve to check cheaply.
    pub artifact: Option<Artifact>,
}

/// Reads the modules WasmControllers name.
pub struct Sources {
    client: Client,
    registries: Registries,
    /// The largest module taken.
    max_module_bytes: u64,
    /// Open while this replica acts: until then it resolves no tag.
    gate: Gate,
    /// The artifact each object's image resolved to last, with its own credentials.
    artifacts: Mutex<HashMap<Key, Artifact>>,
    /// The ConfigMap each object takes its module from, read again when it changes.
    changes: SourceChanges,
}

impl Sources {
    /// Sources read with `client` and `registries`, modules up to `max_module_bytes`; a tag is
    /// resolved only while `gate` is open.
    pub fn new(client: Client, registries: Registries, max_module_bytes: u64, gate: Gate) -> Self {
        Self {
            client,
            registries,
            max_module_bytes,
            gate,
            artifacts: Mutex::default(),
            changes: SourceChanges::default(),
        }
    }

    /// Where pulled modules are kept.
    pub fn registries(&self) -> &Registries {
        &self.registries
    }

    /// Forgets what was resolved for the object `key`, and its source.
    pub fn forget(&self, key: &Key) {
        self.artifacts.lock().expect("artifacts lock").remove(key);
        self.changes.follow(key, None);
    }

    /// The ConfigMap sources followed by their watch.
    pub fn changes(&self) -> &SourceChanges {
        &self.changes
    }

    /// The bytes of a revision that ran: from the module store when it records that this
    /// object's credentials (or, for a module read from an object, its namespace) took them,
    /// else pulled by its pinned reference with this object's credentials. A revision in status
    /// names a module; it never lets an object read one it could not take itself.
    pub async fn revision_bytes(
        &self,
        revision: &Revision,
        spec: &ControllerSpec,
        namespace: &str,
    ) -> Result<ModuleBytes, Refusal> {
        let hex = revision
            .module_digest
            .strip_prefix("sha256:")
            .unwrap_or(&revision.module_digest)
            .to_owned();
        let pull_secret = match &spec.module.source {
            Source::Image(source) => source.pull_secret.as_deref(),
            _ => None,
        };
        let (access, reference) = match &revision.image {
            Some(image) => {
                let reference = oci::parse_reference(image).map_err(Refusal::from)?;
                let auth = self
                    .registry_auth(&reference, pull_secret, namespace)
                    .await?;
                (self.registries.access(&reference, &auth), Some(image))
            }
            None => (self.namespace_access(namespace), None),
        };
        let (store, wanted) = (self.registries.store().clone(), hex.clone());
        let stored = match access {
            Some(access) => tokio::task::spawn_blocking(move || store.get(&wanted, &access))
                .await
                .ok()
                .flatten(),
            None => None,
        };
        if let Some(bytes) = stored {
            return Ok(ModuleBytes::checked(hex, bytes));
        }
        let Some(image) = reference else {
            return Err(Refusal {
                reason: "RevisionUnavailable",
                message: format!(
                    "{} is not in the module store as read for this namespace",
                    revision.module_digest
                ),
                transient: false,
            });
        };
        let fetched = self
            .fetch_image(image, pull_secret, namespace, None, None)
            .await?;
        if fetched.module_digest != hex {
            return Err(Refusal {
                reason: "RevisionUnavailable",
                message: format!(
                    "{image} holds sha256:{}, not the module {} the revision names",
                    fetched.module_digest, revision.module_digest
                ),
                transient: false,
            });
        }
        Ok(fetched
            .bytes
            .expect("with nothing running, the layer is fetched"))
    }

    /// The module store's record of modules read from objects of `namespace`.
    fn namespace_access(&self, namespace: &str) -> Option<Access> {
        self.registries
            .store()
            .access(&[b"namespace", namespace.as_bytes()])
    }

    /// Fetches the module `spec` names. For an image whose module is the `running` one, the
    /// layer is not fetched.
    pub async fn fetch(
        &self,
        key: &Key,
        spec: &ControllerSpec,
        recorded: Option<&str>,
        running: Option<&str>,
    ) -> Result<Fetched, Refusal> {
        let namespace = key.0.as_str();
        let followed = match (&spec.module.source, spec.poll) {
            (Source::ConfigMap(key_ref), Some(_)) => Some(key_ref.name.as_str()),
            _ => None,
        };
        self.changes.follow(key, followed);
        match &spec.module.source {
            Source::Image(image) => self.fetch_tracked(key, image, recorded, running).await,
            Source::ConfigMap(key_ref) => {
                let bytes = self
                    .key_bytes::<ConfigMap>(namespace, key_ref, "ConfigMap", |map, key| {
                        map.binary_data
                            .and_then(|mut d| d.remove(key))
                            .map(|b| b.0)
                            .or_else(|| {
                                map.data
                                    .and_then(|mut d| d.remove(key))
                                    .map(String::into_bytes)
                            })
                    })
                    .await?;
                self.sized(
                    namespace,
                    format!("configmap/{}/{}", key_ref.name, key_ref.key),
                    bytes,
                )
                .await
            }
            Source::Secret(key_ref) => {
                let bytes = self
                    .key_bytes::<Secret>(namespace, key_ref, "Secret", |secret, key| {
                        secret.data.and_then(|mut d| d.remove(key)).map(|b| b.0)
                    })
                    .await?;
                self.sized(
                    namespace,
                    format!("secret/{}/{}", key_ref.name, key_ref.key),
                    bytes,
                )
                .await
            }
            Source::File(path) => {
                let bytes = tokio::fs::read(path).await.map_err(|e| Refusal {
                    reason: "SourceUnreadable",
                    message: format!("reading {}: {e}", path.display()),
                    transient: true,
                })?;
                self.sized(namespace, path.display().to_string(), bytes)
                    .await
            }
        }
    }

    /// Fetches `image` for `key`, remembering the artifact it resolved to so that the next
    /// poll asks only whether it changed. A standby resolves no tag: it follows the digest the
    /// acting replica `recorded`.
    async fn fetch_tracked(
        &self,
        key: &Key,
        image: &ImageSource,
        recorded: Option<&str>,
        running: Option<&str>,
    ) -> Result<Fetched, Refusal> {
        let reference = match recorded {
            Some(pinned) if !self.gate.is_open() && same_repository(pinned, &image.reference) => {
                pinned
            }
            _ => image.reference.as_str(),
        };
        let known = self
            .artifacts
            .lock()
            .expect("artifacts lock")
            .get(key)
            .cloned();
        let pull_secret = image.pull_secret.as_deref();
        let fetched = self
            .fetch_image(reference, pull_secret, &key.0, running, known.as_ref())
            .await?;
        if let Some(artifact) = &fetched.artifact {
            let mut artifacts = self.artifacts.lock().expect("artifacts lock");
            artifacts.insert(key.clone(), artifact.clone());
        }
        Ok(fetched)
    }

    /// Fetches the artifact `reference`, with the credentials of the `pull_secret` of
    /// `namespace`. When its module is the `running` one, the layer is not fetched; when its
    /// manifest is the one `known` was read from (a HEAD request tells), nothing more is read.
    async fn fetch_image(
        &self,
        reference: &str,
        pull_secret: Option<&str>,
        namespace: &str,
        running: Option<&str>,
        known: Option<&Artifact>,
    ) -> Result<Fetched, Refusal> {
        let reference = oci::parse_reference(reference).map_err(Refusal::from)?;
        let auth = self
            .registry_auth(&reference, pull_secret, namespace)
            .await?;
        let artifact = self
            .registries
            .resolve(&reference, &auth, known)
            .await
            .map_err(Refusal::from)?;
        let module_digest = artifact.module_digest().to_owned();
        let bytes = if running == Some(module_digest.as_str()) {
            None
        } else {
            Some(
                self.registries
                    .fetch(&artifact, &auth)
                    .await
                    .map_err(Refusal::from)?,
            )
        };
        Ok(Fetched {
            origin: artifact.pinned(),
            bytes,
            module_digest,
            image: Some((artifact.pinned(), artifact.manifest_digest.clone())),
            artifact: Some(artifact),
        })
    }

    /// The credentials of the `pull_secret` of `namespace` for `reference`'s registry; without
    /// one, none.
    async fn registry_auth(
        &self,
        reference: &oci_client::Reference,
        pull_secret: Option<&str>,
        namespace: &str,
    ) -> Result<RegistryAuth, Refusal> {
        match pull_secret {
            Some(name) => {
                self.pull_credentials(namespace, name, reference.resolve_registry())
                    .await
            }
            None => Ok(RegistryAuth::Anonymous),
        }
    }

    /// The value of `key_ref` in the object of kind `kind` in `namespace`, which `value` reads.
    async fn key_bytes<K>(
        &self,
        namespace: &str,
        key_ref: &KeyRef,
        kind: &str,
        value: impl FnOnce(K, &str) -> Option<Vec<u8>>,
    ) -> Result<Vec<u8>, Refusal>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let not_found = |message: String| Refusal {
            reason: "SourceNotFound",
            message,
            transient: false,
        };
        let api: Api<K> = Api::namespaced(self.client.clone(), namespace);
        let object = api.get_opt(&key_ref.name).await.map_err(|e| Refusal {
            reason: "SourceUnreadable",
            message: format!("reading {kind} {}: {e}", key_ref.name),
            transient: true,
        })?;
        let object =
            object.ok_or_else(|| not_found(format!("{kind} {} not found", key_ref.name)))?;
        value(object, &key_ref.key).ok_or_else(|| {
            not_found(format!(
                "{kind} {} has no key {}",
                key_ref.name, key_ref.key
            ))
        })
    }

    /// A module read from an object or a file of `namespace`, under the size limit, kept in the
    /// module store for a rollback to it by an object of `namespace`.
    async fn sized(
        &self,
        namespace: &str,
        origin: String,
        bytes: Vec<u8>,
    ) -> Result<Fetched, Refusal> {
        let limit = self.max_module_bytes;
        if bytes.len() as u64 > limit {
            return Err(Refusal {
                reason: "ModuleTooLarge",
                message: format!(
                    "{origin}: the module is {} bytes, over the limit of {limit}",
                    bytes.len()
                ),
                transient: false,
            });
        }
        let bytes = ModuleBytes::new(bytes);
        let module_digest = bytes.digest().to_owned();
        if let Some(access) = self.namespace_access(namespace) {
            let (store, kept) = (self.registries.store().clone(), bytes.clone());
            let _ =
                tokio::task::spawn_blocking(move || store.put(kept.digest(), &kept, &access)).await;
        }
        Ok(Fetched {
            origin,
            module_digest,
            bytes: Some(bytes),
            image: None,
            artifact: None,
        })
    }

    /// The credentials the `kubernetes.io/dockerconfigjson` Secret `name` holds for `registry`.
    async fn pull_credentials(
        &self,
        namespace: &str,
        name: &str,
        registry: &str,
    ) -> Result<RegistryAuth, Refusal> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let refused = |message: String| Refusal {
            reason: "PullSecretInvalid",
            message,
            transient: false,
        };
        let secret = api.get_opt(name).await.map_err(|e| Refusal {
            reason: "PullSecretUnreadable",
            message: format!("reading Secret {name}: {e}"),
            transient: true,
        })?;
        let secret =
            secret.ok_or_else(|| refused(format!("the imagePullSecret {name} is not found")))?;
        let config = secret
            .data
            .and_then(|mut d| d.remove(".dockerconfigjson"))
            .ok_or_else(|| {
                refused(format!(
                    "Secret {name} has no .dockerconfigjson (type kubernetes.io/dockerconfigjson)"
                ))
            })?;
        oci::credentials(&config.0, registry).map_err(|e| refused(format!("Secret {name}: {e}")))
    }
}

/// Whether the image references `a` and `b` name the same registry and repository.
fn same_repository(a: &str, b: &str) -> bool {
    match (oci::parse_reference(a), oci::parse_reference(b)) {
        (Ok(a), Ok(b)) => {
            a.resolve_registry() == b.resolve_registry() && a.repository() == b.repository()
        }
        _ => false,
    }
}
