//! Changes of the ConfigMaps that WasmControllers take their modules from, seen by one watch of
//! ConfigMap metadata in every namespace instead of a read of each source every
//! `pollInterval`: a thousand such sources cost the API server one watch, not a GET each every
//! 30 s, and a change is read at once. The watch caches nothing; it runs when the host may list
//! and watch ConfigMaps in every namespace, and otherwise sources are read on their timer.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ObjectMeta};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};

use crate::cluster::reach;

/// An object's namespace and name.
type Key = (String, String);

/// The ConfigMap sources followed, and whether their watch runs.
#[derive(Default)]
pub struct SourceChanges {
    /// Whether the watch runs, so that a followed source needs no timer.
    watching: AtomicBool,
    followed: Mutex<Followed>,
}

#[derive(Default)]
struct Followed {
    /// The ConfigMap each object takes its module from.
    by_object: HashMap<Key, Key>,
    /// The objects taking their module from each ConfigMap, and the last resourceVersion of it
    /// the watch showed.
    by_source: HashMap<Key, (HashSet<Key>, Option<String>)>,
    /// While the watch lists: the ConfigMaps listed so far.
    listed: Option<HashSet<Key>>,
}

impl SourceChanges {
    /// Follows the ConfigMap `source` (in the object's namespace) for the object `object`, in
    /// place of what it followed before; `None` follows nothing.
    pub fn follow(&self, object: &Key, source: Option<&str>) {
        let mut followed = self.followed.lock().expect("sources lock");
        let wanted = source.map(|name| (object.0.clone(), name.to_owned()));
        if followed.by_object.get(object) == wanted.as_ref() {
            return;
        }
        if let Some(before) = followed.by_object.remove(object)
            && let Some((objects, _)) = followed.by_source.get_mut(&before)
        {
            objects.remove(object);
            if objects.is_empty() {
                followed.by_source.remove(&before);
            }
        }
        if let Some(source) = wanted {
            let entry = followed.by_source.entry(source.clone()).or_default();
            entry.0.insert(object.clone());
            followed.by_object.insert(object.clone(), source);
        }
    }

    /// Whether a change of the source of `object` queues it: it is followed and the watch runs.
    pub fn follows(&self, object: &Key) -> bool {
        self.watching.load(Ordering::Relaxed)
            && self
                .followed
                .lock()
                .expect("sources lock")
                .by_object
                .contains_key(object)
    }

    /// Watches ConfigMaps with `client` and calls `changed` with each object whose source
    /// changed or went, for as long as it is polled. Waits, asking again every 5 minutes, while
    /// the host may not list and watch ConfigMaps in every namespace. While the watch fails, or
    /// lists again, sources are read on their timer: every followed object is queued, and so
    /// arms its timer, when the watch fails; those whose source went meanwhile when it has
    /// listed again.
    pub async fn run(&self, client: Client, changed: impl Fn(&Key)) {
        allowed(&client).await;
        let api: Api<PartialObjectMeta<ConfigMap>> = Api::all(client);
        let mut events = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
        while let Some(event) = events.next().await {
            let objects = match event {
                Ok(Event::Apply(source)) => self.changed(&source.metadata, false),
                Ok(Event::Delete(source)) => self.changed(&source.metadata, true),
                Ok(Event::Init) => self.listing(),
                Ok(Event::InitApply(source)) => self.listed(&source.metadata),
                Ok(Event::InitDone) => self.relisted(),
                Err(error) => {
                    tracing::warn!(%error, "watching ConfigMap sources failed; they are read on their timer until it lists again");
                    self.failed()
                }
            };
            objects.iter().for_each(&changed);
        }
    }

    /// The objects following the ConfigMap of `metadata`, when it is `deleted` or shows a
    /// resourceVersion other than the last one seen.
    fn changed(&self, metadata: &ObjectMeta, deleted: bool) -> Vec<Key> {
        let Some(source) = key_of(metadata) else {
            return Vec::new();
        };
        let mut followed = self.followed.lock().expect("sources lock");
        let Some((objects, seen)) = followed.by_source.get_mut(&source) else {
            return Vec::new();
        };
        let version = (!deleted)
            .then(|| metadata.resource_version.clone())
            .flatten();
        if !deleted && *seen == version {
            return Vec::new();
        }
        *seen = version;
        objects.iter().cloned().collect()
    }

    /// A list starts: the sources it shows are noted, to find those gone at its end.
    fn listing(&self) -> Vec<Key> {
        self.followed.lock().expect("sources lock").listed = Some(HashSet::new());
        Vec::new()
    }

    /// A ConfigMap the list shows: as a change, and noted.
    fn listed(&self, metadata: &ObjectMeta) -> Vec<Key> {
        if let Some(source) = key_of(metadata) {
            let mut followed = self.followed.lock().expect("sources lock");
            if let Some(listed) = &mut followed.listed {
                listed.insert(source);
            }
        }
        self.changed(metadata, false)
    }

