//! Leader election: of two hosts sharing a Lease exactly one reconciles; when it is killed the
//! standby takes over once the Lease expires; a host stopped with SIGTERM releases the Lease; a
//! leader that reads another holder in the Lease, or finds it deleted, stops at once; a standby
//! is warm: its modules are loaded and its caches listed before it leads, and it reconciles
//! nothing until then.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client};
use kubewasm_tests::prometheus::{self, has};
use kubewasm_tests::{
    HostProcess, WAIT, control_plane, eventually, free_ports, http_get, mirrored, module_config,
};

const LEASE: &str = "mirror-leader";

#[tokio::test]
async fn one_host_leads_and_a_standby_takes_over() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("leader").await?;
    let config = module_config("mirror", ns.name());
    let args = election(ns.name());
    let a = HostProcess::start_with(&format!("{}-a", ns.name()), &config, &args)?;
    let b = HostProcess::start_with(&format!("{}-b", ns.name()), &config, &args)?;
    let leases = Api::<Lease>::namespaced(client.clone(), ns.name());

    let holder = eventually("a leader", WAIT, || async {
        let holder = lease_holder(&leases).await?;
        let logs_say = [&a, &b]
            .iter()
            .filter(|host| host.log().contains("became leader"))
            .count();
        Ok(holder.filter(|h| !h.is_empty() && logs_say > 0))
    })
    .await?;
    let (leader, standby) = if identity(&a).as_deref() == Some(holder.as_str()) {
        (a, b)
    } else {
        (b, a)
    };
    let result = exercise(&client, &leases, ns.name(), leader, &standby, &holder).await;
    match result {
        Ok(()) => {
            ensure!(standby.stop()?, "the new leader exits cleanly on SIGTERM");
            let released = holder_of(&leases).await?;
            ensure!(
                released.is_empty(),
                "the Lease is released on SIGTERM, but is held by {released:?}"
            );
            Ok(())
        }
        Err(error) => {
            eprintln!("standby's log:\n{}", standby.log());
            Err(error)
        }
    }
}

async fn exercise(
    client: &Client,
    leases: &Api<Lease>,
    namespace: &str,
    leader: HostProcess,
    standby: &HostProcess,
    holder: &str,
) -> Result<()> {
    let checked = async {
        ensure!(
            leader.log().contains("became leader"),
            "the holder {holder} logs that it became leader"
        );
        let standby_identity = identity(standby).context("the standby's identity in its log")?;
        ensure!(standby_identity != holder, "two hosts hold one identity");
        let config_maps = Api::<ConfigMap>::namespaced(client.clone(), namespace);
        mirrored(&config_maps, "first").await?;
        ensure!(
            !standby.log().contains("became leader"),
            "the standby became leader while the leader ran"
        );
        anyhow::Ok((config_maps, standby_identity))
    }
    .await;
    let (config_maps, standby_identity) = match checked {
        Ok(checked) => checked,
        Err(error) => {
            eprintln!("leader's log:\n{}", leader.log());
            return Err(error);
        }
    };

    let killed = Instant::now();
    drop(leader);
    eventually("the standby to take the Lease over", WAIT, || async {
        let holder = lease_holder(leases).await?;
        Ok((holder.as_deref() == Some(standby_identity.as_str())
            && standby.log().contains("became leader"))
        .then_some(()))
    })
    .await?;
    eprintln!(
        "the standby took over {:.1?} after the leader was killed",
        killed.elapsed()
    );
    mirrored(&config_maps, "second").await
}

/// `kubewasm run` arguments electing a leader on [`LEASE`] in `namespace`.
fn election(namespace: &str) -> [&str; 5] {
    [
        "--leader-elect",
        "--leader-election-namespace",
        namespace,
        "--leader-election-id",
        LEASE,
    ]
}

/// Starts a host that is the only candidate and waits until it leads.
async fn leading(name: &str, config: &str, args: &[&str]) -> Result<HostProcess> {
    let host = HostProcess::start_with(name, config, args)?;
    eventually("the host to lead", WAIT, || async {
        Ok(host.log().contains("became leader").then_some(()))
    })
    .await?;
    Ok(host)
}

