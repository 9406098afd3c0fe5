//! What cleanup reads of a deleting Machine: every object made for it, by name from its cluster
//! (the caches may not hold one yet), metadata only; and whose each object is, judged once, as it
//! is read ([`judge`], pure, on the proofs of `decide::ownership`). What to do with them is
//! `decide::cleanup`'s.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use crate::api::{Machine, MachineSpec};
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};
use crate::reconciler::apis::multus::NetworkAttachmentDefinition;
use crate::reconciler::decide::desired::meta::{derived_secret_name, pvc_name};
use crate::reconciler::decide::evidence::OwnershipKey;
use crate::reconciler::decide::ownership::{self, MachineRef, Ownership};
use crate::reconciler::decide::problem::Kind;
use crate::reconciler::decide::release::{Release, keep, release_of};
use crate::reconciler::decide::volumes::sourced_volumes;
use crate::reconciler::decide::{remote, remote_secrets};
use crate::reconciler::run::cluster::Cluster;
use crate::reconciler::run::context::Context;
use crate::reconciler::run::remotes::{CACHES_FILLING, Unready};
use crate::reconciler::{FINALIZER, RETAIN_DISKS_ANNOTATION};

use super::lookup::copies_found;
use super::{snapshots, unused_networks};

/// Whether the Machine carries our finalizer: without it, nothing waits for a cleanup.
pub fn has_finalizer(machine: &Machine) -> bool {
    machine.finalizers().iter().any(|f| f == FINALIZER)
}

/// Whether the Machine's disks stay when it goes (`vitistack.io/retain-disks: "true"`).
pub fn retains_disks(machine: &impl Resource) -> bool {
    machine
        .meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(RETAIN_DISKS_ANNOTATION))
        .is_some_and(|v| v == "true")
}

/// What remains of one deleting Machine on its cluster, as cleanup read it.
#[derive(Clone, Debug)]
pub struct Remains {
    pub machine: Machine,
    /// The MachineRestore holding the Machine, if one does (by the Machine's uid).
    pub restoring: Option<String>,
    /// Its remote cluster cannot be worked on: nothing below was read.
    pub away: Option<Away>,
    /// `vitistack.io/retain-disks` says its disks stay when it goes.
    pub retain_disks: bool,
    /// Its cluster is remote: no owner reference binds anything there, the proofs alone do.
    pub remote: bool,
    pub vm: Option<ObjectMeta>,
    /// The VMI named like the Machine.
    pub vmi: Option<ObjectMeta>,
    /// The disks' claims, then (where CDI is served) the DataVolumes of the disks with a source
    /// and of the CD-ROMs, in spec order; those found only.
    pub volumes: Vec<Volume>,
    /// Cached DataVolumes labelled for the Machine that its spec no longer names (a removed
    /// CD-ROM's, if the live Machine had not deleted it yet).
    pub removed_data_volumes: Vec<ObjectMeta>,
    pub derived_secret: Option<ObjectMeta>,
    /// Attachments of its networks that no other live Machine there names (where Multus is
    /// served).
    pub attachments: Vec<Attachment>,
    /// On a remote cluster, the copies of its disk sources' credentials found there (Secrets
    /// and ConfigMaps, see `decide::remote_secrets`).
    pub credential_copies: Vec<(Kind, ObjectMeta)>,
    /// Whose each of the objects above is.
    pub verdicts: Verdicts,
}

/// Whose each object read is, judged when it was read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Verdicts {
    /// The VM is ours.
    pub vm: bool,
    /// The VM carries the operator's labels for the Machine (on a remote cluster, one made under
    /// a lost key may be its own).
    pub vm_labelled: bool,
    /// In the order of [`Remains::volumes`].
    pub volumes: Vec<Judged>,
    /// In the order of [`Remains::removed_data_volumes`]: ours.
    pub removed_data_volumes: Vec<bool>,
    pub derived_secret: bool,
    /// In the order of [`Remains::attachments`]: ours.
    pub attachments: Vec<bool>,
    /// In the order of [`Remains::credential_copies`]: ours.
    pub credential_copies: Vec<bool>,
}

