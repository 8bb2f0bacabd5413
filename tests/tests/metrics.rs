//! The host's HTTP endpoints: /metrics counts and times the guest's reconciles in
//! controller-runtime's names, /healthz and /readyz answer once the host runs and its informers
//! have listed, /status names the guest's module, and the informer caches are listed.

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use kubewasm_tests::{
    Language, WAIT, apply_yaml, control_plane, eventually, example_config, free_ports,
    http_get as get, module_config, repo_root, with_host_args,
};
use serde_json::{Value, json};

#[tokio::test]
async fn metrics_probes_and_status_are_served() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("metrics").await?;
    with_listening_host(
        ns.name(),
        &module_config("mirror", ns.name()),
        async |metrics, probes| exercise(&client, ns.name(), metrics, probes).await,
    )
    .await
}

/// Runs `exercise` against a host running `config` with its metrics and probe listeners on free
/// loopback ports, whose addresses `exercise` gets.
async fn with_listening_host(
    name: &str,
    config: &str,
    exercise: impl AsyncFnOnce(&str, &str) -> Result<()>,
) -> Result<()> {
    let [metrics, probes] = free_ports()?.map(|port| format!("127.0.0.1:{port}"));
    with_host_args(
        name,
        config,
        &[
            "--metrics-bind-address",
            &metrics,
            "--health-probe-bind-address",
            &probes,
        ],
        async |_| exercise(&metrics, &probes).await,
    )
    .await
}

/// Waits for /readyz at `probes` to answer 200; returns its status and body.
async fn ready(probes: &str) -> Result<(u16, String)> {
    eventually("/readyz to answer 200", WAIT, || async {
        Ok(Some(get(probes, "/readyz").await?).filter(|(status, _)| *status == 200))
    })
    .await
}

