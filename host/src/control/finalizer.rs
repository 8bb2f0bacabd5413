//! The finalizer protocol of a guest, as a decision: the primary object is reduced to what
//! matters (present or not, being deleted, carrying the guest's finalizers, carrying the ones it
//! wants) and [`plan`] says which step comes before the guest's call. The controller carries
//! the step out; a failed step is a [`FinalizerError`] naming it.
//!
//! Guarantees: the guest's finalizer is added before its first reconcile of an object and
//! removed only after `finalize` succeeds; an object being deleted that does not carry the
//! guest's finalizer, or whose guest no longer declares one, is let go without `finalize`
//! (retired finalizers removed); retired finalizers are replaced by the current one while the
//! object lives.

use crate::cluster::cache::CachedObject;
use crate::wasm::backend::CallError;
use crate::wasm::dispatch::Failure;

/// The finalizers a guest keeps on its objects: the one its module declares, and those an
/// earlier module of the guest declared on the same primary selection.
#[derive(Debug, Clone, Copy)]
pub struct Ours<'a> {
    /// The current module's finalizer.
    pub finalizer: Option<&'a str>,
    /// Finalizers earlier modules declared.
    pub retired: &'a [String],
}

impl Ours<'_> {
    /// Whether there is any finalizer to keep on the objects.
    pub fn any(&self) -> bool {
        self.finalizer.is_some() || !self.retired.is_empty()
    }

    /// Whether `candidate` is the current finalizer or a retired one.
    pub fn is_ours(&self, candidate: &str) -> bool {
        Some(candidate) == self.finalizer || self.retired.iter().any(|r| r == candidate)
    }

    /// Whether `object` carries the current finalizer or a retired one.
    pub fn held_by(&self, object: &CachedObject) -> bool {
        object.finalizers().any(|f| self.is_ours(f))
    }

    /// The finalizers `object` is to carry while it lives: its own without retired ones, then
    /// the current finalizer.
    pub fn wanted(&self, object: &CachedObject) -> Vec<String> {
        let mut wanted: Vec<String> = object
            .finalizers()
            .filter(|f| !self.retired.iter().any(|r| r == f))
            .map(str::to_owned)
            .collect();
        if let Some(finalizer) = self.finalizer
            && !wanted.iter().any(|f| f == finalizer)
        {
            wanted.push(finalizer.to_owned());
        }
        wanted
    }

    /// The finalizers of `object` that are not the guest's.
    pub fn others<'o>(&self, object: &'o CachedObject) -> Vec<&'o str> {
        object.finalizers().filter(|f| !self.is_ours(f)).collect()
    }
}

/// The step before the guest's call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Call `reconcile` with the object as cached (or as gone).
    Reconcile,
    /// Set the object's finalizers to these (the guest's added, retired ones dropped), then
    /// call `reconcile`.
    Add(Vec<String>),
    /// Call `finalize`; remove the guest's finalizers once it succeeds.
    Finalize,
    /// Being deleted, not the guest's to finalize: remove its retired finalizers if `release`,
    /// and call nothing.
    LetGo {
        /// Whether the object carries a finalizer of the guest's to remove.
        release: bool,
    },
    /// Gone from the cache while carrying the guest's finalizers: it may have left a label
    /// selector; release it without `finalize` if it did, then call `reconcile` as gone.
    ReleaseUnselected,
}

/// The step for the primary `object` (`None`: not cached); `gone_holding` when it went from the
/// cache still carrying the guest's finalizers.
pub fn plan(object: Option<&CachedObject>, ours: Ours<'_>, gone_holding: bool) -> Step {
    match object {
        Some(object) if ours.any() => {
            let held = ours.held_by(object);
            match (object.deleting(), held && ours.finalizer.is_some()) {
                (true, false) => Step::LetGo { release: held },
                (true, true) => Step::Finalize,
                (false, _) => {
                    let wanted = ours.wanted(object);
                    if object.finalizers().eq(wanted.iter().map(String::as_str)) {
                        Step::Reconcile
                    } else {
                        Step::Add(wanted)
                    }
                }
            }
        }
        None if gone_holding => Step::ReleaseUnselected,
        _ => Step::Reconcile,
    }
}

