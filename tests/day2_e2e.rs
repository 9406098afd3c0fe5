//! Issue 20's rules for a Machine that runs, end to end on a real control plane with
//! `kubevirt-operator run --propagate-label-prefixes team.example.com/`, playing KubeVirt's VM
//! controller: a live socket change under `maxSockets` reaches the VM with no restart, and the
//! maxima are fixed while it runs; `updateStrategy: Restart` restarts once per generation when the
//! VM says RestartRequired; interfaces get MAC addresses no two Machines share (created at once,
//! or after an operator restart) that survive the VM's deletion; a MAC another Machine uses is
//! refused naming it; labels under the prefix reach the VM and its template.

mod access;
mod kubevirt;
mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use futures::future::join_all;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, Error};
use serde_json::{Value, json};

use access::{WAIT, first_denial, fixture, machines, start_operator};
use kubevirt_operator::api::Machine;
use kubevirt_operator::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};

const NS: &str = "team-a";
const PREFIX: &str = "team.example.com/";

fn machine(name: &str, labels: Value, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name, "labels": labels}, "spec": spec
    }))
    .expect("machine")
}

fn vms(admin: &Client) -> Api<VirtualMachine> {
    Api::namespaced(admin.clone(), NS)
}

async fn patch(admin: &Client, name: &str, patch: Value) -> Result<Machine, Error> {
    let api: Api<Machine> = Api::namespaced(admin.clone(), NS);
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
}

async fn vm_where(
    admin: &Client,
    op: &support::Proc,
    what: &str,
    pred: impl Fn(&VirtualMachine) -> bool,
) -> VirtualMachine {
    support::eventually_with(
        WAIT,
        what,
        || op.log_tail(40),
        || async {
            let vm = vms(admin).get_opt("web").await.ok().flatten()?;
            pred(&vm).then_some(vm)
        },
    )
    .await
}

fn mac_of(m: &Machine) -> String {
    m.spec.networks[0]
        .mac_address
        .clone()
        .expect("a MAC address")
}

fn vm_mac(vm: &VirtualMachine) -> Option<String> {
    vm.spec.template.spec.domain.devices.interfaces[0]
        .mac_address
        .clone()
}

