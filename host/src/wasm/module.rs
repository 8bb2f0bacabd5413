//! Loading a guest module: compile it off the async executor, check that it implements the
//! contract at the supported version, pre-link it, and read and validate what it declares.

use std::path::Path;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use async_trait::async_trait;
use kube::api::GroupVersionKind;

use crate::cluster::selector::LabelSelector;
use crate::wasm::backend::{
    ApplyRequest, Backend, CallError, DeleteRequest, EventRequest, PatchRequest,
};
use crate::wasm::bindings::{GUEST_INTERFACES, GuestPre, types};
use crate::wasm::declaration::{self, Declared, Metadata};
use crate::wasm::env::{CallContext, GuestEnv};
use crate::wasm::limits::CallLimits;
use crate::wasm::module_bytes::ModuleBytes;
use crate::wasm::permissions::Permissions;
use crate::wasm::runtime::{Compiled, Runtime, within_deadline};
use crate::wasm::state::CallState;

/// Why a module could not be loaded. The previous version of a guest, if any, keeps running.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("reading {origin}: {source}")]
    Read {
        /// Where the module comes from: its path or OCI reference.
        origin: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a valid WebAssembly component.
    #[error("{origin} is not a valid WebAssembly component: {message}")]
    Compile {
        /// Where the module comes from: its path or OCI reference.
        origin: String,
        /// What the compiler reported.
        message: String,
    },
    /// The component does not implement the contract, or imports what the host does not give.
    #[error(
        "{origin} does not match the `kubewasm:controller` world (this host implements {}): {message}", GUEST_INTERFACES.join(", ")
    )]
    World {
        /// Where the module comes from: its path or OCI reference.
        origin: String,
        /// What the linker reported.
        message: String,
    },
    /// The component's `metadata` export failed.
    #[error("{origin}: calling metadata() failed: {message}")]
    Metadata {
        /// Where the module comes from: its path or OCI reference.
        origin: String,
        /// The trap or error.
        message: String,
    },
    /// What the component declares is not valid.
    #[error("{origin}: invalid metadata: {message}")]
    Invalid {
        /// Where the module comes from: its path or OCI reference.
        origin: String,
        /// What is wrong.
        message: String,
    },
}

/// A compiled, pre-linked and validated module, ready to be instantiated for each call.
#[derive(Clone)]
pub struct Module {
    /// Where it was loaded from: its path or OCI reference.
    pub origin: String,
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
    pub pre: Arc<GuestPre<CallState>>,
}

/// Loads, compiles and validates the module at `path`.
pub async fn load(
    runtime: &Runtime,
    path: &Path,
    limits: &CallLimits,
) -> Result<Arc<Module>, LoadError> {
    let origin = path.display().to_string();
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|source| LoadError::Read {
            origin: origin.clone(),
            source,
        })?;
    load_bytes(runtime, origin, ModuleBytes::new(bytes), limits).await
}

