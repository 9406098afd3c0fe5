//! The DataVolumes and VirtualMachines derived from every example Machine, written to a real
//! kube-apiserver that has CDI's DataVolume and KubeVirt's VirtualMachine CRDs
//! (`tests/fixtures/crds/`): accepted by their schemas and stored exactly as sent (nothing
//! pruned, so every field we write is one CDI or KubeVirt reads).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use kubevirt_operator::api::{Machine, MachineSpec};
use kubevirt_operator::machine::classes::Hardware;
use kubevirt_operator::machine::{Catalog, resolve};
use kubevirt_operator::reconciler::apis::cdi::DataVolume;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use kubevirt_operator::reconciler::decide::desired::{self, Desired, Inputs};
use support::Fixture;

const EXAMPLES: &[&str] = &[
    "debian-http.yaml",
    "registry-containerdisk.yaml",
    "golden-clone.yaml",
    "installer-iso.yaml",
];

async fn create<K>(client: &Client, ns: &str, obj: &K) -> Value
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let stored = api
        .create(&PostParams::default(), obj)
        .await
        .unwrap_or_else(|e| panic!("the API server refused {}: {e}", obj.name_any()));
    serde_json::to_value(stored).expect("json")
}

/// The example Machine `file`, in namespace `ns` with uid `uid`.
fn example(file: &str, ns: &str, uid: &str) -> Machine {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(file);
    let text = std::fs::read_to_string(path).expect("example");
    let mut machine: Machine = serde_yaml::from_str(&text).expect("example YAML");
    machine.metadata.namespace = Some(ns.to_owned());
    machine.metadata.uid = Some(uid.to_owned());
    machine
}

/// What the reconciler derives for `machine` on a cluster with nothing else in it (its clone
/// pins as recorded), and the spec it derives from.
fn derive(machine: &Machine) -> (MachineSpec, Desired) {
    derive_in(machine, &Catalog::default(), &Default::default())
}

/// [`derive`] with the MachineClasses of `catalog`, and the `hardware` of the Machine's class.
fn derive_in(machine: &Machine, catalog: &Catalog, hardware: &Hardware) -> (MachineSpec, Desired) {
    let spec = resolve(&machine.spec, None, catalog).spec;
    let d = desired::derive(&Inputs {
        machine,
        spec: &spec,
        network_configurations: &BTreeMap::new(),
        storage_classes: &BTreeSet::new(),
        source_secret: None,
        network_policy: &Default::default(),
        eviction_strategy: kubevirt_operator::api::placement::DEFAULT_EVICTION_STRATEGY,
        label_prefixes: &[],
        copy_user_data: false,
        hardware,
        pins: &kubevirt_operator::api::clone_sources::read(machine.metadata.annotations.as_ref())
            .unwrap_or_default(),
    });
    (spec, d)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_examples_data_volumes_and_vm_are_stored_as_sent() {
    let cp = Fixture::new().with_fixture_crds().shared().await;
    let client = cp.client().await.expect("admin client");
    let ns = cp.namespace("cdi-schemas").await.expect("namespace");
    let mut written = 0;
    for file in EXAMPLES {
        let machine = example(file, &ns, "0a1b2c3d-0000-4000-8000-0000000012e2");
        let (_, d) = derive(&machine);
        assert!(d.problems.is_empty(), "{file}: {:?}", d.problems);
        assert!(!d.data_volumes.is_empty(), "{file} has a source");
        for dv in &d.data_volumes {
            let stored = create::<DataVolume>(&client, &ns, dv).await;
            let sent = serde_json::to_value(dv).unwrap();
            assert_eq!(
                stored["spec"],
                sent["spec"],
                "{file}: DataVolume {}",
                dv.name_any()
            );
            written += 1;
        }
        let vm = d.vm.as_ref().expect("a VM");
        let stored = create::<VirtualMachine>(&client, &ns, vm).await;
        let sent = serde_json::to_value(vm).unwrap();
        assert_eq!(stored["spec"], sent["spec"], "{file}: VirtualMachine");
    }
    assert_eq!(written, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schema_refuses_what_cdi_would_not_accept() {
    // The check above can fail: a DataVolume without the fields CDI requires is refused.
    let cp = Fixture::new().with_fixture_crds().shared().await;
    let client = cp.client().await.expect("admin client");
    let ns = cp.namespace("cdi-schemas-neg").await.expect("namespace");
    let bad: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
        "metadata": {"name": "bad"},
        "spec": {"sourceRef": {"name": "no-kind"}}
    }))
    .unwrap();
    let err =
        Api::<DynamicObject>::namespaced_with(client, &ns, &ApiResource::erase::<DataVolume>(&()))
            .create(&PostParams::default(), &bad)
            .await
            .expect_err("refused");
    assert!(err.to_string().contains("spec.sourceRef.kind"), "{err}");
}

