//! Whose an object is, decided from its metadata alone (pure, table-tested below).
//!
//! - **Ours**: its controller owner reference carries the owner's uid (the Machine's, or for a
//!   NetworkAttachmentDefinition the NetworkConfiguration's).
//! - **Released**: no controller owner, and the operator's labels for this Machine
//!   (`vitistack.io/managed-by: kubevirt-operator`, `vitistack.io/machine: <name>`). That is
//!   how a claim is left by a `retain-disks` deletion (and how a live retain-disks Machine holds
//!   its claims, with no reference the garbage collector acts on), so a Machine of that name may
//!   adopt it. Only claims are adopted; a released VM or Secret is only ever cleaned up.
//! - **Foreign**: anything else with the name we want. Never modified nor deleted: a conflict.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::reconciler::{MACHINE_LABEL, MANAGED_BY, MANAGED_BY_LABEL};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ownership {
    Absent,
    Ours,
    Released,
    Foreign,
}

impl Ownership {
    /// Whether the reconciler may write the object (create, update or adopt it).
    pub fn writable(self, adoptable: bool) -> bool {
        match self {
            Ownership::Absent | Ownership::Ours => true,
            Ownership::Released => adoptable,
            Ownership::Foreign => false,
        }
    }
}

/// The uid of `meta`'s controller owner, if it has one.
pub fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

fn label<'m>(meta: &'m ObjectMeta, key: &str) -> Option<&'m str> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// Whether `meta` carries the operator's labels for Machine `machine`.
pub fn labelled_for(meta: &ObjectMeta, machine: &str) -> bool {
    label(meta, MANAGED_BY_LABEL) == Some(MANAGED_BY) && label(meta, MACHINE_LABEL) == Some(machine)
}

/// Ownership of an object made for Machine `machine` (uid `owner_uid`).
pub fn of_machine_object(
    meta: Option<&ObjectMeta>,
    machine: &str,
    owner_uid: Option<&str>,
) -> Ownership {
    let Some(meta) = meta else {
        return Ownership::Absent;
    };
    match controller_uid(meta) {
        Some(c) if Some(c) == owner_uid => Ownership::Ours,
        Some(_) => Ownership::Foreign,
        None if labelled_for(meta, machine) => Ownership::Released,
        None => Ownership::Foreign,
    }
}

/// Ownership of a NetworkAttachmentDefinition made for a NetworkConfiguration (uid `nc_uid`,
/// `None` once the NetworkConfiguration is gone: then a controller reference to a
/// NetworkConfiguration of the attachment's name is enough).
pub fn of_attachment(meta: Option<&ObjectMeta>, nc_uid: Option<&str>) -> Ownership {
    let Some(meta) = meta else {
        return Ownership::Absent;
    };
    if label(meta, MANAGED_BY_LABEL) != Some(MANAGED_BY) {
        return Ownership::Foreign;
    }
    let controller = meta
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true));
    match (controller, nc_uid) {
        (Some(c), Some(uid)) if c.uid == uid => Ownership::Ours,
        (Some(c), None)
            if c.kind == "NetworkConfiguration" && meta.name.as_ref() == Some(&c.name) =>
        {
            Ownership::Ours
        }
        _ => Ownership::Foreign,
    }
}

