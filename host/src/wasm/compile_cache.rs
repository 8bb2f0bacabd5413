//! Compiled modules cached on disk by content digest, so that a restart or a reload of a module
//! compiled before costs a file read instead of a compilation.
//!
//! An entry is named by the SHA-256 of the component's bytes and a hash of everything that
//! makes compiled code compatible with this engine (wasmtime's version, target and settings), so
//! a host built differently never reads another's entry. Entries are written to a temporary file
//! and renamed into place: a reader sees a whole entry or none.
//!
//! The cache holds at most its bound ([`DEFAULT_MAX_BYTES`] unless set): past it, the entries
//! read least recently that no object or revision names go (see [`crate::wasm::evict`]).
//!
//! **Warning:** loading an entry runs the native code in it. The cache directory must be writable
//! by the host alone (an `emptyDir` in a pod, the user's cache directory on a workstation).

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

use crate::wasm::evict::{self, Named};

/// The default bound of a compile cache: 4 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 4 << 30;

/// Why an entry could not be written. Failing to write only costs the next start a compilation.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The directory could not be created or the entry not written.
    #[error("writing compiled module cache entry {}: {source}", path.display())]
    Write {
        /// The entry.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The component could not be serialized.
    #[error("serializing a compiled module: {0}")]
    Serialize(#[source] wasmtime::Error),
}

/// The folder `leaf` of the host's cache: under `$XDG_CACHE_HOME/kubewasm`, else
/// `$HOME/.cache/kubewasm`; `None` when neither variable is set.
pub fn cache_dir(leaf: &str) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))?;
    Some(base.join("kubewasm").join(leaf))
}

/// A directory of compiled components.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: PathBuf,
    engine_key: String,
    max_bytes: u64,
    named: Named,
}

impl CompileCache {
    /// A cache in `dir` for components compiled by `engine`; the directory is created on the
    /// first write.
    pub fn new(dir: impl Into<PathBuf>, engine: &Engine) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Self {
            dir: dir.into(),
            engine_key: format!("{:016x}", hasher.finish()),
            max_bytes: DEFAULT_MAX_BYTES,
            named: Named::default(),
        }
    }

    /// This cache with at most `max_bytes` of entries, never removing those `named`.
    #[must_use]
    pub fn bounded(mut self, max_bytes: u64, named: Named) -> Self {
        self.max_bytes = max_bytes;
        self.named = named;
        self
    }

    /// The default directory: `$XDG_CACHE_HOME/kubewasm/compiled`, else
    /// `$HOME/.cache/kubewasm/compiled`; `None` when neither variable is set.
    pub fn default_dir() -> Option<PathBuf> {
        cache_dir("compiled")
    }

    fn entry(&self, digest: &str) -> PathBuf {
        self.dir.join(format!("{digest}-{}.cwasm", self.engine_key))
    }

    /// Whether an entry for this digest exists (usable or not: [`CompileCache::get`] tells).
    pub fn holds(&self, digest: &str) -> bool {
        self.entry(digest).is_file()
    }

    /// The cached component with this digest, if there is a usable entry. An entry the engine
    /// rejects (corrupt, or from an incompatible build) is removed and reported as absent.
    pub fn get(&self, engine: &Engine, digest: &str) -> Option<Component> {
        let path = self.entry(digest);
        if !path.is_file() {
            return None;
        }
        match deserialize(engine, &path) {
            Ok(component) => {
                evict::touch(&path);
                Some(component)
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "discarding unusable compiled module");
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Stores a compiled component under its digest.
    pub fn put(&self, digest: &str, component: &Component) -> Result<(), CacheError> {
        let bytes = component.serialize().map_err(CacheError::Serialize)?;
        let path = self.entry(digest);
        let write_error = |source| CacheError::Write {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(write_error)?;
        let temporary = self
            .dir
            .join(format!(".{digest}.{}.tmp", std::process::id()));
        std::fs::write(&temporary, &bytes).map_err(write_error)?;
        std::fs::rename(&temporary, &path).map_err(|source| {
            let _ = std::fs::remove_file(&temporary);
            write_error(source)
        })?;
        let suffix = format!("-{}.cwasm", self.engine_key);
        let digest_of = |name: &str| name.strip_suffix(suffix.as_str()).map(str::to_owned);
        evict::trim(
            &self.dir,
            self.max_bytes,
            digest_of,
            (digest, &self.named),
            |_| Vec::new(),
        );
        Ok(())
    }
}

/// Loads a compiled component written by [`CompileCache::put`].
#[allow(unsafe_code)]
fn deserialize(engine: &Engine, path: &Path) -> wasmtime::Result<Component> {
    // SAFETY: wasmtime requires that the file holds a component serialized by a compatible
    // engine and that nobody alters it while it is mapped. Entries are written only by
    // `CompileCache::put` (whole, through a rename) into a directory that must be writable by
    // the host alone, and their names carry the engine's compatibility hash; wasmtime checks
    // the header and rejects incompatible artifacts itself.
    unsafe { Component::deserialize_file(engine, path) }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMPONENT: &str = "(component (core module))";

    #[test]
    fn a_stored_component_is_read_back_and_a_corrupt_entry_is_dropped() {
        let dir = std::env::temp_dir().join(format!("kubewasm-cache-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let engine = Engine::default();
        let cache = CompileCache::new(&dir, &engine);
        assert!(cache.get(&engine, "abc").is_none());
        let component = Component::new(&engine, wat::parse_str(COMPONENT).unwrap()).unwrap();
        cache.put("abc", &component).unwrap();
        assert!(cache.get(&engine, "abc").is_some());

        std::fs::write(cache.entry("abc"), b"not a compiled module").unwrap();
        assert!(cache.get(&engine, "abc").is_none());
        assert!(!cache.entry("abc").exists(), "the corrupt entry is removed");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn past_its_bound_the_cache_keeps_the_named_and_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::default();
        let component = Component::new(&engine, wat::parse_str(COMPONENT).unwrap()).unwrap();
        let size = component.serialize().unwrap().len() as u64;
        let named = Named::default();
        named.set(["named".to_owned()].into());
        let cache = CompileCache::new(dir.path(), &engine).bounded(2 * size, named);
        for digest in ["named", "old", "new"] {
            cache.put(digest, &component).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(cache.entry("named").exists());
        assert!(!cache.entry("old").exists(), "read least recently");
        assert!(cache.entry("new").exists());
    }
}
