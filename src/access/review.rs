//! The I/O shell of the access check: which claims exist (a GET by name each, as the operator),
//! then one SubjectAccessReview per needed permission, asked as the request's author (user,
//! groups, uid, extra); each batch concurrent, at most [`MAX_IN_FLIGHT`] calls at a time, under
//! the request's one deadline.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Client, core::ObjectMeta};

use super::data_sources::{self, Ref, Target};
use super::fairness::{Shares, VerdictKey, Verdicts};
use super::{Permission, UserInfo};

/// Calls one review keeps in flight at once: a Machine with 256 disks may need 256 look-ups
/// and 512 reviews, which must not reach kube-apiserver all at once.
pub const MAX_IN_FLIGHT: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("SubjectAccessReview failed: {0}")]
    Api(#[from] kube::Error),
    #[error("SubjectAccessReview got no answer within the admission's time budget")]
    Timeout,
    #[error("cannot read persistentvolumeclaims {name:?} in namespace {namespace:?}: {source}")]
    Claim {
        name: String,
        namespace: String,
        source: kube::Error,
    },
    #[error("reading persistentvolumeclaims got no answer within the admission's time budget")]
    ClaimTimeout,
    #[error(
        "cannot read datasources.cdi.kubevirt.io {name:?} in namespace {namespace:?}: {source}"
    )]
    DataSource {
        name: String,
        namespace: String,
        source: kube::Error,
    },
    #[error("reading datasources.cdi.kubevirt.io got no answer within the admission's time budget")]
    DataSourceTimeout,
    #[error("cannot read {kind} {name:?} in namespace {namespace:?}: {source}")]
    Object {
        kind: String,
        name: String,
        namespace: String,
        source: kube::Error,
    },
    #[error("reading {0} got no answer within the admission's time budget")]
    ObjectTimeout(String),
    #[error("cannot read KubevirtConfig {name:?}: {source}")]
    KubevirtConfig { name: String, source: kube::Error },
}

/// Asks kube-apiserver whether a user may do something (`create` on `subjectaccessreviews`),
/// and which claims exist (`get` on `persistentvolumeclaims`, the reconciler's right).
#[derive(Clone)]
pub struct AccessReviewer {
    api: Api<SubjectAccessReview>,
    client: Client,
    /// Verdicts of the last few seconds ([`fairness`](super::fairness)).
    verdicts: Arc<Mutex<Verdicts>>,
    /// The calls in flight, shared in turn by requesting user.
    shares: Arc<Shares>,
}

impl AccessReviewer {
    pub fn new(client: Client) -> Self {
        AccessReviewer {
            api: Api::all(client.clone()),
            client,
            verdicts: Arc::default(),
            shares: Arc::default(),
        }
    }

    /// Which of the claims `names` exist in `namespace`, read by `deadline` within `user`'s
    /// turns. A failed or late read is an error: the caller denies (fail closed).
    pub async fn existing_claims(
        &self,
        user: &UserInfo,
        namespace: &str,
        names: Vec<String>,
        deadline: tokio::time::Instant,
    ) -> Result<BTreeSet<String>, AccessError> {
        if names.is_empty() {
            return Ok(BTreeSet::new());
        }
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        // Futures collected first, not made in a stream's closure: the closure's borrows would
        // make the webhook's future fail to be `Send` for all lifetimes.
        let lookups: Vec<_> = names
            .into_iter()
            .map(|name| {
                let (api, namespace) = (api.clone(), namespace.to_owned());
                let (shares, user) = (self.shares.clone(), user.username.clone());
                async move {
                    let _share = shares.acquire(&user).await;
                    match api.get_metadata_opt(&name).await {
                        Ok(found) => Ok(found.map(|_| name)),
                        Err(source) => Err(AccessError::Claim {
                            name,
                            namespace,
                            source,
                        }),
                    }
                }
            })
            .collect();
        let found = lookup_all(lookups, deadline, AccessError::ClaimTimeout).await?;
        Ok(found.into_iter().flatten().collect())
    }

