//! Bounds on the host's folders of modules: past its bound in bytes, a folder loses the entries
//! read least recently, but never one that an object or a revision names ([`Named`]).
//!
//! Reading an entry marks it recent (its modification time is set to now), so entries in use
//! stay while ones nobody asked for in a long time go.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// The module digests (SHA-256, hex) that objects and their revisions name: shared by the
/// module store and the compile cache, set by whoever knows the objects.
#[derive(Debug, Clone, Default)]
pub struct Named(Arc<Mutex<HashSet<String>>>);

impl Named {
    /// Replaces the digests named.
    pub fn set(&self, digests: HashSet<String>) {
        *self.0.lock().expect("named modules lock") = digests;
    }

    /// Whether `digest` is named.
    pub fn contains(&self, digest: &str) -> bool {
        self.0.lock().expect("named modules lock").contains(digest)
    }
}

/// Marks the entry at `path` read now.
pub fn touch(path: &Path) {
    let _ = std::fs::File::options()
        .append(true)
        .open(path)
        .and_then(|f| f.set_modified(SystemTime::now()));
}

/// Removes entries of `dir` until they hold at most `bound` bytes: files whose name `digest`
/// reads as a module's digest, read least recently first, but `kept` and those `named`. With
/// each entry go the files `companions` names for its digest. Returns what the entries hold
/// then.
pub fn trim(
    dir: &Path,
    bound: u64,
    digest: impl Fn(&str) -> Option<String>,
    (kept, named): (&str, &Named),
    companions: impl Fn(&str) -> Vec<String>,
) -> u64 {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut entries: Vec<(SystemTime, u64, String, String)> = listing
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let module = digest(&name)?;
            let meta = entry.metadata().ok()?;
            Some((meta.modified().ok()?, meta.len(), module, name))
        })
        .collect();
    let mut total: u64 = entries.iter().map(|(_, size, _, _)| size).sum();
    entries.sort();
    for (_, size, module, name) in entries {
        if total <= bound {
            break;
        }
        if module == kept || named.contains(&module) {
            continue;
        }
        let _ = std::fs::remove_file(dir.join(&name));
        for companion in companions(&module) {
            let _ = std::fs::remove_file(dir.join(companion));
        }
        total = total.saturating_sub(size);
        tracing::info!(file = %name, "removed to keep its folder under its bound");
    }
    if total > bound {
        tracing::warn!(
            folder = %dir.display(),
            bytes = total,
            bound,
            "the modules objects and revisions name hold more than their folder's bound"
        );
    }
    total
}
