//! Cache-only mode: one kube-rs reflector `Store` of a namespace's ConfigMaps or Pods, as a
//! kube-rs controller keeps it, and nothing else. The benchmark reads the process's memory
//! once the store holds every object.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::serde::de::DeserializeOwned;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, Resource, ResourceExt};

/// The kinds a store can hold.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Kind {
    /// Core `ConfigMap`s.
    Configmaps,
    /// Core `Pod`s.
    Pods,
}

/// Keeps a store of `kind` in `namespace` until the stream ends or `stop` resolves, printing
/// `cached N` on standard output whenever the number of stored objects changes (checked every
/// 200 ms). With `strip`, objects lose their `managedFields` before they are stored, as kube-rs
/// documents for lowering a store's memory.
pub async fn run(
    client: Client,
    namespace: &str,
    kind: Kind,
    strip: bool,
    stop: impl Future<Output = ()>,
) -> Result<(), watcher::Error> {
    match kind {
        Kind::Configmaps => {
            store::<ConfigMap>(Api::namespaced(client, namespace), strip, stop).await
        }
        Kind::Pods => store::<Pod>(Api::namespaced(client, namespace), strip, stop).await,
    }
}

async fn store<K>(
    api: Api<K>,
    strip: bool,
    stop: impl Future<Output = ()>,
) -> Result<(), watcher::Error>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + DeserializeOwned + Send + Sync,
    K: 'static,
{
    let (reader, writer) = reflector::store::<K>();
    let mut events = watcher(api, watcher::Config::default())
        .modify(move |object| {
            if strip {
                object.managed_fields_mut().clear();
            }
        })
        .reflect(writer)
        .boxed();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let (mut printed, mut listed) = (None, false);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(watcher::Event::InitDone)) => listed = true,
                Some(Ok(_)) => {}
                Some(Err(error)) => eprintln!("bench-native: {error}"),
                None => return Ok(()),
            },
            _ = tick.tick() => {
                if listed && printed != Some(reader.len()) {
                    printed = Some(reader.len());
                    println!("cached {}", reader.len());
                }
            }
            () = &mut stop => return Ok(()),
        }
    }
}
