//! Pulled modules kept on disk by the SHA-256 of their bytes, the key the compile cache uses for
//! their compiled code: a module pulled once is read from here, not pulled again, by a reload,
//! a rollback or a restart.
//!
//! Entries are written to a temporary file and renamed into place, and checked against their
//! name when read: a reader gets the whole module it asked for or nothing, and a damaged entry
//! is removed.
//!
//! A stored module is not a license to run it: beside each entry the store records who took it
//! from its source ([`Access`]: a digest, keyed by a secret of the store's own, of the
//! repository and credentials that resolved it, or of the namespace whose object held it), and
//! a caller that cannot show the same is refused the entry until it resolves the module itself.
//!
//! The store holds at most its bound in bytes: past it, the entries read least recently that
//! nobody names (see [`ModuleStore::name`]) are removed.

use std::collections::HashSet;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

use sha2::Digest as _;

use crate::wasm::compile_cache::cache_dir;
use crate::wasm::evict::{self, Named};
use crate::wasm::module_bytes::sha256_hex;

/// The default bound of a store: 2 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 2 << 30;
/// The most records of who took a module kept beside it; the oldest go first.
const MAX_ACCESS_RECORDS: usize = 256;

/// Who took a module from its source, as the store records it: see the module doc.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Access([u8; 32]);

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Access(..)")
    }
}

/// A folder of modules named by digest; without a folder, nothing is kept.
#[derive(Debug, Clone)]
pub struct ModuleStore {
    dir: Option<PathBuf>,
    max_bytes: u64,
    /// The digests an object or a revision names: never removed to make room.
    named: Named,
}

impl Default for ModuleStore {
    fn default() -> Self {
        Self::none()
    }
}

