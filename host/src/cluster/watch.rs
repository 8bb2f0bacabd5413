//! Informers: one list-then-watch per (kind, namespace, label selector, transform), shared by
//! every guest that needs it and stopped when the last one lets go.
//!
//! Each informer resolves its kind through discovery (retrying until a CRD installed later
//! appears), lists, then watches from the list's resourceVersion; a watch the server ends is
//! resumed from the last version seen, and a refused watch request is sent again after the
//! backoff. A 410 Gone or a watch failing midway relists, after the backoff but for a 410
//! midway, and the relist is diffed against the cache so that handlers see exactly the adds,
//! updates and deletes they missed. Every cached object carries its `apiVersion` and `kind`,
//! also the items of a list, where the API server leaves them out.
//!
//! It lists and watches by itself rather than through kube_runtime's `watcher`, whose events
//! carry no resourceVersion: the [`Store`] needs the version of each list snapshot, to keep the
//! host's recorded writes and deletes newer than a relist, and of each bookmark, which a write
//! must pass to be recorded (`watcher` swallows bookmarks and ends a list with a bare `InitDone`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::Api;
use kube::api::{DynamicObject, GroupVersionKind, ListParams, TypeMeta, WatchEvent, WatchParams};
use tokio::sync::watch as signal;

use crate::cluster::cache::{CachedObject, Change, Store};
use crate::cluster::reach::Reach;
use crate::cluster::resources::Resources;
use crate::cluster::selection::Selection;
use crate::cluster::transform::Transform;

/// Receives every change of an informer, in order. Called on the informer's task: keep it short
/// and never block.
pub type Handler = Arc<dyn Fn(&Change) + Send + Sync>;

/// A running informer.
pub struct Informer {
    selection: Selection,
    transform: Transform,
    store: Store,
    handlers: Mutex<Handlers>,
    synced: signal::Receiver<bool>,
    task: OnceLock<tokio::task::AbortHandle>,
}

impl Informer {
    /// What it watches.
    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// What it drops from the objects it caches.
    pub fn transform(&self) -> &Transform {
        &self.transform
    }

    /// Its cache.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Whether the first list has completed.
    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Waits until the first list has completed.
    pub async fn synced(&self) {
        let mut synced = self.synced.clone();
        // The sender lives in the informer's task, which outlives every borrower of `self`.
        let _ = synced.wait_for(|s| *s).await;
    }

    /// Registers a handler. If the informer has synced, the handler first sees every cached
    /// object as an add, so it misses nothing whenever it subscribes.
    pub fn subscribe(self: &Arc<Self>, handler: Handler) -> Subscription {
        self.subscribe_in(None, handler)
    }

    /// Registers a handler of the objects of `namespace` (every one for `None`), as
    /// [`Self::subscribe`] does: it sees the changes of objects of `namespace` and of objects in
    /// no namespace, and only those cached are replayed to it. A change reaches only the
    /// handlers of its namespace, however many namespaces have handlers.
    pub fn subscribe_in(
        self: &Arc<Self>,
        namespace: Option<&str>,
        handler: Handler,
    ) -> Subscription {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let mut handlers = self.handlers.lock().expect("handlers lock");
        if self.is_synced() {
            for object in self.store.list(namespace, None) {
                handler(&Change {
                    old: None,
                    new: Some(object),
                    initial: true,
                });
            }
        }
        handlers.add(id, namespace, handler);
        Subscription {
            informer: self.clone(),
            id,
            namespace: namespace.map(str::to_owned),
        }
    }

    /// Records the object a write of the host returned, through its transform, so that readers
    /// see it before the watch delivers it; handlers see the change as usual. See
    /// [`Store::record_write`] for when the object is not recorded.
    pub fn record_write(&self, object: &CachedObject) {
        if self.selection.selects(object) {
            let object = object.transformed(&self.transform);
            self.emit(|store| store.record_write(object).into_iter().collect());
        }
    }

