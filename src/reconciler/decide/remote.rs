//! What differs for a Machine whose VM lives on a remote cluster (pure): owner references
//! cannot cross clusters, so none is written there (the remote garbage collector would delete
//! an object whose owner it cannot find). Ownership rests on the made-for proofs alone, and the
//! finalizer deletes explicitly.

use kube::Resource;

use super::Decision;

/// `d` with no owner reference on anything it writes.
pub fn without_owner_references(d: &mut Decision) {
    fn strip(meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
        meta.owner_references = None;
    }
    d.claims.iter_mut().for_each(|c| strip(c.meta_mut()));
    d.data_volumes.iter_mut().for_each(|v| strip(v.meta_mut()));
    d.attachments.iter_mut().for_each(|a| strip(a.meta_mut()));
    d.secret.iter_mut().for_each(|s| strip(s.meta_mut()));
    d.vm.iter_mut().for_each(|vm| strip(vm.meta_mut()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

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
        without_owner_references(&mut d);
        assert!(d.claims[0].metadata.owner_references.is_none());
        assert!(
            d.secret
                .as_ref()
                .is_some_and(|s| s.metadata.owner_references.is_none())
        );
    }
}
