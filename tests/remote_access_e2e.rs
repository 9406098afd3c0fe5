//! Issue 31 end to end on two real control planes (set up with `support::Fixture`): the
//! management one runs `kubevirt-operator run` and holds the Machines, KubevirtConfigs and their
//! kubeconfig Secrets; the remote one has KubeVirt's and CDI's real CRDs and nothing of ours.
//! Machines are written by `bob`, a non-admin with a client certificate, holding only `get` and
//! `create` on Machines in `team-a` and what each case grants:
//!
//! - `placement`: placing a Machine on a KubevirtConfig (named, or the default) needs `use` on
//!   it by name, and a namespace its `namespaceSelector` selects; refused without, admitted with.
//! - `author`: a remote Machine's author is asked what a local one is asked, against the
//!   management cluster's RBAC of the Machine's namespace: a same-namespace clone, a source's
//!   credential Secret and the claim a new disk would adopt, each refused without the local right
//!   and admitted with it.
//! - `reconciler`: a Machine stored past the webhook in a namespace the selector does not select
//!   gets `ClusterReady=False`, `PlacementForbidden`, and nothing on the remote.
//! - `quotas`: a ResourceQuota of the management namespace bounds the Machines stored there,
//!   not the claims, storage and VMs made on the remote.

mod access;
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::api::{Api, DynamicObject, PostParams};
use kube::{Client, Error};
use serde_json::{Value, json};

use access::WAIT;
use kubevirt_operator::api::KubevirtConfig;
use support::{Fixture, Proc, Started};

const NS: &str = "team-a";
const OP_NS: &str = "access-operator";
const BOB: &str = "bob";

/// The management plane (`mgmt`: every CRD, namespaces `access-operator` and `team-a`, bob with
/// `get` and `create` on Machines in `team-a`, no operator yet) and a remote one with KubeVirt's
/// and CDI's CRDs, started side by side.
async fn planes(mgmt: Fixture) -> (Started, Started) {
    let mgmt = mgmt
        .with_all_crds()
        .namespace(OP_NS)
        .namespace(NS)
        .user(BOB, &["devs"])
        .grant(
            NS,
            BOB,
            vec![access::rule("vitistack.io", "machines", &["get", "create"])],
        );
    tokio::join!(mgmt.start(), Fixture::new().with_fixture_crds().start())
}

/// KubevirtConfig `name` for the `remote` plane (its admin's kubeconfig in a Secret of the
/// operator's namespace), with `extra` spec fields (`namespaceSelector`).
async fn register(admin: &Client, remote: &Started, name: &str, extra: Value) {
    let kubeconfig = remote
        .kubeconfig_yaml(remote.admin(), None)
        .expect("remote kubeconfig");
    let secret_name = format!("{name}-kubeconfig");
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret_name},
        "stringData": {"kubeconfig": kubeconfig}
    }))
    .expect("secret");
    Api::<Secret>::namespaced(admin.clone(), OP_NS)
        .create(&PostParams::default(), &secret)
        .await
        .expect("kubeconfig Secret");
    let mut spec = json!({"kubeconfigSecretRef": secret_name, "secretNamespace": OP_NS});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    let config: KubevirtConfig = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "KubevirtConfig",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("config");
    Api::<KubevirtConfig>::all(admin.clone())
        .create(&PostParams::default(), &config)
        .await
        .expect("KubevirtConfig");
}

/// Machine `name` with `spec`, placed on KubevirtConfig `config` (`None`: the default, which the
/// mutating webhook writes).
fn machine(name: &str, config: Option<&str>, spec: Value) -> DynamicObject {
    let annotations = config.map_or(json!({}), |c| json!({"vitistack.io/kubevirt-config": c}));
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name, "annotations": annotations},
        "spec": spec
    }))
    .expect("machine")
}

/// `use` on KubevirtConfig `config`, granted by name to `user` cluster-wide (the resource is
/// cluster-scoped), as docs/user/remote-clusters.md tells an admin to.
async fn grant_use(admin: &Client, user: &str, config: &str) {
    let rule = PolicyRule {
        api_groups: Some(vec!["vitistack.io".into()]),
        resources: Some(vec!["kubevirtconfigs".into()]),
        resource_names: Some(vec![config.into()]),
        verbs: vec!["use".into()],
        ..Default::default()
    };
    let role = format!("{user}-uses-{config}");
    support::rbac::grant_cluster_role(admin, &role, user, vec![rule]).await;
}

/// Role `role` in `team-a` with `rules`, bound to `user` (one Role per right granted).
async fn grant_more(admin: &Client, role: &str, user: &str, rules: Vec<PolicyRule>) {
    support::rbac::grant_role(admin, NS, role, user, rules).await;
}

/// Creates `obj` as soon as the webhook admits it: a grant made just before reaches the
/// webhook once its remembered verdicts expire (a few seconds). Any other refusal fails.
async fn admitted(api: &Api<DynamicObject>, obj: &DynamicObject, op: &Proc) {
    let deadline = Instant::now() + WAIT;
    loop {
        match api.create(&PostParams::default(), obj).await {
            Ok(_) => return,
            Err(Error::Api(e)) if Instant::now() < deadline && e.code == 403 => {}
            Err(e) => panic!("not admitted: {e}\n{}", op.log_tail(60)),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The webhook's refusal of `obj` (retried until the webhooks are in force); it must contain
/// each of `want`.
async fn refused(api: &Api<DynamicObject>, obj: &DynamicObject, op: &Proc, want: &[&str]) {
    let message = access::first_denial(api, &PostParams::default(), obj, op).await;
    for w in want {
        assert!(message.contains(w), "want {w:?} in: {message}");
    }
}

/// The tests, by subject, in tests/remote_access_e2e/ (still one test binary).
mod remote_access_e2e {
    mod author;
    mod placement;
    mod quotas;
    mod reconciler;
}