    /// Records that the host deleted the object with `key` and `uid`; see
    /// [`Store::record_delete`].
    pub fn record_delete(&self, key: &crate::cluster::cache::ObjectKey, uid: &str) {
        self.emit(|store| store.record_delete(key, uid).into_iter().collect());
    }

    fn emit(&self, apply: impl FnOnce(&Store) -> Vec<Change>) {
        let handlers = self.handlers.lock().expect("handlers lock");
        for change in apply(&self.store) {
            handlers.call(&change);
        }
    }
}

/// An informer's handlers, by the namespace whose objects they handle.
#[derive(Default)]
struct Handlers {
    /// Handlers of every namespace.
    all: Vec<(u64, Handler)>,
    /// Handlers of one namespace.
    by_namespace: HashMap<String, Vec<(u64, Handler)>>,
}

impl Handlers {
    fn add(&mut self, id: u64, namespace: Option<&str>, handler: Handler) {
        match namespace {
            Some(namespace) => self.by_namespace.entry(namespace.to_owned()).or_default(),
            None => &mut self.all,
        }
        .push((id, handler));
    }

    fn remove(&mut self, id: u64, namespace: Option<&str>) {
        let Some(namespace) = namespace else {
            self.all.retain(|(i, _)| *i != id);
            return;
        };
        if let Some(handlers) = self.by_namespace.get_mut(namespace) {
            handlers.retain(|(i, _)| *i != id);
            if handlers.is_empty() {
                self.by_namespace.remove(namespace);
            }
        }
    }

    /// Calls the handlers of every namespace and those of the change's namespace; a change of
    /// an object in no namespace, every handler.
    fn call(&self, change: &Change) {
        let object = change.new.as_ref().or(change.old.as_ref());
        let call = |handlers: &Vec<(u64, Handler)>| handlers.iter().for_each(|(_, h)| h(change));
        call(&self.all);
        match object.and_then(|o| o.namespace()) {
            Some(namespace) => self.by_namespace.get(namespace).into_iter().for_each(call),
            None => self.by_namespace.values().for_each(call),
        }
    }
}

impl Drop for Informer {
    fn drop(&mut self) {
        if let Some(task) = self.task.get() {
            task.abort();
        }
        let Selection {
            kind, namespace, ..
        } = &self.selection;
        let selector = self.selection.selector.as_ref().map(ToString::to_string);
        tracing::debug!(
            ?kind,
            ?namespace,
            ?selector,
            "informer stopped: no guest needs it"
        );
    }
}

/// Keeps a handler registered; dropping it unregisters the handler and releases the informer.
pub struct Subscription {
    informer: Arc<Informer>,
    id: u64,
    namespace: Option<String>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut handlers = self.informer.handlers.lock().expect("handlers lock");
        handlers.remove(self.id, self.namespace.as_deref());
    }
}

/// Every running informer, by what it watches and what it drops.
pub struct Informers {
    resources: Arc<Resources>,
    running: Mutex<HashMap<(Selection, Transform), Weak<Informer>>>,
    /// The namespaces whose selections of one kind, label selector and transform get informers
    /// of their own before further ones are served by one informer of every namespace; 0: never.
    per_kind: usize,
    reach: Reach,
}

impl Informers {
    /// No informers yet; at most `per_kind` namespaces of a kind get informers of their own
    /// (see [`Self::serving`]).
    pub fn new(resources: Arc<Resources>, per_kind: usize) -> Self {
        Self {
            reach: Reach::new(resources.clone()),
            resources,
            running: Mutex::default(),
            per_kind,
        }
    }

