//! One watch on every child ConfigMap of the cluster, recording when each child was last seen
//! to change: the end point of every timing the harness takes.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::{Result, bail};
use bench_copy_logic::{COPY_SELECTOR, SOURCE_LABEL};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use tokio::time::Instant;

use crate::load::{SEQ_KEY, Source};

/// A child as last seen.
struct Child {
    data: BTreeMap<String, String>,
    /// The uid of its controller owner.
    owner: Option<String>,
    /// When the watch delivered this version.
    seen: Instant,
}

/// An update of a source that its child does not show yet.
struct Pending {
    seq: u64,
    sent: Instant,
}

#[derive(Default)]
struct State {
    /// Children by namespace, then by the name of their source.
    children: HashMap<String, HashMap<String, Child>>,
    /// The children of a list in progress; they replace `children` once it is complete, so
    /// that children deleted while the watch was down are forgotten.
    relist: Option<HashMap<String, HashMap<String, Child>>>,
    /// Updates not yet seen in the child, by namespace and source name, oldest first.
    pending: HashMap<String, HashMap<String, VecDeque<Pending>>>,
    /// How long each update took to show in its child, in the order they showed.
    latencies: Vec<Duration>,
}

/// When the watch delivered the first and the last of a set of children.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub first: Instant,
    pub last: Instant,
}

/// The watch; it ends when dropped.
pub struct Observer {
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Observer {
    /// Starts watching and returns once the initial list is recorded.
    pub async fn start(client: Client) -> Result<Self> {
        let state: Arc<Mutex<State>> = Arc::default();
        let (listed, mut synced) = tokio::sync::watch::channel(false);
        let record = state.clone();
        let api = Api::<ConfigMap>::all(client);
        let config = watcher::Config::default().labels(COPY_SELECTOR);
        let task = tokio::spawn(async move {
            let mut events = watcher::watcher(api, config).default_backoff().boxed();
            while let Some(event) = events.next().await {
                let seen = Instant::now();
                match event {
                    Ok(Event::Apply(child) | Event::InitApply(child)) => {
                        lock(&record).saw(child, seen);
                    }
                    Ok(Event::Delete(child)) => lock(&record).deleted(&child),
                    Ok(Event::Init) => lock(&record).relist = Some(HashMap::new()),
                    Ok(Event::InitDone) => {
                        let mut state = lock(&record);
                        if let Some(children) = state.relist.take() {
                            state.children = children;
                        }
                        listed.send_replace(true);
                    }
                    Err(error) => eprintln!("warning: watching children: {error}"),
                }
            }
        });
        synced.wait_for(|listed| *listed).await?;
        Ok(Self { state, task })
    }

    /// How many children exist in `namespace`.
    pub fn children_in(&self, namespace: &str) -> usize {
        lock(&self.state)
            .children
            .get(namespace)
            .map_or(0, HashMap::len)
    }

    /// When the first and the last child of `sources` were seen with their source's data, if
    /// every one has been.
    pub fn converged(&self, namespace: &str, sources: &[Source]) -> Option<Span> {
        let state = lock(&self.state);
        let children = state.children.get(namespace)?;
        let mut span: Option<Span> = None;
        for source in sources {
            let child = children.get(&source.name)?;
            if child.data != source.data {
                return None;
            }
            span = Some(span.map_or(
                Span {
                    first: child.seen,
                    last: child.seen,
                },
                |s| Span {
                    first: s.first.min(child.seen),
                    last: s.last.max(child.seen),
                },
            ));
        }
        span
    }

    /// How many children of `sources` lack a controller owner reference to their source.
    pub fn unowned(&self, namespace: &str, sources: &[Source]) -> usize {
        let state = lock(&self.state);
        let children = state.children.get(namespace);
        sources
            .iter()
            .filter(|source| {
                children
                    .and_then(|c| c.get(&source.name))
                    .is_none_or(|child| child.owner.as_deref() != Some(&source.uid))
            })
            .count()
    }

    /// Records that update `seq` of `source` is being sent now; its latency is taken when the
    /// child shows `seq` or a later one.
    pub fn expect(&self, namespace: &str, source: &str, seq: u64) {
        lock(&self.state)
            .pending
            .entry(namespace.to_owned())
            .or_default()
            .entry(source.to_owned())
            .or_default()
            .push_back(Pending {
                seq,
                sent: Instant::now(),
            });
    }

    /// How many sources of `namespace` have updates their child does not show yet.
    pub fn behind(&self, namespace: &str) -> usize {
        lock(&self.state)
            .pending
            .get(namespace)
            .map_or(0, |sources| {
                sources.values().filter(|p| !p.is_empty()).count()
            })
    }

    /// The latencies recorded since the last call, forgetting updates still pending.
    pub fn take_latencies(&self) -> Vec<Duration> {
        let mut state = lock(&self.state);
        state.pending.clear();
        std::mem::take(&mut state.latencies)
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl State {
    fn saw(&mut self, child: ConfigMap, seen: Instant) {
        let (Some(namespace), Some(source)) = (child.namespace(), source_of(&child)) else {
            return;
        };
        let owner = child
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .map(|o| o.uid.clone());
        let data = child.data.unwrap_or_default();
        let shown = data.get(SEQ_KEY).and_then(|s| s.parse::<u64>().ok());
        if let (Some(shown), Some(pending)) = (
            shown,
            self.pending
                .get_mut(&namespace)
                .and_then(|sources| sources.get_mut(&source)),
        ) {
            while pending.front().is_some_and(|p| p.seq <= shown) {
                let update = pending.pop_front().expect("a front");
                self.latencies.push(seen - update.sent);
            }
        }
        self.relist
            .as_mut()
            .unwrap_or(&mut self.children)
            .entry(namespace)
            .or_default()
            .insert(source, Child { data, owner, seen });
    }

    fn deleted(&mut self, child: &ConfigMap) {
        if let (Some(namespace), Some(source)) = (child.namespace(), source_of(child))
            && let Some(children) = self.children.get_mut(&namespace)
        {
            children.remove(&source);
        }
    }
}

/// The name of a child's source, from its source label.
fn source_of(child: &ConfigMap) -> Option<String> {
    child.labels().get(SOURCE_LABEL).cloned()
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().expect("observer lock")
}

/// Polls `check` every 50 ms until it returns `Some` or fails; fails after `timeout` naming
/// `what`.
pub async fn poll<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check()? {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
