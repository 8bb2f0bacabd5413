//! The sample-controller pattern as a kubewasm guest.
//!
//! A `Website` (`kubewasm.dev/v1alpha1`) becomes a ConfigMap with its `index.html`, an nginx
//! Deployment serving it and a ClusterIP Service, all server-side applied and owned by the
//! Website, so drift is corrected on every reconcile and Kubernetes' garbage collector deletes
//! them with it. Outside that owner tree, each namespace has a shared ConfigMap `website-index`
//! mapping website names to URLs; the finalizer `kubewasm.dev/website-index` gives the
//! controller the chance to remove its entry before the Website goes away. The objects are
//! built by the pure functions of [`logic`].

use kubewasm_guest::k8s_openapi::api::apps::v1::Deployment;
use kubewasm_guest::k8s_openapi::api::core::v1::{ConfigMap, Service};
use kubewasm_guest::prelude::*;
use kubewasm_guest::{apply, apply_status, cache, event, patch_merge};

pub mod logic;

use logic::Website;

/// The Website controller.
pub struct WebsiteController;

impl Controller for WebsiteController {
    fn metadata() -> Metadata {
        Metadata::new("website", logic::website_kind())
            .owns(Gvk::of::<Deployment>())
            .owns(Gvk::of::<ConfigMap>())
            .owns(Gvk::of::<Service>())
            .finalizer(logic::FINALIZER)
            .max_concurrency(4)
    }

    fn reconcile(req: Request) -> Result<Action, ReconcileError> {
        let Some(site) = req.object_as::<Website>()? else {
            // Gone: the garbage collector deletes the children, `finalize` cleaned the index.
            return Ok(Action::Done);
        };
        if site.metadata.deletion_timestamp.is_some() {
            // Our finalizer is already gone; don't add the entry back.
            return Ok(Action::Done);
        }

        if let Err(error) = apply_children(&site) {
            if error.is_already_exists() {
                // A child's name is taken by an object this Website does not control: leave it
                // alone and say so, as sample-controller's ErrResourceExists does.
                let _ = event(
                    &logic::website_kind(),
                    &req.key,
                    EventType::Warning,
                    "ErrResourceExists",
                    "Apply",
                    &error.to_string(),
                );
            }
            let failed = logic::status(&site, Some(&error.to_string()));
            // The apply error is the one worth reporting; a failing status write is secondary.
            let _ = apply_status(&logic::status_object(&site, &failed));
            return Err(error.into());
        }

        let url = site.url();
        let namespace = req.namespace();
        apply(
            &logic::index_config_map(namespace),
            ApplyOptions::not_owned(),
        )?;
        let index: Option<ConfigMap> = cache::get_resource(namespace, logic::INDEX)?;
        if logic::index_needs_entry(index.as_ref(), req.name(), &url) {
            patch_merge(
                &Gvk::of::<ConfigMap>(),
                namespace,
                logic::INDEX,
                &logic::index_entry_patch(req.name(), &url),
            )?;
        }

        apply_status(&logic::status_object(&site, &logic::status(&site, None)))?;
        Ok(Action::Done)
    }

    fn finalize(req: Request) -> Result<Action, ReconcileError> {
        // A missing index (404) means there is no entry to remove.
        patch_merge(
            &Gvk::of::<ConfigMap>(),
            req.namespace(),
            logic::INDEX,
            &logic::index_removal_patch(req.name()),
        )
        .ignore_not_found()?;
        Ok(Action::Done)
    }
}

/// Applies the ConfigMap, Deployment and Service, owned by the Website. One of the same name
/// that the Website does not control is not taken over: the apply fails with
/// [`Error::is_already_exists`].
fn apply_children(site: &Website) -> Result<(), Error> {
    apply(&logic::config_map(site), ApplyOptions::default())?;
    apply(&logic::deployment(site), ApplyOptions::default())?;
    apply(&logic::service(site), ApplyOptions::default())?;
    Ok(())
}

kubewasm_guest::export_controller!(WebsiteController);
