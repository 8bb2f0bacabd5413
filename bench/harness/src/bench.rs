//! What every workload shares: the plan, the control plane, the child observer and the
//! controller launcher.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use kube::Client;

use crate::cli::Plan;
use crate::cluster::ControlPlane;
use crate::controllers::{Controllers, Launcher};
use crate::load::{self, Source};
use crate::observer::{Observer, Span, poll};

/// The shared state of a run.
pub struct Bench {
    /// Sizes and windows.
    pub plan: Plan,
    /// The control plane.
    pub plane: ControlPlane,
    /// An admin client: the load generator.
    pub client: Client,
    /// The watch on every child.
    pub observer: Arc<Observer>,
    /// Starts the controllers under test.
    pub launcher: Launcher,
}

impl Bench {
    /// Creates the namespace `namespace` holding `count` sources.
    pub async fn sources(&self, namespace: &str, count: usize) -> Result<Vec<Source>> {
        load::create_namespace(&self.client, namespace).await?;
        load::create_sources(&self.client, namespace, count, self.plan.payload_bytes).await
    }

    /// Waits until every child of `sources` shows its source's data and returns when the first
    /// and the last one were seen to; fails early when a controller process exits.
    pub async fn converged(
        &self,
        namespace: &str,
        sources: &[Source],
        mut controllers: Option<&mut Controllers>,
    ) -> Result<Span> {
        // A bound for a loaded machine and a slow implementation, not an expectation.
        let timeout = Duration::from_secs(120) + Duration::from_millis(100) * sources.len() as u32;
        poll(&format!("children in {namespace}"), timeout, || {
            if let Some(controllers) = controllers.as_deref_mut() {
                controllers.check_running()?;
            }
            Ok(self.observer.converged(namespace, sources))
        })
        .await
    }
}

/// Prints the logs of controllers that did not stop cleanly.
pub fn report_unclean(unclean: &[String]) -> bool {
    for log in unclean {
        eprintln!("warning: a controller did not stop cleanly: {log}");
    }
    unclean.is_empty()
}
