use super::*;
use crate::reconciler::apis::kubevirt::{
    DataVolumeRef, DeveloperConfiguration, Disk, DiskTarget, KubeVirtConfiguration, KubeVirtSpec,
    PvcSource, VirtualMachineSpec,
};

fn kubevirt(gates: &[&str], rollout: Option<&str>) -> KubeVirt {
    KubeVirt::new(
        "kubevirt",
        KubeVirtSpec {
            configuration: Some(KubeVirtConfiguration {
                developer_configuration: Some(DeveloperConfiguration {
                    feature_gates: gates.iter().map(|g| (*g).to_owned()).collect(),
                    disabled_feature_gates: vec![],
                }),
                vm_rollout_strategy: rollout.map(str::to_owned),
            }),
        },
    )
}

#[test]
fn served_only_with_the_declarative_gate_alone_and_live_update() {
    let live = Some(LIVE_UPDATE);
    let cases: &[(&str, Option<KubeVirt>, Result<(), NotServed>)] = &[
        ("no KubeVirt", None, Err(NotServed::NoKubeVirt)),
        (
            "empty spec",
            Some(KubeVirt::new("kubevirt", KubeVirtSpec::default())),
            Err(NotServed::GateDisabled),
        ),
        (
            "gate and LiveUpdate",
            Some(kubevirt(&["Snapshot", DECLARATIVE_GATE], live)),
            Ok(()),
        ),
        (
            "no gate",
            Some(kubevirt(&["Snapshot"], live)),
            Err(NotServed::GateDisabled),
        ),
        (
            "only the imperative gate",
            Some(kubevirt(&[IMPERATIVE_GATE], live)),
            Err(NotServed::GateDisabled),
        ),
        (
            "both gates",
            Some(kubevirt(&[IMPERATIVE_GATE, DECLARATIVE_GATE], live)),
            Err(NotServed::ImperativeGate),
        ),
        (
            "Stage",
            Some(kubevirt(&[DECLARATIVE_GATE], Some("Stage"))),
            Err(NotServed::NotLiveUpdate),
        ),
        (
            "no rollout strategy",
            Some(kubevirt(&[DECLARATIVE_GATE], None)),
            Err(NotServed::NotLiveUpdate),
        ),
        (
            "gate spelt otherwise",
            Some(kubevirt(&["declarativehotplugvolumes"], live)),
            Err(NotServed::GateDisabled),
        ),
    ];
    for (what, kv, want) in cases {
        assert_eq!(served(kv.as_ref()), *want, "{what}");
    }
}

#[test]
fn every_reason_is_one_word_and_says_what_to_change() {
    for (n, field) in [
        (NotServed::NoKubeVirt, "kubevirts.kubevirt.io"),
        (NotServed::GateDisabled, "DeclarativeHotplugVolumes"),
        (NotServed::ImperativeGate, "HotplugVolumes"),
        (
            NotServed::NotLiveUpdate,
            "vmRolloutStrategy is not LiveUpdate",
        ),
    ] {
        assert!(n.reason().chars().all(|c| c.is_ascii_alphabetic()), "{n:?}");
        assert!(n.reason().starts_with("Hotplug"), "{n:?}");
        assert!(n.why().contains(field), "{n:?}: {}", n.why());
    }
}

#[test]
fn the_first_install_by_namespace_and_name_is_read() {
    let mut a = kubevirt(&[], None);
    a.metadata.namespace = Some("kubevirt".into());
    let mut b = kubevirt(&[DECLARATIVE_GATE], None);
    b.metadata.namespace = Some("a-kubevirt".into());
    assert_eq!(
        install([&a, &b]).and_then(|k| k.metadata.namespace.as_deref()),
        Some("a-kubevirt")
    );
    assert!(install(std::iter::empty()).is_none());
}

fn volume(name: &str, hotpluggable: bool, dv: bool) -> Volume {
    Volume {
        name: name.into(),
        data_volume: dv.then(|| DataVolumeRef {
            name: format!("m-{name}"),
            hotpluggable,
        }),
        persistent_volume_claim: (!dv).then(|| PvcSource {
            claim_name: format!("m-{name}"),
            hotpluggable,
        }),
        ..Volume::default()
    }
}

fn vm(volumes: Vec<Volume>) -> VirtualMachine {
    let mut spec = VirtualMachineSpec::default();
    for v in &volumes {
        spec.template.spec.domain.devices.disks.push(Disk {
            name: v.name.clone(),
            disk: Some(DiskTarget {
                bus: Some("virtio".into()),
            }),
            ..Disk::default()
        });
    }
    spec.template.spec.volumes = volumes;
    VirtualMachine::new("m", spec)
}

fn running<'a>(volumes: &[&'a str]) -> Running<'a> {
    Running {
        volumes: volumes.iter().copied().collect(),
    }
}

