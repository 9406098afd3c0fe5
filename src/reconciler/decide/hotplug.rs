//! Disk hot-plug (pure): whether the VM's cluster serves KubeVirt's declarative hot-plug, and
//! which of a Machine's disks the VM writes `hotpluggable`.
//!
//! Served only when that cluster's `KubeVirt` resource lists the feature gate
//! `DeclarativeHotplugVolumes` (KubeVirt >= 1.6; Beta and on by default from 1.9, but read, never
//! assumed: it must be listed), does not list `HotplugVolumes` (with it KubeVirt skips the
//! declarative path and only its imperative subresource API hot-plugs), and sets
//! `vmRolloutStrategy: LiveUpdate`.
//!
//! A disk is written hot-pluggable (`hotpluggable: true` on its `dataVolume` or
//! `persistentVolumeClaim` volume, bus `scsi`) when the live VM already has it so (once
//! hot-plugged it stays so: turning it back is a change only a restart applies), or when a VMI
//! runs without it and hot-plug is served: KubeVirt then attaches it to the running VMI. Served or
//! not, a disk the running VMI lacks and that is not hot-plugged waits for a restart, and the
//! Machine's `RestartRequired` says why ([`NotServed`]). CD-ROMs are never hot-plugged.

use std::collections::BTreeSet;

use crate::api::MachineStatus;
use crate::api::hotplug::DiskHotplug;
use crate::api::source::DiskStatus;

use super::problem::Kind;
use super::provisioning::reason::RESTART_REQUIRED;
use crate::reconciler::apis::kubevirt::{
    KubeVirt, VirtualMachine, VirtualMachineInstance, Volume, vmi_phase,
};

/// KubeVirt's feature gate for declarative volume hot-plug.
pub const DECLARATIVE_GATE: &str = "DeclarativeHotplugVolumes";
/// KubeVirt's older gate for the imperative (subresource) hot-plug API.
pub const IMPERATIVE_GATE: &str = "HotplugVolumes";
/// The rollout strategy that applies live-updatable VM changes to the running VMI.
pub const LIVE_UPDATE: &str = "LiveUpdate";
/// The bus of a hot-plugged disk (KubeVirt hot-plugs `scsi` and `virtio`; `scsi` needs no free
/// PCI port).
pub const HOTPLUG_BUS: &str = "scsi";

/// Why the VM's cluster does not serve declarative hot-plug. [`NotServed::reason`] is the
/// word the `RestartRequired` condition and its Event carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotServed {
    /// No `KubeVirt` resource found on the VM's cluster (or its API not served there).
    NoKubeVirt,
    GateDisabled,
    ImperativeGate,
    NotLiveUpdate,
}

impl NotServed {
    pub fn reason(self) -> &'static str {
        match self {
            NotServed::NoKubeVirt => "HotplugKubeVirtNotFound",
            NotServed::GateDisabled => "HotplugGateDisabled",
            NotServed::ImperativeGate => "HotplugImperativeOnly",
            NotServed::NotLiveUpdate => "HotplugNotLiveUpdate",
        }
    }

    pub fn why(self) -> String {
        match self {
            NotServed::NoKubeVirt => {
                "no KubeVirt resource (kubevirts.kubevirt.io) was found on the VM's cluster, or \
                 the operator may not list them there"
                    .into()
            }
            NotServed::GateDisabled => format!(
                "the cluster's KubeVirt does not enable {DECLARATIVE_GATE} \
                 (spec.configuration.developerConfiguration.featureGates)"
            ),
            NotServed::ImperativeGate => format!(
                "the cluster's KubeVirt enables {IMPERATIVE_GATE}, under which KubeVirt applies no \
                 declarative hot-plug"
            ),
            NotServed::NotLiveUpdate => format!(
                "the cluster's KubeVirt's spec.configuration.vmRolloutStrategy is not {LIVE_UPDATE}"
            ),
        }
    }
}

