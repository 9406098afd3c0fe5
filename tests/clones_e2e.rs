//! Issue 35's clones on a real control plane (`kubevirt-operator run`, webhooks by URL, CDI's and
//! KubeVirt's real CRDs installed): a non-admin author with only the named rights makes a Machine
//! with `spec.cloneFrom.machine`; it gets the source's disks as CDI clones of the source's claims
//! (DataVolumes with `source.pvc`, never the source's claims themselves), its own MAC and address,
//! its own run strategy, and a VM of its own name with no `firmware.uuid` (nothing of the
//! source's firmware identity is copied: KubeVirt gives a new VM its own UUID). An author who may not `get` the source,
//! or lacks CDI's clone right on its claims, is refused; a source on another cluster is refused
//! with the reason; `spec.cloneFrom` is immutable. A clone from a MachineSnapshot gets each disk
//! as a CDI clone of its VolumeSnapshot (DataVolumes with `source.snapshot`), asked as the author
//! (`get` on the MachineSnapshot, CDI's clone right on each VolumeSnapshot).

mod access;
mod support;

/// The clone from a MachineSnapshot, a part of the one test (still one test binary).
mod clones_e2e {
    pub mod snapshot;
}

use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, Error};
use serde_json::{Value, json};

pub use access::create_answered as create;
use access::{OP_NS, WAIT, fixture, machine_object, machines, register_cluster, rule};
use kubevirt_operator::api::NetworkConfiguration;
use kubevirt_operator::api::names::KUBEVIRT_CONFIG_ANNOTATION;
use kubevirt_operator::reconciler::apis::cdi::DataVolume;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use support::Proc;

pub const NS: &str = "team-a";
/// The VolumeSnapshot of web's root disk, as KubeVirt names it in the played content.
pub const ROOT_COPY: &str = "vmsnapshot-1a2b-volume-root";

pub fn read_snapshots() -> PolicyRule {
    rule("vitistack.io", "machinesnapshots", &["get"])
}

pub fn str_at<'a>(m: &'a DynamicObject, pointer: &str) -> Option<&'a str> {
    m.data.pointer(pointer).and_then(Value::as_str)
}

pub async fn data_volume(admin: &Client, name: &str, op: &Proc) -> DataVolume {
    let api: Api<DataVolume> = Api::namespaced(admin.clone(), NS);
    support::eventually_with(
        WAIT,
        &format!("DataVolume {name}"),
        || op.log_tail(40),
        || async { api.get_opt(name).await.ok().flatten() },
    )
    .await
}

async fn vm(admin: &Client, name: &str, op: &Proc) -> Value {
    let api: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    let found = support::eventually_with(
        WAIT,
        &format!("VirtualMachine {name}"),
        || op.log_tail(40),
        || async { api.get_opt(name).await.ok().flatten() },
    )
    .await;
    serde_json::to_value(found).expect("VM")
}

