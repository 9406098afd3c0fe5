//! The credentials a remote Machine's disk source names (`http.secretRef`, `certConfigMap`)
//! are copied to its cluster by the operator, under names of its own, with the proof; the
//! DataVolume there names the copies; a copy follows its source, goes with its DataVolume (a
//! removed CD-ROM) or with the Machine, and an
//! object of that name the operator did not make is never overwritten (`SecretConflict`, no
//! DataVolume made to read it).

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kubevirt_operator::api::Machine;
use kubevirt_operator::api::names::PROOF_ANNOTATION;
use kubevirt_operator::reconciler::apis::cdi::DataVolume;
use serde_json::json;

use crate::access::{create_admitted, machines, rule};
use crate::{NS, USER, on_dc1, start, status_when, until, vm, world};

fn importing(name: &str) -> kube::api::DynamicObject {
    on_dc1(
        name,
        json!({"template": "small", "disks": [{"name": "root", "size": "1Gi", "source": {"http": {
            "url": "https://images.example/a.qcow2",
            "secretRef": {"name": "creds"}, "certConfigMap": "ca"}}}],
            "cdroms": [{"name": "iso", "source": {"http": {
                "url": "https://images.example/tools.iso", "certConfigMap": "ca"}}}]}),
    )
}

fn key_of(s: &Secret) -> Option<Vec<u8>> {
    Some(s.data.as_ref()?.get("accessKeyId")?.0.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_machines_credentials_are_copied_with_a_proof_and_go_with_it() {
    let w = world().await;
    // The credentials in team-a on the management cluster, and alice's right to name them.
    let secret: Secret = serde_json::from_value(json!({"metadata": {"name": "creds"},
        "stringData": {"accessKeyId": "AKIA-1", "secretKey": "s3cr3t"}}))
    .expect("secret");
    let secrets = Api::<Secret>::namespaced(w.admin.clone(), NS);
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("creds");
    let ca: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "ca"},
        "data": {"ca.pem": "-----BEGIN CERTIFICATE-----"}}))
    .expect("configmap");
    Api::<ConfigMap>::namespaced(w.admin.clone(), NS)
        .create(&PostParams::default(), &ca)
        .await
        .expect("ca");
    let reads = vec![
        rule("", "secrets", &["get"]),
        rule("", "configmaps", &["get"]),
    ];
    crate::support::rbac::grant_role(&w.admin, NS, "alice-reads-credentials", USER, reads).await;
    let op = start(&w.mgmt, &[]).await;
    create_admitted(&machines(&w.alice, NS), &importing("one"), &op).await;

    // The DataVolume on dc1 names the copies, not the user's objects.
    let far_dvs = Api::<DataVolume>::namespaced(w.far_admin.clone(), NS);
    let dv = until(&op, "one-root's DataVolume on dc1", || async {
        far_dvs.get_opt("one-root").await.ok().flatten()
    })
    .await;
    let http = serde_json::to_value(&dv.spec.source).expect("json")["http"].clone();
    assert_eq!(http["secretRef"], json!("one-root-credentials"), "{http}");
    assert_eq!(http["certConfigMap"], json!("one-root-ca"), "{http}");
    // The copies: the sources' data, proven for one.
    let far_secrets = Api::<Secret>::namespaced(w.far_admin.clone(), NS);
    let far_cms = Api::<ConfigMap>::namespaced(w.far_admin.clone(), NS);
    let copy = far_secrets.get("one-root-credentials").await.expect("copy");
    assert_eq!(key_of(&copy), Some(b"AKIA-1".to_vec()));
    assert!(
        copy.annotations().contains_key(PROOF_ANNOTATION),
        "{copy:?}"
    );
    assert!(copy.owner_references().is_empty());
    let ca_copy = far_cms.get("one-root-ca").await.expect("ca copy");
    assert_eq!(
        ca_copy
            .data
            .as_ref()
            .and_then(|d| d.get("ca.pem"))
            .map(String::as_str),
        Some("-----BEGIN CERTIFICATE-----")
    );
    assert!(ca_copy.annotations().contains_key(PROOF_ANNOTATION));

    // The source rotated: the copy follows.
    let rotated = json!({"data": {"accessKeyId": ByteString(b"AKIA-2".to_vec())}});
    secrets
        .patch("creds", &PatchParams::default(), &Patch::Merge(rotated))
        .await
        .expect("rotate");
    until(&op, "the copy rotated", || async {
        let s = far_secrets.get_opt("one-root-credentials").await.ok()??;
        (key_of(&s) == Some(b"AKIA-2".to_vec())).then_some(())
    })
    .await;

    // The CD-ROM removed: its copy goes with its DataVolume; the disk's stay.
    until(&op, "one-iso's copy on dc1", || async {
        far_cms.get_opt("one-iso-ca").await.ok().flatten()
    })
    .await;
    let machines_api: Api<Machine> = Api::namespaced(w.alice.clone(), NS);
    let no_cdrom = json!({"spec": {"cdroms": null}});
    machines_api
        .patch("one", &PatchParams::default(), &Patch::Merge(no_cdrom))
        .await
        .expect("remove the CD-ROM");
    until(&op, "one-iso's DataVolume and copy gone", || async {
        let gone = far_dvs.get_opt("one-iso").await.ok()?.is_none()
            && far_cms.get_opt("one-iso-ca").await.ok()?.is_none();
        gone.then_some(())
    })
    .await;
    assert!(
        far_cms
            .get_opt("one-root-ca")
            .await
            .expect("read")
            .is_some()
    );

    // Someone else's Secret of the copy's name for a second Machine: never overwritten, and no
    // DataVolume made to read it.
    let planted: Secret =
        serde_json::from_value(json!({"metadata": {"name": "two-root-credentials"},
        "stringData": {"accessKeyId": "theirs"}}))
        .expect("secret");
    let planted = far_secrets
        .create(&PostParams::default(), &planted)
        .await
        .expect("planted");
    create_admitted(&machines(&w.alice, NS), &importing("two"), &op).await;
    let s = status_when(&w.admin, &op, "two", "two's SecretConflict", |s| {
        s.conditions.iter().any(|c| c.reason == "SecretConflict")
    })
    .await;
    let c = (s.conditions.iter()).find(|c| c.reason == "SecretConflict");
    assert!(
        c.is_some_and(|c| c.message.contains("two-root-credentials")),
        "{c:?}"
    );
    let now = far_secrets
        .get("two-root-credentials")
        .await
        .expect("planted");
    assert_eq!(now.resource_version(), planted.resource_version());
    assert_eq!(key_of(&now), Some(b"theirs".to_vec()));
    assert!(far_dvs.get_opt("two-root").await.expect("read").is_none());
    assert!(vm(&w.far_admin, "two").await.is_none());

    // one deleted: its copies go with it; the planted Secret stays.
    let api: Api<Machine> = Api::namespaced(w.alice.clone(), NS);
    api.delete("one", &DeleteParams::default())
        .await
        .expect("delete one");
    until(&op, "one gone with its copies", || async {
        let gone = api.get_opt("one").await.ok()?.is_none()
            && far_secrets
                .get_opt("one-root-credentials")
                .await
                .ok()?
                .is_none()
            && far_cms.get_opt("one-root-ca").await.ok()?.is_none();
        gone.then_some(())
    })
    .await;
    assert!(
        far_secrets
            .get_opt("two-root-credentials")
            .await
            .expect("read")
            .is_some()
    );
    drop(w.remote);
}
