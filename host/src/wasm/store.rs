//! Pulled modules kept on disk by the SHA-256 of their bytes, the key the compile cache uses for
//! their compiled code: a module pulled once is read from here, not pulled again, by a reload,
//! a rollback or a restart.
//!
//! Entries are written to a temporary file and renamed into place, and checked against their
//! name when read: a reader gets the whole module it asked for or nothing, and a damaged entry
//! is removed.

use std::path::PathBuf;

use crate::wasm::compile_cache::cache_dir;
use crate::wasm::module::sha256_hex;

/// A folder of modules named by digest; without a folder, nothing is kept.
#[derive(Debug, Clone, Default)]
pub struct ModuleStore {
    dir: Option<PathBuf>,
}

impl ModuleStore {
    /// A store in `dir`, created on the first write.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: Some(dir.into()),
        }
    }

    /// A store that keeps nothing: every pull fetches.
    pub fn none() -> Self {
        Self { dir: None }
    }

    /// The default folder: `$XDG_CACHE_HOME/kubewasm/modules`, else
    /// `$HOME/.cache/kubewasm/modules`; `None` when neither variable is set.
    pub fn default_dir() -> Option<PathBuf> {
        cache_dir("modules")
    }

    fn entry(&self, digest: &str) -> Option<PathBuf> {
        // A digest names a file only if it is one: 64 lowercase hex digits.
        let valid = digest.len() == 64
            && digest
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        Some(self.dir.as_ref()?.join(format!("{digest}.wasm"))).filter(|_| valid)
    }

    /// The module whose SHA-256 is `digest`, if the store holds it intact. Blocking.
    pub fn get(&self, digest: &str) -> Option<Vec<u8>> {
        let path = self.entry(digest)?;
        let bytes = std::fs::read(&path).ok()?;
        if sha256_hex(&bytes) == digest {
            return Some(bytes);
        }
        tracing::warn!(path = %path.display(), "discarding a damaged stored module");
        let _ = std::fs::remove_file(&path);
        None
    }

    /// Keeps `bytes`, whose SHA-256 is `digest`, unless kept already. Blocking. A failure is
    /// logged: it costs only a later pull.
    pub fn put(&self, digest: &str, bytes: &[u8]) {
        let (Some(dir), Some(path)) = (&self.dir, self.entry(digest)) else {
            return;
        };
        if path.exists() {
            // Content-addressed: kept already (and checked when read).
            return;
        }
        let temporary = dir.join(format!(".{digest}.{}.tmp", std::process::id()));
        let written = std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&temporary, bytes))
            .and_then(|()| std::fs::rename(&temporary, &path));
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temporary);
            tracing::warn!(path = %path.display(), %error, "pulled module not stored");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_module_is_read_back_and_a_damaged_one_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let store = ModuleStore::new(dir.path().join("modules"));
        let digest = sha256_hex(b"module");
        assert_eq!(store.get(&digest), None);
        store.put(&digest, b"module");
        assert_eq!(store.get(&digest).as_deref(), Some(&b"module"[..]));

        let path = store.entry(&digest).unwrap();
        std::fs::write(&path, b"other").unwrap();
        assert_eq!(store.get(&digest), None);
        assert!(!path.exists(), "the damaged entry is removed");
    }

    #[test]
    fn only_a_digest_names_an_entry() {
        let dir = tempfile::tempdir().unwrap();
        let store = ModuleStore::new(dir.path());
        for name in ["../escape", "ABC", "", &"a".repeat(63)] {
            store.put(name, b"x");
            assert_eq!(store.get(name), None, "{name}");
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let none = ModuleStore::none();
        none.put(&sha256_hex(b"x"), b"x");
        assert_eq!(none.get(&sha256_hex(b"x")), None);
    }
}
