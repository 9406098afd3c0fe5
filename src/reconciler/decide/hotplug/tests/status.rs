//! What the Machine shows of hot-plug: `status.disks[].hotplug`, `RestartRequired`, Events.

use super::super::*;

#[test]
fn status_shows_each_hot_plugged_disks_phase_on_the_vmi() {
    use crate::reconciler::apis::kubevirt::{
        HotplugVolumeStatus, VirtualMachineInstanceSpec, VirtualMachineInstanceStatus, VolumeStatus,
    };
    let disk = |name: &str| DiskStatus {
        name: name.into(),
        claim_name: format!("m-{name}"),
        ..DiskStatus::default()
    };
    let mut disks = vec![disk("root"), disk("data"), disk("logs")];
    let plan = Plan {
        hotplugged: vec!["data".into(), "logs".into()],
        ..Plan::default()
    };
    let mut vmi = VirtualMachineInstance::new("m", VirtualMachineInstanceSpec::default());
    vmi.status = Some(VirtualMachineInstanceStatus {
        volume_status: vec![
            VolumeStatus {
                name: "root".into(),
                phase: Some("Ready".into()),
                hotplug_volume: None,
            },
            VolumeStatus {
                name: "data".into(),
                phase: Some("Ready".into()),
                hotplug_volume: Some(HotplugVolumeStatus {
                    attach_pod_name: Some("hp-volume-x".into()),
                }),
            },
        ],
        ..Default::default()
    });
    show(&mut disks, &plan, Some(&vmi));
    let shown: Vec<_> = disks
        .iter()
        .map(|d| d.hotplug.clone().map(|h| h.phase))
        .collect();
    assert_eq!(shown, [None, Some(Some("Ready".into())), Some(None)]);
}

#[test]
fn restart_required_names_the_waiting_disks_and_why_with_kubevirts_message() {
    assert_eq!(restart_required(&Plan::default(), Some("x")), None);
    let plan = Plan {
        waiting: vec!["data".into(), "logs".into()],
        why: Some(NotServed::GateDisabled),
        ..Plan::default()
    };
    let (reason, message) = restart_required(&plan, None).unwrap();
    assert_eq!(reason, "HotplugGateDisabled");
    assert_eq!(
        message,
        "disk(s) data, logs added to the running VM wait for a restart, not hot-plugged: the cluster's KubeVirt does not enable DeclarativeHotplugVolumes (spec.configuration.developerConfiguration.featureGates)"
    );
    let (_, message) = restart_required(
        &plan,
        Some("a non-live-updatable field was changed in the template spec"),
    )
    .unwrap();
    assert!(
        message
            .ends_with("; KubeVirt: a non-live-updatable field was changed in the template spec"),
        "{message}"
    );
}

#[test]
fn events_announce_a_new_hot_plug_and_a_new_wait_once() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    let hot = DiskStatus {
        name: "data".into(),
        hotplug: Some(DiskHotplug::default()),
        ..DiskStatus::default()
    };
    let with = |disks: Vec<DiskStatus>, reason: Option<&str>| MachineStatus {
        disks,
        conditions: reason
            .map(|r| Condition {
                type_: "RestartRequired".into(),
                status: "True".into(),
                reason: r.into(),
                message: "m".into(),
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ),
                observed_generation: None,
            })
            .into_iter()
            .collect(),
        ..MachineStatus::default()
    };
    let plugged = with(vec![hot.clone()], None);
    assert_eq!(
        events(None, &plugged),
        [(
            DISK_HOTPLUGGED.to_owned(),
            "disk data is hot-plugged into the running VM".to_owned()
        )]
    );
    assert!(events(Some(&plugged), &plugged).is_empty());
    let waiting = with(vec![], Some("HotplugNotLiveUpdate"));
    assert_eq!(
        events(Some(&plugged), &waiting),
        [("HotplugNotLiveUpdate".to_owned(), "m".to_owned())]
    );
    assert!(events(Some(&waiting), &waiting).is_empty());
    // KubeVirt's own RestartRequired (a cores change) is not hot-plug's to announce.
    assert!(events(None, &with(vec![], Some("RestartRequired"))).is_empty());
}