    /// The object `name` of kind `K` in `namespace`, read for `user`'s request by `deadline`
    /// within their turns (a MachineSnapshot's Machine, a restore's snapshot).
    pub async fn read<K>(
        &self,
        user: &UserInfo,
        namespace: &str,
        name: &str,
        deadline: tokio::time::Instant,
    ) -> Result<Option<K>, AccessError>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let api: Api<K> = Api::namespaced(self.client.clone(), namespace);
        let kind = K::kind(&()).into_owned();
        let read = async {
            let _share = self.shares.acquire(&user.username).await;
            api.get_opt(name)
                .await
                .map_err(|source| AccessError::Object {
                    kind: kind.clone(),
                    name: name.to_owned(),
                    namespace: namespace.to_owned(),
                    source,
                })
        };
        tokio::time::timeout_at(deadline, read)
            .await
            .map_err(|_| AccessError::ObjectTimeout(kind.clone()))?
    }

    /// Where each DataSource of `refs` points, read by `deadline` within `user`'s turns (`get`
    /// on `datasources.cdi.kubevirt.io`). One that does not exist, or CDI's API not served, is
    /// [`Target::Missing`]; any other failed or late read is an error: the caller denies.
    pub async fn data_sources(
        &self,
        user: &UserInfo,
        refs: Vec<Ref>,
        deadline: tokio::time::Instant,
    ) -> Result<BTreeMap<Ref, Target>, AccessError> {
        if refs.is_empty() {
            return Ok(BTreeMap::new());
        }
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("cdi.kubevirt.io", "v1beta1", "DataSource"),
            "datasources",
        );
        let lookups: Vec<_> = refs
            .into_iter()
            .map(|(namespace, name)| {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(self.client.clone(), &namespace, &resource);
                let (shares, user) = (self.shares.clone(), user.username.clone());
                async move {
                    let _share = shares.acquire(&user).await;
                    let found = match api.get_opt(&name).await {
                        Ok(found) => found,
                        // CDI's API not served: no DataSource can exist.
                        Err(kube::Error::Api(e)) if e.code == 404 => None,
                        Err(source) => {
                            return Err(AccessError::DataSource {
                                name,
                                namespace,
                                source,
                            });
                        }
                    };
                    let json = found.and_then(|d| serde_json::to_value(d).ok());
                    let target = data_sources::resolve(&namespace, json.as_ref());
                    Ok(((namespace, name), target))
                }
            })
            .collect();
        let found = lookup_all(lookups, deadline, AccessError::DataSourceTimeout).await?;
        Ok(found.into_iter().collect())
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
        let reviews: Vec<_> = needed.iter().map(|p| self.allowed(user, p)).collect();
        let reviews = stream::iter(reviews)
            .buffered(MAX_IN_FLIGHT)
            .try_collect::<Vec<bool>>();
        let answers = tokio::time::timeout_at(deadline, reviews)
            .await
            .map_err(|_| AccessError::Timeout)??;
        Ok(needed
            .into_iter()
            .zip(answers)
            .filter_map(|(p, allowed)| (!allowed).then_some(p))
            .collect())
    }

    /// One review: remembered for a few seconds, asked within the user's share of calls.
    async fn allowed(&self, user: &UserInfo, p: &Permission) -> Result<bool, AccessError> {
        let key = VerdictKey::new(user, p);
        let remembered = (self.verdicts.lock().ok()).and_then(|v| v.get(&key, Instant::now()));
        if let Some(allowed) = remembered {
            return Ok(allowed);
        }
        let _share = self.shares.acquire(&user.username).await;
        let review = self
            .api
            .create(&PostParams::default(), &subject_access_review(user, p))
            .await?;
        let allowed = review.status.is_some_and(|s| s.allowed);
        if let Ok(mut v) = self.verdicts.lock() {
            v.put(key, allowed, Instant::now());
        }
        Ok(allowed)
    }
}

/// Runs the reads `lookups` at most [`MAX_IN_FLIGHT`] at a time, in any order, by `deadline`;
/// the first failure, or `late` past the deadline, is the error.
async fn lookup_all<T, F>(
    lookups: Vec<F>,
    deadline: tokio::time::Instant,
    late: AccessError,
) -> Result<Vec<T>, AccessError>
where
    F: Future<Output = Result<T, AccessError>>,
{
    let all = stream::iter(lookups)
        .buffer_unordered(MAX_IN_FLIGHT)
        .try_collect::<Vec<T>>();
    tokio::time::timeout_at(deadline, all)
        .await
        .map_err(|_| late)?
}

impl AccessReviewer {
    /// KubevirtConfig `name`'s spec, `None` when there is none. Listed by name (the operator
    /// may list and watch KubevirtConfigs, not get them).
    pub async fn kubevirt_config(
        &self,
        name: &str,
        deadline: tokio::time::Instant,
    ) -> Result<Option<crate::api::KubevirtConfigSpec>, AccessError> {
        let api: Api<crate::api::KubevirtConfig> = Api::all(self.client.clone());
        let params = kube::api::ListParams::default().fields(&format!("metadata.name={name}"));
        let listed = tokio::time::timeout_at(deadline, api.list(&params))
            .await
            .map_err(|_| AccessError::ObjectTimeout("kubevirtconfigs".to_owned()))?;
        match listed {
            Ok(listed) => Ok(listed.items.into_iter().next().map(|c| c.spec)),
            // The KubevirtConfig CRD not installed: no KubevirtConfig can exist.
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
            Err(source) => Err(AccessError::KubevirtConfig {
                name: name.to_owned(),
                source,
            }),
        }
    }

    /// The labels of Namespace `name` (empty when it has none), for a KubevirtConfig's
    /// `namespaceSelector`.
    pub async fn namespace_labels(
        &self,
        name: &str,
        deadline: tokio::time::Instant,
    ) -> Result<BTreeMap<String, String>, AccessError> {
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        let found = tokio::time::timeout_at(deadline, api.get_metadata_opt(name))
            .await
            .map_err(|_| AccessError::ObjectTimeout("namespaces".to_owned()))?
            .map_err(|source| AccessError::Object {
                kind: "Namespace".to_owned(),
                name: name.to_owned(),
                namespace: String::new(),
                source,
            })?;
        Ok(found.and_then(|n| n.metadata.labels).unwrap_or_default())
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