/// The Lease's holder, if the Lease exists.
async fn lease_holder(leases: &Api<Lease>) -> Result<Option<String>> {
    Ok(leases.get_opt(LEASE).await?.map(|lease| {
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .unwrap_or_default()
    }))
}

/// The holder of the existing Lease; empty once released.
async fn holder_of(leases: &Api<Lease>) -> Result<String> {
    lease_holder(leases).await?.context("the Lease is gone")
}

/// The identity a host logged when it started waiting for leadership.
fn identity(host: &HostProcess) -> Option<String> {
    let log = host.log();
    let line = log.lines().find(|l| l.contains("waiting for leadership"))?;
    line.split_whitespace()
        .find_map(|word| word.strip_prefix("identity="))
        .map(str::to_owned)
}

#[tokio::test]
async fn a_leader_that_reads_another_holder_stops_before_its_renew_deadline() -> Result<()> {
    const RENEW_DEADLINE: Duration = Duration::from_secs(30);
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("leader-taken").await?;
    let config = module_config("mirror", ns.name());
    let renew_deadline = format!("{}s", RENEW_DEADLINE.as_secs());
    let timings = [
        "--leader-elect-lease-duration",
        "40s",
        "--leader-elect-renew-deadline",
        &renew_deadline,
        "--leader-elect-retry-period",
        "1s",
    ];
    let args = [&election(ns.name())[..], &timings].concat();
    let host = leading(ns.name(), &config, &args).await?;
    let leases = Api::<Lease>::namespaced(client.clone(), ns.name());

    // Another candidate writes itself into the Lease, as one that took over an expired Lease
    // after a network partition would.
    let mut lease = leases.get(LEASE).await?;
    let spec = lease.spec.as_mut().context("the Lease has a spec")?;
    spec.holder_identity = Some("intruder".into());
    spec.lease_duration_seconds = Some(60);
    spec.renew_time = Some(MicroTime(Timestamp::now()));
    leases
        .replace(LEASE, &PostParams::default(), &lease)
        .await?;
    let taken = Instant::now();

    let stopped = eventually("the host to stop leading", WAIT, || async {
        Ok(host
            .log()
            .contains("leadership lost")
            .then(|| taken.elapsed()))
    })
    .await?;
    ensure!(
        stopped < RENEW_DEADLINE / 2,
        "the host reconciled on for {stopped:?} after another candidate held the Lease"
    );
    ensure!(
        host.log().contains("another candidate holds the Lease"),
        "the host says why it stopped"
    );
    ensure!(
        holder_of(&leases).await? == "intruder",
        "the host never writes over a Lease another candidate holds"
    );
    eprintln!("the host stopped leading {stopped:.1?} after another candidate took the Lease");
    Ok(())
}

