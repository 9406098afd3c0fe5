//! Issue 35, live disk hot-plug, end to end on a real control plane with KubeVirt's real
//! `KubeVirt`, VirtualMachine and VirtualMachineInstance CRDs, playing KubeVirt (its install
//! resource, and the VMI its VM controller runs and hot-plugs into):
//! - the cluster's KubeVirt lacks `DeclarativeHotplugVolumes`: a disk added to the running
//!   Machine is written as a regular disk, waits for a restart, and `RestartRequired` says why
//!   (reason `HotplugGateDisabled`, also an Event); the VMI is not restarted;
//! - the gate is enabled (with `vmRolloutStrategy: LiveUpdate`): the waiting disk is written
//!   `hotpluggable` on bus `scsi`, and so is one added next, at once; the VMI keeps its uid, the
//!   API server accepts the VM (the field survives KubeVirt's schema), and `status.disks[]` shows
//!   each hot-plugged disk with KubeVirt's attach phase;
//! - a disk not hot-plugged may not be removed; a hot-plugged one removed from the Machine
//!   leaves the VM (KubeVirt detaches it) and its claim stays, released (no owner reference to
//!   the Machine).

mod access;
mod kubevirt;
mod support;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use access::{WAIT, first_denial, fixture, machines};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kubevirt_operator::api::{Machine, MachineStatus};
use kubevirt_operator::reconciler::apis::kubevirt::{
    KubeVirt, VirtualMachine, VirtualMachineInstance, Volume,
};

const NS: &str = "team-a";

fn kubevirts(admin: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        admin.clone(),
        "kubevirt",
        &ApiResource::erase::<KubeVirt>(&()),
    )
}

fn vmis(admin: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        admin.clone(),
        NS,
        &ApiResource::erase::<VirtualMachineInstance>(&()),
    )
}

/// KubeVirt's configuration, as an admin sets it on its install resource.
async fn configure(admin: &Client, gates: &[&str]) {
    let configuration = json!({"spec": {"configuration": {
        "vmRolloutStrategy": "LiveUpdate",
        "developerConfiguration": {"featureGates": gates}}}});
    let api = kubevirts(admin);
    if api
        .get_opt("kubevirt")
        .await
        .expect("get KubeVirt")
        .is_none()
    {
        let mut kv = json!({"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
            "metadata": {"name": "kubevirt"}, "spec": {}});
        kv["spec"] = configuration["spec"].clone();
        let kv: DynamicObject = serde_json::from_value(kv).expect("KubeVirt");
        api.create(&PostParams::default(), &kv)
            .await
            .expect("KubeVirt's CRD accepts it");
    } else {
        api.patch(
            "kubevirt",
            &PatchParams::default(),
            &Patch::Merge(configuration),
        )
        .await
        .expect("KubeVirt configured");
    }
}

async fn vm_where(
    admin: &Client,
    op: &support::Proc,
    what: &str,
    pred: impl Fn(&VirtualMachine) -> bool,
) -> VirtualMachine {
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    support::eventually_with(
        WAIT,
        what,
        || op.log_tail(40),
        || async {
            let vm = vms.get_opt("web").await.ok().flatten()?;
            pred(&vm).then_some(vm)
        },
    )
    .await
}

fn volume<'v>(vm: &'v VirtualMachine, name: &str) -> Option<&'v Volume> {
    (vm.spec.template.spec.volumes.iter()).find(|v| v.name == name)
}

fn hotpluggable(vm: &VirtualMachine, name: &str) -> bool {
    volume(vm, name)
        .and_then(|v| v.persistent_volume_claim.as_ref())
        .is_some_and(|p| p.hotpluggable)
}

fn bus(vm: &VirtualMachine, name: &str) -> Option<String> {
    let disks = &vm.spec.template.spec.domain.devices.disks;
    let d = disks.iter().find(|d| d.name == name)?;
    d.disk.as_ref()?.bus.clone()
}

async fn vmi_uid(admin: &Client) -> Option<String> {
    vmis(admin)
        .get_opt("web")
        .await
        .ok()
        .flatten()?
        .metadata
        .uid
}