impl ModuleStore {
    /// A store in `dir`, created on the first write, of at most [`DEFAULT_MAX_BYTES`].
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: Some(dir.into()),
            max_bytes: DEFAULT_MAX_BYTES,
            named: Named::default(),
        }
    }

    /// This store with at most `max_bytes` of modules.
    #[must_use]
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// A store that keeps nothing: every pull fetches.
    pub fn none() -> Self {
        Self {
            dir: None,
            max_bytes: 0,
            named: Named::default(),
        }
    }

    /// The default folder: `$XDG_CACHE_HOME/kubewasm/modules`, else
    /// `$HOME/.cache/kubewasm/modules`; `None` when neither variable is set.
    pub fn default_dir() -> Option<PathBuf> {
        cache_dir("modules")
    }

    fn entry(&self, digest: &str) -> Option<PathBuf> {
        Some(self.dir.as_ref()?.join(format!("{digest}.wasm"))).filter(|_| is_digest(digest))
    }

    /// The module whose SHA-256 is `digest`, if the store holds it intact and records `access`
    /// as having taken it. Blocking.
    pub fn get(&self, digest: &str, access: &Access) -> Option<Vec<u8>> {
        if !self.admits(digest, access) {
            return None;
        }
        let path = self.entry(digest)?;
        let bytes = std::fs::read(&path).ok()?;
        if sha256_hex(&bytes) == digest {
            evict::touch(&path);
            return Some(bytes);
        }
        tracing::warn!(path = %path.display(), "discarding a damaged stored module");
        let _ = std::fs::remove_file(&path);
        None
    }

    /// Keeps `bytes`, whose SHA-256 is `digest`, unless kept already, and records that
    /// `access` took it; then makes room down to the bound. Blocking. A failure is logged: it
    /// costs only a later pull.
    pub fn put(&self, digest: &str, bytes: &[u8], access: &Access) {
        let (Some(dir), Some(path)) = (&self.dir, self.entry(digest)) else {
            return;
        };
        if !path.exists() {
            let temporary = dir.join(format!(".{digest}.{}.tmp", std::process::id()));
            let written = std::fs::create_dir_all(dir)
                .and_then(|()| std::fs::write(&temporary, bytes))
                .and_then(|()| std::fs::rename(&temporary, &path));
            if let Err(error) = written {
                let _ = std::fs::remove_file(&temporary);
                tracing::warn!(path = %path.display(), %error, "pulled module not stored");
                return;
            }
        }
        self.admit(digest, access);
        self.trim(digest);
    }

    /// The record of who took a module: `parts` (a repository and credentials, or a namespace)
    /// under the store's secret key. `None` without a folder, or when the key cannot be read
    /// or made.
    pub fn access(&self, parts: &[&[u8]]) -> Option<Access> {
        let key = self.key()?;
        let mut hash = sha2::Sha256::new();
        hash.update(key);
        for part in parts {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part);
        }
        Some(Access(hash.finalize().into()))
    }

    /// Replaces the digests objects and their revisions name, which are never removed to make
    /// room (here, and in a compile cache given [`Self::named`]).
    pub fn name(&self, digests: HashSet<String>) {
        self.named.set(digests);
    }

    /// The digests named, to share with a compile cache.
    pub fn named(&self) -> Named {
        self.named.clone()
    }

    /// Records that `access` took the module `digest` from its source (its credentials
    /// resolved a manifest naming it, say): `access` may then read it from the store.
    pub fn admit(&self, digest: &str, access: &Access) {
        let Some(path) = self.records(digest) else {
            return;
        };
        let mut records = read_records(&path);
        if records.contains(&access.0) {
            return;
        }
        records.push(access.0);
        let first = records.len().saturating_sub(MAX_ACCESS_RECORDS);
        let text: String = records[first..]
            .iter()
            .map(|r| format!("{}\n", hex(r)))
            .collect();
        let temporary = path.with_extension(format!("access.{}.tmp", std::process::id()));
        let written =
            std::fs::write(&temporary, text).and_then(|()| std::fs::rename(&temporary, &path));
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temporary);
            tracing::warn!(path = %path.display(), %error, "who took a stored module not recorded");
        }
    }

    /// Whether the store records that `access` took the module `digest`.
    fn admits(&self, digest: &str, access: &Access) -> bool {
        self.records(digest)
            .is_some_and(|path| read_records(&path).contains(&access.0))
    }

    fn records(&self, digest: &str) -> Option<PathBuf> {
        Some(self.dir.as_ref()?.join(format!("{digest}.access"))).filter(|_| is_digest(digest))
    }

    /// The store's secret key, made on first use (readable by the host alone).
    fn key(&self) -> Option<[u8; 32]> {
        let dir = self.dir.as_ref()?;
        let path = dir.join(".key");
        let mut key = [0u8; 32];
        if let Ok(mut file) = std::fs::File::open(&path)
            && file.read_exact(&mut key).is_ok()
        {
            return Some(key);
        }
        std::fs::File::open("/dev/urandom")
            .and_then(|mut random| random.read_exact(&mut key))
            .ok()?;
        let temporary = dir.join(format!(".key.{}.tmp", std::process::id()));
        let made = std::fs::create_dir_all(dir).and_then(|()| {
            let mut options = std::fs::File::options();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            options.open(&temporary)?.write_all(&key)?;
            // Another process may have made one meanwhile: the first one made stays.
            std::fs::hard_link(&temporary, &path)
        });
        let _ = std::fs::remove_file(&temporary);
        if let Err(error) = made
            && error.kind() != std::io::ErrorKind::AlreadyExists
        {
            tracing::warn!(path = %path.display(), %error, "the module store's key cannot be made; stored modules are not used");
            return None;
        }
        let mut file = std::fs::File::open(&path).ok()?;
        file.read_exact(&mut key).ok()?;
        Some(key)
    }

    /// Removes the entries read least recently, but `kept` and those named, until the store
    /// holds at most its bound.
    fn trim(&self, kept: &str) {
        if let Some(dir) = &self.dir {
            let digest = |name: &str| {
                name.strip_suffix(".wasm")
                    .filter(|d| is_digest(d))
                    .map(str::to_owned)
            };
            let access = |digest: &str| vec![format!("{digest}.access")];
            evict::trim(dir, self.max_bytes, digest, (kept, &self.named), access);
        }
    }
}

