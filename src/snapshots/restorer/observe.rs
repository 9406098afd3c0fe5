//! Reads what one restore step is decided from: the restore, the Machine, its VM, VMI and
//! claims (the Machine's and the restored ones, with what proves whose they are), the snapshot,
//! the VirtualMachineRestore and the other restores of the Machine.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, ListParams};
use kube::{Resource, ResourceExt};

use super::super::context::Context;
use super::super::error::Error;
use super::super::restore::proof::KUBEVIRT_RESTORE_ANNOTATION;
use super::super::restore::{self, ClaimView, Provenance, phase};
use super::super::site::{NOT_PROBED, Site, elsewhere};
use super::super::snapshot::taken_of_on;
use super::super::workload::{self, Workload};
use super::RESTORE_KIND;
use super::{Observed, machine_view, of};
use crate::api::Machine;
use crate::api::names::pvc_name;
use crate::api::snapshots::{MachineRestore, MachineRestoreStatus, MachineSnapshot};
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};
use crate::reconciler::apis::snapshot::{VirtualMachineRestore, VirtualMachineSnapshot};
use crate::reconciler::decide::ownership::Ownership;
use crate::reconciler::run::remotes::Unready;

/// What the next step is decided from, or why the Machine's cluster cannot be worked on now.
pub(super) async fn observe(
    r: &MachineRestore,
    ctx: &Context,
) -> Result<Result<Observed, Unready>, Error> {
    let ns = r
        .namespace()
        .ok_or_else(|| Error::NoNamespace(r.name_any()))?;
    let name = r.spec.machine_name.as_str();
    let status = r.status.clone().unwrap_or_default();
    let machine = Api::<Machine>::namespaced(ctx.client.clone(), &ns)
        .get_opt(name)
        .await?;
    let snapshot = Api::<MachineSnapshot>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&r.spec.snapshot_name)
        .await?;
    // The Machine's cluster (without the Machine, the operator's own: nothing is its there).
    let site = match &machine {
        Some(m) => workload::site_of(ctx, m, None).await?,
        None => Site::Local,
    };
    let w = match (Workload::of(ctx, &site), site) {
        (_, Site::Wait(why)) => return Ok(Err(why)),
        (Some(w), _) => w,
        (None, _) => {
            return Ok(Err(Unready {
                reason: NOT_PROBED.to_owned(),
                message: "no cluster".to_owned(),
            }));
        }
    };
    let remote = w.is_remote();
    let client = &w.client;
    let elsewhere = (snapshot.as_ref().filter(|_| pending(&status))).and_then(|s| {
        let st = s.status.as_ref()?;
        let taken_on = (st.cluster.as_deref()).zip(st.cluster_identity.as_deref());
        let on = w.remote.as_ref().map(|(c, i)| (c.as_str(), i.as_str()));
        // A snapshot not taken yet is waited for, wherever.
        st.virtual_machine_snapshot_name.as_ref()?;
        elsewhere(taken_on, on)
    });
    let no_snapshot_api = !w.snapshot_api;
    let snapshot_proven_of = match &snapshot {
        // Asked for only where it decides anything: a snapshot of an earlier Machine, allowed.
        Some(s) if r.spec.allow_earlier_machine && !no_snapshot_api && pending(&status) => {
            let vms_name = (s.status.as_ref())
                .and_then(|st| st.virtual_machine_snapshot_name.clone())
                .unwrap_or_else(|| s.name_any());
            let vms = Api::<VirtualMachineSnapshot>::namespaced(client.clone(), &ns)
                .get_opt(&vms_name)
                .await?;
            taken_of_on(&w.key, s, vms.as_ref(), remote)
        }
        _ => None,
    };
    let vm = Api::<VirtualMachine>::namespaced(client.clone(), &ns)
        .get_opt(name)
        .await?;
    let vmi = Api::<VirtualMachineInstance>::namespaced(client.clone(), &ns)
        .get_opt(name)
        .await?
        .is_some();
    let vm_restore = match no_snapshot_api {
        false => match Api::<VirtualMachineRestore>::namespaced(client.clone(), &ns)
            .get_opt(&r.name_any())
            .await
        {
            Ok(found) => found,
            // KubeVirt's snapshot API not served on the remote cluster: nothing to find.
            Err(kube::Error::Api(e)) if e.code == 404 && remote => None,
            Err(e) => return Err(e.into()),
        },
        true => None,
    };
    let vm_restore_ours =
        (vm_restore.as_ref()).is_some_and(|v| w.made_for(v.meta(), r, RESTORE_KIND));
    let vm_ours =
        (vm.as_ref()).is_some_and(|vm| of(vm, machine.as_ref(), &w.key) == Ownership::Ours);
    let view = machine
        .as_ref()
        .map(|m| machine_view(m, vm.as_ref(), &status));
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let restore_uid = r.uid().unwrap_or_default();
    let mut claims = BTreeMap::new();
    let mut claim_views = BTreeMap::new();
    let sourced = view.iter().flat_map(|v| &v.sourced);
    let disks = view.iter().flat_map(|v| &v.disks);
    for (disk, data_volume) in disks.map(|d| (d, false)).chain(sourced.map(|d| (d, true))) {
        for claim_name in [
            pvc_name(name, disk),
            restore::restored_claim(name, disk, &restore_uid),
        ] {
            let Some(c) = pvcs.get_opt(&claim_name).await? else {
                continue;
            };
            // Going: as good as gone for the next step; but CDI's claim of a replaced
            // DataVolume is waited for until it is gone for good.
            let cdis = data_volume && claim_name == pvc_name(name, disk);
            if c.meta().deletion_timestamp.is_some() && !cdis {
                continue;
            }
            let view = ClaimView {
                uid: c.uid().unwrap_or_default(),
                ours: of(&c, machine.as_ref(), &w.key) == Ownership::Ours,
                bound: c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"),
                provenance: provenance(&c),
            };
            claim_views.insert(claim_name.clone(), view);
            claims.insert(claim_name, c);
        }
    }
    let mut data_volume_views = BTreeMap::new();
    if view.as_ref().is_some_and(|v| !v.sourced.is_empty()) {
        let dvs: Api<DataVolume> = Api::namespaced(client.clone(), &ns);
        for disk in view.iter().flat_map(|v| &v.sourced) {
            let dv_name = pvc_name(name, disk);
            let Some(dv) = dvs.get_opt(&dv_name).await? else {
                continue;
            };
            if dv.meta().deletion_timestamp.is_some() {
                continue; // Going: its claim is waited for.
            }
            let view = ClaimView {
                uid: dv.uid().unwrap_or_default(),
                ours: of(&dv, machine.as_ref(), &w.key) == Ownership::Ours,
                bound: dv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded"),
                provenance: Provenance::default(),
            };
            data_volume_views.insert(dv_name, view);
        }
    }
    let binder_name = restore::binder::name(&r.name_any());
    let binder = Api::<Pod>::namespaced(client.clone(), &ns)
        .get_metadata_opt(&binder_name)
        .await?
        .map(|p| restore::Binder {
            name: binder_name,
            uid: p.uid().unwrap_or_default(),
            ours: w.made_for(&p.metadata, r, RESTORE_KIND),
            deleting: p.metadata.deletion_timestamp.is_some(),
        });
    // Restores are few: listed, not cached.
    let another = Api::<MachineRestore>::namespaced(ctx.client.clone(), &ns)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        // Under way, or older and still pending: this one waits its turn.
        .find(|o| {
            let p = o.status.as_ref().and_then(|s| s.phase.as_deref());
            let older =
                (o.creation_timestamp(), o.name_any()) < (r.creation_timestamp(), r.name_any());
            o.uid() != r.uid()
                && o.spec.machine_name == name
                && !matches!(p, Some(phase::SUCCEEDED | phase::FAILED))
                && (older || !matches!(p, None | Some(phase::PENDING)))
        })
        .map(|o| o.name_any());
    Ok(Ok(Observed {
        restore: r.clone(),
        another,
        machine,
        view,
        snapshot,
        snapshot_proven_of,
        vm,
        vm_ours,
        vmi,
        vm_restore,
        vm_restore_ours,
        claims,
        claim_views,
        data_volume_views,
        no_snapshot_api,
        binder,
        workload: w,
        elsewhere,
    }))
}

fn pending(status: &MachineRestoreStatus) -> bool {
    status.phase.as_deref().is_none_or(|p| p == phase::PENDING)
}

/// What KubeVirt's restore controller put on claim `c`: the annotation naming its
/// VirtualMachineRestore, the VM controlling it, the VolumeSnapshot it is restored from.
fn provenance(c: &PersistentVolumeClaim) -> Provenance {
    let controller = (c.owner_references().iter())
        .find(|o| o.controller == Some(true) && o.kind == "VirtualMachine")
        .filter(|o| o.api_version.starts_with("kubevirt.io/"));
    let source = c.spec.as_ref().and_then(|s| s.data_source.as_ref());
    Provenance {
        restore_name: c.annotations().get(KUBEVIRT_RESTORE_ANNOTATION).cloned(),
        controller_vm: controller.map(|o| o.uid.clone()),
        volume_snapshot: source
            .filter(|s| {
                s.kind == "VolumeSnapshot"
                    && s.api_group.as_deref() == Some("snapshot.storage.k8s.io")
            })
            .map(|s| s.name.clone()),
    }
}
