//! The host: loads the configured modules, starts one controller per module on shared
//! informers, and on shutdown stops taking keys and lets reconciles in flight finish.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, ModuleConfig};
use crate::controller::{Controller, Settings};
use crate::module::{self, LoadError};
use crate::permissions::{self, Permissions, Requirement};
use crate::queue::QueueConfig;
use crate::runtime::{Limits, Runtime, RuntimeError};
use crate::watch::{Informers, Resources};

/// Why the host could not start.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The WebAssembly runtime could not be created.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A configured module could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A module's declaration needs more than its grants allow.
    #[error(
        "{}: module {guest:?} needs permissions its grants do not give:\n  {}",
        path.display(),
        missing.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  ")
    )]
    NotGranted {
        /// The guest.
        guest: String,
        /// The module's path.
        path: std::path::PathBuf,
        /// What is missing.
        missing: Vec<Requirement>,
    },
    /// Two modules declare the same controller name.
    #[error("two modules are named {0:?}; set `name` in the configuration to tell them apart")]
    DuplicateName(String),
}

/// The running host.
pub struct Host {
    controllers: Vec<Arc<Controller>>,
    informers: Arc<Informers>,
    workers: JoinSet<()>,
}

impl Host {
    /// Loads every module of `config` and starts its controller. Fails without starting
    /// anything if one module is invalid.
    pub async fn start(config: &Config, client: Client) -> Result<Self, HostError> {
        let runtime = Runtime::new()?;
        let resources = Arc::new(Resources::new(client));
        let informers = Arc::new(Informers::new(resources.clone()));
        let queue = config.queue;
        let mut loaded = Vec::new();
        for module_config in &config.modules {
            let limits = limits(module_config);
            let module = module::load(&runtime, &module_config.path, &limits).await?;
            let settings = settings(module_config, &module.metadata, limits, queue);
            let needed = permissions::required(&module.metadata, &settings.namespaces);
            let missing = Permissions::new(settings.grants.clone()).missing(&needed);
            if !missing.is_empty() {
                return Err(HostError::NotGranted {
                    guest: settings.name,
                    path: module_config.path.clone(),
                    missing,
                });
            }
            if loaded
                .iter()
                .any(|(s, _): &(Settings, _)| s.name == settings.name)
            {
                return Err(HostError::DuplicateName(settings.name));
            }
            tracing::info!(guest = %settings.name, path = %module_config.path.display(), digest = %module.digest, "module loaded");
            loaded.push((settings, module));
        }
        let mut workers = JoinSet::new();
        let controllers = loaded
            .into_iter()
            .map(|(settings, module)| {
                Controller::start(
                    runtime.clone(),
                    resources.clone(),
                    &informers,
                    module,
                    settings,
                    &mut workers,
                )
            })
            .collect();
        Ok(Self {
            controllers,
            informers,
            workers,
        })
    }

    /// The running controllers.
    pub fn controllers(&self) -> &[Arc<Controller>] {
        &self.controllers
    }

    /// Whether every informer has completed its first list.
    pub fn is_synced(&self) -> bool {
        self.informers.running().iter().all(|i| i.is_synced())
    }

    /// Runs until `shutdown` is cancelled, then drains: no new key is taken, reconciles in
    /// flight finish (each is bounded by its deadline).
    pub async fn run(mut self, shutdown: CancellationToken) {
        shutdown.cancelled().await;
        tracing::info!("shutting down: finishing reconciles in flight");
        for controller in &self.controllers {
            controller.shut_down().await;
        }
        self.workers.abort_all();
        while self.workers.join_next().await.is_some() {}
        tracing::info!("stopped");
    }
}

fn limits(config: &ModuleConfig) -> Limits {
    Limits {
        timeout: config.limits.timeout,
        memory_bytes: usize::try_from(config.limits.memory_bytes).unwrap_or(usize::MAX),
        host_call_timeout: config.limits.host_call_timeout,
    }
}

fn settings(
    config: &ModuleConfig,
    metadata: &module::Metadata,
    limits: Limits,
    queue: QueueConfig,
) -> Settings {
    Settings {
        name: config.name.clone().unwrap_or_else(|| metadata.name.clone()),
        max_concurrency: config.max_concurrency.unwrap_or(metadata.max_concurrency),
        resync: config
            .resync_seconds
            .map(|s| Duration::from_secs(s.into()))
            .or(metadata.resync),
        namespaces: config.namespaces.clone(),
        limits,
        queue,
        grants: config.grants.clone(),
    }
}