/// Whether the cluster whose `KubeVirt` resource is `kubevirt` serves declarative hot-plug.
pub fn served(kubevirt: Option<&KubeVirt>) -> Result<(), NotServed> {
    let (gates, rollout) = kubevirt.ok_or(NotServed::NoKubeVirt)?.gates_and_rollout();
    let listed = |g: &str| gates.iter().any(|x| x == g);
    if !listed(DECLARATIVE_GATE) {
        return Err(NotServed::GateDisabled);
    }
    if listed(IMPERATIVE_GATE) {
        return Err(NotServed::ImperativeGate);
    }
    if rollout != Some(LIVE_UPDATE) {
        return Err(NotServed::NotLiveUpdate);
    }
    Ok(())
}

/// The cluster's `KubeVirt` resource among those cached: the first by namespace and name
/// (KubeVirt acts on one only, and refuses to deploy a second).
pub fn install<'a>(found: impl IntoIterator<Item = &'a KubeVirt>) -> Option<&'a KubeVirt> {
    found
        .into_iter()
        .min_by_key(|k| (k.metadata.namespace.clone(), k.metadata.name.clone()))
}

/// What the running VMI has, as far as hot-plug needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Running<'a> {
    /// Its volumes' names; empty when it lists none, then the live VM's stand for them.
    pub volumes: BTreeSet<&'a str>,
}

impl<'a> Running<'a> {
    /// The VMI, while it is not finished (a Pending one gets what is hot-plugged once it runs).
    pub fn of(vmi: Option<&'a VirtualMachineInstance>) -> Option<Running<'a>> {
        let vmi = vmi?;
        let phase = vmi.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some(vmi_phase::SUCCEEDED | vmi_phase::FAILED)) {
            return None;
        }
        let volumes = vmi.spec.volumes.iter().map(|v| v.name.as_str()).collect();
        Some(Running { volumes })
    }
}

/// Which disks the VM writes hot-pluggable, and which wait for a restart.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Disks written hot-pluggable, in spec order.
    pub hotplugged: Vec<String>,
    /// Disks the running VMI lacks that are not hot-plugged, in spec order, and why.
    pub waiting: Vec<String>,
    pub why: Option<NotServed>,
}

/// The plan for the Machine's `disks` (names, in spec order), given the `live` VM, the VMI
/// `running` (if any) and whether hot-plug is `served`.
pub fn plan(
    disks: &[&str],
    live: Option<&VirtualMachine>,
    running: Option<&Running>,
    served: Result<(), NotServed>,
) -> Plan {
    let live_volumes: &[Volume] = live.map_or(&[], |vm| &vm.spec.template.spec.volumes);
    let live_has = |d: &str| live_volumes.iter().find(|v| v.name == d);
    let mut out = Plan::default();
    for &d in disks {
        if live_has(d).is_some_and(is_hotpluggable) {
            out.hotplugged.push(d.to_owned());
            continue;
        }
        let Some(r) = running else { continue };
        let attached = if r.volumes.is_empty() {
            live_has(d).is_some()
        } else {
            r.volumes.contains(d)
        };
        if attached {
            continue;
        }
        match served {
            Ok(()) => out.hotplugged.push(d.to_owned()),
            Err(why) => {
                out.waiting.push(d.to_owned());
                out.why = Some(why);
            }
        }
    }
    out
}

/// `status.disks[].hotplug` of each hot-plugged disk: KubeVirt's phase of its volume on the VMI.
pub fn show(disks: &mut [DiskStatus], plan: &Plan, vmi: Option<&VirtualMachineInstance>) {
    let volumes = vmi
        .and_then(|v| v.status.as_ref())
        .map(|s| &s.volume_status[..]);
    for d in disks
        .iter_mut()
        .filter(|d| plan.hotplugged.contains(&d.name))
    {
        let phase = volumes
            .and_then(|all| all.iter().find(|v| v.name == d.name))
            .and_then(|v| v.phase.clone());
        d.hotplug = Some(DiskHotplug { phase });
    }
}

