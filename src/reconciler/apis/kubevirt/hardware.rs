//! KubeVirt's device and memory-backing shapes the operator writes from a MachineClass.

use serde::{Deserialize, Serialize};

/// An entry of `domain.devices.gpus` or `domain.devices.hostDevices`: a device plugin's
/// resource (`deviceName`) under a name in the VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HostDevice {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
}

/// `domain.memory.hugepages`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Hugepages {
    /// 2Mi or 1Gi.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<String>,
}
