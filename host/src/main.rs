//! The `kubewasm` binary.

use std::fmt::Display;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kubewasm::cli::{Cli, Command, LogFormat};
use kubewasm::compile_cache::CompileCache;
use kubewasm::config::Config;
use kubewasm::dispatch::Entry;
use kubewasm::host::{Host, HostError};
use kubewasm::leader::{self, ElectionConfig, LeaderElector, LeaderError, Leadership};
use kubewasm::runtime::Runtime;
use kubewasm::serve::{self, Started};
use kubewasm::{check, render, scaffold};
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

/// `run` reports errors through anyhow; the guest author's commands print `error: ...` and exit
/// with 1.
#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run {
            config,
            kubeconfig,
            compile_cache_dir,
            no_compile_cache,
            no_reload,
            metrics_bind_address,
            health_probe_bind_address,
            leader_elect,
            leader_election_namespace,
            leader_election_id,
        } => {
            init_logs(cli.log_format);
            let config = Config::load(&config)?;
            let servers = serve::bind(metrics_bind_address.0, health_probe_bind_address.0).await?;
            let started = Started::default();
            let shutdown = CancellationToken::new();
            for server in servers {
                let address = server.local_addr()?;
                tracing::info!(%address, paths = %server.endpoints(), "serving HTTP");
                tokio::spawn(server.run(started.clone(), shutdown.clone()));
            }
            tokio::spawn(stop_on_signal(shutdown.clone()));
            let client = client(kubeconfig.as_deref()).await?;
            let leadership = if leader_elect {
                let namespace = leader_election_namespace.unwrap_or_else(leader::default_namespace);
                let election = ElectionConfig::new(namespace, leader_election_id);
                started.set_standby(true);
                let leadership =
                    lead(LeaderElector::new(client.clone(), election), &shutdown).await?;
                started.set_standby(false);
                match leadership {
                    Some(leadership) => Some(leadership),
                    None => return Ok(ExitCode::SUCCESS),
                }
            } else {
                None
            };
            let mut runtime = Runtime::new()?;
            if !no_compile_cache
                && let Some(dir) = compile_cache_dir.or_else(CompileCache::default_dir)
            {
                runtime = runtime.with_compile_cache(dir);
            }
            let host = Host::start(&config, client, runtime, !no_reload);
            return run_host(host, started, shutdown, leadership).await;
        }
        Command::Check { module, config } => {
            init_debug_logs();
            let report = match check::check(&module, config.as_deref()).await {
                Ok(report) => report,
                Err(error) => return Ok(fail(error)),
            };
            print!("{report}");
            if let Some(entry) = report.entry.filter(|_| !report.missing.is_empty()) {
                return Ok(fail(format!(
                    "the grants of modules[{}] in {} do not give {} what it needs (see missing)",
                    entry.index,
                    entry.config.display(),
                    module.display()
                )));
            }
        }
        Command::Render {
            module,
            object,
            cache,
            finalize,
        } => {
            init_debug_logs();
            let entry = if finalize {
                Entry::Finalize
            } else {
                Entry::Reconcile
            };
            match render::render_files(&module, &object, &cache, entry).await {
                Ok(rendered) => print!("{}", rendered.to_yaml()),
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

/// Waits until this process leads; `None` when shutdown came first.
async fn lead(
    elector: LeaderElector,
    shutdown: &CancellationToken,
) -> anyhow::Result<Option<Leadership>> {
    let election = elector.config();
    tracing::info!(
        identity = %election.identity,
        lease = %format_args!("{}/{}", election.namespace, election.name),
        "waiting for leadership"
    );
    match elector.run_until_leading(shutdown).await {
        Ok(leadership) => {
            tracing::info!(identity = %elector.config().identity, "became leader");
            Ok(Some(leadership))
        }
        Err(LeaderError::Cancelled) => {
            tracing::info!("stopped before becoming leader");
            Ok(None)
        }
        Err(error) => Err(error.into()),
    }
}

/// Starts the host and runs it until shutdown, then releases `leadership`. When leadership is
/// lost first, stops reconciling at once and fails, so that the process is restarted as a
/// standby.
async fn run_host(
    host: impl Future<Output = Result<Host, HostError>>,
    started: Started,
    shutdown: CancellationToken,
    leadership: Option<Leadership>,
) -> anyhow::Result<ExitCode> {
    let run = async {
        let host = host.await?;
        started.set(host.observer());
        host.run(shutdown.clone()).await;
        anyhow::Ok(())
    };
    let Some(leadership) = leadership else {
        run.await?;
        return Ok(ExitCode::SUCCESS);
    };
    let ran = tokio::select! {
        ran = run => Some(ran),
        () = leadership.lost() => None,
    };
    let Some(ran) = ran else {
        shutdown.cancel();
        tracing::error!("leadership lost: the Lease was not renewed within the renew deadline");
        return Ok(ExitCode::FAILURE);
    };
    match leadership.release().await {
        Ok(()) => tracing::info!("released the Lease"),
        Err(error) => tracing::warn!(%error, "releasing the Lease"),
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

async fn client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig and not running in a cluster")?,
    };
    Ok(kube::Client::try_from(config)?)
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
