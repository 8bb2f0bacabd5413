//! The host's metrics in the Prometheus text exposition format (version 0.0.4), named and
//! labelled like controller-runtime's, with `controller` and the workqueue's `name` being the
//! guest's name, plus kubewasm's own `kubewasm_*` metrics.
//!
//! Guarantees: every family is written once, with its `HELP` and `TYPE` lines, and all its
//! samples together; label values are escaped (`\`, `"` and line feeds), so any guest name or
//! label selector yields a valid exposition.

use std::fmt::{Display, Write};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use crate::health::Health;
use crate::host::Observer;
use crate::queue::QueueStats;
use crate::watch::InformerKey;

/// The content type of [`Snapshot::render`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// One guest's numbers at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct GuestSnapshot {
    /// The guest's name.
    pub name: String,
    /// Its module file.
    pub path: PathBuf,
    /// Its reconcile counters and module.
    pub health: Health,
    /// Its workqueue.
    pub queue: QueueStats,
    /// Workers it runs.
    pub max_concurrency: u32,
    /// Workers reconciling a key now.
    pub active_workers: usize,
    /// Applies not sent because the cluster already matched.
    pub writes_elided: u64,
}

/// Objects in one informer's cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheSnapshot {
    /// What the informer watches.
    pub key: InformerKey,
    /// Objects it holds.
    pub objects: usize,
}

/// Module loads, reloads, rejections and unloads so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadSnapshot {
    /// Modules loaded, at start-up or on reload.
    pub loaded: u64,
    /// Modules replaced while running.
    pub reloaded: u64,
    /// Changed modules rejected.
    pub rejected: u64,
    /// Guests unloaded because their file was removed.
    pub unloaded: u64,
}

/// Everything the metrics and status endpoints show, read at one moment.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// The running guests, in module-path order.
    pub guests: Vec<GuestSnapshot>,
    /// The running informers.
    pub caches: Vec<CacheSnapshot>,
    /// Module load counters.
    pub loads: LoadSnapshot,
}

