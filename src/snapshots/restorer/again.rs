//! The disks a restore makes again under their own names `<machine>-<disk>`, from the claims
//! KubeVirt restored: a claim cloned from its restored claim (blank disk), or a DataVolume that
//! CDI clones from it (disk with a source), each with the Machine's evidence.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, TypedLocalObjectReference,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::ResourceExt;
use kube::api::ObjectMeta;

use super::super::context::Context;
use super::super::error::Error;
use super::Observed;
use crate::api::Machine;
use crate::api::names::PROOF_ANNOTATION;
use crate::reconciler::apis::cdi::{DataVolume, StorageResources, StorageSpec};
use crate::reconciler::decide::desired::datavolume;
use crate::reconciler::decide::desired::meta::{controller_ref, machine_labels};
use crate::reconciler::decide::evidence::Target as ProofTarget;
use crate::reconciler::observe::cleanup::retains_disks;

/// What one disk is made again from: the Machine, the restored claim's spec, and the size (the
/// larger of the restored claim's and the replaced claim's, recorded when adopting began).
fn source<'a>(
    o: &'a Observed,
    from: &str,
) -> Result<(&'a Machine, PersistentVolumeClaimSpec, Option<Quantity>), Error> {
    let machine = o
        .machine
        .as_ref()
        .ok_or_else(|| Error::MachineGone(o.restore.spec.machine_name.clone()))?;
    let source = o
        .claims
        .get(from)
        .and_then(|c| c.spec.clone())
        .unwrap_or_default();
    let restored_size =
        (source.resources.as_ref()).and_then(|r| r.requests.as_ref()?.get("storage").cloned());
    let recorded_size = (o.restore.status.as_ref())
        .and_then(|s| s.disks.iter().find(|d| d.restored_claim == from))
        .and_then(|d| d.size.clone())
        .map(Quantity);
    Ok((machine, source, larger(restored_size, recorded_size)))
}

/// The made-for proof of `kind` `name` for `machine`, as the reconciler stamps what it makes.
fn proof(ctx: &Context, machine: &Machine, kind: &str, name: &str) -> BTreeMap<String, String> {
    let ns = machine.namespace().unwrap_or_default();
    let target = ProofTarget {
        kind,
        namespace: &ns,
        name,
    };
    let proof = ctx.key.proof(
        &target,
        &machine.name_any(),
        &machine.uid().unwrap_or_default(),
    );
    BTreeMap::from([(PROOF_ANNOTATION.to_owned(), proof)])
}

/// Claim `name` made again as a clone of the restored claim `from`: the restored claim's modes
/// and class, the replaced claim's size (never smaller), the Machine's labels, controller
/// reference (unless it retains its disks) and made-for proof, as the reconciler makes claims.
pub fn claim(
    ctx: &Context,
    o: &Observed,
    name: &str,
    from: &str,
) -> Result<PersistentVolumeClaim, Error> {
    let (machine, source, size) = source(o, from)?;
    let machine_name = machine.name_any();
    Ok(PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: machine.namespace(),
            labels: Some(machine_labels(&machine_name)),
            annotations: Some(proof(ctx, machine, "PersistentVolumeClaim", name)),
            owner_references: (!retains_disks(machine))
                .then(|| controller_ref(machine).map(|c| vec![c]))
                .flatten(),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: source.access_modes,
            storage_class_name: source.storage_class_name,
            volume_mode: source.volume_mode,
            resources: Some(VolumeResourceRequirements {
                requests: size.map(|s| BTreeMap::from([("storage".to_owned(), s)])),
                ..VolumeResourceRequirements::default()
            }),
            data_source: Some(TypedLocalObjectReference {
                api_group: None,
                kind: "PersistentVolumeClaim".to_owned(),
                name: from.to_owned(),
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    })
}

/// The DataVolume `name` of a disk with a source made again as a CDI clone of the restored claim
/// `from`, built as the reconciler builds DataVolumes (`desired::datavolume::restored`: labels,
/// controller reference, CDI's annotations), with the restored claim's modes and class, the
/// larger size, no controller reference when the Machine retains its disks, and the proof.
pub fn data_volume(
    ctx: &Context,
    o: &Observed,
    name: &str,
    from: &str,
) -> Result<DataVolume, Error> {
    let (machine, source, size) = source(o, from)?;
    let prefix = format!("{}-", machine.name_any());
    let disk = name.strip_prefix(&prefix).unwrap_or(name);
    let storage = StorageSpec {
        access_modes: source.access_modes.unwrap_or_default(),
        resources: size.map(|s| StorageResources {
            requests: BTreeMap::from([("storage".to_owned(), s.0)]),
        }),
        storage_class_name: source.storage_class_name,
        volume_mode: source.volume_mode,
    };
    let mut dv = datavolume::restored(machine, disk, from, storage);
    if retains_disks(machine) {
        dv.metadata.owner_references = None;
    }
    dv.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .extend(proof(ctx, machine, "DataVolume", name));
    Ok(dv)
}

/// The larger of two sizes; one that does not parse loses.
fn larger(a: Option<Quantity>, b: Option<Quantity>) -> Option<Quantity> {
    let amount = |q: &Quantity| crate::api::Quantity(q.0.clone()).parse().ok();
    match (a, b) {
        (Some(a), Some(b)) => Some(if amount(&b) > amount(&a) { b } else { a }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_larger_size_wins() {
        let q = |s: &str| Some(Quantity(s.to_owned()));
        assert_eq!(larger(q("1Gi"), q("2Gi")), q("2Gi"));
        assert_eq!(larger(q("2048Mi"), q("1Gi")), q("2048Mi"));
        assert_eq!(larger(None, q("1Gi")), q("1Gi"));
        assert_eq!(larger(q("1Gi"), q("junk")), q("1Gi"));
    }
}