/// Whether `meta` (a VMI's) is controlled by the object with uid `owner_uid` (its VM's).
pub fn controlled_by(meta: &ObjectMeta, owner_uid: Option<&str>) -> bool {
    owner_uid.is_some() && controller_uid(meta) == owner_uid
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;

    fn meta(controller: Option<(&str, bool)>, labels: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            name: Some("m-root".into()),
            owner_references: controller.map(|(uid, is_controller)| {
                vec![OwnerReference {
                    uid: uid.into(),
                    controller: Some(is_controller),
                    ..OwnerReference::default()
                }]
            }),
            labels: (!labels.is_empty()).then(|| {
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<BTreeMap<_, _>>()
            }),
            ..ObjectMeta::default()
        }
    }

    /// A controller (or plain) owner reference: (uid, is controller).
    type Owner = Option<(&'static str, bool)>;
    type Labels = &'static [(&'static str, &'static str)];

    const OURS: &[(&str, &str)] = &[(MANAGED_BY_LABEL, MANAGED_BY), (MACHINE_LABEL, "m")];
    const OTHER_MACHINE: &[(&str, &str)] = &[(MANAGED_BY_LABEL, MANAGED_BY), (MACHINE_LABEL, "a")];
    const SOMEONE: &[(&str, &str)] = &[(MANAGED_BY_LABEL, "helm"), (MACHINE_LABEL, "m")];

    #[test]
    fn machine_objects() {
        use Ownership::*;
        // (controller owner, labels, expected, adoptable claim writable, VM/Secret writable)
        let cases: &[(Owner, Labels, Ownership, bool, bool)] = &[
            (Some(("uid-m", true)), OURS, Ours, true, true),
            // Ours even without labels (someone stripped them): the uid decides.
            (Some(("uid-m", true)), &[], Ours, true, true),
            // Another Machine's (the colliding `a` + `b-root` / `a-b` + `root` case).
            (Some(("uid-a", true)), OTHER_MACHINE, Foreign, false, false),
            // Our labels copied onto someone else's controlled object.
            (Some(("uid-x", true)), OURS, Foreign, false, false),
            // A non-controller reference to us is not control.
            (Some(("uid-m", false)), &[], Foreign, false, false),
            // Released by a retain-disks deletion: adoptable claim.
            (None, OURS, Released, true, false),
            (Some(("uid-m", false)), OURS, Released, true, false),
            // Released, but for another Machine name.
            (None, OTHER_MACHINE, Foreign, false, false),
            // Made by someone else: unlabelled, or labelled by another manager.
            (None, &[], Foreign, false, false),
            (None, SOMEONE, Foreign, false, false),
        ];
        for (i, (controller, labels, want, claim_ok, other_ok)) in cases.iter().enumerate() {
            let m = meta(*controller, labels);
            let got = of_machine_object(Some(&m), "m", Some("uid-m"));
            assert_eq!(got, *want, "case {i}");
            assert_eq!(got.writable(true), *claim_ok, "case {i} claim");
            assert_eq!(got.writable(false), *other_ok, "case {i} VM/Secret");
        }
        assert_eq!(of_machine_object(None, "m", Some("uid-m")), Absent);
        assert!(Absent.writable(false));
    }

    #[test]
    fn attachments() {
        use Ownership::*;
        let managed: &[(&str, &str)] = &[(MANAGED_BY_LABEL, MANAGED_BY)];
        let cases: &[(Owner, Labels, Ownership)] = &[
            (Some(("uid-nc", true)), managed, Ours),
            (Some(("uid-nc", true)), &[], Foreign),
            (Some(("uid-other", true)), managed, Foreign),
            (None, managed, Foreign),
            (None, &[], Foreign),
        ];
        for (i, (controller, labels, want)) in cases.iter().enumerate() {
            let m = meta(*controller, labels);
            assert_eq!(of_attachment(Some(&m), Some("uid-nc")), *want, "case {i}");
        }
        assert_eq!(of_attachment(None, Some("uid-nc")), Absent);
        // The NetworkConfiguration is gone: a reference to one of the attachment's name is ours.
        let mut m = meta(Some(("uid-gone", true)), managed);
        m.name = Some("lan".into());
        assert_eq!(
            of_attachment(Some(&m), None),
            Foreign,
            "not a NetworkConfiguration"
        );
        if let Some(r) = m.owner_references.as_mut().and_then(|r| r.first_mut()) {
            r.kind = "NetworkConfiguration".into();
            r.name = "lan".into();
        }
        assert_eq!(of_attachment(Some(&m), None), Ours);
        m.labels = None;
        assert_eq!(of_attachment(Some(&m), None), Foreign, "not labelled ours");
    }

    #[test]
    fn a_vmi_counts_only_when_its_vm_controls_it() {
        assert!(controlled_by(
            &meta(Some(("uid-vm", true)), &[]),
            Some("uid-vm")
        ));
        assert!(!controlled_by(
            &meta(Some(("uid-vm", false)), OURS),
            Some("uid-vm")
        ));
        assert!(!controlled_by(&meta(None, OURS), Some("uid-vm")));
        assert!(!controlled_by(
            &meta(Some(("uid-x", true)), OURS),
            Some("uid-vm")
        ));
        assert!(!controlled_by(&meta(None, OURS), None));
    }
}
