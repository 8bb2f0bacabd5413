//! The host's error, and the CamelCase reason it gives conditions and Events.

use crate::wasm::module::LoadError;
use crate::wasm::permissions::Requirement;
use crate::wasm::runtime::RuntimeError;

/// Why a module could not be started, at start-up or on reload.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The WebAssembly runtime could not be created.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A configured module could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A module's declaration needs more than its grants allow.
    #[error(
        "{origin}: module {guest:?} needs permissions its grants do not give:\n  {}",
        missing.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  ")
    )]
    NotGranted {
        /// The guest.
        guest: String,
        /// Where the module comes from.
        origin: String,
        /// What is missing.
        missing: Vec<Requirement>,
    },
    /// The host's own RBAC does not allow what a controller object's module may do.
    #[error(
        "{origin}: module {guest:?} may do what the host's own RBAC does not allow it:\n  {}",
        denied.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  ")
    )]
    NotPermitted {
        /// The guest.
        guest: String,
        /// Where the module comes from.
        origin: String,
        /// What the API server denies the host.
        denied: Vec<Requirement>,
    },
    /// The host's own access could not be reviewed.
    #[error("asking the API server what the host may do: {0}")]
    AccessReview(#[source] std::sync::Arc<kube::Error>),
    /// A kind a confined module watches could not be resolved, so its watch cannot be narrowed.
    #[error(
        "{origin}: resolving {kind} to confine its watch to the controller's namespace: {source}"
    )]
    Unresolved {
        /// Where the module comes from.
        origin: String,
        /// The kind, as `group/version Kind`.
        kind: String,
        /// What discovery answered.
        #[source]
        source: kube::Error,
    },
    /// A controller confined to its namespace declares cluster-scoped kinds, which no
    /// namespace holds.
    #[error(
        "{origin}: a WasmController confined to its namespace may not declare the cluster-scoped \
         {}",
        kinds.join(", ")
    )]
    ClusterScoped {
        /// Where the module comes from.
        origin: String,
        /// The kinds, as `group/version Kind`.
        kinds: Vec<String>,
    },
    /// Two modules declare the same controller name.
    #[error(
        "the controller name {name:?} is taken by {holder}; set `name` (a WasmController's \
         `controllerName`) to tell them apart"
    )]
    DuplicateName {
        /// The name.
        name: String,
        /// Who holds it: a module file or a WasmController.
        holder: String,
    },
    /// The module directories could not be watched.
    #[error("watching module files: {0}")]
    Watch(#[source] notify::Error),
}

impl HostError {
    /// A short CamelCase reason for conditions, Events and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Runtime(_) => "RuntimeFailed",
            Self::Load(LoadError::Read { .. }) => "SourceUnreadable",
            Self::Load(LoadError::Compile { .. }) => "NotAComponent",
            Self::Load(LoadError::World { .. }) => "WrongWorld",
            Self::Load(LoadError::Metadata { .. } | LoadError::Invalid { .. }) => "InvalidModule",
            Self::NotGranted { .. } => "NotGranted",
            Self::NotPermitted { .. } => "NotPermitted",
            Self::AccessReview(_) => "AccessReviewFailed",
            Self::Unresolved { .. } => "KindUnresolved",
            Self::ClusterScoped { .. } => "ClusterScopedKind",
            Self::DuplicateName { .. } => "DuplicateName",
            Self::Watch(_) => "WatchFailed",
        }
    }
}
