//! Why a module could not be pulled from or pushed to a registry: one error for the pull
//! protocol the host speaks itself and the push the registry client makes.

use oci_client::Reference;
use oci_client::errors::{OciDistributionError, OciErrorCode};

/// Why a module could not be pulled or pushed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OciError {
    /// The reference does not parse.
    #[error("{reference:?} is not an OCI reference: {message}")]
    Reference {
        /// The text given.
        reference: String,
        /// What is wrong with it.
        message: String,
    },
    /// The registry could not be reached, or answered with a server error: worth retrying.
    #[error("registry {registry} unreachable: {message}")]
    Unreachable {
        /// The registry's host.
        registry: String,
        /// What failed.
        message: String,
    },
    /// The registry refused the credentials, or gave none the access asked for.
    #[error("registry {registry} refused access to {reference}: {message}")]
    Unauthorized {
        /// The registry's host.
        registry: String,
        /// The reference.
        reference: String,
        /// What the registry said.
        message: String,
    },
    /// No manifest or blob has that name, tag or digest.
    #[error("{reference} not found: {message}")]
    NotFound {
        /// The reference.
        reference: String,
        /// What the registry said.
        message: String,
    },
    /// The artifact is not a WebAssembly component in the CNCF layout.
    #[error("{reference} is not a WebAssembly component artifact: {message}")]
    MediaType {
        /// The reference.
        reference: String,
        /// What is wrong.
        message: String,
    },
    /// The component does not export the contract this host implements.
    #[error("{reference}: {message}")]
    World {
        /// The reference.
        reference: String,
        /// What the config says.
        message: String,
    },
    /// The module is larger than the host accepts.
    #[error("{reference}: the module is {size} bytes, over the limit of {limit}")]
    TooLarge {
        /// The reference.
        reference: String,
        /// Its size, or the bytes read before the limit was passed.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A manifest, config or other answer of the registry passed the bound the host reads.
    #[error("{reference}: {what} is over the limit of {limit} bytes")]
    Oversized {
        /// The reference.
        reference: String,
        /// What was read: `the manifest`, `the config`, ...
        what: &'static str,
        /// The bound.
        limit: u64,
    },
    /// Content did not match the digest that names it.
    #[error("{reference}: digest mismatch: {message}")]
    Digest {
        /// The reference.
        reference: String,
        /// Expected and actual digests.
        message: String,
    },
    /// Any other failure the registry or the client reported.
    #[error("{reference}: {message}")]
    Other {
        /// The reference.
        reference: String,
        /// What failed.
        message: String,
    },
}

impl OciError {
    /// Whether the same request may succeed later without any change: the registry was down,
    /// overloaded or failed.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Unreachable { .. })
    }

    /// A short CamelCase reason for conditions, Events and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Reference { .. } => "InvalidReference",
            Self::Unreachable { .. } => "RegistryUnreachable",
            Self::Unauthorized { .. } => "RegistryUnauthorized",
            Self::NotFound { .. } => "ArtifactNotFound",
            Self::MediaType { .. } => "WrongMediaType",
            Self::World { .. } => "WrongWorld",
            Self::TooLarge { .. } => "ModuleTooLarge",
            Self::Oversized { .. } => "AnswerTooLarge",
            Self::Digest { .. } => "DigestMismatch",
            Self::Other { .. } => "PullFailed",
        }
    }

    /// The error the registry client reported for `reference`.
    pub fn from_client(reference: &Reference, error: OciDistributionError) -> Self {
        let registry = reference.resolve_registry().to_owned();
        let reference = reference.whole();
        let message = error.to_string();
        match error {
            OciDistributionError::RequestError(_) | OciDistributionError::IoError(_) => {
                Self::Unreachable { registry, message }
            }
            OciDistributionError::ServerError { code, .. } if code >= 500 || code == 429 => {
                Self::Unreachable { registry, message }
            }
            OciDistributionError::ServerError { code: 404, .. }
            | OciDistributionError::ImageManifestNotFoundError(_) => {
                Self::NotFound { reference, message }
            }
            OciDistributionError::ServerError {
                code: 401 | 403, ..
            }
            | OciDistributionError::UnauthorizedError { .. }
            | OciDistributionError::AuthenticationFailure(_) => Self::Unauthorized {
                registry,
                reference,
                message,
            },
            OciDistributionError::RegistryError { ref envelope, .. } => {
                let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
                if codes.iter().any(|c| {
                    matches!(
                        c,
                        OciErrorCode::ManifestUnknown
                            | OciErrorCode::BlobUnknown
                            | OciErrorCode::NameUnknown
                            | OciErrorCode::NotFound
                    )
                }) {
                    Self::NotFound { reference, message }
                } else if codes
                    .iter()
                    .any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied))
                {
                    Self::Unauthorized {
                        registry,
                        reference,
                        message,
                    }
                } else if codes
                    .iter()
                    .any(|c| matches!(c, OciErrorCode::Toomanyrequests))
                {
                    Self::Unreachable { registry, message }
                } else {
                    Self::Other { reference, message }
                }
            }
            OciDistributionError::DigestError(_) => Self::Digest { reference, message },
            OciDistributionError::UnsupportedMediaTypeError(_)
            | OciDistributionError::IncompatibleLayerMediaTypeError(_) => {
                Self::MediaType { reference, message }
            }
            _ => Self::Other { reference, message },
        }
    }
}