async fn set_disks(admin: &Client, disks: &[&str]) -> Result<Machine, kube::Error> {
    let disks: Vec<Value> = (disks.iter())
        .map(|d| json!({"name": d, "size": "1Gi"}))
        .collect();
    let api: Api<Machine> = Api::namespaced(admin.clone(), NS);
    let patch = json!({"spec": {"disks": disks}});
    api.patch("web", &PatchParams::default(), &Patch::Merge(patch))
        .await
}

fn restart_required(s: &MachineStatus) -> Option<(String, String)> {
    (s.conditions.iter())
        .find(|c| c.type_ == "RestartRequired" && c.status == "True")
        .map(|c| (c.reason.clone(), c.message.clone()))
}

/// KubeVirt's VM controller, hot-plugging: the VMI gets the volumes and reports each attached.
async fn play_attached(admin: &Client, volumes: &[&str], hotplugged: &[&str]) {
    let status: Vec<Value> = (volumes.iter())
        .map(|v| {
            let mut s = json!({"name": v, "target": "", "phase": "Ready"});
            if hotplugged.contains(v) {
                s["hotplugVolume"] = json!({"attachPodName": format!("hp-volume-{v}")});
            }
            s
        })
        .collect();
    kubevirt::vmi(
        admin,
        NS,
        "web",
        json!({"phase": "Running", "nodeName": "n1", "volumeStatus": status}),
    )
    .await;
    let spec: Vec<Value> = (volumes.iter())
        .map(|v| json!({"name": v, "persistentVolumeClaim": {"claimName": format!("web-{v}")}}))
        .collect();
    vmis(admin)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"volumes": spec}})),
        )
        .await
        .expect("VMI volumes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_added_to_a_running_machine_hot_plugs_where_kubevirt_serves_it() {
    let mut env = fixture(&[]).start().await;
    let (admin, op) = env.take_replica().await;
    support::create_namespace(&admin, "kubevirt")
        .await
        .expect("namespace kubevirt");
    // 1. KubeVirt without the gate; a running Machine with one disk.
    configure(&admin, &["Snapshot"]).await;
    let web: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": "web"},
        "spec": {"template": "small", "disks": [{"name": "root", "size": "1Gi"}]}
    }))
    .expect("machine");
    let probe: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": "probe"}, "spec": {"template": "nope"}
    }))
    .expect("probe");
    // The webhooks answer: an invalid Machine is refused.
    first_denial(&machines(&admin, NS), &PostParams::default(), &probe, &op).await;
    machines(&admin, NS)
        .create(&PostParams::default(), &web)
        .await
        .expect("web");
    let vm = vm_where(&admin, &op, "the VM", |_| true).await;
    assert!(!hotpluggable(&vm, "root"), "a stopped VM's disks boot");
    play_attached(&admin, &["root"], &[]).await;
    access::wait_status(&admin, NS, "web", &op, "running", |s| s.vmi_name.is_some()).await;
    let uid = vmi_uid(&admin).await.expect("the VMI");

    // 2. Not served: the added disk waits for a restart, and the condition says why.
    set_disks(&admin, &["root", "logs"])
        .await
        .expect("add logs");
    let vm = vm_where(&admin, &op, "logs in the VM", |vm| {
        volume(vm, "logs").is_some()
    })
    .await;
    assert!(!hotpluggable(&vm, "logs"), "{vm:?}");
    assert_eq!(bus(&vm, "logs").as_deref(), Some("virtio"));
    let s = access::wait_status(&admin, NS, "web", &op, "RestartRequired", |s| {
        restart_required(s).is_some()
    })
    .await;
    let (reason, message) = restart_required(&s).expect("RestartRequired");
    assert_eq!(reason, "HotplugGateDisabled");
    assert!(
        message.contains("disk(s) logs added to the running VM wait for a restart")
            && message.contains("does not enable DeclarativeHotplugVolumes"),
        "{message}"
    );
    let logs = s.disks.iter().find(|d| d.name == "logs").expect("logs");
    assert_eq!(logs.hotplug, None);
    let events = support::events_about(&admin, NS, "web").await;
    assert!(
        events
            .iter()
            .any(|(_, r, n)| r == "HotplugGateDisabled" && n.contains("logs")),
        "{events:?}"
    );
    assert_eq!(
        vmi_uid(&admin).await.as_deref(),
        Some(uid.as_str()),
        "no restart"
    );

    // 3. Served: the waiting disk is hot-plugged (the next reconcile reads the new
    // configuration), no restart, and the condition goes.
    configure(&admin, &["Snapshot", "DeclarativeHotplugVolumes"]).await;
    let nudges = std::sync::atomic::AtomicU32::new(0);
    let vm = support::eventually_with(
        WAIT,
        "logs hot-plugged",
        || op.log_tail(40),
        || async {
            let n = nudges.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let nudge = json!({"metadata": {"annotations": {"test/nudge": n.to_string()}}});
            let api: Api<Machine> = Api::namespaced(admin.clone(), NS);
            let _ = api
                .patch("web", &PatchParams::default(), &Patch::Merge(nudge))
                .await;
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
            let vm = vms.get_opt("web").await.ok().flatten()?;
            hotpluggable(&vm, "logs").then_some(vm)
        },
    )
    .await;
    assert_eq!(bus(&vm, "logs").as_deref(), Some("scsi"));
    assert!(!hotpluggable(&vm, "root"));
    play_attached(&admin, &["root", "logs"], &["logs"]).await;
    let s = access::wait_status(&admin, NS, "web", &op, "logs attached", |s| {
        let logs = s.disks.iter().find(|d| d.name == "logs");
        let phase = logs.and_then(|d| d.hotplug.as_ref()?.phase.as_deref());
        phase == Some("Ready") && restart_required(s).is_none()
    })
    .await;
    assert_eq!(s.disks.iter().filter(|d| d.hotplug.is_some()).count(), 1);
    assert_eq!(
        vmi_uid(&admin).await.as_deref(),
        Some(uid.as_str()),
        "no restart"
    );

    // 4. A disk added now is hot-plugged at once.
    set_disks(&admin, &["root", "logs", "data"])
        .await
        .expect("add data");
    let vm = vm_where(&admin, &op, "data hot-plugged", |vm| {
        hotpluggable(vm, "data")
    })
    .await;
    assert_eq!(bus(&vm, "data").as_deref(), Some("scsi"));
    assert!(hotpluggable(&vm, "logs"), "stays hot-pluggable");
    let s = access::wait_status(&admin, NS, "web", &op, "data shown", |s| {
        s.disks
            .iter()
            .any(|d| d.name == "data" && d.hotplug.is_some())
    })
    .await;
    assert_eq!(restart_required(&s), None);
    assert_eq!(
        vmi_uid(&admin).await.as_deref(),
        Some(uid.as_str()),
        "no restart"
    );

    // 5. Removing a hot-plugged disk detaches it; its claim stays, released.
    let machine: Machine = Api::namespaced(admin.clone(), NS)
        .get("web")
        .await
        .expect("web");
    set_disks(&admin, &["root", "data"])
        .await
        .expect("remove logs");
    vm_where(&admin, &op, "logs detached", |vm| {
        volume(vm, "logs").is_none()
    })
    .await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    let claim = support::eventually_with(
        WAIT,
        "logs' claim released",
        || op.log_tail(40),
        || async {
            let c = claims.get_opt("web-logs").await.ok().flatten()?;
            let refs = c.metadata.owner_references.clone().unwrap_or_default();
            refs.iter()
                .all(|r| Some(&r.uid) != machine.metadata.uid.as_ref())
                .then_some(c)
        },
    )
    .await;
    assert!(claim.metadata.deletion_timestamp.is_none(), "kept");
    let s = access::wait_status(&admin, NS, "web", &op, "logs gone", |s| {
        s.disks.iter().all(|d| d.name != "logs")
    })
    .await;
    assert!(
        s.disks
            .iter()
            .any(|d| d.name == "data" && d.hotplug.is_some())
    );
    assert_eq!(
        vmi_uid(&admin).await.as_deref(),
        Some(uid.as_str()),
        "no restart"
    );
}
