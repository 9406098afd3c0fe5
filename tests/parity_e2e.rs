//! Issue 25, parity with KubeVirt's own admission, on a real kube-apiserver with KubeVirt's CRDs:
//! `kubevirt-operator run` with its webhooks in force (tests/access). What the webhooks admit
//! must become a VM the API server accepts, and a Machine status it accepts.

mod access;
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};

use access::{WAIT, machines, setup};

fn machine(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("machine")
}

fn vms(client: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "kubevirt.io".into(),
        version: "v1".into(),
        api_version: "kubevirt.io/v1".into(),
        kind: "VirtualMachine".into(),
        plural: "virtualmachines".into(),
    };
    Api::namespaced_with(client.clone(), "team-a", &ar)
}

/// Polls `check` every 300 ms until it gives a value, for at most [`WAIT`].
async fn until<T>(what: &str, log: impl Fn() -> String, check: impl AsyncFn() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}\n{}", log());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// virt-api refuses inline networkData over 2048 bytes; 3000 bytes are admitted and reach the VM
/// through the Machine's derived Secret, never inline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_data_over_2048_bytes_never_reaches_the_vm_inline() {
    let (_cp, admin, op) = setup(&[]).await;
    let big = "n".repeat(3000);
    let api = machines(&admin, "team-a");
    let spec = json!({"template": "small",
        "cloudInit": {"userData": "#cloud-config\n", "networkData": big}});
    api.create(&PostParams::default(), &machine("netdata", spec))
        .await
        .expect("admitted");
    let log = || op.log_tail(40);
    let vm = until("the VM", log, async || {
        vms(&admin).get_opt("netdata").await.ok().flatten()
    })
    .await;
    let volumes = vm.data["spec"]["template"]["spec"]["volumes"].clone();
    let cloud_init = volumes
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == "cloudinitdisk"))
        .map(|v| v["cloudInitNoCloud"].clone())
        .unwrap_or_default();
    assert_eq!(
        cloud_init,
        json!({"userData": "#cloud-config\n", "networkDataSecretRef": {"name": "netdata-cloudinit"}})
    );
    assert!(!vm.data.to_string().contains(&big));
    let secret = Api::<Secret>::namespaced(admin.clone(), "team-a")
        .get("netdata-cloudinit")
        .await
        .expect("the derived Secret");
    let data = secret.data.unwrap_or_default();
    assert_eq!(
        data.get("networkdata").map(|b| b.0.clone()),
        Some(big.into_bytes())
    );
}
