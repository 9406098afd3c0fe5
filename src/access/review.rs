//! The I/O shell of the access check: one SubjectAccessReview per needed permission, asked as
//! the request's author (user, groups, uid, extra), in parallel, under one deadline.

use futures::future::try_join_all;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use kube::{Client, core::ObjectMeta};

use super::{Permission, UserInfo};

#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("SubjectAccessReview failed: {0}")]
    Api(#[from] kube::Error),
    #[error("SubjectAccessReview got no answer within the admission's time budget")]
    Timeout,
}

/// Asks kube-apiserver whether a user may do something (`create` on `subjectaccessreviews`).
#[derive(Clone)]
pub struct AccessReviewer {
    api: Api<SubjectAccessReview>,
}

impl AccessReviewer {
    pub fn new(client: Client) -> Self {
        AccessReviewer {
            api: Api::all(client),
        }
    }

    /// The permissions of `needed` the user does not have, answered by `deadline`. Any failed
    /// or late review is an error: the caller denies (fail closed).
    pub async fn denied(
        &self,
        user: &UserInfo,
        needed: Vec<Permission>,
        deadline: tokio::time::Instant,
    ) -> Result<Vec<Permission>, AccessError> {
        if needed.is_empty() {
            return Ok(needed);
        }
        let reviews = needed.iter().map(|p| self.allowed(user, p));
        let answers = tokio::time::timeout_at(deadline, try_join_all(reviews))
            .await
            .map_err(|_| AccessError::Timeout)??;
        Ok(needed
            .into_iter()
            .zip(answers)
            .filter_map(|(p, allowed)| (!allowed).then_some(p))
            .collect())
    }

    async fn allowed(&self, user: &UserInfo, p: &Permission) -> Result<bool, AccessError> {
        let review = self
            .api
            .create(&PostParams::default(), &subject_access_review(user, p))
            .await?;
        Ok(review.status.is_some_and(|s| s.allowed))
    }
}

/// The review kube-apiserver answers for `user` doing `p`.
pub fn subject_access_review(user: &UserInfo, p: &Permission) -> SubjectAccessReview {
    let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    SubjectAccessReview {
        metadata: ObjectMeta::default(),
        spec: SubjectAccessReviewSpec {
            user: Some(user.username.clone()),
            uid: some(&user.uid),
            groups: Some(user.groups.clone()),
            extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
            resource_attributes: Some(ResourceAttributes {
                verb: some(&p.verb),
                group: Some(p.group.clone()),
                resource: some(&p.resource),
                subresource: some(&p.subresource),
                namespace: some(&p.namespace),
                name: some(&p.name),
                ..Default::default()
            }),
            ..Default::default()
        },
        status: None,
    }
}