/// The evidence on one of the Machine's claims or DataVolumes.
#[derive(Clone, Debug, PartialEq)]
pub struct Judged {
    pub ours: bool,
    /// It references the Machine (always, on a remote cluster).
    pub references: bool,
    /// What keeping it takes (`None`: nothing, it is released already).
    pub keep: Option<Release>,
}

/// What cleanup read, before it is judged.
pub struct Read<'a> {
    pub remote: bool,
    pub vm: Option<&'a ObjectMeta>,
    pub volumes: &'a [Volume],
    pub removed_data_volumes: &'a [ObjectMeta],
    pub derived_secret: Option<&'a ObjectMeta>,
    pub attachments: &'a [Attachment],
    pub credential_copies: &'a [(Kind, ObjectMeta)],
}

impl Remains {
    /// What was read of it.
    pub fn read(&self) -> Read<'_> {
        Read {
            remote: self.remote,
            vm: self.vm.as_ref(),
            volumes: &self.volumes,
            removed_data_volumes: &self.removed_data_volumes,
            derived_secret: self.derived_secret.as_ref(),
            attachments: &self.attachments,
            credential_copies: &self.credential_copies,
        }
    }
}

/// Whose each object `read` holds is, for Machine `me`, on the proofs `key` verifies.
pub fn judge(read: &Read, me: MachineRef, key: &OwnershipKey) -> Verdicts {
    let ours = |kind: Kind, meta: &ObjectMeta| {
        ownership::of_meta(Some(meta), kind.as_str(), me, key) == Ownership::Ours
    };
    let volumes = (read.volumes.iter()).map(|v| Judged {
        ours: ours(v.kind, &v.meta),
        // On a remote cluster no owner reference is ever written: the proof alone binds.
        references: read.remote || release_of(v.kind, &v.meta, me.uid).is_some(),
        keep: keep(v.kind, &v.meta, me, key),
    });
    let attachments = read.attachments.iter().map(|a| {
        let nc = a.network_configuration.as_deref();
        remote::attachment(read.remote, Some(&a.meta), nc, key) == Ownership::Ours
    });
    Verdicts {
        vm: read.vm.is_some_and(|vm| ours(Kind::VirtualMachine, vm)),
        vm_labelled: (read.vm).is_some_and(|vm| ownership::labelled_for(vm, me.name)),
        volumes: volumes.collect(),
        removed_data_volumes: (read.removed_data_volumes.iter())
            .map(|dv| ours(Kind::DataVolume, dv))
            .collect(),
        derived_secret: (read.derived_secret).is_some_and(|s| ours(Kind::Secret, s)),
        attachments: attachments.collect(),
        credential_copies: (read.credential_copies.iter())
            .map(|(kind, meta)| ours(*kind, meta))
            .collect(),
    }
}

/// Why the Machine's remote cluster cannot be worked on.
#[derive(Clone, Debug)]
pub struct Away {
    /// It was looked at and found unusable (not merely being read by a new leader).
    pub probed: bool,
    pub message: String,
}

/// A claim or DataVolume of the Machine's, as read.
#[derive(Clone, Debug)]
pub struct Volume {
    pub kind: Kind,
    /// A disk's (retain-disks covers it), not a CD-ROM's (installer media).
    pub disk: bool,
    pub meta: ObjectMeta,
}

/// An attachment as read, and the uid of the NetworkConfiguration of its name, if that exists.
#[derive(Clone, Debug)]
pub struct Attachment {
    pub meta: ObjectMeta,
    pub network_configuration: Option<String>,
}

