//! Evidence of what this operator made and released, that no Machine author can forge (pure).
//!
//! Labels and owner references can be written by anyone who may write the object, so neither
//! says who made it. Two annotations do, each an HMAC-SHA256 under a key only the operator reads
//! (the Secret `kubevirt-operator-ownership-key` in its own namespace):
//!
//! - [`PROOF_ANNOTATION`] (`vitistack.io/made-for`) on every object the reconciler makes for a
//!   Machine (VM, claims, DataVolumes, the derived Secret): the Machine's uid and a tag over the
//!   object's kind, namespace and name and the Machine's name and uid. It is written in the very
//!   write that creates the object, so making an object costs no extra write; the object's own
//!   uid is not known before that write, so this proof is not bound to it.
//! - [`RELEASE_ANNOTATION`] (`vitistack.io/released-for`) on a disk the operator keeps when its
//!   Machine goes (retain-disks, orphan deletion): a tag over the object's kind, namespace, name
//!   and **uid** and the Machine's name. Bound to the uid, it does not verify on another object
//!   of the same name (one planted after ours was deleted, with our annotations copied onto it),
//!   so only the very object we released can be adopted.
//!
//! Both are bound to the Machine's name: a proof for Machine `a` on claim `a-b-root` says nothing
//! to Machine `a-b`. Objects made before the key existed (an upgrade from the second edition)
//! carry neither; they are judged once more by the old rules (labels and owner references), and
//! get their proof on the next write. Anything created after the key without a valid proof is
//! someone else's.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use ring::hmac;

use crate::api::names::{PROOF_ANNOTATION, RELEASE_ANNOTATION};

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
    /// When this key replaced a lost one (`--new-ownership-key`): objects older than that are
    /// re-proven once by their labels and names (see `decide::reprove`).
    replaced: Option<Timestamp>,
}

impl std::fmt::Debug for OwnershipKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnershipKey")
            .field("made", &self.made)
            .field("replaced", &self.replaced)
            .finish_non_exhaustive()
    }
}

/// The object a proof is about.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    pub kind: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
}

impl<'a> Target<'a> {
    /// `meta`'s object of `kind`.
    pub fn of(kind: &'a str, meta: &'a ObjectMeta) -> Option<Target<'a>> {
        Some(Target {
            kind,
            namespace: meta.namespace.as_deref().unwrap_or_default(),
            name: meta.name.as_deref()?,
        })
    }
}

fn annotation<'m>(meta: &'m ObjectMeta, key: &str) -> Option<&'m str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

impl OwnershipKey {
    pub fn new(bytes: &[u8], made: Option<Timestamp>) -> Result<Self, KeyError> {
        if bytes.len() < MIN_KEY_LEN {
            return Err(KeyError::TooShort(bytes.len()));
        }
        Ok(OwnershipKey {
            key: hmac::Key::new(hmac::HMAC_SHA256, bytes),
            made,
            replaced: None,
        })
    }

    /// The key, made at `made` to replace a lost one.
    pub fn replacing(self, made: Timestamp) -> Self {
        OwnershipKey {
            replaced: Some(made),
            ..self
        }
    }

    /// When this key replaced a lost one, if it did.
    pub fn replaced(&self) -> Option<Timestamp> {
        self.replaced
    }

    /// Whether `meta`'s object is older than the replacement of a lost key: made under the lost
    /// one, its proof cannot verify.
    pub fn predates_replacement(&self, meta: &ObjectMeta) -> bool {
        match (self.replaced, meta.creation_timestamp.as_ref()) {
            (Some(replaced), Some(created)) => created.0 < replaced,
            _ => false,
        }
    }

    fn tag(&self, message: &str) -> String {
        URL_SAFE_NO_PAD.encode(hmac::sign(&self.key, message.as_bytes()).as_ref())
    }

    fn verifies(&self, message: &str, tag: &str) -> bool {
        URL_SAFE_NO_PAD
            .decode(tag)
            .is_ok_and(|t| hmac::verify(&self.key, message.as_bytes(), &t).is_ok())
    }

    // No field may contain NUL (names, kinds and uids cannot), so each message is unambiguous.
    fn made_message(t: &Target, machine: &str, machine_uid: &str) -> String {
        let (kind, ns, name) = (t.kind, t.namespace, t.name);
        format!("kubevirt-operator/made-for/v1\0{kind}\0{ns}\0{name}\0{machine}\0{machine_uid}")
    }

    fn released_message(t: &Target, uid: &str, machine: &str) -> String {
        let (kind, ns, name) = (t.kind, t.namespace, t.name);
        format!("kubevirt-operator/released-for/v1\0{kind}\0{ns}\0{name}\0{uid}\0{machine}")
    }

    /// The [`PROOF_ANNOTATION`] value saying `target` was made for Machine `machine` (uid
    /// `machine_uid`).
    pub fn proof(&self, target: &Target, machine: &str, machine_uid: &str) -> String {
        let tag = self.tag(&Self::made_message(target, machine, machine_uid));
        format!("{machine_uid}.{tag}")
    }

