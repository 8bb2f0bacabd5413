//! The `kubewasm` binary.

use std::fmt::Display;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kubewasm::cluster::gate::Gate;
use kubewasm::cluster::leader::{self, ElectionConfig, LeaderElector, LeaderError, Leadership};
use kubewasm::cluster::retry_after;
use kubewasm::cmd::cli::{Cli, Command, LogFormat};
use kubewasm::cmd::source::ModuleSource;
use kubewasm::cmd::{check, push, rbac, render, scaffold};
use kubewasm::config::Config;
use kubewasm::control::queue::Lanes;
use kubewasm::control::replica::Replica;
use kubewasm::manage::host::{Host, HostError};
use kubewasm::serve::http::{self as serve, Started};
use kubewasm::shard::membership;
use kubewasm::shard::sharder::Sharded;
use kubewasm::wasm::compile_cache::CompileCache;
use kubewasm::wasm::dispatch::Entry;
use kubewasm::wasm::module_store::ModuleStore;
use kubewasm::wasm::runtime::Runtime;
use oci_client::secrets::RegistryAuth;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

/// `run` reports errors through anyhow; the guest author's commands print `error: ...` and exit
/// with 1.
#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => {
            init_logs(cli.log_format);
            let config = Config::load(&args.config)?;
            let manager = args
                .manager(&config.manager)
                .map_err(|e| anyhow::anyhow!("leader election: {e}"))?;
            let servers = serve::bind(
                manager.metrics_bind_address,
                manager.health_probe_bind_address,
            )
            .await?;
            let started = Started::default();
            let shutdown = CancellationToken::new();
            for server in servers {
                let address = server.local_addr()?;
                tracing::info!(%address, paths = %server.endpoints(), "serving HTTP");
                tokio::spawn(server.run(started.clone(), shutdown.clone()));
            }
            tokio::spawn(stop_on_signal(shutdown.clone()));
            let client = client(args.kubeconfig.as_deref()).await?;
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
                let sharded = Sharded {
                    member,
                    members: membership::watch(client.clone(), &namespace, &ring),
                    sharding: leading.clone(),
                };
                let replica = Replica {
                    gate: Gate::closed(),
                    sharded: Some(sharded),
                    lanes: Lanes::of_host(),
                };
                (replica, Some(joining))
            } else {
                let replica = Replica {
                    gate: leading.clone(),
                    sharded: None,
                    lanes: Lanes::of_host(),
                };
                (replica, None)
            };
            let store = args
                .module_store_dir
                .or_else(ModuleStore::default_dir)
                .map_or_else(ModuleStore::none, ModuleStore::new)
                .with_max_bytes(args.module_store_size);
            let mut runtime = Runtime::new()?;
            if !args.no_compile_cache
                && let Some(dir) = args.compile_cache_dir.or_else(CompileCache::default_dir)
            {
                runtime = runtime
                    .with_compile_cache(dir)
                    .with_compile_cache_bound(args.compile_cache_size, store.named());
            }
            let workers = replica.gate.clone();
            let host = Host::start(
                &config,
                client,
                runtime,
                store,
                !args.no_reload,
                replica,
                leading.clone(),
            );
            let roles = Roles {
                elector,
                leading,
                member,
                workers,
            };
            return run_host(host, started, shutdown, roles).await;
        }
        Command::Check {
            module,
            config,
            registries,
        } => {
            init_debug_logs();
            let source = ModuleSource::parse(&module);
            let report = match check::check(&source, config.as_deref(), registries.settings()).await
            {
                Ok(report) => report,
                Err(error) => return Ok(fail(error)),
            };
            print!("{report}");
            if let Some(entry) = report.entry.filter(|_| !report.missing.is_empty()) {
                return Ok(fail(format!(
                    "the grants of modules[{}] in {} do not give {} what it needs (see missing)",
                    entry.index,
                    entry.config.display(),
                    report.module
                )));
            }
        }
        Command::Render {
            module,
            object,
            cache,
            finalize,
            registries,
        } => {
            init_debug_logs();
            let entry = if finalize {
                Entry::Finalize
            } else {
                Entry::Reconcile
            };
            let source = ModuleSource::parse(&module);
            match render::render_files(&source, &object, &cache, entry, registries.settings()).await
            {
                Ok(rendered) => print!("{}", rendered.to_yaml()),
                Err(error) => return Ok(fail(error)),
            }
        }
        Command::Rbac {
            config,
            modules,
            name,
            service_account: (service_account_namespace, service_account),
            sharded,
        } => {
            init_debug_logs();
            let target = rbac::Target {
                name,
                service_account_namespace,
                service_account,
            };
            match rbac::for_config(&config, &modules, &target, sharded).await {
                Ok(rbac) => print!("{}", rbac.to_yaml()),
                Err(error) => return Ok(fail(error)),
            }
        }
        Command::Push {
            module,
            reference,
            username,
            registries,
        } => {
            init_debug_logs();
            let auth = match username {
                Some(username) => {
                    let mut password = String::new();
                    std::io::stdin()
                        .read_line(&mut password)
                        .context("reading the password from standard input")?;
                    let password = password.trim_end_matches(['\r', '\n']).to_owned();
                    Some(RegistryAuth::Basic(username, password))
                }
                None => None,
            };
            match push::push(&module, &reference, auth, registries.settings()).await {
                Ok(pinned) => println!("{pinned}"),
                Err(error) => return Ok(fail(error)),
            }
        }
        Command::New { name, dir, sdk } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            let sdk = sdk.unwrap_or_else(scaffold::default_sdk);
            let files = match scaffold::create(&name, &dir, &sdk) {
                Ok(files) => files,
                Err(error) => return Ok(fail(error)),
            };
            println!("created the Rust guest crate {name} in {}:", dir.display());
            for file in files {
                println!("  {}", file.display());
            }
            println!(
                "next: cd {} && cargo test && cargo build --release --target wasm32-wasip2",
                dir.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Waits until this process holds the Lease of `elector` (`what` it is for: leadership or
/// membership); `None` when shutdown came first.
async fn acquire(
    elector: &LeaderElector,
    what: &str,
    shutdown: &CancellationToken,
) -> anyhow::Result<Option<Leadership>> {
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
        Err(error) => Err(error.into()),
    }
}

/// The Leases a replica holds and the gates they open.
struct Roles {
    /// The leader election, if any.
    elector: Option<LeaderElector>,
    /// Opens once this process leads.
    leading: Gate,
    /// When sharded, the membership Lease's election.
    member: Option<LeaderElector>,
    /// Opens once this process may reconcile.
    workers: Gate,
}

/// Resolves once `held` is lost; never without it.
async fn lost(held: Option<&Leadership>) {
    match held {
        Some(held) => held.lost().await,
        None => std::future::pending().await,
    }
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
    let run = async {
        let host = host.await?;
        let observer = host.observer();
        started.set(observer.clone());
        let warmed = warm.clone();
        tokio::spawn(async move {
            while !observer.informers().iter().all(|i| i.is_synced()) {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            warmed.let_through();
        });
        host.run(shutdown.clone()).await;
        anyhow::Ok(())
    };
    let mut run = std::pin::pin!(run);
    let mut membership = None;
    if let Some(joining) = &roles.member {
        // A member takes keys only once warm: the sharder gives it its share at once.
        let join = async {
            warm.opened().await;
            acquire(joining, "membership", &shutdown).await
        };
        let joined = tokio::select! {
            ran = &mut run => {
                ran?;
                return Ok(ExitCode::SUCCESS);
            }
            joined = join => joined?,
        };
        let Some(joined) = joined else {
            run.await?;
            return Ok(ExitCode::SUCCESS);
        };
        tracing::info!(member = %joining.config().identity, "joined the shard ring");
        roles.workers.let_through();
        membership = Some(joined);
    }
    let mut leadership = None;
    let ran = match &roles.elector {
        None => Ok(run.await),
        Some(elector) => {
            started.set_election(&elector.config().name, roles.leading.clone());
            let election = acquire(elector, "leadership", &shutdown);
            let mut election = std::pin::pin!(election);
            let mut electing = true;
            loop {
                tokio::select! {
                    ran = &mut run => break Ok(ran),
                    led = &mut election, if electing => {
                        electing = false;
                        if let Some(led) = led? {
                            tracing::info!(identity = %elector.config().identity, "became leader");
                            roles.leading.let_through();
                            leadership = Some(led);
                        }
                    }
                    () = lost(leadership.as_ref()) => break Err("leadership"),
                    () = lost(membership.as_ref()) => break Err("membership"),
                }
            }
        }
    };
    let ran = match ran {
        Ok(ran) => ran,
        Err(what) => {
            shutdown.cancel();
            tracing::error!("{what} lost: stopped reconciling");
            return Ok(ExitCode::FAILURE);
        }
    };
    for (held, what) in [(leadership, "leader"), (membership, "membership")] {
        if let Some(held) = held {
            match held.release().await {
                Ok(()) => tracing::info!("released the {what} Lease"),
                Err(error) => tracing::warn!(%error, "releasing the {what} Lease"),
            }
        }
    }
    ran?;
    Ok(ExitCode::SUCCESS)
}

fn fail(error: impl Display) -> ExitCode {
    eprintln!("error: {error}");
    ExitCode::FAILURE
}

/// The host's logs, on stdout.
fn init_logs(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    match format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(std::io::stdout().is_terminal())
            .init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .init(),
    }
}

/// Logs on stderr, only when `RUST_LOG` asks for them: stdout is the command's output.
fn init_debug_logs() {
    if let Ok(filter) = EnvFilter::try_from_default_env() {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
}

/// The API client, configured as controller-runtime's: `--kubeconfig`, else $KUBECONFIG, else
/// the in-cluster service account, else ~/.kube/config. The client sends each request once:
/// the host decides what is sent again and until when (`control::apply::resend`, the informers'
/// backoff), so a write refused with 429 is never sent after the guest call it was made for; a
/// plain-text 429's `Retry-After` reaches it (see [`retry_after`]).
async fn client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Client> {
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

async fn stop_on_signal(shutdown: CancellationToken) {
    let mut terminate = signal(SignalKind::terminate()).expect("installing the SIGTERM handler");
    let mut interrupt = signal(SignalKind::interrupt()).expect("installing the SIGINT handler");
    tokio::select! {
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
    shutdown.cancel();
}
