//! Multus' `k8s.cni.cncf.io/v1` NetworkAttachmentDefinition: a CNI configuration carried as a
//! JSON string, which KubeVirt's multus networks name.

use serde::{Deserialize, Serialize};

foreign_resource! {
    #[kube(
        group = "k8s.cni.cncf.io",
        version = "v1",
        kind = "NetworkAttachmentDefinition",
        plural = "network-attachment-definitions",
        namespaced
    )]
    pub struct NetworkAttachmentDefinitionSpec {
        /// The CNI configuration, JSON-encoded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub config: Option<String>,
    }
}

/// The bridge CNI plugin's configuration, with the fields in a fixed order so that the encoded
/// string is stable (it is compared to decide whether to write).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BridgeCniConfig {
    pub cni_version: String,
    pub name: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub bridge: String,
    /// Absent for untagged traffic (VLAN 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// No IPAM: addresses come from the guest (DHCP on the bridged segment or static).
    pub ipam: serde_json::Map<String, serde_json::Value>,
}

pub const CNI_VERSION: &str = "0.3.1";