/// CDI's clone right on the claims named, as CDI asks it (`create datavolumes/source`).
pub fn clone_claims(names: &[&str]) -> PolicyRule {
    PolicyRule {
        resource_names: Some(names.iter().map(|n| n.to_string()).collect()),
        ..rule("cdi.kubevirt.io", "datavolumes/source", &["create"])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_gets_the_sources_disks_as_clones_and_an_identity_of_its_own() {
    let write = || rule("vitistack.io", "machines", &["create", "get", "patch"]);
    let env = fixture(&["--allowed-bridges", "br0"])
        // amy: the named rights, no more (Machines, and CDI's clone right on web's claim).
        .user("amy", &[])
        .grant(NS, "amy", vec![write(), clone_claims(&["web-root"])])
        // ben may create Machines but not read one.
        .user("ben", &[])
        .grant(
            NS,
            "ben",
            vec![
                rule("vitistack.io", "machines", &["create"]),
                clone_claims(&["web-root"]),
            ],
        )
        // cara may read and create Machines and read snapshots, not clone claims or snapshots.
        .user("cara", &[])
        .grant(NS, "cara", vec![write(), read_snapshots()])
        // dora: the named rights for a clone from a snapshot (Machines, the MachineSnapshot,
        // CDI's clone right on its VolumeSnapshot).
        .user("dora", &[])
        .grant(
            NS,
            "dora",
            vec![write(), read_snapshots(), clone_claims(&[ROOT_COPY])],
        )
        .start()
        .await;
    let (admin, op) = (env.admin_client().await, env.replica());
    let ncs: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        NS,
        &ApiResource::erase::<NetworkConfiguration>(&()),
    );
    let lab = json!({"apiVersion": "vitistack.io/v1alpha1", "kind": "NetworkConfiguration",
        "metadata": {"name": "lab"}, "spec": {"bridge": "br0", "ipam": {
        "subnet": "10.30.0.0/24", "ranges": [{"start": "10.30.0.10", "end": "10.30.0.20"}]}}});
    let lab: DynamicObject = serde_json::from_value(lab).expect("lab");
    access::create_admitted(&ncs, &lab, op).await;

    // The webhook hands out lab's addresses once its watch of NetworkConfigurations has seen
    // lab: wait for that, asking with dry runs (a Machine written before gets no address).
    let admins = machines(&admin, NS);
    let probe = machine_object(
        "probe",
        json!({"template": "small", "networks": [{"name": "eth0", "networkName": "lab"}]}),
    );
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    support::eventually_with(
        WAIT,
        "the webhook knows lab's pool",
        || op.log_tail(40),
        || async {
            let answered = admins.create(&dry_run, &probe).await.ok()?;
            answered
                .data
                .pointer("/spec/networks/0/addresses/0")
                .map(drop)
        },
    )
    .await;

    // The source: a halted Machine with a root disk, an interface with a MAC and an address.
    let web = machine_object(
        "web",
        json!({"template": "small", "runStrategy": "Halted",
               "networks": [{"name": "eth0", "networkName": "lab"}],
               "cloudInit": {"userData": "#cloud-config\n"}}),
    );
    let web = create(&admins, &web, op).await.expect("web");
    let web_mac = str_at(&web, "/spec/networks/0/macAddress")
        .expect("web's MAC")
        .to_owned();
    let web_address = web.data.pointer("/spec/networks/0/addresses/0").cloned();
    assert!(web_address.is_some(), "{web:?}");
    let web_vm = vm(&admin, "web", op).await;

    // amy clones it, not started, so it can be re-addressed before its first boot.
    let amy = machines(&env.client_of("amy").await, NS);
    let copy = machine_object(
        "web-2",
        json!({"cloneFrom": {"machine": "web"}, "runStrategy": "Halted"}),
    );
    let copy = create(&amy, &copy, op).await.expect("amy may clone web");
    let disk = copy
        .data
        .pointer("/spec/disks/0")
        .cloned()
        .unwrap_or_default();
    assert_eq!(disk["name"], "root", "{disk}");
    assert_eq!(disk["size"], web.data["spec"]["disks"][0]["size"], "{disk}");
    assert_eq!(
        disk["source"],
        json!({"pvc": {"name": "web-root"}}),
        "{disk}"
    );
    let copy_mac = str_at(&copy, "/spec/networks/0/macAddress").expect("a MAC");
    assert_ne!(copy_mac, web_mac, "a clone gets a MAC of its own");
    let copy_address = copy.data.pointer("/spec/networks/0/addresses/0").cloned();
    assert!(
        copy_address.is_some() && copy_address != web_address,
        "{copy:?}"
    );
    assert_eq!(str_at(&copy, "/spec/runStrategy"), Some("Halted"));
    assert_eq!(
        str_at(&copy, "/spec/cloudInit/userData"),
        Some("#cloud-config\n")
    );

    // The disk is a CDI clone of web's claim into a claim of its own, accepted by CDI's CRD.
    let dv = data_volume(&admin, "web-2-root", op).await;
    let source = dv.spec.source.as_ref().and_then(|s| s.pvc.as_ref());
    assert_eq!(
        source.map(|p| (p.namespace.as_str(), p.name.as_str())),
        Some((NS, "web-root"))
    );
    let copy_vm = vm(&admin, "web-2", op).await;
    let volumes = copy_vm.pointer("/spec/template/spec/volumes").cloned();
    let root = (volumes
        .iter()
        .flat_map(|v| v.as_array().into_iter().flatten()))
    .find(|v| v["name"] == "root")
    .cloned();
    assert_eq!(
        root,
        Some(json!({"name": "root", "dataVolume": {"name": "web-2-root"}})),
        "the clone's VM mounts its own claim, not web's: {volumes:?}"
    );
    let uuid = "/spec/template/spec/domain/firmware/uuid";
    assert_eq!(
        web_vm.pointer(uuid),
        None,
        "KubeVirt derives it from the VM's name"
    );
    assert_eq!(
        copy_vm.pointer(uuid),
        None,
        "nothing of web's firmware is copied"
    );
    let (copy_text, web_text) = (copy_vm.to_string(), web_vm.to_string());
    assert!(
        copy_text.contains(copy_mac) && !copy_text.contains(&web_mac),
        "{copy_text}"
    );
    assert!(web_text.contains(&web_mac), "{web_text}");

    // spec.cloneFrom never changes.
    let moved = json!({"spec": {"cloneFrom": {"machine": "other"}}});
    match amy
        .patch("web-2", &PatchParams::default(), &Patch::Merge(&moved))
        .await
    {
        Err(Error::Api(e)) => assert!(
            e.message
                .contains("spec.cloneFrom: Forbidden: is immutable"),
            "{}",
            e.message
        ),
        other => panic!("cloneFrom changed: {other:?}"),
    }

    // ben may not read web: refused before anything is read, naming the right.
    let bens = machines(&env.client_of("ben").await, NS);
    let (code, said) = create(
        &bens,
        &machine_object("web-3", json!({"cloneFrom": {"machine": "web"}})),
        op,
    )
    .await
    .expect_err("ben may not get web");
    assert_eq!(code, 403, "{said}");
    assert!(
        said.contains(r#"user "ben" cannot get machines.vitistack.io in namespace "team-a""#),
        "{said}"
    );
    // The same answer whether or not the source exists.
    let (code, nowhere) = create(
        &bens,
        &machine_object("web-4", json!({"cloneFrom": {"machine": "ghost"}})),
        op,
    )
    .await
    .expect_err("ben may not get ghost");
    assert_eq!(code, 403, "{nowhere}");

    // cara may read web but not clone its claim: refused, naming the claim as CDI would.
    let caras = machines(&env.client_of("cara").await, NS);
    let (code, said) = create(
        &caras,
        &machine_object("web-5", json!({"cloneFrom": {"machine": "web"}})),
        op,
    )
    .await
    .expect_err("cara may not clone web-root");
    assert_eq!(code, 403, "{said}");
    assert!(
        said.contains(r#"user "cara" cannot create datavolumes/source.cdi.kubevirt.io "web-root" in namespace "team-a""#),
        "{said}"
    );
    // A source that does not exist, to one who may read Machines: named.
    let (code, said) = create(
        &caras,
        &machine_object("web-6", json!({"cloneFrom": {"machine": "ghost"}})),
        op,
    )
    .await
    .expect_err("no ghost");
    assert_eq!(code, 422, "{said}");
    assert!(
        said.contains(r#"spec.cloneFrom.machine: Invalid value: "ghost": Machine ghost not found in namespace team-a"#),
        "{said}"
    );

    // A Machine of another cluster: refused with the reason.
    register_cluster(&admin, "dc2", None).await;
    let mut far = machine_object("far", json!({"template": "small", "runStrategy": "Halted"}));
    far.metadata.annotations =
        Some([(KUBEVIRT_CONFIG_ANNOTATION.to_owned(), "dc2".to_owned())].into());
    create(&admins, &far, op).await.expect("far");
    let (code, said) = create(
        &amy,
        &machine_object("far-2", json!({"cloneFrom": {"machine": "far"}})),
        op,
    )
    .await
    .expect_err("far is on dc2");
    assert_eq!(code, 422, "{said}");
    assert!(
        said.contains("spec.cloneFrom.machine: Forbidden: Machine far runs on the cluster of KubevirtConfig dc2"),
        "{said}"
    );
    // Nothing was made for any refused clone.
    let dvs: Api<DataVolume> = Api::namespaced(admin.clone(), NS);
    for refused in ["web-3-root", "web-5-root", "far-2-root"] {
        assert!(
            dvs.get_opt(refused).await.expect("get").is_none(),
            "{refused}"
        );
    }
    clones_e2e::snapshot::from_a_snapshot(&env, &admin, op).await;
    let _ = OP_NS;
}
