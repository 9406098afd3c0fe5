//! Decide: a pure function of what was observed. It says what to write and delete, and which
//! problems block what; nothing here talks to the API (table tests in `decide/tests.rs`).
//!
//! Ownership gates every write (see [`ownership`]; judged once, when observed): an object with a
//! name we want that is not ours (and, for a claim, not a released one of this Machine) is a conflict,
//! never written. The VM is decided only when every claim it mounts, every attachment and the
//! derived Secret it names may be written by us; `act` then writes it only after those writes
//! succeeded, so it never mounts a claim another Machine controls. DataVolumes (disks with a
//! source, CD-ROMs) follow the claims' rules; the claim CDI fills for one must be controlled by
//! that DataVolume.
//!
//! This folder is the pure core: nothing in it calls the API. Beside the decision itself: the
//! [`desired`] objects, [`ownership`] rules, [`drift`], [`provisioning`], [`status`], the
//! [`problem`] vocabulary, [`volumes`], the resolved [`spec`], and when a status is written
//! ([`status_write`]).

pub mod cleanup;
pub mod desired;
pub mod disks;
pub mod drift;
pub mod eviction;
pub mod evidence;
pub mod guest;
pub mod held;
pub mod hotplug;
pub mod key_start;
pub mod migration;
pub mod node;
pub mod notices;
pub mod ownership;
pub mod placement;
pub mod problem;
pub mod provisioning;
pub mod release;
pub mod remote;
pub mod remote_clones;
pub mod remote_namespace;
pub mod remote_secrets;
pub mod reprove;
pub mod restart;
pub mod restart_budget;
pub mod spec;
pub mod status;
pub mod status_write;
pub mod storage_defaults;
pub mod volumes;

pub use ownership::own_vmi;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use kube::ResourceExt;

use crate::machine::Catalog;
use crate::machine::classes::Hardware;

use crate::reconciler::FINALIZER;
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::apis::kubevirt::VirtualMachine;
use crate::reconciler::apis::multus::NetworkAttachmentDefinition;
use crate::reconciler::decide::desired::Inputs;
use crate::reconciler::decide::desired::meta::derived_secret_name;
use crate::reconciler::decide::desired::vm::references_secret;
use crate::reconciler::decide::disks::conflict;
use crate::reconciler::decide::evidence::OwnershipKey;
use crate::reconciler::decide::ownership::{MachineRef, Ownership};
use crate::reconciler::decide::problem::{Kind, Problem};
use crate::reconciler::decide::release::Release;
use crate::reconciler::observe::{Derived, Observed};

#[derive(Debug, Default)]
pub struct Decision {
    /// The Machine has never been reconciled and carries no finalizer (it bypassed the
    /// webhook): add it. A finalizer removed later stays removed (docs/design/admission.md, "Endpoints").
    pub add_finalizer: bool,
    pub claims: Vec<PersistentVolumeClaim>,
    pub data_volumes: Vec<DataVolume>,
    /// A remote Machine's credential copies the DataVolumes above read: written before them.
    pub copies: remote_secrets::Copies,
    pub attachments: Vec<NetworkAttachmentDefinition>,
    pub secret: Option<Secret>,
    /// Written last, and only if every write above succeeded.
    pub vm: Option<VirtualMachine>,
    /// Our DataVolumes of CD-ROMs removed from the Machine, each followed (remote) by the
    /// credential copies of ours it read: (kind, name, uid), deleted in this order once the VM
    /// written no longer mounts them.
    pub delete_removed: Vec<(Kind, String, String)>,
    /// Our attachments that no Machine uses any more.
    pub delete_attachments: Vec<NetworkAttachmentDefinition>,
    /// Our derived Secret, once the VM written no longer names it (its uid, as a precondition).
    pub delete_derived_secret: Option<String>,
    pub problems: Vec<Problem>,
    /// `retain-disks` holds: `DisksRetained` is shown.
    pub retain: bool,
    /// Claims and DataVolumes of ours to free of the Machine's owner references first.
    pub release: Vec<Release>,
    /// CDI's claims to grow (name, size): a grown disk or CD-ROM with a source.
    pub grow_claims: Vec<(String, String)>,
    /// Released claims and DataVolumes the writes adopt.
    pub adopting: Vec<(Kind, String)>,
    /// A restart asked through `vitistack.io/restarted-at`, and the value to record.
    pub restart: restart::Restart,
    /// The live VM is ours: the status reads it (and the write replaces it).
    pub vm_ours: bool,
    /// A node drain that reached the VM: `EvictionRequested`, and maybe a restart off the node.
    pub eviction: Option<eviction::Eviction>,
    /// The VM's node, not Ready: `NodeUnreachable` past the grace, a rerun when it ends.
    pub node: node::Verdict,
    /// The VMI its VM controls, as the restart budget sees it (`run` gates `restart` on it).
    pub vmi: Option<restart_budget::Vmi>,
    /// The disks hot-plugged into the running VM, and those waiting for a restart.
    pub hotplug: hotplug::Plan,
}