    /// The informer serving a guest's `selection` through `transform`, which may select more
    /// than it does: read it through a [`crate::cluster::view::View`]. A selection of one
    /// namespace is served by the informer of every namespace of its kind, label selector and
    /// transform when that runs, or when `per_kind` namespaces have informers of their own and
    /// the kind is namespaced and the host may list and watch it in every namespace, as
    /// [`Self::ask_reach`] found (not once refused): a thousand namespaces then cost
    /// the API server a few watches, not a thousand, each renewed every few minutes.
    pub fn serving(&self, selection: &Selection, transform: &Transform) -> Arc<Informer> {
        if selection.namespace.is_none() || self.per_kind == 0 {
            return self.acquire(selection, transform);
        }
        let wide = selection.everywhere();
        let confined = {
            let running = self.running.lock().expect("informers lock");
            if let Some(informer) = running
                .get(&(wide.clone(), transform.clone()))
                .and_then(Weak::upgrade)
                .filter(|_| self.reach.everywhere(&wide.kind) != Some(false))
            {
                return informer;
            }
            running
                .iter()
                .filter(|((s, t), i)| {
                    s.namespace.is_some()
                        && s.kind == wide.kind
                        && s.selector == wide.selector
                        && t == transform
                        && i.strong_count() > 0
                })
                .count()
        };
        if confined >= self.per_kind && self.reach.everywhere(&wide.kind) == Some(true) {
            return self.acquire(&wide, transform);
        }
        self.acquire(selection, transform)
    }

    /// The informer of `selection` through `transform`, started if nobody holds it yet.
    pub fn acquire(&self, selection: &Selection, transform: &Transform) -> Arc<Informer> {
        let mut running = self.running.lock().expect("informers lock");
        let key = (selection.clone(), transform.clone());
        if let Some(informer) = running.get(&key).and_then(Weak::upgrade) {
            return informer;
        }
        running.retain(|_, informer| informer.strong_count() > 0);
        let (synced_tx, synced) = signal::channel(false);
        let informer = Arc::new(Informer {
            selection: selection.clone(),
            transform: transform.clone(),
            store: Store::default(),
            handlers: Mutex::default(),
            synced,
            task: OnceLock::new(),
        });
        // Spawned once the informer exists: a task that found no informer behind its weak
        // reference would take it for stopped and end before listing.
        let task = tokio::spawn(run(
            self.resources.clone(),
            key.clone(),
            Arc::downgrade(&informer),
            synced_tx,
        ));
        let _ = informer.task.set(task.abort_handle());
        let selector = selection.selector.as_ref().map(ToString::to_string);
        tracing::debug!(kind = ?selection.kind, namespace = ?selection.namespace, selector = ?selector, %transform, "informer started");
        running.insert(key, Arc::downgrade(&informer));
        informer
    }

    /// What the host may watch in every namespace, as asked.
    #[cfg(test)]
    pub fn reach(&self) -> &Reach {
        &self.reach
    }

    /// Asks whether the host may list and watch each of `kinds` in every namespace, unless
    /// answered lately: call it before a guest confined to namespaces acquires its informers,
    /// so that [`Self::serving`] knows, however many guests start at once.
    pub async fn ask_reach(&self, kinds: impl IntoIterator<Item = &GroupVersionKind>) {
        if self.per_kind > 0 {
            for kind in kinds {
                self.reach.ask(kind).await;
            }
        }
    }

    /// Informers currently running.
    pub fn running(&self) -> Vec<Arc<Informer>> {
        let running = self.running.lock().expect("informers lock");
        running.values().filter_map(Weak::upgrade).collect()
    }
}

/// Objects per list page: bounds the size of one response, and the memory a list holds besides
/// the cache while it parses a page.
const PAGE: u32 = 100;

/// How long one watch request lasts; the server ends it then and the informer watches again
/// from where it was.
const WATCH_SECONDS: u32 = 290;

/// A watch that ends sooner than this without an event is retried after the backoff, so a
/// server that closes watches at once is not hammered.
const SHORT_WATCH: Duration = Duration::from_secs(1);

/// Exponential backoff between failed requests: 0.5 s doubling up to 30 s, reset by success.
struct Backoff(Duration);

impl Backoff {
    const FIRST: Duration = Duration::from_millis(500);
    const MAX: Duration = Duration::from_secs(30);

    fn new() -> Self {
        Self(Self::FIRST)
    }