    /// The uid of the Machine named `machine` that `meta`'s object (of `kind`) was made for, if
    /// its proof verifies.
    pub fn made_for<'m>(&self, kind: &str, meta: &'m ObjectMeta, machine: &str) -> Option<&'m str> {
        let (machine_uid, tag) = annotation(meta, PROOF_ANNOTATION)?.split_once('.')?;
        let target = Target::of(kind, meta)?;
        self.verifies(&Self::made_message(&target, machine, machine_uid), tag)
            .then_some(machine_uid)
    }

    /// The uid of the Machine named `machine` that the proof `value` (as [`Self::proof`] makes
    /// it) says `target` was made for, if it verifies: for a proof about more than an object's
    /// name (a snapshot's name and uid), kept where [`Self::made_for`] does not look.
    pub fn proven_for<'v>(
        &self,
        target: &Target,
        machine: &str,
        value: &'v str,
    ) -> Option<&'v str> {
        let (machine_uid, tag) = value.split_once('.')?;
        self.verifies(&Self::made_message(target, machine, machine_uid), tag)
            .then_some(machine_uid)
    }

    /// The [`RELEASE_ANNOTATION`] value saying the object `target` with `uid` was released by
    /// this operator for a Machine named `machine`.
    pub fn release_proof(&self, target: &Target, uid: &str, machine: &str) -> String {
        self.tag(&Self::released_message(target, uid, machine))
    }

    /// Whether `meta`'s object (of `kind`) is the very one this operator released for a Machine
    /// named `machine`.
    pub fn released_for(&self, kind: &str, meta: &ObjectMeta, machine: &str) -> bool {
        let (Some(tag), Some(target), Some(uid)) = (
            annotation(meta, RELEASE_ANNOTATION),
            Target::of(kind, meta),
            meta.uid.as_deref(),
        ) else {
            return false;
        };
        self.verifies(&Self::released_message(&target, uid, machine), tag)
    }

    /// The same key for a cluster where nothing predates it: a remote cluster never had the
    /// second edition's objects, so only proofs count there.
    pub fn without_history(&self) -> OwnershipKey {
        OwnershipKey {
            key: self.key.clone(),
            made: None,
            replaced: self.replaced,
        }
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

    const PVC: &str = "PersistentVolumeClaim";

    fn key() -> OwnershipKey {
        OwnershipKey::new(&[7; 32], None).expect("key")
    }

    fn target(name: &str) -> Target<'_> {
        Target {
            kind: PVC,
            namespace: "ns",
            name,
        }
    }

    fn claim(name: &str, uid: &str, annotations: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(uid.into()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_made_for_proof_names_its_machine_and_verifies_only_for_its_name_and_kind() {
        let k = key();
        let p = k.proof(&target("db-data"), "db", "uid-m");
        let with = |name: &str, value: &str| claim(name, "uid-c", &[(PROOF_ANNOTATION, value)]);
        assert_eq!(k.made_for(PVC, &with("db-data", &p), "db"), Some("uid-m"));
        // Another Machine's name (`a` + `b-root` vs `a-b` + `root`), another object name, kind.
        assert_eq!(k.made_for(PVC, &with("db-data", &p), "db-x"), None);
        assert_eq!(k.made_for(PVC, &with("db-logs", &p), "db"), None);
        assert_eq!(k.made_for("Secret", &with("db-data", &p), "db"), None);
        // Its Machine uid swapped for another one's.
        let forged = p.replacen("uid-m", "uid-n", 1);
        assert_eq!(k.made_for(PVC, &with("db-data", &forged), "db"), None);
        // Another key's proof, garbage, none.
        let other = OwnershipKey::new(&[8; 32], None).expect("key");
        let theirs = other.proof(&target("db-data"), "db", "uid-m");
        for value in [theirs.as_str(), "uid-m.!!", "x"] {
            assert_eq!(
                k.made_for(PVC, &with("db-data", value), "db"),
                None,
                "{value}"
            );
        }
        assert_eq!(k.made_for(PVC, &claim("db-data", "uid-c", &[]), "db"), None);
    }

    #[test]
    fn a_release_proof_verifies_only_on_the_very_object_released() {
        let k = key();
        let r = k.release_proof(&target("db-data"), "uid-c", "db");
        let with = |uid: &str| claim("db-data", uid, &[(RELEASE_ANNOTATION, r.as_str())]);
        assert!(k.released_for(PVC, &with("uid-c"), "db"));
        // Copied onto a claim planted under the same name after ours was deleted.
        assert!(!k.released_for(PVC, &with("uid-planted"), "db"));
        assert!(!k.released_for(PVC, &with("uid-c"), "db-x"));
        assert!(!k.released_for("DataVolume", &with("uid-c"), "db"));
        let other = OwnershipKey::new(&[8; 32], None).expect("key");
        let theirs = other.release_proof(&target("db-data"), "uid-c", "db");
        let forged = claim("db-data", "uid-c", &[(RELEASE_ANNOTATION, theirs.as_str())]);
        assert!(!k.released_for(PVC, &forged, "db"));
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
        assert!(
            !key().predates(&at("2000-01-01T00:00:00Z")),
            "no key time: none"
        );
    }
}
