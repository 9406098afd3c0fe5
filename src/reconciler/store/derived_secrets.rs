//! The derived cloud-init Secrets (`<machine>-cloudinit`) as this process last applied or read
//! them, per Machine.
//!
//! Secrets are never listed or watched (least privilege), so without this every resync of a
//! Machine with a `secretRef` read the derived Secret twice besides the user's. While a
//! remembered entry is fresh, observe takes it instead of a GET, and act writes nothing when
//! its applied hash is what is wanted. The metadata is kept whole (annotations included), so
//! the ownership verdict is taken on the same evidence as from a read. An entry is trusted for
//! [`RECHECK`], then read again once: a hand edit or deletion is put back within that time.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::reconciler::APPLIED_HASH_ANNOTATION;
use crate::reconciler::decide::drift;

/// How long a remembered derived Secret stands for the API's copy.
pub const RECHECK: Duration = Duration::from_secs(600);

/// What is known of a Machine's derived Secret.
#[derive(Clone, Debug, PartialEq)]
pub enum Known {
    Absent,
    /// Its metadata (without `managedFields`).
    Present(Box<ObjectMeta>),
}

impl Known {
    pub fn of(meta: Option<&ObjectMeta>) -> Known {
        match meta {
            None => Known::Absent,
            Some(m) => Known::Present(Box::new(ObjectMeta {
                managed_fields: None,
                ..m.clone()
            })),
        }
    }

    pub fn meta(&self) -> Option<&ObjectMeta> {
        match self {
            Known::Absent => None,
            Known::Present(m) => Some(m.as_ref()),
        }
    }

    /// Whether it may stand for the API's copy when the Secret `want` is wanted (`None`: none
    /// is): only if it [`holds`] that already. Otherwise it is read, and its ownership judged on
    /// what the read returns.
    pub fn stands_for(&self, want: Option<&Secret>) -> bool {
        match (want, self) {
            (None, _) => true,
            (Some(want), Known::Present(meta)) => holds(meta, &drift::hash_of(want)),
            (Some(_), Known::Absent) => false,
        }
    }
}

struct Entry {
    /// The Machine it was remembered for: a Machine made again under the name starts afresh.
    machine_uid: String,
    known: Known,
    at: Instant,
}

#[derive(Default)]
pub struct DerivedSecrets {
    inner: Mutex<HashMap<String, Entry>>,
}

/// Whether an entry remembered at `at` may still stand for the API's copy at `now`.
pub fn fresh(at: Instant, now: Instant) -> bool {
    now.saturating_duration_since(at) < RECHECK
}

/// Whether `meta`, remembered as applied, already holds what is wanted (its applied hash is
/// `want`): then nothing is read or written.
pub fn holds(meta: &ObjectMeta, want: &str) -> bool {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(APPLIED_HASH_ANNOTATION))
        .is_some_and(|h| h == want)
}

impl DerivedSecrets {
    /// Remembers `known` for the Machine `key` (`namespace/name`) with `machine_uid`.
    pub fn remember(&self, key: &str, machine_uid: &str, known: Known) {
        self.remember_at(key, machine_uid, known, Instant::now());
    }

    /// What is remembered for the Machine, if it is fresh and remembered for this Machine.
    pub fn recall(&self, key: &str, machine_uid: &str) -> Option<Known> {
        self.recall_at(key, machine_uid, Instant::now())
    }

    pub fn forget(&self, key: &str) {
        if let Ok(mut m) = self.inner.lock() {
            m.remove(key);
        }
    }

    /// Keeps only the entries whose Machine `keep` says still exists.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        if let Ok(mut m) = self.inner.lock() {
            m.retain(|k, _| keep(k));
        }
    }

    pub fn len(&self) -> usize {
        self.inner.lock().map(|m| m.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn remember_at(&self, key: &str, machine_uid: &str, known: Known, now: Instant) {
        if let Ok(mut m) = self.inner.lock() {
            m.insert(
                key.to_owned(),
                Entry {
                    machine_uid: machine_uid.to_owned(),
                    known,
                    at: now,
                },
            );
        }
    }

    fn recall_at(&self, key: &str, machine_uid: &str, now: Instant) -> Option<Known> {
        let m = self.inner.lock().ok()?;
        let e = m.get(key)?;
        (e.machine_uid == machine_uid && fresh(e.at, now)).then(|| e.known.clone())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn meta(hash: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some("m-cloudinit".into()),
            uid: Some("uid-s".into()),
            annotations: hash.map(|h| BTreeMap::from([(APPLIED_HASH_ANNOTATION.into(), h.into())])),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_remembered_secret_stands_for_the_apis_until_the_recheck() {
        let s = DerivedSecrets::default();
        let t0 = Instant::now();
        s.remember_at("ns/m", "uid-m", Known::of(Some(&meta(Some("h")))), t0);
        let cases = [
            (t0, "uid-m", true, "just remembered"),
            (
                t0 + RECHECK - Duration::from_secs(1),
                "uid-m",
                true,
                "still fresh",
            ),
            (t0 + RECHECK, "uid-m", false, "read again once"),
            (t0, "uid-other", false, "another Machine of that name"),
        ];
        for (now, uid, recalled, why) in cases {
            assert_eq!(s.recall_at("ns/m", uid, now).is_some(), recalled, "{why}");
        }
        assert_eq!(s.recall_at("ns/other", "uid-m", t0), None);
    }

    #[test]
    fn absence_is_remembered_too() {
        let s = DerivedSecrets::default();
        let t0 = Instant::now();
        s.remember_at("ns/m", "uid-m", Known::of(None), t0);
        assert_eq!(s.recall_at("ns/m", "uid-m", t0), Some(Known::Absent));
    }

    #[test]
    fn what_was_applied_holds_only_for_the_same_hash() {
        assert!(holds(&meta(Some("h1")), "h1"));
        assert!(!holds(&meta(Some("h1")), "h2"), "the user's data changed");
        assert!(!holds(&meta(None), "h1"), "never applied by us");
    }

    #[test]
    fn forgotten_with_its_machine() {
        let s = DerivedSecrets::default();
        s.remember("ns/a", "1", Known::Absent);
        s.remember("ns/b", "2", Known::Absent);
        s.forget("ns/a");
        assert_eq!(s.len(), 1);
        s.retain(|k| k != "ns/b");
        assert!(s.is_empty());
    }

    #[test]
    fn managed_fields_are_not_kept() {
        let mut m = meta(None);
        m.managed_fields = Some(vec![Default::default()]);
        assert_eq!(
            Known::of(Some(&m))
                .meta()
                .and_then(|m| m.managed_fields.clone()),
            None
        );
    }

    /// What is remembered stands for the API's copy only while it holds the Secret wanted (or
    /// none is wanted): otherwise observe reads it.
    #[test]
    fn a_remembered_secret_stands_only_for_the_one_it_holds() {
        let want = Secret {
            metadata: meta(None),
            ..Secret::default()
        };
        let hash = crate::reconciler::decide::drift::hash_of(&want);
        let holding = Known::of(Some(&meta(Some(&hash))));
        let stale = Known::of(Some(&meta(Some("0123456789abcdef"))));
        assert!(holding.stands_for(Some(&want)));
        assert!(!stale.stands_for(Some(&want)));
        assert!(!Known::Absent.stands_for(Some(&want)));
        for known in [holding, stale, Known::Absent] {
            assert!(known.stands_for(None), "nothing wanted: {known:?}");
        }
    }
}
