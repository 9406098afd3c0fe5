//! MachineClasses end to end, on a dedicated control plane (the operator registers its webhooks
//! for the whole cluster): `kubevirt-operator run` with self-managed certificates, two replicas.
//! Built-ins work with no MachineClass at all; a new class is in force on every replica within
//! seconds, with no restart; unknown classes are refused listing the classes, overrides beyond a
//! class's limits naming the limit, a disabled class for new Machines only, a second default;
//! and editing or deleting a class leaves existing Machines and their VMs and claims as they are.

mod access;
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, Error, ResourceExt};
use serde_json::{Value, json};

use access::{WAIT, create_namespace, first_denial, machines, start_replica};
use kubevirt_operator::admission::MUTATE_PATH;
use kubevirt_operator::api::MachineClass;
use kubevirt_operator::api::names::CLASS_ANNOTATION;
use kubevirt_operator::certs::{BUNDLE_CONFIGMAP, BUNDLE_KEY};
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use support::{ControlPlane, Proc, eventually};

const OP_NS: &str = "access-operator";
const NS: &str = "team-a";
/// The operators' resync (`access::start_replica` passes `--reconcile-interval 2s`).
const RESYNC: Duration = Duration::from_secs(2);

async fn control_plane() -> (ControlPlane, Client) {
    support::init_crypto();
    let cp = ControlPlane::start().await.expect("control plane");
    let mut crds = support::crd_fixtures().expect("fixture CRDs");
    crds.push(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/crds.yaml"));
    cp.install_crds(&crds).await.expect("CRDs");
    let admin = cp.client().await.expect("admin client");
    create_namespace(&admin, OP_NS).await;
    create_namespace(&admin, NS).await;
    (cp, admin)
}

fn classes(client: &Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &ApiResource::erase::<MachineClass>(&()))
}

fn class(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineClass",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("class")
}

fn machine(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("machine")
}

fn xlarge(cores: i64, memory: &str, root: &str) -> Value {
    json!({"displayName": "Extra large", "cpu": {"cores": cores}, "memory": {"size": memory},
           "disks": [{"name": "root", "size": root}],
           "limits": {"cpu": {"maxCores": 16}, "memory": {"max": "128Gi"}}})
}

/// The API server's refusal of `result`, by a webhook.
fn refusal<T: std::fmt::Debug>(result: Result<T, Error>) -> String {
    match result {
        Err(Error::Api(e)) if e.message.contains("admission webhook") => e.message,
        other => panic!("expected a webhook's refusal, got {other:?}"),
    }
}

/// Creates `obj`, retrying while `retry` holds for the refusal (the watch not there yet).
async fn create_when(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
    retry: impl Fn(&str) -> bool,
) -> DynamicObject {
    let deadline = Instant::now() + WAIT;
    loop {
        match api.create(&PostParams::default(), obj).await {
            Ok(o) => return o,
            Err(Error::Api(e)) if retry(&e.message) && Instant::now() < deadline => {}
            Err(e) => panic!("creating {}: {e}", obj.name_any()),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn cores(m: &DynamicObject) -> Option<i64> {
    m.data["spec"]["resources"]["cpu"]["cores"].as_i64()
}

/// A client that trusts the operator's published CA bundle, to ask each replica directly.
async fn replica_client(admin: &Client) -> reqwest::Client {
    let bundle = eventually(WAIT, "the CA bundle", || async {
        let cm = Api::<ConfigMap>::namespaced(admin.clone(), OP_NS)
            .get_opt(BUNDLE_CONFIGMAP)
            .await
            .ok()??;
        cm.data?.get(BUNDLE_KEY).cloned()
    })
    .await;
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .https_only(true)
        .no_proxy();
    for cert in reqwest::Certificate::from_pem_bundle(bundle.as_bytes()).expect("bundle") {
        builder = builder.add_root_certificate(cert);
    }
    builder.build().expect("client")
}

/// The mutating webhook of the replica on `port`, asked about a new Machine of `template`: the
/// cores it gets, or why not.
async fn cores_on(client: &reqwest::Client, port: u16, template: &str) -> Result<i64, String> {
    let kind = json!({"group": "vitistack.io", "version": "v1alpha1", "kind": "Machine"});
    let object = json!({"apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
                        "metadata": {"name": "probe", "namespace": NS},
                        "spec": {"template": template}});
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "probe", "kind": kind, "name": "probe", "namespace": NS,
                    "operation": "CREATE", "userInfo": {"username": "admin"}, "object": object}});
    let url = format!("https://127.0.0.1:{port}{MUTATE_PATH}");
    let answer: Value = (client.post(url).json(&review).send().await)
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())?;
    let response = &answer["response"];
    if response["allowed"] != true {
        return Err(response["status"]["message"].to_string());
    }
    use base64::Engine;
    let patch = base64::engine::general_purpose::STANDARD
        .decode(response["patch"].as_str().unwrap_or_default())
        .map_err(|e| e.to_string())?;
    let ops: Value = serde_json::from_slice(&patch).map_err(|e| e.to_string())?;
    ops[0]["value"]["resources"]["cpu"]["cores"]
        .as_i64()
        .ok_or_else(|| format!("no cores in {ops}"))
}