async fn exercise(client: &Client, namespace: &str, metrics: &str, probes: &str) -> Result<()> {
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    let source = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "source", "labels": { "kubewasm.dev/fixture": "mirror" } },
        "data": { "value": "observed" },
    });
    config_maps
        .patch(
            "source",
            &PatchParams::apply("tests"),
            &Patch::Apply(&source),
        )
        .await?;
    eventually("the mirror", WAIT, || async {
        Ok(config_maps.get_opt("source-mirror").await?)
    })
    .await?;

    let (status, body) = ready(probes).await?;
    ensure!(
        status == 200 && body == "ok\n",
        "/readyz: {status} {body:?}"
    );
    let (status, _) = get(probes, "/healthz").await?;
    ensure!(status == 200, "/healthz answers {status}");
    ensure!(
        get(probes, "/metrics").await?.0 == 404,
        "no /metrics on the probe address"
    );
    ensure!(
        get(metrics, "/nothing").await?.0 == 404,
        "unknown paths are 404"
    );

    let samples = eventually("a successful reconcile in /metrics", WAIT, || async {
        let (status, body) = get(metrics, "/metrics").await?;
        ensure!(status == 200, "/metrics answers {status}");
        let samples = parse(&body)?;
        let succeeded = samples
            .iter()
            .find(|(name, _)| {
                name == r#"controller_runtime_reconcile_total{controller="mirror",result="success"}"#
            })
            .map_or(0.0, |(_, value)| *value);
        Ok((succeeded >= 1.0).then_some(samples))
    })
    .await?;
    ensure!(
        samples
            .iter()
            .any(|(name, _)| name == r#"workqueue_depth{name="mirror"}"#),
        "workqueue_depth of mirror missing: {samples:?}"
    );

    // The counters and the histograms are read one after the other: wait for a scrape with no
    // reconcile between them.
    let samples = eventually("every counted reconcile timed", WAIT, || async {
        let samples = parse(&get(metrics, "/metrics").await?.1)?;
        let counted: f64 = samples
            .iter()
            .filter(|(series, _)| {
                series.starts_with(r#"controller_runtime_reconcile_total{controller="mirror","#)
            })
            .map(|(_, value)| value)
            .sum();
        let timed = Histogram::of(
            &samples,
            "controller_runtime_reconcile_time_seconds",
            r#"controller="mirror""#,
        )?;
        Ok((timed.count == counted).then_some(samples))
    })
    .await?;
    for (family, labels) in [
        (
            "controller_runtime_reconcile_time_seconds",
            r#"controller="mirror""#,
        ),
        ("workqueue_queue_duration_seconds", r#"name="mirror""#),
        ("workqueue_work_duration_seconds", r#"name="mirror""#),
        (
            "kubewasm_guest_instantiate_seconds",
            r#"controller="mirror""#,
        ),
        ("kubewasm_guest_call_seconds", r#"controller="mirror""#),
    ] {
        let histogram = Histogram::of(&samples, family, labels)?;
        histogram
            .check()
            .with_context(|| format!("{family}{{{labels}}}: {histogram:?}"))?;
    }
    let mirror = r#"controller="mirror""#;
    let reconciles = Histogram::of(
        &samples,
        "controller_runtime_reconcile_time_seconds",
        mirror,
    )?
    .count;
    let calls = Histogram::of(&samples, "kubewasm_guest_call_seconds", mirror)?.count;
    ensure!(
        calls >= reconciles,
        "every reconcile of mirror calls the guest: {calls} calls, {reconciles} reconciles"
    );

    let (status, body) = get(metrics, "/status").await?;
    ensure!(status == 200, "/status answers {status}");
    let document: Value = serde_json::from_str(&body).context("/status is JSON")?;
    let guests = document["guests"].as_array().context("guests")?;
    let mirror = guests
        .iter()
        .find(|g| g["name"] == "mirror")
        .with_context(|| format!("mirror in /status: {body}"))?;
    let digest = mirror["digest"].as_str().unwrap_or_default();
    ensure!(
        digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()),
        "digest {digest:?}"
    );
    ensure!(
        mirror["counters"]["succeeded"].as_u64() >= Some(1),
        "{body}"
    );
    ensure!(mirror["consecutiveFailures"] == 0, "{body}");
    Ok(())
}

/// The PodSet guest owns its pods in the namespace it runs in and watches pods everywhere (for
/// orphans to adopt). Both are served by the one watch of every namespace: a second, namespaced
/// watch could deliver a pod's deletion while the wider one, still behind, kept the pod in what
/// the guest reads, and the PodSet would never be reconciled again for it.
#[tokio::test]
async fn a_guest_reads_and_is_triggered_by_one_cache_per_object() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("caches").await?;
    apply_yaml(&client, &repo_root().join("examples/podset/crd.yaml"), None).await?;
    with_listening_host(
        ns.name(),
        &example_config("podset", Language::Rust, ns.name()),
        async |metrics, probes| {
            ready(probes).await?;
            let samples = parse(&get(metrics, "/metrics").await?.1)?;
            let mut caches: Vec<&str> = samples
                .iter()
                .filter_map(|(series, _)| series.strip_prefix("kubewasm_cache_objects"))
                .collect();
            caches.sort_unstable();
            let podsets = format!(
                r#"{{group="kubewasm.dev",version="v1alpha1",kind="PodSet",namespace="{}",selector="",drops=""}}"#,
                ns.name()
            );
            let pods = r#"{group="",version="v1",kind="Pod",namespace="",selector="",drops=""}"#;
            ensure!(caches == [pods, &podsets], "caches: {caches:?}");
            Ok(())
        },
    )
    .await
}

/// One histogram series of an exposition.
#[derive(Debug)]
struct Histogram {
    /// `(le, cumulative count)`, in exposition order.
    buckets: Vec<(f64, f64)>,
    sum: f64,
    count: f64,
}

impl Histogram {
    /// The series of `family` labelled `labels` (as written, without `le`) among `samples`.
    fn of(samples: &[(String, f64)], family: &str, labels: &str) -> Result<Self> {
        let bucket = format!("{family}_bucket{{{labels},le=\"");
        let mut buckets = Vec::new();
        for (series, value) in samples {
            if let Some(rest) = series.strip_prefix(&bucket) {
                let le = rest
                    .strip_suffix("\"}")
                    .with_context(|| format!("not a bucket: {series}"))?;
                let bound = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse()?
                };
                buckets.push((bound, *value));
            }
        }
        let single = |suffix: &str| {
            let series = format!("{family}_{suffix}{{{labels}}}");
            samples
                .iter()
                .find(|(s, _)| *s == series)
                .map(|(_, value)| *value)
                .with_context(|| format!("{series} missing"))
        };
        Ok(Self {
            buckets,
            sum: single("sum")?,
            count: single("count")?,
        })
    }

    /// Prometheus' invariants, with at least one observation: bounds ascending to `+Inf`,
    /// cumulative counts never decreasing, the `+Inf` bucket equal to `_count`.
    fn check(&self) -> Result<()> {
        ensure!(self.count > 0.0, "no observations");
        ensure!(self.sum >= 0.0, "a negative sum");
        ensure!(
            self.buckets.windows(2).all(|w| w[0].0 < w[1].0),
            "bounds not ascending"
        );
        ensure!(
            self.buckets.windows(2).all(|w| w[0].1 <= w[1].1),
            "cumulative counts decrease"
        );
        ensure!(
            self.buckets.last() == Some(&(f64::INFINITY, self.count)),
            "the +Inf bucket is not _count"
        );
        Ok(())
    }
}

/// The samples of a text exposition: series (name and labels, as written) and value.
fn parse(text: &str) -> Result<Vec<(String, f64)>> {
    let mut samples = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let Some((series, value)) = line.rsplit_once(' ') else {
            bail!("not a sample: {line:?}");
        };
        samples.push((series.to_owned(), value.parse()?));
    }
    Ok(samples)
}
