//! Which cluster runs a Machine's VM (pure, table-tested below): the one recorded in its status,
//! else the one its `vitistack.io/kubevirt-config` annotation names (fixed at creation by the
//! webhooks, which also write the default into it), else, for a Machine never reconciled,
//! `--default-kubevirt-config`, else the operator's own. A Machine never moves: its disks
//! would be orphaned where it was.

use crate::api::Machine;
use crate::api::names::KUBEVIRT_CONFIG_ANNOTATION;

/// Where a Machine's VM lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// The cluster the operator runs in.
    Local,
    /// The cluster of this KubevirtConfig.
    Remote(String),
}

impl Placement {
    pub fn remote(&self) -> Option<&str> {
        match self {
            Placement::Local => None,
            Placement::Remote(name) => Some(name),
        }
    }
}

/// The placement from its parts. `reconciled`: the Machine has a status, so its placement was
/// decided before (a Machine placed on the local cluster records no name).
pub fn placement(
    annotation: Option<&str>,
    recorded: Option<&str>,
    reconciled: bool,
    default: Option<&str>,
) -> Placement {
    // The annotation counts even once reconciled: a served CRD older than `status.cluster`
    // prunes the record, and the Machine must not fall back to the local cluster then.
    let chosen = match (recorded.or(annotation), reconciled) {
        (Some(r), _) => Some(r),
        (None, true) => None,
        (None, false) => default,
    };
    match chosen.filter(|c| !c.is_empty()) {
        Some(name) => Placement::Remote(name.to_owned()),
        None => Placement::Local,
    }
}

/// The placement of `machine`.
pub fn of(machine: &Machine, default: Option<&str>) -> Placement {
    let annotation = (machine.metadata.annotations.as_ref())
        .and_then(|a| a.get(KUBEVIRT_CONFIG_ANNOTATION))
        .map(String::as_str);
    let status = machine.status.as_ref();
    placement(
        annotation,
        status.and_then(|s| s.cluster.as_deref()),
        status.is_some(),
        default,
    )
}

/// The annotation the mutating webhook adds: `default` on a CREATE of a Machine (JSON `object`)
/// that names no KubevirtConfig.
pub fn defaulted(
    create: bool,
    object: &serde_json::Value,
    default: Option<&str>,
) -> Option<(&'static str, String)> {
    let named = (object.pointer("/metadata/annotations"))
        .and_then(|a| a.get(KUBEVIRT_CONFIG_ANNOTATION))
        .is_some();
    let default = default.filter(|_| create && !named)?;
    Some((KUBEVIRT_CONFIG_ANNOTATION, default.to_owned()))
}

/// Why an update would move a Machine to another cluster (the annotation set, changed or
/// removed), or `None` when it does not.
pub fn moved(old: Option<&str>, new: Option<&str>) -> Option<String> {
    match (old, new) {
        (a, b) if a == b => None,
        (None, Some(b)) => Some(format!(
            "cannot be set after creation (to {b:?}): the Machine's VM and disks stay on the cluster it was created on"
        )),
        (Some(a), None) => Some(format!(
            "cannot be removed (it was {a:?}): the Machine's VM and disks stay on the cluster it was created on"
        )),
        (Some(a), Some(b)) => Some(format!(
            "cannot change from {a:?} to {b:?}: moving a Machine between clusters would orphan its disks"
        )),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(n: &str) -> Placement {
        Placement::Remote(n.to_owned())
    }

    #[test]
    fn placement_follows_record_then_annotation_then_default() {
        // (annotation, recorded, reconciled, default) -> placement
        let table = [
            (None, None, false, None, Placement::Local),
            (None, None, false, Some("dc1"), remote("dc1")),
            (Some("dc2"), None, false, Some("dc1"), remote("dc2")),
            // Recorded wins over everything, even an annotation changed behind the webhook.
            (Some("dc2"), Some("dc1"), true, None, remote("dc1")),
            // Reconciled before: a default never moves it.
            (None, None, true, Some("dc1"), Placement::Local),
            // The record pruned by an old CRD: the annotation still holds it there.
            (Some("dc2"), None, true, Some("dc1"), remote("dc2")),
            // An empty value is no cluster.
            (Some(""), None, false, None, Placement::Local),
        ];
        for (annotation, recorded, reconciled, default, want) in table {
            assert_eq!(
                placement(annotation, recorded, reconciled, default),
                want,
                "{annotation:?} {recorded:?} {reconciled} {default:?}"
            );
        }
    }

    #[test]
    fn the_default_is_written_into_new_machines_that_name_no_cluster() {
        let named =
            serde_json::json!({"metadata": {"annotations": {KUBEVIRT_CONFIG_ANNOTATION: "dc2"}}});
        let bare = serde_json::json!({"metadata": {"name": "m"}});
        let written = Some((KUBEVIRT_CONFIG_ANNOTATION, "dc1".to_owned()));
        assert_eq!(defaulted(true, &bare, Some("dc1")), written);
        assert_eq!(
            defaulted(true, &named, Some("dc1")),
            None,
            "its own choice stands"
        );
        assert_eq!(
            defaulted(false, &bare, Some("dc1")),
            None,
            "never on UPDATE"
        );
        assert_eq!(defaulted(true, &bare, None), None, "no default: local");
    }

    #[test]
    fn any_change_of_the_annotation_is_a_move() {
        assert_eq!(moved(None, None), None);
        assert_eq!(moved(Some("a"), Some("a")), None);
        assert!(moved(None, Some("a")).is_some_and(|m| m.contains("after creation")));
        assert!(moved(Some("a"), None).is_some_and(|m| m.contains("removed")));
        assert!(moved(Some("a"), Some("b")).is_some_and(|m| m.contains("orphan")));
    }
}