pub fn decide(o: &Observed, catalog: &Catalog, key: &OwnershipKey) -> Decision {
    let mut d = decide_objects(o, catalog);
    if d.vm.is_some() {
        // The VM written without them: KubeVirt detaches them, their claims are kept.
        d.release.extend(hotplug::unplug::keep_unplugged(o, key));
    }
    if o.remote {
        remote::without_owner_references(&mut d, key);
        let ns = o.machine.namespace().unwrap_or_default();
        let at = (MachineRef::of(&o.machine), ns.as_str());
        let made = |dv: &str| o.data_volumes.contains_key(dv);
        let found = (&o.credentials[..], &o.verdicts);
        d.copies = remote_secrets::decide_copies(&mut d.data_volumes, found, at, made);
    }
    d
}

fn decide_objects(o: &Observed, catalog: &Catalog) -> Decision {
    let machine = &o.machine;
    let name = machine.name_any();
    let vm_ownership = o.verdicts.vm;
    let mut out = Decision {
        add_finalizer: machine.status.is_none()
            && !machine.finalizers().iter().any(|f| f == FINALIZER),
        vm_ours: vm_ownership == Ownership::Ours,
        ..Decision::default()
    };
    let vmi = o.vmi.as_ref().filter(|_| o.verdicts.vmi);
    out.vmi = vmi.and_then(restart_budget::Vmi::of);

    let errors = &o.spec_errors;
    if !errors.is_empty() {
        // It bypassed admission: report, make nothing, and wait for the user to fix it.
        out.add_finalizer = false;
        out.problems.push(Problem::InvalidSpec {
            template_not_found: errors.iter().any(|e| e.field == "spec.template"),
            message: errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        });
        return out;
    }

    // Without the NetworkAttachmentDefinition API no attachment can be made: say so instead.
    let no_networks = Default::default();
    let network_configurations = if o.multus_installed || o.spec.networks.is_empty() {
        &o.network_configurations
    } else {
        out.problems.push(Problem::MultusNotInstalled);
        &no_networks
    };
    let pins = &o.clone_sources.pins;
    let no_hardware = Hardware::default();
    let mut desired = desired::derive(&Inputs {
        machine,
        spec: &o.spec,
        network_configurations,
        storage_classes: &o.storage_classes,
        source_secret: o.source_secret.as_ref(),
        network_policy: catalog.networks(),
        eviction_strategy: catalog.eviction_strategy(),
        label_prefixes: catalog.label_prefixes(),
        copy_user_data: o.remote,
        pins,
        hardware: o.class.as_ref().map_or(&no_hardware, |c| &c.hardware),
    });
    let sourced = &o.sourced;
    if !o.cdi_installed && !sourced.is_empty() {
        // Nothing can import or clone: no DataVolume, and no VM mounting one.
        out.problems.push(Problem::CdiNotInstalled {
            volumes: sourced.iter().map(|v| v.label.clone()).collect(),
        });
        desired.data_volumes.clear();
        desired.vm = None;
    }
    if !o.multus_installed && !o.spec.networks.is_empty() {
        // derive() reported every network as missing; the one problem above says why.
        desired
            .problems
            .retain(|p| !matches!(p, Problem::NetworkConfigurationNotFound { .. }));
        desired.vm = None;
    }
    out.problems.append(&mut desired.problems);
    let disk_names: Vec<&str> = o.spec.disks.iter().map(|d| d.name.as_str()).collect();
    let live = o.vm.as_ref().filter(|_| out.vm_ours);
    let running = hotplug::Running::of(vmi);
    out.hotplug = hotplug::plan(&disk_names, live, running.as_ref(), o.hotplug);
    if let Some(vm) = desired.vm.as_mut() {
        hotplug::apply(&out.hotplug, vm);
    }

    let disks = disks::decide(o, sourced, desired.pvcs, desired.data_volumes);
    out.retain = disks.retain;
    out.claims = disks.claims;
    out.data_volumes = disks.data_volumes;
    out.release = disks.release;
    out.grow_claims = disks.grow;
    out.adopting = disks.adopting;
    out.problems.extend(disks.problems);
    if o.remote_clones.is_some() {
        // Every unmade dataSource volume of a remote Machine was resolved there: pinned, or
        // unusable for the reason resolved (the annotation does not apply).
        (out.problems).retain(|p| !matches!(p, Problem::CloneSourceNotPinned { .. }));
        out.problems
            .extend(o.clone_sources.problems.iter().cloned());
    }
    for nad in desired.attachments {
        let nad_name = nad.name_any();
        if o.verdicts.attachment(&nad_name).writable(false) {
            out.attachments.push(nad);
        } else {
            out.problems.push(conflict(Kind::Attachment, nad_name));
        }
    }
    // Ours that no Machine uses any more.
    out.delete_attachments = o
        .unused_attachments
        .iter()
        .filter(|nad| o.verdicts.attachment(&nad.name_any()) == Ownership::Ours)
        .cloned()
        .collect();
    let derived = derived_secret_name(&name);
    let secret_ownership = o.verdicts.derived_secret;
    if let Some(secret) = desired.secret {
        if !secret_ownership.writable(false) {
            out.problems.push(conflict(Kind::Secret, derived.clone()));
        } else if !matches!(o.derived_secret, Derived::Remembered(_)) {
            // Observe reads it whenever what it remembers may not hold this: a remembered one
            // does, and is not written again.
            out.secret = Some(secret);
        }
    }
    if let Some(vm) = desired.vm {
        let vm_ours = vm_ownership.writable(false);
        if !vm_ours {
            out.problems
                .push(conflict(Kind::VirtualMachine, name.clone()));
        }
        // Every dependency must be ours to write: a conflict anywhere holds the VM back.
        if vm_ours && out.problems.is_empty() {
            let names_derived = references_secret(&vm, &derived);
            if !names_derived && secret_ownership == Ownership::Ours {
                out.delete_derived_secret = o.derived_secret.meta().and_then(|m| m.uid.clone());
            }
            // A removed CD-ROM's, once the VM no longer mounts it, and this Machine's only: a
            // released one (retain-disks) is left alone. After each, the copies of ours it read.
            for dv in &o.unwanted_data_volumes {
                let name = dv.name_any();
                let ours = o.verdicts.data_volume(&name) == Ownership::Ours;
                let Some(uid) = dv.uid().filter(|_| ours) else {
                    continue;
                };
                let copies = (o.removed_copies.get(&name).into_iter().flatten())
                    .filter_map(|(kind, m)| Some((*kind, m.name.clone()?, m.uid.clone()?)))
                    .filter(|(_, copy, _)| o.verdicts.copy(copy) == Ownership::Ours);
                out.delete_removed.push((Kind::DataVolume, name, uid));
                out.delete_removed.extend(copies);
            }
            out.vm = Some(vm);
        }
    }

    let strategy = o.eviction_strategy.as_deref();
    out.eviction = eviction::decide(vmi, strategy, catalog.external_eviction());
    let vmi_node = vmi.and_then(|v| v.status.as_ref()?.node_name.as_deref());
    out.node = node::decide(vmi_node, o.node.as_ref(), o.node_grace, o.now);
    let evacuate = (out.eviction.as_ref())
        .filter(|e| e.restart)
        .map(|e| e.node.as_str());
    let vm = o.vm.as_ref().filter(|_| out.vm_ours);
    let restoring = o.restoring.is_some();
    let how = (o.run_strategy.as_str(), evacuate);
    out.restart = restart::wanted(&o.machine, &o.spec, (vm, vmi), how, restoring);
    if restoring {
        hold_for_restore(&mut out);
    }
    out
}

/// A MachineRestore is replacing the disks: nothing of the VM or the disks is written, deleted,
/// released or grown (its stopped VM and restored claims are not drift; no restart either, see
/// [`restart::wanted`]).
fn hold_for_restore(out: &mut Decision) {
    out.claims.clear();
    out.data_volumes.clear();
    out.vm = None;
    out.delete_removed.clear();
    out.delete_derived_secret = None;
    out.release.clear();
    out.grow_claims.clear();
    out.adopting.clear();
}

#[cfg(test)]
mod tests;