/// Reads what cleanup needs of the Machine's `cluster` (or why it cannot), by its resolved
/// `spec`; nothing while the Machine carries no finalizer of ours (then nothing waits for a
/// cleanup), or while a restore holds it.
pub async fn remains(
    machine: &Machine,
    spec: &MachineSpec,
    ctx: &Context,
    cluster: Result<&Cluster, &Unready>,
) -> Result<Remains, kube::Error> {
    let ns = machine.namespace().unwrap_or_default();
    let name = machine.name_any();
    let uid = machine.uid();
    let me = MachineRef {
        name: &name,
        uid: uid.as_deref(),
    };
    let remote = cluster.is_err() || cluster.is_ok_and(|c| !c.is_local());
    let mut o = Remains {
        machine: machine.clone(),
        restoring: snapshots::holding(ctx, &ns, me).map(|(name, _)| name),
        away: None,
        retain_disks: retains_disks(machine),
        remote,
        vm: None,
        vmi: None,
        volumes: Vec::new(),
        removed_data_volumes: Vec::new(),
        derived_secret: None,
        attachments: Vec::new(),
        credential_copies: Vec::new(),
        verdicts: Verdicts::default(),
    };
    let cluster = match cluster {
        Ok(cluster) => cluster,
        Err(why) => {
            let probed = why.reason != CACHES_FILLING;
            let message = why.message.clone();
            o.away = Some(Away { probed, message });
            return Ok(o);
        }
    };
    if !has_finalizer(machine) || o.restoring.is_some() {
        return Ok(o);
    }
    let client = &cluster.client;

    let vms: Api<VirtualMachine> = Api::namespaced(client.clone(), &ns);
    let vm = vms.get_metadata_opt(&name).await?.map(|m| m.metadata);
    let vmis: Api<VirtualMachineInstance> = Api::namespaced(client.clone(), &ns);
    o.vmi = vmis.get_metadata_opt(&name).await?.map(|m| m.metadata);

    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let mut volumes = Vec::new();
    for disk in &spec.disks {
        if let Some(found) = pvcs.get_metadata_opt(&pvc_name(&name, &disk.name)).await? {
            let (kind, disk, meta) = (Kind::Claim, true, found.metadata);
            volumes.push(Volume { kind, disk, meta });
        }
    }
    let mut removed_data_volumes = Vec::new();
    if cluster.apis.cdi {
        let dvs: Api<DataVolume> = Api::namespaced(client.clone(), &ns);
        let sourced = sourced_volumes(&name, spec);
        for v in &sourced {
            if let Some(found) = dvs.get_metadata_opt(&v.claim_name).await? {
                let (kind, disk, meta) = (Kind::DataVolume, v.disk, found.metadata);
                volumes.push(Volume { kind, disk, meta });
            }
        }
        let removed = cluster.stores.data_volumes.state_filter(|dv| {
            dv.namespace().as_deref() == Some(ns.as_str())
                && dv.brief().as_deref() == Some(name.as_str())
                && !sourced.iter().any(|v| v.claim_name == dv.name_any())
        });
        removed_data_volumes = (removed.iter())
            .filter_map(|dv| dv.unpack().ok())
            .map(|dv| dv.metadata)
            .collect();
    }

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let derived = secrets
        .get_metadata_opt(&derived_secret_name(&name))
        .await?;
    let derived_secret = derived.map(|m| m.metadata);

    let mut attachments = Vec::new();
    if cluster.apis.multus {
        let nads: Api<NetworkAttachmentDefinition> = Api::namespaced(client.clone(), &ns);
        let unused: BTreeSet<String> = unused_networks(ctx, cluster, &ns, &name);
        let mine: BTreeSet<&str> = (spec.networks.iter())
            .map(|n| n.network_name.as_str())
            .collect();
        for network in mine.into_iter().filter(|n| unused.contains(*n)) {
            let Some(found) = nads.get_metadata_opt(network).await? else {
                continue;
            };
            let network_configuration = (ctx.stores.network_configurations)
                .get(&ObjectRef::new(network).within(&ns))
                .and_then(|nc| nc.uid());
            let attachment = Attachment {
                meta: found.metadata,
                network_configuration,
            };
            attachments.push(attachment);
        }
    }
    let credential_copies = match remote {
        true => copies_found(client, &ns, remote_secrets::copies(&name, spec)).await?,
        false => Vec::new(),
    };
    // Judged once, here, on what was just read, for the Machine's name and uid.
    let read = Read {
        remote,
        vm: vm.as_ref(),
        volumes: &volumes,
        removed_data_volumes: &removed_data_volumes,
        derived_secret: derived_secret.as_ref(),
        attachments: &attachments,
        credential_copies: &credential_copies,
    };
    o.verdicts = judge(&read, me, &cluster.key);
    o.vm = vm;
    o.volumes = volumes;
    o.removed_data_volumes = removed_data_volumes;
    o.derived_secret = derived_secret;
    o.attachments = attachments;
    o.credential_copies = credential_copies;
    Ok(o)
}
