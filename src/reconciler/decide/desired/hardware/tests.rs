use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::api::hardware::Device;
use crate::reconciler::apis::kubevirt::Memory;

fn toleration(key: &str) -> Toleration {
    Toleration {
        key: Some(key.to_owned()),
        operator: Some("Exists".to_owned()),
        ..Toleration::default()
    }
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn the_class_s_node_selector_wins_and_tolerations_are_the_union() {
    // (machine's, class's) -> the VM's
    let table = [
        (map(&[]), map(&[]), map(&[])),
        (map(&[("zone", "b")]), map(&[]), map(&[("zone", "b")])),
        (map(&[]), map(&[("gpu", "a10")]), map(&[("gpu", "a10")])),
        (
            map(&[("zone", "b"), ("gpu", "none")]),
            map(&[("gpu", "a10")]),
            map(&[("gpu", "a10"), ("zone", "b")]),
        ),
    ];
    for (machine, class, want) in table {
        assert_eq!(
            node_selector(machine.clone(), &class),
            want,
            "{machine:?} {class:?}"
        );
    }
    let (gpu, spot) = (toleration("gpu"), toleration("spot"));
    let class = std::slice::from_ref(&gpu);
    assert_eq!(tolerations(vec![], class), class);
    assert_eq!(
        tolerations(vec![spot.clone(), gpu.clone()], class),
        [gpu.clone(), spot.clone()],
        "the class's first, none twice"
    );
    assert_eq!(tolerations(vec![spot.clone()], &[]), [spot]);
}

fn hw() -> Hardware {
    Hardware {
        gpus: vec![Device {
            name: "gpu1".into(),
            device_name: "nvidia.com/GA102GL_A10".into(),
        }],
        host_devices: vec![Device {
            name: "qat".into(),
            device_name: "intel.com/qat".into(),
        }],
        dedicated: true,
        model: Some("Skylake-Server".into()),
        page_size: Some("1Gi".into()),
        ..Hardware::default()
    }
}

fn domain() -> DomainSpec {
    DomainSpec {
        cpu: Some(Cpu {
            cores: Some(4),
            ..Cpu::default()
        }),
        memory: Some(Memory {
            guest: Some("16Gi".into()),
            ..Memory::default()
        }),
        ..DomainSpec::default()
    }
}

#[test]
fn the_class_s_hardware_on_the_domain() {
    let machine_cpu = |v: serde_json::Value| -> MachineCpu { serde_json::from_value(v).unwrap() };
    // (class hardware, the Machine's cpu) -> (dedicatedCpuPlacement, model, pageSize, devices)
    let table = [
        (Hardware::default(), None, (None, None, None, 0)),
        (
            hw(),
            None,
            (Some(true), Some("Skylake-Server"), Some("1Gi"), 2),
        ),
        (
            hw(),
            Some(machine_cpu(
                json!({"dedicated": false, "model": "host-passthrough"}),
            )),
            (None, Some("host-passthrough"), Some("1Gi"), 2),
        ),
        (
            Hardware::default(),
            Some(machine_cpu(json!({"dedicated": true}))),
            (Some(true), None, None, 0),
        ),
    ];
    for (hw, cpu, (dedicated, model, page, devices)) in table {
        let mut d = domain();
        apply(&mut d, cpu.as_ref(), &hw);
        let c = d.cpu.as_ref().unwrap();
        assert_eq!(c.cores, Some(4), "the size stays");
        assert_eq!(c.dedicated_cpu_placement, dedicated, "{hw:?} {cpu:?}");
        assert_eq!(c.model.as_deref(), model, "{hw:?} {cpu:?}");
        let memory = d.memory.as_ref().unwrap();
        let pages = memory
            .hugepages
            .as_ref()
            .and_then(|h| h.page_size.as_deref());
        assert_eq!(pages, page);
        assert_eq!(d.devices.gpus.len() + d.devices.host_devices.len(), devices);
    }
    let mut d = domain();
    apply(&mut d, None, &hw());
    assert_eq!(
        serde_json::to_value(&d.devices).unwrap(),
        json!({"gpus": [{"name": "gpu1", "deviceName": "nvidia.com/GA102GL_A10"}],
               "hostDevices": [{"name": "qat", "deviceName": "intel.com/qat"}]}),
        "KubeVirt's field names"
    );
}
