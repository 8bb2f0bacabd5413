//! `kubewasm run`: serves the HTTP endpoints, connects to the cluster, contends for the Leases
//! the replica needs and runs the host until SIGTERM or SIGINT, then releases the Leases.
//!
//! Its errors are reported through anyhow, as the binary reports them.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::Path;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use kube::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cluster::gate::Gate;
use crate::cluster::leader::{self, ElectionConfig, LeaderElector, LeaderError, Leadership};
use crate::cluster::retry_after;
use crate::cmd::cli::{Manager, RunArgs};
use crate::config::Config;
use crate::control::queue::Lanes;
use crate::control::replica::Replica;
use crate::manage::host::{Host, HostError, Observer};
use crate::serve::http::{self as serve, Started};
use crate::shard::membership;
use crate::shard::roster::Roster;
use crate::shard::sharder::Sharded;
use crate::wasm::compile_cache::CompileCache;
use crate::wasm::module_store::ModuleStore;
use crate::wasm::runtime::{Runtime, RuntimeError};

/// Runs the host of `args`' configuration until shutdown: binds the HTTP endpoints, stops on
/// SIGTERM or SIGINT, connects to the cluster, then starts the host and runs it (see
/// [`run_host`]). Fails with exit code 1 once a Lease held is lost.
pub async fn command(args: RunArgs) -> anyhow::Result<ExitCode> {
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(signals()?, shutdown.clone()));
    let config = Config::load(&args.config)?;
    let manager = args
        .manager(&config.manager)
        .map_err(|e| anyhow::anyhow!("leader election: {e}"))?;
    let started = serve_http(&manager, &shutdown).await?;
    let client = client(args.kubeconfig.as_deref()).await?;
    let (replica, roles) = roles(&client, manager);
    let store = module_store(&args);
    let runtime = runtime(&args, &store)?;
    let host = Host::start(
        &config,
        client,
        runtime,
        store,
        !args.no_reload,
        replica,
        roles.leading.clone(),
    );
    run_host(host, started, shutdown, roles).await
}

/// Binds the metrics and probe addresses of `manager` and serves each until `shutdown`; the
/// endpoints learn of the host through the returned [`Started`].
async fn serve_http(manager: &Manager, shutdown: &CancellationToken) -> anyhow::Result<Started> {
    let servers = serve::bind(
        manager.metrics_bind_address,
        manager.health_probe_bind_address,
    )
    .await?;
    let started = Started::default();
    for server in servers {
        let address = server.local_addr()?;
        tracing::info!(%address, paths = %server.endpoints(), "serving HTTP");
        tokio::spawn(server.run(started.clone(), shutdown.clone()));
    }
    Ok(started)
}

/// The Leases a replica holds and the gates they open.
struct Roles {
    /// The leader election, if any.
    elector: Option<LeaderElector>,
    /// Opens once this process leads.
    leading: Gate,
    /// When sharded, the membership Lease's election and the guests announced on it.
    member: Option<(LeaderElector, Arc<Roster>)>,
    /// Opens once this process may reconcile.
    workers: Gate,
}

