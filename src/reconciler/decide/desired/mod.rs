//! What should exist for a Machine: a pure function of the Machine, its resolved spec and what
//! was observed of its dependencies (NetworkConfigurations, StorageClasses, the cloud-init
//! Secret). The VM is only derived once every dependency is there, so KubeVirt never sees a VM
//! that points at a missing claim, network or Secret.

pub mod cloud_init;
pub mod datavolume;
pub mod hardware;
pub mod meta;
pub mod network;
pub mod pvc;
pub mod vm;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};

use crate::api::clone_sources::CloneSources;
use crate::api::{Machine, MachineSpec, NetworkConfiguration};
use crate::machine::classes::Hardware;
use crate::machine::network_policy::NetworkPolicy;

use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::apis::kubevirt::VirtualMachine;
use crate::reconciler::apis::multus::NetworkAttachmentDefinition;
pub use cloud_init::SecretData;

pub use super::problem::Problem;

/// Observed dependencies of one Machine.
pub struct Inputs<'a> {
    pub machine: &'a Machine,
    /// The resolved spec (template, overrides and defaults applied).
    pub spec: &'a MachineSpec,
    /// NetworkConfigurations in the Machine's namespace that exist, by name.
    pub network_configurations: &'a BTreeMap<String, NetworkConfiguration>,
    /// Names of the StorageClasses that exist.
    pub storage_classes: &'a BTreeSet<String>,
    /// The cloud-init Secret's data when the spec takes user data from a Secret.
    pub cloud_init_secret: Option<SecretData<'a>>,
    /// The bridges and VLANs attachments may use (`--allowed-bridges`, `--allowed-vlans`).
    pub network_policy: &'a NetworkPolicy,
    /// `--default-eviction-strategy`, for a Machine that sets none.
    pub eviction_strategy: &'a str,
    /// `--propagate-label-prefixes`: the Machine labels the VM carries too.
    pub label_prefixes: &'a [String],
    /// The VM is on a remote cluster, where the user's Secret is not: its user data is copied
    /// into the derived Secret even under the key `userdata`.
    pub copy_user_data: bool,
    /// The hardware of the Machine's class (its GPUs, CPU pinning, placement, …).
    pub hardware: &'a Hardware,
    /// What each `dataSource` volume clones: pinned at admission for a local Machine, resolved
    /// on its cluster for a remote one (`super::remote_clones`).
    pub pins: &'a CloneSources,
}

#[derive(Debug, Default)]
pub struct Desired {
    /// Claims for the blank disks whose StorageClass exists (or that use the default class).
    pub pvcs: Vec<PersistentVolumeClaim>,
    /// CDI DataVolumes for the disks with a source (same StorageClass rule) and the CD-ROMs.
    pub data_volumes: Vec<DataVolume>,
    /// One attachment per distinct NetworkConfiguration the Machine uses.
    pub attachments: Vec<NetworkAttachmentDefinition>,
    /// The derived cloud-init Secret, when the user data lives under a key other than `userdata`.
    pub secret: Option<Secret>,
    /// `None` while a dependency is missing.
    pub vm: Option<VirtualMachine>,
    pub problems: Vec<Problem>,
}

pub fn derive(inputs: &Inputs) -> Desired {
    let Inputs { machine, spec, .. } = inputs;
    let mut out = Desired::default();
    let mut sourced = Vec::new();

    for disk in &spec.disks {
        match &disk.storage_class {
            Some(sc) if !inputs.storage_classes.contains(sc) => {
                out.problems.push(Problem::StorageClassNotFound {
                    disk: disk.name.clone(),
                    storage_class: sc.clone(),
                });
            }
            _ if disk.source.is_some() => sourced.push(disk),
            _ => out.pvcs.push(pvc::pvc(machine, disk)),
        }
    }
    out.data_volumes = datavolume::data_volumes(machine, inputs.pins, sourced, &spec.cdroms);

    let mut seen = BTreeSet::new();
    for n in &spec.networks {
        if !seen.insert(n.network_name.as_str()) {
            continue;
        }
        match inputs.network_configurations.get(&n.network_name) {
            None => out.problems.push(Problem::NetworkConfigurationNotFound {
                network: n.name.clone(),
                network_name: n.network_name.clone(),
            }),
            Some(nc) => match network::attachment(nc, inputs.network_policy) {
                Ok(nad) => out.attachments.push(nad),
                Err(e) => out.problems.push(Problem::NetworkInvalid {
                    network_name: n.network_name.clone(),
                    message: e.to_string(),
                }),
            },
        }
    }

    let ci = cloud_init::plan(
        machine,
        spec.cloud_init.as_ref(),
        (inputs.cloud_init_secret, inputs.copy_user_data),
    );
    out.secret = ci.derived_secret;
    out.problems.extend(ci.problem);

    if out.problems.is_empty() {
        out.vm = Some(vm::vm(
            machine,
            spec,
            network::vm_networks(&spec.networks),
            ci.volume,
            &vm::Settings {
                eviction_strategy: inputs.eviction_strategy,
                label_prefixes: inputs.label_prefixes,
                hardware: inputs.hardware,
            },
        ));
    }
    out
}

#[cfg(test)]
mod tests;
