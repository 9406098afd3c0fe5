//! Status fields the served Machine CRD does not keep, learnt from what the API server returns
//! for our status writes; process-wide, for the life of the process (restart the operator after
//! upgrading the CRD). Helm never upgrades CRDs, so an older CRD prunes fields a newer operator
//! writes, and a status compared with those fields differs from the stored one forever.

use std::collections::BTreeSet;
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct ServedStatus {
    pruned: Mutex<BTreeSet<String>>,
}

impl ServedStatus {
    /// The status fields (paths below `status`) the API server pruned so far.
    pub fn pruned(&self) -> BTreeSet<String> {
        self.pruned.lock().map(|p| p.clone()).unwrap_or_default()
    }

    /// Adds `fields`; returns those not known before, so each is warned about once.
    pub fn learn(&self, fields: BTreeSet<String>) -> Vec<String> {
        let Ok(mut known) = self.pruned.lock() else {
            return Vec::new();
        };
        fields
            .into_iter()
            .filter(|f| known.insert(f.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pruned_field_is_new_once() {
        let s = ServedStatus::default();
        let set = |f: &[&str]| f.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>();
        assert_eq!(s.learn(set(&["disks", "vmStatus"])), ["disks", "vmStatus"]);
        assert_eq!(s.learn(set(&["disks"])), Vec::<String>::new());
        assert_eq!(s.learn(set(&["disks[].progress"])), ["disks[].progress"]);
        assert_eq!(s.pruned().len(), 3);
    }
}