    /// The list ended: the watch follows the sources from now on, and the objects of a source
    /// seen before that the list did not show are queued, as for a deletion.
    fn relisted(&self) -> Vec<Key> {
        self.watching.store(true, Ordering::Relaxed);
        let mut followed = self.followed.lock().expect("sources lock");
        let listed = followed.listed.take().unwrap_or_default();
        let mut gone = Vec::new();
        for (source, (objects, seen)) in &mut followed.by_source {
            if !listed.contains(source) && seen.take().is_some() {
                gone.extend(objects.iter().cloned());
            }
        }
        gone
    }

    /// The watch failed: sources are read on their timer until it has listed again, so every
    /// followed object is queued, once, to arm it.
    fn failed(&self) -> Vec<Key> {
        if !self.watching.swap(false, Ordering::Relaxed) {
            return Vec::new();
        }
        let followed = self.followed.lock().expect("sources lock");
        followed.by_object.keys().cloned().collect()
    }
}

/// The namespace and name of `metadata`, when it has both.
fn key_of(metadata: &ObjectMeta) -> Option<Key> {
    Some((metadata.namespace.clone()?, metadata.name.clone()?))
}

/// Returns once the host may list and watch ConfigMaps in every namespace, asking every 5
/// minutes until then (sooner after a failed review).
async fn allowed(client: &Client) {
    loop {
        let wait = match reach::watch_everywhere(client, "", "configmaps").await {
            Ok(true) => return,
            Ok(false) => {
                tracing::info!(
                    "the host may not list and watch ConfigMaps in every namespace: ConfigMap sources are read again every pollInterval"
                );
                Duration::from_secs(300)
            }
            Err(error) => {
                tracing::warn!(%error, "could not ask whether the host may watch ConfigMaps: ConfigMap sources are read again every pollInterval meanwhile");
                Duration::from_secs(10)
            }
        };
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(namespace: &str, name: &str, version: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            resource_version: Some(version.into()),
            ..ObjectMeta::default()
        }
    }

    fn key(namespace: &str, name: &str) -> Key {
        (namespace.into(), name.into())
    }

    #[test]
    fn a_followed_source_queues_its_objects_once_per_version_and_when_deleted() {
        let changes = SourceChanges::default();
        changes.follow(&key("a", "one"), Some("module"));
        changes.follow(&key("a", "two"), Some("module"));
        changes.follow(&key("b", "three"), Some("module"));
        let mut first = changes.changed(&meta("a", "module", "5"), false);
        first.sort();
        assert_eq!(first, [key("a", "one"), key("a", "two")]);
        assert!(changes.changed(&meta("a", "module", "5"), false).is_empty());
        assert!(changes.changed(&meta("a", "other", "6"), false).is_empty());
        assert_eq!(changes.changed(&meta("a", "module", "7"), true).len(), 2);
        assert_eq!(
            changes.changed(&meta("b", "module", "7"), false),
            [key("b", "three")]
        );
    }

    #[test]
    fn a_failed_watch_hands_sources_to_their_timers_until_a_list_finds_those_gone() {
        let changes = SourceChanges::default();
        changes.follow(&key("a", "one"), Some("kept"));
        changes.follow(&key("a", "two"), Some("gone"));
        assert!(changes.listing().is_empty());
        assert_eq!(changes.listed(&meta("a", "kept", "1")).len(), 1);
        assert_eq!(changes.listed(&meta("a", "gone", "1")).len(), 1);
        assert!(changes.relisted().is_empty());
        assert!(changes.follows(&key("a", "one")));

        assert_eq!(
            changes.failed().len(),
            2,
            "every followed object arms its timer"
        );
        assert!(changes.failed().is_empty(), "once per failure");
        assert!(!changes.follows(&key("a", "one")));
        changes.listing();
        assert!(changes.listed(&meta("a", "kept", "1")).is_empty());
        assert_eq!(changes.relisted(), [key("a", "two")]);
        assert!(changes.follows(&key("a", "one")));
    }

    #[test]
    fn an_object_follows_one_source_until_it_follows_another_or_none() {
        let changes = SourceChanges::default();
        changes.watching.store(true, Ordering::Relaxed);
        changes.follow(&key("a", "one"), Some("old"));
        changes.follow(&key("a", "one"), Some("new"));
        assert!(changes.changed(&meta("a", "old", "1"), false).is_empty());
        assert_eq!(
            changes.changed(&meta("a", "new", "1"), false),
            [key("a", "one")]
        );
        assert!(changes.follows(&key("a", "one")));
        changes.follow(&key("a", "one"), None);
        assert!(changes.changed(&meta("a", "new", "2"), false).is_empty());
        assert!(changes.followed.lock().unwrap().by_source.is_empty());
        assert!(!changes.follows(&key("a", "one")));
    }
}
