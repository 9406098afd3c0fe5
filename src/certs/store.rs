//! Reading and writing the certificate objects: the I/O shell around the pure decisions. Every
//! write is conditional: a replace carries the resourceVersion that was read and a missing object
//! is created, so a concurrent writer makes the write fail with [`StoreError::Conflict`] instead
//! of being overwritten; the caller then reads again and decides again.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Client, Resource};

use super::observed::Snapshot;
use super::{
    BUNDLE_CONFIGMAP, BUNDLE_KEY, CA_SECRET, OPERATOR_NAME, ROTATE_ANNOTATION, SERVING_SECRET,
    WEBHOOK_CONFIGURATION, is_managed, managed_labels,
};

pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Someone else changed or removed the object since it was read: read again, decide again.
    #[error("{0} changed since it was read")]
    Conflict(String),
    /// Refused: the object exists without our label.
    #[error("{0} is not managed by kubevirt-operator; not overwriting it")]
    Foreign(String),
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
}

impl StoreError {
    fn from_kube(what: String, e: kube::Error) -> Self {
        match &e {
            // 409: stale resourceVersion or created meanwhile; 404 on replace: deleted meanwhile.
            kube::Error::Api(s) if s.code == 409 || s.code == 404 => StoreError::Conflict(what),
            _ => StoreError::Api { what, source: e },
        }
    }
}

/// The namespace's certificate objects and the two cluster-wide webhook configurations.
#[derive(Clone)]
pub struct Store {
    namespace: String,
    /// The installed webhook configurations' name (`--webhook-configuration-name`).
    webhook_configuration: String,
    secrets: Api<Secret>,
    configmaps: Api<ConfigMap>,
    mutating: Api<MutatingWebhookConfiguration>,
    validating: Api<ValidatingWebhookConfiguration>,
    /// The aggregated API's APIService, when it is served (else never read).
    api_service: Option<Api<APIService>>,
}

fn post() -> PostParams {
    PostParams {
        dry_run: false,
        field_manager: Some(OPERATOR_NAME.to_owned()),
    }
}

/// Our labels on top of whatever labels the object already carries.
fn with_labels(meta: &mut ObjectMeta) {
    meta.labels
        .get_or_insert_with(BTreeMap::new)
        .extend(managed_labels());
}

impl Store {
    pub fn new(client: Client, namespace: &str) -> Self {
        Store {
            namespace: namespace.to_owned(),
            webhook_configuration: WEBHOOK_CONFIGURATION.to_owned(),
            secrets: Api::namespaced(client.clone(), namespace),
            configmaps: Api::namespaced(client.clone(), namespace),
            mutating: Api::all(client.clone()),
            validating: Api::all(client.clone()),
            api_service: None,
        }
    }

    /// Reads and fills the APIService `v1alpha1.subresources.vitistack.io` too (`on`: the
    /// aggregated API is served; off, the operator may hold no right on APIServices).
    pub fn with_api_service(mut self, client: Client, on: bool) -> Self {
        self.api_service = on.then(|| Api::all(client));
        self
    }

    /// Reads and fills the webhook configurations named `name` (the release's).
    pub fn with_webhook_configuration(mut self, name: &str) -> Self {
        name.clone_into(&mut self.webhook_configuration);
        self
    }

    pub fn webhook_configuration(&self) -> &str {
        &self.webhook_configuration
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn what<K: Resource<DynamicType = ()>>(&self, name: &str) -> String {
        let kind = K::kind(&());
        match kind.as_ref() {
            "Secret" | "ConfigMap" => format!("{kind} {}/{name}", self.namespace),
            _ => format!("{kind} {name}"),
        }
    }

    async fn get<K>(&self, api: &Api<K>, name: &str) -> Result<Option<K>, StoreError>
    where
        K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        api.get_opt(name).await.map_err(|source| StoreError::Api {
            what: self.what::<K>(name),
            source,
        })
    }

    /// Reads all five objects.
    pub async fn snapshot(&self) -> Result<Snapshot, StoreError> {
        Ok(Snapshot {
            ca: self.get(&self.secrets, CA_SECRET).await?,
            serving: self.get(&self.secrets, SERVING_SECRET).await?,
            bundle: self.get(&self.configmaps, BUNDLE_CONFIGMAP).await?,
            mutating: self
                .get(&self.mutating, &self.webhook_configuration)
                .await?,
            validating: self
                .get(&self.validating, &self.webhook_configuration)
                .await?,
            api_service: match &self.api_service {
                Some(api) => self.get(api, super::api_service::NAME).await?,
                None => None,
            },
        })
    }

