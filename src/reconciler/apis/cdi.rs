//! The slice of CDI's `cdi.kubevirt.io/v1beta1` DataVolume API this operator writes and reads.
//!
//! Like `kubevirt`, every field is optional and skipped when unset, so a server-side apply owns
//! exactly what is written. The shapes follow CDI's CRD schema (`tests/fixtures/crds/`), which
//! the tests check every derived DataVolume against.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// CDI's annotation on a DataVolume: `"false"` keeps it after a completed import (CDI's garbage
/// collection would delete it otherwise, where enabled).
pub const DELETE_AFTER_COMPLETION: &str = "cdi.kubevirt.io/storage.deleteAfterCompletion";
/// CDI's annotation on a DataVolume: `"false"` forbids it to adopt an existing claim of its name.
pub const ALLOW_CLAIM_ADOPTION: &str = "cdi.kubevirt.io/allowClaimAdoption";
/// CDI's annotation on a claim it made for a DataVolume: that DataVolume's uid.
pub const CREATED_FOR_DATA_VOLUME: &str = "cdi.kubevirt.io/createdForDataVolume";

/// Whether `claim` is the one CDI made for the DataVolume with uid `dv_uid`: controlled by it
/// and annotated with its uid (a claim of that name made otherwise could hold another's data).
pub fn filled_for(
    claim: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    dv_uid: &str,
) -> bool {
    let controlled = claim
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && r.uid == dv_uid);
    let annotated = claim
        .annotations
        .as_ref()
        .and_then(|a| a.get(CREATED_FOR_DATA_VOLUME))
        .is_some_and(|u| u == dv_uid);
    controlled && annotated
}

foreign_resource! {
    /// `spec` of a CDI DataVolume.
    #[kube(
        group = "cdi.kubevirt.io",
        version = "v1beta1",
        kind = "DataVolume",
        plural = "datavolumes",
        namespaced,
        status = "DataVolumeStatus"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct DataVolumeSpec {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub source: Option<DataVolumeSource>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub source_ref: Option<SourceRef>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub storage: Option<StorageSpec>,
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<RegistrySource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvc: Option<PvcSource>,
    /// A VolumeSnapshot to restore from (what a DataSource may point to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotSource>,
}

/// CDI requires both fields.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotSource {
    pub name: String,
    pub namespace: String,
}

/// CDI names Secrets and ConfigMaps by a bare string.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HttpSource {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_config_map: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RegistrySource {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_method: Option<String>,
}

/// CDI requires both fields.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct PvcSource {
    pub name: String,
    pub namespace: String,
}

/// An indirect source; CDI supports only kind `DataSource`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceRef {
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// CDI's `storage` API: unset fields are filled from the StorageProfile, and for a clone an unset
/// size is the source's.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct StorageSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access_modes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<StorageResources>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mode: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct StorageResources {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, String>,
}

/// What CDI reports about a DataVolume.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// `45.20%`, or `N/A`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<DataVolumeCondition>,
}

/// CDI reports conditions in KubeVirt's shape (type, status, reason, message).
pub type DataVolumeCondition = super::kubevirt::KubeVirtCondition;

/// DataVolume phases CDI reports (`DataVolumePhase` in CDI's API).
pub mod dv_phase {
    pub const SUCCEEDED: &str = "Succeeded";
    pub const FAILED: &str = "Failed";
    pub const WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";
    pub const PENDING: &str = "Pending";
    pub const UNKNOWN: &str = "Unknown";
}
foreign_resource! {
    /// CDI's StorageProfile for a StorageClass (cluster-scoped, named like the class): the access
    /// and volume modes CDI itself picks for DataVolumes on that class.
    #[kube(
        group = "cdi.kubevirt.io",
        version = "v1beta1",
        kind = "StorageProfile",
        plural = "storageprofiles",
        status = "StorageProfileStatus"
    )]
    pub struct StorageProfileSpec {}
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StorageProfileStatus {
    /// Computed by CDI from the spec and what it detected; the first is CDI's choice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claim_property_sets: Vec<ClaimPropertySet>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ClaimPropertySet {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access_modes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mode: Option<String>,
}