    async fn wait(&mut self) {
        tokio::time::sleep(self.0).await;
        self.0 = (self.0 * 2).min(Self::MAX);
    }

    fn reset(&mut self) {
        self.0 = Self::FIRST;
    }
}

/// The API server's message when `error` is an authorization failure (403).
fn forbidden(error: &kube::Error) -> Option<&str> {
    match error {
        kube::Error::Api(status) if status.code == 403 => Some(status.message.as_str()),
        _ => None,
    }
}

fn report(selection: &Selection, error: &kube::Error) {
    let Selection {
        kind, namespace, ..
    } = selection;
    match forbidden(error) {
        Some(message) => tracing::error!(
            ?kind,
            ?namespace,
            %message,
            "the host's credentials may not list and watch this kind: grant get, list and \
             watch on it (`kubewasm rbac` prints what the modules need); retrying"
        ),
        None => tracing::warn!(?kind, ?namespace, %error, "watch failed; retrying"),
    }
}

/// Says that the API server no longer holds the changes since `version` (410 Gone, as after
/// etcd compacted them away), so the informer lists again.
fn expired(selection: &Selection, version: &str) {
    let Selection {
        kind, namespace, ..
    } = selection;
    tracing::debug!(?kind, ?namespace, %version, "watch expired (410 Gone); listing again");
}

/// Lists every page of one consistent snapshot; returns its objects and its resourceVersion.
/// An object `same` finds already cached at the same version is taken from the cache, so a
/// relist keeps one copy of what did not change, and holds at most one page besides.
async fn list(
    api: &Api<DynamicObject>,
    selector: Option<&str>,
    same: impl Fn(&DynamicObject) -> Option<Arc<CachedObject>>,
    cached: impl Fn(DynamicObject) -> CachedObject,
) -> Result<(Vec<Arc<CachedObject>>, String), kube::Error> {
    let mut params = ListParams::default().limit(PAGE);
    if let Some(selector) = selector {
        params = params.labels(selector);
    }
    let mut objects = Vec::new();
    loop {
        let page = api.list(&params).await?;
        objects.extend(
            page.items
                .into_iter()
                .map(|object| same(&object).unwrap_or_else(|| Arc::new(cached(object)))),
        );
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok((objects, page.metadata.resource_version.unwrap_or_default())),
        }
    }
}

/// What one informer's task ends a watch with.
enum Watched {
    /// Watch again from the last version seen.
    Resume,
    /// List again.
    Relist,
    /// The informer is gone: end the task.
    Stopped,
}

/// What one watch event asks of the informer's task.
enum Handled {
    /// Applied: go on with the watch.
    Applied,
    /// 410 Gone: list again at once.
    Expired,
    /// A failed watch: report it and list again after the backoff.
    Failed(kube::Error),
}

/// Lists, then watches from the list's resourceVersion, for as long as the informer lives. A
/// watch the server ends is resumed from the last version seen, a refused watch request is
/// sent again after the backoff; a 410 Gone (the version was compacted away) or a watch failing
/// midway relists, after the backoff but for a 410 midway, and the relist is diffed against
/// the cache.
async fn run(
    resources: Arc<Resources>,
    (key, transform): (Selection, Transform),
    informer: Weak<Informer>,
    synced: signal::Sender<bool>,
) {
    let mut backoff = Backoff::new();
    let api = served(&resources, &key, &mut backoff).await;
    backoff.reset();
    let selector = key.selector.as_ref().map(ToString::to_string);
    let types = TypeMeta {
        api_version: key.kind.api_version(),
        kind: key.kind.kind.clone(),
    };
    let mut reflector = Reflector {
        api,
        selector,
        types,
        key,
        transform,
        informer,
        synced,
        backoff,
    };
    loop {
        let Some(mut version) = reflector.sync().await else {
            return;
        };
        loop {
            match reflector.watch(&mut version).await {
                Watched::Resume => {}
                Watched::Relist => break,
                Watched::Stopped => return,
            }
        }
    }
}

