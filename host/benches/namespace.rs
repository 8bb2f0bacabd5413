//! What a reconcile costs against the size of its namespace: the example `podset` controller
//! reconciling one PodSet and its three pods while the namespace holds 0, 100, 1,000 or 10,000
//! other pods, which other PodSets control and no selector of this one matches.
//!
//! The guest reads through the host's own informer cache ([`Store`], with its indexes) and its
//! own call path (`dispatch::call`, a fresh instance per call); writes are answered at once
//! with the object sent, as an API server that changed nothing would. Each size is measured in
//! turn, every sample one reconcile, reported as median and 99th percentile of the wall time
//! and as the CPU time of the benchmark's thread per reconcile (`/proc/thread-self/schedstat`,
//! guest and host together: the runtime is single-threaded). The last column compares each
//! size's median with the empty namespace's: a reconcile that reads only its own pods stays
//! near 1.00x.
//!
//! `PODSET_WASM=path` measures another build of the guest, such as one that lists its whole
//! namespace, on the same host and fixture.
//!
//! Then what the indexes cost: the bytes the allocator holds more once a store of 10,000 pods
//! has indexed a label key they all carry, per entry; the index of controllers has entries of
//! the same form, one per controlled object.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use common::{NAMESPACE, PODS, machine, percentile, pod, podset, rust_podset};
use kube::api::{DynamicObject, GroupVersionKind};
use kubewasm::cluster::cache::{CachedObject, ObjectKey, Store};
use kubewasm::cluster::selector::LabelSelector;
use kubewasm::wasm::backend::{
    ApplyRequest, Backend, CallError, DeleteRequest, EventRequest, PatchRequest, Scope,
};
use kubewasm::wasm::bindings::types;
use kubewasm::wasm::dispatch::{self, Entry, Outcome};
use kubewasm::wasm::env::GuestEnv;
use kubewasm::wasm::limits::CallLimits;
use kubewasm::wasm::module;
use kubewasm::wasm::permissions::Permissions;
use kubewasm::wasm::runtime::Runtime;
use serde_json::{Value, json};

/// Other pods in the namespace, per measured size.
const SIZES: [usize; 4] = [0, 100, 1_000, 10_000];
/// Reconciles measured per size, after [`WARMUP`] more.
const SAMPLES: usize = 300;
const WARMUP: usize = 20;
/// Measuring one size stops after this long even with fewer samples.
const BUDGET: Duration = Duration::from_secs(30);

/// The system allocator, counting the bytes it holds.
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);

#[allow(unsafe_code, reason = "a global allocator forwards to the system's")]
// SAFETY: every call is forwarded to `System` with the caller's own arguments.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: as the caller promised for this call.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as the caller promised for this call.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes per entry of a label index over 10,000 pods, and the pods' own bytes per pod.
fn index_cost() -> (f64, f64) {
    let pods = 10_000;
    let before = HELD.load(Ordering::Relaxed);
    let store = Store::default();
    store.replace((0..pods).map(|i| cached(other_pod(i))).collect(), "1");
    let filled = HELD.load(Ordering::Relaxed);
    let entries = store.index_entries();
    let selector: LabelSelector = "app=other-7".parse().expect("a selector");
    assert_eq!(store.list(None, Some(&selector)).len(), pods / 50);
    let indexed = HELD.load(Ordering::Relaxed);
    let added = store.index_entries() - entries;
    assert_eq!(added, pods, "one entry per pod carrying the key");
    let per_entry = (indexed - filled) as f64 / added as f64;
    (per_entry, (filled - before) as f64 / pods as f64)
}

/// The host's caches of PodSets and Pods, each a [`Store`] as an informer fills it.
struct Cached {
    podsets: Store,
    pods: Store,
}

impl Cached {
    fn store(&self, kind: &GroupVersionKind) -> Result<&Store, CallError> {
        match kind.kind.as_str() {
            "PodSet" => Ok(&self.podsets),
            "Pod" => Ok(&self.pods),
            other => Err(CallError::Invalid(format!("no cache of {other}"))),
        }
    }
}

fn json_of(objects: Vec<Arc<CachedObject>>) -> Vec<Arc<str>> {
    objects.iter().map(|o| o.json().clone()).collect()
}

#[async_trait]
impl Backend for Cached {
    fn get(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<str>>, CallError> {
        let key = ObjectKey {
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        };
        Ok(self.store(kind)?.get(&key).map(|o| o.json().clone()))
    }

    fn list(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        selector: Option<&LabelSelector>,
    ) -> Result<Vec<Arc<str>>, CallError> {
        Ok(json_of(self.store(kind)?.list(namespace, selector)))
    }

    fn list_controlled(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        uid: &str,
    ) -> Result<Vec<Arc<str>>, CallError> {
        Ok(json_of(self.store(kind)?.controlled(uid, namespace)))
    }

    async fn apply(&self, request: ApplyRequest) -> Result<String, CallError> {
        assert!(request.status, "only the PodSet's status is written");
        Ok(request.object.to_string())
    }

    async fn patch(&self, _: PatchRequest) -> Result<String, CallError> {
        panic!("a reconcile of the fixture patches nothing")
    }

    async fn delete(&self, _: DeleteRequest) -> Result<(), CallError> {
        panic!("a reconcile of the fixture deletes nothing")
    }

    async fn event(&self, _: EventRequest) -> Result<(), CallError> {
        Ok(())
    }
}

fn cached(object: Value) -> Arc<CachedObject> {
    let object: DynamicObject = serde_json::from_value(object).expect("a valid object");
    Arc::new(CachedObject::new(object))
}

/// Pod `index` of the namespace's other PodSets: labelled and controlled by one of 50.
fn other_pod(index: usize) -> Value {
    let set = format!("other-{}", index % 50);
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("{set}-{index}"), "namespace": NAMESPACE,
            "uid": format!("other-pod-uid-{index}"), "resourceVersion": "1",
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "labels": { "app": set },
            "ownerReferences": [{ "apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet",
                "name": set, "uid": format!("{set}-uid"), "controller": true,
                "blockOwnerDeletion": true }],
        },
        "spec": { "nodeName": "node-1",
                  "containers": [{ "name": "app", "image": "registry.k8s.io/pause:3.10" }] },
        "status": { "phase": "Running" },
    })
}

