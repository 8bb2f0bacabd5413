//! Modules delivered through OCI registries, in the CNCF layout for WebAssembly artifacts: an
//! image manifest whose config has media type [`CONFIG_MEDIA_TYPE`] and whose one layer, of
//! media type [`LAYER_MEDIA_TYPE`], is the component's bytes.
//!
//! A pull reads the manifest and the config first and refuses, before the layer is fetched, an
//! artifact of another layout, a config that does not describe a component exporting the
//! contract, and a layer over the size limit. The layer is then taken from the
//! [`ModuleStore`] when it holds that digest, else fetched with its size bounded and its
//! SHA-256 verified, and stored. A manifest pulled by digest is verified against it. Every
//! request carries the caller's credentials and nobody else's, and every body is read under a
//! bound and a deadline (see [`crate::wasm::pull`]).
//!
//! Registries on a loopback address, and those named insecure, are spoken to in plain HTTP, as
//! the container runtimes do; every other one in HTTPS, verified against the system's roots.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use futures::FutureExt as _;
use futures::future::{BoxFuture, Shared, WeakShared};
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::{Deserialize, Serialize};

use crate::wasm::bindings::GUEST_INTERFACES;
use crate::wasm::module_bytes::sha256_hex;
use crate::wasm::module_bytes::{Held, ModuleBytes};
use crate::wasm::module_store::{Access, ModuleStore};
use crate::wasm::pull::{self, Puller};
pub use crate::wasm::registry_error::OciError;

/// Media type of an OCI image manifest.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// Media type of the config of a WebAssembly artifact.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// Media type of the layer holding a WebAssembly component.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";

/// The config of a WebAssembly artifact, as the CNCF layout defines it. Fields other tools
/// leave out are optional here, so that their artifacts are read.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WasmConfig {
    /// When the artifact was made (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// Who made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// Always `wasm`.
    #[serde(default)]
    pub architecture: String,
    /// `wasip2` for a component, `wasip1` for a core module.
    #[serde(default)]
    pub os: String,
    /// The digests of the manifest's layers, in order.
    #[serde(default)]
    pub layer_digests: Vec<String>,
    /// The component's imports and exports; required when `os` is `wasip2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<ComponentConfig>,
}

/// What a component imports and exports, by interface name.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ComponentConfig {
    /// The names the component exports.
    #[serde(default)]
    pub exports: Vec<String>,
    /// The names the component imports.
    #[serde(default)]
    pub imports: Vec<String>,
    /// The world it targets, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

impl WasmConfig {
    /// The config of the component `bytes`, whose imports and exports are read from the binary
    /// without compiling it. Refuses bytes that are not a component exporting the contract.
    pub fn of_component(bytes: &[u8], created: String) -> Result<Self, String> {
        let (imports, exports) = component_names(bytes)?;
        let config = Self {
            created: Some(created),
            author: None,
            architecture: "wasm".into(),
            os: "wasip2".into(),
            layer_digests: vec![format!("sha256:{}", sha256_hex(bytes))],
            component: Some(ComponentConfig {
                exports,
                imports,
                target: None,
            }),
        };
        config.contract()?;
        Ok(config)
    }

    /// The contract interface the config says the component exports. Refuses a core module and
    /// a component of another world.
    pub fn contract(&self) -> Result<&'static str, String> {
        if self.os != "wasip2" {
            return Err(format!(
                "the artifact is not a component: its config says os {:?}, not \"wasip2\"",
                self.os
            ));
        }
        let Some(component) = &self.component else {
            return Err("the artifact's config does not list the component's exports".into());
        };
        GUEST_INTERFACES
            .into_iter()
            .find(|c| component.exports.iter().any(|e| e == c))
            .ok_or_else(|| {
                format!(
                    "the component exports {}, not {}",
                    if component.exports.is_empty() {
                        "nothing".to_owned()
                    } else {
                        component.exports.join(", ")
                    },
                    GUEST_INTERFACES.join(" or ")
                )
            })
    }
}

