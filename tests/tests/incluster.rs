//! The host run as a pod runs it: as a ServiceAccount (a token from the TokenRequest API, the
//! in-cluster environment emulated), with exactly the RBAC `kubewasm rbac` prints. Two replicas
//! elect a leader in the service account's namespace, the standby takes over when the leader is
//! killed, metrics and probes answer; without the RBAC the host says what it may not do, and
//! recovers once it is granted.

use std::process::Command;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};
use kubewasm_tests::{
    HostProcess, WAIT, apply_yaml_text, control_plane, eventually, free_ports, host_binary,
    http_get, mirrored, module_config, service_account_token,
};

const ACCOUNT: &str = "kubewasm";

/// The RBAC `kubewasm rbac` prints for `config`, bound to the test's ServiceAccount.
fn generated_rbac(config: &str, namespace: &str) -> Result<String> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, config)?;
    let output = Command::new(host_binary())
        .args(["rbac", "--config"])
        .arg(&file)
        .args(["--name", &format!("kubewasm-{namespace}")])
        .args(["--service-account", &format!("{namespace}/{ACCOUNT}")])
        .output()?;
    ensure!(
        output.status.success(),
        "kubewasm rbac failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8(output.stdout)?)
}

/// What the deployment adds to the generated RBAC: the binding of the ClusterRole, and leader
/// election on Leases in the service account's namespace.
fn deployment_rbac(namespace: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: kubewasm-{namespace}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kubewasm-{namespace}}}
subjects: [{{kind: ServiceAccount, name: {ACCOUNT}, namespace: {namespace}}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: kubewasm-leader-election, namespace: {namespace}}}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, watch, create, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: kubewasm-leader-election, namespace: {namespace}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: kubewasm-leader-election}}
subjects: [{{kind: ServiceAccount, name: {ACCOUNT}, namespace: {namespace}}}]
"
    )
}

/// A replica: the host in the in-cluster environment, electing a leader, serving metrics and
/// probes on loopback ports of its own.
struct Replica {
    host: HostProcess,
    metrics: String,
    probes: String,
}

impl Replica {
    fn start(name: &str, config: &str, token: &str, namespace: &str) -> Result<Self> {
        let [metrics, probes] = free_ports()?.map(|port| format!("127.0.0.1:{port}"));
        let host = HostProcess::start_in_cluster(
            name,
            config,
            &[
                "--leader-elect",
                "--metrics-bind-address",
                &metrics,
                "--health-probe-bind-address",
                &probes,
            ],
            token,
            namespace,
        )?;
        Ok(Self {
            host,
            metrics,
            probes,
        })
    }

    fn leads(&self) -> bool {
        self.host.log().contains("became leader")
    }
}

#[tokio::test]
async fn two_replicas_run_as_a_service_account_and_the_standby_takes_over() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("incluster").await?;
    let config = module_config("mirror", ns.name());
    let rbac = generated_rbac(&config, ns.name())?;
    apply_yaml_text(&client, &rbac, None).await?;
    apply_yaml_text(&client, &deployment_rbac(ns.name()), None).await?;
    let token = service_account_token(&client, ns.name(), ACCOUNT).await?;

    let a = Replica::start(&format!("{}-a", ns.name()), &config, &token, ns.name())?;
    let b = Replica::start(&format!("{}-b", ns.name()), &config, &token, ns.name())?;
    let result = exercise(&client, ns.name(), a, b).await;
    if let Err(error) = &result {
        eprintln!("generated RBAC:\n{rbac}\nerror: {error:#}");
    }
    result
}

