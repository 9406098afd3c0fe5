//! A remote Machine's `dataSource` clone uses the DataSource of its own cluster: the webhook
//! asks its author CDI's clone right on the management cluster's RBAC of the namespace (the
//! mirror model) without resolving anything there; the leader resolves the DataSource on the
//! remote cluster, in the namespace named like the Machine's, and writes what it points to into
//! the DataVolume it makes there. One present only on the management cluster is never used; a
//! missing, unready or cross-namespace one (without `allowCrossNamespaceClones`) makes nothing
//! and says why, naming the field.

use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::api::{PostParams, ResourceExt};
use kube::{Client, Error};
use kubevirt_operator::api::MachineStatus;
use kubevirt_operator::api::names::CLONE_SOURCES_ANNOTATION;
use kubevirt_operator::reconciler::apis::cdi::DataVolume;
use serde_json::{Value, json};

use crate::access::{WAIT, first_denial, machines, rule};
use crate::support::Proc;
use crate::{NS, USER, condition, on_dc1, start, status_when, until, vm, world};

fn data_sources(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("cdi.kubevirt.io", "v1beta1", "DataSource");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "datasources");
    Api::namespaced_with(client.clone(), NS, &resource)
}

/// DataSource `name` in team-a pointing at PVC `pvc` (`namespace/name`), Ready as CDI says it
/// when `ready` (the CRD has no status subresource: CDI writes it with the object).
fn data_source(name: &str, pvc: (&str, &str), ready: bool) -> DynamicObject {
    let status = if ready { "True" } else { "False" };
    serde_json::from_value(json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataSource",
        "metadata": {"name": name},
        "spec": {"source": {"pvc": {"namespace": pvc.0, "name": pvc.1}}},
        "status": {"conditions": [{"type": "Ready", "status": status, "reason": "Played"}]}
    }))
    .expect("DataSource")
}

/// A Machine on dc1 whose root disk clones through DataSource `ds`.
fn cloning(name: &str, ds: &str) -> DynamicObject {
    on_dc1(
        name,
        json!({"template": "small", "disks": [{"name": "root", "source": {"dataSource": {"name": ds}}}]}),
    )
}

