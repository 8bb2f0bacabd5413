//! What a guest declares through its `metadata` export, validated: its name, its primary kind,
//! the kinds it owns and watches and how their changes map to keys, its finalizer, concurrency
//! and resync period. The kinds it may read and write follow from it.

use std::time::Duration;

use kube::api::GroupVersionKind;

use crate::cluster::selection::Selection;
use crate::cluster::selector::{LabelSelector, is_dns1123_label, validate_qualified_name};
use crate::config::MAX_CONCURRENCY;
use crate::wasm::bindings::types;

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
    /// Which updates of a primary object are reconciled.
    pub reconcile_on: types::Changes,
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

/// The kinds a guest declared: it reads all of them and writes only the primary and owned ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    /// The primary kind.
    pub primary: GroupVersionKind,
    /// Kinds the guest owns.
    pub owns: Vec<GroupVersionKind>,
    /// Kinds the guest watches.
    pub watches: Vec<GroupVersionKind>,
}

impl Declared {
    /// Every kind it declared, which it reads: the primary, the owned, then the watched kinds.
    pub fn kinds(&self) -> impl Iterator<Item = &GroupVersionKind> {
        std::iter::once(&self.primary)
            .chain(&self.owns)
            .chain(&self.watches)
    }

    /// Whether the guest may read objects of `kind`: any kind it declared.
    pub fn can_read(&self, kind: &GroupVersionKind) -> bool {
        self.kinds().any(|k| k == kind)
    }

    /// Whether the guest may write objects of `kind`: its primary or an owned kind.
    pub fn can_write(&self, kind: &GroupVersionKind) -> bool {
        self.primary == *kind || self.owns.contains(kind)
    }
}

/// Validates what a module declared, with the configuration's bounds: a name that is a DNS-1123
/// label, max-concurrency within `1..=1024`, a resync period of at least a second, a qualified
/// finalizer name, kinds with a version and a kind, and label selectors that parse.
pub fn validate(declared: types::ControllerMetadata) -> Result<Metadata, String> {
    let name = declared.name;
    if !is_dns1123_label(&name) {
        return Err(format!("name {name:?} is not a DNS-1123 label"));
    }
    // The configuration's bounds: every worker is a task, and a resync period of 0 is none.
    if !(1..=MAX_CONCURRENCY).contains(&declared.max_concurrency) {
        return Err(format!(
            "max-concurrency {} is outside 1..={MAX_CONCURRENCY}",
            declared.max_concurrency
        ));
    }
    if declared.resync_seconds == Some(0) {
        return Err("resync-seconds must be at least 1".into());
    }
    // The API server's rule for finalizer names: a qualified name with a domain prefix.
    if let Some(finalizer) = &declared.finalizer
        && let Err(reason) = validate_qualified_name(finalizer).and_then(|()| {
            finalizer
                .contains('/')
                .then_some(())
                .ok_or("it has no prefix".into())
        })
    {
        return Err(format!(
            "finalizer {finalizer:?} must be a qualified name such as example.com/cleanup: {reason}"
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
        owns: declared
            .owns
            .into_iter()
            .map(GroupVersionKind::from)
            .collect(),
        watches,
        finalizer: declared.finalizer,
        max_concurrency: declared.max_concurrency,
        resync: declared
            .resync_seconds
            .map(|s| Duration::from_secs(s.into())),
        reconcile_on: declared.reconcile_on,
    })
}

fn selection(selection: types::Selection) -> Result<Selection, String> {
    let kind = GroupVersionKind::from(selection.kind);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn declared(max_concurrency: u32, resync_seconds: Option<u32>) -> types::ControllerMetadata {
        types::ControllerMetadata {
            name: "podset".into(),
            primary: types::Selection {
                kind: types::Gvk {
                    group: "kubewasm.dev".into(),
                    version: "v1".into(),
                    kind: "PodSet".into(),
                },
                namespace: None,
                label_selector: None,
            },
            owns: Vec::new(),
            watches: Vec::new(),
            finalizer: None,
            max_concurrency,
            resync_seconds,
            reconcile_on: types::Changes::ANY,
        }
    }

    #[test]
    fn max_concurrency_is_refused_outside_1_to_1024() {
        for n in [0, 1025, u32::MAX] {
            let error = validate(declared(n, None)).unwrap_err();
            assert!(error.contains("max-concurrency"), "{n}: {error}");
        }
        for n in [1, 1024] {
            assert_eq!(validate(declared(n, None)).unwrap().max_concurrency, n);
        }
    }

    #[test]
    fn a_finalizer_is_a_qualified_name_with_a_prefix() {
        for finalizer in ["cleanup", "x/", "a/b/c", "Example.com/x", "example.com/-x"] {
            let mut metadata = declared(1, None);
            metadata.finalizer = Some(finalizer.into());
            let error = validate(metadata).unwrap_err();
            assert!(error.starts_with("finalizer"), "{finalizer}: {error}");
        }
        let mut metadata = declared(1, None);
        metadata.finalizer = Some("example.com/cleanup".into());
        assert!(validate(metadata).is_ok());
    }

    #[test]
    fn a_resync_period_is_refused_below_one_second() {
        let error = validate(declared(1, Some(0))).unwrap_err();
        assert!(error.contains("resync-seconds"), "{error}");
        let metadata = validate(declared(1, Some(1))).unwrap();
        assert_eq!(metadata.resync, Some(Duration::from_secs(1)));
    }
}
