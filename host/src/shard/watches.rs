//! The sharder's watches: the metadata of every object of a guest's selections, each event
//! tagged with the selection it was seen in.

use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

use crate::cluster::resources::Resources;
use crate::cluster::selection::Selection;

/// The events of one metadata watch, each with its tag.
pub type Tagged<T> = BoxStream<
    'static,
    (
        T,
        Result<watcher::Event<PartialObjectMeta<DynamicObject>>, watcher::Error>,
    ),
>;

/// The resource of `kind` and whether it is namespaced, asked for again each second until
/// discovery answers; `None` when `stop` is cancelled first.
pub async fn resolve(
    guest: &str,
    resources: &Resources,
    kind: &GroupVersionKind,
    stop: &CancellationToken,
) -> Option<(ApiResource, bool)> {
    loop {
        match resources.resolve(kind).await {
            Ok(resolved) => return Some(resolved),
            Err(error) => {
                tracing::warn!(guest = %guest, %error, "sharder: resolving a kind");
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    () = stop.cancelled() => return None,
                }
            }
        }
    }
}

/// The metadata watch of `selection`, of the kind `resource` (in its namespace if
/// `namespaced`), with the default backoff; its events are tagged with `tag`.
pub fn events<T: Copy + Send + 'static>(
    client: Client,
    resource: &ApiResource,
    namespaced: bool,
    selection: &Selection,
    tag: T,
) -> Tagged<T> {
    let api = match &selection.namespace {
        Some(namespace) if namespaced => {
            Api::<PartialObjectMeta<DynamicObject>>::namespaced_with(client, namespace, resource)
        }
        _ => Api::all_with(client, resource),
    };
    let mut config = watcher::Config::default();
    if let Some(selector) = &selection.selector {
        config = config.labels(&selector.to_string());
    }
    watcher(api, config)
        .default_backoff()
        .map(move |event| (tag, event))
        .boxed()
}
