//! The operator's grants: a module that declares more than it is granted is refused at load with
//! what is missing; a call outside the grants reaches the guest as a typed `denied` error and
//! nothing else is affected.

use anyhow::{Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kubewasm_tests::{
    WAIT, apply_yaml, control_plane, eventually, guest_wasm, repo_root, run_host_to_exit, with_host,
};
use serde_json::json;

#[tokio::test]
async fn a_module_declaring_more_than_granted_is_refused_at_load() -> Result<()> {
    let plane = control_plane();
    let ns = plane.namespace("refused").await?;
    // podset reads and owns pods; the grant gives it PodSets only.
    let config = format!(
        "modules:
  - path: {}
    namespaces: [{ns}]
    grants:
      - apiGroups: [kubewasm.dev]
        resources: [podsets, podsets/status]
        verbs: ['*']
",
        guest_wasm("podset").display(),
        ns = ns.name(),
    );
    let (status, output) = run_host_to_exit("refused", &config)?;
    ensure!(!status.success(), "the host refuses to start: {output}");
    ensure!(
        output.contains("needs permissions its grants do not give")
            && output.contains(&format!(
                "get,list,watch pods (core) in namespace {}",
                ns.name()
            ))
            && output.contains("get,list,watch pods (core) in all namespaces"),
        "the error names what is missing: {output}"
    );
    Ok(())
}

#[tokio::test]
async fn a_call_outside_the_grants_is_denied_to_the_guest() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("denied").await?;
    apply_yaml(
        &client,
        &repo_root().join("examples/website/crd.yaml"),
        None,
    )
    .await?;
    // Everything the website guest needs, except writing Services.
    let config = format!(
        "modules:
  - path: {}
    namespaces: [{ns}]
    grants:
      - apiGroups: [kubewasm.dev]
        resources: [websites, websites/status]
        verbs: [get, list, watch, patch]
      - apiGroups: ['', apps]
        resources: [configmaps, deployments]
        verbs: ['*']
      - apiGroups: ['']
        resources: [services]
        verbs: [get, list, watch]
",
        guest_wasm("website").display(),
        ns = ns.name(),
    );
    with_host(ns.name(), &config, async |host| {
        let gvk = GroupVersionKind::gvk("kubewasm.dev", "v1alpha1", "Website");
        let websites: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            ns.name(),
            &ApiResource::from_gvk_with_plural(&gvk, "websites"),
        );
        let site: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kubewasm.dev/v1alpha1", "kind": "Website",
            "metadata": { "name": "walled" },
            "spec": { "content": "hi" }
        }))?;
        websites.create(&PostParams::default(), &site).await?;

        // The guest sees the denial and reports it in its status.
        eventually("a Ready=False status naming the denial", WAIT, || async {
            let site = websites.get("walled").await?;
            let denied = site.data["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| {
                    c["type"] == "Ready"
                        && c["status"] == "False"
                        && c["message"]
                            .as_str()
                            .is_some_and(|m| m.contains("denied") && m.contains("services"))
                });
            Ok(denied.then_some(()))
        })
        .await?;
        ensure!(
            host.log().contains("host call denied"),
            "the host logs the denial"
        );
        // What was granted went through; the Service was never created.
        let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
        let deployments = Api::<Deployment>::namespaced(client.clone(), ns.name());
        let services = Api::<Service>::namespaced(client.clone(), ns.name());
        ensure!(config_maps.get_opt("walled-content").await?.is_some());
        ensure!(deployments.get_opt("walled").await?.is_some());
        ensure!(services.get_opt("walled").await?.is_none());
        Ok(())
    })
    .await
}