/// The API handle of `key`'s kind, once discovery serves it: a CRD may be installed later.
async fn served(
    resources: &Resources,
    key: &Selection,
    backoff: &mut Backoff,
) -> Api<DynamicObject> {
    loop {
        match resources.api(&key.kind, key.namespace.as_deref()).await {
            Ok(api) => return api,
            Err(error) => {
                tracing::warn!(kind = ?key.kind, %error, "kind not served yet; retrying in {:?}", backoff.0);
                backoff.wait().await;
            }
        }
    }
}

/// One informer's list-then-watch, from the time discovery served its kind.
struct Reflector {
    api: Api<DynamicObject>,
    selector: Option<String>,
    /// The kind's `apiVersion` and `kind`, given to the list items that lack them.
    types: TypeMeta,
    key: Selection,
    transform: Transform,
    informer: Weak<Informer>,
    synced: signal::Sender<bool>,
    backoff: Backoff,
}

impl Reflector {
    /// The cached form of `object`: with its kind, through the transform.
    fn cached(&self, mut object: DynamicObject) -> CachedObject {
        // List items of built-in kinds come without apiVersion and kind: the cache holds what a
        // watch event holds, so guests, triggers and write elision see one form.
        object.types.get_or_insert_with(|| self.types.clone());
        self.transform.apply(&mut object);
        CachedObject::new(object)
    }

    /// Lists until a list succeeds, backing off after each failure, replaces the cache with
    /// it and marks the informer synced; returns the list's resourceVersion, or `None` when the
    /// informer is gone.
    async fn sync(&mut self) -> Option<String> {
        let (objects, version) = loop {
            let same = |object: &DynamicObject| self.informer.upgrade()?.store().same(object);
            let cached = |object| self.cached(object);
            match list(&self.api, self.selector.as_deref(), same, cached).await {
                Ok(listed) => break listed,
                Err(error) => {
                    report(&self.key, &error);
                    self.backoff.wait().await;
                }
            }
        };
        let live = self.informer.upgrade()?;
        tracing::debug!(kind = ?self.key.kind, namespace = ?self.key.namespace, objects = objects.len(), %version, "informer listed");
        // Marked synced under the handlers lock: a handler that subscribes before gets the
        // listed objects as changes, one that subscribes after replays the store.
        live.emit(|store| {
            let changes = store.replace(objects, &version);
            self.synced.send_replace(true);
            changes
        });
        drop(live);
        self.backoff.reset();
        Some(version)
    }

    /// One watch request from `version`, which follows the events it delivers, until the
    /// server ends it or it fails.
    async fn watch(&mut self, version: &mut String) -> Watched {
        let mut params = WatchParams::default().timeout(WATCH_SECONDS);
        if let Some(selector) = &self.selector {
            params = params.labels(selector);
        }
        let started = Instant::now();
        let mut events = match self.api.watch(&params, version).await {
            Ok(events) => events.boxed(),
            Err(kube::Error::Api(status)) if status.code == 410 => {
                expired(&self.key, version);
                // Gone at once: wait before listing again, so a server that answers every
                // fresh version with 410 is not hammered.
                self.backoff.wait().await;
                return Watched::Relist;
            }
            Err(error) => {
                report(&self.key, &error);
                self.backoff.wait().await;
                return Watched::Resume;
            }
        };
        let mut delivered = false;
        while let Some(event) = events.next().await {
            let Some(live) = self.informer.upgrade() else {
                return Watched::Stopped;
            };
            match self.handle(&live, event, version) {
                Handled::Applied => {}
                Handled::Expired => return Watched::Relist,
                Handled::Failed(error) => {
                    drop(live);
                    report(&self.key, &error);
                    self.backoff.wait().await;
                    return Watched::Relist;
                }
            }
            delivered = true;
            self.backoff.reset();
        }
        if !delivered && started.elapsed() < SHORT_WATCH {
            self.backoff.wait().await;
        }
        Watched::Resume
    }

