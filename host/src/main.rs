//! The `kubewasm` binary.

use std::io::IsTerminal;

use anyhow::Context;
use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kubewasm::cli::{Cli, Command, LogFormat};
use kubewasm::config::Config;
use kubewasm::host::Host;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    match cli.log_format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(std::io::stdout().is_terminal())
            .init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .init(),
    }
    match cli.command {
        Command::Run { config, kubeconfig } => {
            let config = Config::load(&config)?;
            let client = client(kubeconfig.as_deref()).await?;
            let host = Host::start(&config, client).await?;
            let shutdown = CancellationToken::new();
            tokio::spawn(stop_on_signal(shutdown.clone()));
            host.run(shutdown).await;
        }
    }
    Ok(())
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