impl Snapshot {
    /// Reads the host's current state; waits while a reload is in progress.
    pub async fn collect(observer: &Observer) -> Self {
        let guests = observer
            .controllers()
            .await
            .iter()
            .map(|c| GuestSnapshot {
                name: c.name().to_owned(),
                path: c.module().path.clone(),
                health: c.health(),
                queue: c.queue().stats(),
                max_concurrency: c.max_concurrency(),
                active_workers: c.queue().in_flight(),
                writes_elided: c.writes_elided(),
            })
            .collect();
        let mut caches: Vec<_> = observer
            .informers()
            .iter()
            .map(|i| CacheSnapshot {
                key: i.key().clone(),
                objects: i.store().len(),
            })
            .collect();
        caches.sort_by(|a, b| cache_labels(&a.key).cmp(&cache_labels(&b.key)));
        let counters = observer.load_counters();
        let load = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed);
        Self {
            guests,
            caches,
            loads: LoadSnapshot {
                loaded: load(&counters.loaded),
                reloaded: load(&counters.reloaded),
                rejected: load(&counters.rejected),
                unloaded: load(&counters.unloaded),
            },
        }
    }

    /// The exposition, in [`CONTENT_TYPE`].
    pub fn render(&self) -> String {
        let mut out = Exposition::default();
        let guests = &self.guests;
        out.family(
            "controller_runtime_reconcile_total",
            Kind::Counter,
            "Total number of reconciliations per controller",
        );
        for guest in guests {
            let h = &guest.health;
            for (result, value) in [
                ("success", h.succeeded),
                ("error", h.failed),
                ("requeue", 0),
                ("requeue_after", h.requeued),
            ] {
                out.sample(
                    "controller_runtime_reconcile_total",
                    &[("controller", &guest.name), ("result", result)],
                    value,
                );
            }
        }
        out.per_guest(
            guests,
            "controller_runtime_reconcile_errors_total",
            Kind::Counter,
            "Total number of reconciliation errors per controller",
            "controller",
            |g| g.health.failed,
        );
        out.per_guest(
            guests,
            "controller_runtime_max_concurrent_reconciles",
            Kind::Gauge,
            "Maximum number of concurrent reconciles per controller",
            "controller",
            |g| g.max_concurrency,
        );
        out.per_guest(
            guests,
            "controller_runtime_active_workers",
            Kind::Gauge,
            "Number of currently used workers per controller",
            "controller",
            |g| g.active_workers,
        );
        out.per_guest(
            guests,
            "workqueue_depth",
            Kind::Gauge,
            "Current depth of workqueue",
            "name",
            |g| g.queue.depth,
        );
        out.per_guest(
            guests,
            "workqueue_adds_total",
            Kind::Counter,
            "Total number of adds handled by workqueue",
            "name",
            |g| g.queue.adds_total,
        );
        out.per_guest(
            guests,
            "workqueue_retries_total",
            Kind::Counter,
            "Total number of retries handled by workqueue",
            "name",
            |g| g.queue.retries_total,
        );
        out.per_guest(
            guests,
            "workqueue_unfinished_work_seconds",
            Kind::Gauge,
            "How many seconds of work has been done that is in progress",
            "name",
            |g| g.queue.unfinished_work_seconds,
        );
        out.per_guest(
            guests,
            "workqueue_longest_running_processor_seconds",
            Kind::Gauge,
            "How many seconds has the longest running processor for workqueue been running",
            "name",
            |g| g.queue.longest_running_processor_seconds,
        );
        out.per_guest(
            guests,
            "kubewasm_guest_traps_total",
            Kind::Counter,
            "Reconciles that trapped",
            "controller",
            |g| g.health.traps,
        );
        out.per_guest(
            guests,
            "kubewasm_guest_timeouts_total",
            Kind::Counter,
            "Reconciles that ran past their deadline",
            "controller",
            |g| g.health.timeouts,
        );
        out.per_guest(
            guests,
            "kubewasm_guest_out_of_memory_total",
            Kind::Counter,
            "Reconciles that ran out of memory",
            "controller",
            |g| g.health.out_of_memory,
        );
        out.per_guest(
            guests,
            "kubewasm_host_calls_denied_total",
            Kind::Counter,
            "Host calls refused: kind not declared or verb not granted",
            "controller",
            |g| g.health.denied,
        );
        out.per_guest(
            guests,
            "kubewasm_writes_elided_total",
            Kind::Counter,
            "Applies not sent because the cluster already matched",
            "controller",
            |g| g.writes_elided,
        );
        out.per_guest(
            guests,
            "kubewasm_guest_log_lines_dropped_total",
            Kind::Counter,
            "Guest log lines the rate limit kept out of the host's log",
            "controller",
            |g| g.health.output_dropped,
        );
        out.per_guest(
            guests,
            "kubewasm_guest_consecutive_failures",
            Kind::Gauge,
            "Failed reconciles since the guest's last successful one",
            "controller",
            |g| g.health.consecutive_failures,
        );
        let loads = &self.loads;
        for (name, help, value) in [
            (
                "kubewasm_module_loads_total",
                "Modules loaded, at start-up or on reload",
                loads.loaded,
            ),
            (
                "kubewasm_module_reloads_total",
                "Modules replaced while running",
                loads.reloaded,
            ),
            (
                "kubewasm_module_rejections_total",
                "Changed modules rejected; the previous version kept running",
                loads.rejected,
            ),
            (
                "kubewasm_module_unloads_total",
                "Guests unloaded because their module file was removed",
                loads.unloaded,
            ),
        ] {
            out.family(name, Kind::Counter, help);
            out.sample(name, &[], value);
        }
        out.family(
            "kubewasm_cache_objects",
            Kind::Gauge,
            "Objects in an informer's cache",
        );
        for cache in &self.caches {
            let [group, version, kind, namespace, selector] = cache_labels(&cache.key);
            out.sample(
                "kubewasm_cache_objects",
                &[
                    ("group", group),
                    ("version", version),
                    ("kind", kind),
                    ("namespace", namespace),
                    ("selector", selector),
                ],
                cache.objects,
            );
        }
        out.0
    }
}

/// An informer's labels; empty for the core group, every namespace and no selector.
fn cache_labels(key: &InformerKey) -> [&str; 5] {
    [
        &key.kind.group,
        &key.kind.version,
        &key.kind.kind,
        key.namespace.as_deref().unwrap_or_default(),
        key.selector.as_deref().unwrap_or_default(),
    ]
}

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
}

/// Text being written.
#[derive(Default)]
struct Exposition(String);

impl Exposition {
    fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        let help = help.replace('\\', r"\\").replace('\n', r"\n");
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.0.push_str(name);
        for (i, (label, value)) in labels.iter().enumerate() {
            self.0.push(if i == 0 { '{' } else { ',' });
            let _ = write!(self.0, "{label}=\"{}\"", escape(value));
        }
        if !labels.is_empty() {
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }

    /// A family with one sample per guest, labelled with its name as `label`.
    fn per_guest<V: Display>(
        &mut self,
        guests: &[GuestSnapshot],
        name: &str,
        kind: Kind,
        help: &str,
        label: &str,
        value: impl Fn(&GuestSnapshot) -> V,
    ) {
        self.family(name, kind, help);
        for guest in guests {
            self.sample(name, &[(label, &guest.name)], value(guest));
        }
    }
}

