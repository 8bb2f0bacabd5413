//! The host's own access: what the API server lets the host's identity do, asked with
//! SelfSubjectAccessReviews. A controller object's grants are checked against it before the
//! controller runs, so that a grant never reaches beyond the host's RBAC.

use futures::future::try_join_all;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};

use crate::wasm::permissions::Requirement;

/// The part of `needs` the host's identity may not do, one requirement per resource and
/// namespace with only the verbs denied. Every verb is asked at once.
pub async fn denied(
    client: &Client,
    needs: &[Requirement],
) -> Result<Vec<Requirement>, kube::Error> {
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let asks = needs.iter().flat_map(|need| {
        let reviews = &reviews;
        need.verbs.iter().map(move |verb| {
            let (resource, subresource) = match need.resource.split_once('/') {
                Some((resource, subresource)) => (resource, Some(subresource.to_owned())),
                None => (need.resource.as_str(), None),
            };
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(ResourceAttributes {
                        group: Some(need.api_group.clone()),
                        resource: Some(resource.to_owned()),
                        subresource,
                        verb: Some(verb.as_str().to_owned()),
                        namespace: need.namespace.clone(),
                        ..ResourceAttributes::default()
                    }),
                    ..SelfSubjectAccessReviewSpec::default()
                },
                ..SelfSubjectAccessReview::default()
            };
            let reviews = reviews.clone();
            async move {
                let answer = reviews.create(&PostParams::default(), &review).await?;
                let allowed = answer.status.is_some_and(|s| s.allowed);
                Ok::<_, kube::Error>((need, *verb, allowed))
            }
        })
    });
    let answers = try_join_all(asks).await?;
    let mut denied: Vec<Requirement> = Vec::new();
    for (need, verb, allowed) in answers {
        if allowed {
            continue;
        }
        match denied.iter_mut().find(|d| {
            d.api_group == need.api_group
                && d.resource == need.resource
                && d.namespace == need.namespace
        }) {
            Some(entry) => entry.verbs.push(verb),
            None => denied.push(Requirement {
                verbs: vec![verb],
                ..need.clone()
            }),
        }
    }
    Ok(denied)
}