    /// Applies one watch event to `live`'s cache and notes its version in `version`.
    fn handle(
        &self,
        live: &Informer,
        event: Result<WatchEvent<DynamicObject>, kube::Error>,
        version: &mut String,
    ) -> Handled {
        match event {
            Ok(WatchEvent::Added(object) | WatchEvent::Modified(object)) => {
                let object = self.cached(object);
                if let Some(seen) = object.resource_version() {
                    seen.clone_into(version);
                }
                live.emit(|store| store.upsert(object).into_iter().collect());
            }
            Ok(WatchEvent::Deleted(object)) => {
                let deleted = self.cached(object);
                if let Some(seen) = deleted.resource_version() {
                    seen.clone_into(version);
                }
                live.emit(|store| store.remove(&deleted).into_iter().collect());
            }
            Ok(WatchEvent::Bookmark(bookmark)) => {
                *version = bookmark.metadata.resource_version;
                live.store().bookmark(version);
            }
            Ok(WatchEvent::Error(status)) if status.code == 410 => {
                expired(&self.key, version);
                return Handled::Expired;
            }
            // An event that cannot be read or a failed watch: as client-go's reflector, list
            // again after the backoff rather than resume where it failed.
            Ok(WatchEvent::Error(status)) => return Handled::Failed(kube::Error::Api(status)),
            Err(kube::Error::Api(status)) if status.code == 410 => {
                expired(&self.key, version);
                return Handled::Expired;
            }
            Err(error) => return Handled::Failed(error),
        }
        Handled::Applied
    }
}

#[cfg(test)]
mod tests {
    use kube::core::Status;
    use serde_json::json;

    use super::*;

    fn status(code: u16) -> Box<Status> {
        let status =
            json!({"code": code, "message": "configmaps is forbidden", "reason": "Forbidden"});
        Box::new(serde_json::from_value(status).unwrap())
    }

    #[test]
    fn a_403_is_told_apart_from_other_failures() {
        let error = kube::Error::Api(status(403));
        assert_eq!(forbidden(&error), Some("configmaps is forbidden"));
        for code in [404, 410, 500] {
            assert_eq!(forbidden(&kube::Error::Api(status(code))), None);
        }
    }

    /// A registry whose informers never reach an API server: nothing listens at its address.
    fn informers() -> Informers {
        Informers::new(Resources::unreachable(), 2)
    }

    fn configmaps(namespace: &str, selector: Option<&str>) -> Selection {
        Selection {
            kind: GroupVersionKind::gvk("", "v1", "ConfigMap"),
            namespace: Some(namespace.into()),
            selector: selector.map(|s| s.parse().unwrap()),
        }
    }

