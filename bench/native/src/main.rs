//! `bench-native`: the benchmark's copy controller as a kube-rs [`Controller`], built from the
//! same logic crate as the kubewasm guest.
//!
//! It reconciles the source ConfigMaps of one namespace with up to `--concurrency` reconciles
//! at once, and exits 0 once SIGTERM or Ctrl+C stops it and the running reconciles finish. It
//! opens no listener and writes only errors to stderr. With `--cache KIND` it runs no controller,
//! only a reflector store of that kind (see [`cache`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bench_copy_logic::{COPY_SELECTOR, SOURCE_SELECTOR};
use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::signal::unix::{SignalKind, signal};

mod cache;
mod reconcile;

use reconcile::Context;

/// Command-line arguments.
#[derive(Parser)]
#[command(about = "The copy controller of the kubewasm benchmark, as a native kube-rs controller")]
struct Args {
    /// The kubeconfig to connect with.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// The namespace whose sources are reconciled.
    #[arg(long)]
    namespace: String,
    /// How many sources may be reconciled at the same time.
    #[arg(long, default_value_t = 4)]
    concurrency: u16,
    /// Reconcile every source again after this many seconds; 0 = only on changes.
    #[arg(long, default_value_t = 0)]
    resync_seconds: u64,
    /// Run no controller, only a reflector store of this kind in the namespace, and print
    /// `cached N` whenever the number of stored objects changes.
    #[arg(long, value_enum)]
    cache: Option<cache::Kind>,
    /// With `--cache`: drop `managedFields` before storing an object.
    #[arg(long, requires = "cache")]
    strip_managed_fields: bool,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let kubeconfig = Kubeconfig::read_from(&args.kubeconfig)?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let client = Client::try_from(config)?;
    let stopped = terminated()?;
    if let Some(kind) = args.cache {
        cache::run(
            client,
            &args.namespace,
            kind,
            args.strip_managed_fields,
            stopped,
        )
        .await?;
        return Ok(());
    }
    let api = Api::<ConfigMap>::namespaced(client, &args.namespace);
    let on_success = match args.resync_seconds {
        0 => Action::await_change(),
        seconds => Action::requeue(Duration::from_secs(seconds)),
    };
    let context = Arc::new(Context {
        api: api.clone(),
        on_success,
    });

    Controller::new(
        api.clone(),
        watcher::Config::default().labels(SOURCE_SELECTOR),
    )
    .owns(api, watcher::Config::default().labels(COPY_SELECTOR))
    .with_config(controller::Config::default().concurrency(args.concurrency))
    .graceful_shutdown_on(stopped)
    .run(reconcile::reconcile, reconcile::error_policy, context)
    .for_each(|result| async move {
        match result {
            // A child whose source is gone: nothing to do, the garbage collector removes it.
            Ok(_) | Err(controller::Error::ObjectNotFound(_)) => {}
            Err(error) => eprintln!("bench-native: {error}"),
        }
    })
    .await;
    Ok(())
}

/// Resolves once SIGTERM or Ctrl+C arrives.
fn terminated() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    })
}
