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
}