/// The replica the host runs as and the Leases it contends for, as `manager` sets them: with
/// leader election, leading opens only once elected; when sharded, the workers' gate opens only
/// once a member of the ring, else with leading.
fn roles(client: &kube::Client, manager: Manager) -> (Replica, Roles) {
    let namespace = manager
        .leader_election_namespace
        .unwrap_or_else(leader::default_namespace);
    let ring = manager.leader_election_id;
    let elector = manager.leader_elect.then(|| {
        let election = ElectionConfig::new(&namespace, &ring, manager.lease);
        LeaderElector::new(client.clone(), election)
    });
    let leading = if elector.is_some() {
        Gate::closed()
    } else {
        Gate::open()
    };
    let (replica, member) = if manager.sharded {
        let member = membership::member_name();
        let election = membership::election(&namespace, &ring, &member, manager.lease);
        let joining = LeaderElector::new(client.clone(), election);
        let roster = Arc::new(Roster::default());
        tokio::spawn({
            let (leading, roster) = (leading.clone(), roster.clone());
            async move {
                leading.opened().await;
                roster.set_leads(true);
            }
        });
        let sharded = Sharded {
            member,
            members: membership::watch(client.clone(), &namespace, &ring),
            roster: roster.clone(),
            leases: Api::namespaced(client.clone(), &namespace),
            ring: ring.clone(),
        };
        let replica = Replica {
            gate: Gate::closed(),
            sharded: Some(sharded),
            lanes: Lanes::new(manager.cpus),
        };
        (replica, Some((joining, roster)))
    } else {
        let replica = Replica {
            gate: leading.clone(),
            sharded: None,
            lanes: Lanes::new(manager.cpus),
        };
        (replica, None)
    };
    let workers = replica.gate.clone();
    let roles = Roles {
        elector,
        leading,
        member,
        workers,
    };
    (replica, roles)
}

/// The module store: `--module-store-dir`, else the default folder, else none.
fn module_store(args: &RunArgs) -> ModuleStore {
    args.module_store_dir
        .clone()
        .or_else(ModuleStore::default_dir)
        .map_or_else(ModuleStore::none, ModuleStore::new)
        .with_max_bytes(args.module_store_size)
}

/// The runtime, with its compile cache (`--compile-cache-dir`, else the default folder, bounded
/// alongside `store`) unless `--no-compile-cache`.
fn runtime(args: &RunArgs, store: &ModuleStore) -> Result<Runtime, RuntimeError> {
    let mut runtime = Runtime::new()?;
    if !args.no_compile_cache
        && let Some(dir) = args
            .compile_cache_dir
            .clone()
            .or_else(CompileCache::default_dir)
    {
        runtime = runtime
            .with_compile_cache(dir)
            .with_compile_cache_bound(args.compile_cache_size, store.named());
    }
    Ok(runtime)
}

/// Starts the host and runs it until shutdown. With an elector, the host starts as a warm
/// standby (informers listing, modules loading) while it waits for leadership, and the leading
/// gate opens once it leads. When sharded, the membership Lease is taken once the modules are
/// loaded and every informer has listed, and the workers' gate opens then, while leadership
/// (the sharder's) is contested alongside. On shutdown the Leases are released after the
/// reconciles in flight end. When a Lease is lost, stops reconciling at once and fails, so
/// that the process is restarted.
async fn run_host(
    host: impl Future<Output = Result<Host, HostError>>,
    started: Started,
    shutdown: CancellationToken,
    roles: Roles,
) -> anyhow::Result<ExitCode> {
    // Opens once the modules are loaded and every informer has listed.
    let warm = Gate::closed();
    let run = run_warm(host, &started, &warm, &shutdown);
    let mut run = std::pin::pin!(run);
    let (mut membership, mut publisher) = (None, None);
    if let Some(member) = &roles.member {
        match join(run.as_mut(), member, &warm, &roles.workers, &shutdown).await? {
            ControlFlow::Break(()) => return Ok(ExitCode::SUCCESS),
            ControlFlow::Continue((joined, publishing)) => {
                (membership, publisher) = (Some(joined), Some(publishing));
            }
        }
    }
    let (ended, leadership) = match &roles.elector {
        None => (Ok(run.await), None),
        Some(elector) => {
            let held = membership.as_ref();
            lead(run, elector, &started, &roles.leading, held, &shutdown).await?
        }
    };
    let ran = match ended {
        Ok(ran) => ran,
        Err(what) => {
            shutdown.cancel();
            tracing::error!("{what} lost: stopped reconciling");
            return Ok(ExitCode::FAILURE);
        }
    };
    // The controllers have stopped: the member names on its Lease the children of the keys it
    // held, for the sharder to wait for as it moves them, once no announcement is in flight.
    if let Some(publisher) = publisher {
        stop_publishing(publisher).await;
    }
    let left = (roles.member.as_ref()).map(|(_, roster)| roster.left(None));
    let membership = membership.map(|held| (held, left.unwrap_or_default()));
    release(leadership, membership).await;
    ran?;
    Ok(ExitCode::SUCCESS)
}

