//! power_e2e's set-up on top of `tests/aggregated/` (the aggregated API registered through a
//! real kube-apiserver): the operator's KubeVirt rights as `manifests/subresources` grants them
//! and users chosen by the test.

#![allow(dead_code)] // Not every test binary uses every helper.

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};

pub use crate::aggregated::remote::far_machine;
use crate::aggregated::{self, start_fixture};
pub use crate::aggregated::{Env, GROUP, WAIT, machine_path, put_status, put_with, vmi_running};
use crate::support::Fixture;

/// The operator's rights on KubeVirt's subresources, as `manifests/subresources/rbac.yaml` grants
/// them on its own cluster (and the remote-cluster RBAC on a remote one).
pub fn kubevirt_rules() -> Vec<PolicyRule> {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/subresources/rbac.yaml"),
    )
    .expect("manifests/subresources/rbac.yaml");
    let role: ClusterRole = text
        .split("\n---\n")
        .filter_map(|doc| serde_yaml::from_str::<ClusterRole>(doc).ok())
        .find(|r| r.metadata.name.as_deref() == Some("kubevirt-operator-subresources"))
        .expect("the ClusterRole kubevirt-operator-subresources");
    let kubevirt: Vec<_> = role
        .rules
        .unwrap_or_default()
        .into_iter()
        .filter(|r| {
            r.api_groups
                .iter()
                .flatten()
                .any(|g| g.ends_with("kubevirt.io"))
        })
        .collect();
    assert_eq!(
        kubevirt.len(),
        2,
        "KubeVirt's power and console in the manifest"
    );
    kubevirt
}

/// The operator with its aggregated API, registered as the APIService, with the namespaces
/// team-a and team-b and the users and grants `users` adds; its KubeVirt rights those of
/// `manifests/subresources/rbac.yaml`.
pub async fn start(extra: &[&str], users: impl FnOnce(Fixture) -> Fixture) -> Env {
    start_fixture(users(aggregated::teams()), extra, kubevirt_rules()).await
}