/// A step of the protocol that failed; the key is retried with backoff. The messages are those
/// of the reconcile's failure as logged and kept as the guest's last error.
#[derive(Debug, thiserror::Error)]
pub enum FinalizerError {
    /// Removing retired finalizers from an object being deleted failed.
    #[error("removing retired finalizers: {source}")]
    LetGo {
        /// The write's failure.
        source: CallError,
    },
    /// Adding the guest's finalizer failed.
    #[error("adding finalizer {finalizer:?}: {source}")]
    Add {
        /// The guest's finalizer.
        finalizer: Option<String>,
        /// The write's failure.
        source: CallError,
    },
    /// Releasing an object that left the selection failed.
    #[error("releasing an object that left the selection: {source}")]
    ReleaseUnselected {
        /// The read's or the write's failure.
        source: CallError,
    },
    /// `finalize` failed.
    #[error(
        "finalize failed; the object stays terminating (terminating for {terminating}s): {source}"
    )]
    Finalize {
        /// Seconds since the object's deletion.
        terminating: i64,
        /// How the call failed.
        source: Failure,
    },
    /// Removing the guest's finalizer after `finalize` succeeded failed.
    #[error("removing finalizer {finalizer:?}: {source}")]
    Remove {
        /// The guest's finalizer.
        finalizer: Option<String>,
        /// The write's failure.
        source: CallError,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(finalizers: &[&str], deleting: bool) -> CachedObject {
        let mut metadata = serde_json::json!({
            "name": "o", "namespace": "a", "resourceVersion": "1", "finalizers": finalizers,
        });
        if deleting {
            metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
        }
        let object = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
        });
        CachedObject::new(serde_json::from_value(object).unwrap())
    }

    const NONE: &[String] = &[];

    fn ours<'a>(finalizer: Option<&'a str>, retired: &'a [String]) -> Ours<'a> {
        Ours { finalizer, retired }
    }

    #[test]
    fn a_live_object_gets_the_finalizer_once_and_loses_retired_ones() {
        let retired = ["old/f".to_owned()];
        let ours = ours(Some("new/f"), &retired);
        let step = plan(Some(&object(&["x", "old/f"], false)), ours, false);
        assert_eq!(step, Step::Add(vec!["x".into(), "new/f".into()]));
        let step = plan(Some(&object(&["x", "new/f"], false)), ours, false);
        assert_eq!(step, Step::Reconcile);
    }

    #[test]
    fn a_deleted_object_holding_the_finalizer_is_finalized() {
        let step = plan(Some(&object(&["f"], true)), ours(Some("f"), NONE), false);
        assert_eq!(step, Step::Finalize);
    }

    #[test]
    fn a_deleted_object_not_the_guests_to_finalize_is_let_go() {
        let step = plan(Some(&object(&["x"], true)), ours(Some("f"), NONE), false);
        assert_eq!(step, Step::LetGo { release: false });
        // A guest that no longer declares a finalizer removes the retired one without finalize.
        let retired = ["old/f".to_owned()];
        let step = plan(Some(&object(&["old/f"], true)), ours(None, &retired), false);
        assert_eq!(step, Step::LetGo { release: true });
    }

    #[test]
    fn without_finalizers_every_object_is_reconciled_as_it_is() {
        let step = plan(Some(&object(&["x"], true)), ours(None, NONE), false);
        assert_eq!(step, Step::Reconcile);
        assert_eq!(plan(None, ours(Some("f"), NONE), false), Step::Reconcile);
    }

    #[test]
    fn a_key_gone_holding_the_finalizer_is_released_if_it_left_the_selection() {
        let step = plan(None, ours(Some("f"), NONE), true);
        assert_eq!(step, Step::ReleaseUnselected);
    }

    #[test]
    fn others_keeps_every_finalizer_not_the_guests() {
        let retired = ["old/f".to_owned()];
        let object = object(&["x", "f", "old/f", "y"], false);
        assert_eq!(ours(Some("f"), &retired).others(&object), ["x", "y"]);
    }
}
