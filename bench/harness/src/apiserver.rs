//! What the API server reports about itself: its version, and how many writes it has served.

use anyhow::Result;
use kube::Client;

/// How many mutating requests on ConfigMaps the API server has served since it started, from
/// `apiserver_request_total` on its `/metrics` endpoint.
pub async fn configmap_writes(client: &Client) -> Result<u64> {
    let writes = kubewasm_tests::prometheus::apiserver_writes(client, &["configmaps"]).await?;
    Ok(writes[0])
}

/// The API server's `gitVersion`.
pub async fn version(client: &Client) -> Result<String> {
    Ok(client.apiserver_version().await?.git_version)
}