/// The names a component binary imports and exports at its top level, read without compiling
/// it.
pub fn component_names(bytes: &[u8]) -> Result<(Vec<String>, Vec<String>), String> {
    use wasmparser::{Encoding, Parser, Payload};
    let not_a_component = |detail: &str| format!("not a WebAssembly component: {detail}");
    if !bytes.starts_with(b"\0asm") {
        return Err(not_a_component(
            "it does not start with the magic bytes \\0asm",
        ));
    }
    let (mut imports, mut exports) = (Vec::new(), Vec::new());
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(|e| not_a_component(&e.to_string()))? {
            Payload::Version { encoding, .. } => {
                if depth == 0 && encoding != Encoding::Component {
                    return Err(not_a_component("it is a core module"));
                }
                depth += 1;
            }
            Payload::End(_) => depth -= 1,
            Payload::ComponentImportSection(section) if depth == 1 => {
                for import in section {
                    let import = import.map_err(|e| not_a_component(&e.to_string()))?;
                    imports.push(import.name.name.to_owned());
                }
            }
            Payload::ComponentExportSection(section) if depth == 1 => {
                for export in section {
                    let export = export.map_err(|e| not_a_component(&e.to_string()))?;
                    exports.push(export.name.name.to_owned());
                }
            }
            _ => {}
        }
    }
    Ok((imports, exports))
}

/// Parses an OCI reference (`registry/repository:tag`, `...@sha256:...`, or both).
pub fn parse_reference(text: &str) -> Result<Reference, OciError> {
    text.parse::<Reference>().map_err(|e| OciError::Reference {
        reference: text.to_owned(),
        message: e.to_string(),
    })
}

/// Whether `text` names an artifact in a registry rather than a file: it parses as a reference
/// whose first component is a registry host (it holds a `.` or a `:`, or is `localhost`).
pub fn looks_like_reference(text: &str) -> bool {
    let Some((host, _)) = text.split_once('/') else {
        return false;
    };
    (host.contains('.') || host.contains(':') || host == "localhost")
        && !text.starts_with('.')
        && parse_reference(text).is_ok()
}

/// How registries are reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrySettings {
    /// Registries (`host` or `host:port`) spoken to in plain HTTP, besides loopback ones.
    pub insecure: Vec<String>,
    /// The largest module accepted, in bytes.
    pub max_module_bytes: u64,
}

impl Default for RegistrySettings {
    fn default() -> Self {
        Self {
            insecure: Vec::new(),
            max_module_bytes: 256 << 20,
        }
    }
}

/// An artifact whose manifest and config were read and accepted; its layer not yet fetched.
#[derive(Debug, Clone)]
pub struct Artifact {
    /// The reference as asked for.
    pub reference: Reference,
    /// The manifest's digest (`sha256:...`): what a reference pins.
    pub manifest_digest: String,
    /// The component layer.
    pub layer: OciDescriptor,
    /// The contract interface the config says the component exports.
    pub contract: &'static str,
}

impl Artifact {
    /// The SHA-256 of the component's bytes, hex, as modules are known by.
    pub fn module_digest(&self) -> &str {
        self.layer
            .digest
            .strip_prefix("sha256:")
            .unwrap_or(&self.layer.digest)
    }

    /// The reference pinned to the manifest's digest: `registry/repository@sha256:...`.
    pub fn pinned(&self) -> String {
        format!(
            "{}/{}@{}",
            self.reference.registry(),
            self.reference.repository(),
            self.manifest_digest
        )
    }
}

/// Pulls and pushes modules, and keeps pulled ones in the store. A pull speaks to the
/// registry with the caller's credentials only (see [`crate::wasm::pull`]); a stored module is
/// used only after the caller's credentials resolved a manifest naming it, or when the store
/// records that they did before.
pub struct Registries {
    settings: RegistrySettings,
    store: ModuleStore,
    puller: Arc<Puller>,
    /// Modules a load holds, shared with later fetches of them.
    held: Arc<Held>,
    /// Fetches in flight, by module and record of who takes it (see [`Registries::fetch`]).
    flights: Mutex<HashMap<(String, Access), WeakShared<Fetching>>>,
}

