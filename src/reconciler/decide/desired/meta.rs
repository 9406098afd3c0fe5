//! Metadata shared by everything derived from a Machine: names, labels and owner references.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

use crate::api::Machine;
use crate::api::names::{MACHINE_LABEL, MANAGED_BY, MANAGED_BY_LABEL};

/// Labels on every object made for `machine`.
pub fn machine_labels(machine: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
        (MACHINE_LABEL.to_owned(), machine.to_owned()),
    ])
}

/// A controller reference to `owner`, as controller-runtime's SetControllerReference makes it.
/// `None` for an object the API server never saw (it has no uid yet).
pub fn controller_ref<K: Resource<DynamicType = ()>>(owner: &K) -> Option<OwnerReference> {
    let mut r = owner.controller_owner_ref(&())?;
    r.block_owner_deletion = Some(true);
    Some(r)
}

/// Metadata of an object owned by `machine`, in its namespace.
pub fn owned_by_machine(machine: &Machine, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: machine.namespace(),
        labels: Some(machine_labels(&machine.name_any())),
        owner_references: controller_ref(machine).map(|r| vec![r]),
        ..ObjectMeta::default()
    }
}

pub use crate::api::names::pvc_name;

/// Name of the Secret derived for cloud-init user data under a key other than `userdata`.
pub fn derived_secret_name(machine: &str) -> String {
    format!("{machine}-cloudinit")
}