/// Compiles and validates the module `bytes`, which came from `origin`.
pub async fn load_bytes(
    runtime: &Runtime,
    origin: String,
    bytes: ModuleBytes,
    limits: &CallLimits,
) -> Result<Arc<Module>, LoadError> {
    // The compiler would also read WebAssembly text, and report anything else as bad text.
    if !bytes.starts_with(b"\0asm") {
        return Err(LoadError::Compile {
            origin,
            message: "not a WebAssembly binary: it does not start with the magic bytes \\0asm"
                .into(),
        });
    }
    let digest = bytes.digest().to_owned();
    let (pre, from_cache) = match runtime.linked(&digest) {
        Some(pre) => (pre, true),
        None => {
            // Loads of the same bytes at once wait for the first: one compiled copy for all.
            let _linking = runtime.linking(&digest).await;
            match runtime.linked(&digest) {
                Some(pre) => (pre, true),
                None => {
                    let (pre, cached) = link(runtime, &origin, bytes, &digest).await?;
                    runtime.share(&digest, &pre);
                    (pre, cached)
                }
            }
        }
    };
    let declared = read_metadata(runtime, &pre, limits)
        .await
        .map_err(|message| LoadError::Metadata {
            origin: origin.clone(),
            message,
        })?;
    let metadata = declaration::validate(declared).map_err(|message| LoadError::Invalid {
        origin: origin.clone(),
        message,
    })?;
    Ok(Arc::new(Module {
        origin,
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
    origin: &str,
    bytes: ModuleBytes,
    digest: &str,
) -> Result<(Arc<GuestPre<CallState>>, bool), LoadError> {
    let compiled = {
        let runtime = runtime.clone();
        let digest = digest.to_owned();
        let turn = runtime.compile_turn(&digest).await;
        tokio::task::spawn_blocking(move || {
            let _turn = turn;
            runtime.compile(&bytes, &digest)
        })
        .await
        .expect("compilation does not panic")
    };
    let Compiled { component, cached } = compiled.map_err(|e| LoadError::Compile {
        origin: origin.to_owned(),
        message: format!("{e:#}"),
    })?;
    let world_error = |e: wasmtime::Error| LoadError::World {
        origin: origin.to_owned(),
        message: format!("{e:#}"),
    };
    let instance_pre = runtime
        .linker()
        .instantiate_pre(&component)
        .map_err(world_error)?;
    let pre = GuestPre::new(instance_pre).map_err(world_error)?;
    Ok((Arc::new(pre), cached))
}

async fn read_metadata(
    runtime: &Runtime,
    pre: &GuestPre<CallState>,
    limits: &CallLimits,
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
    // Loading takes its instance from the host's pool like any call.
    let _slot = runtime.slot().await;
    let start = Instant::now();
    let mut store = runtime.store(CallContext::new(env, None), limits);
    within_deadline(limits, start, async {
        let instance = pre.instantiate(&mut store).await?;
        instance.metadata(&mut store).await
    })
    .await
    .map_err(|e| match e.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::Interrupt) => format!("deadline of {:?} exceeded", limits.timeout),
        _ => format!("{e:#}"),
    })
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
    fn list_controlled(
        &self,
        _: &GroupVersionKind,
        _: Option<&str>,
        _: &str,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Loads `bytes` from a file, as the host loads a configured module.
    async fn load_bytes(bytes: &[u8]) -> Result<Arc<Module>, LoadError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("guest.wasm");
        std::fs::write(&path, bytes).unwrap();
        load(&Runtime::new().unwrap(), &path, &CallLimits::default()).await
    }

    #[tokio::test]
    async fn a_missing_file_is_a_read_error() {
        let error = load(
            &Runtime::new().unwrap(),
            Path::new("/nonexistent/guest.wasm"),
            &CallLimits::default(),
        )
        .await
        .err()
        .unwrap();
        assert!(matches!(error, LoadError::Read { .. }), "{error}");
    }

    #[tokio::test]
    async fn text_is_refused_before_the_compiler_sees_it() {
        // Valid WebAssembly text: the compiler would accept it, the host must not.
        let error = load_bytes(b"(component)").await.err().unwrap();
        assert!(
            matches!(&error, LoadError::Compile { message, .. } if message.contains("magic bytes")),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_core_module_and_garbage_after_the_magic_are_not_components() {
        for bytes in [
            wat::parse_str("(module)").unwrap(),
            b"\0asm\x0d\0\x01\0garbage".to_vec(),
        ] {
            let error = load_bytes(&bytes).await.err().unwrap();
            assert!(matches!(error, LoadError::Compile { .. }), "{error}");
        }
    }

    #[tokio::test]
    async fn a_component_without_the_contract_does_not_match_the_world() {
        let error = load_bytes(&wat::parse_str("(component)").unwrap())
            .await
            .err()
            .unwrap();
        assert!(
            matches!(&error, LoadError::World { message, .. } if message.contains(GUEST_INTERFACES[0])),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_guest_interface_of_a_version_the_host_lacks_is_refused() {
        // Semver lookups would find 0.2.9's export under 0.2.1's name; its contract is newer.
        let newer = wat::parse_str(
            r#"(component (instance $i) (export "kubewasm:controller/guest@0.2.9" (instance $i)))"#,
        )
        .unwrap();
        let error = load_bytes(&newer).await.err().unwrap();
        assert!(
            matches!(&error, LoadError::World { message, .. }
                if message.contains("exports kubewasm:controller/guest@0.2.9, a version this host")),
            "{error}"
        );
        assert!(
            error
                .to_string()
                .contains(GUEST_INTERFACES.join(", ").as_str()),
            "{error}"
        );
    }
}
