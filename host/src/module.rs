//! Loading a guest module: compile it off the async executor, check that it implements the
//! contract at the supported version, pre-link it, and read and validate what it declares.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use kube::api::GroupVersionKind;

use crate::backend::{ApplyRequest, Backend, CallError, DeleteRequest, EventRequest, PatchRequest};
use crate::bindings::{ControllerPre, GUEST_INTERFACE, types};
use crate::cache::CachedObject;
use crate::imports::{CallContext, Declared, GuestEnv, to_gvk};
use crate::permissions::Permissions;
use crate::runtime::{CallState, Compiled, Limits, Runtime};
use crate::selector::LabelSelector;

/// Why a module could not be loaded. The previous version of a guest, if any, keeps running.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The module's path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a valid WebAssembly component.
    #[error("{path} is not a valid WebAssembly component: {message}")]
    Compile {
        /// The module's path.
        path: PathBuf,
        /// What the compiler reported.
        message: String,
    },
    /// The component does not implement the contract, or imports what the host does not give.
    #[error(
        "{path} does not match the `kubewasm:controller` world (this host implements {GUEST_INTERFACE}): {message}"
    )]
    World {
        /// The module's path.
        path: PathBuf,
        /// What the linker reported.
        message: String,
    },
    /// The component's `metadata` export failed.
    #[error("{path}: calling metadata() failed: {message}")]
    Metadata {
        /// The module's path.
        path: PathBuf,
        /// The trap or error.
        message: String,
    },
    /// What the component declares is not valid.
    #[error("{path}: invalid metadata: {message}")]
    Invalid {
        /// The module's path.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// A set of objects of one kind, as declared by a guest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Selection {
    /// The kind.
    pub kind: GroupVersionKind,
    /// One namespace, or all.
    pub namespace: Option<String>,
    /// A label selector, in canonical form.
    pub selector: Option<LabelSelector>,
}

impl Selection {
    /// Whether an object of this kind falls in the namespace and label selector. Cluster-scoped
    /// objects are in no namespace, so a namespace does not exclude them.
    pub fn selects(&self, object: &CachedObject) -> bool {
        (object.namespace.is_none()
            || self.namespace.is_none()
            || self.namespace == object.namespace)
            && self
                .selector
                .as_ref()
                .is_none_or(|s| s.matches(&object.labels))
    }
}

/// How a change to a watched object maps to primary keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapping {
    /// The object's owners of the primary kind.
    Owner,
    /// The primary object named by this label.
    Label(String),
    /// The guest's `map-keys` export.
    Guest,
}

/// A watched kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watch {
    /// What is watched.
    pub selection: Selection,
    /// How changes map to keys.
    pub mapping: Mapping,
}

/// What a module declares, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// The controller's name.
    pub name: String,
    /// The primary kind and its selection.
    pub primary: Selection,
    /// Owned kinds.
    pub owns: Vec<GroupVersionKind>,
    /// Watched kinds.
    pub watches: Vec<Watch>,
    /// The finalizer the host manages, if any.
    pub finalizer: Option<String>,
    /// Keys reconciled at the same time, at least 1.
    pub max_concurrency: u32,
    /// Period after which every primary object is enqueued again.
    pub resync: Option<Duration>,
}

impl Metadata {
    /// The kinds the guest may read and write.
    pub fn declared(&self) -> Declared {
        Declared {
            primary: self.primary.kind.clone(),
            owns: self.owns.clone(),
            watches: self
                .watches
                .iter()
                .map(|w| w.selection.kind.clone())
                .collect(),
        }
    }

    /// The namespaces its primary and owned kinds are watched in: the `configured` ones, or
    /// when there are none the one it declares (`None`: every namespace).
    pub fn namespaces(&self, configured: &[String]) -> Vec<Option<String>> {
        if configured.is_empty() {
            vec![self.primary.namespace.clone()]
        } else {
            configured.iter().cloned().map(Some).collect()
        }
    }
}

/// A compiled, pre-linked and validated module, ready to be instantiated for each call.
pub struct Module {
    /// Where it was loaded from.
    pub path: PathBuf,
    /// SHA-256 of its bytes, hex.
    pub digest: String,
    /// When it was loaded.
    pub loaded_at: SystemTime,
    /// Whether the compiled code was reused, from the compile cache or from a live module of
    /// the same bytes, rather than compiled.
    pub from_cache: bool,
    /// What it declares.
    pub metadata: Metadata,
    /// The pre-linked component, shared by every live module of the same bytes.
    pub pre: Arc<ControllerPre<CallState>>,
}

/// Loads, compiles and validates the module at `path`.
pub async fn load(
    runtime: &Runtime,
    path: &Path,
    limits: &Limits,
) -> Result<Arc<Module>, LoadError> {
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|source| LoadError::Read {
            path: path.to_owned(),
            source,
        })?;
    // The compiler would also read WebAssembly text, and report anything else as bad text.
    if !bytes.starts_with(b"\0asm") {
        return Err(LoadError::Compile {
            path: path.to_owned(),
            message: "not a WebAssembly binary: it does not start with the magic bytes \\0asm"
                .into(),
        });
    }
    let digest = sha256_hex(&bytes);
    let (pre, from_cache) = match runtime.linked(&digest) {
        Some(pre) => (pre, true),
        None => link(runtime, path, bytes, &digest).await?,
    };
    let declared = read_metadata(runtime, &pre, limits)
        .await
        .map_err(|message| LoadError::Metadata {
            path: path.to_owned(),
            message,
        })?;
    let metadata = validate(declared).map_err(|message| LoadError::Invalid {
        path: path.to_owned(),
        message,
    })?;
    runtime.share(&digest, &pre);
    Ok(Arc::new(Module {
        path: path.to_owned(),
        digest,
        loaded_at: SystemTime::now(),
        from_cache,
        metadata,
        pre,
    }))
}