impl Registries {
    /// Registries reached as `settings` say, with pulled modules kept in `store`.
    pub fn new(settings: RegistrySettings, store: ModuleStore) -> Self {
        // The API client uses ring; the registry clients use the process's default provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let puller = Arc::new(Puller::new(settings.insecure.clone()));
        Self {
            settings,
            store,
            puller,
            held: Arc::default(),
            flights: Mutex::default(),
        }
    }

    /// The settings these registries were made with.
    pub fn settings(&self) -> &RegistrySettings {
        &self.settings
    }

    /// The store's record of `auth` taking modules from `reference`'s repository.
    pub fn access(&self, reference: &Reference, auth: &RegistryAuth) -> Option<Access> {
        self.store.access(&[
            b"image",
            reference.resolve_registry().as_bytes(),
            reference.repository().as_bytes(),
            &pull::fingerprint(auth),
        ])
    }

    /// Reads the manifest and config `reference` names, with `auth`, and accepts them as a
    /// component of the contract under the size limit; fetches no layer. When the manifest is
    /// the one `known` was read from (a HEAD request tells), `known` is the answer and nothing
    /// more is read: how a tag is resolved again cheaply.
    pub async fn resolve(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
        known: Option<&Artifact>,
    ) -> Result<Artifact, OciError> {
        let mut name = pull::tag_or_digest(reference).to_owned();
        if let Some(known) = known {
            let digest = self.puller.manifest_digest(reference, auth).await?;
            if digest.as_deref() == Some(known.manifest_digest.as_str())
                && known.reference.resolve_registry() == reference.resolve_registry()
                && known.reference.repository() == reference.repository()
            {
                return Ok(known.clone());
            }
            if let Some(digest) = digest {
                name = digest;
            }
        }
        let (text, manifest_digest) = self.puller.manifest(reference, &name, auth).await?;
        let (layer, config) = accepted(reference, &text)?;
        let text = self
            .puller
            .blob(
                reference,
                &config.digest,
                auth,
                (pull::MAX_CONFIG_BYTES, "the config"),
            )
            .await?;
        let wrong = |message: String| OciError::MediaType {
            reference: reference.whole(),
            message,
        };
        let config: WasmConfig = serde_json::from_slice(&text)
            .map_err(|e| wrong(format!("its config does not parse: {e}")))?;
        let contract = config.contract().map_err(|message| OciError::World {
            reference: reference.whole(),
            message,
        })?;
        let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if size > self.settings.max_module_bytes {
            return Err(OciError::TooLarge {
                reference: reference.whole(),
                size,
                limit: self.settings.max_module_bytes,
            });
        }
        Ok(Artifact {
            reference: reference.clone(),
            manifest_digest,
            layer,
            contract,
        })
    }

    /// Where pulled modules are kept.
    pub fn store(&self) -> &ModuleStore {
        &self.store
    }

    /// The component bytes of `artifact`, which `auth` has just resolved: shared with a load
    /// that holds them already, else from the store when it holds them, else fetched with
    /// `auth` (bounded by the size limit, verified against the layer's digest) and stored;
    /// recording that `auth` took them. Fetches of one module with the same credentials from
    /// the same repository share one fetch and its outcome, an error included: loads of it at
    /// once read or pull it once, and none waits longer than that fetch. Without a store,
    /// nothing is shared: every fetch pulls.
    pub async fn fetch(
        &self,
        artifact: &Artifact,
        auth: &RegistryAuth,
    ) -> Result<ModuleBytes, OciError> {
        let digest = artifact.module_digest().to_owned();
        let Some(access) = self.access(&artifact.reference, auth) else {
            let bytes = pull_layer(&self.puller, &self.settings, artifact, auth).await?;
            return Ok(ModuleBytes::checked(digest, bytes));
        };
        self.flight((digest, access), artifact, auth).await
    }

