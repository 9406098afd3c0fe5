//! Networks: a Multus NetworkAttachmentDefinition per NetworkConfiguration, and the VM's
//! interfaces and networks that use them (or the pod network when the Machine names none). The
//! admin's allow-lists are applied again here: a NetworkConfiguration stored while no webhook
//! ran (or before the lists changed) never becomes an attachment outside them.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use crate::addresses::Pool;
use crate::addresses::network_config::{Nic, render};
use crate::api::NetworkConfiguration;
use crate::api::machine::Network;
use crate::api::names::{MANAGED_BY, MANAGED_BY_LABEL, NETWORK_LABEL};
use crate::machine::FieldPath;
use crate::machine::field_error::join;
use crate::machine::network_policy::NetworkPolicy;
use crate::reconciler::apis::kubevirt::{self, Empty, Interface, MultusNetwork};
use crate::reconciler::apis::multus::{
    BridgeCniConfig, CNI_VERSION, NetworkAttachmentDefinition, NetworkAttachmentDefinitionSpec,
};

use super::meta::controller_ref;

/// Name of the pod network's interface when the Machine has no networks.
pub const POD_NETWORK: &str = "default";

/// Why a NetworkConfiguration cannot be turned into an attachment: the webhook's own words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("NetworkConfiguration {name:?} is refused: {errors}")]
pub struct InvalidNetwork {
    pub name: String,
    pub errors: String,
}

/// The NetworkAttachmentDefinition for `nc`: bridge CNI on its bridge, tagged with its VLAN
/// (untagged for VLAN 0), named after it and owned by it; refused outside `policy`.
pub fn attachment(
    nc: &NetworkConfiguration,
    policy: &NetworkPolicy,
) -> Result<NetworkAttachmentDefinition, InvalidNetwork> {
    let name = nc.name_any();
    let errors = policy.check(&nc.spec);
    let (Some(bridge), true) = (nc.spec.bridge.clone(), errors.is_empty()) else {
        return Err(InvalidNetwork {
            name,
            errors: join(&errors),
        });
    };
    // Checked above: 0-4094.
    let vlan = u16::try_from(nc.spec.vlan.unwrap_or(0))
        .ok()
        .filter(|v| *v != 0);
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
/// The cloud-init network-config for the Machine's addresses (`None` without any), with each
/// network's gateway and DNS from its NetworkConfiguration's ipam.
pub fn network_config(
    networks: &[Network],
    configurations: &BTreeMap<String, NetworkConfiguration>,
) -> Option<String> {
    if networks.iter().all(|n| n.addresses.is_empty()) {
        return None;
    }
    let root = FieldPath::new("spec");
    let path = root.child("ipam");
    let pools: Vec<Option<Pool>> = (networks.iter())
        .map(|n| {
            let ipam = configurations.get(&n.network_name)?.spec.ipam.as_ref()?;
            Pool::check(ipam, &path).ok()
        })
        .collect();
    let nics: Vec<Nic> = (networks.iter().zip(&pools))
        .map(|(n, pool)| Nic {
            mac: n.mac_address.as_deref(),
            addresses: &n.addresses,
            pool: pool.as_ref(),
        })
        .collect();
    render(&nics)
}
