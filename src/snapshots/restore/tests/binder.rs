//! The consumer Pod that binds claims of a WaitForFirstConsumer class before the next step.

use super::trust::restored;
use super::*;

#[test]
fn a_consumer_pod_binds_the_unbound_claims_then_goes_before_the_next_step() {
    let restoring = restore(Some(phase::RESTORING), vec![], Some(true));
    let done = vm_restore(complete(&["root", "data"]));
    let pod = |ours, deleting| Binder {
        name: "undo-bind".into(),
        uid: "pod-uid".into(),
        ours,
        deleting,
    };
    let seen = |root_bound, binder| {
        let mut c = claims(&[
            ("web-root", "old-root", true),
            ("web-data", "old-data", true),
            (&r("data"), "new-data", false),
        ]);
        c.insert(
            r("root"),
            restored("new-root", kubevirts("root"), root_bound),
        );
        Seen {
            restore: Some(&restoring),
            machine: Some(machine()),
            vm: Some(vm(false, &[])),
            vm_restore: Some(&done),
            claims: c,
            binder,
            ..Seen::default()
        }
    };
    let waiting = |why: String| Step::Wait {
        phase: phase::RESTORING,
        why: Some(why),
    };
    let unbound = format!("waiting for the restored claim(s) {} to bind", r("root"));
    let cases = [
        ("unbound, no Pod", false, None, Step::Bind(vec![r("root")])),
        (
            "unbound, the Pod mounts it",
            false,
            Some(pod(true, false)),
            waiting(format!("{unbound} (mounted by the Pod undo-bind)")),
        ),
        (
            "a Pod of that name not the restore's",
            false,
            Some(pod(false, false)),
            waiting(format!(
                "{unbound}; the Pod undo-bind that would bind them is not this restore's: \
                 delete it"
            )),
        ),
        (
            "bound: the Pod goes",
            true,
            Some(pod(true, false)),
            Step::Unbind("pod-uid".into()),
        ),
        (
            "going",
            true,
            Some(pod(true, true)),
            waiting("waiting for the Pod undo-bind that bound the claims to go".into()),
        ),
    ];
    for (case, bound, binder, step) in cases {
        assert_eq!(next(&seen(bound, binder)), step, "{case}");
    }
    assert!(
        matches!(next(&seen(true, None)), Step::BeginAdopting(_)),
        "bound, no Pod: on"
    );
}