/// Whether `digest` names a file: 64 lowercase hex digits.
fn is_digest(digest: &str) -> bool {
    digest.len() == 64
        && digest
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn read_records(path: &Path) -> Vec<[u8; 32]> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().filter_map(parse_hex).collect()
}

fn hex(bytes: &[u8; 32]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_hex(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if text.len() != 64 {
        return None;
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_module_is_read_back_and_a_damaged_one_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let store = ModuleStore::new(dir.path().join("modules"));
        let access = store.access(&[b"ns"]).unwrap();
        let digest = sha256_hex(b"module");
        assert_eq!(store.get(&digest, &access), None);
        store.put(&digest, b"module", &access);
        assert_eq!(store.get(&digest, &access).as_deref(), Some(&b"module"[..]));

        let path = store.entry(&digest).unwrap();
        std::fs::write(&path, b"other").unwrap();
        assert_eq!(store.get(&digest, &access), None);
        assert!(!path.exists(), "the damaged entry is removed");
    }

    #[test]
    fn only_who_took_a_module_gets_it_from_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = ModuleStore::new(dir.path());
        let (a, b) = (
            store.access(&[b"registry/a", b"secret-a"]).unwrap(),
            store.access(&[b"registry/a", b"anonymous"]).unwrap(),
        );
        let digest = sha256_hex(b"private");
        store.put(&digest, b"private", &a);
        assert_eq!(store.get(&digest, &b), None, "another caller is refused");
        assert!(store.get(&digest, &a).is_some());
        // Once b has taken it from its source itself, b may read it too.
        store.put(&digest, b"private", &b);
        assert!(store.get(&digest, &b).is_some());
        // The key persists: a store opened again on the folder agrees.
        let again = ModuleStore::new(dir.path());
        assert_eq!(again.access(&[b"registry/a", b"secret-a"]), Some(a));
        // Parts are told apart by their lengths.
        assert_ne!(
            store.access(&[b"ab", b"c"]).unwrap(),
            store.access(&[b"a", b"bc"]).unwrap()
        );
        let other = ModuleStore::new(tempfile::tempdir().unwrap().path());
        assert_ne!(other.access(&[b"registry/a", b"secret-a"]), Some(a));
    }

    #[test]
    fn the_least_recently_read_unnamed_modules_make_room() {
        let dir = tempfile::tempdir().unwrap();
        let store = ModuleStore::new(dir.path()).with_max_bytes(25);
        let access = store.access(&[b"ns"]).unwrap();
        let modules: Vec<(String, Vec<u8>)> = (0..4u8)
            .map(|i| {
                let bytes = vec![i; 10];
                (sha256_hex(&bytes), bytes)
            })
            .collect();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(100);
        for (i, (digest, bytes)) in modules[..2].iter().enumerate() {
            store.put(digest, bytes, &access);
            let file = std::fs::File::options()
                .append(true)
                .open(store.entry(digest).unwrap())
                .unwrap();
            file.set_modified(old + std::time::Duration::from_secs(i as u64))
                .unwrap();
        }
        store.name(HashSet::from([modules[0].0.clone()]));
        // A third module passes the bound: the oldest unnamed one goes.
        store.put(&modules[2].0, &modules[2].1, &access);
        assert!(store.get(&modules[0].0, &access).is_some(), "named");
        assert!(store.get(&modules[1].0, &access).is_none(), "removed");
        assert!(store.get(&modules[2].0, &access).is_some(), "just put");
    }

    #[test]
    fn only_a_digest_names_an_entry() {
        let dir = tempfile::tempdir().unwrap();
        let store = ModuleStore::new(dir.path());
        let access = store.access(&[b"ns"]).unwrap();
        for name in ["../escape", "ABC", "", &"a".repeat(63)] {
            store.put(name, b"x", &access);
            assert_eq!(store.get(name, &access), None, "{name}");
        }
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [".key"]);
        let none = ModuleStore::none();
        assert!(none.access(&[b"ns"]).is_none());
    }
}
