//! Issue 25, parity with KubeVirt's own admission, on a real kube-apiserver with KubeVirt's CRDs:
//! `kubevirt-operator run` with its webhooks in force (tests/access). What the webhooks admit
//! must become a VM the API server accepts, and a Machine status it accepts.

mod access;
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};

use access::machine_object as machine;
use access::{WAIT, create_admitted, first_denial, fixture, machines};

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

/// 255 disks (the template's root among them) and cloud-init make 256 volumes, KubeVirt's most:
/// admitted, the VM and the Machine's status are written. One disk more is refused at admission
/// with the limit named (before issue 25 it was admitted, and the API server refused its VM).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_machine_admitted_gets_its_vm_and_its_status() {
    let env = fixture(&[]).start().await;
    let (admin, op) = (env.admin_client().await, env.replica());
    let disks = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| json!({"name": format!("d{i:03}"), "size": "1Gi"}))
            .collect()
    };
    let spec = |n: usize| {
        json!({"template": "small", "disks": disks(n),
               "cloudInit": {"userData": "#cloud-config\n"}})
    };
    let api = machines(&admin, "team-a");
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let message = first_denial(&api, &dry, &machine("over", spec(255)), op).await;
    assert!(
        message.contains(
            "spec: Forbidden: the VM would have 257 volumes (256 disks, 0 CD-ROMs, the cloud-init disk): KubeVirt allows at most 256 per VM"
        ),
        "{message}"
    );
    api.create(&PostParams::default(), &machine("largest", spec(254)))
        .await
        .expect("256 volumes are admitted");
    let log = || op.log_tail(40);
    let vm = until("the largest Machine's VM", log, async || {
        vms(&admin).get_opt("largest").await.ok().flatten()
    })
    .await;
    let volumes = vm.data["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .map(Vec::len);
    assert_eq!(volumes, Some(256));
    // And 256 is the real limit: the API server refuses that VM with one volume more.
    let mut over: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "over"}, "spec": vm.data["spec"].clone()
    }))
    .expect("VM");
    let template = &mut over.data["spec"]["template"]["spec"];
    let one_more = |list: &mut Value, item: Value| {
        if let Some(items) = list.as_array_mut() {
            items.push(item);
        }
    };
    one_more(
        &mut template["volumes"],
        json!({"name": "extra", "persistentVolumeClaim": {"claimName": "extra"}}),
    );
    one_more(
        &mut template["domain"]["devices"]["disks"],
        json!({"name": "extra", "disk": {"bus": "virtio"}}),
    );
    match vms(&admin).create(&dry, &over).await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 422, "{e:?}"),
        other => panic!("257 volumes accepted: {other:?}"),
    }
    let disks = until("the largest Machine's status", log, async || {
        let m = api.get("largest").await.ok()?;
        let n = m.data.pointer("/status/disks")?.as_array()?.len();
        (n == 255).then_some(n)
    })
    .await;
    assert_eq!(disks, 255);
}

/// virt-api refuses inline networkData over 2048 bytes; 3000 bytes are admitted and reach the VM
/// through the Machine's derived Secret, never inline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_data_over_2048_bytes_never_reaches_the_vm_inline() {
    let env = fixture(&[]).start().await;
    let (admin, op) = (env.admin_client().await, env.replica());
    let big = "n".repeat(3000);
    let api = machines(&admin, "team-a");
    let spec = json!({"template": "small",
        "cloudInit": {"userData": "#cloud-config\n", "networkData": big}});
    create_admitted(&api, &machine("netdata", spec), op).await;
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
