//! A class's hardware end to end (issue 35): a Machine of a GPU class gets the class's GPU,
//! host device, dedicated CPUs, CPU model, hugepages and placement on the VM the operator
//! writes (read back through KubeVirt's real VirtualMachine CRD, which prunes what it does not
//! know); a tenant with rights on Machines only cannot give itself a device, by a field or a
//! forged class record, nor CPU settings or hugepages the class does not allow.

use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::access::{WAIT, first_denial, machines, rule, start_replica};
use crate::machine_class::{
    NS, OP_NS, class, classes, create_when, fixture, machine, refusal, stop,
};
use crate::support::eventually;
use kubevirt_operator::api::names::CLASS_ANNOTATION;
use kubevirt_operator::reconciler::apis::kubevirt::{HostDevice, VirtualMachine};

const TENANT: &str = "tenant";

fn gpu_class() -> serde_json::Value {
    json!({
        "cpu": {"cores": 2, "dedicated": true, "model": "host-passthrough"},
        "memory": {"size": "4Gi", "hugepages": {"pageSize": "2Mi"}},
        "disks": [{"name": "root", "size": "10Gi"}],
        "gpus": [{"name": "gpu1", "deviceName": "nvidia.com/GA102GL_A10"}],
        "hostDevices": [{"name": "qat1", "deviceName": "intel.com/qat"}],
        "placement": {"nodeSelector": {"accelerator": "a10"},
                      "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]},
        "limits": {"cpu": {"models": ["host-model"]}}
    })
}

fn device(name: &str, device_name: &str) -> HostDevice {
    HostDevice {
        name: name.to_owned(),
        device_name: Some(device_name.to_owned()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_gets_its_class_s_hardware_and_cannot_give_itself_any() {
    let env = fixture()
        .user(TENANT, &[])
        .grant(
            NS,
            TENANT,
            vec![rule(
                "vitistack.io",
                "machines",
                &["get", "list", "create", "patch"],
            )],
        )
        .start()
        .await;
    let admin = env.admin_client().await;
    let (op, _) = start_replica(&env, OP_NS, "leader", &[]).await;
    let tenant = machines(&env.client_of(TENANT).await, NS);
    // The webhooks in force (the operator fills their caBundle once up).
    first_denial(
        &tenant,
        &PostParams::default(),
        &machine("huge", json!({"template": "huge"})),
        &op,
    )
    .await;
    classes(&admin)
        .create(&PostParams::default(), &class("gpu", gpu_class()))
        .await
        .expect("the GPU class");

    // The class's hardware, and the tenant's own placement merged under the class's.
    let trainer = machine(
        "trainer",
        json!({"template": "gpu", "placement": {
            "nodeSelector": {"zone": "b"},
            "tolerations": [{"key": "spot", "operator": "Exists"}]}}),
    );
    let unknown = |m: &str| m.contains(r#"Unsupported value: "gpu""#);
    create_when(&tenant, &trainer, unknown).await;
    let vms = Api::<VirtualMachine>::namespaced(admin.clone(), NS);
    let vm = eventually(WAIT, "trainer's VM", || async {
        vms.get_opt("trainer").await.ok()?
    })
    .await;
    let spec = &vm.spec.template.spec;
    let domain = &spec.domain;
    assert_eq!(
        domain.devices.gpus,
        [device("gpu1", "nvidia.com/GA102GL_A10")]
    );
    assert_eq!(
        domain.devices.host_devices,
        [device("qat1", "intel.com/qat")]
    );
    let cpu = domain.cpu.clone().expect("cpu");
    assert_eq!(
        (cpu.cores, cpu.dedicated_cpu_placement, cpu.model.as_deref()),
        (Some(2), Some(true), Some("host-passthrough"))
    );
    let memory = domain.memory.clone().expect("memory");
    assert_eq!(
        memory.hugepages.and_then(|h| h.page_size).as_deref(),
        Some("2Mi")
    );
    let selector: Vec<(&str, &str)> = (spec.node_selector.iter())
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(selector, [("accelerator", "a10"), ("zone", "b")]);
    let tolerated: Vec<Option<&str>> = (spec.tolerations.iter())
        .map(|t| t.key.as_deref())
        .collect();
    assert_eq!(tolerated, [Some("gpu"), Some("spot")]);

    // Devices of its own: refused, naming each field.
    let denied = refusal(
        tenant
            .create(
                &PostParams::default(),
                &machine(
                    "greedy",
                    json!({"template": "gpu",
                           "gpus": [{"name": "g2", "deviceName": "nvidia.com/GA102GL_A10"}],
                           "hostDevices": [{"name": "h2", "deviceName": "intel.com/qat"}]}),
                ),
            )
            .await,
    );
    for part in [
        "spec.gpus: Forbidden: a Machine cannot ask for devices: they come from its MachineClass",
        "spec.hostDevices: Forbidden: a Machine cannot ask for devices",
    ] {
        assert!(denied.contains(part), "{part}\n{denied}");
    }
    // Nor through a forged class record: the webhook writes the record of the class chosen.
    let mut forged = machine("greedy", json!({"template": "small"}));
    let record = json!({"name": "small", "cpu": {"cores": 1}, "memory": {"size": "2Gi"},
                        "gpus": [{"name": "g", "deviceName": "nvidia.com/x"}]});
    forged
        .annotations_mut()
        .insert(CLASS_ANNOTATION.to_owned(), record.to_string());
    let stored = tenant
        .create(&PostParams::default(), &forged)
        .await
        .expect("created, without the device");
    assert!(!stored.annotations()[CLASS_ANNOTATION].contains("nvidia"));
    let vm = eventually(WAIT, "greedy's VM", || async {
        vms.get_opt("greedy").await.ok()?
    })
    .await;
    let devices = &vm.spec.template.spec.domain.devices;
    assert!(
        devices.gpus.is_empty() && devices.host_devices.is_empty(),
        "{devices:?}"
    );

    // CPU settings the class does not allow, and hugepages of its own: refused naming each.
    let denied = refusal(
        tenant
            .create(
                &PostParams::default(),
                &machine(
                    "pinned",
                    json!({"template": "medium", "resources": {"cpu": {"dedicated": true}}}),
                ),
            )
            .await,
    );
    assert!(
        denied.contains(r#"spec.resources.cpu.dedicated: Forbidden: the class's value (false) stands: a Machine sets its own only where limits.cpu.allowDedicated of MachineClass "medium" is true"#),
        "{denied}"
    );
    let denied = refusal(
        tenant
            .create(
                &PostParams::default(),
                &machine(
                    "tuned",
                    json!({"template": "gpu", "resources": {
                        "cpu": {"model": "Skylake-Server"},
                        "memory": {"hugepages": {"pageSize": "1Gi"}}}}),
                ),
            )
            .await,
    );
    for part in [
        r#"spec.resources.cpu.model: Unsupported value: "Skylake-Server": supported values: "host-model", "host-passthrough""#,
        r#"spec.resources.memory.hugepages: Forbidden: hugepages come from the MachineClass"#,
    ] {
        assert!(denied.contains(part), "{part}\n{denied}");
    }
    // A listed model is the tenant's to choose.
    tenant
        .create(
            &PostParams::default(),
            &machine(
                "listed",
                json!({"template": "gpu", "resources": {"cpu": {"model": "host-model"}}}),
            ),
        )
        .await
        .expect("a model the class lists");
    stop(vec![op]);
}
