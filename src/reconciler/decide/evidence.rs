//! Evidence of what this operator made, that no Machine author can forge (pure).
//!
//! Labels and owner references can be written by anyone who may write the object, so neither
//! says who made it. Every object the reconciler makes for a Machine (VM, claims, DataVolumes,
//! the derived Secret) carries [`PROOF_ANNOTATION`]: the Machine's uid and an HMAC-SHA256, under
//! a key only the operator reads (the Secret `kubevirt-operator-ownership-key` in its own
//! namespace), over the object's kind, namespace, name and uid and the Machine's name and uid.
//!
//! - Bound to the object's uid: copied onto another object (a claim planted under the same name
//!   after ours was deleted), it no longer verifies.
//! - Bound to the Machine's name: a proof for Machine `a` on claim `a-b-root` says nothing to
//!   Machine `a-b`.
//! - Bound to the Machine's uid: the Machine that made it is known; once that Machine is gone and
//!   nothing references it, the object was released by us for a Machine of that name
//!   ([`super::ownership`] decides).
//!
//! Objects made before the key existed (an upgrade from the second edition) carry no proof; they
//! are judged once more by the old rules (labels and owner references), and get a proof on the
//! next write. Anything created after the key without a valid proof is someone else's.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use ring::hmac;

use crate::api::names::PROOF_ANNOTATION;

/// Key bytes the Secret must hold at least.
pub const MIN_KEY_LEN: usize = 32;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("the ownership key must hold at least {MIN_KEY_LEN} bytes, it holds {0}")]
    TooShort(usize),
}

/// The operator's proof key, and the instant it was made (objects older than that may carry
/// the second edition's evidence instead).
#[derive(Clone)]
pub struct OwnershipKey {
    key: hmac::Key,
    made: Option<Timestamp>,
}

impl std::fmt::Debug for OwnershipKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnershipKey")
            .field("made", &self.made)
            .finish_non_exhaustive()
    }
}

/// The object a proof is about.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    pub kind: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
}

impl<'a> Target<'a> {
    /// `meta`'s object of `kind`, once the API server gave it a uid.
    pub fn of(kind: &'a str, meta: &'a ObjectMeta) -> Option<Target<'a>> {
        Some(Target {
            kind,
            namespace: meta.namespace.as_deref().unwrap_or_default(),
            name: meta.name.as_deref()?,
            uid: meta.uid.as_deref()?,
        })
    }
}

impl OwnershipKey {
    pub fn new(bytes: &[u8], made: Option<Timestamp>) -> Result<Self, KeyError> {
        if bytes.len() < MIN_KEY_LEN {
            return Err(KeyError::TooShort(bytes.len()));
        }
        Ok(OwnershipKey {
            key: hmac::Key::new(hmac::HMAC_SHA256, bytes),
            made,
        })
    }

    fn message(target: &Target, machine: &str, machine_uid: &str) -> String {
        // No field may contain NUL (names, kinds and uids cannot), so the message is unambiguous.
        format!(
            "kubevirt-operator/made-for/v1\0{}\0{}\0{}\0{}\0{machine}\0{machine_uid}",
            target.kind, target.namespace, target.name, target.uid
        )
    }

    /// The annotation value saying `target` was made for Machine `machine` (uid `machine_uid`).
    pub fn proof(&self, target: &Target, machine: &str, machine_uid: &str) -> String {
        let tag = hmac::sign(
            &self.key,
            Self::message(target, machine, machine_uid).as_bytes(),
        );
        format!("{machine_uid}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    }

    /// The uid of the Machine named `machine` that `meta`'s object (of `kind`) was made for, if
    /// its proof verifies.
    pub fn made_for<'m>(&self, kind: &str, meta: &'m ObjectMeta, machine: &str) -> Option<&'m str> {
        let value = meta.annotations.as_ref()?.get(PROOF_ANNOTATION)?;
        let (machine_uid, tag) = value.split_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        let target = Target::of(kind, meta)?;
        let message = Self::message(&target, machine, machine_uid);
        hmac::verify(&self.key, message.as_bytes(), &tag).ok()?;
        Some(machine_uid)
    }

    /// Whether `meta`'s object predates the key (it may carry the second edition's evidence).
    pub fn predates(&self, meta: &ObjectMeta) -> bool {
        match (self.made, meta.creation_timestamp.as_ref()) {
            (Some(made), Some(created)) => created.0 < made,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn key() -> OwnershipKey {
        OwnershipKey::new(&[7; 32], None).expect("key")
    }

    fn claim(name: &str, uid: &str, proof: Option<String>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(uid.into()),
            annotations: proof.map(|p| BTreeMap::from([(PROOF_ANNOTATION.to_owned(), p)])),
            ..ObjectMeta::default()
        }
    }

    fn proof_for(key: &OwnershipKey, name: &str, uid: &str, machine: &str, m_uid: &str) -> String {
        let target = Target {
            kind: "PersistentVolumeClaim",
            namespace: "ns",
            name,
            uid,
        };
        key.proof(&target, machine, m_uid)
    }

    #[test]
    fn a_proof_verifies_only_on_its_object_for_its_machine() {
        let k = key();
        let p = proof_for(&k, "db-data", "uid-c", "db", "uid-m");
        let pvc = "PersistentVolumeClaim";
        assert_eq!(
            k.made_for(pvc, &claim("db-data", "uid-c", Some(p.clone())), "db"),
            Some("uid-m")
        );
        // Copied onto another object of the same name (planted after ours was deleted).
        assert_eq!(
            k.made_for(pvc, &claim("db-data", "uid-x", Some(p.clone())), "db"),
            None
        );
        // Another Machine's name (`a` + `b-root` vs `a-b` + `root`).
        assert_eq!(
            k.made_for(pvc, &claim("db-data", "uid-c", Some(p.clone())), "db-x"),
            None
        );
        // Another kind with the same name and uid.
        assert_eq!(
            k.made_for("Secret", &claim("db-data", "uid-c", Some(p.clone())), "db"),
            None
        );
        // Its Machine uid swapped for another one's.
        let forged = p.replacen("uid-m", "uid-n", 1);
        assert_eq!(
            k.made_for(pvc, &claim("db-data", "uid-c", Some(forged)), "db"),
            None
        );
        // Another key's proof, garbage, none.
        let other = OwnershipKey::new(&[8; 32], None).expect("key");
        let foreign = proof_for(&other, "db-data", "uid-c", "db", "uid-m");
        for value in [
            Some(foreign),
            Some("uid-m.!!".into()),
            Some("x".into()),
            None,
        ] {
            assert_eq!(
                k.made_for(pvc, &claim("db-data", "uid-c", value.clone()), "db"),
                None,
                "{value:?}"
            );
        }
    }

    #[test]
    fn a_short_key_is_refused() {
        assert_eq!(
            OwnershipKey::new(&[0; 31], None).err(),
            Some(KeyError::TooShort(31))
        );
    }

    #[test]
    fn only_objects_older_than_the_key_predate_it() {
        let made: Timestamp = "2026-01-02T00:00:00Z".parse().expect("time");
        let k = OwnershipKey::new(&[7; 32], Some(made)).expect("key");
        let at = |t: &str| ObjectMeta {
            creation_timestamp: Some(Time(t.parse().expect("time"))),
            ..ObjectMeta::default()
        };
        assert!(k.predates(&at("2026-01-01T23:59:59Z")));
        assert!(!k.predates(&at("2026-01-02T00:00:00Z")));
        assert!(!k.predates(&ObjectMeta::default()), "no creation time");
        assert!(!key().predates(&at("2000-01-01T00:00:00Z")), "key made now");
    }
}
