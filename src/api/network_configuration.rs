//! The `vitistack.io/v1alpha1` NetworkConfiguration a Machine's network refers to by name.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A layer-2 network: a host bridge and an optional VLAN, attached to VMs through Multus.
#[derive(
    CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema,
)]
#[kube(
    group = "vitistack.io",
    version = "v1alpha1",
    kind = "NetworkConfiguration",
    plural = "networkconfigurations",
    namespaced,
    doc = "A layer-2 network (bridge and VLAN) that Machines attach to by name.",
    printcolumn = r#"{"name":"Bridge","type":"string","jsonPath":".spec.bridge"}"#,
    printcolumn = r#"{"name":"VLAN","type":"integer","jsonPath":".spec.vlan"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct NetworkConfigurationSpec {
    /// VLAN id, 0-4094 (0: untagged), one the operator's --allowed-vlans lists (0 unless set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0, "maximum" = 4094))]
    pub vlan: Option<i64>,
    /// Linux bridge on the nodes that the VM's interface joins: a Linux interface name (at most
    /// 15 bytes, no '/', ':' or whitespace, not "." or ".."), one the operator's --allowed-bridges
    /// lists (none until the admin sets it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "minLength" = 1,
        "maxLength" = 15,
        "pattern" = r"^([^/:\s.][^/:\s]*|\.[^/:\s.][^/:\s]*|\.\.[^/:\s]+)$"
    ))]
    pub bridge: Option<String>,
    /// Static addresses for the Machines on this network (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipam: Option<Ipam>,
}

/// DNS servers per network.
pub const MAX_DNS: usize = 8;
/// Allocation ranges per network.
pub const MAX_RANGES: usize = 16;

/// Addresses the operator hands out on the network: Machines that leave
/// `spec.networks[].addresses` unset get a free one from `ranges`, and the derived cloud-init
/// network-config carries it with the gateway and DNS servers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("required" = ["subnet"]))]
pub struct Ipam {
    /// The subnet as a CIDR (e.g. 10.0.0.0/24; IPv4 or IPv6). Every address on the network is
    /// inside it.
    #[serde(default)]
    #[schemars(extend("maxLength" = 43))]
    pub subnet: String,
    /// The default gateway, inside the subnet; never handed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 39))]
    pub gateway: Option<String>,
    /// DNS servers, inside the subnet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_DNS, "items" = {"type": "string", "maxLength": 39}))]
    pub dns: Vec<String>,
    /// What is handed out, in order and not overlapping, inside the subnet. Unset: the whole
    /// subnet but its network and broadcast addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_RANGES))]
    pub ranges: Vec<IpRange>,
}

/// `start` to `end`, both included.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("required" = ["start", "end"]))]
pub struct IpRange {
    #[serde(default)]
    #[schemars(extend("maxLength" = 39))]
    pub start: String,
    #[serde(default)]
    #[schemars(extend("maxLength" = 39))]
    pub end: String,
}