    /// The fetch of `key` in flight, else a new one.
    fn flight(&self, key: (String, Access), artifact: &Artifact, auth: &RegistryAuth) -> Flight {
        let mut flights = self.flights.lock().expect("flights lock");
        flights.retain(|_, flight| flight.upgrade().is_some());
        if let Some(flight) = flights.get(&key).and_then(WeakShared::upgrade) {
            return flight;
        }
        let fetch = Fetch {
            store: self.store.clone(),
            puller: self.puller.clone(),
            settings: self.settings.clone(),
            held: self.held.clone(),
            artifact: artifact.clone(),
            auth: auth.clone(),
            access: key.1,
        };
        let flight = fetch.run().boxed().shared();
        if let Some(weak) = flight.downgrade() {
            flights.insert(key, weak);
        }
        flight
    }

    /// Publishes the component `bytes` as `reference` in the CNCF layout; returns the
    /// manifest's digest. Refuses bytes that are not a component exporting the contract.
    pub async fn push(
        &self,
        reference: &Reference,
        bytes: Vec<u8>,
        auth: &RegistryAuth,
        created: String,
    ) -> Result<String, OciError> {
        let config =
            WasmConfig::of_component(&bytes, created).map_err(|message| OciError::World {
                reference: reference.whole(),
                message,
            })?;
        let config = Config {
            data: serde_json::to_vec(&config)
                .expect("the config serializes")
                .into(),
            media_type: CONFIG_MEDIA_TYPE.into(),
            annotations: None,
        };
        let layers = [ImageLayer {
            data: bytes.into(),
            media_type: LAYER_MEDIA_TYPE.into(),
            annotations: None,
        }];
        let mut manifest = OciImageManifest::build(&layers, &config, None::<BTreeMap<_, _>>);
        manifest.media_type = Some(MANIFEST_MEDIA_TYPE.into());
        let digest = format!(
            "sha256:{}",
            sha256_hex(&serde_json::to_vec(&manifest).expect("the manifest serializes"))
        );
        let registry = reference.resolve_registry();
        let plain =
            pull::is_loopback(registry) || self.settings.insecure.iter().any(|r| r == registry);
        let client = Client::new(ClientConfig {
            protocol: if plain {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            connect_timeout: Some(std::time::Duration::from_secs(10)),
            read_timeout: Some(std::time::Duration::from_secs(60)),
            user_agent: concat!("kubewasm/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        });
        let failed = |e| OciError::from_client(reference, e);
        client
            .push(reference, &layers, config, auth, Some(manifest))
            .await
            .map_err(failed)?;
        // The registry names the manifest by the digest of the bytes it stored: ask it.
        let pushed = client
            .fetch_manifest_digest(reference, auth)
            .await
            .map_err(failed)?;
        if pushed != digest {
            tracing::debug!(%pushed, computed = %digest, "the registry re-encoded the manifest");
        }
        Ok(pushed)
    }
}

/// The layer and config descriptors of the manifest `text`, accepted as the CNCF layout of a
/// component: an image manifest with a Wasm config of sane size and one SHA-256 Wasm layer.
fn accepted(
    reference: &Reference,
    text: &[u8],
) -> Result<(OciDescriptor, OciDescriptor), OciError> {
    let wrong = |message: String| OciError::MediaType {
        reference: reference.whole(),
        message,
    };
    let manifest: OciImageManifest = serde_json::from_slice(text)
        .map_err(|e| wrong(format!("its manifest is not an OCI image manifest: {e}")))?;
    if let Some(media_type) = &manifest.media_type
        && media_type != MANIFEST_MEDIA_TYPE
    {
        return Err(wrong(format!("the manifest is {media_type}")));
    }
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(wrong(format!(
            "its config is {}, not {CONFIG_MEDIA_TYPE}",
            manifest.config.media_type
        )));
    }
    let [layer] = manifest.layers.as_slice() else {
        return Err(wrong(format!(
            "it has {} layers; a component artifact has one",
            manifest.layers.len()
        )));
    };
    if layer.media_type != LAYER_MEDIA_TYPE {
        return Err(wrong(format!(
            "its layer is {}, not {LAYER_MEDIA_TYPE}",
            layer.media_type
        )));
    }
    for digest in [&layer.digest, &manifest.config.digest] {
        if !digest.starts_with("sha256:") {
            return Err(wrong(format!("the digest {digest} is not SHA-256")));
        }
    }
    if u64::try_from(manifest.config.size).unwrap_or(u64::MAX) > pull::MAX_CONFIG_BYTES {
        return Err(wrong(format!(
            "its config is {} bytes; a component's config is small",
            manifest.config.size
        )));
    }
    Ok((layer.clone(), manifest.config.clone()))
}

/// Runs file reads and hashing of whole modules off the async executor.
/// One fetch of a module, shared by every load asking for it at once.
type Flight = Shared<Fetching>;
/// A fetch running.
type Fetching = BoxFuture<'static, Result<ModuleBytes, OciError>>;

/// What one fetch needs, owned: it runs for as long as a load waits for it.
struct Fetch {
    store: ModuleStore,
    puller: Arc<Puller>,
    settings: RegistrySettings,
    held: Arc<Held>,
    artifact: Artifact,
    auth: RegistryAuth,
    access: Access,
}

impl Fetch {
    /// The bytes a load holds, else those in the store, else pulled and stored; each
    /// recorded as taken by `access`.
    async fn run(self) -> Result<ModuleBytes, OciError> {
        let digest = self.artifact.module_digest().to_owned();
        let (store, wanted, access) = (self.store.clone(), digest.clone(), self.access);
        if let Some(bytes) = self.held.get(&digest) {
            blocking(move || store.admit(&wanted, &access)).await;
            return Ok(bytes);
        }
        // The caller's credentials resolved this artifact: it may read what the store holds.
        let stored = blocking(move || {
            store.admit(&wanted, &access);
            store.get(&wanted, &access)
        })
        .await;
        let bytes = match stored {
            Some(bytes) => ModuleBytes::checked(digest, bytes),
            None => {
                let pulled = pull_layer(&self.puller, &self.settings, &self.artifact, &self.auth);
                let bytes = ModuleBytes::checked(digest, pulled.await?);
                let (store, kept) = (self.store.clone(), bytes.clone());
                blocking(move || store.put(kept.digest(), &kept, &access)).await;
                bytes
            }
        };
        self.held.hold(&bytes);
        Ok(bytes)
    }
}

/// The layer of `artifact`, fetched with `auth` under the size limit and verified against its
/// digest.
async fn pull_layer(
    puller: &Puller,
    settings: &RegistrySettings,
    artifact: &Artifact,
    auth: &RegistryAuth,
) -> Result<Vec<u8>, OciError> {
    let limit = settings.max_module_bytes;
    puller
        .blob(
            &artifact.reference,
            &artifact.layer.digest,
            auth,
            (limit, pull::MODULE),
        )
        .await
}

async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work)
        .await
        .expect("reading and hashing modules does not panic")
}

/// Why a `kubernetes.io/dockerconfigjson` Secret gave no credentials.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// The text does not parse as a Docker config.
    #[error("not a Docker config JSON: {0}")]
    Parse(String),
    /// An entry's `auth` is not base64 of `user:password`.
    #[error("the entry for {0} has an `auth` that is not base64 of user:password")]
    Auth(String),
}

