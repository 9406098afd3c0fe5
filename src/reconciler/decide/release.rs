//! Releasing one of the Machine's claims or DataVolumes (pure): freeing it of the Machine's
//! owner references (`retain-disks`, see `disks`), and at cleanup adding the release proof that
//! lets a Machine of its name adopt it (see `cleanup`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::reconciler::decide::evidence::{OwnershipKey, Target};
use crate::reconciler::decide::ownership::MachineRef;
use crate::reconciler::decide::problem::Kind;

/// An object of ours to free of the Machine's owner references (metadata only).
#[derive(Clone, Debug, PartialEq)]
pub struct Release {
    pub kind: Kind,
    pub name: String,
    /// Its owner references without the Machine's.
    pub owners: Vec<OwnerReference>,
    /// The version they were read at: a concurrent change is a conflict, retried.
    pub resource_version: Option<String>,
    /// The release proof to add (at cleanup, for a disk kept for a Machine of this name).
    pub release_proof: Option<String>,
}

/// The release `meta`'s object needs, if it references the Machine with uid `machine_uid`.
pub fn release_of(kind: Kind, meta: &ObjectMeta, machine_uid: Option<&str>) -> Option<Release> {
    let uid = machine_uid?;
    let refs = meta.owner_references.as_deref().unwrap_or_default();
    if !refs.iter().any(|r| r.uid == uid) {
        return None;
    }
    Some(Release {
        kind,
        name: meta.name.clone().unwrap_or_default(),
        owners: refs.iter().filter(|r| r.uid != uid).cloned().collect(),
        resource_version: meta.resource_version.clone(),
        release_proof: None,
    })
}

/// What keeps `meta`'s object (of `kind`, ours) at cleanup: the Machine's references dropped
/// and the release proof, bound to the object's uid, added; `None` when it has both already.
pub fn keep(
    kind: Kind,
    meta: &ObjectMeta,
    machine: MachineRef,
    key: &OwnershipKey,
) -> Option<Release> {
    let release = release_of(kind, meta, machine.uid);
    let uid = meta.uid.as_deref()?;
    let target = Target::of(kind.as_str(), meta)?;
    let proven = key.released_for(kind.as_str(), meta, machine.name);
    if proven && release.is_none() {
        return None;
    }
    let proof = (!proven).then(|| key.release_proof(&target, uid, machine.name));
    let mut r = release.unwrap_or_else(|| Release {
        kind,
        name: meta.name.clone().unwrap_or_default(),
        owners: meta.owner_references.clone().unwrap_or_default(),
        resource_version: meta.resource_version.clone(),
        release_proof: None,
    });
    r.release_proof = proof;
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn referencing(uids: &[&str]) -> ObjectMeta {
        ObjectMeta {
            name: Some("m-data".into()),
            resource_version: Some("7".into()),
            owner_references: Some(
                uids.iter()
                    .map(|u| OwnerReference {
                        uid: (*u).into(),
                        ..OwnerReference::default()
                    })
                    .collect(),
            ),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_release_drops_only_the_machines_references() {
        let r = release_of(
            Kind::Claim,
            &referencing(&["uid-m", "uid-x"]),
            Some("uid-m"),
        )
        .expect("a release");
        assert_eq!(r.name, "m-data");
        assert_eq!(r.resource_version.as_deref(), Some("7"));
        let left: Vec<&str> = r.owners.iter().map(|o| o.uid.as_str()).collect();
        assert_eq!(left, ["uid-x"]);
        assert_eq!(
            release_of(Kind::Claim, &referencing(&["uid-x"]), Some("uid-m")),
            None
        );
        assert_eq!(
            release_of(Kind::Claim, &referencing(&["uid-m"]), None),
            None
        );
    }

    #[test]
    fn a_kept_disk_gets_the_release_proof_for_its_very_uid_once() {
        let key = OwnershipKey::new(&[3; 32], None).expect("key");
        let m = MachineRef {
            name: "m",
            uid: Some("uid-m"),
        };
        let mut meta = referencing(&["uid-m", "uid-x"]);
        meta.uid = Some("uid-c".into());
        let r = keep(Kind::Claim, &meta, m, &key).expect("a release");
        let left: Vec<&str> = r.owners.iter().map(|o| o.uid.as_str()).collect();
        assert_eq!(left, ["uid-x"]);
        let proof = r.release_proof.clone().expect("a release proof");
        // Applied: proven, unreferenced: nothing more to do.
        meta.owner_references = Some(r.owners);
        meta.annotations = Some([(crate::api::names::RELEASE_ANNOTATION.to_owned(), proof)].into());
        assert!(key.released_for("PersistentVolumeClaim", &meta, "m"));
        assert_eq!(keep(Kind::Claim, &meta, m, &key), None);
        // Proven but referenced again: only the references go.
        meta.owner_references = Some(referencing(&["uid-m"]).owner_references.unwrap_or_default());
        let again = keep(Kind::Claim, &meta, m, &key).expect("a release");
        assert_eq!((again.owners.len(), again.release_proof), (0, None));
    }
}
