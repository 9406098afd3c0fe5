//! A remote Machine's author is asked what a local one is asked, on the management cluster's
//! RBAC of the Machine's namespace (the remote namespace mirrors it): each right refused
//! without, admitted with.

use crate::access::{machines, rule};
#[allow(unused_imports)]
use crate::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_machines_author_is_asked_what_a_local_one_is() {
    let args = ["--kubevirt-config-probe-interval", "1s"];
    let (mgmt, remote) = planes(Fixture::new().webhook_operator(OP_NS, &args)).await;
    let (admin, op) = (mgmt.admin_client().await, mgmt.replica());
    register(&admin, &remote, "dc1", json!({})).await;
    grant_use(&admin, BOB, "dc1").await;
    let bob = machines(&mgmt.client_of(BOB).await, NS);

    // The root disk's claim would live on dc1, which the webhook cannot see: adopting it is
    // asked about as if it existed there, on team-a here.
    let plain = machine("plain", Some("dc1"), json!({"template": "small"}));
    let adopt = |verb: &str| {
        format!(
            r#"spec.disks[0]: Forbidden: user "bob" cannot {verb} persistentvolumeclaims "plain-root" in namespace "team-a", which this disk would adopt if it exists on cluster dc1"#
        )
    };
    refused(&bob, &plain, op, &[&adopt("update"), &adopt("delete")]).await;
    let claims = rule("", "persistentvolumeclaims", &["update", "delete"]);
    grant_more(&admin, "bob-claims", BOB, vec![claims]).await;
    admitted(&bob, &plain, op).await;

    // A clone of a PVC of the same namespace: CDI's `create datavolumes/source`, named.
    let clone = machine(
        "clone",
        Some("dc1"),
        json!({"template": "small", "disks": [{"name": "root", "source": {"pvc": {"name": "golden"}}}]}),
    );
    let source = r#"user "bob" cannot create datavolumes/source.cdi.kubevirt.io "golden" in namespace "team-a""#;
    refused(&bob, &clone, op, &["spec.disks[0].source.pvc", source]).await;
    let sources = rule("cdi.kubevirt.io", "datavolumes/source", &["create"]);
    grant_more(&admin, "bob-clones", BOB, vec![sources]).await;
    admitted(&bob, &clone, op).await;

    // A credential Secret the importer would send to a URL of bob's choice: not named.
    let import = machine(
        "import",
        Some("dc1"),
        json!({"template": "small", "disks": [{"name": "root", "size": "1Gi", "source": {"http": {
            "url": "https://images.example/a.qcow2", "secretRef": {"name": "creds"}}}}]}),
    );
    let secret = r#"spec.disks[0].source.http.secretRef.name: Forbidden: user "bob" cannot get secrets in namespace "team-a""#;
    refused(&bob, &import, op, &[secret]).await;
    let secrets = rule("", "secrets", &["get"]);
    grant_more(&admin, "bob-secrets", BOB, vec![secrets]).await;
    admitted(&bob, &import, op).await;
}