/// The Machine's `RestartRequired` while disks wait for a restart, as (reason, message):
/// KubeVirt's own message, when it says so too, follows.
pub fn restart_required(plan: &Plan, kubevirts: Option<&str>) -> Option<(String, String)> {
    let why = plan.why?;
    let disks = plan.waiting.join(", ");
    let mut message = format!(
        "disk(s) {disks} added to the running VM wait for a restart, not hot-plugged: {}",
        why.why()
    );
    if let Some(k) = kubevirts {
        message.push_str(&format!("; KubeVirt: {k}"));
    }
    Some((why.reason().to_owned(), message))
}

/// The Event reason of a disk newly hot-plugged.
pub const DISK_HOTPLUGGED: &str = "DiskHotplugged";

/// Normal Events for the change from `old` to `new`, as (reason, note): each disk newly
/// hot-plugged, and disks newly waiting for a restart (the condition's reason and message).
pub fn events(old: Option<&MachineStatus>, new: &MachineStatus) -> Vec<(String, String)> {
    let was = |name: &str| {
        old.into_iter()
            .flat_map(|s| &s.disks)
            .any(|d| d.name == name && d.hotplug.is_some())
    };
    let mut out: Vec<(String, String)> = (new.disks.iter())
        .filter(|d| d.hotplug.is_some() && !was(&d.name))
        .map(|d| {
            let note = format!("disk {} is hot-plugged into the running VM", d.name);
            (DISK_HOTPLUGGED.to_owned(), note)
        })
        .collect();
    let restart = |s: &MachineStatus| {
        (s.conditions.iter())
            .find(|c| c.type_ == RESTART_REQUIRED && c.status == "True")
            .map(|c| (c.reason.clone(), c.message.clone()))
    };
    let reasons = [
        NotServed::NoKubeVirt,
        NotServed::GateDisabled,
        NotServed::ImperativeGate,
        NotServed::NotLiveUpdate,
    ]
    .map(NotServed::reason);
    if let Some((reason, message)) = restart(new)
        && reasons.contains(&reason.as_str())
        && old.and_then(restart).map(|(r, _)| r) != Some(reason.clone())
    {
        out.push((reason, message));
    }
    out
}

/// A `dataVolume` or `persistentVolumeClaim` volume marked hot-pluggable.
pub fn is_hotpluggable(v: &Volume) -> bool {
    v.data_volume.as_ref().is_some_and(|d| d.hotpluggable)
        || v.persistent_volume_claim
            .as_ref()
            .is_some_and(|p| p.hotpluggable)
}

/// Writes the plan into the desired `vm`: each hot-plugged disk's volume hot-pluggable, its bus
/// `scsi`.
pub fn apply(plan: &Plan, vm: &mut VirtualMachine) {
    let spec = &mut vm.spec.template.spec;
    for name in &plan.hotplugged {
        if let Some(v) = spec.volumes.iter_mut().find(|v| v.name == *name) {
            if let Some(d) = v.data_volume.as_mut() {
                d.hotpluggable = true;
            }
            if let Some(p) = v.persistent_volume_claim.as_mut() {
                p.hotpluggable = true;
            }
        }
        if let Some(d) = spec
            .domain
            .devices
            .disks
            .iter_mut()
            .find(|d| d.name == *name)
            && let Some(t) = d.disk.as_mut()
        {
            t.bus = Some(HOTPLUG_BUS.to_owned());
        }
    }
}

/// The claims and DataVolumes of the disks hot-plugged into the `live` VM that the Machine's
/// `disks` no longer name, as (kind, name).
pub fn unplugged(live: Option<&VirtualMachine>, disks: &[&str]) -> Vec<(Kind, String)> {
    let volumes = live.map_or(&[][..], |vm| &vm.spec.template.spec.volumes[..]);
    volumes
        .iter()
        .filter(|v| is_hotpluggable(v) && !disks.contains(&v.name.as_str()))
        .filter_map(|v| match (&v.data_volume, &v.persistent_volume_claim) {
            (Some(dv), _) => Some((Kind::DataVolume, dv.name.clone())),
            (None, Some(pvc)) => Some((Kind::Claim, pvc.claim_name.clone())),
            (None, None) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests;
pub mod unplug;
