//! What differs for a Machine whose VM lives on a remote cluster (pure): owner references
//! cannot cross clusters, so none is written there (the remote garbage collector would delete
//! an object whose owner it cannot find). Ownership rests on the made-for proofs alone, and the
//! finalizer deletes explicitly. An attachment, made for a NetworkConfiguration rather than a
//! Machine, gets a proof made for that NetworkConfiguration.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;

use super::Decision;
use super::evidence::{OwnershipKey, Target};
use super::ownership::{self, ATTACHMENT_KIND, Ownership, controller_uid};
use crate::api::names::PROOF_ANNOTATION;

/// `d` with no owner reference on anything it writes, and its attachments proven.
pub fn without_owner_references(d: &mut Decision, key: &OwnershipKey) {
    fn strip(meta: &mut ObjectMeta) {
        meta.owner_references = None;
    }
    d.claims.iter_mut().for_each(|c| strip(c.meta_mut()));
    d.data_volumes.iter_mut().for_each(|v| strip(v.meta_mut()));
    d.secret.iter_mut().for_each(|s| strip(s.meta_mut()));
    d.vm.iter_mut().for_each(|vm| strip(vm.meta_mut()));
    for a in &mut d.attachments {
        let meta = a.meta_mut();
        let proof = (controller_uid(meta).zip(Target::of(ATTACHMENT_KIND, meta)))
            .map(|(uid, target)| key.proof(&target, target.name, uid));
        strip(meta);
        if let Some(proof) = proof {
            meta.annotations
                .get_or_insert_default()
                .insert(PROOF_ANNOTATION.to_owned(), proof);
        }
    }
}

/// Whose an attachment is: by its controller reference locally, by its proof on a remote cluster.
///
/// There, where no owner reference reaches the NetworkConfiguration (so no garbage collector
/// removes the attachment with it), a proof under our key for the NetworkConfiguration of the
/// attachment's name and namespace is ours whatever uid it names: the current one, or an earlier
/// one of that name deleted and re-created (`kubectl replace --force`), whose attachment is
/// rewritten with the new uid's proof or deleted. Nobody else can make such a proof.
pub fn attachment(
    remote: bool,
    meta: Option<&ObjectMeta>,
    nc_uid: Option<&str>,
    key: &OwnershipKey,
) -> Ownership {
    if !remote {
        return ownership::of_attachment(meta, nc_uid);
    }
    let Some(meta) = meta else {
        return Ownership::Absent;
    };
    let name = meta.name.as_deref().unwrap_or_default();
    match key.made_for(ATTACHMENT_KIND, meta, name) {
        Some(_) => Ownership::Ours,
        None => Ownership::Foreign,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconciler::apis::multus::NetworkAttachmentDefinition;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn owned() -> ObjectMeta {
        ObjectMeta {
            owner_references: Some(vec![OwnerReference {
                uid: "uid-m".into(),
                controller: Some(true),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        }
    }

    fn key() -> OwnershipKey {
        OwnershipKey::new(&[7; 32], None).expect("key")
    }

    #[test]
    fn a_remote_attachment_is_ours_by_its_proof_alone() {
        let nad = |owner: ObjectMeta| NetworkAttachmentDefinition {
            metadata: ObjectMeta {
                name: Some("prod".into()),
                namespace: Some("team-a".into()),
                ..owner
            },
            spec: Default::default(),
        };
        let mut d = Decision {
            attachments: vec![nad(owned())],
            ..Decision::default()
        };
        without_owner_references(&mut d, &key());
        let made = d.attachments[0].metadata.clone();
        assert!(made.owner_references.is_none());
        // Proven for "prod" of another namespace, or another name: a proof of someone else's.
        let elsewhere = ObjectMeta {
            namespace: Some("team-b".into()),
            ..made.clone()
        };
        let renamed = ObjectMeta {
            name: Some("dev".into()),
            ..made.clone()
        };
        let other = OwnershipKey::new(&[8; 32], None).expect("key");
        // Labels and a controller reference alone are not ours there.
        let forged = nad(owned()).metadata;
        // (what, the attachment, the NetworkConfiguration's uid now, the key, whose)
        type Case<'a> = (
            &'a str,
            Option<&'a ObjectMeta>,
            Option<&'a str>,
            &'a OwnershipKey,
            Ownership,
        );
        let cases: [Case; 8] = [
            (
                "its NetworkConfiguration",
                Some(&made),
                Some("uid-m"),
                &key(),
                Ownership::Ours,
            ),
            (
                "its NetworkConfiguration gone",
                Some(&made),
                None,
                &key(),
                Ownership::Ours,
            ),
            // Deleted and re-created (a new uid): proven for the earlier one of its name.
            (
                "an earlier one of its name",
                Some(&made),
                Some("uid-new"),
                &key(),
                Ownership::Ours,
            ),
            (
                "another namespace's proof",
                Some(&elsewhere),
                Some("uid-m"),
                &key(),
                Ownership::Foreign,
            ),
            (
                "another name's proof",
                Some(&renamed),
                Some("uid-m"),
                &key(),
                Ownership::Foreign,
            ),
            (
                "labels and owner alone",
                Some(&forged),
                Some("uid-m"),
                &key(),
                Ownership::Foreign,
            ),
            (
                "another key's proof",
                Some(&made),
                Some("uid-m"),
                &other,
                Ownership::Foreign,
            ),
            ("none there", None, Some("uid-m"), &key(), Ownership::Absent),
        ];
        for (what, meta, nc_uid, k, want) in cases {
            assert_eq!(attachment(true, meta, nc_uid, k), want, "{what}");
        }
    }

    #[test]
    fn nothing_written_remotely_names_an_owner() {
        let mut d = Decision {
            claims: vec![PersistentVolumeClaim {
                metadata: owned(),
                ..Default::default()
            }],
            secret: Some(Secret {
                metadata: owned(),
                ..Default::default()
            }),
            ..Decision::default()
        };
        without_owner_references(&mut d, &key());
        assert!(d.claims[0].metadata.owner_references.is_none());
        assert!(
            d.secret
                .as_ref()
                .is_some_and(|s| s.metadata.owner_references.is_none())
        );
    }
}