/// Compiles `bytes` (or reads them from the compile cache) and links them against the world;
/// returns the pre-linked component and whether the compiled code came from the cache.
async fn link(
    runtime: &Runtime,
    path: &Path,
    bytes: Vec<u8>,
    digest: &str,
) -> Result<(Arc<ControllerPre<CallState>>, bool), LoadError> {
    let compiled = {
        let runtime = runtime.clone();
        let digest = digest.to_owned();
        tokio::task::spawn_blocking(move || runtime.compile(&bytes, &digest))
            .await
            .expect("compilation does not panic")
    };
    let Compiled { component, cached } = compiled.map_err(|e| LoadError::Compile {
        path: path.to_owned(),
        message: format!("{e:#}"),
    })?;
    let world_error = |e: wasmtime::Error| LoadError::World {
        path: path.to_owned(),
        message: format!("{e:#}"),
    };
    let instance_pre = runtime
        .linker()
        .instantiate_pre(&component)
        .map_err(world_error)?;
    let pre = ControllerPre::new(instance_pre).map_err(world_error)?;
    Ok((Arc::new(pre), cached))
}

async fn read_metadata(
    runtime: &Runtime,
    pre: &ControllerPre<CallState>,
    limits: &Limits,
) -> Result<types::ControllerMetadata, String> {
    let env = Arc::new(GuestEnv::new(
        "(loading)",
        Declared {
            primary: GroupVersionKind::gvk("", "", ""),
            owns: Vec::new(),
            watches: Vec::new(),
        },
        Arc::new(Sealed),
        limits.host_call_timeout,
        Permissions::new(None),
    ));
    let mut store = runtime.store(CallContext { env, scope: None }, limits);
    let instance = pre
        .instantiate_async(&mut store)
        .await
        .map_err(|e| format!("{e:#}"))?;
    instance
        .kubewasm_controller_guest()
        .call_metadata(&mut store)
        .await
        .map_err(|e| format!("{e:#}"))
}

fn validate(declared: types::ControllerMetadata) -> Result<Metadata, String> {
    let name = declared.name;
    if !is_dns_label(&name) {
        return Err(format!("name {name:?} is not a DNS-1123 label"));
    }
    if declared.max_concurrency == 0 {
        return Err("max-concurrency must be at least 1".into());
    }
    if let Some(finalizer) = &declared.finalizer
        && !finalizer.contains('/')
    {
        return Err(format!(
            "finalizer {finalizer:?} must be a qualified name such as example.com/cleanup"
        ));
    }
    let watches = declared
        .watches
        .into_iter()
        .map(|w| {
            Ok(Watch {
                selection: selection(w.selection)?,
                mapping: match w.mapping {
                    types::Mapping::Owner => Mapping::Owner,
                    types::Mapping::Label(label) => Mapping::Label(label),
                    types::Mapping::Guest => Mapping::Guest,
                },
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(Metadata {
        name,
        primary: selection(declared.primary)?,
        owns: declared.owns.into_iter().map(to_gvk).collect(),
        watches,
        finalizer: declared.finalizer,
        max_concurrency: declared.max_concurrency,
        resync: declared
            .resync_seconds
            .map(|s| Duration::from_secs(s.into())),
    })
}

fn selection(selection: types::Selection) -> Result<Selection, String> {
    let kind = to_gvk(selection.kind);
    if kind.version.is_empty() || kind.kind.is_empty() {
        return Err(format!("kind {kind:?} needs a version and a kind"));
    }
    let selector = selection
        .label_selector
        .map(|s| s.parse::<LabelSelector>().map_err(|e| e.to_string()))
        .transpose()?;
    Ok(Selection {
        kind,
        namespace: selection.namespace,
        selector,
    })
}

/// SHA-256 of `bytes`, lowercase hex: the digest modules are known and cached by.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether `name` is a DNS-1123 label: 1 to 63 lowercase letters, digits and `-`, starting and
/// ending with a letter or digit.
pub fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// The backend of `metadata()`: a module may not call the host while it is being loaded.
struct Sealed;

fn sealed<T>() -> Result<T, CallError> {
    Err(CallError::Denied(
        "host calls are not available in metadata()".into(),
    ))
}

#[async_trait]
impl Backend for Sealed {
    fn get(
        &self,
        _: &GroupVersionKind,
        _: Option<&str>,
        _: &str,
    ) -> Result<Option<Arc<str>>, CallError> {
        sealed()
    }
    fn list(
        &self,
        _: &GroupVersionKind,
        _: Option<&str>,
        _: Option<&LabelSelector>,
    ) -> Result<Vec<Arc<str>>, CallError> {
        sealed()
    }
    async fn apply(&self, _: ApplyRequest) -> Result<String, CallError> {
        sealed()
    }
    async fn patch(&self, _: PatchRequest) -> Result<String, CallError> {
        sealed()
    }
    async fn delete(&self, _: DeleteRequest) -> Result<(), CallError> {
        sealed()
    }
    async fn event(&self, _: EventRequest) -> Result<(), CallError> {
        sealed()
    }
}
