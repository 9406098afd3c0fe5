//! The reconciler tests' view of the operator: [`Operator`] and its user live in
//! `support::operator` (the fixture starts them); what only these tests read stays here.

// Each test binary uses its own subset of these helpers.
#![allow(dead_code, unused_imports)]

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;

use crate::support::OPERATOR_NAMESPACE;
pub use crate::support::eventually;
pub use crate::support::operator::{
    OPERATOR_USER, Operator, RESYNC, TEST_NETWORKS, install_crds, operator_user,
};

/// The Lease's current holder.
pub async fn lease_holder(client: &Client) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), OPERATOR_NAMESPACE)
        .get_opt(kubevirt_operator::leader::LEASE_NAME)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}