#[tokio::test]
async fn a_standby_is_warm_and_reconciles_nothing_until_it_leads() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("leader-warm").await?;
    let config = module_config("mirror", ns.name());
    let [leader_port, standby_port] = free_ports()?;
    let (leader_address, standby_address) = (
        format!("127.0.0.1:{leader_port}"),
        format!("127.0.0.1:{standby_port}"),
    );
    let listen = |address: &str| {
        [
            "--metrics-bind-address".to_owned(),
            address.to_owned(),
            "--health-probe-bind-address".to_owned(),
            address.to_owned(),
        ]
    };
    let with = |address: &str| {
        let mut args: Vec<String> = election(ns.name()).map(str::to_owned).to_vec();
        args.extend(listen(address));
        args
    };
    let leader_args = with(&leader_address);
    let leader_args: Vec<&str> = leader_args.iter().map(String::as_str).collect();
    let leader = leading(&format!("{}-a", ns.name()), &config, &leader_args).await?;
    let leases = Api::<Lease>::namespaced(client.clone(), ns.name());
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    mirrored(&config_maps, "first").await?;

    let standby_args = with(&standby_address);
    let standby_args: Vec<&str> = standby_args.iter().map(String::as_str).collect();
    let standby = HostProcess::start_with(&format!("{}-b", ns.name()), &config, &standby_args)?;
    let warm = eventually("the standby to be ready and warm", WAIT, || async {
        let (status, _) = match http_get(&standby_address, "/readyz").await {
            Ok(answer) => answer,
            Err(_) => return Ok(None),
        };
        let metrics = prometheus::scrape(standby_address.parse()?).await?;
        let loaded = prometheus::sum(&metrics, "kubewasm_module_loads_total", |_| true);
        let cached = prometheus::sum(&metrics, "kubewasm_cache_objects", |l| {
            has(l, "kind", "ConfigMap")
        });
        Ok((status == 200 && loaded == 1.0 && cached >= 2.0).then_some(metrics))
    })
    .await;
    let checked = async {
        let metrics = warm?;
        let lead = |m: &str| prometheus::sum(m, "leader_election_master_status", |_| true);
        ensure!(lead(&metrics) == 0.0, "the standby reports that it leads");
        let leader_metrics = prometheus::scrape(leader_address.parse()?).await?;
        ensure!(
            lead(&leader_metrics) == 1.0,
            "the leader reports that it leads"
        );
        // A change while the standby is warm: the leader mirrors it, the standby queues it.
        mirrored(&config_maps, "second").await?;
        let metrics = prometheus::scrape(standby_address.parse()?).await?;
        let reconciled = prometheus::sum(&metrics, "controller_runtime_reconcile_total", |_| true);
        ensure!(
            reconciled == 0.0,
            "the standby reconciled {reconciled} times"
        );
        let queued = prometheus::sum(&metrics, "workqueue_depth", |_| true);
        ensure!(
            queued >= 2.0,
            "the standby queued {queued} keys, not every source"
        );
        ensure!(
            !standby.log().contains("became leader"),
            "the standby became leader while the leader ran"
        );
        anyhow::Ok(())
    }
    .await;
    if let Err(error) = checked {
        eprintln!("leader's log:\n{}", leader.log());
        eprintln!("standby's log:\n{}", standby.log());
        return Err(error);
    }

    ensure!(leader.stop()?, "the leader exits cleanly on SIGTERM");
    let took_over = async {
        mirrored(&config_maps, "third").await?;
        let log = standby.log();
        let (before, after) = log
            .split_once("became leader")
            .context("the standby logs that it became leader")?;
        ensure!(
            before.contains("module loaded") && !after.contains("module loaded"),
            "the standby loaded its module before it led, not after"
        );
        let holder = holder_of(&leases).await?;
        ensure!(
            identity(&standby).as_deref() == Some(holder.as_str()),
            "the standby holds the Lease, not {holder:?}"
        );
        anyhow::Ok(())
    }
    .await;
    if let Err(error) = took_over {
        eprintln!("standby's log:\n{}", standby.log());
        return Err(error);
    }
    ensure!(standby.stop()?, "the new leader exits cleanly on SIGTERM");
    Ok(())
}

#[tokio::test]
async fn a_leader_whose_lease_is_deleted_stops_instead_of_creating_it_again() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("leader-deleted").await?;
    let config = module_config("mirror", ns.name());
    let timings = ["--leader-elect-retry-period", "1s"];
    let args = [&election(ns.name())[..], &timings].concat();
    let host = leading(ns.name(), &config, &args).await?;
    let leases = Api::<Lease>::namespaced(client.clone(), ns.name());
    // Deleted from outside: other candidates may count the holder gone at once.
    leases.delete(LEASE, &Default::default()).await?;
    eventually("the host to stop leading", WAIT, || async {
        Ok(host.log().contains("leadership lost").then_some(()))
    })
    .await
    .inspect_err(|_| eprintln!("host log:\n{}", host.log()))?;
    let recreated = leases
        .get_opt(LEASE)
        .await?
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity);
    ensure!(
        recreated.as_deref() != identity(&host).as_deref(),
        "the host wrote itself into a Lease it had lost: {recreated:?}"
    );
    Ok(())
}