#[test]
fn a_disk_the_running_vmi_lacks_is_hot_plugged_when_served_else_waits_with_why() {
    let live = vm(vec![volume("root", false, true)]);
    let both = ["root", "data"];
    let on = running(&["root", "cloudinitdisk"]);
    let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    type Case<'a> = (
        &'a str,
        Option<&'a Running<'a>>,
        Result<(), NotServed>,
        Plan,
    );
    let cases: Vec<Case> = vec![
        (
            "running, served",
            Some(&on),
            Ok(()),
            Plan {
                hotplugged: names(&["data"]),
                ..Plan::default()
            },
        ),
        (
            "running, not served",
            Some(&on),
            Err(NotServed::NotLiveUpdate),
            Plan {
                waiting: names(&["data"]),
                why: Some(NotServed::NotLiveUpdate),
                ..Plan::default()
            },
        ),
        (
            "stopped, served: boots with it",
            None,
            Ok(()),
            Plan::default(),
        ),
        (
            "stopped, not served",
            None,
            Err(NotServed::GateDisabled),
            Plan::default(),
        ),
    ];
    for (what, r, served, want) in cases {
        assert_eq!(plan(&both, Some(&live), r, served), want, "{what}");
    }
}

#[test]
fn a_hot_plugged_disk_stays_so_and_one_the_vmi_has_is_left() {
    let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    // Written hot-pluggable earlier: kept so, served or not, running or not.
    let live = vm(vec![
        volume("root", false, true),
        volume("data", true, false),
    ]);
    for r in [None, Some(&running(&["root", "data"]))] {
        for s in [Ok(()), Err(NotServed::GateDisabled)] {
            let p = plan(&["root", "data"], Some(&live), r, s);
            assert_eq!(p.hotplugged, names(&["data"]), "{r:?} {s:?}");
            assert!(p.waiting.is_empty());
        }
    }
    // Written as a regular disk while not served; the gate is enabled since: hot-plugged now.
    let live = vm(vec![
        volume("root", false, true),
        volume("data", false, false),
    ]);
    let on = running(&["root"]);
    let p = plan(&["root", "data"], Some(&live), Some(&on), Ok(()));
    assert_eq!(p.hotplugged, names(&["data"]));
    // The VMI started with it: nothing to do.
    let on = running(&["root", "data"]);
    assert_eq!(
        plan(&["root", "data"], Some(&live), Some(&on), Ok(())),
        Plan::default()
    );
}

#[test]
fn a_vmi_listing_no_volumes_is_taken_to_have_the_live_vms() {
    let live = vm(vec![volume("root", false, true)]);
    let unknown = running(&[]);
    let p = plan(
        &["root", "data"],
        Some(&live),
        Some(&unknown),
        Err(NotServed::GateDisabled),
    );
    assert_eq!(p.waiting, vec!["data".to_owned()]);
    let p = plan(
        &["root"],
        Some(&live),
        Some(&unknown),
        Err(NotServed::GateDisabled),
    );
    assert_eq!(p, Plan::default());
}

#[test]
fn applying_marks_the_volume_and_moves_the_disk_to_scsi() {
    let mut desired = vm(vec![
        volume("root", false, true),
        volume("data", false, false),
        volume("img", false, true),
    ]);
    let p = Plan {
        hotplugged: vec!["data".into(), "img".into()],
        ..Plan::default()
    };
    apply(&p, &mut desired);
    let spec = &desired.spec.template.spec;
    assert_eq!(
        spec.volumes.iter().map(is_hotpluggable).collect::<Vec<_>>(),
        [false, true, true]
    );
    let buses: Vec<_> = spec
        .domain
        .devices
        .disks
        .iter()
        .map(|d| d.disk.as_ref().and_then(|t| t.bus.clone()))
        .collect();
    assert_eq!(
        buses,
        [
            Some("virtio".into()),
            Some("scsi".into()),
            Some("scsi".into())
        ]
    );
    let json = serde_json::to_value(&spec.volumes[1]).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"name": "data", "persistentVolumeClaim": {"claimName": "m-data", "hotpluggable": true}})
    );
    let json = serde_json::to_value(&spec.volumes[0]).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"name": "root", "dataVolume": {"name": "m-root"}})
    );
}

#[test]
fn a_finished_vmi_is_not_running() {
    use crate::reconciler::apis::kubevirt::{
        VirtualMachineInstanceSpec, VirtualMachineInstanceStatus, VmiVolume,
    };
    let mut vmi = VirtualMachineInstance::new(
        "m",
        VirtualMachineInstanceSpec {
            volumes: vec![VmiVolume {
                name: "root".into(),
            }],
        },
    );
    assert_eq!(Running::of(Some(&vmi)), Some(running(&["root"])));
    for (phase, on) in [
        ("Pending", true),
        ("Running", true),
        ("Succeeded", false),
        ("Failed", false),
    ] {
        vmi.status = Some(VirtualMachineInstanceStatus {
            phase: Some(phase.into()),
            ..Default::default()
        });
        assert_eq!(Running::of(Some(&vmi)).is_some(), on, "{phase}");
    }
    assert_eq!(Running::of(None), None);
}

#[test]
fn only_hot_plugged_disks_the_spec_dropped_are_unplugged() {
    use crate::reconciler::decide::problem::Kind;
    let live = vm(vec![
        volume("root", false, true),
        volume("data", true, false),
        volume("img", true, true),
        volume("old", false, false),
    ]);
    assert_eq!(
        unplugged(Some(&live), &["root", "img"]),
        [(Kind::Claim, "m-data".to_owned())]
    );
    assert_eq!(
        unplugged(Some(&live), &["root"]),
        [
            (Kind::Claim, "m-data".to_owned()),
            (Kind::DataVolume, "m-img".to_owned())
        ]
    );
    assert!(unplugged(None, &[]).is_empty());
}

mod status;