/// Issue 35: the VM of the GPU example's Machine, with its class's devices, dedicated CPUs, CPU
/// model, hugepages and merged placement, is stored by KubeVirt's CRD exactly as sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_class_s_hardware_on_the_vm_is_stored_as_sent() {
    let cp = Fixture::new().with_fixture_crds().shared().await;
    let client = cp.client().await.expect("admin client");
    let ns = cp.namespace("kubevirt-hardware").await.expect("namespace");
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gpu-class.yaml"),
    )
    .expect("example");
    let mut docs = serde_yaml::Deserializer::from_str(&text);
    let class: kubevirt_operator::api::MachineClass =
        serde::Deserialize::deserialize(docs.next().expect("class")).expect("class YAML");
    let mut machine: Machine =
        serde::Deserialize::deserialize(docs.next().expect("machine")).expect("machine YAML");
    machine.metadata.namespace = Some(ns.clone());
    machine.metadata.uid = Some("0a1b2c3d-0000-4000-8000-0000000012e3".into());
    let (catalog, warnings) = Catalog::default().with_class_objects(&[class]);
    assert!(warnings.is_empty(), "{warnings:?}");
    let hardware = &catalog.class("gpu-a10").expect("the class").hardware;
    let (_, d) = derive_in(&machine, &catalog, hardware);
    let vm = d.vm.as_ref().expect("a VM");
    let sent = serde_json::to_value(vm).unwrap();
    let template = &sent["spec"]["template"]["spec"];
    assert_eq!(template["domain"]["devices"]["gpus"][0]["name"], "gpu1");
    assert_eq!(
        template["domain"]["devices"]["hostDevices"][0]["name"],
        "qat1"
    );
    assert_eq!(template["domain"]["cpu"]["dedicatedCpuPlacement"], true);
    assert_eq!(template["domain"]["cpu"]["model"], "host-passthrough");
    assert_eq!(template["domain"]["memory"]["hugepages"]["pageSize"], "1Gi");
    assert_eq!(
        template["nodeSelector"].as_object().map(|o| o.len()),
        Some(2)
    );
    assert_eq!(template["tolerations"][0]["key"], "nvidia.com/gpu");
    let stored = create::<VirtualMachine>(&client, &ns, vm).await;
    assert_eq!(stored["spec"], sent["spec"], "nothing pruned");
}

/// Issue 35: a VM whose disks are hot-plugged (a DataVolume disk and a blank claim, each
/// `hotpluggable` on bus `scsi`) is stored by KubeVirt's CRD exactly as sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_with_hot_plugged_disks_is_stored_as_sent() {
    use kubevirt_operator::reconciler::decide::hotplug;
    let cp = Fixture::new().with_fixture_crds().shared().await;
    let client = cp.client().await.expect("admin client");
    let ns = cp.namespace("kubevirt-hotplug").await.expect("namespace");
    let mut machine = example(
        "debian-http.yaml",
        &ns,
        "0a1b2c3d-0000-4000-8000-0000000012e4",
    );
    machine.spec.disks.push(
        serde_json::from_value(serde_json::json!({"name": "logs", "size": "1Gi"})).expect("disk"),
    );
    let (spec, d) = derive(&machine);
    let mut vm = d.vm.expect("a VM");
    let plan = hotplug::Plan {
        hotplugged: spec.disks.iter().map(|d| d.name.clone()).collect(),
        ..Default::default()
    };
    hotplug::apply(&plan, &mut vm);
    let sent = serde_json::to_value(&vm).unwrap();
    let volumes = sent["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .expect("volumes");
    assert!(
        volumes
            .iter()
            .any(|v| v["dataVolume"]["hotpluggable"] == true),
        "{volumes:?}"
    );
    assert!(
        volumes
            .iter()
            .any(|v| v["persistentVolumeClaim"]["hotpluggable"] == true),
        "{volumes:?}"
    );
    let stored = create::<VirtualMachine>(&client, &ns, &vm).await;
    assert_eq!(stored["spec"], sent["spec"], "nothing pruned");
}
