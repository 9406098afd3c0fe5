//! Issue 18, end to end on a real control plane with `kubevirt-operator run` (self-managed
//! certificates, webhooks by URL): a claim left by a `retain-disks` deletion is adopted only by
//! an author who may `update` and `delete` it, asked as that author; and `retain-disks` itself
//! takes `"true"` or `"false"` only.

mod access;
mod support;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::Error;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use access::{denial, first_denial, fixture, machines, rule};

const RETAIN_DISKS: &str = "vitistack.io/retain-disks";

fn machine(name: &str, disks: Value, annotations: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"template": "small", "disks": disks}
    }))
    .expect("machine")
}

fn with_data(name: &str) -> DynamicObject {
    machine(name, json!([{"name": "data", "size": "1Gi"}]), json!({}))
}

/// A claim the admin made, standing for one a `retain-disks` deletion left behind.
async fn retained_claim(admin: &kube::Client, ns: &str, name: &str) {
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("claim");
    Api::<PersistentVolumeClaim>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &claim)
        .await
        .expect("claim created");
}

/// GET, `change`, PUT, again while the reconciler's status writes make the PUT a conflict.
async fn edit(
    api: &Api<DynamicObject>,
    name: &str,
    change: impl Fn(&mut Value),
) -> Result<DynamicObject, Error> {
    for _ in 0..20 {
        let mut object = api.get(name).await?;
        change(&mut object.data);
        match api.replace(name, &PostParams::default(), &object).await {
            Err(Error::Api(e)) if e.code == 409 => continue,
            other => return other,
        }
    }
    panic!("{name}: still conflicting after 20 tries")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopting_a_retained_claim_needs_update_and_delete_on_it() {
    let ns = "team-a";
    // Machines only: create, get, update, delete (no patch: edits below are GET + PUT).
    let write_machines = rule(
        "vitistack.io",
        "machines",
        &["create", "get", "update", "delete"],
    );
    let db_data = PolicyRule {
        resource_names: Some(vec!["db-data".into()]),
        ..rule("", "persistentvolumeclaims", &["update", "delete"])
    };
    let env = fixture(&[])
        .user("erin", &[])
        .user("frank", &[])
        .grant(ns, "erin", vec![write_machines.clone()])
        .grant(ns, "frank", vec![write_machines, db_data])
        .start()
        .await;
    let (admin, op) = (env.admin_client().await, env.replica());
    retained_claim(&admin, ns, "db-data").await;
    let (erin, frank) = (env.client_of("erin").await, env.client_of("frank").await);
    let (as_erin, as_frank) = (machines(&erin, ns), machines(&frank, ns));
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };

    // `small` puts its root disk first, so `data` is spec.disks[1].
    let adopts = |user: &str, verb: &str, claim: &str| {
        format!(
            r#"spec.disks[1]: Forbidden: user "{user}" cannot {verb} persistentvolumeclaims "{claim}" in namespace "{ns}", which exists and would be adopted by this disk"#
        )
    };
    // Dry-run is checked like a real write; it also waits for the webhooks to be in force.
    let message = first_denial(&as_erin, &dry, &with_data("db"), op).await;
    assert!(
        message.contains(&adopts("erin", "update", "db-data")),
        "{message}"
    );
    let message = denial(
        as_erin
            .create(&PostParams::default(), &with_data("db"))
            .await,
    );
    for verb in ["update", "delete"] {
        assert!(
            message.contains(&adopts("erin", verb, "db-data")),
            "{message}"
        );
    }

    // No claim of those names: nothing is asked, no claim rights needed.
    as_erin
        .create(&PostParams::default(), &with_data("web"))
        .await
        .expect("erin's Machine whose claims do not exist");

    // frank may update and delete that one claim: he adopts it.
    as_frank
        .create(&PostParams::default(), &with_data("db"))
        .await
        .expect("frank may adopt db-data");

    // UPDATE: only disks new in the update are looked up; kept ones are not asked again
    // (web's own claims may exist by now).
    retained_claim(&admin, ns, "web-logs").await;
    edit(&as_erin, "web", |web| {
        web["spec"]["resources"]["cpu"]["cores"] = json!(2);
    })
    .await
    .expect("an edit keeping the disks");
    let logs = json!({"name": "logs", "size": "1Gi"});
    let message = denial(
        edit(&as_erin, "web", |web| {
            if let Some(disks) = web["spec"]["disks"].as_array_mut() {
                disks.push(logs.clone());
            }
        })
        .await,
    );
    assert!(
        message.contains(
            &adopts("erin", "update", "web-logs").replace("spec.disks[1]", "spec.disks[2]")
        ),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retain_disks_takes_true_or_false_only() {
    let env = fixture(&[]).start().await;
    let (admin, op) = (env.admin_client().await, env.replica());
    let ns = "team-a";
    let api = machines(&admin, ns);
    let pp = PostParams::default();
    let refused = |value: &str| {
        format!(
            r#"metadata.annotations[vitistack.io/retain-disks]: Unsupported value: "{value}": supported values: "false", "true""#
        )
    };
    let keeper = |value: &str| machine("keeper", json!([]), json!({RETAIN_DISKS: value}));
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let message = first_denial(&api, &dry, &keeper("True"), op).await;
    assert!(message.contains(&refused("True")), "{message}");
    match api.create(&pp, &keeper("True")).await {
        Err(Error::Api(e)) => {
            assert_eq!(e.code, 422, "{e:?}");
            assert!(e.message.contains(&refused("True")), "{}", e.message);
        }
        other => panic!("retain-disks \"True\" admitted: {other:?}"),
    }
    api.create(&pp, &keeper("true"))
        .await
        .expect("retain-disks true");
    // Set on an update that leaves the spec alone: refused too.
    let yes = json!({"metadata": {"annotations": {RETAIN_DISKS: "yes"}}});
    match api
        .patch("keeper", &PatchParams::default(), &Patch::Merge(&yes))
        .await
    {
        Err(Error::Api(e)) => {
            assert_eq!(e.code, 422, "{e:?}");
            assert!(e.message.contains(&refused("yes")), "{}", e.message);
        }
        other => panic!("retain-disks \"yes\" admitted: {other:?}"),
    }
    let no = json!({"metadata": {"annotations": {RETAIN_DISKS: "false"}}});
    api.patch("keeper", &PatchParams::default(), &Patch::Merge(&no))
        .await
        .expect("retain-disks false");
}
