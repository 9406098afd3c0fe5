//! `spec.domain` of a Machine: the emulated machine type, hypervisor features and firmware.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Domain {
    /// Emulated machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineType>,
    /// Hypervisor features.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<Features>,
    /// Firmware and boot loader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<Firmware>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct MachineType {
    /// pc-q35 (default) or pc-i440fx, or a versioned form such as pc-q35-rhel9.2.0; admitted only
    /// as the operator's --allowed-machine-types allows (KubeVirt's default: q35 only).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct Features {
    /// ACPI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acpi: Option<bool>,
    /// APIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apic: Option<bool>,
    /// Hyper-V enlightenments for Windows guests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hyperv: Option<bool>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct Firmware {
    /// Boot loader selection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootloader: Option<Bootloader>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bootloader {
    /// Boot with EFI firmware instead of BIOS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efi: Option<bool>,
    /// UEFI Secure Boot; requires efi (and turns on SMM in the VM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secure_boot: Option<bool>,
}
