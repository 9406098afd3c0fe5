//! What the schedule's Machine cache keeps: only Machines that have a schedule, slimmed to what a
//! schedule reads. At 10,000 Machines a typed copy of every one (some 2 KB each even slimmed:
//! every optional field of the spec and status takes its full width) was the largest part of the
//! memory the snapshot controllers brought, while Machines without `spec.snapshots` are never
//! planned.

use kube::runtime::watcher::Event;

use crate::api::{Machine, MachineSpec};

/// `e` as the schedule's cache takes it: a Machine without a schedule is left out of a list, and
/// its change is a deletion (its schedule was removed, or it never had one; deleting what the
/// cache does not hold changes nothing). The Machines kept are slimmed.
pub fn scheduled_only(e: Event<Machine>) -> Option<Event<Machine>> {
    Some(match e {
        Event::InitApply(m) if m.spec.snapshots.is_none() => return None,
        Event::InitApply(m) => Event::InitApply(slim(m)),
        Event::Apply(m) if m.spec.snapshots.is_none() => Event::Delete(slim(m)),
        Event::Apply(m) => Event::Apply(slim(m)),
        Event::Delete(m) => Event::Delete(slim(m)),
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
    })
}

/// Only what a schedule reads: names, uid, times, and `spec.snapshots`.
fn slim(mut m: Machine) -> Machine {
    m.spec = MachineSpec {
        snapshots: m.spec.snapshots.take(),
        ..MachineSpec::default()
    };
    m.status = None;
    m.metadata.annotations = None;
    m.metadata.labels = None;
    m.metadata.managed_fields = None;
    m.metadata.finalizers = None;
    m.metadata.owner_references = None;
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector;
    use serde_json::json;

    fn machine(name: &str, schedule: bool) -> Machine {
        let mut spec =
            json!({"template": "medium", "networks": [{"name": "eth0", "networkName": "pod"}]});
        if schedule {
            spec["snapshots"] = json!({"schedule": "@daily", "keep": 2});
        }
        serde_json::from_value(json!({
            "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
            "metadata": {
                "name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                "labels": {"team": "a"},
                "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]
            },
            "spec": spec,
            "status": {"phase": "Running"}
        }))
        .expect("machine")
    }

    fn feed(w: &mut reflector::store::Writer<Machine>, e: Event<Machine>) {
        if let Some(e) = scheduled_only(e) {
            w.apply_watcher_event(&e);
        }
    }

    /// What made the 10,000-Machine regression: every Machine cached whole a second time. Only
    /// scheduled Machines are kept, without their managedFields, status or the rest of the spec.
    #[test]
    fn the_cache_keeps_only_scheduled_machines_slimmed() {
        let (store, mut w) = reflector::store::<Machine>();
        feed(&mut w, Event::Init);
        for i in 0..100 {
            feed(&mut w, Event::InitApply(machine(&format!("m{i}"), i == 7)));
        }
        feed(&mut w, Event::InitDone);
        let kept = store.state();
        assert_eq!(kept.len(), 1, "only the scheduled Machine");
        let m = &kept[0];
        assert_eq!(m.metadata.name.as_deref(), Some("m7"));
        assert_eq!(m.metadata.uid.as_deref(), Some("uid-m7"));
        assert!(m.spec.snapshots.is_some());
        assert!(m.metadata.managed_fields.is_none());
        assert!(m.metadata.labels.is_none());
        assert!(m.status.is_none());
        assert!(m.spec.networks.is_empty() && m.spec.template.is_none());

        // A schedule added, another removed: the cache follows.
        feed(&mut w, Event::Apply(machine("m3", true)));
        feed(&mut w, Event::Apply(machine("m7", false)));
        feed(&mut w, Event::Apply(machine("m4", false)));
        let names: Vec<_> = store
            .state()
            .iter()
            .map(|m| m.metadata.name.clone())
            .collect();
        assert_eq!(names, [Some("m3".to_owned())]);
        feed(&mut w, Event::Delete(machine("m3", true)));
        assert!(store.state().is_empty());
    }
}
