//! What observe judges once, as it reads (pure): the ownership of every object found under a
//! name the Machine wants, on its evidence (see `decide::ownership`), and what is wrong with the
//! resolved spec. `decide` reads these verdicts; it never judges them again.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Resource, ResourceExt};

use crate::api::{MachineSpec, NetworkConfiguration};
use crate::machine::classes::Class;
use crate::machine::validation::{validate_in, validate_name};
use crate::machine::{Catalog, FieldError};
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};
use crate::reconciler::apis::multus::NetworkAttachmentDefinition;
use crate::reconciler::decide::evidence::OwnershipKey;
use crate::reconciler::decide::ownership::{self, MachineRef, Ownership, Verdicts};
use crate::reconciler::decide::problem::Kind;
use crate::reconciler::decide::remote;
use crate::reconciler::decide::remote_secrets::{self, Wanted};

/// The objects found under the names a Machine wants, whoever made them.
pub struct Found<'a> {
    /// Its VM lives on a remote cluster (attachments are judged by their proof alone there).
    pub remote: bool,
    pub vm: Option<&'a VirtualMachine>,
    /// The VMI named like the Machine.
    pub vmi: Option<&'a VirtualMachineInstance>,
    pub derived_secret: Option<&'a ObjectMeta>,
    pub claims: &'a BTreeMap<String, PersistentVolumeClaim>,
    /// The spec's DataVolumes, and the removed CD-ROMs' its VM still mounts.
    pub data_volumes: &'a BTreeMap<String, DataVolume>,
    pub unwanted_data_volumes: &'a [DataVolume],
    /// The attachments its networks name, and those no live Machine names any more.
    pub attachments: &'a BTreeMap<String, NetworkAttachmentDefinition>,
    pub unused_attachments: &'a [NetworkAttachmentDefinition],
    pub network_configurations: &'a BTreeMap<String, NetworkConfiguration>,
    /// On its remote cluster, the credential copies its sources ask for, as found.
    pub credentials: &'a [(Wanted, remote_secrets::Found)],
    /// Credential copies found on its remote cluster (removed CD-ROMs' DataVolumes read them).
    pub copies: &'a BTreeMap<String, Vec<(Kind, ObjectMeta)>>,
}

/// The ownership of everything `found` holds, for Machine `machine`, judged with `key`.
pub fn verdicts(found: &Found, machine: MachineRef, key: &OwnershipKey) -> Verdicts {
    let vm = ownership::of(found.vm, machine, key);
    let mut v = Verdicts {
        vm,
        vmi: vm == Ownership::Ours && ownership::own_vmi(found.vm, found.vmi).is_some(),
        derived_secret: ownership::of_meta(found.derived_secret, "Secret", machine, key),
        ..Verdicts::default()
    };
    for (name, claim) in found.claims {
        let verdict = ownership::of(Some(claim), machine, key);
        v.claims.insert(name.clone(), verdict);
    }
    let dvs = (found.data_volumes.values()).chain(found.unwanted_data_volumes);
    for dv in dvs {
        let verdict = ownership::of(Some(dv), machine, key);
        v.data_volumes.insert(dv.name_any(), verdict);
    }
    let nads = (found.attachments.values()).chain(found.unused_attachments);
    for nad in nads {
        let name = nad.name_any();
        let nc_uid = (found.network_configurations.get(&name)).and_then(|nc| nc.uid());
        let verdict = remote::attachment(found.remote, Some(nad.meta()), nc_uid.as_deref(), key);
        v.attachments.insert(name, verdict);
    }
    for (w, f) in found.credentials {
        let verdict = ownership::of_meta(f.live(), w.what.kind().as_str(), machine, key);
        v.copies.insert(w.copy.clone(), verdict);
    }
    for (kind, meta) in found.copies.values().flatten() {
        let verdict = ownership::of_meta(Some(meta), kind.as_str(), machine, key);
        v.copies
            .insert(meta.name.clone().unwrap_or_default(), verdict);
    }
    v
}

/// What is wrong with the resolved `spec` of the Machine `name`, sized by `class` (or why no
/// class could size it): what admission would have refused, had it not been bypassed.
pub fn spec_errors(
    name: &str,
    spec: &MachineSpec,
    class: Result<&Class, &FieldError>,
    catalog: &Catalog,
) -> Vec<FieldError> {
    let mut errors = validate_in(spec, class.ok(), catalog).errors;
    if let Err(refused) = class {
        errors.insert(0, refused.clone());
    }
    errors.extend(validate_name(name));
    errors
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::machine::FieldPath;
    use crate::reconciler::decide::ownership::Ownership;

    /// The order admission reports in: the class's refusal first, the name's errors last.
    #[test]
    fn a_refused_class_comes_first_and_a_bad_name_last() {
        let spec: MachineSpec = serde_json::from_value(json!({"template": "nope"})).expect("spec");
        let spec_path = FieldPath::new("spec");
        let template = spec_path.child("template");
        let refused = FieldError::invalid(&template, "nope", "no such class");
        let catalog = Catalog::default();
        let errors = spec_errors("Bad_Name", &spec, Err(&refused), &catalog);
        assert_eq!(errors.first(), Some(&refused));
        assert!(errors.last().is_some_and(|e| e.field == "metadata.name"));
        assert_eq!(spec_errors("m", &spec, Err(&refused), &catalog), [refused]);
    }

    /// Nothing found: every verdict is `Absent`; a VM without a proof is someone else's.
    #[test]
    fn what_is_not_found_is_absent_and_an_unproven_vm_is_foreign() {
        let key = OwnershipKey::new(&[7; 32], None).expect("key");
        let me = MachineRef {
            name: "m",
            uid: Some("uid-m"),
        };
        let (none, no_dvs, no_nads, no_ncs) = (
            BTreeMap::new(),
            BTreeMap::new(),
            BTreeMap::new(),
            BTreeMap::new(),
        );
        let mut found = Found {
            remote: false,
            vm: None,
            vmi: None,
            derived_secret: None,
            claims: &none,
            data_volumes: &no_dvs,
            unwanted_data_volumes: &[],
            attachments: &no_nads,
            unused_attachments: &[],
            network_configurations: &no_ncs,
            credentials: &[],
            copies: &BTreeMap::new(),
        };
        assert_eq!(verdicts(&found, me, &key), Verdicts::default());
        let vm: VirtualMachine = serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {"name": "m", "namespace": "ns", "uid": "uid-vm"},
            "spec": {"template": {"spec": {"domain": {"devices": {}}}}}
        }))
        .expect("vm");
        found.vm = Some(&vm);
        let v = verdicts(&found, me, &key);
        assert_eq!(v.vm, Ownership::Foreign);
        assert_eq!(v.claim("m-root"), Ownership::Absent);
    }
}