/// The credentials a Docker config (`.dockerconfigjson`, `~/.docker/config.json`) holds for
/// `registry`: anonymous when it has no entry for it. Entries are matched by host, whatever
/// scheme or path their key carries; Docker Hub's legacy key matches `docker.io`.
pub fn credentials(config: &[u8], registry: &str) -> Result<RegistryAuth, CredentialsError> {
    #[derive(Deserialize)]
    struct DockerConfig {
        #[serde(default)]
        auths: BTreeMap<String, Entry>,
    }
    #[derive(Deserialize)]
    struct Entry {
        auth: Option<String>,
        username: Option<String>,
        password: Option<String>,
        identitytoken: Option<String>,
    }
    let config: DockerConfig =
        serde_json::from_slice(config).map_err(|e| CredentialsError::Parse(e.to_string()))?;
    let host = |key: &str| {
        let key = key.split_once("://").map_or(key, |(_, rest)| rest);
        let key = key.split('/').next().unwrap_or(key);
        match key {
            "index.docker.io" | "registry-1.docker.io" | "docker.io" => "docker.io".to_owned(),
            other => other.to_owned(),
        }
    };
    let wanted = host(registry);
    let Some((key, entry)) = config.auths.iter().find(|(key, _)| host(key) == wanted) else {
        return Ok(RegistryAuth::Anonymous);
    };
    if let Some(token) = &entry.identitytoken {
        return Ok(RegistryAuth::Bearer(token.clone()));
    }
    if let (Some(username), Some(password)) = (&entry.username, &entry.password) {
        return Ok(RegistryAuth::Basic(username.clone(), password.clone()));
    }
    if let Some(auth) = &entry.auth {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .ok()
            .and_then(|d| String::from_utf8(d).ok())
            .ok_or_else(|| CredentialsError::Auth(key.clone()))?;
        let (username, password) = decoded
            .split_once(':')
            .ok_or_else(|| CredentialsError::Auth(key.clone()))?;
        return Ok(RegistryAuth::Basic(username.into(), password.into()));
    }
    Ok(RegistryAuth::Anonymous)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_of_a_component_names_what_it_exports() {
        let component = wat::parse_str(
            r#"(component
                (import "wasi:cli/environment@0.2.0" (instance))
                (instance $guest)
                (export "kubewasm:controller/guest@0.2.0" (instance $guest)))"#,
        )
        .unwrap();
        let config = WasmConfig::of_component(&component, "2026-01-01T00:00:00Z".into()).unwrap();
        let names = config.component.as_ref().unwrap();
        assert_eq!(names.exports, ["kubewasm:controller/guest@0.2.0"]);
        assert_eq!(names.imports, ["wasi:cli/environment@0.2.0"]);
        assert_eq!(config.contract().unwrap(), GUEST_INTERFACES[1]);
        assert_eq!(
            config.layer_digests,
            [format!("sha256:{}", sha256_hex(&component))]
        );
        // The layout's field names.
        let json = serde_json::to_value(&config).unwrap();
        assert_eq!(json["os"], "wasip2");
        assert_eq!(json["architecture"], "wasm");
        assert!(json["layerDigests"].is_array());
    }

    #[test]
    fn a_core_module_or_another_world_is_refused() {
        let core = wat::parse_str("(module)").unwrap();
        let error = WasmConfig::of_component(&core, String::new()).unwrap_err();
        assert!(error.contains("core module"), "{error}");
        let other = wat::parse_str(
            r#"(component (instance $i) (export "example:other/thing@1.0.0" (instance $i)))"#,
        )
        .unwrap();
        let error = WasmConfig::of_component(&other, String::new()).unwrap_err();
        assert!(error.contains("example:other/thing@1.0.0"), "{error}");
        let error = WasmConfig::of_component(b"garbage", String::new()).unwrap_err();
        assert!(error.contains("magic bytes"), "{error}");
    }

    #[test]
    fn a_config_of_other_tools_is_read() {
        // As other tools write it: no `component.target`, an author, unknown fields.
        let config: WasmConfig = serde_json::from_str(
            r#"{"created":"2025-01-01T00:00:00Z","author":"a","architecture":"wasm","os":"wasip2",
                "layerDigests":["sha256:00"],"extra":1,
                "component":{"exports":["kubewasm:controller/guest@0.1.0"],"imports":[]}}"#,
        )
        .unwrap();
        assert_eq!(config.contract().unwrap(), GUEST_INTERFACES[2]);
        let module: WasmConfig =
            serde_json::from_str(r#"{"architecture":"wasm","os":"wasip1"}"#).unwrap();
        assert!(module.contract().unwrap_err().contains("not a component"));
    }

    /// A peer on loopback that answers every request, after `pause`, with 503; and the count of
    /// requests it read.
    async fn failing_registry(
        pause: std::time::Duration,
    ) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let requests = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = requests.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let counted = counted.clone();
                tokio::spawn(async move {
                    let mut head = [0u8; 4096];
                    if stream.read(&mut head).await.unwrap_or(0) > 0 {
                        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        tokio::time::sleep(pause).await;
                        let answer =
                            "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n";
                        let _ = stream.write_all(answer.as_bytes()).await;
                    }
                });
            }
        });
        (address, requests)
    }

    #[tokio::test]
    async fn fetches_of_one_module_at_once_share_one_pull_and_its_failure() {
        let pause = std::time::Duration::from_millis(300);
        let (address, requests) = failing_registry(pause).await;
        let dir = tempfile::tempdir().unwrap();
        let registries = Registries::new(
            RegistrySettings::default(),
            ModuleStore::new(dir.path().join("modules")),
        );
        let artifact = Artifact {
            reference: parse_reference(&format!("{address}/team/mirror:v1")).unwrap(),
            manifest_digest: format!("sha256:{}", sha256_hex(b"manifest")),
            layer: OciDescriptor {
                media_type: LAYER_MEDIA_TYPE.into(),
                digest: format!("sha256:{}", sha256_hex(b"layer")),
                size: 5,
                ..OciDescriptor::default()
            },
            contract: GUEST_INTERFACES[0],
        };
        let fetches = (0..4).map(|_| registries.fetch(&artifact, &RegistryAuth::Anonymous));
        for outcome in futures::future::join_all(fetches).await {
            let error = outcome.unwrap_err();
            assert!(error.is_transient(), "{error}");
        }
        // One pull for the four, none of them pulling again after it failed.
        assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 1);
        // Once it failed, the next fetch tries again.
        let again = registries.fetch(&artifact, &RegistryAuth::Anonymous).await;
        assert!(again.is_err());
        assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[test]
    fn references_are_told_from_paths() {
        for reference in [
            "127.0.0.1:5000/podset:v1",
            "ghcr.io/team/podset@sha256:0123456789012345678901234567890123456789012345678901234567890123",
            "localhost/podset:v1",
        ] {
            assert!(looks_like_reference(reference), "{reference}");
        }
        for path in [
            "podset.wasm",
            "./podset.wasm",
            "target/podset.wasm",
            "/abs/x.wasm",
            "a/b",
        ] {
            assert!(!looks_like_reference(path), "{path}");
        }
    }

    #[test]
    fn credentials_are_found_by_registry_host() {
        let auth = base64::engine::general_purpose::STANDARD.encode("user:pa:ss");
        let config = format!(
            r#"{{"auths":{{
                "https://127.0.0.1:5000/v2/":{{"auth":"{auth}"}},
                "https://index.docker.io/v1/":{{"username":"hub","password":"secret"}},
                "ghcr.io":{{"identitytoken":"token"}},
                "broken.io":{{"auth":"!!"}}}}}}"#
        );
        let config = config.as_bytes();
        assert_eq!(
            credentials(config, "127.0.0.1:5000").unwrap(),
            RegistryAuth::Basic("user".into(), "pa:ss".into())
        );
        assert_eq!(
            credentials(config, "index.docker.io").unwrap(),
            RegistryAuth::Basic("hub".into(), "secret".into())
        );
        assert_eq!(
            credentials(config, "ghcr.io").unwrap(),
            RegistryAuth::Bearer("token".into())
        );
        assert_eq!(
            credentials(config, "quay.io").unwrap(),
            RegistryAuth::Anonymous
        );
        assert!(matches!(
            credentials(config, "broken.io"),
            Err(CredentialsError::Auth(_))
        ));
        assert!(matches!(
            credentials(b"{", "quay.io"),
            Err(CredentialsError::Parse(_))
        ));
    }
}