    fn configmap(name: &str, labels: serde_json::Value, version: &str) -> CachedObject {
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "a", "labels": labels, "resourceVersion": version, "uid": name},
        });
        CachedObject::new(serde_json::from_value(object).unwrap())
    }

    #[tokio::test]
    async fn one_informer_per_selection_shared_until_the_last_holder_lets_go() {
        let informers = informers();
        let first = informers.acquire(&configmaps("a", None), &Transform::default());
        let again = informers.acquire(&configmaps("a", None), &Transform::default());
        assert!(Arc::ptr_eq(&first, &again));
        let selected = informers.acquire(&configmaps("a", Some("app=web")), &Transform::default());
        assert!(!Arc::ptr_eq(&first, &selected));
        let dropping = informers.acquire(&configmaps("a", None), &drop_data());
        assert!(!Arc::ptr_eq(&first, &dropping));
        assert!(Arc::ptr_eq(
            &dropping,
            &informers.acquire(&configmaps("a", None), &drop_data())
        ));
        drop(dropping);
        assert_eq!(informers.running().len(), 2);
        assert!(!first.is_synced(), "nothing has listed");

        drop((first, again));
        let running = informers.running();
        assert_eq!(running.len(), 1);
        assert_eq!(running[0].selection(), &configmaps("a", Some("app=web")));
    }

    #[tokio::test]
    async fn namespaces_past_the_per_kind_count_share_one_informer_of_every_namespace() {
        let informers = informers();
        let kind = configmaps("a", None).kind;
        informers.reach().answer(&kind, true);
        let plain = Transform::default();
        let own: Vec<_> = ["a", "b"]
            .map(|ns| informers.serving(&configmaps(ns, None), &plain))
            .into();
        assert_eq!(own[1].selection(), &configmaps("b", None));
        let labelled = informers.serving(&configmaps("c", Some("app=web")), &plain);
        assert_eq!(
            labelled.selection(),
            &configmaps("c", Some("app=web")),
            "selections of another label selector are counted apart"
        );
        let wide = informers.serving(&configmaps("c", None), &plain);
        assert_eq!(wide.selection().namespace, None);
        let again = informers.serving(&configmaps("d", None), &plain);
        assert!(Arc::ptr_eq(&wide, &again));
        assert!(
            Arc::ptr_eq(&wide, &informers.serving(&configmaps("a", None), &plain)),
            "once it runs, the wide informer serves a namespace that had its own too"
        );
        let dropping = informers.serving(&configmaps("e", None), &drop_data());
        assert_eq!(dropping.selection(), &configmaps("e", None));

        informers.reach().answer(&kind, false);
        drop((wide, again));
        let refused = informers.serving(&configmaps("f", None), &plain);
        assert_eq!(
            refused.selection(),
            &configmaps("f", None),
            "a host that may not watch every namespace keeps an informer per namespace"
        );
    }

    /// Drops `data.big` and every annotation.
    fn drop_data() -> Transform {
        Transform::new(["/data/big", "/metadata/annotations"].map(|f| f.parse().unwrap()))
    }

    #[tokio::test]
    async fn a_recorded_write_is_cached_through_the_informer_s_transform() {
        let informers = informers();
        let informer = informers.acquire(&configmaps("a", None), &drop_data());
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "web", "namespace": "a", "resourceVersion": "5", "uid": "u1",
                "labels": {"app": "web"}, "annotations": {"note": "x"},
                "managedFields": [{
                    "manager": "kubewasm-echo", "operation": "Apply", "apiVersion": "v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:big": {}}},
                }],
            },
            "data": {"big": "xxxx", "small": "y"},
        });
        informer.record_write(&CachedObject::new(serde_json::from_value(object).unwrap()));
        let cached = informer
            .store()
            .get(&configmap("web", json!({}), "5").key())
            .unwrap();
        let read: serde_json::Value = serde_json::from_str(cached.json()).unwrap();
        assert_eq!(read["data"], json!({"small": "y"}));
        assert_eq!(read["metadata"]["annotations"], serde_json::Value::Null);
        assert_eq!(cached.label("app"), Some("web"));
        assert_eq!(cached.applied().len(), 1, "the host's apply stays known");
    }

    #[tokio::test]
    async fn handlers_see_recorded_writes_in_the_selection_until_unsubscribed() {
        let informers = informers();
        let informer = informers.acquire(&configmaps("a", Some("app=web")), &Transform::default());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let subscription = informer.subscribe({
            let seen = seen.clone();
            Arc::new(move |change: &Change| {
                let name = change.new.as_ref().map(|o| o.name().to_owned());
                seen.lock().unwrap().push(name);
            })
        });
        informer.record_write(&configmap("web", json!({"app": "web"}), "5"));
        informer.record_write(&configmap("db", json!({"app": "db"}), "6"));
        assert_eq!(*seen.lock().unwrap(), [Some("web".to_owned())]);
        assert!(
            informer
                .store()
                .get(&configmap("db", json!({}), "6").key())
                .is_none()
        );

        drop(subscription);
        informer.record_write(&configmap("web", json!({"app": "web"}), "7"));
        assert_eq!(
            seen.lock().unwrap().len(),
            1,
            "an unsubscribed handler is not called"
        );
        let cached = informer
            .store()
            .get(&configmap("web", json!({}), "7").key());
        assert_eq!(cached.unwrap().resource_version(), Some("7"));
    }
}