    /// Creates `name` when `live` is None, else replaces it as of `live`'s resourceVersion.
    async fn put<K>(
        &self,
        api: &Api<K>,
        name: &str,
        live: Option<&K>,
        mut obj: K,
    ) -> Result<K, StoreError>
    where
        K: Resource<DynamicType = ()>
            + Clone
            + serde::Serialize
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let what = self.what::<K>(name);
        let result = match live {
            None => {
                obj.meta_mut().resource_version = None;
                api.create(&post(), &obj).await
            }
            Some(live) => {
                if !is_managed(live.meta().labels.as_ref()) {
                    return Err(StoreError::Foreign(what));
                }
                if live.meta().resource_version.is_none() {
                    return Err(StoreError::Conflict(what));
                }
                obj.meta_mut().resource_version = live.meta().resource_version.clone();
                api.replace(name, &post(), &obj).await
            }
        };
        result.map_err(|e| StoreError::from_kube(what, e))
    }

    /// Writes a `kubernetes.io/tls` Secret with `data`, dropping any rotation request (the write
    /// is the answer to it). A Secret of another type, or an immutable one, cannot be updated in
    /// place: it is deleted (as of the resourceVersion read) and created anew.
    pub async fn write_tls_secret(
        &self,
        name: &str,
        live: Option<&Secret>,
        data: BTreeMap<String, ByteString>,
    ) -> Result<Secret, StoreError> {
        let mut secret = live.cloned().unwrap_or_else(|| Secret {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            ..Secret::default()
        });
        with_labels(&mut secret.metadata);
        if let Some(a) = secret.metadata.annotations.as_mut() {
            a.remove(ROTATE_ANNOTATION);
        }
        secret.metadata.managed_fields = None;
        secret.data = Some(data);
        secret.string_data = None;
        let replaceable = live.is_none_or(|l| {
            l.type_.as_deref() == Some(TLS_SECRET_TYPE) && l.immutable != Some(true)
        });
        secret.type_ = Some(TLS_SECRET_TYPE.to_owned());
        if replaceable {
            return self.put(&self.secrets, name, live, secret).await;
        }
        let Some(live) = live else {
            return self.put(&self.secrets, name, None, secret).await;
        };
        if !is_managed(live.metadata.labels.as_ref()) {
            return Err(StoreError::Foreign(self.what::<Secret>(name)));
        }
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: live.metadata.resource_version.clone(),
                uid: live.metadata.uid.clone(),
            }),
            ..DeleteParams::default()
        };
        self.secrets
            .delete(name, &dp)
            .await
            .map_err(|e| StoreError::from_kube(self.what::<Secret>(name), e))?;
        secret.metadata.uid = None;
        secret.metadata.creation_timestamp = None;
        secret.immutable = None;
        self.put(&self.secrets, name, None, secret).await
    }

    pub async fn write_bundle(
        &self,
        live: Option<&ConfigMap>,
        pem: &str,
    ) -> Result<ConfigMap, StoreError> {
        let mut cm = live.cloned().unwrap_or_else(|| ConfigMap {
            metadata: ObjectMeta {
                name: Some(BUNDLE_CONFIGMAP.to_owned()),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        });
        with_labels(&mut cm.metadata);
        cm.metadata.managed_fields = None;
        cm.data = Some([(BUNDLE_KEY.to_owned(), pem.to_owned())].into());
        cm.binary_data = None;
        self.put(&self.configmaps, BUNDLE_CONFIGMAP, live, cm).await
    }

    /// Replaces the installed configuration with `filled` (the live one with our caBundle and
    /// stamp: `webhook_config::fill`), as of the resourceVersion it was read at. Never creates:
    /// the chart or manifests install it, so uninstalling removes it.
    async fn replace_filled<K>(
        &self,
        api: &Api<K>,
        name: &str,
        mut filled: K,
    ) -> Result<K, StoreError>
    where
        K: Resource<DynamicType = ()>
            + Clone
            + serde::Serialize
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let what = self.what::<K>(name);
        if filled.meta().resource_version.is_none() {
            return Err(StoreError::Conflict(what));
        }
        filled.meta_mut().managed_fields = None;
        api.replace(name, &post(), &filled)
            .await
            .map_err(|e| StoreError::from_kube(what, e))
    }

    pub async fn write_mutating(
        &self,
        filled: &MutatingWebhookConfiguration,
    ) -> Result<MutatingWebhookConfiguration, StoreError> {
        let name = &self.webhook_configuration;
        self.replace_filled(&self.mutating, name, filled.clone())
            .await
    }

    pub async fn write_validating(
        &self,
        filled: &ValidatingWebhookConfiguration,
    ) -> Result<ValidatingWebhookConfiguration, StoreError> {
        let name = &self.webhook_configuration;
        self.replace_filled(&self.validating, name, filled.clone())
            .await
    }

    /// The APIService as filled (`api_service::fill`); a Conflict when it is not read here.
    pub async fn write_api_service(&self, filled: &APIService) -> Result<APIService, StoreError> {
        let name = super::api_service::NAME;
        let Some(api) = &self.api_service else {
            return Err(StoreError::Conflict(self.what::<APIService>(name)));
        };
        self.replace_filled(api, name, filled.clone()).await
    }

    /// Asks the leader to renew the CA (`ca`) or the serving certificate now, by annotating its
    /// Secret. Returns the annotation value written.
    pub async fn request_rotation(
        &self,
        ca: bool,
        at: DateTime<Utc>,
    ) -> Result<String, StoreError> {
        let name = if ca { CA_SECRET } else { SERVING_SECRET };
        let value = at.to_rfc3339_opts(SecondsFormat::Secs, true);
        let patch = serde_json::json!({
            "metadata": { "annotations": { ROTATE_ANNOTATION: value } }
        });
        self.secrets
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| StoreError::Api {
                what: self.what::<Secret>(name),
                source,
            })?;
        Ok(value)
    }

    pub fn secrets(&self) -> &Api<Secret> {
        &self.secrets
    }
}
