//! A VM on a dead node: `Ready=False`, `NodeUnreachable`, the rest kept, one Warning Event.

use super::*;
use crate::reconciler::decide::node::{NODE_UNREACHABLE, Unreachable};

#[test]
fn a_dead_node_turns_ready_false_keeps_the_other_conditions_and_is_announced_once() {
    let v = vm(Some("Running"));
    let p = pvc(Some("Bound"));
    let i = vmi(json!({"phase": "Running", "nodeName": "n1"}));
    let mut c = Case::new();
    c.vm = Some(&v);
    c.vmi = Some(&i);
    c.claims = vec![("m-root".into(), Some(&p))];
    let running = c.status(None, t(0));
    assert_eq!(cond(&running, "Ready").reason, "Running");

    c.node = Some(Unreachable {
        node: "n1".into(),
        message: "the VM's node n1 has been unreachable".into(),
    });
    let dead = c.status(Some(&running), t(90));
    // The VMI still says Running: the phase and the other conditions stay as they were.
    assert_eq!(dead.phase.as_deref(), Some("Running"));
    assert_eq!(dead.node_name.as_deref(), Some("n1"));
    // (AgentConnected, mirrored from the VMI, follows.)
    assert_eq!(
        summary(&dead)[..4],
        [
            row("Ready", "False", NODE_UNREACHABLE),
            row("VirtualMachineReady", "True", "VMCreated"),
            row("StorageReady", "True", "PVCBound"),
            row("NetworkReady", "True", "NetworkConfigured"),
        ]
    );
    let ready = cond(&dead, "Ready");
    assert_eq!(ready.message, "the VM's node n1 has been unreachable");
    assert_eq!(
        ready.last_transition_time.0,
        t(90),
        "Ready turned False then"
    );
    for type_ in ["VirtualMachineReady", "StorageReady", "NetworkReady"] {
        assert_eq!(
            cond(&dead, type_).last_transition_time.0,
            t(0),
            "{type_} kept"
        );
    }

    let notices = crate::reconciler::decide::notices::notices(Some(&running), &dead);
    assert_eq!(
        notices
            .iter()
            .map(|n| (n.type_, n.reason.as_str(), n.note.as_str()))
            .collect::<Vec<_>>(),
        [(
            kube::runtime::events::EventType::Warning,
            NODE_UNREACHABLE,
            "the VM's node n1 has been unreachable"
        )]
    );
    let later = c.status(Some(&dead), t(120));
    assert!(crate::reconciler::decide::notices::notices(Some(&dead), &later).is_empty());

    // The node comes back: Ready is Running again.
    c.node = None;
    let back = c.status(Some(&later), t(150));
    assert_eq!(summary(&back), summary(&running));
    assert_eq!(cond(&back, "Ready").last_transition_time.0, t(150));
}
