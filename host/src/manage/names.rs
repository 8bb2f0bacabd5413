//! Controller names: the guest each name belongs to, and which guest wins where two claim one.
//!
//! A guest is known by its module file or its WasmController ([`GuestKey`]); its controller
//! name (its `controller` in metrics, its field manager, its Events' reporter) is unique in the
//! host. Where two guests claim one name, a module file's claim comes first, then the older
//! object's (by creation time, then namespace and name), so every replica picks the same winner
//! whatever order it loads them in.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use crate::config::ModuleConfig;
use crate::manage::objects::ControllerKey;
use crate::wasm::module_bytes;

/// What a running guest is known by: its file in the configuration, or its controller object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GuestKey {
    /// A module of the configuration file.
    File(PathBuf),
    /// A WasmController object.
    Object {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

impl std::fmt::Display for GuestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(path) => write!(f, "the module file {}", path.display()),
            Self::Object { namespace, name } => write!(f, "WasmController {namespace}/{name}"),
        }
    }
}

impl From<&ControllerKey> for GuestKey {
    fn from((namespace, name): &ControllerKey) -> Self {
        Self::Object {
            namespace: namespace.clone(),
            name: name.clone(),
        }
    }
}

/// Which guest holds each controller name, and when each object was created.
#[derive(Debug, Default)]
pub struct Names {
    held: Mutex<BTreeMap<String, GuestKey>>,
    created: Mutex<BTreeMap<GuestKey, String>>,
}

impl Names {
    /// Gives `name` to `key`, whatever held it: a module file of the configuration at start.
    pub fn hold(&self, name: &str, key: &GuestKey) {
        let mut held = self.held.lock().expect("names lock");
        held.insert(name.to_owned(), key.clone());
    }

    /// Records when the object of `key` was created (RFC 3339), its claim to a name.
    pub fn created(&self, key: &GuestKey, at: &str) {
        let mut created = self.created.lock().expect("created lock");
        created.insert(key.clone(), at.to_owned());
    }

    /// Forgets the object of `key`.
    pub fn forget(&self, key: &GuestKey) {
        self.created.lock().expect("created lock").remove(key);
    }

    /// Claims `name` for `key`. When a younger claim holds it, `key` takes it and that holder
    /// is returned, to be stopped; when an older claim holds it, that holder is the error.
    pub fn claim(&self, key: &GuestKey, name: &str) -> Result<Option<GuestKey>, GuestKey> {
        let mut held = self.held.lock().expect("names lock");
        let Some(holder) = held.get(name).filter(|h| *h != key).cloned() else {
            held.insert(name.to_owned(), key.clone());
            return Ok(None);
        };
        if !self.precedes(key, &holder) {
            return Err(holder);
        }
        held.insert(name.to_owned(), key.clone());
        Ok(Some(holder))
    }

    /// Gives up `name`, if `key` holds it.
    pub fn release(&self, key: &GuestKey, name: &str) {
        let mut held = self.held.lock().expect("names lock");
        if held.get(name) == Some(key) {
            held.remove(name);
        }
    }

    /// Whether `key`'s claim to a name comes before `other`'s: see the module doc.
    fn precedes(&self, key: &GuestKey, other: &GuestKey) -> bool {
        let created = self.created.lock().expect("created lock");
        let claim = |k: &GuestKey| match k {
            GuestKey::File(_) => None,
            GuestKey::Object { .. } => {
                Some((created.get(k).cloned().unwrap_or_default(), k.clone()))
            }
        };
        claim(key) < claim(other)
    }
}

/// The name of a guest whose configuration names none: the name its module declares, and for a
/// WasmController confined to its namespace `<namespace>.<declared>`, so that teams running the
/// same module never clash (neither part holds a dot). Past 63 characters it is cut and ends in
/// a digest of the whole.
pub fn default_name(config: &ModuleConfig, declared: &str) -> String {
    let [namespace] = config.namespaces.as_slice() else {
        return declared.to_owned();
    };
    if !config.confined {
        return declared.to_owned();
    }
    let full = format!("{namespace}.{declared}");
    if full.len() <= 63 {
        return full;
    }
    let digest = &module_bytes::sha256_hex(full.as_bytes())[..8];
    format!("{}-{digest}", full[..54].trim_end_matches(['-', '.']))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::Config;

    fn object(namespace: &str) -> GuestKey {
        GuestKey::Object {
            namespace: namespace.into(),
            name: "mirror".into(),
        }
    }

    #[test]
    fn the_older_claim_wins_a_name_whatever_the_order() {
        for first_young in [true, false] {
            let names = Names::default();
            let (old, young) = (object("z-old"), object("a-young"));
            names.created(&old, "2026-01-01T00:00:00Z");
            names.created(&young, "2026-01-01T00:00:05Z");
            if first_young {
                assert_eq!(names.claim(&young, "shared"), Ok(None));
                assert_eq!(names.claim(&old, "shared"), Ok(Some(young.clone())));
            } else {
                assert_eq!(names.claim(&old, "shared"), Ok(None));
            }
            assert_eq!(names.claim(&young, "shared"), Err(old.clone()));
        }
        // A module file comes before every object; a name given up is free again.
        let names = Names::default();
        let file = GuestKey::File("/m/a.wasm".into());
        names.hold("shared", &file);
        assert_eq!(names.claim(&object("a"), "shared"), Err(file.clone()));
        names.release(&file, "shared");
        assert_eq!(names.claim(&object("a"), "shared"), Ok(None));
    }

    #[test]
    fn a_confined_object_s_guest_is_named_after_its_namespace() {
        let mut config = Config::from_yaml("modules:\n  - path: a.wasm\n", Path::new("/m"))
            .unwrap()
            .modules
            .remove(0);
        assert_eq!(default_name(&config, "podset"), "podset");
        config.namespaces = vec!["team-a".into()];
        assert_eq!(default_name(&config, "podset"), "podset", "not confined");
        config.confined = true;
        assert_eq!(default_name(&config, "podset"), "team-a.podset");
        config.namespaces = vec!["n".repeat(63)];
        let long = default_name(&config, "podset");
        assert_eq!(long.len(), 63, "{long}");
        assert!(long.starts_with(&"n".repeat(54)), "{long}");
        assert_ne!(long, default_name(&config, "other"));
    }
}
