//! The remote cluster's RBAC manifest grants what the operator needs.

use crate::support::Fixture;
#[allow(unused_imports)]
use crate::*;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

/// `manifests/remote-cluster-rbac.yaml`, applied with kubectl: its ServiceAccount may do what
/// docs/user/remote-clusters.md's "RBAC on each remote cluster" lists, and not more (no node
/// deletion, no Secret listing, no
/// clone from a namespace it was not bound in).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_remote_rbac_manifest_grants_what_the_operator_needs() {
    let cp = Fixture::new().start().await;
    let out = cp
        .kubectl()
        .expect("kubectl")
        .args(["apply", "-f"])
        .arg(repo("manifests/remote-cluster-rbac.yaml"))
        .output()
        .expect("kubectl apply");
    assert!(
        out.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let admin = cp.client().await.expect("client");
    let reviews: Api<SubjectAccessReview> = Api::all(admin);
    let may = |group: &str, resource: &str, verb: &str, ns: Option<&str>| {
        let (group, resource, verb) = (group.to_owned(), resource.to_owned(), verb.to_owned());
        let (resource, subresource) = match resource.split_once('/') {
            Some((r, s)) => (r.to_owned(), Some(s.to_owned())),
            None => (resource, None),
        };
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(
                    "system:serviceaccount:kubevirt-operator-remote:kubevirt-operator".into(),
                ),
                groups: Some(vec![
                    "system:serviceaccounts".into(),
                    "system:serviceaccounts:kubevirt-operator-remote".into(),
                    "system:authenticated".into(),
                ]),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(group),
                    resource: Some(resource),
                    subresource,
                    verb: Some(verb),
                    namespace: ns.map(str::to_owned),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let reviews = reviews.clone();
        async move {
            reviews
                .create(&PostParams::default(), &review)
                .await
                .expect("SubjectAccessReview")
                .status
                .is_some_and(|s| s.allowed)
        }
    };
    let rw = ["get", "list", "watch", "create", "patch", "delete"];
    let read = ["get", "list", "watch"];
    let allowed: Vec<(&str, &str, Vec<&str>, Option<&str>)> = vec![
        (
            "kubevirt.io",
            "virtualmachines",
            rw.to_vec(),
            Some("team-a"),
        ),
        (
            "kubevirt.io",
            "virtualmachineinstances",
            vec!["get", "list", "watch", "delete"],
            Some("team-a"),
        ),
        // The power buttons of the aggregated API (src/subresources/), relayed as-is.
        (
            "subresources.kubevirt.io",
            "virtualmachineinstances/pause",
            vec!["update"],
            Some("team-a"),
        ),
        (
            "subresources.kubevirt.io",
            "virtualmachineinstances/unpause",
            vec!["update"],
            Some("team-a"),
        ),
        (
            "subresources.kubevirt.io",
            "virtualmachineinstances/softreboot",
            vec!["update"],
            Some("team-a"),
        ),
        // machines/stop with a grace period: KubeVirt's stop of the VM.
        (
            "subresources.kubevirt.io",
            "virtualmachines/stop",
            vec!["update"],
            Some("team-a"),
        ),
        // The consoles, KubeVirt's streams (GET).
        (
            "subresources.kubevirt.io",
            "virtualmachineinstances/console",
            vec!["get"],
            Some("team-a"),
        ),
        (
            "subresources.kubevirt.io",
            "virtualmachineinstances/vnc",
            vec!["get"],
            Some("team-a"),
        ),
        ("", "persistentvolumeclaims", rw.to_vec(), Some("team-a")),
        (
            "cdi.kubevirt.io",
            "datavolumes",
            rw.to_vec(),
            Some("team-a"),
        ),
        (
            "k8s.cni.cncf.io",
            "network-attachment-definitions",
            rw.to_vec(),
            Some("team-a"),
        ),
        (
            "",
            "secrets",
            vec!["get", "create", "patch", "delete"],
            Some("team-a"),
        ),
        // Issue 31: the copies of disk sources' CA ConfigMaps.
        (
            "",
            "configmaps",
            vec!["get", "create", "patch", "delete"],
            Some("team-a"),
        ),
        (
            "",
            "namespaces",
            vec!["create", "get", "list", "watch", "patch"],
            None,
        ),
        ("storage.k8s.io", "storageclasses", read.to_vec(), None),
        ("cdi.kubevirt.io", "storageprofiles", read.to_vec(), None),
        // Issue 35: KubeVirt's install resource, for disk hot-plug.
        ("kubevirt.io", "kubevirts", vec!["list", "watch"], None),
        // Issue 31: a remote Machine's DataSources, read by name.
        (
            "cdi.kubevirt.io",
            "datasources",
            vec!["get"],
            Some("team-a"),
        ),
        // Issue 33: Nodes' Ready condition, for NodeUnreachable.
        ("", "nodes", vec!["list", "watch"], None),
        ("events.k8s.io", "events", vec!["create"], Some("team-a")),
        // Issue 31: a remote Machine's snapshots and restores, and a restore's consumer Pod.
        (
            "snapshot.kubevirt.io",
            "virtualmachinesnapshots",
            vec!["get", "create", "delete"],
            Some("team-a"),
        ),
        (
            "snapshot.kubevirt.io",
            "virtualmachinerestores",
            vec!["get", "create", "delete"],
            Some("team-a"),
        ),
        ("", "pods", vec!["get", "create", "delete"], Some("team-a")),
    ];
    for (group, resource, verbs, ns) in allowed {
        for verb in verbs {
            assert!(
                may(group, resource, verb, ns).await,
                "{verb} {group}/{resource} in {ns:?} must be allowed"
            );
        }
    }
    let refused = [
        ("", "nodes", "delete", None),
        ("", "nodes", "patch", None),
        ("", "nodes", "get", None),
        ("", "namespaces", "delete", None),
        ("", "secrets", "list", Some("team-a")),
        ("", "configmaps", "list", Some("team-a")),
        ("cdi.kubevirt.io", "datasources", "list", Some("team-a")),
        ("", "pods", "list", Some("team-a")),
        ("", "pods/exec", "create", Some("team-a")),
        (
            "kubevirt.io",
            "virtualmachineinstances",
            "create",
            Some("team-a"),
        ),
        // Only the subresources relayed: the consoles only opened (get), no other one.
        (
            "subresources.kubevirt.io",
            "virtualmachineinstances/console",
            "update",
            Some("team-a"),
        ),
        (
            "subresources.kubevirt.io",
            "virtualmachineinstances/vnc",
            "create",
            Some("team-a"),
        ),
        (
            "subresources.kubevirt.io",
            "virtualmachineinstances/freeze",
            "update",
            Some("team-a"),
        ),
        // start and restart are the reconciler's (the Machine's records), not KubeVirt's.
        (
            "subresources.kubevirt.io",
            "virtualmachines/start",
            "update",
            Some("team-a"),
        ),
        (
            "subresources.kubevirt.io",
            "virtualmachines/restart",
            "update",
            Some("team-a"),
        ),
        ("rbac.authorization.k8s.io", "clusterroles", "create", None),
        (
            "cdi.kubevirt.io",
            "datavolumes/source",
            "create",
            Some("os-images"),
        ),
    ];
    for (group, resource, verb, ns) in refused {
        assert!(
            !may(group, resource, verb, ns).await,
            "{verb} {group}/{resource} in {ns:?} must be refused"
        );
    }
}