/// Awaits the host, reports it to the HTTP endpoints, opens `warm` once every informer has
/// listed, and runs the host until `shutdown`.
async fn run_warm(
    host: impl Future<Output = Result<Host, HostError>>,
    started: &Started,
    warm: &Gate,
    shutdown: &CancellationToken,
) -> Result<(), HostError> {
    let host = host.await?;
    let observer = host.observer();
    started.set(observer.clone());
    tokio::spawn(open_once_listed(observer, warm.clone()));
    host.run(shutdown.clone()).await;
    Ok(())
}

/// Opens `warm` once every informer of the host has listed.
async fn open_once_listed(observer: Observer, warm: Gate) {
    while !observer.informers().iter().all(|i| i.is_synced()) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    warm.let_through();
}

/// Takes the membership Lease of `joining` once `warm` opens (a member takes keys only once
/// warm: the sharder gives it its share at once), then opens `workers` and announces on the
/// Lease the guests `roster` holds until shutdown. Breaks, with the host run to its end, when
/// the host ends first or shutdown comes before membership.
async fn join<F>(
    mut run: Pin<&mut F>,
    (joining, roster): &(LeaderElector, Arc<Roster>),
    warm: &Gate,
    workers: &Gate,
    shutdown: &CancellationToken,
) -> anyhow::Result<ControlFlow<(), (Leadership, JoinHandle<()>)>>
where
    F: Future<Output = Result<(), HostError>>,
{
    let join = async {
        warm.opened().await;
        acquire(joining, "membership", shutdown).await
    };
    let joined = tokio::select! {
        ran = &mut run => {
            ran?;
            return Ok(ControlFlow::Break(()));
        }
        joined = join => joined?,
    };
    let Some(joined) = joined else {
        run.await?;
        return Ok(ControlFlow::Break(()));
    };
    tracing::info!(member = %joining.config().identity, "joined the shard ring");
    let election = joining.config();
    let leases = Api::namespaced(joining.client(), &election.namespace);
    let publish = roster
        .clone()
        .publish(leases, election.name.clone(), shutdown.clone());
    let publisher = tokio::spawn(publish);
    workers.let_through();
    Ok(ControlFlow::Continue((joined, publisher)))
}

/// How the host's run ended, or the name of the Lease (leadership or membership) lost first.
type Ended = Result<Result<(), HostError>, &'static str>;

/// Runs the host while contending for the leadership of `elector`, and opens `leading` once
/// this process leads; ends with the host, or as soon as the leadership or `membership` is
/// lost. Returns how it ended with the leadership held, if any.
async fn lead<F>(
    mut run: Pin<&mut F>,
    elector: &LeaderElector,
    started: &Started,
    leading: &Gate,
    membership: Option<&Leadership>,
    shutdown: &CancellationToken,
) -> anyhow::Result<(Ended, Option<Leadership>)>
where
    F: Future<Output = Result<(), HostError>>,
{
    started.set_election(&elector.config().name, leading.clone());
    let election = acquire(elector, "leadership", shutdown);
    let mut election = std::pin::pin!(election);
    let mut electing = true;
    let mut leadership = None;
    loop {
        tokio::select! {
            ran = &mut run => break Ok((Ok(ran), leadership)),
            led = &mut election, if electing => {
                electing = false;
                if let Some(led) = led? {
                    tracing::info!(identity = %elector.config().identity, "became leader");
                    leading.let_through();
                    leadership = Some(led);
                }
            }
            () = lost(leadership.as_ref()) => break Ok((Err("leadership"), leadership)),
            () = lost(membership) => break Ok((Err("membership"), leadership)),
        }
    }
}

