//! Issue 25, the access check's paths, end to end on a real control plane with
//! `kubevirt-operator run` (self-managed certificates, webhooks by URL): every clone is asked
//! like CDI would ask the author, same namespace included; an update that changes what the
//! guest boots or sees re-checks every reference as its author; and a review needing more access
//! checks than the limit is refused at once, the API server's own audit log counting the
//! SubjectAccessReviews sent.

mod access;
mod support;

use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};

use access::machine_object as machine;
use access::{denial, first_denial, fixture, machines, rule};
use kubevirt_operator::api::names::CLONE_SOURCES_ANNOTATION as CLONE_SOURCES;

/// The SubjectAccessReviews the API server has completed so far.
fn reviews(cp: &support::ControlPlane) -> usize {
    cp.audited_requests()
        .expect("audit log")
        .iter()
        .filter(|r| r.resource == "subjectaccessreviews" && r.verb == "create")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_is_checked_on_every_path() {
    let ns = "team-a";
    let write_machines = rule(
        "vitistack.io",
        "machines",
        &["create", "get", "update", "delete"],
    );
    let clone_golden = k8s_openapi::api::rbac::v1::PolicyRule {
        resource_names: Some(vec!["golden".into()]),
        ..rule("cdi.kubevirt.io", "datavolumes/source", &["create"])
    };
    let mut fixture = fixture(&[])
        .grant(ns, "erin", vec![write_machines.clone()])
        .grant(
            ns,
            "frank",
            vec![write_machines.clone(), clone_golden.clone()],
        )
        .grant(
            ns,
            "ursula",
            vec![rule("vitistack.io", "machines", &["get", "update"])],
        )
        // Step 4's legitimate author.
        .grant(ns, "grace", vec![write_machines, clone_golden]);
    for name in ["erin", "frank", "ursula", "grace"] {
        fixture = fixture.user(name, &[]);
    }
    let env = fixture.start().await;
    let (cp, admin, op) = (&env.cp, env.admin_client().await, env.replica());
    let erin = env.client_of("erin").await;
    let frank = env.client_of("frank").await;
    let ursula = env.client_of("ursula").await;

    // 1. A same-namespace clone: CDI would let the operator (its creator) through unasked, so
    // the author is asked, named like the PVC.
    let clone = machine(
        "cloned",
        json!({"template": "small", "disks": [{"name": "root", "source": {"pvc": {"name": "golden"}}}]}),
    );
    // Dry-run until the webhooks are in force (the operator registers them after it starts):
    // nothing is stored before then.
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    first_denial(&machines(&erin, ns), &dry_run, &clone, op).await;
    let message = denial(
        machines(&erin, ns)
            .create(&PostParams::default(), &clone)
            .await,
    );
    assert!(
        message.contains("datavolumes/source") && message.contains("\"golden\""),
        "{message}"
    );
    assert!(message.contains("spec.disks[0].source.pvc"), "{message}");
    machines(&frank, ns)
        .create(&PostParams::default(), &clone)
        .await
        .expect("frank may clone golden");

    // 1b. A DataSource in her own namespace pointing at a PVC elsewhere: asked about the PVC
    // it points to, where CDI clones from, not about the DataSource's namespace.
    access::create_namespace(&admin, "secret-images").await;
    let ds_ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("cdi.kubevirt.io", "v1beta1", "DataSource"),
        "datasources",
    );
    let ds: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataSource",
        "metadata": {"name": "sneaky"},
        "spec": {"source": {"pvc": {"name": "payroll-db", "namespace": "secret-images"}}}
    }))
    .expect("DataSource");
    kube::api::Api::<DynamicObject>::namespaced_with(admin.clone(), ns, &ds_ar)
        .create(&PostParams::default(), &ds)
        .await
        .expect("DataSource");
    let through = |ds: &str| {
        machine(
            "through",
            json!({"template": "small", "disks": [{"name": "root", "source": {"dataSource": {"name": ds}}}]}),
        )
    };
    let redirected = denial(
        machines(&frank, ns)
            .create(&PostParams::default(), &through("sneaky"))
            .await,
    );
    assert!(
        redirected.contains(
            r#"cannot create datavolumes/source.cdi.kubevirt.io "payroll-db" in namespace "secret-images""#
        ),
        "{redirected}"
    );
    // One that does not exist: what it would clone is unknown, so it is refused.
    let nowhere = denial(
        machines(&frank, ns)
            .create(&PostParams::default(), &through("missing"))
            .await,
    );
    assert!(
        nowhere.contains(r#"DataSource "missing" in namespace "team-a" does not exist"#),
        "{nowhere}"
    );

    // 1c. What a DataSource points to is pinned at admission, and the DataVolume clones that,
    // however the DataSource is edited later. The disk waits for its StorageClass, so the
    // DataSource is redirected before the DataVolume is made; a hand-written pin is replaced.
    let data_sources = kube::api::Api::<DynamicObject>::namespaced_with(admin.clone(), ns, &ds_ar);
    let mut golden_ds = ds.clone();
    golden_ds.metadata.name = Some("golden-ds".into());
    golden_ds.data["spec"] = json!({"source": {"pvc": {"name": "golden", "namespace": ns}}});
    data_sources
        .create(&PostParams::default(), &golden_ds)
        .await
        .expect("DataSource");
    let mut pinned = machine(
        "pinned",
        json!({"template": "small", "disks": [{"name": "root", "storageClass": "late",
               "source": {"dataSource": {"name": "golden-ds"}}}]}),
    );
    let forged = r#"{"root":{"pvc":{"namespace":"secret-images","name":"payroll-db"}}}"#;
    pinned.metadata.annotations = Some([(CLONE_SOURCES.to_owned(), forged.to_owned())].into());
    let stored = machines(&frank, ns)
        .create(&PostParams::default(), &pinned)
        .await
        .expect("frank may clone golden through golden-ds");
    let golden_pin = r#"{"root":{"pvc":{"namespace":"team-a","name":"golden"}}}"#;
    assert_eq!(
        stored
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CLONE_SOURCES)),
        Some(&golden_pin.to_owned()),
        "pinned to what golden-ds points to, the hand-written pin replaced"
    );
    golden_ds = data_sources.get("golden-ds").await.expect("DataSource");
    golden_ds.data["spec"] =
        json!({"source": {"pvc": {"name": "payroll-db", "namespace": "secret-images"}}});
    data_sources
        .replace("golden-ds", &PostParams::default(), &golden_ds)
        .await
        .expect("redirect golden-ds");
    let late: k8s_openapi::api::storage::v1::StorageClass = serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "late"}, "provisioner": "example.com/none"
    }))
    .expect("StorageClass");
    kube::api::Api::all(admin.clone())
        .create(&PostParams::default(), &late)
        .await
        .expect("StorageClass");
    let dv_ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("cdi.kubevirt.io", "v1beta1", "DataVolume"),
        "datavolumes",
    );
    let dvs = kube::api::Api::<DynamicObject>::namespaced_with(admin.clone(), ns, &dv_ar);
    let made = support::eventually_with(
        access::WAIT,
        "the DataVolume pinned-root",
        || op.log_tail(40),
        || async { dvs.get_opt("pinned-root").await.ok().flatten() },
    )
    .await;
    assert_eq!(
        made.data["spec"]["source"],
        json!({"pvc": {"namespace": "team-a", "name": "golden"}}),
        "the clone follows the pin, not the redirected DataSource"
    );
    assert!(
        made.data["spec"].get("sourceRef").is_none(),
        "{:#}",
        made.data
    );

    // 2. An update-only author and a Machine an admin made with a dormant secretRef (inline
    // userData wins) and a cloned disk.
    let stored = machine(
        "guarded",
        json!({"template": "small",
               "cloudInit": {"userData": "#cloud-config", "secretRef": {"name": "db-password"}}}),
    );
    machines(&admin, ns)
        .create(&PostParams::default(), &stored)
        .await
        .expect("admin's Machine");
    let api = machines(&ursula, ns);
    let edit = async |change: &dyn Fn(&mut Value)| {
        for _ in 0..20 {
            let mut m = api.get("guarded").await.expect("get");
            change(&mut m.data);
            match api.replace("guarded", &PostParams::default(), &m).await {
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                other => return other,
            }
        }
        panic!("still conflicting after 20 tries");
    };
    // Removing inline userData would activate the Secret she may not read.
    let activate = denial(
        edit(&|m: &mut Value| {
            m["spec"]["cloudInit"] = json!({"secretRef": {"name": "db-password"}});
        })
        .await,
    );
    assert!(activate.contains("cannot get secrets"), "{activate}");
    // A CD-ROM of her own, booted first, beside the Secret.
    let cdrom = denial(
        edit(&|m: &mut Value| {
            m["spec"]["cdroms"] =
                json!([{"name": "mine", "source": {"http": {"url": "https://example.com/mine.iso"}}}]);
            m["spec"]["bootOrder"] = json!(["cdrom", "disk"]);
        })
        .await,
    );
    assert!(cdrom.contains("cannot get secrets"), "{cdrom}");
    // CPU only: nothing the guest boots or sees, nothing asked.
    edit(&|m: &mut Value| m["spec"]["resources"] = json!({"cpu": {"cores": 2}}))
        .await
        .expect("a CPU change is hers to make");

    // 3. More distinct checks than the limit: refused at once, no review sent.
    let disks: Vec<Value> = (0..40)
        .map(|i| {
            json!({"name": format!("d{i}"), "size": "1Gi", "source": {"http": {
                "url": "https://example.com/d.qcow2", "secretRef": {"name": format!("creds-{i}")}}}})
        })
        .collect();
    let before = reviews(cp);
    let many = denial(
        machines(&erin, ns)
            .create(
                &PostParams::default(),
                &machine("many", json!({"template": "small", "disks": disks})),
            )
            .await,
    );
    assert!(
        many.contains("it needs 40 distinct access checks")
            && many.contains("at most 16 are made for one request"),
        "{many}"
    );
    // The audit log is written as requests complete; give it a moment.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let sent = reviews(cp) - before;
    assert!(
        sent <= 16,
        "{sent} SubjectAccessReviews for one refused review"
    );
    assert_eq!(sent, 0, "refused before asking");

    // 4. A stream of hostile reviews straight to the webhook (any pod can send them, naming any
    // user): refused at once when over the limit, and at the limit under ever-new names, so
    // neither the cache nor one user's share helps them. A legitimate checked write succeeds.
    let grace = env.client_of("grace").await;
    let stream = access::stream::Stream::start(&admin, ns).await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let legit = machine(
        "during-stream",
        json!({"template": "small", "disks": [{"name": "root", "source": {"pvc": {"name": "golden"}}}]}),
    );
    let written = machines(&grace, ns)
        .create(&PostParams::default(), &legit)
        .await;
    let answered = stream.stop().await;
    written.expect("a legitimate checked write during the stream");
    answered.assert_streamed();
}