async fn exercise(client: &Client, namespace: &str, a: Replica, b: Replica) -> Result<()> {
    let leader_found = eventually("a leader", WAIT, || async {
        Ok((a.leads() || b.leads()).then_some(()))
    })
    .await;
    if let Err(error) = leader_found {
        eprintln!("a's log:\n{}\nb's log:\n{}", a.host.log(), b.host.log());
        return Err(error);
    }
    let (leader, standby) = if a.leads() { (a, b) } else { (b, a) };
    let checked = async {
        let leases = Api::<Lease>::namespaced(client.clone(), namespace);
        let lease = leases
            .get("kubewasm-leader")
            .await
            .context("the Lease in the service account's namespace")?;
        let holder = lease.spec.and_then(|s| s.holder_identity);
        ensure!(holder.is_some(), "the Lease has a holder");

        let config_maps = Api::<ConfigMap>::namespaced(client.clone(), namespace);
        mirrored(&config_maps, "first").await?;
        ensure!(!standby.leads(), "the standby leads while the leader runs");

        let (status, metrics) = http_get(&leader.metrics, "/metrics").await?;
        ensure!(status == 200, "/metrics answers {status}");
        let reconciled =
            r#"controller_runtime_reconcile_total{controller="mirror",result="success"} "#;
        let count: f64 = metrics
            .lines()
            .find_map(|line| line.strip_prefix(reconciled))
            .context("the leader's /metrics counts the mirror's reconciles")?
            .parse()?;
        ensure!(
            count >= 1.0,
            "the leader counts {count} successful reconciles"
        );
        for (replica, path) in [
            (&leader, "/healthz"),
            (&leader, "/readyz"),
            (&standby, "/healthz"),
        ] {
            let (status, body) = http_get(&replica.probes, path).await?;
            ensure!(status == 200, "{path} answers {status}: {body}");
        }
        anyhow::Ok(config_maps)
    }
    .await;
    let config_maps = match checked {
        Ok(config_maps) => config_maps,
        Err(error) => {
            eprintln!("leader's log:\n{}", leader.host.log());
            return Err(error);
        }
    };

    drop(leader);
    let took_over = async {
        eventually("the standby to take over", WAIT, || async {
            Ok(standby.leads().then_some(()))
        })
        .await?;
        mirrored(&config_maps, "second").await
    }
    .await;
    if let Err(error) = took_over {
        eprintln!("standby's log:\n{}", standby.host.log());
        return Err(error);
    }
    ensure!(
        standby.host.stop()?,
        "the new leader exits cleanly on SIGTERM"
    );
    Ok(())
}

#[tokio::test]
async fn a_missing_grant_is_reported_and_the_host_recovers_once_granted() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("unbound").await?;
    let config = module_config("mirror", ns.name());
    let token = service_account_token(&client, ns.name(), ACCOUNT).await?;
    let [probes] = free_ports()?.map(|port| format!("127.0.0.1:{port}"));
    let host = HostProcess::start_in_cluster(
        ns.name(),
        &config,
        &["--health-probe-bind-address", &probes],
        &token,
        ns.name(),
    )?;
    let result = async {
        eventually("the host to report the missing grant", WAIT, || async {
            let log = host.log();
            Ok((log.contains("may not list and watch this kind")
                && log.contains(r#"cannot list resource "configmaps""#))
            .then_some(()))
        })
        .await?;
        let (status, body) = http_get(&probes, "/readyz").await?;
        ensure!(
            status == 503,
            "/readyz answers {status} while the cache cannot list: {body}"
        );

        let rbac = generated_rbac(&config, ns.name())?;
        apply_yaml_text(&client, &rbac, None).await?;
        apply_yaml_text(&client, &deployment_rbac(ns.name()), None).await?;
        let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
        mirrored(&config_maps, "granted").await?;
        let (status, body) = http_get(&probes, "/readyz").await?;
        ensure!(
            status == 200,
            "/readyz answers {status} once granted: {body}"
        );
        anyhow::Ok(())
    }
    .await;
    if let Err(error) = result {
        eprintln!("host's log:\n{}", host.log());
        return Err(error);
    }
    ensure!(host.stop()?, "the host exits cleanly on SIGTERM");
    Ok(())
}
