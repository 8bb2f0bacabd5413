//! API Priority and Fairness rejects the host's requests with 429 Too Many Requests under churn,
//! and the PodSet guest still keeps its replicas, with no pod lost and none created twice.
//!
//! The test's own user is in `system:masters`, which APF exempts; the host runs as a
//! ServiceAccount bound to `cluster-admin`, with a token from the TokenRequest API. A FlowSchema
//! that comes before the default ones sends every request of that account to a priority level
//! of the smallest concurrency (one share: 3 seats of the API server's 600) that rejects what it
//! cannot run at once (no queues, nothing lent or borrowed). The host runs 16 reconciles at a
//! time, each with a deadline of 2 s: shorter than the Retry-After that APF names after a few
//! rejections in a row, so that some reconciles end while one of their writes waits to be sent
//! again (the default deadline of 10 s gets there too, less often). Such a write must not land
//! once the next reconcile has acted without it. The PodSets are created in a burst, then each
//! round deletes two pods of every PodSet at once; every burst waits for every PodSet to
//! converge and prints how long that took and how many requests the API server rejected
//! (`apiserver_flowcontrol_rejected_requests_total` of the priority level), and the run fails
//! unless some were.
//!
//! A write rejected with 429 is sent again no sooner than the rejection's Retry-After, which APF
//! names only in a header of a plain-text answer: the host's log shows each wait.
//!
//! In the end every pod that ever existed is accounted for, as in `faults.rs`: each PodSet's
//! replicas plus one replacement per deleted pod; any more is a duplicate. The run has a process
//! (and so a control plane) of its own, so that nothing else loads the API server meanwhile.
//! `tests/run` runs 2 rounds; `KUBEWASM_FAULT_ROUNDS=20` runs 20.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration;
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use kubewasm_tests::podset::{
    converged, create, created_once, delete_one_each, fault_rounds, install,
};
use kubewasm_tests::prometheus::{has, mutating, sum};
use kubewasm_tests::{
    HostProcess, Language, WAIT, apply_yaml_text, control_plane, eventually, example_config,
    parse_duration, service_account_token, with_started_host,
};

const PODSETS: usize = 16;
const REPLICAS: usize = 5;
const ACCOUNT: &str = "kubewasm";
/// Reconciles the host runs at once, more than the priority level admits.
const CONCURRENCY: usize = 16;
/// The deadline of one reconcile: shorter than the Retry-After of a few rejections in a row.
const DEADLINE_MS: u64 = 2000;

/// The `wait=` of a host log line.
fn wait_of(line: &str) -> Option<Duration> {
    parse_duration(line.split("wait=").nth(1)?.split_whitespace().next()?)
}

/// A kubeconfig in `dir` that reaches the test API server as the bearer of `token`.
fn token_kubeconfig(dir: &Path, token: &str) -> Result<PathBuf> {
    let mut config = Kubeconfig::read_from(control_plane().kubeconfig())?;
    for user in &mut config.auth_infos {
        user.auth_info = Some(AuthInfo {
            token: Some(token.into()),
            ..AuthInfo::default()
        });
    }
    let path = dir.join("kubeconfig");
    std::fs::write(&path, serde_yaml::to_string(&config)?)?;
    Ok(path)
}

/// The priority level `level`, the FlowSchema sending every request of the ServiceAccount
/// [`ACCOUNT`] of `namespace` to it, and the account's binding to `cluster-admin`. The
/// FlowSchema's precedence, 50, comes before every default one but the two that exempt
/// `system:masters` (1) and health probes (2).
fn flow_control(level: &str, namespace: &str) -> String {
    format!(
        "apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {{name: {level}}}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    lendablePercent: 0
    borrowingLimitPercent: 0
    limitResponse: {{type: Reject}}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {{name: {level}}}
spec:
  priorityLevelConfiguration: {{name: {level}}}
  matchingPrecedence: 50
  rules:
  - subjects: [{{kind: ServiceAccount, serviceAccount: {{name: {ACCOUNT}, namespace: {namespace}}}}}]
    resourceRules:
    - {{verbs: ['*'], apiGroups: ['*'], resources: ['*'], namespaces: ['*'], clusterScope: true}}
    nonResourceRules:
    - {{verbs: ['*'], nonResourceURLs: ['*']}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {level}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}}
subjects: [{{kind: ServiceAccount, name: {ACCOUNT}, namespace: {namespace}}}]
"
    )
}

/// The API server's metrics.
async fn apiserver_metrics(client: &Client) -> Result<String> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    Ok(client.request_text(request).await?)
}