/// The fixture's PodSet and its pods, and `others` other pods in the namespace.
fn fixture(others: usize) -> Cached {
    let podset = podset();
    let stores = Cached {
        podsets: Store::default(),
        pods: Store::default(),
    };
    let pods = (0..PODS).map(|i| cached(pod(&podset, i)));
    let pods = pods.chain((0..others).map(|i| cached(other_pod(i))));
    stores.pods.replace(pods.collect(), "1");
    stores.podsets.replace(vec![cached(podset)], "1");
    stores
}

/// CPU time this thread has run, from the scheduler's own accounting.
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let nanos = stat.split_whitespace().next().and_then(|n| n.parse().ok());
    Duration::from_nanos(nanos.unwrap_or(0))
}

struct Measured {
    others: usize,
    median: f64,
    p99: f64,
    cpu: f64,
    samples: usize,
}

async fn measure(runtime: &Runtime, wasm: &Path, others: usize) -> Measured {
    let limits = CallLimits::default();
    let module = module::load(runtime, wasm, &limits)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let backend = Arc::new(fixture(others));
    let podset_kind = module.metadata.primary.kind.clone();
    let env = Arc::new(GuestEnv::new(
        &module.metadata.name,
        module.metadata.declared(),
        backend.clone(),
        limits.host_call_timeout,
        Permissions::new(None),
    ));
    let scope = Scope {
        kind: podset_kind.clone(),
        namespace: Some(NAMESPACE.into()),
        name: "web".into(),
        uid: Some(common::PODSET_UID.into()),
        deleting: false,
    };
    let podset = backend
        .get(&podset_kind, Some(NAMESPACE), "web")
        .expect("cached")
        .expect("the PodSet");
    let request = types::Request {
        key: types::ObjectKey {
            namespace: Some(NAMESPACE.into()),
            name: "web".into(),
        },
        reason: types::Reason::Resync,
        attempt: 1,
        object: Some(podset.to_string()),
    };
    let mut samples = Vec::new();
    let (start, mut cpu) = (Instant::now(), Duration::ZERO);
    for round in 0..WARMUP + SAMPLES {
        if round >= WARMUP && start.elapsed() > BUDGET {
            break;
        }
        let (wall, thread) = (Instant::now(), thread_cpu());
        let (outcome, _) = dispatch::call(
            runtime,
            &module,
            &env,
            &limits,
            scope.clone(),
            Entry::Reconcile,
            request.clone(),
        )
        .await;
        let (elapsed, used) = (wall.elapsed(), thread_cpu().saturating_sub(thread));
        assert_eq!(outcome, Ok(Outcome::Done), "{others} other pods");
        if round >= WARMUP {
            samples.push(elapsed);
            cpu += used;
        }
    }
    samples.sort();
    Measured {
        others,
        median: percentile(&samples, 0.5),
        p99: percentile(&samples, 0.99),
        cpu: cpu.as_secs_f64() * 1e6 / samples.len() as f64,
        samples: samples.len(),
    }
}

fn main() {
    let wasm = std::env::var_os("PODSET_WASM").map_or_else(rust_podset, PathBuf::from);
    println!(
        "kubewasm namespace benchmark: a podset reconcile against other pods in its namespace"
    );
    println!("machine: {}", machine());
    println!("guest:   {}", wasm.display());
    let runtime = Runtime::new().expect("a WebAssembly runtime");
    let measured: Vec<Measured> = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime")
        .block_on(async {
            let mut measured = Vec::new();
            for others in SIZES {
                measured.push(measure(&runtime, &wasm, others).await);
            }
            measured
        });
    let (per_entry, per_pod) = index_cost();
    println!();
    println!(
        "{:>12} {:>8} {:>12} {:>12} {:>16} {:>14}",
        "other pods", "samples", "median µs", "p99 µs", "CPU µs/reconcile", "median vs 0"
    );
    let base = measured[0].median;
    for m in &measured {
        println!(
            "{:>12} {:>8} {:>12.1} {:>12.1} {:>16.1} {:>13.2}x",
            m.others,
            m.samples,
            m.median,
            m.p99,
            m.cpu,
            m.median / base
        );
    }
    println!();
    println!(
        "index: {per_entry:.1} bytes per entry; a cached pod of the fixture with its controller \
         entry takes {per_pod:.0} bytes"
    );
    let sizes: Vec<Value> = measured
        .iter()
        .map(|m| {
            json!({ "others": m.others, "median_us": m.median, "p99_us": m.p99,
                    "cpu_us": m.cpu, "samples": m.samples })
        })
        .collect();
    let largest = measured.last().expect("sizes are measured");
    println!(
        "json: {}",
        json!({ "sizes": sizes, "ratio_10000": largest.median / base,
                "index_bytes_per_entry": per_entry, "pod_bytes": per_pod })
    );
}