/// A label value as the text format wants it.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str(r"\\"),
            '"' => out.push_str(r#"\""#),
            '\n' => out.push_str(r"\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use kube::api::GroupVersionKind;

    use super::*;

    fn guest(name: &str) -> GuestSnapshot {
        GuestSnapshot {
            name: name.into(),
            path: "/m/mirror.wasm".into(),
            health: Health {
                loaded_at: SystemTime::UNIX_EPOCH,
                digest: "ab".into(),
                succeeded: 7,
                requeued: 2,
                failed: 3,
                traps: 1,
                timeouts: 0,
                out_of_memory: 0,
                denied: 4,
                output_dropped: 0,
                consecutive_failures: 1,
                last_error: None,
            },
            queue: QueueStats {
                depth: 5,
                adds_total: 11,
                retries_total: 3,
                unfinished_work_seconds: 0.5,
                longest_running_processor_seconds: 0.25,
            },
            max_concurrency: 2,
            active_workers: 1,
            writes_elided: 6,
        }
    }

    fn snapshot() -> Snapshot {
        Snapshot {
            guests: vec![guest("mirror"), guest("podset")],
            caches: vec![CacheSnapshot {
                key: InformerKey {
                    kind: GroupVersionKind::gvk("", "v1", "ConfigMap"),
                    namespace: Some("team-a".into()),
                    selector: Some("app in (a,b)".into()),
                },
                objects: 9,
            }],
            loads: LoadSnapshot {
                loaded: 2,
                reloaded: 1,
                rejected: 0,
                unloaded: 0,
            },
        }
    }

    #[test]
    fn samples_carry_controller_runtime_names_and_labels() {
        let text = snapshot().render();
        for line in [
            r#"controller_runtime_reconcile_total{controller="mirror",result="success"} 7"#,
            r#"controller_runtime_reconcile_total{controller="mirror",result="error"} 3"#,
            r#"controller_runtime_reconcile_total{controller="mirror",result="requeue"} 0"#,
            r#"controller_runtime_reconcile_total{controller="podset",result="requeue_after"} 2"#,
            r#"controller_runtime_reconcile_errors_total{controller="mirror"} 3"#,
            r#"controller_runtime_max_concurrent_reconciles{controller="mirror"} 2"#,
            r#"controller_runtime_active_workers{controller="mirror"} 1"#,
            r#"workqueue_depth{name="mirror"} 5"#,
            r#"workqueue_adds_total{name="mirror"} 11"#,
            r#"workqueue_retries_total{name="mirror"} 3"#,
            r#"workqueue_unfinished_work_seconds{name="mirror"} 0.5"#,
            r#"kubewasm_guest_traps_total{controller="mirror"} 1"#,
            r#"kubewasm_host_calls_denied_total{controller="mirror"} 4"#,
            r#"kubewasm_writes_elided_total{controller="mirror"} 6"#,
            r#"kubewasm_guest_consecutive_failures{controller="mirror"} 1"#,
            "kubewasm_module_loads_total 2",
            "kubewasm_module_reloads_total 1",
            r#"kubewasm_cache_objects{group="",version="v1",kind="ConfigMap",namespace="team-a",selector="app in (a,b)"} 9"#,
            "# TYPE workqueue_depth gauge",
            "# TYPE controller_runtime_reconcile_total counter",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
    }

    #[test]
    fn every_family_is_announced_once_and_its_samples_follow_it() {
        let text = snapshot().render();
        let mut announced = Vec::new();
        let mut current = String::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap_or_default().to_owned();
                assert!(!announced.contains(&name), "{name} announced twice");
                announced.push(name.clone());
                current = name;
            } else if !line.starts_with("# HELP ") {
                let name = line.split(['{', ' ']).next().unwrap_or_default();
                assert_eq!(name, current, "{line:?} outside its family");
                let value = line.rsplit(' ').next().unwrap_or_default();
                assert!(value.parse::<f64>().is_ok(), "{line:?} has no number");
            }
        }
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn label_values_are_escaped() {
        let mut snapshot = snapshot();
        snapshot.guests = vec![guest("a\"b\\c\nd")];
        let text = snapshot.render();
        assert!(
            text.contains(r#"workqueue_depth{name="a\"b\\c\nd"} 5"#),
            "{text}"
        );
        assert_eq!(escape("plain"), "plain");
    }

    #[test]
    fn no_guests_leaves_families_without_samples() {
        let text = Snapshot::default().render();
        assert!(text.contains("# TYPE workqueue_depth gauge\n# HELP"));
        assert!(text.contains("kubewasm_module_loads_total 0\n"));
    }
}