/// A name no earlier attempt used.
fn fresh_name(prefix: &str) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("{prefix}-{}", N.fetch_add(1, Ordering::Relaxed))
}

fn stop(procs: Vec<Proc>) {
    for mut p in procs {
        p.kill();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classes_are_in_force_on_every_replica_and_bound_new_machines() {
    let (cp, admin) = control_plane().await;
    let (a, port_a) = start_replica(&cp, OP_NS, "replica-a", &[]);
    let (b, port_b) = start_replica(&cp, OP_NS, "replica-b", &[]);
    let api = machines(&admin, NS);

    // No MachineClass at all: the built-ins, and a refusal listing them.
    let denied = first_denial(
        &api,
        &PostParams::default(),
        &machine("huge", json!({"template": "huge"})),
        &a,
    )
    .await;
    assert!(
        denied.contains(r#"spec.template: Unsupported value: "huge": supported values: "large", "medium", "small""#),
        "{denied}"
    );
    let small = api
        .create(
            &PostParams::default(),
            &machine("small", json!({"template": "small"})),
        )
        .await
        .expect("small");
    let plain = api
        .create(&PostParams::default(), &machine("plain", json!({})))
        .await
        .expect("no template");
    assert_eq!((cores(&small), cores(&plain)), (Some(1), Some(2)));
    assert_eq!(plain.data["spec"]["template"], "medium");

    // A new class, through the MachineClass webhook: in force on both replicas within seconds.
    let client = replica_client(&admin).await;
    for port in [port_a, port_b] {
        eventually(WAIT, "the replica's webhook", || async {
            cores_on(&client, port, "small").await.ok()
        })
        .await;
    }
    let created = Instant::now();
    classes(&admin)
        .create(
            &PostParams::default(),
            &class("xlarge", xlarge(4, "48Gi", "100Gi")),
        )
        .await
        .expect("class");
    for port in [port_a, port_b] {
        eventually(
            Duration::from_secs(5),
            "xlarge on every replica",
            || async { (cores_on(&client, port, "xlarge").await == Ok(4)).then_some(()) },
        )
        .await;
    }
    let took = created.elapsed();
    assert!(took < Duration::from_secs(5), "{took:?}");

    let unknown = |m: &str| m.contains(r#"Unsupported value: "xlarge""#);
    let db = create_when(&api, &machine("db", json!({"template": "xlarge"})), unknown).await;
    assert_eq!(cores(&db), Some(4));
    assert!(db.annotations()[CLASS_ANNOTATION].contains(r#""name":"xlarge""#));
    let denied = refusal(
        api.create(
            &PostParams::default(),
            &machine("huge2", json!({"template": "huge"})),
        )
        .await,
    );
    assert!(
        denied.contains(r#"supported values: "large", "medium", "small", "xlarge""#),
        "{denied}"
    );

    // Overrides beyond the limits, each refusal naming the limit and the class.
    let over = machine(
        "big",
        json!({"template": "xlarge", "resources": {"cpu": {"cores": 32}, "memory": {"size": "256Gi"}}}),
    );
    let denied = refusal(api.create(&PostParams::default(), &over).await);
    for part in [
        r#"spec.resources.cpu.cores: Invalid value: 32: must be at most 16: limits.cpu.maxCores of MachineClass "xlarge""#,
        r#"spec.resources.memory.size: Invalid value: "256Gi": must be at most 128Gi: limits.memory.max of MachineClass "xlarge""#,
    ] {
        assert!(denied.contains(part), "{part}\n{denied}");
    }
    // A class that contradicts itself is refused by its own webhook.
    let mut bad = xlarge(32, "48Gi", "100Gi");
    bad["limits"]["cpu"]["maxCores"] = json!(16);
    let denied = refusal(
        classes(&admin)
            .create(&PostParams::default(), &class("bad", bad))
            .await,
    );
    assert!(denied.contains("spec.limits.cpu.maxCores: Invalid value: 16: must be at least the class's own spec.cpu.cores (32)"), "{denied}");

    // Disabled: new Machines are refused; the one that has it is updated and deleted.
    let merge = |v: Value| Patch::Merge(v);
    classes(&admin)
        .patch(
            "xlarge",
            &PatchParams::default(),
            &merge(json!({"spec": {"enabled": false}})),
        )
        .await
        .expect("disable");
    let deadline = Instant::now() + WAIT;
    let denied = loop {
        let late = machine(&fresh_name("late"), json!({"template": "xlarge"}));
        match api.create(&PostParams::default(), &late).await {
            Err(Error::Api(e)) if e.message.contains("is disabled") => break e.message,
            other => assert!(Instant::now() < deadline, "{other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        denied.contains(r#"MachineClass "xlarge" is disabled, new Machines may not use it"#),
        "{denied}"
    );
    let updated = api
        .patch(
            "db",
            &PatchParams::default(),
            &merge(json!({"spec": {"running": false}})),
        )
        .await
        .expect("the Machine that has the class may change");
    assert_eq!(
        (cores(&updated), updated.data["spec"]["running"].as_bool()),
        (Some(4), Some(false))
    );
    api.delete("db", &DeleteParams::default())
        .await
        .expect("and be deleted");
    eventually(WAIT, "db gone", || async {
        api.get_opt("db").await.ok()?.is_none().then_some(())
    })
    .await;

    // One default: the first is in force (a Machine naming none gets it), a second is refused.
    classes(&admin)
        .create(
            &PostParams::default(),
            &class(
                "alpha",
                json!({"default": true, "cpu": {"cores": 3}, "memory": {"size": "6Gi"}}),
            ),
        )
        .await
        .expect("a default class");
    let defaulted = eventually(WAIT, "alpha as the default", || async {
        let m = api
            .create(
                &PostParams::default(),
                &machine(&fresh_name("d"), json!({})),
            )
            .await
            .ok()?;
        (m.data["spec"]["template"] == "alpha").then_some(m)
    })
    .await;
    assert_eq!(cores(&defaulted), Some(3));
    let denied = refusal(
        classes(&admin)
            .create(
                &PostParams::default(),
                &class(
                    "beta",
                    json!({"default": true, "cpu": {"cores": 1}, "memory": {"size": "1Gi"}}),
                ),
            )
            .await,
    );
    assert!(denied.contains("spec.default: Forbidden: at most one MachineClass may be the default, and alpha already is"), "{denied}");
    stop(vec![a, b]);
}

/// resourceVersions of the VM and claims of `machine`.
async fn made_for(admin: &Client, machine: &str) -> Vec<(String, String)> {
    let vm = Api::<VirtualMachine>::namespaced(admin.clone(), NS)
        .get(machine)
        .await
        .expect("VM");
    let pvc = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), NS)
        .get(&format!("{machine}-root"))
        .await
        .expect("root claim");
    vec![
        (vm.name_any(), vm.resource_version().unwrap_or_default()),
        (pvc.name_any(), pvc.resource_version().unwrap_or_default()),
    ]
}

/// After a metadata change (the reconciler looks again) and a few resyncs: no write to the VM or
/// the claim, and no complaint about the class in the Machine's status.
async fn still_as_made(
    api: &Api<DynamicObject>,
    admin: &Client,
    before: &[(String, String)],
    what: &str,
) {
    let touch = json!({"metadata": {"labels": {"touched": what}}});
    api.patch("db", &PatchParams::default(), &Patch::Merge(touch))
        .await
        .expect("label");
    tokio::time::sleep(RESYNC * 3).await;
    assert_eq!(
        made_for(admin, "db").await,
        before,
        "class {what}: db's VM or claim was written"
    );
    let db = api.get("db").await.expect("db");
    let status = &db.data["status"];
    assert_ne!(status["phase"], "Failed", "class {what}: {status}");
    let reasons: Vec<&str> = (status["conditions"].as_array().into_iter().flatten())
        .filter_map(|c| c["reason"].as_str())
        .collect();
    assert!(
        !reasons.contains(&"TemplateNotFound") && !reasons.contains(&"InvalidSpec"),
        "class {what}: {status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_or_deleting_a_class_leaves_machines_their_vms_and_claims_as_they_are() {
    let (cp, admin) = control_plane().await;
    let (op, _) = start_replica(&cp, OP_NS, "leader", &[]);
    let api = machines(&admin, NS);
    first_denial(
        &api,
        &PostParams::default(),
        &machine("huge", json!({"template": "huge"})),
        &op,
    )
    .await;
    classes(&admin)
        .create(
            &PostParams::default(),
            &class("xlarge", xlarge(4, "48Gi", "100Gi")),
        )
        .await
        .expect("class");
    let unknown = |m: &str| m.contains(r#"Unsupported value: "xlarge""#);
    create_when(&api, &machine("db", json!({"template": "xlarge"})), unknown).await;
    let vms = Api::<VirtualMachine>::namespaced(admin.clone(), NS);
    let vm = eventually(WAIT, "db's VM", || async { vms.get_opt("db").await.ok()? }).await;
    let domain = vm.spec.template.spec.domain.clone();
    assert_eq!(domain.cpu.as_ref().and_then(|c| c.cores), Some(4));
    assert_eq!(
        domain.memory.as_ref().and_then(|m| m.guest.as_deref()),
        Some("48Gi")
    );
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), NS);
    let root = eventually(WAIT, "db's root claim", || async {
        pvcs.get_opt("db-root").await.ok()?
    })
    .await;
    let size = |c: &PersistentVolumeClaim| {
        c.spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .map(|r| r["storage"].0.clone())
    };
    assert_eq!(size(&root).as_deref(), Some("100Gi"));
    // Let the first reconciles' writes settle.
    tokio::time::sleep(RESYNC * 2).await;
    let stored = api.get("db").await.expect("db");
    let before = made_for(&admin, "db").await;

    // Edited: a new Machine gets the new values; db keeps its own, even when an update drops
    // every value the class filled in.
    classes(&admin)
        .patch(
            "xlarge",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": xlarge(8, "64Gi", "200Gi")})),
        )
        .await
        .expect("edit");
    let fresh = eventually(WAIT, "the edited class in force", || async {
        let m = machine(&fresh_name("fresh"), json!({"template": "xlarge"}));
        let m = api.create(&PostParams::default(), &m).await.ok()?;
        (cores(&m) == Some(8)).then_some(m)
    })
    .await;
    assert_eq!(fresh.data["spec"]["disks"][0]["size"], "200Gi");
    let patched = api
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resources": null}})),
        )
        .await
        .expect("update of db");
    assert_eq!(patched.data["spec"], stored.data["spec"]);
    still_as_made(&api, &admin, &before, "edited").await;

    // Deleted: the same, and db's disks dropped come back as recorded.
    classes(&admin)
        .delete("xlarge", &DeleteParams::default())
        .await
        .expect("delete class");
    eventually(WAIT, "the class gone from the webhooks", || async {
        let m = machine(&fresh_name("later"), json!({"template": "xlarge"}));
        match api.create(&PostParams::default(), &m).await {
            Err(Error::Api(e)) if unknown(&e.message) => Some(()),
            _ => None,
        }
    })
    .await;
    let patched = api
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"disks": null, "resources": null}})),
        )
        .await
        .expect("update of db");
    assert_eq!(patched.data["spec"], stored.data["spec"]);
    still_as_made(&api, &admin, &before, "deleted").await;
    assert_eq!(
        api.get("db").await.expect("db").data["spec"],
        stored.data["spec"]
    );

    // And it can still be deleted: the finalizer's cleanup works from the recorded class.
    api.delete("db", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(WAIT, "db gone", || async {
        api.get_opt("db").await.ok()?.is_none().then_some(())
    })
    .await;
    stop(vec![op]);
}
