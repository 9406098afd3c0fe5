//! Attachments: removed with their network, never made outside the allow list; forged VMIs.

use crate::operator::RESYNC;
use crate::ownership::*;
#[allow(unused_imports)]
use crate::*;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_networks_attachment_is_deleted() {
    let env = env("network-removed").await;
    env.network_configuration("lan-a", "br0", 10).await;
    env.network_configuration("lan-b", "br1", 11).await;
    env.machine(
        "wired",
        json!({"template": "small", "networks": [
            {"name": "eth0", "networkName": "lan-a"}, {"name": "eth1", "networkName": "lan-b"}]}),
    )
    .await;
    env.machine(
        "neighbour",
        json!({"template": "small", "networks": [{"name": "eth0", "networkName": "lan-a"}]}),
    )
    .await;
    env.wait_for(&nad_ar(), "lan-a").await;
    env.wait_for(&nad_ar(), "lan-b").await;
    env.wait_for(&vm_ar(), "wired").await;

    let networks = |list: Value| json!({"spec": {"networks": list}});
    env.api(&machine_ar())
        .patch(
            "wired",
            &PatchParams::default(),
            &Patch::Merge(networks(json!([{"name": "eth0", "networkName": "lan-a"}]))),
        )
        .await
        .expect("remove eth1");
    env.wait_gone(&nad_ar(), "lan-b").await;

    // lan-a is still used by `neighbour`: dropping it from `wired` keeps it.
    env.api(&machine_ar())
        .patch(
            "wired",
            &PatchParams::default(),
            &Patch::Merge(networks(json!([]))),
        )
        .await
        .expect("remove eth0");
    env.until("wired's VM without networks", || async {
        let vm = env.get(&vm_ar(), "wired").await?;
        let text = vm.pointer("/spec/template/spec/networks")?.to_string();
        (!text.contains("lan-a") && !text.contains("lan-b")).then_some(())
    })
    .await;
    assert!(
        env.get(&nad_ar(), "lan-a").await.is_some(),
        "neighbour uses it"
    );
}

/// Issue 25: a NetworkConfiguration stored while no webhook ran (none runs here) on a bridge
/// outside `ALLOWED_BRIDGES` never becomes an attachment; the Machine naming it says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_network_outside_the_allow_list_never_becomes_an_attachment() {
    let env = env("network-refused").await;
    env.network_configuration("mgmt", "cni0", 0).await;
    env.machine(
        "tapped",
        json!({"template": "small", "networks": [{"name": "eth0", "networkName": "mgmt"}]}),
    )
    .await;
    let message = env
        .wait_condition("tapped", "NetworkReady", "False", "NetworkInvalid")
        .await;
    assert!(
        message.contains(r#"spec.bridge: Unsupported value: "cni0""#)
            && message.contains("ALLOWED_BRIDGES"),
        "{message}"
    );
    stays(
        &env,
        "no attachment and no VM for a refused network",
        RESYNC + Duration::from_secs(2),
        || async {
            env.get(&nad_ar(), "mgmt").await.is_none()
                && env.get(&vm_ar(), "tapped").await.is_none()
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_vmi_is_ignored() {
    let env = env("forged-vmi").await;
    env.machine("forged", json!({"template": "small"})).await;
    env.machine("genuine", json!({"template": "small"})).await;
    env.wait_for(&vm_ar(), "forged").await;
    let genuine_vm = env.wait_for(&vm_ar(), "genuine").await;
    env.wait_phase("forged", "Creating").await;

    let running = |node: &str, ip: &str| {
        json!({"phase": "Running", "nodeName": node,
               "interfaces": [{"name": "default", "ipAddress": ip, "ipAddresses": [ip]}]})
    };
    // Labelled like the Machine's, but no VM controls them: one with the VM's name, one without.
    env.vmi("forged", "forged", None, running("evil-node", "10.66.0.1"))
        .await;
    env.vmi(
        "forged-impostor",
        "forged",
        None,
        running("evil-node", "10.66.0.2"),
    )
    .await;
    // The control: a VMI that the genuine Machine's VM controls does feed its status.
    env.vmi(
        "genuine",
        "genuine",
        Some(&genuine_vm),
        running("node-a", "10.0.0.7"),
    )
    .await;
    let genuine = env.wait_phase("genuine", "Running").await;
    assert_eq!(genuine.pointer("/status/nodeName"), Some(&json!("node-a")));

    stays(
        &env,
        "forged VMIs do not feed the status",
        RESYNC * 2,
        async || {
            let m = env.get(&machine_ar(), "forged").await.expect("Machine");
            let status = &m["status"];
            status["phase"] != "Running"
                && status.get("nodeName").is_none_or(Value::is_null)
                && status.get("vmiName").is_none_or(Value::is_null)
                && !status.to_string().contains("10.66.0.")
        },
    )
    .await;

    // Nor do they hold its deletion (there is no VMI of its VM to wait for).
    env.delete(&machine_ar(), "forged", &DeleteParams::default())
        .await;
    env.wait_gone(&machine_ar(), "forged").await;
    for name in ["forged", "forged-impostor"] {
        assert!(
            env.get(&vmi_ar(), name).await.is_some(),
            "{name}: not the operator's to delete"
        );
    }
}