/// Creates `obj` as alice once the webhook admits it: a grant made just before reaches the
/// webhook once its remembered verdicts expire (a few seconds). Any other refusal fails.
async fn admitted(api: &Api<DynamicObject>, obj: &DynamicObject, op: &Proc) -> DynamicObject {
    let deadline = Instant::now() + WAIT;
    loop {
        match api.create(&PostParams::default(), obj).await {
            Ok(created) => return created,
            Err(Error::Api(e)) if Instant::now() < deadline && e.code == 403 => {}
            Err(Error::Api(e))
                if e.message.contains("failed calling webhook") && Instant::now() < deadline => {}
            Err(e) => panic!("not admitted: {e}\n{}", op.log_tail(60)),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// StorageReady False with `reason`, its message containing each of `want`.
async fn storage_says(admin: &Client, op: &Proc, name: &str, reason: &str, want: &[&str]) {
    let has = |s: &MachineStatus| {
        condition(s, "StorageReady").is_some_and(|(st, r, _)| st == "False" && r == reason)
    };
    let s = status_when(admin, op, name, reason, has).await;
    let (_, _, message) = condition(&s, "StorageReady").expect("StorageReady");
    for w in want {
        assert!(message.contains(w), "want {w:?} in {message:?}");
    }
}

/// The source of DataVolume `name` on the remote cluster, once it exists.
async fn remote_source(far_dvs: &Api<DataVolume>, op: &Proc, name: &str) -> Value {
    let dv = until(op, &format!("{name}'s DataVolume on dc1"), || async {
        far_dvs.get_opt(name).await.ok().flatten()
    })
    .await;
    serde_json::to_value(&dv.spec.source).expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_machines_data_source_is_resolved_and_cloned_on_its_cluster() {
    let w = world().await;
    // On the management cluster only: a DataSource the remote cluster does not have.
    let near = data_sources(&w.admin);
    (near.create(
        &PostParams::default(),
        &data_source("near-only", (NS, "payroll"), true),
    ))
    .await
    .expect("management DataSource");
    let op = start(&w.mgmt, &[]).await;
    let alice = machines(&w.alice, NS);

    // Without CDI's clone right in team-a (asked here, the mirror model), alice is refused,
    // though no DataSource `golden` exists on this cluster to resolve.
    let far = cloning("far", "golden");
    let message = first_denial(&alice, &PostParams::default(), &far, &op).await;
    let want = r#"spec.disks[0].source.dataSource.name: Forbidden: user "alice" cannot create datavolumes/source.cdi.kubevirt.io in namespace "team-a""#;
    assert!(message.contains(want), "want {want:?} in {message:?}");
    let clone = rule("cdi.kubevirt.io", "datavolumes/source", &["create"]);
    crate::support::rbac::grant_role(&w.admin, NS, "alice-clones", USER, vec![clone]).await;
    admitted(&alice, &far, &op).await;

    // Resolved on dc1, where it is missing yet: nothing made, the field named.
    let field = "spec.disks[0].source.dataSource";
    storage_says(
        &w.admin,
        &op,
        "far",
        "DataSourceNotFound",
        &[field, "golden", "dc1"],
    )
    .await;
    let far_dvs = Api::<DataVolume>::namespaced(w.far_admin.clone(), NS);
    assert!(far_dvs.get_opt("far-root").await.expect("read").is_none());
    assert!(vm(&w.far_admin, "far").await.is_none());

    // Made on dc1 (in the namespace the operator made there), not Ready yet: still nothing.
    let far_sources = data_sources(&w.far_admin);
    let golden = data_source("golden", (NS, "far-image"), false);
    (far_sources.create(&PostParams::default(), &golden))
        .await
        .expect("remote DataSource");
    storage_says(
        &w.admin,
        &op,
        "far",
        "DataSourceNotReady",
        &[field, "golden"],
    )
    .await;
    assert!(far_dvs.get_opt("far-root").await.expect("read").is_none());

    // Ready: the DataVolume there clones the PVC it points to, on dc1.
    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Played"}]}});
    (far_sources.patch("golden", &PatchParams::default(), &Patch::Merge(ready)))
        .await
        .expect("Ready");
    let source = remote_source(&far_dvs, &op, "far-root").await;
    assert_eq!(
        source,
        json!({"pvc": {"namespace": NS, "name": "far-image"}}),
        "{source}"
    );

    // Present on the management cluster only: never used for a remote Machine, and a pin
    // written by hand is removed by the webhook.
    let mut near_machine = cloning("near", "near-only");
    let pin = json!({"root": {"pvc": {"namespace": NS, "name": "payroll"}}}).to_string();
    near_machine
        .annotations_mut()
        .insert(CLONE_SOURCES_ANNOTATION.into(), pin);
    let stored = admitted(&alice, &near_machine, &op).await;
    assert!(
        !stored.annotations().contains_key(CLONE_SOURCES_ANNOTATION),
        "{:?}",
        stored.annotations()
    );
    storage_says(
        &w.admin,
        &op,
        "near",
        "DataSourceNotFound",
        &[field, "near-only"],
    )
    .await;
    assert!(far_dvs.get_opt("near-root").await.expect("read").is_none());

    // On dc1, pointing at another namespace, which dc1 does not allow: nothing made.
    let elsewhere = data_source("elsewhere", ("os-images", "base"), true);
    (far_sources.create(&PostParams::default(), &elsewhere))
        .await
        .expect("cross-namespace DataSource");
    admitted(&alice, &cloning("cross", "elsewhere"), &op).await;
    let why = ["os-images", "allowCrossNamespaceClones", field];
    storage_says(&w.admin, &op, "cross", "CrossNamespaceCloneForbidden", &why).await;
    assert!(far_dvs.get_opt("cross-root").await.expect("read").is_none());
}
