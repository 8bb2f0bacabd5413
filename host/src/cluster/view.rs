//! Which informer serves each selection of a guest.
//!
//! Two informers whose selections overlap are two watches, each ahead of or behind the other. A
//! guest triggered by one and reading from the other could see an object the first has already
//! seen deleted, do nothing, and never be triggered again. So a selection that another one of
//! the same guest contains (same kind, no label selector, every namespace or the same one) is
//! served by that wider informer, filtered to the selection: the guest reads and is triggered by
//! one cache for every object the two have in common.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use crate::cluster::cache::{CachedObject, Change, ObjectKey};
use crate::cluster::selection::Selection;
use crate::cluster::transform::Transform;
use crate::cluster::watch::{Handler, Informer, Informers, Subscription};

/// One selection of a guest and the informer serving it, which a clone keeps running.
#[derive(Clone)]
pub struct View {
    selection: Selection,
    informer: Arc<Informer>,
}

impl View {
    /// The view of `selection`, one of a guest's selections `all`, through `transform`: served
    /// by the informer serving the widest of them that contains it (see
    /// [`Informers::serving`]).
    pub fn new(
        selection: &Selection,
        all: &[Selection],
        transform: &Transform,
        servers: &Servers,
    ) -> View {
        View {
            selection: selection.clone(),
            informer: servers.serving(server(selection, all), transform),
        }
    }

    /// The selection it shows.
    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// The informer serving it, which may select more than it does.
    pub fn informer(&self) -> &Arc<Informer> {
        &self.informer
    }

    /// The cached object with this key, if the selection has it.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        self.informer
            .store()
            .get(key)
            .filter(|o| self.selection.selects(o))
    }

    /// Every cached object of the selection.
    pub fn objects(&self) -> Vec<Arc<CachedObject>> {
        let namespace = self.selection.namespace.as_deref();
        let mut objects = self.informer.store().list(namespace, None);
        objects.retain(|o| self.selection.selects(o));
        objects
    }

    /// Keys of every cached object of the selection.
    pub fn keys(&self) -> Vec<ObjectKey> {
        self.objects().iter().map(|o| o.key()).collect()
    }

    /// How many cached objects the selection has.
    pub fn count(&self) -> usize {
        let store = self.informer.store();
        if self.informer.selection() == &self.selection {
            return store.len();
        }
        let objects = store.list(self.selection.namespace.as_deref(), None);
        objects.iter().filter(|o| self.selection.selects(o)).count()
    }

    /// Registers `handler` for the changes of the selection: each change of the informer with
    /// its sides outside the selection dropped, as a watch of the selection itself reports an
    /// object entering or leaving it.
    pub fn subscribe(&self, handler: Handler) -> Subscription {
        if self.informer.selection() == &self.selection {
            return self.informer.subscribe(handler);
        }
        let selection = self.selection.clone();
        let namespace = selection.namespace.clone();
        self.informer.subscribe_in(
            namespace.as_deref(),
            Arc::new(move |change: &Change| {
                if let Some(change) = narrowed(change, &selection) {
                    handler(&change);
                }
            }),
        )
    }
}

/// The informers serving the selections of one guest. The first of its selections of one
/// namespace with a kind, label selector and transform decides, through
/// [`Informers::serving`], whether the informer of every namespace serves them all or each has
/// its own: one namespace is never read through two informers, whatever the informers do while
/// the guest starts.
pub struct Servers<'a> {
    informers: &'a Informers,
    /// Whether the informer of every namespace serves each kind, label selector and transform.
    wide: RefCell<HashMap<(Selection, Transform), bool>>,
}

impl<'a> Servers<'a> {
    /// None decided yet.
    pub fn new(informers: &'a Informers) -> Self {
        Self {
            informers,
            wide: RefCell::default(),
        }
    }

    fn serving(&self, selection: &Selection, transform: &Transform) -> Arc<Informer> {
        if selection.namespace.is_none() {
            return self.informers.acquire(selection, transform);
        }
        let group = selection.everywhere();
        let mut wide = self.wide.borrow_mut();
        match wide.get(&(group.clone(), transform.clone())) {
            Some(true) => self.informers.acquire(&group, transform),
            Some(false) => self.informers.acquire(selection, transform),
            None => {
                let informer = self.informers.serving(selection, transform);
                let decided = informer.selection().namespace.is_none();
                wide.insert((group, transform.clone()), decided);
                informer
            }
        }
    }
}

/// `change` with its sides outside `selection` dropped; `None` when neither is in it.
fn narrowed(change: &Change, selection: &Selection) -> Option<Change> {
    let old = change.old.clone().filter(|o| selection.selects(o));
    let new = change.new.clone().filter(|o| selection.selects(o));
    (old.is_some() || new.is_some()).then_some(Change {
        old,
        new,
        initial: change.initial,
    })
}

