//! The finalizer, the update rules, warnings and admission.k8s.io/v1beta1.

use crate::support::Fixture;
#[allow(unused_imports)]
use crate::*;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cleanup_finalizer_is_added_on_create_and_never_put_back() {
    let env = env("adm-finalizer", &["v1", "v1beta1"]).await;
    let ours = kubevirt_operator::machine::FINALIZER;
    let pp = PostParams::default();
    let with_finalizers = |name: &str, list: Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
            "metadata": {"name": name, "finalizers": list}, "spec": {}
        }))
        .expect("machine")
    };
    let finalizers = |o: &DynamicObject| o.metadata.finalizers.clone().unwrap_or_default();

    // CREATE: added when absent, appended after others, never duplicated.
    let plain = env
        .machines
        .create(&pp, &machine("plain", json!({})))
        .await
        .expect("created");
    assert_eq!(finalizers(&plain), [ours]);
    let other = env
        .machines
        .create(&pp, &with_finalizers("other", json!(["example.com/keep"])))
        .await
        .expect("created");
    assert_eq!(finalizers(&other), ["example.com/keep", ours]);
    let again = env
        .machines
        .create(&pp, &with_finalizers("again", json!([ours])))
        .await
        .expect("created");
    assert_eq!(finalizers(&again), [ours]);

    // UPDATE: a user removing it, alone or with a spec change, keeps it removed.
    let merge = |v: Value| Patch::Merge(v);
    let released = env
        .machines
        .patch(
            "plain",
            &PatchParams::default(),
            &merge(json!({"metadata": {"finalizers": null}, "spec": {"running": false}})),
        )
        .await
        .expect("finalizer removed");
    assert_eq!(finalizers(&released), Vec::<String>::new());
    assert_eq!(released.data["spec"]["running"], json!(false));

    // Deletion: the reconciler's removal of its finalizer from a terminating Machine sticks,
    // and the Machine goes once the last finalizer does.
    env.machines
        .delete("other", &Default::default())
        .await
        .expect("delete");
    let terminating = env
        .machines
        .patch(
            "other",
            &PatchParams::default(),
            &merge(json!({"metadata": {"finalizers": ["example.com/keep"]}})),
        )
        .await
        .expect("our finalizer removed");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(finalizers(&terminating), ["example.com/keep"]);
    env.machines
        .patch(
            "other",
            &PatchParams::default(),
            &merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("last finalizer removed");
    assert!(
        env.machines.get_opt("other").await.expect("get").is_none(),
        "the Machine is gone once its finalizers are"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_rules_hold() {
    let env = env("adm-update", &["v1", "v1beta1"]).await;
    let pp = PatchParams::default();
    env.machines
        .create(
            &PostParams::default(),
            &machine(
                "vm",
                json!({"template": "medium", "disks": [{"name": "data", "size": "10Gi"}]}),
            ),
        )
        .await
        .expect("created");
    let merge = |v: Value| Patch::Merge(v);

    // Grow: allowed. Shrink: refused with the reason.
    let grown = env.machines.patch("vm", &pp, &merge(json!({"spec": {"disks": [{"name": "root", "size": "40Gi"}, {"name": "data", "size": "20Gi"}]}}))).await.expect("grow");
    assert_eq!(grown.data["spec"]["disks"][1]["size"], json!("20Gi"));
    let e = denial(env.machines.patch("vm", &pp, &merge(json!({"spec": {"disks": [{"name": "root", "size": "40Gi"}, {"name": "data", "size": "5Gi"}]}}))).await);
    assert!(
        e.message.contains(
            r#"spec.disks[1].size: Forbidden: disk "data" may not shrink from 20Gi to 5Gi"#
        ),
        "{}",
        e.message
    );

    // Removing a disk is refused, saying why.
    let e = denial(
        env.machines
            .patch(
                "vm",
                &pp,
                &merge(json!({"spec": {"disks": [{"name": "root", "size": "40Gi"}]}})),
            )
            .await,
    );
    assert!(
        e.message
            .contains(r#"spec.disks: Forbidden: disk "data" may not be removed"#),
        "{}",
        e.message
    );

    // Immutable storage class.
    let e = denial(env.machines.patch("vm", &pp, &merge(json!({"spec": {"disks": [{"name": "root", "size": "40Gi"}, {"name": "data", "size": "20Gi", "storageClass": "other"}]}}))).await);
    assert!(
        e.message
            .contains(r#"spec.disks[1].storageClass: Invalid value: "other": field is immutable"#),
        "{}",
        e.message
    );

    // A template change re-derives the template's values and keeps explicit ones.
    let larger = env
        .machines
        .patch(
            "vm",
            &pp,
            &merge(
                json!({"spec": {"template": "large", "resources": {"memory": {"size": "16Gi"}}}}),
            ),
        )
        .await
        .expect("template change");
    assert_eq!(
        larger.data["spec"]["resources"],
        json!({"cpu": {"cores": 4, "threads": 1, "sockets": 1}, "memory": {"size": "16Gi"}})
    );
    assert_eq!(larger.data["spec"]["disks"][0]["size"], json!("80Gi"));
    assert_eq!(larger.data["spec"]["disks"][1]["size"], json!("20Gi"));
    // Back to small would shrink the root disk.
    let e = denial(
        env.machines
            .patch("vm", &pp, &merge(json!({"spec": {"template": "small"}})))
            .await,
    );
    assert!(
        e.message
            .contains(r#"disk "root" may not shrink from 80Gi to 20Gi"#),
        "{}",
        e.message
    );

    // CPU, networks and running may change.
    let changed = env
        .machines
        .patch(
            "vm",
            &pp,
            &merge(
                json!({"spec": {"running": false, "resources": {"cpu": {"cores": 8}},
        "networks": [{"name": "eth0", "networkName": "prod"}]}}),
            ),
        )
        .await
        .expect("allowed changes");
    assert_eq!(changed.data["spec"]["running"], json!(false));
    assert_eq!(
        changed.data["spec"]["networks"][0]["model"],
        json!("virtio")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warnings_reach_the_client_and_v1beta1_is_answered() {
    // Only v1beta1 offered: the API server must send, and accept, admission.k8s.io/v1beta1.
    let env = env("adm-v1beta1", &["v1beta1"]).await;
    let stored = env
        .machines
        .create(
            &PostParams::default(),
            &machine(
                "b",
                json!({"template": "small", "bootOrder": ["cdrom", "disk"]}),
            ),
        )
        .await
        .expect("created over v1beta1");
    assert_eq!(stored.data["spec"]["resources"]["cpu"]["cores"], json!(1));
    let cp = Fixture::new().with_machine_crds().shared().await;
    let out = tokio::process::Command::from(cp.kubectl().expect("kubectl"))
        .args([
            "patch",
            "machine",
            "b",
            "-n",
            &env.ns,
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"bootOrder":["cdrom"]}}"#,
        ])
        .output()
        .await
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"Warning: spec.bootOrder[0]: "cdrom" is accepted but ignored"#),
        "{stderr}"
    );
    drop(env.client);
}
