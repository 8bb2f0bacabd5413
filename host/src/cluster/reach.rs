//! Whether the host may list and watch a kind in every namespace, asked of the API server with
//! SelfSubjectAccessReviews and remembered for a while. It decides whether the informers of
//! many namespaces may give way to one informer of every namespace: an informer the host may not
//! run would retry a refused list for ever while its guests wait.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, GroupVersionKind, PostParams};

use crate::cluster::resources::Resources;

/// How long an answer holds: a change of the host's RBAC is seen within it.
const FRESH: Duration = Duration::from_secs(300);
/// How long a failed review counts as a refusal before it is asked again.
const FRESH_FAILURE: Duration = Duration::from_secs(10);
/// How long one review may take.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// The answer about one kind, if asked: whether allowed, and until when it holds. Held by one
/// caller at a time, so that callers asking together share one review.
type Slot = Arc<tokio::sync::Mutex<Option<(bool, Instant)>>>;

/// The host's reach over every namespace, by kind.
pub struct Reach {
    resources: Arc<Resources>,
    answers: Mutex<HashMap<GroupVersionKind, Slot>>,
}

impl Reach {
    /// Asks with the client of `resources`, the host's own identity.
    pub fn new(resources: Arc<Resources>) -> Self {
        Self {
            resources,
            answers: Mutex::default(),
        }
    }

    /// Whether `kind` is namespaced and the host may list and watch it in every namespace, as
    /// [`Self::ask`] last answered; `None` when not asked, being asked, or aged.
    pub fn everywhere(&self, kind: &GroupVersionKind) -> Option<bool> {
        let slot = self.slot(kind);
        let answer = *slot.try_lock().ok()?;
        answer
            .filter(|(_, until)| Instant::now() < *until)
            .map(|(allowed, _)| allowed)
    }

    /// Whether `kind` is namespaced and the host may list and watch it in every namespace:
    /// asked of the API server unless answered within [`FRESH`]; a failed review is a refusal
    /// for [`FRESH_FAILURE`].
    pub async fn ask(&self, kind: &GroupVersionKind) -> bool {
        let slot = self.slot(kind);
        let mut answer = slot.lock().await;
        if let Some((allowed, until)) = *answer
            && Instant::now() < until
        {
            return allowed;
        }
        let (allowed, fresh) = match tokio::time::timeout(
            REVIEW_TIMEOUT,
            review(&self.resources, kind),
        )
        .await
        {
            Ok(Ok(allowed)) => (allowed, FRESH),
            failed => {
                let error = failed.map_or_else(|_| "timed out".to_owned(), |r| format!("{r:?}"));
                tracing::warn!(?kind, %error, "could not ask whether the host may watch this kind in every namespace; each namespace keeps an informer of its own");
                (false, FRESH_FAILURE)
            }
        };
        *answer = Some((allowed, Instant::now() + fresh));
        allowed
    }

    fn slot(&self, kind: &GroupVersionKind) -> Slot {
        let mut answers = self.answers.lock().expect("reach lock");
        answers.entry(kind.clone()).or_default().clone()
    }

    /// Takes `allowed` as the answer for `kind`, as a review would.
    #[cfg(test)]
    pub fn answer(&self, kind: &GroupVersionKind, allowed: bool) {
        let slot = self.slot(kind);
        *slot.try_lock().expect("not being asked") = Some((allowed, Instant::now() + FRESH));
    }
}

/// Asks whether `kind` is namespaced and the host may list and watch it in every namespace.
async fn review(resources: &Resources, kind: &GroupVersionKind) -> Result<bool, kube::Error> {
    let (resource, namespaced) = resources.resolve(kind).await?;
    if !namespaced {
        return Ok(false);
    }
    watch_everywhere(resources.client(), &resource.group, &resource.plural).await
}

/// Whether the identity of `client` may list and watch `resource` (a plural name) of `group` in
/// every namespace, as SelfSubjectAccessReviews answer.
pub async fn watch_everywhere(
    client: &Client,
    group: &str,
    resource: &str,
) -> Result<bool, kube::Error> {
    for verb in ["list", "watch"] {
        let asked = ResourceAttributes {
            group: Some(group.to_owned()),
            resource: Some(resource.to_owned()),
            verb: Some(verb.to_owned()),
            ..ResourceAttributes::default()
        };
        if !allowed(client, asked).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether the identity of `client` may do what `asked` says, as a SelfSubjectAccessReview
/// answers.
pub async fn allowed(client: &Client, asked: ResourceAttributes) -> Result<bool, kube::Error> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(asked),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}