/// Waits for the announcements' publisher, stopped by shutdown, to end its last write (a few
/// seconds at most, then it is aborted), so that no write of it lands over the release.
async fn stop_publishing(publisher: JoinHandle<()>) {
    let abort = publisher.abort_handle();
    if tokio::time::timeout(Duration::from_secs(5), publisher)
        .await
        .is_err()
    {
        abort.abort();
    }
}

/// Releases the Leases held, leadership first, the membership Lease with its annotations,
/// logging how each went.
async fn release(
    leadership: Option<Leadership>,
    membership: Option<(Leadership, BTreeMap<String, String>)>,
) {
    let leadership = leadership.map(|held| (held, BTreeMap::new()));
    for (held, what) in [(leadership, "leader"), (membership, "membership")] {
        if let Some((held, annotations)) = held {
            match held.release(&annotations).await {
                Ok(()) => tracing::info!("released the {what} Lease"),
                Err(error) => tracing::warn!(%error, "releasing the {what} Lease"),
            }
        }
    }
}

/// Waits until this process holds the Lease of `elector` (`what` it is for: leadership or
/// membership); `None` when shutdown came first.
async fn acquire(
    elector: &LeaderElector,
    what: &str,
    shutdown: &CancellationToken,
) -> Result<Option<Leadership>, LeaderError> {
    let election = elector.config();
    tracing::info!(
        identity = %election.identity,
        lease = %format_args!("{}/{}", election.namespace, election.name),
        "waiting for {what}"
    );
    match elector.run_until_leading(shutdown).await {
        Ok(held) => Ok(Some(held)),
        Err(LeaderError::Cancelled) => {
            tracing::info!("stopped before {what} was held");
            Ok(None)
        }
        Err(error) => Err(error),
    }
}

/// Resolves once `held` is lost; never without it.
async fn lost(held: Option<&Leadership>) {
    match held {
        Some(held) => held.lost().await,
        None => std::future::pending().await,
    }
}

/// The API client, configured as controller-runtime's: `--kubeconfig`, else $KUBECONFIG, else
/// the in-cluster service account, else ~/.kube/config. The client sends each request once:
/// the host decides what is sent again and until when (`control::apply::resend`, the informers'
/// backoff), so a write refused with 429 is never sent after the guest call it was made for; a
/// plain-text 429's `Retry-After` reaches it (see [`retry_after`]).
async fn client(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
    let mut config = if let Some(path) = kubeconfig {
        let kubeconfig =
            Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?
    } else if let Some(path) = std::env::var_os("KUBECONFIG").filter(|p| !p.is_empty()) {
        kube::Config::from_kubeconfig(&KubeConfigOptions::default())
            .await
            .with_context(|| format!("reading $KUBECONFIG ({})", path.display()))?
    } else if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        kube::Config::incluster().context("loading the in-cluster service account")?
    } else {
        kube::Config::infer()
            .await
            .context("no --kubeconfig, no $KUBECONFIG, not in a cluster, no ~/.kube/config")?
    };
    config.default_retry = false;
    let stack = kube::client::ClientBuilder::try_from(config)?;
    Ok(stack.with_layer(&retry_after::layer()).build())
}

/// SIGTERM's and SIGINT's handlers, installed at once: from here on either stops the host
/// cleanly, whatever step of its start it is in.
fn signals() -> anyhow::Result<(Signal, Signal)> {
    let terminate = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let interrupt = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    Ok((terminate, interrupt))
}

/// Cancels `shutdown` on the first SIGTERM or SIGINT.
async fn stop_on_signal(
    (mut terminate, mut interrupt): (Signal, Signal),
    shutdown: CancellationToken,
) {
    tokio::select! {
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
    shutdown.cancel();
}
