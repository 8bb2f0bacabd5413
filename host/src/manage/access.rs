//! The host's own access: what the API server lets the host's identity do, asked with
//! SelfSubjectAccessReviews. A controller object's grants are checked against it before the
//! controller runs, so that a grant never reaches beyond the host's RBAC.
//!
//! Answers are shared by every guest for [`FRESH`]: the host's identity is the same for all, so
//! the reviews of a thousand guests in one round ask each question once. A question about one
//! namespace is first asked about every namespace; where that is allowed (a ClusterRole bound
//! cluster-wide, the usual case), no namespace needs a question of its own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::try_join_all;
use k8s_openapi::api::authorization::v1::ResourceAttributes;
use kube::Client;

use crate::cluster::reach;
use crate::config::Verb;
use crate::wasm::permissions::Requirement;

/// How long an answer is taken as the API server's: long enough for one round of reviews, short
/// enough that the next round, or a retried load, sees a change of RBAC.
const FRESH: Duration = Duration::from_secs(10);
/// How long a failed review is taken as the answer of those asking the same question meanwhile,
/// so that a thousand guests do not each wait for a review of their own when the API server
/// fails.
const FRESH_FAILURE: Duration = Duration::from_secs(1);
/// How long one review may take.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// The outcome of a review: whether the question is allowed, or why it could not be asked.
type Outcome = Result<bool, Arc<kube::Error>>;

/// One question: may the host's identity do `verb` on `resource` in `namespace` (`None`: every
/// namespace)?
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Question {
    group: String,
    /// Plural resource name, with `/subresource` where one is asked about.
    resource: String,
    verb: Verb,
    namespace: Option<String>,
}

/// An outcome and when it came; asked by one caller at a time, so that callers asking together
/// share one review.
type Answer = Arc<tokio::sync::Mutex<Option<(Outcome, Instant)>>>;

/// The host's access, asked of the API server and shared by every guest.
pub struct Access {
    client: Client,
    answers: Mutex<Answers>,
    /// Reviews sent.
    reviews: AtomicU64,
}

impl Access {
    /// Asks with `client`, the host's own identity.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            answers: Mutex::new(Answers {
                by_question: HashMap::new(),
                swept: Instant::now(),
            }),
            reviews: AtomicU64::new(0),
        }
    }

    /// How many reviews were sent.
    pub fn reviews(&self) -> u64 {
        self.reviews.load(Ordering::Relaxed)
    }

    /// The part of `needs` the host's identity may not do, one requirement per resource and
    /// namespace with only the verbs denied. Every verb is asked at once.
    pub async fn denied(
        &self,
        needs: &[Requirement],
    ) -> Result<Vec<Requirement>, Arc<kube::Error>> {
        let asks = needs.iter().flat_map(|need| {
            need.verbs.iter().map(move |verb| async move {
                let question = Question {
                    group: need.api_group.clone(),
                    resource: need.resource.clone(),
                    verb: *verb,
                    namespace: need.namespace.clone(),
                };
                Ok::<_, Arc<kube::Error>>((need, *verb, self.allowed(question).await?))
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

    /// Whether `question` is allowed: in every namespace, else in its own.
    async fn allowed(&self, question: Question) -> Outcome {
        if question.namespace.is_some() {
            let everywhere = Question {
                namespace: None,
                ..question.clone()
            };
            if self.answer(everywhere).await? {
                return Ok(true);
            }
        }
        self.answer(question).await
    }

    /// The answer to `question`, asked of the API server unless a fresh one is known.
    async fn answer(&self, question: Question) -> Outcome {
        let slot = self
            .answers
            .lock()
            .expect("access answers lock")
            .slot(question.clone());
        let mut slot = slot.lock().await;
        if let Some((outcome, at)) = &*slot
            && at.elapsed() < freshness(outcome)
        {
            return outcome.clone();
        }
        let outcome = match tokio::time::timeout(REVIEW_TIMEOUT, self.review(&question)).await {
            Ok(outcome) => outcome.map_err(Arc::new),
            Err(_) => Err(Arc::new(kube::Error::Service(
                format!("no answer within {REVIEW_TIMEOUT:?}").into(),
            ))),
        };
        *slot = Some((outcome.clone(), Instant::now()));
        outcome
    }

    /// Asks the API server `question` with a SelfSubjectAccessReview.
    async fn review(&self, question: &Question) -> Result<bool, kube::Error> {
        let (resource, subresource) = match question.resource.split_once('/') {
            Some((resource, subresource)) => (resource, Some(subresource.to_owned())),
            None => (question.resource.as_str(), None),
        };
        let asked = ResourceAttributes {
            group: Some(question.group.clone()),
            resource: Some(resource.to_owned()),
            subresource,
            verb: Some(question.verb.as_str().to_owned()),
            namespace: question.namespace.clone(),
            ..ResourceAttributes::default()
        };
        self.reviews.fetch_add(1, Ordering::Relaxed);
        reach::allowed(&self.client, asked).await
    }
}

/// How long `outcome` is taken as the answer.
fn freshness(outcome: &Outcome) -> Duration {
    if outcome.is_ok() {
        FRESH
    } else {
        FRESH_FAILURE
    }
}

/// The answers by question, swept of stale ones at most once per [`FRESH`].
struct Answers {
    by_question: HashMap<Question, Answer>,
    swept: Instant,
}

impl Answers {
    /// The slot of `question`, made if there is none.
    fn slot(&mut self, question: Question) -> Answer {
        if self.swept.elapsed() >= FRESH {
            // A slot being asked is locked and kept; an unanswered one is taken again.
            self.by_question.retain(|_, slot| {
                slot.try_lock().map_or(true, |answer| {
                    answer
                        .as_ref()
                        .is_some_and(|(outcome, at)| at.elapsed() < freshness(outcome))
                })
            });
            self.swept = Instant::now();
        }
        self.by_question.entry(question).or_default().clone()
    }
}