async fn vmi_uid(admin: &Client) -> Option<String> {
    let vmis: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        NS,
        &ApiResource::erase::<VirtualMachineInstance>(&()),
    );
    vmis.get_opt("web").await.ok().flatten()?.metadata.uid
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_machine_resizes_restarts_on_update_and_keeps_its_addresses() {
    let extra = [
        "--propagate-label-prefixes",
        PREFIX,
        "--allowed-bridges",
        "br0",
    ];
    let mut env = fixture(&extra).start().await;
    let (admin, mut op) = env.take_replica().await;
    let api = machines(&admin, NS);
    let net = |name: &str| json!([{"name": "eth0", "networkName": name}]);

    // 1. The VM carries the maxima, the Machine's MAC and the labels under the prefix.
    let web = machine(
        "web",
        json!({"team.example.com/tier": "web", "other": "x"}),
        json!({"template": "small", "updateStrategy": "Restart", "networks": net("prod"),
               "resources": {"cpu": {"sockets": 1, "maxSockets": 4},
                             "memory": {"size": "2Gi", "maxSize": "8Gi"}}}),
    );
    let network: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "NetworkConfiguration",
        "metadata": {"name": "prod"}, "spec": {"bridge": "br0"}
    }))
    .expect("network");
    let networks: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        NS,
        &ApiResource::erase::<kubevirt_operator::api::NetworkConfiguration>(&()),
    );
    first_denial(
        &api,
        &PostParams::default(),
        &machine("probe", json!({}), json!({"template": "nope"})),
        &op,
    )
    .await;
    networks
        .create(&PostParams::default(), &network)
        .await
        .expect("NetworkConfiguration");
    api.create(&PostParams::default(), &web).await.expect("web");
    let stored: Machine = Api::namespaced(admin.clone(), NS)
        .get("web")
        .await
        .expect("web");
    let mac = mac_of(&stored);
    let first_octet = u8::from_str_radix(&mac[..2], 16).expect("hex");
    assert_eq!(
        first_octet & 0x03,
        0x02,
        "locally administered unicast: {mac}"
    );
    let vm = vm_where(&admin, &op, "the VM", |_| true).await;
    let domain = &vm.spec.template.spec.domain;
    assert_eq!(domain.cpu.as_ref().and_then(|c| c.max_sockets), Some(4));
    assert_eq!(
        domain.memory.as_ref().and_then(|m| m.max_guest.as_deref()),
        Some("8Gi")
    );
    assert_eq!(vm_mac(&vm).as_deref(), Some(mac.as_str()));
    let template_labels = &vm.spec.template.metadata.as_ref().expect("template").labels;
    for labels in [
        vm.metadata.labels.as_ref().expect("labels"),
        template_labels,
    ] {
        assert_eq!(
            labels.get("team.example.com/tier").map(String::as_str),
            Some("web")
        );
        assert!(!labels.contains_key("other"), "{labels:?}");
        assert_eq!(
            labels.get("vitistack.io/machine").map(String::as_str),
            Some("web")
        );
    }

    // 2. Running: sockets change live under maxSockets; the maxima are fixed.
    kubevirt::vmi(
        &admin,
        NS,
        "web",
        json!({"phase": "Running", "nodeName": "n1"}),
    )
    .await;
    access::wait_status(&admin, NS, "web", &op, "vmiName", |s| s.vmi_name.is_some()).await;
    let first_vmi = vmi_uid(&admin).await.expect("VMI");
    let cpu = |s: Value| json!({"spec": {"resources": {"cpu": s}}});
    let refused = patch(&admin, "web", cpu(json!({"sockets": 5})))
        .await
        .expect_err("over maxSockets");
    assert!(
        refused.to_string().contains("spec.resources.cpu.sockets: Invalid value: 5: must be at most spec.resources.cpu.maxSockets (4)"),
        "{refused}"
    );
    let refused = patch(&admin, "web", cpu(json!({"maxSockets": 8})))
        .await
        .expect_err("maxSockets while running");
    assert!(
        refused
            .to_string()
            .contains("spec.resources.cpu.maxSockets: Forbidden: may not change while the VM runs"),
        "{refused}"
    );
    patch(&admin, "web", cpu(json!({"sockets": 2})))
        .await
        .expect("hot-plug");
    vm_where(&admin, &op, "2 sockets", |vm| {
        let c = vm.spec.template.spec.domain.cpu.as_ref();
        c.and_then(|c| c.sockets) == Some(2) && c.and_then(|c| c.max_sockets) == Some(4)
    })
    .await;
    let s = access::wait_status(&admin, NS, "web", &op, "observed", |s| {
        s.observed_generation == Some(2)
    })
    .await;
    assert!(
        s.conditions.iter().all(|c| c.type_ != "RestartRequired"),
        "{s:?}"
    );
    assert_eq!(
        vmi_uid(&admin).await.as_deref(),
        Some(first_vmi.as_str()),
        "no restart"
    );

    // 3. updateStrategy Restart: KubeVirt says RestartRequired; restarted once for this
    // generation, even while the condition lingers on a new VMI.
    tokio::time::sleep(Duration::from_millis(1100)).await; // after the VMI's creation
    let generation = patch(
        &admin,
        "web",
        json!({"spec": {"domain": {"firmware": {"bootloader": {"efi": true}}}}}),
    )
    .await
    .expect("a change that needs a restart")
    .metadata
    .generation
    .expect("generation");
    vms(&admin)
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
            "printableStatus": "Running",
            "conditions": [{"type": "RestartRequired", "status": "True",
                "lastTransitionTime": now(),
                "message": "a non-live-updatable field was changed in the template spec"}]}})),
        )
        .await
        .expect("VM status");
    support::eventually_with(
        WAIT,
        "the VMI deleted",
        || op.log_tail(40),
        || async { (vmi_uid(&admin).await.as_deref() != Some(first_vmi.as_str())).then_some(()) },
    )
    .await;
    access::wait_status(&admin, NS, "web", &op, "lastRestartGeneration", |s| {
        s.last_restart_generation == Some(generation)
    })
    .await;
    kubevirt::vmi(
        &admin,
        NS,
        "web",
        json!({"phase": "Running", "nodeName": "n2"}),
    )
    .await;
    let second_vmi = vmi_uid(&admin).await.expect("the new VMI");
    access::wait_status(&admin, NS, "web", &op, "the new node", |s| {
        s.node_name.as_deref() == Some("n2")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await; // a resync or more
    assert_eq!(
        vmi_uid(&admin).await,
        Some(second_vmi),
        "restarted once, not again"
    );
    let events = support::events_about(&admin, NS, "web").await;
    let restarts: Vec<_> = events.iter().filter(|(_, r, _)| r == "Restarted").collect();
    assert_eq!(restarts.len(), 1, "{events:?}");
    assert!(
        restarts[0].2.contains("updateStrategy: Restart"),
        "{restarts:?}"
    );

    // 4. Ten Machines created at once: ten addresses, none the first one's; a copied address
    // is refused naming its Machine.
    let created = join_all((0..10).map(|i| {
        let api = api.clone();
        let m = machine(
            &format!("m{i}"),
            json!({}),
            json!({"template": "small", "networks": net("prod")}),
        );
        async move {
            api.create(&PostParams::default(), &m)
                .await
                .expect("created")
        }
    }))
    .await;
    let macs: BTreeSet<String> = created
        .iter()
        .map(|m| {
            m.data["spec"]["networks"][0]["macAddress"]
                .as_str()
                .expect("mac")
                .to_owned()
        })
        .collect();
    assert_eq!(macs.len(), 10, "{macs:?}");
    assert!(!macs.contains(&mac));
    let copy = machine(
        "copy",
        json!({}),
        json!({"template": "small",
        "networks": [{"name": "eth0", "networkName": "prod", "macAddress": mac.to_uppercase()}]}),
    );
    let refused = first_denial(&api, &PostParams::default(), &copy, &op).await;
    assert!(
        refused.contains(&format!("spec.networks[0].macAddress: Duplicate value: \"{}\": already used by Machine team-a/web", mac.to_uppercase())),
        "{refused}"
    );

    // 5. The address survives the VM's deletion and an operator restart; the restarted
    // operator knows every address in use.
    let old_uid = vm.metadata.uid.clone();
    vms(&admin)
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete VM");
    let vm = vm_where(&admin, &op, "the VM made again", |vm| {
        vm.metadata.uid != old_uid
    })
    .await;
    assert_eq!(vm_mac(&vm).as_deref(), Some(mac.as_str()));
    op.kill();
    let op = start_operator(&env, access::OP_NS, &extra).await;
    let refused = first_denial(&api, &PostParams::default(), &copy, &op).await;
    assert!(
        refused.contains("already used by Machine team-a/web"),
        "{refused}"
    );
    patch(
        &admin,
        "web",
        json!({"metadata": {"labels": {"team.example.com/tier": "front"}}}),
    )
    .await
    .expect("an update after the restart");
    let vm = vm_where(&admin, &op, "the new label", |vm| {
        vm.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("team.example.com/tier"))
            .map(String::as_str)
            == Some("front")
    })
    .await;
    assert_eq!(vm_mac(&vm).as_deref(), Some(mac.as_str()));
}
