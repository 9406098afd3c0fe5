//! Disks that adopt a claim already there. Disk `d` of Machine `m` lives in the claim `m-d`;
//! a `retain-disks` deletion leaves that claim behind, and a new Machine of the same name adopts
//! it: the operator, with its own rights, then mounts, resizes and may delete it. So the author
//! must be allowed to do that natively: `update` and `delete` on that claim.
//!
//! Pure: which claims to look up, and, given those that exist, the permissions they need. The
//! look-up (a GET by name per claim) is the shell's ([`super::review`]).

use std::collections::BTreeSet;

use super::Permission;
use crate::api::MachineSpec;
use crate::api::names::pvc_name;

/// What adopting a claim lets the author do through the operator: write it (resize, relabel,
/// mount) and delete it with the Machine.
pub const ADOPTION_VERBS: [&str; 2] = ["update", "delete"];

/// A disk whose claim, if it exists, the Machine would adopt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The disk, e.g. `spec.disks[1]`.
    pub field: String,
    /// Its claim, `<machine>-<disk>`.
    pub claim: String,
}

/// Every disk on CREATE (`old` is `None`), and on UPDATE the disks whose name is new: a disk
/// kept from the stored Machine already holds its claim.
pub fn candidates(machine: &str, old: Option<&MachineSpec>, new: &MachineSpec) -> Vec<Candidate> {
    if machine.is_empty() {
        return Vec::new();
    }
    let kept = |name: &str| old.is_some_and(|o| o.disks.iter().any(|d| d.name == name));
    new.disks
        .iter()
        .enumerate()
        .filter(|(_, d)| !d.name.is_empty() && !kept(&d.name))
        .map(|(i, d)| Candidate {
            field: format!("spec.disks[{i}]"),
            claim: pvc_name(machine, &d.name),
        })
        .collect()
}

/// `update` and `delete` on the claim of every candidate disk whose claim exists in `namespace`.
/// None when no claim of those names exists: a new claim is the operator's to make.
pub fn needed(
    namespace: &str,
    machine: &str,
    old: Option<&MachineSpec>,
    new: &MachineSpec,
    existing: &BTreeSet<String>,
) -> Vec<Permission> {
    candidates(machine, old, new)
        .into_iter()
        .filter(|c| existing.contains(&c.claim))
        .flat_map(|c| {
            ADOPTION_VERBS.map(|verb| Permission {
                field: c.field.clone(),
                verb: verb.to_owned(),
                group: String::new(),
                resource: "persistentvolumeclaims".to_owned(),
                subresource: String::new(),
                namespace: namespace.to_owned(),
                name: c.claim.clone(),
                // Asked only because it exists: naming it tells the author nothing more.
                adopted: true,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(v: serde_json::Value) -> MachineSpec {
        serde_json::from_value(v).expect("test spec")
    }

    #[test]
    fn existing_claims_of_new_disks_need_update_and_delete() {
        let two = spec(json!({"disks": [{"name": "root"}, {"name": "data", "size": "1Gi"}]}));
        let root = spec(json!({"disks": [{"name": "root"}]}));
        let set = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect();
        let on_data = vec![
            "spec.disks[1] update persistentvolumeclaims team/db-data",
            "spec.disks[1] delete persistentvolumeclaims team/db-data",
        ];
        // (what, the stored spec if UPDATE, the claims that exist, permissions needed)
        type Case<'a> = (
            &'a str,
            Option<&'a MachineSpec>,
            BTreeSet<String>,
            Vec<&'a str>,
        );
        let cases: &[Case] = &[
            ("create, no claim exists", None, set(&[]), vec![]),
            (
                "create, data's claim exists",
                None,
                set(&["db-data"]),
                on_data.clone(),
            ),
            (
                "create, both exist",
                None,
                set(&["db-root", "db-data"]),
                vec![
                    "spec.disks[0] update persistentvolumeclaims team/db-root",
                    "spec.disks[0] delete persistentvolumeclaims team/db-root",
                    on_data[0],
                    on_data[1],
                ],
            ),
            (
                "create, another Machine's",
                None,
                set(&["web-data", "db"]),
                vec![],
            ),
            (
                "update, data added",
                Some(&root),
                set(&["db-root", "db-data"]),
                on_data.clone(),
            ),
            (
                "update, disks kept",
                Some(&two),
                set(&["db-root", "db-data"]),
                vec![],
            ),
        ];
        for (what, old, existing, want) in cases {
            let got: Vec<String> = needed("team", "db", *old, &two, existing)
                .iter()
                .map(|p| {
                    format!(
                        "{} {} {} {}/{}",
                        p.field, p.verb, p.resource, p.namespace, p.name
                    )
                })
                .collect();
            assert_eq!(&got, want, "{what}");
            assert!(
                needed("team", "db", *old, &two, existing)
                    .iter()
                    .all(|p| p.adopted)
            );
        }
    }

    #[test]
    fn candidates_are_the_claims_to_look_up() {
        let new = spec(json!({"disks": [{"name": "root"}, {"name": "data", "size": "1Gi"}]}));
        let claims = |old: Option<&MachineSpec>, machine: &str| -> Vec<String> {
            candidates(machine, old, &new)
                .into_iter()
                .map(|c| format!("{} {}", c.field, c.claim))
                .collect()
        };
        assert_eq!(
            claims(None, "db"),
            ["spec.disks[0] db-root", "spec.disks[1] db-data"]
        );
        let root = spec(json!({"disks": [{"name": "root"}]}));
        assert_eq!(claims(Some(&root), "db"), ["spec.disks[1] db-data"]);
        assert!(claims(Some(&new), "db").is_empty());
        // No name yet (generateName before it is given): nothing to adopt.
        assert!(claims(None, "").is_empty());
    }
}