/// Requests rejected since the API server started: those of the priority level `level`, and
/// the writes among every rejection with 429 (only that priority level rejects any).
async fn rejected(client: &Client, level: &str) -> Result<(f64, f64)> {
    let text = apiserver_metrics(client).await?;
    let rejected = sum(
        &text,
        "apiserver_flowcontrol_rejected_requests_total",
        |labels| has(labels, "priority_level", level),
    );
    let writes = sum(&text, "apiserver_request_terminations_total", |labels| {
        has(labels, "code", "429") && mutating(labels)
    });
    Ok((rejected, writes))
}

#[tokio::test]
async fn podsets_converge_with_no_pod_lost_or_duplicated_through_429s_from_flow_control()
-> Result<()> {
    let rounds = fault_rounds(2)?;
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("throttling").await?;
    let (podsets, pods, recorder) = install(&client, ns.name()).await?;
    let level = format!("kubewasm-{}", ns.name());
    apply_yaml_text(&client, &flow_control(&level, ns.name()), None).await?;
    let token = service_account_token(&client, ns.name(), ACCOUNT).await?;
    let scratch = tempfile::tempdir()?;
    let kubeconfig = token_kubeconfig(scratch.path(), &token)?;

    // The API server classifies requests by the FlowSchemas it has read: wait until the
    // account's requests go to the priority level.
    let level_uid = Api::<PriorityLevelConfiguration>::all(client.clone())
        .get(&level)
        .await?
        .metadata
        .uid
        .context("objects have a uid")?;
    let account = Client::try_from(
        Config::from_custom_kubeconfig(
            Kubeconfig::read_from(&kubeconfig)?,
            &KubeConfigOptions::default(),
        )
        .await?,
    )?;
    eventually(
        "the account's requests to reach the priority level",
        WAIT,
        || async {
            let request = http::Request::get(format!("/api/v1/namespaces/{}/pods", ns.name()))
                .body(Vec::new().into())?;
            let response = account.send(request).await?;
            let classified = response
                .headers()
                .get("X-Kubernetes-PF-PriorityLevel-UID")
                .is_some_and(|uid| uid.as_bytes() == level_uid.as_bytes());
            Ok(classified.then_some(()))
        },
    )
    .await?;
    let seats = sum(
        &apiserver_metrics(&client).await?,
        "apiserver_flowcontrol_nominal_limit_seats",
        |labels| has(labels, "priority_level", &level),
    );

    let config = format!(
        "{}    maxConcurrency: {CONCURRENCY}\n    limits: {{timeoutMs: {DEADLINE_MS}}}\n",
        example_config("podset", Language::Rust, ns.name())
    );
    let baseline = rejected(&client, &level).await?;
    let host = HostProcess::start_via(ns.name(), &config, &kubeconfig, &[])?;
    let seen = Mutex::new(HashSet::new());
    with_started_host(host, async |host| {
        let mut owners = Vec::new();
        let mut deleted = 0;
        for round in 0..=rounds {
            let before = rejected(&client, &level).await?;
            let burst = Instant::now();
            let what = if round == 0 {
                for i in 0..PODSETS {
                    owners.push(create(&podsets, &format!("set-{i}"), REPLICAS).await?);
                }
                format!("{PODSETS} PodSets of {REPLICAS} created")
            } else {
                for _ in 0..2 {
                    deleted += delete_one_each(&pods, &owners, &seen).await?;
                }
                "2 pods of every PodSet deleted".to_owned()
            };
            converged(&podsets, &pods, &owners, REPLICAS, &seen).await?;
            let took = burst.elapsed();
            let after = rejected(&client, &level).await?;
            eprintln!(
                "burst {round}: {what}; converged in {:.1} s, {} requests rejected with 429, \
                 {} of them writes",
                took.as_secs_f64(),
                after.0 - before.0,
                after.1 - before.1
            );
        }
        let total = rejected(&client, &level).await?.0 - baseline.0;
        anyhow::ensure!(
            total > 0.0,
            "the API server rejected none of the host's requests at {seats} seats: nothing \
             was throttled"
        );
        // A write rejected with 429 waits at least the Retry-After of the rejection (1 s or
        // more) before it is sent again, not the host's own shorter pause.
        let hasty: Vec<String> = host
            .log()
            .lines()
            .filter(|line| line.contains("sending it again") && line.contains("429"))
            .filter(|line| wait_of(line).is_none_or(|wait| wait < Duration::from_secs(1)))
            .map(str::to_owned)
            .collect();
        anyhow::ensure!(
            hasty.is_empty(),
            "{} writes were sent again before the Retry-After of their 429, as:\n{}",
            hasty.len(),
            hasty[..hasty.len().min(3)].join("\n")
        );
        let created = created_once(&seen, &recorder, PODSETS, REPLICAS, deleted).await?;
        eprintln!(
            "{PODSETS} PodSets converged at {seats} seats, {total} requests rejected: \
             {deleted} pods deleted, {created} pods created, 0 lost, 0 duplicates"
        );
        Ok(())
    })
    .await
}
