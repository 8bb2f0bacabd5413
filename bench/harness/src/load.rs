//! The load generator: namespaces, sources and their updates, and the null writer (children
//! written by the harness itself), all by server-side apply from one client.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result};
use bench_copy_logic::{ROLE_LABEL, SOURCE_ROLE, child};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::observer::poll;

/// The data key holding a source's update counter.
pub const SEQ_KEY: &str = "seq";
/// The data key holding a source's fixed payload.
const PAYLOAD_KEY: &str = "payload";
/// Field manager of the sources. Not `kubewasm-` prefixed: the sources stand for objects users
/// write, and the host keeps the applied fields of its own field managers only.
const FIELD_MANAGER: &str = "bench-sources";
/// Field manager of the children the null writer applies.
const NULL_WRITER: &str = "bench-null-writer";
/// Requests in flight while sources are created or namespaces deleted.
const SETUP_CONCURRENCY: usize = 32;
/// Attempts of one load-generator request before the run fails.
const ATTEMPTS: u32 = 5;

/// A source ConfigMap as the harness last wrote it.
#[derive(Debug, Clone)]
pub struct Source {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid, which its child's controller owner reference must carry.
    pub uid: String,
    /// Its data: the payload and [`SEQ_KEY`].
    pub data: BTreeMap<String, String>,
}

impl Source {
    fn seq(&self) -> u64 {
        self.data[SEQ_KEY]
            .parse()
            .expect("the harness writes numbers")
    }
}

/// Creates the namespace `name`.
pub async fn create_namespace(client: &Client, name: &str) -> Result<()> {
    let namespace: Namespace = serde_json::from_value(json!({ "metadata": { "name": name } }))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .with_context(|| format!("creating namespace {name}"))?;
    Ok(())
}

/// Deletes the namespaces and waits until they are gone, so that the deletion's writes end
/// before the next measurement starts.
pub async fn delete_namespaces(client: &Client, names: &[String]) -> Result<()> {
    let api = Api::<Namespace>::all(client.clone());
    futures::stream::iter(names)
        .map(|name| {
            let api = api.clone();
            async move {
                api.delete(name, &DeleteParams::background()).await?;
                loop {
                    if api.get_opt(name).await?.is_none() {
                        return anyhow::Ok(());
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        })
        .buffer_unordered(SETUP_CONCURRENCY)
        .try_collect::<()>()
        .await
}

/// Creates `count` sources named `src-00000`, ... in `namespace`, each with a payload of
/// `payload_bytes` bytes and `seq` 0.
pub async fn create_sources(
    client: &Client,
    namespace: &str,
    count: usize,
    payload_bytes: usize,
) -> Result<Vec<Source>> {
    let api = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    let mut sources: Vec<Source> = futures::stream::iter(0..count)
        .map(|index| {
            let api = api.clone();
            async move {
                let name = format!("src-{index:05}");
                let payload: String = name.chars().cycle().take(payload_bytes).collect();
                let mut source = Source {
                    data: BTreeMap::from([
                        (PAYLOAD_KEY.to_owned(), payload),
                        (SEQ_KEY.to_owned(), "0".to_owned()),
                    ]),
                    namespace: namespace.to_owned(),
                    name,
                    uid: String::new(),
                };
                let written = apply_source(&api, &source).await?;
                source.uid = written
                    .metadata
                    .uid
                    .context("an applied object has a uid")?;
                anyhow::Ok(source)
            }
        })
        .buffer_unordered(SETUP_CONCURRENCY)
        .try_collect()
        .await
        .with_context(|| format!("creating sources in {namespace}"))?;
    sources.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(sources)
}

/// Increments the `seq` of `source`; returns the new value.
pub fn bump(source: &mut Source) -> u64 {
    let seq = source.seq() + 1;
    source.data.insert(SEQ_KEY.to_owned(), seq.to_string());
    seq
}

/// Applies `source` as the harness holds it.
pub async fn apply_source(api: &Api<ConfigMap>, source: &Source) -> Result<ConfigMap> {
    let manifest = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": source.name, "labels": { ROLE_LABEL: SOURCE_ROLE } },
        "data": source.data,
    });
    let (params, patch) = (
        PatchParams::apply(FIELD_MANAGER).force(),
        Patch::Apply(&manifest),
    );
    retry(|| api.patch(&source.name, &params, &patch))
        .await
        .with_context(|| format!("applying source {}", source.name))
}

/// Applies the child of `source` as the controllers do, with a controller owner reference:
/// one write of the null writer.
pub async fn apply_child(api: &Api<ConfigMap>, source: &Source) -> Result<()> {
    let mut manifest = child(&json!({
        "metadata": { "name": source.name },
        "data": source.data,
    }));
    manifest["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": source.name,
        "uid": source.uid,
        "controller": true,
        "blockOwnerDeletion": true,
    }]);
    let name = manifest["metadata"]["name"]
        .as_str()
        .context("a child has a name")?
        .to_owned();
    let (params, patch) = (
        PatchParams::apply(NULL_WRITER).force(),
        Patch::Apply(&manifest),
    );
    retry(|| api.patch(&name, &params, &patch))
        .await
        .with_context(|| format!("applying child {name}"))?;
    Ok(())
}

/// The null writer: applies the child of every source, `concurrency` at a time.
pub async fn write_children(
    client: &Client,
    namespace: &str,
    sources: &[Source],
    concurrency: usize,
) -> Result<()> {
    let api = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    futures::stream::iter(sources)
        .map(|source| apply_child(&api, source))
        .buffer_unordered(concurrency)
        .try_collect()
        .await
}

/// Deletes every child in `namespace` and waits until the observer saw them go. One request
/// deletes them all; the API server may end it before it is done with a large collection, so
/// it is sent again, up to [`ATTEMPTS`] times, until none is left.
pub async fn delete_children(
    client: &Client,
    namespace: &str,
    observer: &crate::observer::Observer,
) -> Result<()> {
    let api = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    let mut attempt = 1;
    loop {
        let sent = api
            .delete_collection(
                &DeleteParams::background(),
                &ListParams::default().labels(bench_copy_logic::COPY_SELECTOR),
            )
            .await
            .with_context(|| format!("deleting children in {namespace}"));
        let wait = if sent.is_ok() { 300 } else { 60 };
        let gone = poll("children to be deleted", Duration::from_secs(wait), || {
            Ok((observer.children_in(namespace) == 0).then_some(()))
        })
        .await;
        match (gone, sent) {
            (Ok(()), _) => return Ok(()),
            (Err(error), Ok(_)) | (Err(_), Err(error)) if attempt == ATTEMPTS => return Err(error),
            _ => attempt += 1,
        }
    }
}

/// Runs `request` until it succeeds, at most [`ATTEMPTS`] times, 100 ms apart.
pub async fn retry<T, F, Fut>(mut request: F) -> kube::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = kube::Result<T>>,
{
    let mut attempt = 1;
    loop {
        match request().await {
            Ok(value) => return Ok(value),
            Err(_) if attempt < ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bump_changes_only_the_counter() {
        let mut source = Source {
            namespace: "ns".into(),
            name: "src-00001".into(),
            uid: "u".into(),
            data: BTreeMap::from([
                (PAYLOAD_KEY.to_owned(), "p".to_owned()),
                (SEQ_KEY.to_owned(), "41".to_owned()),
            ]),
        };
        assert_eq!(bump(&mut source), 42);
        assert_eq!(source.data[PAYLOAD_KEY], "p");
        assert_eq!(source.data[SEQ_KEY], "42");
    }
}
