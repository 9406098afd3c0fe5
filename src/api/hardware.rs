//! The hardware a MachineClass hands out (issue 35): devices from device plugins and the
//! hugepage backing of memory, as a class and (refused) a Machine write them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema::required_without_default;

/// GPUs, and host devices, a class may give each Machine: more than a host's PCI slots hold.
pub const MAX_CLASS_DEVICES: usize = 16;
/// A device plugin's resource name (`vendor.com/name`): a DNS subdomain, a slash, a name.
pub const MAX_DEVICE_NAME: usize = 317;
/// The hugepage sizes KubeVirt accepts on x86_64.
pub const HUGEPAGE_SIZES: &[&str] = &["2Mi", "1Gi"];
/// KubeVirt's CPU model names are short (libvirt's longest is under 40 characters).
pub const MAX_CPU_MODEL: usize = 64;

/// A device from a device plugin, as KubeVirt's gpus[] and hostDevices[] name it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["name", "deviceName"]), transform = required_without_default)]
pub struct Device {
    /// The device's name in the VM, a DNS-1123 label unique among its class's devices.
    #[serde(default)]
    pub name: String,
    /// The device plugin's resource name, e.g. nvidia.com/GA102GL_A10.
    #[serde(default)]
    #[schemars(extend("maxLength" = MAX_DEVICE_NAME))]
    pub device_name: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Hugepages {
    /// 2Mi or 1Gi (x86_64's hugepage sizes); the memory size must be a multiple of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = HUGEPAGE_SIZES))]
    pub page_size: Option<String>,
}
