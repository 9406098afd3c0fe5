//! Networks: a Multus NetworkAttachmentDefinition per NetworkConfiguration, and the VM's
//! interfaces and networks that use them (or the pod network when the Machine names none).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use crate::api::NetworkConfiguration;
use crate::api::machine::Network;
use crate::api::names::{MANAGED_BY, MANAGED_BY_LABEL, NETWORK_LABEL};
use crate::reconciler::apis::kubevirt::{self, Empty, Interface, MultusNetwork};
use crate::reconciler::apis::multus::{
    BridgeCniConfig, CNI_VERSION, NetworkAttachmentDefinition, NetworkAttachmentDefinitionSpec,
};

use super::meta::controller_ref;

/// Name of the pod network's interface when the Machine has no networks.
pub const POD_NETWORK: &str = "default";
const MAX_VLAN: i64 = 4094;

/// Why a NetworkConfiguration cannot be turned into an attachment.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidNetwork {
    #[error("NetworkConfiguration {0:?} has no bridge")]
    NoBridge(String),
    #[error("NetworkConfiguration {0:?} has VLAN {1}, outside 0-4094")]
    Vlan(String, i64),
}

/// The NetworkAttachmentDefinition for `nc`: bridge CNI on its bridge, tagged with its VLAN
/// (untagged for VLAN 0), named after it and owned by it.
pub fn attachment(
    nc: &NetworkConfiguration,
) -> Result<NetworkAttachmentDefinition, InvalidNetwork> {
    let name = nc.name_any();
    let bridge = nc
        .spec
        .bridge
        .clone()
        .filter(|b| !b.is_empty())
        .ok_or_else(|| InvalidNetwork::NoBridge(name.clone()))?;
    let vlan = match nc.spec.vlan.unwrap_or(0) {
        0 => None,
        v @ 1..=MAX_VLAN => Some(v as u16),
        v => return Err(InvalidNetwork::Vlan(name, v)),
    };
    let config = BridgeCniConfig {
        cni_version: CNI_VERSION.to_owned(),
        name: name.clone(),
        type_: "bridge".to_owned(),
        bridge,
        vlan,
        ipam: serde_json::Map::new(),
    };
    Ok(NetworkAttachmentDefinition {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: nc.namespace(),
            labels: Some(BTreeMap::from([
                (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
                (NETWORK_LABEL.to_owned(), name),
            ])),
            owner_references: controller_ref(nc).map(|r| vec![r]),
            ..ObjectMeta::default()
        },
        spec: NetworkAttachmentDefinitionSpec {
            // Serialising a struct of strings and integers cannot fail.
            config: serde_json::to_string(&config).ok(),
        },
    })
}

/// The VM's interfaces and networks for the Machine's (resolved) networks.
pub fn vm_networks(networks: &[Network]) -> (Vec<Interface>, Vec<kubevirt::Network>) {
    if networks.is_empty() {
        return (
            vec![Interface {
                name: POD_NETWORK.to_owned(),
                masquerade: Some(Empty {}),
                ..Interface::default()
            }],
            vec![kubevirt::Network {
                name: POD_NETWORK.to_owned(),
                pod: Some(Empty {}),
                ..kubevirt::Network::default()
            }],
        );
    }
    networks
        .iter()
        .map(|n| {
            (
                Interface {
                    name: n.name.clone(),
                    bridge: Some(Empty {}),
                    model: n.model.clone(),
                    mac_address: n.mac_address.clone(),
                    ..Interface::default()
                },
                kubevirt::Network {
                    name: n.name.clone(),
                    multus: Some(MultusNetwork {
                        network_name: n.network_name.clone(),
                    }),
                    ..kubevirt::Network::default()
                },
            )
        })
        .unzip()
}
