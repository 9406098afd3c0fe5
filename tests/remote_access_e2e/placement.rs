//! Who may place a Machine on which cluster: `use` on the KubevirtConfig by name (the default
//! one included), and a namespace its `namespaceSelector` selects.

use crate::access::{WAIT, machines, rule};
use crate::support::eventually_with;
#[allow(unused_imports)]
use crate::*;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Patch, PatchParams};
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;

const PLACEMENT: &str = "metadata.annotations[vitistack.io/kubevirt-config]";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placing_needs_use_by_name_and_a_selected_namespace() {
    let args = [
        "--kubevirt-config-probe-interval",
        "1s",
        "--default-kubevirt-config",
        "dc1",
    ];
    let (mgmt, remote) = planes(Fixture::new().webhook_operator(OP_NS, &args)).await;
    let (admin, op) = (mgmt.admin_client().await, mgmt.replica());
    register(&admin, &remote, "dc1", json!({})).await;
    // dc2: the same remote cluster, for Machines of namespaces labelled tenant=a only.
    let tenant_a = json!({"namespaceSelector": {"matchLabels": {"tenant": "a"}}});
    register(&admin, &remote, "dc2", tenant_a).await;
    // Every new disk's claim is asked about on a remote cluster (tests/remote_access_e2e/
    // author.rs): granted here, so that only the placement is missing.
    let claims = rule("", "persistentvolumeclaims", &["update", "delete"]);
    grant_more(&admin, "bob-claims", BOB, vec![claims]).await;
    let bob = machines(&mgmt.client_of(BOB).await, NS);

    // No annotation: the default KubevirtConfig, written by the mutating webhook, is asked
    // about like any other.
    let plain = machine("plain", None, json!({"template": "small"}));
    let use_dc1 = format!(
        r#"{PLACEMENT}: Forbidden: user "bob" cannot use kubevirtconfigs.vitistack.io "dc1""#
    );
    refused(&bob, &plain, op, &[&use_dc1]).await;
    grant_use(&admin, BOB, "dc1").await;
    admitted(&bob, &plain, op).await;
    // Placed: made on dc1's cluster.
    let far = Api::<VirtualMachine>::namespaced(remote.admin_client().await, NS);
    eventually_with(
        WAIT,
        "plain's VM on dc1",
        || op.log_tail(60),
        || async { far.get_opt("plain").await.ok().flatten() },
    )
    .await;

    // dc2 does not select team-a: refused whatever the author's rights, naming the config and
    // the namespace.
    let selected = machine("selected", Some("dc2"), json!({"template": "small"}));
    let unselected = r#"KubevirtConfig dc2's namespaceSelector does not select namespace "team-a""#;
    refused(&bob, &selected, op, &[PLACEMENT, unselected]).await;
    // Namespace labels are the admin's: bob cannot label team-a into the selector.
    let label = json!({"metadata": {"labels": {"tenant": "a"}}});
    let by_bob = Api::<Namespace>::all(mgmt.client_of(BOB).await)
        .patch(NS, &PatchParams::default(), &Patch::Merge(&label))
        .await;
    assert!(
        matches!(&by_bob, Err(kube::Error::Api(e)) if e.code == 403),
        "{by_bob:?}"
    );
    // Once the admin labels team-a, `use` is what is missing: the grant on dc1 does not reach
    // dc2.
    Api::<Namespace>::all(admin.clone())
        .patch(NS, &PatchParams::default(), &Patch::Merge(label))
        .await
        .expect("label team-a");
    let use_dc2 = format!(
        r#"{PLACEMENT}: Forbidden: user "bob" cannot use kubevirtconfigs.vitistack.io "dc2""#
    );
    refused(&bob, &selected, op, &[&use_dc2]).await;
    grant_use(&admin, BOB, "dc2").await;
    admitted(&bob, &selected, op).await;
}