/// The selection among `all` whose informer serves `selection`: one of its kind without label
/// selector for every namespace, else one for its namespace, else itself.
fn server<'a>(selection: &'a Selection, all: &'a [Selection]) -> &'a Selection {
    let unselected = |namespace: Option<&str>| {
        all.iter().find(|s| {
            s.kind == selection.kind && s.selector.is_none() && s.namespace.as_deref() == namespace
        })
    };
    unselected(None)
        .or_else(|| {
            selection
                .namespace
                .as_deref()
                .and_then(|ns| unselected(Some(ns)))
        })
        .unwrap_or(selection)
}

#[cfg(test)]
mod tests {
    use kube::api::GroupVersionKind;

    use super::*;

    fn selection(kind: &str, namespace: Option<&str>, selector: Option<&str>) -> Selection {
        Selection {
            kind: GroupVersionKind::gvk("", "v1", kind),
            namespace: namespace.map(str::to_owned),
            selector: selector.map(|s| s.parse().expect("valid selector")),
        }
    }

    #[test]
    fn a_selection_is_served_by_the_widest_one_containing_it() {
        let owned = selection("Pod", Some("a"), None);
        let labelled = selection("Pod", Some("a"), Some("app=web"));
        let elsewhere = selection("Pod", Some("b"), Some("app=web"));
        let all = [owned.clone(), labelled.clone(), elsewhere.clone()];
        assert_eq!(server(&labelled, &all), &owned);
        assert_eq!(server(&owned, &all), &owned);
        assert_eq!(server(&elsewhere, &all), &elsewhere);

        let everywhere = selection("Pod", None, None);
        let all = [owned.clone(), labelled.clone(), everywhere.clone()];
        assert_eq!(server(&owned, &all), &everywhere);
        assert_eq!(server(&labelled, &all), &everywhere);
    }

    #[tokio::test]
    async fn a_guest_s_namespaces_of_a_kind_are_all_served_wide_or_all_by_their_own() {
        let resources = crate::cluster::resources::Resources::unreachable();
        let informers = Informers::new(resources, 1);
        let pods = selection("Pod", Some("a"), None).kind;
        informers.reach().answer(&pods, true);
        let plain = Transform::default();

        let first = Servers::new(&informers);
        let a = first.serving(&selection("Pod", Some("a"), None), &plain);
        let b = first.serving(&selection("Pod", Some("b"), None), &plain);
        assert_eq!(a.selection().namespace.as_deref(), Some("a"));
        assert_eq!(
            b.selection().namespace.as_deref(),
            Some("b"),
            "the guest's first namespace decided: each has its own"
        );

        let second = Servers::new(&informers);
        let c = second.serving(&selection("Pod", Some("c"), None), &plain);
        let a_again = second.serving(&selection("Pod", Some("a"), None), &plain);
        assert_eq!(c.selection().namespace, None);
        assert!(Arc::ptr_eq(&c, &a_again), "decided wide: every namespace");
    }

    fn pod(namespace: &str, app: &str) -> Arc<CachedObject> {
        let object = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "p", "namespace": namespace, "labels": { "app": app } }
        }))
        .expect("a valid object");
        Arc::new(CachedObject::new(object))
    }

    #[test]
    fn a_narrowed_change_keeps_only_the_sides_in_the_selection() {
        let web = selection("Pod", Some("a"), Some("app=web"));
        let relabelled = Change {
            old: Some(pod("a", "web")),
            new: Some(pod("a", "db")),
            initial: false,
        };
        let left = narrowed(&relabelled, &web).expect("the old side is in the selection");
        assert_eq!(left.old, relabelled.old);
        assert_eq!(left.new, None);

        let added = Change {
            old: None,
            new: Some(pod("a", "web")),
            initial: false,
        };
        assert_eq!(narrowed(&added, &web).and_then(|c| c.new), added.new);
        let other_namespace = Change {
            old: None,
            new: Some(pod("b", "web")),
            initial: false,
        };
        assert!(narrowed(&other_namespace, &web).is_none());
    }

    #[test]
    fn selections_of_other_kinds_or_with_a_selector_serve_nothing_else() {
        let pods = selection("Pod", Some("a"), Some("app=web"));
        let all = [
            pods.clone(),
            selection("ConfigMap", None, None),
            selection("Pod", None, Some("app=web")),
            selection("Pod", Some("b"), None),
        ];
        assert_eq!(server(&pods, &all), &pods);
    }
}
